//! The host fails closed: a guest that traps, loops or exhausts memory gives an error result,
//! the broken instance is discarded, and the host keeps serving. Also: parallel callers with
//! updates in flight, and a guest with no imports.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cdplace_host::{Cluster, Code, Error, Limits};
use cdplace_testkit::builders::*;

/// A cluster on the faulty component; `args` name the fault and may set the limits, as plugin
/// arguments do.
fn faulty_cluster(args: &str) -> Cluster {
    let c = Cluster::new(faulty_runtime(), args).expect("cluster");
    for ns in ["fault", "ok"] {
        assert!(c.apply(&pod(ns, "p", None, 0)).unwrap());
    }
    c
}

#[test]
fn a_trapping_guest_gives_an_error_and_the_host_keeps_serving() {
    let c = faulty_cluster(r#""trap""#);
    assert_eq!(c.limits(), Limits::default());
    for _ in 0..3 {
        let e = c.pre_filter("fault", "p", &[]).unwrap_err();
        assert!(matches!(e, Error::Trap { .. }), "{e:?}");
        assert_eq!(e.to_string(), "policy guest trapped: unreachable executed (the guest panicked)");
        assert!(e.is_guest_failure());
        // A fresh instance serves the next pod.
        assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    }
}

#[test]
fn a_trapping_status_call_gives_an_error_and_the_host_keeps_serving() {
    let c = faulty_cluster(r#""trap""#);
    let e = c.status().unwrap_err();
    assert!(matches!(e, Error::Trap { .. }), "{e:?}");
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
    // Without a pod in namespace fault, the faulty component answers with an empty fleet.
    let quiet = Cluster::new(faulty_runtime(), r#""trap""#).expect("cluster");
    assert!(quiet.apply(&pod("ok", "p", None, 0)).unwrap());
    let fleet = quiet.status().expect("status");
    assert!(fleet.cliques.is_empty() && fleet.domains.is_empty(), "{fleet:?}");
}

#[test]
fn a_looping_guest_is_interrupted_at_its_deadline() {
    let c = faulty_cluster(r#"{"fault": "loop", "guestCallTimeout": "50ms"}"#);
    assert_eq!(c.limits(), Limits { deadline: Duration::from_millis(50), ..Limits::default() });
    let start = Instant::now();
    let e = c.pre_filter("fault", "p", &[]).unwrap_err();
    assert!(matches!(e, Error::Timeout { deadline, .. } if deadline == Duration::from_millis(50)), "{e:?}");
    assert_eq!(e.to_string(), "policy guest exceeded its deadline of 50ms");
    // Generous bound: the point is that it ends, not how fast.
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
}

#[test]
fn a_guest_that_exhausts_memory_is_stopped_at_the_limit() {
    let c = faulty_cluster(r#"{"fault": "oom", "guestMemoryLimitMiB": 16}"#);
    assert_eq!(c.limits().memory_bytes, 16 << 20);
    let e = c.pre_filter("fault", "p", &[]).unwrap_err();
    assert!(matches!(e, Error::OutOfMemory { limit, .. } if limit == 16 << 20), "{e:?}");
    assert_eq!(e.to_string(), format!("policy guest exceeded its memory limit of {} bytes", 16 << 20));
    assert_eq!(c.pre_filter("ok", "p", &[]).unwrap().status.code, Code::Skip);
}

#[test]
fn a_component_that_is_not_a_policy_fails_to_load_with_an_error() {
    let e = cdplace_host::Runtime::new(b"not wasm at all").unwrap_err();
    assert!(matches!(e, Error::Load(_)), "{e:?}");
    assert_eq!(e.to_string(), "loading the policy component failed");
    // The cause is the source, not part of the message; the C ABI's message has both.
    let chain = cdplace_host::error::chain(&e);
    assert!(chain.starts_with("loading the policy component failed: ") && chain.len() > 40, "{chain}");
    let e = cdplace_host::Runtime::from_file(std::path::Path::new("/nonexistent/guest.wasm")).unwrap_err();
    assert_eq!(
        cdplace_host::error::chain(&e),
        "reading the policy component /nonexistent/guest.wasm failed: No such file or directory (os error 2)"
    );
}

/// Many threads deciding while another keeps binding and deleting pods: every decision agrees
/// with the native policy evaluated on the same final state, and nothing panics.
#[test]
fn parallel_callers_each_get_an_instance_and_see_updates() {
    let mut objs = rack("a", 1, 18);
    objs.extend(rack("b", 2, 18));
    objs.extend(domain("ns", "cd", "uid-cd"));
    for i in 0..8 {
        objs.push(cd_pod("ns", "cd", &format!("p{i}")));
    }
    let wasm = Arc::new(Cluster::new(runtime(), "").unwrap());
    for o in &objs {
        wasm.apply(o).unwrap();
    }
    let writer = {
        let wasm = wasm.clone();
        std::thread::spawn(move || {
            for round in 0..50 {
                let name = format!("noise-{round}");
                let node = format!("b-{:02}", round % 18);
                wasm.apply(&bound(pod("other", &name, None, 4), &node)).unwrap();
                wasm.delete(cdplace_host::Kind::Pod, "other", &name);
            }
        })
    };
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let wasm = wasm.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let d = wasm.pre_filter("ns", &format!("p{}", (t + i) % 8), &[]).unwrap();
                    assert_eq!(d.status.code, Code::Success, "{}", d.status.reason);
                }
            })
        })
        .collect();
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    let native = Cluster::new(cdplace_testkit::native::backend(), "").unwrap();
    for o in &objs {
        native.apply(o).unwrap();
    }
    assert_eq!(wasm.pre_filter("ns", "p0", &[]).unwrap(), native.pre_filter("ns", "p0", &[]).unwrap());
}

/// The limits come from the plugin arguments, validated by the component, per cluster: two
/// clusters of one runtime run under different limits.
#[test]
fn limits_are_per_cluster_from_the_arguments() {
    let slow = Cluster::new(runtime(), r#"{"guestCallTimeout": "3s", "guestMemoryLimitMiB": 256}"#).unwrap();
    assert_eq!(slow.limits(), Limits { memory_bytes: 256 << 20, deadline: Duration::from_secs(3) });
    assert_eq!((slow.settings().call_timeout_ms, slow.settings().memory_limit_mib), (3_000, 256));
    let default = Cluster::new(runtime(), "").unwrap();
    assert_eq!(default.limits(), Limits::default());
    assert_eq!(Limits::default(), Limits { memory_bytes: 512 << 20, deadline: Duration::from_secs(2) });
    // Both serve decisions.
    for c in [&slow, &default] {
        assert!(c.apply(&pod("ns", "p", None, 4)).unwrap());
        assert_eq!(c.pre_filter("ns", "p", &[]).unwrap().status.code, Code::Skip);
    }
    let e = Cluster::new(runtime(), r#"{"guestMemoryLimitMiB": 8}"#).unwrap_err();
    assert!(matches!(e, Error::InvalidArgs(_)), "{e:?}");
    assert!(e.to_string().starts_with("invalid plugin args: guestMemoryLimitMiB: Invalid value: \"8\""), "{e}");
}
