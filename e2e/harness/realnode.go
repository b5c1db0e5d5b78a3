package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RealNodeBinaries are what a node runs when its kubelet is real: kubelet, containerd (and its
// runc shim, found on PATH), the CNI plugins' directory and the fake NVIDIA driver.
type RealNodeBinaries struct {
	Kubelet, Containerd, Ctr, CNIDir, FakeDriver string
	// Runtime is the OCI runtime containerd runs ("" for runc on PATH); e2e/kind/runc-drop-sys-resource
	// on machines whose capability bounding set lacks CAP_SYS_RESOURCE.
	Runtime string
	// Images is an image archive imported into each node's containerd (pause and workload images;
	// nothing is pulled).
	Images string
}

// RealNode is one node whose kubelet, containerd and DRA kubelet plugins run as processes on this
// machine: the level below a kind node, for machines that cannot run kind. Each node has its own
// containerd (socket, root, state), CNI bridge and subnet, kubelet root directory, ports and
// cgroup root, so the kubelets never see each other's containers.
type RealNode struct {
	Name string
	Dir  string // logs and configuration
	// Root holds the kubelet's root directory and containerd's state, under /tmp: a unix socket's
	// path must stay under 108 bytes, which a run directory in the repository can exceed.
	Root   string
	bridge string // the CNI bridge, which the bridge plugin leaves behind
	procs  []*Process
}

// StartRealNode starts containerd, the kubelet (registering node name with labels) and the fake
// NVIDIA driver's kubelet plugins for node index i, and waits until the node is Ready.
func (cp *ControlPlane) StartRealNode(ctx context.Context, bin RealNodeBinaries, name string, i int, labels map[string]string, pluginNamespace string) (*RealNode, error) {
	dir := filepath.Join(cp.Dir, "node-"+name)
	root, err := os.MkdirTemp("", "cdpn-")
	if err != nil {
		return nil, err
	}
	n := &RealNode{Name: name, Dir: dir, Root: root, bridge: fmt.Sprintf("cdp%d", i)}
	ok := false
	defer func() {
		if !ok {
			n.Stop()
		}
	}()
	for _, d := range []string{filepath.Join(dir, "cni"), filepath.Join(root, "kubelet", "plugins"), filepath.Join(root, "kubelet", "plugins_registry")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	sock := filepath.Join(root, "containerd.sock")
	ctrdCfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[4]q
    conf_dir = %[5]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`, filepath.Join(root, "containerd", "root"), filepath.Join(root, "containerd", "state"), sock, bin.CNIDir, filepath.Join(dir, "cni"))
	if bin.Runtime != "" {
		ctrdCfg += fmt.Sprintf("      [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n        BinaryName = %q\n", bin.Runtime)
	}
	if err := os.WriteFile(filepath.Join(dir, "containerd.toml"), []byte(ctrdCfg), 0o644); err != nil {
		return nil, err
	}
	cni := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"cdplace-%[1]s","plugins":[{"type":"bridge","bridge":%[5]q,"isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.%[3]d.%[2]d.0/24"}]],"dataDir":%[4]q,"routes":[{"dst":"0.0.0.0/0"}]}},{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		name, i, 200, filepath.Join(dir, "cni-ipam"), n.bridge)
	if err := os.WriteFile(filepath.Join(dir, "cni", "10-bridge.conflist"), []byte(cni), 0o644); err != nil {
		return nil, err
	}
	if err := cgroupRoot("cdplace-" + name); err != nil {
		return nil, err
	}
	ctrd, err := StartProcess(dir, "containerd", bin.Containerd, "--config", filepath.Join(dir, "containerd.toml"))
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, ctrd)
	if err := waitFile(ctx, sock, 30*time.Second); err != nil {
		return nil, fmt.Errorf("containerd of %s: %w (%s)", name, err, ctrd.LogPath)
	}
	if bin.Images != "" {
		out, err := exec.CommandContext(ctx, bin.Ctr, "-a", sock, "-n", "k8s.io", "images", "import", bin.Images).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("import %s into %s's containerd: %v: %s", bin.Images, name, err, out)
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	var healthz int
	healthz, err = FreePort()
	if err != nil {
		return nil, err
	}
	// failCgroupV1: kubelet 1.35+ refuses cgroup v1 hosts unless told (KEP-5573); the CI
	// microVMs are cgroup v1. No eviction thresholds: the test's disk is not the node's.
	kcfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: /cdplace-%[1]s
containerRuntimeEndpoint: unix://%[2]s
port: %[3]d
healthzPort: %[4]d
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
address: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
syncFrequency: 5s
`, name, sock, port, healthz)
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(kcfg), 0o644); err != nil {
		return nil, err
	}
	var lbl []string
	for k, v := range labels {
		lbl = append(lbl, k+"="+v)
	}
	kubelet, err := StartProcess(dir, "kubelet", bin.Kubelet,
		"--config="+filepath.Join(dir, "kubelet.yaml"), "--kubeconfig="+cp.AdminKubeconfig,
		"--root-dir="+filepath.Join(root, "kubelet"), "--hostname-override="+name,
		"--node-ip=127.0.0.1", "--node-labels="+strings.Join(lbl, ","), "--v=2")
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, kubelet)
	if err := cp.waitNodeReady(ctx, name, kubelet, 120*time.Second); err != nil {
		return nil, err
	}
	// The kubelet registers with the not-ready taint; the node lifecycle controller, which this
	// control plane does not run (it would mark the simulated fleets' nodes unreachable), lifts it.
	untaint := []byte(`{"spec":{"taints":null}}`)
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, untaint, metav1.PatchOptions{}); err != nil {
		return nil, fmt.Errorf("node %s taints: %w", name, err)
	}
	plugin, err := StartProcessEnv(dir, "fake-nvidia-kubelet-plugin", bin.FakeDriver,
		append(os.Environ(), "NODE_NAME="+name, "POD_NAMESPACE="+pluginNamespace),
		"--kubeconfig="+cp.AdminKubeconfig, "--label-lag=5s",
		"--plugins-dir="+filepath.Join(root, "kubelet", "plugins"),
		"--registry-dir="+filepath.Join(root, "kubelet", "plugins_registry"), "kubelet-plugin")
	if err != nil {
		return nil, err
	}
	n.procs = append(n.procs, plugin)
	ok = true
	return n, nil
}

