package e2e

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// cliBinary is target/release/<name> (`make build` writes cdplace and kubectl-cdplace).
func cliBinary(t *testing.T, name string) string {
	t.Helper()
	bin := filepath.Join(repoRoot, "target", "release", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make build` first", bin)
	}
	return bin
}

// cliRun is one run of the CLI.
type cliRun struct {
	stdout, stderr string
	code           int
}

// runCLI runs bin in dir with env added to this process's environment.
func runCLI(t *testing.T, bin, dir string, env []string, args ...string) cliRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %s: %v", bin, strings.Join(args, " "), err)
	}
	return cliRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// mustRun is runCLI that fails the test unless the command exits 0 with nothing on stderr.
func mustRun(t *testing.T, bin, dir string, env []string, args ...string) string {
	t.Helper()
	r := runCLI(t, bin, dir, env, args...)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%s %s: exit %d\nstderr: %s\nstdout: %s", filepath.Base(bin), strings.Join(args, " "), r.code, r.stderr, r.stdout)
	}
	return r.stdout
}

// runCdplace runs target/release/cdplace and returns its stdout; it fails the test unless the
// command exits 0 with nothing on stderr.
func runCdplace(t *testing.T, args ...string) string {
	t.Helper()
	return mustRun(t, cliBinary(t, "cdplace"), "", nil, args...)
}

// TestCLIStatusAndExplainLive runs `cdplace status` and `cdplace explain` against the live
// control plane through its kubeconfig: an unannotated Job-backed ComputeDomain of 6 trays
// runs, and the map shows its 6 trays in one clique; a 37-pod Job-backed domain on two 18-tray
// cliques (more than the fleet holds, even across cliques) waits, and both commands give the size the Job sets and the scheduler's own reason.
// Then, on the same cluster, the kubectl plugin copied alone into a directory of its own
// (KubectlPluginAlone), and run as a ServiceAccount bound only to the viewer role (ViewerRole).
func TestCLIStatusAndExplainLive(t *testing.T) {
	s := newScenario(t, "cli", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	s.domain("six", 6, 4)
	d := s.waitFor("six running", 60*time.Second, all("six", 6))
	if len(d["six"].Cliques) != 1 {
		t.Fatalf("six should run in one clique: %s", d["six"])
	}
	home := d["six"].Cliques[0]
	s.domain("big", 37, 4)

	// Wait until the scheduler has tried every pod of big, so the map and explain see them all.
	var pending corev1.Pod
	deadline := time.Now().Add(60 * time.Second)
	for {
		pods, err := env.CP.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "job-name=big"})
		if err != nil {
			t.Fatal(err)
		}
		tried := 0
		for _, p := range pods.Items {
			if harness.PendingReason(&p) != "" {
				tried++
				pending = p
			}
		}
		if len(pods.Items) == 37 && tried == 37 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("big: %d pods, %d tried by the scheduler", len(pods.Items), tried)
		}
		time.Sleep(250 * time.Millisecond)
	}
	kubeconfig := env.CP.AdminKubeconfig
	wantSize := "size 37 from Job " + s.ns + "/big spec.parallelism"

	// The text map: six's letter appears 6 times, all in the row of its clique.
	text := runCdplace(t, "status", "-A", "--kubeconfig", kubeconfig)
	t.Logf("cdplace status:\n%s", text)
	for i, line := range strings.Split(text, "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns wide (at most 100): %q", i+1, n, line)
		}
	}
	legend := regexp.MustCompile(`(?m)^  (\S)  ` + regexp.QuoteMeta(s.ns+"/six") + ` `).FindStringSubmatch(text)
	if legend == nil {
		t.Fatalf("no legend line for %s/six", s.ns)
	}
	letter := legend[1]
	rows := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasSuffix(line, " free") {
			continue
		}
		fields := strings.Fields(line)
		for _, cell := range fields[1:] {
			if strings.HasPrefix(cell, letter) && len(cell) <= 2 {
				rows[fields[0]]++
			}
		}
	}
	if len(rows) != 1 {
		t.Errorf("six's trays should be in one clique row of the map, got %v", rows)
	}
	for _, n := range rows {
		if n != 6 {
			t.Errorf("six should hold 6 trays on the map, got %d", n)
		}
	}
	if !strings.Contains(text, s.ns+"/big: 37 of 37 pod(s) pending, "+wantSize) {
		t.Errorf("the map should list big as pending with %q", wantSize)
	}

	// The SVG map: one rect per tray, and six's are exactly its 6 nodes, in its clique.
	svg := runCdplace(t, "status", "-A", "--kubeconfig", kubeconfig, "--output", "svg")
	var doc struct {
		Rects []struct {
			Class string `xml:"class,attr"`
			Title string `xml:"title"`
		} `xml:"rect"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("the SVG map does not parse: %v", err)
	}
	trays, sixNodes := 0, map[string]bool{}
	for _, r := range doc.Rects {
		if r.Class != "tray" {
			continue
		}
		trays++
		node, holder, _ := strings.Cut(r.Title, ": ")
		if strings.HasPrefix(holder, s.ns+"/six") {
			sixNodes[node] = true
		}
	}
	if trays < len(s.fleet.CliqueOf) {
		t.Errorf("the SVG map has %d trays, the fleet alone %d", trays, len(s.fleet.CliqueOf))
	}
	if len(sixNodes) != 6 {
		t.Errorf("six should hold 6 trays in the SVG, got %v", sixNodes)
	}
	for n := range sixNodes {
		if s.fleet.CliqueOf[n] != home {
			t.Errorf("tray %s of six is in clique %s, six runs in %s", n, s.fleet.CliqueOf[n], home)
		}
	}

	// explain for a pod of the pending domain: the size from its Job, and the reason the
	// scheduler gave the pod.
	report := runCdplace(t, "explain", pending.Name, "-n", s.ns, "--kubeconfig", kubeconfig, "--context", "e2e")
	t.Logf("cdplace explain:\n%s", report)
	m := regexp.MustCompile(`(?m)^PreFilter: +(\w+): (.*)$`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("explain gives no PreFilter reason")
	}
	if m[1] != "UnschedulableAndUnresolvable" || !strings.Contains(m[2], "needs 37 trays ("+wantSize+"), more than one NVLink clique holds") {
		t.Errorf("explain should say big needs 37 trays (%s), got %s: %s", wantSize, m[1], m[2])
	}
	if scheduler := harness.PendingReason(&pending); !strings.Contains(scheduler, m[2]) {
		t.Errorf("explain's reason is not the scheduler's:\n explain:   %s\n scheduler: %s", m[2], scheduler)
	}

	live := cliLive{s: s, pending: pending.Name, reason: m[2], wantSize: wantSize, home: home}
	t.Run("KubectlPluginAlone", live.testPluginAlone)
	t.Run("ViewerRole", live.testViewerRole)
}

