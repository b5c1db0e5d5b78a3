package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
)

// runOptions are the knobs shared by every configuration's run.
type runOptions struct {
	Scale    float64       // trace seconds per real second
	LabelLag time.Duration // the Prepare emulator's node-label lag (real time)
	Sample   time.Duration // sampling period (real time)
	// SatGrace: a sample is saturated when some present ComputeDomain has not had all its pods
	// bound for at least this long (longer than a scheduling pass, so a domain that just arrived
	// in a fleet with room does not count).
	SatGrace time.Duration
	// StallGrace: a domain with pods bound and pods pending for longer than this, while some
	// clique could hold it whole, has stalled part-bound (the plugin's settle window plus a
	// scheduling cycle).
	StallGrace time.Duration
	Progress   time.Duration // how often a progress line is printed
	// UntilDone: after the horizon, keep running until every domain and plain pod has completed
	// (or failed to be created), up to Cap trace seconds from the start; false: withdraw
	// everything at the horizon.
	UntilDone bool
	Cap       float64
	// BaselineCap, when positive, is the stock baseline's Cap instead (it deadlocks on Prepare
	// refusals and part-bound domains, so waiting 4 × the horizon for it tells nothing more).
	BaselineCap float64
	// DeadlineFactor, when positive, gives every pod spec.activeDeadlineSeconds of this many
	// times its lifetime (real time) plus 5 s, and a 1 s grace period (the time-scaled
	// equivalent of a real job's 30 s): the runtime bounds EASY backfill reads.
	DeadlineFactor float64
	// Scheduler is the process behind the cdplace profile (its RSS and journal are sampled);
	// nil for the baseline.
	Scheduler *harness.Scheduler
}

const gpusPerTray = 4

// cdRec is one ComputeDomain of the trace as the run saw it.
type cdRec struct {
	CDArrival
	created, boundAt, runningAt, departedAt time.Time
	waitingSince                            time.Time // zero while all pods are bound
	partSince                               time.Time // zero unless some pods are bound and some pending
	stallNote                               string    // what the sample that found the stall saw
	departed, completed, split, stalled     bool
	pods, bound, running                    int
	cliques                                 []string
	maxCliques                              int
	replacements                            int
	err                                     string
	// Preemption (see notePreemption): evictions of the whole domain, its pods evicted and the
	// GPU-hours (trace time) they had held; preempting is set from the first victim pod until
	// every pod is bound again.
	preemptions, preemptedPods int
	gpuHoursEvicted            float64
	preempting                 bool
}

func (c *cdRec) full() bool { return c.pods == c.Size && c.bound == c.Size }

// plainRec is one pod without a ComputeDomain.
type plainRec struct {
	PlainArrival
	created, boundAt, departedAt time.Time
	departed, completed, killed  bool
	preempted                    bool
	err                          string
}

type failureRec struct {
	Node       string   `json:"node"`
	Clique     string   `json:"clique"`
	At         float64  `json:"at"`
	RepairedAt *float64 `json:"repairedAt,omitempty"`
	LostPods   []string `json:"lostPods"`
}

// runner replays the trace for one configuration on its own fleet and namespace.
type runner struct {
	ctx   context.Context
	env   *harness.Env
	c     kubernetes.Interface
	cfg   config
	opts  runOptions
	tr    Trace
	ns    string
	fleet *harness.Fleet
	prep  *harness.PrepareEmulator
	pods  corelisters.PodLister
	start time.Time

	mu         sync.Mutex
	ended      bool
	end        time.Time // when the run ended (the horizon, every domain done, or the cap)
	wg         sync.WaitGroup
	timers     []*time.Timer
	cds        map[string]*cdRec
	cdOrder    []*cdRec
	plain      map[string]*plainRec
	plainOrder []*plainRec
	healthy    map[string]bool
	failures   []*failureRec
	samples    []Sample
	errs       []string

	memorySamples        int                // calls of memory()
	preempted            map[types.UID]bool // victim pods seen (notePreemption)
	plainGPUHoursEvicted float64
}

