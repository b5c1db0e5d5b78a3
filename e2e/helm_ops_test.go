package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// What the chart gives operators beyond the scheduler itself, checked against their owners: the
// schema against values.yaml, the cdplace-viewer ClusterRole against what the CLI lists, the
// alerts with promtool, the metric names the alerts and the dashboard query against a running
// scheduler, the README against helm-docs' output, /metrics behind the metrics-reader role.

// toolBinary is a tool `make test-helm` builds (its path in env), or target/e2e/bin/<name>; the
// test is skipped when neither is there and no path was asked for.
func toolBinary(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", env, p, err)
		}
		return p
	}
	p := filepath.Join(repoRoot, "target", "e2e", "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no %s at %s: run `make test-helm`", name, p)
	}
	return p
}

// testChartSchemaMatchesValues: every key values.yaml sets is one values.schema.json defines, and
// every key the schema defines where it refuses unknown keys is one values.yaml sets (and so
// documents), except the plugin's args, whose optional fields the plugin defaults.
func testChartSchemaMatchesValues(t *testing.T) {
	var values, schema map[string]any
	for path, into := range map[string]*map[string]any{"values.yaml": &values, "values.schema.json": &schema} {
		raw, err := os.ReadFile(filepath.Join(chartDir(), path))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if schema["additionalProperties"] != false {
		t.Errorf("values.schema.json: additionalProperties is %v at the top; want false", schema["additionalProperties"])
	}
	var walk func(path string, v map[string]any, s map[string]any)
	walk = func(path string, v map[string]any, s map[string]any) {
		if _, ref := s["$ref"]; ref {
			return // a definition (the plugin's args): its own checks
		}
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return // a free-form object (labels, affinity, ...)
		}
		for k, val := range v {
			ps, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("values.yaml sets %s%s, which values.schema.json does not define", path, k)
				continue
			}
			if m, ok := val.(map[string]any); ok {
				walk(path+k+".", m, ps)
			}
		}
		// An object of alternatives (maxProperties 1, such as the CA's secret or configMap) sets
		// none by default.
		if _, choice := s["maxProperties"]; s["additionalProperties"] == false && !choice {
			for k := range props {
				if _, ok := v[k]; !ok {
					t.Errorf("values.schema.json defines %s%s, which values.yaml does not set (and so does not document)", path, k)
				}
			}
		}
	}
	walk("", values, schema)
	// Every object the chart defines refuses unknown keys, free-form maps aside.
	var strict func(path string, s map[string]any)
	strict = func(path string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return
		}
		if s["additionalProperties"] != false {
			t.Errorf("values.schema.json: %s has properties but accepts unknown keys", strings.TrimSuffix(path, "."))
		}
		for k, p := range props {
			if m, ok := p.(map[string]any); ok {
				strict(path+k+".", m)
			}
		}
	}
	strict("", schema)
}

// testChartViewerIsWhatTheCLIReads: the cdplace-viewer ClusterRole grants get, list and watch on
// exactly the resources `kubectl cdplace` lists (host-shim/cli/src/live.rs RESOURCES), no more.
func testChartViewerIsWhatTheCLIReads(t *testing.T, bin string) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "host-shim", "cli", "src", "live.rs"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`Resource \{ api_version: "([^"]+)", kind: "[^"]+", plural: "([^"]+)" \}`)
	var want []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		group, _, found := strings.Cut(m[1], "/")
		if !found {
			group = ""
		}
		want = append(want, m[2]+"."+group)
	}
	if len(want) < 10 {
		t.Fatalf("found %d resources in live.rs (%v); the pattern no longer matches its RESOURCES table", len(want), want)
	}
	cr := chartObject(t, chartRender(t, bin, "helm-t"), "ClusterRole", "cdplace-viewer")
	rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	var got []string
	for _, r := range rules {
		rule := r.(map[string]any)
		groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
		res, _, _ := unstructured.NestedStringSlice(rule, "resources")
		verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
		if !slices.Equal(verbs, []string{"get", "list", "watch"}) {
			t.Errorf("cdplace-viewer rule %v grants %v; want get, list, watch only", res, verbs)
		}
		for _, g := range groups {
			for _, x := range res {
				got = append(got, x+"."+g)
			}
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("cdplace-viewer grants %v;\nthe CLI lists %v", got, want)
	}
}

