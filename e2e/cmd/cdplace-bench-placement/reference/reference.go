// Package reference simulates, offline and in trace time, the schedulers cdplace is measured
// against on the same trace: clairvoyant batch schedulers that know every job's exact runtime
// (EASY backfill and conservative backfill, Slurm-style, with best fit) and a runtime-blind
// floor (FIFO with best fit, no backfill).
//
// The model (docs/dev/placement-reference.md walks through it by hand):
//
//   - The fleet is Cliques cliques of TraysPerClique trays. A job of Size trays runs on Size
//     free healthy trays of ONE clique (the lowest-numbered free ones) for exactly Runtime
//     seconds from its start; a plain pod is a job of one tray, queued with the domains in
//     arrival order.
//   - Events at one instant are applied in this order: completions, repairs, failures,
//     arrivals; then trays lost by running domains are replaced, then the policy runs.
//   - A tray failure takes the tray away until its repair. A plain pod on it is killed (it ends
//     there, as the live run's does). A domain on it keeps running to its original end, as the
//     live run's Job does, and takes a replacement tray in its own clique as soon as one is free,
//     before any queued job.
//   - The policies see the future only through the runtimes: a clique's availability profile is
//     its free healthy trays now, less the replacements its domains still wait for, plus each
//     running job's trays at its end and each failed tray at its repair. Failures to come are
//     not known.
//   - Best fit: of the cliques where a job fits, the one with the fewest available trays at the
//     job's start (the fullest), the lowest-numbered on a tie.
//   - EASY: queue order; every job that fits now for its whole runtime starts; the first that
//     does not gets a reservation at its earliest start (best fit at that time), entered in the
//     profile; later jobs start now only if they fit for their whole runtime in the profile with
//     that reservation in it, i.e. they end before it, use trays it leaves over, or use another
//     clique.
//   - Conservative: the same, but every job that cannot start now gets a reservation, in queue
//     order; a job starts now only if it delays none of the reservations.
//   - A reservation, once made, is kept (time and clique) until its job starts; at every event
//     each queued job in turn may move to an earlier start that no other reservation holds
//     (Slurm's compression). Only a failure that takes a reserved tray away makes a reservation
//     move later. So, without failures, no job starts later than its first reservation.
//   - FIFO: queue order; every job that fits now starts (best fit), the first that does not
//     blocks the queue. Runtimes are not used.
package reference

import (
	"fmt"
	"math"
	"sort"
)

// Job is one ComputeDomain (Size trays in one clique) or plain pod (Plain, one tray).
type Job struct {
	Name    string
	Arrival float64 // trace seconds
	Size    int     // trays
	Runtime float64 // trace seconds from its start
	Plain   bool
}

// Failure takes tray Tray of clique Clique away at At until At+RepairAfter.
type Failure struct {
	At          float64
	Clique      int
	Tray        int
	RepairAfter float64
}

// Input is the trace as the reference sees it.
type Input struct {
	Cliques        int
	TraysPerClique int
	Jobs           []Job
	Failures       []Failure
	// Window is the arrival window (trace seconds): busy and healthy tray-seconds are also
	// summed over [0, Window].
	Window float64
}

// Policy is one of the simulated schedulers.
type Policy int

const (
	EASY         Policy = iota // EASY backfill with best fit (exact runtimes)
	Conservative               // conservative backfill with best fit (exact runtimes)
	FIFO                       // FIFO with best fit, no backfill (runtime-blind)
)

// Policies are every policy, in report order.
var Policies = []Policy{EASY, Conservative, FIFO}

