//! Workload owners: which object a pod's domain takes its size from, and that size, read from
//! JSON objects the way the scheduler's Go adapter reads them from its informers
//! (`host-shim/go/internal/owners`): a Job's parallelism bounded by the completions still to go,
//! a StatefulSet's or ReplicaSet's replicas, a JobSet's replicated Jobs that claim devices, a
//! LeaderWorkerSet's groups. The host library's extraction leaves a pod's owner unset (in the
//! scheduler the adapter resolves it); the CLI fills it in here, so `cdplace explain` and
//! `cdplace status` give the size the scheduler gives for workloads written as users write them.
//!
//! An owner key is `<Kind>/<namespace>/<name>`, the form pod facts carry. Both copies of these
//! rules run the vectors in `host-shim/testdata/owner-sizes.json`.

use serde_json::Value;

/// Labels the JobSet and LeaderWorkerSet controllers put on their pods, naming the top-level owner.
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
pub const LEADER_WORKER_SET_NAME_LABEL: &str = "leaderworkerset.sigs.k8s.io/name";

/// A workload kind whose size is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnerKind {
    Job,
    StatefulSet,
    ReplicaSet,
    JobSet,
    LeaderWorkerSet,
}

/// Every owner kind.
pub const OWNER_KINDS: [OwnerKind; 5] =
    [OwnerKind::Job, OwnerKind::StatefulSet, OwnerKind::ReplicaSet, OwnerKind::JobSet, OwnerKind::LeaderWorkerSet];

impl OwnerKind {
    /// The kind for an object's `apiVersion` and `kind`.
    pub fn of(api_version: &str, kind: &str) -> Option<OwnerKind> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(match (group, kind) {
            ("batch", "Job") => OwnerKind::Job,
            ("apps", "StatefulSet") => OwnerKind::StatefulSet,
            ("apps", "ReplicaSet") => OwnerKind::ReplicaSet,
            ("jobset.x-k8s.io", "JobSet") => OwnerKind::JobSet,
            ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => OwnerKind::LeaderWorkerSet,
            _ => return None,
        })
    }

    /// The object's kind, as in owner keys.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::Job => "Job",
            OwnerKind::StatefulSet => "StatefulSet",
            OwnerKind::ReplicaSet => "ReplicaSet",
            OwnerKind::JobSet => "JobSet",
            OwnerKind::LeaderWorkerSet => "LeaderWorkerSet",
        }
    }

    /// Custom resources: their pods count toward them only while their API is served.
    pub fn is_custom(self) -> bool {
        matches!(self, OwnerKind::JobSet | OwnerKind::LeaderWorkerSet)
    }
}

/// An owner's size and where it was read, as the policy shows it in its reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSize {
    pub key: String,
    pub size: u32,
    /// `Job training/trainer spec.parallelism`.
    pub source: String,
}

fn key(kind: OwnerKind, namespace: &str, name: &str) -> String {
    cdplace_host::extract::owner_key(kind.as_str(), namespace, name)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The key of the top-level owner of a pod (JSON) whose size counts, or `None` for a bare pod
/// or a controller that is not read. The JobSet and LeaderWorkerSet labels win over the pod's
/// direct controller when `served` says that kind's API is served; otherwise the direct
/// controller counts (a Job, StatefulSet or ReplicaSet).
pub fn key_of(pod: &Value, served: impl Fn(OwnerKind) -> bool) -> Option<String> {
    let namespace = str_at(pod, "/metadata/namespace");
    let labels = pod.pointer("/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(name) = label(JOBSET_NAME_LABEL)
        && served(OwnerKind::JobSet)
    {
        return Some(key(OwnerKind::JobSet, namespace, name));
    }
    if let Some(name) = label(LEADER_WORKER_SET_NAME_LABEL)
        && served(OwnerKind::LeaderWorkerSet)
    {
        return Some(key(OwnerKind::LeaderWorkerSet, namespace, name));
    }
    let refs = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array)?;
    let controller = refs.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))?;
    let kind = OwnerKind::of(str_at(controller, "/apiVersion"), str_at(controller, "/kind"))?;
    let name = str_at(controller, "/name");
    (!kind.is_custom() && !name.is_empty()).then(|| key(kind, namespace, name))
}

fn clamp(n: i64) -> u32 {
    n.clamp(0, i64::from(u32::MAX)) as u32
}

/// An integer field (`default` when absent or null), or an error naming it. A whole number
/// written with a fraction (`2.0`) is an integer, as the scheduler's JSON decoding takes it.
fn int_at(v: &Value, pointer: &str, default: i64) -> Result<i64, String> {
    match v.pointer(pointer) {
        None | Some(Value::Null) => Ok(default),
        Some(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= (1u64 << 53) as f64).map(|f| f as i64))
            .ok_or_else(|| format!("{} must be an integer, got {n}", pointer[1..].replace('/', "."))),
    }
}

