//! Plain-pod steering: where a pod without a ComputeDomain hurts domains least.
//!
//! A GPU pod (or a CPU pod) that lands on a free tray of an intact clique takes a tray an
//! 18-tray domain needed: the clique can no longer hold it. The stock scores spread such pods onto
//! empty nodes, which is exactly there. [`View::steer`] answers once for every node, the same
//! shape as PreFilter's answer, so the host caches it per view version and Filter and Score for a
//! plain pod stay lookups:
//! - nodes without a clique (no label, an empty clique ID, or a malformed label) score highest;
//! - then cliques already broken, the fuller the higher (the fewest free trays);
//! - intact cliques (every usable tray free, nothing promised) lower;
//! - cliques reserved for a waiting domain (`reserve`) lowest, and closed to plain GPU pods'
//!   new trays while backfill would delay that domain;
//! - a plain GPU pod may not take a free tray of a clique whose free trays are all promised to
//!   domains that started there and still place pods (it may still share a tray already in use).
//!
//! The answer also marks the cliques where one more plain pod changes nothing of it but that
//! clique's own score ([`CliqueVerdict::stable`]): broken already, nothing promised there, not
//! reserved, and no reservation held by a domain that could start now (such a domain holds the
//! clique it fits best, and a tray taken elsewhere can make another clique fit it better; a domain
//! that cannot start yet holds the clique that frees its size first, and a tray taken elsewhere
//! only makes that clique's rivals later or adds to their count of trays to free). The host keeps the answer across plain placements on
//! those cliques, so a run of plain pods filling a broken clique asks once, not once a pod; the
//! clique's own score is then a little low (it got fuller), which keeps the order among broken
//! cliques that matters: the one being filled already scores highest.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::args::ImexMode;
use crate::trays::Clique;
use crate::verdict::{CliqueVerdict, Code, NodeVerdict, PreFilterResult, Verdict};
use crate::view::View;

/// Score of a node without a clique.
pub const SCORE_NO_CLIQUE: u32 = 100;
/// Score of an intact clique's nodes.
pub const SCORE_INTACT: u32 = 10;
/// Score of a clique reserved for a waiting domain.
pub const SCORE_RESERVED: u32 = 0;
/// Scores of a broken clique span `SCORE_BROKEN_MIN..=SCORE_BROKEN_MIN + SCORE_BROKEN_SPAN`, by the
/// share of its usable trays not free.
pub const SCORE_BROKEN_MIN: u32 = 20;
pub const SCORE_BROKEN_SPAN: u32 = 70;

