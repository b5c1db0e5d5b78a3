package computedomain

import (
	"reflect"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/utils/ptr"
)

func TestPodsWithoutComputeDomainAreSkippedWhenNotSteered(t *testing.T) {
	plain := makePod("plain", "", 4)
	for _, c := range []struct {
		what, args string
		nodes      []*v1.Node
	}{
		{"plainPodSteering off", `{"plainPodSteering": false}`, rack("a", 1, 2)},
		{"no node has a clique", "", []*v1.Node{makeNode("cpu-0", 0, 4), makeNode("cpu-1", 0, 4)}},
	} {
		e := newEnv(t, c.args, c.nodes, nil, plain)
		crossed := e.plugin.Cluster().Crossings()
		r := e.schedule(plain)
		if !r.preFilter.IsSuccess() || !r.skipped {
			t.Fatalf("%s: want Skip, got %v skipped=%v", c.what, r.preFilter, r.skipped)
		}
		for node, st := range r.filter {
			if !st.IsSuccess() {
				t.Errorf("%s: %s: plugin must not filter a skipped pod: %v", c.what, node, st)
			}
		}
		if got := e.plugin.Cluster().Crossings() - crossed; got != 0 {
			t.Errorf("%s: a skipped plain pod crossed into the library %d times", c.what, got)
		}
	}
}

// Plain pods are scored toward nodes without a clique, then broken cliques, then intact ones;
// a plain GPU pod may not take the last free tray a starting domain still needs; every plain
// pod on one view shares one policy call; Filter runs only when the answer keeps a node from it.
func TestPlainPodsAreSteered(t *testing.T) {
	nodes := append(append(rack("a", 1, 4), rack("b", 2, 4)...), makeNode("cpu-0", 0, 4))
	cd0, cd1, cd2 := boundTo(cdPod("cd", "w0"), "b-00"), boundTo(cdPod("cd", "w1"), "b-01"), cdPod("cd", "w2")
	plain, other := makePod("plain", "", 4), makePod("other", "", 4)
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 3)},
		channelTemplate("cd", "uid-cd"), cd0, cd1, cd2, plain, other)
	if err := e.plugin.feed.flush(); err != nil {
		t.Fatal(err)
	}
	crossed := e.plugin.Cluster().Crossings()
	r := e.schedule(plain)
	wantCode(t, "prefilter", r.preFilter, fwk.Success, "")
	// Nothing is kept from it: Filter is skipped (no lookups per node), Score still runs.
	if !r.skipped || r.allowed != nil {
		t.Fatalf("a steered pod that no node is kept from skips Filter and is never restricted: skipped=%v allowed=%v", r.skipped, r.allowed)
	}
	for node, st := range r.filter {
		if !st.IsSuccess() {
			t.Fatalf("%s: with a spare free tray in b nothing is rejected: %v", node, st)
		}
	}
	if !(r.score["cpu-0"] > r.score["b-02"] && r.score["b-02"] > r.score["a-00"]) {
		t.Fatalf("want cpu-0 > b (broken) > a (intact), got %v", r.score)
	}
	e.schedule(other)
	if got := e.plugin.Cluster().Crossings() - crossed; got != 1 {
		t.Fatalf("two plain pods on one view crossed %d times, want 1 shared steering call", got)
	}
	// A plain pod takes b-02: b-03 is the last free tray of b, promised to cd's last pod.
	e.apply(boundTo(makePod("taken", "", 4), "b-02"))
	r = e.schedule(plain)
	if r.skipped {
		t.Fatal("a tray is kept from the pod: Filter must run")
	}
	wantCode(t, "b-03", r.filter["b-03"], fwk.Unschedulable, "promised to ComputeDomain team-a/cd (1 more pod(s))")
	wantCode(t, "a-00", r.filter["a-00"], fwk.Success, "")
	wantCode(t, "cpu-0", r.filter["cpu-0"], fwk.Success, "")
	// cd's own pod still goes there.
	if r := e.schedule(cd2); !r.filter["b-03"].IsSuccess() {
		t.Fatalf("the domain's pod is kept off its promised tray: %v", r.filter["b-03"])
	}
	// Pods whose node a DaemonSet picks (an IMEX daemon, a device plugin) are never steered.
	ds := makePod("ds", "", 4)
	ds.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "gpu-agent", UID: "uid-ds", Controller: ptr.To(true)}}
	imex := podWithClaim("imex", v1.PodResourceClaim{Name: "c", ResourceClaimTemplateName: ptr.To("cd-daemon")}, "")
	e.apply(daemonTemplate("cd-daemon", "uid-cd"), ds, imex)
	for _, p := range []*v1.Pod{ds, imex} {
		if r := e.schedule(p); !r.skipped {
			t.Fatalf("%s: want Skip, got %v", p.Name, r.preFilter)
		}
	}
}

