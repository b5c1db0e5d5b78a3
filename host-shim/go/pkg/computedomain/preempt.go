package computedomain

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	apipod "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// Gang preemption (PostFilter). The policy decides the victims (whole lower-priority
// ComputeDomains and plain GPU pods of one clique, a pure function of its view); this file
// only carries them out as default preemption carries out its own: a DisruptionTarget
// condition (reason PreemptionByScheduler), a delete with a UID precondition and an Event per
// victim, then the preemptor nominated to a node of the freed clique (ModeOverride), which the
// policy then holds its whole domain to and promises to it.
//
// ComputeDomainPlacement's PostFilter runs before DefaultPreemption. It returns Unschedulable at
// once for any other pod (no policy call), so DefaultPreemption handles it; for a ComputeDomain
// pod it answers UnschedulableAndUnresolvable when gang preemption cannot help, which stops
// DefaultPreemption from evicting part of a domain for it (per pod and per node, it cannot free
// a clique; see rule 10 in docs/concepts.md).
//
// The victims are checked twice before anything is deleted: by the library, on the policy's view
// (safety.rs: lower priority, the preemptor's clique, whole domains), and by victims.go on the
// objects about to be deleted. A plan either refuses is reported as a refused placement is (a
// Warning Event PolicyViolation, cdplace_policy_violations_total) and evicts nothing.
//
// PodDisruptionBudgets: default preemption prefers candidates without PDB violations but still
// preempts when every candidate violates one (deletion is not the eviction API, so a PDB never
// blocks it). The policy picks a single plan without PDBs, so every plan is treated like default
// preemption's last resort: the violations are counted as it counts them, logged and named in
// the victims' Events, and the plan goes ahead.

// preemptNeverReason is the PostFilter reason for a pod that may not preempt.
const preemptNeverReason = "ComputeDomain gang preemption: not eligible due to preemptionPolicy=Never"

