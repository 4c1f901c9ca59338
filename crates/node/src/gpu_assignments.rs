//! Which devices each pod holds on device-plugin nodes, as the kubelet's device manager
//! tracks it: whole GPUs (admitted through the Topology Manager, [`crate::device_admission`]),
//! time-slicing or MPS replicas of a GPU (NVIDIA's `<uuid>::<n>` replica IDs, spread over the
//! GPUs), or MIG devices of a static layout (`nvidia.com/mig-<profile>`). Devices are split
//! between a pod's containers in order, released when the pod ends or is deleted, and kept in
//! a checkpoint so a restarted twin hands out nothing twice (as the kubelet's
//! `kubelet_internal_checkpoint`). Also what a container then sees: the env and CDI device
//! names NVIDIA's device plugin (CDI mode, UUID device IDs) gives it.
//!
//! Pure bookkeeping; the twin calls it and stores the checkpoint.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};
use tessera_model::Quantity;

use crate::device_admission::{AdmissionError, admit_gpus};
use crate::hardware::{Exposure, MigMode, Sharing};
use crate::resource_slice::{device_uuid, mig_device_name};
use crate::topology::NodeSpec;

/// The extended resource of whole GPUs and replicas.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// A pod: namespace and name.
type PodKey = (String, String);

/// One device a pod holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Unit {
    /// A whole GPU.
    Gpu(usize),
    /// A time-slicing or MPS replica of a GPU.
    Replica {
        /// The GPU.
        gpu: usize,
        /// The replica number.
        replica: u32,
    },
    /// A MIG device (its name as the DRA driver would publish it).
    Mig {
        /// The parent GPU.
        gpu: usize,
        /// The device name (`gpu-0-mig-1g18gb-0`).
        name: String,
    },
}

impl Unit {
    /// The GPU it lives on.
    pub fn gpu(&self) -> usize {
        match self {
            Unit::Gpu(gpu) | Unit::Replica { gpu, .. } | Unit::Mig { gpu, .. } => *gpu,
        }
    }

    /// What `NVIDIA_VISIBLE_DEVICES` names: the GPU's UUID, or the MIG device's.
    fn visible(&self, node: &str) -> String {
        match self {
            Unit::Gpu(gpu) | Unit::Replica { gpu, .. } => {
                device_uuid("GPU", node, &format!("gpu-{gpu}"))
            }
            Unit::Mig { name, .. } => device_uuid("MIG", node, name),
        }
    }

    /// The device plugin's ID for it (replicas as `<uuid>::<n>`).
    pub fn device_id(&self, node: &str) -> String {
        match self {
            Unit::Replica { replica, .. } => format!("{}::{replica}", self.visible(node)),
            _ => self.visible(node),
        }
    }
}

/// Devices held per node and pod, with the container each went to.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuAssignments {
    held: BTreeMap<String, BTreeMap<String, Vec<(String, Unit)>>>,
}

/// How a device-plugin node hands out its GPUs.
enum Offer {
    /// Whole GPUs, through the Topology Manager.
    Whole,
    /// `replicas` per GPU.
    Replicas(u32),
    /// The MIG devices of a static layout: (GPU, profile, device name).
    Mig(Vec<(usize, String, String)>),
}

fn offer(node: &NodeSpec) -> Option<Offer> {
    let devices = node.devices.as_ref()?;
    let hardware = node.hardware.as_ref()?;
    let gpu = hardware.gpu.as_ref()?;
    if devices.exposure != Exposure::DevicePlugin || gpu.vendor_id != "10de" {
        return None;
    }
    if let Some(MigMode::Static(profiles)) = &hardware.mig {
        let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
        let placements = tessera_devices::plan_layout(gpu, &names).unwrap_or_default();
        let devices = (0..hardware.server.gpus.len())
            .flat_map(|index| {
                placements.iter().map(move |p| {
                    let name = mig_device_name(&format!("gpu-{index}"), &p.profile, p.start);
                    (index, p.profile.clone(), name)
                })
            })
            .collect();
        return Some(Offer::Mig(devices));
    }
    Some(match devices.sharing {
        Some(Sharing::TimeSlicing { replicas } | Sharing::Mps { replicas, .. }) => {
            Offer::Replicas(replicas)
        }
        _ => Offer::Whole,
    })
}

/// How many of `resource` a container asks for (`limits`, as for every extended resource).
fn wanted(container: &Container, resource: &str) -> usize {
    container
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|limits| limits.get(resource))
        .and_then(|q| q.0.parse::<Quantity>().ok())
        .map_or(0, |q| usize::try_from(q.value()).unwrap_or(0))
}

