package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// The example policy guest/examples/team-racks (target/wasm32-wasip2/guest/
// cdplace_example_team_racks.wasm, `make examples`) swapped in while the real scheduler runs,
// through the policy ConfigMap (the chart's policy.configMap), as a platform team would roll out
// its own policy: the scheduler starts on the shipped policy from the ConfigMap (generation 1),
// the team-racks component replaces it in the ConfigMap, and the scheduler checks it on the live
// view and swaps it in (generation 2) without a restart. Three racks of four trays; the team
// namespace owns racks 1 and 2 (policyArgs.teams, in the plugin args both policies are
// configured with). Another namespace's 2-pod domain goes first and can only take rack 0 (team
// racks are dedicated), which leaves rack 0 with exactly two free trays: the shipped best fit
// would put the team's 2-pod domain there. The team's domain lands on its racks instead, and all
// in one of them.
func TestTeamRacksPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shipped := component(t, "cdplace_guest.wasm")
	teamRacks := component(t, "cdplace_example_team_racks.wasm")
	policyRBAC(t, ctx)
	putPolicy(t, ctx, shipped)
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), policyConfigMap, metav1.DeleteOptions{})
	})
	const name = "teamracks"
	s := newScenario(t, name, harness.Cdplace,
		harness.FleetSpec{Racks: 3, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}, harness.PrepareOptions{})
	team := s.ns
	other := name + "-other"
	racks := []string{s.fleet.Spec.Clique(1, 0), s.fleet.Spec.Clique(2, 0)}
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
    policyArgs:
      teams:
        %s: [%q, %q]
`, policyNamespace, policyConfigMap, policyKey, team, racks[0], racks[1])))
	waitUntil(t, 60*time.Second, "the shipped policy live (generation 1)", func() bool { return liveGeneration(ctx, sched) == 1 })
	putPolicy(t, ctx, teamRacks)
	waitUntil(t, 60*time.Second, "the team-racks policy swapped in (generation 2)", func() bool { return liveGeneration(ctx, sched) == 2 })
	swaps, err := harness.ScrapeCounters(ctx, sched.MetricsURL(), "cdplace_policy_swaps_total")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range swaps {
		if strings.Contains(k, "result=refused") && v > 0 {
			t.Fatalf("a policy was refused: %s = %v", k, v)
		}
	}

	// Another namespace's domain first: off the team's racks, so on rack 0.
	c := env.CP.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CoreV1().Namespaces().Delete(context.Background(), other, metav1.DeleteOptions{}) })
	if _, err := env.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(other).Create(ctx, harness.ComputeDomain(other, "ml", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitOther := func(what string, cond func(*harness.DomainState) bool) *harness.DomainState {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			d, err := harness.Domains(ctx, c, other, s.fleet.CliqueOf)
			if err != nil {
				t.Fatal(err)
			}
			if cond(d["ml"]) {
				return d["ml"]
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; %s: %s", what, other, harness.Summary(d))
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitOther("the channel template", func(*harness.DomainState) bool {
		_, err := c.ResourceV1().ResourceClaimTemplates(other).Get(ctx, "ml-channel", metav1.GetOptions{})
		return err == nil
	})
	if _, err := c.BatchV1().Jobs(other).Create(ctx, harness.DomainJob(other, "ml", "ml", harness.JobSpec{Parallelism: 2, Completions: 2, GPUs: 4}, harness.Cdplace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ml := waitOther("ml's two pods running", func(d *harness.DomainState) bool { return d != nil && d.Running == 2 })
	if want := []string{s.fleet.Spec.Clique(0, 0)}; !slices.Equal(ml.Cliques, want) {
		t.Fatalf("%s's domain on cliques %v, want %v (off the team's racks)", other, ml.Cliques, want)
	}

	// The team's domain: the shipped best fit would take rack 0's last two trays.
	s.domain("train", 2, 4)
	d := s.waitFor("train's two pods running", 90*time.Second, all("train", 2))
	st := d["train"]
	if len(st.Cliques) != 1 || !slices.Contains(racks, st.Cliques[0]) {
		t.Fatalf("the team's domain on cliques %v, want one of its racks %v", st.Cliques, racks)
	}
	s.assertNoRefusals()
	t.Logf("%s's domain on %v; the team's domain on %v (its racks %v)", other, ml.Cliques, st.Cliques, racks)
}
