package main

// placement.json, the CSV and charts per seed, and summary.md: what a run writes.

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cdplace/cdplace/e2e/plot"
)

// Report is placement.json.
type Report struct {
	Generated         string    `json:"generated"`
	Command           string    `json:"command"`
	Smoke             bool      `json:"smoke"`
	TraceDigest       string    `json:"traceDigest"`
	TraceSpec         TraceSpec `json:"traceSpec"`
	MeanSize          float64   `json:"meanDomainSizeTrays"`
	OfferedLoad       float64   `json:"offeredLoad"` // tray-seconds asked / tray-seconds available in the arrival window
	TimeScale         float64   `json:"timeScale"`   // trace seconds per real second
	HorizonSeconds    float64   `json:"horizonRealSeconds"`
	LabelLagSeconds   float64   `json:"labelLagSeconds"`
	SampleSeconds     float64   `json:"sampleSeconds"`
	SatGraceSeconds   float64   `json:"satGraceSeconds"`
	StallGraceSeconds float64   `json:"stallGraceSeconds"`
	BoundDefinition   string    `json:"boundDefinition"`
	ControlPlane      float64   `json:"controlPlaneStartSeconds"`
	WallSeconds       float64   `json:"wallSeconds"`
	RunOrder          []string  `json:"runOrder,omitempty"` // the order the configurations ran in
	// LabelLagShare: the label lag in trace seconds (labelLagSeconds × timeScale) over the
	// median domain lifetime: how much of a lifetime the driver's lag is at this compression.
	LabelLagShare float64 `json:"labelLagShareOfMedianLifetime"`
	// Comparison: the live configurations beside the offline references on the same trace.
	Comparison *Comparison     `json:"comparison,omitempty"`
	Configs    []*ConfigResult `json:"configs"`
}

// jsonSafe replaces NaN (no started domain) with -1, which encoding/json can write.
func jsonSafe(v *float64) {
	if math.IsNaN(*v) || math.IsInf(*v, 0) {
		*v = -1
	}
}

func writeOutputs(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range rep.Configs {
		for _, v := range []*float64{&c.WaitMedian, &c.WaitP95, &c.WaitMean, &c.WaitMedianCensored, &c.WaitP95Censored,
			&c.WaitMedianTraceMin, &c.WaitP95TraceMin} {
			jsonSafe(v)
		}
		for i := range c.Classes {
			cl := &c.Classes[i]
			for _, v := range []*float64{&cl.StartedShare, &cl.WaitMedian, &cl.WaitP95, &cl.WaitMedianStarted, &cl.WaitP95Started} {
				jsonSafe(v)
			}
		}
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "placement.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}

	f, err := os.Create(filepath.Join(dir, "allocation.csv"))
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"time_s", "config", "allocated_gpu_fraction", "stranded_gpus", "waiting_cds",
		"trace_time_s", "healthy_trays", "allocated_trays", "useful_gpus", "gpus_held_by_incomplete", "running_cds", "partial_cds",
		"plain_pods_present", "label_held_trays", "saturated", "bound_trays", "bound_proven", "lag_aware_bound_trays", "no_migration_bound_trays", "prepare_refusals"})
	ff := func(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }
	it := strconv.Itoa
	for _, c := range rep.Configs {
		for _, s := range c.SampleLog {
			_ = w.Write([]string{ff(s.T, 2), c.Config, ff(s.AllocFrac, 4), it(s.StrandedGPUs), it(s.WaitingCDs),
				ff(s.TraceT, 0), it(s.HealthyTrays), it(s.AllocTrays), it(s.UsefulGPUs), it(s.IncompleteGPUs), it(s.RunningCDs), it(s.PartialCDs),
				it(s.PlainPresent), it(s.LabelHeldTrays), strconv.FormatBool(s.Saturated), it(s.BoundTrays), strconv.FormatBool(s.BoundProven),
				it(s.LagAwareBound), it(s.NowBound), it(s.PrepareRefusals)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}

	var alloc, useful, waiting, rss, journal []plot.Series
	for _, c := range rep.Configs {
		a := plot.Series{Name: c.Config}
		u := plot.Series{Name: c.Config}
		q := plot.Series{Name: c.Config}
		for _, s := range c.SampleLog {
			a.X, a.Y = append(a.X, s.T), append(a.Y, s.AllocFrac)
			if s.HealthyTrays > 0 {
				u.X, u.Y = append(u.X, s.T), append(u.Y, float64(s.UsefulGPUs)/float64(s.HealthyTrays*gpusPerTray))
			}
			q.X, q.Y = append(q.X, s.T), append(q.Y, float64(s.WaitingCDs))
		}
		alloc, useful, waiting = append(alloc, a), append(useful, u), append(waiting, q)
		m, j := plot.Series{Name: c.Config}, plot.Series{Name: c.Config}
		for _, s := range c.SampleLog {
			if s.SchedulerRSSMiB > 0 {
				m.X, m.Y = append(m.X, s.T), append(m.Y, s.SchedulerRSSMiB)
			}
			if s.JournalLength > 0 {
				j.X, j.Y = append(j.X, s.T), append(j.Y, s.JournalLength)
			}
		}
		if len(m.X) > 0 {
			rss, journal = append(rss, m), append(journal, j)
		}
	}
	// The bound of the first cdplace configuration, for reference (every configuration has its
	// own; they differ only through which domains are present when).
	for _, c := range rep.Configs {
		if c.Profile == "computedomain-scheduler" {
			b := plot.Series{Name: "packing bound (" + c.Config + ")"}
			for _, s := range c.SampleLog {
				if s.HealthyTrays > 0 {
					b.X, b.Y = append(b.X, s.T), append(b.Y, float64(s.BoundTrays)/float64(s.HealthyTrays))
				}
			}
			alloc = append(alloc, b)
			break
		}
	}
	title := fmt.Sprintf("GPU allocation over time (seed %d, %d trays, %d ComputeDomains)", rep.TraceSpec.Seed,
		rep.TraceSpec.Racks*rep.TraceSpec.TraysPerClique, rep.TraceSpec.Arrivals)
	x := fmt.Sprintf("time since the trace started (s, real; ×%g = trace seconds)", rep.TimeScale)
	charts := map[string][]byte{
		"allocation.svg":        plot.LineChart(title, x, "allocated GPUs / healthy GPUs", alloc),
		"useful-allocation.svg": plot.LineChart("GPUs of complete ComputeDomains and plain pods over time", x, "useful GPUs / healthy GPUs", useful),
		"waiting.svg":           plot.LineChart("ComputeDomains waiting (some pod unbound)", x, "domains", waiting),
	}
	if len(rss) > 0 {
		charts["scheduler-rss.svg"] = plot.LineChart("cdplace scheduler resident memory", x, "RSS (MiB)", rss)
		charts["journal-length.svg"] = plot.LineChart("cdplace policy journal length (cdplace_journal_length)", x, "deltas", journal)
	}
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
			return err
		}
	}
	one := &Bench{TimeScale: rep.TimeScale, Runs: []*Report{rep}}
	summary := summaryTable(rep) + "\n" + classTable(one) + "\n" + doneWhenTable(one) + "\n" + memoryTable(rep)
	if rep.Comparison != nil {
		summary += "\nBeside the offline references (issue 36): " + comparisonTable(rep.Comparison)
	}
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(summary), 0o644)
}

