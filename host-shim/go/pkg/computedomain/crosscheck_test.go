package computedomain

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// cliPath is the `cdplace` CLI `make build` writes; it extracts facts in Rust from JSON objects
// (host-shim/lib/src/extract.rs) and runs the same policy component.
const cliPath = "../../../../target/release/cdplace"

// asJSON is an object as the API server serializes it (informers strip apiVersion and kind).
func asJSON(t *testing.T, obj any) json.RawMessage {
	t.Helper()
	var out any
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		out = o.Object
	case *v1.Node:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = "v1", "Node"
		out = c
	case *v1.Pod:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = "v1", "Pod"
		out = c
	case *resourceapi.ResourceClaim:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaim"
		out = c
	case *resourceapi.ResourceClaimTemplate:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceClaimTemplate"
		out = c
	case *resourceapi.ResourceSlice:
		c := o.DeepCopy()
		c.APIVersion, c.Kind = "resource.k8s.io/v1", "ResourceSlice"
		out = c
	default:
		t.Fatalf("no JSON form for %T", obj)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// report is the part of `cdplace explain --output json` compared here.
type report struct {
	PreFilter struct {
		Code   string   `json:"code"`
		Reason string   `json:"reason"`
		Nodes  []string `json:"nodes"`
	} `json:"preFilter"`
	Nodes []struct {
		Name   string `json:"name"`
		Filter struct {
			Code   string `json:"code"`
			Reason string `json:"reason"`
		} `json:"filter"`
		Score *int64 `json:"score"`
	} `json:"nodes"`
}

// The Go path (objects extracted in Go, only the relevant ones sent, packed) decides exactly
// what the Rust path decides (every object as JSON, extracted by extract.rs), pod by pod and
// node by node.
func TestGoFactsDecideAsRustExtraction(t *testing.T) {
	if _, err := os.Stat(cliPath); err != nil {
		t.Fatalf("the cdplace CLI is needed to compare with Rust's extraction (run `make build`): %v", err)
	}
	nodes := append(append(rack("a", 1, 6), rack("b", 2, 4)...), makeNode("cpu-0", 0, 0), makeNode("gpu-free", 0, 4))
	nodes[5].Spec.Unschedulable = true
	nodes[4].Labels[DomainLabel] = "uid-gone"
	cds := []*unstructured.Unstructured{computeDomain("big", "uid-big", 4), computeDomain("small", "uid-small", 2),
		computeDomain("six", "uid-six", 0), computeDomain("huge", "uid-huge", 12)}
	objs := []runtime.Object{
		channelTemplate("big", "uid-big"), channelTemplate("small", "uid-small"), channelTemplate("six", "uid-six"), channelTemplate("huge", "uid-huge"),
		gpuTemplate("one-gpu"), daemonTemplate("big-daemon", "uid-big"),
		boundTo(cdPod("big", "big-0"), "a-00"), boundTo(cdPod("big", "big-1"), "a-01"), cdPod("big", "big-2"), cdPod("big", "big-3"),
		cdPod("small", "small-0"), cdPod("small", "small-1"),
		makePod("six-0", "six-channel", 2),
		cdPod("huge", "huge-0"),
		// Trays held by other pods: a GPU pod, a DRA pod with an allocated GPU claim, an IMEX
		// daemon; and pods that hold nothing the policy reads.
		boundTo(makePod("batch", "", 4), "b-00"),
		withClaim(boundTo(makePod("dra", "", 0), "b-01"), "dra-gpus"), allocated(gpuClaim("dra-gpus"), 4),
		boundTo(podWithClaim("daemon", v1.PodResourceClaim{Name: "c", ResourceClaimTemplateName: ptr.To("big-daemon")}, ""), "a-02"),
		boundTo(makePod("cpu", "", 0), "cpu-0"), boundTo(makePod("elsewhere", "", 4), "gpu-free"),
		gpuSlice("b-02-gpu", "gpu.nvidia.com", "b-02", 8), gpuSlice("b-02-nic", "nic.example.com", "b-02", 2),
	}
	var items []json.RawMessage
	for _, n := range nodes {
		items = append(items, asJSON(t, n))
	}
	for _, cd := range cds {
		items = append(items, asJSON(t, cd))
	}
	for _, o := range objs {
		items = append(items, asJSON(t, o))
	}
	list, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	snapshot := filepath.Join(t.TempDir(), "snapshot.json")
	if err := os.WriteFile(snapshot, list, 0o600); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, "", nodes, cds, objs...)
	e.apply()
	decided := 0
	for _, o := range objs {
		pod, ok := o.(*v1.Pod)
		if !ok || pod.Spec.NodeName != "" {
			continue
		}
		t.Run(pod.Name, func(t *testing.T) {
			out, err := exec.Command(cliPath, "explain", "--snapshot", snapshot, "--pod", ns+"/"+pod.Name, "--output", "json").Output()
			if err != nil {
				t.Fatalf("cdplace explain: %v", err)
			}
			var want report
			if err := json.Unmarshal(out, &want); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			got := e.schedule(pod)
			code := got.preFilter.Code().String()
			if got.skipped {
				code = "Skip"
			}
			if code != want.PreFilter.Code || reasonsOf(got.preFilter) != want.PreFilter.Reason {
				t.Fatalf("PreFilter: Go %s %q, Rust %s %q", code, reasonsOf(got.preFilter), want.PreFilter.Code, want.PreFilter.Reason)
			}
			if want.PreFilter.Code != "Success" {
				return
			}
			decided++
			slices.Sort(want.PreFilter.Nodes)
			if !slices.Equal(got.allowed, want.PreFilter.Nodes) {
				t.Fatalf("node set: Go %v, Rust %v", got.allowed, want.PreFilter.Nodes)
			}
			for _, n := range want.Nodes {
				st := got.filter[n.Name]
				if st.Code().String() != n.Filter.Code || reasonsOf(st) != n.Filter.Reason {
					t.Errorf("%s Filter: Go %v %q, Rust %s %q", n.Name, st.Code(), reasonsOf(st), n.Filter.Code, n.Filter.Reason)
				}
				if score, ok := got.score[n.Name]; n.Score != nil && (!ok || score != *n.Score) {
					t.Errorf("%s Score: Go %d (%v), Rust %d", n.Name, score, ok, *n.Score)
				}
			}
		})
	}
	if decided < 2 {
		t.Fatalf("only %d pods were decided with Success; the comparison needs more", decided)
	}
}

func reasonsOf(st *fwk.Status) string {
	if st == nil {
		return ""
	}
	return strings.Join(st.Reasons(), "; ")
}

func allocated(c *resourceapi.ResourceClaim, gpus int) *resourceapi.ResourceClaim {
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for i := 0; i < gpus; i++ {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "b-01", Device: "gpu-" + string(rune('0'+i))})
	}
	return c
}
