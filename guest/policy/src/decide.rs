//! PreFilter: where may this pod go? One evaluation answers for every node at once.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::args::WholeTray;
use crate::facts::{OverlayOp, Placement, PodFact, StrId};
use crate::pernode::{Ask, Reasons};
use crate::reserve::Reservation;
use crate::size::{SizeSource, owner_display};
use crate::status::{Pending, PendingReason};
use crate::trays::Clique;
use crate::verdict::{CliqueVerdict, Code, NodeVerdict, PreFilterResult, Verdict};
use crate::view::{Member, View};

/// How many of the best-scoring cliques that can hold it a domain that has not started is
/// offered (ties at the cut included); the host makes their nodes the PreFilterResult. More than
/// one, so that a clique whose trays fail another plugin's Filter (a taint, CPU or memory taken by
/// other pods) does not leave the pod waiting while another clique fits.
pub const CANDIDATE_CLIQUES: usize = 3;

/// The pod-level outcome before it is turned into a result.
struct Decision {
    status: Verdict,
    exclusive: bool,
    cliques: Vec<CliqueVerdict>,
    other: Verdict,
    nodes: Vec<NodeVerdict>,
    /// For a pod of a domain that has not started: why it waits, or `Placeable` (the fleet
    /// status reads it; PreFilter does not).
    pending: Option<Pending>,
}

impl Decision {
    fn status(status: Verdict) -> Self {
        Decision { status, exclusive: false, cliques: Vec::new(), other: status, nodes: Vec::new(), pending: None }
    }

    /// A rejection of a domain that has not started, with why in structured form.
    fn waiting(status: Verdict, pending: Pending) -> Self {
        Decision { pending: Some(pending), ..Decision::status(status) }
    }
}

enum Undo {
    Restore(PodFact),
    Replace(PodFact),
}

