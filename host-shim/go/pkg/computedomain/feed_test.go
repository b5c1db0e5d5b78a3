package computedomain

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

func gpuSlice(name, driver, node string, gpus int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node), Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}}}
	for i := 0; i < gpus; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-" + string(rune('0'+i))})
	}
	return s
}

func gpuClaim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", Count: 4}}}}}}
}

func withClaim(p *v1.Pod, claim string) *v1.Pod {
	p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: "gpus", ResourceClaimName: ptr.To(claim)})
	return p
}

// touched is a copy of an object changed only where no policy fact lives.
func touched[T interface{ GetResourceVersion() string }](obj T, change func(T)) T {
	change(obj)
	return obj
}

// An update that changes no fact the policy uses queues no record, and so crosses zero times;
// one that does queues exactly its record and crosses once, at the next flush.
func TestOnlyFactChangesCross(t *testing.T) {
	nodes := append(rack("a", 1, 3), makeNode("cpu-0", 0, 4))
	cd := boundTo(cdPod("cd", "p0"), "a-00")
	timed := boundTo(makePod("timed", "", 4), "a-02")
	timed.Spec.ActiveDeadlineSeconds = ptr.To[int64](3600)
	plainOffClique := boundTo(makePod("batch", "", 4), "cpu-0")
	draOffClique := withClaim(boundTo(makePod("dra", "", 0), "cpu-0"), "dra-gpus")
	web := boundTo(makePod("web", "", 0), "a-01")
	web.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	pendingDRA := withClaim(makePod("dra-pending", "", 0), "dra-gpus-2")
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)},
		channelTemplate("cd", "uid-cd"), cd, timed, plainOffClique, draOffClique, web, pendingDRA,
		gpuClaim("dra-gpus"), gpuClaim("dra-gpus-2"),
		gpuSlice("a-00-gpu", "gpu.nvidia.com", "a-00", 4), gpuSlice("a-00-nic", "nic.example.com", "a-00", 2))
	f := e.plugin.feed
	e.apply() // flush what the informers delivered
	if !f.podInView(ns, "p0") {
		t.Fatal("the bound ComputeDomain pod must be in the view")
	}
	for _, name := range []string{"batch", "dra", "web", "dra-pending"} {
		if f.podInView(ns, name) {
			t.Fatalf("pod %s must not be in the view", name)
		}
	}

	heartbeat := func(n *v1.Node) {
		n.ResourceVersion = "2"
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Now())}}
		n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
		n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	}
	condition := func(p *v1.Pod) {
		p.ResourceVersion = "7"
		p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	}
	start := func(p *v1.Pod) {
		p.ResourceVersion = "8"
		p.Status.Phase = v1.PodRunning
		p.Status.StartTime = ptr.To(metav1.NewTime(time.Unix(1_782_900_009, 0)))
	}
	started := touched(cd.DeepCopy(), start)
	cases := []struct {
		name   string
		update any
		want   uint64 // records queued
	}{
		{"ComputeDomain pod: a status condition", touched(cd.DeepCopy(), condition), 0},
		// The kubelet starting a pod sets its phase and status.startTime; the start time is a
		// policy fact only for a pod with a deadline (when it ends at the latest).
		{"ComputeDomain pod without a deadline: started", started, 0},
		{"GPU pod with a deadline on a tray: started", touched(timed.DeepCopy(), start), 1},
		{"started ComputeDomain pod: a status condition", touched(started.DeepCopy(), func(p *v1.Pod) {
			condition(p)
			p.ResourceVersion = "9"
		}), 0},
		{"tray: a heartbeat, managed fields, an annotation", touched(nodes[0].DeepCopy(), heartbeat), 0},
		{"GPU pod on a node without a clique label", touched(plainOffClique.DeepCopy(), condition), 0},
		{"DRA pod on a node without a clique label", touched(draOffClique.DeepCopy(), condition), 0},
		{"CPU pod on a tray", touched(web.DeepCopy(), condition), 0},
		{"pending DRA pod", touched(pendingDRA.DeepCopy(), condition), 0},
		{"another driver's slice", touched(gpuSlice("a-00-nic", "nic.example.com", "a-00", 3), func(s *resourceapi.ResourceSlice) { s.ResourceVersion = "3" }), 0},
		{"a claim reserved for a pod", touched(gpuClaim("dra-gpus"), func(c *resourceapi.ResourceClaim) {
			c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "dra", UID: "u"}}
		}), 0},
		{"ComputeDomain status", touched(computeDomain("cd", "uid-cd", 2), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "Ready", "status", "status")
		}), 0},
		{"another driver's claim, added", otherDriverClaim("nic-2"), 0},
		{"another driver's claim, allocated", touched(otherDriverClaim("nic-2"), func(c *resourceapi.ResourceClaim) {
			c.ResourceVersion = "4"
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
				Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "nic.example.com", Pool: "a-00", Device: "nic-0"}}}}
		}), 0},
		// Controls: real changes cross, once each.
		{"GPU slice: one more device", gpuSlice("a-00-gpu", "gpu.nvidia.com", "a-00", 3), 1},
		{"tray cordoned", touched(nodes[1].DeepCopy(), func(n *v1.Node) { n.Spec.Unschedulable = true }), 1},
		{"GPU pod bound to a tray", boundTo(makePod("gpu", "", 4), "a-01"), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			queued, crossed := f.queuedRecords(), e.plugin.Cluster().Crossings()
			feedObject(t, f, c.update)
			if err := f.flush(); err != nil {
				t.Fatal(err)
			}
			if got := f.queuedRecords() - queued; got != c.want {
				t.Fatalf("queued %d records, want %d", got, c.want)
			}
			if got := e.plugin.Cluster().Crossings() - crossed; got != min(c.want, 1) {
				t.Fatalf("crossed %d times, want %d", got, min(c.want, 1))
			}
		})
	}
}

