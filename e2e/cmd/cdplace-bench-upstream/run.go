package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

// Variant is one side of a comparison.
type Variant string

// The variants of every round.
const (
	VariantA  Variant = "A"  // the stock profile
	VariantB  Variant = "B"  // the cdplace profile
	VariantA2 Variant = "A2" // the stock profile again: the noise band
)

// Run is one scheduler_perf process: one workload in one variant.
type Run struct {
	Workload string  `json:"workload"`
	Variant  Variant `json:"variant"`
	Round    int     `json:"round"`
	TestCase string  `json:"testCase"`
	Dir      string  `json:"dir"`
	Seconds  float64 `json:"seconds"`
	// Load1 is the 1-minute load average when the run started and ended (2 cores: above 2 the
	// run shared the machine).
	Load1Start float64 `json:"load1Start"`
	Load1End   float64 `json:"load1End"`
	// Throughput is scheduler_perf's SchedulingThroughput (pods/s): Average, Perc50, ...
	Throughput map[string]float64 `json:"throughput,omitempty"`
	// Plugin is scheduler_plugin_execution_duration_seconds of ComputeDomainPlacement per
	// extension point, in ms (the scheduler samples it in ~10% of cycles).
	Plugin map[string]map[string]float64 `json:"pluginMs,omitempty"`
	// CPU is the split of the run's CPU profile.
	CPU *cpuprofile.Share `json:"cpu,omitempty"`
	// Placement is the ComputeDomain pods' placement (ComputeDomain workloads only).
	Placement json.RawMessage `json:"placement,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// Line is the run as one line of progress output.
func (r Run) Line() string {
	s := fmt.Sprintf("%-28s %-2s round %d: ", r.Workload, r.Variant, r.Round)
	if r.Error != "" {
		return s + "FAILED: " + r.Error
	}
	s += fmt.Sprintf("%6.1f pods/s (p50 %6.1f)", r.Throughput["Average"], r.Throughput["Perc50"])
	if r.CPU != nil {
		s += fmt.Sprintf("  plugin %5.2f%% of scheduler CPU", 100*r.CPU.OfScheduler())
	}
	return s + fmt.Sprintf("  [%.0fs, load %.1f→%.1f]", r.Seconds, r.Load1Start, r.Load1End)
}

func (w Workload) testCase(v Variant) string {
	if v == VariantB {
		return w.Cdplace
	}
	return w.Stock
}

// runOne runs the test binary for one workload and variant with its data items in dir.
func runOne(env Env, w Workload, v Variant, round int, dir string) Run {
	r := Run{Workload: w.Name, Variant: v, Round: round, TestCase: w.testCase(v), Dir: dir}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Error = err.Error()
		return r
	}
	pattern := fmt.Sprintf("^BenchmarkPerfScheduling$/^%s$/^%s$", regexp.QuoteMeta(r.TestCase), regexp.QuoteMeta(w.Workload))
	args := []string{
		"-test.run=^$", "-test.bench=" + pattern, "-test.benchtime=1x", "-test.timeout=" + env.Timeout.String(),
		"-data-items-dir=" + dir, "-perf-scheduling-label-filter=",
		"-cdplace-config=" + w.Config, "-cdplace-topic=" + string(v), "-cdplace-kubernetes-dir=" + env.ModuleDir,
	}
	if env.Profile {
		args = append(args, "-perf-cpuprofile")
	}
	logf, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), env.Timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, env.Bin, args...)
	cmd.Dir = env.PkgDir
	cmd.Env = append(os.Environ(), "PATH="+env.Path)
	cmd.Stdout, cmd.Stderr = logf, logf
	r.Load1Start = load1()
	t0 := time.Now()
	err = cmd.Run()
	r.Seconds = time.Since(t0).Seconds()
	r.Load1End = load1()
	if err != nil {
		r.Error = fmt.Sprintf("%v (log: %s)", err, logf.Name())
		return r
	}
	if err := collect(&r, dir); err != nil {
		r.Error = err.Error()
	}
	if b, err := json.MarshalIndent(r, "", "  "); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "run.json"), b, 0o644)
	}
	return r
}

var runDirName = regexp.MustCompile(`^(.+)-r([0-9]+)-(A2|A|B)$`)

// loadRun reads a run directory: its run.json, or what scheduler_perf wrote there, the workload
// and variant then coming from the directory's name.
func loadRun(dir string, workloads []Workload) (Run, error) {
	var r Run
	if b, err := os.ReadFile(filepath.Join(dir, "run.json")); err == nil {
		return r, json.Unmarshal(b, &r)
	}
	m := runDirName.FindStringSubmatch(filepath.Base(dir))
	if m == nil {
		return r, fmt.Errorf("%s: not a run directory (<workload>-r<round>-<variant>)", dir)
	}
	for _, w := range workloads {
		if safeName(w.Name) == m[1] {
			r.Workload = w.Name
		}
	}
	if r.Workload == "" {
		return r, fmt.Errorf("%s: workload %s is not among -upstream/-computedomain", dir, m[1])
	}
	_, _ = fmt.Sscan(m[2], &r.Round)
	r.Variant, r.Dir = Variant(m[3]), dir
	if err := collect(&r, dir); err != nil {
		r.Error = err.Error()
	}
	return r, nil
}

// collect reads what scheduler_perf and the benchmark wrote into dir.
func collect(r *Run, dir string) error {
	items, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_*.json"))
	if err != nil || len(items) != 1 {
		return fmt.Errorf("want one data items file in %s, found %d (did the workload run? -test.bench matched nothing?)", dir, len(items))
	}
	raw, err := os.ReadFile(items[0])
	if err != nil {
		return err
	}
	if r.Throughput, r.Plugin, err = parseDataItems(raw); err != nil {
		return fmt.Errorf("%s: %w", items[0], err)
	}
	if profs, _ := filepath.Glob(filepath.Join(dir, "*-cpu.prof")); len(profs) == 1 {
		share, err := cpuprofile.Analyze(profs[0])
		if err != nil {
			return err
		}
		r.CPU = &share
	}
	if pl, _ := filepath.Glob(filepath.Join(dir, "placement-*.json")); len(pl) == 1 {
		if r.Placement, err = os.ReadFile(pl[0]); err != nil {
			return err
		}
	}
	return nil
}

// dataItems is scheduler_perf's JSON (DataItems in util.go).
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

const pluginName = "ComputeDomainPlacement"

func parseDataItems(raw []byte) (map[string]float64, map[string]map[string]float64, error) {
	var d dataItems
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, nil, err
	}
	var tp map[string]float64
	plugin := map[string]map[string]float64{}
	for _, it := range d.DataItems {
		switch it.Labels["Metric"] {
		case "SchedulingThroughput":
			if tp != nil {
				return nil, nil, fmt.Errorf("more than one SchedulingThroughput item")
			}
			tp = it.Data
		case "scheduler_plugin_execution_duration_seconds":
			if it.Labels["plugin"] == pluginName {
				plugin[it.Labels["extension_point"]] = it.Data
			}
		}
	}
	if tp == nil {
		return nil, nil, fmt.Errorf("no SchedulingThroughput item: too few pods scheduled to sample (scheduler_perf logs \"Failed to measure SchedulingThroughput\")")
	}
	if len(plugin) == 0 {
		plugin = nil
	}
	return tp, plugin, nil
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var v float64
	_, _ = fmt.Sscan(strings.Fields(string(b))[0], &v)
	return v
}
