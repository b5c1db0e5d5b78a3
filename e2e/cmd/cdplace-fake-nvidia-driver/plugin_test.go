package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/cdplace/cdplace/e2e/nvnode"
)

func channelClaim(name, domain string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
			Results: []resourcev1.DeviceRequestAllocationResult{{Request: "channel", Driver: nvnode.ComputeDomainDriver, Pool: "n1", Device: "channel-0"}},
			Config: []resourcev1.DeviceAllocationConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: nvnode.ComputeDomainDriver, Parameters: runtime.RawExtension{
					Raw: fmt.Appendf(nil, `{"kind":"ComputeDomainChannelConfig","domainID":%q}`, domain)}}}}},
		}}},
	}
}

func nodeLabel(t *testing.T, p *cdPlugin) string {
	t.Helper()
	n, err := p.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[nvnode.DomainNodeLabel]
}

// The plugin a real kubelet calls must refuse exactly what the driver refuses, in its words, and
// write the node label as the driver does: set on the first Prepare, left behind for the lag
// after the last Unprepare, then removed.
func TestComputeDomainPluginRules(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	st := newStats(client, "nvnode", "n1")
	p := newCDPlugin(client, "n1", false, 300*time.Millisecond, st)

	a := channelClaim("a", "dom-a")
	res, err := p.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{a})
	if err != nil || res[a.UID].Err != nil {
		t.Fatalf("prepare a: %v %v", err, res[a.UID].Err)
	}
	if d := res[a.UID].Devices; len(d) != 1 || d[0].DeviceName != "channel-0" || d[0].PoolName != "n1" {
		t.Fatalf("prepare a: devices %+v", d)
	}
	if got := nodeLabel(t, p); got != "dom-a" {
		t.Fatalf("label after prepare a = %q", got)
	}
	if _, err := p.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: a.UID}}); err != nil {
		t.Fatal(err)
	}
	b := channelClaim("b", "dom-b")
	res, _ = p.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{b})
	want := "error adding Node label for ComputeDomain: label already exists for a different ComputeDomain"
	if res[b.UID].Err == nil || res[b.UID].Err.Error() != want {
		t.Fatalf("prepare b within the lag: %v; want %q", res[b.UID].Err, want)
	}
	deadline := time.Now().Add(5 * time.Second)
	for nodeLabel(t, p) != "" {
		if time.Now().After(deadline) {
			t.Fatal("the label of dom-a outlived its lag")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, _ = p.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{b})
	if res[b.UID].Err != nil || nodeLabel(t, p) != "dom-b" {
		t.Fatalf("prepare b after the lag: %v, label %q", res[b.UID].Err, nodeLabel(t, p))
	}
	// A second channel claim on the node: the checkpoint refuses it.
	c := channelClaim("c", "dom-b")
	res, _ = p.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{c})
	if res[c.UID].Err == nil || res[c.UID].Err.Error() != "channel 0 already allocated by claim ns/b (according to checkpoint)" {
		t.Fatalf("prepare c: %v", res[c.UID].Err)
	}
	d := st.data()
	if d["computeDomainPrepares"] != "2" || d["refusals"] != "2" || d["unprepares"] != "1" {
		t.Fatalf("counts %v", d)
	}
}

// A label found on the Node object (left by an earlier plugin, or stale) refuses another domain.
func TestComputeDomainPluginReadsStaleLabel(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels: map[string]string{nvnode.DomainNodeLabel: "stale"}}})
	p := newCDPlugin(client, "n1", false, time.Second, newStats(client, "nvnode", "n1"))
	a := channelClaim("a", "dom-a")
	res, _ := p.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{a})
	if res[a.UID].Err == nil {
		t.Fatal("prepared a domain on a node labelled for another")
	}
	hm := newCDPlugin(client, "n1", true, time.Second, newStats(client, "nvnode", "n1"))
	res, _ = hm.PrepareResourceClaims(ctx, []*resourcev1.ResourceClaim{a})
	if res[a.UID].Err != nil {
		t.Fatalf("host-managed refused for a label: %v", res[a.UID].Err)
	}
}

func TestStatsConfigMap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	st := newStats(client, "nvnode", "n1")
	go st.run(ctx)
	st.refused(nvnode.Claim{Name: "ns/x"}, "boom")
	deadline := time.Now().Add(5 * time.Second)
	for {
		cm, err := client.CoreV1().ConfigMaps("nvnode").Get(ctx, "nvnode-n1", metav1.GetOptions{})
		if err == nil && cm.Data["refusals"] == "1" && cm.Data["lastRefusal"] == "ns/x: boom" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status ConfigMap: %v %v", cm, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
