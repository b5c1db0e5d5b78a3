//! A shadow policy: a second component asked the same questions as the live one, on the same
//! view, that never acts. What it would have decided differently is kept per ComputeDomain.
//!
//! - **Which decisions.** Every live PreFilter answer for a ComputeDomain workload pod on the
//!   plain view (no preemption what-if overlay), and every live gang preemption (PostFilter)
//!   of one, is offered as a [`Job`]: the pod, its domain, the
//!   host clock the live call used, the journal position and string generation of the view it
//!   was made on, and the live answer. The live path only clones the answer and takes one short
//!   lock: the shadow's instance runs elsewhere ([`Pool::shadow_step`], called by the host's own
//!   thread or goroutine under its budget). A queue of [`SHADOW_QUEUE`] jobs bounds what waits;
//!   a job is not queued when one of the same domain already waits (the domain is asked about
//!   once per wait, not once per pod), and a full queue drops it (counted as
//!   [`Outcome::Skipped`]).
//! - **On the same view.** The shadow has one instance, its own journal position pinned like any
//!   instance's. A step brings it to the job's position exactly (the journal entries between
//!   the two, never past), so it sees what the live decision saw. A job behind the shadow's
//!   position (the live calls run in parallel; the shadow only moves forward), or whose view was
//!   compacted or cut away, is skipped and counted; after a cut the shadow starts again from a
//!   snapshot.
//! - **What differs** ([`compare`]): the live answer places the domain (offers at least one
//!   clique) and the shadow's does not ([`Outcome::WouldNotPlace`]), the reverse
//!   ([`Outcome::WouldPlace`]), both place but the shadow's first clique is another
//!   ([`Outcome::OtherClique`]), or the same first clique but another set of cliques or nodes
//!   ([`Outcome::Elsewhere`]); for gang preemption, another clique, or the same clique with
//!   other victims ([`Outcome::OtherVictims`], see [`compare_preemption`]). A shadow call that fails (trap, timeout) is [`Outcome::Error`] and
//!   its instance is rebuilt; the live path never sees it.
//! - **Reported**: counts per outcome, and a [`Divergence`] (both answers in words) each time a
//!   domain's outcome changes to a divergent one, at most [`SHADOW_LOG`] waiting to be taken.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use cdplace_policy::{Code, PreFilterResult, StrId};
use serde::Serialize;

use super::{Lease, Pool};
use crate::decision::{self, Decision};
use crate::evaluator::Backend;
use crate::preemption::{self, Preemption};
use crate::settings::Settings;
use crate::{Error, Result};

/// At most this many live decisions wait for the shadow.
pub const SHADOW_QUEUE: usize = 64;

/// At most this many divergences wait to be taken ([`Pool::shadow_take`]); older ones are
/// dropped first (counted in [`ShadowReport::dropped`]).
pub const SHADOW_LOG: usize = 256;

/// At most this many domains' last outcomes are remembered (then the memory starts again).
const SHADOW_DOMAINS: usize = 16_384;

/// How a shadow answer compares with the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// The same verdict, first clique and offered cliques and nodes (or both do not place).
    Agree,
    /// The live policy places the domain; the shadow would not.
    WouldNotPlace,
    /// The live policy does not place the domain; the shadow would.
    WouldPlace,
    /// Both place it, in another first clique.
    OtherClique,
    /// Both place it in the same first clique, but offer other cliques or nodes.
    Elsewhere,
    /// Both would make room by gang preemption in the same clique, with other victims.
    OtherVictims,
    /// The shadow's call failed (trap, timeout, memory).
    Error,
    /// Not asked: the queue was full, or the view the live decision was made on was gone.
    Skipped,
}

impl Outcome {
    /// Every outcome, in declaration order.
    pub const ALL: [Outcome; 8] = [
        Outcome::Agree,
        Outcome::WouldNotPlace,
        Outcome::WouldPlace,
        Outcome::OtherClique,
        Outcome::Elsewhere,
        Outcome::OtherVictims,
        Outcome::Error,
        Outcome::Skipped,
    ];

