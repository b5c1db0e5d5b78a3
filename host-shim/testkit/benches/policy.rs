//! The policy benchmark: the placement policy compiled natively against the same policy running
//! as the WebAssembly component, on identical inputs, side by side in one run.
//!
//! Cases, at 500, 5,000 and 20,000 trays (cliques of 18 trays of 4 GPUs, about 70% of trays
//! running pods of ComputeDomains of mixed sizes, a few non-ComputeDomain GPU pods and a few
//! stale `resource.nvidia.com/computeDomain` node labels):
//! - PreFilter for a pending pod of a new 8-tray ComputeDomain (must find a clique), for a
//!   pending pod of a ComputeDomain already running in a clique, and for a non-CD pod (Skip):
//!   `View::pre_filter` against `GuestInstance::pre_filter`;
//! - one `Delta::UpsertPod` that binds a pod (and one that unbinds it), applied to each;
//! - loading every fact into a fresh view / a fresh instance;
//! - `Cluster::pre_filter` end to end (JSON objects in, `Decision` out) on the test kit's native
//!   backend against the component's.
//!
//! Before timing, every case checks that both builds give the same answer, and panics if not.
//!
//! Run: `make guest` (or `cargo build -p cdplace-guest --target wasm32-wasip2 --profile guest`),
//! then `cargo bench -p cdplace-testkit --bench policy`. Options after `--`: `--quick` (a smoke run),
//! `--sizes=500,5000`, `--filter=TEXT,...` (only the cases whose name starts with a TEXT),
//! `--guest=PATH` (another build of the component). Prints a table and writes
//! `target/bench/policy.json`. The guest must be built from the same policy sources as this
//! benchmark, or the parity check fails.

use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cdplace_host::wit;
use cdplace_host::{Cluster, Code, GuestInstance, Limits, Runtime};
use cdplace_policy::{
    Args, ClaimRef, Delta, DomainFact, GpuDemand, NodeFact, Placement, PodFact, PreFilterResult, StrId, TemplateFact,
    View,
};
use serde_json::{Value, json};

const TRAYS_PER_CLIQUE: usize = 18;
const GPUS_PER_TRAY: u32 = 4;
const NEW_CD_SIZE: u32 = 8;
const SIZES: [usize; 3] = [500, 5_000, 20_000];

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

/// How long to time.
#[derive(Debug, Clone)]
struct Cfg {
    quick: bool,
    /// Only cases whose name starts with one of these (`--filter=TEXT[,TEXT...]`); the answers
    /// are checked anyway.
    filter: Option<String>,
    warmup: Duration,
    batch: Duration,
    batches: usize,
    /// Repetitions of the one-shot cases (loading every fact).
    loads: usize,
}

impl Cfg {
    fn new(quick: bool, filter: Option<String>) -> Self {
        if quick {
            Cfg {
                quick,
                filter,
                warmup: Duration::from_millis(2),
                batch: Duration::from_millis(2),
                batches: 3,
                loads: 1,
            }
        } else {
            Cfg {
                quick,
                filter,
                warmup: Duration::from_millis(100),
                batch: Duration::from_millis(20),
                batches: 15,
                loads: 5,
            }
        }
    }

    fn wants(&self, case: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| f.split(',').any(|f| case.starts_with(f)))
    }
}

/// Per-operation times of the batches, in microseconds.
#[derive(Debug, Clone, Copy)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

impl Stat {
    fn of(mut v: Vec<f64>) -> Stat {
        v.sort_by(f64::total_cmp);
        Stat { median: v[v.len() / 2], min: v[0], max: v[v.len() - 1] }
    }

    fn json(&self) -> Value {
        json!({ "median_us": self.median, "min_us": self.min, "max_us": self.max })
    }
}

/// Runs `f` until `d` has passed (at least once); returns the time per call.
fn run_for(f: &mut dyn FnMut(), d: Duration) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    loop {
        f();
        n += 1;
        let el = start.elapsed();
        if el >= d {
            return el / n;
        }
    }
}

fn time_batch(f: &mut dyn FnMut(), iters: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / iters as f64
}

