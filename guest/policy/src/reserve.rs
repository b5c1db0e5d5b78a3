//! Head-of-queue reservation with backfill: large domains must not starve.
//!
//! Small domains take every tray that frees up, so a domain of 16 trays could wait forever for
//! a clique to empty. A domain that has waited longer than `cliqueReservationAfterSeconds` and is
//! first in its size class (1–4, 5–8, 9–15, 16+ trays) by priority, then age, gets one clique
//! reserved: the one that can hold it soonest (by the pods' deadlines where they tell it, else
//! the fewest trays still to free up); a head that
//! can start now holds the clique it fits best, so nothing overtakes it in the moment its trays
//! have freed up, and no younger domain of its class takes its place. Other domains
//! and plain GPU pods may use that clique only while what they take leaves room for it once the
//! trays it waits for free up (backfill): the trays held or promised there by others must stay at
//! most `usable - size`. Without runtime estimates that is the only backfill that can never delay
//! it. `cliqueReservationDepth` domains per size class (1 by default) hold a reservation, each on
//! its own clique; the first of every class choose before the second of any, larger classes
//! first. A reservation holds its clique only against domains behind the one it is for in the
//! queue (lower priority, or the same priority and younger): a domain that waited longer may
//! take it, as it would have taken it first.
//!
//! Runtimes are known where pods set `spec.activeDeadlineSeconds` (the kubelet ends such a pod
//! that long after it started, plus its grace period): then the backfill is EASY backfill, as
//! batch schedulers do it with time limits. The *shadow time* is when the reserved clique will
//! have the domain's size free at the latest, from the deadlines of the pods on the trays it
//! waits for. Another domain may then also take trays there when every one of its pods would be
//! gone by the shadow time, or when it takes no more than the trays that will be free at the
//! shadow time beyond the reserved domain's size. Neither can delay the reserved domain past
//! the shadow time; both let trays that free one by one be used while the clique drains.
//!
//! Reservations are a pure function of the view and the host's clock, recomputed at every
//! decision, so every policy instance agrees and nothing is stored.

use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::StrId;
use crate::size::SizeSource;
use crate::trays::Clique;
use crate::view::View;

/// Size classes by trays, smallest first: `(first, last)`.
pub const SIZE_CLASSES: [(u32, u32); 4] = [(1, 4), (5, 8), (9, 15), (16, u32::MAX)];

/// A clique held for a waiting domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reservation {
    pub domain: StrId,
    pub clique: StrId,
    /// Trays the domain needs.
    pub size: u32,
    /// How long it has waited (ms since its oldest pod was created).
    pub waited_ms: i64,
    /// Its place in its size class: 0 for the first.
    pub rank: u32,
    /// The domain fits some clique now, so it holds the one it fits best; otherwise it holds
    /// the one that frees its size first (by deadlines, else by the fewest trays still to
    /// free), which a tray taken elsewhere cannot change (plain-pod steering's `stable`).
    pub fits_now: bool,
}

impl Reservation {
    /// Whether another domain (or plain pod) may take `trays` more trays of the reserved clique
    /// `c`, where `free` trays are free for the reserved domain now: what others hold or are
    /// promised there afterwards must leave the reserved domain its size.
    pub fn admits(&self, c: &Clique, free: u32, trays: u32) -> bool {
        let held = c.usable.saturating_sub(free).saturating_add(c.promised);
        held.saturating_add(trays) <= c.usable.saturating_sub(self.size)
    }

    /// Its place in its class, as reasons say it: `first of its size class`.
    pub fn place_text(&self) -> String {
        place_in_class(self.rank)
    }
}

/// Place `rank` (0: first) in a size class, as reasons say it.
pub(crate) fn place_in_class(rank: u32) -> String {
    const ORDINALS: [&str; 5] = ["first", "second", "third", "fourth", "fifth"];
    match ORDINALS.get(rank as usize) {
        Some(word) => alloc::format!("{word} of its size class"),
        None => alloc::format!("number {} of its size class", rank.saturating_add(1)),
    }
}

impl View {
    /// When a pod is gone at the latest (Unix ms): its start (now, before the kubelet started
    /// it) plus its runtime limit; none without a deadline.
    pub(crate) fn pod_ends_by(&self, p: &crate::facts::PodFact) -> Option<i64> {
        let limit = p.runtime_limit_ms?;
        let from = if p.started_ms > 0 { p.started_ms } else { self.now_ms };
        Some(from.saturating_add(limit))
    }

    /// When every pod of domain `uid` would be gone at the latest if it started now: now plus
    /// the longest runtime limit of its pods (a started pod ends no later than that); none when
    /// one of its pods has no deadline.
    pub(crate) fn domain_ends_by(&self, uid: StrId) -> Option<i64> {
        let d = self.domains.get(&uid)?;
        if d.limits.contains_key(&None) {
            return None;
        }
        let longest = (*d.limits.keys().next_back()?)?;
        Some(self.now_ms.saturating_add(longest))
    }

