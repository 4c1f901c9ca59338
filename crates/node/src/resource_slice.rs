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
use tessera_devices::GpuModel;
use tessera_devices::catalog::Vendor;
use tessera_devices::server::GpuSlot;

use crate::accelerators::{CUDA_VERSION, DRIVER_VERSION};
use crate::hardware::{Exposure, MigMode};
use crate::topology::NodeSpec;
use crate::worker_model::Machine;

/// NVIDIA's DRA driver name.
pub const NVIDIA_DRIVER: &str = "gpu.nvidia.com";

/// The stable UUID of a simulated device (`GPU-…` or `MIG-…`).
pub(crate) fn device_uuid(prefix: &str, node: &str, device: &str) -> String {
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

/// The memory of a MIG profile in MiB (stated, or from the name's GB).
fn profile_memory_mib(gpu: &GpuModel, profile: &str) -> u64 {
    gpu.mig_profile(profile)
        .and_then(|p| {
            p.memory_mib
                .or_else(|| p.named_memory_gb().map(|gb| u64::from(gb) * 1024))
        })
        .unwrap_or(0)
}

/// A MIG device's name: NVIDIA's scheme without the NVML profile ID.
pub fn mig_device_name(parent: &str, profile: &str, start: u8) -> String {
    format!("{parent}-mig-{}-{start}", profile.replace(['.', '+'], ""))
}

/// The name of GPU `index`'s counter set (dynamic MIG).
fn counter_set(index: usize) -> String {
    format!("gpu-{index}-counter-set")
}

/// What a device on `[start, start + size)` memory slices with `compute` slices consumes.
fn consumption(index: usize, start: u8, size: u8, compute: u8) -> Value {
    let mut counters = serde_json::Map::new();
    counters.insert(
        "computeSlices".into(),
        json!({"value": compute.to_string()}),
    );
    for slice in start..start + size {
        counters.insert(format!("memorySlice{slice}"), json!({"value": "1"}));
    }
    json!([{"counterSet": counter_set(index), "counters": counters}])
}

/// The ResourceSlices of a node in a DRA pool with NVIDIA GPUs (none for other nodes; a
/// passthrough host's GPUs as vfio devices, [`crate::worker_model::vfio_slices`]): one
/// slice with every device, or — with dynamic MIG — one slice per GPU holding its counter set
/// and its partitionable devices (1.34 keeps counters beside the devices that use them, and
/// a slice with counters holds at most 64 devices).
pub fn resource_slices(node: &NodeSpec) -> Vec<Value> {
    let Some(hardware) = node.hardware.as_ref() else {
        return Vec::new();
    };
    let Some(gpu) = hardware.gpu.as_ref() else {
        return Vec::new();
    };
    if gpu.vendor == Vendor::Nvidia && node.machine == Machine::VmPassthrough {
        return crate::worker_model::vfio_slices(&node.name, &hardware.server.gpus, gpu);
    }
    if gpu.vendor != Vendor::Nvidia
        || node.devices.as_ref().map(|d| d.exposure) != Some(Exposure::Dra)
    {
        return Vec::new();
    }
    nvidia_slices(
        &node.name,
        &hardware.server.gpus,
        gpu,
        hardware.mig.as_ref(),
    )
}

/// The ResourceSlices NVIDIA's DRA driver publishes for `gpus` of one model on `node_name`
/// (also what `tessera agent discover` shows for a real machine).
pub fn nvidia_slices(
    node_name: &str,
    gpus: &[GpuSlot],
    gpu: &GpuModel,
    mig_mode: Option<&MigMode>,
) -> Vec<Value> {
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
    let common = |slot: &GpuSlot| {
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
    let device = |name: &str, attributes: Value, memory_mib: u64| {
        json!({
            "name": name,
            "attributes": attributes,
            "capacity": {"memory": {"value": format!("{memory_mib}Mi")}},
        })
    };
    // (devices, shared counters) per slice.
    let mut slices: Vec<(Vec<Value>, Option<Value>)> = Vec::new();
    let mut whole = Vec::new();
    for (index, slot) in gpus.iter().enumerate() {
        let parent = format!("gpu-{index}");
        let parent_uuid = device_uuid("GPU", node_name, &parent);
        let base = common(slot);
        let mig_attributes = |profile: &str| {
            let mut attributes = base.clone();
            attributes["type"] = json!({"string": "mig"});
            attributes["parentUUID"] = json!({"string": parent_uuid});
            attributes["profile"] = json!({"string": profile});
            attributes
        };
        match (mig_mode, &gpu.mig) {
            (Some(MigMode::Static(profiles)), _) => {
                let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
                // The layout was checked when the topology was read.
                let placements = tessera_devices::plan_layout(gpu, &names).unwrap_or_default();
                for placement in placements {
                    let name = mig_device_name(&parent, &placement.profile, placement.start);
                    let mut attributes = mig_attributes(&placement.profile);
                    attributes["uuid"] = json!({"string": device_uuid("MIG", node_name, &name)});
                    let memory = profile_memory_mib(gpu, &placement.profile);
                    whole.push(device(&name, attributes, memory));
                }
            }
            (Some(MigMode::Dynamic), Some(mig)) => {
                let mut counters = serde_json::Map::new();
                counters.insert(
                    "computeSlices".into(),
                    json!({"value": mig.compute_slices.to_string()}),
                );
                for slice in 0..mig.memory_slices {
                    counters.insert(format!("memorySlice{slice}"), json!({"value": "1"}));
                }
                let mut attributes = base.clone();
                attributes["type"] = json!({"string": "gpu"});
                attributes["uuid"] = json!({"string": parent_uuid});
                let mut full = device(&parent, attributes, gpu.memory_mib);
                full["consumesCounters"] =
                    consumption(index, 0, mig.memory_slices, mig.compute_slices);
                let mut devices = vec![full];
                for profile in &mig.profiles {
                    for start in &profile.starts {
                        let name = mig_device_name(&parent, &profile.name, *start);
                        let memory = profile_memory_mib(gpu, &profile.name);
                        let mut partition = device(&name, mig_attributes(&profile.name), memory);
                        partition["consumesCounters"] =
                            consumption(index, *start, profile.size, profile.compute_slices);
                        devices.push(partition);
                    }
                }
                let shared = json!([{"name": counter_set(index), "counters": counters}]);
                slices.push((devices, Some(shared)));
            }
            _ => {
                let mut attributes = base;
                attributes["type"] = json!({"string": "gpu"});
                attributes["uuid"] = json!({"string": parent_uuid});
                whole.push(device(&parent, attributes, gpu.memory_mib));
            }
        }
    }
    if !whole.is_empty() {
        slices.push((whole, None));
    }
    let count = slices.len();
    slices
        .into_iter()
        .enumerate()
        .map(|(i, (devices, shared))| {
            let name = if count == 1 {
                slice_name(node_name, NVIDIA_DRIVER)
            } else {
                format!("{}-{i}", slice_name(node_name, NVIDIA_DRIVER))
            };
            let mut slice = json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {
                    "driver": NVIDIA_DRIVER,
                    "nodeName": node_name,
                    "pool": {"name": node_name, "generation": 1, "resourceSliceCount": count},
                    "devices": devices,
                },
            });
            if let Some(shared) = shared {
                slice["spec"]["sharedCounters"] = shared;
            }
            slice
        })
        .collect()
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

    fn single(node: &NodeSpec) -> Value {
        let mut slices = resource_slices(node);
        assert_eq!(slices.len(), 1, "{}", node.name);
        slices.remove(0)
    }

    fn lab_node(name: &str) -> NodeSpec {
        Topology::default_lab()
            .nodes()
            .into_iter()
            .find(|node| node.name == name)
            .expect("lab node")
    }

    #[test]
    fn whole_gpus_are_published_with_nvidia_attributes() {
        let value = single(&lab_node("h100-1"));
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
        let again = single(&lab_node("h100-1"));
        let other = single(&lab_node("h100-2"));
        let uuid = |v: &Value| v["spec"]["devices"][0]["attributes"]["uuid"]["string"].clone();
        assert_eq!(uuid(&value), uuid(&again));
        assert_ne!(uuid(&value), uuid(&other));
        assert!(uuid(&value).as_str().is_some_and(|u| u.starts_with("GPU-")));
    }

    #[test]
    fn mig_layouts_publish_mig_devices() {
        let value = single(&lab_node("h200-1"));
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
    fn dynamic_mig_publishes_partitionable_devices_with_shared_counters() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: h100\n  count: 1\n  server: dgx-h100\n  devices: {exposure: dra, sharing: {mig: {layout: dynamic}}}\n",
        )
        .expect("topology");
        let node = &topology.nodes()[0];
        let slices = resource_slices(node);
        assert_eq!(slices.len(), 8, "one slice per GPU");
        for (i, value) in slices.iter().enumerate() {
            let slice: ResourceSlice = serde_json::from_value(value.clone()).expect("typed");
            assert_eq!(slice.spec.pool.resource_slice_count, 8);
            assert_eq!(
                slice.metadata.name.as_deref(),
                Some(format!("h100-1-gpu.nvidia.com-{i}").as_str())
            );
            let devices = slice.spec.devices.expect("devices");
            assert_eq!(devices.len(), 26, "the GPU and every MIG placement");
            assert!(
                devices.len() <= 64,
                "the 1.34 limit for slices with counters"
            );
            let shared = slice.spec.shared_counters.expect("counters");
            assert_eq!(shared[0].name, format!("gpu-{i}-counter-set"));
            assert_eq!(
                shared[0].counters.len(),
                9,
                "computeSlices and 8 memory slices"
            );
        }
        let devices = slices[0]["spec"]["devices"].as_array().expect("devices");
        let find = |name: &str| {
            devices
                .iter()
                .find(|d| d["name"] == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        assert_eq!(
            find("gpu-0-mig-3g40gb-4")["consumesCounters"],
            json!([{"counterSet": "gpu-0-counter-set", "counters": {
                "computeSlices": {"value": "3"}, "memorySlice4": {"value": "1"},
                "memorySlice5": {"value": "1"}, "memorySlice6": {"value": "1"},
                "memorySlice7": {"value": "1"}}}])
        );
        let full = &find("gpu-0")["consumesCounters"][0]["counters"];
        assert_eq!(full["computeSlices"]["value"], "7");
        assert_eq!(full["memorySlice0"]["value"], "1");
        assert_eq!(
            find("gpu-0-mig-1g10gbme-6")["attributes"]["profile"]["string"],
            "1g.10gb+me"
        );
    }

    #[test]
    fn only_dra_pools_with_nvidia_gpus_publish() {
        for name in ["cpu-1", "l40s-1", "control-plane-1"] {
            assert!(resource_slices(&lab_node(name)).is_empty(), "{name}");
        }
        for class in nvidia_device_classes() {
            let typed: DeviceClass = serde_json::from_value(class).expect("typed class");
            assert!(typed.spec.selectors.is_some());
        }
    }
}
