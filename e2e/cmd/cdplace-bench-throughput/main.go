// Command cdplace-bench-throughput measures scheduling throughput on a real control plane:
// ComputeDomain pods, GPU pods without a domain and CPU-only pods through the cdplace profile
// (kube-scheduler-config/scheduler-config.yaml) and through the stock default-scheduler (the
// domain pods there carry the upstream clique-affinity pattern), on fleets of several sizes,
// alternating the two in every repetition. It also reads each scheduler's own latency histograms.
// `make bench-throughput` runs it; results go to target/bench/throughput/.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
	"github.com/cdplace/cdplace/e2e/plot"
)

// kinds of workload.
const (
	kindCD    = "computedomain"
	kindGPU   = "gpu"
	kindPlain = "cpu"
)

type config struct {
	repo     string
	sizes    []int
	reps     int
	cdFrac   float64
	gpuFrac  float64
	cpuPods  int
	out      string
	kinds    []string
	timeout  time.Duration
	keepLogs bool
	profile  int
	allNodes bool
}

// allNodes is a stock profile that, like the cdplace profile, filters every node
// (percentageOfNodesToScore: 100): it separates what the plugin costs from what looking at every
// node costs.
const allNodes = harness.Profile("all-nodes-scheduler")

// Run is one workload through one scheduler.
type Run struct {
	Trays      int     `json:"trays"`
	Kind       string  `json:"kind"`
	Profile    string  `json:"profile"`
	Rep        int     `json:"rep"`
	Pods       int     `json:"pods"`
	Bound      int     `json:"bound"`
	Seconds    float64 `json:"seconds"`
	PodsPerSec float64 `json:"podsPerSecond"`
	AttemptP50 float64 `json:"attemptP50ms"`
	AttemptP99 float64 `json:"attemptP99ms"`
	// RSSMiB is the scheduler process's resident set size right after the run (the fleet and
	// the run's pods in its caches; cdplace's view, guest instances and owner informers too).
	RSSMiB    float64              `json:"schedulerRSSMiB"`
	Extension map[string]Quantiles `json:"extensionPoints"`
	Plugins   map[string]Quantiles `json:"plugins"`
}

// Quantiles of one histogram in milliseconds (plugin metrics are sampled by the scheduler).
type Quantiles struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50ms"`
	P99   float64 `json:"p99ms"`
}

