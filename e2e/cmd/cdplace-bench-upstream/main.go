// Command cdplace-bench-upstream runs upstream kube-scheduler's scheduler_perf with and without
// ComputeDomainPlacement and reports the ratio, in the unit upstream uses (pods/s from
// scheduler_perf's own throughput collector, SchedulingThroughput Average and Perc50).
//
// It drives the test binary of host-shim/go/test/schedulerperf (built by `make bench-upstream`
// with `go test -c`), one process per run, so that every run starts from a fresh etcd,
// kube-apiserver and scheduler. For each workload and round it runs three variants in an order
// that rotates from round to round: A (the stock profile), B (the same workload under the
// cdplace profile) and A again (A2), so that B/A sits beside A2/A, the noise band of the
// machine. Every run takes a CPU profile of its measured phase; the plugin's share of it is
// read from the B runs (A's is reported as a control and must be 0).
//
// Results: <out>/results.json (every run), <out>/summary.md, <out>/throughput.svg, and each
// run's data items, profile and log under <out>/runs/.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Workload is one scheduler_perf workload with its two variants.
type Workload struct {
	// Name as shown in the tables.
	Name string `json:"name"`
	// Config is the -cdplace-config of the test binary.
	Config string `json:"config"`
	// Stock and Cdplace are the test cases of variant A and B.
	Stock   string `json:"stock"`
	Cdplace string `json:"cdplace"`
	// Workload is the workload's name inside the test cases.
	Workload string `json:"workload"`
}

const (
	upstreamCase = "SchedulingWithResourceClaimTemplate"
	twinSuffix   = "WithComputeDomainPlacement" // schedulerperf.TwinSuffix
	cdConfig     = "config/computedomain-config.yaml"
)

func upstream(workload string) Workload {
	return Workload{Name: workload, Config: "upstream-dra", Stock: upstreamCase, Cdplace: upstreamCase + twinSuffix, Workload: workload}
}

func computeDomain(workload string) Workload {
	return Workload{Name: "ComputeDomain/" + workload, Config: cdConfig, Stock: "ComputeDomainBaseline", Cdplace: "ComputeDomainPlacement", Workload: workload}
}

type options struct {
	repo      string
	bin       string
	out       string
	pairs     int
	workloads []Workload
	profile   bool
	timeout   time.Duration
	resume    string
}

