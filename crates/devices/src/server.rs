//! Server models: sockets and NUMA nodes, the GPUs and NICs of a machine with the PCIe root
//! and switch each sits behind, the GPU fabric, and the pairwise link types between devices in
//! `nvidia-smi topo -m` vocabulary (derived, as the tool derives them, from where the devices
//! sit).
//!
//! Knows nothing about Kubernetes nodes or scheduling; the catalog checks cross-references.

use std::fmt;

use serde::Deserialize;

/// How the GPUs of a server talk to each other beyond PCIe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Fabric {
    /// NVLink through NVSwitch: every pair connected with `links` links.
    Nvswitch {
        /// NVLink links per GPU (18 on Hopper: `NV18`).
        links: u8,
    },
    /// AMD Infinity Fabric, all to all.
    Xgmi {
        /// Links per GPU.
        links: u8,
    },
    /// PCIe only.
    Pcie,
    /// No accelerators.
    None,
}

/// Where a PCIe device sits.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GpuSlot {
    /// PCI bus ID (`0000:1b:00.0`).
    pub bus_id: String,
    /// NUMA node (one per socket).
    pub numa: u8,
    /// PCIe root complex, as DRA's `resource.kubernetes.io/pcieRoot` names it.
    pub pcie_root: String,
    /// The PCIe switch the device hangs off.
    pub pcie_switch: String,
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Nic {
    /// Device name (`mlx5_0`).
    pub name: String,
    /// PCI bus ID.
    pub bus_id: String,
    /// NUMA node.
    pub numa: u8,
    /// PCIe root complex.
    pub pcie_root: String,
    /// The PCIe switch it hangs off.
    pub pcie_switch: String,
    /// Link speed in Gbit/s.
    pub gbps: u32,
}

/// A server model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerModel {
    /// Catalog name (`dgx-h100`), what topology files refer to.
    pub name: String,
    /// One line for people.
    pub description: String,
    /// The GPU model of its GPUs (absent for CPU-only servers).
    #[serde(default)]
    pub gpu_model: Option<String>,
    /// CPU sockets, one NUMA node each.
    pub sockets: u8,
    /// Cores per socket.
    pub cores_per_socket: u32,
    /// Memory in GiB.
    #[serde(rename = "memoryGiB")]
    pub memory_gib: u32,
    /// The GPU fabric.
    pub fabric: Fabric,
    /// The NVLink domain spans every tray of the rack (GB200 NVL72, multi-node NVLink): GPU
    /// Feature Discovery labels the nodes of one rack with one `nvidia.com/gpu.clique`.
    #[serde(default)]
    pub multi_node_nvlink: bool,
    /// GPUs, by index.
    pub gpus: Vec<GpuSlot>,
    /// NICs.
    pub nics: Vec<Nic>,
}

/// A link between two devices, as `nvidia-smi topo -m` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The device itself.
    Itself,
    /// NVLink with this many links.
    Nvlink(u8),
    /// AMD Infinity Fabric.
    Xgmi,
    /// Through one PCIe switch.
    Pix,
    /// Across PCIe root complexes within one NUMA node.
    Node,
    /// Across the socket interconnect.
    Sys,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Link::Itself => f.write_str("X"),
            Link::Nvlink(links) => write!(f, "NV{links}"),
            Link::Xgmi => f.write_str("XGMI"),
            Link::Pix => f.write_str("PIX"),
            Link::Node => f.write_str("NODE"),
            Link::Sys => f.write_str("SYS"),
        }
    }
}

impl Link {
    /// How fast the link is relative to the others, higher is better: the number the GPU-set
    /// chooser sums over pairs.
    pub fn rank(self) -> u8 {
        match self {
            Link::Itself => 0,
            Link::Nvlink(links) => 100u8.saturating_add(links),
            Link::Xgmi => 100,
            Link::Pix => 30,
            Link::Node => 20,
            Link::Sys => 10,
        }
    }
}

/// The PCIe link between two devices given where they sit.
fn pcie_link(a: (u8, &str), b: (u8, &str)) -> Link {
    if a.1 == b.1 {
        Link::Pix
    } else if a.0 == b.0 {
        Link::Node
    } else {
        Link::Sys
    }
}

impl ServerModel {
    /// The link between GPUs `a` and `b` (indexes); `None` for an index out of range.
    pub fn gpu_link(&self, a: usize, b: usize) -> Option<Link> {
        let (first, second) = (self.gpus.get(a)?, self.gpus.get(b)?);
        Some(if a == b {
            Link::Itself
        } else {
            match self.fabric {
                Fabric::Nvswitch { links } => Link::Nvlink(links),
                Fabric::Xgmi { .. } => Link::Xgmi,
                Fabric::Pcie | Fabric::None => pcie_link(
                    (first.numa, &first.pcie_switch),
                    (second.numa, &second.pcie_switch),
                ),
            }
        })
    }

