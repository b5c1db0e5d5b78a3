package computedomain

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The library refuses a gang preemption whose victims break its rules before the plan leaves
// it (host-shim/lib/src/safety.rs check_preemption). The plugin checks the plan once more on the
// objects it is about to delete, as its informers hold them, so that a plan is carried out only
// when both agree: a victim whose priority or node changed since the policy's view, or a bug on
// either side, deletes nothing. The rules are the library's, by the same names.

// victimCheck is what checkVictims reads of the cluster.
type victimCheck struct {
	// domainOf is a pod's ComputeDomain UID, when it is a ComputeDomain pod.
	domainOf func(*v1.Pod) (string, bool)
	// cliqueOf is a node's clique label value ("" when it has none or is unknown).
	cliqueOf func(node string) string
}

// checkVictims is the first rule the plan for preemptor breaks on the victims as the
// informers hold them (nil when none): each victim of lower priority than the preemptor (as
// upstream's DefaultPreemption), a plain victim on a tray of the plan's clique, a ComputeDomain
// pod only as part of a domain the plan evicts whole (never the preemptor's own), and the
// nominated node in the plan's clique.
func (c victimCheck) checkVictims(preemptor *v1.Pod, plan *cdplace.PreemptionPlan, victims []*v1.Pod) *victimViolation {
	violation := func(rule, format string, args ...any) *victimViolation {
		return &victimViolation{rule: rule, message: fmt.Sprintf("gang preemption for pod %s/%s %s", preemptor.Namespace, preemptor.Name, fmt.Sprintf(format, args...))}
	}
	if got := c.cliqueOf(plan.Node); plan.Clique == "" || got != plan.Clique {
		return violation("victim-on-preemptor-trays", "nominates node %s (clique %q) for NVLink clique %q", plan.Node, got, plan.Clique)
	}
	priority := corev1helpers.PodPriority(preemptor)
	own, _ := c.domainOf(preemptor)
	for _, v := range victims {
		if vp := corev1helpers.PodPriority(v); vp >= priority {
			return violation("victim-lower-priority", "(priority %d) names pod %s/%s (priority %d) as a victim: only pods of lower priority are evicted", priority, v.Namespace, v.Name, vp)
		}
		node := v.Spec.NodeName
		if node == "" {
			node = v.Status.NominatedNodeName
		}
		domain, member := c.domainOf(v)
		switch {
		case member && domain == own:
			return violation("victim-whole-domain", "names pod %s/%s of its own ComputeDomain as a victim", v.Namespace, v.Name)
		case member && !slices.Contains(plan.Domains, domain):
			return violation("victim-whole-domain", "evicts pod %s/%s of ComputeDomain %s but not the domain whole", v.Namespace, v.Name, domain)
		case !member && (node == "" || c.cliqueOf(node) != plan.Clique):
			return violation("victim-on-preemptor-trays", "names pod %s/%s on node %q (clique %q) as a victim: only pods on the trays of NVLink clique %s are evicted", v.Namespace, v.Name, node, c.cliqueOf(node), plan.Clique)
		}
	}
	return nil
}

// victimViolation is a rule a plan breaks (one of cdplace.PolicyViolationRules) and why.
type victimViolation struct {
	rule, message string
}

// Error reads as the library's violations do.
func (v *victimViolation) Error() string {
	return "policy violation: rule " + v.rule + ": " + v.message
}

// refuseVictims reports a plan the plugin will not carry out, as the library's refusals are
// reported: counted by rule, logged, and a Warning Event PolicyViolation on the preemptor.
func (p *Plugin) refuseVictims(preemptor *v1.Pod, v *victimViolation) {
	policyViolations.WithLabelValues(v.rule).Inc()
	p.logger.Error(v, "ComputeDomainPlacement: the gang preemption's victims break a rule; nothing is evicted", "pod", klog.KObj(preemptor), "rule", v.rule)
	if rec := p.handle.EventRecorder(); rec != nil {
		rec.Eventf(preemptor, nil, v1.EventTypeWarning, eventPolicyViolation, "Preempting", "%s", v.Error())
	}
}

// nodeClique is a node's clique label value as the scheduler's informer holds it ("" when the
// node is unknown or has none).
func (p *Plugin) nodeClique(node string) string {
	if node == "" {
		return ""
	}
	n, err := p.handle.SharedInformerFactory().Core().V1().Nodes().Lister().Get(node)
	if err != nil {
		return ""
	}
	return n.Labels[p.keys.CliqueLabel]
}
