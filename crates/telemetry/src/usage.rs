//! The usage model: what a running pod's containers, a node and each of its GPUs use at a
//! time, from the pod's declared load ([`crate::load`]), its requests and limits, the GPU
//! units pods hold, the node's hardware and faults.
//!
//! Gauges (CPU, memory, utilisation, framebuffer, temperature, power, clocks, DCP ratios)
//! are the declared or default load at that time; counters (CPU seconds, energy) are the
//! nominal (unvaried) rate times the time since the container started or the node booted,
//! so they only grow while the same pods run. Nominal board powers and clocks per GPU
//! architecture stand in for what NVML would read. Knows nothing of how holdings are
//! tracked or how the numbers are rendered.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::Value;
use tessera_devices::GpuModel;
use tessera_model::Quantity;
use tessera_model::json::text;
use tessera_model::time::parse_timestamp;
use tessera_node::faults::{Faults, GpuHealth};
use tessera_node::gpu_assignments::Unit;
use tessera_node::hardware::MigMode;
use tessera_node::resource_slice::mig_device_name;
use tessera_node::topology::NodeSpec;

use crate::load::{Declared, bucket, jitter, seed};

/// The XID of a GPU that has fallen off the bus: dcgm-exporter stops reporting it.
pub const XID_FALLEN_OFF_BUS: u32 = 79;

/// CPU the node's own processes (kubelet, runtime, system) use, in nanocores.
pub const SYSTEM_CPU_NANOCORES: u64 = 250_000_000;
/// Memory the node's own processes use, in bytes.
pub const SYSTEM_MEMORY_BYTES: u64 = 1 << 30;
/// CPU of a container without a request or declared load, in nanocores (10m).
pub const DEFAULT_CPU_NANOCORES: u64 = 10_000_000;
/// Memory of a container without a request or declared load, in bytes (32Mi).
pub const DEFAULT_MEMORY_BYTES: u64 = 32 << 20;
/// Utilisation of a held device without declared load, in %.
pub const DEFAULT_GPU_UTILIZATION: f64 = 50.0;

/// One container's usage.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerUsage {
    /// The container's name.
    pub name: String,
    /// CPU now, in nanocores.
    pub cpu_nanocores: u64,
    /// Working set now, in bytes.
    pub memory_bytes: u64,
    /// CPU time since the container started, in core-seconds.
    pub cpu_seconds: f64,
    /// When it started.
    pub started: SystemTime,
}

/// A running pod's usage.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its containers, in the spec's order.
    pub containers: Vec<ContainerUsage>,
}

impl PodUsage {
    /// CPU of all containers, in nanocores.
    pub fn cpu_nanocores(&self) -> u64 {
        self.containers.iter().map(|c| c.cpu_nanocores).sum()
    }

    /// Working set of all containers, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.containers.iter().map(|c| c.memory_bytes).sum()
    }

    /// CPU time of all containers, in core-seconds.
    pub fn cpu_seconds(&self) -> f64 {
        self.containers.iter().map(|c| c.cpu_seconds).sum()
    }
}

/// A node's usage.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    /// The node's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// CPU now, in nanocores.
    pub cpu_nanocores: u64,
    /// Working set now, in bytes.
    pub memory_bytes: u64,
    /// CPU time since boot, in core-seconds.
    pub cpu_seconds: f64,
}

fn quantity_at(container: &Value, pointer: &str) -> Option<Quantity> {
    container
        .pointer(pointer)?
        .as_str()?
        .parse::<Quantity>()
        .ok()
}

fn nanocores(q: Option<Quantity>) -> Option<u64> {
    q.and_then(|q| u64::try_from(q.nanos()).ok())
}

fn bytes(q: Option<Quantity>) -> Option<u64> {
    q.and_then(|q| u64::try_from(q.value()).ok())
}

