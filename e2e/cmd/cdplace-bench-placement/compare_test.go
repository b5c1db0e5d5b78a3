package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/e2e/cmd/cdplace-bench-placement/reference"
)

// The reference sees the trace one-to-one: every domain a job of its size and lifetime, every
// plain pod a 1-tray job, each rack a clique, the same failures.
func TestReferenceInputIsTheTrace(t *testing.T) {
	tr := GenerateTrace(spec(1))
	in := referenceInput(tr)
	if in.Cliques != 8 || in.TraysPerClique != 18 || in.Window != tr.Window() || len(in.Jobs) != len(tr.CDs)+len(tr.Plain) || len(in.Failures) != len(tr.Failures) {
		t.Fatalf("input: %d cliques × %d, window %v, %d jobs, %d failures", in.Cliques, in.TraysPerClique, in.Window, len(in.Jobs), len(in.Failures))
	}
	for i, cd := range tr.CDs {
		if j := in.Jobs[i]; j.Name != cd.Name || j.Arrival != cd.At || j.Size != cd.Size || j.Runtime != cd.Lifetime || j.Plain {
			t.Fatalf("%+v from %+v", j, cd)
		}
	}
	for i, p := range tr.Plain {
		if j := in.Jobs[len(tr.CDs)+i]; j.Name != p.Name || j.Arrival != p.At || j.Size != 1 || j.Runtime != p.Lifetime || !j.Plain {
			t.Fatalf("%+v from %+v", j, p)
		}
	}
	for i, f := range tr.Failures {
		if g := in.Failures[i]; g != (reference.Failure{At: f.At, Clique: f.Rack, Tray: f.Tray, RepairAfter: f.RepairAfter}) {
			t.Fatalf("%+v from %+v", g, f)
		}
	}
}

// Classes from spans: waits from arrival to start (never started: until the end), GPU-hours
// over the run and within the window.
func TestPolicyClasses(t *testing.T) {
	spans := []span{
		{size: 2, arrival: 0, start: 10, end: 3610},   // 2 trays, 1 h: 8 GPU-h; in a 1800 s window 8 × 1790/3600
		{size: 4, arrival: 100, start: 100, end: 200}, // no wait
		{size: 16, arrival: 50, neverStarted: true},   // waits until the end, 4000 − 50
	}
	got := policyClasses(spans, 1800, 4000)
	small, big := got[0], got[3]
	if small.Arrived != 2 || small.Started != 2 || small.WaitMedian != 0 || small.WaitP95 != 10 {
		t.Errorf("1–4: %+v", small)
	}
	if math.Abs(small.GPUHours-(8+16*100.0/3600)) > 1e-9 || math.Abs(small.GPUHoursWindow-(8*1790.0/3600+16*100.0/3600)) > 1e-9 {
		t.Errorf("1–4 GPU-h: %v / %v", small.GPUHours, small.GPUHoursWindow)
	}
	if big.Arrived != 1 || big.Started != 0 || big.WaitP95 != 3950 || big.GPUHours != 0 {
		t.Errorf("16–18: %+v", big)
	}
	if got[1].WaitMedian != -1 || measured(got[1].WaitMedian) {
		t.Errorf("an empty class has no wait: %+v", got[1])
	}
}

// The live run measured like the references: a domain from all pods bound to its departure,
// real seconds × the time scale; allocation from the samples.
func TestLiveResult(t *testing.T) {
	c := &ConfigResult{
		Config: "cdplace", EndSeconds: 300, Splits: 1,
		CDs: []CDOutcome{
			{Size: 18, ArrivalTrace: 180, Created: fptr(10), AllBound: fptr(20), Departed: fptr(120)},
			{Size: 1, ArrivalTrace: 900, Created: fptr(50)},
		},
		SampleLog: []Sample{
			{TraceT: 0, AllocGPUs: 72, HealthyTrays: 36, AllocTrays: 18},
			{TraceT: 1800, AllocGPUs: 0, HealthyTrays: 36, AllocTrays: 0},
			{TraceT: 3600, AllocGPUs: 144, HealthyTrays: 36, AllocTrays: 36},
		},
	}
	p := liveResult(c, 18, 0, 2000)
	if p.End != 5400 || !p.Live || p.Splits != 1 {
		t.Fatalf("%+v", p)
	}
	big, small := p.Classes[3], p.Classes[0]
	// Created at 180 trace s, bound at 360: waited 180; ran 360–2160 trace s = 72 GPUs × 0.5 h.
	if big.WaitP95 != 180 || big.GPUHours != 36 || math.Abs(big.GPUHoursWindow-72*1640.0/3600) > 1e-9 {
		t.Errorf("16–18: %+v", big)
	}
	if small.Started != 0 || small.WaitMedian != 5400-900 {
		t.Errorf("1–4: %+v", small)
	}
	if p.GPUAllocation != 216.0/432 || p.TraysAllocatedWindow != 9 {
		t.Errorf("allocation %v, trays in window %v", p.GPUAllocation, p.TraysAllocatedWindow)
	}
}

