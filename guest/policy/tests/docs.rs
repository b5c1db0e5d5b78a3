//! The user docs against the policy's code, so neither drifts from the other:
//!
//! - `docs/configuration.md`'s argument reference is generated from `src/args.rs` (the one owner
//!   of the plugin's arguments: names, doc comments, defaults, validation) and must equal what
//!   the generator writes. `CDPLACE_UPDATE_DOCS=1 cargo test -p cdplace-policy --test docs`
//!   rewrites it.
//! - every reason text the policy can put on a pod or a ComputeDomain (the string literals of
//!   the modules that make them) has an entry in `docs/troubleshooting.md`, and every entry
//!   names a text the policy still makes.
//! - the chart's `values.schema.json` names exactly the arguments args.rs has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cdplace_policy::Args;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    let p = repo().join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The code of a source file before its `#[cfg(test)]` module.
fn production(rel: &str) -> String {
    let s = read(rel);
    match s.find("#[cfg(test)]") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The string literals of Rust source (comments and char literals skipped; `\` line
/// continuations joined as the compiler joins them; other escapes kept as written).
fn string_literals(src: &str) -> Vec<String> {
    let b: Vec<char> = src.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < b.len() {
        if b[i] == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if b[i] == '\'' {
            // A char literal ('x', '\n', '"'), else a lifetime.
            if b.get(i + 1) == Some(&'\\') && b.get(i + 3) == Some(&'\'') {
                i += 4;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            continue;
        }
        if b[i] == '"' {
            let mut s = String::new();
            i += 1;
            while b[i] != '"' {
                if b[i] == '\\' {
                    if b[i + 1] == '\n' {
                        i += 2;
                        while b[i].is_whitespace() {
                            i += 1;
                        }
                        continue;
                    }
                    s.push(b[i]);
                    s.push(b[i + 1]);
                    i += 2;
                    continue;
                }
                s.push(b[i]);
                i += 1;
            }
            out.push(s);
        }
        i += 1;
    }
    out
}

/// A text with its `format!` arguments (`{}`, `{cd}`, `{:?}`) replaced by `…`, trimmed of the
/// spaces and `; ` a fragment starts with.
fn template(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '{' {
            for d in it.by_ref() {
                if d == '}' {
                    break;
                }
            }
            out.push('…');
        } else {
            out.push(c);
        }
    }
    out.trim_start_matches([' ', ';']).trim_end().to_string()
}

// ---- the argument reference ------------------------------------------------------------------

struct Field {
    json: String,
    doc: String,
}

/// The fields of `struct Args` in `src/args.rs`, in order, with their JSON names (serde's
/// `rename`, else camelCase) and doc comments.
fn args_fields() -> Vec<Field> {
    let src = read("guest/policy/src/args.rs");
    let start = src.find("pub struct Args {").expect("struct Args in args.rs");
    let body = &src[start..src[start..].find("\n}").map(|e| start + e).expect("end of struct Args")];
    let (mut fields, mut doc, mut rename) = (Vec::new(), Vec::<String>::new(), None::<String>);
    for line in body.lines().skip(1) {
        let l = line.trim();
        if let Some(d) = l.strip_prefix("///") {
            doc.push(d.trim().to_string());
        } else if l.starts_with("#[serde(") {
            if let Some(i) = l.find("rename = \"") {
                let r = &l[i + 10..];
                rename = Some(r[..r.find('"').unwrap()].to_string());
            }
        } else if let Some(rest) = l.strip_prefix("pub ") {
            let name = rest.split(':').next().unwrap().trim();
            let json = rename.take().unwrap_or_else(|| camel(name));
            fields.push(Field { json, doc: doc.join(" ") });
            doc.clear();
        } else if l.is_empty() || l.starts_with("//") {
            doc.clear();
        }
    }
    fields
}

fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in snake.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// What the policy says when `field` is set to `value` (None: accepted).
fn verdict_on(field: &str, value: serde_json::Value) -> Option<String> {
    let mut m = serde_json::Map::new();
    m.insert(field.into(), value);
    Args::parse(&serde_json::Value::Object(m).to_string()).err().map(|e| e.to_string())
}

/// The accepted values of one field, in the validator's own words: the messages it gives for
/// values outside the range (probed at both ends), or the variants serde expects.
fn accepted(field: &str, default: Option<&serde_json::Value>) -> String {
    use serde_json::Value;
    let probes: Vec<Value> = match default {
        Some(Value::Bool(_)) => return "`true` or `false`".into(),
        // The host's sources: the policy accepts any value and never reads it.
        _ if field == "policy" || field == "shadowPolicy" => {
            return "an object: `source` `embedded`, `file` (with `path`), `configMap` or `secret` (with `namespace`, `name`, `key`); validated by the host".into();
        }
        _ if field == "policyRevert" => {
            return "an object: `failures` 0 to 10000 (0: off), `window` a duration from 1s to 1h; validated by the host".into();
        }
        Some(Value::Number(_)) => vec![Value::from(0u32), Value::from(u32::MAX)],
        _ if field == "guestCallTimeout" => vec!["0ms".into(), "2h".into(), "soon".into()],
        _ => vec!["".into(), "not a name!".into(), "zz-not-a-variant".into()],
    };
    let mut whys: Vec<String> = Vec::new();
    for p in probes {
        let Some(msg) = verdict_on(field, p) else { continue };
        let why = if let Some(i) = msg.find("unknown variant") {
            // serde: unknown variant `x`, expected `A` or `B` at line 1 column 9
            let m = &msg[i..];
            let e = m.find("expected ").map(|j| &m[j + 9..]).unwrap_or(m);
            let e = e.split(" at line").next().unwrap();
            if e.starts_with("one of") { e.to_string() } else { format!("one of {e}") }
        } else if let Some(i) = msg.find("\": ") {
            msg[i + 3..].to_string()
        } else {
            msg.clone()
        };
        if !whys.contains(&why) {
            whys.push(why);
        }
    }
    if whys.is_empty() { "any string".into() } else { whys.join("; ") }
}

fn escape_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The reference table, generated from `src/args.rs` and the validator.
fn args_reference() -> String {
    let defaults = serde_json::to_value(Args::default()).unwrap();
    let mut out = String::from(
        "| field | default | accepted (the validator's words) | meaning (the doc comment in `guest/policy/src/args.rs`) |\n|---|---|---|---|\n",
    );
    for f in args_fields() {
        let d = defaults.get(&f.json);
        let shown = match d {
            None => "—".to_string(),
            Some(serde_json::Value::String(s)) => format!("`{s}`"),
            Some(v) => format!("`{v}`"),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            f.json,
            shown,
            escape_cell(&accepted(&f.json, d)),
            escape_cell(&f.doc)
        ));
    }
    out
}

const BEGIN: &str = "<!-- BEGIN GENERATED: args (guest/policy/tests/docs.rs) -->\n";
const END: &str = "<!-- END GENERATED: args -->";

#[test]
fn the_configuration_reference_is_generated_from_args_rs() {
    let path = repo().join("docs/configuration.md");
    let page = read("docs/configuration.md");
    let (b, e) =
        (page.find(BEGIN).expect("docs/configuration.md lacks the BEGIN marker"), page.find(END).expect("END marker"));
    let want = format!("{}{BEGIN}{}{}", &page[..b], args_reference(), &page[e..]);
    if std::env::var_os("CDPLACE_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    assert!(
        page == want,
        "docs/configuration.md's argument reference differs from src/args.rs; regenerate it with\n  \
         CDPLACE_UPDATE_DOCS=1 cargo test --release -p cdplace-policy --test docs\nwanted:\n{}",
        args_reference()
    );
}

#[test]
fn every_argument_is_in_the_reference_and_every_row_is_an_argument() {
    // Caught by the test above as well; this one says which name is wrong.
    let code: BTreeSet<String> = args_fields().into_iter().map(|f| f.json).collect();
    let page = read("docs/configuration.md");
    let (b, e) = (page.find(BEGIN).unwrap(), page.find(END).unwrap());
    let documented: BTreeSet<String> = page[b..e]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l[..l.find('`').unwrap()].to_string())
        .collect();
    let missing: Vec<_> = code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "arguments in code, not documented: {missing:?}; documented, not in code: {stale:?}"
    );
    // The generator saw every field serde knows: an unknown field's error lists them all.
    let err = Args::parse(r#"{"noSuchField": 1}"#).unwrap_err().to_string();
    for f in &code {
        assert!(err.contains(&format!("`{f}`")), "serde does not know {f}: {err}");
    }
}

/// The chart's values.schema.json copies the argument names (it refuses unknown ones at `helm
/// install`); args.rs owns them, so an argument added there without the schema would be refused by
/// the chart.
#[test]
fn the_charts_values_schema_names_exactly_the_arguments() {
    let schema: serde_json::Value =
        serde_json::from_str(&read("kube-scheduler-config/chart/cdplace-scheduler/values.schema.json")).unwrap();
    let args = &schema["definitions"]["computeDomainPlacementArgs"];
    let props = args["properties"]
        .as_object()
        .expect("definitions.computeDomainPlacementArgs.properties in the chart's schema");
    let schema_names: BTreeSet<String> = props.keys().cloned().collect();
    let code: BTreeSet<String> = args_fields().into_iter().map(|f| f.json).collect();
    let missing: Vec<_> = code.difference(&schema_names).collect();
    let extra: Vec<_> = schema_names.difference(&code).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "values.schema.json's plugin args differ from args.rs: missing {missing:?}, not arguments {extra:?}"
    );
}

