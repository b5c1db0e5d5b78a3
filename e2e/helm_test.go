package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// The Helm chart kube-scheduler-config/chart/cdplace-scheduler, end to end: `helm lint` and
// `helm template` in both modes and with the values a platform team changes; the schema and the
// chart refusing bad values; the rendered objects applied server-side to the suite's API server;
// a kube-scheduler started with the rendered configuration, the Deployment's flags and a token
// of the chart's ServiceAccount places a ComputeDomain in one clique; with one rule taken out of
// the chart's ClusterRole it does not. `make test-helm` runs this file.

// helmRelease is the release name the README uses; the chart's full name is then the release name.
const helmRelease = "cdplace-scheduler"

// The memory figures the chart renders by default (values.yaml memory.baseMiB, sized in
// docs/dev/memory-sizing.md): the limit is baseMiB + 16 instances x 64 MiB, GOMEMLIMIT 90% of baseMiB.
const (
	chartBaseMiB     = 2048
	chartMemoryLimit = "3072Mi"
	chartGoMemLimit  = "1843MiB"
)

// helmFleet has two 4-tray cliques: a 2-pod domain could be split between them.
var helmFleet = harness.FleetSpec{Racks: 2, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}

// helmBinary is the helm `make helm` builds (or $CDPLACE_HELM_BIN). The test is skipped when it
// is absent and no path was asked for, so `make test-e2e` runs without it; `make test-helm`
// always sets the variable.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CDPLACE_HELM_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CDPLACE_HELM_BIN=%s: %v (run `make helm`)", p, err)
		}
		return p
	}
	p := filepath.Join(repoRoot, "target", "e2e", "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no helm at %s: run `make helm` (or `make test-helm`)", p)
	}
	return p
}

func chartDir() string {
	return filepath.Join(repoRoot, "kube-scheduler-config", "chart", "cdplace-scheduler")
}

// helm runs the helm binary with a private home, so no user configuration leaks in.
func helmRun(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// render is `helm template` of the chart into namespace with the given --set values.
func chartRender(t *testing.T, bin, namespace string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", helmRelease, chartDir(), "--namespace", namespace}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := helmRun(t, bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := harness.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatalf("helm template output does not parse: %v", err)
	}
	return objs
}

// object is the rendered object of kind (and name, when not empty); the test fails without one.
func chartObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	t.Fatalf("no %s %q among the rendered objects %v", kind, name, objectKinds(objs))
	return nil
}

func objectKinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	slices.Sort(out)
	return out
}

// schedulerConfigOf decodes the KubeSchedulerConfiguration the chart's ConfigMap carries.
func chartSchedulerConfig(t *testing.T, objs []*unstructured.Unstructured) (raw string, cfg map[string]any) {
	t.Helper()
	cm := chartObject(t, objs, "ConfigMap", helmRelease+"-config")
	raw, _, _ = unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatalf("the ConfigMap's scheduler-config.yaml does not parse: %v\n%s", err, raw)
	}
	return raw, cfg
}

// container is the Deployment's kube-scheduler container.
func chartContainer(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := chartObject(t, objs, "Deployment", helmRelease)
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("the Deployment has %d containers; want 1", len(cs))
	}
	return cs[0].(map[string]any)
}

func nestedStr(m map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
	return fmt.Sprint(v)
}

func chartProfiles(cfg map[string]any) []string {
	var names []string
	ps, _ := cfg["profiles"].([]any)
	for _, p := range ps {
		names = append(names, fmt.Sprint(p.(map[string]any)["schedulerName"]))
	}
	return names
}

// TestHelmChart runs the chart's checks in order: the pure helm ones first, then the ones on the
// suite's control plane, with the suite's computedomain-scheduler stopped so that only the
// chart's scheduler can place ComputeDomain pods (it is restarted at the end).
func TestHelmChart(t *testing.T) {
	bin := helmBinary(t)
	t.Run("LintAndTemplate", func(t *testing.T) { testChartLintAndTemplate(t, bin) })
	t.Run("Refusals", func(t *testing.T) { testChartRefusals(t, bin) })
	t.Run("PolicyConfigMaps", func(t *testing.T) { testChartPolicyConfigMaps(t, bin) })
	t.Run("Record", func(t *testing.T) { testChartRecord(t, bin) })
	t.Run("DeployRBACIsTheChart", func(t *testing.T) { testDeployRBACIsTheChart(t, bin) })
	t.Run("SchemaMatchesValues", testChartSchemaMatchesValues)
	t.Run("ViewerIsWhatTheCLIReads", func(t *testing.T) { testChartViewerIsWhatTheCLIReads(t, bin) })
	t.Run("AlertRules", func(t *testing.T) { testChartAlertRules(t, bin) })
	t.Run("READMEIsGenerated", testChartREADMEIsGenerated)
	if t.Failed() {
		return
	}
	pauseScheduler(t, env.Cdplace)
	t.Run("SecondSchedulerPlacesDomain", func(t *testing.T) { testChartPlaces(t, bin, "secondScheduler") })
	t.Run("SingleSchedulerPlacesDomainAndPlainPod", func(t *testing.T) {
		// This release serves default-scheduler too: the suite's stock one must not also run.
		pauseScheduler(t, env.Baseline)
		testChartPlaces(t, bin, "singleScheduler")
	})
	for _, rule := range []struct{ resource, group string }{
		{"computedomains", "resource.nvidia.com"},
		{"resourceclaimtemplates", "resource.k8s.io"},
	} {
		t.Run("WithoutRule/"+rule.resource, func(t *testing.T) { testChartMissingRule(t, bin, rule.resource, rule.group) })
	}
}

// pause stops a running scheduler of the suite until the test ends.
func pauseScheduler(t *testing.T, s *harness.Scheduler) {
	t.Helper()
	if s == nil || !s.Running() {
		return
	}
	s.Stop()
	t.Cleanup(func() {
		if err := s.Restart(context.Background()); err != nil {
			t.Errorf("restart %s: %v", s.Name, err)
		}
	})
}

