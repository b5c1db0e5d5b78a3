//! The packed facts batch `CDF2` (`cdplace_host::facts`): every kind and shape round-trips, the
//! bytes are the documented layout, and malformed batches are errors naming the record and
//! the byte offset.

use cdplace_host::GpuDemand;
use cdplace_host::facts::{Record, decode, encode};
use cdplace_host::{Kind, Object, extract::PodClaim};

fn s(v: &str) -> String {
    v.to_string()
}

/// One record of every kind and shape, with every optional field both set and unset.
fn every_kind() -> Vec<Record> {
    vec![
        Record::Upsert(Object::Node {
            name: s("tray-0"),
            clique_label: Some(s("uuid.1")),
            domain_label: None,
            unschedulable: false,
            gpus: 4,
        }),
        Record::Upsert(Object::Node {
            name: s("tray-1"),
            clique_label: None,
            domain_label: Some(s("uid-cd")),
            unschedulable: true,
            gpus: 0,
        }),
        Record::Upsert(Object::Pod {
            namespace: s("ns"),
            name: s("p"),
            terminal: false,
            node_name: Some(s("tray-0")),
            nominated_node_name: None,
            claims: vec![
                PodClaim { name: s("channel"), template: Some(s("cd-channel")), claim: None, generated: Some(s("g")) },
                PodClaim { name: s("shared"), template: None, claim: Some(s("c")), generated: None },
            ],
            gpus: 4,
            size_hint: Some(8),
            pod_group: Some(s("pg")),
            owner: Some(s("Job/ns/trainer")),
            created_ms: 1_767_225_600_123,
            priority: -10,
        }),
        Record::Upsert(Object::Pod {
            namespace: s("ns"),
            name: s("q"),
            terminal: true,
            node_name: None,
            nominated_node_name: Some(s("tray-1")),
            claims: vec![],
            gpus: 0,
            size_hint: None,
            pod_group: None,
            owner: None,
            created_ms: 0,
            priority: 0,
        }),
        Record::Upsert(Object::Claim {
            namespace: s("ns"),
            name: s("c"),
            domain: Some(s("uid-cd")),
            daemon: true,
            gpus: GpuDemand { count: 2, all: false },
            allocated_gpus: Some(2),
        }),
        Record::Upsert(Object::Template {
            namespace: s("ns"),
            name: s("cd-channel"),
            domain: None,
            daemon: false,
            gpus: GpuDemand { count: 0, all: true },
        }),
        Record::Upsert(Object::Slice {
            name: s("tray-0-gpu"),
            node: Some(s("tray-0")),
            gpus: 4,
            pool: s("tray-0"),
            generation: i64::MAX,
        }),
        Record::Upsert(Object::Slice { name: s("other"), node: None, gpus: 0, pool: s(""), generation: -1 }),
        Record::Upsert(Object::Domain {
            namespace: s("ns"),
            name: s("cd"),
            uid: s("uid-cd"),
            size_hint: None,
            num_nodes: Some(4),
        }),
        Record::Upsert(Object::PodGroup {
            namespace: s("ns"),
            name: s("pg"),
            min_count: Some(4),
            priority: Some(i32::MAX),
        }),
        Record::Upsert(Object::Owner {
            key: s("Job/ns/trainer"),
            size: Some(8),
            source: s("Job ns/trainer spec.parallelism"),
            priority: None,
        }),
        Record::Upsert(Object::Owner { key: s("Job/ns/old"), size: None, source: s(""), priority: None }),
        Record::Remove { kind: Kind::Node, namespace: s(""), name: s("tray-9") },
        Record::Remove { kind: Kind::Pod, namespace: s("ns"), name: s("gone") },
        Record::Remove { kind: Kind::Owner, namespace: s(""), name: s("StatefulSet/ns/db") },
    ]
}

#[test]
fn every_record_round_trips() {
    let records = every_kind();
    let bytes = encode(&records);
    assert_eq!(&bytes[..4], b"CDF2");
    assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as usize, records.len());
    assert_eq!(decode(&bytes).unwrap(), records);
    assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
}

