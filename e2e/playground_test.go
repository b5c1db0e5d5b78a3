package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cdplace/cdplace/e2e/harness"
)

// TestPlayground runs cdplace-playground as `make playground` does (a small fleet), waits for its
// `export KUBECONFIG=` line, runs a Job of a ComputeDomain through the API with that kubeconfig,
// deletes the namespace (the namespace controller must finish it), kills the scheduler (the
// playground must say so and start it again after the kubelet's first back-off), runs another
// ComputeDomain Job through the restarted scheduler, then sends SIGTERM and checks that every
// process the playground started is gone and its temporary directory removed.
func TestPlayground(t *testing.T) {
	bin := os.Getenv("CDPLACE_PLAYGROUND_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "cdplace-playground")
		build := exec.Command("go", "build", "-o", bin, "./cmd/cdplace-playground")
		build.Dir = filepath.Join(repoRoot, "e2e")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the playground: %v\n%s", err, out)
		}
	}
	tmp := t.TempDir() // the playground's TMPDIR: empty again once it has cleaned up
	stderrPath := filepath.Join(t.TempDir(), "playground.stderr")
	stderr, err := os.Create(stderrPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	// An extra manifest, as a user gives a Role and ConfigMap for a policy: applied before the
	// scheduler starts.
	manifest := filepath.Join(t.TempDir(), "extra.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: playground-extra, namespace: cdplace-system}\ndata: {a: b}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-repo", repoRoot, "-racks", "2", "-trays", "4", "-manifest", manifest)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			out, _ := os.ReadFile(stderrPath)
			t.Logf("playground stderr:\n%s", out)
		}
	}()

	var export, hint string
	deadline := time.After(3 * time.Minute)
	for export == "" || hint == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("playground exited before printing its kubeconfig (%v)", <-exited)
			}
			switch {
			case strings.HasPrefix(l, "export KUBECONFIG="):
				export = strings.TrimPrefix(l, "export KUBECONFIG=")
			case strings.HasPrefix(l, "# "):
				hint = l
			default:
				t.Errorf("unexpected line on the playground's stdout: %q", l)
			}
		case <-deadline:
			t.Fatal("no `export KUBECONFIG=` line from the playground in 3 minutes")
		}
	}
	if !strings.HasPrefix(export, tmp+string(os.PathSeparator)) {
		t.Errorf("kubeconfig %s is not in the playground's temporary directory under %s", export, tmp)
	}
	children := childProcesses(t, cmd.Process.Pid)
	// Command names as /proc has them: at most 15 bytes of the file name.
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller", "kube-scheduler"} {
		found := false
		for _, p := range children {
			found = found || strings.HasPrefix(p.comm, want)
		}
		if !found {
			t.Errorf("no %s among the playground's processes %v", want, children)
		}
	}

	playgroundManifestApplied(t, export)
	runJobThroughPlayground(t, export, "try")

	// The scheduler crashes: the playground tells it and starts it again after the kubelet's
	// first back-off (10 s), and a ComputeDomain Job submitted after goes through the new one.
	var sched proc
	for _, p := range children {
		if strings.HasPrefix(p.comm, "kube-scheduler") {
			sched = p
		}
	}
	if sched.pid == 0 {
		t.Fatalf("no kube-scheduler among the playground's processes %v", children)
	}
	if err := syscall.Kill(sched.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	exitLine := regexp.MustCompile(`^==> kube-scheduler computedomain-scheduler exited \(signal: killed\) after running \S+; restart 1 in 10s, at \d\d:\d\d:\d\d \(log: .+computedomain-scheduler\.log\)$`)
	backLine := "==> kube-scheduler computedomain-scheduler is running again (restart 1)"
	var told []string
	if !poll(2*time.Minute, func() bool {
		out, _ := os.ReadFile(stderrPath)
		told = nil
		for _, l := range strings.Split(string(out), "\n") {
			if exitLine.MatchString(l) || l == backLine {
				told = append(told, l)
			}
		}
		return len(told) == 2
	}) {
		out, _ := os.ReadFile(stderrPath)
		t.Fatalf("the playground did not tell the scheduler's exit and restart (want a line like %q, then %q):\n%s", exitLine, backLine, out)
	}
	t.Logf("%v after the kill, the playground said:\n%s", time.Since(killed).Round(time.Second), strings.Join(told, "\n"))
	if back := time.Since(killed); back < 10*time.Second {
		t.Errorf("restarted %v after the kill; the back-off is 10s", back)
	}
	var restarted []proc
	for _, p := range childProcesses(t, cmd.Process.Pid) {
		if strings.HasPrefix(p.comm, "kube-scheduler") {
			restarted = append(restarted, p)
		}
	}
	if len(restarted) != 1 || restarted[0].pid == sched.pid {
		t.Fatalf("kube-scheduler processes after the restart: %v (killed: %v)", restarted, sched)
	}
	children = append(children, restarted...)
	runJobThroughPlayground(t, export, "after-restart")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("playground exited with %v after SIGTERM; want 0", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("playground still running 90s after SIGTERM")
	}
	for _, p := range children {
		if p.alive() {
			t.Errorf("%s (pid %d) is still there after the playground exited", p.comm, p.pid)
		}
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("playground left %s behind", filepath.Join(tmp, e.Name()))
	}
}

