//! Worker models: what a GPU node is underneath — bare metal, a host whose GPUs are bound to
//! vfio-pci for passthrough to VMs, or a host whose GPUs are split into vGPUs by NVIDIA's vGPU
//! manager — and what follows for the node: the NVIDIA GPU Operator's sandbox-workload labels
//! (`nvidia.com/gpu.workload.config` and the `nvidia.com/gpu.deploy.*` operands it deploys for
//! that configuration), what its devices are offered as (passthrough: the DRA driver's `vfio`
//! devices under the `vfio.gpu.nvidia.com` DeviceClass, as NVIDIA's DRA driver publishes them
//! with its `PassthroughSupport` feature gate; vGPU: the KubeVirt GPU device plugin's extended
//! resource per vGPU type), and which GPU Feature Discovery labels stay (none on VM hosts: GFD
//! is not deployed there).
//!
//! Pure: decided from the pool's declaration and its checked hardware. Knows nothing of the
//! maintenance planner (see `tessera-maintenance`'s `worker` module) or of the API server.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tessera_devices::server::GpuSlot;
use tessera_devices::{GpuModel, VgpuType};

use crate::resource_slice::{NVIDIA_DRIVER, device_uuid, slice_name};

/// The GPU Operator's node label choosing a node's sandbox-workload configuration.
pub const WORKLOAD_CONFIG_LABEL: &str = "nvidia.com/gpu.workload.config";
/// The vGPU Device Manager's label naming the vGPU configuration of a node.
pub const VGPU_CONFIG_LABEL: &str = "nvidia.com/vgpu.config";
/// The version of a vGPU host's vGPU manager (the name GPU Feature Discovery gives it in the
/// guests), which guest drivers must match by branch.
pub const HOST_DRIVER_LABEL: &str = "nvidia.com/vgpu.host-driver-version";
/// The DeviceClass of GPUs bound to vfio-pci (NVIDIA's DRA driver).
pub const VFIO_DEVICE_CLASS: &str = "vfio.gpu.nvidia.com";
/// The `type` attribute of a vfio device.
pub const VFIO_TYPE: &str = "vfio";

/// What a pool's nodes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Machine {
    /// Containers on the host's own GPUs (the GPU Operator's `container` configuration).
    #[default]
    BareMetal,
    /// GPUs bound to vfio-pci, each handed whole to one VM.
    VmPassthrough,
    /// GPUs split into vGPUs by the host's vGPU manager, one per VM.
    VmVgpu,
}

impl Machine {
    /// Every model, in the order the topology file's error lists them.
    pub const ALL: [Machine; 3] = [Machine::BareMetal, Machine::VmPassthrough, Machine::VmVgpu];

    /// The topology file's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Machine::BareMetal => "bare-metal",
            Machine::VmPassthrough => "vm-passthrough",
            Machine::VmVgpu => "vm-vgpu",
        }
    }

    /// Reads the topology file's spelling.
    pub fn parse(text: &str) -> Result<Machine, String> {
        Machine::ALL
            .into_iter()
            .find(|m| m.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = Machine::ALL.iter().map(|m| m.as_str()).collect();
                format!("{text:?} must be one of {}", names.join(", "))
            })
    }

    /// The GPU Operator's `nvidia.com/gpu.workload.config` value.
    pub fn workload_config(self) -> &'static str {
        match self {
            Machine::BareMetal => "container",
            Machine::VmPassthrough => "vm-passthrough",
            Machine::VmVgpu => "vm-vgpu",
        }
    }

    /// Whether the node's GPUs serve VMs (no NVIDIA driver for containers, no GFD).
    pub fn is_vm(self) -> bool {
        self != Machine::BareMetal
    }
}

/// The GPU Operator's operands for a sandbox configuration, as its `gpuStateLabels` table has
/// them (`nvidia.com/gpu.deploy.<operand>: "true"`). Container nodes get theirs from the
/// operator's labeller (`tessera up --gpu-operator`), so only VM hosts are listed here.
fn sandbox_operands(machine: Machine) -> &'static [&'static str] {
    match machine {
        Machine::BareMetal => &[],
        Machine::VmPassthrough => &[
            "sandbox-device-plugin",
            "sandbox-validator",
            "vfio-manager",
            "kata-manager",
            "cc-manager",
            "client",
        ],
        Machine::VmVgpu => &[
            "sandbox-device-plugin",
            "vgpu-manager",
            "vgpu-device-manager",
            "sandbox-validator",
            "cc-manager",
            "client",
        ],
    }
}

/// The labels a node of this model carries: the workload configuration, the operands the
/// operator deploys for it, and on a vGPU host the vGPU Device Manager's configuration.
pub fn labels(machine: Machine, vgpu: Option<&VgpuType>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    labels.insert(
        WORKLOAD_CONFIG_LABEL.to_string(),
        machine.workload_config().to_string(),
    );
    for operand in sandbox_operands(machine) {
        labels.insert(format!("nvidia.com/gpu.deploy.{operand}"), "true".into());
    }
    if let (Machine::VmVgpu, Some(vgpu)) = (machine, vgpu) {
        labels.insert(VGPU_CONFIG_LABEL.to_string(), vgpu.name.to_string());
        let (major, minor, revision) = crate::accelerators::DRIVER_VERSION;
        labels.insert(
            HOST_DRIVER_LABEL.to_string(),
            format!("{major}.{minor}.{revision}"),
        );
    }
    labels
}

