//! Which whole GPUs each pod holds on device-plugin nodes, as the kubelet's device manager
//! tracks it: a pod's `nvidia.com/gpu` limits are admitted through the Topology Manager
//! ([`crate::device_admission`]) when its containers start, split between its containers in
//! order, and released when the pod ends or is deleted. Also what a container then sees: the
//! env and CDI device names NVIDIA's device plugin (CDI mode, UUID device IDs) gives it.
//!
//! Pure bookkeeping; the twin calls it. MIG and shared GPUs are not assigned here.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use tessera_model::Quantity;

use crate::device_admission::{AdmissionError, admit_gpus};
use crate::hardware::Exposure;
use crate::resource_slice::device_uuid;
use crate::topology::NodeSpec;

/// The extended resource assigned here.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// A pod: namespace and name.
type PodKey = (String, String);

/// GPUs held per node and pod.
#[derive(Debug, Default)]
pub struct GpuAssignments {
    held: BTreeMap<String, BTreeMap<PodKey, Vec<usize>>>,
}

/// Whole GPUs a container requests (`limits`, as for every extended resource).
fn container_gpus(container: &k8s_openapi::api::core::v1::Container) -> usize {
    container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|limits| limits.get(GPU_RESOURCE))
        .and_then(|q| q.0.parse::<Quantity>().ok())
        .map_or(0, |q| usize::try_from(q.value()).unwrap_or(0))
}

/// Whether a node hands out whole GPUs through the device plugin.
fn assigns_whole_gpus(node: &NodeSpec) -> bool {
    node.devices
        .as_ref()
        .is_some_and(|d| d.exposure == Exposure::DevicePlugin && d.sharing.is_none())
        && node
            .hardware
            .as_ref()
            .is_some_and(|h| h.gpu.as_ref().is_some_and(|g| g.vendor_id == "10de"))
}

impl GpuAssignments {
    /// Admits a starting pod's GPUs on `node`; returns each container's GPU indexes (by
    /// container name; empty when the pod asks for none or the node does not assign them).
    pub fn admit(
        &mut self,
        node: &NodeSpec,
        key: &PodKey,
        pod: &Pod,
    ) -> Result<BTreeMap<String, Vec<usize>>, AdmissionError> {
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        let wanted: usize = containers.iter().map(container_gpus).sum();
        let (true, Some(hardware)) = (assigns_whole_gpus(node), node.hardware.as_ref()) else {
            return Ok(BTreeMap::new());
        };
        if wanted == 0 {
            return Ok(BTreeMap::new());
        }
        let held = self.held.entry(node.name.clone()).or_default();
        if let Some(existing) = held.get(key) {
            // Already admitted (a repeated start): hand out the same devices.
            return Ok(split(containers, existing));
        }
        let in_use: BTreeSet<usize> = held.values().flatten().copied().collect();
        let gpus = admit_gpus(
            &hardware.server,
            &in_use,
            wanted,
            &node.kubelet.topology_manager_policy,
            GPU_RESOURCE,
        )?;
        held.insert(key.clone(), gpus.clone());
        Ok(split(containers, &gpus))
    }

    /// Frees a pod's GPUs.
    pub fn release(&mut self, node: &str, key: &PodKey) {
        if let Some(held) = self.held.get_mut(node) {
            held.remove(key);
        }
    }

