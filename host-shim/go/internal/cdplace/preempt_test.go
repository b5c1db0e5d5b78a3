package cdplace

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// A low-priority domain of 3 fills clique u.1 (4 trays); a high-priority domain of 4 gets it by
// evicting the whole low domain, and a domain of 5 would not fit even the empty clique.
func TestPreemptThroughTheLibrary(t *testing.T) {
	c := newTestCluster(t, "")
	var b Batch
	for i := 0; i < 4; i++ {
		b.Add(AppendNode(nil, &facts.Node{Name: fmt.Sprintf("a-%d", i), CliqueLabel: some("u.1"), GPUs: 4}))
	}
	for _, cd := range []struct {
		name string
		size uint32
	}{{"low", 3}, {"high", 4}, {"huge", 5}} {
		uid := "uid-" + cd.name
		b.Add(AppendDomain(nil, &facts.Domain{Namespace: "ns", Name: cd.name, UID: uid, SizeHint: some(cd.size)}))
		b.Add(AppendTemplate(nil, &facts.Template{Namespace: "ns", Name: cd.name + "-channel", Domain: some(uid)}))
	}
	claims := func(cd string) []facts.PodClaim {
		return []facts.PodClaim{{Name: "channel", Template: some(cd + "-channel")}}
	}
	for i := 0; i < 3; i++ {
		b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: fmt.Sprintf("low-%d", i), NodeName: some(fmt.Sprintf("a-%d", i)), Claims: claims("low"), GPUs: 4, Priority: 1}))
	}
	b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "high-0", Claims: claims("high"), GPUs: 4, Priority: 100}))
	b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "huge-0", Claims: claims("huge"), GPUs: 4, Priority: 100}))
	b.Add(AppendPod(nil, &facts.Pod{Namespace: "ns", Name: "web", GPUs: 0}))
	if err := c.ApplyFacts(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	before := c.Crossings()
	pr, err := c.Preempt("ns", "high-0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Crossings() != before+1 {
		t.Fatalf("one call: %d crossings", c.Crossings()-before)
	}
	if pr.Domain != "uid-high" || pr.Plan == nil {
		t.Fatalf("a plan for high: %+v", pr)
	}
	p := pr.Plan
	if p.Clique != "u.1" || p.Node != "a-3" || !slices.Equal(p.Pods, []string{"ns/low-0", "ns/low-1", "ns/low-2"}) ||
		!slices.Equal(p.Domains, []string{"uid-low"}) || p.GPUs != 12 || p.Priority != 1 || p.Trays != 3 {
		t.Fatalf("plan %+v", p)
	}
	// The view is unchanged: the same question gets the same answer.
	if again, err := c.Preempt("ns", "high-0"); err != nil || !slices.Equal(again.Plan.Pods, p.Pods) {
		t.Fatalf("again: %+v %v", again, err)
	}
	if pr, err := c.Preempt("ns", "huge-0"); err != nil || pr.Plan != nil || !strings.Contains(pr.Reason, "gang preemption makes room in one clique only") {
		t.Fatalf("huge: %+v %v", pr, err)
	}
	if pr, err := c.Preempt("ns", "web"); err != nil || pr.Plan != nil || pr.Domain != "" || !strings.Contains(pr.Reason, "not a ComputeDomain") {
		t.Fatalf("web: %+v %v", pr, err)
	}
	if _, err := c.Preempt("ns", "ghost"); !errors.Is(err, ErrUnknownPod) {
		t.Fatalf("ghost: %v", err)
	}
}
