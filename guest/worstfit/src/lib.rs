//! Test-only: the shipped policy component (guest/component: the shipped rules exported through
//! cdplace-policy-sdk) over cdplace-policy with its `worst-fit` feature: a domain that has not
//! started is offered the emptiest cliques that fit rather than the fullest. A valid policy whose
//! placements differ visibly from the shipped one, for the hot-swap tests. Built by `make guest`
//! as `target/wasm32-wasip2/guest/cdplace_guest_worstfit.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
cdplace_policy_sdk::export_policy!(cdplace_policy_sdk::View);
