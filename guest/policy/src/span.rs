//! PreFilter for a ComputeDomain larger than one NVLink clique: its segments in the view.
//!
//! [`segments`](crate::segments) is the rule; this module gives it the room each clique offers
//! and carries its answer out, statelessly like reservations (recomputed at every decision from
//! the view, so every policy instance agrees):
//!
//! - a domain larger than the most trays any clique could ever give it (its tray size, after
//!   `reserveTraysPerClique`) *spans*; any other domain is placed in one clique as before;
//! - one that has not started is offered the cliques of its plan, every one of them, or waits
//!   with the reason when no plan holds all its pods: no pod of it starts while another segment
//!   has no room (all or nothing);
//! - once started, the cliques where its pods are placed are kept and filled first, and the rest
//!   goes to the fewest further cliques by the same rule; a pod is offered only the cliques of
//!   the plan that still need pods;
//! - the trays a started spanning domain still needs in each clique of its plan are held against
//!   every other domain's decision, as a single-clique domain's promise is (its home clique's
//!   part is its promise; view.rs), so no other domain takes a segment's trays while it starts.
//!   Plain-pod steering keeps plain GPU pods off held trays too (steer.rs); gang preemption and
//!   reservations do not act for a spanning domain yet.
//!
//! The room in a clique is what a single-clique domain would count there: free trays of the
//! domain's tray size, less trays promised to others and held for other spanning domains, less
//! `reserveTraysPerClique` (a spanning domain never takes the spare trays), none in a clique a
//! reservation holds against it or, with `cliqueExclusive`, one that runs another domain.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::StrId;
use crate::pernode::{Ask, Reasons};
use crate::reserve::Reservation;
use crate::segments::{self, NoPlan, Plan, Room, Segment};
use crate::size::Size;
use crate::status::{Pending, PendingReason};
use crate::verdict::{CliqueVerdict, Code, Verdict};
use crate::view::View;

/// A spanning domain's decision, for decide.rs to turn into its result.
pub(crate) struct SpanDecision {
    pub status: Verdict,
    /// The plan's cliques with their verdicts (success where pods are still needed).
    pub cliques: Vec<CliqueVerdict>,
    /// The verdict for every clique outside the plan.
    pub other: Verdict,
    pub pending: Option<Pending>,
}

impl View {
    /// The most trays one clique could ever give a domain asking for trays of `tray_size`.
    pub(crate) fn largest_for(&self, tray_size: Option<u32>) -> u32 {
        self.cliques.values().map(|c| Self::usable_for(c, tray_size)).max().unwrap_or(0)
    }

    /// Whether a domain of `size` asking for trays of `tray_size` is placed as segments: when no
    /// clique could ever hold it whole by the single-clique rule (its usable trays of that size,
    /// less `reserveTraysPerClique` unless the domain takes the whole clique; cliques a wrapping
    /// policy leaves out do not count).
    pub(crate) fn spans(&self, size: u32, tray_size: Option<u32>) -> bool {
        let reserve = self.args.reserve_trays_per_clique;
        let single = self
            .cliques
            .iter()
            .filter(|(id, c)| c.usable > 0 && !self.excluded.contains(id))
            .map(|(_, c)| Self::usable_for(c, tray_size).saturating_sub(if size >= c.usable { 0 } else { reserve }))
            .max()
            .unwrap_or(0);
        segments::spans(size, None, single)
    }