func testChartLintAndTemplate(t *testing.T, bin string) {
	for _, c := range []struct {
		name  string
		sets  []string
		check func(t *testing.T, objs []*unstructured.Unstructured)
	}{
		{"defaults", nil, func(t *testing.T, objs []*unstructured.Unstructured) {
			want := []string{
				"ClusterRole/" + helmRelease, "ClusterRole/" + helmRelease + "-metrics-reader", "ClusterRole/cdplace-viewer",
				"ClusterRoleBinding/" + helmRelease,
				"ConfigMap/" + helmRelease + "-config", "Deployment/" + helmRelease,
				"FlowSchema/" + helmRelease + "-helm-t",
				"Pod/" + helmRelease + "-test-readyz",
				"PodDisruptionBudget/" + helmRelease,
				"Role/" + helmRelease + "-helm-t-leader-election", "RoleBinding/" + helmRelease + "-helm-t-authentication-reader",
				"RoleBinding/" + helmRelease + "-helm-t-leader-election", "Service/" + helmRelease, "ServiceAccount/" + helmRelease,
			}
			if got := objectKinds(objs); !slices.Equal(got, want) {
				t.Errorf("rendered objects:\n got %v\nwant %v", got, want)
			}
			// The default is one process with both profiles, leading on the stock scheduler's
			// lease so the two exclude each other.
			raw, cfg := chartSchedulerConfig(t, objs)
			if got := chartProfiles(cfg); !slices.Equal(got, []string{"default-scheduler", "computedomain-scheduler"}) {
				t.Errorf("profiles %v; want default-scheduler, computedomain-scheduler", got)
			}
			if ps := cfg["profiles"].([]any); ps[0].(map[string]any)["pluginConfig"] != nil {
				t.Errorf("the default-scheduler profile carries pluginConfig; it must be upstream's defaults: %v", ps[0])
			}
			role := chartObject(t, objs, "Role", helmRelease+"-helm-t-leader-election")
			if role.GetNamespace() != "kube-system" || !chartHasRule(role, "leases") {
				t.Errorf("the leader-election Role is in %q; want kube-system, for the lease kube-scheduler", role.GetNamespace())
			}
			for path, want := range map[string]string{
				"leaderElection.leaderElect": "true", "leaderElection.resourceName": "kube-scheduler",
				"leaderElection.resourceNamespace": "kube-system", "enableProfiling": "false",
				// client-go's 50/100 capped ComputeDomain pods at 12.5/s; the chart's own rate.
				"clientConnection.qps": "300", "clientConnection.burst": "600",
			} {
				if got := nestedStr(cfg, strings.Split(path, ".")...); got != want {
					t.Errorf("config %s = %s; want %s\n%s", path, got, want, raw)
				}
			}
			ctr := chartContainer(t, objs)
			if got, want := nestedStr(ctr, "image"), lockedImage(t); got != want {
				t.Errorf("image %s; want the image make image pinned, %s", got, want)
			}
			args, _, _ := unstructured.NestedStringSlice(ctr, "args")
			if !slices.Contains(args, "--config=/etc/cdplace/scheduler-config.yaml") {
				t.Errorf("container args %v lack --config", args)
			}
			// --profiling is ignored with --config (enableProfiling: false above is what counts).
			if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--profiling") }) {
				t.Errorf("container args %v carry --profiling, which kube-scheduler ignores with --config", args)
			}
			// GOMEMLIMIT: 90% of baseMiB, the memory that is Go's (not the guests').
			if env := nestedStr(ctr, "env"); env != fmt.Sprint([]any{map[string]any{"name": "GOMEMLIMIT", "value": chartGoMemLimit}}) {
				t.Errorf("container env %s; want GOMEMLIMIT=%s", env, chartGoMemLimit)
			}
			// 1024 MiB base + maxPolicyInstances 16 x guestMemoryLimitMiB 64.
			if got := nestedStr(ctr, "resources", "limits", "memory"); got != chartMemoryLimit {
				t.Errorf("memory limit %s; want %s (baseMiB + 16 x 64)", got, chartMemoryLimit)
			}
			for path, want := range map[string]string{
				"securityContext.readOnlyRootFilesystem": "true", "securityContext.runAsNonRoot": "true",
				"securityContext.allowPrivilegeEscalation": "false", "securityContext.capabilities.drop": "[ALL]",
				"securityContext.seccompProfile.type": "RuntimeDefault",
			} {
				if got := nestedStr(ctr, strings.Split(path, ".")...); got != want {
					t.Errorf("container %s = %s; want %s", path, got, want)
				}
			}
			d := chartObject(t, objs, "Deployment", helmRelease)
			if got := nestedStr(d.Object, "spec", "replicas"); got != "2" {
				t.Errorf("replicas %s; want 2", got)
			}
			// The stock kube-scheduler's class, in any namespace; the chart creates no class.
			if got := nestedStr(d.Object, "spec", "template", "spec", "priorityClassName"); got != "system-cluster-critical" {
				t.Errorf("priorityClassName %s; want system-cluster-critical", got)
			}
			// API Priority and Fairness: the release's ServiceAccount at the stock scheduler's level.
			fs := chartObject(t, objs, "FlowSchema", helmRelease+"-helm-t")
			for path, want := range map[string]string{
				"spec.priorityLevelConfiguration.name": "workload-high", "spec.matchingPrecedence": "800",
				"spec.distinguisherMethod.type": "ByNamespace",
			} {
				if got := nestedStr(fs.Object, strings.Split(path, ".")...); got != want {
					t.Errorf("FlowSchema %s = %s; want %s", path, got, want)
				}
			}
			if got := nestedStr(fs.Object, "spec", "rules"); !strings.Contains(got, "serviceAccount:map[name:"+helmRelease+" namespace:helm-t]") || !strings.Contains(got, "clusterScope:true") {
				t.Errorf("FlowSchema rules %s; want every request of ServiceAccount helm-t/%s", got, helmRelease)
			}
			// singleScheduler replaces the stock scheduler: on the control-plane nodes (the role
			// label by existence, the common taints tolerated), amd64 or arm64.
			pod := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			if pod["nodeSelector"] != nil {
				t.Errorf("nodeSelector %v; the control-plane role goes by existence, in the node affinity", pod["nodeSelector"])
			}
			for _, taint := range []string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master", "CriticalAddonsOnly"} {
				if got := nestedStr(pod, "tolerations"); !strings.Contains(got, "key:"+taint+" operator:Exists") {
					t.Errorf("tolerations %s; want %s tolerated", got, taint)
				}
			}
			for _, want := range []string{"key:node-role.kubernetes.io/control-plane operator:Exists", "key:kubernetes.io/arch operator:In values:[amd64 arm64]"} {
				if got := nestedStr(pod, "affinity", "nodeAffinity"); !strings.Contains(got, want) {
					t.Errorf("nodeAffinity %s; want %s", got, want)
				}
			}
			// helm test: /readyz through the Service.
			tp := chartObject(t, objs, "Pod", helmRelease+"-test-readyz")
			if got := tp.GetAnnotations()["helm.sh/hook"]; got != "test" {
				t.Errorf("the test pod's helm.sh/hook is %q; want test", got)
			}
			if got := nestedStr(tp.Object, "spec", "containers"); !strings.Contains(got, "https://"+helmRelease+".helm-t.svc:10259/readyz") {
				t.Errorf("the test pod does not GET the Service's /readyz: %s", got)
			}
			if got := nestedStr(chartObject(t, objs, "PodDisruptionBudget", "").Object, "spec", "minAvailable"); got != "1" {
				t.Errorf("PodDisruptionBudget minAvailable %s; want 1", got)
			}
			for _, o := range objs {
				if ref := nestedStr(o.Object, "roleRef", "name"); strings.HasPrefix(ref, "system:") {
					t.Errorf("%s/%s binds the built-in %s; the chart has its own roles", o.GetKind(), o.GetName(), ref)
				}
			}
		}},
		{"secondScheduler", []string{"mode=secondScheduler"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			_, cfg := chartSchedulerConfig(t, objs)
			if got := chartProfiles(cfg); !slices.Equal(got, []string{"computedomain-scheduler"}) {
				t.Errorf("profiles %v; want only computedomain-scheduler", got)
			}
			if got, ns := nestedStr(cfg, "leaderElection", "resourceName"), nestedStr(cfg, "leaderElection", "resourceNamespace"); got != "computedomain-scheduler" || ns != "helm-t" {
				t.Errorf("lease %s/%s; want the chart's own helm-t/computedomain-scheduler", ns, got)
			}
			if role := chartObject(t, objs, "Role", helmRelease+"-leader-election"); role.GetNamespace() != "helm-t" {
				t.Errorf("the leader-election Role is in %q; want the release namespace", role.GetNamespace())
			}
			// Beside the stock scheduler, e.g. on a managed control plane: no control-plane selector.
			pod := chartObject(t, objs, "Deployment", helmRelease).Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			if pod["nodeSelector"] != nil || pod["tolerations"] != nil {
				t.Errorf("secondScheduler pods have nodeSelector %v, tolerations %v; want none", pod["nodeSelector"], pod["tolerations"])
			}
		}},
		{"kube-system", []string{"nodePlacement.controlPlane=any", "nodePlacement.architectures={arm64}"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			// Rendered into helm-t by the loop below; this case renders kube-system itself.
		}},
		{"TLS, ServiceMonitor with a CA, alerts, dashboard", []string{
			"tlsSecretName=sched-tls", "serviceMonitor.enabled=true", "serviceMonitor.tlsConfig.ca.secret.name=sched-ca",
			"serviceMonitor.tlsConfig.ca.secret.key=ca.crt", "prometheusRule.enabled=true", "grafanaDashboard.enabled=true",
		}, func(t *testing.T, objs []*unstructured.Unstructured) {
			ctr := chartContainer(t, objs)
			args, _, _ := unstructured.NestedStringSlice(ctr, "args")
			for _, a := range []string{"--tls-cert-file=/etc/cdplace/tls/tls.crt", "--tls-private-key-file=/etc/cdplace/tls/tls.key"} {
				if !slices.Contains(args, a) {
					t.Errorf("container args %v lack %s", args, a)
				}
			}
			sm := chartObject(t, objs, "ServiceMonitor", helmRelease)
			ep := nestedStr(sm.Object, "spec", "endpoints")
			for _, want := range []string{"authorization:map[credentials:map[key:token name:" + helmRelease + "-metrics-token] type:Bearer]",
				"ca:map[secret:map[key:ca.crt name:sched-ca]]", "serverName:" + helmRelease + ".helm-t.svc"} {
				if !strings.Contains(ep, want) {
					t.Errorf("ServiceMonitor endpoints %s lack %s", ep, want)
				}
			}
			if strings.Contains(ep, "insecureSkipVerify") || strings.Contains(ep, "bearerTokenFile") {
				t.Errorf("ServiceMonitor endpoints %s: no insecureSkipVerify (not asked for) and no deprecated bearerTokenFile", ep)
			}
			sec := chartObject(t, objs, "Secret", helmRelease+"-metrics-token")
			if nestedStr(sec.Object, "type") != "kubernetes.io/service-account-token" || sec.GetAnnotations()["kubernetes.io/service-account.name"] != helmRelease+"-metrics" {
				t.Errorf("the metrics token Secret is not the metrics ServiceAccount's token: %v", sec.Object)
			}
			crb := chartObject(t, objs, "ClusterRoleBinding", helmRelease+"-metrics-reader")
			if nestedStr(crb.Object, "roleRef", "name") != helmRelease+"-metrics-reader" {
				t.Errorf("the metrics ClusterRoleBinding binds %s", nestedStr(crb.Object, "roleRef", "name"))
			}
			chartObject(t, objs, "PrometheusRule", helmRelease)
			cm := chartObject(t, objs, "ConfigMap", helmRelease+"-dashboard")
			if cm.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("the dashboard ConfigMap's labels %v lack grafana_dashboard: \"1\"", cm.GetLabels())
			}
		}},
		{"a quota for critical pods (GKE)", []string{"criticalPodQuota.create=true"}, func(t *testing.T, objs []*unstructured.Unstructured) {
			q := chartObject(t, objs, "ResourceQuota", helmRelease+"-critical-pods")
			if got := nestedStr(q.Object, "spec", "hard", "pods"); got != "3" {
				t.Errorf("ResourceQuota pods %s; want 3 (two replicas and a surge)", got)
			}
			if got := nestedStr(q.Object, "spec", "scopeSelector"); !strings.Contains(got, "scopeName:PriorityClass") || !strings.Contains(got, "values:[system-cluster-critical]") {
				t.Errorf("ResourceQuota scopeSelector %s; want PriorityClass In [system-cluster-critical]", got)
			}
		}},
		{"the appVersion tag when the digest is emptied", []string{"image.digest="}, func(t *testing.T, objs []*unstructured.Unstructured) {
			if got := nestedStr(chartContainer(t, objs), "image"); got != "ghcr.io/cdplace/kube-scheduler:v0.37.0" {
				t.Errorf("image %s; want the appVersion tag", got)
			}
		}},
		{"digest, gates, ServiceMonitor, one replica, smaller guests", []string{
			"image.digest=sha256:" + strings.Repeat("ab", 32), "featureGates.GenericWorkload=true",
			"serviceMonitor.enabled=true", "serviceMonitor.tlsConfig.insecureSkipVerify=true", "mode=secondScheduler", "replicas=1", "plugin.args.guestMemoryLimitMiB=256", "plugin.args.maxPolicyInstances=2",
			"plugin.args.imexMode=HostManaged",
		}, func(t *testing.T, objs []*unstructured.Unstructured) {
			ctr := chartContainer(t, objs)
			if got, want := nestedStr(ctr, "image"), "ghcr.io/cdplace/kube-scheduler@sha256:"+strings.Repeat("ab", 32); got != want {
				t.Errorf("image %s; want %s", got, want)
			}
			args, _, _ := unstructured.NestedStringSlice(ctr, "args")
			if !slices.Contains(args, "--feature-gates=GenericWorkload=true") {
				t.Errorf("container args %v lack --feature-gates=GenericWorkload=true", args)
			}
			if got, want := nestedStr(ctr, "resources", "limits", "memory"), fmt.Sprintf("%dMi", chartBaseMiB+2*256); got != want {
				t.Errorf("memory limit %s; want baseMiB %d + 2 instances x 256 = %s", got, chartBaseMiB, want)
			}
			ep := nestedStr(chartObject(t, objs, "ServiceMonitor", helmRelease).Object, "spec", "endpoints")
			if !strings.Contains(ep, "insecureSkipVerify:true") {
				t.Errorf("ServiceMonitor endpoints %s: insecureSkipVerify was asked for", ep)
			}
			raw, _ := chartSchedulerConfig(t, objs)
			if !strings.Contains(raw, "imexMode: HostManaged") {
				t.Errorf("the plugin args do not carry imexMode: HostManaged:\n%s", raw)
			}
			chartObject(t, objs, "ServiceMonitor", helmRelease)
			chartObject(t, objs, "Service", helmRelease)
			cr := chartObject(t, objs, "ClusterRole", helmRelease)
			if !chartHasRule(cr, "podgroups/status") {
				t.Errorf("GenericWorkload on, but the ClusterRole lacks podgroups/status")
			}
			for _, o := range objs {
				if o.GetKind() == "PodDisruptionBudget" {
					t.Errorf("a PodDisruptionBudget with one replica would block every drain")
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := "helm-t"
			if c.name == "kube-system" {
				// In kube-system the stock system-cluster-critical class, and no class of the chart's.
				objs := chartRender(t, bin, "kube-system", c.sets...)
				d := chartObject(t, objs, "Deployment", helmRelease)
				if got := nestedStr(d.Object, "spec", "template", "spec", "priorityClassName"); got != "system-cluster-critical" {
					t.Errorf("priorityClassName %s in kube-system; want system-cluster-critical", got)
				}
				for _, o := range objs {
					if o.GetKind() == "PriorityClass" {
						t.Errorf("a PriorityClass %s rendered for kube-system", o.GetName())
					}
				}
				pod := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
				if pod["nodeSelector"] != nil || !strings.Contains(nestedStr(pod, "affinity"), "values:[arm64]") {
					t.Errorf("nodePlacement any, arm64 only: nodeSelector %v, affinity %v", pod["nodeSelector"], pod["affinity"])
				}
			}
			args := []string{"lint", "--strict", chartDir(), "--namespace", ns}
			for _, s := range c.sets {
				args = append(args, "--set", s)
			}
			if out, err := helmRun(t, bin, args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			c.check(t, chartRender(t, bin, ns, c.sets...))
		})
	}
}

// testRefusals: values the plugin or kube-scheduler would refuse at start are refused by
// `helm template` already, with the field named.
func testChartRefusals(t *testing.T, bin string) {
	for _, c := range []struct{ set, want string }{
		{"plugin.args.imexMode=Shared", "/plugin/args/imexMode': value must be one of 'DriverManaged', 'HostManaged'"},
		{"plugin.args.wholeTrays=Off", "additional properties 'wholeTrays' not allowed"},
		{"plugin.args.reserveTraysPerClique=-1", "/plugin/args/reserveTraysPerClique': minimum"},
		{"plugin.args.guestCallTimeout=soon", "/plugin/args/guestCallTimeout"},
		{"plugin.args.cliqueLabel=nvidia.com/", "/plugin/args/cliqueLabel"},
		{"image.digest=latest", "/image/digest"},
		{"mode=both", "/mode': value must be one of 'secondScheduler', 'singleScheduler'"},
		{"leaderElection.leaseName=kube-scheduler", "that is the stock scheduler's lease"},
		{"schedulerName=default-scheduler", "schedulerName must not be default-scheduler"},
		{"mode=secondScheduler,leaderElection.enabled=false", "replicas without leader election would all schedule at once"},
		// singleScheduler replaces the cluster's only scheduler: a standby, on the lease.
		{"leaderElection.enabled=false", "/leaderElection/enabled"},
		{"replicas=1", "/replicas': minimum"},
		{"priorityClass.create=true", "additional properties 'priorityClass' not allowed"},
		{"priorityClassName=", "/priorityClassName"},
		{"apiPriority.matchingPrecedence=9000", "/apiPriority/matchingPrecedence': maximum"},
		{"unknownKey=1", "additional properties 'unknownKey' not allowed"},
		{"clientConnection.qps=0", "/clientConnection/qps"},
		{"extraArgs={--kube-api-qps=100}", "--kube-api-qps is ignored by kube-scheduler when it reads --config, as the chart runs it; set clientConnection.qps instead"},
		{"extraArgs={--kube-api-burst=100}", "set clientConnection.burst instead"},
		{"extraArgs={--kubeconfig=/x}", "--kubeconfig is ignored by kube-scheduler when it reads --config"},
		{"extraArgs={--leader-elect-resource-name=x}", "--leader-elect-resource-name would override the chart's leader election"},
		{"extraArgs={--feature-gates=A=true}", "--feature-gates is set by the chart from featureGates"},
		{"extraArgs={--v=4}", "--v is set by the chart from logVerbosity"},
		{"serviceMonitor.enabled=true", "Prometheus cannot verify the scheduler's certificate"},
		{"nodePlacement.controlPlane=yes", "/nodePlacement/controlPlane': value must be one of 'auto', 'controlPlane', 'any'"},
		{"nodePlacement.architectures={s390x}", "/nodePlacement/architectures/0"},
		{"resources.limits.memory=1100Mi", "leaves 76Mi beside the policy instances' 1024Mi"},
		{"policy.configMap=p,plugin.args.policy.source=embedded", "set policy.configMap or plugin.args.policy, not both"},
		{"record.enabled=true,plugin.args.recordPath=/x", "set record.enabled or plugin.args.recordPath, not both"},
		{"record.sizeLimit=lots", "/record/sizeLimit"},
		{"shadowPolicy.configMap=Not_A_Name", "/shadowPolicy/configMap"},
	} {
		_, err := helmRun(t, bin, "template", helmRelease, chartDir(), "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: got %v; want an error containing %q", c.set, err, c.want)
		}
	}
	// One Kubernetes minor: the framework the plugin is built against changes every minor.
	for _, v := range []string{"1.36.4", "1.38.0"} {
		_, err := helmRun(t, bin, "template", helmRelease, chartDir(), "--kube-version", v)
		if err == nil || !strings.Contains(err.Error(), "chart requires kubeVersion: >=1.37.0-0 <1.38.0-0") {
			t.Errorf("--kube-version %s: got %v; want the chart's kubeVersion refusal", v, err)
		}
	}
}

