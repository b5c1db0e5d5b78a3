package computedomain

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
)

// testComponentPath is the path of a test-only policy component `make guest` builds.
func testComponentPath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs("../../../../target/wasm32-wasip2/guest/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the test component %s is built by `make guest`: %v", name, err)
	}
	return p
}

// A policy that allows every node to every pod (the test-only violator component, at guestPath)
// never gets a ComputeDomain pod onto a node of another domain: the library refuses its answer,
// the pod gets an Error status naming the rule, the node and the other domain, the counter
// cdplace_policy_violations_total{rule} moves, and the pod gets a Warning Event PolicyViolation.
// A pod whose answer breaks no rule is let through: the checker is no stricter than the rules.
func TestAViolatingPolicyNeverPutsAComputeDomainPodOnAnotherDomainsNode(t *testing.T) {
	old, second := boundTo(cdPod("old", "old-0"), "a-01"), cdPod("new", "new-0")
	own := cdPod("own", "own-0")
	objs := []runtime.Object{channelTemplate("old", "uid-old"), channelTemplate("new", "uid-new"), channelTemplate("own", "uid-own"), old, second, own}
	cds := []*unstructured.Unstructured{computeDomain("old", "uid-old", 2), computeDomain("new", "uid-new", 1), computeDomain("own", "uid-own", 1)}
	e := newEnv(t, `{"guestPath":`+strconv.Quote(testComponentPath(t, "cdplace_test_violator.wasm"))+`}`, rack("a", 1, 4), cds, objs...)
	e.events.Verbose = true
	counter := func() float64 {
		v, _ := testutil.GetCounterMetricValue(policyViolations.WithLabelValues("one-domain-per-node"))
		return v
	}
	before := counter()

	r := e.schedule(second)
	want := "policy violation: rule one-domain-per-node: ComputeDomain pod team-a/new-0 (ComputeDomain team-a/new (UID uid-new)) allowed onto node a-01, which holds pod team-a/old-0 of ComputeDomain team-a/old (UID uid-old)"
	if r.preFilter.Code() != fwk.Error || !strings.Contains(r.preFilter.Message(), want) {
		t.Fatalf("PreFilter: %v %q, want Error containing %q", r.preFilter.Code(), r.preFilter.Message(), want)
	}
	if len(r.filter) != 0 || r.allowed != nil {
		t.Fatalf("a refused answer still lets nodes through: filter %v, node set %v", r.filter, r.allowed)
	}
	if got := counter() - before; got != 1 {
		t.Errorf("cdplace_policy_violations_total{rule=one-domain-per-node} moved by %v, want 1", got)
	}
	if s, err := e.plugin.Cluster().Stats(); err != nil || s.PolicyViolations != 1 {
		t.Fatalf("stats %+v %v", s, err)
	}
	var warnings []string
	for len(e.events.Events) > 0 {
		if ev := <-e.events.Events; strings.HasPrefix(ev, "Warning "+eventPolicyViolation+" ") {
			warnings = append(warnings, ev)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], want) || !strings.Contains(warnings[0], "new-0") {
		t.Fatalf("PolicyViolation events %q", warnings)
	}

	// The checker is no stricter than the rules: once `old` is gone, allowing every node breaks
	// none for a pod of a domain with nothing placed, and every node passes Filter.
	if r := e.schedule(own); r.preFilter.Code() != fwk.Error {
		t.Fatalf("own-0 while old-0 holds a-01: %v", r.preFilter)
	}
	e.plugin.feed.deletePod(old.Namespace, old.Name, old.UID)
	if err := e.plugin.feed.flush(); err != nil {
		t.Fatal(err)
	}
	r = e.schedule(own)
	if !r.preFilter.IsSuccess() || len(r.filter) != 4 {
		t.Fatalf("own-0 with every node free: %v, filter %v", r.preFilter, r.filter)
	}
	for node, st := range r.filter {
		if !st.IsSuccess() {
			t.Errorf("Filter(%s): %v", node, st)
		}
	}
}
