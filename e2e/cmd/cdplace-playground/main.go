// Command cdplace-playground starts the control plane the e2e suite uses (etcd, kube-apiserver,
// kube-controller-manager with the controllers a user expects, the cdplace kube-scheduler with the
// shipped configuration), a simulated fleet of NVL72 racks and the emulated NVIDIA DRA driver and
// kubelet, prints `export KUBECONFIG=<path>` and runs until SIGINT or SIGTERM. Then it stops every
// process it started and removes its temporary directory. A process that exits meanwhile is
// started again with a kubelet's CrashLoopBackOff, each exit and restart told on stderr.
// `make playground` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cdplace/cdplace/e2e/harness"
)

func main() {
	racks := flag.Int("racks", 4, "NVL72 racks in the fleet")
	cliques := flag.Int("cliques-per-rack", 1, "NVLink partitions (cliques) per rack")
	trays := flag.Int("trays", 18, "compute trays (nodes) per clique")
	gpus := flag.Int("gpus-per-tray", 4, "GPUs per tray")
	gates := flag.Bool("workload-gates", true, "run with the 1.37 workload gates on (GenericWorkload, "+
		"TopologyAwareWorkloadScheduling, DRAWorkloadResourceClaims) and the Workload API served, "+
		"so PodGroups can be tried; false runs the release defaults")
	root := flag.String("repo", ".", "repository root (for the shipped configuration and the binaries in target/)")
	keep := flag.Bool("keep-logs", false, "keep the temporary directory with the processes' logs on exit (it is kept anyway when the playground fails)")
	pluginConfig := flag.String("plugin-config", "", "a YAML file with the cdplace profile's pluginConfig list, replacing the shipped one "+
		"(e.g. a ComputeDomainPlacement entry whose args set guestPath to your policy component)")
	var manifests manifestFlag
	flag.Var(&manifests, "manifest", "a file of objects (YAML or JSON, multi-document) applied before the scheduler starts, "+
		"e.g. a Role and RoleBinding for a policy ConfigMap and the ConfigMap itself; repeatable, applied in order")
	flag.Parse()
	if *racks < 1 || *cliques < 1 || *trays < 1 || *gpus < 1 {
		fmt.Fprintln(os.Stderr, "playground: -racks, -cliques-per-rack, -trays and -gpus-per-tray must be at least 1")
		os.Exit(2)
	}
	spec := harness.FleetSpec{Name: "gb200", Racks: *racks, CliquesPerRack: *cliques, TraysPerClique: *trays, GPUsPerTray: *gpus}
	var plugins []byte
	if *pluginConfig != "" {
		b, err := os.ReadFile(*pluginConfig)
		if err != nil {
			fmt.Fprintln(os.Stderr, "playground: -plugin-config:", err)
			os.Exit(2)
		}
		plugins = b
	}
	for _, m := range manifests {
		if _, err := os.Stat(m); err != nil {
			fmt.Fprintln(os.Stderr, "playground: -manifest:", err)
			os.Exit(2)
		}
	}
	if err := run(*root, spec, *gates, *keep, plugins, manifests); err != nil {
		fmt.Fprintln(os.Stderr, "playground:", err)
		os.Exit(1)
	}
}

// manifestFlag is the repeatable -manifest flag.
type manifestFlag []string

func (m *manifestFlag) String() string { return strings.Join(*m, ",") }

func (m *manifestFlag) Set(v string) error {
	abs, err := filepath.Abs(v)
	if err != nil {
		return err
	}
	*m = append(*m, abs)
	return nil
}

func run(root string, spec harness.FleetSpec, gates, keep bool, pluginConfig []byte, manifests []string) (err error) {
	// Signals end the playground from here on, also while it starts; a second one kills it at
	// once (the processes it started die with it, as they are started with a parent-death signal).
	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	root, err = filepath.Abs(root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "cdplace-playground-")
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "==> "+format+"\n", a...) }
	defer func() {
		if keep || err != nil {
			say("logs kept in %s", dir)
			return
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", dir, rmErr))
		}
	}()

	gateNote := "workload gates on (Workload API served)"
	if !gates {
		gateNote = "release-default feature gates"
	}
	say("starting etcd, kube-apiserver, kube-controller-manager and the cdplace kube-scheduler, %s (logs in %s)", gateNote, dir)
	start := time.Now()
	startCtx, cancelStart := context.WithTimeout(sigCtx, 5*time.Minute)
	defer cancelStart()
	env, err := harness.Up(startCtx, root, dir, harness.EnvOptions{WorkloadGates: gates, PluginConfig: pluginConfig, Manifests: manifests})
	if err != nil {
		return startErr(sigCtx, err)
	}
	defer func() {
		say("stopping")
		env.Down()
	}()
	// The emulators live until the control plane stops.
	life, stopLife := context.WithCancel(context.Background())
	defer stopLife()
	fleet, err := harness.CreateFleet(startCtx, env.CP.Client, spec)
	if err != nil {
		return startErr(sigCtx, err)
	}
	if _, err := harness.StartPrepareEmulator(life, env.CP.Client, harness.PrepareOptions{UnprepareLabelLag: 2 * time.Second}); err != nil {
		return startErr(sigCtx, err)
	}
	say("fleet: %d racks x %d clique(s) x %d trays of %d GPUs = %d nodes, ready in %v",
		spec.Racks, spec.CliquesPerRack, spec.TraysPerClique, spec.GPUsPerTray, len(fleet.Nodes),
		time.Since(start).Round(100*time.Millisecond))

	fmt.Printf("export KUBECONFIG=%s\n", env.CP.AdminKubeconfig)
	fmt.Printf("# pods with schedulerName: %s go through cdplace; try kubectl apply -f %s; Ctrl-C stops the playground\n",
		harness.Cdplace, filepath.Join(root, "kube-scheduler-config", "examples", "computedomain-job.yaml"))

	// Run until a signal. A process that exits (etcd, kube-apiserver, kube-controller-manager or
	// the scheduler) is started again after the kubelet's CrashLoopBackOff wait, as its pod would
	// be in a cluster: 10 s, doubling to 5 min, reset after 10 min of running.
	restarter := harness.NewRestarter(env, harness.KubeletBackOff, say)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-sigCtx.Done():
			stopSignals()
			return nil
		case <-tick.C:
			restarter.Check(sigCtx)
		}
	}
}

// startErr reports a start-up cut short by a signal as no error.
func startErr(sigCtx context.Context, err error) error {
	if sigCtx.Err() != nil {
		return nil
	}
	return err
}
