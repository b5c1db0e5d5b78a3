package reference

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// starts runs p over in and returns each job's start by name (NaN: never started).
func starts(t *testing.T, in Input, p Policy) (map[string]float64, Result) {
	t.Helper()
	res, err := Simulate(in, p)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, j := range res.Jobs {
		out[j.Name] = j.Start
	}
	return out, res
}

func expect(t *testing.T, p Policy, got, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		if g := got[name]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Errorf("%s: %s starts at %v, want %v (all: %v)", p, name, g, w, got)
		}
	}
}

// One clique of 4 trays. A (3 trays, 0–10) leaves one tray free; B (4 trays) must wait for it
// until 10. C (1 tray, 5 s) arrives at 2: it ends at 7, before B's reservation at 10, so EASY
// and conservative backfill it at 2; FIFO keeps it behind B, which holds all 4 trays 10–15.
func TestEASYBackfillsWhereFIFOBlocks(t *testing.T) {
	in := Input{Cliques: 1, TraysPerClique: 4, Window: 100, Jobs: []Job{
		{Name: "A", Arrival: 0, Size: 3, Runtime: 10},
		{Name: "B", Arrival: 1, Size: 4, Runtime: 5},
		{Name: "C", Arrival: 2, Size: 1, Runtime: 5},
	}}
	for _, p := range []Policy{EASY, Conservative} {
		got, _ := starts(t, in, p)
		expect(t, p, got, map[string]float64{"A": 0, "B": 10, "C": 2})
	}
	got, res := starts(t, in, FIFO)
	expect(t, FIFO, got, map[string]float64{"A": 0, "B": 10, "C": 15})
	// FIFO: 3 trays 0–10, 4 trays 10–15, 1 tray 15–20: 55 busy of 4 × 20.
	if res.End != 20 || res.BusyTraySeconds != 55 || res.HealthyTraySeconds != 80 {
		t.Errorf("FIFO: end %v, busy %v, healthy %v; want 20, 55, 80", res.End, res.BusyTraySeconds, res.HealthyTraySeconds)
	}
	// A 1-tray job that would end after 10 delays B: nobody backfills it.
	in.Jobs[2].Runtime = 9
	for _, p := range Policies {
		got, _ := starts(t, in, p)
		expect(t, p, got, map[string]float64{"A": 0, "B": 10, "C": 15})
	}
}

// One clique of 6 trays. A (4 trays, 0–10); B (4 trays, 5 s) reserved at 10; C (5 trays, 5 s)
// arrives at 2; D (2 trays, 20 s) arrives at 3 when 2 trays are free.
//
// EASY protects B only: D fits now and leaves B's 4 trays at 10 (6 − 2), so it starts at 3 and
// holds 2 trays until 23; C then needs 5 trays and gets them when D ends: C at 23.
//
// Conservative also reserves C at 15 (after B, 10–15; at 10 only 6 − 4 = 2 are left). D would
// leave C 4 of the 5 it needs at 15, so D waits for its own reservation: at 10 B and D fit but D
// would run into C's at 15; at 15 C leaves 1; at 20 the clique is free: D at 20.
func TestConservativeProtectsEveryReservation(t *testing.T) {
	in := Input{Cliques: 1, TraysPerClique: 6, Window: 100, Jobs: []Job{
		{Name: "A", Arrival: 0, Size: 4, Runtime: 10},
		{Name: "B", Arrival: 1, Size: 4, Runtime: 5},
		{Name: "C", Arrival: 2, Size: 5, Runtime: 5},
		{Name: "D", Arrival: 3, Size: 2, Runtime: 20},
	}}
	got, _ := starts(t, in, EASY)
	expect(t, EASY, got, map[string]float64{"A": 0, "B": 10, "C": 23, "D": 3})
	got, _ = starts(t, in, Conservative)
	expect(t, Conservative, got, map[string]float64{"A": 0, "B": 10, "C": 15, "D": 20})
	// FIFO: B blocks at 1, C and D queue behind it: B 10–15, C 15–20, D 20.
	got, _ = starts(t, in, FIFO)
	expect(t, FIFO, got, map[string]float64{"A": 0, "B": 10, "C": 15, "D": 20})
}

