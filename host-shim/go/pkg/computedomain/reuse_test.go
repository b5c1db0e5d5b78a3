package computedomain

import (
	"fmt"
	"testing"
	"time"
)

// Answers that can no longer be returned are not kept: after a churn of distinct questions
// (one per finished domain), the cache holds only the questions of the last reuseMaxAge.
func TestAnswersOlderThanTheirAgeAreDropped(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	a := newAnswers[string](func() time.Time { return now })
	for i := range 500 {
		a.put(fmt.Sprintf("domain-%d", i), 1, "refused")
		now = now.Add(100 * time.Millisecond)
	}
	// 500 questions over 50 s: only those of the last second or two can still be answered.
	if n := len(a.m); n > 2*int(reuseMaxAge/(100*time.Millisecond))+1 {
		t.Fatalf("the cache holds %d answers after 50 s of distinct questions; want only the last ~%v's", n, 2*reuseMaxAge)
	}
	// A fresh answer is still reused.
	a.put("domain-last", 7, "refused")
	if got, ok := a.get("domain-last", 7); !ok || got != "refused" {
		t.Fatalf("get(fresh) = %q, %v; want the answer just put", got, ok)
	}
	// And one past its age is not, whether or not a sweep has run.
	now = now.Add(reuseMaxAge)
	if _, ok := a.get("domain-last", 7); ok {
		t.Fatal("an answer older than reuseMaxAge was reused")
	}
}
