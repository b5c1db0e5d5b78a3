package schedulerperf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/dynamic-resource-allocation/structured"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"k8s.io/kubernetes/test/utils/client-go/ktesting"

	"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain"
	"github.com/cdplace/cdplace/host-shim/go/test/nvdriver"
)

// Paths relative to this package's directory, the working directory of `go test` (the bench
// driver runs the compiled test binary there too).
const (
	cdplaceProfile = "config/scheduler-config-cdplace.yaml"
	crdManifest    = "../../../../e2e/manifests/computedomain-crd.yaml"
	shippedConfig  = "../../../../kube-scheduler-config/scheduler-config.yaml"
	cliqueLabel    = "nvidia.com/gpu.clique"
)

var (
	configFlag = flag.String("cdplace-config", UpstreamDRA,
		`scheduler_perf config to run: "upstream-dra" (upstream's dra/performance-config.yaml, each test case with a cdplace twin) or a path`)
	topicFlag = flag.String("cdplace-topic", "cdplace",
		"topic in the data items file name (BenchmarkPerfScheduling_benchmark_<topic>_<time>.json)")
	moduleDirFlag = flag.String("cdplace-kubernetes-dir", "",
		"directory of the k8s.io/kubernetes module (default: `go list -m` in this package)")
	crdFlag = flag.Bool("cdplace-crd", true,
		"with upstream-dra: create the ComputeDomain CRD first in every test case, as on a cluster running NVIDIA's driver")
)

func TestMain(m *testing.M) {
	// Adds scheduler_perf's flags (-data-items-dir, -perf-cpuprofile, -perf-scheduling-label-filter,
	// logging) and parses the command line.
	if err := perf.InitTests(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// BenchmarkPerfScheduling runs scheduler_perf on the config -cdplace-config selects, with
// ComputeDomainPlacement in the out-of-tree registry (a profile only runs it when its config
// enables it) and the driver emulator in every workload. Select test cases and workloads with
// -test.bench, e.g. 'BenchmarkPerfScheduling/^SchedulingWithResourceClaimTemplate$/^fast$', and
// pass -perf-scheduling-label-filter= to run workloads that are not labelled `performance`.
func BenchmarkPerfScheduling(b *testing.B) {
	config := deriveConfig(b)
	// As upstream's dra.BenchmarkPerfScheduling: the default allocator only.
	structured.EnableAllocators("incubating")
	defer structured.EnableAllocators()
	registry := frameworkruntime.Registry{computedomain.Name: computedomain.New}
	perf.RunBenchmarkPerfScheduling(b, config, *topicFlag, registry, perf.WithPrepareFn(prepare))
}

// deriveConfig writes the config that is run into -data-items-dir (kept with the results) or a
// temporary directory.
func deriveConfig(b *testing.B) string {
	src, opts := *configFlag, DeriveOptions{Plugin: computedomain.Name}
	if src == UpstreamDRA {
		dir := *moduleDirFlag
		if dir == "" {
			dir = kubernetesModuleDir(b)
		}
		src = UpstreamDRAConfig(dir)
		opts.TwinSchedulerConfig = cdplaceProfile
		if *crdFlag {
			crd, err := filepath.Abs(crdManifest)
			if err != nil {
				b.Fatal(err)
			}
			opts.Prepend = []map[string]any{{"opcode": "createAny", "templatePath": crd}}
		}
	}
	out := b.TempDir()
	if dir := dataItemsDir(); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		out = dir
	}
	dst := filepath.Join(out, "config.yaml")
	if err := Derive(src, dst, opts); err != nil {
		b.Fatal(err)
	}
	return dst
}

func kubernetesModuleDir(tb testing.TB) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		tb.Fatalf("locate the k8s.io/kubernetes module (pass -cdplace-kubernetes-dir): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// dataItemsDir is scheduler_perf's -data-items-dir.
func dataItemsDir() string {
	if f := flag.Lookup("data-items-dir"); f != nil {
		return f.Value.String()
	}
	return ""
}

// prepare runs in every workload once its apiserver and scheduler are up: it starts the driver
// emulator and, when the workload is done (before the apiserver stops), writes the placement of
// the ComputeDomain pods to <data-items-dir>/placement-<workload>.json.
func prepare(tCtx ktesting.TContext) error {
	emu := nvdriver.Start(tCtx, tCtx.Client(), tCtx.Dynamic())
	tCtx.TB().Cleanup(func() {
		defer emu.Stop()
		if err := writePlacement(tCtx, emu); err != nil {
			tCtx.TB().Errorf("placement summary: %v", err)
		}
	})
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func writePlacement(tCtx ktesting.TContext, emu *nvdriver.Emulator) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tCtx), time.Minute)
	defer cancel()
	pods, err := tCtx.Client().CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: PodDomainLabel})
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return nil // not a ComputeDomain workload
	}
	nodes, err := tCtx.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	p := SummarizePlacement(pods.Items, nodes.Items, cliqueLabel)
	summary := struct {
		Workload  string `json:"workload"`
		Templates int    `json:"workloadTemplates"`
		Placement
	}{tCtx.TB().Name(), emu.Templates(), p}
	b, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		return err
	}
	tCtx.TB().Logf("ComputeDomain placement: %s", b)
	dir := dataItemsDir()
	if dir == "" {
		return nil
	}
	name := "placement-" + unsafeName.ReplaceAllString(tCtx.TB().Name(), "_") + ".json"
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
