//! What preparing a ResourceClaim means on this node, decided without I/O: which of the
//! claim's allocated devices belong to this driver and node, and the CDI device each gets;
//! and the checkpoint of prepared claims that survives a plugin restart (so unprepare after
//! a restart still finds the spec files, and prepare stays idempotent).
//!
//! Shared by the DRA kubelet plugin (`tessera-plugins`, which serves it over gRPC and writes
//! the CDI specs and the checkpoint) and by the node twins ([`crate::claim_devices`]). Knows
//! nothing of gRPC or of how claims are fetched.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceClaim;
use serde::{Deserialize, Serialize};

/// The CDI kind NVIDIA's DRA driver writes claim specs under.
pub fn claim_cdi_kind(driver: &str) -> String {
    format!("k8s.{driver}/claim")
}

/// A device this node prepared for a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedDevice {
    /// The claim requests it serves (`gpu`, or `gpu/small` for a firstAvailable choice).
    pub requests: Vec<String>,
    /// Its pool (the node name).
    pub pool: String,
    /// Its name in the ResourceSlice.
    pub device: String,
    /// Its CDI device name within the claim's spec (`<claimUID>-<device>`).
    pub cdi_name: String,
}

/// A claim this node prepared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedClaim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The devices prepared for it.
    pub devices: Vec<PreparedDevice>,
}

/// The claims prepared on this node, by claim UID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Prepared claims by UID.
    pub claims: BTreeMap<String, PreparedClaim>,
}

/// Decides what preparing `claim` (which the kubelet named by `uid`) means for `driver` on
/// `node`, whose devices are `known`. The error is the message the kubelet shows.
pub fn plan(
    claim: &ResourceClaim,
    uid: &str,
    driver: &str,
    node: &str,
    known: &[&str],
) -> Result<PreparedClaim, String> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let stored_uid = claim.metadata.uid.as_deref().unwrap_or_default();
    if stored_uid != uid {
        return Err(format!(
            "claim {namespace}/{name}: UID is {stored_uid:?}, the kubelet asked for {uid:?} \
             (the claim was deleted and recreated)"
        ));
    }
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref())
        .ok_or_else(|| format!("claim {namespace}/{name} is not allocated"))?;
    let mut devices: Vec<PreparedDevice> = Vec::new();
    for result in results.iter().filter(|r| r.driver == driver) {
        if result.pool != node {
            return Err(format!(
                "claim {namespace}/{name}: device {}/{} is not on node {node}",
                result.pool, result.device
            ));
        }
        if !known.contains(&result.device.as_str()) {
            return Err(format!(
                "claim {namespace}/{name}: device {} is not published by node {node}",
                result.device
            ));
        }
        // One device may serve several requests (admin access, shared devices).
        if let Some(existing) = devices.iter_mut().find(|d| d.device == result.device) {
            existing.requests.push(result.request.clone());
            continue;
        }
        devices.push(PreparedDevice {
            requests: vec![result.request.clone()],
            pool: result.pool.clone(),
            device: result.device.clone(),
            cdi_name: format!("{uid}-{}", result.device),
        });
    }
    Ok(PreparedClaim {
        namespace,
        name,
        devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(uid: &str, results: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ml", "name": "gpus", "uid": uid},
            "spec": {"devices": {"requests": []}},
            "status": results,
        }))
        .expect("claim")
    }

    fn allocated(results: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"allocation": {"devices": {"results": results}}})
    }

    #[test]
    fn plans_the_devices_of_this_driver_and_node() {
        let known = ["gpu-0", "gpu-1"];
        let two = allocated(serde_json::json!([
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-1"},
            {"request": "nic", "driver": "rdma.example.com", "pool": "h100-1", "device": "mlx5_0"},
            {"request": "admin", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-1"},
        ]));
        type Want<'a> = Result<Vec<(&'a str, Vec<&'a str>)>, &'a str>;
        let cases: [(&str, serde_json::Value, Want); 5] = [
            ("u1", two, Ok(vec![("gpu-1", vec!["gpu", "admin"])])),
            (
                "u1",
                serde_json::json!({}),
                Err("claim ml/gpus is not allocated"),
            ),
            (
                "u1",
                allocated(serde_json::json!([
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-2", "device": "gpu-0"}
                ])),
                Err("claim ml/gpus: device h100-2/gpu-0 is not on node h100-1"),
            ),
            (
                "u1",
                allocated(serde_json::json!([
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-7"}
                ])),
                Err("claim ml/gpus: device gpu-7 is not published by node h100-1"),
            ),
            (
                "u2",
                allocated(serde_json::json!([])),
                Err(
                    "claim ml/gpus: UID is \"u2\", the kubelet asked for \"u1\" (the claim was deleted and recreated)",
                ),
            ),
        ];
        for (i, (stored_uid, status, want)) in cases.into_iter().enumerate() {
            let got = plan(
                &claim(stored_uid, status),
                "u1",
                "gpu.nvidia.com",
                "h100-1",
                &known,
            );
            let got = got.map(|p| {
                p.devices
                    .into_iter()
                    .map(|d| {
                        assert_eq!(d.cdi_name, format!("u1-{}", d.device));
                        (d.device, d.requests)
                    })
                    .collect::<Vec<_>>()
            });
            let want = want
                .map(|w| {
                    w.into_iter()
                        .map(|(d, r)| {
                            (
                                d.to_string(),
                                r.into_iter().map(String::from).collect::<Vec<_>>(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .map_err(String::from);
            assert_eq!(got, want, "case {i}");
        }
    }
}
