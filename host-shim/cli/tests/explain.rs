//! `cdplace explain` end to end: the built binary runs the real policy component on snapshots
//! shaped like `kubectl get -o yaml|json` output (`tests/fixtures/README.md` says what each holds).
//!
//! The cluster in `cluster.yaml`: NVLink clique A (`gb200-a-0..3`) and clique B (`gb200-b-0..3`),
//! four GPUs per tray, and `cpu-0` without a clique. ComputeDomain `default/other` runs on
//! `gb200-a-0` and `gb200-a-1`; ComputeDomain `default/train` has two pending pods; `web-0` is a
//! pod without ComputeDomain.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

const TRAIN_UID: &str = "3f6d2c71-8a4e-4b9f-a0c5-2e7b9d41c8f3";
const CLIQUE_A: &str = "e5a1c9d2-7b34-4f0e-9c61-2d8f4a7b3e10.1";
const CLIQUE_B: &str = "0c8b7f3e-92d4-4a1b-b6e5-7f3c2a9d1e48.1";
const NODES: [&str; 9] =
    ["cpu-0", "gb200-a-0", "gb200-a-1", "gb200-a-2", "gb200-a-3", "gb200-b-0", "gb200-b-1", "gb200-b-2", "gb200-b-3"];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures")
}

/// A component built by `make guest`, or a panic saying to build it.
fn component(file: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join("target/wasm32-wasip2/guest").join(file);
    assert!(
        path.exists(),
        "{} is missing: run `make guest` (cargo build -p cdplace-guest -p cdplace-faulty-guest \
         --target wasm32-wasip2 --profile guest) before these tests",
        path.display()
    );
    path
}

fn guest() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(cdplace_cli::GUEST_WASM);
    assert_eq!(path, component("cdplace_guest.wasm"));
    path
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `cdplace` in the fixtures directory, so messages name the files as given here.
fn cdplace(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_cdplace"))
        .current_dir(fixtures())
        .args(args)
        .output()
        .expect("run the cdplace binary");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `cdplace explain --output json` with the real component; it must succeed and print exactly
/// one JSON object.
fn explain_json(snapshots: &[&str], pod: &str, extra: &[&str]) -> Value {
    let guest = guest();
    let mut args = vec!["explain", "--pod", pod, "--output", "json", "--guest", guest.to_str().unwrap()];
    for s in snapshots {
        args.extend(["--snapshot", s]);
    }
    args.extend(extra);
    let run = cdplace(&args);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert_eq!(run.stderr, "");
    let report: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    let mut keys: Vec<&str> = report.as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["computeDomain", "nodes", "pod", "preFilter", "selected"]);
    report
}

/// A command that must fail before printing a report.
fn explain_fails(args: &[&str], code: i32) -> String {
    let mut all = vec!["explain"];
    all.extend(args);
    let run = cdplace(&all);
    assert_eq!(run.code, Some(code), "stdout: {}\nstderr: {}", run.stdout, run.stderr);
    assert_eq!(run.stdout, "");
    run.stderr
}

fn names(report: &Value) -> Vec<&str> {
    report["nodes"].as_array().expect("nodes").iter().map(|n| n["name"].as_str().expect("name")).collect()
}

fn node<'a>(report: &'a Value, name: &str) -> &'a Value {
    let nodes = report["nodes"].as_array().expect("nodes");
    nodes.iter().find(|n| n["name"] == name).unwrap_or_else(|| panic!("no node {name} in {report:#}"))
}

/// `(filter code, score)` of a node.
fn verdict<'a>(report: &'a Value, name: &str) -> (&'a str, Option<u64>) {
    let n = node(report, name);
    (n["filter"]["code"].as_str().expect("code"), n["score"].as_u64())
}

fn reason<'a>(report: &'a Value, name: &str) -> &'a str {
    node(report, name)["filter"]["reason"].as_str().expect("reason")
}

/// `default/train-0` in `cluster.yaml`, shared by the tests that read it.
fn pending_train() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| explain_json(&["cluster.yaml"], "default/train-0", &[]))
}

