package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cdplace/cdplace/e2e/plot"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

// Spread is the median, minimum and maximum of N values.
type Spread struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spread(v []float64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{N: len(s), Median: m, Min: s[0], Max: s[len(s)-1]}
}

func (s Spread) String() string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", s.Median, s.Min, s.Max)
}

// Summary is one workload over all rounds.
type Summary struct {
	Workload string `json:"workload"`
	// PodsPerSec is the median SchedulingThroughput Average of each variant.
	PodsPerSec map[Variant]Spread `json:"podsPerSecond"`
	// RatioBA and RatioAA are B/A and A2/A per round (SchedulingThroughput Average), the
	// P50 fields the same on Perc50.
	RatioBA    Spread `json:"ratioBA"`
	RatioAA    Spread `json:"ratioAA"`
	RatioBAP50 Spread `json:"ratioBAPerc50"`
	RatioAAP50 Spread `json:"ratioAAPerc50"`
	// PluginCPU is the plugin's share of scheduler CPU in each B run; PluginCPUPooled pools the
	// samples of all B runs; PluginCPUNonAPI and PluginCPUTotal are the pooled shares of all
	// samples outside the kube-apiserver and of the whole process; PluginCPUInA is the largest
	// share found in any A or A2 run (the control: the plugin is not in those profiles).
	PluginCPU       Spread  `json:"pluginCpuOfScheduler"`
	PluginCPUPooled float64 `json:"pluginCpuOfSchedulerPooled"`
	PluginCPUNonAPI float64 `json:"pluginCpuOfNonAPIServerPooled"`
	PluginCPUTotal  float64 `json:"pluginCpuOfProcessPooled"`
	PluginCPUInA    float64 `json:"pluginCpuInStockRuns"`
	// PreFilterMs is the median over B runs of the plugin's PreFilter Perc50 and Perc99.
	PreFilterP50Ms float64 `json:"preFilterP50Ms"`
	PreFilterP99Ms float64 `json:"preFilterP99Ms"`
	// Placement sums the ComputeDomain placement summaries per variant.
	Placement map[Variant]map[string]int `json:"placement,omitempty"`
	Failed    int                        `json:"failedRuns"`
}

// Report is everything one invocation measured.
type Report struct {
	Started   string    `json:"started"`
	Pairs     int       `json:"rounds"`
	Smoke     bool      `json:"smoke"`
	Summaries []Summary `json:"summaries"`
	Runs      []Run     `json:"runs"`
}

// Summarize folds the runs of each workload.
func Summarize(workloads []Workload, runs []Run) Report {
	var rep Report
	for _, w := range workloads {
		s := Summary{Workload: w.Name, PodsPerSec: map[Variant]Spread{}}
		byRound := map[int]map[Variant]Run{}
		rates := map[Variant][]float64{}
		var share []float64
		var pooled cpuprofile.Share
		var pre50, pre99 []float64
		for _, r := range runs {
			if r.Workload != w.Name {
				continue
			}
			if r.Error != "" {
				s.Failed++
				continue
			}
			if byRound[r.Round] == nil {
				byRound[r.Round] = map[Variant]Run{}
			}
			byRound[r.Round][r.Variant] = r
			rates[r.Variant] = append(rates[r.Variant], r.Throughput["Average"])
			if r.CPU != nil {
				if r.Variant == VariantB {
					share = append(share, r.CPU.OfScheduler())
					pooled.TotalNs += r.CPU.TotalNs
					pooled.PluginNs += r.CPU.PluginNs
					pooled.APIServerNs += r.CPU.APIServerNs
					pooled.SchedulerNs += r.CPU.SchedulerNs
				} else {
					s.PluginCPUInA = math.Max(s.PluginCPUInA, r.CPU.OfScheduler())
				}
			}
			if p, ok := r.Plugin["PreFilter"]; ok && r.Variant == VariantB {
				pre50, pre99 = append(pre50, p["Perc50"]), append(pre99, p["Perc99"])
			}
			if len(r.Placement) > 0 {
				var pl map[string]any
				if json.Unmarshal(r.Placement, &pl) == nil {
					if s.Placement == nil {
						s.Placement = map[Variant]map[string]int{}
					}
					if s.Placement[r.Variant] == nil {
						s.Placement[r.Variant] = map[string]int{}
					}
					for _, k := range []string{"pods", "bound", "whole", "split", "partial", "unstarted"} {
						if v, ok := pl[k].(float64); ok {
							s.Placement[r.Variant][k] += int(v)
						}
					}
				}
			}
		}
		for v, r := range rates {
			s.PodsPerSec[v] = spread(r)
		}
		var ba, aa, ba50, aa50 []float64
		for _, vs := range byRound {
			a, okA := vs[VariantA]
			if !okA || a.Throughput["Average"] <= 0 {
				continue
			}
			if b, ok := vs[VariantB]; ok {
				ba = append(ba, b.Throughput["Average"]/a.Throughput["Average"])
				ba50 = append(ba50, b.Throughput["Perc50"]/a.Throughput["Perc50"])
			}
			if a2, ok := vs[VariantA2]; ok {
				aa = append(aa, a2.Throughput["Average"]/a.Throughput["Average"])
				aa50 = append(aa50, a2.Throughput["Perc50"]/a.Throughput["Perc50"])
			}
		}
		s.RatioBA, s.RatioAA, s.RatioBAP50, s.RatioAAP50 = spread(ba), spread(aa), spread(ba50), spread(aa50)
		s.PluginCPU = spread(share)
		s.PluginCPUPooled, s.PluginCPUNonAPI, s.PluginCPUTotal = pooled.OfScheduler(), pooled.OfNonAPIServer(), pooled.OfTotal()
		s.PreFilterP50Ms, s.PreFilterP99Ms = spread(pre50).Median, spread(pre99).Median
		rep.Summaries = append(rep.Summaries, s)
	}
	return rep
}

