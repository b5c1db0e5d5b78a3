//! The host's view of the cluster and the pool of policy instances that mirror it.
//!
//! Objects come in as JSON ([`Cluster::apply`], [`Cluster::delete`]) from informers or a
//! snapshot file. The host keeps the current facts of every object and appends each change to a
//! journal of [`Delta`]s; strings are interned here and cross into the guest once. A guest
//! instance remembers how far into the journal it is and catches up when it is checked out, so
//! parallel callers each get their own instance (no lock is held during a guest call) and every
//! instance sees the same cluster. A new instance starts from a full snapshot of the facts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use cdplace_policy::{
    self as policy, ClaimFact, ClaimRef, Code, Delta, DomainFact, NodeFact, OverlayOp, OwnerFact, Placement, PodFact,
    StrId, TemplateFact,
};
use serde_json::Value;

use crate::extract::{self, Keys, Kind, Object};
use crate::runtime::{GuestInstance, Runtime};
use crate::{Error, Result};

/// How far an idle instance may fall behind the journal before it is dropped instead of caught up.
const MAX_LAG: usize = 100_000;
/// Idle instances kept for parallel callers.
const MAX_IDLE: usize = 16;
/// Interned strings are never freed one by one (pods come and go with new names); once the table
/// passes this size and twice its live size, it is rebuilt with only the live strings.
const MIN_COMPACTION: usize = 50_000;

/// The owner key of a PodGroup, as pods name it.
fn pod_group_key(namespace: &str, name: &str) -> String {
    format!("PodGroup/{namespace}/{name}")
}

/// A framework status: code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reason: String,
}

/// What PreFilter decided for a pod, with every id resolved to its string. Filter and Score for
/// a node are [`Decision::node`], a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub status: Status,
    /// The pod's ComputeDomain UID.
    pub domain: Option<String>,
    /// The pod may only go to the successful cliques listed.
    pub exclusive: bool,
    /// Verdict and score per clique label value.
    pub cliques: BTreeMap<String, (Status, u32)>,
    /// Verdict for nodes whose clique is not listed.
    pub other: Status,
    /// Nodes whose verdict differs from their clique's.
    pub nodes: BTreeMap<String, Status>,
    /// When `exclusive`: the nodes of the allowed cliques (the PreFilterResult node set).
    pub allowed_nodes: Option<Vec<String>>,
}

impl Decision {
    /// Filter's status and Score's score for a node with this name and clique label value.
    pub fn node(&self, name: &str, clique: Option<&str>) -> (&Status, Option<u32>) {
        if self.status.code != Code::Success {
            return (&self.status, None);
        }
        let of_clique = clique.and_then(|c| self.cliques.get(c));
        if let Some(s) = self.nodes.get(name) {
            let score = of_clique.filter(|_| s.code == Code::Success).map(|c| c.1);
            return (s, score);
        }
        match of_clique {
            Some((s, score)) if s.code == Code::Success => (s, Some(*score)),
            Some((s, _)) => (s, None),
            None => (&self.other, None),
        }
    }
}

/// A hypothetical change for one evaluation (preemption's AddPod/RemovePod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    RemovePod { namespace: String, name: String },
    AddPod { namespace: String, name: String, node: String },
}

/// Strings to ids, grown as objects arrive.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<String, StrId>,
    texts: Vec<String>,
    /// Strings not yet journaled.
    fresh: Vec<(StrId, String)>,
}

impl Interner {
    fn id(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.texts.len() as StrId;
        self.texts.push(s.to_string());
        self.ids.insert(s.to_string(), id);
        self.fresh.push((id, s.to_string()));
        id
    }

    fn text(&self, id: StrId) -> &str {
        self.texts.get(id as usize).map_or("", String::as_str)
    }
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
}

#[derive(Debug, Clone)]
struct NodeState {
    name: String,
    clique_label: Option<String>,
    domain_label: Option<String>,
    unschedulable: bool,
    extended_gpus: u32,
}

