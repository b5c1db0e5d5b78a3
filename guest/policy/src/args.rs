//! The plugin arguments: the schema of `ComputeDomainPlacementArgs` in the scheduler's
//! pluginConfig, with defaults and validation.

use alloc::format;
use alloc::string::{String, ToString};
use serde::{Deserialize, Serialize};

use crate::Error;

/// How IMEX daemons run on the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum ImexMode {
    /// The driver runs one IMEX daemon per ComputeDomain and labels the node: one domain per node.
    #[default]
    #[serde(rename = "DriverManaged")]
    DriverManaged,
    /// The administrator runs `nvidia-imex` on each host: domains may share a node.
    #[serde(rename = "HostManaged")]
    HostManaged,
}

/// Whether a ComputeDomain pod must take every GPU of its tray.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum WholeTray {
    /// Reject a pod that would leave GPUs of its tray stranded.
    #[default]
    Require,
    /// Allow it, scored down.
    Prefer,
    /// Do not look at GPU counts.
    Off,
}

/// `ComputeDomainPlacementArgs`, with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Args {
    /// Informational `apiVersion`/`kind` when the args come as a typed object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Informational, as `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// How IMEX daemons run: `DriverManaged` (one daemon per ComputeDomain, the driver labels the
    /// node: one domain per node) or `HostManaged` (`nvidia-imex` on every host: domains may share
    /// a node).
    #[serde(default)]
    pub imex_mode: ImexMode,
    /// Whether a ComputeDomain pod must take every GPU of its tray: `Require` rejects a pod that
    /// would strand GPUs, `Prefer` scores it down, `Off` does not look at GPU counts.
    #[serde(default)]
    pub whole_tray: WholeTray,
    /// Trays per clique kept free for failures; only a ComputeDomain sized to the whole clique
    /// may start on them.
    #[serde(default)]
    pub reserve_trays_per_clique: u32,
    /// At most one ComputeDomain per clique: a domain starts only in a clique where no other
    /// domain has a pod or the driver's node label (for driver versions where two IMEX domains in
    /// one clique conflict, dra-driver-nvidia-gpu #892).
    #[serde(default)]
    pub clique_exclusive: bool,
    /// The node label holding `<clusterUUID>.<cliqueID>`.
    #[serde(default = "default_clique_label")]
    pub clique_label: String,
    /// The extended resource through which pods may ask for GPUs.
    #[serde(default = "default_gpu_resource")]
    pub gpu_resource_name: String,
    /// The DRA driver (and device class) of GPUs.
    #[serde(default = "default_gpu_driver")]
    pub gpu_driver: String,
    /// The DRA driver of ComputeDomain channels and daemons.
    #[serde(default = "default_cd_driver")]
    pub compute_domain_driver: String,
    /// The annotation (on a ComputeDomain or its pods) that declares how many pods the domain has.
    #[serde(default = "default_size_annotation")]
    pub size_annotation: String,
    /// Most trays one clique may have; the driver's default IMEX domain limit is 18.
    #[serde(default = "default_max_trays")]
    pub max_trays_per_clique: u32,
    /// A ComputeDomain with no declared size (no annotation, PodGroup, known owner or
    /// `spec.numNodes`) starts only once none of its pods is younger than this many seconds;
    /// 0 starts it with the pods seen at once.
    #[serde(default = "default_size_settle")]
    pub size_settle_seconds: u32,
    /// Score pods without a ComputeDomain (GPU and CPU pods) toward nodes without a clique, then
    /// toward cliques already broken, away from intact ones; keep plain GPU pods off free trays a
    /// starting domain still needs. Off: such pods are skipped (the stock scheduler's placement).
    #[serde(default = "default_true")]
    pub plain_pod_steering: bool,
    /// A domain that has waited this long and is first in its size class (by priority, then age)
    /// gets one clique reserved; other domains and plain GPU pods only backfill it. 0: never.
    #[serde(default = "default_reservation_after")]
    pub clique_reservation_after_seconds: u32,
    /// How many waiting domains of each size class (first by priority, then age) hold a
    /// reservation at once, each on its own clique: the reservation depth of batch schedulers.
    /// 1 serves the large classes one drain at a time; more lets several cliques drain for them
    /// at once, which starts more large domains and costs small ones where runtimes are unknown.
    #[serde(default = "default_reservation_depth")]
    pub clique_reservation_depth: u32,

    // Host fields: the host applies them, the policy validates them (one validator for the
    // whole schema, one place for the defaults).
    /// Load the policy component from this file instead of the one built into the scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_path: Option<String>,
    /// Longest one policy call may run, as a duration (`2s`, `500ms`, `1m`).
    #[serde(default = "default_call_timeout")]
    pub guest_call_timeout: String,
    /// Most memory one policy instance may use, in MiB.
    #[serde(default = "default_memory_limit", rename = "guestMemoryLimitMiB")]
    pub guest_memory_limit_mib: u32,
    /// Most policy instances alive at once (idle and in a call): a call that finds them all
    /// busy waits for one within its deadline. Each may use up to `guestMemoryLimitMiB`.
    #[serde(default = "default_max_instances")]
    pub max_policy_instances: u32,
    /// Where the policy component comes from, watched while the scheduler runs: the one built
    /// into the binary (default), a file, a key of a ConfigMap's `binaryData`, or a key of a
    /// Secret's `data` (the scheduler must be allowed to read that object). A new
    /// component is checked on the live view and swapped in between scheduling cycles; one that
    /// fails a check is refused and the old one keeps deciding. The host validates this field and
    /// does not pass it on: a policy is never the validator of where it comes from.
    #[serde(default, skip_serializing)]
    pub policy: HostOnly,
    /// A second policy component, from a source like `policy`'s, asked the same PreFilter
    /// questions on the same view and never acting: where it would decide differently is
    /// reported per ComputeDomain (metrics, log, `ShadowDiverged` Events). Unset: no shadow.
    /// Validated by the host, as `policy`.
    #[serde(default, skip_serializing)]
    pub shadow_policy: HostOnly,
    /// When the host refuses the live policy's answers (safety violations, traps, timeouts)
    /// `failures` times within `window` (default 5 within 60s), the generation before it is
    /// restored, with a Warning `PolicyReverted` Event on its source and
    /// `cdplace_policy_reverts_total`; pods it left waiting are asked again at once. `failures: 0`
    /// turns it off. The first policy (embedded, or a file's at start) has nothing before it.
    /// Validated by the host, as `policy`.
    #[serde(default, skip_serializing)]
    pub policy_revert: HostOnly,
    /// Record what the policy saw and said into this directory (off when unset): the fact
    /// batches, assumptions and decisions, for `cdplace replay`. Files rotate at
    /// `recordMaxBytes`; the newest `recordMaxFiles` are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_path: Option<String>,
    /// Size at which the recorder starts its next file, in bytes.
    #[serde(default = "default_record_max_bytes")]
    pub record_max_bytes: u64,
    /// Recorder files kept (the oldest are deleted); replay rebuilds the view only from a trace
    /// whose first file is still there.
    #[serde(default = "default_record_max_files")]
    pub record_max_files: u32,
    /// `policyArgs`: arguments of a policy component loaded through `policy` (a file or a
    /// ConfigMap), any JSON object (e.g. `guest/examples/team-racks` reads `{"teams": ...}`
    /// there). The shipped policy only checks that it is an object; the loaded policy validates
    /// what it takes from it. The host validates the args with the shipped policy first and
    /// configures every swapped-in component with the same args, so a loaded policy's own fields
    /// go here rather than beside the shipped ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_args: Option<serde_json::Value>,
}

