package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// TraceSpec is everything the trace is generated from. Times are in trace seconds; the runner
// replays them at -time-scale trace seconds per real second.
type TraceSpec struct {
	Seed           uint64  `json:"seed"`
	Racks          int     `json:"racks"`          // one NVLink clique per rack
	TraysPerClique int     `json:"traysPerClique"` // the largest domain size
	Arrivals       int     `json:"arrivals"`       // ComputeDomain arrivals
	PlainPods      int     `json:"plainPods"`      // 4-GPU pods without a ComputeDomain
	Failures       int     `json:"failures"`       // tray failures
	Horizon        float64 `json:"horizon"`        // trace seconds; everything still there at the end is withdrawn
	// LifetimeHorizon is the H that lifetimes and repair times are drawn against (trace seconds;
	// 0: Horizon). A soak stretches Horizon and Arrivals together and keeps this at the base
	// horizon, so the offered load stays what it is in the hour-long trace.
	LifetimeHorizon float64 `json:"lifetimeHorizon,omitempty"`
	// Load, when positive, is the offered load the trace is made to have (see Demand): every
	// lifetime (of domains and plain pods) drawn as below is multiplied by Load over the load
	// drawn, so sizes, arrival times and failures stay as drawn. 0: the load as drawn.
	Load float64 `json:"load,omitempty"`
}

// CDArrival is one ComputeDomain: Size trays (Size pods of 4 GPUs each, one per tray), running
// for Lifetime trace seconds from the moment all its pods are bound.
type CDArrival struct {
	Name     string  `json:"name"`
	At       float64 `json:"at"`
	Size     int     `json:"size"`
	Lifetime float64 `json:"lifetime"`
}

// PlainArrival is one pod without a ComputeDomain asking for a whole tray (4 GPUs), running for
// Lifetime trace seconds from the moment it is bound.
type PlainArrival struct {
	Name     string  `json:"name"`
	At       float64 `json:"at"`
	Lifetime float64 `json:"lifetime"`
}

// TrayFailure takes tray Tray of rack Rack away at At (Node, ResourceSlices and the pods on it)
// and brings it back RepairAfter trace seconds later.
type TrayFailure struct {
	At          float64 `json:"at"`
	Rack        int     `json:"rack"`
	Tray        int     `json:"tray"`
	RepairAfter float64 `json:"repairAfter"`
}

// Trace is the workload every configuration replays.
type Trace struct {
	Spec     TraceSpec      `json:"spec"`
	CDs      []CDArrival    `json:"computeDomains"`
	Plain    []PlainArrival `json:"plainPods"`
	Failures []TrayFailure  `json:"trayFailures"`
}

// sizeWeights skews domain sizes towards small powers of two, with some whole-rack domains.
// Mean ≈ 5.8 trays.
var sizeWeights = []struct{ size, weight int }{
	{1, 16}, {2, 16}, {3, 4}, {4, 16}, {5, 2}, {6, 4}, {8, 12}, {9, 2}, {10, 2}, {12, 4},
	{16, 4}, {17, 2}, {18, 4},
}

// Independent random streams, so that e.g. changing the number of failures leaves the
// ComputeDomain arrivals as they were.
const (
	streamCDs uint64 = iota + 0x5eed
	streamPlain
	streamFailures
)

// arrivalWindow is the share of the horizon in which things arrive; the rest lets the queue
// drain a little before the end.
const arrivalWindow = 0.8