func chartHasRule(cr *unstructured.Unstructured, resource string) bool {
	rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	for _, r := range rules {
		res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
		if slices.Contains(res, resource) {
			return true
		}
	}
	return false
}

// removeRule takes resource out of the rendered ClusterRole (the whole rule when it was its only
// resource); the test fails unless exactly one rule named it.
func chartRemoveRule(t *testing.T, objs []*unstructured.Unstructured, resource string) {
	t.Helper()
	cr := chartObject(t, objs, "ClusterRole", helmRelease)
	rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	var kept []any
	found := 0
	for _, r := range rules {
		rule := r.(map[string]any)
		res, _, _ := unstructured.NestedStringSlice(rule, "resources")
		if !slices.Contains(res, resource) {
			kept = append(kept, r)
			continue
		}
		found++
		if rest := slices.DeleteFunc(res, func(s string) bool { return s == resource }); len(rest) > 0 {
			_ = unstructured.SetNestedStringSlice(rule, rest, "resources")
			kept = append(kept, rule)
		}
	}
	if found != 1 {
		t.Fatalf("%d ClusterRole rules name %s; want exactly 1", found, resource)
	}
	if err := unstructured.SetNestedSlice(cr.Object, kept, "rules"); err != nil {
		t.Fatal(err)
	}
}

