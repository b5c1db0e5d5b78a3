//! `cdplace policy new DIR`: starts a policy crate outside this repository, ready to build as a
//! component and to pass `cdplace policy check`:
//!
//! - `Cargo.toml`: a `cdylib` on `cdplace-policy-sdk` (a path into the cdplace checkout, `--sdk`;
//!   the SDK brings the contract, `wit/cdplace.wit`, so the component's world is the one that
//!   checkout's scheduler loads), the `guest` profile the shipped component is built with (LTO,
//!   `panic = "abort"`, one codegen unit), and `[workspace]` so it is a workspace of its own;
//! - `Cargo.lock`: this repository's (the SDK's dependencies at the versions it was tested with;
//!   `cargo build --offline` works where the checkout built);
//! - `rust-toolchain.toml`: this repository's toolchain with the `wasm32-wasip2` target;
//! - `.cargo/config.toml`: `wasm32-wasip2` as the default target;
//! - `src/lib.rs`: a policy that wraps the shipped one ([`Policy`] for `View`) with one rule to
//!   change, exported with `export_policy!`.
//!
//! `cargo build --profile guest` then writes `target/wasm32-wasip2/guest/<crate>.wasm`.

use std::path::{Path, PathBuf};

/// The command line of `cdplace policy new`.
#[derive(Debug, Clone, clap::Args)]
pub struct NewOptions {
    /// The directory to create; its last part, with `-` for `_`, names the crate.
    pub dir: PathBuf,
    /// The SDK crate in a cdplace checkout (`guest/sdk`); default: the checkout this binary was
    /// built from, when it is still there.
    #[arg(long, value_name = "DIR")]
    pub sdk: Option<PathBuf>,
}

/// The lock file, toolchain and WIT version of the repository this binary was built from.
const LOCK: &str = include_str!("../../../../Cargo.lock");
const TOOLCHAIN: &str = include_str!("../../../../rust-toolchain.toml");
const BUILT_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest/sdk");

/// The crate name for a directory: its last part, lowercase, `-` for anything else.
pub fn crate_name(dir: &Path) -> Result<String, String> {
    let last =
        dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: no directory name", dir.display()))?;
    let name: String =
        last.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(format!("{last}: a crate name must start with a letter"));
    }
    Ok(name)
}

/// The files of a new policy crate named `name` on the SDK at `sdk`, `(relative path, content)`.
pub fn files(name: &str, sdk: &Path) -> Vec<(&'static str, String)> {
    let sdk = sdk.display().to_string().replace('\\', "/");
    let cargo = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

# A workspace of its own: not a member of the cdplace checkout's.
[workspace]

[lib]
# cdylib: the component. rlib: native tests (cargo test --target x86_64-unknown-linux-gnu, or
# your host's triple) on the SDK's harness.
crate-type = ["cdylib", "rlib"]

[dependencies]
# The SDK of the cdplace checkout whose scheduler runs this policy: it carries the contract
# (wit/cdplace.wit), so the component is built against the world that scheduler loads.
cdplace-policy-sdk = {{ path = "{sdk}" }}

# The profile the shipped component is built with (small and fast: LTO, one codegen unit, no
# unwinding: a panic traps, and the scheduler fails that call closed).
[profile.guest]
inherits = "release"
opt-level = 3
lto = true
codegen-units = 1
panic = "abort"
debug = false
"#
    );
    let module = name.replace('-', "_");
    let lib = format!(
        r#"//! {name}: a cdplace placement policy. It wraps the shipped policy (`View`) and changes
//! one decision; everything else, and every safety rule, stays as shipped.
//!
//! Build: `cargo build --profile guest` (the target is wasm32-wasip2, see .cargo/config.toml);
//! the component is `target/wasm32-wasip2/guest/{module}.wasm`. Check it with
//! `cdplace policy check target/wasm32-wasip2/guest/{module}.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

use cdplace_policy_sdk::{{OverlayOp, Policy, PreFilterResult, StrId, View}};

/// The policy: the shipped view, asked as it is. Change `pre_filter` (or `preempt`, `steer`) to
/// change a decision; `cdplace_policy_sdk::cliques` has helpers that only ever narrow an answer.
#[derive(Debug, Default)]
pub struct MyPolicy {{
    view: View,
}}

impl Policy for MyPolicy {{
    fn view(&mut self) -> &mut View {{
        &mut self.view
    }}

    fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {{
        self.view.pre_filter(pod, overlay, now_ms)
    }}
}}

#[cfg(target_arch = "wasm32")]
cdplace_policy_sdk::export_policy!(MyPolicy);
"#
    );
    vec![
        ("Cargo.toml", cargo),
        ("Cargo.lock", LOCK.to_string()),
        ("rust-toolchain.toml", TOOLCHAIN.to_string()),
        (".cargo/config.toml", "[build]\ntarget = \"wasm32-wasip2\"\n".to_string()),
        ("src/lib.rs", lib),
    ]
}

