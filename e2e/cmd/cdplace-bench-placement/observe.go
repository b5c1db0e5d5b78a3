package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/cdplace/cdplace/e2e/harness"
)

// ---- observation ----

func (r *runner) onPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.notePreemption(pod)
	if cd := pod.Labels[harness.DomainLabel]; cd != "" {
		r.refreshCD(cd)
		return
	}
	r.refreshPlain(pod.Name)
}

// refreshCD recomputes a domain's pods from the informer's cache; the first time every pod is
// bound starts its lifetime.
func (r *runner) refreshCD(name string) {
	pods, err := r.pods.Pods(r.ns).List(labels.SelectorFromSet(labels.Set{harness.DomainLabel: name}))
	if err != nil {
		return
	}
	n, bound, running := 0, 0, 0
	var cliques []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		n++
		if p.Spec.NodeName == "" {
			continue
		}
		bound++
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
		if cl := r.fleet.CliqueOf[p.Spec.NodeName]; !containsStr(cliques, cl) {
			cliques = append(cliques, cl)
		}
	}
	sort.Strings(cliques)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.cds[name]
	if rec == nil || rec.departed || r.ended {
		return
	}
	rec.pods, rec.bound, rec.running, rec.cliques = n, bound, running, cliques
	rec.maxCliques = max(rec.maxCliques, len(cliques))
	if len(cliques) > 1 {
		rec.split = true
	}
	if !rec.full() {
		if rec.waitingSince.IsZero() {
			rec.waitingSince = now
		}
		return
	}
	rec.waitingSince = time.Time{}
	rec.preempting = false
	if rec.boundAt.IsZero() {
		rec.boundAt = now
		r.afterLocked(r.real(rec.Lifetime), func() { r.departCD(rec) })
	}
	if running == rec.Size && rec.runningAt.IsZero() {
		rec.runningAt = now
	}
}

// notePreemption counts a pod the scheduler preempted: a DisruptionTarget condition with reason
// PreemptionByScheduler, which both default preemption and cdplace's gang preemption set before
// deleting a victim (a tray failure here deletes pods without one; the pod garbage collector's
// DeletionByPodGC is not preemption). Each pod counts once; a domain counts one preemption per
// eviction of it (reset once all its pods are bound again). The GPU-hours evicted are the GPUs of
// the victim pod times the trace time since it was bound (PodScheduled).
func (r *runner) notePreemption(pod *corev1.Pod) {
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			cond = c
		}
	}
	if cond == nil {
		return
	}
	now := time.Now()
	held := 0.0
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && pod.Spec.NodeName != "" {
			held = max(0, now.Sub(c.LastTransitionTime.Time).Seconds()) * r.opts.Scale / 3600
		}
	}
	gpuHours := float64(gpuRequest(pod)) * held
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended || r.preempted[pod.UID] {
		return
	}
	r.preempted[pod.UID] = true
	if cd := pod.Labels[harness.DomainLabel]; cd != "" {
		rec := r.cds[cd]
		if rec == nil {
			return
		}
		if !rec.preempting {
			rec.preempting = true
			rec.preemptions++
		}
		rec.preemptedPods++
		rec.gpuHoursEvicted += gpuHours
		return
	}
	if rec := r.plain[pod.Name]; rec != nil {
		rec.preempted = true
		r.plainGPUHoursEvicted += gpuHours
	}
}

func (r *runner) refreshPlain(name string) {
	pod, err := r.pods.Pods(r.ns).Get(name)
	if err != nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.plain[name]
	if rec == nil || rec.departed || r.ended || !rec.boundAt.IsZero() {
		return
	}
	rec.boundAt = time.Now()
	r.afterLocked(r.real(rec.Lifetime), func() { r.departPlain(rec) })
}

func gpuRequest(p *corev1.Pod) int {
	n := 0
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[harness.GPUResource]; ok {
			n += int(q.Value())
		}
	}
	return n
}

