//! The bounds the host puts on every guest call, from the plugin arguments (`guestMemoryLimitMiB`,
//! `guestCallTimeout`); `runtime` enforces them (a memory limiter, epoch deadlines).

use std::time::Duration;

/// Bounds on every guest call of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory a guest instance may have.
    pub memory_bytes: usize,
    /// Longest one guest call may run before it is interrupted.
    pub deadline: Duration,
}

/// The limits of the default plugin arguments (`guestMemoryLimitMiB`, `guestCallTimeout`).
impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: (cdplace_policy::args::DEFAULT_MEMORY_LIMIT_MIB as usize) << 20,
            deadline: Duration::from_millis(u64::from(cdplace_policy::args::DEFAULT_CALL_TIMEOUT_MS)),
        }
    }
}
