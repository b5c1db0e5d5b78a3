package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Two racks of one 18-tray clique each: the GB200 NVL72 shape.
var twoRacks = harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 18, GPUsPerTray: 4}

// Scenarios 1-8 submit their domains as users write them: a ComputeDomain without cdplace's
// annotation and an Indexed Job (or bare pods) whose pods claim its channel; cdplace reads the
// size from the Job. Scenario 9 keeps the size annotation.

// Scenario 1: four domains of 4, 8, 16 and 18 trays on two 18-tray cliques (46 trays asked of
// 36): every domain that runs is inside one clique; the rest wait whole.
func TestScenario01FourDomainsTwoCliques(t *testing.T) {
	bothProfiles(t, func(t *testing.T, p harness.Profile) {
		s := newScenario(t, "s01", p, twoRacks, harness.PrepareOptions{})
		for _, cd := range []struct {
			name string
			size int
		}{{"cd4", 4}, {"cd8", 8}, {"cd16", 16}, {"cd18", 18}} {
			s.domain(cd.name, cd.size, 4)
		}
		d := s.settle(120 * time.Second)
		r := s.record(d)
		if p != harness.Cdplace {
			return
		}
		s.assertNoSplits(d)
		s.assertAllOrNothing(d)
		s.assertNoRefusals()
		// 36 trays hold at most two of {16, 18} plus what is left; best fit must run at least
		// two domains and use at least 28 trays.
		if r.Complete < 2 {
			t.Errorf("only %d domains run; want at least 2", r.Complete)
		}
		trays := 0
		for _, st := range d {
			trays += st.Bound
			if st.Bound == 0 && !strings.Contains(strings.Join(st.Reasons, "\n"), "ComputeDomain") {
				t.Errorf("%s waits without cdplace's reason: %q", st.Name, st.Reasons)
			}
		}
		if trays < 28 {
			t.Errorf("%d trays in use; best fit should place at least 28 of 36", trays)
		}
	})
}

// Scenario 2: a domain one tray larger than any clique's free capacity stays Pending with
// cdplace's reason, and nothing of it binds.
func TestScenario02OneTrayTooMany(t *testing.T) {
	bothProfiles(t, func(t *testing.T, p harness.Profile) {
		s := newScenario(t, "s02", p, twoRacks, harness.PrepareOptions{})
		s.domain("a", 10, 4)
		s.ready("a", 10)
		s.domain("b", 12, 4)
		s.ready("b", 12)
		// Free now: 8 trays in one clique, 6 in the other (if a and b took different cliques).
		s.domain("big", 9, 4)
		d := s.settle(60 * time.Second)
		s.record(d)
		if p != harness.Cdplace {
			return
		}
		if d["a"].Split() || d["b"].Split() || d["a"].Cliques[0] == d["b"].Cliques[0] {
			t.Fatalf("a and b should each fill a clique of their own: %s; %s", d["a"], d["b"])
		}
		s.holds("big stays unbound", 5*time.Second, func(d map[string]*harness.DomainState) bool {
			return d["big"].Bound == 0
		})
		// The reason names the size and where it came from: the Job's parallelism.
		want := "ComputeDomain " + s.ns + "/big needs 9 free trays in one NVLink clique (size 9 from Job " + s.ns +
			"/big spec.parallelism); no clique has that many free now"
		if reasons := strings.Join(s.domains()["big"].Reasons, "\n"); !strings.Contains(reasons, want) {
			t.Errorf("big's reason = %q; want it to contain %q", reasons, want)
		}
		s.assertNoRefusals()
	})
}

// Scenario 3: a 6-GPU domain (three pods asking 2 GPUs each) is refused at scheduling time under
// wholeTray: Require.
func TestScenario03SixGPUDomain(t *testing.T) {
	bothProfiles(t, func(t *testing.T, p harness.Profile) {
		s := newScenario(t, "s03", p, twoRacks, harness.PrepareOptions{})
		s.domain("six", 3, 2)
		d := s.settle(60 * time.Second)
		r := s.record(d)
		if p != harness.Cdplace {
			return
		}
		if d["six"].Bound != 0 {
			t.Fatalf("six: %s; want no pod bound", d["six"])
		}
		want := "requests 2 of 4 GPUs per tray; would strand 2"
		if reasons := strings.Join(d["six"].Reasons, "\n"); !strings.Contains(reasons, want) {
			t.Errorf("six's reason = %q; want it to contain %q", reasons, want)
		}
		if r.StrandedGPUs != 0 {
			t.Errorf("%d stranded GPUs; want 0", r.StrandedGPUs)
		}
	})
}

