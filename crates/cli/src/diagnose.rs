//! `tessera diagnose pending|device-loss|node-notready|operator`: lists what a runbook reads
//! (nodes, pods, events, leases, DaemonSets, DRA objects, Kueue Workloads when Kueue is
//! served), runs the runbook in `tessera-diagnose` (core) with the time, and prints what it
//! found and the next steps. `--exit-code` makes a finding of a problem exit 1.

use clap::{Args, Subcommand};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use tessera_diagnose::Cluster;

use crate::explain::list;

/// `tessera diagnose` subcommands.
#[derive(Subcommand, Debug)]
pub enum DiagnoseCommand {
    /// Why pods stay Pending: gates, the scheduler's verdict, GPU shortfalls, controllers
    /// that cannot create pods, Kueue workloads without quota.
    Pending(PendingArgs),
    /// GPUs a node lost (XIDs, unhealthy devices, tainted DRA devices) and how to recover.
    DeviceLoss(NodeArgs),
    /// Nodes that are not Ready: since when, why, and when their pods are evicted.
    NodeNotready(NodeArgs),
    /// The GPU operator's components, GPU feature discovery labels, stale ResourceSlices
    /// and failed driver upgrades.
    Operator(OperatorArgs),
}

/// Arguments of `tessera diagnose pending`.
#[derive(Args, Debug)]
pub struct PendingArgs {
    /// `NAMESPACE/NAME` (or `NAME` in `default`); every pending pod when left out.
    pub pod: Option<String>,
}

/// Arguments of the node runbooks.
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The node; every node when left out.
    pub node: Option<String>,
}

/// Arguments of `tessera diagnose operator`.
#[derive(Args, Debug)]
pub struct OperatorArgs {
    /// The namespaces of the operator's components (repeatable).
    #[arg(long = "namespace", short = 'n', default_values_t = tessera_diagnose::operator::DEFAULT_NAMESPACES.map(String::from))]
    pub namespaces: Vec<String>,
}

/// Arguments of `tessera diagnose`.
#[derive(Args, Debug)]
pub struct DiagnoseArgs {
    #[command(subcommand)]
    pub command: DiagnoseCommand,
    /// Exit with status 1 when a problem is found (for scripts and alerts).
    #[arg(long, global = true)]
    pub exit_code: bool,
    #[command(flatten)]
    pub cluster: crate::client::ClusterArgs,
}

async fn snapshot(client: &kube::Client) -> anyhow::Result<Cluster> {
    Ok(Cluster {
        nodes: list::<Node>(client).await?,
        pods: list::<Pod>(client).await?,
        events: list::<Event>(client).await?,
        leases: list::<Lease>(client).await?,
        daemonsets: list::<DaemonSet>(client).await?,
        claims: list::<ResourceClaim>(client).await?,
        slices: list::<ResourceSlice>(client).await?,
        classes: list::<DeviceClass>(client).await?,
    })
}

/// Runs a runbook; `Ok(false)` when `--exit-code` asks for failure.
pub async fn run(args: &DiagnoseArgs) -> anyhow::Result<bool> {
    let client = crate::client::connect(&args.cluster).await?;
    let cluster = snapshot(&client).await?;
    let now = std::time::SystemTime::now();
    let report = match &args.command {
        DiagnoseCommand::Pending(pending) => {
            // A cluster without Kueue has no Workloads to wait for quota.
            let workloads = crate::queue_cmd::workloads(&client)
                .await
                .unwrap_or_default();
            let target = pending
                .pod
                .as_deref()
                .map(|p| p.split_once('/').unwrap_or(("default", p)));
            tessera_diagnose::pending(&cluster, &workloads, target, now)
        }
        DiagnoseCommand::DeviceLoss(node) => {
            tessera_diagnose::device_loss(&cluster, node.node.as_deref())
        }
        DiagnoseCommand::NodeNotready(node) => {
            tessera_diagnose::node_notready(&cluster, node.node.as_deref(), now)
        }
        DiagnoseCommand::Operator(operator) => {
            let namespaces: Vec<&str> = operator.namespaces.iter().map(String::as_str).collect();
            tessera_diagnose::operator(&cluster, &namespaces)
        }
    };
    crate::output::emit(&report.render())?;
    Ok(!args.exit_code || report.problems() == 0)
}
