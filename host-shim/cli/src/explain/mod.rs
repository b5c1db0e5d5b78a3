//! `cdplace explain`: what the placement policy decides for one pod of a cluster snapshot, node
//! by node, computed by the real policy component exactly as the scheduler plugin runs it.
//!
//! What to explain, kubectl-style: `explain NAME` or `explain pod/NAME` (also `pods/`, `po/`, or
//! `explain pod NAME`) for a pod, `explain computedomain/NAME` (also `computedomains/`, `cd/`)
//! for a ComputeDomain — its first pending pod by name, else its first pod, with the list of its
//! pods —, in the namespace `-n`, else the kubeconfig context's, else `default`. The older
//! `--pod NAMESPACE/NAME` still works.
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
//! Exit codes of the command ([`ExplainError::exit_code`]): 0 with a report; 1 when the live
//! cluster cannot be read, the pod or ComputeDomain is not found (or the pod has finished), or the
//! policy itself fails (trap, timeout, memory); 2 for bad usage or unusable input (arguments, a
//! file that cannot be read or parsed, an object the extractor rejects, invalid plugin arguments,
//! a kubeconfig that cannot be used).
//!
//! Output (`-o`): `text` (the default), `wide` (text with the PreFilterResult node set as a
//! column), `json` and `yaml` (the [`Report`] under `apiVersion: cdplace.nvidia.com/v1alpha1`,
//! `kind: Explanation`; see [`crate::output`]).
//!
//! Files: this one (the command, the report and how it is computed), `source` (reading the
//! cluster, loading the component and building the view, which `cdplace status` shares) and
//! `text` (the report as text).

use std::path::Path;

use serde::{Serialize, Serializer};
use serde_json::Value;

use cdplace_host::extract::{self, Kind, Object};
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
    /// The pod or ComputeDomain is not in the cluster, or the pod is finished.
    #[error("{0}")]
    NotFound(String),
    /// The command line asks for something that cannot be: the message says what.
    #[error("{0}")]
    Usage(String),
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
    /// The process exit status for this failure: 1 when the cluster could not be read, the
    /// object is not found or the policy failed; 2 for bad usage or input (a kubeconfig included).
    pub fn exit_code(&self) -> u8 {
        match self {
            ExplainError::Policy(_) | ExplainError::Live { .. } | ExplainError::NotFound(_) => 1,
            ExplainError::Input { .. }
            | ExplainError::Args { .. }
            | ExplainError::Usage(_)
            | ExplainError::Kubeconfig { .. } => 2,
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

/// How the report is printed (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable report with a table of nodes.
    Text,
    /// The text report with the PreFilterResult node set as a column.
    Wide,
    /// The report as JSON (`kind: Explanation`).
    Json,
    /// The report as YAML, the same document as JSON.
    Yaml,
}

/// What kind of object `explain` is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    Pod,
    ComputeDomain,
}

/// The object named on the command line; its namespace is `-n`'s (or the source's) unless the
/// legacy `--pod NAMESPACE/NAME` gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: TargetKind,
    pub namespace: Option<String>,
    pub name: String,
}

impl Target {
    /// Parses `NAME`, `TYPE/NAME` or `TYPE NAME` (the positional arguments).
    pub fn parse(args: &[String]) -> Result<Target, String> {
        let (kind, name) = match args {
            [one] => match one.split_once('/') {
                Some((kind, name)) => (Some(kind), name),
                None => (None, one.as_str()),
            },
            [kind, name] => (Some(kind.as_str()), name.as_str()),
            _ => return Err("expected NAME, TYPE/NAME or TYPE NAME".to_string()),
        };
        let kind = match kind.map(str::to_ascii_lowercase).as_deref() {
            None | Some("pod" | "pods" | "po") => TargetKind::Pod,
            Some(
                "computedomain"
                | "computedomains"
                | "cd"
                | "computedomain.resource.nvidia.com"
                | "computedomains.resource.nvidia.com",
            ) => TargetKind::ComputeDomain,
            Some(other) => {
                return Err(format!(
                    "cannot explain a {other:?}: the type is pod (pods, po) or computedomain (computedomains, cd)"
                ));
            }
        };
        if name.is_empty() || name.contains('/') {
            return Err(format!("{name:?} is not a name (expected NAME, TYPE/NAME or TYPE NAME)"));
        }
        Ok(Target { kind, namespace: None, name: name.to_string() })
    }
}