/// Times two implementations of one operation: warm-up, then batches alternating between them;
/// the median per-operation time of each.
fn pair(cfg: &Cfg, native: &mut dyn FnMut(), wasm: &mut dyn FnMut()) -> (Stat, Stat) {
    let per_n = run_for(native, cfg.warmup);
    let per_w = run_for(wasm, cfg.warmup);
    let iters = |per: Duration| (cfg.batch.as_nanos() / per.as_nanos().max(1)).clamp(1, 1_000_000) as u64;
    let (in_, iw) = (iters(per_n), iters(per_w));
    let mut tn = Vec::with_capacity(cfg.batches);
    let mut tw = Vec::with_capacity(cfg.batches);
    for _ in 0..cfg.batches {
        tn.push(time_batch(native, in_));
        tw.push(time_batch(wasm, iw));
    }
    (Stat::of(tn), Stat::of(tw))
}

/// Times one-shot operations (each call builds its own state): the median of `cfg.loads` runs.
fn pair_once(cfg: &Cfg, native: &mut dyn FnMut(), wasm: &mut dyn FnMut()) -> (Stat, Stat) {
    let mut tn = Vec::new();
    let mut tw = Vec::new();
    for _ in 0..cfg.loads {
        tn.push(time_batch(native, 1));
        tw.push(time_batch(wasm, 1));
    }
    (Stat::of(tn), Stat::of(tw))
}

// ---------------------------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------------------------

/// splitmix64: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

#[derive(Debug)]
struct MNode {
    name: String,
    clique: usize,
    label: String,
    domain_label: Option<String>,
}

#[derive(Debug)]
struct MDomain {
    ns: String,
    name: String,
    uid: String,
    template: String,
    size: u32,
}

#[derive(Debug)]
struct MPod {
    ns: String,
    name: String,
    domain: Option<usize>,
    node: Option<usize>,
    gpus: u32,
}

/// The cluster, independent of how it is fed to the policy.
#[derive(Debug)]
struct Model {
    trays: usize,
    cliques: usize,
    nodes: Vec<MNode>,
    domains: Vec<MDomain>,
    pods: Vec<MPod>,
    /// A pending pod of a new ComputeDomain of [`NEW_CD_SIZE`] trays.
    new_pod: usize,
    /// A pending pod of a ComputeDomain that already runs in clique 0.
    running_pod: usize,
    /// A pending GPU pod without ComputeDomain.
    plain_pod: usize,
    /// A free tray in a clique where the new ComputeDomain fits, to bind `new_pod` to.
    bind_node: usize,
    occupied: usize,
    non_cd: usize,
    stale: usize,
}

