//! cdplace-host: runs the cdplace placement policy component inside wasmtime, for
//! kube-scheduler (through the C ABI in [`ffi`], header `include/cdplace.h`) and for the
//! `cdplace` CLI.
//!
//! Modules: [`runtime`] (engine, limits, guest instances), [`cluster`] (the host's view, the
//! journal that keeps instances in sync, decisions), [`extract`] (Kubernetes objects to facts),
//! `bindings` and `convert` (the WIT types), [`explain`] (`cdplace explain`), [`ffi`] (the only
//! module with `unsafe`), [`error`].

mod bindings;
pub mod cluster;
mod convert;
pub mod error;
pub mod explain;
pub mod extract;
pub mod ffi;
pub mod runtime;

pub use cdplace_policy::Code;
pub use cluster::{Backend, Cluster, Decision, Overlay, Status};
pub use error::{Error, Result};
pub use extract::Kind;
pub use runtime::{GuestInstance, Limits, Runtime};

/// Where `make guest` leaves the policy component, relative to the workspace root.
pub const GUEST_WASM: &str = "target/wasm32-wasip2/guest/cdplace_guest.wasm";

/// The policy component next to the running executable, else in this workspace's build output.
pub fn default_guest_path() -> std::path::PathBuf {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("cdplace_guest.wasm")))
        .filter(|p| p.exists());
    beside.unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(GUEST_WASM))
}
