//! Segments: how a ComputeDomain larger than one NVLink clique is laid out across cliques.
//!
//! A domain that fits one clique and declares no segment size is not segmented: it stays in one
//! clique (rule 5). A domain larger than the largest clique's usable trays, or one whose workload
//! declares a segment size, is placed as **segments**, each whole in one clique (the driver gives
//! a ComputeDomain one IMEX domain per clique, its ComputeDomainClique objects; NVLink reaches
//! only within a clique, so a tensor-parallel group must not straddle two). This module is the
//! rule as a pure function of the room each clique offers the domain now ([`plan`]):
//!
//! - **units**: with a declared segment size `s` the unit is a segment of exactly `s` trays, and
//!   `s` must divide the domain's size; without one the unit is a tray;
//! - **all or nothing**: a plan holds every unit of the domain, or there is no plan and the
//!   reason says why ([`NoPlan`]); the caller places no pod of a domain without a plan;
//! - **fewest cliques**: the smallest number `m` of cliques that can hold every unit (taking the
//!   cliques that hold the most units first gives it);
//! - **best fit among the sets of `m` cliques**: the set whose free trays add up to the least,
//!   so the cliques with the most room stay whole for the next large domain; without a declared
//!   size this fills whole cliques and puts the remainder where it fits best (36 trays on four
//!   empty cliques of 18 take two whole cliques; 20 trays with 18, 18 and 2 free take one whole
//!   clique and the 2). Exact by dynamic programming over (cliques taken, units held), which is
//!   `rooms × m × units` steps; past [`EXACT_STEPS`] the plan takes the `m` cliques with the
//!   most room instead (still fewest cliques; only best fit is given up);
//! - **ranks in order**: units are laid out clique by clique (the clique holding the most units
//!   first, ties in the order the rooms were given), so segment `i` holds ranks `[i·s, (i+1)·s)`
//!   and each clique a contiguous run of ranks ([`Plan::segment_of`]).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::facts::StrId;

/// The most dynamic-programming steps (`rooms × cliques × units`) an exact best fit may take;
/// beyond it the plan takes the cliques with the most room (fewest cliques still). 4 million
/// steps is a few milliseconds natively: far more than a fleet of 5,004 trays (278 cliques) asks
/// for a domain of 144 trays in segments of 18 (278 × 8 × 8).
pub const EXACT_STEPS: usize = 4_000_000;

/// What one clique offers the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// The clique label value.
    pub clique: StrId,
    /// Trays the domain could take there now (after promises, reservations and the rules that
    /// keep the domain out).
    pub free: u32,
    /// Trays the domain could ever take there (every usable tray it may use).
    pub usable: u32,
}

/// One segment: a run of consecutive ranks whole in one clique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub clique: StrId,
    /// The first rank (0-based) of the segment.
    pub first_rank: u32,
    /// Trays (pods) of the segment.
    pub size: u32,
}

impl Segment {
    /// Whether the segment holds this rank.
    pub fn holds(&self, rank: u32) -> bool {
        rank >= self.first_rank && rank - self.first_rank < self.size
    }
}

/// Where every segment of a domain goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The segments in rank order.
    pub segments: Vec<Segment>,
    /// The declared segment size, when the workload declared one.
    pub segment_size: Option<u32>,
}

impl Plan {
    /// The cliques of the plan, in rank order, each once.
    pub fn cliques(&self) -> Vec<StrId> {
        let mut out: Vec<StrId> = Vec::new();
        for s in &self.segments {
            if !out.contains(&s.clique) {
                out.push(s.clique);
            }
        }
        out
    }

    /// Trays the plan takes in `clique`.
    pub fn trays_in(&self, clique: StrId) -> u32 {
        self.segments.iter().filter(|s| s.clique == clique).map(|s| s.size).sum()
    }

    /// The segment holding rank `rank`, if the plan has that many ranks.
    pub fn segment_of(&self, rank: u32) -> Option<&Segment> {
        self.segments.iter().find(|s| s.holds(rank))
    }

    /// The plan in words, for reasons: `segments of 8: ranks 0-15 in A, 16-23 in B`.
    pub fn text(&self, name: &dyn Fn(StrId) -> String) -> String {
        let mut runs: Vec<(StrId, u32, u32)> = Vec::new();
        for s in &self.segments {
            match runs.last_mut() {
                Some(r) if r.0 == s.clique => r.2 = s.first_rank + s.size - 1,
                _ => runs.push((s.clique, s.first_rank, s.first_rank + s.size - 1)),
            }
        }
        let parts: Vec<String> =
            runs.iter().map(|&(c, a, b)| format!("ranks {a}-{b} in NVLink clique {}", name(c))).collect();
        let head = match self.segment_size {
            Some(s) => format!("{} segments of {s}", self.segments.len()),
            None => format!("{} cliques", runs.len()),
        };
        format!("{head}: {}", parts.join(", "))
    }
}

