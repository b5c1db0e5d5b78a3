//! `cdplace replay`'s reader and replay on traces written here in the recorder's format
//! (host-shim/go/internal/cdplace/record.go; the Go tests check the writer, e2e/record_test.go
//! the two together through a real scheduler).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cdplace_cli::replay::{self, Policy, trace};
use cdplace_host::{Backend, Cluster, Record, Settings, decision, extract, facts};
use cdplace_testkit::builders::{annotate, bound, cd_pod, channel_template, compute_domain, pod, rack};
use serde_json::{Value, json};

/// Writes a trace file the way the Go recorder does.
struct Writer {
    bytes: Vec<u8>,
    position: u64,
}

impl Writer {
    fn new(file: u32, first_position: u64) -> Self {
        let hdr = json!({"format": 1, "facts": "CDF3", "decisions": "CDP4", "policyDigest": "sha256:test",
            "args": {"sizeSettleSeconds": 0}, "run": "test-run", "file": file, "firstPosition": first_position,
            "created": "2026-12-06T00:00:00Z"})
        .to_string();
        let mut b = b"CDTR".to_vec();
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&(hdr.len() as u32).to_le_bytes());
        b.extend_from_slice(&crc32fast::hash(hdr.as_bytes()).to_le_bytes());
        b.extend_from_slice(hdr.as_bytes());
        Writer { bytes: b, position: first_position }
    }

    fn record(&mut self, p: &[u8]) {
        self.bytes.extend_from_slice(&(p.len() as u32).to_le_bytes());
        self.bytes.extend_from_slice(&crc32fast::hash(p).to_le_bytes());
        self.bytes.extend_from_slice(p);
    }

    /// Applies `objects` to `c` as one packed batch and records it.
    fn batch(&mut self, c: &Cluster, objects: &[Value]) {
        let settings: &Settings = c.settings();
        let records: Vec<Record> =
            objects.iter().map(|o| Record::Upsert(extract::extract(o, settings).unwrap().unwrap())).collect();
        let b = facts::encode(&records);
        c.apply_facts(&b).unwrap();
        let mut p = vec![1u8];
        p.extend_from_slice(&b);
        self.record(&p);
        self.position += 1;
    }

    fn assume(&mut self, c: &Cluster, ns: &str, name: &str, node: &str) {
        c.assume(ns, name, node).unwrap();
        let mut p = vec![2u8];
        for s in [ns, name, node] {
            put(&mut p, s.as_bytes());
        }
        self.record(&p);
        self.position += 1;
    }

    /// Records a policy swap to the component of `digest`.
    fn policy(&mut self, generation: u64, digest: &str) {
        let mut p = vec![6u8];
        p.extend_from_slice(&generation.to_le_bytes());
        put(&mut p, digest.as_bytes());
        self.record(&p);
    }

    /// Asks PreFilter at `now` and records the answer (or records `answer` instead, without
    /// asking, when given).
    fn pre_filter(&mut self, c: &Cluster, ns: &str, name: &str, now: i64, answer: Option<Vec<u8>>) -> Vec<u8> {
        let real = match &answer {
            Some(_) => Vec::new(),
            None => c.pre_filter_packed_at(ns, name, &[], now).unwrap().0,
        };
        let mut p = vec![4u8, 1];
        p.extend_from_slice(&self.position.to_le_bytes());
        p.extend_from_slice(&now.to_le_bytes());
        put(&mut p, ns.as_bytes());
        put(&mut p, name.as_bytes());
        put(&mut p, b"");
        p.push(1);
        put(&mut p, answer.as_deref().unwrap_or(&real));
        self.record(&p);
        real
    }
}

fn put(p: &mut Vec<u8>, b: &[u8]) {
    p.extend_from_slice(&(b.len() as u32).to_le_bytes());
    p.extend_from_slice(b);
}

fn native() -> Policy {
    Policy { label: "native.wasm".into(), digest: "sha256:test".into(), backend: cdplace_testkit::native::backend() }
}

