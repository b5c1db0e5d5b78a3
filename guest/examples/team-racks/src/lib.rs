//! team-racks: an example cdplace policy. Each team (a namespace) owns some racks (cliques);
//! its ComputeDomains stay on them, best fit inside; other namespaces' domains stay off them.
//! Everything else is the shipped policy, which this one wraps rather than copies: it asks the
//! shipped [`View`] with the cliques the domain may not use out of the running
//! ([`View::pre_filter_within`], so it is offered the best fit among its team's racks wherever
//! they rank among all), then narrows the answer with [`cliques::restrict`], which only ever
//! turns a pass into a refusal, so every safety rule of the shipped policy still holds.
//!
//! The mapping comes in the plugin arguments, under `policyArgs` (the shipped policy accepts
//! any object there and leaves it to the loaded component):
//!
//! ```yaml
//! args:
//!   guestPath: /etc/cdplace/team_racks.wasm
//!   policyArgs:
//!     teams:                       # namespace -> clique label values (racks) it owns
//!       team-a: ["<cluster UUID>.1", "<cluster UUID>.2"]
//!       team-b: ["<cluster UUID>.3"]
//!     dedicated: true              # default: other namespaces' domains stay off team racks
//! ```
//!
//! Why arguments and not a namespace label: the facts the host sends (`wit/cdplace.wit`) carry a
//! pod's namespace but no namespace labels, and reading them would take a contract change (a new
//! delta) and a Namespace informer in the scheduler; the arguments need neither.
//!
//! What it does not change: plain pods are steered as shipped (they may use a team's free trays
//! as they would any clique's), and the shipped head-of-queue reservation does not know about
//! teams (a team's waiting domain may hold a reservation on a clique it cannot use; set
//! `cliqueReservationAfterSeconds: 0` where that matters).
#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use cdplace_policy_sdk::{
    Args, Code, Error, OverlayOp, Policy, PreFilterResult, Preemption, Result, StrId, View, cliques,
};
use serde::Deserialize;

/// `policyArgs` of this policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamArgs {
    /// Namespace -> the clique label values (racks) its ComputeDomains stay on.
    #[serde(default)]
    pub teams: BTreeMap<String, Vec<String>>,
    /// Domains of namespaces without racks stay off every team's racks (default true).
    #[serde(default = "yes")]
    pub dedicated: bool,
}

fn yes() -> bool {
    true
}

impl TeamArgs {
    /// Reads and validates `policyArgs` (none: no teams, every domain as shipped).
    pub fn parse(policy_args: Option<&serde_json::Value>) -> Result<Self> {
        let Some(v) = policy_args else { return Ok(TeamArgs { dedicated: true, ..Default::default() }) };
        let t = TeamArgs::deserialize(v).map_err(|e| Error::InvalidArgs(format!("policyArgs: {e}")))?;
        let mut owner: BTreeMap<&str, &str> = BTreeMap::new();
        for (ns, racks) in &t.teams {
            if ns.is_empty()
                || ns.len() > 63
                || !ns.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(Error::InvalidArgs(format!(
                    "policyArgs.teams: Invalid value: \"{ns}\": must be a namespace name (a DNS label)"
                )));
            }
            if racks.is_empty() {
                return Err(Error::InvalidArgs(format!("policyArgs.teams.{ns}: Required value: at least one rack")));
            }
            for r in racks {
                if let Some(other) = owner.insert(r, ns)
                    && other != ns
                {
                    return Err(Error::InvalidArgs(format!(
                        "policyArgs.teams.{ns}: Invalid value: \"{r}\": the rack is also {other}'s"
                    )));
                }
            }
        }
        Ok(t)
    }

    /// The racks of a namespace's team, when it has some.
    fn racks(&self, namespace: &str) -> Option<BTreeSet<&str>> {
        self.teams.get(namespace).map(|r| r.iter().map(String::as_str).collect())
    }

    /// Every team's racks.
    fn owned(&self) -> BTreeSet<&str> {
        self.teams.values().flatten().map(String::as_str).collect()
    }
}

/// The policy: the shipped view plus the teams.
#[derive(Debug, Default)]
pub struct TeamRacks {
    view: View,
    teams: TeamArgs,
}

/// Which cliques a pod's domain may use.
enum Allowed<'a> {
    /// Any (no teams, or a namespace without racks when racks are not dedicated).
    Any,
    /// Only these.
    Only(BTreeSet<&'a str>, String),
    /// Any but these.
    NotThese(BTreeSet<&'a str>, String),
}

impl Allowed<'_> {
    fn keeps(&self, clique: &str) -> bool {
        match self {
            Allowed::Any => true,
            Allowed::Only(s, _) => s.contains(clique),
            Allowed::NotThese(s, _) => !s.contains(clique),
        }
    }
}

/// The cliques the pod with key `pod` may use (borrowing only the teams, so the view is free to
/// decide afterwards).
fn allowed<'t>(teams: &'t TeamArgs, view: &View, pod: StrId) -> Allowed<'t> {
    let Some(fact) = view.pod_fact(pod) else { return Allowed::Any };
    let ns = view.str(fact.namespace);
    match teams.racks(ns) {
        Some(racks) => Allowed::Only(racks, format!("ComputeDomains of namespace {ns} stay on its racks (teamRacks)")),
        None if teams.dedicated && !teams.teams.is_empty() => Allowed::NotThese(
            teams.owned(),
            format!("the rack belongs to a team and namespace {ns} has none (teamRacks)"),
        ),
        None => Allowed::Any,
    }
}

impl Policy for TeamRacks {
    fn view(&mut self) -> &mut View {
        &mut self.view
    }

    fn configure(&mut self, args: &str) -> Result<Args> {
        let a = Args::parse(args)?;
        self.teams = TeamArgs::parse(a.policy_args.as_ref())?;
        self.view.set_args(a.clone());
        Ok(a)
    }

    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
        let allowed = allowed(&self.teams, &self.view, pod);
        let reason = match &allowed {
            Allowed::Any => return self.view.pre_filter(pod, overlay, now_ms),
            Allowed::Only(_, why) | Allowed::NotThese(_, why) => why.clone(),
        };
        // The cliques left out are out of the running before the shipped best fit ranks the
        // rest: the domain is offered the best of its team's racks, wherever they rank among all.
        let mut r = self.view.pre_filter_within(pod, overlay, now_ms, &|c| allowed.keeps(c), &reason);
        // Trays of no clique, and anything else the shipped answer lets pass outside the kept
        // cliques, are refused too (restrict only ever turns a pass into a refusal).
        if r.status.code == Code::Success && r.domain.is_some() {
            let view = &self.view;
            cliques::restrict(view, &mut r, |c| allowed.keeps(view.str(c)), &reason);
        }
        r
    }

    fn preempt(&mut self, pod: StrId, now_ms: i64) -> Preemption {
        let mut p = self.view.preempt(pod, now_ms);
        if let Some(plan) = &p.plan {
            let clique = self.view.str(plan.clique).to_string();
            if !allowed(&self.teams, &self.view, pod).keeps(&clique) {
                p.plan = None;
                p.reason =
                    format!("preemption would free clique {clique}, which this pod's domain may not use (teamRacks)");
            }
        }
        p
    }
}

#[cfg(target_arch = "wasm32")]
cdplace_policy_sdk::export_policy!(TeamRacks);

#[cfg(test)]
mod tests;
