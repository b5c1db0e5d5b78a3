package main

// One run of a workload through one scheduler on a fleet: creating the pods, waiting for them to
// bind, reading the scheduler's histograms and memory, and cleaning up.

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
	"github.com/cdplace/cdplace/e2e/harness"
)

func oneRun(ctx context.Context, env *harness.Env, extra map[harness.Profile]*harness.Scheduler, prep *harness.PrepareEmulator, c config, fleet *harness.Fleet, kind string, p harness.Profile, rep int) (Run, error) {
	trays := len(fleet.Nodes)
	short := "cdp"
	sched := env.Cdplace
	switch p {
	case harness.Baseline:
		short, sched = "base", env.Baseline
	case allNodes:
		short, sched = "all", extra[p]
	case stockTwin:
		short, sched = "twin", extra[p]
	}
	ns := fmt.Sprintf("tp%d-%s-%s-%d", trays, kind, short, rep)
	// The run starts once the control plane and every scheduler are idle again, so that no
	// process still digesting the last run (a scheduler its pods' deletions, the API server its
	// watch events) takes the shared cores from this one. (In the runs measured so far they were
	// idle within 0.5–1 s of the cleanup; the wait is a guard, and the JSON records it.)
	settleWait, settled := harness.Settle(ctx, env.CP.PIDs(), 500*time.Millisecond, settleBusy, 30*time.Second)
	if !settled {
		fmt.Printf("  note: the control plane was still busy after %.0fs; %s starts anyway\n", settleWait.Seconds(), ns)
	}
	rssBefore, err := sched.RSSBytes()
	if err != nil {
		return Run{}, err
	}
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
	case kindDRAGPU:
		if _, err := cl.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, harness.GPUClaimTemplate(ns, "four-gpus", 4), metav1.CreateOptions{}); err != nil {
			return Run{}, err
		}
		for i := 0; i < int(c.gpuFrac*float64(trays)); i++ {
			pods = append(pods, harness.DRAGPUPod(ns, fmt.Sprintf("dra-%d", i), "four-gpus", p))
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
	steerBefore, err := harness.ScrapeCounters(ctx, sched.MetricsURL(), steeringFamily, scoreFamily)
	if err != nil {
		return Run{}, fmt.Errorf("metrics of %s: %w", sched.Name, err)
	}
	// The profile's plugin share, once it is written (waited for before the run returns).
	var profiled chan *cpuprofile.Share
	if c.profile > 0 && rep == 0 && trays >= c.sizes[len(c.sizes)-1] {
		path := filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s-%d.pprof", short, kind, trays))
		profiled = make(chan *cpuprofile.Share, 1)
		go func() {
			defer close(profiled)
			if err := harness.Fetch(ctx, sched.ProfileURL(c.profile), path); err != nil {
				fmt.Fprintf(os.Stderr, "profile of %s: %v\n", sched.Name, err)
				return
			}
			share, err := cpuprofile.Analyze(path)
			if err != nil {
				fmt.Fprintf(os.Stderr, "profile of %s: %v\n", sched.Name, err)
				return
			}
			fmt.Printf("  wrote %s (go tool pprof -top %s): plugin %.2f%% of the process's CPU\n", path, path, 100*share.OfTotal())
			profiled <- &share
		}()
	}
	var rec *perfRecording
	if c.perf {
		if rec, err = startPerf(sched.PID(), filepath.Join(c.out, fmt.Sprintf("perf-%s-%s-%d-%d.data", short, kind, trays, rep))); err != nil {
			return Run{}, err
		}
		rec.keep = c.keepPerf
		defer rec.abandon()
	}
	cpuBefore, err := sched.CPUTime()
	if err != nil {
		return Run{}, err
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
	cpuAfter, err := sched.CPUTime()
	if err != nil {
		return Run{}, err
	}
	var perfShare cpuprofile.PerfShare
	if rec != nil {
		if perfShare, err = rec.stop(); err != nil {
			return Run{}, err
		}
	}
	after, err := harness.ScrapeHistograms(ctx, sched.MetricsURL(), histogramFamilies...)
	if err != nil {
		return Run{}, err
	}
	steerAfter, err := harness.ScrapeCounters(ctx, sched.MetricsURL(), steeringFamily, scoreFamily)
	if err != nil {
		return Run{}, err
	}
	var share *cpuprofile.Share
	if profiled != nil {
		share = <-profiled
	}
	rss, err := sched.RSSBytes()
	if err != nil {
		return Run{}, err
	}
	peak, err := sched.PeakRSSBytes()
	if err != nil {
		return Run{}, err
	}
	stopWatch()
	mu.Lock()
	r := Run{Trays: trays, Kind: kind, Profile: string(p), Rep: rep, Namespace: ns, SettleSeconds: round(settleWait.Seconds()), Pods: len(pods), Bound: len(boundAt), RSSMiB: round(float64(rss) / (1 << 20)),
		RSSBeforeMiB: round(float64(rssBefore) / (1 << 20)), PeakRSSMiB: round(float64(peak) / (1 << 20))}
	r.CliquesUsed = cliquesUsed(inf.GetStore().List(), fleet)
	if share != nil {
		r.PluginCPU = round(100 * share.OfTotal())
	}
	if perfShare.Samples > 0 {
		r.PerfSamples, r.PerfPluginPercent = perfShare.Samples, round(perfShare.Percent())
		r.PerfPhases, r.PerfPluginPhases = perfShare.Phase, perfShare.PluginPhase
	}
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
		r.CPUmsPerPod = round(float64((cpuAfter - cpuBefore).Microseconds()) / 1000 / float64(r.Bound))
	}
	r.SteeringAsked = steerAfter[steeringFamily+"{answer=asked}"] - steerBefore[steeringFamily+"{answer=asked}"]
	r.SteeringReused = steerAfter[steeringFamily+"{answer=reused}"] - steerBefore[steeringFamily+"{answer=reused}"]
	r.ScoreRan = steerAfter[scoreFamily+"{score=scored}"] - steerBefore[scoreFamily+"{score=scored}"]
	r.ScoreSkipped = steerAfter[scoreFamily+"{score=skipped}"] - steerBefore[scoreFamily+"{score=skipped}"]
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
	// Refusals are counted once the namespace drained: a pod bound near the run's end is
	// prepared (or refused) after it.
	err = cleanup(ctx, env, prep, ns)
	for _, f := range prep.Refusals() {
		if f.Namespace == ns {
			r.PrepareRefusals++
		}
	}
	return r, err
}

// cliquesUsed counts the cliques the run's bound pods landed in: for plain whole-tray pods on an
// empty fleet, steering's measure (it fills broken cliques first; the stock scores spread).
func cliquesUsed(objs []any, fleet *harness.Fleet) int {
	used := map[string]bool{}
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			if c := fleet.CliqueOf[pod.Spec.NodeName]; c != "" {
				used[c] = true
			}
		}
	}
	return len(used)
}

// steeringFamily counts plain-pod steering answers (cdplace profile only).
const steeringFamily = "cdplace_steering_answers_total"

// scoreFamily counts the cycles the plugin scored and those it left Score out of, every feasible
// node scoring alike (cdplace profile only).
const scoreFamily = "cdplace_score_cycles_total"

var histogramFamilies = []string{
	"scheduler_scheduling_attempt_duration_seconds",
	"scheduler_framework_extension_point_duration_seconds",
	"scheduler_plugin_execution_duration_seconds",
}

// settleBusy is how much of one core the control plane and the schedulers together may use
// over half a second for a run to start (idle, they use a few percent).
const settleBusy = 0.15

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
