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