// PostFilter implements fwk.PostFilterPlugin: gang preemption for a ComputeDomain pod (see above).
func (p *Plugin) PostFilter(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	domain, cd := p.feed.isComputeDomainPod(pod)
	if !cd {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	nominated, st := p.gangPreempt(ctx, pod, domain)
	if nominated == nil {
		return nil, st
	}
	return &fwk.PostFilterResult{NominatingInfo: nominated}, st
}

// PodGroupPostFilter implements fwk.PodGroupPostFilterPlugin (the 1.37 workload cycle, gates
// GenericWorkload and TopologyAwareWorkloadScheduling): a PodGroup of ComputeDomain pods that
// could not be placed gets the same gang preemption, for its first ComputeDomain pod, which is
// nominated to the freed clique; its domain is then held there. A group of other pods is left to
// the next plugins (Unschedulable, no policy call).
func (p *Plugin) PodGroupPostFilter(ctx context.Context, _ fwk.PodGroupCycleState, pg fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	for _, pod := range pg.GetUnscheduledPods() {
		domain, cd := p.feed.isComputeDomainPod(pod)
		if !cd {
			continue
		}
		nominated, st := p.gangPreempt(ctx, pod, domain)
		if nominated == nil {
			return nil, st
		}
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		return &fwk.PodGroupPostFilterResult{NominatingInfos: map[types.NamespacedName]*fwk.NominatingInfo{key: nominated}}, st
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// gangPreempt asks the policy for a gang preemption for a ComputeDomain pod and carries it out:
// the nomination on success, else nil and the status saying why.
func (p *Plugin) gangPreempt(ctx context.Context, pod *v1.Pod, domain string) (*fwk.NominatingInfo, *fwk.Status) {
	logger := klog.FromContext(ctx)
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		gangPreemptions.WithLabelValues("never").Inc()
		return nil, unschedulable(logger, fwk.UnschedulableAndUnresolvable, preemptNeverReason, "pod", klog.KObj(pod))
	}
	if err := p.feed.flush(); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("computedomain: updating the policy's view for pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	if by, ok := p.recentPreemption(domain); ok {
		// The nomination has not reached the view yet (informer lag): another pod of the same
		// domain must not preempt again on a view that still shows the victims.
		reason := fmt.Sprintf("ComputeDomain gang preemption: waiting for the victims of the preemption made for pod %s", by)
		return nil, unschedulable(logger, fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KObj(pod))
	}
	// A refusal is reused for the domain's next pods while the view is unchanged: a domain that
	// waits has each of its pods retried for every tray freed anywhere, and each would otherwise
	// ask the same question of the same view.
	q, seq := question(pod, domain, p.keys), p.feed.sequence()
	if reason, ok := p.refusals.get(q, seq); ok {
		gangPreemptions.WithLabelValues("not_possible").Inc()
		return nil, unschedulable(logger, fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KObj(pod), "reused", true)
	}
	start := time.Now()
	pr, err := p.cluster.Preempt(pod.Namespace, pod.Name)
	observeCall(callPreempt, start, err)
	p.breaker.record(p.logger, err)
	p.afterCall()
	if errors.Is(err, cdplace.ErrPolicyViolation) {
		p.reportViolation(pod, err)
	}
	if err != nil {
		gangPreemptions.WithLabelValues("error").Inc()
		return nil, fwk.AsStatus(fmt.Errorf("computedomain gang preemption failed for pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	if pr.Plan == nil {
		gangPreemptions.WithLabelValues("not_possible").Inc()
		reason := "ComputeDomain gang preemption: " + pr.Reason
		p.refusals.put(q, seq, reason)
		return nil, unschedulable(logger, fwk.UnschedulableAndUnresolvable, reason, "pod", klog.KObj(pod))
	}
	if st := p.evict(ctx, pod, pr); st != nil {
		gangPreemptions.WithLabelValues("error").Inc()
		return nil, st
	}
	gangPreemptions.WithLabelValues("preempted").Inc()
	gangPreemptionVictims.Add(float64(len(pr.Plan.Pods)))
	gangPreemptionGPUs.Add(float64(pr.Plan.GPUs))
	p.notePreemption(domain, pod)
	return &fwk.NominatingInfo{NominatedNodeName: pr.Plan.Node, NominatingMode: fwk.ModeOverride}, fwk.NewStatus(fwk.Success)
}

// evict carries out a plan: every victim gets the DisruptionTarget condition and is deleted
// (UID precondition: a pod recreated under the same name is not touched), with an Event naming
// the preemptor; each ComputeDomain evicted whole gets Preempted, and one more Event goes on the
// preemptor's ComputeDomain (else on the pod).
func (p *Plugin) evict(ctx context.Context, preemptor *v1.Pod, pr *cdplace.Preemption) *fwk.Status {
	logger := klog.FromContext(ctx)
	cs := p.handle.ClientSet()
	plan := pr.Plan
	victims := make([]*v1.Pod, 0, len(plan.Pods))
	for _, key := range plan.Pods {
		ns, name, _ := strings.Cut(key, "/")
		v, err := p.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(ns).Get(name)
		if apierrors.IsNotFound(err) {
			continue // already gone
		}
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("computedomain gang preemption: reading victim %s: %w", key, err))
		}
		victims = append(victims, v)
	}
	check := victimCheck{domainOf: p.feed.isComputeDomainPod, cliqueOf: p.nodeClique}
	if v := check.checkVictims(preemptor, plan, victims); v != nil {
		p.refuseVictims(preemptor, v)
		return fwk.AsStatus(fmt.Errorf("computedomain gang preemption refused for pod %s/%s: %w", preemptor.Namespace, preemptor.Name, v))
	}
	violations := pdbViolations(p.pdbs, victims)
	where := fmt.Sprintf("NVLink clique %s", plan.Clique)
	message := fmt.Sprintf("Preempted by pod %s (%s/%s), ComputeDomain gang preemption of %d pod(s) in %s",
		preemptor.UID, preemptor.Namespace, preemptor.Name, len(plan.Pods), where)
	if violations > 0 {
		message += fmt.Sprintf("; %d victim(s) violate a PodDisruptionBudget", violations)
		logger.Info("ComputeDomainPlacement: gang preemption violates PodDisruptionBudgets", "preemptor", klog.KObj(preemptor), "violations", violations)
	}
	for _, victim := range victims {
		condition := &v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: apipod.CalculatePodConditionObservedGeneration(&victim.Status, victim.Generation, v1.DisruptionTarget),
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonPreemptionByScheduler,
			Message:            fmt.Sprintf("%s: preempting to accommodate a higher priority ComputeDomain (gang preemption)", preemptor.Spec.SchedulerName),
		}
		newStatus := victim.Status.DeepCopy()
		if apipod.UpdatePodCondition(newStatus, condition) {
			if err := util.PatchPodStatus(ctx, cs, victim.Name, victim.Namespace, &victim.Status, newStatus); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return fwk.AsStatus(fmt.Errorf("computedomain gang preemption: adding DisruptionTarget to %s/%s: %w", victim.Namespace, victim.Name, err))
			}
		}
		uid := victim.UID
		err := cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // gone, or another pod under its name
		}
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("computedomain gang preemption: deleting %s/%s: %w", victim.Namespace, victim.Name, err))
		}
		if rec := p.handle.EventRecorder(); rec != nil {
			rec.Eventf(victim, preemptor, v1.EventTypeNormal, "Preempted", "Preempting", "%s", message)
		}
		logger.V(2).Info("ComputeDomainPlacement: gang preemption evicted a pod", "preemptor", klog.KObj(preemptor), "victim", klog.KObj(victim), "clique", plan.Clique)
	}
	for _, uid := range plan.Domains {
		if cd := p.victimDomain(ctx, uid); cd != nil {
			note := fmt.Sprintf("ComputeDomain %s/%s preempted whole by gang preemption for pod %s/%s in %s", cd.GetNamespace(), cd.GetName(), preemptor.Namespace, preemptor.Name, where)
			p.sayPreempted(cd, uid, note, preemptor)
		}
	}
	summary := fmt.Sprintf("Gang preemption for pod %s/%s: %s; nominated to node %s", preemptor.Namespace, preemptor.Name, pr.Reason, plan.Node)
	if rec := p.handle.EventRecorder(); rec != nil {
		if cd := p.domainObject(ctx, preemptor.Namespace, pr.Domain); cd != nil {
			rec.Eventf(cd, preemptor, v1.EventTypeNormal, "GangPreemption", "Preempting", "%s", summary)
		} else {
			rec.Eventf(preemptor, nil, v1.EventTypeNormal, "GangPreemption", "Preempting", "%s", summary)
		}
	}
	logger.V(2).Info("ComputeDomainPlacement: gang preemption", "preemptor", klog.KObj(preemptor), "domains", plan.Domains,
		"pods", len(plan.Pods), "gpus", plan.GPUs, "clique", plan.Clique, "node", plan.Node)
	return nil
}

