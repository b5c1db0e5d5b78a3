package computedomain

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The fleet status (guest/policy status.rs, a pure function of the policy's view) drives the
// fleet gauges and the Events on ComputeDomains. It is asked at most once per fleetInterval, by
// one goroutine, never per pod: it costs a PreFilter per pending domain. An unchanged view is
// asked again only after fleetMaxAge, because settle windows and reservations move with the clock.
// The status covers the whole view (4.4–4.8 ms a call at 5,004 trays, about half of it decoding
// in Go; BenchmarkFleetStatus5000Nodes), so the background refresh also waits fleetCostFactor
// times its last call's time before the next: at most a thousandth of a core whatever the
// fleet's size (every 5 s at 5,004 trays while pods are scheduled, every second on small
// fleets), which the scheduling loop does not miss.
//
// Events go on the ComputeDomain object (events.k8s.io, the framework's recorder), once per
// change, never per retry: the policy's note for a domain has no clock in it, and the last
// reason and note said per domain are kept, so a repeat is not said again. The memory of a
// domain is dropped when its ComputeDomain leaves the view (deleted).
//   - Waiting (Normal): a domain that has not started waits; the note says the trays it needs in
//     one clique, the best clique and what it offers, and its size with the size's source. Said
//     again every waitingEventRefresh while the domain still waits with the same note: the API
//     server deletes an Event an hour after it was last written (kube-apiserver --event-ttl), and
//     a large domain can wait for hours, which `kubectl describe computedomain` must still show.
//   - Placed (Normal): every pod of its size is reserved or bound; the note names the clique and
//     the trays.
//   - Preempted (Normal): gang preemption evicted the domain whole (preempt.go).
//
// Who speaks: the first status after start only records what stands (a restarted scheduler does
// not say Placed again for every running domain), and a plugin says nothing until it has run a
// PreFilter (it records silently until then): a standby replica under leader election has a live
// view but schedules nothing, so it does not repeat the leader's Events, and when it takes over
// it says only what changed since. One plugin per process refreshes (the first to start), so a
// plugin in two profiles does not say everything twice.

// fleetInterval is how often the fleet status is refreshed; 0 turns the background refresh
// off (unit tests refresh explicitly).
var fleetInterval = time.Second

// fleetMaxAge bounds how long a status of an unchanged view is kept.
const fleetMaxAge = 5 * time.Second

// fleetCostFactor: the background refresh waits this many times its last status call's time.
const fleetCostFactor = 1000

// waitingEventRefresh is how often an unchanged Waiting Event is said again while its domain
// still waits: half of kube-apiserver's default --event-ttl (1 h), so a waiting domain always has
// a live Waiting Event even if one write is late. Said again after client-go's event recorder
// has closed the Event's series (6 minutes without a repeat), it is a new Event object with a
// fresh TTL. The alternative, a condition in the ComputeDomain's status, would have the scheduler
// write the status of an object NVIDIA's controller owns.
const waitingEventRefresh = 30 * time.Minute

// Event reasons on ComputeDomains.
const (
	eventWaiting   = "Waiting"
	eventPlaced    = "Placed"
	eventPreempted = "Preempted"
)

// said is the last Event said on a domain, and when it was said (or recorded unsaid).
type said struct {
	reason, note string
	at           time.Time
}

// fleetState is the last fleet status and what was said on each domain.
type fleetState struct {
	mu   sync.Mutex
	last *cdplace.Fleet
	at   time.Time
	seq  uint64
	// cost is how long the last status call took.
	cost time.Duration
	// said holds the last Event per domain UID.
	said map[string]said
	// cliques have a free-trays gauge (removed when the clique leaves the view).
	cliques map[string]bool
}

// fleetReporter is held by the plugin whose loop refreshes the fleet status in this process.
var fleetReporter atomic.Bool

// startFleet starts the refresh loop unless another plugin of the process runs one.
func (p *Plugin) startFleet(ctx context.Context) {
	if fleetInterval <= 0 || !fleetReporter.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer fleetReporter.Store(false)
		p.fleetLoop(ctx)
	}()
}

// fleetLoop refreshes the fleet status every fleetInterval (or less often: fleetPaced) until ctx
// ends.
func (p *Plugin) fleetLoop(ctx context.Context) {
	t := time.NewTicker(fleetInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !p.fleetPaced(timeNow()) {
				p.refreshFleet(ctx, false)
			}
		}
	}
}

// fleetPaced reports whether the background refresh waits: the last status is younger than
// fleetCostFactor times what it cost.
func (p *Plugin) fleetPaced(now time.Time) bool {
	p.fleet.mu.Lock()
	defer p.fleet.mu.Unlock()
	return p.fleet.last != nil && now.Sub(p.fleet.at) < fleetCostFactor*p.fleet.cost
}