// playgroundManifestApplied checks that the -manifest object was created before the cdplace
// scheduler started (its lease, taken once it runs, is younger).
func playgroundManifestApplied(t *testing.T, kubeconfig string) {
	t.Helper()
	c := kubernetes.NewForConfigOrDie(must(clientcmd.BuildConfigFromFlags("", kubeconfig)))
	cm, err := c.CoreV1().ConfigMaps("cdplace-system").Get(t.Context(), "playground-extra", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the -manifest ConfigMap: %v", err)
	}
	var leaseAt time.Time
	waitUntil(t, 60*time.Second, "the cdplace scheduler's lease", func() bool {
		leases, err := c.CoordinationV1().Leases("").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, l := range leases.Items {
			if strings.Contains(l.Name, "computedomain-scheduler") || strings.Contains(l.Name, "kube-scheduler") {
				leaseAt = l.CreationTimestamp.Time
				return true
			}
		}
		return false
	})
	if cm.CreationTimestamp.After(leaseAt) {
		t.Errorf("the -manifest ConfigMap was created at %v, after the scheduler's lease (%v)", cm.CreationTimestamp, leaseAt)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// runJobThroughPlayground uses the playground as a user would: the Workload API is served, and a
// ComputeDomain with a 4-pod Job runs in one clique, in namespace ns; then `kubectl delete
// namespace` finishes.
func runJobThroughPlayground(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: harness.CliqueLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 8 {
		t.Errorf("%d nodes with a clique label; want 8 (2 racks x 4 trays)", len(nodes.Items))
	}
	res, err := discovery.NewDiscoveryClientForConfigOrDie(cfg).ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
	served := false
	if err == nil {
		for _, r := range res.APIResources {
			served = served || r.Name == "podgroups"
		}
	}
	if !served {
		t.Errorf("the playground does not serve PodGroups (scheduling.k8s.io/v1beta1): %v", err)
	}

	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(harness.ComputeDomainGVR).Namespace(ns).Create(ctx, harness.ComputeDomain(ns, "trainer", 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := harness.DomainJob(ns, "trainer", "trainer", harness.JobSpec{Parallelism: 4, Completions: 4, GPUs: 4}, harness.Cdplace)
	if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cliqueOf := map[string]string{}
	for _, n := range nodes.Items {
		cliqueOf[n.Name] = n.Labels[harness.CliqueLabel]
	}
	var last string
	if !poll(90*time.Second, func() bool {
		d, err := harness.Domains(ctx, c, ns, cliqueOf)
		if err != nil {
			last = err.Error()
			return false
		}
		last = harness.Summary(d)
		st := d["trainer"]
		return st != nil && st.Pods == 4 && st.Running == 4 && len(st.Cliques) == 1
	}) {
		t.Fatalf("the Job's 4 pods did not run in one clique of the playground:\n%s", last)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if !poll(90*time.Second, func() bool {
		_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}) {
		t.Errorf("namespace %s still there 90s after its deletion", ns)
	}
}

func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
	return true
}

// proc is a process seen in /proc: its pid, command name and start time (which tells it from a
// later process that reuses the pid).
type proc struct {
	pid   int
	comm  string
	start string
}

func (p proc) String() string { return fmt.Sprintf("%s[%d]", p.comm, p.pid) }

// alive is true while the process exists, also as a zombie nobody reaped.
func (p proc) alive() bool {
	q, err := readProc(p.pid)
	return err == nil && q.start == p.start
}

// childProcesses lists the direct children of pid.
func childProcesses(t *testing.T, pid int) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []proc
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if ppid, err := statField(string(data), 4); err == nil && ppid == strconv.Itoa(pid) {
			if p, err := readProc(n); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

func readProc(pid int) (proc, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, err
	}
	s := string(data)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return proc{}, errors.New("malformed /proc stat")
	}
	start, err := statField(s, 22)
	if err != nil {
		return proc{}, err
	}
	return proc{pid: pid, comm: s[open+1 : closing], start: start}, nil
}

// statField is field n (1-based, as proc(5) numbers them) of a /proc/<pid>/stat line.
func statField(stat string, n int) (string, error) {
	closing := strings.LastIndexByte(stat, ')')
	if closing < 0 {
		return "", errors.New("malformed /proc stat")
	}
	fields := strings.Fields(stat[closing+1:]) // fields 3...
	if n-3 >= len(fields) || n < 3 {
		return "", fmt.Errorf("/proc stat has no field %d", n)
	}
	return fields[n-3], nil
}
