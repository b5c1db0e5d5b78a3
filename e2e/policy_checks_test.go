package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// eventNote waits for an Event with this reason whose note contains every one of want, in
// namespace ns, and returns its note.
func eventNote(t *testing.T, ctx context.Context, ns, reason string, want ...string) string {
	t.Helper()
	var note string
	waitUntil(t, 60*time.Second, fmt.Sprintf("a %s Event saying %q", reason, want), func() bool {
		evs, err := env.CP.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
	next:
		for _, e := range evs.Items {
			if e.Reason != reason {
				continue
			}
			for _, w := range want {
				if !strings.Contains(e.Note, w) {
					continue next
				}
			}
			note = e.Note
			return true
		}
		return false
	})
	return note
}

// TestBadPoliciesAreRefusedAndTheOldOneKeepsScheduling offers the policy ConfigMap four
// components that must never decide, one after the other, while a domain waits (so the self-test
// has a pending domain to ask about) and another runs: one that traps as soon as it is
// configured, one built against another WIT version (its status export changed), one that loops
// in every decision, and one that allows every node to every pod (it would put the pending
// domain on the running one's trays). Each is refused with a Warning PolicyRefused Event naming
// the cause; the shipped policy keeps deciding (generation 1) and a domain submitted right after
// each refusal binds whole.
func TestBadPoliciesAreRefusedAndTheOldOneKeepsScheduling(t *testing.T) {
	ctx := context.Background()
	policyRBAC(t, ctx)
	putPolicy(t, ctx, component(t, "cdplace_guest.wasm"))
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), policyConfigMap, metav1.DeleteOptions{})
	})
	s := newScenario(t, "refuse", harness.Cdplace,
		harness.FleetSpec{Racks: 1, CliquesPerRack: 3, TraysPerClique: 6, GPUsPerTray: 4}, harness.PrepareOptions{})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
`, policyNamespace, policyConfigMap, policyKey)))
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, sched) == 1 })
	s.watchDomains(nil)
	s.domain("running", 3, 4)
	s.ready("running", 3)
	// Nineteen trays: more than the three cliques of six hold even as segments, so it waits.
	s.domain("waiting", 19, 4)

	bad := []struct {
		name string
		want []string
	}{
		{"cdplace_test_instantiate_trap.wasm", []string{"policy refused (configure)", "trapped"}},
		{"cdplace_test_other_wit.wasm", []string{"does not match the cdplace:policy/policy@0.3.0 world", "export func `status`"}},
		{"cdplace_test_loop.wasm", []string{"policy refused (self-test)", "PreFilter of pending pod"}},
		{"cdplace_test_violator.wasm", []string{"policy refused (self-test)", "policy violation: rule one-domain-per-node"}},
	}
	for i, b := range bad {
		putPolicy(t, ctx, component(t, b.name))
		note := eventNote(t, ctx, policyNamespace, "PolicyRefused", b.want...)
		t.Logf("%s: %s", b.name, note)
		if g := liveGeneration(ctx, sched); g != 1 {
			t.Fatalf("%s: generation %d decides, want 1 (the shipped policy)", b.name, g)
		}
		after := fmt.Sprintf("after%d", i)
		s.domain(after, 2, 4)
		s.ready(after, 2)
		s.deleteDomainJob(after)
	}
	s.deleteDomainJob("waiting")
	d := s.domains()
	s.assertNoSplits(d)
	s.assertNoRefusals()
}

// TestAShadowPolicyReportsDivergencesAndChangesNoPlacement runs the shipped best fit with the
// worst-fit component as shadowPolicy (from a ConfigMap of its own): a probe domain lands
// where best fit puts it, as without a shadow; the shadow's other clique is reported on the
// domain as a ShadowDiverged Event with both answers, and counted.
func TestAShadowPolicyReportsDivergencesAndChangesNoPlacement(t *testing.T) {
	ctx := context.Background()
	policyRBAC(t, ctx)
	putComponent(t, ctx, shadowConfigMap, component(t, "cdplace_guest_worstfit.wasm"))
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), shadowConfigMap, metav1.DeleteOptions{})
	})
	s := newScenario(t, "shadow", harness.Cdplace,
		harness.FleetSpec{Racks: 1, CliquesPerRack: 3, TraysPerClique: 6, GPUsPerTray: 4}, harness.PrepareOptions{})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    shadowPolicy: {source: configMap, namespace: %s, name: %s, key: %s}
`, policyNamespace, shadowConfigMap, policyKey)))
	url := sched.MetricsURL()
	waitUntil(t, 60*time.Second, "the shadow policy running", func() bool {
		g, err := harness.ScrapeGauges(ctx, url, "cdplace_shadow_policy_info")
		return err == nil && len(g) == 1
	})
	s.watchDomains(nil)
	// An anchor domain of 3 makes the cliques' free trays differ, so the two policies differ.
	s.domain("anchor", 3, 4)
	s.ready("anchor", 3)
	free := freeTrays(s)
	best, worst := fits(free, 2, false), fits(free, 2, true)
	if len(best) == 0 || best[0] == worst[0] {
		t.Fatalf("the fleet does not tell the policies apart: free %v", free)
	}
	s.domain("probe", 2, 4)
	s.ready("probe", 2)
	if got := s.domains()["probe"].Cliques; len(got) != 1 || got[0] != best[0] {
		t.Fatalf("probe placed in %v; the live best fit on %v puts it in %s", got, free, best[0])
	}
	note := eventNote(t, ctx, s.ns, "ShadowDiverged", "other-clique", "live (generation 1): clique "+best[0], "shadow: clique "+worst[0])
	t.Logf("ShadowDiverged: %s", note)
	checkShadowReport(t, s.ns, "clique "+best[0], "clique "+worst[0])
	c, err := harness.ScrapeCounters(ctx, url, "cdplace_shadow_decisions_total", "cdplace_shadow_seconds_total")
	if err != nil {
		t.Fatal(err)
	}
	if c["cdplace_shadow_decisions_total{outcome=other-clique}"] < 1 || c["cdplace_shadow_seconds_total{}"] <= 0 {
		t.Errorf("shadow counters %v", c)
	}
	d := s.domains()
	s.assertNoSplits(d)
	s.assertAllOrNothing(d)
	s.assertNoRefusals()
}

