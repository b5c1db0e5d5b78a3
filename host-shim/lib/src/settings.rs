//! What the host takes from the validated plugin arguments: the names fact extraction reads and
//! the host's own fields (guest path and limits). The policy validates the arguments (one
//! validator, one set of defaults); this is its answer, as `cdplace_cluster_settings` writes it.

use std::time::Duration;

use serde::Serialize;

use crate::limits::Limits;

/// The validated arguments the host needs. Serializes to the JSON of `cdplace_cluster_settings`:
/// `{"cliqueLabel","gpuResourceName","gpuDriver","computeDomainDriver","sizeAnnotation",
/// "guestPath" (string|null),"callTimeoutMs","memoryLimitMiB","plainPodSteering","maxPolicyInstances"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// The node label holding the clique ID.
    pub clique_label: String,
    /// The extended resource through which pods ask for GPUs.
    pub gpu_resource_name: String,
    /// The DRA driver (and device class) of GPUs.
    pub gpu_driver: String,
    /// The DRA driver of ComputeDomain channels and daemons.
    pub compute_domain_driver: String,
    /// The annotation that declares a ComputeDomain's size.
    pub size_annotation: String,
    /// `guestPath`: the component to load instead of the embedded one (the embedder loads it).
    pub guest_path: Option<String>,
    /// `guestCallTimeout` in milliseconds.
    pub call_timeout_ms: u32,
    /// `guestMemoryLimitMiB`.
    #[serde(rename = "memoryLimitMiB")]
    pub memory_limit_mib: u32,
    /// `plainPodSteering`: ask the policy where pods without a ComputeDomain should go.
    pub plain_pod_steering: bool,
    /// `maxPolicyInstances`: most policy instances alive at once.
    pub max_policy_instances: u32,
}

impl Settings {
    /// The limits every guest call of a cluster with these settings runs under.
    pub fn limits(&self) -> Limits {
        Limits {
            memory_bytes: (self.memory_limit_mib as usize) << 20,
            deadline: Duration::from_millis(u64::from(self.call_timeout_ms)),
        }
    }

    /// The JSON form (see the type).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("settings serialize")
    }
}

impl From<crate::bindings::Settings> for Settings {
    fn from(s: crate::bindings::Settings) -> Self {
        Settings {
            clique_label: s.clique_label,
            gpu_resource_name: s.gpu_resource_name,
            gpu_driver: s.gpu_driver,
            compute_domain_driver: s.compute_domain_driver,
            size_annotation: s.size_annotation,
            guest_path: s.guest_path,
            call_timeout_ms: s.call_timeout_ms,
            memory_limit_mib: s.memory_limit_mib,
            plain_pod_steering: s.plain_pod_steering,
            max_policy_instances: s.max_policy_instances,
        }
    }
}

/// The settings of arguments the policy validated natively (the component answers the same).
impl From<&cdplace_policy::Args> for Settings {
    fn from(a: &cdplace_policy::Args) -> Self {
        Settings {
            clique_label: a.clique_label.clone(),
            gpu_resource_name: a.gpu_resource_name.clone(),
            gpu_driver: a.gpu_driver.clone(),
            compute_domain_driver: a.compute_domain_driver.clone(),
            size_annotation: a.size_annotation.clone(),
            guest_path: a.guest_path.clone(),
            call_timeout_ms: a.call_timeout_ms(),
            memory_limit_mib: a.guest_memory_limit_mib,
            plain_pod_steering: a.plain_pod_steering,
            max_policy_instances: a.max_policy_instances,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_arguments_give_default_limits_and_the_documented_json() {
        let s = Settings::from(&cdplace_policy::Args::default());
        assert_eq!(s.limits(), Limits::default());
        assert_eq!(
            s.to_json(),
            r#"{"cliqueLabel":"nvidia.com/gpu.clique","gpuResourceName":"nvidia.com/gpu","gpuDriver":"gpu.nvidia.com","computeDomainDriver":"compute-domain.nvidia.com","sizeAnnotation":"cdplace.nvidia.com/size","guestPath":null,"callTimeoutMs":2000,"memoryLimitMiB":512,"plainPodSteering":true,"maxPolicyInstances":16}"#
        );
    }

    #[test]
    fn limits_follow_the_arguments() {
        let a = cdplace_policy::Args::parse(r#"{"guestCallTimeout":"1m","guestMemoryLimitMiB":64}"#).unwrap();
        let l = Settings::from(&a).limits();
        assert_eq!((l.deadline, l.memory_bytes), (Duration::from_secs(60), 64 << 20));
    }

    /// The keys `include/cdplace.h` documents for `cdplace_cluster_settings`, in order.
    pub(crate) fn header_settings_keys() -> Vec<String> {
        let header = include_str!("../include/cdplace.h");
        let start = header.find("The validated arguments the host needs").expect("the settings doc in the header");
        let block = &header[start..start + header[start..].find("Thread-safe").expect("its end")];
        block.split('"').skip(1).step_by(2).map(str::to_string).collect()
    }

    #[test]
    fn the_settings_json_has_exactly_the_keys_the_header_documents() {
        let s = Settings::from(&cdplace_policy::Args::default());
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        let keys: std::collections::BTreeSet<String> = v.as_object().unwrap().keys().cloned().collect();
        let documented: std::collections::BTreeSet<String> = header_settings_keys().into_iter().collect();
        assert_eq!(keys, documented, "include/cdplace.h and Settings::to_json disagree");
    }
}
