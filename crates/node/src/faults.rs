//! Injected hardware and node faults, and what they do to a node twin. A fault is a Node
//! annotation (so `kubectl` shows it and `tessera fault` sets it through the API):
//!
//! | annotation | value | effect |
//! |---|---|---|
//! | `fault.tessera.dev/gpu-<i>` | `xid-<code>` | a fatal XID (all but the application XIDs 13, 31, 43, 45, 68, 109 that NVIDIA's device plugin skips) makes GPU `i` unhealthy: device-plugin allocatable drops, its DRA devices get the NoSchedule taint `gpu.nvidia.com/xid=<code>`, containers using it fail |
//! | `fault.tessera.dev/nvlink` | `down` | every GPU's DRA devices get the NoSchedule taint `gpu.nvidia.com/nvlink=down` |
//! | `fault.tessera.dev/nic-<name>` | `down` | node condition `NetworkInterfacesDegraded=True` naming the NICs |
//! | `fault.tessera.dev/node` | `not-ready` / `unreachable` | the kubelet reports Ready=False / stops posting status and renewing its Lease |
//! | `fault.tessera.dev/operator-<daemonset>` | `crash-loop` | the GPU operator component's pod on the node crash-loops (`CrashLoopBackOff`, not ready) |
//! | `fault.tessera.dev/operator-labels` | `missing` | GPU feature discovery's labels are gone from the node |
//! | `fault.tessera.dev/operator-slices` | `stale` | the DRA driver leaves an older generation of each of the node's ResourceSlices behind |
//! | `fault.tessera.dev/volume` | `mount-failure` / `permission` / `missing-secret` / `full-disk` / `stale-data` | the kubelet's mounts of claimed volumes fail with that error (`FailedMount`) |
//!
//! A GPU's health is sticky ([`GpuHealth`]): once a fatal XID took it down, later XIDs (an
//! application error, another fatal one) leave it down with the XID that took it down; only
//! removing the annotation (`tessera fault clear`) recovers it, as only a reset recovers the
//! hardware. Removing an annotation recovers. Pure: parsing and effects (the node status and device
//! taints they make, the pods a failed GPU takes down); time is an input, and the twin reads
//! the annotations and applies the effects.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::{Value, json};
use tessera_model::Quantity;
use tessera_model::conditions;
use tessera_model::time::timestamp;
pub use tessera_storage::mount::MountFault;

use crate::topology::NodeSpec;

/// The annotation prefix of faults.
pub const PREFIX: &str = "fault.tessera.dev/";

pub use tessera_devices::xid::{APPLICATION_XIDS, xid_description};

/// A node-level fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeFault {
    /// The kubelet reports Ready=False.
    NotReady,
    /// The kubelet stops posting status and renewing its Lease.
    Unreachable,
}

/// The faults of one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// XID per GPU index.
    pub gpus: BTreeMap<usize, u32>,
    /// NVLink down.
    pub nvlink_down: bool,
    /// NICs down.
    pub nics_down: BTreeSet<String>,
    /// The node's own fault.
    pub node: Option<NodeFault>,
    /// Broken GPU operator components.
    pub operator: OperatorFaults,
    /// Volume mounts fail on the node (`volume: mount-failure`, `permission`,
    /// `missing-secret`, `full-disk`, `stale-data`): the kubelet holds pods with claims in
    /// ContainerCreating with the `FailedMount` event of that failure.
    pub volume: Option<MountFault>,
}

/// What is broken of the GPU operator's components on a node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorFaults {
    /// The components (DaemonSet names) whose pod on the node crash-loops.
    pub crash_loop: BTreeSet<String>,
    /// GPU feature discovery's labels are gone.
    pub labels_missing: bool,
    /// Stale ResourceSlices are left behind.
    pub slices_stale: bool,
}

/// Whether an XID makes the device unhealthy.
pub fn fatal(xid: u32) -> bool {
    tessera_devices::xid::fatal_xid(xid)
}

