//! The team-racks rules natively through the real host (facts extracted from Kubernetes objects
//! as in the scheduler), and the built component on the same fixtures when `make examples` has
//! built it.

use std::path::PathBuf;

use cdplace_policy_sdk::harness::cdplace_host::{Cluster, Code, Decision};
use cdplace_policy_sdk::harness::fixtures::*;
use cdplace_policy_sdk::harness::{Harness, native, node_verdict};
use serde_json::Value;

use super::*;

const TEAMS: &str = r#"{"policyArgs":{"teams":{"team-a":["0f8e7d6c-5b4a-4321-9876-abcdef012345.2","0f8e7d6c-5b4a-4321-9876-abcdef012345.3"]}}}"#;

/// Three racks: `a` (clique 1, 10 trays), `b` (clique 2, 10 trays), `c` (clique 3, 6 trays);
/// a 4-pod domain in `ns`.
fn fleet(ns: &str) -> Vec<Value> {
    let mut objs = rack("a", 1, 10);
    objs.extend(rack("b", 2, 10));
    objs.extend(rack("c", 3, 6));
    objs.extend(domain(ns, "cd", &format!("uid-{ns}")));
    for i in 0..4 {
        objs.push(cd_pod(ns, "cd", &format!("p{i}")));
    }
    objs
}

fn cluster(args: &str, objs: &[Value]) -> Cluster {
    let c = Cluster::new(native::<TeamRacks>(), args).expect("cluster");
    for o in objs {
        c.apply(o).expect("apply");
    }
    c
}

fn decide(args: &str, objs: &[Value], ns: &str) -> Decision {
    cluster(args, objs).pre_filter(ns, "p0", &[]).expect("pre_filter")
}

#[test]
fn a_teams_domain_stays_on_its_racks_best_fit_inside() {
    let d = decide(TEAMS, &fleet("team-a"), "team-a");
    let (code, reason, _) = node_verdict(&d, "a-00", Some(&clique(1)));
    assert_eq!(code, Code::UnschedulableAndUnresolvable);
    assert_eq!(reason, "ComputeDomains of namespace team-a stay on its racks (teamRacks)");
    let b = node_verdict(&d, "b-00", Some(&clique(2)));
    let c = node_verdict(&d, "c-00", Some(&clique(3)));
    assert_eq!((b.0, c.0), (Code::Success, Code::Success));
    assert!(c.2.unwrap() > b.2.unwrap(), "6 free trays fit 4 better than 10: {c:?} vs {b:?}");
}