func TestBestFitAcrossCliquesThroughTheFramework(t *testing.T) {
	nodes := append(append(rack("a", 1, 10), rack("b", 2, 5)...), makeNode("cpu-0", 0, 0))
	pods := []*v1.Pod{cdPod("cd", "p0"), cdPod("cd", "p1"), cdPod("cd", "p2"), cdPod("cd", "p3")}
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 0)},
		channelTemplate("cd", "uid-cd"), pods[0], pods[1], pods[2], pods[3])
	r := e.schedule(pods[0])
	wantCode(t, "prefilter", r.preFilter, fwk.Success, "")
	// Both cliques fit (fewer than the policy's CANDIDATE_CLIQUES), so both are offered; never cpu-0.
	if len(r.allowed) != 15 || slices.Contains(r.allowed, "cpu-0") {
		t.Fatalf("PreFilterResult of a domain that has not started = %v; want the 15 trays of a and b", r.allowed)
	}
	if r.score["b-00"] <= r.score["a-00"] {
		t.Fatalf("5 free trays fit 4 pods better than 10: b=%d a=%d", r.score["b-00"], r.score["a-00"])
	}
}

func TestANewDomainIsOfferedTheBestFittingCliques(t *testing.T) {
	// Cliques of 9, 8, 7, 6, 5 free trays and one of 3: a domain of 4 fits five of them, and the
	// three tightest (5, 6, 7) are offered.
	var nodes []*v1.Node
	for i, n := range []int{9, 8, 7, 6, 5, 3} {
		nodes = append(nodes, rack(string(rune('a'+i)), i+1, n)...)
	}
	pods := []*v1.Pod{cdPod("cd", "p0"), cdPod("cd", "p1"), cdPod("cd", "p2"), cdPod("cd", "p3")}
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 0)},
		channelTemplate("cd", "uid-cd"), pods[0], pods[1], pods[2], pods[3])
	r := e.schedule(pods[0])
	wantCode(t, "prefilter", r.preFilter, fwk.Success, "")
	cliques := map[byte]int{}
	for _, n := range r.allowed {
		cliques[n[0]]++
	}
	if want := map[byte]int{'c': 7, 'd': 6, 'e': 5}; !reflect.DeepEqual(cliques, want) {
		t.Fatalf("PreFilterResult %v; want the trays of the three best-fitting cliques c, d, e", r.allowed)
	}
	if r.score["e-00"] <= r.score["d-00"] || r.score["d-00"] <= r.score["c-00"] {
		t.Fatalf("best fit order e > d > c broken: %v", r.score)
	}
}

func TestAStartedDomainIsRestrictedToItsClique(t *testing.T) {
	nodes := append(rack("a", 1, 3), rack("b", 2, 3)...)
	p1 := cdPod("cd", "p1")
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 0)},
		channelTemplate("cd", "uid-cd"), boundTo(cdPod("cd", "p0"), "a-00"), p1)
	r := e.schedule(p1)
	wantCode(t, "prefilter", r.preFilter, fwk.Success, "")
	if want := []string{"a-00", "a-01", "a-02"}; !reflect.DeepEqual(r.allowed, want) {
		t.Fatalf("PreFilterResult %v, want %v", r.allowed, want)
	}
	wantCode(t, "a-00", r.filter["a-00"], fwk.Unschedulable, "already runs a pod of ComputeDomain team-a/cd")
	wantCode(t, "b-00", r.filter["b-00"], fwk.UnschedulableAndUnresolvable, "already runs in NVLink clique")
	wantCode(t, "a-01", r.filter["a-01"], fwk.Success, "")
}

func TestPreFilterRejectionsCarryThePolicyReason(t *testing.T) {
	nodes := rack("a", 1, 18)
	six := makePod("six-0", "six-channel", 2)
	big := cdPod("big", "big-0")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("six", "uid-six", 0), computeDomain("big", "uid-big", 24)},
		channelTemplate("six", "uid-six"), channelTemplate("big", "uid-big"), six, big)
	wantCode(t, "6-GPU domain", e.schedule(six).preFilter, fwk.UnschedulableAndUnresolvable,
		"requests 2 of 4 GPUs per tray; would strand 2")
	r := e.schedule(big)
	wantCode(t, "24-tray domain", r.preFilter, fwk.UnschedulableAndUnresolvable, "needs 24 trays (size 24")
	wantCode(t, "24-tray domain", r.preFilter, fwk.UnschedulableAndUnresolvable, "(the largest clique has 18 usable trays), so it is placed as segments")
	wantCode(t, "24-tray domain", r.preFilter, fwk.UnschedulableAndUnresolvable, "all NVLink cliques together have 18 usable")
}

