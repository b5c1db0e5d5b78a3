//! `kubectl-cdplace`: the `cdplace` command line under the name kubectl looks for on PATH, so
//! `kubectl cdplace ...` runs it (krew's plugin convention). It behaves exactly as `cdplace`.

fn main() -> std::process::ExitCode {
    cdplace_cli::cli::main()
}
