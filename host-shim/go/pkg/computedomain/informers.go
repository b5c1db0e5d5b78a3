package computedomain

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// ComputeDomainGVR is the NVIDIA ComputeDomain resource.
var ComputeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// NewDynamicClient makes the client for the ComputeDomain informer; tests replace it.
var NewDynamicClient = func(h fwk.Handle) (dynamic.Interface, error) {
	if h.KubeConfig() == nil {
		return nil, fmt.Errorf("no kubeconfig for the ComputeDomain informer")
	}
	return dynamic.NewForConfig(h.KubeConfig())
}

// feed keeps the policy's cluster view current from informer events: each object crosses into
// the policy once per change, as JSON, and is reduced there to a few interned facts.
type feed struct {
	cluster *cdplace.Cluster
	// handlers have seen the initial list of every informer.
	handlers []cache.ResourceEventHandlerRegistration
}

// startFeed registers handlers on the scheduler's informers (Pods, Nodes, ResourceClaims,
// ResourceClaimTemplates, ResourceSlices) and starts a dynamic informer for ComputeDomains.
func startFeed(ctx context.Context, h fwk.Handle, cluster *cdplace.Cluster) (*feed, error) {
	f := &feed{cluster: cluster}
	logger := klog.FromContext(ctx)
	inf := h.SharedInformerFactory()
	typed := []struct {
		informer cache.SharedIndexInformer
		kind     string
	}{
		{inf.Core().V1().Nodes().Informer(), "Node"},
		{inf.Core().V1().Pods().Informer(), "Pod"},
		{inf.Resource().V1().ResourceClaims().Informer(), "ResourceClaim"},
		{inf.Resource().V1().ResourceClaimTemplates().Informer(), "ResourceClaimTemplate"},
		{inf.Resource().V1().ResourceSlices().Informer(), "ResourceSlice"},
	}
	for _, t := range typed {
		reg, err := t.informer.AddEventHandler(f.handler(logger, t.kind))
		if err != nil {
			return nil, fmt.Errorf("watching %ss: %w", t.kind, err)
		}
		f.handlers = append(f.handlers, reg)
	}
	dyn, err := NewDynamicClient(h)
	if err != nil {
		return nil, err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	cds := factory.ForResource(ComputeDomainGVR).Informer()
	reg, err := cds.AddEventHandler(f.handler(logger, "ComputeDomain"))
	if err != nil {
		return nil, fmt.Errorf("watching ComputeDomains: %w", err)
	}
	f.handlers = append(f.handlers, reg)
	factory.Start(ctx.Done())
	return f, nil
}

// synced reports whether every handler has seen its informer's initial list.
func (f *feed) synced() bool {
	for _, h := range f.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

func (f *feed) handler(logger klog.Logger, kind string) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.upsert(logger, obj) },
		UpdateFunc: func(_, obj any) { f.upsert(logger, obj) },
		DeleteFunc: func(obj any) { f.remove(logger, kind, obj) },
	}
}

// withKind returns the object as JSON with apiVersion and kind set (informers strip TypeMeta).
func withKind(obj any) ([]byte, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.MarshalJSON()
	case *v1.Pod:
		c := *o
		c.APIVersion, c.Kind = "v1", "Pod"
		return json.Marshal(&c)
	case *v1.Node:
		c := *o
		c.APIVersion, c.Kind = "v1", "Node"
		return json.Marshal(&c)
	case *resourceapi.ResourceClaim:
		c := *o
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaim"
		return json.Marshal(&c)
	case *resourceapi.ResourceClaimTemplate:
		c := *o
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaimTemplate"
		return json.Marshal(&c)
	case *resourceapi.ResourceSlice:
		c := *o
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceSlice"
		return json.Marshal(&c)
	default:
		return nil, fmt.Errorf("unexpected object %T", obj)
	}
}

func (f *feed) upsert(logger klog.Logger, obj any) {
	b, err := withKind(obj)
	if err == nil {
		_, err = f.cluster.Apply(b)
	}
	if err != nil {
		// A malformed object is reported and left out; the pods it concerns get its reason.
		logger.Error(err, "ComputeDomainPlacement: object not added to the cluster view")
	}
}

func (f *feed) applyPod(pod *v1.Pod) error {
	b, err := withKind(pod)
	if err != nil {
		return err
	}
	_, err = f.cluster.Apply(b)
	return err
}

func (f *feed) remove(logger klog.Logger, kind string, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := metaOf(obj)
	if err != nil {
		logger.Error(err, "ComputeDomainPlacement: cannot remove object", "kind", kind)
		return
	}
	if err := f.cluster.Remove(kind, m.namespace, m.name); err != nil {
		logger.Error(err, "ComputeDomainPlacement: cannot remove object", "kind", kind, "object", m.namespace+"/"+m.name)
	}
}

type objectName struct{ namespace, name string }

func metaOf(obj any) (objectName, error) {
	a, ok := obj.(interface {
		GetNamespace() string
		GetName() string
	})
	if !ok {
		return objectName{}, fmt.Errorf("unexpected object %T", obj)
	}
	return objectName{a.GetNamespace(), a.GetName()}, nil
}
