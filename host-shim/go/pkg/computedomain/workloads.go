package computedomain

import (
	"context"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
	"github.com/cdplace/cdplace/host-shim/go/internal/owners"
)

// Where a domain's size comes from besides annotations: the pods' owners (internal/owners) and,
// with the Workload API on (gate GenericWorkload), PodGroups. And the wake-ups the scheduler has
// no event for: an owner's size arriving or changing, and a domain of bare pods whose settle
// window (sizeSettleSeconds) ends with no further pod.

// PodGroupGVR is the Workload API's PodGroup; it is watched only when discovery shows it served,
// so a cluster without the gate sees no errors and no retries.
var PodGroupGVR = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}

// settlingReason is the part of the policy's rejection of a domain with no declared size that is
// still in its settle window (guest/policy/src/size.rs); such a domain's pods are retried every
// settleRetry until it starts, since nothing else would wake them once the last pod arrived.
const settlingReason = "for its pods to stop arriving"

var settleRetry = time.Second

// startWorkloads connects the feed to the owner informers and, when served, PodGroups; it
// reports whether PodGroups are served.
func startWorkloads(ctx context.Context, h fwk.Handle, f *feed, dyn dynamic.Interface) (podGroups bool, err error) {
	var disc discovery.DiscoveryInterface
	if cs := h.ClientSet(); cs != nil {
		disc = cs.Discovery()
	}
	r, err := owners.New(ctx, h.SharedInformerFactory(), dyn, disc, f.ownerChanged)
	if err != nil {
		return false, err
	}
	pods := h.SharedInformerFactory().Core().V1().Pods().Lister()
	f.mu.Lock()
	f.owners = r
	f.activate = func(keys []nsName) { activatePending(klog.FromContext(ctx), h, pods, keys) }
	f.mu.Unlock()
	if disc != nil && served(disc, PodGroupGVR) && dyn != nil {
		factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
		_, err := factory.ForResource(PodGroupGVR).Informer().AddEventHandler(handlerOf(f.upsertPodGroup, func(u *unstructured.Unstructured) {
			f.deleteObject(cdplace.KindPodGroup, u.GetNamespace(), u.GetName(), u.GetUID())
		}))
		if err != nil {
			return false, err
		}
		factory.Start(ctx.Done())
		klog.FromContext(ctx).V(2).Info("ComputeDomainPlacement: the Workload API is served; PodGroup minCount sizes domains")
		return true, nil
	}
	return false, nil
}

func served(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}

// upsertPodGroup sends a PodGroup's minCount; the library turns it into the owner its pods name.
// When it changes, the pending pods of that group are woken.
func (f *feed) upsertPodGroup(u *unstructured.Unstructured) {
	k := objKey{kind: cdplace.KindPodGroup, namespace: u.GetNamespace(), name: u.GetName()}
	fact, err := facts.PodGroupOf(u)
	var wake []nsName
	f.mu.Lock()
	if f.admitLocked(k, u, true) != nil {
		f.mu.Unlock()
		return
	}
	if err != nil {
		// The domains of its pods fail closed: their gang size is unknown.
		group := map[nsName]struct{}{}
		for key, e := range f.pods {
			if key.namespace == u.GetNamespace() && e.fact.PodGroup != nil && *e.fact.PodGroup == u.GetName() {
				group[key] = struct{}{}
			}
		}
		f.failedLocked(k, err, u, f.podDomainsLocked(group)...)
	} else {
		f.validLocked(k)
		f.scratch = cdplace.AppendPodGroup(f.scratch[:0], &fact)
		if f.putLocked(k, f.scratch) {
			for key, e := range f.pods {
				if key.namespace == fact.Namespace && e.fact.PodGroup != nil && *e.fact.PodGroup == fact.Name {
					wake = append(wake, key)
				}
			}
		}
	}
	f.unlockAndWake(wake)
}

