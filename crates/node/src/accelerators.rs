//! What an accelerator node advertises about its devices, as the upstream agents would:
//! Node Feature Discovery's PCI label, NVIDIA GPU Feature Discovery's `nvidia.com/*` labels,
//! and — in device-plugin mode — the extended resources NVIDIA's (or AMD's) device plugin
//! registers (`nvidia.com/gpu`, `nvidia.com/mig-<profile>`, replicas under time-slicing and
//! MPS with `renameByDefault: false`).
//!
//! Pure: computed from the pool's checked hardware. DRA ResourceSlices are not built here.

use std::collections::BTreeMap;

use tessera_devices::catalog::Vendor;

use crate::hardware::{Devices, Exposure, MigMode, PoolHardware, Sharing};

/// The NVIDIA driver the twins report (GFD's `nvidia.com/cuda.driver-version.*`).
pub const DRIVER_VERSION: (&str, &str, &str) = ("570", "172", "08");
/// The CUDA version that driver supports (GFD's `nvidia.com/cuda.runtime-version.*`).
pub const CUDA_VERSION: (&str, &str) = ("12", "8");

/// The Node annotation recording the driver version a maintenance plan installed; the twins
/// read it back when they start, so an upgraded node keeps its driver across restarts.
pub const INSTALLED_DRIVER_ANNOTATION: &str = "maintenance.tessera.dev/driver-version";

/// GFD's `nvidia.com/cuda.driver-version.{major,minor,revision,full}` labels for a driver
/// version (`570.172.08`; a missing part is left out, `full` is always the whole version).
pub fn driver_labels(version: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut parts = version.splitn(3, '.');
    for key in ["major", "minor", "revision"] {
        if let Some(part) = parts.next().filter(|p| !p.is_empty()) {
            labels.insert(format!("nvidia.com/cuda.driver-version.{key}"), part.into());
        }
    }
    labels.insert("nvidia.com/cuda.driver-version.full".into(), version.into());
    labels
}

fn sharing_replicas(devices: Option<&Devices>) -> Option<(&'static str, u32)> {
    match devices.and_then(|d| d.sharing.as_ref()) {
        Some(Sharing::TimeSlicing { replicas }) => Some(("time-slicing", *replicas)),
        Some(Sharing::Mps { replicas, .. }) => Some(("mps", *replicas)),
        _ => None,
    }
}

/// The labels NFD and GFD would put on a node of this hardware.
pub fn labels(hardware: &PoolHardware, devices: Option<&Devices>) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let Some(gpu) = &hardware.gpu else {
        return labels;
    };
    let count = hardware.server.gpus.len();
    labels.insert(
        format!("feature.node.kubernetes.io/pci-{}.present", gpu.vendor_id),
        "true".into(),
    );
    if gpu.vendor != Vendor::Nvidia {
        return labels;
    }
    let mut set = |key: &str, value: String| {
        labels.insert(format!("nvidia.com/{key}"), value);
    };
    let product = gpu.product_name.replace(' ', "-");
    let sharing = sharing_replicas(devices);
    set("gpu.present", "true".into());
    set(
        "gpu.product",
        if sharing.is_some() {
            format!("{product}-SHARED")
        } else {
            product
        },
    );
    set("gpu.count", count.to_string());
    set("gpu.memory", gpu.memory_mib.to_string());
    set("gpu.family", gpu.family.clone());
    set("gpu.mode", "compute".into());
    if let Some((major, minor)) = gpu.compute_capability() {
        set("gpu.compute.major", major.to_string());
        set("gpu.compute.minor", minor.to_string());
    }
    set(
        "gpu.replicas",
        sharing.map_or(1, |(_, replicas)| replicas).to_string(),
    );
    set(
        "gpu.sharing-strategy",
        sharing.map_or("none", |(strategy, _)| strategy).into(),
    );
    let (major, minor, revision) = DRIVER_VERSION;
    labels.extend(driver_labels(&format!("{major}.{minor}.{revision}")));
    let mut set = |key: &str, value: String| {
        labels.insert(format!("nvidia.com/{key}"), value);
    };
    let (cuda_major, cuda_minor) = CUDA_VERSION;
    set("cuda.runtime-version.major", cuda_major.into());
    set("cuda.runtime-version.minor", cuda_minor.into());
    set(
        "cuda.runtime-version.full",
        format!("{cuda_major}.{cuda_minor}"),
    );
    set("mig.capable", gpu.mig.is_some().to_string());
    set("mps.capable", gpu.sharing.mps.to_string());
    set("vgpu.present", "false".into());
    match &hardware.mig {
        Some(MigMode::Dynamic) => set("mig.strategy", "mixed".into()),
        Some(MigMode::Static(profiles)) => {
            set("mig.strategy", "mixed".into());
            for (profile, per_gpu) in profile_counts(profiles) {
                set(
                    &format!("mig-{profile}.count"),
                    (per_gpu * count).to_string(),
                );
            }
        }
        None => set("mig.strategy", "none".into()),
    }
    labels
}

/// How many instances of each profile one GPU's layout has, in name order.
fn profile_counts(profiles: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for profile in profiles {
        *counts.entry(profile.as_str()).or_default() += 1;
    }
    counts
}

