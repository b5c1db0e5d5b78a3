package schedulerperf

import v1 "k8s.io/api/core/v1"

// PodDomainLabel marks a benchmark pod with its ComputeDomain's name
// (config/templates/pod-computedomain.yaml).
const PodDomainLabel = "cdplace.bench/domain"

// Placement summarises where the ComputeDomain pods of one run went.
type Placement struct {
	Pods    int `json:"pods"`
	Bound   int `json:"bound"`
	Pending int `json:"pending"`
	Domains int `json:"domains"`
	// Whole domains have every pod bound, all in one clique.
	Whole int `json:"whole"`
	// Split domains have bound pods in more than one clique (cannot work on NVLink).
	Split int `json:"split"`
	// Partial domains have some pods bound and some pending.
	Partial int `json:"partial"`
	// Unstarted domains have no pod bound.
	Unstarted int `json:"unstarted"`
	// Reasons counts the distinct PodScheduled=False messages of pending pods.
	Reasons map[string]int `json:"reasons,omitempty"`
}

// SummarizePlacement counts pods labelled with PodDomainLabel by domain and by the clique
// (cliqueLabel) of the node each is bound to.
func SummarizePlacement(pods []v1.Pod, nodes []v1.Node, cliqueLabel string) Placement {
	cliqueOf := make(map[string]string, len(nodes))
	for i := range nodes {
		cliqueOf[nodes[i].Name] = nodes[i].Labels[cliqueLabel]
	}
	type domain struct {
		pods, bound int
		cliques     map[string]bool
	}
	domains := map[string]*domain{}
	p := Placement{}
	for i := range pods {
		pod := &pods[i]
		name, ok := pod.Labels[PodDomainLabel]
		if !ok || pod.DeletionTimestamp != nil {
			continue
		}
		d := domains[name]
		if d == nil {
			d = &domain{cliques: map[string]bool{}}
			domains[name] = d
		}
		d.pods++
		p.Pods++
		if pod.Spec.NodeName == "" {
			p.Pending++
			for _, c := range pod.Status.Conditions {
				if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Message != "" {
					if p.Reasons == nil {
						p.Reasons = map[string]int{}
					}
					p.Reasons[c.Message]++
				}
			}
			continue
		}
		d.bound++
		p.Bound++
		d.cliques[cliqueOf[pod.Spec.NodeName]] = true
	}
	for _, d := range domains {
		p.Domains++
		switch {
		case len(d.cliques) > 1:
			p.Split++
		case d.bound == 0:
			p.Unstarted++
		case d.bound < d.pods:
			p.Partial++
		default:
			p.Whole++
		}
	}
	return p
}
