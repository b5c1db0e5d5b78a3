//! The component glue: the only module that knows about wit-bindgen. [`export_policy!`] turns
//! a type implementing [`Policy`] + [`Default`] into the exports of the world `policy`; this
//! module maps the WIT types to and from `cdplace-policy`'s and keeps one policy per instance.
//! It also brings the runtime a `no_std` component needs (`rt`: allocator, panic handler that
//! traps, `cabi_realloc`, `memcmp`), so the component imports nothing.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use cdplace_policy as policy;

use crate::Policy;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "policy",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "__export_bindings",
        default_bindings_module: "cdplace_policy_sdk::component::bindings",
    });
}

use bindings::OverlayOp;
pub use bindings::Settings;
pub use bindings::cdplace::policy::errors::PolicyError;
use bindings::cdplace::policy::facts as wf;
use bindings::cdplace::policy::fleet as wl;
use bindings::cdplace::policy::verdicts as wv;

#[path = "rt.rs"]
mod rt;

/// Exports the world `policy` for `$ty`, a type implementing [`Policy`] and [`Default`]: one
/// instance of it per component instance, made on the first call. Use it once, in the crate
/// that builds the component (`crate-type = ["cdylib"]`, target `wasm32-wasip2`).
#[macro_export]
macro_rules! export_policy {
    ($ty:ty) => {
        #[doc(hidden)]
        struct __CdplacePolicyExports;

        impl $crate::component::bindings::Guest for __CdplacePolicyExports {
            fn configure(args: $crate::component::__String) -> ::core::result::Result<$crate::component::Settings, $crate::component::PolicyError> {
                $crate::component::configure::<$ty>(args)
            }
            fn apply(deltas: $crate::component::__Vec<$crate::component::bindings::cdplace::policy::facts::Delta>) -> ::core::result::Result<(), $crate::component::PolicyError> {
                $crate::component::apply::<$ty>(deltas)
            }
            fn pre_filter(pod: u32, overlay: $crate::component::__Vec<$crate::component::bindings::OverlayOp>, now_ms: i64) -> $crate::component::bindings::cdplace::policy::verdicts::PreFilterResult {
                $crate::component::pre_filter::<$ty>(pod, overlay, now_ms)
            }
            fn steer(gpus: bool, now_ms: i64) -> $crate::component::bindings::cdplace::policy::verdicts::PreFilterResult {
                $crate::component::steer::<$ty>(gpus, now_ms)
            }
            fn preempt(pod: u32, now_ms: i64) -> $crate::component::bindings::cdplace::policy::verdicts::Preemption {
                $crate::component::preempt::<$ty>(pod, now_ms)
            }
            fn status(now_ms: i64) -> $crate::component::bindings::cdplace::policy::fleet::FleetStatus {
                $crate::component::status::<$ty>(now_ms)
            }
        }

        $crate::component::bindings::__export_bindings!(__CdplacePolicyExports with_types_in $crate::component::bindings);
    };
}

#[doc(hidden)]
pub type __String = String;
#[doc(hidden)]
pub type __Vec<T> = Vec<T>;

/// The instance's policy; wasm instances are single-threaded.
struct Global(RefCell<Option<Box<dyn Policy>>>);
// SAFETY: a wasm32 component instance has exactly one thread.
unsafe impl Sync for Global {}
static POLICY: Global = Global(RefCell::new(None));

fn with<P: Policy + Default + 'static, T>(f: impl FnOnce(&mut dyn Policy) -> T) -> T {
    let mut slot = POLICY.0.borrow_mut();
    f(slot.get_or_insert_with(|| Box::new(P::default())).as_mut())
}

fn error(e: policy::Error) -> PolicyError {
    match e {
        policy::Error::InvalidArgs(m) => PolicyError::InvalidArgs(m),
        policy::Error::InvalidInput(m) => PolicyError::InvalidInput(m),
    }
}

