//! The C ABI, shaped like wasmtime's: every fallible function returns an owned
//! `cdplace_error_t*` (NULL on success) and writes results through out-parameters; strings are
//! `(pointer, length)` pairs of UTF-8 that the callee only borrows for the call; results the
//! callee allocates are `cdplace_bytes_t` freed with `cdplace_bytes_delete`. Every body runs
//! under `catch_unwind`, so a Rust panic becomes an error, never an abort of the embedding Go
//! process. The header is `include/cdplace.h`; this is the only module with `unsafe`.
//!
//! Files: this one (the handle and error types, the error kinds, and the helpers every exported
//! function uses: `guard`, borrowing arguments, writing out-parameters), `memory` (reading and
//! freeing errors, freeing bytes), `lifecycle` (runtimes and clusters made and freed, a
//! cluster's settings), `view` (changing a cluster's view: facts, assume, forget) and `calls`
//! (the policy calls and the cluster's stats and quarantine).

#![allow(non_camel_case_types)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::Error;
use crate::cluster::Cluster;
use crate::runtime::Runtime;

mod calls;
mod lifecycle;
mod memory;
mod view;

pub use calls::*;
pub use lifecycle::*;
pub use memory::*;
pub use view::*;

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
    pub policy_violations: u64,
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
    pub const POLICY_VIOLATION: i32 = 12;
    pub const REFUSED: i32 = 13;
    pub const WORLD: i32 = 14;
}

/// `CDPLACE_ABI_VERSION` of `include/cdplace.h` (the Go wrapper's test checks the two are equal).
pub const ABI_VERSION: u32 = 5;

/// The header's enumerators, read from `include/cdplace.h` by `build.rs`.
mod header {
    include!(concat!(env!("OUT_DIR"), "/header.rs"));
}

// The Rust copies of the header's numbers, checked by the compiler (as wasmtime's `trap.rs` checks
// its enum against the C values): the error kinds here, the status codes (`cdplace_policy::Code`,
// written into packed decisions) and the record kinds of a facts batch (`crate::Kind`). A number
// changed on one side only, or an enumerator added to the header without its copy, fails the
// build.
const _: () = {
    use crate::Kind;
    use cdplace_policy::Code;
    assert!(kind::LOAD as i64 == header::CDPLACE_ERROR_LOAD);
    assert!(kind::TRAP as i64 == header::CDPLACE_ERROR_TRAP);
    assert!(kind::TIMEOUT as i64 == header::CDPLACE_ERROR_TIMEOUT);
    assert!(kind::OUT_OF_MEMORY as i64 == header::CDPLACE_ERROR_OUT_OF_MEMORY);
    assert!(kind::INVALID_ARGS as i64 == header::CDPLACE_ERROR_INVALID_ARGS);
    assert!(kind::INVALID_OBJECT as i64 == header::CDPLACE_ERROR_INVALID_OBJECT);
    assert!(kind::INVALID_INPUT as i64 == header::CDPLACE_ERROR_INVALID_INPUT);
    assert!(kind::UNKNOWN_POD as i64 == header::CDPLACE_ERROR_UNKNOWN_POD);
    assert!(kind::PANIC as i64 == header::CDPLACE_ERROR_PANIC);
    assert!(kind::BAD_CALL as i64 == header::CDPLACE_ERROR_BAD_CALL);
    assert!(kind::BUSY as i64 == header::CDPLACE_ERROR_BUSY);
    assert!(kind::POLICY_VIOLATION as i64 == header::CDPLACE_ERROR_POLICY_VIOLATION);
    assert!(kind::REFUSED as i64 == header::CDPLACE_ERROR_REFUSED);
    assert!(kind::WORLD as i64 == header::CDPLACE_ERROR_WORLD);
    assert!(header::ERROR_KINDS == 14, "an error kind of the header has no copy in ffi::kind");
    assert!(Code::Success as i64 == header::CDPLACE_CODE_SUCCESS);
    assert!(Code::Skip as i64 == header::CDPLACE_CODE_SKIP);
    assert!(Code::Unschedulable as i64 == header::CDPLACE_CODE_UNSCHEDULABLE);
    assert!(Code::UnschedulableAndUnresolvable as i64 == header::CDPLACE_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE);
    assert!(Code::Error as i64 == header::CDPLACE_CODE_ERROR);
    assert!(header::CODES == 5, "a status code of the header has no copy in cdplace_policy::Code");
    assert!(Kind::Node as i64 == header::CDPLACE_KIND_NODE);
    assert!(Kind::Pod as i64 == header::CDPLACE_KIND_POD);
    assert!(Kind::ResourceClaim as i64 == header::CDPLACE_KIND_RESOURCE_CLAIM);
    assert!(Kind::ResourceClaimTemplate as i64 == header::CDPLACE_KIND_RESOURCE_CLAIM_TEMPLATE);
    assert!(Kind::ResourceSlice as i64 == header::CDPLACE_KIND_RESOURCE_SLICE);
    assert!(Kind::ComputeDomain as i64 == header::CDPLACE_KIND_COMPUTE_DOMAIN);
    assert!(Kind::PodGroup as i64 == header::CDPLACE_KIND_POD_GROUP);
    assert!(Kind::Owner as i64 == header::CDPLACE_KIND_OWNER);
    assert!(header::RECORD_KINDS == 8, "a record kind of the header has no copy in crate::Kind");
};

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
            Error::PolicyViolation(_) => kind::POLICY_VIOLATION,
            Error::Refused { .. } => kind::REFUSED,
            Error::World(_) => kind::WORLD,
            Error::MalformedFacts { .. } | Error::MalformedOverlay { .. } | Error::Compacted => kind::BAD_CALL,
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

/// Writes what `f` makes to `out`: `out` is checked first (NULL is `CDPLACE_ERROR_BAD_CALL`
/// and `f` is not run), then `f` runs, then its result is written.
fn write<T>(out: *mut T, f: impl FnOnce() -> FfiResult<T>) -> FfiResult {
    if out.is_null() {
        return Err(bad_call("out is NULL"));
    }
    let value = f()?;
    // SAFETY: `out` is non-null and the caller passes it writable.
    unsafe { out.write(value) };
    Ok(())
}

/// Writes the bytes `f` makes to `out` as a `cdplace_bytes_t` the caller frees with
/// `cdplace_bytes_delete` (as [`write`]).
fn give(out: *mut cdplace_bytes_t, f: impl FnOnce() -> FfiResult<Vec<u8>>) -> FfiResult {
    write(out, || {
        let mut b = f()?.into_boxed_slice();
        let len = b.len();
        let data = b.as_mut_ptr();
        std::mem::forget(b);
        Ok(cdplace_bytes_t { data, len })
    })
}

/// Writes a new handle owning `f`'s value to `out` (as [`write`]); `delete` frees it.
fn handle<T>(out: *mut *mut T, f: impl FnOnce() -> FfiResult<T>) -> FfiResult {
    write(out, || Ok(Box::into_raw(Box::new(f()?))))
}

/// Frees a handle [`handle`] made. NULL is allowed.
///
/// # Safety
/// `p` must be NULL or a handle this library returned, not yet freed.
unsafe fn delete<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: per the contract above.
        drop(unsafe { Box::from_raw(p) });
    }
}
