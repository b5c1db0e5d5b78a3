//! The fleet status: facts of the view for metrics and ComputeDomain Events, not decisions.
//!
//! [`View::status`] answers, for the whole fleet at once: each clique's usable, free and
//! promised trays and whether a reservation holds it; the largest domain that could start now;
//! the trays head-of-queue reservations wait for; and each ComputeDomain's phase (pending,
//! starting, running) with, for a pending one, why it waits, in the same words and by the same
//! code as PreFilter (one of its pending pods is decided, without an overlay), plus a note the
//! host puts on the ComputeDomain as an Event. Notes carry no clock (no "waiting 95s"), so a
//! note changes only when the situation does and the host can emit each once.
//!
//! The host calls it at most about once a second, never per pod: it costs a PreFilter per
//! pending domain.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::{Placement, StrId};
use crate::reserve::Reservation;
use crate::trays::Clique;
use crate::verdict::Verdict;
use crate::view::View;

/// Where a ComputeDomain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainPhase {
    /// No workload pod of it is known (none created yet, or all finished).
    Idle,
    /// No pod placed: it has not started.
    Pending,
    /// Started in a clique, not every pod placed yet.
    Starting,
    /// Every pod of its size placed (bound or reserved).
    Running,
}

/// Why a domain that has not started waits: a small fixed set, PreFilter's outcomes for its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PendingReason {
    /// The ComputeDomain its pods' channel names does not exist.
    NoComputeDomain,
    /// A PodGroup or owner its pods name has not told its size yet.
    SizeUnknown,
    /// No declared size: waiting `sizeSettleSeconds` for its pods to stop arriving.
    Settling,
    /// Larger than any clique can ever hold.
    NoCliqueFits,
    /// Some clique could hold it, none has enough free trays now.
    WaitingForTrays,
    /// As `WaitingForTrays`, and some clique is reserved for a domain waiting longer.
    ReservedElsewhere,
    /// It is first of its size class and holds a reservation; it waits for trays to free there.
    HoldsReservation,
    /// Gang preemption nominated it to a clique whose victims are still leaving.
    VictimsLeaving,
    /// It fits a clique now (its pods are on their way through the queue).
    Placeable,
    /// Its pods can never be placed as they are (namespace, tray size).
    Unresolvable,
}

impl PendingReason {
    /// Every reason, for metrics that must show each value.
    pub const ALL: [PendingReason; 10] = [
        PendingReason::NoComputeDomain,
        PendingReason::SizeUnknown,
        PendingReason::Settling,
        PendingReason::NoCliqueFits,
        PendingReason::WaitingForTrays,
        PendingReason::ReservedElsewhere,
        PendingReason::HoldsReservation,
        PendingReason::VictimsLeaving,
        PendingReason::Placeable,
        PendingReason::Unresolvable,
    ];

    /// The metric label value: `waiting_for_trays`.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::NoComputeDomain => "no_compute_domain",
            PendingReason::SizeUnknown => "size_unknown",
            PendingReason::Settling => "settling",
            PendingReason::NoCliqueFits => "no_clique_fits",
            PendingReason::WaitingForTrays => "waiting_for_trays",
            PendingReason::ReservedElsewhere => "reserved_elsewhere",
            PendingReason::HoldsReservation => "holds_reservation",
            PendingReason::VictimsLeaving => "victims_leaving",
            PendingReason::Placeable => "placeable",
            PendingReason::Unresolvable => "unresolvable",
        }
    }
}

/// Why a domain that has not started waits, as PreFilter found it for one of its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    pub reason: PendingReason,
    /// The pod-level verdict PreFilter gave (its text is the reason).
    pub verdict: Verdict,
    /// Trays it needs in one clique.
    pub needed: u32,
    /// Trays the best clique offers it now (for `NoCliqueFits`: the largest clique's usable trays).
    pub offer: u32,
    /// The best clique: the one offering `offer`, the one it fits best, or its nominated one.
    pub best: Option<StrId>,
    /// The clique reserved for it, and its place in its size class (0: first).
    pub reserved: Option<(StrId, u32)>,
    /// Cliques reserved for other domains that it may not take.
    pub elsewhere: u32,
    /// It is larger than one clique and waits for room for its segments (span.rs).
    pub segments: bool,
}

impl Pending {
    pub fn new(reason: PendingReason, verdict: Verdict) -> Self {
        Pending { reason, verdict, needed: 0, offer: 0, best: None, reserved: None, elsewhere: 0, segments: false }
    }
}

