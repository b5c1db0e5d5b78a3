package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Issue 46: gang preemption's victims are the host's to check, whatever the policy answers. The
// cdplace scheduler reads its policy from the policy ConfigMap. Two cliques of four trays:
// domain low (priority 10) fills one, domain other (priority 10, two pods) and domain vip
// (priority 5000, one pod) run in the other. The test-only component
// cdplace_test_preempt_violator.wasm is the shipped policy with one victim rule broken, chosen by
// the preemptor's name: want-priority names vip (higher priority), want-trays names a pod of
// other (outside the clique the plan frees), want-part leaves one of low's pods (part of a
// domain).
//  1. For each, a domain of that name waits with preemptionPolicy: Never (kube-scheduler never
//     preempts for it, but the self-test asks the candidate's gang preemption for it): the
//     swap is refused with a PolicyRefused Event naming the rule, generation 1 keeps deciding,
//     and nothing is evicted.
//  2. With no domain waiting, the violator passes its self-test and decides; a preempting
//     run-priority domain then gets its plan refused at run time: a Warning PolicyViolation
//     Event on the pod names the rule, and nothing is evicted.
//  3. The shipped component back, a preempting domain evicts low whole and binds in its clique;
//     other and vip keep every pod.
func TestGangPreemptionVictimsAreTheHostsToCheck(t *testing.T) {
	// Not yet run green (issue 46 ran out of time before a scheduler with the host's checks was
	// built): opt in with CDPLACE_E2E_VICTIMS=1 until it is, then drop this guard.
	if os.Getenv("CDPLACE_E2E_VICTIMS") != "1" {
		t.Skip("set CDPLACE_E2E_VICTIMS=1 to run (not yet run green)")
	}
	ctx := context.Background()
	policyRBAC(t, ctx)
	putPolicy(t, ctx, component(t, "cdplace_guest.wasm"))
	t.Cleanup(func() {
		_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), policyConfigMap, metav1.DeleteOptions{})
	})
	s := newScenario(t, "victims", harness.Cdplace,
		harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}, harness.PrepareOptions{})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
