package computedomain

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// Which version of an object the view may take. The informer is the source of truth, but the
// feed also catches up on objects from the events QueueingHints saw (feed_catchup.go), which
// its own handler may deliver again afterwards, older; and it takes pods from the scheduler's
// own copies (PreFilter's and Reserve's pod, the pod preemption's AddPod would add: ensurePod
// and placeable), which can be older than what the informer delivered, or be of a pod the
// informer already deleted. So, for every kind:
//   - a delete leaves a tombstone of the UID (bounded: tombstoneMax entries, tombstoneTTL of
//     age, oldest dropped first), and an upsert of a tombstoned UID is dropped;
//   - an upsert with the UID the view holds and an older resourceVersion is dropped;
//   - an upsert with another UID under the same name is a new object and replaces the old one.
//
// resourceVersion is opaque by the API conventions; every etcd-backed API server gives the
// etcd revision as a decimal integer, and the watch cache itself compares them as integers. So
// two versions that both parse are compared as integers; when either does not, they cannot be
// ordered and the upsert is taken (dropping it could keep a version that no longer exists,
// while taking it is corrected by the informer's next delivery).

const (
	tombstoneMax = 100_000
	tombstoneTTL = 10 * time.Minute
)

// objVersion is the UID and resourceVersion the view last took for an object.
type objVersion struct {
	uid types.UID
	rv  string
}

// olderVersion reports whether rv is older than held (both integers, rv smaller).
func olderVersion(rv, held string) bool {
	a, errA := strconv.ParseUint(rv, 10, 64)
	b, errB := strconv.ParseUint(held, 10, 64)
	return errA == nil && errB == nil && a < b
}

// tombstones are the UIDs of deleted objects, oldest first, bounded in number and age.
type tombstones struct {
	max int
	ttl time.Duration
	at  map[types.UID]time.Time
	// order is a queue of (uid, time) from head on; entries whose time no longer matches at
	// (re-added) are skipped.
	order []tombstone
	head  int
}

type tombstone struct {
	uid types.UID
	at  time.Time
}

func newTombstones(max int, ttl time.Duration) *tombstones {
	return &tombstones{max: max, ttl: ttl, at: map[types.UID]time.Time{}}
}

// add buries a UID at now, dropping the tombstones past the bounds.
func (ts *tombstones) add(uid types.UID, now time.Time) {
	ts.at[uid] = now
	ts.order = append(ts.order, tombstone{uid, now})
	ts.prune(now)
}

// has reports whether a UID is buried (and young enough) at now.
func (ts *tombstones) has(uid types.UID, now time.Time) bool {
	ts.prune(now)
	_, ok := ts.at[uid]
	return ok
}

func (ts *tombstones) len() int { return len(ts.at) }

func (ts *tombstones) prune(now time.Time) {
	for ts.head < len(ts.order) {
		t := ts.order[ts.head]
		if at, ok := ts.at[t.uid]; ok && at.Equal(t.at) {
			if len(ts.at) <= ts.max && now.Sub(t.at) <= ts.ttl {
				break
			}
			delete(ts.at, t.uid)
		}
		ts.order[ts.head] = tombstone{}
		ts.head++
	}
	// Reclaim the queue's dropped front once it is most of the slice.
	if ts.head > 1024 && ts.head*2 > len(ts.order) {
		ts.order = append(ts.order[:0:0], ts.order[ts.head:]...)
		ts.head = 0
	}
}

// admitLocked checks whether the view may take this version of the object k: nil when it
// may (the version is recorded when keep is set, forgotten otherwise: the object will not be in
// the view), else an error naming the object and why. Objects without a UID (built by hand,
// not read from the API) are always taken.
func (f *feed) admitLocked(k objKey, meta metav1.Object, keep bool) error {
	uid, rv := meta.GetUID(), meta.GetResourceVersion()
	if uid == "" {
		return nil
	}
	v, held := f.versions[k]
	// A UID the view holds for k was admitted after its last tombstone check, and a delete
	// forgets it (buryLocked) as it buries it: so only another UID (a new object under the
	// name, or a stale copy of a deleted one) can be buried, and the check is made for those
	// alone. Updates of a held object, most events, skip it.
	if (!held || v.uid != uid) && f.tombs.has(uid, f.now()) {
		f.logger.V(4).Info("ComputeDomainPlacement: dropped an upsert of a deleted object", "kind", k.kind.String(), "object", klog.KRef(k.namespace, k.name), "uid", uid)
		return &facts.Error{Object: k.describe(), Field: "metadata.uid",
			Reason: "the object was deleted (uid " + string(uid) + "); this copy of it is stale"}
	}
	if held && v.uid == uid && olderVersion(rv, v.rv) {
		f.logger.V(4).Info("ComputeDomainPlacement: dropped an older version of an object", "kind", k.kind.String(), "object", klog.KRef(k.namespace, k.name), "resourceVersion", rv, "held", v.rv)
		return &facts.Error{Object: k.describe(), Field: "metadata.resourceVersion",
			Reason: "resourceVersion " + rv + " is older than the view's " + v.rv + "; this copy of it is stale"}
	}
	if keep {
		f.versions[k] = objVersion{uid: uid, rv: rv}
	} else {
		delete(f.versions, k)
	}
	return nil
}

// describe names the object in an error: "<Kind> <namespace>/<name>", "<Kind> <name>" when
// cluster-scoped. Built only on the error path: admitLocked runs on every informer event.
func (k objKey) describe() string {
	if !k.kind.Namespaced() {
		return k.kind.String() + " " + k.name
	}
	return k.kind.String() + " " + k.namespace + "/" + k.name
}

// sameUIDLocked reports whether the view's version of k has this UID (or either is unknown).
func (f *feed) sameUIDLocked(k objKey, uid types.UID) bool {
	v, ok := f.versions[k]
	return !ok || uid == "" || v.uid == uid
}

// buryLocked forgets the version of a deleted object and tombstones its UID.
func (f *feed) buryLocked(k objKey, uid types.UID) {
	delete(f.versions, k)
	if uid != "" {
		f.tombs.add(uid, f.now())
	}
}
