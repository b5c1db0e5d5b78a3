package computedomain

import (
	"bytes"
	"sync"
	"time"

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
	pending cdplace.Batch
	scratch []byte
	rbuf    []resolved
	// seq changes whenever the view will change: every queued record, Assume and Forget.
	seq uint64
	// queued counts records queued since start (tests).
	queued uint64

	// Facts the classification reads: claims and templates that name a domain.
	claimDomains    map[nsName]domainRef
	templateDomains map[nsName]domainRef
	// cliqueNodes are the nodes with a non-empty clique label.
	cliqueNodes map[string]bool
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
		errored:         map[objKey]string{},
		claimDomains:    map[nsName]domainRef{},
		templateDomains: map[nsName]domainRef{},
		cliqueNodes:     map[string]bool{},
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
	if last, ok := f.records[k]; ok && bytes.Equal(last, record) {
		return false
	}
	f.records[k] = bytes.Clone(record)
	f.pending.Add(record)
	f.seq++
	f.queued++
	return true
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
	f.seq++
	f.queued++
}

// failedLocked handles an object the policy cannot use: logged once per text, with the
// object and field, and removed from the view so it never keeps a version that no longer exists.
func (f *feed) failedLocked(k objKey, err error) {
	if f.errored[k] != err.Error() {
		f.errored[k] = err.Error()
		kv := []any{"kind", k.kind.String(), "object", klog.KRef(k.namespace, k.name)}
		if e, ok := err.(*facts.Error); ok {
			kv = append(kv, "field", e.Field)
		}
		f.logger.Error(err, "ComputeDomainPlacement: object left out of the policy's view", kv...)
	}
	f.removeLocked(k)
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

// sequence is the view's change counter (see seq).
func (f *feed) sequence() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// bump records a change made outside the batch (Assume, Forget).
func (f *feed) bump() {
	f.mu.Lock()
	f.seq++
	f.mu.Unlock()
}

// flush applies the pending batch, if any, in one call.
func (f *feed) flush() error {
	f.flushMu.Lock()
	defer f.flushMu.Unlock()
	f.mu.Lock()
	if f.pending.Len() == 0 {
		f.mu.Unlock()
		return nil
	}
	batch := f.pending
	f.pending = cdplace.Batch{}
	f.mu.Unlock()
	start := time.Now()
	err := f.cluster.ApplyFacts(batch.Bytes())
	observeCall(callApply, start, err)
	if err != nil {
		// A malformed batch is a host bug: nothing of it was applied.
		f.logger.Error(err, "ComputeDomainPlacement: the policy's view rejected a batch of facts", "records", batch.Len())
		return err
	}
	return nil
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
