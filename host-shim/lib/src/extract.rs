//! Kubernetes objects (JSON, as the API server or `kubectl get -o json` writes them) to the few
//! facts the policy needs ([`Object`]). Only this module reads Kubernetes object shapes; the Go
//! adapter extracts the same facts itself and sends them packed (`crate::facts`).

use cdplace_policy::GpuDemand;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::settings::Settings;
use crate::{Error, Result};

/// The node label the NVIDIA driver sets at Prepare.
pub const DOMAIN_LABEL: &str = "resource.nvidia.com/computeDomain";
/// The template label naming what a ComputeDomain template is for (`Workload` or `Daemon`).
pub const TARGET_LABEL: &str = "resource.nvidia.com/computeDomainTarget";

/// An object kind cdplace reads. The discriminants are `cdplace_kind_t` of the C ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    Node = 1,
    Pod = 2,
    ResourceClaim = 3,
    ResourceClaimTemplate = 4,
    ResourceSlice = 5,
    ComputeDomain = 6,
    PodGroup = 7,
    /// A workload object's size as the Go adapter extracts it (Job, StatefulSet, JobSet, ...);
    /// not an API kind of its own: its name is the owner key `<Kind>/<namespace>/<name>`.
    Owner = 8,
}

/// The owner key of workload object `kind` `namespace/name`: `<Kind>/<namespace>/<name>`, the name
/// of an [`Kind::Owner`] fact and what a pod's fact names as its owner. The one way Rust builds
/// it (the PodGroup a pod names, the CLI's owners); the Go adapter's copy
/// (`host-shim/go/internal/facts`) and this one are both tested against the form
/// `include/cdplace.h` gives.
pub fn owner_key(kind: &str, namespace: &str, name: &str) -> String {
    format!("{kind}/{namespace}/{name}")
}

/// Every kind, in `cdplace_kind_t` order.
pub const KINDS: [Kind; 8] = [
    Kind::Node,
    Kind::Pod,
    Kind::ResourceClaim,
    Kind::ResourceClaimTemplate,
    Kind::ResourceSlice,
    Kind::ComputeDomain,
    Kind::PodGroup,
    Kind::Owner,
];

impl Kind {
    /// The kind for an object's `apiVersion` and `kind`, when cdplace reads it.
    pub fn of(api_version: &str, kind: &str) -> Option<Kind> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(match (group, kind) {
            ("", "Node") => Kind::Node,
            ("", "Pod") => Kind::Pod,
            ("resource.k8s.io", "ResourceClaim") => Kind::ResourceClaim,
            ("resource.k8s.io", "ResourceClaimTemplate") => Kind::ResourceClaimTemplate,
            ("resource.k8s.io", "ResourceSlice") => Kind::ResourceSlice,
            ("resource.nvidia.com", "ComputeDomain") => Kind::ComputeDomain,
            ("scheduling.k8s.io", "PodGroup") => Kind::PodGroup,
            _ => return None,
        })
    }

    /// The name used in messages and the C ABI.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ComputeDomain => "ComputeDomain",
            Kind::PodGroup => "PodGroup",
            Kind::Owner => "Owner",
        }
    }

    /// Parses [`Kind::as_str`].
    pub fn parse(s: &str) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.as_str() == s)
    }

    /// The `cdplace_kind_t` value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The kind of a `cdplace_kind_t` value.
    pub fn from_code(code: u8) -> Option<Kind> {
        KINDS.into_iter().find(|k| k.code() == code)
    }

    /// Namespaced kinds.
    pub fn namespaced(self) -> bool {
        !matches!(self, Kind::Node | Kind::ResourceSlice | Kind::Owner)
    }
}

/// One entry of a pod's `spec.resourceClaims`, with its generated claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodClaim {
    pub name: String,
    pub template: Option<String>,
    pub claim: Option<String>,
    pub generated: Option<String>,
}

