package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/cdplace/cdplace/e2e/plot"
)

// Bench is placement.json under -out: one Report per seed, each also written, with its CSV and
// charts, under seed-N/.
type Bench struct {
	Generated      string    `json:"generated"`
	Command        string    `json:"command"`
	Smoke          bool      `json:"smoke"`
	Seeds          []uint64  `json:"seeds"`
	TimeScale      float64   `json:"timeScale"`
	HorizonSeconds float64   `json:"horizonRealSeconds"`
	ControlPlane   float64   `json:"controlPlaneStartSeconds"`
	WallSeconds    float64   `json:"wallSeconds"`
	Runs           []*Report `json:"runs"`
}

// decodeBench reads placement.json: a Bench, or one seed's Report as written before -seeds.
func decodeBench(data []byte) (*Bench, error) {
	var b Bench
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	if len(b.Runs) > 0 {
		return &b, nil
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, err
	}
	if len(rep.Configs) == 0 {
		return nil, fmt.Errorf("neither runs nor configs")
	}
	return &Bench{
		Generated: rep.Generated, Command: rep.Command, Smoke: rep.Smoke, Seeds: []uint64{rep.TraceSpec.Seed},
		TimeScale: rep.TimeScale, HorizonSeconds: rep.HorizonSeconds, ControlPlane: rep.ControlPlane, WallSeconds: rep.WallSeconds,
		Runs: []*Report{&rep},
	}, nil
}

func seedDir(out string, seed uint64) string { return filepath.Join(out, fmt.Sprintf("seed-%d", seed)) }

