//! The view's records of trays and cliques: what a clique label says, a node's entry and what it
//! adds to its clique, and the clique's aggregates. Plain data: `nodes` keeps them up to date as
//! facts change, and every decision reads them.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::vec::Vec;

use crate::facts::*;

/// What a clique label value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelKind {
    /// `<clusterUUID>.<cliqueID>` with both parts present.
    Clique,
    /// The label is absent or its clique ID is empty: a node without NVLink fabric.
    NoFabric,
    /// Anything else.
    Malformed,
}

/// What a clique label value says (the host's safety checker reads labels the same way).
pub fn label_kind(v: &str) -> LabelKind {
    if v.is_empty() {
        return LabelKind::NoFabric;
    }
    match v.rsplit_once('.') {
        Some((_, "")) => LabelKind::NoFabric,
        Some((cluster, id))
            if !cluster.is_empty()
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && cluster.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') =>
        {
            LabelKind::Clique
        }
        _ => LabelKind::Malformed,
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct NodeEntry {
    pub fact: Option<NodeFact>,
    /// Keys of pods nominated, assumed or bound here.
    pub pods: BTreeSet<StrId>,
    pub summary: NodeSummary,
}

/// What one node adds to its clique's aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeSummary {
    /// The node's clique, when its label is a valid clique.
    pub clique: Option<StrId>,
    /// In a clique and not cordoned.
    pub usable: bool,
    pub gpus: u32,
    /// No GPU in use by any pod.
    pub gpu_idle: bool,
    /// ComputeDomains holding the node: its label and every pod of a domain placed here.
    pub holders: Vec<StrId>,
    /// ComputeDomains with a workload pod here.
    pub workload: Vec<StrId>,
    /// ComputeDomains with any pod (workload or IMEX daemon) here; the rest of `holders` hold
    /// the node only through its label.
    pub pod_holders: Vec<StrId>,
    /// The label is malformed.
    pub malformed: bool,
}

impl NodeSummary {
    /// Free for any ComputeDomain under driver-managed IMEX.
    pub fn free(&self) -> bool {
        self.usable && self.gpu_idle && self.holders.is_empty()
    }
}

/// Per-clique aggregates.
#[derive(Debug, Clone, Default)]
pub(crate) struct Clique {
    pub nodes: BTreeSet<StrId>,
    pub usable: u32,
    /// Usable trays by GPU count.
    pub sizes: BTreeMap<u32, u32>,
    /// Free trays (usable, no GPU in use, no holder) by GPU count.
    pub free: BTreeMap<u32, u32>,
    /// Trays with no GPU in use by GPU count (capacity under host-managed IMEX).
    pub idle: BTreeMap<u32, u32>,
    /// Idle trays held by exactly one domain that has no workload pod there: `(domain, gpus)`.
    pub held_idle: BTreeMap<(StrId, u32), u32>,
    /// Idle trays with a workload pod of a domain: `(domain, gpus)`.
    pub idle_with_workload: BTreeMap<(StrId, u32), u32>,
    /// Nodes that are not free, with their summary, so per-node verdicts need no lookups.
    pub busy: BTreeMap<StrId, NodeSummary>,
    /// Trays promised to domains that started here and are still placing pods.
    pub promised: u32,
}