// alertRules renders the chart's PrometheusRule into namespace and returns its spec (groups).
func chartAlertRules(t *testing.T, bin, namespace string) map[string]any {
	t.Helper()
	pr := chartObject(t, chartRender(t, bin, namespace, "prometheusRule.enabled=true"), "PrometheusRule", helmRelease)
	spec, _, _ := unstructured.NestedMap(pr.Object, "spec")
	return spec
}

// testChartAlertRules: promtool (built from the Prometheus module, `make promtool`) accepts the
// rendered rules, and its unit tests show each alert firing on the series it is for and not
// before its `for` or on the series it leaves out.
func testChartAlertRules(t *testing.T, bin string) {
	promtool := toolBinary(t, "CDPLACE_PROMTOOL_BIN", "promtool")
	dir := t.TempDir()
	spec := chartAlertRules(t, bin, "helm-t")
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS: 4 rules found") {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, raw)
	}
	// The expected annotations are the rendered ones with the alert's labels and value put in.
	annotations := map[string]map[string]any{}
	groups, _ := spec["groups"].([]any)
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			annotations[fmt.Sprint(rule["alert"])] = rule["annotations"].(map[string]any)
		}
	}
	expect := func(alert string, labels map[string]string, value string) map[string]any {
		ann := map[string]string{}
		for k, v := range annotations[alert] {
			s := strings.ReplaceAll(fmt.Sprint(v), "{{ $value }}", value)
			for l, lv := range labels {
				s = strings.ReplaceAll(s, "{{ $labels."+l+" }}", lv)
			}
			ann[k] = s
		}
		return map[string]any{"exp_labels": labels, "exp_annotations": ann}
	}
	sel := `job="` + helmRelease + `", namespace="helm-t"`
	other := `job="` + helmRelease + `", namespace="elsewhere"`
	alert := func(at, name string, exp ...map[string]any) map[string]any {
		if exp == nil {
			exp = []map[string]any{}
		}
		return map[string]any{"eval_time": at, "alertname": name, "exp_alerts": exp}
	}
	tests := map[string]any{
		"rule_files":          []string{rules},
		"evaluation_interval": "1m",
		"tests": []any{
			map[string]any{
				"interval": "1m",
				"input_series": []any{
					// A domain no clique fits for 40 minutes; others settling all along (normal).
					map[string]any{"series": `cdplace_domains_pending{` + sel + `, pod="a", reason="no_clique_fits"}`, "values": "1x40"},
					map[string]any{"series": `cdplace_domains_pending{` + sel + `, pod="a", reason="settling"}`, "values": "3x40"},
					// The breaker opens at minute 3.
					map[string]any{"series": `cdplace_breaker_open{` + sel + `, pod="a"}`, "values": "0 0 0 1x37"},
					// Two Nodes quarantined at minute 10.
					map[string]any{"series": `cdplace_quarantined_objects_total{` + sel + `, pod="a", kind="Node"}`, "values": "0x9 2x30"},
					// The leader is lost at minute 20 (the standby never leads).
					map[string]any{"series": `leader_election_master_status{` + sel + `, pod="a", name="kube-scheduler"}`, "values": "1x19 0x20"},
					map[string]any{"series": `leader_election_master_status{` + sel + `, pod="b", name="kube-scheduler"}`, "values": "0x40"},
					// Another release's series change nothing here.
					map[string]any{"series": `cdplace_breaker_open{` + other + `, pod="x"}`, "values": "1x40"},
				},
				"alert_rule_test": []any{
					alert("25m", "CdplaceComputeDomainPending"), // not yet for 30m; settling never
					alert("35m", "CdplaceComputeDomainPending", expect("CdplaceComputeDomainPending", map[string]string{"reason": "no_clique_fits", "severity": "warning"}, "1")),
					alert("4m", "CdplacePolicyBreakerOpen"),
					alert("6m", "CdplacePolicyBreakerOpen", expect("CdplacePolicyBreakerOpen", map[string]string{"severity": "critical"}, "1")),
					alert("9m", "CdplaceObjectsQuarantined"),
					alert("12m", "CdplaceObjectsQuarantined", expect("CdplaceObjectsQuarantined", map[string]string{"kind": "Node", "severity": "warning"}, "2")),
					alert("23m", "CdplaceNoLeader"),
					alert("26m", "CdplaceNoLeader", expect("CdplaceNoLeader", map[string]string{"severity": "critical"}, "0")),
				},
			},
			// No replica reports at all: no leader either.
			map[string]any{
				"interval":     "1m",
				"input_series": []any{map[string]any{"series": `leader_election_master_status{` + other + `, pod="x", name="kube-scheduler"}`, "values": "1x10"}},
				"alert_rule_test": []any{
					alert("10m", "CdplaceNoLeader", expect("CdplaceNoLeader", map[string]string{"severity": "critical"}, "0")),
				},
			},
		},
	}
	tb, err := yaml.Marshal(tests)
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "rules_test.yaml")
	if err := os.WriteFile(testFile, tb, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "test", "rules", testFile).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s\n--- tests:\n%s", err, out, tb)
	}
}

