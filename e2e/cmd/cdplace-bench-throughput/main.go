// Command cdplace-bench-throughput measures scheduling throughput on a real control plane:
// ComputeDomain pods, GPU pods without a domain and CPU-only pods through the cdplace profile
// (kube-scheduler-config/scheduler-config.yaml) and through the stock default-scheduler (the
// domain pods there carry the upstream clique-affinity pattern), on fleets of several sizes,
// alternating the two in every repetition. It also reads each scheduler's own latency histograms.
// `make bench-throughput` runs it; results go to target/bench/throughput/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

// kinds of workload.
const (
	kindCD    = "computedomain"
	kindGPU   = "gpu"
	kindPlain = "cpu"
	// kindDRAGPU: plain whole-tray GPU pods whose GPUs come from a DRA claim (the NVIDIA DRA
	// driver's GPU device class), not the extended resource; not in the default -kinds.
	kindDRAGPU = "dra-gpu"
)

type config struct {
	repo string
	// cdplaceOnly runs the workloads through the cdplace scheduler alone (-cdplace-only).
	cdplaceOnly bool
	sizes       []int
	reps        int
	cdFrac      float64
	gpuFrac     float64
	cpuPods     int
	out         string
	kinds       []string
	timeout     time.Duration
	keepLogs    bool
	profile     int
	perf        bool
	keepPerf    bool
	allNodes    bool
	twin        bool
	qps         float64
	burst       int
	// pluginConfig replaces the cdplace profile's pluginConfig (nil: the shipped one).
	pluginConfig []byte
}

// allNodes is a stock profile that, like the cdplace profile, filters every node
// (percentageOfNodesToScore: 100): it separates what the plugin costs from what looking at every
// node costs.
const allNodes = harness.Profile("all-nodes-scheduler")

// stockTwin is a second stock scheduler process with the baseline's profile under another name
// (-stock-twin): its pairs against the baseline are what the harness reads between two
// identical schedulers, the noise band to hold cdplace's pairs against (bench-upstream's A2/A).
const stockTwin = harness.Profile("stock-twin-scheduler")

func main() {
	var c config
	sizes := flag.String("sizes", "500,5000", "fleet sizes in trays (rounded up to whole 18-tray cliques)")
	kinds := flag.String("kinds", "computedomain,gpu,cpu", "workloads to run (also: dra-gpu, plain GPU pods whose GPUs are a DRA claim)")
	flag.StringVar(&c.repo, "repo", ".", "repository root")
	flag.IntVar(&c.reps, "reps", 2, "repetitions per fleet size (each runs both profiles, alternating which goes first)")
	flag.Float64Var(&c.cdFrac, "cd-fraction", 0.4, "ComputeDomain pods as a fraction of the trays")
	flag.Float64Var(&c.gpuFrac, "gpu-fraction", 0.4, "whole-tray GPU pods as a fraction of the trays")
	flag.IntVar(&c.cpuPods, "cpu-pods", 500, "CPU-only pods per run (capped at 2x the trays)")
	flag.StringVar(&c.out, "out", "target/bench/throughput", "output directory")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on one run after this long")
	flag.BoolVar(&c.keepLogs, "keep-logs", false, "keep the control plane's logs")
	flag.BoolVar(&c.allNodes, "all-nodes", true, "also run the GPU and CPU workloads through a stock profile with percentageOfNodesToScore: 100")
	flag.BoolVar(&c.twin, "stock-twin", false, "also run the GPU and CPU workloads through a second stock scheduler with the baseline's profile, alternated with it: the noise band of the pairs")
	flag.Float64Var(&c.qps, "client-qps", 5000, "clientConnection.qps of every scheduler compared (upstream's scheduler_perf uses 5000; 0 keeps kube-scheduler's 50, at which every workload measures the client's rate limit, not scheduling)")
	flag.IntVar(&c.burst, "client-burst", 5000, "clientConnection.burst of every scheduler compared (with -client-qps)")
	flag.IntVar(&c.profile, "profile", 0, "seconds of CPU profile to take of each scheduler during its first run of each workload at the largest size (0: none)")
	flag.BoolVar(&c.keepPerf, "keep-perf", false, "with -perf, keep each run's recording (perf-<profile>-<kind>-<trays>-<rep>.data in -out) for perf report or perf diff")
	flag.BoolVar(&c.perf, "perf", false, "record each run of each scheduler with perf (perf record -g -p, 499 Hz; Debian's linux-perf) and report the plugin's share of the samples: every thread and language, the steady figure")
	flag.BoolVar(&c.cdplaceOnly, "cdplace-only", false, "run the workloads through the cdplace scheduler only, not the stock ones (e.g. to measure its memory: each run records its RSS at rest and its peak)")
	smoke := flag.Bool("smoke", false, "a quick check that the benchmark works: 90 trays, 1 repetition")
	pluginConfig := flag.String("plugin-config", "", "a YAML file whose list replaces the cdplace profile's pluginConfig (such as kube-scheduler-config/examples/host-managed-args.yaml); empty: the shipped args")
	flag.Parse()
	if *pluginConfig != "" {
		b, err := os.ReadFile(*pluginConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-throughput:", err)
			os.Exit(2)
		}
		c.pluginConfig = b
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bad -sizes entry %q\n", s)
			os.Exit(2)
		}
		c.sizes = append(c.sizes, n)
	}
	c.kinds = strings.Split(*kinds, ",")
	if *smoke {
		c.sizes, c.reps, c.cpuPods = []int{90}, 1, 60
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-throughput:", err)
		os.Exit(1)
	}
}