// cliLive is the cluster TestCLIStatusAndExplainLive builds, which its subtests read: six runs in
// clique home, big (37 pods, its size from its Job) waits; pending is a pod of big and reason the
// policy's reason for it.
type cliLive struct {
	s                               *scenario
	pending, reason, wantSize, home string
}

// explanation is the part of `kubectl cdplace explain -o json|yaml` (kind Explanation) read here.
type explanation struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Pod        struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"pod"`
	ComputeDomain *struct {
		UID       string `json:"uid"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Pods      []struct {
			Name  string  `json:"name"`
			State string  `json:"state"`
			Node  *string `json:"node"`
		} `json:"pods"`
	} `json:"computeDomain"`
	PreFilter struct {
		Code   string `json:"code"`
		Reason string `json:"reason"`
	} `json:"preFilter"`
	Nodes []struct {
		Name string `json:"name"`
	} `json:"nodes"`
	Selected *string `json:"selected"`
}

// fleetStatus is the part of `kubectl cdplace status -o json|yaml` (kind FleetStatus) read here.
type fleetStatus struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Namespace  *string `json:"namespace"`
	Summary    struct {
		Trays          int `json:"trays"`
		ComputeDomains int `json:"computeDomains"`
	} `json:"summary"`
	Cliques []struct {
		Clique *string `json:"clique"`
		Trays  []struct {
			Node          string `json:"node"`
			Holder        string `json:"holder"`
			ComputeDomain *struct {
				Namespace *string `json:"namespace"`
				Name      *string `json:"name"`
			} `json:"computeDomain"`
		} `json:"trays"`
	} `json:"cliques"`
	ComputeDomains []struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		State     string `json:"state"`
		Pods      int    `json:"pods"`
		Pending   int    `json:"pending"`
		Trays     int    `json:"trays"`
		Wait      *struct {
			Code       string `json:"code"`
			Size       *int   `json:"size"`
			SizeSource string `json:"sizeSource"`
		} `json:"wait"`
	} `json:"computeDomains"`
}

