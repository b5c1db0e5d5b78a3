package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// The policy ConfigMap of the swap test, and the RBAC the chart must grant for it: get, list and
// watch of that one ConfigMap in its namespace (the plugin's informer lists and watches it with a
// metadata.name field selector, which resourceNames allows).
const (
	policyNamespace = "cdplace-system"
	policyConfigMap = "cdplace-policy"
	policyKey       = "policy.wasm"
	// A component is about 600 KiB and a ConfigMap holds at most 1 MiB: the shadow has its own.
	shadowConfigMap = "cdplace-shadow-policy"
)

// policyRole is the Role the chart renders for the policy ConfigMaps.
func policyRole() *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "computedomain-scheduler-policy", Namespace: policyNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{policyConfigMap, shadowConfigMap}, Verbs: []string{"get", "list", "watch"}}},
	}
}

// policyRoleBinding binds policyRole to the cdplace scheduler's ServiceAccount.
func policyRoleBinding() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "computedomain-scheduler-policy", Namespace: policyNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "computedomain-scheduler-policy"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "computedomain-scheduler", Namespace: "cdplace-system"}},
	}
}

func policyRBAC(t *testing.T, ctx context.Context) {
	t.Helper()
	c := env.CP.Client
	role, binding := policyRole(), policyRoleBinding()
	if _, err := c.RbacV1().Roles(policyNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(policyNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.RbacV1().RoleBindings(policyNamespace).Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = c.RbacV1().Roles(policyNamespace).Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}

// component reads a component `make guest` built.
func component(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "target", "wasm32-wasip2", "guest", name))
	if err != nil {
		t.Fatalf("%s is built by `make guest`: %v", name, err)
	}
	return b
}

// putPolicy creates or replaces the policy ConfigMap's component, as `kubectl create configmap
// --from-file ... | kubectl apply` does.
func putPolicy(t *testing.T, ctx context.Context, wasm []byte) {
	t.Helper()
	putComponent(t, ctx, policyConfigMap, wasm)
}

// putComponent creates or replaces ConfigMap name's component (key policyKey).
func putComponent(t *testing.T, ctx context.Context, name string, wasm []byte) {
	t.Helper()
	cms := env.CP.Client.CoreV1().ConfigMaps(policyNamespace)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: policyNamespace},
		BinaryData: map[string][]byte{policyKey: wasm}}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// liveGeneration is the generation of cdplace_policy_info on the scheduler's metrics (0 when
// the scrape fails).
func liveGeneration(ctx context.Context, s *harness.Scheduler) int {
	g, err := harness.ScrapeGauges(ctx, s.MetricsURL(), "cdplace_policy_info")
	if err != nil {
		return 0
	}
	best := 0
	for k, v := range g {
		if v != 1 {
			continue
		}
		if _, rest, ok := strings.Cut(k, "generation="); ok {
			var n int
			if _, err := fmt.Sscanf(rest, "%d", &n); err == nil && n > best {
				best = n
			}
		}
	}
	return best
}

// freeTrays is each clique's trays that hold no GPU pod and no driver label (a lingering label
// counts as held, as the policy counts it).
func freeTrays(s *scenario) map[string]int {
	s.t.Helper()
	held := map[string]bool{}
	for n := range s.prep.Labels() {
		held[n] = true
	}
	for _, d := range s.domains() {
		for _, n := range d.Nodes {
			held[n] = true
		}
	}
	free := map[string]int{}
	for _, n := range s.fleet.Nodes {
		if !held[n] {
			free[s.fleet.CliqueOf[n]]++
		}
	}
	for _, c := range s.fleet.Cliques {
		free[c] += 0
	}
	return free
}

// fits is the cliques a domain of size trays fits in, by the policy's order: best fit takes the
// fewest free trays first, worst fit the most; ties by clique name.
func fits(free map[string]int, size int, worst bool) []string {
	var out []string
	for c, f := range free {
		if f >= size {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := free[out[i]], free[out[j]]
		if a != b {
			return (a < b) != worst
		}
		return out[i] < out[j]
	})
	return out
}

// TestPolicySwapWhileScheduling replaces the policy ConfigMap 20 times while Jobs of mixed sizes
// are scheduled, alternating the shipped best-fit policy and a worst-fit variant: the scheduler
// never restarts, no cycle errors, no split or part-bound domain, no Prepare refusal, and a probe
// domain submitted after each swap lands where the new policy puts it. Then a component that
// fails a check is refused with a Warning Event naming why, and the old policy keeps scheduling.
func TestPolicySwapWhileScheduling(t *testing.T) {
	ctx := context.Background()
	best := component(t, "cdplace_guest.wasm")
	worst := component(t, "cdplace_guest_worstfit.wasm")
	faulty := component(t, "cdplace_faulty_guest.wasm")
	policyRBAC(t, ctx)
	putPolicy(t, ctx, best)
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), policyConfigMap, metav1.DeleteOptions{})
	})
	s := newScenario(t, "swap", harness.Cdplace,
		harness.FleetSpec{Racks: 1, CliquesPerRack: 3, TraysPerClique: 6, GPUsPerTray: 4}, harness.PrepareOptions{})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
