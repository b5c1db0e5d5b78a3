//! `cdplace status -o json|yaml`: the map as a document, `kind: FleetStatus` under
//! `apiVersion: cdplace.nvidia.com/v1alpha1` ([`crate::output`]).
//!
//! ```yaml
//! apiVersion: cdplace.nvidia.com/v1alpha1
//! kind: FleetStatus
//! namespace: team            # whose domains are listed; null with -A
//! summary: {trays: 144, cliques: 8, freeTrays: 111, cordonedTrays: 1, computeDomains: 4,
//!           pendingComputeDomains: 1, otherNamespaceComputeDomains: 0, otherNodes: 1}
//! cliques:                   # labelled cliques by label value, then trays without one (clique: null)
//! - clique: 0f8e7d6c-....1
//!   trays:                   # by name, digits compared as numbers
//!   - node: r1-00
//!     cordoned: false
//!     holder: ComputeDomain  # Free | ComputeDomain | UnknownComputeDomain | PodWithoutComputeDomain
//!     hold: Pods             # Pods | Nominated | Label (only when held by a domain)
//!     computeDomain: {namespace: team, name: alpha, uid: uid-alpha}   # when held by a domain
//! computeDomains:            # the listed namespace's (every namespace's with -A), by namespace/name
//! - {namespace: team, name: alpha, uid: uid-alpha, letter: A, state: Placed, pods: 10,
//!    placed: 10, pending: 0, trays: 11, wait: null}
//! - ...                      # wait, for a pending domain: {pod, code, reason, size, sizeSource}
//! ```

use serde::Serialize;

use super::{DomainEntry, Fleet, Hold, Holder, Tray};

/// The `kind` of the document.
pub const KIND: &str = "FleetStatus";

/// The whole document (without `apiVersion` and `kind`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetStatus {
    /// The namespace whose ComputeDomains are listed; `None` (null): every namespace.
    pub namespace: Option<String>,
    pub summary: Summary,
    pub cliques: Vec<Clique>,
    pub compute_domains: Vec<Domain>,
}

/// The counts of the text map's first two lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub trays: usize,
    /// NVLink cliques with a label (trays without one are not counted).
    pub cliques: usize,
    /// Trays neither held nor cordoned.
    pub free_trays: usize,
    pub cordoned_trays: usize,
    /// Listed ComputeDomains, and of those, the ones with a pending pod.
    pub compute_domains: usize,
    pub pending_compute_domains: usize,
    /// ComputeDomains on the map that are not listed (another namespace).
    pub other_namespace_compute_domains: usize,
    /// Nodes that are not trays (no clique label, no GPUs), not on the map.
    pub other_nodes: u32,
}

/// One clique's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Clique {
    /// The clique label value; `None` (null) for the trays without one.
    pub clique: Option<String>,
    pub trays: Vec<TrayDoc>,
}

/// A ComputeDomain by namespace, name and UID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DomainRef {
    pub namespace: Option<String>,
    /// `None` (null) when the cluster has no ComputeDomain with this UID.
    pub name: Option<String>,
    pub uid: String,
}

/// One tray.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TrayDoc {
    pub node: String,
    pub cordoned: bool,
    /// `Free`, `ComputeDomain`, `UnknownComputeDomain` (the node's domain label names a UID the
    /// cluster does not have) or `PodWithoutComputeDomain` (a pod that requests GPUs runs there).
    pub holder: &'static str,
    /// How the domain holds it: `Pods` (a pod bound or assumed), `Nominated` (by preemption) or
    /// `Label` (the node's domain label only); absent when no domain holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compute_domain: Option<DomainRef>,
}

/// A listed ComputeDomain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Domain {
    pub namespace: String,
    /// `None` (null) when the cluster has no ComputeDomain with this UID (its pods name it).
    pub name: Option<String>,
    pub uid: String,
    /// Its letter on the text map.
    pub letter: String,
    /// `Placed` (every pod placed), `Nominated` (none pending, one nominated) or `Pending`.
    pub state: &'static str,
    /// Its non-terminal workload pods; of those, placed (bound or assumed) and pending.
    pub pods: u32,
    pub placed: u32,
    pub pending: u32,
    /// Trays it holds on the map.
    pub trays: u32,
    /// Why it waits, for a domain with a pending pod.
    pub wait: Option<WaitDoc>,
}

