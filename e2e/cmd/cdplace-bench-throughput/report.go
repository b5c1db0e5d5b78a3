package main

// The results: one Run per workload and scheduler, and the summary of ratios written beside the
// raw runs.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
	"github.com/cdplace/cdplace/e2e/harness"
	"github.com/cdplace/cdplace/e2e/plot"
)

// Run is one workload through one scheduler.
type Run struct {
	Trays     int    `json:"trays"`
	Kind      string `json:"kind"`
	Profile   string `json:"profile"`
	Rep       int    `json:"rep"`
	Namespace string `json:"namespace"`
	// SettleSeconds is how long the run waited for the control plane to be idle (harness.Settle).
	SettleSeconds float64 `json:"settleSeconds"`
	Pods          int     `json:"pods"`
	// PrepareRefusals counts the emulated kubelet's refusals of the run's pods (Prepare errors a
	// real driver would give: a node labelled for another domain, channel 0 taken).
	PrepareRefusals int     `json:"prepareRefusals"`
	Bound           int     `json:"bound"`
	Seconds         float64 `json:"seconds"`
	PodsPerSec      float64 `json:"podsPerSecond"`
	AttemptP50      float64 `json:"attemptP50ms"`
	AttemptP99      float64 `json:"attemptP99ms"`
	// RSSMiB is the scheduler process's resident set size right after the run (the fleet and
	// the run's pods in its caches; cdplace's view, guest instances and owner informers too).
	RSSMiB float64 `json:"schedulerRSSMiB"`
	// RSSBeforeMiB is the same just before the run, the fleet synced and the scheduler idle (at
	// rest); PeakRSSMiB the most it has been since the process started (VmHWM), read after the run.
	RSSBeforeMiB float64 `json:"schedulerRSSBeforeMiB"`
	PeakRSSMiB   float64 `json:"schedulerPeakRSSMiB"`
	// CPUmsPerPod is the scheduler process's CPU time from the first pod's creation until the
	// last was bound (or the run gave up), per bound pod: the work each profile does for a pod,
	// steadier than pods/s, which moves with what the API server and etcd take of the same cores.
	CPUmsPerPod float64 `json:"schedulerCPUmsPerPod"`
	// PluginCPU is the percentage of the scheduler process's CPU samples with a frame of the
	// plugin (its Go code, the cgo calls and what runs under them) in the run's CPU profile
	// (-profile: the first repetition at the largest size; cdplace profile only).
	PluginCPU float64 `json:"pluginPercentOfSchedulerCPU,omitempty"`
	// PerfSamples and PerfPluginPercent: with -perf, the scheduler process's perf samples during
	// the run and the percentage of them with a frame of the plugin (cpuprofile.IsPluginPerfFrame).
	PerfSamples       int     `json:"perfSamples,omitempty"`
	PerfPluginPercent float64 `json:"perfPluginPercent,omitempty"`
	// PerfPhases and PerfPluginPhases: the run's perf samples by phase (cpuprofile.Phases), all
	// of them and those with a frame of the plugin.
	PerfPhases       []int                `json:"perfPhases,omitempty"`
	PerfPluginPhases []int                `json:"perfPluginPhases,omitempty"`
	Extension        map[string]Quantiles `json:"extensionPoints"`
	Plugins          map[string]Quantiles `json:"plugins"`
	// SteeringAsked and SteeringReused count the plain-pod steering answers of the run: the
	// policy asked, or a cached answer still valid (cdplace_steering_answers_total).
	SteeringAsked  float64 `json:"steeringAsked"`
	SteeringReused float64 `json:"steeringReused"`
	// ScoreRan and ScoreSkipped count the run's cycles in which the plugin scored the feasible
	// nodes, or left Score out because they would all score alike (cdplace_score_cycles_total).
	ScoreRan     float64 `json:"scoreRan"`
	ScoreSkipped float64 `json:"scoreSkipped"`
	// CliquesUsed counts the cliques the run's pods landed in (the fleet starts empty).
	CliquesUsed int `json:"cliquesUsed"`
}

