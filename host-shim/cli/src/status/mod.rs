//! `cdplace status`: the fleet as NVLink cliques × trays — which ComputeDomain holds each tray,
//! which trays are free or cordoned — then the ComputeDomains that wait, with their size, where
//! the size comes from and why they wait, as the policy says it.
//!
//! The cluster view is built exactly as for `cdplace explain` (live or from snapshots, see
//! [`crate::explain`]). Which ComputeDomain a pod belongs to and why a domain waits both come from
//! the policy component: one [`Cluster::pre_filter`] per non-terminal pod gives its domain, and
//! the first pending pod's (by name) status is its domain's reason. The size and its source are
//! the `(size N from ...)` part of that reason; a reason without one (a domain waiting for its
//! owner to tell its size, or for its pods to stop arriving) says why in its own words.
//!
//! A tray is a node with a clique label or with GPUs (allocatable through the extended resource
//! or published in ResourceSlices); other nodes are only counted. A tray is held by a domain when
//! a pod of it is bound or assumed there, else when one is nominated there (preemption made room),
//! else when the node's `resource.nvidia.com/computeDomain` label (set by the driver at Prepare)
//! names it. Everything is sorted (cliques by label value, trays by name with digits compared as
//! numbers, domains by namespace/name), so the same cluster draws the same map.
//!
//! Namespaces, as kubectl lists: the map always shows every tray, but only the ComputeDomains of
//! one namespace get a letter, a legend line and a pending entry — `-n NS`, else the kubeconfig
//! context's namespace (else `default`) — or of every namespace with `-A`. A tray held by a
//! domain of another namespace shows `o`.
//!
//! `--shadow` lists the shadow policy's divergences from the scheduler's Events instead of drawing
//! the map ([`shadow`], a live cluster only).
//!
//! Output (`-o`): `text` (the default, within 100 columns), `wide` (full clique labels, and each
//! domain's UID and trays), `json` and `yaml` (the [`doc::FleetStatus`] document under
//! `apiVersion: cdplace.nvidia.com/v1alpha1`, `kind: FleetStatus`), `svg`.
//!
//! Files: this one (the command and computing the fleet from the policy's answers), `doc` (the
//! JSON/YAML document), `text` (the map as text) and `svg` (the map as SVG). A new section of the
//! report is a field of [`Fleet`] computed in [`fleet`], a member of [`doc::FleetStatus`], and a
//! block in `text` and `svg`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::explain::{ExplainError, Objects, SourceOptions};
use cdplace_host::extract::{self, Object};
use cdplace_host::{Cluster, Code, Error};

pub mod doc;
pub mod shadow;
mod svg;
mod text;

/// The message prefix of every failure.
pub const PROGRAM: &str = "cdplace status";

/// The width the text map keeps within.
pub const COLUMNS: usize = 100;

/// Letters of the domains, in order; past them every domain is `#`.
const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// What a pending domain whose PreFilter succeeds is told.
const ADMITTED: &str = "PreFilter admits it now: it waits for the scheduler's next attempt or another plugin";

/// How the map is printed (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Rows of trays per clique, a legend and the pending domains, within 100 columns.
    Text,
    /// The text map with full clique labels, and each domain's UID and trays.
    Wide,
    /// The map as JSON (`kind: FleetStatus`).
    Json,
    /// The map as YAML, the same document as JSON.
    Yaml,
    /// A self-contained SVG image: one rect per tray, a legend and the pending domains.
    Svg,
}

/// The command line of `cdplace status`.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub source: SourceOptions,
    /// List the ComputeDomains of every namespace.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    pub all_namespaces: bool,
    #[command(flatten)]
    pub policy: crate::explain::PolicyOptions,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Instead of the map, list the shadow policy's divergences from the live one: the
    /// scheduler's ShadowDiverged Events of the namespace (-A: of all), newest first, under the
    /// live and shadow policies their newest PolicyApplied Events name. A live cluster only.
    #[arg(long, conflicts_with_all = ["config", "guest"])]
    pub shadow: bool,
    /// With --shadow: list at most this many divergences.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "shadow")]
    pub limit: usize,
}

