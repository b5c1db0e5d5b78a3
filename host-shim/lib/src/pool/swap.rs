//! Replacing the policy while the pool serves. A candidate (a compiled component, off the
//! scheduling path) is checked before it decides anything, on an instance of its own:
//! 1. `instantiate`: it instantiates under the cluster's memory and time limits;
//! 2. `configure`: it accepts the cluster's arguments;
//! 3. `settings`: it answers the same host settings as the policy deciding now (a policy must
//!    not change the host's fields: call timeout, memory limit, clique label, drivers, ...);
//! 4. `self-test`: fed the live view the way every new instance is (a snapshot, then the
//!    journal), it decides for one pending pod of every ComputeDomain and a bounded sample of
//!    placed pods through the live PreFilter path ([`On::Candidate`]: whatever the host checks of
//!    an answer applies here too), asks preemption's what-ifs for up to [`SELF_TEST_WHAT_IFS`]
//!    of those pending pods (PreFilter with a placed pod taken away, and taken away and put back
//!    on its node: the AddPod/RemovePod overlays PreFilterExtensions sends), answers no `Error`
//!    status, asks gang preemption for each pending pod that fits nowhere (the victims checked as
//!    the live path checks them), gives the fleet status once and steers once (when plain-pod
//!    steering is on), with no trap and each call within the call timeout.
//!
//! Then the swap is one step: the policy generation goes up, new calls get instances of the new
//! policy (the checked instance is the first), instances of the old one finish the call they are
//! in and are dropped when they come back. The state and the journal stay as they are. A refused
//! candidate changes nothing: [`Error::Refused`] names the check and why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cdplace_policy::Code;
use serde::Serialize;

use super::calls::{On, now_ms};
use super::{Current, Lease, Pool};
use crate::decision;
use crate::evaluator::Backend;
use crate::overlay::Overlay;
use crate::settings::Settings;
use crate::{Error, Result};

/// At most this many placed pods are decided for in a self-test (besides one pending pod of
/// every ComputeDomain).
pub const SELF_TEST_PLACED: usize = 64;

/// At most this many pending pods are asked preemption's what-ifs in a self-test (two calls
/// each: a placed pod removed, then removed and added back), so a policy that fails only under
/// an overlay is refused before it decides (issue 45).
pub const SELF_TEST_WHAT_IFS: usize = 16;

/// How many times a self-test starts again when the view's strings are compacted under it.
const SELF_TEST_ATTEMPTS: usize = 3;

/// What a swap checked (the JSON of `cdplace_cluster_swap`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SwapReport {
    /// The generation of the policy deciding now (the new one).
    pub generation: u64,
    /// Pending ComputeDomains decided for, one pending pod each.
    pub pending_domains: usize,
    /// Placed pods of ComputeDomains decided for (at most [`SELF_TEST_PLACED`]).
    pub placed_pods: usize,
    /// Preemption what-ifs answered (PreFilter with an overlay; at most 2 × [`SELF_TEST_WHAT_IFS`]).
    pub what_ifs: usize,
    /// Pods that left the view during the self-test, so were not decided for.
    pub gone_pods: usize,
    /// Decision calls of the self-test (PreFilter, status, steering).
    pub calls: usize,
    /// The slowest of those calls, in microseconds, and what it was.
    pub slowest_call_us: u64,
    pub slowest_call: String,
    /// Instantiating, configuring and feeding the view its snapshot, in microseconds.
    pub setup_us: u64,
    /// The whole check and swap, in microseconds.
    pub elapsed_us: u64,
}

/// The pods a self-test asks about, from one view.
struct SelfTestPods<'a> {
    pending: &'a [(String, String)],
    placed: &'a [(String, String)],
    /// A placed pod and its node: preemption's what-ifs take it away and put it back.
    what_if: Option<&'a ((String, String), String)>,
}

fn refused(check: &'static str, reason: impl Into<String>) -> Error {
    Error::Refused { check, reason: reason.into() }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// The host settings that differ, `name: live → candidate`, as the settings' JSON names them.
fn differences(live: &Settings, candidate: &Settings) -> String {
    let as_map = |s: &Settings| match serde_json::to_value(s).expect("settings serialize") {
        serde_json::Value::Object(m) => m,
        _ => unreachable!("settings serialize to an object"),
    };
    let (a, b) = (as_map(live), as_map(candidate));
    let diffs: Vec<String> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}: {v} → {}", b.get(k).map_or("absent".to_string(), |x| x.to_string())))
        .collect();
    diffs.join(", ")
}

impl Pool {
    /// Checks `backend` (see the module doc) against `settings` (the cluster's) and, when every
    /// check passes, makes it the policy deciding. One swap at a time: a second caller waits.
    pub fn swap(&self, backend: Arc<dyn Backend>, settings: &Settings) -> Result<SwapReport> {
        let _one = self.swapping.lock().unwrap_or_else(|p| p.into_inner());
        let start = Instant::now();
        let next = self.policy_generation() + 1;
        let (lease, mut report) = self.checked_instance(backend.clone(), settings, next)?;
        self.switch(Current { backend, generation: next }, lease);
        report.elapsed_us = micros(start.elapsed());
        tracing::info!(generation = next, ?report, "cdplace: policy swapped");
        Ok(report)
    }

