//! What every test-only component under guest/testing shares: the settings `configure` returns
//! (the host fields read from the arguments, as the faulty component reads them, so a test runs
//! the host's limits from real plugin arguments), the string table `apply` keeps, and the
//! answers they give when they do not misbehave. Not every component uses every helper.
#![allow(dead_code)]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use crate::bindings::Settings;
use crate::bindings::cdplace::policy::errors::PolicyError;
use crate::bindings::cdplace::policy::facts::Delta;
use crate::bindings::cdplace::policy::fleet::FleetStatus;
use crate::bindings::cdplace::policy::verdicts::{Code, PreFilterResult, Preemption, Verdict};

struct Strings(RefCell<Vec<String>>);
// SAFETY: a wasm32 component instance has exactly one thread.
unsafe impl Sync for Strings {}
static STRINGS: Strings = Strings(RefCell::new(Vec::new()));

/// The text after `"key":` in flat JSON, with its quotes removed (enough for test arguments).
fn raw_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let quoted = alloc::format!("\"{key}\"");
    let rest = json[json.find(&quoted)? + quoted.len()..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

fn string_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    raw_field(json, key)?.strip_prefix('"')?.strip_suffix('"')
}

fn number_field(json: &str, key: &str) -> Option<u32> {
    raw_field(json, key)?.parse().ok()
}

/// The settings for `args`: the shipped policy's defaults, with `guestCallTimeout` (in `ms`
/// only), `guestMemoryLimitMiB`, `maxPolicyInstances` and `plainPodSteering` taken from the
/// arguments when given, so that a swap to a test component passes the settings check as the
/// shipped policy would and its misbehaviour is what is tested.
pub fn settings(args: &str) -> Result<Settings, PolicyError> {
    let call_timeout_ms = string_field(args, "guestCallTimeout")
        .and_then(|t| t.strip_suffix("ms"))
        .and_then(|t| t.parse().ok())
        .unwrap_or(2_000);
    Ok(Settings {
        clique_label: "nvidia.com/gpu.clique".into(),
        gpu_resource_name: "nvidia.com/gpu".into(),
        gpu_driver: "gpu.nvidia.com".into(),
        compute_domain_driver: "compute-domain.nvidia.com".into(),
        size_annotation: "cdplace.nvidia.com/size".into(),
        guest_path: None,
        call_timeout_ms,
        memory_limit_mib: number_field(args, "guestMemoryLimitMiB").unwrap_or(512),
        plain_pod_steering: raw_field(args, "plainPodSteering") != Some("false"),
        max_policy_instances: number_field(args, "maxPolicyInstances").unwrap_or(16),
    })
}

/// Keeps the strings the host sends; every other fact is ignored.
pub fn apply(deltas: Vec<Delta>) -> Result<(), PolicyError> {
    let mut strings = STRINGS.0.borrow_mut();
    for d in deltas {
        if let Delta::Strings(list) = d {
            for (id, s) in list {
                let i = id as usize;
                if strings.len() <= i {
                    strings.resize(i + 1, String::new());
                }
                strings[i] = s;
            }
        }
    }
    Ok(())
}

/// One verdict for every node: no cliques, no per-node verdicts, no node set.
pub fn everywhere(code: Code) -> PreFilterResult {
    let v = Verdict { code, reason: 0 };
    PreFilterResult {
        status: v,
        domain: None,
        reasons: alloc::vec![String::new()],
        exclusive: false,
        cliques: Vec::new(),
        other: v,
        other_score: 0,
        nodes: Vec::new(),
    }
}

/// No preemption.
pub fn no_preemption() -> Preemption {
    Preemption { domain: None, plan: None, reason: String::from("this test component never preempts") }
}

/// An empty fleet (these components keep no view).
pub fn empty_fleet() -> FleetStatus {
    FleetStatus { cliques: Vec::new(), domains: Vec::new(), largest_placeable: 0, reserved_trays: 0 }
}
