package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubectlBinary is target/e2e/bin/kubectl, built by `make e2e-binaries` from the release the
// control plane runs (e2e/tools/kubectl).
func kubectlBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(repoRoot, "target", "e2e", "bin", "kubectl")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run `make e2e-binaries` first", bin)
	}
	return bin
}

// docBlock is the fenced sh block of a doc (relative to the repository) that contains marker,
// exactly as written there.
func docBlock(t *testing.T, doc, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, doc))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, part := range strings.Split(string(b), "```sh\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if ok && strings.Contains(block, marker) {
			found = append(found, block)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d sh blocks contain %q, want 1", doc, len(found), marker)
	}
	return found[0]
}

// shellIn runs script with bash (-e, pipefail) in dir, with PATH starting at bin and KUBECONFIG
// the admin's: what a user's shell has.
func shellIn(t *testing.T, dir, bin, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+env.CP.AdminKubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestThePolicyDocsCommandsSwapARealComponent runs the swap commands of docs/operations.md as
// they are written there (extracted from the doc, so the doc and the test cannot drift) with
// kubectl of the control plane's release, on a real component (the worst-fit variant, about
// 600 KiB): the scheduler applies it (a PolicyApplied Event naming its digest, generation 2).
// The ConfigMap carries no last-applied annotation, and the client-side apply the docs warn
// against fails as they say. README's block is the same command. Then `kubectl cdplace policy
// apply` (the plugin found by kubectl on PATH) prints `applied` with the generation for the
// shipped policy (exit 0), `refused` with the check and the cause for a component that traps in
// configure (exit 1), the same verdict again for the same content, and `applied` for a shadow.
func TestThePolicyDocsCommandsSwapARealComponent(t *testing.T) {
	ctx := context.Background()
	kubectl := kubectlBinary(t)
	plugin := cliBinary(t, "kubectl-cdplace")
	best := component(t, "cdplace_guest.wasm")
	worst := component(t, "cdplace_guest_worstfit.wasm")
	trap := component(t, "cdplace_test_instantiate_trap.wasm")
	policyRBAC(t, ctx)
	putPolicy(t, ctx, best)
	t.Cleanup(func() {
		for _, cm := range []string{policyConfigMap, shadowConfigMap} {
			_ = env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), cm, metav1.DeleteOptions{})
		}
	})
	sched := policyScheduler(t, []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %[1]s, name: %[2]s, key: %[3]s}
    shadowPolicy: {source: configMap, namespace: %[1]s, name: %[4]s, key: %[3]s}
`, policyNamespace, policyConfigMap, policyKey, shadowConfigMap)))
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, sched) == 1 })

	// A user's directory: their component, kubectl and the plugin on PATH.
	work, bin := t.TempDir(), t.TempDir()
	for name, b := range map[string][]byte{"my-policy.wasm": worst, "best.wasm": best, "trap.wasm": trap} {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, from := range map[string]string{"kubectl": kubectl, "kubectl-cdplace": plugin} {
		if err := os.Symlink(from, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}

	ops := docBlock(t, "docs/operations.md", "create configmap cdplace-policy")
	if readme := docBlock(t, "README.md", "create configmap cdplace-policy"); !strings.Contains(readme, ops) {
		t.Errorf("README.md's swap commands are not docs/operations.md's:\n%s\nvs\n%s", readme, ops)
	}
	// What the docs warn against: client-side apply, which fails on the annotation's size.
	clientSide := strings.Replace(ops, "kubectl apply --server-side --force-conflicts --field-manager=cdplace -f -", "kubectl apply -f -", 1)
	if clientSide == ops {
		t.Fatalf("the docs' command is not a server-side apply:\n%s", ops)
	}
	if out, err := shellIn(t, work, bin, clientSide); err == nil || !strings.Contains(out, "Too long") {
		t.Errorf("client-side apply of a component: err %v, output %s; the docs say it fails with Too long", err, out)
	}
	out, err := shellIn(t, work, bin, ops)
	t.Logf("docs/operations.md's commands:\n%s\n%s", ops, out)
	if err != nil {
		t.Fatalf("the documented commands failed: %v\n%s", err, out)
	}
	eventNote(t, ctx, policyNamespace, "PolicyApplied", "policy "+sha256Digest(worst), "is generation 2")
	waitUntil(t, 30*time.Second, "generation 2 live", func() bool { return liveGeneration(ctx, sched) == 2 })
	cm, err := env.CP.Client.CoreV1().ConfigMaps(policyNamespace).Get(ctx, policyConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Annotations["kubectl.kubernetes.io/last-applied-configuration"]; ok {
		t.Errorf("the ConfigMap carries a last-applied annotation")
	}
	if string(cm.BinaryData[policyKey]) != string(worst) {
		t.Errorf("binaryData[%s] is %d bytes, want the %d of the component", policyKey, len(cm.BinaryData[policyKey]), len(worst))
	}

	// The plugin, as docs/operations.md and docs/cli.md show it.
	apply := func(args string, wantCode int, want ...string) string {
		t.Helper()
		start := time.Now()
		out, err := shellIn(t, work, bin, "kubectl cdplace policy apply "+args)
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl cdplace policy apply %s: exit %d after %v\n%s", args, code, time.Since(start).Round(time.Millisecond), out)
		if code != wantCode {
			t.Errorf("kubectl cdplace policy apply %s: exit %d, want %d", args, code, wantCode)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("kubectl cdplace policy apply %s: output lacks %q", args, w)
			}
		}
		return out
	}
	bestDigest, trapDigest := sha256Digest(best), sha256Digest(trap)
	apply("best.wasm", 0, bestDigest+" (", "written to ConfigMap cdplace-system/cdplace-policy key policy.wasm",
		"\napplied: policy "+bestDigest, "is generation 3 (self-test:")
	if g := liveGeneration(ctx, sched); g != 3 {
		t.Errorf("generation %d live after the plugin's apply, want 3", g)
	}
	apply("trap.wasm", 1, "\nrefused: policy "+trapDigest, "policy refused (configure)", "trapped", "generation 3 keeps deciding")
	// The same content again: the ConfigMap is unchanged and the verdict stands.
	apply("trap.wasm", 1, "already in ConfigMap", "refused (before this apply", "policy refused (configure)")
	if g := liveGeneration(ctx, sched); g != 3 {
		t.Errorf("generation %d live after the refusals, want 3", g)
	}
	apply("my-policy.wasm --shadow", 0, "written to ConfigMap cdplace-system/cdplace-shadow-policy key policy.wasm",
		"\napplied: shadow policy "+sha256Digest(worst))
}