    /// The room every clique offers `domain` (see the module doc), in clique-label order, with
    /// the domain's own placed pods counted in: `free` includes them.
    fn span_rooms(
        &self,
        domain: StrId,
        tray_size: Option<u32>,
        holds: &BTreeMap<StrId, u32>,
        reservations: &[Reservation],
        needed: u32,
    ) -> Vec<Room> {
        let reserve = self.args.reserve_trays_per_clique;
        let prio = self.domain_priority(domain);
        let agg = self.domains.get(&domain);
        let own_promise = agg.and_then(|a| a.promise());
        let mut rooms = Vec::new();
        for (&id, c) in &self.cliques {
            if c.usable == 0 || self.excluded.contains(&id) {
                continue;
            }
            let placed = agg.map_or(0, |a| a.placed.get(&id).copied().unwrap_or(0));
            let usable = Self::usable_for(c, tray_size).saturating_sub(reserve);
            let shut = placed == 0
                && ((self.args.clique_exclusive && self.other_domain_in(c, domain).is_some())
                    || self.held_against(reservations, id, domain, prio, needed).is_some());
            let others_promised = c.promised.saturating_sub(own_promise.filter(|p| p.0 == id).map_or(0, |p| p.1));
            let free = if shut {
                0
            } else {
                self.available(c, domain, tray_size)
                    .saturating_sub(others_promised)
                    .saturating_sub(holds.get(&id).copied().unwrap_or(0))
                    .saturating_sub(reserve)
            };
            rooms.push(Room { clique: id, free: free + placed, usable: usable.max(placed) });
        }
        rooms.sort_by(|a, b| self.str(a.clique).cmp(self.str(b.clique)));
        rooms
    }

    /// The plan of a spanning domain of `size` trays: for one that has not started, the rule
    /// itself; for one that has, the cliques holding its placed pods first (each filled to its
    /// room), the rest by the rule over the other cliques.
    fn span_plan(
        &self,
        domain: StrId,
        size: u32,
        tray_size: Option<u32>,
        holds: &BTreeMap<StrId, u32>,
        reservations: &[Reservation],
    ) -> Result<Plan, NoPlan> {
        let rooms = self.span_rooms(domain, tray_size, holds, reservations, size);
        let placed: BTreeMap<StrId, u32> = self.domains.get(&domain).map(|a| a.placed.clone()).unwrap_or_default();
        let placed_total: u32 = placed.values().sum();
        if placed_total == 0 {
            return segments::plan(size, None, &rooms);
        }
        // Started: its cliques, most placed first, each up to its room.
        let mut kept: Vec<(StrId, u32, u32)> =
            rooms.iter().filter_map(|r| placed.get(&r.clique).map(|&p| (r.clique, p, r.free))).collect();
        kept.sort_by_key(|k| core::cmp::Reverse(k.1));
        let mut left = size.saturating_sub(placed_total);
        let mut segs = Vec::new();
        let mut rank = 0;
        for (clique, p, free) in kept {
            let extra = free.saturating_sub(p).min(left);
            left -= extra;
            segs.push(Segment { clique, first_rank: rank, size: p + extra });
            rank += p + extra;
        }
        if left > 0 {
            let others: Vec<Room> = rooms.iter().filter(|r| !placed.contains_key(&r.clique)).copied().collect();
            let rest = segments::plan(left, None, &others)?;
            for s in rest.segments {
                segs.push(Segment { first_rank: rank, ..s });
                rank += s.size;
            }
        }
        Ok(Plan { segments: segs, segment_size: None })
    }

    /// Trays the started spanning domains other than `except` still need, by clique: each
    /// planned in turn (by UID) after the holds of those before it. Empty, at the cost of one
    /// pass over the domains, when no spanning domain is starting.
    pub(crate) fn span_holds(&self, except: StrId, reservations: &[Reservation]) -> BTreeMap<StrId, u32> {
        let mut holds = BTreeMap::new();
        let largest = self.largest_for(None);
        for (&uid, d) in &self.domains {
            if uid == except || d.placed.is_empty() || (d.pods <= largest && d.placed.len() < 2) {
                continue;
            }
            let size = self.size_of(uid).size;
            let placed = d.placed_total();
            if size <= largest || placed >= size {
                continue;
            }
            let Ok(plan) = self.span_plan(uid, size, None, &holds, reservations) else { continue };
            let promise = d.promise();
            for c in plan.cliques() {
                let mut need = plan.trays_in(c).saturating_sub(d.placed.get(&c).copied().unwrap_or(0));
                if let Some((pc, n)) = promise
                    && pc == c
                {
                    need = need.saturating_sub(n);
                }
                if need > 0 {
                    *holds.entry(c).or_insert(0) += need;
                }
            }
        }
        holds
    }

