package computedomain

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
	"github.com/cdplace/cdplace/host-shim/go/internal/owners"
)

// A domain's size, for workloads written the way users write them, comes from the object that
// owns its pods (internal/owners: a Job's parallelism, a StatefulSet's replicas, a JobSet's
// replicated Jobs, ...). Every pod the view has names its top-level owner's key; for each key
// some sent pod names, the feed sends that owner's size as an Owner record, and sends it again
// when the owner object changes (a Job scaled down while its domain waits). An owner not in the
// informer cache yet is not sent: the policy then makes a domain that has not started wait for
// it rather than start with a guessed size. When an owner record changes, the pending pods that
// name it are moved back to the active queue (the scheduler has no event of its own for it).

// ownerSource resolves pods to owners and owners to sizes (an *owners.Resolver).
type ownerSource interface {
	KeyOf(pod *v1.Pod) string
	Fact(key string) (owners.Fact, error)
}

func ownerObjKey(key string) objKey { return objKey{kind: cdplace.KindOwner, name: key} }

// podFactOf extracts a pod's facts with its owner key resolved to the top-level workload (or
// none when no owner source is configured: a key with no size behind it would make its domain
// wait for good).
func (f *feed) podFactOf(p *v1.Pod) (facts.Pod, error) {
	fact, err := facts.PodOf(p, f.keys)
	if err != nil {
		return fact, err
	}
	fact.Owner = nil
	if f.owners != nil {
		if k := f.owners.KeyOf(p); k != "" {
			fact.Owner = &k
		}
	}
	return fact, nil
}

// linkOwnerLocked files a pod under the owner key it names while the view has it (want ""
// unlinks it); the first pod naming a key sends the owner's record, the last one to go removes it.
func (f *feed) linkOwnerLocked(pod nsName, e *podEntry, want string) {
	if e.ownerKey == want {
		return
	}
	if old := e.ownerKey; old != "" {
		dropIndex(f.podsByOwner, old, pod)
		if _, still := f.podsByOwner[old]; !still {
			f.removeLocked(ownerObjKey(old))
		}
	}
	e.ownerKey = want
	if want == "" {
		return
	}
	first := f.podsByOwner[want] == nil
	addIndex(f.podsByOwner, want, pod)
	if first {
		f.syncOwnerLocked(want)
	}
}

// syncOwnerLocked queues the owner's size when it changed; it reports whether it queued one.
func (f *feed) syncOwnerLocked(key string) bool {
	k := ownerObjKey(key)
	fact, err := f.owners.Fact(key)
	switch {
	case errors.Is(err, owners.ErrUnknownOwner):
		f.removeLocked(k)
		return false
	case err != nil:
		f.failedLocked(k, err, nil, f.podDomainsLocked(f.podsByOwner[key])...)
		return false
	}
	f.validLocked(k)
	size := fact.Size
	f.scratch = cdplace.AppendOwner(f.scratch[:0], &facts.Owner{Key: key, Size: &size, Source: fact.Source})
	return f.putLocked(k, f.scratch)
}

// ownerChanged is the owner informers' callback: an owner object was added, changed or deleted.
// When a pod of the view names it and its record changed, that pod is woken.
func (f *feed) ownerChanged(key string) {
	f.mu.Lock()
	pods := f.podsByOwner[key]
	var wake []nsName
	if len(pods) > 0 && f.syncOwnerLocked(key) {
		for p := range pods {
			wake = append(wake, p)
		}
	}
	f.unlockAndWake(wake)
}

// podDomainsLocked are the ComputeDomains of the tracked pods among keys.
func (f *feed) podDomainsLocked(keys map[nsName]struct{}) []string {
	var out []string
	for k := range keys {
		if e := f.pods[k]; e != nil {
			if d := f.podDomainLocked(e.fact.Namespace, e.fact.Claims); d != "" {
				out = append(out, d)
			}
		}
	}
	return out
}