func main() {
	var o options
	upstreamList := flag.String("upstream", "5000pods_500nodes,empty_500nodes,half_500nodes,match_empty_500nodes,selector_empty_500nodes",
		"workloads of upstream's SchedulingWithResourceClaimTemplate (dra/performance-config.yaml) to run")
	cdList := flag.String("computedomain", "1008trays", "workloads of config/computedomain-config.yaml to run")
	flag.StringVar(&o.repo, "repo", ".", "repository root")
	flag.StringVar(&o.bin, "bin", "target/bench/upstream/schedulerperf.test", "the test binary of host-shim/go/test/schedulerperf (go test -c)")
	flag.StringVar(&o.out, "out", "target/bench/upstream", "output directory")
	flag.IntVar(&o.pairs, "pairs", 5, "rounds per workload; each runs A, B and A2 once")
	flag.BoolVar(&o.profile, "profile", true, "take a CPU profile of every run's measured phase (-perf-cpuprofile)")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "give up on one run after this long")
	flag.StringVar(&o.resume, "resume", "", "continue an interrupted invocation in its runs directory (<out>/runs/<stamp>): runs that finished are kept")
	from := flag.String("recollect", "", "rebuild the report from the run directories of an earlier invocation (<out>/runs/<stamp>) instead of running")
	smoke := flag.Bool("smoke", false, "a quick check that the benchmark works: A and B once each of upstream's half_100nodes and of ComputeDomain/504trays")
	flag.Parse()
	if *smoke {
		*upstreamList, *cdList, o.pairs = "half_100nodes", "504trays", 1
	}
	for _, w := range splitList(*upstreamList) {
		o.workloads = append(o.workloads, upstream(w))
	}
	for _, w := range splitList(*cdList) {
		o.workloads = append(o.workloads, computeDomain(w))
	}
	if len(o.workloads) == 0 || o.pairs < 1 {
		fmt.Fprintln(os.Stderr, "bench-upstream: nothing to run (-upstream, -computedomain, -pairs)")
		os.Exit(2)
	}
	if *from != "" {
		if err := recollect(*from, o.out, o.workloads); err != nil {
			fmt.Fprintln(os.Stderr, "bench-upstream:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o, *smoke); err != nil {
		fmt.Fprintln(os.Stderr, "bench-upstream:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Env is what a run needs from the repository.
type Env struct {
	Bin       string // the test binary
	PkgDir    string // its package directory, the working directory of every run
	ModuleDir string // the k8s.io/kubernetes module
	Path      string // PATH with target/e2e/bin (etcd) first
	Profile   bool
	Timeout   time.Duration
}

func run(o options, smoke bool) error {
	root, err := filepath.Abs(o.repo)
	if err != nil {
		return err
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}
	out := abs(o.out)
	env := Env{
		Bin: abs(o.bin), PkgDir: filepath.Join(root, "host-shim", "go", "test", "schedulerperf"),
		Path:    filepath.Join(root, "target", "e2e", "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		Profile: o.profile, Timeout: o.timeout,
	}
	if _, err := os.Stat(env.Bin); err != nil {
		return fmt.Errorf("test binary: %w (make bench-upstream builds it)", err)
	}
	if _, err := os.Stat(filepath.Join(root, "target", "e2e", "bin", "etcd")); err != nil {
		return fmt.Errorf("etcd for scheduler_perf: %w (make e2e-binaries builds it)", err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(root, "host-shim", "go")
	dir, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locate the k8s.io/kubernetes module: %w", err)
	}
	env.ModuleDir = strings.TrimSpace(string(dir))
	stamp := time.Now().Format("20060102-150405")
	runsDir := filepath.Join(out, "runs", stamp)
	if o.resume != "" {
		runsDir, stamp = abs(o.resume), filepath.Base(o.resume)
	}
	if err := os.MkdirAll(runsDir, 0o755); err != nil {
		return err
	}
	fmt.Printf("bench-upstream: %d workload(s) x %d round(s) x %d runs; runs in %s\n", len(o.workloads), o.pairs, len(order(0, smoke)), runsDir)
	var runs []Run
	var failed []string
	for round := 0; round < o.pairs; round++ {
		for _, w := range o.workloads {
			for _, v := range order(round, smoke) {
				dir := filepath.Join(runsDir, fmt.Sprintf("%s-r%d-%s", safeName(w.Name), round, v))
				r, done := finished(dir)
				if !done {
					r = runOne(env, w, v, round, dir)
				}
				fmt.Println("  " + r.Line())
				if r.Error != "" {
					failed = append(failed, fmt.Sprintf("%s %s round %d: %s", w.Name, v, round, r.Error))
				}
				runs = append(runs, r)
				// After every run, so an interrupted benchmark keeps what it measured.
				if err := writeReport(out, stamp, o.pairs, smoke, o.workloads, runs); err != nil {
					return err
				}
			}
		}
	}
	fmt.Print(Summarize(o.workloads, runs).Markdown())
	if len(failed) > 0 {
		return fmt.Errorf("%d run(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
	}
	return nil
}

// finished returns the run recorded in dir when it completed without an error.
func finished(dir string) (Run, bool) {
	var r Run
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil || json.Unmarshal(b, &r) != nil || r.Error != "" {
		return Run{}, false
	}
	return r, true
}

func writeReport(out, stamp string, rounds int, smoke bool, workloads []Workload, runs []Run) error {
	rep := Summarize(workloads, runs)
	rep.Started, rep.Pairs, rep.Smoke, rep.Runs = stamp, rounds, smoke, runs
	return rep.Write(out)
}

// recollect rebuilds the report from the run directories under dir (one invocation's runs/<stamp>).
func recollect(dir, out string, workloads []Workload) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var runs []Run
	rounds := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r, err := loadRun(filepath.Join(dir, e.Name()), workloads)
		if err != nil {
			return err
		}
		rounds = max(rounds, r.Round+1)
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return fmt.Errorf("no runs in %s", dir)
	}
	if err := writeReport(out, filepath.Base(dir), rounds, false, workloads, runs); err != nil {
		return err
	}
	fmt.Print(Summarize(workloads, runs).Markdown())
	return nil
}

// order rotates A, B, A2 by round, so no variant always runs first or right after another; a
// smoke run leaves out A2.
func order(round int, smoke bool) []Variant {
	if smoke {
		return []Variant{VariantA, VariantB}
	}
	v := []Variant{VariantA, VariantB, VariantA2}
	k := round % len(v)
	return append(v[k:], v[:k]...)
}

func safeName(s string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(s)
}
