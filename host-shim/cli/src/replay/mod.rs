//! `cdplace replay TRACE [--policy A.wasm]... [--json FILE]`: asks a policy again every decision
//! a scheduler recorded (`recordPath`, issue 37) and compares the answers.
//!
//! For each policy (the component beside this executable when none is named) it builds a cluster
//! under the recorded plugin args and goes through the trace in order: each fact batch is applied
//! exactly as the scheduler applied it, each Reserve/Unreserve assumed or forgotten, and each
//! decision (PreFilter, plain-pod steering, gang preemption) asked again at its recorded policy
//! time, on the view at its recorded position (the number of view changes before it). Answers are
//! compared decoded (a `CDP4` decision with [`cdplace_host::decision::unpack`], a preemption as
//! JSON), so the order strings were interned in does not matter.
//!
//! A trace that swapped policies (the `policy` source) names each one swapped in (a policy
//! record); the report counts the decisions each replayed policy is compared on that another
//! component made.
//!
//! Only a trace whose first file (file 0) is still there rebuilds the view from the start; when
//! rotation deleted it, or the recorder dropped a view change (a gap record), decisions from
//! there on are counted "not comparable" rather than compared on a partial view.
//!
//! `--simulate TRACE.json` plays a bench-placement trace instead (arrivals, lifetimes, tray
//! failures) through each policy with a simulated scheduler and binder: see [`simulate`].
//!
//! Exit status: 0 with a report whenever the trace is readable (a torn tail included: it is read
//! up to the tear and the report says where), 2 when it or a policy cannot be read.

pub mod simulate;
pub mod trace;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cdplace_host::{Backend, Cluster, Code, Runtime, decision, overlay};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use trace::{Call, Entry, Recorded, Trace, TraceError};

/// The program name in messages.
pub const PROGRAM: &str = "cdplace replay";

/// The size classes the report counts, by the domain's size in trays.
pub const SIZE_CLASSES: [(&str, u32, u32); 4] = [("1-4", 1, 4), ("5-8", 5, 8), ("9-15", 9, 15), ("16-18", 16, 18)];

/// `cdplace replay`'s arguments.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// A trace file, or the recordPath directory (its newest run's files, in order).
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// A policy component to ask again; repeat for several, compared side by side. Default: the
    /// one built into this executable.
    #[arg(long = "policy", value_name = "A.wasm")]
    pub policies: Vec<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// TRACE is a bench-placement trace.json: play its arrivals, lifetimes and tray failures
    /// through each policy with a simulated scheduler and binder, and report per size class the
    /// domains started, their waits and the GPU allocation.
    #[arg(long)]
    pub simulate: bool,
    /// With --simulate: trace seconds per second of the policy's clock (the bench's -time-scale).
    #[arg(long, value_name = "N", default_value_t = 18.0, requires = "simulate")]
    pub time_scale: f64,
    /// With --simulate: the driver's node-label lag, seconds of the policy's clock (the bench's
    /// -label-lag).
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0, requires = "simulate")]
    pub label_lag: f64,
    /// With --simulate: give every pod activeDeadlineSeconds = this × its lifetime (policy clock)
    /// + 5 s, as the bench's -deadline-factor; 0: none.
    #[arg(long, value_name = "F", default_value_t = 0.0, requires = "simulate")]
    pub deadline_factor: f64,
    /// With --simulate: plugin args (a JSON object) set over the shipped profile's, e.g.
    /// '{"cliqueReservationAfterSeconds":3}'.
    #[arg(long, value_name = "JSON", requires = "simulate")]
    pub args: Option<String>,
    /// With --simulate: stop at this trace time even if domains are left (default: 4 horizons).
    #[arg(long, value_name = "SECONDS", requires = "simulate")]
    pub cap: Option<f64>,
    /// With --simulate: the scheduling queue: `kube` (kube-scheduler 1.37: a rejected pod is
    /// requeued behind newer ones and retried at the next change) or `fifo` (creation order, each
    /// rejected pod waits out its backoff).
    #[arg(long, value_enum, default_value = "kube", requires = "simulate")]
    pub queue: simulate::QueueModel,
    /// With --simulate: break ties between equally scored trays at random with this seed, as
    /// kube-scheduler does (run several seeds for a run's noise); 0: the first tray by name.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "simulate")]
    pub tie_seed: u64,
}

