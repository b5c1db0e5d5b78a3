//! Replacing the policy while a cluster serves (`Cluster::swap`): the view and the journal stay
//! (nothing is fed again), a refused component changes nothing and says which check failed, a
//! call in flight finishes on the policy it started on, and calls racing swaps all get valid
//! answers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use cdplace_host::wit;
use cdplace_host::{Backend, Cluster, Code, Error, Evaluator, Limits, Result, Runtime, Settings};
use cdplace_policy as p;
use cdplace_testkit::builders::*;
use cdplace_testkit::native;

/// A backend that counts what its evaluators are fed: instances made, snapshots (a `Reset`
/// starts each) and deltas in all; and, when `gate` holds a receiver, holds every PreFilter until
/// a message comes.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn Backend>,
    instances: AtomicUsize,
    snapshots: Arc<AtomicUsize>,
    deltas: Arc<AtomicUsize>,
    gate: Arc<Mutex<Option<mpsc::Receiver<()>>>>,
    entered: Arc<AtomicBool>,
}

impl Counting {
    fn new(inner: Arc<dyn Backend>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            instances: AtomicUsize::new(0),
            snapshots: Arc::default(),
            deltas: Arc::default(),
            gate: Arc::default(),
            entered: Arc::default(),
        })
    }

    fn counts(&self) -> (usize, usize, usize) {
        (
            self.instances.load(Ordering::SeqCst),
            self.snapshots.load(Ordering::SeqCst),
            self.deltas.load(Ordering::SeqCst),
        )
    }
}

#[derive(Debug)]
struct Counted {
    inner: Box<dyn Evaluator>,
    snapshots: Arc<AtomicUsize>,
    deltas: Arc<AtomicUsize>,
    gate: Arc<Mutex<Option<mpsc::Receiver<()>>>>,
    entered: Arc<AtomicBool>,
}

impl Backend for Counting {
    fn evaluator(self: Arc<Self>, limits: Limits) -> Result<Box<dyn Evaluator>> {
        self.instances.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(Counted {
            inner: self.inner.clone().evaluator(limits)?,
            snapshots: self.snapshots.clone(),
            deltas: self.deltas.clone(),
            gate: self.gate.clone(),
            entered: self.entered.clone(),
        }))
    }
}

impl Evaluator for Counted {
    fn set_deadline(&mut self, until: Instant) {
        self.inner.set_deadline(until)
    }
    fn configure(&mut self, args: &str) -> Result<Settings> {
        self.inner.configure(args)
    }
    fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()> {
        let resets = deltas.iter().filter(|d| matches!(d, wit::Delta::Reset)).count();
        self.snapshots.fetch_add(resets, Ordering::SeqCst);
        self.deltas.fetch_add(deltas.len(), Ordering::SeqCst);
        self.inner.apply(deltas)
    }
    fn pre_filter(&mut self, pod: p::StrId, overlay: &[p::OverlayOp], now_ms: i64) -> Result<p::PreFilterResult> {
        if let Some(rx) = self.gate.lock().unwrap().take() {
            self.entered.store(true, Ordering::SeqCst);
            rx.recv().unwrap();
        }
        self.inner.pre_filter(pod, overlay, now_ms)
    }
    fn steer(&mut self, gpus: bool, now_ms: i64) -> Result<p::PreFilterResult> {
        self.inner.steer(gpus, now_ms)
    }
    fn preempt(&mut self, pod: p::StrId, now_ms: i64) -> Result<p::Preemption> {
        self.inner.preempt(pod, now_ms)
    }
    fn status(&mut self, now_ms: i64) -> Result<p::FleetStatus> {
        self.inner.status(now_ms)
    }
}