// ---- the reason catalogue --------------------------------------------------------------------

/// The modules whose string literals are reason texts (per pod, per node, preemption, steering)
/// and ComputeDomain Event notes (`status.rs`).
const REASON_SOURCES: &[&str] = &[
    "guest/policy/src/decide.rs",
    "guest/policy/src/member.rs",
    "guest/policy/src/nodes.rs",
    "guest/policy/src/pernode.rs",
    "guest/policy/src/preempt.rs",
    "guest/policy/src/reserve.rs",
    "guest/policy/src/segments.rs",
    "guest/policy/src/size.rs",
    "guest/policy/src/span.rs",
    "guest/policy/src/steer.rs",
    "guest/policy/src/status.rs",
];

/// Literals of those modules that are not reason texts: invariant checks and panics that never
/// reach a user, and format strings without words of their own.
const NOT_REASONS: &[&str] = &["a linked workload pod has a domain aggregate", "a group per key", "… …"];

/// Every reason template the policy has, from its source.
fn reason_templates() -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    for f in REASON_SOURCES {
        for lit in string_literals(&production(f)) {
            if lit.chars().count() < 12 || !lit.contains(' ') {
                continue;
            }
            let t = template(&lit);
            if !NOT_REASONS.contains(&t.as_str()) {
                out.entry(t).or_insert(*f);
            }
        }
    }
    out
}

