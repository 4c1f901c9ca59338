//! The cluster topology file: which node twins exist, with what capacity, labels, taints and
//! addresses.
//!
//! ```yaml
//! apiVersion: tessera.dev/v1alpha1
//! kind: ClusterTopology
//! pools:
//! - name: cpu                 # nodes are named <name>-1 … <name>-<count>
//!   count: 2
//!   capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
//!   labels: {node-role.kubernetes.io/worker: ""}
//!   taints: [{key: dedicated, value: batch, effect: NoSchedule}]
//! - name: h200                # a catalog server model: capacity defaults from it
//!   count: 2
//!   server: hgx-h200
//!   placement: {zone: lab-a, block: b1, racks: [r1, r2]}
//!   devices: {exposure: dra, sharing: {mig: {layout: all-1g.18gb}}}
//!   kubelet: {topologyManagerPolicy: single-numa-node, topologyManagerScope: pod, cpuManagerPolicy: static}
//!   runtimeHandlers: [runc, nvidia, kata-qemu]   # default: runc, plus nvidia on GPU pools
//! - name: vgpu                # what the nodes are underneath (crate::worker_model):
//!   count: 1                  # bare-metal (default), vm-passthrough (GPUs on vfio-pci, offered
//!   server: dgx-h100          # as the DRA driver's vfio devices) or vm-vgpu (vGPUs of one
//!   machine: vm-vgpu          # type, `vgpuProfile`, checked against the GPU's vGPU table);
//!   vgpuProfile: H100-4C      # VM pools declare no `devices`
//! - name: burst               # starts with `count` nodes; the simulated autoscaler adds up to
//!   count: 0                  # max for ProvisioningRequests (crate::autoscaler) after the delay
//!   capacity: {cpu: "8", memory: 32Gi, pods: "110"}
//!   autoscaling: {min: 0, max: 4, provisioningDelay: 10s}
//!   registryMirror: mirror.lab:5000   # pulls go to the mirror first (crate::images)
//!   registryBandwidth: 100Mi          # bytes per second a pull gets (default 200Mi)
//! registries:                 # simulated registries; others are reachable, anonymous and
//! - host: registry.lab:5000   # hold every image
//!   auth: true                # pulls need a matching imagePullSecret
//!   images: {team/app:v1: 20Mi}   # none listed: any image, of 4Mi
//! ```
//!
//! Parsing is strict (unknown fields are errors naming their path) and validated (names,
//! quantities, taint effects; server models, MIG layouts and sharing against the accelerator
//! catalog, see [`crate::hardware`]). Knows nothing about the API server.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_devices::Catalog;
use tessera_model::Quantity;

use crate::hardware::{self, Devices, KubeletPolicies, PoolHardware, PoolPlacement};
use crate::network::Networking;
use crate::networks::{AttachedNic, Network, ServerNetworks};
use crate::worker_model::Machine;
use tessera_devices::VgpuType;

/// The built-in lab topology used when no file is given.
pub const DEFAULT_TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
metadata: {name: tessera-lab}
pools:
- name: cpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: cpu
  placement: {zone: lab-a}
- name: h100
  count: 2
  server: dgx-h100
  capacity: {ephemeral-storage: 2Ti}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: h100
  placement: {zone: lab-a, block: b1, racks: [r1, r2]}
  devices: {exposure: dra}
  kubelet: {topologyManagerPolicy: single-numa-node, topologyManagerScope: pod, cpuManagerPolicy: static}
- name: h200
  count: 2
  server: hgx-h200
  capacity: {ephemeral-storage: 2Ti}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: h200
  placement: {zone: lab-a, block: b1, racks: [r3]}
  devices: {exposure: dra, sharing: {mig: {layout: all-1g.18gb}}}
- name: l40s
  count: 1
  server: pcie-l40s-4
  capacity: {ephemeral-storage: 1Ti}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: l40s
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  placement: {zone: lab-b}
  devices: {exposure: device-plugin, sharing: {timeSlicing: {replicas: 4}}}
- name: control-plane
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110", ephemeral-storage: 100Gi}
  labels:
    node-role.kubernetes.io/control-plane: ""
  taints: [{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}]
  placement: {zone: lab-a}
"#;

/// A cluster topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Topology {
    /// Must be `tessera.dev/v1alpha1`.
    pub api_version: String,
    /// Must be `ClusterTopology`.
    pub kind: String,
    /// Optional metadata (a name).
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
    /// Groups of identical nodes.
    pub pools: Vec<Pool>,
    /// The address plan (node InternalIPs and pod CIDRs).
    #[serde(default)]
    pub networking: Networking,
    /// The traffic classes (management, service, storage, high-performance).
    #[serde(default)]
    pub networks: Vec<Network>,
    /// Which NICs of each server model carry which network.
    #[serde(default)]
    pub server_networks: Vec<ServerNetworks>,
    /// The simulated image registries (see [`crate::images`]).
    #[serde(default)]
    pub registries: Vec<RegistrySpec>,
    /// Each pool's checked hardware (filled by validation).
    #[serde(skip)]
    hardware: Vec<Option<PoolHardware>>,
    /// Each pool's NICs and their networks (filled by validation).
    #[serde(skip)]
    nics: Vec<Vec<AttachedNic>>,
    /// Each pool's worker model and vGPU type (filled by validation).
    #[serde(skip)]
    machines: Vec<(Machine, Option<VgpuType>)>,
}

