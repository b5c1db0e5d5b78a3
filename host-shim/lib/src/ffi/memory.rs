//! What the library hands out and the caller frees: errors (their kind and message) and bytes.

use super::{cdplace_bytes_t, cdplace_error_t, delete, kind};

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
    // SAFETY: per the contract above.
    unsafe { delete(e) }
}
