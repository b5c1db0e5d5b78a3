package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ComputeDomainGVR is the ComputeDomain custom resource.
var ComputeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

const (
	// templateFinalizer is the finalizer the driver's controller puts on what it creates for a domain.
	templateFinalizer = "resource.nvidia.com/computeDomain"
	targetLabel       = "resource.nvidia.com/computeDomainTarget"
)

// DriverEmulator plays the NVIDIA DRA driver's controller for ComputeDomains: for each domain it
// creates the workload ResourceClaimTemplate named in spec.channel (labels and opaque
// ComputeDomainChannelConfig as upstream's template has them) and deletes it with the domain.
type DriverEmulator struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mu      sync.Mutex
	created map[string]string // domain UID -> namespace/template
}

// StartDriverEmulator runs the emulator until ctx ends.
func StartDriverEmulator(ctx context.Context, c kubernetes.Interface, dyn dynamic.Interface) (*DriverEmulator, error) {
	d := &DriverEmulator{client: c, dynamic: dyn, created: map[string]string{}}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(ComputeDomainGVR).Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { d.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { d.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			d.remove(ctx, obj)
		},
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("ComputeDomain informer did not sync")
	}
	return d, nil
}

// WorkloadTemplate is the ResourceClaimTemplate the driver creates for a ComputeDomain.
func WorkloadTemplate(namespace, name, domainUID, allocationMode string) *resourcev1.ResourceClaimTemplate {
	if allocationMode == "" {
		allocationMode = "Single"
	}
	params := fmt.Sprintf(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":%q,"allocationMode":%q}`,
		domainUID, allocationMode)
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  namespace,
			Name:       name,
			Finalizers: []string{templateFinalizer},
			Labels:     map[string]string{DomainNodeLabel: domainUID, targetLabel: "Workload"},
		},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{
					Name:    "channel",
					Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: ChannelClass},
				}},
				Config: []resourcev1.DeviceClaimConfiguration{{
					Requests: []string{"channel"},
					DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
						Driver:     ComputeDomainDriver,
						Parameters: runtime.RawExtension{Raw: []byte(params)},
					}},
				}},
			}},
		},
	}
}

func (d *DriverEmulator) sync(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	uid := string(u.GetUID())
	d.mu.Lock()
	_, done := d.created[uid]
	d.mu.Unlock()
	if done {
		return
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "channel", "resourceClaimTemplate", "name")
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "channel", "allocationMode")
	if name == "" {
		return
	}
	tmpl := WorkloadTemplate(u.GetNamespace(), name, uid, mode)
	for attempt := 0; attempt < 20; attempt++ {
		_, err := d.client.ResourceV1().ResourceClaimTemplates(u.GetNamespace()).Create(ctx, tmpl, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			d.mu.Lock()
			d.created[uid] = u.GetNamespace() + "/" + name
			d.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		klog.FromContext(ctx).Error(err, "create workload ResourceClaimTemplate", "computeDomain", u.GetName())
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *DriverEmulator) remove(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	uid := string(u.GetUID())
	d.mu.Lock()
	_, done := d.created[uid]
	delete(d.created, uid)
	d.mu.Unlock()
	if !done {
		return
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "channel", "resourceClaimTemplate", "name")
	rcts := d.client.ResourceV1().ResourceClaimTemplates(u.GetNamespace())
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := rcts.Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "remove template finalizer", "template", name)
	}
	if err := rcts.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		klog.FromContext(ctx).Error(err, "delete template", "template", name)
	}
}
