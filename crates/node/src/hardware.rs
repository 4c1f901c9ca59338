//! The hardware side of a topology pool: which catalog server model its nodes are, where they
//! stand (zone, block, racks), how their accelerators are offered (device plugin or DRA) and
//! shared (whole GPUs, a MIG layout, time-slicing or MPS), and the kubelet's Topology Manager
//! and CPU manager policies. Parsed with the topology file and checked against the
//! accelerator catalog (`tessera-devices`).
//!
//! Knows nothing about the API server or how twins publish devices.

use serde::Deserialize;
use tessera_devices::{Catalog, GpuModel, ServerModel, plan_layout};

/// Label naming the block a node stands in.
pub const BLOCK_LABEL: &str = "tessera.dev/block";
/// Label naming the rack a node stands in.
pub const RACK_LABEL: &str = "tessera.dev/rack";
/// The upstream zone label.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// GPU Feature Discovery's label of a node's NVLink domain on multi-node NVLink systems:
/// `<clusterUUID>.<cliqueId>`.
pub const CLIQUE_LABEL: &str = "nvidia.com/gpu.clique";

/// The NVLink clique of the pool's `ordinal`-th node when its server's NVLink domain spans
/// the rack: one cluster UUID per rack (name-based, from zone, block and rack) and clique 1.
/// `None` without a rack or a multi-node NVLink server.
pub fn nvlink_clique(
    server: &ServerModel,
    placement: &PoolPlacement,
    ordinal: usize,
) -> Option<String> {
    if !server.multi_node_nvlink || placement.racks.is_empty() {
        return None;
    }
    let rack = &placement.racks[ordinal % placement.racks.len()];
    let path = format!(
        "tessera.dev/nvlink/{}/{}/{rack}",
        placement.zone.as_deref().unwrap_or_default(),
        placement.block.as_deref().unwrap_or_default()
    );
    let cluster = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, path.as_bytes());
    Some(format!("{cluster}.1"))
}

/// Where a pool's nodes stand; nodes are spread over the racks in turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolPlacement {
    /// Zone (`topology.kubernetes.io/zone`).
    #[serde(default)]
    pub zone: Option<String>,
    /// Block (`tessera.dev/block`).
    #[serde(default)]
    pub block: Option<String>,
    /// Racks (`tessera.dev/rack`), assigned to nodes round-robin.
    #[serde(default)]
    pub racks: Vec<String>,
}

impl PoolPlacement {
    /// The topology labels of the pool's `ordinal`-th node (from 0).
    pub fn labels(&self, ordinal: usize) -> Vec<(&'static str, String)> {
        let mut labels = Vec::new();
        if let Some(zone) = &self.zone {
            labels.push((ZONE_LABEL, zone.clone()));
        }
        if let Some(block) = &self.block {
            labels.push((BLOCK_LABEL, block.clone()));
        }
        if !self.racks.is_empty() {
            labels.push((RACK_LABEL, self.racks[ordinal % self.racks.len()].clone()));
        }
        labels
    }
}

/// How a pool's accelerators are offered to pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exposure {
    /// Extended resources through a device plugin (`nvidia.com/gpu`).
    DevicePlugin,
    /// Dynamic Resource Allocation: ResourceSlices and claims.
    Dra,
}

/// How each GPU of a pool is shared; absent means whole GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Sharing {
    /// MIG partitions: the same fixed layout on every GPU, or `dynamic` (DRA only: every
    /// placement offered as a partitionable device, instances made when a claim is prepared).
    Mig {
        /// `all-<profile>` (`all-1g.18gb`), `all-balanced`, `dynamic`, or a list of profiles.
        layout: MigLayout,
    },
    /// CUDA time-slicing: each GPU offered `replicas` times.
    TimeSlicing {
        /// Replicas per GPU (2 or more).
        replicas: u32,
    },
    /// CUDA MPS: each GPU offered `replicas` times, each client limited in memory.
    Mps {
        /// Replicas per GPU (2 or more).
        replicas: u32,
        /// Pinned device memory per client (`CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`), a quantity
        /// such as `20Gi`; by default the GPU's memory divided by the replicas.
        #[serde(default, rename = "memoryLimit")]
        memory_limit: Option<String>,
    },
}