// A GPU pod on a node enters the view when the node gains a clique label, and leaves it when the
// label goes.
func TestCliqueLabelReevaluatesThePodsOnANode(t *testing.T) {
	bare := makeNode("n-0", 0, 4)
	gpu := boundTo(makePod("gpu", "", 4), "n-0")
	e := newEnv(t, "", []*v1.Node{bare}, nil, gpu)
	f := e.plugin.feed
	if f.podInView(ns, "gpu") {
		t.Fatal("a GPU pod on a node without a clique label is not sent")
	}
	labelled := bare.DeepCopy()
	labelled.Labels["nvidia.com/gpu.clique"] = clique(1)
	queued := f.queuedRecords()
	e.apply(labelled)
	if !f.podInView(ns, "gpu") || f.queuedRecords()-queued != 2 {
		t.Fatalf("labelling the node sends it and its GPU pod: in view %v, %d records", f.podInView(ns, "gpu"), f.queuedRecords()-queued)
	}
	queued = f.queuedRecords()
	e.apply(bare.DeepCopy())
	if f.podInView(ns, "gpu") || f.queuedRecords()-queued != 2 {
		t.Fatalf("unlabelling the node removes its GPU pod: in view %v, %d records", f.podInView(ns, "gpu"), f.queuedRecords()-queued)
	}
	// A finished pod leaves the view.
	e.apply(labelled)
	done := gpu.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	e.apply(done)
	if f.podInView(ns, "gpu") {
		t.Fatal("a finished pod is not in the view")
	}
}

// Through the real informers: a pod status update that changes no fact reaches the feed and
// queues nothing (a pod created after it, on the same informer, proves it was handled).
func TestAStatusUpdateThroughTheInformerQueuesNothing(t *testing.T) {
	p0 := boundTo(cdPod("cd", "p0"), "a-00")
	e := newEnv(t, "", rack("a", 1, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)}, channelTemplate("cd", "uid-cd"), p0)
	f := e.plugin.feed
	e.apply()
	queued, crossed := f.queuedRecords(), e.plugin.Cluster().Crossings()
	updated := touched(p0.DeepCopy(), func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	})
	if _, err := e.client.CoreV1().Pods(ns).UpdateStatus(e.ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CoreV1().Pods(ns).Create(e.ctx, boundTo(cdPod("cd", "p1"), "a-01"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return f.podInView(ns, "p1") })
	if got := f.queuedRecords() - queued; got != 1 {
		t.Fatalf("queued %d records, want 1 (p1's; the status update none)", got)
	}
	if got := e.plugin.Cluster().Crossings() - crossed; got != 0 {
		t.Fatalf("crossed %d times before any flush, want 0", got)
	}
}

// Records batch up until a flush; past flushRecords the handler applies them itself.
func TestBatchesFlushWhenFull(t *testing.T) {
	e := newEnv(t, "", nil, nil)
	f := e.plugin.feed
	crossed := e.plugin.Cluster().Crossings()
	for i := 0; i < flushRecords-1; i++ {
		f.upsertNode(makeNode("n-"+strconv.Itoa(i), 1, 4))
	}
	if got := e.plugin.Cluster().Crossings() - crossed; got != 0 {
		t.Fatalf("%d records below the threshold crossed %d times", flushRecords-1, got)
	}
	f.upsertNode(makeNode("n-last", 1, 4))
	if got := e.plugin.Cluster().Crossings() - crossed; got != 1 {
		t.Fatalf("the %dth record must apply the batch in one call: %d crossings", flushRecords, got)
	}
}