func run(c config) (err error) {
	root, _ := filepath.Abs(c.repo)
	if !filepath.IsAbs(c.out) {
		c.out = filepath.Join(root, c.out)
	}
	out := c.out
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	dir := filepath.Join(root, "target", "e2e", "bench-throughput-"+time.Now().Format("20060102-150405"))
	ctx := context.Background()
	env, err := harness.Up(ctx, root, dir, harness.EnvOptions{Baseline: true, ClientQPS: c.qps, ClientBurst: c.burst, PluginConfig: c.pluginConfig})
	if err != nil {
		return err
	}
	defer func() {
		env.Down()
		if err == nil && !c.keepLogs {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Printf("logs kept in %s\n", dir)
		}
	}()
	// The stock schedulers besides the baseline, by profile: each a process of its own.
	extra := map[harness.Profile]*harness.Scheduler{}
	for _, x := range []struct {
		on         bool
		p          harness.Profile
		percentage int
	}{{c.allNodes, allNodes, 100}, {c.twin, stockTwin, 0}} {
		if !x.on {
			continue
		}
		cfg, err := harness.WithClientRate(harness.StockSchedulerConfig(env.CP.AdminKubeconfig, string(x.p), x.percentage), c.qps, c.burst)
		if err != nil {
			return err
		}
		if extra[x.p], err = env.CP.StartScheduler(ctx, string(x.p), cfg); err != nil {
			return err
		}
	}
	var runs []Run
	for _, trays := range c.sizes {
		cliques := (trays + 17) / 18
		spec := harness.FleetSpec{Name: fmt.Sprintf("tp%d", trays), Racks: cliques, CliquesPerRack: 1, TraysPerClique: 18, GPUsPerTray: 4}
		t0 := time.Now()
		fleet, err := createFleetParallel(ctx, env, spec)
		if err != nil {
			return err
		}
		n := len(fleet.Nodes)
		fmt.Printf("fleet of %d trays (%d cliques) created in %v\n", n, cliques, time.Since(t0).Round(time.Second))
		pctx, cancel := context.WithCancel(ctx)
		prep, err := harness.StartPrepareEmulator(pctx, env.CP.Client, harness.PrepareOptions{Fleet: spec.Name, UnprepareLabelLag: 100 * time.Millisecond})
		if err != nil {
			cancel()
			return err
		}
		for rep := 0; rep < c.reps; rep++ {
			for _, kind := range c.kinds {
				profiles := []harness.Profile{harness.Cdplace, harness.Baseline}
				if c.cdplaceOnly {
					profiles = profiles[:1]
				}
				// The twin next to the baseline, so that each pair of the two alternates too.
				// Neither extra runs ComputeDomain pods (their baseline pods carry its affinity).
				if c.twin && kind != kindCD && !c.cdplaceOnly {
					profiles = append(profiles, stockTwin)
				}
				if c.allNodes && kind != kindCD && !c.cdplaceOnly {
					profiles = append(profiles, allNodes)
				}
				if rep%2 == 1 {
					for i, j := 0, len(profiles)-1; i < j; i, j = i+1, j-1 {
						profiles[i], profiles[j] = profiles[j], profiles[i]
					}
				}
				for _, p := range profiles {
					r, err := oneRun(ctx, env, extra, prep, c, fleet, kind, p, rep)
					if err != nil {
						cancel()
						return err
					}
					refused := ""
					if r.PrepareRefusals > 0 {
						refused = fmt.Sprintf(", %d Prepare refusals", r.PrepareRefusals)
					}
					fmt.Printf("  %5d trays  %-13s %-23s rep %d: %4d/%4d pods bound in %6.1fs = %6.1f pods/s (attempt p50 %.1f ms, p99 %.1f ms%s; RSS %.0f MiB before, %.0f after, peak %.0f)\n",
						n, kind, p, rep, r.Bound, r.Pods, r.Seconds, r.PodsPerSec, r.AttemptP50, r.AttemptP99, refused, r.RSSBeforeMiB, r.RSSMiB, r.PeakRSSMiB)
					runs = append(runs, r)
				}
			}
		}
		if refusals := prep.Refusals(); len(refusals) > 0 {
			f := refusals[0]
			fmt.Printf("  note: %d Prepare refusals on this fleet (first: pod %s/%s on %s at %s: %s)\n", len(refusals),
				f.Namespace, f.Pod, f.Node, f.At.Format("15:04:05.000"), f.Message)
		}
		cancel()
		if err := harness.DeleteFleet(ctx, env.CP.Client, fleet); err != nil {
			return err
		}
	}
	return report(out, runs)
}

// createFleetParallel creates the fleet's nodes from 8 goroutines (the harness creates them one
// by one, which takes minutes at 5,000 trays).
func createFleetParallel(ctx context.Context, env *harness.Env, spec harness.FleetSpec) (*harness.Fleet, error) {
	racks := spec.Racks
	parts := make([]*harness.Fleet, racks)
	errs := make(chan error, racks)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for r := 0; r < racks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f, err := harness.CreateRack(ctx, env.CP.Client, spec, r)
			if err != nil {
				errs <- err
				return
			}
			parts[r] = f
		}(r)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return harness.MergeFleet(spec, parts), nil
}
