package computedomain

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
)

// The workload cycle's extension points through the real framework: the placements
// RunPlacementGeneratePlugins returns and the totals RunPlacementScorePlugins gives them, with
// the plugin registered for them as the shipped profiles register it.

// placementEnv is newEnv plus a framework over the same plugin instance with the workload
// extension points enabled too (PlacementScore weight 10, as shipped).
func placementEnv(t *testing.T, nodes []*v1.Node, cds []*unstructured.Unstructured, objs ...runtime.Object) *env {
	t.Helper()
	e := newEnv(t, "", nodes, cds, objs...)
	var bound []*v1.Pod
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName != "" {
			bound = append(bound, p)
		}
	}
	factory := func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return e.plugin, nil }
	fh, err := tf.NewFramework(e.ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensionsWithWeight(Name, 10, factory,
			"PreFilter", "Filter", "PreScore", "Score", "Reserve", "PlacementGenerate", "PlacementScore"),
	}, "computedomain-scheduler",
		frameworkruntime.WithClientSet(e.client),
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(bound, nodes)),
	)
	if err != nil {
		t.Fatalf("framework: %v", err)
	}
	e.fh = fh
	return e
}

// gangGroup is PodGroup name with gang minCount and, when topologyKey is set, that topology
// constraint, holding pods (as the scheduler's PodGroupInfo).
func gangGroup(name string, minCount int32, topologyKey string, pods ...*v1.Pod) *framework.PodGroupInfo {
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
	if topologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedulingv1beta1.TopologyConstraint{{Key: topologyKey}}}
	}
	for _, p := range pods {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	}
	return &framework.PodGroupInfo{Namespace: ns, Name: name, Type: fwk.PodGroupKeyType, UnscheduledPods: pods, PodGroup: pg}
}

// generate runs the framework's PlacementGenerate with all nodes as the parent placement (as the
// cycle does for a PodGroup without a parent), or with parent when given.
func (e *env) generate(pg *framework.PodGroupInfo, parent []fwk.NodeInfo) (*framework.CycleState, []*fwk.Placement, *fwk.Status) {
	e.t.Helper()
	if parent == nil {
		var err error
		if parent, err = e.fh.SnapshotSharedLister().NodeInfos().List(); err != nil {
			e.t.Fatal(err)
		}
	}
	state := framework.NewCycleState()
	placements, st := e.fh.RunPlacementGeneratePlugins(e.ctx, state, pg, parent)
	return state, placements, st
}

// scorePlacements runs the framework's PlacementScore over placements (every one taken as
// feasible, as the cycle passes only those) and returns the totals by placement name.
func (e *env) scorePlacements(state *framework.CycleState, pg *framework.PodGroupInfo, placements []*fwk.Placement) (map[string]int64, *fwk.Status) {
	e.t.Helper()
	assignments := make([]*fwk.PodGroupAssignments, len(placements))
	states := make([]fwk.PlacementCycleState, len(placements))
	for i, pl := range placements {
		assignments[i] = &fwk.PodGroupAssignments{Placement: pl}
		ps := framework.NewCycleState()
		ps.SetPodGroupSchedulingCycle(state)
		states[i] = ps
	}
	scores, st := e.fh.RunPlacementScorePlugins(e.ctx, state, pg, assignments, states)
	out := map[string]int64{}
	for _, s := range scores {
		out[s.Placement.Name] = s.TotalScore
	}
	return out, st
}

func placementNames(ps []*fwk.Placement) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
}

func nodeNames(p *fwk.Placement) []string {
	var names []string
	for _, n := range p.Nodes {
		names = append(names, n.Node().Name)
	}
	slices.Sort(names)
	return names
}

// fleet of three cliques: a (18 trays, 10 held by a running domain: 8 free), b (18 free) and
// c (6 free), and the objects of a domain "cd" of 8 (size annotation) whose pods are gang.
func gangFleet() ([]*v1.Node, []*unstructured.Unstructured, []runtime.Object, []*v1.Pod) {
	nodes := append(append(rack("a", 1, 18), rack("b", 2, 18)...), rack("c", 3, 6)...)
	cds := []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 8), computeDomain("filler", "uid-filler", 10)}
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), channelTemplate("filler", "uid-filler")}
	for i := 0; i < 10; i++ {
		objs = append(objs, boundTo(cdPod("filler", fmt.Sprintf("filler-%d", i)), fmt.Sprintf("a-%02d", i)))
	}
	var pods []*v1.Pod
	for i := 0; i < 8; i++ {
		p := cdPod("cd", fmt.Sprintf("gang-%d", i))
		pods = append(pods, p)
		objs = append(objs, p)
	}
	return nodes, cds, objs, pods
}