// Markdown renders the summary tables.
func (rep Report) Markdown() string {
	var b strings.Builder
	b.WriteString("\n| workload | A pods/s | B pods/s | A2 pods/s | B/A median (min–max) | A2/A median (min–max) | B/A on Perc50 | A2/A on Perc50 | plugin % of scheduler CPU (B runs: median, pooled) | rounds |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range rep.Summaries {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d%s |\n", s.Workload,
			rate(s.PodsPerSec[VariantA]), rate(s.PodsPerSec[VariantB]), rate(s.PodsPerSec[VariantA2]),
			s.RatioBA, s.RatioAA, s.RatioBAP50, s.RatioAAP50, cpuCell(s), s.RatioBA.N, failedNote(s))
	}
	b.WriteString("\n| workload | plugin % of scheduler CPU per B run (median, min–max) | of all samples outside the apiserver | of the whole process | in the stock runs (control) | PreFilter p50 / p99 ms (sampled) |\n|---|---|---|---|---|---|\n")
	for _, s := range rep.Summaries {
		fmt.Fprintf(&b, "| %s | %s | %.2f%% | %.2f%% | %.2f%% | %.3f / %.3f |\n", s.Workload, pct(s.PluginCPU),
			100*s.PluginCPUNonAPI, 100*s.PluginCPUTotal, 100*s.PluginCPUInA, s.PreFilterP50Ms, s.PreFilterP99Ms)
	}
	for _, s := range rep.Summaries {
		if len(s.Placement) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nPlacement of %s, summed over rounds (A, A2: stock profile with the clique pod affinity; B: cdplace):\n\n", s.Workload)
		b.WriteString("| variant | pods bound | domains whole | split across cliques | partly bound | not started |\n|---|---|---|---|---|---|\n")
		for _, v := range []Variant{VariantA, VariantB, VariantA2} {
			if p := s.Placement[v]; p != nil {
				fmt.Fprintf(&b, "| %s | %d/%d | %d | %d | %d | %d |\n", v, p["bound"], p["pods"], p["whole"], p["split"], p["partial"], p["unstarted"])
			}
		}
	}
	return b.String()
}

func rate(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", s.Median)
}

func cpuCell(s Summary) string {
	if s.PluginCPU.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f%%, %.2f%%", 100*s.PluginCPU.Median, 100*s.PluginCPUPooled)
}

func pct(s Spread) string {
	if s.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f%% (%.2f–%.2f%%)", 100*s.Median, 100*s.Min, 100*s.Max)
}

func failedNote(s Summary) string {
	if s.Failed == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d failed runs)", s.Failed)
}

// Write stores results.json, summary.md and throughput.svg in out.
func (rep Report) Write(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(rep.Markdown()), 0o644); err != nil {
		return err
	}
	var groups []string
	series := []plot.Series{{Name: "A: stock profile"}, {Name: "B: with ComputeDomainPlacement"}, {Name: "A2: stock profile again"}}
	for _, s := range rep.Summaries {
		groups = append(groups, s.Workload)
		for i, v := range []Variant{VariantA, VariantB, VariantA2} {
			series[i].Y = append(series[i].Y, s.PodsPerSec[v].Median)
		}
	}
	svg := plot.BarChart("scheduler_perf SchedulingThroughput (median of rounds)", "pods/s", groups, series)
	return os.WriteFile(filepath.Join(out, "throughput.svg"), svg, 0o644)
}
