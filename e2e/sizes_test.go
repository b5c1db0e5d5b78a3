package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenarios 11-18: a domain's size comes from what users already write (the Job, StatefulSet,
// JobSet or PodGroup behind the pods, the ComputeDomain's numNodes, or, for bare pods, the pods
// once they stop coming), never from cdplace's annotation. Each one watches the domains the
// whole time (watchDomains): no domain has pods bound and pods pending for longer than the settle
// window plus a cycle while a clique could hold it, no domain ever spans two cliques, and Prepare
// refuses nothing.

// fillClique runs a domain of n trays as a Job and returns its clique, so the next domain finds
// one clique with 18-n free trays and one with 18.
func (s *scenario) fillClique(name string, n int) string {
	s.t.Helper()
	s.domain(name, n, 4)
	d := s.waitFor(name+" running", 60*time.Second, all(name, n))
	if len(d[name].Cliques) != 1 {
		s.t.Fatalf("%s should run in one clique: %s", name, d[name])
	}
	return d[name].Cliques[0]
}

// other is the clique of the two-rack fleet that is not cl.
func (s *scenario) other(cl string) string {
	for _, c := range s.fleet.Cliques {
		if c != cl {
			return c
		}
	}
	s.t.Fatalf("fleet has no clique besides %s", cl)
	return ""
}

// assertIn fails unless domain name runs whole in clique cl.
func (s *scenario) assertIn(d map[string]*harness.DomainState, name, cl, why string) {
	s.t.Helper()
	st := d[name]
	if st == nil || len(st.Cliques) != 1 || st.Cliques[0] != cl {
		s.t.Errorf("%s should run whole in clique %s (%s): %v", name, cl, why, st)
	}
}

// Scenario 11: a Job with parallelism 12 behind a 10-tray domain on two 18-tray cliques. The Job
// controller creates its pods in slow-start batches (1, 2, 4, ...); cdplace must take the size
// from the Job, not from the pods seen so far, so the 12 land together in the other clique
// instead of 8 of them filling the first one.
func TestScenario11JobSlowStart(t *testing.T) {
	s := newScenario(t, "s11", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"ten": 10, "twelve": 12})
	home := s.fillClique("ten", 10)
	s.domain("twelve", 12, 4)
	d := s.waitFor("twelve running", 60*time.Second, all("twelve", 12))
	s.assertIn(d, "twelve", s.other(home), "ten's clique has only 8 free trays")
	s.assertNoRefusals()
}

// Scenario 12: an Indexed Job with completions (5) below parallelism (8) makes 5 pods; the
// domain's size is 5, so it starts, and best fit puts it in the clique with 6 free trays.
func TestScenario12IndexedJobFewerCompletions(t *testing.T) {
	s := newScenario(t, "s12", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"filler": 12, "five": 5})
	home := s.fillClique("filler", 12)
	s.createDomain("five", 0)
	s.job("five", "five", harness.JobSpec{Parallelism: 8, Completions: 5, GPUs: 4})
	d := s.waitFor("five running", 60*time.Second, all("five", 5))
	s.assertIn(d, "five", home, "best fit: 6 free trays there, 18 in the other")
	s.holds("the Job makes no more than 5 pods", 2*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["five"].Pods == 5
	})
	s.assertNoRefusals()
}

// Scenario 13: a StatefulSet of 16 with podManagementPolicy: Parallel (all pods at once) next to
// a 4-tray domain: the 16 start together in the empty clique, none in the one with 14 free.
func TestScenario13StatefulSetParallel(t *testing.T) {
	s := newScenario(t, "s13", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"filler": 4, "sts": 16})
	home := s.fillClique("filler", 4)
	s.createDomain("sts", 0)
	sts := harness.DomainStatefulSet(s.ns, "sts", 16, 4, s.profile)
	if _, err := s.e.CP.Client.AppsV1().StatefulSets(s.ns).Create(s.ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := s.waitFor("the StatefulSet's 16 pods running", 60*time.Second, all("sts", 16))
	s.assertIn(d, "sts", s.other(home), "the filler's clique has 14 free trays")
	s.assertNoRefusals()
}

