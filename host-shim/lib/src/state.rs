//! The host's facts about every object it was given, and the deltas each change emits. Objects
//! arrive as [`Record`]s (from JSON through `extract`, or decoded from a packed batch: one
//! path); the state keeps the current fact of each and writes the deltas that bring a guest
//! from the previous state to the new one, strings first, in the WIT shape the guest takes
//! (converted once, here).

use std::collections::{BTreeSet, HashMap};

use cdplace_policy::{
    ClaimFact, ClaimRef, Delta, DomainFact, NodeFact, OverlayOp, OwnerFact, Placement, PodFact, StrId, TemplateFact,
};

use crate::convert;
use crate::extract::{Kind, Object};
use crate::facts::Record;
use crate::interner::Interner;
use crate::overlay::Overlay;
use crate::wit;

/// The owner key of a PodGroup, as pods name it.
fn pod_group_key(namespace: &str, name: &str) -> String {
    crate::extract::owner_key("PodGroup", namespace, name)
}

/// The key of a pod: `namespace/name`.
fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

type Key = (String, String);

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_string(), name.to_string())
}

/// What the host keeps of a pod besides its fact.
#[derive(Debug, Clone)]
struct PodState {
    fact: PodFact,
    /// Bound or nominated placement from the object.
    node_name: Option<String>,
    nominated: Option<String>,
    /// Set by Reserve until the pod is bound or Unreserve.
    assumed: Option<String>,
    /// The node the pod is indexed under in `pods_by_node` (its bound, assumed or nominated node).
    indexed: Option<String>,
}

/// What a pod's claim reference names: a ResourceClaim (shared or generated) or a template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Ref {
    Claim(Key),
    Template(Key),
}

/// A pod's ComputeDomain membership as the host resolves it (see [`State::member`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Membership {
    /// No claim of the pod names a ComputeDomain.
    None,
    /// A claim or template is missing, or two domains are named: the policy rejects the pod and
    /// it holds nothing.
    Invalid,
    /// A workload pod (`daemon` false) or an IMEX daemon of the domain with this UID.
    Member { domain: StrId, daemon: bool },
}

/// A node-local ResourceSlice of the GPU driver.
#[derive(Debug, Clone)]
struct SliceState {
    node: String,
    pool: String,
    generation: i64,
    gpus: u32,
}

#[derive(Debug, Clone)]
struct NodeState {
    clique_label: Option<String>,
    domain_label: Option<String>,
    unschedulable: bool,
    extended_gpus: u32,
}

/// Every object's current facts.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub interner: Interner,
    nodes: HashMap<String, NodeState>,
    nodes_by_clique: HashMap<String, BTreeSet<String>>,
    /// Node-local slices of the GPU driver by name, and their names by node and by pool. A
    /// node's slice GPUs are those of its slices of the newest generation of their pool (DRA
    /// semantics: a driver republishing a pool bumps its generation, and the older slices are
    /// stale until they are deleted), summed when asked for, so no running total can drift.
    slices: HashMap<String, SliceState>,
    slices_by_node: HashMap<String, BTreeSet<String>>,
    slices_by_pool: HashMap<String, BTreeSet<String>>,
    pods: HashMap<Key, PodState>,
    owners: HashMap<String, OwnerFact>,
    claims: HashMap<Key, ClaimFact>,
    templates: HashMap<Key, TemplateFact>,
    domains: HashMap<Key, DomainFact>,
    /// Indexes for the safety checker (`crate::safety`), so it reads a node's pods and a domain's
    /// pods without visiting every pod: pods by the node they are bound, assumed or nominated to;
    /// pods by the claims and templates they reference; and those claims and templates by the
    /// ComputeDomain UID they name.
    pods_by_node: HashMap<String, BTreeSet<Key>>,
    pods_by_ref: HashMap<Ref, BTreeSet<Key>>,
    refs_by_domain: HashMap<String, BTreeSet<Ref>>,
}

impl State {
    /// Journals the strings interned since the last flush.
    pub fn flush(&mut self, out: &mut Vec<wit::Delta>) {
        let fresh = self.interner.take_fresh();
        if !fresh.is_empty() {
            out.push(wit::Delta::Strings(fresh));
        }
    }

    fn emit(&mut self, out: &mut Vec<wit::Delta>, d: Delta) {
        self.flush(out);
        out.push(convert::delta(&d));
    }

