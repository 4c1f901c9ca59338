//! `tessera queue list|stop|resume`, in kueuectl's spirit: `list clusterqueues|localqueues|
//! workloads` with kueuectl's columns (pending and admitted counts from the queues'
//! statuses, a Workload's status and its position in its LocalQueue from the visibility
//! API), `stop|resume clusterqueue|localqueue NAME [--keep-already-running]` (`spec.stopPolicy`
//! Hold or HoldAndDrain, removed on resume) and `stop|resume workload NAME` (`spec.active`).
//!
//! A thin client: it reads and patches Kueue's objects and prints; the queue manager (`tessera
//! up` or `tessera queue --kubeconfig`) does the rest.

use std::time::SystemTime;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::kueue::{GROUP, STORAGE_VERSION};
use tessera_queue::api::{objects, visibility};

/// `tessera queue` subcommands; none runs the queue manager.
#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// List ClusterQueues, LocalQueues or Workloads with kueuectl's columns.
    List(ListArgs),
    /// Stop a ClusterQueue or LocalQueue (no new admissions; running Workloads are evicted
    /// unless --keep-already-running), or a Workload (spec.active=false).
    Stop(TargetArgs),
    /// Resume a stopped ClusterQueue, LocalQueue or Workload.
    Resume(TargetArgs),
}

/// What `list` lists.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// ClusterQueues.
    #[value(alias = "clusterqueue", alias = "cq")]
    Clusterqueues,
    /// LocalQueues.
    #[value(alias = "localqueue", alias = "lq")]
    Localqueues,
    /// Workloads.
    #[value(alias = "workload", alias = "wl")]
    Workloads,
}

/// Arguments of `tessera queue list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// What to list.
    pub kind: ListKind,
    /// The namespace (LocalQueues and Workloads).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

/// What `stop` and `resume` act on.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A ClusterQueue.
    #[value(alias = "clusterqueues", alias = "cq")]
    Clusterqueue,
    /// A LocalQueue.
    #[value(alias = "localqueues", alias = "lq")]
    Localqueue,
    /// A Workload.
    #[value(alias = "workloads", alias = "wl")]
    Workload,
}

/// Arguments of `tessera queue stop|resume`.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// What to stop or resume.
    pub kind: TargetKind,
    /// Its name.
    pub name: String,
    /// The namespace (LocalQueues and Workloads).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Stop only new admissions; admitted Workloads keep running (stopPolicy Hold instead of
    /// HoldAndDrain).
    #[arg(long)]
    pub keep_already_running: bool,
}

fn kueue_api(
    client: &Client,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, STORAGE_VERSION, kind),
        plural,
    );
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn list_objects(api: &Api<DynamicObject>) -> anyhow::Result<Vec<Value>> {
    let list = api.list(&ListParams::default()).await?;
    list.items
        .into_iter()
        .map(|o| serde_json::to_value(o).context("encode object"))
        .collect()
}

/// Kueue's Workloads in every namespace, in the stored version.
pub async fn workloads(client: &Client) -> anyhow::Result<Vec<Value>> {
    list_objects(&kueue_api(client, "Workload", "workloads", None)).await
}

/// Kueue's objects (and the namespaces) as the queue core reads them, listed in the stored
/// version.
pub async fn kueue_objects(
    client: &Client,
) -> anyhow::Result<tessera_queue::api::objects::Objects> {
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|ns| serde_json::to_value(ns).ok())
        .collect();
    Ok(objects::Objects {
        flavors: list_objects(&kueue_api(
            client,
            "ResourceFlavor",
            "resourceflavors",
            None,
        ))
        .await?,
        cluster_queues: list_objects(&kueue_api(client, "ClusterQueue", "clusterqueues", None))
            .await?,
        cohorts: list_objects(&kueue_api(client, "Cohort", "cohorts", None)).await?,
        local_queues: list_objects(&kueue_api(client, "LocalQueue", "localqueues", None)).await?,
        workloads: objects::shared(
            list_objects(&kueue_api(client, "Workload", "workloads", None)).await?,
        ),
        topologies: list_objects(&kueue_api(client, "Topology", "topologies", None)).await?,
        namespaces,
        ..Default::default()
    })
}