/// Why replay could not run (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{path}: {message}")]
    Policy { path: String, message: String },
    #[error("{path}: writing the JSON report: {error}")]
    Json { path: String, error: std::io::Error },
    #[error("{0}")]
    Usage(String),
}

impl ReplayError {
    /// 2 for an unreadable trace or policy, 1 when the report could not be written.
    pub fn exit_code(&self) -> u8 {
        match self {
            ReplayError::Json { .. } => 1,
            _ => 2,
        }
    }
}

/// A policy to ask again.
#[allow(missing_debug_implementations)]
pub struct Policy {
    /// How the report names it (its file).
    pub label: String,
    /// `sha256:<hex>` of the component.
    pub digest: String,
    pub backend: Arc<dyn Backend>,
}

/// The digest the recorder writes for a component's bytes.
pub fn digest(wasm: &[u8]) -> String {
    let sum = Sha256::digest(wasm);
    let mut s = String::from("sha256:");
    for b in sum {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Loads a component file as a [`Policy`].
pub fn load_policy(path: &Path) -> Result<Policy, ReplayError> {
    let fail = |message: String| ReplayError::Policy { path: path.display().to_string(), message };
    let wasm = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    policy_of(&path.display().to_string(), &wasm)
}

/// A [`Policy`] from a component's bytes, named `label`.
pub fn policy_of(label: &str, wasm: &[u8]) -> Result<Policy, ReplayError> {
    let rt = Runtime::new(wasm)
        .map_err(|e| ReplayError::Policy { path: label.to_string(), message: cdplace_host::error::chain(&e) })?;
    Ok(Policy { label: label.to_string(), digest: digest(wasm), backend: rt })
}

/// Runs the command: the text report (the JSON one written to `--json`).
pub fn run(opts: &Options) -> Result<String, ReplayError> {
    if opts.simulate {
        return run_simulate(opts);
    }
    let trace = trace::read(&opts.trace)?;
    let policies = policies(opts)?;
    let report = replay(&trace, &policies);
    write_json(opts, &report)?;
    Ok(report.render())
}

fn policies(opts: &Options) -> Result<Vec<Policy>, ReplayError> {
    if opts.policies.is_empty() {
        Ok(vec![policy_of("embedded", crate::EMBEDDED_GUEST)?])
    } else {
        opts.policies.iter().map(|p| load_policy(p)).collect()
    }
}

fn write_json<T: Serialize>(opts: &Options, report: &T) -> Result<(), ReplayError> {
    if let Some(path) = &opts.json {
        let json = serde_json::to_vec_pretty(report).expect("the report serializes");
        std::fs::write(path, json).map_err(|error| ReplayError::Json { path: path.display().to_string(), error })?;
    }
    Ok(())
}

/// `--simulate`: the bench trace through each policy.
fn run_simulate(opts: &Options) -> Result<String, ReplayError> {
    let trace = simulate::read_trace(&opts.trace)?;
    let mut sim = simulate::SimOptions::for_trace(&trace);
    let positive = |v: f64, flag: &str| {
        if v.is_finite() && v > 0.0 { Ok(v) } else { Err(ReplayError::Usage(format!("{flag} {v}: want a number > 0"))) }
    };
    sim.time_scale = positive(opts.time_scale, "--time-scale")?;
    if !(opts.label_lag.is_finite() && opts.label_lag >= 0.0) {
        return Err(ReplayError::Usage(format!("--label-lag {}: want a number ≥ 0", opts.label_lag)));
    }
    sim.label_lag = opts.label_lag;
    if !(opts.deadline_factor.is_finite() && opts.deadline_factor >= 0.0) {
        return Err(ReplayError::Usage(format!("--deadline-factor {}: want a number ≥ 0", opts.deadline_factor)));
    }
    sim.deadline_factor = opts.deadline_factor;
    if let Some(cap) = opts.cap {
        sim.cap = positive(cap, "--cap")?;
    }
    sim.queue = opts.queue;
    sim.tie_seed = opts.tie_seed;
    if let Some(a) = &opts.args {
        sim.args = simulate::merge_args(&sim.args, a).map_err(ReplayError::Usage)?;
    }
    let policies = policies(opts)?;
    // Args a policy refuses are unusable input (exit 2), as for the other commands.
    for p in &policies {
        if let Err(e) = Cluster::new(p.backend.clone(), &sim.args) {
            return Err(ReplayError::Policy {
                path: p.label.clone(),
                message: format!("the plugin args {}: {}", sim.args, cdplace_host::error::chain(&e)),
            });
        }
    }
    let report = simulate::simulate_all(&opts.trace.display().to_string(), &trace, &policies, &sim);
    write_json(opts, &report)?;
    Ok(report.render())
}

/// What the trace holds.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceInfo {
    pub files: Vec<String>,
    pub run: String,
    pub recorded_policy: String,
    pub args: serde_json::Value,
    pub decisions: u64,
    pub view_changes: u64,
    /// Records the recorder dropped (from its gap records).
    pub dropped: u64,
    /// Where the trace is torn, when it is.
    pub torn: Option<String>,
    /// The run's first file was rotated away: the view cannot be rebuilt.
    pub head_missing: bool,
    /// The components swapped in during the run, in order (`generation digest`).
    pub swaps: Vec<String>,
}

/// An answer as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The framework code (`Success`, `Unschedulable`, ...; `Error` when the call failed).
    pub code: String,
    /// The policy's reason.
    pub reason: String,
    /// Where it would go: the cliques offered, or the preemption plan.
    pub placement: String,
}

