//! The C ABI, shaped like wasmtime's: every fallible function returns an owned
//! `cdplace_error_t*` (NULL on success) and writes results through out-parameters; strings are
//! `(pointer, length)` pairs of UTF-8 that the callee only borrows for the call; results the
//! callee allocates are `cdplace_bytes_t` freed with `cdplace_bytes_delete`. Every body runs
//! under `catch_unwind`, so a Rust panic becomes an error, never an abort of the embedding Go
//! process. The header is `include/cdplace.h`; this is the only module with `unsafe`.

#![allow(non_camel_case_types)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::cluster::Cluster;
use crate::runtime::Runtime;
use crate::{Error, overlay};

// The C ABI hands both to many threads at once.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Runtime>();
    shared::<Cluster>();
};

/// An error with a kind and a message.
#[derive(Debug)]
pub struct cdplace_error_t {
    kind: i32,
    message: String,
}

/// The compiled policy component (`Arc<Runtime>`); thread-safe.
#[derive(Debug)]
pub struct cdplace_runtime_t(Arc<Runtime>);

/// A cluster view with its policy instances; thread-safe.
#[derive(Debug)]
pub struct cdplace_cluster_t(Cluster);

/// Bytes allocated by this library.
#[repr(C)]
#[derive(Debug)]
pub struct cdplace_bytes_t {
    pub data: *mut u8,
    pub len: usize,
}

/// How a cluster's journal and instances stand (`cdplace_stats_t`).
#[repr(C)]
#[derive(Debug, Default)]
pub struct cdplace_stats_t {
    pub journal_length: u64,
    pub idle_instances: u64,
    pub busy_instances: u64,
    pub quarantined_objects: u64,
}

/// Error kinds (`cdplace_error_kind_t`), stable numbers.
pub mod kind {
    pub const LOAD: i32 = 1;
    pub const TRAP: i32 = 2;
    pub const TIMEOUT: i32 = 3;
    pub const OUT_OF_MEMORY: i32 = 4;
    pub const INVALID_ARGS: i32 = 5;
    pub const INVALID_OBJECT: i32 = 6;
    pub const INVALID_INPUT: i32 = 7;
    pub const UNKNOWN_POD: i32 = 8;
    pub const PANIC: i32 = 9;
    pub const BAD_CALL: i32 = 10;
    pub const BUSY: i32 = 11;
}

impl From<Error> for cdplace_error_t {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Read { .. } | Error::Load(_) => kind::LOAD,
            Error::Trap { .. } => kind::TRAP,
            Error::Timeout { .. } => kind::TIMEOUT,
            Error::OutOfMemory { .. } => kind::OUT_OF_MEMORY,
            Error::InvalidArgs(_) => kind::INVALID_ARGS,
            Error::InvalidObject(_) => kind::INVALID_OBJECT,
            Error::InvalidInput(_) => kind::INVALID_INPUT,
            Error::UnknownPod(_) => kind::UNKNOWN_POD,
            Error::Busy { .. } => kind::BUSY,
            Error::MalformedFacts { .. } | Error::MalformedOverlay { .. } => kind::BAD_CALL,
        };
        cdplace_error_t { kind, message: crate::error::chain(&e) }
    }
}

type FfiResult<T = ()> = Result<T, cdplace_error_t>;

fn bad_call(message: impl Into<String>) -> cdplace_error_t {
    cdplace_error_t { kind: kind::BAD_CALL, message: message.into() }
}

/// Runs `f`, turning an error or a panic into an owned error pointer.
fn guard(f: impl FnOnce() -> FfiResult) -> *mut cdplace_error_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => Box::into_raw(Box::new(e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Box::into_raw(Box::new(cdplace_error_t { kind: kind::PANIC, message: format!("cdplace panicked: {what}") }))
        }
    }
}

