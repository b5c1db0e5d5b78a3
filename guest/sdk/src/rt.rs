//! The bits of a runtime a `no_std` component needs: an allocator, a panic handler that traps,
//! the canonical ABI's `cabi_realloc`, and `memcmp`/`bcmp` (no libc on a `no_std`
//! wasm32-wasip2 build; an unresolved import would give the component an `env` dependency).
//! Shared with the test-only faulty guest (by path).

extern crate alloc;

#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// `memcmp` for the string comparisons of `core`: a `no_std` wasm32-wasip2 build has no libc to
/// provide it, and an unresolved import would give the component an `env` dependency.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // Eight bytes at a time up to the first difference, then byte by byte: the policy compares
    // many strings with long equal prefixes (UUIDs, node names).
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: the caller guarantees both ranges are readable; the reads are unaligned-safe.
        let (x, y) = unsafe { (a.add(i).cast::<u64>().read_unaligned(), b.add(i).cast::<u64>().read_unaligned()) };
        if x != y {
            break;
        }
        i += 8;
    }
    for i in i..n {
        // SAFETY: the caller guarantees both ranges are readable.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// `bcmp`: equality-only `memcmp`.
///
/// # Safety
/// As for [`memcmp`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract.
    unsafe { memcmp(a, b, n) }
}

/// The canonical ABI's allocator, over the global allocator.
///
/// # Safety
/// Called by the component runtime with a pointer it got from this function (or null with
/// `old_len == 0`) and a valid power-of-two alignment.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(old_ptr: *mut u8, old_len: usize, align: usize, new_len: usize) -> *mut u8 {
    use alloc::alloc::{Layout, alloc, realloc};
    if new_len == 0 {
        return align as *mut u8;
    }
    // SAFETY: the runtime passes a power-of-two alignment and sizes it allocated with.
    let ptr = unsafe {
        if old_len == 0 {
            alloc(Layout::from_size_align_unchecked(new_len, align))
        } else {
            realloc(old_ptr, Layout::from_size_align_unchecked(old_len, align), new_len)
        }
    };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    ptr
}