impl Model {
    fn new(trays: usize, seed: u64) -> Model {
        let mut rng = Rng(seed);
        let cluster = rng.uuid();
        let cliques = trays.div_ceil(TRAYS_PER_CLIQUE);
        let mut nodes = Vec::with_capacity(trays);
        for i in 0..trays {
            let (c, t) = (i / TRAYS_PER_CLIQUE, i % TRAYS_PER_CLIQUE);
            nodes.push(MNode {
                name: format!("gb200-c{c:04}-t{t:02}"),
                clique: c,
                label: format!("{cluster}.{c}"),
                domain_label: None,
            });
        }
        let mut used = vec![false; trays];
        let mut domains: Vec<MDomain> = Vec::new();
        let mut pods: Vec<MPod> = Vec::new();
        let add_domain = |rng: &mut Rng, domains: &mut Vec<MDomain>, ns: String, size: u32| {
            let i = domains.len();
            domains.push(MDomain {
                ns,
                name: format!("train-{i}"),
                uid: rng.uuid(),
                template: format!("train-{i}-channel"),
                size,
            });
            i
        };
        let mut running_pod = usize::MAX;
        for c in 0..cliques {
            let mut members: Vec<usize> = (c * TRAYS_PER_CLIQUE..((c + 1) * TRAYS_PER_CLIQUE).min(trays)).collect();
            rng.shuffle(&mut members);
            let n = members.len();
            // Fill each clique to 40-100% (70% on average); clique 0 to 10 of 18 trays, with a
            // domain of 6 that has placed 5 pods and waits for its 6th.
            let target = if c == 0 { n.min(10) } else { ((n as f64) * (0.4 + 0.6 * rng.unit())).round() as usize };
            let mut next = 0;
            if c == 0 && n >= 6 {
                let d = add_domain(&mut rng, &mut domains, "team-0".into(), 6);
                for (j, &node) in members[..5].iter().enumerate() {
                    used[node] = true;
                    let name = format!("train-{d}-{j}");
                    pods.push(MPod {
                        ns: "team-0".into(),
                        name,
                        domain: Some(d),
                        node: Some(node),
                        gpus: GPUS_PER_TRAY,
                    });
                }
                running_pod = pods.len();
                pods.push(MPod {
                    ns: "team-0".into(),
                    name: format!("train-{d}-5"),
                    domain: Some(d),
                    node: None,
                    gpus: GPUS_PER_TRAY,
                });
                next = 5;
            }
            while next < target {
                let size = (1 + rng.below(TRAYS_PER_CLIQUE)).min(target - next);
                let ns = format!("team-{}", domains.len() % 32);
                let d = add_domain(&mut rng, &mut domains, ns.clone(), size as u32);
                for (j, &node) in members[next..next + size].iter().enumerate() {
                    used[node] = true;
                    let name = format!("train-{d}-{j}");
                    pods.push(MPod { ns: ns.clone(), name, domain: Some(d), node: Some(node), gpus: GPUS_PER_TRAY });
                }
                next += size;
            }
        }
        assert!(running_pod != usize::MAX, "clique 0 needs at least 6 trays");
        // A few GPU pods without a ComputeDomain and a few stale domain labels, on free trays
        // outside clique 0.
        let free_outside0 = |rng: &mut Rng, used: &mut Vec<bool>| {
            for _ in 0..1000 {
                let i = TRAYS_PER_CLIQUE + rng.below(trays - TRAYS_PER_CLIQUE);
                if !used[i] {
                    used[i] = true;
                    return Some(i);
                }
            }
            None
        };
        let non_cd = (trays / 200).max(2);
        for k in 0..non_cd {
            let node = free_outside0(&mut rng, &mut used).expect("a free tray");
            let gpus = if k % 3 == 0 { 2 } else { GPUS_PER_TRAY };
            pods.push(MPod { ns: "batch".into(), name: format!("job-{k}"), domain: None, node: Some(node), gpus });
        }
        let stale = (trays / 250).max(2);
        for _ in 0..stale {
            let node = free_outside0(&mut rng, &mut used).expect("a free tray");
            nodes[node].domain_label = Some(rng.uuid());
        }
        let occupied = used.iter().filter(|&&u| u).count() - stale;
        // The new domain: all its pods are pending.
        let d = add_domain(&mut rng, &mut domains, "team-new".into(), NEW_CD_SIZE);
        let new_pod = pods.len();
        for j in 0..NEW_CD_SIZE {
            pods.push(MPod {
                ns: "team-new".into(),
                name: format!("train-{d}-{j}"),
                domain: Some(d),
                node: None,
                gpus: GPUS_PER_TRAY,
            });
        }
        let plain_pod = pods.len();
        pods.push(MPod { ns: "batch".into(), name: "plain-0".into(), domain: None, node: None, gpus: GPUS_PER_TRAY });
        let mut free_per_clique = vec![0usize; cliques];
        for (i, n) in nodes.iter().enumerate() {
            if !used[i] {
                free_per_clique[n.clique] += 1;
            }
        }
        let bind_node = (0..trays)
            .find(|&i| nodes[i].clique != 0 && !used[i] && free_per_clique[nodes[i].clique] >= NEW_CD_SIZE as usize)
            .expect("some clique fits the new domain");
        Model {
            trays,
            cliques,
            nodes,
            domains,
            pods,
            new_pod,
            running_pod,
            plain_pod,
            bind_node,
            occupied,
            non_cd,
            stale,
        }
    }

