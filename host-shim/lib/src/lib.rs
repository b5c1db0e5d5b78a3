//! cdplace-host: the library kube-scheduler links (`libcdplace_host.a`, header
//! `include/cdplace.h`). It owns running the cdplace placement policy component inside wasmtime
//! (engine, limits, guest instances), the host's view of the cluster with the journal that keeps
//! instances in sync, fact extraction from Kubernetes objects, and the C ABI. The `cdplace` CLI
//! (`host-shim/cli`) and the test kit (`host-shim/testkit`) build on it; it depends on neither.
//!
//! Modules: [`runtime`] (engine, limits, guest instances), [`cluster`] (the host's view, the
//! journal that keeps instances in sync, decisions), [`extract`] (Kubernetes objects to facts),
//! `bindings` and `convert` (the WIT types), [`ffi`] (the only module with `unsafe`), [`error`].

mod bindings;
pub mod cluster;
mod convert;
pub mod error;
pub mod extract;
pub mod ffi;
pub mod runtime;

pub use cdplace_policy::Code;
pub use cluster::{Backend, Cluster, Decision, Overlay, Status};
pub use error::{Error, Result};
pub use extract::Kind;
pub use runtime::{GuestInstance, Limits, Runtime};
