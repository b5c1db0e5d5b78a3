//! Cluster snapshots: objects as `kubectl get ... -o yaml` (or `-o json`) writes them — a `v1 List`
//! with `items`, multi-document YAML, or JSON (one object, a List, or several values in a row) —
//! read into the objects `cdplace explain` applies, each remembering where it came from.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use crate::explain::{ExplainError, input};

/// One object of a snapshot file and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotObject {
    pub file: PathBuf,
    /// `document 3`, `item 5` or `document 2, item 5` (all counted from 1).
    pub origin: String,
    pub value: Value,
}

/// Reads one snapshot file; see [`parse_snapshot`].
pub fn load_snapshot(path: &Path) -> Result<Vec<SnapshotObject>, ExplainError> {
    let text = std::fs::read_to_string(path).map_err(|e| input(path, format!("cannot read: {e}")))?;
    parse_snapshot(&text, path)
}

/// Splits the text of a snapshot file into objects: YAML documents, or JSON values when the text
/// starts with `{` or `[`; the items of a List (`v1 List`, or a typed list such as `PodList`,
/// whose items get the list's apiVersion and item kind when they lack them); empty documents
/// are skipped. `path` is only used in messages.
pub fn parse_snapshot(text: &str, path: &Path) -> Result<Vec<SnapshotObject>, ExplainError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut documents = Vec::new();
    if text.trim_start().starts_with(['{', '[']) {
        for (i, v) in serde_json::Deserializer::from_str(text).into_iter::<Value>().enumerate() {
            documents.push(v.map_err(|e| input(path, format!("document {}: {e}", i + 1)))?);
        }
    } else {
        // Stop at the first error: the YAML document iterator repeats a failure forever.
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            documents.push(Value::deserialize(doc).map_err(|e| input(path, format!("document {}: {e}", i + 1)))?);
        }
    }
    let single = documents.len() == 1;
    let mut out = Vec::new();
    for (d, doc) in documents.into_iter().enumerate() {
        let document = format!("document {}", d + 1);
        let origin = |item: usize| if single { format!("item {item}") } else { format!("{document}, item {item}") };
        match doc {
            Value::Null => {}
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    out.push(object(path, origin(i + 1), item, None)?);
                }
            }
            Value::Object(mut m) => match list_kind(&m).map(String::from) {
                Some(item_kind) => {
                    let items = match m.remove("items") {
                        Some(Value::Array(items)) => items,
                        None | Some(Value::Null) => Vec::new(),
                        Some(other) => {
                            let got = type_name(&other);
                            return Err(input(
                                path,
                                format!("{document}: items of a List must be an array, got {got}"),
                            ));
                        }
                    };
                    let fill = (!item_kind.is_empty()).then(|| (item_kind, m.get("apiVersion").cloned()));
                    for (i, item) in items.into_iter().enumerate() {
                        out.push(object(path, origin(i + 1), item, fill.as_ref())?);
                    }
                }
                None => out.push(object(path, document, Value::Object(m), None)?),
            },
            other => out.push(object(path, document, other, None)?),
        }
    }
    Ok(out)
}

/// For a List object: the kind of its items (`""` for a `v1 List`).
fn list_kind(m: &serde_json::Map<String, Value>) -> Option<&str> {
    let kind = m.get("kind")?.as_str()?;
    let item = kind.strip_suffix("List")?;
    (item.is_empty() || m.contains_key("items")).then_some(item)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn object(
    path: &Path,
    origin: String,
    mut value: Value,
    fill: Option<&(String, Option<Value>)>,
) -> Result<SnapshotObject, ExplainError> {
    let Value::Object(m) = &mut value else {
        return Err(input(path, format!("{origin}: expected a Kubernetes object, got {}", type_name(&value))));
    };
    if let Some((kind, api_version)) = fill {
        m.entry("kind").or_insert_with(|| Value::String(kind.clone()));
        if let Some(v) = api_version {
            m.entry("apiVersion").or_insert_with(|| v.clone());
        }
    }
    Ok(SnapshotObject { file: path.to_path_buf(), origin, value })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Parses `text` as the snapshot file `snap.yaml` (the explain tests use it too).
    pub(crate) fn parse(text: &str) -> Result<Vec<SnapshotObject>, ExplainError> {
        parse_snapshot(text, Path::new("snap.yaml"))
    }

    fn origins(objs: &[SnapshotObject]) -> Vec<(&str, &str)> {
        objs.iter().map(|o| (o.origin.as_str(), o.value["kind"].as_str().unwrap_or(""))).collect()
    }

    #[test]
    fn reads_lists_documents_and_json() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: d}}\nmetadata:\n  resourceVersion: \"\"\n";
        assert_eq!(origins(&parse(list).unwrap()), [("item 1", "Node"), ("item 2", "Pod")]);

        let docs = "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n---\nkind: List\napiVersion: v1\nitems: [{kind: Pod}]\n";
        assert_eq!(origins(&parse(docs).unwrap()), [("document 1", "Node"), ("document 3, item 1", "Pod")]);

        let json = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}}]}"#;
        assert_eq!(origins(&parse(json).unwrap()), [("item 1", "Node")]);
        assert_eq!(
            origins(&parse(r#"{"kind": "Node"} {"kind": "Pod"}"#).unwrap()),
            [("document 1", "Node"), ("document 2", "Pod")]
        );
    }

    #[test]
    fn typed_list_items_get_kind_and_api_version() {
        let objs = parse("apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p, namespace: d}\n").unwrap();
        assert_eq!(objs[0].value["kind"], "Pod");
        assert_eq!(objs[0].value["apiVersion"], "v1");
    }

    #[test]
    fn bad_input_names_file_and_document() {
        let e = parse("apiVersion: v1\nkind: Node\n---\nmetadata: [unclosed\n").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("snap.yaml: document 2: "), "{e}");
        let e = parse("kind: List\nitems: [1]\n").unwrap_err();
        assert_eq!(e.to_string(), "snap.yaml: item 1: expected a Kubernetes object, got a number");
        let e = parse("{\"kind\": ").unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: document 1: EOF"), "{e}");
    }
}
