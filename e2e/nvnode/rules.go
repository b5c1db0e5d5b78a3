// Package nvnode holds the node-side rules of the NVIDIA ComputeDomain kubelet plugin
// (dra-driver-nvidia-gpu) that decide whether a kubelet's Prepare succeeds: one ComputeDomain per
// node through the node label, the label left behind after Unprepare until the domain's daemon is
// torn down, one channel claim per node (the plugin's checkpoint), and host-managed IMEX daemons
// (no label at all). It has one owner for both places that play the plugin: the process-level
// Prepare emulator (e2e/harness) and the DRA kubelet plugin that real kubelets call on kind
// (e2e/cmd/cdplace-fake-nvidia-driver). It keeps no clock and makes no API calls; callers write the
// label and time its removal.
package nvnode

import (
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

// The driver's names and error texts, worded exactly as the driver words them.
const (
	// ComputeDomainDriver is the driver name of the ComputeDomain devices (channel, daemon).
	ComputeDomainDriver = nvdriver.Driver
	// GPUDriver is the driver name of the GPUs.
	GPUDriver = "gpu.nvidia.com"
	// DomainNodeLabel is the label the plugin sets on a node that runs a ComputeDomain's daemon.
	DomainNodeLabel = nvdriver.DomainLabel
	// ErrLabelExists is the driver's refusal when a node already runs another ComputeDomain.
	ErrLabelExists = "label already exists for a different ComputeDomain"
	// ErrLabelWrap prefixes ErrLabelExists in the kubelet's message.
	ErrLabelWrap = "error adding Node label for ComputeDomain: "
	// ReasonPrepareErr is the kubelet's Event reason for a failed Prepare.
	ReasonPrepareErr = "FailedPrepareDynamicResources"
)

// Claim is one ResourceClaim as the rules see it.
type Claim struct {
	UID  types.UID
	Name string // namespace/name
	// Domain is the domainID of a claim allocated a ComputeDomain channel, "" for other claims.
	Domain string
}

// Refusal is a Prepare the rules refuse: the claim and the driver's message.
type Refusal struct {
	Claim   Claim
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Node is the plugin's state on one node.
type Node struct {
	// HostManaged: the administrator runs the IMEX daemons; Prepare sets no node label.
	HostManaged bool
	// Label is the node's ComputeDomain label as the plugin last wrote it ("" for none).
	Label   string
	channel map[int]Claim  // the checkpoint: channel id -> claim
	domains map[string]int // prepared channel claims per domain
}

// NewNode is a node whose Node object carries label (the plugin reads it from the API).
func NewNode(label string, hostManaged bool) *Node {
	return &Node{HostManaged: hostManaged, Label: label, channel: map[int]Claim{}, domains: map[string]int{}}
}

// Prepare applies the rules to one pod's claims, all or none. It returns the label to set ("" if
// the label does not change) or the refusal of the first claim the driver would refuse.
func (n *Node) Prepare(claims []Claim) (setLabel string, refused *Refusal) {
	for _, cl := range claims {
		if cl.Domain == "" {
			continue
		}
		if held, ok := n.channel[0]; ok && held.UID != cl.UID {
			return "", &Refusal{Claim: cl,
				Message: fmt.Sprintf("channel 0 already allocated by claim %s (according to checkpoint)", held.Name)}
		}
		if !n.HostManaged && n.Label != "" && n.Label != cl.Domain {
			return "", &Refusal{Claim: cl, Message: ErrLabelWrap + ErrLabelExists}
		}
	}
	for _, cl := range claims {
		if cl.Domain == "" {
			continue
		}
		if held, ok := n.channel[0]; ok && held.UID == cl.UID {
			continue // prepared again (the kubelet retries): idempotent, as the checkpoint is
		}
		n.channel[0] = cl
		n.domains[cl.Domain]++
		if !n.HostManaged && n.Label == "" {
			n.Label = cl.Domain
			setLabel = cl.Domain
		}
	}
	return setLabel, nil
}

// Unprepare releases claims. It returns the domains whose label is now due for removal; the
// caller removes it after the daemon's teardown lag through RemoveLabel, which checks again.
func (n *Node) Unprepare(claims []Claim) (due []string) {
	for _, cl := range claims {
		if cl.Domain == "" {
			continue
		}
		held, ok := n.channel[0]
		if !ok || held.UID != cl.UID {
			continue // never prepared here, or already released
		}
		delete(n.channel, 0)
		n.domains[cl.Domain]--
		if n.domains[cl.Domain] > 0 {
			continue
		}
		delete(n.domains, cl.Domain)
		if !n.HostManaged && n.Label == cl.Domain {
			due = append(due, cl.Domain)
		}
	}
	return due
}

// Prepared reports whether any claim of domain is prepared on the node.
func (n *Node) Prepared(domain string) bool { return n.domains[domain] > 0 }

// ChannelHolder is the claim holding the node's channel, if any.
func (n *Node) ChannelHolder() (Claim, bool) {
	c, ok := n.channel[0]
	return c, ok
}

// RemoveLabel drops the label of domain once its lag has passed, unless the domain was prepared
// again meanwhile or the label changed. It reports whether the label must be removed.
func (n *Node) RemoveLabel(domain string) bool {
	if n.domains[domain] > 0 || n.Label != domain {
		return false
	}
	n.Label = ""
	return true
}

// ChannelDomain is the domainID of a claim allocated a compute-domain channel, or "" (also for a
// claim not yet allocated).
func ChannelDomain(claim *resourcev1.ResourceClaim) string {
	if claim.Status.Allocation == nil {
		return ""
	}
	channel := false
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == ComputeDomainDriver {
			channel = true
		}
	}
	if !channel {
		return ""
	}
	for _, c := range claim.Status.Allocation.Devices.Config {
		if c.Opaque == nil || c.Opaque.Driver != ComputeDomainDriver {
			continue
		}
		var p struct {
			Kind     string `json:"kind"`
			DomainID string `json:"domainID"`
		}
		if json.Unmarshal(c.Opaque.Parameters.Raw, &p) == nil && p.Kind == "ComputeDomainChannelConfig" {
			return p.DomainID
		}
	}
	return ""
}

// ClaimOf is the rules' view of an allocated claim.
func ClaimOf(claim *resourcev1.ResourceClaim) Claim {
	return Claim{UID: claim.UID, Name: claim.Namespace + "/" + claim.Name, Domain: ChannelDomain(claim)}
}
