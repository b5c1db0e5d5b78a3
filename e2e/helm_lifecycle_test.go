package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// The chart's runbooks (docs/operations-chart.md) on the suite's control plane, in both modes:
// `helm install`, `helm test`, `helm upgrade` (a values change), `helm rollback` and `helm
// uninstall` with the helm binary against the API server, in the runbooks' order. There are no
// kubelets, so the Deployment's pods never run: after each step the test starts our
// kube-scheduler as the rolled-out pod would (the ConfigMap and the Deployment's flags as the
// API server now stores them, a token of the chart's ServiceAccount) and checks that a scheduler
// runs and places a ComputeDomain; after the uninstall, that the stock scheduler schedules. `helm
// test`'s pod is run by the test in the kubelet's place: it does the pod's GET of /readyz against
// the scheduler and reports the pod's phase.

// lifecycleFleet: room for a 2-tray domain after each of the four steps.
var lifecycleFleet = harness.FleetSpec{Racks: 3, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}

func TestHelmLifecycle(t *testing.T) {
	bin := helmBinary(t)
	pauseScheduler(t, env.Cdplace)
	t.Run("singleScheduler", func(t *testing.T) {
		// The suite's stock scheduler runs without leader election: the runbook's stock
		// scheduler (on the lease) is started by the test instead.
		pauseScheduler(t, env.Baseline)
		testChartLifecycle(t, bin, "singleScheduler")
	})
	t.Run("secondScheduler", func(t *testing.T) { testChartLifecycle(t, bin, "secondScheduler") })
}

// lifecycle is one release on the suite's API server and the scheduler standing in for its pods.
type lifecycle struct {
	t     *testing.T
	bin   string
	ns    string
	mode  string
	sched *harness.Scheduler
	start int
}

