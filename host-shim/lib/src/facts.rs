//! The packed facts batch `CDF3`: what the Go adapter extracts from Kubernetes objects, sent to
//! [`crate::Cluster::apply_facts`] (`cdplace_cluster_apply_facts`) in one crossing. Each record is
//! one [`Object`] (upsert) or a removal, one to one with `extract::Object`, so a batch applies
//! through the same path as JSON objects. [`decode`] reads a whole batch before anything is
//! applied and names the byte offset and record index of anything malformed; [`encode`] writes
//! the same bytes (tests and the test kit build batches with it; the Go adapter has its own
//! encoder of this layout).
//!
//! Layout, little-endian (the same text as `include/cdplace.h`):
//!
//! ```text
//! str  = u32 byte length + UTF-8 bytes
//! ostr = u8 0 | u8 1, str
//! ou32 = u8 0 | u8 1, u32
//! oi32 = u8 0 | u8 1, i32
//! oi64 = u8 0 | u8 1, i64
//! batch  = "CDF3", u32 nrecords, nrecords x record
//! record = u8 op (1 upsert, 2 remove), u8 kind (cdplace_kind_t), body
//! remove body: str namespace ("" for cluster-scoped kinds and for Owner), str name (for Owner: the owner key)
//! upsert bodies:
//!   Node (1)          str name, ostr cliqueLabel, ostr domainLabel, u8 unschedulable, u32 gpus
//!   Pod (2)           str namespace, str name, u8 terminal, ostr nodeName, ostr nominatedNodeName,
//!                     u32 nclaims x (str name, ostr resourceClaimTemplateName, ostr resourceClaimName,
//!                     ostr generatedClaimName), u32 gpus, ou32 sizeAnnotation, ostr podGroupName,
//!                     ostr ownerKey, i64 createdMs, i32 priority, oi64 runtimeLimitMs,
//!                     i64 startedMs
//!   ResourceClaim (3) str namespace, str name, ostr domain, u8 daemon, u32 gpuCount, u8 gpuAll,
//!                     ou32 allocatedGpus
//!   ResourceClaimTemplate (4)  str namespace, str name, ostr domain, u8 daemon, u32 gpuCount, u8 gpuAll
//!   ResourceSlice (5) str name, ostr node, u32 gpus, str pool (non-empty when node is set),
//!                     i64 generation
//!   ComputeDomain (6) str namespace, str name, str uid, ou32 sizeAnnotation, ou32 numNodes
//!   PodGroup (7)      str namespace, str name, ou32 minCount, oi32 priority
//!   Owner (8)         str key, ou32 size (none: forget it), str source, oi32 priority
//! ```
//!
//! Booleans are exactly 0 or 1; names (and namespaces of namespaced kinds, the ComputeDomain UID,
//! the owner key) must not be empty; cluster-scoped kinds and owners have an empty namespace in
//! a removal; no bytes may follow the last record.
//!
//! The magic is the layout's version: `CDF2` added the pool name and generation to the
//! ResourceSlice record, `CDF3` the runtime limit and start time to the Pod record. A batch of
//! another version (`CDF2`, from an adapter built against an older library) is refused whole
//! (`magic: expected "CDF3", got "CDF2"`).

use cdplace_policy::GpuDemand;

use crate::extract::{Kind, Object, PodClaim};
use crate::wire::{Reader, WireError, WireResult, Writer};
use crate::{Error, Result};

/// The first four bytes of a batch: the layout's version.
pub const MAGIC: &[u8; 4] = b"CDF3";

const UPSERT: u8 = 1;
const REMOVE: u8 = 2;

/// One record of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Adds or replaces an object.
    Upsert(Object),
    /// Removes an object by kind, namespace (empty for cluster-scoped kinds and owners) and name
    /// (an owner's key).
    Remove { kind: Kind, namespace: String, name: String },
}

/// Reads a whole batch. Nothing is applied from a batch that fails here.
pub fn decode(bytes: &[u8]) -> Result<Vec<Record>> {
    let mut r = Reader::new(bytes);
    let malformed =
        |record: Option<usize>, e: WireError| Error::MalformedFacts { record, offset: e.offset, message: e.message };
    r.expect(MAGIC, "magic").map_err(|e| malformed(None, e))?;
    let n = r.u32("nrecords").map_err(|e| malformed(None, e))? as usize;
    // Every record takes at least 2 + 8 bytes: do not trust `n` for the allocation.
    let mut out = Vec::with_capacity(n.min(r.remaining() / 10));
    for i in 0..n {
        out.push(record(&mut r).map_err(|e| malformed(Some(i), e))?);
    }
    if r.remaining() > 0 {
        let e =
            WireError { offset: r.offset(), message: format!("{} bytes after the last of {n} records", r.remaining()) };
        return Err(malformed(None, e));
    }
    Ok(out)
}

