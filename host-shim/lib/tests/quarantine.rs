//! A bad object is a quarantine, not a poison pill: when applying one object's facts traps the
//! guest, that object is dropped from the view and reported, and every other decision goes on.

use cdplace_host::{Cluster, Code, Kind, Quarantined};
use cdplace_testkit::builders::*;

/// The faulty component traps in `apply` on a pod whose name starts with `poison`.
fn poisoned() -> Cluster {
    let c = Cluster::new(faulty_runtime(), "").unwrap();
    for ns in ["ok", "also-ok"] {
        assert!(c.apply(&pod(ns, "p", None, 0)).unwrap());
    }
    c
}

fn reported(c: &Cluster) -> Vec<(String, String, String)> {
    c.take_quarantined().into_iter().map(|q| (q.kind.to_string(), q.namespace, q.name)).collect()
}

#[test]
fn a_trap_on_one_object_quarantines_it_and_decisions_go_on() {
    let c = poisoned();
    // The first instance is made from a snapshot that holds the bad pod.
    assert!(c.apply(&pod("ns", "poison", None, 0)).unwrap());
    for _ in 0..3 {
        assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
        assert_eq!(c.pre_filter("also-ok", "p", &[]).unwrap().status.code, Code::Skip);
    }
    let q = c.take_quarantined();
    assert_eq!(q.len(), 1, "{q:?}");
    assert_eq!(
        q[0],
        Quarantined {
            kind: "Pod",
            namespace: "ns".into(),
            name: "poison".into(),
            error: "policy guest trapped: unreachable executed (the guest panicked): wasm trap: wasm `unreachable` instruction executed".into()
        }
    );
    assert!(!c.has_pod("ns", "poison"), "the quarantined pod is out of the view");
    assert_eq!(c.stats().quarantined_objects, 1);
    // Reported once.
    assert!(reported(&c).is_empty());
}

#[test]
fn a_bad_object_arriving_behind_an_idle_instance_is_quarantined_at_catch_up() {
    let c = poisoned();
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    assert_eq!(c.stats().idle_instances, 1);
    // The idle instance catches up on a journal holding the bad pod.
    assert!(c.apply(&pod("ns", "poison", None, 0)).unwrap());
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    assert_eq!(reported(&c), vec![("Pod".into(), "ns".into(), "poison".into())]);
    // Later changes of other objects are applied as usual.
    assert!(c.apply(&pod("ok", "q", None, 0)).unwrap());
    assert_eq!(c.pre_filter("ok", "q", &[]).unwrap().status.code, Code::Skip);
    assert!(reported(&c).is_empty());
}

#[test]
fn an_update_of_a_quarantined_object_is_applied_again() {
    let c = poisoned();
    assert!(c.apply(&pod("ns", "poison", None, 0)).unwrap());
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    assert_eq!(reported(&c).len(), 1);
    // Its update lifts the quarantine; still bad, it is quarantined (and reported) again.
    assert!(c.apply(&pod("ns", "poison", None, 4)).unwrap());
    assert!(c.has_pod("ns", "poison"));
    assert_eq!(c.stats().quarantined_objects, 0);
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    assert_eq!(reported(&c).len(), 1);
    // Its deletion lifts it for good.
    c.delete(Kind::Pod, "ns", "poison");
    assert_eq!(c.stats().quarantined_objects, 0);
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    assert!(reported(&c).is_empty());
}
