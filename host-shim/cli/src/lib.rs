//! cdplace-cli: the `cdplace` command line, also built as `kubectl-cdplace` so that
//! `kubectl cdplace ...` runs it. It owns reading the cluster (a live one through a kubeconfig, or
//! snapshots as `kubectl get -o yaml|json` writes them) and rendering reports; every decision comes
//! from the policy component through `cdplace-host`, exactly as kube-scheduler runs it. The
//! component is embedded in the executable ([`EMBEDDED_GUEST`]), so the binary needs nothing
//! beside it.
//!
//! Modules: [`cli`] (the command line both executables run), [`explain`] (`cdplace explain`, and
//! building the view both commands share), [`status`] (`cdplace status`, the rack map),
//! [`output`] (the versioned JSON/YAML documents), [`snapshot`] (reading snapshot files),
//! [`live`] (reading a live cluster through a kubeconfig with kube-rs), [`owners`] (workload
//! owners and their sizes, which the scheduler's Go adapter resolves), [`replay`] (`cdplace
//! replay`: a recorded trace asked again), [`policy`] (`cdplace policy check`, the conformance
//! suite for any policy component).

pub mod cli;
pub mod explain;
pub mod live;
pub mod output;
pub mod owners;
pub mod policy;
pub mod replay;
pub mod snapshot;
pub mod status;

/// Where `make guest` leaves the policy component, relative to the workspace root.
pub const GUEST_WASM: &str = "target/wasm32-wasip2/guest/cdplace_guest.wasm";

/// The policy component built into this executable (`build.rs` names the file: what `make guest`
/// built, or `$CDPLACE_GUEST_WASM`); `--policy FILE` overrides it.
pub static EMBEDDED_GUEST: &[u8] = include_bytes!(env!("CDPLACE_EMBEDDED_GUEST"));
