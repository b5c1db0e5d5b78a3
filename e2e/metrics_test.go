package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// fleetFamilies are the plugin's fleet gauges.
var fleetFamilies = []string{"cdplace_clique_free_trays", "cdplace_domains_running", "cdplace_domains_pending",
	"cdplace_domains_starting", "cdplace_largest_placeable_domain_trays", "cdplace_reserved_trays"}

// The fleet gauges on the scheduler's /metrics and the Events on ComputeDomains, against the
// fleet: two cliques of 4 trays; a (2 trays) and c (4) run, b (9) can never fit the fleet, d (3)
// waits for trays (the clique a runs in offers 2). Free trays per clique, running and pending
// counts match; each ComputeDomain has its Placed or Waiting Event once, however often its pods
// were retried.
func TestFleetMetricsAndDomainEvents(t *testing.T) {
	spec := harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}
	s := newScenario(t, "fm", harness.Cdplace, spec, harness.PrepareOptions{})
	url := s.e.Cdplace.MetricsURL()
	scrape := func() harness.Gauges {
		t.Helper()
		g, err := harness.ScrapeGauges(s.ctx, url, fleetFamilies...)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	domainCounts := func(g harness.Gauges) string {
		return fmt.Sprintf("running=%v starting=%v no_clique_fits=%v waiting_for_trays=%v", g["cdplace_domains_running{}"],
			g["cdplace_domains_starting{}"], g["cdplace_domains_pending{reason=no_clique_fits}"], g["cdplace_domains_pending{reason=waiting_for_trays}"])
	}
	free := func(g harness.Gauges, clique string) float64 {
		return g["cdplace_clique_free_trays{clique="+clique+"}"]
	}

	// The scheduler's other fleets (scenarios before this one) may still be leaving: start from
	// domain counts that held for two refreshes.
	var base harness.Gauges
	waitUntil(t, 60*time.Second, "the fleet gauges to settle", func() bool {
		g := scrape()
		stable := base != nil && domainCounts(g) == domainCounts(base) && free(g, s.fleet.Cliques[0]) == 4 && free(g, s.fleet.Cliques[1]) == 4
		base = g
		if !stable {
			time.Sleep(1500 * time.Millisecond)
		}
		return stable
	})

	s.domain("a", 2, 4)
	d := s.waitFor("a running", 60*time.Second, all("a", 2))
	cliqueA := d["a"].Cliques[0]
	cliqueC := s.fleet.Cliques[0]
	if cliqueC == cliqueA {
		cliqueC = s.fleet.Cliques[1]
	}
	s.domain("c", 4, 4)
	s.waitFor("c running", 60*time.Second, all("c", 4))
	s.domain("b", 9, 4)
	s.domain("d", 3, 4)

	want := fmt.Sprintf("running=%v starting=%v no_clique_fits=%v waiting_for_trays=%v", base["cdplace_domains_running{}"]+2,
		base["cdplace_domains_starting{}"], base["cdplace_domains_pending{reason=no_clique_fits}"]+1, base["cdplace_domains_pending{reason=waiting_for_trays}"]+1)
	var last harness.Gauges
	waitUntil(t, 60*time.Second, "the fleet gauges to show a and c running, b and d pending", func() bool {
		last = scrape()
		return domainCounts(last) == want && free(last, cliqueA) == 2 && free(last, cliqueC) == 0
	})
	t.Logf("fleet gauges: %s; free trays %s=%v %s=%v", domainCounts(last), cliqueA, free(last, cliqueA), cliqueC, free(last, cliqueC))

	// b's and d's pods are retried meanwhile (backoff, and each time a pod elsewhere is placed).
	time.Sleep(10 * time.Second)
	list, err := s.e.CP.Client.EventsV1().Events(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	notes := map[string][]string{}
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "ComputeDomain" {
			continue
		}
		key := ev.Regarding.Name + " " + ev.Reason + " " + ev.Note
		seen[key]++
		notes[ev.Regarding.Name+" "+ev.Reason] = append(notes[ev.Regarding.Name+" "+ev.Reason], ev.Note)
		if ev.Series != nil {
			t.Errorf("event said again (series of %d): %s", ev.Series.Count, key)
		}
		if ev.Type != "Normal" {
			t.Errorf("event of type %s: %s", ev.Type, key)
		}
	}
	t.Logf("Events on the ComputeDomains: %v", notes)
	for key, n := range seen {
		if n > 1 {
			t.Errorf("event said %d times: %s", n, key)
		}
	}
	expect := func(name, reason string, parts ...string) {
		t.Helper()
		got := notes[name+" "+reason]
		for _, note := range got {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(note, p)
			}
			if ok {
				return
			}
		}
		t.Errorf("no %s Event on ComputeDomain %s with %q; got %q (all: %v)", reason, name, parts, got, notes)
	}
	job := func(name string, size int) string {
		return fmt.Sprintf("(size %d from Job %s/%s spec.parallelism)", size, s.ns, name)
	}
	expect("a", "Placed", fmt.Sprintf("ComputeDomain %s/a placed in NVLink clique %s: 2 tray(s) %s", s.ns, cliqueA, job("a", 2)))
	expect("c", "Placed", fmt.Sprintf("ComputeDomain %s/c placed in NVLink clique %s: 4 tray(s) %s", s.ns, cliqueC, job("c", 4)))
	expect("b", "Waiting", fmt.Sprintf("ComputeDomain %s/b needs 9 trays %s, more than one NVLink clique holds (the largest clique has 4 usable trays)", s.ns, job("b", 9)),
		"all segments or none: it needs 9 trays and all NVLink cliques together have 8 usable")
	expect("d", "Waiting", fmt.Sprintf("ComputeDomain %s/d needs 3 trays in one NVLink clique %s; the best clique, %s, offers 2", s.ns, job("d", 3), cliqueA))
	for _, name := range []string{"a", "c"} {
		if n := len(notes[name+" Placed"]); n != 1 {
			t.Errorf("ComputeDomain %s: %d Placed Events, want 1: %v", name, n, notes[name+" Placed"])
		}
	}
}

// waitUntil polls cond every 250ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
