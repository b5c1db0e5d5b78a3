package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenario 22: gang preemption in the 1.37 workload cycle. On a control plane with the workload
// gates on, four low-priority 16-tray domains (Jobs) fill four 18-tray cliques; a high-priority
// PodGroup (gang minCount 18) of one 18-tray domain cannot be placed, so the cycle runs
// PodGroupPostFilter, where ComputeDomainPlacement evicts exactly one low domain whole and
// nominates the group's pod to the freed clique: all 18 bind there, the other three domains keep
// every pod, and Prepare refuses nothing. The scheduler's metrics show a successful
// PodGroupPostFilter (no in-tree plugin succeeds there with PodGroupPreemptionPolicy off).
func TestScenario22PodGroupGangPreemption(t *testing.T) {
	gated := gatedEnv(t, "workload-preemption", 4*time.Minute)
	s := newScenarioOn(t, gated, "s22", harness.Cdplace, fourRacks, harness.PrepareOptions{})
	low, high := s.priorityClasses(corev1.PreemptLowerPriority)
	lows, before := s.fillFour(low)

	// The group and its pods have one priority (the scheduler requires it).
	pg := harness.GangPodGroup(s.ns, "high", 18)
	pg.Spec.PriorityClassName = high
	if _, err := s.e.CP.Client.SchedulingV1beta1().PodGroups(s.ns).Create(s.ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.createDomain("high", 0)
	start := time.Now()
	for i := 0; i < 18; i++ {
		pod := harness.PodGroupPod(s.ns, "high", "high", i, 4, s.profile)
		pod.Spec.PriorityClassName = high
		if _, err := s.e.CP.Client.CoreV1().Pods(s.ns).Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := s.waitFor("the PodGroup bound whole", 60*time.Second, func(d map[string]*harness.DomainState) bool {
		s.assertNoSplits(d)
		return d["high"] != nil && d["high"].Bound == 18
	})
	t.Logf("the 18-pod PodGroup bound whole %v after its pods were created", time.Since(start).Round(100*time.Millisecond))
	if evicted := s.evictedWhole(lows, before); len(evicted) != 1 {
		t.Fatalf("exactly one low domain should be evicted whole, got %v; domains:\n%s", evicted, harness.Summary(d))
	}
	m, err := harness.ScrapeHistograms(s.ctx, s.e.Cdplace.MetricsURL(), "scheduler_framework_extension_point_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n := m.Merge("extension_point=PodGroupPostFilter,", "status=Success").Count; n == 0 {
		t.Errorf("no successful PodGroupPostFilter in the scheduler's metrics: the group was not preempted for in the workload cycle")
	}
	s.assertNoRefusals()
}
