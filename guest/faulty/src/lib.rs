//! A test-only component with the cdplace world that misbehaves on demand, so the host's
//! fail-closed handling is tested against real traps, endless loops and memory exhaustion.
//! `configure` takes the fault: `"trap"`, `"loop"`, `"oom"` or anything else for none, either as
//! a bare JSON string or as `{"fault": "loop", "guestCallTimeout": "50ms", "guestMemoryLimitMiB":
//! 16}` (the host fields, returned in the settings, so a test can run the host's limits from the
//! arguments as in production); the fault fires in `pre-filter` for pods whose key starts with
//! `fault/` (and in `status` while the view has such a pod), or for every pod with
//! `"faultScope": "all"` (so `cdplace policy check` shows each fault on its own fixtures). Pods in a namespace starting
//! `fault-trap`, `fault-loop` or `fault-oom` get that fault whatever `configure` took, so a
//! scheduler running the component with real plugin arguments (`guestPath`) shows every fault
//! (e2e/drills_test.go). Every other pod is skipped, so a test can show that the host discards
//! the broken instance and keeps serving. In every mode, `apply` traps on a pod whose name starts
//! with `poison` (one bad object in a batch, whatever the arguments, so tests through the
//! scheduler can use it), so a test can show that the object is quarantined and decisions go on;
//! and `pre-filter` traps, in every mode, for a pod whose name starts with `trap` (repeated guest
//! failures through the scheduler, for the breaker).
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
#[path = "../../sdk/src/rt.rs"]
mod rt;

#[cfg(target_arch = "wasm32")]
mod faulty {
    extern crate alloc;

    use alloc::string::String;
    use alloc::vec::Vec;
    use core::cell::RefCell;
    use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

    mod bindings {
        wit_bindgen::generate!({ path: "../../wit", world: "policy", generate_all });
    }
    use bindings::cdplace::policy::errors::PolicyError;
    use bindings::cdplace::policy::facts::Delta;
    use bindings::cdplace::policy::fleet::FleetStatus;
    use bindings::cdplace::policy::verdicts::{Code, PreFilterResult, Preemption, Verdict};
    use bindings::{OverlayOp, Settings};

    static FAULT: AtomicU8 = AtomicU8::new(0);
    /// The configured fault fires for every pod, not only those in namespace `fault`.
    static EVERY_POD: AtomicBool = AtomicBool::new(false);

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

    struct Faulty;

    impl bindings::Guest for Faulty {
        fn configure(args: String) -> Result<Settings, PolicyError> {
            let args = args.trim();
            let fault =
                if args.starts_with('{') { string_field(args, "fault").unwrap_or("") } else { args.trim_matches('"') };
            let fault = match fault {
                "trap" => 1,
                "loop" => 2,
                "oom" => 3,
                _ => 0,
            };
            FAULT.store(fault, Ordering::Relaxed);
            EVERY_POD.store(string_field(args, "faultScope") == Some("all"), Ordering::Relaxed);
            let call_timeout_ms = string_field(args, "guestCallTimeout")
                .and_then(|t| t.strip_suffix("ms"))
                .and_then(|t| t.parse().ok())
                .unwrap_or(2_000);
            let memory_limit_mib = number_field(args, "guestMemoryLimitMiB").unwrap_or(512);
            let max_policy_instances = number_field(args, "maxPolicyInstances").unwrap_or(16);
            Ok(Settings {
                clique_label: "nvidia.com/gpu.clique".into(),
                gpu_resource_name: "nvidia.com/gpu".into(),
                gpu_driver: "gpu.nvidia.com".into(),
                compute_domain_driver: "compute-domain.nvidia.com".into(),
                size_annotation: "cdplace.nvidia.com/size".into(),
                guest_path: None,
                call_timeout_ms,
                memory_limit_mib,
                plain_pod_steering: false,
                max_policy_instances,
            })
        }

        fn apply(deltas: Vec<Delta>) -> Result<(), PolicyError> {
            let mut strings = STRINGS.0.borrow_mut();
            for d in deltas {
                match d {
                    Delta::Strings(list) => {
                        for (id, s) in list {
                            let i = id as usize;
                            if strings.len() <= i {
                                strings.resize(i + 1, String::new());
                            }
                            strings[i] = s;
                        }
                    }
                    Delta::UpsertPod(p)
                        if strings
                            .get(p.key as usize)
                            .and_then(|k| k.split_once('/'))
                            .is_some_and(|(_, name)| name.starts_with("poison")) =>
                    {
                        panic!("injected trap on a poison pod")
                    }
                    _ => {}
                }
            }
            Ok(())
        }

        fn pre_filter(pod: u32, _: Vec<OverlayOp>, _: i64) -> PreFilterResult {
            let strings = STRINGS.0.borrow();
            let key = strings.get(pod as usize).map_or("", String::as_str);
            if key.split_once('/').is_some_and(|(_, name)| name.starts_with("trap")) {
                panic!("injected trap on a trap pod");
            }
            let fault = if key.starts_with("fault/") || EVERY_POD.load(Ordering::Relaxed) {
                FAULT.load(Ordering::Relaxed)
            } else {
                fault_of_namespace(key)
            };
            drop(strings);
            fire(fault);
            skipped()
        }

        fn steer(_: bool, _: i64) -> PreFilterResult {
            skipped()
        }

        fn preempt(_: u32, _: i64) -> Preemption {
            Preemption { domain: None, plan: None, reason: String::from("the faulty component never preempts") }
        }

        /// The fault fires when the view has a pod in namespace `fault`; else an empty fleet (the
        /// faulty component keeps no view).
        fn status(_: i64) -> FleetStatus {
            if STRINGS.0.borrow().iter().any(|k| k.starts_with("fault/")) {
                fire(FAULT.load(Ordering::Relaxed));
            }
            FleetStatus { cliques: Vec::new(), domains: Vec::new(), largest_placeable: 0, reserved_trays: 0 }
        }
    }

    /// Misbehaves as `fault` says: traps (1), loops forever (2) or allocates until stopped (3);
    /// returns for any other value.
    fn fire(fault: u8) {
        match fault {
            1 => panic!("injected trap"),
            2 => {
                let mut x: u64 = 0;
                loop {
                    x = core::hint::black_box(x.wrapping_add(1));
                }
            }
            3 => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(alloc::vec![1u8; 1 << 20]);
                    core::hint::black_box(&hoard);
                }
            }
            _ => {}
        }
    }

    /// The fault a pod's namespace names whatever `configure` said, so one scheduler with real
    /// plugin args can show every fault (the fault drills): `fault-trap…`, `fault-loop…`,
    /// `fault-oom…`.
    fn fault_of_namespace(key: &str) -> u8 {
        [("fault-trap", 1), ("fault-loop", 2), ("fault-oom", 3)]
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix))
            .map_or(0, |&(_, f)| f)
    }

    fn skipped() -> PreFilterResult {
        let skip = Verdict { code: Code::Skip, reason: 0 };
        PreFilterResult {
            status: skip,
            domain: None,
            reasons: alloc::vec![String::new()],
            exclusive: false,
            cliques: Vec::new(),
            other: skip,
            other_score: 0,
            nodes: Vec::new(),
        }
    }

    bindings::export!(Faulty with_types_in bindings);
}
