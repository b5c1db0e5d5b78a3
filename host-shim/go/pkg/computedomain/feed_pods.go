package computedomain

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Which pods the view has. A pod is sent when it is a ComputeDomain pod, or when it is placed
// (nodeName, else its nominated node) on a node with a clique label and uses GPUs or claims:
// only those change what the policy decides. Every other pod is never sent, or removed once
// it stops qualifying. The feed tracks every pod that has claims or names the GPU resource,
// sent or not, so that a node gaining or losing its clique label, or a claim or template
// gaining or losing its domain, re-evaluates exactly the pods concerned.

// podEntry is a tracked pod.
type podEntry struct {
	fact facts.Pod
	// The index keys it is filed under.
	node      string
	claims    []nsName
	templates []nsName
	// pinned: PreFilter found it a ComputeDomain pod (perhaps from the listers, before the
	// feed had its claims' facts).
	pinned bool
	// assumed: Reserve counted it on a node.
	assumed bool
	// probed: sent as it was for one preemption dry run (placeable), to be re-evaluated by its
	// next update, whatever that changes.
	probed bool
	// ownerKey is the owner key it is filed under in podsByOwner ("" while not in the view).
	ownerKey string
	// sentNode is the node of the record last sent ("" for none, or while not in the view).
	sentNode string
	// assumedNode is the node Reserve counted it on (while assumed).
	assumedNode string
}

// placedOn is the pod's node: its nodeName, else its nominated node, else the node Reserve
// assumed it on; "" for none.
func (e *podEntry) placedOn() string {
	if n := e.fact.Node(); n != "" || !e.assumed {
		return n
	}
	return e.assumedNode
}

func podKey(k nsName) objKey {
	return objKey{kind: cdplace.KindPod, namespace: k.namespace, name: k.name}
}

func claimKey(k nsName) objKey {
	return objKey{kind: cdplace.KindResourceClaim, namespace: k.namespace, name: k.name}
}

func (f *feed) upsertPod(p *v1.Pod) {
	key := nsName{p.Namespace, p.Name}
	uses := facts.UsesGPUsOrClaims(p, f.keys)
	f.mu.Lock()
	same := f.sameUIDLocked(podKey(key), p.UID)
	// A deleted UID or an older version is dropped (feed_versions.go); only pods that could
	// enter the view keep their version.
	if err := f.admitLocked(podKey(key), p, uses); err != nil {
		f.mu.Unlock()
		return
	}
	if !same {
		// A new pod under the name: nothing of the old one's entry (pinned, assumed) carries over.
		f.untrackLocked(key)
	}
	if uses && f.pods[key] == nil && unfiled(p) {
		// Its version is kept (above), nothing else: see unfiled.
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	if !uses || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		// Holds no GPU (or nothing any more): never in the view.
		f.mu.Lock()
		f.validLocked(podKey(key))
		f.untrackLocked(key)
		f.removeLocked(podKey(key))
		f.mu.Unlock()
		f.flushIfFull()
		return
	}
	fact, err := f.podFactOf(p)
	f.mu.Lock()
	switch e := f.pods[key]; {
	case err != nil:
		f.untrackLocked(key)
		f.failedLocked(podKey(key), err, p, f.podDomainLocked(p.Namespace, facts.PodClaims(p)))
	case e != nil && !e.probed && f.sameUIDLocked(podKey(key), p.UID) && e.fact.Equal(&fact):
		// No fact changed (a condition, a heartbeat, an annotation): nothing to re-file or send.
		// A pod that failed to parse has no entry, so an entry here is a valid one.
	default:
		f.validLocked(podKey(key))
		f.syncPodLocked(f.trackLocked(key, fact))
	}
	f.mu.Unlock()
	f.flushIfFull()
}

// unfiled reports whether a pod that uses GPUs needs no entry yet: it is not placed (no
// nodeName, no nominated node), names no claim and no PodGroup. Such a pod holds no tray, cannot
// be a ComputeDomain pod, and no node label, claim, template or PodGroup change can make it
// relevant, so the feed files it only once it is placed: by its bound update, or by Reserve
// and preemption's dry runs, which take the scheduler's copy (placeable). Most GPU pods are
// added this way, and their add event costs one version check.
func unfiled(p *v1.Pod) bool {
	return p.Spec.NodeName == "" && p.Status.NominatedNodeName == "" && len(p.Spec.ResourceClaims) == 0 &&
		p.Spec.SchedulingGroup == nil
}

func (f *feed) deletePod(namespace, name string, uid types.UID) {
	key := nsName{namespace, name}
	f.mu.Lock()
	f.validLocked(podKey(key))
	f.buryLocked(podKey(key), uid)
	f.untrackLocked(key)
	f.removeLocked(podKey(key))
	gone := f.podGone
	f.mu.Unlock()
	if gone != nil {
		gone(key)
	}
	f.flushIfFull()
}

