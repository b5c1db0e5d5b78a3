package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A simulation report becomes a PolicyResult as a live run does: waits from arrival to start
// (a domain never started waits until the run's end), GPU-hours to the run's end and within
// the window, the simulator's own allocation figures and counts.
func TestSimResults(t *testing.T) {
	tr := Trace{Spec: TraceSpec{Horizon: 1000}, CDs: []CDArrival{{Name: "a", Size: 2}, {Name: "b", Size: 16}, {Name: "c", Size: 18}}}
	report := `{"policies": [{"policy": "p.wasm", "error": null, "splits": 1, "partBound": 2, "refusals": 3,
	  "allocation": 0.5, "window": 800, "traysAllocatedInWindow": 7.5, "end": 900, "capped": false,
	  "domains": [
	    {"name": "a", "size": 2, "arrival": 10, "start": 10, "end": 110},
	    {"name": "b", "size": 16, "arrival": 100, "start": 700, "end": null},
	    {"name": "c", "size": 18, "arrival": 200, "start": null, "end": null}]}]}`
	p, err := simResults([]byte(report), tr, "sim p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy != "sim p" || !p.Simulated || p.Live || p.End != 900 || p.GPUAllocation != 0.5 || p.TraysAllocatedWindow != 7.5 {
		t.Errorf("%+v", p)
	}
	if p.Splits != 1 || p.StalledPartBound != 2 || p.PrepareRefusals != 3 {
		t.Errorf("counts %d / %d / %d", p.Splits, p.StalledPartBound, p.PrepareRefusals)
	}
	small, big := p.Classes[0], p.Classes[len(SizeClasses)-1]
	if small.Started != 1 || small.WaitMedian != 0 || small.GPUHours != 8*100/3600.0 {
		t.Errorf("1–4: %+v", small)
	}
	// b waited 600 s and runs to the end (900): 200 s, 100 of them in the window; c never
	// started and waits 900 - 200 = 700 s.
	if big.Arrived != 2 || big.Started != 1 || big.GPUHours != 64*200/3600.0 || big.GPUHoursWindow != 64*100/3600.0 {
		t.Errorf("16–18: %+v", big)
	}
	if big.WaitP95 < 600 || big.WaitP95 > 700 {
		t.Errorf("16–18 p95 wait %v, want between 600 and 700", big.WaitP95)
	}
	// A report that does not fit the trace is refused, not compared.
	for name, bad := range map[string]string{
		"other window":  strings.Replace(report, `"window": 800`, `"window": 900`, 1),
		"policy failed": strings.Replace(report, `"error": null`, `"error": "trap"`, 1),
		"no policy":     `{"policies": []}`,
		"domains":       strings.Replace(report, `{"name": "a", "size": 2, "arrival": 10, "start": 10, "end": 110},`, ``, 1),
	} {
		if _, err := simResults([]byte(bad), tr, "sim p"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The tally counts, per load, policy and check, the traces the check held on.
func TestTally(t *testing.T) {
	cmp := func(holds ...bool) *Comparison {
		c := &Comparison{Policies: []*PolicyResult{{Policy: "sim b"}, {Policy: "sim a"}, {Policy: "EASY"}}, DoneWhen: map[string][]Check{}}
		c.DoneWhen["sim b"] = []Check{{Name: "x", Holds: holds[0]}}
		c.DoneWhen["sim a"] = []Check{{Name: "x", Holds: holds[1]}}
		return c
	}
	rows := tally([]*Comparison{cmp(true, false), cmp(true, true), cmp(false, false)}, []float64{0.7, 0.7, 1.7})
	want := []TallyRow{
		{Load: 0.7, Policy: "sim b", Check: "x", Holds: 2, Traces: 2},
		{Load: 0.7, Policy: "sim a", Check: "x", Holds: 1, Traces: 2},
		{Load: 1.7, Policy: "sim b", Check: "x", Holds: 0, Traces: 1},
		{Load: 1.7, Policy: "sim a", Check: "x", Holds: 0, Traces: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%+v", rows)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	table := tallyTable(rows)
	for _, s := range []string{"| load | check | sim b | sim a |", "| 0.7 | x | 2/2 | 1/2 |", "| 1.7 | x | 0/1 | 0/1 |"} {
		if !strings.Contains(table, s) {
			t.Errorf("no %q in\n%s", s, table)
		}
	}
}

func TestParseSimulate(t *testing.T) {
	root := t.TempDir()
	cli := filepath.Join(root, "cdplace")
	if err := os.WriteFile(cli, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if so, err := parseSimulate(root, "cdplace", "", ""); so != nil || err != nil {
		t.Errorf("no -simulate: %v, %v", so, err)
	}
	so, err := parseSimulate(root, "cdplace", "shipped, "+cli, "--time-scale 1  --deadline-factor 1.5")
	if err != nil {
		t.Fatal(err)
	}
	if so.cli != cli || len(so.policies) != 2 || so.policies[0] != shippedPolicy || strings.Join(so.flags, "|") != "--time-scale|1|--deadline-factor|1.5" {
		t.Errorf("%+v", so)
	}
	for name, args := range map[string][3]string{
		"missing policy file": {"cdplace", "shipped,/nonexistent.wasm", ""},
		"missing CLI":         {"nope", "shipped", ""},
		"flags alone":         {"cdplace", "", "--time-scale 1"},
	} {
		if _, err := parseSimulate(root, args[0], args[1], args[2]); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// -reference-only -simulate with the real CLI (make build writes it): the shipped policy on two
// small traces, beside the references, with its checks and their tally. This is the check on
// the report's fields that the bench reads (the Rust and Go sides of `--simulate --json`).
func TestReferenceOnlySimulatesWithTheCLI(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "target", "release", "cdplace")); err != nil {
		t.Fatalf("the cdplace CLI (make build): %v", err)
	}
	so, err := parseSimulate(root, "target/release/cdplace", shippedPolicy, "--time-scale 1 --deadline-factor 1.5")
	if err != nil {
		t.Fatal(err)
	}
	o := options{root: root, out: t.TempDir(), seeds: []uint64{1, 2}, loads: []float64{0.7}, simulate: so,
		racks: 2, trays: 18, arrivals: 16, plain: 4, failures: 1, horizon: 3600}
	run, stdout := runReferenceOnly(t, o)
	for _, c := range run.Comparisons {
		if len(c.Policies) != 4 || c.Policies[0].Policy != "sim shipped" || !c.Policies[0].Simulated {
			t.Fatalf("seed %d: policies %d, first %+v", c.Seed, len(c.Policies), c.Policies[0])
		}
		p := c.Policies[0]
		for _, cl := range p.Classes {
			if cl.Started != cl.Arrived {
				t.Errorf("seed %d, %s: %d of %d started", c.Seed, cl.Name, cl.Started, cl.Arrived)
			}
		}
		if p.TraysAllocatedWindow <= 0 || p.GPUAllocation <= 0 || p.End < c.Window {
			t.Errorf("seed %d: trays %v, allocation %v, end %v", c.Seed, p.TraysAllocatedWindow, p.GPUAllocation, p.End)
		}
		if len(c.DoneWhen["sim shipped"]) != 5 {
			t.Errorf("seed %d: checks %+v", c.Seed, c.DoneWhen)
		}
	}
	if len(run.Tally) != 5 || run.Tally[0].Traces != 2 {
		t.Errorf("tally %+v", run.Tally)
	}
	if !strings.Contains(stdout.String(), "| 0.7 | every domain of every class starts | 2/2 |") {
		t.Errorf("no tally in\n%s", stdout.String())
	}
}

// Pooling takes the quantiles over every trace's domains together, sums GPU-hours, averages the
// allocation figures, and sets each policy beside EASY on the same traces.
func TestPool(t *testing.T) {
	classes := func(small, big []float64, gpuH float64) []PolicyClass {
		out := make([]PolicyClass, len(SizeClasses))
		out[0].waits, out[len(out)-1].waits, out[len(out)-1].GPUHoursWindow = small, big, gpuH
		return out
	}
	cmps := []*Comparison{
		{Policies: []*PolicyResult{
			{Policy: "sim x", Classes: classes([]float64{0, 0, 10}, []float64{100}, 10), TraysAllocatedWindow: 90, GPUAllocation: 0.5},
			{Policy: "EASY", Classes: classes([]float64{0, 0, 0}, []float64{50}, 20), TraysAllocatedWindow: 100, GPUAllocation: 0.6},
		}},
		{Policies: []*PolicyResult{
			{Policy: "sim x", Classes: classes([]float64{10, 10}, []float64{300}, 30), TraysAllocatedWindow: 110, GPUAllocation: 0.7},
			{Policy: "EASY", Classes: classes([]float64{0, 0}, []float64{100}, 20), TraysAllocatedWindow: 100, GPUAllocation: 0.6},
		}},
	}
	rows := pool(cmps, []float64{0.9, 0.9})
	if len(rows) != 2 || rows[0].Policy != "sim x" || rows[1].Policy != "EASY" || rows[0].easy != rows[1] {
		t.Fatalf("%+v", rows)
	}
	x := rows[0]
	// 1–4 pooled: 0 0 10 10 10, median 10 (each trace's own median: 0 and 10). 16–18: 100 and
	// 300, p95 (nearest rank) 300 against EASY's 100.
	if x.Traces != 2 || x.SmallMedian != 10 || x.BigP95 != 300 || x.BigGPUHours != 40 || x.TraysWindow != 100 || math.Abs(x.GPUAllocation-0.6) > 1e-9 {
		t.Errorf("%+v", x)
	}
	table := pooledTable(rows)
	if !strings.Contains(table, "| 0.9 | sim x | 2 | 10 | 300 (3.00×) | 40 (1.00×) | 100.0 (1.00×) | 60.0% (1.00×) |") {
		t.Errorf("table:\n%s", table)
	}
}