// A driver republishing a pool (a new spec.pool.generation) does not count a tray's GPUs twice
// while the old slices linger: through the feed, the packed batch and the library's view (with
// wholeTray: Require, a tray counted with 8 GPUs would strand 4 of a 4-GPU pod's tray).
func TestARepublishedPoolCountsOnce(t *testing.T) {
	slice := func(name string, generation int64) *resourceapi.ResourceSlice {
		s := gpuSlice(name, "gpu.nvidia.com", "a-00", 4)
		s.Spec.Pool.Generation = generation
		return s
	}
	p0 := cdPod("cd", "p0")
	e := newEnv(t, `{"wholeTray":"Require"}`, []*v1.Node{makeNode("a-00", 1, 0)}, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1)},
		channelTemplate("cd", "uid-cd"), p0, slice("gen-1", 1))
	e.apply()
	filter := func(what string, want fwk.Code, reason string) {
		t.Helper()
		r := e.schedule(p0)
		wantCode(t, what+": PreFilter", r.preFilter, want, reason)
		if want == fwk.Success {
			wantCode(t, what+": Filter a-00", r.filter["a-00"], fwk.Success, "")
		}
	}
	filter("generation 1", fwk.Success, "")
	e.apply(slice("gen-2", 2))
	filter("generation 2 beside the stale generation 1", fwk.Success, "")
	e.apply(slice("gen-2b", 2))
	filter("two slices of generation 2", fwk.UnschedulableAndUnresolvable, "requests 4 of 8 GPUs per tray; would strand 4")
	e.plugin.feed.deleteObject(cdplace.KindResourceSlice, "", "gen-2", "")
	e.plugin.feed.deleteObject(cdplace.KindResourceSlice, "", "gen-2b", "")
	e.apply()
	filter("generation 2 gone: generation 1 counts again", fwk.Success, "")
}

// otherDriverClaim is a claim on another driver's device class: no domain, no GPUs.
func otherDriverClaim(name string) *resourceapi.ResourceClaim {
	c := gpuClaim(name)
	c.UID = types.UID("uid-" + name)
	c.ResourceVersion = "3"
	c.Spec.Devices.Requests[0].Exactly.DeviceClassName = "nic.example.com"
	return c
}

func (f *feed) claimInView(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settleClaimsLocked()
	return f.hasLocked(claimKey(nsName{ns, name}))
}

