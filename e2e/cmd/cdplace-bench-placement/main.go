// Command cdplace-bench-placement measures placement quality on a seeded, reproducible trace:
// ComputeDomains of 1 to 18 trays arriving and leaving, plain GPU pods, tray failures. The same
// trace is replayed on one real control plane (see e2e/harness) for each configuration, each on a
// fresh simulated fleet with its own Prepare emulator:
//
//   - baseline: the default scheduler with the upstream pattern (required pod affinity on the
//     clique), no cdplace;
//   - cdplace: the shipped ComputeDomainPlacement configuration (whole-tray Require, best fit);
//   - cdplace-reserveN: the same with reserveTraysPerClique: N;
//   - cdplace-reserveafterN: the same with cliqueReservationAfterSeconds: N (real seconds; the
//     shipped 60 s is 1080 trace seconds at -time-scale 18, a third of the trace and longer than
//     the mean lifetime, where on a real fleet it is a small part of one; cdplace-reserveafter3 is
//     the shipped threshold compressed like the trace's times, 54 trace seconds);
//   - cdplace-depthN: the same with cliqueReservationDepth: N; parts combine, as in
//     cdplace-reserveafter3-depth4.
//
// -seeds replays every configuration for each seed's trace on the same control plane, in the
// listed order for the first seed, reversed for the second, and so on (so neither configuration
// always runs on a warmer control plane). Per size class (1–4, 5–8, 9–15, 16–18 trays) it reports
// the share of domains started, the median and p95 wait, and whole-domain preemptions with the
// GPU-hours they evicted.
//
// It records splits across cliques, Prepare refusals, stranded GPUs, GPU allocation over time,
// the wait from a domain's creation to all its pods bound, and the offline whole-tray packing
// bound at saturation (see BoundDefinition), and writes placement.json, allocation.csv,
// allocation.svg (and useful-allocation.svg, waiting.svg, summary.md, trace.json) under
// -out/seed-N, and placement.json, summary.md and the per-class charts over all seeds under -out.
// -load makes the trace's offered load (Σ trays × lifetime over the usable tray-seconds of the
// arrival window) what is asked, by scaling the lifetimes: 0.7 and 0.9 are loads a cluster can
// sustain, 1.7 (about the load as drawn) the overload case. Arrivals come in the first 80% of
// -horizon; with -until-done (the default) the run then continues until every domain and plain
// pod has completed, or -cap, which the report marks (waits then lower bounds). Each seed's trace
// is also scheduled offline by the clairvoyant references of package reference (EASY backfill,
// conservative backfill, runtime-blind FIFO; best fit) and the report sets every configuration
// beside them per size class, with issue 36's "Done when" ratios against EASY; -reference-only
// does only that, without a control plane, in well under a second per trace.
//
// Each domain is submitted as users write it: a ComputeDomain without cdplace's size annotation
// and an Indexed Job of its size. It exits non-zero when a cdplace configuration split a domain,
// let one stall part-bound or caused a Prepare refusal (3), or when the run itself failed (1).
//
//	go run ./cmd/cdplace-bench-placement -repo ..            # full: 2 seeds × 3 configs, 8 racks, 120 domains, ~25 min
//	go run ./cmd/cdplace-bench-placement -repo .. -smoke     # CI: 1 seed, 2 racks, 16 domains, ~1 min
//	go run ./cmd/cdplace-bench-placement -repo .. -reference-only -seeds 1,2,random -load 0.7,0.9,1.7  # references only, < 1 s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

type options struct {
	root, out, configs string
	seeds              []uint64
	racks, trays       int
	arrivals, plain    int
	failures           int
	horizon, scale     float64
	lifetimeHorizon    float64
	labelLag, sample   time.Duration
	satGrace, progress time.Duration
	stallGrace         time.Duration
	smoke, keepLogs    bool
	replot             bool
	deadlineFactor     float64
	loads              []float64 // 0: the load as drawn
	untilDone          bool
	cap                float64 // trace seconds
	baselineCap        float64 // trace seconds; 0: cap
	referenceOnly      bool
	simulate           *simOptions // -reference-only -simulate; nil: none
}

