package schedulerperf

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// upstreamPerformanceWorkloads are the 500-node workloads of upstream's
// SchedulingWithResourceClaimTemplate labelled `performance` at v1.37.2.
var upstreamPerformanceWorkloads = []string{
	"5000pods_500nodes", "empty_500nodes", "half_500nodes", "full_500nodes",
	"selector_empty_500nodes", "match_empty_500nodes",
}

func readCases(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func caseByName(cases []map[string]any, name string) map[string]any {
	for _, c := range cases {
		if c["name"] == name {
			return c
		}
	}
	return nil
}

func TestDeriveUpstreamDRA(t *testing.T) {
	src := UpstreamDRAConfig(kubernetesModuleDir(t))
	crd, _ := filepath.Abs(crdManifest)
	dst := filepath.Join(t.TempDir(), "config.yaml")
	err := Derive(src, dst, DeriveOptions{
		TwinSchedulerConfig: cdplaceProfile,
		Prepend:             []map[string]any{{"opcode": "createAny", "templatePath": crd}},
		Plugin:              "ComputeDomainPlacement",
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := readCases(t, dst)
	profile, _ := filepath.Abs(cdplaceProfile)
	stock := caseByName(cases, "SchedulingWithResourceClaimTemplate")
	twin := caseByName(cases, "SchedulingWithResourceClaimTemplate"+TwinSuffix)
	if stock == nil || twin == nil {
		t.Fatalf("want SchedulingWithResourceClaimTemplate and its twin, got %d cases", len(cases))
	}
	if _, has := stock["schedulerConfigPath"]; has {
		t.Errorf("the stock case got a scheduler config: %v", stock["schedulerConfigPath"])
	}
	if twin["schedulerConfigPath"] != profile {
		t.Errorf("twin schedulerConfigPath = %v, want %s", twin["schedulerConfigPath"], profile)
	}
	for _, tc := range []map[string]any{stock, twin} {
		ops := tc["workloadTemplate"].([]any)
		if first := ops[0].(map[string]any); first["templatePath"] != crd {
			t.Errorf("%s: first op %v, want the CRD", tc["name"], first)
		}
		if len(ops) != len(caseByName(readCases(t, src), "SchedulingWithResourceClaimTemplate")["workloadTemplate"].([]any))+1 {
			t.Errorf("%s: %d ops, want upstream's plus the CRD", tc["name"], len(ops))
		}
		for _, op := range ops {
			for _, key := range []string{"templatePath", "nodeTemplatePath", "podTemplatePath"} {
				if p, ok := op.(map[string]any)[key].(string); ok {
					if _, err := os.Stat(p); err != nil || !filepath.IsAbs(p) {
						t.Errorf("%s: %s %q is not an absolute path to a file: %v", tc["name"], key, p, err)
					}
				}
			}
		}
		plugins := tc["metricsCollectorConfig"].(map[string]any)["metrics"].(map[string]any)["scheduler_plugin_execution_duration_seconds"]
		if !strings.Contains(toYAML(t, plugins), "ComputeDomainPlacement") || !strings.Contains(toYAML(t, plugins), "DynamicResources") {
			t.Errorf("%s: plugin metrics collect %s", tc["name"], toYAML(t, plugins))
		}
		found := map[string]bool{}
		for _, w := range tc["workloads"].([]any) {
			m := w.(map[string]any)
			if _, has := m["threshold"]; has {
				t.Errorf("%s/%s keeps its threshold", tc["name"], m["name"])
			}
			found[m["name"].(string)] = strings.Contains(toYAML(t, m["labels"]), "performance")
		}
		for _, w := range upstreamPerformanceWorkloads {
			if !found[w] {
				t.Errorf("%s: workload %s missing or not labelled performance", tc["name"], w)
			}
		}
	}
}

func toYAML(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCdplaceProfileIsTheShippedOne: the benchmark measures the profile users install.
func TestCdplaceProfileIsTheShippedOne(t *testing.T) {
	profile := func(path string) map[string]any {
		var cfg map[string]any
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		profiles := cfg["profiles"].([]any)
		if len(profiles) != 1 {
			t.Fatalf("%s: %d profiles, want 1", path, len(profiles))
		}
		p := profiles[0].(map[string]any)
		delete(p, "schedulerName")
		return p
	}
	ours, shipped := profile(cdplaceProfile), profile(shippedConfig)
	if !reflect.DeepEqual(ours, shipped) {
		t.Errorf("%s differs from %s:\n%s\nvs\n%s", cdplaceProfile, shippedConfig, toYAML(t, ours), toYAML(t, shipped))
	}
}

func TestDeriveComputeDomainConfig(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "config.yaml")
	if err := Derive("config/computedomain-config.yaml", dst, DeriveOptions{Plugin: "ComputeDomainPlacement"}); err != nil {
		t.Fatal(err)
	}
	cases := readCases(t, dst)
	if len(cases) != 2 {
		t.Fatalf("%d test cases, want ComputeDomainPlacement and ComputeDomainBaseline", len(cases))
	}
	profile, _ := filepath.Abs(cdplaceProfile)
	crd, _ := filepath.Abs(crdManifest)
	cd, base := caseByName(cases, "ComputeDomainPlacement"), caseByName(cases, "ComputeDomainBaseline")
	if cd["schedulerConfigPath"] != profile {
		t.Errorf("ComputeDomainPlacement runs %v, want %s", cd["schedulerConfigPath"], profile)
	}
	if _, has := base["schedulerConfigPath"]; has {
		t.Errorf("the baseline got a scheduler config")
	}
	if !reflect.DeepEqual(cd["workloadTemplate"], base["workloadTemplate"]) {
		t.Errorf("the two test cases run different ops")
	}
	ops := cd["workloadTemplate"].([]any)
	if first := ops[0].(map[string]any); first["templatePath"] != crd {
		t.Errorf("first op %v, want the CRD from e2e/manifests", first)
	}
	for _, op := range ops {
		for _, key := range []string{"templatePath", "nodeTemplatePath", "podTemplatePath"} {
			if p, ok := op.(map[string]any)[key].(string); ok {
				if _, err := os.Stat(p); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}
		}
	}
	for _, tc := range []map[string]any{cd, base} {
		for _, w := range tc["workloads"].([]any) {
			params := w.(map[string]any)["params"].(map[string]any)
			nodes, domains, pods := params["nodes"].(float64), params["domains"].(float64), params["pods"].(float64)
			if int(nodes)%18 != 0 || int(domains)%4 != 0 || pods != domains/4*30 || pods > nodes {
				t.Errorf("%s/%v: nodes %v, domains %v, pods %v: want whole racks, whole blocks, 30 pods per block",
					tc["name"], w.(map[string]any)["name"], nodes, domains, pods)
			}
			if params["podAffinity"] != (tc["name"] == "ComputeDomainBaseline") {
				t.Errorf("%s/%v: podAffinity %v", tc["name"], w.(map[string]any)["name"], params["podAffinity"])
			}
		}
	}
}
