//! `cdplace replay --simulate TRACE.json`: the bench-placement trace (issue 37) played offline
//! through a policy with a simulated scheduler and binder, so that the policy's own placements
//! feed its later decisions (plain `replay` asks recorded questions on the recorded view).
//!
//! The model mirrors `e2e/cmd/cdplace-bench-placement` (the live bench) in trace time:
//!
//! - **The fleet:** `racks` cliques of `traysPerClique` trays of 4 GPUs, named as the live bench
//!   names them for its `cdplace` configuration (`pq-s<seed>-cdplace-r<R>-t<TT>`, the clique
//!   label `<rack UUID>.32766` from the same FNV hash), so the policy's tie-breaks by name see
//!   the same order.
//! - **A ComputeDomain arrival** adds the ComputeDomain, its channel template, its Indexed Job's
//!   size (the owner; no size annotation, as the bench submits it) and `size` pending pods of 4
//!   GPUs, created in index order at the arrival. **A plain pod** is one pending 4-GPU pod.
//! - **The scheduler** goes through the pending pods in queue order (one priority: the time each
//!   was last queued, its creation or its last rejection, as kube-scheduler's PriorityQueue) and
//!   asks each one's PreFilter (plain pods: the steering
//!   answer) on the current view at the policy time of the instant. The node is the one
//!   kube-scheduler would pick: a tray that is up and free (NodeResourcesFit), in the
//!   PreFilterResult node set when there is one, whose Filter verdict is Success, with the
//!   highest Score ([`cdplace_host::Decision::node`]); ties go to the first such node by name
//!   (kube-scheduler picks one at random; every other default plugin scores idle identical
//!   trays alike; `--tie-seed` picks among them at random instead). The pod is bound at once
//!   (Reserve and binding are not separate) and the view has it bound before the next pod is
//!   asked. A rejected pod is retried at the next change of the view ([`QueueModel::Kube`]), or
//!   after its backoff too ([`QueueModel::Fifo`]); the rest of its domain's pending pods are
//!   rejected with it on the same view without asking (they are the same question). A domain's
//!   bound pod wakes its other pods (the plugin's `Handle.Activate`).
//! - **The driver** labels a tray with the domain when its pod is bound (Prepare) and takes the
//!   label off `label lag` after the domain's last pod there is gone (Unprepare), as the bench's
//!   emulator does.
//! - **A domain starts** when all its pods are bound (its wait: from the arrival) and leaves
//!   `lifetime` later (its pods deleted); a plain pod leaves `lifetime` after its binding.
//! - **A tray failure** deletes the Node and its ResourceSlice (the bench's FailNode) and the pods
//!   on it: a plain pod ends there; a domain's pod is replaced by its Job after the Job
//!   controller's 10 s backoff (policy clock), and the domain keeps running to its end. The tray
//!   comes back without a label `repairAfter` later.
//! - **Time:** the policy's clock runs at trace time over `time scale` (the bench's
//!   `-time-scale`, 18 by default), so thresholds in the plugin args (seconds of the policy's
//!   clock) mean what they meant in the live run; label lag and backoffs are in the same seconds.
//!   With a deadline factor, every pod carries `activeDeadlineSeconds` as the bench's
//!   `-deadline-factor` writes it (EASY backfill reads it).
//!
//! It runs until every domain and plain pod has left, or the cap (trace seconds), and reports per
//! size class the domains started (by the end, and by the trace's horizon: the live runs before
//! `-until-done` ended there), their waits in trace seconds (median and p95 of the started ones,
//! and with never-started ones counted until the end, as the bench does), GPU allocation (time
//! mean over the horizon), splits and part-bound domains.
//!
//! What it does not model: scheduling and binding latency (a pass is instantaneous), informer lag
//! (the policy sees every change at once), the plugin's queueing hints and scouts (any change
//! retries every waiting pod), the Job controller's pod creation, the claim controller and DRA
//! allocation, preemption (the bench's pods share one priority), and the emulated kubelet's
//! Prepare refusals (a bind onto another domain's label is counted as a refusal and kept).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use cdplace_host::extract::{Kind, Object, PodClaim};
use cdplace_host::{Cluster, Code, Decision, Record, decision, facts};
use serde::{Deserialize, Serialize};

use super::{Policy, SIZE_CLASSES, TraceError, columns, short};

/// GPUs per tray (the bench's `gpusPerTray`).
pub const GPUS_PER_TRAY: u32 = 4;
/// The policy clock at trace time 0 (Unix ms): any fixed instant.
const EPOCH_MS: i64 = 1_800_000_000_000;
/// Share of the horizon that arrivals come in (the bench's `arrivalWindow`).
const ARRIVAL_WINDOW: f64 = 0.8;
/// The plugin args of the shipped profile (kube-scheduler-config/scheduler-config.yaml).
pub const SHIPPED_ARGS: &str = r#"{"imexMode":"DriverManaged","wholeTray":"Require","reserveTraysPerClique":0,"cliqueLabel":"nvidia.com/gpu.clique"}"#;

// ---- the trace (e2e/cmd/cdplace-bench-placement/trace.go) ----

/// `trace.json` as the bench writes it.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct BenchTrace {
    pub spec: Spec,
    #[serde(rename = "computeDomains", default, deserialize_with = "null_empty")]
    pub cds: Vec<CdArrival>,
    #[serde(rename = "plainPods", default, deserialize_with = "null_empty")]
    pub plain: Vec<PlainArrival>,
    #[serde(rename = "trayFailures", default, deserialize_with = "null_empty")]
    pub failures: Vec<TrayFailure>,
}

