//! Facts about the cluster as the host extracts them from Kubernetes objects.
//!
//! These mirror the `facts` interface of `wit/cdplace.wit` one to one; the component layer maps
//! between the two. Strings are interned by the host: a [`StrId`] names one string of the
//! guest's string table, filled by [`Delta::Strings`].

use alloc::string::String;
use alloc::vec::Vec;

/// An interned string.
pub type StrId = u32;

/// GPUs a claim or template asks for on the GPU driver's device class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpuDemand {
    /// Devices asked for with `allocationMode: ExactCount`, summed over requests.
    pub count: u32,
    /// Some request has `allocationMode: All`: every GPU of the node.
    pub all: bool,
}

impl GpuDemand {
    /// Adds another demand to this one.
    pub fn add(&mut self, other: GpuDemand) {
        self.count = self.count.saturating_add(other.count);
        self.all |= other.all;
    }
}

/// A Node: one compute tray.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFact {
    pub name: StrId,
    /// Raw value of the clique label, when present.
    pub clique_label: Option<StrId>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// GPUs of the tray.
    pub gpus: u32,
    /// Raw value of the node label `resource.nvidia.com/computeDomain`.
    pub domain_label: Option<StrId>,
}

/// Where a pod stands with respect to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placement {
    Pending,
    Nominated,
    Assumed,
    Bound,
}

/// One entry of `pod.spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    pub name: StrId,
    pub template: Option<StrId>,
    pub claim: Option<StrId>,
    /// The generated claim's name from `status.resourceClaimStatuses`.
    pub generated: Option<StrId>,
}

/// A non-terminal Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFact {
    /// `namespace/name`.
    pub key: StrId,
    pub namespace: StrId,
    pub placement: Placement,
    /// The node of a nominated, assumed or bound pod.
    pub node: Option<StrId>,
    pub claims: Vec<ClaimRef>,
    /// GPUs requested through the extended resource.
    pub gpus: u32,
    /// The pod's own size annotation (an explicit override).
    pub size_hint: Option<u32>,
    /// Owner key of the PodGroup the pod names (`PodGroup/<ns>/<name>`).
    pub pod_group: Option<StrId>,
    /// Owner key of the pod's top-level controller (`Job/<ns>/<name>`, `JobSet/...`, ...).
    pub owner: Option<StrId>,
    /// `metadata.creationTimestamp`, Unix milliseconds (0 when unknown).
    pub created_ms: i64,
    /// `spec.priority`.
    pub priority: i32,
    /// How long after it started the pod is gone at the latest: `spec.activeDeadlineSeconds`
    /// plus its termination grace period, in milliseconds (none without a deadline).
    pub runtime_limit_ms: Option<i64>,
    /// `status.startTime`, Unix milliseconds (0 before the kubelet started it, and always 0
    /// without `runtime_limit_ms`: the start is read only to know when the pod ends).
    pub started_ms: i64,
}

/// A ResourceClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFact {
    pub namespace: StrId,
    pub name: StrId,
    /// `domainID` of its opaque ComputeDomain config.
    pub domain: Option<StrId>,
    /// The config is a `ComputeDomainDaemonConfig`.
    pub daemon: bool,
    pub gpus: GpuDemand,
    /// GPU devices in `status.allocation`, once allocated.
    pub allocated_gpus: Option<u32>,
}

/// A ResourceClaimTemplate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateFact {
    pub namespace: StrId,
    pub name: StrId,
    /// The ComputeDomain label, or else the `domainID` of its opaque config.
    pub domain: Option<StrId>,
    /// A template for IMEX daemon claims.
    pub daemon: bool,
    pub gpus: GpuDemand,
}

/// A ComputeDomain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainFact {
    /// `metadata.uid`.
    pub uid: StrId,
    pub namespace: StrId,
    pub name: StrId,
    /// The size annotation on the ComputeDomain (an explicit override).
    pub size_hint: Option<u32>,
    /// `spec.numNodes` when positive.
    pub num_nodes: Option<u32>,
}

/// How many pods a workload object will have (PodGroup `minCount`, Job parallelism, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerFact {
    /// `<Kind>/<namespace>/<name>`.
    pub key: StrId,
    pub size: u32,
    /// Where the size was read (`Job training/trainer spec.parallelism`).
    pub source: StrId,
    /// A PodGroup's `spec.priority`.
    pub priority: Option<i32>,
}

/// One change to the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    Strings(Vec<(StrId, String)>),
    UpsertNode(NodeFact),
    RemoveNode(StrId),
    UpsertPod(PodFact),
    RemovePod(StrId),
    UpsertClaim(ClaimFact),
    RemoveClaim(StrId, StrId),
    UpsertTemplate(TemplateFact),
    RemoveTemplate(StrId, StrId),
    UpsertDomain(DomainFact),
    RemoveDomain(StrId),
    UpsertOwner(OwnerFact),
    RemoveOwner(StrId),
    Reset,
}

/// A hypothetical change for one PreFilter evaluation (preemption's AddPod/RemovePod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverlayOp {
    RemovePod(StrId),
    /// `(pod key, node name)`: treat the pod as nominated to the node.
    AddPod(StrId, StrId),
}