// A ComputeDomain PodGroup gets one placement per clique that can hold the whole domain (a and
// b; c is too small), each the clique's trays, and best fit ranks a (8 free for 8) over b.
func TestGeneratePlacementsOnePerCliqueThatHoldsTheDomainScoredBestFit(t *testing.T) {
	nodes, cds, objs, pods := gangFleet()
	e := placementEnv(t, nodes, cds, objs...)
	pg := gangGroup("gang", 8, "nvidia.com/gpu.clique", pods...)
	state, placements, st := e.generate(pg, nil)
	wantCode(t, "PlacementGenerate", st, fwk.Success, "")
	if got, want := placementNames(placements), []string{clique(1), clique(2)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("placements %v, want the cliques that can hold 8 trays %v", got, want)
	}
	for i, prefix := range []string{"a-", "b-"} {
		names := nodeNames(placements[i])
		if len(names) != 18 || !strings.HasPrefix(names[0], prefix) || !strings.HasPrefix(names[17], prefix) {
			t.Errorf("placement %s has nodes %v, want the 18 trays of its clique", placements[i].Name, names)
		}
	}
	scores, st := e.scorePlacements(state, pg, placements)
	wantCode(t, "PlacementScore", st, fwk.Success, "")
	// Normalized over the feasible placements and weighted 10, best fit outweighs the whole
	// range of NodeResourcesFit's and PodGroupPodsCount's placement scores (weight 1 each).
	if scores[clique(1)] != 10*fwk.MaxScore || scores[clique(2)] != 10*fwk.MinScore {
		t.Fatalf("best fit: clique a (8 free for 8) must score %d and b (18 free) %d: %v", 10*fwk.MaxScore, 10*fwk.MinScore, scores)
	}
	// The decision is the one PreFilter makes: the group's pods reuse it.
	if r := e.schedule(pods[1]); !r.preFilter.IsSuccess() || len(r.allowed) != 36 || r.filter["a-00"].IsSuccess() {
		t.Fatalf("PreFilter of a gang pod after GeneratePlacements: %v allowed %v", r.preFilter, r.allowed)
	}
}

// The placements stay inside the parent placement (same NodeInfo instances, as the snapshot
// requires); a topology key other than the clique label splits a clique further.
func TestGeneratePlacementsIntersectTheParentAndSplitByTopology(t *testing.T) {
	nodes, cds, objs, pods := gangFleet()
	for _, n := range nodes {
		n.Labels["example.com/row"] = map[bool]string{true: "r1", false: "r2"}[n.Name < "b-09"]
	}
	e := placementEnv(t, nodes, cds, objs...)
	all, err := e.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	var parent []fwk.NodeInfo
	for _, ni := range all {
		if n := ni.Node().Name; n >= "a-12" && n < "b" || strings.HasPrefix(n, "b-") {
			parent = append(parent, ni)
		}
	}
	_, placements, st := e.generate(gangGroup("gang", 8, "", pods...), parent)
	wantCode(t, "PlacementGenerate in a parent", st, fwk.Success, "")
	if got := placementNames(placements); !reflect.DeepEqual(got, []string{clique(1), clique(2)}) {
		t.Fatalf("placements %v", got)
	}
	if got := nodeNames(placements[0]); len(got) != 6 || got[0] != "a-12" {
		t.Fatalf("clique a's placement %v, want only the parent's trays a-12..a-17", got)
	}
	for _, pl := range placements {
		for _, ni := range pl.Nodes {
			if !slices.Contains(parent, ni) {
				t.Fatalf("placement %s has %s, not the parent's NodeInfo", pl.Name, ni.Node().Name)
			}
		}
	}

	_, placements, st = e.generate(gangGroup("gang", 8, "example.com/row", pods...), nil)
	wantCode(t, "PlacementGenerate by row", st, fwk.Success, "")
	want := []string{clique(1) + "/example.com/row=r1", clique(2) + "/example.com/row=r1", clique(2) + "/example.com/row=r2"}
	if got := placementNames(placements); !reflect.DeepEqual(got, want) {
		t.Fatalf("placements by row %v, want %v", got, want)
	}
}

// A PodGroup that is not ComputeDomain work gets the parent placement unchanged and neutral
// scores, with no call into the policy.
func TestPlacementsOfOtherPodGroupsAreLeftToOthers(t *testing.T) {
	nodes, cds, objs, _ := gangFleet()
	plain := []*v1.Pod{makePod("plain-0", "", 4), makePod("plain-1", "", 4)}
	e := placementEnv(t, nodes, cds, objs...)
	all, err := e.fh.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	pg := gangGroup("plain", 2, "", plain...)
	state, placements, st := e.generate(pg, all)
	wantCode(t, "PlacementGenerate", st, fwk.Success, "")
	if len(placements) != 1 || len(placements[0].Nodes) != len(all) {
		t.Fatalf("a PodGroup without ComputeDomain pods got %v, want the parent placement", placementNames(placements))
	}
	if n := len(e.plugin.reuse.m); n != 0 {
		t.Fatalf("%d policy decisions made for a PodGroup without ComputeDomain pods", n)
	}
	scores, st := e.scorePlacements(state, pg, []*fwk.Placement{placements[0], {Name: "other", Nodes: all[:3]}})
	wantCode(t, "PlacementScore", st, fwk.Success, "")
	if scores[""] != scores["other"] {
		t.Fatalf("scores of another PodGroup's placements differ: %v", scores)
	}
}

