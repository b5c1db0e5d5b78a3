package main

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func started(size int, created, wait float64) CDOutcome {
	return CDOutcome{Size: size, Created: fptr(created), Wait: fptr(wait)}
}

func waiting(size int, created float64) CDOutcome {
	return CDOutcome{Size: size, Created: fptr(created), NeverStarted: true}
}

func TestClassOf(t *testing.T) {
	for size, want := range map[int]int{1: 0, 4: 0, 5: 1, 8: 1, 9: 2, 15: 2, 16: 3, 18: 3, 72: 3} {
		if got := classOf(size); got != want {
			t.Errorf("classOf(%d) = %d, want %d", size, got, want)
		}
	}
}

func TestClassResults(t *testing.T) {
	cds := []CDOutcome{
		started(1, 0, 1), started(2, 1, 3), started(4, 2, 2), waiting(3, 10), // 1–4: waits 1, 3, 2 and 200-10
		started(8, 0, 5),                  // 5–8
		waiting(16, 50), waiting(18, 100), // 16–18: never started, 150 and 100 s until the end
		{Size: 17, ArrivalTrace: 1800, NeverStarted: true}, // creation failed: counts from its arrival, 1800/18 = 100 s
	}
	cds[1].Preemptions, cds[1].PreemptedPods, cds[1].GPUHoursEvicted = 1, 2, 0.5
	got := classResults(cds, 200, 18)
	if len(got) != 4 {
		t.Fatalf("%d classes", len(got))
	}
	small, mid, big := got[0], got[1], got[3]
	if small.Arrived != 4 || small.Started != 3 || small.StartedShare != 0.75 {
		t.Errorf("1–4: %+v", small)
	}
	// Censored: 1, 2, 3, 190 → median (nearest rank) 2, p95 190; started only: 1, 2, 3.
	if small.WaitMedian != 2 || small.WaitP95 != 190 || small.WaitMedianStarted != 2 || small.WaitP95Started != 3 {
		t.Errorf("1–4 waits: %+v", small)
	}
	if small.Preemptions != 1 || small.PreemptedPods != 2 || small.GPUHoursEvicted != 0.5 {
		t.Errorf("1–4 preemptions: %+v", small)
	}
	if mid.Arrived != 1 || mid.StartedShare != 1 || mid.WaitP95 != 5 {
		t.Errorf("5–8: %+v", mid)
	}
	if got[2].Arrived != 0 || !math.IsNaN(got[2].StartedShare) || !math.IsNaN(got[2].WaitMedian) {
		t.Errorf("9–15 (empty): %+v", got[2])
	}
	if big.Arrived != 3 || big.Started != 0 || big.WaitMedian != 100 || big.WaitP95 != 150 || !math.IsNaN(big.WaitMedianStarted) {
		t.Errorf("16–18: %+v", big)
	}
}

func TestDoneWhen(t *testing.T) {
	all := []CDOutcome{started(1, 0, 2), started(2, 0, 2), started(6, 0, 3), started(12, 0, 4), started(18, 0, 5)}
	ok := &ConfigResult{SaturatedSamples: 10, AllocOverNowBound: 0.97}
	for _, ch := range doneWhen(ok, classResults(all, 100, 18)) {
		if !ch.Holds {
			t.Errorf("%s: %s, want it to hold", ch.Name, ch.Value)
		}
	}

	// A 16–18 domain that never started: 1 of 2 started (50%), its p95 is the 95 s to the end
	// against a median of 2 s; 94% of the no-migration bound; one refusal.
	bad := &ConfigResult{SaturatedSamples: 10, AllocOverNowBound: 0.94, PrepareRefusals: 1}
	checks := doneWhen(bad, classResults(append(all, waiting(16, 5)), 100, 18))
	var holds []bool
	for _, ch := range checks {
		holds = append(holds, ch.Holds)
	}
	if !reflect.DeepEqual(holds, []bool{false, false, false, false}) {
		t.Errorf("holds %v, want none: %+v", holds, checks)
	}
	if !strings.Contains(checks[0].Value, "16–18: 50%") || !strings.Contains(checks[1].Value, "95.0 s vs 2.0 s") {
		t.Errorf("values: %+v", checks)
	}

	// After encoding (NaN written as -1) an empty class still passes and a missing ratio fails.
	none := classResults(nil, 100, 18)
	for i := range none {
		jsonSafe(&none[i].WaitMedian)
		jsonSafe(&none[i].WaitP95)
	}
	checks = doneWhen(&ConfigResult{}, none)
	if !checks[0].Holds || checks[1].Holds || checks[2].Holds {
		t.Errorf("no data: %+v", checks)
	}
}

