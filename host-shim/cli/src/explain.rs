//! `cdplace explain`: what the placement policy decides for one pod of a cluster snapshot, node
//! by node, computed by the real policy component exactly as the scheduler plugin runs it.
//!
//! Input is a live cluster read through a kubeconfig (`--kubeconfig`, `--context`; see
//! [`crate::live`]), or snapshot files as `kubectl get ... -o yaml` (or `-o json`) writes them:
//! a `v1 List` with `items`, multi-document YAML, or JSON (one object, a List, or several values
//! in a row). Several files may be given; their objects are applied in order, so a later object
//! replaces an earlier one with the same kind, namespace and name. Kinds cdplace does not read
//! are ignored. A snapshot should hold the pods' owners (Jobs, StatefulSets, ReplicaSets,
//! JobSets, LeaderWorkerSets) as the live source lists them: a pod whose owner is missing makes
//! its domain wait for the owner's size, as it does in the scheduler.
//!
//! Every object is extracted by [`extract::extract`] under the plugin arguments (`--config`),
//! pods get their owner key and workload objects their size ([`crate::owners`]), and the whole
//! lot is applied as one facts batch; then [`Cluster::pre_filter`] decides for the pod and
//! [`Decision::node`] gives each node's Filter status and Score, as the plugin's Filter and Score
//! do. The selected node is the feasible one with the highest cdplace score (ties: the smallest
//! name); the real scheduler also weighs other plugins' scores, so it is cdplace's preference,
//! not a prediction of the binding.
//!
//! Exit codes of the command ([`ExplainError::exit_code`]): 0 with a report, 2 for unusable input
//! (a file that cannot be read or parsed, an object the extractor rejects, invalid plugin
//! arguments, a pod not in the snapshot, a kubeconfig that cannot be used), 1 when the policy
//! itself fails (trap, timeout, memory), 3 when the live cluster cannot be read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::Value;

use cdplace_host::extract::{self, Kind, Object};
use cdplace_host::facts::{self, Record};
use cdplace_host::{Backend, Cluster, Code, Decision, Error, Runtime, Status};

use crate::live::LiveOptions;
use crate::owners::{self, OwnerKind};

/// The message prefix of every failure.
pub const PROGRAM: &str = "cdplace explain";

pub use crate::snapshot::{SnapshotObject, load_snapshot, parse_snapshot};

/// Why `cdplace explain` produced no report.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// A file could not be read or parsed, or holds an object the extractor rejects; the message
    /// names the document or item and the object.
    #[error("{file}: {message}")]
    Input { file: String, message: String },
    /// The policy rejected the plugin arguments; its text is kept as it is.
    #[error("{file}: {error}")]
    Args { file: String, error: Error },
    /// The pod is not in the snapshot, or is finished.
    #[error("{0}")]
    UnknownPod(String),
    /// The policy component could not be loaded, or failed while deciding.
    #[error(transparent)]
    Policy(Error),
    /// The kubeconfig could not be read, or has no such context.
    #[error("{file}: cannot use the kubeconfig")]
    Kubeconfig {
        file: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The live cluster could not be read (unreachable, forbidden, a failed list); `what` names
    /// the server and the request.
    #[error("{what}")]
    Live {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl ExplainError {
    /// The process exit status for this failure: 1 when the policy failed, 2 for bad input
    /// (a kubeconfig included), 3 when the live cluster could not be read.
    pub fn exit_code(&self) -> u8 {
        match self {
            ExplainError::Policy(_) => 1,
            ExplainError::Live { .. } => 3,
            _ => 2,
        }
    }
}

pub(crate) fn input(file: &Path, message: impl Into<String>) -> ExplainError {
    ExplainError::Input { file: file.display().to_string(), message: message.into() }
}

/// A pod named on the command line: `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl PodRef {
    /// Parses `NAMESPACE/NAME`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(PodRef { namespace: ns.to_string(), name: name.to_string() })
            }
            _ => Err(format!("expected NAMESPACE/NAME, got {s:?}")),
        }
    }
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report with a table of nodes.
    Text,
    /// One JSON object.
    Json,
}

