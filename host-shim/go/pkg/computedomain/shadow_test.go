package computedomain

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
)

// shadowEvents drains the recorder and returns the ShadowDiverged Events it held.
func (e *env) shadowEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			if strings.Contains(ev, " "+shadowDivergedReason+" ") {
				out = append(out, ev)
			}
		case <-time.After(100 * time.Millisecond):
			return out
		}
	}
}

// A worst-fit shadow policy beside the shipped best fit: the live placement is the shipped
// policy's (clique a), the shadow's other clique is counted and said once on the domain with both
// answers, and replacing the shadow's file with the shipped policy turns it into agreement.
func TestAShadowPolicyReportsWhereItDivergesAndDecidesNothing(t *testing.T) {
	oldPoll, oldIdle, oldEvery := policyPollInterval, shadowIdle, shadowReportEvery
	policyPollInterval, shadowIdle, shadowReportEvery = 20*time.Millisecond, 5*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { policyPollInterval, shadowIdle, shadowReportEvery = oldPoll, oldIdle, oldEvery })
	worst := testComponent(t, "cdplace_guest_worstfit.wasm")
	path := filepath.Join(t.TempDir(), "shadow.wasm")
	replaceFile(t, path, worst)

	// Clique a has 2 trays, b has 4: a domain of 2 fits both; best fit prefers a, worst fit b.
	pod := cdPod("cd", "p0")
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), pod}
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}
	nodes := append(rack("a", 1, 2), rack("b", 2, 4)...)
	e := newEnv(t, `{"shadowPolicy":{"source":"file","path":`+strconv.Quote(path)+`}}`, nodes, cds, objs...)
	waitFor(t, func() bool { d, _ := e.plugin.Shadow(); return d == digestOf(worst) })
	if _, g := e.plugin.Policy(); g != 1 {
		t.Fatalf("a shadow is not a swap: live generation %d", g)
	}
	other, _ := testutil.GetCounterMetricValue(shadowDecisions.WithLabelValues("other-clique"))
	if c, g := preferred(t, e, pod); c != "a" || g != 1 {
		t.Fatalf("the live best fit decides: clique %s, generation %d", c, g)
	}
	waitFor(t, func() bool {
		v, _ := testutil.GetCounterMetricValue(shadowDecisions.WithLabelValues("other-clique"))
		return v > other
	})
	evs := e.shadowEvents()
	if len(evs) != 1 {
		t.Fatalf("one ShadowDiverged Event, got %q", evs)
	}
	for _, want := range []string{"other-clique for pod team-a/p0", "live (generation 1): clique " + clique(1), "shadow: clique " + clique(2)} {
		if !strings.Contains(evs[0], want) {
			t.Errorf("the Event %q does not say %q", evs[0], want)
		}
	}
	if v, _ := testutil.GetCounterMetricValue(shadowSeconds); v <= 0 {
		t.Errorf("cdplace_shadow_seconds_total %v: the shadow's time is counted", v)
	}

	// The shipped policy as the shadow agrees; the live answer is still clique a.
	agree, _ := testutil.GetCounterMetricValue(shadowDecisions.WithLabelValues("agree"))
	replaceFile(t, path, testComponent(t, "cdplace_guest.wasm"))
	waitFor(t, func() bool { _, g := e.plugin.Shadow(); return g == 2 })
	// The plugin reuses a decision while the view is unchanged (a shadow changes no live answer,
	// so setting one does not drop them); a new view version makes it ask the library, and so
	// the shadow, again.
	e.plugin.feed.bump()
	if c, _ := preferred(t, e, pod); c != "a" {
		t.Fatalf("the live best fit decides: clique %s", c)
	}
	waitFor(t, func() bool {
		v, _ := testutil.GetCounterMetricValue(shadowDecisions.WithLabelValues("agree"))
		return v > agree
	})
	if evs := e.shadowEvents(); len(evs) != 0 {
		t.Fatalf("an agreeing shadow says nothing: %q", evs)
	}
}

// shadowPolicy is validated like policy, under its own path.
func TestShadowPolicyArgsAreValidated(t *testing.T) {
	src, shadow, rest, errs := parseSources([]byte(`{"shadowPolicy":{"source":"file","path":"/s.wasm"},"wholeTray":"Off"}`))
	if len(errs) != 0 || src.Source != policyEmbedded || shadow == nil || shadow.Path != "/s.wasm" || string(rest) != `{"wholeTray":"Off"}` {
		t.Fatalf("%+v %+v %s %v", src, shadow, rest, errs)
	}
	_, shadow, _, errs = parseSources([]byte(`{}`))
	if len(errs) != 0 || shadow != nil {
		t.Fatalf("no shadow by default: %+v %v", shadow, errs)
	}
	_, _, _, errs = parseSources([]byte(`{"shadowPolicy":{"source":"file","path":"s.wasm"}}`))
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "shadowPolicy.path: Invalid value: \"s.wasm\": must be an absolute path") {
		t.Fatalf("%v", errs)
	}
}
