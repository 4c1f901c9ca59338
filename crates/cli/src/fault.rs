//! `tessera fault`: injects hardware and node faults into a running platform, and clears
//! them, by annotating the Node (`fault.tessera.dev/…`, see `tessera_node::faults`); the node
//! twin reacts as the hardware and kubelet would, the node lifecycle controller as upstream's.
//! The node and the GPU index are checked against what the API shows before anything is
//! written. A GPU's XID follows `tessera_node::faults::GpuHealth`: a GPU a fatal XID took
//! down stays down, whatever it reports later, until `fault clear`; clearing what is not
//! there succeeds and says so. A volume fault's `--kind` picks the mount error
//! (`tessera_storage::mount::MountFault`); which message the kubelet writes for it is the
//! core's. A registry fault (`tessera fault registry HOST --kind …`) annotates every node (or
//! the one `--node` names) with `tessera_node::images::registry_fault_key`; the twins' pulls
//! from that registry fail with containerd's message until `--clear` (or `fault clear`).

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Map, Value, json};
use tessera_node::faults::{Faults, GpuEvent, GpuHealth, MountFault, PREFIX, xid_description};

use crate::client::ClusterArgs;

/// `tessera fault` subcommands.
#[derive(Subcommand, Debug)]
pub enum FaultCommand {
    /// A GPU reports an XID error (79: fallen off the bus, 48: double-bit ECC, …).
    Xid(XidArgs),
    /// The node's NVLink fabric goes down.
    Nvlink(NodeArg),
    /// A network interface goes down.
    Nic(NicArgs),
    /// The node goes NotReady (kubelet up, runtime down) or unreachable (kubelet silent).
    Node(NodeStateArgs),
    /// Break one of the GPU operator's components on a node (`tessera up --gpu-operator`):
    /// a crash-looping pod, GPU feature discovery's labels gone, stale ResourceSlices.
    Operator(OperatorArgs),
    /// Volume mounts fail on the node: pods with claims wait in ContainerCreating with the
    /// kubelet's `FailedMount` event for the kind of failure.
    Volume(VolumeArgs),
    /// Image pulls from a registry fail (on every node, or on `--node`): unreachable or
    /// unauthorized, until `--clear`.
    Registry(RegistryArgs),
    /// Recover: clear one fault, or every fault of the node.
    Clear(ClearArgs),
}

/// How pulls from a registry fail (`tessera fault registry --kind`).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistryFaultKind {
    /// The registry does not answer (`dial tcp: lookup …: i/o timeout`).
    Unreachable,
    /// The registry refuses the pull (`pull access denied …`).
    Unauthorized,
}

/// Arguments of `tessera fault registry`.
#[derive(Args, Debug)]
pub struct RegistryArgs {
    /// The registry host as image references name it (`registry.lab:5000`, `docker.io`).
    pub host: String,
    /// How its pulls fail.
    #[arg(
        long,
        value_enum,
        default_value = "unreachable",
        conflicts_with = "clear"
    )]
    pub kind: RegistryFaultKind,
    /// Only on this node.
    #[arg(long)]
    pub node: Option<String>,
    /// Remove the fault instead.
    #[arg(long)]
    pub clear: bool,
}

/// Arguments of `tessera fault operator`: exactly one way to break it.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("break").required(true).multiple(false))]
pub struct OperatorArgs {
    /// The node name.
    pub node: String,
    /// The component (its DaemonSet) whose pod on the node crash-loops.
    #[arg(long, group = "break", value_parser = clap::builder::PossibleValuesParser::new(
        tessera_telemetry::operator::COMPONENTS.map(|c| c.name())))]
    pub crash_loop: Option<String>,
    /// GPU feature discovery's labels disappear from the node.
    #[arg(long, group = "break")]
    pub missing_labels: bool,
    /// The DRA driver leaves stale ResourceSlices of the node behind.
    #[arg(long, group = "break")]
    pub stale_slices: bool,
}

/// A node.
#[derive(Args, Debug)]
pub struct NodeArg {
    /// The node name.
    pub node: String,
}

/// How volume mounts fail (`tessera fault volume --kind`).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeFaultKind {
    /// The CSI node plugin's mount fails (`mount failed: exit status 32`).
    MountFailure,
    /// The kubelet may not create the volume's directory (`permission denied`).
    Permission,
    /// The volume's node-publish secret is missing (`secrets "…" not found`).
    MissingSecret,
    /// The node's disk is full (`no space left on device`).
    FullDisk,
    /// The data under the mount went stale (`stale NFS file handle`).
    StaleData,
}

