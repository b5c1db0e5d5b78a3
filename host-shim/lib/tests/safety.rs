//! The safety rules stay in the host (host-shim/lib/src/safety.rs): a policy that allows every
//! node to every pod (the test-only violator component, guest/testing/violator) never gets a node
//! the driver's kubelet Prepare would refuse past the library, for each rule, with the exact
//! message; the shipped policy passes the same checks on the same fixtures; `imexMode:
//! HostManaged` lets domains share a node; preemption's overlay is seen as the policy sees it.

use std::sync::{Arc, OnceLock};

use cdplace_host::safety::Rule;
use cdplace_host::{Cluster, Code, Error, Overlay, Runtime};
use cdplace_testkit::builders::*;
use serde_json::Value;

/// The violator component, compiled once per test binary.
fn violator() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| Runtime::from_file(&wasm_path("cdplace_test_violator.wasm")).expect("load violator")).clone()
}

fn cluster(backend: Arc<dyn cdplace_host::Backend>, args: &str, objects: &[Value]) -> Cluster {
    let c = Cluster::new(backend, args).expect("cluster");
    for o in objects {
        assert!(c.apply(o).expect("apply"), "kind not read: {o}");
    }
    c
}

/// The violation the violator's answer for `ns/name` is refused with.
fn refused(c: &Cluster, ns: &str, name: &str, overlay: &[Overlay]) -> (Rule, String) {
    match c.pre_filter(ns, name, overlay) {
        Err(Error::PolicyViolation(v)) => {
            let e = Error::PolicyViolation(v.clone());
            assert_eq!(e.to_string(), v.to_string());
            (v.rule, e.to_string())
        }
        other => panic!("expected a policy violation for {ns}/{name}, got {other:?}"),
    }
}

/// One clique of four trays; ComputeDomain `old` runs a pod on a-01; `new` has a pod pending.
fn two_domains() -> Vec<Value> {
    let mut objs = rack("a", 1, 4);
    objs.extend(sized_domain("ns", "old", "uid-old", 2));
    objs.extend(sized_domain("ns", "new", "uid-new", 1));
    objs.push(bound(cd_pod("ns", "old", "old-0"), "a-01"));
    objs.push(cd_pod("ns", "new", "new-0"));
    objs
}

/// A ComputeDomain of `size` pods (the size annotation) with its template.
fn sized_domain(ns: &str, name: &str, uid: &str, size: u32) -> Vec<Value> {
    vec![
        annotate(compute_domain(ns, name, uid), "cdplace.nvidia.com/size", &size.to_string()),
        channel_template(ns, name, uid),
    ]
}

#[test]
fn a_node_holding_another_domains_pod_is_refused() {
    let c = cluster(violator(), "", &two_domains());
    assert_eq!(
        refused(&c, "ns", "new-0", &[]),
        (
            Rule::OneDomainPerNode,
            "policy violation: rule one-domain-per-node: ComputeDomain pod ns/new-0 (ComputeDomain ns/new (UID uid-new)) allowed onto node a-01, which holds pod ns/old-0 of ComputeDomain ns/old (UID uid-old); one ComputeDomain per node (driver-managed IMEX): the driver's Prepare would refuse the claim".to_string()
        )
    );
    assert_eq!(c.stats().policy_violations, 1);
    // The packed answer (what the Go adapter reads) is refused the same way.
    assert!(matches!(c.pre_filter_packed("ns", "new-0", &[]), Err(Error::PolicyViolation(_))));
    assert_eq!(c.stats().policy_violations, 2);
    // A pod of no ComputeDomain may go anywhere: nothing to refuse.
    assert!(c.apply(&pod("ns", "plain", None, 4)).unwrap());
    assert_eq!(c.pre_filter("ns", "plain", &[]).expect("plain pod").status.code, Code::Success);
    // Without `old`'s pod, allowing every node breaks no rule.
    let objs: Vec<Value> = two_domains().into_iter().filter(|o| o["metadata"]["name"] != "old-0").collect();
    let c = cluster(violator(), "", &objs);
    assert_eq!(c.pre_filter("ns", "new-0", &[]).expect("first pod").status.code, Code::Success);
    assert_eq!(c.stats().policy_violations, 0);
}

