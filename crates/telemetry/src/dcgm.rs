//! NVIDIA dcgm-exporter's `/metrics` (port 9400) for one node's GPUs: the fields of its
//! `etc/default-counters.csv` that a simulated GPU can report (clocks, temperatures, power,
//! energy, PCIe replays, utilisations, last XID, framebuffer) and the DCP profiling ones
//! (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, `SM_ACTIVE`, `PIPE_TENSOR_ACTIVE`, `DRAM_ACTIVE`),
//! with dcgm-exporter's names, types, help texts and labels: `gpu`, `UUID`, `pci_bus_id`,
//! `device`, `modelName`, `GPU_I_PROFILE`/`GPU_I_ID` for MIG instances, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`, and `container`/`namespace`/`pod` of the workload using the
//! device (empty when none; one series per workload on a shared GPU).
//!
//! On a MIG GPU the device-wide fields stay on the GPU and the framebuffer and profiling
//! fields are reported per GPU instance. A GPU that fell off the bus is absent (the usage
//! model leaves it out). Knows nothing of where the text is served.

use prometheus::proto::MetricFamily;
use tessera_node::accelerators::DRIVER_VERSION;

use crate::exposition::{Kind, encode, family, label_pairs, push_pairs};
use crate::usage::{DeviceLoad, GpuUsage};

/// The port dcgm-exporter listens on.
pub const PORT: u16 = 9400;

/// Which device a field is read from on a MIG GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The physical GPU.
    Gpu,
    /// Each GPU instance (the GPU itself without MIG).
    Instance,
}

type Reading = fn(&GpuUsage, &DeviceLoad) -> f64;

/// (field, type, help, scope, reading), in the order of dcgm-exporter's counter files.
const FIELDS: &[(&str, Kind, &str, Scope, Reading)] = &[
    (
        "DCGM_FI_DEV_SM_CLOCK",
        Kind::Gauge,
        "SM clock frequency (in MHz).",
        Scope::Gpu,
        |g, _| g.sm_clock_mhz,
    ),
    (
        "DCGM_FI_DEV_MEM_CLOCK",
        Kind::Gauge,
        "Memory clock frequency (in MHz).",
        Scope::Gpu,
        |g, _| g.mem_clock_mhz,
    ),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        Kind::Gauge,
        "Memory temperature (in C).",
        Scope::Gpu,
        |g, _| g.memory_temp.round(),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        Kind::Gauge,
        "GPU temperature (in C).",
        Scope::Gpu,
        |g, _| g.gpu_temp.round(),
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        Kind::Gauge,
        "Power draw (in W).",
        Scope::Gpu,
        |g, _| (g.power_w * 1000.0).round() / 1000.0,
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        Kind::Counter,
        "Total energy consumption since boot (in mJ).",
        Scope::Gpu,
        |g, _| g.energy_mj.floor(),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        Kind::Counter,
        "Total number of PCIe retries.",
        Scope::Gpu,
        |_, _| 0.0,
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        Kind::Gauge,
        "GPU utilization (in %).",
        Scope::Gpu,
        |g, _| g.load.utilization.round(),
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        Kind::Gauge,
        "Memory utilization (in %).",
        Scope::Gpu,
        |g, _| g.mem_copy_utilization,
    ),
    (
        "DCGM_FI_DEV_ENC_UTIL",
        Kind::Gauge,
        "Encoder utilization (in %).",
        Scope::Gpu,
        |_, _| 0.0,
    ),
    (
        "DCGM_FI_DEV_DEC_UTIL",
        Kind::Gauge,
        "Decoder utilization (in %).",
        Scope::Gpu,
        |_, _| 0.0,
    ),
    (
        "DCGM_FI_DEV_XID_ERRORS",
        Kind::Gauge,
        "Value of the last XID error encountered.",
        Scope::Gpu,
        |g, _| f64::from(g.xid),
    ),
    (
        "DCGM_FI_DEV_FB_FREE",
        Kind::Gauge,
        "Framebuffer memory free (in MiB).",
        Scope::Instance,
        |_, d| (d.fb_total_mib - d.fb_used_mib) as f64,
    ),
    (
        "DCGM_FI_DEV_FB_USED",
        Kind::Gauge,
        "Framebuffer memory used (in MiB).",
        Scope::Instance,
        |_, d| d.fb_used_mib as f64,
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        Kind::Gauge,
        "Ratio of time the graphics engine is active.",
        Scope::Instance,
        |_, d| d.gr_engine_active(),
    ),
    (
        "DCGM_FI_PROF_SM_ACTIVE",
        Kind::Gauge,
        "The ratio of cycles an SM has at least 1 warp assigned.",
        Scope::Instance,
        |_, d| d.sm_active(),
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        Scope::Instance,
        |_, d| d.tensor_active(),
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        Kind::Gauge,
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        Scope::Instance,
        |_, d| d.dram_active(),
    ),
];