#[test]
fn pending_domain_goes_to_the_best_fitting_clique() {
    let r = pending_train();
    assert_eq!(r["pod"], "default/train-0");
    assert_eq!(r["computeDomain"], TRAIN_UID);
    // Not started: the PreFilterResult is the nodes of the best-fitting cliques (both fit).
    assert_eq!(r["preFilter"], json!({"code": "Success", "reason": "", "nodes": NODES[1..]}));
    assert_eq!(names(r), NODES);

    // Clique A has exactly the two free trays train needs: the best fit, ranked first.
    for n in ["gb200-a-0", "gb200-a-1"] {
        assert_eq!(verdict(r, n), ("Unschedulable", None), "{n}");
        assert!(
            reason(r, n).starts_with("node is held by ComputeDomain default/other, which has a pod placed here"),
            "{n}: {}",
            reason(r, n)
        );
    }
    for n in ["gb200-a-2", "gb200-a-3"] {
        assert_eq!(node(r, n)["filter"], json!({"code": "Success", "reason": ""}), "{n}");
        assert_eq!(verdict(r, n), ("Success", Some(100)), "{n}");
        assert_eq!(node(r, n)["clique"], CLIQUE_A);
    }
    for n in ["gb200-b-0", "gb200-b-1", "gb200-b-2", "gb200-b-3"] {
        assert_eq!(verdict(r, n), ("Success", Some(99)), "{n}");
        assert_eq!(node(r, n)["clique"], CLIQUE_B);
    }
    assert_eq!(node(r, "cpu-0")["clique"], Value::Null);
    assert_eq!(verdict(r, "cpu-0"), ("UnschedulableAndUnresolvable", None));
    assert!(reason(r, "cpu-0").contains("not an NVLink tray"), "{}", reason(r, "cpu-0"));
    assert_eq!(r["selected"], "gb200-a-2");
}

#[test]
fn started_domain_stays_in_its_clique() {
    // train-started.yaml (two YAML documents) replaces the pending train-0 of cluster.yaml with
    // the same pod bound to gb200-a-2, and its claim allocated there.
    let r = explain_json(&["cluster.yaml", "train-started.yaml"], "default/train-1", &[]);
    assert_eq!(r["computeDomain"], TRAIN_UID);
    assert_eq!(r["preFilter"]["code"], "Success");
    assert_eq!(r["preFilter"]["nodes"], json!(["gb200-a-0", "gb200-a-1", "gb200-a-2", "gb200-a-3"]));
    assert_eq!(names(&r), NODES);
    for n in ["cpu-0", "gb200-b-0", "gb200-b-1", "gb200-b-2", "gb200-b-3"] {
        assert_eq!(verdict(&r, n), ("UnschedulableAndUnresolvable", None), "{n}");
        assert!(reason(&r, n).contains(&format!("already runs in NVLink clique {CLIQUE_A}")), "{n}: {}", reason(&r, n));
    }
    assert_eq!(verdict(&r, "gb200-a-2"), ("Unschedulable", None));
    assert!(
        reason(&r, "gb200-a-2").starts_with("node already runs a pod of ComputeDomain default/train"),
        "{}",
        reason(&r, "gb200-a-2")
    );
    assert_eq!(verdict(&r, "gb200-a-0"), ("Unschedulable", None));
    assert_eq!(verdict(&r, "gb200-a-3"), ("Success", Some(100)));
    assert_eq!(r["selected"], "gb200-a-3");
}

#[test]
fn pod_without_compute_domain_is_skipped() {
    let r = explain_json(&["cluster.yaml"], "default/web-0", &[]);
    assert_eq!(r["pod"], "default/web-0");
    assert_eq!(r["computeDomain"], Value::Null);
    assert_eq!(r["preFilter"], json!({"code": "Skip", "reason": "", "nodes": null}));
    assert_eq!(names(&r), NODES);
    for n in r["nodes"].as_array().unwrap() {
        assert_eq!(n["filter"], json!({"code": "Skip", "reason": ""}), "{n}");
        assert_eq!(n["score"], Value::Null, "{n}");
    }
    assert_eq!(r["selected"], Value::Null);
}

#[test]
fn v1_list_and_json_give_the_same_verdicts() {
    // The fixtures hold the same objects...
    let load = |f: &str| cdplace_cli::explain::load_snapshot(&fixtures().join(f)).expect(f);
    let values =
        |objs: Vec<cdplace_cli::explain::SnapshotObject>| -> Vec<Value> { objs.into_iter().map(|o| o.value).collect() };
    let yaml = values(load("cluster.yaml"));
    assert_eq!(yaml.len(), 25);
    assert_eq!(yaml, values(load("cluster.json")));
    // ...and the command says the same of them.
    let from_json = explain_json(&["cluster.json"], "default/train-0", &[]);
    assert_eq!(&from_json, pending_train());
    assert_eq!(from_json["selected"], "gb200-a-2");
}

