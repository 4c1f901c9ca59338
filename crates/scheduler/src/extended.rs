//! Extended resources backed by DRA (KEP-5004, DRAExtendedResource in Kubernetes 1.34): a
//! pod asking for `nvidia.com/gpu` is satisfied on a node whose allocatable lacks it by the
//! devices of the DeviceClass whose `extendedResourceName` (or implied name
//! `deviceclass.resource.kubernetes.io/<class>`) it is. For such a node the DynamicResources
//! plugin allocates a special claim made for the pod — one `ExactCount` request per container
//! and resource, named `container-<i>-request-<j>` — which the scheduler creates in PreBind
//! (`generateName` `<pod>-extended-resources-`, owned by the pod, annotated
//! `resource.kubernetes.io/extended-resource-claim: "true"`) and records in the pod's
//! `status.extendedResourceClaimStatus`.
//!
//! Pure. Knows which class backs which name and how the special claim looks; not how it is
//! allocated (`crate::schedule`) nor written (the scheduler shell).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{ContainerExtendedResourceRequest, Pod};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use tessera_model::extended_resources::{
    DEVICE_CLASS_PREFIX, EXTENDED_RESOURCE_CLAIM_ANNOTATION, is_dra_extended_resource_name,
};

use crate::node_info::NodeInfo;
use crate::resources::{Amounts, Demand, container_requests};

/// The special claim's name while it exists only in the scheduler (upstream's, deliberately
/// not a valid object name).
pub const IN_MEMORY_NAME: &str = "<extended-resources>";

/// Which DeviceClass backs each extended resource name.
#[derive(Debug, Clone, Default)]
pub struct ExtendedResourceClasses {
    by_resource: HashMap<String, String>,
}

impl ExtendedResourceClasses {
    /// The mapping of `classes`: each class's implied name and its `extendedResourceName`;
    /// where two classes claim one name, the one created later wins, then the name first in
    /// order (upstream's DeviceClassResolver).
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a DeviceClass>) -> ExtendedResourceClasses {
        let mut ordered: Vec<&DeviceClass> = classes.into_iter().collect();
        ordered.sort_by(|a, b| {
            let created = |c: &DeviceClass| c.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b)
                .cmp(&created(a))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let mut by_resource = HashMap::new();
        for class in ordered {
            let Some(name) = class.metadata.name.as_deref() else {
                continue;
            };
            let explicit = class.spec.extended_resource_name.clone();
            for resource in [Some(format!("{DEVICE_CLASS_PREFIX}{name}")), explicit]
                .into_iter()
                .flatten()
            {
                by_resource
                    .entry(resource)
                    .or_insert_with(|| name.to_string());
            }
        }
        ExtendedResourceClasses { by_resource }
    }

    /// Whether no class backs any name.
    pub fn is_empty(&self) -> bool {
        self.by_resource.is_empty()
    }

    /// The class backing `resource`.
    pub fn class_of(&self, resource: &str) -> Option<&str> {
        self.by_resource.get(resource).map(String::as_str)
    }

    /// The requested resources (positive amounts) a class backs, in name order.
    pub fn backed(&self, requests: &Amounts) -> Vec<String> {
        if self.by_resource.is_empty() {
            return Vec::new();
        }
        requests
            .iter()
            .filter(|(name, amount)| **amount > 0 && is_dra_extended_resource_name(name))
            .filter(|(name, _)| self.by_resource.contains_key(*name))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// The extended resources DRA must provide on `node`: those a class backs that the node's
/// allocatable does not offer (upstream's `shouldDelegateResourceToDRA`).
pub fn delegated<'d>(demand: &'d Demand, node: &NodeInfo) -> Vec<&'d str> {
    demand
        .dra_backed
        .iter()
        .filter(|name| node.allocatable.get(*name).copied().unwrap_or(0) <= 0)
        .map(String::as_str)
        .collect()
}

/// The uid of the pod `claim` is the special claim of: annotated, that pod its controlling
/// owner (what upstream's `findExtendedResourceClaim` looks for).
pub fn special_claim_owner(claim: &ResourceClaim) -> Option<&str> {
    let annotated = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
        .is_some_and(|v| v == "true");
    if !annotated {
        return None;
    }
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == "Pod")
        .map(|o| o.uid.as_str())
}

/// Whether `claim` is the in-memory special claim booked for `pod` (by `Scheduler::assume`).
pub(crate) fn booked_for(claim: &ResourceClaim, pod: &Pod) -> bool {
    let meta = &claim.metadata;
    meta.name.as_deref() == Some(IN_MEMORY_NAME)
        && meta.namespace == pod.metadata.namespace
        && meta.owner_references.iter().flatten().any(|o| {
            Some(&o.name) == pod.metadata.name.as_ref()
                && o.uid == pod.metadata.uid.clone().unwrap_or_default()
        })
}

/// The special claim the scheduler allocated for a pod, as PreBind writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtendedClaim {
    /// The claim to create: `generateName`, owner, annotation and requests (no name yet).
    pub claim: ResourceClaim,
    /// Its allocation on the chosen node.
    pub allocation: AllocationResult,
    /// `status.extendedResourceClaimStatus.requestMappings` of the pod.
    pub mappings: Vec<ContainerExtendedResourceRequest>,
}