/// One clique of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliqueStatus {
    /// The clique label value.
    pub clique: StrId,
    /// Trays that may take ComputeDomain pods (not cordoned).
    pub usable: u32,
    /// Usable trays a new domain could take now (no GPU in use; under driver-managed IMEX also
    /// no domain holding them).
    pub free: u32,
    /// Free trays promised to domains that started here and still place pods.
    pub promised: u32,
    /// The domain (UID) a head-of-queue reservation holds this clique for.
    pub reserved_for: Option<StrId>,
}

/// One ComputeDomain of the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainStatus {
    pub uid: StrId,
    /// From the ComputeDomain object; none when it does not exist.
    pub namespace: Option<StrId>,
    pub name: Option<StrId>,
    pub phase: DomainPhase,
    /// Why it waits, when pending.
    pub pending: Option<PendingReason>,
    /// Its size (trays, one pod per tray).
    pub size: u32,
    /// Pods bound or reserved.
    pub placed: u32,
    /// Trays it still needs (pending: in one clique).
    pub needed: u32,
    /// Started: its clique. Pending: the best clique for it, when one is.
    pub clique: Option<StrId>,
    /// Pending: trays the best clique offers it now.
    pub offer: u32,
    /// What the host says on the ComputeDomain (an Event), empty when nothing: for a running
    /// domain where it runs, for a waiting one why. No clock in it.
    pub note: String,
}

/// The fleet at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FleetStatus {
    /// Cliques with nodes, by label value.
    pub cliques: Vec<CliqueStatus>,
    /// ComputeDomains with an object or a known pod, by UID.
    pub domains: Vec<DomainStatus>,
    /// The most trays a domain that has not started could take in one clique now (whole trays,
    /// after promises, `reserveTraysPerClique`, `cliqueExclusive` and reservations).
    pub largest_placeable: u32,
    /// Trays head-of-queue reservations wait for: the sizes of the domains they are for.
    pub reserved_trays: u32,
}

/// A domain id no domain has: trays free for it are trays free for any new domain.
const NO_DOMAIN: StrId = StrId::MAX;

impl View {
    /// The fleet status at the host's time `now_ms` (see the module doc).
    pub fn status(&mut self, now_ms: i64) -> FleetStatus {
        self.now_ms = now_ms;
        let reservations = self.reservations();
        let mut out = FleetStatus { reserved_trays: reservations.iter().map(|r| r.size).sum(), ..Default::default() };
        for (&id, c) in &self.cliques {
            if c.nodes.is_empty() {
                continue;
            }
            let held = reservations.iter().find(|r| r.clique == id);
            out.largest_placeable = out.largest_placeable.max(self.placeable_in(c, held));
            out.cliques.push(CliqueStatus {
                clique: id,
                usable: c.usable,
                free: self.free_trays(c),
                promised: c.promised,
                reserved_for: held.map(|r| r.domain),
            });
        }
        // One pod per domain to decide for: a pending one, else a nominated one.
        let mut waiting: BTreeMap<StrId, (bool, StrId)> = BTreeMap::new();
        for (&key, p) in &self.pods {
            let Ok(Some(m)) = &p.member else { continue };
            let pending = match p.fact.placement {
                Placement::Pending => true,
                Placement::Nominated => false,
                Placement::Assumed | Placement::Bound => continue,
            };
            if !m.daemon && waiting.get(&m.domain).is_none_or(|&(was_pending, _)| pending && !was_pending) {
                waiting.insert(m.domain, (pending, key));
            }
        }
        let uids: BTreeSet<StrId> = self.domains.keys().chain(self.domain_facts.keys()).copied().collect();
        for uid in uids {
            let d = self.domain_status(uid, waiting.get(&uid).map(|w| w.1), &reservations);
            out.domains.push(d);
        }
        out
    }

