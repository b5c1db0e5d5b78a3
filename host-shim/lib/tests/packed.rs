//! The packed paths of the C ABI, through the Rust API: a facts batch (`CDF3`) applies exactly
//! as the JSON objects it was extracted from, atomically; the packed decision (`CDP4`) says what
//! the `Decision` says, node set included; the packed overlay acts as the typed one.

use cdplace_host::facts::{self, Record};
use cdplace_host::{CANDIDATE_CLIQUES, Cluster, Code, Decision, Kind, Object, Overlay, overlay};
use cdplace_testkit::builders::*;
use cdplace_testkit::packed::{decode_decision, facts_of};
use serde_json::{Value, json};

const NS: &str = "team-a";

fn wasm() -> Cluster {
    Cluster::new(runtime(), "").expect("cluster")
}

/// Both forms of the decision for a pod; they must agree.
fn decide(c: &Cluster, ns: &str, name: &str, overlay: &[Overlay]) -> Decision {
    let d = c.pre_filter(ns, name, overlay).expect("pre_filter");
    let packed = decode_decision(&c.pre_filter_packed(ns, name, overlay).expect("pre_filter_packed"));
    assert_eq!(packed, d, "CDP4 and Decision differ for {ns}/{name}");
    d
}

/// A cluster with every kind: two cliques, a started and a pending domain, claims, slices, a
/// cordoned tray, a plain pod.
fn objects() -> Vec<Value> {
    let mut objs = rack("a", 1, 6);
    objs.extend(rack("b", 2, 4));
    objs.push(cordon(node("b-09", Some(&clique(2)), 4)));
    objs.push(gpu_slice("a-00", 4));
    objs.extend(domain(NS, "run", "uid-run"));
    objs.push(channel_claim(NS, "run-0-channel", "uid-run"));
    let mut p = bound(cd_pod(NS, "run", "run-0"), "a-00");
    p["status"]["resourceClaimStatuses"] = json!([{"name": "channel", "resourceClaimName": "run-0-channel"}]);
    objs.push(p);
    objs.push(cd_pod(NS, "run", "run-1"));
    objs.extend(domain(NS, "new", "uid-new"));
    objs.push(annotate(compute_domain(NS, "new", "uid-new"), "cdplace.nvidia.com/size", "3"));
    for i in 0..3 {
        objs.push(cd_pod(NS, "new", &format!("new-{i}")));
    }
    objs.push(pod(NS, "plain", None, 4));
    objs.push(json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": NS}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}));
    objs
}

#[test]
fn a_facts_batch_applies_as_the_objects_it_came_from() {
    let objs = objects();
    let from_json = wasm();
    for o in &objs {
        assert!(from_json.apply(o).unwrap(), "not read: {o}");
    }
    let from_facts = wasm();
    from_facts.apply_facts(&facts_of(&objs, from_facts.settings())).unwrap();
    assert_eq!(from_facts.nodes(), from_json.nodes());
    for p in ["run-1", "new-0", "plain"] {
        assert_eq!(decide(&from_facts, NS, p, &[]), decide(&from_json, NS, p, &[]), "{p}");
    }
    let d = decide(&from_facts, NS, "run-1", &[]);
    assert!(d.exclusive && d.status.code == Code::Success, "{d:?}");
    let a: Vec<String> = (0..6).map(|i| format!("a-{i:02}")).collect();
    assert_eq!(d.node_set, Some(a), "a started domain: the nodes of its clique");
    assert_eq!(decide(&from_facts, NS, "plain", &[]).status.code, Code::Skip);

    // Removals as records: the running pod leaves, so run-1 may start anywhere that fits.
    let gone = Record::Remove { kind: Kind::Pod, namespace: NS.into(), name: "run-0".into() };
    from_facts.apply_facts(&facts::encode(&[gone])).unwrap();
    from_json.delete(Kind::Pod, NS, "run-0");
    assert!(!from_facts.has_pod(NS, "run-0"));
    let d = decide(&from_facts, NS, "run-1", &[]);
    assert!(!d.exclusive, "{d:?}");
    assert_eq!(d, decide(&from_json, NS, "run-1", &[]));
}

#[test]
fn a_malformed_batch_applies_nothing() {
    let c = wasm();
    let good = Record::Upsert(Object::Node {
        name: "tray-0".into(),
        clique_label: Some(clique(1)),
        domain_label: None,
        unschedulable: false,
        gpus: 4,
    });
    let mut batch = facts::encode(&[good.clone(), good]);
    let len = batch.len();
    batch[len - 5] = 7; // the second record's `unschedulable`
    let e = c.apply_facts(&batch).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("malformed facts batch: record 1 at byte {}: unschedulable: 7 is not a boolean (0 or 1)", len - 5)
    );
    assert!(c.nodes().is_empty(), "the first, well-formed record was applied: {:?}", c.nodes());
    batch[len - 5] = 0;
    c.apply_facts(&batch).unwrap();
    assert_eq!(c.nodes(), vec![("tray-0".to_string(), Some(clique(1)))]);
}