/// Who holds a tray.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    Free,
    /// The index of the domain in [`Fleet::domains`].
    Domain(usize),
    /// The node's domain label names a ComputeDomain UID the cluster does not have.
    Unknown(String),
    /// No domain, but a pod without a ComputeDomain that requests GPUs runs there.
    Plain,
}

/// How a domain holds a tray.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// A pod of it is bound or assumed there (or the tray is not held by a domain).
    Pods,
    /// A pod of it is nominated there by preemption; none is bound yet.
    Nominated,
    /// Only the node's domain label names it.
    Label,
}

/// One tray of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tray {
    pub node: String,
    pub holder: Holder,
    pub hold: Hold,
    /// `spec.unschedulable`.
    pub cordoned: bool,
}

/// The trays of one clique (`None`: trays without a clique label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliqueRow {
    pub clique: Option<String>,
    pub trays: Vec<Tray>,
}

/// A ComputeDomain of the map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainEntry {
    /// Its letter; `o` for a domain outside the listed namespace.
    pub letter: char,
    pub uid: String,
    /// `namespace/name`, or `UID <uid>` when the cluster has no such ComputeDomain.
    pub name: String,
    /// Its namespace (its pods' when the cluster has no such ComputeDomain).
    pub namespace: String,
    /// Its name, when the cluster has the ComputeDomain.
    pub object_name: Option<String>,
    /// In the listed namespace (or every namespace is listed): a letter, a legend line.
    pub listed: bool,
    /// Its non-terminal workload pods.
    pub pods: u32,
    /// Of those, bound or assumed.
    pub placed: u32,
    /// Of those, neither placed nor nominated.
    pub pending: u32,
    /// Trays it holds on the map.
    pub trays: u32,
    /// Why it waits (for a domain with a pending pod): the first pending pod's PreFilter.
    pub wait: Option<Wait>,
}

/// Why a domain's pending pods wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The pod whose PreFilter this is.
    pub pod: String,
    pub code: Code,
    pub reason: String,
    /// The size and its source, from the reason's `(size N from ...)`.
    pub size: Option<(u32, String)>,
}

/// The whole map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    /// The namespace whose domains are listed; `None`: every namespace.
    pub namespace: Option<String>,
    pub cliques: Vec<CliqueRow>,
    /// Every domain on the map: the listed ones first, in order, then the others.
    pub domains: Vec<DomainEntry>,
    /// Nodes that are not trays (no clique label, no GPUs).
    pub other_nodes: u32,
}

/// Names compared with runs of digits as numbers (`tray-2` before `tray-10`).
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) if x.is_ascii_digit() && y.is_ascii_digit() => {
                let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
                let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
                let (na, nb) = (&a[..da], &b[..db]);
                let trim = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
                let (ta, tb) = (&na[trim(na)..], &nb[trim(nb)..]);
                let o = ta.len().cmp(&tb.len()).then_with(|| ta.cmp(tb)).then_with(|| da.cmp(&db));
                if o != Ordering::Equal {
                    return o;
                }
                a = &a[da..];
                b = &b[db..];
            }
            (Some(x), Some(y)) => {
                if x != y {
                    return x.cmp(y);
                }
                a = &a[1..];
                b = &b[1..];
            }
        }
    }
}