    /// When tray `name` is free at the latest (Unix ms): now when nothing on it counts, else
    /// when the last pod that keeps it busy is gone (a pod using GPUs, or a pod of a domain
    /// under driver-managed IMEX; a domain's IMEX daemon goes with its workload pod there).
    /// A driver label left by a domain with no pod on the tray counts as gone now: the driver
    /// takes it off within seconds. (Counted as unknown, every tray a domain just left made its
    /// clique's time unknown for the label's lifetime, and a reservation by the earliest time
    /// moved off the clique that was draining for it.) None when that is not known: a pod
    /// without a deadline, a cordoned tray.
    fn tray_free_by(&self, name: StrId) -> Option<i64> {
        let e = self.nodes.get(&name)?;
        let s = &e.summary;
        let driver = self.args.imex_mode == crate::args::ImexMode::DriverManaged;
        if !s.usable {
            return None;
        }
        let mut at = self.now_ms;
        for key in &e.pods {
            let Some(p) = self.pods.get(key) else { continue };
            let member = p.member.as_ref().ok().copied().flatten();
            let uses_gpus = p.gpu_use.count > 0 || p.gpu_use.all;
            let keeps_tray_busy = uses_gpus || (driver && member.is_some());
            if !keeps_tray_busy {
                continue;
            }
            if member.is_some_and(|m| m.daemon && s.workload.contains(&m.domain)) {
                continue;
            }
            at = at.max(self.pod_ends_by(&p.fact)?);
        }
        Some(at)
    }

    /// EASY backfill's shadow for reservation `r` on clique `c`: when the clique will have the
    /// domain's size free at the latest, and how many trays will be free by then. None when
    /// the trays it waits for have no known end.
    pub(crate) fn shadow(&self, r: &Reservation, c: &Clique) -> Option<(i64, u32)> {
        self.room_by(c, self.free_for(c, r.domain), r.size)
    }

    /// When clique `c`, with `free` trays free now, will have `size` free at the latest (now if
    /// it has them), and how many trays will be free by then; none when fewer than the trays
    /// still to free have a known end.
    fn room_by(&self, c: &Clique, free: u32, size: u32) -> Option<(i64, u32)> {
        let need = size.saturating_sub(free) as usize;
        if need == 0 {
            return Some((self.now_ms, free));
        }
        let mut ends: Vec<i64> = c.busy.keys().filter_map(|&n| self.tray_free_by(n)).collect();
        ends.sort_unstable();
        let shadow = *ends.get(need - 1)?;
        let by_then = ends.iter().take_while(|&&e| e <= shadow).count() as u32;
        Some((shadow, free.saturating_add(by_then)))
    }

    /// Whether a domain (or plain pod) whose pods would all be gone by `ends_by` may take
    /// `trays` more trays of the clique `c` reserved by `r`: the rule without runtimes, else
    /// EASY backfill (see the module doc).
    pub(crate) fn backfills(&self, r: &Reservation, c: &Clique, trays: u32, ends_by: Option<i64>) -> bool {
        if r.admits(c, self.free_for(c, r.domain), trays) {
            return true;
        }
        let Some((shadow, free_then)) = self.shadow(r, c) else { return false };
        ends_by.is_some_and(|e| e <= shadow) || trays.saturating_add(r.size) <= free_then
    }

    /// The reservation that keeps domain `domain` (priority `priority`) from taking `trays`
    /// trays of clique `id`, if any: one for another domain ahead of it in the queue (higher
    /// priority, or the same and waiting at least as long), whose backfill rule does not admit
    /// them. A reservation never holds a clique against a domain of higher priority, nor of the
    /// same priority that waited longer (the order that picks the heads of a class). PreFilter
    /// and gang preemption both ask this, so preemption never calls a clique that PreFilter
    /// holds back a fit.
    pub(crate) fn held_against(
        &self,
        reservations: &[Reservation],
        id: StrId,
        domain: StrId,
        priority: i32,
        trays: u32,
    ) -> Option<Reservation> {
        let c = self.cliques.get(&id)?;
        // Asked for every clique of every decision: the domain's age is looked up only where a
        // reservation holds this clique.
        reservations
            .iter()
            .find(|r| {
                r.clique == id
                    && r.domain != domain
                    && (self.domain_priority(r.domain), self.waiting_since(domain))
                        >= (priority, self.now_ms.saturating_sub(r.waited_ms))
                    && !self.backfills(r, c, trays, self.domain_ends_by(domain))
            })
            .copied()
    }