    /// Kubernetes objects as the API server writes them, for [`Cluster::apply`].
    fn objects(&self) -> Vec<Value> {
        let mut out = Vec::with_capacity(self.domains.len() * 2 + self.nodes.len() + self.pods.len());
        for d in &self.domains {
            out.push(json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {
                    "name": d.template,
                    "namespace": d.ns,
                    "labels": {
                        "resource.nvidia.com/computeDomain": d.uid,
                        "resource.nvidia.com/computeDomainTarget": "Workload",
                    },
                },
                "spec": { "spec": { "devices": {
                    "requests": [{
                        "name": "channel",
                        "exactly": { "deviceClassName": "compute-domain-default-channel.nvidia.com" },
                    }],
                    "config": [{ "opaque": {
                        "driver": "compute-domain.nvidia.com",
                        "parameters": {
                            "apiVersion": "resource.nvidia.com/v1beta1",
                            "kind": "ComputeDomainChannelConfig",
                            "domainID": d.uid,
                        },
                    } }],
                } } },
            }));
            out.push(json!({
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "ComputeDomain",
                "metadata": { "name": d.name, "namespace": d.ns, "uid": d.uid },
                "spec": { "numNodes": d.size, "channel": { "resourceClaimTemplate": { "name": d.template } } },
            }));
        }
        for n in &self.nodes {
            let mut labels = json!({ "nvidia.com/gpu.clique": n.label, "kubernetes.io/hostname": n.name });
            if let Some(l) = &n.domain_label {
                labels["resource.nvidia.com/computeDomain"] = json!(l);
            }
            out.push(json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": { "name": n.name, "labels": labels },
                "status": { "allocatable": { "nvidia.com/gpu": GPUS_PER_TRAY.to_string(), "cpu": "144" } },
            }));
        }
        for p in &self.pods {
            let gpus = p.gpus.to_string();
            let mut spec = json!({
                "containers": [{
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": { "requests": { "nvidia.com/gpu": gpus }, "limits": { "nvidia.com/gpu": gpus } },
                }],
            });
            if let Some(d) = p.domain {
                spec["resourceClaims"] =
                    json!([{ "name": "channel", "resourceClaimTemplateName": self.domains[d].template }]);
            }
            if let Some(n) = p.node {
                spec["nodeName"] = json!(self.nodes[n].name);
            }
            let phase = if p.node.is_some() { "Running" } else { "Pending" };
            out.push(json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": { "name": p.name, "namespace": p.ns },
                "spec": spec,
                "status": { "phase": phase },
            }));
        }
        out
    }
}

/// Strings to ids, as the host's interner does.
#[derive(Debug, Default)]
struct Interner {
    ids: HashMap<String, StrId>,
    fresh: Vec<(StrId, String)>,
}

impl Interner {
    fn id(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as StrId;
        self.ids.insert(s.to_string(), id);
        self.fresh.push((id, s.to_string()));
        id
    }
}

/// The model as policy deltas, plus the ids and deltas the cases use.
#[derive(Debug)]
struct Facts {
    deltas: Vec<Delta>,
    new_pod: StrId,
    running_pod: StrId,
    plain_pod: StrId,
    bind: Delta,
    unbind: Delta,
}

