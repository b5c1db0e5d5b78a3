//! The policy backend as a trait: an [`Evaluator`] is one policy instance (configure, apply
//! deltas, PreFilter, gang preemption, the fleet status), a [`Backend`] makes them for a cluster under its [`Limits`]. The
//! production backend is the WebAssembly component ([`Runtime`] making [`GuestInstance`]s); the
//! test kit implements the same traits with the policy compiled natively, to compare the two.
//!
//! Deltas cross in the shape the guest takes ([`wit::Delta`]): the host converts each change
//! once, when it is journaled, not per instance per call.

use std::sync::Arc;

use cdplace_policy::{FleetStatus, OverlayOp, PreFilterResult, Preemption, StrId};

use crate::Result;
use crate::limits::Limits;
use crate::runtime::{GuestInstance, Runtime};
use crate::settings::Settings;
use crate::wit;

/// One policy instance, used by one caller at a time. After an error from a call, the host
/// drops it.
pub trait Evaluator: Send + std::fmt::Debug {
    /// Every later call must end by `until` (the host's per-call budget, shared by the calls of
    /// one decision: snapshot or catch-up, then the decision); a call past it is interrupted
    /// and fails with [`crate::Error::Timeout`]. Backends that cannot interrupt ignore it.
    fn set_deadline(&mut self, _until: std::time::Instant) {}
    /// The instance's memory in bytes (a wasm instance's linear memory), when the backend knows it.
    fn memory_bytes(&self) -> Option<usize> {
        None
    }
    /// Validates the plugin arguments (JSON, every field) and makes them current.
    fn configure(&mut self, args: &str) -> Result<Settings>;
    /// Applies changes to the instance's view, in order.
    fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()>;
    /// Decides where the pod with this key may go, as if `overlay` were applied, at the host's
    /// time `now_ms` (Unix milliseconds).
    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> Result<PreFilterResult>;
    /// Where a pod without a ComputeDomain should go (`gpus`: it uses GPUs), at the host's time.
    fn steer(&mut self, gpus: bool, now_ms: i64) -> Result<PreFilterResult>;
    /// Gang preemption for the pod with this key at the host's time `now_ms`: the victims, or
    /// why none help. Changes nothing in the view.
    fn preempt(&mut self, pod: StrId, now_ms: i64) -> Result<Preemption>;
    /// The fleet status (metrics, ComputeDomain Events) at the host's time. Changes nothing.
    fn status(&mut self, now_ms: i64) -> Result<FleetStatus>;
}

/// Makes the evaluators of a cluster.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// A fresh evaluator whose calls run under `limits`.
    fn evaluator(self: Arc<Self>, limits: Limits) -> Result<Box<dyn Evaluator>>;
}

impl Evaluator for GuestInstance {
    fn set_deadline(&mut self, until: std::time::Instant) {
        GuestInstance::set_deadline(self, until)
    }

    fn memory_bytes(&self) -> Option<usize> {
        Some(GuestInstance::linear_memory_bytes(self))
    }

    fn configure(&mut self, args: &str) -> Result<Settings> {
        GuestInstance::configure(self, args)
    }

    fn apply(&mut self, deltas: &[wit::Delta]) -> Result<()> {
        GuestInstance::apply(self, deltas)
    }

    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> Result<PreFilterResult> {
        GuestInstance::pre_filter(self, pod, overlay, now_ms)
    }

    fn steer(&mut self, gpus: bool, now_ms: i64) -> Result<PreFilterResult> {
        GuestInstance::steer(self, gpus, now_ms)
    }

    fn preempt(&mut self, pod: StrId, now_ms: i64) -> Result<Preemption> {
        GuestInstance::preempt(self, pod, now_ms)
    }

    fn status(&mut self, now_ms: i64) -> Result<FleetStatus> {
        GuestInstance::status(self, now_ms)
    }
}

/// The component: each evaluator is a new instance.
impl Backend for Runtime {
    fn evaluator(self: Arc<Self>, limits: Limits) -> Result<Box<dyn Evaluator>> {
        Ok(Box::new(self.instantiate(limits)?))
    }
}