// Quantiles of one histogram in milliseconds (plugin metrics are sampled by the scheduler).
type Quantiles struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50ms"`
	P99   float64 `json:"p99ms"`
}

// Summary is the ratio table written next to the raw runs.
type Summary struct {
	Trays         int     `json:"trays"`
	Kind          string  `json:"kind"`
	Cdplace       float64 `json:"cdplacePodsPerSecond"`
	Baseline      float64 `json:"baselinePodsPerSecond"`
	Ratio         float64 `json:"ratio"`
	AllNodes      float64 `json:"allNodesPodsPerSecond,omitempty"`
	RatioAllNodes float64 `json:"ratioToAllNodes,omitempty"`
	// CPU per pod (medians) and cdplace's over the baseline's: above 1 is work the plugin adds.
	CdplaceCPU  float64 `json:"cdplaceCPUmsPerPod,omitempty"`
	BaselineCPU float64 `json:"baselineCPUmsPerPod,omitempty"`
	CPURatio    float64 `json:"cpuRatio,omitempty"`
	// PairGeoMean is the geometric mean of cdplace's pods/s over the baseline's in each
	// repetition, PairMin and PairMax their range. The order alternates every repetition, so
	// with an even number of them the geometric mean cancels exactly a constant advantage of
	// whichever runs first in a pair (about 6% in one six-pair run of GPU pods here).
	PairGeoMean float64 `json:"pairGeoMean,omitempty"`
	PairMin     float64 `json:"pairMin,omitempty"`
	PairMax     float64 `json:"pairMax,omitempty"`
	// TwinPairGeoMean, TwinPairMin, TwinPairMax: the same for the stock twin (-stock-twin), a
	// second process with the baseline's profile: what two identical schedulers read apart.
	// TwinCPURatio is its CPU per pod over the baseline's (medians).
	TwinPairGeoMean float64 `json:"twinPairGeoMean,omitempty"`
	TwinPairMin     float64 `json:"twinPairMin,omitempty"`
	TwinPairMax     float64 `json:"twinPairMax,omitempty"`
	TwinCPURatio    float64 `json:"twinCPURatio,omitempty"`
	// PerfPlugin is the median of the cdplace runs' plugin share of perf samples (-perf), percent.
	PerfPlugin    float64 `json:"perfPluginPercent,omitempty"`
	CdplaceBound  string  `json:"cdplaceBound"`
	BaselineBound string  `json:"baselineBound"`
	// Prepare refusals of all the profile's runs (Run.PrepareRefusals summed).
	CdplaceRefusals  int `json:"cdplacePrepareRefusals"`
	BaselineRefusals int `json:"baselinePrepareRefusals"`
	// Phases: with -perf, the scheduler's CPU by phase for both profiles (phaseCosts).
	Phases []PhaseCost `json:"phases,omitempty"`
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// pairRatios is profile of's pods/s (cdplace's, or the stock twin's) over the baseline's for each
// repetition of one size and workload that has both, in repetition order.
func pairRatios(runs []Run, trays int, kind string, of harness.Profile) []float64 {
	cd, base := map[int]float64{}, map[int]float64{}
	reps := 0
	for _, r := range runs {
		if r.Trays != trays || r.Kind != kind {
			continue
		}
		switch r.Profile {
		case string(of):
			cd[r.Rep] = r.PodsPerSec
		case string(harness.Baseline):
			base[r.Rep] = r.PodsPerSec
		}
		reps = max(reps, r.Rep+1)
	}
	var out []float64
	for rep := 0; rep < reps; rep++ {
		if c, b := cd[rep], base[rep]; c > 0 && b > 0 {
			out = append(out, c/b)
		}
	}
	return out
}

// PhaseCost is the scheduler's CPU in one phase (cpuprofile.Phases), in ms per bound pod over
// all of a workload's runs with -perf: cdplace's, the part of it in the plugin's own frames,
// and the baseline's. Cdplace less the baseline, less the plugin's part, is what the framework
// and the process spend around the plugin (a Score plugin that runs at all, the Filter work
// its placements leave to the next pods, the collector's share of its allocations).
type PhaseCost struct {
	Phase    string  `json:"phase"`
	Cdplace  float64 `json:"cdplaceMsPerPod"`
	Plugin   float64 `json:"pluginMsPerPod"`
	Baseline float64 `json:"baselineMsPerPod"`
}

// phaseCosts adds up the perf samples by phase of a workload's runs of each profile (nil unless
// both profiles have some).
func phaseCosts(runs []Run, trays int, kind string) []PhaseCost {
	n := len(cpuprofile.Phases)
	cd, plugin, base := make([]float64, n), make([]float64, n), make([]float64, n)
	var cdPods, basePods int
	for _, r := range runs {
		if r.Trays != trays || r.Kind != kind || len(r.PerfPhases) != n || r.Bound == 0 {
			continue
		}
		switch r.Profile {
		case string(harness.Cdplace):
			cdPods += r.Bound
			for i := range n {
				cd[i] += float64(r.PerfPhases[i])
				if len(r.PerfPluginPhases) == n {
					plugin[i] += float64(r.PerfPluginPhases[i])
				}
			}
		case string(harness.Baseline):
			basePods += r.Bound
			for i := range n {
				base[i] += float64(r.PerfPhases[i])
			}
		}
	}
	if cdPods == 0 || basePods == 0 {
		return nil
	}
	ms := func(samples float64, pods int) float64 { return math.Round(1e6*samples/perfHz/float64(pods)) / 1e3 }
	out := make([]PhaseCost, n)
	for i, name := range cpuprofile.Phases {
		out[i] = PhaseCost{Phase: name, Cdplace: ms(cd[i], cdPods), Plugin: ms(plugin[i], cdPods), Baseline: ms(base[i], basePods)}
	}
	return out
}

// phaseTable is the Markdown table of phaseCosts, with the totals.
func phaseTable(trays int, kind string, costs []PhaseCost) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nScheduler CPU by phase, %s pods at %d trays (perf samples at %d Hz, ms per bound pod over all runs of each profile):\n\n", kind, trays, perfHz)
	b.WriteString("| phase | cdplace | of it in the plugin's frames | baseline | cdplace − baseline | of it outside the plugin |\n|---|---|---|---|---|---|\n")
	var t PhaseCost
	row := func(c PhaseCost) {
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %+.3f | %+.3f |\n", c.Phase, c.Cdplace, c.Plugin, c.Baseline, c.Cdplace-c.Baseline, c.Cdplace-c.Plugin-c.Baseline)
	}
	for _, c := range costs {
		row(c)
		t.Cdplace, t.Plugin, t.Baseline = t.Cdplace+c.Cdplace, t.Plugin+c.Plugin, t.Baseline+c.Baseline
	}
	t.Phase = "all"
	row(t)
	return b.String()
}

