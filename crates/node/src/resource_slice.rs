//! The DRA ResourceSlice a node of a DRA pool publishes, shaped as NVIDIA's DRA driver
//! (`gpu.nvidia.com`) publishes it: one pool per node, whole GPUs as `gpu-<index>` with
//! `type: gpu`, or — with a MIG layout — each MIG device as
//! `gpu-<index>-mig-<profile without dots>-<start>` with `type: mig`, `profile` and
//! `parentUUID`; the attributes NVIDIA's driver sets (uuid, productName, brand, architecture,
//! cudaComputeCapability, driverVersion, cudaDriverVersion, the standard
//! `resource.kubernetes.io/pciBusID` and `pcieRoot`) and `memory` capacity. Also the
//! DeviceClasses that driver installs.
//!
//! Pure: builds objects; the twin publishes them. UUIDs are derived from the node name and
//! GPU index, so they are stable across restarts.

use serde_json::{Value, json};
use tessera_devices::catalog::Vendor;

use crate::accelerators::{CUDA_VERSION, DRIVER_VERSION};
use crate::hardware::Exposure;
use crate::topology::NodeSpec;

/// NVIDIA's DRA driver name.
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";

/// The stable UUID of a simulated device (`GPU-…` or `MIG-…`).
fn device_uuid(prefix: &str, node: &str, device: &str) -> String {
    let name = format!("tessera://{node}/{device}");
    format!(
        "{prefix}-{}",
        uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, name.as_bytes())
    )
}

/// The name of a node's ResourceSlice for a driver.
pub fn slice_name(node: &str, driver: &str) -> String {
    format!("{node}-{driver}")
}

/// The ResourceSlice of a node in a DRA pool with NVIDIA GPUs; `None` for other nodes.
pub fn resource_slice(node: &NodeSpec) -> Option<Value> {
    let hardware = node.hardware.as_ref()?;
    let gpu = hardware.gpu.as_ref()?;
    if gpu.vendor != Vendor::Nvidia
        || node.devices.as_ref().map(|d| d.exposure) != Some(Exposure::Dra)
    {
        return None;
    }
    let (major, minor, revision) = DRIVER_VERSION;
    // Semantic versions: no leading zeros.
    let driver_version = format!(
        "{major}.{minor}.{}",
        revision.trim_start_matches('0').parse::<u32>().unwrap_or(0)
    );
    let (cuda_major, cuda_minor) = CUDA_VERSION;
    let compute = gpu
        .compute_capability()
        .map(|(major, minor)| format!("{major}.{minor}.0"))
        .unwrap_or_else(|| "0.0.0".into());
    let common = |slot: &tessera_devices::server::GpuSlot| {
        json!({
            "productName": {"string": gpu.product_name},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": gpu.architecture},
            "cudaComputeCapability": {"version": compute},
            "driverVersion": {"version": driver_version},
            "cudaDriverVersion": {"version": format!("{cuda_major}.{cuda_minor}.0")},
            "resource.kubernetes.io/pciBusID": {"string": slot.bus_id},
            "resource.kubernetes.io/pcieRoot": {"string": slot.pcie_root},
        })
    };
    let mut devices = Vec::new();
    for (index, slot) in hardware.server.gpus.iter().enumerate() {
        let parent = format!("gpu-{index}");
        let parent_uuid = device_uuid("GPU", &node.name, &parent);
        let base = common(slot);
        match &hardware.mig_profiles {
            None => {
                let mut attributes = base;
                attributes["type"] = json!({"string": "gpu"});
                attributes["uuid"] = json!({"string": parent_uuid});
                devices.push(json!({
                    "name": parent,
                    "attributes": attributes,
                    "capacity": {"memory": {"value": format!("{}Mi", gpu.memory_mib)}},
                }));
            }
            Some(profiles) => {
                let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
                // The layout was checked when the topology was read.
                let placements = tessera_devices::plan_layout(gpu, &names).unwrap_or_default();
                for placement in placements {
                    let name = format!(
                        "{parent}-mig-{}-{}",
                        placement.profile.replace(['.', '+'], ""),
                        placement.start
                    );
                    let memory = gpu
                        .mig_profile(&placement.profile)
                        .and_then(|p| {
                            p.memory_mib
                                .or_else(|| p.named_memory_gb().map(|gb| u64::from(gb) * 1024))
                        })
                        .unwrap_or(0);
                    let mut attributes = base.clone();
                    attributes["type"] = json!({"string": "mig"});
                    attributes["uuid"] = json!({"string": device_uuid("MIG", &node.name, &name)});
                    attributes["parentUUID"] = json!({"string": parent_uuid});
                    attributes["profile"] = json!({"string": placement.profile});
                    devices.push(json!({
                        "name": name,
                        "attributes": attributes,
                        "capacity": {"memory": {"value": format!("{memory}Mi")}},
                    }));
                }
            }
        }
    }
    Some(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(&node.name, NVIDIA_DRIVER)},
        "spec": {
            "driver": NVIDIA_DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }))
}