/// What cdplace keeps of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    Node {
        name: String,
        clique_label: Option<String>,
        domain_label: Option<String>,
        unschedulable: bool,
        /// Allocatable GPUs through the extended resource.
        gpus: u32,
    },
    Pod {
        namespace: String,
        name: String,
        /// `Succeeded` or `Failed`: holds nothing any more.
        terminal: bool,
        node_name: Option<String>,
        nominated_node_name: Option<String>,
        claims: Vec<PodClaim>,
        /// GPUs through the extended resource (effective request: max of init containers and
        /// the sum of containers).
        gpus: u32,
        size_hint: Option<u32>,
        pod_group: Option<String>,
        /// Owner key of the top-level controller whose size counts (`Job/<ns>/<name>`).
        owner: Option<String>,
        /// `metadata.creationTimestamp`, Unix milliseconds (0 when absent).
        created_ms: i64,
        /// `spec.priority` (0 when unset).
        priority: i32,
        /// How long after it started the pod is gone at the latest: `spec.activeDeadlineSeconds`
        /// plus its termination grace period (30 s when unset), in milliseconds, saturating
        /// (none without a deadline).
        runtime_limit_ms: Option<i64>,
        /// `status.startTime`, Unix milliseconds: 0 before the kubelet started it, and always 0
        /// without `runtime_limit_ms` (the start is read only to know when the pod ends).
        started_ms: i64,
    },
    Claim {
        namespace: String,
        name: String,
        domain: Option<String>,
        daemon: bool,
        gpus: GpuDemand,
        allocated_gpus: Option<u32>,
    },
    Template {
        namespace: String,
        name: String,
        domain: Option<String>,
        daemon: bool,
        gpus: GpuDemand,
    },
    Slice {
        name: String,
        /// The node of a node-local slice of the GPU driver.
        node: Option<String>,
        gpus: u32,
        /// `spec.pool.name`: the slices of one pool are counted together.
        pool: String,
        /// `spec.pool.generation`: only the slices of a pool's newest generation count (a
        /// driver republishing a pool bumps it; the older slices are stale until deleted).
        generation: i64,
    },
    Domain {
        namespace: String,
        name: String,
        uid: String,
        /// The size annotation.
        size_hint: Option<u32>,
        /// `spec.numNodes` when positive.
        num_nodes: Option<u32>,
    },
    PodGroup {
        namespace: String,
        name: String,
        min_count: Option<u32>,
        priority: Option<i32>,
    },
    /// How many pods a workload object will run.
    Owner {
        /// `<Kind>/<namespace>/<name>`.
        key: String,
        /// None: the object gives no size (the owner is forgotten).
        size: Option<u32>,
        /// Where the size was read, e.g. `Job training/trainer spec.parallelism`.
        source: String,
        priority: Option<i32>,
    },
}

impl Object {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Node { .. } => Kind::Node,
            Object::Pod { .. } => Kind::Pod,
            Object::Claim { .. } => Kind::ResourceClaim,
            Object::Template { .. } => Kind::ResourceClaimTemplate,
            Object::Slice { .. } => Kind::ResourceSlice,
            Object::Domain { .. } => Kind::ComputeDomain,
            Object::PodGroup { .. } => Kind::PodGroup,
            Object::Owner { .. } => Kind::Owner,
        }
    }
}

/// `Kind namespace/name` (or `Kind name`) of a raw object, for messages.
pub fn describe(v: &Value) -> String {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("object");
    let meta = v.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("<no name>");
    match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn typed<T: DeserializeOwned>(v: &Value) -> Result<T> {
    T::deserialize(v).map_err(|e| Error::InvalidObject(format!("{}: {e}", describe(v))))
}

fn required(v: &Value, what: &str, value: Option<String>) -> Result<String> {
    match value {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(Error::InvalidObject(format!("{}: {what} is required", describe(v)))),
    }
}

/// A non-negative integer that fits u32 from an annotation, or an error naming it.
fn size_annotation(v: &Value, key: &str, value: Option<&String>) -> Result<Option<u32>> {
    let Some(s) = value else { return Ok(None) };
    match s.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(Some(n)),
        _ => Err(Error::InvalidObject(format!("{}: annotation {key}={s:?} must be a positive integer", describe(v)))),
    }
}

/// Reads a quantity of whole devices ("4", "4000m" is not a device count).
fn device_quantity(q: &str) -> Option<u32> {
    q.trim().parse::<u32>().ok()
}