/// The `(size N from ...)` part of a policy reason: the size and its source.
pub fn size_in(reason: &str) -> Option<(u32, String)> {
    let start = reason.find("(size ")? + 1;
    let mut depth = 0usize;
    let mut end = None;
    for (i, c) in reason[start - 1..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    end = Some(start - 1 + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let inner = &reason[start..end?];
    let rest = inner.strip_prefix("size ")?;
    let (n, source) = rest.split_once(" from ")?;
    Some((n.parse().ok()?, source.to_string()))
}

struct NodeFacts {
    clique: Option<String>,
    domain_label: Option<String>,
    cordoned: bool,
    gpus: u32,
}

struct PodFacts {
    node: Option<String>,
    nominated: Option<String>,
    gpus: u32,
}

/// Draws the map of the cluster view `cluster` built from `objects`, listing the domains of
/// `namespace` (`None`: of every namespace).
pub fn fleet(cluster: &Cluster, objects: &Objects, namespace: Option<&str>) -> Result<Fleet, ExplainError> {
    let settings = cluster.settings();
    let mut nodes: BTreeMap<String, NodeFacts> = BTreeMap::new();
    let mut slice_gpus: BTreeMap<String, u32> = BTreeMap::new();
    let mut pods: BTreeMap<(String, String), PodFacts> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    // Domain UID -> (namespace, name) of the ComputeDomain objects.
    let mut objects_of: BTreeMap<String, (String, String)> = BTreeMap::new();
    // Later objects replace earlier ones, as in the view; build_cluster has already checked them.
    let mut slices: BTreeMap<String, (Option<String>, u32, String, i64)> = BTreeMap::new();
    for o in &objects.objects {
        let Ok(Some(obj)) = extract::extract(&o.value, settings) else { continue };
        match obj {
            Object::Node { name, clique_label, domain_label, unschedulable, gpus } => {
                nodes.insert(name, NodeFacts { clique: clique_label, domain_label, cordoned: unschedulable, gpus });
            }
            Object::Slice { name, node, gpus, pool, generation } => {
                slices.insert(name, (node, gpus, pool, generation));
            }
            Object::Pod { namespace, name, terminal, node_name, nominated_node_name, gpus, .. } => {
                if terminal {
                    pods.remove(&(namespace, name));
                } else {
                    pods.insert((namespace, name), PodFacts { node: node_name, nominated: nominated_node_name, gpus });
                }
            }
            Object::Domain { namespace, name, uid, .. } => {
                names.insert(uid.clone(), format!("{namespace}/{name}"));
                objects_of.insert(uid, (namespace, name));
            }
            _ => {}
        }
    }
    // As the view counts them: only the slices of each pool's newest generation.
    let mut newest: BTreeMap<String, i64> = BTreeMap::new();
    for (_, _, pool, generation) in slices.values() {
        let g = newest.entry(pool.clone()).or_insert(*generation);
        *g = (*g).max(*generation);
    }
    for (node, gpus, pool, generation) in slices.into_values() {
        if let Some(n) = node
            && newest.get(&pool) == Some(&generation)
        {
            let total = slice_gpus.entry(n).or_default();
            *total = total.saturating_add(gpus);
        }
    }

    #[derive(Default)]
    struct Agg {
        namespace: String,
        pods: u32,
        placed: u32,
        pending: u32,
        wait: Option<Wait>,
    }
    let mut aggs: BTreeMap<String, Agg> = BTreeMap::new();
    // node -> (domain uid, how) from pods; plain GPU pods by node.
    let mut held: BTreeMap<String, (String, Hold)> = BTreeMap::new();
    let mut plain: BTreeMap<String, ()> = BTreeMap::new();
    for ((ns, name), p) in &pods {
        let d = cluster.pre_filter(ns, name, &[]).map_err(|e| match e {
            Error::UnknownPod(m) => ExplainError::NotFound(format!("pod {m} is not in the cluster view")),
            e => ExplainError::Policy(e),
        })?;
        let Some(uid) = d.domain.clone() else {
            if let Some(n) = &p.node
                && p.gpus > 0
            {
                plain.insert(n.clone(), ());
            }
            continue;
        };
        // An IMEX daemon pod of the domain: the policy skips it, and it holds no tray of its own.
        if d.status.code == Code::Skip {
            continue;
        }
        let agg = aggs.entry(uid.clone()).or_default();
        agg.namespace.clone_from(ns);
        agg.pods += 1;
        if let Some(n) = &p.node {
            agg.placed += 1;
            held.insert(n.clone(), (uid, Hold::Pods));
        } else if let Some(n) = &p.nominated {
            held.entry(n.clone()).or_insert((uid, Hold::Nominated));
        } else {
            agg.pending += 1;
            if agg.wait.is_none() {
                agg.wait = Some(Wait {
                    pod: format!("{ns}/{name}"),
                    code: d.status.code,
                    size: size_in(&d.status.reason),
                    reason: d.status.reason,
                });
            }
        }
    }

    // Trays and their holders (by UID for now).
    /// A tray before its holder is resolved: node, holder UID, how, cordoned, a plain GPU pod.
    type RawTray = (String, Option<String>, Hold, bool, bool);
    let mut rows: BTreeMap<Option<String>, Vec<RawTray>> = BTreeMap::new();
    let mut other_nodes = 0;
    for (name, n) in &nodes {
        let clique = n.clique.clone().filter(|c| !c.is_empty());
        let gpus = n.gpus.max(slice_gpus.get(name).copied().unwrap_or(0));
        if clique.is_none() && gpus == 0 {
            other_nodes += 1;
            continue;
        }
        let (uid, hold) = match held.get(name) {
            Some((uid, hold)) => (Some(uid.clone()), *hold),
            None => match n.domain_label.clone().filter(|l| !l.is_empty()) {
                Some(uid) => (Some(uid), Hold::Label),
                None => (None, Hold::Pods),
            },
        };
        rows.entry(clique).or_default().push((name.clone(), uid, hold, n.cordoned, plain.contains_key(name)));
    }

    // Domains on the map: those with pods, and those a tray's label names that the cluster has.
    let mut uids: Vec<String> = aggs.keys().cloned().collect();
    for trays in rows.values() {
        for (_, uid, ..) in trays {
            if let Some(u) = uid
                && names.contains_key(u)
                && !uids.contains(u)
            {
                uids.push(u.clone());
            }
        }
    }
    let display = |uid: &str| names.get(uid).cloned().unwrap_or_else(|| format!("UID {uid}"));
    // A domain's namespace: its object's, else its pods'.
    let namespace_of: BTreeMap<String, String> = uids
        .iter()
        .map(|uid| {
            let ns = match objects_of.get(uid) {
                Some((ns, _)) => ns.clone(),
                None => aggs.get(uid).map(|a| a.namespace.clone()).unwrap_or_default(),
            };
            (uid.clone(), ns)
        })
        .collect();
    let listed = |uid: &str| namespace.is_none_or(|ns| namespace_of.get(uid).is_some_and(|n| n == ns));
    // Listed domains first (they get the letters), each group by name.
    uids.sort_by(|a, b| listed(b).cmp(&listed(a)).then_with(|| display(a).cmp(&display(b))).then_with(|| a.cmp(b)));
    let mut domains: Vec<DomainEntry> = uids
        .iter()
        .enumerate()
        .map(|(i, uid)| {
            let is_listed = listed(uid);
            let namespace = namespace_of.get(uid).cloned().unwrap_or_default();
            let agg = aggs.remove(uid).unwrap_or_default();
            DomainEntry {
                letter: if is_listed { LETTERS.chars().nth(i).unwrap_or('#') } else { 'o' },
                uid: uid.clone(),
                name: display(uid),
                namespace,
                object_name: objects_of.get(uid).map(|(_, n)| n.clone()),
                listed: is_listed,
                pods: agg.pods,
                placed: agg.placed,
                pending: agg.pending,
                trays: 0,
                wait: agg.wait,
            }
        })
        .collect();
    let index: BTreeMap<String, usize> = uids.iter().enumerate().map(|(i, u)| (u.clone(), i)).collect();

    let mut cliques = Vec::new();
    // Labelled cliques first, by label value; trays without a clique last.
    let mut keys: Vec<Option<String>> = rows.keys().cloned().collect();
    keys.sort_by(|a, b| match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.cmp(y),
    });
    for key in keys {
        let mut trays: Vec<Tray> = rows
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|(node, uid, hold, cordoned, plain)| {
                let holder = match uid {
                    Some(u) => match index.get(&u) {
                        Some(&i) => {
                            domains[i].trays += 1;
                            Holder::Domain(i)
                        }
                        None => Holder::Unknown(u),
                    },
                    None if plain => Holder::Plain,
                    None => Holder::Free,
                };
                let hold = if matches!(holder, Holder::Domain(_) | Holder::Unknown(_)) { hold } else { Hold::Pods };
                Tray { node, holder, hold, cordoned }
            })
            .collect();
        trays.sort_by(|a, b| natural_cmp(&a.node, &b.node));
        cliques.push(CliqueRow { clique: key, trays });
    }
    Ok(Fleet { namespace: namespace.map(String::from), cliques, domains, other_nodes })
}

