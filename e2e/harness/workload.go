package harness

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Profile selects the scheduler a workload goes through.
type Profile string

const (
	// Cdplace is the computedomain-scheduler profile from kube-scheduler-config/.
	Cdplace Profile = "computedomain-scheduler"
	// Baseline is the default scheduler with the upstream pattern: required node affinity on the
	// clique label and required pod affinity to the domain's other pods on the clique.
	Baseline Profile = "default-scheduler"

	// DomainLabel marks a workload pod with its ComputeDomain's name.
	DomainLabel = "cdplace.e2e/domain"
	// SizeAnnotation is cdplace's size hint on a ComputeDomain.
	SizeAnnotation = "cdplace.nvidia.com/size"
)

// ComputeDomain builds a ComputeDomain named name whose channel template is name-channel, with
// the size annotation when size > 0.
func ComputeDomain(namespace, name string, size int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resource.nvidia.com/v1beta1",
		"kind":       "ComputeDomain",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"numNodes": int64(0),
			"channel":  map[string]any{"resourceClaimTemplate": map[string]any{"name": name + "-channel"}},
		},
	}}
	if size > 0 {
		u.SetAnnotations(map[string]string{SizeAnnotation: fmt.Sprint(size)})
	}
	return u
}

// CreateComputeDomain creates the domain; the driver emulator then creates its template.
func CreateComputeDomain(ctx context.Context, dyn dynamic.Interface, namespace, name string, size int) (*unstructured.Unstructured, error) {
	return dyn.Resource(ComputeDomainGVR).Namespace(namespace).Create(ctx, ComputeDomain(namespace, name, size), metav1.CreateOptions{})
}

// DomainPod is pod index i of domain cd, asking gpus GPUs and a channel claim from the domain's
// template.
func DomainPod(namespace, cd string, i, gpus int, profile Profile) *corev1.Pod {
	pod := GPUPod(namespace, fmt.Sprintf("%s-%d", cd, i), gpus, profile)
	pod.Labels[DomainLabel] = cd
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "imex-channel"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{
		Name: "imex-channel", ResourceClaimTemplateName: ptr.To(cd + "-channel"),
	}}
	cliqueExists := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: CliqueLabel, Operator: corev1.NodeSelectorOpExists,
		}}}},
	}}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: cliqueExists}
	if profile == Baseline {
		pod.Spec.Affinity.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{DomainLabel: cd}},
			TopologyKey:   CliqueLabel,
		}}}
	}
	return pod
}

// GPUClaimTemplate asks for gpus GPUs of the NVIDIA DRA driver's GPU device class (as the
// driver's guide writes a plain GPU workload's claim).
func GPUClaimTemplate(namespace, name string, gpus int) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpus", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: GPUClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(gpus),
			}}},
		}}},
	}
}

// DRAGPUPod is a plain pod whose GPUs come from a claim generated from template (no extended
// resource).
func DRAGPUPod(namespace, name, template string, profile Profile) *corev1.Pod {
	pod := GPUPod(namespace, name, 0, profile)
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
	return pod
}

// GPUPod is a plain pod asking gpus GPUs through the extended resource (none when gpus is 0).
func GPUPod(namespace, name string, gpus int, profile Profile) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
	}}
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		res.Requests[GPUResource] = q
		res.Limits = corev1.ResourceList{GPUResource: q}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app": "e2e"}},
		Spec: corev1.PodSpec{
			SchedulerName:                 string(profile),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "app", Image: "ubuntu:22.04", Command: []string{"sleep", "infinity"}, Resources: res,
			}},
		},
	}
}

// CreateDomainPods creates pods [from, to) of domain cd.
func CreateDomainPods(ctx context.Context, c kubernetes.Interface, namespace, cd string, from, to, gpus int, profile Profile) error {
	for i := from; i < to; i++ {
		if _, err := c.CoreV1().Pods(namespace).Create(ctx, DomainPod(namespace, cd, i, gpus, profile), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %d of %s: %w", i, cd, err)
		}
	}
	return nil
}

// DomainState is what the API says about one ComputeDomain's pods.
type DomainState struct {
	Name    string
	Pods    int
	Bound   int
	Running int
	Nodes   []string
	// Cliques holds the distinct cliques of the bound pods (more than one is a split).
	Cliques []string
	// Reasons are the distinct PodScheduled=False messages of the pending pods.
	Reasons []string
}

// Split is true when the domain's bound pods span more than one clique.
func (d DomainState) Split() bool { return len(d.Cliques) > 1 }

// Partial is true when some but not all pods are bound.
func (d DomainState) Partial() bool { return d.Bound > 0 && d.Bound < d.Pods }

func (d DomainState) String() string {
	return fmt.Sprintf("%s: %d/%d bound (%d running) cliques=%v reasons=%q", d.Name, d.Bound, d.Pods, d.Running, d.Cliques, d.Reasons)
}

// Domains summarises every domain's pods in namespace, keyed by domain name.
func Domains(ctx context.Context, c kubernetes.Interface, namespace string, cliqueOf map[string]string) (map[string]*DomainState, error) {
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: DomainLabel})
	if err != nil {
		return nil, err
	}
	out := map[string]*DomainState{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		cd := p.Labels[DomainLabel]
		d := out[cd]
		if d == nil {
			d = &DomainState{Name: cd}
			out[cd] = d
		}
		d.Pods++
		if p.Spec.NodeName == "" {
			if r := PendingReason(p); r != "" && !contains(d.Reasons, r) {
				d.Reasons = append(d.Reasons, r)
			}
			continue
		}
		d.Bound++
		if p.Status.Phase == corev1.PodRunning {
			d.Running++
		}
		d.Nodes = append(d.Nodes, p.Spec.NodeName)
		if cl := cliqueOf[p.Spec.NodeName]; !contains(d.Cliques, cl) {
			d.Cliques = append(d.Cliques, cl)
		}
	}
	for _, d := range out {
		sort.Strings(d.Nodes)
		sort.Strings(d.Cliques)
		sort.Strings(d.Reasons)
	}
	return out, nil
}

// PendingReason is the scheduler's message on an unscheduled pod, or "".
func PendingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Message
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// StrandedGPUs counts GPUs left unused on nodes that hold a ComputeDomain pod: no other
// ComputeDomain pod may use them (the channel is taken), so only plain pods could.
func StrandedGPUs(ctx context.Context, c kubernetes.Interface, gpusPerTray int) (int, error) {
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	used := map[string]int64{}
	cdNode := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if q, ok := ctr.Resources.Requests[GPUResource]; ok {
				used[p.Spec.NodeName] += q.Value()
			}
		}
		if p.Labels[DomainLabel] != "" {
			cdNode[p.Spec.NodeName] = true
		}
	}
	stranded := 0
	for n := range cdNode {
		stranded += gpusPerTray - int(used[n])
	}
	return stranded, nil
}

// DeleteDomainPods deletes a domain's pods the way a user does (default grace period), so the
// emulated kubelet unprepares and finishes the deletion.
func DeleteDomainPods(ctx context.Context, c kubernetes.Interface, namespace, cd string) error {
	return c.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: DomainLabel + "=" + cd})
}

// Summary renders domains sorted by name, one per line.
func Summary(domains map[string]*DomainState) string {
	names := make([]string, 0, len(domains))
	for n := range domains {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString("  " + domains[n].String() + "\n")
	}
	return b.String()
}
