package computedomain

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/testutil"

	"github.com/cdplace/cdplace/host-shim/go/internal/cdplace"
)

// policyRevert is the host's field: defaults, validation with field paths, and taken out of the
// args the policy sees.
func TestPolicyRevertArgs(t *testing.T) {
	for _, c := range []struct {
		args, want, err string
		failures        int
		window          time.Duration
	}{
		{args: `{}`, want: `{}`, failures: 5, window: time.Minute},
		{args: `{"policyRevert":{"failures":0},"wholeTray":"Off"}`, want: `{"wholeTray":"Off"}`, failures: 0, window: time.Minute},
		{args: `{"policyRevert":{"failures":3,"window":"10s"}}`, want: `{}`, failures: 3, window: 10 * time.Second},
		{args: `{"policyRevert":null}`, want: `{}`, failures: 5, window: time.Minute},
		{args: `{"policyRevert":{"failures":-1}}`, err: "pluginConfig[ComputeDomainPlacement].args.policyRevert.failures: Invalid value: -1: must be between 0 (never revert) and 10000"},
		{args: `{"policyRevert":{"window":"soon"}}`, err: `args.policyRevert.window: Invalid value: "soon": must be a duration such as 60s`},
		{args: `{"policyRevert":{"window":"2h"}}`, err: `args.policyRevert.window: Invalid value: "2h": must be between 1s and 1h`},
		{args: `{"policyRevert":{"failure":3}}`, err: `unknown field "failure"`},
	} {
		got, rest, errs := parseRevert([]byte(c.args))
		if c.err != "" {
			if !strings.Contains(errs.ToAggregate().Error(), c.err) {
				t.Errorf("%s: errors %v, want %q", c.args, errs, c.err)
			}
			continue
		}
		if len(errs) > 0 || string(rest) != c.want || got.Failures != c.failures || got.Window != c.window {
			t.Errorf("%s: %+v, rest %s, errors %v; want %d in %v, rest %s", c.args, got, rest, errs, c.failures, c.window, c.want)
		}
	}
}

// The window and the once-per-generation rule of the count.
func TestTheReverterCountsRefusalsWithinItsWindowOncePerGeneration(t *testing.T) {
	now := time.Unix(1000, 0)
	r := &reverter{settings: revertSettings{Failures: 3, Window: 10 * time.Second}, now: func() time.Time { return now }}
	step := func(d time.Duration, gen uint64) bool { now = now.Add(d); return r.refused(gen) }
	if step(0, 2) || step(time.Second, 2) {
		t.Fatal("reverted before 3 refusals")
	}
	// The first refusal left the window (10 s old): still two.
	if step(9*time.Second, 2) {
		t.Fatal("a refusal outside the window counted")
	}
	if !step(0, 2) {
		t.Fatal("3 refusals within 10s did not revert")
	}
	if step(time.Second, 2) {
		t.Fatal("one generation was reverted twice")
	}
	// Another generation starts from nothing.
	if step(0, 3) || step(0, 3) || !step(0, 3) {
		t.Fatal("generation 3 is counted on its own")
	}
	off := &reverter{settings: revertSettings{Failures: 0, Window: time.Minute}, now: time.Now}
	if off.refused(2) || (*reverter)(nil).refused(2) {
		t.Fatal("failures 0 (or no reverter) never reverts")
	}
}

// A policy that passes its swap's checks and turns unsafe afterwards: the host refuses its
// answers (the pods fail closed), and the second refusal within the window restores the
// generation before it (the shipped policy, generation 3), counted in
// cdplace_policy_reverts_total; the bad content is not tried again, a waiting domain is placed by
// the restored policy, and the waiting pods are moved back to the active queue.
func TestALivePolicyWhoseAnswersKeepBeingRefusedIsReverted(t *testing.T) {
	old := policyPollInterval
	policyPollInterval = 20 * time.Millisecond
	t.Cleanup(func() { policyPollInterval = old })
	bad := testComponent(t, "cdplace_test_unsafe_when_placeable.wasm")
	path := filepath.Join(t.TempDir(), "policy.wasm")
	replaceFile(t, path, cdplace.GuestWasm)

	// Clique a has 2 free trays; domain run holds 2 of b's 4. Each waiting domain (size 2) fits.
	objs := []runtime.Object{channelTemplate("run", "uid-run"), boundTo(cdPod("run", "r0"), "b-00"), boundTo(cdPod("run", "r1"), "b-01")}
	cds := []*unstructured.Unstructured{computeDomain("run", "uid-run", 2)}
	var waiting []*v1.Pod
	for i := 0; i < 3; i++ {
		cd := fmt.Sprintf("cd%d", i)
		p := cdPod(cd, "w-"+cd)
		waiting = append(waiting, p)
		objs = append(objs, channelTemplate(cd, "uid-"+cd), p)
		cds = append(cds, computeDomain(cd, "uid-"+cd, 2))
	}
	nodes := append(rack("a", 1, 2), rack("b", 2, 4)...)
	// Unsafe from this time on, for every instance: after the swap (its self-test would refuse it).
	unsafeFrom := time.Now().Add(8 * time.Second)
	e := newEnv(t, `{"policy":{"source":"file","path":`+strconv.Quote(path)+`},"policyRevert":{"failures":2,"window":"60s"},"policyArgs":{"unsafeFromMs":`+strconv.FormatInt(unsafeFrom.UnixMilli(), 10)+`}}`,
		nodes, cds, objs...)
	reverts, _ := testutil.GetCounterMetricValue(policyReverts)

	replaceFile(t, path, bad)
	waitFor(t, func() bool { _, g := e.plugin.Policy(); return g == 2 })
	if time.Now().After(unsafeFrom) {
		t.Fatalf("the swap came %v after the policy turned unsafe: the test's margin is too small", time.Since(unsafeFrom))
	}
	time.Sleep(time.Until(unsafeFrom) + 200*time.Millisecond)
	for _, p := range waiting[:2] {
		r := e.schedule(p)
		if r.preFilter.IsSuccess() || !strings.Contains(r.preFilter.Message(), "policy violation: rule one-domain-per-node") {
			t.Fatalf("%s under the unsafe policy: %v, want the host's refusal", p.Name, r.preFilter)
		}
	}
	waitFor(t, func() bool { _, g := e.plugin.Policy(); return g == 3 })
	if d, _ := e.plugin.Policy(); d != digestOf(cdplace.GuestWasm) {
		t.Fatalf("reverted to %s, want the shipped policy %s", d, digestOf(cdplace.GuestWasm))
	}
	if v, _ := testutil.GetCounterMetricValue(policyReverts); v != reverts+1 {
		t.Fatalf("cdplace_policy_reverts_total %v, want %v", v, reverts+1)
	}
	e.plugin.policy.mu.Lock()
	refused := e.plugin.policy.refused
	e.plugin.policy.mu.Unlock()
	if refused != digestOf(bad) {
		t.Fatalf("the reverted content is not marked refused: %q", refused)
	}
	if c, g := preferred(t, e, waiting[2]); g != 3 || c != "a" {
		t.Fatalf("after the revert: clique %s by generation %d, want a by 3", c, g)
	}
}
