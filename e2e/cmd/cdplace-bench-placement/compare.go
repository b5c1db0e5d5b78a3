package main

// Placement quality beside the offline references (issue 36): the same trace scheduled by EASY
// backfill, conservative backfill and runtime-blind FIFO (package reference), and each live
// configuration measured the same way, per size class, in trace seconds.

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/cdplace/cdplace/e2e/cmd/cdplace-bench-placement/reference"
	"github.com/cdplace/cdplace/e2e/plot"
)

// PolicyClass is one size class under one policy. Times are trace seconds.
type PolicyClass struct {
	SizeClass
	Arrived int `json:"arrived"`
	Started int `json:"started"`
	// WaitMedian, WaitP95: arrival to start; a domain that never started counts as waiting until
	// the run's end (then they are lower bounds).
	WaitMedian float64 `json:"waitMedianTraceSeconds"`
	WaitP95    float64 `json:"waitP95TraceSeconds"`
	// GPUHours: GPU-hours (trace time) the class's domains ran, over the run and within the
	// arrival window.
	GPUHours       float64 `json:"gpuHours"`
	GPUHoursWindow float64 `json:"gpuHoursInWindow"`
	// waits: every domain's wait, counted as for WaitMedian, to pool across traces.
	waits []float64
}

// PolicyResult is one policy (a live configuration or an offline reference) on one trace.
type PolicyResult struct {
	Policy string `json:"policy"`
	Live   bool   `json:"live"`
	// Simulated: a policy component run offline by `cdplace replay --simulate` (-simulate).
	Simulated bool `json:"simulated,omitempty"`
	// End: the run's end in trace seconds (every domain completed, or the cap); Capped: the cap
	// ended it with domains left, so waits and started counts are lower bounds.
	End    float64 `json:"endTraceSeconds"`
	Capped bool    `json:"capped"`
	// GPUAllocation: GPU-seconds busy over GPU-seconds of healthy trays, from 0 to End.
	GPUAllocation float64 `json:"gpuAllocation"`
	// TraysAllocatedWindow: the mean allocated trays over the arrival window.
	TraysAllocatedWindow float64       `json:"traysAllocatedInWindow"`
	Classes              []PolicyClass `json:"classes"`
	// Live runs and simulations only (a simulation counts every domain that was ever part
	// bound, stalled or not).
	Splits           int `json:"splits"`
	PrepareRefusals  int `json:"prepareRefusals"`
	StalledPartBound int `json:"stalledPartBound"`
}

// span is one domain's schedule in trace seconds; start NaN: never started.
type span struct {
	size                  int
	arrival, start, end   float64
	neverStarted, running bool
}

// policyClasses groups spans by size class: waits censored at end, GPU-hours up to end and up to
// window.
func policyClasses(spans []span, window, end float64) []PolicyClass {
	out := make([]PolicyClass, len(SizeClasses))
	waits := make([][]float64, len(SizeClasses))
	for i, c := range SizeClasses {
		out[i].SizeClass = c
	}
	for _, s := range spans {
		i := classOf(s.size)
		cl := &out[i]
		cl.Arrived++
		if s.neverStarted {
			waits[i] = append(waits[i], max(0, end-s.arrival))
			continue
		}
		cl.Started++
		waits[i] = append(waits[i], max(0, s.start-s.arrival))
		stop := math.Min(s.end, end)
		gpus := float64(s.size * gpusPerTray)
		cl.GPUHours += gpus * max(0, stop-s.start) / 3600
		cl.GPUHoursWindow += gpus * max(0, math.Min(stop, window)-math.Min(s.start, window)) / 3600
	}
	for i := range out {
		out[i].waits = waits[i]
		out[i].WaitMedian, out[i].WaitP95 = quantile(waits[i], 0.5), quantile(waits[i], 0.95)
		jsonSafe(&out[i].WaitMedian) // no arrivals: -1, which JSON can carry and measured() rejects
		jsonSafe(&out[i].WaitP95)
	}
	return out
}

