package nvnode

import (
	"reflect"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func ch(uid, domain string) Claim {
	return Claim{UID: types.UID(uid), Name: "ns/" + uid, Domain: domain}
}

func TestLabelOneDomainPerNode(t *testing.T) {
	n := NewNode("", false)
	if set, r := n.Prepare([]Claim{ch("a1", "A")}); r != nil || set != "A" {
		t.Fatalf("first domain: set %q refusal %v; want the label A set", set, r)
	}
	// A second channel claim of another domain: the checkpoint refuses before the label does.
	_, r := n.Prepare([]Claim{ch("b1", "B")})
	if r == nil || r.Message != "channel 0 already allocated by claim ns/a1 (according to checkpoint)" {
		t.Fatalf("channel held by a1: refusal %v", r)
	}
	if due := n.Unprepare([]Claim{ch("a1", "A")}); !reflect.DeepEqual(due, []string{"A"}) {
		t.Fatalf("unprepare of the last claim of A: due %v", due)
	}
	// The label lingers until its removal: domain B is refused with the driver's text.
	_, r = n.Prepare([]Claim{ch("b1", "B")})
	if r == nil || r.Message != "error adding Node label for ComputeDomain: label already exists for a different ComputeDomain" {
		t.Fatalf("lingering label A: refusal %v", r)
	}
	if !n.RemoveLabel("A") || n.Label != "" {
		t.Fatalf("label A not removed after its lag: %q", n.Label)
	}
	if set, r := n.Prepare([]Claim{ch("b1", "B")}); r != nil || set != "B" {
		t.Fatalf("after the removal: set %q refusal %v", set, r)
	}
}

func TestStaleLabelFromNodeObject(t *testing.T) {
	n := NewNode("old", false)
	if _, r := n.Prepare([]Claim{ch("x", "new")}); r == nil {
		t.Fatal("a node whose Node object carries another domain's label prepared a new domain")
	}
	if set, r := n.Prepare([]Claim{ch("y", "old")}); r != nil || set != "" {
		t.Fatalf("the labelled domain itself: set %q refusal %v", set, r)
	}
}

func TestRemovalSkippedWhenPreparedAgain(t *testing.T) {
	n := NewNode("", false)
	n.Prepare([]Claim{ch("a1", "A")})
	n.Unprepare([]Claim{ch("a1", "A")})
	n.Prepare([]Claim{ch("a2", "A")})
	if n.RemoveLabel("A") || n.Label != "A" {
		t.Fatal("the lagging removal dropped the label of a domain prepared again")
	}
}

func TestHostManagedSetsNoLabel(t *testing.T) {
	n := NewNode("", true)
	if set, r := n.Prepare([]Claim{ch("a1", "A")}); r != nil || set != "" {
		t.Fatalf("host-managed: set %q refusal %v", set, r)
	}
	if due := n.Unprepare([]Claim{ch("a1", "A")}); len(due) != 0 {
		t.Fatalf("host-managed: removal due %v", due)
	}
	n2 := NewNode("stale", true)
	if _, r := n2.Prepare([]Claim{ch("b1", "B")}); r != nil {
		t.Fatalf("host-managed ignores the label: %v", r)
	}
}

func TestPrepareIsIdempotentAndSkipsGPUClaims(t *testing.T) {
	n := NewNode("", false)
	gpu := Claim{UID: "g", Name: "ns/g"}
	for range 2 {
		if _, r := n.Prepare([]Claim{gpu, ch("a1", "A")}); r != nil {
			t.Fatalf("prepare retried: %v", r)
		}
	}
	if due := n.Unprepare([]Claim{gpu, ch("a1", "A")}); !reflect.DeepEqual(due, []string{"A"}) {
		t.Fatalf("one unprepare after a retried prepare: due %v", due)
	}
	if n.Prepared("A") {
		t.Fatal("domain still counted after its only claim was released")
	}
}

func TestChannelDomain(t *testing.T) {
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u"}}
	if ChannelDomain(claim) != "" {
		t.Fatal("unallocated claim has a domain")
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Driver: ComputeDomainDriver, Device: "channel-0"}},
		Config: []resourcev1.DeviceAllocationConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{
			Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: ComputeDomainDriver, Parameters: runtime.RawExtension{
				Raw: []byte(`{"kind":"ComputeDomainChannelConfig","domainID":"D1","allocationMode":"Single"}`)}}}}},
	}}
	if got := ClaimOf(claim); got.Domain != "D1" || got.Name != "ns/c" {
		t.Fatalf("ClaimOf = %+v", got)
	}
	claim.Status.Allocation.Devices.Results[0].Driver = GPUDriver
	if ChannelDomain(claim) != "" {
		t.Fatal("a GPU claim with a stray config has a domain")
	}
}
