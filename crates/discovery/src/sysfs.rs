//! Discovery from sysfs: the accelerators on the PCI bus (NVIDIA 10de, AMD 1002, Intel 8086;
//! display, processing-accelerator and co-processor classes, as NFD's default class list),
//! each with its NUMA node and PCIe root complex, matched against the catalog; and the
//! machine's NUMA nodes. The root is a parameter so recorded trees serve as test fixtures.
//!
//! Reads files only; malformed or missing entries become warnings and a partial inventory,
//! never an error or a panic. NVML is a separate back-end.

use std::path::{Path, PathBuf};

use tessera_devices::catalog::Catalog;

/// PCI vendors whose accelerators are inventoried.
const VENDORS: &[&str] = &["10de", "1002", "8086"];

/// One accelerator found on the PCI bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciAccelerator {
    /// PCI address (`0000:1b:00.0`).
    pub bus_id: String,
    /// Vendor ID, lower-case hex.
    pub vendor_id: String,
    /// Device ID, lower-case hex.
    pub device_id: String,
    /// PCI class code (`030200`).
    pub class: String,
    /// NUMA node, when the kernel reports one (`-1` means none).
    pub numa: Option<u32>,
    /// PCIe root complex (`pci0000:15`), from the device's sysfs path.
    pub pcie_root: Option<String>,
    /// The catalog model, when the IDs are known.
    pub model: Option<String>,
}

/// What sysfs shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// Accelerators, by bus ID.
    pub accelerators: Vec<PciAccelerator>,
    /// NUMA nodes of the machine.
    pub numa_nodes: Vec<u32>,
    /// What could not be read, one line each.
    pub warnings: Vec<String>,
}

impl Inventory {
    /// The NFD-style labels of the inventory (`feature.node.kubernetes.io/pci-<vendor>.present`).
    pub fn labels(&self) -> Vec<(String, String)> {
        let mut vendors: Vec<&str> = self
            .accelerators
            .iter()
            .map(|a| a.vendor_id.as_str())
            .collect();
        vendors.sort_unstable();
        vendors.dedup();
        vendors
            .into_iter()
            .map(|v| {
                (
                    format!("feature.node.kubernetes.io/pci-{v}.present"),
                    "true".into(),
                )
            })
            .collect()
    }
}

fn read_trimmed(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// `0x10de` → `10de`, checked to be four hex digits.
fn hex_id(text: &str, digits: usize) -> Option<String> {
    let id = text.strip_prefix("0x").unwrap_or(text).to_ascii_lowercase();
    (id.len() == digits && id.chars().all(|c| c.is_ascii_hexdigit())).then_some(id)
}

/// The PCIe root complex in a resolved device path (`/sys/devices/pci0000:15/…`).
fn pcie_root(path: &Path) -> Option<String> {
    path.components()
        .filter_map(|c| c.as_os_str().to_str())
        .find(|c| c.starts_with("pci") && c.contains(':'))
        .map(str::to_string)
}

/// Inventories the accelerators under `root` (`/` on a real machine).
pub fn discover(root: &Path, catalog: &Catalog) -> Inventory {
    let mut inventory = Inventory::default();
    let devices_dir = root.join("sys/bus/pci/devices");
    let entries = match std::fs::read_dir(&devices_dir) {
        Ok(entries) => entries,
        Err(error) => {
            inventory
                .warnings
                .push(format!("{}: {error}", devices_dir.display()));
            return inventory;
        }
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let bus_id = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let ids = (
            read_trimmed(&path.join("vendor")),
            read_trimmed(&path.join("device")),
            read_trimmed(&path.join("class")),
        );
        let (vendor, device, class) = match ids {
            (Ok(vendor), Ok(device), Ok(class)) => (vendor, device, class),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                inventory.warnings.push(e);
                continue;
            }
        };
        let (Some(vendor_id), Some(device_id), Some(class)) =
            (hex_id(&vendor, 4), hex_id(&device, 4), hex_id(&class, 6))
        else {
            inventory.warnings.push(format!(
                "{bus_id}: unreadable IDs (vendor {vendor:?}, device {device:?}, class {class:?})"
            ));
            continue;
        };
        let accelerator_class =
            class.starts_with("03") || class.starts_with("12") || class.starts_with("0b40");
        if !VENDORS.contains(&vendor_id.as_str()) || !accelerator_class {
            continue;
        }
        let numa = match read_trimmed(&path.join("numa_node")) {
            Ok(text) => match text.parse::<i64>() {
                Ok(n) if n >= 0 => u32::try_from(n).ok(),
                Ok(_) => None,
                Err(_) => {
                    inventory
                        .warnings
                        .push(format!("{bus_id}: numa_node {text:?} is not a number"));
                    None
                }
            },
            Err(_) => None,
        };
        let resolved = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        let model = catalog
            .gpu_by_pci(&vendor_id, &device_id)
            .map(|gpu| gpu.name.clone());
        inventory.accelerators.push(PciAccelerator {
            bus_id,
            vendor_id,
            device_id,
            class,
            numa,
            pcie_root: pcie_root(&resolved),
            model,
        });
    }
    let nodes_dir = root.join("sys/devices/system/node");
    if let Ok(entries) = std::fs::read_dir(&nodes_dir) {
        for entry in entries.flatten() {
            if let Some(n) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<u32>().ok())
            {
                inventory.numa_nodes.push(n);
            }
        }
        inventory.numa_nodes.sort_unstable();
    }
    inventory
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (bus ID, catalog model, NUMA node, PCIe root).
    type Found<'a> = (&'a str, Option<&'a str>, Option<u32>, Option<&'a str>);

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-h100-pair")
    }

    #[test]
    fn a_recorded_tree_yields_gpus_with_numa_and_pcie_roots() {
        let catalog = Catalog::built_in().expect("catalog");
        let inventory = discover(&fixture(), &catalog);
        let found: Vec<Found> = inventory
            .accelerators
            .iter()
            .map(|a| {
                (
                    a.bus_id.as_str(),
                    a.model.as_deref(),
                    a.numa,
                    a.pcie_root.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (
                    "0000:1b:00.0",
                    Some("H100-SXM5-80GB"),
                    Some(0),
                    Some("pci0000:15")
                ),
                (
                    "0000:9d:00.0",
                    Some("H100-SXM5-80GB"),
                    Some(1),
                    Some("pci0000:97")
                ),
                ("0000:c1:00.0", None, None, Some("pci0000:c0")),
            ]
        );
        assert_eq!(inventory.numa_nodes, [0, 1]);
        // The NIC is not an accelerator; the broken entry is a warning, not a failure.
        assert_eq!(inventory.warnings.len(), 1, "{:?}", inventory.warnings);
        assert!(
            inventory.warnings[0].contains("0000:ff:00.0"),
            "{:?}",
            inventory.warnings
        );
        assert_eq!(
            inventory.labels(),
            [
                (
                    "feature.node.kubernetes.io/pci-1002.present".to_string(),
                    "true".to_string()
                ),
                (
                    "feature.node.kubernetes.io/pci-10de.present".to_string(),
                    "true".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_missing_tree_is_a_warning() {
        let catalog = Catalog::built_in().expect("catalog");
        let inventory = discover(Path::new("/nonexistent-sysfs-root"), &catalog);
        assert!(inventory.accelerators.is_empty());
        assert_eq!(inventory.warnings.len(), 1);
    }
}