/// The special claim of `pod` for the `delegated` resources (in memory, named
/// [`IN_MEMORY_NAME`]), and which container's resource each request serves. As upstream
/// 1.34: init containers then containers, one request per container asking for a resource,
/// `count` its whole units, `j` the resource's position among the container's requests in
/// name order; requests sorted by name.
pub fn special_claim(
    pod: &Pod,
    delegated: &[&str],
    classes: &ExtendedResourceClasses,
) -> (ResourceClaim, Vec<ContainerExtendedResourceRequest>) {
    let spec = pod.spec.as_ref();
    let containers = spec
        .into_iter()
        .flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    let per_container: Vec<(String, Amounts)> = containers
        .map(|c| (c.name.clone(), container_requests(c)))
        .collect();
    for resource in delegated {
        let Some(class) = classes.class_of(resource) else {
            continue;
        };
        for (index, (container, amounts)) in per_container.iter().enumerate() {
            let Some(&milli) = amounts.get(*resource) else {
                continue;
            };
            // Only whole units (upstream's `AsInt64`).
            if milli <= 0 || milli % 1000 != 0 {
                continue;
            }
            let Ok(count) = i64::try_from(milli / 1000) else {
                continue;
            };
            let position = amounts.keys().position(|k| k == resource).unwrap_or(0);
            let name = format!("container-{index}-request-{position}");
            requests.push(DeviceRequest {
                name: name.clone(),
                exactly: Some(ExactDeviceRequest {
                    device_class_name: class.to_string(),
                    allocation_mode: Some("ExactCount".into()),
                    count: Some(count),
                    ..Default::default()
                }),
                ..Default::default()
            });
            mappings.push(ContainerExtendedResourceRequest {
                container_name: container.clone(),
                resource_name: resource.to_string(),
                request_name: name,
            });
        }
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            name: Some(IN_MEMORY_NAME.into()),
            namespace: pod.metadata.namespace.clone(),
            generate_name: Some(format!("{pod_name}-extended-resources-")),
            annotations: Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.into(), "true".into())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod_name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: k8s_openapi::api::resource::v1::ResourceClaimSpec {
            devices: Some(k8s_openapi::api::resource::v1::DeviceClaim {
                requests: Some(requests),
                ..Default::default()
            }),
        },
        status: None,
    };
    (claim, mappings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, extended: Option<&str>, created: &str) -> DeviceClass {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"extendedResourceName": extended}
        }))
        .expect("class")
    }

    #[test]
    fn later_classes_win_a_name_then_the_first_by_name() {
        let classes = [
            class("old", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
            class("new", Some("example.com/gpu"), "2026-02-01T00:00:00Z"),
            class("b-tie", Some("example.com/tie"), "2026-01-01T00:00:00Z"),
            class("a-tie", Some("example.com/tie"), "2026-01-01T00:00:00Z"),
            class("plain", None, "2026-01-01T00:00:00Z"),
        ];
        let resolver = ExtendedResourceClasses::new(&classes);
        let table = [
            ("example.com/gpu", Some("new")),
            ("example.com/tie", Some("a-tie")),
            ("deviceclass.resource.kubernetes.io/plain", Some("plain")),
            ("deviceclass.resource.kubernetes.io/old", Some("old")),
            ("example.com/other", None),
        ];
        for (resource, want) in table {
            assert_eq!(resolver.class_of(resource), want, "{resource}");
        }
    }

    #[test]
    fn the_special_claim_has_a_request_per_container_and_resource() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": "train", "uid": "u-1"},
            "spec": {
                "initContainers": [{"name": "warm", "resources": {"limits": {"example.com/gpu": "1"}}}],
                "containers": [
                    {"name": "main", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                    {"name": "side", "resources": {"requests": {"memory": "1Gi"}}},
                    {"name": "both", "resources": {"limits": {"example.com/gpu": "3", "nvidia.com/gpu": "1"}}}
                ]}
        }))
        .expect("pod");
        let classes = [
            class(
                "gpu.nvidia.com",
                Some("nvidia.com/gpu"),
                "2026-01-01T00:00:00Z",
            ),
            class("example", Some("example.com/gpu"), "2026-01-01T00:00:00Z"),
        ];
        let resolver = ExtendedResourceClasses::new(&classes);
        let (claim, mappings) =
            special_claim(&pod, &["example.com/gpu", "nvidia.com/gpu"], &resolver);
        let requests: Vec<(String, String, i64)> = claim
            .spec
            .devices
            .iter()
            .flat_map(|d| d.requests.iter().flatten())
            .map(|r| {
                let exactly = r.exactly.as_ref().expect("exactly");
                (
                    r.name.clone(),
                    exactly.device_class_name.clone(),
                    exactly.count.unwrap_or(0),
                )
            })
            .collect();
        let owned = |(n, c, k): (&str, &str, i64)| (n.to_string(), c.to_string(), k);
        assert_eq!(
            requests,
            [
                owned(("container-0-request-0", "example", 1)),
                owned(("container-1-request-1", "gpu.nvidia.com", 2)),
                owned(("container-3-request-0", "example", 3)),
                owned(("container-3-request-1", "gpu.nvidia.com", 1)),
            ]
        );
        let mapped: Vec<(&str, &str, &str)> = mappings
            .iter()
            .map(|m| {
                (
                    m.container_name.as_str(),
                    m.resource_name.as_str(),
                    m.request_name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            mapped,
            [
                ("warm", "example.com/gpu", "container-0-request-0"),
                ("both", "example.com/gpu", "container-3-request-0"),
                ("main", "nvidia.com/gpu", "container-1-request-1"),
                ("both", "nvidia.com/gpu", "container-3-request-1"),
            ]
        );
        let meta = &claim.metadata;
        assert_eq!(meta.name.as_deref(), Some(IN_MEMORY_NAME));
        assert_eq!(
            meta.generate_name.as_deref(),
            Some("train-extended-resources-")
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)),
            Some(&"true".to_string())
        );
        assert_eq!(special_claim_owner(&claim), Some("u-1"));
        let mut plain = claim.clone();
        plain.metadata.annotations = None;
        assert_eq!(special_claim_owner(&plain), None, "not annotated");
        let owner = &meta.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Pod", "u-1", Some(true))
        );
    }
}