impl Facts {
    fn new(m: &Model) -> Facts {
        let mut s = Interner::default();
        let mut facts = Vec::new();
        for d in &m.domains {
            let (ns, uid) = (s.id(&d.ns), s.id(&d.uid));
            facts.push(Delta::UpsertTemplate(TemplateFact {
                namespace: ns,
                name: s.id(&d.template),
                domain: Some(uid),
                daemon: false,
                gpus: GpuDemand::default(),
            }));
            facts.push(Delta::UpsertDomain(DomainFact {
                uid,
                namespace: ns,
                name: s.id(&d.name),
                size_hint: Some(d.size),
                num_nodes: None,
            }));
        }
        for n in &m.nodes {
            facts.push(Delta::UpsertNode(NodeFact {
                name: s.id(&n.name),
                clique_label: Some(s.id(&n.label)),
                unschedulable: false,
                gpus: GPUS_PER_TRAY,
                domain_label: n.domain_label.as_deref().map(|l| s.id(l)),
            }));
        }
        let pod_fact = |s: &mut Interner, p: &MPod, node: Option<usize>| PodFact {
            key: s.id(&format!("{}/{}", p.ns, p.name)),
            namespace: s.id(&p.ns),
            placement: if node.is_some() { Placement::Bound } else { Placement::Pending },
            node: node.map(|n| s.id(&m.nodes[n].name)),
            claims: p
                .domain
                .map(|d| ClaimRef {
                    name: s.id("channel"),
                    template: Some(s.id(&m.domains[d].template)),
                    claim: None,
                    generated: None,
                })
                .into_iter()
                .collect(),
            gpus: p.gpus,
            size_hint: None,
            pod_group: None,
            owner: None,
            created_ms: 0,
            priority: 0,
            runtime_limit_ms: None,
            started_ms: 0,
        };
        for p in &m.pods {
            let f = pod_fact(&mut s, p, p.node);
            facts.push(Delta::UpsertPod(f));
        }
        let new = &m.pods[m.new_pod];
        let bind = Delta::UpsertPod(pod_fact(&mut s, new, Some(m.bind_node)));
        let unbind = Delta::UpsertPod(pod_fact(&mut s, new, None));
        let key = |s: &mut Interner, i: usize| s.id(&format!("{}/{}", m.pods[i].ns, m.pods[i].name));
        let (new_pod, running_pod, plain_pod) =
            (key(&mut s, m.new_pod), key(&mut s, m.running_pod), key(&mut s, m.plain_pod));
        let mut deltas = vec![Delta::Strings(std::mem::take(&mut s.fresh))];
        deltas.extend(facts);
        Facts { deltas, new_pod, running_pod, plain_pod, bind, unbind }
    }
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Row {
    case: &'static str,
    trays: usize,
    native: Stat,
    wasm: Stat,
}

impl Row {
    fn ratio(&self) -> f64 {
        self.wasm.median / self.native.median
    }
}

/// The size of one PreFilter answer.
#[derive(Debug)]
struct Shape {
    case: &'static str,
    trays: usize,
    code: Code,
    cliques: usize,
    /// Cliques with a Success verdict.
    fitting: usize,
    nodes: usize,
    reasons: usize,
    reason_bytes: usize,
}

impl Shape {
    fn of(case: &'static str, trays: usize, r: &PreFilterResult) -> Shape {
        Shape {
            case,
            trays,
            code: r.status.code,
            cliques: r.cliques.len(),
            fitting: r.cliques.iter().filter(|c| c.verdict.code == Code::Success).count(),
            nodes: r.nodes.len(),
            reasons: r.reasons.len(),
            reason_bytes: r.reasons.iter().map(String::len).sum(),
        }
    }
}

/// An instance loaded with `deltas` (in the WIT shape, as the host's journal holds them).
fn guest(rt: &Arc<Runtime>, deltas: &[wit::Delta]) -> anyhow::Result<GuestInstance> {
    let mut g = rt.instantiate(Limits::default())?;
    g.configure("")?;
    g.apply(deltas)?;
    Ok(g)
}

fn native(deltas: &[Delta]) -> anyhow::Result<View> {
    let mut v = View::new(Args::default());
    v.apply(deltas.iter().cloned()).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(v)
}

/// Checks that both builds answer alike (and as the scenario intends); returns the answer.
fn check_same(what: &str, v: &mut View, g: &mut GuestInstance, pod: StrId) -> anyhow::Result<PreFilterResult> {
    let n = v.pre_filter(pod, &[], 0);
    let w = g.pre_filter(pod, &[], 0)?;
    if n != w {
        panic!(
            "native and wasm PreFilter differ for {what} (is the guest built from other policy sources? \
             rebuild it with `make guest`):\nnative: {n:?}\nwasm:   {w:?}"
        );
    }
    Ok(n)
}

fn expect_code(what: &str, r: &PreFilterResult, code: Code, exclusive: bool) {
    assert!(
        r.status.code == code && (code != Code::Success || r.exclusive == exclusive),
        "{what}: expected {code:?} (exclusive {exclusive}), got {:?} (exclusive {}): {}",
        r.status.code,
        r.exclusive,
        r.reason(r.status)
    );
}

fn bench_size(
    cfg: &Cfg,
    rt: &Arc<Runtime>,
    trays: usize,
    rows: &mut Vec<Row>,
    shapes: &mut Vec<Shape>,
) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let m = Model::new(trays, 0xC0FF_EE00 ^ trays as u64);
    let f = Facts::new(&m);
    eprintln!(
        "[{trays} trays] {} cliques, {} domains, {} pods, {} of {} trays occupied ({:.0}%), {} non-CD pods, \
         {} stale labels; {} facts, {} strings",
        m.cliques,
        m.domains.len(),
        m.pods.len(),
        m.occupied,
        m.trays,
        100.0 * m.occupied as f64 / m.trays as f64,
        m.non_cd,
        m.stale,
        f.deltas.len() - 1,
        match &f.deltas[0] {
            Delta::Strings(s) => s.len(),
            _ => 0,
        },
    );

