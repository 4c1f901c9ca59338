//! NVML discovery: what the NVIDIA driver itself reports about each GPU (UUID, name, memory,
//! minor number, compute capability, MIG mode) and how GPU pairs connect (NVLink or the PCIe
//! level), read through `libnvidia-ml.so.1` loaded at run time — the binary runs on machines
//! without it, where [`probe`] answers why not instead of failing.
//!
//! One GPU that cannot be read becomes a warning, never an error for the whole probe. Knows
//! nothing of Kubernetes; `sysfs` discovery is the other, driver-free source. What an XID
//! means is the catalog's knowledge ([`tessera_devices::xid`], re-exported here).

use std::ffi::OsStr;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus, TopologyLevel};

use tessera_devices::server::Link;
pub use tessera_devices::xid::{APPLICATION_XIDS, fatal_xid, xid_description};

/// The library name the driver installs (the unversioned `.so` needs the dev package).
pub const LIBRARY: &str = "libnvidia-ml.so.1";

/// Hopper and Blackwell have at most 18 NVLinks per GPU.
const MAX_NVLINKS: u32 = 18;

/// One GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlGpu {
    /// NVML's index.
    pub index: u32,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// Product name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// PCI bus ID, lower case with a 4-digit domain (`0000:1b:00.0`), as sysfs names it.
    pub bus_id: String,
    /// Total memory in MiB.
    pub memory_mib: u64,
    /// The `/dev/nvidia<minor>` number.
    pub minor: Option<u32>,
    /// CUDA compute capability.
    pub compute_capability: Option<(i32, i32)>,
    /// Whether MIG mode is on now (`None`: not supported).
    pub mig_enabled: Option<bool>,
}

/// What NVML reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlReport {
    /// Driver version (`570.172.08`).
    pub driver_version: String,
    /// CUDA driver API version (major, minor).
    pub cuda_version: Option<(i32, i32)>,
    /// The GPUs it could read.
    pub gpus: Vec<NvmlGpu>,
    /// `links[a][b]` between `gpus[a]` and `gpus[b]`.
    pub links: Vec<Vec<Link>>,
    /// What could not be read.
    pub warnings: Vec<String>,
}

/// The link `nvidia-smi topo -m` prints for a PCIe common-ancestor level (PXB and PHB fold
/// into PIX and NODE, the vocabulary the catalog uses).
pub fn pcie_link(level: TopologyLevel) -> Link {
    match level {
        TopologyLevel::Internal | TopologyLevel::Single | TopologyLevel::Multiple => Link::Pix,
        TopologyLevel::HostBridge | TopologyLevel::Node => Link::Node,
        TopologyLevel::System => Link::Sys,
    }
}

/// NVML's `00000000:1B:00.0` as sysfs writes it: `0000:1b:00.0`.
pub fn sysfs_bus_id(nvml: &str) -> String {
    let lower = nvml.to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => lower,
    }
}

/// Loads NVML from `library` (default [`LIBRARY`]) and reads every GPU; the error says why
/// NVML is unavailable (no library, driver not loaded, no permission).
pub fn probe(library: Option<&OsStr>) -> Result<NvmlReport, String> {
    let path = library.unwrap_or(OsStr::new(LIBRARY));
    let nvml = Nvml::builder()
        .lib_path(path)
        .init()
        .map_err(|e| format!("NVML unavailable ({}): {e}", path.to_string_lossy()))?;
    let driver_version = nvml
        .sys_driver_version()
        .map_err(|e| format!("NVML driver version: {e}"))?;
    let cuda_version = nvml.sys_cuda_driver_version().ok().map(|v| {
        (
            nvml_wrapper::cuda_driver_version_major(v),
            nvml_wrapper::cuda_driver_version_minor(v),
        )
    });
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    let mut warnings = Vec::new();
    let mut devices = Vec::new();
    let mut gpus = Vec::new();
    for index in 0..count {
        let read = || -> Result<_, nvml_wrapper::error::NvmlError> {
            let device = nvml.device_by_index(index)?;
            let gpu = NvmlGpu {
                index,
                uuid: device.uuid()?,
                name: device.name()?,
                bus_id: sysfs_bus_id(&device.pci_info()?.bus_id),
                memory_mib: device.memory_info()?.total / (1024 * 1024),
                minor: device.minor_number().ok(),
                compute_capability: device
                    .cuda_compute_capability()
                    .ok()
                    .map(|c| (c.major, c.minor)),
                mig_enabled: device.mig_mode().ok().map(|m| m.current == 1),
            };
            Ok((device, gpu))
        };
        match read() {
            Ok((device, gpu)) => {
                devices.push(device);
                gpus.push(gpu);
            }
            Err(e) => warnings.push(format!("GPU {index}: {e}")),
        }
    }
    let links = devices
        .iter()
        .enumerate()
        .map(|(a, first)| {
            devices
                .iter()
                .enumerate()
                .map(|(b, second)| {
                    if a == b {
                        return Link::Itself;
                    }
                    let nvlink = matches!(
                        first.p2p_status(second, P2pCapabilitiesIndex::NvLink),
                        Ok(P2pStatus::Ok)
                    );
                    if nvlink {
                        let active = (0..MAX_NVLINKS)
                            .filter(|&l| first.link_wrapper_for(l).is_active().unwrap_or(false))
                            .count();
                        Link::Nvlink(u8::try_from(active).unwrap_or(u8::MAX))
                    } else {
                        nvml.topology_common_ancestor(first, second)
                            .map_or(Link::Sys, pcie_link)
                    }
                })
                .collect()
        })
        .collect();
    Ok(NvmlReport {
        driver_version,
        cuda_version,
        gpus,
        links,
        warnings,
    })
}

