package computedomain

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
)

// steeringCount reads cdplace_steering_answers_total{answer}.
func steeringCount(t *testing.T, answer string) float64 {
	t.Helper()
	return metricValue(t, "cdplace_steering_answers_total", map[string]string{"answer": answer})
}

// steeringSince returns a check that the policy was asked, and its answer reused, the given
// numbers of times since the last check (or since steeringSince).
func steeringSince(t *testing.T) func(what string, wantAsked, wantReused float64) {
	asked, reused := steeringCount(t, "asked"), steeringCount(t, "reused")
	return func(what string, wantAsked, wantReused float64) {
		t.Helper()
		a, r := steeringCount(t, "asked")-asked, steeringCount(t, "reused")-reused
		if a != wantAsked || r != wantReused {
			t.Fatalf("%s: the policy was asked %v times and its answer reused %v times, want %v and %v", what, a, r, wantAsked, wantReused)
		}
		asked, reused = asked+a, reused+r
	}
}

// A run of plain pods filling a broken clique is steered by one policy answer: the policy marks
// that clique stable, so their own placements (Reserve, then the informer's bound pod) leave the
// answer in use. A placement that breaks an intact clique, a ComputeDomain pod's Reserve, an
// Unreserve and a pod's deletion each make the next plain pod ask again.
func TestPlainPlacementsOnAStableCliqueKeepTheSteeringAnswer(t *testing.T) {
	nodes := append(append(append(rack("a", 1, 4), rack("b", 2, 6)...), rack("c", 3, 4)...), makeNode("cpu-0", 0, 0))
	var pods []*v1.Pod
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		pods = append(pods, makePod(n, "", 4))
	}
	cd0 := cdPod("cd", "w0")
	objs := []runtime.Object{channelTemplate("cd", "uid-cd"), boundTo(makePod("b-user", "", 4), "b-00"), cd0}
	for _, p := range pods {
		objs = append(objs, p)
	}
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1)}, objs...)
	want := steeringSince(t)
	// place reserves pod on node and then delivers it bound, as the informer would.
	place := func(p *v1.Pod, node string) {
		t.Helper()
		if st := e.fh.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), p, node); !st.IsSuccess() {
			t.Fatalf("reserve %s on %s: %v", p.Name, node, st)
		}
		e.apply(boundTo(p, node))
	}

	first := e.schedule(pods[0])
	wantCode(t, "p1", first.preFilter, fwk.Success, "")
	want("p1", 1, 0)
	if !(first.score["b-01"] > first.score["a-00"]) {
		t.Fatalf("broken b before intact a: %v", first.score)
	}
	place(pods[0], "b-01")
	r := e.schedule(pods[1])
	want("p2 after p1 filled a tray of broken b", 0, 1)
	if s1, s2 := mustState(t, first.state), mustState(t, r.state); s1.decision != s2.decision {
		t.Fatal("the reused answer is not the one p1 got")
	}
	if !(r.score["b-02"] > r.score["a-00"] && r.score["b-02"] > r.score["c-00"]) {
		t.Fatalf("the reused answer still sends plain pods to b: %v", r.score)
	}
	place(pods[1], "b-02")
	e.schedule(pods[2])
	want("p3 after p2 in b", 0, 1)

	// p3 breaks intact clique a: the next pod must see it broken.
	place(pods[2], "a-00")
	r = e.schedule(pods[3])
	want("p4 after p3 broke a", 1, 0)
	if !(r.score["a-01"] > r.score["c-00"]) {
		t.Fatalf("a is broken now, c intact: a before c, got %v", r.score)
	}

	// A ComputeDomain pod's Reserve changes what is promised: asked again.
	place(cd0, "c-00")
	e.schedule(pods[4])
	want("p5 after a ComputeDomain pod's Reserve", 1, 0)

	// Reserve then Unreserve (a Permit or binding failure): the tray is free again.
	st := framework.NewCycleState()
	if s := e.fh.RunReservePluginsReserve(e.ctx, st, pods[4], "b-03"); !s.IsSuccess() {
		t.Fatal(s)
	}
	e.fh.RunReservePluginsUnreserve(e.ctx, st, pods[4], "b-03")
	e.schedule(pods[5])
	want("p6 after an Unreserve", 1, 0)

	// A plain pod leaving b frees a tray: asked again.
	e.plugin.feed.deletePod(pods[0].Namespace, pods[0].Name, pods[0].UID)
	e.schedule(pods[6])
	want("p7 after a deletion", 1, 0)
}

