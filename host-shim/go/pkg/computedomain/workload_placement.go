package computedomain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/topologyaware"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// The 1.37 workload scheduling cycle (gates GenericWorkload and TopologyAwareWorkloadScheduling):
// kube-scheduler takes a whole PodGroup at once, asks the profile's one PlacementGenerate plugin
// for candidate placements (node sets), simulates the group in each (PreFilter..Reserve per pod,
// the gang's minCount checked), and ranks the feasible ones with the PlacementScore plugins.
//
// For a PodGroup of ComputeDomain pods, the placements are the NVLink cliques that can hold the
// whole domain, taken from the same policy decision PreFilter makes for one of the group's pods
// (one call, reused by the pods' own PreFilter), each intersected with the parent placement, and
// each scored with the policy's clique score (best fit). Every other PodGroup gets what the
// in-tree TopologyPlacementGenerator would give it: a framework profile has at most one
// PlacementGenerate plugin, so the shipped profiles put this one in its place, and Skip is no
// answer there (the framework treats any non-Success status as the group failing).
//
// With the gates off the framework never calls these methods.

var (
	_ fwk.PlacementGeneratePlugin  = &Plugin{}
	_ fwk.PlacementScorePlugin     = &Plugin{}
	_ fwk.PlacementScoreExtensions = &Plugin{}
)

const placementStateKey fwk.StateKey = Name + "/placements"

// placementState is what GeneratePlacements decided for a ComputeDomain PodGroup, in the pod
// group's cycle state; ScorePlacement reads it. Absent for any other PodGroup.
type placementState struct {
	domain string
	// scores is the policy's clique score per generated placement.
	scores map[*fwk.Placement]int64
}

// Clone implements fwk.StateData; the state is never changed once written.
func (s *placementState) Clone() fwk.StateData { return s }

// GeneratePlacements implements fwk.PlacementGeneratePlugin: one placement per NVLink clique
// that can hold the group's ComputeDomain whole (split further by the PodGroup's topology
// constraint when it names another key than the clique label), within the parent placement.
func (p *Plugin) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	if pg == nil || parent == nil || state == nil {
		return nil, fwk.AsStatus(errors.New("computedomain: GeneratePlacements needs a pod group, its cycle state and a parent placement"))
	}
	logger, group := klog.FromContext(ctx), klog.KRef(pg.GetNamespace(), pg.GetName())
	pod, domain, st := p.groupDomain(pg)
	if st != nil {
		return nil, rejected(logger, st, "podGroup", group)
	}
	if pod == nil {
		return p.otherPlacements(ctx, state, pg, parent)
	}
	if p.crd.client == nil || !p.crd.Served() {
		return nil, unschedulable(logger, fwk.Unschedulable, noCRDReason, "podGroup", group)
	}
	if st := p.waitForSync(ctx); st != nil {
		return nil, st
	}
	d, st := p.decide(pod, domain)
	if st != nil {
		return nil, st
	}
	if d.Status.Code == cdplace.CodeSkip {
		return p.otherPlacements(ctx, state, pg, parent)
	}
	if st := statusOf(d.Status); st != nil {
		p.settle.note(p, domain, pod, d.Status.Reason)
		return nil, rejected(logger, st, "podGroup", group, "pod", klog.KObj(pod))
	}
	placements, scores := cliquePlacements(d, parent, p.keys.CliqueLabel, topologyKey(pg))
	if len(placements) == 0 {
		reason := fmt.Sprintf("no NVLink clique that can hold ComputeDomain %s whole has trays in the parent placement (%d nodes)", domain, len(parent.Nodes))
		return nil, unschedulable(logger, fwk.Unschedulable, reason, "podGroup", group)
	}
	state.Write(placementStateKey, &placementState{domain: domain, scores: scores})
	names := make([]string, len(placements))
	for i, pl := range placements {
		names[i] = pl.Name
	}
	logger.V(2).Info("ComputeDomainPlacement generated placements", "podGroup", group, "domain", domain, "placements", names)
	return &fwk.GeneratePlacementsResult{Placements: placements}, nil
}

