package computedomain

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Plain-pod steering: a pod without a ComputeDomain is scored toward nodes without a clique,
// then cliques already broken, away from intact ones, and a plain GPU pod is kept off free trays
// a starting domain still needs or a clique reserved for a waiting domain (guest/policy steer.rs
// decides; `plainPodSteering`). The answer is the same for every plain pod of one kind (GPU or
// not) on the same view, so it is asked once per view version and kind, at most steerMaxAge
// apart (reservations change with the clock), and shared: a plain pod costs a cache lookup in
// PreFilter and map lookups in Score, and in Filter only when the answer keeps it off some node
// (a reservation, trays a starting domain needs); otherwise PreFilter says Skip to Filter alone.
// A cluster without clique-labelled nodes pays nothing (Skip before any call).
//
// The view version steering keys on is the feed's steerSeq, which passes over the plain pods'
// own placements where the policy said they change nothing of the answer (a clique it marks
// stable: broken already, nothing promised, not reserved, no reservation a tray taken there could
// move; guest/policy steer.rs): otherwise every plain pod's Reserve would change the view and the
// next pod would ask again, one guest call per pod on the scheduling goroutine. A run of plain
// pods filling a broken clique asks once; a pod that breaks an intact clique, lands where trays
// are promised or reserved, or could move a reservation makes the next one ask.

// steerMaxAge bounds how long one steering answer is reused on an unchanged view: reservations
// (a domain waiting past cliqueReservationAfterSeconds) change with the clock alone.
const steerMaxAge = time.Second

// steered caches the policy's steering answer per steerSeq, for GPU pods and others, with its
// clique entries by node object (nodeindex.go).
type steered struct {
	mu  sync.Mutex
	seq [2]uint64
	at  [2]time.Time
	d   [2]*cdplace.Decision
	t   [2]*nodeTable
}

// get returns the answer for steerSeq seq, with its table on snap (looked up again when the
// cached one is on another snapshot).
func (s *steered) get(gpus bool, seq uint64, now time.Time, snap *cliqueSnapshot) (*cdplace.Decision, *nodeTable) {
	i := kindIndex(gpus)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.d[i] == nil || s.seq[i] != seq || now.Sub(s.at[i]) >= steerMaxAge {
		return nil, nil
	}
	if s.t[i] == nil || s.t[i].snap != snap {
		s.t[i] = tableOn(s.d[i], snap)
	}
	return s.d[i], s.t[i]
}

func (s *steered) put(gpus bool, seq uint64, now time.Time, d *cdplace.Decision, t *nodeTable) {
	i := kindIndex(gpus)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq[i], s.at[i], s.d[i], s.t[i] = seq, now, d, t
}

func kindIndex(gpus bool) int {
	if gpus {
		return 1
	}
	return 0
}

// steerable reports whether a plain pod is steered: not when steering is off, no node has a
// clique, or a DaemonSet places the pod (its node is chosen by the DaemonSet, and an IMEX or
// device-plugin daemon must never be kept off a tray).
func (p *Plugin) steerable(pod *v1.Pod) bool {
	if !p.steering || !p.feed.hasCliqueNodes() || p.breaker.blocked() != "" {
		return false
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "DaemonSet" {
		return false
	}
	return true
}

// steer is PreFilter for a plain pod: the shared steering answer goes to CycleState (Filter and
// Score read it); never a node restriction.
func (p *Plugin) steer(ctx context.Context, cs fwk.CycleState, pod *v1.Pod) *fwk.Status {
	if !p.steerable(pod) {
		return fwk.NewStatus(fwk.Skip)
	}
	gpus := facts.UsesGPUsOrClaims(pod, p.keys)
	seq, now := p.feed.steerSequence(), timeNow()
	snap := p.feed.index.snapshot(now)
	d, t := p.steerCache.get(gpus, seq, now, snap)
	if d != nil {
		steeringAnswers.WithLabelValues("reused").Inc()
	} else {
		if err := p.feed.flush(); err != nil {
			return fwk.AsStatus(fmt.Errorf("computedomain: updating the policy's view for pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
		var err error
		start := time.Now()
		d, err = p.cluster.Steer(gpus)
		observeCall(callSteer, start, err)
		p.breaker.record(klog.FromContext(ctx), err)
		p.afterCall()
		if err != nil {
			// Steering is advice: a failing policy must not stop plain pods; this one is
			// placed as by the stock profile.
			klog.FromContext(ctx).V(2).Info("ComputeDomainPlacement: steering failed; pod not steered", "pod", klog.KObj(pod), "err", err)
			return fwk.NewStatus(fwk.Skip)
		}
		steeringAnswers.WithLabelValues("asked").Inc()
		t = tableOn(d, snap)
		p.steerCache.put(gpus, seq, now, d, t)
		p.feed.setStable(seq, d)
	}
	if d.Status.Code == cdplace.CodeSkip {
		return fwk.NewStatus(fwk.Skip)
	}
	if st := statusOf(d.Status); st != nil {
		return rejected(klog.FromContext(ctx), st, "pod", klog.KObj(pod))
	}
	p.writeState(cs, &state{decision: d, table: t, plain: true})
	if d.PassesEveryNode() {
		// Nothing to filter: Filter is skipped, PreScore and Score still read the state.
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}
