package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cdplace/cdplace/e2e/plot"
)

// BoundDefinition is written into placement.json next to the numbers it explains.
const BoundDefinition = `Offline whole-tray packing bound, computed at every saturated sample (some ComputeDomain present has had a pod unbound for at least satGraceSeconds): ` +
	`the ComputeDomains present (running, partly placed or waiting; each at its full size in trays) are packed into the cliques' healthy trays, each domain wholly inside one clique, ` +
	`maximising the trays used; the plain pods present (one tray each, any clique) then fill trays the domains left free. ` +
	`The packing is found by the best of: cliques filled one after another with an exact subset-sum over the remaining domains (largest clique first, and smallest first), best-fit decreasing, ` +
	`and a branch and bound over the domains (largest first) with a budget of 200,000 nodes per sample. ` +
	`It is a feasible offline packing, hence a LOWER bound of the offline optimum (boundProvenShare says at how many samples it provably equals the optimum: it met an upper bound, ` +
	`or the search finished). Offline means: running domains may be moved, arrival order and the scheduler's latency do not matter, and a tray is free the moment its pod is deleted. ` +
	`allocationOverBound = sum of allocated trays / sum of bound trays over the saturated samples. ` +
	`lagAwareBound is the same packing with every idle tray that still carries a ComputeDomain node label (the driver's Unprepare lag) taken out of its clique. ` +
	`noMigrationBound keeps every bound pod where it is: the allocated trays, plus the rest of each partly placed domain in its own clique's free trays, plus the best packing of the ` +
	`waiting domains into the free (idle, unlabelled) trays of each clique, plus waiting plain pods in what is left; the gap between it and lagAwareBound is fragmentation that only moving ` +
	`running domains could undo.`

// CDOutcome is one ComputeDomain's history; times are real seconds since the trace started.
type CDOutcome struct {
	Name         string   `json:"name"`
	Size         int      `json:"size"`
	ArrivalTrace float64  `json:"arrivalTraceSeconds"`
	LifetimeReal float64  `json:"lifetimeSeconds"`
	Created      *float64 `json:"created,omitempty"`
	AllBound     *float64 `json:"allBound,omitempty"`
	AllRunning   *float64 `json:"allRunning,omitempty"`
	Departed     *float64 `json:"departed,omitempty"`
	Wait         *float64 `json:"waitSeconds,omitempty"` // creation to every pod bound
	Completed    bool     `json:"completed"`
	NeverStarted bool     `json:"neverStarted"`
	PartialAtEnd bool     `json:"partialAtEnd"`
	// StalledPartBound: pods bound and pods pending for longer than stallGraceSeconds while a
	// clique could have held the domain whole (never a domain that lost pods to a tray failure).
	StalledPartBound bool     `json:"stalledPartBound"`
	StallNote        string   `json:"stallNote,omitempty"`
	Split            bool     `json:"split"`
	Cliques          []string `json:"cliquesAtEnd,omitempty"`
	Replacements     int      `json:"replacements"`
	BoundAtEnd       int      `json:"boundPodsAtEnd"`
	Error            string   `json:"error,omitempty"`
	// Preemptions: evictions of the whole domain by the scheduler's preemption (pods with a
	// DisruptionTarget condition, reason PreemptionByScheduler); GPUHoursEvicted: the GPU-hours
	// (trace time) its evicted pods had held since binding.
	Preemptions     int     `json:"preemptions,omitempty"`
	PreemptedPods   int     `json:"preemptedPods,omitempty"`
	GPUHoursEvicted float64 `json:"gpuHoursEvicted,omitempty"`
}