fn seconds_between(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The labels of an object.
pub fn labels(value: &Value) -> BTreeMap<String, String> {
    value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// When `container` of `pod` started: its running state's `startedAt`, else the pod's
/// `startTime`, else `now`.
pub fn container_started(pod: &Value, container: &str, now: SystemTime) -> SystemTime {
    let from_status = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .and_then(|statuses| {
            statuses
                .iter()
                .find(|s| s.get("name").and_then(Value::as_str) == Some(container))
        })
        .and_then(|s| s.pointer("/state/running/startedAt"))
        .and_then(Value::as_str)
        .and_then(parse_timestamp);
    from_status
        .or_else(|| parse_timestamp(text(pod, "/status/startTime")))
        .unwrap_or(now)
        .min(now)
}

/// The usage of `pod` at `now`; `None` unless it is running.
pub fn pod_usage(pod: &Value, now: SystemTime) -> Option<PodUsage> {
    if text(pod, "/status/phase") != "Running" {
        return None;
    }
    let declared = Declared::of(pod);
    let uid = text(pod, "/metadata/uid");
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let containers = containers
        .iter()
        .map(|container| {
            let name = text(container, "/name").to_string();
            let seed = seed(&[uid, &name], bucket(now));
            let cpu_limit = nanocores(quantity_at(container, "/resources/limits/cpu"));
            let memory_limit = bytes(quantity_at(container, "/resources/limits/memory"));
            let cpu_request =
                nanocores(quantity_at(container, "/resources/requests/cpu")).or(cpu_limit);
            let memory_request =
                bytes(quantity_at(container, "/resources/requests/memory")).or(memory_limit);
            let nominal_cpu = declared
                .cpu_nanocores
                .unwrap_or_else(|| cpu_request.map_or(DEFAULT_CPU_NANOCORES, |r| r / 2));
            let cpu = match declared.cpu_nanocores {
                Some(cpu) => cpu,
                None => (nominal_cpu as f64 * jitter(seed, 0.05)) as u64,
            };
            let memory = match declared.memory_bytes {
                Some(memory) => memory,
                None => {
                    let base = memory_request.map_or(DEFAULT_MEMORY_BYTES, |r| r / 10 * 6);
                    (base as f64 * jitter(seed.rotate_left(17), 0.03)) as u64
                }
            };
            let cap = |value: u64, limit: Option<u64>| limit.map_or(value, |l| value.min(l));
            let started = container_started(pod, &name, now);
            let rate = cap(nominal_cpu, cpu_limit) as f64 / 1e9;
            ContainerUsage {
                cpu_nanocores: cap(cpu, cpu_limit),
                memory_bytes: cap(memory, memory_limit),
                cpu_seconds: rate * seconds_between(started, now),
                started,
                name,
            }
        })
        .collect();
    Some(PodUsage {
        namespace: text(pod, "/metadata/namespace").to_string(),
        name: text(pod, "/metadata/name").to_string(),
        labels: labels(pod),
        containers,
    })
}

/// When `node` (a Node object) booted, as the twins model it: when it registered.
pub fn booted(node: &Value, now: SystemTime) -> SystemTime {
    parse_timestamp(text(node, "/metadata/creationTimestamp"))
        .unwrap_or(now)
        .min(now)
}

/// The usage of `node` (a Node object) at `now`, running `pods`: its own processes plus
/// its pods', capped by its capacity; CPU time counts from [`booted`].
pub fn node_usage(node: &Value, pods: &[PodUsage], now: SystemTime) -> NodeUsage {
    let capacity_cpu = nanocores(quantity_at(node, "/status/capacity/cpu")).unwrap_or(u64::MAX);
    let capacity_memory = bytes(quantity_at(node, "/status/capacity/memory")).unwrap_or(u64::MAX);
    let cpu: u64 = SYSTEM_CPU_NANOCORES + pods.iter().map(PodUsage::cpu_nanocores).sum::<u64>();
    let memory: u64 = SYSTEM_MEMORY_BYTES + pods.iter().map(PodUsage::memory_bytes).sum::<u64>();
    let system_seconds =
        SYSTEM_CPU_NANOCORES as f64 / 1e9 * seconds_between(booted(node, now), now);
    NodeUsage {
        name: text(node, "/metadata/name").to_string(),
        labels: labels(node),
        cpu_nanocores: cpu.min(capacity_cpu),
        memory_bytes: memory.min(capacity_memory),
        cpu_seconds: system_seconds + pods.iter().map(PodUsage::cpu_seconds).sum::<f64>(),
    }
}

/// A pod's container holding a GPU unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container.
    pub container: String,
    /// The pod's UID (the variation's seed).
    pub uid: String,
    /// What the pod declares.
    pub declared: Declared,
    /// When the container started.
    pub started: SystemTime,
    /// The unit it holds.
    pub unit: Unit,
}

impl Holder {
    /// The holder of `unit` in `container` of `pod`.
    pub fn new(pod: &Value, container: &str, unit: Unit, now: SystemTime) -> Holder {
        Holder {
            namespace: text(pod, "/metadata/namespace").to_string(),
            pod: text(pod, "/metadata/name").to_string(),
            container: container.to_string(),
            uid: text(pod, "/metadata/uid").to_string(),
            declared: Declared::of(pod),
            started: container_started(pod, container, now),
            unit,
        }
    }
}

/// The workload on a device: namespace, pod, container.
pub type Workload = (String, String, String);

/// The load on one device (a whole GPU or a MIG instance).
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceLoad {
    /// Utilisation, 0–100.
    pub utilization: f64,
    /// Framebuffer used, MiB.
    pub fb_used_mib: u64,
    /// Framebuffer size, MiB.
    pub fb_total_mib: u64,
    /// Who uses it.
    pub workloads: Vec<Workload>,
}

impl DeviceLoad {
    /// `share` of the utilisation as a ratio, to six places as DCGM's profiling fields
    /// report it.
    fn ratio(&self, share: f64) -> f64 {
        (self.utilization / 100.0 * share * 1e6).round() / 1e6
    }

    /// Ratio of time the graphics engine is active.
    pub fn gr_engine_active(&self) -> f64 {
        self.ratio(1.0)
    }

    /// Ratio of cycles an SM has at least one warp assigned.
    pub fn sm_active(&self) -> f64 {
        self.ratio(0.9)
    }

    /// Ratio of cycles the tensor pipe is active.
    pub fn tensor_active(&self) -> f64 {
        self.ratio(0.6)
    }

    /// Ratio of cycles the memory interface is busy.
    pub fn dram_active(&self) -> f64 {
        self.ratio(0.5)
    }
}

/// A MIG instance of a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct MigInstance {
    /// Its GPU instance ID (its place in the GPU's layout).
    pub id: u32,
    /// Its profile (`1g.10gb`).
    pub profile: String,
    /// Its load.
    pub load: DeviceLoad,
}