/// A MIG layout as written in a topology file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum MigLayout {
    /// `all-<profile>` or `all-balanced`, as mig-parted names its configurations.
    Named(String),
    /// The profiles of one GPU, in order (`[3g.71gb, 2g.35gb, 1g.18gb, 1g.18gb]`).
    Profiles(Vec<String>),
}

impl MigLayout {
    /// The profiles one GPU of `model` gets.
    pub fn profiles(&self, model: &GpuModel) -> Result<Vec<String>, String> {
        match self {
            MigLayout::Profiles(profiles) => Ok(profiles.clone()),
            MigLayout::Named(name) if name == "all-balanced" => {
                // mig-parted's all-balanced: 2x the smallest 1g, one 2g and one 3g.
                let pick = |prefix: &str| {
                    model
                        .mig
                        .as_ref()
                        .and_then(|mig| {
                            mig.profiles
                                .iter()
                                .find(|p| p.name.starts_with(prefix) && !p.name.ends_with("+me"))
                        })
                        .map(|p| p.name.clone())
                        .ok_or_else(|| format!("{} has no {prefix} MIG profile", model.name))
                };
                let one = pick("1g.")?;
                Ok(vec![one.clone(), one, pick("2g.")?, pick("3g.")?])
            }
            MigLayout::Named(name) => {
                let profile = name.strip_prefix("all-").ok_or_else(|| {
                    format!("{name:?} is not all-<profile>, all-balanced or a list of profiles")
                })?;
                let max = model
                    .mig_profile(profile)
                    .map(|p| p.max_instances)
                    .ok_or_else(|| format!("{} has no MIG profile {profile:?}", model.name))?;
                Ok(vec![profile.to_string(); usize::from(max)])
            }
        }
    }
}

/// How a pool's accelerators are offered and shared.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Devices {
    /// Device plugin or DRA.
    pub exposure: Exposure,
    /// Sharing; whole GPUs when absent.
    #[serde(default)]
    pub sharing: Option<Sharing>,
}

/// The kubelet's resource-manager policies (upstream's KubeletConfiguration names).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeletPolicies {
    /// `none` (default), `best-effort`, `restricted` or `single-numa-node`.
    #[serde(default = "none")]
    pub topology_manager_policy: String,
    /// `container` (default) or `pod`.
    #[serde(default = "container")]
    pub topology_manager_scope: String,
    /// `none` (default) or `static`.
    #[serde(default = "none")]
    pub cpu_manager_policy: String,
}

fn none() -> String {
    "none".into()
}

fn container() -> String {
    "container".into()
}

impl Default for KubeletPolicies {
    fn default() -> Self {
        KubeletPolicies {
            topology_manager_policy: none(),
            topology_manager_scope: container(),
            cpu_manager_policy: none(),
        }
    }
}

/// How a pool's GPUs are partitioned with MIG.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigMode {
    /// A fixed layout: the profiles of each GPU.
    Static(Vec<String>),
    /// Partitions made on demand (DRA partitionable devices with shared counters).
    Dynamic,
}

/// A pool's hardware after checking: the server model and its MIG mode.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolHardware {
    /// The server model.
    pub server: ServerModel,
    /// Its GPU model, if it has GPUs.
    pub gpu: Option<GpuModel>,
    /// MIG, when the pool uses it.
    pub mig: Option<MigMode>,
}

impl PoolHardware {
    /// The fixed MIG profiles of each GPU, when the pool has a fixed layout.
    pub fn mig_profiles(&self) -> Option<&[String]> {
        match &self.mig {
            Some(MigMode::Static(profiles)) => Some(profiles),
            _ => None,
        }
    }
}

