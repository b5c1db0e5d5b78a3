package harness

import (
	"context"
	"fmt"
	"path/filepath"
)

// EnvOptions chooses what Up starts besides the control plane.
type EnvOptions struct {
	// Baseline also starts a stock default-scheduler (no cdplace plugin).
	Baseline bool
	// PluginConfig, when set, replaces the cdplace profile's pluginConfig (a YAML list such as
	// kube-scheduler-config/examples/host-managed-args.yaml).
	PluginConfig []byte
	// WorkloadGates runs the control plane and the schedulers with the 1.37 workload gates on
	// and the Workload API served (see Options).
	WorkloadGates bool
	// APIServerArgs are added to kube-apiserver's flags (Options.APIServerArgs).
	APIServerArgs []string
	// ClientQPS and ClientBurst, when ClientQPS > 0, set clientConnection.qps and burst of both
	// schedulers (see WithClientRate); otherwise they keep kube-scheduler's 50 and 100.
	ClientQPS   float64
	ClientBurst int
	// Manifests are files of objects (YAML or JSON, multi-document) applied after the
	// scheduler's namespace and RBAC and before any scheduler starts, in order: a Role for a
	// policy ConfigMap, the ConfigMap itself, ... (so the scheduler's informers find them at once
	// instead of backing off on a refused watch).
	Manifests []string
}

// Env is a control plane ready for ComputeDomain workloads: the CRD, the DeviceClasses, the
// scheduler's namespace, ServiceAccount and RBAC from kube-scheduler-config/deploy, the driver
// emulator, and the cdplace kube-scheduler running with the shipped configuration and its own
// ServiceAccount's token (so the shipped RBAC is what it runs with).
type Env struct {
	RepoRoot string
	CP       *ControlPlane
	Cdplace  *Scheduler
	Baseline *Scheduler
	Driver   *DriverEmulator

	stop context.CancelFunc
}

// Up starts an Env under dir; the caller must call Down. ctx bounds the start only; what runs
// afterwards (the driver emulator) lives until Down.
func Up(ctx context.Context, repoRoot, dir string, opts EnvOptions) (*Env, error) {
	bins, err := ResolveBinaries(repoRoot)
	if err != nil {
		return nil, err
	}
	cp, err := StartWith(ctx, dir, bins, Options{WorkloadGates: opts.WorkloadGates, APIServerArgs: opts.APIServerArgs})
	if err != nil {
		return nil, err
	}
	env := &Env{RepoRoot: repoRoot, CP: cp}
	if err := env.setup(ctx, opts); err != nil {
		cp.Stop()
		return nil, err
	}
	return env, nil
}

func (env *Env) setup(ctx context.Context, opts EnvOptions) error {
	cp, root := env.CP, env.RepoRoot
	if _, err := cp.ApplyFile(ctx, filepath.Join(root, "e2e", "manifests", "computedomain-crd.yaml"), ""); err != nil {
		return err
	}
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		if _, err := cp.ApplyFile(ctx, filepath.Join(root, "kube-scheduler-config", "deploy", f), "cdplace-system"); err != nil {
			return err
		}
	}
	if err := DeviceClasses(ctx, cp.Client, false); err != nil {
		return fmt.Errorf("device classes: %w", err)
	}
	for _, f := range opts.Manifests {
		if _, err := cp.ApplyFile(ctx, f, "default"); err != nil {
			return fmt.Errorf("manifest %s: %w", f, err)
		}
	}
	var err error
	var life context.Context
	life, env.stop = context.WithCancel(context.Background())
	if env.Driver, err = StartDriverEmulator(life, cp.Client, cp.Dynamic); err != nil {
		return err
	}
	token, err := cp.ServiceAccountToken(ctx, "cdplace-system", "computedomain-scheduler")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(cp.Dir, "computedomain-scheduler.kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig, token); err != nil {
		return err
	}
	cfg, err := SchedulerConfig(filepath.Join(root, "kube-scheduler-config", "scheduler-config.yaml"), kubeconfig, opts.PluginConfig)
	if err != nil {
		return err
	}
	if cfg, err = WithClientRate(cfg, opts.ClientQPS, opts.ClientBurst); err != nil {
		return err
	}
	if env.Cdplace, err = cp.StartScheduler(ctx, "computedomain-scheduler", cfg); err != nil {
		return err
	}
	if opts.Baseline {
		base, err := WithClientRate(BaselineSchedulerConfig(cp.AdminKubeconfig), opts.ClientQPS, opts.ClientBurst)
		if err != nil {
			return err
		}
		if env.Baseline, err = cp.StartScheduler(ctx, "default-scheduler", base); err != nil {
			return err
		}
	}
	return nil
}

// Down stops every process.
func (env *Env) Down() {
	if env.stop != nil {
		env.stop()
	}
	env.CP.Stop()
}
