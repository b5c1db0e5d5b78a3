package facts

import (
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cdplace/cdplace/host-shim/go/internal/owners"
)

// NodeOf reads a Node.
func NodeOf(n *v1.Node, k Keys) (Node, error) {
	if err := required("Node", n.Namespace, n.Name, "metadata.name", n.Name); err != nil {
		return Node{}, err
	}
	f := Node{Name: n.Name, Unschedulable: n.Spec.Unschedulable}
	if v, ok := n.Labels[k.CliqueLabel]; ok {
		f.CliqueLabel = some(v)
	}
	if v, ok := n.Labels[DomainLabel]; ok {
		f.DomainLabel = some(v)
	}
	if q, ok := n.Status.Allocatable[v1.ResourceName(k.GPUResourceName)]; ok {
		f.GPUs = deviceCount(q)
	}
	return f, nil
}

// PodOf reads a Pod. Its owner key comes from ownerKeyOf.
func PodOf(p *v1.Pod, k Keys) (Pod, error) {
	if err := required("Pod", p.Namespace, p.Name, "metadata.name", p.Name); err != nil {
		return Pod{}, err
	}
	if err := required("Pod", p.Namespace, p.Name, "metadata.namespace", p.Namespace); err != nil {
		return Pod{}, err
	}
	size, err := sizeAnnotation("Pod", p.Namespace, p.Name, k.SizeAnnotation, p.Annotations)
	if err != nil {
		return Pod{}, err
	}
	gpus, err := PodGPUs(p, k)
	if err != nil {
		return Pod{}, err
	}
	f := Pod{
		GPUs:      gpus,
		Namespace: p.Namespace,
		Name:      p.Name,
		Terminal:  p.Status.Phase == phaseSucceeded || p.Status.Phase == phaseFailed,
		SizeHint:  size,
		Owner:     ownerKeyOf(p),
	}
	if p.Spec.NodeName != "" {
		f.NodeName = some(p.Spec.NodeName)
	}
	if p.Status.NominatedNodeName != "" {
		f.NominatedNodeName = some(p.Status.NominatedNodeName)
	}
	f.Claims = PodClaims(p)
	if g := p.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		f.PodGroup = some(*g.PodGroupName)
	}
	if !p.CreationTimestamp.IsZero() {
		// Whole seconds, as the API serializes it (extract.rs reads the JSON).
		f.CreatedMs = p.CreationTimestamp.Unix() * 1000
	}
	if p.Spec.Priority != nil {
		f.Priority = *p.Spec.Priority
	}
	f.RuntimeLimitMs = runtimeLimitMs(p.Spec.ActiveDeadlineSeconds, p.Spec.TerminationGracePeriodSeconds)
	if t := p.Status.StartTime; !t.IsZero() && f.RuntimeLimitMs != nil {
		// Whole seconds, as for creationTimestamp. Read only with a deadline (the policy asks
		// when a pod is gone at the latest, and a pod without one never is): the kubelet's start
		// of any other pod changes no fact, so it never crosses into the policy.
		f.StartedMs = t.Unix() * 1000
	}
	return f, nil
}

// defaultGracePeriodSeconds is the termination grace period of a pod that sets none.
const defaultGracePeriodSeconds = 30

// runtimeLimitMs is how long after it started a pod is gone at the latest: its active deadline
// plus its termination grace period (30 s when unset), in milliseconds, saturating at the int64
// limits as extract.rs does; nil without a deadline.
func runtimeLimitMs(deadline, grace *int64) *int64 {
	if deadline == nil {
		return nil
	}
	g := int64(defaultGracePeriodSeconds)
	if grace != nil {
		g = *grace
	}
	s := saturatingAdd(*deadline, g)
	switch {
	case s > math.MaxInt64/1000:
		s = math.MaxInt64
	case s < math.MinInt64/1000:
		s = math.MinInt64
	default:
		s *= 1000
	}
	return &s
}