/// Extracts the facts of one object; `None` for kinds cdplace does not read.
pub fn extract(v: &Value, settings: &Settings) -> Result<Option<Object>> {
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind_name = v.get("kind").and_then(Value::as_str).unwrap_or("");
    let Some(kind) = Kind::of(api_version, kind_name) else { return Ok(None) };
    Ok(Some(match kind {
        Kind::Node => node(v, settings)?,
        Kind::Pod => pod(v, settings)?,
        Kind::ResourceClaim => {
            let c: ResourceClaim = typed(v)?;
            let name = required(v, "metadata.name", c.metadata.name.clone())?;
            let namespace = required(v, "metadata.namespace", c.metadata.namespace.clone())?;
            let spec = c.spec.clone().unwrap_or_default();
            let (domain, daemon) = channel_config(v, &spec, settings)?;
            let allocated_gpus = c.status.as_ref().and_then(|s| s.allocation.as_ref()).map(|a| {
                a.devices
                    .as_ref()
                    .and_then(|d| d.results.as_ref())
                    .map_or(0, |r| r.iter().filter(|r| r.driver == settings.gpu_driver).count() as u32)
            });
            Object::Claim { namespace, name, domain, daemon, gpus: gpu_demand(&spec, settings), allocated_gpus }
        }
        Kind::ResourceClaimTemplate => {
            let t: ResourceClaimTemplate = typed(v)?;
            let name = required(v, "metadata.name", t.metadata.name.clone())?;
            let namespace = required(v, "metadata.namespace", t.metadata.namespace.clone())?;
            let labels = t.metadata.labels.clone().unwrap_or_default();
            let spec = t.spec.clone().and_then(|s| s.spec).unwrap_or_default();
            let (config_domain, config_daemon) = channel_config(v, &spec, settings)?;
            let domain = labels.get(DOMAIN_LABEL).filter(|s| !s.is_empty()).cloned().or(config_domain);
            let daemon = labels.get(TARGET_LABEL).map_or(config_daemon, |t| t == "Daemon");
            Object::Template { namespace, name, domain, daemon, gpus: gpu_demand(&spec, settings) }
        }
        Kind::ResourceSlice => {
            let s: ResourceSlice = typed(v)?;
            let name = required(v, "metadata.name", s.metadata.name.clone())?;
            let ours = s.spec.driver == settings.gpu_driver;
            let gpus = if ours {
                s.spec.devices.as_ref().map_or(0, |d| {
                    let n = d
                        .iter()
                        .filter(|d| {
                            let ty =
                                d.attributes.as_ref().and_then(|a| a.get("type")).and_then(|a| a.string.as_deref());
                            ty.is_none_or(|t| t == "gpu")
                        })
                        .count();
                    // The API allows 128 devices a slice; saturate rather than wrap past u32.
                    u32::try_from(n).unwrap_or(u32::MAX)
                })
            } else {
                0
            };
            let node = s.spec.node_name.clone().filter(|_| ours);
            let pool = s.spec.pool.name.clone();
            if node.is_some() && pool.is_empty() {
                return Err(Error::InvalidObject(format!("{}: spec.pool.name is required", describe(v))));
            }
            Object::Slice { name, node, gpus, pool, generation: s.spec.pool.generation }
        }
        Kind::ComputeDomain => {
            let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
            let meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta =
                typed(&meta).map_err(|e| Error::InvalidObject(format!("{}: metadata: {e}", describe(v))))?;
            let name = required(v, "metadata.name", meta.name.clone())?;
            let namespace = required(v, "metadata.namespace", meta.namespace.clone())?;
            let uid = required(v, "metadata.uid", meta.uid.clone())?;
            let annotations = meta.annotations.unwrap_or_default();
            let size_hint = size_annotation(v, &settings.size_annotation, annotations.get(&settings.size_annotation))?;
            let num_nodes = match v.pointer("/spec/numNodes") {
                None | Some(Value::Null) => None,
                Some(n) => match n.as_u64() {
                    Some(0) => None,
                    Some(n) => Some(n.min(u64::from(u32::MAX)) as u32),
                    None => {
                        return Err(Error::InvalidObject(format!(
                            "{}: spec.numNodes must be a non-negative integer, got {n}",
                            describe(v)
                        )));
                    }
                },
            };
            Object::Domain { namespace, name, uid, size_hint, num_nodes }
        }
        Kind::PodGroup => {
            let name =
                required(v, "metadata.name", v.pointer("/metadata/name").and_then(Value::as_str).map(String::from))?;
            let namespace = required(
                v,
                "metadata.namespace",
                v.pointer("/metadata/namespace").and_then(Value::as_str).map(String::from),
            )?;
            let min_count = match v.pointer("/spec/schedulingPolicy/gang/minCount") {
                None | Some(Value::Null) => None,
                Some(n) => match n.as_u64() {
                    Some(n) if n > 0 => Some(n.min(u64::from(u32::MAX)) as u32),
                    _ => {
                        return Err(Error::InvalidObject(format!(
                            "{}: spec.schedulingPolicy.gang.minCount must be a positive integer, got {n}",
                            describe(v)
                        )));
                    }
                },
            };
            let priority = v
                .pointer("/spec/priority")
                .and_then(Value::as_i64)
                .map(|p| p.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32);
            Object::PodGroup { namespace, name, min_count, priority }
        }
        // `Kind::of` never names it: owners come as facts, not objects.
        Kind::Owner => return Ok(None),
    }))
}