func main() {
	var c config
	sizes := flag.String("sizes", "500,5000", "fleet sizes in trays (rounded up to whole 18-tray cliques)")
	kinds := flag.String("kinds", "computedomain,gpu,cpu", "workloads to run")
	flag.StringVar(&c.repo, "repo", ".", "repository root")
	flag.IntVar(&c.reps, "reps", 2, "repetitions per fleet size (each runs both profiles, alternating which goes first)")
	flag.Float64Var(&c.cdFrac, "cd-fraction", 0.4, "ComputeDomain pods as a fraction of the trays")
	flag.Float64Var(&c.gpuFrac, "gpu-fraction", 0.4, "whole-tray GPU pods as a fraction of the trays")
	flag.IntVar(&c.cpuPods, "cpu-pods", 500, "CPU-only pods per run (capped at 2x the trays)")
	flag.StringVar(&c.out, "out", "target/bench/throughput", "output directory")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "give up on one run after this long")
	flag.BoolVar(&c.keepLogs, "keep-logs", false, "keep the control plane's logs")
	flag.BoolVar(&c.allNodes, "all-nodes", true, "also run the GPU and CPU workloads through a stock profile with percentageOfNodesToScore: 100")
	flag.IntVar(&c.profile, "profile", 0, "seconds of CPU profile to take of each scheduler during its first ComputeDomain run at the largest size (0: none)")
	smoke := flag.Bool("smoke", false, "a quick check that the benchmark works: 90 trays, 1 repetition")
	flag.Parse()
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
	env, err := harness.Up(ctx, root, dir, harness.EnvOptions{Baseline: true})
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
	var allNodesSched *harness.Scheduler
	if c.allNodes {
		cfg := harness.StockSchedulerConfig(env.CP.AdminKubeconfig, string(allNodes), 100)
		if allNodesSched, err = env.CP.StartScheduler(ctx, string(allNodes), cfg); err != nil {
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
				if c.allNodes && kind != kindCD {
					profiles = append(profiles, allNodes)
				}
				if rep%2 == 1 {
					for i, j := 0, len(profiles)-1; i < j; i, j = i+1, j-1 {
						profiles[i], profiles[j] = profiles[j], profiles[i]
					}
				}
				for _, p := range profiles {
					r, err := oneRun(ctx, env, allNodesSched, prep, c, n, kind, p, rep)
					if err != nil {
						cancel()
						return err
					}
					fmt.Printf("  %5d trays  %-13s %-23s rep %d: %4d/%4d pods bound in %6.1fs = %6.1f pods/s (attempt p50 %.1f ms, p99 %.1f ms)\n",
						n, kind, p, rep, r.Bound, r.Pods, r.Seconds, r.PodsPerSec, r.AttemptP50, r.AttemptP99)
					runs = append(runs, r)
				}
			}
		}
		if refusals := prep.Refusals(); len(refusals) > 0 {
			fmt.Printf("  note: %d Prepare refusals on this fleet (first: %s)\n", len(refusals), refusals[0].Message)
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

func oneRun(ctx context.Context, env *harness.Env, allNodesSched *harness.Scheduler, prep *harness.PrepareEmulator, c config, trays int, kind string, p harness.Profile, rep int) (Run, error) {
	short := "cdp"
	sched := env.Cdplace
	switch p {
	case harness.Baseline:
		short, sched = "base", env.Baseline
	case allNodes:
		short, sched = "all", allNodesSched
	}
	ns := fmt.Sprintf("tp%d-%s-%s-%d", trays, kind, short, rep)
	cl := env.CP.Client
	if _, err := cl.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return Run{}, err
	}
	var pods []*corev1.Pod
	switch kind {
	case kindCD:
		// Domains of 2, 4, 8 and 16 trays in turn up to the target count.
		target := int(c.cdFrac * float64(trays))
		sizes := []int{2, 4, 8, 16}
		for i, total := 0, 0; total < target; i++ {
			size := min(sizes[i%len(sizes)], target-total)
			name := fmt.Sprintf("cd%d", i)
			if _, err := harness.CreateComputeDomain(ctx, env.CP.Dynamic, ns, name, size); err != nil {
				return Run{}, err
			}
			for j := 0; j < size; j++ {
				pods = append(pods, harness.DomainPod(ns, name, j, 4, p))
			}
			total += size
		}
		// The templates exist before the clock starts, as for any workload submitted later.
		if err := waitTemplates(ctx, env, ns, len(sizes)); err != nil {
			return Run{}, err
		}
	case kindGPU:
		for i := 0; i < int(c.gpuFrac*float64(trays)); i++ {
			pods = append(pods, harness.GPUPod(ns, fmt.Sprintf("gpu-%d", i), 4, p))
		}
	case kindPlain:
		for i := 0; i < min(c.cpuPods, 2*trays); i++ {
			pods = append(pods, harness.GPUPod(ns, fmt.Sprintf("cpu-%d", i), 0, p))
		}
	default:
		return Run{}, fmt.Errorf("unknown workload %q", kind)
	}

	// Record when each pod gets its node from a watch, not from polling.
	factory := informers.NewSharedInformerFactoryWithOptions(cl, 0, informers.WithNamespace(ns))
	var mu sync.Mutex
	boundAt := map[string]time.Time{}
	note := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			mu.Lock()
			if _, seen := boundAt[pod.Name]; !seen {
				boundAt[pod.Name] = time.Now()
			}
			mu.Unlock()
		}
	}
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }}); err != nil {
		return Run{}, err
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	factory.Start(wctx.Done())
	factory.WaitForCacheSync(wctx.Done())

	before, err := harness.ScrapeHistograms(ctx, sched.MetricsURL(), histogramFamilies...)
	if err != nil {
		return Run{}, fmt.Errorf("metrics of %s: %w", sched.Name, err)
	}
	if c.profile > 0 && kind == kindCD && rep == 0 && trays >= c.sizes[len(c.sizes)-1] {
		path := filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s-%d.pprof", short, kind, trays))
		go func() {
			if err := harness.Fetch(ctx, sched.ProfileURL(c.profile), path); err != nil {
				fmt.Fprintf(os.Stderr, "profile of %s: %v\n", sched.Name, err)
				return
			}
			fmt.Printf("  wrote %s (go tool pprof -top %s)\n", path, path)
		}()
	}
	start := time.Now()
	work := make(chan *corev1.Pod)
	var wg sync.WaitGroup
	var createErr error
	var errOnce sync.Once
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pod := range work {
				if _, err := cl.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errOnce.Do(func() { createErr = err })
				}
			}
		}()
	}
	for _, pod := range pods {
		work <- pod
	}
	close(work)
	wg.Wait()
	if createErr != nil {
		return Run{}, createErr
	}
	// Done when every pod is bound, or nothing was bound for 10s (the baseline can strand
	// domains that started where they cannot finish).
	deadline := start.Add(c.timeout)
	for {
		mu.Lock()
		n := len(boundAt)
		var last time.Time
		for _, t := range boundAt {
			if t.After(last) {
				last = t
			}
		}
		mu.Unlock()
		if n == len(pods) || (n > 0 && time.Since(last) > 10*time.Second) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, err := harness.ScrapeHistograms(ctx, sched.MetricsURL(), histogramFamilies...)
	if err != nil {
		return Run{}, err
	}
	rss, err := sched.RSSBytes()
	if err != nil {
		return Run{}, err
	}
	stopWatch()
	mu.Lock()
	r := Run{Trays: trays, Kind: kind, Profile: string(p), Rep: rep, Pods: len(pods), Bound: len(boundAt), RSSMiB: round(float64(rss) / (1 << 20))}
	var last time.Time
	for _, t := range boundAt {
		if t.After(last) {
			last = t
		}
	}
	mu.Unlock()
	if r.Bound > 0 {
		r.Seconds = last.Sub(start).Seconds()
		r.PodsPerSec = float64(r.Bound) / r.Seconds
	}
	delta := after.Sub(before)
	ms := func(h harness.Histogram) Quantiles {
		return Quantiles{Count: h.Count, P50: round(1000 * h.Quantile(0.5)), P99: round(1000 * h.Quantile(0.99))}
	}
	att := delta.Merge("scheduler_scheduling_attempt_duration_seconds", "result=scheduled")
	r.AttemptP50, r.AttemptP99 = round(1000*att.Quantile(0.5)), round(1000*att.Quantile(0.99))
	r.Extension = map[string]Quantiles{}
	for _, ep := range []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve", "PreBind", "Bind"} {
		if h := delta.Merge("scheduler_framework_extension_point_duration_seconds", "extension_point="+ep+","); h.Count > 0 {
			r.Extension[ep] = ms(h)
		}
	}
	r.Plugins = map[string]Quantiles{}
	for _, plugin := range []string{"ComputeDomainPlacement", "DynamicResources", "InterPodAffinity", "NodeResourcesFit"} {
		for _, ep := range []string{"PreFilter", "Filter", "PreScore", "Score", "Reserve"} {
			h := delta.Merge("scheduler_plugin_execution_duration_seconds", "extension_point="+ep+",", "plugin="+plugin+",")
			if h.Count > 0 {
				r.Plugins[plugin+"/"+ep] = ms(h)
			}
		}
	}
	return r, cleanup(ctx, env, prep, ns)
}