// saturatingAdd is a+b clamped to the int64 limits (Rust's i64::saturating_add).
func saturatingAdd(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// GeneratedClaim is the claim generated for the pod's claim entry name
// (status.resourceClaimStatuses; the last entry of that name wins), nil when none.
func GeneratedClaim(p *v1.Pod, entry string) *string {
	var out *string
	for i := range p.Status.ResourceClaimStatuses {
		s := &p.Status.ResourceClaimStatuses[i]
		if s.Name == entry && s.ResourceClaimName != nil {
			out = s.ResourceClaimName
		}
	}
	return out
}

// PodGPUs is the one definition of how many GPUs a pod takes through the extended resource:
// the larger of the sum over its containers and the largest init container, each container
// counting its request, else its limit. A sum past uint32 is an error naming spec.containers
// (it would otherwise wrap to a small count).
func PodGPUs(p *v1.Pod, k Keys) (uint32, error) {
	gpu := v1.ResourceName(k.GPUResourceName)
	request := func(c *v1.Container) uint32 {
		if q, ok := c.Resources.Requests[gpu]; ok {
			return deviceCount(q)
		}
		if q, ok := c.Resources.Limits[gpu]; ok {
			return deviceCount(q)
		}
		return 0
	}
	var sum, init uint32
	for i := range p.Spec.Containers {
		n := request(&p.Spec.Containers[i])
		if sum > ^uint32(0)-n {
			return 0, &Error{Object: describe("Pod", p.Namespace, p.Name), Field: "spec.containers",
				Reason: "spec.containers: the " + k.GPUResourceName + " requests of the containers sum past 4294967295"}
		}
		sum += n
	}
	for i := range p.Spec.InitContainers {
		init = max(init, request(&p.Spec.InitContainers[i]))
	}
	return max(sum, init), nil
}

// SliceOf reads a ResourceSlice: devices only for slices of the GPU driver.
func SliceOf(s *resourceapi.ResourceSlice, k Keys) (Slice, error) {
	if err := required("ResourceSlice", s.Namespace, s.Name, "metadata.name", s.Name); err != nil {
		return Slice{}, err
	}
	f := Slice{Name: s.Name, Pool: s.Spec.Pool.Name, Generation: s.Spec.Pool.Generation}
	if s.Spec.Driver != k.GPUDriver {
		return f, nil
	}
	if s.Spec.NodeName != nil {
		if err := required("ResourceSlice", s.Namespace, s.Name, "spec.pool.name", f.Pool); err != nil {
			return Slice{}, err
		}
	}
	for i := range s.Spec.Devices {
		// An attribute `type` that is not a string counts as absent, as in extract.rs.
		a, ok := s.Spec.Devices[i].Attributes[deviceTypeAttribute]
		// The API allows 128 devices a slice; saturate rather than wrap past uint32.
		if (!ok || a.StringValue == nil || *a.StringValue == deviceTypeGPU) && f.GPUs < ^uint32(0) {
			f.GPUs++
		}
	}
	f.Node = s.Spec.NodeName
	return f, nil
}

// DomainOf reads a ComputeDomain.
func DomainOf(u *unstructured.Unstructured, k Keys) (Domain, error) {
	ns, name, uid := u.GetNamespace(), u.GetName(), string(u.GetUID())
	const kind = "ComputeDomain"
	for _, r := range [][2]string{{"metadata.name", name}, {"metadata.namespace", ns}, {"metadata.uid", uid}} {
		if err := required(kind, ns, name, r[0], r[1]); err != nil {
			return Domain{}, err
		}
	}
	size, err := sizeAnnotation(kind, ns, name, k.SizeAnnotation, u.GetAnnotations())
	if err != nil {
		return Domain{}, err
	}
	f := Domain{Namespace: ns, Name: name, UID: uid, SizeHint: size}
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, numNodesPath...)
	if found && v != nil {
		n, ok := v.(int64)
		if !ok || n < 0 {
			return Domain{}, &Error{Object: describe(kind, ns, name), Field: "spec.numNodes",
				Reason: "spec.numNodes must be a non-negative integer, got " + jsonNumber(v)}
		}
		if n > 0 {
			f.NumNodes = some(uint32(min(n, int64(^uint32(0)))))
		}
	}
	return f, nil
}