#[derive(Debug)]
struct State {
    keys: Keys,
    interner: Interner,
    /// Bumped when the interner is rebuilt: instances of an older generation are dropped.
    generation: u64,
    /// Rebuild the interner when it holds this many strings.
    compact_at: usize,
    journal: Vec<Delta>,
    /// Journal position of `journal[0]`.
    base: u64,
    /// Positions of instances checked out or idle.
    positions: BTreeMap<u64, usize>,
    nodes: HashMap<String, NodeState>,
    nodes_by_clique: HashMap<String, BTreeSet<String>>,
    slices: HashMap<String, (String, u32)>,
    slice_gpus: HashMap<String, u32>,
    pods: HashMap<(String, String), PodState>,
    owners: HashMap<String, OwnerFact>,
    claims: HashMap<(String, String), ClaimFact>,
    templates: HashMap<(String, String), TemplateFact>,
    domains: HashMap<(String, String), DomainFact>,
}

impl State {
    fn end(&self) -> u64 {
        self.base + self.journal.len() as u64
    }

    /// Journals the strings interned since the last flush.
    fn flush_strings(&mut self) {
        if !self.interner.fresh.is_empty() {
            let fresh = std::mem::take(&mut self.interner.fresh);
            self.journal.push(Delta::Strings(fresh));
        }
    }

    fn emit(&mut self, d: Delta) {
        self.flush_strings();
        self.journal.push(d);
    }

    fn node_fact(&mut self, name: &str) -> Option<NodeFact> {
        let n = self.nodes.get(name)?.clone();
        let gpus = n.extended_gpus.max(self.slice_gpus.get(name).copied().unwrap_or(0));
        Some(NodeFact {
            name: self.interner.id(&n.name),
            clique_label: n.clique_label.as_deref().map(|l| self.interner.id(l)),
            unschedulable: n.unschedulable,
            gpus,
            domain_label: n.domain_label.as_deref().map(|l| self.interner.id(l)),
        })
    }

    fn emit_node(&mut self, name: &str) {
        if let Some(f) = self.node_fact(name) {
            self.emit(Delta::UpsertNode(f));
        }
    }

    fn pod_key(ns: &str, name: &str) -> String {
        format!("{ns}/{name}")
    }

    /// Recomputes a pod's fact from its state and journals it.
    fn emit_pod(&mut self, ns: &str, name: &str) {
        let Some(p) = self.pods.get(&(ns.to_string(), name.to_string())) else { return };
        let (placement, node) = match (&p.node_name, &p.assumed, &p.nominated) {
            (Some(n), _, _) => (Placement::Bound, Some(n.clone())),
            (None, Some(n), _) => (Placement::Assumed, Some(n.clone())),
            (None, None, Some(n)) => (Placement::Nominated, Some(n.clone())),
            _ => (Placement::Pending, None),
        };
        let mut fact = p.fact.clone();
        fact.placement = placement;
        fact.node = node.map(|n| self.interner.id(&n));
        self.pods.get_mut(&(ns.to_string(), name.to_string())).expect("present").fact = fact.clone();
        self.emit(Delta::UpsertPod(fact));
    }