// Another driver's claim carries no policy fact: it is in the view exactly while a pod of the
// view names it (the policy reads a pod's claims, and a pod naming a claim the view lacks is an
// error), crossing with that pod and leaving after it; the view is then what a feed that only
// ever saw the final objects holds.
func TestAnotherDriversClaimIsInTheViewOnlyWithAPodOfTheView(t *testing.T) {
	nodes := rack("a", 1, 2)
	pending := withClaim(makePod("dra", "", 0), "nic")
	pending.ResourceVersion = "10"
	e := newEnv(t, "", nodes, nil, otherDriverClaim("nic"), pending)
	f := e.plugin.feed
	e.apply()
	if f.podInView(ns, "dra") || f.claimInView("nic") {
		t.Fatal("a pending pod and its other-driver claim are not sent")
	}
	viewAs := func(objs ...runtime.Object) []byte {
		fresh := newEnv(t, "", rack("a", 1, 2), nil, objs...)
		fresh.apply()
		b, err := fresh.plugin.feed.dumpView()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dump := func() []byte {
		b, err := f.dumpView()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	bound := boundTo(pending.DeepCopy(), "a-00")
	bound.ResourceVersion = "11"
	crossed := e.plugin.Cluster().Crossings()
	e.apply(bound)
	if !f.podInView(ns, "dra") || !f.claimInView("nic") {
		t.Fatal("a DRA pod on a tray is in the view, and so is the claim it names")
	}
	if got := e.plugin.Cluster().Crossings() - crossed; got != 1 {
		t.Fatalf("the pod and its claim cross together: %d crossings", got)
	}
	if got, want := dump(), viewAs(otherDriverClaim("nic"), bound.DeepCopy()); string(got) != string(want) {
		t.Fatalf("view after binding:\n%s\nwant:\n%s", got, want)
	}

	f.deletePod(ns, "dra", bound.UID)
	e.apply()
	if f.claimInView("nic") {
		t.Fatal("the claim leaves the view with the last pod of the view that names it")
	}
	if got, want := dump(), viewAs(otherDriverClaim("nic")); string(got) != string(want) {
		t.Fatalf("view after the pod's deletion:\n%s\nwant:\n%s", got, want)
	}
}

// A pod sent for one preemption dry run (placeable without assume) leaves the view at its next
// update when it does not qualify, even one that changes none of its facts.
func TestADryRunPodLeavesTheViewAtItsNextUpdate(t *testing.T) {
	pending := makePod("gpu", "", 4)
	pending.ResourceVersion = "5"
	e := newEnv(t, "", rack("a", 1, 2), nil, pending)
	f := e.plugin.feed
	e.apply()
	if f.podInView(ns, "gpu") {
		t.Fatal("a pending plain pod is not sent")
	}
	if counts, err := f.placeable(pending, "a-00", false); !counts || err != nil {
		t.Fatalf("placeable on a tray: %v, %v", counts, err)
	}
	if !f.podInView(ns, "gpu") {
		t.Fatal("the dry run sends the pod")
	}
	e.apply(touched(pending.DeepCopy(), func(p *v1.Pod) {
		p.ResourceVersion = "6"
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
	}))
	if f.podInView(ns, "gpu") {
		t.Fatal("its next update, though it changes no fact, re-evaluates it: still pending, it leaves")
	}
}

// A pending GPU pod without claims or a PodGroup is not filed until it is placed (its add event
// costs a version check and nothing else), yet every way it can come to matter still reaches
// the view: its bind, a nominated node, Reserve's copy; and the version it was added at still
// refuses an older copy of it. Pods with a claim or a PodGroup are filed at once.
func TestPendingGPUPodsWithoutClaimsAreFiledOncePlaced(t *testing.T) {
	e := newEnv(t, "", rack("a", 1, 3), nil, gpuClaim("dra-gpus"))
	f := e.plugin.feed
	filed := func(name string) bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.pods[nsName{ns, name}] != nil
	}

	pending := versioned(makePod("plain", "", 4), "uid-plain", "10")
	e.apply(pending)
	if filed("plain") || f.podInView(ns, "plain") {
		t.Fatal("a pending GPU pod without claims must not be filed")
	}
	e.apply(versioned(boundTo(makePod("plain", "", 4), "a-00"), "uid-plain", "11"))
	if !f.podInView(ns, "plain") || f.podNode(ns, "plain") != "a-00" {
		t.Fatal("the bound pod must be in the view on a-00")
	}

	nominated := versioned(makePod("nominee", "", 4), "uid-nominee", "10")
	nominated.Status.NominatedNodeName = "a-01"
	e.apply(nominated)
	if !f.podInView(ns, "nominee") {
		t.Fatal("a pod nominated to a tray must be in the view")
	}

	reserved := versioned(makePod("reserved", "", 4), "uid-reserved", "10")
	e.apply(reserved)
	if counts, err := f.placeable(reserved, "a-02", true); !counts || err != nil {
		t.Fatalf("Reserve's copy of an unfiled pod: counts %v, err %v", counts, err)
	}
	if !f.podInView(ns, "reserved") || f.podPlacedOn(ns, "reserved") != "a-02" {
		t.Fatal("the reserved pod must be in the view, assumed on a-02")
	}

	// The version of the unfiled add is kept: an older copy of it is refused.
	late := versioned(makePod("late", "", 4), "uid-late", "20")
	e.apply(late)
	if counts, err := f.placeable(versioned(makePod("late", "", 4), "uid-late", "19"), "a-02", true); counts || err == nil {
		t.Fatalf("an older copy than the informer's: counts %v, err %v", counts, err)
	}

	withGroup := versioned(makePod("grouped", "", 4), "uid-grouped", "10")
	withGroup.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("trainers")}
	e.apply(withGroup)
	e.apply(versioned(withClaim(makePod("claimer", "", 0), "dra-gpus"), "uid-claimer", "10"))
	if !filed("grouped") || !filed("claimer") {
		t.Fatalf("pods with a PodGroup (%v) or a claim (%v) must be filed while pending", filed("grouped"), filed("claimer"))
	}
}

// After a flush the next batch is built in the buffer of one applied before (emptied), so a flush
// before every cycle allocates no new buffer; a buffer past spareBytes is not kept.
func TestTheFeedReusesTheAppliedBatchsBuffer(t *testing.T) {
	e := newEnv(t, "", rack("a", 1, 2), nil)
	f := e.plugin.feed
	// The first flush keeps its batch's buffer as the spare; the second builds in it and
	// keeps its own: the pending batch now has one.
	e.apply(boundTo(makePod("gpu", "", 4), "a-00"))
	e.apply(boundTo(makePod("gpu-2", "", 4), "a-01"))
	f.mu.Lock()
	length, capacity := f.pending.Len(), f.pending.Cap()
	f.mu.Unlock()
	if length != 0 || capacity == 0 || capacity > spareBytes {
		t.Fatalf("after a flush the pending batch has %d records in a buffer of %d bytes; want none, in the last batch's buffer", length, capacity)
	}
}
