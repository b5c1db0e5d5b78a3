package nvdriver

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The emulator creates the driver's workload template for a domain and removes it, finalizer
// first, when the domain goes.
func TestTheEmulatorCreatesAndRemovesTheWorkloadTemplate(t *testing.T) {
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
	emu := Start(ctx, client, dyn)
	defer emu.Stop()
	if err := emu.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the workload template", func() bool { return emu.Templates() == 1 })
	tmpl, err := client.ResourceV1().ResourceClaimTemplates("cd").Get(ctx, "cd-0-3-channel", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.Labels[DomainLabel] != "uid-1" || tmpl.Labels[TargetLabel] != "Workload" {
		t.Errorf("labels %v", tmpl.Labels)
	}
	if len(tmpl.Finalizers) != 1 || tmpl.Finalizers[0] != Finalizer {
		t.Errorf("finalizers %v", tmpl.Finalizers)
	}
	req := tmpl.Spec.Spec.Devices.Requests
	if len(req) != 1 || req[0].Exactly == nil || req[0].Exactly.DeviceClassName != ChannelClass {
		t.Errorf("requests %+v", req)
	}
	params := string(tmpl.Spec.Spec.Devices.Config[0].Opaque.Parameters.Raw)
	if want := `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"uid-1","allocationMode":"Single"}`; params != want {
		t.Errorf("opaque config %s, want %s", params, want)
	}

	if err := dyn.Resource(ComputeDomainGVR).Namespace("cd").Delete(ctx, "cd-0-3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the template's removal", func() bool {
		_, err := client.ResourceV1().ResourceClaimTemplates("cd").Get(ctx, "cd-0-3-channel", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if n := emu.Templates(); n != 0 {
		t.Errorf("emulator still holds %d template(s)", n)
	}
}

// WaitForSync fails, naming the informer, when the CRD is never served.
func TestWaitForSyncFailsWithoutTheCRD(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ComputeDomainGVR: "ComputeDomainList"})
	dyn.PrependReactor("list", "computedomains", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(ComputeDomainGVR.GroupResource(), "")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	emu := Start(context.Background(), fake.NewClientset(), dyn)
	defer emu.Stop()
	err := emu.WaitForSync(ctx)
	if err == nil || err.Error() != "driver emulator: ComputeDomain informer did not sync: context deadline exceeded" {
		t.Errorf("got %v", err)
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
