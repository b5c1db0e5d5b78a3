//! [`Policy`]: the world `policy` of `wit/cdplace.wit` as a Rust trait over the plain types.

use alloc::vec::Vec;

use cdplace_policy::{Args, Delta, FleetStatus, OverlayOp, PreFilterResult, Preemption, Result, StrId, View};

/// One method per export of the world `policy`, over the plain types of `cdplace-policy`.
///
/// Every method but [`Policy::view`] has a default: the shipped rules of the wrapped [`View`].
/// Override the ones your policy changes. The host calls one instance from one thread at a time,
/// so `&mut self` is all the state a policy needs; it must not panic (a panic traps, and the
/// host discards the instance and fails the pod's cycle closed).
pub trait Policy {
    /// The shipped policy's view this policy wraps: it keeps the facts the host sends.
    fn view(&mut self) -> &mut View;

    /// `configure`: validates the plugin arguments (JSON) and makes them current. Returns the
    /// shipped arguments, from which the component reports the host's settings. A policy with
    /// arguments of its own reads them from `policyArgs` ([`Args::policy_args`]).
    fn configure(&mut self, args: &str) -> Result<Args> {
        let a = Args::parse(args)?;
        self.view().set_args(a.clone());
        Ok(a)
    }

    /// `apply`: the changes the host saw since the last call, in order.
    fn apply(&mut self, deltas: Vec<Delta>) -> Result<()> {
        self.view().apply(deltas)
    }

    /// `pre-filter`: where the pod with this key may go, as if `overlay` were applied.
    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
        self.view().pre_filter(pod, overlay, now_ms)
    }

    /// `steer`: where a pod without a ComputeDomain should go.
    fn steer(&mut self, gpus: bool, now_ms: i64) -> PreFilterResult {
        self.view().steer(gpus, now_ms)
    }

    /// `preempt`: gang preemption for the pod with this key.
    fn preempt(&mut self, pod: StrId, now_ms: i64) -> Preemption {
        self.view().preempt(pod, now_ms)
    }

    /// `status`: the fleet for metrics and Events.
    fn status(&mut self, now_ms: i64) -> FleetStatus {
        self.view().status(now_ms)
    }
}

/// The shipped policy: every rule as `cdplace-policy` has it.
impl Policy for View {
    fn view(&mut self) -> &mut View {
        self
    }
}
