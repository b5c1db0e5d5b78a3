package computedomain

import (
	"context"
	"fmt"
	"runtime/pprof"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/imagelocality"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodename"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeports"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// extraScore scores every node 0: what the framework itself costs for one more Score plugin,
// whatever the plugin does.
type extraScore struct{}

func (extraScore) Name() string { return "ExtraScore" }
func (extraScore) PreScore(context.Context, fwk.CycleState, *v1.Pod, []fwk.NodeInfo) *fwk.Status {
	return nil
}
func (extraScore) Score(context.Context, fwk.CycleState, *v1.Pod, fwk.NodeInfo) (int64, *fwk.Status) {
	return 0, nil
}
func (extraScore) ScoreExtensions() fwk.ScoreExtensions { return nil }

// defaultFramework is a framework with the default plugins that act on a pod without volumes,
// claims, affinity or spread constraints (weights as in the default profile), plus extra (nil:
// none) at PreFilter, Filter, PreScore and Score with weight 10 when it implements them.
func defaultFramework(b *testing.B, e *env, snapshot *schedcache.Snapshot, extra fwk.Plugin) framework.Framework {
	b.Helper()
	fts := feature.Features{}
	args := map[string]runtime.Object{
		noderesources.Name: &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
			Type:      config.LeastAllocated,
			Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		}},
		noderesources.BalancedAllocationName: &config.NodeResourcesBalancedAllocationArgs{
			Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}},
		},
		nodeaffinity.Name: &config.NodeAffinityArgs{},
	}
	with := func(name string, f frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
		return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return f(ctx, args[name], h)
		}
	}
	reg := []tfRegister{
		{queuesort.Name, 0, queuesort.New, []string{"QueueSort"}},
		{defaultbinder.Name, 0, defaultbinder.New, []string{"Bind"}},
		{nodeunschedulable.Name, 0, frameworkruntime.FactoryAdapter(fts, nodeunschedulable.New), []string{"Filter"}},
		{nodename.Name, 0, frameworkruntime.FactoryAdapter(fts, nodename.New), []string{"Filter"}},
		{tainttoleration.Name, 3, frameworkruntime.FactoryAdapter(fts, tainttoleration.New), []string{"Filter", "PreScore", "Score"}},
		{nodeaffinity.Name, 2, frameworkruntime.FactoryAdapter(fts, nodeaffinity.New), []string{"PreFilter", "Filter", "PreScore", "Score"}},
		{nodeports.Name, 0, frameworkruntime.FactoryAdapter(fts, nodeports.New), []string{"PreFilter", "Filter"}},
		{noderesources.Name, 1, frameworkruntime.FactoryAdapter(fts, noderesources.NewFit), []string{"PreFilter", "Filter", "PreScore", "Score"}},
		{noderesources.BalancedAllocationName, 1, frameworkruntime.FactoryAdapter(fts, noderesources.NewBalancedAllocation), []string{"PreScore", "Score"}},
		{imagelocality.Name, 1, imagelocality.New, []string{"Score"}},
	}
	if extra != nil {
		var exts []string
		for _, x := range []struct {
			ok  bool
			ext string
		}{
			{implements[fwk.PreFilterPlugin](extra), "PreFilter"},
			{implements[fwk.FilterPlugin](extra), "Filter"},
			{implements[fwk.PreScorePlugin](extra), "PreScore"},
			{implements[fwk.ScorePlugin](extra), "Score"},
		} {
			if x.ok {
				exts = append(exts, x.ext)
			}
		}
		reg = append(reg, tfRegister{extra.Name(), 10, func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return extra, nil }, exts})
	}
	fns := make([]tf.RegisterPluginFunc, 0, len(reg))
	for _, r := range reg {
		fns = append(fns, tf.RegisterPluginAsExtensionsWithWeight(r.name, r.weight, with(r.name, r.factory), r.exts...))
	}
	fh, err := tf.NewFramework(e.ctx, fns, "computedomain-scheduler",
		frameworkruntime.WithClientSet(e.client),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
	)
	if err != nil {
		b.Fatal(err)
	}
	return fh
}