#[test]
fn other_namespaces_stay_off_team_racks_unless_not_dedicated() {
    let d = decide(TEAMS, &fleet("ml"), "ml");
    assert_eq!(node_verdict(&d, "a-00", Some(&clique(1))).0, Code::Success);
    let (code, reason, _) = node_verdict(&d, "c-00", Some(&clique(3)));
    assert_eq!(code, Code::UnschedulableAndUnresolvable);
    assert_eq!(reason, "the rack belongs to a team and namespace ml has none (teamRacks)");

    let shared = TEAMS.replace(r#"]}}}"#, r#"]},"dedicated":false}}"#);
    let d = decide(&shared, &fleet("ml"), "ml");
    assert_eq!(node_verdict(&d, "c-00", Some(&clique(3))).0, Code::Success);
}

#[test]
fn without_teams_it_answers_as_the_shipped_policy() {
    for ns in ["team-a", "ml"] {
        let shipped = Cluster::new(native::<View>(), "").unwrap();
        for o in fleet(ns) {
            shipped.apply(&o).unwrap();
        }
        assert_eq!(decide("", &fleet(ns), ns), shipped.pre_filter(ns, "p0", &[]).unwrap());
    }
}

/// Five racks of 18; racks 1-3 each run a domain (the shipped best fit ranks them first, and
/// offers only its 3 best-fitting cliques); team-a owns the two empty ones, 4 and 5, which rank
/// last. Its domain is offered them all the same: the cliques it may not use are out of the
/// running before the ranking (`View::pre_filter_within`), not cut from the shipped offer.
#[test]
fn a_teams_racks_are_offered_where_the_shipped_ranking_would_pass_them_over() {
    let args = r#"{"policyArgs":{"teams":{"team-a":["0f8e7d6c-5b4a-4321-9876-abcdef012345.4","0f8e7d6c-5b4a-4321-9876-abcdef012345.5"]}}}"#;
    let mut objs = Vec::new();
    for (id, prefix) in [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")] {
        objs.extend(rack(prefix, id, 18));
    }
    for (id, prefix) in [(1, "a"), (2, "b"), (3, "c")] {
        objs.extend(domain("ml", &format!("run{id}"), &format!("uid-run{id}")));
        for t in 0..id {
            objs.push(bound(cd_pod("ml", &format!("run{id}"), &format!("run{id}-{t}")), &format!("{prefix}-{t:02}")));
        }
    }
    objs.extend(domain("team-a", "cd", "uid-team-a"));
    for i in 0..4 {
        objs.push(cd_pod("team-a", "cd", &format!("p{i}")));
    }
    // The shipped policy offers racks 3, 2 and 1 (the fullest) and passes 4 and 5 over.
    let shipped = Cluster::new(native::<View>(), "").unwrap();
    for o in &objs {
        shipped.apply(o).unwrap();
    }
    let s = shipped.pre_filter("team-a", "p0", &[]).unwrap();
    assert_ne!(node_verdict(&s, "d-00", Some(&clique(4))).0, Code::Success, "the fixture must rank 4 and 5 last");
    let d = decide(args, &objs, "team-a");
    assert_eq!(d.status.code, Code::Success, "{d:?}");
    for (node, c) in [("d-00", 4), ("e-00", 5)] {
        assert_eq!(node_verdict(&d, node, Some(&clique(c))).0, Code::Success, "{node}: {d:?}");
    }
    for (node, c) in [("a-05", 1), ("b-05", 2), ("c-05", 3)] {
        let (code, reason, _) = node_verdict(&d, node, Some(&clique(c)));
        assert_eq!(code, Code::UnschedulableAndUnresolvable, "{node}");
        assert_eq!(reason, "ComputeDomains of namespace team-a stay on its racks (teamRacks)");
    }
}

#[test]
fn a_full_team_waits_rather_than_spill() {
    // team-a owns only clique 3 (6 trays); a 7-pod domain can never fit it.
    let args = r#"{"policyArgs":{"teams":{"team-a":["0f8e7d6c-5b4a-4321-9876-abcdef012345.3"]}}}"#;
    let mut objs = fleet("team-a");
    for i in 4..7 {
        objs.push(cd_pod("team-a", "cd", &format!("p{i}")));
    }
    let d = decide(args, &objs, "team-a");
    for (node, c) in [("a-00", 1), ("b-00", 2), ("c-00", 3)] {
        assert_ne!(node_verdict(&d, node, Some(&clique(c))).0, Code::Success, "{node}");
    }
}

#[test]
fn bad_team_args_are_named() {
    let err = |args: &str| Cluster::new(native::<TeamRacks>(), args).unwrap_err().to_string();
    let e = err(r#"{"policyArgs":{"teams":{"a":["r1"],"b":["r1"]}}}"#);
    assert!(e.contains(r#"policyArgs.teams.b: Invalid value: "r1": the rack is also a's"#), "{e}");
    let e = err(r#"{"policyArgs":{"team":{}}}"#);
    assert!(e.contains("policyArgs: unknown field `team`"), "{e}");
    let e = err(r#"{"policyArgs":{"teams":{"Team_A":["r1"]}}}"#);
    assert!(e.contains(r#"policyArgs.teams: Invalid value: "Team_A": must be a namespace name"#), "{e}");
    let e = err(r#"{"policyArgs":{"teams":{"a":[]}}}"#);
    assert!(e.contains("policyArgs.teams.a: Required value: at least one rack"), "{e}");
}

/// The component `make examples` built answers as the native build.
#[test]
fn the_component_answers_as_the_native_build() {
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../target/wasm32-wasip2/guest")
        .join(format!("{}.wasm", env!("CARGO_PKG_NAME").replace('-', "_")));
    assert!(wasm.exists(), "{} is missing: run `make examples` first", wasm.display());
    for ns in ["team-a", "ml"] {
        let h = Harness::new::<TeamRacks>(&wasm, TEAMS, &fleet(ns)).expect("harness");
        let d = h.decide(ns, "p0");
        let want = if ns == "team-a" { Code::UnschedulableAndUnresolvable } else { Code::Success };
        assert_eq!(node_verdict(&d, "a-00", Some(&clique(1))).0, want, "{ns}");
        h.steer(true);
        h.preempt(ns, "p0");
    }
}