// groupDomain finds the group's ComputeDomain: the first unscheduled ComputeDomain pod and its
// domain, or no pod when none is one. Pods of the group that are not ComputeDomain pods (a
// launcher) go along; pods of two different domains cannot be placed as one group in one clique
// by this decision, and say so.
func (p *Plugin) groupDomain(pg fwk.PodGroupInfo) (*v1.Pod, string, *fwk.Status) {
	var first *v1.Pod
	var domain string
	for _, pod := range pg.GetUnscheduledPods() {
		if pod == nil {
			continue
		}
		d, cd := p.feed.isComputeDomainPod(pod)
		if !cd {
			continue
		}
		if first == nil {
			first, domain = pod, d
			continue
		}
		if d != domain {
			return nil, "", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"PodGroup %s/%s has pods of two ComputeDomains (%s claims %s, %s claims %s); the pods of a PodGroup placed by ComputeDomainPlacement must share one ComputeDomain",
				pg.GetNamespace(), pg.GetName(), first.Name, domain, pod.Name, d))
		}
	}
	return first, domain, nil
}

// otherPlacements is the answer for a PodGroup that is not ComputeDomain work: the in-tree
// TopologyPlacementGenerator's (one placement per value of the group's topology key, or the
// parent unchanged without one), with no call into the policy.
func (p *Plugin) otherPlacements(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	if topologyKey(pg) == "" {
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
	}
	tp, err := topologyaware.New(ctx, nil, p.handle, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("computedomain: the topology placement generator: %w", err))
	}
	return tp.GeneratePlacements(ctx, state, pg, parent)
}

// topologyKey is the PodGroup's topology constraint key ("" without one); the API allows one.
func topologyKey(pg fwk.PodGroupInfo) string {
	if g := pg.GetPodGroup(); g != nil {
		if c := g.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return c.Topology[0].Key
		}
	} else if cg := pg.GetCompositePodGroup(); cg != nil {
		if c := cg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
			return c.Topology[0].Key
		}
	}
	return ""
}

// cliquePlacements makes one placement per clique the decision allows, from the parent's nodes
// (the same NodeInfo instances, as the snapshot requires), in clique order. A topology key other
// than the clique label splits a clique further by that label's value, and drops its nodes
// without it, as the in-tree generator does.
//
// A domain larger than one clique (the policy's layout of segments, guest/policy segments.rs;
// exclusive and offered in several cliques) gets one placement: the nodes of every clique of
// its layout, named by them joined with "+", since the group binds whole or not at all.
func cliquePlacements(d *cdplace.Decision, parent *fwk.Placement, cliqueLabel, topoKey string) ([]*fwk.Placement, map[*fwk.Placement]int64) {
	if topoKey == cliqueLabel {
		topoKey = ""
	}
	if pl, score := spanningPlacement(d, parent, cliqueLabel); pl != nil {
		return []*fwk.Placement{pl}, map[*fwk.Placement]int64{pl: score}
	}
	type group struct{ clique, value string }
	byGroup := map[group][]fwk.NodeInfo{}
	for _, ni := range parent.Nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		cl := n.Labels[cliqueLabel]
		c, ok := d.Cliques[cl]
		if !ok || c.Code != cdplace.CodeSuccess {
			continue
		}
		g := group{clique: cl}
		if topoKey != "" {
			v, ok := n.Labels[topoKey]
			if !ok {
				continue
			}
			g.value = v
		}
		byGroup[g] = append(byGroup[g], ni)
	}
	groups := make([]group, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.clique, b.clique), cmp.Compare(a.value, b.value))
	})
	placements := make([]*fwk.Placement, 0, len(groups))
	scores := make(map[*fwk.Placement]int64, len(groups))
	for _, g := range groups {
		name := g.clique
		if topoKey != "" {
			name += "/" + topoKey + "=" + g.value
		}
		pl := &fwk.Placement{Name: name, Nodes: byGroup[g]}
		placements = append(placements, pl)
		scores[pl] = min(max(int64(d.Cliques[g.clique].Score), fwk.MinScore), fwk.MaxScore)
	}
	return placements, scores
}

