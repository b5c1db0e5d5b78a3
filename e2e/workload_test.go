package e2e

import (
	"os"
	"strconv"
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
// log shows the plugin's placements (one per clique) and its score for each, the clique with 8
// free above the empty one. (The plugin-duration metric was tried here first: the framework
// records it asynchronously into a buffer that drops what does not fit, so it was missing in
// about one run of five.)
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
	// Both placements were feasible and the plugin scored them: best fit above the empty clique.
	scores := map[string]int{}
	for _, l := range strings.Split(string(log), "\n") {
		if !strings.Contains(l, "ComputeDomainPlacement scored placement") || !strings.Contains(l, `podGroup="`+s.ns+`/gang"`) {
			continue
		}
		for _, c := range []string{partly, s.other(partly)} {
			if strings.Contains(l, c) {
				if i := strings.LastIndex(l, "score="); i >= 0 {
					scores[c], _ = strconv.Atoi(strings.TrimSpace(l[i+len("score="):]))
				}
			}
		}
	}
	if len(scores) != 2 || scores[partly] <= scores[s.other(partly)] {
		t.Errorf("the plugin's scores for PodGroup %s/gang's placements = %v; want both cliques scored, %s (8 free) above %s (18 free)", s.ns, scores, partly, s.other(partly))
	}
}
