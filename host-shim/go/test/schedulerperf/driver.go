package schedulerperf

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

// ComputeDomainGVR is NVIDIA's ComputeDomain resource.
var ComputeDomainGVR = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// Names the NVIDIA DRA driver uses.
const (
	// DomainLabel is the template label naming the ComputeDomain's UID.
	DomainLabel         = "resource.nvidia.com/computeDomain"
	targetLabel         = "resource.nvidia.com/computeDomainTarget"
	channelClass        = "compute-domain-default-channel.nvidia.com"
	computeDomainDriver = "compute-domain.nvidia.com"
)

// WorkloadTemplate is the ResourceClaimTemplate NVIDIA's controller creates for a ComputeDomain:
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
			Namespace: namespace,
			Name:      name,
			Labels:    map[string]string{DomainLabel: domainUID, targetLabel: "Workload"},
		},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{
				Name:    "channel",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: channelClass},
			}},
			Config: []resourcev1.DeviceClaimConfiguration{{
				Requests: []string{"channel"},
				DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver:     computeDomainDriver,
					Parameters: runtime.RawExtension{Raw: []byte(params)},
				}},
			}},
		}}},
	}
}

// DriverEmulator plays NVIDIA's ComputeDomain controller inside a scheduler_perf run: for every
// ComputeDomain it creates the workload ResourceClaimTemplate named in spec.channel, which needs
// the domain's UID and so cannot be written in the config's templates. The CRD is created by
// the workload's ops after the emulator starts, so it waits for the resource to be served.
type DriverEmulator struct {
	client  kubernetes.Interface
	dynamic dynamic.Interface
	logger  klog.Logger
	cancel  context.CancelFunc
	done    chan struct{}

	mu      sync.Mutex
	created map[string]bool // domain UIDs whose template exists
}

// StartDriverEmulator starts the emulator; Stop ends it and waits for its goroutines.
func StartDriverEmulator(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) *DriverEmulator {
	ctx, cancel := context.WithCancel(ctx)
	d := &DriverEmulator{
		client: client, dynamic: dyn, logger: klog.FromContext(ctx).WithName("driver-emulator"),
		cancel: cancel, done: make(chan struct{}), created: map[string]bool{},
	}
	go d.run(ctx)
	return d
}

// Stop ends the emulator.
func (d *DriverEmulator) Stop() {
	d.cancel()
	<-d.done
}

// Templates is the number of templates the emulator has created.
func (d *DriverEmulator) Templates() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.created)
}

func (d *DriverEmulator) run(ctx context.Context) {
	defer close(d.done)
	// Until the CRD is served a list fails; an informer would back off for up to 30 s instead.
	// The workloads create the CRD first, so the first tries usually succeed; a run without it
	// costs one request every 2 s.
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
	sync := func(obj any) { d.sync(ctx, obj) }
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: sync, UpdateFunc: func(_, obj any) { sync(obj) }}); err != nil {
		d.logger.Error(err, "watch ComputeDomains")
		return
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
}

func (d *DriverEmulator) sync(ctx context.Context, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetDeletionTimestamp() != nil {
		return
	}
	uid := string(u.GetUID())
	d.mu.Lock()
	done := d.created[uid]
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
			d.created[uid] = true
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