/// Where the cluster comes from: snapshot files, else the live cluster of a kubeconfig.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceOptions {
    /// Cluster objects as `kubectl get -o yaml|json` writes them, instead of the live cluster.
    /// Repeat to layer files: a later object replaces an earlier one with the same kind,
    /// namespace and name.
    #[arg(long = "snapshot", value_name = "FILE")]
    pub snapshots: Vec<PathBuf>,
    #[command(flatten)]
    pub live: LiveOptions,
}

/// The objects of a cluster and which owner APIs it serves.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub objects: Vec<SnapshotObject>,
    /// Owner kinds whose API is served: for a live cluster, what discovery lists; for snapshots,
    /// the kinds they hold objects of.
    pub served: std::collections::BTreeSet<OwnerKind>,
}

impl Objects {
    /// Snapshot objects, serving the owner kinds they hold.
    pub fn from_snapshots(objects: Vec<SnapshotObject>) -> Self {
        let served = objects
            .iter()
            .filter_map(|o| {
                let s = |k: &str| o.value.get(k).and_then(Value::as_str).unwrap_or("");
                OwnerKind::of(s("apiVersion"), s("kind"))
            })
            .collect();
        Objects { objects, served }
    }
}

impl SourceOptions {
    /// Reads the snapshots, or the live cluster when none is given.
    pub fn read(&self) -> Result<Objects, ExplainError> {
        if self.snapshots.is_empty() {
            let live = crate::live::read_cluster(&self.live)?;
            return Ok(Objects { objects: live.objects, served: live.served });
        }
        let mut objects = Vec::new();
        for path in &self.snapshots {
            objects.extend(load_snapshot(path)?);
        }
        Ok(Objects::from_snapshots(objects))
    }
}

/// The command line of `cdplace explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub source: SourceOptions,
    /// The pod to explain.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = PodRef::parse)]
    pub pod: PodRef,
    /// The plugin arguments (ComputeDomainPlacementArgs fields) as YAML or JSON; defaults when
    /// absent.
    #[arg(long, value_name = "ARGS.yaml")]
    pub config: Option<PathBuf>,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The policy component; by default the one beside this executable or in this workspace's
    /// build output.
    #[arg(long, value_name = "PATH")]
    pub guest: Option<PathBuf>,
}

/// Reads the plugin arguments (YAML or JSON) and returns them as JSON; an empty file means the
/// defaults. The policy validates them in [`Cluster::new`].
pub fn load_args(path: &Path) -> Result<String, ExplainError> {
    let text = std::fs::read_to_string(path).map_err(|e| input(path, format!("cannot read: {e}")))?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| input(path, e.to_string()))?;
    Ok(match value {
        Value::Null => String::new(),
        v => v.to_string(),
    })
}

/// Builds the cluster view: validates `args` (JSON, from `args_file` when given), extracts
/// every object in order (pods with their owner key, workload objects as their size) and
/// applies them as one batch.
pub fn build_cluster(
    backend: Arc<dyn Backend>,
    args: &str,
    args_file: Option<&Path>,
    objects: &Objects,
) -> Result<Cluster, ExplainError> {
    let cluster = Cluster::new(backend, args).map_err(|e| match e {
        Error::InvalidArgs(_) => ExplainError::Args {
            file: args_file.map_or_else(|| "default plugin args".to_string(), |p| p.display().to_string()),
            error: e,
        },
        e => ExplainError::Policy(e),
    })?;
    let served = |k: OwnerKind| !k.is_custom() || objects.served.contains(&k);
    let mut records = Vec::with_capacity(objects.objects.len());
    for o in &objects.objects {
        let rejected = |m: String| {
            let what = extract::describe(&o.value);
            let rest = m.strip_prefix(&format!("{what}: ")).unwrap_or(&m).to_string();
            input(&o.file, format!("{} ({what}): {rest}", o.origin))
        };
        let s = |k: &str| o.value.get(k).and_then(Value::as_str).unwrap_or("");
        if let Some(kind) = OwnerKind::of(s("apiVersion"), s("kind")) {
            let size = owners::size_of(kind, &o.value).map_err(rejected)?;
            let owner = Object::Owner { key: size.key, size: Some(size.size), source: size.source, priority: None };
            records.push(Record::Upsert(owner));
            continue;
        }
        let object = extract::extract(&o.value, cluster.settings()).map_err(|e| match e {
            Error::InvalidObject(m) => rejected(m),
            e => ExplainError::Policy(e),
        })?;
        if let Some(mut obj) = object {
            // The JSON extraction leaves the owner empty; the CLI resolves it as the Go adapter does.
            if let Object::Pod { owner, .. } = &mut obj {
                *owner = owners::key_of(&o.value, served);
            }
            records.push(Record::Upsert(obj));
        }
    }
    cluster.apply_facts(&facts::encode(&records)).map_err(ExplainError::Policy)?;
    Ok(cluster)
}