impl VolumeFaultKind {
    /// The fault the node's annotation records.
    pub fn fault(self) -> MountFault {
        match self {
            VolumeFaultKind::MountFailure => MountFault::MountFailure,
            VolumeFaultKind::Permission => MountFault::Permission,
            VolumeFaultKind::MissingSecret => MountFault::MissingSecret,
            VolumeFaultKind::FullDisk => MountFault::FullDisk,
            VolumeFaultKind::StaleData => MountFault::StaleData,
        }
    }
}

/// Arguments of `tessera fault volume`.
#[derive(Args, Debug)]
pub struct VolumeArgs {
    /// The node name.
    pub node: String,
    /// How the mounts fail.
    #[arg(long, value_enum, default_value = "mount-failure")]
    pub kind: VolumeFaultKind,
}

/// Arguments of `tessera fault xid`.
#[derive(Args, Debug)]
pub struct XidArgs {
    /// The node name.
    pub node: String,
    /// The GPU index on the node.
    #[arg(long)]
    pub gpu: usize,
    /// The XID code.
    #[arg(long)]
    pub xid: u32,
}

/// Arguments of `tessera fault nic`.
#[derive(Args, Debug)]
pub struct NicArgs {
    /// The node name.
    pub node: String,
    /// The interface (`mlx5_0`).
    #[arg(long)]
    pub nic: String,
}

/// Node states.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum NodeState {
    /// The kubelet reports Ready=False.
    NotReady,
    /// The kubelet stops posting status and renewing its Lease.
    Unreachable,
}

/// Arguments of `tessera fault node`.
#[derive(Args, Debug)]
pub struct NodeStateArgs {
    /// The node name.
    pub node: String,
    /// What happens to it.
    #[arg(long, value_enum)]
    pub state: NodeState,
}

/// Arguments of `tessera fault clear`: every fault of the node, or the one flag names.
#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("only").multiple(false))]
pub struct ClearArgs {
    /// The node name.
    pub node: String,
    /// Only this GPU's XID.
    #[arg(long, group = "only")]
    pub gpu: Option<usize>,
    /// Only this NIC.
    #[arg(long, group = "only")]
    pub nic: Option<String>,
    /// Only the NVLink fault.
    #[arg(long, group = "only")]
    pub nvlink: bool,
    /// Only the node state.
    #[arg(long = "node-state", group = "only")]
    pub node_state: bool,
    /// Only the GPU operator's faults.
    #[arg(long, group = "only")]
    pub operator: bool,
    /// Only the volume mount fault.
    #[arg(long, group = "only")]
    pub volume: bool,
}

