// Command cdplace-node-smoke runs ComputeDomain pods on nodes whose kubelets are real: the e2e
// control plane (etcd, kube-apiserver, kube-controller-manager as processes), and per node a
// containerd, a kubelet and the fake NVIDIA driver's DRA kubelet plugins
// (cdplace-fake-nvidia-driver), all processes on this machine (harness.StartRealNode); the
// driver's ComputeDomain controller emulator; and a scheduler, cdplace's or the stock one with
// the upstream clique pod-affinity pattern. It places one domain on clean trays and one on a
// clique whose tray carries a stale ComputeDomain label, waits until the pods run (or the kubelet
// refuses), and prints the plugins' Prepare and refusal counts. Exit status 0 when every pod
// runs and the refusals are what -want-refusals says. Needs root (kubelet, containerd, CNI).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cdplace/cdplace/e2e/harness"
	"github.com/cdplace/cdplace/e2e/nvnode"
)

const pluginNS = "fake-nvidia-dra"

var gpuTemplate = "tray-gpus"

func main() {
	repo := flag.String("repo", ".", "repository root (binaries in target/)")
	kubelet := flag.String("kubelet", "", "kubelet binary")
	fake := flag.String("fake-driver", "", "cdplace-fake-nvidia-driver binary")
	pause := flag.String("pause", "", "a static pause binary (cdplace-pause): the sandbox and workload image, imported into each node's containerd")
	scheduler := flag.String("scheduler", "stock", "stock (kube-scheduler-stock, the upstream clique pod-affinity pattern) or cdplace (target/go/kube-scheduler with kube-scheduler-config/scheduler-config.yaml)")
	runtime := flag.String("runtime", "", "the OCI runtime the nodes' containerd runs (runc when empty); e2e/kind/runc-drop-sys-resource where the capability bounding set lacks CAP_SYS_RESOURCE")
	cdplaceBin := flag.String("cdplace-bin", "target/go/kube-scheduler", "the cdplace kube-scheduler (`make scheduler`), relative to -repo unless absolute")
	cliques := flag.Int("cliques", 2, "cliques")
	trays := flag.Int("trays", 2, "trays (nodes) per clique")
	size := flag.Int("size", 2, "pods per domain")
	expect := flag.String("expect", "running", "running: every pod Running and no Prepare refusal; refused: at least one Prepare refusal (the stock baseline on the stale tray)")
	keep := flag.Bool("keep", false, "keep the run directory")
	flag.Parse()
	// Interrupted, the run still stops every process and unmounts what the kubelets mounted.
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, 10*time.Minute)
	defer cancel()
	start := time.Now()
	if *expect != "running" && *expect != "refused" {
		fmt.Fprintf(os.Stderr, "-expect %q: want running or refused\n", *expect)
		os.Exit(2)
	}
	res, err := run(ctx, *repo, *kubelet, *fake, *pause, *runtime, *scheduler, *cdplaceBin, *cliques, *trays, *size, *keep, *expect)
	fmt.Printf("SMOKE scheduler=%s running=%d/%d prepares=%d refusals=%d elapsed=%v\n", *scheduler, res.running, res.pods,
		res.prepares, res.refusals, time.Since(start).Round(time.Second))
	if err == nil {
		err = res.check(*expect)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

type result struct{ pods, running, prepares, refusals int }

func (r result) check(expect string) error {
	switch {
	case expect == "refused" && r.refusals == 0:
		return fmt.Errorf("no Prepare refusal; the stale tray was expected to refuse a pod")
	case expect == "running" && r.refusals > 0:
		return fmt.Errorf("%d Prepare refusals, want none", r.refusals)
	case expect == "running" && (r.running != r.pods || r.prepares < r.pods):
		return fmt.Errorf("%d of %d pods Running, %d channel Prepares", r.running, r.pods, r.prepares)
	}
	return nil
}

func run(ctx context.Context, repo, kubelet, fake, pause, runtime, scheduler, cdplaceBin string, cliques, trays, size int, keep bool, expect string) (res result, err error) {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return res, err
	}
	bin := filepath.Join(abs, "target", "e2e", "bin")
	dir, err := os.MkdirTemp(filepath.Join(abs, "target", "e2e"), "node-smoke-")
	if err != nil {
		return res, err
	}
	fmt.Println("run directory:", dir)
	ok := false
	defer func() {
		if ok && !keep {
			_ = os.RemoveAll(dir)
		}
	}()
	images := filepath.Join(dir, "node-images.tar")
	if err := harness.WriteNodeImages(images, pause); err != nil {
		return res, err
	}
	cp, err := harness.Start(ctx, dir, harness.Binaries{Etcd: filepath.Join(bin, "etcd"),
		APIServer: filepath.Join(bin, "kube-apiserver"), ControllerManager: filepath.Join(bin, "kube-controller-manager")})
	if err != nil {
		return res, err
	}
	defer cp.Stop()
	c := cp.Client
	if _, err := cp.ApplyFile(ctx, filepath.Join(abs, "e2e", "manifests", "computedomain-crd.yaml"), ""); err != nil {
		return res, err
	}
	if err := harness.DeviceClasses(ctx, c, false); err != nil {
		return res, err
	}
	for _, ns := range []string{pluginNS, "smoke", "cdplace-system"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
		// No ServiceAccount admission on this API server: the pods' default account by hand.
		if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
			return res, err
		}
	}
	drv, err := harness.StartDriverEmulator(ctx, c, cp.Dynamic)
	if err != nil {
		return res, err
	}
	defer drv.Stop()

	var sched *harness.Scheduler
	profile := harness.Baseline
	switch scheduler {
	case "stock":
		sched, err = cp.StartSchedulerBinary(ctx, "default-scheduler", filepath.Join(bin, "kube-scheduler-stock"),
			harness.BaselineSchedulerConfig(cp.AdminKubeconfig), nil)
	case "cdplace":
		profile = harness.Cdplace
		var cfg []byte
		cfg, err = harness.SchedulerConfig(filepath.Join(abs, "kube-scheduler-config", "scheduler-config.yaml"), cp.AdminKubeconfig, nil)
		if err == nil {
			if !filepath.IsAbs(cdplaceBin) {
				cdplaceBin = filepath.Join(abs, cdplaceBin)
			}
			sched, err = cp.StartSchedulerBinary(ctx, "computedomain-scheduler", cdplaceBin, cfg, nil)
		}
	default:
		err = fmt.Errorf("-scheduler %q: want stock or cdplace", scheduler)
	}
	if err != nil {
		return res, err
	}
	defer sched.Stop()

	nodeBins := harness.RealNodeBinaries{Kubelet: kubelet, Containerd: "containerd", Ctr: "ctr", CNIDir: "/usr/lib/cni",
		FakeDriver: fake, Images: images, Runtime: runtime}
	var nodes []*harness.RealNode
	defer func() {
		for _, n := range nodes {
			n.Stop()
		}
	}()
	cliqueOf := map[string]string{}
	idx := 0
	for q := 0; q < cliques; q++ {
		clique := fmt.Sprintf("5b1f2c3d-0000-4000-8000-000000000001.%d", q)
		for t := 0; t < trays; t++ {
			idx++
			name := fmt.Sprintf("tray-%d-%d", q, t)
			t0 := time.Now()
			n, err := cp.StartRealNode(ctx, nodeBins, name, idx,
				map[string]string{harness.CliqueLabel: clique, "nvidia.com/gpu.present": "true"}, pluginNS)
			if err != nil {
				return res, err
			}
			nodes = append(nodes, n)
			cliqueOf[name] = clique
			fmt.Printf("node %s Ready in %v (clique %s)\n", name, time.Since(t0).Round(time.Second), clique)
		}
	}
	// Every node's plugins publish their ResourceSlices.
	if err := waitFor(ctx, "ResourceSlices of every node", 90*time.Second, func() (bool, error) {
		l, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 2*len(nodes), err
	}); err != nil {
		return res, err
	}

	// A stale ComputeDomain label on the first tray of clique 0: the driver left it behind for a
	// domain that is gone. cdplace reads it and keeps new domains off that tray; the stock
	// scheduler does not.
	stale := fmt.Sprintf(`{"metadata":{"labels":{%q:"stale-domain"}}}`, nvnode.DomainNodeLabel)
	if _, err := c.CoreV1().Nodes().Patch(ctx, "tray-0-0", types.MergePatchType, []byte(stale), metav1.PatchOptions{}); err != nil {
		return res, err
	}
	// The GPUs come as DRA claims of gpu.nvidia.com (the fake plugin publishes 4 per tray), a whole
	// tray per pod, as cdplace's wholeTray asks.
	if _, err := c.ResourceV1().ResourceClaimTemplates("smoke").Create(ctx, harness.GPUClaimTemplate("smoke", "tray-gpus", 4), metav1.CreateOptions{}); err != nil {
		return res, err
	}
	for _, d := range []string{"alpha"} {
		if _, err := harness.CreateComputeDomain(ctx, cp.Dynamic, "smoke", d, size); err != nil {
			return res, err
		}
		for i := 0; i < size; i++ {
			pod := harness.DomainPod("smoke", d, i, 0, profile)
			pod.Spec.Containers[0].Image = harness.PauseImage
			pod.Spec.Containers[0].Command = nil
			pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
			pod.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
			pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: "gpus"})
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "gpus", ResourceClaimTemplateName: &gpuTemplate})
			if _, err := c.CoreV1().Pods("smoke").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return res, err
			}
		}
	}
	want := "every pod Running"
	cond := func() (bool, error) {
		pods, err := c.CoreV1().Pods("smoke").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == len(pods.Items) && running > 0, nil
	}
	if expect == "refused" {
		want = "a FailedPrepareDynamicResources Event"
		cond = func() (bool, error) {
			evs, err := c.CoreV1().Events("smoke").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + nvnode.ReasonPrepareErr})
			return err == nil && len(evs.Items) > 0, err
		}
	}
	runErr := waitFor(ctx, want, 3*time.Minute, cond)
	pods, err := c.CoreV1().Pods("smoke").List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	for _, p := range pods.Items {
		fmt.Printf("pod %s node=%s clique=%s phase=%s\n", p.Name, p.Spec.NodeName, cliqueOf[p.Spec.NodeName], p.Status.Phase)
		res.pods++
		if p.Status.Phase == corev1.PodRunning {
			res.running++
		}
	}
	cms, err := c.CoreV1().ConfigMaps(pluginNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, err
	}
	for _, cm := range cms.Items {
		r, _ := strconv.Atoi(cm.Data["refusals"])
		res.refusals += r
		p, _ := strconv.Atoi(cm.Data["computeDomainPrepares"])
		res.prepares += p
		fmt.Printf("plugin %s: computeDomainPrepares=%s gpuPrepares=%s refusals=%s label=%q lastRefusal=%q\n", cm.Data["node"],
			cm.Data["computeDomainPrepares"], cm.Data["gpuPrepares"], cm.Data["refusals"], cm.Data["label"], cm.Data["lastRefusal"])
	}
	evs, _ := c.CoreV1().Events("smoke").List(ctx, metav1.ListOptions{FieldSelector: "reason=" + nvnode.ReasonPrepareErr})
	if evs != nil && len(evs.Items) > 0 {
		fmt.Printf("kubelet event %s: %s\n", evs.Items[0].Reason, evs.Items[0].Message)
	}
	// The pods go before the nodes (with their own grace period, so the API keeps them until their
	// kubelets have stopped the containers and unprepared the claims).
	if err := c.CoreV1().Pods("smoke").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err == nil {
		_ = waitFor(ctx, "pods gone", 60*time.Second, func() (bool, error) {
			l, err := c.CoreV1().Pods("smoke").List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0, err
		})
	}
	ok = runErr == nil
	return res, runErr
}

func waitFor(ctx context.Context, what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		done, err := cond()
		if done {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v (last error: %v)", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