impl View {
    /// Where a pod without a ComputeDomain should go; `gpus` says whether it uses GPUs (a pod
    /// whose only claims are not for GPUs may pass false). `Skip` when steering is off or the
    /// cluster has no clique.
    pub fn steer(&mut self, gpus: bool, now_ms: i64) -> PreFilterResult {
        self.now_ms = now_ms;
        let skip = Verdict { code: Code::Skip, reason: 0 };
        let mut r = PreFilterResult {
            status: skip,
            domain: None,
            reasons: vec![String::new()],
            exclusive: false,
            cliques: Vec::new(),
            other: Verdict::SUCCESS,
            other_score: SCORE_NO_CLIQUE,
            nodes: Vec::new(),
        };
        if !self.args.plain_pod_steering || self.cliques.values().all(|c| c.nodes.is_empty()) {
            return r;
        }
        r.status = Verdict::SUCCESS;
        let reservations = self.reservations();
        // Whether a tray taken outside the reserved cliques leaves every reservation where it is.
        let settled = reservations.iter().all(|x| !x.fits_now);
        // Trays the segments of starting domains larger than a clique still need (span.rs),
        // beyond the promise in their home clique: kept from plain pods as a promise is.
        let holds = self.span_holds(crate::facts::StrId::MAX, &reservations);
        for (&id, c) in &self.cliques {
            if c.nodes.is_empty() {
                continue;
            }
            let free = self.free_trays(c);
            let busy = c.usable.saturating_sub(free);
            let held = holds.get(&id).copied().unwrap_or(0);
            let score = if busy == 0 && c.promised == 0 && held == 0 {
                SCORE_INTACT
            } else {
                SCORE_BROKEN_MIN + SCORE_BROKEN_SPAN * busy / c.usable.max(1)
            };
            let reserved = reservations.iter().find(|x| x.clique == id);
            let score = if reserved.is_some() { SCORE_RESERVED } else { score };
            // Broken stays broken and only gets fuller; with nothing promised no verdict here can
            // close; no reservation can move (see the top of this file).
            // While a spanning domain starts, a tray taken anywhere may move its other segments:
            // no clique is stable then.
            let stable = reserved.is_none() && settled && c.promised == 0 && holds.is_empty() && busy > 0;
            let mut verdict = Verdict::SUCCESS;
            let closed = if gpus && held > 0 && free <= c.promised + held {
                Some(format!(
                    "the {free} free tray(s) of NVLink clique {} are held for the segments of a ComputeDomain larger than one clique that is starting; a pod without a ComputeDomain may use a tray already in use there, or another clique",
                    self.str(id)
                ))
            } else if gpus && c.promised > 0 && free <= c.promised {
                Some(format!(
                    "the {free} free tray(s) of NVLink clique {} are promised to {} starting there; a pod without a ComputeDomain may use a tray already in use there, or another clique",
                    self.str(id),
                    self.promised_to(id)
                ))
            } else {
                reserved.filter(|x| gpus && !self.backfills(x, c, 1, None)).map(|x| {
                    format!(
                        "NVLink clique {} is reserved for {}, {}; a pod without a ComputeDomain may use a tray already in use there, or another clique",
                        self.str(id),
                        self.reservation_text(x),
                        x.place_text()
                    )
                })
            };
            if let Some(text) = closed {
                let reason = r.reasons.len() as u32;
                r.reasons.push(text);
                verdict = Verdict { code: Code::Unschedulable, reason };
                // Trays already in use by plain GPU pods are no domain's to take: sharing them
                // costs the starting domains nothing.
                for (&n, s) in &c.busy {
                    if s.usable && !s.gpu_idle && s.holders.is_empty() {
                        r.nodes.push(NodeVerdict { node: n, verdict: Verdict::SUCCESS });
                    }
                }
            }
            r.cliques.push(CliqueVerdict { clique: id, verdict, score, stable });
        }
        r
    }

    /// Trays of clique `c` a new domain could take (any size).
    pub(crate) fn free_trays(&self, c: &Clique) -> u32 {
        match self.args.imex_mode {
            ImexMode::DriverManaged => c.free.values().sum(),
            ImexMode::HostManaged => c.idle.values().sum(),
        }
    }

