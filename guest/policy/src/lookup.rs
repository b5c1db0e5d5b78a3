//! Read-only lookups into the [`View`] for policies that wrap this one (`cdplace-policy-sdk`,
//! `guest/examples/team-racks`): the facts the host sent, by their key, and the clique a node
//! counts in. Nothing here decides; the aggregates stay private.

use crate::facts::{DomainFact, NodeFact, PodFact, StrId};
use crate::trays::{LabelKind, label_kind};
use crate::view::View;

impl View {
    /// The node with this name, as last upserted.
    pub fn node_fact(&self, name: StrId) -> Option<&NodeFact> {
        self.nodes.get(&name)?.fact.as_ref()
    }

    /// The pod with this key (`namespace/name`), as last upserted.
    pub fn pod_fact(&self, key: StrId) -> Option<&PodFact> {
        self.pods.get(&key).map(|p| &p.fact)
    }

    /// The ComputeDomain with this UID, as last upserted.
    pub fn domain_fact(&self, uid: StrId) -> Option<&DomainFact> {
        self.domain_facts.get(&uid)
    }

    /// The clique a node counts in: its clique label's value when that names a clique
    /// (`<cluster UUID>.<clique ID>`), none without a label, with an empty clique ID or a
    /// malformed one. The same id [`crate::CliqueVerdict::clique`] carries.
    pub fn clique_of(&self, node: StrId) -> Option<StrId> {
        let label = self.node_fact(node)?.clique_label?;
        (label_kind(self.str(label)) == LabelKind::Clique).then_some(label)
    }

    /// The nodes of one clique (label value id), in id order.
    pub fn clique_nodes(&self, clique: StrId) -> impl Iterator<Item = StrId> + '_ {
        self.cliques.get(&clique).into_iter().flat_map(|c| c.nodes.iter().copied())
    }

    /// Every clique with at least one node, in id order.
    pub fn clique_ids(&self) -> impl Iterator<Item = StrId> + '_ {
        self.cliques.keys().copied()
    }
}