/// A GPU's health as the XIDs it reported left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuHealth {
    /// No XID since the last clear.
    Healthy,
    /// Healthy; the last XID was an application error (the workload's, not the GPU's).
    ApplicationError(u32),
    /// Unhealthy since this fatal XID, until cleared.
    Down(u32),
}

/// What happens to a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuEvent {
    /// It reports an XID.
    Xid(u32),
    /// An operator clears its fault (a GPU reset).
    Clear,
}

impl GpuHealth {
    /// The health an annotated XID stands for (`None`: no annotation).
    pub fn from_xid(xid: Option<u32>) -> GpuHealth {
        match xid {
            None => GpuHealth::Healthy,
            Some(xid) if fatal(xid) => GpuHealth::Down(xid),
            Some(xid) => GpuHealth::ApplicationError(xid),
        }
    }

    /// The XID the annotation records for this health (`None`: no annotation).
    pub fn xid(self) -> Option<u32> {
        match self {
            GpuHealth::Healthy => None,
            GpuHealth::ApplicationError(xid) | GpuHealth::Down(xid) => Some(xid),
        }
    }

    /// The health after `event`: a fatal XID takes the GPU down, nothing but a clear brings
    /// it back, and while it is down later XIDs change nothing.
    pub fn next(self, event: GpuEvent) -> GpuHealth {
        match (self, event) {
            (_, GpuEvent::Clear) => GpuHealth::Healthy,
            (GpuHealth::Down(xid), GpuEvent::Xid(_)) => GpuHealth::Down(xid),
            (GpuHealth::Healthy | GpuHealth::ApplicationError(_), GpuEvent::Xid(xid)) => {
                GpuHealth::from_xid(Some(xid))
            }
        }
    }
}

impl Faults {
    /// The faults after the annotations changed from what `self` was to `annotated`: a GPU
    /// whose annotation is gone is cleared, one whose XID changed reports it (a GPU that is
    /// down stays down), the rest is as annotated.
    pub fn observe(&self, annotated: Faults) -> Faults {
        let gpus = annotated
            .gpus
            .iter()
            .filter_map(|(gpu, xid)| {
                let before = GpuHealth::from_xid(self.gpus.get(gpu).copied());
                let after = before.next(GpuEvent::Xid(*xid)).xid()?;
                Some((*gpu, after))
            })
            .collect();
        Faults { gpus, ..annotated }
    }

    /// The health of GPU `gpu`.
    pub fn gpu_health(&self, gpu: usize) -> GpuHealth {
        GpuHealth::from_xid(self.gpus.get(&gpu).copied())
    }

    /// Reads the faults from a node's annotations; malformed ones are reported, not applied.
    pub fn parse(annotations: &BTreeMap<String, String>) -> (Faults, Vec<String>) {
        let mut faults = Faults::default();
        let mut problems = Vec::new();
        for (key, value) in annotations {
            let Some(what) = key.strip_prefix(PREFIX) else {
                continue;
            };
            let bad = || format!("{key}: unsupported value {value:?}");
            if let Some(index) = what.strip_prefix("gpu-") {
                match (
                    index.parse::<usize>(),
                    value.strip_prefix("xid-").map(str::parse::<u32>),
                ) {
                    (Ok(index), Some(Ok(xid))) => {
                        faults.gpus.insert(index, xid);
                    }
                    _ => problems.push(bad()),
                }
            } else if let Some(nic) = what.strip_prefix("nic-") {
                if value == "down" {
                    faults.nics_down.insert(nic.to_string());
                } else {
                    problems.push(bad());
                }
            } else if what == "nvlink" {
                if value == "down" {
                    faults.nvlink_down = true;
                } else {
                    problems.push(bad());
                }
            } else if let Some(part) = what.strip_prefix("operator-") {
                match (part, value.as_str()) {
                    ("labels", "missing") => faults.operator.labels_missing = true,
                    ("slices", "stale") => faults.operator.slices_stale = true,
                    ("labels" | "slices", _) => problems.push(bad()),
                    (component, "crash-loop") => {
                        faults.operator.crash_loop.insert(component.to_string());
                    }
                    _ => problems.push(bad()),
                }
            } else if what == "volume" {
                match MountFault::parse(value) {
                    Some(fault) => faults.volume = Some(fault),
                    None => problems.push(bad()),
                }
            } else if what == "node" {
                match value.as_str() {
                    "not-ready" => faults.node = Some(NodeFault::NotReady),
                    "unreachable" => faults.node = Some(NodeFault::Unreachable),
                    _ => problems.push(bad()),
                }
            } else if what.starts_with("registry-") {
                // Registry faults are the image pulls' (`crate::images::registry_faults`).
            } else {
                problems.push(format!("{key}: unknown fault"));
            }
        }
        (faults, problems)
    }

