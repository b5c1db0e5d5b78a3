//! The test harness (feature `harness`): a policy run natively as a backend of the real host
//! ([`native`]), and the same fixtures run natively and as the policy's built component
//! ([`Harness`]), which must answer alike. The host side is `cdplace-host`, the library
//! kube-scheduler links: facts are extracted from Kubernetes objects exactly as in the scheduler.
//!
//! ```no_run
//! use cdplace_policy_sdk::harness::Harness;
//! use cdplace_policy_sdk::View;
//! use serde_json::json;
//!
//! let node = json!({"apiVersion": "v1", "kind": "Node",
//!     "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.clique": "c0ffee.1"}},
//!     "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": "4"}}});
//! // The shipped policy natively and as its component; `make guest` builds the component.
//! let h = Harness::new::<View>("target/wasm32-wasip2/guest/cdplace_guest.wasm", "{}", &[node]).unwrap();
//! assert_eq!(h.steer(true).status.code, cdplace_host::Code::Success);
//! ```

use std::boxed::Box;
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

pub use cdplace_host;

pub mod fixtures;
use cdplace_host::wit;
use cdplace_host::{Backend, Cluster, Decision, Error, Evaluator, Limits, Overlay, Result, Runtime, Settings};
use cdplace_policy as p;
use serde_json::Value;

use crate::Policy;

/// A policy compiled natively, as a backend of the host: each evaluator is a fresh `P`.
pub struct Native<P>(PhantomData<fn() -> P>);

impl<P> fmt::Debug for Native<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Native")
    }
}

/// `P` compiled natively, as a cluster takes a backend.
pub fn native<P: Policy + Default + Send + fmt::Debug + 'static>() -> Arc<dyn Backend> {
    Arc::new(Native::<P>(PhantomData))
}

impl<P: Policy + Default + Send + fmt::Debug + 'static> Backend for Native<P> {
    /// Native calls run without limits.
    fn evaluator(self: Arc<Self>, _limits: Limits) -> Result<Box<dyn Evaluator>> {
        Ok(Box::new(NativeEvaluator(Box::<P>::default())))
    }
}

/// One native policy instance.
#[derive(Debug)]
pub struct NativeEvaluator<P>(pub Box<P>);

fn error(e: p::Error) -> Error {
    match e {
        p::Error::InvalidArgs(m) => Error::InvalidArgs(m),
        p::Error::InvalidInput(m) => Error::InvalidInput(m),
    }
}

impl<P: Policy + Send + fmt::Debug> Evaluator for NativeEvaluator<P> {
    fn configure(&mut self, args: &str) -> Result<Settings> {
        let a = self.0.configure(args).map_err(error)?;
        Ok(Settings::from(&a))
    }

    fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()> {
        self.0.apply(deltas.iter().map(delta).collect()).map_err(error)
    }

    fn pre_filter(&mut self, pod: p::StrId, overlay: &[p::OverlayOp], now_ms: i64) -> Result<p::PreFilterResult> {
        Ok(self.0.pre_filter(pod, overlay, now_ms))
    }

    fn steer(&mut self, gpus: bool, now_ms: i64) -> Result<p::PreFilterResult> {
        Ok(self.0.steer(gpus, now_ms))
    }

    fn preempt(&mut self, pod: p::StrId, now_ms: i64) -> Result<p::Preemption> {
        Ok(self.0.preempt(pod, now_ms))
    }

    fn status(&mut self, now_ms: i64) -> Result<p::FleetStatus> {
        Ok(self.0.status(now_ms))
    }
}

/// One cluster of fixtures, evaluated by a policy natively and by its component through the
/// real host; every answer is asked of both and must be the same.
#[allow(missing_debug_implementations)]
pub struct Harness {
    pub native: Cluster,
    pub wasm: Cluster,
}