#[doc(hidden)]
pub fn configure<P: Policy + Default + 'static>(args: String) -> Result<Settings, PolicyError> {
    let args = with::<P, _>(|p| p.configure(&args)).map_err(error)?;
    Ok(Settings {
        clique_label: args.clique_label.clone(),
        gpu_resource_name: args.gpu_resource_name.clone(),
        gpu_driver: args.gpu_driver.clone(),
        compute_domain_driver: args.compute_domain_driver.clone(),
        size_annotation: args.size_annotation.clone(),
        guest_path: args.guest_path.clone(),
        call_timeout_ms: args.call_timeout_ms(),
        memory_limit_mib: args.guest_memory_limit_mib,
        plain_pod_steering: args.plain_pod_steering,
        max_policy_instances: args.max_policy_instances,
    })
}

#[doc(hidden)]
pub fn apply<P: Policy + Default + 'static>(deltas: Vec<wf::Delta>) -> Result<(), PolicyError> {
    with::<P, _>(|p| p.apply(deltas.into_iter().map(delta).collect())).map_err(error)
}

#[doc(hidden)]
pub fn pre_filter<P: Policy + Default + 'static>(
    pod: u32,
    overlay: Vec<OverlayOp>,
    now_ms: i64,
) -> wv::PreFilterResult {
    let overlay: Vec<policy::OverlayOp> = overlay
        .into_iter()
        .map(|o| match o {
            OverlayOp::RemovePod(k) => policy::OverlayOp::RemovePod(k),
            OverlayOp::AddPod((k, n)) => policy::OverlayOp::AddPod(k, n),
        })
        .collect();
    result(with::<P, _>(|p| p.pre_filter(pod, &overlay, now_ms)))
}

#[doc(hidden)]
pub fn steer<P: Policy + Default + 'static>(gpus: bool, now_ms: i64) -> wv::PreFilterResult {
    result(with::<P, _>(|p| p.steer(gpus, now_ms)))
}

#[doc(hidden)]
pub fn preempt<P: Policy + Default + 'static>(pod: u32, now_ms: i64) -> wv::Preemption {
    let r = with::<P, _>(|p| p.preempt(pod, now_ms));
    wv::Preemption {
        domain: r.domain,
        plan: r.plan.map(|p| wv::PreemptionPlan {
            clique: p.clique,
            node: p.node,
            pods: p.pods,
            domains: p.domains,
            gpus: p.gpus,
            priority: p.priority,
            trays: p.trays,
        }),
        reason: r.reason,
    }
}

#[doc(hidden)]
pub fn status<P: Policy + Default + 'static>(now_ms: i64) -> wl::FleetStatus {
    fleet(with::<P, _>(|p| p.status(now_ms)))
}

