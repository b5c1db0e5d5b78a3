package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

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
			CPU: &cpuprofile.Share{TotalNs: 10 * sched, PluginNs: plugin, SchedulerNs: sched}}
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
