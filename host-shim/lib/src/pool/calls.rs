//! The decision calls (PreFilter, plain-pod steering, preemption, the fleet status): each reads
//! the ids it needs from the state, runs on a caught-up instance under one deadline, and
//! converts the result against the state of the same string generation. The live calls run on
//! an instance of the pool ([`On::Pool`]); a candidate policy's self-test runs the same calls,
//! through the same code, on its own instance ([`On::Candidate`], see `swap`): whatever the host
//! checks of an answer here applies to both. Each answer comes with the policy generation of the
//! instance that made it.

use std::sync::atomic::Ordering;
use std::time::Instant;

use cdplace_policy::{OverlayOp, PreFilterResult};

use super::{Lease, Pool, journal::Shared, shadow};
use crate::evaluator::Evaluator;
use crate::overlay::Overlay;
use crate::safety;
use crate::state::State;
use crate::{Error, Result};

/// Where a decision call runs.
#[derive(Debug)]
pub(crate) enum On<'a> {
    /// On an instance of the pool (checked out, caught up, checked in): the live path.
    Pool,
    /// On a candidate policy's instance, brought up to the end of the journal first; it is not
    /// checked in. A compaction of the strings meanwhile is [`Error::Compacted`] (the self-test
    /// starts again).
    Candidate(&'a mut Lease),
}

/// An answer and the policy generation that made it.
pub type Decided<T> = (T, u64);

/// Where a decision was made: the policy generation, and the journal position and string
/// generation of the view it was made on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    pub policy: u64,
    pub pos: u64,
    pub generation: u64,
}

