//! `cdplace status --shadow`: what the scheduler's shadow policy would have decided differently,
//! from the Events it records (host-shim/go/pkg/computedomain/shadow.go and policy.go).
//!
//! - **Divergences.** For each ComputeDomain whose shadow verdict turns divergent the scheduler
//!   records a Normal `ShadowDiverged` Event on the ComputeDomain (on the pod while the domain is
//!   not in the fleet status yet), its note formatted by `divergenceNote`:
//!   `shadow policy <12 hex> (generation N): <outcome> for pod <ns/name>; live (generation M):
//!   <live answer>; shadow: <shadow answer>` ([`parse_divergence`]). The ones of the selected
//!   namespace (`-n`, the context's, or every one with `-A`) are listed newest first, at most
//!   `--limit`.
//! - **Policies.** Each swap of the live or the shadow policy from a ConfigMap records a Normal
//!   `PolicyApplied` Event on it, its note formatted by `swapper.apply`: `policy sha256:<64 hex>
//!   from <source> is generation N (self-test: ...)`, `shadow policy ...` for the shadow
//!   ([`parse_applied`]). The newest of each, in any namespace, names the policy in use; none
//!   when the policy was never swapped from a ConfigMap (built in, a file) or its Events expired
//!   (the API server keeps Events for its `--event-ttl`, one hour by default).
//!
//! Events are core/v1 Events listed by reason (a field selector); a note that does not parse (a
//! scheduler of another version) is kept as it is. Output: `text` (within 100 columns, clique
//! labels shortened as on the map), `wide` (full labels and digests, the generations and the
//! shadow's digest of each divergence, how many times it was seen; lines not wrapped),
//! `json` and `yaml` ([`ShadowDoc`], `kind: ShadowReport`).

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::text::wrap;
use super::{Format, Options};
use crate::explain::ExplainError;

/// The `kind` of the document.
pub const KIND: &str = "ShadowReport";

/// What the live policy line says when no `PolicyApplied` Event names it.
pub const NO_LIVE_SWAP: &str = "no swap recorded in Events (the policy built into the scheduler or read from a file, \
                                or the Events expired after the API server's event TTL)";

/// What the shadow policy line says when no `PolicyApplied` Event names it.
pub const NO_SHADOW_SWAP: &str = "no swap recorded in Events (no shadow policy, one built in or read from a file, \
                                  or the Events expired after the API server's event TTL)";

/// A `ShadowDiverged` note, as `divergenceNote` (shadow.go) formats it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DivergenceNote {
    /// The shadow policy's digest, its first 12 hex digits.
    pub shadow_digest: String,
    pub shadow_generation: u64,
    /// `would-not-place`, `would-place`, `other-clique`, `elsewhere` or `error`.
    pub outcome: String,
    /// The pod decided for, `namespace/name`.
    pub pod: String,
    pub live_generation: u64,
    /// Both answers in words: where each places the domain, or its status and reason.
    pub live: String,
    pub shadow: String,
}

/// Parses a `ShadowDiverged` note. The two answers are split at the first `; shadow: `: the live
/// answer is a clique list or a policy's reason, which does not say that.
pub fn parse_divergence(note: &str) -> Option<DivergenceNote> {
    let rest = note.strip_prefix("shadow policy ")?;
    let (digest, rest) = rest.split_once(" (generation ")?;
    let (shadow_generation, rest) = rest.split_once("): ")?;
    let (outcome, rest) = rest.split_once(" for pod ")?;
    let (pod, rest) = rest.split_once("; live (generation ")?;
    let (live_generation, rest) = rest.split_once("): ")?;
    let (live, shadow) = rest.split_once("; shadow: ")?;
    if outcome.contains(' ') || pod.contains(' ') {
        return None;
    }
    Some(DivergenceNote {
        shadow_digest: digest.to_string(),
        shadow_generation: shadow_generation.parse().ok()?,
        outcome: outcome.to_string(),
        pod: pod.to_string(),
        live_generation: live_generation.parse().ok()?,
        live: live.to_string(),
        shadow: shadow.to_string(),
    })
}

/// Which policy a `PolicyApplied` Event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Live,
    Shadow,
}

/// A `PolicyApplied` note, as `swapper.apply` (policy.go) formats it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedNote {
    pub role: Role,
    /// `sha256:<64 hex>`.
    pub digest: String,
    /// Where it came from: `ConfigMap <ns>/<name> key <key>`.
    pub source: String,
    pub generation: u64,
}