// ConfigResult is everything measured for one configuration.
type ConfigResult struct {
	Config       string `json:"config"`
	Profile      string `json:"schedulerName"`
	PluginConfig string `json:"pluginConfig,omitempty"`
	Namespace    string `json:"namespace"`
	Trays        int    `json:"trays"`

	CDsArrived       int `json:"cdsArrived"`
	CDsStarted       int `json:"cdsStarted"`   // every pod bound at some point
	CDsCompleted     int `json:"cdsCompleted"` // ran their lifetime and left
	CDsRunningAtEnd  int `json:"cdsRunningAtEnd"`
	CDsNeverStarted  int `json:"cdsNeverStarted"`
	PartialAtEnd     int `json:"cdsPartialAtEnd"`
	StalledPartBound int `json:"cdsStalledPartBound"`
	Splits           int `json:"splits"` // domains whose bound pods spanned more than one clique at some point
	Replacements     int `json:"replacementPods"`

	PlainArrived   int `json:"plainArrived"`
	PlainStarted   int `json:"plainStarted"`
	PlainCompleted int `json:"plainCompleted"`
	PlainKilled    int `json:"plainKilledByFailures"`

	// Preemption by the scheduler (see notePreemption): whole-domain evictions, their pods, plain
	// pods preempted, and the GPU-hours (trace time) all victims had held since binding. The trace
	// gives every pod the same priority, so these are 0 unless something else preempts.
	Preemptions     int           `json:"preemptions"`
	PreemptedPods   int           `json:"preemptedPods"`
	PlainPreempted  int           `json:"plainPreempted"`
	GPUHoursEvicted float64       `json:"gpuHoursEvicted"`
	Classes         []ClassResult `json:"sizeClasses"`
	DoneWhen        []Check       `json:"doneWhen"`

	TrayFailures    []*failureRec `json:"trayFailures"`
	PrepareRefusals int           `json:"prepareRefusals"`
	RefusedPods     int           `json:"refusedPods"`
	SampleRefusal   string        `json:"sampleRefusal,omitempty"`

	StrandedMean       float64 `json:"strandedGPUsMean"`
	StrandedMax        int     `json:"strandedGPUsMax"`
	AllocMean          float64 `json:"allocationMean"`       // GPU allocation fraction, mean over all samples
	UsefulAllocMean    float64 `json:"usefulAllocationMean"` // only complete domains and plain pods
	IncompleteGPUsMean float64 `json:"gpusHeldByIncompleteMean"`
	SaturatedSamples   int     `json:"saturatedSamples"`
	Samples            int     `json:"samplesTotal"`
	AllocAtSaturation  float64 `json:"allocationAtSaturation"` // allocated trays / healthy trays
	BoundAtSaturation  float64 `json:"boundAtSaturation"`      // bound trays / healthy trays
	AllocOverBound     float64 `json:"allocationOverBound"`
	UsefulOverBound    float64 `json:"usefulAllocationOverBound"`
	AllocOverLagBound  float64 `json:"allocationOverLagAwareBound"`
	AllocOverNowBound  float64 `json:"allocationOverNoMigrationBound"`
	// Where the gap between the allocation and the offline bound goes, as shares of the bound
	// over the saturated samples: idle trays held by the driver's node label; trays free but in
	// pieces no waiting domain fits without moving running ones; and what could be placed now
	// but is not yet (scheduling latency, backoff, pods still being created).
	GapLabelLag              float64 `json:"gapShareLabelLag"`
	GapFragmentation         float64 `json:"gapShareFragmentation"`
	GapNotYetPlaced          float64 `json:"gapShareNotYetPlaced"`
	AllocOverBoundArrivals   float64 `json:"allocationOverBoundWhileArriving"` // saturated samples up to the last arrival
	SaturatedSamplesArriving int     `json:"saturatedSamplesWhileArriving"`
	BigArrived               int     `json:"bigDomainsArrived"` // 16 trays or more
	BigStarted               int     `json:"bigDomainsStarted"`
	BoundProvenShare         float64 `json:"boundProvenShare"`
	LabelHeldTraysMean       float64 `json:"labelHeldTraysMeanAtSaturation"`
	WaitMedian               float64 `json:"waitMedianSeconds"` // started domains, real seconds
	WaitP95                  float64 `json:"waitP95Seconds"`
	WaitMean                 float64 `json:"waitMeanSeconds"`
	WaitMedianCensored       float64 `json:"waitMedianCensoredSeconds"` // never-started domains counted with their wait until the end
	WaitP95Censored          float64 `json:"waitP95CensoredSeconds"`
	WaitMedianTraceMin       float64 `json:"waitMedianTraceMinutes"`
	WaitP95TraceMin          float64 `json:"waitP95TraceMinutes"`
	SetupSeconds             float64 `json:"setupSeconds"`
	TeardownSeconds          float64 `json:"teardownSeconds"`
	WallSeconds              float64 `json:"wallSeconds"`
	SchedulerSwapSeconds     float64 `json:"schedulerSwapSeconds,omitempty"`
	LoadMean                 float64 `json:"load1Mean"` // the machine's mean 1-minute load average during the trace
	LoadMax                  float64 `json:"load1Max"`

	Errors    []string    `json:"errors,omitempty"`
	CDs       []CDOutcome `json:"computeDomains"`
	SampleLog []Sample    `json:"samples"`
}

