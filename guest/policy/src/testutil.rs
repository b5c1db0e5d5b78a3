//! A view built from facts by name, for the unit tests beside the code.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::facts::*;
use crate::{Args, Code, View};

pub(crate) const CLUSTER: &str = "0f8e7d6c-5b4a-4321-9876-abcdef012345";

/// A view and the strings interned for it.
pub(crate) struct Fx {
    pub v: View,
    ids: BTreeMap<String, StrId>,
    pods: BTreeMap<String, PodFact>,
}

impl Fx {
    pub fn new(args: &str) -> Self {
        let mut f = Fx { v: View::new(Args::parse(args).expect("args")), ids: BTreeMap::new(), pods: BTreeMap::new() };
        f.id("");
        f
    }

    /// The id of a string, sending it first when new.
    pub fn id(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.ids.len() as StrId;
        self.ids.insert(s.into(), id);
        self.v.apply([Delta::Strings(vec![(id, s.into())])]).expect("strings");
        id
    }

    /// `trays` 4-GPU trays `<prefix>-00..` in clique `clique`.
    pub fn rack(&mut self, prefix: &str, clique: u32, trays: u32) {
        let label = self.id(&format!("{CLUSTER}.{clique}"));
        for i in 0..trays {
            let name = self.id(&format!("{prefix}-{i:02}"));
            let n = NodeFact { name, clique_label: Some(label), unschedulable: false, gpus: 4, domain_label: None };
            self.v.apply([Delta::UpsertNode(n)]).expect("node");
        }
    }

    /// A plain pod (no claims) bound to `node` using `gpus` GPUs at `priority`.
    pub fn plain(&mut self, ns: &str, name: &str, node: &str, gpus: u32, priority: i32) {
        let key = format!("{ns}/{name}");
        let p = PodFact {
            key: self.id(&key),
            namespace: self.id(ns),
            placement: Placement::Bound,
            node: Some(self.id(node)),
            claims: vec![],
            gpus,
            size_hint: None,
            pod_group: None,
            owner: None,
            created_ms: 0,
            priority,
            runtime_limit_ms: None,
            started_ms: 0,
        };
        self.pods.insert(key, p.clone());
        self.v.apply([Delta::UpsertPod(p)]).expect("pod");
    }

    /// Sets the driver's ComputeDomain label of a node of clique `clique` (4 GPUs).
    pub fn label_node(&mut self, node: &str, clique: u32, uid: &str) {
        let n = NodeFact {
            name: self.id(node),
            clique_label: Some(self.id(&format!("{CLUSTER}.{clique}"))),
            unschedulable: false,
            gpus: 4,
            domain_label: Some(self.id(uid)),
        };
        self.v.apply([Delta::UpsertNode(n)]).expect("node");
    }

    /// Sends a PodGroup owner with a size and priority.
    pub fn pod_group(&mut self, key: &str, size: u32, priority: i32) -> StrId {
        let o = OwnerFact { key: self.id(key), size, source: self.id("PodGroup minCount"), priority: Some(priority) };
        let k = o.key;
        self.v.apply([Delta::UpsertOwner(o)]).expect("owner");
        k
    }

    /// A ComputeDomain with its channel template `<name>-channel`.
    pub fn domain(&mut self, ns: &str, name: &str, uid: &str) {
        self.domain_with(ns, name, uid, None, None);
        let t = TemplateFact {
            namespace: self.id(ns),
            name: self.id(&format!("{name}-channel")),
            domain: Some(self.id(uid)),
            daemon: false,
            gpus: GpuDemand::default(),
        };
        self.v.apply([Delta::UpsertTemplate(t)]).expect("template");
    }

    /// Upserts the ComputeDomain object with a size annotation and `spec.numNodes`.
    pub fn domain_with(&mut self, ns: &str, name: &str, uid: &str, size_hint: Option<u32>, num_nodes: Option<u32>) {
        let d = DomainFact { uid: self.id(uid), namespace: self.id(ns), name: self.id(name), size_hint, num_nodes };
        self.v.apply([Delta::UpsertDomain(d)]).expect("domain");
    }

    /// A pending whole-tray pod of ComputeDomain `cd`, changed by `edit` before it is sent.
    pub fn pod(&mut self, ns: &str, name: &str, cd: &str, edit: impl FnOnce(&mut PodFact)) {
        let key = format!("{ns}/{name}");
        let mut p = PodFact {
            key: self.id(&key),
            namespace: self.id(ns),
            placement: Placement::Pending,
            node: None,
            claims: vec![ClaimRef {
                name: self.id("channel"),
                template: Some(self.id(&format!("{cd}-channel"))),
                claim: None,
                generated: None,
            }],
            gpus: 4,
            size_hint: None,
            pod_group: None,
            owner: None,
            created_ms: 0,
            priority: 0,
            runtime_limit_ms: None,
            started_ms: 0,
        };
        edit(&mut p);
        self.pods.insert(key, p.clone());
        self.v.apply([Delta::UpsertPod(p)]).expect("pod");
    }

    /// Changes a pod sent before.
    pub fn update_pod(&mut self, ns: &str, name: &str, edit: impl FnOnce(&mut PodFact)) {
        let p = self.pods.get_mut(&format!("{ns}/{name}")).expect("pod sent before");
        edit(p);
        let p = p.clone();
        self.v.apply([Delta::UpsertPod(p)]).expect("pod");
    }

    /// Binds a pod sent before to a node.
    pub fn bind(&mut self, ns: &str, name: &str, node: &str) {
        let n = self.id(node);
        self.update_pod(ns, name, |p| {
            p.placement = Placement::Bound;
            p.node = Some(n);
        });
    }

    pub fn remove_pod(&mut self, ns: &str, name: &str) {
        let p = self.pods.remove(&format!("{ns}/{name}")).expect("pod sent before");
        self.v.apply([Delta::RemovePod(p.key)]).expect("remove");
    }

    /// Sends an owner's size; returns its key's id.
    pub fn owner(&mut self, key: &str, size: u32, source: &str) -> StrId {
        let o = OwnerFact { key: self.id(key), size, source: self.id(source), priority: None };
        let k = o.key;
        self.v.apply([Delta::UpsertOwner(o)]).expect("owner");
        k
    }

    /// PreFilter for `ns/name` at `now_ms`: the pod-level code and reason.
    pub fn decide(&mut self, ns: &str, name: &str, now_ms: i64) -> (Code, String) {
        let key = self.id(&format!("{ns}/{name}"));
        let r = self.v.pre_filter(key, &[], now_ms);
        (r.status.code, String::from(r.reason(r.status)))
    }
}

/// The clique label value of clique `id`.
pub(crate) fn clique(id: u32) -> String {
    format!("{CLUSTER}.{id}")
}

#[test]
fn a_fixture_domain_decides() {
    let mut f = Fx::new("");
    f.rack("a", 1, 2);
    f.domain("ns", "cd", "uid");
    f.pod("ns", "p", "cd", |_| {});
    assert_eq!(f.decide("ns", "p", 0), (Code::Success, String::new()));
    assert_eq!(clique(1), format!("{CLUSTER}.1"));
}