/// The size of a workload object (JSON) of kind `kind`, or an error saying which field is
/// malformed (the caller names the object).
pub fn size_of(kind: OwnerKind, v: &Value) -> Result<OwnerSize, String> {
    let ns = str_at(v, "/metadata/namespace");
    let name = str_at(v, "/metadata/name");
    if name.is_empty() || ns.is_empty() {
        return Err("metadata.namespace and metadata.name are required".into());
    }
    let k = kind.as_str();
    let fact = |size: i64, field: &str| OwnerSize {
        key: key(kind, ns, name),
        size: clamp(size),
        source: format!("{k} {ns}/{name} {field}"),
    };
    Ok(match kind {
        OwnerKind::Job => {
            let par = int_at(v, "/spec/parallelism", 1)?;
            match v.pointer("/spec/completions") {
                None | Some(Value::Null) => fact(par, "spec.parallelism"),
                Some(_) => {
                    let left = int_at(v, "/spec/completions", 1)? - int_at(v, "/status/succeeded", 0)?;
                    if left < par {
                        fact(left, "spec.completions - status.succeeded")
                    } else {
                        fact(par, "spec.parallelism")
                    }
                }
            }
        }
        OwnerKind::StatefulSet | OwnerKind::ReplicaSet => fact(int_at(v, "/spec/replicas", 1)?, "spec.replicas"),
        OwnerKind::JobSet => {
            let jobs = match v.pointer("/spec/replicatedJobs") {
                None | Some(Value::Null) => &Vec::new(),
                Some(Value::Array(a)) => a,
                Some(_) => return Err("spec.replicatedJobs must be an array".into()),
            };
            let mut total = 0i64;
            let mut counted = Vec::new();
            for (i, rj) in jobs.iter().enumerate() {
                if !rj.is_object() {
                    return Err(format!("spec.replicatedJobs[{i}] is not an object"));
                }
                // A replicated Job whose pods claim no devices (a leader without a channel) is
                // no member of the domain.
                let claims = rj.pointer("/template/spec/template/spec/resourceClaims").and_then(Value::as_array);
                if claims.is_none_or(Vec::is_empty) {
                    continue;
                }
                let at = |e: String| format!("spec.replicatedJobs[{i}]: {e}");
                let replicas = int_at(rj, "/replicas", 1).map_err(at)?;
                let par = int_at(rj, "/template/spec/parallelism", 1).map_err(at)?;
                total = total.saturating_add(replicas.saturating_mul(par));
                counted.push(format!("{} {replicas}×{par}", str_at(rj, "/name")));
            }
            fact(total, &format!("spec.replicatedJobs ({})", counted.join(" + ")))
        }
        OwnerKind::LeaderWorkerSet => {
            let replicas = int_at(v, "/spec/replicas", 1)?;
            let size = int_at(v, "/spec/leaderWorkerTemplate/size", 1)?;
            fact(replicas.saturating_mul(size), "spec.replicas × spec.leaderWorkerTemplate.size")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `host-shim/testdata/owner-sizes.json`, which the scheduler's copy of these rules
    /// (`host-shim/go/internal/owners`, `vectors_test.go`) runs too: `cdplace explain` and the
    /// scheduler give one size and one owner key.
    fn vectors() -> Value {
        serde_json::from_str(include_str!("../../testdata/owner-sizes.json")).expect("owner-sizes.json")
    }

    #[test]
    fn the_shared_size_vectors() {
        let v = vectors();
        let sizes = v["sizes"].as_array().expect("sizes");
        assert!(!sizes.is_empty());
        for tc in sizes {
            let name = tc["name"].as_str().unwrap();
            let obj = &tc["object"];
            let kind = OwnerKind::of(obj["apiVersion"].as_str().unwrap(), obj["kind"].as_str().unwrap()).expect(name);
            match (size_of(kind, obj), tc["error"].as_bool().unwrap_or(false)) {
                (Ok(s), true) => panic!("{name}: {s:?}; want an error"),
                (Err(e), false) => panic!("{name}: {e}"),
                (Err(_), true) => {}
                (Ok(s), false) => assert_eq!(
                    (s.key.as_str(), u64::from(s.size), s.source.as_str()),
                    (tc["key"].as_str().unwrap(), tc["size"].as_u64().unwrap(), tc["source"].as_str().unwrap()),
                    "{name}"
                ),
            }
        }
    }

    #[test]
    fn the_shared_key_vectors() {
        let v = vectors();
        let keys = v["keys"].as_array().expect("keys");
        assert!(!keys.is_empty());
        for tc in keys {
            let served: Vec<&str> = tc["served"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
            let got = key_of(&tc["pod"], |k| served.contains(&k.as_str()));
            assert_eq!(got.as_deref().unwrap_or(""), tc["key"].as_str().unwrap(), "{}", tc["name"]);
        }
    }

    fn pod(labels: Value, refs: Value) -> Value {
        json!({"metadata": {"namespace": "team", "name": "p", "labels": labels, "ownerReferences": refs}})
    }

    #[test]
    fn pods_name_their_top_level_owner() {
        let job = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "controller": true}]);
        assert_eq!(key_of(&pod(json!({}), job.clone()), |_| true).as_deref(), Some("Job/team/train"));
        // The JobSet label wins over the Job, but only while the JobSet API is served.
        let labelled = pod(json!({JOBSET_NAME_LABEL: "js"}), job.clone());
        assert_eq!(key_of(&labelled, |_| true).as_deref(), Some("JobSet/team/js"));
        assert_eq!(key_of(&labelled, |k| !k.is_custom()).as_deref(), Some("Job/team/train"));
        let lws = pod(json!({LEADER_WORKER_SET_NAME_LABEL: "g"}), json!([]));
        assert_eq!(key_of(&lws, |_| true).as_deref(), Some("LeaderWorkerSet/team/g"));
        // Not a controller, an unknown kind, a wrong group: no owner.
        let not_controller = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "x"}]);
        assert_eq!(key_of(&pod(json!({}), not_controller), |_| true), None);
        let daemonset = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "controller": true}]);
        assert_eq!(key_of(&pod(json!({}), daemonset), |_| true), None);
        let wrong_group = json!([{"apiVersion": "example.com/v1", "kind": "Job", "name": "j", "controller": true}]);
        assert_eq!(key_of(&pod(json!({}), wrong_group), |_| true), None);
        assert_eq!(key_of(&json!({"metadata": {"namespace": "team", "name": "bare"}}), |_| true), None);
    }

    fn meta(v: Value) -> Value {
        let mut v = v;
        v["metadata"] = json!({"namespace": "team", "name": "w"});
        v
    }

    #[test]
    fn sizes_and_their_sources() {
        let s = size_of(OwnerKind::Job, &meta(json!({"spec": {"parallelism": 4}}))).unwrap();
        assert_eq!(s, OwnerSize { key: "Job/team/w".into(), size: 4, source: "Job team/w spec.parallelism".into() });
        let s = size_of(
            OwnerKind::Job,
            &meta(json!({"spec": {"parallelism": 4, "completions": 5}, "status": {"succeeded": 3}})),
        )
        .unwrap();
        assert_eq!((s.size, s.source.as_str()), (2, "Job team/w spec.completions - status.succeeded"));
        let s = size_of(OwnerKind::Job, &meta(json!({"spec": {}}))).unwrap();
        assert_eq!(s.size, 1);
        let s = size_of(OwnerKind::StatefulSet, &meta(json!({"spec": {"replicas": 3}}))).unwrap();
        assert_eq!((s.size, s.source.as_str()), (3, "StatefulSet team/w spec.replicas"));
        let claims = json!({"spec": {"template": {"spec": {"resourceClaims": [{"name": "c"}]}}, "parallelism": 2}});
        let js = meta(json!({"spec": {"replicatedJobs": [
            {"name": "leader", "replicas": 1, "template": {"spec": {"template": {"spec": {}}}}},
            {"name": "workers", "replicas": 3, "template": claims},
        ]}}));
        let s = size_of(OwnerKind::JobSet, &js).unwrap();
        assert_eq!((s.size, s.source.as_str()), (6, "JobSet team/w spec.replicatedJobs (workers 3×2)"));
        let lws = meta(json!({"spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4}}}));
        assert_eq!(size_of(OwnerKind::LeaderWorkerSet, &lws).unwrap().size, 8);
    }

    #[test]
    fn malformed_sizes_name_the_field() {
        let e = size_of(OwnerKind::Job, &meta(json!({"spec": {"parallelism": "four"}}))).unwrap_err();
        assert_eq!(e, "spec.parallelism must be an integer, got \"four\"");
        let e = size_of(OwnerKind::JobSet, &meta(json!({"spec": {"replicatedJobs": [5]}}))).unwrap_err();
        assert_eq!(e, "spec.replicatedJobs[0] is not an object");
        let e = size_of(OwnerKind::Job, &json!({"spec": {}})).unwrap_err();
        assert_eq!(e, "metadata.namespace and metadata.name are required");
    }
}
