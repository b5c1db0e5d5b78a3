package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	pairs := pairRatios(runs, 5004, "gpu")
	if len(pairs) != 6 || math.Abs(pairs[0]-truth*first) > 1e-9 || math.Abs(pairs[1]-truth/first) > 1e-9 {
		t.Fatalf("pair ratios %v", pairs)
	}
	if g := geoMean(pairs); math.Abs(g-truth) > 1e-9 {
		t.Fatalf("geometric mean %v, want %v", g, truth)
	}
	if got := pairRatios(runs, 5004, "cpu"); len(got) != 0 {
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
	if len(got.Summary) != 1 || got.Summary[0].CdplaceRefusals != 0 || got.Summary[0].BaselineRefusals != 8 {
		t.Fatalf("summary %+v, want 0 refusals for cdplace and 8 for the baseline", got.Summary)
	}
	md, err := os.ReadFile(filepath.Join(out, "throughput.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| 0 / 8 |") {
		t.Fatalf("the table does not show 0 / 8:\n%s", md)
	}
}