/// Runs `tessera queue <command>`.
pub async fn run(command: &QueueCommand, client: Client) -> anyhow::Result<()> {
    let text = match command {
        QueueCommand::List(args) => list(args, &client).await?,
        QueueCommand::Stop(args) => set_running(args, &client, false).await?,
        QueueCommand::Resume(args) => set_running(args, &client, true).await?,
    };
    crate::output::emit(&text)
}

async fn list(args: &ListArgs, client: &Client) -> anyhow::Result<String> {
    let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
    let now = SystemTime::now();
    let text = |object: &Value, pointer: &str| -> String {
        match object.pointer(pointer) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let count = |object: &Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .to_string()
    };
    let (mut headers, mut rows): (Vec<&str>, Vec<Vec<String>>) = match args.kind {
        ListKind::Clusterqueues => {
            let objects =
                list_objects(&kueue_api(client, "ClusterQueue", "clusterqueues", None)).await?;
            let rows = objects
                .iter()
                .map(|cq| {
                    vec![
                        text(cq, "/metadata/name"),
                        text(cq, "/spec/cohortName"),
                        count(cq, "/status/pendingWorkloads"),
                        count(cq, "/status/admittedWorkloads"),
                        is_active(cq).to_string(),
                        age(cq, now),
                    ]
                })
                .collect();
            (
                vec![
                    "NAME",
                    "COHORT",
                    "PENDING WORKLOADS",
                    "ADMITTED WORKLOADS",
                    "ACTIVE",
                    "AGE",
                ],
                rows,
            )
        }
        ListKind::Localqueues => {
            let objects =
                list_objects(&kueue_api(client, "LocalQueue", "localqueues", namespace)).await?;
            let rows = objects
                .iter()
                .map(|lq| {
                    vec![
                        text(lq, "/metadata/namespace"),
                        text(lq, "/metadata/name"),
                        text(lq, "/spec/clusterQueue"),
                        count(lq, "/status/pendingWorkloads"),
                        count(lq, "/status/admittedWorkloads"),
                        age(lq, now),
                    ]
                })
                .collect();
            (
                vec![
                    "NAMESPACE",
                    "NAME",
                    "CLUSTERQUEUE",
                    "PENDING WORKLOADS",
                    "ADMITTED WORKLOADS",
                    "AGE",
                ],
                rows,
            )
        }
        ListKind::Workloads => {
            let workloads =
                list_objects(&kueue_api(client, "Workload", "workloads", namespace)).await?;
            let local_queues =
                list_objects(&kueue_api(client, "LocalQueue", "localqueues", namespace)).await?;
            let mut rows = Vec::new();
            for wl in &workloads {
                let local_queue = text(wl, "/spec/queueName");
                let wl_namespace = text(wl, "/metadata/namespace");
                let cluster_queue = match text(wl, "/status/admission/clusterQueue") {
                    admitted if !admitted.is_empty() => admitted,
                    _ => local_queues
                        .iter()
                        .find(|lq| {
                            text(lq, "/metadata/namespace") == wl_namespace
                                && text(lq, "/metadata/name") == local_queue
                        })
                        .map(|lq| text(lq, "/spec/clusterQueue"))
                        .unwrap_or_default(),
                };
                let status = workload_status(wl);
                let position = if status == "pending" {
                    position_in_local_queue(
                        client,
                        &wl_namespace,
                        &local_queue,
                        &text(wl, "/metadata/name"),
                    )
                    .await
                } else {
                    None
                };
                let owners = wl
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let join = |field: &str| {
                    owners
                        .iter()
                        .map(|o| {
                            let value = text(o, field);
                            if field == "/kind" { job_type(o) } else { value }
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                rows.push(vec![
                    wl_namespace.clone(),
                    text(wl, "/metadata/name"),
                    join("/kind"),
                    join("/name"),
                    local_queue,
                    cluster_queue,
                    status.to_ascii_uppercase(),
                    position.map(|p| p.to_string()).unwrap_or_default(),
                    exec_time(wl, now),
                    age(wl, now),
                ]);
            }
            (
                vec![
                    "NAMESPACE",
                    "NAME",
                    "JOB TYPE",
                    "JOB NAME",
                    "LOCALQUEUE",
                    "CLUSTERQUEUE",
                    "STATUS",
                    "POSITION IN QUEUE",
                    "EXEC TIME",
                    "AGE",
                ],
                rows,
            )
        }
    };
    if args.kind != ListKind::Clusterqueues && !args.all_namespaces {
        headers.remove(0);
        for row in &mut rows {
            row.remove(0);
        }
    }
    if rows.is_empty() {
        return Ok(String::new());
    }
    Ok(crate::output::table(&headers, &rows))
}

fn is_active(object: &Value) -> bool {
    tessera_model::conditions::is_true(object, "Active")
}

fn timestamp(object: &Value, pointer: &str) -> Option<SystemTime> {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .and_then(tessera_model::time::parse_timestamp)
}

fn seconds_between(from: SystemTime, to: SystemTime) -> i64 {
    to.duration_since(from)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn age(object: &Value, now: SystemTime) -> String {
    timestamp(object, "/metadata/creationTimestamp")
        .map(|created| tessera_api::table::human_duration(seconds_between(created, now)))
        .unwrap_or_else(|| "<unknown>".to_owned())
}

/// `workload.Status`: finished, admitted, quotaReserved or pending.
fn workload_status(workload: &Value) -> &'static str {
    use tessera_model::conditions::is_true;
    if is_true(workload, "Finished") {
        "finished"
    } else if is_true(workload, "Admitted") {
        "admitted"
    } else if is_true(workload, "QuotaReserved") {
        "quotaReserved"
    } else {
        "pending"
    }
}

/// How long an admitted Workload has run (until it finished).
fn exec_time(workload: &Value, now: SystemTime) -> String {
    let transition = |kind: &str| {
        tessera_model::conditions::find(workload, kind)
            .filter(|c| c["status"] == "True")
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(tessera_model::time::parse_timestamp)
    };
    let Some(admitted) = transition("Admitted") else {
        return String::new();
    };
    let end = transition("Finished").unwrap_or(now);
    tessera_api::table::human_duration(seconds_between(admitted, end))
}

/// The owner's resource type as kueuectl prints it (`<singular>`, the group left out for
/// built-in groups as discovery lists them): `job`.
fn job_type(owner: &Value) -> String {
    owner["kind"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// A pending Workload's position in its LocalQueue, from the visibility API.
async fn position_in_local_queue(
    client: &Client,
    namespace: &str,
    local_queue: &str,
    name: &str,
) -> Option<usize> {
    let path = format!(
        "/apis/{}/{}/namespaces/{namespace}/localqueues/{local_queue}/{}",
        visibility::GROUP,
        visibility::VERSIONS[0],
        visibility::SUBRESOURCE
    );
    let request = http::Request::get(path).body(Vec::new()).ok()?;
    let summary: Value = client.request(request).await.ok()?;
    summary["items"]
        .as_array()?
        .iter()
        .find(|item| item["metadata"]["name"] == name)
        .and_then(|item| item["positionInLocalQueue"].as_u64())
        .and_then(|p| usize::try_from(p).ok())
}

/// `stop` and `resume`: kueuectl's merge patches and its one-line report.
async fn set_running(args: &TargetArgs, client: &Client, running: bool) -> anyhow::Result<String> {
    let (api, kind, patch) = match args.kind {
        TargetKind::Clusterqueue => (
            kueue_api(client, "ClusterQueue", "clusterqueues", None),
            "clusterqueue",
            json!({"spec": {"stopPolicy": stop_policy(running, args.keep_already_running)}}),
        ),
        TargetKind::Localqueue => (
            kueue_api(client, "LocalQueue", "localqueues", Some(&args.namespace)),
            "localqueue",
            json!({"spec": {"stopPolicy": stop_policy(running, args.keep_already_running)}}),
        ),
        TargetKind::Workload => (
            kueue_api(client, "Workload", "workloads", Some(&args.namespace)),
            "workload",
            json!({"spec": {"active": running}}),
        ),
    };
    api.patch(&args.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("{kind} {}", args.name))?;
    let verb = if running { "resumed" } else { "stopped" };
    Ok(format!("{kind}.{GROUP}/{} {verb}\n", args.name))
}

/// `spec.stopPolicy` for stop (Hold with --keep-already-running, HoldAndDrain without) and
/// resume (None).
fn stop_policy(running: bool, keep_already_running: bool) -> &'static str {
    match (running, keep_already_running) {
        (true, _) => "None",
        (false, true) => "Hold",
        (false, false) => "HoldAndDrain",
    }
}
