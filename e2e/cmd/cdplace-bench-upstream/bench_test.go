package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCPUShareClassifiesStacks(t *testing.T) {
	names := map[uint64]string{
		1: "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne",
		2: "github.com/cdplace/cdplace/host-shim/go/internal/cdplace._Cfunc_cdplace_cluster_apply",
		3: "k8s.io/apiserver/pkg/endpoints/handlers.createHandler",
		4: "runtime.gcBgMarkWorker",
		5: "k8s.io/client-go/tools/cache.(*processorListener).run",
		6: "github.com/cdplace/cdplace/host-shim/go/pkg/computedomain.(*feed).upsert",
		7: "k8s.io/client-go/tools/cache.(*store[go.shape.*github.com/cdplace/x.T]).Add",
	}
	p := &profile{
		sampleTypes:   []string{"samples", "cpu"},
		funcNames:     names,
		locationFuncs: map[uint64][]uint64{10: {1}, 20: {2}, 30: {3}, 40: {4}, 50: {5}, 60: {6}, 70: {7}},
		samples: []sample{
			{locations: []uint64{20, 10}, values: []int64{1, 100}}, // plugin called by the scheduler
			{locations: []uint64{10}, values: []int64{1, 300}},     // scheduler alone
			{locations: []uint64{30}, values: []int64{1, 400}},     // apiserver
			{locations: []uint64{40}, values: []int64{1, 150}},     // GC: no one's
			{locations: []uint64{60, 50}, values: []int64{1, 50}},  // plugin's informer handler
			{locations: []uint64{70}, values: []int64{1, 7}},       // a type argument is not a package
		},
	}
	s, err := p.cpuShare()
	if err != nil {
		t.Fatal(err)
	}
	want := CPUShare{TotalNs: 1007, PluginNs: 150, APIServerNs: 400, SchedulerNs: 450}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if got := s.OfScheduler(); math.Abs(got-150.0/450) > 1e-9 {
		t.Errorf("OfScheduler = %v", got)
	}
	if got := s.OfNonAPIServer(); math.Abs(got-150.0/607) > 1e-9 {
		t.Errorf("OfNonAPIServer = %v", got)
	}
	if _, err := (&profile{sampleTypes: []string{"alloc_space"}}).cpuShare(); err == nil {
		t.Error("a heap profile was accepted as a CPU profile")
	}
}

var sink float64

// burn spends d of this process's CPU time in a function of this package (github.com/cdplace/...);
// CPU time, not wall time: on a busy machine 400 ms of wall time can hold 80 ms of CPU. It
// gives up after a minute of wall time.
func burn(d time.Duration) {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, deadline := cpu(), time.Now().Add(time.Minute)
	for cpu()-start < d && time.Now().Before(deadline) {
		for i := 0; i < 1e5; i++ {
			sink += math.Sqrt(float64(i))
		}
	}
}

// TestAnalyzeARealProfile reads what runtime/pprof writes (gzip, packed and unpacked fields).
func TestAnalyzeARealProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	burn(400 * time.Millisecond)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := AnalyzeCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.TotalNs < int64(100*time.Millisecond) || s.PluginNs < s.TotalNs/2 || s.APIServerNs != 0 {
		t.Errorf("a profile of burn(): %+v, want most of >=100ms in github.com/cdplace frames, none in the apiserver", s)
	}
}

func TestParseDataItems(t *testing.T) {
	raw := []byte(`{"version":"v1","dataItems":[
	 {"data":{"Average":31.5,"Perc50":30},"unit":"pods/s","labels":{"Metric":"SchedulingThroughput","Name":"x"}},
	 {"data":{"Perc50":0.07,"Perc99":0.4},"unit":"ms","labels":{"Metric":"scheduler_plugin_execution_duration_seconds","plugin":"ComputeDomainPlacement","extension_point":"PreFilter"}},
	 {"data":{"Perc50":1},"unit":"ms","labels":{"Metric":"scheduler_plugin_execution_duration_seconds","plugin":"DynamicResources","extension_point":"PreFilter"}}]}`)
	tp, plugin, err := parseDataItems(raw)
	if err != nil {
		t.Fatal(err)
	}
	if tp["Average"] != 31.5 || tp["Perc50"] != 30 || len(plugin) != 1 || plugin["PreFilter"]["Perc99"] != 0.4 {
		t.Errorf("throughput %v, plugin %v", tp, plugin)
	}
	_, _, err = parseDataItems([]byte(`{"dataItems":[]}`))
	if err == nil || !strings.Contains(err.Error(), "SchedulingThroughput") {
		t.Errorf("no throughput item: err %v", err)
	}
}

