//! Runtimes and clusters: made, freed, and a cluster's validated settings.

use super::{
    bad_call, bytes, cdplace_bytes_t, cdplace_cluster_t, cdplace_error_t, cdplace_runtime_t, cluster, delete, give,
    guard, handle, text, write,
};
use crate::cluster::Cluster;
use crate::runtime::Runtime;

/// The library's `CDPLACE_ABI_VERSION`.
#[unsafe(no_mangle)]
pub extern "C" fn cdplace_abi_version() -> u32 {
    super::ABI_VERSION
}

/// Compiles a policy component (`.wasm` bytes) once. Limits are per cluster, from its arguments.
///
/// # Safety
/// `wasm` must be valid for `wasm_len` bytes; `out` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_runtime_new(
    wasm: *const u8,
    wasm_len: usize,
    out: *mut *mut cdplace_runtime_t,
) -> *mut cdplace_error_t {
    guard(|| {
        if wasm.is_null() || wasm_len == 0 || out.is_null() {
            return Err(bad_call("wasm and out must not be NULL"));
        }
        // SAFETY: the caller guarantees `wasm` is valid for `wasm_len` bytes.
        let wasm = unsafe { bytes(wasm, wasm_len, "wasm") }?;
        handle(out, || Ok(cdplace_runtime_t(Runtime::new(wasm)?)))
    })
}

/// Frees a runtime. Clusters made from it keep it alive until they are freed.
///
/// # Safety
/// `rt` must be NULL or a runtime this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_runtime_delete(rt: *mut cdplace_runtime_t) {
    // SAFETY: per the contract above.
    unsafe { delete(rt) }
}

/// Makes a cluster view evaluated by the runtime's component under the plugin arguments
/// (`args`: the raw pluginConfig args as JSON, every field; empty for defaults). The policy is
/// the only validator: invalid arguments give `CDPLACE_ERROR_INVALID_ARGS` with its message.
/// The cluster's instances run under the limits of those arguments.
///
/// # Safety
/// `rt` must be a live runtime; `args` valid for `args_len` bytes; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_new(
    rt: *const cdplace_runtime_t,
    args: *const u8,
    args_len: usize,
    out: *mut *mut cdplace_cluster_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let Some(rt) = (unsafe { rt.as_ref() }) else { return Err(bad_call("runtime is NULL")) };
        // SAFETY: per the contract above.
        let args = unsafe { text(args, args_len, "args") }?;
        handle(out, || Ok(cdplace_cluster_t(Cluster::new(rt.0.clone(), args)?)))
    })
}

/// Frees a cluster.
///
/// # Safety
/// `c` must be NULL or a cluster this library returned, not yet freed, and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_delete(c: *mut cdplace_cluster_t) {
    // SAFETY: per the contract above.
    unsafe { delete(c) }
}

/// The validated arguments the host needs, as JSON: `{"cliqueLabel", "gpuResourceName",
/// "gpuDriver", "computeDomainDriver", "sizeAnnotation", "guestPath" (string|null),
/// "callTimeoutMs", "memoryLimitMiB"}`.
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_settings(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let json = unsafe { cluster(c) }?.settings().to_json();
        give(out, || Ok(json.into_bytes()))
    })
}

/// Replaces the cluster's policy with the runtime's component after checking it on the live
/// view ([`Cluster::swap`]); the report as JSON to `report`. Thread-safe (the header says how).
///
/// # Safety
/// `c` must be a live cluster; `rt` a live runtime; `report` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_swap(
    c: *const cdplace_cluster_t,
    rt: *const cdplace_runtime_t,
    report: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c) }?;
        // SAFETY: per the contract above.
        let Some(rt) = (unsafe { rt.as_ref() }) else { return Err(bad_call("runtime is NULL")) };
        if report.is_null() {
            return Err(bad_call("report is NULL"));
        }
        give(report, || Ok(serde_json::to_vec(&c.swap(rt.0.clone())?).expect("swap report serializes")))
    })
}

/// The generation of the policy deciding now.
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_policy_generation(
    c: *const cdplace_cluster_t,
    out: *mut u64,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c) }?;
        write(out, || Ok(c.policy_generation()))
    })
}

/// Sets the cluster's shadow policy to the runtime's component after the swap's checks, or
/// clears it when `rt` is NULL; the checks' report as JSON to `report` (`null` when cleared).
///
/// # Safety
/// `c` must be a live cluster; `rt` a live runtime or NULL; `report` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_set_shadow(
    c: *const cdplace_cluster_t,
    rt: *const cdplace_runtime_t,
    report: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c) }?;
        // SAFETY: per the contract above.
        let rt = unsafe { rt.as_ref() };
        if report.is_null() {
            return Err(bad_call("report is NULL"));
        }
        give(report, || {
            let r = c.set_shadow(rt.map(|rt| rt.0.clone() as std::sync::Arc<dyn crate::Backend>))?;
            Ok(serde_json::to_vec(&r).expect("swap report serializes"))
        })
    })
}

/// Answers the oldest live decision waiting for the shadow; `*did` 1 when one waited, else 0.
///
/// # Safety
/// `c` must be a live cluster; `did` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_shadow_step(
    c: *const cdplace_cluster_t,
    did: *mut u8,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c) }?;
        write(did, || Ok(u8::from(c.shadow_step())))
    })
}

/// The shadow's counts and divergences since the last call, as JSON to `out`.
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_shadow_take(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c) }?;
        give(out, || Ok(serde_json::to_vec(&c.shadow_take()).expect("shadow report serializes")))
    })
}
