//! Changing a cluster's view: packed facts, and assuming and forgetting a pod on a node.

use super::{bytes, cdplace_cluster_t, cdplace_error_t, cluster, guard, text};

/// Applies a packed facts batch (`CDF3`, layout in the header) in order. The batch is decoded
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
