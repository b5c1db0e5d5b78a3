package computedomain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// gauge reads a gauge of kube-scheduler's registry (0 when absent).
func gauge(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	m, _ := findMetric(t, name, labels)
	return m.GetGauge().GetValue()
}

// drain returns the Events recorded since the last drain.
func drain(e *env) []string {
	var out []string
	for len(e.events.Events) > 0 {
		out = append(out, <-e.events.Events)
	}
	return out
}

const cdKind = " {kind=ComputeDomain,apiVersion=resource.nvidia.com/v1beta1}"

// Two racks of 4: run (3 trays) runs in clique 1, a plain GPU pod holds a tray of clique 2, and
// wait (4 trays) waits for clique 2's last tray. The fleet gauges follow the fleet, and each
// ComputeDomain is told once per change: Placed when its last pod is reserved, Waiting with the
// trays it needs, the best clique's offer and its size's source; never again per retry.
func TestFleetGaugesAndDomainEvents(t *testing.T) {
	var objs []runtime.Object
	var cds []*unstructured.Unstructured
	var domainPods []any
	pods := map[string]*v1.Pod{}
	for _, cd := range []struct {
		name string
		size int
	}{{"run", 3}, {"wait", 4}} {
		cds = append(cds, computeDomain(cd.name, "uid-"+cd.name, cd.size))
		objs = append(objs, channelTemplate(cd.name, "uid-"+cd.name))
		for i := 0; i < cd.size; i++ {
			p := cdPod(cd.name, fmt.Sprintf("%s-%d", cd.name, i))
			if cd.name == "run" {
				boundTo(p, fmt.Sprintf("a-%02d", i))
			}
			pods[p.Name] = p
			domainPods = append(domainPods, p)
		}
	}
	web := boundTo(makePod("web", "", 4), "b-00")
	objs = append(objs, web)
	e := newEnv(t, "", append(rack("a", 1, 4), rack("b", 2, 4)...), cds, objs...)
	e.events.Verbose = true

	check := func(step string, want map[string]float64) {
		t.Helper()
		got := map[string]float64{
			"free1":     gauge(t, "cdplace_clique_free_trays", map[string]string{"clique": clique(1)}),
			"free2":     gauge(t, "cdplace_clique_free_trays", map[string]string{"clique": clique(2)}),
			"largest":   gauge(t, "cdplace_largest_placeable_domain_trays", nil),
			"reserved":  gauge(t, "cdplace_reserved_trays", nil),
			"running":   gauge(t, "cdplace_domains_running", nil),
			"starting":  gauge(t, "cdplace_domains_starting", nil),
			"waiting":   gauge(t, "cdplace_domains_pending", map[string]string{"reason": "waiting_for_trays"}),
			"placeable": gauge(t, "cdplace_domains_pending", map[string]string{"reason": "placeable"}),
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %s = %v, want %v", step, k, got[k], w)
			}
		}
	}
	wantEvents := func(step string, want ...string) {
		t.Helper()
		got := drain(e)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s: events\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}

	// The first status records what stands and says nothing (a restarted scheduler does not
	// repeat itself); the domains' pods come after.
	e.plugin.refreshFleet(e.ctx, true)
	check("empty", map[string]float64{"free1": 4, "free2": 3, "largest": 4, "running": 0, "waiting": 0})
	wantEvents("empty")
	e.apply(domainPods...)
	wantCode(t, "wait-0", e.schedule(pods["wait-0"]).preFilter, fwk.Unschedulable, "needs 4 free trays")
	e.plugin.refreshFleet(e.ctx, false)
	check("start", map[string]float64{"free1": 1, "free2": 3, "largest": 3, "reserved": 0, "running": 1, "starting": 0, "waiting": 1, "placeable": 0})
	wantEvents("start",
		"Normal Placed Scheduling ComputeDomain "+ns+"/run placed in NVLink clique "+clique(1)+": 3 tray(s) (size 3 from annotation cdplace.nvidia.com/size on ComputeDomain "+ns+"/run)"+cdKind,
		"Normal Waiting Scheduling ComputeDomain "+ns+"/wait needs 4 trays in one NVLink clique (size 4 from annotation cdplace.nvidia.com/size on ComputeDomain "+ns+"/wait); the best clique, "+clique(2)+", offers 3"+cdKind,
	)

	// Retries say nothing new.
	wantCode(t, "wait-0 again", e.schedule(pods["wait-0"]).preFilter, fwk.Unschedulable, "needs 4 free trays")
	e.plugin.refreshFleet(e.ctx, true)
	e.plugin.refreshFleet(e.ctx, true)
	wantEvents("retries")

	// The plain pod leaves: wait fits clique 2 (placeable: nothing to say yet).
	e.plugin.feed.deletePod(ns, "web", web.UID)
	e.plugin.refreshFleet(e.ctx, false)
	check("web gone", map[string]float64{"free2": 4, "largest": 4, "waiting": 0, "placeable": 1})
	wantEvents("web gone")

	// wait's pods are reserved one by one; Placed comes with the last.
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("wait-%d", i)
		r := e.schedule(pods[name])
		wantCode(t, name, r.preFilter, fwk.Success, "")
		if st := e.plugin.Reserve(e.ctx, r.state, pods[name], fmt.Sprintf("b-%02d", i)); !st.IsSuccess() {
			t.Fatalf("reserve %s: %v", name, st)
		}
		e.plugin.refreshFleet(e.ctx, false)
		if i < 3 {
			check(name+" reserved", map[string]float64{"starting": 1, "running": 1, "placeable": 0})
			wantEvents(name + " reserved")
		}
	}
	check("wait placed", map[string]float64{"free1": 1, "free2": 0, "largest": 1, "running": 2, "starting": 0})
	wantEvents("wait placed",
		"Normal Placed Scheduling ComputeDomain "+ns+"/wait placed in NVLink clique "+clique(2)+": 4 tray(s) (size 4 from annotation cdplace.nvidia.com/size on ComputeDomain "+ns+"/wait)"+cdKind)

	// A deleted ComputeDomain is forgotten.
	e.plugin.feed.deleteObject(cdplace.KindComputeDomain, ns, "wait", "")
	e.plugin.refreshFleet(e.ctx, false)
	e.plugin.fleet.mu.Lock()
	_, kept := e.plugin.fleet.said["uid-wait"]
	_, runKept := e.plugin.fleet.said["uid-run"]
	e.plugin.fleet.mu.Unlock()
	if kept || !runKept {
		t.Fatalf("what was said: wait kept %v (want false), run kept %v (want true)", kept, runKept)
	}
	wantEvents("wait deleted")
}

