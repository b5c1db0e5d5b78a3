//! The policy's incrementally maintained view of the cluster.
//!
//! Raw facts come in as [`Delta`]s. Everything the decisions need is kept aggregated per clique
//! and per ComputeDomain, so deciding for one pod costs time in the number of cliques, not nodes.
//! Each node and each pod remembers what it last contributed to those aggregates
//! (`NodeSummary`, `PodContrib`); a change subtracts the old contribution and adds the new
//! one, which keeps the bookkeeping exact however facts arrive.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::args::Args;
use crate::facts::*;
use crate::trays::{Clique, NodeEntry};
use crate::{Error, Result};

/// A claim or template key: `(namespace, name)`.
pub(crate) type ObjKey = (StrId, StrId);

/// A pod's resolved ComputeDomain membership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    pub domain: StrId,
    /// The pod is an IMEX daemon, not a workload pod.
    pub daemon: bool,
    /// Where the membership came from (for reasons): `(namespace, name)` of a claim or template.
    pub via: ObjKey,
    pub via_template: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct PodEntry {
    pub fact: PodFact,
    /// Membership, or the reason it cannot be resolved.
    pub member: core::result::Result<Option<Member>, String>,
    /// GPUs the pod takes on its node.
    pub gpu_use: GpuDemand,
    /// Claims and templates this pod's resolution read (for re-resolution when they change).
    claim_refs: Vec<ObjKey>,
    template_refs: Vec<ObjKey>,
    contrib: PodContrib,
}

/// What one pod adds to its ComputeDomain's aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct PodContrib {
    /// The domain, when the pod is a workload pod of one.
    domain: Option<StrId>,
    /// The clique of its node when bound or assumed there.
    placed_in: Option<StrId>,
    /// The clique of its node when only nominated there (preemption made room for it).
    nominated_in: Option<StrId>,
    size_hint: Option<u32>,
    /// Owner key whose size counts for the domain: the PodGroup, else the controller.
    owner: Option<StrId>,
    /// `metadata.creationTimestamp` (Unix ms, 0 when unknown).
    created_ms: i64,
    /// `spec.priority`.
    priority: i32,
    /// How long after it starts the pod is gone at the latest (none without a deadline).
    runtime_limit_ms: Option<i64>,
}

/// Per-ComputeDomain aggregates.
#[derive(Debug, Clone, Default)]
pub(crate) struct Domain {
    /// Known (non-terminal) workload pods.
    pub pods: u32,
    /// Bound or assumed workload pods by clique.
    pub placed: BTreeMap<StrId, u32>,
    /// Nominated workload pods by clique: preemption made room for the domain there.
    pub nominated: BTreeMap<StrId, u32>,
    /// Size annotations of its pods: `(size, pod key)`.
    pub pod_hints: BTreeSet<(u32, StrId)>,
    /// Owners of its pods (owner key -> pods naming it): a pod's PodGroup, else its controller.
    pub owners: BTreeMap<StrId, u32>,
    /// Creation times of its pods (Unix ms -> pods created then).
    pub created: BTreeMap<i64, u32>,
    /// Priorities of its pods (priority -> pods).
    pub priorities: BTreeMap<i32, u32>,
    /// Runtime limits of its pods (limit, none for a pod without a deadline -> pods).
    pub limits: BTreeMap<Option<i64>, u32>,
    /// What this domain adds to a clique's `promised`.
    promise: Option<(StrId, u32)>,
}

impl Domain {
    /// No pod contributes to it any more.
    fn is_empty(&self) -> bool {
        self.pods == 0
            && self.placed.is_empty()
            && self.nominated.is_empty()
            && self.pod_hints.is_empty()
            && self.owners.is_empty()
    }

    pub fn placed_total(&self) -> u32 {
        self.placed.values().sum()
    }