    /// The outcome's name (the `outcome` label of `cdplace_shadow_decisions_total`).
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Agree => "agree",
            Outcome::WouldNotPlace => "would-not-place",
            Outcome::WouldPlace => "would-place",
            Outcome::OtherClique => "other-clique",
            Outcome::Elsewhere => "elsewhere",
            Outcome::OtherVictims => "other-victims",
            Outcome::Error => "error",
            Outcome::Skipped => "skipped",
        }
    }

    /// Whether it is a divergence (reported per domain).
    pub fn diverges(self) -> bool {
        matches!(
            self,
            Outcome::WouldNotPlace
                | Outcome::WouldPlace
                | Outcome::OtherClique
                | Outcome::Elsewhere
                | Outcome::OtherVictims
                | Outcome::Error
        )
    }
}

/// Where a domain's pod may go, as an answer offers it: the successful cliques best first (score,
/// then name), or `None` when the answer does not place it.
fn offered(d: &Decision) -> Option<Vec<(&str, u32)>> {
    if d.status.code != Code::Success {
        return None;
    }
    let mut cliques: Vec<(&str, u32)> = d
        .cliques
        .iter()
        .filter(|(_, (s, _))| s.code == Code::Success)
        .map(|(c, (_, score))| (c.as_str(), *score))
        .collect();
    if cliques.is_empty() && (d.exclusive || d.other.code != Code::Success) {
        return None;
    }
    cliques.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    Some(cliques)
}

/// How the shadow's answer `shadow` compares with the live one (see the module doc).
pub fn compare(live: &Decision, shadow: &Decision) -> Outcome {
    match (offered(live), offered(shadow)) {
        (None, None) => Outcome::Agree,
        (Some(_), None) => Outcome::WouldNotPlace,
        (None, Some(_)) => Outcome::WouldPlace,
        (Some(a), Some(b)) => {
            if a.first().map(|c| c.0) != b.first().map(|c| c.0) {
                Outcome::OtherClique
            } else if a.iter().map(|c| c.0).ne(b.iter().map(|c| c.0))
                || live.node_set != shadow.node_set
                || live.nodes != shadow.nodes
            {
                Outcome::Elsewhere
            } else {
                Outcome::Agree
            }
        }
    }
}

/// An answer in words, for a divergence: where it places the domain, or its status and reason.
pub fn describe(d: &Decision) -> String {
    match offered(d) {
        None if d.status.code != Code::Success => format!("{}: {}", d.status.code.as_str(), d.status.reason),
        None => format!("no clique offered: {}", d.other.reason),
        Some(c) if c.is_empty() => "any node".to_string(),
        Some(c) => {
            let rest = c[1..].iter().map(|(name, s)| format!("{name} ({s})")).collect::<Vec<_>>();
            let mut s = format!("clique {} (score {})", c[0].0, c[0].1);
            if !rest.is_empty() {
                s.push_str(&format!(", then {}", rest.join(", ")));
            }
            s
        }
    }
}

/// How the shadow's gang preemption compares with the live one: whether each makes room, in
/// which clique, evicting which pods and domains.
pub fn compare_preemption(live: &Preemption, shadow: &Preemption) -> Outcome {
    match (&live.plan, &shadow.plan) {
        (None, None) => Outcome::Agree,
        (Some(_), None) => Outcome::WouldNotPlace,
        (None, Some(_)) => Outcome::WouldPlace,
        (Some(a), Some(b)) if a.clique != b.clique => Outcome::OtherClique,
        (Some(a), Some(b)) if a.pods != b.pods || a.domains != b.domains => Outcome::OtherVictims,
        _ => Outcome::Agree,
    }
}

/// A gang preemption in words: its victims and clique, or why none helps.
pub fn describe_preemption(p: &Preemption) -> String {
    match &p.plan {
        Some(plan) => format!(
            "preempt {} domain(s) [{}] and {} pod(s) in clique {}",
            plan.domains.len(),
            plan.domains.join(", "),
            plan.pods.len(),
            plan.clique
        ),
        None => format!("no preemption: {}", p.reason),
    }
}

