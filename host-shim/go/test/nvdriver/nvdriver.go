// Package nvdriver emulates what kube-scheduler sees of NVIDIA's DRA driver's ComputeDomain
// controller (kubernetes-sigs/dra-driver-nvidia-gpu) when there is no hardware: for every
// ComputeDomain it creates the workload ResourceClaimTemplate named in spec.channel (labels,
// finalizer and opaque ComputeDomainChannelConfig as the driver writes them), and removes it
// with the domain. The template names the domain's UID, so it cannot be written ahead in a
// manifest or a scheduler_perf template. The e2e suite and the scheduler_perf benchmark both
// use it; production code never links it.
package nvdriver

import (
	"context"
	"errors"
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

// ComputeDomainGVR is NVIDIA's ComputeDomain resource.
var ComputeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// Names the driver uses.
const (
	// DomainLabel names a ComputeDomain's UID: on the workload template the controller creates,
	// and on the nodes where the domain's IMEX daemon runs (the label that lingers).
	DomainLabel = "resource.nvidia.com/computeDomain"
	// TargetLabel tells the workload template ("Workload") from the daemon's ("Daemon").
	TargetLabel = "resource.nvidia.com/computeDomainTarget"
	// Finalizer is the one the controller puts on what it creates for a domain.
	Finalizer = "resource.nvidia.com/computeDomain"
	// ChannelClass is the DeviceClass of an IMEX channel.
	ChannelClass = "compute-domain-default-channel.nvidia.com"
	// Driver is the compute-domain kubelet plugin's driver name.
	Driver = "compute-domain.nvidia.com"
)

// WorkloadTemplate is the ResourceClaimTemplate the controller creates for a ComputeDomain:
// labelled with the domain's UID, one `channel` request of the default channel class, and the
// opaque ComputeDomainChannelConfig naming the domain.
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
			Finalizers: []string{Finalizer},
			Labels:     map[string]string{DomainLabel: domainUID, TargetLabel: "Workload"},
		},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{
				Name:    "channel",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: ChannelClass},
			}},
			Config: []resourcev1.DeviceClaimConfiguration{{
				Requests: []string{"channel"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver:     Driver,
					Parameters: runtime.RawExtension{Raw: []byte(params)},
				}},
			}},
		}}},
	}
}

// Emulator plays the controller until Stop or the end of the context it was started with.
type Emulator struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	logger  klog.Logger
	cancel  context.CancelFunc
	done    chan struct{}
	synced  chan struct{}

	mu      sync.Mutex
	created map[string]string // domain UID -> name of its template
}

// Start starts the emulator. The ComputeDomain CRD may be created after it (scheduler_perf's
// workloads create it in their first ops): it waits for the resource to be served.
func Start(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) *Emulator {
	ctx, cancel := context.WithCancel(ctx)
	d := &Emulator{
		client: client, dynamic: dyn, logger: klog.FromContext(ctx).WithName("driver-emulator"),
		cancel: cancel, done: make(chan struct{}), synced: make(chan struct{}), created: map[string]string{},
	}
	go d.run(ctx)
	return d
}

// WaitForSync returns once the emulator has seen every ComputeDomain that existed when it
// started, or an error when ctx ends or the emulator stops first.
func (d *Emulator) WaitForSync(ctx context.Context) error {
	select {
	case <-d.synced:
		return nil
	case <-d.done:
		return errors.New("driver emulator stopped before its ComputeDomain informer synced")
	case <-ctx.Done():
		return fmt.Errorf("driver emulator: ComputeDomain informer did not sync: %w", context.Cause(ctx))
	}
}

// Stop ends the emulator and waits for its goroutines.
func (d *Emulator) Stop() {
	d.cancel()
	<-d.done
}

// Templates is the number of workload templates the emulator holds for live domains.
func (d *Emulator) Templates() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.created)
}

func (d *Emulator) run(ctx context.Context) {
	defer close(d.done)
	// Until the CRD is served a list fails; an informer would back off for up to 30 s instead.
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		_, err := d.dynamic.Resource(ComputeDomainGVR).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(d.dynamic, 0)
	defer factory.Shutdown()
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
		d.logger.Error(err, "watch ComputeDomains")
		return
	}
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(d.synced)
	}
	<-ctx.Done()
}

func (d *Emulator) sync(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	uid := string(u.GetUID())
	d.mu.Lock()
	_, done := d.created[uid]
	d.mu.Unlock()
	name, _, _ := unstructured.NestedString(u.Object, "spec", "channel", "resourceClaimTemplate", "name")
	if done || name == "" {
		return
	}
	mode, _, _ := unstructured.NestedString(u.Object, "spec", "channel", "allocationMode")
	tmpl := WorkloadTemplate(u.GetNamespace(), name, uid, mode)
	for attempt := 0; ; attempt++ {
		_, err := d.client.ResourceV1().ResourceClaimTemplates(u.GetNamespace()).Create(ctx, tmpl, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			d.mu.Lock()
			d.created[uid] = name
			d.mu.Unlock()
			return
		}
		if ctx.Err() != nil || attempt == 20 {
			d.logger.Error(err, "create the workload ResourceClaimTemplate", "computeDomain", klog.KObj(u))
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// remove deletes a deleted domain's template, lifting the finalizer first as the controller does.
func (d *Emulator) remove(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	uid := string(u.GetUID())
	d.mu.Lock()
	name, done := d.created[uid]
	delete(d.created, uid)
	d.mu.Unlock()
	if !done {
		return
	}
	rcts := d.client.ResourceV1().ResourceClaimTemplates(u.GetNamespace())
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := rcts.Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		d.logger.Error(err, "remove the template's finalizer", "template", klog.KRef(u.GetNamespace(), name))
	}
	if err := rcts.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		d.logger.Error(err, "delete the template", "template", klog.KRef(u.GetNamespace(), name))
	}
}