    fn domain_status(&self, uid: StrId, waiting: Option<StrId>, reservations: &[Reservation]) -> DomainStatus {
        let agg = self.domains.get(&uid);
        let fact = self.domain_facts.get(&uid);
        let size = self.size_of(uid);
        let placed = agg.map_or(0, |a| a.placed_total());
        let home = agg.and_then(|a| a.home());
        let mut st = DomainStatus {
            uid,
            namespace: fact.map(|f| f.namespace),
            name: fact.map(|f| f.name),
            phase: DomainPhase::Idle,
            pending: None,
            size: size.size,
            placed,
            needed: size.size.saturating_sub(placed),
            clique: home,
            offer: 0,
            note: String::new(),
        };
        if agg.is_none_or(|a| a.pods == 0) && placed == 0 {
            return st;
        }
        let cd = self.domain_name(uid);
        let sized = self.size_text(uid, &size);
        if let Some(h) = home {
            let cliques = agg.map_or(0, |a| a.placed.len());
            if placed >= size.size && cliques > 1 {
                // A domain larger than a clique: its segments (span.rs), largest first.
                let mut parts: Vec<(u32, &str)> =
                    agg.into_iter().flat_map(|a| a.placed.iter()).map(|(&c, &n)| (n, self.str(c))).collect();
                parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
                let list: Vec<String> = parts.iter().map(|(n, c)| format!("{c} ({n})")).collect();
                st.phase = DomainPhase::Running;
                st.note = format!(
                    "ComputeDomain {cd} placed as segments in {cliques} NVLink cliques, {}: {placed} tray(s) ({sized})",
                    list.join(", ")
                );
            } else if placed >= size.size {
                st.phase = DomainPhase::Running;
                st.note =
                    format!("ComputeDomain {cd} placed in NVLink clique {}: {placed} tray(s) ({sized})", self.str(h));
            } else {
                st.phase = DomainPhase::Starting;
            }
            return st;
        }
        let Some((why, text)) = waiting.and_then(|k| self.pending_of(k, reservations)) else { return st };
        st.phase = DomainPhase::Pending;
        st.pending = Some(why.reason);
        (st.needed, st.offer, st.clique) = (why.needed.max(st.needed), why.offer, why.best);
        st.note = match why.reason {
            PendingReason::Placeable => String::new(),
            // A domain larger than a clique: PreFilter's reason says what its segments need.
            _ if why.segments => text,
            PendingReason::Settling => format!(
                "ComputeDomain {cd} has no declared size (no annotation, PodGroup, known owner or spec.numNodes): it starts once no new pod arrived for {}s ({sized})",
                self.args.size_settle_seconds
            ),
            PendingReason::WaitingForTrays | PendingReason::ReservedElsewhere | PendingReason::HoldsReservation => {
                let mut t = format!("ComputeDomain {cd} needs {} trays in one NVLink clique ({sized}); ", why.needed);
                match why.best {
                    Some(b) => t.push_str(&format!("the best clique, {}, offers {}", self.str(b), why.offer)),
                    None => t.push_str("no clique offers any"),
                }
                if self.args.reserve_trays_per_clique > 0 {
                    t.push_str(&format!(" (reserveTraysPerClique keeps {} spare)", self.args.reserve_trays_per_clique));
                }
                if why.elsewhere > 0 {
                    t.push_str(&format!("; {} clique(s) are reserved for domains waiting longer", why.elsewhere));
                }
                if let Some((clique, rank)) = why.reserved {
                    let place = crate::reserve::place_in_class(rank);
                    t.push_str(&format!(
                        "; NVLink clique {} is reserved for it ({place}): it starts there once enough trays free up",
                        self.str(clique)
                    ));
                }
                t
            }
            PendingReason::NoComputeDomain
            | PendingReason::SizeUnknown
            | PendingReason::NoCliqueFits
            | PendingReason::VictimsLeaving
            | PendingReason::Unresolvable => text,
        };
        st
    }

    /// The most trays a domain that has not started could take in clique `c` now, under the
    /// reservation `held` on it (see [`FleetStatus::largest_placeable`]).
    fn placeable_in(&self, c: &Clique, held: Option<&Reservation>) -> u32 {
        if self.args.clique_exclusive && self.other_domain_in(c, NO_DOMAIN).is_some() {
            return 0;
        }
        let cap = self.free_for(c, NO_DOMAIN);
        // reserveTraysPerClique spares trays from domains smaller than the clique only.
        let mut n = if cap >= c.usable { c.usable } else { cap.saturating_sub(self.args.reserve_trays_per_clique) };
        if let Some(r) = held {
            let taken = c.usable.saturating_sub(self.free_for(c, r.domain)).saturating_add(c.promised);
            n = n.min(c.usable.saturating_sub(r.size).saturating_sub(taken));
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;

    use super::*;
    use crate::testutil::{Fx, clique};

    const MIN: i64 = 60_000;

    fn domain<'a>(f: &Fx, s: &'a FleetStatus, uid: &str) -> &'a DomainStatus {
        s.domains.iter().find(|d| f.v.str(d.uid) == uid).expect("domain listed")
    }