// activatePending moves those of the pods that are still unscheduled back to the active queue.
func activatePending(logger klog.Logger, h fwk.Handle, lister corelisters.PodLister, keys []nsName) {
	pods := map[string]*v1.Pod{}
	for _, k := range keys {
		p, err := lister.Pods(k.namespace).Get(k.name)
		if err != nil || p.Spec.NodeName != "" {
			continue
		}
		pods[k.namespace+"/"+k.name] = p
	}
	if len(pods) > 0 {
		logger.V(5).Info("ComputeDomainPlacement: waking pending pods of a domain (its size changed or settled, or one of its pods was reserved)", "pods", len(pods))
		h.Activate(logger, pods)
	}
}

// settling retries the pods of domains still in their settle window.
type settling struct {
	mu      sync.Mutex
	waiting map[string]map[nsName]struct{} // by domain UID
	timer   bool
}

// note records a rejection; a rejection for the settle window schedules a retry of the domain.
func (s *settling) note(p *Plugin, domain string, pod *v1.Pod, reason string) {
	p.feed.mu.Lock()
	activate := p.feed.activate
	p.feed.mu.Unlock()
	if !strings.Contains(reason, settlingReason) || activate == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = map[string]map[nsName]struct{}{}
	}
	addIndex(s.waiting, domain, nsName{pod.Namespace, pod.Name})
	if !s.timer {
		s.timer = true
		time.AfterFunc(settleRetry, func() { s.fire(p) })
	}
}

func (s *settling) fire(p *Plugin) {
	s.mu.Lock()
	var keys []nsName
	for _, pods := range s.waiting {
		for k := range pods {
			keys = append(keys, k)
		}
	}
	s.waiting, s.timer = nil, false
	s.mu.Unlock()
	p.feed.mu.Lock()
	activate := p.feed.activate
	p.feed.mu.Unlock()
	activate(keys)
}

// waking remembers the ComputeDomain pods PreFilter rejected, by domain, so that when one pod
// of the domain is reserved the others go straight back to the active queue: a QueueingHint
// would move a pod whose backoff has not expired (up to 10 s after many rejections while its
// domain waited) only to the backoff queue, and the started domain would sit part-bound.
//
// It also keeps each waiting domain's scout (scout.go): the pod capacity events retry for the
// whole domain.
type waking struct {
	mu       sync.Mutex
	byDomain map[string]map[nsName]struct{}
	// domainOf is the domain each rejected pod was filed under; scouts the scout per domain.
	domainOf map[nsName]string
	scouts   map[string]scout
	// now is the clock (tests).
	now func() time.Time
}

// rejected records a rejected ComputeDomain pod of domain; the domain's first rejected pod, or
// the first after its scout went quiet, becomes its scout.
func (w *waking) rejected(domain string, pod *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byDomain == nil {
		w.byDomain = map[string]map[nsName]struct{}{}
		w.domainOf = map[nsName]string{}
		w.scouts = map[string]scout{}
	}
	key := nsName{pod.Namespace, pod.Name}
	addIndex(w.byDomain, domain, key)
	w.domainOf[key] = domain
	w.noteScoutLocked(domain, key)
}

// take takes the rejected pods of domain (and forgets them).
func (w *waking) take(domain string) []nsName {
	w.mu.Lock()
	defer w.mu.Unlock()
	pods := w.forgetLocked(domain)
	keys := make([]nsName, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	return keys
}

// revalidated activates the rejected pods of a domain that no longer has an invalid object.
func (p *Plugin) revalidated(domain string) {
	keys := p.wake.take(domain)
	p.feed.mu.Lock()
	activate := p.feed.activate
	p.feed.mu.Unlock()
	if len(keys) > 0 && activate != nil {
		activate(keys)
	}
}

// reserved takes the rejected pods of domain other than the reserved one (and forgets them).
func (w *waking) reserved(domain string, pod *v1.Pod) []nsName {
	w.mu.Lock()
	pods := w.forgetLocked(domain)
	w.mu.Unlock()
	keys := make([]nsName, 0, len(pods))
	for k := range pods {
		if k != (nsName{pod.Namespace, pod.Name}) {
			keys = append(keys, k)
		}
	}
	return keys
}