// trackLocked files the pod's latest facts and indexes; an index entry is touched only where
// the pod's node, claims or templates changed (most updates change one of them, or none).
func (f *feed) trackLocked(key nsName, fact facts.Pod) *podEntry {
	e := f.pods[key]
	if e == nil {
		e = &podEntry{}
		f.pods[key] = e
	}
	if node := fact.Node(); node != e.node {
		if e.node != "" {
			dropIndex(f.podsByNode, e.node, key)
		}
		if node != "" {
			addIndex(f.podsByNode, node, key)
		}
		e.node = node
	}
	if !sameRefs(e, &fact) {
		if f.hasLocked(podKey(key)) {
			f.recheckClaimsLocked(e)
		}
		f.dropRefsLocked(key, e)
		e.claims, e.templates = e.claims[:0], e.templates[:0]
		for i := range fact.Claims {
			c := &fact.Claims[i]
			if name := claimName(c); name != "" {
				e.claims = append(e.claims, nsName{fact.Namespace, name})
			}
			if c.Template != nil {
				e.templates = append(e.templates, nsName{fact.Namespace, *c.Template})
			}
		}
		for _, c := range e.claims {
			addIndex(f.podsByClaim, c, key)
		}
		for _, t := range e.templates {
			addIndex(f.podsByTemplate, t, key)
		}
	}
	e.fact = fact
	return e
}

// sameRefs reports whether the claims and templates a pod's facts name are those it is filed
// under.
func sameRefs(e *podEntry, fact *facts.Pod) bool {
	nc, nt := 0, 0
	for i := range fact.Claims {
		c := &fact.Claims[i]
		if name := claimName(c); name != "" {
			if nc >= len(e.claims) || e.claims[nc] != (nsName{fact.Namespace, name}) {
				return false
			}
			nc++
		}
		if c.Template != nil {
			if nt >= len(e.templates) || e.templates[nt] != (nsName{fact.Namespace, *c.Template}) {
				return false
			}
			nt++
		}
	}
	return nc == len(e.claims) && nt == len(e.templates)
}

func (f *feed) untrackLocked(key nsName) {
	if e := f.pods[key]; e != nil {
		if f.hasLocked(podKey(key)) {
			f.recheckClaimsLocked(e)
		}
		f.unindexLocked(key, e)
		f.linkOwnerLocked(key, e, "")
		delete(f.pods, key)
	}
}

// unindexLocked drops the pod from the indexes by its node, claims and templates.
func (f *feed) unindexLocked(key nsName, e *podEntry) {
	if e.node != "" {
		dropIndex(f.podsByNode, e.node, key)
	}
	f.dropRefsLocked(key, e)
}

// dropRefsLocked drops the pod from the indexes by its claims and templates.
func (f *feed) dropRefsLocked(key nsName, e *podEntry) {
	for _, c := range e.claims {
		dropIndex(f.podsByClaim, c, key)
	}
	for _, t := range e.templates {
		dropIndex(f.podsByTemplate, t, key)
	}
}

func addIndex[K comparable](m map[K]map[nsName]struct{}, k K, pod nsName) {
	s := m[k]
	if s == nil {
		s = map[nsName]struct{}{}
		m[k] = s
	}
	s[pod] = struct{}{}
}

