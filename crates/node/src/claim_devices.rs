//! What the kubelet does with a pod's ResourceClaims before its containers start: resolve
//! each pod claim to its ResourceClaim (by name, or through `status.resourceClaimStatuses`
//! for claims generated from templates), require it to be allocated and reserved for the pod,
//! prepare it as the DRA driver's kubelet plugin would ([`crate::dra_claims::plan`]:
//! this node's devices only, CDI device IDs `k8s.gpu.nvidia.com/claim=<claimUID>-<device>`),
//! and give each container the devices of the claims (and requests) it names, with the env a
//! runtime would set (`NVIDIA_VISIBLE_DEVICES` with the device UUIDs).
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
/// fetched claims by pod claim name.
pub fn container_devices(
    pod: &Pod,
    node: &NodeSpec,
    claims: &BTreeMap<String, ResourceClaim>,
) -> Result<BTreeMap<String, Vec<String>>, NotReady> {
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let uuids = device_uuids(node);
    let known: Vec<&str> = uuids.keys().map(String::as_str).collect();
    let mut prepared: BTreeMap<&str, (String, PreparedClaim)> = BTreeMap::new();
    for (pod_claim, name) in claim_names(pod) {
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
    let kind = dra_claims::claim_cdi_kind(DRIVER);
    let mut lines = BTreeMap::new();
    for container in pod.spec.iter().flat_map(|s| &s.containers) {
        let mut visible = Vec::new();
        let mut cdi = Vec::new();
        let refs = container
            .resources
            .as_ref()
            .and_then(|r| r.claims.as_ref())
            .into_iter()
            .flatten();
        for reference in refs {
            let Some((_, plan)) = prepared.get(reference.name.as_str()) else {
                continue;
            };
            for device in &plan.devices {
                let wanted = reference.request.as_deref().is_none_or(|request| {
                    device.requests.iter().any(|r| {
                        r == request
                            || r.split_once('/')
                                .is_some_and(|(parent, _)| parent == request)
                    })
                });
                if wanted {
                    visible.push(uuids.get(&device.device).cloned().unwrap_or_default());
                    cdi.push(format!("{kind}={}", device.cdi_name));
                }
            }
        }
        if !cdi.is_empty() {
            lines.insert(
                container.name.clone(),
                vec![
                    format!("NVIDIA_VISIBLE_DEVICES={}", visible.join(",")),
                    format!("CDI devices: {}", cdi.join(" ")),
                ],
            );
        }
    }
    Ok(lines)
}