/// Runs the whole command: reads the arguments and the cluster, loads the component, draws.
pub fn run(opts: &Options) -> Result<Fleet, ExplainError> {
    let args = opts.policy.args()?;
    let objects = opts.source.read()?;
    let namespace = (!opts.all_namespaces).then(|| opts.source.namespace(&objects));
    let cluster = opts.policy.cluster(&args, &objects)?;
    fleet(&cluster, &objects, namespace.as_deref())
}

/// Short clique names for the rows: `<first 8 of the cluster UUID>….<clique ID>` for labels of
/// the driver's `<cluster UUID>.<clique ID>` form, unless two would read the same (then the
/// full labels).
pub fn clique_names(rows: &[CliqueRow]) -> Vec<String> {
    let short = |c: &str| match c.rsplit_once('.') {
        Some((uuid, id)) if uuid.chars().count() > 12 => format!("{}….{id}", uuid.chars().take(8).collect::<String>()),
        _ => c.to_string(),
    };
    let full = |r: &CliqueRow| r.clique.clone().unwrap_or_else(|| "(no clique)".to_string());
    let names: Vec<String> = rows.iter().map(|r| r.clique.as_deref().map_or_else(|| full(r), short)).collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    if sorted.len() == names.len() { names } else { rows.iter().map(full).collect() }
}

