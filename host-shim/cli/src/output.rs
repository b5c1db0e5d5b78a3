//! The machine-readable reports (`-o json`, `-o yaml`): one serde structure per command, written
//! as JSON or YAML from the same value, so both carry the same fields. Every document starts with
//! `apiVersion: cdplace.nvidia.com/v1alpha1` and its `kind` (`Explanation` for `explain`,
//! `FleetStatus` for `status`); a change that removes or renames a field needs a new version.

use serde::Serialize;

/// The version of every document the CLI writes.
pub const API_VERSION: &str = "cdplace.nvidia.com/v1alpha1";

/// A report under its `apiVersion` and `kind`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a, T: Serialize> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

/// The report as pretty JSON, ending with a newline.
pub fn json<T: Serialize>(kind: &'static str, body: &T) -> String {
    let mut s = serde_json::to_string_pretty(&Document { api_version: API_VERSION, kind, body })
        .expect("a report serializes to JSON");
    s.push('\n');
    s
}

/// The report as YAML (one document), ending with a newline.
pub fn yaml<T: Serialize>(kind: &'static str, body: &T) -> String {
    serde_yaml_ng::to_string(&Document { api_version: API_VERSION, kind, body }).expect("a report serializes to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body {
        some_field: Option<u32>,
        items: Vec<&'static str>,
    }

    #[test]
    fn json_and_yaml_carry_the_same_document() {
        let body = Body { some_field: Some(3), items: vec!["a", "b"] };
        let from_json: serde_json::Value = serde_json::from_str(&json("Thing", &body)).unwrap();
        let from_yaml: serde_json::Value = serde_yaml_ng::from_str(&yaml("Thing", &body)).unwrap();
        assert_eq!(from_json, from_yaml);
        assert_eq!(
            from_json,
            serde_json::json!({"apiVersion": API_VERSION, "kind": "Thing", "someField": 3, "items": ["a", "b"]})
        );
    }
}