// result summarises the run at the end of the trace; final is the last sample.
func (r *runner) result() *ConfigResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &ConfigResult{
		Config: r.cfg.Name, Profile: string(r.cfg.Profile), PluginConfig: string(r.cfg.PluginConfig),
		Namespace: r.ns, Trays: len(r.fleet.Nodes), TrayFailures: r.failures, Errors: r.errs,
	}
	if res.TrayFailures == nil {
		res.TrayFailures = []*failureRec{}
	}
	end := r.start.Add(r.real(r.tr.Spec.Horizon))
	opt := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		v := math.Round(r.since(t)*1000) / 1000
		return &v
	}
	var waits, censored []float64
	for _, rec := range r.cdOrder {
		o := CDOutcome{
			Name: rec.Name, Size: rec.Size, ArrivalTrace: rec.At, LifetimeReal: r.real(rec.Lifetime).Seconds(),
			Created: opt(rec.created), AllBound: opt(rec.boundAt), AllRunning: opt(rec.runningAt), Departed: opt(rec.departedAt),
			Completed: rec.completed, Split: rec.split, Replacements: rec.replacements, Error: rec.err,
			StalledPartBound: rec.stalled, StallNote: rec.stallNote,
			Preemptions: rec.preemptions, PreemptedPods: rec.preemptedPods, GPUHoursEvicted: rec.gpuHoursEvicted,
		}
		res.Preemptions += rec.preemptions
		res.PreemptedPods += rec.preemptedPods
		res.GPUHoursEvicted += rec.gpuHoursEvicted
		if rec.stalled {
			res.StalledPartBound++
		}
		res.CDsArrived++
		if rec.Size >= 16 {
			res.BigArrived++
			if !rec.boundAt.IsZero() {
				res.BigStarted++
			}
		}
		res.Replacements += rec.replacements
		if rec.split {
			res.Splits++
		}
		if !rec.departed {
			o.Cliques, o.BoundAtEnd = rec.cliques, rec.bound
		}
		if rec.boundAt.IsZero() {
			o.NeverStarted = true
			res.CDsNeverStarted++
			censored = append(censored, end.Sub(rec.created).Seconds())
		} else {
			w := rec.boundAt.Sub(rec.created).Seconds()
			o.Wait = fptr(math.Round(w*1000) / 1000)
			waits = append(waits, w)
			censored = append(censored, w)
			res.CDsStarted++
		}
		if rec.completed {
			res.CDsCompleted++
		}
		if !rec.departed && rec.full() {
			res.CDsRunningAtEnd++
		}
		if !rec.departed && rec.bound > 0 && !rec.full() {
			o.PartialAtEnd = true
			res.PartialAtEnd++
		}
		res.CDs = append(res.CDs, o)
	}
	for _, p := range r.plainOrder {
		res.PlainArrived++
		if !p.boundAt.IsZero() {
			res.PlainStarted++
		}
		if p.completed {
			res.PlainCompleted++
		}
		if p.killed {
			res.PlainKilled++
		}
		if p.preempted {
			res.PlainPreempted++
		}
	}
	res.GPUHoursEvicted += r.plainGPUHoursEvicted
	refusals := r.prep.Refusals()
	res.PrepareRefusals, res.RefusedPods = len(refusals), r.prep.RefusedPods()
	if len(refusals) > 0 {
		res.SampleRefusal = fmt.Sprintf("%s/%s on %s: %s", refusals[0].Namespace, refusals[0].Pod, refusals[0].Node, refusals[0].Message)
	}

	res.SampleLog = r.samples
	var strandedSum, allocSum, usefulSum, incompleteSum float64
	var satAlloc, satBound, satUseful, satLag, satNow, satHealthy, satProven, satLabelHeld float64
	var arrAlloc, arrBound float64
	lastArrival := 0.0
	for _, cd := range r.tr.CDs {
		lastArrival = max(lastArrival, cd.At)
	}
	n := 0
	for _, s := range r.samples {
		n++
		strandedSum += float64(max(s.StrandedGPUs, 0))
		res.StrandedMax = max(res.StrandedMax, s.StrandedGPUs)
		allocSum += s.AllocFrac
		if s.HealthyTrays > 0 {
			usefulSum += float64(s.UsefulGPUs) / float64(s.HealthyTrays*gpusPerTray)
		}
		incompleteSum += float64(s.IncompleteGPUs)
		res.LoadMean += s.Load1
		res.LoadMax = max(res.LoadMax, s.Load1)
		if !s.Saturated {
			continue
		}
		res.SaturatedSamples++
		satAlloc += float64(s.AllocTrays)
		satUseful += float64(s.UsefulGPUs) / gpusPerTray
		satBound += float64(s.BoundTrays)
		satLag += float64(s.LagAwareBound)
		satNow += float64(s.NowBound)
		if s.TraceT <= lastArrival {
			res.SaturatedSamplesArriving++
			arrAlloc += float64(s.AllocTrays)
			arrBound += float64(s.BoundTrays)
		}
		satHealthy += float64(s.HealthyTrays)
		satLabelHeld += float64(s.LabelHeldTrays)
		if s.BoundProven {
			satProven++
		}
	}
	res.Samples = n
	if n > 0 {
		res.StrandedMean = strandedSum / float64(n)
		res.AllocMean = allocSum / float64(n)
		res.UsefulAllocMean = usefulSum / float64(n)
		res.IncompleteGPUsMean = incompleteSum / float64(n)
		res.LoadMean /= float64(n)
	}
	if res.SaturatedSamples > 0 {
		k := float64(res.SaturatedSamples)
		res.AllocAtSaturation = satAlloc / satHealthy
		res.BoundAtSaturation = satBound / satHealthy
		res.AllocOverBound = satAlloc / satBound
		res.UsefulOverBound = satUseful / satBound
		res.AllocOverLagBound = satAlloc / satLag
		res.AllocOverNowBound = satAlloc / satNow
		res.GapLabelLag = (satBound - satLag) / satBound
		res.GapFragmentation = (satLag - satNow) / satBound
		res.GapNotYetPlaced = (satNow - satAlloc) / satBound
		if arrBound > 0 {
			res.AllocOverBoundArrivals = arrAlloc / arrBound
		}
		res.BoundProvenShare = satProven / k
		res.LabelHeldTraysMean = satLabelHeld / k
	}
	res.WaitMedian, res.WaitP95, res.WaitMean = quantile(waits, 0.5), quantile(waits, 0.95), mean(waits)
	res.WaitMedianCensored, res.WaitP95Censored = quantile(censored, 0.5), quantile(censored, 0.95)
	res.WaitMedianTraceMin = res.WaitMedian * r.opts.Scale / 60
	res.WaitP95TraceMin = res.WaitP95 * r.opts.Scale / 60
	res.Classes = classResults(res.CDs, r.real(r.tr.Spec.Horizon).Seconds(), r.opts.Scale)
	res.DoneWhen = doneWhen(res, res.Classes)
	return res
}