// Stop stops the node's processes (the plugin and kubelet first) and removes Root. The pods'
// containers stop with containerd's shims only when the kubelet killed them; the caller deletes
// the pods first where that matters.
func (n *RealNode) Stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(10 * time.Second)
	}
	n.procs = nil
	killCgroup("cdplace-" + n.Name)
	if n.bridge != "" {
		_ = exec.Command("ip", "link", "delete", n.bridge).Run() // absent when no pod ran
	}
	if n.Root != "" {
		unmountUnder(n.Root)
		_ = os.RemoveAll(n.Root)
	}
}

// killCgroup kills what still runs in the node's cgroup root (pod processes whose shims outlived
// containerd) and removes the cgroups.
func killCgroup(name string) {
	for _, h := range []string{"pids", "memory", "cpu", "cpuacct", "cpuset", "blkio", "devices", "freezer", "systemd", "hugetlb", ""} {
		root := filepath.Join("/sys/fs/cgroup", h, name)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			for _, f := range []string{"cgroup.procs", "tasks"} {
				data, err := os.ReadFile(filepath.Join(d, f))
				if err != nil {
					continue
				}
				for _, pid := range strings.Fields(string(data)) {
					if id, err := strconv.Atoi(pid); err == nil && id > 1 {
						_ = syscall.Kill(id, syscall.SIGKILL)
					}
				}
			}
		}
		for i := len(dirs) - 1; i >= 0; i-- {
			for range 20 {
				if err := syscall.Rmdir(dirs[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// unmountUnder unmounts what the kubelet and containerd left mounted under dir (pod volumes,
// sandbox shm, overlay roots), deepest first, so the directory can be removed.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// cgroupRoot creates the kubelet's cgroup root in every hierarchy (the kubelet refuses a root that
// is missing in one). On cgroup v1 a new cpuset starts with no CPUs and no memory nodes, so they
// are copied from the parent, as systemd does for a slice.
func cgroupRoot(name string) error {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", name), 0o755) // cgroup v2: one hierarchy
	}
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "unified" {
			continue
		}
		base := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(base); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue // cpu,cpuacct style links to a hierarchy handled under its own name
		}
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup root %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(base, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup root %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

func waitFile(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %v", path, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) waitNodeReady(ctx context.Context, name string, kubelet *Process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		if exited, _ := kubelet.Exited(); exited {
			return kubelet.ExitError("waiting for node " + name + " Ready")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s not Ready within %v (kubelet log %s)", name, timeout, kubelet.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
