package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain"
)

// With the 1.37 workload gates on, every shipped profile places PodGroups through
// ComputeDomainPlacement (the only PlacementGenerate plugin, a PlacementScore plugin beside
// PodGroupPodsCount); without disabling TopologyPlacementGenerator the profile would not build.
func TestShippedConfigsUseThePluginInTheWorkloadCycle(t *testing.T) {
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{
		features.GenericWorkload:                 true,
		features.TopologyAwareWorkloadScheduling: true,
	})
	for _, name := range shippedConfigs {
		t.Run(name, func(t *testing.T) {
			plugins, err := profilePlugins(t, filepath.Join(configDir, name), "computedomain-scheduler")
			if err != nil {
				t.Fatal(err)
			}
			if got := names(plugins.PlacementGenerate.Enabled); !reflect.DeepEqual(got, []string{computedomain.Name}) {
				t.Errorf("PlacementGenerate plugins %v, want only %s", got, computedomain.Name)
			}
			weights := map[string]int32{}
			for _, p := range plugins.PlacementScore.Enabled {
				weights[p.Name] = p.Weight
			}
			want := map[string]int32{computedomain.Name: 10, "PodGroupPodsCount": 1, "NodeResourcesFit": 1}
			if !reflect.DeepEqual(weights, want) {
				t.Errorf("PlacementScore plugins and weights %v, want %v", weights, want)
			}
		})
	}
	orig, err := os.ReadFile(filepath.Join(configDir, "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const disabled = "      disabled:\n      - name: TopologyPlacementGenerator\n"
	if !bytes.Contains(orig, []byte(disabled)) {
		t.Fatalf("scheduler-config.yaml no longer disables TopologyPlacementGenerator as %q", disabled)
	}
	path := filepath.Join(t.TempDir(), "two-generators.yaml")
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(disabled), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := setup(t, path); err == nil || !strings.Contains(err.Error(), "at most one placement generate plugin is allowed") {
		t.Fatalf("a profile with both generators: %v, want the framework's refusal", err)
	}
}

// With the gates off (the 1.37 default), the same profile builds and the workload lists are
// inert: the framework has no PodGroup cycle to call them from.
func TestShippedConfigWithTheWorkloadGatesOff(t *testing.T) {
	for _, g := range []featuregate.Feature{features.GenericWorkload, features.TopologyAwareWorkloadScheduling} {
		if utilfeature.DefaultFeatureGate.Enabled(g) {
			t.Fatalf("%s is on by default in this kube-scheduler; docs/concepts.md's and docs/dev/internals.md's gates-off sentences are wrong", g)
		}
	}
	plugins, err := profilePlugins(t, filepath.Join(configDir, "scheduler-config.yaml"), "computedomain-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(plugins.PlacementGenerate.Enabled); !reflect.DeepEqual(got, []string{computedomain.Name}) {
		t.Errorf("PlacementGenerate plugins with the gates off %v, want only %s", got, computedomain.Name)
	}
}

// profilePlugins builds the scheduler from path as setup does and lists a profile's plugins.
func profilePlugins(t *testing.T, path, profile string) (*config.Plugins, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts := options.NewOptions()
	opts.ConfigFile = path
	opts.Master = "https://127.0.0.1:1"
	opts.SecureServing.BindPort = 0
	_, sched, err := app.Setup(ctx, opts, app.WithPlugin(computedomain.Name, computedomain.New))
	if err != nil {
		return nil, err
	}
	fw, ok := sched.Profiles[profile]
	if !ok {
		t.Fatalf("%s has no profile %s", path, profile)
	}
	return fw.ListPlugins(), nil
}

func names(ps []config.Plugin) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
