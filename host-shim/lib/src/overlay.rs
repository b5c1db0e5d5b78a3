//! Preemption's hypothetical changes ([`Overlay`]) and their packed form, as
//! `cdplace_cluster_pre_filter` takes them (little-endian, `str` = u32 length + UTF-8):
//!
//! ```text
//! u32 n x (u8 op (1 remove, 2 add), str namespace, str name, str node ("" for remove))
//! ```
//!
//! Zero bytes are no overlay, the same as `n = 0`.

use crate::wire::{Reader, WireError, WireResult, Writer};
use crate::{Error, Result};

const REMOVE: u8 = 1;
const ADD: u8 = 2;

/// A hypothetical change for one evaluation (preemption's AddPod/RemovePod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    /// Treat this pod as absent.
    RemovePod { namespace: String, name: String },
    /// Treat this pod as nominated to `node`.
    AddPod { namespace: String, name: String, node: String },
}

/// Reads a packed overlay.
pub fn decode(bytes: &[u8]) -> Result<Vec<Overlay>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let malformed =
        |entry: Option<usize>, e: WireError| Error::MalformedOverlay { entry, offset: e.offset, message: e.message };
    let mut r = Reader::new(bytes);
    let n = r.u32("n").map_err(|e| malformed(None, e))? as usize;
    let mut out = Vec::with_capacity(n.min(r.remaining() / 13));
    for i in 0..n {
        out.push(entry(&mut r).map_err(|e| malformed(Some(i), e))?);
    }
    if r.remaining() > 0 {
        let message = format!("{} bytes after the last of {n} entries", r.remaining());
        return Err(malformed(None, WireError { offset: r.offset(), message }));
    }
    Ok(out)
}

fn entry(r: &mut Reader<'_>) -> WireResult<Overlay> {
    let op_at = r.offset();
    let op = r.u8("op")?;
    let (ns_at, namespace) = (r.offset(), r.str("namespace")?);
    let (name_at, name) = (r.offset(), r.str("name")?);
    let (node_at, node) = (r.offset(), r.str("node")?);
    let fail = |offset, message: String| Err(WireError { offset, message });
    if namespace.is_empty() {
        return fail(ns_at, "namespace: must not be empty".into());
    }
    if name.is_empty() {
        return fail(name_at, "name: must not be empty".into());
    }
    match op {
        REMOVE if node.is_empty() => Ok(Overlay::RemovePod { namespace, name }),
        REMOVE => fail(node_at, format!("node: must be empty for a remove, got {node:?}")),
        ADD if !node.is_empty() => Ok(Overlay::AddPod { namespace, name, node }),
        ADD => fail(node_at, "node: must not be empty for an add".into()),
        _ => fail(op_at, format!("op: {op} is neither 1 (remove) nor 2 (add)")),
    }
}

/// Writes the packed form of `ops`.
pub fn encode(ops: &[Overlay]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_u32(u32::try_from(ops.len()).expect("fewer than 2^32 overlay entries"));
    for o in ops {
        let (op, namespace, name, node) = match o {
            Overlay::RemovePod { namespace, name } => (REMOVE, namespace, name, ""),
            Overlay::AddPod { namespace, name, node } => (ADD, namespace, name, node.as_str()),
        };
        b.put_u8(op);
        b.put_str(namespace);
        b.put_str(name);
        b.put_str(node);
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let ops = vec![
            Overlay::RemovePod { namespace: "ns".into(), name: "victim".into() },
            Overlay::AddPod { namespace: "ns".into(), name: "p".into(), node: "tray-3".into() },
        ];
        let b = encode(&ops);
        assert_eq!(decode(&b).unwrap(), ops);
        assert_eq!(decode(&[]).unwrap(), vec![]);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        let one = encode(&ops[..1]);
        let want: Vec<u8> = [&[1, 0, 0, 0, 1, 2, 0, 0, 0][..], b"ns", &[6, 0, 0, 0], b"victim", &[0, 0, 0, 0]].concat();
        assert_eq!(one, want);
    }

    #[test]
    fn malformed_overlays_name_the_entry_and_offset() {
        let m = |b: &[u8]| decode(b).unwrap_err().to_string();
        assert_eq!(m(&[1, 0]), "malformed overlay at byte 0: n: truncated (needs 4 bytes, 2 left)");
        let mut bad_op = encode(&[Overlay::RemovePod { namespace: "a".into(), name: "b".into() }]);
        bad_op[4] = 7;
        assert_eq!(m(&bad_op), "malformed overlay: record 0 at byte 4: op: 7 is neither 1 (remove) nor 2 (add)");
        let mut add_without_node = encode(&[Overlay::RemovePod { namespace: "a".into(), name: "b".into() }]);
        add_without_node[4] = ADD;
        assert_eq!(m(&add_without_node), "malformed overlay: record 0 at byte 15: node: must not be empty for an add");
        let mut trailing = encode(&[]);
        trailing.push(1);
        assert_eq!(m(&trailing), "malformed overlay at byte 4: 1 bytes after the last of 0 entries");
    }
}
