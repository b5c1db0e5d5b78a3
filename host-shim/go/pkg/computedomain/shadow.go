package computedomain

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The shadow policy (issue 35): an optional second component (`shadowPolicy`, a source like
// `policy`) asked the live PreFilter question of every ComputeDomain pod again, on the view the
// live decision was made on, that never acts (cdplace_cluster_set_shadow). The library queues the
// live answers (one per domain waiting, at most 64); one goroutine here asks the shadow about
// them, at most shadowBudget of one core's time (it sleeps in proportion to each step), and
// reports: cdplace_shadow_decisions_total{outcome}, cdplace_shadow_seconds_total, and for each
// domain whose outcome turns divergent a log line and a Normal ShadowDiverged Event on the
// ComputeDomain (on the pod when the domain is not in the fleet status yet) with both answers.
// `kubectl cdplace status --shadow` lists those Events.

// shadowDivergedReason is the Event reason of a divergence.
const shadowDivergedReason = "ShadowDiverged"

// shadowBudget is the share of one core the shadow goroutine may keep busy; shadowIdle is how
// long it sleeps when nothing waits; shadowReportEvery how often it reports (tests shorten them).
var (
	shadowBudget      = 0.25
	shadowIdle        = 50 * time.Millisecond
	shadowReportEvery = time.Second
)

// startShadow starts the shadow source's watch and the goroutine that asks it (nothing when no
// shadowPolicy is set).
func (p *Plugin) startShadow(ctx context.Context, h fwk.Handle, src *PolicySource) {
	if src == nil {
		return
	}
	s := newShadowSwapper(p.cluster, *src, p.logger)
	p.shadow = s
	if rec := h.EventRecorder(); rec != nil {
		s.event = policyEvents(rec)
	}
	go s.run(ctx)
	switch src.Source {
	case policyEmbedded:
		s.offer(policyCandidate{wasm: cdplace.GuestWasm, origin: "the embedded policy"})
	case policyFile:
		var stamp fileStamp
		if b, err := os.ReadFile(src.Path); err != nil {
			p.logger.Error(err, "ComputeDomainPlacement: reading the shadow policy file; it is read again when it changes", "path", src.Path)
		} else if fi, err := os.Stat(src.Path); err == nil {
			stamp = stampOf(fi)
			s.offer(policyCandidate{wasm: b, origin: "file " + src.Path})
		}
		go s.watchFile(ctx, src.Path, stamp)
	case policyConfigMap, policySecret:
		cs := h.ClientSet()
		if cs == nil {
			p.logger.Info("ComputeDomainPlacement: no API client; the shadow policy source is not watched", "source", src.String())
			return
		}
		s.watchObject(ctx, cs)
	}
	go p.runShadow(ctx, shadowBudget, shadowIdle, shadowReportEvery)
	p.logger.Info("ComputeDomainPlacement: shadow policy", "source", src.String())
}

// Shadow is the shadow policy's digest and generation ("" and 0 when none runs).
func (p *Plugin) Shadow() (digest string, generation uint64) {
	if p.shadow == nil {
		return "", 0
	}
	return p.shadow.Live()
}

// runShadow asks the shadow about the waiting live decisions within budget (a share of one
// core), sleeping idle when none waits, and reports every reportEvery.
func (p *Plugin) runShadow(ctx context.Context, budget float64, idle, reportEvery time.Duration) {
	last := time.Now()
	for ctx.Err() == nil {
		start := time.Now()
		did, err := p.cluster.ShadowStep()
		took := time.Since(start)
		if err != nil {
			p.logger.Error(err, "ComputeDomainPlacement: shadow step")
		}
		if time.Since(last) >= reportEvery {
			p.reportShadow()
			last = time.Now()
		}
		pause := idle
		if did {
			pause = time.Duration(float64(took) * (1 - budget) / budget)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// reportShadow publishes what the shadow did since the last report.
func (p *Plugin) reportShadow() {
	r, err := p.cluster.ShadowTake()
	if err != nil {
		p.logger.Error(err, "ComputeDomainPlacement: shadow report")
		return
	}
	if len(r.Outcomes) > 0 {
		p.logger.V(4).Info("ComputeDomainPlacement: shadow report", "outcomes", r.Outcomes, "queued", r.Queued, "busyUs", r.BusyUs)
	}
	for outcome, n := range r.Outcomes {
		shadowDecisions.WithLabelValues(outcome).Add(float64(n))
	}
	shadowSeconds.Add(float64(r.BusyUs) / 1e6)
	digest, _ := p.Shadow()
	for _, d := range r.Divergences {
		note := divergenceNote(digest, d)
		p.logger.Info("ComputeDomainPlacement: shadow policy diverges", "domain", d.Domain, "pod", d.Pod, "outcome", d.Outcome,
			"live", d.Live, "shadow", d.Shadow, "liveGeneration", d.LiveGeneration, "shadowGeneration", d.ShadowGeneration)
		if rec := p.handle.EventRecorder(); rec != nil {
			if obj := p.divergenceObject(d); obj != nil {
				rec.Eventf(obj, nil, v1.EventTypeNormal, shadowDivergedReason, "Scheduling", "%s", note)
			}
		}
	}
	if r.Dropped > 0 {
		p.logger.Info("ComputeDomainPlacement: shadow divergences dropped (the log was full)", "dropped", r.Dropped)
	}
}

// divergenceNote is a divergence in an Event's words: the outcome, then both answers.
func divergenceNote(digest string, d cdplace.Divergence) string {
	short := strings.TrimPrefix(digest, "sha256:")
	if len(short) > 12 {
		short = short[:12]
	}
	return fmt.Sprintf("shadow policy %s (generation %d): %s for pod %s; live (generation %d): %s; shadow: %s",
		short, d.ShadowGeneration, d.Outcome, d.Pod, d.LiveGeneration, d.Live, d.Shadow)
}

// divergenceObject is what a divergence's Event goes on: the ComputeDomain, else the pod.
func (p *Plugin) divergenceObject(d cdplace.Divergence) runtime.Object {
	if ns, name, ok := p.knownDomain(d.Domain); ok {
		return domainObjectRef(ns, name, d.Domain)
	}
	ns, name, ok := strings.Cut(d.Pod, "/")
	if !ok || p.pods == nil {
		return nil
	}
	pod, err := p.pods.Pods(ns).Get(name)
	if err != nil {
		klog.V(4).InfoS("ComputeDomainPlacement: no object for a shadow divergence", "pod", d.Pod, "err", err)
		return nil
	}
	return pod
}