    /// The GPUs a fatal XID made unhealthy.
    pub fn unhealthy_gpus(&self) -> BTreeSet<usize> {
        self.gpus
            .iter()
            .filter(|(_, xid)| fatal(**xid))
            .map(|(gpu, _)| *gpu)
            .collect()
    }

    /// The node's allocatable with unhealthy GPUs' device-plugin resources taken out (each
    /// `nvidia.com/*` resource splits evenly over the node's GPUs, as every layout here does).
    pub fn allocatable(&self, node: &NodeSpec) -> BTreeMap<String, Quantity> {
        let mut allocatable = node.allocatable.clone();
        let gpus = node.hardware.as_ref().map_or(0, |h| h.server.gpus.len());
        let lost = self
            .unhealthy_gpus()
            .into_iter()
            .filter(|g| *g < gpus)
            .count();
        if gpus == 0 || lost == 0 {
            return allocatable;
        }
        for (name, quantity) in allocatable.iter_mut() {
            if name.starts_with("nvidia.com/") {
                let total = quantity.value();
                let per_gpu = total / gpus as i128;
                let left = total - per_gpu * lost as i128;
                *quantity = Quantity::from_units(
                    i64::try_from(left.max(0)).unwrap_or(0),
                    quantity.format(),
                );
            }
        }
        allocatable
    }

    /// The taints a DRA device gets: `parent` is the GPU index the device lives on.
    pub fn device_taints(&self, parent: usize) -> Vec<Value> {
        let mut taints = Vec::new();
        if let Some(xid) = self.gpus.get(&parent).filter(|x| fatal(**x)) {
            taints.push(json!({"key": "gpu.nvidia.com/xid", "value": xid.to_string(), "effect": "NoSchedule"}));
        }
        if self.nvlink_down {
            taints.push(
                json!({"key": "gpu.nvidia.com/nvlink", "value": "down", "effect": "NoSchedule"}),
            );
        }
        taints
    }
}

/// The GPU index a DRA device name (`gpu-3`, `gpu-3-mig-1g18gb-0`) lives on.
pub fn parent_gpu(device: &str) -> Option<usize> {
    let rest = device.strip_prefix("gpu-")?;
    rest.split('-').next()?.parse().ok()
}

/// `slices` with each device tainted as `faults` say (taints replace earlier ones).
pub fn taint_slices(slices: &mut [Value], faults: &Faults) {
    for slice in slices {
        let Some(devices) = slice
            .pointer_mut("/spec/devices")
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for device in devices {
            let Some(parent) = device
                .get("name")
                .and_then(Value::as_str)
                .and_then(parent_gpu)
            else {
                continue;
            };
            let taints = faults.device_taints(parent);
            if let Some(object) = device.as_object_mut() {
                if taints.is_empty() {
                    object.remove("taints");
                } else {
                    object.insert("taints".into(), Value::Array(taints));
                }
            }
        }
    }
}

/// What the node reports when GPU `gpu` turned unhealthy with `xid`:
/// `GPU gpu-<i> (<uuid>): XID <xid>: <what the XID means>`.
pub fn unhealthy_message(node: &str, gpu: usize, xid: u32) -> String {
    format!(
        "GPU gpu-{gpu} ({}): XID {xid}: {}",
        crate::resource_slice::device_uuid("GPU", node, &format!("gpu-{gpu}")),
        xid_description(xid)
    )
}

