//! The shadow policy (`Cluster::set_shadow`): asked the live PreFilter question of a
//! ComputeDomain pod again on the view the live decision was made on, it never changes a live
//! answer, and where it differs it says so once per domain with both answers; a component that
//! fails the swap's checks is refused as a shadow too.

use std::sync::Arc;

use cdplace_host::{Cluster, Code, Decision, Error, Runtime, ShadowReport};
use cdplace_testkit::builders::*;

fn load(name: &str) -> Arc<Runtime> {
    Runtime::from_file(&wasm_path(name))
        .unwrap_or_else(|e| panic!("loading {name}: {}", cdplace_host::error::chain(&e)))
}

/// Four cliques of 8 trays with 0..=3 busy and a new domain of 2 with two pending pods: the
/// shipped policy offers clique 4 first (best fit), the worst-fit one clique 1.
fn fleet() -> Vec<serde_json::Value> {
    let mut objs = Vec::new();
    for c in 1..=4u32 {
        objs.extend(rack(&format!("r{c}"), c, 8));
        let busy = format!("busy{c}");
        objs.extend(domain("ns", &busy, &format!("uid-{busy}")));
        for i in 0..c - 1 {
            objs.push(bound(cd_pod("ns", &busy, &format!("{busy}-{i}")), &format!("r{c}-{i:02}")));
        }
    }
    objs.push(annotate(compute_domain("ns", "new", "uid-new"), "cdplace.nvidia.com/size", "2"));
    objs.push(channel_template("ns", "new", "uid-new"));
    objs.push(cd_pod("ns", "new", "new-0"));
    objs.push(cd_pod("ns", "new", "new-1"));
    objs
}

fn cluster(objs: &[serde_json::Value]) -> Cluster {
    let c = Cluster::new(runtime(), "").expect("cluster");
    for o in objs {
        assert!(c.apply(o).expect("apply"));
    }
    c
}

fn first_clique(d: &Decision) -> String {
    let mut best: Vec<(u32, &String)> =
        d.cliques.iter().filter(|(_, (s, _))| s.code == Code::Success).map(|(c, (_, s))| (*s, c)).collect();
    best.sort_by(|a, b| b.cmp(a));
    best.first().expect("a clique offered").1.clone()
}

fn count(r: &ShadowReport, outcome: &str) -> u64 {
    r.outcomes.get(outcome).copied().unwrap_or(0)
}

#[test]
fn a_worst_fit_shadow_reports_the_other_clique_once_per_domain_and_changes_nothing() {
    let objs = fleet();
    let plain = cluster(&objs);
    let without = plain.pre_filter("ns", "new-0", &[]).expect("pre_filter");
    assert_eq!(first_clique(&without), clique(4));

    let c = cluster(&objs);
    let report = c.set_shadow(Some(load("cdplace_guest_worstfit.wasm"))).expect("set shadow").expect("a report");
    assert_eq!(report.generation, 1);
    assert_eq!(report.pending_domains, 1, "the shadow passed the self-test on the live view: {report:?}");
    assert_eq!(c.policy_generation(), 1, "a shadow is not a swap");
    let with = c.pre_filter("ns", "new-0", &[]).expect("pre_filter");
    assert_eq!(with, without, "the shadow never changes a live answer");
    assert!(c.shadow_step(), "the live decision waited for the shadow");
    assert!(!c.shadow_step(), "one job per decision");

    let r = c.shadow_take();
    assert!(r.active);
    assert_eq!(count(&r, "other-clique"), 1, "{r:?}");
    assert_eq!(r.divergences.len(), 1, "{r:?}");
    let d = &r.divergences[0];
    assert_eq!((d.domain.as_str(), d.pod.as_str()), ("uid-new", "ns/new-0"));
    assert!(d.live.starts_with(&format!("clique {} ", clique(4))), "live: {}", d.live);
    assert!(d.shadow.starts_with(&format!("clique {} ", clique(1))), "shadow: {}", d.shadow);
    assert_eq!((d.live_generation, d.shadow_generation), (1, 1));

    // The other pod of the same domain: the same divergence, counted, not said again.
    assert_eq!(c.pre_filter("ns", "new-1", &[]).expect("pre_filter"), plain.pre_filter("ns", "new-1", &[]).unwrap());
    assert!(c.shadow_step());
    let r = c.shadow_take();
    assert_eq!(count(&r, "other-clique"), 1, "{r:?}");
    assert!(r.divergences.is_empty(), "said once per domain: {r:?}");
}

