//! What PreFilter decided for a pod, in the two forms the host gives it: [`Decision`] (every id
//! resolved to its string; the CLI and tests) and the packed `CDP4` bytes the Go adapter reads
//! (no per-node strings built). Both carry the PreFilterResult node set, decided here once
//! ([`CANDIDATE_CLIQUES`]).
//!
//! `CDP4`, little-endian, `str` = u32 length + UTF-8 (the same text as `include/cdplace.h`):
//!
//! ```text
//! "CDP4"
//! u32 nreasons, nreasons x str
//! status: u8 code, u32 reason
//! u8 has_domain, [str domain]
//! u8 exclusive
//! other: u8 code, u32 reason, u32 score
//! u32 ncliques x (str label, u8 code, u32 reason, u32 score, u8 flags)   flags bit 0: stable
//! u32 nnodes x (str node, u8 code, u32 reason)
//! u8 has_node_set, [u32 n x str node]
//! ```
//!
//! `code` is `cdplace_code_t` (`Code as u8`), `reason` an index into the reasons.
//! Filter(node) = status if not Success, else nodes[node], else cliques[label], else other;
//! Score(node) = cliques[label].score, or other's score for a node outside the listed cliques,
//! when Filter(node) is Success.

use std::collections::{BTreeMap, BTreeSet};

use cdplace_policy::{Code, PreFilterResult, StrId, Verdict};

use crate::state::State;
use crate::wire::{Reader, WireError, WireResult, Writer};

/// How many of the best-scoring fitting cliques a domain that has not started is offered as
/// the PreFilterResult: the policy's number (it marks only those cliques Success).
pub use cdplace_policy::CANDIDATE_CLIQUES;

/// The first four bytes of a packed decision.
pub const MAGIC: &[u8; 4] = b"CDP4";

/// A framework status: code and reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: Code,
    pub reason: String,
}

/// What PreFilter decided for a pod, with every id resolved to its string. Filter and Score for
/// a node are [`Decision::node`], a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub status: Status,
    /// The pod's ComputeDomain UID.
    pub domain: Option<String>,
    /// The pod may only go to the successful cliques listed.
    pub exclusive: bool,
    /// Verdict and score per clique label value.
    pub cliques: BTreeMap<String, (Status, u32)>,
    /// Verdict for nodes whose clique is not listed.
    pub other: Status,
    /// Their score when `other` is success (plain-pod steering).
    pub other_score: u32,
    /// The cliques where a plain pod placed keeps this answer (plain-pod steering; see
    /// `CliqueVerdict::stable`).
    pub stable: BTreeSet<String>,
    /// Nodes whose verdict differs from their clique's.
    pub nodes: BTreeMap<String, Status>,
    /// The PreFilterResult, sorted: when exclusive, the nodes of the domain's clique; for a domain
    /// that has not started, the nodes of its [`CANDIDATE_CLIQUES`] best-scoring fitting cliques;
    /// otherwise none (every node).
    pub node_set: Option<Vec<String>>,
}

impl Decision {
    /// Filter's status and Score's score for a node with this name and clique label value.
    pub fn node(&self, name: &str, clique: Option<&str>) -> (&Status, Option<u32>) {
        if self.status.code != Code::Success {
            return (&self.status, None);
        }
        let of_clique = clique.and_then(|c| self.cliques.get(c));
        if let Some(s) = self.nodes.get(name) {
            let score = of_clique.filter(|_| s.code == Code::Success).map(|c| c.1);
            return (s, score);
        }
        match of_clique {
            Some((s, score)) if s.code == Code::Success => (s, Some(*score)),
            Some((s, _)) => (s, None),
            None => (&self.other, (self.other.code == Code::Success).then_some(self.other_score)),
        }
    }
}

/// The cliques whose nodes form the PreFilterResult, or none for no restriction: the cliques the
/// policy offers (Success), when it offers any.
fn chosen_cliques(r: &PreFilterResult) -> Option<Vec<StrId>> {
    // A node outside the listed cliques may pass (plain-pod steering): no restriction.
    if r.status.code != Code::Success || r.other.code == Code::Success {
        return None;
    }
    let offered: Vec<StrId> = r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| c.clique).collect();
    // A started domain stays in its clique even when it is full; a new one offered nothing gets
    // no restriction (Filter gives every node its reason).
    (r.exclusive || !offered.is_empty()).then_some(offered)
}

