//! The pool's bounds, whatever the instances do: the journal is cut by length and by age even
//! while idle instances sit behind it; live instances are capped by `maxPolicyInstances` and a
//! call that finds them all busy fails at its deadline with a specific error; one deadline covers
//! the whole call (snapshot, catch-up and decision).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cdplace_host::wit;
use cdplace_host::{Backend, Cluster, Code, Error, Evaluator, JournalBounds, Kind, Limits, Settings, Stats};
use cdplace_policy::{OverlayOp, PreFilterResult, Preemption, StrId};
use cdplace_testkit::builders::*;
use cdplace_testkit::native;

/// A gate PreFilter calls wait at while it is closed.
#[derive(Debug, Default)]
struct Gate {
    closed: Mutex<bool>,
    changed: Condvar,
    /// How many calls are waiting at it.
    waiting: Mutex<usize>,
    /// The deadline each PreFilter call ran under, in order.
    deadlines: Mutex<Vec<Option<Instant>>>,
}

impl Gate {
    fn set(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed;
        self.changed.notify_all();
    }

    fn pass(&self) {
        *self.waiting.lock().unwrap() += 1;
        let mut closed = self.closed.lock().unwrap();
        while *closed {
            closed = self.changed.wait(closed).unwrap();
        }
        *self.waiting.lock().unwrap() -= 1;
    }

    fn waiting(&self) -> usize {
        *self.waiting.lock().unwrap()
    }
}

/// The native policy whose PreFilter waits at a gate: a call that holds its instance as long
/// as a test wants.
#[derive(Debug)]
struct Gated(Arc<Gate>);

#[derive(Debug)]
struct GatedEvaluator(Box<dyn Evaluator>, Arc<Gate>, Option<Instant>);

impl Backend for Gated {
    fn evaluator(self: Arc<Self>, limits: Limits) -> cdplace_host::Result<Box<dyn Evaluator>> {
        Ok(Box::new(GatedEvaluator(native::backend().evaluator(limits)?, self.0.clone(), None)))
    }
}

impl Evaluator for GatedEvaluator {
    fn set_deadline(&mut self, until: Instant) {
        self.2 = Some(until);
    }
    fn configure(&mut self, args: &str) -> cdplace_host::Result<Settings> {
        self.0.configure(args)
    }
    fn apply(&mut self, deltas: &[wit::Delta]) -> cdplace_host::Result<()> {
        self.0.apply(deltas)
    }
    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> cdplace_host::Result<PreFilterResult> {
        self.1.deadlines.lock().unwrap().push(self.2);
        self.1.pass();
        self.0.pre_filter(pod, overlay, now_ms)
    }
    fn steer(&mut self, gpus: bool, now_ms: i64) -> cdplace_host::Result<PreFilterResult> {
        self.0.steer(gpus, now_ms)
    }
    fn preempt(&mut self, pod: StrId, now_ms: i64) -> cdplace_host::Result<Preemption> {
        self.0.preempt(pod, now_ms)
    }
    fn status(&mut self, now_ms: i64) -> cdplace_host::Result<cdplace_policy::FleetStatus> {
        self.0.status(now_ms)
    }
}

fn objects() -> Vec<serde_json::Value> {
    let mut objs = rack("a", 1, 4);
    objs.extend(domain("ns", "cd", "uid-cd"));
    objs.push(annotate(compute_domain("ns", "cd", "uid-cd"), "cdplace.nvidia.com/size", "2"));
    objs.push(cd_pod("ns", "cd", "p0"));
    objs.push(cd_pod("ns", "cd", "p1"));
    objs
}

fn cluster_on(backend: Arc<dyn Backend>, args: &str) -> Cluster {
    let c = Cluster::new(backend, args).unwrap();
    for o in objects() {
        c.apply(&o).unwrap();
    }
    c
}

