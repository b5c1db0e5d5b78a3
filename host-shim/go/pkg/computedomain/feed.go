package computedomain

import (
	"bytes"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Flush thresholds of the pending batch: past either, the handler that queued the record
// applies the batch itself.
const (
	flushRecords = 4096
	flushBytes   = 1 << 20
)

// spareBytes is the largest batch buffer kept for reuse after it was applied.
const spareBytes = 64 << 10

// objKey names an object of the view.
type objKey struct {
	kind            cdplace.Kind
	namespace, name string
}

// nsName is a namespaced name.
type nsName struct{ namespace, name string }

// domainRef is a claim's or template's ComputeDomain, when it names one.
type domainRef struct {
	domain string
	daemon bool
}

// feed keeps the policy's cluster view current from the informers: handlers extract facts in
// Go (internal/facts), encode each object's record, drop it when it equals the record last sent
// for that object, and queue it. The queue crosses into the library as one batch before any
// PreFilter, Reserve or Unreserve call, or when it passes flushRecords or flushBytes.
type feed struct {
	cluster *cdplace.Cluster
	keys    facts.Keys
	logger  klog.Logger

	// flushMu orders batches: the one holding it takes the pending batch and applies it.
	flushMu sync.Mutex

	mu sync.Mutex
	// records is the last record sent (queued) per object; an object without one is not in the view.
	records map[objKey][]byte
	// errored is the last extraction error logged per object (logged once per text).
	errored map[objKey]string
	// invalid are the objects whose last version failed to parse (failedLocked); event reports
	// one as a Kubernetes Event, revalidated is told of a domain left with none (both nil in
	// tests that build a bare feed).
	invalid     map[objKey]invalidObject
	event       func(obj runtime.Object, note string)
	revalidated func(domain string)
	// podGone is told of every pod deletion the feed takes, after its lock is released (nil in
	// tests that build a bare feed): waking forgets the pod.
	podGone func(key nsName)
	// versions is the UID and resourceVersion last taken per pod (that uses GPUs or claims) and
	// claim; tombs the UIDs of deleted ones (feed_versions.go). now is the clock (tests).
	versions map[objKey]objVersion
	tombs    *tombstones
	now      func() time.Time
	pending  cdplace.Batch
	// spare is the buffer of the last batch applied, emptied, for the next one (under flushMu).
	spare   cdplace.Batch
	scratch []byte
	rbuf    []resolved
	// seq changes whenever the view will change: every queued record, Assume and Forget.
	seq uint64
	// steerSeq is seq but for the changes that leave the last steering answers valid: a pod
	// without a ComputeDomain sent with no node, or placed on a tray of a clique every steering
	// answer at steerSeq marked stable (steer.go). stable are those cliques' label values,
	// valid while stableAt == steerSeq.
	steerSeq uint64
	stable   map[string]bool
	stableAt uint64
	// claimAllocated are the claims whose last record sent has GPUs allocated: a record without
	// them frees GPUs (steerKeepsClaimLocked).
	claimAllocated map[objKey]bool
	// queued counts records queued since start (tests).
	queued uint64

	// nullClaims are the records of the claims that carry no policy fact (no domain, no GPUs:
	// another driver's claims). Such a claim matters to the policy only as a claim of a pod in the
	// view, so it is in the view exactly while such a pod names it: it crosses with the first of
	// them (releaseClaimsLocked) and is removed once none is left (settleClaimsLocked, run before
	// every flush and dump, over the claims in recheck). Pods that stay out of the view never
	// make their claims cross.
	nullClaims map[objKey][]byte
	recheck    []nsName

	// Facts the classification reads: claims and templates that name a domain.
	claimDomains    map[nsName]domainRef
	templateDomains map[nsName]domainRef
	// cliqueNodes are the nodes with a non-empty clique label, with its value.
	cliqueNodes map[string]string
	// index maps the node objects taken to their clique label values, for Filter and Score
	// (nodeindex.go).
	index *cliqueIndex
	// pods are the pods that have claims or name the GPU resource, sent or not, with indexes to
	// re-evaluate them when their node's label or their claims' facts change.
	pods           map[nsName]*podEntry
	podsByNode     map[string]map[nsName]struct{}
	podsByClaim    map[nsName]map[nsName]struct{}
	podsByTemplate map[nsName]map[nsName]struct{}
	// owners resolves pods to the workload whose size counts (nil: no owner is sent);
	// podsByOwner files the pods of the view under the owner key they name (feed_owners.go).
	owners      ownerSource
	podsByOwner map[string]map[nsName]struct{}
	// activate moves pending pods back to the scheduler's active queue (nil in tests).
	activate func(pods []nsName)

	// marks are the objects QueueingHints queued pods for, caught up on from stores before the
	// next flush (feed_catchup.go).
	marks  marks
	stores stores

	// listers answer for claims and templates the handlers have not delivered yet.
	listers listers
	// synced reports whether the feed's informers delivered their initial lists.
	synced func() bool
}

func newFeed(logger klog.Logger, cluster *cdplace.Cluster, keys facts.Keys) *feed {
	return &feed{
		cluster:         cluster,
		keys:            keys,
		logger:          logger,
		records:         map[objKey][]byte{},
		nullClaims:      map[objKey][]byte{},
		claimAllocated:  map[objKey]bool{},
		errored:         map[objKey]string{},
		invalid:         map[objKey]invalidObject{},
		versions:        map[objKey]objVersion{},
		tombs:           newTombstones(tombstoneMax, tombstoneTTL),
		now:             time.Now,
		claimDomains:    map[nsName]domainRef{},
		templateDomains: map[nsName]domainRef{},
		cliqueNodes:     map[string]string{},
		index:           newCliqueIndex(),
		pods:            map[nsName]*podEntry{},
		podsByNode:      map[string]map[nsName]struct{}{},
		podsByClaim:     map[nsName]map[nsName]struct{}{},
		podsByTemplate:  map[nsName]map[nsName]struct{}{},
		podsByOwner:     map[string]map[nsName]struct{}{},
		synced:          func() bool { return true },
	}
}

// putLocked queues the record unless it equals the object's last one; it reports whether it
// queued it. The record is copied.
func (f *feed) putLocked(k objKey, record []byte) bool {
	return f.queueLocked(k, record, false)
}

// queueLocked is putLocked; steerKeeps says the change leaves the steering answers valid
// (steerSeq stays).
func (f *feed) queueLocked(k objKey, record []byte, steerKeeps bool) bool {
	if last, ok := f.records[k]; ok && bytes.Equal(last, record) {
		return false
	}
	f.records[k] = bytes.Clone(record)
	f.pending.Add(record)
	f.changedLocked(steerKeeps)
	f.queued++
	return true
}

// changedLocked counts a change of the view.
func (f *feed) changedLocked(steerKeeps bool) {
	f.seq++
	if !steerKeeps {
		f.steerSeq++
	}
}

// removeLocked queues the object's removal when the view has it.
func (f *feed) removeLocked(k objKey) {
	if _, ok := f.records[k]; !ok {
		return
	}
	delete(f.records, k)
	ns := k.namespace
	if !k.kind.Namespaced() {
		ns = ""
	}
	f.scratch = cdplace.AppendRemove(f.scratch[:0], k.kind, ns, k.name)
	f.pending.Add(f.scratch)
	f.changedLocked(false)
	f.queued++
}

// invalidFactsReason is the reason of the Warning Event on an object whose version failed to parse.
const invalidFactsReason = "InvalidFacts"

// failedLocked handles an object the policy cannot use (its version failed to parse): removed
// from the view so it never keeps a version that no longer exists, and recorded as invalid for
// the ComputeDomains it belongs to (domains), which fail closed until it parses again or goes:
// their pods get a reason naming the object and field rather than a decision on a view without
// it. Logged, and reported as a Warning Event InvalidFacts on obj, once per change (per error
// text: a redelivery of the same version, or a retry, adds nothing).
func (f *feed) failedLocked(k objKey, err error, obj runtime.Object, domains ...string) {
	field := ""
	if e, ok := err.(*facts.Error); ok {
		field = e.Field
	}
	reason := err.Error()
	if field != "" {
		reason += " (field " + field + ")"
	}
	if f.errored[k] != err.Error() {
		f.errored[k] = err.Error()
		kv := []any{"kind", k.kind.String(), "object", klog.KRef(k.namespace, k.name)}
		if field != "" {
			kv = append(kv, "field", field)
		}
		if len(domains) > 0 {
			kv = append(kv, "failedClosed", domains)
		}
		f.logger.Error(err, "ComputeDomainPlacement: object left out of the policy's view", kv...)
		if f.event != nil && obj != nil {
			f.event(obj, reason)
		}
	}
	// The domains it was filed under before stay failed too: a claim whose domain no longer
	// parses is still the one it named.
	old := f.invalid[k].domains
	ds := make([]string, 0, len(domains)+len(old))
	for _, d := range append(domains, old...) {
		if d != "" && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	f.invalid[k] = invalidObject{reason: reason, domains: ds}
	f.removeLocked(k)
}

// invalidObject is an object whose last version failed to parse.
type invalidObject struct {
	// reason names the object, the field and why.
	reason string
	// domains are the ComputeDomain UIDs that fail closed while it is invalid.
	domains []string
}

// validLocked records that the object parsed (or was deleted): it is no longer invalid, and a
// domain left with no invalid object is decided again (its rejected pods are activated).
func (f *feed) validLocked(k objKey) {
	delete(f.errored, k)
	inv, ok := f.invalid[k]
	if !ok {
		return
	}
	delete(f.invalid, k)
	for _, d := range inv.domains {
		if _, still := f.invalidReasonLocked(d); !still && f.revalidated != nil {
			go f.revalidated(d)
		}
	}
}

// invalidReason is why a domain fails closed: the first (by object) of its invalid objects.
func (f *feed) invalidReason(domain string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.invalidReasonLocked(domain)
}

func (f *feed) invalidReasonLocked(domain string) (string, bool) {
	best, found := "", false
	for _, inv := range f.invalid {
		if slices.Contains(inv.domains, domain) && (!found || inv.reason < best) {
			best, found = inv.reason, true
		}
	}
	return best, found
}

// invalidClaimOf is why a pod fails closed for a claim or template of its own whose version
// failed to parse: which domain it names cannot be known then, so the pod is neither decided
// nor let through as a plain pod. It also gives the domain the object named before it broke
// ("" for none), whose revalidation wakes the pod.
func (f *feed) invalidClaimOf(p *v1.Pod) (reason, domain string, invalid bool) {
	if len(p.Spec.ResourceClaims) == 0 {
		return "", "", false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.invalid) == 0 {
		return "", "", false
	}
	claims := facts.PodClaims(p)
	for i := range claims {
		c := &claims[i]
		keys := make([]objKey, 0, 2)
		if name := claimName(c); name != "" {
			keys = append(keys, objKey{kind: cdplace.KindResourceClaim, namespace: p.Namespace, name: name})
		}
		if c.Template != nil {
			keys = append(keys, objKey{kind: cdplace.KindResourceClaimTemplate, namespace: p.Namespace, name: *c.Template})
		}
		for _, k := range keys {
			if inv, ok := f.invalid[k]; ok {
				if len(inv.domains) > 0 {
					domain = inv.domains[0]
				}
				return inv.reason, domain, true
			}
		}
	}
	return "", "", false
}

// podDomainLocked is the ComputeDomain a tracked pod belongs to ("" for none).
func (f *feed) podDomainLocked(namespace string, claims []facts.PodClaim) string {
	f.rbuf = f.resolveLocked(namespace, claims, f.rbuf)
	if d, cd := classify(f.rbuf); cd {
		return d
	}
	return ""
}

// has reports whether the view has the object (its record was queued).
func (f *feed) hasLocked(k objKey) bool {
	_, ok := f.records[k]
	return ok
}

// full reports whether the pending batch should be applied now.
func (f *feed) fullLocked() bool {
	return f.pending.Len() >= flushRecords || f.pending.Size() >= flushBytes
}

// hasCliqueNodes reports whether some node has a clique label.
func (f *feed) hasCliqueNodes() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cliqueNodes) > 0
}