/// Go writes an empty slice as `null`.
fn null_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    #[serde(default)]
    pub seed: u64,
    pub racks: u32,
    pub trays_per_clique: u32,
    /// Trace seconds; arrivals come in its first 80%.
    pub horizon: f64,
    #[serde(default)]
    pub load: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CdArrival {
    pub name: String,
    pub at: f64,
    pub size: u32,
    pub lifetime: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PlainArrival {
    pub name: String,
    pub at: f64,
    pub lifetime: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrayFailure {
    pub at: f64,
    pub rack: u32,
    pub tray: u32,
    pub repair_after: f64,
}

/// Reads and checks a bench trace.
pub fn read_trace(path: &Path) -> Result<BenchTrace, TraceError> {
    let fail = |message: String| TraceError { path: path.display().to_string(), message };
    let bytes = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let t: BenchTrace = serde_json::from_slice(&bytes)
        .map_err(|e| fail(format!("not a bench-placement trace.json (spec, computeDomains, ...): {e}")))?;
    t.validate().map_err(fail)?;
    Ok(t)
}

impl BenchTrace {
    /// What makes the trace unusable, if anything.
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.spec;
        if s.racks == 0 || s.trays_per_clique == 0 || s.racks > 4096 || s.trays_per_clique > 128 {
            return Err(format!("a fleet of {} racks of {} trays", s.racks, s.trays_per_clique));
        }
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(s.horizon) {
            return Err(format!("horizon {}", s.horizon));
        }
        for c in &self.cds {
            if c.size == 0 || c.size > s.trays_per_clique || !ok(c.at) || !positive(c.lifetime) {
                return Err(format!("ComputeDomain {}: size {}, at {}, lifetime {}", c.name, c.size, c.at, c.lifetime));
            }
        }
        for p in &self.plain {
            if !ok(p.at) || !positive(p.lifetime) {
                return Err(format!("plain pod {}: at {}, lifetime {}", p.name, p.at, p.lifetime));
            }
        }
        for f in &self.failures {
            if f.rack >= s.racks || f.tray >= s.trays_per_clique || !ok(f.at) || !ok(f.repair_after) {
                return Err(format!("tray failure of rack {} tray {} at {}", f.rack, f.tray, f.at));
            }
        }
        Ok(())
    }
}

// ---- options ----

/// How the simulation runs (the bench's knobs).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimOptions {
    /// Trace seconds per second of the policy's clock (the bench's `-time-scale`).
    pub time_scale: f64,
    /// The driver's label lag, seconds of the policy's clock (the bench's `-label-lag`).
    pub label_lag: f64,
    /// `activeDeadlineSeconds` = this × the lifetime (policy clock) + 5 s; 0: none.
    pub deadline_factor: f64,
    /// The plugin args (JSON).
    pub args: String,
    /// End at this trace time even if domains are left (reported as capped).
    pub cap: f64,
    /// The fleet's name (node names, the namespace): the bench's namespace for `cdplace`.
    pub fleet: String,
    /// How the scheduling queue orders and holds back rejected pods.
    pub queue: QueueModel,
    /// 0: ties between equally scored trays go to the first by name; otherwise the seed of a
    /// random choice among them, as kube-scheduler's selectHost makes it (a run's noise).
    pub tie_seed: u64,
}

/// How the simulated scheduling queue orders and holds back rejected pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "camelCase")]
pub enum QueueModel {
    /// kube-scheduler 1.37 as the bench runs it: the active queue is ordered by the time a pod
    /// was last queued (its creation, or its last rejection: PriorityQueue refreshes the
    /// timestamp), and a rejected pod is retried at the next change of the view after its
    /// rejection; its backoff does not hold it back, because the active queue is empty at the end
    /// of every (instantaneous) pass and SchedulerPopFromBackoffQ (beta, on) pops backing-off
    /// pods then.
    Kube,
    /// Creation order, and a rejected pod waits out its backoff (1 s doubling to 10 s of the
    /// policy's clock) before the next change retries it.
    Fifo,
}

/// kube-scheduler's pod backoff (podInitialBackoffSeconds, podMaxBackoffSeconds).
const BACKOFF_INITIAL: f64 = 1.0;
const BACKOFF_MAX: f64 = 10.0;
/// The Job controller's backoff before it replaces a lost pod.
const JOB_BACKOFF: f64 = 10.0;

impl SimOptions {
    /// The bench's defaults for `trace`: time scale 18, label lag 3 s, the shipped args, a cap of
    /// 4 horizons.
    pub fn for_trace(trace: &BenchTrace) -> Self {
        SimOptions {
            time_scale: 18.0,
            label_lag: 3.0,
            deadline_factor: 0.0,
            args: SHIPPED_ARGS.to_string(),
            cap: 4.0 * trace.spec.horizon,
            fleet: format!("pq-s{}-cdplace", trace.spec.seed),
            queue: QueueModel::Kube,
            tie_seed: 0,
        }
    }
}

/// `base` with the keys of `over` (both JSON objects) set.
pub fn merge_args(base: &str, over: &str) -> Result<String, String> {
    let mut b: serde_json::Value = serde_json::from_str(base).map_err(|e| e.to_string())?;
    let o: serde_json::Value = serde_json::from_str(over).map_err(|e| format!("--args: {e}"))?;
    let (Some(bm), Some(om)) = (b.as_object_mut(), o.as_object()) else {
        return Err("--args: want a JSON object, e.g. {\"cliqueReservationAfterSeconds\":3}".into());
    };
    for (k, v) in om {
        bm.insert(k.clone(), v.clone());
    }
    Ok(b.to_string())
}

// ---- the fleet's names (e2e/harness/fleet.go) ----

/// The NVLink cluster UUID of rack `r` of fleet `name` (FleetSpec.clusterUUID).
pub fn cluster_uuid(name: &str, r: u32) -> String {
    let mut v: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{name}/{r}").bytes() {
        v ^= u64::from(b);
        v = v.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        (v >> 32) as u32,
        (v >> 16) as u16,
        (v as u16) & 0xfff,
        r & 0xfff,
        v & 0xffff_ffff_ffff
    )
}

// ---- the simulation ----

/// What the simulation asks the policy: a cluster view it keeps up to date, and the two calls.
pub trait Decider {
    fn apply(&mut self, records: &[Record]) -> Result<(), String>;
    fn pre_filter(&mut self, namespace: &str, name: &str, now_ms: i64) -> Result<Decision, String>;
    fn steer(&mut self, now_ms: i64) -> Result<Decision, String>;
}

impl Decider for Cluster {
    fn apply(&mut self, records: &[Record]) -> Result<(), String> {
        self.apply_facts(&facts::encode(records)).map_err(|e| cdplace_host::error::chain(&e))
    }
    fn pre_filter(&mut self, namespace: &str, name: &str, now_ms: i64) -> Result<Decision, String> {
        let (b, _) =
            self.pre_filter_packed_at(namespace, name, &[], now_ms).map_err(|e| cdplace_host::error::chain(&e))?;
        decision::unpack(&b)
    }
    fn steer(&mut self, now_ms: i64) -> Result<Decision, String> {
        let (b, _) = self.steer_packed_at(true, now_ms).map_err(|e| cdplace_host::error::chain(&e))?;
        decision::unpack(&b)
    }
}

/// One domain's history (trace seconds).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DomainOutcome {
    pub name: String,
    pub size: u32,
    pub arrival: f64,
    pub start: Option<f64>,
    pub end: Option<f64>,
    /// The clique it started in (its label), None when it never started.
    pub clique: Option<String>,
    pub replacements: u32,
    pub split: bool,
    pub part_bound: bool,
}

/// One size class (waits in trace seconds).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimClass {
    pub name: String,
    pub arrived: u32,
    pub started: u32,
    pub started_by_horizon: u32,
    pub wait_median: Option<f64>,
    pub wait_p95: Option<f64>,
    /// Never-started domains counted until the end (lower bounds when some never started).
    pub wait_median_censored: Option<f64>,
    pub wait_p95_censored: Option<f64>,
}

