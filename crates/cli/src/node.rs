//! `tessera node inventory NODE`: what a node of the topology has — its server model, GPUs and
//! NICs with NUMA nodes and PCIe roots, the device topology matrix, MIG layout, kubelet
//! policies, capacity and the labels its twin carries.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use tessera_node::hardware::{Exposure, MigLayout, Sharing};

/// `tessera node` subcommands.
#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// Print a node's inventory.
    Inventory(InventoryArgs),
}

/// Arguments of `tessera node inventory`.
#[derive(Args, Debug)]
pub struct InventoryArgs {
    /// The node name (`h100-1`).
    pub node: String,
    /// The cluster topology file (the built-in lab when absent).
    #[arg(long)]
    pub topology: Option<PathBuf>,
}

/// Runs a `tessera node` subcommand.
pub fn run(command: &NodeCommand) -> anyhow::Result<()> {
    let NodeCommand::Inventory(args) = command;
    crate::output::emit(&inventory(args)?)
}

fn inventory(args: &InventoryArgs) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut out = String::new();
    let topology = crate::up::load_topology(args.topology.as_deref())?;
    let nodes = topology.nodes();
    let node = nodes
        .iter()
        .find(|n| n.name == args.node)
        .with_context(|| {
            let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
            format!(
                "no node {:?} in the topology (it has {})",
                args.node,
                names.join(", ")
            )
        })?;
    writeln!(out, "Node: {}\nPool: {}", node.name, node.pool)?;
    if let Some(hardware) = &node.hardware {
        let server = &hardware.server;
        writeln!(out, "Server: {} ({})", server.name, server.description)?;
        writeln!(
            out,
            "Sockets: {} x {} cores, {} GiB",
            server.sockets, server.cores_per_socket, server.memory_gib
        )?;
        if let Some(devices) = &node.devices {
            writeln!(
                out,
                "Devices: {}, {}",
                exposure_text(devices.exposure),
                sharing_text(devices.sharing.as_ref())
            )?;
        }
        if let Some(profiles) = hardware.mig_profiles() {
            writeln!(out, "MIG layout per GPU: {}", profiles.join(", "))?;
        }
        writeln!(
            out,
            "Kubelet: topologyManagerPolicy={} topologyManagerScope={} cpuManagerPolicy={}",
            node.kubelet.topology_manager_policy,
            node.kubelet.topology_manager_scope,
            node.kubelet.cpu_manager_policy
        )?;
        writeln!(out, "GPU\tBUS ID\tNUMA\tPCIE ROOT")?;
        for (i, gpu) in server.gpus.iter().enumerate() {
            writeln!(
                out,
                "GPU{i}\t{}\t{}\t{}",
                gpu.bus_id, gpu.numa, gpu.pcie_root
            )?;
        }
        writeln!(out, "Topology:")?;
        write!(out, "{}", server.topology_matrix())?;
    }
    writeln!(out, "Capacity:")?;
    for (resource, quantity) in &node.capacity {
        writeln!(out, "  {resource}: {}", quantity.to_canonical())?;
    }
    writeln!(out, "Labels:")?;
    for (key, value) in &node.labels {
        writeln!(out, "  {key}={value}")?;
    }
    writeln!(out, "Taints:")?;
    for taint in &node.taints {
        writeln!(out, "  {}={}:{}", taint.key, taint.value, taint.effect)?;
    }
    Ok(out)
}

/// An exposure as the topology file writes it.
fn exposure_text(exposure: Exposure) -> &'static str {
    match exposure {
        Exposure::DevicePlugin => "device-plugin",
        Exposure::Dra => "dra",
    }
}

/// How GPUs are shared, in the topology file's words.
fn sharing_text(sharing: Option<&Sharing>) -> String {
    match sharing {
        None => "whole GPUs".to_string(),
        Some(Sharing::Mig {
            layout: MigLayout::Named(name),
        }) => format!("MIG {name}"),
        Some(Sharing::Mig {
            layout: MigLayout::Profiles(profiles),
        }) => format!("MIG {}", profiles.join(", ")),
        Some(Sharing::TimeSlicing { replicas }) => {
            format!("time-slicing, {replicas} replicas per GPU")
        }
        Some(Sharing::Mps {
            replicas,
            memory_limit,
        }) => format!(
            "MPS, {replicas} replicas per GPU{}",
            memory_limit
                .as_ref()
                .map(|limit| format!(", {limit} pinned memory each"))
                .unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_read_as_the_topology_file_writes_them() {
        let named = |name: &str| Sharing::Mig {
            layout: MigLayout::Named(name.into()),
        };
        let table = [
            (None, "whole GPUs"),
            (Some(named("all-1g.18gb")), "MIG all-1g.18gb"),
            (
                Some(Sharing::Mig {
                    layout: MigLayout::Profiles(vec!["3g.71gb".into(), "1g.18gb".into()]),
                }),
                "MIG 3g.71gb, 1g.18gb",
            ),
            (
                Some(Sharing::TimeSlicing { replicas: 4 }),
                "time-slicing, 4 replicas per GPU",
            ),
            (
                Some(Sharing::Mps {
                    replicas: 2,
                    memory_limit: Some("20Gi".into()),
                }),
                "MPS, 2 replicas per GPU, 20Gi pinned memory each",
            ),
        ];
        for (sharing, want) in table {
            assert_eq!(sharing_text(sharing.as_ref()), want);
        }
        assert_eq!(exposure_text(Exposure::Dra), "dra");
        assert_eq!(exposure_text(Exposure::DevicePlugin), "device-plugin");
    }

    #[test]
    fn the_inventory_has_no_debug_text() {
        for node in ["h100-1", "h200-1", "l40s-1", "cpu-1"] {
            let out = inventory(&InventoryArgs {
                node: node.into(),
                topology: None,
            })
            .expect("inventory");
            for debug in ["Some(", "Named(", "{ ", "None"] {
                assert!(!out.contains(debug), "{node}: {debug:?} in\n{out}");
            }
        }
    }
}
