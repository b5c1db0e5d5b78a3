//! The packed formats from the other side: facts batches (`CDF3`) built from Kubernetes objects
//! as the Go adapter would send them, and a decoder of the packed decision (`CDP4`) written
//! from the layout in `include/cdplace.h`, independent of the host's encoder, so tests can check
//! that both forms of a decision say the same.

use cdplace_host::facts::{self, Record};
use cdplace_host::{Code, Decision, Settings, Status, extract};
use serde_json::Value;

/// A `CDF3` batch upserting `objects` (extracted under `settings`; kinds cdplace does not read
/// are left out).
pub fn facts_of(objects: &[Value], settings: &Settings) -> Vec<u8> {
    let records: Vec<Record> =
        objects.iter().filter_map(|o| extract::extract(o, settings).expect("extract").map(Record::Upsert)).collect();
    facts::encode(&records)
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.0.len() >= n, "packed decision truncated");
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().expect("4 bytes"))
    }
    fn str(&mut self) -> String {
        let n = self.u32() as usize;
        String::from_utf8(self.take(n).to_vec()).expect("UTF-8")
    }
}

fn code(b: u8) -> Code {
    match b {
        0 => Code::Success,
        1 => Code::Skip,
        2 => Code::Unschedulable,
        3 => Code::UnschedulableAndUnresolvable,
        4 => Code::Error,
        _ => panic!("code {b} is not a cdplace_code_t"),
    }
}

/// Reads a `CDP4` decision; panics on anything malformed.
pub fn decode_decision(bytes: &[u8]) -> Decision {
    let mut c = Cursor(bytes);
    assert_eq!(c.take(4), b"CDP4", "magic");
    let reasons: Vec<String> = (0..c.u32()).map(|_| c.str()).collect();
    let verdict = |c: &mut Cursor<'_>| {
        let code = code(c.u8());
        Status { code, reason: reasons[c.u32() as usize].clone() }
    };
    let status = verdict(&mut c);
    let domain = (c.u8() == 1).then(|| c.str());
    let exclusive = c.u8() == 1;
    let other = verdict(&mut c);
    let other_score = c.u32();
    let mut stable = std::collections::BTreeSet::new();
    let cliques = (0..c.u32())
        .map(|_| {
            let label = c.str();
            let s = verdict(&mut c);
            let score = c.u32();
            match c.u8() {
                0 => {}
                1 => {
                    stable.insert(label.clone());
                }
                f => panic!("clique flags {f:#x}: only bit 0 is defined"),
            }
            (label, (s, score))
        })
        .collect();
    let nodes = (0..c.u32())
        .map(|_| {
            let node = c.str();
            (node, verdict(&mut c))
        })
        .collect();
    let node_set = (c.u8() == 1).then(|| (0..c.u32()).map(|_| c.str()).collect());
    assert!(c.0.is_empty(), "{} bytes after the decision", c.0.len());
    Decision { status, domain, exclusive, cliques, other, other_score, stable, nodes, node_set }
}