#[test]
fn a_node_still_labelled_for_another_domain_is_refused() {
    let mut objs = rack("a", 1, 4);
    objs[2] = label(objs[2].clone(), "resource.nvidia.com/computeDomain", "uid-gone");
    objs.extend(domain("ns", "new", "uid-new"));
    objs.push(cd_pod("ns", "new", "new-0"));
    let c = cluster(violator(), "", &objs);
    assert_eq!(
        refused(&c, "ns", "new-0", &[]),
        (
            Rule::OneDomainPerNode,
            "policy violation: rule one-domain-per-node: ComputeDomain pod ns/new-0 (ComputeDomain ns/new (UID uid-new)) allowed onto node a-02, which still carries resource.nvidia.com/computeDomain=uid-gone (ComputeDomain uid-gone); one ComputeDomain per node (driver-managed IMEX): the driver's Prepare would refuse the claim".to_string()
        )
    );
    // Its own domain's label is no violation.
    let mut objs = rack("a", 1, 4);
    objs[2] = label(objs[2].clone(), "resource.nvidia.com/computeDomain", "uid-new");
    objs.extend(domain("ns", "new", "uid-new"));
    objs.push(cd_pod("ns", "new", "new-0"));
    let c = cluster(violator(), "", &objs);
    assert_eq!(c.pre_filter("ns", "new-0", &[]).expect("own label").status.code, Code::Success);
}