/// The first pending pod's PreFilter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitDoc {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The framework code (`Success` when PreFilter admits it now).
    pub code: &'static str,
    pub reason: String,
    /// The domain's size and where it comes from, from the reason's `(size N from ...)`.
    pub size: Option<u32>,
    pub size_source: Option<String>,
}

impl DomainEntry {
    /// `Placed`, `Nominated` or `Pending`.
    pub fn state(&self) -> &'static str {
        if self.pending > 0 {
            "Pending"
        } else if self.placed < self.pods {
            "Nominated"
        } else {
            "Placed"
        }
    }

    fn reference(&self) -> DomainRef {
        DomainRef { namespace: Some(self.namespace.clone()), name: self.object_name.clone(), uid: self.uid.clone() }
    }
}

impl Fleet {
    /// The document `-o json|yaml` writes.
    pub fn doc(&self) -> FleetStatus {
        let trays = || self.cliques.iter().flat_map(|c| &c.trays);
        let listed: Vec<&DomainEntry> = self.listed().collect();
        FleetStatus {
            namespace: self.namespace.clone(),
            summary: Summary {
                trays: trays().count(),
                cliques: self.cliques.iter().filter(|c| c.clique.is_some()).count(),
                free_trays: trays().filter(|t| t.holder == Holder::Free && !t.cordoned).count(),
                cordoned_trays: trays().filter(|t| t.cordoned).count(),
                compute_domains: listed.len(),
                pending_compute_domains: listed.iter().filter(|d| d.pending > 0).count(),
                other_namespace_compute_domains: self.domains.len() - listed.len(),
                other_nodes: self.other_nodes,
            },
            cliques: self
                .cliques
                .iter()
                .map(|c| Clique { clique: c.clique.clone(), trays: c.trays.iter().map(|t| self.tray(t)).collect() })
                .collect(),
            compute_domains: listed
                .into_iter()
                .map(|d| Domain {
                    namespace: d.namespace.clone(),
                    name: d.object_name.clone(),
                    uid: d.uid.clone(),
                    letter: d.letter.to_string(),
                    state: d.state(),
                    pods: d.pods,
                    placed: d.placed,
                    pending: d.pending,
                    trays: d.trays,
                    wait: d.wait.as_ref().map(|w| WaitDoc {
                        pod: w.pod.clone(),
                        code: w.code.as_str(),
                        reason: w.reason.clone(),
                        size: w.size.as_ref().map(|s| s.0),
                        size_source: w.size.as_ref().map(|s| s.1.clone()),
                    }),
                })
                .collect(),
        }
    }