// Sample is the fleet at one moment.
type Sample struct {
	T              float64 `json:"t"`      // real seconds since the trace started
	TraceT         float64 `json:"traceT"` // trace seconds
	HealthyTrays   int     `json:"healthyTrays"`
	AllocGPUs      int     `json:"allocatedGPUs"` // GPU requests of bound pods on healthy trays
	AllocFrac      float64 `json:"allocatedFraction"`
	AllocTrays     int     `json:"allocatedTrays"`
	UsefulGPUs     int     `json:"usefulGPUs"`           // of domains with every pod bound, and plain pods
	IncompleteGPUs int     `json:"gpusHeldByIncomplete"` // of domains with some but not all pods bound
	StrandedGPUs   int     `json:"strandedGPUs"`
	PresentCDs     int     `json:"presentCDs"`
	RunningCDs     int     `json:"runningCDs"` // every pod bound
	WaitingCDs     int     `json:"waitingCDs"`
	PartialCDs     int     `json:"partialCDs"`
	PlainPresent   int     `json:"plainPresent"`
	LabelHeldTrays int     `json:"labelHeldTrays"` // idle trays still carrying a ComputeDomain node label
	Saturated      bool    `json:"saturated"`
	BoundTrays     int     `json:"boundTrays"`
	BoundUpper     int     `json:"boundUpperTrays"`
	BoundProven    bool    `json:"boundProven"`
	LagAwareBound  int     `json:"lagAwareBoundTrays"`
	// NowBound: what could be allocated now without moving anything: the allocated trays, plus
	// the rest of every partly placed domain in its clique's free trays, plus the best packing of
	// the waiting domains into the free trays (idle, unlabelled) of each clique, plus waiting
	// plain pods in what is left.
	NowBound        int   `json:"noMigrationBoundTrays"`
	WaitingSizes    []int `json:"waitingSizes,omitempty"`
	FreeTrays       []int `json:"freeTraysPerClique"` // idle and unlabelled, less the rest of partly placed domains; fleet clique order
	PrepareRefusals int   `json:"prepareRefusals"`
	// Load1 is the machine's 1-minute load average: the control plane, the schedulers and this
	// program share the CPUs, so a busy machine delays scheduling (and shows here).
	Load1 float64 `json:"load1"`
	// The cdplace scheduler's resident set (MiB), the length of its policy journal
	// (cdplace_journal_length), its goroutines (go_goroutines: a backlog of Events or API
	// calls shows here first) and its Go heap in use (go_memstats_heap_inuse_bytes, MiB), for
	// the soak; 0 for the baseline, and the gauges are scraped every memoryEvery samples only
	// (0 in between).
	SchedulerRSSMiB     float64 `json:"schedulerRssMiB,omitempty"`
	JournalLength       float64 `json:"journalLength,omitempty"`
	SchedulerGoroutines float64 `json:"schedulerGoroutines,omitempty"`
	SchedulerHeapMiB    float64 `json:"schedulerHeapMiB,omitempty"`
}

func (r *runner) since(t time.Time) float64 { return t.Sub(r.start).Seconds() }

// allDone: every domain and plain pod of the trace has arrived and completed, been killed by a
// tray failure, or failed to be created.
func (r *runner) allDone() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cdOrder) < len(r.tr.CDs) || len(r.plainOrder) < len(r.tr.Plain) {
		return false
	}
	for _, c := range r.cdOrder {
		if !c.departed && c.err == "" {
			return false
		}
	}
	for _, p := range r.plainOrder {
		if !p.departed && p.err == "" {
			return false
		}
	}
	return true
}

// withDeadline gives pod spec ps the deadline of a pod living lifetime trace seconds, when
// DeadlineFactor asks for deadlines. A domain's lifetime counts from its last pod's binding,
// so the 5 s cover the spread between its first and last pod.
func (r *runner) withDeadline(ps *corev1.PodSpec, lifetime float64) {
	if r.opts.DeadlineFactor <= 0 {
		return
	}
	secs := int64(math.Ceil(r.real(lifetime).Seconds()*r.opts.DeadlineFactor)) + 5
	ps.ActiveDeadlineSeconds = &secs
	ps.TerminationGracePeriodSeconds = ptr.To[int64](1)
}

func (r *runner) real(traceSecs float64) time.Duration {
	return time.Duration(traceSecs / r.opts.Scale * float64(time.Second))
}

func (r *runner) errorf(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() == nil && !r.ended {
		r.errs = append(r.errs, fmt.Sprintf("%.1fs: ", r.since(time.Now()))+fmt.Sprintf(format, a...))
	}
}

func (r *runner) isEnded() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