impl View {
    /// Decides where the pod with key `pod` may go, as if `overlay` were applied first; `now_ms`
    /// is the host's clock (Unix milliseconds).
    pub fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
        self.now_ms = now_ms;
        let mut undo = Vec::new();
        // A pod nominated by preemption does not hold its own tray against itself; the clique it
        // was nominated to stays its domain's clique.
        let mut own_nomination = None;
        if let Some(e) = self.pods.get(&pod)
            && e.fact.placement == Placement::Nominated
            && let Some(orig) = self.unlink_pod(pod)
        {
            own_nomination = orig.node.and_then(|n| self.nodes.get(&n)).and_then(|n| n.summary.clique);
            let mut f = orig.clone();
            f.placement = Placement::Pending;
            f.node = None;
            self.link_pod(f);
            undo.push(Undo::Replace(orig));
        }
        for op in overlay {
            match *op {
                OverlayOp::RemovePod(k) => {
                    if let Some(f) = self.unlink_pod(k) {
                        undo.push(Undo::Restore(f));
                    }
                }
                OverlayOp::AddPod(k, node) => {
                    if let Some(orig) = self.unlink_pod(k) {
                        let mut f = orig.clone();
                        f.placement = Placement::Nominated;
                        f.node = Some(node);
                        self.link_pod(f);
                        undo.push(Undo::Replace(orig));
                    }
                }
            }
        }
        let mut reasons = Reasons::new();
        let (decision, domain) = self.decide(pod, own_nomination, None, &mut reasons);
        for u in undo.into_iter().rev() {
            match u {
                Undo::Restore(f) => self.link_pod(f),
                Undo::Replace(orig) => {
                    self.unlink_pod(orig.key);
                    self.link_pod(orig);
                }
            }
        }
        PreFilterResult {
            status: decision.status,
            domain,
            reasons: reasons.texts,
            exclusive: decision.exclusive,
            cliques: decision.cliques,
            other: decision.other,
            other_score: 0,
            nodes: decision.nodes,
        }
    }

    /// As [`View::pre_filter`], with only the cliques whose label `keep` accepts in the running:
    /// the others are refused with `reason` (UnschedulableAndUnresolvable) **before** the
    /// best-fitting cliques are chosen, so the domain is offered the best fit among the cliques
    /// kept, where narrowing the shipped answer afterwards could only keep what the shipped
    /// choice of the best [`CANDIDATE_CLIQUES`] offered. For a policy that confines domains to
    /// some cliques (a team's racks); every other rule of the shipped decision holds.
    pub fn pre_filter_within(
        &mut self,
        pod: StrId,
        overlay: &[OverlayOp],
        now_ms: i64,
        keep: &dyn Fn(&str) -> bool,
        reason: &str,
    ) -> PreFilterResult {
        self.excluded = self.cliques.keys().copied().filter(|&id| !keep(self.str(id))).collect();
        self.excluded_reason = String::from(reason);
        let r = self.pre_filter(pod, overlay, now_ms);
        self.excluded.clear();
        self.excluded_reason.clear();
        r
    }

    /// Why the pod `key` of a domain that has not started waits (or `Placeable`), with the
    /// text of its verdict; None for a pod of a started domain or no ComputeDomain pod. A pure
    /// function of the view at `self.now_ms`, as PreFilter without an overlay decides it.
    pub(crate) fn pending_of(&self, key: StrId, reservations: &[Reservation]) -> Option<(Pending, String)> {
        let mut r = Reasons::new();
        let (d, _) = self.decide(key, None, Some(reservations), &mut r);
        let why = d.pending?;
        let text = r.texts.get(why.verdict.reason as usize).cloned().unwrap_or_default();
        Some((why, text))
    }

    /// `reservations`: those at the view's time when the caller has them (the fleet status
    /// decides one pod per pending domain and computes them once); None computes them.
    fn decide(
        &self,
        key: StrId,
        own_nomination: Option<StrId>,
        reservations: Option<&[Reservation]>,
        r: &mut Reasons,
    ) -> (Decision, Option<StrId>) {
        let Some(pod) = self.pods.get(&key) else {
            let text = format!("pod {} is not in the policy's view (the host must send it first)", self.str(key));
            return (Decision::status(r.verdict(Code::Error, text)), None);
        };
        match &pod.member {
            Err(e) => (Decision::status(r.verdict(Code::UnschedulableAndUnresolvable, e.clone())), None),
            // Not a ComputeDomain pod; IMEX daemon pods follow their DaemonSet's node selector.
            Ok(None) => (Decision::status(Verdict { code: Code::Skip, reason: 0 }), None),
            Ok(Some(m)) if m.daemon => (Decision::status(Verdict { code: Code::Skip, reason: 0 }), Some(m.domain)),
            Ok(Some(m)) => (
                self.decide_member(pod.fact.namespace, pod.gpu_use, *m, own_nomination, reservations, r),
                Some(m.domain),
            ),
        }
    }

    fn decide_member(
        &self,
        namespace: StrId,
        gpu_use: crate::facts::GpuDemand,
        m: Member,
        own_nomination: Option<StrId>,
        reservations: Option<&[Reservation]>,
        r: &mut Reasons,
    ) -> Decision {
        let (via_ns, via_name) = m.via;
        let via = format!(
            "{} {}/{}",
            if m.via_template { "ResourceClaimTemplate" } else { "ResourceClaim" },
            self.str(via_ns),
            self.str(via_name)
        );
        let Some(df) = self.domain_facts.get(&m.domain) else {
            let text = format!(
                "ComputeDomain with UID {} (named by {via}) does not exist; the pod waits until it does",
                self.str(m.domain)
            );
            let v = r.verdict(Code::UnschedulableAndUnresolvable, text);
            return Decision::waiting(v, Pending::new(PendingReason::NoComputeDomain, v));
        };
        let cd = self.domain_name(m.domain);
        if df.namespace != namespace {
            let text = format!(
                "{via} is in namespace {} but its ComputeDomain {cd} is in namespace {}; the driver refuses to prepare a channel outside its domain's namespace",
                self.str(namespace),
                self.str(df.namespace)
            );
            let v = r.verdict(Code::UnschedulableAndUnresolvable, text);
            return Decision::waiting(v, Pending::new(PendingReason::Unresolvable, v));
        }

        let mut ask = Ask { domain: m.domain, tray_size: None, prefer_gpus: None };
        if !gpu_use.all {
            match self.args.whole_tray {
                WholeTray::Require => {
                    let g = gpu_use.count;
                    if !self.tray_sizes.contains_key(&g) {
                        let v = self.stranding(g, r);
                        return Decision::waiting(v, Pending::new(PendingReason::Unresolvable, v));
                    }
                    ask.tray_size = Some(g);
                }
                WholeTray::Prefer => ask.prefer_gpus = Some(gpu_use.count),
                WholeTray::Off => {}
            }
        }

        let agg = self.domains.get(&m.domain).expect("a linked workload pod has a domain aggregate");
        let size = self.size_of(m.domain);
        let placed = agg.placed_total();
        let remaining = size.size.saturating_sub(placed).max(1);

        // Larger than one clique: segments (span.rs), once started or once its size is settled.
        let spanning = self.spans(size.size, ask.tray_size);
        if spanning && placed > 0 {
            return self.span_decision(ask, &size, reservations, &cd, r);
        }

        // Where it started, else the clique a gang preemption nominated it to (a spanning
        // domain that has placed none is laid out afresh below).
        if let Some(home) = agg.target().or(own_nomination).filter(|_| !spanning) {
            let clique = self.cliques.get(&home);
            let available = clique.map_or(0, |c| self.available(c, m.domain, ask.tray_size));
            if available == 0 {
                let sized = self.size_text(m.domain, &size);
                let text = if placed == 0 {
                    format!(
                        "ComputeDomain {cd} was nominated to NVLink clique {} by preemption and needs {remaining} tray(s) there ({sized}); none is free yet (its victims are leaving)",
                        self.str(home)
                    )
                } else if placed >= size.size {
                    format!(
                        "ComputeDomain {cd} runs in NVLink clique {} with {placed} pods placed ({sized}); this extra pod needs a free tray there too, but none is free; its pods never leave that clique",
                        self.str(home)
                    )
                } else {
                    format!(
                        "ComputeDomain {cd} runs in NVLink clique {} and needs {remaining} more tray(s) there ({sized}), but none is free; its pods never leave that clique",
                        self.str(home)
                    )
                };
                let v = r.verdict(Code::Unschedulable, text);
                if placed == 0 {
                    let mut why = Pending::new(PendingReason::VictimsLeaving, v);
                    (why.needed, why.best) = (remaining, Some(home));
                    return Decision::waiting(v, why);
                }
                return Decision::status(v);
            }
            let other = r.verdict(
                Code::UnschedulableAndUnresolvable,
                format!(
                    "ComputeDomain {cd} already runs in NVLink clique {}; all its pods stay in that clique",
                    self.str(home)
                ),
            );
            let mut d = Decision {
                status: Verdict::SUCCESS,
                exclusive: true,
                cliques: vec![CliqueVerdict {
                    clique: home,
                    verdict: Verdict::SUCCESS,
                    score: self.scale(100, ask, clique),
                    stable: false,
                }],
                other,
                nodes: Vec::new(),
                pending: None,
            };
            if placed == 0 {
                let mut why = Pending::new(PendingReason::Placeable, Verdict::SUCCESS);
                (why.needed, why.offer, why.best) = (remaining, available, Some(home));
                d.pending = Some(why);
            }
            if let Some(c) = clique {
                self.node_overrides(c, ask, &cd, r, &mut d.nodes);
            }
            self.malformed_overrides(r, &mut d.nodes);
            return d;
        }

        // A domain that has not started: only once its size is known, and only in cliques that
        // can hold all its pods.
        if let Some(owner) = size.missing {
            let key = self.str(owner);
            let role = if key.starts_with("PodGroup/") { "PodGroup" } else { "owner" };
            let text = format!(
                "ComputeDomain {cd} is waiting for {} (the pods' {role}) to tell the domain's size",
                owner_display(key)
            );
            let v = r.verdict(Code::Unschedulable, text);
            return Decision::waiting(v, Pending::new(PendingReason::SizeUnknown, v));
        }
        if size.source == SizeSource::PodsSeen
            && let Some(at) = self.settles_at_ms(m.domain)
            && at > self.now_ms
        {
            let text = format!(
                "ComputeDomain {cd} has no declared size (no annotation, PodGroup, known owner or spec.numNodes): waiting {}s for its pods to stop arriving ({} seen so far)",
                self.args.size_settle_seconds, agg.pods
            );
            let v = r.verdict(Code::Unschedulable, text);
            return Decision::waiting(v, Pending::new(PendingReason::Settling, v));
        }
        if spanning {
            return self.span_decision(ask, &size, reservations, &cd, r);
        }
        let mut fits: Vec<(u32, StrId)> = Vec::new();
        let mut best: Option<(u32, StrId)> = None;
        let mut taken: Vec<(StrId, StrId)> = Vec::new();
        let computed;
        let reservations = match reservations {
            Some(given) => given,
            None => {
                computed = self.reservations();
                &computed[..]
            }
        };
        let mut held_for: Vec<(StrId, Reservation)> = Vec::new();
        let prio = self.domain_priority(m.domain);
        // Trays the segments of starting spanning domains still need (span.rs).
        let holds = self.span_holds(m.domain, reservations);
        for (&id, c) in &self.cliques {
            if c.usable == 0 || self.excluded.contains(&id) {
                continue;
            }
            let reserve = if size.size >= c.usable { 0 } else { self.args.reserve_trays_per_clique };
            if self.args.clique_exclusive
                && let Some(other) = self.other_domain_in(c, m.domain)
            {
                taken.push((id, other));
                continue;
            }
            if let Some(res) = self.held_against(reservations, id, m.domain, prio, remaining) {
                held_for.push((id, res));
                continue;
            }
            let cap = self
                .available(c, m.domain, ask.tray_size)
                .saturating_sub(c.promised)
                .saturating_sub(holds.get(&id).copied().unwrap_or(0))
                .saturating_sub(reserve);
            if best.is_none_or(|(b, _)| cap > b) {
                best = Some((cap, id));
            }
            if cap >= remaining {
                fits.push((cap - remaining, id));
            }
        }
        if fits.is_empty() {
            let mut reserve_note = if self.args.reserve_trays_per_clique > 0 {
                format!(" (reserveTraysPerClique keeps {} spare)", self.args.reserve_trays_per_clique)
            } else {
                String::new()
            };
            if !taken.is_empty() {
                reserve_note.push_str(" (cliqueExclusive: a clique that runs another ComputeDomain is not used)");
            }
            if !held_for.is_empty() {
                reserve_note.push_str(" (a clique reserved for a domain waiting longer is not used)");
            }
            if !self.excluded.is_empty() {
                reserve_note.push_str(&format!(" (cliques this policy leaves out: {})", self.excluded_reason));
            }
            let own = reservations.iter().find(|x| x.domain == m.domain);
            if let Some(own) = own {
                // Which clique moves as trays free up; the domain's Waiting Event names it.
                reserve_note.push_str(&format!(
                    "; an NVLink clique is reserved for it ({}; the ComputeDomain's Waiting Event names it): it starts there once enough trays free up",
                    own.place_text()
                ));
            }
            let sized = self.size_text(m.domain, &size);
            let own = own.map(|x| (x.clique, x.rank));
            let mut why = Pending::new(PendingReason::WaitingForTrays, Verdict::SUCCESS);
            why.needed = remaining;
            why.reserved = own;
            (why.offer, why.best) = match best {
                Some((cap, id)) => (cap, Some(id)),
                None => (0, None),
            };
            // Some clique could hold it (a domain no clique could ever hold spans: span.rs).
            why.reason = if own.is_some() {
                PendingReason::HoldsReservation
            } else if !held_for.is_empty() {
                PendingReason::ReservedElsewhere
            } else {
                PendingReason::WaitingForTrays
            };
            why.elsewhere = held_for.len() as u32;
            // No count that moves with the fleet (the best clique, what it offers): this text
            // is every retry's FailedScheduling message, and the events library folds only
            // identical messages into a series. The domain's Waiting Event (status.rs) says
            // which clique comes closest and what it offers.
            let verdict = r.verdict(
                Code::Unschedulable,
                format!(
                    "ComputeDomain {cd} needs {remaining} free trays in one NVLink clique ({sized}); no clique has that many free now{reserve_note}"
                ),
            );
            why.verdict = verdict;
            return Decision::waiting(verdict, why);
        }
        let no_clique = r.verdict(
            Code::UnschedulableAndUnresolvable,
            format!("node is not an NVLink tray: label {} is absent or has an empty clique ID", self.args.clique_label),
        );
        // Best fit first (worst fit under the test-only `worst-fit` feature); a clique reserved
        // for this domain (it heads its class) before all.
        let own = reservations.iter().find(|x| x.domain == m.domain).map(|x| x.clique);
        fits.sort_by(|a, b| {
            (own != Some(a.1))
                .cmp(&(own != Some(b.1)))
                .then(if cfg!(feature = "worst-fit") { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) })
                .then_with(|| self.str(a.1).cmp(self.str(b.1)))
        });
        let too_small = r.verdict(
            Code::Unschedulable,
            format!(
                "NVLink clique has fewer than {remaining} trays free for ComputeDomain {cd} ({}), after trays promised to starting domains and reserveTraysPerClique",
                self.size_text(m.domain, &size)
            ),
        );
        let mut d = Decision {
            status: Verdict::SUCCESS,
            exclusive: false,
            cliques: Vec::with_capacity(self.cliques.len()),
            other: no_clique,
            nodes: Vec::new(),
            pending: None,
        };
        let mut why = Pending::new(PendingReason::Placeable, Verdict::SUCCESS);
        (why.needed, why.offer, why.best) = (remaining, fits[0].0 + remaining, Some(fits[0].1));
        d.pending = Some(why);
        // Only the CANDIDATE_CLIQUES best-scoring fitting cliques (ties at the cut included) are
        // offered: the host turns them into the PreFilterResult, so Filter never sees the other
        // cliques' nodes, and their per-node verdicts are not worth making or sending.
        let scores: Vec<u32> = fits
            .iter()
            .enumerate()
            .map(|(rank, &(_, id))| self.scale(100u32.saturating_sub(rank as u32).max(1), ask, self.cliques.get(&id)))
            .collect();
        let mut ranked = scores.clone();
        ranked.sort_unstable_by(|a, b| b.cmp(a));
        let cut = ranked[ranked.len().min(CANDIDATE_CLIQUES) - 1];
        let passed_over = (fits.len() > CANDIDATE_CLIQUES).then(|| {
            r.verdict(
                Code::UnschedulableAndUnresolvable,
                format!(
                    "NVLink clique could hold ComputeDomain {cd}, but it is offered the {CANDIDATE_CLIQUES} best-fitting cliques first"
                ),
            )
        });
        for (&(_, id), &score) in fits.iter().zip(&scores) {
            let c = &self.cliques[&id];
            match passed_over {
                Some(v) if score < cut => {
                    d.cliques.push(CliqueVerdict { clique: id, verdict: v, score: 0, stable: false })
                }
                _ => {
                    d.cliques.push(CliqueVerdict { clique: id, verdict: Verdict::SUCCESS, score, stable: false });
                    self.node_overrides(c, ask, &cd, r, &mut d.nodes);
                }
            }
        }
        let fitting: alloc::collections::BTreeSet<StrId> = fits.iter().map(|f| f.1).collect();
        let taken: BTreeMap<StrId, StrId> = taken.into_iter().collect();
        let held_for: BTreeMap<StrId, Reservation> = held_for.into_iter().collect();
        for (&id, c) in &self.cliques {
            if fitting.contains(&id) || c.nodes.is_empty() {
                continue;
            }
            let verdict = match (taken.get(&id), held_for.get(&id)) {
                _ if self.excluded.contains(&id) => {
                    r.verdict(Code::UnschedulableAndUnresolvable, self.excluded_reason.clone())
                }
                (_, Some(res)) => r.verdict(
                    Code::Unschedulable,
                    format!(
                        "NVLink clique is reserved for {}, {}; other domains may only backfill trays it will not need",
                        self.reservation_text(res),
                        res.place_text()
                    ),
                ),
                (Some(&other), None) => r.verdict(
                    Code::Unschedulable,
                    format!(
                        "NVLink clique runs ComputeDomain {}; cliqueExclusive: at most one ComputeDomain per clique",
                        self.domain_name(other)
                    ),
                ),
                (None, None) => too_small,
            };
            d.cliques.push(CliqueVerdict { clique: id, verdict, score: 0, stable: false });
        }
        self.malformed_overrides(r, &mut d.nodes);
        d
    }

    /// PreFilter's result for a pod of a spanning domain: its plan's cliques that still need
    /// pods, exclusively (the host restricts the node set to them), with their busy trays'
    /// verdicts; or the reason it waits. `reservations` as in [`View::decide`].
    fn span_decision(
        &self,
        ask: Ask,
        size: &crate::size::Size,
        reservations: Option<&[Reservation]>,
        cd: &str,
        r: &mut Reasons,
    ) -> Decision {
        let computed;
        let reservations = match reservations {
            Some(given) => given,
            None => {
                computed = self.reservations();
                &computed[..]
            }
        };
        let s = self.decide_span(ask, size, reservations, r);
        if s.status.code != Code::Success {
            return match s.pending {
                Some(why) => Decision::waiting(s.status, why),
                None => Decision::status(s.status),
            };
        }
        let mut d = Decision {
            status: s.status,
            exclusive: true,
            cliques: s.cliques,
            other: s.other,
            nodes: Vec::new(),
            pending: s.pending,
        };
        for v in &d.cliques {
            if v.verdict.code == Code::Success
                && let Some(c) = self.cliques.get(&v.clique)
            {
                self.node_overrides(c, ask, cd, r, &mut d.nodes);
            }
        }
        self.malformed_overrides(r, &mut d.nodes);
        d
    }

    /// A ComputeDomain other than `domain` in clique `c`: one with a pod (placed or nominated)
    /// or the driver's node label on a tray there. A domain still starting there has its placed
    /// pods there, so it counts too.
    pub(crate) fn other_domain_in(&self, c: &Clique, domain: StrId) -> Option<StrId> {
        c.busy.values().flat_map(|s| s.holders.iter()).find(|&&h| h != domain).copied()
    }
}

