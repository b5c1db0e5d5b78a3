package computedomain

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// Events that only add capacity retry a waiting domain through its scout (the pod rejected
// first); the scout's reservation wakes the rest. A pod's own claim, a PodGroup's pod, a quiet
// scout and a scout that is gone queue the pod as before.
func TestCapacityEventsQueueAWaitingDomainThroughItsScout(t *testing.T) {
	w0, w1 := cdPod("cd", "w0"), cdPod("cd", "w1")
	taken0, taken1 := boundTo(makePod("taken0", "", 4), "a-00"), boundTo(makePod("taken1", "", 4), "a-01")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)},
		channelTemplate("cd", "uid-cd"), w0, w1, taken0, taken1)
	var woken []nsName
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(keys []nsName) { woken = append(woken, keys...) }
	e.plugin.feed.mu.Unlock()
	now := time.Now()
	e.plugin.wake.now = func() time.Time { return now }
	wantCode(t, "w0 while its domain waits", e.schedule(w0).preFilter, fwk.Unschedulable, "needs 2 free trays")
	wantCode(t, "w1 while its domain waits", e.schedule(w1).preFilter, fwk.Unschedulable, "needs 2 free trays")

	logger, _ := ktesting.NewTestContext(t)
	deleted := hintFor(t, e.plugin, fwk.AssignedPod, fwk.Delete)
	claims := hintFor(t, e.plugin, fwk.ResourceClaim, fwk.Add)
	want := func(what string, fn fwk.QueueingHintFn, pod *v1.Pod, oldObj, newObj any, hint fwk.QueueingHint) {
		t.Helper()
		if h, err := fn(logger, pod, oldObj, newObj); err != nil || h != hint {
			t.Fatalf("%s: %v (%v), want %v", what, h, err, hint)
		}
	}
	want("the scout, for a freed tray", deleted, w0, taken0, nil, fwk.Queue)
	want("its sibling, for a freed tray", deleted, w1, taken0, nil, fwk.QueueSkip)
	own := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "w1-channel", Namespace: ns}}
	w1Claimed := w1.DeepCopy()
	w1Claimed.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "channel", ResourceClaimName: ptr.To("w1-channel")}}
	want("the sibling, for its own claim", claims, w1Claimed, nil, own, fwk.Queue)
	grouped := w1.DeepCopy()
	grouped.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("trainers")}
	want("a PodGroup's pod", deleted, grouped, taken0, nil, fwk.Queue)
	domains := hintFor(t, e.plugin, computeDomainResource, fwk.Delete)
	gone := computeDomain("done", "uid-done", 1)
	want("the scout, for another domain deleted", domains, w0, gone, nil, fwk.Queue)
	want("its sibling, for another domain deleted", domains, w1, gone, nil, fwk.QueueSkip)
	resized := computeDomain("cd", "uid-cd", 2)
	resized.SetAnnotations(map[string]string{"cdplace.nvidia.com/size": "1"})
	want("the sibling, for its own domain resized", domains, w1, computeDomain("cd", "uid-cd", 2), resized, fwk.Queue)

	// A scout not rejected for scoutQuiet is given up.
	now = now.Add(scoutQuiet)
	want("the sibling of a quiet scout", deleted, w1, taken0, nil, fwk.Queue)
	wantCode(t, "w1 rejected again", e.schedule(w1).preFilter, fwk.Unschedulable, "needs 2 free trays")
	want("w1, the new scout", deleted, w1, taken0, nil, fwk.Queue)
	want("w0, now a sibling", deleted, w0, taken0, nil, fwk.QueueSkip)

	// The scout's reservation wakes the domain's other rejected pods, and its domain no longer
	// waits: nothing is held back.
	if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, "taken0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := e.fh.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), w1, "a-00"); !st.IsSuccess() {
		t.Fatalf("reserve: %v", st)
	}
	if len(woken) != 1 || woken[0] != (nsName{ns, "w0"}) {
		t.Fatalf("reserving the scout should wake w0, woke %v", woken)
	}
	want("w0 once its domain started", deleted, w0, taken1, nil, fwk.Queue)
}

// A scout that is no longer pending (deleted, or bound) is given up at once.
func TestAScoutThatIsGoneIsGivenUp(t *testing.T) {
	w0, w1 := cdPod("cd", "w0"), cdPod("cd", "w1")
	taken := boundTo(makePod("taken", "", 4), "a-00")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 3)},
		channelTemplate("cd", "uid-cd"), w0, w1, taken)
	wantCode(t, "w0", e.schedule(w0).preFilter, fwk.UnschedulableAndUnresolvable, "")
	wantCode(t, "w1", e.schedule(w1).preFilter, fwk.UnschedulableAndUnresolvable, "")
	logger, _ := ktesting.NewTestContext(t)
	deleted := hintFor(t, e.plugin, fwk.AssignedPod, fwk.Delete)
	if h, _ := deleted(logger, w1, taken, nil); h != fwk.QueueSkip {
		t.Fatalf("w1 with a pending scout: %v", h)
	}
	store := e.fh.SharedInformerFactory().Core().V1().Pods().Informer().GetStore()
	if err := store.Delete(w0); err != nil {
		t.Fatal(err)
	}
	if h, _ := deleted(logger, w1, taken, nil); h != fwk.Queue {
		t.Fatalf("w1 after its scout was deleted: %v", h)
	}
}

// A pod deleted while its domain waits is forgotten (a Job deleted before it started left its
// pods filed for the scheduler's lifetime).
func TestARejectedPodThatIsDeletedIsForgotten(t *testing.T) {
	w0, w1 := cdPod("cd", "w0"), cdPod("cd", "w1")
	e := newEnv(t, "", rack("a", 1, 1), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)},
		channelTemplate("cd", "uid-cd"), w0, w1)
	wantCode(t, "w0", e.schedule(w0).preFilter, fwk.UnschedulableAndUnresolvable, "")
	wantCode(t, "w1", e.schedule(w1).preFilter, fwk.UnschedulableAndUnresolvable, "")
	filed := func() (pods, scouts int) {
		e.plugin.wake.mu.Lock()
		defer e.plugin.wake.mu.Unlock()
		for _, s := range e.plugin.wake.byDomain {
			pods += len(s)
		}
		return pods + len(e.plugin.wake.domainOf), len(e.plugin.wake.scouts)
	}
	if pods, scouts := filed(); pods != 4 || scouts != 1 {
		t.Fatalf("after two rejections: %d entries, %d scouts; want 4 and 1", pods, scouts)
	}
	e.waitPodsWatched()
	for _, name := range []string{"w0", "w1"} {
		if err := e.client.CoreV1().Pods(ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		pods, scouts := filed()
		if pods == 0 && scouts == 0 && len(e.plugin.wake.byDomain) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted pods still filed: %d entries, %d scouts", pods, scouts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