/// A group of identical nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    /// Pool name; nodes are `<name>-<index>` from 1.
    pub name: String,
    /// How many nodes.
    pub count: u32,
    /// Resource capacity of each node (cpu, memory and pods default from the server model).
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
    /// Resources held back from pods (allocatable = capacity − reserved).
    #[serde(default)]
    pub reserved: BTreeMap<String, String>,
    /// Labels of each node (the standard hostname/os/arch labels are added).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints of each node.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// The catalog server model of each node.
    #[serde(default)]
    pub server: Option<String>,
    /// Zone, block and racks.
    #[serde(default)]
    pub placement: PoolPlacement,
    /// How accelerators are offered and shared (needs `server`).
    #[serde(default)]
    pub devices: Option<Devices>,
    /// Kubelet resource-manager policies.
    #[serde(default)]
    pub kubelet: KubeletPolicies,
    /// Nodes join tainted and are opened only after validation.
    #[serde(default)]
    pub onboarding: bool,
    /// The simulated cluster autoscaler may add nodes to the pool (from `count` up to `max`)
    /// for ProvisioningRequests and remove idle ones (down to `min`).
    #[serde(default)]
    pub autoscaling: Option<Autoscaling>,
    /// The container runtime's handlers on each node, the first its default (none listed:
    /// `runc`, plus `nvidia` where the server has GPUs; see [`crate::runtime_handlers`]).
    #[serde(default)]
    pub runtime_handlers: Option<Vec<String>>,
    /// The registry mirror the pool's runtime pulls through first (a registry host).
    #[serde(default)]
    pub registry_mirror: Option<String>,
    /// The bandwidth a pull gets on the pool's nodes, bytes per second as a quantity
    /// (default [`crate::images::DEFAULT_BANDWIDTH`]).
    #[serde(default)]
    pub registry_bandwidth: Option<String>,
    /// What the nodes are: `bare-metal` (default), `vm-passthrough` or `vm-vgpu` (see
    /// [`crate::worker_model`]).
    #[serde(default)]
    pub machine: Option<String>,
    /// The vGPU type of a `vm-vgpu` pool's GPUs (`H100-4C`).
    #[serde(default)]
    pub vgpu_profile: Option<String>,
}

/// A simulated image registry of the topology.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RegistrySpec {
    /// Host (with port) that image references name.
    pub host: String,
    /// Whether pulls need credentials from an `imagePullSecret`.
    #[serde(default)]
    pub auth: bool,
    /// The images it holds (`repository:tag` → size as a quantity); none: any image.
    #[serde(default)]
    pub images: BTreeMap<String, String>,
}

/// A pool's autoscaling bounds.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Autoscaling {
    /// The fewest nodes idle ones are removed down to.
    #[serde(default)]
    pub min: u32,
    /// The most nodes.
    pub max: u32,
    /// How long adding nodes takes (a duration such as `30s`; default none).
    #[serde(default)]
    pub provisioning_delay: Option<String>,
}

impl Autoscaling {
    /// The provisioning delay (zero when not set or not a duration; validation rejects the
    /// latter).
    pub fn delay(&self) -> std::time::Duration {
        self.provisioning_delay
            .as_deref()
            .and_then(|d| tessera_model::time::parse_duration(d).ok())
            .unwrap_or_default()
    }
}

/// An autoscaled pool: its bounds and every node it may have (the first `count` registered
/// at start, the rest standing by).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscaledPool {
    /// Pool name.
    pub name: String,
    /// Its bounds.
    pub autoscaling: Autoscaling,
    /// Its `max` nodes, in order.
    pub nodes: Vec<NodeSpec>,
    /// How many of them are registered at start (`count`).
    pub initial: usize,
}

/// A node taint.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: String,
}

/// Why a topology is not usable.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The YAML does not parse or has unknown fields.
    #[error("topology: {0}")]
    Parse(String),
    /// A value is invalid.
    #[error("topology: {}{field}: {message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Invalid {
        /// The field path.
        field: String,
        /// What is wrong.
        message: String,
        /// The line the field is on, when it can be found.
        line: Option<usize>,
    },
}

/// One node to run, expanded from a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Position among all nodes (from 0), used for addresses and pod CIDRs.
    pub index: u32,
    /// Pool name.
    pub pool: String,
    /// Capacity, canonical quantities.
    pub capacity: BTreeMap<String, Quantity>,
    /// Allocatable, canonical quantities.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// The server model and its accelerators, for pools that name one.
    pub hardware: Option<PoolHardware>,
    /// How accelerators are offered and shared.
    pub devices: Option<Devices>,
    /// Kubelet resource-manager policies.
    pub kubelet: KubeletPolicies,
    /// Whether the node goes through onboarding.
    pub onboarding: bool,
    /// The topology's address plan.
    pub networking: Networking,
    /// The topology's networks.
    pub networks: Vec<Network>,
    /// The node's NICs that carry a network.
    pub nics: Vec<AttachedNic>,
    /// The container runtime's handlers, the first the default.
    pub runtime_handlers: Vec<String>,
    /// What the node is underneath (bare metal, a passthrough or a vGPU host).
    pub machine: Machine,
    /// The vGPU type of a vGPU host.
    pub vgpu: Option<VgpuType>,
}

impl NodeSpec {
    /// The node's internal IP address.
    pub fn internal_ip(&self) -> String {
        self.networking.node_ip(self.index)
    }

    /// The node's pod CIDR.
    pub fn pod_cidr(&self) -> String {
        self.networking.node_pod_cidr(self.index)
    }

    /// A pod address in the node's pod CIDR.
    pub fn pod_ip(&self, octet: u8) -> String {
        self.networking.pod_ip(self.index, octet)
    }
}

