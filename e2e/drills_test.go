package e2e

// Fault drills (issue 13, item 7): real processes of the control plane are killed or restarted,
// or trays fail, while a ComputeDomain gang is being bound. Every drill runs on a control plane of
// its own (killing the suite's would break the other tests) and checks the same pass criteria
// (drill.finish): 0 Prepare refusals, 0 split domains, 0 lost pods (each ends bound or Pending
// with a reason), the scheduler never exits unless the drill killed it, the gang completes within
// 120 s of the fault's end, and the scheduler's view equals a fresh rebuild's within 30 s (the
// plugin's debug dump, CDPLACE_DEBUG_DUMP_DIR, compared with a second scheduler's that schedules
// nothing). They take minutes each, so they run only with CDPLACE_DRILLS=1 (make drills); the
// figures they log are recorded in docs/dev/reliability.md.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/cdplace/cdplace/e2e/harness"
)

// drillsEnv turns the drills on.
const drillsEnv = "CDPLACE_DRILLS"

// Pass criteria shared by every drill.
const (
	// gangAfterFault bounds the time from the fault's end to the gang running whole.
	gangAfterFault = 120 * time.Second
	// rebuildWithin bounds the time from a fresh scheduler being healthy to its view equalling
	// the long-running scheduler's.
	rebuildWithin = 30 * time.Second
)

// The gang every drill binds: 16 whole-tray pods of one Indexed Job, on two 18-tray cliques.
const (
	gangName = "gang"
	gangSize = 16
)

// drill is one drill's control plane, scenario and the cdplace scheduler under test.
type drill struct {
	*scenario
	sched *harness.Scheduler
	// faultEnd is when the last fault ended (the component was back, the tray gone).
	faultEnd time.Time
}

func newDrill(t *testing.T, name string) *drill {
	t.Helper()
	return newDrillWith(t, name, harness.EnvOptions{})
}

