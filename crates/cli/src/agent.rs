//! `tessera agent`: the node agent's commands on a real machine. `discover` inventories the
//! accelerators sysfs shows (under `--root`, `/` by default) against the catalog and prints
//! them with their NUMA nodes and PCIe roots, the labels the node would carry and the
//! ResourceSlice NVIDIA's DRA driver would publish; what could not be read is printed as
//! warnings, never a failure.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use tessera_devices::Catalog;
use tessera_devices::server::GpuSlot;
use tessera_node::resource_slice::nvidia_slices;

/// `tessera agent` subcommands.
#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    /// Inventory this machine's accelerators from sysfs.
    Discover(DiscoverArgs),
}

/// Arguments of `tessera agent discover`.
#[derive(Args, Debug)]
pub struct DiscoverArgs {
    /// The filesystem root holding `sys/` (a recorded tree in tests).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The node name the ResourceSlice would carry.
    #[arg(long, default_value = "node")]
    pub node_name: String,
}

/// Runs a `tessera agent` subcommand.
pub fn run(command: &AgentCommand) -> anyhow::Result<()> {
    match command {
        AgentCommand::Discover(args) => {
            use std::fmt::Write;
            let mut out = String::new();
            let catalog = Catalog::built_in()?;
            let inventory = tessera_devices::sysfs::discover(&args.root, &catalog);
            for warning in &inventory.warnings {
                eprintln!("warning: {warning}");
            }
            let numa: Vec<String> = inventory.numa_nodes.iter().map(u32::to_string).collect();
            writeln!(
                out,
                "NUMA nodes: {}",
                if numa.is_empty() {
                    "-".into()
                } else {
                    numa.join(",")
                }
            )?;
            writeln!(out, "BUS ID\tVENDOR:DEVICE\tCLASS\tNUMA\tPCIE ROOT\tMODEL")?;
            for a in &inventory.accelerators {
                writeln!(
                    out,
                    "{}\t{}:{}\t{}\t{}\t{}\t{}",
                    a.bus_id,
                    a.vendor_id,
                    a.device_id,
                    a.class,
                    a.numa.map_or("-".into(), |n| n.to_string()),
                    a.pcie_root.as_deref().unwrap_or("-"),
                    a.model.as_deref().unwrap_or("unknown")
                )?;
            }
            writeln!(out, "LABELS")?;
            for (key, value) in inventory.labels() {
                writeln!(out, "{key}={value}")?;
            }
            // What NVIDIA's DRA driver would publish for the GPUs of the first known model.
            let known = inventory
                .accelerators
                .iter()
                .find_map(|a| a.model.as_deref().and_then(|m| catalog.gpu(m)));
            if let Some(model) = known {
                let slots: Vec<GpuSlot> = inventory
                    .accelerators
                    .iter()
                    .filter(|a| a.model.as_deref() == Some(model.name.as_str()))
                    .map(|a| GpuSlot {
                        bus_id: a.bus_id.clone(),
                        numa: a.numa.and_then(|n| u8::try_from(n).ok()).unwrap_or(0),
                        pcie_root: a.pcie_root.clone().unwrap_or_default(),
                        pcie_switch: String::new(),
                    })
                    .collect();
                let slices = nvidia_slices(&args.node_name, &slots, model, None);
                writeln!(out, "RESOURCESLICES")?;
                for slice in slices {
                    writeln!(out, "{}", serde_json::to_string_pretty(&slice)?)?;
                }
            }
            crate::output::emit(&out)
        }
    }
}
