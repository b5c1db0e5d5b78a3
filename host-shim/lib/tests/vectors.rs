//! The shared extraction vectors of the Go adapter (`host-shim/go/internal/facts/testdata/
//! vectors.yaml`): the facts the scheduler's Go extractor sends packed must be the facts this
//! crate's extractor reads from the same object (what `cdplace explain` runs), error texts
//! included. A pod's owner is resolved by the Go adapter only, so it is not compared.

use std::path::Path;

use cdplace_host::extract::{self, PodClaim};
use cdplace_host::{Cluster, GpuDemand, Object};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    name: String,
    object: Value,
    facts: Option<Facts>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", rename_all_fields = "camelCase")]
enum Facts {
    Node {
        name: String,
        clique_label: Option<String>,
        domain_label: Option<String>,
        unschedulable: bool,
        gpus: u32,
    },
    Pod {
        namespace: String,
        name: String,
        terminal: bool,
        node_name: Option<String>,
        nominated_node_name: Option<String>,
        #[serde(default)]
        claims: Vec<Claim>,
        gpus: u32,
        size_hint: Option<u32>,
        pod_group: Option<String>,
        #[allow(dead_code)]
        owner: Option<String>,
        created_ms: i64,
        priority: i32,
        runtime_limit_ms: Option<i64>,
        started_ms: i64,
    },
    Claim {
        namespace: String,
        name: String,
        domain: Option<String>,
        daemon: bool,
        gpus: Demand,
        allocated_gpus: Option<u32>,
    },
    Template {
        namespace: String,
        name: String,
        domain: Option<String>,
        daemon: bool,
        gpus: Demand,
    },
    Slice {
        name: String,
        node: Option<String>,
        gpus: u32,
        pool: String,
        generation: i64,
    },
    Domain {
        namespace: String,
        name: String,
        uid: String,
        size_hint: Option<u32>,
        num_nodes: Option<u32>,
    },
    PodGroup {
        namespace: String,
        name: String,
        min_count: Option<u32>,
        priority: Option<i32>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Claim {
    name: String,
    template: Option<String>,
    claim: Option<String>,
    generated: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Demand {
    count: u32,
    all: bool,
}

impl From<Demand> for GpuDemand {
    fn from(d: Demand) -> Self {
        GpuDemand { count: d.count, all: d.all }
    }
}

impl From<Facts> for Object {
    fn from(f: Facts) -> Self {
        match f {
            Facts::Node { name, clique_label, domain_label, unschedulable, gpus } => {
                Object::Node { name, clique_label, domain_label, unschedulable, gpus }
            }
            Facts::Pod {
                namespace,
                name,
                terminal,
                node_name,
                nominated_node_name,
                claims,
                gpus,
                size_hint,
                pod_group,
                owner: _,
                created_ms,
                priority,
                runtime_limit_ms,
                started_ms,
            } => Object::Pod {
                namespace,
                name,
                terminal,
                node_name,
                nominated_node_name,
                claims: claims
                    .into_iter()
                    .map(|c| PodClaim { name: c.name, template: c.template, claim: c.claim, generated: c.generated })
                    .collect(),
                gpus,
                size_hint,
                pod_group,
                owner: None,
                created_ms,
                priority,
                runtime_limit_ms,
                started_ms,
            },
            Facts::Claim { namespace, name, domain, daemon, gpus, allocated_gpus } => {
                Object::Claim { namespace, name, domain, daemon, gpus: gpus.into(), allocated_gpus }
            }
            Facts::Template { namespace, name, domain, daemon, gpus } => {
                Object::Template { namespace, name, domain, daemon, gpus: gpus.into() }
            }
            Facts::Slice { name, node, gpus, pool, generation } => Object::Slice { name, node, gpus, pool, generation },
            Facts::Domain { namespace, name, uid, size_hint, num_nodes } => {
                Object::Domain { namespace, name, uid, size_hint, num_nodes }
            }
            Facts::PodGroup { namespace, name, min_count, priority } => {
                Object::PodGroup { namespace, name, min_count, priority }
            }
        }
    }
}

#[test]
fn the_rust_extractor_reads_the_go_adapters_vectors_alike() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../go/internal/facts/testdata/vectors.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Through JSON values: the facts are a one-key map, an externally tagged enum in JSON terms.
    let raw: Value = serde_yaml_ng::from_str(&text).expect("vectors are YAML");
    let vectors: Vec<Vector> = serde_json::from_value(raw).expect("vectors have the documented shape");
    assert!(vectors.len() >= 10, "only {} vectors", vectors.len());
    // The default plugin arguments' names, as the vectors assume.
    let settings = Cluster::new(cdplace_testkit::native::backend(), "").unwrap().settings().clone();
    let mut failures = Vec::new();
    for v in vectors {
        let got = extract::extract(&v.object, &settings);
        let ok = match (&v.facts, &v.error, &got) {
            (Some(_), None, Ok(Some(o))) => {
                let want = Object::from(v.facts.expect("facts"));
                (want == *o).then_some(()).ok_or_else(|| format!("want {want:?}\n  got {o:?}"))
            }
            (None, Some(want), Err(e)) => {
                (*want == e.to_string()).then_some(()).ok_or_else(|| format!("want error {want:?}\n  got {e}"))
            }
            _ => Err(format!("want facts {:?} / error {:?}, got {got:?}", v.facts, v.error)),
        };
        if let Err(why) = ok {
            failures.push(format!("{}: {why}", v.name));
        }
    }
    assert!(failures.is_empty(), "{} vector(s) differ:\n{}", failures.len(), failures.join("\n"));
}
