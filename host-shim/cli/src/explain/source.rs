//! Where a command's cluster comes from (snapshot files or a live cluster), the policy it runs
//! (the plugin arguments and the component), and building the view from them: what
//! `cdplace explain` and `cdplace status` share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use cdplace_host::extract::{self, Object};
use cdplace_host::facts::{self, Record};
use cdplace_host::{Backend, Cluster, Error, Runtime};

use super::{ExplainError, SnapshotObject, input, load_snapshot};
use crate::live::LiveOptions;
use crate::owners::{self, OwnerKind};

/// Where the cluster comes from (snapshot files, else the live cluster of a kubeconfig) and the
/// namespace the command looks in.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SourceOptions {
    /// Cluster objects as `kubectl get -o yaml|json` writes them, instead of the live cluster.
    /// Repeat to layer files: a later object replaces an earlier one with the same kind,
    /// namespace and name.
    #[arg(long = "snapshot", value_name = "FILE")]
    pub snapshots: Vec<PathBuf>,
    #[command(flatten)]
    pub live: LiveOptions,
    /// The namespace (default: the kubeconfig context's namespace, else `default`; for
    /// snapshots, `default`).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// The objects of a cluster and which owner APIs it serves.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    pub objects: Vec<SnapshotObject>,
    /// Owner kinds whose API is served: for a live cluster, what discovery lists; for snapshots,
    /// the kinds they hold objects of.
    pub served: std::collections::BTreeSet<OwnerKind>,
    /// The namespace of the source when none is asked for: the kubeconfig context's, else
    /// `default`.
    pub default_namespace: String,
}

impl Objects {
    /// Snapshot objects, serving the owner kinds they hold.
    pub fn from_snapshots(objects: Vec<SnapshotObject>) -> Self {
        let served = objects
            .iter()
            .filter_map(|o| {
                let s = |k: &str| o.value.get(k).and_then(Value::as_str).unwrap_or("");
                OwnerKind::of(s("apiVersion"), s("kind"))
            })
            .collect();
        Objects { objects, served, default_namespace: "default".to_string() }
    }
}

impl SourceOptions {
    /// Reads the snapshots, or the live cluster when none is given.
    pub fn read(&self) -> Result<Objects, ExplainError> {
        if self.snapshots.is_empty() {
            let live = crate::live::read_cluster(&self.live)?;
            return Ok(Objects { objects: live.objects, served: live.served, default_namespace: live.namespace });
        }
        let mut objects = Vec::new();
        for path in &self.snapshots {
            objects.extend(load_snapshot(path)?);
        }
        Ok(Objects::from_snapshots(objects))
    }

    /// The namespace to look in: `-n`, else the source's.
    pub fn namespace(&self, objects: &Objects) -> String {
        self.namespace.clone().unwrap_or_else(|| objects.default_namespace.clone())
    }
}

/// The policy a command runs: the plugin arguments and the component (`explain`, `status`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PolicyOptions {
    /// The plugin arguments (ComputeDomainPlacementArgs fields) as YAML or JSON; defaults when
    /// absent.
    #[arg(long, value_name = "ARGS.yaml")]
    pub config: Option<PathBuf>,
    /// Run this policy component (`cdplace_guest.wasm`) instead of the one built into this
    /// executable.
    #[arg(long = "policy", alias = "guest", value_name = "FILE.wasm")]
    pub guest: Option<PathBuf>,
}

impl PolicyOptions {
    /// The plugin arguments as JSON (empty for the defaults); read before the cluster, so a bad
    /// file is reported before anything slow.
    pub fn args(&self) -> Result<String, ExplainError> {
        read_args(self.config.as_deref())
    }

    /// Loads the component and builds the view of `objects` under `args` (from [`Self::args`]).
    pub fn cluster(&self, args: &str, objects: &Objects) -> Result<Cluster, ExplainError> {
        let runtime = load_runtime(self.guest.as_deref())?;
        build_cluster(runtime, args, self.config.as_deref(), objects)
    }
}

/// Reads the plugin arguments (YAML or JSON) and returns them as JSON; an empty file means the
/// defaults. The policy validates them in [`Cluster::new`].
pub fn load_args(path: &Path) -> Result<String, ExplainError> {
    let text = std::fs::read_to_string(path).map_err(|e| input(path, format!("cannot read: {e}")))?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| input(path, e.to_string()))?;
    Ok(match value {
        Value::Null => String::new(),
        v => v.to_string(),
    })
}