// One clique of 3 trays. Domain B (2 trays, 0–10) runs on trays 0 and 1; tray 0 fails at 2 and
// is back at 22. B keeps running to 10 on tray 1 and the replacement tray 2. C (1 tray) arrives
// at 3 with no tray free and starts when B ends, at 10; D (3 trays) needs the whole clique,
// which it gets when tray 0 is repaired, at 22. The same for every policy.
func TestFailuresTakeTraysAway(t *testing.T) {
	in := Input{Cliques: 1, TraysPerClique: 3, Window: 100,
		Jobs: []Job{
			{Name: "B", Arrival: 0, Size: 2, Runtime: 10},
			{Name: "C", Arrival: 3, Size: 1, Runtime: 1},
			{Name: "D", Arrival: 4, Size: 3, Runtime: 1},
		},
		Failures: []Failure{{At: 2, Clique: 0, Tray: 0, RepairAfter: 20}},
	}
	for _, p := range Policies {
		got, res := starts(t, in, p)
		expect(t, p, got, map[string]float64{"B": 0, "C": 10, "D": 22})
		if res.Jobs[0].End != 10 {
			t.Errorf("%s: B ends at %v, want 10 (a failure does not stretch it)", p, res.Jobs[0].End)
		}
		// Healthy: 3 trays 0–2, 2 trays 2–22, 3 trays 22–23 = 6 + 40 + 3. Busy: 2 trays 0–10
		// (tray 0 until 2, then tray 2), 1 tray 10–11, 3 trays 22–23 = 20 + 1 + 3.
		if res.End != 23 || res.HealthyTraySeconds != 49 || res.BusyTraySeconds != 24 {
			t.Errorf("%s: end %v, healthy %v, busy %v; want 23, 49, 24", p, res.End, res.HealthyTraySeconds, res.BusyTraySeconds)
		}
	}

	// A plain pod on a failing tray ends there; Q (the whole clique) waits for the repair.
	in = Input{Cliques: 1, TraysPerClique: 2, Window: 100,
		Jobs:     []Job{{Name: "P", Arrival: 0, Size: 1, Runtime: 100, Plain: true}, {Name: "Q", Arrival: 6, Size: 2, Runtime: 1}},
		Failures: []Failure{{At: 5, Clique: 0, Tray: 0, RepairAfter: 10}},
	}
	for _, p := range Policies {
		got, res := starts(t, in, p)
		expect(t, p, got, map[string]float64{"P": 0, "Q": 15})
		if !res.Jobs[0].Killed || res.Jobs[0].End != 5 {
			t.Errorf("%s: plain pod %+v, want killed at 5", p, res.Jobs[0])
		}
	}
}