/// A host field the policy accepts whatever its value and ignores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostOnly;

impl<'de> Deserialize<'de> for HostOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(HostOnly)
    }
}

/// `sizeSettleSeconds` when unset.
pub const DEFAULT_SIZE_SETTLE_SECONDS: u32 = 5;
/// Largest `sizeSettleSeconds` accepted.
pub const MAX_SIZE_SETTLE_SECONDS: u32 = 600;
/// `cliqueReservationAfterSeconds` when unset.
pub const DEFAULT_RESERVATION_AFTER_SECONDS: u32 = 60;
/// Largest `cliqueReservationAfterSeconds` accepted (one day).
pub const MAX_RESERVATION_AFTER_SECONDS: u32 = 86_400;
/// `cliqueReservationDepth` when unset.
pub const DEFAULT_RESERVATION_DEPTH: u32 = 1;
/// Largest `cliqueReservationDepth` accepted.
pub const MAX_RESERVATION_DEPTH: u32 = 64;
/// `guestCallTimeout` when unset.
pub const DEFAULT_CALL_TIMEOUT_MS: u32 = 2_000;
/// `guestMemoryLimitMiB` when unset.
pub const DEFAULT_MEMORY_LIMIT_MIB: u32 = 512;
/// `maxPolicyInstances` when unset: kube-scheduler's default `parallelism` (16 pods are scheduled
/// at once, so 16 calls can be in flight).
pub const DEFAULT_MAX_POLICY_INSTANCES: u32 = 16;
/// `recordMaxBytes` when unset (64 MiB).
pub const DEFAULT_RECORD_MAX_BYTES: u64 = 64 << 20;
/// Smallest and largest `recordMaxBytes` accepted (1 MiB, 64 GiB).
pub const RECORD_MAX_BYTES_RANGE: (u64, u64) = (1 << 20, 64 << 30);
/// `recordMaxFiles` when unset.
pub const DEFAULT_RECORD_MAX_FILES: u32 = 8;
/// Largest `recordMaxFiles` accepted.
pub const MAX_RECORD_FILES: u32 = 10_000;
/// Largest `maxPolicyInstances` accepted.
pub const MAX_POLICY_INSTANCES: u32 = 256;

