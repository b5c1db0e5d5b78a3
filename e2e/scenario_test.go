package e2e

import (
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/cdplace/cdplace/e2e/harness"
)

// scenario is one test's namespace, fleet and Prepare emulator on the shared control plane.
type scenario struct {
	t       *testing.T
	ctx     context.Context
	e       *harness.Env
	name    string
	ns      string
	profile harness.Profile
	fleet   *harness.Fleet
	prep    *harness.PrepareEmulator
	watch   *domainWatch // nil unless the scenario watches its domains
}

// defaultLag is how long a node label outlives its domain's last claim unless a scenario says
// otherwise; long enough to be seen, short enough to keep the suite quick.
const defaultLag = 2 * time.Second

func newScenario(t *testing.T, name string, profile harness.Profile, spec harness.FleetSpec, prep harness.PrepareOptions) *scenario {
	t.Helper()
	return newScenarioOn(t, env, name, profile, spec, prep)
}

// newScenarioOn is newScenario on another control plane than the suite's (e.g. one with the
// workload gates on).
func newScenarioOn(t *testing.T, e *harness.Env, name string, profile harness.Profile, spec harness.FleetSpec, prep harness.PrepareOptions) *scenario {
	t.Helper()
	if err := e.CP.Check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	short := "cdp"
	if profile == harness.Baseline {
		short = "base"
	}
	s := &scenario{t: t, ctx: ctx, e: e, name: name, ns: name + "-" + short, profile: profile}
	spec.Name = s.ns
	prep.Fleet = s.ns
	if prep.UnprepareLabelLag == 0 {
		prep.UnprepareLabelLag = defaultLag
	}
	c := e.CP.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.fleet, err = harness.CreateFleet(ctx, c, spec); err != nil {
		t.Fatal(err)
	}
	if s.prep, err = harness.StartPrepareEmulator(ctx, c, prep); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dump()
		}
		s.teardown()
		cancel()
	})
	return s
}

// teardown deletes the scenario's workloads, fleet and namespace, leaving the control plane for
// the next.
func (s *scenario) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.e.CP.Client
	_ = harness.DeleteWorkloads(ctx, c, s.e.CP.Dynamic, s.ns)
	_ = c.CoreV1().Pods(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
	_ = s.e.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	_ = harness.DeleteFleet(ctx, c, s.fleet)
	// The namespace controller finishes the rest in the background.
	_ = c.CoreV1().Namespaces().Delete(ctx, s.ns, metav1.DeleteOptions{})
}

func (s *scenario) dump() {
	doms, err := harness.Domains(s.ctx, s.e.CP.Client, s.ns, s.fleet.CliqueOf)
	if err == nil {
		s.t.Logf("domains at failure:\n%s", harness.Summary(doms))
	}
	for _, r := range s.prep.Refusals() {
		s.t.Logf("refusal: %s/%s on %s: %s", r.Namespace, r.Pod, r.Node, r.Message)
	}
	logs := []string{s.e.Cdplace.LogPath()}
	if s.e.Baseline != nil {
		logs = append(logs, s.e.Baseline.LogPath())
	}
	s.t.Logf("scheduler logs: %s", strings.Join(logs, ", "))
}

// domain creates a ComputeDomain as users write it (numNodes 0, no cdplace annotation), waits
// for the driver emulator's template, then creates an Indexed Job of pods pods (parallelism =
// completions) named like the domain, whose pods join it.
func (s *scenario) domain(name string, pods, gpus int) {
	s.t.Helper()
	s.createDomain(name, 0)
	s.job(name, name, harness.JobSpec{Parallelism: pods, Completions: pods, GPUs: gpus})
}

// annotatedDomain creates a ComputeDomain with cdplace's size annotation and no pods.
func (s *scenario) annotatedDomain(name string, size int) {
	s.t.Helper()
	s.createDomain(name, size)
}

// createDomain creates a ComputeDomain (with the size annotation when size > 0) and waits for
// its channel template.
func (s *scenario) createDomain(name string, size int) {
	s.t.Helper()
	s.createCD(harness.ComputeDomain(s.ns, name, size))
}