func TestDoneWhenVsEASY(t *testing.T) {
	classes := func(started int, smallMedian, bigP95, bigGPUh float64) []PolicyClass {
		out := policyClasses(nil, 1, 1)
		for i := range out {
			out[i].Arrived, out[i].Started = 10, 10
		}
		out[0].WaitMedian, out[3].WaitP95, out[3].GPUHoursWindow = smallMedian, bigP95, bigGPUh
		out[3].Started = started
		return out
	}
	easy := &PolicyResult{Policy: "EASY", GPUAllocation: 0.70, TraysAllocatedWindow: 120, Classes: classes(10, 20, 400, 100)}
	good := &PolicyResult{Policy: "cdplace", Live: true, GPUAllocation: 0.69, TraysAllocatedWindow: 115, Classes: classes(10, 40, 600, 80)}
	for _, ch := range doneWhenVsEASY(good, easy, 0.9) {
		if !ch.Holds {
			t.Errorf("load 0.9: %s: %s, want it to hold", ch.Name, ch.Value)
		}
	}
	for _, ch := range doneWhenVsEASY(good, easy, 1.7) {
		if !ch.Holds {
			t.Errorf("load 1.7: %s: %s, want it to hold", ch.Name, ch.Value)
		}
	}
	bad := &PolicyResult{Policy: "cdplace", Live: true, GPUAllocation: 0.67, TraysAllocatedWindow: 113, Classes: classes(9, 41, 601, 79), PrepareRefusals: 1}
	for _, ch := range append(doneWhenVsEASY(bad, easy, 0.9), doneWhenVsEASY(bad, easy, 1.7)...) {
		if ch.Holds {
			t.Errorf("%s: %s, want it to fail", ch.Name, ch.Value)
		}
	}
	// EASY waits 0 at the median: only 0 passes.
	easy.Classes[0].WaitMedian = 0
	if ch := doneWhenVsEASY(good, easy, 0.9)[4]; ch.Holds || !strings.Contains(ch.Value, "40 vs 0 s") {
		t.Errorf("%+v", ch)
	}
}