// spanningPlacement is the one placement of a domain the policy lays out across several cliques
// (an exclusive decision offering more than one), or nil for any other decision.
func spanningPlacement(d *cdplace.Decision, parent *fwk.Placement, cliqueLabel string) (*fwk.Placement, int64) {
	if !d.Exclusive {
		return nil, 0
	}
	var offered []string
	for c, v := range d.Cliques {
		if v.Code == cdplace.CodeSuccess {
			offered = append(offered, c)
		}
	}
	if len(offered) < 2 {
		return nil, 0
	}
	slices.Sort(offered)
	var nodes []fwk.NodeInfo
	for _, ni := range parent.Nodes {
		if n := ni.Node(); n != nil && slices.Contains(offered, n.Labels[cliqueLabel]) {
			nodes = append(nodes, ni)
		}
	}
	if len(nodes) == 0 {
		return nil, 0
	}
	return &fwk.Placement{Name: strings.Join(offered, "+"), Nodes: nodes}, fwk.MaxScore
}

// ScorePlacement implements fwk.PlacementScorePlugin: a ComputeDomain PodGroup's placement
// scores its clique's score in the policy's decision (best fit scores highest); any other
// PodGroup's placements all score the same (MinScore), leaving the ranking to other plugins.
func (p *Plugin) ScorePlacement(ctx context.Context, state fwk.PlacementCycleState, pg fwk.PodGroupInfo, a *fwk.PodGroupAssignments) (int64, *fwk.Status) {
	if state == nil || a == nil || a.Placement == nil {
		return 0, fwk.AsStatus(errors.New("computedomain: ScorePlacement needs a placement cycle state and a placement"))
	}
	pgState := state.GetPodGroupSchedulingCycle()
	if pgState == nil {
		return 0, fwk.AsStatus(errors.New("computedomain: ScorePlacement: the placement's cycle state has no pod group cycle state"))
	}
	data, err := pgState.Read(placementStateKey)
	if errors.Is(err, fwk.ErrNotFound) {
		return fwk.MinScore, nil
	}
	if err != nil {
		return 0, fwk.AsStatus(fmt.Errorf("computedomain: reading %q from the pod group cycle state: %w", placementStateKey, err))
	}
	s, ok := data.(*placementState)
	if !ok {
		return 0, fwk.AsStatus(fmt.Errorf("computedomain: %q in the pod group cycle state is a %T", placementStateKey, data))
	}
	score, ok := s.scores[a.Placement]
	if !ok {
		return 0, fwk.AsStatus(fmt.Errorf("computedomain: placement %q of PodGroup %s/%s (ComputeDomain %s) was not generated by %s",
			a.Placement.Name, pg.GetNamespace(), pg.GetName(), s.domain, Name))
	}
	// V(2) like the placements it generated: once per placement of a ComputeDomain group.
	klog.FromContext(ctx).V(2).Info("ComputeDomainPlacement scored placement", "podGroup", klog.KRef(pg.GetNamespace(), pg.GetName()), "placement", a.Placement.Name, "score", score)
	return score, nil
}

// PlacementScoreExtensions implements fwk.PlacementScorePlugin.
func (p *Plugin) PlacementScoreExtensions() fwk.PlacementScoreExtensions { return p }

// NormalizePlacementScore implements fwk.PlacementScoreExtensions: a ComputeDomain PodGroup's
// feasible placements are spread over [MinScore, MaxScore] in the policy's order (best fit
// MaxScore, worst MinScore). The policy's clique scores are ranks (100, 99, ...); left as they
// are, one rank weighs less than NodeResourcesFit's or PodGroupPodsCount's placement scores, so
// best fit would not decide. Other PodGroups' scores are left as they are (all MinScore).
func (p *Plugin) NormalizePlacementScore(_ context.Context, state fwk.PodGroupCycleState, _ fwk.PodGroupInfo, scores []fwk.PlacementScore) *fwk.Status {
	if state == nil {
		return fwk.AsStatus(errors.New("computedomain: NormalizePlacementScore needs the pod group cycle state"))
	}
	if _, err := state.Read(placementStateKey); err != nil || len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = fwk.MaxScore
			continue
		}
		scores[i].Score = fwk.MinScore + (scores[i].Score-lo)*(fwk.MaxScore-fwk.MinScore)/(hi-lo)
	}
	return nil
}