fn node(v: &Value, settings: &Settings) -> Result<Object> {
    let n: Node = typed(v)?;
    let name = required(v, "metadata.name", n.metadata.name.clone())?;
    let labels = n.metadata.labels.unwrap_or_default();
    let gpus = n
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(&settings.gpu_resource_name))
        .and_then(|q| device_quantity(&q.0))
        .unwrap_or(0);
    Ok(Object::Node {
        name,
        clique_label: labels.get(&settings.clique_label).cloned(),
        domain_label: labels.get(DOMAIN_LABEL).cloned(),
        unschedulable: n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
        gpus,
    })
}

fn pod(v: &Value, settings: &Settings) -> Result<Object> {
    let p: Pod = typed(v)?;
    let name = required(v, "metadata.name", p.metadata.name.clone())?;
    let namespace = required(v, "metadata.namespace", p.metadata.namespace.clone())?;
    let annotations = p.metadata.annotations.clone().unwrap_or_default();
    let size_hint = size_annotation(v, &settings.size_annotation, annotations.get(&settings.size_annotation))?;
    let status = p.status.unwrap_or_default();
    let spec = p.spec.unwrap_or_default();
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    let generated: std::collections::BTreeMap<String, String> = status
        .resource_claim_statuses
        .unwrap_or_default()
        .into_iter()
        .filter_map(|s| Some((s.name, s.resource_claim_name?)))
        .collect();
    let claims = spec
        .resource_claims
        .unwrap_or_default()
        .into_iter()
        .map(|c| PodClaim {
            generated: generated.get(&c.name).cloned(),
            name: c.name,
            template: c.resource_claim_template_name,
            claim: c.resource_claim_name,
        })
        .collect();
    let request = |c: &k8s_openapi::api::core::v1::Container| -> u32 {
        let r = c.resources.as_ref();
        let q = r
            .and_then(|r| r.requests.as_ref())
            .and_then(|m| m.get(&settings.gpu_resource_name))
            .or_else(|| r.and_then(|r| r.limits.as_ref()).and_then(|m| m.get(&settings.gpu_resource_name)));
        q.and_then(|q| device_quantity(&q.0)).unwrap_or(0)
    };
    // Checked: a sum past u32 would wrap to a small count.
    let sum = spec.containers.iter().map(request).try_fold(0u32, u32::checked_add).ok_or_else(|| {
        Error::InvalidObject(format!(
            "{}: spec.containers: the {} requests of the containers sum past {}",
            describe(v),
            settings.gpu_resource_name,
            u32::MAX
        ))
    })?;
    let init = spec.init_containers.as_deref().unwrap_or_default().iter().map(request).max().unwrap_or(0);
    let runtime_limit_ms = spec.active_deadline_seconds.map(|d| {
        let grace = spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS);
        d.saturating_add(grace).saturating_mul(1000)
    });
    Ok(Object::Pod {
        namespace,
        name,
        terminal,
        node_name: spec.node_name.filter(|s| !s.is_empty()),
        nominated_node_name: status.nominated_node_name.filter(|s| !s.is_empty()),
        claims,
        gpus: sum.max(init),
        size_hint,
        pod_group: spec.scheduling_group.and_then(|g| g.pod_group_name),
        // Owners are resolved by the scheduler's adapter, which watches the controllers; a
        // snapshot carries no controller objects to read sizes from.
        owner: None,
        created_ms: p.metadata.creation_timestamp.map_or(0, |t| t.0.as_millisecond()),
        priority: spec.priority.unwrap_or(0),
        runtime_limit_ms,
        // Read only with a deadline, as the scheduler's extraction does: the start of a pod
        // without one changes no fact.
        started_ms: match (runtime_limit_ms, status.start_time) {
            (Some(_), Some(t)) => t.0.as_millisecond(),
            _ => 0,
        },
    })
}