    /// The priority that ranks the domain, from its aggregates: the largest `spec.priority` of
    /// the PodGroups its pods name when any sets one, else its pods' largest (0 without pods).
    pub fn priority(&self, owners: &BTreeMap<StrId, OwnerFact>) -> i32 {
        let groups = self.owners.keys().filter_map(|k| owners.get(k)?.priority).max();
        groups.unwrap_or_else(|| self.priorities.keys().next_back().copied().unwrap_or(0))
    }

    /// The clique holding most of its placed pods (ties: smallest id, i.e. first interned).
    pub fn home(&self) -> Option<StrId> {
        self.placed.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(c, _)| *c)
    }

    /// The clique holding most of its nominated pods, for a domain that has placed none: the
    /// clique a gang preemption freed for it (ties: smallest id).
    pub fn nominated_home(&self) -> Option<StrId> {
        self.nominated.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(c, _)| *c)
    }

    /// The clique the domain is bound to: where it started, else where preemption nominated it.
    pub fn target(&self) -> Option<StrId> {
        self.home().or_else(|| self.nominated_home())
    }

    /// What this domain promises its target clique: `(clique, trays)`.
    pub fn promise(&self) -> Option<(StrId, u32)> {
        self.promise
    }
}

/// The view.
#[derive(Debug, Default)]
pub struct View {
    pub(crate) args: Args,
    pub(crate) strings: Vec<String>,
    pub(crate) nodes: BTreeMap<StrId, NodeEntry>,
    pub(crate) pods: BTreeMap<StrId, PodEntry>,
    pub(crate) claims: BTreeMap<ObjKey, ClaimFact>,
    pub(crate) templates: BTreeMap<ObjKey, TemplateFact>,
    pub(crate) domain_facts: BTreeMap<StrId, DomainFact>,
    /// Workload objects that say how many pods they will run, by owner key.
    pub(crate) owners: BTreeMap<StrId, OwnerFact>,
    /// The host's clock at the current decision (Unix ms), set by [`View::pre_filter`].
    pub(crate) now_ms: i64,
    pods_by_claim: BTreeMap<ObjKey, BTreeSet<StrId>>,
    pods_by_template: BTreeMap<ObjKey, BTreeSet<StrId>>,
    pub(crate) cliques: BTreeMap<StrId, Clique>,
    pub(crate) domains: BTreeMap<StrId, Domain>,
    /// Usable trays of the whole cluster by GPU count.
    pub(crate) tray_sizes: BTreeMap<u32, u32>,
    /// Nodes whose clique label is malformed.
    pub(crate) malformed: BTreeSet<StrId>,
    /// Cliques a wrapping policy keeps out of the current decision, and why
    /// ([`View::pre_filter_within`]); empty otherwise.
    pub(crate) excluded: BTreeSet<StrId>,
    pub(crate) excluded_reason: String,
}

pub(crate) fn bump<K: Ord>(m: &mut BTreeMap<K, u32>, k: K, add: bool) {
    if add {
        *m.entry(k).or_default() += 1;
    } else if let Some(v) = m.get_mut(&k) {
        *v -= 1;
        if *v == 0 {
            m.remove(&k);
        }
    }
}

impl View {
    /// A view with these arguments.
    pub fn new(args: Args) -> Self {
        View { args, ..Default::default() }
    }

    /// The current arguments.
    pub fn args(&self) -> &Args {
        &self.args
    }

    /// Replaces the arguments. Aggregates depend on the IMEX mode only at decision time, so this
    /// needs no rebuild.
    pub fn set_args(&mut self, args: Args) {
        self.args = args;
    }