/// Two cliques of six trays; `cd` (size 2) has two pending pods, `run` (size 2) two bound ones.
fn fleet() -> Vec<serde_json::Value> {
    let mut objs = rack("a", 1, 6);
    objs.extend(rack("b", 2, 6));
    for (cd, uid) in [("cd", "uid-cd"), ("run", "uid-run")] {
        objs.extend(domain("ns", cd, uid));
        objs.push(annotate(compute_domain("ns", cd, uid), "cdplace.nvidia.com/size", "2"));
    }
    objs.push(cd_pod("ns", "cd", "p0"));
    objs.push(cd_pod("ns", "cd", "p1"));
    objs.push(bound(cd_pod("ns", "run", "r0"), "a-00"));
    objs.push(bound(cd_pod("ns", "run", "r1"), "a-01"));
    objs
}

fn cluster_on(backend: Arc<dyn Backend>, objs: &[serde_json::Value]) -> Cluster {
    let c = Cluster::new(backend, "").expect("cluster");
    for o in objs {
        c.apply(o).unwrap();
    }
    c
}

#[test]
fn a_swap_keeps_the_view_and_the_journal_and_feeds_nothing_again() {
    let old = Counting::new(runtime());
    let c = cluster_on(old.clone(), &fleet());
    let (before, g) = c.pre_filter_with_generation("ns", "p0", &[]).unwrap();
    assert_eq!((before.status.code, g), (Code::Success, 1));
    let nodes = c.nodes();

    let new = Counting::new(runtime());
    let report = c.swap(new.clone()).expect("the same component passes every check");
    assert_eq!(report.generation, 2);
    assert_eq!(c.policy_generation(), 2);
    assert_eq!((report.pending_domains, report.placed_pods, report.gone_pods), (1, 2, 0), "{report:?}");
    // Preemption's what-ifs for p0: without r0, and with r0 put back on its node.
    assert_eq!(report.what_ifs, 2, "{report:?}");
    // PreFilter for p0 and r0, r1; the two what-ifs; the fleet status; steering (on by default).
    assert_eq!(report.calls, 7, "{report:?}");
    assert!(report.slowest_call_us > 0 && !report.slowest_call.is_empty(), "{report:?}");
    // The new policy's one instance was fed one snapshot: the view, as the host holds it.
    assert_eq!(new.counts().0, 1);
    assert_eq!(new.counts().1, 1);
    assert_eq!(c.nodes(), nodes, "the view is kept");
    assert!(c.has_pod("ns", "p1"));

    // Later changes reach the new policy through the journal: no new instance, no new snapshot.
    let old_fed = old.counts();
    let (_, _, deltas) = new.counts();
    c.apply(&bound(cd_pod("ns", "cd", "p1"), "b-00")).unwrap();
    let (after, g) = c.pre_filter_with_generation("ns", "p0", &[]).unwrap();
    assert_eq!(g, 2, "decided by the new policy");
    assert_eq!(after.status.code, Code::Success);
    assert!(after.exclusive, "p1 bound in b: p0 must follow it there");
    assert!(after.cliques.keys().all(|k| k == &clique(2)), "{:?}", after.cliques);
    let (instances, snapshots, deltas_after) = new.counts();
    assert_eq!((instances, snapshots), (1, 1), "the checked instance serves, caught up from the journal");
    assert!(deltas_after > deltas && deltas_after - deltas <= 3, "{} deltas for one pod update", deltas_after - deltas);
    assert_eq!(old.counts(), old_fed, "the old policy is fed nothing after the swap");
    assert_eq!(c.stats().idle_instances, 1, "the old idle instance was dropped");
}

