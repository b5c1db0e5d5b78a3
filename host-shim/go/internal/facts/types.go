package facts

import "strings"

// The fact types mirror extract.rs `Object` one to one (and the CDF3 records internal/cdplace
// encodes). Optional values are pointers: nil is "none". The JSON tags name the fields in
// testdata/vectors.yaml.

// Node is what cdplace keeps of a Node.
type Node struct {
	Name          string  `json:"name"`
	CliqueLabel   *string `json:"cliqueLabel"`
	DomainLabel   *string `json:"domainLabel"`
	Unschedulable bool    `json:"unschedulable"`
	// GPUs is the allocatable of the GPU extended resource.
	GPUs uint32 `json:"gpus"`
}

// PodClaim is one entry of a pod's spec.resourceClaims, with the claim generated for it.
type PodClaim struct {
	Name      string  `json:"name"`
	Template  *string `json:"template"`
	Claim     *string `json:"claim"`
	Generated *string `json:"generated"`
}

// Pod is what cdplace keeps of a Pod.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Terminal: phase Succeeded or Failed, the pod holds nothing any more.
	Terminal          bool       `json:"terminal"`
	NodeName          *string    `json:"nodeName"`
	NominatedNodeName *string    `json:"nominatedNodeName"`
	Claims            []PodClaim `json:"claims"`
	// GPUs through the extended resource: max(sum over containers, max over init containers),
	// each container's requests, else its limits.
	GPUs     uint32  `json:"gpus"`
	SizeHint *uint32 `json:"sizeHint"`
	PodGroup *string `json:"podGroup"`
	// Owner is the owner key of the controller whose size counts (ownerKeyOf).
	Owner     *string `json:"owner"`
	CreatedMs int64   `json:"createdMs"`
	Priority  int32   `json:"priority"`
	// RuntimeLimitMs is how long after it started the pod is gone at the latest:
	// spec.activeDeadlineSeconds plus its termination grace period, in milliseconds (nil
	// without a deadline).
	RuntimeLimitMs *int64 `json:"runtimeLimitMs"`
	// StartedMs is status.startTime, Unix milliseconds: 0 before the kubelet started it, and
	// always 0 without RuntimeLimitMs (the start is read only to know when the pod ends).
	StartedMs int64 `json:"startedMs"`
}

// Node is where the pod is or will be (nodeName, else the nominated node), "" for none.
func (p *Pod) Node() string {
	if p.NodeName != nil {
		return *p.NodeName
	}
	if p.NominatedNodeName != nil {
		return *p.NominatedNodeName
	}
	return ""
}

// Equal reports whether two pods' facts are the same: an update that changes none of them
// changes nothing the policy reads. Every field is compared (TestPodEqualComparesEveryField
// fails when a field is added without it).
func (p *Pod) Equal(o *Pod) bool {
	if p.Namespace != o.Namespace || p.Name != o.Name || p.Terminal != o.Terminal || p.GPUs != o.GPUs ||
		p.CreatedMs != o.CreatedMs || p.Priority != o.Priority || p.StartedMs != o.StartedMs ||
		!samePtr(p.NodeName, o.NodeName) || !samePtr(p.NominatedNodeName, o.NominatedNodeName) ||
		!samePtr(p.SizeHint, o.SizeHint) || !samePtr(p.PodGroup, o.PodGroup) || !samePtr(p.Owner, o.Owner) ||
		!samePtr(p.RuntimeLimitMs, o.RuntimeLimitMs) || len(p.Claims) != len(o.Claims) {
		return false
	}
	for i := range p.Claims {
		a, b := &p.Claims[i], &o.Claims[i]
		if a.Name != b.Name || !samePtr(a.Template, b.Template) || !samePtr(a.Claim, b.Claim) || !samePtr(a.Generated, b.Generated) {
			return false
		}
	}
	return true
}

// samePtr: both nil, or both set to equal values.
func samePtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// GPUDemand is what a claim spec asks of the GPU driver: a count, or all devices.
type GPUDemand struct {
	Count uint32 `json:"count"`
	All   bool   `json:"all"`
}

// Claim is what cdplace keeps of a ResourceClaim.
type Claim struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Domain is the domainID of an opaque ComputeDomainChannelConfig/DaemonConfig.
	Domain *string   `json:"domain"`
	Daemon bool      `json:"daemon"`
	GPUs   GPUDemand `json:"gpus"`
	// AllocatedGPUs counts the allocation's results of the GPU driver (nil: not allocated).
	AllocatedGPUs *uint32 `json:"allocatedGpus"`
}

// Template is what cdplace keeps of a ResourceClaimTemplate.
type Template struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Domain    *string   `json:"domain"`
	Daemon    bool      `json:"daemon"`
	GPUs      GPUDemand `json:"gpus"`
}

// Slice is what cdplace keeps of a ResourceSlice.
type Slice struct {
	Name string `json:"name"`
	// Node is set only for node-local slices of the GPU driver.
	Node *string `json:"node"`
	GPUs uint32  `json:"gpus"`
	// Pool is spec.pool.name: a pool's slices are counted together.
	Pool string `json:"pool"`
	// Generation is spec.pool.generation: only the slices of a pool's newest generation count.
	Generation int64 `json:"generation"`
}

// Empty reports whether the slice says nothing to the policy (another driver's, or not
// node-local): such a slice is never sent.
func (s *Slice) Empty() bool { return s.Node == nil }

// Domain is what cdplace keeps of a ComputeDomain.
type Domain struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	UID       string  `json:"uid"`
	SizeHint  *uint32 `json:"sizeHint"`
	// NumNodes is spec.numNodes when positive.
	NumNodes *uint32 `json:"numNodes"`
}

// PodGroup is what cdplace keeps of a PodGroup.
type PodGroup struct {
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	MinCount  *uint32 `json:"minCount"`
	Priority  *int32  `json:"priority"`
}

// Owner is how many pods a workload object will run.
type Owner struct {
	// Key is `<Kind>/<namespace>/<name>`.
	Key string `json:"key"`
	// Size nil: the object gives no size (the owner is forgotten).
	Size *uint32 `json:"size"`
	// Source says where the size was read, e.g. `Job training/trainer spec.parallelism`.
	Source   string `json:"source"`
	Priority *int32 `json:"priority"`
}

// Error is an object the policy cannot use: Object is `Kind namespace/name`, Field the field
// at fault, Reason why. Its text is the one extract.rs gives for the same object.
type Error struct {
	Object string
	Field  string
	Reason string
}

func (e *Error) Error() string { return e.Object + ": " + e.Reason }

// describe names an object as extract.rs does: `Kind namespace/name` or `Kind name`.
func describe(kind, namespace, name string) string {
	if name == "" {
		name = "<no name>"
	}
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte(' ')
	if namespace != "" {
		b.WriteString(namespace)
		b.WriteByte('/')
	}
	b.WriteString(name)
	return b.String()
}

func required(kind, namespace, name, field, value string) error {
	if value == "" {
		return &Error{Object: describe(kind, namespace, name), Field: field, Reason: field + " is required"}
	}
	return nil
}

func some[T any](v T) *T { return &v }
