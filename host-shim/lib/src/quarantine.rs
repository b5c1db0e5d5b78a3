//! Objects whose facts trap the guest. When applying a batch of deltas traps, the pool applies
//! a fresh snapshot one delta at a time on a new instance to find the first object that traps
//! it alone; that object is dropped from the view (quarantined) and reported, and the policy
//! goes on deciding on the rest. A quarantined object stays out of the view until its next
//! update or deletion: the Go adapter sends an object again only when its facts changed, so the
//! same bad object is not applied again and again.

use std::collections::HashSet;

use serde::Serialize;

use crate::extract::{Kind, Object};
use crate::facts::Record;
use crate::interner::Interner;
use crate::wit::Delta;

/// An object quarantined because applying its facts trapped the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Quarantined {
    /// `Node`, `Pod`, `ResourceClaim`, `ResourceClaimTemplate`, `ComputeDomain`, `PodGroup` or
    /// `Owner` (a workload's size).
    pub kind: &'static str,
    /// Empty for cluster-scoped kinds and owners.
    pub namespace: String,
    /// The object's name (an owner's key).
    pub name: String,
    /// The guest's failure, with its causes.
    pub error: String,
}

/// The object a delta upserts, as `(kind, namespace, name)`; None for deltas that upsert none.
pub(crate) fn object_of(d: &Delta, strings: &Interner) -> Option<(Kind, String, String)> {
    let text = |id: u32| strings.text(id).to_string();
    let split = |key: &str| match key.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (String::new(), key.to_string()),
    };
    Some(match d {
        Delta::UpsertNode(n) => (Kind::Node, String::new(), text(n.name)),
        Delta::UpsertPod(p) => {
            let (ns, name) = split(strings.text(p.key));
            (Kind::Pod, ns, name)
        }
        Delta::UpsertClaim(c) => (Kind::ResourceClaim, text(c.namespace), text(c.name)),
        Delta::UpsertTemplate(t) => (Kind::ResourceClaimTemplate, text(t.namespace), text(t.name)),
        Delta::UpsertDomain(d) => (Kind::ComputeDomain, text(d.namespace), text(d.name)),
        Delta::UpsertOwner(o) => {
            let key = strings.text(o.key);
            match key.strip_prefix("PodGroup/") {
                Some(rest) => {
                    let (ns, name) = split(rest);
                    (Kind::PodGroup, ns, name)
                }
                None => (Kind::Owner, String::new(), key.to_string()),
            }
        }
        _ => return None,
    })
}

/// An object's namespace (empty for cluster-scoped kinds and owners) and name (an owner's key).
fn namespace_name(o: &Object) -> (&str, &str) {
    match o {
        Object::Node { name, .. } | Object::Slice { name, .. } => ("", name),
        Object::Pod { namespace, name, .. }
        | Object::Claim { namespace, name, .. }
        | Object::Template { namespace, name, .. }
        | Object::Domain { namespace, name, .. }
        | Object::PodGroup { namespace, name, .. } => (namespace, name),
        Object::Owner { key, .. } => ("", key),
    }
}

/// The quarantined objects and the ones not yet reported.
#[derive(Debug, Default)]
pub(crate) struct Quarantine {
    held: HashSet<(Kind, String, String)>,
    unreported: Vec<Quarantined>,
}

impl Quarantine {
    /// Holds an object out of the view and queues its report.
    pub fn hold(&mut self, kind: Kind, namespace: String, name: String, error: String) {
        self.unreported.push(Quarantined {
            kind: kind.as_str(),
            namespace: namespace.clone(),
            name: name.clone(),
            error,
        });
        self.held.insert((kind, namespace, name));
    }

    /// Lifts the quarantine of the object a record names (its update or deletion is a change).
    pub fn lift(&mut self, r: &Record) {
        if self.held.is_empty() {
            return;
        }
        let key = match r {
            Record::Upsert(o) => {
                let (ns, name) = namespace_name(o);
                (o.kind(), ns.to_string(), name.to_string())
            }
            Record::Remove { kind, namespace, name } => (*kind, namespace.clone(), name.clone()),
        };
        if self.held.remove(&key) {
            tracing::info!(kind = key.0.as_str(), namespace = %key.1, name = %key.2, "cdplace: quarantined object changed; applied again");
        }
    }

    /// How many objects are held out now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// The objects quarantined since the last call.
    pub fn take_unreported(&mut self) -> Vec<Quarantined> {
        std::mem::take(&mut self.unreported)
    }
}
