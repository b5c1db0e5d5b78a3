package main

// -reference-only: the offline references on each seed's and load's trace, no control plane.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ReferenceRun is -out/reference/reference.json.
type ReferenceRun struct {
	Generated   string        `json:"generated"`
	Command     string        `json:"command"`
	Seconds     float64       `json:"seconds"`
	Comparisons []*Comparison `json:"comparisons"`
	Loads       []float64     `json:"requestedLoads"`
	// Tally: with -simulate, how many traces of each load every "Done when" check held on;
	// Pooled: every policy's figures pooled over each load's traces.
	Tally  []TallyRow   `json:"tally,omitempty"`
	Pooled []*PooledRow `json:"pooled,omitempty"`
}

// medianLifetime is the median domain lifetime of tr in trace seconds.
func medianLifetime(tr Trace) float64 {
	var v []float64
	for _, cd := range tr.CDs {
		v = append(v, cd.Lifetime)
	}
	return quantile(v, 0.5)
}

// loadDir names a load's directory: load-0.9, or load-drawn for 0.
func loadDir(load float64) string {
	if load == 0 {
		return "load-drawn"
	}
	return "load-" + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", load), "0"), ".")
}

// referenceOnly simulates the references for every load and seed of o and writes, under
// -out/reference, reference.json and summary.md, and per load and seed the comparison's
// summary.md, charts and trace.json.
func referenceOnly(o options, w io.Writer) (int, error) {
	_, out, err := paths(o)
	if err != nil {
		return 1, err
	}
	out = filepath.Join(out, "reference")
	began := time.Now()
	run := &ReferenceRun{Generated: began.UTC().Format(time.RFC3339), Command: strings.Join(os.Args, " "), Loads: o.loads}
	var sb strings.Builder
	var loads []float64 // the load each comparison's trace was made for
	for _, load := range o.loads {
		for _, seed := range o.seeds {
			tr := GenerateTrace(o.traceSpec(seed, load))
			dir := filepath.Join(out, loadDir(load), fmt.Sprintf("seed-%d", seed))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return 1, err
			}
			trace, _ := json.MarshalIndent(tr, "", " ")
			tracePath := filepath.Join(dir, "trace.json")
			if err := os.WriteFile(tracePath, append(trace, '\n'), 0o644); err != nil {
				return 1, err
			}
			var sims []*PolicyResult
			if o.simulate != nil {
				if sims, err = o.simulate.simulate(tr, tracePath); err != nil {
					return 1, fmt.Errorf("seed %d, load %g: %w", seed, load, err)
				}
			}
			cmp, err := compare(tr, sims)
			if err != nil {
				return 1, fmt.Errorf("seed %d, load %g: %w", seed, load, err)
			}
			run.Comparisons = append(run.Comparisons, cmp)
			loads = append(loads, load)
			if err := writeCharts(dir, comparisonCharts(cmp)); err != nil {
				return 1, err
			}
			table := comparisonTable(cmp)
			if err := os.WriteFile(filepath.Join(dir, "summary.md"), []byte(table), 0o644); err != nil {
				return 1, err
			}
			fmt.Fprintf(&sb, "### Load %g, seed %d\n\n%s\n", load, seed, table)
		}
	}
	var head string
	if o.simulate != nil {
		run.Tally = tally(run.Comparisons, loads)
		run.Pooled = pool(run.Comparisons, loads)
		head = fmt.Sprintf("Simulated with `cdplace replay --simulate %s`\n\n%s\n%s\n", strings.Join(o.simulate.flags, " "),
			tallyTable(run.Tally), pooledTable(run.Pooled))
	}
	run.Seconds = time.Since(began).Seconds()
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return 1, err
	}
	if err := os.WriteFile(filepath.Join(out, "reference.json"), append(data, '\n'), 0o644); err != nil {
		return 1, err
	}
	summary := fmt.Sprintf("Offline references (EASY, conservative backfill, runtime-blind FIFO) on %d traces in %.2f s\n\n%s%s",
		len(run.Comparisons), run.Seconds, head, sb.String())
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(summary), 0o644); err != nil {
		return 1, err
	}
	fmt.Fprint(w, summary)
	fmt.Fprintf(w, "wrote %s/{reference.json,summary.md} and load-*/seed-*/{summary.md,trace.json,compare-*.svg}\n", out)
	return 0, nil
}