    fn upsert(&mut self, obj: Object) {
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
                self.nodes.insert(
                    name.clone(),
                    NodeState { name: name.clone(), clique_label, domain_label, unschedulable, extended_gpus: gpus },
                );
                self.emit_node(&name);
            }
            Object::Pod { namespace, name, terminal: true, .. } => self.delete(Kind::Pod, &namespace, &name),
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
                ..
            } => {
                let key = Self::pod_key(&namespace, &name);
                let claims = claims
                    .iter()
                    .map(|c| ClaimRef {
                        name: self.interner.id(&c.name),
                        template: c.template.as_deref().map(|s| self.interner.id(s)),
                        claim: c.claim.as_deref().map(|s| self.interner.id(s)),
                        generated: c.generated.as_deref().map(|s| self.interner.id(s)),
                    })
                    .collect();
                let fact = PodFact {
                    key: self.interner.id(&key),
                    namespace: self.interner.id(&namespace),
                    placement: Placement::Pending,
                    node: None,
                    claims,
                    gpus,
                    size_hint,
                    pod_group: pod_group.map(|g| self.interner.id(&pod_group_key(&namespace, &g))),
                    owner: owner.map(|o| self.interner.id(&o)),
                    created_ms,
                    priority,
                };
                let k = (namespace.clone(), name.clone());
                let old = self.pods.get(&k);
                // A bound pod is no longer merely assumed.
                let assumed = old.and_then(|o| o.assumed.clone()).filter(|_| node_name.is_none());
                self.pods.insert(k, PodState { fact, node_name, nominated: nominated_node_name, assumed });
                self.emit_pod(&namespace, &name);
            }
            Object::Claim { namespace, name, domain, daemon, gpus, allocated_gpus } => {
                let fact = ClaimFact {
                    namespace: self.interner.id(&namespace),
                    name: self.interner.id(&name),
                    domain: domain.as_deref().map(|d| self.interner.id(d)),
                    daemon,
                    gpus,
                    allocated_gpus,
                };
                self.claims.insert((namespace, name), fact.clone());
                self.emit(Delta::UpsertClaim(fact));
            }
            Object::Template { namespace, name, domain, daemon, gpus } => {
                let fact = TemplateFact {
                    namespace: self.interner.id(&namespace),
                    name: self.interner.id(&name),
                    domain: domain.as_deref().map(|d| self.interner.id(d)),
                    daemon,
                    gpus,
                };
                self.templates.insert((namespace, name), fact.clone());
                self.emit(Delta::UpsertTemplate(fact));
            }
            Object::Slice { name, node, gpus } => {
                let old = self.slices.remove(&name);
                if let Some((n, g)) = &old
                    && let Some(total) = self.slice_gpus.get_mut(n)
                {
                    *total -= g;
                }
                if let Some(n) = &node {
                    *self.slice_gpus.entry(n.clone()).or_default() += gpus;
                    self.slices.insert(name, (n.clone(), gpus));
                }
                for n in old.map(|o| o.0).into_iter().chain(node) {
                    self.emit_node(&n);
                }
            }
            Object::Domain { namespace, name, uid, size_hint, num_nodes } => {
                let k = (namespace.clone(), name.clone());
                if let Some(old) = self.domains.get(&k)
                    && self.interner.text(old.uid) != uid
                {
                    let old_uid = old.uid;
                    self.emit(Delta::RemoveDomain(old_uid));
                }
                let fact = DomainFact {
                    uid: self.interner.id(&uid),
                    namespace: self.interner.id(&namespace),
                    name: self.interner.id(&name),
                    size_hint,
                    num_nodes,
                };
                self.domains.insert(k, fact.clone());
                self.emit(Delta::UpsertDomain(fact));
            }
            Object::PodGroup { namespace, name, min_count, priority } => self.upsert(Object::Owner {
                key: pod_group_key(&namespace, &name),
                size: min_count,
                source: format!("PodGroup {namespace}/{name} spec.schedulingPolicy.gang.minCount"),
                priority,
            }),
            Object::Owner { key, size: None, .. } => self.delete(Kind::Owner, "", &key),
            Object::Owner { key, size: Some(size), source, priority } => {
                let fact = OwnerFact { key: self.interner.id(&key), size, source: self.interner.id(&source), priority };
                if self.owners.get(&key) != Some(&fact) {
                    self.owners.insert(key, fact.clone());
                    self.emit(Delta::UpsertOwner(fact));
                }
            }
        }
    }

    fn delete(&mut self, kind: Kind, namespace: &str, name: &str) {
        let k = (namespace.to_string(), name.to_string());
        match kind {
            Kind::Node => {
                if let Some(n) = self.nodes.remove(name) {
                    if let Some(l) = n.clique_label
                        && let Some(set) = self.nodes_by_clique.get_mut(&l)
                    {
                        set.remove(name);
                    }
                    let id = self.interner.id(name);
                    self.emit(Delta::RemoveNode(id));
                }
            }
            Kind::Pod => {
                if let Some(p) = self.pods.remove(&k) {
                    self.emit(Delta::RemovePod(p.fact.key));
                }
            }
            Kind::ResourceClaim => {
                if let Some(c) = self.claims.remove(&k) {
                    self.emit(Delta::RemoveClaim(c.namespace, c.name));
                }
            }
            Kind::ResourceClaimTemplate => {
                if let Some(t) = self.templates.remove(&k) {
                    self.emit(Delta::RemoveTemplate(t.namespace, t.name));
                }
            }
            Kind::ResourceSlice => self.upsert(Object::Slice { name: name.to_string(), node: None, gpus: 0 }),
            Kind::ComputeDomain => {
                if let Some(d) = self.domains.remove(&k) {
                    self.emit(Delta::RemoveDomain(d.uid));
                }
            }
            Kind::PodGroup => self.delete(Kind::Owner, "", &pod_group_key(namespace, name)),
            Kind::Owner => {
                if let Some(o) = self.owners.remove(name) {
                    self.emit(Delta::RemoveOwner(o.key));
                }
            }
        }
    }

    /// Rebuilds the interner with the strings current facts use, renumbering every fact; the
    /// journal restarts and every instance is replaced (see [`Cluster::maybe_compact`]).
    fn compact(&mut self) {
        fn re(new: &mut Interner, old: &Interner, id: StrId) -> StrId {
            new.id(old.text(id))
        }
        let old = std::mem::take(&mut self.interner);
        let new = &mut self.interner;
        for p in self.pods.values_mut() {
            let f = &mut p.fact;
            f.key = re(new, &old, f.key);
            f.namespace = re(new, &old, f.namespace);
            f.node = f.node.map(|n| re(new, &old, n));
            f.pod_group = f.pod_group.map(|n| re(new, &old, n));
            f.owner = f.owner.map(|n| re(new, &old, n));
            for c in &mut f.claims {
                c.name = re(new, &old, c.name);
                c.template = c.template.map(|t| re(new, &old, t));
                c.claim = c.claim.map(|t| re(new, &old, t));
                c.generated = c.generated.map(|t| re(new, &old, t));
            }
        }
        for c in self.claims.values_mut() {
            c.namespace = re(new, &old, c.namespace);
            c.name = re(new, &old, c.name);
            c.domain = c.domain.map(|d| re(new, &old, d));
        }
        for t in self.templates.values_mut() {
            t.namespace = re(new, &old, t.namespace);
            t.name = re(new, &old, t.name);
            t.domain = t.domain.map(|d| re(new, &old, d));
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
        for n in self.nodes.values() {
            new.id(&n.name);
            for l in n.clique_label.iter().chain(&n.domain_label) {
                new.id(l);
            }
        }
        // A new instance gets every string in its snapshot.
        new.fresh.clear();
        self.compact_at = (2 * self.interner.texts.len()).max(self.compact_at.min(MIN_COMPACTION));
        let end = self.end();
        self.journal.clear();
        self.base = end;
        self.positions.clear();
        self.generation += 1;
        tracing::info!(strings = self.interner.texts.len(), "cdplace: interned strings compacted");
    }

    /// Every current fact as deltas (after a reset), for a new instance.
    fn snapshot(&self) -> Vec<Delta> {
        let mut out = vec![
            Delta::Reset,
            Delta::Strings(self.interner.texts.iter().enumerate().map(|(i, s)| (i as StrId, s.clone())).collect()),
        ];
        out.extend(self.claims.values().cloned().map(Delta::UpsertClaim));
        out.extend(self.templates.values().cloned().map(Delta::UpsertTemplate));
        out.extend(self.domains.values().cloned().map(Delta::UpsertDomain));
        out.extend(self.owners.values().cloned().map(Delta::UpsertOwner));
        let names: Vec<String> = self.nodes.keys().cloned().collect();
        for n in names {
            let name = self.interner.ids[&n];
            let st = &self.nodes[&n];
            let label = |s: &Option<String>| s.as_ref().map(|l| self.interner.ids[l]);
            out.push(Delta::UpsertNode(NodeFact {
                name,
                clique_label: label(&st.clique_label),
                unschedulable: st.unschedulable,
                gpus: st.extended_gpus.max(self.slice_gpus.get(&n).copied().unwrap_or(0)),
                domain_label: label(&st.domain_label),
            }));
        }
        out.extend(self.pods.values().map(|p| Delta::UpsertPod(p.fact.clone())));
        out
    }

    fn status(&self, r: &policy::PreFilterResult, v: policy::Verdict) -> Status {
        Status { code: v.code, reason: r.reason(v).to_string() }
    }

    /// The packed decision (see `include/cdplace.h`).
    fn packed(&self, r: &policy::PreFilterResult) -> Vec<u8> {
        fn code(c: Code) -> u8 {
            match c {
                Code::Success => 0,
                Code::Skip => 1,
                Code::Unschedulable => 2,
                Code::UnschedulableAndUnresolvable => 3,
                Code::Error => 4,
            }
        }
        fn u32le(out: &mut Vec<u8>, v: u32) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        fn text(out: &mut Vec<u8>, s: &str) {
            u32le(out, s.len() as u32);
            out.extend_from_slice(s.as_bytes());
        }
        fn verdict(out: &mut Vec<u8>, v: policy::Verdict) {
            out.push(code(v.code));
            u32le(out, v.reason);
        }
        let mut out = Vec::with_capacity(64 + 24 * (r.cliques.len() + r.nodes.len()));
        out.extend_from_slice(b"CDP1");
        u32le(&mut out, r.reasons.len() as u32);
        for t in &r.reasons {
            text(&mut out, t);
        }
        verdict(&mut out, r.status);
        match r.domain {
            Some(d) => {
                out.push(1);
                text(&mut out, self.interner.text(d));
            }
            None => out.push(0),
        }
        out.push(u8::from(r.exclusive));
        verdict(&mut out, r.other);
        u32le(&mut out, r.cliques.len() as u32);
        for c in &r.cliques {
            text(&mut out, self.interner.text(c.clique));
            verdict(&mut out, c.verdict);
            u32le(&mut out, c.score);
        }
        u32le(&mut out, r.nodes.len() as u32);
        for n in &r.nodes {
            text(&mut out, self.interner.text(n.node));
            verdict(&mut out, n.verdict);
        }
        let allowed = self.decision_allowed(r);
        u32le(&mut out, allowed.len() as u32);
        for n in allowed {
            text(&mut out, n);
        }
        out
    }

    /// The nodes of the successful cliques when the pod is restricted to them, sorted.
    fn decision_allowed(&self, r: &policy::PreFilterResult) -> Vec<&str> {
        if !(r.exclusive && r.status.code == Code::Success) {
            return Vec::new();
        }
        let mut v: Vec<&str> = r
            .cliques
            .iter()
            .filter(|c| c.verdict.code == Code::Success)
            .flat_map(|c| self.nodes_by_clique.get(self.interner.text(c.clique)).into_iter().flatten())
            .map(String::as_str)
            .collect();
        v.sort_unstable();
        v
    }

    fn decision(&self, r: &policy::PreFilterResult) -> Decision {
        let cliques: BTreeMap<String, (Status, u32)> = r
            .cliques
            .iter()
            .map(|c| (self.interner.text(c.clique).to_string(), (self.status(r, c.verdict), c.score)))
            .collect();
        let allowed_nodes = (r.exclusive && r.status.code == Code::Success)
            .then(|| self.decision_allowed(r).into_iter().map(String::from).collect());
        Decision {
            status: self.status(r, r.status),
            domain: r.domain.map(|d| self.interner.text(d).to_string()),
            exclusive: r.exclusive,
            cliques,
            other: self.status(r, r.other),
            nodes: r
                .nodes
                .iter()
                .map(|n| (self.interner.text(n.node).to_string(), self.status(r, n.verdict)))
                .collect(),
            allowed_nodes,
        }
    }
}