    // The host converts each change to the WIT shape once, when it journals it: not timed here.
    let wit_deltas: Vec<wit::Delta> = f.deltas.iter().map(wit::from_policy).collect();
    let (wit_bind, wit_unbind) = (wit::from_policy(&f.bind), wit::from_policy(&f.unbind));
    let mut view = native(&f.deltas)?;
    let mut g = guest(rt, &wit_deltas)?;

    // Same answers, and the answers the scenario is built for.
    let cases = [
        ("pre_filter new CD (8 trays)", f.new_pod, Code::Success, false),
        ("pre_filter running CD", f.running_pod, Code::Success, true),
        ("pre_filter non-CD (Skip)", f.plain_pod, Code::Skip, false),
    ];
    for &(case, pod, code, exclusive) in &cases {
        let r = check_same(case, &mut view, &mut g, pod)?;
        expect_code(case, &r, code, exclusive);
        shapes.push(Shape::of(case, trays, &r));
    }
    let before = check_same("new CD before bind", &mut view, &mut g, f.new_pod)?;
    view.apply([f.bind.clone()]).map_err(|e| anyhow::anyhow!("{e}"))?;
    g.apply(std::slice::from_ref(&wit_bind))?;
    let bound = check_same("new CD after bind", &mut view, &mut g, f.new_pod)?;
    expect_code("new CD after bind", &bound, Code::Success, true);
    check_same("running CD after bind", &mut view, &mut g, f.running_pod)?;
    view.apply([f.unbind.clone()]).map_err(|e| anyhow::anyhow!("{e}"))?;
    g.apply(std::slice::from_ref(&wit_unbind))?;
    let after = check_same("new CD after unbind", &mut view, &mut g, f.new_pod)?;
    assert_eq!(before, after, "binding and unbinding a pod does not restore the view");

    // 1. PreFilter per pod.
    for &(case, pod, _, _) in cases.iter().filter(|c| cfg.wants(c.0)) {
        let (n, w) = pair(
            cfg,
            &mut || {
                black_box(view.pre_filter(black_box(pod), &[], 0));
            },
            &mut || {
                black_box(g.pre_filter(black_box(pod), &[], 0).expect("guest pre_filter"));
            },
        );
        rows.push(Row { case, trays, native: n, wasm: w });
    }

    // 2. One UpsertPod: bind then unbind (a pair per iteration keeps the view unchanged).
    const UPDATE: &str = "apply 1 UpsertPod (bind/unbind)";
    let (bind, unbind) = (&f.bind, &f.unbind);
    let (wbind, wunbind) = (&wit_bind, &wit_unbind);
    if cfg.wants(UPDATE) {
        let (n, w) = pair(
            cfg,
            &mut || {
                view.apply([bind.clone()]).expect("native bind");
                view.apply([unbind.clone()]).expect("native unbind");
            },
            &mut || {
                g.apply(std::slice::from_ref(wbind)).expect("guest bind");
                g.apply(std::slice::from_ref(wunbind)).expect("guest unbind");
            },
        );
        let half = |s: Stat| Stat { median: s.median / 2.0, min: s.min / 2.0, max: s.max / 2.0 };
        rows.push(Row { case: UPDATE, trays, native: half(n), wasm: half(w) });
    }
    let after = check_same("new CD after the update benchmark", &mut view, &mut g, f.new_pod)?;
    assert_eq!(before, after, "the update benchmark left the view changed");
    drop(g);

    // Loading every fact into a fresh view / fresh instance (what a new pool instance costs).
    const LOAD: &str = "load all facts (fresh)";
    let (deltas, wdeltas) = (&f.deltas, &wit_deltas);
    if cfg.wants(LOAD) {
        let (n, w) = pair_once(
            cfg,
            &mut || {
                black_box(native(deltas).expect("native load"));
            },
            &mut || {
                black_box(guest(rt, wdeltas).expect("guest load"));
            },
        );
        rows.push(Row { case: LOAD, trays, native: n, wasm: w });
    }

