//! Maps `cdplace-policy` types to and from the types `bindgen!` generates.

use cdplace_policy as p;

use crate::Error;
use crate::bindings::{OverlayOp, PolicyError, wfacts as f, wfleet as l, wverdicts as v};

pub(crate) fn policy_error(e: PolicyError) -> Error {
    match e {
        PolicyError::InvalidArgs(m) => Error::InvalidArgs(m),
        PolicyError::InvalidInput(m) => Error::InvalidInput(m),
    }
}

fn demand(g: p::GpuDemand) -> f::GpuDemand {
    f::GpuDemand { count: g.count, all: g.all }
}

pub(crate) fn delta(d: &p::Delta) -> f::Delta {
    match d {
        p::Delta::Strings(s) => f::Delta::Strings(s.clone()),
        p::Delta::UpsertNode(n) => f::Delta::UpsertNode(f::NodeFact {
            name: n.name,
            clique_label: n.clique_label,
            unschedulable: n.unschedulable,
            gpus: n.gpus,
            domain_label: n.domain_label,
        }),
        p::Delta::RemoveNode(n) => f::Delta::RemoveNode(*n),
        p::Delta::UpsertPod(pod) => f::Delta::UpsertPod(f::PodFact {
            key: pod.key,
            namespace: pod.namespace,
            placement: match pod.placement {
                p::Placement::Pending => f::Placement::Pending,
                p::Placement::Nominated => f::Placement::Nominated,
                p::Placement::Assumed => f::Placement::Assumed,
                p::Placement::Bound => f::Placement::Bound,
            },
            node: pod.node,
            claims: pod
                .claims
                .iter()
                .map(|c| f::ClaimRef { name: c.name, template: c.template, claim: c.claim, generated: c.generated })
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
        p::Delta::RemovePod(k) => f::Delta::RemovePod(*k),
        p::Delta::UpsertClaim(c) => f::Delta::UpsertClaim(f::ClaimFact {
            namespace: c.namespace,
            name: c.name,
            domain: c.domain,
            daemon: c.daemon,
            gpus: demand(c.gpus),
            allocated_gpus: c.allocated_gpus,
        }),
        p::Delta::RemoveClaim(ns, n) => f::Delta::RemoveClaim((*ns, *n)),
        p::Delta::UpsertTemplate(t) => f::Delta::UpsertTemplate(f::TemplateFact {
            namespace: t.namespace,
            name: t.name,
            domain: t.domain,
            daemon: t.daemon,
            gpus: demand(t.gpus),
        }),
        p::Delta::RemoveTemplate(ns, n) => f::Delta::RemoveTemplate((*ns, *n)),
        p::Delta::UpsertDomain(d) => f::Delta::UpsertDomain(f::DomainFact {
            uid: d.uid,
            namespace: d.namespace,
            name: d.name,
            size_hint: d.size_hint,
            num_nodes: d.num_nodes,
        }),
        p::Delta::RemoveDomain(u) => f::Delta::RemoveDomain(*u),
        p::Delta::UpsertOwner(o) => {
            f::Delta::UpsertOwner(f::OwnerFact { key: o.key, size: o.size, source: o.source, priority: o.priority })
        }
        p::Delta::RemoveOwner(k) => f::Delta::RemoveOwner(*k),
        p::Delta::Reset => f::Delta::Reset,
    }
}

pub(crate) fn overlay(o: &p::OverlayOp) -> OverlayOp {
    match *o {
        p::OverlayOp::RemovePod(k) => OverlayOp::RemovePod(k),
        p::OverlayOp::AddPod(k, n) => OverlayOp::AddPod((k, n)),
    }
}

fn verdict(x: v::Verdict) -> p::Verdict {
    let code = match x.code {
        v::Code::Success => p::Code::Success,
        v::Code::Skip => p::Code::Skip,
        v::Code::Unschedulable => p::Code::Unschedulable,
        v::Code::UnschedulableAndUnresolvable => p::Code::UnschedulableAndUnresolvable,
        v::Code::Error => p::Code::Error,
    };
    p::Verdict { code, reason: x.reason }
}

pub(crate) fn preemption(r: v::Preemption) -> p::Preemption {
    p::Preemption {
        domain: r.domain,
        plan: r.plan.map(|x| p::Plan {
            clique: x.clique,
            node: x.node,
            pods: x.pods,
            domains: x.domains,
            gpus: x.gpus,
            priority: x.priority,
            trays: x.trays,
        }),
        reason: r.reason,
    }
}

pub(crate) fn fleet(s: l::FleetStatus) -> p::FleetStatus {
    p::FleetStatus {
        cliques: s
            .cliques
            .into_iter()
            .map(|c| p::CliqueStatus {
                clique: c.clique,
                usable: c.usable,
                free: c.free,
                promised: c.promised,
                reserved_for: c.reserved_for,
            })
            .collect(),
        domains: s
            .domains
            .into_iter()
            .map(|d| p::DomainStatus {
                uid: d.uid,
                namespace: d.namespace,
                name: d.name,
                phase: match d.phase {
                    l::DomainPhase::Idle => p::DomainPhase::Idle,
                    l::DomainPhase::Pending => p::DomainPhase::Pending,
                    l::DomainPhase::Starting => p::DomainPhase::Starting,
                    l::DomainPhase::Running => p::DomainPhase::Running,
                },
                pending: d.pending.map(|r| match r {
                    l::PendingReason::NoComputeDomain => p::PendingReason::NoComputeDomain,
                    l::PendingReason::SizeUnknown => p::PendingReason::SizeUnknown,
                    l::PendingReason::Settling => p::PendingReason::Settling,
                    l::PendingReason::NoCliqueFits => p::PendingReason::NoCliqueFits,
                    l::PendingReason::WaitingForTrays => p::PendingReason::WaitingForTrays,
                    l::PendingReason::ReservedElsewhere => p::PendingReason::ReservedElsewhere,
                    l::PendingReason::HoldsReservation => p::PendingReason::HoldsReservation,
                    l::PendingReason::VictimsLeaving => p::PendingReason::VictimsLeaving,
                    l::PendingReason::Placeable => p::PendingReason::Placeable,
                    l::PendingReason::Unresolvable => p::PendingReason::Unresolvable,
                }),
                size: d.size,
                placed: d.placed,
                needed: d.needed,
                clique: d.clique,
                offer: d.offer,
                note: d.note,
            })
            .collect(),
        largest_placeable: s.largest_placeable,
        reserved_trays: s.reserved_trays,
    }
}

pub(crate) fn result(r: v::PreFilterResult) -> p::PreFilterResult {
    p::PreFilterResult {
        status: verdict(r.status),
        domain: r.domain,
        reasons: r.reasons,
        exclusive: r.exclusive,
        cliques: r
            .cliques
            .into_iter()
            .map(|c| p::CliqueVerdict {
                clique: c.clique,
                verdict: verdict(c.verdict),
                score: c.score,
                stable: c.stable,
            })
            .collect(),
        other: verdict(r.other),
        other_score: r.other_score,
        nodes: r.nodes.into_iter().map(|n| p::NodeVerdict { node: n.node, verdict: verdict(n.verdict) }).collect(),
    }
}