// referenceInput is the trace as the reference sees it: each domain a job of its size and
// lifetime, each plain pod a 1-tray job, each rack one clique, the same failures.
func referenceInput(tr Trace) reference.Input {
	in := reference.Input{Cliques: tr.Spec.Racks, TraysPerClique: tr.Spec.TraysPerClique, Window: tr.Window()}
	for _, cd := range tr.CDs {
		in.Jobs = append(in.Jobs, reference.Job{Name: cd.Name, Arrival: cd.At, Size: cd.Size, Runtime: cd.Lifetime})
	}
	for _, p := range tr.Plain {
		in.Jobs = append(in.Jobs, reference.Job{Name: p.Name, Arrival: p.At, Size: 1, Runtime: p.Lifetime, Plain: true})
	}
	for _, f := range tr.Failures {
		in.Failures = append(in.Failures, reference.Failure{At: f.At, Clique: f.Rack, Tray: f.Tray, RepairAfter: f.RepairAfter})
	}
	return in
}

// referenceNames are the report's names of the reference policies.
var referenceNames = map[reference.Policy]string{
	reference.EASY: "EASY", reference.Conservative: "conservative", reference.FIFO: "runtime-blind FIFO",
}

// references simulates every reference policy on tr.
func references(tr Trace) ([]*PolicyResult, error) {
	in := referenceInput(tr)
	var out []*PolicyResult
	for _, p := range reference.Policies {
		res, err := reference.Simulate(in, p)
		if err != nil {
			return nil, fmt.Errorf("reference %s: %w", p, err)
		}
		var spans []span
		for _, j := range res.Jobs {
			if j.Plain {
				continue
			}
			spans = append(spans, span{size: j.Size, arrival: j.Arrival, start: j.Start, end: j.End, neverStarted: math.IsNaN(j.Start)})
		}
		pr := &PolicyResult{Policy: referenceNames[p], End: res.End, Classes: policyClasses(spans, in.Window, res.End)}
		if res.HealthyTraySeconds > 0 {
			pr.GPUAllocation = res.BusyTraySeconds / res.HealthyTraySeconds
		}
		if in.Window > 0 {
			pr.TraysAllocatedWindow = res.BusyInWindow / in.Window
		}
		out = append(out, pr)
	}
	return out, nil
}

// liveResult measures a live configuration's run the way references measures the references:
// a domain starts when all its pods are bound and runs until it departs (or the run ends).
// horizon (real seconds) is the run's end for runs recorded before EndSeconds.
func liveResult(c *ConfigResult, scale, horizon, window float64) *PolicyResult {
	end := c.EndSeconds * scale
	if c.EndSeconds <= 0 {
		end = horizon * scale
	}
	var spans []span
	for _, cd := range c.CDs {
		s := span{size: cd.Size, arrival: cd.ArrivalTrace, neverStarted: cd.AllBound == nil}
		if !s.neverStarted {
			s.start = *cd.AllBound * scale
			s.end = end
			if cd.Departed != nil {
				s.end = *cd.Departed * scale
			}
			// The wait counts from the domain's creation, as ClassResult does.
			if cd.Created != nil {
				s.arrival = *cd.Created * scale
			}
		}
		spans = append(spans, s)
	}
	pr := &PolicyResult{
		Policy: c.Config, Live: true, End: end, Capped: c.Capped, Classes: policyClasses(spans, window, end),
		Splits: c.Splits, PrepareRefusals: c.PrepareRefusals, StalledPartBound: c.StalledPartBound,
	}
	var busy, healthy, inWindow float64
	n := 0
	for _, s := range c.SampleLog {
		busy += float64(s.AllocGPUs)
		healthy += float64(s.HealthyTrays * gpusPerTray)
		if s.TraceT <= window {
			inWindow += float64(s.AllocTrays)
			n++
		}
	}
	if healthy > 0 {
		pr.GPUAllocation = busy / healthy
	}
	if n > 0 {
		pr.TraysAllocatedWindow = inWindow / float64(n)
	}
	return pr
}

// Thresholds of issue 36's "Done when", against the EASY reference on the same trace.
const (
	minAllocOverEASY       = 0.97 // load < 1: GPU allocation
	maxBigP95OverEASY      = 1.5  // load < 1: p95 wait of 16–18
	maxSmallMedianOverEASY = 2.0  // load < 1: median wait of 1–4
	minTraysOverEASY       = 0.95 // load ≥ 1: trays allocated in the window
	minBigGPUHoursOverEASY = 0.80 // load ≥ 1: GPU-hours delivered to 16–18 in the window
)