fn pod_id((namespace, name): &PodKey) -> String {
    format!("{namespace}/{name}")
}

impl GpuAssignments {
    /// Admits a starting pod's devices on `node`; returns each container's devices (by
    /// container name; empty when the pod asks for none or the node does not assign them).
    pub fn admit(
        &mut self,
        node: &NodeSpec,
        key: &PodKey,
        pod: &Pod,
    ) -> Result<BTreeMap<String, Vec<Unit>>, AdmissionError> {
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default();
        let Some(offer) = offer(node) else {
            return Ok(BTreeMap::new());
        };
        let held = self.held.entry(node.name.clone()).or_default();
        if let Some(existing) = held.get(&pod_id(key)) {
            // Already admitted (a repeated start): hand out the same devices.
            return Ok(by_container(existing));
        }
        let in_use: BTreeSet<Unit> = held.values().flatten().map(|(_, u)| u.clone()).collect();
        let mut granted: Vec<(String, Unit)> = Vec::new();
        match offer {
            Offer::Whole => {
                let total: usize = containers.iter().map(|c| wanted(c, GPU_RESOURCE)).sum();
                if total > 0 {
                    let busy: BTreeSet<usize> = in_use.iter().map(Unit::gpu).collect();
                    let hardware = node.hardware.as_ref().map(|h| &h.server);
                    let Some(server) = hardware else {
                        return Ok(BTreeMap::new());
                    };
                    let gpus = admit_gpus(
                        server,
                        &busy,
                        total,
                        &node.kubelet.topology_manager_policy,
                        GPU_RESOURCE,
                    )?;
                    let mut next = gpus.into_iter();
                    for container in containers {
                        for gpu in next.by_ref().take(wanted(container, GPU_RESOURCE)) {
                            granted.push((container.name.clone(), Unit::Gpu(gpu)));
                        }
                    }
                }
            }
            Offer::Replicas(replicas) => {
                let gpus = node.hardware.as_ref().map_or(0, |h| h.server.gpus.len());
                for container in containers {
                    for _ in 0..wanted(container, GPU_RESOURCE) {
                        // The least shared GPU first, then the lowest index and replica.
                        let taken =
                            |u: &Unit| in_use.contains(u) || granted.iter().any(|(_, g)| g == u);
                        let load = |gpu: usize| {
                            in_use
                                .iter()
                                .chain(granted.iter().map(|(_, u)| u))
                                .filter(|u| u.gpu() == gpu)
                                .count()
                        };
                        let choice = (0..gpus)
                            .flat_map(|gpu| {
                                (0..replicas).map(move |replica| Unit::Replica { gpu, replica })
                            })
                            .filter(|u| !taken(u))
                            .min_by_key(|u| (load(u.gpu()), u.clone()));
                        let Some(unit) = choice else {
                            return Err(AdmissionError::Unavailable {
                                resource: GPU_RESOURCE.into(),
                                requested: containers.iter().map(|c| wanted(c, GPU_RESOURCE)).sum(),
                                available: gpus * replicas as usize - in_use.len(),
                            });
                        };
                        granted.push((container.name.clone(), unit));
                    }
                }
            }
            Offer::Mig(devices) => {
                let profiles: BTreeSet<&str> = devices.iter().map(|(_, p, _)| p.as_str()).collect();
                for container in containers {
                    for profile in &profiles {
                        let resource = format!("nvidia.com/mig-{profile}");
                        let count = wanted(container, &resource);
                        let free: Vec<Unit> = devices
                            .iter()
                            .filter(|(_, p, _)| p == profile)
                            .map(|(gpu, _, name)| Unit::Mig {
                                gpu: *gpu,
                                name: name.clone(),
                            })
                            .filter(|u| !in_use.contains(u) && !granted.iter().any(|(_, g)| g == u))
                            .collect();
                        if free.len() < count {
                            return Err(AdmissionError::Unavailable {
                                resource,
                                requested: count,
                                available: free.len(),
                            });
                        }
                        for unit in free.into_iter().take(count) {
                            granted.push((container.name.clone(), unit));
                        }
                    }
                }
            }
        }
        if granted.is_empty() {
            return Ok(BTreeMap::new());
        }
        let result = by_container(&granted);
        held.insert(pod_id(key), granted);
        Ok(result)
    }

    /// Frees a pod's devices.
    pub fn release(&mut self, node: &str, key: &PodKey) {
        if let Some(held) = self.held.get_mut(node) {
            held.remove(&pod_id(key));
        }
    }