    /// Runs every check (see the module doc) on a new instance of `backend`, starting again when
    /// the strings are compacted under the self-test; the checked instance (at the end of the
    /// journal, its position pinned) and the report. A shadow policy passes the same checks.
    pub(crate) fn checked_instance(
        &self,
        backend: Arc<dyn Backend>,
        settings: &Settings,
        next: u64,
    ) -> Result<(Lease, SwapReport)> {
        let start = Instant::now();
        for _ in 0..SELF_TEST_ATTEMPTS {
            match self.check(backend.clone(), settings, next, start) {
                Err(Error::Compacted) => continue,
                Err(e) => return Err(e),
                Ok((lease, mut report)) => {
                    report.elapsed_us = micros(start.elapsed());
                    return Ok((lease, report));
                }
            }
        }
        Err(refused(
            "self-test",
            format!("the view's strings were compacted under the self-test {SELF_TEST_ATTEMPTS} times; try again"),
        ))
    }

    /// The checks, on a new instance of `backend` that becomes the candidate's first lease.
    fn check(
        &self,
        backend: Arc<dyn Backend>,
        settings: &Settings,
        next: u64,
        start: Instant,
    ) -> Result<(Lease, SwapReport)> {
        let deadline = || Instant::now() + self.limits.deadline;
        let chain = |e: &Error| crate::error::chain(e);
        let mut instance = backend.evaluator(self.limits).map_err(|e| {
            refused("instantiate", format!("instantiating it under the cluster's limits failed: {}", chain(&e)))
        })?;
        instance.set_deadline(deadline());
        let got = instance
            .configure(&self.args)
            .map_err(|e| refused("configure", format!("it refused the cluster's arguments: {}", chain(&e))))?;
        if got != *settings {
            return Err(refused(
                "settings",
                format!(
                    "it answers other host settings than the policy deciding now (a policy must not change the host's fields): {}",
                    differences(settings, &got)
                ),
            ));
        }
        // The snapshot and the pods to decide for, from the same view; the position pins the
        // journal from there, so the instance can catch up.
        let (snapshot, pos, generation, (pending, placed), what_if) = {
            let mut sh = self.shared();
            let pos = sh.enter();
            let pods = sh.state.self_test_pods(SELF_TEST_PLACED);
            let what_if = pods.1.iter().find_map(|k| Some((k.clone(), sh.state.placed_node(k)?)));
            (sh.state.snapshot(), pos, sh.generation, pods, what_if)
        };
        let mut lease = Lease { instance, pos, generation, policy: next };
        let pods = SelfTestPods { pending: &pending, placed: &placed, what_if: what_if.as_ref() };
        let r = self.self_test(&mut lease, &snapshot, pods, settings, deadline(), start);
        match r {
            Ok(report) => Ok((lease, SwapReport { generation: next, ..report })),
            Err(e) => {
                self.shared().release(lease.pos, lease.generation);
                Err(e)
            }
        }
    }

