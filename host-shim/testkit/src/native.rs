//! The policy compiled natively, as a second [`cdplace_host::Backend`] of the host: the same
//! `cdplace-policy` code the component runs, called directly, for parity tests and the
//! benchmark. Never in production (the scheduler links only the component's backend). The
//! backend is the SDK harness's, for the shipped [`cdplace_policy::View`].

use std::sync::Arc;

use cdplace_host::Backend;
#[cfg(test)]
use cdplace_host::wit;
#[cfg(test)]
use cdplace_policy as p;
pub use cdplace_policy_sdk::harness::{NativeEvaluator, delta};

/// The shipped policy compiled natively, as a cluster takes a backend.
pub fn backend() -> Arc<dyn Backend> {
    cdplace_policy_sdk::harness::native::<cdplace_policy::View>()
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