/// A domain on which the shadow's answer differs from the live one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Divergence {
    /// The ComputeDomain's UID.
    pub domain: String,
    /// The pod decided for, `namespace/name`.
    pub pod: String,
    pub outcome: Outcome,
    /// The live answer in words ([`describe`]).
    pub live: String,
    /// The shadow's answer in words, or its error.
    pub shadow: String,
    /// The journal position of the view both answered on.
    pub position: u64,
    /// The generations of the live policy and of the shadow.
    pub live_generation: u64,
    pub shadow_generation: u64,
}

/// What the shadow did since the last [`Pool::shadow_take`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowReport {
    /// Whether a shadow policy is set.
    pub active: bool,
    /// Its generation (one more for each shadow set; 0 when none was).
    pub generation: u64,
    /// Decisions compared, per outcome name, since the last take.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Divergences since the last take (oldest first, at most [`SHADOW_LOG`]).
    pub divergences: Vec<Divergence>,
    /// Divergences dropped because the log was full.
    pub dropped: u64,
    /// Jobs waiting now.
    pub queued: usize,
    /// Time spent in the shadow's guest calls (catching up and deciding) since the last take,
    /// in microseconds.
    pub busy_us: u64,
}

/// What the live policy was asked, with its answer.
#[derive(Debug)]
pub(crate) enum Asked {
    /// PreFilter on the plain view.
    PreFilter(PreFilterResult),
    /// Gang preemption (PostFilter).
    Preempt(cdplace_policy::Preemption),
}

/// A live decision for the shadow to answer too.
#[derive(Debug)]
pub(crate) struct Job {
    /// `namespace/name` of the pod.
    pub key: String,
    pub pod: StrId,
    pub domain: StrId,
    /// The host clock the live call gave the policy.
    pub now_ms: i64,
    /// The view the live decision was made on.
    pub pos: u64,
    pub generation: u64,
    pub live: Asked,
}

/// The shadow policy of a pool and what it found.
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    /// The shadow's backend and instance (the instance is out while a step runs).
    backend: Option<Arc<dyn Backend>>,
    lease: Option<Lease>,
    generation: u64,
    queue: VecDeque<Job>,
    /// Each domain's last outcome (UID → outcome), to report a divergence when it changes.
    last: HashMap<String, Outcome>,
    report: ShadowReport,
}

/// A shadow answer compared with the live one.
struct Compared {
    outcome: Outcome,
    /// The domain's UID.
    uid: String,
    /// Both answers in words ([`describe`]); the shadow's error for [`Outcome::Error`].
    live: String,
    shadow: String,
}

/// What bringing the shadow's instance to a job's view needs.
enum Reach {
    /// Apply these journal entries (possibly none): the instance is then at the job's position.
    Apply(Vec<crate::wit::Delta>),
    /// The job's view cannot be reached (behind the instance, compacted or cut away).
    Gone,
    /// The instance is gone: make one from a snapshot (usable only when the view has not moved
    /// since the job).
    Fresh,
}

