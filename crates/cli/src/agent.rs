//! `tessera agent`: the node agent on a real machine.
//!
//! `discover` inventories the accelerators sysfs shows (under `--root`) against the catalog
//! and, on the live machine (`--root /`), what NVML reports when the NVIDIA driver is there
//! (UUIDs, memory, MIG mode, NVLink/PCIe links); it prints them with their NUMA nodes and
//! PCIe roots, the labels the node would carry and the ResourceSlice NVIDIA's DRA driver
//! would publish. What could not be read is printed as warnings, never a failure.
//!
//! `serve` offers the discovered NVIDIA GPUs to the kubelet, one way per node as NVIDIA
//! advises (never both for the same GPUs): as a device plugin (`nvidia.com/gpu`) or as the
//! DRA driver `gpu.nvidia.com` (publishes the node's ResourceSlice, serves the DRA kubelet
//! plugin and its registration), until interrupted.
//!
//! `cache` runs the node cache daemon (`agent_cache`).
//!
//! `manifests` prints what deploys `serve` on a cluster with least privilege
//! (`tessera_node::agent_manifests` decides the objects) as a YAML stream for `kubectl apply`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use tessera_devices::server::{GpuSlot, Link};
use tessera_devices::{Catalog, GpuModel, GpuTopology};
use tessera_discovery::nvml::NvmlReport;
use tessera_discovery::sysfs::Inventory;
use tessera_node::resource_slice::{nvidia_device_classes, nvidia_slices};
use tessera_plugins::cdi;
use tessera_plugins::device_plugin::{DevicePluginSpec, GpuDevicePlugin, PluginDevice};
use tessera_plugins::dra_plugin::{ApiClaims, DraDevice, DraKubeletPlugin, DraPluginSpec};
use tessera_plugins::lifecycle::{self, DevicePluginEndpoint, DraEndpoint, RegistrationService};

/// `tessera agent` subcommands.
#[derive(Subcommand, Debug)]
pub enum AgentCommand {
    /// Inventory this machine's accelerators from sysfs.
    Discover(DiscoverArgs),
    /// Offer this machine's NVIDIA GPUs to the kubelet (device plugin or DRA driver).
    Serve(ServeArgs),
    /// Print the DaemonSet, ServiceAccount, RBAC and namespace that run `serve` on every GPU
    /// node with least privilege, as YAML for `kubectl apply -f -`.
    Manifests(ManifestsArgs),
    /// Run the node cache daemon: content-addressed model blobs fetched once per cluster
    /// from the origin and shared between caches piece by piece.
    Cache(crate::agent_cache::CacheArgs),
}

/// Arguments of `tessera agent manifests`.
#[derive(Args, Debug)]
pub struct ManifestsArgs {
    /// Device plugin or DRA driver.
    #[arg(long, value_enum, default_value = "device-plugin")]
    pub exposure: Exposure,
    /// The namespace the agent runs in (it should hold nothing else: Pod Security is relaxed
    /// there for the agent's hostPath volumes).
    #[arg(long, default_value = "tessera-agent")]
    pub namespace: String,
    /// The image holding the `tessera` binary.
    #[arg(long, default_value = concat!("ghcr.io/tessera-platform/tessera:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// A `key=value` label the agent's nodes carry (repeatable).
    #[arg(long = "node-selector", default_value = "nvidia.com/gpu.present=true", value_parser = key_value)]
    pub node_selector: Vec<(String, String)>,
    /// Leave out the ValidatingAdmissionPolicy that keeps each DRA agent to its own node's
    /// ResourceSlices (for clusters before Kubernetes 1.30, which lack
    /// `admissionregistration.k8s.io/v1` policies).
    #[arg(long)]
    pub no_node_policy: bool,
}

fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("{text:?} is not key=value")),
    }
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

/// How the GPUs are offered.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// NVIDIA's device plugin API: the extended resource `nvidia.com/gpu`.
    DevicePlugin,
    /// NVIDIA's DRA driver `gpu.nvidia.com`: ResourceSlices and claims.
    Dra,
}