fn default_clique_label() -> String {
    "nvidia.com/gpu.clique".into()
}
fn default_gpu_resource() -> String {
    "nvidia.com/gpu".into()
}
fn default_gpu_driver() -> String {
    "gpu.nvidia.com".into()
}
fn default_cd_driver() -> String {
    "compute-domain.nvidia.com".into()
}
fn default_size_annotation() -> String {
    "cdplace.nvidia.com/size".into()
}
fn default_max_trays() -> u32 {
    18
}
fn default_reservation_after() -> u32 {
    DEFAULT_RESERVATION_AFTER_SECONDS
}
fn default_reservation_depth() -> u32 {
    DEFAULT_RESERVATION_DEPTH
}
fn default_true() -> bool {
    true
}
fn default_size_settle() -> u32 {
    DEFAULT_SIZE_SETTLE_SECONDS
}
fn default_call_timeout() -> String {
    format!("{}ms", DEFAULT_CALL_TIMEOUT_MS)
}
fn default_memory_limit() -> u32 {
    DEFAULT_MEMORY_LIMIT_MIB
}
fn default_max_instances() -> u32 {
    DEFAULT_MAX_POLICY_INSTANCES
}
fn default_record_max_bytes() -> u64 {
    DEFAULT_RECORD_MAX_BYTES
}
fn default_record_max_files() -> u32 {
    DEFAULT_RECORD_MAX_FILES
}

/// A duration of the Go form the scheduler's config uses for durations of this size
/// (`1500ms`, `2s`, `1m`, `1m30s`), in milliseconds; None when malformed.
pub fn parse_duration_ms(s: &str) -> Option<u64> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else {
            return None;
        };
        rest = &rest[len..];
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    Some(total)
}

impl Default for Args {
    fn default() -> Self {
        Self::parse("{}").expect("empty args are valid")
    }
}