func main() {
	var o options
	flag.StringVar(&o.root, "repo", ".", "repository root")
	flag.StringVar(&o.out, "out", "target/bench/placement", "output directory (relative to -repo unless absolute); -smoke defaults to target/bench/placement-smoke")
	flag.StringVar(&o.configs, "configs", "baseline,cdplace,cdplace-reserveafter3",
		"configurations to compare, in order: baseline, cdplace, and cdplace with args set by name parts: -reserve<N> (reserveTraysPerClique), -reserveafter<N> (cliqueReservationAfterSeconds, real seconds), -depth<N> (cliqueReservationDepth), e.g. cdplace-reserveafter3-depth4")
	seeds := flag.String("seeds", "1,2", "trace seeds, comma-separated; \"random\" draws one and prints it (e.g. 1,2,random); every configuration runs on each (-smoke: the first only)")
	loads := flag.String("load", "0", "offered load the trace is made to have (Σ trays × lifetime over usable trays × arrival window; lifetimes are scaled to it): e.g. 0.7, 0.9 (sustainable) or 1.7 (overload); 0: as drawn (about 1.7 at the default size); a list (0.7,0.9,1.7) only with -reference-only")
	flag.BoolVar(&o.untilDone, "until-done", true, "after the arrivals, run until every domain and plain pod has completed (or -cap); false: withdraw everything at -horizon")
	flag.Float64Var(&o.cap, "cap", 0, "with -until-done, end the run this many trace seconds after the start even if domains are left (reported as capped; their waits are then lower bounds); 0: 4 × -horizon")
	flag.Float64Var(&o.baselineCap, "baseline-cap", 0, "with -until-done, the stock baseline's cap in trace seconds (it deadlocks, so its run would otherwise wait out -cap); 0: -cap")
	flag.BoolVar(&o.referenceOnly, "reference-only", false, "only simulate the offline references (EASY, conservative backfill, runtime-blind FIFO) on each seed's and load's trace, write their per-class figures and charts under -out/reference, and exit (no control plane; seconds)")
	simulate := flag.String("simulate", "", "with -reference-only: also schedule each trace offline with these policy components (comma-separated files, or \"shipped\" for the one built into the CLI) by `cdplace replay --simulate`, check issue 36's \"Done when\" on every trace and tally the checks per load (seconds per trace and policy)")
	simulateFlags := flag.String("simulate-flags", "", "more `cdplace replay --simulate` flags for -simulate, e.g. \"--time-scale 1 --deadline-factor 1.5\"")
	cli := flag.String("cdplace", "target/release/cdplace", "the cdplace CLI for -simulate (relative to -repo unless absolute)")
	labelLagTrace := flag.Float64("label-lag-trace", 0, "the label lag in trace seconds (sets -label-lag to this / -time-scale, so the lag keeps its share of a lifetime at any compression); 0: -label-lag as given")
	seed := flag.Uint64("seed", 0, "one trace seed (overrides -seeds)")
	flag.IntVar(&o.racks, "racks", 8, "NVL72 racks, one 18-tray clique each")
	flag.IntVar(&o.trays, "trays", 18, "trays per clique")
	flag.IntVar(&o.arrivals, "arrivals", 120, "ComputeDomain arrivals")
	flag.IntVar(&o.plain, "plain", -1, "plain 4-GPU pods without a ComputeDomain (-1: arrivals/4)")
	flag.IntVar(&o.failures, "failures", -1, "tray failures (-1: 3 per 8 racks, at least 1)")
	flag.Float64Var(&o.horizon, "horizon", 3600, "trace length in trace seconds: arrivals come in its first 80%; with -until-done the run goes on past it until every domain has completed")
	flag.Float64Var(&o.lifetimeHorizon, "lifetime-horizon", 0, "trace seconds that lifetimes and repairs are drawn against (0: -horizon); a soak stretches -horizon and -arrivals and keeps this, so the load stays the same")
	flag.Float64Var(&o.scale, "time-scale", 18, "trace seconds per real second (3600 at 18: 200 s per configuration)")
	flag.DurationVar(&o.labelLag, "label-lag", 3*time.Second, "how long the driver's node label outlives a domain's last claim on a node (real time)")
	flag.DurationVar(&o.sample, "sample", time.Second, "sampling period (real time)")
	flag.DurationVar(&o.satGrace, "sat-grace", 2*time.Second, "a domain unbound this long makes a sample saturated")
	flag.DurationVar(&o.stallGrace, "stall-grace", 10*time.Second, "a domain with pods bound and pods pending this long, while a clique could hold it whole, has stalled part-bound (the settle window, 5 s, plus a scheduling cycle)")
	flag.DurationVar(&o.progress, "progress", 20*time.Second, "progress line period")
	flag.Float64Var(&o.deadlineFactor, "deadline-factor", 0, "give every pod spec.activeDeadlineSeconds = this × its lifetime (real time) + 5 s, and a 1 s grace period, as a user who knows runtimes writes them (0: no deadlines)")
	flag.BoolVar(&o.smoke, "smoke", false, "small and quick (CI): 1 seed, 2 racks, 16 domains, 4 plain pods, 1 failure, time scale 600, label lag 1s")
	flag.BoolVar(&o.keepLogs, "keep-logs", false, "keep the control plane's logs")
	flag.BoolVar(&o.replot, "replot", false, "only rewrite the CSV, charts and table from -out's placement.json (no control plane)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	var drawn []uint64
	if o.seeds, drawn, err = parseSeeds(*seeds, randomSeed); err != nil {
		fmt.Fprintln(os.Stderr, "cdplace-bench-placement: -seeds:", err)
		os.Exit(2)
	}
	for _, d := range drawn {
		fmt.Printf("==> -seeds random: drew seed %d (rerun it with -seeds %d)\n", d, d)
	}
	if o.loads, err = parseLoads(*loads); err != nil || (len(o.loads) > 1 && !o.referenceOnly) {
		if err == nil {
			err = fmt.Errorf("a list of loads needs -reference-only (one load per live run)")
		}
		fmt.Fprintln(os.Stderr, "cdplace-bench-placement: -load:", err)
		os.Exit(2)
	}
	if *simulate != "" && !o.referenceOnly {
		fmt.Fprintln(os.Stderr, "cdplace-bench-placement: -simulate needs -reference-only")
		os.Exit(2)
	}
	if o.simulate, err = parseSimulate(o.root, *cli, *simulate, *simulateFlags); err != nil {
		fmt.Fprintln(os.Stderr, "cdplace-bench-placement:", err)
		os.Exit(2)
	}
	switch {
	case set["seed"]:
		o.seeds = []uint64{*seed}
	case o.smoke && !set["seeds"]:
		o.seeds = o.seeds[:1]
	}
	if o.smoke {
		def := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		def("racks", func() { o.racks = 2 })
		def("arrivals", func() { o.arrivals = 16 })
		def("plain", func() { o.plain = 4 })
		def("failures", func() { o.failures = 1 })
		def("time-scale", func() { o.scale = 600 })
		def("label-lag", func() { o.labelLag = time.Second })
		def("sat-grace", func() { o.satGrace = time.Second })
		def("sample", func() { o.sample = 500 * time.Millisecond })
		def("progress", func() { o.progress = 5 * time.Second })
		def("out", func() { o.out = "target/bench/placement-smoke" })
	}
	if o.plain < 0 {
		o.plain = o.arrivals / 4
	}
	if o.cap <= 0 {
		o.cap = 4 * o.horizon
	}
	if *labelLagTrace > 0 {
		o.labelLag = time.Duration(*labelLagTrace / o.scale * float64(time.Second))
	}
	if o.failures < 0 {
		o.failures = max(1, o.racks*3/8)
	}
	var code int
	switch {
	case o.referenceOnly:
		code, err = referenceOnly(o, os.Stdout)
	case o.replot:
		code, err = replot(o)
	default:
		code, err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cdplace-bench-placement:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func run(o options) (code int, err error) {
	root, out, err := paths(o)
	if err != nil {
		return 1, err
	}
	cfgs, err := parseConfigs(root, o.configs)
	if err != nil {
		return 2, err
	}
	ropts := runOptions{Scale: o.scale, LabelLag: o.labelLag, Sample: o.sample, SatGrace: o.satGrace, StallGrace: o.stallGrace, Progress: o.progress,
		DeadlineFactor: o.deadlineFactor, UntilDone: o.untilDone, Cap: o.cap, BaselineCap: o.baselineCap}
	horizonReal := o.horizon / o.scale
	bench := &Bench{
		Generated: time.Now().UTC().Format(time.RFC3339), Command: strings.Join(os.Args, " "), Smoke: o.smoke,
		Seeds: o.seeds, TimeScale: o.scale, HorizonSeconds: horizonReal,
	}
	step := func(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }
	var traces []Trace
	for _, seed := range o.seeds {
		spec := o.traceSpec(seed, o.loads[0])
		tr := GenerateTrace(spec)
		meanSize, load := tr.Demand()
		lagShare := o.labelLag.Seconds() * o.scale / medianLifetime(tr)
		traces = append(traces, tr)
		bench.Runs = append(bench.Runs, &Report{
			Generated: bench.Generated, Command: bench.Command, Smoke: o.smoke,
			TraceDigest: tr.Digest(), TraceSpec: spec, MeanSize: meanSize, OfferedLoad: load, TimeScale: o.scale,
			HorizonSeconds: horizonReal, LabelLagSeconds: o.labelLag.Seconds(), SampleSeconds: o.sample.Seconds(),
			SatGraceSeconds: o.satGrace.Seconds(), StallGraceSeconds: o.stallGrace.Seconds(), BoundDefinition: BoundDefinition,
			LabelLagShare: lagShare,
		})
		until := "withdrawn at the horizon"
		if o.untilDone {
			until = fmt.Sprintf("then until every domain completes, cap %.0f s real", o.cap/o.scale)
			if o.baselineCap > 0 {
				until += fmt.Sprintf(" (the baseline's %.0f s)", o.baselineCap/o.scale)
			}
		}
		step("trace %s (seed %d): %d ComputeDomains (mean %.1f trays), %d plain pods, %d tray failures on %d×%d trays; offered load %.2f; arrivals over %.0f s real, %s; label lag %v = %.0f trace s = %.1f%% of the median lifetime (%.0f trace s)",
			tr.Digest(), seed, len(tr.CDs), meanSize, len(tr.Plain), len(tr.Failures), o.racks, o.trays, load, tr.Window()/o.scale, until,
			o.labelLag, o.labelLag.Seconds()*o.scale, 100*lagShare, medianLifetime(tr))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	wall := time.Now()
	dir := filepath.Join(root, "target", "e2e", "bench-placement-"+time.Now().Format("20060102-150405"))
	upCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	env, err := harness.Up(upCtx, root, dir, harness.EnvOptions{Baseline: true})
	cancel()
	if err != nil {
		return 1, err
	}
	bench.ControlPlane = time.Since(wall).Seconds()
	step("control plane up in %.1fs (logs in %s)", bench.ControlPlane, dir)
	failed := false
	defer func() {
		env.Down()
		if !failed && !o.keepLogs {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Printf("logs kept in %s\n", dir)
		}
	}()

	m := &schedulers{env: env, root: root, active: env.Cdplace}
	for i, rep := range bench.Runs {
		tr := traces[i]
		seedWall := time.Now()
		for _, cfg := range runOrder(cfgs, i) {
			rep.RunOrder = append(rep.RunOrder, cfg.Name)
			swap, err := m.use(ctx, cfg)
			if err != nil {
				failed = true
				return 1, err
			}
			step("seed %d, %s: replaying the trace (%s)", tr.Spec.Seed, cfg.Name, describe(cfg, o.scale))
			ropts.Scheduler = nil
			if cfg.Profile == harness.Cdplace {
				ropts.Scheduler = m.active
			}
			res, err := runConfig(ctx, env, cfg, tr, ropts)
			if err != nil {
				failed = true
				return 1, fmt.Errorf("seed %d, %s: %w", tr.Spec.Seed, cfg.Name, err)
			}
			res.SchedulerSwapSeconds = swap.Seconds()
			if err := env.CP.Check(); err != nil {
				failed = true
				return 1, err
			}
			rep.Configs = append(rep.Configs, res)
			if res.Capped {
				step("seed %d, %s: capped at %.0f s real with domains left; its waits are lower bounds", tr.Spec.Seed, cfg.Name, res.EndSeconds)
			}
			step("seed %d, %s done in %.0fs: %d of %d ComputeDomains started, %d completed, %d splits, %d stalled part-bound, %d Prepare refusals, %d preemptions, allocation/bound at saturation %.1f%% (no-migration bound %.1f%%)",
				tr.Spec.Seed, cfg.Name, res.WallSeconds, res.CDsStarted, res.CDsArrived, res.CDsCompleted, res.Splits, res.StalledPartBound,
				res.PrepareRefusals, res.Preemptions, 100*res.AllocOverBound, 100*res.AllocOverNowBound)
		}
		// Tables list the configurations as -configs does, whatever order they ran in.
		sortConfigs(rep.Configs, cfgs)
		rep.WallSeconds = time.Since(seedWall).Seconds()
		bench.WallSeconds = time.Since(wall).Seconds()
		// Written after every seed, so an interrupted run keeps the seeds that finished.
		if err := writeBench(out, bench, traces[:i+1]); err != nil {
			return 1, err
		}
	}
	if _, err := m.use(ctx, config{Name: "cdplace", Profile: harness.Cdplace}); err != nil {
		failed = true
		return 1, fmt.Errorf("restore the shipped scheduler: %w", err)
	}
	bench.WallSeconds = time.Since(wall).Seconds()
	if err := writeBench(out, bench, traces); err != nil {
		return 1, err
	}
	fmt.Println()
	fmt.Print(benchSummary(bench))
	fmt.Printf("\nwrote %s/{placement.json,summary.md,classes-*.svg} and seed-N/{placement.json,allocation.csv,allocation.svg,useful-allocation.svg,waiting.svg,summary.md,trace.json} in %.0fs\n",
		out, bench.WallSeconds)

	var problems []error
	for _, rep := range bench.Runs {
		for _, c := range rep.Configs {
			at := fmt.Sprintf("seed %d, %s", rep.TraceSpec.Seed, c.Config)
			if len(c.Errors) > 0 {
				problems = append(problems, fmt.Errorf("%s: %d errors while replaying, first: %s", at, len(c.Errors), c.Errors[0]))
			}
			if c.CDsStarted == 0 {
				problems = append(problems, fmt.Errorf("%s: no ComputeDomain started; the benchmark is broken", at))
			}
			if c.Profile != string(harness.Cdplace) {
				continue
			}
			if c.Splits > 0 {
				problems = append(problems, fmt.Errorf("%s: %d ComputeDomains split across cliques", at, c.Splits))
			}
			if c.PrepareRefusals > 0 {
				problems = append(problems, fmt.Errorf("%s: %d Prepare refusals (%s)", at, c.PrepareRefusals, c.SampleRefusal))
			}
			if c.StalledPartBound > 0 {
				problems = append(problems, fmt.Errorf("%s: %d ComputeDomains stalled part-bound (pods bound and pods pending for over %v while a clique could hold them whole)",
					at, c.StalledPartBound, o.stallGrace))
			}
		}
	}
	if len(problems) > 0 {
		failed = true
		return 3, errors.Join(problems...)
	}
	return 0, nil
}

// traceSpec is the trace of seed at load (0: as drawn) with the options' fleet and sizes.
func (o options) traceSpec(seed uint64, load float64) TraceSpec {
	return TraceSpec{Seed: seed, Racks: o.racks, TraysPerClique: o.trays, Arrivals: o.arrivals, PlainPods: o.plain,
		Failures: o.failures, Horizon: o.horizon, LifetimeHorizon: o.lifetimeHorizon, Load: load}
}

func paths(o options) (root, out string, err error) {
	if root, err = filepath.Abs(o.root); err != nil {
		return "", "", err
	}
	out = o.out
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return root, out, nil
}

// replot rewrites the derived outputs from an earlier run's placement.json (a run of several
// seeds, or one seed's file as written before -seeds).
func replot(o options) (int, error) {
	_, out, err := paths(o)
	if err != nil {
		return 1, err
	}
	data, err := os.ReadFile(filepath.Join(out, "placement.json"))
	if err != nil {
		return 1, err
	}
	bench, err := decodeBench(data)
	if err != nil {
		return 1, fmt.Errorf("placement.json: %w", err)
	}
	if err := writeBench(out, bench, nil); err != nil {
		return 1, err
	}
	fmt.Print(benchSummary(bench))
	return 0, nil
}