/// Borrows a byte argument.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes (or `len` must be 0).
unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> FfiResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(bad_call(format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees `ptr` is valid for `len` bytes during the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a UTF-8 string argument.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes (or `len` must be 0).
unsafe fn text<'a>(ptr: *const u8, len: usize, what: &str) -> FfiResult<&'a str> {
    if len == 0 {
        return Ok("");
    }
    // SAFETY: per the contract above.
    let b = unsafe { bytes(ptr, len, what) }?;
    std::str::from_utf8(b).map_err(|e| bad_call(format!("{what} is not UTF-8: {e}")))
}

/// # Safety
/// `p` must be NULL or a pointer this library returned and not yet deleted.
unsafe fn cluster<'a>(p: *const cdplace_cluster_t) -> FfiResult<&'a Cluster> {
    // SAFETY: per the contract above.
    unsafe { p.as_ref() }.map(|c| &c.0).ok_or_else(|| bad_call("cluster is NULL"))
}

fn give(out: *mut cdplace_bytes_t, bytes: Vec<u8>) -> FfiResult {
    if out.is_null() {
        return Err(bad_call("out is NULL"));
    }
    let mut b = bytes.into_boxed_slice();
    let len = b.len();
    let data = b.as_mut_ptr();
    std::mem::forget(b);
    // SAFETY: `out` is non-null and the caller passes a writable cdplace_bytes_t.
    unsafe { out.write(cdplace_bytes_t { data, len }) };
    Ok(())
}

/// Frees bytes returned by this library. NULL data is allowed.
///
/// # Safety
/// `b` must be NULL or point to bytes this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_bytes_delete(b: *mut cdplace_bytes_t) {
    // SAFETY: per the contract above.
    let Some(b) = (unsafe { b.as_mut() }) else { return };
    if !b.data.is_null() {
        // SAFETY: `data`/`len` came from a boxed slice leaked by `give`.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(b.data, b.len)) });
    }
    b.data = std::ptr::null_mut();
    b.len = 0;
}

/// The error's kind (`CDPLACE_ERROR_*`).
///
/// # Safety
/// `e` must be a live error returned by this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_error_kind(e: *const cdplace_error_t) -> i32 {
    // SAFETY: per the contract above.
    unsafe { e.as_ref() }.map_or(kind::BAD_CALL, |e| e.kind)
}

/// Copies up to `cap` bytes of the message (UTF-8, not NUL-terminated) into `buf` and returns
/// the message's full length, so a caller can size its buffer.
///
/// # Safety
/// `e` must be a live error; `buf` must be valid for writes of `cap` bytes (or `cap` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_error_message(e: *const cdplace_error_t, buf: *mut u8, cap: usize) -> usize {
    // SAFETY: per the contract above.
    let Some(e) = (unsafe { e.as_ref() }) else { return 0 };
    let n = e.message.len().min(cap);
    if n > 0 && !buf.is_null() {
        // SAFETY: `buf` is writable for `cap >= n` bytes and does not overlap our String.
        unsafe { std::ptr::copy_nonoverlapping(e.message.as_ptr(), buf, n) };
    }
    e.message.len()
}

/// Frees an error. NULL is allowed.
///
/// # Safety
/// `e` must be NULL or an error this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_error_delete(e: *mut cdplace_error_t) {
    if !e.is_null() {
        // SAFETY: per the contract above.
        drop(unsafe { Box::from_raw(e) });
    }
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
        let rt = Runtime::new(wasm)?;
        // SAFETY: `out` is non-null and writable.
        unsafe { out.write(Box::into_raw(Box::new(cdplace_runtime_t(rt)))) };
        Ok(())
    })
}

/// Frees a runtime. Clusters made from it keep it alive until they are freed.
///
/// # Safety
/// `rt` must be NULL or a runtime this library returned, not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_runtime_delete(rt: *mut cdplace_runtime_t) {
    if !rt.is_null() {
        // SAFETY: per the contract above.
        drop(unsafe { Box::from_raw(rt) });
    }
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
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        let c = Cluster::new(rt.0.clone(), args)?;
        // SAFETY: `out` is non-null and writable.
        unsafe { out.write(Box::into_raw(Box::new(cdplace_cluster_t(c)))) };
        Ok(())
    })
}

