//! A test-only policy component that traps in `configure`, the first call every new instance
//! gets: no cluster can be made from it, and an instance of it never serves a call. Built by
//! `make guest` as `target/wasm32-wasip2/guest/cdplace_test_instantiate_trap.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
#[path = "../../../sdk/src/rt.rs"]
mod rt;

#[cfg(target_arch = "wasm32")]
#[path = "../../shared.rs"]
mod shared;

#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({ path: "../../../wit", world: "policy", generate_all });
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
        fn configure(_: String) -> Result<Settings, PolicyError> {
            panic!("injected trap in configure")
        }

        fn pre_filter(_: u32, _: Vec<OverlayOp>, _: i64) -> PreFilterResult {
            shared::everywhere(Code::Skip)
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

        fn status(_: i64) -> FleetStatus {
            shared::empty_fleet()
        }
    }

    crate::bindings::export!(Component with_types_in crate::bindings);
}