/// The DeviceClasses NVIDIA's DRA driver installs for GPUs and MIG devices.
pub fn nvidia_device_classes() -> Vec<Value> {
    let class = |name: &str, kind: &str, extended: Option<&str>| {
        let mut class = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!(
                "device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == '{kind}'"
            )}}]},
        });
        if let Some(resource) = extended {
            class["spec"]["extendedResourceName"] = json!(resource);
        }
        class
    };
    vec![
        class("gpu.nvidia.com", "gpu", Some("nvidia.com/gpu")),
        class("mig.nvidia.com", "mig", None),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};

    fn lab_node(name: &str) -> NodeSpec {
        Topology::default_lab()
            .nodes()
            .into_iter()
            .find(|node| node.name == name)
            .expect("lab node")
    }

    #[test]
    fn whole_gpus_are_published_with_nvidia_attributes() {
        let value = resource_slice(&lab_node("h100-1")).expect("a DRA node");
        let slice: ResourceSlice = serde_json::from_value(value.clone()).expect("typed slice");
        assert_eq!(slice.spec.driver, "gpu.nvidia.com");
        assert_eq!(slice.spec.node_name.as_deref(), Some("h100-1"));
        let devices = slice.spec.devices.expect("devices");
        assert_eq!(devices.len(), 8);
        let first = &value["spec"]["devices"][0];
        assert_eq!(first["name"], "gpu-0");
        assert_eq!(first["attributes"]["type"]["string"], "gpu");
        assert_eq!(
            first["attributes"]["productName"]["string"],
            "NVIDIA H100 80GB HBM3"
        );
        assert_eq!(
            first["attributes"]["cudaComputeCapability"]["version"],
            "9.0.0"
        );
        assert_eq!(first["attributes"]["driverVersion"]["version"], "570.172.8");
        assert_eq!(
            first["attributes"]["resource.kubernetes.io/pciBusID"]["string"],
            "0000:1b:00.0"
        );
        assert_eq!(first["capacity"]["memory"]["value"], "81559Mi");
        // Stable across calls (restarts), distinct across nodes.
        let again = resource_slice(&lab_node("h100-1")).expect("slice");
        let other = resource_slice(&lab_node("h100-2")).expect("slice");
        let uuid = |v: &Value| v["spec"]["devices"][0]["attributes"]["uuid"]["string"].clone();
        assert_eq!(uuid(&value), uuid(&again));
        assert_ne!(uuid(&value), uuid(&other));
        assert!(uuid(&value).as_str().is_some_and(|u| u.starts_with("GPU-")));
    }

    #[test]
    fn mig_layouts_publish_mig_devices() {
        let value = resource_slice(&lab_node("h200-1")).expect("a DRA node");
        let devices = value["spec"]["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 56, "7 x 1g.18gb on 8 GPUs");
        let first = &devices[0];
        assert_eq!(first["name"], "gpu-0-mig-1g18gb-0");
        assert_eq!(first["attributes"]["type"]["string"], "mig");
        assert_eq!(first["attributes"]["profile"]["string"], "1g.18gb");
        assert_eq!(first["capacity"]["memory"]["value"], "18432Mi");
        assert_eq!(
            devices[6]["attributes"]["parentUUID"],
            devices[0]["attributes"]["parentUUID"]
        );
        assert_ne!(
            devices[7]["attributes"]["parentUUID"],
            devices[0]["attributes"]["parentUUID"]
        );
    }

    #[test]
    fn only_dra_pools_with_nvidia_gpus_publish() {
        for name in ["cpu-1", "l40s-1", "control-plane-1"] {
            assert!(resource_slice(&lab_node(name)).is_none(), "{name}");
        }
        for class in nvidia_device_classes() {
            let typed: DeviceClass = serde_json::from_value(class).expect("typed class");
            assert!(typed.spec.selectors.is_some());
        }
    }
}