func TestOneDomainPerNodeAndTheStaleLabel(t *testing.T) {
	nodes := rack("a", 1, 3)
	nodes[2].Labels[DomainLabel] = "uid-gone"
	p := cdPod("mine", "p")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("mine", "uid-mine", 1), computeDomain("other", "uid-other", 1)},
		channelTemplate("mine", "uid-mine"), channelTemplate("other", "uid-other"),
		boundTo(cdPod("other", "o"), "a-00"), p)
	r := e.schedule(p)
	wantCode(t, "a-00", r.filter["a-00"], fwk.Unschedulable, "held by ComputeDomain team-a/other")
	wantCode(t, "a-02", r.filter["a-02"], fwk.Unschedulable, "still carries resource.nvidia.com/computeDomain=uid-gone")
	wantCode(t, "a-01", r.filter["a-01"], fwk.Success, "")

	// Host-managed IMEX: no node label, domains may share (a zero-GPU pod of other is there).
	e = newEnv(t, `{"imexMode":"HostManaged"}`, rack("a", 1, 3),
		[]*unstructured.Unstructured{computeDomain("mine", "uid-mine", 1), computeDomain("other", "uid-other", 1)},
		channelTemplate("mine", "uid-mine"), channelTemplate("other", "uid-other"),
		boundTo(makePod("o", "other-channel", 0), "a-00"), cdPod("mine", "p"))
	wantCode(t, "host-managed a-00", e.schedule(cdPod("mine", "p")).filter["a-00"], fwk.Success, "")
}

func TestAddPodAndRemovePodChangeFilter(t *testing.T) {
	nodes := rack("a", 1, 3)
	batch := boundTo(makePod("batch", "", 4), "a-00")
	other := cdPod("other", "o")
	p := cdPod("cd", "p")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1), computeDomain("other", "uid-other", 1)},
		channelTemplate("cd", "uid-cd"), channelTemplate("other", "uid-other"), batch, other, p)
	r := e.schedule(p)
	wantCode(t, "a-00 before", r.filter["a-00"], fwk.Unschedulable, "GPUs in use by other pods")
	infos := tf.BuildNodeInfos(e.nodes)

	// Preemption's dry run on a clone: remove the batch pod, then a-00 is free.
	clone := r.state.Clone()
	batchInfo, _ := framework.NewPodInfo(batch)
	if st := e.fh.RunPreFilterExtensionRemovePod(e.ctx, clone, p, batchInfo, infos[0]); !st.IsSuccess() {
		t.Fatalf("RemovePod: %v", st)
	}
	wantCode(t, "a-00 after RemovePod", e.fh.RunFilterPlugins(e.ctx, clone, p, infos[0]), fwk.Success, "")
	// AddPod of a nominated pod of another domain holds a-01.
	otherInfo, _ := framework.NewPodInfo(other)
	if st := e.fh.RunPreFilterExtensionAddPod(e.ctx, clone, p, otherInfo, infos[1]); !st.IsSuccess() {
		t.Fatalf("AddPod: %v", st)
	}
	wantCode(t, "a-01 after AddPod", e.fh.RunFilterPlugins(e.ctx, clone, p, infos[1]), fwk.Unschedulable, "held by ComputeDomain team-a/other")
	// The original cycle state is untouched by the clone's changes.
	wantCode(t, "a-00 original", e.fh.RunFilterPlugins(e.ctx, r.state, p, infos[0]), fwk.Unschedulable, "")
	wantCode(t, "a-01 original", e.fh.RunFilterPlugins(e.ctx, r.state, p, infos[1]), fwk.Success, "")
}