type tfRegister struct {
	name    string
	weight  int32
	factory frameworkruntime.PluginFactory
	exts    []string
}

func implements[T any](p fwk.Plugin) bool {
	_, ok := p.(T)
	return ok
}

// scheduleCycle is one pod's scheduling cycle as schedulePod runs it: PreFilter, Filter from a
// start index that moves on each cycle until the adaptive share of the fleet is feasible (10% of
// 5,004 nodes: 500), PreScore and Score (on the framework's 16 goroutines) of those, and the
// pick of the highest total. It returns where the next cycle starts and the time PreScore and
// Score took.
func scheduleCycle(b *testing.B, fh framework.Framework, ctx context.Context, infos []fwk.NodeInfo, pod *v1.Pod, start, want int) (next int, scoring time.Duration) {
	state := framework.NewCycleState()
	res, st, _ := fh.RunPreFilterPlugins(ctx, state, pod)
	if !st.IsSuccess() {
		b.Fatalf("prefilter: %v", st)
	}
	feasible := make([]fwk.NodeInfo, 0, want)
	seen := 0
	for ; seen < len(infos) && len(feasible) < want; seen++ {
		ni := infos[(start+seen)%len(infos)]
		if res != nil && res.NodeNames != nil && !res.NodeNames.Has(ni.Node().Name) {
			continue
		}
		if fh.RunFilterPlugins(ctx, state, pod, ni).IsSuccess() {
			feasible = append(feasible, ni)
		}
	}
	t := time.Now()
	if st := fh.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		b.Fatalf("prescore: %v", st)
	}
	scores, st := fh.RunScorePlugins(ctx, state, pod, feasible)
	scoring = time.Since(t)
	if !st.IsSuccess() {
		b.Fatalf("score: %v", st)
	}
	best := int64(-1)
	for _, s := range scores {
		best = max(best, s.TotalScore)
	}
	if best < 0 {
		b.Fatalf("no node for %s", pod.Name)
	}
	return (start + seen) % len(infos), scoring
}

// BenchmarkPlainPodCycle5000Nodes: a pod without a ComputeDomain through one scheduling cycle of
// the default plugins (those that act on it) at 5,004 trays, about 70% of them busy (and again
// with every tray idle): the stock
// set, the same with ComputeDomainPlacement (steering the pod as shipped, its answer reused as
// between the pods of a burst), and the same with a Score plugin that does nothing (what the
// framework charges for one more Score plugin, whatever it does). The variants take turns within
// every iteration, from the same start node, in an order that rotates, so the machine's drift
// and the first turn's cache misses fall on all of them alike. Each reports its mean cycle
// (<variant>-ns/pod), of which PreScore and Score (<variant>-score-ns/pod), and its time over
// stock's (<variant>/stock). Filter runs on one goroutine here (the scheduler uses 16; the
// variants' Filter work is the same: the plugin's steering filters nothing).
func BenchmarkPlainPodCycle5000Nodes(b *testing.B) {
	b.Run("busy-fleet", func(b *testing.B) {
		e, _, gpu, _ := fleet(b)
		plainPodCycles(b, e, gpu)
	})
	// The same fleet with nothing running: every clique intact, so every node scores alike
	// and the plugin leaves Score out.
	b.Run("idle-fleet", func(b *testing.B) {
		var nodes []*v1.Node
		for c := 1; c <= 278; c++ {
			nodes = append(nodes, rack(fmt.Sprintf("r%03d", c), c, 18)...)
		}
		gpu := makePod("plain", "", 4)
		e := newEnv(b, "", nodes, nil, gpu)
		for _, n := range nodes {
			feedObject(b, e.plugin.feed, n)
		}
		plainPodCycles(b, e, gpu)
	})
}