/// One policy's simulation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimPolicyReport {
    pub policy: String,
    pub digest: String,
    /// The args could not make a cluster, or a policy call failed (the simulation stopped there).
    pub error: Option<String>,
    pub classes: Vec<SimClass>,
    /// Domains that arrived before the end (all but in a capped run).
    pub cds_arrived: u32,
    pub cds_started: u32,
    pub cds_started_by_horizon: u32,
    pub cds_completed: u32,
    pub plain_arrived: u32,
    pub plain_started: u32,
    pub plain_killed: u32,
    /// Domains whose bound pods spanned more than one clique.
    pub splits: u32,
    /// Domains that had pods bound and pods pending after a scheduling pass before they started.
    pub part_bound: u32,
    /// Binds onto a tray labelled for another domain (the driver would refuse Prepare).
    pub refusals: u32,
    pub replacement_pods: u32,
    /// GPUs allocated over healthy GPUs, time mean over [0, horizon] and over the whole run.
    pub allocation_to_horizon: f64,
    pub allocation: f64,
    /// The same counting only domains with every pod bound, and plain pods.
    pub useful_allocation_to_horizon: f64,
    /// The arrival window (trace seconds): the first 80% of the horizon, the bench's
    /// `arrivalWindow` (a reader of this report checks it against its own), and the mean
    /// number of trays allocated over it (domains' and plain pods').
    pub window: f64,
    pub trays_allocated_in_window: f64,
    /// When the simulation ended (trace seconds): the last departure, or the cap.
    pub end: f64,
    pub capped: bool,
    pub pre_filter_calls: u64,
    pub steer_calls: u64,
    pub wall_seconds: f64,
    pub domains: Vec<DomainOutcome>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    pub trace: String,
    pub spec: Spec,
    pub domains: usize,
    pub plain_pods: usize,
    pub tray_failures: usize,
    pub options: SimOptions,
    pub policies: Vec<SimPolicyReport>,
}

/// Simulates `trace` with each policy.
pub fn simulate_all(path: &str, trace: &BenchTrace, policies: &[Policy], opts: &SimOptions) -> SimReport {
    let policies = policies
        .iter()
        .map(|p| {
            let began = Instant::now();
            let mut rep = match Cluster::new(p.backend.clone(), &opts.args) {
                Ok(mut c) => simulate(trace, &mut c, opts),
                Err(e) => SimPolicyReport::failed(trace, format!("the args: {}", cdplace_host::error::chain(&e))),
            };
            rep.policy = p.label.clone();
            rep.digest = p.digest.clone();
            rep.wall_seconds = began.elapsed().as_secs_f64();
            rep
        })
        .collect();
    SimReport {
        trace: path.to_string(),
        spec: trace.spec.clone(),
        domains: trace.cds.len(),
        plain_pods: trace.plain.len(),
        tray_failures: trace.failures.len(),
        options: opts.clone(),
        policies,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    // At one instant: departures, label removals, repairs, failures, arrivals, replacements,
    // retries (the reference simulator's order: completions, repairs, failures, arrivals).
    DepartCd(usize),
    DepartPlain(usize),
    LabelOff { node: usize, incarnation: u32, cd: usize },
    Repair(usize),
    Fail(usize),
    ArriveCd(usize),
    ArrivePlain(usize),
    Replace { cd: usize, index: u32 },
    Retry,
}

#[derive(Debug, PartialEq)]
struct Timed {
    t: f64,
    seq: u64,
    ev: Ev,
}

impl Eq for Timed {}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> Ordering {
        // A min-heap on (time, event kind, insertion order).
        o.t.total_cmp(&self.t).then_with(|| o.ev.rank().cmp(&self.ev.rank())).then_with(|| o.seq.cmp(&self.seq))
    }
}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ev {
    fn rank(self) -> u8 {
        match self {
            Ev::DepartCd(_) | Ev::DepartPlain(_) => 0,
            Ev::LabelOff { .. } => 1,
            Ev::Repair(_) => 2,
            Ev::Fail(_) => 3,
            Ev::ArriveCd(_) | Ev::ArrivePlain(_) => 4,
            Ev::Replace { .. } => 5,
            Ev::Retry => 6,
        }
    }
}

struct Node {
    name: String,
    clique: String,
    up: bool,
    /// Bumped at each failure: a label removal scheduled before it is void.
    incarnation: u32,
    pod: Option<usize>,
    /// The domain whose label the driver set.
    label: Option<usize>,
}

struct Pod {
    name: String,
    /// Its domain (None: a plain pod, `plain` its index).
    cd: Option<usize>,
    plain: usize,
    created: f64,
    node: Option<usize>,
    bound_at: f64,
    gone: bool,
    attempts: u32,
    next_try: f64,
    rejected_at: f64,
    /// When it was last queued (created or rejected): the active queue's order.
    stamp: f64,
}

struct Cd {
    uid: String,
    size: u32,
    lifetime: f64,
    arrival: f64,
    pods: Vec<usize>,
    start: Option<f64>,
    end: Option<f64>,
    clique: Option<String>,
    replacements: u32,
    /// Pods lost to tray failures.
    lost: u32,
    split: bool,
    part_bound: bool,
    departed: bool,
}

struct PlainRec {
    pod: Option<usize>,
    lifetime: f64,
    departed: bool,
}

struct Sim<'a, D: Decider> {
    d: &'a mut D,
    trace: &'a BenchTrace,
    opts: &'a SimOptions,
    ns: String,
    now: f64,
    seq: u64,
    events: BinaryHeap<Timed>,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    /// Pods not bound and not gone, in creation order.
    queue: Vec<usize>,
    cds: Vec<Cd>,
    plain: Vec<PlainRec>,
    batch: Vec<Record>,
    /// When the view last changed (a rejected pod is retried only after a change).
    changed: f64,
    rep: SimPolicyReport,
    // Tray-seconds integrated up to `now`.
    busy_h: f64,
    busy_window: f64,
    useful_h: f64,
    healthy_h: f64,
    busy: f64,
    healthy: f64,
    /// splitmix64 state for random tie-breaks.
    rng: u64,
}

impl SimPolicyReport {
    fn failed(trace: &BenchTrace, error: String) -> Self {
        let mut r = SimPolicyReport::empty();
        r.error = Some(error);
        r.cds_arrived = trace.cds.len() as u32;
        r
    }

    fn empty() -> Self {
        SimPolicyReport {
            policy: String::new(),
            digest: String::new(),
            error: None,
            classes: Vec::new(),
            cds_arrived: 0,
            cds_started: 0,
            cds_started_by_horizon: 0,
            cds_completed: 0,
            plain_arrived: 0,
            plain_started: 0,
            plain_killed: 0,
            splits: 0,
            part_bound: 0,
            refusals: 0,
            replacement_pods: 0,
            allocation_to_horizon: 0.0,
            allocation: 0.0,
            window: 0.0,
            trays_allocated_in_window: 0.0,
            useful_allocation_to_horizon: 0.0,
            end: 0.0,
            capped: false,
            pre_filter_calls: 0,
            steer_calls: 0,
            wall_seconds: 0.0,
            domains: Vec::new(),
        }
    }
}

