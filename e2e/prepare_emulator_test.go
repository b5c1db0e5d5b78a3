package e2e

import (
	"testing"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

// The Prepare emulator must refuse only what the driver refuses, or a benchmark's refusal count
// blames the scheduler for the emulator. The driver reads the ComputeDomain label from the Node
// object; a failed tray whose Node is deleted and created again (repaired or replaced) comes back
// without it, so a domain placed there must prepare even while the old domain's label would
// still be lingering on the old Node (a one-minute lag here). Before the emulator started a
// re-created node afresh, bench-placement's smoke saw this as Prepare refusals on the repaired
// tray.
func TestPrepareEmulatorRepairedTrayStartsFresh(t *testing.T) {
	oneTray := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 1, GPUsPerTray: 4}
	s := newScenario(t, "prep-repair", harness.Cdplace, oneTray, harness.PrepareOptions{UnprepareLabelLag: time.Minute})
	node := s.fleet.Nodes[0]
	s.domain("a", 1, 4)
	s.ready("a", 1)
	if got := s.prep.Labels()[node]; got == "" {
		t.Fatalf("domain a runs on %s but the emulator set no ComputeDomain label", node)
	}
	if err := harness.FailNode(s.ctx, s.e.CP.Client, node); err != nil {
		t.Fatal(err)
	}
	s.deleteDomainJob("a")
	if err := harness.RecreateNode(s.ctx, s.e.CP.Client, s.fleet, node); err != nil {
		t.Fatal(err)
	}
	s.domain("b", 1, 4)
	s.waitFor("b running on the repaired tray", 60*time.Second, all("b", 1))
	s.assertNoRefusals()
}
