//! A test-only policy component built against another version of the cdplace WIT package
//! (`wit/` here: a copy of the repository's `wit/cdplace.wit` with the package version bumped and
//! one change a new contract version would make: `status` takes a second parameter;
//! host-shim/lib/tests/test_components.rs checks that nothing else differs). The component model
//! types components structurally (the world's exports are plain function names, not versioned),
//! so a version bump alone would load; the changed export is what the host refuses, with a world
//! mismatch naming it. It otherwise behaves as the violator. Built by `make guest` as
//! `target/wasm32-wasip2/guest/cdplace_test_other_wit.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
#[path = "../../../sdk/src/rt.rs"]
mod rt;

#[cfg(target_arch = "wasm32")]
#[path = "../../shared.rs"]
mod shared;

#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "policy", generate_all });
}

#[cfg(target_arch = "wasm32")]
mod component {
    extern crate alloc;

    use alloc::string::String;
    use alloc::vec::Vec;

    use crate::bindings::cdplace::policy::errors::PolicyError;
    use crate::bindings::cdplace::policy::facts::Delta;
    use crate::bindings::cdplace::policy::fleet::FleetStatus;
    use crate::bindings::cdplace::policy::verdicts::{Code, PreFilterResult, Preemption};
    use crate::bindings::{OverlayOp, Settings};
    use crate::shared;

    struct Component;

    impl crate::bindings::Guest for Component {
        fn configure(args: String) -> Result<Settings, PolicyError> {
            shared::settings(&args)
        }

        fn pre_filter(_: u32, _: Vec<OverlayOp>, _: i64) -> PreFilterResult {
            shared::everywhere(Code::Success)
        }

        fn apply(deltas: Vec<Delta>) -> Result<(), PolicyError> {
            shared::apply(deltas)
        }

        fn steer(_: bool, _: i64) -> PreFilterResult {
            shared::everywhere(Code::Skip)
        }

        fn preempt(_: u32, _: i64) -> Preemption {
            shared::no_preemption()
        }

        fn status(_: i64, _: bool) -> FleetStatus {
            shared::empty_fleet()
        }
    }

    crate::bindings::export!(Component with_types_in crate::bindings);
}