#[test]
fn the_layout_is_the_documented_one() {
    let bytes = encode(&[Record::Upsert(Object::Slice {
        name: s("sl"),
        node: Some(s("n")),
        gpus: 3,
        pool: s("p"),
        generation: 7,
    })]);
    let want: Vec<u8> = [
        &b"CDF2"[..],
        &[1, 0, 0, 0], // one record
        &[1, 5],       // upsert ResourceSlice
        &[2, 0, 0, 0], // str name
        b"sl",
        &[1, 1, 0, 0, 0], // ostr node
        b"n",
        &[3, 0, 0, 0], // u32 gpus
        &[1, 0, 0, 0], // str pool
        b"p",
        &[7, 0, 0, 0, 0, 0, 0, 0], // i64 generation
    ]
    .concat();
    assert_eq!(bytes, want);
    let remove = encode(&[Record::Remove { kind: Kind::ComputeDomain, namespace: s("a"), name: s("b") }]);
    assert_eq!(&remove[8..], &[2, 6, 1, 0, 0, 0, b'a', 1, 0, 0, 0, b'b']);
}

fn message(bytes: &[u8]) -> String {
    decode(bytes).unwrap_err().to_string()
}

#[test]
fn malformed_batches_name_the_record_and_offset() {
    assert_eq!(message(b"CDF"), "malformed facts batch at byte 0: magic: truncated (needs 4 bytes, 3 left)");
    assert_eq!(message(b"CDP3\0\0\0\0"), "malformed facts batch at byte 0: magic: expected \"CDF2\", got \"CDP3\"");
    // A batch of the previous layout (no pool in a slice record) is refused whole.
    assert_eq!(message(b"CDF1\0\0\0\0"), "malformed facts batch at byte 0: magic: expected \"CDF2\", got \"CDF1\"");
    let no_pool = encode(&[Record::Upsert(Object::Slice {
        name: s("sl"),
        node: Some(s("n")),
        gpus: 1,
        pool: s(""),
        generation: 1,
    })]);
    assert_eq!(message(&no_pool), "malformed facts batch: record 0 at byte 26: pool: must not be empty");
    let one = encode(&every_kind()[..1]);
    // Record 0 cut short inside its gpus field.
    assert_eq!(
        message(&one[..one.len() - 2]),
        format!("malformed facts batch: record 0 at byte {}: gpus: truncated (needs 4 bytes, 2 left)", one.len() - 4)
    );
    let mut bad_kind = one.clone();
    bad_kind[9] = 9;
    assert_eq!(
        message(&bad_kind),
        "malformed facts batch: record 0 at byte 9: kind: 9 is not a cdplace_kind_t (1..=8)"
    );
    let mut bad_op = one.clone();
    bad_op[8] = 3;
    assert_eq!(
        message(&bad_op),
        "malformed facts batch: record 0 at byte 8: op: 3 is neither 1 (upsert) nor 2 (remove)"
    );
    let mut trailing = one.clone();
    trailing.push(0);
    assert_eq!(
        message(&trailing),
        format!("malformed facts batch at byte {}: 1 bytes after the last of 1 records", one.len())
    );
    // The second record's bool is 2.
    let two = encode(&every_kind()[..2]);
    let mut bad_bool = two.clone();
    let at = two.len() - 5;
    bad_bool[at] = 2;
    assert_eq!(
        message(&bad_bool),
        format!("malformed facts batch: record 1 at byte {at}: unschedulable: 2 is not a boolean (0 or 1)")
    );
    // More records announced than present.
    let mut short = one.clone();
    short[4] = 2;
    assert_eq!(
        message(&short),
        format!("malformed facts batch: record 1 at byte {}: op: truncated (needs 1 bytes, 0 left)", one.len())
    );
}

#[test]
fn names_are_required_and_cluster_scoped_removals_have_no_namespace() {
    let empty_name =
        encode(&[Record::Upsert(Object::Slice { name: s(""), node: None, gpus: 0, pool: s(""), generation: 0 })]);
    assert_eq!(message(&empty_name), "malformed facts batch: record 0 at byte 10: name: must not be empty");
    let node_ns = encode(&[Record::Remove { kind: Kind::Node, namespace: s("ns"), name: s("n") }]);
    assert_eq!(
        message(&node_ns),
        "malformed facts batch: record 0 at byte 10: namespace: must be empty for a Node removal, got \"ns\""
    );
    let pod_no_ns = encode(&[Record::Remove { kind: Kind::Pod, namespace: s(""), name: s("p") }]);
    assert_eq!(message(&pod_no_ns), "malformed facts batch: record 0 at byte 10: namespace: must not be empty");
}