func (p Policy) String() string {
	switch p {
	case EASY:
		return "easy"
	case Conservative:
		return "conservative"
	case FIFO:
		return "fifo"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Outcome is one job's schedule.
type Outcome struct {
	Name    string
	Size    int
	Plain   bool
	Arrival float64
	Start   float64 // NaN: never started
	End     float64 // its completion, or the failure that killed a plain pod; NaN: never started
	Clique  int     // -1: never started
	Killed  bool    // a plain pod ended by a tray failure
	// Reserved: the start time of the first reservation the job got (EASY, conservative), NaN
	// if it never needed one. Without failures a job starts no later than this.
	Reserved float64
}

// Result is one policy's schedule of one input.
type Result struct {
	Policy Policy
	Jobs   []Outcome // in input order
	// End is the last completion (or the last event, when some job never started).
	End float64
	// Tray-seconds over [0, End]: occupied healthy trays and healthy trays.
	BusyTraySeconds, HealthyTraySeconds float64
	// The same over [0, Window].
	BusyInWindow, HealthyInWindow float64
}

// Validate says what is wrong with in, if anything.
func (in Input) Validate() error {
	if in.Cliques < 1 || in.TraysPerClique < 1 {
		return fmt.Errorf("fleet of %d cliques of %d trays: want at least one of each", in.Cliques, in.TraysPerClique)
	}
	for _, j := range in.Jobs {
		switch {
		case j.Size < 1 || j.Size > in.TraysPerClique:
			return fmt.Errorf("job %s: size %d, want 1 to %d (one clique)", j.Name, j.Size, in.TraysPerClique)
		case j.Plain && j.Size != 1:
			return fmt.Errorf("plain pod %s: size %d, want 1", j.Name, j.Size)
		case !(j.Runtime > 0) || math.IsInf(j.Runtime, 0):
			return fmt.Errorf("job %s: runtime %v, want a positive number", j.Name, j.Runtime)
		case !(j.Arrival >= 0) || math.IsInf(j.Arrival, 0):
			return fmt.Errorf("job %s: arrival %v, want a number ≥ 0", j.Name, j.Arrival)
		}
	}
	seen := map[[2]int]bool{}
	for _, f := range in.Failures {
		if f.Clique < 0 || f.Clique >= in.Cliques || f.Tray < 0 || f.Tray >= in.TraysPerClique {
			return fmt.Errorf("failure of clique %d tray %d: outside the fleet", f.Clique, f.Tray)
		}
		if !(f.At >= 0) || !(f.RepairAfter > 0) || math.IsInf(f.At+f.RepairAfter, 0) {
			return fmt.Errorf("failure of clique %d tray %d at %v, repaired after %v: want times ≥ 0 and a repair > 0", f.Clique, f.Tray, f.At, f.RepairAfter)
		}
		if seen[[2]int{f.Clique, f.Tray}] {
			return fmt.Errorf("clique %d tray %d fails twice (the trace fails distinct trays)", f.Clique, f.Tray)
		}
		seen[[2]int{f.Clique, f.Tray}] = true
	}
	return nil
}

// sim is one simulation's state.
type sim struct {
	in      Input
	policy  Policy
	now     float64
	occ     [][]int // job index on each tray, -1: free
	healthy [][]bool
	jobs    []Outcome
	// pending[j]: trays domain j lost to failures and has not replaced yet.
	pending map[int]int
	running map[int]bool
	queue   []int // job indices not started, in arrival order
	reserve map[int]reservation
	repairs []Failure
	res     Result
}

// Simulate runs policy p over in.
func Simulate(in Input, p Policy) (Result, error) {
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	if p != EASY && p != Conservative && p != FIFO {
		return Result{}, fmt.Errorf("unknown policy %d", int(p))
	}
	s := &sim{in: in, policy: p, pending: map[int]int{}, running: map[int]bool{}, reserve: map[int]reservation{}}
	s.occ = make([][]int, in.Cliques)
	s.healthy = make([][]bool, in.Cliques)
	for c := range s.occ {
		s.occ[c] = make([]int, in.TraysPerClique)
		s.healthy[c] = make([]bool, in.TraysPerClique)
		for t := range s.occ[c] {
			s.occ[c][t], s.healthy[c][t] = -1, true
		}
	}
	order := make([]int, len(in.Jobs))
	for i, j := range in.Jobs {
		order[i] = i
		s.jobs = append(s.jobs, Outcome{Name: j.Name, Size: j.Size, Plain: j.Plain, Arrival: j.Arrival, Start: math.NaN(), End: math.NaN(), Clique: -1, Reserved: math.NaN()})
	}
	sort.SliceStable(order, func(a, b int) bool { return in.Jobs[order[a]].Arrival < in.Jobs[order[b]].Arrival })
	failures := append([]Failure(nil), in.Failures...)
	sort.SliceStable(failures, func(a, b int) bool { return failures[a].At < failures[b].At })

	nextArr, nextFail := 0, 0
	for {
		if nextArr == len(order) && len(s.running) == 0 && len(s.queue) == 0 {
			break // every job has ended: the run ends with the last completion
		}
		t := math.Inf(1)
		if nextArr < len(order) {
			t = in.Jobs[order[nextArr]].Arrival
		}
		if nextFail < len(failures) {
			t = math.Min(t, failures[nextFail].At)
		}
		for j := range s.running {
			t = math.Min(t, s.jobs[j].End)
		}
		for _, r := range s.repairs {
			t = math.Min(t, r.At+r.RepairAfter)
		}
		if math.IsInf(t, 1) {
			break
		}
		s.advance(t)
		// Completions.
		for j := range s.running {
			if s.jobs[j].End <= s.now {
				s.release(j)
			}
		}
		// Repairs.
		kept := s.repairs[:0]
		for _, r := range s.repairs {
			if r.At+r.RepairAfter <= s.now {
				s.healthy[r.Clique][r.Tray] = true
			} else {
				kept = append(kept, r)
			}
		}
		s.repairs = kept
		// Failures.
		for ; nextFail < len(failures) && failures[nextFail].At <= s.now; nextFail++ {
			s.fail(failures[nextFail])
		}
		// Arrivals.
		for ; nextArr < len(order) && in.Jobs[order[nextArr]].Arrival <= s.now; nextArr++ {
			s.queue = append(s.queue, order[nextArr])
		}
		s.replace()
		s.schedule()
	}
	s.res.Policy, s.res.Jobs, s.res.End = p, s.jobs, s.now
	return s.res, nil
}

// advance moves the clock to t, adding the tray-seconds in between.
func (s *sim) advance(t float64) {
	busy, healthy := 0, 0
	for c := range s.occ {
		for i, j := range s.occ[c] {
			if s.healthy[c][i] {
				healthy++
				if j >= 0 {
					busy++
				}
			}
		}
	}
	dt := t - s.now
	s.res.BusyTraySeconds += float64(busy) * dt
	s.res.HealthyTraySeconds += float64(healthy) * dt
	if w := math.Min(t, s.in.Window) - s.now; w > 0 {
		s.res.BusyInWindow += float64(busy) * w
		s.res.HealthyInWindow += float64(healthy) * w
	}
	s.now = t
}

func (s *sim) release(j int) {
	c := s.jobs[j].Clique
	for i, o := range s.occ[c] {
		if o == j {
			s.occ[c][i] = -1
		}
	}
	delete(s.running, j)
	delete(s.pending, j)
}

func (s *sim) fail(f Failure) {
	s.healthy[f.Clique][f.Tray] = false
	s.repairs = append(s.repairs, f)
	j := s.occ[f.Clique][f.Tray]
	if j < 0 {
		return
	}
	s.occ[f.Clique][f.Tray] = -1
	if s.jobs[j].Plain {
		s.jobs[j].End, s.jobs[j].Killed = s.now, true
		s.release(j)
		return
	}
	s.pending[j]++
}

// free is clique c's free healthy trays.
func (s *sim) free(c int) int {
	n := 0
	for i, o := range s.occ[c] {
		if o < 0 && s.healthy[c][i] {
			n++
		}
	}
	return n
}

// take gives job j n free healthy trays of clique c, the lowest-numbered first.
func (s *sim) take(j, c, n int) {
	for i := range s.occ[c] {
		if n == 0 {
			return
		}
		if s.occ[c][i] < 0 && s.healthy[c][i] {
			s.occ[c][i] = j
			n--
		}
	}
}

// replace gives running domains the trays they lost, in their own clique, oldest start first.
func (s *sim) replace() {
	var js []int
	for j := range s.pending {
		js = append(js, j)
	}
	sort.Slice(js, func(a, b int) bool {
		if s.jobs[js[a]].Start != s.jobs[js[b]].Start {
			return s.jobs[js[a]].Start < s.jobs[js[b]].Start
		}
		return js[a] < js[b]
	})
	for _, j := range js {
		c := s.jobs[j].Clique
		n := min(s.pending[j], s.free(c))
		s.take(j, c, n)
		if s.pending[j] -= n; s.pending[j] == 0 {
			delete(s.pending, j)
		}
	}
}

func (s *sim) start(j, c int) {
	s.jobs[j].Start, s.jobs[j].End, s.jobs[j].Clique = s.now, s.now+s.in.Jobs[j].Runtime, c
	s.take(j, c, s.in.Jobs[j].Size)
	s.running[j] = true
}

// schedule runs the policy at s.now over the queue.
func (s *sim) schedule() {
	if len(s.queue) == 0 {
		return
	}
	var left []int
	if s.policy == FIFO {
		for i, j := range s.queue {
			c := s.bestFitNow(j)
			if c < 0 {
				left = append(left, s.queue[i:]...)
				break
			}
			s.start(j, c)
		}
		s.queue = left
		return
	}
	depth := 1
	if s.policy == Conservative {
		depth = len(s.queue)
	}
	// The profile holds the running jobs and every reservation made so far; each job in turn
	// lifts its own, looks for its earliest start, and keeps its old reservation unless that
	// start is earlier (or the old one no longer fits, after a failure). So a job never moves
	// into a slot another job holds: no reservation is ever delayed by another job's move.
	p := s.profile()
	for _, j := range s.queue {
		if r, ok := s.reserve[j]; ok {
			p[r.c].add(r.t, r.t+s.in.Jobs[j].Runtime, -s.in.Jobs[j].Size)
		}
	}
	reserved := 0
	for _, j := range s.queue {
		job := s.in.Jobs[j]
		r, had := s.reserve[j]
		if had {
			p[r.c].add(r.t, r.t+job.Runtime, job.Size)
			delete(s.reserve, j)
		}
		at, c := p.earliest(job.Size, job.Runtime)
		if had && at >= r.t && p[r.c].fits(r.t, job.Size, job.Runtime) {
			at, c = r.t, r.c
		}
		if at == s.now {
			s.start(j, c)
			p[c].add(s.now, s.now+job.Runtime, -job.Size)
			continue
		}
		left = append(left, j)
		if reserved < depth && !math.IsInf(at, 1) {
			p[c].add(at, at+job.Runtime, -job.Size)
			s.reserve[j] = reservation{t: at, c: c}
			reserved++
			if math.IsNaN(s.jobs[j].Reserved) {
				s.jobs[j].Reserved = at
			}
		}
	}
	s.queue = left
}

// reservation is a queued job's planned start and clique.
type reservation struct {
	t float64
	c int
}

// bestFitNow is the fullest clique with room for job j now (free trays only), or -1.
func (s *sim) bestFitNow(j int) int {
	best, bestFree := -1, 0
	for c := range s.occ {
		f := s.free(c) - s.pendingIn(c)
		if f >= s.in.Jobs[j].Size && (best < 0 || f < bestFree) {
			best, bestFree = c, f
		}
	}
	return best
}

func (s *sim) pendingIn(c int) int {
	n := 0
	for j, k := range s.pending {
		if s.jobs[j].Clique == c {
			n += k
		}
	}
	return n
}

// profile is every clique's availability from now on: free healthy trays less pending
// replacements, plus each running job's trays at its end and each failed tray at its repair.
func (s *sim) profile() profile {
	p := make(profile, s.in.Cliques)
	for c := range p {
		p[c] = avail{{t: s.now, v: s.free(c) - s.pendingIn(c)}}
	}
	for j := range s.running {
		p[s.jobs[j].Clique].add(s.jobs[j].End, math.Inf(1), s.in.Jobs[j].Size)
	}
	for _, r := range s.repairs {
		p[r.Clique].add(r.At+r.RepairAfter, math.Inf(1), 1)
	}
	return p
}

// avail is one clique's available trays over time: v from t until the next segment's t, the
// last one forever.
type avail []struct {
	t float64
	v int
}

type profile []avail

// split makes a segment start at t (t ≥ the first segment's start) and returns its index.
func (a *avail) split(t float64) int {
	s := *a
	t = math.Max(t, s[0].t)
	i := sort.Search(len(s), func(i int) bool { return s[i].t >= t })
	if i < len(s) && s[i].t == t {
		return i
	}
	s = append(s, s[0])
	copy(s[i+1:], s[i:])
	s[i].t, s[i].v = t, s[i-1].v
	*a = s
	return i
}

// add adds d trays over [from, to) (to may be +Inf).
func (a *avail) add(from, to float64, d int) {
	i := a.split(from)
	end := len(*a)
	if !math.IsInf(to, 1) {
		end = a.split(to)
	}
	for k := i; k < end; k++ {
		(*a)[k].v += d
	}
}

// at is the availability at t.
func (a avail) at(t float64) int {
	i := sort.Search(len(a), func(i int) bool { return a[i].t > t })
	return a[max(i-1, 0)].v
}

// fits: at least k trays are available over [t, t+dur).
func (a avail) fits(t float64, k int, dur float64) bool {
	if a.at(t) < k {
		return false
	}
	for _, seg := range a {
		if seg.t > t && seg.t < t+dur && seg.v < k {
			return false
		}
	}
	return true
}

// earliest is the first t from now on when at least k trays are available over [t, t+dur).
func (a avail) earliest(k int, dur float64) float64 {
	for i := 0; i < len(a); i++ {
		if a[i].v < k {
			continue
		}
		ok := true
		for j := i + 1; j < len(a) && a[j].t < a[i].t+dur; j++ {
			if a[j].v < k {
				ok, i = false, j
				break
			}
		}
		if ok {
			return a[i].t
		}
	}
	return math.Inf(1)
}

// earliest is the earliest start of a job of k trays running dur over all cliques, and the
// clique it would start in: of the cliques where it fits then, the one with the fewest available
// trays at that time (best fit), the lowest-numbered on a tie. (+Inf, -1) when it never fits.
func (p profile) earliest(k int, dur float64) (float64, int) {
	best, bestC, bestV := math.Inf(1), -1, 0
	for c, a := range p {
		t := a.earliest(k, dur)
		if math.IsInf(t, 1) {
			continue
		}
		v := a.at(t)
		if t < best || (t == best && v < bestV) {
			best, bestC, bestV = t, c, v
		}
	}
	return best, bestC
}