/// The termination grace period of a pod that sets none, in seconds.
const DEFAULT_GRACE_PERIOD_SECONDS: i64 = 30;

/// GPUs a claim spec asks for: requests on the GPU driver's device class.
fn gpu_demand(spec: &ResourceClaimSpec, settings: &Settings) -> GpuDemand {
    let mut d = GpuDemand::default();
    for r in spec.devices.as_ref().and_then(|d| d.requests.as_ref()).into_iter().flatten() {
        // A prioritized list: the first alternative is the preferred one.
        let (class, mode, count) = match (&r.exactly, r.first_available.as_ref().and_then(|f| f.first())) {
            (Some(e), _) => (&e.device_class_name, e.allocation_mode.as_deref(), e.count),
            (None, Some(s)) => (&s.device_class_name, s.allocation_mode.as_deref(), s.count),
            (None, None) => continue,
        };
        if *class != settings.gpu_driver {
            continue;
        }
        match mode {
            Some("All") => d.all = true,
            _ => d.count = d.count.saturating_add(count.unwrap_or(1).clamp(0, i64::from(u32::MAX)) as u32),
        }
    }
    d
}

/// The ComputeDomain a claim spec's opaque config names: `(domainID, is daemon config)`.
fn channel_config(v: &Value, spec: &ResourceClaimSpec, settings: &Settings) -> Result<(Option<String>, bool)> {
    for c in spec.devices.as_ref().and_then(|d| d.config.as_ref()).into_iter().flatten() {
        let Some(o) = &c.opaque else { continue };
        if o.driver != settings.compute_domain_driver {
            continue;
        }
        let params = &o.parameters.0;
        let daemon = match params.get("kind").and_then(Value::as_str) {
            Some("ComputeDomainChannelConfig") => false,
            Some("ComputeDomainDaemonConfig") => true,
            _ => continue,
        };
        return match params.get("domainID").and_then(Value::as_str) {
            Some(id) if !id.is_empty() => Ok((Some(id.to_string()), daemon)),
            _ => Err(Error::InvalidObject(format!(
                "{}: opaque config of driver {} has no domainID",
                describe(v),
                settings.compute_domain_driver
            ))),
        };
    }
    Ok((None, false))
}

#[cfg(test)]
mod owner_key_tests {
    /// The header's form of an owner key, `"<Kind>/<ns>/<name>"`, filled in.
    #[test]
    fn owner_keys_have_the_form_the_header_gives() {
        let header = include_str!("../include/cdplace.h");
        let pattern = "name = owner key \"";
        let at = header.find(pattern).expect("the owner key's form in the header") + pattern.len();
        let form = &header[at..at + header[at..].find('"').unwrap()];
        assert_eq!(form, "<Kind>/<ns>/<name>");
        let want = form.replace("<Kind>", "Job").replace("<ns>", "training").replace("<name>", "trainer");
        assert_eq!(super::owner_key("Job", "training", "trainer"), want);
    }
}