/// Simulates `trace` on `d` (a fresh cluster view under the args) with `opts`. Deterministic: the
/// same trace, policy and options give the same report (but its wall time).
pub fn simulate<D: Decider>(trace: &BenchTrace, d: &mut D, opts: &SimOptions) -> SimPolicyReport {
    let ns = opts.fleet.clone();
    let mut sim = Sim {
        d,
        trace,
        opts,
        ns: ns.clone(),
        now: 0.0,
        seq: 0,
        events: BinaryHeap::new(),
        nodes: Vec::new(),
        pods: Vec::new(),
        queue: Vec::new(),
        cds: Vec::new(),
        plain: Vec::new(),
        batch: Vec::new(),
        changed: 0.0,
        rep: SimPolicyReport::empty(),
        busy_h: 0.0,
        busy_window: 0.0,
        useful_h: 0.0,
        healthy_h: 0.0,
        busy: 0.0,
        healthy: 0.0,
        rng: opts.tie_seed,
    };
    sim.run();
    sim.rep
}

impl<D: Decider> Sim<'_, D> {
    fn at(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.events.push(Timed { t, seq: self.seq, ev });
    }

    /// Trace seconds to the policy clock.
    fn ms(&self, t: f64) -> i64 {
        EPOCH_MS + (t / self.opts.time_scale * 1000.0).round() as i64
    }

    /// Seconds of the policy clock in trace seconds.
    fn real(&self, s: f64) -> f64 {
        s * self.opts.time_scale
    }

    fn run(&mut self) {
        let trace = self.trace;
        let spec = &trace.spec;
        for r in 0..spec.racks {
            let clique = format!("{}.32766", cluster_uuid(&self.opts.fleet, r));
            for t in 0..spec.trays_per_clique {
                let name = format!("{}-r{r}-t{t:02}", self.opts.fleet);
                self.nodes.push(Node {
                    name,
                    clique: clique.clone(),
                    up: true,
                    incarnation: 0,
                    pod: None,
                    label: None,
                });
            }
        }
        self.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for i in 0..self.nodes.len() {
            self.node_up(i);
        }
        for (i, c) in trace.cds.iter().enumerate() {
            self.cds.push(Cd {
                uid: format!("uid-{}", c.name),
                size: c.size,
                lifetime: c.lifetime,
                arrival: c.at,
                pods: Vec::new(),
                start: None,
                end: None,
                clique: None,
                replacements: 0,
                lost: 0,
                split: false,
                part_bound: false,
                departed: false,
            });
            self.at(c.at, Ev::ArriveCd(i));
        }
        for (i, p) in trace.plain.iter().enumerate() {
            self.plain.push(PlainRec { pod: None, lifetime: p.lifetime, departed: false });
            self.at(p.at, Ev::ArrivePlain(i));
        }
        for f in &trace.failures {
            let name = format!("{}-r{}-t{:02}", self.opts.fleet, f.rack, f.tray);
            let i = self.nodes.iter().position(|n| n.name == name).expect("validated");
            let (at, repair) = (f.at, f.at + f.repair_after);
            self.at(at, Ev::Fail(i));
            self.at(repair, Ev::Repair(i));
        }
        self.rep.cds_arrived = self.cds.len() as u32;
        self.rep.plain_arrived = self.plain.len() as u32;

        while let Some(next) = self.events.peek() {
            let t = next.t;
            if self.done() {
                break;
            }
            if t > self.opts.cap {
                self.advance(self.opts.cap);
                self.rep.capped = true;
                break;
            }
            self.advance(t);
            while self.events.peek().is_some_and(|e| e.t <= t) {
                let e = self.events.pop().expect("peeked");
                self.handle(e.ev);
            }
            if let Err(e) = self.schedule() {
                self.rep.error = Some(format!("at trace time {:.3}: {e}", self.now));
                break;
            }
        }
        self.finish();
    }

    fn done(&self) -> bool {
        self.cds.iter().all(|c| c.departed) && self.plain.iter().all(|p| p.departed)
    }

    /// The arrival window: the bench's traces bring every arrival in the first 80% of the
    /// horizon (`arrivalWindow` in e2e/cmd/cdplace-bench-placement/trace.go; the bench checks
    /// the `window` this report carries against its own).
    fn window(&self) -> f64 {
        ARRIVAL_WINDOW * self.trace.spec.horizon
    }

    /// Moves the clock to `t`, integrating allocation.
    fn advance(&mut self, t: f64) {
        let dt = t - self.now;
        if dt > 0.0 {
            let (mut busy, mut useful, mut healthy) = (0.0, 0.0, 0.0);
            for n in &self.nodes {
                if !n.up {
                    continue;
                }
                healthy += 1.0;
                if let Some(p) = n.pod {
                    busy += 1.0;
                    let full = self.pods[p].cd.is_none_or(|c| self.full(c));
                    if full {
                        useful += 1.0;
                    }
                }
            }
            let h = (t.min(self.trace.spec.horizon) - self.now).max(0.0);
            self.busy_h += busy * h;
            self.busy_window += busy * (t.min(self.window()) - self.now).max(0.0);
            self.useful_h += useful * h;
            self.healthy_h += healthy * h;
            self.busy += busy * dt;
            self.healthy += healthy * dt;
        }
        self.now = t;
    }

    /// Every pod of domain `c` is there and bound.
    fn full(&self, c: usize) -> bool {
        let cd = &self.cds[c];
        let (mut live, mut bound) = (0, 0);
        for &p in &cd.pods {
            let p = &self.pods[p];
            if !p.gone {
                live += 1;
                bound += usize::from(p.node.is_some());
            }
        }
        live == cd.size as usize && bound == live
    }

    fn node_fact(&self, i: usize) -> Record {
        let n = &self.nodes[i];
        Record::Upsert(Object::Node {
            name: n.name.clone(),
            clique_label: Some(n.clique.clone()),
            domain_label: n.label.map(|c| self.cds[c].uid.clone()),
            unschedulable: false,
            gpus: GPUS_PER_TRAY,
        })
    }

    fn node_up(&mut self, i: usize) {
        let r = self.node_fact(i);
        self.batch.push(r);
        let name = self.nodes[i].name.clone();
        self.batch.push(Record::Upsert(Object::Slice {
            name: format!("{name}-gpu.nvidia.com"),
            node: Some(name.clone()),
            gpus: GPUS_PER_TRAY,
            pool: name,
            generation: 1,
        }));
    }

    fn pod_fact(&self, p: usize) -> Record {
        let pod = &self.pods[p];
        let (claims, owner, lifetime) = match pod.cd {
            Some(c) => {
                let name = &self.trace.cds[c].name;
                (
                    vec![PodClaim {
                        name: "imex-channel".into(),
                        template: Some(format!("{name}-channel")),
                        claim: None,
                        generated: None,
                    }],
                    Some(format!("Job/{}/{name}", self.ns)),
                    self.cds[c].lifetime,
                )
            }
            None => (Vec::new(), None, self.plain[pod.plain].lifetime),
        };
        let limit = (self.opts.deadline_factor > 0.0).then(|| {
            // The bench: ceil(real lifetime × factor) + 5 s, plus the 1 s grace period.
            let secs = (lifetime / self.opts.time_scale * self.opts.deadline_factor).ceil() + 5.0 + 1.0;
            (secs * 1000.0) as i64
        });
        let started_ms = match (limit, pod.node) {
            (Some(_), Some(_)) => self.ms(pod.bound_at),
            _ => 0,
        };
        Record::Upsert(Object::Pod {
            namespace: self.ns.clone(),
            name: pod.name.clone(),
            terminal: false,
            node_name: pod.node.map(|n| self.nodes[n].name.clone()),
            nominated_node_name: None,
            claims,
            gpus: GPUS_PER_TRAY,
            size_hint: None,
            pod_group: None,
            owner,
            created_ms: self.ms(pod.created),
            priority: 0,
            runtime_limit_ms: limit,
            started_ms,
        })
    }

    fn new_pod(&mut self, name: String, cd: Option<usize>, plain: usize) -> usize {
        let p = self.pods.len();
        self.pods.push(Pod {
            name,
            cd,
            plain,
            created: self.now,
            node: None,
            bound_at: 0.0,
            gone: false,
            attempts: 0,
            next_try: self.now,
            rejected_at: f64::NEG_INFINITY,
            stamp: self.now,
        });
        self.queue.push(p);
        let r = self.pod_fact(p);
        self.batch.push(r);
        p
    }

    fn remove_pod(&mut self, p: usize) {
        let pod = &mut self.pods[p];
        if pod.gone {
            return;
        }
        pod.gone = true;
        let node = pod.node;
        self.batch.push(Record::Remove { kind: Kind::Pod, namespace: self.ns.clone(), name: pod.name.clone() });
        self.queue.retain(|&q| q != p);
        if let Some(n) = node {
            self.nodes[n].pod = None;
        }
    }

    fn handle(&mut self, ev: Ev) {
        if !matches!(ev, Ev::Retry) {
            self.changed = self.now;
        }
        match ev {
            Ev::ArriveCd(c) => {
                let a = &self.trace.cds[c];
                let (name, size) = (a.name.clone(), a.size);
                let uid = self.cds[c].uid.clone();
                let key = format!("Job/{}/{name}", self.ns);
                self.batch.push(Record::Upsert(Object::Domain {
                    namespace: self.ns.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    size_hint: None,
                    num_nodes: None,
                }));
                self.batch.push(Record::Upsert(Object::Template {
                    namespace: self.ns.clone(),
                    name: format!("{name}-channel"),
                    domain: Some(uid),
                    daemon: false,
                    gpus: cdplace_host::GpuDemand { count: 0, all: false },
                }));
                self.batch.push(Record::Upsert(Object::Owner {
                    source: format!("Job {}/{name} spec.parallelism", self.ns),
                    key,
                    size: Some(size),
                    priority: None,
                }));
                for i in 0..size {
                    let p = self.new_pod(format!("{name}-{i}"), Some(c), 0);
                    self.cds[c].pods.push(p);
                }
            }
            Ev::ArrivePlain(i) => {
                let p = self.new_pod(self.trace.plain[i].name.clone(), None, i);
                self.plain[i].pod = Some(p);
            }
            Ev::DepartCd(c) => {
                if self.cds[c].departed {
                    return;
                }
                let cd = &mut self.cds[c];
                cd.departed = true;
                cd.end = Some(self.now);
                let name = self.trace.cds[c].name.clone();
                let lag = self.real(self.opts.label_lag);
                for p in self.cds[c].pods.clone() {
                    if let Some(n) = self.pods[p].node.filter(|_| !self.pods[p].gone) {
                        let incarnation = self.nodes[n].incarnation;
                        self.at(self.now + lag, Ev::LabelOff { node: n, incarnation, cd: c });
                    }
                    self.remove_pod(p);
                }
                for (kind, n) in
                    [(Kind::ComputeDomain, name.clone()), (Kind::ResourceClaimTemplate, format!("{name}-channel"))]
                {
                    self.batch.push(Record::Remove { kind, namespace: self.ns.clone(), name: n });
                }
                self.batch.push(Record::Remove {
                    kind: Kind::Owner,
                    namespace: String::new(),
                    name: format!("Job/{}/{name}", self.ns),
                });
            }
            Ev::DepartPlain(i) => {
                if self.plain[i].departed {
                    return;
                }
                self.plain[i].departed = true;
                if let Some(p) = self.plain[i].pod {
                    self.remove_pod(p);
                }
            }
            Ev::LabelOff { node, incarnation, cd } => {
                let n = &self.nodes[node];
                let holds = n.pod.is_some_and(|p| self.pods[p].cd == Some(cd));
                if n.incarnation == incarnation && n.label == Some(cd) && !holds {
                    self.nodes[node].label = None;
                    let r = self.node_fact(node);
                    self.batch.push(r);
                }
            }
            Ev::Fail(i) => {
                if !self.nodes[i].up {
                    return;
                }
                let name = self.nodes[i].name.clone();
                self.nodes[i].up = false;
                self.nodes[i].incarnation += 1;
                self.nodes[i].label = None;
                self.batch.push(Record::Remove { kind: Kind::Node, namespace: String::new(), name: name.clone() });
                self.batch.push(Record::Remove {
                    kind: Kind::ResourceSlice,
                    namespace: String::new(),
                    name: format!("{name}-gpu.nvidia.com"),
                });
                if let Some(p) = self.nodes[i].pod {
                    match self.pods[p].cd {
                        None => {
                            let k = self.pods[p].plain;
                            self.plain[k].departed = true;
                            self.rep.plain_killed += 1;
                            self.remove_pod(p);
                        }
                        Some(c) => {
                            self.remove_pod(p);
                            self.cds[c].lost += 1;
                            if !self.cds[c].departed {
                                let index = self.cds[c].pods.iter().position(|&q| q == p).unwrap_or(0) as u32;
                                self.at(self.now + self.real(JOB_BACKOFF), Ev::Replace { cd: c, index });
                            }
                        }
                    }
                }
            }
            Ev::Repair(i) => {
                self.nodes[i].up = true;
                self.node_up(i);
            }
            Ev::Replace { cd, index } => {
                if self.cds[cd].departed {
                    return;
                }
                self.cds[cd].replacements += 1;
                self.rep.replacement_pods += 1;
                let name = format!("{}-{index}-r{}", self.trace.cds[cd].name, self.cds[cd].replacements);
                let p = self.new_pod(name, Some(cd), 0);
                self.cds[cd].pods.push(p);
            }
            Ev::Retry => {}
        }
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let b = std::mem::take(&mut self.batch);
        self.d.apply(&b)
    }

    /// One scheduling pass over the queue at `now`.
    fn schedule(&mut self) -> Result<(), String> {
        self.flush()?;
        let now_ms = self.ms(self.now);
        let kube = self.opts.queue == QueueModel::Kube;
        if kube {
            // Stable: pods queued at one instant keep their order.
            let pods = &self.pods;
            self.queue.sort_by(|&a, &b| pods[a].stamp.total_cmp(&pods[b].stamp));
        }
        let mut i = 0;
        // Domains rejected in this pass: their other pods get the same answer.
        let mut rejected: Vec<usize> = Vec::new();
        let mut steer: Option<Decision> = None;
        while i < self.queue.len() {
            let p = self.queue[i];
            let pod = &self.pods[p];
            let eligible = pod.attempts == 0 || ((kube || pod.next_try <= self.now) && self.changed > pod.rejected_at);
            if !eligible {
                i += 1;
                continue;
            }
            let cd = pod.cd;
            if let Some(c) = cd
                && rejected.contains(&c)
            {
                self.reject(p);
                i += 1;
                continue;
            }
            let d = match cd {
                Some(_) => {
                    self.rep.pre_filter_calls += 1;
                    let name = self.pods[p].name.clone();
                    self.d.pre_filter(&self.ns, &name, now_ms)?
                }
                None => {
                    // The steering answer is the same for every plain pod on one view.
                    if steer.is_none() {
                        self.rep.steer_calls += 1;
                        steer = Some(self.d.steer(now_ms)?);
                    }
                    steer.clone().expect("set")
                }
            };
            match self.choose(&d) {
                Some(n) => {
                    self.bind(p, n);
                    self.flush()?;
                    steer = None;
                    self.queue.remove(i);
                }
                None => {
                    if let Some(c) = cd {
                        rejected.push(c);
                    }
                    self.reject(p);
                    i += 1;
                }
            }
        }
        for c in 0..self.cds.len() {
            let cd = &self.cds[c];
            if cd.start.is_none() && !cd.departed && cd.lost == 0 {
                let bound = cd.pods.iter().filter(|&&p| !self.pods[p].gone && self.pods[p].node.is_some()).count();
                if bound > 0 && !cd.part_bound {
                    self.cds[c].part_bound = true;
                }
            }
        }
        Ok(())
    }

    fn reject(&mut self, p: usize) {
        let now = self.now;
        let scale = self.opts.time_scale;
        let pod = &mut self.pods[p];
        pod.attempts += 1;
        let backoff = (BACKOFF_INITIAL * 2f64.powi(pod.attempts.min(30) as i32 - 1)).min(BACKOFF_MAX);
        pod.next_try = now + backoff * scale;
        pod.rejected_at = now;
        pod.stamp = now;
        let t = pod.next_try;
        if self.opts.queue == QueueModel::Fifo {
            self.at(t, Ev::Retry);
        }
    }

    /// The node kube-scheduler would bind the pod to under decision `d`, if any.
    fn choose(&mut self, d: &Decision) -> Option<usize> {
        let mut best: Option<(u32, usize)> = None;
        let mut ties = 0u64;
        let random = self.opts.tie_seed != 0;
        let skip = d.status.code == Code::Skip;
        if !skip && d.status.code != Code::Success {
            return None;
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if !n.up || n.pod.is_some() {
                continue;
            }
            let score = if skip {
                0
            } else {
                if let Some(set) = &d.node_set
                    && set.binary_search(&n.name).is_err()
                {
                    continue;
                }
                let (st, score) = d.node(&n.name, Some(&n.clique));
                if st.code != Code::Success {
                    continue;
                }
                score.unwrap_or(0)
            };
            match best {
                Some((b, _)) if score < b => {}
                Some((b, _)) if score == b => {
                    // selectHost: each of the k equal nodes seen so far kept with chance 1/k.
                    ties += 1;
                    if random && draw(&mut self.rng, ties) == 0 {
                        best = Some((score, i));
                    }
                }
                _ => {
                    best = Some((score, i));
                    ties = 1;
                }
            }
        }
        best.map(|b| b.1)
    }

    fn bind(&mut self, p: usize, n: usize) {
        self.changed = self.now;
        self.pods[p].node = Some(n);
        self.pods[p].bound_at = self.now;
        self.nodes[n].pod = Some(p);
        let r = self.pod_fact(p);
        self.batch.push(r);
        match self.pods[p].cd {
            None => {
                let k = self.pods[p].plain;
                self.rep.plain_started += 1;
                let end = self.now + self.plain[k].lifetime;
                self.at(end, Ev::DepartPlain(k));
            }
            Some(c) => {
                // Prepare: the driver labels the tray (it refuses another domain's label).
                match self.nodes[n].label {
                    None => {
                        self.nodes[n].label = Some(c);
                        let r = self.node_fact(n);
                        self.batch.push(r);
                    }
                    Some(l) if l != c => self.rep.refusals += 1,
                    Some(_) => {}
                }
                let clique = self.nodes[n].clique.clone();
                let cliques: Vec<&str> = self.cds[c]
                    .pods
                    .iter()
                    .filter_map(|&q| self.pods[q].node.filter(|_| !self.pods[q].gone))
                    .map(|m| self.nodes[m].clique.as_str())
                    .collect();
                if cliques.iter().any(|&x| x != clique) {
                    self.cds[c].split = true;
                }
                // The plugin wakes the domain's rejected pods.
                for q in self.cds[c].pods.clone() {
                    let pod = &mut self.pods[q];
                    if pod.node.is_none() && !pod.gone {
                        pod.next_try = self.now;
                        pod.rejected_at = f64::NEG_INFINITY;
                    }
                }
                if self.cds[c].start.is_none() && self.full(c) {
                    self.cds[c].start = Some(self.now);
                    self.cds[c].clique = Some(clique);
                    let end = self.now + self.cds[c].lifetime;
                    self.at(end, Ev::DepartCd(c));
                }
            }
        }
    }

    fn finish(&mut self) {
        let end = self.now;
        let horizon = self.trace.spec.horizon;
        let window = self.window();
        let rep = &mut self.rep;
        rep.end = end;
        rep.allocation_to_horizon = ratio(self.busy_h, self.healthy_h);
        rep.useful_allocation_to_horizon = ratio(self.useful_h, self.healthy_h);
        rep.allocation = ratio(self.busy, self.healthy);
        rep.window = window;
        rep.trays_allocated_in_window = ratio(self.busy_window, window);
        let mut waits: Vec<Vec<f64>> = vec![Vec::new(); SIZE_CLASSES.len()];
        let mut censored: Vec<Vec<f64>> = vec![Vec::new(); SIZE_CLASSES.len()];
        // Domains that arrived before the end (all of them unless the run was capped).
        let mut arrived = 0;
        rep.classes = SIZE_CLASSES
            .iter()
            .map(|c| SimClass {
                name: c.0.to_string(),
                arrived: 0,
                started: 0,
                started_by_horizon: 0,
                wait_median: None,
                wait_p95: None,
                wait_median_censored: None,
                wait_p95_censored: None,
            })
            .collect();
        for (i, cd) in self.cds.iter().enumerate() {
            let k = SIZE_CLASSES.iter().position(|c| (c.1..=c.2).contains(&cd.size)).unwrap_or(SIZE_CLASSES.len() - 1);
            let cl = &mut rep.classes[k];
            if cd.arrival <= end {
                cl.arrived += 1;
                arrived += 1;
            }
            match cd.start {
                Some(s) => {
                    cl.started += 1;
                    rep.cds_started += 1;
                    if s <= horizon {
                        cl.started_by_horizon += 1;
                        rep.cds_started_by_horizon += 1;
                    }
                    waits[k].push(s - cd.arrival);
                    censored[k].push(s - cd.arrival);
                }
                None if cd.arrival <= end => censored[k].push(end - cd.arrival),
                None => {}
            }
            if cd.end.is_some() {
                rep.cds_completed += 1;
            }
            if cd.split {
                rep.splits += 1;
            }
            if cd.part_bound {
                rep.part_bound += 1;
            }
            rep.domains.push(DomainOutcome {
                name: self.trace.cds[i].name.clone(),
                size: cd.size,
                arrival: cd.arrival,
                start: cd.start,
                end: cd.end,
                clique: cd.clique.clone(),
                replacements: cd.replacements,
                split: cd.split,
                part_bound: cd.part_bound,
            });
        }
        rep.cds_arrived = arrived;
        for (k, cl) in rep.classes.iter_mut().enumerate() {
            cl.wait_median = quantile(&waits[k], 0.5);
            cl.wait_p95 = quantile(&waits[k], 0.95);
            cl.wait_median_censored = quantile(&censored[k], 0.5);
            cl.wait_p95_censored = quantile(&censored[k], 0.95);
        }
    }
}