    fn node_fact(&mut self, name: &str) -> Option<NodeFact> {
        let n = self.nodes.get(name)?.clone();
        let gpus = n.extended_gpus.max(self.slice_gpus(name));
        Some(NodeFact {
            name: self.interner.id(name),
            clique_label: n.clique_label.as_deref().map(|l| self.interner.id(l)),
            unschedulable: n.unschedulable,
            gpus,
            domain_label: n.domain_label.as_deref().map(|l| self.interner.id(l)),
        })
    }

    /// The newest generation among a pool's slices.
    fn newest_generation(&self, pool: &str) -> Option<i64> {
        self.slices_by_pool.get(pool)?.iter().filter_map(|s| self.slices.get(s)).map(|s| s.generation).max()
    }

    /// The GPUs of a node's slices that count: each of the newest generation of its pool. The
    /// sum saturates at u32::MAX (more GPUs than that is as good as unlimited to the policy)
    /// rather than wrap.
    fn slice_gpus(&self, node: &str) -> u32 {
        let Some(names) = self.slices_by_node.get(node) else { return 0 };
        names
            .iter()
            .filter_map(|s| self.slices.get(s))
            .filter(|s| Some(s.generation) == self.newest_generation(&s.pool))
            .fold(0u32, |total, s| total.saturating_add(s.gpus))
    }

    /// The nodes of a pool's slices.
    fn pool_nodes(&self, pool: &str, into: &mut BTreeSet<String>) {
        for s in self.slices_by_pool.get(pool).into_iter().flatten() {
            if let Some(s) = self.slices.get(s) {
                into.insert(s.node.clone());
            }
        }
    }

    /// Replaces (or with `new` None, removes) a slice, re-emitting the nodes whose count may
    /// change: the slice's old and new node, and every node of a pool whose newest generation
    /// moved (superseded by the new slice, or back to an older one when the newest went).
    fn set_slice(&mut self, out: &mut Vec<wit::Delta>, name: String, new: Option<SliceState>) {
        let mut pools: Vec<String> = Vec::with_capacity(2);
        pools.extend(self.slices.get(&name).map(|s| s.pool.clone()));
        pools.extend(new.as_ref().map(|s| s.pool.clone()).filter(|p| !pools.contains(p)));
        let before: Vec<Option<i64>> = pools.iter().map(|p| self.newest_generation(p)).collect();
        let mut nodes = BTreeSet::new();
        if let Some(old) = self.slices.remove(&name) {
            drop_name(&mut self.slices_by_node, &old.node, &name);
            drop_name(&mut self.slices_by_pool, &old.pool, &name);
            nodes.insert(old.node);
        }
        if let Some(s) = new {
            self.slices_by_node.entry(s.node.clone()).or_default().insert(name.clone());
            self.slices_by_pool.entry(s.pool.clone()).or_default().insert(name.clone());
            nodes.insert(s.node.clone());
            self.slices.insert(name, s);
        }
        for (pool, before) in pools.iter().zip(before) {
            if self.newest_generation(pool) != before {
                self.pool_nodes(pool, &mut nodes);
            }
        }
        for n in nodes {
            self.emit_node(out, &n);
        }
    }

    fn emit_node(&mut self, out: &mut Vec<wit::Delta>, name: &str) {
        if let Some(f) = self.node_fact(name) {
            self.emit(out, Delta::UpsertNode(f));
        }
    }

    /// Recomputes a pod's placement from its state and journals its fact.
    fn emit_pod(&mut self, out: &mut Vec<wit::Delta>, k: &Key) {
        let Some(p) = self.pods.get(k) else { return };
        let (placement, node) = match (&p.node_name, &p.assumed, &p.nominated) {
            (Some(n), _, _) => (Placement::Bound, Some(n.clone())),
            (None, Some(n), _) => (Placement::Assumed, Some(n.clone())),
            (None, None, Some(n)) => (Placement::Nominated, Some(n.clone())),
            _ => (Placement::Pending, None),
        };
        if p.indexed != node {
            let old = p.indexed.clone();
            if let Some(old) = old {
                drop_key(&mut self.pods_by_node, &old, k);
            }
            if let Some(n) = &node {
                self.pods_by_node.entry(n.clone()).or_default().insert(k.clone());
            }
            self.pods.get_mut(k).expect("present").indexed = node.clone();
        }
        let node = node.map(|n| self.interner.id(&n));
        let p = self.pods.get_mut(k).expect("present");
        p.fact.placement = placement;
        p.fact.node = node;
        let fact = p.fact.clone();
        self.emit(out, Delta::UpsertPod(fact));
    }