// A plugin that has run no PreFilter (a standby replica under leader election) records what
// stands without saying it; once it schedules, it says only what changes after.
func TestFleetEventsOnlyFromASchedulingPlugin(t *testing.T) {
	cds := []*unstructured.Unstructured{computeDomain("wait", "uid-wait", 4)}
	objs := []runtime.Object{channelTemplate("wait", "uid-wait"), boundTo(makePod("web", "", 4), "b-00")}
	var waitPods []any
	for i := 0; i < 4; i++ {
		waitPods = append(waitPods, cdPod("wait", fmt.Sprintf("wait-%d", i)))
	}
	e := newEnv(t, "", append(rack("a", 1, 1), rack("b", 2, 4)...), cds, objs...)
	e.plugin.refreshFleet(e.ctx, true)
	e.apply(waitPods...)
	e.plugin.refreshFleet(e.ctx, false)
	if got := drain(e); len(got) != 0 {
		t.Fatalf("a plugin that schedules nothing said %q", got)
	}
	wantCode(t, "wait-0", e.schedule(waitPods[0].(*v1.Pod)).preFilter, fwk.Unschedulable, "needs 4 free trays")
	e.plugin.refreshFleet(e.ctx, true)
	if got := drain(e); len(got) != 0 {
		t.Fatalf("nothing changed since it recorded, yet it said %q", got)
	}
	// Another plain pod takes a tray of clique 2: the best offer drops to 2.
	e.apply(boundTo(makePod("web-1", "", 4), "b-01"))
	e.plugin.refreshFleet(e.ctx, false)
	got := drain(e)
	want := "Normal Waiting ComputeDomain " + ns + "/wait needs 4 trays in one NVLink clique (size 4 from annotation cdplace.nvidia.com/size on ComputeDomain " + ns + "/wait); the best clique, " + clique(2) + ", offers 2"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("events %q, want [%q]", got, want)
	}
}

// The background refresh: started by New, it says Placed on its own once a domain's last pod is
// reserved, while pods are being scheduled; it stops with the plugin's context.
func TestFleetRefreshRunsInTheBackground(t *testing.T) {
	old := fleetInterval
	fleetInterval = 20 * time.Millisecond
	t.Cleanup(func() { fleetInterval = old })
	cds := []*unstructured.Unstructured{computeDomain("pair", "uid-pair", 2)}
	objs := []runtime.Object{channelTemplate("pair", "uid-pair")}
	var pairPods []*v1.Pod
	for i := 0; i < 2; i++ {
		p := cdPod("pair", fmt.Sprintf("pair-%d", i))
		pairPods = append(pairPods, p)
		objs = append(objs, p)
	}
	e := newEnv(t, "", rack("a", 1, 2), cds, objs...)
	if !fleetReporter.Load() {
		t.Fatal("New did not start the fleet refresh")
	}
	// Let the first status record the empty start before any pod is placed.
	waitFor(t, func() bool {
		e.plugin.fleet.mu.Lock()
		defer e.plugin.fleet.mu.Unlock()
		return e.plugin.fleet.last != nil
	})
	for i, p := range pairPods {
		r := e.schedule(p)
		wantCode(t, p.Name, r.preFilter, fwk.Success, "")
		if st := e.plugin.Reserve(e.ctx, r.state, p, fmt.Sprintf("a-%02d", i)); !st.IsSuccess() {
			t.Fatalf("reserve %s: %v", p.Name, st)
		}
	}
	want := "Normal Placed ComputeDomain " + ns + "/pair placed in NVLink clique " + clique(1) + ": 2 tray(s) (size 2 from annotation cdplace.nvidia.com/size on ComputeDomain " + ns + "/pair)"
	var got []string
	waitFor(t, func() bool {
		got = append(got, drain(e)...)
		return len(got) > 0
	})
	time.Sleep(100 * time.Millisecond) // several more refreshes: nothing more to say
	got = append(got, drain(e)...)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("events %q, want [%q]", got, want)
	}
	if v := gauge(t, "cdplace_domains_running", nil); v != 1 {
		t.Fatalf("domains running %v, want 1", v)
	}
}