// afterLocked runs fn after d unless the run has ended by then; the caller holds r.mu.
func (r *runner) afterLocked(d time.Duration, fn func()) {
	if r.ended {
		return
	}
	r.timers = append(r.timers, time.AfterFunc(d, func() {
		r.mu.Lock()
		if r.ended {
			r.mu.Unlock()
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		defer r.wg.Done()
		fn()
	}))
}

func (r *runner) after(d time.Duration, fn func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.afterLocked(d, fn)
}

// capFor is the cap (trace seconds) of cfg's run: BaselineCap for the stock baseline when set.
func (o runOptions) capFor(cfg config) float64 {
	if cfg.Profile == harness.Baseline && o.BaselineCap > 0 {
		return o.BaselineCap
	}
	return o.Cap
}

// runConfig replays tr for cfg: a fresh namespace, fleet and Prepare emulator, the trace in real
// time, a sample every opts.Sample, and at the horizon (with opts.UntilDone: once every domain
// and plain pod has completed, or at opts.Cap) everything still there withdrawn.
func runConfig(ctx context.Context, env *harness.Env, cfg config, tr Trace, opts runOptions) (*ConfigResult, error) {
	c := env.CP.Client
	ns := fmt.Sprintf("pq-s%d-%s", tr.Spec.Seed, cfg.Name)
	wallStart := time.Now()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("namespace %s: %w (use a fresh control plane per run)", ns, err)
	}
	spec := harness.FleetSpec{Name: ns, Racks: tr.Spec.Racks, CliquesPerRack: 1, TraysPerClique: tr.Spec.TraysPerClique, GPUsPerTray: gpusPerTray}
	fleet, err := harness.CreateFleet(ctx, c, spec)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	prep, err := harness.StartPrepareEmulator(runCtx, c, harness.PrepareOptions{UnprepareLabelLag: opts.LabelLag, Fleet: ns})
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	podInf := factory.Core().V1().Pods()
	r := &runner{
		ctx: runCtx, env: env, c: c, cfg: cfg, opts: opts, tr: tr, ns: ns, fleet: fleet, prep: prep,
		pods: podInf.Lister(), cds: map[string]*cdRec{}, plain: map[string]*plainRec{}, healthy: map[string]bool{},
		preempted: map[types.UID]bool{},
	}
	for _, n := range fleet.Nodes {
		r.healthy[n] = true
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    r.onPod,
		UpdateFunc: func(_, obj any) { r.onPod(obj) },
		DeleteFunc: r.onPod,
	}
	if _, err := podInf.Informer().AddEventHandler(handler); err != nil {
		return nil, err
	}
	factory.Start(runCtx.Done())
	for typ, ok := range factory.WaitForCacheSync(runCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("%v informer did not sync", typ)
		}
	}
	setup := time.Since(wallStart)

	r.start = time.Now()
	r.mu.Lock()
	for _, a := range tr.CDs {
		r.afterLocked(r.real(a.At), func() { r.arriveCD(a) })
	}
	for _, p := range tr.Plain {
		r.afterLocked(r.real(p.At), func() { r.arrivePlain(p) })
	}
	for _, f := range tr.Failures {
		r.afterLocked(r.real(f.At), func() { r.failTray(f) })
	}
	r.mu.Unlock()

	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tick := time.NewTicker(opts.Sample)
		defer tick.Stop()
		lastPrint := time.Now()
		for {
			select {
			case <-stopSampler:
				return
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			s := r.sample()
			r.mu.Lock()
			r.samples = append(r.samples, s)
			r.mu.Unlock()
			if time.Since(lastPrint) >= opts.Progress {
				lastPrint = time.Now()
				fmt.Printf("    %-17s t=%5.0fs  GPUs allocated %5.1f%%  running %3d  waiting %3d (partial %d)  bound %3d/%d trays  refusals %d\n",
					cfg.Name, s.T, 100*s.AllocFrac, s.RunningCDs, s.WaitingCDs, s.PartialCDs, s.BoundTrays, s.HealthyTrays, s.PrepareRefusals)
			}
		}
	}()

	horizon := r.real(tr.Spec.Horizon)
	select {
	case <-time.After(time.Until(r.start.Add(horizon))):
	case <-ctx.Done():
	}
	capped := false
	if opts.UntilDone {
		limit := r.start.Add(r.real(max(opts.capFor(cfg), tr.Spec.Horizon)))
		for ctx.Err() == nil && !r.allDone() {
			if time.Now().After(limit) {
				capped = true
				break
			}
			select {
			case <-time.After(250 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
	close(stopSampler)
	<-samplerDone
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	// The end of the trace: the last sample and the end state, then nothing more happens.
	final := r.sample()
	r.mu.Lock()
	r.samples = append(r.samples, final)
	r.ended = true
	r.end = time.Now()
	for _, t := range r.timers {
		t.Stop()
	}
	r.mu.Unlock()
	r.wg.Wait()
	res := r.result()
	res.Capped = capped
	res.SetupSeconds = setup.Seconds()

	withdrawStart := time.Now()
	if err := r.withdraw(); err != nil {
		res.Errors = append(res.Errors, "withdraw: "+err.Error())
	}
	cancel()
	delCtx, delCancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer delCancel()
	if err := harness.DeleteFleet(delCtx, c, fleet); err != nil {
		res.Errors = append(res.Errors, "delete fleet: "+err.Error())
	}
	res.TeardownSeconds = time.Since(withdrawStart).Seconds()
	res.WallSeconds = time.Since(wallStart).Seconds()
	return res, nil
}
