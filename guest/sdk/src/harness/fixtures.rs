//! Fixtures: builders for Kubernetes objects shaped as the API server and the NVIDIA DRA driver
//! write them (Nodes with a clique label, ComputeDomains with their channel templates, pods of a
//! domain, ...), to feed a [`super::Harness`] or any host cluster.

use std::format;
use std::string::{String, ToString};
use std::vec;
use std::vec::Vec;

use serde_json::{Value, json};

pub const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";
pub const CLUSTER: &str = "0f8e7d6c-5b4a-4321-9876-abcdef012345";

/// `<cluster UUID>.<clique id>`.
pub fn clique(id: u32) -> String {
    format!("{CLUSTER}.{id}")
}

pub fn node(name: &str, clique: Option<&str>, gpus: u32) -> Value {
    let mut labels = serde_json::Map::new();
    if let Some(c) = clique {
        labels.insert(CLIQUE_LABEL.into(), json!(c));
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"allocatable": {"cpu": "72", "memory": "480Gi", "nvidia.com/gpu": gpus.to_string()}}
    })
}

/// Sets a label on an object.
pub fn label(mut obj: Value, key: &str, value: &str) -> Value {
    obj["metadata"]["labels"][key] = json!(value);
    obj
}

pub fn annotate(mut obj: Value, key: &str, value: &str) -> Value {
    obj["metadata"]["annotations"][key] = json!(value);
    obj
}

pub fn cordon(mut n: Value) -> Value {
    n["spec"]["unschedulable"] = json!(true);
    n
}

/// A ComputeDomain; its workload template is `<name>-channel`.
pub fn compute_domain(ns: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": ns, "uid": uid},
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": format!("{name}-channel")}, "allocationMode": "Single"}}
    })
}

fn channel_spec(uid: &str) -> Value {
    json!({
        "devices": {
            "requests": [{"name": "channel", "exactly": {"deviceClassName": "compute-domain-default-channel.nvidia.com"}}],
            "config": [{"requests": ["channel"], "opaque": {"driver": "compute-domain.nvidia.com", "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                "domainID": uid, "allocationMode": "Single"}}}]
        }
    })
}

/// The workload ResourceClaimTemplate the NVIDIA controller creates for a ComputeDomain.
pub fn channel_template(ns: &str, cd_name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": format!("{cd_name}-channel"), "namespace": ns, "labels": {
            "resource.nvidia.com/computeDomain": uid,
            "resource.nvidia.com/computeDomainTarget": "Workload"}},
        "spec": {"spec": channel_spec(uid)}
    })
}

/// A ResourceClaim with a ComputeDomain channel config (generated or shared).
pub fn channel_claim(ns: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": channel_spec(uid)
    })
}

/// A ResourceClaimTemplate for GPUs through DRA.
pub fn gpu_template(ns: &str, name: &str, exactly: Value) -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}}
    })
}

/// A ResourceSlice of the GPU driver with `gpus` GPU devices on a node.
pub fn gpu_slice(node: &str, gpus: u32) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA GB200"}}}))
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpu.nvidia.com")},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}
    })
}

/// A pod asking `gpus` GPUs through the extended resource and, when `template` is given, a
/// claim from that template.
pub fn pod(ns: &str, name: &str, template: Option<&str>, gpus: u32) -> Value {
    let claims: Vec<Value> =
        template.iter().map(|t| json!({"name": "channel", "resourceClaimTemplateName": t})).collect();
    let mut resources = json!({});
    if gpus > 0 {
        resources =
            json!({"limits": {"nvidia.com/gpu": gpus.to_string()}, "requests": {"nvidia.com/gpu": gpus.to_string()}});
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}")},
        "spec": {
            "schedulerName": "computedomain-scheduler",
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3", "resources": resources,
                "command": ["sleep", "infinity"]}],
            "resourceClaims": claims
        },
        "status": {"phase": "Pending"}
    })
}

/// A pod of ComputeDomain `cd` (its template `<cd>-channel`) taking a whole 4-GPU tray.
pub fn cd_pod(ns: &str, cd: &str, name: &str) -> Value {
    pod(ns, name, Some(&format!("{cd}-channel")), 4)
}

pub fn bound(mut p: Value, node: &str) -> Value {
    p["spec"]["nodeName"] = json!(node);
    p["status"]["phase"] = json!("Running");
    p
}

pub fn nominated(mut p: Value, node: &str) -> Value {
    p["status"]["nominatedNodeName"] = json!(node);
    p
}

/// 18 trays of 4 GPUs named `<prefix>-<i>` in clique `id`.
pub fn rack(prefix: &str, id: u32, trays: u32) -> Vec<Value> {
    (0..trays).map(|i| node(&format!("{prefix}-{i:02}"), Some(&clique(id)), 4)).collect()
}

/// A ComputeDomain with its template.
pub fn domain(ns: &str, name: &str, uid: &str) -> Vec<Value> {
    vec![compute_domain(ns, name, uid), channel_template(ns, name, uid)]
}