fn code<S: Serializer>(c: &Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

/// A framework status in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    #[serde(serialize_with = "code")]
    pub code: Code,
    pub reason: String,
}

impl From<&Status> for StatusReport {
    fn from(s: &Status) -> Self {
        StatusReport { code: s.code, reason: s.reason.clone() }
    }
}

/// PreFilter's verdict for the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreFilterReport {
    #[serde(serialize_with = "code")]
    pub code: Code,
    pub reason: String,
    /// The PreFilterResult node set: the only nodes the pod may go to, when restricted (the
    /// domain's clique once it runs, the best-fitting cliques before it starts).
    pub nodes: Option<Vec<String>>,
}

/// Filter and Score for one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    pub name: String,
    /// The node's clique label value.
    pub clique: Option<String>,
    pub filter: StatusReport,
    /// Score, for nodes that pass Filter.
    pub score: Option<u32>,
}

/// Everything `cdplace explain` says about a pod; its JSON form is the `--output json` object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `namespace/name`.
    pub pod: String,
    /// The UID of the pod's ComputeDomain.
    pub compute_domain: Option<String>,
    /// `namespace/name` of that ComputeDomain when the snapshot has it (text output only).
    #[serde(skip)]
    pub compute_domain_name: Option<String>,
    pub pre_filter: PreFilterReport,
    /// Every node, sorted by name.
    pub nodes: Vec<NodeReport>,
    /// The feasible node with the highest score (ties: the smallest name).
    pub selected: Option<String>,
}