/// A health event NVML reported for one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthEvent {
    /// The GPU's UUID, when NVML could name it (`None`: treat every GPU as affected).
    pub uuid: Option<String>,
    /// The XID of a critical XID event; `None` for ECC events and watcher failures.
    pub xid: Option<u64>,
    /// What happened, for people.
    pub what: String,
}

/// Watches every GPU for critical XID and double-bit ECC events, as NVIDIA's device plugin
/// does, until `keep_going` says stop (checked every `poll_ms`). Three wait failures in a row
/// end the watch with an event naming no GPU (NVIDIA then marks every GPU unhealthy).
/// Blocking: run it on a thread of its own.
pub fn watch_health(
    library: Option<&OsStr>,
    poll_ms: u32,
    keep_going: impl Fn() -> bool,
    mut on_event: impl FnMut(HealthEvent),
) -> Result<(), String> {
    use nvml_wrapper::bitmasks::event::EventTypes;
    use nvml_wrapper::enums::event::XidError;
    use nvml_wrapper::error::NvmlError;

    let path = library.unwrap_or(OsStr::new(LIBRARY));
    let nvml = Nvml::builder()
        .lib_path(path)
        .init()
        .map_err(|e| format!("NVML unavailable ({}): {e}", path.to_string_lossy()))?;
    let mut set = nvml
        .create_event_set()
        .map_err(|e| format!("NVML event set: {e}"))?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    for index in 0..count {
        let device = nvml
            .device_by_index(index)
            .map_err(|e| format!("NVML GPU {index}: {e}"))?;
        set = device
            .register_events(
                EventTypes::CRITICAL_XID_ERROR | EventTypes::DOUBLE_BIT_ECC_ERROR,
                set,
            )
            .map_err(|e| format!("NVML GPU {index}: cannot watch health events: {e:?}"))?;
    }
    let mut failures = 0;
    while keep_going() {
        match set.wait(poll_ms) {
            Ok(event) => {
                failures = 0;
                let xid = match event.event_data {
                    Some(XidError::Value(xid)) => Some(xid),
                    _ => None,
                };
                let what = match xid {
                    Some(xid) => format!(
                        "XID {xid}: {}",
                        xid_description(u32::try_from(xid).unwrap_or(u32::MAX))
                    ),
                    None => "double-bit ECC error".into(),
                };
                on_event(HealthEvent {
                    uuid: event.device.uuid().ok(),
                    xid,
                    what,
                });
            }
            Err(NvmlError::Timeout) => failures = 0,
            Err(error) => {
                failures += 1;
                if failures >= 3 {
                    on_event(HealthEvent {
                        uuid: None,
                        xid: None,
                        what: format!("health events cannot be read: {error}"),
                    });
                    return Err(format!("NVML event wait failed three times: {error}"));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_levels_and_bus_ids_map_to_the_catalog_vocabulary() {
        let table = [
            (TopologyLevel::Internal, Link::Pix),
            (TopologyLevel::Single, Link::Pix),
            (TopologyLevel::Multiple, Link::Pix),
            (TopologyLevel::HostBridge, Link::Node),
            (TopologyLevel::Node, Link::Node),
            (TopologyLevel::System, Link::Sys),
        ];
        for (level, want) in table {
            assert_eq!(pcie_link(level), want, "{level:?}");
        }
        assert_eq!(sysfs_bus_id("00000000:1B:00.0"), "0000:1b:00.0");
        assert_eq!(sysfs_bus_id("0000:C3:00.0"), "0000:c3:00.0");
    }

    #[test]
    fn a_missing_library_is_a_clear_error_not_a_crash() {
        let missing = OsStr::new("/nonexistent/libnvidia-ml.so.1");
        let error = probe(Some(missing)).expect_err("no library there");
        assert!(
            error.starts_with("NVML unavailable (/nonexistent/libnvidia-ml.so.1): "),
            "{error}"
        );
        let mut events = Vec::new();
        let error = watch_health(Some(missing), 10, || true, |e| events.push(e))
            .expect_err("no library there");
        assert!(error.starts_with("NVML unavailable"), "{error}");
        assert!(events.is_empty());
        assert!(fatal_xid(79) && fatal_xid(48) && !fatal_xid(13) && !fatal_xid(109));
    }

    /// Runs against the real driver only where NVML finds a GPU (a machine with an NVIDIA
    /// GPU and driver); elsewhere there is nothing to compare with and it returns early.
    #[test]
    fn the_real_gpus_match_sysfs_where_a_driver_is_present() {
        let Ok(report) = probe(None) else { return };
        if report.gpus.is_empty() {
            return;
        }
        let catalog = tessera_devices::Catalog::built_in().expect("catalog");
        let sysfs = crate::sysfs::discover(std::path::Path::new("/"), &catalog);
        for gpu in &report.gpus {
            assert!(gpu.uuid.starts_with("GPU-"), "{gpu:?}");
            assert!(gpu.memory_mib > 0, "{gpu:?}");
            assert!(
                sysfs.accelerators.iter().any(|a| a.bus_id == gpu.bus_id),
                "NVML GPU {} at {} is not among the sysfs devices {:?}",
                gpu.uuid,
                gpu.bus_id,
                sysfs.accelerators
            );
        }
        assert_eq!(report.links.len(), report.gpus.len());
    }
}
