package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// Scheduler is one kube-scheduler process. Restart and Kill let scenarios take it down mid-way.
type Scheduler struct {
	Name       string
	ConfigPath string
	Port       int
	bin        string
	dir        string
	gates      string
	proc       *Process
}

// SchedulerConfig reads a KubeSchedulerConfiguration file as users deploy it and changes only
// clientConnection.kubeconfig (and, when pluginConfig is given, the first profile's pluginConfig,
// e.g. from kube-scheduler-config/examples/host-managed-args.yaml).
func SchedulerConfig(srcPath, kubeconfig string, pluginConfig []byte) ([]byte, error) {
	raw, err := os.ReadFile(srcPath)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", srcPath, err)
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = kubeconfig
	cfg["clientConnection"] = cc
	if pluginConfig != nil {
		var list []any
		if err := yaml.Unmarshal(pluginConfig, &list); err != nil {
			return nil, fmt.Errorf("pluginConfig: %w", err)
		}
		profiles, _ := cfg["profiles"].([]any)
		if len(profiles) == 0 {
			return nil, fmt.Errorf("%s has no profiles", srcPath)
		}
		profiles[0].(map[string]any)["pluginConfig"] = list
	}
	return yaml.Marshal(cfg)
}

// WithClientRate sets clientConnection.qps and burst of a KubeSchedulerConfiguration; qps 0
// leaves it as it is. kube-scheduler's client defaults to 50 requests a second (burst 100), and
// every bind, claim status write and Event of a scheduling attempt goes through it: a benchmark
// of scheduling throughput lifts it for every scheduler it compares, as upstream's scheduler_perf
// does (5000).
func WithClientRate(cfg []byte, qps float64, burst int) ([]byte, error) {
	if qps <= 0 {
		return cfg, nil
	}
	var m map[string]any
	if err := yaml.Unmarshal(cfg, &m); err != nil {
		return nil, fmt.Errorf("scheduler config: %w", err)
	}
	cc, _ := m["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["qps"], cc["burst"] = qps, burst
	m["clientConnection"] = cc
	return yaml.Marshal(m)
}

// BaselineSchedulerConfig is the stock default-scheduler profile, no cdplace plugin, no leader
// election: the upstream pattern's scheduler.
func BaselineSchedulerConfig(kubeconfig string) []byte {
	return StockSchedulerConfig(kubeconfig, "default-scheduler", 0)
}

// StockSchedulerConfig is one stock profile named schedulerName, without leader election;
// percentageOfNodesToScore is left to the scheduler's adaptive default when 0.
func StockSchedulerConfig(kubeconfig, schedulerName string, percentageOfNodesToScore int) []byte {
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
leaderElection:
  leaderElect: false
profiles:
- schedulerName: %s
`, kubeconfig, schedulerName)
	if percentageOfNodesToScore > 0 {
		cfg += fmt.Sprintf("  percentageOfNodesToScore: %d\n", percentageOfNodesToScore)
	}
	return []byte(cfg)
}

// ProfileURL is the scheduler's CPU profile endpoint for a profile of the given length.
func (s *Scheduler) ProfileURL(seconds int) string {
	return fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/profile?seconds=%d", s.Port, seconds)
}

// MetricsURL is the scheduler's Prometheus endpoint.
func (s *Scheduler) MetricsURL() string { return fmt.Sprintf("https://127.0.0.1:%d/metrics", s.Port) }

// StartScheduler writes config to <Dir>/<name>.yaml and runs the scheduler binary with it and
// the control plane's feature gates.
func (cp *ControlPlane) StartScheduler(ctx context.Context, name string, config []byte) (*Scheduler, error) {
	return cp.StartSchedulerWithArgs(ctx, name, config, nil)
}

// StartSchedulerWithArgs is StartScheduler with more kube-scheduler flags after the harness's own
// (--config, --bind-address, --secure-port, --v, --authorization-always-allow-paths and the
// control plane's --feature-gates; a repeated flag takes the later value, and an
// --authorization-always-allow-paths in args replaces the harness's), e.g. a Helm chart's
// container args. It waits for /healthz as StartScheduler does. A Restart of the returned
// scheduler starts it without the extra flags.
func (cp *ControlPlane) StartSchedulerWithArgs(ctx context.Context, name string, config []byte, args []string) (*Scheduler, error) {
	return cp.StartSchedulerBinary(ctx, name, cp.Bin.Scheduler, config, args)
}

// StartSchedulerBinary is StartSchedulerWithArgs with another kube-scheduler binary than the
// control plane's (e.g. upstream's stock build).
func (cp *ControlPlane) StartSchedulerBinary(ctx context.Context, name, bin string, config []byte, args []string) (*Scheduler, error) {
	path := filepath.Join(cp.Dir, name+".yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Scheduler{Name: name, ConfigPath: path, Port: port, bin: bin, dir: cp.Dir, gates: cp.FeatureGates}
	if err := s.start(ctx, args...); err != nil {
		return nil, err
	}
	cp.schedulers = append(cp.schedulers, s)
	return s, nil
}

// start runs the binary with the harness's flags, then extra (a repeated flag takes the later
// value), and waits for /healthz.
func (s *Scheduler) start(ctx context.Context, extra ...string) error {
	// /metrics and pprof are readable without a token so the benchmarks can scrape and profile
	// the scheduler (loopback only).
	// Unless extra sets them itself (a list flag: a second one would add to the first, not
	// replace it), e.g. to kube-scheduler's default, which leaves /metrics to authorization.
	allow := "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/debug/pprof/*"
	for _, a := range extra {
		if strings.HasPrefix(a, "--authorization-always-allow-paths=") {
			allow = a
		}
	}
	extra = slices.DeleteFunc(slices.Clone(extra), func(a string) bool { return a == allow })
	args := []string{"--config=" + s.ConfigPath,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(s.Port), "--v=2", allow}
	if s.gates != "" {
		args = append(args, "--feature-gates="+s.gates)
	}
	args = append(args, extra...)
	// Every scheduler the harness starts can dump its plugin's view (DumpView).
	p, err := StartProcessEnv(s.dir, s.Name, s.bin, []string{DebugDumpDirEnv + "=" + s.DumpDir()}, args...)
	if err != nil {
		return err
	}
	s.proc = p
	return WaitHealthy(ctx, p, s.Name, s.Port, 60*time.Second)
}

// WaitHealthy polls a scheduler's /healthz on 127.0.0.1:port until it answers 200, failing when
// the process exits first, ctx ends, or timeout passes.
func WaitHealthy(ctx context.Context, p *Process, name string, port int, timeout time.Duration) error {
	return waitPath(ctx, p, name, port, "/healthz", timeout)
}

// WaitReady waits, as a readiness probe does, until the scheduler's /readyz answers 200 (its
// informers' caches have synced), failing as WaitHealthy does.
func (s *Scheduler) WaitReady(ctx context.Context, timeout time.Duration) error {
	return waitPath(ctx, s.proc, s.Name, s.Port, "/readyz", timeout)
}

func waitPath(ctx context.Context, p *Process, name string, port int, path string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		// The scheduler's serving certificate is self-signed; this probe only reads a health path.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := p.ExitError(" while starting"); err != nil {
			if name != p.Name {
				return fmt.Errorf("%s: %w", name, err)
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: %s not 200 after %s; log: %s", name, path, timeout, p.LogPath)
}

// Kill ends the scheduler with SIGKILL, as a crash would.
func (s *Scheduler) Kill() { s.proc.Kill() }

// Restart starts the scheduler again with the same config and port.
func (s *Scheduler) Restart(ctx context.Context) error { return s.start(ctx) }

// Stop ends the scheduler gracefully.
func (s *Scheduler) Stop() { s.proc.Stop(10 * time.Second) }

// Running reports whether the scheduler process is alive.
func (s *Scheduler) Running() bool {
	exited, _ := s.proc.Exited()
	return !exited
}

// DebugDumpDirEnv is the environment variable that makes ComputeDomainPlacement write its view
// on SIGUSR1 (host-shim/go/pkg/computedomain/dump.go).
const DebugDumpDirEnv = "CDPLACE_DEBUG_DUMP_DIR"

// DumpDir is where the scheduler writes its view dumps.
func (s *Scheduler) DumpDir() string { return filepath.Join(s.dir, s.Name+".dump") }

// DumpView asks the scheduler for its plugin's view (SIGUSR1) and returns the dump of its first
// ComputeDomainPlacement instance: the canonical JSON of the records it has sent to the policy,
// one per object, sorted. Only for schedulers whose profile enables the plugin (without its
// handler, SIGUSR1 ends the process).
func (s *Scheduler) DumpView(ctx context.Context) ([]byte, error) {
	path := filepath.Join(s.DumpDir(), "view-1.json")
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	if err := s.proc.Signal(syscall.SIGUSR1); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return b, nil
		}
		if !os.IsNotExist(err) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s wrote no view dump to %s within 10s; log: %s", s.Name, path, s.proc.LogPath)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LogPath is where the scheduler writes its log.
func (s *Scheduler) LogPath() string { return s.proc.LogPath }
