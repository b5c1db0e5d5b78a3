//! The C ABI, shaped like wasmtime's: every fallible function returns an owned
//! `cdplace_error_t*` (NULL on success) and writes results through out-parameters; strings are
//! `(pointer, length)` pairs of UTF-8 that the callee only borrows for the call; results the
//! callee allocates are `cdplace_bytes_t` freed with `cdplace_bytes_delete`. Every body runs
//! under `catch_unwind`, so a Rust panic becomes an error, never an abort of the embedding Go
//! process. The header is `include/cdplace.h`; this is the only module with `unsafe`.

#![allow(non_camel_case_types)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Error;
use crate::cluster::{Backend, Cluster, Decision, Overlay, Status};
use crate::extract::Kind;
use crate::runtime::{Limits, Runtime};

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

/// Error kinds (`cdplace_error_kind`), stable numbers.
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
}

impl From<Error> for cdplace_error_t {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Load(_) => kind::LOAD,
            Error::Trap(_) => kind::TRAP,
            Error::Timeout(_) => kind::TIMEOUT,
            Error::OutOfMemory(_) => kind::OUT_OF_MEMORY,
            Error::InvalidArgs(_) => kind::INVALID_ARGS,
            Error::InvalidObject(_) => kind::INVALID_OBJECT,
            Error::InvalidInput(_) => kind::INVALID_INPUT,
            Error::UnknownPod(_) => kind::UNKNOWN_POD,
        };
        cdplace_error_t { kind, message: e.to_string() }
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

/// Borrows a UTF-8 string argument.
///
/// # Safety
/// `ptr` must be valid for reads of `len` bytes (or `len` must be 0).
unsafe fn text<'a>(ptr: *const u8, len: usize, what: &str) -> FfiResult<&'a str> {
    if len == 0 {
        return Ok("");
    }
    if ptr.is_null() {
        return Err(bad_call(format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees `ptr` is valid for `len` bytes during the call.
    let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
    std::str::from_utf8(bytes).map_err(|e| bad_call(format!("{what} is not UTF-8: {e}")))
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

/// Compiles a policy component (`.wasm` bytes) with limits for every guest call
/// (`memory_bytes` 0 and `deadline_ms` 0 mean the defaults).
///
/// # Safety
/// `wasm` must be valid for `wasm_len` bytes; `out` must be writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_runtime_new(
    wasm: *const u8,
    wasm_len: usize,
    memory_bytes: u64,
    deadline_ms: u64,
    out: *mut *mut cdplace_runtime_t,
) -> *mut cdplace_error_t {
    guard(|| {
        if wasm.is_null() || wasm_len == 0 || out.is_null() {
            return Err(bad_call("wasm and out must not be NULL"));
        }
        // SAFETY: the caller guarantees `wasm` is valid for `wasm_len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(wasm, wasm_len) };
        let mut limits = Limits::default();
        if memory_bytes > 0 {
            limits.memory_bytes = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        }
        if deadline_ms > 0 {
            limits.deadline = Duration::from_millis(deadline_ms);
        }
        let rt = Runtime::new(bytes, limits)?;
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
/// (`args`, JSON; empty for defaults). Invalid arguments give `CDPLACE_ERROR_INVALID_ARGS`
/// with the policy's exact message.
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
        let backend = match unsafe { rt.as_ref() } {
            Some(rt) => Backend::Wasm(rt.0.clone()),
            None => return Err(bad_call("runtime is NULL")),
        };
        // SAFETY: per the contract above.
        let args = unsafe { text(args, args_len, "args") }?;
        new_cluster(backend, args, out)
    })
}

/// Like `cdplace_cluster_new` but with the policy compiled natively into this library (for
/// comparisons and benchmarks; production uses the component).
///
/// # Safety
/// `args` valid for `args_len` bytes; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_new_native(
    args: *const u8,
    args_len: usize,
    out: *mut *mut cdplace_cluster_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let args = unsafe { text(args, args_len, "args") }?;
        new_cluster(Backend::Native, args, out)
    })
}

fn new_cluster(backend: Backend, args: &str, out: *mut *mut cdplace_cluster_t) -> FfiResult {
    if out.is_null() {
        return Err(bad_call("out is NULL"));
    }
    let c = Cluster::new(backend, args)?;
    // SAFETY: `out` is non-null and writable.
    unsafe { out.write(Box::into_raw(Box::new(cdplace_cluster_t(c)))) };
    Ok(())
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

/// The validated arguments and extraction keys as JSON:
/// `{"cliqueLabel":…,"gpuResourceName":…,"gpuDriver":…,"computeDomainDriver":…,"sizeAnnotation":…}`.
///
/// # Safety
/// `c` must be a live cluster; `out` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_keys(
    c: *const cdplace_cluster_t,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let k = unsafe { cluster(c) }?.keys();
        let v = json!({
            "cliqueLabel": k.clique_label,
            "gpuResourceName": k.gpu_resource_name,
            "gpuDriver": k.gpu_driver,
            "computeDomainDriver": k.compute_domain_driver,
            "sizeAnnotation": k.size_annotation,
        });
        give(out, v.to_string().into_bytes())
    })
}

/// Adds or updates one object (JSON as the API server writes it, with `apiVersion` and `kind`).
/// Kinds cdplace does not read are accepted and ignored; `*read` (when not NULL) tells which.
///
/// # Safety
/// `c` must be a live cluster; `json` valid for `len` bytes; `read` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_apply(
    c: *const cdplace_cluster_t,
    json: *const u8,
    len: usize,
    read: *mut bool,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, s) = unsafe { (cluster(c)?, text(json, len, "json")?) };
        let v: Value = serde_json::from_str(s).map_err(|e| Error::InvalidObject(format!("object is not JSON: {e}")))?;
        let was_read = c.apply(&v)?;
        if !read.is_null() {
            // SAFETY: `read` is writable per the contract.
            unsafe { read.write(was_read) };
        }
        Ok(())
    })
}