    /// GPUs in use on a node.
    /// The pods holding GPU `gpu` on `node`.
    pub fn holders(&self, node: &str, gpu: usize) -> Vec<PodKey> {
        self.held
            .get(node)
            .into_iter()
            .flatten()
            .filter(|(_, gpus)| gpus.contains(&gpu))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// The GPUs held on `node`.
    pub fn in_use(&self, node: &str) -> BTreeSet<usize> {
        self.held
            .get(node)
            .map(|held| held.values().flatten().copied().collect())
            .unwrap_or_default()
    }
}

fn split(
    containers: &[k8s_openapi::api::core::v1::Container],
    gpus: &[usize],
) -> BTreeMap<String, Vec<usize>> {
    let mut next = 0;
    containers
        .iter()
        .map(|container| {
            let count = container_gpus(container).min(gpus.len().saturating_sub(next));
            let mine = gpus[next..next + count].to_vec();
            next += count;
            (container.name.clone(), mine)
        })
        .collect()
}

/// The log lines a container with these GPUs prints: the env and CDI devices it was given.
pub fn device_log_lines(node: &str, gpus: &[usize]) -> Vec<String> {
    if gpus.is_empty() {
        return Vec::new();
    }
    let uuids: Vec<String> = gpus
        .iter()
        .map(|i| device_uuid("GPU", node, &format!("gpu-{i}")))
        .collect();
    let cdi: Vec<String> = uuids
        .iter()
        .map(|u| format!("nvidia.com/gpu={u}"))
        .collect();
    vec![
        format!("NVIDIA_VISIBLE_DEVICES={}", uuids.join(",")),
        format!("CDI devices: {}", cdi.join(" ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use serde_json::json;

    fn pod(gpus: &[u32]) -> Pod {
        let containers: Vec<_> = gpus
            .iter()
            .enumerate()
            .map(|(i, n)| json!({"name": format!("c{i}"), "image": "x", "resources": {"limits": {"nvidia.com/gpu": n.to_string()}}}))
            .collect();
        serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}),
        )
        .expect("pod")
    }

    fn node(policy: &str) -> NodeSpec {
        let text = format!(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 1\n  server: dgx-h100\n  devices: {{exposure: device-plugin}}\n  kubelet: {{topologyManagerPolicy: {policy}}}\n"
        );
        Topology::parse(&text).expect("topology").nodes().remove(0)
    }

    #[test]
    fn pods_hold_gpus_until_released() {
        let node = node("single-numa-node");
        let mut assignments = GpuAssignments::default();
        let first = ("ns".to_string(), "a".to_string());
        let second = ("ns".to_string(), "b".to_string());
        let got = assignments
            .admit(&node, &first, &pod(&[1, 2]))
            .expect("admitted");
        assert_eq!(got["c0"], [0]);
        assert_eq!(got["c1"], [1, 2]);
        // Three GPUs held on NUMA 0: a 4-GPU pod fits only NUMA 1.
        let got = assignments
            .admit(&node, &second, &pod(&[4]))
            .expect("admitted");
        assert_eq!(got["c0"], [4, 5, 6, 7]);
        let third = ("ns".to_string(), "c".to_string());
        assert_eq!(
            assignments.admit(&node, &third, &pod(&[2])),
            Err(AdmissionError::Unavailable {
                resource: GPU_RESOURCE.into(),
                requested: 2,
                available: 1
            })
        );
        assignments.release(&node.name, &first);
        assert_eq!(assignments.in_use(&node.name), BTreeSet::from([4, 5, 6, 7]));
        let got = assignments
            .admit(&node, &third, &pod(&[2]))
            .expect("admitted");
        assert_eq!(got["c0"], [0, 1]);
        // Three GPUs held on each NUMA node: two more fit on neither alone.
        let mut split = GpuAssignments::default();
        for name in ["x", "y"] {
            split
                .admit(&node, &("ns".into(), name.into()), &pod(&[3]))
                .expect("admitted");
        }
        assert_eq!(split.in_use(&node.name), BTreeSet::from([0, 1, 2, 4, 5, 6]));
        assert_eq!(
            split.admit(&node, &("ns".into(), "w".into()), &pod(&[2])),
            Err(AdmissionError::TopologyAffinity)
        );
        let lines = device_log_lines(&node.name, &[0, 1]);
        assert!(lines[0].starts_with("NVIDIA_VISIBLE_DEVICES=GPU-"));
        assert!(lines[1].starts_with("CDI devices: nvidia.com/gpu=GPU-"));
    }
}