    fn self_test(
        &self,
        lease: &mut Lease,
        snapshot: &[crate::wit::Delta],
        pods: SelfTestPods<'_>,
        settings: &Settings,
        deadline: Instant,
        start: Instant,
    ) -> Result<SwapReport> {
        let chain = |e: &Error| crate::error::chain(e);
        lease.instance.set_deadline(deadline);
        lease.instance.apply(snapshot).map_err(|e| {
            refused("self-test", format!("applying the live view ({} facts) failed: {}", snapshot.len(), chain(&e)))
        })?;
        let mut report = SwapReport {
            generation: 0,
            pending_domains: 0,
            placed_pods: 0,
            what_ifs: 0,
            gone_pods: 0,
            calls: 0,
            slowest_call_us: 0,
            slowest_call: String::new(),
            setup_us: micros(start.elapsed()),
            elapsed_us: 0,
        };
        fn timed(report: &mut SwapReport, what: &dyn Fn() -> String, t: Instant) {
            let took = micros(t.elapsed());
            report.calls += 1;
            if took >= report.slowest_call_us {
                report.slowest_call_us = took;
                report.slowest_call = what();
            }
        }
        let (pending, placed) = (pods.pending, pods.placed);
        let all = pending.iter().map(|p| (true, p)).chain(placed.iter().map(|p| (false, p)));
        for (is_pending, (ns, name)) in all {
            let what = || format!("PreFilter of {} pod {ns}/{name}", if is_pending { "pending" } else { "placed" });
            let t = Instant::now();
            let answer = self.pre_filter(On::Candidate(&mut *lease), ns, name, &[], now_ms(), |st, r| {
                (decision::packed(st, r), r.status.code, r.reason(r.status).to_string())
            });
            timed(&mut report, &what, t);
            let unplaceable =
                matches!(answer, Ok(((_, Code::Unschedulable | Code::UnschedulableAndUnresolvable, _), _)));
            match answer {
                Ok(((_, Code::Error, reason), _)) => {
                    return Err(refused("self-test", format!("{} answered Error: {reason}", what())));
                }
                Ok(_) if is_pending => report.pending_domains += 1,
                Ok(_) => report.placed_pods += 1,
                Err(Error::UnknownPod(_)) => report.gone_pods += 1,
                Err(Error::Compacted) => return Err(Error::Compacted),
                Err(e) => return Err(refused("self-test", format!("{} failed: {}", what(), chain(&e)))),
            }
            // Where kube-scheduler would run PostFilter (a pending pod that fits nowhere), the
            // candidate's gang preemption is asked too, and its victims checked like the live
            // path's: a policy that would evict what the host refuses never decides.
            if is_pending && unplaceable {
                let what = || format!("gang preemption for pending pod {ns}/{name}");
                let t = Instant::now();
                let answer = self.preempt(On::Candidate(&mut *lease), ns, name, now_ms(), |_, _| ());
                timed(&mut report, &what, t);
                match answer {
                    Ok(_) | Err(Error::UnknownPod(_)) => {}
                    Err(Error::Compacted) => return Err(Error::Compacted),
                    Err(e) => return Err(refused("self-test", format!("{} failed: {}", what(), chain(&e)))),
                }
            }
        }
        // Preemption's what-ifs: the overlays PreFilterExtensions sends (RemovePod of a victim,
        // AddPod when it is put back).
        if let Some(((vns, vname), node)) = pods.what_if {
            let remove = Overlay::RemovePod { namespace: vns.clone(), name: vname.clone() };
            let add = Overlay::AddPod { namespace: vns.clone(), name: vname.clone(), node: node.clone() };
            let overlays = [vec![remove.clone()], vec![remove, add]];
            for (ns, name) in pending.iter().take(SELF_TEST_WHAT_IFS) {
                for overlay in &overlays {
                    let what = || {
                        let how = if overlay.len() == 1 { "without" } else { "with re-added" };
                        format!("PreFilter of pending pod {ns}/{name} {how} {vns}/{vname} (a preemption what-if)")
                    };
                    let t = Instant::now();
                    let answer = self.pre_filter(On::Candidate(&mut *lease), ns, name, overlay, now_ms(), |_, r| {
                        (r.status.code, r.reason(r.status).to_string())
                    });
                    timed(&mut report, &what, t);
                    match answer {
                        Ok(((Code::Error, reason), _)) => {
                            return Err(refused("self-test", format!("{} answered Error: {reason}", what())));
                        }
                        Ok(_) => report.what_ifs += 1,
                        Err(Error::UnknownPod(_)) => {}
                        Err(Error::Compacted) => return Err(Error::Compacted),
                        Err(e) => return Err(refused("self-test", format!("{} failed: {}", what(), chain(&e)))),
                    }
                }
            }
        }
        let t = Instant::now();
        let status = self.status(On::Candidate(&mut *lease), |_, _| ());
        timed(&mut report, &|| "the fleet status".to_string(), t);
        match status {
            Ok(_) => {}
            Err(Error::Compacted) => return Err(Error::Compacted),
            Err(e) => return Err(refused("self-test", format!("the fleet status failed: {}", chain(&e)))),
        }
        if settings.plain_pod_steering {
            let t = Instant::now();
            let steer = self.steer(On::Candidate(&mut *lease), true, now_ms(), |_, r| r.status.code);
            timed(&mut report, &|| "steering a plain GPU pod".to_string(), t);
            match steer {
                Ok((Code::Error, _)) => return Err(refused("self-test", "steering a plain GPU pod answered Error")),
                Ok(_) => {}
                Err(Error::Compacted) => return Err(Error::Compacted),
                Err(e) => return Err(refused("self-test", format!("steering a plain GPU pod failed: {}", chain(&e)))),
            }
        }
        Ok(report)
    }

    /// Makes `current` the policy deciding, drops the idle instances of the old one (the busy
    /// ones are dropped when they come back) and keeps the checked instance as the first idle
    /// one when a slot is free.
    fn switch(&self, current: Current, lease: Lease) {
        let next = current.generation;
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = current;
        let old: Vec<Lease> = {
            let mut slots = self.slots();
            let (old, keep) = std::mem::take(&mut slots.idle).into_iter().partition(|l| l.policy != next);
            slots.idle = keep;
            slots.live -= old.len();
            old
        };
        {
            let mut sh = self.shared();
            for l in &old {
                sh.release(l.pos, l.generation);
            }
        }
        drop(old);
        let adopted = {
            let mut slots = self.slots();
            let free = slots.live < self.max_instances;
            if free {
                slots.live += 1;
            }
            free
        };
        if adopted {
            self.checkin(lease);
        } else {
            self.shared().release(lease.pos, lease.generation);
        }
        self.freed.notify_all();
    }
}