/// Removes an object by kind (`Node`, `Pod`, `ResourceClaim`, `ResourceClaimTemplate`,
/// `ResourceSlice`, `ComputeDomain`, `PodGroup`), namespace (empty for cluster-scoped) and name.
///
/// # Safety
/// `c` must be a live cluster; each string valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_remove(
    c: *const cdplace_cluster_t,
    kind: *const u8,
    kind_len: usize,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract above.
        let (c, k, ns, name) = unsafe {
            (cluster(c)?, text(kind, kind_len, "kind")?, text(ns, ns_len, "namespace")?, text(name, name_len, "name")?)
        };
        let k = Kind::parse(k).ok_or_else(|| bad_call(format!("unknown kind {k:?}")))?;
        c.delete(k, ns, name);
        Ok(())
    })
}

/// Marks a pod assumed on a node (Reserve).
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

fn status_json(s: &Status) -> Value {
    json!({"code": s.code.as_str(), "reason": s.reason})
}

/// The decision as the JSON documented in `include/cdplace.h`.
pub fn decision_json(d: &Decision) -> Value {
    let cliques: serde_json::Map<String, Value> = d
        .cliques
        .iter()
        .map(|(k, (s, score))| (k.clone(), json!({"code": s.code.as_str(), "reason": s.reason, "score": score})))
        .collect();
    let nodes: serde_json::Map<String, Value> = d.nodes.iter().map(|(k, s)| (k.clone(), status_json(s))).collect();
    json!({
        "status": status_json(&d.status),
        "domain": d.domain,
        "exclusive": d.exclusive,
        "cliques": cliques,
        "other": status_json(&d.other),
        "nodes": nodes,
        "allowedNodes": d.allowed_nodes,
    })
}

fn parse_overlay(s: &str) -> FfiResult<Vec<Overlay>> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Vec<Value> = serde_json::from_str(s).map_err(|e| bad_call(format!("overlay is not a JSON array: {e}")))?;
    v.iter()
        .map(|o| {
            let field = |f: &str| {
                o.get(f)
                    .and_then(Value::as_str)
                    .map(String::from)
                    .ok_or_else(|| bad_call(format!("overlay entry {o} has no {f}")))
            };
            match o.get("op").and_then(Value::as_str) {
                Some("remove") => Ok(Overlay::RemovePod { namespace: field("namespace")?, name: field("name")? }),
                Some("add") => {
                    Ok(Overlay::AddPod { namespace: field("namespace")?, name: field("name")?, node: field("node")? })
                }
                _ => Err(bad_call(format!("overlay entry {o} has no op \"add\" or \"remove\""))),
            }
        })
        .collect()
}

/// The arguments both PreFilter entry points take, borrowed; `answer` encodes the decision.
///
/// # Safety
/// As for `cdplace_cluster_pre_filter`.
#[allow(clippy::too_many_arguments)]
unsafe fn pre_filter_with(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    overlay: *const u8,
    overlay_len: usize,
    out: *mut cdplace_bytes_t,
    answer: impl FnOnce(&Cluster, &str, &str, &[Overlay]) -> crate::Result<Vec<u8>>,
) -> *mut cdplace_error_t {
    guard(|| {
        // SAFETY: per the contract of the callers.
        let (c, ns, name, overlay) = unsafe {
            (
                cluster(c)?,
                text(ns, ns_len, "namespace")?,
                text(name, name_len, "name")?,
                text(overlay, overlay_len, "overlay")?,
            )
        };
        let overlay = parse_overlay(overlay)?;
        give(out, answer(c, ns, name, &overlay)?)
    })
}

/// PreFilter for the pod `ns/name`, as if the overlay (JSON array of `{"op":"remove",
/// "namespace","name"}` and `{"op":"add","namespace","name","node"}`; empty for none) were
/// applied. Writes the decision as JSON to `out` (free with `cdplace_bytes_delete`). A guest
/// trap, timeout or memory exhaustion is an error (`CDPLACE_ERROR_TRAP`, `_TIMEOUT`,
/// `_OUT_OF_MEMORY`); the instance is discarded and the next call uses a fresh one.
///
/// # Safety
/// `c` must be a live cluster; each string valid for its length; `out` writable.
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
    // SAFETY: the caller upholds this function's contract, which is pre_filter_with's.
    unsafe {
        pre_filter_with(c, ns, ns_len, name, name_len, overlay, overlay_len, out, |c, ns, name, overlay| {
            Ok(decision_json(&c.pre_filter(ns, name, overlay)?).to_string().into_bytes())
        })
    }
}

/// `cdplace_cluster_pre_filter` with the decision in the packed form documented in the header
/// (what the Go adapter reads).
///
/// # Safety
/// As for `cdplace_cluster_pre_filter`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cdplace_cluster_pre_filter_packed(
    c: *const cdplace_cluster_t,
    ns: *const u8,
    ns_len: usize,
    name: *const u8,
    name_len: usize,
    overlay: *const u8,
    overlay_len: usize,
    out: *mut cdplace_bytes_t,
) -> *mut cdplace_error_t {
    // SAFETY: the caller upholds this function's contract, which is pre_filter_with's.
    unsafe {
        pre_filter_with(c, ns, ns_len, name, name_len, overlay, overlay_len, out, |c, ns, name, overlay| {
            c.pre_filter_packed(ns, name, overlay)
        })
    }
}
