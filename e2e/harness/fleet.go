package harness

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/nvnode"
	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

// Well-known names of the NVIDIA DRA driver and GPU Feature Discovery.
const (
	CliqueLabel         = "nvidia.com/gpu.clique"
	DomainNodeLabel     = nvdriver.DomainLabel
	GPUDriver           = "gpu.nvidia.com"
	ComputeDomainDriver = nvdriver.Driver
	ChannelClass        = nvdriver.ChannelClass
	DaemonClass         = "compute-domain-daemon.nvidia.com"
	GPUClass            = "gpu.nvidia.com"
	GPUResource         = corev1.ResourceName("nvidia.com/gpu")
	// FleetLabel marks every node the harness created, with the fleet's name.
	FleetLabel = "cdplace.e2e/fleet"
)

// FleetSpec is the shape of a simulated NVL72 fleet.
type FleetSpec struct {
	// Name prefixes every node name (e.g. "s1"), so fleets of different scenarios never share nodes.
	Name           string
	Racks          int
	CliquesPerRack int
	TraysPerClique int
	GPUsPerTray    int
	// HostManaged publishes no IMEX daemon device, as the driver does in host-managed mode.
	HostManaged bool
}

// Fleet is a created fleet: its nodes in rack/clique/tray order and the clique of each.
type Fleet struct {
	Spec     FleetSpec
	Nodes    []string
	Cliques  []string
	CliqueOf map[string]string
	// Rack of each clique (index into racks) for the rack map.
	RackOf map[string]int
}

// NodeName names tray t of clique c in rack r.
func (s FleetSpec) NodeName(r, c, t int) string {
	if s.CliquesPerRack == 1 {
		return fmt.Sprintf("%s-r%d-t%02d", s.Name, r, t)
	}
	return fmt.Sprintf("%s-r%dc%d-t%02d", s.Name, r, c, t)
}

// Clique is the clique label value of clique c of rack r: known before the fleet exists, so a
// scheduler configuration can name it (e2e/teamracks_test.go).
func (s FleetSpec) Clique(r, c int) string {
	return fmt.Sprintf("%s.%d", s.clusterUUID(r), 32766-c)
}

// clusterUUID is the rack's NVLink cluster UUID, stable per fleet name and rack.
func (s FleetSpec) clusterUUID(r int) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", s.Name, r)
	v := h.Sum64()
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(v>>32), uint16(v>>16), uint16(v)&0xfff, r&0xfff, v&0xffffffffffff)
}

// DeviceClasses creates the classes the NVIDIA driver's chart installs (once per control plane).
func DeviceClasses(ctx context.Context, c kubernetes.Interface, hostManaged bool) error {
	classes := []resourcev1.DeviceClass{
		deviceClass(GPUClass, `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`),
		deviceClass(ChannelClass, `device.driver == "compute-domain.nvidia.com" && device.attributes["compute-domain.nvidia.com"].type == "channel" && device.attributes["compute-domain.nvidia.com"].id == 0`),
	}
	if !hostManaged {
		classes = append(classes, deviceClass(DaemonClass, `device.driver == "compute-domain.nvidia.com" && device.attributes["compute-domain.nvidia.com"].type == "daemon"`))
	}
	for i := range classes {
		_, err := c.ResourceV1().DeviceClasses().Create(ctx, &classes[i], metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

func deviceClass(name, expr string) resourcev1.DeviceClass {
	return resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: expr},
		}}},
	}
}

// CreateFleet creates the nodes (labels, allocatable, Ready) and, per node, the two
// ResourceSlices the NVIDIA driver publishes.
func CreateFleet(ctx context.Context, c kubernetes.Interface, spec FleetSpec) (*Fleet, error) {
	racks := make([]*Fleet, 0, spec.Racks)
	for r := 0; r < spec.Racks; r++ {
		f, err := CreateRack(ctx, c, spec, r)
		if err != nil {
			return nil, err
		}
		racks = append(racks, f)
	}
	return MergeFleet(spec, racks), nil
}

