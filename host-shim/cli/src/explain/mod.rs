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
//!
//! Files: this one (the command, the report and how it is computed), `source` (reading the
//! cluster, loading the component and building the view, which `cdplace status` shares) and
//! `text` (the report as text).

use std::path::Path;

use serde::{Serialize, Serializer};
use serde_json::Value;

use cdplace_host::extract::Kind;
use cdplace_host::{Cluster, Code, Decision, Error, Status};

/// The message prefix of every failure.
pub const PROGRAM: &str = "cdplace explain";

pub use crate::snapshot::{SnapshotObject, load_snapshot, parse_snapshot};

mod source;
mod text;

pub use source::{Objects, PolicyOptions, SourceOptions, build_cluster, load_args, load_runtime, read_args};

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

/// The command line of `cdplace explain`.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub source: SourceOptions,
    /// The pod to explain.
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = PodRef::parse)]
    pub pod: PodRef,
    #[command(flatten)]
    pub policy: PolicyOptions,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
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

/// Runs the whole command: reads the arguments and the cluster, loads the component, decides.
pub fn run(opts: &Options) -> Result<Report, ExplainError> {
    let args = opts.policy.args()?;
    let objects = opts.source.read()?;
    // Before the component is compiled, which takes a while.
    if let Some(why) = absent_pod(&objects.objects, &opts.pod) {
        return Err(ExplainError::UnknownPod(why));
    }
    let cluster = opts.policy.cluster(&args, &objects)?;
    explain(&cluster, &objects.objects, &opts.pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::tests::parse;

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
            stable: Default::default(),
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
