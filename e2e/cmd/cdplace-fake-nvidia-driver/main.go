// Command cdplace-fake-nvidia-driver plays the NVIDIA DRA driver (dra-driver-nvidia-gpu) on
// simulated trays, for kind clusters whose kubelets are real. Two modes:
//
//   - kubelet-plugin (a DaemonSet): two DRA kubelet plugins in one process (gpu.nvidia.com and
//     compute-domain.nvidia.com, on k8s.io/dynamic-resource-allocation/kubeletplugin) that publish
//     the tray's GPUs and ComputeDomain channel/daemon devices as ResourceSlices and, on the
//     kubelet's NodePrepareResources/NodeUnprepareResources, apply the driver's node rules
//     (e2e/nvnode, shared with the process-level emulator) with its refusal texts. It counts
//     Prepare calls and refusals in the ConfigMap nvnode-<node> of its namespace.
//   - controller (a Deployment): the ComputeDomain controller's part the scheduler depends on,
//     the workload ResourceClaimTemplate of each ComputeDomain (host-shim/go/test/nvdriver, as
//     in the process-level e2e).
//
// Manifests: e2e/kind/manifests/fake-nvidia-driver.yaml.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/cdplace/cdplace/e2e/nvnode"
	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

func main() {
	gpus := flag.Int("gpus", 4, "GPUs per tray")
	hostManaged := flag.Bool("host-managed", false, "IMEX daemons run by the administrator: no daemon device, no node label")
	lag := flag.Duration("label-lag", 10*time.Second, "how long a ComputeDomain's node label outlives its last claim on the node")
	pluginDir := flag.String("plugins-dir", "/var/lib/kubelet/plugins", "the kubelet's plugin data directory")
	registryDir := flag.String("registry-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration directory")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (in-cluster configuration when empty)")
	klog.InitFlags(nil)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch flag.Arg(0) {
	case "controller":
		if err := runController(ctx, *kubeconfig); err != nil {
			klog.ErrorS(err, "cdplace-fake-nvidia-driver controller")
			os.Exit(1)
		}
		return
	case "kubelet-plugin":
	default:
		fmt.Fprintf(os.Stderr, "usage: cdplace-fake-nvidia-driver [flags] kubelet-plugin|controller (got %q)\n", flag.Arg(0))
		os.Exit(2)
	}
	node, ns := os.Getenv("NODE_NAME"), os.Getenv("POD_NAMESPACE")
	if node == "" || ns == "" {
		fmt.Fprintln(os.Stderr, "cdplace-fake-nvidia-driver: NODE_NAME and POD_NAMESPACE must be set (the DaemonSet sets them from the downward API)")
		os.Exit(2)
	}
	if err := run(ctx, *kubeconfig, node, ns, *gpus, *hostManaged, *lag, *pluginDir, *registryDir); err != nil {
		klog.ErrorS(err, "cdplace-fake-nvidia-driver kubelet-plugin")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, node, ns string, gpus int, hostManaged bool, lag time.Duration, pluginDir, registryDir string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := newStats(client, ns, node)
	go st.run(ctx)
	devices := map[string][]resourcev1.Device{
		nvnode.GPUDriver:           nvnode.GPUDevices(node, gpus),
		nvnode.ComputeDomainDriver: nvnode.ComputeDomainDevices(hostManaged),
	}
	plugins := map[string]kubeletplugin.DRAPlugin{
		nvnode.GPUDriver:           &gpuPlugin{stats: st},
		nvnode.ComputeDomainDriver: newCDPlugin(client, node, hostManaged, lag, st),
	}
	for _, driver := range []string{nvnode.GPUDriver, nvnode.ComputeDomainDriver} {
		dir := filepath.Join(pluginDir, driver)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
		h, err := kubeletplugin.Start(ctx, plugins[driver],
			kubeletplugin.DriverName(driver), kubeletplugin.KubeClient(client),
			kubeletplugin.NodeName(node), kubeletplugin.NodeUID(n.UID),
			kubeletplugin.PluginDataDirectoryPath(dir), kubeletplugin.RegistrarDirectoryPath(registryDir))
		if err != nil {
			return fmt.Errorf("start the %s kubelet plugin: %w", driver, err)
		}
		defer h.Stop()
		// One pool per node and driver, pool name = node name, as the driver publishes them.
		res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
			node: {Slices: []resourceslice.Slice{{Devices: devices[driver]}}},
		}}
		if err := h.PublishResources(ctx, res); err != nil {
			return fmt.Errorf("publish the %s ResourceSlices: %w", driver, err)
		}
	}
	klog.InfoS("serving", "node", node, "gpus", gpus, "hostManaged", hostManaged, "labelLag", lag)
	<-ctx.Done()
	return nil
}

// runController runs the ComputeDomain controller emulator until ctx ends.
func runController(ctx context.Context, kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	d := nvdriver.Start(ctx, client, dyn)
	defer d.Stop()
	if err := d.WaitForSync(ctx); err != nil {
		return err
	}
	klog.InfoS("ComputeDomain controller emulator serving")
	<-ctx.Done()
	return nil
}