    /// When domain `uid` started waiting: its oldest pod's creation (Unix ms); the latest
    /// possible time when that is not known, so it counts as the youngest.
    fn waiting_since(&self, uid: StrId) -> i64 {
        self.domains.get(&uid).and_then(|d| d.created.keys().next().copied()).filter(|&t| t > 0).unwrap_or(i64::MAX)
    }
}

/// A waiting domain competing for its class's reservation.
#[derive(Clone, Copy)]
struct Candidate {
    priority: i32,
    oldest_ms: i64,
    domain: StrId,
    size: u32,
}

impl View {
    /// The reservations at the current decision's time (`now_ms`).
    pub(crate) fn reservations(&self) -> Vec<Reservation> {
        let after_ms = i64::from(self.args.clique_reservation_after_seconds) * 1000;
        if after_ms == 0 {
            return Vec::new();
        }
        let largest = self.cliques.values().map(|c| c.usable).max().unwrap_or(0);
        let mut queues: [Vec<Candidate>; SIZE_CLASSES.len()] = Default::default();
        for (&uid, d) in &self.domains {
            if d.pods == 0 || d.target().is_some() || !self.domain_facts.contains_key(&uid) {
                continue;
            }
            let size = self.size_of(uid);
            if size.missing.is_some() || size.size == 0 || size.size > largest {
                continue;
            }
            if size.source == SizeSource::PodsSeen && self.settles_at_ms(uid).is_some_and(|at| at > self.now_ms) {
                continue;
            }
            let oldest = self.waiting_since(uid);
            if oldest == i64::MAX || self.now_ms.saturating_sub(oldest) < after_ms {
                continue;
            }
            let c = Candidate { priority: self.domain_priority(uid), oldest_ms: oldest, domain: uid, size: size.size };
            let class = SIZE_CLASSES.iter().position(|&(lo, hi)| (lo..=hi).contains(&size.size)).unwrap_or(0);
            queues[class].push(c);
        }
        let depth = self.args.clique_reservation_depth.max(1) as usize;
        for q in &mut queues {
            // Priority first, then age, then name: the order PreFilter's holds follow.
            q.sort_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then(a.oldest_ms.cmp(&b.oldest_ms))
                    .then_with(|| self.str(a.domain).cmp(self.str(b.domain)))
            });
            q.truncate(depth);
        }
        let mut out: Vec<Reservation> = Vec::new();
        // A head that can start now holds the clique it fits best, so that nothing overtakes it
        // in the moment its trays have freed up (its pods may sit out a backoff while a younger
        // domain's are tried); if every clique it fits is held already, it holds none. (Passing
        // over it instead would give the clique to a younger domain and hold it against the
        // head, which then flips with every tray freed.) A head that cannot start gets the
        // clique that can hold it soonest: the earliest time by which the deadlines of the pods
        // on its busy trays free its size (as EASY backfill reserves), cliques without such a
        // time after those with one; then the fewest trays still to free up. A tray taken
        // outside the reserved cliques only makes its own clique's time later and its count
        // higher, so the choice stays put (plain-pod steering's `settled`). The first of every
        // class choose before the second of any, larger classes first.
        for rank in 0..depth {
            for head in queues.iter().rev().filter_map(|q| q.get(rank)) {
                let fits_now = self.can_start_now(head.domain, head.size);
                let best = self
                    .cliques
                    .iter()
                    .filter(|(id, c)| c.usable >= head.size && !out.iter().any(|r| r.clique == **id))
                    .map(|(&id, c)| (self.free_for(c, head.domain), c, id))
                    .filter(|&(free, _, _)| !fits_now || free >= head.size)
                    .map(|(free, c, id)| {
                        let ready = if fits_now { None } else { self.room_by(c, free, head.size) };
                        let ready = ready.map_or(i64::MAX, |(at, _)| at);
                        (ready, head.size.saturating_sub(free), free.saturating_sub(head.size), self.str(id), id)
                    })
                    .min();
                if let Some((.., clique)) = best {
                    out.push(Reservation {
                        domain: head.domain,
                        clique,
                        size: head.size,
                        waited_ms: self.now_ms.saturating_sub(head.oldest_ms),
                        rank: rank as u32,
                        fits_now,
                    });
                }
            }
        }
        out
    }

    /// Trays of `c` free for `domain` now, less those promised to domains starting there.
    pub(crate) fn free_for(&self, c: &Clique, domain: StrId) -> u32 {
        self.available(c, domain, None).saturating_sub(c.promised)
    }

    /// Whether a domain of `size` trays that has not started would fit some clique now.
    fn can_start_now(&self, domain: StrId, size: u32) -> bool {
        self.cliques.values().any(|c| self.free_for(c, domain) >= size)
    }

    /// The text a reservation shows in reasons: `ComputeDomain ns/big (16 trays)`. No clock in
    /// it: a reason that changed every second would make every scheduling attempt a new Event
    /// (the events library folds only identical ones into a series) and flood the API server.
    pub(crate) fn reservation_text(&self, r: &Reservation) -> String {
        alloc::format!("ComputeDomain {} ({} trays)", self.domain_name(r.domain), r.size)
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;

    use super::*;
    use crate::testutil::{Fx, clique};
    use crate::verdict::Code;

    const MIN: i64 = 60_000;

    /// `n` running 1-tray domains `<rack>-small<i>` on the first trays of `rack`.
    fn smalls(f: &mut Fx, rack: &str, n: u32) {
        for i in 0..n {
            let name = format!("{rack}-small{i}");
            f.domain("ns", &name, &format!("uid-{name}"));
            f.pod("ns", &format!("{name}-0"), &name, |p| p.size_hint = Some(1));
            f.bind("ns", &format!("{name}-0"), &format!("{rack}-{i:02}"));
        }
    }

    /// A waiting domain of `size` trays whose pods were created at `created` with `priority`.
    fn waiting(f: &mut Fx, name: &str, size: u32, created: i64, priority: i32) {
        f.domain("ns", name, &format!("uid-{name}"));
        for i in 0..size {
            f.pod("ns", &format!("{name}-{i}"), name, |p| {
                p.size_hint = Some(size);
                p.created_ms = created;
                p.priority = priority;
            });
        }
    }

    fn fixture() -> Fx {
        // Two cliques of 8: a with 3 trays busy, b with 5 busy. A 7-tray domain fits neither.
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        smalls(&mut f, "a", 3);
        smalls(&mut f, "b", 5);
        f
    }

    #[test]
    fn the_head_of_a_class_gets_the_clique_that_frees_soonest_after_the_threshold() {
        let mut f = fixture();
        waiting(&mut f, "big", 7, MIN, 0);
        f.v.now_ms = MIN + 59_000;
        assert!(f.v.reservations().is_empty(), "not waited long enough");
        f.v.now_ms = 3 * MIN;
        let r = f.v.reservations();
        assert_eq!(r.len(), 1);
        assert_eq!(f.v.str(r[0].domain), "uid-big");
        assert_eq!(f.v.str(r[0].clique), clique(1), "a needs 2 trays freed, b 4");
        assert_eq!((r[0].size, r[0].waited_ms), (7, 2 * MIN));
        // Off.
        f.v.args.clique_reservation_after_seconds = 0;
        assert!(f.v.reservations().is_empty());
    }

    #[test]
    fn priority_then_age_decides_the_head() {
        let mut f = fixture();
        waiting(&mut f, "old", 6, MIN, 0);
        waiting(&mut f, "young-high", 7, 2 * MIN, 10);
        waiting(&mut f, "older", 6, MIN / 2, 0);
        f.v.now_ms = 10 * MIN;
        let r = f.v.reservations();
        assert_eq!(r.len(), 1, "all three are in class 5-8: one reservation");
        assert_eq!(f.v.str(r[0].domain), "uid-young-high", "priority first");
        let mut f = fixture();
        waiting(&mut f, "old", 6, MIN, 0);
        waiting(&mut f, "older", 6, MIN / 2, 0);
        waiting(&mut f, "fits", 4, MIN, 0);
        f.v.now_ms = 10 * MIN;
        let r = f.v.reservations();
        assert_eq!(r.len(), 1, "a domain that can start now (4 of a's 5 free) needs none");
        assert_eq!(f.v.str(r[0].domain), "uid-older", "same priority: the oldest");
        // The head of a class that can start now holds the clique it fits, so nothing takes its
        // trays first, and no younger domain of its class takes its place.
        let mut f = fixture();
        waiting(&mut f, "first", 5, MIN / 2, 0);
        waiting(&mut f, "second", 7, MIN, 0);
        waiting(&mut f, "other", 2, 9 * MIN + MIN / 2, 0);
        f.v.now_ms = 10 * MIN;
        let r = f.v.reservations();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((f.v.str(r[0].domain), f.v.str(r[0].clique)), ("uid-first", clique(1).as_str()), "first fits a's 5");
        let (code, reason) = f.decide("ns", "first-0", 10 * MIN);
        assert_eq!(code, Code::Success, "{reason}");
        // A younger domain may not take a's trays from under it (3 + 2 > 8 - 5); b is open.
        let key = f.id("ns/other-0");
        let d = f.v.pre_filter(key, &[], 10 * MIN);
        let a = d.cliques.iter().find(|c| f.v.str(c.clique) == clique(1)).unwrap();
        assert_eq!(a.verdict.code, Code::Unschedulable, "{}", d.reason(a.verdict));
        assert_eq!(d.status.code, Code::Success);
    }

    #[test]
    fn one_per_class_each_on_its_own_clique_larger_classes_first() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        smalls(&mut f, "a", 5);
        smalls(&mut f, "b", 5);
        waiting(&mut f, "four", 4, MIN, 0);
        waiting(&mut f, "six", 6, MIN, 0);
        f.v.now_ms = 10 * MIN;
        let r = f.v.reservations();
        let got: alloc::vec::Vec<(&str, String)> =
            r.iter().map(|x| (f.v.str(x.domain), String::from(f.v.str(x.clique)))).collect();
        assert_eq!(got, [("uid-six", clique(1)), ("uid-four", clique(2))]);
    }

    /// `cliqueReservationDepth` heads per class, each on its own clique: the first of every
    /// class choose before the second of any, and the ones past the depth hold nothing.
    #[test]
    fn a_deeper_queue_reserves_a_clique_for_each_of_the_first_heads() {
        // Three cliques of 12 with 9, 8 and 7 trays free; three 10-tray domains (class 9-15)
        // fit none now; a 6-tray one (class 5-8) fits every one.
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60, "cliqueReservationDepth": 2}"#);
        f.rack("a", 1, 12);
        f.rack("b", 2, 12);
        f.rack("c", 3, 12);
        smalls(&mut f, "a", 3);
        smalls(&mut f, "b", 4);
        smalls(&mut f, "c", 5);
        waiting(&mut f, "big1", 10, MIN, 0);
        waiting(&mut f, "big2", 10, 2 * MIN, 0);
        waiting(&mut f, "big3", 10, 3 * MIN, 0);
        waiting(&mut f, "six", 6, 2 * MIN, 0);
        f.v.now_ms = 10 * MIN;
        let got: alloc::vec::Vec<(String, String, u32)> =
            f.v.reservations()
                .iter()
                .map(|x| (String::from(f.v.str(x.domain)), String::from(f.v.str(x.clique)), x.rank))
                .collect();
        let want = [("uid-big1", clique(1), 0), ("uid-six", clique(3), 0), ("uid-big2", clique(2), 1)];
        let want: alloc::vec::Vec<(String, String, u32)> =
            want.iter().map(|(d, c, r)| (String::from(*d), c.clone(), *r)).collect();
        assert_eq!(
            got, want,
            "big1 takes a (frees soonest), six the clique it fits best now (c), then big2 b; big3 is past the depth"
        );
        // big2's pods say where they stand; big3 is held off both reserved cliques.
        let (code, reason) = f.decide("ns", "big2-0", 10 * MIN);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("an NVLink clique is reserved for it (second of its size class"), "{reason}");
        let (code, reason) = f.decide("ns", "big3-0", 10 * MIN);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("a clique reserved for a domain waiting longer is not used"), "{reason}");
        // Depth 1: only the first of each class.
        f.v.args.clique_reservation_depth = 1;
        let r = f.v.reservations();
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r.iter().all(|x| x.rank == 0));
    }

    /// A reservation holds its clique against domains behind the one it is for, not against a
    /// domain of the same priority that has waited longer (here one of a smaller class, which
    /// chose after the larger one and found every clique it fits held).
    #[test]
    fn a_reservation_does_not_hold_its_clique_against_a_domain_that_waited_longer() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        smalls(&mut f, "a", 2);
        smalls(&mut f, "b", 8);
        // four (class 1-4) waited longest, then seven (class 5-8): seven, the larger class,
        // chooses first and holds a (6 free, needs 1 more), four can start now but every clique
        // it fits is held, so it holds none.
        waiting(&mut f, "four", 4, MIN, 0);
        waiting(&mut f, "seven", 7, 2 * MIN, 0);
        f.v.now_ms = 10 * MIN;
        let r = f.v.reservations();
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((f.v.str(r[0].domain), f.v.str(r[0].clique)), ("uid-seven", clique(1).as_str()));
        let (code, reason) = f.decide("ns", "four-0", 10 * MIN);
        assert_eq!(code, Code::Success, "four waited longer than seven: a is not held against it: {reason}");
        // A domain younger than seven is held off a.
        waiting(&mut f, "late", 4, 9 * MIN, 0);
        let (code, reason) = f.decide("ns", "late-0", 10 * MIN);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("a clique reserved for a domain waiting longer is not used"), "{reason}");
    }

    /// The reasons do not change with the clock alone: the same view a minute later gives the
    /// same words, so the scheduler's Events for a waiting pod fold into one series.
    #[test]
    fn reasons_carry_no_clock() {
        let mut f = fixture();
        waiting(&mut f, "big", 7, MIN, 0);
        waiting(&mut f, "small", 2, 5 * MIN, 0);
        for pod in ["small-0", "big-0"] {
            let key = f.id(&format!("ns/{pod}"));
            let texts = |f: &mut Fx, now: i64| {
                let r = f.v.pre_filter(key, &[], now);
                let mut t: alloc::vec::Vec<String> =
                    r.cliques.iter().map(|c| String::from(r.reason(c.verdict))).collect();
                t.push(String::from(r.reason(r.status)));
                t
            };
            let (a, b) = (texts(&mut f, 3 * MIN), texts(&mut f, 4 * MIN + 1_234));
            assert!(a.iter().any(|t| t.contains("reserved")), "{a:?}");
            assert_eq!(a, b, "{pod}: the reasons changed with the clock alone");
        }
    }

    /// A reservation never holds a clique against a domain of higher priority than the one it
    /// is for.
    #[test]
    fn a_higher_priority_domain_is_not_held_off_a_reserved_clique() {
        let mut f = fixture();
        waiting(&mut f, "big", 7, MIN, 0);
        waiting(&mut f, "urgent", 5, 5 * MIN, 10);
        let key = f.id("ns/urgent-0");
        let r = f.v.pre_filter(key, &[], 3 * MIN);
        assert_eq!(r.status.code, Code::Success, "{}", r.reason(r.status));
        let a = r.cliques.iter().find(|c| f.v.str(c.clique) == clique(1)).unwrap();
        assert_eq!(a.verdict.code, Code::Success, "a (5 free) is reserved for big, of lower priority");
        // The same domain at big's priority is held off a, and b (3 free) is too small.
        let mut f = fixture();
        waiting(&mut f, "big", 7, MIN, 0);
        waiting(&mut f, "equal", 5, 5 * MIN, 0);
        let (code, reason) = f.decide("ns", "equal-0", 3 * MIN);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("a clique reserved for a domain waiting longer is not used"), "{reason}");
    }

    /// Another domain backfills the reserved clique only where the reserved one still fits once
    /// its trays free up; elsewhere it is unaffected.
    #[test]
    fn backfill_leaves_the_reserved_domain_its_size() {
        let mut f = fixture();
        waiting(&mut f, "big", 7, MIN, 0);
        // a: 8 usable, 3 held. big needs 7: others may hold at most 1 -> nothing fits there now.
        waiting(&mut f, "small", 2, 5 * MIN, 0);
        let (code, reason) = f.decide("ns", "small-0", 3 * MIN);
        assert_eq!(code, Code::Success, "{reason}");
        let key = f.id("ns/small-0");
        let r = f.v.pre_filter(key, &[], 3 * MIN);
        let a = r.cliques.iter().find(|c| f.v.str(c.clique) == clique(1)).unwrap();
        assert_eq!(a.verdict.code, Code::Unschedulable);
        assert!(
            r.reason(a.verdict)
                .starts_with("NVLink clique is reserved for ComputeDomain ns/big (7 trays), first of its size class"),
            "{}",
            r.reason(a.verdict)
        );
        let b = r.cliques.iter().find(|c| f.v.str(c.clique) == clique(2)).unwrap();
        assert_eq!(b.verdict.code, Code::Success, "b is not reserved: small goes there");
        // The reserved domain's own reason says it holds a clique.
        let (code, reason) = f.decide("ns", "big-0", 3 * MIN);
        assert_eq!(code, Code::Unschedulable);
        assert!(reason.contains("an NVLink clique is reserved for it (first of its size class"), "{reason}");
        let own = f.v.reservations().into_iter().find(|r| f.v.str(r.domain) == "uid-big").unwrap();
        assert_eq!(f.v.str(own.clique), clique(1));
    }

    /// `ends` gives, per tray of `rack` from the first, a running 1-tray domain `<rack>-t<i>`
    /// started at one minute that the kubelet ends at that time (none: no deadline).
    fn timed(f: &mut Fx, rack: &str, ends: &[Option<i64>]) {
        for (i, end) in ends.iter().enumerate() {
            let name = format!("{rack}-t{i}");
            f.domain("ns", &name, &format!("uid-{name}"));
            f.pod("ns", &format!("{name}-0"), &name, |p| {
                p.size_hint = Some(1);
                p.started_ms = MIN;
                p.runtime_limit_ms = end.map(|e| e - MIN);
            });
            f.bind("ns", &format!("{name}-0"), &format!("{rack}-{i:02}"));
        }
    }

    /// A waiting domain like [`waiting`] whose pods carry a runtime limit.
    fn waiting_for(f: &mut Fx, name: &str, size: u32, created: i64, limit: Option<i64>) {
        waiting(f, name, size, created, 0);
        for i in 0..size {
            f.update_pod("ns", &format!("{name}-{i}"), |p| p.runtime_limit_ms = limit);
        }
    }

    /// The one reservation of `f` (a head that cannot start): its clique and shadow time in
    /// minutes.
    fn reserved(f: &Fx) -> (String, Option<i64>) {
        let r = f.v.reservations();
        assert_eq!(r.len(), 1);
        assert!(!r[0].fits_now);
        let c = f.v.cliques[&r[0].clique].clone();
        (String::from(f.v.str(r[0].clique)), f.v.shadow(&r[0], &c).map(|(at, _)| at / MIN))
    }

    /// The verdict code clique `id` gets in PreFilter for `ns/pod` at `now`.
    fn clique_code(f: &mut Fx, pod: &str, id: u32, now: i64) -> Code {
        let key = f.id(&format!("ns/{pod}"));
        let r = f.v.pre_filter(key, &[], now);
        r.cliques.iter().find(|c| f.v.str(c.clique) == clique(id)).map(|c| c.verdict.code).unwrap()
    }

    /// EASY backfill: with the deadlines of the pods on the reserved clique known, a domain that
    /// would be gone by the shadow time may use it, one that runs longer may not, and one
    /// without a deadline is held off as without runtimes.
    #[test]
    fn a_domain_that_ends_before_the_shadow_time_backfills_the_reserved_clique() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        // a: 3 busy, ending at 10, 20 and 30 minutes; b: 5 busy, no deadlines.
        timed(&mut f, "a", &[Some(10 * MIN), Some(20 * MIN), Some(30 * MIN)]);
        smalls(&mut f, "b", 5);
        waiting(&mut f, "big", 7, MIN, 0);
        f.v.now_ms = 3 * MIN;
        let r = f.v.reservations();
        assert_eq!((r.len(), f.v.str(r[0].clique)), (1, clique(1).as_str()));
        let c = f.v.cliques[&r[0].clique].clone();
        assert_eq!(f.v.shadow(&r[0], &c), Some((20 * MIN, 7)), "big needs 2 of the 3 freed: by 20 min");
        // (Created a second ago, so none of them heads its class and holds b.) Ends by 3 + 5 =
        // 8 minutes: before the shadow time.
        waiting_for(&mut f, "quick", 2, 3 * MIN - 1_000, Some(5 * MIN));
        assert_eq!(clique_code(&mut f, "quick-0", 1, 3 * MIN), Code::Success);
        // 3 + 30 minutes: past it, and no tray to spare at 20 minutes (5 + 2 - 7 = 0).
        waiting_for(&mut f, "long", 2, 3 * MIN - 1_000, Some(30 * MIN));
        assert_eq!(clique_code(&mut f, "long-0", 1, 3 * MIN), Code::Unschedulable);
        waiting_for(&mut f, "unbounded", 2, 3 * MIN - 1_000, None);
        assert_eq!(clique_code(&mut f, "unbounded-0", 1, 3 * MIN), Code::Unschedulable);
        // quick starts on a: the reserved domain's shadow time does not move.
        for (i, node) in ["a-03", "a-04"].into_iter().enumerate() {
            f.bind("ns", &format!("quick-{i}"), node);
            f.update_pod("ns", &format!("quick-{i}"), |p| p.started_ms = 3 * MIN);
        }
        let r = f.v.reservations();
        let c = f.v.cliques[&r[0].clique].clone();
        assert_eq!(f.v.shadow(&r[0], &c), Some((20 * MIN, 7)));
        // One pod of quick without its deadline: the domain's end is unknown.
        f.update_pod("ns", "long-1", |p| p.runtime_limit_ms = None);
        let long = f.id("uid-long");
        assert_eq!(f.v.domain_ends_by(long), None);
    }

    /// Where deadlines tell when trays free up, a head that cannot start reserves the clique
    /// that has its size free first, even with more trays to free; a clique whose trays have no
    /// known end comes after every clique with one; without deadlines anywhere, the fewest
    /// trays to free decide.
    #[test]
    fn with_deadlines_the_head_reserves_the_clique_that_has_its_size_free_first() {
        let fx = |a: &[Option<i64>], b: &[Option<i64>]| {
            let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
            f.rack("a", 1, 8);
            f.rack("b", 2, 8);
            timed(&mut f, "a", a);
            timed(&mut f, "b", b);
            waiting(&mut f, "big", 7, MIN, 0);
            f.v.now_ms = 3 * MIN;
            f
        };
        // a: 3 busy to 50, 60, 70 minutes (2 to free: 60); b: 5 busy to 10 minutes (4 to free: 10).
        let late = [Some(50 * MIN), Some(60 * MIN), Some(70 * MIN)];
        let soon = [Some(10 * MIN); 5];
        assert_eq!(reserved(&fx(&late, &soon)), (clique(2), Some(10)), "b has 7 free at 10 minutes, a at 60");
        // Equal times: the fewest trays to free.
        let soon3 = [Some(10 * MIN); 3];
        assert_eq!(reserved(&fx(&soon3, &soon)), (clique(1), Some(10)));
        // b's trays without a known end: a, whose end is known, however late.
        assert_eq!(reserved(&fx(&late, &[None; 5])), (clique(1), Some(60)));
        // Only one of the 4 ends b needs is known: b has no time, so a.
        let mut partly = [None; 5];
        partly[0] = Some(5 * MIN);
        assert_eq!(reserved(&fx(&late, &partly)), (clique(1), Some(60)));
        // No deadlines anywhere: the fewest trays to free (a, 2 against 4).
        assert_eq!(reserved(&fx(&[None; 3], &[None; 5])), (clique(1), None));
        // A tray taken on b (not reserved) only makes b later: a stays reserved.
        let mut f = fx(&late, &[None; 5]);
        f.plain("ns", "gpu", "b-05", 4, 0);
        assert_eq!(reserved(&f), (clique(1), Some(60)));
    }

    /// A driver label left on a tray by a domain that has no pod there any more goes within
    /// seconds: the tray counts as free now, not as a tray with no known end, so the clique a
    /// domain just left keeps its time and its reservation.
    #[test]
    fn a_lingering_driver_label_counts_as_free_now() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        // a: 3 trays busy to 50, 60, 70 minutes; the other 5 still carry the label of a domain
        // that ended. b: 5 busy to 80 minutes.
        timed(&mut f, "a", &[Some(50 * MIN), Some(60 * MIN), Some(70 * MIN)]);
        for i in 3..8 {
            f.label_node(&format!("a-{i:02}"), 1, "uid-gone");
        }
        timed(&mut f, "b", &[Some(80 * MIN); 5]);
        waiting(&mut f, "big", 7, MIN, 0);
        f.v.now_ms = 3 * MIN;
        // a needs 7 of its 8: the 5 labelled ones now, then 50 and 60 minutes. b: 80.
        assert_eq!(reserved(&f), (clique(1), Some(60)));
    }

    /// EASY backfill's second rule: a domain of any runtime may take the trays that will be free
    /// at the shadow time beyond the reserved domain's size.
    #[test]
    fn trays_spare_at_the_shadow_time_backfill_whatever_the_runtime() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        // big needs 2 of a's 3 busy; two end at 20 minutes, so 8 are free then: 1 to spare.
        timed(&mut f, "a", &[Some(10 * MIN), Some(20 * MIN), Some(20 * MIN)]);
        smalls(&mut f, "b", 8);
        waiting(&mut f, "big", 7, MIN, 0);
        waiting_for(&mut f, "one", 1, 2 * MIN, None);
        waiting_for(&mut f, "two", 2, 2 * MIN, None);
        let (code, reason) = f.decide("ns", "one-0", 3 * MIN);
        assert_eq!(code, Code::Success, "{reason}");
        let (code, reason) = f.decide("ns", "two-0", 3 * MIN);
        assert_eq!(code, Code::Unschedulable, "7 + 2 > 8");
        assert!(reason.contains("a clique reserved for a domain waiting longer is not used"), "{reason}");
        // Without deadlines on a's trays, only the rule without runtimes holds: 3 held,
        // 3 + 1 > 8 - 7.
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        timed(&mut f, "a", &[Some(10 * MIN), None, None]);
        smalls(&mut f, "b", 8);
        waiting(&mut f, "big", 7, MIN, 0);
        waiting_for(&mut f, "one", 1, 2 * MIN, Some(MIN));
        let (code, _) = f.decide("ns", "one-0", 3 * MIN);
        assert_eq!(code, Code::Unschedulable, "no shadow time: nothing backfills");
        let r = f.v.reservations();
        let c = f.v.cliques[&r[0].clique].clone();
        assert_eq!(f.v.shadow(&r[0], &c), None);
    }

    /// A tray's end counts every pod that keeps it busy: a plain GPU pod without a deadline on
    /// a reserved clique's tray leaves that tray without a known end; a CPU pod does not count.
    #[test]
    fn a_plain_pod_without_a_deadline_keeps_its_tray_unknown() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        timed(&mut f, "a", &[Some(10 * MIN), Some(20 * MIN), Some(30 * MIN)]);
        f.plain("ns", "cpu", "a-00", 0, 0);
        waiting(&mut f, "big", 7, MIN, 0);
        f.v.now_ms = 3 * MIN;
        let r = f.v.reservations();
        let c = f.v.cliques[&r[0].clique].clone();
        assert_eq!(f.v.shadow(&r[0], &c), Some((20 * MIN, 7)), "a CPU pod frees nothing and holds nothing");
        f.plain("ns", "gpu", "a-01", 4, 0);
        let c = f.v.cliques[&r[0].clique].clone();
        assert_eq!(f.v.shadow(&r[0], &c), Some((30 * MIN, 7)), "a-01 has no known end: the 2nd end is a-02's");
    }
}
