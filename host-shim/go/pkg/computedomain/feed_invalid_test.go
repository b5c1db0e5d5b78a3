package computedomain

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
)

// invalidEvents drains the recorder and returns the InvalidFacts Events it held.
func (e *env) invalidEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.events.Events:
			if strings.Contains(ev, " InvalidFacts ") {
				out = append(out, ev)
			}
		case <-time.After(100 * time.Millisecond):
			return out
		}
	}
}

// An update of a bound pod that fails to parse (its size annotation turns invalid) removes its
// facts and fails its domain closed: the domain's other pods get a reason naming the object and
// the field, not a decision on a view without the pod; one Warning Event InvalidFacts goes on the
// pod per change, not per redelivery. Fixing the object lifts it.
func TestAnUpdateThatFailsToParseFailsItsDomainClosed(t *testing.T) {
	p0 := boundTo(cdPod("cd", "p0"), "a-00")
	p1 := cdPod("cd", "p1")
	other := cdPod("other", "o0")
	e := newEnv(t, "", rack("a", 1, 4), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2), computeDomain("other", "uid-other", 1)},
		channelTemplate("cd", "uid-cd"), channelTemplate("other", "uid-other"), p0, p1, other)
	var mu sync.Mutex
	var woken []nsName
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(k []nsName) { mu.Lock(); woken = append(woken, k...); mu.Unlock() }
	e.plugin.feed.mu.Unlock()
	e.apply()
	wantCode(t, "p1 before", e.schedule(p1).preFilter, fwk.Success, "")
	e.invalidEvents()

	bad := p0.DeepCopy()
	bad.Annotations = map[string]string{"cdplace.nvidia.com/size": "two"}
	e.apply(bad)
	e.apply(bad.DeepCopy()) // a resync redelivers it: no second Event
	if e.plugin.feed.podInView(ns, "p0") {
		t.Fatal("the invalid pod's facts must leave the view")
	}
	r := e.schedule(p1)
	wantCode(t, "p1 while p0 is invalid", r.preFilter, fwk.UnschedulableAndUnresolvable,
		`Pod team-a/p0: annotation cdplace.nvidia.com/size="two" must be a positive integer (field metadata.annotations[cdplace.nvidia.com/size])`)
	wantCode(t, "p1 names its domain", r.preFilter, fwk.UnschedulableAndUnresolvable, "ComputeDomain uid-cd")
	wantCode(t, "a pod of another domain", e.schedule(other).preFilter, fwk.Success, "")
	evs := e.invalidEvents()
	if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning InvalidFacts ") || !strings.Contains(evs[0], "metadata.annotations[cdplace.nvidia.com/size]") {
		t.Fatalf("want one Warning InvalidFacts Event naming the field, got %q", evs)
	}

	// Another change that still fails is another Event.
	worse := bad.DeepCopy()
	worse.Annotations["cdplace.nvidia.com/size"] = "0"
	e.apply(worse)
	if evs := e.invalidEvents(); len(evs) != 1 || !strings.Contains(evs[0], `"0"`) {
		t.Fatalf("a new failing change: want one Event, got %q", evs)
	}

	// Fixed: the domain's rejected pods are woken and decided again.
	e.apply(p0.DeepCopy())
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(woken, nsName{ns, "p1"}) })
	wantCode(t, "p1 after the fix", e.schedule(p1).preFilter, fwk.Success, "")
}

// A ComputeDomain whose update fails to parse fails its own pods closed.
func TestAnInvalidComputeDomainFailsItsPodsClosed(t *testing.T) {
	p0 := cdPod("cd", "p0")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}, channelTemplate("cd", "uid-cd"), p0)
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func([]nsName) {}
	e.plugin.feed.mu.Unlock()
	e.apply()
	wantCode(t, "p0 before", e.schedule(p0).preFilter, fwk.Success, "")
	bad := computeDomain("cd", "uid-cd", 2)
	if err := unstructured.SetNestedField(bad.Object, "six", "spec", "numNodes"); err != nil {
		t.Fatal(err)
	}
	e.apply(bad)
	wantCode(t, "p0 of an invalid domain", e.schedule(p0).preFilter, fwk.UnschedulableAndUnresolvable,
		`ComputeDomain team-a/cd: spec.numNodes must be a non-negative integer, got "six" (field spec.numNodes)`)
	if evs := e.invalidEvents(); len(evs) != 1 {
		t.Fatalf("want one InvalidFacts Event, got %q", evs)
	}
	e.apply(computeDomain("cd", "uid-cd", 2))
	wantCode(t, "p0 after the fix", e.schedule(p0).preFilter, fwk.Success, "")
}

// A channel template whose update fails to parse: its pods cannot be classified, so they fail
// closed with its reason (not let through as plain pods), and are woken when it is fixed.
func TestAnInvalidTemplateFailsItsPodsClosed(t *testing.T) {
	p0 := cdPod("cd", "p0")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}, channelTemplate("cd", "uid-cd"), p0)
	var mu sync.Mutex
	var woken []nsName
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(k []nsName) { mu.Lock(); woken = append(woken, k...); mu.Unlock() }
	e.plugin.feed.mu.Unlock()
	e.apply()
	wantCode(t, "p0 before", e.schedule(p0).preFilter, fwk.Success, "")
	// Through the API, so that the scheduler's listers hold the invalid version too.
	templates := e.client.ResourceV1().ResourceClaimTemplates(ns)
	bad := channelTemplate("cd", "uid-cd")
	bad.Spec.Spec.Devices.Config[0].Opaque.Parameters.Raw = []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig"}`)
	if _, err := templates.Update(e.ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, _, invalid := e.plugin.feed.invalidClaimOf(p0); return invalid })
	wantCode(t, "p0 of an invalid template", e.schedule(p0).preFilter, fwk.UnschedulableAndUnresolvable,
		"ResourceClaimTemplate team-a/cd-channel: opaque config of driver compute-domain.nvidia.com has no domainID")
	if evs := e.invalidEvents(); len(evs) != 1 {
		t.Fatalf("want one InvalidFacts Event, got %q", evs)
	}
	if _, err := templates.Update(e.ctx, channelTemplate("cd", "uid-cd"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return slices.Contains(woken, nsName{ns, "p0"}) })
	e.apply()
	wantCode(t, "p0 after the fix", e.schedule(p0).preFilter, fwk.Success, "")
}
