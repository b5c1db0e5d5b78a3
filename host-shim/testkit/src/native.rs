//! The policy compiled natively, as a second [`Backend`] of the host: the same `cdplace-policy`
//! code the component runs, called directly, for parity tests and the benchmark. Never in
//! production (the scheduler links only the component's backend).

use std::sync::Arc;

use cdplace_host::evaluator::wit;
use cdplace_host::{Backend, Error, Evaluator, Limits, Result, Settings};
use cdplace_policy as p;

/// The native backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Native;

/// The native backend as a cluster takes it.
pub fn backend() -> Arc<dyn Backend> {
    Arc::new(Native)
}

impl Backend for Native {
    /// Native calls run without limits.
    fn evaluator(self: Arc<Self>, _limits: Limits) -> Result<Box<dyn Evaluator>> {
        Ok(Box::new(NativeEvaluator(Box::default())))
    }
}

/// One native policy view.
#[derive(Debug)]
pub struct NativeEvaluator(Box<p::View>);

fn error(e: p::Error) -> Error {
    match e {
        p::Error::InvalidArgs(m) => Error::InvalidArgs(m),
        p::Error::InvalidInput(m) => Error::InvalidInput(m),
    }
}

impl Evaluator for NativeEvaluator {
    fn configure(&mut self, args: &str) -> Result<Settings> {
        let a = p::Args::parse(args).map_err(error)?;
        let settings = Settings::from(&a);
        self.0.set_args(a);
        Ok(settings)
    }

    fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()> {
        self.0.apply(deltas.iter().map(delta)).map_err(error)
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

fn demand(g: &wit::GpuDemand) -> p::GpuDemand {
    p::GpuDemand { count: g.count, all: g.all }
}

/// A journaled delta back in the policy's shape.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every delta survives policy -> WIT (the host's conversion) -> policy (this one).
    #[test]
    fn deltas_round_trip_through_the_wit_shape() {
        let pod = p::PodFact {
            key: 1,
            namespace: 2,
            placement: p::Placement::Assumed,
            node: Some(3),
            claims: vec![p::ClaimRef { name: 4, template: Some(5), claim: None, generated: Some(6) }],
            gpus: 4,
            size_hint: Some(8),
            pod_group: Some(7),
            owner: None,
            created_ms: -3,
            priority: 9,
            runtime_limit_ms: Some(i64::MAX),
            started_ms: -5,
        };
        let all = vec![
            p::Delta::Reset,
            p::Delta::Strings(vec![(0, "a".into()), (1, "b".into())]),
            p::Delta::UpsertNode(p::NodeFact {
                name: 0,
                clique_label: Some(1),
                unschedulable: true,
                gpus: 4,
                domain_label: None,
            }),
            p::Delta::RemoveNode(0),
            p::Delta::UpsertPod(pod),
            p::Delta::RemovePod(1),
            p::Delta::UpsertClaim(p::ClaimFact {
                namespace: 2,
                name: 3,
                domain: Some(4),
                daemon: true,
                gpus: p::GpuDemand { count: 2, all: false },
                allocated_gpus: Some(2),
            }),
            p::Delta::RemoveClaim(2, 3),
            p::Delta::UpsertTemplate(p::TemplateFact {
                namespace: 2,
                name: 5,
                domain: None,
                daemon: false,
                gpus: p::GpuDemand { count: 0, all: true },
            }),
            p::Delta::RemoveTemplate(2, 5),
            p::Delta::UpsertDomain(p::DomainFact {
                uid: 6,
                namespace: 2,
                name: 7,
                size_hint: None,
                num_nodes: Some(3),
            }),
            p::Delta::RemoveDomain(6),
            p::Delta::UpsertOwner(p::OwnerFact { key: 8, size: 12, source: 9, priority: Some(-1) }),
            p::Delta::RemoveOwner(8),
        ];
        for d in &all {
            assert_eq!(&delta(&wit::from_policy(d)), d);
        }
    }
}
