package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain"
)

const configDir = "../../../../kube-scheduler-config"

var shippedConfigs = []string{"scheduler-config.yaml", "scheduler-config-two-profiles.yaml"}

// setup builds the scheduler from a config file exactly as the binary does (strict decoding,
// validation, every profile's plugins instantiated), against an API server that is never
// contacted.
func setup(t *testing.T, path string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.Master = "https://127.0.0.1:1"
	opts.SecureServing.BindPort = 0 // no listener: tests run side by side
	_, _, err := app.Setup(ctx, opts, app.WithPlugin(computedomain.Name, computedomain.New))
	return err
}

func TestShippedConfigsBuildAScheduler(t *testing.T) {
	for _, name := range shippedConfigs {
		t.Run(name, func(t *testing.T) {
			if err := setup(t, filepath.Join(configDir, name)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		})
	}
}

func TestBrokenConfigsAreRejectedWithExactErrors(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(configDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, from, to, want string }{
		// The plugin's args are validated by the policy alone; its message comes under their path.
		{"unknown plugin arg", "wholeTray: Require", "wholeTrays: Require", "pluginConfig[ComputeDomainPlacement].args: invalid plugin args: unknown field `wholeTrays`, expected one of"},
		{"bad plugin arg value", "imexMode: DriverManaged", "imexMode: Shared", "pluginConfig[ComputeDomainPlacement].args: invalid plugin args: unknown variant `Shared`, expected `DriverManaged` or `HostManaged`"},
		{"unknown config field", "resourceLock: leases", "resourceLok: leases", `strict decoding error: unknown field "leaderElection.resourceLok"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(orig, []byte(c.from)) {
				t.Fatalf("scheduler-config.yaml no longer contains %q", c.from)
			}
			path := filepath.Join(t.TempDir(), "broken.yaml")
			if err := os.WriteFile(path, bytes.Replace(orig, []byte(c.from), []byte(c.to), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			err := setup(t, path)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestConfigMapCarriesTheSchedulerConfig(t *testing.T) {
	file, err := os.ReadFile(filepath.Join(configDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(configDir, "deploy/configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm v1.ConfigMap
	if err := sigyaml.UnmarshalStrict(raw, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["scheduler-config.yaml"] != string(file) {
		t.Fatal("deploy/configmap.yaml's scheduler-config.yaml differs from scheduler-config.yaml")
	}
}

// The host-managed pluginConfig snippet, put in place of the shipped one, builds a scheduler.
func TestHostManagedArgsSnippetIsValid(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(configDir, "examples/host-managed-args.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var snippet []any
	if err := sigyaml.UnmarshalStrict(raw, &snippet); err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(configDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := sigyaml.Unmarshal(base, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["profiles"].([]any)[0].(map[string]any)["pluginConfig"] = snippet
	out, err := sigyaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("imexMode: HostManaged")) {
		t.Fatalf("snippet does not select HostManaged:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "host-managed.yaml")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := setup(t, path); err != nil {
		t.Fatalf("host-managed config: %v", err)
	}
}

func TestExampleWorkloadsDecodeStrictly(t *testing.T) {
	codecs := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict)
	files, err := filepath.Glob(filepath.Join(configDir, "examples/computedomain-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example workloads: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := sigyaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
				continue // comments only
			}
			switch meta.APIVersion {
			case "v1", "batch/v1", "resource.k8s.io/v1":
				obj, _, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
				if err != nil {
					t.Errorf("%s document %d: %v", filepath.Base(f), i+1, err)
					continue
				}
				if pod, ok := obj.(*v1.Pod); ok && pod.Spec.SchedulerName != "computedomain-scheduler" {
					t.Errorf("%s: pod %s does not use computedomain-scheduler", filepath.Base(f), pod.Name)
				}
				if job, ok := obj.(*batchv1.Job); ok && job.Spec.Template.Spec.SchedulerName != "computedomain-scheduler" {
					t.Errorf("%s: job %s does not use computedomain-scheduler", filepath.Base(f), job.Name)
				}
			}
		}
	}
}

// The real binary: a shipped config starts it (it is still running, waiting for the API server,
// after a few seconds); a broken one makes it exit at once with the exact error.
func TestBinaryStartsWithShippedConfigsAndRejectsABrokenOne(t *testing.T) {
	bin := os.Getenv("CDPLACE_SCHEDULER_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "kube-scheduler")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	run := func(config string, wait time.Duration) (exited bool, output string) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--config="+config, "--master=https://127.0.0.1:1", "--leader-elect=false",
			"--secure-port=0", "--v=1")
		out, _ := cmd.CombinedOutput()
		return ctx.Err() == nil, string(out)
	}
	for _, name := range shippedConfigs {
		if exited, out := run(filepath.Join(configDir, name), 5*time.Second); exited {
			t.Errorf("%s: the scheduler exited early:\n%s", name, out)
		}
	}
	orig, _ := os.ReadFile(filepath.Join(configDir, "scheduler-config.yaml"))
	broken := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(broken, bytes.Replace(orig, []byte("wholeTray: Require"), []byte("wholeTrays: Require"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	exited, out := run(broken, 60*time.Second)
	if !exited || !strings.Contains(out, "pluginConfig[ComputeDomainPlacement].args: invalid plugin args: unknown field `wholeTrays`") {
		t.Fatalf("broken config: exited=%v, output:\n%s", exited, out)
	}
}
