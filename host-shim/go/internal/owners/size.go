// Package owners tells how many pods a workload will run, from the object that owns its pods:
// a Job's parallelism bounded by the completions still to go, a StatefulSet's or ReplicaSet's
// replicas, a JobSet's replicated Jobs, a LeaderWorkerSet's groups. NVIDIA's guides write
// ComputeDomains with numNodes 0 and no size of their own, so this is where a domain's size comes
// from for workloads written the way users write them.
//
// File map: size.go (pure functions: owner keys and sizes, each with the field it was read
// from), resolver.go (informers and the lookups the plugin's feed makes). The CLI has a copy of
// size.go's rules (host-shim/cli/src/owners.rs, for `cdplace explain` and `status`); both run
// the vectors in host-shim/testdata/owner-sizes.json.
//
// An owner key is "<Kind>/<namespace>/<name>", the form pod facts carry across the boundary.
package owners

import (
	"fmt"
	"math"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Labels the JobSet and LeaderWorkerSet controllers put on the pods they create; they name the
// top-level owner without a lookup through the intermediate Job or StatefulSet.
const (
	JobSetNameLabel          = "jobset.sigs.k8s.io/jobset-name"
	LeaderWorkerSetNameLabel = "leaderworkerset.sigs.k8s.io/name"
)

// Kinds of owners whose size is read.
const (
	KindJob             = "Job"
	KindStatefulSet     = "StatefulSet"
	KindReplicaSet      = "ReplicaSet"
	KindJobSet          = "JobSet"
	KindLeaderWorkerSet = "LeaderWorkerSet"
)

// Fact is an owner's size and where it was read, as the policy shows it in its reasons.
type Fact struct {
	Key    string
	Size   uint32
	Source string
}

// Key is the owner key of an object.
func Key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// SplitKey parses a key made by Key.
func SplitKey(key string) (kind, namespace, name string, ok bool) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// KeyOf is the key of the top-level owner of a pod whose size counts, or "" for a bare pod or a
// controller this package does not read. The JobSet and LeaderWorkerSet labels win over the
// pod's direct controller (their Jobs and StatefulSets are parts of one workload) when served
// reports that kind's API is served; otherwise the direct controller counts.
func KeyOf(pod *v1.Pod, served func(kind string) bool) string {
	if name := pod.Labels[JobSetNameLabel]; name != "" && served(KindJobSet) {
		return Key(KindJobSet, pod.Namespace, name)
	}
	if name := pod.Labels[LeaderWorkerSetNameLabel]; name != "" && served(KindLeaderWorkerSet) {
		return Key(KindLeaderWorkerSet, pod.Namespace, name)
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		group := ref.APIVersion
		if i := strings.Index(group, "/"); i >= 0 {
			group = group[:i]
		} else {
			group = ""
		}
		switch {
		case ref.Name == "":
			return ""
		case ref.Kind == KindJob && group == "batch",
			ref.Kind == KindStatefulSet && group == "apps",
			ref.Kind == KindReplicaSet && group == "apps":
			return Key(ref.Kind, pod.Namespace, ref.Name)
		}
		return ""
	}
	return ""
}

func int32Or(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func clamp(n int64) uint32 {
	switch {
	case n < 0:
		return 0
	case n > int64(^uint32(0)):
		return ^uint32(0)
	}
	return uint32(n)
}

// JobSize is the number of pods a Job runs at once: spec.parallelism (default 1), bounded by the
// completions still to go (spec.completions - status.succeeded) when completions is set.
func JobSize(j *batchv1.Job) Fact {
	par := int64(int32Or(j.Spec.Parallelism, 1))
	f := Fact{Key: Key(KindJob, j.Namespace, j.Name), Size: clamp(par),
		Source: fmt.Sprintf("Job %s/%s spec.parallelism", j.Namespace, j.Name)}
	if j.Spec.Completions != nil {
		left := int64(*j.Spec.Completions) - int64(j.Status.Succeeded)
		if left < par {
			f.Size = clamp(left)
			f.Source = fmt.Sprintf("Job %s/%s spec.completions - status.succeeded", j.Namespace, j.Name)
		}
	}
	return f
}

// StatefulSetSize is spec.replicas (default 1).
func StatefulSetSize(s *appsv1.StatefulSet) Fact {
	return Fact{Key: Key(KindStatefulSet, s.Namespace, s.Name), Size: clamp(int64(int32Or(s.Spec.Replicas, 1))),
		Source: fmt.Sprintf("StatefulSet %s/%s spec.replicas", s.Namespace, s.Name)}
}

// ReplicaSetSize is spec.replicas (default 1); a Deployment's pods count through their ReplicaSet.
func ReplicaSetSize(r *appsv1.ReplicaSet) Fact {
	return Fact{Key: Key(KindReplicaSet, r.Namespace, r.Name), Size: clamp(int64(int32Or(r.Spec.Replicas, 1))),
		Source: fmt.Sprintf("ReplicaSet %s/%s spec.replicas", r.Namespace, r.Name)}
}

func nestedInt(obj map[string]any, def int64, fields ...string) (int64, error) {
	v, found, err := unstructured.NestedFieldNoCopy(obj, fields...)
	if err != nil || !found || v == nil {
		return def, err
	}
	switch n := v.(type) {
	case int64:
		return n, nil
	case float64:
		// JSON decodes a whole number into int64; a float64 here has a fraction (or is out of
		// int64's range), and a count cannot.
		if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return def, fmt.Errorf("%s is %v, not an integer", strings.Join(fields, "."), n)
		}
		return int64(n), nil
	case int32:
		return int64(n), nil
	case int:
		return int64(n), nil
	}
	return def, fmt.Errorf("%s is %T, not an integer", strings.Join(fields, "."), v)
}

// JobSetSize sums, over spec.replicatedJobs[] whose pod template claims devices (a
// resourceClaims entry: a leader that takes no channel is no member of the domain), replicas
// (default 1) times the Job template's parallelism (default 1).
func JobSetSize(u *unstructured.Unstructured) (Fact, error) {
	f := Fact{Key: Key(KindJobSet, u.GetNamespace(), u.GetName())}
	jobs, _, err := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
	if err != nil {
		return f, fmt.Errorf("JobSet %s/%s spec.replicatedJobs: %w", u.GetNamespace(), u.GetName(), err)
	}
	var total int64
	var counted []string
	for i, rj := range jobs {
		m, ok := rj.(map[string]any)
		if !ok {
			return f, fmt.Errorf("JobSet %s/%s spec.replicatedJobs[%d] is not an object", u.GetNamespace(), u.GetName(), i)
		}
		claims, _, _ := unstructured.NestedSlice(m, "template", "spec", "template", "spec", "resourceClaims")
		if len(claims) == 0 {
			continue
		}
		replicas, err := nestedInt(m, 1, "replicas")
		if err != nil {
			return f, fmt.Errorf("JobSet %s/%s spec.replicatedJobs[%d]: %w", u.GetNamespace(), u.GetName(), i, err)
		}
		par, err := nestedInt(m, 1, "template", "spec", "parallelism")
		if err != nil {
			return f, fmt.Errorf("JobSet %s/%s spec.replicatedJobs[%d]: %w", u.GetNamespace(), u.GetName(), i, err)
		}
		total += replicas * par
		name, _, _ := unstructured.NestedString(m, "name")
		counted = append(counted, fmt.Sprintf("%s %d×%d", name, replicas, par))
	}
	f.Size = clamp(total)
	f.Source = fmt.Sprintf("JobSet %s/%s spec.replicatedJobs (%s)", u.GetNamespace(), u.GetName(), strings.Join(counted, " + "))
	return f, nil
}

// LeaderWorkerSetSize is spec.replicas (default 1) times spec.leaderWorkerTemplate.size
// (default 1): every group's pods claim from the same template, so they share one domain.
func LeaderWorkerSetSize(u *unstructured.Unstructured) (Fact, error) {
	f := Fact{Key: Key(KindLeaderWorkerSet, u.GetNamespace(), u.GetName())}
	replicas, err := nestedInt(u.Object, 1, "spec", "replicas")
	if err != nil {
		return f, fmt.Errorf("LeaderWorkerSet %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	size, err := nestedInt(u.Object, 1, "spec", "leaderWorkerTemplate", "size")
	if err != nil {
		return f, fmt.Errorf("LeaderWorkerSet %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	f.Size = clamp(replicas * size)
	f.Source = fmt.Sprintf("LeaderWorkerSet %s/%s spec.replicas × spec.leaderWorkerTemplate.size", u.GetNamespace(), u.GetName())
	return f, nil
}
