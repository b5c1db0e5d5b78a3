//! cdplace-host: the library kube-scheduler links (`libcdplace_host.a`, header
//! `include/cdplace.h`). It owns running the cdplace placement policy component inside wasmtime
//! (engine, per-cluster limits, guest instances), the host's view of the cluster with the journal
//! that keeps instances in sync, fact extraction from Kubernetes objects (JSON) and the packed
//! facts the Go adapter sends, decisions and their packed form, and the C ABI. The `cdplace` CLI
//! (`host-shim/cli`) and the test kit (`host-shim/testkit`) build on it; it depends on neither.
//!
//! Modules: [`runtime`] (engine, guest instances), [`limits`] (what bounds a guest call),
//! [`evaluator`] (the policy backend as a trait), [`wit`] (the WIT fact types), [`cluster`] (the
//! view's API),
//! `state` (per-object facts and the deltas they emit), `interner`, `pool` (instances and the
//! journal), [`decision`] (decisions, the node set, `CDP4`), [`preemption`] (gang preemption's victims), [`fleet`] (the fleet status), [`extract`] (Kubernetes objects to
//! facts), [`facts`] (the packed batch `CDF3`), [`overlay`], [`settings`], `wire` (packed
//! primitives), `bindings` and `convert` (the WIT types), [`ffi`] (the only module with
//! `unsafe`), [`error`].

mod bindings;
pub mod cluster;
mod convert;
pub mod decision;
pub mod error;
pub mod evaluator;
pub mod extract;
pub mod facts;
pub mod ffi;
pub mod fleet;
mod interner;
pub mod limits;
pub mod overlay;
pub mod pool;
pub mod preemption;
pub mod quarantine;
pub mod runtime;
pub mod safety;
pub mod settings;
mod state;
mod wire;
pub mod wit;

pub use cdplace_policy::{Code, GpuDemand};
pub use cluster::Cluster;
pub use decision::{CANDIDATE_CLIQUES, Decision, Status};
pub use error::{Error, Result};
pub use evaluator::{Backend, Evaluator};
pub use extract::{Kind, Object};
pub use facts::Record;
pub use fleet::Fleet;
pub use limits::Limits;
pub use overlay::Overlay;
pub use pool::{
    Divergence, JournalBounds, SELF_TEST_PLACED, SHADOW_LOG, SHADOW_QUEUE, ShadowOutcome, ShadowReport, Stats,
    SwapReport,
};
pub use preemption::Preemption;
pub use quarantine::Quarantined;
pub use runtime::{GuestInstance, Runtime};
pub use settings::Settings;