// writeBench writes every seed's outputs under seed-N/ (with its trace, when traces has it) and,
// under out, placement.json, summary.md and the per-class charts. The size classes and "Done
// when" checks are recomputed from the domains' outcomes, so -replot fills them in for older runs.
func writeBench(out string, b *Bench, traces []Trace) error {
	for i, rep := range b.Runs {
		for _, c := range rep.Configs {
			end := rep.HorizonSeconds
			if c.EndSeconds > 0 {
				end = c.EndSeconds
			}
			c.Classes = classResults(c.CDs, end, rep.TimeScale)
			c.DoneWhen = doneWhen(c, c.Classes)
		}
		dir := seedDir(out, rep.TraceSpec.Seed)
		// The trace is a pure function of its spec: regenerated, it is the one replayed (the
		// digest says so), and the references are simulated on it.
		if tr := GenerateTrace(rep.TraceSpec); tr.Digest() == rep.TraceDigest {
			var live []*PolicyResult
			for _, c := range rep.Configs {
				live = append(live, liveResult(c, rep.TimeScale, rep.HorizonSeconds, tr.Window()))
			}
			cmp, err := compare(tr, live)
			if err != nil {
				return err
			}
			rep.Comparison = cmp
			if err := writeCharts(dir, comparisonCharts(cmp)); err != nil {
				return err
			}
		}
		if err := writeOutputs(dir, rep); err != nil {
			return err
		}
		if i < len(traces) {
			data, _ := json.MarshalIndent(traces[i], "", " ")
			if err := os.WriteFile(filepath.Join(dir, "trace.json"), append(data, '\n'), 0o644); err != nil {
				return err
			}
		}
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "placement.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	for name, svg := range classCharts(b) {
		if err := os.WriteFile(filepath.Join(out, name), svg, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(out, "summary.md"), []byte(benchSummary(b)), 0o644)
}

// classCharts are grouped bars per size class, one bar per configuration and seed: the share
// started and the p95 wait (never-started domains counted until the end).
func classCharts(b *Bench) map[string][]byte {
	var groups []string
	for _, c := range SizeClasses {
		groups = append(groups, c.Name+" trays")
	}
	var started, p95 []plot.Series
	for _, rep := range b.Runs {
		for _, c := range rep.Configs {
			name := c.Config
			if len(b.Runs) > 1 {
				name = fmt.Sprintf("%s, seed %d", c.Config, rep.TraceSpec.Seed)
			}
			s, w := plot.Series{Name: name}, plot.Series{Name: name}
			for _, cl := range c.Classes {
				s.Y = append(s.Y, nanIfUnmeasured(cl.StartedShare))
				w.Y = append(w.Y, nanIfUnmeasured(cl.WaitP95))
			}
			started, p95 = append(started, s), append(p95, w)
		}
	}
	return map[string][]byte{
		"classes-started.svg": plot.BarChart("ComputeDomains started, per size class", "share of the class's arrivals started", groups, started),
		"classes-wait-p95.svg": plot.BarChart(fmt.Sprintf("p95 wait per size class (never started: until the end; s real, ×%g = trace s)", b.TimeScale),
			"seconds (real)", groups, p95),
	}
}

// writeCharts writes each named SVG under dir.
func writeCharts(dir string, charts map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(dir, name), svg, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func nanIfUnmeasured(v float64) float64 {
	if !measured(v) {
		return math.NaN()
	}
	return v
}

// benchSummary is summary.md under -out: the size classes of every seed side by side, the
// "Done when" checks, then each seed's own tables.
func benchSummary(b *Bench) string {
	var sb strings.Builder
	var seeds []string
	for _, rep := range b.Runs {
		seeds = append(seeds, fmt.Sprintf("seed %d (trace %s, run order %s)", rep.TraceSpec.Seed, rep.TraceDigest, strings.Join(rep.RunOrder, ", ")))
	}
	fmt.Fprintf(&sb, "%s; time scale %g (%.0f s real per configuration); wall %.0f s\n\n", strings.Join(seeds, "; "), b.TimeScale, b.HorizonSeconds, b.WallSeconds)
	sb.WriteString(classTable(b))
	sb.WriteString("\n")
	sb.WriteString(doneWhenTable(b))
	for _, rep := range b.Runs {
		if rep.Comparison != nil {
			sb.WriteString("\nBeside the offline references (issue 36): ")
			sb.WriteString(comparisonTable(rep.Comparison))
		}
	}
	for _, rep := range b.Runs {
		sb.WriteString("\n")
		sb.WriteString(summaryTable(rep))
	}
	return sb.String()
}

// classTable has a row per configuration and size class, and per seed: arrived, share started,
// median and p95 wait (never-started domains waiting until the end of the trace), preemptions
// (pods) and GPU-hours evicted.
func classTable(b *Bench) string {
	var sb strings.Builder
	sb.WriteString("Per size class: wait = creation to all pods bound, real seconds (×")
	fmt.Fprintf(&sb, "%g = trace seconds); a domain that never started counts as waiting until the end of the trace, so a class with domains never started has its waits understated. ", b.TimeScale)
	sb.WriteString("Preemptions = whole domains evicted by the scheduler (pods with DisruptionTarget/PreemptionByScheduler), GPU-h = GPU-hours of trace time the victims had held.\n\n")
	sb.WriteString("| config | trays |")
	sep := "|---|---|"
	for _, rep := range b.Runs {
		s := rep.TraceSpec.Seed
		fmt.Fprintf(&sb, " s%d arrived | s%d started | s%d wait median / p95 (s) | s%d preemptions (pods) / GPU-h |", s, s, s, s)
		sep += "---|---|---|---|"
	}
	sb.WriteString("\n" + sep + "\n")
	if len(b.Runs) == 0 {
		return sb.String()
	}
	for ci, c0 := range b.Runs[0].Configs {
		for k, class := range SizeClasses {
			fmt.Fprintf(&sb, "| %s | %s |", c0.Config, class.Name)
			for _, rep := range b.Runs {
				c := configNamed(rep, c0.Config, ci)
				if c == nil || k >= len(c.Classes) {
					sb.WriteString(" – | – | – | – |")
					continue
				}
				cl := c.Classes[k]
				fmt.Fprintf(&sb, " %d | %s | %s / %s | %d (%d) / %.1f |", cl.Arrived, share(cl), secs(cl.WaitMedian), secs(cl.WaitP95),
					cl.Preemptions, cl.PreemptedPods, cl.GPUHoursEvicted)
			}
			sb.WriteString("\n")
		}
	}
	var pre []string
	for _, rep := range b.Runs {
		for _, c := range rep.Configs {
			pre = append(pre, fmt.Sprintf("seed %d %s: %d domains (%d pods), %d plain pods, %.1f GPU-h", rep.TraceSpec.Seed, c.Config,
				c.Preemptions, c.PreemptedPods, c.PlainPreempted, c.GPUHoursEvicted))
		}
	}
	fmt.Fprintf(&sb, "\nPreemptions per configuration (every pod of the trace has the same priority): %s.\n", strings.Join(pre, "; "))
	return sb.String()
}

// doneWhenTable is issue 12's bench-placement bullets per configuration and seed.
func doneWhenTable(b *Bench) string {
	var sb strings.Builder
	sb.WriteString("Issue 12, \"Done when\" (bench-placement bullets; waits as above):\n\n| seed | config |")
	sep := "|---|---|"
	if len(b.Runs) > 0 && len(b.Runs[0].Configs) > 0 {
		for _, ch := range b.Runs[0].Configs[0].DoneWhen {
			sb.WriteString(" " + ch.Name + " |")
			sep += "---|"
		}
	}
	sb.WriteString("\n" + sep + "\n")
	for _, rep := range b.Runs {
		for _, c := range rep.Configs {
			fmt.Fprintf(&sb, "| %d | %s |", rep.TraceSpec.Seed, c.Config)
			for _, ch := range c.DoneWhen {
				mark := "no"
				if ch.Holds {
					mark = "**yes**"
				}
				fmt.Fprintf(&sb, " %s: %s |", mark, ch.Value)
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// configNamed is rep's result for config name (at index i when the lists agree).
func configNamed(rep *Report, name string, i int) *ConfigResult {
	if i < len(rep.Configs) && rep.Configs[i].Config == name {
		return rep.Configs[i]
	}
	for _, c := range rep.Configs {
		if c.Config == name {
			return c
		}
	}
	return nil
}

func share(cl ClassResult) string {
	if cl.Arrived == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%% (%d)", 100*cl.StartedShare, cl.Started)
}

func secs(v float64) string {
	if !measured(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}