impl Args {
    /// Parses and validates arguments given as JSON. An empty string means all defaults.
    pub fn parse(json: &str) -> Result<Self, Error> {
        let json = if json.trim().is_empty() { "{}" } else { json };
        let args: Args = serde_json::from_str(json).map_err(|e| Error::InvalidArgs(e.to_string()))?;
        args.validate()?;
        Ok(args)
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(v) = &self.api_version
            && v != "kubescheduler.config.k8s.io/v1"
        {
            return Err(bad("apiVersion", v, "must be kubescheduler.config.k8s.io/v1"));
        }
        if let Some(k) = &self.kind
            && k != "ComputeDomainPlacementArgs"
        {
            return Err(bad("kind", k, "must be ComputeDomainPlacementArgs"));
        }
        check_qualified_name("cliqueLabel", &self.clique_label)?;
        check_qualified_name("gpuResourceName", &self.gpu_resource_name)?;
        check_qualified_name("sizeAnnotation", &self.size_annotation)?;
        check_dns_subdomain("gpuDriver", &self.gpu_driver)?;
        check_dns_subdomain("computeDomainDriver", &self.compute_domain_driver)?;
        if self.max_trays_per_clique == 0 || self.max_trays_per_clique > 1024 {
            return Err(bad("maxTraysPerClique", &self.max_trays_per_clique.to_string(), "must be between 1 and 1024"));
        }
        if self.size_settle_seconds > MAX_SIZE_SETTLE_SECONDS {
            return Err(bad(
                "sizeSettleSeconds",
                &self.size_settle_seconds.to_string(),
                &format!("must be at most {MAX_SIZE_SETTLE_SECONDS} (0 disables the settle window)"),
            ));
        }
        if self.clique_reservation_after_seconds > MAX_RESERVATION_AFTER_SECONDS {
            return Err(bad(
                "cliqueReservationAfterSeconds",
                &self.clique_reservation_after_seconds.to_string(),
                &format!("must be at most {MAX_RESERVATION_AFTER_SECONDS} (0 turns reservations off)"),
            ));
        }
        if !(1..=MAX_RESERVATION_DEPTH).contains(&self.clique_reservation_depth) {
            return Err(bad(
                "cliqueReservationDepth",
                &self.clique_reservation_depth.to_string(),
                &format!(
                    "must be between 1 and {MAX_RESERVATION_DEPTH} (cliqueReservationAfterSeconds: 0 turns reservations off)"
                ),
            ));
        }
        match parse_duration_ms(&self.guest_call_timeout) {
            None => return Err(bad("guestCallTimeout", &self.guest_call_timeout, "must be a duration such as 2s")),
            Some(ms) if !(1..=60_000).contains(&ms) => {
                return Err(bad("guestCallTimeout", &self.guest_call_timeout, "must be between 1ms and 1m"));
            }
            Some(_) => {}
        }
        if !(16..=65_536).contains(&self.guest_memory_limit_mib) {
            return Err(bad(
                "guestMemoryLimitMiB",
                &self.guest_memory_limit_mib.to_string(),
                "must be between 16 and 65536",
            ));
        }
        if !(1..=MAX_POLICY_INSTANCES).contains(&self.max_policy_instances) {
            return Err(bad(
                "maxPolicyInstances",
                &self.max_policy_instances.to_string(),
                &format!(
                    "must be between 1 and {MAX_POLICY_INSTANCES} (set it to the scheduler's parallelism; each instance may use guestMemoryLimitMiB)"
                ),
            ));
        }
        if let Some(p) = &self.guest_path
            && p.is_empty()
        {
            return Err(bad("guestPath", p, "must be a file path when set"));
        }
        if let Some(p) = &self.record_path
            && p.is_empty()
        {
            return Err(bad("recordPath", p, "must be a directory path when set"));
        }
        let (lo, hi) = RECORD_MAX_BYTES_RANGE;
        if !(lo..=hi).contains(&self.record_max_bytes) {
            return Err(bad(
                "recordMaxBytes",
                &self.record_max_bytes.to_string(),
                &format!("must be between {lo} (1 MiB) and {hi} (64 GiB)"),
            ));
        }
        if !(1..=MAX_RECORD_FILES).contains(&self.record_max_files) {
            return Err(bad(
                "recordMaxFiles",
                &self.record_max_files.to_string(),
                &format!("must be between 1 and {MAX_RECORD_FILES}"),
            ));
        }
        if let Some(v) = &self.policy_args
            && !v.is_object()
        {
            return Err(bad("policyArgs", &v.to_string(), "must be an object"));
        }
        if self.reserve_trays_per_clique >= self.max_trays_per_clique {
            return Err(bad(
                "reserveTraysPerClique",
                &self.reserve_trays_per_clique.to_string(),
                &format!("must be less than maxTraysPerClique ({})", self.max_trays_per_clique),
            ));
        }
        Ok(())
    }

    /// The arguments with defaults applied, as JSON.
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("args serialize")
    }

    /// `guestCallTimeout` in milliseconds (after validation).
    pub fn call_timeout_ms(&self) -> u32 {
        parse_duration_ms(&self.guest_call_timeout).map_or(DEFAULT_CALL_TIMEOUT_MS, |ms| ms as u32)
    }
}

fn bad(field: &str, value: &str, why: &str) -> Error {
    Error::InvalidArgs(format!("{field}: Invalid value: \"{value}\": {why}"))
}

/// A label key or annotation key: an optional DNS-subdomain prefix and a name of at most 63
/// characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
fn check_qualified_name(field: &str, v: &str) -> Result<(), Error> {
    let (prefix, name) = match v.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, v),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Err(bad(field, v, "prefix must be a DNS subdomain"));
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric();
    if !ok {
        return Err(bad(
            field,
            v,
            "name part must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric",
        ));
    }
    Ok(())
}

fn check_dns_subdomain(field: &str, v: &str) -> Result<(), Error> {
    if is_dns_subdomain(v) { Ok(()) } else { Err(bad(field, v, "must be a lowercase DNS subdomain")) }
}