fn fleet(s: policy::FleetStatus) -> wl::FleetStatus {
    wl::FleetStatus {
        cliques: s
            .cliques
            .into_iter()
            .map(|c| wl::CliqueStatus {
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
            .map(|d| wl::DomainStatus {
                uid: d.uid,
                namespace: d.namespace,
                name: d.name,
                phase: match d.phase {
                    policy::DomainPhase::Idle => wl::DomainPhase::Idle,
                    policy::DomainPhase::Pending => wl::DomainPhase::Pending,
                    policy::DomainPhase::Starting => wl::DomainPhase::Starting,
                    policy::DomainPhase::Running => wl::DomainPhase::Running,
                },
                pending: d.pending.map(pending_reason),
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

fn pending_reason(r: policy::PendingReason) -> wl::PendingReason {
    use policy::PendingReason as P;
    match r {
        P::NoComputeDomain => wl::PendingReason::NoComputeDomain,
        P::SizeUnknown => wl::PendingReason::SizeUnknown,
        P::Settling => wl::PendingReason::Settling,
        P::NoCliqueFits => wl::PendingReason::NoCliqueFits,
        P::WaitingForTrays => wl::PendingReason::WaitingForTrays,
        P::ReservedElsewhere => wl::PendingReason::ReservedElsewhere,
        P::HoldsReservation => wl::PendingReason::HoldsReservation,
        P::VictimsLeaving => wl::PendingReason::VictimsLeaving,
        P::Placeable => wl::PendingReason::Placeable,
        P::Unresolvable => wl::PendingReason::Unresolvable,
    }
}

fn result(r: policy::PreFilterResult) -> wv::PreFilterResult {
    wv::PreFilterResult {
        status: verdict(r.status),
        domain: r.domain,
        reasons: r.reasons,
        exclusive: r.exclusive,
        cliques: r
            .cliques
            .into_iter()
            .map(|c| wv::CliqueVerdict {
                clique: c.clique,
                verdict: verdict(c.verdict),
                score: c.score,
                stable: c.stable,
            })
            .collect(),
        other: verdict(r.other),
        other_score: r.other_score,
        nodes: r.nodes.into_iter().map(|n| wv::NodeVerdict { node: n.node, verdict: verdict(n.verdict) }).collect(),
    }
}

fn verdict(v: policy::Verdict) -> wv::Verdict {
    let code = match v.code {
        policy::Code::Success => wv::Code::Success,
        policy::Code::Skip => wv::Code::Skip,
        policy::Code::Unschedulable => wv::Code::Unschedulable,
        policy::Code::UnschedulableAndUnresolvable => wv::Code::UnschedulableAndUnresolvable,
        policy::Code::Error => wv::Code::Error,
    };
    wv::Verdict { code, reason: v.reason }
}

fn demand(g: wf::GpuDemand) -> policy::GpuDemand {
    policy::GpuDemand { count: g.count, all: g.all }
}

fn delta(d: wf::Delta) -> policy::Delta {
    use policy::Delta as D;
    match d {
        wf::Delta::Strings(s) => D::Strings(s),
        wf::Delta::UpsertNode(n) => D::UpsertNode(policy::NodeFact {
            name: n.name,
            clique_label: n.clique_label,
            unschedulable: n.unschedulable,
            gpus: n.gpus,
            domain_label: n.domain_label,
        }),
        wf::Delta::RemoveNode(n) => D::RemoveNode(n),
        wf::Delta::UpsertPod(p) => D::UpsertPod(policy::PodFact {
            key: p.key,
            namespace: p.namespace,
            placement: match p.placement {
                wf::Placement::Pending => policy::Placement::Pending,
                wf::Placement::Nominated => policy::Placement::Nominated,
                wf::Placement::Assumed => policy::Placement::Assumed,
                wf::Placement::Bound => policy::Placement::Bound,
            },
            node: p.node,
            claims: p
                .claims
                .into_iter()
                .map(|c| policy::ClaimRef {
                    name: c.name,
                    template: c.template,
                    claim: c.claim,
                    generated: c.generated,
                })
                .collect(),
            gpus: p.gpus,
            size_hint: p.size_hint,
            pod_group: p.pod_group,
            owner: p.owner,
            created_ms: p.created_ms,
            priority: p.priority,
            runtime_limit_ms: p.runtime_limit_ms,
            started_ms: p.started_ms,
        }),
        wf::Delta::RemovePod(k) => D::RemovePod(k),
        wf::Delta::UpsertClaim(c) => D::UpsertClaim(policy::ClaimFact {
            namespace: c.namespace,
            name: c.name,
            domain: c.domain,
            daemon: c.daemon,
            gpus: demand(c.gpus),
            allocated_gpus: c.allocated_gpus,
        }),
        wf::Delta::RemoveClaim((ns, n)) => D::RemoveClaim(ns, n),
        wf::Delta::UpsertTemplate(t) => D::UpsertTemplate(policy::TemplateFact {
            namespace: t.namespace,
            name: t.name,
            domain: t.domain,
            daemon: t.daemon,
            gpus: demand(t.gpus),
        }),
        wf::Delta::RemoveTemplate((ns, n)) => D::RemoveTemplate(ns, n),
        wf::Delta::UpsertDomain(d) => D::UpsertDomain(policy::DomainFact {
            uid: d.uid,
            namespace: d.namespace,
            name: d.name,
            size_hint: d.size_hint,
            num_nodes: d.num_nodes,
        }),
        wf::Delta::RemoveDomain(u) => D::RemoveDomain(u),
        wf::Delta::UpsertOwner(o) => {
            D::UpsertOwner(policy::OwnerFact { key: o.key, size: o.size, source: o.source, priority: o.priority })
        }
        wf::Delta::RemoveOwner(k) => D::RemoveOwner(k),
        wf::Delta::Reset => D::Reset,
    }
}
