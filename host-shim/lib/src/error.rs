//! The host crate's one error type. A wasmtime error that caused a failure is kept as its
//! [`source`](std::error::Error::source), not repeated in the message; [`chain`] renders a
//! message with its causes (what the C ABI returns).

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can fail while hosting the policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component file could not be read.
    #[error("reading the policy component {} failed", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The component could not be compiled or linked (not a component of the cdplace world, or it
    /// imports something the host does not give).
    #[error("loading the policy component failed")]
    Load(#[source] wasmtime::Error),
    /// The component compiled but does not implement the world this host was built against
    /// (another WIT version, or not a cdplace policy): wasmtime's instantiate-pre found its
    /// exports or imports do not match.
    #[error(
        "the component does not match the {} world this host was built against (a policy built against another WIT version, one importing what the host does not give, or not a cdplace policy)",
        crate::runtime::WORLD
    )]
    World(#[source] wasmtime::Error),
    /// A new policy was refused before it decided anything: `check` names the check that failed
    /// (`instantiate`, `configure`, `settings`, `self-test`), `reason` says why. The old policy
    /// goes on deciding.
    #[error("policy refused ({check}): {reason}")]
    Refused {
        /// The check that failed.
        check: &'static str,
        /// Why, with the guest's error when there was one.
        reason: String,
    },
    /// The view's strings were compacted during a self-test (its instance must start from a new
    /// snapshot); internal: the self-test starts again.
    #[error("the view's strings were compacted during the call")]
    Compacted,
    /// The guest trapped (a panic, an unreachable, a bad memory access); the instance was discarded.
    #[error("policy guest trapped: {what}")]
    Trap {
        /// What the trap was, in words.
        what: String,
        #[source]
        source: wasmtime::Error,
    },
    /// The guest ran past its deadline and was interrupted; the instance was discarded.
    #[error("policy guest exceeded its deadline of {deadline:?}")]
    Timeout {
        deadline: Duration,
        #[source]
        source: wasmtime::Error,
    },
    /// The guest tried to grow its memory past the limit; the instance was discarded.
    #[error("policy guest exceeded its memory limit of {limit} bytes")]
    OutOfMemory {
        /// The limit, in bytes.
        limit: usize,
        #[source]
        source: wasmtime::Error,
    },
    /// Every policy instance (`maxPolicyInstances`) stayed in a call until the call's deadline.
    #[error("all {instances} policy instances busy; none came free within {waited:?} (maxPolicyInstances)")]
    Busy {
        /// `maxPolicyInstances`.
        instances: usize,
        /// How long the call waited.
        waited: Duration,
    },
    /// The plugin arguments are invalid; the text (the policy's) names the field.
    #[error("invalid plugin args: {0}")]
    InvalidArgs(String),
    /// A Kubernetes object could not be understood; the text names the object.
    #[error("{0}")]
    InvalidObject(String),
    /// The guest rejected input the host sent it (a host bug, reported rather than hidden).
    #[error("policy guest rejected its input: {0}")]
    InvalidInput(String),
    /// PreFilter, Reserve or a lookup was asked about a pod the cluster view does not have.
    #[error("pod {0} is not in the cluster view")]
    UnknownPod(String),
    /// The policy's answer allowed a node the driver's kubelet Prepare would refuse (see
    /// [`crate::safety`]); the answer was not used and the pod fails closed.
    #[error("{0}")]
    PolicyViolation(crate::safety::Violation),
    /// A packed facts batch (`CDF3`) could not be read; nothing of it was applied.
    #[error("malformed facts batch{}", at(*record, *offset, message))]
    MalformedFacts {
        /// The index of the record being read, when the failure is inside one.
        record: Option<usize>,
        /// Where the unreadable field starts.
        offset: usize,
        message: String,
    },
    /// A packed overlay could not be read.
    #[error("malformed overlay{}", at(*entry, *offset, message))]
    MalformedOverlay {
        /// The index of the entry being read, when the failure is inside one.
        entry: Option<usize>,
        /// Where the unreadable field starts.
        offset: usize,
        message: String,
    },
}

fn at(index: Option<usize>, offset: usize, message: &str) -> String {
    match index {
        Some(i) => format!(": record {i} at byte {offset}: {message}"),
        None => format!(" at byte {offset}: {message}"),
    }
}

impl Error {
    /// True for the failures after which the guest instance was thrown away.
    pub fn is_guest_failure(&self) -> bool {
        matches!(self, Error::Trap { .. } | Error::Timeout { .. } | Error::OutOfMemory { .. })
    }
}

/// `Result` with the host's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error's message followed by each of its causes, `": "` between them, on one line.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        // A cause that repeats its predecessor (wrappers that print their inner error) adds nothing.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(text.lines().next().unwrap_or(""));
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_appends_causes_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = Error::Read { path: "/x.wasm".into(), source: io };
        assert_eq!(e.to_string(), "reading the policy component /x.wasm failed");
        assert_eq!(chain(&e), "reading the policy component /x.wasm failed: No such file or directory");
        let e = Error::MalformedFacts { record: Some(2), offset: 17, message: "gpus: truncated".into() };
        assert_eq!(chain(&e), "malformed facts batch: record 2 at byte 17: gpus: truncated");
        let e = Error::MalformedOverlay { entry: None, offset: 0, message: "n: truncated".into() };
        assert_eq!(e.to_string(), "malformed overlay at byte 0: n: truncated");
    }
}