/// One GPU's readings.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuUsage {
    /// Its index on the node.
    pub index: usize,
    /// `GPU-…`.
    pub uuid: String,
    /// The PCI bus ID in NVML's form (`00000000:1B:00.0`).
    pub pci_bus_id: String,
    /// `nvidia<index>`.
    pub device: String,
    /// The product name.
    pub model_name: String,
    /// The last XID (0: none).
    pub xid: u32,
    /// The whole GPU's load (for a MIG GPU: the mean of its instances, their workloads).
    pub load: DeviceLoad,
    /// Its MIG instances (empty without MIG).
    pub mig: Vec<MigInstance>,
    /// Memory copy utilisation, %.
    pub mem_copy_utilization: f64,
    /// GPU temperature, °C.
    pub gpu_temp: f64,
    /// Memory temperature, °C.
    pub memory_temp: f64,
    /// Power draw, W.
    pub power_w: f64,
    /// Board power limit, W.
    pub power_limit_w: f64,
    /// Energy since boot, mJ.
    pub energy_mj: f64,
    /// SM clock, MHz.
    pub sm_clock_mhz: f64,
    /// Memory clock, MHz.
    pub mem_clock_mhz: f64,
}

/// Nominal (idle W, board limit W, max SM MHz, memory MHz) of a GPU model.
fn nominal(model: &GpuModel) -> (f64, f64, f64, f64) {
    let name = model.product_name.as_str();
    if name.contains("H100") || name.contains("H200") {
        (70.0, 700.0, 1980.0, 2619.0)
    } else if name.contains("A100") {
        (55.0, 400.0, 1410.0, 1593.0)
    } else if name.contains("GB200") || name.contains("B200") {
        (120.0, 1200.0, 1965.0, 3996.0)
    } else if name.contains("L40S") {
        (35.0, 350.0, 2520.0, 9001.0)
    } else if name.contains("MI300X") {
        (140.0, 750.0, 2100.0, 2600.0)
    } else {
        (50.0, 300.0, 1500.0, 1500.0)
    }
}

