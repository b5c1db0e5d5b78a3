//! Head-of-queue reservation with backfill: large domains must not starve.
//!
//! Small domains take every tray that frees up, so a domain of 16 trays could wait forever for
//! a clique to empty. A domain that has waited longer than `cliqueReservationAfterSeconds` and is
//! first in its size class (1–4, 5–8, 9–15, 16+ trays) by priority, then age, gets one clique
//! reserved: the one that can hold it soonest (the fewest trays still to free up); a head that
//! can start now holds none, and no younger domain of its class takes its place. Other domains
//! and plain GPU pods may use that clique only while what they take leaves room for it once the
//! trays it waits for free up (backfill): the trays held or promised there by others must stay at
//! most `usable - size`. Without runtime estimates that is the only backfill that can never delay
//! it. One reservation per size class, each on its own clique, larger classes choosing first.
//!
//! Reservations are a pure function of the view and the host's clock, recomputed at every
//! decision, so every policy instance agrees and nothing is stored.

use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::StrId;
use crate::nodes::Clique;
use crate::size::SizeSource;
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
}

impl Reservation {
    /// Whether another domain (or plain pod) may take `trays` more trays of the reserved clique
    /// `c`, where `free` trays are free for the reserved domain now: what others hold or are
    /// promised there afterwards must leave the reserved domain its size.
    pub fn admits(&self, c: &Clique, free: u32, trays: u32) -> bool {
        let held = c.usable.saturating_sub(free).saturating_add(c.promised);
        held.saturating_add(trays) <= c.usable.saturating_sub(self.size)
    }
}

impl View {
    /// The reservation that keeps domain `domain` (priority `priority`) from taking `trays`
    /// trays of clique `id`, if any: one for another domain of at least its priority, whose
    /// backfill rule does not admit them. A reservation never holds a clique against a
    /// higher-priority domain (priority ranks before age, as it does for the head of a class).
    /// PreFilter and gang preemption both ask this, so preemption never calls a clique that
    /// PreFilter holds back a fit.
    pub(crate) fn held_against(
        &self,
        reservations: &[Reservation],
        id: StrId,
        domain: StrId,
        priority: i32,
        trays: u32,
    ) -> Option<Reservation> {
        let c = self.cliques.get(&id)?;
        reservations
            .iter()
            .find(|r| {
                r.clique == id
                    && r.domain != domain
                    && self.domain_priority(r.domain) >= priority
                    && !r.admits(c, self.free_for(c, r.domain), trays)
            })
            .copied()
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
        let mut heads: [Option<Candidate>; SIZE_CLASSES.len()] = [None; SIZE_CLASSES.len()];
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
            let Some((&oldest, _)) = d.created.iter().next() else { continue };
            if oldest <= 0 || self.now_ms.saturating_sub(oldest) < after_ms {
                continue;
            }
            let c = Candidate { priority: self.domain_priority(uid), oldest_ms: oldest, domain: uid, size: size.size };
            let class = SIZE_CLASSES.iter().position(|&(lo, hi)| (lo..=hi).contains(&size.size)).unwrap_or(0);
            let first = heads[class].is_none_or(|h| {
                (c.priority, -c.oldest_ms, self.str(h.domain)) > (h.priority, -h.oldest_ms, self.str(c.domain))
            });
            if first {
                heads[class] = Some(c);
            }
        }
        let mut out: Vec<Reservation> = Vec::new();
        // A head that can start now needs no clique held: it starts, and the next in its class
        // becomes the head. (Passing over it instead would give the clique to a younger domain
        // and hold it against the head, which then flips with every tray freed.)
        for head in heads.iter().rev().flatten().filter(|h| !self.can_start_now(h.domain, h.size)) {
            // The clique that can hold it soonest: the fewest trays still to free up.
            let best = self
                .cliques
                .iter()
                .filter(|(id, c)| c.usable >= head.size && !out.iter().any(|r| r.clique == **id))
                .map(|(&id, c)| (head.size.saturating_sub(self.free_for(c, head.domain)), self.str(id), id))
                .min();
            if let Some((_, _, clique)) = best {
                out.push(Reservation {
                    domain: head.domain,
                    clique,
                    size: head.size,
                    waited_ms: self.now_ms.saturating_sub(head.oldest_ms),
                });
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
        // The head of a class that can start now holds nothing, and no younger domain of its
        // class takes its place: that clique would be held against the head itself.
        let mut f = fixture();
        waiting(&mut f, "first", 5, MIN / 2, 0);
        waiting(&mut f, "second", 7, MIN, 0);
        f.v.now_ms = 10 * MIN;
        assert!(f.v.reservations().is_empty(), "first (5) fits a's 5 free trays: no reservation in 5-8");
        let (code, reason) = f.decide("ns", "first-0", 10 * MIN);
        assert_eq!(code, Code::Success, "{reason}");
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
}