// The background refresh waits fleetCostFactor times what the last status call cost: each call
// records its time, and the loop skips its ticks until that much has passed.
func TestFleetRefreshIsPacedByItsCost(t *testing.T) {
	e := newEnv(t, "", rack("a", 1, 4), nil)
	if e.plugin.fleetPaced(timeNow()) {
		t.Fatal("paced before any status")
	}
	e.plugin.refreshFleet(e.ctx, true)
	e.plugin.fleet.mu.Lock()
	at, cost := e.plugin.fleet.at, e.plugin.fleet.cost
	e.plugin.fleet.mu.Unlock()
	if cost <= 0 {
		t.Fatalf("status call cost %v recorded", cost)
	}
	wait := fleetCostFactor * cost
	if !e.plugin.fleetPaced(at.Add(wait - time.Nanosecond)) {
		t.Errorf("not paced %v after a status call of %v", wait-time.Nanosecond, cost)
	}
	if e.plugin.fleetPaced(at.Add(wait)) {
		t.Errorf("still paced %v after a status call of %v", wait, cost)
	}
}

// A domain that waits for hours keeps a live Waiting Event: the API server deletes an Event an
// hour after its last write (--event-ttl), so the unchanged Waiting is said again every
// waitingEventRefresh while the domain waits, and not before; Placed is said once.
func TestWaitingEventIsSaidAgainBeforeTheEventTTL(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	setTimeNow(func() time.Time { return now })
	t.Cleanup(func() { setTimeNow(nil) })
	cds := []*unstructured.Unstructured{computeDomain("wait", "uid-wait", 4), computeDomain("run", "uid-run", 1)}
	objs := []runtime.Object{channelTemplate("wait", "uid-wait"), channelTemplate("run", "uid-run"),
		boundTo(makePod("web", "", 4), "b-00"), boundTo(cdPod("run", "run-0"), "a-00")}
	var waitPods []any
	for i := 0; i < 4; i++ {
		waitPods = append(waitPods, cdPod("wait", fmt.Sprintf("wait-%d", i)))
	}
	e := newEnv(t, "", append(rack("a", 1, 1), rack("b", 2, 4)...), cds, objs...)
	e.plugin.refreshFleet(e.ctx, true) // the first status only records
	e.apply(waitPods...)
	wantCode(t, "wait-0", e.schedule(waitPods[0].(*v1.Pod)).preFilter, fwk.Unschedulable, "needs 4 free trays")
	waiting := "Normal Waiting ComputeDomain " + ns + "/wait needs 4 trays in one NVLink clique (size 4 from annotation cdplace.nvidia.com/size on ComputeDomain " + ns + "/wait); the best clique, " + clique(2) + ", offers 3"
	// e.apply put no new Event on run (running since before the first status); wait's first
	// Waiting comes with the first status after its pods.
	e.plugin.refreshFleet(e.ctx, true)
	if got := drain(e); len(got) != 1 || got[0] != waiting {
		t.Fatalf("first status with wait's pods: events %q, want [%q]", got, waiting)
	}
	for _, step := range []struct {
		after time.Duration
		want  []string
	}{
		{time.Minute, nil},
		{waitingEventRefresh - time.Minute - time.Second, nil}, // 1 s before the refresh is due
		{time.Second, []string{waiting}},                       // due: said again
		{waitingEventRefresh / 2, nil},
		{waitingEventRefresh / 2, []string{waiting}}, // and again, counted from the last time
		{3 * waitingEventRefresh, []string{waiting}}, // once per status, however late
		{time.Second, nil},
	} {
		now = now.Add(step.after)
		e.plugin.refreshFleet(e.ctx, true)
		if got := drain(e); strings.Join(got, "\n") != strings.Join(step.want, "\n") {
			t.Fatalf("at %v: events %q, want %q", now.Format(time.TimeOnly), got, step.want)
		}
	}
}