// Scenario 4: two domains that both fit only one clique, submitted together: one runs, the other
// waits whole (no deadlock), and runs once the first is deleted.
func TestScenario04TwoDomainsOneClique(t *testing.T) {
	bothProfiles(t, func(t *testing.T, p harness.Profile) {
		s := newScenario(t, "s04", p, twoRacks, harness.PrepareOptions{})
		s.domain("filler", 10, 4)
		s.ready("filler", 10)
		s.createDomain("x", 0)
		s.createDomain("y", 0)
		s.job("x", "x", harness.JobSpec{Parallelism: 12, Completions: 12, GPUs: 4})
		s.job("y", "y", harness.JobSpec{Parallelism: 12, Completions: 12, GPUs: 4})
		d := s.settle(90 * time.Second)
		s.record(d)
		if p != harness.Cdplace {
			return
		}
		s.assertNoSplits(d)
		s.assertAllOrNothing(d)
		runs, waits := "x", "y"
		if d["y"].Bound == 12 {
			runs, waits = "y", "x"
		}
		if d[runs].Running != 12 || d[waits].Bound != 0 {
			t.Fatalf("want one of x, y running and the other waiting whole: %s; %s", d["x"], d["y"])
		}
		s.deleteDomainJob(runs)
		d = s.waitFor(waits+" running after "+runs+" is deleted", 90*time.Second, all(waits, 12))
		s.assertNoSplits(d)
		s.assertNoRefusals()
	})
}

