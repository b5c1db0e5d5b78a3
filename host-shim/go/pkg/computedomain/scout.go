package computedomain

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// A waiting domain is retried through one pod, its scout. Events that only add capacity (a
// pod holding GPUs deleted, a tray added, relabelled, uncordoned or deleted, a claim
// deallocated, a GPU slice changed, another ComputeDomain deleted) can make a waiting domain placeable, but the answer is the
// domain's, not a pod's: with every pod of every waiting domain queued for each such event, an
// idle scheduler retried them back to back (SchedulerPopFromBackoffQ), 180 unschedulable
// attempts a second in the soak, each with a FailedScheduling Event. So those hints queue only
// the domain's scout, the pod PreFilter rejected first; when the scout is reserved, the
// domain's other rejected pods are activated (waking.reserved), past their backoff.
//
// The scout is given up, and every pod of the domain queued again, when it has not been
// rejected for scoutQuiet (it may have been deleted, or be stuck behind another plugin), or the
// pod lister no longer has it pending. A pod of a PodGroup is always queued: the scheduler
// retries its group as one. The hint that holds a sibling back still marks the event's object
// for the feed (caughtUp wraps inside scouted), so the scout, wherever it is in the queue, is
// decided on a view with the event.

// scoutQuiet is how long a scout may go without a rejection before its domain's pods are all
// queued again: above the scheduler's longest backoff (podMaxBackoffSeconds, 10 s by default).
var scoutQuiet = 30 * time.Second

// scout is a waiting domain's scout and when PreFilter last rejected it.
type scout struct {
	pod nsName
	at  time.Time
}

func (w *waking) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return timeNow()
}

// noteScoutLocked makes key the domain's scout, or refreshes it, unless another pod scouts and
// is not quiet.
func (w *waking) noteScoutLocked(domain string, key nsName) {
	now := w.clock()
	if s, ok := w.scouts[domain]; ok && s.pod != key && now.Sub(s.at) < scoutQuiet {
		return
	}
	w.scouts[domain] = scout{pod: key, at: now}
}

// forgetLocked forgets a domain's rejected pods and scout, and returns the pods.
func (w *waking) forgetLocked(domain string) map[nsName]struct{} {
	pods := w.byDomain[domain]
	delete(w.byDomain, domain)
	delete(w.scouts, domain)
	for k := range pods {
		delete(w.domainOf, k)
	}
	return pods
}

// gone forgets a deleted pod: its domain's rejected pods, and its scout if it was the scout.
// Without it a pod deleted while its domain waited (a Job deleted before it started) stayed
// filed for the scheduler's lifetime.
func (w *waking) gone(key nsName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	domain, ok := w.domainOf[key]
	if !ok {
		return
	}
	delete(w.domainOf, key)
	dropIndex(w.byDomain, domain, key)
	if s, ok := w.scouts[domain]; ok && s.pod == key {
		delete(w.scouts, domain)
	}
}

// heldBack reports whether a capacity event should leave pod to its domain's scout: the pod was
// rejected while its domain waited, the domain has another scout, and that scout is neither
// quiet nor gone (lister nil: not checked).
func (w *waking) heldBack(pod *v1.Pod, lister corelisters.PodLister) bool {
	if pod.Spec.SchedulingGroup != nil {
		return false
	}
	key := nsName{pod.Namespace, pod.Name}
	w.mu.Lock()
	domain, ok := w.domainOf[key]
	s, scouted := w.scouts[domain]
	if !ok || !scouted || s.pod == key {
		w.mu.Unlock()
		return false
	}
	if w.clock().Sub(s.at) >= scoutQuiet {
		delete(w.scouts, domain)
		w.mu.Unlock()
		return false
	}
	w.mu.Unlock()
	if lister != nil {
		if sp, err := lister.Pods(s.pod.namespace).Get(s.pod.name); err != nil || sp.Spec.NodeName != "" || sp.DeletionTimestamp != nil {
			w.mu.Lock()
			if cur, ok := w.scouts[domain]; ok && cur.pod == s.pod {
				delete(w.scouts, domain)
				dropIndex(w.byDomain, domain, s.pod)
				delete(w.domainOf, s.pod)
			}
			w.mu.Unlock()
			return false
		}
	}
	return true
}

// scouted wraps a QueueingHint of an event that only adds capacity: the pods of a waiting
// domain other than its scout are not queued for it. forPod, when set, tells the events that
// concern the pod itself (its own claim created), which queue it whatever the scout.
func (p *Plugin) scouted(fn fwk.QueueingHintFn, forPod func(pod *v1.Pod, oldObj, newObj any) bool) fwk.QueueingHintFn {
	return func(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
		h, err := fn(logger, pod, oldObj, newObj)
		if h == fwk.Queue && err == nil && (forPod == nil || !forPod(pod, oldObj, newObj)) && p.wake.heldBack(pod, p.pods) {
			logger.V(5).Info("capacity event left to the domain's scout", "pod", klog.KObj(pod))
			return fwk.QueueSkip, nil
		}
		return h, err
	}
}

// claimCreatedFor is whether a claim event is the creation of one of the pod's own claims.
func claimCreatedFor(pod *v1.Pod, oldObj, newObj any) bool {
	c, ok := newObj.(*resourceapi.ResourceClaim)
	return oldObj == nil && ok && c.Namespace == pod.Namespace && podNamesClaim(pod, c.Name)
}