/// Arguments of `tessera agent serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The filesystem root holding `sys/`.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// This node's name (the DRA pool and the ResourceSlice's node); the host name, as the
    /// kubelet names its node, without it.
    #[arg(long, env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Device plugin or DRA driver.
    #[arg(long, value_enum, default_value = "device-plugin")]
    pub exposure: Exposure,
    /// The kubelet's device-plugin directory.
    #[arg(long, default_value = tessera_node::agent_manifests::DEVICE_PLUGIN_DIR)]
    pub device_plugin_dir: PathBuf,
    /// The kubelet's plugin registry (DRA).
    #[arg(long, default_value = tessera_node::agent_manifests::PLUGINS_REGISTRY_DIR)]
    pub plugins_registry_dir: PathBuf,
    /// The kubelet's plugin directory (DRA: `<dir>/gpu.nvidia.com/dra.sock`).
    #[arg(long, default_value = tessera_node::agent_manifests::PLUGINS_DIR)]
    pub plugins_dir: PathBuf,
    /// Where CDI specs for prepared claims go (DRA).
    #[arg(long, default_value = tessera_node::agent_manifests::CDI_DIR)]
    pub cdi_dir: PathBuf,
    /// The cluster for reading claims and publishing slices (DRA).
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
    /// How often sockets are checked for a restarted kubelet, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub poll_ms: u64,
}

/// The NVIDIA driver name.
const DRIVER: &str = tessera_node::agent_manifests::DRA_DRIVER;

/// The discovered GPUs of the first model the catalog knows, in bus order.
fn known_gpus<'c>(
    inventory: &Inventory,
    catalog: &'c Catalog,
) -> Option<(&'c GpuModel, Vec<GpuSlot>)> {
    let model = inventory
        .accelerators
        .iter()
        .find_map(|a| a.model.as_deref().and_then(|m| catalog.gpu(m)))?;
    let slots = inventory
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
    Some((model, slots))
}

/// Runs a `tessera agent` subcommand.
pub fn run(command: &AgentCommand, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    match command {
        AgentCommand::Discover(args) => discover(args),
        AgentCommand::Serve(args) => runtime.block_on(serve(args)),
        AgentCommand::Manifests(args) => manifests(args),
        AgentCommand::Cache(args) => runtime.block_on(crate::agent_cache::run(args)),
    }
}

/// NVML's report on the live machine; `None` (with a warning) where the driver is absent,
/// and not asked at all for a recorded tree (it would describe this machine instead).
fn nvml_report(root: &Path) -> Option<NvmlReport> {
    if root != Path::new("/") {
        return None;
    }
    match tessera_discovery::nvml::probe(None) {
        Ok(report) => {
            for warning in &report.warnings {
                eprintln!("warning: NVML: {warning}");
            }
            Some(report)
        }
        Err(reason) => {
            eprintln!("warning: {reason}; using sysfs alone");
            None
        }
    }
}

fn inventory(root: &Path) -> anyhow::Result<(Catalog, Inventory)> {
    let catalog = Catalog::built_in()?;
    let inventory = tessera_discovery::sysfs::discover(root, &catalog);
    for warning in &inventory.warnings {
        eprintln!("warning: {warning}");
    }
    Ok((catalog, inventory))
}

fn discover(args: &DiscoverArgs) -> anyhow::Result<()> {
    use std::fmt::Write;
    let mut out = String::new();
    let (catalog, inventory) = inventory(&args.root)?;
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
    if inventory.accelerators.is_empty() {
        writeln!(
            out,
            "no accelerators found (no GPU or other accelerator in {})",
            args.root.join("sys/bus/pci/devices").display()
        )?;
    } else {
        writeln!(out, "BUS ID\tVENDOR:DEVICE\tCLASS\tNUMA\tPCIE ROOT\tMODEL")?;
    }
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
    if let Some(report) = nvml_report(&args.root) {
        let cuda = report
            .cuda_version
            .map_or("-".into(), |(major, minor)| format!("{major}.{minor}"));
        writeln!(out, "NVML driver {} CUDA {cuda}", report.driver_version)?;
        writeln!(out, "INDEX\tUUID\tBUS ID\tNAME\tMEMORY\tMIG")?;
        for gpu in &report.gpus {
            let mig = match gpu.mig_enabled {
                Some(true) => "enabled",
                Some(false) => "disabled",
                None => "-",
            };
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}MiB\t{mig}",
                gpu.index, gpu.uuid, gpu.bus_id, gpu.name, gpu.memory_mib
            )?;
        }
        for (a, row) in report.links.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(ToString::to_string).collect();
            writeln!(out, "GPU{a}\t{}", cells.join("\t"))?;
        }
    }
    writeln!(out, "LABELS")?;
    for (key, value) in inventory.labels() {
        writeln!(out, "{key}={value}")?;
    }
    if let Some((model, slots)) = known_gpus(&inventory, &catalog) {
        writeln!(out, "RESOURCESLICES")?;
        for slice in nvidia_slices(&args.node_name, &slots, model, None) {
            writeln!(out, "{}", serde_json::to_string_pretty(&slice)?)?;
        }
    }
    crate::output::emit(&out)
}