impl Harness {
    /// `P` natively and the component at `component` (a `.wasm` file), configured with `args`
    /// (the plugin arguments as JSON), fed `objects` (Kubernetes objects as JSON).
    pub fn new<P: Policy + Default + Send + fmt::Debug + 'static>(
        component: impl AsRef<Path>,
        args: &str,
        objects: &[Value],
    ) -> Result<Self> {
        let rt: Arc<Runtime> = Runtime::from_file(component.as_ref())?;
        let h = Harness { native: Cluster::new(native::<P>(), args)?, wasm: Cluster::new(rt, args)? };
        h.apply(objects)?;
        Ok(h)
    }

    /// Adds or updates objects on both.
    pub fn apply(&self, objects: &[Value]) -> Result<()> {
        for o in objects {
            self.native.apply(o)?;
            self.wasm.apply(o)?;
        }
        Ok(())
    }

    /// PreFilter for the pod `ns/name` on both; panics when they differ.
    pub fn decide(&self, ns: &str, name: &str) -> Decision {
        self.decide_with(ns, name, &[])
    }

    /// [`Harness::decide`] as if `overlay` were applied.
    pub fn decide_with(&self, ns: &str, name: &str, overlay: &[Overlay]) -> Decision {
        let n = self.native.pre_filter(ns, name, overlay).expect("native pre_filter");
        let w = self.wasm.pre_filter(ns, name, overlay).expect("component pre_filter");
        assert_eq!(n, w, "the native policy and its component disagree for {ns}/{name} with {overlay:?}");
        n
    }

    /// Plain-pod steering on both; panics when they differ.
    pub fn steer(&self, gpus: bool) -> Decision {
        let n = self.native.steer(gpus).expect("native steer");
        let w = self.wasm.steer(gpus).expect("component steer");
        assert_eq!(n, w, "the native policy and its component disagree on steering (gpus: {gpus})");
        n
    }

    /// Gang preemption for `ns/name` on both; panics when they differ.
    pub fn preempt(&self, ns: &str, name: &str) -> cdplace_host::Preemption {
        let n = self.native.preempt(ns, name).expect("native preempt");
        let w = self.wasm.preempt(ns, name).expect("component preempt");
        assert_eq!(n, w, "the native policy and its component disagree on preemption for {ns}/{name}");
        n
    }
}

/// Filter's code and reason plus Score for one node of a decision, as the plugin reads them.
pub fn node_verdict<'a>(
    d: &'a Decision,
    node: &str,
    clique: Option<&str>,
) -> (cdplace_host::Code, &'a str, Option<u32>) {
    let (s, score) = d.node(node, clique);
    (s.code, s.reason.as_str(), score)
}

fn demand(g: &wit::GpuDemand) -> p::GpuDemand {
    p::GpuDemand { count: g.count, all: g.all }
}

/// A journaled delta (the WIT shape the host keeps) back in the policy's shape.
pub fn delta(d: &wit::Delta) -> p::Delta {
    match d {
        wit::Delta::Strings(s) => p::Delta::Strings(s.clone()),
        wit::Delta::UpsertNode(n) => p::Delta::UpsertNode(p::NodeFact {
            name: n.name,
            clique_label: n.clique_label,
            unschedulable: n.unschedulable,
            gpus: n.gpus,
            domain_label: n.domain_label,
        }),
        wit::Delta::RemoveNode(n) => p::Delta::RemoveNode(*n),
        wit::Delta::UpsertPod(pod) => p::Delta::UpsertPod(p::PodFact {
            key: pod.key,
            namespace: pod.namespace,
            placement: match pod.placement {
                wit::Placement::Pending => p::Placement::Pending,
                wit::Placement::Nominated => p::Placement::Nominated,
                wit::Placement::Assumed => p::Placement::Assumed,
                wit::Placement::Bound => p::Placement::Bound,
            },
            node: pod.node,
            claims: pod
                .claims
                .iter()
                .map(|c| p::ClaimRef { name: c.name, template: c.template, claim: c.claim, generated: c.generated })
                .collect(),
            gpus: pod.gpus,
            size_hint: pod.size_hint,
            pod_group: pod.pod_group,
            owner: pod.owner,
            created_ms: pod.created_ms,
            priority: pod.priority,
            runtime_limit_ms: pod.runtime_limit_ms,
            started_ms: pod.started_ms,
        }),
        wit::Delta::RemovePod(k) => p::Delta::RemovePod(*k),
        wit::Delta::UpsertClaim(c) => p::Delta::UpsertClaim(p::ClaimFact {
            namespace: c.namespace,
            name: c.name,
            domain: c.domain,
            daemon: c.daemon,
            gpus: demand(&c.gpus),
            allocated_gpus: c.allocated_gpus,
        }),
        wit::Delta::RemoveClaim((ns, n)) => p::Delta::RemoveClaim(*ns, *n),
        wit::Delta::UpsertTemplate(t) => p::Delta::UpsertTemplate(p::TemplateFact {
            namespace: t.namespace,
            name: t.name,
            domain: t.domain,
            daemon: t.daemon,
            gpus: demand(&t.gpus),
        }),
        wit::Delta::RemoveTemplate((ns, n)) => p::Delta::RemoveTemplate(*ns, *n),
        wit::Delta::UpsertDomain(d) => p::Delta::UpsertDomain(p::DomainFact {
            uid: d.uid,
            namespace: d.namespace,
            name: d.name,
            size_hint: d.size_hint,
            num_nodes: d.num_nodes,
        }),
        wit::Delta::RemoveDomain(u) => p::Delta::RemoveDomain(*u),
        wit::Delta::UpsertOwner(o) => {
            p::Delta::UpsertOwner(p::OwnerFact { key: o.key, size: o.size, source: o.source, priority: o.priority })
        }
        wit::Delta::RemoveOwner(k) => p::Delta::RemoveOwner(*k),
        wit::Delta::Reset => p::Delta::Reset,
    }
}
