package e2e

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Scenario 23: EASY backfill on a reserved clique, from the pods' own activeDeadlineSeconds.
// One 8-tray clique; three 1-tray Jobs run there with a 10-minute deadline. A 7-tray domain
// waits (5 free), and after cliqueReservationAfterSeconds (2 s here) the clique is reserved for
// it (the reason of a domain held off names the reservation). A 2-tray Job without a deadline may not take trays there (it could hold them past the
// moment the 7-tray domain can start), but a 2-tray Job with a one-minute deadline may: it is
// gone long before two of the three 10-minute Jobs end. When the trays the reserved domain waits
// for free up, it starts; the Job without a deadline is still held off.
func TestScenario23EasyBackfill(t *testing.T) {
	restore := swapCdplaceScheduler(t, []byte(`- name: ComputeDomainPlacement
  args:
    imexMode: DriverManaged
    wholeTray: Require
    reserveTraysPerClique: 0
    cliqueLabel: nvidia.com/gpu.clique
    cliqueReservationAfterSeconds: 2
`))
	defer restore()
	fleet := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 8, GPUsPerTray: 4}
	s := newScenario(t, "s23", harness.Cdplace, fleet, harness.PrepareOptions{})
	s.watchDomains(map[string]int{"t0": 1, "t1": 1, "t2": 1, "big": 7, "unbounded": 2, "quick": 2})
	withDeadline := func(name string, pods int, deadline *int64) {
		t.Helper()
		s.createDomain(name, 0)
		job := harness.DomainJob(s.ns, name, name, harness.JobSpec{Parallelism: pods, Completions: pods, GPUs: 4}, s.profile)
		job.Spec.Template.Spec.ActiveDeadlineSeconds = deadline
		if _, err := s.e.CP.Client.BatchV1().Jobs(s.ns).Create(s.ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"t0", "t1", "t2"} {
		withDeadline(name, 1, ptr.To[int64](600))
		s.waitFor(name+" running", 60*time.Second, all(name, 1))
	}
	s.domain("big", 7, 4)
	s.waitFor("big waiting", 30*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["big"] != nil && anyContains(d["big"].Reasons, "needs 7 free trays in one NVLink clique")
	})
	// Past cliqueReservationAfterSeconds: the reservation is computed from big's age at each
	// decision (big's own pods are not retried until trays change, so their reason is older).
	time.Sleep(3 * time.Second)

	withDeadline("unbounded", 2, nil)
	heldOff := func(d map[string]*harness.DomainState) bool {
		u := d["unbounded"]
		return u != nil && u.Bound == 0 && anyContains(u.Reasons, "reserved for a domain waiting longer")
	}
	s.waitFor("unbounded held off the reserved clique", 30*time.Second, heldOff)

	withDeadline("quick", 2, ptr.To[int64](60))
	s.waitFor("quick backfilled", 30*time.Second, all("quick", 2))
	d := s.domains()
	if !heldOff(d) {
		t.Fatalf("after quick started, unbounded must still be held off:\n%s", harness.Summary(d))
	}

	// Two 10-minute Jobs and quick end: big's 7 trays are free, and it starts there.
	for _, name := range []string{"t0", "t1", "quick"} {
		s.deleteDomainJob(name)
	}
	d = s.waitFor("big running", 60*time.Second, all("big", 7))
	if u := d["unbounded"]; u.Bound != 0 {
		t.Errorf("unbounded bound %d pods; only 1 tray is free beside big and t2:\n%s", u.Bound, harness.Summary(d))
	}
	s.assertNoSplits(d)
	s.assertNoRefusals()
}

func anyContains(texts []string, part string) bool {
	for _, t := range texts {
		if strings.Contains(t, part) {
			return true
		}
	}
	return false
}