// metricNamesIn are the metric names a PromQL expression selects (every selector here has
// braces) and those a Grafana label_values() query names.
var (
	promqlSelector = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
	labelValuesOf  = regexp.MustCompile(`label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`)
)

func metricNamesIn(expr string) []string {
	var out []string
	for _, re := range []*regexp.Regexp{promqlSelector, labelValuesOf} {
		for _, m := range re.FindAllStringSubmatch(expr, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// chartQueriedMetrics are the metric names the chart's alerts and dashboard query.
func chartQueriedMetrics(t *testing.T, bin string) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	groups, _ := chartAlertRules(t, bin, "helm-t")["groups"].([]any)
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			for _, n := range metricNamesIn(fmt.Sprint(rule["expr"])) {
				used[n] = append(used[n], "alert "+fmt.Sprint(rule["alert"]))
			}
		}
	}
	cm := chartObject(t, chartRender(t, bin, "helm-t", "grafanaDashboard.enabled=true"), "ConfigMap", helmRelease+"-dashboard")
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "cdplace-scheduler.json")
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(raw), &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(dash.Panels) < 10 {
		t.Fatalf("the dashboard has %d panels", len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			names := metricNamesIn(q.Expr)
			if len(names) == 0 {
				t.Errorf("dashboard panel %q: no metric in %q", p.Title, q.Expr)
			}
			for _, n := range names {
				used[n] = append(used[n], "panel "+p.Title)
			}
		}
	}
	for _, v := range dash.Templating.List {
		for _, n := range metricNamesIn(fmt.Sprint(v.Query)) {
			used[n] = append(used[n], "variable "+v.Name)
		}
	}
	return used
}

// declaredCdplaceMetrics are the plugin's metric names as host-shim/go/pkg/computedomain/metrics.go
// declares them (a vector with no series yet, such as the quarantine counter on a healthy
// scheduler, is not in a scrape), with a histogram's _bucket, _sum and _count.
func declaredCdplaceMetrics(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "host-shim", "go", "pkg", "computedomain", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`metrics\.New(Histogram|Counter|Gauge)(?:Vec)?\(&metrics\.\w+Opts\{\s*Subsystem:\s*metricsSubsystem,\s*Name:\s*"(\w+)"`)
	out := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		name := "cdplace_" + m[2]
		out[name] = true
		if m[1] == "Histogram" {
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		}
	}
	if len(out) < 15 {
		t.Fatalf("found %d metrics in metrics.go; the pattern no longer matches its declarations", len(out))
	}
	return out
}

