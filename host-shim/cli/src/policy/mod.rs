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

pub mod apply;
pub mod fixtures;
pub mod new;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cdplace_host::{Cluster, Overlay, Runtime, Settings};
use serde::Serialize;
use serde_json::Value;

/// `cdplace policy ...`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Run the conformance suite on a policy component: it instantiates within the limits,
    /// answers every fixture without a trap, never breaks a safety rule; with its call times.
    Check(CheckOptions),
    /// Put a component where the scheduler's configMap policy source watches (server-side apply
    /// of binaryData), wait for its PolicyApplied or PolicyRefused Event and print the verdict;
    /// exit 1 when it is refused or none comes within --timeout.
    Apply(apply::ApplyOptions),
    /// Start a policy crate outside this repository: the SDK (with its contract), the guest
    /// profile, the wasm32-wasip2 target, the lock file and a policy to edit.
    New(new::NewOptions),
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
const KEPT_FAILURES: usize = 40;

/// Runs a `cdplace policy` subcommand, prints its report, and gives the exit status: 0 when
/// every check passed, 1 when one failed (a component that cannot be read or compiled fails
/// `instantiate`), 2 for bad options.
pub fn main(cmd: &Command) -> std::process::ExitCode {
    let o = match cmd {
        Command::Check(o) => o,
        Command::Apply(o) => return apply_main(o),
        Command::New(o) => {
            return match new::run(o) {
                Ok(text) => {
                    print!("{text}");
                    std::process::ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("cdplace policy new: {e}");
                    std::process::ExitCode::from(2)
                }
            };
        }
    };
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

/// `policy apply`: the verdict on stdout, exit 0 applied, 1 refused or no verdict (or the
/// cluster could not be written), 2 for bad input.
fn apply_main(o: &apply::ApplyOptions) -> std::process::ExitCode {
    match apply::run(o) {
        Ok(a) => {
            let (text, code) = a.render();
            print!("{text}");
            std::process::ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("cdplace policy apply: {}", cdplace_host::error::chain(&e));
            std::process::ExitCode::from(e.exit_code())
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
    let all = fixtures::all();
    for (i, f) in all.iter().enumerate() {
        // Progress on stderr: a suite of a slow policy is never silent (issue 45).
        eprintln!("cdplace policy check: fixture {}/{} {}", i + 1, all.len(), f.name);
        let mut fixture = FixtureRun::new(f.name);
        fixture.run(&rt, &args, f, o.rounds, &mut times, &mut unsafe_answers);
        calls += fixture.calls;
        decisions += fixture.decisions;
        answers.extend(fixture.failure());
    }
    let answers = check(
        "answers",
        answers,
        format!("{} fixtures, {calls} calls: no trap, timeout, memory exhaustion or error", all.len()),
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

/// The calls of one fixture. The first failed call (a trap, a timeout, memory exhaustion, an
/// error) ends the fixture: the calls after it would mostly fail the same way, and a looping
/// policy would cost the call timeout each (issue 45: 26 minutes at the defaults); the fixture
/// is reported once, with its first failure and the calls left unasked.
struct FixtureRun {
    name: &'static str,
    calls: usize,
    decisions: usize,
    failed: Option<String>,
    /// Calls not made because the fixture had failed.
    skipped: usize,
    /// The safety rules its answers broke: each is reported once per fixture, with its first
    /// answer.
    rules: std::collections::BTreeSet<cdplace_host::safety::Rule>,
}

impl FixtureRun {
    fn new(name: &'static str) -> Self {
        FixtureRun { name, calls: 0, decisions: 0, failed: None, skipped: 0, rules: Default::default() }
    }

    /// Makes one call unless the fixture failed already; `Err` records the failure.
    fn call<T>(
        &mut self,
        what: impl FnOnce() -> String,
        f: impl FnOnce() -> Result<T, cdplace_host::Error>,
    ) -> Option<T> {
        if self.failed.is_some() {
            self.skipped += 1;
            return None;
        }
        self.calls += 1;
        match f() {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed = Some(format!("{}: {}", what(), err(&e)));
                None
            }
        }
    }

    fn run(
        &mut self,
        rt: &Arc<Runtime>,
        args: &str,
        f: &fixtures::Fixture,
        rounds: u32,
        times: &mut Vec<Duration>,
        unsafe_answers: &mut Vec<String>,
    ) {
        let Some(cluster) =
            self.call(|| "configure".into(), || Cluster::new(rt.clone() as Arc<dyn cdplace_host::Backend>, args))
        else {
            return;
        };
        for obj in &f.objects {
            self.call(|| "apply".into(), || cluster.apply(obj));
        }
        for round in 0..rounds {
            for (ns, name, uid) in &f.decide {
                if self.failed.is_some() {
                    self.skipped += 1;
                    continue;
                }
                let t = Instant::now();
                let r = cluster.pre_filter(ns, name, &[]);
                times.push(t.elapsed());
                self.calls += 1;
                match r {
                    // The host's own check (host-shim/lib/src/safety.rs), the one the scheduler
                    // applies to every answer: the call fails and names the rule and the node.
                    Err(cdplace_host::Error::PolicyViolation(v)) => {
                        if round == 0 {
                            self.decisions += 1;
                            if self.rules.insert(v.rule) {
                                unsafe_answers
                                    .push(format!("{}: pre-filter {ns}/{name} (domain {uid}): {v}", self.name));
                            }
                        }
                    }
                    Err(e) => self.failed = Some(format!("pre-filter {ns}/{name}: {}", err(&e))),
                    Ok(_) => self.decisions += usize::from(round == 0),
                }
            }
        }
        // Preemption's what-ifs (PreFilterExtensions): each pending pod asked again with a placed
        // pod taken away, and taken away and put back on its node; the host checks these answers
        // as it checks every other.
        if let Some((pns, pname, node)) = f.placed.first() {
            let remove = Overlay::RemovePod { namespace: pns.clone(), name: pname.clone() };
            let add = Overlay::AddPod { namespace: pns.clone(), name: pname.clone(), node: node.clone() };
            for overlay in [vec![remove.clone()], vec![remove, add]] {
                let what = if overlay.len() == 1 { "without" } else { "with re-added" };
                for (ns, name, uid) in &f.decide {
                    let what = || format!("pre-filter {ns}/{name} {what} {pns}/{pname} (a preemption what-if)");
                    match self.call(what, || match cluster.pre_filter(ns, name, &overlay) {
                        Err(cdplace_host::Error::PolicyViolation(v)) => Ok(Some(v)),
                        r => r.map(|_| None),
                    }) {
                        Some(Some(v)) if self.rules.insert(v.rule) => {
                            unsafe_answers.push(format!(
                                "{}: pre-filter {ns}/{name} (domain {uid}) {} {pns}/{pname}: {v}",
                                self.name,
                                if overlay.len() == 1 { "without" } else { "with re-added" }
                            ));
                        }
                        Some(None) => self.decisions += 1,
                        Some(Some(_)) | None => {}
                    }
                }
            }
        }
        for gpus in [true, false] {
            self.call(|| format!("steer (gpus: {gpus})"), || cluster.steer(gpus).map(drop));
        }
        if let Some((ns, name, _)) = f.decide.first() {
            let what = || format!("preempt {ns}/{name}");
            // Gang preemption's victims, checked by the host as the scheduler checks them.
            if let Some(Some(v)) = self.call(what, || match cluster.preempt(ns, name) {
                Err(cdplace_host::Error::PolicyViolation(v)) => Ok(Some(v)),
                r => r.map(|_| None),
            }) && self.rules.insert(v.rule)
            {
                unsafe_answers.push(format!("{}: preempt {ns}/{name}: {v}", self.name));
            }
        }
        self.call(|| "status".into(), || cluster.status().map(drop));
    }

    /// The fixture's one failure line, if it failed.
    fn failure(&self) -> Option<String> {
        let first = self.failed.as_ref()?;
        Some(match self.skipped {
            0 => format!("{}: {first}", self.name),
            n => format!("{}: {first} (the fixture's {n} later calls were not made)", self.name),
        })
    }
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