// ChannelTemplateOf is the name of a ComputeDomain's workload ResourceClaimTemplate
// (spec.channel.resourceClaimTemplate.name), "" when it names none.
func ChannelTemplateOf(u *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(u.Object, channelTemplatePath...)
	return name
}

// PodGroupOf reads a PodGroup.
func PodGroupOf(u *unstructured.Unstructured) (PodGroup, error) {
	ns, name := u.GetNamespace(), u.GetName()
	const kind = "PodGroup"
	if err := required(kind, ns, name, "metadata.name", name); err != nil {
		return PodGroup{}, err
	}
	if err := required(kind, ns, name, "metadata.namespace", ns); err != nil {
		return PodGroup{}, err
	}
	f := PodGroup{Namespace: ns, Name: name}
	v, found, _ := unstructured.NestedFieldNoCopy(u.Object, minCountPath...)
	if found && v != nil {
		n, ok := v.(int64)
		if !ok || n <= 0 {
			return PodGroup{}, &Error{Object: describe(kind, ns, name), Field: "spec.schedulingPolicy.gang.minCount",
				Reason: "spec.schedulingPolicy.gang.minCount must be a positive integer, got " + jsonNumber(v)}
		}
		f.MinCount = some(uint32(min(n, int64(^uint32(0)))))
	}
	if p, found, _ := unstructured.NestedFieldNoCopy(u.Object, priorityPath...); found {
		if n, ok := p.(int64); ok {
			f.Priority = some(int32(max(min(n, 1<<31-1), -1<<31)))
		}
	}
	return f, nil
}

// ownerKeyOf is the owner key of the pod's direct controller when it is a Job, StatefulSet,
// ReplicaSet or LeaderWorkerSet: `<Kind>/<namespace>/<name>`. This is the seam where owner
// resolution to the top-level controller (a Deployment above its ReplicaSet, a JobSet above
// its Jobs) goes once the owners' informers exist.
func ownerKeyOf(p *v1.Pod) *string {
	for i := range p.OwnerReferences {
		r := &p.OwnerReferences[i]
		if r.Controller == nil || !*r.Controller {
			continue
		}
		group, ok := ownerKinds[r.Kind]
		if !ok || apiGroup(r.APIVersion) != group {
			return nil
		}
		return some(owners.Key(r.Kind, p.Namespace, r.Name))
	}
	return nil
}

func apiGroup(apiVersion string) string {
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		return apiVersion[:i]
	}
	return ""
}

// sizeAnnotation reads the size annotation: absent, or a positive integer that fits u32.
func sizeAnnotation(kind, ns, name, key string, annotations map[string]string) (*uint32, error) {
	s, ok := annotations[key]
	if !ok {
		return nil, nil
	}
	if n, ok := parseU32(strings.TrimSpace(s)); ok && n > 0 {
		return &n, nil
	}
	return nil, &Error{Object: describe(kind, ns, name), Field: "metadata.annotations[" + key + "]",
		Reason: "annotation " + key + "=" + strconv.Quote(s) + " must be a positive integer"}
}

// parseU32 parses as Rust's u32::from_str does: decimal digits with an optional leading '+'.
func parseU32(s string) (uint32, bool) {
	s = strings.TrimPrefix(s, "+")
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err == nil
}

// deviceCount reads a quantity of whole devices as extract.rs reads its serialized form: "4"
// is 4, anything that is not a plain integer ("500m", "1k") is 0.
func deviceCount(q resource.Quantity) uint32 {
	// Below 1000 every format serializes an integer as its plain digits.
	if v, ok := q.AsInt64(); ok && v >= 0 && v < 1000 {
		return uint32(v)
	}
	n, _ := parseU32(q.String())
	return n
}

// jsonNumber prints an unstructured value as JSON would, for messages.
func jsonNumber(v any) string {
	switch n := v.(type) {
	case int64:
		return strconv.FormatInt(n, 10)
	case float64:
		return strconv.FormatFloat(n, 'f', -1, 64)
	case string:
		return strconv.Quote(n)
	case bool:
		return strconv.FormatBool(n)
	default:
		return "a non-number"
	}
}