fn cluster(backend: Arc<dyn Backend>) -> Cluster {
    Cluster::new(backend, r#"{"sizeSettleSeconds":0}"#).unwrap()
}

fn sized(ns: &str, name: &str, uid: &str, size: u32) -> Vec<Value> {
    vec![
        annotate(compute_domain(ns, name, uid), "cdplace.nvidia.com/size", &size.to_string()),
        channel_template(ns, name, uid),
    ]
}

/// A small run: two racks, a 2-tray domain placed pod by pod (with Reserve), a 6-tray one
/// decided, and `bad` recorded answers taken from an earlier view for the 6-tray domain.
fn scenario(dir: &Path, tamper: bool) -> PathBuf {
    let c = cluster(cdplace_testkit::native::backend());
    let mut w = Writer::new(0, 0);
    let mut objects = rack("a", 1, 8);
    objects.extend(rack("b", 2, 8));
    w.batch(&c, &objects);
    let now = 1_800_000_000_000;
    let mut small = sized("ns", "small", "uid-small", 2);
    small.push(cd_pod("ns", "small", "s0"));
    small.push(cd_pod("ns", "small", "s1"));
    w.batch(&c, &small);
    w.pre_filter(&c, "ns", "s0", now, None);
    w.assume(&c, "ns", "s0", "a-00");
    w.pre_filter(&c, "ns", "s1", now + 10, None);
    w.batch(&c, &[bound(cd_pod("ns", "small", "s0"), "a-00")]);
    let mut big = sized("ns", "big", "uid-big", 6);
    big.extend((0..6).map(|i| cd_pod("ns", "big", &format!("g{i}"))));
    w.batch(&c, &big);
    // Before the 2-tray domain took a-01: what the 6-tray domain would hear, kept to tamper with.
    let first = w.pre_filter(&c, "ns", "g0", now + 20, None);
    // Fill rack a so the big domain no longer fits there: its answer changes.
    let fill: Vec<Value> = (2..8).map(|i| bound(pod("ns", &format!("f{i}"), None, 4), &format!("a-{i:02}"))).collect();
    w.batch(&c, &fill);
    w.pre_filter(&c, "ns", "g1", now + 30, if tamper { Some(first) } else { None });
    let path = dir.join("cdplace-test-run-000000.cdtr");
    std::fs::write(&path, &w.bytes).unwrap();
    path
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cdplace-replay-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_same_policy_reproduces_every_recorded_decision() {
    let dir = tmp("same");
    scenario(&dir, false);
    let t = trace::read(&dir).unwrap();
    assert!(t.torn.is_none());
    let r = replay::replay(&t, &[native()]);
    let p = &r.policies[0];
    assert_eq!((p.decisions, p.compared, p.agreed, p.not_comparable), (4, 4, 4, 0), "{}", r.render());
    assert!(p.same_as_recorded && p.differing.is_empty());
    assert_eq!(p.classes["1-4"].compared, 2, "the 2-tray domain's decisions: {:?}", p.classes);
    assert_eq!(p.classes["5-8"].agreed, 2, "the 6-tray domain's decisions: {:?}", p.classes);
    assert!(r.render().contains("4 (100.0%)"), "{}", r.render());
}

/// The packed answer the recorder keeps decodes (decision::unpack) to the decision the library
/// makes, through the real component.
#[test]
fn a_recorded_answer_decodes_to_the_decision() {
    let c = cluster(cdplace_testkit::builders::runtime());
    let mut objects = rack("a", 1, 4);
    objects.extend(sized("ns", "cd", "uid-1", 2));
    objects.push(cd_pod("ns", "cd", "p0"));
    for o in &objects {
        c.apply(o).unwrap();
    }
    let (packed, _) = c.pre_filter_packed_at("ns", "p0", &[], 1).unwrap();
    assert_eq!(decision::unpack(&packed).unwrap(), c.pre_filter("ns", "p0", &[]).unwrap());
    let e = decision::unpack(&packed[..packed.len() - 1]).unwrap_err();
    assert!(e.starts_with("packed decision: byte"), "{e}");
}

#[test]
fn a_differing_answer_is_listed_with_both_reasons() {
    let dir = tmp("differ");
    scenario(&dir, true);
    let r = replay::replay(&trace::read(&dir).unwrap(), &[native()]);
    let p = &r.policies[0];
    assert_eq!((p.compared, p.agreed), (4, 3), "{}", r.render());
    let d = &p.differing[..];
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].domain.as_str(), d[0].pod.as_str(), d[0].size, d[0].class.as_str()),
        ("uid-big", "ns/g1", Some(6), "5-8")
    );
    assert_ne!(d[0].recorded, d[0].replayed);
    let text = r.render();
    assert!(text.contains("uid-big (6 trays)") && text.contains("recorded: ") && text.contains("replayed: "), "{text}");
    let json: Value = serde_json::to_value(&r).unwrap();
    assert_eq!(json["policies"][0]["differing"][0]["domain"], "uid-big");
    assert!(json["policies"][0]["differing"][0]["replayed"]["reason"].is_string());
}

