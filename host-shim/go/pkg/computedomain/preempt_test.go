package computedomain

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

// gangFixture: cliques a and b of 4 trays; domain low (priority 1) fills a-00..02, domain mid
// (priority 5) fills b-00..02, domain high (priority 100, 4 pods) is pending, and domain huge
// (priority 100, 5 pods) is larger than any clique (segments; gang preemption makes room in one clique only).
func gangFixture(t *testing.T) (*env, map[string]*v1.Pod) {
	t.Helper()
	pods := map[string]*v1.Pod{}
	var objs []runtime.Object
	var cds []*unstructured.Unstructured
	add := func(cd string, size int, prio int32, rackName string) {
		cds = append(cds, computeDomain(cd, "uid-"+cd, size))
		objs = append(objs, channelTemplate(cd, "uid-"+cd))
		for i := 0; i < size; i++ {
			p := cdPod(cd, cd+"-"+string(rune('0'+i)))
			p.Spec.Priority = ptr.To(prio)
			p.Labels = map[string]string{"app": cd}
			if rackName != "" {
				boundTo(p, rackName+"-0"+string(rune('0'+i)))
			}
			pods[p.Name] = p
			objs = append(objs, p)
		}
	}
	add("low", 3, 1, "a")
	add("mid", 3, 5, "b")
	add("high", 4, 100, "")
	add("huge", 5, 100, "")
	plain := makePod("web", "", 0)
	pods["web"] = plain
	objs = append(objs, plain)
	objs = append(objs, &policy.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "low", Namespace: ns},
		Spec:       policy.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "low"}}},
		Status:     policy.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
	})
	nodes := append(rack("a", 1, 4), rack("b", 2, 4)...)
	e := newEnv(t, "", nodes, cds, objs...)
	e.events.Verbose = true // events name the kind of the object they regard
	return e, pods
}

func (e *env) postFilter(pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	return e.plugin.PostFilter(e.ctx, framework.NewCycleState(), pod, nil)
}

func TestGangPreemptionEvictsTheLowestPriorityDomainWhole(t *testing.T) {
	e, pods := gangFixture(t)
	e.client.ClearActions()
	res, st := e.postFilter(pods["high-0"])
	wantCode(t, "postfilter", st, fwk.Success, "")
	if res == nil || res.NominatedNodeName != "a-03" || res.Mode() != fwk.ModeOverride {
		t.Fatalf("nominate high-0 to the free tray of the freed clique: %+v", res)
	}
	// Every pod of low, and nothing else: a DisruptionTarget patch, then a delete with its UID.
	patched, deleted := map[string]bool{}, map[string]bool{}
	for _, a := range e.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			if a.GetSubresource() != "status" || !strings.Contains(string(a.GetPatch()), `"reason":"PreemptionByScheduler"`) ||
				!strings.Contains(string(a.GetPatch()), `"type":"DisruptionTarget"`) {
				t.Fatalf("unexpected patch %s %s", a.GetName(), a.GetPatch())
			}
			patched[a.GetName()] = true
		case k8stesting.DeleteAction:
			if !patched[a.GetName()] {
				t.Fatalf("%s deleted before its DisruptionTarget condition", a.GetName())
			}
			opts := a.GetDeleteOptions()
			if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != pods[a.GetName()].UID {
				t.Fatalf("delete of %s without its UID precondition: %+v", a.GetName(), opts)
			}
			deleted[a.GetName()] = true
		}
	}
	if len(deleted) != 3 || !deleted["low-0"] || !deleted["low-1"] || !deleted["low-2"] {
		t.Fatalf("deleted %v, want exactly low-0..2", deleted)
	}
	var victimEvents, domainEvents, victimDomainEvents int
	for len(e.events.Events) > 0 {
		ev := <-e.events.Events
		switch {
		case strings.Contains(ev, "Preempted") && strings.Contains(ev, "Preempted by pod uid-high-0"):
			victimEvents++
			if !strings.Contains(ev, "violate a PodDisruptionBudget") {
				t.Errorf("the PDB of low allows 1 of 3: the event should say so: %s", ev)
			}
		case strings.Contains(ev, "GangPreemption") && strings.Contains(ev, "kind=ComputeDomain") && strings.Contains(ev, "nominated to node a-03"):
			domainEvents++
		case strings.HasPrefix(ev, "Normal Preempted Preempting ComputeDomain "+ns+"/low preempted whole by gang preemption for pod "+ns+"/high-0 in NVLink clique") && strings.Contains(ev, "kind=ComputeDomain"):
			victimDomainEvents++
		default:
			t.Errorf("unexpected event %q", ev)
		}
	}
	if victimEvents != 3 || domainEvents != 1 || victimDomainEvents != 1 {
		t.Fatalf("events: %d on victims, %d on the ComputeDomain, %d on the victim ComputeDomain", victimEvents, domainEvents, victimDomainEvents)
	}
	// Until the nomination reaches the view, the domain's other pods do not preempt again.
	e.client.ClearActions()
	_, st = e.postFilter(pods["high-1"])
	wantCode(t, "sibling", st, fwk.UnschedulableAndUnresolvable, "waiting for the victims of the preemption made for pod "+ns+"/high-0")
	if len(e.client.Actions()) != 0 {
		t.Fatalf("a sibling must not evict: %v", e.client.Actions())
	}
}

