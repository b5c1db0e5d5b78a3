//! The `cdplace` command line. Each subcommand lives in the crate's library: `explain` is
//! [`cdplace_cli::explain`].

use std::io::Write;
use std::process::ExitCode;

use cdplace_cli::explain::{self, PROGRAM};
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cdplace", version, about = "Tools for the cdplace ComputeDomain placement policy")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what the policy decides for one pod of a cluster snapshot, node by node.
    Explain(explain::Options),
}

fn main() -> ExitCode {
    let Command::Explain(opts) = Cli::parse().command;
    match explain::run(&opts) {
        Ok(report) => match std::io::stdout().lock().write_all(report.render(opts.output).as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{PROGRAM}: writing the report: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("{PROGRAM}: {}", cdplace_host::error::chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}
