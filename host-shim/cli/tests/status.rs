//! `cdplace status` end to end: the built binary draws the map of the fixture snapshots with the
//! real policy component (`tests/fixtures/README.md` says what each holds) as text, SVG, JSON and
//! YAML, lists the domains of one namespace or all, and refuses a source it cannot read with a
//! message naming it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures")
}

fn guest() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(cdplace_cli::GUEST_WASM);
    assert!(path.exists(), "{} is missing: run `make guest` first", path.display());
    path.to_str().unwrap().to_string()
}

/// Runs `cdplace` in the fixtures directory: (exit code, stdout, stderr).
fn cdplace(args: &[&str]) -> (Option<i32>, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_cdplace")).current_dir(fixtures()).args(args).output().expect("run cdplace");
    (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn the_fixture_cluster_as_text() {
    let g = guest();
    let (code, out, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "--policy", &g]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    let expected = "\
8 trays in 2 NVLink clique(s): 6 free, 0 cordoned
namespace default: 2 ComputeDomain(s), 1 pending; 1 node(s) without GPUs or clique label not shown

CLIQUE       TRAYS
0c8b7f3e….1  .  .  .  .    4/4 free
e5a1c9d2….1  A  A  .  .    2/4 free

  A  default/other  2 tray(s), 2 of 2 pod(s) placed, placed
  B  default/train  0 tray(s), 0 of 2 pod(s) placed, pending
";
    assert!(out.starts_with(expected), "{out}");
    assert!(
        out.ends_with(
            "Pending ComputeDomains:\n  B  default/train: 2 of 2 pod(s) pending\n     PreFilter admits it now: it waits for the scheduler's next attempt or another plugin [pod\n     default/train-0]\n"
        ),
        "{out}"
    );

    // With train-0 bound to gb200-a-2, train holds that tray and waits for one more in clique A.
    let (code, out, err) =
        cdplace(&["status", "--snapshot", "cluster.yaml", "--snapshot", "train-started.yaml", "--policy", &g]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    assert!(out.contains("\ne5a1c9d2….1  A  A  B  .    1/4 free\n"), "{out}");
    assert!(out.contains("  B  default/train  1 tray(s), 1 of 2 pod(s) placed, pending\n"), "{out}");
    assert!(out.contains("  B  default/train: 1 of 2 pod(s) pending\n"), "{out}");
    assert!(out.contains("default/train-1]"), "{out}");
}

#[test]
fn the_fixture_cluster_as_svg() {
    let g = guest();
    let (code, out, err) = cdplace(&["status", "--snapshot", "cluster.json", "--output", "svg", "--policy", &g]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    let doc = roxmltree::Document::parse(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let titles: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("class") == Some("tray"))
        .map(|n| n.children().find(|c| c.has_tag_name("title")).and_then(|t| t.text()).unwrap_or(""))
        .collect();
    assert_eq!(
        titles,
        [
            "gb200-b-0: free",
            "gb200-b-1: free",
            "gb200-b-2: free",
            "gb200-b-3: free",
            "gb200-a-0: default/other",
            "gb200-a-1: default/other",
            "gb200-a-2: free",
            "gb200-a-3: free"
        ]
    );
}

#[test]
fn the_fixture_cluster_as_json_and_yaml() {
    let g = guest();
    let mut docs = Vec::new();
    for format in ["json", "yaml"] {
        let (code, out, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "-o", format, "--policy", &g]);
        assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
        let doc: serde_json::Value =
            if format == "json" { serde_json::from_str(&out).unwrap() } else { serde_yaml_ng::from_str(&out).unwrap() };
        docs.push(doc);
    }
    assert_eq!(docs[0], docs[1]);
    let doc = &docs[0];
    assert_eq!(doc["apiVersion"], "cdplace.nvidia.com/v1alpha1");
    assert_eq!(doc["kind"], "FleetStatus");
    // Snapshots: the namespace is `default` unless -n says otherwise.
    assert_eq!(doc["namespace"], "default");
    assert_eq!(doc["summary"]["trays"], 8);
    assert_eq!(doc["summary"]["freeTrays"], 6);
    let domains: Vec<(&str, &str)> = doc["computeDomains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["name"].as_str().unwrap(), d["state"].as_str().unwrap()))
        .collect();
    assert_eq!(domains, [("other", "Placed"), ("train", "Pending")]);
    assert_eq!(doc["cliques"][1]["trays"][0]["computeDomain"]["name"], "other");
}

#[test]
fn namespaces_as_kubectl_lists_them() {
    let g = guest();
    let (code, out, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "-n", "other", "--policy", &g]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    assert!(
        out.contains(
            "namespace other: 0 ComputeDomain(s), 0 pending; 2 in other namespaces (o; -A lists them); 1 node(s)"
        ),
        "{out}"
    );
    assert!(out.contains("\ne5a1c9d2….1  o  o  .  .    2/4 free\n"), "{out}");
    let (code, out, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "-A", "--policy", &g]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    assert!(
        out.starts_with("8 trays in 2 NVLink clique(s): 6 free, 0 cordoned\n2 ComputeDomain(s), 1 pending;"),
        "{out}"
    );
    let (code, _, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "-A", "-n", "x"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn unreadable_sources_are_named() {
    let (code, _, err) = cdplace(&["status", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("cdplace status: /nonexistent/kubeconfig: cannot use the kubeconfig: "), "{err}");
    let (code, _, err) = cdplace(&["status", "--snapshot", "cluster.yaml", "--kubeconfig", "k"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot be used with"), "{err}");
    let (code, _, err) = cdplace(&["status", "--snapshot", "malformed.yaml", "--policy", &guest()]);
    assert_eq!(code, Some(2));
    assert!(err.starts_with("cdplace status: malformed.yaml: document 2: "), "{err}");
}