/// A uniform draw in [0, n) (splitmix64).
fn draw(rng: &mut u64, n: u64) -> u64 {
    *rng = rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *rng;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % n
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The bench's quantile: the ceil(q·n)-th smallest.
pub fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    Some(s[i])
}

// ---- the report ----

impl SimReport {
    /// The text report: the policies side by side.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let s = &self.spec;
        let o = &self.options;
        let _ = writeln!(
            out,
            "trace: {} (seed {}): {} ComputeDomains, {} plain pods, {} tray failures on {} cliques × {} trays; horizon {} trace s",
            self.trace,
            s.seed,
            self.domains,
            self.plain_pods,
            self.tray_failures,
            s.racks,
            s.trays_per_clique,
            s.horizon
        );
        let _ = writeln!(
            out,
            "simulated: time scale {} (trace s per policy s), label lag {} s ({} trace s), deadline factor {}, cap {} trace s; args {}",
            o.time_scale,
            o.label_lag,
            o.label_lag * o.time_scale,
            o.deadline_factor,
            o.cap,
            o.args
        );
        let mut rows: Vec<(String, Vec<String>)> = Vec::new();
        let col = |f: &dyn Fn(&SimPolicyReport) -> String| self.policies.iter().map(f).collect::<Vec<_>>();
        rows.push(("policy".into(), col(&|p| short(&p.policy))));
        rows.push(("digest".into(), col(&|p| p.digest[..p.digest.len().min(19)].to_string())));
        rows.push((
            "started (by the horizon) / arrived".into(),
            col(&|p| format!("{} ({}) / {}", p.cds_started, p.cds_started_by_horizon, p.cds_arrived)),
        ));
        for (k, c) in SIZE_CLASSES.iter().enumerate() {
            rows.push((
                format!("  {} trays", c.0),
                col(&|p| {
                    p.classes
                        .get(k)
                        .map_or("-".into(), |x| format!("{} ({}) / {}", x.started, x.started_by_horizon, x.arrived))
                }),
            ));
        }
        rows.push(("wait median / p95 (trace s, started)".into(), col(&|_| String::new())));
        for (k, c) in SIZE_CLASSES.iter().enumerate() {
            rows.push((
                format!("  {} trays", c.0),
                col(&|p| {
                    p.classes.get(k).map_or("-".into(), |x| format!("{} / {}", num(x.wait_median), num(x.wait_p95)))
                }),
            ));
        }
        rows.push(("wait incl. never started, median / p95".into(), col(&|_| String::new())));
        for (k, c) in SIZE_CLASSES.iter().enumerate() {
            rows.push((
                format!("  {} trays", c.0),
                col(&|p| {
                    p.classes.get(k).map_or("-".into(), |x| {
                        format!("{} / {}", num(x.wait_median_censored), num(x.wait_p95_censored))
                    })
                }),
            ));
        }
        rows.push((
            "GPU allocation to the horizon / whole run".into(),
            col(&|p| format!("{:.1}% / {:.1}%", 100.0 * p.allocation_to_horizon, 100.0 * p.allocation)),
        ));
        rows.push((
            "useful allocation to the horizon".into(),
            col(&|p| format!("{:.1}%", 100.0 * p.useful_allocation_to_horizon)),
        ));
        rows.push((
            "plain pods started / killed".into(),
            col(&|p| format!("{} / {} of {}", p.plain_started, p.plain_killed, p.plain_arrived)),
        ));
        rows.push((
            "splits / part-bound / refusals".into(),
            col(&|p| format!("{} / {} / {}", p.splits, p.part_bound, p.refusals)),
        ));
        rows.push(("replacement pods".into(), col(&|p| p.replacement_pods.to_string())));
        rows.push((
            "ended at (trace s)".into(),
            col(&|p| format!("{:.0}{}", p.end, if p.capped { " (capped)" } else { "" })),
        ));
        rows.push((
            "policy calls (pre-filter + steer)".into(),
            col(&|p| format!("{} + {}", p.pre_filter_calls, p.steer_calls)),
        ));
        rows.push(("wall time".into(), col(&|p| format!("{:.2} s", p.wall_seconds))));
        out.push('\n');
        columns(&mut out, &rows);
        for p in &self.policies {
            if let Some(e) = &p.error {
                let _ = writeln!(out, "\n{}: {e}", short(&p.policy));
            }
        }
        out
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(racks: u32, trays: u32, cds: &[(f64, u32, f64)]) -> BenchTrace {
        BenchTrace {
            spec: Spec { seed: 1, racks, trays_per_clique: trays, horizon: 1000.0, load: 0.0 },
            cds: cds
                .iter()
                .enumerate()
                .map(|(i, &(at, size, lifetime))| CdArrival { name: format!("cd-{i:03}"), at, size, lifetime })
                .collect(),
            plain: Vec::new(),
            failures: Vec::new(),
        }
    }

