//! The answer of one PreFilter evaluation: a pod-level status plus per-clique and per-node
//! verdicts from which Filter and Score for any node are a lookup.

use alloc::string::String;
use alloc::vec::Vec;

use crate::facts::StrId;

/// A scheduling framework status code. The discriminants are `cdplace_code_t` of the host's C
/// ABI (`host-shim/lib/include/cdplace.h`): the packed decision writes `code as u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Code {
    Success = 0,
    Skip = 1,
    Unschedulable = 2,
    UnschedulableAndUnresolvable = 3,
    Error = 4,
}

impl Code {
    /// The framework's name for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Skip => "Skip",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Error => "Error",
        }
    }
}

/// A code and its reason, an index into [`PreFilterResult::reasons`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    pub code: Code,
    pub reason: u32,
}

impl Verdict {
    /// Success, with the empty reason (index 0).
    pub const SUCCESS: Verdict = Verdict { code: Code::Success, reason: 0 };
}

/// The verdict for all nodes of one clique label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliqueVerdict {
    pub clique: StrId,
    pub verdict: Verdict,
    /// 0..=100, higher is better.
    pub score: u32,
    /// Steering only (false in a ComputeDomain pod's answer): a pod without a ComputeDomain
    /// placed on a tray of this clique leaves every verdict of this answer as it is and changes
    /// no score but this clique's own, which can only rise (it gets fuller). The host may then
    /// keep using the answer for the next plain pods instead of asking again. See
    /// [`crate::steer`].
    pub stable: bool,
}

/// A node whose verdict differs from its clique's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeVerdict {
    pub node: StrId,
    pub verdict: Verdict,
}

/// Everything PreFilter decided for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreFilterResult {
    pub status: Verdict,
    /// The pod's ComputeDomain UID.
    pub domain: Option<StrId>,
    /// Reason texts; index 0 is always the empty string.
    pub reasons: Vec<String>,
    /// The pod may only go to the listed successful cliques.
    pub exclusive: bool,
    pub cliques: Vec<CliqueVerdict>,
    /// For nodes whose clique is not listed.
    pub other: Verdict,
    /// Score of those nodes when `other` is success (plain-pod steering); 0 otherwise.
    pub other_score: u32,
    pub nodes: Vec<NodeVerdict>,
}

impl PreFilterResult {
    /// The text of a verdict's reason.
    pub fn reason(&self, v: Verdict) -> &str {
        self.reasons.get(v.reason as usize).map_or("", String::as_str)
    }
}