impl Topology {
    /// Parses and validates a topology document.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let catalog = Catalog::built_in().map_err(|e| TopologyError::Parse(e.to_string()))?;
        Topology::parse_with(text, &catalog)
    }

    /// Parses and validates a topology document against an accelerator catalog.
    pub fn parse_with(text: &str, catalog: &Catalog) -> Result<Topology, TopologyError> {
        let mut topology: Topology =
            serde_saphyr::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))?;
        topology.validate(catalog).map_err(|error| match error {
            TopologyError::Invalid { field, message, .. } => TopologyError::Invalid {
                line: tessera_model::yaml_location::line_of(text, &field),
                field,
                message,
            },
            other => other,
        })?;
        Ok(topology)
    }

    /// The built-in lab topology.
    pub fn default_lab() -> Topology {
        Topology::parse(DEFAULT_TOPOLOGY).expect("the built-in topology is valid")
    }

    fn validate(&mut self, catalog: &Catalog) -> Result<(), TopologyError> {
        let invalid = |field: String, message: String| {
            Err(TopologyError::Invalid {
                field,
                message,
                line: None,
            })
        };
        if self.api_version != "tessera.dev/v1alpha1" {
            return invalid(
                "apiVersion".into(),
                format!("must be tessera.dev/v1alpha1, got {:?}", self.api_version),
            );
        }
        if self.kind != "ClusterTopology" {
            return invalid(
                "kind".into(),
                format!("must be ClusterTopology, got {:?}", self.kind),
            );
        }
        if self.pools.is_empty() {
            return invalid("pools".into(), "at least one pool is required".into());
        }
        let mut hosts = std::collections::BTreeSet::new();
        for (r, registry) in self.registries.iter().enumerate() {
            if !registry_host_ok(&registry.host) {
                return invalid(
                    format!("registries[{r}].host"),
                    format!(
                        "{:?} must be a registry host (host or host:port)",
                        registry.host
                    ),
                );
            }
            if !hosts.insert(registry.host.clone()) {
                return invalid(
                    format!("registries[{r}].host"),
                    format!("duplicate registry {:?}", registry.host),
                );
            }
            for (name, size) in &registry.images {
                let field = format!("registries[{r}].images.{name}");
                let reference = format!("{}/{name}", registry.host);
                match crate::images::ImageRef::parse(&reference) {
                    Ok(image) if image.short_name() == *name => {}
                    _ => {
                        return invalid(
                            field,
                            format!("{name:?} must be repository:tag (lowercase path)"),
                        );
                    }
                }
                if byte_quantity(size).is_none() {
                    return invalid(field, format!("{size:?} must be a quantity of bytes"));
                }
            }
        }
        let mut names = std::collections::BTreeSet::new();
        self.hardware.clear();
        self.machines.clear();
        for i in 0..self.pools.len() {
            let pool = &self.pools[i];
            let at = |field: &str| format!("pools[{i}].{field}");
            let label_ok = !pool.name.is_empty()
                && pool.name.len() <= 50
                && pool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !pool.name.starts_with('-')
                && !pool.name.ends_with('-');
            if !label_ok {
                return invalid(
                    at("name"),
                    format!(
                        "{:?} must be a lowercase DNS label of at most 50 characters",
                        pool.name
                    ),
                );
            }
            if !names.insert(pool.name.clone()) {
                return invalid(at("name"), format!("duplicate pool name {:?}", pool.name));
            }
            let lowest = u32::from(pool.autoscaling.is_none());
            if pool.count < lowest || pool.count > 5000 {
                return invalid(
                    at("count"),
                    format!("must be between {lowest} and 5000, got {}", pool.count),
                );
            }
            if let Some(scaling) = &pool.autoscaling {
                if !(scaling.min <= pool.count && pool.count <= scaling.max && scaling.max <= 5000)
                {
                    return invalid(
                        at("autoscaling"),
                        format!(
                            "needs min <= count <= max <= 5000, got min {}, count {}, max {}",
                            scaling.min, pool.count, scaling.max
                        ),
                    );
                }
                if let Some(delay) = &scaling.provisioning_delay
                    && let Err(error) = tessera_model::time::parse_duration(delay)
                {
                    return invalid(
                        at("autoscaling.provisioningDelay"),
                        format!("{delay:?}: {error}"),
                    );
                }
            }
            for (map, field) in [(&pool.capacity, "capacity"), (&pool.reserved, "reserved")] {
                for (resource, value) in map {
                    if let Err(error) = value.parse::<Quantity>() {
                        return invalid(
                            format!("{}.{resource}", at(field)),
                            format!("{value:?}: {error}"),
                        );
                    }
                }
            }
            let hardware = match &pool.server {
                Some(server) => Some(
                    hardware::check(catalog, server, pool.devices.as_ref(), &pool.kubelet)
                        .map_err(|(field, message)| TopologyError::Invalid {
                            line: None,
                            field: at(&field),
                            message,
                        })?,
                ),
                None if pool.devices.is_some() => {
                    return invalid(
                        at("devices"),
                        "needs a server model (server) whose accelerators it offers".into(),
                    );
                }
                None => None,
            };
            if let Some(hardware) = &hardware {
                // Capacity defaults from the server model; the file may override it.
                let server = &hardware.server;
                let defaults = [
                    (
                        "cpu",
                        (u32::from(server.sockets) * server.cores_per_socket).to_string(),
                    ),
                    ("memory", format!("{}Gi", server.memory_gib)),
                    ("pods", "110".to_string()),
                ];
                for (resource, value) in defaults {
                    self.pools[i]
                        .capacity
                        .entry(resource.to_string())
                        .or_insert(value);
                }
            }
            let machine =
                check_machine(&self.pools[i], hardware.as_ref()).map_err(|(field, message)| {
                    TopologyError::Invalid {
                        line: None,
                        field: at(&field),
                        message,
                    }
                })?;
            self.machines.push(machine);
            self.hardware.push(hardware);
            let pool = &self.pools[i];
            for resource in ["cpu", "memory", "pods"] {
                if !pool.capacity.contains_key(resource) {
                    return invalid(format!("{}.{resource}", at("capacity")), "required".into());
                }
            }
            for (h, handler) in pool.runtime_handlers.iter().flatten().enumerate() {
                let field = format!("{}[{h}]", at("runtimeHandlers"));
                let label_ok = !handler.is_empty()
                    && handler.len() <= 63
                    && handler
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !handler.starts_with('-')
                    && !handler.ends_with('-');
                if !label_ok {
                    return invalid(
                        field,
                        format!(
                            "{handler:?} must be a lowercase DNS label of at most 63 characters, as a RuntimeClass handler"
                        ),
                    );
                }
                if pool
                    .runtime_handlers
                    .iter()
                    .flatten()
                    .take(h)
                    .any(|earlier| earlier == handler)
                {
                    return invalid(field, format!("duplicate handler {handler:?}"));
                }
            }
            if pool.runtime_handlers.as_ref().is_some_and(Vec::is_empty) {
                return invalid(
                    at("runtimeHandlers"),
                    "at least one handler is required (leave the field out for the default)".into(),
                );
            }
            if let Some(mirror) = &pool.registry_mirror
                && !registry_host_ok(mirror)
            {
                return invalid(
                    at("registryMirror"),
                    format!("{mirror:?} must be a registry host (host or host:port)"),
                );
            }
            if let Some(bandwidth) = &pool.registry_bandwidth
                && byte_quantity(bandwidth).is_none_or(|b| b == 0)
            {
                return invalid(
                    at("registryBandwidth"),
                    format!("{bandwidth:?} must be a positive quantity of bytes per second"),
                );
            }
            for (t, taint) in pool.taints.iter().enumerate() {
                if !matches!(
                    taint.effect.as_str(),
                    "NoSchedule" | "PreferNoSchedule" | "NoExecute"
                ) {
                    return invalid(
                        format!("{}[{t}].effect", at("taints")),
                        format!(
                            "{:?} must be NoSchedule, PreferNoSchedule or NoExecute",
                            taint.effect
                        ),
                    );
                }
                if taint.key.is_empty() {
                    return invalid(format!("{}[{t}].key", at("taints")), "required".into());
                }
            }
        }
        let nodes: u64 = self
            .pools
            .iter()
            .map(|p| u64::from(p.autoscaling.as_ref().map_or(p.count, |a| a.max)))
            .sum();
        self.networking
            .check(nodes)
            .map_err(|(field, message)| TopologyError::Invalid {
                field,
                message,
                line: None,
            })?;
        crate::networks::check(
            &self.networks,
            &self.server_networks,
            &self.networking,
            catalog,
            nodes,
        )
        .map_err(|(field, message)| TopologyError::Invalid {
            field,
            message,
            line: None,
        })?;
        self.nics = self
            .pools
            .iter()
            .map(|pool| {
                pool.server.as_deref().map_or_else(Vec::new, |server| {
                    crate::networks::attached_nics(
                        &self.networks,
                        &self.server_networks,
                        catalog,
                        server,
                    )
                })
            })
            .collect();
        Ok(())
    }

    /// Every node the topology registers at start, in order.
    /// The simulated registries, each pool's mirror and pull bandwidth.
    pub fn image_registries(&self) -> crate::images::Registries {
        let registries = self
            .registries
            .iter()
            .map(|r| {
                let images = r
                    .images
                    .iter()
                    .map(|(name, size)| (name.clone(), byte_quantity(size).unwrap_or_default()))
                    .collect();
                let registry = crate::images::Registry {
                    host: r.host.clone(),
                    auth: r.auth,
                    images,
                };
                (r.host.clone(), registry)
            })
            .collect();
        let mirrors = self
            .pools
            .iter()
            .filter_map(|p| Some((p.name.clone(), p.registry_mirror.clone()?)))
            .collect();
        let bandwidth = self
            .pools
            .iter()
            .filter_map(|p| {
                let bytes = byte_quantity(p.registry_bandwidth.as_deref()?)?;
                Some((p.name.clone(), bytes))
            })
            .collect();
        crate::images::Registries {
            registries,
            mirrors,
            bandwidth,
        }
    }

    pub fn nodes(&self) -> Vec<NodeSpec> {
        let mut nodes = Vec::new();
        let mut index = 0;
        for p in 0..self.pools.len() {
            let pool = &self.pools[p];
            nodes.extend(self.expand(p, 1..=pool.count, index));
            index += pool.count;
        }
        nodes
    }

    /// The pools the simulated autoscaler may grow, each with all its `max` nodes: those
    /// beyond `count` take the addresses after every registered node's.
    pub fn autoscaled_pools(&self) -> Vec<AutoscaledPool> {
        let mut index: u32 = self.pools.iter().map(|p| p.count).sum();
        let mut first = 0;
        let mut pools = Vec::new();
        for (p, pool) in self.pools.iter().enumerate() {
            let start = first;
            first += pool.count;
            let Some(scaling) = &pool.autoscaling else {
                continue;
            };
            let mut nodes = self.expand(p, 1..=pool.count, start);
            let standby = scaling.max.saturating_sub(pool.count);
            nodes.extend(self.expand(p, pool.count + 1..=scaling.max, index));
            index += standby;
            pools.push(AutoscaledPool {
                name: pool.name.clone(),
                autoscaling: scaling.clone(),
                nodes,
                initial: pool.count as usize,
            });
        }
        pools
    }

    /// The nodes `numbers` of pool `p`, their addresses from `first_index` on.
    fn expand(
        &self,
        p: usize,
        numbers: std::ops::RangeInclusive<u32>,
        first_index: u32,
    ) -> Vec<NodeSpec> {
        let mut nodes = Vec::new();
        let mut index = first_index;
        let pool = &self.pools[p];
        let hardware = self.hardware.get(p).cloned().flatten();
        let parse = |map: &BTreeMap<String, String>| -> BTreeMap<String, Quantity> {
            map.iter()
                .filter_map(|(k, v)| v.parse().ok().map(|q| (k.clone(), q)))
                .collect()
        };
        let mut capacity = parse(&pool.capacity);
        let mut device_labels = BTreeMap::new();
        if let Some(hardware) = &hardware {
            // Devices are advertised as the device plugin and GFD/NFD would.
            for (resource, count) in
                crate::accelerators::extended_resources(hardware, pool.devices.as_ref())
            {
                capacity.entry(resource).or_insert_with(|| {
                    Quantity::from_units(
                        i64::try_from(count).unwrap_or(i64::MAX),
                        tessera_model::Format::DecimalSi,
                    )
                });
            }
            device_labels = crate::accelerators::labels(hardware, pool.devices.as_ref());
        }
        let (machine, vgpu) = self.machines.get(p).copied().unwrap_or_default();
        let nvidia = hardware
            .as_ref()
            .and_then(|h| h.gpu.as_ref())
            .is_some_and(|g| g.vendor == tessera_devices::catalog::Vendor::Nvidia);
        if nvidia && (pool.machine.is_some() || machine.is_vm()) {
            if machine.is_vm() {
                // GFD does not run on VM hosts; NFD's PCI label stays.
                device_labels.retain(|key, _| !crate::worker_model::is_gfd_label(key));
            }
            device_labels.extend(crate::worker_model::labels(machine, vgpu.as_ref()));
            let gpus = hardware.as_ref().map_or(0, |h| h.server.gpus.len());
            for (resource, count) in
                crate::worker_model::extended_resources(machine, vgpu.as_ref(), gpus)
            {
                capacity.entry(resource).or_insert_with(|| {
                    Quantity::from_units(
                        i64::try_from(count).unwrap_or(i64::MAX),
                        tessera_model::Format::DecimalSi,
                    )
                });
            }
        }
        let has_gpus = hardware.as_ref().is_some_and(|h| h.gpu.is_some());
        let runtime_handlers = pool
            .runtime_handlers
            .clone()
            .unwrap_or_else(|| crate::runtime_handlers::default_handlers(has_gpus));
        let reserved = parse(&pool.reserved);
        let allocatable: BTreeMap<String, Quantity> = capacity
            .iter()
            .map(|(k, v)| {
                let held = reserved.get(k).copied().unwrap_or(Quantity::ZERO);
                let left = v
                    .checked_sub(&held)
                    .filter(|q| *q >= Quantity::ZERO)
                    .unwrap_or(Quantity::ZERO);
                (k.clone(), left)
            })
            .collect();
        for n in numbers {
            let name = format!("{}-{n}", pool.name);
            let mut labels = pool.labels.clone();
            for (key, value) in pool.placement.labels(n as usize - 1) {
                labels.entry(key.to_string()).or_insert(value);
            }
            let clique = hardware
                .as_ref()
                .and_then(|h| hardware::nvlink_clique(&h.server, &pool.placement, n as usize - 1));
            if let Some(clique) = clique {
                labels
                    .entry(hardware::CLIQUE_LABEL.into())
                    .or_insert(clique);
            }
            for (key, value) in &device_labels {
                labels.entry(key.clone()).or_insert_with(|| value.clone());
            }
            for (key, value) in crate::runtime_handlers::labels(&runtime_handlers) {
                labels.entry(key).or_insert(value);
            }
            labels.insert("kubernetes.io/hostname".into(), name.clone());
            labels.insert("kubernetes.io/os".into(), "linux".into());
            labels.insert("kubernetes.io/arch".into(), "amd64".into());
            labels.insert("beta.kubernetes.io/os".into(), "linux".into());
            labels.insert("beta.kubernetes.io/arch".into(), "amd64".into());
            nodes.push(NodeSpec {
                name,
                index,
                pool: pool.name.clone(),
                capacity: capacity.clone(),
                allocatable: allocatable.clone(),
                labels,
                taints: pool.taints.clone(),
                hardware: hardware.clone(),
                devices: pool.devices.clone(),
                kubelet: pool.kubelet.clone(),
                onboarding: pool.onboarding,
                networking: self.networking.clone(),
                networks: self.networks.clone(),
                nics: self.nics.get(p).cloned().unwrap_or_default(),
                runtime_handlers: runtime_handlers.clone(),
                machine,
                vgpu,
            });
            index += 1;
        }
        nodes
    }
}