func (l *lifecycle) helm(args ...string) string {
	l.t.Helper()
	out, err := helmRun(l.t, l.bin, append(args, "--kubeconfig", env.CP.AdminKubeconfig, "--namespace", l.ns)...)
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// rollOut stops the scheduler standing in for the old pods (if any) and starts one from the
// release as the API server now stores it, as a Deployment rollout replaces its pods, and waits
// until it is ready.
func (l *lifecycle) rollOut() {
	t := l.t
	t.Helper()
	ctx := context.Background()
	if l.sched != nil {
		l.sched.Stop()
	}
	c := env.CP.Client
	cm, err := c.CoreV1().ConfigMaps(l.ns).Get(ctx, helmRelease+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := c.AppsV1().Deployments(l.ns).Get(ctx, helmRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template.Spec
	token, err := env.CP.ServiceAccountToken(ctx, l.ns, pod.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	l.start++
	name := fmt.Sprintf("%s-%d", l.ns, l.start)
	kubeconfig := filepath.Join(env.CP.Dir, name+".kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	stored := filepath.Join(env.CP.Dir, name+"-stored-config.yaml")
	if err := os.WriteFile(stored, []byte(cm.Data["scheduler-config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.SchedulerConfig(stored, kubeconfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	args := slices.DeleteFunc(slices.Clone(pod.Containers[0].Args), func(a string) bool {
		return strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "--secure-port=")
	})
	if l.sched, err = env.CP.StartSchedulerWithArgs(ctx, name, cfg, args); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.sched.Stop)
	// The runbooks wait for `kubectl rollout status`, which waits for the Deployment's readiness
	// probe (GET /readyz): the new pod's caches must have synced before `helm test` asks.
	if err := l.sched.WaitReady(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// clientQPS is clientConnection.qps of the configuration the API server stores for the release.
func (l *lifecycle) clientQPS() string {
	l.t.Helper()
	cm, err := env.CP.Client.CoreV1().ConfigMaps(l.ns).Get(context.Background(), helmRelease+"-config", metav1.GetOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["scheduler-config.yaml"]), &cfg); err != nil {
		l.t.Fatal(err)
	}
	return nestedStr(cfg, "clientConnection", "qps")
}

// helmTest runs `helm test` with the test standing in for the kubelet of its hook pod: it checks
// the pod asks the Service for /readyz on the secure port, does that GET against the scheduler
// (the Service's only endpoint here) and sets the pod's phase from the answer.
func (l *lifecycle) helmTest() {
	t := l.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods := env.CP.Client.CoreV1().Pods(l.ns)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + helmRelease + "-test-readyz"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ran := make(chan string, 1)
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Added {
				continue
			}
			args := strings.Join(pod.Spec.Containers[0].Args, " ")
			want := fmt.Sprintf("https://%s.%s.svc:10259/readyz", helmRelease, l.ns)
			phase, note := corev1.PodSucceeded, "GET /readyz: 200"
			if !strings.HasSuffix(args, want) {
				phase, note = corev1.PodFailed, fmt.Sprintf("the test pod's args %q do not end in %s", args, want)
			} else if code, err := getReadyz(ctx, l.sched.Port); err != nil || code != http.StatusOK {
				phase, note = corev1.PodFailed, fmt.Sprintf("GET /readyz: %d, %v", code, err)
			}
			// The scheduler may bind the pod meanwhile: write the phase onto the latest version.
			if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Status.Phase = phase
				_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
				return err
			}); err != nil {
				note += fmt.Sprintf("; status update: %v", err)
			}
			ran <- note
			return
		}
	}()
	out, err := helmRun(t, l.bin, "test", helmRelease, "--kubeconfig", env.CP.AdminKubeconfig, "--namespace", l.ns, "--timeout", "50s")
	select {
	case note := <-ran:
		t.Logf("helm test: the hook pod ran: %s", note)
	default:
		t.Errorf("helm test created no pod %s-test-readyz", helmRelease)
	}
	if err != nil {
		t.Fatalf("helm test: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Phase:          Succeeded") {
		t.Errorf("helm test did not report the pod Succeeded:\n%s", out)
	}
}

func getReadyz(ctx context.Context, port int) (int, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the pod's curl --insecure
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/readyz", port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// leaseHolder is the holder of the lease ns/name ("" when there is none).
func leaseHolder(t *testing.T, ns, name string) string {
	t.Helper()
	l, err := env.CP.Client.CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitLeaseHolder waits until the lease is held by someone for whom ok is true.
func waitLeaseHolder(t *testing.T, ns, name, what string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if h := leaseHolder(t, ns, name); h != "" && ok(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s/%s: holder %q after 90s; want %s", ns, name, leaseHolder(t, ns, name), what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startStockScheduler is the cluster's stock kube-scheduler as kubeadm runs it: the default
// profile, leading on kube-system/kube-scheduler.
func startStockScheduler(t *testing.T, name string) *harness.Scheduler {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  resourceLock: leases
  resourceName: kube-scheduler
  resourceNamespace: kube-system
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
profiles:
- schedulerName: default-scheduler
`, env.CP.AdminKubeconfig)
	s, err := env.CP.StartScheduler(context.Background(), name, []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// placesDomain: a 2-pod ComputeDomain of the scenario runs in one clique.
func placesDomain(t *testing.T, s *scenario, name string) {
	t.Helper()
	s.domain(name, 2, 4)
	d := s.waitFor(name+"'s 2 pods running", 90*time.Second, all(name, 2))
	s.assertNoSplits(d)
}

func testChartLifecycle(t *testing.T, bin, mode string) {
	ctx := context.Background()
	short := map[string]string{"secondScheduler": "second", "singleScheduler": "single"}[mode]
	l := &lifecycle{t: t, bin: bin, ns: "helm-life-" + short, mode: mode}
	single := mode == "singleScheduler"
	c := env.CP.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
	}}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = helmRun(t, bin, "uninstall", helmRelease, "--kubeconfig", env.CP.AdminKubeconfig, "--namespace", l.ns, "--ignore-not-found")
		_ = c.CoreV1().Namespaces().Delete(ctx, l.ns, metav1.DeleteOptions{})
		if single {
			_ = c.CoordinationV1().Leases("kube-system").Delete(ctx, "kube-scheduler", metav1.DeleteOptions{})
		}
	})
	// What kube-system and the cluster-scoped kinds hold before the release, to show that
	// uninstall leaves nothing of it there.
	before := kubeSystemAndClusterObjects(t)
	var stock *harness.Scheduler
	var stockHolder string
	if single {
		// Before the install: the cluster's stock scheduler leads.
		stock = startStockScheduler(t, l.ns+"-stock")
		stockHolder = waitLeaseHolder(t, "kube-system", "kube-scheduler", "the stock scheduler", func(string) bool { return true })
	}

	// Install.
	install := []string{"install", helmRelease, chartDir()}
	if !single {
		install = append(install, "--set", "mode=secondScheduler")
	}
	l.helm(install...)
	l.rollOut()
	if single {
		// Runbook step 2: ready and standing by, the stock scheduler still leading.
		time.Sleep(5 * time.Second)
		if h := leaseHolder(t, "kube-system", "kube-scheduler"); h != stockHolder {
			t.Fatalf("the release took kube-system/kube-scheduler (%q) while the stock scheduler ran", h)
		}
	}
	l.helmTest()
	if single {
		// Runbook step 3: stop the stock scheduler; the release takes the lease.
		stock.Stop()
		waitLeaseHolder(t, "kube-system", "kube-scheduler", "the release", func(h string) bool { return h != stockHolder })
	} else {
		waitLeaseHolder(t, l.ns, "computedomain-scheduler", "the release", func(string) bool { return true })
	}
	s := newScenario(t, l.ns, harness.Cdplace, lifecycleFleet, harness.PrepareOptions{})
	placesDomain(t, s, "installed")
	if single {
		// The same process serves default-scheduler: a plain pod runs.
		if _, err := c.CoreV1().Pods(s.ns).Create(ctx, harness.GPUPod(s.ns, "plain-installed", 0, harness.Baseline), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPlainRunning(t, s, 1)
	}
	if got := l.clientQPS(); got != "300" {
		t.Errorf("installed clientConnection.qps %s; want the chart's 300", got)
	}

	// Upgrade: a values change, the pods rolled.
	l.helm("upgrade", helmRelease, chartDir(), "--reuse-values", "--set", "clientConnection.qps=400", "--set", "clientConnection.burst=800")
	if got := l.clientQPS(); got != "400" {
		t.Fatalf("after the upgrade clientConnection.qps %s; want 400", got)
	}
	l.rollOut()
	l.helmTest()
	placesDomain(t, s, "upgraded")

	// Rollback to the install.
	l.helm("rollback", helmRelease, "1")
	if got := l.clientQPS(); got != "300" {
		t.Fatalf("after the rollback clientConnection.qps %s; want 300 again", got)
	}
	l.rollOut()
	l.helmTest()
	placesDomain(t, s, "rolledback")
	if h := l.helm("history", helmRelease, "--output", "json"); strings.Count(h, `"revision"`) != 3 || !strings.Contains(h, `"description":"Rollback to 1"`) {
		t.Errorf("helm history after install, upgrade, rollback: %s", h)
	}

	// Uninstall.
	if single {
		// Runbook: restore the stock scheduler FIRST; it stands by while the release leads.
		releaseHolder := leaseHolder(t, "kube-system", "kube-scheduler")
		stock = startStockScheduler(t, l.ns+"-stock-restored")
		time.Sleep(5 * time.Second)
		if h := leaseHolder(t, "kube-system", "kube-scheduler"); h != releaseHolder {
			t.Errorf("the restored stock scheduler took the lease (%q) from the running release (%q)", h, releaseHolder)
		}
		l.helm("uninstall", helmRelease, "--wait", "--timeout", "50s")
		l.sched.Stop() // the release's pods are gone
		waitLeaseHolder(t, "kube-system", "kube-scheduler", "the restored stock scheduler", func(h string) bool { return h != releaseHolder })
		if !stock.Running() {
			t.Fatalf("the restored stock scheduler exited; log %s", stock.LogPath())
		}
	} else {
		l.helm("uninstall", helmRelease, "--wait", "--timeout", "50s")
		l.sched.Stop()
	}
	// Whatever the mode, the stock scheduler still schedules the cluster's pods.
	if _, err := c.CoreV1().Pods(s.ns).Create(ctx, harness.GPUPod(s.ns, "plain-uninstalled", 0, harness.Baseline), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := 1
	if single {
		want = 2
	}
	waitPlainRunning(t, s, want)
	// Nothing of the release is left, the cluster-scoped objects included.
	for _, gone := range []struct {
		what string
		get  func() error
	}{
		{"ClusterRole " + helmRelease, func() error {
			_, err := c.RbacV1().ClusterRoles().Get(ctx, helmRelease, metav1.GetOptions{})
			return err
		}},
		{"ClusterRole cdplace-viewer", func() error {
			_, err := c.RbacV1().ClusterRoles().Get(ctx, "cdplace-viewer", metav1.GetOptions{})
			return err
		}},
		{"FlowSchema " + helmRelease + "-" + l.ns, func() error {
			_, err := c.FlowcontrolV1().FlowSchemas().Get(ctx, helmRelease+"-"+l.ns, metav1.GetOptions{})
			return err
		}},
		{"kube-system RoleBinding", func() error {
			_, err := c.RbacV1().RoleBindings("kube-system").Get(ctx, helmRelease+"-"+l.ns+"-authentication-reader", metav1.GetOptions{})
			return err
		}},
	} {
		if err := gone.get(); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %s: %v; want NotFound", gone.what, err)
		}
	}
	// Nothing new in kube-system or among the cluster-scoped objects: the release wrote only
	// what uninstall removes (the stock scheduler's lease was there before it, and stays).
	after := kubeSystemAndClusterObjects(t)
	for k := range after {
		// The stock scheduler's lease: the test started the stock scheduler after looking.
		stockLease := k == "Lease/kube-system/kube-scheduler"
		if !before[k] && !stockLease && !strings.HasPrefix(k, "Namespace//"+l.ns) && !strings.HasPrefix(k, "Namespace//"+s.ns) {
			t.Errorf("after helm uninstall, %s is left (it was not there before the install)", k)
		}
	}
}

// kubeSystemAndClusterObjects names every object in kube-system and every cluster-scoped
// object, as kind/namespace/name, over every listable resource the API server serves, but
// Events (they expire on their own) and the simulated fleet's Nodes and ResourceSlices.
func kubeSystemAndClusterObjects(t *testing.T) map[string]bool {
	t.Helper()
	ctx := context.Background()
	lists, err := env.CP.Client.Discovery().ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list.APIResources {
			if !slices.Contains(r.Verbs, "list") || r.Kind == "Event" || strings.Contains(r.Name, "/") {
				continue
			}
			res := env.CP.Dynamic.Resource(gv.WithResource(r.Name))
			var objs *unstructured.UnstructuredList
			if r.Namespaced {
				objs, err = res.Namespace("kube-system").List(ctx, metav1.ListOptions{})
			} else {
				objs, err = res.List(ctx, metav1.ListOptions{})
			}
			if err != nil {
				continue // a kind that cannot be listed here (e.g. a virtual resource)
			}
			for _, o := range objs.Items {
				if !r.Namespaced && (r.Kind == "Node" || r.Kind == "ResourceSlice" || r.Kind == "IPAddress") {
					continue // the scenario's simulated fleet; ClusterIP bookkeeping, released on its own
				}
				out[r.Kind+"/"+o.GetNamespace()+"/"+o.GetName()] = true
			}
		}
	}
	return out
}
