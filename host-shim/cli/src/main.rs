//! The `cdplace` command line. Each subcommand lives in the crate's library: `explain` is
//! [`cdplace_cli::explain`], `status` is [`cdplace_cli::status`].

use std::io::Write;
use std::process::ExitCode;

use cdplace_cli::{explain, status};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cdplace", version, about = "Tools for the cdplace ComputeDomain placement policy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what the policy decides for one pod, node by node (the live cluster, or snapshots).
    Explain(explain::Options),
    /// Draw the fleet: NVLink cliques × trays, which ComputeDomain holds each tray, and why the
    /// pending ones wait (the live cluster, or snapshots).
    Status(status::Options),
}

/// Prints `report`, or the failure under `program` with its exit status.
fn finish(program: &str, result: Result<String, explain::ExplainError>) -> ExitCode {
    match result {
        Ok(report) => match std::io::stdout().lock().write_all(report.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{program}: writing the report: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("{program}: {}", cdplace_host::error::chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Explain(opts) => finish(explain::PROGRAM, explain::run(&opts).map(|r| r.render(opts.output))),
        Command::Status(opts) => finish(status::PROGRAM, status::run(&opts).map(|f| f.render(opts.output))),
    }
}
