package computedomain

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
)

// hintFor is the registered QueueingHint of the first event on resource with an action in
// actions (the wrapped one, as the scheduler calls it).
func hintFor(t *testing.T, p *Plugin, resource fwk.EventResource, actions fwk.ActionType) fwk.QueueingHintFn {
	t.Helper()
	events, err := p.EventsToRegister(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Event.Resource == resource && ev.Event.ActionType&actions != 0 {
			return ev.QueueingHintFn
		}
	}
	t.Fatalf("no hint registered for %s %v", resource, actions)
	return nil
}

// The scheduler's QueueingHint and the feed are two handlers of one informer with no order
// between them. A pod queued by the event that frees its tray (here the last stale driver label
// removed) is decided on a view that has the event, even when the feed's own handler has not
// run yet: the informer's store has it, and the hint marked it for the feed to catch up on.
func TestAPodQueuedByAHintIsDecidedOnAViewWithTheEvent(t *testing.T) {
	nodes := rack("a", 1, 2)
	for i, n := range nodes {
		n.UID = types.UID("uid-node-" + n.Name)
		n.ResourceVersion = "10"
		n.Labels[DomainLabel] = "uid-gone"
		nodes[i] = n
	}
	p := cdPod("mine", "p")
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("mine", "uid-mine", 1)},
		channelTemplate("mine", "uid-mine"), p)
	r := e.schedule(p)
	if r.preFilter.IsSuccess() && r.filter["a-00"].IsSuccess() {
		t.Fatal("a tray carrying another domain's driver label must not take the pod")
	}

	// The label goes: the informer's store has the new Node, the feed's handler has not run.
	cleared := nodes[0].DeepCopy()
	delete(cleared.Labels, DomainLabel)
	cleared.ResourceVersion = "11"
	store := e.fh.SharedInformerFactory().Core().V1().Nodes().Informer().GetStore()
	if err := store.Update(cleared); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	hint := hintFor(t, e.plugin, fwk.Node, fwk.UpdateNodeLabel)
	if h, err := hint(logger, p, nodes[0], cleared); err != nil || h != fwk.Queue {
		t.Fatalf("the label's removal must queue the pod: %v %v", h, err)
	}
	e.nodes = []*v1.Node{cleared, nodes[1]}
	r = e.schedule(p)
	wantCode(t, "PreFilter after the label went", r.preFilter, fwk.Success, "")
	wantCode(t, "a-00 after the label went", r.filter["a-00"], fwk.Success, "")

	// The feed's handler delivers the older version afterwards: the view does not go back.
	e.apply(nodes[0])
	r = e.schedule(p)
	wantCode(t, "PreFilter after a late delivery of the older Node", r.preFilter, fwk.Success, "")
	wantCode(t, "a-00 after a late delivery of the older Node", r.filter["a-00"], fwk.Success, "")
}

// A deleted object the hint saw goes from the view before the next decision, and a late
// delivery of it does not bring it back (the feed's handler of a slow informer).
func TestAHintsDeleteIsCaughtUpAndBuried(t *testing.T) {
	nodes := rack("a", 1, 1)
	nodes[0].UID, nodes[0].ResourceVersion = "uid-a-00", "3"
	busy := boundTo(cdPod("other", "o"), "a-00")
	busy.ResourceVersion = "4"
	p := cdPod("mine", "p")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("mine", "uid-mine", 1), computeDomain("other", "uid-other", 1)},
		channelTemplate("mine", "uid-mine"), channelTemplate("other", "uid-other"), busy, p)
	if r := e.schedule(p); r.preFilter.IsSuccess() && r.filter["a-00"].IsSuccess() {
		t.Fatal("a tray held by another domain must not take the pod")
	}
	store := e.fh.SharedInformerFactory().Core().V1().Pods().Informer().GetStore()
	if err := store.Delete(busy); err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	hint := hintFor(t, e.plugin, fwk.AssignedPod, fwk.Delete)
	if h, err := hint(logger, p, busy, nil); err != nil || h != fwk.Queue {
		t.Fatalf("the GPU pod's deletion must queue the pod: %v %v", h, err)
	}
	e.nodes = nodes
	r := e.schedule(p)
	wantCode(t, "PreFilter after the other domain's pod went", r.preFilter, fwk.Success, "")
	wantCode(t, "a-00 after the other domain's pod went", r.filter["a-00"], fwk.Success, "")
	e.apply(busy)
	if e.plugin.feed.podInView(ns, "o") {
		t.Fatal("a late delivery of the deleted pod brought it back into the view")
	}
}
