//! The cdplace policy as a WebAssembly component.
//!
//! The shipped rules of `cdplace-policy` exported as they are: `cdplace-policy-sdk` maps the WIT
//! types of `wit/cdplace.wit` to and from the policy's and keeps one [`cdplace_policy::View`]
//! per instance. The component is `no_std` and imports nothing, so the host instantiates it with
//! an empty linker: no filesystem, network, clock or environment. A panic traps (the host
//! discards the instance).
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
cdplace_policy_sdk::export_policy!(cdplace_policy_sdk::View);