// Scenario 14: a JobSet with a leader Job (1 pod) and a worker Job (7 pods) sharing one domain.
// The test installs the JobSet CRD and creates the Jobs as the JobSet controller would (owned by
// the JobSet). The domain's size is 8, the sum over both Jobs: it starts whole in the empty
// clique, not with the leader in the clique with 6 free trays.
func TestScenario14JobSetPair(t *testing.T) {
	s := newScenario(t, "s14", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	if _, err := s.e.CP.ApplyFile(s.ctx, filepath.Join(repoRoot, "e2e", "manifests", "jobset-crd.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	s.watchDomains(map[string]int{"filler": 12, "pair": 8})
	home := s.fillClique("filler", 12)
	s.createDomain("pair", 0)
	js := harness.DomainJobSet(s.ns, "pair", "pair", []harness.ReplicatedJob{
		{Name: "leader", Replicas: 1, Parallelism: 1},
		{Name: "workers", Replicas: 1, Parallelism: 7},
	}, 4, s.profile)
	created, err := s.createJobSet(js)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := harness.CreateJobSetJobs(s.ctx, s.e.CP.Client, created); err != nil {
		t.Fatal(err)
	}
	d := s.waitFor("the JobSet's 8 pods running", 60*time.Second, all("pair", 8))
	s.assertIn(d, "pair", s.other(home), "the filler's clique has 6 free trays, the JobSet needs 8")
	s.assertNoRefusals()
}

// createJobSet creates a JobSet, retrying while its CRD, created a moment ago, is not served yet.
func (s *scenario) createJobSet(js *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var err error
	for i := 0; i < 50; i++ {
		var created *unstructured.Unstructured
		created, err = s.e.CP.Dynamic.Resource(harness.JobSetGVR).Namespace(s.ns).Create(s.ctx, js, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

// Scenario 15: a PodGroup with gang minCount 8 on a control plane with the 1.37 workload gates on
// (GenericWorkload, TopologyAwareWorkloadScheduling, DRAWorkloadResourceClaims): its 8 bare pods,
// created one after the other, start together in the empty clique.
func TestScenario15PodGroupGang(t *testing.T) {
	gated := gatedEnv(t, "workload-gates", 3*time.Minute)
	s := newScenarioOn(t, gated, "s15", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"filler": 12, "gang": 8})
	home := s.fillClique("filler", 12)
	if _, err := s.e.CP.Client.SchedulingV1beta1().PodGroups(s.ns).Create(s.ctx, harness.GangPodGroup(s.ns, "gang", 8), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createDomain("gang", 0)
	for i := 0; i < 8; i++ {
		pod := harness.PodGroupPod(s.ns, "gang", "gang", i, 4, s.profile)
		if _, err := s.e.CP.Client.CoreV1().Pods(s.ns).Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := s.waitFor("the PodGroup's 8 pods running", 60*time.Second, all("gang", 8))
	s.assertIn(d, "gang", s.other(home), "the filler's clique has 6 free trays, minCount is 8")
	s.assertNoRefusals()
}

// Scenario 16: a ComputeDomain with the deprecated spec.numNodes: 6 and bare pods created one by
// one, each longer after the last than the settle window. The size is known from the first pod
// on, so the domain starts at once where 6 trays are free: every pod binds in the empty clique,
// none in the one with 4 free trays (where the first pods would go if the size came from the
// pods seen so far).
func TestScenario16NumNodesOneByOne(t *testing.T) {
	s := newScenario(t, "s16", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"filler": 14, "six": 6})
	home := s.fillClique("filler", 14)
	s.createCD(harness.ComputeDomainNumNodes(s.ns, "six", 6))
	for i := 0; i < 6; i++ {
		s.pods("six", i, i+1, 4)
		if i < 5 {
			s.holds("six stays out of the clique with 4 free trays", settleWindow+time.Second, func(d map[string]*harness.DomainState) bool {
				return !containsString(d["six"].Cliques, home)
			})
		}
	}
	d := s.waitFor("six running", 60*time.Second, all("six", 6))
	s.assertIn(d, "six", s.other(home), "the filler's clique has 4 free trays")
	s.assertNoRefusals()
}

// Scenario 17: 37 bare pods of one domain, created as fast as `kubectl apply` does, on two
// 18-tray cliques: none may bind, ever (the settle window passes, the size is 37, more than the
// fleet holds even as segments across cliques).
func TestScenario17BarePodsBeyondTheFleet(t *testing.T) {
	s := newScenario(t, "s17", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"beyond": 37})
	s.createDomain("beyond", 0)
	s.pods("beyond", 0, 37, 4)
	s.holds("none of the 37 pods binds", 2*settleWindow+5*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["beyond"].Pods == 37 && d["beyond"].Bound == 0
	})
	want := "ComputeDomain " + s.ns + "/beyond needs 37 trays (size 37 from the pods seen so far), " +
		"more than one NVLink clique holds (the largest clique has 18 usable trays)"
	d := s.waitFor("a reason on the pending pods", 30*time.Second, func(d map[string]*harness.DomainState) bool {
		return len(d["beyond"].Reasons) > 0
	})
	if reasons := strings.Join(d["beyond"].Reasons, "\n"); !strings.Contains(reasons, want) {
		t.Errorf("beyond's reason = %q; want it to contain %q", reasons, want)
	}
	s.assertNoRefusals()
}

// Scenario 18: two 10-pod domains of bare pods applied in one List (the ComputeDomains first,
// then a's pods, then b's, as one `kubectl apply -f` of a file): each runs whole, in a clique of
// its own (10 + 10 trays do not fit one 18-tray clique).
func TestScenario18TwoDomainsOneList(t *testing.T) {
	s := newScenario(t, "s18", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"a": 10, "b": 10})
	items := []any{harness.ComputeDomain(s.ns, "a", 0).Object, harness.ComputeDomain(s.ns, "b", 0).Object}
	for _, cd := range []string{"a", "b"} {
		for i := 0; i < 10; i++ {
			pod, err := runtime.DefaultUnstructuredConverter.ToUnstructured(harness.DomainPod(s.ns, cd, i, 4, s.profile))
			if err != nil {
				t.Fatal(err)
			}
			pod["apiVersion"], pod["kind"] = "v1", "Pod"
			items = append(items, pod)
		}
	}
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.CP.Apply(s.ctx, list, s.ns); err != nil {
		t.Fatal(err)
	}
	d := s.waitFor("a and b running", 90*time.Second, func(d map[string]*harness.DomainState) bool {
		return all("a", 10)(d) && all("b", 10)(d)
	})
	if d["a"].Cliques[0] == d["b"].Cliques[0] {
		t.Errorf("a and b share a clique: %s; %s", d["a"], d["b"])
	}
	s.assertNoRefusals()
}