/// Why a domain gets no plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPlan {
    /// The declared segment size is 0, larger than the domain, or does not divide its size:
    /// bad input the user must fix.
    BadSegmentSize { size: u32, segment: u32 },
    /// No clique could ever hold one segment.
    SegmentTooLarge { segment: u32, largest: u32 },
    /// Even with every tray free the fleet's cliques cannot hold every unit.
    NeverFits { units: u32, unit: u32, ever: u32 },
    /// Not now: the cliques' free trays hold only `free` units of the `units` needed.
    NotNow { units: u32, unit: u32, free: u32 },
}

impl NoPlan {
    /// Whether waiting (trays freeing up, preemption) can help.
    pub fn resolvable(&self) -> bool {
        matches!(self, NoPlan::NotNow { .. })
    }

    /// The reason in words (the caller prefixes the domain and its size).
    pub fn text(&self) -> String {
        match *self {
            NoPlan::BadSegmentSize { size, segment } => format!(
                "its segment size {segment} does not divide its size {size} (every segment is exactly the declared size; use a size that divides the domain's pods)"
            ),
            NoPlan::SegmentTooLarge { segment, largest } => format!(
                "a segment of {segment} trays is larger than any NVLink clique can hold (the largest has {largest} usable trays)"
            ),
            NoPlan::NeverFits { units, unit: 1, ever } => {
                format!("it needs {units} trays and all NVLink cliques together have {ever} usable")
            }
            NoPlan::NeverFits { units, unit, ever } => format!(
                "it needs {units} segments of {unit} trays and all NVLink cliques together could hold only {ever}"
            ),
            // No count that moves with the fleet: this text is every retry's FailedScheduling
            // message, and the events library folds only identical messages into a series.
            NoPlan::NotNow { units, unit: 1, .. } => format!(
                "it needs {units} trays and the NVLink cliques do not have room for all of them now; no pod starts until every segment fits"
            ),
            NoPlan::NotNow { units, unit, .. } => format!(
                "it needs {units} segments of {unit} trays and the NVLink cliques do not have room for all of them now; no pod starts until every segment fits"
            ),
        }
    }
}

/// Whether a domain of `size` pods is placed as segments: when it declares a segment size, or
/// when it is larger than `largest` (the largest clique's usable trays). Otherwise it stays in
/// one clique.
pub fn spans(size: u32, segment: Option<u32>, largest: u32) -> bool {
    segment.is_some() || size > largest
}

/// Lays out a domain of `size` trays, with the declared segment size `segment`, over `rooms`
/// (see the module doc). Rooms are taken in the order given on ties: give them in a stable order
/// (by clique label value).
pub fn plan(size: u32, segment: Option<u32>, rooms: &[Room]) -> Result<Plan, NoPlan> {
    let unit = match segment {
        Some(s) if s == 0 || s > size || !size.is_multiple_of(s) => {
            return Err(NoPlan::BadSegmentSize { size, segment: s });
        }
        Some(s) => s,
        None => 1,
    };
    let units = size / unit;
    let largest = rooms.iter().map(|r| r.usable).max().unwrap_or(0);
    if unit > largest {
        return Err(NoPlan::SegmentTooLarge { segment: unit, largest });
    }
    let ever: u32 = rooms.iter().map(|r| r.usable / unit).fold(0u32, u32::saturating_add);
    if ever < units {
        return Err(NoPlan::NeverFits { units, unit, ever });
    }
    // Rooms that hold at least one unit, with the units they hold (capped: more is no use).
    let cands: Vec<(usize, u32)> =
        rooms.iter().enumerate().map(|(i, r)| (i, (r.free / unit).min(units))).filter(|&(_, u)| u > 0).collect();
    let free: u32 = cands.iter().map(|c| c.1).fold(0u32, u32::saturating_add);
    if free < units {
        return Err(NoPlan::NotNow { units, unit, free });
    }
    // Fewest cliques: take those holding the most units first.
    let mut by_units = cands.clone();
    by_units.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut m = 0usize;
    let mut held = 0u32;
    while held < units {
        held += by_units[m].1;
        m += 1;
    }
    // Only the m roomiest-by-least-free rooms of each units value can be in a best set: a set of
    // m rooms holding another room of that value could swap it for a kept one not in the set
    // (same units, no more free trays). On NVL72 that leaves at most 19·m rooms, not every clique.
    let mut kept: Vec<(usize, u32)> = Vec::with_capacity(cands.len());
    let mut by_value = cands.clone();
    by_value.sort_by(|a, b| a.1.cmp(&b.1).then(rooms[a.0].free.cmp(&rooms[b.0].free)).then(a.0.cmp(&b.0)));
    let mut run = 0;
    for (i, c) in by_value.iter().enumerate() {
        run = if i > 0 && by_value[i - 1].1 == c.1 { run + 1 } else { 0 };
        if run < m {
            kept.push(*c);
        }
    }
    kept.sort_by_key(|c| c.0);
    let chosen = best_fit(&kept, rooms, m, units).unwrap_or_else(|| by_units[..m].iter().map(|c| c.0).collect());
    // Lay the units out: the clique holding the most first, then in the rooms' order.
    let mut order: Vec<(usize, u32)> = chosen.iter().map(|&i| (i, (rooms[i].free / unit).min(units))).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut segments = Vec::new();
    let mut left = units;
    let mut rank = 0u32;
    for (i, u) in order {
        let take = u.min(left);
        if take == 0 {
            break;
        }
        left -= take;
        match segment {
            Some(s) => {
                for _ in 0..take {
                    segments.push(Segment { clique: rooms[i].clique, first_rank: rank, size: s });
                    rank += s;
                }
            }
            None => {
                segments.push(Segment { clique: rooms[i].clique, first_rank: rank, size: take });
                rank += take;
            }
        }
    }
    debug_assert_eq!(left, 0);
    Ok(Plan { segments, segment_size: segment })
}