// A non-ComputeDomain PodGroup with a topology constraint is placed as the in-tree
// TopologyPlacementGenerator places it: by the domain its scheduled pods already run in.
func TestOtherPodGroupsWithATopologyGetTheInTreePlacements(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	nodes := append(rack("a", 1, 2), rack("b", 2, 2)...)
	for i, n := range nodes {
		n.Labels["topology.kubernetes.io/zone"] = fmt.Sprintf("z%d", i%2)
	}
	running := boundTo(makePod("plain-0", "", 1), "a-01")
	running.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("plain")}
	e := placementEnv(t, nodes, nil, running)
	pg := gangGroup("plain", 2, "topology.kubernetes.io/zone", makePod("plain-1", "", 1))
	_, placements, st := e.generate(pg, nil)
	wantCode(t, "PlacementGenerate", st, fwk.Success, "")
	if got := placementNames(placements); !reflect.DeepEqual(got, []string{"z1"}) {
		t.Fatalf("placements %v, want only zone z1, where the group's pod runs", got)
	}
}

// A domain larger than any clique gets one placement: the cliques of its layout together (20
// trays: b's 18 and the 6 of c, the best fit for the remainder; a has 8 free), so the workload
// cycle binds all its segments or none.
func TestGeneratePlacementsForADomainLargerThanACliqueIsItsWholeLayout(t *testing.T) {
	nodes, cds, objs, _ := gangFleet()
	cds = append(cds, computeDomain("big", "uid-big", 20))
	big := cdPod("big", "big-0")
	objs = append(objs, channelTemplate("big", "uid-big"), big)
	e := placementEnv(t, nodes, cds, objs...)
	_, placements, st := e.generate(gangGroup("big", 20, "", big), nil)
	wantCode(t, "PlacementGenerate", st, fwk.Success, "")
	if got, want := placementNames(placements), []string{clique(2) + "+" + clique(3)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("placements %v, want the layout's cliques as one %v", got, want)
	}
	if n := len(placements[0].Nodes); n != 24 {
		t.Fatalf("the placement has %d nodes, want b's 18 and c's 6", n)
	}
}

// Rejections carry a reason: the policy's when the domain fits no clique, this plugin's for a
// group of two domains, and an Error for what the framework never passes.
func TestPlacementRejectionsSayWhy(t *testing.T) {
	nodes, cds, objs, pods := gangFleet()
	cds = append(cds, computeDomain("huge", "uid-huge", 60), computeDomain("two", "uid-two", 2))
	huge := cdPod("huge", "huge-0")
	other := cdPod("two", "two-0")
	objs = append(objs, channelTemplate("huge", "uid-huge"), channelTemplate("two", "uid-two"), huge, other)
	e := placementEnv(t, nodes, cds, objs...)

	_, _, st := e.generate(gangGroup("huge", 60, "", huge), nil)
	wantCode(t, "a domain larger than the fleet", st, fwk.UnschedulableAndUnresolvable, "all segments or none: it needs 60 trays and all NVLink cliques together have 42 usable")

	_, _, st = e.generate(gangGroup("mixed", 2, "", pods[0], other), nil)
	wantCode(t, "two domains in one group", st, fwk.UnschedulableAndUnresolvable, "must share one ComputeDomain")

	c := clique(3)
	var small []fwk.NodeInfo
	all, _ := e.fh.SnapshotSharedLister().NodeInfos().List()
	for _, ni := range all {
		if ni.Node().Labels["nvidia.com/gpu.clique"] == c {
			small = append(small, ni)
		}
	}
	_, _, st = e.generate(gangGroup("gang", 8, "", pods...), small)
	wantCode(t, "a parent without a fitting clique", st, fwk.Unschedulable, "no NVLink clique that can hold ComputeDomain uid-cd whole has trays in the parent placement (6 nodes)")

	if _, st := e.plugin.GeneratePlacements(e.ctx, framework.NewCycleState(), gangGroup("gang", 8, "", pods...), nil); st.Code() != fwk.Error {
		t.Fatalf("no parent placement: %v, want Error", st)
	}
	state, placements, st := e.generate(gangGroup("gang", 8, "", pods...), nil)
	wantCode(t, "PlacementGenerate", st, fwk.Success, "")
	ps := framework.NewCycleState()
	ps.SetPodGroupSchedulingCycle(state)
	stranger := &fwk.PodGroupAssignments{Placement: &fwk.Placement{Name: placements[0].Name}}
	if _, st := e.plugin.ScorePlacement(e.ctx, ps, gangGroup("gang", 8, "", pods...), stranger); st.Code() != fwk.Error ||
		!strings.Contains(st.Message(), "was not generated by ComputeDomainPlacement") {
		t.Fatalf("scoring a placement the plugin did not generate: %v, want an Error saying so", st)
	}
}