// pairSpread is the geometric mean, least and greatest of pair ratios (at least one), rounded.
func pairSpread(pairs []float64) (geo, least, greatest float64) {
	return round(geoMean(pairs)), round(slices.Min(pairs)), round(slices.Max(pairs))
}

// geoMean is the geometric mean of positive values (0 for none).
func geoMean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range v {
		sum += math.Log(x)
	}
	return math.Exp(sum / float64(len(v)))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(out string, runs []Run) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	type key struct {
		trays int
		kind  string
	}
	var keys []key
	rate := map[key]map[string][]float64{}
	cpu := map[key]map[string][]float64{}
	perfPlugin := map[key][]float64{}
	bound := map[key]map[string]string{}
	refused := map[key]map[string]int{}
	for _, r := range runs {
		k := key{r.Trays, r.Kind}
		if rate[k] == nil {
			keys = append(keys, k)
			rate[k] = map[string][]float64{}
			cpu[k] = map[string][]float64{}
			bound[k] = map[string]string{}
			refused[k] = map[string]int{}
		}
		rate[k][r.Profile] = append(rate[k][r.Profile], r.PodsPerSec)
		if r.CPUmsPerPod > 0 {
			cpu[k][r.Profile] = append(cpu[k][r.Profile], r.CPUmsPerPod)
		}
		if r.PerfSamples > 0 && r.Profile == string(harness.Cdplace) {
			perfPlugin[k] = append(perfPlugin[k], r.PerfPluginPercent)
		}
		bound[k][r.Profile] += fmt.Sprintf("%d/%d ", r.Bound, r.Pods)
		refused[k][r.Profile] += r.PrepareRefusals
	}
	var sums []Summary
	var b strings.Builder
	b.WriteString("| trays | workload | cdplace pods/s (median) | baseline pods/s (median) | ratio | pairs, geometric mean (min–max) | stock twin / baseline pairs (noise band), CPU ratio | scheduler CPU ms/pod, cdplace / baseline (medians) | CPU ratio | plugin % of perf samples (median) | stock, all nodes pods/s | cdplace / all nodes | cdplace bound | baseline bound | Prepare refusals, cdplace / baseline |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		cd, base := median(rate[k][string(harness.Cdplace)]), median(rate[k][string(harness.Baseline)])
		s := Summary{Trays: k.trays, Kind: k.kind, Cdplace: round(cd), Baseline: round(base),
			CdplaceBound: strings.TrimSpace(bound[k][string(harness.Cdplace)]), BaselineBound: strings.TrimSpace(bound[k][string(harness.Baseline)]),
			CdplaceRefusals: refused[k][string(harness.Cdplace)], BaselineRefusals: refused[k][string(harness.Baseline)]}
		if base > 0 {
			s.Ratio = round(cd / base)
		}
		pairsCol := "–"
		if pairs := pairRatios(runs, k.trays, k.kind, harness.Cdplace); len(pairs) > 0 {
			s.PairGeoMean, s.PairMin, s.PairMax = pairSpread(pairs)
			pairsCol = fmt.Sprintf("%.3f (%.2f–%.2f)", s.PairGeoMean, s.PairMin, s.PairMax)
		}
		twinCol := "–"
		if pairs := pairRatios(runs, k.trays, k.kind, stockTwin); len(pairs) > 0 {
			s.TwinPairGeoMean, s.TwinPairMin, s.TwinPairMax = pairSpread(pairs)
			twinCol = fmt.Sprintf("%.3f (%.2f–%.2f)", s.TwinPairGeoMean, s.TwinPairMin, s.TwinPairMax)
			if t, b := median(cpu[k][string(stockTwin)]), median(cpu[k][string(harness.Baseline)]); t > 0 && b > 0 {
				s.TwinCPURatio = round(t / b)
				twinCol += fmt.Sprintf(", CPU %.3f", s.TwinCPURatio)
			}
		}
		cpuCol, cpuRatio := "–", "–"
		s.CdplaceCPU, s.BaselineCPU = median(cpu[k][string(harness.Cdplace)]), median(cpu[k][string(harness.Baseline)])
		if s.CdplaceCPU > 0 && s.BaselineCPU > 0 {
			s.CPURatio = round(s.CdplaceCPU / s.BaselineCPU)
			cpuCol, cpuRatio = fmt.Sprintf("%.2f / %.2f", s.CdplaceCPU, s.BaselineCPU), fmt.Sprintf("%.3f", s.CPURatio)
		}
		all, allCol, allRatio := median(rate[k][string(allNodes)]), "–", "–"
		if all > 0 {
			s.AllNodes, s.RatioAllNodes = round(all), round(cd/all)
			allCol, allRatio = fmt.Sprintf("%.1f", all), fmt.Sprintf("%.2f", cd/all)
		}
		perfCol := "–"
		if v := perfPlugin[k]; len(v) > 0 {
			s.PerfPlugin = round(median(v))
			perfCol = fmt.Sprintf("%.2f", s.PerfPlugin)
		}
		s.Phases = phaseCosts(runs, k.trays, k.kind)
		sums = append(sums, s)
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d / %d |\n", s.Trays, s.Kind, s.Cdplace, s.Baseline, s.Ratio,
			pairsCol, twinCol, cpuCol, cpuRatio, perfCol, allCol, allRatio, s.CdplaceBound, s.BaselineBound, s.CdplaceRefusals, s.BaselineRefusals)
	}
	for _, s := range sums {
		if s.Phases != nil {
			b.WriteString(phaseTable(s.Trays, s.Kind, s.Phases))
		}
	}
	b.WriteString("\n| trays | workload | profile | rep | pods/s | scheduler CPU ms/pod | scheduler RSS MiB | attempt p50/p99 ms | cdplace PreFilter p50/p99 ms | cdplace Filter p50/p99 | cdplace Score p50/p99 | DynamicResources PreFilter p50/p99 | DynamicResources Filter p50/p99 | steering asked / reused | Score ran / left out | cliques used | Prepare refusals | plugin % of CPU (profiled) | plugin % of perf samples |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	q := func(r Run, k string) string {
		v, ok := r.Plugins[k]
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.3f / %.3f", v.P50, v.P99)
	}
	for _, r := range runs {
		steering := "–"
		if r.SteeringAsked+r.SteeringReused > 0 {
			steering = fmt.Sprintf("%.0f / %.0f", r.SteeringAsked, r.SteeringReused)
		}
		scoring := "–"
		if r.ScoreRan+r.ScoreSkipped > 0 {
			scoring = fmt.Sprintf("%.0f / %.0f", r.ScoreRan, r.ScoreSkipped)
		}
		pluginCPU := "–"
		if r.PluginCPU > 0 {
			pluginCPU = fmt.Sprintf("%.2f", r.PluginCPU)
		}
		perfCol := "–"
		if r.PerfSamples > 0 {
			perfCol = fmt.Sprintf("%.2f (%d samples)", r.PerfPluginPercent, r.PerfSamples)
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.1f | %.2f | %.0f | %.1f / %.1f | %s | %s | %s | %s | %s | %s | %s | %d | %d | %s | %s |\n", r.Trays, r.Kind, r.Profile, r.Rep, r.PodsPerSec,
			r.CPUmsPerPod, r.RSSMiB, r.AttemptP50, r.AttemptP99, q(r, "ComputeDomainPlacement/PreFilter"), q(r, "ComputeDomainPlacement/Filter"),
			q(r, "ComputeDomainPlacement/Score"), q(r, "DynamicResources/PreFilter"), q(r, "DynamicResources/Filter"), steering, scoring, r.CliquesUsed, r.PrepareRefusals, pluginCPU, perfCol)
	}
	var groups []string
	cdSeries := plot.Series{Name: "cdplace (computedomain-scheduler)"}
	baseSeries := plot.Series{Name: "baseline (default-scheduler)"}
	allSeries := plot.Series{Name: "stock profile, percentageOfNodesToScore 100"}
	for _, s := range sums {
		groups = append(groups, fmt.Sprintf("%s, %d trays", s.Kind, s.Trays))
		cdSeries.Y = append(cdSeries.Y, s.Cdplace)
		baseSeries.Y = append(baseSeries.Y, s.Baseline)
		allSeries.Y = append(allSeries.Y, s.AllNodes)
	}
	series := []plot.Series{cdSeries, baseSeries}
	if c := allSeries.Y; len(c) > 0 && slicesMax(c) > 0 {
		series = append(series, allSeries)
	}
	svg := plot.BarChart("Scheduling throughput (median of repetitions)", "pods/s", groups, series)
	if err := os.WriteFile(filepath.Join(out, "throughput.svg"), svg, 0o644); err != nil {
		return err
	}
	data, err := json.MarshalIndent(map[string]any{"summary": sums, "runs": runs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "throughput.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "throughput.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Print("\n" + b.String())
	return nil
}