    /// Applies one record, writing the deltas it causes to `out`.
    pub fn apply(&mut self, out: &mut Vec<wit::Delta>, record: Record) {
        match record {
            Record::Upsert(o) => self.upsert(out, o),
            Record::Remove { kind, namespace, name } => self.remove(out, kind, &namespace, &name),
        }
    }

    fn upsert(&mut self, out: &mut Vec<wit::Delta>, obj: Object) {
        match obj {
            Object::Node { name, clique_label, domain_label, unschedulable, gpus } => {
                if let Some(old) = self.nodes.get(&name).and_then(|n| n.clique_label.clone())
                    && let Some(set) = self.nodes_by_clique.get_mut(&old)
                {
                    set.remove(&name);
                }
                if let Some(l) = &clique_label {
                    self.nodes_by_clique.entry(l.clone()).or_default().insert(name.clone());
                }
                let node = NodeState { clique_label, domain_label, unschedulable, extended_gpus: gpus };
                self.nodes.insert(name.clone(), node);
                self.emit_node(out, &name);
            }
            Object::Pod { namespace, name, terminal: true, .. } => self.remove(out, Kind::Pod, &namespace, &name),
            Object::Pod {
                namespace,
                name,
                node_name,
                nominated_node_name,
                claims,
                gpus,
                size_hint,
                pod_group,
                owner,
                created_ms,
                priority,
                runtime_limit_ms,
                started_ms,
                ..
            } => {
                let id = |i: &mut Interner, s: &Option<String>| s.as_deref().map(|s| i.id(s));
                let i = &mut self.interner;
                let claims = claims
                    .iter()
                    .map(|c| ClaimRef {
                        name: i.id(&c.name),
                        template: id(i, &c.template),
                        claim: id(i, &c.claim),
                        generated: id(i, &c.generated),
                    })
                    .collect();
                let fact = PodFact {
                    key: i.id(&pod_key(&namespace, &name)),
                    namespace: i.id(&namespace),
                    placement: Placement::Pending,
                    node: None,
                    claims,
                    gpus,
                    size_hint,
                    pod_group: pod_group.map(|g| i.id(&pod_group_key(&namespace, &g))),
                    owner: id(i, &owner),
                    created_ms,
                    priority,
                    runtime_limit_ms,
                    started_ms,
                };
                let k = key(&namespace, &name);
                // A bound pod is no longer merely assumed.
                let old = self.pods.get(&k);
                let assumed = old.and_then(|o| o.assumed.clone()).filter(|_| node_name.is_none());
                let indexed = old.and_then(|o| o.indexed.clone());
                if let Some(old) = old.map(|o| self.refs_of(&o.fact)) {
                    for r in old {
                        drop_key(&mut self.pods_by_ref, &r, &k);
                    }
                }
                for r in refs_of(&self.interner, &fact) {
                    self.pods_by_ref.entry(r).or_default().insert(k.clone());
                }
                let state = PodState { fact, node_name, nominated: nominated_node_name, assumed, indexed };
                self.pods.insert(k.clone(), state);
                self.emit_pod(out, &k);
            }
            Object::Claim { namespace, name, domain, daemon, gpus, allocated_gpus } => {
                let (ns, n, domain) = self.claim_ids(&namespace, &name, domain.as_deref());
                let fact = ClaimFact { namespace: ns, name: n, domain, daemon, gpus, allocated_gpus };
                let k = (namespace, name);
                let old = self.claims.get(&k).and_then(|c| c.domain);
                self.index_ref(Ref::Claim(k.clone()), old, fact.domain);
                self.claims.insert(k, fact.clone());
                self.emit(out, Delta::UpsertClaim(fact));
            }
            Object::Template { namespace, name, domain, daemon, gpus } => {
                let (ns, n, domain) = self.claim_ids(&namespace, &name, domain.as_deref());
                let fact = TemplateFact { namespace: ns, name: n, domain, daemon, gpus };
                let k = (namespace, name);
                let old = self.templates.get(&k).and_then(|t| t.domain);
                self.index_ref(Ref::Template(k.clone()), old, fact.domain);
                self.templates.insert(k, fact.clone());
                self.emit(out, Delta::UpsertTemplate(fact));
            }
            Object::Slice { name, node, gpus, pool, generation } => {
                let new = node.map(|node| SliceState { node, pool, generation, gpus });
                self.set_slice(out, name, new);
            }
            Object::Domain { namespace, name, uid, size_hint, num_nodes } => {
                let k = (namespace, name);
                if let Some(old) = self.domains.get(&k)
                    && self.interner.text(old.uid) != uid
                {
                    let old_uid = old.uid;
                    self.emit(out, Delta::RemoveDomain(old_uid));
                }
                let i = &mut self.interner;
                let fact =
                    DomainFact { uid: i.id(&uid), namespace: i.id(&k.0), name: i.id(&k.1), size_hint, num_nodes };
                self.domains.insert(k, fact.clone());
                self.emit(out, Delta::UpsertDomain(fact));
            }
            Object::PodGroup { namespace, name, min_count, priority } => self.upsert(
                out,
                Object::Owner {
                    key: pod_group_key(&namespace, &name),
                    size: min_count,
                    source: format!("PodGroup {namespace}/{name} spec.schedulingPolicy.gang.minCount"),
                    priority,
                },
            ),
            Object::Owner { key, size: None, .. } => self.remove(out, Kind::Owner, "", &key),
            Object::Owner { key, size: Some(size), source, priority } => {
                let i = &mut self.interner;
                let fact = OwnerFact { key: i.id(&key), size, source: i.id(&source), priority };
                if self.owners.get(&key) != Some(&fact) {
                    self.owners.insert(key, fact.clone());
                    self.emit(out, Delta::UpsertOwner(fact));
                }
            }
        }
    }