/// Parses a `PolicyApplied` note (a `PolicyRefused` one gives `None`).
pub fn parse_applied(note: &str) -> Option<AppliedNote> {
    let (role, rest) = match note.strip_prefix("shadow policy ") {
        Some(rest) => (Role::Shadow, rest),
        None => (Role::Live, note.strip_prefix("policy ")?),
    };
    let (digest, rest) = rest.split_once(" from ")?;
    let (source, rest) = rest.split_once(" is generation ")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    Some(AppliedNote {
        role,
        digest: digest.to_string(),
        source: source.to_string(),
        generation: rest[..digits].parse().ok()?,
    })
}

/// The digest as the text names it: `sha256:` and its first 12 hex digits.
pub fn short_digest(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(hex) => format!("sha256:{}", hex.get(..12).unwrap_or(hex)),
        None => digest.to_string(),
    }
}

/// Microseconds since the Unix epoch of an RFC 3339 time as the API server writes them
/// (`2025-01-02T03:04:05Z`, `2025-01-02T03:04:05.123456Z`, or with an offset).
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut micros = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.find(|c: char| !c.is_ascii_digit()).unwrap_or(frac.len());
        if n == 0 {
            return None;
        }
        let digits: String = frac[..n].chars().chain(std::iter::repeat('0')).take(6).collect();
        micros = digits.parse().ok()?;
        rest = &frac[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (oh, om) = rest[1..].split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            sign * (oh.parse::<i64>().ok()? * 3600 + om.parse::<i64>().ok()? * 60)
        }
    };
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec - offset) * 1_000_000) + micros)
}

/// An age as kubectl prints one (`45s`, `5m30s`, `2h10m`, `3d4h`, `20d`).
pub fn age(micros: i64) -> String {
    let s = (micros / 1_000_000).max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && s % 60 == 0 => format!("{m}m"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 && m % 60 == 0 => format!("{h}h"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 && h % 24 == 0 => format!("{d}d"),
        _ if h < 192 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ => format!("{}y", d / 365),
    }
}

/// The object an Event is about (`involvedObject`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Regarding {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl Regarding {
    /// `namespace/name`, with the kind before it when it is not a ComputeDomain.
    fn display(&self) -> String {
        match self.kind.as_str() {
            "ComputeDomain" => format!("{}/{}", self.namespace, self.name),
            kind => format!("{} {}/{}", kind.to_lowercase(), self.namespace, self.name),
        }
    }
}

/// What every Event listed gives.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EventFacts {
    /// When it last happened, as written, and in microseconds since the epoch.
    time: Option<String>,
    at: Option<i64>,
    /// How many times it happened (its series' count, else `count`, else 1).
    count: u64,
    regarding: Regarding,
    message: String,
    /// The Event's own name, a tie-break for the order.
    name: String,
}

fn facts(e: &Value) -> EventFacts {
    let s = |v: &Value| v.as_str().map(String::from);
    // An Event recorded through events.k8s.io (as the scheduler does) reads, as core/v1, with
    // eventTime and a series; an older one with lastTimestamp.
    let time = [
        &e["series"]["lastObservedTime"],
        &e["lastTimestamp"],
        &e["eventTime"],
        &e["firstTimestamp"],
        &e["metadata"]["creationTimestamp"],
    ]
    .into_iter()
    .find_map(|v| s(v).filter(|t| !t.is_empty()));
    let count = e["series"]["count"].as_u64().or_else(|| e["count"].as_u64()).unwrap_or(1).max(1);
    let o = &e["involvedObject"];
    EventFacts {
        at: time.as_deref().and_then(parse_time),
        time,
        count,
        regarding: Regarding {
            kind: s(&o["kind"]).unwrap_or_default(),
            namespace: s(&o["namespace"]).unwrap_or_default(),
            name: s(&o["name"]).unwrap_or_default(),
        },
        message: s(&e["message"]).or_else(|| s(&e["note"])).unwrap_or_default(),
        name: s(&e["metadata"]["name"]).unwrap_or_default(),
    }
}

/// The newest `PolicyApplied` Event of one policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub note: AppliedNote,
    pub time: Option<String>,
    pub at: Option<i64>,
}

