//! What the kubelet does with a pod's ResourceClaims before its containers start: resolve
//! each pod claim to its ResourceClaim (by name, or through `status.resourceClaimStatuses`
//! for claims generated from templates), require it to be allocated and reserved for the pod,
//! prepare it as the DRA driver's kubelet plugin would ([`crate::dra_claims::plan`]:
//! this node's devices only, CDI device IDs `k8s.gpu.nvidia.com/claim=<claimUID>-<device>`),
//! and give each container the devices of the claims (and requests) it names, with the env a
//! runtime would set (`NVIDIA_VISIBLE_DEVICES` with the device UUIDs). Extended resources
//! backed by DRA come the same way: the claim the scheduler named in the pod's
//! `status.extendedResourceClaimStatus`, each container getting the requests mapped to it.
//!
//! Pure; the twin fetches the claims and writes the container logs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::Value;

use crate::dra_claims::{self, PreparedClaim};
use crate::resource_slice::resource_slices;
use crate::topology::NodeSpec;

/// The DRA driver node twins act as.
pub const DRIVER: &str = "gpu.nvidia.com";

pub use tessera_model::pod_claims::claim_names;

/// The key under which the claim of the pod's extended resources is handed in (not a pod
/// claim name, which is a DNS label).
pub const EXTENDED_RESOURCES: &str = "<extended-resources>";

/// The claim the scheduler made for the pod's extended resources, from its status.
pub fn extended_claim_name(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .extended_resource_claim_status
        .as_ref()
        .map(|s| s.resource_claim_name.as_str())
}

/// Whether the kubelet must prepare claims before the pod's containers start.
pub fn uses_claims(pod: &Pod) -> bool {
    !claim_names(pod).is_empty() || extended_claim_name(pod).is_some()
}

/// Why a pod's claims are not ready for its containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Still being created, allocated or reserved: wait.
    Waiting(String),
    /// Preparing failed (the kubelet's FailedPrepareDynamicResources).
    Failed(String),
}

