//! Per-node verdicts of PreFilter: the nodes of an allowed clique that are not free for a
//! ComputeDomain pod (cordoned, held by another domain or by the driver's label, GPUs in use, the
//! wrong tray size), malformed clique labels, whole-tray stranding, and the reason texts they
//! share. `decide` chooses the cliques; this says why a node inside one is still refused.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::args::ImexMode;
use crate::facts::StrId;
use crate::trays::Clique;
use crate::verdict::{Code, NodeVerdict, Verdict};
use crate::view::View;

/// What a ComputeDomain pod asks of a tray.
#[derive(Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) domain: StrId,
    /// Only trays with exactly this many GPUs (whole-tray `Require`).
    pub(crate) tray_size: Option<u32>,
    /// GPUs asked for under whole-tray `Prefer` (scores scaled by the share of the tray).
    pub(crate) prefer_gpus: Option<u32>,
}

/// Collects reason texts, each once. Per-node reasons are shared by every node with the same
/// cause (kind and subject), so one call formats a handful of texts, not one per node; this also
/// keeps the scheduler's "0/N nodes are available" summary short.
pub(crate) struct Reasons {
    pub(crate) texts: Vec<String>,
    index: BTreeMap<String, u32>,
    by_cause: BTreeMap<(Cause, StrId), Verdict>,
}

/// Why a node of an allowed clique is rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Cause {
    Cordoned,
    SameDomain,
    HeldByPod,
    HeldByLabel,
    GpusInUse,
    TraySize,
}

impl Reasons {
    pub(crate) fn new() -> Self {
        Reasons { texts: vec![String::new()], index: BTreeMap::new(), by_cause: BTreeMap::new() }
    }

    /// The verdict for a cause, formatting its text only the first time.
    pub(crate) fn cause(&mut self, cause: Cause, subject: StrId, code: Code, text: impl FnOnce() -> String) -> Verdict {
        if let Some(&v) = self.by_cause.get(&(cause, subject)) {
            return v;
        }
        let v = self.verdict(code, text());
        self.by_cause.insert((cause, subject), v);
        v
    }

    pub(crate) fn verdict(&mut self, code: Code, text: String) -> Verdict {
        if let Some(&i) = self.index.get(&text) {
            return Verdict { code, reason: i };
        }
        let i = self.texts.len() as u32;
        self.index.insert(text.clone(), i);
        self.texts.push(text);
        Verdict { code, reason: i }
    }
}

impl View {
    /// Scales a score down by the share of the tray a `Prefer` pod takes.
    pub(crate) fn scale(&self, score: u32, ask: Ask, clique: Option<&Clique>) -> u32 {
        let (Some(g), Some(c)) = (ask.prefer_gpus, clique) else { return score };
        let tray = c.sizes.iter().max_by_key(|(_, n)| **n).map_or(0, |(s, _)| *s);
        if tray == 0 || g >= tray {
            return score;
        }
        (score * g / tray).max(1)
    }

    /// The rejection of a pod that would not take whole trays under `wholeTray: Require`.
    pub(crate) fn stranding(&self, asked: u32, r: &mut Reasons) -> Verdict {
        let Some((&tray, _)) = self.tray_sizes.iter().max_by_key(|(_, n)| **n) else {
            return r.verdict(
                Code::UnschedulableAndUnresolvable,
                format!(
                    "no schedulable node has an NVLink clique (label {}): there is no tray for a ComputeDomain pod",
                    self.args.clique_label
                ),
            );
        };
        let text = if asked < tray {
            format!(
                "requests {asked} of {tray} GPUs per tray; would strand {} (wholeTray: Require: a ComputeDomain pod takes all GPUs of its tray)",
                tray - asked
            )
        } else {
            format!(
                "requests {asked} GPUs but trays have {tray} (wholeTray: Require: a ComputeDomain pod takes all GPUs of one tray)"
            )
        };
        r.verdict(Code::UnschedulableAndUnresolvable, text)
    }

    /// Verdicts for the nodes of an allowed clique that are not free for `ask`.
    pub(crate) fn node_overrides(&self, c: &Clique, ask: Ask, cd: &str, r: &mut Reasons, out: &mut Vec<NodeVerdict>) {
        if ask.tray_size.is_some() && c.sizes.len() > 1 {
            // Trays of several sizes in one clique (not seen on NVL72): look at every node.
            for &n in &c.nodes {
                if let Some(s) = self.nodes.get(&n).map(|e| &e.summary)
                    && let Some(v) = self.node_verdict(s, ask, cd, r)
                {
                    out.push(NodeVerdict { node: n, verdict: v });
                }
            }
            return;
        }
        for (&n, s) in &c.busy {
            if let Some(v) = self.node_verdict(s, ask, cd, r) {
                out.push(NodeVerdict { node: n, verdict: v });
            }
        }
    }

    fn node_verdict(&self, s: &crate::trays::NodeSummary, ask: Ask, cd: &str, r: &mut Reasons) -> Option<Verdict> {
        if !s.usable {
            return Some(r.cause(Cause::Cordoned, 0, Code::UnschedulableAndUnresolvable, || {
                String::from("node is cordoned (spec.unschedulable)")
            }));
        }
        if s.workload.contains(&ask.domain) {
            return Some(r.cause(Cause::SameDomain, ask.domain, Code::Unschedulable, || {
                format!(
                    "node already runs a pod of ComputeDomain {cd}; a domain has one workload pod per node (channel 0 is exclusive)"
                )
            }));
        }
        if self.args.imex_mode == ImexMode::DriverManaged
            && let Some(&other) = s.holders.iter().find(|&&h| h != ask.domain)
        {
            return Some(if s.pod_holders.contains(&other) {
                r.cause(Cause::HeldByPod, other, Code::Unschedulable, || {
                    format!(
                        "node is held by ComputeDomain {}, which has a pod placed here; one ComputeDomain per node (driver-managed IMEX)",
                        self.domain_name(other)
                    )
                })
            } else {
                r.cause(Cause::HeldByLabel, other, Code::Unschedulable, || {
                    format!(
                        "node still carries resource.nvidia.com/computeDomain={} (ComputeDomain {}) until the driver unprepares its claim; one ComputeDomain per node (driver-managed IMEX)",
                        self.str(other),
                        self.domain_name(other)
                    )
                })
            });
        }
        if !s.gpu_idle {
            return Some(r.cause(Cause::GpusInUse, 0, Code::Unschedulable, || {
                String::from("node has GPUs in use by other pods; a ComputeDomain pod needs a tray with no GPU in use")
            }));
        }
        if let Some(g) = ask.tray_size
            && s.gpus != g
        {
            return Some(r.cause(Cause::TraySize, s.gpus, Code::UnschedulableAndUnresolvable, || {
                if g < s.gpus {
                    format!(
                        "requests {g} of the node's {} GPUs; would strand {} (wholeTray: Require)",
                        s.gpus,
                        s.gpus - g
                    )
                } else {
                    format!("requests {g} GPUs but the node has {} (wholeTray: Require)", s.gpus)
                }
            }));
        }
        None
    }

    pub(crate) fn malformed_overrides(&self, r: &mut Reasons, out: &mut Vec<NodeVerdict>) {
        for &n in &self.malformed {
            let value = self.nodes[&n].fact.as_ref().and_then(|f| f.clique_label).map_or("", |l| self.str(l));
            let v = r.verdict(
                Code::UnschedulableAndUnresolvable,
                format!(
                    "node label {}={value:?} is malformed: expected <clusterUUID>.<cliqueID>",
                    self.args.clique_label
                ),
            );
            out.push(NodeVerdict { node: n, verdict: v });
        }
    }
}