/// Writes the crate; the report names what was written and how to build it.
pub fn run(o: &NewOptions) -> Result<String, String> {
    let name = crate_name(&o.dir)?;
    let sdk = match &o.sdk {
        Some(p) => p.clone(),
        None => PathBuf::from(BUILT_IN),
    };
    let sdk = sdk
        .canonicalize()
        .map_err(|e| format!("{}: the SDK crate (guest/sdk of a cdplace checkout; --sdk DIR): {e}", sdk.display()))?;
    if !sdk.join("Cargo.toml").is_file() || !sdk.join("../../wit/cdplace.wit").is_file() {
        return Err(format!(
            "{}: not guest/sdk of a cdplace checkout (no Cargo.toml, or no ../../wit/cdplace.wit)",
            sdk.display()
        ));
    }
    if o.dir.exists() {
        return Err(format!("{}: exists already", o.dir.display()));
    }
    let mut written = Vec::new();
    for (rel, content) in files(&name, &sdk) {
        let path = o.dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(rel);
    }
    let module = name.replace('-', "_");
    Ok(format!(
        "created {} ({}) on the SDK {}\nbuild:  cd {} && cargo build --profile guest\ncheck:  cdplace policy check {}/target/wasm32-wasip2/guest/{module}.wasm\n",
        o.dir.display(),
        written.join(", "),
        sdk.display(),
        o.dir.display(),
        o.dir.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names() {
        assert_eq!(crate_name(Path::new("/tmp/My_Policy")).unwrap(), "my-policy");
        assert!(crate_name(Path::new("/tmp/1st")).is_err());
    }

    #[test]
    fn the_files_pin_the_profile_target_lock_and_sdk() {
        let f = files("my-policy", Path::new("/src/cdplace/guest/sdk"));
        let get = |n: &str| &f.iter().find(|(p, _)| *p == n).unwrap().1;
        assert!(get("Cargo.toml").contains(r#"cdplace-policy-sdk = { path = "/src/cdplace/guest/sdk" }"#));
        assert!(get("Cargo.toml").contains("[profile.guest]\ninherits = \"release\""));
        assert!(get(".cargo/config.toml").contains("target = \"wasm32-wasip2\""));
        assert!(get("rust-toolchain.toml").contains("wasm32-wasip2"));
        assert!(get("Cargo.lock").contains("name = \"wit-bindgen\""));
        assert!(get("src/lib.rs").contains("export_policy!(MyPolicy)"));
    }

    /// The guest profile is the workspace's (the shipped component's): the template copies it.
    #[test]
    fn the_profile_is_the_workspaces() {
        let ws = include_str!("../../../../Cargo.toml");
        let profile = |s: &str| s[s.find("[profile.guest]").unwrap()..].lines().take(7).collect::<Vec<_>>().join("\n");
        let f = files("p", Path::new("/sdk"));
        assert_eq!(profile(&f[0].1), profile(ws));
    }
}
