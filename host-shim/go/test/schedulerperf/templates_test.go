package schedulerperf

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"text/template"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

// render executes a template under config/templates as scheduler_perf does (text/template with
// its integer helpers, which divide in float64 and truncate) and decodes the result strictly.
func render(t *testing.T, name string, env map[string]any, into any) {
	t.Helper()
	num := func(v any) float64 {
		switch x := v.(type) {
		case int:
			return float64(x)
		case float64:
			return x
		}
		t.Fatalf("%s: not a number: %T", name, v)
		return 0
	}
	funcs := template.FuncMap{
		"DivideInt": func(a, b any) int { return int(num(a) / num(b)) },
		"Mod":       func(a, b any) int { return int(num(a)) % int(num(b)) },
		"AddInt": func(xs ...any) int {
			s := 0.0
			for _, x := range xs {
				s += num(x)
			}
			return int(s)
		},
	}
	raw, err := os.ReadFile("config/templates/" + name)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New(name).Funcs(funcs).Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, env); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(out.Bytes(), into); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
}

func TestNodesAndSlicesMatch(t *testing.T) {
	cliques := map[string]int{}
	for i := 0; i < 36; i++ {
		var node v1.Node
		render(t, "node-nvl72.yaml", map[string]any{"Index": i}, &node)
		want := fmt.Sprintf("nvl72-r%03d-t%02d", i/18, i%18)
		if node.Name != want {
			t.Fatalf("node %d named %s, want %s", i, node.Name, want)
		}
		cliques[node.Labels[cliqueLabel]]++
		if q := node.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 4 {
			t.Errorf("%s: %v GPUs allocatable, want 4", node.Name, q.String())
		}
		var gpus, cd resourcev1.ResourceSlice
		render(t, "resourceslice-gpu.yaml", map[string]any{"Index": i}, &gpus)
		render(t, "resourceslice-computedomain.yaml", map[string]any{"Index": i}, &cd)
		for _, s := range []resourcev1.ResourceSlice{gpus, cd} {
			if s.Spec.NodeName == nil || *s.Spec.NodeName != node.Name || s.Spec.Pool.Name != node.Name {
				t.Errorf("slice %s is for node %v pool %s, want %s", s.Name, s.Spec.NodeName, s.Spec.Pool.Name, node.Name)
			}
		}
		if gpus.Spec.Driver != "gpu.nvidia.com" || len(gpus.Spec.Devices) != 4 {
			t.Errorf("GPU slice: driver %s, %d devices", gpus.Spec.Driver, len(gpus.Spec.Devices))
		}
		if cd.Spec.Driver != nvdriver.Driver || len(cd.Spec.Devices) != 2 ||
			cd.Spec.Devices[0].Name != "channel-0" || cd.Spec.Devices[1].Name != "daemon-0" {
			t.Errorf("compute-domain slice: %+v", cd.Spec)
		}
	}
	if len(cliques) != 2 {
		t.Errorf("36 trays in %d cliques, want 2 of 18: %v", len(cliques), cliques)
	}
	for c, n := range cliques {
		if n != 18 {
			t.Errorf("clique %s has %d trays, want 18", c, n)
		}
	}
}

// TestPodsMatchTheirDomains: pods 30b..30b+29 fill block b's domains of 2, 4, 8 and 16 trays,
// each pod names its own domain's template, and pod affinity is there only for the baseline.
func TestPodsMatchTheirDomains(t *testing.T) {
	sizes := map[string]string{}
	for i := 0; i < 8; i++ {
		var cd unstructured.Unstructured
		render(t, "computedomain.yaml", map[string]any{"Index": i}, &cd.Object)
		tmpl, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "resourceClaimTemplate", "name")
		if tmpl != cd.GetName()+"-channel" {
			t.Errorf("%s names template %s", cd.GetName(), tmpl)
		}
		sizes[cd.GetName()] = cd.GetAnnotations()["cdplace.nvidia.com/size"]
	}
	for _, affinity := range []bool{false, true} {
		count := map[string]int{}
		for i := 0; i < 60; i++ {
			var pod v1.Pod
			render(t, "pod-computedomain.yaml", map[string]any{"Index": i, "podAffinity": affinity}, &pod)
			cd := pod.Labels[PodDomainLabel]
			count[cd]++
			if got := *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName; got != cd+"-channel" {
				t.Errorf("pod %d of %s uses template %s", i, cd, got)
			}
			if q := pod.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 4 {
				t.Errorf("pod %d asks %s GPUs, want a whole tray", i, q.String())
			}
			hasAffinity := pod.Spec.Affinity.PodAffinity != nil
			if hasAffinity != affinity {
				t.Errorf("pod %d: pod affinity %v, want %v", i, hasAffinity, affinity)
			}
			if affinity && pod.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != cliqueLabel {
				t.Errorf("pod %d: affinity not on the clique label", i)
			}
		}
		if len(count) != len(sizes) {
			t.Errorf("pods in %d domains, ComputeDomains %d", len(count), len(sizes))
		}
		for cd, n := range count {
			if sizes[cd] != fmt.Sprint(n) {
				t.Errorf("domain %s: %d pods, size annotation %q", cd, n, sizes[cd])
			}
		}
	}
}