#[test]
fn a_second_workload_pod_of_a_domain_on_a_node_is_refused() {
    let mut objs = rack("a", 1, 4);
    objs.extend(domain("ns", "d", "uid-d"));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-03"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let c = cluster(violator(), "", &objs);
    assert_eq!(
        refused(&c, "ns", "d-1", &[]),
        (
            Rule::OneWorkloadPerNode,
            "policy violation: rule one-workload-per-node: ComputeDomain pod ns/d-1 (ComputeDomain ns/d (UID uid-d)) allowed onto node a-03, which already holds its domain's workload pod ns/d-0; one workload claim of a domain per node (channel 0 is exclusive): the driver's Prepare would refuse the claim".to_string()
        )
    );
    // Under host-managed IMEX too.
    let c = cluster(violator(), r#"{"imexMode":"HostManaged"}"#, &objs);
    assert_eq!(refused(&c, "ns", "d-1", &[]).0, Rule::OneWorkloadPerNode);
}

#[test]
fn a_domain_spanning_cliques_is_refused() {
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    objs.extend(domain("ns", "d", "uid-d"));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-00"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let c = cluster(violator(), "", &objs);
    assert_eq!(
        refused(&c, "ns", "d-1", &[]),
        (
            Rule::OneCliquePerDomain,
            format!(
                "policy violation: rule one-clique-per-domain: ComputeDomain pod ns/d-1 (ComputeDomain ns/d (UID uid-d)) allowed onto node b-00 in NVLink clique {}, but its domain has pods bound in clique {}; a ComputeDomain that fits one clique never spans cliques, and a larger one only across NVLink cliques",
                clique(2),
                clique(1)
            )
        )
    );
    // A node without an NVLink clique is outside the domain's clique too.
    let mut objs = rack("a", 1, 2);
    objs.push(node("plain-0", None, 4));
    objs.extend(domain("ns", "d", "uid-d"));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-00"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let (rule, message) = refused(&cluster(violator(), "", &objs), "ns", "d-1", &[]);
    assert_eq!(rule, Rule::OneCliquePerDomain);
    assert!(message.contains("allowed onto node plain-0 in NVLink clique (none)"), "{message}");
}

/// Host-managed IMEX lets domains share a node: the violator's answer for the second domain
/// passes; the driver-managed rule still refuses it under the default.
#[test]
fn host_managed_imex_lets_domains_share_a_node() {
    let c = cluster(violator(), r#"{"imexMode":"HostManaged"}"#, &two_domains());
    assert_eq!(c.pre_filter("ns", "new-0", &[]).expect("host-managed").status.code, Code::Success);
    let c = cluster(violator(), r#"{"imexMode":"DriverManaged"}"#, &two_domains());
    assert_eq!(refused(&c, "ns", "new-0", &[]).0, Rule::OneDomainPerNode);
}

/// The overlay is applied as the policy applies it: a victim preemption removes holds nothing,
/// a pod it nominates holds its node, and the pod decided never counts against itself.
#[test]
fn preemptions_overlay_is_seen_as_the_policy_sees_it() {
    let c = cluster(violator(), "", &two_domains());
    let remove = Overlay::RemovePod { namespace: "ns".into(), name: "old-0".into() };
    assert_eq!(c.pre_filter("ns", "new-0", &[remove]).expect("victim removed").status.code, Code::Success);
    let moved = Overlay::AddPod { namespace: "ns".into(), name: "old-0".into(), node: "a-03".into() };
    let (rule, message) = refused(&c, "ns", "new-0", &[moved]);
    assert_eq!(rule, Rule::OneDomainPerNode);
    assert!(message.contains("onto node a-03, which holds pod ns/old-0"), "{message}");
    // Its own nomination does not hold a node against the pod.
    let mut objs = rack("a", 1, 4);
    objs.extend(domain("ns", "d", "uid-d"));
    objs.push(nominated(cd_pod("ns", "d", "d-0"), "a-00"));
    let c = cluster(violator(), "", &objs);
    assert_eq!(c.pre_filter("ns", "d-0", &[]).expect("own nomination").status.code, Code::Success);
    // Another domain's nominated pod holds its node.
    objs.extend(domain("ns", "e", "uid-e"));
    objs.push(cd_pod("ns", "e", "e-0"));
    let c = cluster(violator(), "", &objs);
    assert!(refused(&c, "ns", "e-0", &[]).1.contains("onto node a-00, which holds pod ns/d-0"));
}

/// The shipped policy, natively and as the component, passes the checker on each fixture the
/// violator fails, and keeps the refused nodes out of its answer.
#[test]
fn the_shipped_policy_passes_the_checker_on_the_same_fixtures() {
    let t = Twin::new(&two_domains());
    let d = t.decide("ns", "new-0");
    assert_eq!(d.status.code, Code::Success);
    assert!(
        !d.node_set.as_ref().expect("node set").contains(&"a-01".to_string())
            || d.node("a-01", Some(&clique(1))).0.code != Code::Success
    );
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    objs.extend(sized_domain("ns", "d", "uid-d", 2));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-00"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let t = Twin::new(&objs);
    let d = t.decide("ns", "d-1");
    assert_eq!(d.status.code, Code::Success);
    assert_eq!(d.node_set, Some(vec!["a-00".into(), "a-01".into(), "a-02".into(), "a-03".into()]));
    assert_ne!(d.node("a-00", Some(&clique(1))).0.code, Code::Success);
    t.both(|c| assert_eq!(c.stats().policy_violations, 0));
}

/// A domain larger than one clique (segments, guest/policy segments.rs) may take a second
/// clique: the shipped policy's answer for its next pod allows both of its cliques and passes
/// the checker; a node without a clique stays refused to it, and a domain that fits one clique
/// is still refused a second (above).
#[test]
fn a_domain_larger_than_a_clique_may_span_cliques() {
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    objs.extend(sized_domain("ns", "d", "uid-d", 6));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-00"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let t = Twin::new(&objs);
    let d = t.decide("ns", "d-1");
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    assert_eq!(d.node("b-00", Some(&clique(2))).0.code, Code::Success, "the second clique of its layout");
    t.both(|c| assert_eq!(c.stats().policy_violations, 0));
    // The violator's answer (every node) passes the clique rule for b's nodes: what it breaks
    // is a-00, which holds d-0.
    let (rule, message) = refused(&cluster(violator(), "", &objs), "ns", "d-1", &[]);
    assert_eq!(rule, Rule::OneWorkloadPerNode, "a-00 holds d-0: {message}");
    let mut objs = rack("a", 1, 4);
    objs.extend(rack("b", 2, 4));
    objs.push(node("plain-0", None, 4));
    objs.extend(sized_domain("ns", "d", "uid-d", 6));
    objs.push(bound(cd_pod("ns", "d", "d-0"), "a-00"));
    objs.push(bound(cd_pod("ns", "d", "d-2"), "b-00"));
    objs.push(cd_pod("ns", "d", "d-1"));
    let c = cluster(violator(), "", &objs);
    let (rule, message) = refused(&c, "ns", "d-1", &[]);
    // A node without a clique stays refused to a spanning domain: the clique rule, which comes
    // first by rule order, names plain-0 (a-00 and b-00 break one-workload-per-node).
    assert_eq!(rule, Rule::OneCliquePerDomain, "{message}");
    assert!(message.contains("allowed onto node plain-0 in NVLink clique (none)"), "{message}");
}
