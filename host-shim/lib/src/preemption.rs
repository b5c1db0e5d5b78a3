//! What gang preemption decided for a pod, with every id resolved to its string, and its JSON
//! form (what the C ABI returns: preemption is rare, so the text form costs nothing that
//! matters and needs no second packed format).

use cdplace_policy as p;
use serde::Serialize;

use crate::state::State;

/// The victims of one gang preemption.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The clique label value the preemptor's domain gets.
    pub clique: String,
    /// The node to nominate the preemptor to.
    pub node: String,
    /// `namespace/name` of every pod to evict, sorted.
    pub pods: Vec<String>,
    /// UIDs of the ComputeDomains evicted whole, sorted.
    pub domains: Vec<String>,
    pub gpus: u32,
    /// The highest priority among the victims.
    pub priority: i32,
    /// Trays of the clique the victims hold or have promised to them.
    pub trays: u32,
}

/// What gang preemption decided for a pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preemption {
    /// The pod's ComputeDomain UID.
    pub domain: Option<String>,
    /// The victims; none when preemption cannot help.
    pub plan: Option<Plan>,
    /// Why preemption cannot help, or what the plan does.
    pub reason: String,
}

impl Preemption {
    /// `{"domain": S|null, "plan": {"clique", "node", "pods", "domains", "gpus", "priority",
    /// "trays"}|null, "reason": S}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a preemption serializes")
    }
}

/// `r` with every id resolved against the state it was computed from.
pub(crate) fn resolve(st: &State, r: &p::Preemption) -> Preemption {
    let text = |id: p::StrId| st.interner.text(id).to_string();
    Preemption {
        domain: r.domain.map(text),
        plan: r.plan.as_ref().map(|pl| Plan {
            clique: text(pl.clique),
            node: text(pl.node),
            pods: pl.pods.iter().map(|&k| text(k)).collect(),
            domains: pl.domains.iter().map(|&d| text(d)).collect(),
            gpus: pl.gpus,
            priority: pl.priority,
            trays: pl.trays,
        }),
        reason: r.reason.clone(),
    }
}
