package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// Our kube-scheduler is upstream's plus the plugin: these tests hold it against a stock
// kube-scheduler built from the same pinned k8s.io/kubernetes module (`make e2e-binaries` builds
// target/e2e/bin/kube-scheduler-stock), and check that every copy of cdplace's version agrees
// with its one owner, Cargo.toml's [workspace.package] version.

// stockScheduler is the path of upstream's kube-scheduler build.
func stockScheduler(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CDPLACE_E2E_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, "target", "e2e", "bin")
	}
	bin := filepath.Join(dir, "kube-scheduler-stock")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make e2e-binaries` first", bin)
	}
	return bin
}

// output runs a command and returns its stdout; it fails the test unless the command exits 0.
func output(t *testing.T, dir, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr: %s", bin, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestVersionCopiesAgree: Cargo.toml's [workspace.package] version (every crate inherits it), the
// chart's version and appVersion, the shipped Deployment's image tag, the cdplace CLI and the
// version `make scheduler` stamps into kube-scheduler (v<pinned Kubernetes>-cdplace.<ours>,
// with the commit and the last commit's time) all say the same version.
func TestVersionCopiesAgree(t *testing.T) {
	var meta struct {
		Packages []struct{ Name, Version string }
	}
	raw := output(t, repoRoot, "cargo", "metadata", "--no-deps", "--offline", "--format-version", "1")
	if err := json.Unmarshal([]byte(raw), &meta); err != nil {
		t.Fatalf("cargo metadata: %v", err)
	}
	if len(meta.Packages) == 0 {
		t.Fatal("cargo metadata lists no packages")
	}
	version := meta.Packages[0].Version
	for _, p := range meta.Packages {
		if p.Version != version {
			t.Errorf("crate %s is version %s, %s is %s: every crate takes [workspace.package] version",
				p.Name, p.Version, meta.Packages[0].Name, version)
		}
	}
	if !regexp.MustCompile(`^0\.37\.\d+$`).MatchString(version) {
		t.Errorf("cdplace version %s; want 0.37.x, one cdplace minor per Kubernetes minor (1.37)", version)
	}
	t.Logf("cdplace version (Cargo.toml [workspace.package]): %s", version)

	chartRaw, err := readRepoFile("kube-scheduler-config", "chart", "cdplace-scheduler", "Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chartRaw, &chart); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	// appVersion is the binaries' version; the chart's own version moves whenever the chart does
	// (Helm's rule, held by docscheck's released.lock test), so it may run ahead of the binaries
	// within the same minor, never behind them.
	if chart.AppVersion != "v"+version {
		t.Errorf("Chart.yaml appVersion %q; want %q", chart.AppVersion, "v"+version)
	}
	if m := regexp.MustCompile(`^0\.37\.(\d+)$`).FindStringSubmatch(chart.Version); m == nil ||
		len(m[1]) < len(strings.TrimPrefix(version, "0.37.")) ||
		(len(m[1]) == len(strings.TrimPrefix(version, "0.37.")) && m[1] < strings.TrimPrefix(version, "0.37.")) {
		t.Errorf("Chart.yaml version %q; want 0.37.x at or past the binaries' %s", chart.Version, version)
	}
	deployRaw, err := readRepoFile("kube-scheduler-config", "deploy", "deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(string(deployRaw), -1)
	if len(images) != 1 || images[0][1] != "ghcr.io/cdplace/kube-scheduler:v"+version {
		t.Errorf("deploy/deployment.yaml images %v; want ghcr.io/cdplace/kube-scheduler:v%s", images, version)
	}
	if cli := filepath.Join(repoRoot, "target", "release", "cdplace"); fileExists(cli) {
		if got := strings.TrimSpace(output(t, repoRoot, cli, "--version")); got != "cdplace "+version {
			t.Errorf("cdplace --version: %q; want %q", got, "cdplace "+version)
		}
	}

	kube := strings.TrimSpace(output(t, filepath.Join(repoRoot, "host-shim", "go"), "go", "list", "-m", "-f", "{{.Version}}", "k8s.io/kubernetes"))
	want := kube + "-cdplace." + version
	if got := strings.TrimSpace(output(t, repoRoot, env.CP.Bin.Scheduler, "--version")); got != "Kubernetes "+want {
		t.Errorf("kube-scheduler --version: %q; want %q (make scheduler stamps it)", got, "Kubernetes "+want)
	}
	if got := strings.TrimSpace(output(t, repoRoot, stockScheduler(t), "--version")); got != "Kubernetes "+kube {
		t.Errorf("stock kube-scheduler --version: %q; want %q", got, "Kubernetes "+kube)
	}
	// --version=raw prints version.Info as Go syntax; the build stamps every field.
	info := output(t, repoRoot, env.CP.Bin.Scheduler, "--version=raw")
	major, minor, _ := strings.Cut(strings.TrimPrefix(kube, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	for _, re := range []string{
		`Major:"` + major + `"`, `Minor:"` + minor + `"`, `GitVersion:"` + regexp.QuoteMeta(want) + `"`,
		`GitCommit:"[0-9a-f]{40}"`, `GitTreeState:"(clean|dirty)"`,
		`BuildDate:"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ"`,
	} {
		if !regexp.MustCompile(re).MatchString(info) {
			t.Errorf("kube-scheduler --version=raw lacks %s:\n%s", re, info)
		}
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// flagPattern starts a flag's entry in kube-scheduler --help: "      --name type" or "  -v, --v Level".
var flagPattern = regexp.MustCompile(`^\s+(?:-\w, )?--([A-Za-z0-9-]+)`)

// helpFlags maps each flag of a kube-scheduler --help to its entry (the flag line and its
// description, which names the permitted values, e.g. --logging-format's "json"), its spaces
// collapsed (a section's columns are as wide as its longest flag).
func helpFlags(help string) map[string]string {
	flags := map[string]string{}
	var name string
	for _, line := range strings.Split(help, "\n") {
		if m := flagPattern.FindStringSubmatch(line); m != nil {
			name = m[1]
			flags[name] = strings.Join(strings.Fields(line), " ")
			continue
		}
		if line == "" || !strings.HasPrefix(line, " ") {
			name = "" // a section header or the blank line before it
			continue
		}
		if name != "" {
			flags[name] += " " + strings.Join(strings.Fields(line), " ")
		}
	}
	return flags
}

// TestSchedulerIsStockPlusPlugin: our kube-scheduler has every flag of the stock one with the same
// help (types, defaults, permitted values), and, started against the control plane beside it
// with leader election and JSON logs as a deployment runs them, every metric family the stock
// one exposes. Ours-only flags and families are listed in the test output. This fails if
// cmd/kube-scheduler/main.go loses one of upstream's blank imports: client-go's metrics
// (rest_client_*, workqueue_*, leader_election_master_status), the version metric
// (kubernetes_build_info) or the JSON log format (--logging-format's permitted values).
func TestSchedulerIsStockPlusPlugin(t *testing.T) {
	stock := stockScheduler(t)
	ours, theirs := helpFlags(output(t, repoRoot, env.CP.Bin.Scheduler, "--help")), helpFlags(output(t, repoRoot, stock, "--help"))
	if len(theirs) < 50 {
		t.Fatalf("stock kube-scheduler --help lists %d flags; the parser found too few:\n%v", len(theirs), theirs)
	}
	for name, entry := range theirs {
		if got, ok := ours[name]; !ok {
			t.Errorf("flag --%s of the stock kube-scheduler is missing:\n%s", name, entry)
		} else if got != entry {
			t.Errorf("flag --%s differs from the stock kube-scheduler's:\nours:\n%s\nstock:\n%s", name, got, entry)
		}
	}
	var oursOnly []string
	for name := range ours {
		if _, ok := theirs[name]; !ok {
			oursOnly = append(oursOnly, "--"+name)
		}
	}
	slices.Sort(oursOnly)
	t.Logf("flags: %d stock, %d ours; ours only: %v", len(theirs), len(ours), oursOnly)

	ctx := t.Context()
	cp := env.CP
	// Ours runs the shipped configuration, stock the default profile; each leads a lease of its
	// own and schedules pods of a name nobody uses, so the suite's schedulers are undisturbed.
	oursCfg, err := schedulerConfigNamed(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), cp.AdminKubeconfig, "parity-cdplace")
	if err != nil {
		t.Fatal(err)
	}
	stockCfg := []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: true
  resourceName: parity-stock
  resourceNamespace: kube-system
profiles:
- schedulerName: parity-stock
`, cp.AdminKubeconfig))
	jsonLogs := []string{"--logging-format=json"}
	oursSched, err := cp.StartSchedulerBinary(ctx, "parity-cdplace", cp.Bin.Scheduler, oursCfg, jsonLogs)
	if err != nil {
		t.Fatal(err)
	}
	defer oursSched.Stop()
	stockSched, err := cp.StartSchedulerBinary(ctx, "parity-stock", stock, stockCfg, jsonLogs)
	if err != nil {
		t.Fatal(err)
	}
	defer stockSched.Stop()

	// Both lead their lease (the stock one says so in leader_election_master_status, ours shows
	// in its Lease: the metric is one of those compared), then ours must show every family the
	// stock one shows; families that appear with activity get the time a poll gives them.
	waitUntil(t, 90*time.Second, "the stock scheduler leading", func() bool {
		g, err := harness.ScrapeGauges(ctx, stockSched.MetricsURL(), "leader_election_master_status")
		return err == nil && g["leader_election_master_status{name=kube-scheduler}"] == 1
	})
	waitUntil(t, 90*time.Second, "ours holding Lease cdplace-system/parity-cdplace", func() bool {
		l, err := cp.Client.CoordinationV1().Leases("cdplace-system").Get(ctx, "parity-cdplace", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	})
	var oursFams, stockFams, missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		if stockFams, err = harness.MetricFamilies(ctx, stockSched.MetricsURL()); err != nil {
			t.Fatal(err)
		}
		if oursFams, err = harness.MetricFamilies(ctx, oursSched.MetricsURL()); err != nil {
			t.Fatal(err)
		}
		missing = missing[:0]
		for _, f := range stockFams {
			if !slices.Contains(oursFams, f) {
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(missing) > 0 {
		t.Errorf("metric families of the stock kube-scheduler missing from ours: %v", missing)
	}
	for _, f := range []string{"rest_client_requests_total", "leader_election_master_status", "kubernetes_build_info", "workqueue_adds_total"} {
		if !slices.Contains(stockFams, f) {
			t.Errorf("the stock kube-scheduler does not expose %s: the comparison proves less than it should", f)
		}
	}
	var extra []string
	for _, f := range oursFams {
		if !slices.Contains(stockFams, f) {
			extra = append(extra, f)
		}
	}
	t.Logf("metric families: %d stock, %d ours; ours only: %v", len(stockFams), len(oursFams), extra)

	// --logging-format=json: every line our scheduler logged is a JSON object with a message.
	logged, err := os.ReadFile(oursSched.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	for i, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry["msg"] == nil {
			t.Errorf("line %d of %s is not a JSON log entry (%v): %s", i+1, oursSched.LogPath(), err, line)
			break
		}
	}
}

// schedulerConfigNamed is harness.SchedulerConfig (the file as users deploy it, with kubeconfig)
// with every profile's schedulerName and the leader-election lease renamed to name.
func schedulerConfigNamed(srcPath, kubeconfig, name string) ([]byte, error) {
	raw, err := harness.SchedulerConfig(srcPath, kubeconfig, nil)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		p.(map[string]any)["schedulerName"] = name
	}
	le, _ := cfg["leaderElection"].(map[string]any)
	if le == nil || le["leaderElect"] != true {
		return nil, fmt.Errorf("%s does not elect a leader", srcPath)
	}
	le["resourceName"] = name
	return yaml.Marshal(cfg)
}
