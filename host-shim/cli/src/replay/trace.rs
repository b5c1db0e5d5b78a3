//! Reading a decision trace: the files the scheduler's recorder writes (`recordPath`; the
//! layout is documented once, in `host-shim/go/internal/cdplace/record.go`, and these constants
//! are checked against it by a test). A trace is one file or a directory: its newest run's files,
//! in order. Reading stops at the first record whose length runs past the end of its file or
//! whose CRC-32 fails: a crash leaves a torn tail, which is dropped and reported.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The first four bytes of every trace file.
pub const MAGIC: &[u8; 4] = b"CDTR";
/// The trace layout this reader knows.
pub const FORMAT: u32 = 1;
/// Largest record accepted: a length above it is a tear, not an allocation.
const MAX_RECORD: usize = 1 << 30;

/// A trace that cannot be used at all (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TraceError {
    pub path: String,
    pub message: String,
}

fn err(path: &Path, message: impl Into<String>) -> TraceError {
    TraceError { path: path.display().to_string(), message: message.into() }
}

/// The header each file starts with (record.go's `TraceHeader`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    pub format: u32,
    pub facts: String,
    pub decisions: String,
    pub policy_digest: String,
    pub args: serde_json::Value,
    pub run: String,
    pub file: u32,
    pub first_position: u64,
    #[serde(default)]
    pub created: String,
}

/// The policy call a decision record holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    PreFilter,
    Steer { gpus: bool },
    Preempt,
}

impl Call {
    /// The name the report uses.
    pub fn name(self) -> &'static str {
        match self {
            Call::PreFilter => "pre-filter",
            Call::Steer { .. } => "steer",
            Call::Preempt => "preempt",
        }
    }
}

/// One recorded decision.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub call: Call,
    /// View-changing records before it.
    pub position: u64,
    /// The policy time it was asked at (Unix milliseconds).
    pub now_ms: i64,
    pub namespace: String,
    pub name: String,
    /// The packed overlay (pre-filter).
    pub overlay: Vec<u8>,
    /// The answer bytes (packed `CDP4`, or the preemption JSON), or the call's error.
    pub answer: Result<Vec<u8>, String>,
}

/// One record, in trace order.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A packed facts batch exactly as the scheduler applied it.
    Batch(Vec<u8>),
    Assume {
        namespace: String,
        name: String,
        node: String,
    },
    Forget {
        namespace: String,
        name: String,
    },
    Decision(Recorded),
    /// The recorder dropped records before this point; `position` is the count reached.
    Gap {
        dropped: u64,
        position: u64,
    },
    /// A policy swap: the component of `digest` decides from here on, as `generation`.
    Policy {
        generation: u64,
        digest: String,
    },
}

/// A whole trace, read up to its end or its tear.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The first file's header (the args and policy of the run).
    pub header: Header,
    pub files: Vec<PathBuf>,
    pub entries: Vec<Entry>,
    /// `trace torn at byte N (record K): ...` when a record failed; everything before it is read.
    pub torn: Option<String>,
}

impl Trace {
    /// Whether the run's first file is here: only it starts from an empty view.
    pub fn has_head(&self) -> bool {
        self.header.file == 0
    }
}

