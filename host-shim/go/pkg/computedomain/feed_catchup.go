package computedomain

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// A QueueingHint runs on the scheduler's own handler of an informer; the feed is another
// handler of the same informer (or, for ComputeDomains and claim templates, of another informer
// of the same objects), and client-go runs the handlers in no order with each other. So a pod
// queued by the event that frees its trays (the last stale label removed, the last pod of a
// clique deleted) could be popped and decided before the feed had that event, be rejected on the
// view without it, and find no later event to queue it again: it would wait for the scheduler's
// five-minute flush of unschedulable pods. With every pod of a waiting domain queued by each
// event, some later pod usually saw the new view; one pod alone, or any reuse of a decision,
// met the race (e2e scenario 5 stalled in fresh-clone CI runs).
//
// The fix is to make the order not matter: when a hint queues a pod it marks the event's
// object, and before the next decision (every flush) the feed catches up on the marked objects
// from the informer's store, which client-go updates before it calls any handler. Catching up
// never goes back in time: the feed admits a version of an object only if it is not older than
// the one it holds and its UID was not deleted (feed_versions.go), so a handler that delivers
// an older version afterwards changes nothing. Marking is a map write under its own lock: the
// hint runs under the scheduling queue's lock, and the catch-up itself may activate pods.

// mark is an object a QueueingHint queued a pod for; obj is the event's newest object
// (nil for a delete, with uid the deleted object's).
type mark struct {
	obj any
	uid types.UID
}

// marks are the objects to catch up on before the next decision.
type marks struct {
	mu  sync.Mutex
	set map[objKey]mark
}

// stores are the informers' stores the feed catches up from, by kind (nil in tests that build
// a bare feed: the marked objects themselves are applied then).
type stores struct {
	mu sync.Mutex
	by map[cdplace.Kind]cache.Store
}

func (s *stores) set(kind cdplace.Kind, st cache.Store) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[cdplace.Kind]cache.Store{}
	}
	s.by[kind] = st
}

// current is the store's version of k, if the kind has a store and it holds the object.
func (s *stores) current(k objKey) (any, bool) {
	s.mu.Lock()
	st := s.by[k.kind]
	s.mu.Unlock()
	if st == nil {
		return nil, false
	}
	key := k.name
	if k.namespace != "" {
		key = k.namespace + "/" + k.name
	}
	obj, ok, err := st.GetByKey(key)
	return obj, ok && err == nil
}

func (s *stores) has(kind cdplace.Kind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[kind] != nil
}

// markQueued records the object (of the view's kind) of an event for which a hint queued a pod.
func (f *feed) markQueued(kind cdplace.Kind, oldObj, newObj any) {
	obj, gone := newObj, false
	if obj == nil {
		obj, gone = oldObj, true
	}
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, gone = t.Obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	k := objKey{kind: kind, namespace: m.GetNamespace(), name: m.GetName()}
	mk := mark{obj: obj, uid: m.GetUID()}
	if gone {
		mk.obj = nil
	}
	f.marks.mu.Lock()
	if f.marks.set == nil {
		f.marks.set = map[objKey]mark{}
	}
	f.marks.set[k] = mk
	f.marks.mu.Unlock()
}

// catchUp applies the marked objects' newest versions (see the top of this file).
func (f *feed) catchUp() {
	f.marks.mu.Lock()
	set := f.marks.set
	f.marks.set = nil
	f.marks.mu.Unlock()
	for k, m := range set {
		// The scheduler delivers ComputeDomain and claim template events from informers of
		// its own, so the feed's store may lag behind the event: the event's object is applied
		// too (admission drops it when the feed already has a newer one). So it is when the
		// kind has no store (tests).
		own := f.stores.has(k.kind) && k.kind != cdplace.KindComputeDomain && k.kind != cdplace.KindResourceClaimTemplate
		if m.obj != nil && !own {
			f.applyObject(k.kind, m.obj)
		}
		cur, ok := f.stores.current(k)
		switch {
		case ok:
			if m.obj == nil {
				// Deleted, and the store has an object of that name: a newer one, or one the
				// tombstone of this delete keeps out.
				f.applyDelete(k, m.uid)
			}
			f.applyObject(k.kind, cur)
		case m.obj == nil:
			f.applyDelete(k, m.uid)
		case own:
			// The store of the hint's own informer is ahead of the hint: the object is gone.
			f.applyDelete(k, m.uid)
		}
	}
}

// applyObject hands an object to the feed's handler for its type (an unstructured object to
// the handler of kind: a ComputeDomain, or a claim template from the scheduler's dynamic
// informer); it reports whether the feed has one.
func (f *feed) applyObject(kind cdplace.Kind, obj any) bool {
	switch o := obj.(type) {
	case *v1.Node:
		f.upsertNode(o)
	case *v1.Pod:
		f.upsertPod(o)
	case *resourceapi.ResourceClaim:
		f.upsertClaim(o)
	case *resourceapi.ResourceSlice:
		f.upsertSlice(o)
	case *resourceapi.ResourceClaimTemplate:
		f.upsertTemplate(o)
	case *unstructured.Unstructured:
		switch kind {
		case cdplace.KindResourceClaimTemplate:
			var t resourceapi.ResourceClaimTemplate
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &t); err != nil {
				f.logger.V(4).Info("ComputeDomainPlacement: a claim template event could not be read", "template", klog.KObj(o), "err", err)
				return true
			}
			f.upsertTemplate(&t)
		case cdplace.KindComputeDomain:
			f.upsertDomain(o)
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// applyDelete hands a deletion to the feed's handler for its kind.
func (f *feed) applyDelete(k objKey, uid types.UID) {
	switch k.kind {
	case cdplace.KindNode:
		f.deleteNode(k.name, uid)
	case cdplace.KindPod:
		f.deletePod(k.namespace, k.name, uid)
	case cdplace.KindResourceClaim, cdplace.KindResourceClaimTemplate:
		f.deleteClaimLike(k.kind, k.namespace, k.name, uid)
	default:
		f.deleteObject(k.kind, k.namespace, k.name, uid)
	}
}

// caughtUp wraps a QueueingHint for events on objects of kind: when it queues the pod, the
// event's object is marked for the feed to catch up on before the pod is decided again.
func (p *Plugin) caughtUp(kind cdplace.Kind, fn fwk.QueueingHintFn) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		h, err := fn(logger, pod, oldObj, newObj)
		if h == fwk.Queue && p.feed != nil {
			p.feed.markQueued(kind, oldObj, newObj)
		}
		return h, err
	}
}