    /// The ids of a claim's or a template's namespace, name and ComputeDomain.
    fn claim_ids(&mut self, namespace: &str, name: &str, domain: Option<&str>) -> (StrId, StrId, Option<StrId>) {
        let i = &mut self.interner;
        (i.id(namespace), i.id(name), domain.map(|d| i.id(d)))
    }

    fn remove(&mut self, out: &mut Vec<wit::Delta>, kind: Kind, namespace: &str, name: &str) {
        let k = key(namespace, name);
        match kind {
            Kind::Node => {
                if let Some(n) = self.nodes.remove(name) {
                    if let Some(l) = n.clique_label
                        && let Some(set) = self.nodes_by_clique.get_mut(&l)
                    {
                        set.remove(name);
                    }
                    let id = self.interner.id(name);
                    self.emit(out, Delta::RemoveNode(id));
                }
            }
            Kind::Pod => {
                if let Some(p) = self.pods.remove(&k) {
                    if let Some(n) = &p.indexed {
                        drop_key(&mut self.pods_by_node, n, &k);
                    }
                    for r in self.refs_of(&p.fact) {
                        drop_key(&mut self.pods_by_ref, &r, &k);
                    }
                    self.emit(out, Delta::RemovePod(p.fact.key));
                }
            }
            Kind::ResourceClaim => {
                if let Some(c) = self.claims.remove(&k) {
                    self.index_ref(Ref::Claim(k), c.domain, None);
                    self.emit(out, Delta::RemoveClaim(c.namespace, c.name));
                }
            }
            Kind::ResourceClaimTemplate => {
                if let Some(t) = self.templates.remove(&k) {
                    self.index_ref(Ref::Template(k), t.domain, None);
                    self.emit(out, Delta::RemoveTemplate(t.namespace, t.name));
                }
            }
            Kind::ResourceSlice => self.set_slice(out, name.to_string(), None),
            Kind::ComputeDomain => {
                if let Some(d) = self.domains.remove(&k) {
                    self.emit(out, Delta::RemoveDomain(d.uid));
                }
            }
            Kind::PodGroup => self.remove(out, Kind::Owner, "", &pod_group_key(namespace, name)),
            Kind::Owner => {
                if let Some(o) = self.owners.remove(name) {
                    self.emit(out, Delta::RemoveOwner(o.key));
                }
            }
        }
    }

    /// Marks a pod assumed on a node (Reserve); false when the pod is not in the view.
    pub fn assume(&mut self, out: &mut Vec<wit::Delta>, namespace: &str, name: &str, node: &str) -> bool {
        let k = key(namespace, name);
        let Some(p) = self.pods.get_mut(&k) else { return false };
        p.assumed = Some(node.to_string());
        self.emit_pod(out, &k);
        true
    }