fn manifests(args: &ManifestsArgs) -> anyhow::Result<()> {
    use tessera_node::agent_manifests::{AgentDeployment, Offer, manifests};
    let deployment = AgentDeployment {
        namespace: args.namespace.clone(),
        image: args.image.clone(),
        offer: match args.exposure {
            Exposure::DevicePlugin => Offer::DevicePlugin,
            Exposure::Dra => Offer::Dra,
        },
        node_selector: args.node_selector.clone(),
        node_policy: !args.no_node_policy,
    };
    let mut out = String::new();
    for object in manifests(&deployment) {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object).context("render YAML")?);
    }
    crate::output::emit(&out)
}

/// Links between discovered GPUs as PCIe alone tells them: one root complex, one NUMA node,
/// or across sockets (NVLink needs NVML).
fn pcie_topology(slots: &[GpuSlot]) -> GpuTopology {
    let link = |a: &GpuSlot, b: &GpuSlot| {
        if a.pcie_root == b.pcie_root && !a.pcie_root.is_empty() {
            Link::Pix
        } else if a.numa == b.numa {
            Link::Node
        } else {
            Link::Sys
        }
    };
    GpuTopology {
        links: slots
            .iter()
            .enumerate()
            .map(|(i, a)| {
                slots
                    .iter()
                    .enumerate()
                    .map(|(j, b)| if i == j { Link::Itself } else { link(a, b) })
                    .collect()
            })
            .collect(),
        numa: slots.iter().map(|s| Some(s.numa)).collect(),
    }
}

/// Marks GPUs unhealthy on the XID and ECC events NVML reports (NVIDIA's skip list of
/// application XIDs applies), on a thread of its own until `watching` turns false.
fn watch_health(plugin: GpuDevicePlugin, watching: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    std::thread::spawn(move || {
        let result = tessera_discovery::nvml::watch_health(
            None,
            1000,
            || watching.load(Ordering::Relaxed),
            |event| {
                let fatal = event.xid.is_none_or(|xid| {
                    tessera_discovery::nvml::fatal_xid(u32::try_from(xid).unwrap_or(u32::MAX))
                });
                tracing::warn!(gpu = ?event.uuid, what = %event.what, fatal, "GPU health event");
                if !fatal {
                    return;
                }
                match &event.uuid {
                    Some(uuid) => {
                        plugin.set_health(uuid, false);
                    }
                    None => {
                        for device in plugin.devices() {
                            plugin.set_health(&device.id, false);
                        }
                    }
                }
            },
        );
        if let Err(error) = result {
            tracing::warn!(%error, "GPU health watch stopped");
        }
    });
}

/// The host name as the kubelet names its node: trimmed and lower-cased.
fn host_name() -> anyhow::Result<String> {
    const HOSTNAME: &str = "/proc/sys/kernel/hostname";
    let name = std::fs::read_to_string(HOSTNAME)
        .with_context(|| format!("read the host name from {HOSTNAME}; pass --node-name"))?;
    let name = name.trim().to_lowercase();
    anyhow::ensure!(!name.is_empty(), "the host name is empty; pass --node-name");
    Ok(name)
}

