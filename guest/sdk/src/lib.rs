//! cdplace-policy-sdk: what an author of a cdplace placement policy needs, in one crate.
//!
//! A policy is a WebAssembly component implementing the world `policy` of `wit/cdplace.wit`
//! (the contract, documented in `wit/README.md`). With this crate it is plain Rust:
//!
//! - the shipped policy's [`View`] and every type it speaks (facts, [`Delta`], verdicts,
//!   [`PreFilterResult`], [`Preemption`], [`FleetStatus`]), re-exported from `cdplace-policy`;
//! - the [`Policy`] trait, one method per export of the world, implemented by [`View`] (the
//!   shipped rules); a new policy wraps a `View` and changes what it must;
//! - helpers for cliques and trays ([`cliques`]): the clique a node counts in, and narrowing an
//!   answer to some cliques, the one edit that can never break the safety rules; to confine a
//!   domain to some cliques, ask [`View::pre_filter_within`] instead, which leaves the others out
//!   before the shipped best fit offers its best few (narrowing its answer afterwards keeps only
//!   what it offered);
//! - [`export_policy!`]: the whole component glue (wit-bindgen bindings, allocator, panic
//!   handler) for a type implementing [`Policy`] + [`Default`], on `wasm32`;
//! - `harness` (feature `harness`, std): runs a policy on fixtures of Kubernetes objects natively
//!   and as its built component through the real host, and insists they answer alike.
//!
//! A policy that sends every ComputeDomain to the first clique the shipped rules allow, as a
//! complete example (`guest/examples/team-racks` is a fuller one):
//!
//! ```
//! use cdplace_policy_sdk::{cliques, Delta, OverlayOp, Policy, PreFilterResult, StrId, View};
//!
//! #[derive(Debug, Default)]
//! struct FirstFit(View);
//!
//! impl Policy for FirstFit {
//!     fn view(&mut self) -> &mut View {
//!         &mut self.0
//!     }
//!
//!     fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
//!         let mut r = self.0.pre_filter(pod, overlay, now_ms);
//!         // Keep the first feasible clique; the others become unresolvable.
//!         let first = cliques::feasible(&r).next();
//!         if let Some(first) = first {
//!             cliques::restrict(&self.0, &mut r, |c| c == first, "not the first clique");
//!         }
//!         r
//!     }
//! }
//!
//! let mut p = FirstFit::default();
//! p.configure("{}").unwrap();
//! p.apply(vec![Delta::Reset]).unwrap();
//! // On wasm32 the component is then one line: cdplace_policy_sdk::export_policy!(FirstFit);
//! ```
#![no_std]

extern crate alloc;
#[cfg(feature = "harness")]
extern crate std;

// The generated bindings name this crate by path, from inside it too.
extern crate self as cdplace_policy_sdk;

pub mod cliques;
#[cfg(target_arch = "wasm32")]
pub mod component;
#[cfg(feature = "harness")]
pub mod harness;
mod policy;

pub use cdplace_policy::*;
pub use policy::Policy;

/// The contract this crate implements: the package of `wit/cdplace.wit` (see `wit/README.md`,
/// Versioning). A component built with it carries this version in its interface names.
pub const CONTRACT: &str = "cdplace:policy@0.3.0";

#[cfg(test)]
mod tests {
    /// The one owner of the version is the WIT package line; the crate and the contract's README
    /// say the same.
    #[test]
    fn the_contract_version_is_the_wit_package() {
        let wit = include_str!("../../../wit/cdplace.wit");
        let line = wit.lines().find(|l| l.starts_with("package ")).expect("a package line");
        assert_eq!(line, alloc::format!("package {};", super::CONTRACT));
        let readme = include_str!("../../../wit/README.md");
        assert!(readme.starts_with(&alloc::format!("# The policy contract: `{}`", super::CONTRACT)));
    }
}