#[test]
fn a_domain_not_started_is_offered_its_best_fitting_cliques() {
    // Five cliques of different sizes: a 4-pod domain fits each, with distinct best-fit scores.
    let sizes = [10, 5, 7, 4, 6];
    let mut objs = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        objs.extend(rack(&format!("r{i}"), i as u32 + 1, n));
    }
    objs.extend(domain(NS, "cd", "uid-cd"));
    for i in 0..4 {
        objs.push(cd_pod(NS, "cd", &format!("p{i}")));
    }
    let c = wasm();
    c.apply_facts(&facts_of(&objs, c.settings())).unwrap();
    let d = decide(&c, NS, "p0", &[]);
    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
    assert!(!d.exclusive);
    // The policy offers (Success) only its CANDIDATE_CLIQUES best; the other fitting ones are
    // passed over with a reason.
    let chosen: Vec<&String> = d.cliques.iter().filter(|(_, (s, _))| s.code == Code::Success).map(|(l, _)| l).collect();
    assert_eq!(chosen.len(), CANDIDATE_CLIQUES, "{:?}", d.cliques);
    let passed = d.cliques.values().filter(|(s, _)| s.reason.contains("best-fitting cliques first")).count();
    assert_eq!(passed, sizes.len() - CANDIDATE_CLIQUES, "{:?}", d.cliques);
    let mut want: Vec<String> = c
        .nodes()
        .into_iter()
        .filter(|(_, l)| l.as_ref().is_some_and(|l| chosen.contains(&l)))
        .map(|(n, _)| n)
        .collect();
    want.sort();
    // The 4-tray clique is the best fit; the 10-tray one is not offered.
    assert!(want.contains(&"r3-00".to_string()) && !want.iter().any(|n| n.starts_with("r0-")), "{want:?}");
    assert_eq!(d.node_set, Some(want));
}

#[test]
fn a_packed_overlay_acts_as_the_typed_one() {
    let mut objs = rack("a", 1, 2);
    objs.extend(domain(NS, "x", "uid-x"));
    objs.push(bound(cd_pod(NS, "x", "x0"), "a-00"));
    objs.extend(domain(NS, "cd", "uid-cd"));
    objs.push(annotate(compute_domain(NS, "cd", "uid-cd"), "cdplace.nvidia.com/size", "2"));
    objs.push(cd_pod(NS, "cd", "p0"));
    let c = wasm();
    c.apply_facts(&facts_of(&objs, c.settings())).unwrap();
    assert_eq!(decide(&c, NS, "p0", &[]).status.code, Code::Unschedulable, "one tray free for two pods");
    let ops = overlay::decode(&overlay::encode(&[Overlay::RemovePod { namespace: NS.into(), name: "x0".into() }]))
        .expect("overlay");
    let d = decide(&c, NS, "p0", &ops);
    assert_eq!(d.status.code, Code::Success, "as if x0 were preempted: {}", d.status.reason);
    assert_eq!(d.node_set, Some(vec!["a-00".to_string(), "a-01".to_string()]));
}