fn record(r: &mut Reader<'_>) -> WireResult<Record> {
    let at = r.offset();
    let op = r.u8("op")?;
    let kind_at = r.offset();
    let code = r.u8("kind")?;
    let Some(kind) = Kind::from_code(code) else {
        return Err(WireError { offset: kind_at, message: format!("kind: {code} is not a cdplace_kind_t (1..=8)") });
    };
    match op {
        UPSERT => upsert(r, kind).map(Record::Upsert),
        REMOVE => {
            let ns_at = r.offset();
            let namespace = r.str("namespace")?;
            let name_at = r.offset();
            let name = r.str("name")?;
            if !kind.namespaced() && !namespace.is_empty() {
                let message = format!("namespace: must be empty for a {} removal, got {namespace:?}", kind.as_str());
                return Err(WireError { offset: ns_at, message });
            }
            nonempty(kind.namespaced().then_some(&namespace), "namespace", ns_at)?;
            nonempty(Some(&name), "name", name_at)?;
            Ok(Record::Remove { kind, namespace, name })
        }
        _ => Err(WireError { offset: at, message: format!("op: {op} is neither 1 (upsert) nor 2 (remove)") }),
    }
}

fn nonempty(s: Option<&String>, field: &str, offset: usize) -> WireResult<()> {
    match s {
        Some(s) if s.is_empty() => Err(WireError { offset, message: format!("{field}: must not be empty") }),
        _ => Ok(()),
    }
}

/// A required, non-empty string.
fn name(r: &mut Reader<'_>, field: &str) -> WireResult<String> {
    let at = r.offset();
    let s = r.str(field)?;
    nonempty(Some(&s), field, at)?;
    Ok(s)
}

fn demand(r: &mut Reader<'_>) -> WireResult<GpuDemand> {
    let count = r.u32("gpuCount")?;
    let all = r.bool("gpuAll")?;
    Ok(GpuDemand { count, all })
}

fn upsert(r: &mut Reader<'_>, kind: Kind) -> WireResult<Object> {
    Ok(match kind {
        Kind::Node => Object::Node {
            name: name(r, "name")?,
            clique_label: r.ostr("cliqueLabel")?,
            domain_label: r.ostr("domainLabel")?,
            unschedulable: r.bool("unschedulable")?,
            gpus: r.u32("gpus")?,
        },
        Kind::Pod => {
            let namespace = name(r, "namespace")?;
            let name = name(r, "name")?;
            let terminal = r.bool("terminal")?;
            let node_name = r.ostr("nodeName")?;
            let nominated_node_name = r.ostr("nominatedNodeName")?;
            let n = r.u32("nclaims")? as usize;
            let mut claims = Vec::with_capacity(n.min(r.remaining() / 7));
            for _ in 0..n {
                claims.push(PodClaim {
                    name: r.str("claims.name")?,
                    template: r.ostr("claims.resourceClaimTemplateName")?,
                    claim: r.ostr("claims.resourceClaimName")?,
                    generated: r.ostr("claims.generatedClaimName")?,
                });
            }
            Object::Pod {
                namespace,
                name,
                terminal,
                node_name,
                nominated_node_name,
                claims,
                gpus: r.u32("gpus")?,
                size_hint: r.ou32("sizeAnnotation")?,
                pod_group: r.ostr("podGroupName")?,
                owner: r.ostr("ownerKey")?,
                created_ms: r.i64("createdMs")?,
                priority: r.i32("priority")?,
                runtime_limit_ms: r.oi64("runtimeLimitMs")?,
                started_ms: r.i64("startedMs")?,
            }
        }
        Kind::ResourceClaim => Object::Claim {
            namespace: name(r, "namespace")?,
            name: name(r, "name")?,
            domain: r.ostr("domain")?,
            daemon: r.bool("daemon")?,
            gpus: demand(r)?,
            allocated_gpus: r.ou32("allocatedGpus")?,
        },
        Kind::ResourceClaimTemplate => Object::Template {
            namespace: name(r, "namespace")?,
            name: name(r, "name")?,
            domain: r.ostr("domain")?,
            daemon: r.bool("daemon")?,
            gpus: demand(r)?,
        },
        Kind::ResourceSlice => {
            let name = name(r, "name")?;
            let node = r.ostr("node")?;
            let gpus = r.u32("gpus")?;
            let pool_at = r.offset();
            let pool = r.str("pool")?;
            nonempty(node.as_ref().map(|_| &pool), "pool", pool_at)?;
            Object::Slice { name, node, gpus, pool, generation: r.i64("generation")? }
        }
        Kind::ComputeDomain => Object::Domain {
            namespace: name(r, "namespace")?,
            name: name(r, "name")?,
            uid: name(r, "uid")?,
            size_hint: r.ou32("sizeAnnotation")?,
            num_nodes: r.ou32("numNodes")?,
        },
        Kind::PodGroup => Object::PodGroup {
            namespace: name(r, "namespace")?,
            name: name(r, "name")?,
            min_count: r.ou32("minCount")?,
            priority: r.oi32("priority")?,
        },
        Kind::Owner => Object::Owner {
            key: name(r, "key")?,
            size: r.ou32("size")?,
            source: r.str("source")?,
            priority: r.oi32("priority")?,
        },
    })
}

