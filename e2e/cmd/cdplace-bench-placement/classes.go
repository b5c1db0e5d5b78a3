package main

import (
	"fmt"
	"math"
)

// SizeClass is a range of domain sizes in trays. The classes are the policy's head-of-queue
// reservation classes (one reservation at a time per class), so each has its own queue head.
type SizeClass struct {
	Name     string `json:"name"`
	MinTrays int    `json:"minTrays"`
	MaxTrays int    `json:"maxTrays"`
}

// SizeClasses are 1–4, 5–8, 9–15 and 16 trays or more (16–18 on NVL72 cliques).
var SizeClasses = []SizeClass{
	{"1–4", 1, 4}, {"5–8", 5, 8}, {"9–15", 9, 15}, {"16–18", 16, math.MaxInt32},
}

// classOf is the index in SizeClasses of a domain of size trays.
func classOf(size int) int {
	for i, c := range SizeClasses {
		if size >= c.MinTrays && size <= c.MaxTrays {
			return i
		}
	}
	return 0
}

// ClassResult is one size class of one configuration's run. Waits are real seconds from a
// domain's creation to all its pods bound (×timeScale for trace seconds); a domain that never
// started counts as waiting until the end of the trace, so the censored median and p95 are lower
// bounds of the true ones whenever some domain never started.
type ClassResult struct {
	SizeClass
	Arrived      int     `json:"arrived"`
	Started      int     `json:"started"`
	StartedShare float64 `json:"startedShare"`
	// WaitMedian, WaitP95: every domain of the class, never-started ones counted until the end.
	WaitMedian float64 `json:"waitMedianSeconds"`
	WaitP95    float64 `json:"waitP95Seconds"`
	// WaitMedianStarted, WaitP95Started: the domains that started only.
	WaitMedianStarted float64 `json:"waitMedianStartedSeconds"`
	WaitP95Started    float64 `json:"waitP95StartedSeconds"`
	// Preemptions: evictions of a whole domain of this class by the scheduler's preemption;
	// GPUHoursEvicted: the GPU-hours (trace time) its evicted pods had held since binding.
	Preemptions     int     `json:"preemptions"`
	PreemptedPods   int     `json:"preemptedPods"`
	GPUHoursEvicted float64 `json:"gpuHoursEvicted"`
}

// classResults groups a run's domains by size class. horizon is the trace's end in real seconds
// since it started and scale the trace seconds per real second (for domains whose creation
// failed, which count from their arrival in the trace).
func classResults(cds []CDOutcome, horizon, scale float64) []ClassResult {
	out := make([]ClassResult, len(SizeClasses))
	waits := make([][]float64, len(SizeClasses))
	started := make([][]float64, len(SizeClasses))
	for i, c := range SizeClasses {
		out[i].SizeClass = c
	}
	for _, cd := range cds {
		i := classOf(cd.Size)
		cl := &out[i]
		cl.Arrived++
		cl.Preemptions += cd.Preemptions
		cl.PreemptedPods += cd.PreemptedPods
		cl.GPUHoursEvicted += cd.GPUHoursEvicted
		if cd.Wait != nil && !cd.NeverStarted {
			cl.Started++
			waits[i] = append(waits[i], *cd.Wait)
			started[i] = append(started[i], *cd.Wait)
			continue
		}
		created := cd.ArrivalTrace / scale
		if cd.Created != nil {
			created = *cd.Created
		}
		waits[i] = append(waits[i], max(0, horizon-created))
	}
	for i := range out {
		cl := &out[i]
		cl.StartedShare = math.NaN()
		if cl.Arrived > 0 {
			cl.StartedShare = float64(cl.Started) / float64(cl.Arrived)
		}
		cl.WaitMedian, cl.WaitP95 = quantile(waits[i], 0.5), quantile(waits[i], 0.95)
		cl.WaitMedianStarted, cl.WaitP95Started = quantile(started[i], 0.5), quantile(started[i], 0.95)
	}
	return out
}

// Check is one "Done when" bullet of issue 12 for one configuration's run.
type Check struct {
	Name  string `json:"name"`
	Holds bool   `json:"holds"`
	Value string `json:"value"`
}

// Thresholds of issue 12's "Done when" for bench-placement.
const (
	minStartedShare  = 0.80 // every size class
	maxBigP95OverMed = 3.0  // p95 wait of 16–18 over the median wait of 1–4
	minAllocNowBound = 0.95 // allocation over the no-migration bound at saturation
)

// doneWhen checks one configuration's run against issue 12's bench-placement bullets. Waits are
// the censored ones (never-started domains wait until the end). A class without arrivals passes
// the started-share bullet; a ratio without data fails.
func doneWhen(c *ConfigResult, classes []ClassResult) []Check {
	var out []Check
	minShare, minName := math.Inf(1), ""
	for _, cl := range classes {
		if cl.Arrived > 0 && cl.StartedShare < minShare {
			minShare, minName = cl.StartedShare, cl.Name
		}
	}
	share := Check{Name: "every size class ≥ 80% started", Holds: true, Value: "no arrivals"}
	if minName != "" {
		share.Holds = minShare >= minStartedShare
		share.Value = fmt.Sprintf("lowest %s: %.0f%%", minName, 100*minShare)
	}
	out = append(out, share)

	ratio := Check{Name: "p95 wait 16–18 ≤ 3× median wait 1–4", Value: "no data"}
	if len(classes) == len(SizeClasses) {
		small, big := classes[0], classes[len(classes)-1]
		if measured(small.WaitMedian) && measured(big.WaitP95) {
			ratio.Holds = big.WaitP95 <= maxBigP95OverMed*small.WaitMedian
			r := math.Inf(1)
			if small.WaitMedian > 0 {
				r = big.WaitP95 / small.WaitMedian
			}
			ratio.Value = fmt.Sprintf("%.1f s vs %.1f s (%.0f×)", big.WaitP95, small.WaitMedian, r)
		}
	}
	out = append(out, ratio)

	alloc := Check{Name: "alloc ≥ 95% of the no-migration bound", Value: "no saturated sample"}
	if c.SaturatedSamples > 0 {
		alloc.Holds = c.AllocOverNowBound >= minAllocNowBound
		alloc.Value = fmt.Sprintf("%.1f%%", 100*c.AllocOverNowBound)
	}
	out = append(out, alloc)

	out = append(out, Check{
		Name:  "0 split, 0 refusals, 0 part-bound",
		Holds: c.Splits == 0 && c.PrepareRefusals == 0 && c.StalledPartBound == 0,
		Value: fmt.Sprintf("%d / %d / %d", c.Splits, c.PrepareRefusals, c.StalledPartBound),
	})
	return out
}

// measured: v is a number, not NaN (no data) nor the -1 jsonSafe writes in its place.
func measured(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
