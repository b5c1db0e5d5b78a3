package main

// -reference-only -simulate: policy components scheduled offline on each trace by
// `cdplace replay --simulate` (issue 37), beside the references, with issue 36's "Done when"
// checks on every trace and their tally over all traces. A live run of one configuration and
// seed takes minutes; this takes seconds per trace, so a policy change can be judged on twenty
// seeds per load, not two.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// simOptions say which policies to simulate and how.
type simOptions struct {
	cli      string   // the cdplace CLI
	policies []string // components; shippedPolicy: the one built into the CLI
	flags    []string // further `cdplace replay --simulate` flags (time scale, deadlines, args)
}

// shippedPolicy names the policy built into the cdplace CLI in -simulate.
const shippedPolicy = "shipped"

// parseSimulate reads -simulate's list and -simulate-flags; no policies: no simulation.
func parseSimulate(root, cli, list, flags string) (*simOptions, error) {
	var so simOptions
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if p != shippedPolicy {
			abs, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			if _, err := os.Stat(abs); err != nil {
				return nil, fmt.Errorf("-simulate: policy %q: %w (a component file, or %q for the CLI's own)", p, err, shippedPolicy)
			}
			p = abs
		}
		so.policies = append(so.policies, p)
	}
	if len(so.policies) == 0 {
		if strings.TrimSpace(flags) != "" {
			return nil, fmt.Errorf("-simulate-flags without -simulate")
		}
		return nil, nil
	}
	if !filepath.IsAbs(cli) {
		abs, err := filepath.Abs(filepath.Join(root, cli))
		if err != nil {
			return nil, err
		}
		cli = abs
	}
	if _, err := os.Stat(cli); err != nil {
		return nil, fmt.Errorf("-simulate needs the cdplace CLI (make build): %w", err)
	}
	so.cli = cli
	so.flags = strings.Fields(flags)
	return &so, nil
}

// simName is how the report names a simulated policy: "sim shipped", "sim team_racks".
func simName(policy string) string {
	return "sim " + strings.TrimSuffix(filepath.Base(policy), ".wasm")
}

// simReport is the part of `cdplace replay --simulate --json` that the comparison reads.
type simReport struct {
	Policies []simPolicy `json:"policies"`
}

type simPolicy struct {
	Policy                 string      `json:"policy"`
	Error                  *string     `json:"error"`
	Splits                 int         `json:"splits"`
	PartBound              int         `json:"partBound"`
	Refusals               int         `json:"refusals"`
	Allocation             float64     `json:"allocation"`
	Window                 float64     `json:"window"`
	TraysAllocatedInWindow float64     `json:"traysAllocatedInWindow"`
	End                    float64     `json:"end"`
	Capped                 bool        `json:"capped"`
	Domains                []simDomain `json:"domains"`
}

type simDomain struct {
	Name    string   `json:"name"`
	Size    int      `json:"size"`
	Arrival float64  `json:"arrival"`
	Start   *float64 `json:"start"`
	End     *float64 `json:"end"`
}