    // 3. End to end: Kubernetes objects in, Decision out.
    const CLUSTER: [&str; 3] =
        ["cluster pre_filter new CD (8 trays)", "cluster pre_filter running CD", "cluster pre_filter non-CD (Skip)"];
    if !CLUSTER.iter().any(|c| cfg.wants(c)) {
        eprintln!("[{trays} trays] done in {:.1} s", t0.elapsed().as_secs_f64());
        return Ok(());
    }
    let objects = m.objects();
    let cn = Cluster::new(cdplace_testkit::native::backend(), "")?;
    let cw = Cluster::new(rt.clone(), "")?;
    for o in &objects {
        for c in [&cn, &cw] {
            if !c.apply(o)? {
                bail!("cdplace ignored an object: {o}");
            }
        }
    }
    drop(objects);
    let pods = [
        (CLUSTER[0], m.new_pod, Code::Success),
        (CLUSTER[1], m.running_pod, Code::Success),
        (CLUSTER[2], m.plain_pod, Code::Skip),
    ];
    for &(case, i, code) in &pods {
        let (ns, name) = (m.pods[i].ns.as_str(), m.pods[i].name.as_str());
        let dn = cn.pre_filter(ns, name, &[])?;
        let dw = cw.pre_filter(ns, name, &[])?;
        if dn != dw {
            panic!("Cluster::pre_filter differs between Native and Wasm for {case}:\nnative: {dn:?}\nwasm:   {dw:?}");
        }
        assert_eq!(dn.status.code, code, "{case}: {}", dn.status.reason);
    }
    for &(case, i, _) in pods.iter().filter(|c| cfg.wants(c.0)) {
        let (ns, name) = (m.pods[i].ns.as_str(), m.pods[i].name.as_str());
        let (n, w) = pair(
            cfg,
            &mut || {
                black_box(cn.pre_filter(ns, name, &[]).expect("native cluster pre_filter"));
            },
            &mut || {
                black_box(cw.pre_filter(ns, name, &[]).expect("wasm cluster pre_filter"));
            },
        );
        rows.push(Row { case, trays, native: n, wasm: w });
    }
    eprintln!("[{trays} trays] done in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------------

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<36} {:>6} {:>13} {:>13} {:>8}   {:>19}",
        "case", "trays", "native µs/op", "wasm µs/op", "wasm/nat", "wasm min..max µs"
    );
    println!("{}", "-".repeat(103));
    for (i, r) in rows.iter().enumerate() {
        if i > 0 && rows[i - 1].case != r.case {
            println!();
        }
        println!(
            "{:<36} {:>6} {:>13} {:>13} {:>7.2}x   {:>19}",
            r.case,
            r.trays,
            fmt_us(r.native.median),
            fmt_us(r.wasm.median),
            r.ratio(),
            format!("{}..{}", fmt_us(r.wasm.min), fmt_us(r.wasm.max)),
        );
    }
}

fn fmt_us(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else if us >= 1.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.3}")
    }
}

fn print_growth(rows: &[Row], sizes: &[usize]) -> Vec<Value> {
    let (Some(&lo), Some(&hi)) = (sizes.first(), sizes.last()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if lo == hi {
        return out;
    }
    println!();
    println!("growth from {lo} to {hi} trays ({:.0}x the trays):", hi as f64 / lo as f64);
    let mut cases: Vec<&str> = Vec::new();
    for r in rows {
        if !cases.contains(&r.case) {
            cases.push(r.case);
        }
    }
    for case in cases {
        let at = |t: usize| rows.iter().find(|r| r.case == case && r.trays == t);
        if let (Some(a), Some(b)) = (at(lo), at(hi)) {
            let (gn, gw) = (b.native.median / a.native.median, b.wasm.median / a.wasm.median);
            println!("  {case:<36} native {gn:>7.1}x   wasm {gw:>7.1}x");
            out.push(json!({ "case": case, "from_trays": lo, "to_trays": hi, "native": gn, "wasm": gw }));
        }
    }
    out
}

fn print_shapes(shapes: &[Shape]) {
    println!();
    println!("PreFilter answer sizes (what crosses the component boundary back to the host):");
    println!(
        "  {:<30} {:>6} {:>14} {:>8} {:>8} {:>7} {:>8} {:>12}",
        "case", "trays", "status", "cliques", "fitting", "nodes", "reasons", "reason bytes"
    );
    for s in shapes {
        println!(
            "  {:<30} {:>6} {:>14} {:>8} {:>8} {:>7} {:>8} {:>12}",
            s.case,
            s.trays,
            s.code.as_str(),
            s.cliques,
            s.fitting,
            s.nodes,
            s.reasons,
            s.reason_bytes
        );
    }
}

fn output_path() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join("target"));
    target.join("bench").join("policy.json")
}