/// The shadow answers on the view the live decision was made on, not on the view when it gets
/// to it: clique 1 fills up after the decision, and the shadow still offers clique 1.
#[test]
fn the_shadow_answers_on_the_view_of_the_live_decision() {
    let c = cluster(&fleet());
    c.set_shadow(Some(load("cdplace_guest_worstfit.wasm"))).expect("set shadow");
    c.pre_filter("ns", "new-0", &[]).expect("pre_filter");
    // Fill clique 1 with another domain's pods after the decision.
    let mut later = domain("ns", "filler", "uid-filler");
    for i in 0..8 {
        later.push(bound(cd_pod("ns", "filler", &format!("f-{i}")), &format!("r1-{i:02}")));
    }
    for o in &later {
        c.apply(o).expect("apply");
    }
    assert!(c.shadow_step());
    let r = c.shadow_take();
    let d = r.divergences.first().unwrap_or_else(|| panic!("a divergence: {r:?}"));
    assert!(
        d.shadow.starts_with(&format!("clique {} ", clique(1))),
        "the decision's view had clique 1 empty: {}",
        d.shadow
    );

    // A decision made now sees clique 1 full: the shadow still differs (clique 2 against the live
    // clique 4), counted, and not said again for the domain.
    c.pre_filter("ns", "new-1", &[]).expect("pre_filter");
    assert!(c.shadow_step());
    let r = c.shadow_take();
    assert_eq!(count(&r, "other-clique"), 1, "{r:?}");
    assert!(r.divergences.is_empty(), "{r:?}");
}

#[test]
fn the_same_policy_as_shadow_agrees_and_reports_nothing() {
    let c = cluster(&fleet());
    c.set_shadow(Some(runtime())).expect("set shadow");
    c.pre_filter("ns", "new-0", &[]).expect("pre_filter");
    assert!(c.shadow_step());
    let r = c.shadow_take();
    assert_eq!(count(&r, "agree"), 1, "{r:?}");
    assert!(r.divergences.is_empty(), "{r:?}");
}

#[test]
fn a_shadow_failing_the_checks_is_refused_and_a_cleared_shadow_asks_nothing() {
    let c = cluster(&fleet());
    let e = c.set_shadow(Some(load("cdplace_test_loop.wasm"))).expect_err("a looping shadow is refused");
    assert!(matches!(e, Error::Refused { .. }), "{e:?}");
    c.pre_filter("ns", "new-0", &[]).expect("the live policy decides");
    assert!(!c.shadow_step(), "no shadow: nothing queued");
    assert!(!c.shadow_take().active);

    c.set_shadow(Some(runtime())).expect("set shadow");
    assert!(c.set_shadow(None).expect("clear").is_none());
    c.pre_filter("ns", "new-0", &[]).expect("pre_filter");
    assert!(!c.shadow_step(), "cleared: nothing queued");
}

/// A preemption what-if (an overlay) and plain pods are not shadowed: only the live decision
/// of a ComputeDomain pod on the plain view.
#[test]
fn only_plain_view_decisions_of_domain_pods_are_shadowed() {
    let mut objs = fleet();
    objs.push(pod("ns", "plain", None, 0));
    let c = cluster(&objs);
    c.set_shadow(Some(runtime())).expect("set shadow");
    c.pre_filter("ns", "plain", &[]).expect("pre_filter");
    assert!(!c.shadow_step(), "a plain pod is not shadowed");
}