var histogramFamilies = []string{
	"scheduler_scheduling_attempt_duration_seconds",
	"scheduler_framework_extension_point_duration_seconds",
	"scheduler_plugin_execution_duration_seconds",
}

func round(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return math.Round(v*1000) / 1000
}

func waitTemplates(ctx context.Context, env *harness.Env, ns string, _ int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		cds, err := env.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		tmpls, err := env.CP.Client.ResourceV1().ResourceClaimTemplates(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(tmpls.Items) == len(cds.Items) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("templates in %s did not appear", ns)
}

// cleanup deletes the run's pods and domains and waits until their claims are gone and every
// node label has been removed, so the next run starts on an empty fleet.
func cleanup(ctx context.Context, env *harness.Env, prep *harness.PrepareEmulator, ns string) error {
	cl := env.CP.Client
	// One delete per pod from 8 workers: a DeleteCollection of thousands of pods outlives the
	// API server's request timeout.
	pods, err := cl.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	work := make(chan string)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				_ = cl.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			}
		}()
	}
	for _, p := range pods.Items {
		work <- p.Name
	}
	close(work)
	wg.Wait()
	if err := env.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	deadline := time.Now().Add(3 * time.Minute)
	var state string
	for time.Now().Before(deadline) {
		pods, err := cl.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		claims, err := cl.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		// The emulated kubelet must also have unprepared every claim: pods deleted with grace
		// period 0 skip the kubelet, which catches up afterwards (as a real one does).
		held := len(prep.ChannelHolders())
		if len(pods.Items) == 0 && len(claims.Items) == 0 && len(prep.Labels()) == 0 && held == 0 {
			return nil
		}
		state = fmt.Sprintf("%d pods, %d claims, %d labelled nodes, %d prepared channels left",
			len(pods.Items), len(claims.Items), len(prep.Labels()), held)
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("namespace %s did not drain: %s", ns, state)
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
	CdplaceBound  string  `json:"cdplaceBound"`
	BaselineBound string  `json:"baselineBound"`
}

