//! `tessera explain pod NAMESPACE/NAME`: reads the cluster (nodes, pods, claims, slices,
//! classes) and prints, from the scheduler core, every node's verdict per filter, what the
//! pod's claims find on each node, and the smallest changes that would let it fit.
//! `tessera explain workload NAMESPACE/NAME`: reads Kueue's objects and prints, from the
//! queueing core (`tessera_queue::api::explain`), why the Workload waits.

use anyhow::Context;
use clap::{Args, Subcommand};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};
use kube::Api;

/// `tessera explain` subcommands.
#[derive(Subcommand, Debug)]
pub enum ExplainCommand {
    /// Why a pod is (or would be) placed where it is, node by node.
    Pod(PodArgs),
    /// Why a Kueue Workload waits: its queue and position, the resource it is short of in
    /// each flavor and who borrows it, and what preemption could free.
    Workload(WorkloadArgs),
}

/// Arguments of `tessera explain workload`.
#[derive(Args, Debug)]
pub struct WorkloadArgs {
    /// `NAMESPACE/NAME` (or `NAME` in `default`).
    pub workload: String,
}

/// Arguments of `tessera explain pod`.
#[derive(Args, Debug)]
pub struct PodArgs {
    /// `NAMESPACE/NAME` (or `NAME` in `default`).
    pub pod: String,
}

/// Every object of a kind, in every namespace.
pub(crate) async fn list<K>(client: &kube::Client) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned,
{
    Ok(Api::<K>::all(client.clone())
        .list(&Default::default())
        .await?
        .items)
}

/// Every object of a kind, as JSON (VolumeBinding's input).
async fn values<K>(client: &kube::Client) -> anyhow::Result<Vec<serde_json::Value>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned,
{
    Ok(list::<K>(client)
        .await?
        .iter()
        .filter_map(|object| serde_json::to_value(object).ok())
        .collect())
}

/// Runs `tessera explain`.
pub async fn run(
    command: &ExplainCommand,
    cluster: &crate::client::ClusterArgs,
) -> anyhow::Result<()> {
    let client = crate::client::connect(cluster).await?;
    let args = match command {
        ExplainCommand::Pod(args) => args,
        ExplainCommand::Workload(args) => return workload(&client, &args.workload).await,
    };
    let (namespace, name) = args.pod.split_once('/').unwrap_or(("default", &args.pod));
    let pod = Api::<Pod>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await?
        .with_context(|| format!("pod {namespace}/{name} not found"))?;
    let nodes: Vec<Node> = list(&client).await?;
    let pods: Vec<Pod> = list(&client).await?;
    let claims: Vec<ResourceClaim> = list(&client).await?;
    let slices: Vec<ResourceSlice> = list(&client).await?;
    let classes: Vec<DeviceClass> = list(&client).await?;
    let volumes = tessera_scheduler::volumes::Volumes {
        claims: values::<PersistentVolumeClaim>(&client).await?,
        volumes: values::<PersistentVolume>(&client).await?,
        classes: values::<StorageClass>(&client).await?,
        csi_drivers: values::<CSIDriver>(&client).await?,
        capacities: values::<CSIStorageCapacity>(&client).await?,
    };
    let explanation = tessera_scheduler::explain::explain_in_cluster_with_volumes(
        &pod,
        &nodes,
        &pods,
        &claims,
        &slices,
        &classes,
        Some(volumes),
    );
    crate::output::emit(&explanation.render(&format!("{namespace}/{name}")))
}

/// `tessera explain workload`.
async fn workload(client: &kube::Client, target: &str) -> anyhow::Result<()> {
    let (namespace, name) = target.split_once('/').unwrap_or(("default", target));
    let objects = crate::queue_cmd::kueue_objects(client).await?;
    let lines = tessera_queue::api::explain::workload(
        &objects,
        namespace,
        name,
        std::time::SystemTime::now(),
    )
    .with_context(|| format!("workload {namespace}/{name} not found"))?;
    crate::output::emit(&(lines.join("\n") + "\n"))
}
