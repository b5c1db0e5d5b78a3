//! The host crate's one error type.

use std::time::Duration;

/// Everything that can fail while hosting the policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component could not be read, compiled or instantiated.
    #[error("loading the policy component failed: {0}")]
    Load(String),
    /// The guest trapped (a panic, an unreachable, a bad memory access); the instance was discarded.
    #[error("policy guest trapped: {0}")]
    Trap(String),
    /// The guest ran past its deadline and was interrupted; the instance was discarded.
    #[error("policy guest exceeded its deadline of {0:?}")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the limit; the instance was discarded.
    #[error("policy guest exceeded its memory limit of {0} bytes")]
    OutOfMemory(usize),
    /// The plugin arguments are invalid; the text names the field.
    #[error("invalid plugin args: {0}")]
    InvalidArgs(String),
    /// A Kubernetes object could not be understood; the text names the object.
    #[error("{0}")]
    InvalidObject(String),
    /// The guest rejected input the host sent it (a host bug, reported rather than hidden).
    #[error("policy guest rejected its input: {0}")]
    InvalidInput(String),
    /// PreFilter was asked about a pod the cluster view does not have.
    #[error("pod {0} is not in the cluster view")]
    UnknownPod(String),
}

impl Error {
    /// True for the failures after which the guest instance was thrown away.
    pub fn is_guest_failure(&self) -> bool {
        matches!(self, Error::Trap(_) | Error::Timeout(_) | Error::OutOfMemory(_))
    }
}

/// `Result` with the host's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