// GenerateTrace is a pure function of spec: the same spec gives the same trace.
//
//   - ComputeDomain arrivals: a Poisson process conditioned on spec.Arrivals events in the first
//     80% of the horizon H (exponential gaps, normalised); sizes from sizeWeights (capped at the
//     clique size); lifetimes L/15 + Exp(mean L/6), at most 0.8 L (mean ≈ 0.23 L), where L is
//     the lifetime horizon (H unless set).
//   - Plain pods the same way, lifetimes L/20 + Exp(mean L/6).
//   - Tray failures uniformly in [0.2 H, 0.7 H] on distinct trays, each repaired L/6 later.
//   - With spec.Load set, every lifetime scaled by one factor so that Demand gives spec.Load
//     (within loadTolerance: lifetimes are rounded to the millisecond).
func GenerateTrace(spec TraceSpec) Trace {
	h := spec.Horizon
	l := h
	if spec.LifetimeHorizon > 0 {
		l = spec.LifetimeHorizon
	}
	tr := Trace{Spec: spec}

	rng := rand.New(rand.NewPCG(spec.Seed, streamCDs))
	total := 0
	for _, w := range sizeWeights {
		total += w.weight
	}
	for i, at := range arrivals(rng, spec.Arrivals, arrivalWindow*h) {
		pick, size := rng.IntN(total), 1
		for _, w := range sizeWeights {
			if pick < w.weight {
				size = w.size
				break
			}
			pick -= w.weight
		}
		size = min(size, spec.TraysPerClique)
		life := math.Min(l/15+rng.ExpFloat64()*l/6, 0.8*l)
		tr.CDs = append(tr.CDs, CDArrival{Name: fmt.Sprintf("cd-%03d", i), At: round(at), Size: size, Lifetime: round(life)})
	}

	rng = rand.New(rand.NewPCG(spec.Seed, streamPlain))
	for i, at := range arrivals(rng, spec.PlainPods, arrivalWindow*h) {
		life := math.Min(l/20+rng.ExpFloat64()*l/6, 0.8*l)
		tr.Plain = append(tr.Plain, PlainArrival{Name: fmt.Sprintf("plain-%03d", i), At: round(at), Lifetime: round(life)})
	}

	rng = rand.New(rand.NewPCG(spec.Seed, streamFailures))
	used := map[[2]int]bool{}
	for len(tr.Failures) < spec.Failures && len(used) < spec.Racks*spec.TraysPerClique {
		at := (0.2 + 0.5*rng.Float64()) * h
		rack, tray := rng.IntN(spec.Racks), rng.IntN(spec.TraysPerClique)
		if used[[2]int{rack, tray}] {
			continue
		}
		used[[2]int{rack, tray}] = true
		tr.Failures = append(tr.Failures, TrayFailure{At: round(at), Rack: rack, Tray: tray, RepairAfter: round(l / 6)})
	}
	sort.SliceStable(tr.Failures, func(i, j int) bool { return tr.Failures[i].At < tr.Failures[j].At })
	if _, drawn := tr.Demand(); spec.Load > 0 && drawn > 0 {
		f := spec.Load / drawn
		for i := range tr.CDs {
			tr.CDs[i].Lifetime = max(round(tr.CDs[i].Lifetime*f), 0.001)
		}
		for i := range tr.Plain {
			tr.Plain[i].Lifetime = max(round(tr.Plain[i].Lifetime*f), 0.001)
		}
	}
	return tr
}

// loadTolerance is how far Demand's load may be from a requested TraceSpec.Load.
const loadTolerance = 0.005

// arrivals returns n sorted times in [0, window): the cumulative sums of n+1 exponential gaps,
// scaled so the (n+1)th falls on window (the order statistics of uniform arrivals, i.e. a
// Poisson process conditioned on n events).
func arrivals(rng *rand.Rand, n int, window float64) []float64 {
	if n <= 0 {
		return nil
	}
	cum := make([]float64, n+1)
	sum := 0.0
	for i := range cum {
		sum += rng.ExpFloat64()
		cum[i] = sum
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = cum[i] / sum * window
	}
	return out
}

// round keeps trace times to the millisecond, so the JSON is short and stable.
func round(v float64) float64 { return math.Round(v*1000) / 1000 }

// Digest identifies a trace: the first 12 hex digits of the SHA-256 of its JSON.
func (t Trace) Digest() string {
	data, _ := json.Marshal(t)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:6])
}

// Window is the arrival window in trace seconds: everything arrives in [0, Window).
func (t Trace) Window() float64 { return arrivalWindow * t.Spec.Horizon }

// Demand summarises the offered load: the tray-seconds of ComputeDomains and plain pods asked
// for (Σ trays × lifetime), over the usable tray-seconds of the arrival window (the fleet's
// trays × the window, less the time failed trays are away within it).
func (t Trace) Demand() (meanSize, offeredLoad float64) {
	traySecs := 0.0
	for _, cd := range t.CDs {
		meanSize += float64(cd.Size)
		traySecs += float64(cd.Size) * cd.Lifetime
	}
	for _, p := range t.Plain {
		traySecs += p.Lifetime
	}
	if len(t.CDs) > 0 {
		meanSize /= float64(len(t.CDs))
	}
	w := t.Window()
	usable := float64(t.Spec.Racks*t.Spec.TraysPerClique) * w
	for _, f := range t.Failures {
		usable -= max(0, math.Min(f.At+f.RepairAfter, w)-math.Min(f.At, w))
	}
	if usable > 0 {
		offeredLoad = traySecs / usable
	}
	return meanSize, offeredLoad
}