/// The status a kubelet posts at `now` for a node with faults: allocatable without unhealthy
/// GPUs, Ready per the node fault, and `NetworkInterfacesDegraded` naming NICs that are down.
pub fn node_status(spec: &NodeSpec, faults: &Faults, now: SystemTime) -> Value {
    let now = timestamp(now);
    let mut status = crate::node_object::node_status(spec, &now);
    let allocatable: serde_json::Map<String, Value> = faults
        .allocatable(spec)
        .iter()
        .map(|(k, v)| (k.clone(), json!(v.to_canonical())))
        .collect();
    status["status"]["allocatable"] = Value::Object(allocatable);
    if let Some(conditions) = status["status"]["conditions"].as_array_mut() {
        if faults.node == Some(NodeFault::NotReady) {
            conditions::set(
                conditions,
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime is down",
                &now,
            );
        }
        let (degraded, reason, message) = if faults.nics_down.is_empty() {
            (
                "False",
                "NetworkInterfacesUp",
                "all network interfaces are up".to_string(),
            )
        } else {
            let nics: Vec<&str> = faults.nics_down.iter().map(String::as_str).collect();
            (
                "True",
                "NetworkInterfaceDown",
                format!("network interfaces down: {}", nics.join(", ")),
            )
        };
        conditions.push(json!({"type": "NetworkInterfacesDegraded", "status": degraded,
            "reason": reason, "message": message, "lastHeartbeatTime": now, "lastTransitionTime": now}));
    }
    status
}