// plainPodCycles runs the variants of BenchmarkPlainPodCycle5000Nodes for gpu and for a CPU pod
// on e's fleet.
func plainPodCycles(b *testing.B, e *env, gpu *v1.Pod) {
	cpu := makePod("plain-cpu", "", 0)
	cpu.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
	feedObject(b, e.plugin.feed, cpu)
	var bound []*v1.Pod
	for _, o := range e.objects {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			bound = append(bound, p)
		}
	}
	snapshot := schedcache.NewSnapshot(bound, e.nodes)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	want := len(infos) * (50 - len(infos)/125) / 100
	variants := []struct {
		name string
		fh   framework.Framework
	}{
		{"stock", defaultFramework(b, e, snapshot, nil)},
		{"cdplace", defaultFramework(b, e, snapshot, e.plugin)},
		{"extra-score", defaultFramework(b, e, snapshot, extraScore{})},
	}
	for _, pod := range []*v1.Pod{gpu, cpu} {
		kind := "GPU-pod"
		if pod == cpu {
			kind = "CPU-pod"
		}
		b.Run(kind, func(b *testing.B) {
			spent := make([]time.Duration, len(variants))
			scoring := make([]time.Duration, len(variants))
			start, n := 0, 0
			for b.Loop() {
				next := start
				// Who goes first meets the new nodes' cache misses: the turn rotates.
				for k := range variants {
					i := (k + n) % len(variants)
					v := variants[i]
					t := time.Now()
					var sc time.Duration
					// Labelled for -cpuprofile (go tool pprof -tagfocus variant=cdplace).
					pprof.Do(e.ctx, pprof.Labels("variant", v.name), func(ctx context.Context) {
						next, sc = scheduleCycle(b, v.fh, ctx, infos, pod, start, want)
					})
					scoring[i] += sc
					spent[i] += time.Since(t)
				}
				start = next
				n++
			}
			for i, v := range variants {
				b.ReportMetric(float64(spent[i].Nanoseconds())/float64(n), v.name+"-ns/pod")
				b.ReportMetric(float64(scoring[i].Nanoseconds())/float64(n), v.name+"-score-ns/pod")
				if i > 0 {
					b.ReportMetric(float64(spent[i])/float64(spent[0]), v.name+"/stock")
				}
			}
		})
	}
}

// BenchmarkScoreLookup500Nodes: Score on 500 nodes of the 5,004-tray fixture for a plain GPU pod,
// one goroutine, against the same lookups each reading the cycle state (what Score did before it
// remembered the cycle's state), alternated within every iteration: score-ns and read-ns per 500.
func BenchmarkScoreLookup500Nodes(b *testing.B) {
	e, _, gpu, _ := fleet(b)
	infos := tf.BuildNodeInfos(e.nodes)
	cs := framework.NewCycleState()
	if _, st := e.plugin.PreFilter(e.ctx, cs, gpu, infos); !st.IsSuccess() && !st.IsSkip() {
		b.Fatal(st)
	}
	if st := e.plugin.PreScore(e.ctx, cs, gpu, infos); !st.IsSuccess() {
		b.Fatal(st)
	}
	var score, read time.Duration
	var sum int64
	for b.Loop() {
		t := time.Now()
		for _, ni := range infos[:500] {
			v, _ := e.plugin.Score(e.ctx, cs, gpu, ni)
			sum += v
		}
		score += time.Since(t)
		t = time.Now()
		for _, ni := range infos[:500] {
			s, err := getState(cs)
			if err != nil {
				b.Fatal(err)
			}
			_, v, _ := e.plugin.nodeVerdict(s, ni.Node())
			sum -= v
		}
		read += time.Since(t)
	}
	if sum != 0 {
		b.Fatalf("the two lookups disagree by %d", sum)
	}
	b.ReportMetric(float64(score.Nanoseconds())/float64(b.N), "score-ns")
	b.ReportMetric(float64(read.Nanoseconds())/float64(b.N), "read-ns")
}
