package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

// TestPythonPolicyRunsInTheScheduler swaps the Python example policy guest/examples/first-fit-py
// (componentize-py, `make example-python`; about 18 MiB with its interpreter, so from the file
// source: a ConfigMap holds 1 MiB) into the real scheduler while it runs, replacing the shipped
// policy in the watched file, and shows it deciding: first fit, where the shipped policy is best
// fit. Three cliques of four trays; a 4-tray and a 3-tray domain fill the first clique and three
// trays of the second (both policies agree there); the 4-tray domain's Job is deleted, its trays
// come free; then a 1-tray domain goes to the first clique (first fit), where best fit would
// take the second clique's last tray.
func TestPythonPolicyRunsInTheScheduler(t *testing.T) {
	ctx := context.Background()
	shipped := component(t, "cdplace_guest.wasm")
	python := component(t, "first_fit_py.wasm")
	path := filepath.Join(t.TempDir(), "policy.wasm")
	write := func(b []byte) {
		t.Helper()
		// As a user replaces it: a new file renamed over the old, so no reader sees half of it.
		if err := os.WriteFile(path+".new", b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write(shipped)
	s := newScenario(t, "pypolicy", harness.Cdplace,
		harness.FleetSpec{Racks: 1, CliquesPerRack: 3, TraysPerClique: 4, GPUsPerTray: 4}, harness.PrepareOptions{})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: file, path: %q}
`, path)))
	waitUntil(t, 60*time.Second, "the shipped policy live (generation 1)", func() bool { return liveGeneration(ctx, sched) == 1 })
	write(python)
	// Compiling 18 MiB of component takes about 20 s here, off the scheduling path.
	waitUntil(t, 3*time.Minute, "the Python policy swapped in (generation 2)", func() bool { return liveGeneration(ctx, sched) == 2 })

	cl := slices.Clone(s.fleet.Cliques)
	sort.Strings(cl)
	s.domain("four", 4, 4)
	s.ready("four", 4)
	s.domain("three", 3, 4)
	s.ready("three", 3)
	d := s.domains()
	if got := d["four"].Cliques; !slices.Equal(got, cl[:1]) {
		t.Fatalf("the 4-tray domain on %v, want the first clique %v", got, cl[:1])
	}
	if got := d["three"].Cliques; !slices.Equal(got, cl[1:2]) {
		t.Fatalf("the 3-tray domain on %v, want the second clique %v", got, cl[1:2])
	}

	s.deleteDomainJob("four")
	waitUntil(t, 60*time.Second, "the first clique's trays free (driver labels gone)", func() bool { return freeTrays(s)[cl[0]] == 4 })
	free := freeTrays(s)
	if best := fits(free, 1, false)[0]; best != cl[1] {
		t.Fatalf("the scenario must tell the policies apart: best fit would take %s (free %v)", best, free)
	}
	s.domain("one", 1, 4)
	s.ready("one", 1)
	if got := s.domains()["one"].Cliques; !slices.Equal(got, cl[:1]) {
		t.Fatalf("the 1-tray domain on %v, want the first clique %v (first fit; best fit takes %s); free before: %v", got, cl[:1], cl[1], free)
	}
	s.assertNoRefusals()
	t.Logf("Python first fit: 1-tray domain on %v; best fit would have taken %s", cl[:1], cl[1])
}
