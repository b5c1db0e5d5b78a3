//! Helpers for cliques and trays: which clique a tray counts in, what an answer says for one
//! tray, and narrowing an answer to some cliques.
//!
//! A clique is one NVLink domain (an NVL72 rack, or part of one), named by the value of the
//! node label `nvidia.com/gpu.clique` (`<cluster UUID>.<clique ID>`); a tray is one node of it.
//! Answers name cliques by that value's string id, as [`View::clique_of`] does.

use alloc::string::ToString;

use cdplace_policy::{Code, PreFilterResult, StrId, Verdict, View};

/// The cliques an answer offers (verdict success), in the order it lists them.
pub fn feasible(r: &PreFilterResult) -> impl Iterator<Item = StrId> + '_ {
    r.cliques.iter().filter(|c| c.verdict.code == Code::Success).map(|c| c.clique)
}

/// What the host reads from an answer for one tray: Filter's verdict and, when it passes,
/// Score's score. `clique` is the tray's clique id ([`View::clique_of`]). The lookup order is
/// the host's: the pod-level status, then the tray's own verdict, then its clique's, then
/// `other`.
pub fn verdict_for(r: &PreFilterResult, node: StrId, clique: Option<StrId>) -> (Verdict, Option<u32>) {
    if r.status.code != Code::Success {
        return (r.status, None);
    }
    let of_clique = clique.and_then(|c| r.cliques.iter().find(|v| v.clique == c));
    if let Some(n) = r.nodes.iter().find(|n| n.node == node) {
        let score = of_clique.filter(|_| n.verdict.code == Code::Success).map(|c| c.score);
        return (n.verdict, score);
    }
    match of_clique {
        Some(c) if c.verdict.code == Code::Success => (c.verdict, Some(c.score)),
        Some(c) => (c.verdict, None),
        None => (r.other, (r.other.code == Code::Success).then_some(r.other_score)),
    }
}

/// Narrows an answer to the cliques `keep` accepts: every other listed clique, every tray of
/// another clique (or of none) that passed on its own, and `other` when it passed, become
/// `UnschedulableAndUnresolvable` with `reason` (preemption cannot move a clique). Scores of the
/// kept cliques stay, so the shipped best fit still ranks them. This only ever turns a pass
/// into a refusal, so an answer that kept the safety rules still keeps them.
///
/// ```
/// use cdplace_policy_sdk::{cliques, Code, CliqueVerdict, PreFilterResult, Verdict, View};
///
/// let mut r = PreFilterResult {
///     status: Verdict::SUCCESS,
///     domain: None,
///     reasons: vec![String::new()],
///     exclusive: false,
///     cliques: vec![
///         CliqueVerdict { clique: 1, verdict: Verdict::SUCCESS, score: 90, stable: false },
///         CliqueVerdict { clique: 2, verdict: Verdict::SUCCESS, score: 50, stable: false },
///     ],
///     other: Verdict { code: Code::Unschedulable, reason: 0 },
///     other_score: 0,
///     nodes: vec![],
/// };
/// cliques::restrict(&View::default(), &mut r, |c| c == 2, "not this team's rack");
/// assert_eq!(cliques::feasible(&r).collect::<Vec<_>>(), [2]);
/// assert_eq!(r.reason(r.cliques[0].verdict), "not this team's rack");
/// ```
pub fn restrict(view: &View, r: &mut PreFilterResult, keep: impl Fn(StrId) -> bool, reason: &str) {
    let deny = Verdict { code: Code::UnschedulableAndUnresolvable, reason: reason_index(r, reason) };
    for c in &mut r.cliques {
        if c.verdict.code == Code::Success && !keep(c.clique) {
            c.verdict = deny;
            c.score = 0;
        }
    }
    for n in &mut r.nodes {
        if n.verdict.code == Code::Success && !view.clique_of(n.node).is_some_and(&keep) {
            n.verdict = deny;
        }
    }
    if r.other.code == Code::Success {
        r.other = deny;
        r.other_score = 0;
    }
}

/// The index of `reason` in the answer's reasons, added when new.
pub fn reason_index(r: &mut PreFilterResult, reason: &str) -> u32 {
    match r.reasons.iter().position(|s| s == reason) {
        Some(i) => i as u32,
        None => {
            r.reasons.push(reason.to_string());
            (r.reasons.len() - 1) as u32
        }
    }
}

/// The trays of a clique and how many of them are usable (not cordoned), from the facts.
pub fn trays(view: &View, clique: StrId) -> (u32, u32) {
    let mut all = 0;
    let mut usable = 0;
    for n in view.clique_nodes(clique) {
        all += 1;
        if view.node_fact(n).is_some_and(|f| !f.unschedulable) {
            usable += 1;
        }
    }
    (all, usable)
}
