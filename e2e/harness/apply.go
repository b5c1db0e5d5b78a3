package harness

import (
	"context"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// ApplyFile creates every object of a (multi-document) YAML file, as `kubectl create -f` would;
// objects that already exist are left as they are. defaultNamespace is used for namespaced
// objects without one.
func (cp *ControlPlane) ApplyFile(ctx context.Context, path, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := cp.Apply(ctx, data, defaultNamespace)
	if err != nil {
		return objs, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Apply is ApplyFile for YAML in memory.
func (cp *ControlPlane) Apply(ctx context.Context, data []byte, defaultNamespace string) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	docs, err := DecodeManifests(data)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range docs {
		objs := []*unstructured.Unstructured{obj}
		if obj.IsList() {
			// A `kind: List` (what `kubectl get -o yaml` writes): its items, in order.
			list, err := obj.ToList()
			if err != nil {
				return out, err
			}
			objs = objs[:0]
			for i := range list.Items {
				objs = append(objs, &list.Items[i])
			}
		}
		for _, o := range objs {
			created, err := cp.create(ctx, mapper, o, defaultNamespace)
			if err != nil {
				return out, err
			}
			if created != nil {
				out = append(out, created)
			}
		}
	}
	return out, nil
}

// create makes one object, resolving its resource through discovery; it returns nil for an
// object that already exists.
func (cp *ControlPlane) create(ctx context.Context, mapper *restmapper.DeferredDiscoveryRESTMapper, obj *unstructured.Unstructured, defaultNamespace string) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	var err error
	// A CRD created a moment ago may not be in discovery yet.
	for i := 0; ; i++ {
		mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil || i == 50 {
			break
		}
		mapper.Reset()
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
	}
	ri := cp.Dynamic.Resource(mapping.Resource)
	var created *unstructured.Unstructured
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = defaultNamespace
		}
		created, err = ri.Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	} else {
		created, err = ri.Create(ctx, obj, metav1.CreateOptions{})
	}
	if apierrors.IsAlreadyExists(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	return created, nil
}