// doneWhenVsEASY checks a live configuration p against EASY on a trace of offered load load.
func doneWhenVsEASY(p, easy *PolicyResult, load float64) []Check {
	ratio := func(name string, got, ref, limit float64, atMost bool, unit string) Check {
		ch := Check{Name: name}
		r := got / ref
		switch {
		case !measured(got) || !measured(ref):
			ch.Value = "no data"
			return ch
		case ref == 0 && got == 0:
			r = 1
		}
		if atMost {
			ch.Holds = got <= limit*ref
		} else {
			ch.Holds = got >= limit*ref
		}
		ch.Value = fmt.Sprintf("%s vs %s%s (%.2f×)", fmtNum(got), fmtNum(ref), unit, r)
		return ch
	}
	last := len(SizeClasses) - 1
	if load < 1 {
		started := Check{Name: "every domain of every class starts", Holds: true}
		var missing []string
		for _, cl := range p.Classes {
			if cl.Started < cl.Arrived {
				started.Holds = false
				missing = append(missing, fmt.Sprintf("%s: %d of %d", cl.Name, cl.Started, cl.Arrived))
			}
		}
		started.Value = "all"
		if len(missing) > 0 {
			started.Value = strings.Join(missing, ", ")
		}
		if p.Capped {
			started.Holds = false
			started.Value += " (capped)"
		}
		return []Check{
			started,
			{Name: "0 splits, 0 refusals, 0 part-bound", Holds: p.Splits == 0 && p.PrepareRefusals == 0 && p.StalledPartBound == 0,
				Value: fmt.Sprintf("%d / %d / %d", p.Splits, p.PrepareRefusals, p.StalledPartBound)},
			ratio("GPU allocation ≥ 97% of EASY's", p.GPUAllocation, easy.GPUAllocation, minAllocOverEASY, false, ""),
			ratio("p95 wait 16–18 ≤ 1.5× EASY's", p.Classes[last].WaitP95, easy.Classes[last].WaitP95, maxBigP95OverEASY, true, " s"),
			ratio("median wait 1–4 ≤ 2× EASY's", p.Classes[0].WaitMedian, easy.Classes[0].WaitMedian, maxSmallMedianOverEASY, true, " s"),
		}
	}
	return []Check{
		ratio("trays allocated (window) ≥ 95% of EASY's", p.TraysAllocatedWindow, easy.TraysAllocatedWindow, minTraysOverEASY, false, ""),
		ratio("GPU-h to 16–18 (window) ≥ 80% of EASY's", p.Classes[last].GPUHoursWindow, easy.Classes[last].GPUHoursWindow, minBigGPUHoursOverEASY, false, ""),
	}
}

func fmtNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e6 {
		return fmt.Sprintf("%.0f", v)
	}
	if math.Abs(v) < 10 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// Comparison is every policy on one trace: the live configurations (if run) and the references.
type Comparison struct {
	Seed        uint64          `json:"seed"`
	TraceDigest string          `json:"traceDigest"`
	OfferedLoad float64         `json:"offeredLoad"`
	Window      float64         `json:"arrivalWindowTraceSeconds"`
	Policies    []*PolicyResult `json:"policies"`
	// DoneWhen: each live configuration's or simulated policy's checks against EASY.
	DoneWhen map[string][]Check `json:"doneWhen,omitempty"`
}

// compare builds the comparison of the live or simulated results (possibly none) and the
// references on tr, with issue 36's checks of each against EASY.
func compare(tr Trace, live []*PolicyResult) (*Comparison, error) {
	refs, err := references(tr)
	if err != nil {
		return nil, err
	}
	_, load := tr.Demand()
	cmp := &Comparison{Seed: tr.Spec.Seed, TraceDigest: tr.Digest(), OfferedLoad: load, Window: tr.Window(),
		Policies: append(append([]*PolicyResult(nil), live...), refs...)}
	for _, p := range live {
		if cmp.DoneWhen == nil {
			cmp.DoneWhen = map[string][]Check{}
		}
		cmp.DoneWhen[p.Policy] = doneWhenVsEASY(p, refs[0], load)
	}
	return cmp, nil
}

