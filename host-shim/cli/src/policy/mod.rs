//! `cdplace policy check X.wasm`: the conformance suite for any policy component. It runs the
//! component through `cdplace-host`, the library kube-scheduler links, under the plugin's limits
//! (or the ones given), on [`fixtures`], and reports a PASS or FAIL per check:
//!
//! - `instantiate`: the component compiles, instantiates with nothing linked (a policy may
//!   import nothing), accepts the arguments and reports the settings the shipped policy derives
//!   from them (so its limits and the names the host extracts are the ones asked for; whether
//!   it steers plain pods is its own choice);
//! - `answers`: every call on every fixture (`apply`, `pre-filter`, `steer`, `preempt`,
//!   `status`) returns without a trap, a timeout, running out of memory or an error;
//! - `safety`: no `pre-filter` answer allows a node that breaks a safety rule: the host's own
//!   check (`cdplace_host::safety`, the one kube-scheduler applies to every answer) fails the call
//!   with the rule and the node, and the suite reports it.
//!
//! It also measures the `pre-filter` call time through the host (p50/p99 over `--rounds`
//! passes), reported beside the checks. Exit status 0 when every check passes, 1 otherwise.

pub mod fixtures;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdplace_host::{Cluster, Runtime, Settings};
use serde::Serialize;
use serde_json::Value;

/// `cdplace policy ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Run the conformance suite on a policy component: it instantiates within the limits,
    /// answers every fixture without a trap, never breaks a safety rule; with its call times.
    Check(CheckOptions),
}

/// Report format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Format {
    /// One line per check, then PASS or FAIL.
    Text,
    /// One JSON object.
    Json,
}

/// The command line of `cdplace policy check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckOptions {
    /// The policy component (`.wasm`, the world `policy` of wit/cdplace.wit).
    pub component: PathBuf,
    /// Plugin arguments (a JSON object) the component is configured with; the limits below are
    /// added to them.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// Most memory one instance may use, in MiB (`guestMemoryLimitMiB`).
    #[arg(long, default_value_t = cdplace_policy::args::DEFAULT_MEMORY_LIMIT_MIB)]
    pub memory_limit_mib: u32,
    /// Longest one call may run, in milliseconds (`guestCallTimeout`).
    #[arg(long, default_value_t = cdplace_policy::args::DEFAULT_CALL_TIMEOUT_MS)]
    pub call_timeout_ms: u32,
    /// Passes over the fixtures' `pre-filter` calls for the call time.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Report format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// The outcome of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub name: &'static str,
    /// PASS, FAIL, or SKIP when an earlier check failed so it could not run.
    pub result: &'static str,
    /// What was checked, or the first failures.
    pub detail: String,
    /// Every failure, `fixture: call: what`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// Call times of `pre-filter` through the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timing {
    pub calls: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// What `cdplace policy check` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub component: String,
    pub pass: bool,
    pub checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_filter: Option<Timing>,
}

/// The failures kept per check in the report (all are counted).
const KEPT_FAILURES: usize = 20;

