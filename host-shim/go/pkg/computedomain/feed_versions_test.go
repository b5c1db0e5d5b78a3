package computedomain

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

func versioned(p *v1.Pod, uid, rv string) *v1.Pod {
	p.UID, p.ResourceVersion = types.UID(uid), rv
	return p
}

// A pod the informer deleted does not come back as a ghost from the scheduler's own copy of it
// (PreFilter and Reserve pass the cycle's pod), nor from a late informer delivery.
func TestADeletedPodDoesNotComeBackFromTheSchedulersCopy(t *testing.T) {
	p0 := versioned(boundTo(cdPod("cd", "p0"), "a-00"), "uid-p0", "5")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}, channelTemplate("cd", "uid-cd"))
	f := e.plugin.feed
	e.apply(p0)
	if !f.podInView(ns, "p0") {
		t.Fatal("p0 must be in the view")
	}
	f.deletePod(ns, "p0", p0.UID)
	e.apply()
	stale := p0.DeepCopy()
	stale.Spec.NodeName = ""
	stale.Status.Phase = v1.PodPending

	r := e.schedule(stale)
	if f.podInView(ns, "p0") {
		t.Fatal("PreFilter of the deleted pod's copy put it back in the view")
	}
	wantCode(t, "PreFilter of a deleted pod", r.preFilter, fwk.UnschedulableAndUnresolvable, "Pod team-a/p0: the object was deleted (uid uid-p0)")
	if st := e.plugin.Reserve(e.ctx, r.state, stale, "a-01"); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	if f.podInView(ns, "p0") {
		t.Fatal("Reserve of the deleted pod's copy put it back in the view")
	}
	e.apply(p0.DeepCopy())
	if f.podInView(ns, "p0") {
		t.Fatal("an upsert of a deleted UID put it back in the view")
	}

	// A new pod under the same name (a new UID) is a new object: it enters the view.
	reborn := versioned(boundTo(cdPod("cd", "p0"), "a-01"), "uid-p0-2", "2")
	e.apply(reborn)
	if !f.podInView(ns, "p0") {
		t.Fatal("a new UID under a deleted pod's name must enter the view")
	}
}

// An update older than the version the view holds (same UID, lower resourceVersion) is
// dropped, whether it comes from the informer or from the scheduler's copy; versions that are
// not integers are not ordered, so they are taken.
func TestAnOlderResourceVersionIsDropped(t *testing.T) {
	e := newEnv(t, "", rack("a", 1, 3), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}, channelTemplate("cd", "uid-cd"))
	f := e.plugin.feed
	e.apply(versioned(boundTo(cdPod("cd", "p0"), "a-00"), "uid-p0", "10"))
	e.apply(versioned(boundTo(cdPod("cd", "p0"), "a-02"), "uid-p0", "9"))
	if got := f.podNode(ns, "p0"); got != "a-00" {
		t.Fatalf("an older resourceVersion replaced the view's pod: on %q, want a-00", got)
	}
	e.apply(versioned(boundTo(cdPod("cd", "p0"), "a-01"), "uid-p0", "11"))
	if got := f.podNode(ns, "p0"); got != "a-01" {
		t.Fatalf("a newer resourceVersion must replace the pod: on %q, want a-01", got)
	}
	e.apply(versioned(boundTo(cdPod("cd", "p0"), "a-02"), "uid-p0", "opaque-1"))
	if got := f.podNode(ns, "p0"); got != "a-02" {
		t.Fatalf("a resourceVersion that is not an integer is taken: on %q, want a-02", got)
	}

	// The pod finished (it leaves the view); the scheduler's older Pending copy must not put it back.
	done := versioned(boundTo(makePod("gpu", "", 4), "a-00"), "uid-gpu", "20")
	e.apply(done)
	done = done.DeepCopy()
	done.ResourceVersion, done.Status.Phase = "21", v1.PodSucceeded
	e.apply(done)
	pending := versioned(makePod("gpu", "", 4), "uid-gpu", "19")
	if counts, err := f.placeable(pending, "a-01", true); counts || err == nil {
		t.Fatalf("placeable of an older copy of a finished pod: counts %v, err %v", counts, err)
	}
	if f.podInView(ns, "gpu") {
		t.Fatal("an older copy of a finished pod came back into the view")
	}
}

// The tombstones are bounded in number and in age.
func TestTombstonesAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	ts := newTombstones(3, time.Minute)
	for i := 0; i < 5; i++ {
		ts.add(types.UID("u"+strconv.Itoa(i)), now)
	}
	if ts.len() != 3 || ts.has("u0", now) || ts.has("u1", now) || !ts.has("u2", now) || !ts.has("u4", now) {
		t.Fatalf("past the bound the oldest go first: %d kept, u0 %v, u2 %v", ts.len(), ts.has("u0", now), ts.has("u2", now))
	}
	later := now.Add(30 * time.Second)
	ts.add("u5", later)
	if ts.has("u2", now.Add(time.Minute+time.Second)) {
		t.Fatal("a tombstone older than its age bound must be gone")
	}
	if !ts.has("u5", now.Add(time.Minute+time.Second)) || ts.len() != 1 {
		t.Fatalf("only u5 is young enough: %d kept", ts.len())
	}
}

// podPlacedOn is the node the feed counts the pod on (its node, else the one Reserve assumed it
// on); "" when untracked.
func (f *feed) podPlacedOn(namespace, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.pods[nsName{namespace, name}]; e != nil {
		return e.placedOn()
	}
	return ""
}

// podNode is the node of the pod the feed tracks ("" when none).
func (f *feed) podNode(namespace, name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.pods[nsName{namespace, name}]; e != nil {
		return e.fact.Node()
	}
	return ""
}

// The tombstones are looked up only for a UID the view does not hold under the name (an object
// added, or a stale copy of a deleted one): an update of a held object, most of the informers'
// events, skips the lookup. A buried UID is still refused after it.
func TestOnlyAnUnheldUIDIsCheckedAgainstTheTombstones(t *testing.T) {
	e := newEnv(t, "", rack("a", 1, 2), nil)
	f := e.plugin.feed
	lookups := 0
	f.mu.Lock()
	f.now = func() time.Time { lookups++; return time.Now() }
	f.mu.Unlock()
	e.apply(versioned(boundTo(makePod("gpu", "", 4), "a-00"), "uid-gpu", "5"))
	if lookups != 1 {
		t.Fatalf("a new UID: %d tombstone lookups, want 1", lookups)
	}
	running := versioned(boundTo(makePod("gpu", "", 4), "a-00"), "uid-gpu", "6")
	running.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	e.apply(running)
	if lookups != 1 {
		t.Fatalf("an update of a held UID: %d tombstone lookups, want still 1", lookups)
	}
	f.deletePod(ns, "gpu", "uid-gpu") // buries it (one more read of the clock)
	e.apply(versioned(boundTo(makePod("gpu", "", 4), "a-01"), "uid-gpu", "7"))
	if f.podInView(ns, "gpu") {
		t.Fatal("a deleted UID came back")
	}
	if lookups != 3 {
		t.Fatalf("the burial and the check of the deleted UID: %d clock reads, want 3", lookups)
	}
}
