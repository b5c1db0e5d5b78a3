//! `cdplace explain` end to end: the built binary runs the real policy component on snapshots
//! shaped like `kubectl get -o yaml|json` output (`tests/fixtures/README.md` says what each holds);
//! `kubectl-cdplace`, the same program under kubectl's plugin name, runs alone from a directory of
//! its own with the component it embeds.
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

/// Runs `bin` in `dir` (the fixtures directory, so messages name the files as given here).
fn run_in(bin: &Path, dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(bin).current_dir(dir).args(args).output().expect("run the binary");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// Runs `cdplace` in the fixtures directory.
fn cdplace(args: &[&str]) -> Run {
    run_in(Path::new(env!("CARGO_BIN_EXE_cdplace")), &fixtures(), args)
}

/// `cdplace explain NAME -n NAMESPACE -o json` (`pod` is `NAMESPACE/NAME`) with the component
/// `make guest` built; it must succeed and print exactly one JSON object, the same as `-o yaml`
/// gives.
fn explain_json(snapshots: &[&str], pod: &str, extra: &[&str]) -> Value {
    let guest = guest();
    let (ns, name) = pod.split_once('/').expect("NAMESPACE/NAME");
    let mut args = vec!["explain", name, "-n", ns, "--policy", guest.to_str().unwrap()];
    for s in snapshots {
        args.extend(["--snapshot", s]);
    }
    args.extend(extra);
    let report = report(&args);
    let mut keys: Vec<&str> = report.as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["apiVersion", "computeDomain", "kind", "nodes", "pod", "preFilter", "selected"]);
    assert_eq!(report["apiVersion"], "cdplace.nvidia.com/v1alpha1");
    assert_eq!(report["kind"], "Explanation");
    report
}

/// `cdplace ARGS -o json` and `-o yaml`: both succeed and give the same document.
fn report(args: &[&str]) -> Value {
    let mut docs = Vec::new();
    for format in ["json", "yaml"] {
        let mut all = args.to_vec();
        all.extend(["-o", format]);
        let run = cdplace(&all);
        assert_eq!(run.code, Some(0), "{format}: stderr: {}", run.stderr);
        assert_eq!(run.stderr, "");
        let doc: Value = if format == "json" {
            serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
        } else {
            serde_yaml_ng::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout))
        };
        docs.push(doc);
    }
    assert_eq!(docs[0], docs[1], "-o json and -o yaml differ");
    docs.remove(0)
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
    assert_eq!(r["pod"], json!({"namespace": "default", "name": "train-0"}));
    assert_eq!(r["computeDomain"], json!({"uid": TRAIN_UID, "namespace": "default", "name": "train"}));
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
    assert_eq!(r["computeDomain"]["uid"], TRAIN_UID);
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
    assert_eq!(r["pod"], json!({"namespace": "default", "name": "web-0"}));
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
            "train-0",
            "--config",
            "args-unknown.yaml",
            "--policy",
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
    // Without --policy: the component built into the binary.
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

    // -o wide: the PreFilterResult node set as a column.
    let run = cdplace(&[
        "explain",
        "pod/train-1",
        "--snapshot",
        "cluster.yaml",
        "--snapshot",
        "train-started.yaml",
        "-o",
        "wide",
    ]);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let line = |prefix: &str| -> Vec<&str> {
        let l = run
            .stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in:\n{}", run.stdout));
        l.split_whitespace().take(6).collect()
    };
    assert_eq!(line("NODE"), ["NODE", "CLIQUE", "FILTER", "SCORE", "NODE", "SET"]);
    assert_eq!(line("gb200-a-3 "), ["gb200-a-3", CLIQUE_A, "Success", "100", "yes"]);
    assert_eq!(line("gb200-b-0 ")[..5], ["gb200-b-0", CLIQUE_B, "UnschedulableAndUnresolvable", "-", "no"]);
}

#[test]
fn a_compute_domain_is_explained_through_its_first_pending_pod() {
    let g = guest();
    for target in [&["cd/train"][..], &["computedomain", "train"], &["computedomains.resource.nvidia.com/train"]] {
        let mut args = vec![
            "explain",
            "--snapshot",
            "cluster.yaml",
            "--snapshot",
            "train-started.yaml",
            "--policy",
            g.to_str().unwrap(),
        ];
        args.extend(target);
        let r = report(&args);
        // train-0 is placed: train-1 is the first pending pod.
        assert_eq!(r["pod"], json!({"namespace": "default", "name": "train-1"}), "{target:?}");
        assert_eq!(
            r["computeDomain"],
            json!({"uid": TRAIN_UID, "namespace": "default", "name": "train", "pods": [
                {"name": "train-0", "state": "Placed", "node": "gb200-a-2"},
                {"name": "train-1", "state": "Pending", "node": null},
            ]}),
            "{target:?}"
        );
        assert_eq!(r["selected"], "gb200-a-3");
    }
    let run = cdplace(&["explain", "cd/train", "--snapshot", "cluster.yaml", "--snapshot", "train-started.yaml"]);
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    assert!(
        run.stdout.starts_with("Pod:            default/train-1 (the ComputeDomain's first pending pod)\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\nDomain pods:    train-0 (placed on gb200-a-2), train-1 (pending)\n"),
        "{}",
        run.stdout
    );

    let stderr = explain_fails(&["cd/nope", "--snapshot", "cluster.yaml"], 1);
    assert_eq!(
        stderr,
        "cdplace explain: computedomain \"nope\" not found in namespace \"default\" (source: cluster.yaml)\n"
    );
    let stderr = explain_fails(&["cd/train", "-n", "other", "--snapshot", "cluster.yaml"], 1);
    assert!(stderr.contains("not found in namespace \"other\""), "{stderr}");
}

