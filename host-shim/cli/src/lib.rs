//! cdplace-cli: the `cdplace` command line. It owns reading cluster snapshots (YAML or JSON as
//! `kubectl get -o yaml` writes them) and rendering reports; every decision comes from the
//! policy component through `cdplace-host`, exactly as kube-scheduler runs it.
//!
//! Modules: [`explain`] (`cdplace explain`), [`snapshot`] (reading snapshot files).

pub mod explain;
pub mod snapshot;

/// Where `make guest` leaves the policy component, relative to the workspace root.
pub const GUEST_WASM: &str = "target/wasm32-wasip2/guest/cdplace_guest.wasm";

/// The policy component beside the running executable (`make build` puts it there), when it is.
pub fn default_guest_path() -> Option<std::path::PathBuf> {
    std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("cdplace_guest.wasm"))).filter(|p| p.exists())
}