/// `0000:1b:00.0` → NVML's `00000000:1B:00.0`.
pub fn nvml_bus_id(bus_id: &str) -> String {
    match bus_id.split_once(':') {
        Some((domain, rest)) => format!("{domain:0>8}:{}", rest.to_uppercase()),
        None => bus_id.to_uppercase(),
    }
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

/// The memory of a MIG profile, MiB.
fn profile_mib(model: &GpuModel, profile: &str) -> u64 {
    model
        .mig_profile(profile)
        .and_then(|p| {
            p.memory_mib
                .or_else(|| p.named_memory_gb().map(|gb| u64::from(gb) * 1024))
        })
        .unwrap_or(0)
        .min(model.memory_mib)
}

/// The load of a device of `total_mib` shared by `holders`.
fn device_load(holders: &[&Holder], total_mib: u64, now: SystemTime) -> DeviceLoad {
    let mut utilization = 0.0;
    let mut used = 0u64;
    for holder in holders {
        let declared = holder.declared.gpu_utilization;
        let base = declared.unwrap_or(DEFAULT_GPU_UTILIZATION);
        utilization += match declared {
            Some(value) => value,
            None => base * jitter(seed(&[&holder.uid, &holder.container], bucket(now)), 0.1),
        };
        used += holder.declared.gpu_memory_bytes.map_or(total_mib / 4, mib);
    }
    let mut workloads: Vec<Workload> = holders
        .iter()
        .map(|h| (h.namespace.clone(), h.pod.clone(), h.container.clone()))
        .collect();
    workloads.dedup();
    DeviceLoad {
        utilization: utilization.clamp(0.0, 100.0),
        fb_used_mib: used.min(total_mib),
        fb_total_mib: total_mib,
        workloads,
    }
}

/// The MIG instances of GPU `index`: a static layout's, or the held ones of a dynamic one.
fn instances(
    node: &NodeSpec,
    model: &GpuModel,
    index: usize,
    holders: &[Holder],
) -> Vec<(String, String)> {
    let parent = format!("gpu-{index}");
    let mut names: Vec<(String, String)> = match node.hardware.as_ref().and_then(|h| h.mig.as_ref())
    {
        Some(MigMode::Static(profiles)) => {
            let profiles: Vec<&str> = profiles.iter().map(String::as_str).collect();
            tessera_devices::plan_layout(model, &profiles)
                .unwrap_or_default()
                .into_iter()
                .map(|p| (mig_device_name(&parent, &p.profile, p.start), p.profile))
                .collect()
        }
        _ => Vec::new(),
    };
    for holder in holders {
        if let Unit::Mig { gpu, name } = &holder.unit
            && *gpu == index
            && !names.iter().any(|(n, _)| n == name)
        {
            let compact = name
                .strip_prefix(&format!("{parent}-mig-"))
                .and_then(|rest| rest.rsplit_once('-'))
                .map(|(compact, _)| compact)
                .unwrap_or_default();
            let profile = model
                .mig
                .iter()
                .flat_map(|m| m.profiles.iter())
                .find(|p| p.name.replace(['.', '+'], "") == compact)
                .map(|p| p.name.clone())
                .unwrap_or_default();
            names.push((name.clone(), profile));
        }
    }
    names
}

/// The readings of every GPU of `node` at `now` (booted at `boot`), with `holders` the
/// units its pods hold. A GPU that has fallen off the bus (XID 79) is left out.
pub fn gpu_usage(
    node: &NodeSpec,
    faults: &Faults,
    holders: &[Holder],
    boot: SystemTime,
    now: SystemTime,
) -> Vec<GpuUsage> {
    let Some(hardware) = node.hardware.as_ref() else {
        return Vec::new();
    };
    let Some(model) = hardware.gpu.as_ref() else {
        return Vec::new();
    };
    let (idle_w, limit_w, max_sm, mem_clock) = nominal(model);
    let since_boot = seconds_between(boot, now);
    hardware
        .server
        .gpus
        .iter()
        .enumerate()
        .filter_map(|(index, slot)| {
            let health = faults.gpu_health(index);
            if matches!(health, GpuHealth::Down(XID_FALLEN_OFF_BUS)) {
                return None;
            }
            let on_gpu: Vec<&Holder> = holders.iter().filter(|h| h.unit.gpu() == index).collect();
            let mig: Vec<MigInstance> = instances(node, model, index, holders)
                .into_iter()
                .enumerate()
                .map(|(id, (name, profile))| {
                    let held: Vec<&Holder> = on_gpu
                        .iter()
                        .copied()
                        .filter(|h| matches!(&h.unit, Unit::Mig { name: n, .. } if *n == name))
                        .collect();
                    MigInstance {
                        id: u32::try_from(id).unwrap_or(u32::MAX),
                        load: device_load(&held, profile_mib(model, &profile), now),
                        profile,
                    }
                })
                .collect();
            let load = if mig.is_empty() {
                device_load(&on_gpu, model.memory_mib, now)
            } else {
                let count = mig.len() as f64;
                DeviceLoad {
                    utilization: mig.iter().map(|m| m.load.utilization).sum::<f64>() / count,
                    fb_used_mib: mig
                        .iter()
                        .map(|m| m.load.fb_used_mib)
                        .sum::<u64>()
                        .min(model.memory_mib),
                    fb_total_mib: model.memory_mib,
                    workloads: mig.iter().flat_map(|m| m.load.workloads.clone()).collect(),
                }
            };
            let node_seed = seed(&[&node.name, &format!("gpu-{index}")], bucket(now));
            let u = load.utilization / 100.0;
            let busy = (limit_w * 0.9 - idle_w).max(0.0);
            let power = ((idle_w + busy * u) * jitter(node_seed, 0.02)).min(limit_w);
            let energy_j = idle_w * since_boot
                + on_gpu
                    .iter()
                    .map(|h| {
                        let share = h
                            .declared
                            .gpu_utilization
                            .unwrap_or(DEFAULT_GPU_UTILIZATION)
                            / 100.0;
                        busy * share * seconds_between(h.started, now)
                    })
                    .sum::<f64>();
            Some(GpuUsage {
                index,
                uuid: Unit::Gpu(index).device_id(&node.name),
                pci_bus_id: nvml_bus_id(&slot.bus_id),
                device: format!("nvidia{index}"),
                model_name: model.product_name.clone(),
                xid: health.xid().unwrap_or(0),
                mem_copy_utilization: (load.utilization * 0.6).round(),
                gpu_temp: (30.0 + 0.35 * load.utilization) * jitter(node_seed.rotate_left(7), 0.01),
                memory_temp: (32.0 + 0.3 * load.utilization)
                    * jitter(node_seed.rotate_left(13), 0.01),
                power_w: power,
                power_limit_w: limit_w,
                energy_mj: energy_j * 1000.0,
                sm_clock_mhz: if load.utilization > 0.0 {
                    max_sm
                } else {
                    345.0
                },
                mem_clock_mhz: mem_clock,
                load,
                mig,
            })
        })
        .collect()
}