/// The host's clock for the policy (Unix milliseconds).
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// A policy instance: the wasm component, or the same policy compiled natively (benchmarks and
/// parity tests).
#[derive(Debug)]
enum Instance {
    Wasm(GuestInstance),
    Native(Box<policy::View>),
}

impl Instance {
    fn configure(&mut self, args: &str) -> Result<Keys> {
        match self {
            Instance::Wasm(g) => g.configure(args).map(|s| Keys::from(&s)),
            Instance::Native(v) => {
                let a = policy::Args::parse(args).map_err(|e| match e {
                    policy::Error::InvalidArgs(m) => Error::InvalidArgs(m),
                    policy::Error::InvalidInput(m) => Error::InvalidInput(m),
                })?;
                let keys = Keys {
                    clique_label: a.clique_label.clone(),
                    gpu_resource_name: a.gpu_resource_name.clone(),
                    gpu_driver: a.gpu_driver.clone(),
                    compute_domain_driver: a.compute_domain_driver.clone(),
                    size_annotation: a.size_annotation.clone(),
                };
                v.set_args(a);
                Ok(keys)
            }
        }
    }

    fn apply(&mut self, deltas: &[Delta]) -> Result<()> {
        match self {
            Instance::Wasm(g) => g.apply(deltas),
            Instance::Native(v) => v.apply(deltas.iter().cloned()).map_err(|e| Error::InvalidInput(e.to_string())),
        }
    }

    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> Result<policy::PreFilterResult> {
        match self {
            Instance::Wasm(g) => g.pre_filter(pod, overlay, now_ms),
            Instance::Native(v) => Ok(v.pre_filter(pod, overlay, now_ms)),
        }
    }
}

