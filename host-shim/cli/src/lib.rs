//! cdplace-cli: the `cdplace` command line. It owns reading the cluster (a live one through a
//! kubeconfig, or snapshots as `kubectl get -o yaml|json` writes them) and rendering reports; every decision comes from the
//! policy component through `cdplace-host`, exactly as kube-scheduler runs it.
//!
//! Modules: [`explain`] (`cdplace explain`, and building the view both commands share),
//! [`status`] (`cdplace status`, the rack map), [`snapshot`] (reading snapshot files), [`live`]
//! (reading a live cluster through a kubeconfig with kube-rs), [`owners`] (workload owners and
//! their sizes, which the scheduler's Go adapter resolves).

pub mod explain;
pub mod live;
pub mod owners;
pub mod snapshot;
pub mod status;

/// Where `make guest` leaves the policy component, relative to the workspace root.
pub const GUEST_WASM: &str = "target/wasm32-wasip2/guest/cdplace_guest.wasm";

/// The policy component beside the running executable (`make build` puts it there), when it is.
pub fn default_guest_path() -> Option<std::path::PathBuf> {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("cdplace_guest.wasm"))).filter(|p| p.exists())
}