func fptr(v float64) *float64 { return &v }

// quantile is the nearest-rank quantile (NaN for no values).
func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// Report is placement.json.
type Report struct {
	Generated         string          `json:"generated"`
	Command           string          `json:"command"`
	Smoke             bool            `json:"smoke"`
	TraceDigest       string          `json:"traceDigest"`
	TraceSpec         TraceSpec       `json:"traceSpec"`
	MeanSize          float64         `json:"meanDomainSizeTrays"`
	OfferedLoad       float64         `json:"offeredLoad"` // tray-seconds asked / tray-seconds available in the arrival window
	TimeScale         float64         `json:"timeScale"`   // trace seconds per real second
	HorizonSeconds    float64         `json:"horizonRealSeconds"`
	LabelLagSeconds   float64         `json:"labelLagSeconds"`
	SampleSeconds     float64         `json:"sampleSeconds"`
	SatGraceSeconds   float64         `json:"satGraceSeconds"`
	StallGraceSeconds float64         `json:"stallGraceSeconds"`
	BoundDefinition   string          `json:"boundDefinition"`
	ControlPlane      float64         `json:"controlPlaneStartSeconds"`
	WallSeconds       float64         `json:"wallSeconds"`
	RunOrder          []string        `json:"runOrder,omitempty"` // the order the configurations ran in
	Configs           []*ConfigResult `json:"configs"`
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
	return os.WriteFile(filepath.Join(dir, "summary.md"), []byte(summaryTable(rep)+"\n"+classTable(one)+"\n"+doneWhenTable(one)), 0o644)
}

// summaryTable is the markdown table printed at the end and written to summary.md.
func summaryTable(rep *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, trace %s: %d racks × %d trays, %d ComputeDomains (mean %.1f trays), %d plain pods, %d tray failures; offered load %.2f; "+
		"time scale %g (%.0f s real), label lag %gs\n\n",
		rep.TraceSpec.Seed, rep.TraceDigest, rep.TraceSpec.Racks, rep.TraceSpec.TraysPerClique, rep.TraceSpec.Arrivals, rep.MeanSize,
		rep.TraceSpec.PlainPods, rep.TraceSpec.Failures, rep.OfferedLoad, rep.TimeScale, rep.HorizonSeconds, rep.LabelLagSeconds)
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