// CreateRack creates rack r of spec alone (for creating big fleets in parallel; see MergeFleet).
func CreateRack(ctx context.Context, c kubernetes.Interface, spec FleetSpec, r int) (*Fleet, error) {
	if spec.GPUsPerTray == 0 {
		spec.GPUsPerTray = 4
	}
	if spec.CliquesPerRack == 0 {
		spec.CliquesPerRack = 1
	}
	f := &Fleet{Spec: spec, CliqueOf: map[string]string{}, RackOf: map[string]int{}}
	for ci := 0; ci < spec.CliquesPerRack; ci++ {
		clique := spec.Clique(r, ci)
		f.Cliques = append(f.Cliques, clique)
		f.RackOf[clique] = r
		for t := 0; t < spec.TraysPerClique; t++ {
			name := spec.NodeName(r, ci, t)
			if err := createNode(ctx, c, spec, name, clique); err != nil {
				return nil, err
			}
			f.Nodes = append(f.Nodes, name)
			f.CliqueOf[name] = clique
		}
	}
	return f, nil
}

// MergeFleet joins racks created by CreateRack, in rack order.
func MergeFleet(spec FleetSpec, racks []*Fleet) *Fleet {
	f := &Fleet{Spec: spec, CliqueOf: map[string]string{}, RackOf: map[string]int{}}
	if f.Spec.GPUsPerTray == 0 {
		f.Spec.GPUsPerTray = 4
	}
	if f.Spec.CliquesPerRack == 0 {
		f.Spec.CliquesPerRack = 1
	}
	for _, r := range racks {
		f.Nodes = append(f.Nodes, r.Nodes...)
		f.Cliques = append(f.Cliques, r.Cliques...)
		for k, v := range r.CliqueOf {
			f.CliqueOf[k] = v
		}
		for k, v := range r.RackOf {
			f.RackOf[k] = v
		}
	}
	return f
}

// CliqueNodes lists the nodes of one clique in tray order.
func (f *Fleet) CliqueNodes(clique string) []string {
	var out []string
	for _, n := range f.Nodes {
		if f.CliqueOf[n] == clique {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func createNode(ctx context.Context, c kubernetes.Interface, spec FleetSpec, name, clique string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"kubernetes.io/hostname": name,
			"kubernetes.io/os":       "linux",
			"kubernetes.io/arch":     "arm64",
			"nvidia.com/gpu.present": "true",
			"nvidia.com/gpu.product": "NVIDIA-GB200",
			"nvidia.com/gpu.count":   fmt.Sprint(spec.GPUsPerTray),
			CliqueLabel:              clique,
			FleetLabel:               spec.Name,
		},
	}}
	created, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("144"),
		corev1.ResourceMemory: resource.MustParse("880Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		GPUResource:           *resource.NewQuantity(int64(spec.GPUsPerTray), resource.DecimalSI),
	}
	status := corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "simulated by cdplace e2e", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
	}
	// A controller may write the new node between its creation and this status (the
	// kube-controller-manager's node controllers do): like a kubelet, read it again and retry.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		created.Status = status
		_, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			if fresh, getErr := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); getErr == nil {
				created = fresh
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s status: %w", name, err)
	}
	// The TaintNodesByCondition admission plugin taints a new node not-ready; the node lifecycle
	// controller would lift it once the kubelet reports Ready. This fleet is Ready from the start.
	untaint := []byte(`{"spec":{"taints":null}}`)
	if _, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, untaint, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("node %s taints: %w", name, err)
	}
	for _, slice := range nodeSlices(spec, name, clique) {
		if _, err := c.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create ResourceSlice %s: %w", slice.Name, err)
		}
	}
	return nil
}

// nodeSlices are the node's ResourceSlices as the NVIDIA driver's two kubelet plugins publish
// them: one pool per node and driver, pool name = node name.
func nodeSlices(spec FleetSpec, node, clique string) []*resourcev1.ResourceSlice {
	gpus := nvnode.GPUDevices(node, spec.GPUsPerTray)
	cd := nvnode.ComputeDomainDevices(spec.HostManaged)
	slice := func(driver string, devices []resourcev1.Device) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:   fmt.Sprintf("%s-%s", node, driver),
				Labels: map[string]string{FleetLabel: spec.Name},
			},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   driver,
				NodeName: ptr.To(node),
				Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
				Devices:  devices,
			},
		}
	}
	_ = clique
	return []*resourcev1.ResourceSlice{slice(GPUDriver, gpus), slice(ComputeDomainDriver, cd)}
}

// DeleteFleet removes the fleet's nodes and slices.
func DeleteFleet(ctx context.Context, c kubernetes.Interface, f *Fleet) error {
	sel := metav1.ListOptions{LabelSelector: FleetLabel + "=" + f.Spec.Name}
	if err := c.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return err
	}
	return c.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
}