#[test]
fn a_torn_trace_is_read_up_to_the_tear() {
    let dir = tmp("torn");
    let path = scenario(&dir, false);
    let full = std::fs::read(&path).unwrap();
    std::fs::write(&path, &full[..full.len() - 3]).unwrap();
    let t = trace::read(&path).unwrap();
    let torn = t.torn.clone().unwrap();
    assert!(torn.contains("trace torn at byte") && torn.contains("(record 9)"), "{torn}");
    let r = replay::replay(&t, &[native()]);
    assert_eq!((r.policies[0].compared, r.policies[0].agreed), (3, 3));
    assert!(r.render().contains("warning: ") && r.render().contains("read up to the tear"));

    // A flipped byte inside a record: its CRC fails there.
    let mut bad = full.clone();
    let at = full.len() - 40;
    bad[at] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    let torn = trace::read(&path).unwrap().torn.unwrap();
    assert!(torn.contains("CRC mismatch"), "{torn}");
}

#[test]
fn without_the_first_file_nothing_is_compared() {
    let dir = tmp("head");
    let c = cluster(cdplace_testkit::native::backend());
    let mut w = Writer::new(3, 120);
    w.batch(&c, &rack("a", 1, 4));
    w.pre_filter(&c, "ns", "nobody", 1, Some(b"CDP4".to_vec()));
    std::fs::write(dir.join("cdplace-test-run-000003.cdtr"), &w.bytes).unwrap();
    let r = replay::replay(&trace::read(&dir).unwrap(), &[native()]);
    assert!(r.trace.head_missing);
    assert_eq!((r.policies[0].compared, r.policies[0].not_comparable), (0, 1));
}

/// A run that swapped its policy: the swap is listed, and the decisions made after it by another
/// component than the one replayed are counted (still compared).
#[test]
fn a_policy_swap_in_the_trace_is_reported() {
    let dir = tmp("swap");
    let c = cluster(cdplace_testkit::native::backend());
    let mut w = Writer::new(0, 0);
    w.batch(&c, &rack("a", 1, 4));
    let mut cd = sized("ns", "cd", "uid-1", 2);
    cd.push(cd_pod("ns", "cd", "p0"));
    cd.push(cd_pod("ns", "cd", "p1"));
    w.batch(&c, &cd);
    w.pre_filter(&c, "ns", "p0", 1, None);
    w.policy(2, "sha256:other");
    w.pre_filter(&c, "ns", "p1", 2, None);
    std::fs::write(dir.join("cdplace-test-run-000000.cdtr"), &w.bytes).unwrap();
    let r = replay::replay(&trace::read(&dir).unwrap(), &[native()]);
    assert_eq!(r.trace.swaps, vec!["2 sha256:other".to_string()]);
    let p = &r.policies[0];
    assert_eq!((p.compared, p.agreed, p.recorded_by_other), (2, 2, 1), "{}", r.render());
    assert!(r.render().contains("swapped its policy 1 time(s)"), "{}", r.render());
}

#[test]
fn unreadable_traces_are_errors() {
    let dir = tmp("bad");
    assert!(trace::read(&dir).unwrap_err().to_string().contains("no trace files"));
    let f = dir.join("x.cdtr");
    std::fs::write(&f, b"nope").unwrap();
    assert!(trace::read(&f).unwrap_err().to_string().contains("not a cdplace trace"));
    let mut w = Writer::new(0, 0);
    w.bytes[4] = 9;
    std::fs::write(&f, &w.bytes).unwrap();
    assert!(trace::read(&f).unwrap_err().to_string().contains("trace format 9"));
}

/// The layout's one owner is the Go writer (record.go); the reader's constants match it.
#[test]
fn the_reader_matches_the_writer() {
    let go = include_str!("../../go/internal/cdplace/record.go");
    for want in [
        "TraceMagic  = \"CDTR\"",
        "TraceFormat = 1",
        "RecordBatch    byte = 1",
        "RecordAssume   byte = 2",
        "RecordForget   byte = 3",
        "RecordDecision byte = 4",
        "RecordGap      byte = 5",
        "RecordPolicy   byte = 6",
        "CallPreFilter CallKind = 1",
        "CallSteer     CallKind = 2",
        "CallPreempt   CallKind = 3",
    ] {
        assert!(go.contains(want), "record.go no longer says {want}");
    }
    assert_eq!(trace::MAGIC, b"CDTR");
    assert_eq!(trace::FORMAT, 1);
}