/// Checks a pool's hardware fields against the catalog; errors are (field, message) with the
/// field relative to the pool.
pub fn check(
    catalog: &Catalog,
    server: &str,
    devices: Option<&Devices>,
    kubelet: &KubeletPolicies,
) -> Result<PoolHardware, (String, String)> {
    let one_of = |field: &str, value: &str, allowed: &[&str]| {
        if allowed.contains(&value) {
            Ok(())
        } else {
            Err((
                format!("kubelet.{field}"),
                format!("{value:?} must be one of {}", allowed.join(", ")),
            ))
        }
    };
    one_of(
        "topologyManagerPolicy",
        &kubelet.topology_manager_policy,
        &["none", "best-effort", "restricted", "single-numa-node"],
    )?;
    one_of(
        "topologyManagerScope",
        &kubelet.topology_manager_scope,
        &["container", "pod"],
    )?;
    one_of(
        "cpuManagerPolicy",
        &kubelet.cpu_manager_policy,
        &["none", "static"],
    )?;
    let model = catalog.server(server).ok_or_else(|| {
        let known: Vec<&str> = catalog.servers().iter().map(|s| s.name.as_str()).collect();
        (
            "server".to_string(),
            format!(
                "unknown server model {server:?} (the catalog has {})",
                known.join(", ")
            ),
        )
    })?;
    let gpu = model
        .gpu_model
        .as_deref()
        .and_then(|name| catalog.gpu(name))
        .cloned();
    let mut mig = None;
    if let Some(devices) = devices {
        let Some(gpu) = &gpu else {
            return Err((
                "devices".into(),
                format!("server model {server} has no accelerators to offer"),
            ));
        };
        match &devices.sharing {
            None => {}
            Some(Sharing::Mig {
                layout: MigLayout::Named(name),
            }) if name == "dynamic" => {
                if gpu.mig.is_none() {
                    return Err((
                        "devices.sharing.mig.layout".into(),
                        format!("{} does not support MIG", gpu.name),
                    ));
                }
                if devices.exposure != Exposure::Dra {
                    return Err((
                        "devices.sharing.mig.layout".into(),
                        "dynamic MIG needs exposure dra: a device plugin cannot create MIG instances on demand".into(),
                    ));
                }
                mig = Some(MigMode::Dynamic);
            }
            Some(Sharing::Mig { layout }) => {
                let profiles = layout
                    .profiles(gpu)
                    .map_err(|message| ("devices.sharing.mig.layout".to_string(), message))?;
                let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
                plan_layout(gpu, &names).map_err(|error| {
                    ("devices.sharing.mig.layout".to_string(), error.to_string())
                })?;
                mig = Some(MigMode::Static(profiles));
            }
            Some(Sharing::TimeSlicing { replicas }) | Some(Sharing::Mps { replicas, .. }) => {
                let (field, supported) = match devices.sharing {
                    Some(Sharing::Mps { .. }) => ("mps", gpu.sharing.mps),
                    _ => ("timeSlicing", gpu.sharing.time_slicing),
                };
                if !supported {
                    return Err((
                        format!("devices.sharing.{field}"),
                        format!("{} does not support {field}", gpu.name),
                    ));
                }
                if *replicas < 2 {
                    return Err((
                        format!("devices.sharing.{field}.replicas"),
                        format!("must be at least 2, got {replicas}"),
                    ));
                }
                if let Some(Sharing::Mps {
                    memory_limit: Some(limit),
                    ..
                }) = &devices.sharing
                {
                    let field = "devices.sharing.mps.memoryLimit".to_string();
                    let bytes = limit
                        .parse::<tessera_model::Quantity>()
                        .map_err(|error| (field.clone(), format!("{limit:?}: {error}")))?
                        .value();
                    let gpu_bytes = i128::from(gpu.memory_mib) * 1024 * 1024;
                    if bytes <= 0 || bytes > gpu_bytes {
                        return Err((
                            field,
                            format!(
                                "{limit} is not within the GPU's {} MiB of memory",
                                gpu.memory_mib
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(PoolHardware {
        server: model.clone(),
        gpu,
        mig,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (server, devices, kubelet policies, expected error field and message).
    type Case<'a> = (
        &'a str,
        Option<Devices>,
        &'a KubeletPolicies,
        Option<(&'a str, &'a str)>,
    );

    fn catalog() -> Catalog {
        Catalog::built_in().expect("catalog")
    }

    #[test]
    fn named_layouts_expand_like_mig_parted() {
        let catalog = catalog();
        let h200 = catalog.gpu("H200-SXM5-141GB").expect("H200");
        let table = [
            ("all-1g.18gb", Ok(vec!["1g.18gb"; 7])),
            (
                "all-balanced",
                Ok(vec!["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"]),
            ),
            ("all-3g.71gb", Ok(vec!["3g.71gb"; 2])),
            ("all-1g.10gb", Err("has no MIG profile \"1g.10gb\"")),
            ("balanced", Err("is not all-<profile>")),
        ];
        for (name, want) in table {
            let got = MigLayout::Named(name.into()).profiles(h200);
            match (got, want) {
                (Ok(profiles), Ok(want)) => assert_eq!(profiles, want, "{name}"),
                (Err(message), Err(want)) => assert!(message.contains(want), "{message}"),
                (got, want) => panic!("{name}: {got:?} vs {want:?}"),
            }
        }
    }

    #[test]
    fn pools_are_checked_against_the_catalog() {
        let catalog = catalog();
        let mig = |layout: MigLayout| Devices {
            exposure: Exposure::Dra,
            sharing: Some(Sharing::Mig { layout }),
        };
        let slicing = |replicas| Devices {
            exposure: Exposure::DevicePlugin,
            sharing: Some(Sharing::TimeSlicing { replicas }),
        };
        let mps = |limit: &str| Devices {
            exposure: Exposure::DevicePlugin,
            sharing: Some(Sharing::Mps {
                replicas: 4,
                memory_limit: Some(limit.to_string()),
            }),
        };
        let policies = KubeletPolicies::default();
        let strict = KubeletPolicies {
            topology_manager_policy: "strict".into(),
            ..KubeletPolicies::default()
        };
        let three_3g = MigLayout::Profiles(vec!["3g.71gb".into(); 3]);
        let table: Vec<Case> = vec![
            (
                "hgx-h200",
                Some(mig(MigLayout::Named("all-1g.18gb".into()))),
                &policies,
                None,
            ),
            ("pcie-l40s-4", Some(slicing(4)), &policies, None),
            ("dgx-h100", None, &policies, None),
            (
                "dgx-h9000",
                None,
                &policies,
                Some(("server", "unknown server model")),
            ),
            (
                "hgx-h200",
                Some(mig(three_3g)),
                &policies,
                Some((
                    "devices.sharing.mig.layout",
                    "at most 2 instance(s) of 3g.71gb",
                )),
            ),
            (
                "pcie-l40s-4",
                Some(mig(MigLayout::Named("all-1g.10gb".into()))),
                &policies,
                Some(("devices.sharing.mig.layout", "L40S has no MIG profile")),
            ),
            (
                "pcie-l40s-4",
                Some(slicing(1)),
                &policies,
                Some(("devices.sharing.timeSlicing.replicas", "at least 2")),
            ),
            ("dgx-h100", Some(mps("20Gi")), &policies, None),
            (
                "dgx-h100",
                Some(mps("100Gi")),
                &policies,
                Some((
                    "devices.sharing.mps.memoryLimit",
                    "within the GPU's 81559 MiB",
                )),
            ),
            (
                "dgx-h100",
                Some(mps("lots")),
                &policies,
                Some(("devices.sharing.mps.memoryLimit", "\"lots\"")),
            ),
            (
                "dgx-h100",
                Some(mig(MigLayout::Named("dynamic".into()))),
                &policies,
                None,
            ),
            (
                "dgx-h100",
                Some(Devices {
                    exposure: Exposure::DevicePlugin,
                    sharing: Some(Sharing::Mig {
                        layout: MigLayout::Named("dynamic".into()),
                    }),
                }),
                &policies,
                Some((
                    "devices.sharing.mig.layout",
                    "dynamic MIG needs exposure dra",
                )),
            ),
            (
                "cpu-worker",
                Some(slicing(2)),
                &policies,
                Some(("devices", "no accelerators")),
            ),
            (
                "dgx-h100",
                None,
                &strict,
                Some(("kubelet.topologyManagerPolicy", "must be one of")),
            ),
        ];
        for (server, devices, kubelet, want) in table {
            let got = check(&catalog, server, devices.as_ref(), kubelet);
            match (got, want) {
                (Ok(hardware), None) => assert_eq!(hardware.server.name, server),
                (Err((field, message)), Some((want_field, want_message))) => {
                    assert_eq!(field, want_field, "{server}: {message}");
                    assert!(message.contains(want_message), "{message}");
                }
                (got, want) => panic!("{server}: {got:?} vs {want:?}"),
            }
        }
    }
}