/// Which policy build a [`Cluster`] runs.
#[derive(Debug, Clone)]
pub enum Backend {
    /// The WebAssembly component (production).
    Wasm(Arc<Runtime>),
    /// The same policy compiled into this process (for comparison).
    Native,
}

/// The cluster view plus the instances that evaluate it. Shareable between threads.
#[derive(Debug)]
pub struct Cluster {
    backend: Backend,
    args: String,
    state: Mutex<State>,
    /// Idle instances with their journal position and interner generation.
    idle: Mutex<Vec<(Instance, u64, u64)>>,
}

impl Cluster {
    /// A cluster view evaluated by `backend` under `args` (the plugin arguments as JSON; empty
    /// for defaults). Invalid arguments fail here with the policy's exact message.
    pub fn new(backend: Backend, args: &str) -> Result<Self> {
        let mut first = match &backend {
            Backend::Wasm(rt) => Instance::Wasm(rt.instantiate()?),
            Backend::Native => Instance::Native(Box::default()),
        };
        let keys = first.configure(args)?;
        let state = State {
            keys,
            interner: Interner::default(),
            generation: 0,
            compact_at: MIN_COMPACTION,
            journal: Vec::new(),
            base: 0,
            positions: BTreeMap::from([(0, 1)]),
            nodes: HashMap::new(),
            nodes_by_clique: HashMap::new(),
            slices: HashMap::new(),
            slice_gpus: HashMap::new(),
            pods: HashMap::new(),
            owners: HashMap::new(),
            claims: HashMap::new(),
            templates: HashMap::new(),
            domains: HashMap::new(),
        };
        Ok(Cluster { backend, args: args.to_string(), state: Mutex::new(state), idle: Mutex::new(vec![(first, 0, 0)]) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The extraction keys from the validated arguments.
    pub fn keys(&self) -> Keys {
        self.state().keys.clone()
    }

    /// Adds or updates an object (JSON as the API server writes it). Returns false for kinds
    /// cdplace does not read; an object it cannot understand is an error naming it.
    pub fn apply(&self, obj: &Value) -> Result<bool> {
        let keys = self.keys();
        let Some(o) = extract::extract(obj, &keys)? else { return Ok(false) };
        self.state().upsert(o);
        self.maybe_compact();
        Ok(true)
    }

    /// Removes an object.
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        self.state().delete(kind, namespace, name);
        self.maybe_compact();
    }

    /// Rebuilds the interned strings when the table has grown past its threshold; idle
    /// instances are dropped (the next call starts a fresh one from a snapshot).
    fn maybe_compact(&self) {
        {
            let mut st = self.state();
            if st.interner.texts.len() < st.compact_at {
                return;
            }
            st.compact();
        }
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Lowers the compaction threshold (tests exercise compaction without 50,000 pods).
    #[doc(hidden)]
    pub fn compact_strings_above(&self, n: usize) {
        self.state().compact_at = n;
    }

    /// How many strings are interned now.
    #[doc(hidden)]
    pub fn interned_strings(&self) -> usize {
        self.state().interner.texts.len()
    }

    /// Marks a pod assumed on a node (Reserve), so the next decisions count it at once.
    pub fn assume(&self, namespace: &str, name: &str, node: &str) -> Result<()> {
        let mut st = self.state();
        let Some(p) = st.pods.get_mut(&(namespace.to_string(), name.to_string())) else {
            return Err(Error::UnknownPod(format!("{namespace}/{name}")));
        };
        p.assumed = Some(node.to_string());
        st.emit_pod(namespace, name);
        Ok(())
    }

    /// Forgets an assumption (Unreserve).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut st = self.state();
        if let Some(p) = st.pods.get_mut(&(namespace.to_string(), name.to_string()))
            && p.assumed.take().is_some()
        {
            st.emit_pod(namespace, name);
        }
    }

    /// Every node with its clique label value, sorted by name.
    pub fn nodes(&self) -> Vec<(String, Option<String>)> {
        let st = self.state();
        let mut v: Vec<_> = st.nodes.values().map(|n| (n.name.clone(), n.clique_label.clone())).collect();
        v.sort();
        v
    }

    /// Whether the view has this pod.
    pub fn has_pod(&self, namespace: &str, name: &str) -> bool {
        self.state().pods.contains_key(&(namespace.to_string(), name.to_string()))
    }

    fn fresh(&self) -> Result<(Instance, u64, u64)> {
        let mut inst = match &self.backend {
            Backend::Wasm(rt) => Instance::Wasm(rt.instantiate()?),
            Backend::Native => Instance::Native(Box::default()),
        };
        inst.configure(&self.args)?;
        let (snapshot, end, generation) = {
            let mut st = self.state();
            st.flush_strings();
            let end = st.end();
            *st.positions.entry(end).or_default() += 1;
            (st.snapshot(), end, st.generation)
        };
        if let Err(e) = inst.apply(&snapshot) {
            self.release(end, generation);
            return Err(e);
        }
        Ok((inst, end, generation))
    }

    fn release(&self, pos: u64, generation: u64) {
        let mut st = self.state();
        if generation != st.generation {
            return; // compaction forgot every older position
        }
        if let Some(n) = st.positions.get_mut(&pos) {
            *n -= 1;
            if *n == 0 {
                st.positions.remove(&pos);
            }
        }
        // Drop journal entries no instance needs any more.
        let keep_from = st.positions.keys().next().copied().unwrap_or_else(|| st.end());
        if keep_from > st.base {
            let n = (keep_from - st.base) as usize;
            st.journal.drain(..n);
            st.base = keep_from;
        }
    }

    /// An instance caught up with the journal, and its position.
    fn checkout(&self) -> Result<(Instance, u64, u64)> {
        let popped = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some((mut inst, pos, generation)) = popped else { return self.fresh() };
        let caught_up = {
            let mut st = self.state();
            if generation != st.generation || pos < st.base {
                None
            } else {
                st.flush_strings();
                let from = (pos - st.base) as usize;
                let end = st.end();
                *st.positions.entry(end).or_default() += 1;
                Some((st.journal[from..].to_vec(), end))
            }
        };
        let Some((deltas, end)) = caught_up else { return self.fresh() };
        self.release(pos, generation);
        if let Err(e) = inst.apply(&deltas) {
            self.release(end, generation);
            return Err(e);
        }
        Ok((inst, end, generation))
    }

    fn checkin(&self, inst: Instance, pos: u64, generation: u64) {
        let (lag, current) = {
            let st = self.state();
            (st.end().saturating_sub(pos) as usize, st.generation)
        };
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= MAX_IDLE || lag > MAX_LAG || generation != current {
            drop(idle);
            self.release(pos, generation);
            return;
        }
        idle.push((inst, pos, generation));
    }

    /// [`Cluster::pre_filter`] answered in the packed form of `include/cdplace.h` (for the Go
    /// adapter: no per-node strings are built here, and decoding it costs a fraction of JSON).
    pub fn pre_filter_packed(&self, namespace: &str, name: &str, overlay: &[Overlay]) -> Result<Vec<u8>> {
        self.evaluate(namespace, name, overlay, State::packed)
    }

    /// Decides where a pod may go (PreFilter), as if `overlay` were applied. A guest failure
    /// (trap, timeout, memory) is returned as an error and the instance is discarded; the next
    /// call gets a fresh one.
    pub fn pre_filter(&self, namespace: &str, name: &str, overlay: &[Overlay]) -> Result<Decision> {
        self.evaluate(namespace, name, overlay, State::decision)
    }

    /// Runs PreFilter and turns the result (ids) into `T` with the interner it was computed
    /// against; if the strings were compacted meanwhile, it runs again.
    fn evaluate<T>(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
        convert: impl Fn(&State, &policy::PreFilterResult) -> T,
    ) -> Result<T> {
        loop {
            let (r, generation) = self.pre_filter_raw(namespace, name, overlay)?;
            let st = self.state();
            if st.generation == generation {
                return Ok(convert(&st, &r));
            }
        }
    }

    fn pre_filter_raw(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
    ) -> Result<(policy::PreFilterResult, u64)> {
        let (pod, ops, wanted) = {
            let mut st = self.state();
            let Some(p) = st.pods.get(&(namespace.to_string(), name.to_string())) else {
                return Err(Error::UnknownPod(format!("{namespace}/{name}")));
            };
            let pod = p.fact.key;
            let ops: Vec<OverlayOp> = overlay
                .iter()
                .map(|o| match o {
                    Overlay::RemovePod { namespace, name } => {
                        OverlayOp::RemovePod(st.interner.id(&State::pod_key(namespace, name)))
                    }
                    Overlay::AddPod { namespace, name, node } => {
                        let k = st.interner.id(&State::pod_key(namespace, name));
                        OverlayOp::AddPod(k, st.interner.id(node))
                    }
                })
                .collect();
            (pod, ops, st.generation)
        };
        let (mut inst, pos, generation) = self.checkout()?;
        if generation != wanted {
            // Compacted between reading the ids and getting an instance: ask again.
            self.checkin(inst, pos, generation);
            return self.pre_filter_raw(namespace, name, overlay);
        }
        match inst.pre_filter(pod, &ops, now_ms()) {
            Ok(r) => {
                self.checkin(inst, pos, generation);
                Ok((r, generation))
            }
            Err(e) => {
                tracing::warn!(error = %e, pod = %format!("{namespace}/{name}"), "policy call failed; instance discarded");
                self.release(pos, generation);
                Err(e)
            }
        }
    }
}