fn main() -> anyhow::Result<()> {
    // cargo passes `--bench`; accept and ignore whatever else we do not know.
    let mut quick = false;
    let mut filter = None;
    let mut guest_path = None;
    let mut sizes: Vec<usize> = SIZES.to_vec();
    for a in std::env::args().skip(1) {
        if a == "--quick" {
            quick = true;
        } else if let Some(p) = a.strip_prefix("--guest=") {
            guest_path = Some(PathBuf::from(p));
        } else if let Some(f) = a.strip_prefix("--filter=") {
            filter = Some(f.to_string());
        } else if let Some(list) = a.strip_prefix("--sizes=") {
            sizes =
                list.split(',').map(|s| s.trim().parse().context("--sizes=N,N,...")).collect::<anyhow::Result<_>>()?;
            if sizes.iter().any(|&s| s < 2 * TRAYS_PER_CLIQUE) {
                bail!("--sizes: at least {} trays", 2 * TRAYS_PER_CLIQUE);
            }
        }
    }
    let cfg = Cfg::new(quick, filter);

    let path = guest_path.unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/guest/cdplace_guest.wasm")
    });
    if !path.exists() {
        eprintln!(
            "the policy component {} is missing: run `make guest` (cargo build -p cdplace-guest --target wasm32-wasip2 --profile guest) first",
            path.display()
        );
        std::process::exit(2);
    }
    let t = Instant::now();
    let rt = Runtime::from_file(&path)?;
    eprintln!("compiled {} in {:.1} ms", path.display(), t.elapsed().as_secs_f64() * 1e3);

    let mut rows = Vec::new();
    let mut shapes = Vec::new();
    for &trays in &sizes {
        bench_size(&cfg, &rt, trays, &mut rows, &mut shapes)?;
    }
    rows.sort_by_key(|r| (order(r.case), r.trays));

    print_table(&rows);
    let growth = print_growth(&rows, &sizes);
    print_shapes(&shapes);
    println!(
        "\n{} batches per case (median shown), {} ms per batch after {} ms warm-up{}",
        cfg.batches,
        cfg.batch.as_millis(),
        cfg.warmup.as_millis(),
        if cfg.quick { " (--quick: smoke run, not a measurement)" } else { "" }
    );

    let report = json!({
        "quick": cfg.quick,
        "filter": cfg.filter,
        "sizes": sizes,
        "batches": cfg.batches,
        "batch_ms": cfg.batch.as_millis() as u64,
        "guest": path.display().to_string(),
        "results": rows.iter().map(|r| json!({
            "case": r.case,
            "trays": r.trays,
            "native": r.native.json(),
            "wasm": r.wasm.json(),
            "native_us": r.native.median,
            "wasm_us": r.wasm.median,
            "ratio": r.ratio(),
        })).collect::<Vec<_>>(),
        "growth": growth,
        "answers": shapes.iter().map(|s| json!({
            "case": s.case,
            "trays": s.trays,
            "status": s.code.as_str(),
            "cliques": s.cliques,
            "fitting_cliques": s.fitting,
            "nodes": s.nodes,
            "reasons": s.reasons,
            "reason_bytes": s.reason_bytes,
        })).collect::<Vec<_>>(),
    });
    let out = output_path();
    let dir = out.parent().expect("a parent");
    std::fs::create_dir_all(dir)?;
    let out = std::fs::canonicalize(dir)?.join("policy.json");
    std::fs::write(&out, serde_json::to_string_pretty(&report)? + "\n")?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Table order of the cases.
fn order(case: &str) -> usize {
    [
        "pre_filter new CD (8 trays)",
        "pre_filter running CD",
        "pre_filter non-CD (Skip)",
        "apply 1 UpsertPod (bind/unbind)",
        "load all facts (fresh)",
        "cluster pre_filter new CD (8 trays)",
        "cluster pre_filter running CD",
        "cluster pre_filter non-CD (Skip)",
    ]
    .iter()
    .position(|c| *c == case)
    .unwrap_or(usize::MAX)
}
