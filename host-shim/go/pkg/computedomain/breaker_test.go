package computedomain

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
)

// Repeated guest failures open the breaker: ComputeDomain pods get Unschedulable at once with
// the reason (no call is made), plain pods are not held up, and after the open time the
// breaker half-opens and the next success closes it. The faulty component traps in pre-filter
// on pods whose name starts with "trap" and skips every other pod.
func TestRepeatedGuestFailuresOpenTheBreakerForComputeDomainPodsOnly(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	setTimeNow(func() time.Time { return now })
	t.Cleanup(func() { setTimeNow(nil) })

	trap, good := cdPod("cd", "trap-0"), cdPod("cd", "p")
	plain := makePod("plain", "", 0)
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), trap, good, plain}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}
	e := newEnv(t, `{"guestPath":`+strconv.Quote(faultyGuest(t))+`}`, rack("a", 1, 2), cds, objs...)
	calls := func() float64 {
		v, _ := testutil.GetHistogramMetricCount(policyCallDuration.WithLabelValues(callPreFilter))
		return float64(v)
	}

	for i := 0; i < breakerFailures; i++ {
		if st := e.schedule(trap).preFilter; st.Code() != fwk.Error || !strings.Contains(st.Message(), "policy guest trapped") {
			t.Fatalf("failure %d: %v", i, st)
		}
	}
	if v, _ := testutil.GetGaugeMetricValue(breakerOpen); v != 1 {
		t.Errorf("cdplace_breaker_open %v, want 1", v)
	}
	before := calls()
	st := e.schedule(good).preFilter
	wantReason := "cdplace policy breaker open after 5 guest failures (last: policy guest trapped: unreachable executed (the guest panicked)"
	if st.Code() != fwk.Unschedulable || !strings.HasPrefix(st.Message(), wantReason) || !strings.HasSuffix(st.Message(), "retrying at 2026-12-02T04:00:30Z") {
		t.Fatalf("open breaker: %v %q", st.Code(), st.Message())
	}
	if calls() != before {
		t.Error("an open breaker still calls the policy")
	}
	if r := e.schedule(plain); !r.preFilter.IsSuccess() {
		t.Fatalf("a plain pod is held up by the breaker: %v", r.preFilter)
	}

	// Half-open after the open time: a failure reopens it at once.
	now = now.Add(breakerOpenFor)
	if st := e.schedule(trap).preFilter; st.Code() != fwk.Error {
		t.Fatalf("half-open: %v", st)
	}
	if st := e.schedule(good).preFilter; st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), "after 6 guest failures") {
		t.Fatalf("reopened: %v", st)
	}
	// Half-open again: a success closes it.
	now = now.Add(breakerOpenFor)
	if r := e.schedule(good); !r.skipped {
		t.Fatalf("half-open, a good pod: %v", r.preFilter)
	}
	if r := e.schedule(good); !r.skipped {
		t.Fatalf("closed: %v", r.preFilter)
	}
	if v, _ := testutil.GetGaugeMetricValue(breakerOpen); v != 0 {
		t.Errorf("cdplace_breaker_open %v, want 0", v)
	}
}