// testChartMetricNames: every metric the chart's alerts and dashboard query is one the running
// scheduler exports (kube-scheduler's, client-go's leader election, the process's), or, for the
// plugin's own vectors that have no series until something happens, one metrics.go declares.
func testChartMetricNames(t *testing.T, bin string, cs *chartScheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token, err := env.CP.ServiceAccountToken(ctx, cs.namespace, helmRelease+"-metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams, err := harness.ScrapeWithToken(ctx, cs.sched.MetricsURL(), token)
	if err != nil {
		t.Fatalf("scrape with the metrics reader's token: %v", err)
	}
	exported := map[string]bool{}
	for name, f := range fams {
		exported[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM":
			exported[name+"_bucket"], exported[name+"_sum"], exported[name+"_count"] = true, true, true
		case "SUMMARY":
			exported[name+"_sum"], exported[name+"_count"] = true, true
		}
	}
	declared := declaredCdplaceMetrics(t)
	used := chartQueriedMetrics(t, bin)
	for _, must := range []string{"leader_election_master_status", "cdplace_breaker_open", "cdplace_domains_pending", "cdplace_quarantined_objects_total"} {
		if used[must] == nil {
			t.Errorf("the chart's alerts and dashboard do not query %s", must)
		}
	}
	for name, where := range used {
		switch {
		case exported[name]:
		case strings.HasPrefix(name, "cdplace_") && declared[name]:
		default:
			t.Errorf("%s (queried by %s) is not exported by the scheduler (nor declared in metrics.go)", name, strings.Join(where, ", "))
		}
	}
}

// testChartMetricsReader: the pod's /metrics needs a token whose identity may get /metrics; the
// ServiceMonitor's ServiceAccount, bound to the metrics-reader ClusterRole, may; the scheduler's
// own ServiceAccount and an anonymous caller may not.
func testChartMetricsReader(t *testing.T, cs *chartScheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := cs.sched.MetricsURL()
	if _, err := harness.ScrapeWithToken(ctx, url, ""); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(err.Error(), "401") {
		t.Errorf("anonymous /metrics: %v; want 401 or 403", err)
	}
	own, err := env.CP.ServiceAccountToken(ctx, cs.namespace, chartObject(t, cs.objs, "ServiceAccount", helmRelease).GetName())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := harness.ScrapeWithToken(ctx, url, own); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("/metrics with the scheduler's own token: %v; want 403 (only the metrics reader is bound)", err)
	}
	reader, err := env.CP.ServiceAccountToken(ctx, cs.namespace, helmRelease+"-metrics")
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, err := harness.ScrapeWithToken(ctx, url, reader)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("/metrics with the metrics reader's token: %v", err)
		}
		time.Sleep(time.Second)
	}
}

// testChartREADMEIsGenerated: the chart's README.md is what helm-docs (`make chart-docs`)
// generates from Chart.yaml, values.yaml and README.md.gotmpl.
func testChartREADMEIsGenerated(t *testing.T) {
	helmDocs := toolBinary(t, "CDPLACE_HELM_DOCS_BIN", "helm-docs")
	cmd := exec.Command(helmDocs, "--dry-run", "--chart-search-root", chartDir(), "--log-level", "warning")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm-docs: %v\n%s", err, stderr.String())
	}
	committed, err := os.ReadFile(filepath.Join(chartDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); strings.TrimSpace(got) != strings.TrimSpace(string(committed)) {
		t.Errorf("kube-scheduler-config/chart/cdplace-scheduler/README.md is not what helm-docs generates: run `make chart-docs`\n--- generated:\n%s", got)
	}
}