    /// Forgets an assumption (Unreserve).
    pub fn forget(&mut self, out: &mut Vec<wit::Delta>, namespace: &str, name: &str) {
        let k = key(namespace, name);
        if let Some(p) = self.pods.get_mut(&k)
            && p.assumed.take().is_some()
        {
            self.emit_pod(out, &k);
        }
    }

    /// The claims and templates a pod's claims reference.
    fn refs_of(&self, fact: &PodFact) -> Vec<Ref> {
        refs_of(&self.interner, fact)
    }

    /// Moves a claim or template from the index of the domain it named to the one it names.
    fn index_ref(&mut self, r: Ref, old: Option<StrId>, new: Option<StrId>) {
        if old == new {
            return;
        }
        if let Some(d) = old {
            let d = self.interner.text(d).to_string();
            drop_key(&mut self.refs_by_domain, &d, &r);
        }
        if let Some(d) = new {
            let d = self.interner.text(d).to_string();
            self.refs_by_domain.entry(d).or_default().insert(r);
        }
    }

    /// A pod's ComputeDomain membership, resolved from its claims exactly as the policy does
    /// (guest/policy member.rs): each claim through its ResourceClaim (the generated one, else
    /// the shared one), else its template when the generated claim is not seen yet; a missing
    /// shared claim or template, or two domains, make the pod invalid.
    pub(crate) fn member(&self, fact: &PodFact) -> Membership {
        let ns = self.interner.text(fact.namespace);
        let text = |id: StrId| self.interner.text(id).to_string();
        let mut member: Option<(StrId, bool)> = None;
        let mut invalid = false;
        for r in &fact.claims {
            let mut found = None;
            if let Some(name) = r.generated.or(r.claim) {
                match self.claims.get(&(ns.to_string(), text(name))) {
                    Some(c) => found = Some((c.domain, c.daemon)),
                    None if r.claim.is_some() && r.generated.is_none() => invalid = true,
                    None => {}
                }
            }
            if found.is_none()
                && let Some(t) = r.template
            {
                match self.templates.get(&(ns.to_string(), text(t))) {
                    Some(t) => found = Some((t.domain, t.daemon)),
                    None => invalid = true,
                }
            }
            if let Some((Some(domain), daemon)) = found {
                match member {
                    Some((d, _)) if d != domain => invalid = true,
                    Some(_) => {}
                    None => member = Some((domain, daemon)),
                }
            }
        }
        match (invalid, member) {
            (true, _) => Membership::Invalid,
            (false, None) => Membership::None,
            (false, Some((domain, daemon))) => Membership::Member { domain, daemon },
        }
    }

    /// A pod's fact and where it is placed (bound, assumed or nominated), by key.
    pub(crate) fn placed_pod(&self, k: &Key) -> Option<(&PodFact, Option<&str>)> {
        self.pods.get(k).map(|p| (&p.fact, p.indexed.as_deref()))
    }

    /// The pods bound, assumed or nominated to a node.
    pub(crate) fn pods_on(&self, node: &str) -> impl Iterator<Item = &Key> {
        self.pods_by_node.get(node).into_iter().flatten()
    }

    /// Every pod whose claims reference a claim or template naming the domain with this UID
    /// (a superset of the domain's members: resolve each with [`State::member`]).
    pub(crate) fn pods_naming(&self, domain: &str) -> BTreeSet<&Key> {
        let refs = self.refs_by_domain.get(domain).into_iter().flatten();
        refs.flat_map(|r| self.pods_by_ref.get(r).into_iter().flatten()).collect()
    }

    /// A node's clique label value and driver domain label value, when the view has the node.
    /// The most a ComputeDomain's size could be by any source the host holds, for the safety
    /// rule on domains larger than a clique: the largest of its object's size annotation and
    /// `spec.numNodes`, its workload pods' size annotations, the sum of the sizes of the owners
    /// and PodGroups its workload pods name, and the number of those pods. The policy reads one
    /// of these (guest/policy size.rs), so its size is never larger.
    pub(crate) fn size_bound(&self, uid: &str, workload: &[&Key]) -> u32 {
        let d = self.domains.values().find(|d| self.interner.text(d.uid) == uid);
        let mut most = d.map_or(0, |d| d.size_hint.unwrap_or(0).max(d.num_nodes.unwrap_or(0)));
        let mut owners = BTreeSet::new();
        for k in workload {
            let Some(p) = self.pods.get(*k) else { continue };
            most = most.max(p.fact.size_hint.unwrap_or(0));
            owners.extend(p.fact.pod_group.into_iter().chain(p.fact.owner));
        }
        let owned: u32 = owners
            .into_iter()
            .filter_map(|o| self.owners.get(self.interner.text(o)))
            .map(|o| o.size)
            .fold(0, u32::saturating_add);
        most.max(owned).max(workload.len() as u32)
    }

