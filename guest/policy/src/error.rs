//! The policy's one error type.

use alloc::string::String;
use core::fmt;

/// What can go wrong in the policy itself (as opposed to a pod being unschedulable, which is a
/// verdict, not an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The plugin arguments are invalid; the text names the field.
    InvalidArgs(String),
    /// A delta does not fit the view, e.g. it names a string id the host never sent.
    InvalidInput(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgs(m) => write!(f, "invalid plugin args: {m}"),
            Error::InvalidInput(m) => write!(f, "invalid input: {m}"),
        }
    }
}

impl core::error::Error for Error {}

/// `Result` with the policy's error.
pub type Result<T, E = Error> = core::result::Result<T, E>;
