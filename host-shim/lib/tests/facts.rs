//! The packed facts batch `CDF3` (`cdplace_host::facts`): every kind and shape round-trips, the
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
            runtime_limit_ms: Some(630_000),
            started_ms: 1_767_225_609_000,
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
            runtime_limit_ms: None,
            started_ms: 0,
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
    assert_eq!(&bytes[..4], b"CDF3");
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
        &b"CDF3"[..],
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

/// A pod record with a runtime limit and a start time, byte for byte: the same bytes the Go
/// encoder's test (`host-shim/go/internal/cdplace/cdplace_test.go`,
/// `TestPodRecordsAsTheLibraryReadsThem`) expects of `AppendPod`.
#[test]
fn the_pod_record_ends_with_the_runtime_limit_and_the_start_time() {
    let pod = |runtime_limit_ms| {
        Record::Upsert(Object::Pod {
            namespace: s("ns"),
            name: s("p"),
            terminal: false,
            node_name: None,
            nominated_node_name: None,
            claims: vec![],
            gpus: 4,
            size_hint: None,
            pod_group: None,
            owner: None,
            created_ms: 1_782_900_005_000,
            priority: -3,
            runtime_limit_ms,
            started_ms: 1_782_900_009_000,
        })
    };
    let want: Vec<u8> = [
        &b"CDF3"[..],
        &[1, 0, 0, 0], // one record
        &[1, 2],       // upsert Pod
        &[2, 0, 0, 0], // str namespace
        b"ns",
        &[1, 0, 0, 0], // str name
        b"p",
        &[0, 0, 0],                                  // terminal, nodeName, nominatedNodeName
        &[0, 0, 0, 0],                               // nclaims
        &[4, 0, 0, 0],                               // u32 gpus
        &[0, 0, 0],                                  // sizeAnnotation, podGroupName, ownerKey
        &[0x88, 0x18, 0x1f, 0x1d, 0x9f, 0x01, 0, 0], // i64 createdMs 1782900005000
        &[0xfd, 0xff, 0xff, 0xff],                   // i32 priority -3
        &[1, 0xf0, 0x9c, 0x09, 0, 0, 0, 0, 0],       // oi64 runtimeLimitMs 630000
        &[0x28, 0x28, 0x1f, 0x1d, 0x9f, 0x01, 0, 0], // i64 startedMs 1782900009000
    ]
    .concat();
    assert_eq!(encode(&[pod(Some(630_000))]), want);
    assert_eq!(decode(&want).unwrap(), vec![pod(Some(630_000))]);
    // No deadline: the tag alone.
    let none = encode(&[pod(None)]);
    assert_eq!(none.len(), want.len() - 8);
    assert_eq!(&none[none.len() - 9..], &[&[0][..], &want[want.len() - 8..]].concat()[..]);
    assert_eq!(decode(&none).unwrap(), vec![pod(None)]);
    // The new fields are read where they are written.
    let mut bad_tag = want.clone();
    bad_tag[47] = 2;
    assert_eq!(
        message(&bad_tag),
        "malformed facts batch: record 0 at byte 47: runtimeLimitMs: option tag 2 is not 0 or 1"
    );
    assert_eq!(
        message(&want[..want.len() - 2]),
        "malformed facts batch: record 0 at byte 56: startedMs: truncated (needs 8 bytes, 6 left)"
    );
}

fn message(bytes: &[u8]) -> String {
    decode(bytes).unwrap_err().to_string()
}

#[test]
fn malformed_batches_name_the_record_and_offset() {
    assert_eq!(message(b"CDF"), "malformed facts batch at byte 0: magic: truncated (needs 4 bytes, 3 left)");
    assert_eq!(message(b"CDP3\0\0\0\0"), "malformed facts batch at byte 0: magic: expected \"CDF3\", got \"CDP3\"");
    // Batches of the previous layouts (no runtime limit and start time in a pod record; no pool
    // in a slice record) are refused whole.
    assert_eq!(message(b"CDF2\0\0\0\0"), "malformed facts batch at byte 0: magic: expected \"CDF3\", got \"CDF2\"");
    assert_eq!(message(b"CDF1\0\0\0\0"), "malformed facts batch at byte 0: magic: expected \"CDF3\", got \"CDF1\"");
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