`, policyNamespace, policyConfigMap, policyKey)))
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, sched) == 1 })
	s.watchDomains(nil)

	never, lower := corev1.PreemptNever, corev1.PreemptLowerPriority
	classes := map[string]schedulingv1.PriorityClass{
		"low":   {Value: 10, PreemptionPolicy: &lower},
		"vip":   {Value: 5000, PreemptionPolicy: &never},
		"never": {Value: 1000, PreemptionPolicy: &never},
		"high":  {Value: 1000, PreemptionPolicy: &lower},
	}
	for name, pc := range classes {
		pc.Name = s.ns + "-" + name
		if _, err := env.CP.Client.SchedulingV1().PriorityClasses().Create(ctx, &pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.CP.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), pc.Name, metav1.DeleteOptions{})
		})
	}
	class := func(name string) string { return s.ns + "-" + name }
	s.prioritizedDomain("low", 4, class("low"))
	s.waitFor("low running", 90*time.Second, all("low", 4))
	s.prioritizedDomain("other", 2, class("low"))
	s.waitFor("other running", 90*time.Second, all("other", 2))
	s.prioritizedDomain("vip", 1, class("vip"))
	d := s.waitFor("vip running", 90*time.Second, all("vip", 1))
	if d["other"].Cliques[0] == d["low"].Cliques[0] || d["vip"].Cliques[0] != d["other"].Cliques[0] {
		t.Fatalf("low should fill one clique, other and vip share the other:\n%s", harness.Summary(d))
	}
	running, lowClique := []string{"low", "other", "vip"}, d["low"].Cliques[0]
	before := s.boundUIDs()
	untouched := func(names ...string) {
		t.Helper()
		after := s.boundUIDs()
		for _, name := range names {
			for uid := range before[name] {
				if !after[name][uid] {
					t.Errorf("%s lost pod %s", name, uid)
				}
			}
		}
	}
	violator := component(t, "cdplace_test_preempt_violator.wasm")

	// 1. Refused by the self-test.
	for _, b := range []struct{ name, rule, names string }{
		{"want-priority", "victim-lower-priority", "(priority 5000) as a victim"},
		{"want-trays", "victim-on-preemptor-trays", "names pod " + s.ns + "/other-"},
		{"want-part", "victim-whole-domain", "but leaves its pod " + s.ns + "/low-"},
	} {
		s.prioritizedDomain(b.name, 4, class("never"))
		s.waitFor(b.name+" waits with preemptionPolicy=Never", 30*time.Second, func(d map[string]*harness.DomainState) bool {
			return d[b.name] != nil && strings.Contains(strings.Join(d[b.name].Reasons, "; "), "preemptionPolicy=Never")
		})
		// A refused digest is not tried again: each round offers the same component under a
		// digest of its own.
		putPolicy(t, ctx, withCustomSection(violator, b.name))
		note := eventNote(t, ctx, policyNamespace, "PolicyRefused", "policy refused (self-test)",
			"gang preemption for pending pod "+s.ns+"/"+b.name+"-", "policy violation: rule "+b.rule+": ", b.names)
		t.Logf("%s: %s", b.name, note)
		if g := liveGeneration(ctx, sched); g != 1 {
			t.Fatalf("%s: generation %d decides, want 1 (the shipped policy)", b.name, g)
		}
		s.deleteDomainJob(b.name)
	}
	untouched(running...)

	// 2. Refused at run time: nothing waits, so the violator's self-test passes.
	gen := liveGeneration(ctx, sched)
	putPolicy(t, ctx, violator)
	waitUntil(t, 60*time.Second, "the violator deciding", func() bool { return liveGeneration(ctx, sched) > gen })
	s.prioritizedDomain("run-priority", 4, class("high"))
	note := eventNote(t, ctx, s.ns, "PolicyViolation", "policy violation: rule victim-lower-priority: gang preemption for pod "+s.ns+"/run-priority-", "(priority 5000) as a victim")
	t.Logf("run time: %s", note)
	s.holds("nothing evicted for the refused plan", 3*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["low"].Bound == 4 && d["other"].Bound == 2 && d["vip"].Bound == 1 && (d["run-priority"] == nil || d["run-priority"].Bound == 0)
	})
	untouched(running...)
	s.deleteDomainJob("run-priority")

	// 3. The shipped policy's plan: low evicted whole, the rest untouched.
	gen = liveGeneration(ctx, sched)
	putPolicy(t, ctx, component(t, "cdplace_guest.wasm"))
	waitUntil(t, 60*time.Second, "the shipped policy deciding again", func() bool { return liveGeneration(ctx, sched) > gen })
	s.prioritizedDomain("want", 4, class("high"))
	d = s.waitFor("want bound whole", 60*time.Second, func(d map[string]*harness.DomainState) bool {
		s.assertNoSplits(d)
		return d["want"] != nil && d["want"].Bound == 4
	})
	if d["want"].Cliques[0] != lowClique {
		t.Errorf("want should bind in low's clique %s:\n%s", lowClique, harness.Summary(d))
	}
	if evicted := s.evictedWhole([]string{"low"}, before); len(evicted) != 1 {
		t.Errorf("low should have been evicted whole:\n%s", harness.Summary(d))
	}
	untouched("other", "vip")
	s.assertNoRefusals()
}

// withCustomSection is wasm with a custom section named cdplace-test-<tag> appended: the same
// component under another digest (a component, like a core module, may end with custom
// sections; the host ignores them).
func withCustomSection(wasm []byte, tag string) []byte {
	leb := func(n int) []byte {
		var out []byte
		for {
			b := byte(n & 0x7f)
			n >>= 7
			if n == 0 {
				return append(out, b)
			}
			out = append(out, b|0x80)
		}
	}
	name := "cdplace-test-" + tag
	payload := append(leb(len(name)), name...)
	out := append([]byte{}, wasm...)
	out = append(out, 0)
	out = append(out, leb(len(payload))...)
	return append(out, payload...)
}