    fn clique_of<'a>(f: &Fx, s: &'a FleetStatus, id: u32) -> &'a CliqueStatus {
        let label = clique(id);
        s.cliques.iter().find(|c| f.v.str(c.clique) == label).expect("clique listed")
    }

    /// A domain of `size` pods annotated with its size, created at `created`.
    fn sized(f: &mut Fx, name: &str, size: u32, created: i64) {
        f.domain("ns", name, &format!("uid-{name}"));
        for i in 0..size {
            f.pod("ns", &format!("{name}-{i}"), name, |p| {
                p.size_hint = Some(size);
                p.created_ms = created;
            });
        }
    }

    fn bind_all(f: &mut Fx, name: &str, n: u32, rack: &str, first: u32) {
        for i in 0..n {
            f.bind("ns", &format!("{name}-{i}"), &format!("{rack}-{:02}", first + i));
        }
    }

    /// Running, starting, waiting and placeable domains with the cliques' trays: what the
    /// metrics and Events read.
    #[test]
    fn phases_trays_and_notes() {
        let mut f = Fx::new("");
        f.rack("a", 1, 8);
        f.rack("b", 2, 6);
        sized(&mut f, "run", 5, 0);
        bind_all(&mut f, "run", 5, "a", 0);
        sized(&mut f, "half", 4, 0);
        bind_all(&mut f, "half", 2, "b", 0);
        sized(&mut f, "big", 7, 0);
        sized(&mut f, "small", 2, 0);
        f.domain("ns", "idle", "uid-idle");
        let s = f.v.status(0);
        f.v.assert_consistent();

        let a = clique_of(&f, &s, 1);
        assert_eq!((a.usable, a.free, a.promised, a.reserved_for), (8, 3, 0, None));
        let b = clique_of(&f, &s, 2);
        assert_eq!((b.usable, b.free, b.promised), (6, 4, 2), "half still needs 2 of b's 4 free");
        assert_eq!(s.largest_placeable, 3, "a: 3 free; b: 4 free less 2 promised");
        assert_eq!(s.reserved_trays, 0);

        let run = domain(&f, &s, "uid-run");
        assert_eq!((run.phase, run.placed, run.size, run.needed), (DomainPhase::Running, 5, 5, 0));
        assert_eq!(f.v.str(run.clique.unwrap()), clique(1));
        assert_eq!(
            run.note,
            format!(
                "ComputeDomain ns/run placed in NVLink clique {}: 5 tray(s) (size 5 from annotation cdplace.nvidia.com/size on pod ns/run-4)",
                clique(1)
            )
        );
        let half = domain(&f, &s, "uid-half");
        assert_eq!((half.phase, half.placed, half.needed, half.note.as_str()), (DomainPhase::Starting, 2, 2, ""));

        let big = domain(&f, &s, "uid-big");
        assert_eq!((big.phase, big.pending), (DomainPhase::Pending, Some(PendingReason::WaitingForTrays)));
        assert_eq!((big.needed, big.offer), (7, 3));
        assert_eq!(f.v.str(big.clique.unwrap()), clique(1), "a offers 3, b 2 after its promise");
        assert_eq!(
            big.note,
            format!(
                "ComputeDomain ns/big needs 7 trays in one NVLink clique (size 7 from annotation cdplace.nvidia.com/size on pod ns/big-6); the best clique, {}, offers 3",
                clique(1)
            )
        );
        let small = domain(&f, &s, "uid-small");
        assert_eq!(
            (small.phase, small.pending, small.note.as_str()),
            (DomainPhase::Pending, Some(PendingReason::Placeable), "")
        );
        assert_eq!((small.needed, small.offer), (2, 2), "best fit: b's 2 left after half's promise");
        assert_eq!(f.v.str(small.clique.unwrap()), clique(2));
        assert_eq!(domain(&f, &s, "uid-idle").phase, DomainPhase::Idle);

        // The note changes only with the situation, not with the clock.
        assert_eq!(f.v.status(10 * MIN).domains, s.domains);
    }

    #[test]
    fn pending_reasons_follow_prefilter() {
        let mut f = Fx::new(r#"{"sizeSettleSeconds": 30}"#);
        f.rack("a", 1, 4);
        // Larger than any clique.
        sized(&mut f, "huge", 5, 0);
        // An owner whose size is not known yet.
        f.domain("ns", "job", "uid-job");
        let owner = f.id("Job/ns/trainer");
        f.pod("ns", "job-0", "job", |p| p.owner = Some(owner));
        // No declared size, pods still arriving.
        f.domain("ns", "bare", "uid-bare");
        f.pod("ns", "bare-0", "bare", |p| p.created_ms = 100_000);
        // Pods naming a ComputeDomain that does not exist (deleted; its template is left).
        f.domain("ns", "ghost", "uid-ghost");
        f.pod("ns", "ghost-0", "ghost", |_| {});
        let ghost = f.id("uid-ghost");
        f.v.apply([crate::facts::Delta::RemoveDomain(ghost)]).expect("remove");
        let s = f.v.status(110_000);
        let reason = |uid: &str| domain(&f, &s, uid).pending;
        assert_eq!(reason("uid-huge"), Some(PendingReason::NoCliqueFits));
        assert!(
            domain(&f, &s, "uid-huge").note.contains("needs 5 trays (")
                && domain(&f, &s, "uid-huge").note.contains("the largest clique has 4 usable trays"),
            "{}",
            domain(&f, &s, "uid-huge").note
        );
        assert_eq!(domain(&f, &s, "uid-huge").offer, 4);
        assert_eq!(reason("uid-job"), Some(PendingReason::SizeUnknown));
        assert!(
            domain(&f, &s, "uid-job").note.contains("waiting for Job ns/trainer"),
            "{}",
            domain(&f, &s, "uid-job").note
        );
        assert_eq!(reason("uid-bare"), Some(PendingReason::Settling));
        assert_eq!(
            domain(&f, &s, "uid-bare").note,
            "ComputeDomain ns/bare has no declared size (no annotation, PodGroup, known owner or spec.numNodes): it starts once no new pod arrived for 30s (size 1 from the pods seen so far)"
        );
        let ghost = s.domains.iter().find(|d| d.namespace.is_none()).expect("the ghost domain is listed");
        assert_eq!((ghost.pending, ghost.name), (Some(PendingReason::NoComputeDomain), None));
        // Once settled, the bare domain fits.
        let s = f.v.status(140_000);
        assert_eq!(domain(&f, &s, "uid-bare").pending, Some(PendingReason::Placeable));
    }

    /// A reservation: its clique and the trays it waits for, the reserved domain's reason, and a
    /// domain it keeps out.
    #[test]
    fn reservations_hold_trays_and_name_their_domains() {
        let mut f = Fx::new(r#"{"cliqueReservationAfterSeconds": 60}"#);
        f.rack("a", 1, 8);
        f.rack("b", 2, 8);
        for (rack, n) in [("a", 3u32), ("b", 5)] {
            for i in 0..n {
                let name = format!("{rack}-s{i}");
                sized(&mut f, &name, 1, 0);
                bind_all(&mut f, &name, 1, rack, i);
            }
        }
        sized(&mut f, "big", 7, MIN);
        // Six trays: fits a (5 free) nowhere; a is reserved for big: 8 - 7 - 3 = no backfill.
        sized(&mut f, "six", 6, 2 * MIN);
        let before = f.v.status(MIN + 30_000);
        assert_eq!(before.reserved_trays, 0);
        assert_eq!(before.largest_placeable, 5);
        let s = f.v.status(10 * MIN);
        assert_eq!(s.reserved_trays, 7);
        let a = clique_of(&f, &s, 1);
        assert_eq!(a.reserved_for.map(|d| f.v.str(d)), Some("uid-big"));
        assert_eq!(s.largest_placeable, 3, "a admits no backfill (8 - 7 - 3 < 0); b has 3 free");
        let big = domain(&f, &s, "uid-big");
        assert_eq!(big.pending, Some(PendingReason::HoldsReservation));
        assert!(
            big.note.ends_with(&format!("; NVLink clique {} is reserved for it (first of its size class): it starts there once enough trays free up", clique(1))),
            "{}",
            big.note
        );
        let six = domain(&f, &s, "uid-six");
        assert_eq!(six.pending, Some(PendingReason::ReservedElsewhere));
        assert!(six.note.contains("; 1 clique(s) are reserved for domains waiting longer"), "{}", six.note);
        assert_eq!((six.offer, six.clique.map(|c| String::from(f.v.str(c)))), (3, Some(clique(2))));
    }

    #[test]
    fn reason_labels_are_distinct() {
        let labels: BTreeSet<&str> = PendingReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), PendingReason::ALL.len());
    }
}