// createCD creates a ComputeDomain object and waits for the driver emulator's template.
func (s *scenario) createCD(cd *unstructured.Unstructured) {
	s.t.Helper()
	cd.SetNamespace(s.ns)
	if _, err := s.e.CP.Dynamic.Resource(harness.ComputeDomainGVR).Namespace(s.ns).Create(s.ctx, cd, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
	s.waitTemplate(cd.GetName())
}

func (s *scenario) waitTemplate(name string) {
	s.t.Helper()
	s.waitFor("template of "+name, 30*time.Second, func(map[string]*harness.DomainState) bool {
		_, err := s.e.CP.Client.ResourceV1().ResourceClaimTemplates(s.ns).Get(s.ctx, name+"-channel", metav1.GetOptions{})
		return err == nil
	})
}

// job creates a Job named name whose pods join domain cd, through the scenario's profile.
func (s *scenario) job(name, cd string, spec harness.JobSpec) {
	s.t.Helper()
	if _, err := s.e.CP.Client.BatchV1().Jobs(s.ns).Create(s.ctx, harness.DomainJob(s.ns, name, cd, spec, s.profile), metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// deleteDomainJob deletes the Job named like the domain, as a user does, and waits until its
// pods are gone.
func (s *scenario) deleteDomainJob(name string) {
	s.t.Helper()
	if err := harness.DeleteJob(s.ctx, s.e.CP.Client, s.ns, name); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(name+"'s pods gone", 30*time.Second, func(d map[string]*harness.DomainState) bool { return d[name] == nil })
}

// pods creates bare pods [from, to) of domain name, one after the other.
func (s *scenario) pods(name string, from, to, gpus int) {
	s.t.Helper()
	if err := harness.CreateDomainPods(s.ctx, s.e.CP.Client, s.ns, name, from, to, gpus, s.profile); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scenario) domains() map[string]*harness.DomainState {
	s.t.Helper()
	d, err := harness.Domains(s.ctx, s.e.CP.Client, s.ns, s.fleet.CliqueOf)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// waitFor polls cond with the domains' state until it holds or timeout passes.
func (s *scenario) waitFor(what string, timeout time.Duration, cond func(map[string]*harness.DomainState) bool) map[string]*harness.DomainState {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := s.domains()
		if cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out after %v waiting for %s; domains:\n%s", timeout, what, harness.Summary(d))
		}
		if s.watch != nil {
			if stall := s.watch.stall(); stall != "" {
				s.t.Fatalf("all-or-nothing broken while waiting for %s: %s; domains:\n%s", what, stall, harness.Summary(d))
			}
		}
		if err := s.e.CP.Check(); err != nil {
			s.t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// holds asserts cond for the whole of d (what must not happen while the cluster settles).
func (s *scenario) holds(what string, d time.Duration, cond func(map[string]*harness.DomainState) bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if doms := s.domains(); !cond(doms) {
			s.t.Fatalf("%s stopped holding; domains:\n%s", what, harness.Summary(doms))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// settle waits until every pod is bound or has a scheduling reason and nothing changed for 3s.
func (s *scenario) settle(timeout time.Duration) map[string]*harness.DomainState {
	s.t.Helper()
	var last string
	var since time.Time
	return s.waitFor("the scenario to settle", timeout, func(d map[string]*harness.DomainState) bool {
		for _, st := range d {
			pendingWithReason := len(st.Reasons) > 0
			if st.Bound < st.Pods && !pendingWithReason {
				last = ""
				return false
			}
		}
		fp := harness.Summary(d) + fmt.Sprint(len(s.prep.Refusals()) > 0)
		if fp != last {
			last, since = fp, time.Now()
			return false
		}
		return time.Since(since) >= 3*time.Second
	})
}

// all is true when domain name has want pods and all are running.
func all(name string, want int) func(map[string]*harness.DomainState) bool {
	return func(d map[string]*harness.DomainState) bool {
		st := d[name]
		return st != nil && st.Pods == want && st.Running == want
	}
}

// ready waits for a domain the scenario builds on: all its pods running through cdplace; through
// the baseline, only for the cluster to settle (the baseline may leave it partly placed, and the
// scenario goes on from there as a user's cluster would).
func (s *scenario) ready(name string, pods int) {
	s.t.Helper()
	if s.profile == harness.Cdplace {
		s.waitFor(name+" running", 60*time.Second, all(name, pods))
		return
	}
	s.settle(60 * time.Second)
}

// ---- cdplace's invariants, checked on every cdplace run ----

func (s *scenario) assertNoSplits(d map[string]*harness.DomainState) {
	s.t.Helper()
	for _, st := range d {
		if st.Split() {
			s.t.Errorf("ComputeDomain %s is split across cliques: %s", st.Name, st)
		}
	}
}

func (s *scenario) assertAllOrNothing(d map[string]*harness.DomainState) {
	s.t.Helper()
	for _, st := range d {
		if st.Partial() {
			s.t.Errorf("ComputeDomain %s is partly placed (holding trays while it cannot finish): %s", st.Name, st)
		}
	}
}

func (s *scenario) assertNoRefusals() {
	s.t.Helper()
	for _, r := range s.prep.Refusals() {
		s.t.Errorf("Prepare refused %s/%s on %s: %s", r.Namespace, r.Pod, r.Node, r.Message)
	}
}

// ---- the baseline comparison (scenario 10) ----

// runResult is one scenario's outcome under one profile.
type runResult struct {
	Scenario      string `json:"scenario"`
	Profile       string `json:"profile"`
	Domains       int    `json:"domains"`
	Complete      int    `json:"complete"`
	Split         int    `json:"split"`
	Partial       int    `json:"partial"`
	Refusals      int    `json:"prepareRefusals"`
	RefusedPods   int    `json:"refusedPods"`
	StrandedGPUs  int    `json:"strandedGPUs"`
	SampleRefusal string `json:"sampleRefusal,omitempty"`
}

var (
	resultsMu sync.Mutex
	results   []runResult
)

func (s *scenario) record(d map[string]*harness.DomainState) runResult {
	s.t.Helper()
	r := runResult{Scenario: s.name, Profile: string(s.profile), Domains: len(d)}
	for _, st := range d {
		if st.Split() {
			r.Split++
		}
		if st.Partial() {
			r.Partial++
		}
		if st.Pods > 0 && st.Bound == st.Pods {
			r.Complete++
		}
	}
	refusals := s.prep.Refusals()
	r.Refusals, r.RefusedPods = len(refusals), s.prep.RefusedPods()
	if len(refusals) > 0 {
		r.SampleRefusal = refusals[0].Message
	}
	stranded, err := harness.StrandedGPUs(s.ctx, s.e.CP.Client, s.fleet.Spec.GPUsPerTray)
	if err != nil {
		s.t.Fatal(err)
	}
	r.StrandedGPUs = stranded
	resultsMu.Lock()
	results = append(results, r)
	resultsMu.Unlock()
	s.t.Logf("%s under %s: %+v\n%s", s.name, s.profile, r, harness.Summary(d))
	return r
}

// bothProfiles runs body once through cdplace and once through the baseline.
func bothProfiles(t *testing.T, body func(t *testing.T, p harness.Profile)) {
	for _, p := range []harness.Profile{harness.Cdplace, harness.Baseline} {
		t.Run(string(p), func(t *testing.T) { body(t, p) })
	}
}

func writeResults(path string, rs []runResult) error {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Scenario < rs[j].Scenario })
	data, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func resultTable(rs []runResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | profile | domains | complete | split | partly placed | Prepare refusals (pods) | stranded GPUs |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d (%d) | %d |\n", r.Scenario, r.Profile, r.Domains, r.Complete,
			r.Split, r.Partial, r.Refusals, r.RefusedPods, r.StrandedGPUs)
	}
	return b.String()
}

// ignoreNotFound is for deletes of objects that may already be gone.
func ignoreNotFound(t *testing.T, err error) {
	t.Helper()
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