    /// The most schedulable (not cordoned) trays any valid NVLink clique has.
    pub(crate) fn largest_clique(&self) -> u32 {
        let kind = |l: &str| cdplace_policy::label_kind(l) == cdplace_policy::LabelKind::Clique;
        let count = |names: &BTreeSet<String>| {
            names.iter().filter(|n| self.nodes.get(*n).is_some_and(|s| !s.unschedulable)).count() as u32
        };
        self.nodes_by_clique.iter().filter(|(l, _)| kind(l.as_str())).map(|(_, n)| count(n)).max().unwrap_or(0)
    }

    pub(crate) fn node_labels(&self, name: &str) -> Option<(Option<&str>, Option<&str>)> {
        self.nodes.get(name).map(|n| (n.clique_label.as_deref(), n.domain_label.as_deref()))
    }

    /// Every node's name.
    pub(crate) fn node_names(&self) -> impl Iterator<Item = &str> {
        self.nodes.keys().map(String::as_str)
    }

    /// `namespace/name` of the ComputeDomain with this UID, or the UID when the view has no such
    /// object (for messages).
    pub(crate) fn domain_display(&self, uid: &str) -> String {
        self.domains
            .iter()
            .find(|(_, d)| self.interner.text(d.uid) == uid)
            .map_or_else(|| uid.to_string(), |((ns, name), _)| format!("{ns}/{name} (UID {uid})"))
    }