async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let (catalog, inventory) = inventory(&args.root)?;
    let (model, slots) = known_gpus(&inventory, &catalog)
        .context("no GPU of a catalog model was found; nothing to serve")?;
    let poll = Duration::from_millis(args.poll_ms.max(10));
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    tracing::info!(model = %model.name, gpus = slots.len(), exposure = ?args.exposure, "serving GPUs");
    let nvml = nvml_report(&args.root);
    // NVML's view of each slot, matched by bus ID.
    let nvml_gpu = |slot: &GpuSlot| {
        nvml.as_ref()
            .and_then(|r| r.gpus.iter().position(|g| g.bus_id == slot.bus_id))
    };
    match args.exposure {
        Exposure::DevicePlugin => {
            // Device IDs are UUIDs where NVML reads them (deviceIDStrategy: uuid), else
            // indexes (deviceIDStrategy: index).
            let devices = slots
                .iter()
                .enumerate()
                .map(|(index, slot)| PluginDevice {
                    id: nvml_gpu(slot)
                        .and_then(|i| nvml.as_ref().map(|r| r.gpus[i].uuid.clone()))
                        .unwrap_or_else(|| index.to_string()),
                    index,
                    numa: Some(slot.numa),
                    healthy: true,
                })
                .collect();
            let mut topology = pcie_topology(&slots);
            if let Some(report) = &nvml {
                // NVLink only NVML sees.
                for (a, first) in slots.iter().enumerate() {
                    for (b, second) in slots.iter().enumerate() {
                        if let (Some(i), Some(j)) = (nvml_gpu(first), nvml_gpu(second)) {
                            topology.links[a][b] = report.links[i][j];
                        }
                    }
                }
            }
            let plugin = GpuDevicePlugin::new(
                DevicePluginSpec {
                    resource_name: "nvidia.com/gpu".into(),
                    visible_devices_env: "NVIDIA_VISIBLE_DEVICES".into(),
                    cdi_kind: "nvidia.com/gpu".into(),
                    topology,
                },
                devices,
            );
            let endpoint = DevicePluginEndpoint {
                dir: args.device_plugin_dir.clone(),
                socket_name: "nvidia-gpu.sock".into(),
                poll,
            };
            let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(nvml.is_some()));
            if nvml.is_some() {
                watch_health(plugin.clone(), watching.clone());
            }
            let result = lifecycle::run_device_plugin(plugin, endpoint, shutdown).await;
            watching.store(false, std::sync::atomic::Ordering::Relaxed);
            result?;
        }
        Exposure::Dra => {
            let client = crate::client::connect(&args.cluster).await?;
            let node_name = match &args.node_name {
                Some(name) => name.clone(),
                None => host_name()?,
            };
            tracing::info!(node = %node_name, "publishing this node's ResourceSlices");
            let slices = nvidia_slices(&node_name, &slots, model, None);
            tessera_twin::dra_publish::publish(&client, &nvidia_device_classes(), &slices)
                .await
                .context("publish ResourceSlices")?;
            let devices = (0..slots.len())
                .map(|minor| DraDevice {
                    name: format!("gpu-{minor}"),
                    edits: cdi::ContainerEdits {
                        env: vec![format!("NVIDIA_VISIBLE_DEVICES={minor}")],
                        device_nodes: vec![cdi::DeviceNode {
                            path: format!("/dev/nvidia{minor}"),
                        }],
                    },
                })
                .collect();
            let plugin_dir = args.plugins_dir.join(DRIVER);
            let (plugin, warning) = DraKubeletPlugin::new(
                DraPluginSpec {
                    driver: DRIVER.into(),
                    node_name,
                    cdi_dir: args.cdi_dir.clone(),
                    checkpoint_path: plugin_dir.join("checkpoint.json"),
                    devices,
                },
                ApiClaims(client),
            );
            if let Some(warning) = warning {
                eprintln!("warning: {warning}");
            }
            let endpoint = DraEndpoint {
                registry_dir: args.plugins_registry_dir.clone(),
                plugin_dir,
                poll,
            };
            let (_, socket) = lifecycle::dra_sockets(DRIVER, &endpoint);
            let registration = RegistrationService::dra(DRIVER, &socket);
            lifecycle::run_dra_plugin(plugin, registration, DRIVER, endpoint, shutdown).await?;
        }
    }
    Ok(())
}
