//! The command line both executables run: `cdplace` and `kubectl-cdplace` (kubectl runs the
//! latter for `kubectl cdplace ...`; the two behave the same whatever their name). Each
//! subcommand lives in its module: `explain` is [`crate::explain`], `status` is [`crate::status`],
//! `replay` is [`crate::replay`], `policy check` is [`crate::policy`].
//!
//! Exit codes: 0 with a report; 1 when the command could not finish against a well-formed request
//! (the cluster could not be read — unreachable, forbidden, a failed list —, the pod or
//! ComputeDomain is not found, or the policy failed); 2 for bad usage or unusable input (flags and
//! arguments, a kubeconfig or context that cannot be used, an unreadable or invalid snapshot, plugin
//! arguments or policy file). See [`crate::explain::ExplainError::exit_code`].

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::explain::ExplainError;
use crate::{explain, policy, replay, status};

#[derive(Debug, Parser)]
#[command(
    name = "cdplace",
    version,
    about = "Tools for the cdplace ComputeDomain placement policy (also `kubectl cdplace` when installed as kubectl-cdplace)",
    after_help = "Both commands read the cluster of the current kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config; \
                  --context) or snapshot files (--snapshot), and run the policy component built into this binary."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show what the policy decides for a pod, or for a ComputeDomain's first pending pod, node by
    /// node: `explain POD [-n NS]`, `explain pod/POD`, `explain cd/NAME`.
    Explain(explain::Options),
    /// Draw the fleet: NVLink cliques × trays, which ComputeDomain holds each tray, and why the
    /// pending ones wait; the ComputeDomains of the current namespace, `-n NS`, or `-A` for all.
    /// `--shadow` lists the shadow policy's divergences from the scheduler's Events instead.
    Status(status::Options),
    /// Ask a policy again every decision a scheduler recorded (recordPath) and compare the answers.
    Replay(replay::Options),
    /// Policy components: `check` runs the conformance suite on one; `apply` puts one in the
    /// scheduler's policy ConfigMap and prints its verdict.
    #[command(subcommand)]
    Policy(policy::Command),
}

/// Prints `report`, or the failure under `program` with its exit status.
fn finish(program: &str, result: Result<String, ExplainError>) -> ExitCode {
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

/// Parses the command line (usage errors exit 2, as clap does), runs the command, prints.
pub fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Explain(opts) => finish(explain::PROGRAM, explain::run(&opts).map(|r| r.render(opts.output))),
        Command::Status(opts) if opts.shadow => {
            finish(status::PROGRAM, status::shadow::run(&opts).map(|r| r.render(opts.output)))
        }
        Command::Status(opts) => finish(status::PROGRAM, status::run(&opts).map(|f| f.render(opts.output))),
        Command::Replay(opts) => match replay::run(&opts) {
            Ok(report) => finish(replay::PROGRAM, Ok(report)),
            Err(e) => {
                eprintln!("{}: {e}", replay::PROGRAM);
                ExitCode::from(e.exit_code())
            }
        },
        Command::Policy(cmd) => policy::main(&cmd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    fn status(args: &[&str]) -> Result<status::Options, clap::Error> {
        let cli = Cli::try_parse_from([&["cdplace", "status"], args].concat())?;
        match cli.command {
            Command::Status(opts) => Ok(opts),
            other => unreachable!("parsed `status` as {other:?}"),
        }
    }

    fn replay(args: &[&str]) -> Result<replay::Options, clap::Error> {
        match Cli::try_parse_from([&["cdplace", "replay"], args].concat())?.command {
            Command::Replay(opts) => Ok(opts),
            _ => unreachable!(),
        }
    }

    #[test]
    fn simulate_flags() {
        let o = replay(&["--simulate", "trace.json"]).unwrap();
        assert!(o.simulate);
        assert_eq!((o.time_scale, o.label_lag, o.deadline_factor, o.tie_seed), (18.0, 3.0, 0.0, 0));
        assert_eq!(o.queue, replay::simulate::QueueModel::Kube);
        let o =
            replay(&["--simulate", "t.json", "--time-scale", "600", "--label-lag", "1", "--queue", "fifo"]).unwrap();
        assert_eq!((o.time_scale, o.label_lag, o.queue), (600.0, 1.0, replay::simulate::QueueModel::Fifo));
        // The simulation's knobs need --simulate.
        for flag in [["--time-scale", "2"], ["--args", "{}"], ["--queue", "fifo"], ["--tie-seed", "3"]] {
            assert!(replay(&[&["trace"], &flag[..]].concat()).is_err(), "{flag:?}");
        }
        assert!(!replay(&["trace"]).unwrap().simulate);
    }

    #[test]
    fn policy_apply_flags() {
        let apply = |args: &[&str]| -> Result<policy::apply::ApplyOptions, clap::Error> {
            match Cli::try_parse_from([&["cdplace", "policy", "apply"], args].concat())?.command {
                Command::Policy(policy::Command::Apply(o)) => Ok(o),
                _ => unreachable!(),
            }
        };
        let o = apply(&["my-policy.wasm"]).unwrap();
        assert_eq!(
            (o.namespace.as_str(), o.configmap, o.key.as_str(), o.shadow),
            ("cdplace-system", None, "policy.wasm", false)
        );
        assert_eq!(o.timeout, std::time::Duration::from_secs(60));
        let o = apply(&["x.wasm", "--shadow", "-n", "sched", "--configmap", "cm", "--key", "k", "--timeout", "2m"])
            .unwrap();
        assert_eq!(
            (o.namespace.as_str(), o.configmap.as_deref(), o.key.as_str(), o.shadow),
            ("sched", Some("cm"), "k", true)
        );
        assert_eq!(o.timeout, std::time::Duration::from_secs(120));
        assert!(apply(&["x.wasm", "--timeout", "soon"]).is_err());
        assert!(apply(&[]).is_err());
    }

    #[test]
    fn shadow_flags() {
        let o = status(&["--shadow", "-A"]).unwrap();
        assert!(o.shadow && o.all_namespaces);
        assert_eq!(o.limit, 20);
        assert_eq!(status(&["--shadow", "--limit", "5", "-n", "ml"]).unwrap().limit, 5);
        assert!(!status(&[]).unwrap().shadow);
        // --limit is for --shadow; --policy and --config are not read by it.
        assert!(status(&["--limit", "5"]).is_err());
        assert!(status(&["--shadow", "--policy", "x.wasm"]).is_err());
        // A snapshot has no Events: refused, saying so, before any cluster is read (exit 2).
        let o = status(&["--shadow", "--snapshot", "fleet.yaml"]).unwrap();
        let e = status::shadow::run(&o).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("only a live cluster has (a snapshot holds no Events)"), "{e}");
        let o = status(&["--shadow", "-o", "svg"]).unwrap();
        assert_eq!(status::shadow::run(&o).unwrap_err().exit_code(), 2);
    }
}
