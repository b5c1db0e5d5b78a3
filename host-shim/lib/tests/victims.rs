//! Gang preemption's victims are the host's to check (host-shim/lib/src/safety.rs
//! `check_preemption`): whatever the policy answers, nothing of the preemptor's priority or
//! higher, nothing off the trays of the clique its domain takes, and ComputeDomains whole. The
//! test-only component `cdplace_test_preempt_violator.wasm` (guest/testing/preempt-violator) is
//! the shipped policy with one victim rule broken, chosen by the preemptor's name; each answer is
//! refused with the rule and counted, the shipped policy's plan on the same view passes, and a
//! swap to the violator is refused by its self-test while the old policy keeps deciding.

use std::sync::{Arc, OnceLock};

use cdplace_host::safety::Rule;
use cdplace_host::{Cluster, Error, Runtime};
use cdplace_testkit::builders::*;
use serde_json::{Value, json};

fn violator() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        Runtime::from_file(&wasm_path("cdplace_test_preempt_violator.wasm")).expect("load the preempt violator")
    })
    .clone()
}

fn with_priority(mut p: Value, priority: i32) -> Value {
    p["spec"]["priority"] = json!(priority);
    p
}

/// Cliques 1 (trays a-00..03) and 2 (b-00..03). Domain `low` (priority 0) fills clique 1;
/// domain `other` (priority 0) runs on b-00, b-01 and a plain pod `vip` of priority 5000 on b-02;
/// domain `want` (priority 1000, 4 trays, named `want`) is pending: only clique 1 can be freed.
fn fleet(want: &str) -> Vec<Value> {
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    for (cd, size) in [("low", 4), ("other", 2), (want, 4)] {
        objs.extend(domain("ns", cd, &format!("uid-{cd}")));
        objs.push(annotate(
            compute_domain("ns", cd, &format!("uid-{cd}")),
            "cdplace.nvidia.com/size",
            &size.to_string(),
        ));
    }
    for i in 0..4 {
        objs.push(bound(cd_pod("ns", "low", &format!("low-{i}")), &format!("a-{i:02}")));
        objs.push(with_priority(cd_pod("ns", want, &format!("{want}-{i}")), 1000));
    }
    for i in 0..2 {
        objs.push(bound(cd_pod("ns", "other", &format!("other-{i}")), &format!("b-{i:02}")));
    }
    objs.push(bound(with_priority(pod("ns", "vip", None, 4), 5000), "b-02"));
    objs
}

fn cluster(backend: Arc<dyn cdplace_host::Backend>, objs: &[Value]) -> Cluster {
    let c = Cluster::new(backend, "").expect("cluster");
    for o in objs {
        assert!(c.apply(o).expect("apply"), "kind not read: {o}");
    }
    c
}

#[test]
fn the_shipped_policys_plan_keeps_every_victim_rule() {
    let c = cluster(runtime(), &fleet("want"));
    let pr = c.preempt("ns", "want-0").expect("the shipped plan passes the host's checks");
    let plan = pr.plan.expect("a plan");
    assert_eq!(plan.pods, ["ns/low-0", "ns/low-1", "ns/low-2", "ns/low-3"]);
    assert_eq!(plan.domains, ["uid-low"]);
    assert_eq!(c.stats().policy_violations, 0);
}

/// The violation a preemption for `ns/name` is refused with.
fn refused(c: &Cluster, name: &str) -> (Rule, String) {
    match c.preempt("ns", name) {
        Err(Error::PolicyViolation(v)) => (v.rule, v.to_string()),
        other => panic!("expected a policy violation for ns/{name}, got {other:?}"),
    }
}

#[test]
fn a_victim_of_higher_priority_is_refused() {
    let c = cluster(violator(), &fleet("want-priority"));
    let (rule, msg) = refused(&c, "want-priority-0");
    assert_eq!(rule, Rule::VictimLowerPriority, "{msg}");
    assert_eq!(
        msg,
        "policy violation: rule victim-lower-priority: gang preemption for pod ns/want-priority-0 (priority 1000) names pod ns/vip (priority 5000) as a victim: only pods of lower priority than the preemptor are evicted"
    );
    assert_eq!(c.stats().policy_violations, 1);
}

#[test]
fn a_victim_outside_the_preemptors_trays_is_refused() {
    let c = cluster(violator(), &fleet("want-trays"));
    let (rule, msg) = refused(&c, "want-trays-0");
    assert_eq!(rule, Rule::VictimOnPreemptorTrays, "{msg}");
    assert!(
        msg.starts_with("policy violation: rule victim-on-preemptor-trays: gang preemption for pod ns/want-trays-0 "),
        "{msg}"
    );
    // The shipped plan frees clique 1; the violator adds a pod of `other`, on clique 2.
    assert!(msg.contains(" names pod ns/other-"), "{msg}");
    assert!(
        msg.ends_with(&format!(
            " (NVLink clique {}) as a victim: only pods on the trays of NVLink clique {} are evicted",
            clique(2),
            clique(1)
        )),
        "{msg}"
    );
    assert_eq!(c.stats().policy_violations, 1);
}

#[test]
fn part_of_a_domain_is_refused() {
    let c = cluster(violator(), &fleet("want-part"));
    let (rule, msg) = refused(&c, "want-part-0");
    assert_eq!(rule, Rule::VictimWholeDomain, "{msg}");
    assert_eq!(
        msg,
        "policy violation: rule victim-whole-domain: gang preemption for pod ns/want-part-0 evicts ComputeDomain ns/low (UID uid-low) but leaves its pod ns/low-3 on node a-03: a ComputeDomain is evicted whole or not at all"
    );
}

/// A candidate whose gang preemption breaks a victim rule is refused by its self-test (a pending
/// pod that fits nowhere is asked for preemption on the candidate), and the shipped policy keeps
/// deciding, with its plan.
#[test]
fn a_swap_to_a_policy_with_bad_victims_is_refused_and_the_old_one_keeps_deciding() {
    for (want, rule) in [
        ("want-priority", "victim-lower-priority"),
        ("want-trays", "victim-on-preemptor-trays"),
        ("want-part", "victim-whole-domain"),
    ] {
        let c = cluster(runtime(), &fleet(want));
        match c.swap(violator()) {
            Err(Error::Refused { check, reason }) => {
                assert_eq!(check, "self-test");
                let head =
                    format!("gang preemption for pending pod ns/{want}-0 failed: policy violation: rule {rule}: ");
                assert!(reason.starts_with(&head), "{reason}");
            }
            other => panic!("{want}: the swap must be refused, got {other:?}"),
        }
        assert_eq!(c.policy_generation(), 1);
        let plan = c.preempt("ns", &format!("{want}-0")).expect("the old policy decides").plan.expect("a plan");
        assert_eq!(plan.domains, ["uid-low"]);
    }
}