#[test]
fn plugin_args_change_the_decision() {
    // reserveTraysPerClique: 1 leaves clique A one tray short for train; clique B takes it.
    let r = explain_json(&["cluster.yaml"], "default/train-0", &["--config", "args-reserve.yaml"]);
    for n in ["gb200-a-0", "gb200-a-1", "gb200-a-2", "gb200-a-3"] {
        assert_eq!(verdict(&r, n), ("Unschedulable", None), "{n}");
        assert!(reason(&r, n).contains("reserveTraysPerClique"), "{n}: {}", reason(&r, n));
    }
    assert_eq!(verdict(&r, "gb200-b-0"), ("Success", Some(100)));
    assert_eq!(r["selected"], "gb200-b-0");
}

#[test]
fn unknown_plugin_arg_is_rejected_with_the_policy_text() {
    let guest = guest();
    let stderr = explain_fails(
        &[
            "--snapshot",
            "cluster.yaml",
            "--pod",
            "default/train-0",
            "--config",
            "args-unknown.yaml",
            "--guest",
            guest.to_str().unwrap(),
        ],
        2,
    );
    assert!(
        stderr.starts_with("cdplace explain: args-unknown.yaml: invalid plugin args: unknown field `wholeTrays`"),
        "{stderr}"
    );
}

#[test]
fn text_report_shows_verdicts_and_the_selected_node() {
    guest();
    // Without --guest: the component from this workspace's build output.
    let run = cdplace(&[
        "explain",
        "--snapshot",
        "cluster.yaml",
        "--snapshot",
        "train-started.yaml",
        "--pod",
        "default/train-1",
    ]);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let line = |prefix: &str| -> &str {
        run.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in:\n{}", run.stdout))
    };
    assert_eq!(line("Pod:"), "Pod:            default/train-1");
    assert_eq!(line("ComputeDomain:"), format!("ComputeDomain:  default/train (UID {TRAIN_UID})"));
    assert_eq!(line("PreFilter:"), "PreFilter:      Success");
    assert_eq!(line("Only nodes:"), "Only nodes:     gb200-a-0, gb200-a-1, gb200-a-2, gb200-a-3");
    assert_eq!(line("Selected:"), "Selected:       gb200-a-3 (score 100)");
    let header: Vec<&str> = line("NODE").split_whitespace().collect();
    assert_eq!(header, ["NODE", "CLIQUE", "FILTER", "SCORE", "REASON"]);
    let row: Vec<&str> = line("gb200-b-0 ").split_whitespace().take(4).collect();
    assert_eq!(row, ["gb200-b-0", CLIQUE_B, "UnschedulableAndUnresolvable", "-"]);
    let row: Vec<&str> = line("gb200-a-3 ").split_whitespace().collect();
    assert_eq!(row, ["gb200-a-3", CLIQUE_A, "Success", "100"]);
}

#[test]
fn malformed_yaml_names_the_file() {
    let stderr = explain_fails(&["--snapshot", "malformed.yaml", "--pod", "default/train-0"], 2);
    assert!(stderr.starts_with("cdplace explain: malformed.yaml: document 2: "), "{stderr}");
    assert!(stderr.contains("line 13"), "{stderr}");
}

#[test]
fn unreadable_snapshot_names_the_file() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "--snapshot", "absent.yaml", "--pod", "default/x"], 2);
    assert!(stderr.starts_with("cdplace explain: absent.yaml: cannot read: "), "{stderr}");
}

#[test]
fn invalid_object_names_the_file_and_the_object() {
    let guest = guest();
    let stderr = explain_fails(
        &["--snapshot", "invalid-object.yaml", "--pod", "default/x", "--guest", guest.to_str().unwrap()],
        2,
    );
    assert!(stderr.starts_with("cdplace explain: invalid-object.yaml: document 3 (Pod default/x): "), "{stderr}");
    assert!(stderr.contains("invalid type: integer `5`"), "{stderr}");
}

#[test]
fn pod_not_in_the_snapshot() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "--pod", "default/train-7"], 2);
    assert_eq!(stderr, "cdplace explain: pod default/train-7 is not in the snapshot (cluster.yaml)\n");
}

#[test]
fn bad_pod_argument_is_a_usage_error() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "--pod", "train-0"], 2);
    assert!(stderr.contains("expected NAMESPACE/NAME"), "{stderr}");
}

#[test]
fn guest_trap_exits_1() {
    // The test-only component traps in PreFilter for pods in namespace "fault".
    let faulty = component("cdplace_faulty_guest.wasm");
    let stderr = explain_fails(
        &[
            "--snapshot",
            "fault.yaml",
            "--pod",
            "fault/x",
            "--config",
            "fault-args.yaml",
            "--guest",
            faulty.to_str().unwrap(),
        ],
        1,
    );
    assert!(stderr.starts_with("cdplace explain: policy guest trapped: "), "{stderr}");
}