impl Fleet {
    /// The holder's character and the mark after it: the two characters of a tray's cell.
    pub fn cell(&self, t: &Tray) -> (char, char) {
        let holder = match &t.holder {
            Holder::Free => '.',
            Holder::Domain(i) => self.domains[*i].letter,
            Holder::Unknown(_) => '?',
            Holder::Plain => '+',
        };
        let mark = match (t.cordoned, t.hold) {
            (true, _) => 'x',
            (false, Hold::Nominated) => '*',
            (false, Hold::Label) if t.holder != Holder::Free => '\'',
            _ => ' ',
        };
        (holder, mark)
    }

    fn trays(&self) -> impl Iterator<Item = &Tray> {
        self.cliques.iter().flat_map(|c| &c.trays)
    }

    /// The map in `format`, ending with a newline.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Text => self.text(false),
            Format::Wide => self.text(true),
            Format::Json => crate::output::json(doc::KIND, &self.doc()),
            Format::Yaml => crate::output::yaml(doc::KIND, &self.doc()),
            Format::Svg => self.svg(),
        }
    }

    /// The domains with a letter and a legend line.
    pub fn listed(&self) -> impl Iterator<Item = &DomainEntry> {
        self.domains.iter().filter(|d| d.listed)
    }

    /// Two lines: the trays, then the domains.
    fn summary(&self) -> [String; 2] {
        let trays = self.trays().count();
        let free = self.trays().filter(|t| t.holder == Holder::Free && !t.cordoned).count();
        let cordoned = self.trays().filter(|t| t.cordoned).count();
        let pending = self.listed().filter(|d| d.pending > 0).count();
        let labelled = self.cliques.iter().filter(|c| c.clique.is_some()).count();
        let mut domains = format!("{} ComputeDomain(s), {pending} pending", self.listed().count());
        if let Some(ns) = &self.namespace {
            let others = self.domains.len() - self.listed().count();
            domains = format!("namespace {ns}: {domains}");
            if others > 0 {
                let _ = write!(domains, "; {others} in other namespaces (o; -A lists them)");
            }
        }
        if self.other_nodes > 0 {
            let _ = write!(domains, "; {} node(s) without GPUs or clique label not shown", self.other_nodes);
        }
        [format!("{trays} trays in {labelled} NVLink clique(s): {free} free, {cordoned} cordoned"), domains]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SnapshotObject;
    use cdplace_testkit::builders::{self as b, clique};
    use serde_json::{Value, json};

    const DOMAIN_LABEL: &str = "resource.nvidia.com/computeDomain";

    pub(super) fn owned_by_job(mut p: Value, job: &str) -> Value {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": format!("uid-{job}"), "controller": true}]);
        p
    }

    /// 8 racks of 18 trays: alpha runs on 10 trays of rack 1, beta fills rack 2, rack 3 has a
    /// cordoned tray and one alpha's label still holds, rack 4 a tray labelled for a domain the
    /// cluster does not have, rack 5 a plain GPU pod, rack 6 delta nominated by preemption;
    /// gamma's Job asks 200 pods, more than the fleet holds even across cliques.
    pub(super) fn fleet_objects() -> Vec<Value> {
        let mut o = Vec::new();
        for r in 1..=8 {
            o.extend(b::rack(&format!("r{r}"), r, 18));
        }
        o.push(b::node("cpu-0", None, 0));
        for (name, uid) in
            [("alpha", "uid-alpha"), ("beta", "uid-beta"), ("gamma", "uid-gamma"), ("delta", "uid-delta")]
        {
            o.extend(b::domain("team", name, uid));
        }
        for i in 0..10 {
            o.push(b::bound(b::cd_pod("team", "alpha", &format!("alpha-{i}")), &format!("r1-{i:02}")));
        }
        for i in 0..18 {
            o.push(b::bound(b::cd_pod("team", "beta", &format!("beta-{i}")), &format!("r2-{i:02}")));
        }
        let node = |o: &mut Vec<Value>, name: &str, f: &dyn Fn(Value) -> Value| {
            let i = o.iter().position(|v| v["kind"] == "Node" && v["metadata"]["name"] == name).unwrap();
            o[i] = f(o[i].clone());
        };
        node(&mut o, "r3-05", &b::cordon);
        node(&mut o, "r3-06", &|n| b::label(n, DOMAIN_LABEL, "uid-alpha"));
        node(&mut o, "r4-00", &|n| b::label(n, DOMAIN_LABEL, "uid-gone"));
        o.push(b::bound(b::pod("team", "plain", None, 4), "r5-00"));
        o.push(b::nominated(b::cd_pod("team", "delta", "delta-0"), "r6-00"));
        o.push(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"namespace": "team", "name": "big"},
            "spec": {"parallelism": 200, "completions": 200}}));
        for i in 0..3 {
            o.push(owned_by_job(b::cd_pod("team", "gamma", &format!("gamma-{i}")), "big"));
        }
        o
    }

    pub(super) fn objects(values: Vec<Value>) -> Objects {
        let objs = values
            .into_iter()
            .enumerate()
            .map(|(i, value)| SnapshotObject { file: "fleet.yaml".into(), origin: format!("item {}", i + 1), value })
            .collect();
        Objects::from_snapshots(objs)
    }

    pub(super) fn map(values: Vec<Value>) -> Fleet {
        map_in(values, None)
    }

    /// The map listing the domains of `namespace` (`None`: every namespace).
    pub(in crate::status) fn map_in(values: Vec<Value>, namespace: Option<&str>) -> Fleet {
        let objects = objects(values);
        let cluster =
            crate::explain::build_cluster(cdplace_testkit::native::backend(), "", None, &objects).expect("cluster");
        fleet(&cluster, &objects, namespace).expect("fleet")
    }

    #[test]
    fn the_same_cluster_in_another_order_draws_the_same_map() {
        let mut values = fleet_objects();
        let a = map(values.clone());
        values.reverse();
        // Reversed, the nodes come after their pods; the map does not change.
        let b = map(values);
        assert_eq!(a.render(Format::Text), b.render(Format::Text));
        assert_eq!(a.render(Format::Svg), b.render(Format::Svg));
    }

    #[test]
    fn sizes_read_from_reasons() {
        assert_eq!(
            size_in(
                "X needs 4 trays in one NVLink clique (size 4 from JobSet a/b spec.replicatedJobs (w 2×2)); the most"
            ),
            Some((4, "JobSet a/b spec.replicatedJobs (w 2×2)".to_string()))
        );
        assert_eq!(
            size_in("ComputeDomain a/b is waiting for Job a/j (the pods' owner) to tell the domain's size"),
            None
        );
        assert_eq!(size_in("(size 3 from"), None);
    }

    #[test]
    fn natural_order_and_short_clique_names() {
        let mut v = vec!["t-10", "t-2", "t-02", "t-1", "s-9"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["s-9", "t-1", "t-2", "t-02", "t-10"]);
        let row = |c: Option<&str>| CliqueRow { clique: c.map(String::from), trays: Vec::new() };
        assert_eq!(
            clique_names(&[row(Some(&clique(1))), row(Some("rack-a")), row(None)]),
            ["0f8e7d6c….1", "rack-a", "(no clique)"]
        );
        // Two clusters whose UUIDs start alike: the full labels.
        let same = ["0f8e7d6c-aaaa-4321-9876-abcdef012345.1", "0f8e7d6c-bbbb-4321-9876-abcdef012345.1"];
        assert_eq!(clique_names(&[row(Some(same[0])), row(Some(same[1]))]), same);
    }
}
