//! The Node object a topology entry registers as: metadata and spec (labels, taints, pod CIDR,
//! the onboarding taint for nodes that go through it) and the status a kubelet posts
//! (capacity, allocatable, conditions, addresses, node info), and the Lease its heartbeat
//! renews. Pure: the twins send these, and the simulator schedules against them without an
//! API server. Knows nothing about clients.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::time::micro_timestamp;

use crate::onboarding::{ONBOARDING_LABEL, ONBOARDING_TAINT};
use crate::topology::NodeSpec;

/// The kubelet version node twins report.
pub const KUBELET_VERSION: &str = "v1.34.1-tessera";

/// The Node a topology entry creates (metadata and spec; the status comes from
/// [`node_status`]).
pub fn registration(spec: &NodeSpec) -> Value {
    let mut taints: Vec<Value> = spec
        .taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect}))
        .collect();
    let mut labels = spec.labels.clone();
    if spec.onboarding {
        taints.push(json!({"key": ONBOARDING_TAINT, "effect": "NoSchedule"}));
        labels.insert(ONBOARDING_LABEL.into(), "validating".into());
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "spec": {
            "podCIDR": spec.pod_cidr(),
            "podCIDRs": [spec.pod_cidr()],
            "providerID": format!("tessera://{}", spec.name),
            // Omitted when empty, as Go's omitempty renders it.
            "taints": (!taints.is_empty()).then_some(taints),
        },
    })
}

/// The status a kubelet posts for a healthy node at `now` (RFC 3339).
pub fn node_status(spec: &NodeSpec, now: &str) -> Value {
    let quantities = |map: &BTreeMap<String, tessera_model::Quantity>| -> Value {
        map.iter()
            .map(|(k, v)| (k.clone(), json!(v.to_canonical())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    json!({"status": {
        "capacity": quantities(&spec.capacity),
        "allocatable": quantities(&spec.allocatable),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": spec.internal_ip()},
            {"type": "Hostname", "address": spec.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "runtimeHandlers": crate::runtime_handlers::node_status_handlers(&spec.runtime_handlers),
        "nodeInfo": {
            "machineID": format!("{:032x}", spec.index as u128 + 1),
            "systemUUID": format!("00000000-0000-0000-0000-{:012x}", spec.index + 1),
            "bootID": format!("tessera-{}", spec.name),
            "kernelVersion": "6.1.0-tessera",
            "osImage": "Tessera node twin",
            "containerRuntimeVersion": "tessera-twin://0.1.0",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }})
}

/// The node's Lease in `kube-node-lease`, renewed at `now`.
pub fn lease(spec: &NodeSpec, now: SystemTime) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": spec.name, "namespace": "kube-node-lease",
                     "ownerReferences": []},
        "spec": {"holderIdentity": spec.name, "leaseDurationSeconds": 40,
                 "renewTime": micro_timestamp(now)},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn the_lease_is_held_by_the_node_and_renewed_at_now() {
        let spec = Topology::default_lab().nodes().remove(0);
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_767_323_045_000_001);
        let lease = lease(&spec, now);
        assert_eq!(lease["metadata"]["name"], spec.name.as_str());
        assert_eq!(lease["metadata"]["namespace"], "kube-node-lease");
        assert_eq!(lease["spec"]["holderIdentity"], spec.name.as_str());
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-02T03:04:05.000001Z");
    }
}
