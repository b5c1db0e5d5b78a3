//! [`Cluster`]: the host's view of one scheduler profile's cluster and the policy instances that
//! evaluate it, shareable between threads. Objects come in as JSON ([`Cluster::apply`], from a
//! snapshot file) or as a packed facts batch ([`Cluster::apply_facts`], from the Go adapter's
//! informers), both as [`Record`]s through one path into the [`State`](crate::state); PreFilter
//! runs on an instance of the [`Pool`](crate::pool).

use std::sync::Arc;

use serde_json::Value;

use crate::decision::{self, Decision};
use crate::evaluator::Backend;
use crate::extract::{self, Kind};
use crate::facts::{self, Record};
use crate::fleet::{self, Fleet};
use crate::limits::Limits;
use crate::overlay::Overlay;
use crate::pool::{JournalBounds, On, Pool, ShadowReport, Stats, SwapReport, now_ms};
use crate::preemption::{self, Preemption};
use crate::quarantine::Quarantined;
use crate::settings::Settings;
use crate::{Error, Result};

/// The cluster view plus the instances that evaluate it.
#[derive(Debug)]
pub struct Cluster {
    settings: Settings,
    pool: Pool,
}

impl Cluster {
    /// A cluster view evaluated by `backend` (in production the component's [`crate::Runtime`])
    /// under `args` (the plugin arguments as JSON, every field; empty for defaults). The policy
    /// validates them: invalid arguments fail here with its exact message. Its instances run
    /// under the limits the arguments set.
    pub fn new(backend: Arc<dyn Backend>, args: &str) -> Result<Self> {
        let (pool, settings) = Pool::new(backend, args)?;
        Ok(Cluster { settings, pool })
    }

    /// What the validated arguments say for the host.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The limits every guest call runs under.
    pub fn limits(&self) -> Limits {
        self.pool.limits()
    }

    /// Adds or updates an object (JSON as the API server writes it). Returns false for kinds
    /// cdplace does not read; an object it cannot understand is an error naming it.
    pub fn apply(&self, obj: &Value) -> Result<bool> {
        let Some(o) = extract::extract(obj, &self.settings)? else { return Ok(false) };
        let r = Record::Upsert(o);
        self.pool.lift(std::slice::from_ref(&r));
        self.pool.change(|st, out| st.apply(out, r));
        Ok(true)
    }

    /// Applies a packed facts batch (`CDF3`, see [`crate::facts`]) in order. The whole batch is
    /// read first: a malformed one is an error naming the byte offset and record, and nothing
    /// of it is applied.
    pub fn apply_facts(&self, batch: &[u8]) -> Result<()> {
        let records = facts::decode(batch)?;
        self.pool.lift(&records);
        self.pool.change(|st, out| {
            for r in records {
                st.apply(out, r);
            }
        });
        Ok(())
    }