/// The driver version label's value.
pub fn driver_version() -> String {
    let (major, minor, revision) = DRIVER_VERSION;
    format!("{major}.{minor}.{revision}")
}

/// One device's series: the labels before `Hostname`, and its load.
struct Series<'a> {
    gpu: &'a GpuUsage,
    mig: Option<(String, String)>,
    load: &'a DeviceLoad,
}

fn add_series(
    families: &mut [MetricFamily],
    hostname: &str,
    driver: &str,
    series: &Series<'_>,
    scope: Scope,
) {
    let gpu_index = series.gpu.index.to_string();
    let none = [(String::new(), String::new(), String::new())];
    let workloads = if series.load.workloads.is_empty() {
        &none[..]
    } else {
        &series.load.workloads[..]
    };
    for (namespace, pod, container) in workloads {
        let mut labels: Vec<(&str, &str)> = vec![
            ("gpu", &gpu_index),
            ("UUID", &series.gpu.uuid),
            ("pci_bus_id", &series.gpu.pci_bus_id),
            ("device", &series.gpu.device),
            ("modelName", &series.gpu.model_name),
        ];
        if let Some((profile, id)) = &series.mig {
            labels.push(("GPU_I_PROFILE", profile));
            labels.push(("GPU_I_ID", id));
        }
        labels.extend([
            ("Hostname", hostname),
            ("DCGM_FI_DRIVER_VERSION", driver),
            ("container", container.as_str()),
            ("namespace", namespace.as_str()),
            ("pod", pod.as_str()),
        ]);
        let pairs = label_pairs(&labels);
        for (family, (_, _, _, field_scope, reading)) in families.iter_mut().zip(FIELDS) {
            if *field_scope == scope {
                push_pairs(
                    family,
                    pairs.clone(),
                    reading(series.gpu, series.load),
                    None,
                );
            }
        }
    }
}

/// The metric families of the GPUs of each (hostname, GPUs) node.
pub fn families(nodes: &[(&str, &[GpuUsage])]) -> Vec<MetricFamily> {
    let mut families: Vec<MetricFamily> = FIELDS
        .iter()
        .map(|(name, kind, help, _, _)| family(name, help, *kind))
        .collect();
    let driver = driver_version();
    for (hostname, gpus) in nodes {
        for gpu in *gpus {
            let whole = Series {
                gpu,
                mig: None,
                load: &gpu.load,
            };
            add_series(&mut families, hostname, &driver, &whole, Scope::Gpu);
            if gpu.mig.is_empty() {
                add_series(&mut families, hostname, &driver, &whole, Scope::Instance);
            }
            for instance in &gpu.mig {
                let series = Series {
                    gpu,
                    mig: Some((instance.profile.clone(), instance.id.to_string())),
                    load: &instance.load,
                };
                add_series(&mut families, hostname, &driver, &series, Scope::Instance);
            }
        }
    }
    families
}

/// dcgm-exporter's text for the GPUs of one node.
pub fn render(hostname: &str, gpus: &[GpuUsage]) -> String {
    encode(families(&[(hostname, gpus)]))
}

/// dcgm-exporter's text for the GPUs of many nodes (one document, as a federation of the
/// nodes' exporters would merge them).
pub fn render_many(nodes: &[(&str, &[GpuUsage])]) -> String {
    encode(families(nodes))
}