#[cfg(test)]
mod tests {
    use alloc::format;
    use alloc::vec::Vec;

    use super::CANDIDATE_CLIQUES;
    use crate::testutil::{Fx, clique};
    use crate::verdict::Code;

    /// Five cliques of 18 with 1..=5 trays busy (each a domain's), and a new domain of 12 trays
    /// pending (`ns/new-0`): the 5-busy clique is its best fit.
    fn five_racks_and_a_new_domain_of_12() -> Fx {
        let mut f = Fx::new("");
        for c in 1..=5u32 {
            f.rack(&format!("r{c}"), c, 18);
            f.domain("ns", &format!("busy{c}"), &format!("uid-busy{c}"));
            for i in 0..c {
                f.pod("ns", &format!("busy{c}-{i}"), &format!("busy{c}"), |_| {});
                f.bind("ns", &format!("busy{c}-{i}"), &format!("r{c}-{i:02}"));
            }
        }
        f.domain("ns", "new", "uid-new");
        f.pod("ns", "new-0", "new", |p| p.size_hint = Some(12));
        f
    }

    /// A waiting domain's reason does not move with the fleet: a tray freed in the clique that
    /// comes closest changes what the domain's status offers, not the words every retry of
    /// every pod says (the events library folds only identical messages into one series).
    #[test]
    fn a_waiting_domains_reason_does_not_move_with_the_fleet() {
        let mut f = Fx::new("");
        f.rack("a", 1, 8);
        for i in 0..3 {
            f.domain("ns", &format!("s{i}"), &format!("uid-s{i}"));
            f.pod("ns", &format!("s{i}-0"), &format!("s{i}"), |p| p.size_hint = Some(1));
            f.bind("ns", &format!("s{i}-0"), &format!("a-{i:02}"));
        }
        f.domain("ns", "big", "uid-big");
        f.pod("ns", "big-0", "big", |p| p.size_hint = Some(7));
        let before = f.decide("ns", "big-0", 0);
        let offer = |f: &mut Fx| f.v.status(0).domains.iter().find(|d| f.v.str(d.uid) == "uid-big").map(|d| d.offer);
        assert_eq!(offer(&mut f), Some(5));
        f.remove_pod("ns", "s0-0");
        let after = f.decide("ns", "big-0", 0);
        assert_eq!(offer(&mut f), Some(6), "the status follows the fleet");
        assert_eq!(before.0, Code::Unschedulable);
        assert_eq!(before, after, "the reason moved with the fleet");
        assert!(before.1.ends_with("; no clique has that many free now"), "{}", before.1);
    }

