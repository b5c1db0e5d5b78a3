package owners

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func job(par, completions *int32, succeeded int32) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "training", Name: "trainer"},
		Spec:       batchv1.JobSpec{Parallelism: par, Completions: completions},
		Status:     batchv1.JobStatus{Succeeded: succeeded},
	}
}

func TestJobSize(t *testing.T) {
	for _, tc := range []struct {
		name       string
		job        *batchv1.Job
		size       uint32
		fromSource string
	}{
		{"parallelism", job(ptr.To[int32](12), nil, 0), 12, "Job training/trainer spec.parallelism"},
		{"default parallelism is 1", job(nil, nil, 0), 1, "Job training/trainer spec.parallelism"},
		{"completions above parallelism", job(ptr.To[int32](12), ptr.To[int32](24), 0), 12, "Job training/trainer spec.parallelism"},
		{"indexed job with completions below parallelism", job(ptr.To[int32](8), ptr.To[int32](6), 0), 6, "Job training/trainer spec.completions - status.succeeded"},
		{"completions partly done", job(ptr.To[int32](8), ptr.To[int32](10), 5), 5, "Job training/trainer spec.completions - status.succeeded"},
		{"all done", job(ptr.To[int32](8), ptr.To[int32](8), 8), 0, "Job training/trainer spec.completions - status.succeeded"},
		{"scaled to zero", job(ptr.To[int32](0), nil, 0), 0, "Job training/trainer spec.parallelism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := JobSize(tc.job)
			if f.Size != tc.size || f.Source != tc.fromSource || f.Key != "Job/training/trainer" {
				t.Fatalf("JobSize = %+v, want size %d from %q", f, tc.size, tc.fromSource)
			}
		})
	}
}

func TestSetSizes(t *testing.T) {
	s := StatefulSetSize(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "s"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](16)}})
	if s.Size != 16 || s.Source != "StatefulSet n/s spec.replicas" {
		t.Fatalf("StatefulSetSize = %+v", s)
	}
	r := ReplicaSetSize(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "r"}})
	if r.Size != 1 || r.Key != "ReplicaSet/n/r" {
		t.Fatalf("ReplicaSetSize = %+v", r)
	}
}

func jobSet(name string) *unstructured.Unstructured {
	withClaim := map[string]any{"template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"resourceClaims": []any{map[string]any{"name": "channel", "resourceClaimTemplateName": "cd-channel"}},
	}}}}}
	workers := map[string]any{"name": "workers", "replicas": int64(2), "template": map[string]any{"spec": map[string]any{
		"parallelism": int64(4),
		"template":    withClaim["template"].(map[string]any)["spec"].(map[string]any)["template"],
	}}}
	leader := map[string]any{"name": "leader", "template": map[string]any{"spec": map[string]any{
		"template": withClaim["template"].(map[string]any)["spec"].(map[string]any)["template"],
	}}}
	driver := map[string]any{"name": "driver", "replicas": int64(1), "template": map[string]any{"spec": map[string]any{
		"template": map[string]any{"spec": map[string]any{}},
	}}}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"namespace": "training", "name": name},
		"spec":     map[string]any{"replicatedJobs": []any{leader, workers, driver}},
	}}
}

func TestJobSetSizeCountsReplicatedJobsThatClaimDevices(t *testing.T) {
	f, err := JobSetSize(jobSet("pair"))
	if err != nil {
		t.Fatal(err)
	}
	// leader 1×1 + workers 2×4; the driver claims nothing and is no member of the domain.
	if f.Size != 9 || f.Source != "JobSet training/pair spec.replicatedJobs (leader 1×1 + workers 2×4)" {
		t.Fatalf("JobSetSize = %+v", f)
	}
	bad := jobSet("bad")
	bad.Object["spec"].(map[string]any)["replicatedJobs"].([]any)[1].(map[string]any)["replicas"] = "two"
	if _, err := JobSetSize(bad); err == nil {
		t.Fatal("a non-integer replicas was accepted")
	}
}

func TestLeaderWorkerSetSize(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "n", "name": "lws"},
		"spec":     map[string]any{"replicas": int64(2), "leaderWorkerTemplate": map[string]any{"size": int64(4)}},
	}}
	f, err := LeaderWorkerSetSize(u)
	if err != nil || f.Size != 8 {
		t.Fatalf("LeaderWorkerSetSize = %+v, %v", f, err)
	}
}

