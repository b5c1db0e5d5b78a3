package computedomain

import (
	"fmt"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// BenchmarkFeedNonComputeDomainLifecycle is what the feed's handlers cost for the traffic of
// upstream's scheduler_perf DRA workloads, where no pod has a ComputeDomain and no node a clique
// label: per op, one pod and its generated claim go through their informer events as the
// scheduler, the claim controller and the allocator make them (pod added, claim added, pod's
// claim status set, claim allocated and reserved, pod bound, pod deleted, claim deleted). None
// of it is a policy fact, so none of it crosses, and what is left is Go-side work.
func BenchmarkFeedNonComputeDomainLifecycle(b *testing.B) {
	nodes := []*v1.Node{makeNode("worker-0", 0, 0)}
	e := newEnv(b, "", nodes, nil, gpuTemplate("test-claim-template"))
	f := e.plugin.feed
	e.apply()
	crossed := e.plugin.Cluster().Crossings()
	rv := 100
	next := func() string { rv++; return strconv.Itoa(rv) }
	type lifecycle struct {
		added, claimed, bound, scheduled *v1.Pod
		claim, allocated                 *resourceapi.ResourceClaim
	}
	ops := make([]lifecycle, b.N)
	for i := range ops {
		name := fmt.Sprintf("pod-%d", i)
		claimName := name + "-gpus-abcde"
		pod := makePod(name, "", 0)
		pod.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		pod.UID = types.UID("uid-" + name)
		pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("test-claim-template")}}
		pod.ResourceVersion = next()
		claim := gpuClaim(claimName)
		claim.Spec.Devices.Requests[0].Exactly.DeviceClassName = "test-class"
		claim.UID = types.UID("uid-" + claimName)
		claim.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: name, UID: pod.UID, Controller: ptr.To(true)}}
		claim.ResourceVersion = next()
		claimed := pod.DeepCopy()
		claimed.Status.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "gpus", ResourceClaimName: ptr.To(claimName)}}
		claimed.ResourceVersion = next()
		allocated := claim.DeepCopy()
		allocated.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: "test-driver.cdi.k8s.io", Pool: "worker-0", Device: "dev-1"}}}}
		allocated.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: pod.UID}}
		allocated.ResourceVersion = next()
		bound := claimed.DeepCopy()
		bound.Spec.NodeName = "worker-0"
		bound.ResourceVersion = next()
		scheduled := bound.DeepCopy()
		scheduled.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
		scheduled.ResourceVersion = next()
		ops[i] = lifecycle{pod, claimed, bound, scheduled, claim, allocated}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range ops {
		o := &ops[i]
		f.upsertPod(o.added)
		f.upsertClaim(o.claim)
		f.upsertPod(o.claimed)
		f.upsertClaim(o.allocated)
		f.upsertPod(o.bound)
		f.upsertPod(o.scheduled)
		f.deletePod(ns, o.added.Name, o.added.UID)
		f.deleteClaimLike(cdplace.KindResourceClaim, ns, o.claim.Name, o.claim.UID)
	}
	b.StopTimer()
	e.apply()
	// How often the whole run crossed into the policy (TestOnlyFactChangesCross asserts zero).
	b.ReportMetric(float64(e.plugin.Cluster().Crossings()-crossed), "crossings")
}

// BenchmarkFeedPlainGPUPodLifecycle5000Nodes is what the plugin costs a plain GPU pod outside its
// scheduling cycle's Filter and Score, at 5,004 trays: per op, one pod without claims goes
// through the events a real cluster makes for it (added pending, Reserve on a tray, bound, started
// by the kubelet: phase Running and status.startTime, deleted), and what each step queued
// crosses as the next cycle would flush it (on a busy scheduler another pod's PreFilter comes
// between any two of them). It reports the crossings per pod.
func BenchmarkFeedPlainGPUPodLifecycle5000Nodes(b *testing.B) {
	e, _, _, _ := fleet(b)
	f := e.plugin.feed
	type lifecycle struct {
		added, bound, started *v1.Pod
		node                  string
	}
	ops := make([]lifecycle, b.N)
	for i := range ops {
		p := makePod(fmt.Sprintf("plain-%d", i), "", 4)
		p.ResourceVersion = "10"
		node := e.nodes[i%len(e.nodes)].Name
		bound := boundTo(p.DeepCopy(), node)
		bound.Status.Phase = v1.PodPending
		bound.ResourceVersion = "11"
		bound.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
		started := bound.DeepCopy()
		started.ResourceVersion = "12"
		started.Status.Phase = v1.PodRunning
		started.Status.StartTime = ptr.To(metav1.Now())
		ops[i] = lifecycle{p, bound, started, node}
	}
	flush := func() {
		if err := f.flush(); err != nil {
			b.Fatal(err)
		}
	}
	crossed := e.plugin.Cluster().Crossings()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range ops {
		o := &ops[i]
		f.upsertPod(o.added)
		flush()
		if st := e.plugin.Reserve(e.ctx, nil, o.added, o.node); !st.IsSuccess() {
			b.Fatal(st)
		}
		f.upsertPod(o.bound)
		flush()
		f.upsertPod(o.started)
		flush()
		f.deletePod(ns, o.added.Name, o.added.UID)
		flush()
	}
	b.StopTimer()
	b.ReportMetric(float64(e.plugin.Cluster().Crossings()-crossed)/float64(b.N), "crossings/pod")
}
