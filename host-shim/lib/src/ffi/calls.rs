//! The policy calls on a cluster (PreFilter, steering, preemption, the fleet status) and how the
//! cluster stands (its stats and the objects it quarantined).

use super::{
    bad_call, bytes, cdplace_bytes_t, cdplace_cluster_t, cdplace_error_t, cdplace_stats_t, cluster, give, guard, text,
    write,
};
use crate::overlay;
use crate::pool::now_ms;

/// Gang preemption (PostFilter) for the pod `ns/name`: writes the victims as JSON to `out`
/// (free with `cdplace_bytes_delete`), `{"domain": S|null, "plan": {"clique": S, "node": S,
/// "pods": [S], "domains": [S], "gpus": N, "priority": N, "trays": N}|null, "reason": S}`. The
/// view is not changed. Errors as for `cdplace_cluster_pre_filter`.
///
/// # Safety
/// `c` must be a live cluster; each string valid for its length; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_preempt(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    // SAFETY: per the contract above.
    unsafe { cdplace_cluster_preempt_at(c, ns, ns_len, name, name_len, now_ms(), out) }
}

/// `cdplace_cluster_preempt` at the policy time `now_ms` (Unix milliseconds) instead of the
/// host's clock (a recorder writes the time down; replay asks again at it).
///
/// # Safety
/// As `cdplace_cluster_preempt`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_preempt_at(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    now_ms: i64,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, ns, name) = unsafe { (cluster(c)?, text(ns, ns_len, "namespace")?, text(name, name_len, "name")?) };
        give(out, || Ok(c.preempt_at(ns, name, now_ms)?.to_json().into_bytes()))
    })
}

/// The fleet status as JSON in `out` (free with `cdplace_bytes_delete`); layout in the header.
/// Errors: a guest trap, timeout or memory exhaustion (the instance is discarded).
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_status(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c)? };
        give(out, || Ok(c.status()?.to_json().into_bytes()))
    })
}

/// PreFilter for the pod `ns/name`, as if the packed overlay (layout in the header; zero bytes
/// for none) were applied. Writes the packed decision `CDP4` to `out` (free with
/// `cdplace_bytes_delete`) and, when `generation` is not NULL, the policy generation that
/// decided. A guest trap, timeout or memory exhaustion is an error (`CDPLACE_ERROR_TRAP`,
/// `_TIMEOUT`, `_OUT_OF_MEMORY`); the instance is discarded and the next call uses a fresh one.
///
/// # Safety
/// `c` must be a live cluster; each string and the overlay valid for its length; `out` writable;
/// `generation` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_pre_filter(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    overlay: *const u8,
    overlay_len: usize,
    out: *mut cdplace_bytes_t,
    generation: *mut u64,
) -> *mut cdplace_error_t {
    // SAFETY: per the contract above.
    unsafe {
        cdplace_cluster_pre_filter_at(c, ns, ns_len, name, name_len, overlay, overlay_len, now_ms(), out, generation)
    }
}

/// `cdplace_cluster_pre_filter` at the policy time `now_ms` (Unix milliseconds) instead of the
/// host's clock (a recorder writes the time down; replay asks again at it).
///
/// # Safety
/// As `cdplace_cluster_pre_filter`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cdplace_cluster_pre_filter_at(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    overlay: *const u8,
    overlay_len: usize,
    now_ms: i64,
    out: *mut cdplace_bytes_t,
    generation: *mut u64,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, ns, name, overlay) = unsafe {
            (
                cluster(c)?,
                text(ns, ns_len, "namespace")?,
                text(name, name_len, "name")?,
                bytes(overlay, overlay_len, "overlay")?,
            )
        };
        give(out, || {
            let (packed, g) = c.pre_filter_packed_at(ns, name, &overlay::decode(overlay)?, now_ms)?;
            tell(generation, g);
            Ok(packed)
        })
    })
}

/// Plain-pod steering: where a pod without a ComputeDomain should go; `gpus` is 1 when it uses
/// GPUs, else 0. Writes the packed decision (`CDP4`, as `cdplace_cluster_pre_filter`) to `out`,
/// and the generation as there. Errors as for PreFilter (no unknown pod).
///
/// # Safety
/// `c` must be a live cluster; `out` writable; `generation` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_steer(
    c: *const cdplace_cluster_t,
    gpus: u8,
    out: *mut cdplace_bytes_t,
    generation: *mut u64,
) -> *mut cdplace_error_t {
    // SAFETY: per the contract above.
    unsafe { cdplace_cluster_steer_at(c, gpus, now_ms(), out, generation) }
}

/// `cdplace_cluster_steer` at the policy time `now_ms` (Unix milliseconds) instead of the host's
/// clock.
///
/// # Safety
/// As `cdplace_cluster_steer`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_steer_at(
    c: *const cdplace_cluster_t,
    gpus: u8,
    now_ms: i64,
    out: *mut cdplace_bytes_t,
    generation: *mut u64,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c)? };
        give(out, || {
            if gpus > 1 {
                return Err(bad_call("gpus must be 0 or 1"));
            }
            let (packed, g) = c.steer_packed_at(gpus == 1, now_ms)?;
            tell(generation, g);
            Ok(packed)
        })
    })
}

/// How the cluster's journal and instances stand now.
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_stats(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_stats_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c)? };
        write(out, || {
            let s = c.stats();
            Ok(cdplace_stats_t {
                journal_length: s.journal_length as u64,
                idle_instances: s.idle_instances as u64,
                busy_instances: s.busy_instances as u64,
                quarantined_objects: s.quarantined_objects as u64,
                policy_violations: s.policy_violations,
            })
        })
    })
}

/// The objects quarantined since the last call, as JSON to `out`: `[{"kind", "namespace",
/// "name", "error"}]` (each object once).
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_take_quarantined(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c)? };
        give(out, || Ok(serde_json::to_vec(&c.take_quarantined()).expect("quarantined objects serialize")))
    })
}

/// Writes `g` to `generation` unless it is NULL.
fn tell(generation: *mut u64, g: u64) {
    if !generation.is_null() {
        // SAFETY: non-null, and the caller passes it writable (the functions' contracts).
        unsafe { generation.write(g) };
    }
}