    /// Removes an object.
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        let r = Record::Remove { kind, namespace: namespace.to_string(), name: name.to_string() };
        self.pool.lift(std::slice::from_ref(&r));
        self.pool.change(|st, out| st.apply(out, r));
    }

    /// Marks a pod assumed on a node (Reserve), so the next decisions count it at once.
    pub fn assume(&self, namespace: &str, name: &str, node: &str) -> Result<()> {
        if self.pool.change(|st, out| st.assume(out, namespace, name, node)) {
            Ok(())
        } else {
            Err(Error::UnknownPod(format!("{namespace}/{name}")))
        }
    }

    /// Forgets an assumption (Unreserve).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.pool.change(|st, out| st.forget(out, namespace, name));
    }

    /// Decides where a pod may go (PreFilter), as if `overlay` were applied. A guest failure
    /// (trap, timeout, memory) is an error and the instance is discarded; the next call gets a
    /// fresh one.
    pub fn pre_filter(&self, namespace: &str, name: &str, overlay: &[Overlay]) -> Result<Decision> {
        Ok(self.pool.pre_filter(On::Pool, namespace, name, overlay, now_ms(), decision::decision)?.0)
    }

    /// [`Cluster::pre_filter`] with the policy generation that decided it.
    pub fn pre_filter_with_generation(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
    ) -> Result<(Decision, u64)> {
        self.pool.pre_filter(On::Pool, namespace, name, overlay, now_ms(), decision::decision)
    }

    /// [`Cluster::pre_filter`] answered in the packed `CDP4` form (see [`crate::decision`]): what
    /// the Go adapter reads; no per-node strings are built.
    pub fn pre_filter_packed(&self, namespace: &str, name: &str, overlay: &[Overlay]) -> Result<Vec<u8>> {
        Ok(self.pre_filter_packed_at(namespace, name, overlay, now_ms())?.0)
    }

    /// [`Cluster::pre_filter_packed`] at the policy time `now_ms` (Unix milliseconds) instead of
    /// the host's clock (a recorded decision asked again by `cdplace replay` at its own time),
    /// with the policy generation that decided it.
    pub fn pre_filter_packed_at(
        &self,
        namespace: &str,
        name: &str,
        overlay: &[Overlay],
        now_ms: i64,
    ) -> Result<(Vec<u8>, u64)> {
        self.pool.pre_filter(On::Pool, namespace, name, overlay, now_ms, decision::packed)
    }

    /// Plain-pod steering: where a pod without a ComputeDomain should go (`gpus`: it uses GPUs).
    /// The answer is the same for every such pod on the same view.
    pub fn steer(&self, gpus: bool) -> Result<Decision> {
        Ok(self.pool.steer(On::Pool, gpus, now_ms(), decision::decision)?.0)
    }

    /// [`Cluster::steer`] in the packed `CDP4` form.
    pub fn steer_packed(&self, gpus: bool) -> Result<Vec<u8>> {
        Ok(self.steer_packed_at(gpus, now_ms())?.0)
    }

    /// [`Cluster::steer_packed`] at the policy time `now_ms` (Unix milliseconds), with the policy
    /// generation that decided it.
    pub fn steer_packed_at(&self, gpus: bool, now_ms: i64) -> Result<(Vec<u8>, u64)> {
        self.pool.steer(On::Pool, gpus, now_ms, decision::packed)
    }

    /// Replaces the policy while the cluster serves: `backend` (in production a newly compiled
    /// [`crate::Runtime`]) is checked first, off the decision path (instantiated under the
    /// cluster's limits, configured with its arguments to the same host settings, and
    /// self-tested on the live view: see [`crate::pool`]); when every check passes, the policy
    /// generation goes up and every later call is decided by it, while calls in flight finish on
    /// the old one. The view and the journal stay (nothing is fed again). A refused policy
    /// changes nothing: [`Error::Refused`] names the check and why. One swap at a time.
    pub fn swap(&self, backend: Arc<dyn Backend>) -> Result<SwapReport> {
        self.pool.swap(backend, &self.settings)
    }

    /// Sets a shadow policy (`Some`, after the same checks as [`Cluster::swap`]; it replaces any
    /// shadow set before) or clears it (`None`). A shadow is asked every live PreFilter question
    /// of a ComputeDomain pod again, on the same view, by [`Cluster::shadow_step`], and never
    /// acts; see `pool::shadow`. A refused one changes nothing ([`Error::Refused`]).
    pub fn set_shadow(&self, backend: Option<Arc<dyn Backend>>) -> Result<Option<SwapReport>> {
        self.pool.set_shadow(backend, &self.settings)
    }

    /// Answers the oldest live decision waiting for the shadow policy and compares; false when
    /// none waited (or no shadow is set). One guest call: call it off the scheduling path.
    pub fn shadow_step(&self) -> bool {
        self.pool.shadow_step()
    }

    /// The shadow's counts and divergences since the last call (they are taken).
    pub fn shadow_take(&self) -> ShadowReport {
        self.pool.shadow_take()
    }

    /// The generation of the policy deciding now: 1 for the one the cluster was made with, one
    /// more for each swap.
    pub fn policy_generation(&self) -> u64 {
        self.pool.policy_generation()
    }

    /// Gang preemption for a pod (PostFilter): the whole lower-priority domains and plain GPU
    /// pods to evict so its domain fits one clique, or why none help. A guest failure is an
    /// error and the instance is discarded, as for PreFilter. Nothing in the view changes.
    pub fn preempt(&self, namespace: &str, name: &str) -> Result<Preemption> {
        self.preempt_at(namespace, name, now_ms())
    }

    /// [`Cluster::preempt`] at the policy time `now_ms` (Unix milliseconds).
    pub fn preempt_at(&self, namespace: &str, name: &str, now_ms: i64) -> Result<Preemption> {
        Ok(self.pool.preempt(On::Pool, namespace, name, now_ms, preemption::resolve)?.0)
    }

    /// The fleet status: cliques' trays, the largest domain that could start now, reserved
    /// trays, each ComputeDomain's phase and why a pending one waits (metrics and Events). It
    /// decides once per pending domain: ask at most about once a second. Errors as for PreFilter.
    pub fn status(&self) -> Result<Fleet> {
        Ok(self.pool.status(On::Pool, fleet::resolve)?.0)
    }

    /// Every node with its clique label value, sorted by name.
    pub fn nodes(&self) -> Vec<(String, Option<String>)> {
        self.pool.shared().state.nodes()
    }

    /// Whether the view has this pod.
    pub fn has_pod(&self, namespace: &str, name: &str) -> bool {
        self.pool.shared().state.pod(namespace, name).is_some()
    }

    /// Lowers the string compaction threshold (tests exercise compaction without 50,000 pods).
    #[doc(hidden)]
    pub fn compact_strings_above(&self, n: usize) {
        self.pool.compact_strings_above(n);
    }

    /// Sets when the journal is cut (tests exercise the bounds with a few changes).
    #[doc(hidden)]
    pub fn bound_journal(&self, bounds: JournalBounds) {
        self.pool.bound_journal(bounds);
    }

    /// How the journal and the policy instances stand now (cheap: two short locks).
    pub fn stats(&self) -> Stats {
        self.pool.stats()
    }

    /// The objects quarantined since the last call (each once): applying their facts trapped
    /// the guest, so they are out of the view until their next update or deletion.
    pub fn take_quarantined(&self) -> Vec<Quarantined> {
        self.pool.take_quarantined()
    }

    /// How many strings are interned now.
    #[doc(hidden)]
    pub fn interned_strings(&self) -> usize {
        self.pool.shared().state.interner.len()
    }
}