/// Agreement in one size class.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClassCount {
    pub compared: u64,
    pub agreed: u64,
}

/// A domain (or plain pods, or a pod without a domain) some decision of which differs.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Differing {
    /// The ComputeDomain UID, or `plain pods` / `plain GPU pods`, or `pod NS/NAME`.
    pub domain: String,
    /// The pod of its first differing decision.
    pub pod: String,
    pub call: &'static str,
    pub size: Option<u32>,
    pub class: String,
    /// `refused`, `placed elsewhere`, `placed alike, nodes inside differ`, `placed` (it was
    /// refused) or `refused for another reason`.
    pub change: &'static str,
    /// What differs, `part: recorded → replayed; ...` (the code, the reason, the cliques with
    /// their scores, the refused nodes, the node set, ...).
    pub difference: String,
    /// How many of its decisions differ.
    pub decisions: u64,
    pub recorded: Answer,
    pub replayed: Answer,
}

/// One policy's results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyReport {
    pub policy: String,
    pub digest: String,
    pub same_as_recorded: bool,
    /// The recorded args could not make a cluster with it.
    pub error: Option<String>,
    pub decisions: u64,
    pub compared: u64,
    pub agreed: u64,
    /// Decisions after a lost view change or without the trace's head.
    pub not_comparable: u64,
    /// Compared decisions the recorded run made with another component than this one (after a
    /// swap, or all of them for another policy).
    pub recorded_by_other: u64,
    pub classes: BTreeMap<String, ClassCount>,
    pub differing: Vec<Differing>,
}

