//! Builders for Kubernetes objects shaped as the API server and the NVIDIA DRA driver write
//! them, and a runner that evaluates the same cluster with the native policy and the wasm
//! component and insists they agree.

pub use cdplace_policy_sdk::harness::fixtures::*;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use cdplace_host::{Backend, Cluster, Decision, Runtime};
use serde_json::Value;

/// The path of a component `make guest` built (`cdplace_guest.wasm`, `cdplace_faulty_guest.wasm`).
pub fn wasm_path(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/guest").join(name);
    assert!(p.exists(), "{} is missing: run `make guest` first", p.display());
    p
}

/// The policy component, compiled once per test binary.
pub fn runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| Runtime::from_file(&wasm_path("cdplace_guest.wasm")).expect("load guest")).clone()
}

/// Both backends, native first: the policy compiled natively and the component.
pub fn backends() -> [Arc<dyn Backend>; 2] {
    [crate::native::backend(), runtime()]
}

/// The test-only component that traps, loops or exhausts memory (its arguments say which, and
/// the limits: see `guest/faulty`), compiled once per test binary.
pub fn faulty_runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| Runtime::from_file(&wasm_path("cdplace_faulty_guest.wasm")).expect("load faulty guest")).clone()
}

/// The same cluster evaluated natively and through the component.
#[allow(missing_debug_implementations)]
pub struct Twin {
    pub native: Cluster,
    pub wasm: Cluster,
}

impl Twin {
    pub fn new(objects: &[Value]) -> Self {
        Self::with_args("", objects)
    }

    pub fn with_args(args: &str, objects: &[Value]) -> Self {
        let t = Twin {
            native: Cluster::new(crate::native::backend(), args).expect("native cluster"),
            wasm: Cluster::new(runtime(), args).expect("wasm cluster"),
        };
        t.apply(objects);
        t
    }

    pub fn apply(&self, objects: &[Value]) {
        for o in objects {
            assert!(self.native.apply(o).expect("native apply"), "kind not read: {o}");
            assert!(self.wasm.apply(o).expect("wasm apply"), "kind not read: {o}");
        }
    }

    pub fn both(&self, f: impl Fn(&Cluster)) {
        f(&self.native);
        f(&self.wasm);
    }

    /// PreFilter for `ns/name` on both builds; they must agree exactly, and the packed decision
    /// (what the Go adapter reads) must say the same.
    pub fn decide(&self, ns: &str, name: &str) -> Decision {
        self.decide_with(ns, name, &[])
    }

    /// [`Twin::decide`] as if `overlay` were applied.
    pub fn decide_with(&self, ns: &str, name: &str, overlay: &[cdplace_host::Overlay]) -> Decision {
        let n = self.native.pre_filter(ns, name, overlay).expect("native pre_filter");
        let w = self.wasm.pre_filter(ns, name, overlay).expect("wasm pre_filter");
        assert_eq!(n, w, "native and wasm policies disagree for {ns}/{name} with {overlay:?}");
        let packed = self.wasm.pre_filter_packed(ns, name, overlay).expect("wasm pre_filter_packed");
        assert_eq!(crate::packed::decode_decision(&packed), w, "the packed decision differs for {ns}/{name}");
        n
    }

    /// Plain-pod steering on both builds; they must agree exactly, packed included.
    pub fn steer(&self, gpus: bool) -> Decision {
        let n = self.native.steer(gpus).expect("native steer");
        let w = self.wasm.steer(gpus).expect("wasm steer");
        assert_eq!(n, w, "native and wasm policies disagree on steering (gpus: {gpus})");
        let packed = self.wasm.steer_packed(gpus).expect("wasm steer_packed");
        assert_eq!(crate::packed::decode_decision(&packed), w, "the packed steering decision differs");
        n
    }

    /// Gang preemption for `ns/name` on both builds; they must agree exactly.
    pub fn preempt(&self, ns: &str, name: &str) -> cdplace_host::Preemption {
        let n = self.native.preempt(ns, name).expect("native preempt");
        let w = self.wasm.preempt(ns, name).expect("wasm preempt");
        assert_eq!(n, w, "native and wasm policies disagree on preemption for {ns}/{name}");
        n
    }
}

/// Filter's code and reason plus Score for one node, as the plugin would read them.
pub fn verdict<'a>(d: &'a Decision, node: &str, clique: Option<&str>) -> (cdplace_host::Code, &'a str, Option<u32>) {
    let (s, score) = d.node(node, clique);
    (s.code, s.reason.as_str(), score)
}

/// The 5,004-tray figure fleet of the swap and shadow costs: 278 cliques of 18 trays, 200
/// pending ComputeDomains of 4 (one pod each, `cd{d}-p0`) and 125 running ones of 4 (`run{d}`).
pub fn fleet_5004() -> Vec<Value> {
    let mut objs = Vec::new();
    for r in 0..278 {
        objs.extend(rack(&format!("r{r:03}"), r + 1, 18));
    }
    for d in 0..200 {
        let (cd, uid) = (format!("cd{d}"), format!("uid-cd{d}"));
        objs.extend(domain("ns", &cd, &uid));
        objs.push(annotate(compute_domain("ns", &cd, &uid), "cdplace.nvidia.com/size", "4"));
        objs.push(cd_pod("ns", &cd, &format!("{cd}-p0")));
    }
    for d in 0..125 {
        let (cd, uid) = (format!("run{d}"), format!("uid-run{d}"));
        objs.extend(domain("ns", &cd, &uid));
        objs.push(annotate(compute_domain("ns", &cd, &uid), "cdplace.nvidia.com/size", "4"));
        for i in 0..4 {
            objs.push(bound(cd_pod("ns", &cd, &format!("{cd}-p{i}")), &format!("r{d:03}-{i:02}")));
        }
    }
    objs
}