/// Whether a node label is one GPU feature discovery publishes (`nvidia.com/gpu.*` but the
/// operator's own `gpu.deploy.*` and driver-upgrade labels, `nvidia.com/cuda.*`,
/// `nvidia.com/mig*`, `nvidia.com/mps*`, `nvidia.com/vgpu*`).
pub fn gfd_label(key: &str) -> bool {
    let Some(name) = key.strip_prefix("nvidia.com/") else {
        return false;
    };
    let ours = name.starts_with("gpu.deploy.") || name.starts_with("gpu-driver-upgrade");
    !ours
        && ["gpu.", "cuda.", "mig", "mps", "vgpu"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// The merge patch that removes GPU feature discovery's labels from a node (`missing`) or
/// puts the node's own back.
pub fn gfd_labels_patch(spec: &NodeSpec, missing: bool) -> Value {
    let labels: serde_json::Map<String, Value> = spec
        .labels
        .iter()
        .filter(|(key, _)| gfd_label(key))
        .map(|(key, value)| {
            let value = if missing { Value::Null } else { json!(value) };
            (key.clone(), value)
        })
        .collect();
    json!({"metadata": {"labels": labels}})
}

/// What a DRA driver that lost track of its slices leaves behind: each slice as published
/// before (its name suffixed `-stale`, the pool's generation as it was), while the slices
/// published now move to the next generation. Returns the stale copies; `slices` is updated.
pub fn stale_slices(slices: &mut [Value]) -> Vec<Value> {
    let mut stale = Vec::new();
    for slice in slices.iter_mut() {
        let mut copy = slice.clone();
        if let Some(name) = copy.pointer_mut("/metadata/name") {
            *name = json!(format!("{}-stale", name.as_str().unwrap_or_default()));
        }
        if let Some(generation) = slice.pointer_mut("/spec/pool/generation") {
            *generation = json!(generation.as_i64().unwrap_or(0) + 1);
        }
        stale.push(copy);
    }
    stale
}

/// The pods (namespace, name) reserving a claim that was allocated one of the DRA devices of
/// GPU `gpu` on `node`: the containers a GPU failure on it crashes.
pub fn claim_users(claims: &[ResourceClaim], node: &str, gpu: usize) -> BTreeSet<(String, String)> {
    let mut users = BTreeSet::new();
    for claim in claims {
        let status = claim.status.as_ref();
        let on_gpu = status
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .is_some_and(|results| {
                results
                    .iter()
                    .any(|r| r.pool == node && parent_gpu(&r.device) == Some(gpu))
            });
        if on_gpu {
            let namespace = claim.metadata.namespace.clone().unwrap_or_default();
            for consumer in status
                .and_then(|s| s.reserved_for.as_ref())
                .into_iter()
                .flatten()
            {
                users.insert((namespace.clone(), consumer.name.clone()));
            }
        }
    }
    users
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn a_gpu_fatal_xid_is_sticky_until_cleared() {
        use GpuEvent::{Clear, Xid};
        use GpuHealth::{ApplicationError, Down, Healthy};
        let table = [
            (Healthy, Xid(13), ApplicationError(13)),
            (Healthy, Xid(79), Down(79)),
            (Healthy, Clear, Healthy),
            (ApplicationError(13), Xid(31), ApplicationError(31)),
            (ApplicationError(13), Xid(48), Down(48)),
            (ApplicationError(13), Clear, Healthy),
            (Down(79), Xid(13), Down(79)),
            (Down(79), Xid(48), Down(79)),
            (Down(79), Xid(79), Down(79)),
            (Down(79), Clear, Healthy),
        ];
        for (state, event, want) in table {
            assert_eq!(state.next(event), want, "{state:?} x {event:?}");
            // The annotation round-trips the state.
            assert_eq!(GpuHealth::from_xid(want.xid()), want);
        }
    }

    #[test]
    fn observed_annotations_keep_a_downed_gpu_down() {
        let faults = |gpus: &[(usize, u32)]| Faults {
            gpus: gpus.iter().copied().collect(),
            ..Faults::default()
        };
        // (before, annotated now, effective faults)
        let table = [
            (faults(&[]), faults(&[(3, 79)]), faults(&[(3, 79)])),
            (faults(&[(3, 79)]), faults(&[(3, 13)]), faults(&[(3, 79)])),
            (faults(&[(3, 79)]), faults(&[(3, 48)]), faults(&[(3, 79)])),
            (faults(&[(3, 13)]), faults(&[(3, 48)]), faults(&[(3, 48)])),
            (faults(&[(3, 79)]), faults(&[]), faults(&[])),
            (
                faults(&[(1, 79), (2, 13)]),
                faults(&[(1, 13), (2, 31)]),
                faults(&[(1, 79), (2, 31)]),
            ),
        ];
        for (before, annotated, want) in table {
            let got = before.observe(annotated.clone());
            assert_eq!(got, want, "{before:?} then {annotated:?}");
        }
        let with_node = Faults {
            node: Some(NodeFault::NotReady),
            nvlink_down: true,
            ..faults(&[(0, 79)])
        };
        assert_eq!(
            faults(&[(0, 79)]).observe(with_node.clone()),
            with_node,
            "node, NVLink and NIC faults are as annotated"
        );
    }

    #[test]
    fn annotations_parse_into_faults() {
        let annotations: BTreeMap<String, String> = [
            ("fault.tessera.dev/gpu-3", "xid-79"),
            ("fault.tessera.dev/gpu-1", "xid-13"),
            ("fault.tessera.dev/nic-mlx5_0", "down"),
            ("fault.tessera.dev/nvlink", "down"),
            ("fault.tessera.dev/node", "unreachable"),
            ("fault.tessera.dev/volume", "mount-failure"),
            ("fault.tessera.dev/gpu-x", "xid-48"),
            ("fault.tessera.dev/fan", "loud"),
            ("other.example.com/x", "y"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (faults, problems) = Faults::parse(&annotations);
        assert_eq!(faults.gpus, BTreeMap::from([(1, 13), (3, 79)]));
        assert_eq!(
            faults.unhealthy_gpus(),
            BTreeSet::from([3]),
            "XID 13 is an application error"
        );
        assert!(faults.nvlink_down);
        assert_eq!(faults.nics_down, BTreeSet::from(["mlx5_0".to_string()]));
        assert_eq!(faults.node, Some(NodeFault::Unreachable));
        assert_eq!(faults.volume, Some(MountFault::MountFailure));
        assert_eq!(
            problems,
            [
                "fault.tessera.dev/fan: unknown fault",
                "fault.tessera.dev/gpu-x: unsupported value \"xid-48\""
            ]
        );
    }

    #[test]
    fn operator_faults_parse_break_labels_and_leave_stale_slices() {
        let annotations: BTreeMap<String, String> = [
            (
                "fault.tessera.dev/operator-nvidia-driver-daemonset",
                "crash-loop",
            ),
            ("fault.tessera.dev/operator-labels", "missing"),
            ("fault.tessera.dev/operator-slices", "stale"),
            ("fault.tessera.dev/operator-nvidia-dcgm-exporter", "sleepy"),
            ("fault.tessera.dev/operator-labels-x", "crash-loop"),
            ("fault.tessera.dev/operator-slices", "stale"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (faults, problems) = Faults::parse(&annotations);
        assert_eq!(
            faults.operator.crash_loop,
            BTreeSet::from([
                "labels-x".to_string(),
                "nvidia-driver-daemonset".to_string()
            ])
        );
        assert!(faults.operator.labels_missing && faults.operator.slices_stale);
        assert_eq!(
            problems,
            ["fault.tessera.dev/operator-nvidia-dcgm-exporter: unsupported value \"sleepy\""]
        );
        let bad = BTreeMap::from([(
            "fault.tessera.dev/operator-labels".to_string(),
            "gone".to_string(),
        )]);
        assert_eq!(
            Faults::parse(&bad).1,
            ["fault.tessera.dev/operator-labels: unsupported value \"gone\""]
        );

        // (label, whether GPU feature discovery publishes it)
        for (label, gfd) in [
            ("nvidia.com/gpu.product", true),
            ("nvidia.com/gpu.count", true),
            ("nvidia.com/cuda.driver-version.full", true),
            ("nvidia.com/mig.strategy", true),
            ("nvidia.com/mig-1g.18gb.count", true),
            ("nvidia.com/gpu.deploy.driver", false),
            ("nvidia.com/gpu-driver-upgrade-state", false),
            ("feature.node.kubernetes.io/pci-10de.present", false),
            ("tessera.dev/pool", false),
        ] {
            assert_eq!(gfd_label(label), gfd, "{label}");
        }
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: h100\n  count: 1\n  server: dgx-h100\n  labels: {tessera.dev/pool: h100}\n",
        )
        .expect("topology");
        let node = &topology.nodes()[0];
        let removed = gfd_labels_patch(node, true);
        let labels = removed["metadata"]["labels"].as_object().expect("labels");
        assert_eq!(labels["nvidia.com/gpu.present"], Value::Null);
        assert!(!labels.contains_key("tessera.dev/pool"));
        let restored = gfd_labels_patch(node, false);
        assert_eq!(
            restored["metadata"]["labels"]["nvidia.com/gpu.present"],
            "true"
        );
        assert_eq!(
            labels.len(),
            restored["metadata"]["labels"]
                .as_object()
                .map_or(0, |l| l.len())
        );

        let mut slices = vec![json!({"metadata": {"name": "h100-1-gpu.nvidia.com"},
            "spec": {"pool": {"name": "h100-1", "generation": 1, "resourceSliceCount": 1}}})];
        let stale = stale_slices(&mut slices);
        assert_eq!(stale[0]["metadata"]["name"], "h100-1-gpu.nvidia.com-stale");
        assert_eq!(stale[0]["spec"]["pool"]["generation"], 1);
        assert_eq!(
            slices[0]["spec"]["pool"]["generation"], 2,
            "the live slices move on"
        );
    }

    #[test]
    fn unhealthy_gpus_lower_allocatable_and_taint_their_devices() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: l40s\n  count: 1\n  server: pcie-l40s-4\n  devices: {exposure: device-plugin, sharing: {timeSlicing: {replicas: 4}}}\n",
        )
        .expect("topology");
        let node = &topology.nodes()[0];
        let faults = Faults {
            gpus: BTreeMap::from([(2, 48)]),
            ..Faults::default()
        };
        assert_eq!(node.allocatable["nvidia.com/gpu"].value(), 16);
        assert_eq!(
            faults.allocatable(node)["nvidia.com/gpu"].value(),
            12,
            "one GPU's four replicas gone"
        );
        assert_eq!(faults.allocatable(node)["cpu"], node.allocatable["cpu"]);

        let mut slices = vec![json!({"spec": {"devices": [
            {"name": "gpu-2"}, {"name": "gpu-2-mig-1g18gb-0"}, {"name": "gpu-3", "taints": [{"key": "old"}]}
        ]}})];
        taint_slices(&mut slices, &faults);
        let devices = &slices[0]["spec"]["devices"];
        assert_eq!(devices[0]["taints"][0]["key"], "gpu.nvidia.com/xid");
        assert_eq!(devices[0]["taints"][0]["value"], "48");
        assert_eq!(devices[1]["taints"][0]["effect"], "NoSchedule");
        assert!(
            devices[2].get("taints").is_none(),
            "recovered devices lose their taints"
        );
    }

    #[test]
    fn a_faulted_node_reports_its_faults_in_its_status() {
        let topology = Topology::default_lab();
        let node = &topology.nodes()[0];
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_323_045);
        let condition = |status: &Value, kind: &str| {
            conditions::find(status, kind).cloned().unwrap_or_default()
        };
        let healthy = node_status(node, &Faults::default(), now);
        assert_eq!(condition(&healthy, "Ready")["status"], "True");
        assert_eq!(
            condition(&healthy, "NetworkInterfacesDegraded"),
            json!({"type": "NetworkInterfacesDegraded", "status": "False",
                "reason": "NetworkInterfacesUp", "message": "all network interfaces are up",
                "lastHeartbeatTime": "2026-01-02T03:04:05Z",
                "lastTransitionTime": "2026-01-02T03:04:05Z"})
        );
        let faults = Faults {
            node: Some(NodeFault::NotReady),
            nics_down: BTreeSet::from(["mlx5_0".to_string(), "mlx5_1".to_string()]),
            ..Faults::default()
        };
        let faulted = node_status(node, &faults, now);
        assert_eq!(
            condition(&faulted, "Ready"),
            json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "message": "container runtime is down",
                "lastHeartbeatTime": "2026-01-02T03:04:05Z",
                "lastTransitionTime": "2026-01-02T03:04:05Z"})
        );
        let degraded = condition(&faulted, "NetworkInterfacesDegraded");
        assert_eq!(degraded["status"], "True");
        assert_eq!(
            degraded["message"],
            "network interfaces down: mlx5_0, mlx5_1"
        );
    }

    #[test]
    fn a_failed_gpu_takes_down_the_pods_reserving_claims_on_it() {
        let claim = |namespace: &str, device: &str, pool: &str, pods: &[&str]| -> ResourceClaim {
            let reserved: Vec<Value> = pods
                .iter()
                .map(|p| json!({"resource": "pods", "name": p, "uid": format!("{p}-uid")}))
                .collect();
            serde_json::from_value(json!({
                "metadata": {"namespace": namespace, "name": "c"},
                "spec": {"devices": {"requests": []}},
                "status": {"allocation": {"devices": {"results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}
                ]}}, "reservedFor": reserved},
            }))
            .expect("claim")
        };
        let claims = [
            claim("a", "gpu-3", "n1", &["p1", "p2"]),
            claim("b", "gpu-3-mig-1g18gb-0", "n1", &["p3"]),
            claim("c", "gpu-2", "n1", &["p4"]),
            claim("d", "gpu-3", "n2", &["p5"]),
        ];
        let users: Vec<(String, String)> = claim_users(&claims, "n1", 3).into_iter().collect();
        let want: Vec<(String, String)> = [("a", "p1"), ("a", "p2"), ("b", "p3")]
            .into_iter()
            .map(|(n, p)| (n.to_string(), p.to_string()))
            .collect();
        assert_eq!(users, want);
        let message = unhealthy_message("n1", 3, 79);
        assert!(message.starts_with("GPU gpu-3 (GPU-"), "{message}");
        assert!(
            message.ends_with("): XID 79: GPU has fallen off the bus"),
            "{message}"
        );
    }
}