    fn opts(t: &BenchTrace, label_lag: f64) -> SimOptions {
        SimOptions { time_scale: 1.0, label_lag, ..SimOptions::for_trace(t) }
    }

    fn run(t: &BenchTrace, o: &SimOptions) -> SimPolicyReport {
        let rt = cdplace_host::Runtime::new(crate::EMBEDDED_GUEST).expect("the embedded policy");
        let mut c = Cluster::new(rt, &o.args).expect("cluster");
        let r = simulate(t, &mut c, o);
        assert_eq!(r.error, None);
        r
    }

    fn starts(r: &SimPolicyReport) -> Vec<Option<f64>> {
        r.domains.iter().map(|d| d.start).collect()
    }

    #[test]
    fn one_clique_by_hand() {
        // One clique of 4 trays: 2 trays from 0 to 100, 2 from 10 to 60; the 4-tray domain
        // arriving at 20 needs the whole clique: it starts when the first leaves (100).
        let t = trace(1, 4, &[(0.0, 2, 100.0), (10.0, 2, 50.0), (20.0, 4, 30.0)]);
        let r = run(&t, &opts(&t, 0.0));
        assert_eq!(starts(&r), [Some(0.0), Some(10.0), Some(100.0)]);
        assert_eq!(r.end, 130.0);
        assert_eq!((r.cds_started, r.cds_completed, r.splits, r.part_bound, r.refusals), (3, 3, 0, 0, 0));
        assert_eq!(r.classes[0].started, 3);
        assert_eq!(r.classes[0].wait_median, Some(0.0));
        assert_eq!(r.classes[0].wait_p95, Some(80.0));
        // Busy trays: 2 on [0,10), 4 on [10,60), 2 on [60,100), 4 on [100,130): 420 of 520.
        assert!((r.allocation - 420.0 / 520.0).abs() < 1e-9, "{}", r.allocation);
        // The arrival window is 800 of the 1,000 s horizon; all 420 tray-seconds fall in it.
        assert_eq!(r.window, 800.0);
        assert!((r.trays_allocated_in_window - 420.0 / 800.0).abs() < 1e-9, "{}", r.trays_allocated_in_window);
    }

