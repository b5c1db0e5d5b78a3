//! The fleet status (cliques' trays, the largest domain that could start now, reserved trays,
//! each ComputeDomain's phase and why a pending one waits) with every id resolved to its string,
//! and its JSON form, what the C ABI returns: the host asks at most about once a second, so the
//! text form costs nothing that matters and needs no packed format.

use cdplace_policy as p;
use serde::Serialize;

use crate::state::State;

/// One clique of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Clique {
    /// The clique label value.
    pub clique: String,
    /// Trays that may take ComputeDomain pods (not cordoned).
    pub usable: u32,
    /// Usable trays a new domain could take now.
    pub free: u32,
    /// Free trays promised to domains that started there and still place pods.
    pub promised: u32,
    /// UID of the domain a head-of-queue reservation holds the clique for.
    pub reserved_for: Option<String>,
}

/// One ComputeDomain of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub uid: String,
    /// Empty when the ComputeDomain object does not exist.
    pub namespace: String,
    pub name: String,
    /// `idle`, `pending`, `starting` or `running`.
    pub phase: &'static str,
    /// Why a pending domain waits (`waiting_for_trays`, ...; see [`p::PendingReason`]).
    pub pending: Option<&'static str>,
    pub size: u32,
    pub placed: u32,
    pub needed: u32,
    /// Started: its clique; pending: the best clique for it.
    pub clique: Option<String>,
    /// Pending: trays the best clique offers it now.
    pub offer: u32,
    /// What to say on the ComputeDomain (an Event); empty for nothing.
    pub note: String,
}

/// The fleet at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fleet {
    pub cliques: Vec<Clique>,
    pub domains: Vec<Domain>,
    /// The most trays a domain that has not started could take in one clique now.
    pub largest_placeable: u32,
    /// Trays the head-of-queue reservations wait for.
    pub reserved_trays: u32,
}

impl Fleet {
    /// The JSON the C ABI returns (layout in `include/cdplace.h`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a fleet status serializes")
    }
}

/// The phase's name.
pub fn phase_name(ph: p::DomainPhase) -> &'static str {
    match ph {
        p::DomainPhase::Idle => "idle",
        p::DomainPhase::Pending => "pending",
        p::DomainPhase::Starting => "starting",
        p::DomainPhase::Running => "running",
    }
}

/// `s` with every id resolved against the state it was computed from.
pub(crate) fn resolve(st: &State, s: &p::FleetStatus) -> Fleet {
    let text = |id: p::StrId| st.interner.text(id).to_string();
    Fleet {
        cliques: s
            .cliques
            .iter()
            .map(|c| Clique {
                clique: text(c.clique),
                usable: c.usable,
                free: c.free,
                promised: c.promised,
                reserved_for: c.reserved_for.map(text),
            })
            .collect(),
        domains: s
            .domains
            .iter()
            .map(|d| Domain {
                uid: text(d.uid),
                namespace: d.namespace.map(text).unwrap_or_default(),
                name: d.name.map(text).unwrap_or_default(),
                phase: phase_name(d.phase),
                pending: d.pending.map(p::PendingReason::as_str),
                size: d.size,
                placed: d.placed,
                needed: d.needed,
                clique: d.clique.map(text),
                offer: d.offer,
                note: d.note.clone(),
            })
            .collect(),
        largest_placeable: s.largest_placeable,
        reserved_trays: s.reserved_trays,
    }
}
