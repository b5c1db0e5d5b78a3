//! Computing the per-node summaries and the per-clique aggregates they add up to (the types are
//! in `trays`): which trays are usable, free, idle or held, by GPU count, so a decision reads a
//! clique's capacity without visiting its nodes.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::args::ImexMode;
use crate::facts::*;
use crate::trays::{Clique, LabelKind, NodeEntry, NodeSummary, label_kind};
use crate::view::{View, bump};

impl View {
    pub(crate) fn summarize(&self, e: &NodeEntry) -> NodeSummary {
        let Some(fact) = &e.fact else {
            return NodeSummary { gpu_idle: true, ..Default::default() };
        };
        let (clique, malformed) = match fact.clique_label {
            Some(l) => match label_kind(self.str(l)) {
                LabelKind::Clique => (Some(l), false),
                LabelKind::NoFabric => (None, false),
                LabelKind::Malformed => (None, true),
            },
            None => (None, false),
        };
        let mut holders = Vec::new();
        let mut workload = Vec::new();
        let mut pod_holders = Vec::new();
        if let Some(l) = fact.domain_label
            && !self.str(l).is_empty()
        {
            holders.push(l);
        }
        let mut used = GpuDemand::default();
        for key in &e.pods {
            let Some(p) = self.pods.get(key) else { continue };
            used.add(p.gpu_use);
            if let Ok(Some(m)) = p.member {
                holders.push(m.domain);
                pod_holders.push(m.domain);
                if !m.daemon {
                    workload.push(m.domain);
                }
            }
        }
        holders.sort_unstable();
        holders.dedup();
        workload.sort_unstable();
        workload.dedup();
        pod_holders.sort_unstable();
        pod_holders.dedup();
        NodeSummary {
            clique,
            usable: clique.is_some() && !fact.unschedulable,
            gpus: fact.gpus,
            gpu_idle: used.count == 0 && !used.all,
            holders,
            workload,
            pod_holders,
            malformed,
        }
    }

    fn add_node_summary(&mut self, name: StrId, s: &NodeSummary, add: bool) {
        if s.malformed {
            if add {
                self.malformed.insert(name);
            } else {
                self.malformed.remove(&name);
            }
        }
        let Some(c) = s.clique else { return };
        if s.usable {
            bump(&mut self.tray_sizes, s.gpus, add);
        }
        let cl = self.cliques.entry(c).or_default();
        if add {
            cl.nodes.insert(name);
        } else {
            cl.nodes.remove(&name);
        }
        if s.usable {
            if add {
                cl.usable += 1;
            } else {
                cl.usable -= 1;
            }
            bump(&mut cl.sizes, s.gpus, add);
        }
        if s.free() {
            bump(&mut cl.free, s.gpus, add);
        } else if add {
            cl.busy.insert(name, s.clone());
        } else {
            cl.busy.remove(&name);
        }
        if s.usable && s.gpu_idle {
            bump(&mut cl.idle, s.gpus, add);
            for &w in &s.workload {
                bump(&mut cl.idle_with_workload, (w, s.gpus), add);
            }
            if let [h] = s.holders[..]
                && !s.workload.contains(&h)
            {
                bump(&mut cl.held_idle, (h, s.gpus), add);
            }
        }
        if cl.nodes.is_empty() && cl.promised == 0 {
            self.cliques.remove(&c);
        }
    }

    /// Recomputes a node's summary and moves its contribution.
    pub(crate) fn refresh_node(&mut self, name: StrId) {
        let Some(e) = self.nodes.get(&name) else { return };
        let new = self.summarize(e);
        if new == e.summary {
            return;
        }
        let old = core::mem::replace(&mut self.nodes.get_mut(&name).expect("present").summary, new.clone());
        self.add_node_summary(name, &old, false);
        self.add_node_summary(name, &new, true);
        let e = &self.nodes[&name];
        if e.fact.is_none() && e.pods.is_empty() {
            self.nodes.remove(&name);
        } else if old.clique != new.clique {
            // Placed pods now count for another clique.
            let pods: Vec<StrId> = e.pods.iter().copied().collect();
            for p in pods {
                self.refresh_pod_contrib(p);
            }
        }
    }

    /// Trays of clique `c` that a domain could ever use: every usable tray, or only those of
    /// `size` GPUs when wholeTray asks for trays of the pod's size.
    pub(crate) fn usable_for(c: &Clique, size: Option<u32>) -> u32 {
        match size {
            Some(g) => c.sizes.get(&g).copied().unwrap_or(0),
            None => c.usable,
        }
    }

    /// What the largest clique could ever offer, for reasons: `the largest clique has 18 usable
    /// trays`, or, when wholeTray counts only trays of `size` GPUs and that is fewer, how many
    /// such trays the best clique has.
    pub(crate) fn largest_clique_text(&self, size: Option<u32>) -> String {
        let largest = self.cliques.values().map(|c| c.usable).max().unwrap_or(0);
        let most = self.cliques.values().map(|c| Self::usable_for(c, size)).max().unwrap_or(0);
        match size {
            Some(g) if most < largest => format!(
                "no clique has more than {most} usable trays of {g} GPUs (wholeTray: Require: a pod of {g} GPUs takes a whole tray of exactly {g})"
            ),
            _ => format!("the largest clique has {largest} usable trays"),
        }
    }

    /// Trays of clique `c` a pod of `domain` could take now, counting only trays of `size` GPUs
    /// when given.
    pub(crate) fn available(&self, c: &Clique, domain: StrId, size: Option<u32>) -> u32 {
        let sum = |m: &BTreeMap<u32, u32>| match size {
            Some(s) => m.get(&s).copied().unwrap_or(0),
            None => m.values().sum(),
        };
        let sum_for = |m: &BTreeMap<(StrId, u32), u32>| match size {
            Some(s) => m.get(&(domain, s)).copied().unwrap_or(0),
            None => m.range((domain, 0)..=(domain, u32::MAX)).map(|(_, v)| *v).sum(),
        };
        match self.args.imex_mode {
            ImexMode::DriverManaged => sum(&c.free) + sum_for(&c.held_idle),
            ImexMode::HostManaged => sum(&c.idle) - sum_for(&c.idle_with_workload),
        }
    }
}