func TestRunOrderAlternates(t *testing.T) {
	cfgs := []config{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	names := func(cs []config) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.Name)
		}
		return strings.Join(s, ",")
	}
	if got := names(runOrder(cfgs, 0)); got != "a,b,c" {
		t.Errorf("seed 0: %s", got)
	}
	if got := names(runOrder(cfgs, 1)); got != "c,b,a" {
		t.Errorf("seed 1: %s", got)
	}
	if names(cfgs) != "a,b,c" {
		t.Error("runOrder changed its argument")
	}
	res := []*ConfigResult{{Config: "c"}, {Config: "a"}, {Config: "b"}}
	sortConfigs(res, cfgs)
	if res[0].Config != "a" || res[1].Config != "b" || res[2].Config != "c" {
		t.Errorf("sortConfigs: %v %v %v", res[0].Config, res[1].Config, res[2].Config)
	}
}

func TestParseSeeds(t *testing.T) {
	never := func() uint64 { t.Fatal("drew a seed"); return 0 }
	if got, drawn, err := parseSeeds(" 1, 2 ", never); err != nil || !reflect.DeepEqual(got, []uint64{1, 2}) || drawn != nil {
		t.Errorf("1,2: %v %v %v", got, drawn, err)
	}
	// "random" draws again when the draw repeats a seed already listed.
	draws := []uint64{2, 77}
	draw := func() uint64 { d := draws[0]; draws = draws[1:]; return d }
	if got, drawn, err := parseSeeds("1,2,random", draw); err != nil || !reflect.DeepEqual(got, []uint64{1, 2, 77}) || !reflect.DeepEqual(drawn, []uint64{77}) {
		t.Errorf("1,2,random: %v %v %v", got, drawn, err)
	}
	for _, bad := range []string{"", "1,1", "x", "-1"} {
		if _, _, err := parseSeeds(bad, never); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if s := randomSeed(); s < 1 || s > 999_999 {
		t.Errorf("random seed %d", s)
	}
}

func TestParseLoads(t *testing.T) {
	if got, err := parseLoads("0.7, 0.9,1.7"); err != nil || !reflect.DeepEqual(got, []float64{0.7, 0.9, 1.7}) {
		t.Errorf("%v %v", got, err)
	}
	for _, bad := range []string{"", "x", "-0.5", "11", "NaN"} {
		if _, err := parseLoads(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestDecodeBenchReadsBothFormats(t *testing.T) {
	b, err := decodeBench([]byte(`{"runs": [{"traceSpec": {"seed": 2}, "configs": [{"config": "cdplace"}]}], "seeds": [2]}`))
	if err != nil || len(b.Runs) != 1 || b.Runs[0].TraceSpec.Seed != 2 {
		t.Fatalf("bench: %+v %v", b, err)
	}
	// One seed's placement.json as written before -seeds.
	b, err = decodeBench([]byte(`{"traceSpec": {"seed": 1}, "timeScale": 18, "configs": [{"config": "baseline"}]}`))
	if err != nil || len(b.Runs) != 1 || b.Seeds[0] != 1 || b.TimeScale != 18 || b.Runs[0].Configs[0].Config != "baseline" {
		t.Fatalf("report: %+v %v", b, err)
	}
	if _, err := decodeBench([]byte(`{}`)); err == nil {
		t.Error("an empty file decoded")
	}
}

func TestClassTableSideBySide(t *testing.T) {
	rep := func(seed uint64) *Report {
		c := &ConfigResult{Config: "cdplace", CDs: []CDOutcome{started(2, 0, 1), waiting(18, 0)}}
		c.Classes = classResults(c.CDs, 10, 18)
		return &Report{TraceSpec: TraceSpec{Seed: seed}, Configs: []*ConfigResult{c}}
	}
	out := classTable(&Bench{TimeScale: 18, Runs: []*Report{rep(1), rep(2)}})
	for _, want := range []string{"| config | trays | s1 arrived |", "s2 arrived", "| cdplace | 1–4 | 1 | 100% (1) | 1.0 / 1.0 | 0 (0) / 0.0 | 1 | 100% (1) |",
		"| cdplace | 9–15 | 0 | – | – / – |", "| cdplace | 16–18 | 1 | 0% (0) | 10.0 / 10.0 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
