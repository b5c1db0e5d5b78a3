//! The safety rules, checked on one answer against a fixture's model of the trays. The rules are
//! the host's (`host-shim/lib/src/safety.rs`, same names): for a workload pod of ComputeDomain D,
//! a node the answer allows must not
//! - `one-domain-per-node`: hold another ComputeDomain: a pod of it bound or nominated there, or
//!   the driver's `resource.nvidia.com/computeDomain` label naming it (it lingers until
//!   Unprepare);
//! - `one-workload-per-node`: already hold another workload pod of D;
//! - `one-clique-per-domain`: lie outside the clique(s) where D's pods are bound.
//!
//! Once the host checks every answer itself (the call then fails with
//! `Error::PolicyViolation`), [`violations`] is the one function to point at that check: the
//! conformance suite calls nothing else for this part.

use cdplace_host::{Code, Decision};

use super::fixtures::Fixture;

/// Every rule broken by `decision`, the answer for the pending pod `(ns, name)` of domain `uid`
/// in fixture `f`, as `rule: node: why` lines (empty when none).
pub fn violations(f: &Fixture, (ns, name, uid): (&str, &str, &str), decision: &Decision) -> Vec<String> {
    let mut out = Vec::new();
    let others = f.placed.iter().filter(|p| !(p.namespace == ns && p.name == name));
    let home: Vec<&str> = others
        .clone()
        .filter(|p| p.domain == uid && p.bound)
        .filter_map(|p| f.trays.get(&p.node)?.clique.as_deref())
        .collect();
    for (node, tray) in &f.trays {
        if !allows(decision, node, tray.clique.as_deref()) {
            continue;
        }
        let here = || others.clone().filter(|p| &p.node == node);
        if let Some(p) = here().find(|p| p.domain != uid) {
            out.push(format!(
                "one-domain-per-node: {node}: holds pod {}/{} of ComputeDomain {}",
                p.namespace, p.name, p.domain
            ));
        } else if let Some(l) = tray.domain_label.as_deref().filter(|l| *l != uid) {
            out.push(format!("one-domain-per-node: {node}: the driver's label names ComputeDomain {l}"));
        }
        if let Some(p) = here().find(|p| p.domain == uid) {
            out.push(format!(
                "one-workload-per-node: {node}: already holds {}/{} of the same domain",
                p.namespace, p.name
            ));
        }
        if !home.is_empty() && !tray.clique.as_deref().is_some_and(|c| home.contains(&c)) {
            out.push(format!(
                "one-clique-per-domain: {node}: clique {} but the domain runs in {}",
                tray.clique.as_deref().unwrap_or("(none)"),
                home[0]
            ));
        }
    }
    out
}

/// Whether the scheduler may bind the pod to the node on this answer: inside the PreFilterResult
/// node set, and Filter passes (`Skip`: the plugin has nothing to say, every node passes).
fn allows(d: &Decision, node: &str, clique: Option<&str>) -> bool {
    if d.status.code == Code::Skip {
        return true;
    }
    if d.node_set.as_ref().is_some_and(|s| s.binary_search_by(|n| n.as_str().cmp(node)).is_err()) {
        return false;
    }
    matches!(d.node(node, clique).0.code, Code::Success | Code::Skip)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cdplace_host::decision::Status;

    use super::super::fixtures::{Placed, Tray};
    use super::*;

    fn status(code: Code) -> Status {
        Status { code, reason: String::new() }
    }

    fn allow_all() -> Decision {
        Decision {
            status: status(Code::Success),
            domain: Some("d".into()),
            exclusive: false,
            cliques: BTreeMap::new(),
            other: status(Code::Success),
            other_score: 0,
            stable: Default::default(),
            nodes: BTreeMap::new(),
            node_set: None,
        }
    }

    fn fixture() -> Fixture {
        let tray = |c: &str, l: Option<&str>| Tray { clique: Some(c.into()), domain_label: l.map(Into::into) };
        let placed = |name: &str, domain: &str, node: &str| Placed {
            namespace: "ml".into(),
            name: name.into(),
            domain: domain.into(),
            node: node.into(),
            bound: true,
        };
        Fixture {
            name: "t",
            trays: [
                ("n1".to_string(), tray("c.1", None)),
                ("n2".to_string(), tray("c.1", Some("gone"))),
                ("n3".to_string(), tray("c.1", None)),
                ("n4".to_string(), tray("c.2", None)),
                ("n5".to_string(), tray("c.1", None)),
            ]
            .into(),
            placed: vec![placed("o0", "other", "n1"), placed("d0", "d", "n3")],
            ..Default::default()
        }
    }

    /// Allowing every node breaks each rule once, on the node that shows it; refusing those
    /// nodes (Filter, or the node set) breaks none.
    #[test]
    fn each_rule_is_found_on_its_node_and_refusals_pass() {
        let f = fixture();
        let v = violations(&f, ("ml", "d1", "d"), &allow_all());
        assert_eq!(
            v,
            [
                "one-domain-per-node: n1: holds pod ml/o0 of ComputeDomain other",
                "one-domain-per-node: n2: the driver's label names ComputeDomain gone",
                "one-workload-per-node: n3: already holds ml/d0 of the same domain",
                "one-clique-per-domain: n4: clique c.2 but the domain runs in c.1",
            ]
        );
        let mut d = allow_all();
        for n in ["n1", "n2", "n3"] {
            d.nodes.insert(n.into(), status(Code::Unschedulable));
        }
        d.cliques.insert("c.2".into(), (status(Code::UnschedulableAndUnresolvable), 0));
        assert_eq!(violations(&f, ("ml", "d1", "d"), &d), Vec::<String>::new());
        let mut d = allow_all();
        d.node_set = Some(vec!["n5".into()]);
        assert_eq!(violations(&f, ("ml", "d1", "d"), &d), Vec::<String>::new());
        // Skip lets every node through.
        let mut d = allow_all();
        d.status = status(Code::Skip);
        d.other = status(Code::Unschedulable);
        assert_eq!(violations(&f, ("ml", "d1", "d"), &d).len(), 4);
    }
}
