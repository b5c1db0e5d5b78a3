package main

import (
	"math"
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