// comparisonTable is the markdown table of one comparison: a row per policy and size class.
func comparisonTable(c *Comparison) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "seed %d, trace %s, offered load %.2f (arrival window %.0f trace s); times in trace seconds, a domain never started counts until the run's end\n\n",
		c.Seed, c.TraceDigest, c.OfferedLoad, c.Window)
	sb.WriteString("| policy | trays | started | wait median / p95 (s) | GPU-h (run / window) | GPU allocation | trays allocated (window mean) | run end (s) | splits / refusals / part-bound |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range c.Policies {
		end := fmt.Sprintf("%.0f", p.End)
		if p.Capped {
			end += " (capped: lower bounds)"
		}
		live := "–"
		if p.Live || p.Simulated {
			live = fmt.Sprintf("%d / %d / %d", p.Splits, p.PrepareRefusals, p.StalledPartBound)
		}
		for i, cl := range p.Classes {
			if i == 0 {
				fmt.Fprintf(&sb, "| %s | %s | %d/%d | %s / %s | %.1f / %.1f | %.1f%% | %.1f | %s | %s |\n", p.Policy, cl.Name, cl.Started, cl.Arrived,
					secs(cl.WaitMedian), secs(cl.WaitP95), cl.GPUHours, cl.GPUHoursWindow, 100*p.GPUAllocation, p.TraysAllocatedWindow, end, live)
				continue
			}
			fmt.Fprintf(&sb, "| | %s | %d/%d | %s / %s | %.1f / %.1f | | | | |\n", cl.Name, cl.Started, cl.Arrived,
				secs(cl.WaitMedian), secs(cl.WaitP95), cl.GPUHours, cl.GPUHoursWindow)
		}
	}
	if len(c.DoneWhen) > 0 {
		var names []string
		for n := range c.DoneWhen {
			names = append(names, n)
		}
		sort.Strings(names)
		sb.WriteString("\nIssue 36, \"Done when\" against EASY on this trace:\n\n")
		for _, n := range names {
			for _, ch := range c.DoneWhen[n] {
				mark := "FAIL"
				if ch.Holds {
					mark = "PASS"
				}
				fmt.Fprintf(&sb, "- %s: %s: **%s** (%s)\n", n, ch.Name, mark, ch.Value)
			}
		}
	}
	return sb.String()
}

// comparisonCharts are grouped bars per size class, one bar per policy: share started, median
// and p95 wait, GPU-hours delivered within the arrival window.
func comparisonCharts(c *Comparison) map[string][]byte {
	var groups []string
	for _, cl := range SizeClasses {
		groups = append(groups, cl.Name+" trays")
	}
	kinds := []struct {
		file, title, y string
		v              func(PolicyClass) float64
	}{
		{"compare-started.svg", "domains started", "share of the class's arrivals", func(cl PolicyClass) float64 {
			if cl.Arrived == 0 {
				return math.NaN()
			}
			return float64(cl.Started) / float64(cl.Arrived)
		}},
		{"compare-wait-median.svg", "median wait", "trace seconds", func(cl PolicyClass) float64 { return cl.WaitMedian }},
		{"compare-wait-p95.svg", "p95 wait", "trace seconds", func(cl PolicyClass) float64 { return cl.WaitP95 }},
		{"compare-gpu-hours.svg", "GPU-hours delivered in the arrival window", "GPU-hours (trace time)", func(cl PolicyClass) float64 { return cl.GPUHoursWindow }},
	}
	out := map[string][]byte{}
	for _, k := range kinds {
		var series []plot.Series
		for _, p := range c.Policies {
			s := plot.Series{Name: p.Policy}
			for _, cl := range p.Classes {
				s.Y = append(s.Y, nanIfUnmeasured(k.v(cl)))
			}
			series = append(series, s)
		}
		title := fmt.Sprintf("%s per size class (seed %d, offered load %.2f)", k.title, c.Seed, c.OfferedLoad)
		out[k.file] = plot.BarChart(title, k.y, groups, series)
	}
	return out
}
