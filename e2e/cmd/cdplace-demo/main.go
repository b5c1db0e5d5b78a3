// Command cdplace-demo starts a real control plane with the cdplace kube-scheduler (the shipped
// configuration), a simulated fleet of NVL72 racks and the driver emulators, submits the example
// ComputeDomain workloads from kube-scheduler-config/examples plus a few more, prints a rack map
// and tears everything down. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cdplace/cdplace/e2e/harness"
)

func main() {
	racks := flag.Int("racks", 4, "NVL72 racks in the fleet")
	cliques := flag.Int("cliques-per-rack", 1, "NVLink partitions per rack")
	trays := flag.Int("trays", 18, "compute trays per clique")
	root := flag.String("repo", ".", "repository root")
	keep := flag.Bool("keep-logs", false, "keep the control plane's logs")
	flag.Parse()
	if err := run(*root, harness.FleetSpec{Name: "demo", Racks: *racks, CliquesPerRack: *cliques, TraysPerClique: *trays, GPUsPerTray: 4}, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(root string, spec harness.FleetSpec, keep bool) (err error) {
	root, _ = filepath.Abs(root)
	dir := filepath.Join(root, "target", "e2e", "demo-"+time.Now().Format("20060102-150405"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	step := func(format string, a ...any) { fmt.Printf("==> "+format+"\n", a...) }
	step("starting etcd, kube-apiserver, kube-controller-manager and the cdplace kube-scheduler (logs in %s)", dir)
	start := time.Now()
	env, err := harness.Up(ctx, root, dir, harness.EnvOptions{})
	if err != nil {
		return err
	}
	defer func() {
		env.Down()
		if err == nil && !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Printf("logs kept in %s\n", dir)
		}
	}()
	step("control plane up in %v", time.Since(start).Round(100*time.Millisecond))

	c := env.CP.Client
	fleet, err := harness.CreateFleet(ctx, c, spec)
	if err != nil {
		return err
	}
	step("fleet: %d racks x %d clique(s) x %d trays of 4 GPUs = %d nodes, with gpu.nvidia.com and compute-domain.nvidia.com ResourceSlices",
		spec.Racks, spec.CliquesPerRack, spec.TraysPerClique, len(fleet.Nodes))
	prep, err := harness.StartPrepareEmulator(ctx, c, harness.PrepareOptions{UnprepareLabelLag: 2 * time.Second})
	if err != nil {
		return err
	}

	const ns = "demo"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// JobSet needs its own CRD and controller; the demo runs the Job and the plain pods.
	for _, f := range []string{"computedomain-job.yaml", "computedomain-pods.yaml"} {
		path := filepath.Join(root, "kube-scheduler-config", "examples", f)
		if _, err := env.CP.ApplyFile(ctx, path, ns); err != nil {
			return err
		}
		step("applied %s", strings.TrimPrefix(path, root+"/"))
	}
	more := []struct {
		name       string
		pods, gpus int
		what       string
	}{
		{"llm", 18, 4, "a whole rack"},
		{"finetune", 12, 4, "12 trays"},
		{"eval", 6, 4, "6 trays"},
		{"two-racks", 20, 4, "more trays than one clique has: placed as segments, each whole in one clique, in the fewest cliques"},
		{"six-gpu", 3, 2, "pods asking 2 of 4 GPUs: refused under wholeTray: Require"},
	}
	// As users write them: a ComputeDomain with numNodes 0 and no cdplace annotation, and a Job
	// whose parallelism is the domain's size.
	for _, w := range more {
		if _, err := harness.CreateComputeDomain(ctx, env.CP.Dynamic, ns, w.name, 0); err != nil {
			return err
		}
	}
	for _, w := range more {
		if err := waitTemplate(ctx, env, ns, w.name+"-channel"); err != nil {
			return err
		}
		job := harness.DomainJob(ns, w.name, w.name, harness.JobSpec{Parallelism: w.pods, Completions: w.pods, GPUs: w.gpus}, harness.Cdplace)
		if _, err := c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return err
		}
		step("ComputeDomain %s/%s: a Job of %d pods x %d GPUs (%s)", ns, w.name, w.pods, w.gpus, w.what)
	}
	for i := 0; i < 3; i++ {
		if _, err := c.CoreV1().Pods(ns).Create(ctx, harness.GPUPod(ns, fmt.Sprintf("plain-gpu-%d", i), 4, harness.Cdplace), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	step("3 plain GPU pods without a ComputeDomain")

	step("waiting for the scheduler to settle")
	rackMap, err := settle(ctx, env, fleet)
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Print(rackMap)
	spread, err := segments(ctx, env, fleet, ns, "two-racks", 20)
	if err != nil {
		return err
	}
	fmt.Printf("\n%s/two-racks: 20 of 20 pods bound as segments, %s\n", ns, spread)
	fmt.Printf("\nPrepare refusals (kubelet-side conflicts): %d\n", len(prep.Refusals()))
	for _, r := range prep.Refusals() {
		fmt.Printf("  %s/%s on %s: %s\n", r.Namespace, r.Pod, r.Node, r.Message)
	}
	if n := len(prep.Refusals()); n > 0 {
		return fmt.Errorf("%d Prepare refusals", n)
	}
	step("tearing down")
	return nil
}

// segments checks that a domain larger than one clique runs whole, in the fewest cliques that
// could hold it (its size over the largest clique, rounded up), and says how many pods each holds.
func segments(ctx context.Context, env *harness.Env, fleet *harness.Fleet, ns, name string, size int) (string, error) {
	doms, err := harness.Domains(ctx, env.CP.Client, ns, fleet.CliqueOf)
	if err != nil {
		return "", err
	}
	st := doms[name]
	if st == nil || st.Bound != size {
		return "", fmt.Errorf("ComputeDomain %s/%s should run whole as segments across cliques: %v", ns, name, st)
	}
	per := map[string]int{}
	for _, n := range st.Nodes {
		per[fleet.CliqueOf[n]]++
	}
	fewest := (size + fleet.Spec.TraysPerClique - 1) / fleet.Spec.TraysPerClique
	if len(per) > fewest {
		return "", fmt.Errorf("ComputeDomain %s/%s runs in %d cliques, more than the fewest (%d): %v", ns, name, len(per), fewest, per)
	}
	var parts []string
	for _, c := range st.Cliques {
		parts = append(parts, fmt.Sprintf("%d in rack %d (clique …%s)", per[c], fleet.RackOf[c], c[len(c)-min(len(c), 14):]))
	}
	return strings.Join(parts, ", "), nil
}

func waitTemplate(ctx context.Context, env *harness.Env, ns, name string) error {
	for {
		if _, err := env.CP.Client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("template %s/%s never appeared: %w", ns, name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle polls until every pod is running or has a scheduling reason and the map has not
// changed for 3 seconds.
func settle(ctx context.Context, env *harness.Env, fleet *harness.Fleet) (string, error) {
	var last string
	since := time.Now()
	for {
		m, err := harness.RackMap(ctx, env.CP.Client, env.CP.Dynamic, fleet)
		if err != nil {
			return "", err
		}
		pods, err := env.CP.Client.CoreV1().Pods("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		done := len(pods.Items) > 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != corev1.PodRunning && harness.PendingReason(p) == "" {
				done = false
			}
		}
		if m != last {
			last, since = m, time.Now()
		} else if done && time.Since(since) >= 3*time.Second {
			return m, nil
		}
		if err := env.CP.Check(); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("not settled: %w\n%s", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
