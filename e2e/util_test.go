package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

func readRepoFile(parts ...string) ([]byte, error) {
	return os.ReadFile(filepath.Join(append([]string{repoRoot}, parts...)...))
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// swapCdplaceScheduler stops the shared cdplace scheduler and runs one whose profile has the
// given pluginConfig until the returned function restores the original.
func swapCdplaceScheduler(t *testing.T, pluginConfig []byte) func() {
	t.Helper()
	ctx := context.Background()
	kubeconfig := filepath.Join(env.CP.Dir, "computedomain-scheduler.kubeconfig")
	cfg, err := harness.SchedulerConfig(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), kubeconfig, pluginConfig)
	if err != nil {
		t.Fatal(err)
	}
	env.Cdplace.Stop()
	swapped, err := env.CP.StartScheduler(ctx, "computedomain-scheduler-hostmanaged", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		swapped.Stop()
		if err := env.Cdplace.Restart(ctx); err != nil {
			t.Fatalf("restart the cdplace scheduler: %v", err)
		}
	}
}

// waitPlainRunning waits until want pods without a domain label are running in the scenario.
func waitPlainRunning(t *testing.T, s *scenario, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pods, err := s.e.CP.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "!" + harness.DomainLabel})
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		var pending []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			} else {
				pending = append(pending, p.Name+": "+harness.PendingReason(&p))
			}
		}
		if running == want && len(pods.Items) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d plain pods running; pending: %q", running, want, pending)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// usedTrays counts the scenario's nodes that run at least one GPU pod.
func usedTrays(t *testing.T, s *scenario) int {
	t.Helper()
	pods, err := s.e.CP.Client.CoreV1().Pods(s.ns).List(s.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, p := range pods.Items {
		if _, ok := p.Spec.Containers[0].Resources.Requests[harness.GPUResource]; ok && p.Spec.NodeName != "" {
			used[p.Spec.NodeName] = true
		}
	}
	return len(used)
}

// gatedEnv starts a control plane of its own with the 1.37 workload gates on, for one test
// (run directory dir; stopped when the test ends); the test must finish within timeout.
func gatedEnv(t *testing.T, dir string, timeout time.Duration) *harness.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	start := time.Now()
	gated, err := harness.Up(ctx, repoRoot, filepath.Join(runDir, dir), harness.EnvOptions{WorkloadGates: true})
	if err != nil {
		t.Fatalf("control plane with the workload gates: %v", err)
	}
	t.Cleanup(gated.Down)
	t.Logf("control plane with the workload gates up in %v", time.Since(start).Round(time.Millisecond))
	return gated
}
