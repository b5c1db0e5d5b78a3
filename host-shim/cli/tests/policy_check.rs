//! `cdplace policy check` end to end: the built binary runs the conformance suite on the shipped
//! guest, the two example policies (Rust on the SDK, Python through componentize-py) and the
//! test-only faulty components, each of which must fail the check its fault is about.
//!
//! The components are built by `make guest examples example-python` (`make test-rust` does).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A component built by the Makefile, or a panic saying how to build it.
fn component(file: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join("target/wasm32-wasip2/guest").join(file);
    assert!(
        path.exists(),
        "{} is missing: run `make guest examples example-python` before these tests",
        path.display()
    );
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn check(wasm: &Path, extra: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_cdplace"))
        .args(["policy", "check"])
        .args(extra)
        .arg(wasm)
        .output()
        .expect("run cdplace");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8(out.stderr).expect("utf-8"),
    }
}

/// The JSON report of `cdplace policy check -o json`, with the exit code.
fn report(wasm: &Path, extra: &[&str]) -> (i32, Value) {
    let r = check(wasm, &[&["-o", "json", "--rounds", "1"], extra].concat());
    let v = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr));
    (r.code, v)
}

/// `(result, detail)` of the named check.
fn result<'v>(v: &'v Value, name: &str) -> (&'v str, &'v str) {
    let c = v["checks"].as_array().expect("checks").iter().find(|c| c["name"] == name).expect("the check is reported");
    (c["result"].as_str().unwrap(), c["detail"].as_str().unwrap())
}