/// The figures the docs quote: what a shadow costs at 5,004 trays (278 cliques of 18, 200
/// pending domains of 4, 125 running): the live PreFilter of each pending domain's pod without
/// and with a worst-fit shadow (the live path only copies its answer and queues it), then the
/// shadow's step per decision (catching up to the decision's view and deciding). Thread CPU
/// time, best of three rounds. Run with
/// `cargo test --release -p cdplace-host --test shadow -- --ignored --nocapture shadow_at_5004_trays`.
#[test]
#[ignore]
fn shadow_at_5004_trays() {
    fn cpu() -> std::time::Duration {
        let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let objs = fleet_5004();
    let c = cluster(&objs);
    let decide_all = |c: &Cluster| {
        let t = cpu();
        for d in 0..200 {
            c.pre_filter("ns", &format!("cd{d}-p0"), &[]).unwrap();
        }
        (cpu() - t) / 200
    };
    decide_all(&c);
    let off = (0..3).map(|_| decide_all(&c)).min().unwrap();
    c.set_shadow(Some(load("cdplace_guest_worstfit.wasm"))).expect("set shadow");
    let mut on = std::time::Duration::MAX;
    let mut step = std::time::Duration::MAX;
    for _ in 0..3 {
        on = on.min(decide_all(&c));
        let t = cpu();
        let mut steps = 0u32;
        while c.shadow_step() {
            steps += 1;
        }
        step = step.min((cpu() - t) / steps.max(1));
        let r = c.shadow_take();
        assert_eq!(r.queued, 0);
    }
    println!(
        "live PreFilter per pending domain: {:.0} us without a shadow, {:.0} us with one; shadow step per decision: {:.0} us",
        off.as_secs_f64() * 1e6,
        on.as_secs_f64() * 1e6,
        step.as_secs_f64() * 1e6
    );
}

/// The shipped policy with gang preemption turned off: it never makes room.
#[derive(Debug)]
struct NoPreempt;

#[derive(Debug)]
struct NoPreemptEvaluator(Box<dyn cdplace_host::Evaluator>);

impl cdplace_host::Backend for NoPreempt {
    fn evaluator(
        self: Arc<Self>,
        limits: cdplace_host::Limits,
    ) -> cdplace_host::Result<Box<dyn cdplace_host::Evaluator>> {
        Ok(Box::new(NoPreemptEvaluator(cdplace_testkit::native::backend().evaluator(limits)?)))
    }
}

impl cdplace_host::Evaluator for NoPreemptEvaluator {
    fn set_deadline(&mut self, until: std::time::Instant) {
        self.0.set_deadline(until)
    }
    fn configure(&mut self, args: &str) -> cdplace_host::Result<cdplace_host::Settings> {
        self.0.configure(args)
    }
    fn apply(&mut self, deltas: &[cdplace_host::wit::Delta]) -> cdplace_host::Result<()> {
        self.0.apply(deltas)
    }
    fn pre_filter(
        &mut self,
        pod: cdplace_policy::StrId,
        overlay: &[cdplace_policy::OverlayOp],
        now_ms: i64,
    ) -> cdplace_host::Result<cdplace_policy::PreFilterResult> {
        self.0.pre_filter(pod, overlay, now_ms)
    }
    fn steer(&mut self, gpus: bool, now_ms: i64) -> cdplace_host::Result<cdplace_policy::PreFilterResult> {
        self.0.steer(gpus, now_ms)
    }
    fn preempt(&mut self, pod: cdplace_policy::StrId, now_ms: i64) -> cdplace_host::Result<cdplace_policy::Preemption> {
        let mut p = self.0.preempt(pod, now_ms)?;
        p.plan = None;
        p.reason = "this shadow never preempts".into();
        Ok(p)
    }
    fn status(&mut self, now_ms: i64) -> cdplace_host::Result<cdplace_policy::FleetStatus> {
        self.0.status(now_ms)
    }
}

/// Gang preemption is shadowed too: a high-priority domain that needs the clique a low one runs
/// in gets a plan from the live policy; a shadow that never preempts is reported as
/// would-not-place with both answers in words.
#[test]
fn gang_preemption_is_shadowed() {
    let mut objs = rack("a", 1, 4);
    objs.extend(domain("ns", "low", "uid-low"));
    objs.push(annotate(compute_domain("ns", "low", "uid-low"), "cdplace.nvidia.com/size", "4"));
    for i in 0..4 {
        objs.push(bound(cd_pod("ns", "low", &format!("low-{i}")), &format!("a-{i:02}")));
    }
    objs.extend(domain("ns", "high", "uid-high"));
    objs.push(annotate(compute_domain("ns", "high", "uid-high"), "cdplace.nvidia.com/size", "4"));
    for i in 0..4 {
        let mut p = cd_pod("ns", "high", &format!("high-{i}"));
        p["spec"]["priority"] = serde_json::json!(1000);
        objs.push(p);
    }
    let c = cluster(&objs);
    c.set_shadow(Some(Arc::new(NoPreempt))).expect("set shadow");
    let live = c.preempt("ns", "high-0").expect("preempt");
    assert!(live.plan.is_some(), "the live policy makes room: {live:?}");
    assert!(c.shadow_step(), "the live preemption waited for the shadow");
    let r = c.shadow_take();
    assert_eq!(count(&r, "would-not-place"), 1, "{r:?}");
    let d = r.divergences.iter().find(|d| d.domain == "uid-high").unwrap_or_else(|| panic!("a divergence: {r:?}"));
    assert!(d.live.starts_with("preempt 1 domain(s) [uid-low] and 4 pod(s) in clique "), "live: {}", d.live);
    assert_eq!(d.shadow, "no preemption: this shadow never preempts");
}