/// One `ShadowDiverged` Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diverged {
    pub time: Option<String>,
    pub at: Option<i64>,
    pub count: u64,
    pub regarding: Regarding,
    /// The note as recorded.
    pub message: String,
    /// The note parsed; `None` when it does not read as `divergenceNote` writes it.
    pub note: Option<DivergenceNote>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadow {
    /// The namespace whose Events are listed; `None`: every namespace.
    pub namespace: Option<String>,
    /// Now, in microseconds since the epoch (ages are counted from it).
    pub now: i64,
    pub live: Option<Applied>,
    pub shadow: Option<Applied>,
    /// Newest first, at most the limit.
    pub divergences: Vec<Diverged>,
    /// `ShadowDiverged` Events found, before the limit.
    pub matched: usize,
}

/// Newest first (an Event without a time last), then by name for a stable order.
fn newest_first(a: &EventFacts, b: &EventFacts) -> std::cmp::Ordering {
    b.at.cmp(&a.at).then_with(|| b.name.cmp(&a.name))
}

/// The report of the `ShadowDiverged` Events `diverged` (of `namespace`; `None`: every one) and
/// the `PolicyApplied` Events `applied`, at most `limit` divergences, ages counted from `now`.
pub fn report(namespace: Option<String>, diverged: &[Value], applied: &[Value], limit: usize, now: i64) -> Shadow {
    let mut policies: Vec<(EventFacts, AppliedNote)> =
        applied.iter().map(facts).filter_map(|f| parse_applied(&f.message).map(|n| (f, n))).collect();
    policies.sort_by(|a, b| newest_first(&a.0, &b.0));
    let newest = |role: Role| {
        policies.iter().find(|(_, n)| n.role == role).map(|(f, n)| Applied {
            note: n.clone(),
            time: f.time.clone(),
            at: f.at,
        })
    };
    let mut events: Vec<EventFacts> = diverged.iter().map(facts).collect();
    events.sort_by(newest_first);
    let matched = events.len();
    let divergences = events
        .into_iter()
        .take(limit)
        .map(|f| Diverged {
            note: parse_divergence(&f.message),
            time: f.time,
            at: f.at,
            count: f.count,
            regarding: f.regarding,
            message: f.message,
        })
        .collect();
    Shadow { namespace, now, live: newest(Role::Live), shadow: newest(Role::Shadow), divergences, matched }
}

/// Runs `status --shadow`: a live cluster only; lists the Events and reports.
pub fn run(opts: &Options) -> Result<Shadow, ExplainError> {
    if !opts.source.snapshots.is_empty() {
        return Err(ExplainError::Usage(
            "--shadow lists the scheduler's ShadowDiverged and PolicyApplied Events, which only a live cluster has \
             (a snapshot holds no Events): drop --snapshot"
                .to_string(),
        ));
    }
    if opts.output == Format::Svg {
        return Err(ExplainError::Usage("--shadow is a list, not a map: -o text, wide, json or yaml".to_string()));
    }
    let events =
        crate::live::read_shadow_events(&opts.source.live, opts.source.namespace.as_deref(), opts.all_namespaces)?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
    Ok(report(events.namespace, &events.diverged, &events.applied, opts.limit, now))
}

