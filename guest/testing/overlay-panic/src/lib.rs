//! A test-only policy component: the shipped policy (through cdplace-policy-sdk), except that
//! `pre-filter` panics whenever the host sends an overlay, which only preemption's what-ifs do
//! (PreFilterExtensions AddPod/RemovePod). Every other question gets the shipped answer, so only
//! a check that asks with an overlay (`cdplace policy check`, the swap's self-test) finds it
//! (issue 45). Built by `make guest` as `target/wasm32-wasip2/guest/cdplace_test_overlay_panic.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
mod component {
    use cdplace_policy_sdk::{OverlayOp, Policy, PreFilterResult, StrId, View};

    #[derive(Debug, Default)]
    pub struct OverlayPanic {
        view: View,
    }

    impl Policy for OverlayPanic {
        fn view(&mut self) -> &mut View {
            &mut self.view
        }

        fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
            if !overlay.is_empty() {
                panic!("overlay-panic: {} overlay ops are more than this policy handles", overlay.len());
            }
            self.view.pre_filter(pod, overlay, now_ms)
        }
    }

    cdplace_policy_sdk::export_policy!(OverlayPanic);
}
