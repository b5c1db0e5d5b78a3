package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

// schedulers keeps the right process behind the computedomain-scheduler profile: the shipped one
// (env.Cdplace) or one with another pluginConfig, handing the leader lease over between them.
type schedulers struct {
	env     *harness.Env
	started int // schedulers started with another pluginConfig, for unique process names
	root    string
	active  *harness.Scheduler
	key     string // the active pluginConfig; "" as shipped
}

func (m *schedulers) use(ctx context.Context, cfg config) (time.Duration, error) {
	start := time.Now()
	if cfg.Profile != harness.Cdplace {
		return 0, nil
	}
	key := string(cfg.PluginConfig)
	if key == m.key {
		return time.Since(start), m.waitLeader(ctx, "")
	}
	old := m.holder(ctx)
	m.active.Stop()
	if cfg.PluginConfig == nil {
		if err := m.env.Cdplace.Restart(ctx); err != nil {
			return 0, fmt.Errorf("restart the shipped cdplace scheduler: %w", err)
		}
		m.active = m.env.Cdplace
	} else {
		kubeconfig := filepath.Join(m.env.CP.Dir, "computedomain-scheduler.kubeconfig")
		sc, err := harness.SchedulerConfig(filepath.Join(m.root, "kube-scheduler-config", "scheduler-config.yaml"), kubeconfig, cfg.PluginConfig)
		if err != nil {
			return 0, err
		}
		m.started++
		s, err := m.env.CP.StartScheduler(ctx, fmt.Sprintf("computedomain-scheduler-%s-%d", cfg.Name, m.started), sc)
		if err != nil {
			return 0, err
		}
		m.active = s
	}
	m.key = key
	return time.Since(start), m.waitLeader(ctx, old)
}

func (m *schedulers) holder(ctx context.Context) string {
	l, err := m.env.CP.Client.CoordinationV1().Leases("cdplace-system").Get(ctx, "computedomain-scheduler", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// waitLeader waits until a scheduler other than old holds the lease (the shipped config releases
// it on a graceful stop, so this takes a retry period, about 2 s).
func (m *schedulers) waitLeader(ctx context.Context, old string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		if h := m.holder(ctx); h != "" && h != old {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no new computedomain-scheduler leader after 90s (log: %s)", m.active.LogPath())
		}
		if !m.active.Running() {
			return fmt.Errorf("the computedomain-scheduler exited (log: %s)", m.active.LogPath())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
