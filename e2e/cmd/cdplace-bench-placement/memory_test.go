package main

import (
	"math"
	"strings"
	"testing"
)

func TestMemoryByQuarter(t *testing.T) {
	var samples []Sample
	for i := 1; i <= 400; i++ {
		s := Sample{T: float64(i), SchedulerRSSMiB: 100 + float64(i/100)*10}
		if i%10 == 0 {
			s.JournalLength = float64(i % 50)
			s.SchedulerGoroutines = 300 + float64(i)
			s.SchedulerHeapMiB = 50 + float64(i/100)
		}
		samples = append(samples, s)
	}
	samples = append(samples, Sample{T: 500}) // no memory figures: ignored, does not stretch the run
	qs := memoryByQuarter(samples)
	if len(qs) != 4 {
		t.Fatalf("%d quarters", len(qs))
	}
	if qs[0].FromS != 0 || qs[3].ToS != 400 {
		t.Errorf("quarters span %v-%v, want 0-400", qs[0].FromS, qs[3].ToS)
	}
	// Quarter q holds t in [100q, 100q+100): RSS 100+10q, except t=100q+100 -> next quarter.
	for q, want := range []float64{100, 110, 120, 130} {
		if qs[q].RSSMedianMiB != want {
			t.Errorf("quarter %d RSS median %v, want %v", q, qs[q].RSSMedianMiB, want)
		}
	}
	if got := qs[3].RSSOverSecond; math.Abs(got-130.0/110) > 1e-9 {
		t.Errorf("last over second quarter %v", got)
	}
	if qs[0].HeapMedianMiB != 50 || qs[2].HeapMedianMiB != 52 {
		t.Errorf("heap medians %v %v, want 50 and 52", qs[0].HeapMedianMiB, qs[2].HeapMedianMiB)
	}
	if qs[3].RSSMaxMiB != 140 || qs[0].JournalMax != 40 || qs[3].GoroutinesMax != 700 {
		t.Errorf("maxima %v %v %v", qs[3].RSSMaxMiB, qs[0].JournalMax, qs[3].GoroutinesMax)
	}
	if memoryByQuarter([]Sample{{T: 1}}) != nil {
		t.Error("a run without memory samples has no quarters")
	}
	rep := &Report{Configs: []*ConfigResult{{Config: "cdplace", SampleLog: samples}}}
	if tab := memoryTable(rep); !strings.Contains(tab, "| cdplace | 300–400 | 130.0 / 140.0 | 1.182 | 53.0 | 20 / 40 | 700 |") {
		t.Errorf("table:\n%s", tab)
	}
}
