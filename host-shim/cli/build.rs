//! Embeds the policy component in the CLI: `include_bytes!` reads the file this script names in
//! `CDPLACE_EMBEDDED_GUEST`, so `cdplace` (and `kubectl-cdplace`) is one file that needs nothing
//! beside it. The file is `$CDPLACE_GUEST_WASM` when set (the Makefile sets it to what `make guest`
//! built), else `make guest`'s output in this workspace. Cargo rebuilds the CLI when the file or
//! the variable changes.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=CDPLACE_GUEST_WASM");
    let path = match std::env::var_os("CDPLACE_GUEST_WASM") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .join("../../target/wasm32-wasip2/guest/cdplace_guest.wasm"),
    };
    println!("cargo:rerun-if-changed={}", path.display());
    let path = match path.canonicalize() {
        Ok(p) => p,
        Err(e) => panic!(
            "the policy component {} cannot be embedded in the CLI ({e}): build it first with `make guest` \
             (`make build` does), or set CDPLACE_GUEST_WASM to a cdplace_guest.wasm",
            path.display()
        ),
    };
    println!("cargo:rustc-env=CDPLACE_EMBEDDED_GUEST={}", path.display());
}
