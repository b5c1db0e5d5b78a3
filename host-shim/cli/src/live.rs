//! Reading a live cluster through a kubeconfig: the same objects a snapshot holds, listed from
//! the API server with kube-rs, so `cdplace explain` and `cdplace status` give the same answer
//! for a cluster and for a snapshot of it.
//!
//! What is listed ([`RESOURCES`]): Nodes, Pods, ResourceClaims, ResourceClaimTemplates,
//! ResourceSlices, ComputeDomains, PodGroups, and the owners the size rules read (Jobs,
//! StatefulSets, ReplicaSets, JobSets, LeaderWorkerSets). Discovery decides: an API the server
//! does not serve (no ComputeDomain CRD, no PodGroups, no JobSet CRD) is skipped silently, as the
//! scheduler's adapter skips it. Every object goes through the same path as a snapshot's.
//! `cdplace status --shadow` lists core/v1 Events instead ([`EVENTS`], [`read_shadow_events`]),
//! by reason (a field selector).
//!
//! kube-rs is async; the CLI runs it on a small current-thread tokio runtime ([`read_cluster`]
//! blocks). Only this crate depends on kube: the library kube-scheduler links does not.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use kube::{Client, Config};
use serde_json::Value;

use crate::explain::ExplainError;
use crate::owners::OwnerKind;
use crate::snapshot::SnapshotObject;

/// Where the live cluster is: the kubeconfig options both commands take.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LiveOptions {
    /// Read the live cluster through this kubeconfig (default: `$KUBECONFIG`, then
    /// ~/.kube/config). Used when no --snapshot is given.
    #[arg(long, value_name = "FILE", conflicts_with = "snapshots")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, value_name = "NAME", conflicts_with = "snapshots")]
    pub context: Option<String>,
}

/// One resource the live source lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// Everything the live source lists, in the order it is applied (nodes first, as a snapshot
/// usually has them; order does not change the answer).
pub const RESOURCES: [Resource; 12] = [
    Resource { api_version: "v1", kind: "Node", plural: "nodes" },
    Resource { api_version: "resource.k8s.io/v1", kind: "ResourceSlice", plural: "resourceslices" },
    Resource { api_version: "resource.nvidia.com/v1beta1", kind: "ComputeDomain", plural: "computedomains" },
    Resource { api_version: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", plural: "resourceclaimtemplates" },
    Resource { api_version: "resource.k8s.io/v1", kind: "ResourceClaim", plural: "resourceclaims" },
    Resource { api_version: "scheduling.k8s.io/v1beta1", kind: "PodGroup", plural: "podgroups" },
    Resource { api_version: "batch/v1", kind: "Job", plural: "jobs" },
    Resource { api_version: "apps/v1", kind: "StatefulSet", plural: "statefulsets" },
    Resource { api_version: "apps/v1", kind: "ReplicaSet", plural: "replicasets" },
    Resource { api_version: "jobset.x-k8s.io/v1alpha2", kind: "JobSet", plural: "jobsets" },
    Resource { api_version: "leaderworkerset.x-k8s.io/v1", kind: "LeaderWorkerSet", plural: "leaderworkersets" },
    Resource { api_version: "v1", kind: "Pod", plural: "pods" },
];

/// Events, which `cdplace status --shadow` lists (by reason: the scheduler's `ShadowDiverged`,
/// `PolicyApplied`); nothing else reads them.
pub const EVENTS: Resource = Resource { api_version: "v1", kind: "Event", plural: "events" };

/// Objects per list request.
const PAGE: u32 = 500;

/// What was read from the cluster.
#[derive(Debug)]
pub struct LiveCluster {
    /// The API server's URL, which names the objects' origin in messages.
    pub server: String,
    pub objects: Vec<SnapshotObject>,
    /// Owner kinds whose API is served (JobSet and LeaderWorkerSet labels count only then).
    pub served: BTreeSet<OwnerKind>,
    /// Resources the server does not serve, `plural.group`.
    pub skipped: Vec<String>,
    /// The kubeconfig context's namespace, else `default`.
    pub namespace: String,
}

pub(crate) fn live(
    what: impl Into<String>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> ExplainError {
    ExplainError::Live { what: what.into(), source: source.into() }
}

/// A failed request: the API server's own words (its message, reason and HTTP code) when it
/// answered, with a pointer to the viewer role when it refused.
pub(crate) fn api_error(what: String, e: kube::Error) -> ExplainError {
    match e {
        kube::Error::Api(s) => {
            let hint = if s.code == 403 {
                "; the cdplace-viewer ClusterRole (kube-scheduler-config/deploy/viewer-rbac.yaml) grants what cdplace reads"
            } else {
                ""
            };
            live(what, format!("{} ({}, HTTP {}){hint}", s.message, s.reason, s.code))
        }
        e => live(what, e),
    }
}

/// Lists every resource of [`RESOURCES`] that the cluster serves, blocking until done.
pub fn read_cluster(opts: &LiveOptions) -> Result<LiveCluster, ExplainError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| live("starting the client's runtime", e))?;
    rt.block_on(read(opts))
}