    /// The id of a pod's key, when the view has the pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<StrId> {
        self.pods.get(&key(namespace, name)).map(|p| p.fact.key)
    }

    /// The overlay in ids (new strings are interned, to be journaled before the next call).
    pub fn overlay(&mut self, overlay: &[Overlay]) -> Vec<OverlayOp> {
        overlay
            .iter()
            .map(|o| match o {
                Overlay::RemovePod { namespace, name } => {
                    OverlayOp::RemovePod(self.interner.id(&pod_key(namespace, name)))
                }
                Overlay::AddPod { namespace, name, node } => {
                    let k = self.interner.id(&pod_key(namespace, name));
                    OverlayOp::AddPod(k, self.interner.id(node))
                }
            })
            .collect()
    }

    /// The ComputeDomain UID a pod's claims name (through its template, its claim or the claim
    /// generated for it), when the view knows it.
    fn domain_of(&self, (namespace, _): &Key, p: &PodState) -> Option<StrId> {
        p.fact.claims.iter().find_map(|c| {
            let from_template = c
                .template
                .and_then(|t| self.templates.get(&key(namespace, self.interner.text(t))))
                .and_then(|t| t.domain);
            let from_claim = c
                .claim
                .or(c.generated)
                .and_then(|n| self.claims.get(&key(namespace, self.interner.text(n))))
                .and_then(|c| c.domain);
            from_template.or(from_claim)
        })
    }

    /// The pods a candidate policy's self-test decides for, as `(namespace, name)`: one pending
    /// pod (not bound, nominated or assumed) of every ComputeDomain, the first by key; and the
    /// first `placed` placed pods of ComputeDomains by key (the same sample on the same view).
    pub fn self_test_pods(&self, placed: usize) -> (Vec<Key>, Vec<Key>) {
        let mut pods: Vec<(&Key, &PodState, StrId)> =
            self.pods.iter().filter_map(|(k, p)| Some((k, p, self.domain_of(k, p)?))).collect();
        pods.sort_by(|a, b| a.0.cmp(b.0));
        let mut domains = BTreeSet::new();
        let mut pending = Vec::new();
        let mut sample = Vec::new();
        for (k, p, domain) in pods {
            let waiting = p.node_name.is_none() && p.nominated.is_none() && p.assumed.is_none();
            if waiting {
                if domains.insert(domain) {
                    pending.push(k.clone());
                }
            } else if sample.len() < placed {
                sample.push(k.clone());
            }
        }
        (pending, sample)
    }

    /// The node a pod is bound, assumed or nominated to (`None`: pending, or not in the view).
    pub fn placed_node(&self, key: &Key) -> Option<String> {
        self.pods.get(key).and_then(|p| p.indexed.clone())
    }

    /// Every node with its clique label value, sorted by name.
    pub fn nodes(&self) -> Vec<(String, Option<String>)> {
        let mut v: Vec<_> = self.nodes.iter().map(|(n, s)| (n.clone(), s.clique_label.clone())).collect();
        v.sort();
        v
    }

    /// The names of the nodes whose clique label value is `label`, sorted.
    pub fn clique_nodes(&self, label: &str) -> impl Iterator<Item = &str> {
        self.nodes_by_clique.get(label).into_iter().flatten().map(String::as_str)
    }

    /// Rebuilds the interner with the strings current facts use, renumbering every fact. Every
    /// guest needs a fresh [`State::snapshot`] afterwards.
    pub fn compact(&mut self) {
        fn re(new: &mut Interner, old: &Interner, id: StrId) -> StrId {
            new.id(old.text(id))
        }
        fn re_opt(new: &mut Interner, old: &Interner, id: &mut Option<StrId>) {
            *id = id.map(|i| re(new, old, i));
        }
        let old = std::mem::take(&mut self.interner);
        let new = &mut self.interner;
        for p in self.pods.values_mut() {
            let f = &mut p.fact;
            f.key = re(new, &old, f.key);
            f.namespace = re(new, &old, f.namespace);
            re_opt(new, &old, &mut f.node);
            re_opt(new, &old, &mut f.pod_group);
            re_opt(new, &old, &mut f.owner);
            for c in &mut f.claims {
                c.name = re(new, &old, c.name);
                re_opt(new, &old, &mut c.template);
                re_opt(new, &old, &mut c.claim);
                re_opt(new, &old, &mut c.generated);
            }
        }
        for c in self.claims.values_mut() {
            c.namespace = re(new, &old, c.namespace);
            c.name = re(new, &old, c.name);
            re_opt(new, &old, &mut c.domain);
        }
        for t in self.templates.values_mut() {
            t.namespace = re(new, &old, t.namespace);
            t.name = re(new, &old, t.name);
            re_opt(new, &old, &mut t.domain);
        }
        for d in self.domains.values_mut() {
            d.uid = re(new, &old, d.uid);
            d.namespace = re(new, &old, d.namespace);
            d.name = re(new, &old, d.name);
        }
        for o in self.owners.values_mut() {
            o.key = re(new, &old, o.key);
            o.source = re(new, &old, o.source);
        }
        for (name, n) in &self.nodes {
            new.id(name);
            for l in n.clique_label.iter().chain(&n.domain_label) {
                new.id(l);
            }
        }
        // A new instance gets every string in its snapshot.
        new.take_fresh();
    }

    /// Every current fact as deltas after a reset, for a new instance. Strings interned but not
    /// flushed yet stay fresh: instances behind in the journal still need them journaled.
    pub fn snapshot(&mut self) -> Vec<wit::Delta> {
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        let nodes: Vec<NodeFact> = names.iter().filter_map(|n| self.node_fact(n)).collect();
        let mut out = vec![wit::Delta::Reset, wit::Delta::Strings(self.interner.all())];
        let facts = (self.claims.values().cloned().map(Delta::UpsertClaim))
            .chain(self.templates.values().cloned().map(Delta::UpsertTemplate))
            .chain(self.domains.values().cloned().map(Delta::UpsertDomain))
            .chain(self.owners.values().cloned().map(Delta::UpsertOwner))
            .chain(nodes.into_iter().map(Delta::UpsertNode))
            .chain(self.pods.values().map(|p| Delta::UpsertPod(p.fact.clone())));
        out.extend(facts.map(|d| convert::delta(&d)));
        out
    }
}

/// The claims and templates a pod's claims reference, as index keys.
fn refs_of(interner: &Interner, fact: &PodFact) -> Vec<Ref> {
    let ns = interner.text(fact.namespace);
    let k = |id: StrId| (ns.to_string(), interner.text(id).to_string());
    let mut v = Vec::new();
    for r in &fact.claims {
        v.extend(r.generated.into_iter().chain(r.claim).map(|c| Ref::Claim(k(c))));
        v.extend(r.template.map(|t| Ref::Template(k(t))));
    }
    v
}

