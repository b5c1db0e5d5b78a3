//! The cdplace policy as a WebAssembly component.
//!
//! A thin export layer: [`component`] maps the WIT types of `wit/cdplace.wit` to and from
//! `cdplace-policy` and keeps one [`cdplace_policy::View`] per instance. The component is
//! `no_std` and imports nothing, so the host instantiates it with an empty linker: no filesystem,
//! network, clock or environment. A panic traps (the host discards the instance).
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
mod component;
