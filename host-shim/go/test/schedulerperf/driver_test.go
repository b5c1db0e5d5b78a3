package schedulerperf

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDriverEmulatorCreatesTheWorkloadTemplate(t *testing.T) {
	cd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
		"metadata": map[string]any{"name": "cd-0-3", "namespace": "cd", "uid": "uid-1"},
		"spec":     map[string]any{"channel": map[string]any{"resourceClaimTemplate": map[string]any{"name": "cd-0-3-channel"}}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ComputeDomainGVR: "ComputeDomainList"}, cd)
	client := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	emu := StartDriverEmulator(ctx, client, dyn)
	defer emu.Stop()
	for emu.Templates() == 0 {
		if ctx.Err() != nil {
			t.Fatal("no workload template created")
		}
		time.Sleep(20 * time.Millisecond)
	}
	tmpl, err := client.ResourceV1().ResourceClaimTemplates("cd").Get(ctx, "cd-0-3-channel", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Labels[DomainLabel] != "uid-1" || tmpl.Labels[targetLabel] != "Workload" {
		t.Errorf("labels %v", tmpl.Labels)
	}
	req := tmpl.Spec.Spec.Devices.Requests
	if len(req) != 1 || req[0].Exactly == nil || req[0].Exactly.DeviceClassName != channelClass {
		t.Errorf("requests %+v", req)
	}
	params := string(tmpl.Spec.Spec.Devices.Config[0].Opaque.Parameters.Raw)
	if want := `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"uid-1","allocationMode":"Single"}`; params != want {
		t.Errorf("opaque config %s, want %s", params, want)
	}
}

func TestSummarizePlacement(t *testing.T) {
	node := func(name, clique string) v1.Node {
		return v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cliqueLabel: clique}}}
	}
	pod := func(domain, node string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{PodDomainLabel: domain}, UID: types.UID(domain + node)}}
		p.Spec.NodeName = node
		if node == "" {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Message: "0/4 nodes are available"}}
		}
		return p
	}
	nodes := []v1.Node{node("a1", "A"), node("a2", "A"), node("b1", "B")}
	pods := []v1.Pod{
		pod("whole", "a1"), pod("whole", "a2"),
		pod("split", "a1"), pod("split", "b1"),
		pod("partial", "b1"), pod("partial", ""),
		pod("unstarted", ""),
		{ObjectMeta: metav1.ObjectMeta{Name: "not-a-domain-pod"}},
	}
	got := SummarizePlacement(pods, nodes, cliqueLabel)
	want := Placement{Pods: 7, Bound: 5, Pending: 2, Domains: 4, Whole: 1, Split: 1, Partial: 1, Unstarted: 1,
		Reasons: map[string]int{"0/4 nodes are available": 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