/// Runs a `cdplace policy` subcommand, prints its report, and gives the exit status: 0 when
/// every check passed, 1 when one failed (a component that cannot be read or compiled fails
/// `instantiate`), 2 for bad options.
pub fn main(cmd: &Command) -> std::process::ExitCode {
    let Command::Check(o) = cmd;
    match run(o) {
        Ok(r) => {
            print!("{}", r.render(o.output));
            if r.pass { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("cdplace policy check: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

/// The arguments with the limits set.
fn args_with_limits(o: &CheckOptions) -> Result<String, String> {
    let mut v: Value = serde_json::from_str(&o.args).map_err(|e| format!("--args: not JSON: {e}"))?;
    let obj = v.as_object_mut().ok_or("--args: must be a JSON object")?;
    obj.insert("guestMemoryLimitMiB".into(), o.memory_limit_mib.into());
    obj.insert("guestCallTimeout".into(), format!("{}ms", o.call_timeout_ms).into());
    Ok(v.to_string())
}

fn check(name: &'static str, failures: Vec<String>, passed: String) -> Check {
    let n = failures.len();
    let mut failures = failures;
    let detail = match failures.first() {
        None => passed,
        Some(first) if n == 1 => first.clone(),
        Some(first) => format!("{first} (and {} more)", n - 1),
    };
    failures.truncate(KEPT_FAILURES);
    Check { name, result: if n == 0 { "PASS" } else { "FAIL" }, detail, failures }
}

fn skipped(name: &'static str) -> Check {
    Check { name, result: "SKIP", detail: "not run: the component did not instantiate".into(), failures: vec![] }
}

fn err(e: &cdplace_host::Error) -> String {
    cdplace_host::error::chain(e)
}

/// The settings the shipped policy derives from these arguments.
fn shipped_settings(args: &str) -> Result<Settings, String> {
    let a = cdplace_policy::Args::parse(args).map_err(|e| e.to_string())?;
    Ok(Settings::from(&a))
}

/// Runs the suite.
pub fn run(o: &CheckOptions) -> Result<Report, String> {
    let args = args_with_limits(o)?;
    let want = shipped_settings(&args).map_err(|e| format!("--args: {e}"))?;
    let component = o.component.display().to_string();
    let started = Instant::now();
    let instantiated = Runtime::from_file(&o.component).and_then(|rt| Ok((rt.clone(), Cluster::new(rt, &args)?)));
    let (rt, first) = match instantiated {
        Ok(x) => x,
        Err(e) => {
            let checks =
                vec![check("instantiate", vec![err(&e)], String::new()), skipped("answers"), skipped("safety")];
            return Ok(Report { component, pass: false, checks, pre_filter: None });
        }
    };
    let mut failures = Vec::new();
    // Steering plain pods is the policy's own choice; everything else it reports, the host
    // applies (the names extraction reads, the limits), so it must be what the arguments say.
    let want = Settings { plain_pod_steering: first.settings().plain_pod_steering, ..want };
    if first.settings() != &want {
        failures.push(format!(
            "configure reports settings {} where the shipped policy derives {} from the same arguments",
            first.settings().to_json(),
            want.to_json()
        ));
    }
    let limits = first.limits();
    let instantiate = check(
        "instantiate",
        failures,
        format!(
            "compiled and configured in {} ms; memory limit {} MiB, call timeout {} ms",
            started.elapsed().as_millis(),
            limits.memory_bytes >> 20,
            limits.deadline.as_millis()
        ),
    );
    drop(first);

    let mut answers = Vec::new();
    let mut unsafe_answers = Vec::new();
    let mut times = Vec::new();
    let (mut calls, mut decisions) = (0usize, 0usize);
    for f in fixtures::all() {
        let cluster = match Cluster::new(rt.clone() as Arc<dyn cdplace_host::Backend>, &args) {
            Ok(c) => c,
            Err(e) => {
                answers.push(format!("{}: configure: {}", f.name, err(&e)));
                continue;
            }
        };
        for obj in &f.objects {
            if let Err(e) = cluster.apply(obj) {
                answers.push(format!("{}: apply: {}", f.name, err(&e)));
            }
        }
        for round in 0..o.rounds {
            for (ns, name, uid) in &f.decide {
                let t = Instant::now();
                let r = cluster.pre_filter(ns, name, &[]);
                times.push(t.elapsed());
                calls += 1;
                match r {
                    // The host's own check (host-shim/lib/src/safety.rs), the one the scheduler
                    // applies to every answer: the call fails and names the rule and the node.
                    Err(cdplace_host::Error::PolicyViolation(v)) => {
                        decisions += usize::from(round == 0);
                        if round == 0 {
                            unsafe_answers.push(format!("{}: pre-filter {ns}/{name} (domain {uid}): {v}", f.name));
                        }
                    }
                    Err(e) => answers.push(format!("{}: pre-filter {ns}/{name}: {}", f.name, err(&e))),
                    Ok(_) => decisions += usize::from(round == 0),
                }
            }
        }
        let mut other = |what: String, r: Result<(), cdplace_host::Error>| {
            calls += 1;
            if let Err(e) = r {
                answers.push(format!("{}: {what}: {}", f.name, err(&e)));
            }
        };
        for gpus in [true, false] {
            other(format!("steer (gpus: {gpus})"), cluster.steer(gpus).map(drop));
        }
        if let Some((ns, name, _)) = f.decide.first() {
            match cluster.preempt(ns, name) {
                // Gang preemption's victims, checked by the host as the scheduler checks them.
                Err(cdplace_host::Error::PolicyViolation(v)) => {
                    other(format!("preempt {ns}/{name}"), Ok(()));
                    unsafe_answers.push(format!("{}: preempt {ns}/{name}: {v}", f.name));
                }
                r => other(format!("preempt {ns}/{name}"), r.map(drop)),
            }
        }
        other("status".into(), cluster.status().map(drop));
    }
    let answers = check(
        "answers",
        answers,
        format!("{} fixtures, {calls} calls: no trap, timeout, memory exhaustion or error", fixtures::all().len()),
    );
    let safety = check(
        "safety",
        unsafe_answers,
        format!(
            "{decisions} pre-filter answers: no node allowed that holds another ComputeDomain, a second workload pod of the domain, or lies outside its clique"
        ),
    );
    let checks = vec![instantiate, answers, safety];
    let pass = checks.iter().all(|c| c.result == "PASS");
    Ok(Report { component, pass, checks, pre_filter: timing(&mut times) })
}

/// p50/p99/max of call times (nearest rank).
fn timing(times: &mut [Duration]) -> Option<Timing> {
    if times.is_empty() {
        return None;
    }
    times.sort_unstable();
    let rank = |q: f64| times[((q * times.len() as f64).ceil() as usize).clamp(1, times.len()) - 1].as_micros() as u64;
    Some(Timing { calls: times.len(), p50_us: rank(0.50), p99_us: rank(0.99), max_us: rank(1.0) })
}

impl Report {
    /// The report as text (a line per check) or JSON.
    pub fn render(&self, f: Format) -> String {
        if f == Format::Json {
            return serde_json::to_string_pretty(self).expect("report serializes") + "\n";
        }
        let mut s = format!("cdplace policy check {}\n", self.component);
        for c in &self.checks {
            s += &format!("  {:<4}  {:<11}  {}\n", c.result, c.name, c.detail);
            for f in c.failures.iter().skip(1) {
                s += &format!("{:>21}{f}\n", "");
            }
        }
        if let Some(t) = &self.pre_filter {
            s += &format!(
                "  call time    pre-filter p50 {} µs, p99 {} µs, max {} µs ({} calls)\n",
                t.p50_us, t.p99_us, t.max_us, t.calls
            );
        }
        s += if self.pass { "PASS\n" } else { "FAIL\n" };
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut t: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(timing(&mut t), Some(Timing { calls: 100, p50_us: 50, p99_us: 99, max_us: 100 }));
        assert_eq!(timing(&mut []), None);
    }

    #[test]
    fn limits_are_added_to_the_args() {
        let o = CheckOptions {
            component: "x.wasm".into(),
            args: r#"{"imexMode":"HostManaged"}"#.into(),
            memory_limit_mib: 64,
            call_timeout_ms: 50,
            rounds: 1,
            output: Format::Text,
        };
        let v: Value = serde_json::from_str(&args_with_limits(&o).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"imexMode": "HostManaged", "guestMemoryLimitMiB": 64, "guestCallTimeout": "50ms"})
        );
        let e = args_with_limits(&CheckOptions { args: "[]".into(), ..o }).unwrap_err();
        assert_eq!(e, "--args: must be a JSON object");
    }

    #[test]
    fn every_fixture_has_pods_to_decide_and_a_name_of_its_own() {
        let all = fixtures::all();
        let mut names: Vec<_> = all.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(all.iter().all(|f| !f.decide.is_empty()), "a fixture without a pod to decide checks nothing");
    }
}