// Filter and Score find a cycle's state whichever cycle wrote or read last (the plugin remembers
// one, state.go): two pods' cycles interleaved each keep their own answer.
func TestInterleavedCyclesKeepTheirOwnState(t *testing.T) {
	nodes := rack("a", 1, 3)
	batch := boundTo(makePod("batch", "", 4), "a-00")
	p, q := cdPod("cd", "p"), cdPod("other", "q")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("cd", "uid-cd", 1), computeDomain("other", "uid-other", 3)},
		channelTemplate("cd", "uid-cd"), channelTemplate("other", "uid-other"), batch, p, q)
	infos := tf.BuildNodeInfos(e.nodes)
	csP, csQ := framework.NewCycleState(), framework.NewCycleState()
	if _, st, _ := e.fh.RunPreFilterPlugins(e.ctx, csP, p); !st.IsSuccess() {
		t.Fatalf("PreFilter p: %v", st)
	}
	// q's domain needs 3 trays, and a-00 is busy: q is rejected everywhere, p is not.
	if _, st, _ := e.fh.RunPreFilterPlugins(e.ctx, csQ, q); st.IsSuccess() {
		t.Fatalf("PreFilter q: %v, want a rejection", st)
	}
	wantCode(t, "p on a-01 after q's PreFilter", e.fh.RunFilterPlugins(e.ctx, csP, p, infos[1]), fwk.Success, "")
	wantCode(t, "p on a-00 after q's PreFilter", e.fh.RunFilterPlugins(e.ctx, csP, p, infos[0]), fwk.Unschedulable, "GPUs in use by other pods")
	wantCode(t, "q on a-01", e.fh.RunFilterPlugins(e.ctx, csQ, q, infos[1]), fwk.Unschedulable, "")
	// Score after another cycle's PreScore reads its own cycle's decision too.
	plain := makePod("plain", "", 4)
	feedObject(t, e.plugin.feed, plain)
	csPlain := framework.NewCycleState()
	if _, st, _ := e.fh.RunPreFilterPlugins(e.ctx, csPlain, plain); !st.IsSuccess() && !st.IsSkip() {
		t.Fatalf("PreFilter plain: %v", st)
	}
	feasible := infos[1:]
	if st := e.fh.RunPreScorePlugins(e.ctx, csP, p, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore p: %v", st)
	}
	s, err := getState(csP)
	if err != nil {
		t.Fatal(err)
	}
	_, want, _ := s.decision.Node(infos[1].Node().Name, infos[1].Node().Labels["nvidia.com/gpu.clique"])
	if st := e.fh.RunPreScorePlugins(e.ctx, csPlain, plain, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore plain: %v", st)
	}
	got, st := e.plugin.Score(e.ctx, csP, p, infos[1])
	if !st.IsSuccess() || got != want {
		t.Fatalf("Score of p on a-01 after the plain pod's PreScore: %d (%v), want %d", got, st, want)
	}
	if m := e.plugin.current.Load(); m == nil || m.cs != csPlain {
		t.Fatalf("the plain pod's cycle should be the one remembered")
	}
}

func TestReserveCountsAtOnceAndUnreserveRestores(t *testing.T) {
	nodes := rack("a", 1, 2)
	x0, y0 := cdPod("x", "x0"), cdPod("y", "y0")
	e := newEnv(t, "", nodes,
		[]*unstructured.Unstructured{computeDomain("x", "uid-x", 1), computeDomain("y", "uid-y", 2)},
		channelTemplate("x", "uid-x"), channelTemplate("y", "uid-y"), x0, y0)
	wantCode(t, "y0 before", e.schedule(y0).preFilter, fwk.Success, "")
	state := framework.NewCycleState()
	if st := e.fh.RunReservePluginsReserve(e.ctx, state, x0, "a-00"); !st.IsSuccess() {
		t.Fatalf("reserve: %v", st)
	}
	wantCode(t, "y0 after reserve", e.schedule(y0).preFilter, fwk.Unschedulable, "needs 2 free trays")
	e.fh.RunReservePluginsUnreserve(e.ctx, state, x0, "a-00")
	wantCode(t, "y0 after unreserve", e.schedule(y0).preFilter, fwk.Success, "")
}

func TestInformerUpdatesReachThePolicy(t *testing.T) {
	nodes := rack("a", 1, 2)
	p := cdPod("cd", "p")
	e := newEnv(t, `{"plainPodSteering": false}`, nodes, nil, p)
	// No template yet: nothing names a domain, so the pod is not a ComputeDomain pod (and DRA
	// holds it until its claim can be made).
	if r := e.schedule(p); !r.skipped {
		t.Fatalf("a pod whose claim names no domain yet is skipped: %v", r.preFilter)
	}
	if _, err := e.client.ResourceV1().ResourceClaimTemplates(ns).Create(e.ctx, channelTemplate("cd", "uid-cd"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.schedule(p).preFilter.Code() == fwk.UnschedulableAndUnresolvable })
	wantCode(t, "no domain", e.schedule(p).preFilter, fwk.UnschedulableAndUnresolvable, "ComputeDomain with UID uid-cd (named by ResourceClaimTemplate team-a/cd-channel) does not exist")
	// The ComputeDomain arrives through the dynamic informer.
	if _, err := e.dyn.Resource(ComputeDomainGVR).Namespace(ns).Create(e.ctx, computeDomain("cd", "uid-cd", 2), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.schedule(p).preFilter.IsSuccess() })
}
