package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// TestAPolicyThatGoesWrongIsRevertedAndWhatItBlockedBinds swaps in a policy that passes every
// check at swap time (it answers as shipped until a set time) and then turns unsafe (it allows
// every node wherever the shipped policy would place a pod: a new domain onto a running one's
// trays). A domain submitted then is refused by the host at every try (its pods fail closed,
// nothing unsafe binds); after policyRevert.failures refusals the scheduler restores the
// generation before it (a Warning PolicyReverted Event on the ConfigMap,
// cdplace_policy_reverts_total), requeues the pods it left waiting, and the blocked domain binds
// whole within 10 s of the revert, in one clique, with no Prepare refusal.
func TestAPolicyThatGoesWrongIsRevertedAndWhatItBlockedBinds(t *testing.T) {
	ctx := context.Background()
	policyRBAC(t, ctx)
	putPolicy(t, ctx, component(t, "cdplace_guest.wasm"))
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), policyConfigMap, metav1.DeleteOptions{})
	})
	s := newScenario(t, "revert", harness.Cdplace,
		harness.FleetSpec{Racks: 1, CliquesPerRack: 2, TraysPerClique: 4, GPUsPerTray: 4}, harness.PrepareOptions{})
	// The bad policy turns unsafe at this time, for every instance alike: after the swap, which
	// must come first (its self-test would refuse it), and before the domain it blocks.
	unsafeFrom := time.Now().Add(25 * time.Second)
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
    policyRevert: {failures: 3, window: 60s}
    policyArgs: {unsafeFromMs: %d}
`, policyNamespace, policyConfigMap, policyKey, unsafeFrom.UnixMilli())))
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, sched) == 1 })
	s.watchDomains(nil)
	// A running domain: the unsafe answers would put a new domain on its trays.
	s.domain("running", 2, 4)
	s.ready("running", 2)
	before, err := harness.ScrapeCounters(ctx, sched.MetricsURL(), "cdplace_policy_reverts_total")
	if err != nil {
		t.Fatal(err)
	}

	bad := component(t, "cdplace_test_unsafe_when_placeable.wasm")
	putPolicy(t, ctx, bad)
	waitUntil(t, 30*time.Second, "the bad policy applied (generation 2)", func() bool { return liveGeneration(ctx, sched) == 2 })
	if time.Now().After(unsafeFrom) {
		t.Fatalf("the swap came %v after the bad policy turned unsafe: the test's margin is too small", time.Since(unsafeFrom))
	}
	time.Sleep(time.Until(unsafeFrom) + 500*time.Millisecond)

	s.domain("blocked", 2, 4)
	var reverted time.Time
	waitUntil(t, 60*time.Second, "the revert (generation 3)", func() bool {
		// The domains first, then the generation: a pod bound while generation 2 still decides
		// was placed by the unsafe policy.
		b := s.domains()["blocked"]
		gen := liveGeneration(ctx, sched)
		if gen == 2 && b != nil && b.Bound > 0 {
			t.Fatalf("a pod of the blocked domain bound under the unsafe policy: %s", b)
		}
		if gen == 3 {
			reverted = time.Now()
			return true
		}
		return false
	})
	eventNote(t, ctx, policyNamespace, "PolicyReverted", "policy "+sha256Digest(bad)+" reverted to generation 3", "refused answers within 1m0s (policyRevert)")
	d := s.waitFor("blocked bound after the revert", 10*time.Second, func(d map[string]*harness.DomainState) bool {
		b := d["blocked"]
		return b != nil && b.Pods == 2 && b.Bound == 2
	})
	took := time.Since(reverted)
	t.Logf("the blocked domain bound %v after the revert was seen", took.Round(10*time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("the blocked domain bound %v after the revert, want within 10 s", took)
	}
	after, err := harness.ScrapeCounters(ctx, sched.MetricsURL(), "cdplace_policy_reverts_total")
	if err != nil {
		t.Fatal(err)
	}
	if n := after["cdplace_policy_reverts_total{}"] - before["cdplace_policy_reverts_total{}"]; n != 1 {
		t.Errorf("cdplace_policy_reverts_total rose by %v, want 1", n)
	}
	s.assertNoSplits(d)
	s.assertNoRefusals()
}
