//! The test-only policy components `make guest` builds for the safety and hot-swap tests each
//! fail (or differ) the way they are meant to: the instantiate-trap one cannot make a cluster,
//! the loop one runs into every call's deadline, the other-wit one is refused at load with a
//! world mismatch (and its WIT is ours but for the version), the worst-fit one is a valid policy
//! that offers the emptiest cliques where the shipped one offers the fullest.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cdplace_host::{Cluster, Code, Error, Runtime};
use cdplace_testkit::builders::*;

fn load(name: &str) -> Arc<Runtime> {
    Runtime::from_file(&wasm_path(name))
        .unwrap_or_else(|e| panic!("loading {name}: {}", cdplace_host::error::chain(&e)))
}

#[test]
fn the_instantiate_trap_component_cannot_make_a_cluster() {
    let e = Cluster::new(load("cdplace_test_instantiate_trap.wasm"), "").unwrap_err();
    assert!(matches!(e, Error::Trap { .. }), "{e:?}");
    assert_eq!(e.to_string(), "policy guest trapped: unreachable executed (the guest panicked)");
}

#[test]
fn the_loop_component_runs_into_every_calls_deadline() {
    let c = Cluster::new(load("cdplace_test_loop.wasm"), r#"{"guestCallTimeout": "50ms"}"#).expect("cluster");
    let mut objs = rack("a", 1, 2);
    objs.extend(domain("ns", "d", "uid-d"));
    objs.push(cd_pod("ns", "d", "d-0"));
    objs.push(pod("ns", "plain", None, 0));
    for o in &objs {
        assert!(c.apply(o).expect("apply"));
    }
    for name in ["d-0", "plain"] {
        let e = c.pre_filter("ns", name, &[]).unwrap_err();
        assert!(matches!(e, Error::Timeout { deadline, .. } if deadline == Duration::from_millis(50)), "{name}: {e:?}");
    }
}

#[test]
fn the_other_wit_component_is_refused_with_a_world_mismatch() {
    let e = match Runtime::from_file(&wasm_path("cdplace_test_other_wit.wasm")) {
        Err(e) => e,
        Ok(rt) => Cluster::new(rt, "").expect_err("a component of another WIT version must not run"),
    };
    assert!(matches!(e, Error::World(_)), "{e:?}");
    let chain = cdplace_host::error::chain(&e);
    assert!(chain.contains("cdplace:policy/policy@0.3.0"), "the error names the host's world: {chain}");
    assert!(chain.contains("export func `status`"), "the cause names the export that differs: {chain}");
}

/// The other-wit component's WIT is the repository's with the package version bumped and the
/// `status` export changed, nothing else: it differs from ours only where the test needs it to.
#[test]
fn the_other_wit_copy_differs_only_in_its_version_and_one_export() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ours = std::fs::read_to_string(root.join("wit/cdplace.wit")).expect("wit/cdplace.wit");
    let other = std::fs::read_to_string(root.join("guest/testing/other-wit/wit/cdplace.wit")).expect("other wit");
    let version = |s: &str| s.lines().find(|l| l.starts_with("package ")).map(str::to_string);
    assert_ne!(version(&ours), version(&other), "the copy must declare another version");
    let status = |s: &str| s.lines().find(|l| l.trim_start().starts_with("export status:")).map(str::to_string);
    assert_ne!(status(&ours), status(&other), "the copy must change the status export");
    let body = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("package ") && !l.trim_start().starts_with("export status:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(body(&ours), body(&other), "guest/testing/other-wit/wit/cdplace.wit drifted from wit/cdplace.wit");
}

/// Four cliques of 8 trays with 0..=3 busy; a new domain of 2: the shipped policy offers the three
/// fullest cliques that fit (best fit), the worst-fit component the three emptiest, and both
/// answers pass the host's safety rules.
#[test]
fn the_worst_fit_component_offers_the_emptiest_cliques() {
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
    let offered = |rt: Arc<Runtime>| {
        let c = Cluster::new(rt, "").expect("cluster");
        for o in &objs {
            assert!(c.apply(o).expect("apply"));
        }
        let d = c.pre_filter("ns", "new-0", &[]).expect("pre_filter");
        assert_eq!(d.status.code, Code::Success);
        let mut best: Vec<(u32, String)> = d
            .cliques
            .iter()
            .filter(|(_, (s, _))| s.code == Code::Success)
            .map(|(c, (_, score))| (*score, c.clone()))
            .collect();
        best.sort_by(|a, b| b.cmp(a));
        best.into_iter().map(|(_, c)| c).collect::<Vec<_>>()
    };
    assert_eq!(offered(runtime()), [clique(4), clique(3), clique(2)], "best fit: the fullest first");
    assert_eq!(
        offered(load("cdplace_guest_worstfit.wasm")),
        [clique(1), clique(2), clique(3)],
        "worst fit: the emptiest first"
    );
}