#[test]
fn the_shipped_policy_passes_with_its_call_times() {
    let r = check(&component("cdplace_guest.wasm"), &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for name in ["instantiate", "answers", "safety"] {
        assert!(
            r.stdout.lines().any(|l| l.trim_start().starts_with("PASS") && l.contains(name)),
            "{name}: {}",
            r.stdout
        );
    }
    assert!(r.stdout.contains("call time    pre-filter p50 "), "{}", r.stdout);
    assert_eq!(r.stdout.lines().last(), Some("PASS"), "{}", r.stdout);
}

#[test]
fn the_team_racks_example_passes_with_its_teams() {
    let args = r#"{"policyArgs":{"teams":{"batch":["0f8e7d6c-5b4a-4321-9876-abcdef012345.3"]}}}"#;
    let (code, v) = report(&component("cdplace_example_team_racks.wasm"), &["--args", args]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["pass"], true);
    assert!(v["preFilter"]["p50Us"].as_u64().is_some(), "{v:#}");
}

#[test]
fn the_python_example_passes() {
    let (code, v) = report(&component("first_fit_py.wasm"), &[]);
    assert_eq!(code, 0, "{v:#}");
    for name in ["instantiate", "answers", "safety"] {
        assert_eq!(result(&v, name).0, "PASS", "{v:#}");
    }
}

/// The violator allows every node to every pod: the host's own safety check (the one the
/// scheduler applies) fails its answers, naming the rule and the node.
#[test]
fn a_policy_that_breaks_a_safety_rule_fails_safety() {
    let (code, v) = report(&component("cdplace_test_violator.wasm"), &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["pass"], false);
    assert_eq!(result(&v, "instantiate").0, "PASS", "{v:#}");
    let (res, detail) = result(&v, "safety");
    assert_eq!(res, "FAIL", "{v:#}");
    assert!(detail.contains("policy violation: rule one-"), "{detail}");
    let failures = v["checks"][2]["failures"].as_array().expect("failures listed");
    let rules: Vec<&str> = failures.iter().filter_map(|f| f.as_str()).collect();
    for rule in ["one-domain-per-node", "one-clique-per-domain", "one-workload-per-node"] {
        assert!(rules.iter().any(|f| f.contains(rule)), "{rule} not found among {rules:#?}");
    }
}

#[test]
fn a_policy_that_traps_in_configure_fails_instantiate_and_skips_the_rest() {
    let (code, v) = report(&component("cdplace_test_instantiate_trap.wasm"), &[]);
    assert_eq!(code, 1, "{v:#}");
    let (res, detail) = result(&v, "instantiate");
    assert_eq!(res, "FAIL");
    assert!(detail.contains("trap") || detail.contains("configure"), "{detail}");
    assert_eq!(result(&v, "answers").0, "SKIP");
    assert_eq!(result(&v, "safety").0, "SKIP");
}

#[test]
fn a_policy_that_loops_fails_answers_within_the_call_timeout() {
    let started = std::time::Instant::now();
    let (code, v) = report(&component("cdplace_test_loop.wasm"), &["--call-timeout-ms", "20"]);
    assert_eq!(code, 1, "{v:#}");
    let (res, detail) = result(&v, "answers");
    assert_eq!(res, "FAIL");
    assert!(detail.contains("pre-filter") && detail.contains("deadline"), "{detail}");
    assert!(started.elapsed().as_secs() < 60, "the suite took {:?}", started.elapsed());
}

#[test]
fn a_file_that_is_not_a_component_fails_instantiate() {
    let dir = std::env::temp_dir().join(format!("cdplace-policy-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bogus = dir.join("bogus.wasm");
    std::fs::write(&bogus, b"not wasm").unwrap();
    let (code, v) = report(&bogus, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(result(&v, "instantiate").0, "FAIL", "{v:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_exit_2_with_the_reason() {
    let r = check(&component("cdplace_guest.wasm"), &["--args", "[1]"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("--args: must be a JSON object"), "{}", r.stderr);
}

/// At the default limits (2 s a call) a looping policy's verdict comes within a minute: the first
/// timeout ends its fixture, each failing fixture is reported once, and progress is printed
/// (issue 45: it ran ~26 minutes, silent, one failure line per round).
#[test]
fn a_looping_policy_fails_fast_at_the_defaults_each_fixture_once() {
    let started = std::time::Instant::now();
    let r = check(&component("cdplace_test_loop.wasm"), &["-o", "json"]);
    let took = started.elapsed();
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(took.as_secs() < 60, "the suite took {took:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let answers = v["checks"].as_array().unwrap().iter().find(|c| c["name"] == "answers").unwrap();
    assert_eq!(answers["result"], "FAIL");
    let failures: Vec<&str> = answers["failures"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    let fixtures: Vec<&str> =
        r.stderr.lines().filter_map(|l| l.strip_prefix("cdplace policy check: fixture ")).collect();
    assert!(!fixtures.is_empty(), "no progress on stderr: {}", r.stderr);
    assert_eq!(failures.len(), fixtures.len(), "one failure per fixture: {failures:#?}");
    for (f, progress) in failures.iter().zip(&fixtures) {
        let name = progress.split_once(' ').unwrap().1;
        assert!(f.starts_with(&format!("{name}: ")), "{f} is not fixture {name}'s");
        assert!(f.contains("exceeded its deadline of 2s"), "{f}");
    }
}

/// The shipped policy, except that it allows every node wherever it would place a pod: safe on a
/// view whose pending domains fit nowhere, so only the new domains of every size (which could
/// start now, beside a running domain) show it breaking `one-domain-per-node` (issue 45).
#[test]
fn a_policy_unsafe_only_for_a_placeable_new_domain_fails_safety() {
    let (code, v) = report(&component("cdplace_test_unsafe_when_placeable.wasm"), &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(result(&v, "instantiate").0, "PASS", "{v:#}");
    assert_eq!(result(&v, "answers").0, "PASS", "{v:#}");
    let (res, detail) = result(&v, "safety");
    assert_eq!(res, "FAIL", "{v:#}");
    let failures = v["checks"][2]["failures"].as_array().expect("failures listed");
    assert!(
        failures
            .iter()
            .filter_map(|f| f.as_str())
            .any(|f| f.starts_with("new-domain-of-every-size: pre-filter new/size")
                && f.contains("policy violation: rule one-domain-per-node")),
        "{detail}: {failures:#?}"
    );
}

/// The shipped policy, except that it panics whenever PreFilter gets an overlay: only
/// preemption's what-ifs find it, and the suite names the what-if.
#[test]
fn a_policy_that_panics_only_on_an_overlay_fails_answers() {
    let (code, v) = report(&component("cdplace_test_overlay_panic.wasm"), &[]);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(result(&v, "instantiate").0, "PASS", "{v:#}");
    let (res, detail) = result(&v, "answers");
    assert_eq!(res, "FAIL", "{v:#}");
    assert!(detail.contains("(a preemption what-if)") && detail.contains("trapped"), "{detail}");
    assert_eq!(result(&v, "safety").0, "PASS", "{v:#}");
}