func slicesMax(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
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
	bound := map[key]map[string]string{}
	for _, r := range runs {
		k := key{r.Trays, r.Kind}
		if rate[k] == nil {
			keys = append(keys, k)
			rate[k] = map[string][]float64{}
			bound[k] = map[string]string{}
		}
		rate[k][r.Profile] = append(rate[k][r.Profile], r.PodsPerSec)
		bound[k][r.Profile] += fmt.Sprintf("%d/%d ", r.Bound, r.Pods)
	}
	var sums []Summary
	var b strings.Builder
	b.WriteString("| trays | workload | cdplace pods/s (median) | baseline pods/s (median) | ratio | stock, all nodes pods/s | cdplace / all nodes | cdplace bound | baseline bound |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range keys {
		cd, base := median(rate[k][string(harness.Cdplace)]), median(rate[k][string(harness.Baseline)])
		s := Summary{Trays: k.trays, Kind: k.kind, Cdplace: round(cd), Baseline: round(base),
			CdplaceBound: strings.TrimSpace(bound[k][string(harness.Cdplace)]), BaselineBound: strings.TrimSpace(bound[k][string(harness.Baseline)])}
		if base > 0 {
			s.Ratio = round(cd / base)
		}
		all, allCol, allRatio := median(rate[k][string(allNodes)]), "–", "–"
		if all > 0 {
			s.AllNodes, s.RatioAllNodes = round(all), round(cd/all)
			allCol, allRatio = fmt.Sprintf("%.1f", all), fmt.Sprintf("%.2f", cd/all)
		}
		sums = append(sums, s)
		fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %.2f | %s | %s | %s | %s |\n", s.Trays, s.Kind, s.Cdplace, s.Baseline, s.Ratio,
			allCol, allRatio, s.CdplaceBound, s.BaselineBound)
	}
	b.WriteString("\n| trays | workload | profile | rep | pods/s | scheduler RSS MiB | attempt p50/p99 ms | cdplace PreFilter p50/p99 ms | cdplace Filter p50/p99 | cdplace Score p50/p99 | DynamicResources PreFilter p50/p99 | DynamicResources Filter p50/p99 |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	q := func(r Run, k string) string {
		v, ok := r.Plugins[k]
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.3f / %.3f", v.P50, v.P99)
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "| %d | %s | %s | %d | %.1f | %.0f | %.1f / %.1f | %s | %s | %s | %s | %s |\n", r.Trays, r.Kind, r.Profile, r.Rep, r.PodsPerSec,
			r.RSSMiB, r.AttemptP50, r.AttemptP99, q(r, "ComputeDomainPlacement/PreFilter"), q(r, "ComputeDomainPlacement/Filter"),
			q(r, "ComputeDomainPlacement/Score"), q(r, "DynamicResources/PreFilter"), q(r, "DynamicResources/Filter"))
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