/// The command line of `cdplace explain`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["target", "pod"])))]
pub struct Options {
    /// What to explain: a pod (`NAME`, `pod/NAME`, `pod NAME`) or a ComputeDomain
    /// (`computedomain/NAME`, `cd/NAME`), in the namespace of -n.
    #[arg(value_name = "[TYPE/]NAME", num_args = 1..=2)]
    pub target: Vec<String>,
    /// The pod to explain, with its namespace (the older form of `POD -n NAMESPACE`).
    #[arg(long, value_name = "NAMESPACE/NAME", value_parser = PodRef::parse, conflicts_with = "namespace")]
    pub pod: Option<PodRef>,
    #[command(flatten)]
    pub source: SourceOptions,
    #[command(flatten)]
    pub policy: PolicyOptions,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

impl Options {
    /// What the command line names (a usage error when it names nothing explainable).
    pub fn target(&self) -> Result<Target, ExplainError> {
        if let Some(p) = &self.pod {
            return Ok(Target { kind: TargetKind::Pod, namespace: Some(p.namespace.clone()), name: p.name.clone() });
        }
        Target::parse(&self.target).map_err(ExplainError::Usage)
    }
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

/// A pod: its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

/// The pod's ComputeDomain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainReport {
    pub uid: String,
    /// Its namespace and name, when the cluster has the ComputeDomain object.
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The domain's pods, when a ComputeDomain was explained (absent for a pod).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<DomainPod>>,
}

/// One pod of an explained ComputeDomain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainPod {
    pub name: String,
    /// `Placed` (bound or assumed to `node`), `Nominated` (preemption made room on `node`) or
    /// `Pending`.
    pub state: &'static str,
    pub node: Option<String>,
}

/// Everything `cdplace explain` says about a pod; `-o json|yaml` writes it as `kind: Explanation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The pod decided for (for a ComputeDomain, the one chosen).
    pub pod: PodName,
    /// The pod's ComputeDomain, if it has one.
    pub compute_domain: Option<DomainReport>,
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
    let compute_domain = decision.domain.as_deref().map(|uid| {
        let (namespace, name) = domain_name(objects, uid).unzip();
        DomainReport { uid: uid.to_string(), namespace, name, pods: None }
    });
    Ok(Report {
        pod: PodName { namespace: pod.namespace.clone(), name: pod.name.clone() },
        compute_domain,
        pre_filter: PreFilterReport {
            code: decision.status.code,
            reason: decision.status.reason.clone(),
            nodes: decision.node_set.clone(),
        },
        nodes,
        selected,
    })
}

/// Explains the ComputeDomain `namespace/name`: finds it and its pods (the non-terminal pods of
/// its namespace whose PreFilter names its UID and does not skip them, i.e. not its IMEX daemons),
/// and explains the first pending one by name, else the first one.
pub fn explain_domain(
    cluster: &Cluster,
    objects: &[SnapshotObject],
    namespace: &str,
    name: &str,
) -> Result<Report, ExplainError> {
    let uid = domain_uid(objects, namespace, name).ok_or_else(|| {
        ExplainError::NotFound(format!(
            "computedomain {name:?} not found in namespace {namespace:?} ({})",
            sources(objects)
        ))
    })?;
    let mut pods: std::collections::BTreeMap<String, (Option<String>, Option<String>)> = Default::default();
    for o in objects {
        let Ok(Some(Object::Pod { namespace: ns, name, terminal, node_name, nominated_node_name, .. })) =
            extract::extract(&o.value, cluster.settings())
        else {
            continue;
        };
        if ns != namespace {
            continue;
        }
        if terminal {
            pods.remove(&name);
        } else {
            pods.insert(name, (node_name, nominated_node_name));
        }
    }
    let mut members = Vec::new();
    for (pod, (node, nominated)) in pods {
        let decision = cluster.pre_filter(namespace, &pod, &[]).map_err(ExplainError::Policy)?;
        if decision.domain.as_deref() != Some(uid.as_str()) || decision.status.code == Code::Skip {
            continue;
        }
        let (state, node) = match (node, nominated) {
            (Some(n), _) => ("Placed", Some(n)),
            (None, Some(n)) => ("Nominated", Some(n)),
            (None, None) => ("Pending", None),
        };
        members.push(DomainPod { name: pod, state, node });
    }
    members.sort_by(|a, b| crate::status::natural_cmp(&a.name, &b.name));
    let chosen = members.iter().find(|p| p.state == "Pending").or_else(|| members.first()).ok_or_else(|| {
        ExplainError::NotFound(format!(
            "computedomain {name:?} in namespace {namespace:?} has no pods to explain (the policy decides per pod)"
        ))
    })?;
    let pod = PodRef { namespace: namespace.to_string(), name: chosen.name.clone() };
    let mut report = explain(cluster, objects, &pod)?;
    // The chosen pod's PreFilter named the domain, so the report has it.
    if let Some(d) = &mut report.compute_domain {
        d.pods = Some(members);
    }
    Ok(report)
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

fn meta<'a>(v: &'a Value, field: &str) -> &'a str {
    v.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("")
}

/// The namespace and name of the ComputeDomain with this UID, if the objects hold it.
fn domain_name(objects: &[SnapshotObject], uid: &str) -> Option<(String, String)> {
    objects
        .iter()
        .rev()
        .map(|o| &o.value)
        .find(|v| is_kind(v, Kind::ComputeDomain) && meta(v, "uid") == uid)
        .map(|v| (meta(v, "namespace").to_string(), meta(v, "name").to_string()))
}

