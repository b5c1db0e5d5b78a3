package e2e

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenario 21: plain-pod steering. A 2-tray domain breaks one of three 6-tray cliques; three
// plain 4-GPU pods then land in that broken clique, never on the two intact ones, which a
// 6-tray domain still needs whole. The stock scores would spread them over the 16 equally empty
// free trays: all three in the broken clique by chance is under 1%.
func TestScenario21PlainPodsSteered(t *testing.T) {
	three := harness.FleetSpec{Racks: 3, CliquesPerRack: 1, TraysPerClique: 6, GPUsPerTray: 4}
	s := newScenario(t, "s21", harness.Cdplace, three, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"two": 2, "six": 6})
	s.domain("two", 2, 4)
	d := s.waitFor("two running", 60*time.Second, all("two", 2))
	broken := d["two"].Cliques[0]
	c := s.e.CP.Client
	for _, name := range []string{"plain-0", "plain-1", "plain-2"} {
		if _, err := c.CoreV1().Pods(s.ns).Create(s.ctx, harness.GPUPod(s.ns, name, 4, harness.Cdplace), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPlainRunning(t, s, 3)
	pods, err := c.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "!" + harness.DomainLabel})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if got := s.fleet.CliqueOf[p.Spec.NodeName]; got != broken {
			t.Errorf("plain pod %s on %s (clique %s); want the broken clique %s", p.Name, p.Spec.NodeName, got, broken)
		}
	}
	// Both intact cliques can still take a whole 6-tray domain.
	s.domain("six", 6, 4)
	d = s.waitFor("six running", 60*time.Second, all("six", 6))
	if d["six"].Cliques[0] == broken {
		t.Errorf("six cannot fit the broken clique (2 + 3 trays busy): %v", d["six"])
	}
	s.assertNoRefusals()
}