/// Frees a cluster.
///
/// # Safety
/// `c` must be NULL or a cluster this library returned, not yet freed, and not in use.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_delete(c: *mut cdplace_cluster_t) {
    if !c.is_null() {
        // SAFETY: per the contract above.
        drop(unsafe { Box::from_raw(c) });
    }
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
        give(out, json.into_bytes())
    })
}

/// Applies a packed facts batch (`CDF2`, layout in the header) in order. The batch is decoded
/// whole first: a malformed one gives `CDPLACE_ERROR_BAD_CALL` naming the byte offset and the
/// record index, and nothing of it is applied.
///
/// # Safety
/// `c` must be a live cluster; `facts` valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_apply_facts(
    c: *const cdplace_cluster_t,
    facts: *const u8,
    len: usize,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, facts) = unsafe { (cluster(c)?, bytes(facts, len, "facts")?) };
        Ok(c.apply_facts(facts)?)
    })
}

/// Marks a pod assumed on a node (Reserve). Unknown pod: `CDPLACE_ERROR_UNKNOWN_POD`.
///
/// # Safety
/// `c` must be a live cluster; each string valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_assume(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    node: *const u8,
    node_len: usize,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, ns, name, node) = unsafe {
            (cluster(c)?, text(ns, ns_len, "namespace")?, text(name, name_len, "name")?, text(node, node_len, "node")?)
        };
        Ok(c.assume(ns, name, node)?)
    })
}

/// Forgets an assumption (Unreserve).
///
/// # Safety
/// `c` must be a live cluster; each string valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_forget(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, ns, name) = unsafe { (cluster(c)?, text(ns, ns_len, "namespace")?, text(name, name_len, "name")?) };
        c.forget(ns, name);
        Ok(())
    })
}

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
    guard(|| {
        // SAFETY: per the contract above.
        let (c, ns, name) = unsafe { (cluster(c)?, text(ns, ns_len, "namespace")?, text(name, name_len, "name")?) };
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        give(out, c.preempt(ns, name)?.to_json().into_bytes())
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
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        give(out, c.status()?.to_json().into_bytes())
    })
}

/// PreFilter for the pod `ns/name`, as if the packed overlay (layout in the header; zero bytes
/// for none) were applied. Writes the packed decision `CDP3` to `out` (free with
/// `cdplace_bytes_delete`). A guest trap, timeout or memory exhaustion is an error
/// (`CDPLACE_ERROR_TRAP`, `_TIMEOUT`, `_OUT_OF_MEMORY`); the instance is discarded and the next
/// call uses a fresh one.
///
/// # Safety
/// `c` must be a live cluster; each string and the overlay valid for its length; `out` writable.
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
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        let overlay = overlay::decode(overlay)?;
        give(out, c.pre_filter_packed(ns, name, &overlay)?)
    })
}

/// Plain-pod steering: where a pod without a ComputeDomain should go; `gpus` is 1 when it uses
/// GPUs, else 0. Writes the packed decision (`CDP3`, as `cdplace_cluster_pre_filter`) to `out`.
/// Errors as for PreFilter (no unknown pod).
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_steer(
    c: *const cdplace_cluster_t,
    gpus: u8,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let c = unsafe { cluster(c)? };
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        if gpus > 1 {
            return Err(bad_call("gpus must be 0 or 1"));
        }
        give(out, c.steer_packed(gpus == 1)?)
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
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        let s = c.stats();
        let stats = cdplace_stats_t {
            journal_length: s.journal_length as u64,
            idle_instances: s.idle_instances as u64,
            busy_instances: s.busy_instances as u64,
            quarantined_objects: s.quarantined_objects as u64,
        };
        // SAFETY: `out` is non-null and writable.
        unsafe { out.write(stats) };
        Ok(())
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
        if out.is_null() {
            return Err(bad_call("out is NULL"));
        }
        let json = serde_json::to_vec(&c.take_quarantined()).expect("quarantined objects serialize");
        give(out, json)
    })
}
