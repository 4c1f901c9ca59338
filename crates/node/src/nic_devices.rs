//! RDMA NICs as DRA devices: the ResourceSlice a node publishes for its NICs on RDMA networks
//! (driver `rdma.tessera.dev`, one device per NIC) and the DeviceClass `rdma.tessera.dev`.
//! Each device carries the standard `resource.kubernetes.io/pcieRoot` and `pciBusID`
//! attributes GPUs carry, so one claim's `matchAttribute` constraint on the PCIe root pairs a
//! GPU with the NIC behind the same PCIe switch, plus `ifName`, `network`, `numaNode`,
//! `pcieSwitch` and `linkSpeedGbps`.
//!
//! Pure: builds objects; the twin publishes them. Knows nothing of GPUs or of how a claim
//! is allocated.

use serde_json::{Value, json};

use crate::resource_slice::slice_name;
use crate::topology::NodeSpec;

/// The DRA driver (and DeviceClass) name of RDMA NICs.
pub const RDMA_DRIVER: &str = "rdma.tessera.dev";

/// A NIC's device name: its interface name as a DNS label (`mlx5_0` → `mlx5-0`).
pub fn device_name(nic: &str) -> String {
    nic.to_ascii_lowercase().replace(['_', '.'], "-")
}

/// The ResourceSlice of `node`'s NICs on RDMA networks (none when it has none).
pub fn rdma_slices(node: &NodeSpec) -> Vec<Value> {
    let devices: Vec<Value> = node
        .nics
        .iter()
        .filter(|nic| nic.rdma)
        .map(|nic| {
            let mut attributes = json!({
                "ifName": {"string": nic.name},
                "network": {"string": nic.network},
                "numaNode": {"int": nic.numa},
                "linkSpeedGbps": {"int": nic.gbps},
            });
            let optional = [
                ("resource.kubernetes.io/pcieRoot", &nic.pcie_root),
                ("resource.kubernetes.io/pciBusID", &nic.bus_id),
                ("pcieSwitch", &nic.pcie_switch),
            ];
            for (name, value) in optional {
                if let Some(value) = value {
                    attributes[name] = json!({"string": value});
                }
            }
            json!({"name": device_name(&nic.name), "attributes": attributes})
        })
        .collect();
    if devices.is_empty() {
        return Vec::new();
    }
    vec![json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(&node.name, RDMA_DRIVER)},
        "spec": {
            "driver": RDMA_DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })]
}

/// The DeviceClass of RDMA NICs.
pub fn rdma_device_classes() -> Vec<Value> {
    vec![json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": RDMA_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{RDMA_DRIVER}'")}}]},
    })]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    const LAB: &str = include_str!("../../../examples/lab/networks/lab.yaml");

    #[test]
    fn rdma_nics_are_published_with_the_gpus_pcie_root() {
        let topology = Topology::parse(LAB).expect("the networks lab parses");
        let nodes = topology.nodes();
        let node = |name: &str| nodes.iter().find(|n| n.name == name).expect("node");
        // (node, devices, first device's pcieRoot, its network)
        let cases = [
            ("h200-1", 8, Some("pci0000:15"), Some("hpn")),
            ("h100-2", 8, Some("pci0000:15"), Some("hpn")),
            ("cpu-1", 0, None, None),
        ];
        for (name, count, root, network) in cases {
            let slices = rdma_slices(node(name));
            let devices: Vec<&Value> = slices
                .iter()
                .flat_map(|s| s["spec"]["devices"].as_array().into_iter().flatten())
                .collect();
            assert_eq!(devices.len(), count, "{name}");
            let first = devices.first();
            let attribute = |key: &str| first.and_then(|d| d["attributes"][key]["string"].as_str());
            assert_eq!(attribute("resource.kubernetes.io/pcieRoot"), root, "{name}");
            assert_eq!(attribute("network"), network, "{name}");
        }
        let h200 = rdma_slices(node("h200-1"));
        assert_eq!(h200[0]["metadata"]["name"], "h200-1-rdma.tessera.dev");
        assert_eq!(h200[0]["spec"]["devices"][7]["name"], "mlx5-7");
        assert_eq!(
            h200[0]["spec"]["devices"][7]["attributes"]["numaNode"]["int"],
            1
        );
        // The storage and management NICs are not RDMA devices.
        assert!(node("h200-1").nics.len() > 8);
    }
}