func dropIndex[K comparable](m map[K]map[nsName]struct{}, k K, pod nsName) {
	if s := m[k]; s != nil {
		delete(s, pod)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// relevantLocked reports whether the view should have the pod (see the top of this file), and
// whether it is a ComputeDomain pod.
func (f *feed) relevantLocked(e *podEntry) (relevant, cd bool) {
	if cd = f.computeDomainPodLocked(e); cd || e.assumed {
		return true, cd
	}
	node := e.node
	return node != "" && f.cliqueNodes[node] != "" && (e.fact.GPUs > 0 || len(e.fact.Claims) > 0), false
}

// computeDomainPodLocked reports whether a tracked pod is a ComputeDomain pod: PreFilter found
// it one, or its claims name a domain.
func (f *feed) computeDomainPodLocked(e *podEntry) bool {
	if e.pinned {
		return true
	}
	f.rbuf = f.resolveLocked(e.fact.Namespace, e.fact.Claims, f.rbuf)
	_, cd := classify(f.rbuf)
	return cd
}

// syncPodLocked sends the pod's record if it is relevant and changed, or removes it.
func (f *feed) syncPodLocked(e *podEntry) {
	key := objKey{kind: cdplace.KindPod, namespace: e.fact.Namespace, name: e.fact.Name}
	pod := nsName{e.fact.Namespace, e.fact.Name}
	e.probed = false
	if relevant, cd := f.relevantLocked(e); relevant {
		node := e.fact.Node()
		keeps := !cd && f.steerKeepsPodLocked(e, node)
		f.releaseClaimsLocked(e, keeps)
		f.scratch = cdplace.AppendPod(f.scratch[:0], &e.fact)
		f.queueLocked(key, f.scratch, keeps)
		e.sentNode = node
		owner := ""
		if e.fact.Owner != nil {
			owner = *e.fact.Owner
		}
		f.linkOwnerLocked(pod, e, owner)
	} else {
		if f.hasLocked(key) {
			f.recheckClaimsLocked(e)
		}
		f.removeLocked(key)
		e.sentNode = ""
		f.linkOwnerLocked(pod, e, "")
	}
}

// steerKeepsPodLocked reports whether sending the record of a pod without a ComputeDomain with
// node leaves the steering answers valid: pending or placed on a tray of a stable clique, and not
// moved there from another node (which would free a tray).
func (f *feed) steerKeepsPodLocked(e *podEntry, node string) bool {
	return (e.sentNode == "" || e.sentNode == node) && f.steerKeepsOnLocked(node)
}

// resyncLocked re-evaluates the pods of an index entry.
func (f *feed) resyncLocked(pods map[nsName]struct{}) {
	for k := range pods {
		if e := f.pods[k]; e != nil {
			f.syncPodLocked(e)
		}
	}
}

// ensurePod makes sure the view has a ComputeDomain pod PreFilter is about to decide: the
// informer may not have delivered it yet, or the feed classified it before its claims' facts
// arrived. The feed's own copy wins when it has one of the same UID (the informer is the source
// of truth); the scheduler's copy of a pod the informer deleted, or older than the feed's, is
// refused (feed_versions.go).
func (f *feed) ensurePod(p *v1.Pod) error {
	key := nsName{p.Namespace, p.Name}
	k := podKey(key)
	f.mu.Lock()
	e := f.pods[key]
	if e != nil && !f.sameUIDLocked(k, p.UID) {
		e = nil // a new pod under the name: the scheduler's copy is the newer one
	}
	if e != nil && e.pinned && f.hasLocked(k) {
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	var fact facts.Pod
	if e == nil {
		var err error
		if fact, err = f.podFactOf(p); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e = f.pods[key]; e == nil || !f.sameUIDLocked(k, p.UID) {
		if err := f.admitLocked(k, p, true); err != nil {
			return err
		}
		if fact.Name == "" { // the feed had an entry of the same UID when the lock was released
			var err error
			if fact, err = f.podFactOf(p); err != nil {
				return err
			}
		}
		f.untrackLocked(key)
		e = f.trackLocked(key, fact)
	}
	e.pinned = true
	f.syncPodLocked(e)
	return nil
}

// podInView reports whether the view has the pod.
func (f *feed) podInView(namespace, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hasLocked(podKey(nsName{namespace, name}))
}

// placeable reports whether a pod that is not in the view would count if placed on node: it
// has claims or GPUs and the node has a clique label. If so it is put into the view (as the
// informer last showed it, or as given) and true is returned; assume marks it assumed too.
func (f *feed) placeable(p *v1.Pod, node string, assume bool) (bool, error) {
	key := nsName{p.Namespace, p.Name}
	k := podKey(key)
	f.mu.Lock()
	e, sent := f.pods[key], f.hasLocked(k)
	if !f.sameUIDLocked(k, p.UID) {
		e, sent = nil, false // a new pod under the name: the given copy is the newer one
	}
	if !sent && (f.cliqueNodes[node] == "" || !facts.UsesGPUsOrClaims(p, f.keys)) {
		f.mu.Unlock()
		return false, nil
	}
	f.mu.Unlock()
	var fact facts.Pod
	if e == nil {
		var err error
		if fact, err = f.podFactOf(p); err != nil {
			return false, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e = f.pods[key]; e == nil || !f.sameUIDLocked(k, p.UID) {
		// The given copy: refused when the informer deleted the pod or delivered a newer one.
		if err := f.admitLocked(k, p, true); err != nil {
			return false, err
		}
		if fact.Name == "" {
			var err error
			if fact, err = f.podFactOf(p); err != nil {
				return false, err
			}
		}
		f.untrackLocked(key)
		e = f.trackLocked(key, fact)
	}
	if assume {
		e.assumed, e.assumedNode = true, node
		f.syncPodLocked(e)
	} else if !f.hasLocked(podKey(key)) {
		// For one preemption dry run: sent as it is, removed by its next update if it does not
		// qualify by then.
		f.releaseClaimsLocked(e, false)
		f.scratch = cdplace.AppendPod(f.scratch[:0], &e.fact)
		f.putLocked(podKey(key), f.scratch)
		e.probed = true
	}
	return true, nil
}

// unassume clears the assumed mark and reports whether there was one; the pod is re-evaluated
// after the caller's Forget (forgotten first, then perhaps removed).
func (f *feed) unassume(namespace, name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.pods[nsName{namespace, name}]
	if e == nil || !e.assumed {
		return false
	}
	e.assumed, e.assumedNode = false, ""
	return true
}

// resyncPod re-evaluates one pod.
func (f *feed) resyncPod(namespace, name string) {
	f.mu.Lock()
	if e := f.pods[nsName{namespace, name}]; e != nil {
		f.syncPodLocked(e)
	}
	f.mu.Unlock()
}

func claimName(c *facts.PodClaim) string {
	if c.Generated != nil {
		return *c.Generated
	}
	if c.Claim != nil {
		return *c.Claim
	}
	return ""
}
