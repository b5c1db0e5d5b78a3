package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenario 19: gang preemption. Four low-priority 16-tray domains (Jobs, no size annotation)
// fill four 18-tray cliques; a high-priority 18-tray domain then gets one clique by evicting
// exactly one low domain whole (the other three untouched), binds whole within 30 s, and Prepare
// refuses nothing. With preemptionPolicy: Never on its PriorityClass nothing is evicted and the
// pending pods say why.

var fourRacks = harness.FleetSpec{Racks: 4, CliquesPerRack: 1, TraysPerClique: 18, GPUsPerTray: 4}

// priorityClasses creates low and high (high with the given preemption policy) for one
// scenario; they are cluster-scoped, so their names carry the namespace.
func (s *scenario) priorityClasses(policy corev1.PreemptionPolicy) (low, high string) {
	s.t.Helper()
	low, high = s.ns+"-low", s.ns+"-high"
	for _, pc := range []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: low}, Value: 10},
		{ObjectMeta: metav1.ObjectMeta{Name: high}, Value: 1000, PreemptionPolicy: &policy},
	} {
		if _, err := s.e.CP.Client.SchedulingV1().PriorityClasses().Create(s.ctx, pc, metav1.CreateOptions{}); err != nil {
			s.t.Fatal(err)
		}
		name := pc.Name
		s.t.Cleanup(func() {
			_ = s.e.CP.Client.SchedulingV1().PriorityClasses().Delete(s.ctx, name, metav1.DeleteOptions{})
		})
	}
	return low, high
}

// prioritizedDomain is s.domain with the Job's pods in a PriorityClass.
func (s *scenario) prioritizedDomain(name string, pods int, class string) {
	s.t.Helper()
	s.createDomain(name, 0)
	job := harness.DomainJob(s.ns, name, name, harness.JobSpec{Parallelism: pods, Completions: pods, GPUs: 4}, s.profile)
	job.Spec.Template.Spec.PriorityClassName = class
	if _, err := s.e.CP.Client.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// boundUIDs are the UIDs of the bound pods of each domain.
func (s *scenario) boundUIDs() map[string]map[types.UID]bool {
	s.t.Helper()
	pods, err := s.e.CP.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: harness.DomainLabel})
	if err != nil {
		s.t.Fatal(err)
	}
	out := map[string]map[types.UID]bool{}
	for _, p := range pods.Items {
		cd := p.Labels[harness.DomainLabel]
		if out[cd] == nil {
			out[cd] = map[types.UID]bool{}
		}
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			out[cd][p.UID] = true
		}
	}
	return out
}

// evictedWhole compares the low domains' bound pods now with before: each kept all of them
// (and has as many bound) or lost all of them; a domain evicted in part fails the test. It
// returns the domains evicted.
func (s *scenario) evictedWhole(lows []string, before map[string]map[types.UID]bool) []string {
	s.t.Helper()
	after := s.boundUIDs()
	var evicted []string
	for _, name := range lows {
		kept := 0
		for uid := range before[name] {
			if after[name][uid] {
				kept++
			}
		}
		switch kept {
		case len(before[name]):
			if len(after[name]) != kept {
				s.t.Errorf("%s untouched should still have %d pods bound: %d", name, kept, len(after[name]))
			}
		case 0:
			evicted = append(evicted, name)
		default:
			s.t.Errorf("%s was evicted in part: %d of %d pods kept", name, kept, len(before[name]))
		}
	}
	return evicted
}

// fillFour runs the four low domains, one per clique.
func (s *scenario) fillFour(low string) (lows []string, before map[string]map[types.UID]bool) {
	s.t.Helper()
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("low%d", i)
		lows = append(lows, name)
		s.prioritizedDomain(name, 16, low)
		s.waitFor(name+" running", 90*time.Second, all(name, 16))
	}
	d := s.domains()
	seen := map[string]bool{}
	for _, name := range lows {
		if len(d[name].Cliques) != 1 || seen[d[name].Cliques[0]] {
			s.t.Fatalf("the low domains should fill one clique each: %s", harness.Summary(d))
		}
		seen[d[name].Cliques[0]] = true
	}
	return lows, s.boundUIDs()
}

func TestScenario19GangPreemption(t *testing.T) {
	s := newScenario(t, "s19", harness.Cdplace, fourRacks, harness.PrepareOptions{})
	low, high := s.priorityClasses(corev1.PreemptLowerPriority)
	lows, before := s.fillFour(low)

	start := time.Now()
	s.prioritizedDomain("high", 18, high)
	d := s.waitFor("high bound whole", 30*time.Second, func(d map[string]*harness.DomainState) bool {
		s.assertNoSplits(d)
		return d["high"] != nil && d["high"].Bound == 18
	})
	t.Logf("the 18-tray domain bound whole %v after its Job was created", time.Since(start).Round(100*time.Millisecond))
	if len(d["high"].Cliques) != 1 {
		t.Fatalf("high must run in one clique: %s", d["high"])
	}
	evicted := s.evictedWhole(lows, before)
	if len(evicted) != 1 {
		t.Fatalf("exactly one low domain should be evicted whole, got %v; domains:\n%s", evicted, harness.Summary(d))
	}
	// The Job recreates the evicted pods; no clique has 16 free trays, so none may bind.
	if st := s.domains()[evicted[0]]; st != nil && st.Bound != 0 {
		t.Errorf("the evicted domain's replacement pods cannot fit anywhere and must not bind: %s", st)
	}
	s.holds("the other three stay untouched", 2*time.Second, func(d map[string]*harness.DomainState) bool {
		s.assertNoSplits(d)
		for _, name := range lows {
			if name != evicted[0] && (d[name] == nil || d[name].Bound != 16) {
				return false
			}
			if name == evicted[0] && d[name] != nil && d[name].Bound != 0 {
				return false
			}
		}
		return d["high"].Bound == 18
	})
	s.assertNoRefusals()
}

func TestScenario19GangPreemptionNever(t *testing.T) {
	s := newScenario(t, "s19n", harness.Cdplace, fourRacks, harness.PrepareOptions{})
	low, high := s.priorityClasses(corev1.PreemptNever)
	lows, before := s.fillFour(low)
	s.prioritizedDomain("high", 18, high)
	s.waitFor("high's pods say preemptionPolicy=Never", 30*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["high"] != nil && strings.Contains(strings.Join(d["high"].Reasons, "; "), "ComputeDomain gang preemption: not eligible due to preemptionPolicy=Never")
	})
	s.holds("nothing evicted", 3*time.Second, func(d map[string]*harness.DomainState) bool {
		for _, name := range lows {
			if d[name].Bound != 16 {
				return false
			}
		}
		return d["high"].Bound == 0
	})
	after := s.boundUIDs()
	for _, name := range lows {
		for uid := range before[name] {
			if !after[name][uid] {
				t.Errorf("%s lost pod %s", name, uid)
			}
		}
	}
	s.assertNoRefusals()
}