/// Writes a batch that [`decode`] reads back as `records`.
pub fn encode(records: &[Record]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 64 * records.len());
    b.extend_from_slice(MAGIC);
    b.put_u32(u32::try_from(records.len()).expect("fewer than 2^32 records"));
    for rec in records {
        match rec {
            Record::Remove { kind, namespace, name } => {
                b.put_u8(REMOVE);
                b.put_u8(kind.code());
                b.put_str(namespace);
                b.put_str(name);
            }
            Record::Upsert(o) => {
                b.put_u8(UPSERT);
                b.put_u8(o.kind().code());
                put_object(&mut b, o);
            }
        }
    }
    b
}

fn put_object(b: &mut Vec<u8>, o: &Object) {
    match o {
        Object::Node { name, clique_label, domain_label, unschedulable, gpus } => {
            b.put_str(name);
            b.put_ostr(clique_label.as_deref());
            b.put_ostr(domain_label.as_deref());
            b.put_bool(*unschedulable);
            b.put_u32(*gpus);
        }
        Object::Pod {
            namespace,
            name,
            terminal,
            node_name,
            nominated_node_name,
            claims,
            gpus,
            size_hint,
            pod_group,
            owner,
            created_ms,
            priority,
            runtime_limit_ms,
            started_ms,
        } => {
            b.put_str(namespace);
            b.put_str(name);
            b.put_bool(*terminal);
            b.put_ostr(node_name.as_deref());
            b.put_ostr(nominated_node_name.as_deref());
            b.put_u32(u32::try_from(claims.len()).expect("fewer than 2^32 claims"));
            for c in claims {
                b.put_str(&c.name);
                b.put_ostr(c.template.as_deref());
                b.put_ostr(c.claim.as_deref());
                b.put_ostr(c.generated.as_deref());
            }
            b.put_u32(*gpus);
            b.put_ou32(*size_hint);
            b.put_ostr(pod_group.as_deref());
            b.put_ostr(owner.as_deref());
            b.put_i64(*created_ms);
            b.put_i32(*priority);
            b.put_oi64(*runtime_limit_ms);
            b.put_i64(*started_ms);
        }
        Object::Claim { namespace, name, domain, daemon, gpus, allocated_gpus } => {
            b.put_str(namespace);
            b.put_str(name);
            b.put_ostr(domain.as_deref());
            b.put_bool(*daemon);
            b.put_u32(gpus.count);
            b.put_bool(gpus.all);
            b.put_ou32(*allocated_gpus);
        }
        Object::Template { namespace, name, domain, daemon, gpus } => {
            b.put_str(namespace);
            b.put_str(name);
            b.put_ostr(domain.as_deref());
            b.put_bool(*daemon);
            b.put_u32(gpus.count);
            b.put_bool(gpus.all);
        }
        Object::Slice { name, node, gpus, pool, generation } => {
            b.put_str(name);
            b.put_ostr(node.as_deref());
            b.put_u32(*gpus);
            b.put_str(pool);
            b.put_i64(*generation);
        }
        Object::Domain { namespace, name, uid, size_hint, num_nodes } => {
            b.put_str(namespace);
            b.put_str(name);
            b.put_str(uid);
            b.put_ou32(*size_hint);
            b.put_ou32(*num_nodes);
        }
        Object::PodGroup { namespace, name, min_count, priority } => {
            b.put_str(namespace);
            b.put_str(name);
            b.put_ou32(*min_count);
            b.put_oi32(*priority);
        }
        Object::Owner { key, size, source, priority } => {
            b.put_str(key);
            b.put_ou32(*size);
            b.put_str(source);
            b.put_oi32(*priority);
        }
    }
}