// chartScheduler is a release applied to the suite's API server and the scheduler started from it.
type chartScheduler struct {
	namespace string
	objs      []*unstructured.Unstructured
	sched     *harness.Scheduler
}

// install renders the chart into a new namespace, applies it server-side (the Deployment and
// the PodDisruptionBudget with dry run: the API server validates, defaults and admits them, but
// there are no kubelets to run the pods), and starts our kube-scheduler binary as the
// Deployment's container would run: the ConfigMap's configuration (with a kubeconfig instead of
// the in-cluster one), the container's flags, a token of the chart's ServiceAccount.
func chartInstall(t *testing.T, bin, namespace, mode string, edit func([]*unstructured.Unstructured), sets ...string) *chartScheduler {
	t.Helper()
	ctx := context.Background()
	c := env.CP.Client
	// Pod Security `restricted` as the README asks for the namespace; `warn` makes the API
	// server report a violation of the Deployment's pod template on the dry run.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
	}}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := chartRender(t, bin, namespace, append([]string{"mode=" + mode}, sets...)...)
	if edit != nil {
		edit(objs)
	}
	t.Cleanup(func() { chartUninstall(t, objs, namespace) })
	var stored, dry []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "PodDisruptionBudget", "Pod": // the Pod is the `helm test` hook
			dry = append(dry, o)
		case "ServiceMonitor", "PrometheusRule": // no prometheus-operator CRDs here
		default:
			stored = append(stored, o)
		}
	}
	warnings, err := env.CP.ServerSideApply(ctx, stored, harness.ApplyOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := env.CP.ServerSideApply(ctx, dry, harness.ApplyOptions{FieldManager: "helm", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if warnings = append(warnings, w...); len(warnings) > 0 {
		t.Errorf("the API server warned about the rendered objects:\n%s", strings.Join(warnings, "\n"))
	}

	sa := nestedStr(chartObject(t, objs, "Deployment", helmRelease).Object, "spec", "template", "spec", "serviceAccountName")
	token, err := env.CP.ServiceAccountToken(ctx, namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(env.CP.Dir, namespace+".kubeconfig")
	if err := env.CP.WriteKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	raw, _ := chartSchedulerConfig(t, objs)
	rendered := filepath.Join(env.CP.Dir, namespace+"-rendered-config.yaml")
	if err := os.WriteFile(rendered, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.SchedulerConfig(rendered, kubeconfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment's flags but the config path and the port, which the harness sets.
	args, _, _ := unstructured.NestedStringSlice(chartContainer(t, objs), "args")
	args = slices.DeleteFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--config=") || strings.HasPrefix(a, "--secure-port=")
	})
	// The pod runs with kube-scheduler's default paths allowed without authorization (the
	// harness also allows /metrics, which the pod does not), and authenticates and authorizes
	// the other requests through the API server as its ServiceAccount (in a pod, the in-cluster
	// configuration), with the chart's tokenreviews, subjectaccessreviews and
	// extension-apiserver-authentication-reader grants.
	args = append(args, "--authorization-always-allow-paths=/healthz,/readyz,/livez",
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
	sched, err := env.CP.StartSchedulerWithArgs(ctx, namespace, cfg, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sched.Stop)
	t.Logf("%s: scheduler %s started with %v; log %s", mode, namespace, args, sched.LogPath())
	return &chartScheduler{namespace: namespace, objs: objs, sched: sched}
}

// uninstall deletes what install applied: the cluster-scoped objects, the RoleBinding in
// kube-system, and the release namespace with the rest.
func chartUninstall(t *testing.T, objs []*unstructured.Unstructured, namespace string) {
	ctx := context.Background()
	c := env.CP.Client
	for _, o := range objs {
		var err error
		switch {
		case o.GetKind() == "ClusterRole":
			err = c.RbacV1().ClusterRoles().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "ClusterRoleBinding":
			err = c.RbacV1().ClusterRoleBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "FlowSchema":
			err = c.FlowcontrolV1().FlowSchemas().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "MutatingAdmissionPolicy":
			err = c.AdmissionregistrationV1().MutatingAdmissionPolicies().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "MutatingAdmissionPolicyBinding":
			err = c.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "RoleBinding" && o.GetNamespace() == "kube-system":
			err = c.RbacV1().RoleBindings("kube-system").Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		case o.GetKind() == "Role" && o.GetNamespace() == "kube-system":
			err = c.RbacV1().Roles("kube-system").Delete(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("uninstall %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("uninstall namespace %s: %v", namespace, err)
	}
}

// log is the scheduler's log so far.
func (cs *chartScheduler) log(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(cs.sched.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// forbidden are the log lines in which the API server refused the scheduler something.
func (cs *chartScheduler) forbidden(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(cs.log(t), "\n") {
		if strings.Contains(l, " is forbidden: ") {
			out = append(out, l)
		}
	}
	return out
}

func testChartPlaces(t *testing.T, bin, mode string) {
	short := map[string]string{"secondScheduler": "second", "singleScheduler": "single"}[mode]
	var stock *stockLease
	if mode == "singleScheduler" {
		// The stock kube-scheduler leads: the replacement must stand by until it stops.
		stock = holdStockLease(t)
	}
	// The ServiceMonitor's ServiceAccount and binding too (their objects are applied; the
	// ServiceMonitor itself needs prometheus-operator's CRD).
	cs := chartInstall(t, bin, "helm-"+short, mode, nil, "serviceMonitor.enabled=true", "serviceMonitor.tlsConfig.insecureSkipVerify=true")
	s := newScenario(t, "helm-"+short, harness.Cdplace, helmFleet, harness.PrepareOptions{})
	if stock != nil {
		s.domain("train", 2, 4)
		time.Sleep(10 * time.Second)
		if d := s.domains(); d["train"] != nil && d["train"].Bound > 0 {
			t.Fatalf("the chart's scheduler placed pods while the stock scheduler held kube-system/kube-scheduler: %s", d["train"])
		}
		stock.release()
	}
	start := time.Now()
	if stock == nil {
		s.domain("train", 2, 4)
	}
	d := s.waitFor("train's 2 pods running", 90*time.Second, all("train", 2))
	t.Logf("%s: the 2-pod domain ran %v after its Job was created: %s", mode, time.Since(start).Round(time.Millisecond), d["train"])
	s.assertNoSplits(d)
	s.assertAllOrNothing(d)
	s.assertNoRefusals()
	if mode == "secondScheduler" {
		// The dry run's warnings are read: without its container securityContext, the
		// Deployment is reported as violating Pod Security `restricted`.
		dep := chartObject(t, cs.objs, "Deployment", helmRelease).DeepCopy()
		ctrs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		delete(ctrs[0].(map[string]any), "securityContext")
		_ = unstructured.SetNestedSlice(dep.Object, ctrs, "spec", "template", "spec", "containers")
		w, err := env.CP.ServerSideApply(s.ctx, []*unstructured.Unstructured{dep}, harness.ApplyOptions{FieldManager: "helm", DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(w, "\n"), `violate PodSecurity "restricted`) {
			t.Errorf("a Deployment without its container securityContext drew no Pod Security warning: %q", w)
		}
	}
	if mode == "singleScheduler" {
		// A pod without schedulerName goes to the same process's default-scheduler profile.
		if _, err := env.CP.Client.CoreV1().Pods(s.ns).Create(s.ctx, harness.GPUPod(s.ns, "plain", 0, harness.Baseline), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPlainRunning(t, s, 1)
	}
	if !cs.sched.Running() {
		t.Fatalf("the chart's scheduler exited; log: %s", cs.sched.LogPath())
	}
	// The metric names the alerts and the dashboard query are ones this scheduler exports.
	testChartMetricNames(t, bin, cs)
	// The process fits the container's memory limit (baseMiB + maxPolicyInstances x guestMemoryLimitMiB).
	limit := nestedStr(chartContainer(t, cs.objs), "resources", "limits", "memory")
	rss, err := cs.sched.RSSBytes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: scheduler RSS %d MiB after placing the domain (container limit %s)", mode, rss>>20, limit)
	if lim, err := resource.ParseQuantity(limit); err != nil || rss >= lim.Value() {
		t.Errorf("scheduler RSS %d MiB; want below the chart's memory limit %s (%v)", rss>>20, limit, err)
	}
	// Every rule the scheduler used was granted: the API server refused it nothing.
	if f := cs.forbidden(t); len(f) > 0 {
		t.Errorf("the API server refused the chart's ServiceAccount %d times; first: %s", len(f), f[0])
	}
	if mode == "singleScheduler" {
		// It took over the stock scheduler's lease once the stock one stopped renewing it.
		lease, err := env.CP.Client.CoordinationV1().Leases("kube-system").Get(s.ctx, "kube-scheduler", metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == stockHolder {
			t.Errorf("kube-system/kube-scheduler: %v; want it held by the chart's scheduler", err)
		}
		return
	}
	// /metrics as the pod serves it (only /healthz, /readyz and /livez without authorization):
	// the ServiceMonitor's identity may read it, the scheduler's own and nobody else may not.
	testChartMetricsReader(t, cs)
	// It leads on its own lease; the stock scheduler's lease was never taken.
	lease, err := env.CP.Client.CoordinationV1().Leases(cs.namespace).Get(s.ctx, "computedomain-scheduler", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's lease %s/computedomain-scheduler: %v", cs.namespace, err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Errorf("lease %s/computedomain-scheduler has no holder", cs.namespace)
	}
	if _, err := env.CP.Client.CoordinationV1().Leases("kube-system").Get(s.ctx, "kube-scheduler", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("kube-system/kube-scheduler: got %v; want NotFound (no scheduler of this suite may take the stock lease)", err)
	}
}

// testMissingRule: the same release with one rule taken out of its ClusterRole must not place
// the domain, and the scheduler says why in its log.
func testChartMissingRule(t *testing.T, bin, resource, group string) {
	short := strings.TrimSuffix(resource, "s")
	cs := chartInstall(t, bin, "helm-no-"+short, "secondScheduler", func(objs []*unstructured.Unstructured) {
		chartRemoveRule(t, objs, resource)
	})
	s := newScenario(t, "helm-no-"+short, harness.Cdplace, helmFleet, harness.PrepareOptions{})
	s.domain("train", 2, 4)
	s.holds("train unbound without "+resource, 20*time.Second, func(d map[string]*harness.DomainState) bool {
		st := d["train"]
		return st == nil || st.Bound == 0
	})
	want := resource + "." + group + " is forbidden"
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(cs.log(t), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the scheduler's log never says %q; log: %s", want, cs.sched.LogPath())
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !cs.sched.Running() {
		t.Errorf("the scheduler exited instead of waiting for the permission; log: %s", cs.sched.LogPath())
	}
}

// stockHolder is the holder identity holdStockLease writes, as a stock kube-scheduler would.
const stockHolder = "stock-kube-scheduler_0f8e7d6c"

// stockLease is kube-system/kube-scheduler renewed as a leading stock scheduler renews it.
type stockLease struct {
	stop chan struct{}
	done chan struct{}
}

// holdStockLease creates kube-system/kube-scheduler and renews it every 2 s until release
// (or the test's end), then deletes it when the test ends.
func holdStockLease(t *testing.T) *stockLease {
	t.Helper()
	ctx := context.Background()
	leases := env.CP.Client.CoordinationV1().Leases("kube-system")
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(stockHolder), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now}}
	if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l := &stockLease{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			cur, err := leases.Get(ctx, "kube-scheduler", metav1.GetOptions{})
			if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != stockHolder {
				continue
			}
			renewed := metav1.NewMicroTime(time.Now())
			cur.Spec.RenewTime = &renewed
			_, _ = leases.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}()
	t.Cleanup(func() {
		l.release()
		_ = leases.Delete(ctx, "kube-scheduler", metav1.DeleteOptions{})
	})
	return l
}

// release stops renewing, as a stopped stock scheduler does.
func (l *stockLease) release() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// testDeployRBACIsTheChart: kube-scheduler-config/deploy/rbac.yaml (the plain manifests, which
// the e2e suite's own cdplace scheduler runs under) is the chart's RBAC rendered with
// deploy/rbac-values.yaml (`make deploy-rbac`), so the permissions have one owner. Labels are
// left out of the comparison (the file drops Helm's).
func testDeployRBACIsTheChart(t *testing.T, bin string) {
	deploy := filepath.Join(repoRoot, "kube-scheduler-config", "deploy")
	out, err := helmRun(t, bin, "template", "cdplace-scheduler", chartDir(), "--namespace", "cdplace-system",
		"-f", filepath.Join(deploy, "rbac-values.yaml"),
		"--show-only", "templates/clusterrole.yaml", "--show-only", "templates/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := harness.DecodeManifests([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(deploy, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := harness.DecodeManifests(raw)
	if err != nil {
		t.Fatal(err)
	}
	strip := func(objs []*unstructured.Unstructured) []map[string]any {
		var out []map[string]any
		for _, o := range objs {
			o = o.DeepCopy()
			unstructured.RemoveNestedField(o.Object, "metadata", "labels")
			out = append(out, o.Object)
		}
		return out
	}
	if g, w := strip(got), strip(want); !reflect.DeepEqual(g, w) {
		gy, _ := yaml.Marshal(g)
		wy, _ := yaml.Marshal(w)
		t.Errorf("kube-scheduler-config/deploy/rbac.yaml is not the chart's RBAC: run `make deploy-rbac`\n--- file:\n%s\n--- chart:\n%s", gy, wy)
	}
	for _, o := range got {
		if o.GetKind() == "ClusterRoleBinding" {
			if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); strings.HasPrefix(ref, "system:") {
				t.Errorf("%s binds the built-in %s", o.GetName(), ref)
			}
		}
	}
}

// testChartPolicyConfigMaps: policy.configMap and shadowPolicy.configMap become the plugin's
// policy and shadowPolicy sources (ConfigMaps in the release namespace), and the scheduler may
// read those two ConfigMaps and no other; without them the args name no source and no Role is
// rendered for them.
// chartPluginArgs is the ComputeDomainPlacement args of the rendered scheduler configuration.
func chartPluginArgs(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	_, cfg := chartSchedulerConfig(t, objs)
	profiles, _ := cfg["profiles"].([]any)
	for _, p := range profiles {
		pcs, _ := p.(map[string]any)["pluginConfig"].([]any)
		for _, pc := range pcs {
			if m, _ := pc.(map[string]any); m["name"] == "ComputeDomainPlacement" {
				a, _ := m["args"].(map[string]any)
				return a
			}
		}
	}
	t.Fatal("no ComputeDomainPlacement args in the rendered configuration")
	return nil
}

// testChartRecord: record.enabled sets recordPath to an emptyDir the scheduler container mounts
// (its root filesystem is read-only), of record.sizeLimit; off, neither is rendered.
func testChartRecord(t *testing.T, bin string) {
	const ns = "cdplace-system"
	const path = "/var/lib/cdplace/record"
	volumes := func(objs []*unstructured.Unstructured) (mounts, vols map[string]map[string]any) {
		d := chartObject(t, objs, "Deployment", helmRelease)
		mounts, vols = map[string]map[string]any{}, map[string]map[string]any{}
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, c := range cs {
			ms, _, _ := unstructured.NestedSlice(c.(map[string]any), "volumeMounts")
			for _, m := range ms {
				m := m.(map[string]any)
				mounts[m["name"].(string)] = m
			}
		}
		vs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
		for _, v := range vs {
			v := v.(map[string]any)
			vols[v["name"].(string)] = v
		}
		return mounts, vols
	}
	plain := chartRender(t, bin, ns)
	if a := chartPluginArgs(t, plain); a["recordPath"] != nil {
		t.Errorf("recordPath %v without record.enabled", a["recordPath"])
	}
	if m, v := volumes(plain); m["record"] != nil || v["record"] != nil {
		t.Errorf("a record volume without record.enabled: %v %v", m["record"], v["record"])
	}
	objs := chartRender(t, bin, ns, "record.enabled=true", "record.sizeLimit=2Gi")
	if a := chartPluginArgs(t, objs); a["recordPath"] != path {
		t.Errorf("recordPath %v; want %s", a["recordPath"], path)
	}
	m, v := volumes(objs)
	if m["record"] == nil || m["record"]["mountPath"] != path || m["record"]["readOnly"] == true {
		t.Errorf("the record mount %v; want a writable mount at %s", m["record"], path)
	}
	if limit, _, _ := unstructured.NestedString(v["record"], "emptyDir", "sizeLimit"); limit != "2Gi" {
		t.Errorf("the record volume %v; want an emptyDir of sizeLimit 2Gi", v["record"])
	}
}

func testChartPolicyConfigMaps(t *testing.T, bin string) {
	const ns = "cdplace-system"
	args := func(objs []*unstructured.Unstructured) map[string]any { return chartPluginArgs(t, objs) }
	plain := chartRender(t, bin, ns)
	if a := args(plain); a["policy"] != nil || a["shadowPolicy"] != nil {
		t.Errorf("without policy values the args name a source: %v %v", a["policy"], a["shadowPolicy"])
	}
	for _, o := range plain {
		if o.GetKind() == "Role" && o.GetName() == helmRelease+"-policy" {
			t.Error("a policy Role is rendered without a policy ConfigMap")
		}
	}
	objs := chartRender(t, bin, ns, "policy.configMap=cdplace-policy", "shadowPolicy.configMap=cdplace-shadow", "shadowPolicy.key=shadow.wasm")
	a := args(objs)
	want := map[string]any{"source": "configMap", "namespace": ns, "name": "cdplace-policy", "key": "policy.wasm"}
	if !reflect.DeepEqual(a["policy"], want) {
		t.Errorf("policy %v; want %v", a["policy"], want)
	}
	want = map[string]any{"source": "configMap", "namespace": ns, "name": "cdplace-shadow", "key": "shadow.wasm"}
	if !reflect.DeepEqual(a["shadowPolicy"], want) {
		t.Errorf("shadowPolicy %v; want %v", a["shadowPolicy"], want)
	}
	role := chartObject(t, objs, "Role", helmRelease+"-policy")
	if role.GetNamespace() != ns {
		t.Errorf("the policy Role is in %q; want the release namespace", role.GetNamespace())
	}
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 {
		t.Fatalf("the policy Role has %d rules; want 1", len(rules))
	}
	r := rules[0].(map[string]any)
	if fmt.Sprint(r["resources"]) != "[configmaps]" || fmt.Sprint(r["resourceNames"]) != "[cdplace-policy cdplace-shadow]" ||
		fmt.Sprint(r["verbs"]) != "[get list watch]" {
		t.Errorf("the policy Role's rule %v; want get/list/watch of configmaps cdplace-policy and cdplace-shadow only", r)
	}
	rb := chartObject(t, objs, "RoleBinding", helmRelease+"-policy")
	if name, _, _ := unstructured.NestedString(rb.Object, "roleRef", "name"); name != role.GetName() {
		t.Errorf("the policy RoleBinding binds %q", name)
	}
}
