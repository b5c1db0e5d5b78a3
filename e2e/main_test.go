package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

var (
	env      *harness.Env
	runDir   string
	repoRoot string
	keepLogs = flag.Bool("keep-logs", false, "keep the control plane's logs even when every test passes")
)

// TestMain starts one control plane for the whole suite (etcd, kube-apiserver,
// kube-controller-manager, the cdplace kube-scheduler and a stock default-scheduler for the
// baseline) and tears it down at the end. Logs are kept when a test fails.
func TestMain(m *testing.M) {
	flag.Parse()
	wd, _ := os.Getwd()
	repoRoot = filepath.Dir(wd)
	// The process ID keeps two suites started in the same second (a developer's and a helper's)
	// from sharing etcd's data directory.
	runDir = filepath.Join(repoRoot, "target", "e2e", fmt.Sprintf("run-%s-%d", time.Now().Format("20060102-150405"), os.Getpid()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	start := time.Now()
	var err error
	env, err = harness.Up(ctx, repoRoot, runDir, harness.EnvOptions{Baseline: true})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "control plane did not start: %v\nlogs: %s\n", err, runDir)
		os.Exit(1)
	}
	fmt.Printf("control plane up in %v at %s (logs in %s)\n", time.Since(start).Round(time.Millisecond), env.CP.URL, runDir)
	code := m.Run()
	env.Down()
	if code == 0 && !*keepLogs {
		_ = os.RemoveAll(runDir)
	} else {
		fmt.Fprintf(os.Stderr, "control plane logs kept in %s\n", runDir)
	}
	os.Exit(code)
}