// newDrillWith is newDrill with the control plane's options (the cdplace profile's pluginConfig).
func newDrillWith(t *testing.T, name string, opts harness.EnvOptions) *drill {
	t.Helper()
	if os.Getenv(drillsEnv) != "1" {
		t.Skipf("a fault drill (minutes, kills control-plane processes): run with %s=1, e.g. make drills", drillsEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	e, err := harness.Up(ctx, repoRoot, filepath.Join(runDir, "drill-"+name), opts)
	if err != nil {
		t.Fatalf("the drill's control plane: %v", err)
	}
	t.Cleanup(e.Down)
	t.Logf("drill control plane up in %v", time.Since(start).Round(time.Millisecond))
	s := newScenarioOn(t, e, name, harness.Cdplace, twoRacks, harness.PrepareOptions{})
	return &drill{scenario: s, sched: e.Cdplace}
}

// startGang creates the gang's ComputeDomain and Job and returns once the first of its pods is
// bound (the gang is mid-binding) with how many are bound then; it fails the drill when the
// whole gang bound before it could look.
func (d *drill) startGang() int {
	d.t.Helper()
	d.domain(gangName, gangSize, 4)
	deadline := time.Now().Add(90 * time.Second)
	for {
		st := d.domains()[gangName]
		if st != nil && st.Bound > 0 {
			if st.Bound == gangSize {
				d.t.Fatalf("the whole gang bound before the fault: %s", st)
			}
			d.t.Logf("fault with %d of %d pods bound", st.Bound, gangSize)
			return st.Bound
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("no pod of the gang bound within 90s: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// finish checks the pass criteria after the fault ended and logs the drill's figures.
func (d *drill) finish() {
	d.t.Helper()
	if d.faultEnd.IsZero() {
		d.t.Fatal("the drill did not record when its fault ended")
	}
	gang := all(gangName, gangSize)
	doms := d.waitFor("the gang running whole", gangAfterFault-time.Since(d.faultEnd), func(doms map[string]*harness.DomainState) bool {
		if !d.sched.Running() {
			d.t.Fatalf("the cdplace scheduler exited; log: %s", d.sched.LogPath())
		}
		return gang(doms)
	})
	complete := time.Since(d.faultEnd)
	d.assertNoSplits(doms)
	d.assertNoRefusals()
	d.assertNoLostPods()
	if !d.sched.Running() {
		d.t.Errorf("the cdplace scheduler exited; log: %s", d.sched.LogPath())
	}
	rebuilt := d.viewMatchesRebuild(d.sched)
	d.t.Logf("DRILL %s: gang complete %.1fs after the fault ended; view equal to a fresh rebuild %.1fs after it was healthy",
		d.name, complete.Seconds(), rebuilt.Seconds())
}

// assertNoLostPods checks that every pod of the drill's namespace is bound or Pending with a
// scheduling reason.
func (d *drill) assertNoLostPods() {
	d.t.Helper()
	pods, err := d.e.CP.Client.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName == "" && harness.PendingReason(&p) == "" {
			d.t.Errorf("pod %s is neither bound nor Pending with a reason", p.Name)
		}
	}
}

// rebuildSchedulerConfig is the shipped configuration with another schedulerName and lease, so
// a scheduler started with it builds its view from scratch and schedules none of the drill's
// pods; it runs with the admin's credentials (the shipped RBAC names the shipped lease).
func rebuildSchedulerConfig(t *testing.T, e *harness.Env, name string) []byte {
	t.Helper()
	raw, err := harness.SchedulerConfig(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), e.CP.AdminKubeconfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["profiles"].([]any)[0].(map[string]any)["schedulerName"] = name
	cfg["leaderElection"].(map[string]any)["resourceName"] = name
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// viewMatchesRebuild starts a fresh scheduler beside sched and compares their view dumps until
// they are equal, for at most rebuildWithin after the fresh one is healthy; it returns how long
// that took.
func (d *drill) viewMatchesRebuild(sched *harness.Scheduler) time.Duration {
	d.t.Helper()
	fresh, err := d.e.CP.StartScheduler(d.ctx, "cdplace-rebuild", rebuildSchedulerConfig(d.t, d.e, "cdplace-rebuild"))
	if err != nil {
		d.t.Fatal(err)
	}
	defer fresh.Stop()
	start := time.Now()
	for {
		a, err := sched.DumpView(d.ctx)
		if err != nil {
			d.t.Fatal(err)
		}
		b, err := fresh.DumpView(d.ctx)
		if err != nil {
			d.t.Fatal(err)
		}
		if bytes.Equal(a, b) {
			n := len(dumpKeys(d.t, a))
			d.t.Logf("view of %s equals a fresh rebuild's (%d objects)", sched.Name, n)
			return time.Since(start)
		}
		if time.Since(start) > rebuildWithin {
			d.t.Errorf("after %v the view of %s still differs from a fresh rebuild's: %s (dumps in %s and %s)",
				rebuildWithin, sched.Name, dumpDiff(d.t, a, b), sched.DumpDir(), fresh.DumpDir())
			return time.Since(start)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// dumpedRecord is one object of a view dump (host-shim/go/pkg/computedomain/dump.go).
type dumpedRecord struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Record    []byte `json:"record"`
}

func dumpRecords(t *testing.T, dump []byte) map[string][]byte {
	t.Helper()
	var recs []dumpedRecord
	if err := json.Unmarshal(dump, &recs); err != nil {
		t.Fatalf("view dump: %v", err)
	}
	out := make(map[string][]byte, len(recs))
	for _, r := range recs {
		out[r.Kind+"/"+r.Namespace+"/"+r.Name] = r.Record
	}
	return out
}

func dumpKeys(t *testing.T, dump []byte) []string {
	t.Helper()
	var keys []string
	for k := range dumpRecords(t, dump) {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// dumpDiff names the objects only one dump has and those whose records differ (first 10 each).
func dumpDiff(t *testing.T, a, b []byte) string {
	t.Helper()
	ra, rb := dumpRecords(t, a), dumpRecords(t, b)
	var onlyA, onlyB, differ []string
	for k, v := range ra {
		w, ok := rb[k]
		switch {
		case !ok:
			onlyA = append(onlyA, k)
		case !bytes.Equal(v, w):
			differ = append(differ, k)
		}
	}
	for k := range rb {
		if _, ok := ra[k]; !ok {
			onlyB = append(onlyB, k)
		}
	}
	first := func(l []string) []string {
		sort.Strings(l)
		if len(l) > 10 {
			return append(l[:10:10], fmt.Sprintf("... %d more", len(l)-10))
		}
		return l
	}
	return fmt.Sprintf("only in the long-running view %q; only in the rebuild %q; records differ %q", first(onlyA), first(onlyB), first(differ))
}

// Drill 1: the scheduler is killed with SIGKILL while it binds the gang, and started again (as
// a kubelet would restart it). The new process waits out the dead one's lease (15 s) and
// finishes the gang in the clique it started in.
func TestDrill01SchedulerKilled(t *testing.T) {
	d := newDrill(t, "d01")
	d.startGang()
	home := d.domains()[gangName].Cliques[0]
	d.sched.Kill()
	if err := d.sched.Restart(d.ctx); err != nil {
		t.Fatal(err)
	}
	d.faultEnd = time.Now()
	d.finish()
	if c := d.domains()[gangName].Cliques; len(c) != 1 || c[0] != home {
		t.Errorf("the gang left its clique %s: %v", home, c)
	}
}

// Drill 2: kube-apiserver crashes (SIGKILL) while the gang binds and is started again at once
// on the same port and etcd; the fault ends when the new API server is ready. The outage stays
// under the scheduler's lease renew deadline (10 s), so the scheduler rides it out.
func TestDrill02APIServerRestart(t *testing.T) {
	d := newDrill(t, "d02")
	d.startGang()
	down := time.Now()
	end, err := d.e.CP.RestartComponent(d.ctx, "kube-apiserver", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	d.faultEnd = end
	t.Logf("kube-apiserver down for %.1fs", end.Sub(down).Seconds())
	d.finish()
}

// Drill 2b: kube-apiserver is away for 20 s, longer than the lease's renew deadline (10 s). As
// upstream kube-scheduler does, the scheduler gives up its leadership and exits ("Leaderelection
// lost"), so that two schedulers never bind at once; the drill checks it exits that way, restarts
// it as the kubelet would (a Deployment's restartPolicy), and then holds it to every other
// criterion. The fault ends when both are back.
func TestDrill02bAPIServerLongOutage(t *testing.T) {
	d := newDrill(t, "d02b")
	d.startGang()
	down := time.Now()
	end, err := d.e.CP.RestartComponent(d.ctx, "kube-apiserver", true, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver down for %.1fs", end.Sub(down).Seconds())
	deadline := time.Now().Add(30 * time.Second)
	for d.sched.Running() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if d.sched.Running() {
		t.Fatalf("the scheduler kept running through a 20s API server outage; the lease renew deadline is 10s")
	}
	if !logMentions(t, d.sched.LogPath(), "Leaderelection lost") {
		t.Fatalf("the scheduler exited, but not for its lost lease; log: %s", d.sched.LogPath())
	}
	if err := d.sched.Restart(d.ctx); err != nil {
		t.Fatal(err)
	}
	d.faultEnd = time.Now()
	d.finish()
}

// Drill 4: etcd is killed (SIGKILL) while the gang binds, kept down 3 s, and started again on
// its data; the fault ends when etcd is healthy.
func TestDrill04EtcdRestart(t *testing.T) {
	d := newDrill(t, "d04")
	d.startGang()
	down := time.Now()
	end, err := d.e.CP.RestartComponent(d.ctx, "etcd", true, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d.faultEnd = end
	t.Logf("etcd down for %.1fs", end.Sub(down).Seconds())
	d.finish()
}

// Drill 3: while the gang binds, a free tray of its clique goes NotReady (Ready=False and the
// not-ready NoSchedule taint, as the node lifecycle controller sets them) and a tray holding one
// of its pods is deleted (node, ResourceSlices and, as the pod garbage collector would, the pod).
// The Job replaces the pod; the clique still has exactly 16 usable trays, so the gang finishes
// there, and no pod is bound to the NotReady tray after the fault (one whose binding was in
// flight as the taint landed may stay there, as NoSchedule evicts nothing).
func TestDrill03TrayFailures(t *testing.T) {
	d := newDrill(t, "d03")
	d.startGang()
	c := d.e.CP.Client
	st := d.domains()[gangName]
	home := st.Cliques[0]
	used := map[string]bool{}
	for _, n := range st.Nodes {
		used[n] = true
	}
	victim := st.Nodes[0]
	var notReady string
	for _, n := range d.fleet.Nodes {
		if d.fleet.CliqueOf[n] == home && !used[n] {
			notReady = n
			break
		}
	}
	if notReady == "" {
		t.Fatalf("no free tray in %s: %s", home, st)
	}
	node, err := c.CoreV1().Nodes().Get(d.ctx, notReady, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			node.Status.Conditions[i].Status = corev1.ConditionFalse
			node.Status.Conditions[i].Reason = "KubeletNotReady"
			node.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	if _, err := c.CoreV1().Nodes().UpdateStatus(d.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node, err = c.CoreV1().Nodes().Get(d.ctx, notReady, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	if _, err := c.CoreV1().Nodes().Update(d.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := c.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + victim})
	if err != nil {
		t.Fatal(err)
	}
	ignoreNotFound(t, c.CoreV1().Nodes().Delete(d.ctx, victim, metav1.DeleteOptions{}))
	for _, drv := range []string{harness.GPUDriver, harness.ComputeDomainDriver} {
		ignoreNotFound(t, c.ResourceV1().ResourceSlices().Delete(d.ctx, victim+"-"+drv, metav1.DeleteOptions{}))
	}
	for _, p := range pods.Items {
		ignoreNotFound(t, c.CoreV1().Pods(d.ns).Delete(d.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	d.faultEnd = time.Now()
	t.Logf("%s NotReady, %s deleted (with %d pod(s))", notReady, victim, len(pods.Items))
	// A binding already in flight when the taint landed may still put a pod on the NotReady tray
	// (NoSchedule does not evict); such a pod is bound within a moment. Pods there 2 s after the
	// taint are those; any later one (the Job's replacement comes after its 10 s backoff) fails.
	time.Sleep(2 * time.Second)
	inFlight := map[string]bool{}
	onNotReady, err := c.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + notReady})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range onNotReady.Items {
		inFlight[p.Name] = true
		t.Logf("%s was bound to %s as the taint landed (a binding in flight)", p.Name, notReady)
	}
	d.finish()
	st = d.domains()[gangName]
	if containsString(st.Nodes, victim) {
		t.Errorf("a gang pod is on the deleted tray %s", victim)
	}
	onNotReady, err = c.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + notReady})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range onNotReady.Items {
		if !inFlight[p.Name] {
			t.Errorf("%s was bound to the NotReady tray %s after the fault", p.Name, notReady)
		}
	}
	if len(st.Cliques) != 1 || st.Cliques[0] != home {
		t.Errorf("the gang left its clique %s: %s", home, st)
	}
}

// Drill 5: two replicas of the cdplace scheduler with leader election on their own lease
// (cdplace-system/computedomain-scheduler, as shipped); the leader is killed (SIGKILL) while the
// gang binds. The standby takes the lease once it expires and finishes the gang. The failover
// gap is the time from the kill to the standby's first binding.
func TestDrill05LeaderFailover(t *testing.T) {
	d := newDrill(t, "d05")
	cfg, err := os.ReadFile(d.sched.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	standby, err := d.e.CP.StartScheduler(d.ctx, "computedomain-scheduler-standby", cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases := d.e.CP.Client.CoordinationV1().Leases("cdplace-system")
	holder := func() string {
		l, err := leases.Get(d.ctx, "computedomain-scheduler", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	leader := holder()
	if !logMentions(t, d.sched.LogPath(), "Successfully acquired lease") {
		t.Fatalf("the first replica does not lead (lease held by %q)", leader)
	}
	bound := d.startGang()
	killed := time.Now()
	d.sched.Kill()
	d.faultEnd = killed
	var took time.Duration
	for took == 0 {
		if h := holder(); h != leader && h != "" {
			took = time.Since(killed)
		}
		if time.Since(killed) > 2*time.Minute {
			t.Fatalf("the standby did not take the lease within 2m (holder %q)", holder())
		}
		time.Sleep(100 * time.Millisecond)
	}
	firstBind := time.Duration(0)
	for firstBind == 0 {
		st := d.domains()[gangName]
		if st.Bound > bound {
			firstBind = time.Since(killed)
		}
		if time.Since(killed) > gangAfterFault {
			t.Fatalf("the standby bound nothing within %v: %s", gangAfterFault, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("DRILL d05: lease taken over %.1fs after the kill; failover gap (kill to the standby's first binding) %.1fs",
		took.Seconds(), firstBind.Seconds())
	d.sched = standby
	d.finish()
}

// logMentions reports whether the log at path contains s.
func logMentions(t *testing.T, path, s string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), s)
}

// stormPods creates n one-GPU plain pods named prefix-NNNN through the cdplace profile from
// workers goroutines, each deleting (grace 0) the pod it created window pods earlier and, at the
// end, the rest: every pod of the storm is created and deleted.
func (d *drill) stormPods(prefix string, n, workers, window int) {
	d.t.Helper()
	c := d.e.CP.Client
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	del := func(name string) error {
		err := c.CoreV1().Pods(d.ns).Delete(d.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var live []string
			for i := w; i < n; i += workers {
				name := fmt.Sprintf("%s-%04d", prefix, i)
				if _, err := c.CoreV1().Pods(d.ns).Create(d.ctx, harness.GPUPod(d.ns, name, 1, harness.Cdplace), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", name, err)
					return
				}
				live = append(live, name)
				if len(live) > window {
					if err := del(live[0]); err != nil {
						errs <- fmt.Errorf("delete %s: %w", live[0], err)
						return
					}
					live = live[1:]
				}
			}
			for _, name := range live {
				if err := del(name); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		d.t.Fatal(err)
	}
}

// assertNoGhosts waits (at most rebuildWithin) until the scheduler's view has no pod of the
// drill's namespace that the API server lacks, and returns how long that took.
func (d *drill) assertNoGhosts() time.Duration {
	d.t.Helper()
	start := time.Now()
	for {
		pods, err := d.e.CP.Client.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{})
		if err != nil {
			d.t.Fatal(err)
		}
		have := map[string]bool{}
		for _, p := range pods.Items {
			have["Pod/"+d.ns+"/"+p.Name] = true
		}
		dump, err := d.sched.DumpView(d.ctx)
		if err != nil {
			d.t.Fatal(err)
		}
		var ghosts []string
		for _, k := range dumpKeys(d.t, dump) {
			if strings.HasPrefix(k, "Pod/"+d.ns+"/") && !have[k] {
				ghosts = append(ghosts, k)
			}
		}
		if len(ghosts) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > rebuildWithin {
			d.t.Errorf("%d ghost pods in the view %v after the storm: %q", len(ghosts), rebuildWithin, ghosts)
			return time.Since(start)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Drill 6: a storm of 1,000 one-GPU plain pods created and deleted (8 writers, at most 40 alive)
// while the gang binds. Afterwards the view holds no pod the API server lacks (0 ghosts) and
// equals a fresh rebuild.
func TestDrill06PodStorm(t *testing.T) {
	d := newDrill(t, "d06")
	d.startGang()
	start := time.Now()
	d.stormPods("storm", 1000, 8, 4)
	d.faultEnd = time.Now()
	t.Logf("1000 pods created and deleted in %.1fs", d.faultEnd.Sub(start).Seconds())
	clean := d.assertNoGhosts()
	t.Logf("DRILL d06: no ghost pod in the view %.1fs after the storm", clean.Seconds())
	d.finish()
}

// Drill 7: a watch that gets 410 Gone and relists. The API server runs without its watch cache
// and compacts etcd every second, and the scheduler reaches it through a proxy the drill cuts
// (every connection closed, new ones refused) for 7 s, under the lease renew deadline. While
// cut, a pod of the running gang is deleted (the Job replaces it after its 10 s backoff) and 40
// plain pods come and go; the drill checks that a watch resuming from before the cut gets 410
// Gone, which is what the scheduler's reflectors meet on reconnecting, and that its pod informer
// listed again. The view then has no ghost and equals a fresh rebuild; the gang runs whole again.
func TestDrill07WatchGone(t *testing.T) {
	if os.Getenv(drillsEnv) != "1" {
		t.Skipf("a fault drill: run with %s=1", drillsEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := harness.Up(ctx, repoRoot, filepath.Join(runDir, "drill-d07"), harness.EnvOptions{
		APIServerArgs: []string{"--watch-cache=false", "--etcd-compaction-interval=1s"}})
	if err != nil {
		t.Fatalf("the drill's control plane: %v", err)
	}
	t.Cleanup(e.Down)
	proxy, err := e.CP.StartProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	// The shipped scheduler, through the proxy.
	e.Cdplace.Stop()
	token, err := e.CP.ServiceAccountToken(ctx, "cdplace-system", "computedomain-scheduler")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(e.CP.Dir, "computedomain-scheduler-proxied.kubeconfig")
	if err := e.CP.WriteKubeconfigVia(kubeconfig, proxy.URL, token); err != nil {
		t.Fatal(err)
	}
	cfg, err := harness.SchedulerConfig(filepath.Join(repoRoot, "kube-scheduler-config", "scheduler-config.yaml"), kubeconfig, nil)
	if err != nil {
		t.Fatal(err)
	}
	sched, err := e.CP.StartScheduler(ctx, "computedomain-scheduler-proxied", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := newScenarioOn(t, e, "d07", harness.Cdplace, twoRacks, harness.PrepareOptions{})
	d := &drill{scenario: s, sched: sched}
	d.domain(gangName, gangSize, 4)
	d.waitFor("the gang running", 120*time.Second, all(gangName, gangSize))

	c := e.CP.Client
	before, err := c.CoreV1().Pods(d.ns).List(d.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	proxy.Cut()
	for _, p := range before.Items[:1] {
		ignoreNotFound(t, c.CoreV1().Pods(d.ns).Delete(d.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	d.stormPods("cut", 40, 4, 2)
	gone := false
	for !gone && time.Since(cut) < 6*time.Second {
		w, err := c.CoreV1().Pods(d.ns).Watch(d.ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			gone = true
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == 410) {
				gone = true
			}
		case <-time.After(300 * time.Millisecond):
		}
		w.Stop()
		if !gone {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !gone {
		t.Fatalf("a watch from resourceVersion %s still resumes 6s after the cut; etcd was not compacted", before.ResourceVersion)
	}
	time.Sleep(7*time.Second - time.Since(cut))
	proxy.Heal()
	d.faultEnd = time.Now()
	t.Logf("the scheduler was cut off for %.1fs; a watch from before the cut gets 410 Gone", d.faultEnd.Sub(cut).Seconds())
	clean := d.assertNoGhosts()
	t.Logf("DRILL d07: no ghost pod in the view %.1fs after the cut ended", clean.Seconds())
	d.finish()
	// client-go's reflector logs "Caches populated" after each list; a second one for pods is
	// the relist after the 410.
	log, err := os.ReadFile(sched.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), `"Caches populated" type="*v1.Pod"`); n < 2 {
		t.Errorf("the scheduler listed pods %d time(s); want a relist after the cut", n)
	}
}

// Drill 8: the faulty component (target/wasm32-wasip2/guest/cdplace_faulty_guest.wasm, plugin
// arg guestPath) in the real scheduler, with the shipped args plus a 500 ms call deadline and a
// 64 MiB memory limit. It traps, loops or exhausts its memory in PreFilter for pods in namespaces
// fault-trap…, fault-loop… and fault-oom… (guest/faulty). Each namespace gets a ComputeDomain
// of two pods and two plain pods (4 GPUs, CPU only). The scheduler stays up, the plain pods run
// (also one created after the faults), and every ComputeDomain pod waits with the host's reason
// for the failure.
func TestDrill08FaultyGuest(t *testing.T) {
	if os.Getenv(drillsEnv) != "1" {
		t.Skipf("a fault drill: run with %s=1", drillsEnv)
	}
	faulty := filepath.Join(repoRoot, "target", "wasm32-wasip2", "guest", "cdplace_faulty_guest.wasm")
	if _, err := os.Stat(faulty); err != nil {
		t.Fatalf("the faulty component is built by `make guest`: %v", err)
	}
	args := fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    imexMode: DriverManaged
    wholeTray: Require
    cliqueLabel: nvidia.com/gpu.clique
    guestPath: %q
    guestCallTimeout: 500ms
    guestMemoryLimitMiB: 64
`, faulty)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e, err := harness.Up(ctx, repoRoot, filepath.Join(runDir, "drill-d08"), harness.EnvOptions{PluginConfig: []byte(args)})
	if err != nil {
		t.Fatalf("the drill's control plane: %v", err)
	}
	t.Cleanup(e.Down)
	small := harness.FleetSpec{Racks: 1, CliquesPerRack: 1, TraysPerClique: 4, GPUsPerTray: 4}
	faults := []struct{ name, reason string }{
		{"trap", "policy guest trapped"},
		{"loop", "policy guest exceeded its deadline of 500ms"},
		{"oom", "policy guest exceeded its memory limit"},
	}
	scenarios := map[string]*scenario{}
	for _, f := range faults {
		s := newScenarioOn(t, e, "fault-"+f.name, harness.Cdplace, small, harness.PrepareOptions{})
		scenarios[f.name] = s
		s.annotatedDomain("cd", 2)
		s.pods("cd", 0, 2, 4)
		for _, p := range []struct {
			name string
			gpus int
		}{{"plain-gpu", 4}, {"plain-cpu", 0}} {
			if _, err := e.CP.Client.CoreV1().Pods(s.ns).Create(s.ctx, harness.GPUPod(s.ns, p.name, p.gpus, harness.Cdplace), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(plain int) {
		t.Helper()
		for _, f := range faults {
			s := scenarios[f.name]
			waitPlainRunning(t, s, plain)
			doms := s.waitFor("cd's pods pending with the "+f.name+" reason", 60*time.Second, func(d map[string]*harness.DomainState) bool {
				st := d["cd"]
				return st != nil && st.Pods == 2 && st.Bound == 0 && strings.Contains(strings.Join(st.Reasons, "\n"), f.reason)
			})
			t.Logf("%s: cd waits with %q", f.name, doms["cd"].Reasons)
			s.assertNoRefusals()
			if !e.Cdplace.Running() {
				t.Fatalf("the scheduler exited; log: %s", e.Cdplace.LogPath())
			}
		}
	}
	check(2)
	// The faults keep firing on every retry; the scheduler keeps serving plain pods.
	time.Sleep(15 * time.Second)
	for _, f := range faults {
		s := scenarios[f.name]
		if _, err := e.CP.Client.CoreV1().Pods(s.ns).Create(s.ctx, harness.GPUPod(s.ns, "plain-late", 4, harness.Cdplace), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	check(3)
	t.Logf("DRILL d08: the scheduler stayed up through every fault; plain pods scheduled; ComputeDomain pods wait with the host's reason")
}

// Drill 9: the policy swapped every 2 s (the policy ConfigMap replaced, alternating the shipped
// best fit and the worst-fit component) during storms of 1,000 one-GPU plain pods (back to back,
// until at least 10 swaps) while the gang binds. Every swap is applied (none refused: the
// self-test runs on a view in flux), no policy call fails, and the shared pass criteria hold:
// the gang whole, no split, no Prepare refusal, no lost pod, the scheduler never restarted, the
// view equal to a fresh rebuild.
func TestDrill09SwapUnderStorm(t *testing.T) {
	best := component(t, "cdplace_guest.wasm")
	worst := component(t, "cdplace_guest_worstfit.wasm")
	d := newDrillWith(t, "d09", harness.EnvOptions{PluginConfig: []byte(fmt.Sprintf(`- name: ComputeDomainPlacement
  args:
    policy: {source: configMap, namespace: %s, name: %s, key: %s}
`, policyNamespace, policyConfigMap, policyKey))})
	ctx, c := d.ctx, d.e.CP.Client
	if _, err := c.RbacV1().Roles(policyNamespace).Create(ctx, policyRole(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RbacV1().RoleBindings(policyNamespace).Create(ctx, policyRoleBinding(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	put := func(wasm []byte) {
		cms := c.CoreV1().ConfigMaps(policyNamespace)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policyConfigMap, Namespace: policyNamespace},
			BinaryData: map[string][]byte{policyKey: wasm}}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if err != nil {
				t.Error(err)
			}
		} else if err != nil {
			t.Error(err)
		}
	}
	put(best)
	url := d.sched.MetricsURL()
	waitUntil(t, 60*time.Second, "the scheduler's metrics", func() bool { return liveGeneration(ctx, d.sched) == 1 })
	before, err := harness.ScrapeCounters(ctx, url, "cdplace_policy_swaps_total", "cdplace_policy_call_errors_total", "cdplace_policy_violations_total")
	if err != nil {
		t.Fatal(err)
	}
	d.startGang()
	stop := make(chan struct{})
	swaps := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				swaps <- n
				return
			case <-tick.C:
				n++
				if n%2 == 1 {
					put(worst)
				} else {
					put(best)
				}
			}
		}
	}()
	// Storms of 1,000 pods back to back until at least 10 swaps happened during one.
	start := time.Now()
	storms := 0
	for storms == 0 || time.Since(start) < 21*time.Second {
		storms++
		d.stormPods(fmt.Sprintf("swap%d", storms), 1000, 8, 4)
	}
	close(stop)
	n := <-swaps
	d.faultEnd = time.Now()
	waitUntil(t, 60*time.Second, fmt.Sprintf("generation %d", n+1), func() bool { return liveGeneration(ctx, d.sched) == n+1 })
	after, err := harness.ScrapeCounters(ctx, url, "cdplace_policy_swaps_total", "cdplace_policy_call_errors_total", "cdplace_policy_violations_total")
	if err != nil {
		t.Fatal(err)
	}
	delta := func(k string) float64 { return after[k] - before[k] }
	if a := delta("cdplace_policy_swaps_total{reason=passed,result=applied}"); int(a) != n {
		t.Errorf("%v swaps applied, want %d (refused: %v)", a, n, after)
	}
	// A storm's own cycles end in errors (a pod deleted while it binds), with or without swaps;
	// what a swap may not cause is a failed policy call or a refused answer.
	failed := 0.0
	for k, v := range after {
		if strings.HasPrefix(k, "cdplace_policy_call_errors_total") || strings.HasPrefix(k, "cdplace_policy_violations_total") {
			failed += v - before[k]
		}
	}
	if failed != 0 {
		t.Errorf("%v policy calls failed or answers were refused during the swaps", failed)
	}
	t.Logf("%d storms of 1000 pods created and deleted in %.1fs with %d policy swaps", storms, d.faultEnd.Sub(start).Seconds(), n)
	t.Logf("DRILL d09: %d swaps applied during %d storms, 0 refused, 0 failed policy calls", n, storms)
	d.finish()
}