    /// The domains homed in clique `c` still placing pods, for reasons:
    /// `ComputeDomain ns/a (3 more pods)`.
    fn promised_to(&self, c: crate::facts::StrId) -> String {
        let parts: Vec<String> = self
            .domains
            .iter()
            .filter_map(|(&uid, d)| match d.promise() {
                Some((home, n)) if home == c => {
                    Some(format!("ComputeDomain {} ({n} more pod(s))", self.domain_name(uid)))
                }
                _ => None,
            })
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;

    use super::*;
    use crate::facts::{Placement, StrId};
    use crate::testutil::{Fx, clique};

    /// ComputeDomain ns/big of 7 pending pods, created at 1 s: reserved for from 61 s on with
    /// `cliqueReservationAfterSeconds: 60`.
    fn waiting_domain_of_7(f: &mut Fx) {
        f.domain("ns", "big", "uid-big");
        for i in 0..7 {
            f.pod("ns", &format!("big-{i}"), "big", |p| {
                p.size_hint = Some(7);
                p.created_ms = 1_000;
            });
        }
    }

    /// A plain 4-GPU pod, pending.
    fn plain(f: &mut Fx, name: &str) {
        f.pod("ns", name, "none", |p| p.claims.clear());
    }

    fn score_of(f: &Fx, r: &PreFilterResult, c: u32) -> (Code, u32) {
        let label = clique(c);
        let cv = r.cliques.iter().find(|v| f.v.str(v.clique) == label).expect("clique listed");
        (cv.verdict.code, cv.score)
    }

    #[test]
    fn skipped_without_cliques_or_when_off() {
        let mut f = Fx::new("");
        assert_eq!(f.v.steer(true, 0).status.code, Code::Skip, "no clique in the cluster");
        let mut f = Fx::new(r#"{"plainPodSteering":false}"#);
        f.rack("a", 1, 4);
        assert_eq!(f.v.steer(true, 0).status.code, Code::Skip, "steering off");
    }

    /// Unlabelled nodes first, then broken cliques (fuller first), intact ones last.
    #[test]
    fn unlabelled_then_broken_then_intact() {
        let mut f = Fx::new("");
        f.rack("a", 1, 18); // intact
        f.rack("b", 2, 18); // 3 busy
        f.rack("c", 3, 18); // 15 busy
        for (rack, n) in [("b", 3u32), ("c", 15)] {
            for i in 0..n {
                let name = format!("{rack}-p{i}");
                plain(&mut f, &name);
                f.bind("ns", &name, &format!("{rack}-{i:02}"));
            }
        }
        let r = f.v.steer(true, 0);
        assert_eq!(r.status.code, Code::Success);
        assert_eq!((r.other.code, r.other_score), (Code::Success, SCORE_NO_CLIQUE));
        let (a, b, c) = (score_of(&f, &r, 1), score_of(&f, &r, 2), score_of(&f, &r, 3));
        assert_eq!(a, (Code::Success, SCORE_INTACT));
        assert_eq!(b, (Code::Success, SCORE_BROKEN_MIN + SCORE_BROKEN_SPAN * 3 / 18));
        assert_eq!(c, (Code::Success, SCORE_BROKEN_MIN + SCORE_BROKEN_SPAN * 15 / 18));
        assert!(SCORE_NO_CLIQUE > c.1 && c.1 > b.1 && b.1 > a.1);
        assert!(r.nodes.is_empty(), "nothing promised: no node differs");
        assert!(r.cliques.iter().all(|v| !f.v.str(v.clique).is_empty()), "{:?}", r.cliques);
    }

    /// A domain started in clique 1 with 4 of 6 pods bound: the 2 free trays left are its own.
    /// Plain GPU pods are kept off them (but may share a tray in use); CPU pods are not.
    #[test]
    fn free_trays_promised_to_a_starting_domain_are_kept_for_it() {
        let mut f = Fx::new("");
        f.rack("a", 1, 7);
        f.rack("b", 2, 4);
        f.domain("ns", "train", "uid-train");
        for i in 0..6 {
            f.pod("ns", &format!("t{i}"), "train", |p| p.size_hint = Some(6));
        }
        for i in 0..4 {
            f.bind("ns", &format!("t{i}"), &format!("a-{i:02}"));
        }
        // A 2-GPU plain pod on a-04: that tray is in use, not free.
        f.pod("ns", "half", "none", |p| {
            p.claims.clear();
            p.gpus = 2;
        });
        f.bind("ns", "half", "a-04");
        // Free in clique 1: a-05, a-06 = exactly the 2 promised.
        let r = f.v.steer(true, 0);
        let (code, _) = score_of(&f, &r, 1);
        assert_eq!(code, Code::Unschedulable);
        let cv = r.cliques.iter().find(|v| f.v.str(v.clique) == clique(1)).unwrap();
        let text = r.reason(cv.verdict);
        assert!(text.contains("2 free tray(s)") && text.contains("ComputeDomain ns/train (2 more pod(s))"), "{text}");
        let shared: alloc::vec::Vec<&str> = r.nodes.iter().map(|n| f.v.str(n.node)).collect();
        assert_eq!(shared, ["a-04"], "the tray already in use stays open to plain GPU pods");
        assert_eq!(score_of(&f, &r, 2), (Code::Success, SCORE_INTACT));
        // A CPU pod is only scored.
        let cpu = f.v.steer(false, 0);
        assert_eq!(score_of(&f, &cpu, 1).0, Code::Success);
        assert!(cpu.nodes.is_empty());
        // One more free tray than promised: plain GPU pods may take it.
        f.rack("a", 1, 8);
        let r = f.v.steer(true, 0);
        assert_eq!(score_of(&f, &r, 1).0, Code::Success);
        // The domain placed all its pods: nothing promised any more.
        f.bind("ns", "t4", "a-05");
        f.bind("ns", "t5", "a-06");
        f.v.assert_consistent();
        assert_eq!(f.v.steer(true, 0).nodes.len(), 0);
    }

    /// A clique reserved for a waiting domain scores lowest and is closed to plain GPU pods while
    /// one more tray taken would delay that domain.
    #[test]
    fn a_reserved_clique_is_kept_for_its_domain() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        for (rack, n) in [("a", 3u32), ("b", 5)] {
            for i in 0..n {
                let name = format!("{rack}-p{i}");
                plain(&mut f, &name);
                f.bind("ns", &name, &format!("{rack}-{i:02}"));
            }
        }
        waiting_domain_of_7(&mut f);
        let before = f.v.steer(true, 30_000);
        assert_eq!(score_of(&f, &before, 1).0, Code::Success, "not reserved yet");
        let r = f.v.steer(true, 120_000);
        let (code, score) = score_of(&f, &r, 1);
        assert_eq!((code, score), (Code::Unschedulable, SCORE_RESERVED));
        let cv = r.cliques.iter().find(|v| f.v.str(v.clique) == clique(1)).unwrap();
        assert!(
            r.reason(cv.verdict).contains("reserved for ComputeDomain ns/big (7 trays)"),
            "{}",
            r.reason(cv.verdict)
        );
        assert_eq!(score_of(&f, &r, 2).0, Code::Success, "b is not reserved");
        // A CPU pod is only scored away.
        let cpu = f.v.steer(false, 120_000);
        assert_eq!(score_of(&f, &cpu, 1), (Code::Success, SCORE_RESERVED));
    }

    /// `(label, stable)` of every clique of an answer.
    fn stable_of(f: &Fx, r: &PreFilterResult) -> alloc::vec::Vec<(String, bool)> {
        r.cliques.iter().map(|c| (String::from(f.v.str(c.clique)), c.stable)).collect()
    }

    /// `after` is `before` but for clique `placed`'s own score, which may only rise.
    fn same_but_placed(before: &PreFilterResult, after: &PreFilterResult, placed: StrId) -> bool {
        let mut b = before.clone();
        for (x, y) in b.cliques.iter_mut().zip(&after.cliques) {
            if x.clique == placed && y.clique == placed && y.score >= x.score {
                x.score = y.score;
            }
        }
        b == *after
    }

    /// Places a plain 2-GPU pod on every tray of `racks` (prefix, clique, trays) in turn, as the
    /// host sends one it reserves: pending, then assumed, then bound; checks `stable`'s promise
    /// against the answer at `now` (a pending plain pod changes nothing; on a stable clique the
    /// placement changes nothing but that clique's score, upward). Returns per rack whether some
    /// placement changed the answer, and how many placements on stable cliques were checked.
    fn check_promise(f: &mut Fx, gpus: bool, now: i64, racks: &[(&str, u32, u32)]) -> (alloc::vec::Vec<bool>, usize) {
        let before = f.v.steer(gpus, now);
        let mut changed_per_rack = alloc::vec::Vec::new();
        let mut tried = 0;
        for &(rack, id, trays) in racks {
            let placed = f.id(&clique(id));
            let stable = before.cliques.iter().find(|c| c.clique == placed).unwrap().stable;
            let mut changed = false;
            for t in 0..trays {
                let node = format!("{rack}-{t:02}");
                let n = f.id(&node);
                f.pod("ns", "new", "none", |p| {
                    p.claims.clear();
                    p.gpus = 2;
                });
                assert_eq!(f.v.steer(gpus, now), before, "a pending plain pod changes nothing ({node})");
                for placement in [Placement::Assumed, Placement::Bound] {
                    f.update_pod("ns", "new", |p| {
                        p.placement = placement;
                        p.node = Some(n);
                    });
                    let after = f.v.steer(gpus, now);
                    let same = same_but_placed(&before, &after, placed);
                    if stable {
                        assert!(same, "{node} {placement:?}: {before:?} then {after:?}");
                        tried += 1;
                    }
                    changed |= !same;
                }
                f.remove_pod("ns", "new");
                assert_eq!(f.v.steer(gpus, now), before, "back as it was ({node})");
            }
            changed_per_rack.push(changed);
        }
        (changed_per_rack, tried)
    }

    /// What `stable` promises, checked on every tray of every clique: a plain pod placed on a tray
    /// of a stable clique changes no verdict and no score but that clique's own, which rises; and
    /// the flag is not given where a placement would change the answer (an intact clique turns
    /// broken; a clique whose free trays would fall to what a starting domain was promised closes).
    #[test]
    fn a_plain_pod_on_a_stable_clique_leaves_the_answer() {
        let mut f = Fx::new("");
        f.rack("a", 1, 6); // intact
        f.rack("b", 2, 6); // broken: 2 trays busy
        f.rack("c", 3, 5); // a domain started there: 2 of 4 pods bound, 3 free, 2 promised
        f.rack("d", 4, 3); // broken: every tray half used
        f.rack("e", 5, 2); // empty of usable trays: both cordoned
        for i in 0..2 {
            f.plain("ns", &format!("b-p{i}"), &format!("b-{i:02}"), 4, 0);
        }
        for i in 0..3 {
            f.plain("ns", &format!("d-p{i}"), &format!("d-{i:02}"), 2, 0);
        }
        f.domain("ns", "train", "uid-train");
        for i in 0..4 {
            f.pod("ns", &format!("t{i}"), "train", |p| p.size_hint = Some(4));
        }
        for i in 0..2 {
            f.bind("ns", &format!("t{i}"), &format!("c-{i:02}"));
        }
        let label = f.id(&clique(5));
        for i in 0..2 {
            let name = f.id(&format!("e-{i:02}"));
            let n = crate::facts::NodeFact {
                name,
                clique_label: Some(label),
                unschedulable: true,
                gpus: 4,
                domain_label: None,
            };
            f.v.apply([crate::facts::Delta::UpsertNode(n)]).expect("node");
        }
        f.v.assert_consistent();
        for gpus in [true, false] {
            let r = f.v.steer(gpus, 0);
            let flags = stable_of(&f, &r);
            let want: alloc::vec::Vec<(String, bool)> = [(1, false), (2, true), (3, false), (4, true), (5, false)]
                .iter()
                .map(|&(c, s)| (clique(c), s))
                .collect();
            assert_eq!(flags, want, "gpus {gpus}");
            let (changed, tried) =
                check_promise(&mut f, gpus, 0, &[("a", 1, 6), ("b", 2, 6), ("c", 3, 5), ("d", 4, 3)]);
            // Not stable where a placement changes the answer: intact a turns broken; in c the
            // free trays fall to the 2 promised and a GPU pod's verdict closes.
            assert!(changed[0], "a must not be stable (gpus {gpus})");
            assert!(changed[2] || !gpus, "c must not be stable");
            assert_eq!(tried, 2 * (6 + 3), "every tray of b and d, assumed and bound");
        }
    }

    /// A domain that cannot start yet holds the clique that frees its size first (here, without
    /// deadlines, the one with the fewest trays still to free); a tray taken in another clique
    /// only makes that clique later, so the others stay stable (the held clique is not).
    #[test]
    fn a_reservation_for_a_domain_that_cannot_start_yet_leaves_the_others_stable() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8); // 3 busy: 5 free, 2 short of the 7 trays: held
        f.rack("b", 2, 8); // 5 busy: 3 free
        f.rack("c", 3, 6); // 2 busy; too small for the domain
        for (rack, n) in [("a", 3u32), ("b", 5), ("c", 2)] {
            for i in 0..n {
                f.plain("ns", &format!("{rack}-p{i}"), &format!("{rack}-{i:02}"), 4, 0);
            }
        }
        waiting_domain_of_7(&mut f);
        for gpus in [true, false] {
            let early = f.v.steer(gpus, 30_000);
            assert!(early.cliques.iter().all(|c| c.stable), "nothing reserved yet: {:?}", stable_of(&f, &early));
            let late = f.v.steer(gpus, 120_000);
            let want: alloc::vec::Vec<(String, bool)> =
                [(1, false), (2, true), (3, true)].iter().map(|&(c, s)| (clique(c), s)).collect();
            assert_eq!(stable_of(&f, &late), want, "a is held (gpus {gpus})");
            assert_eq!(score_of(&f, &late, 1).1, SCORE_RESERVED);
            let (_, tried) = check_promise(&mut f, gpus, 120_000, &[("b", 2, 8), ("c", 3, 6)]);
            assert_eq!(tried, 2 * (8 + 6));
        }
    }

    /// A domain that could start now holds the clique it fits best, and a tray taken in another
    /// clique can make that one the better fit: then no clique is stable. Here p has 9 free trays
    /// and q 8 for a domain of 7, so q is held; one plain pod on p makes p the tie that wins.
    #[test]
    fn nothing_is_stable_while_a_domain_that_could_start_holds_a_clique() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("p", 1, 10);
        f.plain("ns", "p-user", "p-00", 4, 0); // broken: 9 free
        f.rack("q", 2, 8); // intact: 8 free
        waiting_domain_of_7(&mut f);
        let r = f.v.steer(true, 120_000);
        assert_eq!(score_of(&f, &r, 2).1, SCORE_RESERVED, "q, the best fit, is held");
        assert!(r.cliques.iter().all(|c| !c.stable), "{:?}", stable_of(&f, &r));
        let (changed, _) = check_promise(&mut f, true, 120_000, &[("p", 1, 10)]);
        assert!(changed[0], "a plain pod on p moves the reservation there");
    }
}
