package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
	"github.com/cdplace/cdplace/e2e/harness"
)

// Alternated pairs where whichever profile runs first in its pair is 6% faster: the geometric
// mean of the pair ratios gives the true ratio back.
func TestThePairsGeometricMeanCancelsTheFirstRunsAdvantage(t *testing.T) {
	const truth, first = 0.99, 1.06
	var runs []Run
	for rep := 0; rep < 6; rep++ {
		cd, base := 100*truth, 100.0
		if rep%2 == 0 { // cdplace first, as main.go orders even repetitions
			cd *= first
		} else {
			base *= first
		}
		runs = append(runs,
			Run{Trays: 5004, Kind: "gpu", Profile: string(harness.Cdplace), Rep: rep, PodsPerSec: cd},
			Run{Trays: 5004, Kind: "gpu", Profile: string(harness.Baseline), Rep: rep, PodsPerSec: base},
			Run{Trays: 5004, Kind: "cpu", Profile: string(harness.Baseline), Rep: rep, PodsPerSec: 1})
	}
	pairs := pairRatios(runs, 5004, "gpu", harness.Cdplace)
	if len(pairs) != 6 || math.Abs(pairs[0]-truth*first) > 1e-9 || math.Abs(pairs[1]-truth/first) > 1e-9 {
		t.Fatalf("pair ratios %v", pairs)
	}
	if g := geoMean(pairs); math.Abs(g-truth) > 1e-9 {
		t.Fatalf("geometric mean %v, want %v", g, truth)
	}
	if got := pairRatios(runs, 5004, "cpu", harness.Cdplace); len(got) != 0 {
		t.Fatalf("a workload without cdplace runs has no pairs: %v", got)
	}
	if geoMean(nil) != 0 {
		t.Fatal("no pairs, no mean")
	}
}

// The summary adds up each profile's Prepare refusals over its runs, in the JSON and the table.
func TestTheSummaryCountsEachProfilesPrepareRefusals(t *testing.T) {
	runs := []Run{
		{Trays: 5004, Kind: "computedomain", Profile: string(harness.Cdplace), Rep: 0, Pods: 10, Bound: 10, PodsPerSec: 3},
		{Trays: 5004, Kind: "computedomain", Profile: string(harness.Baseline), Rep: 0, Pods: 10, Bound: 9, PodsPerSec: 1, PrepareRefusals: 6},
		{Trays: 5004, Kind: "computedomain", Profile: string(harness.Baseline), Rep: 1, Pods: 10, Bound: 9, PodsPerSec: 1, PrepareRefusals: 2},
		{Trays: 5004, Kind: "computedomain", Profile: string(harness.Cdplace), Rep: 1, Pods: 10, Bound: 10, PodsPerSec: 3},
	}
	sums, md := reported(t, runs)
	if len(sums) != 1 || sums[0].CdplaceRefusals != 0 || sums[0].BaselineRefusals != 8 {
		t.Fatalf("summary %+v, want 0 refusals for cdplace and 8 for the baseline", sums)
	}
	if !strings.Contains(md, "| 0 / 8 |") {
		t.Fatalf("the table does not show 0 / 8:\n%s", md)
	}
}