/// The client configuration: the named kubeconfig file, else `$KUBECONFIG` (a list of files is
/// merged), else ~/.kube/config; the named context, else the current one.
pub(crate) async fn config(opts: &LiveOptions) -> Result<Config, ExplainError> {
    let (kubeconfig, from) = match &opts.kubeconfig {
        Some(p) => (Kubeconfig::read_from(p), p.display().to_string()),
        None => (Kubeconfig::read(), "$KUBECONFIG or ~/.kube/config".to_string()),
    };
    let kubeconfig = kubeconfig.map_err(|e| ExplainError::Kubeconfig { file: from.clone(), source: e.into() })?;
    let options = KubeConfigOptions { context: opts.context.clone(), ..Default::default() };
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ExplainError::Kubeconfig { file: from, source: e.into() })?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(Duration::from_secs(60));
    Ok(config)
}

async fn read(opts: &LiveOptions) -> Result<LiveCluster, ExplainError> {
    let config = config(opts).await?;
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let namespace = config.default_namespace.clone();
    let client = Client::try_from(config).map_err(|e| live(format!("connecting to {server}"), e))?;
    let mut served_versions: std::collections::BTreeMap<&str, BTreeSet<String>> = Default::default();
    let mut out = LiveCluster {
        server: server.clone(),
        objects: Vec::new(),
        served: BTreeSet::new(),
        skipped: Vec::new(),
        namespace,
    };
    for r in RESOURCES {
        if r.api_version != "v1" {
            if !served_versions.contains_key(r.api_version) {
                let plurals = match client.list_api_group_resources(r.api_version).await {
                    Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
                    Err(kube::Error::Api(s)) if s.code == 404 => BTreeSet::new(),
                    Err(e) => return Err(api_error(format!("{server}: discovery of {}", r.api_version), e)),
                };
                served_versions.insert(r.api_version, plurals);
            }
            if !served_versions[r.api_version].contains(r.plural) {
                let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
                out.skipped.push(format!("{}.{group}", r.plural));
                continue;
            }
        }
        if let Some(k) = OwnerKind::of(r.api_version, r.kind) {
            out.served.insert(k);
        }
        list(&client, &server, r, &mut out.objects).await?;
    }
    Ok(out)
}

/// Events read for `cdplace status --shadow`, as the API server gives them (core/v1).
#[derive(Debug)]
pub struct LiveEvents {
    /// The API server's URL.
    pub server: String,
    /// The namespace whose `ShadowDiverged` Events were listed; `None`: every namespace.
    pub namespace: Option<String>,
    /// The `ShadowDiverged` Events of that namespace (or of all).
    pub diverged: Vec<Value>,
    /// The `PolicyApplied` Events of every namespace.
    pub applied: Vec<Value>,
}

/// Lists the `ShadowDiverged` Events of `namespace` (`-n`; else the kubeconfig context's, or every
/// namespace when `all`) and the `PolicyApplied` Events of every namespace, blocking until done.
pub fn read_shadow_events(opts: &LiveOptions, namespace: Option<&str>, all: bool) -> Result<LiveEvents, ExplainError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| live("starting the client's runtime", e))?;
    rt.block_on(async {
        let config = config(opts).await?;
        let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
        let namespace = (!all).then(|| namespace.map_or_else(|| config.default_namespace.clone(), String::from));
        let client = Client::try_from(config).map_err(|e| live(format!("connecting to {server}"), e))?;
        let diverged = list_events(&client, &server, namespace.as_deref(), "ShadowDiverged").await?;
        let applied = list_events(&client, &server, None, "PolicyApplied").await?;
        Ok(LiveEvents { server, namespace, diverged, applied })
    })
}