impl Pool {
    /// Runs PreFilter for the pod `namespace/name` at the policy time `now_ms` (Unix
    /// milliseconds: the host's clock on the live path, a recorded decision's own time when
    /// `cdplace replay` asks again), checks the answer against the safety rules
    /// ([`safety::check`]) and turns it (ids) into `T` with the state it was computed against; if
    /// the strings were compacted meanwhile, it runs again. A guest failure discards the
    /// instance; the next call gets a fresh one. An answer that breaks a rule is
    /// [`Error::PolicyViolation`] (counted); when the view changed during the call, so that the
    /// change rather than the policy may have made the node unsafe, it is asked again first.
    pub fn pre_filter<T>(
        &self,
        on: On<'_>,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
        now_ms: i64,
        convert: impl Fn(&State, &PreFilterResult) -> T,
    ) -> Result<Decided<T>> {
        let what = || format!("{namespace}/{name}");
        let key = what();
        // A live decision of a ComputeDomain pod on the plain view is what a shadow policy is
        // asked about too (see `shadow`): its answer is kept for that, only when one is set.
        let shadowed = matches!(on, On::Pool) && overlay.is_empty() && self.shadowing();
        let checked = |st: &State, (ops, r): &(Vec<OverlayOp>, PreFilterResult)| {
            safety::check(st, self.enforced, &key, ops, r).map_err(Error::PolicyViolation)?;
            let seed = match (shadowed, r.domain, st.pod(namespace, name)) {
                (true, Some(domain), Some(pod)) => Some((pod, domain, r.clone())),
                _ => None,
            };
            Ok((convert(st, r), seed))
        };
        let ((t, seed), at) = self.decide(on, what, checked, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            let ops = sh.state.overlay(overlay);
            Ok(move |e: &mut dyn Evaluator| e.pre_filter(pod, &ops, now_ms).map(|r| (ops, r)))
        })?;
        if let Some((pod, domain, live)) = seed {
            let live = shadow::Asked::PreFilter(live);
            self.shadow_offer(shadow::Job { key, pod, domain, now_ms, pos: at.pos, generation: at.generation, live });
        }
        Ok((t, at.policy))
    }

    /// Plain-pod steering (`gpus`: the pod uses GPUs) at `now_ms`, turned into `T` like
    /// [`Pool::pre_filter`].
    pub fn steer<T>(
        &self,
        on: On<'_>,
        gpus: bool,
        now_ms: i64,
        convert: impl Fn(&State, &PreFilterResult) -> T,
    ) -> Result<Decided<T>> {
        let what = || String::from(if gpus { "plain GPU pod" } else { "plain pod" });
        let convert = |st: &State, r: &PreFilterResult| Ok(convert(st, r));
        let (t, at) = self.decide(on, what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.steer(gpus, now_ms)))?;
        Ok((t, at.policy))
    }

    /// One decision call: `prepare` reads the ids it needs from the state (under the lock), the
    /// call it returns runs on a caught-up instance, and the result is converted (and checked)
    /// against the state of the same string generation; if the strings were compacted meanwhile,
    /// it runs again. A guest failure discards the instance; the next call gets a fresh one. A
    /// policy violation found on a view that changed during the call is asked again (up to
    /// [`VIOLATION_RETRIES`] times), else counted and returned.
    fn decide<R, T, F>(
        &self,
        mut on: On<'_>,
        what: impl Fn() -> String,
        convert: impl Fn(&State, &R) -> Result<T>,
        prepare: impl Fn(&mut Shared) -> Result<F>,
    ) -> Result<(T, At)>
    where
        F: FnOnce(&mut dyn Evaluator) -> Result<R>,
    {
        let deadline = Instant::now() + self.limits.deadline;
        let mut retries = 0;
        loop {
            let (call, wanted) = {
                let mut sh = self.shared();
                (prepare(&mut sh)?, sh.generation)
            };
            let (r, generation, policy, seen) = match &mut on {
                On::Pool => {
                    let mut lease = self.checkout(deadline)?;
                    if lease.generation != wanted {
                        // Compacted between reading the ids and getting an instance: ask again.
                        self.checkin(lease);
                        continue;
                    }
                    let r = match call(lease.instance.as_mut()) {
                        Ok(r) => r,
                        Err(e) => {
                            tracing::warn!(error = %crate::error::chain(&e), pod = %what(), "policy call failed; instance discarded");
                            self.shared().release(lease.pos, lease.generation);
                            self.discard();
                            return Err(e);
                        }
                    };
                    let (generation, policy, seen) = (lease.generation, lease.policy, lease.pos);
                    self.checkin(lease);
                    (r, generation, policy, seen)
                }
                On::Candidate(lease) => {
                    self.advance(lease, deadline)?;
                    if lease.generation != wanted {
                        return Err(Error::Compacted);
                    }
                    (call(lease.instance.as_mut())?, lease.generation, lease.policy, lease.pos)
                }
            };
            let sh = self.shared();
            if sh.generation != generation {
                if matches!(on, On::Candidate(_)) {
                    return Err(Error::Compacted);
                }
                continue;
            }
            let moved = sh.end() != seen;
            match convert(&sh.state, &r) {
                Err(Error::PolicyViolation(v)) if moved && retries < VIOLATION_RETRIES => {
                    tracing::debug!(pod = %what(), rule = v.rule.name(), "safety rule broken on a view that changed during the call; asking again");
                    retries += 1;
                }
                Err(Error::PolicyViolation(v)) => {
                    drop(sh);
                    self.violations.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(pod = %what(), rule = v.rule.name(), node = %v.node, "policy answer refused: {v}");
                    return Err(Error::PolicyViolation(v));
                }
                r => return r.map(|t| (t, At { policy, pos: seen, generation })),
            }
        }
    }

    /// Brings a candidate's instance to the end of the journal before `deadline`;
    /// [`Error::Compacted`] when it fell behind a compaction or a cut (its snapshot is gone).
    fn advance(&self, lease: &mut Lease, deadline: Instant) -> Result<()> {
        lease.instance.set_deadline(deadline);
        let deltas = {
            let mut sh = self.shared();
            if lease.generation != sh.generation || lease.pos < sh.base {
                return Err(Error::Compacted);
            }
            let end = sh.enter();
            let deltas = sh.journal[(lease.pos - sh.base) as usize..].to_vec();
            sh.release(lease.pos, lease.generation);
            lease.pos = end;
            deltas
        };
        lease.instance.apply(&deltas)
    }

    /// Runs gang preemption for the pod `namespace/name`, checks the victims against the
    /// safety rules ([`safety::check_preemption`]: lower priority, the preemptor's trays, whole
    /// domains) and turns the result into `T` with the state it was computed against (as
    /// [`Pool::pre_filter`]; an answer that breaks a rule is [`Error::PolicyViolation`], counted,
    /// and nothing is evicted). It journals nothing: the view changes only when the victims'
    /// deletions come back through the informers.
    pub fn preempt<T>(
        &self,
        on: On<'_>,
        namespace: &str,
        name: &str,
        now_ms: i64,
        convert: impl Fn(&State, &cdplace_policy::Preemption) -> T,
    ) -> Result<Decided<T>> {
        let what = || format!("{namespace}/{name}");
        let key = what();
        let shadowed = matches!(on, On::Pool) && self.shadowing();
        let convert = |st: &State, r: &cdplace_policy::Preemption| {
            safety::check_preemption(st, &key, r).map_err(Error::PolicyViolation)?;
            let seed = match (shadowed, r.domain, st.pod(namespace, name)) {
                (true, Some(domain), Some(pod)) => Some((pod, domain, r.clone())),
                _ => None,
            };
            Ok((convert(st, r), seed))
        };
        let ((t, seed), at) = self.decide(on, what, convert, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            Ok(move |e: &mut dyn Evaluator| e.preempt(pod, now_ms))
        })?;
        if let Some((pod, domain, live)) = seed {
            let live = shadow::Asked::Preempt(live);
            self.shadow_offer(shadow::Job { key, pod, domain, now_ms, pos: at.pos, generation: at.generation, live });
        }
        Ok((t, at.policy))
    }

    /// The fleet status, turned into `T` with the state it was computed against (as
    /// [`Pool::pre_filter`]). It journals nothing.
    pub fn status<T>(
        &self,
        on: On<'_>,
        convert: impl Fn(&State, &cdplace_policy::FleetStatus) -> T,
    ) -> Result<Decided<T>> {
        let what = || String::from("fleet status");
        let convert = |st: &State, r: &cdplace_policy::FleetStatus| Ok(convert(st, r));
        let (t, at) = self.decide(on, what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.status(now_ms())))?;
        Ok((t, at.policy))
    }
}

/// How many times a call whose answer broke a safety rule on a view that changed during the call
/// is asked again before the violation is reported.
const VIOLATION_RETRIES: u32 = 2;

/// The host's clock for the policy (Unix milliseconds): what the calls that take no time use.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