fn is_dns_subdomain(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 253
        && v.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let a = Args::parse("").unwrap();
        assert_eq!(a.imex_mode, ImexMode::DriverManaged);
        assert_eq!(a.whole_tray, WholeTray::Require);
        assert_eq!(a.clique_label, "nvidia.com/gpu.clique");
        assert_eq!(a.max_trays_per_clique, 18);
        assert_eq!(a.size_settle_seconds, 5);
    }

    #[test]
    fn size_settle_seconds() {
        assert_eq!(Args::parse(r#"{"sizeSettleSeconds":0}"#).unwrap().size_settle_seconds, 0);
        assert_eq!(Args::parse(r#"{"sizeSettleSeconds":600}"#).unwrap().size_settle_seconds, 600);
        let e = Args::parse(r#"{"sizeSettleSeconds":601}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: sizeSettleSeconds: Invalid value: \"601\": must be at most 600 (0 disables the settle window)"
        );
        let e = Args::parse(r#"{"sizeSettleSeconds":"5s"}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type: string \"5s\", expected u32"), "{e}");
        let e = Args::parse(r#"{"sizeSettleSecond":5}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `sizeSettleSecond`"), "{e}");
    }

    #[test]
    fn the_hosts_policy_source_is_accepted_and_ignored() {
        let a = Args::parse(
            r#"{"policy":{"source":"configMap","namespace":"x","name":"y","key":"z"},"shadowPolicy":{"source":"embedded"},"policyRevert":{"failures":0}}"#,
        )
        .unwrap();
        assert_eq!(a, Args::default());
        assert_eq!(a.canonical_json(), Args::default().canonical_json());
    }

    #[test]
    fn policy_args_are_any_object_the_shipped_policy_ignores() {
        let a = Args::parse(r#"{"policyArgs":{"teams":{"ns-a":["c.1"]},"anything":[1,2]}}"#).unwrap();
        assert_eq!(a.policy_args.as_ref().unwrap()["teams"]["ns-a"][0], "c.1");
        assert_eq!(Args { policy_args: None, ..a }, Args::default());
        let e = Args::parse(r#"{"policyArgs":[1]}"#).unwrap_err();
        assert_eq!(e.to_string(), "invalid plugin args: policyArgs: Invalid value: \"[1]\": must be an object");
    }

    #[test]
    fn unknown_field_is_named() {
        let e = Args::parse(r#"{"wholeTrays":"Off"}"#).unwrap_err();
        assert!(e.to_string().starts_with("invalid plugin args: unknown field `wholeTrays`, expected one of"), "{e}");
    }

    #[test]
    fn bad_enum_value() {
        let e = Args::parse(r#"{"imexMode":"Shared"}"#).unwrap_err();
        assert!(e.to_string().contains("unknown variant `Shared`, expected `DriverManaged` or `HostManaged`"), "{e}");
    }

    #[test]
    fn bad_label_and_reserve() {
        let e = Args::parse(r#"{"cliqueLabel":"nvidia.com/"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: cliqueLabel: Invalid value: \"nvidia.com/\": name part must be 1-63 characters of [A-Za-z0-9._-], starting and ending alphanumeric"
        );
        let e = Args::parse(r#"{"reserveTraysPerClique":18}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: reserveTraysPerClique: Invalid value: \"18\": must be less than maxTraysPerClique (18)"
        );
        let e = Args::parse(r#"{"reserveTraysPerClique":-1}"#).unwrap_err();
        assert!(e.to_string().contains("invalid value: integer `-1`, expected u32"), "{e}");
    }

    #[test]
    fn host_fields_are_validated_here() {
        let a = Args::parse(r#"{"guestCallTimeout":"1m","guestMemoryLimitMiB":64,"guestPath":"/x.wasm"}"#).unwrap();
        assert_eq!((a.call_timeout_ms(), a.guest_memory_limit_mib), (60_000, 64));
        assert_eq!(Args::default().call_timeout_ms(), DEFAULT_CALL_TIMEOUT_MS);
        assert_eq!(parse_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_duration_ms("1.5s"), None);
        let e = Args::parse(r#"{"guestCallTimeout":"soon"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: guestCallTimeout: Invalid value: \"soon\": must be a duration such as 2s"
        );
        let e = Args::parse(r#"{"guestCallTimeout":"2m"}"#).unwrap_err();
        assert!(e.to_string().ends_with("must be between 1ms and 1m"), "{e}");
        assert_eq!(Args::default().max_policy_instances, DEFAULT_MAX_POLICY_INSTANCES);
        assert_eq!(Args::parse(r#"{"maxPolicyInstances":1}"#).unwrap().max_policy_instances, 1);
        let e = Args::parse(r#"{"maxPolicyInstances":0}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: maxPolicyInstances: Invalid value: \"0\": must be between 1 and 256 (set it to the scheduler's parallelism; each instance may use guestMemoryLimitMiB)"
        );
        assert!(Args::parse(r#"{"maxPolicyInstances":257}"#).is_err());
        let e = Args::parse(r#"{"guestMemoryLimitMiB":8}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: guestMemoryLimitMiB: Invalid value: \"8\": must be between 16 and 65536"
        );
    }

    #[test]
    fn clique_reservation_depth() {
        assert_eq!(Args::default().clique_reservation_depth, DEFAULT_RESERVATION_DEPTH);
        assert_eq!(Args::parse(r#"{"cliqueReservationDepth":64}"#).unwrap().clique_reservation_depth, 64);
        let e = Args::parse(r#"{"cliqueReservationDepth":0}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid plugin args: cliqueReservationDepth: Invalid value: \"0\": must be between 1 and 64 (cliqueReservationAfterSeconds: 0 turns reservations off)"
        );
        assert!(Args::parse(r#"{"cliqueReservationDepth":65}"#).is_err());
    }

    /// The chart's values schema (`additionalProperties: false` on the args) names every field
    /// the plugin takes, with the same bounds where it gives them: a field missing there is a
    /// field `helm install` refuses although the scheduler would take it.
    #[test]
    fn the_chart_schema_names_every_field() {
        let schema: serde_json::Value = serde_json::from_str(include_str!(
            "../../../kube-scheduler-config/chart/cdplace-scheduler/values.schema.json"
        ))
        .expect("values.schema.json parses");
        let props = schema["definitions"]["computeDomainPlacementArgs"]["properties"]
            .as_object()
            .expect("definitions.computeDomainPlacementArgs.properties in values.schema.json");
        // guestPath, policy, shadowPolicy and policyRevert are the host's (never serialized by the policy);
        // recordPath and policyArgs are serialized only when set.
        let mut fields: alloc::vec::Vec<String> = alloc::vec![
            "apiVersion".into(),
            "kind".into(),
            "guestPath".into(),
            "policy".into(),
            "shadowPolicy".into(),
            "policyRevert".into(),
            "recordPath".into(),
            "policyArgs".into(),
        ];
        let defaults: serde_json::Value = serde_json::from_str(&Args::default().canonical_json()).unwrap();
        fields.extend(defaults.as_object().unwrap().keys().cloned());
        for f in &fields {
            assert!(props.contains_key(f.as_str()), "values.schema.json lacks plugin.args.{f}");
        }
        for f in props.keys() {
            assert!(fields.contains(f), "values.schema.json has plugin.args.{f}, which the plugin does not take");
        }
        let range = |f: &str| (props[f]["minimum"].as_u64(), props[f]["maximum"].as_u64());
        assert_eq!(range("cliqueReservationDepth"), (Some(1), Some(u64::from(MAX_RESERVATION_DEPTH))));
        assert_eq!(range("cliqueReservationAfterSeconds"), (Some(0), Some(u64::from(MAX_RESERVATION_AFTER_SECONDS))));
        assert_eq!(range("sizeSettleSeconds"), (Some(0), Some(u64::from(MAX_SIZE_SETTLE_SECONDS))));
        assert_eq!(range("maxPolicyInstances"), (Some(1), Some(u64::from(MAX_POLICY_INSTANCES))));
        assert_eq!(range("recordMaxBytes"), (Some(RECORD_MAX_BYTES_RANGE.0), Some(RECORD_MAX_BYTES_RANGE.1)));
        assert_eq!(range("recordMaxFiles"), (Some(1), Some(u64::from(MAX_RECORD_FILES))));
    }

    #[test]
    fn recorder_fields_are_validated_here() {
        let a = Args::parse(r#"{"recordPath":"/var/lib/cdplace/trace","recordMaxBytes":1048576,"recordMaxFiles":2}"#)
            .unwrap();
        assert_eq!(a.record_path.as_deref(), Some("/var/lib/cdplace/trace"));
        assert_eq!((a.record_max_bytes, a.record_max_files), (1 << 20, 2));
        let d = Args::parse("{}").unwrap();
        assert_eq!((d.record_path, d.record_max_bytes, d.record_max_files), (None, 64 << 20, 8));
        for bad in [r#"{"recordPath":""}"#, r#"{"recordMaxBytes":1024}"#, r#"{"recordMaxFiles":0}"#] {
            assert!(Args::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