/// Waits (up to 10 s) until `n` calls wait at the gate.
fn until_waiting(gate: &Gate, n: usize) {
    let start = Instant::now();
    while gate.waiting() < n {
        assert!(start.elapsed() < Duration::from_secs(10), "{} calls at the gate, want {n}", gate.waiting());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Binds and deletes a pod `rounds` times (two journal entries each, and strings).
fn churn(c: &Cluster, rounds: usize) {
    for i in 0..rounds {
        let name = format!("noise-{i}");
        c.apply(&bound(pod("jobs", &name, None, 4), "a-03")).unwrap();
        c.delete(Kind::Pod, "jobs", &name);
    }
}

#[test]
fn an_idle_instance_does_not_pin_the_journal_past_its_length_bound() {
    let c = cluster_on(native::backend(), "");
    c.bound_journal(JournalBounds { max_len: 20, max_age: Duration::from_secs(3600) });
    let before = c.pre_filter("ns", "p0", &[]).unwrap();
    assert_eq!(before.status.code, Code::Success, "{}", before.status.reason);
    assert_eq!(c.stats().idle_instances, 1);
    let mut peak = 0;
    for i in 0..100 {
        churn(&c, 1);
        peak = peak.max(c.stats().journal_length);
        if i == 50 {
            // The idle instance fell behind the cut and was dropped, not kept pinning it.
            assert_eq!(c.stats().idle_instances, 0);
        }
    }
    // One change may add a few entries past the bound before it is cut.
    assert!(peak <= 24, "the journal grew to {peak} entries");
    // The next call rebuilds an instance from a snapshot and decides as before.
    assert_eq!(c.pre_filter("ns", "p0", &[]).unwrap(), before);
    assert_eq!(c.stats(), Stats { journal_length: 0, idle_instances: 1, busy_instances: 0, ..Stats::default() });
}

#[test]
fn the_journal_is_cut_when_its_oldest_entry_passes_its_age_bound() {
    let c = cluster_on(native::backend(), "");
    c.bound_journal(JournalBounds { max_len: 100_000, max_age: Duration::from_millis(500) });
    let before = c.pre_filter("ns", "p0", &[]).unwrap();
    churn(&c, 3);
    assert!(c.stats().journal_length >= 6, "{:?}", c.stats());
    std::thread::sleep(Duration::from_millis(600));
    churn(&c, 1);
    assert_eq!(c.stats(), Stats { journal_length: 0, idle_instances: 0, busy_instances: 0, ..Stats::default() });
    assert_eq!(c.pre_filter("ns", "p0", &[]).unwrap(), before);
}

#[test]
fn a_checked_out_instance_behind_a_cut_is_rebuilt_not_caught_up() {
    let gate = Arc::new(Gate::default());
    let c = Arc::new(cluster_on(Arc::new(Gated(gate.clone())), ""));
    c.bound_journal(JournalBounds { max_len: 10, max_age: Duration::from_secs(3600) });
    gate.set(true);
    let call = {
        let c = c.clone();
        std::thread::spawn(move || c.pre_filter("ns", "p0", &[]).unwrap())
    };
    until_waiting(&gate, 1);
    churn(&c, 20);
    assert_eq!(c.stats().busy_instances, 1);
    assert!(c.stats().journal_length <= 12, "{:?}", c.stats());
    gate.set(false);
    call.join().unwrap();
    // Behind the cut: not kept at check-in.
    assert_eq!(c.stats(), Stats { journal_length: 0, idle_instances: 0, busy_instances: 0, ..Stats::default() });
    let fresh = cluster_on(native::backend(), "");
    churn(&fresh, 20);
    assert_eq!(c.pre_filter("ns", "p1", &[]).unwrap(), fresh.pre_filter("ns", "p1", &[]).unwrap());
}

#[test]
fn a_call_that_finds_every_instance_busy_fails_at_its_deadline() {
    let gate = Arc::new(Gate::default());
    let c = Arc::new(cluster_on(
        Arc::new(Gated(gate.clone())),
        r#"{"maxPolicyInstances": 2, "guestCallTimeout": "100ms"}"#,
    ));
    assert_eq!(c.settings().max_policy_instances, 2);
    gate.set(true);
    let calls: Vec<_> = (0..2)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || c.pre_filter("ns", &format!("p{i}"), &[]).unwrap())
        })
        .collect();
    until_waiting(&gate, 2);
    assert_eq!(c.stats().busy_instances, 2);
    let start = Instant::now();
    let e = c.pre_filter("ns", "p0", &[]).unwrap_err();
    let waited = start.elapsed();
    assert!(matches!(e, Error::Busy { instances: 2, .. }), "{e:?}");
    assert!(e.to_string().starts_with("all 2 policy instances busy; none came free within "), "{e}");
    assert!(waited >= Duration::from_millis(100), "failed after {waited:?}, before the deadline");
    assert!(!e.is_guest_failure());
    // Still two instances: the cap held.
    assert_eq!(c.stats().busy_instances, 2);

    // A call that waits gets the first instance checked in.
    let waiter = {
        let c = c.clone();
        std::thread::spawn(move || c.pre_filter("ns", "p1", &[]))
    };
    std::thread::sleep(Duration::from_millis(20));
    gate.set(false);
    for t in calls {
        assert_eq!(t.join().unwrap().status.code, Code::Success);
    }
    assert_eq!(waiter.join().unwrap().unwrap().status.code, Code::Success);
    let s = c.stats();
    assert_eq!((s.busy_instances, s.idle_instances), (0, 2));
}

#[test]
fn max_policy_instances_is_validated_by_the_policy() {
    let e = Cluster::new(runtime(), r#"{"maxPolicyInstances": 0}"#).unwrap_err();
    assert!(matches!(e, Error::InvalidArgs(_)), "{e:?}");
    assert!(
        e.to_string()
            .starts_with("invalid plugin args: maxPolicyInstances: Invalid value: \"0\": must be between 1 and 256"),
        "{e}"
    );
    assert_eq!(Cluster::new(runtime(), "").unwrap().settings().max_policy_instances, 16);
}

/// One deadline covers the whole call: a call that waited for an instance has only what is left
/// of its `guestCallTimeout` for catching up and deciding, not a fresh one.
#[test]
fn the_wait_for_an_instance_counts_against_the_call_deadline() {
    let gate = Arc::new(Gate::default());
    let c =
        Arc::new(cluster_on(Arc::new(Gated(gate.clone())), r#"{"maxPolicyInstances": 1, "guestCallTimeout": "1s"}"#));
    gate.set(true);
    let holder = {
        let c = c.clone();
        std::thread::spawn(move || c.pre_filter("ns", "p0", &[]).unwrap())
    };
    until_waiting(&gate, 1);
    let waiter_start = Instant::now();
    let waiter = {
        let c = c.clone();
        std::thread::spawn(move || c.pre_filter("ns", "p1", &[]).unwrap())
    };
    std::thread::sleep(Duration::from_millis(300));
    gate.set(false);
    holder.join().unwrap();
    waiter.join().unwrap();
    let deadlines = gate.deadlines.lock().unwrap().clone();
    assert_eq!(deadlines.len(), 2);
    let waiter_deadline = deadlines[1].expect("the call ran under a deadline");
    // Its deadline is one timeout after it started (the thread starts a little after
    // `waiter_start`), though it got the instance 300 ms later.
    let after_start = waiter_deadline.duration_since(waiter_start);
    assert!(after_start < Duration::from_millis(1_290), "deadline {after_start:?} after the call started");
    assert!(after_start >= Duration::from_millis(1_000), "deadline {after_start:?} after the call started");
}
