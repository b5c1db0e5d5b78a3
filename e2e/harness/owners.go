package harness

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Workloads as users write them: a Job, a StatefulSet or a JobSet whose pod template claims the
// domain's channel, with no cdplace annotation anywhere. The domain's size is what the owner says.

// JobSetGVR is the JobSet custom resource (sigs.k8s.io/jobset).
var JobSetGVR = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// Labels the JobSet controller puts on the Jobs it creates and on their pod templates.
const (
	JobSetNameLabel        = "jobset.sigs.k8s.io/jobset-name"
	ReplicatedJobNameLabel = "jobset.sigs.k8s.io/replicatedjob-name"
	ReplicatedJobReplicas  = "jobset.sigs.k8s.io/replicatedjob-replicas"
	JobIndexLabel          = "jobset.sigs.k8s.io/job-index"
)

// DomainPodTemplate is the pod template of domain cd's workload: the pod DomainPod builds, as a
// template (restartPolicy is left to the caller).
func DomainPodTemplate(namespace, cd string, gpus int, profile Profile) corev1.PodTemplateSpec {
	pod := DomainPod(namespace, cd, 0, gpus, profile)
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}
}

// JobSpec shapes a domain's Job.
type JobSpec struct {
	Parallelism, Completions int
	// NonIndexed uses completionMode NonIndexed (the default is Indexed, as training jobs use).
	NonIndexed bool
	GPUs       int
}

// DomainJob is a Job named name whose pods join domain cd.
func DomainJob(namespace, name, cd string, spec JobSpec, profile Profile) *batchv1.Job {
	tmpl := DomainPodTemplate(namespace, cd, spec.GPUs, profile)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	mode := batchv1.IndexedCompletion
	if spec.NonIndexed {
		mode = batchv1.NonIndexedCompletion
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.JobSpec{
			Parallelism:    ptr.To(int32(spec.Parallelism)),
			Completions:    ptr.To(int32(spec.Completions)),
			CompletionMode: &mode,
			BackoffLimit:   ptr.To[int32](6),
			Template:       tmpl,
		},
	}
}

// DomainStatefulSet is a StatefulSet of replicas pods, created in parallel, joining domain cd.
func DomainStatefulSet(namespace, cd string, replicas, gpus int, profile Profile) *appsv1.StatefulSet {
	tmpl := DomainPodTemplate(namespace, cd, gpus, profile)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cd},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(int32(replicas)),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{DomainLabel: cd}},
			Template:            tmpl,
		},
	}
}

// ReplicatedJob is one entry of a JobSet's spec.replicatedJobs.
type ReplicatedJob struct {
	Name                  string
	Replicas, Parallelism int
}

// DomainJobSet is a JobSet whose replicated Jobs' pods all join domain cd.
func DomainJobSet(namespace, name, cd string, jobs []ReplicatedJob, gpus int, profile Profile) *unstructured.Unstructured {
	var rjs []any
	for _, rj := range jobs {
		job := DomainJob(namespace, rj.Name, cd, JobSpec{Parallelism: rj.Parallelism, Completions: rj.Parallelism, GPUs: gpus}, profile)
		spec, err := toUnstructured(&job.Spec)
		if err != nil {
			panic(err) // a typed JobSpec always converts
		}
		rjs = append(rjs, map[string]any{
			"name": rj.Name, "replicas": int64(rj.Replicas),
			"template": map[string]any{"spec": spec},
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2",
		"kind":       "JobSet",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"replicatedJobs": rjs},
	}}
}

// CreateJobSetJobs creates the Jobs of a created JobSet as the JobSet controller does: one per
// replica of each replicated Job, named <jobset>-<replicatedJob>-<index>, labelled, and owned by
// the JobSet (controller reference).
func CreateJobSetJobs(ctx context.Context, c kubernetes.Interface, js *unstructured.Unstructured) ([]*batchv1.Job, error) {
	rjs, _, err := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	if err != nil {
		return nil, err
	}
	owner := metav1.OwnerReference{
		APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: js.GetName(), UID: js.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	var out []*batchv1.Job
	for _, raw := range rjs {
		rj, _ := raw.(map[string]any)
		rjName, _, _ := unstructured.NestedString(rj, "name")
		replicas, _, _ := unstructured.NestedInt64(rj, "replicas")
		specMap, _, _ := unstructured.NestedMap(rj, "template", "spec")
		for i := int64(0); i < replicas; i++ {
			job := &batchv1.Job{}
			if err := fromUnstructured(specMap, &job.Spec); err != nil {
				return out, fmt.Errorf("replicatedJob %s: %w", rjName, err)
			}
			labels := map[string]string{
				JobSetNameLabel: js.GetName(), ReplicatedJobNameLabel: rjName,
				ReplicatedJobReplicas: fmt.Sprint(replicas), JobIndexLabel: fmt.Sprint(i),
			}
			job.ObjectMeta = metav1.ObjectMeta{
				Namespace: js.GetNamespace(), Name: fmt.Sprintf("%s-%s-%d", js.GetName(), rjName, i),
				Labels: labels, Annotations: labels, OwnerReferences: []metav1.OwnerReference{owner},
			}
			for k, v := range labels {
				job.Spec.Template.Labels[k] = v
			}
			created, err := c.BatchV1().Jobs(js.GetNamespace()).Create(ctx, job, metav1.CreateOptions{})
			if err != nil {
				return out, fmt.Errorf("create Job %s: %w", job.Name, err)
			}
			out = append(out, created)
		}
	}
	return out, nil
}

// GangPodGroup is a PodGroup with the gang policy: the scheduler places minCount pods together or
// none (Workload API, GenericWorkload).
func GangPodGroup(namespace, name string, minCount int) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(minCount)},
		}},
	}
}

// PodGroupPod is pod i of domain cd in PodGroup podGroup (spec.schedulingGroup.podGroupName).
func PodGroupPod(namespace, cd, podGroup string, i, gpus int, profile Profile) *corev1.Pod {
	pod := DomainPod(namespace, cd, i, gpus, profile)
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(podGroup)}
	return pod
}

// ComputeDomainNumNodes is a ComputeDomain with the deprecated spec.numNodes set, as older
// manifests have it, and no cdplace annotation.
func ComputeDomainNumNodes(namespace, name string, numNodes int) *unstructured.Unstructured {
	u := ComputeDomain(namespace, name, 0)
	_ = unstructured.SetNestedField(u.Object, int64(numNodes), "spec", "numNodes")
	return u
}

// DeleteWorkloads deletes every Job, StatefulSet and (when the CRD is there) JobSet in namespace
// the way `kubectl delete` does (background propagation: the garbage collector removes the pods).
func DeleteWorkloads(ctx context.Context, c kubernetes.Interface, dyn dynamic.Interface, namespace string) error {
	bg := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := c.BatchV1().Jobs(namespace).DeleteCollection(ctx, bg, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete Jobs: %w", err)
	}
	if err := c.AppsV1().StatefulSets(namespace).DeleteCollection(ctx, bg, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("delete StatefulSets: %w", err)
	}
	err := dyn.Resource(JobSetGVR).Namespace(namespace).DeleteCollection(ctx, bg, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete JobSets: %w", err)
	}
	return nil
}

// DeleteJob deletes a Job as `kubectl delete job` does, and its pods at once.
func DeleteJob(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	bg := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
	if err := c.BatchV1().Jobs(namespace).Delete(ctx, name, bg); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s/%s: %w", namespace, name, err)
	}
	return c.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
}

func toUnstructured(obj any) (map[string]any, error) {
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func fromUnstructured(m map[string]any, obj any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
}