func TestGangPreemptionDeclines(t *testing.T) {
	e, pods := gangFixture(t)
	before := e.plugin.Cluster().Crossings()
	_, st := e.postFilter(pods["web"])
	wantCode(t, "plain pod", st, fwk.Unschedulable, "")
	if e.plugin.Cluster().Crossings() != before {
		t.Fatal("a pod without a ComputeDomain must not cost a policy call: DefaultPreemption handles it")
	}

	never := pods["high-0"].DeepCopy()
	never.Spec.PreemptionPolicy = ptr.To(v1.PreemptNever)
	_, st = e.postFilter(never)
	wantCode(t, "preemptionPolicy Never", st, fwk.UnschedulableAndUnresolvable, "preemptionPolicy=Never")
	if e.plugin.Cluster().Crossings() != before {
		t.Fatal("preemptionPolicy Never must not cost a policy call")
	}

	_, st = e.postFilter(pods["huge-0"])
	wantCode(t, "too big", st, fwk.UnschedulableAndUnresolvable, "gang preemption makes room in one clique only: preemption cannot help")
	// low (priority 1) cannot preempt mid (5) nor itself.
	_, st = e.postFilter(pods["low-0"])
	wantCode(t, "started domain", st, fwk.UnschedulableAndUnresolvable, "already has NVLink clique")
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "delete" || a.GetVerb() == "patch" {
			t.Fatalf("nothing may be evicted: %v", a)
		}
	}
}

func TestPDBViolationsAreCountedAsDefaultPreemptionCounts(t *testing.T) {
	pdb := func(name, app string, allowed int32, disrupted ...string) *policy.PodDisruptionBudget {
		p := &policy.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:   policy.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, DisruptedPods: map[string]metav1.Time{}}}
		for _, d := range disrupted {
			p.Status.DisruptedPods[d] = metav1.Now()
		}
		return p
	}
	pod := func(name, app string) *v1.Pod {
		p := makePod(name, "", 0)
		if app != "" {
			p.Labels = map[string]string{"app": app}
		}
		return p
	}
	victims := []*v1.Pod{pod("x0", "x"), pod("x1", "x"), pod("x2", "x"), pod("y0", "y"), pod("z0", "")}
	for _, c := range []struct {
		name string
		pdbs []*policy.PodDisruptionBudget
		want int
	}{
		{"none", nil, 0},
		{"one allowed of three", []*policy.PodDisruptionBudget{pdb("x", "x", 1)}, 2},
		{"already disrupted does not count", []*policy.PodDisruptionBudget{pdb("x", "x", 1, "x0")}, 1},
		{"another namespace", []*policy.PodDisruptionBudget{func() *policy.PodDisruptionBudget { p := pdb("x", "x", 0); p.Namespace = "other"; return p }()}, 0},
		{"empty selector matches nothing", []*policy.PodDisruptionBudget{func() *policy.PodDisruptionBudget {
			p := pdb("x", "x", 0)
			p.Spec.Selector = &metav1.LabelSelector{}
			return p
		}()}, 0},
		{"two budgets", []*policy.PodDisruptionBudget{pdb("x", "x", 3), pdb("y", "y", 0)}, 1},
	} {
		if got := countPDBViolations(c.pdbs, victims); got != c.want {
			t.Errorf("%s: %d violations, want %d", c.name, got, c.want)
		}
	}
}