#[test]
fn the_old_pod_flag_still_works() {
    let g = guest();
    let old =
        report(&["explain", "--pod", "default/train-0", "--snapshot", "cluster.yaml", "--guest", g.to_str().unwrap()]);
    assert_eq!(&old, pending_train());
    let stderr = explain_fails(&["--pod", "default/train-0", "-n", "default", "--snapshot", "cluster.yaml"], 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

/// A copy of `kubectl-cdplace` alone in a directory of its own decides as `cdplace` with the
/// component `make guest` built: the component is embedded, and the name changes nothing.
#[test]
fn kubectl_cdplace_runs_alone_and_as_cdplace() {
    let dir = std::env::temp_dir().join(format!("cdplace-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("kubectl-cdplace");
    std::fs::copy(env!("CARGO_BIN_EXE_kubectl-cdplace"), &bin).unwrap();
    let snapshot = fixtures().join("cluster.yaml");
    let args = ["explain", "train-0", "-n", "default", "--snapshot", snapshot.to_str().unwrap(), "-o", "yaml"];
    let alone = run_in(&bin, &dir, &args);
    assert_eq!((alone.code, alone.stderr.as_str()), (Some(0), ""), "{}", alone.stdout);
    let from_yaml: Value = serde_yaml_ng::from_str(&alone.stdout).unwrap();
    assert_eq!(&from_yaml, pending_train());
    let as_cdplace = cdplace(&args);
    assert_eq!(as_cdplace.stdout, alone.stdout);
    let help = run_in(&bin, &dir, &["--version"]);
    assert_eq!(help.stdout, format!("cdplace {}\n", env!("CARGO_PKG_VERSION")));
    // The binaries carry the component `make guest` built, byte for byte.
    let wasm = std::fs::read(guest()).unwrap();
    let exe = std::fs::read(&bin).unwrap();
    assert!(exe.windows(wasm.len()).any(|w| w == wasm.as_slice()), "the component is not embedded");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn malformed_yaml_names_the_file() {
    let stderr = explain_fails(&["--snapshot", "malformed.yaml", "train-0"], 2);
    assert!(stderr.starts_with("cdplace explain: malformed.yaml: document 2: "), "{stderr}");
    assert!(stderr.contains("line 13"), "{stderr}");
}

#[test]
fn unreadable_snapshot_names_the_file() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "--snapshot", "absent.yaml", "x"], 2);
    assert!(stderr.starts_with("cdplace explain: absent.yaml: cannot read: "), "{stderr}");
}

#[test]
fn invalid_object_names_the_file_and_the_object() {
    let guest = guest();
    let stderr = explain_fails(&["--snapshot", "invalid-object.yaml", "x", "--policy", guest.to_str().unwrap()], 2);
    assert!(stderr.starts_with("cdplace explain: invalid-object.yaml: document 3 (Pod default/x): "), "{stderr}");
    assert!(stderr.contains("invalid type: integer `5`"), "{stderr}");
}

#[test]
fn pod_not_in_the_snapshot() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "train-7"], 1);
    assert_eq!(stderr, "cdplace explain: pod \"train-7\" not found in namespace \"default\" (source: cluster.yaml)\n");
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "train-0", "-n", "prod"], 1);
    assert_eq!(stderr, "cdplace explain: pod \"train-0\" not found in namespace \"prod\" (source: cluster.yaml)\n");
}

#[test]
fn bad_arguments_are_usage_errors() {
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "--pod", "train-0"], 2);
    assert!(stderr.contains("expected NAMESPACE/NAME"), "{stderr}");
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "node/gb200-a-0"], 2);
    assert_eq!(
        stderr,
        "cdplace explain: cannot explain a \"node\": the type is pod (pods, po) or computedomain (computedomains, cd)\n"
    );
    let stderr = explain_fails(&["--snapshot", "cluster.yaml"], 2);
    assert!(stderr.contains("required arguments were not provided"), "{stderr}");
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "train-0", "-o", "xml"], 2);
    assert!(stderr.contains("[possible values: text, wide, json, yaml]"), "{stderr}");
    let stderr = explain_fails(&["--snapshot", "cluster.yaml", "train-0", "--policy", "absent.wasm"], 2);
    assert!(stderr.starts_with("cdplace explain: absent.wasm: no policy component here"), "{stderr}");
}

#[test]
fn guest_trap_exits_1() {
    // The test-only component traps in PreFilter for pods in namespace "fault".
    let faulty = component("cdplace_faulty_guest.wasm");
    let stderr = explain_fails(
        &[
            "--snapshot",
            "fault.yaml",
            "x",
            "-n",
            "fault",
            "--config",
            "fault-args.yaml",
            "--policy",
            faulty.to_str().unwrap(),
        ],
        1,
    );
    assert!(stderr.starts_with("cdplace explain: policy guest trapped: "), "{stderr}");
}