    /// PreFilter for a pod of a spanning domain (see the module doc).
    pub(crate) fn decide_span(
        &self,
        ask: Ask,
        size: &Size,
        reservations: &[Reservation],
        r: &mut Reasons,
    ) -> SpanDecision {
        let domain = ask.domain;
        let cd = self.domain_name(domain);
        let sized = self.size_text(domain, size);
        let holds = self.span_holds(domain, reservations);
        let agg = self.domains.get(&domain);
        let placed_total = agg.map_or(0, |a| a.placed_total());
        let largest = self.largest_for(ask.tray_size);
        let head = format!(
            "ComputeDomain {cd} needs {} trays ({sized}), more than one NVLink clique holds ({}), so it is placed as segments, each whole in one clique, in the fewest cliques",
            size.size,
            self.largest_clique_text(ask.tray_size)
        );
        match self.span_plan(domain, size.size, ask.tray_size, &holds, reservations) {
            Ok(plan) => {
                let name = |c: StrId| String::from(self.str(c));
                let other = r.verdict(
                    Code::Unschedulable,
                    format!("{head}: {}; this NVLink clique is not one of them", plan.text(&name)),
                );
                let full = r.verdict(
                    Code::Unschedulable,
                    format!("{head}: {}; its segment in this NVLink clique has every pod placed", plan.text(&name)),
                );
                let mut cliques = Vec::new();
                let mut offer = 0;
                for c in plan.cliques() {
                    let placed = agg.map_or(0, |a| a.placed.get(&c).copied().unwrap_or(0));
                    let want = plan.trays_in(c).saturating_sub(placed);
                    offer += want;
                    let verdict = if want > 0 { Verdict::SUCCESS } else { full };
                    let score = if want > 0 { self.scale(100, ask, self.cliques.get(&c)) } else { 0 };
                    cliques.push(CliqueVerdict { clique: c, verdict, score, stable: false });
                }
                let pending = (placed_total == 0).then(|| {
                    let mut why = Pending::new(PendingReason::Placeable, Verdict::SUCCESS);
                    (why.needed, why.offer, why.best) = (size.size, offer, plan.cliques().first().copied());
                    why
                });
                SpanDecision { status: Verdict::SUCCESS, cliques, other, pending }
            }
            Err(e) => {
                let code = if e.resolvable() { Code::Unschedulable } else { Code::UnschedulableAndUnresolvable };
                let mut text = if placed_total > 0 {
                    format!(
                        "{head}: {placed_total} of its pods are placed and the rest must follow as whole segments; {}",
                        e.text()
                    )
                } else {
                    format!("{head}; all segments or none: {}", e.text())
                };
                if self.args.reserve_trays_per_clique > 0 {
                    text.push_str(&format!(
                        " (reserveTraysPerClique keeps {} spare in every clique)",
                        self.args.reserve_trays_per_clique
                    ));
                }
                if !self.excluded.is_empty() {
                    text.push_str(&format!(" (cliques this policy leaves out: {})", self.excluded_reason));
                }
                let v = r.verdict(code, text);
                let pending = (placed_total == 0).then(|| {
                    let mut why = Pending::new(
                        match e {
                            NoPlan::NotNow { .. } => PendingReason::WaitingForTrays,
                            NoPlan::BadSegmentSize { .. } => PendingReason::Unresolvable,
                            _ => PendingReason::NoCliqueFits,
                        },
                        v,
                    );
                    why.needed = size.size;
                    why.segments = true;
                    why.offer = match e {
                        NoPlan::NotNow { free, unit, .. } => free * unit,
                        _ => largest,
                    };
                    why
                });
                SpanDecision { status: v, cliques: Vec::new(), other: v, pending }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::string::String;
    use alloc::vec::Vec;

    use crate::status::PendingReason;
    use crate::testutil::{Fx, clique};
    use crate::verdict::{Code, PreFilterResult};

    /// `n` cliques of 18 trays (`r1-00`..), clique ids 1..=n.
    fn racks(n: u32) -> Fx {
        let mut f = Fx::new("");
        for c in 1..=n {
            f.rack(&format!("r{c}"), c, 18);
        }
        f
    }

    /// A domain `name` of `size` pods `name-0..` (size from the pods' annotation).
    fn job(f: &mut Fx, name: &str, size: u32) {
        f.domain("ns", name, &format!("uid-{name}"));
        for i in 0..size {
            f.pod("ns", &format!("{name}-{i}"), name, |p| p.size_hint = Some(size));
        }
    }

    /// Fills `trays` trays of clique `c` from tray `from` with a domain of that size, bound.
    fn busy(f: &mut Fx, name: &str, c: u32, from: u32, trays: u32) {
        job(f, name, trays);
        for i in 0..trays {
            f.bind("ns", &format!("{name}-{i}"), &format!("r{c}-{:02}", from + i));
        }
    }

    fn offered(f: &Fx, r: &PreFilterResult) -> Vec<String> {
        r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| String::from(f.v.str(c.clique))).collect()
    }

    fn pre_filter(f: &mut Fx, pod: &str) -> PreFilterResult {
        let key = f.id(&format!("ns/{pod}"));
        f.v.pre_filter(key, &[], 0)
    }

    /// 36 trays on four empty cliques of 18: two whole cliques are offered, and only them; once
    /// one clique has its 18, the remaining pods are offered only the other.
    #[test]
    fn a_domain_of_two_cliques_takes_two_whole_cliques() {
        let mut f = racks(4);
        job(&mut f, "big", 36);
        let r = pre_filter(&mut f, "big-0");
        assert_eq!(r.status.code, Code::Success, "{}", r.reason(r.status));
        assert!(r.exclusive, "the host restricts the node set to the plan's cliques");
        assert_eq!(offered(&f, &r), [clique(1), clique(2)]);
        assert_eq!(r.other.code, Code::Unschedulable);
        assert!(r.reason(r.other).contains("2 cliques: ranks 0-17 in NVLink clique"), "{}", r.reason(r.other));
        for i in 0..18 {
            f.bind("ns", &format!("big-{i}"), &format!("r1-{i:02}"));
        }
        f.bind("ns", "big-18", "r2-00");
        let r = pre_filter(&mut f, "big-19");
        assert_eq!(offered(&f, &r), [clique(2)], "clique 1's segment is whole");
        let one = r.cliques.iter().find(|c| f.v.str(c.clique) == clique(1)).expect("listed");
        assert!(r.reason(one.verdict).ends_with("its segment in this NVLink clique has every pod placed"));
        // Its second segment's trays are held (the first clique is full): a domain of 4 is
        // offered cliques 3 and 4 only, not clique 2's 17 free trays.
        job(&mut f, "small", 4);
        let r = pre_filter(&mut f, "small-0");
        assert_eq!(r.status.code, Code::Success);
        assert_eq!(offered(&f, &r), [clique(3), clique(4)]);
        // Plain GPU pods are kept off clique 2's free trays too, and no clique is stable.
        let steer = f.v.steer(true, 0);
        let two = steer.cliques.iter().find(|c| f.v.str(c.clique) == clique(2)).expect("listed");
        assert_eq!(two.verdict.code, Code::Unschedulable);
        assert!(steer.reason(two.verdict).contains("held for the segments of a ComputeDomain larger than one clique"));
        assert!(steer.cliques.iter().all(|c| !c.stable));
        // Whole: the Placed note names both segments.
        for i in 19..36 {
            f.bind("ns", &format!("big-{i}"), &format!("r2-{:02}", i - 18));
        }
        let s = f.v.status(0);
        let big = s.domains.iter().find(|d| f.v.str(d.uid) == "uid-big").expect("listed");
        assert_eq!(
            big.note,
            format!(
                "ComputeDomain ns/big placed as segments in 2 NVLink cliques, {} (18), {} (18): 36 tray(s) (size 36 from annotation cdplace.nvidia.com/size on pod ns/big-35)",
                clique(1),
                clique(2)
            )
        );
        f.v.assert_consistent();
    }

    /// The remainder goes where it fits best: 20 trays with two empty cliques and one with 2
    /// free take one whole clique and those 2.
    #[test]
    fn the_remainder_goes_to_the_best_fit() {
        let mut f = racks(3);
        busy(&mut f, "old", 3, 0, 16);
        job(&mut f, "big", 20);
        let r = pre_filter(&mut f, "big-0");
        assert_eq!(r.status.code, Code::Success, "{}", r.reason(r.status));
        assert_eq!(offered(&f, &r), [clique(1), clique(3)]);
    }

    /// All or nothing: 40 trays where 36 are free start no pod and say why; the domain's status
    /// says it waits for trays. Larger than the whole fleet: unresolvable.
    #[test]
    fn no_pod_starts_unless_every_segment_fits() {
        let mut f = racks(4);
        busy(&mut f, "a", 1, 0, 18);
        busy(&mut f, "b", 2, 0, 18);
        job(&mut f, "big", 40);
        let (code, why) = f.decide("ns", "big-0", 0);
        assert_eq!(code, Code::Unschedulable);
        assert!(why.contains("placed as segments, each whole in one clique"), "{why}");
        assert!(why.ends_with("no pod starts until every segment fits"), "{why}");
        let s = f.v.status(0);
        let big = s.domains.iter().find(|d| f.v.str(d.uid) == "uid-big").expect("listed");
        assert_eq!(big.pending, Some(PendingReason::WaitingForTrays));
        assert_eq!(big.note, why, "the Waiting note is PreFilter's reason, not a one-clique offer");
        job(&mut f, "huge", 80);
        let (code, why) = f.decide("ns", "huge-0", 0);
        assert_eq!(code, Code::UnschedulableAndUnresolvable);
        assert!(why.ends_with("it needs 80 trays and all NVLink cliques together have 72 usable"), "{why}");
    }

    /// A domain that fits one clique is placed as before: one clique, best fit.
    #[test]
    fn a_domain_that_fits_one_clique_stays_in_one() {
        let mut f = racks(2);
        job(&mut f, "full", 18);
        let r = pre_filter(&mut f, "full-0");
        assert!(!r.exclusive, "a new single-clique domain is offered its candidates, not a plan");
        let r2 = f.v.str(r.cliques[0].clique);
        assert_eq!(r2, clique(1));
        for i in 0..18 {
            f.bind("ns", &format!("full-{i}"), &format!("r1-{i:02}"));
        }
        f.v.assert_consistent();
    }

    /// The decision's cost at 5,004 trays (278 cliques of 18, 3 domains of 4 trays in each of
    /// the first 200 cliques, the rest empty): a pending pod of a new 36-tray domain (segments)
    /// against one of a new 12-tray domain (one clique). A measurement, not a check: run with
    /// `cargo test --release -p cdplace-policy span::tests::cost_at_5004_trays -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_at_5004_trays() {
        extern crate std;
        let mut f = Fx::new("");
        for c in 1..=278u32 {
            f.rack(&format!("r{c}"), c, 18);
        }
        for c in 1..=200u32 {
            for d in 0..3u32 {
                let name = format!("d{c}x{d}");
                busy(&mut f, &name, c, d * 4, 4);
            }
        }
        job(&mut f, "wide", 36);
        job(&mut f, "one", 12);
        let time = |f: &mut Fx, pod: &str| {
            let key = f.id(&format!("ns/{pod}"));
            let n = 200;
            let start = std::time::Instant::now();
            for _ in 0..n {
                assert_eq!(f.v.pre_filter(key, &[], 0).status.code, Code::Success);
            }
            start.elapsed() / n
        };
        let (wide, one) = (time(&mut f, "wide-0"), time(&mut f, "one-0"));
        std::println!("SPAN-COST trays=5004 spanning-36={wide:?} one-clique-12={one:?}");
    }
}