// With -perf the summary gives each phase's CPU per bound pod for both profiles, and the table
// splits cdplace's extra into the plugin's frames and what is spent around them.
func TestTheSummaryGivesEachPhasesCPUPerPod(t *testing.T) {
	n := len(cpuprofile.Phases)
	phases := func(score, filter int) []int {
		v := make([]int, n)
		v[0], v[2] = score, filter // Phases[0] is Score, Phases[2] Filter
		return v
	}
	runs := []Run{
		// 998 Score samples at 499 Hz over 1,000 pods: 2 ms a pod, 0.998 of them the plugin's.
		{Trays: 5004, Kind: "gpu", Profile: string(harness.Cdplace), Rep: 0, Pods: 1000, Bound: 1000, PodsPerSec: 1,
			PerfPhases: phases(998, 4990), PerfPluginPhases: phases(499, 0)},
		{Trays: 5004, Kind: "gpu", Profile: string(harness.Baseline), Rep: 0, Pods: 1000, Bound: 1000, PodsPerSec: 1,
			PerfPhases: phases(499, 4990), PerfPluginPhases: phases(0, 0)},
		{Trays: 5004, Kind: "gpu", Profile: string(harness.Cdplace), Rep: 1, Pods: 1000, Bound: 1000, PodsPerSec: 1,
			PerfPhases: phases(998, 5988), PerfPluginPhases: phases(499, 0)},
		{Trays: 5004, Kind: "gpu", Profile: string(harness.Baseline), Rep: 1, Pods: 1000, Bound: 1000, PodsPerSec: 1,
			PerfPhases: phases(499, 4990), PerfPluginPhases: phases(0, 0)},
		{Trays: 5004, Kind: "cpu", Profile: string(harness.Cdplace), Rep: 0, Pods: 10, Bound: 10, PodsPerSec: 1},
	}
	got := phaseCosts(runs, 5004, "gpu")
	if len(got) != n {
		t.Fatalf("%d phases, want %d", len(got), n)
	}
	if s := got[0]; s.Phase != "Score" || s.Cdplace != 2 || s.Plugin != 1 || s.Baseline != 1 {
		t.Fatalf("Score %+v, want 2 ms a pod against 1, 1 of it the plugin's", s)
	}
	if f := got[2]; f.Phase != "Filter" || f.Cdplace != 11 || f.Plugin != 0 || f.Baseline != 10 {
		t.Fatalf("Filter %+v, want 11 ms a pod against 10", f)
	}
	if phaseCosts(runs, 5004, "cpu") != nil {
		t.Fatal("runs without perf samples have no phase costs")
	}
	table := phaseTable(5004, "gpu", got)
	for _, row := range []string{"| Score | 2.000 | 1.000 | 1.000 | +1.000 | +0.000 |", "| Filter | 11.000 | 0.000 | 10.000 | +1.000 | +1.000 |", "| all | 13.000 | 1.000 | 11.000 | +2.000 | +1.000 |"} {
		if !strings.Contains(table, row) {
			t.Errorf("no row %q in\n%s", row, table)
		}
	}
}

// With -stock-twin the summary reads the twin's pairs against the baseline as it reads
// cdplace's: the band two identical schedulers fall in on this machine.
func TestTheStockTwinsPairsAreTheNoiseBand(t *testing.T) {
	var runs []Run
	for rep, twin := range []float64{104, 98, 99, 97} {
		runs = append(runs,
			Run{Trays: 5004, Kind: "gpu", Profile: string(harness.Cdplace), Rep: rep, PodsPerSec: 95, CPUmsPerPod: 4.2},
			Run{Trays: 5004, Kind: "gpu", Profile: string(harness.Baseline), Rep: rep, PodsPerSec: 100, CPUmsPerPod: 4},
			Run{Trays: 5004, Kind: "gpu", Profile: string(stockTwin), Rep: rep, PodsPerSec: twin, CPUmsPerPod: 4.04})
	}
	sums, md := reported(t, runs)
	want := round(math.Pow(1.04*0.98*0.99*0.97, 0.25)) // 0.9947: 0.995
	if s := sums[0]; s.PairGeoMean != 0.95 || s.TwinPairGeoMean != want || s.TwinPairMin != 0.97 || s.TwinPairMax != 1.04 || s.TwinCPURatio != 1.01 {
		t.Fatalf("summary %+v, want cdplace's pairs 0.95 and the twin's %.3f (0.97–1.04), CPU 1.01", s, want)
	}
	if cell := "| 0.950 (0.95–0.95) | 0.995 (0.97–1.04), CPU 1.010 |"; !strings.Contains(md, cell) {
		t.Fatalf("the table does not show %q:\n%s", cell, md)
	}
}

// reported writes the report of runs to a temporary directory and reads back its summary (the
// JSON) and its tables (the Markdown).
func reported(t *testing.T, runs []Run) ([]Summary, string) {
	t.Helper()
	out := t.TempDir()
	if err := report(out, runs); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "throughput.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Summary []Summary }
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "throughput.md"))
	if err != nil {
		t.Fatal(err)
	}
	return got.Summary, string(md)
}