// summaryTable is the markdown table printed at the end and written to summary.md.
func summaryTable(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, trace %s: %d racks × %d trays, %d ComputeDomains (mean %.1f trays), %d plain pods, %d tray failures; offered load %.2f; "+
		"time scale %g (%.0f s real), label lag %gs (%.1f%% of the median domain lifetime)\n\n",
		rep.TraceSpec.Seed, rep.TraceDigest, rep.TraceSpec.Racks, rep.TraceSpec.TraysPerClique, rep.TraceSpec.Arrivals, rep.MeanSize,
		rep.TraceSpec.PlainPods, rep.TraceSpec.Failures, rep.OfferedLoad, rep.TimeScale, rep.HorizonSeconds, rep.LabelLagSeconds, 100*rep.LabelLagShare)
	b.WriteString("| config | CDs arrived | completed | never started | splits | partial at end | stalled part-bound | Prepare refusals (pods) | stranded GPUs mean / max | GPUs held by partial CDs (mean) | GPU allocation mean | useful allocation mean | saturated samples | alloc / bound at saturation | useful / bound | alloc / lag-aware bound | bound proven optimal | wait median / p95 (s) | wait incl. never started, median / p95 (s, ≥) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	sec := func(v float64) string {
		if v < 0 || math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.1f", v)
	}
	for _, c := range rep.Configs {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d (%d) | %.1f / %d | %.1f | %s | %s | %d of %d | %s / %s = **%s** | %s | %s | %s | %s / %s | %s / %s |\n",
			c.Config, c.CDsArrived, c.CDsCompleted, c.CDsNeverStarted, c.Splits, c.PartialAtEnd, c.StalledPartBound, c.PrepareRefusals, c.RefusedPods,
			c.StrandedMean, c.StrandedMax, c.IncompleteGPUsMean, pct(c.AllocMean), pct(c.UsefulAllocMean),
			c.SaturatedSamples, c.Samples, pct(c.AllocAtSaturation), pct(c.BoundAtSaturation), pct(c.AllocOverBound),
			pct(c.UsefulOverBound), pct(c.AllocOverLagBound), pct(c.BoundProvenShare), sec(c.WaitMedian), sec(c.WaitP95),
			sec(c.WaitMedianCensored), sec(c.WaitP95Censored))
	}
	b.WriteString("\nWhere the gap to the offline bound goes (shares of the bound, saturated samples):\n\n")
	b.WriteString("| config | alloc / offline bound | idle behind the label lag | fragmentation (no migration) | placeable now, not yet placed | alloc / no-migration bound | alloc / bound while arriving | domains ≥ 16 trays started | load average mean / max |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range rep.Configs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s (%d samples) | %d of %d | %.1f / %.1f |\n", c.Config, pct(c.AllocOverBound),
			pct(c.GapLabelLag), pct(c.GapFragmentation), pct(c.GapNotYetPlaced), pct(c.AllocOverNowBound),
			pct(c.AllocOverBoundArrivals), c.SaturatedSamplesArriving, c.BigStarted, c.BigArrived, c.LoadMean, c.LoadMax)
	}
	return b.String()
}