/// Drops a key from an index entry, and the entry once empty.
fn drop_key<K: std::hash::Hash + Eq + std::borrow::Borrow<Q>, Q: std::hash::Hash + Eq + ?Sized, V: Ord>(
    index: &mut HashMap<K, BTreeSet<V>>,
    at: &Q,
    value: &V,
) {
    if let Some(set) = index.get_mut(at) {
        set.remove(value);
        if set.is_empty() {
            index.remove(at);
        }
    }
}

/// Drops a name from an index entry, and the entry once empty.
fn drop_name(index: &mut HashMap<String, BTreeSet<String>>, key: &str, name: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(name);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> Record {
        Record::Upsert(Object::Node {
            name: name.into(),
            clique_label: Some("c".into()),
            domain_label: None,
            unschedulable: false,
            gpus: 0,
        })
    }

    fn slice(name: &str, node: &str, pool: &str, generation: i64, gpus: u32) -> Record {
        Record::Upsert(Object::Slice {
            name: name.into(),
            node: Some(node.into()),
            gpus,
            pool: pool.into(),
            generation,
        })
    }

    fn remove_slice(name: &str) -> Record {
        Record::Remove { kind: Kind::ResourceSlice, namespace: String::new(), name: name.into() }
    }

    /// Applies the records and returns how many node facts the last one emitted.
    fn apply(s: &mut State, records: impl IntoIterator<Item = Record>) -> usize {
        let mut out = Vec::new();
        for r in records {
            out.clear();
            s.apply(&mut out, r);
        }
        out.iter().filter(|d| matches!(d, wit::Delta::UpsertNode(_))).count()
    }

    fn gpus(s: &mut State, node: &str) -> u32 {
        s.node_fact(node).expect("node in the view").gpus
    }

    #[test]
    fn only_the_newest_generation_of_a_pool_counts() {
        let mut s = State::default();
        apply(&mut s, [node("a"), node("b"), slice("a-1", "a", "pool-a", 1, 4)]);
        assert_eq!(gpus(&mut s, "a"), 4);
        // The driver republishes the pool: the old slice is stale, not counted twice.
        assert!(apply(&mut s, [slice("a-2", "a", "pool-a", 2, 4)]) >= 1);
        assert_eq!(gpus(&mut s, "a"), 4, "generation 1 is superseded by 2");
        // The old generation goes: nothing changes.
        apply(&mut s, [remove_slice("a-1")]);
        assert_eq!(gpus(&mut s, "a"), 4);
        // A pool spanning nodes: the newer generation on node b supersedes a's slice, and a is
        // re-emitted with it.
        apply(&mut s, [slice("p-a", "a", "shared", 1, 2), slice("p-b", "b", "shared", 1, 2)]);
        assert_eq!((gpus(&mut s, "a"), gpus(&mut s, "b")), (6, 2));
        let emitted = apply(&mut s, [slice("p-b", "b", "shared", 2, 3)]);
        assert_eq!((gpus(&mut s, "a"), gpus(&mut s, "b")), (4, 3), "p-a is of the superseded generation");
        assert_eq!(emitted, 2, "both nodes of the pool are re-emitted");
        // The newer slice deleted: the older generation is the newest again.
        let emitted = apply(&mut s, [remove_slice("p-b")]);
        assert_eq!((gpus(&mut s, "a"), gpus(&mut s, "b")), (6, 0));
        assert_eq!(emitted, 2);
        // A slice moving to an older generation of its pool while a newer one exists.
        apply(&mut s, [slice("a-2", "a", "pool-a", 0, 4)]);
        assert_eq!(gpus(&mut s, "a"), 6, "a-2 is the only slice of pool-a: its generation is the newest");
    }

    #[test]
    fn slice_totals_saturate_instead_of_wrapping() {
        let mut s = State::default();
        apply(&mut s, [node("a"), slice("x", "a", "p1", 1, u32::MAX - 1), slice("y", "a", "p2", 1, 5)]);
        assert_eq!(gpus(&mut s, "a"), u32::MAX);
        // Removing one of them takes exactly its share, no underflow.
        apply(&mut s, [remove_slice("x")]);
        assert_eq!(gpus(&mut s, "a"), 5);
        apply(&mut s, [remove_slice("y"), remove_slice("y")]);
        assert_eq!(gpus(&mut s, "a"), 0);
    }
}