    fn tray(&self, t: &Tray) -> TrayDoc {
        let hold = match t.hold {
            Hold::Pods => "Pods",
            Hold::Nominated => "Nominated",
            Hold::Label => "Label",
        };
        let (holder, hold, compute_domain) = match &t.holder {
            Holder::Free => ("Free", None, None),
            Holder::Plain => ("PodWithoutComputeDomain", None, None),
            Holder::Domain(i) => ("ComputeDomain", Some(hold), Some(self.domains[*i].reference())),
            Holder::Unknown(uid) => {
                ("UnknownComputeDomain", Some(hold), Some(DomainRef { namespace: None, name: None, uid: uid.clone() }))
            }
        };
        TrayDoc { node: t.node.clone(), cordoned: t.cordoned, holder, hold, compute_domain }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::tests::{fleet_objects, map_in};
    use super::super::{Fleet, Format};

    fn parsed(f: &Fleet) -> Value {
        let from_json: Value = serde_json::from_str(&f.render(Format::Json)).expect("JSON");
        let from_yaml: Value = serde_yaml_ng::from_str(&f.render(Format::Yaml)).expect("YAML");
        assert_eq!(from_json, from_yaml, "JSON and YAML must be the same document");
        from_json
    }

    #[test]
    fn the_fleet_as_a_versioned_document() {
        let doc = parsed(&map_in(fleet_objects(), None));
        assert_eq!(doc["apiVersion"], "cdplace.nvidia.com/v1alpha1");
        assert_eq!(doc["kind"], "FleetStatus");
        assert_eq!(doc["namespace"], Value::Null);
        assert_eq!(
            doc["summary"],
            json!({"trays": 144, "cliques": 8, "freeTrays": 111, "cordonedTrays": 1, "computeDomains": 4,
                   "pendingComputeDomains": 1, "otherNamespaceComputeDomains": 0, "otherNodes": 1})
        );
        let cliques = doc["cliques"].as_array().unwrap();
        assert_eq!(cliques.len(), 8);
        let r1 = &cliques[0]["trays"];
        assert_eq!(
            r1[0],
            json!({"node": "r1-00", "cordoned": false, "holder": "ComputeDomain", "hold": "Pods",
                   "computeDomain": {"namespace": "team", "name": "alpha", "uid": "uid-alpha"}})
        );
        assert_eq!(r1[17], json!({"node": "r1-17", "cordoned": false, "holder": "Free"}));
        assert_eq!(cliques[2]["trays"][5]["cordoned"], true);
        assert_eq!(cliques[2]["trays"][6]["hold"], "Label");
        assert_eq!(cliques[3]["trays"][0]["holder"], "UnknownComputeDomain");
        assert_eq!(
            cliques[3]["trays"][0]["computeDomain"],
            json!({"namespace": null, "name": null, "uid": "uid-gone"})
        );
        assert_eq!(cliques[4]["trays"][0]["holder"], "PodWithoutComputeDomain");
        assert_eq!(cliques[5]["trays"][0]["hold"], "Nominated");
        let domains = doc["computeDomains"].as_array().unwrap();
        let names: Vec<&str> = domains.iter().map(|d| d["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["alpha", "beta", "delta", "gamma"]);
        assert_eq!(
            domains[0],
            json!({"namespace": "team", "name": "alpha", "uid": "uid-alpha", "letter": "A", "state": "Placed",
                   "pods": 10, "placed": 10, "pending": 0, "trays": 11, "wait": null})
        );
        assert_eq!(domains[2]["state"], "Nominated");
        let gamma = &domains[3];
        assert_eq!(gamma["state"], "Pending");
        assert_eq!(gamma["wait"]["pod"], "team/gamma-0");
        assert_eq!(gamma["wait"]["code"], "UnschedulableAndUnresolvable");
        assert_eq!(gamma["wait"]["size"], 200);
        assert_eq!(gamma["wait"]["sizeSource"], "Job team/big spec.parallelism");
        assert!(gamma["wait"]["reason"].as_str().unwrap().contains(
            "needs 200 trays (size 200 from Job team/big spec.parallelism), more than one NVLink clique holds"
        ));
    }

    #[test]
    fn another_namespace_lists_none_of_these_domains_but_draws_their_trays() {
        let f = map_in(fleet_objects(), Some("elsewhere"));
        let doc = parsed(&f);
        assert_eq!(doc["namespace"], "elsewhere");
        assert_eq!(doc["computeDomains"], json!([]));
        assert_eq!(doc["summary"]["computeDomains"], 0);
        assert_eq!(doc["summary"]["otherNamespaceComputeDomains"], 4);
        assert_eq!(doc["cliques"][0]["trays"][0]["computeDomain"]["name"], "alpha");
        let text = f.render(Format::Text);
        assert!(
            text.contains(
                "namespace elsewhere: 0 ComputeDomain(s), 0 pending; 4 in other namespaces (o; -A lists them)"
            ),
            "{text}"
        );
        assert!(text.contains("  o  o  o  o  o  o  o  o  o  o  .  ."), "{text}");
        assert!(text.contains("  o  held by a ComputeDomain in another namespace"), "{text}");
        assert!(!text.contains("team/alpha"), "{text}");
        assert!(!text.contains("Pending ComputeDomains"), "{text}");
        // The listed namespace: the same map as with every namespace.
        let team = map_in(fleet_objects(), Some("team"));
        let all = map_in(fleet_objects(), None);
        assert_eq!(team.doc().compute_domains, all.doc().compute_domains);
        assert_eq!(team.doc().cliques, all.doc().cliques);
    }

    #[test]
    fn wide_gives_full_cliques_and_each_domains_trays() {
        let text = map_in(fleet_objects(), None).render(Format::Wide);
        assert!(text.contains(&format!("\n{}  A  A", cdplace_testkit::builders::clique(1))), "{text}");
        assert!(text.contains("     UID uid-alpha; trays: r1-00 r1-01 r1-02"), "{text}");
        assert!(text.contains("r1-09 r3-06\n"), "{text}");
        assert!(text.contains("     UID uid-gamma; trays: -\n"), "{text}");
    }
}