func mustState(t *testing.T, cs fwk.CycleState) *state {
	t.Helper()
	s, err := getState(cs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Plain pods whose GPUs come from DRA claims: the claim's allocation (PreBind) is a placement on
// the pod's tray too, so on a stable clique it keeps the answer; a deallocation frees GPUs and
// makes the next pod ask.
func TestPlainClaimAllocationsOnAStableCliqueKeepTheSteeringAnswer(t *testing.T) {
	nodes := append(rack("a", 1, 4), rack("b", 2, 6)...)
	objs := []runtime.Object{gpuTemplate("one-gpu"), boundTo(makePod("b-user", "", 4), "b-00")}
	var pods []*v1.Pod
	for _, n := range []string{"q1", "q2", "q3"} {
		p := podWithClaim(n, v1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To("one-gpu")}, n+"-gpus")
		pods = append(pods, p)
		objs = append(objs, p, gpuClaim(n+"-gpus"))
	}
	e := newEnv(t, "", nodes, nil, objs...)
	want := steeringSince(t)
	wantCode(t, "q1", e.schedule(pods[0]).preFilter, fwk.Success, "")
	want("q1", 1, 0)
	if st := e.fh.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), pods[0], "b-01"); !st.IsSuccess() {
		t.Fatal(st)
	}
	// PreBind allocates the claim, then the pod is bound.
	e.apply(allocated(gpuClaim("q1-gpus"), 4), boundTo(pods[0], "b-01"))
	e.schedule(pods[1])
	want("q2 after q1's claim was allocated on b", 0, 1)
	// q1's claim is deallocated: its GPUs are free again.
	e.apply(gpuClaim("q1-gpus"))
	e.schedule(pods[2])
	want("q3 after a deallocation", 1, 0)
}

// Score takes part in a cycle only when it tells the feasible nodes apart: PreScore leaves it out
// when every one of them would get the same score (a score added alike to every node changes no
// rank), and the metric counts both.
func TestScoreIsLeftOutWhenEveryFeasibleNodeScoresTheSame(t *testing.T) {
	nodes := append(append(rack("a", 1, 4), rack("b", 2, 6)...), rack("c", 3, 4)...)
	plain := makePod("plain", "", 4)
	e := newEnv(t, "", nodes, nil, boundTo(makePod("b-user", "", 4), "b-00"), plain)
	byName := map[string]fwk.NodeInfo{}
	for _, ni := range tf.BuildNodeInfos(e.nodes) {
		byName[ni.Node().Name] = ni
	}
	infos := func(names ...string) []fwk.NodeInfo {
		var out []fwk.NodeInfo
		for _, n := range names {
			out = append(out, byName[n])
		}
		return out
	}
	scored := func() (float64, float64) {
		return metricValue(t, "cdplace_score_cycles_total", map[string]string{"score": "scored"}),
			metricValue(t, "cdplace_score_cycles_total", map[string]string{"score": "skipped"})
	}
	for _, c := range []struct {
		what     string
		feasible []string
		skip     bool
	}{
		{"the broken clique b and the intact a", []string{"a-00", "a-01", "b-01", "b-02"}, false},
		{"intact a and c, alike", []string{"a-00", "a-01", "a-02", "c-00", "c-03"}, true},
		{"one clique's trays", []string{"b-01", "b-02", "b-03"}, true},
		{"intact, then broken last", []string{"a-00", "c-00", "c-01", "b-05"}, false},
		{"one node", []string{"c-02"}, true},
	} {
		cs := framework.NewCycleState()
		if _, st, _ := e.fh.RunPreFilterPlugins(e.ctx, cs, plain); !st.IsSuccess() && !st.IsSkip() {
			t.Fatalf("%s: PreFilter: %v", c.what, st)
		}
		s0, k0 := scored()
		st := e.plugin.PreScore(e.ctx, cs, plain, infos(c.feasible...))
		s1, k1 := scored()
		if c.skip != st.IsSkip() || (!c.skip && !st.IsSuccess()) {
			t.Fatalf("%s: PreScore %v, want skip %v", c.what, st, c.skip)
		}
		if c.skip && (k1-k0 != 1 || s1 != s0) || !c.skip && (s1-s0 != 1 || k1 != k0) {
			t.Fatalf("%s: scored moved by %v and skipped by %v", c.what, s1-s0, k1-k0)
		}
		// What Score says of those nodes agrees: alike exactly when left out.
		seen := map[int64]bool{}
		for _, ni := range infos(c.feasible...) {
			score, st := e.plugin.Score(e.ctx, cs, plain, ni)
			if !st.IsSuccess() {
				t.Fatalf("%s: Score %s: %v", c.what, ni.Node().Name, st)
			}
			seen[score] = true
		}
		if (len(seen) == 1) != c.skip {
			t.Fatalf("%s: scores %v, skipped %v", c.what, seen, c.skip)
		}
	}
	// Through the framework: all free trays of the fleet are scored (b is broken), and the pod
	// goes to b.
	r := e.schedule(plain)
	if r.scoreSkipped || !(r.score["b-01"] > r.score["a-00"]) {
		t.Fatalf("the whole fleet: skipped %v, scores %v", r.scoreSkipped, r.score)
	}
}
