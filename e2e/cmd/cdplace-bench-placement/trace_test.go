package main

import (
	"math"
	"reflect"
	"testing"
)

func spec(seed uint64) TraceSpec {
	return TraceSpec{Seed: seed, Racks: 8, TraysPerClique: 18, Arrivals: 120, PlainPods: 30, Failures: 3, Horizon: 3600}
}

func TestTraceDeterministic(t *testing.T) {
	a, b := GenerateTrace(spec(1)), GenerateTrace(spec(1))
	if !reflect.DeepEqual(a, b) || a.Digest() != b.Digest() {
		t.Fatal("the same spec gave two different traces")
	}
	if c := GenerateTrace(spec(2)); reflect.DeepEqual(a.CDs, c.CDs) || a.Digest() == c.Digest() {
		t.Fatal("seeds 1 and 2 gave the same trace")
	}
	// Streams are independent: more failures leave the domains and plain pods as they were.
	s := spec(1)
	s.Failures = 5
	if d := GenerateTrace(s); !reflect.DeepEqual(a.CDs, d.CDs) || !reflect.DeepEqual(a.Plain, d.Plain) {
		t.Error("changing the failure count changed the arrivals")
	}
}

func TestTraceShape(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		s := spec(seed)
		tr := GenerateTrace(s)
		if len(tr.CDs) != s.Arrivals || len(tr.Plain) != s.PlainPods || len(tr.Failures) != s.Failures {
			t.Fatalf("seed %d: %d CDs, %d plain, %d failures", seed, len(tr.CDs), len(tr.Plain), len(tr.Failures))
		}
		last, big, small := -1.0, 0, 0
		for _, cd := range tr.CDs {
			if cd.At < last || cd.At < 0 || cd.At >= arrivalWindow*s.Horizon {
				t.Fatalf("seed %d: arrival %v out of order or outside the window", seed, cd)
			}
			last = cd.At
			if cd.Size < 1 || cd.Size > s.TraysPerClique {
				t.Fatalf("seed %d: size %d", seed, cd.Size)
			}
			if cd.Size >= 16 {
				big++
			}
			if cd.Size <= 4 {
				small++
			}
			if cd.Lifetime <= 0 || cd.Lifetime > 0.8*s.Horizon {
				t.Fatalf("seed %d: lifetime %v", seed, cd.Lifetime)
			}
		}
		if small < len(tr.CDs)/3 || big == 0 {
			t.Errorf("seed %d: %d small (≤4) and %d big (≥16) domains of %d; want a skew to small with some big", seed, small, big, len(tr.CDs))
		}
		seen := map[[2]int]bool{}
		for i, f := range tr.Failures {
			if i > 0 && f.At < tr.Failures[i-1].At {
				t.Fatalf("seed %d: failures out of order", seed)
			}
			if seen[[2]int{f.Rack, f.Tray}] || f.Rack >= s.Racks || f.Tray >= s.TraysPerClique {
				t.Fatalf("seed %d: failure %+v repeated or outside the fleet", seed, f)
			}
			seen[[2]int{f.Rack, f.Tray}] = true
		}
		// The default trace must saturate the fleet: more tray-seconds asked than there are.
		if _, load := tr.Demand(); load < 1.1 {
			t.Errorf("seed %d: offered load %.2f of the fleet; want saturation (> 1.1)", seed, load)
		}
	}
}

func TestTraceSmallClique(t *testing.T) {
	s := spec(3)
	s.TraysPerClique, s.Racks = 4, 1
	for _, cd := range GenerateTrace(s).CDs {
		if cd.Size > 4 {
			t.Fatalf("size %d on 4-tray cliques", cd.Size)
		}
	}
}

// A soak stretches the horizon and arrivals twentyfold and keeps the lifetime horizon: the
// offered load stays about what the hour-long trace offers, instead of twenty times it.
func TestTraceLifetimeHorizonKeepsTheLoad(t *testing.T) {
	base := spec(1)
	_, want := GenerateTrace(base).Demand()
	long := base
	long.Horizon, long.Arrivals, long.PlainPods, long.Failures = 20*base.Horizon, 20*base.Arrivals, 20*base.PlainPods, 21
	_, stretched := GenerateTrace(long).Demand()
	long.LifetimeHorizon = base.Horizon
	tr := GenerateTrace(long)
	_, kept := tr.Demand()
	if stretched < 10*want {
		t.Errorf("without a lifetime horizon the load should grow with the horizon: %.2f vs %.2f", stretched, want)
	}
	if kept < 0.8*want || kept > 1.25*want {
		t.Errorf("load %.2f with the lifetime horizon, want about %.2f", kept, want)
	}
	for _, cd := range tr.CDs {
		if cd.Lifetime > 0.8*base.Horizon {
			t.Fatalf("%s lives %.0f s, more than 0.8 of the lifetime horizon", cd.Name, cd.Lifetime)
		}
	}
	for _, f := range tr.Failures {
		if f.RepairAfter != base.Horizon/6 {
			t.Fatalf("a failure is repaired after %.0f s, want %.0f", f.RepairAfter, base.Horizon/6)
		}
	}
}

// -load makes the trace's offered load what was asked, on any seed, by scaling the lifetimes
// only: arrivals, sizes and failures stay as drawn.
func TestTraceHitsTheRequestedLoad(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		drawn := GenerateTrace(spec(seed))
		for _, load := range []float64{0.7, 0.9, 1.7} {
			s := spec(seed)
			s.Load = load
			tr := GenerateTrace(s)
			if _, got := tr.Demand(); math.Abs(got-load) > loadTolerance {
				t.Errorf("seed %d: load %.4f, asked %.1f (tolerance %g)", seed, got, load, loadTolerance)
			}
			if len(tr.CDs) != len(drawn.CDs) || !reflect.DeepEqual(tr.Failures, drawn.Failures) {
				t.Fatalf("seed %d, load %.1f: arrivals or failures changed", seed, load)
			}
			for i, cd := range tr.CDs {
				if cd.At != drawn.CDs[i].At || cd.Size != drawn.CDs[i].Size {
					t.Fatalf("seed %d, load %.1f: %s changed from %+v to %+v", seed, load, cd.Name, drawn.CDs[i], cd)
				}
			}
		}
	}
}

// The offered load is Σ trays × lifetime over the usable tray-seconds of the arrival window:
// one rack of 2 trays, a window of 80 s (horizon 100), one tray away for 20 s of it.
func TestDemandCountsUsableTrays(t *testing.T) {
	tr := Trace{
		Spec:     TraceSpec{Racks: 1, TraysPerClique: 2, Horizon: 100},
		CDs:      []CDArrival{{Size: 2, Lifetime: 30}},
		Plain:    []PlainArrival{{Lifetime: 40}},
		Failures: []TrayFailure{{At: 70, RepairAfter: 50}}, // away 70–120: 10 s inside the window, 160 − 10 usable
	}
	meanSize, load := tr.Demand()
	if meanSize != 2 || math.Abs(load-100.0/150) > 1e-12 {
		t.Errorf("mean size %v, load %v; want 2 and 100/150", meanSize, load)
	}
}