// refreshFleet asks the policy for the fleet status (unless the view is unchanged and the last
// answer younger than fleetMaxAge, or force), sets the gauges and says what changed on each
// ComputeDomain. Not before the view has synced: a partial view would say false things.
func (p *Plugin) refreshFleet(ctx context.Context, force bool) {
	if !p.feed.synced() {
		return
	}
	logger := klog.FromContext(ctx)
	if err := p.feed.flush(); err != nil {
		logger.V(2).Info("ComputeDomainPlacement: fleet status not refreshed", "err", err)
		return
	}
	seq, now := p.feed.sequence(), timeNow()
	p.fleet.mu.Lock()
	defer p.fleet.mu.Unlock()
	if !force && p.fleet.last != nil && p.fleet.seq == seq && now.Sub(p.fleet.at) < fleetMaxAge {
		return
	}
	start := time.Now()
	f, err := p.cluster.Status()
	p.fleet.cost = time.Since(start)
	observeCall(callStatus, start, err)
	if err != nil {
		// The gauges keep their last values; the next tick asks a fresh instance.
		logger.V(2).Info("ComputeDomainPlacement: fleet status failed", "err", err)
		return
	}
	first := p.fleet.last == nil
	p.fleet.last, p.fleet.at, p.fleet.seq = f, now, seq
	p.setFleetGauges(f)
	p.sayFleet(f, now, !first && p.scheduling.Load())
}

// setFleetGauges sets the fleet gauges from a status (p.fleet.mu held).
func (p *Plugin) setFleetGauges(f *cdplace.Fleet) {
	pending := map[string]int{}
	var starting, running int
	for _, d := range f.Domains {
		switch d.Phase {
		case cdplace.PhasePending:
			pending[d.Pending]++
		case cdplace.PhaseStarting:
			starting++
		case cdplace.PhaseRunning:
			running++
		}
	}
	for _, r := range cdplace.PendingReasons {
		domainsPending.WithLabelValues(r).Set(float64(pending[r]))
	}
	domainsStarting.Set(float64(starting))
	domainsRunning.Set(float64(running))
	seen := map[string]bool{}
	for _, c := range f.Cliques {
		seen[c.Clique] = true
		cliqueFreeTrays.WithLabelValues(c.Clique).Set(float64(c.Free))
	}
	for c := range p.fleet.cliques {
		if !seen[c] {
			cliqueFreeTrays.DeleteLabelValues(c)
		}
	}
	p.fleet.cliques = seen
	largestPlaceable.Set(float64(f.LargestPlaceable))
	reservedTrays.Set(float64(f.ReservedTrays))
}

// sayFleet records what changed and, when speak, emits it (p.fleet.mu held): Placed for a
// running domain, Waiting for a pending one the policy has a note for, and the same Waiting again
// once waitingEventRefresh has passed since it was said. Starting, idle and placeable domains say
// nothing and keep what was said last, so a domain that runs again after a pod was replaced does
// not say Placed twice.
func (p *Plugin) sayFleet(f *cdplace.Fleet, now time.Time, speak bool) {
	if p.fleet.said == nil {
		p.fleet.said = map[string]said{}
	}
	present := make(map[string]bool, len(f.Domains))
	for _, d := range f.Domains {
		if d.Namespace == "" {
			continue // no ComputeDomain object to say it on
		}
		present[d.UID] = true
		var reason string
		switch {
		case d.Phase == cdplace.PhaseRunning:
			reason = eventPlaced
		case d.Phase == cdplace.PhasePending && d.Note != "":
			reason = eventWaiting
		default:
			continue
		}
		last, known := p.fleet.said[d.UID]
		if known && last.reason == reason && last.note == d.Note &&
			(reason != eventWaiting || now.Sub(last.at) < waitingEventRefresh) {
			continue
		}
		p.fleet.said[d.UID] = said{reason: reason, note: d.Note, at: now}
		if rec := p.handle.EventRecorder(); speak && rec != nil {
			rec.Eventf(domainObjectRef(d.Namespace, d.Name, d.UID), nil, v1.EventTypeNormal, reason, "Scheduling", "%s", d.Note)
		}
	}
	for uid := range p.fleet.said {
		if !present[uid] {
			delete(p.fleet.said, uid)
		}
	}
}

// sayPreempted puts Preempted on a ComputeDomain evicted whole by gang preemption, and
// remembers it as the last thing said there.
func (p *Plugin) sayPreempted(cd runtime.Object, uid, note string, preemptor *v1.Pod) {
	rec := p.handle.EventRecorder()
	if rec == nil {
		return
	}
	rec.Eventf(cd, preemptor, v1.EventTypeNormal, eventPreempted, "Preempting", "%s", note)
	p.fleet.mu.Lock()
	defer p.fleet.mu.Unlock()
	if p.fleet.said == nil {
		p.fleet.said = map[string]said{}
	}
	p.fleet.said[uid] = said{reason: eventPreempted, note: note, at: timeNow()}
}

// knownDomain is the namespace and name of the ComputeDomain with this UID in the last fleet
// status.
func (p *Plugin) knownDomain(uid string) (namespace, name string, ok bool) {
	p.fleet.mu.Lock()
	defer p.fleet.mu.Unlock()
	if p.fleet.last == nil {
		return "", "", false
	}
	for _, d := range p.fleet.last.Domains {
		if d.UID == uid && d.Namespace != "" {
			return d.Namespace, d.Name, true
		}
	}
	return "", "", false
}

// domainObjectRef is a ComputeDomain as an Event's regarding object: only its identity.
func domainObjectRef(namespace, name, uid string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(ComputeDomainGVR.GroupVersion().String())
	u.SetKind("ComputeDomain")
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	return u
}
