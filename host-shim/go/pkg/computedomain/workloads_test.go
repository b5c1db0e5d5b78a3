package computedomain

import (
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
)

func ownedByJob(p *v1.Pod, job string) *v1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: types.UID("uid-" + job), Controller: ptr.To(true)}}
	return p
}

func trainerJob(parallelism int32) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trainer"}, Spec: batchv1.JobSpec{Parallelism: ptr.To(parallelism)}}
}

func cliqueOf(t *testing.T, nodes []string) string {
	t.Helper()
	prefix := ""
	for _, n := range nodes {
		p, _, _ := strings.Cut(n, "-")
		if prefix != "" && p != prefix {
			t.Fatalf("node set %v spans racks", nodes)
		}
		prefix = p
	}
	return prefix
}

// A domain written as NVIDIA's guide writes it (numNodes 0, no annotation) takes its size from
// the Job that owns its pods: with only the first 4 pods of a Job of 12 created (the Job
// controller's slow start), the domain is offered only the clique that can hold all 12; scaled
// down to 6 while it waits, it is offered best fit for 6, and its pending pods are woken.
func TestDomainSizeComesFromTheJobThatOwnsItsPods(t *testing.T) {
	nodes := append(rack("small", 1, 8), rack("large", 2, 14)...)
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 0)},
		channelTemplate("cd", "uid-cd"), trainerJob(12))
	var mu sync.Mutex
	var woken []nsName
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(k []nsName) { mu.Lock(); woken = append(woken, k...); mu.Unlock() }
	e.plugin.feed.mu.Unlock()

	pods := make([]*v1.Pod, 4)
	for i := range pods {
		pods[i] = ownedByJob(cdPod("cd", "trainer-"+string(rune('a'+i))), "trainer")
		e.apply(pods[i])
	}
	r := e.schedule(pods[0])
	wantCode(t, "PreFilter with the Job's size", r.preFilter, fwk.Success, "")
	if got := cliqueOf(t, r.allowed); got != "large" || len(r.allowed) != 14 {
		t.Fatalf("a domain of 12 (4 pods seen) was offered %v, want the 14 trays of clique large only", r.allowed)
	}

	// Scaled down while it waits: the owner record changes, and the pending pods are woken.
	if _, err := e.client.BatchV1().Jobs(ns).Update(e.ctx, trainerJob(6), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(woken) == 4 })
	e.apply()
	r = e.schedule(pods[1])
	wantCode(t, "PreFilter after the scale-down", r.preFilter, fwk.Success, "")
	best, top := "", int64(-1)
	for n, s := range r.score {
		if s > top || (s == top && n < best) {
			best, top = n, s
		}
	}
	if !strings.HasPrefix(best, "small-") || r.filter["small-00"].Code() != fwk.Success {
		t.Fatalf("a domain of 6 scores best on %s (scores %v), want best fit: clique small", best, r.score)
	}
}

// A Job larger than the fleet (even as segments across cliques) stays pending with a reason that
// names the Job as the source;
// a pod whose Job is not (yet) in the scheduler's cache makes its domain wait instead of start.
func TestDomainSizeReasonsNameTheOwner(t *testing.T) {
	nodes := append(rack("small", 1, 8), rack("large", 2, 14)...)
	e := newEnv(t, "", nodes, []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 0), computeDomain("other", "uid-other", 0)},
		channelTemplate("cd", "uid-cd"), channelTemplate("other", "uid-other"), trainerJob(30))
	p := ownedByJob(cdPod("cd", "trainer-a"), "trainer")
	e.apply(p)
	wantCode(t, "PreFilter, Job of 30", e.schedule(p).preFilter, fwk.UnschedulableAndUnresolvable,
		"size 30 from Job "+ns+"/trainer spec.parallelism")

	ghost := ownedByJob(cdPod("other", "ghost-a"), "ghost")
	e.apply(ghost)
	wantCode(t, "PreFilter, Job not cached", e.schedule(ghost).preFilter, fwk.Unschedulable, "Job "+ns+"/ghost")
}

// When a domain's first pod is reserved, its pods that PreFilter rejected while it waited are
// activated (past their backoff), so the started domain does not sit part-bound.
func TestReservingADomainsPodWakesItsRejectedPods(t *testing.T) {
	w0, w1 := cdPod("cd", "w0"), cdPod("cd", "w1")
	taken := boundTo(makePod("taken", "", 4), "a-01")
	e := newEnv(t, "", rack("a", 2, 2), []*unstructured.Unstructured{computeDomain("cd", "uid-cd", 2)},
		channelTemplate("cd", "uid-cd"), w0, w1, taken)
	var woken []nsName
	e.plugin.feed.mu.Lock()
	e.plugin.feed.activate = func(keys []nsName) { woken = append(woken, keys...) }
	e.plugin.feed.mu.Unlock()
	wantCode(t, "w1 while the domain cannot fit", e.schedule(w1).preFilter, fwk.Unschedulable, "needs 2 free trays")
	if st := e.fh.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), w0, "a-00"); !st.IsSuccess() {
		t.Fatalf("reserve: %v", st)
	}
	if len(woken) != 1 || woken[0] != (nsName{ns, "w1"}) {
		t.Fatalf("reserving w0 should wake w1, woke %v", woken)
	}
	// Once woken, a pod is forgotten: another reserve wakes nothing.
	woken = nil
	if st := e.fh.RunReservePluginsReserve(e.ctx, framework.NewCycleState(), w1, "a-01"); !st.IsSuccess() {
		t.Fatalf("reserve: %v", st)
	}
	if len(woken) != 0 {
		t.Fatalf("woke %v again", woken)
	}
}