// sample observes the fleet now: allocation on healthy trays, stranded GPUs, the domains'
// states, and the offline packing bound of the domains and plain pods present.
func (r *runner) sample() Sample {
	now := time.Now()
	stranded, err := harness.StrandedGPUs(r.ctx, r.c, gpusPerTray)
	if err != nil {
		stranded = -1
	}
	nodeLabels := r.prep.Labels()
	refusals := len(r.prep.Refusals())
	pods, _ := r.pods.Pods(r.ns).List(labels.Everything())

	rss, journal, goroutines, heap := r.memory()
	r.mu.Lock()
	s := Sample{T: r.since(now), StrandedGPUs: stranded, PrepareRefusals: refusals, Load1: load1(),
		SchedulerRSSMiB: rss, JournalLength: journal, SchedulerGoroutines: goroutines, SchedulerHeapMiB: heap}
	s.TraceT = s.T * r.opts.Scale
	occupied := map[string]bool{}
	for _, p := range pods {
		node := p.Spec.NodeName
		if node == "" || p.DeletionTimestamp != nil || !r.healthy[node] {
			continue
		}
		g := gpuRequest(p)
		if g == 0 {
			continue
		}
		s.AllocGPUs += g
		occupied[node] = true
		if cd := p.Labels[harness.DomainLabel]; cd != "" {
			if rec := r.cds[cd]; rec != nil && rec.full() {
				s.UsefulGPUs += g
			} else {
				s.IncompleteGPUs += g
			}
		} else {
			s.UsefulGPUs += g
		}
	}
	s.AllocTrays = len(occupied)
	caps, lagCaps, freeNow := map[string]int{}, map[string]int{}, map[string]int{}
	for _, n := range r.fleet.Nodes {
		if !r.healthy[n] {
			continue
		}
		s.HealthyTrays++
		cl := r.fleet.CliqueOf[n]
		caps[cl]++
		if nodeLabels[n] != "" && !occupied[n] {
			s.LabelHeldTrays++
			continue
		}
		lagCaps[cl]++
		if !occupied[n] {
			freeNow[cl]++
		}
	}
	if s.HealthyTrays > 0 {
		s.AllocFrac = float64(s.AllocGPUs) / float64(s.HealthyTrays*gpusPerTray)
	}
	r.markStalls(now, freeNow)
	var items, waiting []int
	nowExtra := 0
	for _, rec := range r.cdOrder {
		if rec.departed {
			continue
		}
		s.PresentCDs++
		items = append(items, rec.Size)
		switch {
		case rec.full():
			s.RunningCDs++
		default:
			s.WaitingCDs++
			s.WaitingSizes = append(s.WaitingSizes, rec.Size)
			if rec.bound > 0 && len(rec.cliques) > 0 {
				s.PartialCDs++
				home := rec.cliques[0]
				take := max(0, min(rec.Size-rec.bound, freeNow[home]))
				freeNow[home] -= take
				nowExtra += take
			} else {
				waiting = append(waiting, rec.Size)
			}
			if !rec.waitingSince.IsZero() && now.Sub(rec.waitingSince) >= r.opts.SatGrace {
				s.Saturated = true
			}
		}
	}
	plainWaiting := 0
	for _, p := range r.plainOrder {
		if !p.departed {
			s.PlainPresent++
			if p.boundAt.IsZero() {
				plainWaiting++
			}
		}
	}
	var capList, lagList []int
	freeSum := 0
	for _, cl := range r.fleet.Cliques {
		capList = append(capList, caps[cl])
		lagList = append(lagList, lagCaps[cl])
		s.FreeTrays = append(s.FreeTrays, freeNow[cl])
		freeSum += freeNow[cl]
	}
	r.mu.Unlock()
	// The packing may search for a while; the informer's handlers need not wait for it.
	pk := PackCliques(items, capList)
	s.BoundTrays = FillPlain(pk.Trays, s.PlainPresent, s.HealthyTrays)
	s.BoundUpper = FillPlain(pk.UpperBound, s.PlainPresent, s.HealthyTrays)
	s.BoundProven = pk.Proven
	lag := PackCliques(items, lagList)
	s.LagAwareBound = FillPlain(lag.Trays, s.PlainPresent, s.HealthyTrays-s.LabelHeldTrays)
	nowPk := PackCliques(waiting, s.FreeTrays)
	s.NowBound = s.AllocTrays + nowExtra + FillPlain(nowPk.Trays, plainWaiting, freeSum)
	return s
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// load1 is the 1-minute load average from /proc/loadavg (0 where there is none).
func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// markStalls marks every present domain that has had pods bound and pods pending for longer than
// StallGrace while some clique could hold it whole: its own clique's free trays plus what it holds
// there, or another clique's free trays less the configuration's reserveTraysPerClique (a domain
// starts only where the reserve stays free). A domain that lost pods to a tray failure is left
// out: its replacements wait for its own clique by design. The caller holds r.mu; free is the
// idle, unlabelled trays per clique.
func (r *runner) markStalls(now time.Time, free map[string]int) {
	for _, rec := range r.cdOrder {
		if rec.departed || rec.bound == 0 || rec.pods <= rec.bound || rec.full() {
			rec.partSince = time.Time{}
			continue
		}
		if rec.partSince.IsZero() {
			rec.partSince = now
			continue
		}
		if rec.stalled || rec.replacements > 0 || now.Sub(rec.partSince) <= r.opts.StallGrace {
			continue
		}
		home := ""
		if len(rec.cliques) == 1 {
			home = rec.cliques[0]
		}
		for _, cl := range r.fleet.Cliques {
			room := free[cl] - r.cfg.Reserve
			if cl == home {
				room = free[cl] + rec.bound
			}
			if room >= rec.Size {
				rec.stalled = true
				rec.stallNote = fmt.Sprintf("at %.1fs: %d of %d pods bound in clique %s (%d free there), %d pending, for over %v; clique %s has %d free trays",
					r.since(now), rec.bound, rec.Size, home, free[home], rec.pods-rec.bound, r.opts.StallGrace, cl, free[cl])
				break
			}
		}
	}
}

// memoryEvery: the journal gauge is scraped every this many samples (a scrape costs the
// scheduler a little; RSS, read from /proc, is taken every sample).
const memoryEvery = 10

// memory is the cdplace scheduler's RSS in MiB and, every memoryEvery calls, its journal
// length, goroutines and Go heap in use (MiB: RSS less this is wasmtime's and the runtime's
// own); zeros without a cdplace scheduler or when a read fails.
func (r *runner) memory() (rssMiB, journal, goroutines, heapMiB float64) {
	s := r.opts.Scheduler
	if s == nil {
		return 0, 0, 0, 0
	}
	if b, err := s.RSSBytes(); err == nil {
		rssMiB = float64(b) / (1 << 20)
	}
	r.memorySamples++
	if r.memorySamples%memoryEvery == 1 {
		if g, err := harness.ScrapeGauges(r.ctx, s.MetricsURL(), "cdplace_journal_length", "go_goroutines", "go_memstats_heap_inuse_bytes"); err == nil {
			for k, v := range g {
				switch {
				case strings.HasPrefix(k, "go_goroutines{"):
					goroutines += v
				case strings.HasPrefix(k, "go_memstats_heap_inuse_bytes{"):
					heapMiB += v / (1 << 20)
				default:
					journal += v
				}
			}
		}
	}
	return rssMiB, journal, goroutines, heapMiB
}
