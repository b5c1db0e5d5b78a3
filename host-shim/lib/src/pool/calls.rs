//! The decision calls (PreFilter, plain-pod steering, preemption, the fleet status): each reads
//! the ids it needs from the state, runs on a caught-up instance under one deadline, and
//! converts the result against the state of the same string generation.

use std::time::Instant;

use cdplace_policy::PreFilterResult;

use super::{Pool, journal::Shared};
use crate::evaluator::Evaluator;
use crate::overlay::Overlay;
use crate::state::State;
use crate::{Error, Result};

impl Pool {
    /// Runs PreFilter for the pod `namespace/name` and turns the result (ids) into `T` with the
    /// state it was computed against; if the strings were compacted meanwhile, it runs again.
    /// A guest failure discards the instance; the next call gets a fresh one.
    pub fn pre_filter<T>(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
        convert: impl Fn(&State, &PreFilterResult) -> T,
    ) -> Result<T> {
        let what = || format!("{namespace}/{name}");
        self.decide(what, convert, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            let ops = sh.state.overlay(overlay);
            Ok(move |e: &mut dyn Evaluator| e.pre_filter(pod, &ops, now_ms()))
        })
    }

    /// Plain-pod steering (`gpus`: the pod uses GPUs), turned into `T` like [`Pool::pre_filter`].
    pub fn steer<T>(&self, gpus: bool, convert: impl Fn(&State, &PreFilterResult) -> T) -> Result<T> {
        let what = || String::from(if gpus { "plain GPU pod" } else { "plain pod" });
        self.decide(what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.steer(gpus, now_ms())))
    }

    /// One decision call: `prepare` reads the ids it needs from the state (under the lock), the
    /// call it returns runs on a caught-up instance, and the result is converted against the state
    /// of the same string generation; if the strings were compacted meanwhile, it runs again. A
    /// guest failure discards the instance; the next call gets a fresh one.
    fn decide<R, T, F>(
        &self,
        what: impl Fn() -> String,
        convert: impl Fn(&State, &R) -> T,
        prepare: impl Fn(&mut Shared) -> Result<F>,
    ) -> Result<T>
    where
        F: FnOnce(&mut dyn Evaluator) -> Result<R>,
    {
        let deadline = Instant::now() + self.limits.deadline;
        loop {
            let (call, wanted) = {
                let mut sh = self.shared();
                (prepare(&mut sh)?, sh.generation)
            };
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
            let generation = lease.generation;
            self.checkin(lease);
            let sh = self.shared();
            if sh.generation == generation {
                return Ok(convert(&sh.state, &r));
            }
        }
    }

    /// Runs gang preemption for the pod `namespace/name` and turns the result into `T` with the
    /// state it was computed against (as [`Pool::pre_filter`]). It journals nothing: the view
    /// changes only when the victims' deletions come back through the informers.
    pub fn preempt<T>(
        &self,
        namespace: &str,
        name: &str,
        convert: impl Fn(&State, &cdplace_policy::Preemption) -> T,
    ) -> Result<T> {
        let what = || format!("{namespace}/{name}");
        self.decide(what, convert, |sh| {
            let Some(pod) = sh.state.pod(namespace, name) else {
                return Err(Error::UnknownPod(what()));
            };
            Ok(move |e: &mut dyn Evaluator| e.preempt(pod, now_ms()))
        })
    }

    /// The fleet status, turned into `T` with the state it was computed against (as
    /// [`Pool::pre_filter`]). It journals nothing.
    pub fn status<T>(&self, convert: impl Fn(&State, &cdplace_policy::FleetStatus) -> T) -> Result<T> {
        let what = || String::from("fleet status");
        self.decide(what, convert, |_| Ok(move |e: &mut dyn Evaluator| e.status(now_ms())))
    }
}

/// The host's clock for the policy (Unix milliseconds).
fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