/// Whether a label is one GPU Feature Discovery sets (absent on VM hosts, where GFD is not
/// deployed); NFD's PCI label and the operator's own are not.
pub fn is_gfd_label(key: &str) -> bool {
    let Some(name) = key.strip_prefix("nvidia.com/") else {
        return false;
    };
    !(name.starts_with("gpu.deploy.")
        || name.starts_with("gpu.workload.")
        || name.starts_with("vgpu.config")
        || name.starts_with("vgpu.host-driver"))
}

/// The extended resources a node of this model registers beside what its `devices` declare:
/// on a vGPU host, the KubeVirt GPU device plugin's resource for the configured type, `per_gpu`
/// times each GPU.
pub fn extended_resources(
    machine: Machine,
    vgpu: Option<&VgpuType>,
    gpus: usize,
) -> BTreeMap<String, u64> {
    let mut resources = BTreeMap::new();
    if let (Machine::VmVgpu, Some(vgpu)) = (machine, vgpu) {
        resources.insert(vgpu.resource_name(), u64::from(vgpu.per_gpu) * gpus as u64);
    }
    resources
}

/// A passthrough GPU's device name (the DRA driver's `gpu-vfio-<index>`).
pub fn vfio_device_name(index: usize) -> String {
    format!("gpu-vfio-{index}")
}

/// The ResourceSlice NVIDIA's DRA driver publishes for GPUs bound to vfio-pci: one device per
/// GPU, `type: vfio`, with the driver's vfio attributes (uuid, deviceID, vendorID, numa,
/// productName, iommuFDEnabled, the standard pciBusID and pcieRoot) and `addressableMemory`.
pub fn vfio_slices(node_name: &str, gpus: &[GpuSlot], gpu: &GpuModel) -> Vec<Value> {
    let devices: Vec<Value> = gpus
        .iter()
        .enumerate()
        .map(|(index, slot)| {
            // The same UUID the GPU has when bound to the NVIDIA driver.
            let uuid = device_uuid("GPU", node_name, &format!("gpu-{index}"));
            json!({
                "name": vfio_device_name(index),
                "attributes": {
                    "type": {"string": VFIO_TYPE},
                    "uuid": {"string": uuid},
                    "deviceID": {"string": format!("0x{}", gpu.device_id)},
                    "vendorID": {"string": format!("0x{}", gpu.vendor_id)},
                    "numa": {"int": slot.numa},
                    "productName": {"string": gpu.product_name},
                    "iommuFDEnabled": {"bool": false},
                    "resource.kubernetes.io/pciBusID": {"string": slot.bus_id},
                    "resource.kubernetes.io/pcieRoot": {"string": slot.pcie_root},
                },
                "capacity": {"addressableMemory": {"value": format!("{}Mi", gpu.memory_mib)}},
            })
        })
        .collect();
    vec![json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node_name, NVIDIA_DRIVER)},
        "spec": {
            "driver": NVIDIA_DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    })]
}

/// The DeviceClass NVIDIA's DRA driver installs for passthrough GPUs.
pub fn vfio_device_class() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": VFIO_DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": format!(
            "device.driver == '{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == '{VFIO_TYPE}'"
        )}}]},
    })
}