`, policyNamespace, policyConfigMap, policyKey)))
	url := sched.MetricsURL()
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, sched) == 1 })
	before, err := harness.ScrapeCounters(ctx, url, "scheduler_schedule_attempts_total", "cdplace_policy_swaps_total")
	if err != nil {
		t.Fatal(err)
	}
	start, err := harness.ScrapeGauges(ctx, url, "process_start_time_seconds")
	if err != nil {
		t.Fatal(err)
	}
	s.watchDomains(nil)

	// An anchor domain of 3 makes the cliques' free trays differ, so the two policies differ.
	s.domain("anchor", 3, 4)
	s.ready("anchor", 3)

	sizes := []int{1, 2, 3, 2, 1}
	for i := 0; i < 20; i++ {
		wantWorst := i%2 == 0
		wasm := best
		if wantWorst {
			wasm = worst
		}
		// The swap races the stream: two domains of mixed sizes are being scheduled.
		a, b := fmt.Sprintf("s%d-a", i), fmt.Sprintf("s%d-b", i)
		s.domain(a, sizes[i%len(sizes)], 4)
		putPolicy(t, ctx, wasm)
		s.domain(b, sizes[(i+2)%len(sizes)], 4)
		s.ready(a, sizes[i%len(sizes)])
		s.ready(b, sizes[(i+2)%len(sizes)])
		waitUntil(t, 60*time.Second, fmt.Sprintf("generation %d", i+2), func() bool { return liveGeneration(ctx, sched) == i+2 })
		s.deleteDomainJob(a)
		s.deleteDomainJob(b)
		// The probe is decided on a view the test knows: the stream gone, its labels too.
		waitUntil(t, 30*time.Second, "the stream's driver labels gone", func() bool { return len(s.prep.Labels()) == 3 })
		free := freeTrays(s)
		probe := fmt.Sprintf("probe%d", i)
		s.domain(probe, 2, 4)
		s.ready(probe, 2)
		got := s.domains()[probe].Cliques
		want := fits(free, 2, wantWorst)
		if len(got) != 1 || len(want) == 0 || got[0] != want[0] {
			t.Fatalf("swap %d (worst fit %v): probe placed in %v, the policy's order on %v is %v", i+1, wantWorst, got, free, want)
		}
		s.deleteDomainJob(probe)
	}

	// A component that fails a check: refused, a Warning Event naming why, the old policy deciding.
	putPolicy(t, ctx, faulty)
	// Other tests' refusals are Events on the same ConfigMap: this one is told by its cause.
	eventNote(t, ctx, policyNamespace, "PolicyRefused", "policy refused (settings)", "plainPodSteering")
	s.domain("after", 3, 4)
	s.ready("after", 3)
	if g := liveGeneration(ctx, sched); g != 21 {
		t.Fatalf("generation %d after the refusal, want 21", g)
	}

	d := s.domains()
	s.assertNoSplits(d)
	s.assertAllOrNothing(d)
	s.assertNoRefusals()
	after, err := harness.ScrapeCounters(ctx, url, "scheduler_schedule_attempts_total", "cdplace_policy_swaps_total")
	if err != nil {
		t.Fatal(err)
	}
	delta := func(k string) float64 { return after[k] - before[k] }
	if e := delta(`scheduler_schedule_attempts_total{profile=computedomain-scheduler,result=error}`); e != 0 {
		t.Errorf("%v scheduling cycles ended in an error", e)
	}
	if n := delta("cdplace_policy_swaps_total{reason=passed,result=applied}"); n != 20 {
		t.Errorf("%v swaps applied, want 20", n)
	}
	if n := delta("cdplace_policy_swaps_total{reason=settings,result=refused}"); n != 1 {
		t.Errorf("%v swaps refused for their settings, want 1", n)
	}
	end, err := harness.ScrapeGauges(ctx, url, "process_start_time_seconds")
	if err != nil || end["process_start_time_seconds{}"] != start["process_start_time_seconds{}"] || !sched.Running() {
		t.Errorf("the scheduler restarted: started at %v, now %v (%v)", start, end, err)
	}
}

// policyScheduler stops the shared cdplace scheduler and runs one whose profile has the given
// pluginConfig until the test ends (then the shared one is started again).
func policyScheduler(t *testing.T, pluginConfig []byte) *harness.Scheduler {
	t.Helper()
	ctx := context.Background()
	kubeconfig := filepath.Join(env.CP.Dir, "computedomain-scheduler.kubeconfig")
	cfg, err := harness.SchedulerConfig(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), kubeconfig, pluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	env.Cdplace.Stop()
	s, err := env.CP.StartScheduler(ctx, "computedomain-scheduler-policy", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if err := env.Cdplace.Restart(ctx); err != nil {
			t.Errorf("restart the cdplace scheduler: %v", err)
		}
	})
	return s
}