// decodeStrict decodes JSON or YAML (sigs.k8s.io/yaml reads both) into out, failing the test on
// anything that does not parse.
func decodeStrict(t *testing.T, what, doc string, out any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(doc), out); err != nil {
		t.Fatalf("%s does not parse: %v\n%s", what, err, doc)
	}
}

// checkFleet checks a FleetStatus of every namespace, or of the scenario's: six placed on its 6
// trays of one clique, big pending with the size its Job gives.
func (l cliLive) checkFleet(t *testing.T, st fleetStatus, namespace *string) {
	t.Helper()
	if st.APIVersion != "cdplace.nvidia.com/v1alpha1" || st.Kind != "FleetStatus" {
		t.Errorf("status is %s %s, want cdplace.nvidia.com/v1alpha1 FleetStatus", st.APIVersion, st.Kind)
	}
	if (st.Namespace == nil) != (namespace == nil) || (namespace != nil && *st.Namespace != *namespace) {
		t.Errorf("status lists namespace %v, want %v", st.Namespace, namespace)
	}
	found := map[string]bool{}
	for _, d := range st.ComputeDomains {
		if namespace != nil && d.Namespace != *namespace {
			t.Errorf("status -n %s lists %s/%s", *namespace, d.Namespace, d.Name)
		}
		if d.Namespace != l.s.ns {
			continue
		}
		found[d.Name] = true
		switch d.Name {
		case "six":
			if d.State != "Placed" || d.Pods != 6 || d.Trays != 6 {
				t.Errorf("six: %+v, want Placed with 6 pods on 6 trays", d)
			}
		case "big":
			if d.State != "Pending" || d.Pending != 37 || d.Wait == nil || d.Wait.Size == nil || *d.Wait.Size != 37 ||
				d.Wait.SizeSource != "Job "+l.s.ns+"/big spec.parallelism" || d.Wait.Code != "UnschedulableAndUnresolvable" {
				t.Errorf("big: %+v (wait %+v), want Pending, 37 pending, size 37 from its Job", d, d.Wait)
			}
		}
	}
	if !found["six"] || !found["big"] {
		t.Errorf("status lists %v of %s, want six and big", found, l.s.ns)
	}
	sixTrays := 0
	for _, c := range st.Cliques {
		for _, tr := range c.Trays {
			if tr.ComputeDomain != nil && tr.ComputeDomain.Name != nil && *tr.ComputeDomain.Name == "six" &&
				tr.ComputeDomain.Namespace != nil && *tr.ComputeDomain.Namespace == l.s.ns {
				sixTrays++
				if c.Clique == nil || *c.Clique != l.home {
					t.Errorf("tray %s of six is in clique %v, six runs in %s", tr.Node, c.Clique, l.home)
				}
			}
		}
	}
	if sixTrays != 6 {
		t.Errorf("six holds %d trays in the status document, want 6", sixTrays)
	}
}