// Two cliques of 4 trays. A (3 trays) goes to clique 0 (a tie, the lowest-numbered). B (1 tray)
// goes where it fits tightest, clique 0's last tray, which leaves clique 1 whole for C (4 trays)
// at 2. Worst fit would have put B in clique 1 and C would wait for A or B.
func TestBestFitChoosesTheFullestClique(t *testing.T) {
	in := Input{Cliques: 2, TraysPerClique: 4, Window: 100, Jobs: []Job{
		{Name: "A", Arrival: 0, Size: 3, Runtime: 100},
		{Name: "B", Arrival: 1, Size: 1, Runtime: 100},
		{Name: "C", Arrival: 2, Size: 4, Runtime: 1},
	}}
	for _, p := range Policies {
		got, res := starts(t, in, p)
		expect(t, p, got, map[string]float64{"A": 0, "B": 1, "C": 2})
		if cl := []int{res.Jobs[0].Clique, res.Jobs[1].Clique, res.Jobs[2].Clique}; cl[0] != 0 || cl[1] != 0 || cl[2] != 1 {
			t.Errorf("%s: cliques %v, want [0 0 1]", p, cl)
		}
	}
	// The reservation goes to the fullest clique too: with both cliques partly busy until 10,
	// D (2 trays) reserves where fewer are available at 10 (clique 1: 3, as Z holds one until
	// 50), not the emptier clique 0, and E (4 trays, arriving later) still starts on clique 0 at 10.
	in = Input{Cliques: 2, TraysPerClique: 4, Window: 100, Jobs: []Job{
		{Name: "X", Arrival: 0, Size: 4, Runtime: 10},
		{Name: "Y", Arrival: 0, Size: 3, Runtime: 10},
		{Name: "Z", Arrival: 0, Size: 1, Runtime: 50},
		{Name: "D", Arrival: 1, Size: 2, Runtime: 10},
		{Name: "E", Arrival: 2, Size: 4, Runtime: 10},
	}}
	for _, p := range Policies {
		got, res := starts(t, in, p)
		expect(t, p, got, map[string]float64{"X": 0, "Y": 0, "Z": 0, "D": 10, "E": 10})
		if res.Jobs[3].Clique != 1 || res.Jobs[4].Clique != 0 {
			t.Errorf("%s: D in clique %d, E in %d; want 1 and 0", p, res.Jobs[3].Clique, res.Jobs[4].Clique)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := Input{Cliques: 1, TraysPerClique: 4, Jobs: []Job{{Name: "a", Size: 4, Runtime: 1}}}
	if _, err := Simulate(ok, EASY); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mut  func(*Input)
		want string
	}{
		{func(in *Input) { in.Cliques = 0 }, "at least one"},
		{func(in *Input) { in.Jobs[0].Size = 5 }, "size 5, want 1 to 4"},
		{func(in *Input) { in.Jobs[0].Plain, in.Jobs[0].Size = true, 2 }, "plain pod a: size 2"},
		{func(in *Input) { in.Jobs[0].Runtime = 0 }, "runtime 0"},
		{func(in *Input) { in.Jobs[0].Arrival = math.NaN() }, "arrival NaN"},
		{func(in *Input) { in.Failures = []Failure{{Clique: 1, RepairAfter: 1}} }, "outside the fleet"},
		{func(in *Input) { in.Failures = []Failure{{RepairAfter: 1}, {RepairAfter: 1}} }, "fails twice"},
	} {
		in := ok
		in.Jobs = append([]Job(nil), ok.Jobs...)
		c.mut(&in)
		if _, err := Simulate(in, EASY); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to say %q", err, c.want)
		}
	}
	if _, err := Simulate(ok, Policy(7)); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

// On random traces, no policy ever puts more jobs on a clique than it has healthy trays, no job
// starts before it arrives, and every job starts.
func TestRandomTracesAreFeasible(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		in := Input{Cliques: 3, TraysPerClique: 6, Window: 100}
		for i := 0; i < 40; i++ {
			plain := rng.IntN(5) == 0
			size := 1 + rng.IntN(6)
			if plain {
				size = 1
			}
			in.Jobs = append(in.Jobs, Job{Name: string(rune('a'+i%26)) + string(rune('0'+i/26)), Arrival: float64(rng.IntN(100)), Size: size,
				Runtime: float64(1 + rng.IntN(30)), Plain: plain})
		}
		in.Failures = []Failure{{At: float64(rng.IntN(80)), Clique: rng.IntN(3), Tray: rng.IntN(6), RepairAfter: 15}}
		for _, p := range Policies {
			res, err := Simulate(in, p)
			if err != nil {
				t.Fatal(err)
			}
			f := in.Failures[0]
			for _, j := range res.Jobs {
				if math.IsNaN(j.Start) || j.Start < j.Arrival {
					t.Fatalf("seed %d %s: %+v never started or started before it arrived", seed, p, j)
				}
				// At every start, the jobs running in its clique fit in the healthy trays.
				used := 0
				for _, o := range res.Jobs {
					if o.Clique == j.Clique && o.Start <= j.Start && j.Start < o.End {
						used += o.Size
					}
				}
				// While the failed tray is away the clique has one tray fewer, and a domain that
				// was running on it when it failed may run a tray short (its Size is counted here).
				limit := in.TraysPerClique
				if j.Clique == f.Clique && f.At <= j.Start && j.Start < f.At+f.RepairAfter {
					limit--
					for _, o := range res.Jobs {
						if o.Clique == f.Clique && !o.Plain && o.Start <= f.At && f.At < o.End && j.Start < o.End {
							limit++
							break
						}
					}
				}
				if used > limit {
					t.Fatalf("seed %d %s: %d trays in use on clique %d at %v, at most %d allowed", seed, p, used, j.Clique, j.Start, limit)
				}
			}
		}
	}
}

// The backfill guarantee: without failures and with exact runtimes, no job starts later than
// the first reservation it got (EASY's head is never delayed by backfilling, conservative's
// reservations never move later). On random traces of 3 cliques of 6 trays.
func TestReservationsAreKept(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		in := Input{Cliques: 3, TraysPerClique: 6, Window: 100}
		for i := 0; i < 60; i++ {
			in.Jobs = append(in.Jobs, Job{Name: string(rune('a'+i%26)) + string(rune('0'+i/26)), Arrival: float64(rng.IntN(100)),
				Size: 1 + rng.IntN(6), Runtime: float64(1 + rng.IntN(40))})
		}
		for _, p := range []Policy{EASY, Conservative} {
			res, err := Simulate(in, p)
			if err != nil {
				t.Fatal(err)
			}
			reserved := 0
			for _, j := range res.Jobs {
				if !math.IsNaN(j.Reserved) {
					reserved++
					if j.Start > j.Reserved {
						t.Fatalf("seed %d %s: %s reserved at %v started at %v", seed, p, j.Name, j.Reserved, j.Start)
					}
				}
			}
			if reserved == 0 {
				t.Fatalf("seed %d %s: no reservation made; the test tests nothing", seed, p)
			}
		}
	}
}