// sequence is the view's change counter (see seq), once the feed caught up on the objects
// hints queued pods for: a decision reused on the sequence must not predate them.
func (f *feed) sequence() uint64 {
	f.catchUp()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// steerSequence is steerSeq, once the feed caught up as for sequence.
func (f *feed) steerSequence() uint64 {
	f.catchUp()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.steerSeq
}

// bump records a change made outside the batch (Assume, Forget).
func (f *feed) bump() {
	f.mu.Lock()
	f.changedLocked(false)
	f.mu.Unlock()
}

// bumpPlaced records the Assume of a pod on node; plain says it has no ComputeDomain. On a tray
// of a stable clique it leaves the steering answers valid.
func (f *feed) bumpPlaced(node string, plain bool) {
	f.mu.Lock()
	f.changedLocked(plain && f.steerKeepsOnLocked(node))
	f.mu.Unlock()
}

// steerKeepsOnLocked reports whether a plain pod placed on node ("": none) leaves the steering
// answers at steerSeq valid.
func (f *feed) steerKeepsOnLocked(node string) bool {
	if f.stableAt != f.steerSeq || f.stable == nil {
		return false
	}
	return node == "" || f.stable[f.cliqueNodes[node]]
}

// setStable records the stable cliques of a steering answer asked at steerSeq at: every answer
// at one steerSeq must keep, so a second one narrows the set (the two kinds, or an answer asked
// again after steerMaxAge); an answer older than steerSeq sets nothing.
func (f *feed) setStable(at uint64, d *cdplace.Decision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at != f.steerSeq {
		return
	}
	if f.stableAt != at || f.stable == nil {
		f.stable, f.stableAt = map[string]bool{}, at
		for label, c := range d.Cliques {
			if c.Stable {
				f.stable[label] = true
			}
		}
		return
	}
	for label := range f.stable {
		if !d.Cliques[label].Stable {
			delete(f.stable, label)
		}
	}
}

// flush catches up on the objects hints queued pods for, then applies the pending batch, if
// any, in one call.
func (f *feed) flush() error {
	f.catchUp()
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.mu.Lock()
	f.settleClaimsLocked()
	if f.pending.Len() == 0 {
		f.mu.Unlock()
		return nil
	}
	batch := f.pending
	f.pending, f.spare = f.spare, cdplace.Batch{}
	f.mu.Unlock()
	records := batch.Len()
	start := time.Now()
	err := f.cluster.ApplyFacts(batch.Bytes())
	observeCall(callApply, start, err)
	if batch.Cap() <= spareBytes {
		// The library keeps nothing of the bytes it was given: the buffer serves the next
		// batch, so a flush before every cycle allocates none (a large one, such as the
		// initial sync's, is left to the collector).
		batch.Reset()
		f.spare = batch
	}
	if err != nil {
		// A malformed batch is a host bug: nothing of it was applied.
		f.logger.Error(err, "ComputeDomainPlacement: the policy's view rejected a batch of facts", "records", records)
		return err
	}
	return nil
}

// unlockAndWake releases f.mu (held by the caller), applies the pending batch if it is full,
// then moves the woken pods back to the active queue, outside the lock.
func (f *feed) unlockAndWake(wake []nsName) {
	activate := f.activate
	f.mu.Unlock()
	f.flushIfFull()
	if len(wake) > 0 && activate != nil {
		activate(wake)
	}
}

// activateWaiting moves every pod of the view that is not placed (not bound, not assumed) back
// to the active queue: after a policy swap, what the old policy refused may be placed now.
func (f *feed) activateWaiting() {
	f.mu.Lock()
	var wake []nsName
	for k, e := range f.pods {
		if e.node == "" && !e.assumed {
			wake = append(wake, k)
		}
	}
	activate := f.activate
	f.mu.Unlock()
	if len(wake) > 0 && activate != nil {
		activate(wake)
	}
}

// flushIfFull applies the pending batch when it passed a threshold.
func (f *feed) flushIfFull() {
	f.mu.Lock()
	full := f.fullLocked()
	f.mu.Unlock()
	if full {
		_ = f.flush() // logged in flush
	}
}

// queuedRecords is how many records were queued since start (tests).
func (f *feed) queuedRecords() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued
}