/// Clique labels of the driver's `<cluster UUID>.<clique ID>` form shortened as on the map:
/// `<first 8 of the UUID>….<clique ID>`.
pub fn shorten_cliques(text: &str) -> String {
    let is_uuid = |s: &[u8]| {
        s.len() == 36
            && s.iter().enumerate().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => *c == b'-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 37 <= b.len() {
        let boundary = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        if boundary && is_uuid(&b[i..i + 36]) && b[i + 36] == b'.' {
            out.push_str(&text[copied..i + 8]);
            out.push('…');
            copied = i + 36;
            i += 37;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

impl Shadow {
    /// The report in `format` (not SVG: [`run`] refuses it), ending with a newline.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Text | Format::Svg => self.text(false),
            Format::Wide => self.text(true),
            Format::Json => crate::output::json(KIND, &self.doc()),
            Format::Yaml => crate::output::yaml(KIND, &self.doc()),
        }
    }

    fn ago(&self, at: Option<i64>) -> String {
        at.map_or_else(|| "?".to_string(), |t| age(self.now - t))
    }

    fn text(&self, wide: bool) -> String {
        let mut out = String::new();
        let clique = |s: &str| if wide { s.to_string() } else { shorten_cliques(s) };
        for (label, applied, none) in
            [("live policy:  ", &self.live, NO_LIVE_SWAP), ("shadow policy:", &self.shadow, NO_SHADOW_SWAP)]
        {
            let line = match applied {
                Some(a) => format!(
                    "{label} {} generation {}, applied {} ago from {}",
                    if wide { a.note.digest.clone() } else { short_digest(&a.note.digest) },
                    a.note.generation,
                    self.ago(a.at),
                    a.note.source,
                ),
                None => format!("{label} {none}"),
            };
            if wide {
                let _ = writeln!(out, "{line}");
            } else {
                wrap(&mut out, &line, 0, 15);
            }
        }
        let _ = writeln!(out);
        let scope = match &self.namespace {
            Some(ns) => format!("namespace {ns}"),
            None => "every namespace".to_string(),
        };
        if self.matched == 0 {
            wrap(
                &mut out,
                &format!(
                    "{scope}: no ShadowDiverged Events (the shadow agreed, none runs, or the Events expired after \
                     the API server's event TTL)"
                ),
                0,
                2,
            );
            return out;
        }
        let mut summary = format!("{scope}: {} ShadowDiverged Event(s), newest first", self.matched);
        if self.divergences.len() < self.matched {
            let _ = write!(summary, "; the {} newest shown (--limit)", self.divergences.len());
        }
        wrap(&mut out, &summary, 0, 2);
        let _ = writeln!(out);
        let rows: Vec<[String; 4]> = self
            .divergences
            .iter()
            .map(|d| {
                let (outcome, pod) = match &d.note {
                    Some(n) => (n.outcome.clone(), n.pod.clone()),
                    None => ("?".to_string(), "-".to_string()),
                };
                [self.ago(d.at), d.regarding.display(), outcome, pod]
            })
            .collect();
        let header = ["AGE", "DOMAIN", "OUTCOME", "POD"];
        let widths: Vec<usize> = (0..4)
            .map(|i| rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0))
            .collect();
        let line = |cells: [&str; 4]| {
            let mut l = String::new();
            for (i, c) in cells.iter().enumerate() {
                let _ = write!(l, "{c:<w$}  ", w = widths[i]);
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(out, "{}", line(header));
        for (d, row) in self.divergences.iter().zip(&rows) {
            let _ = writeln!(out, "{}", line([&row[0], &row[1], &row[2], &row[3]]));
            match &d.note {
                Some(n) if wide => {
                    let live = format!("live (generation {}): {}", n.live_generation, n.live);
                    let shadow =
                        format!("shadow {} (generation {}): {}", n.shadow_digest, n.shadow_generation, n.shadow);
                    let _ = writeln!(out, "    {live}");
                    let _ = writeln!(out, "    {shadow}");
                    if d.count > 1 {
                        let _ = writeln!(out, "    seen {} times", d.count);
                    }
                }
                Some(n) => {
                    wrap(&mut out, &format!("live:   {}", clique(&n.live)), 4, 12);
                    wrap(&mut out, &format!("shadow: {}", clique(&n.shadow)), 4, 12);
                }
                None => wrap(&mut out, &d.message, 4, 6),
            }
        }
        out
    }

    /// The document `-o json|yaml` writes.
    pub fn doc(&self) -> ShadowDoc {
        let policy = |a: &Option<Applied>| {
            a.as_ref().map(|a| PolicyDoc {
                digest: a.note.digest.clone(),
                generation: a.note.generation,
                source: a.note.source.clone(),
                time: a.time.clone(),
            })
        };
        ShadowDoc {
            namespace: self.namespace.clone(),
            policies: Policies { live: policy(&self.live), shadow: policy(&self.shadow) },
            matched: self.matched,
            divergences: self
                .divergences
                .iter()
                .map(|d| DivergenceDoc {
                    time: d.time.clone(),
                    count: d.count,
                    regarding: d.regarding.clone(),
                    outcome: d.note.as_ref().map(|n| n.outcome.clone()),
                    pod: d.note.as_ref().map(|n| n.pod.clone()),
                    live: d.note.as_ref().map(|n| AnswerDoc {
                        digest: None,
                        generation: n.live_generation,
                        answer: n.live.clone(),
                    }),
                    shadow: d.note.as_ref().map(|n| AnswerDoc {
                        digest: Some(n.shadow_digest.clone()),
                        generation: n.shadow_generation,
                        answer: n.shadow.clone(),
                    }),
                    message: d.message.clone(),
                })
                .collect(),
        }
    }
}

/// `cdplace status --shadow -o json|yaml`, `kind: ShadowReport` under
/// `apiVersion: cdplace.nvidia.com/v1alpha1` ([`crate::output`]):
///
/// ```yaml
/// apiVersion: cdplace.nvidia.com/v1alpha1
/// kind: ShadowReport
/// namespace: team            # whose ShadowDiverged Events are listed; null with -A
/// policies:                  # each from the newest PolicyApplied Event (any namespace); null: none
///   live: {digest: "sha256:<64 hex>", generation: 2,
///          source: ConfigMap cdplace-system/cdplace-policy key policy.wasm, time: "2025-...Z"}
///   shadow: null
/// matched: 3                 # ShadowDiverged Events found, before --limit
/// divergences:               # newest first, at most --limit
/// - time: "2025-...Z"        # when it last happened (null when the Event has no time)
///   count: 1
///   regarding: {kind: ComputeDomain, namespace: team, name: alpha}   # or the Pod
///   outcome: other-clique    # would-not-place | would-place | other-clique | elsewhere | error
///   pod: team/alpha-0
///   live: {digest: null, generation: 1, answer: "clique <uuid>.4 (score 88), then ..."}
///   shadow: {digest: 3f2a9c0b1d4e, generation: 1, answer: "clique <uuid>.1 (score 12)"}
///   message: "shadow policy 3f2a9c0b1d4e (generation 1): ..."   # the note as recorded
/// ```
///
/// `outcome`, `pod`, `live` and `shadow` are null when the note does not parse (`message` has it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShadowDoc {
    pub namespace: Option<String>,
    pub policies: Policies,
    pub matched: usize,
    pub divergences: Vec<DivergenceDoc>,
}

/// The live and the shadow policy, as their newest `PolicyApplied` Events name them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policies {
    pub live: Option<PolicyDoc>,
    pub shadow: Option<PolicyDoc>,
}

