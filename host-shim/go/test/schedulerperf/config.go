package schedulerperf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
	"sigs.k8s.io/yaml"
)

// UpstreamDRA selects upstream's dra/performance-config.yaml as the config to run.
const UpstreamDRA = "upstream-dra"

// TwinSuffix names the copy of an upstream test case that runs under the cdplace profile.
const TwinSuffix = "WithComputeDomainPlacement"

// UpstreamDRAConfig is upstream's DRA config inside the k8s.io/kubernetes module directory.
func UpstreamDRAConfig(moduleDir string) string {
	return filepath.Join(moduleDir, "test", "integration", "scheduler_perf", "dra", "performance-config.yaml")
}

// DeriveOptions say how Derive changes a scheduler_perf config.
type DeriveOptions struct {
	// TwinSchedulerConfig, when set, adds after every test case that has no schedulerConfigPath a
	// twin named <name>WithComputeDomainPlacement that runs the same workloads with this
	// scheduler configuration.
	TwinSchedulerConfig string
	// Prepend are ops put at the start of every test case's workload template.
	Prepend []map[string]any
	// Plugin is collected in scheduler_plugin_execution_duration_seconds besides upstream's
	// PluginNames (scheduler_perf's default collector config only knows in-tree plugins).
	Plugin string
}

// pathKeys are the fields of a scheduler_perf config that name a file; scheduler_perf reads
// them relative to the working directory, Derive makes them absolute.
var pathKeys = map[string]bool{
	"schedulerConfigPath":               true,
	"defaultPodTemplatePath":            true,
	"templatePath":                      true,
	"nodeTemplatePath":                  true,
	"podTemplatePath":                   true,
	"persistentVolumeTemplatePath":      true,
	"persistentVolumeClaimTemplatePath": true,
}

// Derive reads the scheduler_perf config src and writes to dst the config that is run: every
// relative path made absolute against src's directory (so the test may run anywhere), upstream's
// throughput thresholds dropped (they are set for upstream's dedicated benchmark machines and
// would fail every run on a small one; the ratios between variants are the result here), the
// plugin added to the metrics collected, and opts applied.
func Derive(src, dst string, opts DeriveOptions) error {
	raw, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read scheduler_perf config: %w", err)
	}
	var cases []map[string]any
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		return fmt.Errorf("parse scheduler_perf config %s: %w", src, err)
	}
	if len(cases) == 0 {
		return fmt.Errorf("scheduler_perf config %s has no test cases", src)
	}
	dir, err := filepath.Abs(filepath.Dir(src))
	if err != nil {
		return err
	}
	twin := ""
	if opts.TwinSchedulerConfig != "" {
		if twin, err = filepath.Abs(opts.TwinSchedulerConfig); err != nil {
			return err
		}
		if _, err := os.Stat(twin); err != nil {
			return fmt.Errorf("scheduler config for the twins: %w", err)
		}
	}
	var out []map[string]any
	for i, tc := range cases {
		name, _ := tc["name"].(string)
		if name == "" {
			return fmt.Errorf("%s: test case %d has no name", src, i)
		}
		resolvePaths(tc, dir)
		dropThresholds(tc)
		if len(opts.Prepend) > 0 {
			ops, _ := tc["workloadTemplate"].([]any)
			pre := make([]any, 0, len(opts.Prepend)+len(ops))
			for _, op := range opts.Prepend {
				pre = append(pre, deepCopy(op))
			}
			tc["workloadTemplate"] = append(pre, ops...)
		}
		if _, ok := tc["metricsCollectorConfig"]; !ok && opts.Plugin != "" {
			tc["metricsCollectorConfig"] = metricsCollectorConfig(opts.Plugin)
		}
		out = append(out, tc)
		if _, has := tc["schedulerConfigPath"]; twin != "" && !has {
			t := deepCopy(tc)
			t["name"] = name + TwinSuffix
			t["schedulerConfigPath"] = twin
			out = append(out, t)
		}
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// resolvePaths makes every relative file path in v absolute against dir.
func resolvePaths(v any, dir string) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && pathKeys[k] && s != "" && !filepath.IsAbs(s) {
				x[k] = filepath.Join(dir, s)
				continue
			}
			if list, ok := val.([]any); ok && k == "templatePaths" { // the churn op
				for i, p := range list {
					if s, ok := p.(string); ok && !filepath.IsAbs(s) {
						list[i] = filepath.Join(dir, s)
					}
				}
				continue
			}
			resolvePaths(val, dir)
		}
	case []any:
		for _, e := range x {
			resolvePaths(e, dir)
		}
	}
}

func dropThresholds(tc map[string]any) {
	workloads, _ := tc["workloads"].([]any)
	for _, w := range workloads {
		if m, ok := w.(map[string]any); ok {
			delete(m, "threshold")
		}
	}
}

// metricsCollectorConfig is scheduler_perf's default collector config (defaultMetricsCollectorConfig
// in scheduler_perf.go, unexported) with plugin added to the plugin label values.
func metricsCollectorConfig(plugin string) map[string]any {
	plugins := append(append([]string{}, perf.PluginNames...), plugin)
	lv := func(label string, values []string) map[string]any {
		return map[string]any{"label": label, "values": values}
	}
	events := schedframework.AllClusterEventLabels()
	results := []string{metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult}
	return map[string]any{"metrics": map[string]any{
		"scheduler_framework_extension_point_duration_seconds": []any{lv("extension_point", metrics.ExtensionPoints)},
		"scheduler_scheduling_attempt_duration_seconds":        []any{lv("result", results)},
		"scheduler_pod_scheduling_duration_seconds":            nil,
		"scheduler_plugin_execution_duration_seconds":          []any{lv("plugin", plugins), lv("extension_point", metrics.ExtensionPoints)},
		"scheduler_queueing_hint_execution_duration_seconds":   []any{lv("plugin", plugins), lv("event", events)},
		"scheduler_event_handling_duration_seconds":            []any{lv("event", events)},
		"scheduler_podgroup_scheduling_attempt_duration_seconds": []any{lv("result",
			[]string{metrics.WaitingOnPreemptionResult, metrics.ScheduledResult, metrics.UnschedulableResult, metrics.ErrorResult})},
		"scheduler_podgroup_scheduling_algorithm_duration_seconds": nil,
	}}
}

// deepCopy copies a JSON-shaped value.
func deepCopy(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // values decoded from YAML always marshal
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
