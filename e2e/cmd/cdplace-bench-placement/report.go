package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
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

	// EndSeconds: when the run ended, real seconds since the trace started: the horizon, or with
	// -until-done when every domain had completed, or the cap (Capped: some had not, and the
	// waits of never-started domains, counted until then, are lower bounds).
	EndSeconds float64 `json:"endSeconds"`
	Capped     bool    `json:"capped"`

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
	end := r.end
	res.EndSeconds = r.since(end)
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
		first := refusals[0]
		res.SampleRefusal = fmt.Sprintf("%s/%s on %s: %s; %s", first.Namespace, first.Pod, first.Node, first.Message, r.nodeHistory(first.Node, first.At))
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
	res.Classes = classResults(res.CDs, res.EndSeconds, r.opts.Scale)
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

// nodeHistory is what happened to a node's ComputeDomain label and hardware, in real seconds
// since the run started, for the refusal at `at`: where a Prepare refusal came from (r.mu held).
func (r *runner) nodeHistory(node string, at time.Time) string {
	var parts []string
	for _, e := range r.prep.LabelLog() {
		if e.Node != node {
			continue
		}
		verb := "removed"
		if e.Set {
			verb = "set"
		}
		parts = append(parts, fmt.Sprintf("label %s %s at %.2fs", e.Domain, verb, r.since(e.At)))
	}
	for _, f := range r.failures {
		if f.Node == node {
			repaired := "never"
			if f.RepairedAt != nil {
				repaired = fmt.Sprintf("%.2fs", *f.RepairedAt)
			}
			parts = append(parts, fmt.Sprintf("tray failed at %.2fs (repaired %s)", f.At, repaired))
		}
	}
	return fmt.Sprintf("refused at %.2fs; %s", r.since(at), strings.Join(parts, ", "))
}
