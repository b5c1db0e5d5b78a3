package e2e

import (
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// settleWindow is the plugin's sizeSettleSeconds as the shipped configuration runs it (the
// default, 5 s): how long a domain with no size source waits for its set of pods to stop growing.
const settleWindow = 5 * time.Second

// stallGrace is how long a domain may have some pods bound and others pending: the settle window
// plus a scheduling cycle for its pods. Longer than that, while some clique could hold the whole
// domain, it holds trays it cannot use and breaks cdplace's promise.
const stallGrace = settleWindow + 5*time.Second

// domainWatch samples a scenario's namespace every 250 ms while the scenario runs and records
// every breach of all-or-nothing (a domain with pods bound and pods pending for longer than
// stallGrace while a clique could hold it whole, or, for one larger than a clique, while the
// fleet had room for the rest) and of one clique per domain (bound pods of one domain in two
// cliques, ever; a domain larger than a clique in more than the fewest cliques that hold it).
type domainWatch struct {
	s     *scenario
	sizes map[string]int
	stop  chan struct{}
	done  chan struct{}

	mu           sync.Mutex
	partialSince map[string]time.Time
	stalls       map[string]string
	reported     map[string]bool // stalls a waitFor has already failed the test with
	cliques      map[string]map[string]bool
	samples      int
	listErr      error
}

// watchDomains starts the watch; sizes is each domain's intended size (what its owner asks for).
// A domain not in sizes is taken to be as large as its pods. The watch stops and reports, as
// test errors, at the end of the test.
func (s *scenario) watchDomains(sizes map[string]int) *domainWatch {
	w := &domainWatch{
		s: s, sizes: sizes, stop: make(chan struct{}), done: make(chan struct{}),
		partialSince: map[string]time.Time{}, stalls: map[string]string{}, cliques: map[string]map[string]bool{},
		reported: map[string]bool{},
	}
	s.watch = w
	go w.run()
	s.t.Cleanup(w.check)
	return w
}

func (w *domainWatch) run() {
	defer close(w.done)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		w.sample(time.Now())
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

// sample looks at every pod of the namespace once.
func (w *domainWatch) sample(now time.Time) {
	pods, err := w.s.e.CP.Client.CoreV1().Pods(w.s.ns).List(w.s.ctx, metav1.ListOptions{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.s.ctx.Err() == nil {
			w.listErr = err
		}
		return
	}
	w.samples++
	type dom struct {
		pods, bound int
		in          map[string]int // bound pods per clique
	}
	doms := map[string]*dom{}
	occupied := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.Spec.NodeName != "" && requestsGPUs(p) {
			occupied[p.Spec.NodeName] = true
		}
		cd := p.Labels[harness.DomainLabel]
		if cd == "" {
			continue
		}
		d := doms[cd]
		if d == nil {
			d = &dom{in: map[string]int{}}
			doms[cd] = d
		}
		d.pods++
		if p.Spec.NodeName != "" {
			d.bound++
			cl := w.s.fleet.CliqueOf[p.Spec.NodeName]
			d.in[cl]++
			if w.cliques[cd] == nil {
				w.cliques[cd] = map[string]bool{}
			}
			w.cliques[cd][cl] = true
		}
	}
	free := map[string]int{}
	for _, n := range w.s.fleet.Nodes {
		if !occupied[n] {
			free[w.s.fleet.CliqueOf[n]]++
		}
	}
	for cd, d := range doms {
		size, ok := w.sizes[cd]
		if !ok {
			size = d.pods
		}
		// Part-bound: some pods bound, some pending, fewer bound than the size. A domain whose
		// remaining pods do not exist yet holds nothing it cannot use: its trays are counted.
		if d.bound == 0 || d.bound >= size || d.pods == d.bound {
			delete(w.partialSince, cd)
			continue
		}
		since, seen := w.partialSince[cd]
		if !seen {
			w.partialSince[cd] = now
			continue
		}
		if _, reported := w.stalls[cd]; reported || now.Sub(since) <= stallGrace {
			continue
		}
		if per := w.s.fleet.Spec.TraysPerClique; size > per {
			// Larger than a clique (segments): part-bound while the fleet has room for the rest.
			room := d.bound
			for _, cl := range w.s.fleet.Cliques {
				room += free[cl]
			}
			if room >= size {
				w.stalls[cd] = fmt.Sprintf("ComputeDomain %s (larger than a clique) had %d of its %d pods bound (in cliques %v) for more than %v, while the fleet had room for the rest",
					cd, d.bound, size, keys(d.in), stallGrace)
			}
			continue
		}
		for _, cl := range w.s.fleet.Cliques {
			if free[cl]+d.in[cl] >= size {
				w.stalls[cd] = fmt.Sprintf("ComputeDomain %s had %d of its %d pods bound (%d pods exist, bound in cliques %v) for more than %v, while clique %s could hold it whole (%d free trays)",
					cd, d.bound, size, d.pods, keys(d.in), stallGrace, cl, free[cl])
				break
			}
		}
	}
}

// stall returns a breach of all-or-nothing not reported yet, or "".
func (w *domainWatch) stall() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cd := range keys(w.stalls) {
		if !w.reported[cd] {
			w.reported[cd] = true
			return w.stalls[cd]
		}
	}
	return ""
}

// check stops the watch and reports what it saw.
func (w *domainWatch) check() {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.s.t
	if w.listErr != nil {
		t.Errorf("domain watch: %v", w.listErr)
	}
	if w.samples == 0 {
		t.Errorf("domain watch took no sample")
	}
	for _, cd := range keys(w.stalls) {
		if !w.reported[cd] {
			t.Errorf("all-or-nothing broken: %s", w.stalls[cd])
		}
	}
	for _, cd := range keys(w.cliques) {
		// A domain larger than a clique spans as segments, in the fewest cliques (on these
		// uniform fleets: its size over the clique's trays, rounded up); any other, one clique.
		fewest := 1
		if size, per := w.sizes[cd], w.s.fleet.Spec.TraysPerClique; per > 0 && size > per {
			fewest = (size + per - 1) / per
		}
		if len(w.cliques[cd]) > fewest {
			t.Errorf("ComputeDomain %s had pods bound in %d cliques (want at most %d): %v", cd, len(w.cliques[cd]), fewest, keys(w.cliques[cd]))
		}
	}
}

func requestsGPUs(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[harness.GPUResource]; ok && !q.IsZero() {
			return true
		}
	}
	return false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
