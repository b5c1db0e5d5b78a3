//! `cdplace`: the command line (see [`cdplace_cli::cli`]). `kubectl-cdplace` is the same program
//! under kubectl's plugin name.

fn main() -> std::process::ExitCode {
    cdplace_cli::cli::main()
}