    #[test]
    fn the_label_lag_delays_a_start() {
        // The same with the driver's label lag of 5 s: the trays of the first domain are free at
        // 100 but labelled until 105. kube-scheduler's queue retries the 4-tray domain at every
        // change after its rejection: it starts when the labels go (105).
        let t = trace(1, 4, &[(0.0, 2, 100.0), (10.0, 2, 50.0), (20.0, 4, 30.0)]);
        let r = run(&t, &opts(&t, 5.0));
        assert_eq!(starts(&r), [Some(0.0), Some(10.0), Some(105.0)]);
        assert_eq!(r.refusals, 0);
        // With backoffs held (the fifo queue): rejected at 20, 60, 65 (the second domain's labels
        // gone, two trays still held) and 100 (labels), its fourth backoff is 8 s: the change at
        // 105 finds it backing off until 108, when it is retried and starts.
        let r = run(&t, &SimOptions { queue: QueueModel::Fifo, ..opts(&t, 5.0) });
        assert_eq!(starts(&r), [Some(0.0), Some(10.0), Some(108.0)]);
    }

    #[test]
    fn a_backing_off_domain_is_overtaken_only_in_the_fifo_queue() {
        // One clique of 4, all held until 13.5. A 3-tray domain arrives at 10 (rejected), a
        // 2-tray one at 12 (both rejected again). When the trays free at 13.5, kube-scheduler's
        // queue retries both in order, so the older one starts; the fifo queue holds the older
        // one in its second backoff (2 s, until 14) and the newer one takes the trays.
        let t = trace(1, 4, &[(0.0, 4, 13.5), (10.0, 3, 50.0), (12.0, 2, 50.0)]);
        let kube = run(&t, &opts(&t, 0.0));
        assert_eq!(starts(&kube), [Some(0.0), Some(13.5), Some(63.5)]);
        let fifo = run(&t, &SimOptions { queue: QueueModel::Fifo, ..opts(&t, 0.0) });
        assert_eq!(starts(&fifo), [Some(0.0), Some(63.5), Some(13.5)]);
    }

