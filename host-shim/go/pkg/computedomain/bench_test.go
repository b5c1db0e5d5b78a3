package computedomain

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
)

// fleet is 5,004 trays in 278 cliques of 18, about 70% of them running domains of 1..18 pods,
// plus a pending 8-pod domain, a pending plain GPU pod and a pending DRA GPU pod.
func fleet(b *testing.B) (*env, *v1.Pod, *v1.Pod, *v1.Pod) {
	var nodes []*v1.Node
	var cds []*unstructured.Unstructured
	var objs []runtime.Object
	for c := 1; c <= 278; c++ {
		rackNodes := rack(fmt.Sprintf("r%03d", c), c, 18)
		nodes = append(nodes, rackNodes...)
		used, size := 0, 1+c%18
		for d := 0; used+size <= 13; d++ {
			name := fmt.Sprintf("cd-%03d-%d", c, d)
			cds = append(cds, computeDomain(name, "uid-"+name, size))
			objs = append(objs, channelTemplate(name, "uid-"+name))
			for i := 0; i < size; i++ {
				objs = append(objs, boundTo(cdPod(name, fmt.Sprintf("%s-%d", name, i)), rackNodes[used].Name))
				used++
			}
		}
	}
	pending := cdPod("new", "new-0")
	cds = append(cds, computeDomain("new", "uid-new", 8))
	plain := makePod("plain", "", 4)
	dra := podWithClaim("dra", v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("one-gpu")}, "")
	objs = append(objs, channelTemplate("new", "uid-new"), pending, plain, gpuTemplate("one-gpu"), dra)
	e := newEnv(b, "", nodes, cds, objs...)
	// The feed takes the node objects the NodeInfos hold, as from the scheduler's one shared
	// informer (the node index answers Filter and Score for those).
	for _, n := range nodes {
		feedObject(b, e.plugin.feed, n)
	}
	for _, o := range objs {
		e.objects = append(e.objects, o)
	}
	for _, n := range nodes {
		e.objects = append(e.objects, n)
	}
	for _, cd := range cds {
		e.objects = append(e.objects, cd)
	}
	return e, pending, plain, dra
}

// cycle runs PreFilter, Filter on every node it allows, PreScore and Score, as one scheduling
// cycle does (Filter sequentially here; the scheduler spreads it over 16 goroutines).
func cycle(b *testing.B, fh framework.Framework, e *env, infos []fwk.NodeInfo, pod *v1.Pod) {
	scheduleCycle(b, fh, e.ctx, infos, pod, 0, len(infos))
}

// BenchmarkSchedulingCycle5000Nodes: per-pod time inside the framework with the plugin, next to
// the same framework without it, on the same 5,004-node snapshot.
func BenchmarkSchedulingCycle5000Nodes(b *testing.B) {
	e, pending, plain, dra := fleet(b)
	infos := tf.BuildNodeInfos(e.nodes)
	bare, err := tf.NewFramework(e.ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "bare", frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(nil, e.nodes)))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("without-plugin/ComputeDomain-pod", func(b *testing.B) {
		for b.Loop() {
			cycle(b, bare, e, infos, pending)
		}
	})
	b.Run("with-plugin/ComputeDomain-pod", func(b *testing.B) {
		for b.Loop() {
			cycle(b, e.fh, e, infos, pending)
		}
	})
	// Each cycle a new question: the view changed since the last decision, so it is not reused.
	b.Run("with-plugin/ComputeDomain-pod/decided-anew", func(b *testing.B) {
		for b.Loop() {
			e.plugin.feed.bump()
			cycle(b, e.fh, e, infos, pending)
		}
	})
	b.Run("policy-call-only/ComputeDomain-pod", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.plugin.Cluster().PreFilter(pending.Namespace, pending.Name, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The policy compiled natively (what running it as a wasm component costs) is measured by
	// the test kit's bench (`make bench`): the native evaluator is not linked into the scheduler.
	b.Run("with-plugin/plain-GPU-pod", func(b *testing.B) {
		for b.Loop() {
			cycle(b, e.fh, e, infos, plain)
		}
	})
	b.Run("with-plugin/DRA-GPU-pod", func(b *testing.B) {
		for b.Loop() {
			cycle(b, e.fh, e, infos, dra)
		}
	})
}

// BenchmarkReservePlainGPUPod5000Nodes: what a plain GPU pod's Reserve costs on the scheduling
// goroutine at 5,004 trays (its record applied and its assume, two crossings), then its bound
// update as the informer delivers it; a new pod each time, on a tray of a broken clique.
func BenchmarkReservePlainGPUPod5000Nodes(b *testing.B) {
	e, _, _, _ := fleet(b)
	i := 0
	for b.Loop() {
		b.StopTimer()
		p := makePod(fmt.Sprintf("plain-%d", i), "", 4)
		node := e.nodes[i%len(e.nodes)].Name
		i++
		feedObject(b, e.plugin.feed, p)
		b.StartTimer()
		if st := e.plugin.Reserve(e.ctx, nil, p, node); !st.IsSuccess() {
			b.Fatal(st)
		}
		feedObject(b, e.plugin.feed, boundTo(p, node))
	}
}

// BenchmarkFleetStatus5000Nodes: one fleet status (the guest's status over the whole view, and
// its decoding in Go) at 5,004 trays, what the background refresh pays each time it asks
// (fleet.go paces it by this cost).
func BenchmarkFleetStatus5000Nodes(b *testing.B) {
	e, _, _, _ := fleet(b)
	if err := e.plugin.feed.flush(); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := e.plugin.cluster.Status(); err != nil {
			b.Fatal(err)
		}
	}
}
