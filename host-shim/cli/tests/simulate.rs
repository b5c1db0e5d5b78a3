//! `cdplace replay --simulate` end to end: the executable on a bench-placement trace worked by
//! hand (`fixtures/sim-trace.json`), with the shipped policy and the worst-fit component, whose
//! placements differ only in which clique a new domain prefers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cdplace_testkit::builders::wasm_path;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn cdplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cdplace")).args(args).output().expect("run cdplace")
}

fn simulate(extra: &[&str], name: &str) -> (String, Value) {
    let json = std::env::temp_dir().join(format!("cdplace-simulate-{}-{name}.json", std::process::id()));
    let trace = fixture("sim-trace.json");
    let mut args = vec!["replay", "--simulate", trace.to_str().unwrap(), "--time-scale", "1", "--label-lag", "3"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", json.to_str().unwrap()]);
    let out = cdplace(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    (stdout, report)
}

fn starts(p: &Value) -> Vec<Option<f64>> {
    p["domains"].as_array().unwrap().iter().map(|d| d["start"].as_f64()).collect()
}

fn cliques(p: &Value) -> Vec<String> {
    p["domains"].as_array().unwrap().iter().map(|d| d["clique"].as_str().unwrap_or("").to_string()).collect()
}

#[test]
fn best_fit_and_worst_fit_on_a_trace_worked_by_hand() {
    let shipped = wasm_path("cdplace_guest.wasm");
    let worst = wasm_path("cdplace_guest_worstfit.wasm");
    let (text, r) = simulate(&["--policy", shipped.to_str().unwrap(), "--policy", worst.to_str().unwrap()], "both");
    let (b, w) = (&r["policies"][0], &r["policies"][1]);
    // Best fit: the 1-tray domain goes beside the 3-tray one, the 4-tray one starts at once in
    // the other clique.
    assert_eq!(starts(b), [Some(0.0), Some(10.0), Some(20.0)], "{text}");
    let c = cliques(b);
    assert_eq!(c[0], c[1], "{text}");
    assert_ne!(c[0], c[2], "{text}");
    // Worst fit: the 1-tray domain takes the empty clique; the 4-tray one waits until the
    // 3-tray one leaves (100) and the driver takes its labels off (103, the label lag of 3 s at
    // time scale 1): retried at 100, it is refused the labelled trays.
    assert_eq!(starts(w), [Some(0.0), Some(10.0), Some(103.0)], "{text}");
    let c = cliques(w);
    assert_ne!(c[0], c[1], "{text}");
    assert_eq!(c[0], c[2], "{text}");
    for p in [b, w] {
        assert_eq!(p["cdsStarted"], 3);
        assert_eq!(p["cdsCompleted"], 3);
        assert_eq!(p["plainStarted"], 1);
        assert_eq!(
            (p["splits"].as_u64(), p["partBound"].as_u64(), p["refusals"].as_u64()),
            (Some(0), Some(0), Some(0))
        );
        assert_eq!(p["end"], 130.0);
        assert_eq!(p["capped"], false);
        assert_eq!(p["classes"][0]["started"], 3);
    }
    // The 4-tray domain started by the horizon (100) only under best fit.
    assert_eq!(b["cdsStartedByHorizon"], 3);
    assert_eq!(w["cdsStartedByHorizon"], 2);
    assert_eq!(b["classes"][0]["waitP95"], 0.0);
    assert_eq!(w["classes"][0]["waitP95"], 83.0);
    assert!(text.contains("  1-4 trays") && text.contains("3 (3) / 3") && text.contains("3 (2) / 3"), "{text}");
}

#[test]
fn the_embedded_policy_is_the_default() {
    let (_, r) = simulate(&[], "embedded");
    let p = &r["policies"][0];
    assert_eq!(p["policy"], "embedded");
    assert_eq!(starts(p), [Some(0.0), Some(10.0), Some(20.0)]);
    // The shipped profile's args, and the bench's knobs as given.
    assert_eq!(r["options"]["timeScale"], 1.0);
    assert!(r["options"]["args"].as_str().unwrap().contains("\"wholeTray\":\"Require\""));
}

#[test]
fn args_reach_the_policy() {
    // No reservation: the same starts here (nothing waits long enough to reserve at 60 s).
    let (_, r) = simulate(&["--args", r#"{"cliqueReservationAfterSeconds":0}"#], "noreserve");
    assert_eq!(starts(&r["policies"][0]), [Some(0.0), Some(10.0), Some(20.0)]);
    assert!(r["options"]["args"].as_str().unwrap().contains("\"cliqueReservationAfterSeconds\":0"));
    // A field the policy does not know is unusable input, in the policy's words.
    let trace = fixture("sim-trace.json");
    let out = cdplace(&["replay", "--simulate", trace.to_str().unwrap(), "--args", r#"{"wholeTrays":"Require"}"#]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("wholeTrays"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn unusable_input_exits_2() {
    let out = cdplace(&["replay", "--simulate", fixture("missing.json").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    // A recorded trace is not a bench trace.
    let out = cdplace(&["replay", "--simulate", fixture("cluster.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a bench-placement trace.json"));
    let trace = fixture("sim-trace.json");
    let out = cdplace(&["replay", "--simulate", trace.to_str().unwrap(), "--args", "[1]"]);
    assert_eq!(out.status.code(), Some(2));
    let out = cdplace(&["replay", "--simulate", trace.to_str().unwrap(), "--time-scale", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // The simulation's knobs need --simulate.
    let out = cdplace(&["replay", trace.to_str().unwrap(), "--time-scale", "2"]);
    assert_eq!(out.status.code(), Some(2));
}