/// A policy applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyDoc {
    /// `sha256:<64 hex>`.
    pub digest: String,
    pub generation: u64,
    /// `ConfigMap <namespace>/<name> key <key>`.
    pub source: String,
    /// When it was applied, as the Event says.
    pub time: Option<String>,
}

/// One `ShadowDiverged` Event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DivergenceDoc {
    pub time: Option<String>,
    pub count: u64,
    pub regarding: Regarding,
    pub outcome: Option<String>,
    pub pod: Option<String>,
    pub live: Option<AnswerDoc>,
    pub shadow: Option<AnswerDoc>,
    pub message: String,
}

/// One policy's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnswerDoc {
    /// The shadow's digest (12 hex digits, as the note gives it); null for the live policy.
    pub digest: Option<String>,
    pub generation: u64,
    /// Where it places the domain, or its status and reason.
    pub answer: String,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::status::COLUMNS;

    const UUID: &str = "0f8e7d6c-1234-4321-9876-abcdef012345";
    const DIGEST: &str = "sha256:3f2a9c0b1d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8";

    /// A divergence note exactly as `divergenceNote` formats it: `fmt.Sprintf("shadow policy %s
    /// (generation %d): %s for pod %s; live (generation %d): %s; shadow: %s", short,
    /// d.ShadowGeneration, d.Outcome, d.Pod, d.LiveGeneration, d.Live, d.Shadow)`.
    fn divergence_note(
        short: &str,
        shadow_gen: u64,
        outcome: &str,
        pod: &str,
        live_gen: u64,
        live: &str,
        shadow: &str,
    ) -> String {
        format!(
            "shadow policy {short} (generation {shadow_gen}): {outcome} for pod {pod}; live (generation {live_gen}): {live}; shadow: {shadow}"
        )
    }

    /// A core/v1 Event as the API server lists one the scheduler recorded through events.k8s.io.
    fn event(name: &str, reason: &str, time: &str, kind: &str, ns: &str, obj: &str, note: &str) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"namespace": ns, "name": name, "creationTimestamp": time},
            "involvedObject": {"kind": kind, "namespace": ns, "name": obj},
            "reason": reason, "type": "Normal", "action": "Scheduling", "message": note,
            "eventTime": time, "reportingComponent": "cdplace-scheduler", "firstTimestamp": null, "lastTimestamp": null,
        })
    }

    fn applied_note(role: &str, digest: &str, source: &str, generation: u64) -> String {
        // fmt.Sprintf("%s %s from %s is generation %d (self-test: %d pending domains, %d placed
        // pods, slowest call %.1f ms: %s; compile and check %s)", ...)
        format!(
            "{role} {digest} from {source} is generation {generation} (self-test: 2 pending domains, 10 placed pods, slowest call 1.5 ms: pre_filter team/alpha-0; compile and check 120ms)"
        )
    }

    #[test]
    fn divergence_notes_parse() {
        let live = format!("clique {UUID}.4 (score 88), then {UUID}.2 (70)");
        let shadow = format!("clique {UUID}.1 (score 12)");
        let note = divergence_note("3f2a9c0b1d4e", 1, "other-clique", "ml/train-0-abc", 1, &live, &shadow);
        assert_eq!(
            parse_divergence(&note),
            Some(DivergenceNote {
                shadow_digest: "3f2a9c0b1d4e".into(),
                shadow_generation: 1,
                outcome: "other-clique".into(),
                pod: "ml/train-0-abc".into(),
                live_generation: 1,
                live: live.clone(),
                shadow: shadow.clone(),
            })
        );
        // A reason with `; ` and `(...)` in it; a shadow that fails.
        let reason = "UnschedulableAndUnresolvable: ComputeDomain ml/train needs 20 trays in one NVLink clique (size 20 from Job ml/big spec.parallelism); the largest has 18";
        let note = divergence_note("9b8c7d6e5f4a", 3, "error", "ml/p", 2, reason, "policy call trapped: unreachable");
        let n = parse_divergence(&note).unwrap();
        assert_eq!(
            (n.outcome.as_str(), n.live.as_str(), n.shadow.as_str()),
            ("error", reason, "policy call trapped: unreachable")
        );
        assert_eq!((n.shadow_generation, n.live_generation), (3, 2));
        // No shadow digest yet (the Go code then writes an empty one).
        let n = parse_divergence(&divergence_note("", 0, "would-place", "a/b", 1, "Unschedulable: no", "any node"))
            .unwrap();
        assert_eq!((n.shadow_digest.as_str(), n.shadow.as_str()), ("", "any node"));
        for bad in [
            "",
            "shadow policy x",
            "policy sha256:ab from ConfigMap a/b key k is generation 2 (...)",
            "shadow policy abc (generation x): other-clique for pod a/b; live (generation 1): l; shadow: s",
        ] {
            assert_eq!(parse_divergence(bad), None, "{bad}");
        }
    }

    #[test]
    fn applied_notes_parse_and_refused_ones_do_not() {
        let src = "ConfigMap cdplace-system/cdplace-policy key policy.wasm";
        assert_eq!(
            parse_applied(&applied_note("policy", DIGEST, src, 2)),
            Some(AppliedNote { role: Role::Live, digest: DIGEST.into(), source: src.into(), generation: 2 })
        );
        let src = "ConfigMap cdplace-system/cdplace-shadow key shadow.wasm";
        assert_eq!(
            parse_applied(&applied_note("shadow policy", DIGEST, src, 1)),
            Some(AppliedNote { role: Role::Shadow, digest: DIGEST.into(), source: src.into(), generation: 1 })
        );
        // fmt.Sprintf("%s %s from %s refused; %s: %v", s.role, digest, c.origin, keeps, err)
        let refused =
            format!("policy {DIGEST} from {src} refused; generation 2 keeps deciding: check self-test: trapped");
        assert_eq!(parse_applied(&refused), None);
        let refused = format!("shadow policy {DIGEST} from {src} refused; no shadow runs: compile: bad magic");
        assert_eq!(parse_applied(&refused), None);
        assert_eq!(short_digest(DIGEST), "sha256:3f2a9c0b1d4e");
    }

    #[test]
    fn times_and_ages() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2025-03-01T12:00:01.5Z"), Some(1_740_830_401_500_000));
        assert_eq!(parse_time("2025-03-01T12:00:01.123456Z"), Some(1_740_830_401_123_456));
        assert_eq!(parse_time("2025-03-01T14:00:01+02:00"), Some(1_740_830_401_000_000));
        assert_eq!(parse_time("2024-02-29T00:00:00Z"), Some(1_709_164_800_000_000));
        for bad in ["", "2025-03-01", "2025-13-01T00:00:00Z", "2025-03-01T00:00:00", "2025-03-01T00:00:00.Z"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        let s = |n: i64| age(n * 1_000_000);
        assert_eq!(
            [
                s(-3),
                s(45),
                s(119),
                s(300),
                s(330),
                s(3000),
                s(3 * 3600),
                s(3 * 3600 + 600),
                s(30 * 3600),
                s(50 * 3600),
                s(30 * 86_400),
                s(800 * 86_400)
            ],
            ["0s", "45s", "119s", "5m", "5m30s", "50m", "3h", "3h10m", "30h", "2d2h", "30d", "2y"]
        );
    }

    #[test]
    fn clique_labels_shorten_as_on_the_map() {
        let text = format!("clique {UUID}.4 (score 88), then {UUID}.12 (70); node x-{UUID}.1 {UUID}");
        assert_eq!(
            shorten_cliques(&text),
            format!("clique 0f8e7d6c….4 (score 88), then 0f8e7d6c….12 (70); node x-{UUID}.1 {UUID}")
        );
    }

    const NOW: &str = "2025-03-01T12:10:00Z";

    fn fixture() -> (Vec<Value>, Vec<Value>) {
        let live = |n: u32| format!("clique {UUID}.{n} (score 88), then {UUID}.2 (70)");
        let diverged = vec![
            event(
                "alpha.1",
                "ShadowDiverged",
                "2025-03-01T12:08:00.000000Z",
                "ComputeDomain",
                "ml",
                "alpha",
                &divergence_note(
                    "3f2a9c0b1d4e",
                    1,
                    "other-clique",
                    "ml/alpha-0",
                    1,
                    &live(4),
                    &format!("clique {UUID}.1 (score 12)"),
                ),
            ),
            event(
                "p.2",
                "ShadowDiverged",
                "2025-03-01T12:09:30.000000Z",
                "Pod",
                "ml",
                "beta-0",
                &divergence_note(
                    "3f2a9c0b1d4e",
                    1,
                    "would-not-place",
                    "ml/beta-0",
                    1,
                    &live(3),
                    "Unschedulable: ComputeDomain ml/beta needs 4 trays in one NVLink clique (size 4 from Job ml/beta spec.parallelism), but no clique has 4 free",
                ),
            ),
            event(
                "odd.3",
                "ShadowDiverged",
                "2025-03-01T11:00:00Z",
                "ComputeDomain",
                "ml",
                "gamma",
                "a note from another version",
            ),
        ];
        let applied = vec![
            event(
                "cm.1",
                "PolicyApplied",
                "2025-03-01T11:00:00.000000Z",
                "ConfigMap",
                "cdplace-system",
                "cdplace-policy",
                &applied_note(
                    "policy",
                    "sha256:1111111111110000000000000000000000000000000000000000000000000000",
                    "ConfigMap cdplace-system/cdplace-policy key policy.wasm",
                    1,
                ),
            ),
            event(
                "cm.2",
                "PolicyApplied",
                "2025-03-01T11:40:00.000000Z",
                "ConfigMap",
                "cdplace-system",
                "cdplace-policy",
                &applied_note("policy", DIGEST, "ConfigMap cdplace-system/cdplace-policy key policy.wasm", 2),
            ),
            event(
                "cm.3",
                "PolicyApplied",
                "2025-03-01T12:05:00.000000Z",
                "ConfigMap",
                "cdplace-system",
                "cdplace-shadow",
                &applied_note(
                    "shadow policy",
                    "sha256:9b8c7d6e5f4a0000000000000000000000000000000000000000000000000000",
                    "ConfigMap cdplace-system/cdplace-shadow key shadow.wasm",
                    1,
                ),
            ),
        ];
        (diverged, applied)
    }

    fn shadow(namespace: Option<&str>, limit: usize) -> Shadow {
        let (d, a) = fixture();
        report(namespace.map(String::from), &d, &a, limit, parse_time(NOW).unwrap())
    }

    #[test]
    fn the_report_as_text() {
        let text = shadow(Some("ml"), 20).render(Format::Text);
        for line in text.lines() {
            assert!(line.chars().count() <= COLUMNS, "wider than {COLUMNS}: {line:?}\n{text}");
        }
        let expected = "\
live policy:   sha256:3f2a9c0b1d4e generation 2, applied 30m ago from ConfigMap
               cdplace-system/cdplace-policy key policy.wasm
shadow policy: sha256:9b8c7d6e5f4a generation 1, applied 5m ago from ConfigMap
               cdplace-system/cdplace-shadow key shadow.wasm

namespace ml: 3 ShadowDiverged Event(s), newest first

AGE  DOMAIN         OUTCOME          POD
30s  pod ml/beta-0  would-not-place  ml/beta-0
    live:   clique 0f8e7d6c….3 (score 88), then 0f8e7d6c….2 (70)
    shadow: Unschedulable: ComputeDomain ml/beta needs 4 trays in one NVLink clique (size 4 from Job
            ml/beta spec.parallelism), but no clique has 4 free
2m   ml/alpha       other-clique     ml/alpha-0
    live:   clique 0f8e7d6c….4 (score 88), then 0f8e7d6c….2 (70)
    shadow: clique 0f8e7d6c….1 (score 12)
70m  ml/gamma       ?                -
    a note from another version
";
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn limit_none_and_wide() {
        let text = shadow(None, 1).render(Format::Text);
        assert!(
            text.contains("every namespace: 3 ShadowDiverged Event(s), newest first; the 1 newest shown (--limit)\n"),
            "{text}"
        );
        assert!(text.contains("ml/beta-0") && !text.contains("ml/alpha"), "{text}");
        let empty = report(Some("ml".into()), &[], &[], 20, 0).render(Format::Text);
        let expected = "\
live policy:   no swap recorded in Events (the policy built into the scheduler or read from a file,
               or the Events expired after the API server's event TTL)
shadow policy: no swap recorded in Events (no shadow policy, one built in or read from a file, or
               the Events expired after the API server's event TTL)

namespace ml: no ShadowDiverged Events (the shadow agreed, none runs, or the Events expired after
  the API server's event TTL)
";
        assert_eq!(empty, expected, "\n{empty}");
        let wide = shadow(Some("ml"), 20).render(Format::Wide);
        assert!(wide.contains(&format!("live policy:   {DIGEST} generation 2, applied 30m ago")), "{wide}");
        assert!(wide.contains(&format!("    live (generation 1): clique {UUID}.4 (score 88)")), "{wide}");
        assert!(
            wide.contains(&format!("    shadow 3f2a9c0b1d4e (generation 1): clique {UUID}.1 (score 12)")),
            "{wide}"
        );
    }

    #[test]
    fn the_report_as_a_versioned_document() {
        let s = shadow(Some("ml"), 2);
        let from_json: Value = serde_json::from_str(&s.render(Format::Json)).unwrap();
        let from_yaml: Value = serde_yaml_ng::from_str(&s.render(Format::Yaml)).unwrap();
        assert_eq!(from_json, from_yaml);
        assert_eq!(from_json["apiVersion"], "cdplace.nvidia.com/v1alpha1");
        assert_eq!(from_json["kind"], "ShadowReport");
        assert_eq!(from_json["namespace"], "ml");
        assert_eq!(from_json["matched"], 3);
        assert_eq!(
            from_json["policies"]["live"],
            json!({"digest": DIGEST, "generation": 2, "source": "ConfigMap cdplace-system/cdplace-policy key policy.wasm",
                   "time": "2025-03-01T11:40:00.000000Z"})
        );
        assert_eq!(from_json["policies"]["shadow"]["generation"], 1);
        let d = from_json["divergences"].as_array().unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[1],
            json!({"time": "2025-03-01T12:08:00.000000Z", "count": 1,
                   "regarding": {"kind": "ComputeDomain", "namespace": "ml", "name": "alpha"},
                   "outcome": "other-clique", "pod": "ml/alpha-0",
                   "live": {"digest": null, "generation": 1, "answer": format!("clique {UUID}.4 (score 88), then {UUID}.2 (70)")},
                   "shadow": {"digest": "3f2a9c0b1d4e", "generation": 1, "answer": format!("clique {UUID}.1 (score 12)")},
                   "message": d[1]["message"].clone()})
        );
        assert!(
            d[1]["message"].as_str().unwrap().starts_with("shadow policy 3f2a9c0b1d4e (generation 1): other-clique")
        );
        assert_eq!(d[0]["regarding"]["kind"], "Pod");
        // A note that does not parse keeps only its message.
        let odd = shadow(Some("ml"), 20).doc();
        let g = &odd.divergences[2];
        assert_eq!(
            (g.outcome.as_ref(), g.live.as_ref(), g.message.as_str()),
            (None, None, "a note from another version")
        );
    }

    #[test]
    fn a_series_time_and_count_win() {
        let mut e = event("x", "ShadowDiverged", "2025-03-01T12:00:00.000000Z", "ComputeDomain", "ml", "a", "n");
        e["series"] = json!({"count": 4, "lastObservedTime": "2025-03-01T12:09:00.000000Z"});
        let s = report(None, &[e], &[], 20, parse_time(NOW).unwrap());
        assert_eq!(
            (s.divergences[0].count, s.divergences[0].time.as_deref()),
            (4, Some("2025-03-01T12:09:00.000000Z"))
        );
        assert!(s.render(Format::Text).contains("\n60s  ml/a"), "{}", s.render(Format::Text));
    }
}
