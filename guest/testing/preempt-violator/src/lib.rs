//! Test-only: the shipped rules (cdplace-policy-sdk's `View`), except that every gang preemption
//! plan is made to break one of the host's victim rules (host-shim/lib/src/safety.rs
//! `check_preemption`), chosen by the preemptor pod's name:
//! - a name containing `priority`: the plan also names the placed pod of the highest priority
//!   (at least the preemptor's) that it did not name (`victim-lower-priority`);
//! - `trays`: it also names a placed pod of lower priority on a node outside the plan's clique
//!   (`victim-on-preemptor-trays`);
//! - `part`: it leaves out the last pod of its victims, part of a domain it evicts
//!   (`victim-whole-domain`).
//!
//! Every other answer is the shipped one, so the component passes every other check. Built by
//! `make guest` as `target/wasm32-wasip2/guest/cdplace_test_preempt_violator.wasm`.
#![cfg_attr(target_arch = "wasm32", no_std)]

#[cfg(target_arch = "wasm32")]
mod policy {
    extern crate alloc;

    use alloc::collections::BTreeMap;
    use alloc::vec::Vec;

    use cdplace_policy_sdk::{Delta, Policy, Preemption, Result, StrId, View};

    /// A pod as this component tracks it: its node and priority.
    #[derive(Debug, Clone, Copy)]
    struct Pod {
        node: Option<StrId>,
        priority: i32,
    }

    #[derive(Debug, Default)]
    pub struct PreemptViolator {
        view: View,
        pods: BTreeMap<StrId, Pod>,
        /// Each node's clique label value.
        nodes: BTreeMap<StrId, Option<StrId>>,
    }

    impl Policy for PreemptViolator {
        fn view(&mut self) -> &mut View {
            &mut self.view
        }

        fn apply(&mut self, deltas: Vec<Delta>) -> Result<()> {
            for d in &deltas {
                match d {
                    Delta::UpsertPod(p) => {
                        self.pods.insert(p.key, Pod { node: p.node, priority: p.priority });
                    }
                    Delta::RemovePod(k) => {
                        self.pods.remove(k);
                    }
                    Delta::UpsertNode(n) => {
                        self.nodes.insert(n.name, n.clique_label);
                    }
                    Delta::RemoveNode(n) => {
                        self.nodes.remove(n);
                    }
                    Delta::Reset => {
                        self.pods.clear();
                        self.nodes.clear();
                    }
                    _ => {}
                }
            }
            self.view.apply(deltas)
        }

        fn preempt(&mut self, pod: StrId, now_ms: i64) -> Preemption {
            let mut r = self.view.preempt(pod, now_ms);
            let Some(plan) = r.plan.as_mut() else { return r };
            let name = self.view.str(pod);
            let priority = self.pods.get(&pod).map_or(0, |p| p.priority);
            let others = self.pods.iter().filter(|(k, p)| **k != pod && p.node.is_some() && !plan.pods.contains(k));
            let extra = if name.contains("priority") {
                others.filter(|(_, p)| p.priority >= priority).max_by_key(|(_, p)| p.priority).map(|(k, _)| *k)
            } else if name.contains("trays") {
                let clique = plan.clique;
                others
                    .filter(|(_, p)| {
                        p.priority < priority
                            && p.node.and_then(|n| self.nodes.get(&n).copied().flatten()) != Some(clique)
                    })
                    .map(|(k, _)| *k)
                    .next()
            } else {
                if name.contains("part") {
                    plan.pods.pop();
                }
                None
            };
            plan.pods.extend(extra);
            r
        }
    }
}

#[cfg(target_arch = "wasm32")]
cdplace_policy_sdk::export_policy!(policy::PreemptViolator);