func TestOrderRotates(t *testing.T) {
	first := map[Variant]int{}
	for r := 0; r < 3; r++ {
		o := order(r, false)
		if len(o) != 3 {
			t.Fatalf("round %d: %v", r, o)
		}
		first[o[0]]++
	}
	if len(first) != 3 {
		t.Errorf("over three rounds each variant should run first once: %v", first)
	}
	if o := order(1, true); len(o) != 2 || o[0] != VariantA || o[1] != VariantB {
		t.Errorf("smoke order %v, want A, B", o)
	}
}

func TestSummarizeRatiosPerRound(t *testing.T) {
	w := upstream("empty_500nodes")
	run := func(v Variant, round int, avg float64, plugin, sched int64) Run {
		return Run{Workload: w.Name, Variant: v, Round: round, Throughput: map[string]float64{"Average": avg, "Perc50": avg},
			CPU: &CPUShare{TotalNs: 10 * sched, PluginNs: plugin, SchedulerNs: sched}}
	}
	runs := []Run{
		run(VariantA, 0, 40, 0, 100), run(VariantB, 0, 38, 1, 100), run(VariantA2, 0, 44, 0, 100),
		run(VariantB, 1, 30, 3, 100), run(VariantA, 1, 30, 0, 100), run(VariantA2, 1, 27, 0, 100),
		{Workload: w.Name, Variant: VariantB, Round: 2, Error: "boom"},
	}
	rep := Summarize([]Workload{w}, runs)
	s := rep.Summaries[0]
	if s.RatioBA.N != 2 || math.Abs(s.RatioBA.Min-0.95) > 1e-9 || s.RatioBA.Max != 1 || math.Abs(s.RatioBA.Median-0.975) > 1e-9 {
		t.Errorf("B/A %+v, want 0.95 and 1.0", s.RatioBA)
	}
	if math.Abs(s.RatioAA.Min-0.9) > 1e-9 || math.Abs(s.RatioAA.Max-1.1) > 1e-9 {
		t.Errorf("A2/A %+v, want 0.9 and 1.1", s.RatioAA)
	}
	if s.Failed != 1 || math.Abs(s.PluginCPUPooled-0.02) > 1e-9 || s.PluginCPUInA != 0 {
		t.Errorf("failed %d, pooled plugin share %v, in A %v", s.Failed, s.PluginCPUPooled, s.PluginCPUInA)
	}
	if md := rep.Markdown(); !strings.Contains(md, "0.975 (0.950–1.000)") || !strings.Contains(md, "(1 failed runs)") {
		t.Errorf("markdown:\n%s", md)
	}
}

func TestLoadRunFromItsDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ComputeDomain_1008trays-r3-A2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	items := `{"dataItems":[{"data":{"Average":20,"Perc50":19},"unit":"pods/s","labels":{"Metric":"SchedulingThroughput"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_A2_x.json"), []byte(items), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := loadRun(dir, []Workload{upstream("empty_500nodes"), computeDomain("1008trays")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Workload != "ComputeDomain/1008trays" || r.Round != 3 || r.Variant != VariantA2 || r.Throughput["Average"] != 20 || r.Error != "" {
		t.Errorf("got %+v", r)
	}
	if _, err := loadRun(filepath.Join(root, "ComputeDomain_504trays-r0-B"), []Workload{computeDomain("1008trays")}); err == nil {
		t.Error("a workload that was not asked for was loaded")
	}
}