/// The entries of docs/troubleshooting.md: each `#### ` heading's code span, between the markers.
fn troubleshooting_entries() -> BTreeSet<String> {
    let page = read("docs/troubleshooting.md");
    let b = page.find("<!-- BEGIN REASONS -->").expect("docs/troubleshooting.md lacks <!-- BEGIN REASONS -->");
    let e = page.find("<!-- END REASONS -->").expect("<!-- END REASONS -->");
    page[b..e]
        .lines()
        .filter_map(|l| l.strip_prefix("#### `"))
        .map(|l| l[..l.rfind('`').expect("heading's closing backtick")].to_string())
        .collect()
}

#[test]
fn every_policy_reason_has_a_troubleshooting_entry_and_every_entry_a_reason() {
    let code = reason_templates();
    let docs = troubleshooting_entries();
    assert!(code.len() > 40, "found only {} reason texts: is the literal scanner broken?", code.len());
    let missing: Vec<String> =
        code.iter().filter(|(t, _)| !docs.contains(*t)).map(|(t, f)| format!("  {f}: #### `{t}`")).collect();
    let stale: Vec<&String> = docs.iter().filter(|t| !code.contains_key(*t)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/troubleshooting.md and the policy's reason texts differ.\nIn the code, without an entry (add one; `…` stands for each format argument):\n{}\nEntries the code no longer makes: {stale:?}",
        missing.join("\n")
    );
}

#[test]
fn the_scanner_reads_literals_as_the_compiler_does() {
    let src = "let a = '\"'; // \"not this\"\nformat!(\"x {cd} \\\n     y\"); let b = \"z\";";
    assert_eq!(string_literals(src), vec!["x {cd} y".to_string(), "z".to_string()]);
    assert_eq!(template(" (reserveTraysPerClique keeps {} spare)"), "(reserveTraysPerClique keeps … spare)");
}