func podOwnedBy(kind, apiVersion, name string, labels map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "training", Name: "p", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr.To(true)}},
	}}
}

func TestKeyOf(t *testing.T) {
	all := func(string) bool { return true }
	builtinOnly := func(k string) bool { return k != KindJobSet && k != KindLeaderWorkerSet }
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		served func(string) bool
		want   string
	}{
		{"job", podOwnedBy("Job", "batch/v1", "trainer", nil), all, "Job/training/trainer"},
		{"statefulset", podOwnedBy("StatefulSet", "apps/v1", "s", nil), all, "StatefulSet/training/s"},
		{"replicaset", podOwnedBy("ReplicaSet", "apps/v1", "r-5d8f", nil), all, "ReplicaSet/training/r-5d8f"},
		{"jobset label wins over the job", podOwnedBy("Job", "batch/v1", "pair-workers-0", map[string]string{JobSetNameLabel: "pair"}), all, "JobSet/training/pair"},
		{"jobset not served: the job counts", podOwnedBy("Job", "batch/v1", "pair-workers-0", map[string]string{JobSetNameLabel: "pair"}), builtinOnly, "Job/training/pair-workers-0"},
		{"lws label", podOwnedBy("StatefulSet", "apps/v1", "lws-0", map[string]string{LeaderWorkerSetNameLabel: "lws"}), all, "LeaderWorkerSet/training/lws"},
		{"a Job kind of another group is not read", podOwnedBy("Job", "example.com/v1", "x", nil), all, ""},
		{"unknown controller", podOwnedBy("Foo", "example.com/v1", "x", nil), all, ""},
		{"bare pod", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "training", Name: "p"}}, all, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyOf(tc.pod, tc.served); got != tc.want {
				t.Fatalf("KeyOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestResolverReadsInformersAndHearsChanges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	j := job(ptr.To[int32](12), nil, 0)
	client := fake.NewClientset(j)
	factory := informers.NewSharedInformerFactory(client, 0)

	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{JobSetGVR: "JobSetList", LeaderWorkerSetGVR: "LeaderWorkerSetList"}, jobSet("pair"))
	disc := &fakediscovery.FakeDiscovery{Fake: &client.Fake}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: JobSetGVR.GroupVersion().String(), APIResources: []metav1.APIResource{{Name: "jobsets", Kind: "JobSet", Namespaced: true}}}}

	changed := make(chan string, 16)
	r, err := New(ctx, factory, dyn, disc, func(k string) { changed <- k })
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	deadline := time.Now().Add(10 * time.Second)
	jobSetKnown := func() bool { _, err := r.Fact("JobSet/training/pair"); return err == nil }
	for !(r.HasSynced() && r.Served(KindJobSet) && jobSetKnown()) {
		if time.Now().After(deadline) {
			t.Fatal("informers did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if f, err := r.Fact("Job/training/trainer"); err != nil || f.Size != 12 {
		t.Fatalf("Fact(Job) = %+v, %v", f, err)
	}
	if f, err := r.Fact("JobSet/training/pair"); err != nil || f.Size != 9 {
		t.Fatalf("Fact(JobSet) = %+v, %v", f, err)
	}
	if r.Served(KindLeaderWorkerSet) {
		t.Fatal("LeaderWorkerSet is not served by discovery, yet reported served")
	}
	if _, err := r.Fact("Job/training/absent"); !errors.Is(err, ErrUnknownOwner) {
		t.Fatalf("Fact(absent) error = %v, want ErrUnknownOwner", err)
	}
	if _, err := r.Fact("LeaderWorkerSet/training/x"); !errors.Is(err, ErrUnknownOwner) {
		t.Fatalf("Fact(LWS not served) error = %v, want ErrUnknownOwner", err)
	}
	// A scale-down reaches the listener with the owner's key.
	j2 := j.DeepCopy()
	j2.Spec.Parallelism = ptr.To[int32](8)
	if _, err := client.BatchV1().Jobs("training").Update(ctx, j2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case k := <-changed:
			if k != "Job/training/trainer" {
				continue
			}
			f, _ := r.Fact(k)
			if f.Size == 8 {
				return
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the Job update did not reach the listener")
		}
	}
}