/// The set of exactly `m` candidate rooms that holds `units` units with the fewest free trays in
/// all (ties: the set found first, rooms in the order given); None when the search would take
/// more than [`EXACT_STEPS`]. A 0/1 knapsack over (rooms taken, units held, capped at `units`).
fn best_fit(cands: &[(usize, u32)], rooms: &[Room], m: usize, units: u32) -> Option<Vec<usize>> {
    let n = cands.len();
    let k = units as usize;
    if n.saturating_mul(m + 1).saturating_mul(k + 1) > EXACT_STEPS {
        return None;
    }
    let width = (m + 1) * (k + 1);
    let at = |j: usize, t: usize| j * (k + 1) + t;
    // cost[(j, t)]: the fewest free trays of j rooms (among those seen) holding t units.
    let mut cost: Vec<Option<u64>> = vec![None; width];
    cost[at(0, 0)] = Some(0);
    // from[i][(j, t)]: room i improved (j, t), coming from (j - 1, from); NONE otherwise.
    const NONE: u32 = u32::MAX;
    let mut from = vec![NONE; n * width];
    for (i, &(r, u)) in cands.iter().enumerate() {
        let add = u64::from(rooms[r].free);
        let u = u as usize;
        // j descending: (j - 1, ·) still holds the costs without room i.
        for j in (1..=m).rev() {
            for t0 in 0..=k {
                let Some(c) = cost[at(j - 1, t0)] else { continue };
                let t = (t0 + u).min(k);
                if cost[at(j, t)].is_none_or(|b| c + add < b) {
                    cost[at(j, t)] = Some(c + add);
                    from[i * width + at(j, t)] = t0 as u32;
                }
            }
        }
    }
    cost[at(m, k)]?;
    let mut out = Vec::with_capacity(m);
    let (mut j, mut t) = (m, k);
    for i in (0..n).rev() {
        if j == 0 {
            break;
        }
        let f = from[i * width + at(j, t)];
        if f != NONE {
            out.push(cands[i].0);
            (j, t) = (j - 1, f as usize);
        }
    }
    (j == 0 && t == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::String;
    use alloc::vec::Vec;

    use super::*;

    /// Rooms `c0, c1, ...` (clique ids 0, 1, ...) with these free trays, each of 18 usable.
    fn rooms(free: &[u32]) -> Vec<Room> {
        free.iter().enumerate().map(|(i, &f)| Room { clique: i as StrId, free: f, usable: 18 }).collect()
    }

    /// `(clique, first rank, size)` of every segment.
    fn layout(p: &Plan) -> Vec<(StrId, u32, u32)> {
        p.segments.iter().map(|s| (s.clique, s.first_rank, s.size)).collect()
    }

    #[test]
    fn a_domain_spans_only_when_larger_than_a_clique_or_segmented() {
        assert!(!spans(18, None, 18), "18 fits one clique of 18: unchanged");
        assert!(spans(19, None, 18));
        assert!(spans(8, Some(8), 18), "a declared segment size always segments");
    }

    #[test]
    fn thirty_six_trays_take_two_whole_cliques_ranks_in_order() {
        let p = plan(36, None, &rooms(&[18, 18, 18, 18])).expect("fits");
        assert_eq!(layout(&p), [(0, 0, 18), (1, 18, 18)]);
        assert_eq!(p.segment_of(17).map(|s| s.clique), Some(0));
        assert_eq!(p.segment_of(18).map(|s| s.clique), Some(1));
        assert_eq!(p.segment_of(35).map(|s| s.clique), Some(1));
        assert_eq!(p.segment_of(36), None);
        assert_eq!(p.cliques(), [0, 1]);
    }

    /// Without a declared size: whole cliques first, the remainder where it fits best, and the
    /// set of fewest cliques with the least room left over (the emptiest cliques stay whole).
    #[test]
    fn without_a_segment_size_the_remainder_goes_where_it_fits_best() {
        // 20 trays: one whole clique and 2 trays; the clique with exactly 2 free is the best
        // fit, not a whole clique of 18.
        let p = plan(20, None, &rooms(&[18, 18, 5, 2])).expect("fits");
        assert_eq!(layout(&p), [(0, 0, 18), (3, 18, 2)]);
        // 30 trays over 18, 17, 15, 12 free: two cliques are the fewest; 18 + 12 = 30 fits
        // exactly, where the two roomiest (18 + 17) would leave 5 trays stranded.
        let p = plan(30, None, &rooms(&[18, 17, 15, 12])).expect("fits");
        assert_eq!(layout(&p), [(0, 0, 18), (3, 18, 12)]);
        // Fewest cliques before best fit: 10 + 9 + 2 would hold it in three cliques; the plan
        // takes two (18 + 2).
        let p = plan(20, None, &rooms(&[10, 9, 18, 2])).expect("fits");
        assert_eq!(p.cliques(), [2, 3]);
    }

    #[test]
    fn a_declared_segment_size_makes_every_segment_exactly_that_size() {
        // 24 in segments of 8 with four empty cliques: 16 in one clique, 8 in the next.
        let p = plan(24, Some(8), &rooms(&[18, 18, 18, 18])).expect("fits");
        assert_eq!(layout(&p), [(0, 0, 8), (0, 8, 8), (1, 16, 8)]);
        assert!(p.segments.iter().all(|s| s.size == 8));
        // A clique with 15 free holds one segment of 8, not 15 trays of the domain; the best
        // fit for three segments is 16 + 8 free (2 cliques), not 18 + 18.
        let p = plan(24, Some(8), &rooms(&[18, 15, 16, 8])).expect("fits");
        assert_eq!(layout(&p), [(2, 0, 8), (2, 8, 8), (3, 16, 8)]);
        // A declared size also segments a domain that would fit one clique: 16 in segments of 8
        // stay in one clique when one holds both.
        let p = plan(16, Some(8), &rooms(&[18, 9])).expect("fits");
        assert_eq!(p.cliques(), [0]);
        // ... and take two when none does.
        let p = plan(16, Some(8), &rooms(&[12, 9])).expect("fits");
        assert_eq!(layout(&p), [(0, 0, 8), (1, 8, 8)]);
    }

    #[test]
    fn all_or_nothing_no_plan_says_why() {
        // 40 trays with 36 free: no plan, and waiting can help.
        let e = plan(40, None, &rooms(&[18, 18, 0, 0])).unwrap_err();
        assert_eq!(e, NoPlan::NotNow { units: 40, unit: 1, free: 36 });
        assert!(e.resolvable());
        assert!(e.text().contains("no pod starts until every segment fits"), "{}", e.text());
        // Segments of 8 in cliques with 7 free each: 28 trays free, no segment fits.
        let e = plan(16, Some(8), &rooms(&[7, 7, 7, 7])).unwrap_err();
        assert_eq!(e, NoPlan::NotNow { units: 2, unit: 8, free: 0 });
        // Larger than the fleet: never.
        let e = plan(80, None, &rooms(&[18, 18, 18, 18])).unwrap_err();
        assert_eq!(e, NoPlan::NeverFits { units: 80, unit: 1, ever: 72 });
        assert!(!e.resolvable());
        // Segments of 10 on cliques of 18: one each, four at most.
        let e = plan(50, Some(10), &rooms(&[18, 18, 18, 18])).unwrap_err();
        assert_eq!(e, NoPlan::NeverFits { units: 5, unit: 10, ever: 4 });
    }

    #[test]
    fn a_bad_segment_size_is_invalid_input() {
        for (size, seg) in [(24, 7), (24, 0), (8, 16)] {
            let e = plan(size, Some(seg), &rooms(&[18, 18])).unwrap_err();
            assert_eq!(e, NoPlan::BadSegmentSize { size, segment: seg });
            assert!(!e.resolvable());
        }
        let e = plan(40, Some(20), &rooms(&[18, 18, 18])).unwrap_err();
        assert_eq!(e, NoPlan::SegmentTooLarge { segment: 20, largest: 18 });
        assert!(e.text().contains("larger than any NVLink clique"), "{}", e.text());
    }

    /// Best fit is exact: checked against every subset of the rooms on small fleets.
    #[test]
    fn best_fit_matches_a_search_of_every_subset() {
        let mut seed = 0x9e37_79b9_u32;
        let mut next = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed % n
        };
        for _ in 0..400 {
            let n = 2 + next(6) as usize;
            let free: Vec<u32> = (0..n).map(|_| next(19)).collect();
            let seg = if next(2) == 0 { None } else { Some(1 + next(9)) };
            let unit = seg.unwrap_or(1);
            let size = unit * (1 + next(60 / unit));
            let rs = rooms(&free);
            let got = plan(size, seg, &rs);
            // Every subset holding every unit: the fewest rooms, then the least free trays.
            let holds = |mask: u32| -> (u32, u32, u64) {
                let (mut units, mut count, mut trays) = (0, 0, 0u64);
                for (i, r) in rs.iter().enumerate() {
                    if mask & (1 << i) != 0 && r.free / unit > 0 {
                        units += r.free / unit;
                        count += 1;
                        trays += u64::from(r.free);
                    }
                }
                (units, count, trays)
            };
            let best = (1u32..1 << n).map(holds).filter(|&(u, _, _)| u >= size / unit).map(|(_, c, t)| (c, t)).min();
            match (got, best) {
                (Ok(p), Some((count, trays))) => {
                    let cl = p.cliques();
                    let used: u64 = cl.iter().map(|&c| u64::from(rs[c as usize].free)).sum();
                    assert_eq!((cl.len() as u32, used), (count, trays), "free {free:?} size {size} seg {seg:?}");
                    assert_eq!(p.segments.iter().map(|s| s.size).sum::<u32>(), size);
                    let mut rank = 0;
                    for s in &p.segments {
                        assert_eq!(s.first_rank, rank, "ranks in order");
                        assert!(seg.is_none_or(|x| s.size == x));
                        rank += s.size;
                    }
                    for &c in &cl {
                        assert!(p.trays_in(c) <= rs[c as usize].free, "no clique beyond its room");
                    }
                }
                (Err(e), None) => assert!(matches!(e, NoPlan::NotNow { .. } | NoPlan::NeverFits { .. }), "{e:?}"),
                (got, best) => panic!("free {free:?} size {size} seg {seg:?}: {got:?} vs {best:?}"),
            }
        }
    }

    /// Past EXACT_STEPS the plan still takes the fewest cliques (those with the most room).
    #[test]
    fn a_huge_search_falls_back_to_the_roomiest_cliques() {
        let free: Vec<u32> = (0..400).map(|i| 10 + (i % 9)).collect();
        let rs = rooms(&free);
        let p = plan(4000, None, &rs).expect("fits: 400 cliques hold 5,600");
        let cl = p.cliques();
        let least = cl.iter().map(|&c| rs[c as usize].free).min().expect("some clique");
        let left_out = rs.iter().filter(|r| !cl.contains(&r.clique)).map(|r| r.free).max().unwrap_or(0);
        assert!(left_out <= least, "the roomiest first: left out {left_out}, took {least}");
        let mut sorted = free.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let fewest = sorted
            .iter()
            .scan(0, |sum, &f| {
                *sum += f;
                Some(*sum)
            })
            .take_while(|&s| s < 4000)
            .count()
            + 1;
        assert_eq!(cl.len(), fewest, "fewest cliques");
        assert_eq!(p.segments.iter().map(|s| s.size).sum::<u32>(), 4000);
    }

    #[test]
    fn the_plan_in_words_names_each_cliques_ranks() {
        let name = |c: StrId| format!("c{c}");
        let p = plan(24, Some(8), &rooms(&[18, 18])).expect("fits");
        assert_eq!(p.text(&name), "3 segments of 8: ranks 0-15 in NVLink clique c0, ranks 16-23 in NVLink clique c1");
        let p = plan(36, None, &rooms(&[18, 18])).expect("fits");
        let t: String = p.text(&name);
        assert_eq!(t, "2 cliques: ranks 0-17 in NVLink clique c0, ranks 18-35 in NVLink clique c1");
    }
}