/// Whether any of `slices` offers a vfio device (the driver runs with `PassthroughSupport`,
/// and installs [`vfio_device_class`]).
pub fn offers_vfio(slices: &[Value]) -> bool {
    slices.iter().any(|slice| {
        slice["spec"]["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|d| d["attributes"]["type"]["string"] == VFIO_TYPE)
    })
}

/// The device node a container holding the passthrough device `device` (`gpu-vfio-<i>`) gets
/// from the driver's CDI spec (legacy IOMMU backend): its IOMMU group under `/dev/vfio/`. The
/// simulated hosts put GPU `i` alone in IOMMU group `i`. `None` for other devices.
pub fn vfio_device_node(device: &str) -> Option<String> {
    let index: usize = device.strip_prefix("gpu-vfio-")?.parse().ok()?;
    Some(format!("/dev/vfio/{index}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_devices::Catalog;

    #[test]
    fn machines_parse_and_bad_values_are_named() {
        for machine in Machine::ALL {
            assert_eq!(Machine::parse(machine.as_str()), Ok(machine));
        }
        assert_eq!(
            Machine::parse("vm").unwrap_err(),
            "\"vm\" must be one of bare-metal, vm-passthrough, vm-vgpu"
        );
    }

    #[test]
    fn labels_follow_the_operators_table() {
        let h100 = tessera_devices::vgpu_type("H100-SXM5-80GB", "H100-4C").expect("type");
        type Row<'a> = (Machine, Option<&'a VgpuType>, &'a [(&'a str, &'a str)]);
        let table: [Row; 3] = [
            (
                Machine::BareMetal,
                None,
                &[("nvidia.com/gpu.workload.config", "container")],
            ),
            (
                Machine::VmPassthrough,
                None,
                &[
                    ("nvidia.com/gpu.deploy.cc-manager", "true"),
                    ("nvidia.com/gpu.deploy.client", "true"),
                    ("nvidia.com/gpu.deploy.kata-manager", "true"),
                    ("nvidia.com/gpu.deploy.sandbox-device-plugin", "true"),
                    ("nvidia.com/gpu.deploy.sandbox-validator", "true"),
                    ("nvidia.com/gpu.deploy.vfio-manager", "true"),
                    ("nvidia.com/gpu.workload.config", "vm-passthrough"),
                ],
            ),
            (
                Machine::VmVgpu,
                Some(&h100),
                &[
                    ("nvidia.com/gpu.deploy.cc-manager", "true"),
                    ("nvidia.com/gpu.deploy.client", "true"),
                    ("nvidia.com/gpu.deploy.sandbox-device-plugin", "true"),
                    ("nvidia.com/gpu.deploy.sandbox-validator", "true"),
                    ("nvidia.com/gpu.deploy.vgpu-device-manager", "true"),
                    ("nvidia.com/gpu.deploy.vgpu-manager", "true"),
                    ("nvidia.com/gpu.workload.config", "vm-vgpu"),
                    ("nvidia.com/vgpu.config", "H100-4C"),
                    ("nvidia.com/vgpu.host-driver-version", "570.172.08"),
                ],
            ),
        ];
        for (machine, vgpu, want) in table {
            let want: BTreeMap<String, String> = want
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let got = labels(machine, vgpu);
            assert_eq!(got, want, "{machine:?}");
            assert!(
                !got.contains_key("nvidia.com/gpu.deploy.device-plugin"),
                "{machine:?}"
            );
        }
    }

    #[test]
    fn gfd_labels_are_told_from_the_operators() {
        let table = [
            ("nvidia.com/gpu.product", true),
            ("nvidia.com/cuda.driver-version.full", true),
            ("nvidia.com/gpu.deploy.vfio-manager", false),
            ("nvidia.com/gpu.workload.config", false),
            ("nvidia.com/vgpu.config", false),
            ("feature.node.kubernetes.io/pci-10de.present", false),
        ];
        for (key, gfd) in table {
            assert_eq!(is_gfd_label(key), gfd, "{key}");
        }
    }

    #[test]
    fn vfio_devices_get_their_iommu_group() {
        let table = [
            ("gpu-vfio-0", Some("/dev/vfio/0")),
            ("gpu-vfio-7", Some("/dev/vfio/7")),
            ("gpu-0", None),
            ("gpu-vfio-x", None),
        ];
        for (device, want) in table {
            assert_eq!(vfio_device_node(device).as_deref(), want, "{device}");
        }
    }

    #[test]
    fn vgpu_hosts_offer_their_type_per_gpu() {
        let h100 = tessera_devices::vgpu_type("H100-SXM5-80GB", "H100-10C").expect("type");
        let table = [
            (
                Machine::VmVgpu,
                Some(&h100),
                8,
                vec![("nvidia.com/NVIDIA_H100-10C", 64)],
            ),
            (Machine::VmPassthrough, None, 8, vec![]),
            (Machine::BareMetal, None, 8, vec![]),
        ];
        for (machine, vgpu, gpus, want) in table {
            let want: BTreeMap<String, u64> =
                want.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            assert_eq!(extended_resources(machine, vgpu, gpus), want, "{machine:?}");
        }
    }

    #[test]
    fn vfio_slices_carry_the_drivers_attributes_and_match_the_class() {
        let catalog = Catalog::built_in().expect("catalog");
        let server = catalog.server("dgx-h100").expect("server").clone();
        let gpu = catalog.gpu("H100-SXM5-80GB").expect("gpu").clone();
        let slices = vfio_slices("pt-1", &server.gpus, &gpu);
        assert_eq!(slices.len(), 1);
        let devices = slices[0]["spec"]["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 8);
        let first = &devices[0];
        assert_eq!(first["name"], "gpu-vfio-0");
        assert_eq!(first["attributes"]["type"]["string"], "vfio");
        assert_eq!(first["attributes"]["vendorID"]["string"], "0x10de");
        assert_eq!(
            first["attributes"]["deviceID"]["string"],
            format!("0x{}", gpu.device_id)
        );
        assert_eq!(first["capacity"]["addressableMemory"]["value"], "81559Mi");
        assert!(offers_vfio(&slices));
        let expression = vfio_device_class()["spec"]["selectors"][0]["cel"]["expression"]
            .as_str()
            .expect("expression")
            .to_string();
        assert_eq!(
            expression,
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
        );
    }
}