/// The extended resources a device plugin registers for this hardware (none under DRA).
pub fn extended_resources(
    hardware: &PoolHardware,
    devices: Option<&Devices>,
) -> BTreeMap<String, u64> {
    let mut resources = BTreeMap::new();
    let (Some(gpu), Some(devices)) = (&hardware.gpu, devices) else {
        return resources;
    };
    if devices.exposure != Exposure::DevicePlugin {
        return resources;
    }
    let count = hardware.server.gpus.len() as u64;
    match (gpu.vendor, hardware.mig_profiles()) {
        (Vendor::Nvidia, Some(profiles)) => {
            for (profile, per_gpu) in profile_counts(profiles) {
                resources.insert(format!("nvidia.com/mig-{profile}"), per_gpu as u64 * count);
            }
        }
        (Vendor::Nvidia, None) => {
            let replicas = sharing_replicas(Some(devices)).map_or(1, |(_, r)| u64::from(r));
            resources.insert("nvidia.com/gpu".into(), count * replicas);
        }
        (Vendor::Amd, _) => {
            resources.insert("amd.com/gpu".into(), count);
        }
        (Vendor::Intel, _) => {
            resources.insert("gpu.intel.com/i915".into(), count);
        }
    }
    resources
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{KubeletPolicies, MigLayout, check};
    use tessera_devices::Catalog;

    #[test]
    fn driver_labels_split_the_version_as_gfd_does() {
        let table = [
            (
                "575.57.08",
                vec![("major", "575"), ("minor", "57"), ("revision", "08")],
            ),
            ("580.65", vec![("major", "580"), ("minor", "65")]),
        ];
        for (version, parts) in table {
            let mut want: BTreeMap<String, String> = parts
                .iter()
                .map(|(k, v)| (format!("nvidia.com/cuda.driver-version.{k}"), v.to_string()))
                .collect();
            want.insert("nvidia.com/cuda.driver-version.full".into(), version.into());
            assert_eq!(driver_labels(version), want, "{version}");
        }
    }

    /// A checked pool: its hardware and how its devices are offered.
    type Pool = (PoolHardware, Option<Devices>);

    fn pool(server: &str, devices: Option<Devices>) -> Pool {
        let catalog = Catalog::built_in().expect("catalog");
        let hardware = check(
            &catalog,
            server,
            devices.as_ref(),
            &KubeletPolicies::default(),
        )
        .expect("valid pool");
        (hardware, devices)
    }

    #[test]
    fn device_plugin_pools_register_nvidia_resource_names() {
        let plugin = |sharing| {
            Some(Devices {
                exposure: Exposure::DevicePlugin,
                sharing,
            })
        };
        let table: Vec<(Pool, Vec<(&str, u64)>)> = vec![
            (pool("dgx-h100", plugin(None)), vec![("nvidia.com/gpu", 8)]),
            (
                pool(
                    "pcie-l40s-4",
                    plugin(Some(Sharing::TimeSlicing { replicas: 4 })),
                ),
                vec![("nvidia.com/gpu", 16)],
            ),
            (
                pool(
                    "hgx-h200",
                    plugin(Some(Sharing::Mig {
                        layout: MigLayout::Named("all-balanced".into()),
                    })),
                ),
                vec![
                    ("nvidia.com/mig-1g.18gb", 16),
                    ("nvidia.com/mig-2g.35gb", 8),
                    ("nvidia.com/mig-3g.71gb", 8),
                ],
            ),
            (pool("mi300x-8", plugin(None)), vec![("amd.com/gpu", 8)]),
            (
                pool(
                    "dgx-h100",
                    Some(Devices {
                        exposure: Exposure::Dra,
                        sharing: None,
                    }),
                ),
                vec![],
            ),
            (pool("cpu-worker", None), vec![]),
        ];
        for ((hardware, devices), want) in table {
            let got = extended_resources(&hardware, devices.as_ref());
            let want: BTreeMap<String, u64> =
                want.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            assert_eq!(got, want, "{}", hardware.server.name);
        }
    }

    #[test]
    fn gpu_feature_discovery_labels() {
        let (hardware, devices) = pool(
            "pcie-l40s-4",
            Some(Devices {
                exposure: Exposure::DevicePlugin,
                sharing: Some(Sharing::TimeSlicing { replicas: 4 }),
            }),
        );
        let shared = labels(&hardware, devices.as_ref());
        let table = [
            ("feature.node.kubernetes.io/pci-10de.present", "true"),
            ("nvidia.com/gpu.product", "NVIDIA-L40S-SHARED"),
            ("nvidia.com/gpu.count", "4"),
            ("nvidia.com/gpu.memory", "46068"),
            ("nvidia.com/gpu.family", "ada-lovelace"),
            ("nvidia.com/gpu.compute.major", "8"),
            ("nvidia.com/gpu.compute.minor", "9"),
            ("nvidia.com/gpu.replicas", "4"),
            ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
            ("nvidia.com/mig.capable", "false"),
            ("nvidia.com/mig.strategy", "none"),
            ("nvidia.com/cuda.driver-version.full", "570.172.08"),
            ("nvidia.com/cuda.runtime-version.full", "12.8"),
        ];
        for (key, value) in table {
            assert_eq!(shared.get(key).map(String::as_str), Some(value), "{key}");
        }
        let (h200, devices) = pool(
            "hgx-h200",
            Some(Devices {
                exposure: Exposure::Dra,
                sharing: Some(Sharing::Mig {
                    layout: MigLayout::Named("all-1g.18gb".into()),
                }),
            }),
        );
        let mig = labels(&h200, devices.as_ref());
        assert_eq!(mig["nvidia.com/gpu.product"], "NVIDIA-H200");
        assert_eq!(mig["nvidia.com/mig.strategy"], "mixed");
        assert_eq!(mig["nvidia.com/mig-1g.18gb.count"], "56");
        let (amd, _) = pool("mi300x-8", None);
        let amd_labels = labels(&amd, None);
        assert_eq!(
            amd_labels.keys().collect::<Vec<_>>(),
            ["feature.node.kubernetes.io/pci-1002.present"]
        );
    }
}
