package computedomain

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// ComputeDomainGVR is the NVIDIA ComputeDomain resource.
var ComputeDomainGVR = facts.ComputeDomainGVR

// NewDynamicClient makes the client for the ComputeDomain informer; tests replace it.
var NewDynamicClient = func(h fwk.Handle) (dynamic.Interface, error) {
	if h.KubeConfig() == nil {
		return nil, fmt.Errorf("no kubeconfig for the ComputeDomain informer")
	}
	return dynamic.NewForConfig(h.KubeConfig())
}

// watchers connects the feed to the scheduler's informers (Nodes, Pods, ResourceClaims,
// ResourceClaimTemplates, ResourceSlices) and, once the ComputeDomain API is served, to a
// dynamic informer for ComputeDomains.
type watchers struct {
	feed *feed
	ctx  context.Context
	dyn  dynamic.Interface

	typed []cache.ResourceEventHandlerRegistration

	mu sync.Mutex
	// domains is the ComputeDomain handler, nil until the informer started.
	domains cache.ResourceEventHandlerRegistration
}

// startInformers registers the feed's handlers on the scheduler's informers.
func startInformers(ctx context.Context, h fwk.Handle, f *feed) (*watchers, error) {
	dyn, err := NewDynamicClient(h)
	if err != nil {
		return nil, err
	}
	in := &watchers{feed: f, ctx: ctx, dyn: dyn}
	sif := h.SharedInformerFactory()
	f.listers = listers{claims: sif.Resource().V1().ResourceClaims().Lister(), templates: sif.Resource().V1().ResourceClaimTemplates().Lister()}
	for _, t := range []struct {
		informer cache.SharedIndexInformer
		kind     string
		view     cdplace.Kind
		handler  cache.ResourceEventHandlerFuncs
	}{
		{sif.Core().V1().Nodes().Informer(), "Nodes", cdplace.KindNode, handlerOf(f.upsertNode, func(n *v1.Node) { f.deleteNode(n.Name, n.UID) })},
		{sif.Core().V1().Pods().Informer(), "Pods", cdplace.KindPod, handlerOf(f.upsertPod, func(p *v1.Pod) { f.deletePod(p.Namespace, p.Name, p.UID) })},
		{sif.Resource().V1().ResourceClaims().Informer(), "ResourceClaims", cdplace.KindResourceClaim, handlerOf(f.upsertClaim, func(c *resourceapi.ResourceClaim) {
			f.deleteClaimLike(cdplace.KindResourceClaim, c.Namespace, c.Name, c.UID)
		})},
		{sif.Resource().V1().ResourceClaimTemplates().Informer(), "ResourceClaimTemplates", cdplace.KindResourceClaimTemplate, handlerOf(f.upsertTemplate, func(t *resourceapi.ResourceClaimTemplate) {
			f.deleteClaimLike(cdplace.KindResourceClaimTemplate, t.Namespace, t.Name, t.UID)
		})},
		{sif.Resource().V1().ResourceSlices().Informer(), "ResourceSlices", cdplace.KindResourceSlice, handlerOf(f.upsertSlice, func(s *resourceapi.ResourceSlice) {
			f.deleteObject(cdplace.KindResourceSlice, "", s.Name, s.UID)
		})},
	} {
		reg, err := t.informer.AddEventHandler(t.handler)
		if err != nil {
			return nil, fmt.Errorf("watching %s: %w", t.kind, err)
		}
		in.typed = append(in.typed, reg)
		f.stores.set(t.view, t.informer.GetStore())
	}
	f.synced = in.synced
	return in, nil
}

// startDomains starts the ComputeDomain informer (once; the API must be served).
func (in *watchers) startDomains() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.domains != nil {
		return nil
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(in.dyn, 0)
	informer := factory.ForResource(ComputeDomainGVR).Informer()
	reg, err := informer.AddEventHandler(handlerOf(in.feed.upsertDomain, func(u *unstructured.Unstructured) {
		in.feed.deleteObject(cdplace.KindComputeDomain, u.GetNamespace(), u.GetName(), u.GetUID())
	}))
	if err != nil {
		return fmt.Errorf("watching ComputeDomains: %w", err)
	}
	in.domains = reg
	in.feed.stores.set(cdplace.KindComputeDomain, informer.GetStore())
	factory.Start(in.ctx.Done())
	return nil
}

// synced reports whether every started informer's initial list reached the feed.
func (in *watchers) synced() bool {
	for _, r := range in.typed {
		if !r.HasSynced() {
			return false
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.domains == nil || in.domains.HasSynced()
}

// handlerOf adapts typed upsert and delete functions to an informer handler; objects of other
// types are ignored, tombstones unwrapped.
func handlerOf[T any](upsert func(T), remove func(T)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				upsert(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				upsert(o)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(T); ok {
				remove(o)
			}
		},
	}
}
