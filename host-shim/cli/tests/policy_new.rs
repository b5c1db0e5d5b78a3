//! `cdplace policy new` end to end, as docs/policy-authoring.md tells a user: a crate made in a
//! temporary directory outside this repository builds offline (the registry cache this checkout
//! built with) as a component with the guest profile, and passes `cdplace policy check`.
//! Slow (a cold build of the SDK's dependencies for wasm32-wasip2, minutes on 2 cores), so
//! ignored here; `make test-policy-new` runs it.

use std::process::Command;

#[test]
#[ignore = "minutes: `make test-policy-new` runs it"]
fn a_policy_made_outside_the_repository_builds_and_passes_the_check() {
    let dir = std::env::temp_dir().join(format!("cdplace-policy-new-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let crate_dir = dir.join("my-policy");
    let cdplace = env!("CARGO_BIN_EXE_cdplace");
    let out = Command::new(cdplace).args(["policy", "new"]).arg(&crate_dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("cargo build --profile guest"), "{text}");

    // What the docs say to run, with --offline: no registry here, only the cache.
    let mut build = Command::new("cargo");
    build.args(["build", "--offline", "--profile", "guest"]).current_dir(&crate_dir);
    // The cargo that runs this test sets variables for this workspace; the user's shell has none.
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO_") && k != "CARGO_HOME" {
            build.env_remove(k);
        }
    }
    build.env_remove("RUSTUP_TOOLCHAIN");
    let out = build.output().unwrap();
    assert!(out.status.success(), "cargo build: {}", String::from_utf8_lossy(&out.stderr));
    let wasm = crate_dir.join("target/wasm32-wasip2/guest/my_policy.wasm");
    assert!(wasm.is_file(), "{} was not built", wasm.display());

    let out = Command::new(cdplace).args(["policy", "check", "--rounds", "1"]).arg(&wasm).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report.lines().last(), Some("PASS"), "{report}");
    std::fs::remove_dir_all(&dir).unwrap();
}
