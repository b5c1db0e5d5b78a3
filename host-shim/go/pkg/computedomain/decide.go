package computedomain

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

var clock atomic.Pointer[func() time.Time]

// timeNow is the plugin's clock: time.Now unless a test set another (setTimeNow). Goroutines of
// an earlier test's plugin may still read it while a later test sets it, hence the atomic.
func timeNow() time.Time {
	if f := clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// setTimeNow makes f the plugin's clock (nil: time.Now).
func setTimeNow(f func() time.Time) {
	if f == nil {
		clock.Store(nil)
		return
	}
	clock.Store(&f)
}

// syncTimeout bounds how long a ComputeDomain pod waits for the feed's initial lists after
// start-up before it gets an Error (and retries with backoff).
const syncTimeout = 30 * time.Second

// waitForSync holds a ComputeDomain pod until the view has every informer's initial list, so
// that it is not decided on a partial view (only right after start-up, or right after the
// ComputeDomain API appeared).
func (p *Plugin) waitForSync(ctx context.Context) *fwk.Status {
	if p.feed.synced() {
		return nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), p.feed.synced) {
		return fwk.AsStatus(errors.New("ComputeDomainPlacement: the cluster view has not synced with its informers yet"))
	}
	return nil
}

// decide is the policy's decision for a ComputeDomain pod: reused when the same question was
// answered on the same view, else one call after the pending facts are applied. A pod whose
// object the policy cannot use is rejected with the reason; a guest failure becomes an Error
// status (the pod fails closed and retries).
func (p *Plugin) decide(pod *v1.Pod, domain string) (*cdplace.Decision, *fwk.Status) {
	if err := p.feed.ensurePod(pod); err != nil {
		return nil, invalidPod(pod, err)
	}
	q := question(pod, domain, p.keys)
	seq := p.feed.sequence()
	if d, ok := p.reuse.get(q, seq); ok {
		return d, nil
	}
	d, st := p.call(pod, nil)
	if st == nil && d.Status.Code != cdplace.CodeError {
		p.reuse.put(q, seq, d)
	}
	return d, st
}

// call applies the pending facts and asks the policy.
func (p *Plugin) call(pod *v1.Pod, overlay []cdplace.Overlay) (*cdplace.Decision, *fwk.Status) {
	if err := p.feed.flush(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("computedomain: updating the policy's view for pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	start := time.Now()
	d, err := p.cluster.PreFilter(pod.Namespace, pod.Name, overlay)
	observeCall(callPreFilter, start, err)
	p.breaker.record(p.logger, err)
	p.afterCall()
	if errors.Is(err, cdplace.ErrPolicyViolation) {
		p.reportViolation(pod, err)
	}
	if (cdplace.IsGuestFailure(err) || errors.Is(err, cdplace.ErrPolicyViolation)) && p.revert.refused(p.cluster.PolicyGeneration()) && p.policy != nil {
		p.policy.revert(p.revert.describe() + "; last: " + err.Error())
	}
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("computedomain policy failed for pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return d, nil
}

// eventPolicyViolation is the reason of the Warning Event on a pod whose policy answer the
// library refused because it broke a safety rule.
const eventPolicyViolation = "PolicyViolation"

// reportViolation counts a refused answer by rule and says so on the pod: the policy allowed a
// node the driver's kubelet Prepare would refuse. The pod itself gets an Error status (it fails
// closed and retries with backoff), and the fault counts toward the breaker like a trap.
func (p *Plugin) reportViolation(pod *v1.Pod, err error) {
	rule := cdplace.PolicyViolationRule(err)
	policyViolations.WithLabelValues(rule).Inc()
	p.logger.Error(err, "ComputeDomainPlacement: the policy's answer broke a safety rule; the pod fails closed", "pod", klog.KObj(pod), "rule", rule)
	if rec := p.handle.EventRecorder(); rec != nil {
		rec.Eventf(pod, nil, v1.EventTypeWarning, eventPolicyViolation, "Scheduling", "%s", err.Error())
	}
}

func invalidPod(pod *v1.Pod, err error) *fwk.Status {
	var fe *facts.Error
	if errors.As(err, &fe) {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fe.Error())
	}
	return fwk.AsStatus(fmt.Errorf("computedomain: pod %s/%s: %w", pod.Namespace, pod.Name, err))
}

// reDecide re-decides with one more overlay entry (preemption's AddPod/RemovePod).
func (p *Plugin) reDecide(cs fwk.CycleState, pod *v1.Pod, op cdplace.Overlay) *fwk.Status {
	s, err := getState(cs)
	if err != nil {
		return fwk.AsStatus(err)
	}
	overlay := append(append([]cdplace.Overlay(nil), s.overlay...), op)
	d, st := p.call(pod, overlay)
	if st != nil {
		return st
	}
	s.decision, s.table, s.overlay = d, p.tableFor(d), overlay
	return nil
}

// statusOf is the framework status of a policy verdict.
func statusOf(v cdplace.Verdict) *fwk.Status {
	switch v.Code {
	case cdplace.CodeSuccess:
		return nil
	case cdplace.CodeSkip:
		return fwk.NewStatus(fwk.Skip)
	case cdplace.CodeUnschedulable:
		return fwk.NewStatus(fwk.Unschedulable, v.Reason)
	case cdplace.CodeUnschedulableAndUnresolvable:
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.Reason)
	default:
		return fwk.AsStatus(fmt.Errorf("computedomain policy: %s", v.Reason))
	}
}

// rejected is where the plugin turns a pod or pod group away: it logs the status at V(5), with kv
// naming the subject ("pod", klog.KObj(pod)), as the in-tree DynamicResources plugin's
// statusUnschedulable does, and returns it. The check keeps a call that logs nothing from
// building its key-value list.
func rejected(logger klog.Logger, st *fwk.Status, kv ...any) *fwk.Status {
	if v := logger.V(5); v.Enabled() && st != nil {
		v.Info("ComputeDomainPlacement rejected", append(kv, "status", st.Code().String(), "reason", st.Message())...)
	}
	return st
}

// unschedulable is rejected for a new status of code with reason.
func unschedulable(logger klog.Logger, code fwk.Code, reason string, kv ...any) *fwk.Status {
	return rejected(logger, fwk.NewStatus(code, reason), kv...)
}