    /// The text of an interned string ("" for an unknown id).
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }

    /// Applies deltas in order. On an error the deltas before the bad one stay applied.
    pub fn apply(&mut self, deltas: impl IntoIterator<Item = Delta>) -> Result<()> {
        for d in deltas {
            self.apply_one(d)?;
        }
        Ok(())
    }

    fn check(&self, ids: &[StrId]) -> Result<()> {
        match ids.iter().find(|&&id| id as usize >= self.strings.len()) {
            Some(id) => Err(Error::InvalidInput(format!("string id {id} was never sent"))),
            None => Ok(()),
        }
    }

    fn apply_one(&mut self, d: Delta) -> Result<()> {
        match d {
            Delta::Strings(list) => {
                for (id, s) in list {
                    let i = id as usize;
                    if i > self.strings.len() + (1 << 20) {
                        return Err(Error::InvalidInput(format!("string id {id} leaves a gap too large")));
                    }
                    if self.strings.len() <= i {
                        self.strings.resize(i + 1, String::new());
                    }
                    self.strings[i] = s;
                }
            }
            Delta::UpsertNode(n) => {
                self.check(&[n.name])?;
                self.check(&n.clique_label.iter().chain(&n.domain_label).copied().collect::<Vec<_>>())?;
                let name = n.name;
                self.nodes.entry(name).or_default().fact = Some(n);
                self.refresh_node(name);
            }
            Delta::RemoveNode(name) => {
                if let Some(e) = self.nodes.get_mut(&name) {
                    e.fact = None;
                    self.refresh_node(name);
                }
            }
            Delta::UpsertPod(p) => {
                let mut ids = alloc::vec![p.key, p.namespace];
                ids.extend(p.node.iter().chain(&p.pod_group).chain(&p.owner));
                for c in &p.claims {
                    ids.push(c.name);
                    ids.extend(c.template.iter().chain(&c.claim).chain(&c.generated));
                }
                self.check(&ids)?;
                self.unlink_pod(p.key);
                self.link_pod(p);
            }
            Delta::RemovePod(key) => {
                self.unlink_pod(key);
            }
            Delta::UpsertClaim(c) => {
                self.check(&[c.namespace, c.name])?;
                self.check(&c.domain.iter().copied().collect::<Vec<_>>())?;
                let k = (c.namespace, c.name);
                self.claims.insert(k, c);
                self.relink(self.pods_by_claim.get(&k).cloned());
            }
            Delta::RemoveClaim(ns, name) => {
                if self.claims.remove(&(ns, name)).is_some() {
                    self.relink(self.pods_by_claim.get(&(ns, name)).cloned());
                }
            }
            Delta::UpsertTemplate(t) => {
                self.check(&[t.namespace, t.name])?;
                self.check(&t.domain.iter().copied().collect::<Vec<_>>())?;
                let k = (t.namespace, t.name);
                self.templates.insert(k, t);
                self.relink(self.pods_by_template.get(&k).cloned());
            }
            Delta::RemoveTemplate(ns, name) => {
                if self.templates.remove(&(ns, name)).is_some() {
                    self.relink(self.pods_by_template.get(&(ns, name)).cloned());
                }
            }
            Delta::UpsertDomain(d) => {
                self.check(&[d.uid, d.namespace, d.name])?;
                let uid = d.uid;
                self.domain_facts.insert(uid, d);
                self.refresh_domain(uid);
            }
            Delta::RemoveDomain(uid) => {
                if self.domain_facts.remove(&uid).is_some() {
                    self.refresh_domain(uid);
                }
            }
            Delta::UpsertOwner(o) => {
                self.check(&[o.key, o.source])?;
                let key = o.key;
                self.owners.insert(key, o);
                self.refresh_owner(key);
            }
            Delta::RemoveOwner(key) => {
                if self.owners.remove(&key).is_some() {
                    self.refresh_owner(key);
                }
            }
            Delta::Reset => {
                let args = core::mem::take(&mut self.args);
                *self = View::new(args);
            }
        }
        Ok(())
    }

    /// Recomputes the promises of the domains whose pods name this owner.
    fn refresh_owner(&mut self, key: StrId) {
        let domains: Vec<StrId> =
            self.domains.iter().filter(|(_, d)| d.owners.contains_key(&key)).map(|(uid, _)| *uid).collect();
        for d in domains {
            self.refresh_domain(d);
        }
    }

    /// Re-resolves these pods (a claim or template they read changed).
    fn relink(&mut self, pods: Option<BTreeSet<StrId>>) {
        for key in pods.into_iter().flatten() {
            if let Some(fact) = self.unlink_pod(key) {
                self.link_pod(fact);
            }
        }
    }

    /// Removes a pod and everything it contributed; returns its fact.
    pub(crate) fn unlink_pod(&mut self, key: StrId) -> Option<PodFact> {
        let entry = self.pods.remove(&key)?;
        for k in &entry.claim_refs {
            if let Some(s) = self.pods_by_claim.get_mut(k) {
                s.remove(&key);
                if s.is_empty() {
                    self.pods_by_claim.remove(k);
                }
            }
        }
        for k in &entry.template_refs {
            if let Some(s) = self.pods_by_template.get_mut(k) {
                s.remove(&key);
                if s.is_empty() {
                    self.pods_by_template.remove(k);
                }
            }
        }
        self.add_pod_contrib(key, &entry.contrib, false);
        if let Some(d) = entry.contrib.domain {
            self.refresh_domain(d);
        }
        if let (Some(node), true) = (entry.fact.node, entry.fact.placement != Placement::Pending) {
            if let Some(n) = self.nodes.get_mut(&node) {
                n.pods.remove(&key);
            }
            self.refresh_node(node);
        }
        Some(entry.fact)
    }

    /// Adds a pod (not present) and its contributions.
    pub(crate) fn link_pod(&mut self, fact: PodFact) {
        let key = fact.key;
        let (member, gpu_use, claim_refs, template_refs) = self.resolve(&fact);
        for k in &claim_refs {
            self.pods_by_claim.entry(*k).or_default().insert(key);
        }
        for k in &template_refs {
            self.pods_by_template.entry(*k).or_default().insert(key);
        }
        let placed_node = fact.node.filter(|_| fact.placement != Placement::Pending);
        let entry = PodEntry { fact, member, gpu_use, claim_refs, template_refs, contrib: PodContrib::default() };
        self.pods.insert(key, entry);
        if let Some(node) = placed_node {
            self.nodes.entry(node).or_default().pods.insert(key);
            self.refresh_node(node);
        }
        self.refresh_pod_contrib(key);
    }

    fn pod_contrib(&self, e: &PodEntry) -> PodContrib {
        let Ok(Some(m)) = e.member else { return PodContrib::default() };
        if m.daemon {
            return PodContrib::default();
        }
        let placed = matches!(e.fact.placement, Placement::Assumed | Placement::Bound);
        let clique_of =
            |on: bool| e.fact.node.filter(|_| on).and_then(|n| self.nodes.get(&n)).and_then(|n| n.summary.clique);
        PodContrib {
            domain: Some(m.domain),
            placed_in: clique_of(placed),
            nominated_in: clique_of(e.fact.placement == Placement::Nominated),
            size_hint: e.fact.size_hint,
            owner: e.fact.pod_group.or(e.fact.owner),
            created_ms: e.fact.created_ms,
            priority: e.fact.priority,
            runtime_limit_ms: e.fact.runtime_limit_ms,
        }
    }

    fn add_pod_contrib(&mut self, key: StrId, c: &PodContrib, add: bool) {
        let Some(d) = c.domain else { return };
        let dom = self.domains.entry(d).or_default();
        if add {
            dom.pods += 1;
        } else {
            dom.pods -= 1;
        }
        if let Some(cl) = c.placed_in {
            bump(&mut dom.placed, cl, add);
        }
        if let Some(cl) = c.nominated_in {
            bump(&mut dom.nominated, cl, add);
        }
        if let Some(h) = c.size_hint {
            if add {
                dom.pod_hints.insert((h, key));
            } else {
                dom.pod_hints.remove(&(h, key));
            }
        }
        if let Some(o) = c.owner {
            bump(&mut dom.owners, o, add);
        }
        bump(&mut dom.created, c.created_ms, add);
        bump(&mut dom.priorities, c.priority, add);
        bump(&mut dom.limits, c.runtime_limit_ms, add);
    }

    pub(crate) fn refresh_pod_contrib(&mut self, key: StrId) {
        let Some(e) = self.pods.get(&key) else { return };
        let new = self.pod_contrib(e);
        if new == e.contrib {
            return;
        }
        let old = core::mem::replace(&mut self.pods.get_mut(&key).expect("present").contrib, new.clone());
        self.add_pod_contrib(key, &old, false);
        self.add_pod_contrib(key, &new, true);
        for d in [old.domain, new.domain].into_iter().flatten() {
            self.refresh_domain(d);
        }
    }

    /// Recomputes what a domain promises to its target clique (its home, else the clique a
    /// preemption nominated it to): the trays it still needs there beyond those its placed and
    /// nominated pods already hold. A domain larger than one clique (segments, span.rs)
    /// promises its home clique all it still needs, more than that clique can hold: the excess
    /// keeps others off the home clique's free trays, which its segment there needs first, and
    /// its other segments' trays are held at decision time (`View::span_holds`). The promise
    /// depends only on the domain's own pods and size, so it stays exact incrementally.
    fn refresh_domain(&mut self, uid: StrId) {
        let Some(agg) = self.domains.get(&uid) else { return };
        let new = agg.target().and_then(|target| {
            let holding = agg.placed_total() + agg.nominated.get(&target).copied().unwrap_or(0);
            let outstanding = self.size_of(uid).size.saturating_sub(holding);
            (outstanding > 0).then_some((target, outstanding))
        });
        let old = agg.promise;
        if old == new {
            if agg.is_empty() {
                self.domains.remove(&uid);
            }
            return;
        }
        if let Some((c, n)) = old
            && let Some(cl) = self.cliques.get_mut(&c)
        {
            cl.promised -= n;
            if cl.promised == 0 && cl.nodes.is_empty() {
                self.cliques.remove(&c);
            }
        }
        if let Some((c, n)) = new {
            self.cliques.entry(c).or_default().promised += n;
        }
        let agg = self.domains.get_mut(&uid).expect("present");
        agg.promise = new;
        if agg.is_empty() && new.is_none() {
            self.domains.remove(&uid);
        }
    }

    /// Checks every aggregate against a recomputation from the facts (tests and debugging).
    #[doc(hidden)]
    pub fn assert_consistent(&self) {
        let mut fresh = View::new(self.args.clone());
        fresh.strings = self.strings.clone();
        let mut deltas: Vec<Delta> = Vec::new();
        deltas.extend(self.claims.values().cloned().map(Delta::UpsertClaim));
        deltas.extend(self.templates.values().cloned().map(Delta::UpsertTemplate));
        deltas.extend(self.domain_facts.values().cloned().map(Delta::UpsertDomain));
        deltas.extend(self.owners.values().cloned().map(Delta::UpsertOwner));
        deltas.extend(self.nodes.values().filter_map(|n| n.fact.clone()).map(Delta::UpsertNode));
        deltas.extend(self.pods.values().map(|p| Delta::UpsertPod(p.fact.clone())));
        fresh.apply(deltas).expect("replay");
        let dump = |v: &View| {
            let cliques: Vec<_> = v
                .cliques
                .iter()
                .map(|(k, c)| {
                    (
                        *k,
                        c.nodes.clone(),
                        c.usable,
                        c.sizes.clone(),
                        c.free.clone(),
                        c.idle.clone(),
                        c.held_idle.clone(),
                        c.idle_with_workload.clone(),
                        c.busy.clone(),
                        c.promised,
                    )
                })
                .collect();
            let domains: Vec<_> = v
                .domains
                .iter()
                .map(|(k, d)| {
                    (
                        *k,
                        d.pods,
                        d.placed.clone(),
                        d.nominated.clone(),
                        d.pod_hints.clone(),
                        d.owners.clone(),
                        d.created.clone(),
                        d.priorities.clone(),
                        d.promise,
                    )
                })
                .collect();
            format!("{cliques:?}\n{domains:?}\n{:?}\n{:?}", v.tray_sizes, v.malformed)
        };
        assert_eq!(dump(self), dump(&fresh), "incremental aggregates differ from a fresh rebuild");
    }
}
