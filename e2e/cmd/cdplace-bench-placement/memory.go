package main

import (
	"fmt"
	"math"
	"strings"
)

// memoryQuarters is how a soak is judged flat: the cdplace scheduler's RSS and journal length
// per quarter of the run (median of the samples in it), against the first quarter.
const memoryQuarters = 4

// MemoryQuarter is one quarter of a run's samples.
type MemoryQuarter struct {
	FromS, ToS     float64
	RSSMedianMiB   float64
	RSSMaxMiB      float64
	JournalMedian  float64
	JournalMax     float64
	GoroutinesMax  float64
	HeapMedianMiB  float64
	RSSSamples     int
	JournalSamples int
	RSSOverSecond  float64 // RSS median over that of the second quarter (the first is warm-up)
}

// memoryByQuarter splits the samples that carry memory figures into quarters of the run's time.
func memoryByQuarter(samples []Sample) []MemoryQuarter {
	end := 0.0
	for _, s := range samples {
		if s.SchedulerRSSMiB > 0 {
			end = math.Max(end, s.T)
		}
	}
	if end <= 0 {
		return nil
	}
	out := make([]MemoryQuarter, memoryQuarters)
	var rss, journal, goroutines, heap [memoryQuarters][]float64
	for _, s := range samples {
		if s.SchedulerRSSMiB <= 0 && s.JournalLength <= 0 {
			continue
		}
		q := min(int(s.T/end*memoryQuarters), memoryQuarters-1)
		if s.SchedulerRSSMiB > 0 {
			rss[q] = append(rss[q], s.SchedulerRSSMiB)
		}
		if s.JournalLength > 0 {
			journal[q] = append(journal[q], s.JournalLength)
		}
		if s.SchedulerGoroutines > 0 {
			goroutines[q] = append(goroutines[q], s.SchedulerGoroutines)
		}
		if s.SchedulerHeapMiB > 0 {
			heap[q] = append(heap[q], s.SchedulerHeapMiB)
		}
	}
	for q := range out {
		out[q] = MemoryQuarter{
			FromS: end * float64(q) / memoryQuarters, ToS: end * float64(q+1) / memoryQuarters,
			RSSMedianMiB: quantile(rss[q], 0.5), RSSMaxMiB: maxOf(rss[q]), RSSSamples: len(rss[q]),
			JournalMedian: quantile(journal[q], 0.5), JournalMax: maxOf(journal[q]), JournalSamples: len(journal[q]),
			GoroutinesMax: maxOf(goroutines[q]), HeapMedianMiB: quantile(heap[q], 0.5),
		}
	}
	for q := range out {
		out[q].RSSOverSecond = out[q].RSSMedianMiB / out[1].RSSMedianMiB
	}
	return out
}

func maxOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	m := v[0]
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

// memoryTable is the summary's memory section: RSS and journal per quarter of each run that
// sampled them (the cdplace configurations).
func memoryTable(rep *Report) string {
	var b strings.Builder
	for _, c := range rep.Configs {
		qs := memoryByQuarter(c.SampleLog)
		if qs == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("Scheduler memory per quarter of the run (RSS every second, `cdplace_journal_length`, `go_goroutines` and `go_memstats_heap_inuse_bytes` every 10 s; medians, then maxima; RSS against the second quarter, the first being warm-up; RSS less the Go heap is wasmtime's and the Go runtime's own):\n\n")
			b.WriteString("| config | quarter (s, real) | RSS median / max (MiB) | RSS / 2nd quarter | Go heap median (MiB) | journal median / max (deltas) | goroutines max | samples (RSS, journal) |\n|---|---|---|---|---|---|---|---|\n")
		}
		for _, q := range qs {
			fmt.Fprintf(&b, "| %s | %.0f–%.0f | %.1f / %.1f | %.3f | %.1f | %.0f / %.0f | %.0f | %d, %d |\n", c.Config, q.FromS, q.ToS,
				q.RSSMedianMiB, q.RSSMaxMiB, q.RSSOverSecond, q.HeapMedianMiB, q.JournalMedian, q.JournalMax, q.GoroutinesMax, q.RSSSamples, q.JournalSamples)
		}
	}
	return b.String()
}
