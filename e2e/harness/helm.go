package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// What the Helm chart test (e2e/helm_test.go) needs of the control plane: rendered manifests
// applied server-side, with the API server's warnings kept, and a scheduler started with the
// command-line flags of the chart's Deployment.

// DecodeManifests splits a multi-document YAML stream (what `helm template` prints) into
// objects, skipping empty documents.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// ApplyOptions says how ServerSideApply sends an object.
type ApplyOptions struct {
	// FieldManager owns the applied fields (e.g. "helm").
	FieldManager string
	// DryRun has the API server validate, default and admit the object without storing it.
	DryRun bool
}

// ServerSideApply applies each object with server-side apply (PATCH application/apply-patch+yaml,
// force on), as `kubectl apply --server-side` and Helm 4 do, and returns the API server's
// warnings (deprecations, Pod Security) per object as "Kind/name: warning".
func (cp *ControlPlane) ServerSideApply(ctx context.Context, objs []*unstructured.Unstructured, opts ApplyOptions) ([]string, error) {
	var warnings warningLog
	cfg := rest.CopyConfig(cp.Config)
	cfg.WarningHandler = &warnings
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var out []string
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", gvk, obj.GetName(), err)
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return out, err
		}
		po := metav1.PatchOptions{FieldManager: opts.FieldManager, Force: ptr.To(true)}
		if opts.DryRun {
			po.DryRun = []string{metav1.DryRunAll}
		}
		ri := dynamic.ResourceInterface(dyn.Resource(mapping.Resource))
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, po); err != nil {
			return out, fmt.Errorf("server-side apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		for _, w := range warnings.take() {
			out = append(out, fmt.Sprintf("%s/%s: %s", gvk.Kind, obj.GetName(), w))
		}
	}
	return out, nil
}

// warningLog collects the API server's Warning headers.
type warningLog struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.msgs
	w.msgs = nil
	return m
}