/// The PreFilterResult node set of `r` (see [`Decision::node_set`]).
pub(crate) fn node_set<'s>(st: &'s State, r: &PreFilterResult) -> Option<Vec<&'s str>> {
    let cliques = chosen_cliques(r)?;
    let mut v: Vec<&str> = cliques.iter().flat_map(|&c| st.clique_nodes(st.interner.text(c))).collect();
    v.sort_unstable();
    Some(v)
}

fn status(r: &PreFilterResult, v: Verdict) -> Status {
    Status { code: v.code, reason: r.reason(v).to_string() }
}

/// `r` with every id resolved against the state it was computed from.
pub(crate) fn decision(st: &State, r: &PreFilterResult) -> Decision {
    let text = |id: StrId| st.interner.text(id).to_string();
    Decision {
        status: status(r, r.status),
        domain: r.domain.map(text),
        exclusive: r.exclusive,
        cliques: r.cliques.iter().map(|c| (text(c.clique), (status(r, c.verdict), c.score))).collect(),
        other: status(r, r.other),
        other_score: r.other_score,
        stable: r.cliques.iter().filter(|c| c.stable).map(|c| text(c.clique)).collect(),
        nodes: r.nodes.iter().map(|n| (text(n.node), status(r, n.verdict))).collect(),
        node_set: node_set(st, r).map(|v| v.into_iter().map(String::from).collect()),
    }
}

/// `r` in the packed `CDP4` form.
pub(crate) fn packed(st: &State, r: &PreFilterResult) -> Vec<u8> {
    fn verdict(out: &mut Vec<u8>, v: Verdict) {
        out.put_u8(v.code as u8);
        out.put_u32(v.reason);
    }
    fn count(n: usize) -> u32 {
        u32::try_from(n).expect("fewer than 2^32 entries")
    }
    let text = |id: StrId| st.interner.text(id);
    let set = node_set(st, r);
    let mut out = Vec::with_capacity(64 + 24 * (r.cliques.len() + r.nodes.len() + set.as_ref().map_or(0, Vec::len)));
    out.extend_from_slice(MAGIC);
    out.put_u32(count(r.reasons.len()));
    for t in &r.reasons {
        out.put_str(t);
    }
    verdict(&mut out, r.status);
    out.put_ostr(r.domain.map(text));
    out.put_bool(r.exclusive);
    verdict(&mut out, r.other);
    out.put_u32(r.other_score);
    out.put_u32(count(r.cliques.len()));
    for c in &r.cliques {
        out.put_str(text(c.clique));
        verdict(&mut out, c.verdict);
        out.put_u32(c.score);
        out.put_u8(u8::from(c.stable));
    }
    out.put_u32(count(r.nodes.len()));
    for n in &r.nodes {
        out.put_str(text(n.node));
        verdict(&mut out, n.verdict);
    }
    match set {
        Some(nodes) => {
            out.put_u8(1);
            out.put_u32(count(nodes.len()));
            for n in nodes {
                out.put_str(n);
            }
        }
        None => out.put_u8(0),
    }
    out
}