// -reference-only on the seeds and loads: no control plane, every output written, and
// at loads a cluster can sustain every domain starts under every reference.
func TestReferenceOnlyMode(t *testing.T) {
	o := options{root: ".", out: t.TempDir(), seeds: []uint64{1, 2}, loads: []float64{0.7, 0.9, 1.7},
		racks: 8, trays: 18, arrivals: 120, plain: 30, failures: 3, horizon: 3600}
	run, stdout := runReferenceOnly(t, o)
	if len(run.Comparisons) != 6 {
		t.Fatalf("%d comparisons, want 6", len(run.Comparisons))
	}
	for i, c := range run.Comparisons {
		// Loads outermost, seeds inside.
		load, seed := o.loads[i/2], o.seeds[i%2]
		if math.Abs(c.OfferedLoad-load) > loadTolerance || c.Seed != seed {
			t.Errorf("comparison %d: seed %d, offered load %.3f; want seed %d, load %.1f", i, c.Seed, c.OfferedLoad, seed, load)
		}
		if len(c.Policies) != 3 || c.Policies[0].Policy != "EASY" {
			t.Fatalf("seed %d: %d policies", c.Seed, len(c.Policies))
		}
		for _, p := range c.Policies {
			for _, cl := range p.Classes {
				if cl.Started != cl.Arrived || p.Capped {
					t.Errorf("seed %d, load %.1f, %s, %s: %d of %d started", c.Seed, c.OfferedLoad, p.Policy, cl.Name, cl.Started, cl.Arrived)
				}
			}
			if p.GPUAllocation <= 0 || p.GPUAllocation > 1 || p.End < c.Window {
				t.Errorf("seed %d, %s: allocation %v, end %v", c.Seed, p.Policy, p.GPUAllocation, p.End)
			}
		}
		dir := filepath.Join(o.out, "reference", loadDir(load), fmt.Sprintf("seed-%d", seed))
		for _, f := range []string{"summary.md", "trace.json", "compare-started.svg", "compare-wait-median.svg", "compare-wait-p95.svg", "compare-gpu-hours.svg"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
	}
	if !strings.Contains(stdout.String(), "| EASY | 1–4 |") {
		t.Errorf("stdout has no table:\n%s", stdout.String())
	}
}

// A live run's outputs carry the comparison: writeBench regenerates the trace from its spec
// (the digest matching), simulates the references on it and sets the configuration beside them,
// with issue 36's checks, in placement.json, summary.md and the per-seed charts.
func TestWriteBenchComparesWithTheReferences(t *testing.T) {
	s := spec(1)
	s.Load = 0.9
	tr := GenerateTrace(s)
	var cds []CDOutcome
	for _, cd := range tr.CDs {
		at := cd.At / 18
		cds = append(cds, CDOutcome{Name: cd.Name, Size: cd.Size, ArrivalTrace: cd.At, Created: fptr(at), AllBound: fptr(at + 1), Departed: fptr(at + 1 + cd.Lifetime/18)})
	}
	c := &ConfigResult{Config: "cdplace", Profile: "computedomain-scheduler", CDs: cds, EndSeconds: 250,
		SampleLog: []Sample{{TraceT: 0, HealthyTrays: 144, AllocTrays: 100, AllocGPUs: 400}}}
	b := &Bench{TimeScale: 18, HorizonSeconds: 200, Seeds: []uint64{1},
		Runs: []*Report{{TraceSpec: s, TraceDigest: tr.Digest(), TimeScale: 18, HorizonSeconds: 200, Configs: []*ConfigResult{c}}}}
	out := t.TempDir()
	if err := writeBench(out, b, []Trace{tr}); err != nil {
		t.Fatal(err)
	}
	cmp := b.Runs[0].Comparison
	if cmp == nil || len(cmp.Policies) != 4 || cmp.Policies[0].Policy != "cdplace" || cmp.Policies[1].Policy != "EASY" {
		t.Fatalf("comparison: %+v", cmp)
	}
	// Every domain waited 18 trace seconds (1 s real): the 1–4 median is 18 against EASY's 0.
	checks := cmp.DoneWhen["cdplace"]
	if len(checks) != 5 || !checks[0].Holds || checks[4].Holds || !strings.Contains(checks[4].Value, "18 vs 0 s") {
		t.Errorf("checks: %+v", checks)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Beside the offline references", "| cdplace | 1–4 | 74/74 | 18.0 / 18.0 |", "| EASY | 1–4 |", "median wait 1–4 ≤ 2× EASY's: **FAIL**"} {
		if !strings.Contains(string(summary), want) {
			t.Errorf("summary.md lacks %q", want)
		}
	}
	for _, f := range []string{"compare-started.svg", "compare-wait-p95.svg", "summary.md", "placement.json"} {
		if _, err := os.Stat(filepath.Join(out, "seed-1", f)); err != nil {
			t.Error(err)
		}
	}
	// A spec that does not give the recorded trace (an older generator): no comparison.
	b.Runs[0].TraceDigest, b.Runs[0].Comparison = "000000000000", nil
	if err := writeBench(t.TempDir(), b, nil); err != nil || b.Runs[0].Comparison != nil {
		t.Errorf("digest mismatch: %v, comparison %v", err, b.Runs[0].Comparison)
	}
}

// runReferenceOnly runs -reference-only with o and returns its reference.json and stdout.
func runReferenceOnly(t *testing.T, o options) (ReferenceRun, bytes.Buffer) {
	t.Helper()
	var stdout bytes.Buffer
	if code, err := referenceOnly(o, &stdout); err != nil || code != 0 {
		t.Fatalf("code %d: %v", code, err)
	}
	data, err := os.ReadFile(filepath.Join(o.out, "reference", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run ReferenceRun
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	return run, stdout
}