// simulate runs every policy of so on trace tr (written at tracePath) and returns their
// results, named by simName.
func (so *simOptions) simulate(tr Trace, tracePath string) ([]*PolicyResult, error) {
	tmp, err := os.CreateTemp("", "cdplace-simulate-*.json")
	if err != nil {
		return nil, err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	var out []*PolicyResult
	for _, p := range so.policies {
		args := append([]string{"replay", "--simulate", tracePath, "--json", tmp.Name()}, so.flags...)
		if p != shippedPolicy {
			args = append(args, "--policy", p)
		}
		cmd := exec.Command(so.cli, args...)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s %s: %w\n%s", so.cli, strings.Join(args, " "), err, msg)
		}
		data, err := os.ReadFile(tmp.Name())
		if err != nil {
			return nil, err
		}
		res, err := simResults(data, tr, simName(p))
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", p, tracePath, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// simResults reads one policy's `--simulate --json` report on tr as a PolicyResult named name:
// waits and GPU-hours per class from the domains' spans, as for the live runs.
func simResults(data []byte, tr Trace, name string) (*PolicyResult, error) {
	var rep simReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, err
	}
	if len(rep.Policies) != 1 {
		return nil, fmt.Errorf("want one policy in the report, got %d", len(rep.Policies))
	}
	p := rep.Policies[0]
	if p.Error != nil {
		return nil, fmt.Errorf("the policy failed: %s", *p.Error)
	}
	// The simulator's arrival window is a copy of arrivalWindow: the same, or these figures
	// would not compare with the references'.
	if math.Abs(p.Window-tr.Window()) > 1e-6 {
		return nil, fmt.Errorf("the simulation's arrival window is %g trace s, the bench's %g", p.Window, tr.Window())
	}
	if len(p.Domains) != len(tr.CDs) {
		return nil, fmt.Errorf("%d domains simulated, the trace has %d", len(p.Domains), len(tr.CDs))
	}
	spans := make([]span, 0, len(p.Domains))
	for _, d := range p.Domains {
		s := span{size: d.Size, arrival: d.Arrival, neverStarted: d.Start == nil}
		if !s.neverStarted {
			s.start, s.end = *d.Start, p.End
			if d.End != nil {
				s.end = *d.End
			}
		}
		spans = append(spans, s)
	}
	return &PolicyResult{
		Policy: name, Simulated: true, End: p.End, Capped: p.Capped,
		GPUAllocation: p.Allocation, TraysAllocatedWindow: p.TraysAllocatedInWindow,
		Classes: policyClasses(spans, tr.Window(), p.End),
		Splits:  p.Splits, PrepareRefusals: p.Refusals, StalledPartBound: p.PartBound,
	}, nil
}

// TallyRow is how many traces of one load a policy's "Done when" check held on.
type TallyRow struct {
	Load   float64 `json:"offeredLoad"`
	Policy string  `json:"policy"`
	Check  string  `json:"check"`
	Holds  int     `json:"holds"`
	Traces int     `json:"traces"`
}

// tally counts, per load, policy and check, the traces the check held on; loads[i] is the load
// that cmps[i]'s trace was made for (its own offered load differs a little).
func tally(cmps []*Comparison, loads []float64) []TallyRow {
	type key struct {
		load          float64
		policy, check string
	}
	idx := map[key]int{}
	var rows []TallyRow
	for i, c := range cmps {
		load := loads[i]
		for _, p := range c.Policies { // in the order given
			n := p.Policy
			for _, ch := range c.DoneWhen[n] {
				k := key{load, n, ch.Name}
				j, ok := idx[k]
				if !ok {
					j = len(rows)
					idx[k] = j
					rows = append(rows, TallyRow{Load: load, Policy: n, Check: ch.Name})
				}
				rows[j].Traces++
				if ch.Holds {
					rows[j].Holds++
				}
			}
		}
	}
	return rows
}

// tallyTable is the tally as markdown: a row per load and check, a column per policy.
func tallyTable(rows []TallyRow) string {
	var policies []string
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Policy] {
			seen[r.Policy] = true
			policies = append(policies, r.Policy)
		}
	}
	var sb strings.Builder
	sb.WriteString("Issue 36's \"Done when\" checks: traces each holds on, of those simulated at each load\n\n| load | check |")
	for _, p := range policies {
		fmt.Fprintf(&sb, " %s |", p)
	}
	sb.WriteString("\n|---|---|" + strings.Repeat("---|", len(policies)) + "\n")
	type lc struct {
		load  float64
		check string
	}
	var order []lc
	cell := map[lc]map[string]TallyRow{}
	for _, r := range rows {
		k := lc{r.Load, r.Check}
		if cell[k] == nil {
			cell[k] = map[string]TallyRow{}
			order = append(order, k)
		}
		cell[k][r.Policy] = r
	}
	for _, k := range order {
		fmt.Fprintf(&sb, "| %g | %s |", k.load, k.check)
		for _, p := range policies {
			if r, ok := cell[k][p]; ok {
				fmt.Fprintf(&sb, " %d/%d |", r.Holds, r.Traces)
			} else {
				sb.WriteString(" – |")
			}
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// PooledRow is one policy over every trace of one load: the waits of all the traces' domains of
// a class pooled before taking the median or p95 (a class of 10–20 domains per trace has its
// p95 decided by one or two domains; pooled over 20 traces it has 200–400), the GPU-hours and
// trays allocated summed and averaged, each beside EASY's on the same traces.
type PooledRow struct {
	Load          float64 `json:"offeredLoad"`
	Policy        string  `json:"policy"`
	Traces        int     `json:"traces"`
	SmallMedian   float64 `json:"waitMedian1to4TraceSeconds"`
	BigP95        float64 `json:"waitP95Of16to18TraceSeconds"`
	BigGPUHours   float64 `json:"gpuHours16to18InWindow"`
	TraysWindow   float64 `json:"traysAllocatedInWindowMean"`
	GPUAllocation float64 `json:"gpuAllocationMean"`
	easy          *PooledRow
}

// pool pools every policy's figures over the traces of each load (loads[i]: cmps[i]'s load).
func pool(cmps []*Comparison, loads []float64) []*PooledRow {
	type key struct {
		load   float64
		policy string
	}
	type acc struct {
		row        *PooledRow
		small, big []float64
	}
	idx := map[key]*acc{}
	var order []key
	last := len(SizeClasses) - 1
	for i, c := range cmps {
		for _, p := range c.Policies {
			k := key{loads[i], p.Policy}
			a := idx[k]
			if a == nil {
				a = &acc{row: &PooledRow{Load: k.load, Policy: k.policy}}
				idx[k] = a
				order = append(order, k)
			}
			a.row.Traces++
			a.small = append(a.small, p.Classes[0].waits...)
			a.big = append(a.big, p.Classes[last].waits...)
			a.row.BigGPUHours += p.Classes[last].GPUHoursWindow
			a.row.TraysWindow += p.TraysAllocatedWindow
			a.row.GPUAllocation += p.GPUAllocation
		}
	}
	var out []*PooledRow
	for _, k := range order {
		a := idx[k]
		r := a.row
		r.SmallMedian, r.BigP95 = quantile(a.small, 0.5), quantile(a.big, 0.95)
		r.TraysWindow /= float64(r.Traces)
		r.GPUAllocation /= float64(r.Traces)
		if e := idx[key{k.load, "EASY"}]; e != nil {
			r.easy = e.row
		}
		out = append(out, r)
	}
	return out
}

// pooledTable is the pooled figures as markdown, EASY's beside each.
func pooledTable(rows []*PooledRow) string {
	var sb strings.Builder
	sb.WriteString("Pooled over each load's traces (waits in trace seconds; × EASY's on the same traces)\n\n")
	sb.WriteString("| load | policy | traces | median wait 1–4 | p95 wait 16–18 | GPU-h to 16–18 (window) | trays allocated (window mean) | GPU allocation (mean) |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|\n")
	rel := func(v, e float64, f string) string {
		s := fmt.Sprintf(f, v)
		if e > 0 {
			s += fmt.Sprintf(" (%.2f×)", v/e)
		}
		return s
	}
	for _, r := range rows {
		e := r.easy
		if e == nil {
			e = &PooledRow{}
		}
		fmt.Fprintf(&sb, "| %g | %s | %d | %s | %s | %s | %s | %s |\n", r.Load, r.Policy, r.Traces,
			rel(r.SmallMedian, e.SmallMedian, "%.0f"), rel(r.BigP95, e.BigP95, "%.0f"), rel(r.BigGPUHours, e.BigGPUHours, "%.0f"),
			rel(r.TraysWindow, e.TraysWindow, "%.1f"), rel(100*r.GPUAllocation, 100*e.GPUAllocation, "%.1f%%"))
	}
	return sb.String()
}