/// Reads a packed `CDP4` decision back into a [`Decision`] (`cdplace replay` reads the recorded
/// answers with it). A malformed one is an error naming the byte offset and field.
pub fn unpack(bytes: &[u8]) -> std::result::Result<Decision, String> {
    fn code(r: &mut Reader<'_>, field: &str) -> WireResult<Code> {
        let at = r.offset();
        Ok(match r.u8(field)? {
            0 => Code::Success,
            1 => Code::Skip,
            2 => Code::Unschedulable,
            3 => Code::UnschedulableAndUnresolvable,
            4 => Code::Error,
            c => return Err(WireError { offset: at, message: format!("{field}: {c} is not a cdplace_code_t") }),
        })
    }
    fn status(r: &mut Reader<'_>, reasons: &[String], field: &str) -> WireResult<Status> {
        let code = code(r, field)?;
        let at = r.offset();
        let i = r.u32(field)? as usize;
        let reason = reasons
            .get(i)
            .cloned()
            .ok_or_else(|| WireError { offset: at, message: format!("{field}: reason {i} of {}", reasons.len()) })?;
        Ok(Status { code, reason })
    }
    fn read(r: &mut Reader<'_>) -> WireResult<Decision> {
        r.expect(MAGIC, "magic")?;
        let n = r.u32("nreasons")? as usize;
        let mut reasons = Vec::with_capacity(n.min(r.remaining() / 4));
        for _ in 0..n {
            reasons.push(r.str("reason")?);
        }
        let st = status(r, &reasons, "status")?;
        let domain = r.ostr("domain")?;
        let exclusive = r.bool("exclusive")?;
        let other = status(r, &reasons, "other")?;
        let other_score = r.u32("other score")?;
        let (mut cliques, mut stable, mut nodes) = (BTreeMap::new(), BTreeSet::new(), BTreeMap::new());
        for _ in 0..r.u32("ncliques")? {
            let label = r.str("clique")?;
            let v = status(r, &reasons, "clique verdict")?;
            let score = r.u32("clique score")?;
            if r.u8("clique flags")? & 1 == 1 {
                stable.insert(label.clone());
            }
            cliques.insert(label, (v, score));
        }
        for _ in 0..r.u32("nnodes")? {
            let node = r.str("node")?;
            nodes.insert(node, status(r, &reasons, "node verdict")?);
        }
        let node_set = if r.bool("has_node_set")? {
            let n = r.u32("node set length")?;
            let mut v = Vec::with_capacity((n as usize).min(r.remaining() / 4));
            for _ in 0..n {
                v.push(r.str("node set")?);
            }
            Some(v)
        } else {
            None
        };
        if r.remaining() > 0 {
            return Err(WireError {
                offset: r.offset(),
                message: format!("{} bytes after the decision", r.remaining()),
            });
        }
        Ok(Decision { status: st, domain, exclusive, cliques, other, other_score, stable, nodes, node_set })
    }
    read(&mut Reader::new(bytes)).map_err(|e| format!("packed decision: byte {}: {}", e.offset, e.message))
}

#[cfg(test)]
mod tests {
    use cdplace_policy::{CliqueVerdict, Verdict};

    use super::*;

    fn result(exclusive: bool, scores: &[(StrId, Code, u32)]) -> PreFilterResult {
        PreFilterResult {
            status: Verdict::SUCCESS,
            domain: None,
            reasons: vec![String::new()],
            exclusive,
            cliques: scores
                .iter()
                .map(|&(clique, code, score)| CliqueVerdict {
                    clique,
                    verdict: Verdict { code, reason: 0 },
                    score,
                    stable: false,
                })
                .collect(),
            other: Verdict { code: Code::Unschedulable, reason: 0 },
            other_score: 0,
            nodes: vec![],
        }
    }

    #[test]
    fn the_node_set_is_the_cliques_the_policy_offers() {
        use Code::{Success as S, Unschedulable as U};
        // The policy offers only its CANDIDATE_CLIQUES best (guest/policy decide.rs); the host
        // takes whatever it marks Success.
        let r = result(false, &[(1, S, 90), (2, S, 70), (3, U, 100), (4, S, 80), (6, S, 70)]);
        assert_eq!(chosen_cliques(&r), Some(vec![1, 2, 4, 6]), "every offered clique");
        let r = result(false, &[(1, S, 10), (2, S, 20)]);
        assert_eq!(chosen_cliques(&r), Some(vec![1, 2]), "fewer than three fit");
        assert_eq!(chosen_cliques(&result(false, &[(1, U, 100)])), None, "none fits: no restriction");
        let r = result(true, &[(1, S, 10), (2, U, 100)]);
        assert_eq!(chosen_cliques(&r), Some(vec![1]), "exclusive: the domain's clique");
        assert_eq!(chosen_cliques(&result(true, &[(2, U, 100)])), Some(vec![]), "exclusive and full: no node");
        let mut failed = result(false, &[(1, S, 10)]);
        failed.status = Verdict { code: U, reason: 0 };
        assert_eq!(chosen_cliques(&failed), None);
        let mut steered = result(false, &[(1, S, 10)]);
        steered.other = Verdict::SUCCESS;
        assert_eq!(chosen_cliques(&steered), None, "nodes outside the cliques may pass: no restriction");
    }
}