/// A pool's worker model and vGPU type, checked against its hardware; errors are (field,
/// message) with the field relative to the pool.
fn check_machine(
    pool: &Pool,
    hardware: Option<&PoolHardware>,
) -> Result<(Machine, Option<VgpuType>), (String, String)> {
    let machine = match &pool.machine {
        None => Machine::BareMetal,
        Some(text) => Machine::parse(text).map_err(|m| ("machine".to_string(), m))?,
    };
    let gpu = hardware.and_then(|h| h.gpu.as_ref());
    if machine.is_vm() {
        let name = machine.as_str();
        let Some(gpu) = gpu.filter(|g| g.vendor == tessera_devices::catalog::Vendor::Nvidia) else {
            return Err((
                "machine".into(),
                format!("{name} needs a server model (server) with NVIDIA GPUs"),
            ));
        };
        if pool.devices.is_some() {
            return Err((
                "devices".into(),
                format!(
                    "a {name} pool's GPUs are offered by its machine model ({}); leave devices out",
                    if machine == Machine::VmPassthrough {
                        "bound to vfio-pci, through the DRA driver's vfio.gpu.nvidia.com class"
                    } else {
                        "vGPUs of its vgpuProfile"
                    }
                ),
            ));
        }
        if machine == Machine::VmVgpu {
            let Some(profile) = &pool.vgpu_profile else {
                return Err((
                    "vgpuProfile".into(),
                    format!(
                        "required for a vm-vgpu pool: a vGPU type of {} (such as {})",
                        gpu.name,
                        tessera_devices::vgpu_types(&gpu.name)
                            .last()
                            .map_or("none", |t| t.name)
                    ),
                ));
            };
            let vgpu = tessera_devices::vgpu_type(&gpu.name, profile)
                .map_err(|m| ("vgpuProfile".to_string(), m))?;
            return Ok((machine, Some(vgpu)));
        }
    }
    if pool.vgpu_profile.is_some() {
        return Err((
            "vgpuProfile".into(),
            format!(
                "only a vm-vgpu pool has a vGPU type (this pool is {})",
                machine.as_str()
            ),
        ));
    }
    Ok((machine, None))
}