// shadowReport is the part of `cdplace status --shadow -o json` (kind ShadowReport) read here.
type shadowReport struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Namespace  *string `json:"namespace"`
	Policies   struct {
		Shadow *struct {
			Digest     string `json:"digest"`
			Generation int    `json:"generation"`
			Source     string `json:"source"`
		} `json:"shadow"`
	} `json:"policies"`
	Matched     int `json:"matched"`
	Divergences []struct {
		Regarding struct{ Kind, Namespace, Name string } `json:"regarding"`
		Outcome   *string                                `json:"outcome"`
		Pod       *string                                `json:"pod"`
		Live      *struct{ Answer string }               `json:"live"`
		Shadow    *struct{ Answer string }               `json:"shadow"`
	} `json:"divergences"`
}

// checkShadowReport: `cdplace status --shadow -n ns -o json` lists the other-clique divergence
// with both answers (live starting with live, shadow with shadow) and names the shadow policy
// from its ConfigMap's PolicyApplied Event (Events are recorded asynchronously: retried a while).
func checkShadowReport(t *testing.T, ns, live, shadow string) {
	t.Helper()
	bin := cliBinary(t, "cdplace")
	var last string
	ok := func() bool {
		r := runCLI(t, bin, "", nil, "status", "--shadow", "-n", ns, "-o", "json", "--kubeconfig", env.CP.AdminKubeconfig)
		if r.code != 0 {
			last = fmt.Sprintf("exit %d: %s", r.code, r.stderr)
			return false
		}
		last = r.stdout
		var rep shadowReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Kind != "ShadowReport" || rep.Namespace == nil || *rep.Namespace != ns {
			return false
		}
		if p := rep.Policies.Shadow; p == nil || p.Source != fmt.Sprintf("ConfigMap %s/%s key %s", policyNamespace, shadowConfigMap, policyKey) ||
			!strings.HasPrefix(p.Digest, "sha256:") {
			return false
		}
		for _, d := range rep.Divergences {
			if d.Outcome != nil && *d.Outcome == "other-clique" && d.Pod != nil && strings.HasPrefix(*d.Pod, ns+"/") &&
				d.Regarding.Namespace == ns && d.Live != nil && strings.HasPrefix(d.Live.Answer, live) &&
				d.Shadow != nil && strings.HasPrefix(d.Shadow.Answer, shadow) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("status --shadow -n %s does not list the other-clique divergence (live %q, shadow %q) under the shadow policy's ConfigMap:\n%s", ns, live, shadow, last)
		}
		time.Sleep(time.Second)
	}
}