    /// A policy that confines a domain to some cliques is offered the best fit among them, even
    /// when none of them ranks among the CANDIDATE_CLIQUES best of all (narrowing the shipped
    /// answer afterwards would leave it nothing); the others are refused with its reason, and
    /// when no kept clique has room the domain waits saying so.
    #[test]
    fn pre_filter_within_ranks_only_the_cliques_kept() {
        let mut f = five_racks_and_a_new_domain_of_12();
        let key = f.id("ns/new-0");
        let (c1, c2) = (clique(1), clique(2));
        let keep = |c: &str| c == c1 || c == c2;
        let r = f.v.pre_filter_within(key, &[], 0, &keep, "team racks only");
        assert_eq!(r.status.code, Code::Success);
        let offered: Vec<&str> =
            r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| f.v.str(c.clique)).collect();
        assert_eq!(offered, [c2.as_str(), c1.as_str()], "the kept cliques, best fit first");
        let refused: Vec<_> = r.cliques.iter().filter(|c| c.verdict.code != Code::Success).collect();
        assert_eq!(refused.len(), 3);
        for c in refused {
            assert_eq!(c.verdict.code, Code::UnschedulableAndUnresolvable);
            assert_eq!(r.reason(c.verdict), "team racks only");
        }
        // The plain decision is unchanged afterwards (the exclusion lasts one call).
        let plain = f.v.pre_filter(key, &[], 0);
        assert!(plain.cliques.iter().any(|c| c.verdict.code == Code::Success && f.v.str(c.clique) == clique(5)));
        // No kept clique with room (r5 has 13 trays free, the domain needs 14): it waits, naming
        // the policy's reason, though four other cliques could take it.
        f.domain("ns", "big", "uid-big");
        f.pod("ns", "big-0", "big", |p| p.size_hint = Some(14));
        let big = f.id("ns/big-0");
        assert_eq!(f.v.pre_filter(big, &[], 0).status.code, Code::Success);
        let r = f.v.pre_filter_within(big, &[], 0, &|c: &str| c == clique(5), "only r5");
        assert_eq!(r.status.code, Code::Unschedulable, "{}", r.reason(r.status));
        assert!(r.reason(r.status).ends_with("(cliques this policy leaves out: only r5)"), "{}", r.reason(r.status));
    }

    /// A new domain is offered its CANDIDATE_CLIQUES best-fitting cliques, with the per-node
    /// verdicts of their busy trays; a clique that fits but ranks lower is passed over (its
    /// nodes are outside the PreFilterResult) and costs no per-node verdict.
    #[test]
    fn only_the_best_fitting_cliques_are_offered() {
        // Five cliques of 18 with 1..=5 trays busy: the 5-busy clique is the best fit for 12.
        let mut f = five_racks_and_a_new_domain_of_12();
        let key = f.id("ns/new-0");
        let r = f.v.pre_filter(key, &[], 0);
        assert_eq!(r.status.code, Code::Success);
        let offered: Vec<&str> =
            r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| f.v.str(c.clique)).collect();
        let (c3, c4, c5) = (clique(3), clique(4), clique(5));
        assert_eq!(offered.len(), CANDIDATE_CLIQUES);
        assert_eq!(offered, [c5.as_str(), c4.as_str(), c3.as_str()], "best fit first");
        let passed: Vec<_> = r.cliques.iter().filter(|c| c.verdict.code != Code::Success).collect();
        assert_eq!(passed.len(), 2);
        assert!(
            r.reason(passed[0].verdict).contains("offered the 3 best-fitting cliques first"),
            "{}",
            r.reason(passed[0].verdict)
        );
        // Busy trays get verdicts only in the offered cliques (3 + 4 + 5 of them).
        assert_eq!(r.nodes.len(), 12, "{:?}", r.nodes);
    }

    /// `cliqueExclusive`: a new domain skips every clique where another domain has a pod or the
    /// driver's label, even when it would fit there; without the arg it takes the best fit.
    #[test]
    fn clique_exclusive_keeps_one_domain_per_clique() {
        for exclusive in [false, true] {
            let mut f = Fx::new(if exclusive { r#"{"cliqueExclusive": true}"# } else { "" });
            f.rack("a", 1, 8);
            f.rack("b", 2, 8);
            f.domain("ns", "old", "uid-old");
            f.pod("ns", "old-0", "old", |p| p.size_hint = Some(1));
            f.bind("ns", "old-0", "a-00");
            f.domain("ns", "new", "uid-new");
            f.pod("ns", "new-0", "new", |p| p.size_hint = Some(4));
            let key = f.id("ns/new-0");
            let r = f.v.pre_filter(key, &[], 0);
            assert_eq!(r.status.code, Code::Success);
            let verdict_of = |c: u32| r.cliques.iter().find(|v| f.v.str(v.clique) == clique(c)).map(|v| v.verdict);
            let a = verdict_of(1).expect("clique a listed");
            if exclusive {
                assert_eq!(a.code, Code::Unschedulable);
                assert_eq!(
                    r.reason(a),
                    "NVLink clique runs ComputeDomain ns/old; cliqueExclusive: at most one ComputeDomain per clique"
                );
                assert_eq!(verdict_of(2).map(|v| v.code), Some(Code::Success));
            } else {
                assert_eq!(a.code, Code::Success, "best fit: 7 free trays in a, 8 in b");
            }
        }
        // Every clique taken: the pod waits, and the reason says why.
        let mut f = Fx::new(r#"{"cliqueExclusive": true}"#);
        f.rack("a", 1, 8);
        f.domain("ns", "old", "uid-old");
        f.pod("ns", "old-0", "old", |p| p.size_hint = Some(1));
        f.bind("ns", "old-0", "a-00");
        f.domain("ns", "new", "uid-new");
        f.pod("ns", "new-0", "new", |p| p.size_hint = Some(4));
        let (code, reason) = f.decide("ns", "new-0", 0);
        assert_eq!(code, Code::Unschedulable);
        assert!(
            reason.ends_with("(cliqueExclusive: a clique that runs another ComputeDomain is not used)"),
            "{reason}"
        );
    }
}