/// Lists the core/v1 Events with `reason` (a field selector) in `namespace` (`None`: all).
async fn list_events(
    client: &Client,
    server: &str,
    namespace: Option<&str>,
    reason: &str,
) -> Result<Vec<Value>, ExplainError> {
    let r = EVENTS;
    let ar = ApiResource {
        group: String::new(),
        version: r.api_version.to_string(),
        api_version: r.api_version.to_string(),
        kind: r.kind.to_string(),
        plural: r.plural.to_string(),
    };
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let what = match namespace {
        Some(ns) => format!("{server}: listing {reason} events in namespace {ns}"),
        None => format!("{server}: listing {reason} events"),
    };
    let mut params = ListParams::default().fields(&format!("reason={reason}")).limit(PAGE);
    let mut out = Vec::new();
    loop {
        let page = api.list(&params).await.map_err(|e| api_error(what.clone(), e))?;
        for item in page.items {
            out.push(serde_json::to_value(&item).map_err(|e| live(what.clone(), e))?);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// Lists one resource in every namespace, page by page; each item gets the apiVersion and kind
/// the API server leaves out of list items.
async fn list(client: &Client, server: &str, r: Resource, out: &mut Vec<SnapshotObject>) -> Result<(), ExplainError> {
    let (group, version) = r.api_version.split_once('/').unwrap_or(("", r.api_version));
    let ar = ApiResource {
        group: group.to_string(),
        version: version.to_string(),
        api_version: r.api_version.to_string(),
        kind: r.kind.to_string(),
        plural: r.plural.to_string(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut params = ListParams::default().limit(PAGE);
    let mut n = 0;
    loop {
        let page = api.list(&params).await.map_err(|e| api_error(format!("{server}: listing {}", r.plural), e))?;
        for item in page.items {
            n += 1;
            let mut value =
                serde_json::to_value(&item).map_err(|e| live(format!("{server}: {} item {n}", r.plural), e))?;
            if let Value::Object(m) = &mut value {
                m.insert("apiVersion".into(), Value::String(r.api_version.into()));
                m.insert("kind".into(), Value::String(r.kind.into()));
            }
            out.push(SnapshotObject { file: PathBuf::from(server), origin: format!("{} item {n}", r.plural), value });
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_the_view_reads_is_listed() {
        use cdplace_host::extract::{KINDS, Kind};
        let read: BTreeSet<Kind> = RESOURCES.iter().filter_map(|r| Kind::of(r.api_version, r.kind)).collect();
        // Owners are not an API kind: the workload objects below are.
        assert_eq!(read, KINDS.into_iter().filter(|&k| k != Kind::Owner).collect());
        let owners: BTreeSet<OwnerKind> =
            RESOURCES.iter().filter_map(|r| OwnerKind::of(r.api_version, r.kind)).collect();
        assert_eq!(owners, crate::owners::OWNER_KINDS.into_iter().collect());
    }

    /// The viewer ClusterRole for the plugin's users grants `list` on exactly what is listed here
    /// (with the Events of `status --shadow`).
    #[test]
    fn the_viewer_role_lists_what_is_read() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kube-scheduler-config/deploy/viewer-rbac.yaml");
        let role: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(role["kind"], "ClusterRole");
        assert_eq!(role["metadata"]["name"], "cdplace-viewer");
        let mut granted = BTreeSet::new();
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(rule["verbs"], serde_json::json!(["list"]), "{rule}");
            for group in rule["apiGroups"].as_array().unwrap() {
                for resource in rule["resources"].as_array().unwrap() {
                    granted.insert((group.as_str().unwrap().to_string(), resource.as_str().unwrap().to_string()));
                }
            }
        }
        let read: BTreeSet<(String, String)> = RESOURCES
            .iter()
            .chain([&EVENTS])
            .map(|r| {
                let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
                (group.to_string(), r.plural.to_string())
            })
            .collect();
        assert_eq!(granted, read);
    }

    #[test]
    fn a_missing_kubeconfig_is_named() {
        let opts = LiveOptions { kubeconfig: Some("/nonexistent/kubeconfig".into()), context: None };
        let e = read_cluster(&opts).unwrap_err();
        let text = cdplace_host::error::chain(&e);
        assert!(text.starts_with("/nonexistent/kubeconfig: cannot use the kubeconfig: "), "{text}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn an_unknown_context_is_named() {
        let dir = std::env::temp_dir().join(format!("cdplace-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: ctx\n  context: {cluster: c, user: u}\ncurrent-context: ctx\n",
        )
        .unwrap();
        let opts = LiveOptions { kubeconfig: Some(path.clone()), context: Some("nope".into()) };
        let text = cdplace_host::error::chain(&read_cluster(&opts).unwrap_err());
        assert!(text.contains("nope"), "{text}");
        // A server that does not answer: the error names it and what was asked.
        let opts = LiveOptions { kubeconfig: Some(path), context: None };
        let e = read_cluster(&opts).unwrap_err();
        let text = cdplace_host::error::chain(&e);
        assert!(text.starts_with("https://127.0.0.1:1: "), "{text}");
        assert_eq!(e.exit_code(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
