//! The only module that runs `bindgen!`: host-side types and calls for `wit/cdplace.wit`.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "policy",
});

pub use cdplace::policy::facts as wfacts;
pub use cdplace::policy::fleet as wfleet;
pub use cdplace::policy::verdicts as wverdicts;