#[test]
fn a_refused_component_leaves_the_old_generation_deciding() {
    let c = cluster_on(runtime(), &fleet());
    // The faulty component answers other host settings (plainPodSteering off).
    let e = c.swap(faulty_runtime()).unwrap_err();
    assert!(matches!(e, Error::Refused { check: "settings", .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.starts_with("policy refused (settings): "), "{text}");
    assert!(text.contains("plainPodSteering: true → false"), "{text}");
    assert_eq!(c.policy_generation(), 1);
    let (d, g) = c.pre_filter_with_generation("ns", "p0", &[]).unwrap();
    assert_eq!((d.status.code, g), (Code::Success, 1), "the old policy decides: {}", d.status.reason);

    // Arguments the new component rejects: refused at configure, with the policy's message.
    let c = Cluster::new(faulty_runtime(), r#"{"fault": "none"}"#).unwrap();
    let e = c.swap(runtime()).unwrap_err();
    assert!(matches!(e, Error::Refused { check: "configure", .. }), "{e:?}");
    assert!(e.to_string().contains("fault"), "{e}");
    assert_eq!(c.policy_generation(), 1);
}

/// The faulty component's view with a pending ComputeDomain pod in `ns` (the namespace picks the
/// fault: `fault-trap…`, `fault-loop…`).
fn faulty_with_pending(ns: &str, args: &str) -> Cluster {
    let c = Cluster::new(faulty_runtime(), args).unwrap();
    let mut objs = rack("a", 1, 2);
    objs.extend(domain(ns, "cd", "uid-cd"));
    objs.push(cd_pod(ns, "cd", "p0"));
    for o in &objs {
        c.apply(o).unwrap();
    }
    c
}

#[test]
fn the_self_test_refuses_a_component_that_traps_or_loops_on_the_live_view() {
    let c = faulty_with_pending("fault-trap", "{}");
    let e = c.swap(faulty_runtime()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Refused { check: "self-test", .. }), "{e:?}");
    assert!(text.contains("PreFilter of pending pod fault-trap/p0 failed: policy guest trapped"), "{text}");
    assert_eq!(c.policy_generation(), 1);

    let c = faulty_with_pending("fault-loop", r#"{"guestCallTimeout": "50ms"}"#);
    let t = Instant::now();
    let e = c.swap(faulty_runtime()).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("fault-loop/p0 failed: policy guest exceeded its deadline of 50ms"), "{text}");
    assert!(t.elapsed() < Duration::from_secs(5), "the loop was cut at the call timeout: {:?}", t.elapsed());
    assert_eq!(c.policy_generation(), 1);
}

/// A component that decides as shipped but panics whenever PreFilter gets an overlay: only
/// preemption's what-ifs find it, and the self-test asks them (issue 45).
#[test]
fn the_self_test_refuses_a_component_that_fails_only_under_a_preemption_overlay() {
    let c = cluster_on(runtime(), &fleet());
    let wasm = std::fs::read(wasm_path("cdplace_test_overlay_panic.wasm")).expect("built by make guest");
    let e = c.swap(Runtime::new(&wasm).unwrap()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Refused { check: "self-test", .. }), "{e:?}");
    assert!(
        text.contains(
            "PreFilter of pending pod ns/p0 without ns/r0 (a preemption what-if) failed: policy guest trapped"
        ),
        "{text}"
    );
    assert_eq!(c.policy_generation(), 1);
}

#[test]
fn a_component_of_another_world_is_refused_when_compiled_saying_so() {
    // An empty component: valid, but it exports nothing of the policy world.
    let e = Runtime::new(b"\0asm\x0d\0\x01\0").unwrap_err();
    assert!(matches!(e, Error::World(_)), "{e:?}");
    let text = cdplace_host::error::chain(&e);
    assert!(
        text.starts_with(
            "the component does not match the cdplace:policy/policy@0.3.0 world this host was built against"
        ),
        "{text}"
    );
}

#[test]
fn a_call_in_flight_finishes_on_its_generation() {
    let old = Counting::new(native::backend());
    let c = Arc::new(cluster_on(old.clone(), &fleet()));
    let (tx, rx) = mpsc::channel();
    *old.gate.lock().unwrap() = Some(rx);
    let inflight = {
        let c = c.clone();
        std::thread::spawn(move || c.pre_filter_with_generation("ns", "p0", &[]).unwrap())
    };
    while !old.entered.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let new = Counting::new(native::backend());
    assert_eq!(c.swap(new.clone()).unwrap().generation, 2);
    // Decided by the new policy while the old call is still in its guest call.
    let (d, g) = c.pre_filter_with_generation("ns", "p1", &[]).unwrap();
    assert_eq!((d.status.code, g), (Code::Success, 2));
    assert_eq!(c.stats().busy_instances, 1, "the old instance is still in its call");
    tx.send(()).unwrap();
    let (d, g) = inflight.join().unwrap();
    assert_eq!((d.status.code, g), (Code::Success, 1), "the call in flight finished on generation 1");
    let s = c.stats();
    assert_eq!((s.idle_instances, s.busy_instances), (1, 0), "the old instance was dropped on its return");
    assert_eq!(old.counts().0, 1, "no new instance of the old policy");
}

#[test]
fn calls_racing_swaps_all_get_valid_answers() {
    let objs = fleet();
    let c = Arc::new(cluster_on(runtime(), &objs));
    let baseline = c.pre_filter("ns", "p0", &[]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Every worker has called before the first swap, and calls at least once after the last (a
    // worker starved during all ten swaps still makes those two calls).
    let started = Arc::new(std::sync::Barrier::new(4));
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let (c, stop, baseline, started) = (c.clone(), stop.clone(), baseline.clone(), started.clone());
            std::thread::spawn(move || {
                let mut last = 0;
                let mut calls = 0;
                let mut call = || {
                    let (d, g) = c.pre_filter_with_generation("ns", if i % 2 == 0 { "p0" } else { "p1" }, &[]).unwrap();
                    assert_eq!(d.status, baseline.status);
                    assert_eq!(d.node_set, baseline.node_set, "every generation answers the same policy");
                    assert!(g >= last, "generation went back from {last} to {g}");
                    last = g;
                    calls += 1;
                };
                // One call before the swaps start, then calls racing them, then one after the last.
                call();
                started.wait();
                loop {
                    let done = stop.load(Ordering::SeqCst);
                    call();
                    if done {
                        break;
                    }
                }
                (calls, last)
            })
        })
        .collect();
    started.wait();
    // The component and the same policy compiled natively, alternately.
    for i in 0..10 {
        let b: Arc<dyn Backend> = if i % 2 == 0 { native::backend() } else { runtime() };
        c.swap(b).expect("a valid policy is accepted");
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        let (calls, last) = w.join().unwrap();
        assert!(calls > 1, "{calls} calls");
        assert_eq!(last, 11, "the call after the last swap is decided by its generation");
    }
    assert_eq!(c.policy_generation(), 11);
    let s = c.stats();
    assert_eq!(s.busy_instances, 0);
    assert!(s.idle_instances <= 4, "{s:?}");
}

/// The figure the docs quote: a swap's compile and self-test at 5,004 trays (278 cliques of 18),
/// with 200 pending domains and 500 placed pods. Run with
/// `cargo test --release -p cdplace-host --test swap -- --ignored --nocapture swap_at_5004_trays`.
#[test]
#[ignore]
fn swap_at_5004_trays() {
    let objs = fleet_5004();
    let c = cluster_on(runtime(), &objs);
    c.pre_filter("ns", "cd0-p0", &[]).unwrap();
    let wasm = std::fs::read(wasm_path("cdplace_guest.wasm")).unwrap();
    let t = Instant::now();
    let rt = Runtime::new(&wasm).unwrap();
    let compile = t.elapsed();
    let report = c.swap(rt).unwrap();
    println!(
        "compile {compile:?}; swap {} ms (setup {} ms, {} calls, slowest {} us: {}); {report:?}",
        report.elapsed_us / 1000,
        report.setup_us / 1000,
        report.calls,
        report.slowest_call_us,
        report.slowest_call
    );
    assert_eq!((report.pending_domains, report.placed_pods), (200, cdplace_host::SELF_TEST_PLACED));
}