/// Runs a `tessera fault` subcommand.
pub async fn run(command: &FaultCommand, cluster: &ClusterArgs) -> anyhow::Result<()> {
    let client = crate::client::connect(cluster).await?;
    let nodes: Api<Node> = Api::all(client);
    let name = match command {
        FaultCommand::Registry(args) => return registry(&nodes, args).await,
        FaultCommand::Xid(a) => &a.node,
        FaultCommand::Nvlink(a) => &a.node,
        FaultCommand::Nic(a) => &a.node,
        FaultCommand::Node(a) => &a.node,
        FaultCommand::Operator(a) => &a.node,
        FaultCommand::Volume(a) => &a.node,
        FaultCommand::Clear(a) => &a.node,
    };
    let node = nodes
        .get_opt(name)
        .await?
        .with_context(|| format!("node {name:?} not found"))?;
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let mut changes = Map::new();
    let message = match command {
        // Answered above, without a node.
        FaultCommand::Registry(_) => return Ok(()),
        FaultCommand::Xid(args) => {
            let gpus: Option<usize> = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("nvidia.com/gpu.count"))
                .and_then(|c| c.parse().ok());
            match gpus {
                None => bail!("node {name} has no NVIDIA GPUs (no nvidia.com/gpu.count label)"),
                Some(count) if args.gpu >= count => bail!(
                    "--gpu {}: node {name} has {count} GPUs (0-{})",
                    args.gpu,
                    count - 1
                ),
                Some(_) => {}
            }
            let before = Faults::parse(&annotations).0.gpu_health(args.gpu);
            let after = before.next(GpuEvent::Xid(args.xid));
            if let Some(xid) = after.xid() {
                changes.insert(
                    format!("{PREFIX}gpu-{}", args.gpu),
                    json!(format!("xid-{xid}")),
                );
            }
            let what = match (before, after) {
                (GpuHealth::Down(first), _) => format!(
                    ": the GPU stays unhealthy (XID {first} took it down; `tessera fault clear \
                     {name} --gpu {}` recovers it)",
                    args.gpu
                ),
                (_, GpuHealth::Down(_)) => ": the GPU is now unhealthy".to_string(),
                _ => ": an application error, the GPU stays healthy".to_string(),
            };
            format!(
                "XID {} ({}) on GPU {} of {name}{what}",
                args.xid,
                xid_description(args.xid),
                args.gpu,
            )
        }
        FaultCommand::Nvlink(_) => {
            changes.insert(format!("{PREFIX}nvlink"), json!("down"));
            format!("NVLink down on {name}")
        }
        FaultCommand::Nic(args) => {
            changes.insert(format!("{PREFIX}nic-{}", args.nic), json!("down"));
            format!("{} down on {name}", args.nic)
        }
        FaultCommand::Node(args) => {
            let state = match args.state {
                NodeState::NotReady => "not-ready",
                NodeState::Unreachable => "unreachable",
            };
            changes.insert(format!("{PREFIX}node"), json!(state));
            format!("node {name} is now {state}")
        }
        FaultCommand::Volume(args) => {
            let fault = args.kind.fault();
            changes.insert(format!("{PREFIX}volume"), json!(fault.as_str()));
            format!("volume mounts fail on {name} ({})", fault.as_str())
        }
        FaultCommand::Operator(args) => {
            let (key, value, what) = match (&args.crash_loop, args.missing_labels) {
                (Some(component), _) => (
                    format!("operator-{component}"),
                    "crash-loop",
                    format!("{component} crash-loops on {name}"),
                ),
                (None, true) => (
                    "operator-labels".to_string(),
                    "missing",
                    format!("GPU feature discovery's labels are gone from {name}"),
                ),
                (None, false) => (
                    "operator-slices".to_string(),
                    "stale",
                    format!("the DRA driver leaves stale ResourceSlices of {name} behind"),
                ),
            };
            changes.insert(format!("{PREFIX}{key}"), json!(value));
            what
        }
        FaultCommand::Clear(args) => {
            let only = args
                .gpu
                .map(|g| format!("{PREFIX}gpu-{g}"))
                .or_else(|| args.nic.as_ref().map(|n| format!("{PREFIX}nic-{n}")))
                .or_else(|| args.nvlink.then(|| format!("{PREFIX}nvlink")))
                .or_else(|| args.node_state.then(|| format!("{PREFIX}node")))
                .or_else(|| args.operator.then(|| format!("{PREFIX}operator-")))
                .or_else(|| args.volume.then(|| format!("{PREFIX}volume")));
            // `operator-` names a family of keys; the others one key each.
            let chosen = |key: &str, only: &str| {
                key == only || (only.ends_with('-') && key.starts_with(only))
            };
            for key in annotations.keys().filter(|k| k.starts_with(PREFIX)) {
                if only.as_ref().is_none_or(|o| chosen(key, o)) {
                    changes.insert(key.clone(), Value::Null);
                }
            }
            if changes.is_empty() {
                // Clearing is idempotent: a healthy node is what was asked for.
                let what = only.map_or_else(
                    || "no faults".to_string(),
                    |key| {
                        format!(
                            "no {} fault",
                            key.trim_start_matches(PREFIX).trim_end_matches('-')
                        )
                    },
                );
                crate::output::emit(&format!("{name} has {what}: nothing to clear\n"))?;
                return Ok(());
            }
            format!("cleared {} fault(s) on {name}", changes.len())
        }
    };
    if !changes.is_empty() {
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": changes}})),
            )
            .await?;
    }
    crate::output::emit(&format!("{message}\n"))
}

/// `tessera fault registry`: annotates the nodes (or removes the annotation).
async fn registry(nodes: &Api<Node>, args: &RegistryArgs) -> anyhow::Result<()> {
    let host = args.host.trim();
    if host.is_empty() || host.contains('/') || host.contains(char::is_whitespace) {
        bail!("registry host {host:?}: expected a host or host:port, as image references name it");
    }
    let names: Vec<String> = match &args.node {
        Some(name) => {
            nodes
                .get_opt(name)
                .await?
                .with_context(|| format!("node {name:?} not found"))?;
            vec![name.clone()]
        }
        None => nodes
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect(),
    };
    let key = tessera_node::images::registry_fault_key(host);
    let fault = match args.kind {
        RegistryFaultKind::Unreachable => tessera_node::images::RegistryFault::Unreachable,
        RegistryFaultKind::Unauthorized => tessera_node::images::RegistryFault::Unauthorized,
    };
    let value = if args.clear {
        Value::Null
    } else {
        json!(fault.as_str())
    };
    for name in &names {
        nodes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {key.clone(): value.clone()}}})),
            )
            .await?;
    }
    let message = if args.clear {
        format!("pulls from {host} work again on {} node(s)\n", names.len())
    } else {
        format!(
            "pulls from {host} fail ({}) on {} node(s)\n",
            fault.as_str(),
            names.len()
        )
    };
    crate::output::emit(&message)
}