    /// The PCIe link between GPU `gpu` and NIC `nic` (indexes).
    pub fn nic_link(&self, gpu: usize, nic: usize) -> Option<Link> {
        let (gpu, nic) = (self.gpus.get(gpu)?, self.nics.get(nic)?);
        Some(pcie_link(
            (gpu.numa, &gpu.pcie_switch),
            (nic.numa, &nic.pcie_switch),
        ))
    }

    /// The `nvidia-smi topo -m` matrix: GPUs and NICs as rows, link types as cells, and each
    /// GPU's NUMA affinity.
    pub fn topology_matrix(&self) -> String {
        let mut columns: Vec<String> = (0..self.gpus.len()).map(|i| format!("GPU{i}")).collect();
        columns.extend((0..self.nics.len()).map(|i| format!("NIC{i}")));
        let mut out = format!("\t{}\tNUMA Affinity\n", columns.join("\t"));
        for (i, gpu) in self.gpus.iter().enumerate() {
            let cells: Vec<String> = (0..self.gpus.len())
                .filter_map(|j| self.gpu_link(i, j))
                .chain((0..self.nics.len()).filter_map(|n| self.nic_link(i, n)))
                .map(|link| link.to_string())
                .collect();
            out.push_str(&format!("GPU{i}\t{}\t{}\n", cells.join("\t"), gpu.numa));
        }
        for (n, nic) in self.nics.iter().enumerate() {
            let cells: Vec<String> = (0..self.gpus.len())
                .filter_map(|i| self.nic_link(i, n))
                .map(|link| link.to_string())
                .chain((0..self.nics.len()).map(|m| {
                    if m == n {
                        Link::Itself.to_string()
                    } else {
                        let other = &self.nics[m];
                        pcie_link(
                            (nic.numa, &nic.pcie_switch),
                            (other.numa, &other.pcie_switch),
                        )
                        .to_string()
                    }
                }))
                .collect();
            out.push_str(&format!("NIC{n}\t{}\n", cells.join("\t")));
        }
        out
    }

    /// Checks the server's own rules; returns the field (relative to the server) and message.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        if self.sockets == 0 {
            return Err(("sockets".into(), "must be at least 1".into()));
        }
        let mut bus_ids = std::collections::BTreeSet::new();
        let slots = self
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| (format!("gpus[{i}]"), g.numa, &g.bus_id))
            .chain(
                self.nics
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (format!("nics[{i}]"), n.numa, &n.bus_id)),
            );
        for (field, numa, bus_id) in slots {
            if numa >= self.sockets {
                return Err((
                    format!("{field}.numa"),
                    format!(
                        "NUMA node {numa} does not exist on {} socket(s)",
                        self.sockets
                    ),
                ));
            }
            if !bus_ids.insert(bus_id.as_str()) {
                return Err((
                    format!("{field}.busId"),
                    format!("bus ID {bus_id:?} is used twice"),
                ));
            }
        }
        match (&self.gpu_model, self.gpus.is_empty(), self.fabric) {
            (None, false, _) => Err((
                "gpuModel".into(),
                "required when the server has GPUs".into(),
            )),
            (_, true, fabric) if fabric != Fabric::None => Err((
                "fabric".into(),
                "a server without GPUs has fabric kind none".into(),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::catalog::Catalog;

    #[test]
    fn link_types_follow_nvidia_smi_topo() {
        let catalog = Catalog::built_in().expect("catalog");
        let dgx = catalog.server("dgx-h100").expect("dgx-h100");
        let l40s = catalog.server("pcie-l40s-4").expect("pcie-l40s-4");
        let mi300x = catalog.server("mi300x-8").expect("mi300x-8");
        let table = [
            (dgx.gpu_link(0, 7), "NV18"),
            (dgx.gpu_link(3, 3), "X"),
            (dgx.nic_link(0, 0), "PIX"),
            (dgx.nic_link(0, 1), "NODE"),
            (dgx.nic_link(0, 4), "SYS"),
            (l40s.gpu_link(0, 1), "PIX"),
            (l40s.gpu_link(2, 3), "NODE"),
            (l40s.gpu_link(0, 2), "SYS"),
            (l40s.nic_link(3, 1), "NODE"),
            (mi300x.gpu_link(1, 6), "XGMI"),
        ];
        for (i, (link, want)) in table.into_iter().enumerate() {
            assert_eq!(
                link.map(|l| l.to_string()).as_deref(),
                Some(want),
                "case {i}"
            );
        }
        assert_eq!(dgx.gpu_link(0, 8), None);
        let matrix = l40s.topology_matrix();
        let lines: Vec<&str> = matrix.lines().collect();
        assert_eq!(
            lines[0],
            "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tNUMA Affinity"
        );
        assert_eq!(lines[1], "GPU0\tX\tPIX\tSYS\tSYS\tNODE\tSYS\t0");
        assert_eq!(lines[5], "NIC0\tNODE\tNODE\tSYS\tSYS\tX\tSYS");
    }
}
