package facts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FuzzExtract feeds arbitrary JSON, decoded as the informers decode it, to every extractor.
// It checks what holds for any object: no panic; the same object gives the same facts twice
// and is not modified; an error is a *Error naming the object as describe does and a field;
// the facts repeat what they read (names, claims) and never count fewer GPUs than a
// single container asks for (a sum that wrapped would).
//
// Seeds are the objects of testdata/vectors.yaml. A short run is part of `make test`
// (`make fuzz-smoke`); `make fuzz` runs it for as long as FUZZTIME says.
func FuzzExtract(f *testing.F) {
	for _, v := range LoadVectors(f, "testdata/vectors.yaml") {
		js, err := json.Marshal(v.Object)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js)
	}
	f.Fuzz(func(t *testing.T, js []byte) {
		var head struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(js, &head) != nil {
			return
		}
		switch head.Kind {
		case "ComputeDomain", "PodGroup":
			u := &unstructured.Unstructured{}
			if u.UnmarshalJSON(js) != nil {
				return
			}
			before := u.DeepCopy()
			if head.Kind == "ComputeDomain" {
				checkExtract(t, "ComputeDomain", u.GetNamespace(), u.GetName(), func() (any, error) { return DomainOf(u, DefaultKeys) })
			} else {
				checkExtract(t, "PodGroup", u.GetNamespace(), u.GetName(), func() (any, error) { return PodGroupOf(u) })
			}
			if !reflect.DeepEqual(before, u) {
				t.Fatal("extraction modified the object")
			}
		case "Node":
			fuzzTyped(t, js, func(n *v1.Node) (any, error) { return NodeOf(n, DefaultKeys) }, func(n *v1.Node) (string, string) { return n.Namespace, n.Name })
		case "Pod":
			fuzzTyped(t, js, func(p *v1.Pod) (any, error) {
				got, err := PodOf(p, DefaultKeys)
				if err == nil {
					checkPod(t, p, got)
				}
				return got, err
			}, func(p *v1.Pod) (string, string) { return p.Namespace, p.Name })
		case "ResourceClaim":
			fuzzTyped(t, js, func(c *resourceapi.ResourceClaim) (any, error) { return ClaimOf(c, DefaultKeys) }, func(c *resourceapi.ResourceClaim) (string, string) { return c.Namespace, c.Name })
		case "ResourceClaimTemplate":
			fuzzTyped(t, js, func(c *resourceapi.ResourceClaimTemplate) (any, error) { return TemplateOf(c, DefaultKeys) }, func(c *resourceapi.ResourceClaimTemplate) (string, string) { return c.Namespace, c.Name })
		case "ResourceSlice":
			fuzzTyped(t, js, func(s *resourceapi.ResourceSlice) (any, error) { return SliceOf(s, DefaultKeys) }, func(s *resourceapi.ResourceSlice) (string, string) { return s.Namespace, s.Name })
		}
	})
}

// fuzzTyped decodes js into a T as client-go would (JSON into the typed struct) and checks
// the extractor on it.
func fuzzTyped[T any](t *testing.T, js []byte, extract func(*T) (any, error), id func(*T) (string, string)) {
	obj := new(T)
	if json.Unmarshal(js, obj) != nil {
		return
	}
	before, err := json.Marshal(obj)
	if err != nil {
		return
	}
	ns, name := id(obj)
	checkExtract(t, kindOf(obj), ns, name, func() (any, error) { return extract(obj) })
	after, _ := json.Marshal(obj)
	if string(before) != string(after) {
		t.Fatal("extraction modified the object")
	}
}

func kindOf(obj any) string {
	switch obj.(type) {
	case *v1.Node:
		return "Node"
	case *v1.Pod:
		return "Pod"
	case *resourceapi.ResourceClaim:
		return "ResourceClaim"
	case *resourceapi.ResourceClaimTemplate:
		return "ResourceClaimTemplate"
	case *resourceapi.ResourceSlice:
		return "ResourceSlice"
	}
	return "?"
}

// checkExtract runs extract twice: the same answer both times; an error names the object.
func checkExtract(t *testing.T, kind, ns, name string, extract func() (any, error)) {
	t.Helper()
	got, err := extract()
	again, err2 := extract()
	if (err == nil) != (err2 == nil) || !reflect.DeepEqual(got, again) {
		t.Fatalf("two extractions differ: %v / %v", err, err2)
	}
	if err == nil {
		return
	}
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %T %q is not a *facts.Error", err, err)
	}
	if want := describe(kind, ns, name); e.Object != want {
		t.Fatalf("error names %q, want %q", e.Object, want)
	}
	if e.Field == "" || e.Reason == "" || !strings.HasPrefix(err.Error(), e.Object+": ") {
		t.Fatalf("error without a field or reason: %+v", e)
	}
}

// checkPod: the pod's facts repeat its identity and claims, and its GPU count is at least what
// any one container asks for.
func checkPod(t *testing.T, p *v1.Pod, got Pod) {
	t.Helper()
	if got.Namespace != p.Namespace || got.Name != p.Name {
		t.Fatalf("identity %s/%s, want %s/%s", got.Namespace, got.Name, p.Namespace, p.Name)
	}
	if len(got.Claims) != len(p.Spec.ResourceClaims) {
		t.Fatalf("%d claims, spec has %d", len(got.Claims), len(p.Spec.ResourceClaims))
	}
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			single := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{cs[i]}}}
			if n, err := PodGPUs(single, DefaultKeys); err == nil && n > got.GPUs {
				raw, _ := yaml.Marshal(cs[i].Resources)
				t.Fatalf("pod counts %d GPUs, but container %q alone asks for %d:\n%s", got.GPUs, cs[i].Name, n, raw)
			}
		}
	}
}