// testPluginAlone is what a kubectl user does: kubectl-cdplace copied alone into a directory of
// its own (the policy component is embedded), the cluster from $KUBECONFIG, kubectl's flags.
func (l cliLive) testPluginAlone(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-cdplace")
	data, err := os.ReadFile(cliBinary(t, "kubectl-cdplace"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// HOME has no ~/.kube/config: only $KUBECONFIG names the cluster.
	admin := []string{"KUBECONFIG=" + env.CP.AdminKubeconfig, "HOME=" + dir}

	// `kubectl cdplace explain POD -n NS -o yaml`.
	var ex explanation
	decodeStrict(t, "explain -o yaml", mustRun(t, bin, dir, admin, "explain", l.pending, "-n", l.s.ns, "-o", "yaml"), &ex)
	if ex.APIVersion != "cdplace.nvidia.com/v1alpha1" || ex.Kind != "Explanation" {
		t.Errorf("explain is %s %s, want cdplace.nvidia.com/v1alpha1 Explanation", ex.APIVersion, ex.Kind)
	}
	if ex.Pod.Namespace != l.s.ns || ex.Pod.Name != l.pending {
		t.Errorf("explain explains %+v, want %s/%s", ex.Pod, l.s.ns, l.pending)
	}
	if ex.ComputeDomain == nil || ex.ComputeDomain.Namespace != l.s.ns || ex.ComputeDomain.Name != "big" {
		t.Errorf("explain gives ComputeDomain %+v, want %s/big", ex.ComputeDomain, l.s.ns)
	}
	if ex.PreFilter.Code != "UnschedulableAndUnresolvable" || ex.PreFilter.Reason != l.reason {
		t.Errorf("explain -o yaml says %s: %s; the text report said %s", ex.PreFilter.Code, ex.PreFilter.Reason, l.reason)
	}
	if len(ex.Nodes) < len(l.s.fleet.CliqueOf) || ex.Selected != nil {
		t.Errorf("explain -o yaml: %d nodes (the fleet has %d), selected %v (want none)", len(ex.Nodes), len(l.s.fleet.CliqueOf), ex.Selected)
	}

	// The kubeconfig context's namespace stands in for -n, as in kubectl.
	cfg, err := clientcmd.LoadFromFile(env.CP.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = l.s.ns
	namespaced := filepath.Join(dir, "namespaced.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, namespaced); err != nil {
		t.Fatal(err)
	}
	inNS := []string{"KUBECONFIG=" + namespaced, "HOME=" + dir}
	var cd explanation
	decodeStrict(t, "explain cd/big -o json", mustRun(t, bin, dir, inNS, "explain", "cd/big", "-o", "json"), &cd)
	if cd.ComputeDomain == nil || cd.ComputeDomain.Name != "big" || len(cd.ComputeDomain.Pods) != 37 {
		t.Fatalf("explain cd/big: ComputeDomain %+v, want big with its 37 pods", cd.ComputeDomain)
	}
	for _, p := range cd.ComputeDomain.Pods {
		if p.State != "Pending" || p.Node != nil {
			t.Errorf("explain cd/big: pod %s is %s on %v, want Pending", p.Name, p.State, p.Node)
		}
	}
	if first := cd.ComputeDomain.Pods[0].Name; cd.Pod.Name != first || cd.PreFilter.Reason != l.reason {
		t.Errorf("explain cd/big explains %s (%s), want its first pending pod %s with the reason %s", cd.Pod.Name, cd.PreFilter.Reason, first, l.reason)
	}

	// `kubectl cdplace status -o json` parses; it lists the context's namespace, -A every one.
	var st fleetStatus
	decodeStrict(t, "status -o json", mustRun(t, bin, dir, inNS, "status", "-o", "json"), &st)
	l.checkFleet(t, st, &l.s.ns)
	var all fleetStatus
	decodeStrict(t, "status -A -o yaml", mustRun(t, bin, dir, admin, "status", "-A", "-o", "yaml"), &all)
	l.checkFleet(t, all, nil)

	// Errors: a pod that is not there (1), bad usage (2).
	r := runCLI(t, bin, dir, admin, "explain", "nope", "-n", l.s.ns)
	want := fmt.Sprintf(`cdplace explain: pod "nope" not found in namespace %q (source: %s)`+"\n", l.s.ns, env.CP.URL)
	if r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("explain nope: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	if r := runCLI(t, bin, dir, admin, "explain", "node/x"); r.code != 2 || !strings.Contains(r.stderr, "cannot explain a \"node\"") {
		t.Errorf("explain node/x: exit %d, stderr %q; want exit 2 naming the type", r.code, r.stderr)
	}
	if r := runCLI(t, bin, dir, []string{"KUBECONFIG=" + filepath.Join(dir, "absent")}, "status"); r.code != 2 ||
		!strings.Contains(r.stderr, "cannot use the kubeconfig") {
		t.Errorf("status with a missing kubeconfig: exit %d, stderr %q; want exit 2", r.code, r.stderr)
	}
}

// testViewerRole runs the plugin as a ServiceAccount bound only to the rules of
// kube-scheduler-config/deploy/viewer-rbac.yaml (as a ClusterRole of this test's own name): it
// reads everything it needs. With the pods rule taken out it fails, exit 1, naming what it was
// refused.
func (l cliLive) testViewerRole(t *testing.T) {
	ctx := l.s.ctx
	raw, err := os.ReadFile(filepath.Join(repoRoot, "kube-scheduler-config", "deploy", "viewer-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(raw, &shipped); err != nil {
		t.Fatalf("viewer-rbac.yaml: %v", err)
	}
	if shipped.Name != "cdplace-viewer" {
		t.Fatalf("viewer-rbac.yaml names the ClusterRole %q, want cdplace-viewer", shipped.Name)
	}
	withoutPods := shipped.DeepCopy()
	removed := false
	for i, rule := range withoutPods.Rules {
		if slices.Equal(rule.APIGroups, []string{""}) && slices.Contains(rule.Resources, "pods") {
			withoutPods.Rules[i].Resources = slices.DeleteFunc(slices.Clone(rule.Resources), func(r string) bool { return r == "pods" })
			removed = true
		}
	}
	if !removed {
		t.Fatal("viewer-rbac.yaml has no rule for pods")
	}
	bin := cliBinary(t, "kubectl-cdplace")
	kubeconfigFor := func(name string, role *rbacv1.ClusterRole) string {
		c := env.CP.Client
		role = role.DeepCopy()
		role.Name = name + "-" + l.s.ns
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.s.ns}}
		if _, err := c.CoreV1().ServiceAccounts(l.s.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: l.s.ns}},
		}
		if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		})
		token, err := env.CP.ServiceAccountToken(ctx, l.s.ns, name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name+".kubeconfig")
		if err := env.CP.WriteKubeconfig(path, token); err != nil {
			t.Fatal(err)
		}
		return path
	}
	viewer := kubeconfigFor("viewer", &shipped)
	nopods := kubeconfigFor("viewer-nopods", withoutPods)

	// The authorizer learns of new bindings through its informers: retry a refusal for a while.
	var st fleetStatus
	var r cliRun
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		r = runCLI(t, bin, "", nil, "status", "-A", "-o", "json", "--kubeconfig", viewer)
		if r.code == 0 || !strings.Contains(r.stderr, "forbidden") || time.Now().After(deadline) {
			break
		}
	}
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("status as the viewer: exit %d\nstderr: %s", r.code, r.stderr)
	}
	decodeStrict(t, "status as the viewer", r.stdout, &st)
	l.checkFleet(t, st, nil)
	var ex explanation
	decodeStrict(t, "explain as the viewer", mustRun(t, bin, "", nil, "explain", l.pending, "-n", l.s.ns, "-o", "json", "--kubeconfig", viewer), &ex)
	if ex.PreFilter.Reason != l.reason {
		t.Errorf("explain as the viewer says %q, as the admin %q", ex.PreFilter.Reason, l.reason)
	}

	// The viewer reads the Events of `status --shadow` too (none here: no shadow policy runs).
	r = runCLI(t, bin, "", nil, "status", "--shadow", "-A", "-o", "json", "--kubeconfig", viewer)
	var rep struct{ Kind string }
	if r.code != 0 || r.stderr != "" {
		t.Errorf("status --shadow as the viewer: exit %d\nstderr: %s", r.code, r.stderr)
	} else if decodeStrict(t, "status --shadow as the viewer", r.stdout, &rep); rep.Kind != "ShadowReport" {
		t.Errorf("status --shadow as the viewer is a %q, want ShadowReport", rep.Kind)
	}

	// Without the pods rule: refused on pods (the resource listed last), once the binding is seen.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		r = runCLI(t, bin, "", nil, "status", "-A", "--kubeconfig", nopods)
		if strings.Contains(r.stderr, "listing pods") || r.code == 0 || time.Now().After(deadline) {
			break
		}
	}
	want := fmt.Sprintf(`cdplace status: %s: listing pods: pods is forbidden: User "system:serviceaccount:%s:viewer-nopods" cannot list resource "pods" in API group "" at the cluster scope`, env.CP.URL, l.s.ns)
	if r.code != 1 || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "cdplace-viewer ClusterRole") {
		t.Errorf("status without the pods rule: exit %d, stderr %q; want exit 1 and %q... naming the cdplace-viewer ClusterRole", r.code, r.stderr, want)
	}
}