    #[test]
    fn best_fit_keeps_a_clique_whole() {
        // Two cliques of 4: a 3-tray domain, then a 1-tray one goes beside it (best fit), so the
        // 4-tray domain starts at once in the other clique.
        let t = trace(2, 4, &[(0.0, 3, 100.0), (10.0, 1, 100.0), (20.0, 4, 10.0)]);
        let r = run(&t, &opts(&t, 0.0));
        assert_eq!(starts(&r), [Some(0.0), Some(10.0), Some(20.0)]);
        assert_eq!(r.domains[0].clique, r.domains[1].clique);
        assert_ne!(r.domains[0].clique, r.domains[2].clique);
        assert_eq!(r.end, 110.0);
    }

    #[test]
    fn failures_kill_plain_pods_and_replace_domain_pods() {
        let mut t = trace(1, 4, &[(0.0, 2, 100.0)]);
        t.plain = vec![PlainArrival { name: "plain-000".into(), at: 1.0, lifetime: 500.0 }];
        // Trays 00 and 01 hold the domain (first by name), 02 the plain pod.
        t.failures = vec![
            TrayFailure { at: 5.0, rack: 0, tray: 0, repair_after: 1000.0 },
            TrayFailure { at: 6.0, rack: 0, tray: 2, repair_after: 1000.0 },
        ];
        let r = run(&t, &opts(&t, 0.0));
        assert_eq!((r.plain_started, r.plain_killed), (1, 1));
        // The Job replaces the lost pod after 10 s; the domain keeps its end (100).
        assert_eq!(r.replacement_pods, 1);
        assert_eq!(r.domains[0].end, Some(100.0));
        assert_eq!((r.splits, r.part_bound), (0, 0));
    }

    #[test]
    fn the_cap_ends_a_run_that_cannot_finish() {
        // A domain larger than the clique's trays left after a failure never starts.
        let mut t = trace(1, 2, &[(0.0, 2, 10.0)]);
        t.failures = vec![TrayFailure { at: 0.0, rack: 0, tray: 0, repair_after: 1e9 }];
        let o = SimOptions { cap: 500.0, ..opts(&t, 0.0) };
        let r = run(&t, &o);
        assert!(r.capped);
        assert_eq!(r.end, 500.0);
        assert_eq!((r.cds_arrived, r.cds_started), (1, 0));
        assert_eq!(r.classes[0].wait_median_censored, Some(500.0));
    }

    #[test]
    fn names_as_the_bench() {
        // e2e/harness FleetSpec.clusterUUID of "pq-s1-cdplace" rack 0 (checked against Go).
        assert_eq!(cluster_uuid("pq-s1-cdplace", 0), "4b2096cb-1fc9-49c5-8000-96cb1fc9f9c5");
        assert_eq!(cluster_uuid("pq-s1-cdplace", 1), "4b2095cb-1fc9-4812-8001-95cb1fc9f812");
        assert_eq!(quantile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.95), Some(4.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn trace_json_as_go_writes_it() {
        let j = r#"{"spec":{"seed":7,"racks":2,"traysPerClique":4,"arrivals":1,"plainPods":0,"failures":0,"horizon":100},
            "computeDomains":[{"name":"cd-000","at":1.5,"size":2,"lifetime":10}],"plainPods":null,"trayFailures":null}"#;
        let t: BenchTrace = serde_json::from_str(j).unwrap();
        assert!(t.validate().is_ok());
        assert_eq!((t.cds.len(), t.plain.len(), t.failures.len()), (1, 0, 0));
        let mut bad = t.clone();
        bad.cds[0].size = 5;
        assert!(bad.validate().unwrap_err().contains("size 5"));
        let merged: serde_json::Value =
            serde_json::from_str(&merge_args(SHIPPED_ARGS, r#"{"cliqueReservationAfterSeconds":3}"#).unwrap()).unwrap();
        assert_eq!(merged["cliqueReservationAfterSeconds"], 3);
        assert_eq!(merged["wholeTray"], "Require");
        assert!(merge_args(SHIPPED_ARGS, "[1]").is_err());
    }
}
