package computedomain

import (
	"bytes"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// The feed's handlers for every kind but pods (feed_pods.go): extract, encode, queue if changed.

func (f *feed) upsertNode(n *v1.Node) {
	k := objKey{kind: cdplace.KindNode, name: n.Name}
	fact, err := facts.NodeOf(n, f.keys)
	f.mu.Lock()
	if f.admitLocked(k, n, true) != nil {
		// A deleted UID or an older version (feed_versions.go).
		f.mu.Unlock()
		return
	}
	f.index.put(n, n.Labels[f.keys.CliqueLabel])
	if err != nil {
		f.failedLocked(k, err, n)
		f.setCliqueLocked(n.Name, "")
	} else {
		f.validLocked(k)
		f.scratch = cdplace.AppendNode(f.scratch[:0], &fact)
		f.putLocked(k, f.scratch)
		label := ""
		if fact.CliqueLabel != nil {
			label = *fact.CliqueLabel
		}
		f.setCliqueLocked(n.Name, label)
	}
	f.mu.Unlock()
	f.flushIfFull()
}

func (f *feed) deleteNode(name string, uid types.UID) {
	k := objKey{kind: cdplace.KindNode, name: name}
	f.mu.Lock()
	f.validLocked(k)
	f.buryLocked(k, uid)
	f.removeLocked(k)
	f.setCliqueLocked(name, "")
	f.index.remove(name)
	f.mu.Unlock()
	f.flushIfFull()
}

// setCliqueLocked records a node's clique label value ("" for none); when the node gains or
// loses one, the pods on it are re-evaluated (a pod on a tray of no clique is not sent).
func (f *feed) setCliqueLocked(node, label string) {
	had := f.cliqueNodes[node] != ""
	if label != "" {
		f.cliqueNodes[node] = label
	} else {
		delete(f.cliqueNodes, node)
	}
	if had != (label != "") {
		f.resyncLocked(f.podsByNode[node])
	}
}

func (f *feed) upsertClaim(c *resourceapi.ResourceClaim) {
	k := objKey{kind: cdplace.KindResourceClaim, namespace: c.Namespace, name: c.Name}
	fact, err := facts.ClaimOf(c, f.keys)
	f.mu.Lock()
	if f.admitLocked(k, c, true) != nil {
		// A deleted UID or an older version (feed_versions.go).
		f.mu.Unlock()
		return
	}
	if err != nil {
		f.failedLocked(k, err, c, f.claimDomains[nsName{c.Namespace, c.Name}].domain)
	} else {
		f.validLocked(k)
		f.scratch = cdplace.AppendClaim(f.scratch[:0], &fact)
		allocated := fact.AllocatedGPUs != nil && *fact.AllocatedGPUs > 0
		if !claimCarriesNoFact(&fact) {
			delete(f.nullClaims, k)
			f.queueLocked(k, f.scratch, f.steerKeepsClaimLocked(nsName{c.Namespace, c.Name}, &fact, f.claimAllocated[k] && !allocated))
			if allocated {
				f.claimAllocated[k] = true
			} else {
				delete(f.claimAllocated, k)
			}
		} else {
			delete(f.claimAllocated, k)
			if last, ok := f.nullClaims[k]; !ok || !bytes.Equal(last, f.scratch) {
				f.nullClaims[k] = bytes.Clone(f.scratch)
			}
			if f.claimUsedInViewLocked(nsName{c.Namespace, c.Name}) {
				f.putLocked(k, f.scratch)
			} else {
				f.removeLocked(k)
			}
		}
	}
	f.setDomainLocked(f.claimDomains, f.podsByClaim, nsName{c.Namespace, c.Name}, fact.Domain, fact.Daemon, err == nil)
	f.mu.Unlock()
	f.flushIfFull()
}

func (f *feed) upsertTemplate(t *resourceapi.ResourceClaimTemplate) {
	k := objKey{kind: cdplace.KindResourceClaimTemplate, namespace: t.Namespace, name: t.Name}
	fact, err := facts.TemplateOf(t, f.keys)
	f.mu.Lock()
	if f.admitLocked(k, t, true) != nil {
		// A deleted UID or an older version (feed_versions.go).
		f.mu.Unlock()
		return
	}
	if err != nil {
		f.failedLocked(k, err, t, f.templateDomains[nsName{t.Namespace, t.Name}].domain)
	} else {
		f.validLocked(k)
		f.scratch = cdplace.AppendTemplate(f.scratch[:0], &fact)
		f.putLocked(k, f.scratch)
	}
	f.setDomainLocked(f.templateDomains, f.podsByTemplate, nsName{t.Namespace, t.Name}, fact.Domain, fact.Daemon, err == nil)
	f.mu.Unlock()
	f.flushIfFull()
}

// deleteClaimLike removes a claim or template.
func (f *feed) deleteClaimLike(kind cdplace.Kind, namespace, name string, uid types.UID) {
	k := objKey{kind: kind, namespace: namespace, name: name}
	f.mu.Lock()
	f.validLocked(k)
	f.buryLocked(k, uid)
	f.removeLocked(k)
	delete(f.nullClaims, k)
	delete(f.claimAllocated, k)
	if kind == cdplace.KindResourceClaim {
		f.setDomainLocked(f.claimDomains, f.podsByClaim, nsName{namespace, name}, nil, false, false)
	} else {
		f.setDomainLocked(f.templateDomains, f.podsByTemplate, nsName{namespace, name}, nil, false, false)
	}
	f.mu.Unlock()
	f.flushIfFull()
}

// claimCarriesNoFact reports whether a claim is nothing to the policy but a name its pods use:
// no ComputeDomain, no demand on the GPU driver and no GPU allocated (another driver's claim).
func claimCarriesNoFact(c *facts.Claim) bool {
	return c.Domain == nil && c.GPUs == (facts.GPUDemand{}) && (c.AllocatedGPUs == nil || *c.AllocatedGPUs == 0)
}

// claimUsedInViewLocked reports whether a pod of the view names the claim.
func (f *feed) claimUsedInViewLocked(claim nsName) bool {
	for pod := range f.podsByClaim[claim] {
		if f.hasLocked(podKey(pod)) {
			return true
		}
	}
	return false
}

// releaseClaimsLocked sends the fact-less claims of a pod about to enter the view, ahead of it.
func (f *feed) releaseClaimsLocked(e *podEntry, steerKeeps bool) {
	for _, c := range e.claims {
		k := claimKey(c)
		if rec, ok := f.nullClaims[k]; ok {
			f.queueLocked(k, rec, steerKeeps)
		}
	}
}

// steerKeepsClaimLocked reports whether sending a claim's record leaves the steering answers
// valid: a claim of no ComputeDomain, neither before nor now, that frees no GPUs, whose pods in
// the view are all without a ComputeDomain and pending or placed (or assumed) on trays of stable
// cliques: its allocation only adds GPUs in use where a plain pod may go (feed.steerSeq).
func (f *feed) steerKeepsClaimLocked(claim nsName, fact *facts.Claim, frees bool) bool {
	if frees || fact.Domain != nil || fact.Daemon || !f.steerKeepsOnLocked("") {
		return false
	}
	if _, had := f.claimDomains[claim]; had {
		return false
	}
	for pod := range f.podsByClaim[claim] {
		if !f.hasLocked(podKey(pod)) {
			continue
		}
		e := f.pods[pod]
		if e == nil || f.computeDomainPodLocked(e) || !f.steerKeepsPodLocked(e, e.placedOn()) {
			return false
		}
	}
	return true
}

// recheckClaimsLocked notes the claims of a pod that is leaving the view, or stops naming them.
func (f *feed) recheckClaimsLocked(e *podEntry) {
	f.recheck = append(f.recheck, e.claims...)
	if len(f.recheck) > recheckMax {
		f.settleClaimsLocked()
	}
}

// recheckMax bounds recheck between flushes.
const recheckMax = 4096

// settleClaimsLocked removes from the view the fact-less claims in recheck that no pod of the
// view names any more.
func (f *feed) settleClaimsLocked() {
	for _, c := range f.recheck {
		k := claimKey(c)
		if _, null := f.nullClaims[k]; null && !f.claimUsedInViewLocked(c) {
			f.removeLocked(k)
		}
	}
	f.recheck = f.recheck[:0]
}

// setDomainLocked records the domain a claim or template names; when that changes (or the
// object appears or goes), the pods naming it are re-evaluated: they may have become, or
// stopped being, ComputeDomain pods.
func (f *feed) setDomainLocked(m map[nsName]domainRef, pods map[nsName]map[nsName]struct{}, k nsName, domain *string, daemon, exists bool) {
	old, had := m[k]
	if domain != nil {
		m[k] = domainRef{domain: *domain, daemon: daemon}
	} else {
		delete(m, k)
	}
	now, has := m[k]
	if had != has || old != now || !exists {
		f.resyncLocked(pods[k])
	}
}

func (f *feed) upsertSlice(s *resourceapi.ResourceSlice) {
	k := objKey{kind: cdplace.KindResourceSlice, name: s.Name}
	fact, err := facts.SliceOf(s, f.keys)
	f.mu.Lock()
	if f.admitLocked(k, s, true) != nil {
		f.mu.Unlock()
		return
	}
	switch {
	case err != nil:
		f.failedLocked(k, err, s)
	case fact.Empty():
		// Another driver's slice, or not node-local: nothing for the policy.
		f.removeLocked(k)
	default:
		f.validLocked(k)
		f.scratch = cdplace.AppendSlice(f.scratch[:0], &fact)
		f.putLocked(k, f.scratch)
	}
	f.mu.Unlock()
	f.flushIfFull()
}

func (f *feed) upsertDomain(u *unstructured.Unstructured) {
	k := objKey{kind: cdplace.KindComputeDomain, namespace: u.GetNamespace(), name: u.GetName()}
	fact, err := facts.DomainOf(u, f.keys)
	f.mu.Lock()
	if f.admitLocked(k, u, true) != nil {
		f.mu.Unlock()
		return
	}
	if err != nil {
		f.failedLocked(k, err, u, string(u.GetUID()))
	} else {
		f.validLocked(k)
		f.scratch = cdplace.AppendDomain(f.scratch[:0], &fact)
		f.putLocked(k, f.scratch)
	}
	f.mu.Unlock()
	f.flushIfFull()
}

// deleteObject removes an object of a kind that indexes nothing (slices, domains, PodGroups).
func (f *feed) deleteObject(kind cdplace.Kind, namespace, name string, uid types.UID) {
	k := objKey{kind: kind, namespace: namespace, name: name}
	f.mu.Lock()
	f.validLocked(k)
	f.buryLocked(k, uid)
	f.removeLocked(k)
	f.mu.Unlock()
	f.flushIfFull()
}