// podGroup is a PodGroupInfo of unscheduled pods (the workload cycle's argument).
type podGroup struct {
	fwk.PodGroupInfo
	pods []*v1.Pod
}

func (g podGroup) GetUnscheduledPods() []*v1.Pod { return g.pods }

// The workload cycle's PodGroupPostFilter gets the same gang preemption for a group of
// ComputeDomain pods (nominating its first ComputeDomain pod); a group of other pods is left to
// the next plugins without a policy call.
func TestPodGroupPostFilterPreemptsForAGroupOfComputeDomainPods(t *testing.T) {
	e, pods := gangFixture(t)
	crossed := e.plugin.Cluster().Crossings()
	res, st := e.plugin.PodGroupPostFilter(e.ctx, nil, podGroup{pods: []*v1.Pod{pods["web"]}}, nil)
	wantCode(t, "plain group", st, fwk.Unschedulable, "")
	if res != nil || e.plugin.Cluster().Crossings() != crossed {
		t.Fatalf("a group without ComputeDomain pods: no result, no call (%+v, %d calls)", res, e.plugin.Cluster().Crossings()-crossed)
	}
	e.client.ClearActions()
	group := podGroup{pods: []*v1.Pod{pods["web"], pods["high-1"], pods["high-0"]}}
	res, st = e.plugin.PodGroupPostFilter(e.ctx, nil, group, nil)
	wantCode(t, "group", st, fwk.Success, "")
	info := res.NominatingInfos[types.NamespacedName{Namespace: ns, Name: "high-1"}]
	if len(res.NominatingInfos) != 1 || info == nil || info.NominatedNodeName != "a-03" || info.Mode() != fwk.ModeOverride {
		t.Fatalf("nominate high-1 (the first ComputeDomain pod) to a-03: %+v", res.NominatingInfos)
	}
	deleted := 0
	for _, a := range e.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			if !strings.HasPrefix(d.GetName(), "low-") {
				t.Fatalf("deleted %s; only low's pods are victims", d.GetName())
			}
			deleted++
		}
	}
	if deleted != 3 {
		t.Fatalf("deleted %d pods, want low's 3", deleted)
	}
	// A second group cycle while the victims leave does not preempt again.
	_, st = e.plugin.PodGroupPostFilter(e.ctx, nil, group, nil)
	wantCode(t, "again", st, fwk.UnschedulableAndUnresolvable, "waiting for the victims")
}

// Gang preemption's refusal is reused for the domain's next pods while the view is unchanged
// (a waiting domain's pods are each retried for every tray freed anywhere), and asked again
// once anything crossed into the view.
func TestGangPreemptionRefusalIsReusedOnAnUnchangedView(t *testing.T) {
	e, pods := gangFixture(t)
	_, first := e.postFilter(pods["huge-0"])
	wantCode(t, "huge-0", first, fwk.UnschedulableAndUnresolvable, "gang preemption makes room in one clique only: preemption cannot help")
	crossed := e.plugin.Cluster().Crossings()
	_, again := e.postFilter(pods["huge-1"])
	wantCode(t, "huge-1", again, fwk.UnschedulableAndUnresolvable, "gang preemption makes room in one clique only: preemption cannot help")
	if again.Message() != first.Message() {
		t.Fatalf("the reused refusal says %q, the first said %q", again.Message(), first.Message())
	}
	if n := e.plugin.Cluster().Crossings() - crossed; n != 0 {
		t.Fatalf("the second pod of the domain on the same view crossed %d times, want 0", n)
	}
	// Another domain's question is its own.
	_, st := e.postFilter(pods["low-0"])
	wantCode(t, "low-0", st, fwk.UnschedulableAndUnresolvable, "already has NVLink clique")
	if e.plugin.Cluster().Crossings() == crossed {
		t.Fatal("another domain's pod must be asked, not answered from huge's refusal")
	}
	// A change of the view: asked again.
	e.apply(boundTo(makePod("gpu", "", 4), "b-03"))
	crossed = e.plugin.Cluster().Crossings()
	_, st = e.postFilter(pods["huge-2"])
	wantCode(t, "huge-2", st, fwk.UnschedulableAndUnresolvable, "gang preemption makes room in one clique only: preemption cannot help")
	if e.plugin.Cluster().Crossings() == crossed {
		t.Fatal("after the view changed the refusal must be asked again")
	}
}