/// The UID of the ComputeDomain `namespace/name`, if the objects hold it.
fn domain_uid(objects: &[SnapshotObject], namespace: &str, name: &str) -> Option<String> {
    objects
        .iter()
        .rev()
        .map(|o| &o.value)
        .find(|v| is_kind(v, Kind::ComputeDomain) && meta(v, "namespace") == namespace && meta(v, "name") == name)
        .map(|v| meta(v, "uid").to_string())
}

/// Where the objects came from, for messages: `source: a.yaml, b.yaml` or the server's URL.
fn sources(objects: &[SnapshotObject]) -> String {
    let mut files: Vec<String> = objects.iter().map(|o| o.file.display().to_string()).collect();
    files.dedup();
    if files.is_empty() { "the source has no objects".to_string() } else { format!("source: {}", files.join(", ")) }
}

/// Why the pod cannot be explained from these objects: it has none, or it has finished (the
/// cluster view drops finished pods). `None` when the pod is there.
fn absent_pod(objects: &[SnapshotObject], pod: &PodRef) -> Option<String> {
    let found = objects.iter().rev().find(|o| {
        is_kind(&o.value, Kind::Pod)
            && meta(&o.value, "namespace") == pod.namespace
            && meta(&o.value, "name") == pod.name
    });
    let (ns, name) = (&pod.namespace, &pod.name);
    let Some(found) = found else {
        return Some(format!("pod {name:?} not found in namespace {ns:?} ({})", sources(objects)));
    };
    match found.value.pointer("/status/phase").and_then(Value::as_str) {
        Some(phase @ ("Succeeded" | "Failed")) => Some(format!(
            "pod {name:?} in namespace {ns:?} has finished (phase {phase}); the scheduler never places it"
        )),
        _ => None,
    }
}

fn unknown_pod(objects: &[SnapshotObject], pod: &PodRef) -> ExplainError {
    ExplainError::NotFound(absent_pod(objects, pod).unwrap_or_else(|| format!("pod {pod} is not in the cluster view")))
}

/// Runs the whole command: reads the arguments and the cluster, loads the component, decides.
pub fn run(opts: &Options) -> Result<Report, ExplainError> {
    let target = opts.target()?;
    let args = opts.policy.args()?;
    let objects = opts.source.read()?;
    let namespace = target.namespace.clone().unwrap_or_else(|| opts.source.namespace(&objects));
    match target.kind {
        TargetKind::Pod => {
            let pod = PodRef { namespace, name: target.name };
            // Before the component is compiled, which takes a while.
            if let Some(why) = absent_pod(&objects.objects, &pod) {
                return Err(ExplainError::NotFound(why));
            }
            let cluster = opts.policy.cluster(&args, &objects)?;
            explain(&cluster, &objects.objects, &pod)
        }
        TargetKind::ComputeDomain => {
            let cluster = opts.policy.cluster(&args, &objects)?;
            explain_domain(&cluster, &objects.objects, &namespace, &target.name)
        }
    }
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
        assert_eq!(
            e.to_string(),
            r#"pod "done" in namespace "d" has finished (phase Succeeded); the scheduler never places it"#
        );
        let e = explain(&cluster, &objs, &PodRef::parse("d/nope").unwrap()).unwrap_err();
        assert_eq!(e.to_string(), r#"pod "nope" not found in namespace "d" (source: snap.yaml)"#);
        assert_eq!(e.exit_code(), 1);
        let e = explain_domain(&cluster, &objs, "d", "cd").unwrap_err();
        assert_eq!(e.to_string(), r#"computedomain "cd" not found in namespace "d" (source: snap.yaml)"#);
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn targets_in_kubectl_grammar() {
        let t = |args: &[&str]| Target::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        let pod = |n: &str| Target { kind: TargetKind::Pod, namespace: None, name: n.into() };
        let cd = |n: &str| Target { kind: TargetKind::ComputeDomain, namespace: None, name: n.into() };
        assert_eq!(t(&["x"]), Ok(pod("x")));
        for k in ["pod", "pods", "po", "Pod"] {
            assert_eq!(t(&[&format!("{k}/x")]), Ok(pod("x")), "{k}");
            assert_eq!(t(&[k, "x"]), Ok(pod("x")), "{k}");
        }
        for k in ["computedomain", "computedomains", "cd", "computedomain.resource.nvidia.com", "ComputeDomain"] {
            assert_eq!(t(&[&format!("{k}/x")]), Ok(cd("x")), "{k}");
            assert_eq!(t(&[k, "x"]), Ok(cd("x")), "{k}");
        }
        assert!(t(&["node/x"]).unwrap_err().contains(r#"cannot explain a "node""#));
        for bad in [&["pod/"][..], &["pod/a/b"], &["pod", ""], &[]] {
            assert!(t(bad).is_err(), "{bad:?}");
        }
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