/// Device name → UUID of what `node` publishes.
fn device_uuids(node: &NodeSpec) -> BTreeMap<String, String> {
    resource_slices(node)
        .iter()
        .flat_map(|slice| {
            slice
                .pointer("/spec/devices")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|device| {
            Some((
                device.get("name")?.as_str()?.to_string(),
                device
                    .pointer("/attributes/uuid/string")?
                    .as_str()?
                    .to_string(),
            ))
        })
        .collect()
}

/// The log lines each container's devices produce, by container name; `claims` holds the
/// fetched claims by pod claim name, the extended resources' claim under
/// [`EXTENDED_RESOURCES`].
pub fn container_devices(
    pod: &Pod,
    node: &NodeSpec,
    claims: &BTreeMap<String, ResourceClaim>,
) -> Result<BTreeMap<String, Vec<String>>, NotReady> {
    let uuids = device_uuids(node);
    let kind = dra_claims::claim_cdi_kind(DRIVER);
    let mut lines = BTreeMap::new();
    for (container, devices) in claimed_devices(pod, node, claims, &uuids)? {
        // Passthrough GPUs come as vfio device nodes, the NVIDIA runtime told to add nothing.
        let vfio: Vec<String> = devices
            .iter()
            .filter_map(|(device, _)| crate::worker_model::vfio_device_node(device))
            .collect();
        let visible: Vec<String> = devices
            .iter()
            .filter(|(device, _)| crate::worker_model::vfio_device_node(device).is_none())
            .map(|(device, _)| uuids.get(device).cloned().unwrap_or_default())
            .collect();
        let visible = if visible.is_empty() && !vfio.is_empty() {
            "void".to_string()
        } else {
            visible.join(",")
        };
        let cdi: Vec<String> = devices
            .iter()
            .map(|(_, cdi_name)| format!("{kind}={cdi_name}"))
            .collect();
        let mut printed = vec![
            format!("NVIDIA_VISIBLE_DEVICES={visible}"),
            format!("CDI devices: {}", cdi.join(" ")),
        ];
        if !vfio.is_empty() {
            printed.push(format!("Device nodes: {}", vfio.join(" ")));
        }
        lines.insert(container, printed);
    }
    Ok(lines)
}

/// The names of the devices (as this node's slices publish them: `gpu-0`,
/// `gpu-0-mig-1g18gb-0`) each container got through its claims.
pub fn container_device_names(
    pod: &Pod,
    node: &NodeSpec,
    claims: &BTreeMap<String, ResourceClaim>,
) -> Result<BTreeMap<String, Vec<String>>, NotReady> {
    let uuids = device_uuids(node);
    Ok(claimed_devices(pod, node, claims, &uuids)?
        .into_iter()
        .map(|(container, devices)| (container, devices.into_iter().map(|(d, _)| d).collect()))
        .collect())
}

/// Each container's prepared devices: (device name, CDI name), containers without any left out.
fn claimed_devices(
    pod: &Pod,
    node: &NodeSpec,
    claims: &BTreeMap<String, ResourceClaim>,
    uuids: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, Vec<(String, String)>>, NotReady> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let known: Vec<&str> = uuids.keys().map(String::as_str).collect();
    let mut prepared: BTreeMap<&str, (String, PreparedClaim)> = BTreeMap::new();
    let extended = extended_claim_name(pod)
        .map(|name| (EXTENDED_RESOURCES.to_string(), Some(name.to_string())));
    for (pod_claim, name) in claim_names(pod).into_iter().chain(extended) {
        let claim = name
            .as_ref()
            .and_then(|_| claims.get(&pod_claim))
            .ok_or_else(|| NotReady::Waiting(format!("waiting for the claim of {pod_claim}")))?;
        let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
        let status = claim.status.as_ref();
        if status.and_then(|s| s.allocation.as_ref()).is_none() {
            return Err(NotReady::Waiting(format!(
                "claim {claim_name} is not allocated"
            )));
        }
        let reserved = status
            .and_then(|s| s.reserved_for.as_ref())
            .is_some_and(|r| r.iter().any(|c| c.uid == uid));
        if !reserved {
            return Err(NotReady::Waiting(format!(
                "claim {claim_name} is not reserved for the pod"
            )));
        }
        let claim_uid = claim.metadata.uid.clone().unwrap_or_default();
        let plan = dra_claims::plan(claim, &claim_uid, DRIVER, &node.name, &known)
            .map_err(NotReady::Failed)?;
        let key = claims
            .get_key_value(&pod_claim)
            .map(|(k, _)| k.as_str())
            .unwrap_or_default();
        prepared.insert(key, (claim_uid, plan));
    }
    let mappings = pod
        .status
        .as_ref()
        .and_then(|s| s.extended_resource_claim_status.as_ref())
        .map(|s| s.request_mappings.as_slice())
        .unwrap_or_default();
    let mut devices = BTreeMap::new();
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        let mut got = Vec::new();
        let named = container
            .resources
            .as_ref()
            .and_then(|r| r.claims.as_ref())
            .into_iter()
            .flatten()
            .map(|r| (r.name.as_str(), r.request.as_deref()));
        let mapped = mappings
            .iter()
            .filter(|m| m.container_name == container.name)
            .map(|m| (EXTENDED_RESOURCES, Some(m.request_name.as_str())));
        for (claim, request) in named.chain(mapped) {
            let Some((_, plan)) = prepared.get(claim) else {
                continue;
            };
            for device in &plan.devices {
                let wanted = request.is_none_or(|request| {
                    device.requests.iter().any(|r| {
                        r == request
                            || r.split_once('/')
                                .is_some_and(|(parent, _)| parent == request)
                    })
                });
                if wanted {
                    got.push((device.device.clone(), device.cdi_name.clone()));
                }
            }
        }
        if !got.is_empty() {
            devices.insert(container.name.clone(), got);
        }
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use serde_json::json;

    fn h100() -> NodeSpec {
        Topology::default_lab()
            .nodes()
            .into_iter()
            .find(|node| node.name == "h100-1")
            .expect("lab node")
    }

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": "p", "uid": "pod-uid"},
            "spec": {"nodeName": "h100-1", "containers": [
                {"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
                {"name": "side"}]},
            "status": status,
        }))
        .expect("pod")
    }

    fn special(reserved: bool, allocated: bool) -> ResourceClaim {
        let mut claim = json!({
            "metadata": {"namespace": "ml", "name": "p-extended-resources-x", "uid": "claim-uid"},
            "spec": {"devices": {"requests": [{"name": "container-0-request-0",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}},
            "status": {}});
        if allocated {
            claim["status"]["allocation"] = json!({"devices": {"results": [
                {"request": "container-0-request-0", "driver": DRIVER, "pool": "h100-1", "device": "gpu-1"},
                {"request": "container-0-request-0", "driver": DRIVER, "pool": "h100-1", "device": "gpu-3"}]}});
        }
        if reserved {
            claim["status"]["reservedFor"] =
                json!([{"resource": "pods", "name": "p", "uid": "pod-uid"}]);
        }
        serde_json::from_value(claim).expect("claim")
    }

    #[test]
    fn extended_resources_get_the_devices_of_the_claim_the_status_names() {
        let node = h100();
        let uuids = device_uuids(&node);
        let status = json!({"extendedResourceClaimStatus": {
            "resourceClaimName": "p-extended-resources-x",
            "requestMappings": [{"containerName": "cuda", "resourceName": "nvidia.com/gpu",
                "requestName": "container-0-request-0"}]}});
        let visible = format!(
            "NVIDIA_VISIBLE_DEVICES={},{}",
            uuids["gpu-1"], uuids["gpu-3"]
        );
        // (pod status, the special claim handed in, expected lines of `cuda` or why not)
        type Case = (
            Value,
            Option<ResourceClaim>,
            Result<Option<String>, NotReady>,
        );
        let table: Vec<Case> = vec![
            (json!({}), None, Ok(None)),
            (status.clone(), Some(special(true, true)), Ok(Some(visible))),
            (
                status.clone(),
                None,
                Err(NotReady::Waiting(
                    "waiting for the claim of <extended-resources>".into(),
                )),
            ),
            (
                status.clone(),
                Some(special(false, true)),
                Err(NotReady::Waiting(
                    "claim p-extended-resources-x is not reserved for the pod".into(),
                )),
            ),
            (
                status,
                Some(special(true, false)),
                Err(NotReady::Waiting(
                    "claim p-extended-resources-x is not allocated".into(),
                )),
            ),
        ];
        for (status, claim, want) in table {
            let pod = pod(status.clone());
            assert_eq!(uses_claims(&pod), claim.is_some() || status != json!({}));
            let claims: BTreeMap<String, ResourceClaim> = claim
                .into_iter()
                .map(|c| (EXTENDED_RESOURCES.to_string(), c))
                .collect();
            let got = container_devices(&pod, &node, &claims).map(|lines| {
                assert!(!lines.contains_key("side"), "unmapped container");
                lines.get("cuda").map(|l| l[0].clone())
            });
            assert_eq!(got, want, "{status}");
        }
    }

    #[test]
    fn passthrough_gpus_come_as_vfio_device_nodes() {
        let lab = include_str!("../../../examples/lab/workers/lab.yaml");
        let node = Topology::parse(lab)
            .expect("lab")
            .nodes()
            .into_iter()
            .find(|n| n.name == "passthrough-1")
            .expect("passthrough-1");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "gpu-test-vfio", "name": "pod1", "uid": "pod-uid"},
            "spec": {"nodeName": "passthrough-1",
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                "containers": [{"name": "ctr", "resources": {"claims": [{"name": "gpu"}]}}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "pod1-gpu-x"}]},
        }))
        .expect("pod");
        let claim: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"namespace": "gpu-test-vfio", "name": "pod1-gpu-x", "uid": "claim-uid"},
            "spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}]}},
            "status": {
                "allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": DRIVER, "pool": "passthrough-1", "device": "gpu-vfio-3"}]}},
                "reservedFor": [{"resource": "pods", "name": "pod1", "uid": "pod-uid"}]}}))
        .expect("claim");
        let claims = BTreeMap::from([("gpu".to_string(), claim)]);
        let lines = container_devices(&pod, &node, &claims).expect("prepared");
        assert_eq!(
            lines["ctr"],
            [
                "NVIDIA_VISIBLE_DEVICES=void".to_string(),
                "CDI devices: k8s.gpu.nvidia.com/claim=claim-uid-gpu-vfio-3".to_string(),
                "Device nodes: /dev/vfio/3".to_string(),
            ]
        );
    }
}
