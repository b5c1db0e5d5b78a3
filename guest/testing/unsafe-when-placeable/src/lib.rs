//! A test-only policy component: the shipped policy (through cdplace-policy-sdk), except that
//! wherever the shipped policy would place a pod of a domain that has not started (a Success
//! answer not held to one clique) it allows every node, so the pod may land on a tray another domain holds (`one-domain-per-node`).
//! Where the pod cannot be placed it answers as shipped, so on a view whose pending domains fit
//! nowhere it looks safe: a self-test that asks only about today's pending pods passes it
//! (issue 45); one that asks about a new domain that could start now does not. With
//! `policyArgs: {unsafeAfterMs: T}` an instance answers as shipped until T milliseconds (policy
//! time) after its first pre-filter call, and only then turns unsafe: a policy that passes its
//! swap's self-test and goes wrong after it was applied, which the scheduler reverts
//! (policyRevert). `policyArgs: {unsafeFromMs: T}` does the same from the Unix time T (in
//! milliseconds) on, for every instance alike. Built by
//! `make guest` as `target/wasm32-wasip2/guest/cdplace_test_unsafe_when_placeable.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
mod component {
    use cdplace_policy_sdk::{Args, Code, OverlayOp, Policy, PreFilterResult, Result, StrId, Verdict, View};

    #[derive(Debug, Default)]
    pub struct UnsafeWhenPlaceable {
        view: View,
        /// How long after its first pre-filter call it answers as shipped (policyArgs.unsafeAfterMs).
        after_ms: i64,
        first_ms: Option<i64>,
        /// Unix milliseconds from which every instance is unsafe (policyArgs.unsafeFromMs).
        from_ms: i64,
    }

    impl Policy for UnsafeWhenPlaceable {
        fn view(&mut self) -> &mut View {
            &mut self.view
        }

        fn configure(&mut self, args: &str) -> Result<Args> {
            let a = Args::parse(args)?;
            self.after_ms =
                a.policy_args.as_ref().and_then(|v| v.get("unsafeAfterMs")).and_then(|v| v.as_i64()).unwrap_or(0);
            self.from_ms =
                a.policy_args.as_ref().and_then(|v| v.get("unsafeFromMs")).and_then(|v| v.as_i64()).unwrap_or(0);
            self.view.set_args(a.clone());
            Ok(a)
        }

        fn pre_filter(&mut self, pod: StrId, overlay: &[OverlayOp], now_ms: i64) -> PreFilterResult {
            let mut r = self.view.pre_filter(pod, overlay, now_ms);
            let first = *self.first_ms.get_or_insert(now_ms);
            let unsafe_now = now_ms - first >= self.after_ms && now_ms >= self.from_ms;
            // A domain that has not started (its answer is not held to its own clique).
            if unsafe_now && r.status.code == Code::Success && r.domain.is_some() && !r.exclusive {
                r.exclusive = false;
                r.other = Verdict::SUCCESS;
                r.nodes.clear();
                for c in &mut r.cliques {
                    c.verdict = Verdict::SUCCESS;
                }
            }
            r
        }
    }

    cdplace_policy_sdk::export_policy!(UnsafeWhenPlaceable);
}