    /// Frees the devices of every pod on these twins' nodes not in `alive` (`namespace/name`):
    /// what a restarted twin does once it has seen all pods.
    pub fn retain(&mut self, alive: &BTreeSet<String>) {
        for held in self.held.values_mut() {
            held.retain(|pod, _| alive.contains(pod));
        }
    }

    /// The pods holding a device of GPU `gpu` on `node`.
    pub fn holders(&self, node: &str, gpu: usize) -> Vec<PodKey> {
        self.held
            .get(node)
            .into_iter()
            .flatten()
            .filter(|(_, units)| units.iter().any(|(_, u)| u.gpu() == gpu))
            .filter_map(|(pod, _)| {
                let (namespace, name) = pod.split_once('/')?;
                Some((namespace.to_string(), name.to_string()))
            })
            .collect()
    }

    /// The devices held on `node`.
    pub fn in_use(&self, node: &str) -> BTreeSet<Unit> {
        self.held
            .get(node)
            .map(|held| held.values().flatten().map(|(_, u)| u.clone()).collect())
            .unwrap_or_default()
    }
}

impl GpuAssignments {
    /// The devices container `container` of pod `key` holds on `node`, in the order handed out.
    pub fn held_by(&self, node: &str, key: &PodKey, container: &str) -> Vec<Unit> {
        self.held
            .get(node)
            .and_then(|held| held.get(&pod_id(key)))
            .map(|units| {
                units
                    .iter()
                    .filter(|(c, _)| c == container)
                    .map(|(_, u)| u.clone())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The unit a DRA device of this node's slices is (`gpu-3`, `gpu-0-mig-1g18gb-0`).
pub fn unit_of_device(name: &str) -> Option<Unit> {
    let rest = name.strip_prefix("gpu-")?;
    let (index, mig) = match rest.split_once('-') {
        Some((index, tail)) => (index, Some(tail)),
        None => (rest, None),
    };
    let gpu = index.parse().ok()?;
    match mig {
        None => Some(Unit::Gpu(gpu)),
        Some(tail) if tail.starts_with("mig-") => Some(Unit::Mig {
            gpu,
            name: name.to_string(),
        }),
        Some(_) => None,
    }
}

/// A device as a container's `nvidia-smi` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleGpu {
    /// The product name (`NVIDIA H100 80GB HBM3`).
    pub product_name: String,
    /// The GPU's UUID (`GPU-…`), the parent's for a MIG device.
    pub uuid: String,
    /// The GPU's memory in MiB.
    pub memory_mib: u64,
    /// The MIG device, when the unit is one: its profile (`1g.10gb`) and UUID (`MIG-…`).
    pub mig: Option<(String, String)>,
}

/// What the devices `units` on `node` look like from inside the container that holds them.
pub fn visible_gpus(node: &NodeSpec, units: &[Unit]) -> Vec<VisibleGpu> {
    let Some(gpu) = node.hardware.as_ref().and_then(|h| h.gpu.as_ref()) else {
        return Vec::new();
    };
    units
        .iter()
        .map(|unit| {
            let parent = device_uuid("GPU", &node.name, &format!("gpu-{}", unit.gpu()));
            let mig = match unit {
                Unit::Mig { name, .. } => {
                    Some((mig_profile_of(gpu, name), unit.visible(&node.name)))
                }
                _ => None,
            };
            VisibleGpu {
                product_name: gpu.product_name.clone(),
                uuid: parent,
                memory_mib: gpu.memory_mib,
                mig,
            }
        })
        .collect()
}

/// The profile (`1g.10gb`) of a MIG device named after it (`gpu-0-mig-1g10gb-0`).
fn mig_profile_of(gpu: &tessera_devices::GpuModel, device: &str) -> String {
    gpu.mig
        .iter()
        .flat_map(|m| m.profiles.iter())
        .map(|p| p.name.clone())
        .find(|profile| device.contains(&format!("-mig-{}-", profile.replace(['.', '+'], ""))))
        .unwrap_or_default()
}

/// Annotation: the node's Topology Manager policy, for NUMA-aware scheduling.
pub const POLICY_ANNOTATION: &str = "tessera.dev/topology-manager-policy";
/// Annotation: whole GPUs per NUMA node (`0:4,1:4`).
pub const GPUS_PER_NUMA: &str = "tessera.dev/gpus-per-numa";
/// Annotation: free whole GPUs per NUMA node, kept current by the twin.
pub const FREE_GPUS_PER_NUMA: &str = "tessera.dev/gpus-free-per-numa";

/// What a whole-GPU device-plugin node tells the scheduler about its GPUs' NUMA layout (as a
/// NodeResourceTopology exporter would): its policy, GPUs and free GPUs per NUMA node; `None`
/// for other nodes.
pub fn numa_annotations(
    node: &NodeSpec,
    in_use: &BTreeSet<Unit>,
) -> Option<BTreeMap<String, String>> {
    if !matches!(offer(node), Some(Offer::Whole)) {
        return None;
    }
    let hardware = node.hardware.as_ref()?;
    let mut total: BTreeMap<u8, usize> = BTreeMap::new();
    let mut free: BTreeMap<u8, usize> = BTreeMap::new();
    for (index, slot) in hardware.server.gpus.iter().enumerate() {
        *total.entry(slot.numa).or_insert(0) += 1;
        let entry = free.entry(slot.numa).or_insert(0);
        if !in_use.contains(&Unit::Gpu(index)) {
            *entry += 1;
        }
    }
    let render = |m: &BTreeMap<u8, usize>| {
        m.iter()
            .map(|(numa, n)| format!("{numa}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    Some(BTreeMap::from([
        (
            POLICY_ANNOTATION.to_string(),
            node.kubelet.topology_manager_policy.clone(),
        ),
        (GPUS_PER_NUMA.to_string(), render(&total)),
        (FREE_GPUS_PER_NUMA.to_string(), render(&free)),
    ]))
}

fn by_container(units: &[(String, Unit)]) -> BTreeMap<String, Vec<Unit>> {
    let mut result: BTreeMap<String, Vec<Unit>> = BTreeMap::new();
    for (container, unit) in units {
        result
            .entry(container.clone())
            .or_default()
            .push(unit.clone());
    }
    result
}

/// The log lines a container with these devices prints: the env and CDI devices it was given.
pub fn device_log_lines(node: &str, units: &[Unit]) -> Vec<String> {
    if units.is_empty() {
        return Vec::new();
    }
    let mut visible: Vec<String> = units.iter().map(|u| u.visible(node)).collect();
    visible.dedup();
    let cdi: Vec<String> = units
        .iter()
        .map(|u| format!("nvidia.com/gpu={}", u.device_id(node)))
        .collect();
    vec![
        format!("NVIDIA_VISIBLE_DEVICES={}", visible.join(",")),
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

    fn gpus(indexes: &[usize]) -> Vec<Unit> {
        indexes.iter().map(|&i| Unit::Gpu(i)).collect()
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
        assert_eq!(got["c0"], [Unit::Gpu(0)]);
        assert_eq!(got["c1"], [Unit::Gpu(1), Unit::Gpu(2)]);
        // Three GPUs held on NUMA 0: a 4-GPU pod fits only NUMA 1.
        let got = assignments
            .admit(&node, &second, &pod(&[4]))
            .expect("admitted");
        assert_eq!(got["c0"], gpus(&[4, 5, 6, 7]));
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
        assert_eq!(
            assignments.in_use(&node.name),
            gpus(&[4, 5, 6, 7]).into_iter().collect()
        );
        let got = assignments
            .admit(&node, &third, &pod(&[2]))
            .expect("admitted");
        assert_eq!(got["c0"], gpus(&[0, 1]));
        // Three GPUs held on each NUMA node: two more fit on neither alone.
        let mut split = GpuAssignments::default();
        for name in ["x", "y"] {
            split
                .admit(&node, &("ns".into(), name.into()), &pod(&[3]))
                .expect("admitted");
        }
        assert_eq!(
            split.in_use(&node.name),
            gpus(&[0, 1, 2, 4, 5, 6]).into_iter().collect()
        );
        assert_eq!(
            split.admit(&node, &("ns".into(), "w".into()), &pod(&[2])),
            Err(AdmissionError::TopologyAffinity)
        );
        let lines = device_log_lines(&node.name, &gpus(&[0, 1]));
        assert!(lines[0].starts_with("NVIDIA_VISIBLE_DEVICES=GPU-"));
        assert!(lines[1].starts_with("CDI devices: nvidia.com/gpu=GPU-"));
    }

    fn pod_asking(limits: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c0", "image": "x", "resources": {"limits": limits}}]}}))
        .expect("pod")
    }

    fn pool(devices: &str) -> NodeSpec {
        let text = format!(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: n\n  count: 1\n  server: hgx-h200\n  devices: {devices}\n"
        );
        Topology::parse(&text).expect("topology").nodes().remove(0)
    }

    #[test]
    fn replicas_spread_over_gpus_and_mig_devices_go_by_profile() {
        let shared = pool("{exposure: device-plugin, sharing: {timeSlicing: {replicas: 2}}}");
        let mut assignments = GpuAssignments::default();
        let got = assignments
            .admit(
                &shared,
                &("ns".into(), "a".into()),
                &pod_asking(json!({"nvidia.com/gpu": "3"})),
            )
            .expect("admitted");
        assert_eq!(
            got["c0"],
            [
                Unit::Replica { gpu: 0, replica: 0 },
                Unit::Replica { gpu: 1, replica: 0 },
                Unit::Replica { gpu: 2, replica: 0 }
            ]
        );
        let lines = device_log_lines(&shared.name, &got["c0"]);
        assert!(lines[1].contains("::0"), "replica IDs: {}", lines[1]);
        assert_eq!(
            assignments.admit(
                &shared,
                &("ns".into(), "b".into()),
                &pod_asking(json!({"nvidia.com/gpu": "14"}))
            ),
            Err(AdmissionError::Unavailable {
                resource: GPU_RESOURCE.into(),
                requested: 14,
                available: 13
            })
        );

        let mig = pool("{exposure: device-plugin, sharing: {mig: {layout: all-balanced}}}");
        let mut assignments = GpuAssignments::default();
        let got = assignments
            .admit(
                &mig,
                &("ns".into(), "a".into()),
                &pod_asking(json!({"nvidia.com/mig-1g.18gb": "3", "nvidia.com/mig-3g.71gb": "1"})),
            )
            .expect("admitted");
        let names: Vec<String> = got["c0"]
            .iter()
            .map(|u| match u {
                Unit::Mig { name, .. } => name.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(names.len(), 4);
        assert!(
            names.iter().filter(|n| n.contains("-mig-1g18gb-")).count() == 3,
            "{names:?}"
        );
        assert!(
            names.iter().any(|n| n.contains("-mig-3g71gb-")),
            "{names:?}"
        );
        assert!(device_log_lines(&mig.name, &got["c0"])[0].contains("MIG-"));

        // A checkpoint restores what was held; pods gone meanwhile are released.
        let text = serde_json::to_string(&assignments).expect("checkpoint");
        let mut restored: GpuAssignments = serde_json::from_str(&text).expect("restore");
        assert_eq!(restored, assignments);
        restored.retain(&BTreeSet::new());
        assert!(restored.in_use(&mig.name).is_empty());
    }

    #[test]
    fn a_container_sees_its_own_devices_with_their_profiles() {
        let node = node("single-numa-node");
        let mut assignments = GpuAssignments::default();
        let key = ("ns".to_string(), "a".to_string());
        assignments
            .admit(&node, &key, &pod(&[1, 2]))
            .expect("admitted");
        let seen: Vec<Vec<VisibleGpu>> = ["c0", "c1", "c9"]
            .iter()
            .map(|c| visible_gpus(&node, &assignments.held_by(&node.name, &key, c)))
            .collect();
        assert_eq!(seen.iter().map(Vec::len).collect::<Vec<_>>(), [1, 2, 0]);
        assert_eq!(seen[0][0].product_name, "NVIDIA H100 80GB HBM3");
        assert!(seen[0][0].uuid.starts_with("GPU-") && seen[0][0].mig.is_none());
        assert_ne!(seen[1][0].uuid, seen[1][1].uuid);
        assert!(
            assignments
                .held_by(&node.name, &("ns".into(), "b".into()), "c0")
                .is_empty()
        );

        let mig = pool("{exposure: device-plugin, sharing: {mig: {layout: all-balanced}}}");
        let mut assignments = GpuAssignments::default();
        assignments
            .admit(
                &mig,
                &key,
                &pod_asking(json!({"nvidia.com/mig-1g.18gb": "2"})),
            )
            .expect("admitted");
        let seen = visible_gpus(&mig, &assignments.held_by(&mig.name, &key, "c0"));
        let profiles: Vec<(&str, bool)> = seen
            .iter()
            .map(|g| {
                let (profile, uuid) = g.mig.as_ref().expect("a MIG device");
                (
                    profile.as_str(),
                    uuid.starts_with("MIG-") && g.uuid.starts_with("GPU-"),
                )
            })
            .collect();
        assert_eq!(profiles, [("1g.18gb", true), ("1g.18gb", true)]);

        for (device, unit) in [
            ("gpu-3", Some(Unit::Gpu(3))),
            (
                "gpu-0-mig-1g18gb-0",
                Some(Unit::Mig {
                    gpu: 0,
                    name: "gpu-0-mig-1g18gb-0".into(),
                }),
            ),
            ("gpu-0-counter-set", None),
            ("nic-0", None),
        ] {
            assert_eq!(unit_of_device(device), unit, "{device}");
        }
    }
}