/// Decides for `pod` in `cluster`; `objects` (what the cluster was built from) only name things
/// in messages and the text report.
pub fn explain(cluster: &Cluster, objects: &[SnapshotObject], pod: &PodRef) -> Result<Report, ExplainError> {
    if !cluster.has_pod(&pod.namespace, &pod.name) {
        return Err(unknown_pod(objects, pod));
    }
    let decision = cluster.pre_filter(&pod.namespace, &pod.name, &[]).map_err(|e| match e {
        Error::UnknownPod(_) => unknown_pod(objects, pod),
        e => ExplainError::Policy(e),
    })?;
    let mut nodes: Vec<NodeReport> = cluster
        .nodes()
        .into_iter()
        .map(|(name, clique)| {
            let (status, score) = decision.node(&name, clique.as_deref());
            NodeReport { filter: status.into(), score, name, clique }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let selected = select(&decision, &nodes);
    let compute_domain_name = decision.domain.as_deref().and_then(|uid| domain_name(objects, uid));
    Ok(Report {
        pod: pod.to_string(),
        compute_domain: decision.domain.clone(),
        compute_domain_name,
        pre_filter: PreFilterReport {
            code: decision.status.code,
            reason: decision.status.reason.clone(),
            nodes: decision.node_set.clone(),
        },
        nodes,
        selected,
    })
}

/// The feasible node with the highest score, ties to the smallest name; none unless PreFilter
/// succeeded.
fn select(decision: &Decision, nodes: &[NodeReport]) -> Option<String> {
    if decision.status.code != Code::Success {
        return None;
    }
    nodes
        .iter()
        .filter(|n| n.filter.code == Code::Success)
        .filter(|n| decision.node_set.as_ref().is_none_or(|a| a.contains(&n.name)))
        .max_by(|a, b| a.score.cmp(&b.score).then_with(|| b.name.cmp(&a.name)))
        .map(|n| n.name.clone())
}

fn is_kind(v: &Value, kind: Kind) -> bool {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let k = v.get("kind").and_then(Value::as_str).unwrap_or("");
    Kind::of(api_version, k) == Some(kind)
}

fn domain_name(objects: &[SnapshotObject], uid: &str) -> Option<String> {
    objects
        .iter()
        .rev()
        .map(|o| &o.value)
        .find(|v| is_kind(v, Kind::ComputeDomain) && v.pointer("/metadata/uid").and_then(Value::as_str) == Some(uid))
        .map(|v| {
            let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("");
            format!("{}/{}", s("/metadata/namespace"), s("/metadata/name"))
        })
}

/// Why the pod cannot be explained from these objects: it has none, or it has finished (the
/// cluster view drops finished pods). `None` when the pod is there.
fn absent_pod(objects: &[SnapshotObject], pod: &PodRef) -> Option<String> {
    let found = objects.iter().rev().find(|o| {
        is_kind(&o.value, Kind::Pod)
            && o.value.pointer("/metadata/namespace").and_then(Value::as_str) == Some(&pod.namespace)
            && o.value.pointer("/metadata/name").and_then(Value::as_str) == Some(&pod.name)
    });
    let Some(found) = found else {
        let mut files: Vec<String> = objects.iter().map(|o| o.file.display().to_string()).collect();
        files.dedup();
        if files.is_empty() {
            return Some(format!("pod {pod} is not in the snapshot (it has no objects)"));
        }
        return Some(format!("pod {pod} is not in the snapshot ({})", files.join(", ")));
    };
    match found.value.pointer("/status/phase").and_then(Value::as_str) {
        Some(phase @ ("Succeeded" | "Failed")) => {
            Some(format!("pod {pod} has finished (phase {phase}); the scheduler never places it"))
        }
        _ => None,
    }
}

fn unknown_pod(objects: &[SnapshotObject], pod: &PodRef) -> ExplainError {
    ExplainError::UnknownPod(
        absent_pod(objects, pod).unwrap_or_else(|| format!("pod {pod} is not in the cluster view")),
    )
}

/// Reads the plugin arguments (`--config`) as JSON; empty for the defaults.
pub fn read_args(config: Option<&Path>) -> Result<String, ExplainError> {
    match config {
        Some(p) => load_args(p),
        None => Ok(String::new()),
    }
}

/// Loads the policy component: `--guest`, else the one beside this executable.
pub fn load_runtime(guest: Option<&Path>) -> Result<Arc<Runtime>, ExplainError> {
    let guest = match guest.map(Path::to_path_buf).or_else(crate::default_guest_path) {
        Some(g) => g,
        None => {
            return Err(ExplainError::Input {
                file: "cdplace_guest.wasm".into(),
                message: "no policy component beside the cdplace executable (`make build` puts it there), and no --guest PATH".into(),
            });
        }
    };
    if !guest.exists() {
        return Err(input(&guest, "no policy component here (build it with `make guest`, or pass --guest PATH)"));
    }
    Runtime::from_file(&guest).map_err(ExplainError::Policy)
}

/// Runs the whole command: reads the arguments and the cluster, loads the component, decides.
pub fn run(opts: &Options) -> Result<Report, ExplainError> {
    let args = read_args(opts.config.as_deref())?;
    let objects = opts.source.read()?;
    // Before the component is compiled, which takes a while.
    if let Some(why) = absent_pod(&objects.objects, &opts.pod) {
        return Err(ExplainError::UnknownPod(why));
    }
    let runtime = load_runtime(opts.guest.as_deref())?;
    let cluster = build_cluster(runtime, &args, opts.config.as_deref(), &objects)?;
    explain(&cluster, &objects.objects, &opts.pod)
}

impl Report {
    /// The report in `format`, ending with a newline.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(self).expect("a report serializes");
                s.push('\n');
                s
            }
            Format::Text => self.text(),
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "Pod:            {}", self.pod);
        let domain = match (&self.compute_domain, &self.compute_domain_name) {
            (Some(uid), Some(name)) => format!("{name} (UID {uid})"),
            (Some(uid), None) => format!("UID {uid} (the ComputeDomain object is not in the snapshot)"),
            (None, _) => "none".to_string(),
        };
        let _ = writeln!(out, "ComputeDomain:  {domain}");
        let pf = &self.pre_filter;
        let verdict = match pf.code {
            Code::Skip => "Skip (cdplace does not filter or score this pod)".to_string(),
            c if pf.reason.is_empty() => c.as_str().to_string(),
            c => format!("{}: {}", c.as_str(), pf.reason),
        };
        let _ = writeln!(out, "PreFilter:      {verdict}");
        if let Some(nodes) = &pf.nodes {
            let _ = writeln!(
                out,
                "Only nodes:     {}",
                if nodes.is_empty() { "(none)".to_string() } else { nodes.join(", ") }
            );
        }
        let _ = writeln!(out);
        if self.nodes.is_empty() {
            let _ = writeln!(out, "(no nodes in the snapshot)");
        } else {
            let rows: Vec<[String; 5]> = self
                .nodes
                .iter()
                .map(|n| {
                    [
                        n.name.clone(),
                        n.clique.clone().unwrap_or_else(|| "-".into()),
                        n.filter.code.as_str().to_string(),
                        n.score.map_or_else(|| "-".into(), |s| s.to_string()),
                        // A failed PreFilter is every node's verdict: its reason is printed once, above.
                        if pf.code != Code::Success && n.filter.code == pf.code && n.filter.reason == pf.reason {
                            "(PreFilter)".to_string()
                        } else {
                            n.filter.reason.clone()
                        },
                    ]
                })
                .collect();
            let header = ["NODE", "CLIQUE", "FILTER", "SCORE", "REASON"].map(String::from);
            let mut widths = [0usize; 4];
            for r in std::iter::once(&header).chain(&rows) {
                for (w, cell) in widths.iter_mut().zip(r) {
                    *w = (*w).max(cell.chars().count());
                }
            }
            for r in std::iter::once(&header).chain(&rows) {
                let mut line = String::new();
                for (w, cell) in widths.iter().zip(r) {
                    let _ = write!(line, "{cell:<w$}  ");
                }
                line.push_str(&r[4]);
                let _ = writeln!(out, "{}", line.trim_end());
            }
        }
        let _ = writeln!(out);
        let selected = match &self.selected {
            Some(name) => {
                let score = self.nodes.iter().find(|n| &n.name == name).and_then(|n| n.score);
                match score {
                    Some(s) => format!("{name} (score {s})"),
                    None => name.clone(),
                }
            }
            None if pf.code == Code::Skip => "none (cdplace skips this pod; other plugins decide)".to_string(),
            None if pf.code != Code::Success => format!("none (PreFilter: {})", pf.code.as_str()),
            None => "none (no node passes Filter)".to_string(),
        };
        let _ = writeln!(out, "Selected:       {selected}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<SnapshotObject>, ExplainError> {
        parse_snapshot(text, Path::new("snap.yaml"))
    }

    fn origins(objs: &[SnapshotObject]) -> Vec<(&str, &str)> {
        objs.iter().map(|o| (o.origin.as_str(), o.value["kind"].as_str().unwrap_or(""))).collect()
    }

    #[test]
    fn reads_lists_documents_and_json() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: d}}\nmetadata:\n  resourceVersion: \"\"\n";
        assert_eq!(origins(&parse(list).unwrap()), [("item 1", "Node"), ("item 2", "Pod")]);

        let docs = "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\nkind: List\napiVersion: v1\nitems: [{kind: Pod}]\n";
        assert_eq!(origins(&parse(docs).unwrap()), [("document 1", "Node"), ("document 3, item 1", "Pod")]);

        let json = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}]}"#;
        assert_eq!(origins(&parse(json).unwrap()), [("item 1", "Node")]);
        assert_eq!(
            origins(&parse(r#"{"kind": "Node"} {"kind": "Pod"}"#).unwrap()),
            [("document 1", "Node"), ("document 2", "Pod")]
        );
    }

    #[test]
    fn typed_list_items_get_kind_and_api_version() {
        let objs = parse("apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p, namespace: d}\n").unwrap();
        assert_eq!(objs[0].value["kind"], "Pod");
        assert_eq!(objs[0].value["apiVersion"], "v1");
    }

    #[test]
    fn bad_input_names_file_and_document() {
        let e = parse("apiVersion: v1\nkind: Node\n---\nmetadata: [unclosed\n").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("snap.yaml: document 2: "), "{e}");
        let e = parse("kind: List\nitems: [1]\n").unwrap_err();
        assert_eq!(e.to_string(), "snap.yaml: item 1: expected a Kubernetes object, got a number");
        let e = parse("{\"kind\": ").unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: document 1: EOF"), "{e}");
    }

    #[test]
    fn rejected_object_is_named_with_its_origin() {
        let objs = parse("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: default}\nspec: 5\n").unwrap();
        let e = build_cluster(cdplace_testkit::native::backend(), "", None, &Objects::from_snapshots(objs.clone()))
            .unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: document 2 (Pod default/x): invalid type"), "{e}");

        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: d}}\n- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaimTemplate\n  metadata: {name: t, namespace: d}\n  spec: {spec: {devices: {requests: [channel]}}}\n";
        let e =
            build_cluster(cdplace_testkit::native::backend(), "", None, &Objects::from_snapshots(parse(list).unwrap()))
                .unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: item 2 (ResourceClaimTemplate d/t): invalid type"), "{e}");
    }

    #[test]
    fn invalid_args_keep_the_policy_text() {
        let e = build_cluster(
            cdplace_testkit::native::backend(),
            r#"{"wholeTrays": "Off"}"#,
            Some(Path::new("a.yaml")),
            &Objects::default(),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("a.yaml: invalid plugin args: unknown field `wholeTrays`"), "{e}");
    }

    #[test]
    fn unknown_and_finished_pods() {
        let objs = parse("apiVersion: v1\nkind: Pod\nmetadata: {name: done, namespace: d}\nspec: {containers: [{name: c}]}\nstatus: {phase: Succeeded}\n").unwrap();
        let cluster =
            build_cluster(cdplace_testkit::native::backend(), "", None, &Objects::from_snapshots(objs.clone()))
                .unwrap();
        let e = explain(&cluster, &objs, &PodRef::parse("d/done").unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "pod d/done has finished (phase Succeeded); the scheduler never places it");
        let e = explain(&cluster, &objs, &PodRef::parse("d/nope").unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "pod d/nope is not in the snapshot (snap.yaml)");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn pod_refs() {
        assert_eq!(PodRef::parse("a/b").unwrap(), PodRef { namespace: "a".into(), name: "b".into() });
        for bad in ["a", "/b", "a/", "a/b/c"] {
            assert!(PodRef::parse(bad).is_err(), "{bad}");
        }
    }

    fn node(name: &str, code: Code, score: Option<u32>) -> NodeReport {
        NodeReport { name: name.into(), clique: None, filter: StatusReport { code, reason: String::new() }, score }
    }

    fn decision(code: Code, allowed: Option<Vec<&str>>) -> Decision {
        let ok = Status { code, reason: String::new() };
        Decision {
            status: ok.clone(),
            domain: None,
            exclusive: allowed.is_some(),
            cliques: Default::default(),
            other: ok,
            other_score: 0,
            nodes: Default::default(),
            node_set: allowed.map(|v| v.into_iter().map(String::from).collect()),
        }
    }

    #[test]
    fn selects_highest_score_then_smallest_name() {
        let nodes = [
            node("a", Code::Success, Some(90)),
            node("c", Code::Success, Some(100)),
            node("b", Code::Success, Some(100)),
            node("d", Code::Unschedulable, None),
        ];
        assert_eq!(select(&decision(Code::Success, None), &nodes).as_deref(), Some("b"));
        assert_eq!(select(&decision(Code::Success, Some(vec!["a", "d"])), &nodes).as_deref(), Some("a"));
        assert_eq!(select(&decision(Code::Skip, None), &nodes), None);
        assert_eq!(select(&decision(Code::Success, None), &nodes[3..]), None);
    }
}