/// A registry host: a DNS name or `localhost`, optionally with a port.
fn registry_host_ok(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (host, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    port_ok && name_ok
}

/// A whole, non-negative number of bytes written as a quantity (`20Mi`, `1500000`).
fn byte_quantity(text: &str) -> Option<u64> {
    let quantity: Quantity = text.parse().ok()?;
    u64::try_from(quantity.value()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/lab/two-teams.md runs on the built-in lab with one change; this keeps its file
    /// from drifting when the built-in lab changes.
    /// docs/lab/networks.md runs on the built-in lab with its networks declared.
    #[test]
    fn the_networks_lab_is_the_built_in_lab_with_networks() {
        let lab = include_str!("../../../examples/lab/networks/lab.yaml");
        let body: String = lab
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| format!("{line}\n"))
            .collect();
        let (built_in, networks) = body.split_at(DEFAULT_TOPOLOGY.len());
        assert_eq!(built_in, DEFAULT_TOPOLOGY);
        assert!(networks.starts_with("networks:\n"), "{networks}");
        let topology = Topology::parse(lab).expect("parses");
        let h100 = topology
            .nodes()
            .into_iter()
            .find(|n| n.name == "h100-1")
            .expect("h100-1");
        let carried: Vec<(&str, &str)> = h100
            .nics
            .iter()
            .take(4)
            .map(|n| (n.name.as_str(), n.network.as_str()))
            .collect();
        assert_eq!(
            carried,
            [
                ("eno1", "management"),
                ("mlx5_8", "service"),
                ("mlx5_9", "storage"),
                ("mlx5_0", "hpn")
            ]
        );
    }

    #[test]
    fn the_two_teams_lab_is_the_built_in_lab_with_device_plugin_h100s() {
        let lab = include_str!("../../../examples/lab/two-teams/lab.yaml");
        let change = "  devices: {exposure: device-plugin}   # the built-in lab: {exposure: dra}";
        assert_eq!(lab.matches(change).count(), 1, "the one change is stated");
        let restored: String = lab
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| {
                let line = if line == change {
                    "  devices: {exposure: dra}"
                } else {
                    line
                };
                format!("{line}\n")
            })
            .collect();
        assert_eq!(restored, DEFAULT_TOPOLOGY);
    }

    #[test]
    fn default_lab_expands_to_named_nodes() {
        let nodes = Topology::default_lab().nodes();
        let names: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "cpu-1",
                "cpu-2",
                "h100-1",
                "h100-2",
                "h200-1",
                "h200-2",
                "l40s-1",
                "control-plane-1"
            ]
        );
        assert_eq!(nodes[2].pod_cidr(), "10.244.2.0/24");
        assert_eq!(nodes[3].labels[hardware::RACK_LABEL], "r2");
        assert_eq!(nodes[6].capacity["nvidia.com/gpu"].to_canonical(), "16");
        assert_eq!(nodes[4].labels["nvidia.com/mig-1g.18gb.count"], "56");
        assert_eq!(nodes[0].labels["kubernetes.io/hostname"], "cpu-1");
        assert_eq!(nodes[0].capacity["memory"].to_canonical(), "64Gi");
    }

    #[test]
    fn gb200_trays_of_one_rack_share_an_nvlink_clique() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: gb200\n  count: 4\n  server: gb200-nvl72-tray\n  placement: {zone: lab-a, block: b1, racks: [nvl-a, nvl-b]}\n  devices: {exposure: device-plugin}\n- name: h200\n  count: 1\n  server: hgx-h200\n  placement: {racks: [r1]}\n",
        )
        .unwrap();
        let nodes = topology.nodes();
        // (node, rack) — the cliques of one rack are equal, of two racks different, and a
        // single-node NVLink server has none.
        let clique = |i: usize| nodes[i].labels.get(hardware::CLIQUE_LABEL).cloned();
        assert_eq!(nodes[0].labels[hardware::RACK_LABEL], "nvl-a");
        assert_eq!(nodes[2].labels[hardware::RACK_LABEL], "nvl-a");
        assert_eq!(clique(0), clique(2));
        assert_eq!(clique(1), clique(3));
        assert_ne!(clique(0), clique(1));
        assert!(
            clique(0).is_some_and(|c| c.ends_with(".1") && c.len() == 38),
            "{:?}",
            clique(0)
        );
        assert_eq!(clique(4), None);
        assert_eq!(nodes[0].allocatable["nvidia.com/gpu"].to_canonical(), "4");
    }

    #[test]
    fn reserved_resources_reduce_allocatable() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: a\n  count: 1\n  capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n  reserved: {cpu: 500m, memory: 1Gi}\n",
        )
        .unwrap();
        let node = &topology.nodes()[0];
        assert_eq!(node.allocatable["cpu"].to_canonical(), "7500m");
        assert_eq!(node.allocatable["memory"].to_canonical(), "31Gi");
    }

    #[test]
    fn accelerator_pools_take_capacity_and_placement_from_the_catalog() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: h200\n  count: 3\n  server: hgx-h200\n  capacity: {pods: \"250\"}\n  placement: {zone: lab-a, block: b1, racks: [r1, r2]}\n  devices: {exposure: dra, sharing: {mig: {layout: all-balanced}}}\n  kubelet: {topologyManagerPolicy: single-numa-node, topologyManagerScope: pod}\n",
        )
        .unwrap();
        let nodes = topology.nodes();
        let racks: Vec<&str> = nodes
            .iter()
            .map(|n| n.labels[hardware::RACK_LABEL].as_str())
            .collect();
        assert_eq!(racks, ["r1", "r2", "r1"]);
        assert_eq!(nodes[0].labels[hardware::ZONE_LABEL], "lab-a");
        assert_eq!(nodes[0].labels[hardware::BLOCK_LABEL], "b1");
        assert_eq!(nodes[0].capacity["cpu"].to_canonical(), "112");
        assert_eq!(nodes[0].capacity["memory"].to_canonical(), "2Ti");
        assert_eq!(nodes[0].capacity["pods"].to_canonical(), "250");
        let hardware = nodes[0].hardware.as_ref().unwrap();
        assert_eq!(hardware.server.gpus.len(), 8);
        assert_eq!(
            hardware.mig_profiles(),
            Some(&["1g.18gb", "1g.18gb", "2g.35gb", "3g.71gb"].map(String::from)[..])
        );
        assert_eq!(nodes[0].kubelet.topology_manager_policy, "single-numa-node");
        assert_eq!(nodes[0].kubelet.cpu_manager_policy, "none");
        // DRA pools carry GFD labels but no extended resources.
        assert_eq!(nodes[0].labels["nvidia.com/mig-2g.35gb.count"], "8");
        assert!(
            !nodes[0]
                .capacity
                .keys()
                .any(|k| k.starts_with("nvidia.com/"))
        );

        let l40s = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: l40s\n  count: 1\n  server: pcie-l40s-4\n  devices: {exposure: device-plugin, sharing: {timeSlicing: {replicas: 4}}}\n",
        )
        .unwrap();
        let node = &l40s.nodes()[0];
        assert_eq!(node.capacity["nvidia.com/gpu"].to_canonical(), "16");
        assert_eq!(node.allocatable["nvidia.com/gpu"].to_canonical(), "16");
        assert_eq!(node.labels["nvidia.com/gpu.product"], "NVIDIA-L40S-SHARED");
    }

    #[test]
    fn pools_have_runtime_handlers_and_kata_pools_the_kata_label() {
        let nodes = Topology::default_lab().nodes();
        let handlers = |name: &str| {
            nodes
                .iter()
                .find(|n| n.name == name)
                .map(|n| n.runtime_handlers.clone())
                .expect("node")
        };
        assert_eq!(handlers("cpu-1"), ["runc"]);
        assert_eq!(handlers("h100-1"), ["runc", "nvidia"]);
        assert_eq!(handlers("l40s-1"), ["runc", "nvidia"]);
        assert!(
            nodes
                .iter()
                .all(|n| !n.labels.contains_key(crate::runtime_handlers::KATA_LABEL))
        );
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: sandbox\n  count: 1\n  capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n  runtimeHandlers: [runc, kata-qemu]\n",
        )
        .unwrap();
        let node = &topology.nodes()[0];
        assert_eq!(node.runtime_handlers, ["runc", "kata-qemu"]);
        assert_eq!(node.labels[crate::runtime_handlers::KATA_LABEL], "true");
    }

    #[test]
    fn registries_mirrors_and_bandwidth_are_read_from_the_topology() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  registryMirror: mirror.lab:5000\n  registryBandwidth: 10Mi\n- name: b\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\nregistries:\n- host: registry.lab:5000\n  auth: true\n  images: {team/app:v1: 20Mi, base:1: \"1000\"}\n- host: mirror.lab:5000\n",
        )
        .unwrap();
        let registries = topology.image_registries();
        let private = &registries.registries["registry.lab:5000"];
        assert!(private.auth);
        assert_eq!(private.images["team/app:v1"], 20 * 1024 * 1024);
        assert_eq!(private.images["base:1"], 1000);
        assert!(!registries.registries["mirror.lab:5000"].auth);
        assert!(registries.registries["mirror.lab:5000"].images.is_empty());
        assert_eq!(registries.mirrors["a"], "mirror.lab:5000");
        assert!(!registries.mirrors.contains_key("b"));
        assert_eq!(registries.bandwidth("a"), 10 * 1024 * 1024);
        assert_eq!(registries.bandwidth("b"), crate::images::DEFAULT_BANDWIDTH);
        // The built-in lab declares none: every registry is open.
        assert_eq!(
            Topology::default_lab().image_registries().registries.len(),
            0
        );
    }

    #[test]
    fn bad_topologies_name_the_field() {
        let base = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n";
        let table = [
            (
                "- name: a\n  count: 1\n  capacity: {cpu: x, memory: 1Gi, pods: \"1\"}\n",
                "pools[0].capacity.cpu",
            ),
            (
                "- name: A\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n",
                "pools[0].name",
            ),
            (
                "- name: a\n  count: 0\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n",
                "pools[0].count",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", pods: \"1\"}\n",
                "pools[0].capacity.memory",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  taints: [{key: k, effect: Never}]\n",
                "pools[0].taints[0].effect",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\nnetworking: {podCIDR: 10.0.0.0/8}\n",
                "networking.podCIDR: 10.0.0.0/8 overlaps networking.nodeCIDR 10.0.0.0/16",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\nnetworking: {nodeCIDR: 10.0.0.1/16}\n",
                "host bits set",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\nnetworks:\n- name: hpn\n  purpose: high-performance\n  cidr: 172.30.0.0/33\n",
                "line 10: networks[0].cidr: \"172.30.0.0/33\": the prefix length must be 0 to 32",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\nnetworks: [{name: hpn, purpose: fast, cidr: 172.30.0.0/16}]\n",
                "purpose",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h900\n",
                "line 6: pools[0].server: unknown server model \"dgx-h900\"",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  devices: {exposure: dra, sharing: {mig: {layout: [4g.40gb, 4g.40gb]}}}\n",
                "pools[0].devices.sharing.mig.layout: H100-SXM5-80GB allows at most 1 instance(s) of 4g.40gb",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  devices: {exposure: device-plugin}\n",
                "pools[0].devices: needs a server model",
            ),
            (
                "- name: a\n  count: 1\n  server: pcie-l40s-4\n  devices: {exposure: nvlink}\n",
                "nvlink",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  runtimeHandlers: [runc, Kata_QEMU]\n",
                "line 7: pools[0].runtimeHandlers[1]: \"Kata_QEMU\" must be a lowercase DNS label",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  runtimeHandlers: [runc, runc]\n",
                "pools[0].runtimeHandlers[1]: duplicate handler \"runc\"",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  runtimeHandlers: []\n",
                "pools[0].runtimeHandlers: at least one handler is required",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  registryMirror: \"Mirror Lab\"\n",
                "pools[0].registryMirror: \"Mirror Lab\" must be a registry host",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  registryBandwidth: \"0\"\n",
                "pools[0].registryBandwidth",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\nregistries:\n- host: reg.lab:99999\n",
                "registries[0].host",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\nregistries:\n- host: reg.lab\n- host: reg.lab\n",
                "registries[1].host: duplicate registry",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\nregistries:\n- host: reg.lab\n  images: {\"team/App:v1\": 1Mi}\n",
                "registries[0].images.team/App:v1",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\nregistries:\n- host: reg.lab\n  images: {\"team/app:v1\": lots}\n",
                "\"lots\" must be a quantity of bytes",
            ),
        ];
        for (pools, field) in table {
            let error = Topology::parse(&format!("{base}{pools}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{error} should name {field}");
        }
        let unknown = Topology::parse(&format!("{base}- name: a\n  count: 1\n  cpus: 3\n  capacity: {{cpu: \"1\", memory: 1Gi, pods: \"1\"}}\n"))
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("cpus"), "{unknown}");
        assert!(Topology::parse("pools: [").is_err());
    }

    #[test]
    fn worker_models_label_and_offer_as_the_gpu_operator_does() {
        let lab = include_str!("../../../examples/lab/workers/lab.yaml");
        let nodes = Topology::parse(lab).expect("parses").nodes();
        let node = |name: &str| nodes.iter().find(|n| n.name == name).expect(name);
        let label = |name: &str, key: &str| node(name).labels.get(key).cloned();
        let table = [
            ("cpu-1", Machine::BareMetal, None, None, None, None),
            (
                "metal-1",
                Machine::BareMetal,
                Some("container"),
                Some("NVIDIA-H100-80GB-HBM3"),
                Some("nvidia.com/gpu"),
                Some("8"),
            ),
            (
                "passthrough-1",
                Machine::VmPassthrough,
                Some("vm-passthrough"),
                None,
                None,
                None,
            ),
            (
                "vgpu-1",
                Machine::VmVgpu,
                Some("vm-vgpu"),
                None,
                Some("nvidia.com/NVIDIA_H100-10C"),
                Some("64"),
            ),
        ];
        for (name, machine, config, product, resource, count) in table {
            assert_eq!(node(name).machine, machine, "{name}");
            assert_eq!(
                label(name, "nvidia.com/gpu.workload.config").as_deref(),
                config,
                "{name}"
            );
            assert_eq!(
                label(name, "nvidia.com/gpu.product").as_deref(),
                product,
                "{name}"
            );
            assert!(
                !node(name).capacity.contains_key("nvidia.com/gpu") || name == "metal-1",
                "{name} offers nvidia.com/gpu"
            );
            if let (Some(resource), Some(count)) = (resource, count) {
                assert_eq!(
                    node(name).capacity[resource].to_canonical(),
                    count,
                    "{name}"
                );
            }
        }
        assert_eq!(
            label("passthrough-1", "nvidia.com/gpu.deploy.vfio-manager").as_deref(),
            Some("true")
        );
        assert_eq!(
            label("passthrough-1", "nvidia.com/gpu.deploy.device-plugin"),
            None
        );
        assert_eq!(
            label(
                "passthrough-1",
                "feature.node.kubernetes.io/pci-10de.present"
            )
            .as_deref(),
            Some("true")
        );
        assert_eq!(
            label("vgpu-1", "nvidia.com/vgpu.config").as_deref(),
            Some("H100-10C")
        );
        assert_eq!(node("vgpu-1").vgpu.map(|v| v.per_gpu), Some(8));
        // Passthrough GPUs are published as vfio devices only; the others as before.
        let slices = crate::resource_slice::resource_slices(node("passthrough-1"));
        let devices: Vec<&str> = slices[0]["spec"]["devices"]
            .as_array()
            .expect("devices")
            .iter()
            .filter_map(|d| d["name"].as_str())
            .collect();
        assert_eq!(devices.len(), 8);
        assert!(
            devices.iter().all(|d| d.starts_with("gpu-vfio-")),
            "{devices:?}"
        );
        assert!(crate::resource_slice::resource_slices(node("vgpu-1")).is_empty());
        assert!(crate::resource_slice::resource_slices(node("metal-1")).is_empty());
    }

    #[test]
    fn bad_worker_models_name_the_pool_and_field() {
        let base = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n";
        let table = [
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  machine: vm\n",
                "line 7: pools[0].machine: \"vm\" must be one of bare-metal, vm-passthrough, vm-vgpu",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  machine: vm-passthrough\n",
                "pools[0].machine: vm-passthrough needs a server model (server) with NVIDIA GPUs",
            ),
            (
                "- name: a\n  count: 1\n  server: mi300x-8\n  machine: vm-vgpu\n  vgpuProfile: H100-4C\n",
                "pools[0].machine: vm-vgpu needs a server model (server) with NVIDIA GPUs",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  machine: vm-vgpu\n",
                "pools[0].vgpuProfile: required for a vm-vgpu pool: a vGPU type of H100-SXM5-80GB (such as H100-4C)",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  machine: vm-vgpu\n  vgpuProfile: H100-3C\n",
                "pools[0].vgpuProfile: \"H100-3C\" is not a vGPU type of H100-SXM5-80GB",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  vgpuProfile: H100-4C\n",
                "pools[0].vgpuProfile: only a vm-vgpu pool has a vGPU type (this pool is bare-metal)",
            ),
            (
                "- name: a\n  count: 1\n  server: dgx-h100\n  machine: vm-passthrough\n  devices: {exposure: dra}\n",
                "pools[0].devices: a vm-passthrough pool's GPUs are offered by its machine model",
            ),
        ];
        for (pools, want) in table {
            let error = Topology::parse(&format!("{base}{pools}"))
                .expect_err(pools)
                .to_string();
            assert!(error.contains(want), "{pools}: {error}");
        }
    }
}