/// Builds the cluster view: validates `args` (JSON, from `args_file` when given), extracts
/// every object in order (pods with their owner key, workload objects as their size) and
/// applies them as one batch.
pub fn build_cluster(
    backend: Arc<dyn Backend>,
    args: &str,
    args_file: Option<&Path>,
    objects: &Objects,
) -> Result<Cluster, ExplainError> {
    let cluster = Cluster::new(backend, args).map_err(|e| match e {
        Error::InvalidArgs(_) => ExplainError::Args {
            file: args_file.map_or_else(|| "default plugin args".to_string(), |p| p.display().to_string()),
            error: e,
        },
        e => ExplainError::Policy(e),
    })?;
    let served = |k: OwnerKind| !k.is_custom() || objects.served.contains(&k);
    let mut records = Vec::with_capacity(objects.objects.len());
    for o in &objects.objects {
        let rejected = |m: String| {
            let what = extract::describe(&o.value);
            let rest = m.strip_prefix(&format!("{what}: ")).unwrap_or(&m).to_string();
            input(&o.file, format!("{} ({what}): {rest}", o.origin))
        };
        let s = |k: &str| o.value.get(k).and_then(Value::as_str).unwrap_or("");
        if let Some(kind) = OwnerKind::of(s("apiVersion"), s("kind")) {
            let size = owners::size_of(kind, &o.value).map_err(rejected)?;
            let owner = Object::Owner { key: size.key, size: Some(size.size), source: size.source, priority: None };
            records.push(Record::Upsert(owner));
            continue;
        }
        let object = extract::extract(&o.value, cluster.settings()).map_err(|e| match e {
            Error::InvalidObject(m) => rejected(m),
            e => ExplainError::Policy(e),
        })?;
        if let Some(mut obj) = object {
            // The JSON extraction leaves the owner empty; the CLI resolves it as the Go adapter does.
            if let Object::Pod { owner, .. } = &mut obj {
                *owner = owners::key_of(&o.value, served);
            }
            records.push(Record::Upsert(obj));
        }
    }
    cluster.apply_facts(&facts::encode(&records)).map_err(ExplainError::Policy)?;
    Ok(cluster)
}

/// Reads the plugin arguments (`--config`) as JSON; empty for the defaults.
pub fn read_args(config: Option<&Path>) -> Result<String, ExplainError> {
    match config {
        Some(p) => load_args(p),
        None => Ok(String::new()),
    }
}

/// Loads the policy component: `--policy FILE`, else the one built into this executable.
pub fn load_runtime(guest: Option<&Path>) -> Result<Arc<Runtime>, ExplainError> {
    let Some(guest) = guest else {
        return Runtime::new(crate::EMBEDDED_GUEST).map_err(ExplainError::Policy);
    };
    if !guest.exists() {
        return Err(input(guest, "no policy component here (build it with `make guest`, or leave out --policy)"));
    }
    Runtime::from_file(guest).map_err(ExplainError::Policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::tests::parse;

    #[test]
    fn rejected_object_is_named_with_its_origin() {
        let objs = parse("apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: default}\nspec: 5\n").unwrap();
        let e = build_cluster(cdplace_testkit::native::backend(), "", None, &Objects::from_snapshots(objs.clone()))
            .unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: document 2 (Pod default/x): invalid type"), "{e}");

        let list = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: d}}\n- apiVersion: resource.k8s.io/v1\n  kind: ResourceClaimTemplate\n  metadata: {name: t, namespace: d}\n  spec: {spec: {devices: {requests: [channel]}}}\n";
        let e =
            build_cluster(cdplace_testkit::native::backend(), "", None, &Objects::from_snapshots(parse(list).unwrap()))
                .unwrap_err();
        assert!(e.to_string().starts_with("snap.yaml: item 2 (ResourceClaimTemplate d/t): invalid type"), "{e}");
    }

    #[test]
    fn invalid_args_keep_the_policy_text() {
        let e = build_cluster(
            cdplace_testkit::native::backend(),
            r#"{"wholeTrays": "Off"}"#,
            Some(Path::new("a.yaml")),
            &Objects::default(),
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("a.yaml: invalid plugin args: unknown field `wholeTrays`"), "{e}");
    }
}