impl Pool {
    fn shadow(&self) -> std::sync::MutexGuard<'_, Shadow> {
        self.shadow.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a shadow policy is set (the live path clones its answers only then).
    pub(crate) fn shadowing(&self) -> bool {
        self.shadow_on.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets the shadow policy to `backend` after the same checks as a swap (instantiate,
    /// configure, settings, self-test on the live view), or clears it (`None`). The counts and
    /// divergences not yet taken stay.
    pub fn set_shadow(
        &self,
        backend: Option<Arc<dyn Backend>>,
        settings: &Settings,
    ) -> Result<Option<super::SwapReport>> {
        let Some(backend) = backend else {
            self.shadow_on.store(false, std::sync::atomic::Ordering::Relaxed);
            let old = {
                let mut sh = self.shadow();
                sh.backend = None;
                sh.queue.clear();
                sh.last.clear();
                sh.report.active = false;
                sh.lease.take()
            };
            if let Some(l) = old {
                self.shared().release(l.pos, l.generation);
            }
            return Ok(None);
        };
        let next = self.shadow().generation + 1;
        let (lease, report) = self.checked_instance(backend.clone(), settings, next)?;
        let old = {
            let mut sh = self.shadow();
            sh.backend = Some(backend);
            sh.generation = next;
            sh.queue.clear();
            sh.last.clear();
            sh.report.active = true;
            sh.report.generation = next;
            sh.lease.replace(lease)
        };
        if let Some(l) = old {
            self.shared().release(l.pos, l.generation);
        }
        self.shadow_on.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(report))
    }

    /// Queues a live decision for the shadow (see the module doc).
    pub(crate) fn shadow_offer(&self, job: Job) {
        let mut sh = self.shadow();
        let same = |j: &Job| {
            j.domain == job.domain
                && j.generation == job.generation
                && std::mem::discriminant(&j.live) == std::mem::discriminant(&job.live)
        };
        if sh.backend.is_none() || sh.queue.iter().any(same) {
            return;
        }
        if sh.queue.len() >= SHADOW_QUEUE {
            *sh.report.outcomes.entry(Outcome::Skipped.name()).or_default() += 1;
            return;
        }
        sh.queue.push_back(job);
    }

    /// Answers the oldest waiting job with the shadow policy and compares (see the module doc).
    /// Returns false when no job waited. Runs one guest call under the cluster's deadline; call
    /// it off the scheduling path.
    pub fn shadow_step(&self) -> bool {
        let (job, lease, backend, shadow_generation) = {
            let mut sh = self.shadow();
            let Some(job) = sh.queue.pop_front() else { return false };
            let Some(backend) = sh.backend.clone() else { return false };
            (job, sh.lease.take(), backend, sh.generation)
        };
        let start = Instant::now();
        let deadline = start + self.limits.deadline;
        let (lease, compared) = self.shadow_answer(&job, lease, &backend, deadline);
        let busy = start.elapsed().as_micros() as u64;
        let mut sh = self.shadow();
        sh.report.busy_us += busy;
        if sh.generation != shadow_generation || sh.backend.is_none() {
            // Replaced or cleared meanwhile: this instance and answer are of the old one.
            drop(sh);
            if let Some(l) = lease {
                self.shared().release(l.pos, l.generation);
            }
            return true;
        }
        sh.lease = lease;
        let Some(c) = compared else {
            *sh.report.outcomes.entry(Outcome::Skipped.name()).or_default() += 1;
            return true;
        };
        *sh.report.outcomes.entry(c.outcome.name()).or_default() += 1;
        let before = sh.last.insert(c.uid.clone(), c.outcome);
        if sh.last.len() > SHADOW_DOMAINS {
            sh.last.clear();
        }
        if c.outcome.diverges() && before != Some(c.outcome) {
            if sh.report.divergences.len() >= SHADOW_LOG {
                sh.report.divergences.remove(0);
                sh.report.dropped += 1;
            }
            let live_generation = self.policy_generation();
            sh.report.divergences.push(Divergence {
                domain: c.uid,
                pod: job.key,
                outcome: c.outcome,
                live: c.live,
                shadow: c.shadow,
                position: job.pos,
                live_generation,
                shadow_generation,
            });
        }
        true
    }

    /// The shadow's instance brought to the job's view and its answer compared there. Returns the
    /// instance to keep (None: rebuild it at the next job) and the comparison (None: skipped, the
    /// job's view was gone). A failed shadow call is [`Outcome::Error`] with the error as its words.
    fn shadow_answer(
        &self,
        job: &Job,
        lease: Option<Lease>,
        backend: &Arc<dyn Backend>,
        deadline: Instant,
    ) -> (Option<Lease>, Option<Compared>) {
        let (reach, mut lease, uid) = {
            let mut sh = self.shared();
            if job.generation != sh.generation {
                return (lease, None); // compacted since: the job's ids mean nothing now
            }
            let uid = sh.state.interner.text(job.domain).to_string();
            let (reach, lease) = match lease {
                Some(mut l)
                    if l.generation == sh.generation && l.pos >= sh.base && l.pos <= job.pos && job.pos <= sh.end() =>
                {
                    let deltas = sh.journal[(l.pos - sh.base) as usize..(job.pos - sh.base) as usize].to_vec();
                    sh.pin(job.pos);
                    sh.release(l.pos, l.generation);
                    l.pos = job.pos;
                    (Reach::Apply(deltas), Some(l))
                }
                Some(l) if l.generation == sh.generation && l.pos >= sh.base => (Reach::Gone, Some(l)),
                Some(l) => {
                    sh.release(l.pos, l.generation);
                    (Reach::Fresh, None)
                }
                None => (Reach::Fresh, None),
            };
            (reach, lease, uid)
        };
        let failed = |e: Error, uid: String| Compared {
            outcome: Outcome::Error,
            uid,
            live: String::new(),
            shadow: format!("error: {}", crate::error::chain(&e)),
        };
        match reach {
            Reach::Gone => return (lease, None),
            Reach::Fresh => match self.shadow_fresh(backend, deadline) {
                Ok(l) if l.generation == job.generation && l.pos == job.pos => lease = Some(l),
                Ok(l) => return (Some(l), None),
                Err(e) => return (None, Some(failed(e, uid))),
            },
            Reach::Apply(deltas) => {
                let l = lease.as_mut().expect("a lease to apply to");
                l.instance.set_deadline(deadline);
                if let Err(e) = l.instance.apply(&deltas) {
                    let l = lease.take().expect("the lease");
                    self.shared().release(l.pos, l.generation);
                    return (None, Some(failed(e, uid)));
                }
            }
        }
        let mut l = lease.expect("a lease at the job's view");
        l.instance.set_deadline(deadline);
        let answer = match &job.live {
            Asked::PreFilter(_) => l.instance.pre_filter(job.pod, &[], job.now_ms).map(Asked::PreFilter),
            Asked::Preempt(_) => l.instance.preempt(job.pod, job.now_ms).map(Asked::Preempt),
        };
        let answer = match answer {
            Ok(r) => r,
            Err(e) => {
                self.shared().release(l.pos, l.generation);
                return (None, Some(failed(e, uid)));
            }
        };
        let sh = self.shared();
        if sh.generation != job.generation {
            return (Some(l), None);
        }
        let compared = match (&job.live, &answer) {
            (Asked::PreFilter(live), Asked::PreFilter(shadow)) => {
                let (live, shadow) = (decision::decision(&sh.state, live), decision::decision(&sh.state, shadow));
                Compared { outcome: compare(&live, &shadow), uid, live: describe(&live), shadow: describe(&shadow) }
            }
            (Asked::Preempt(live), Asked::Preempt(shadow)) => {
                let (live, shadow) = (preemption::resolve(&sh.state, live), preemption::resolve(&sh.state, shadow));
                Compared {
                    outcome: compare_preemption(&live, &shadow),
                    uid,
                    live: describe_preemption(&live),
                    shadow: describe_preemption(&shadow),
                }
            }
            _ => unreachable!("the shadow is asked what the live policy was"),
        };
        drop(sh);
        (Some(l), Some(compared))
    }

    /// A new shadow instance from a snapshot of the view now.
    fn shadow_fresh(&self, backend: &Arc<dyn Backend>, deadline: Instant) -> Result<Lease> {
        let mut instance = backend.clone().evaluator(self.limits)?;
        instance.set_deadline(deadline);
        instance.configure(&self.args)?;
        let (snapshot, pos, generation) = {
            let mut sh = self.shared();
            let pos = sh.enter();
            (sh.state.snapshot(), pos, sh.generation)
        };
        if let Err(e) = instance.apply(&snapshot) {
            self.shared().release(pos, generation);
            return Err(e);
        }
        Ok(Lease { instance, pos, generation, policy: 0 })
    }

    /// What the shadow did since the last call (counts and divergences are taken).
    pub fn shadow_take(&self) -> ShadowReport {
        let mut sh = self.shadow();
        let queued = sh.queue.len();
        let active = sh.report.active;
        let generation = sh.report.generation;
        let mut r = std::mem::take(&mut sh.report);
        sh.report.active = active;
        sh.report.generation = generation;
        r.queued = queued;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Status;
    use std::collections::{BTreeMap, BTreeSet};

    fn decision(code: Code, cliques: &[(&str, Code, u32)]) -> Decision {
        Decision {
            status: Status { code, reason: if code == Code::Success { String::new() } else { "full".into() } },
            domain: Some("uid".into()),
            exclusive: true,
            cliques: cliques
                .iter()
                .map(|(c, code, s)| (c.to_string(), (Status { code: *code, reason: String::new() }, *s)))
                .collect(),
            other: Status { code: Code::UnschedulableAndUnresolvable, reason: "other cliques".into() },
            other_score: 0,
            stable: BTreeSet::new(),
            nodes: BTreeMap::new(),
            node_set: None,
        }
    }

    use Code::{Success as S, Unschedulable as U};

    #[test]
    fn compare_names_each_kind_of_difference() {
        let best_a = decision(S, &[("a", S, 90), ("b", S, 50), ("c", U, 0)]);
        let best_b = decision(S, &[("a", S, 40), ("b", S, 80), ("c", U, 0)]);
        let only_a = decision(S, &[("a", S, 90), ("b", U, 0), ("c", U, 0)]);
        let none = decision(S, &[("a", U, 0), ("b", U, 0)]);
        let refused = decision(U, &[]);
        assert_eq!(compare(&best_a, &best_a.clone()), Outcome::Agree);
        assert_eq!(compare(&refused, &none), Outcome::Agree, "neither places it");
        assert_eq!(compare(&best_a, &best_b), Outcome::OtherClique);
        assert_eq!(compare(&best_a, &only_a), Outcome::Elsewhere, "same first clique, fewer offered");
        assert_eq!(compare(&best_a, &refused), Outcome::WouldNotPlace);
        assert_eq!(compare(&best_a, &none), Outcome::WouldNotPlace, "every clique refused");
        assert_eq!(compare(&refused, &best_b), Outcome::WouldPlace);
        let mut other_nodes = best_a.clone();
        other_nodes.node_set = Some(vec!["a-00".into()]);
        assert_eq!(compare(&best_a, &other_nodes), Outcome::Elsewhere, "same cliques, other node set");
    }

    #[test]
    fn compare_preemption_names_each_kind_of_difference() {
        let plan = |clique: &str, domains: &[&str]| {
            Some(crate::preemption::Plan {
                clique: clique.into(),
                node: format!("{clique}-00"),
                pods: domains.iter().map(|d| format!("ns/{d}-0")).collect(),
                domains: domains.iter().map(|d| d.to_string()).collect(),
                gpus: 4,
                priority: 0,
                trays: 1,
            })
        };
        let p = |plan| Preemption { domain: Some("uid".into()), plan, reason: "why".into() };
        let (a_low, a_other, b_low, none) =
            (p(plan("a", &["low"])), p(plan("a", &["other"])), p(plan("b", &["low"])), p(None));
        assert_eq!(compare_preemption(&a_low, &p(plan("a", &["low"]))), Outcome::Agree);
        assert_eq!(compare_preemption(&a_low, &a_other), Outcome::OtherVictims);
        assert_eq!(compare_preemption(&a_low, &b_low), Outcome::OtherClique);
        assert_eq!(compare_preemption(&a_low, &none), Outcome::WouldNotPlace);
        assert_eq!(compare_preemption(&none, &a_low), Outcome::WouldPlace);
        assert_eq!(compare_preemption(&none, &p(None)), Outcome::Agree);
        assert_eq!(describe_preemption(&a_low), "preempt 1 domain(s) [low] and 1 pod(s) in clique a");
        assert_eq!(describe_preemption(&none), "no preemption: why");
    }

    #[test]
    fn describe_says_where_or_why() {
        assert_eq!(describe(&decision(S, &[("a", S, 90), ("b", S, 50)])), "clique a (score 90), then b (50)");
        assert_eq!(describe(&decision(U, &[])), "Unschedulable: full");
        assert_eq!(describe(&decision(S, &[("a", U, 0)])), "no clique offered: other cliques");
    }

    #[test]
    fn outcome_names_are_the_metric_labels() {
        let names: Vec<_> = Outcome::ALL.iter().map(|o| o.name()).collect();
        assert_eq!(
            names,
            [
                "agree",
                "would-not-place",
                "would-place",
                "other-clique",
                "elsewhere",
                "other-victims",
                "error",
                "skipped"
            ]
        );
        for o in Outcome::ALL {
            assert_eq!(serde_json::to_value(o).unwrap(), serde_json::Value::String(o.name().into()));
        }
        assert!(!Outcome::Agree.diverges() && !Outcome::Skipped.diverges());
    }
}