// domainObject is the ComputeDomain with this UID in the namespace, for its Event (nil when it
// cannot be read: the Event goes on the pod instead).
func (p *Plugin) domainObject(ctx context.Context, namespace, uid string) runtime.Object {
	if p.dyn == nil || uid == "" {
		return nil
	}
	list, err := p.dyn.Resource(ComputeDomainGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for i := range list.Items {
		if string(list.Items[i].GetUID()) == uid {
			return &list.Items[i]
		}
	}
	return nil
}

// victimDomain is a ComputeDomain evicted whole, for its Event: from the last fleet status, else
// looked up by UID in every namespace (nil when it cannot be found).
func (p *Plugin) victimDomain(ctx context.Context, uid string) *unstructured.Unstructured {
	if ns, name, ok := p.knownDomain(uid); ok {
		return domainObjectRef(ns, name, uid)
	}
	if cd, ok := p.domainObject(ctx, metav1.NamespaceAll, uid).(*unstructured.Unstructured); ok {
		return cd
	}
	return nil
}

// pdbViolations counts the victims whose deletion would take a PodDisruptionBudget below its
// allowed disruptions, as default preemption counts them (a pod already in DisruptedPods is not
// counted; an empty selector matches nothing).
func pdbViolations(lister policylisters.PodDisruptionBudgetLister, victims []*v1.Pod) int {
	if lister == nil {
		return 0
	}
	pdbs, err := lister.List(labels.Everything())
	if err != nil || len(pdbs) == 0 {
		return 0
	}
	return countPDBViolations(pdbs, victims)
}

func countPDBViolations(pdbs []*policy.PodDisruptionBudget, victims []*v1.Pod) int {
	allowed := make([]int32, len(pdbs))
	for i, pdb := range pdbs {
		allowed[i] = pdb.Status.DisruptionsAllowed
	}
	n := 0
	for _, pod := range victims {
		if len(pod.Labels) == 0 {
			continue
		}
		for i, pdb := range pdbs {
			if pdb.Namespace != pod.Namespace {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if _, done := pdb.Status.DisruptedPods[pod.Name]; done {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				n++
				break
			}
		}
	}
	return n
}

// preemptionHold is how long a domain's other pods do not preempt again after a gang
// preemption for one of them, while the preemptor's nomination travels to the view.
const preemptionHold = 30 * time.Second

// recentPreemption reports the preemptor of a gang preemption made for this domain within
// preemptionHold.
func (p *Plugin) recentPreemption(domain string) (string, bool) {
	p.preemptedMu.Lock()
	defer p.preemptedMu.Unlock()
	r, ok := p.preempted[domain]
	if !ok || timeNow().Sub(r.at) > preemptionHold {
		delete(p.preempted, domain)
		return "", false
	}
	return r.by, true
}

func (p *Plugin) notePreemption(domain string, pod *v1.Pod) {
	p.preemptedMu.Lock()
	defer p.preemptedMu.Unlock()
	if p.preempted == nil {
		p.preempted = map[string]preemptedFor{}
	}
	p.preempted[domain] = preemptedFor{by: pod.Namespace + "/" + pod.Name, at: timeNow()}
}

// preemptedFor is a gang preemption made for a domain.
type preemptedFor struct {
	by string
	at time.Time
}