/// The files of a trace: `path` itself, or the newest run's `cdplace-<run>-<index>.cdtr` files
/// in a directory, in index order.
pub fn files(path: &Path) -> Result<Vec<PathBuf>, TraceError> {
    let meta = fs::metadata(path).map_err(|e| err(path, e.to_string()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut names: Vec<String> = fs::read_dir(path)
        .map_err(|e| err(path, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.starts_with("cdplace-") && n.ends_with(".cdtr") && n.len() > "cdplace--000000.cdtr".len())
        .collect();
    names.sort();
    let run = |n: &str| n[..n.len() - "-000000.cdtr".len()].to_string();
    let Some(newest) = names.last().map(|n| run(n)) else {
        return Err(err(path, "no trace files (cdplace-*.cdtr) here"));
    };
    Ok(names.iter().filter(|n| run(n) == newest).map(|n| path.join(n)).collect())
}

/// Reads a trace (see [`files`]).
pub fn read(path: &Path) -> Result<Trace, TraceError> {
    let files = files(path)?;
    let mut trace: Option<Trace> = None;
    let mut index = 0u64;
    for f in &files {
        let bytes = fs::read(f).map_err(|e| err(f, e.to_string()))?;
        let (header, start) = header(f, &bytes)?;
        let t = trace.get_or_insert_with(|| Trace {
            header: header.clone(),
            files: files.clone(),
            entries: Vec::new(),
            torn: None,
        });
        if header.run != t.header.run {
            return Err(err(f, format!("belongs to run {}, not {}", header.run, t.header.run)));
        }
        let mut off = start;
        while off < bytes.len() {
            match record(&bytes, off) {
                Ok((entry, next)) => {
                    t.entries.push(entry);
                    off = next;
                    index += 1;
                }
                Err(why) => {
                    t.torn = Some(format!("{}: trace torn at byte {off} (record {index}): {why}", f.display()));
                    return Ok(trace.expect("set above"));
                }
            }
        }
    }
    trace.ok_or_else(|| err(path, "no trace files"))
}

fn header(f: &Path, b: &[u8]) -> Result<(Header, usize), TraceError> {
    if b.len() < 16 || &b[..4] != MAGIC {
        return Err(err(f, "not a cdplace trace (no CDTR header)"));
    }
    let format = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes"));
    if format != FORMAT {
        return Err(err(f, format!("trace format {format}; this cdplace reads format {FORMAT}")));
    }
    let n = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
    let Some(json) = b.get(16..16 + n) else {
        return Err(err(f, "the header is cut short"));
    };
    if crc32fast::hash(json) != crc {
        return Err(err(f, "the header's CRC does not match"));
    }
    let h: Header = serde_json::from_slice(json).map_err(|e| err(f, format!("the header: {e}")))?;
    let facts = std::str::from_utf8(cdplace_host::facts::MAGIC).expect("ASCII");
    let decisions = std::str::from_utf8(cdplace_host::decision::MAGIC).expect("ASCII");
    if h.facts != facts || h.decisions != decisions {
        return Err(err(
            f,
            format!(
                "recorded {} batches and {} decisions; this cdplace reads {facts} and {decisions}",
                h.facts, h.decisions
            ),
        ));
    }
    Ok((h, 16 + n))
}

/// One record at `off`: the entry and the offset after it, or why it is torn.
fn record(b: &[u8], off: usize) -> Result<(Entry, usize), String> {
    let Some(h) = b.get(off..off + 8) else {
        return Err(format!("{} bytes left, a record header needs 8", b.len() - off));
    };
    let len = u32::from_le_bytes(h[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(h[4..].try_into().expect("4 bytes"));
    if len == 0 || len > MAX_RECORD {
        return Err(format!("record length {len}"));
    }
    let Some(p) = b.get(off + 8..off + 8 + len) else {
        return Err(format!("record of {len} bytes, {} left", b.len() - off - 8));
    };
    if crc32fast::hash(p) != crc {
        return Err("CRC mismatch".into());
    }
    let entry = payload(p).map_err(|e| format!("malformed record: {e}"))?;
    Ok((entry, off + 8 + len))
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!("{what}: {n} bytes wanted, {} left", self.0.len()));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }
    fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().expect("8 bytes")))
    }
    fn bytes(&mut self, what: &str) -> Result<Vec<u8>, String> {
        let n = u32::from_le_bytes(self.take(4, what)?.try_into().expect("4 bytes")) as usize;
        Ok(self.take(n, what)?.to_vec())
    }
    fn str(&mut self, what: &str) -> Result<String, String> {
        String::from_utf8(self.bytes(what)?).map_err(|_| format!("{what}: not UTF-8"))
    }
}

fn payload(p: &[u8]) -> Result<Entry, String> {
    let mut c = Cursor(&p[1..]);
    let e = match p[0] {
        1 => return Ok(Entry::Batch(p[1..].to_vec())),
        2 => Entry::Assume { namespace: c.str("namespace")?, name: c.str("name")?, node: c.str("node")? },
        3 => Entry::Forget { namespace: c.str("namespace")?, name: c.str("name")? },
        4 => {
            let kind = c.u8("call")?;
            let position = c.u64("position")?;
            let now_ms = c.u64("now_ms")? as i64;
            let namespace = c.str("namespace")?;
            let name = c.str("name")?;
            let overlay = c.bytes("overlay")?;
            let ok = c.u8("ok")?;
            let answer = c.bytes("answer")?;
            let call = match kind {
                1 => Call::PreFilter,
                2 => Call::Steer { gpus: overlay.first() == Some(&1) },
                3 => Call::Preempt,
                k => return Err(format!("call {k}")),
            };
            let answer = if ok == 1 { Ok(answer) } else { Err(String::from_utf8_lossy(&answer).into_owned()) };
            Entry::Decision(Recorded { call, position, now_ms, namespace, name, overlay, answer })
        }
        5 => Entry::Gap { dropped: c.u64("dropped")?, position: c.u64("position")? },
        6 => Entry::Policy { generation: c.u64("generation")?, digest: c.str("digest")? },
        t => return Err(format!("record type {t}")),
    };
    if !c.0.is_empty() {
        return Err(format!("{} bytes after the record's fields", c.0.len()));
    }
    Ok(e)
}