impl PolicyReport {
    /// Agreement in percent of the compared decisions (100 when none were).
    pub fn agreement(&self) -> f64 {
        if self.compared == 0 { 100.0 } else { 100.0 * self.agreed as f64 / self.compared as f64 }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub trace: TraceInfo,
    pub policies: Vec<PolicyReport>,
}

/// Replays `trace` with each policy.
pub fn replay(trace: &Trace, policies: &[Policy]) -> Report {
    let mut info = TraceInfo {
        files: trace.files.iter().map(|f| f.display().to_string()).collect(),
        run: trace.header.run.clone(),
        recorded_policy: trace.header.policy_digest.clone(),
        args: trace.header.args.clone(),
        decisions: 0,
        view_changes: 0,
        dropped: 0,
        torn: trace.torn.clone(),
        head_missing: !trace.has_head(),
        swaps: Vec::new(),
    };
    for e in &trace.entries {
        match e {
            Entry::Decision(_) => info.decisions += 1,
            Entry::Gap { dropped, .. } => info.dropped = *dropped,
            Entry::Policy { generation, digest } => info.swaps.push(format!("{generation} {digest}")),
            _ => info.view_changes += 1,
        }
    }
    let policies = policies.iter().map(|p| replay_one(trace, p)).collect();
    Report { trace: info, policies }
}

fn replay_one(trace: &Trace, policy: &Policy) -> PolicyReport {
    let mut rep = PolicyReport {
        policy: policy.label.clone(),
        digest: policy.digest.clone(),
        same_as_recorded: policy.digest == trace.header.policy_digest,
        error: None,
        decisions: 0,
        compared: 0,
        agreed: 0,
        not_comparable: 0,
        recorded_by_other: 0,
        classes: SIZE_CLASSES.iter().map(|c| (c.0.to_string(), ClassCount::default())).collect(),
        differing: Vec::new(),
    };
    let args = trace.header.args.to_string();
    let cluster = match Cluster::new(policy.backend.clone(), &args) {
        Ok(c) => c,
        Err(e) => {
            rep.error = Some(format!("the recorded args: {}", cdplace_host::error::chain(&e)));
            return rep;
        }
    };
    let mut position = trace.header.first_position;
    let mut deciding = trace.header.policy_digest.clone();
    let mut lost = !trace.has_head();
    let mut sizes: HashMap<String, u32> = HashMap::new();
    let mut differing: Vec<Differing> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for e in &trace.entries {
        match e {
            Entry::Batch(b) => {
                // A batch the scheduler's library refused is refused here too (nothing applied).
                let _ = cluster.apply_facts(b);
                position += 1;
            }
            Entry::Assume { namespace, name, node } => {
                let _ = cluster.assume(namespace, name, node);
                position += 1;
            }
            Entry::Forget { namespace, name } => {
                cluster.forget(namespace, name);
                position += 1;
            }
            Entry::Gap { position: p, .. } => {
                if *p != position {
                    lost = true;
                }
                position = *p;
            }
            Entry::Policy { digest, .. } => deciding = digest.clone(),
            Entry::Decision(r) => {
                rep.decisions += 1;
                if lost || r.position != position {
                    rep.not_comparable += 1;
                    continue;
                }
                if deciding != policy.digest {
                    rep.recorded_by_other += 1;
                }
                let again = ask(&cluster, r);
                let (recorded, replayed) = (Parsed::of(r.call, &r.answer), Parsed::of(r.call, &again));
                let domain = recorded.domain.clone().or_else(|| replayed.domain.clone());
                let size = domain.as_ref().and_then(|d| size_of(&cluster, &mut sizes, d));
                let class = class(r.call, size);
                rep.compared += 1;
                let agreed = recorded.parts == replayed.parts;
                let c = rep.classes.entry(class.clone()).or_default();
                c.compared += 1;
                if agreed {
                    rep.agreed += 1;
                    c.agreed += 1;
                    continue;
                }
                let key = domain.unwrap_or_else(|| match r.call {
                    Call::Steer { gpus: true } => "plain GPU pods".into(),
                    Call::Steer { gpus: false } => "plain pods".into(),
                    _ => format!("pod {}/{}", r.namespace, r.name),
                });
                match index.get(&key) {
                    Some(&i) => differing[i].decisions += 1,
                    None => {
                        index.insert(key.clone(), differing.len());
                        differing.push(Differing {
                            domain: key,
                            pod: if r.name.is_empty() { String::new() } else { format!("{}/{}", r.namespace, r.name) },
                            call: r.call.name(),
                            size,
                            class,
                            change: change(&recorded.answer, &replayed.answer),
                            difference: difference(&recorded.parts, &replayed.parts),
                            decisions: 1,
                            recorded: recorded.answer,
                            replayed: replayed.answer,
                        });
                    }
                }
            }
        }
    }
    rep.differing = differing;
    rep
}

/// Asks the recorded call again at its time.
fn ask(cluster: &Cluster, r: &Recorded) -> Result<Vec<u8>, String> {
    let chain = |e: cdplace_host::Error| cdplace_host::error::chain(&e);
    match r.call {
        Call::PreFilter => {
            let ov = overlay::decode(&r.overlay).map_err(chain)?;
            cluster.pre_filter_packed_at(&r.namespace, &r.name, &ov, r.now_ms).map(|(b, _)| b).map_err(chain)
        }
        Call::Steer { gpus } => cluster.steer_packed_at(gpus, r.now_ms).map(|(b, _)| b).map_err(chain),
        Call::Preempt => {
            cluster.preempt_at(&r.namespace, &r.name, r.now_ms).map(|p| p.to_json().into_bytes()).map_err(chain)
        }
    }
}

/// An answer decoded for comparing and showing.
struct Parsed {
    /// What is compared, part by part (issue 45: what decides where pods go, not every byte of
    /// the answer, whose per-clique reason texts and steering hints may differ where no pod's
    /// place does): the code, the reason when it refuses, the cliques offered with their scores,
    /// the nodes refused inside them, the node set, ...; an error compares by being one.
    parts: Vec<(&'static str, String)>,
    domain: Option<String>,
    answer: Answer,
}

impl Parsed {
    fn of(call: Call, a: &Result<Vec<u8>, String>) -> Parsed {
        let bytes = match a {
            Ok(b) => b,
            Err(e) => {
                return Parsed {
                    parts: vec![("error", String::new())],
                    domain: None,
                    answer: Answer { code: "Error".into(), reason: e.clone(), placement: String::new() },
                };
            }
        };
        match call {
            Call::PreFilter | Call::Steer { .. } => match decision::unpack(bytes) {
                Ok(d) => {
                    // The cliques offered, best score first, with their scores: two answers
                    // offering the same cliques may still prefer different ones.
                    let mut ranked: Vec<(&str, u32)> = d
                        .cliques
                        .iter()
                        .filter(|(_, (s, _))| s.code == Code::Success)
                        .map(|(c, (_, score))| (c.as_str(), *score))
                        .collect();
                    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
                    let offered: Vec<String> = ranked.iter().map(|(c, s)| format!("{c} ({s})")).collect();
                    let placement = match (&d.node_set, d.status.code) {
                        (_, c) if c != Code::Success => String::new(),
                        (Some(set), _) if d.exclusive => {
                            format!("its clique {} ({} nodes)", offered.join(", "), set.len())
                        }
                        (Some(set), _) => format!("cliques {} ({} nodes)", offered.join(", "), set.len()),
                        (None, _) if offered.is_empty() => "any node".into(),
                        (None, _) => format!("any node; cliques {} preferred", offered.join(", ")),
                    };
                    let refused_nodes: Vec<String> = d
                        .nodes
                        .iter()
                        .filter(|(_, s)| s.code != Code::Success)
                        .map(|(n, s)| format!("{n} {}", s.code.as_str()))
                        .collect();
                    let mut parts = vec![("code", d.status.code.as_str().to_string())];
                    if d.status.code != Code::Success {
                        parts.push(("reason", d.status.reason.clone()));
                    } else {
                        parts.extend([
                            ("only its clique", d.exclusive.to_string()),
                            ("cliques", offered.join(", ")),
                            ("other nodes", format!("{} ({})", d.other.code.as_str(), d.other_score)),
                            ("refused nodes", refused_nodes.join(", ")),
                            ("node set", d.node_set.as_ref().map_or("every node".into(), |s| s.join(","))),
                        ]);
                    }
                    Parsed {
                        parts,
                        domain: d.domain.clone(),
                        answer: Answer {
                            code: d.status.code.as_str().into(),
                            reason: d.status.reason.clone(),
                            placement,
                        },
                    }
                }
                Err(e) => Parsed {
                    parts: vec![("undecodable", format!("{bytes:?}"))],
                    domain: None,
                    answer: Answer { code: "Error".into(), reason: e, placement: String::new() },
                },
            },
            Call::Preempt => {
                let v: serde_json::Value = serde_json::from_slice(bytes).unwrap_or(serde_json::Value::Null);
                let plan = &v["plan"];
                let placement = if plan.is_null() {
                    String::new()
                } else {
                    format!("evict {} pods for clique {}", plan["pods"].as_array().map_or(0, Vec::len), plan["clique"])
                };
                Parsed {
                    parts: vec![("preemption", v.to_string())],
                    domain: v["domain"].as_str().map(String::from),
                    answer: Answer {
                        code: if plan.is_null() { "Unschedulable".into() } else { "Success".into() },
                        reason: v["reason"].as_str().unwrap_or_default().into(),
                        placement,
                    },
                }
            }
        }
    }
}

fn change(recorded: &Answer, replayed: &Answer) -> &'static str {
    match (recorded.code == "Success", replayed.code == "Success") {
        (true, false) => "refused",
        (false, true) => "placed",
        (true, true) if recorded.placement != replayed.placement => "placed elsewhere",
        (true, true) => "placed alike, nodes inside differ",
        (false, false) => "refused for another reason",
    }
}

/// The parts that differ, `part: recorded → replayed`, `; `-separated (`-` for a part one
/// answer lacks or leaves empty).
fn difference(recorded: &[(&'static str, String)], replayed: &[(&'static str, String)]) -> String {
    let get = |parts: &[(&'static str, String)], name: &str| {
        parts.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
    };
    let mut names: Vec<&'static str> = recorded.iter().map(|(n, _)| *n).collect();
    names.extend(replayed.iter().map(|(n, _)| *n).filter(|n| !recorded.iter().any(|(m, _)| m == n)));
    names
        .into_iter()
        .filter_map(|n| {
            let (a, b) = (get(recorded, n), get(replayed, n));
            (a != b).then(|| format!("{n}: {} → {}", a.as_deref().unwrap_or("-"), b.as_deref().unwrap_or("-")))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A domain's size in trays, from the policy's fleet status (asked once per domain not yet seen).
fn size_of(cluster: &Cluster, sizes: &mut HashMap<String, u32>, uid: &str) -> Option<u32> {
    if let Some(s) = sizes.get(uid) {
        return Some(*s);
    }
    if let Ok(f) = cluster.status() {
        for d in f.domains {
            if d.size > 0 {
                sizes.insert(d.uid, d.size);
            }
        }
    }
    sizes.get(uid).copied()
}

fn class(call: Call, size: Option<u32>) -> String {
    if let Call::Steer { .. } = call {
        return "plain pods".into();
    }
    size.and_then(|s| SIZE_CLASSES.iter().find(|c| (c.1..=c.2).contains(&s)))
        .map_or_else(|| "size unknown".into(), |c| c.0.to_string())
}

impl Report {
    /// The text report: the policies side by side, then each one's differing domains.
    pub fn render(&self) -> String {
        let t = &self.trace;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "trace: {} file(s) of run {} ({}), recorded with policy {}",
            t.files.len(),
            t.run,
            t.files.first().map_or("", String::as_str),
            t.recorded_policy
        );
        let _ = writeln!(out, "       {} view changes, {} decisions", t.view_changes, t.decisions);
        if let Some(torn) = &t.torn {
            let _ = writeln!(out, "warning: {torn}; read up to the tear");
        }
        if t.head_missing {
            let _ = writeln!(
                out,
                "warning: the run's first file was rotated away (raise recordMaxFiles/recordMaxBytes): the view cannot be rebuilt, no decision is compared"
            );
        }
        if !t.swaps.is_empty() {
            let _ = writeln!(
                out,
                "note: the run swapped its policy {} time(s) (generation digest: {}); each decision is compared with what the replayed policy answers, whichever component made it",
                t.swaps.len(),
                t.swaps.join(", ")
            );
        }
        if t.dropped > 0 {
            let _ = writeln!(
                out,
                "warning: the recorder dropped {} records; decisions after a lost view change are not compared",
                t.dropped
            );
        }
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        let col = |f: &dyn Fn(&PolicyReport) -> String| self.policies.iter().map(f).collect::<Vec<_>>();
        rows.push(("policy".into(), col(&|p| short(&p.policy))));
        rows.push((
            "digest".into(),
            col(&|p| {
                format!(
                    "{}{}",
                    &p.digest[..p.digest.len().min(19)],
                    if p.same_as_recorded { " (recorded)" } else { "" }
                )
            }),
        ));
        rows.push(("decisions".into(), col(&|p| p.decisions.to_string())));
        rows.push(("compared".into(), col(&|p| p.compared.to_string())));
        rows.push(("agreed".into(), col(&|p| format!("{} ({:.1}%)", p.agreed, p.agreement()))));
        let mut classes: Vec<String> = SIZE_CLASSES.iter().map(|c| c.0.to_string()).collect();
        for p in &self.policies {
            for k in p.classes.keys() {
                if !classes.contains(k) {
                    classes.push(k.clone());
                }
            }
        }
        for k in &classes {
            let label = if SIZE_CLASSES.iter().any(|c| c.0 == k) { format!("  {k} trays") } else { format!("  {k}") };
            rows.push((
                label,
                col(&|p| {
                    p.classes.get(k).map_or("-".into(), |c| {
                        if c.compared == 0 { "-".into() } else { format!("{}/{}", c.agreed, c.compared) }
                    })
                }),
            ));
        }
        rows.push(("not comparable".into(), col(&|p| p.not_comparable.to_string())));
        if !t.swaps.is_empty() {
            rows.push(("made by another component".into(), col(&|p| p.recorded_by_other.to_string())));
        }
        rows.push(("differing domains".into(), col(&|p| p.differing.len().to_string())));
        out.push('\n');
        columns(&mut out, &rows);
        for p in &self.policies {
            if let Some(e) = &p.error {
                let _ = writeln!(out, "\n{}: {e}", short(&p.policy));
            }
            if p.differing.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{}: {} domain(s) decided differently:", short(&p.policy), p.differing.len());
            for d in &p.differing {
                let size = d.size.map_or("size unknown".into(), |s| format!("{s} trays"));
                let first = if d.pod.is_empty() { String::new() } else { format!(", first for {}", d.pod) };
                let _ = writeln!(
                    out,
                    "  {} ({size}): {}; {} {} decision(s) differ{first}",
                    d.domain, d.change, d.decisions, d.call,
                );
                let _ = writeln!(out, "    recorded: {}", show(&d.recorded));
                let _ = writeln!(out, "    replayed: {}", show(&d.replayed));
                if !d.difference.is_empty() {
                    let _ = writeln!(out, "    differs:  {}", d.difference);
                }
            }
        }
        out
    }
}

/// Writes `rows` (a label, then a cell per policy) as aligned columns, a line each.
pub(crate) fn columns(out: &mut String, rows: &[(String, Vec<String>)]) {
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let n = rows.first().map_or(0, |r| r.1.len());
    let widths: Vec<usize> = (0..n).map(|i| rows.iter().map(|r| r.1[i].len()).max().unwrap_or(0)).collect();
    for (label, cells) in rows {
        let _ = write!(out, "{label:<w0$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "  {c:<w$}");
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
}

/// A component's file name, for column heads.
pub(crate) fn short(path: &str) -> String {
    Path::new(path).file_name().map_or_else(|| path.to_string(), |f| f.to_string_lossy().into_owned())
}

fn show(a: &Answer) -> String {
    let mut s = a.code.clone();
    if !a.reason.is_empty() {
        let _ = write!(s, ": {}", a.reason);
    }
    if !a.placement.is_empty() {
        let _ = write!(s, " [{}]", a.placement);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(code: &str, placement: &str) -> Answer {
        Answer { code: code.into(), reason: String::new(), placement: placement.into() }
    }

    /// Two answers that place alike but refuse a node inside differ by that node, and the report
    /// says so, not "placed elsewhere" over two identical printed answers (issue 45).
    #[test]
    fn the_difference_names_what_differs() {
        let a = vec![("code", "Success".to_string()), ("cliques", "c1 (80)".into()), ("refused nodes", String::new())];
        let b = vec![
            ("code", "Success".to_string()),
            ("cliques", "c1 (80)".into()),
            ("refused nodes", "n3 Unschedulable".into()),
        ];
        assert_eq!(difference(&a, &b), "refused nodes: - → n3 Unschedulable");
        assert_eq!(difference(&a, &a), "");
        let same = answer("Success", "its clique c1 (80) (18 nodes)");
        assert_eq!(change(&same, &same.clone()), "placed alike, nodes inside differ");
        assert_eq!(change(&same, &answer("Success", "its clique c2 (80) (18 nodes)")), "placed elsewhere");
        assert_eq!(change(&same, &answer("Unschedulable", "")), "refused");
        let c = vec![("code", "Unschedulable".to_string()), ("reason", "no room".into())];
        assert_eq!(difference(&a, &c), "code: Success → Unschedulable; cliques: c1 (80) → -; reason: - → no room");
    }
}