// Scenario 5: stale node labels. After a domain's pods are deleted, the driver keeps its node
// label until Unprepare finishes (the emulator's lag); another domain must not get those nodes
// until then, and gets them right after.
func TestScenario05StaleNodeLabel(t *testing.T) {
	const lag = 6 * time.Second
	oneClique := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}
	bothProfiles(t, func(t *testing.T, p harness.Profile) {
		s := newScenario(t, "s05", p, oneClique, harness.PrepareOptions{UnprepareLabelLag: lag})
		s.domain("first", 4, 4)
		s.waitFor("first running", 60*time.Second, all("first", 4))
		if got := len(s.prep.Labels()); got != 4 {
			t.Fatalf("%d nodes labelled after first's Prepare; want 4", got)
		}
		s.deleteDomainJob("first")
		deleted := time.Now()
		s.domain("second", 4, 4)
		if p == harness.Cdplace {
			// While a node still carries first's label, no pod of second may be bound to it.
			for time.Since(deleted) < lag-time.Second {
				labels := s.prep.Labels()
				second := s.domains()["second"] // nil until the Job controller has made a pod
				if second == nil {
					second = &harness.DomainState{}
				}
				for _, n := range second.Nodes {
					if labels[n] != "" {
						t.Fatalf("second's pod bound to %s while it still carries ComputeDomain %s's label", n, labels[n])
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		d := s.waitFor("second running", 90*time.Second, all("second", 4))
		s.record(d)
		if p != harness.Cdplace {
			return
		}
		s.assertNoRefusals()
		removed := 0
		for _, ev := range s.prep.LabelLog() {
			if !ev.Set {
				removed++
			}
		}
		if removed != 4 {
			t.Errorf("%d label removals; want 4 (one per node of first)", removed)
		}
	})
}

// Scenario 6: failure drill. A tray under a running domain of bare pods (no size anywhere: it
// starts after the settle window) is cordoned and deleted; the replacement pod lands in the same
// clique while it has a free tray, and otherwise stays Pending with a reason, never in another
// clique.
func TestScenario06TrayFailure(t *testing.T) {
	small := harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 6, GPUsPerTray: 4}
	s := newScenario(t, "s06", harness.Cdplace, small, harness.PrepareOptions{})
	s.createDomain("a", 0)
	s.pods("a", 0, 5, 4)
	d := s.waitFor("a running", 60*time.Second, all("a", 5))
	home := d["a"].Cliques[0]
	c := s.e.CP.Client

	fail := func(pod string) {
		t.Helper()
		p, err := c.CoreV1().Pods(s.ns).Get(s.ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node := p.Spec.NodeName
		patch := []byte(`{"spec":{"unschedulable":true}}`)
		if _, err := c.CoreV1().Nodes().Patch(s.ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		ignoreNotFound(t, c.CoreV1().Nodes().Delete(s.ctx, node, metav1.DeleteOptions{}))
		for _, drv := range []string{harness.GPUDriver, harness.ComputeDomainDriver} {
			ignoreNotFound(t, c.ResourceV1().ResourceSlices().Delete(s.ctx, node+"-"+drv, metav1.DeleteOptions{}))
		}
		// The pod garbage collector's part: a pod on a deleted node is removed.
		ignoreNotFound(t, c.CoreV1().Pods(s.ns).Delete(s.ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}

	fail("a-0")
	s.pods("a", 5, 6, 4) // the replacement, a-5
	d = s.waitFor("replacement running", 60*time.Second, all("a", 5))
	if len(d["a"].Cliques) != 1 || d["a"].Cliques[0] != home {
		t.Fatalf("after the first failure a should stay in %s: %s", home, d["a"])
	}

	fail("a-1")
	s.pods("a", 6, 7, 4) // a-6: the home clique has no free tray left
	s.waitFor("a-6 pending with a reason", 60*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["a"].Pods == 5 && d["a"].Bound == 4 && len(d["a"].Reasons) > 0
	})
	s.holds("a never leaves its clique", 5*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["a"].Bound == 4 && len(d["a"].Cliques) == 1 && d["a"].Cliques[0] == home
	})
	t.Logf("a-6 waits with: %q", s.domains()["a"].Reasons)
	s.assertNoRefusals()
}

// Scenario 7: host-managed IMEX (plugin args from kube-scheduler-config/examples). No node label,
// so a domain may take nodes another domain has just left without waiting for the driver, and
// two domains share nodes over time; channel exclusivity still holds.
func TestScenario07HostManaged(t *testing.T) {
	args, err := readRepoFile("kube-scheduler-config", "examples", "host-managed-args.yaml")
	if err != nil {
		t.Fatal(err)
	}
	restore := swapCdplaceScheduler(t, args)
	defer restore()

	// A label lag that would stall the second domain for 30s in driver-managed mode.
	const lag = 30 * time.Second
	fleet := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4, HostManaged: true}
	s := newScenario(t, "s07", harness.Cdplace, fleet, harness.PrepareOptions{HostManaged: true, UnprepareLabelLag: lag})
	s.domain("a", 2, 4)
	d := s.waitFor("a running", 90*time.Second, all("a", 2))
	aNodes := d["a"].Nodes
	s.deleteDomainJob("a")
	start := time.Now()
	s.domain("b", 4, 4)
	d = s.waitFor("b running on every node", 60*time.Second, all("b", 4))
	if waited := time.Since(start); waited >= lag {
		t.Errorf("b took %v; host-managed mode must not wait for a node label", waited)
	}
	for _, n := range aNodes {
		if !containsString(d["b"].Nodes, n) {
			t.Errorf("b should use %s, which a left: b is on %v", n, d["b"].Nodes)
		}
	}
	if labels := s.prep.Labels(); len(labels) != 0 {
		t.Errorf("host-managed Prepare set node labels: %v", labels)
	}
	// Channel exclusivity: with every tray's channel taken, a third domain waits.
	s.domain("c", 1, 4)
	s.waitFor("c pending with a reason", 60*time.Second, func(d map[string]*harness.DomainState) bool {
		return d["c"] != nil && d["c"].Bound == 0 && len(d["c"].Reasons) > 0
	})
	for node, holders := range s.prep.ChannelHolders() {
		if len(holders) > 1 {
			t.Errorf("node %s has %d channel claims prepared: %v", node, len(holders), holders)
		}
	}
	s.assertNoRefusals()
}

// Scenario 8: mixed load. Plain GPU pods and CPU pods through the cdplace profile are not blocked
// by the plugin, also on trays of a clique where a domain runs.
func TestScenario08MixedLoad(t *testing.T) {
	small := harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 6, GPUsPerTray: 4}
	s := newScenario(t, "s08", harness.Cdplace, small, harness.PrepareOptions{})
	c := s.e.CP.Client
	plain := []struct {
		name string
		gpus int
	}{{"gpu4-0", 4}, {"gpu4-1", 4}, {"gpu4-2", 4}, {"gpu2-0", 2}, {"gpu2-1", 2}, {"cpu-0", 0}}
	create := func(name string, gpus int) {
		t.Helper()
		if _, err := c.CoreV1().Pods(s.ns).Create(s.ctx, harness.GPUPod(s.ns, name, gpus, harness.Cdplace), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range plain {
		create(p.name, p.gpus)
	}
	s.domain("cd", 4, 4)
	d := s.waitFor("cd running", 60*time.Second, all("cd", 4))
	s.assertNoSplits(d)
	// Fill the rest of the fleet with whole-tray plain pods: 12 trays - 4 (cd) - 3 (gpu4) - the
	// trays the two gpu2 pods took.
	waitPlainRunning(t, s, len(plain))
	used := usedTrays(t, s)
	for i := 0; i < 12-used; i++ {
		create("fill-"+string(rune('a'+i)), 4)
	}
	waitPlainRunning(t, s, len(plain)+12-used)
	s.assertNoRefusals()
}

// Scenario 9: the scheduler is killed while a 16-pod domain is half placed, and more of its pods
// arrive while it is down; after the restart the domain finishes in the same clique, one pod per
// tray. The domain's bare pods come in two batches, so it is the scenario that tells cdplace the
// size with the annotation (cdplace.nvidia.com/size: 16): with it, the first 8 start at once.
func TestScenario09SchedulerRestart(t *testing.T) {
	s := newScenario(t, "s09", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.annotatedDomain("big", 16)
	s.pods("big", 0, 8, 4)
	d := s.waitFor("8 pods of big running", 60*time.Second, all("big", 8))
	home := d["big"].Cliques[0]
	env.Cdplace.Kill()
	s.pods("big", 8, 16, 4)
	if err := env.Cdplace.Restart(s.ctx); err != nil {
		t.Fatal(err)
	}
	// The new process waits for the dead one's leader lease to expire (15s) before it schedules.
	d = s.waitFor("big running after the restart", 120*time.Second, all("big", 16))
	if len(d["big"].Cliques) != 1 || d["big"].Cliques[0] != home {
		t.Errorf("big left its clique %s: %s", home, d["big"])
	}
	nodes := map[string]bool{}
	for _, n := range d["big"].Nodes {
		if nodes[n] {
			t.Errorf("two pods of big on %s", n)
		}
		nodes[n] = true
	}
	s.assertNoRefusals()
}

// Scenario 10: scenarios 1-5 through the baseline record Prepare refusals and broken placements;
// through cdplace they record none. Writes target/e2e/baseline-vs-cdplace.{json,md}.
func TestScenario10BaselineVersusCdplace(t *testing.T) {
	resultsMu.Lock()
	rs := append([]runResult(nil), results...)
	resultsMu.Unlock()
	if len(rs) < 10 {
		t.Skipf("needs scenarios 1-5 under both profiles in the same run (have %d runs)", len(rs))
	}
	table := resultTable(rs)
	t.Logf("\n%s", table)
	dir := filepath.Join(repoRoot, "target", "e2e")
	if err := writeResults(filepath.Join(dir, "baseline-vs-cdplace.json"), rs); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, "baseline-vs-cdplace.md"), table); err != nil {
		t.Fatal(err)
	}
	var base runResult
	for _, r := range rs {
		if r.Profile == string(harness.Cdplace) {
			if r.Refusals != 0 || r.Split != 0 || r.Partial != 0 || r.StrandedGPUs != 0 {
				t.Errorf("cdplace in %s: %+v; want no refusals, splits, partial domains or stranded GPUs", r.Scenario, r)
			}
			continue
		}
		base.Refusals += r.Refusals
		base.Split += r.Split
		base.Partial += r.Partial
		base.StrandedGPUs += r.StrandedGPUs
	}
	// The emulator and the scenarios must be able to show a failure: the baseline trips at
	// least the stale label (scenario 5) and strands GPUs (scenario 3).
	if base.Refusals == 0 || base.StrandedGPUs == 0 {
		t.Errorf("baseline recorded %+v; the scenarios should make it hit Prepare refusals and stranded GPUs", base)
	}
}
