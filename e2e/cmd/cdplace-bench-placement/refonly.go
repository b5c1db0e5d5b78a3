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
	for _, load := range o.loads {
		for _, seed := range o.seeds {
			tr := GenerateTrace(o.traceSpec(seed, load))
			cmp, err := compare(tr, nil)
			if err != nil {
				return 1, fmt.Errorf("seed %d, load %g: %w", seed, load, err)
			}
			run.Comparisons = append(run.Comparisons, cmp)
			dir := filepath.Join(out, loadDir(load), fmt.Sprintf("seed-%d", seed))
			if err := writeCharts(dir, comparisonCharts(cmp)); err != nil {
				return 1, err
			}
			table := comparisonTable(cmp)
			trace, _ := json.MarshalIndent(tr, "", " ")
			for name, data := range map[string][]byte{"summary.md": []byte(table), "trace.json": append(trace, '\n')} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					return 1, err
				}
			}
			fmt.Fprintf(&sb, "### Load %g, seed %d\n\n%s\n", load, seed, table)
		}
	}
	run.Seconds = time.Since(began).Seconds()
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return 1, err
	}
	if err := os.WriteFile(filepath.Join(out, "reference.json"), append(data, '\n'), 0o644); err != nil {
		return 1, err
	}
	summary := fmt.Sprintf("Offline references (EASY, conservative backfill, runtime-blind FIFO) on %d traces in %.2f s\n\n%s",
		len(run.Comparisons), run.Seconds, sb.String())
	if err := os.WriteFile(filepath.Join(out, "summary.md"), []byte(summary), 0o644); err != nil {
		return 1, err
	}
	fmt.Fprint(w, summary)
	fmt.Fprintf(w, "wrote %s/{reference.json,summary.md} and load-*/seed-*/{summary.md,trace.json,compare-*.svg}\n", out)
	return 0, nil
}
