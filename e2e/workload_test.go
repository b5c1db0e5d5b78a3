package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenario 20: the 1.37 workload cycle places a ComputeDomain PodGroup through
// ComputeDomainPlacement. On a control plane with the workload gates on, a 10-tray domain leaves
// one clique with 8 free trays and the other with 18; a PodGroup with gang minCount 8 and the
// clique as its topology constraint, whose 8 pods share one ComputeDomain, is offered both cliques
// as placements by the plugin's GeneratePlacements, both are feasible, and the plugin's
// ScorePlacement picks best fit: all 8 bind together in the clique with 8 free. The scheduler's
// metrics show the plugin ran at PlacementGenerate and in the placement score phase (neither
// series exists when the profile does not use the plugin there), and its log names the
// placements.
func TestScenario20WorkloadCyclePlacesTheGroupBestFit(t *testing.T) {
	gated := gatedEnv(t, "workload-cycle", 3*time.Minute)
	s := newScenarioOn(t, gated, "s20", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"filler": 10, "gang": 8})
	partly := s.fillClique("filler", 10)

	pg := harness.GangPodGroup(s.ns, "gang", 8)
	pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: harness.CliqueLabel}},
	}
	if _, err := s.e.CP.Client.SchedulingV1beta1().PodGroups(s.ns).Create(s.ctx, pg, metav1.CreateOptions{}); err != nil {
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
	s.assertIn(d, "gang", partly, "best fit: 8 free trays for 8 pods, not the empty clique's 18")
	s.assertNoRefusals()

	// The plugin's methods ran in the workload cycle. The framework records the calls it makes
	// with the pod group's cycle state (asynchronously, flushed every second): PlacementGenerate
	// and the score phase's normalization, which runs only when two placements were feasible
	// and scored (ScorePlacement gets a placement's state, which records nothing).
	for _, point := range []string{"PlacementGenerate", "PlacementScoreExtensionNormalize"} {
		var n uint64
		deadline := time.Now().Add(15 * time.Second)
		for n == 0 && time.Now().Before(deadline) {
			m, err := harness.ScrapeHistograms(s.ctx, s.e.Cdplace.MetricsURL(), "scheduler_plugin_execution_duration_seconds")
			if err != nil {
				t.Fatal(err)
			}
			n = m.Merge("extension_point="+point+",", "plugin=ComputeDomainPlacement,", "status=Success").Count
			if n == 0 {
				time.Sleep(500 * time.Millisecond)
			}
		}
		if n == 0 {
			t.Errorf("no successful ComputeDomainPlacement call at %s in the scheduler's metrics: the group did not go through the plugin's placements", point)
		}
	}
	log, err := os.ReadFile(s.e.Cdplace.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "ComputeDomainPlacement generated placements") && strings.Contains(l, `podGroup="`+s.ns+`/gang"`) {
			line = l
			break
		}
	}
	if line == "" || !strings.Contains(line, partly) || !strings.Contains(line, s.other(partly)) {
		t.Errorf("the scheduler's log has no placement per clique for PodGroup %s/gang (want both %s and %s): %q", s.ns, partly, s.other(partly), line)
	}
}
