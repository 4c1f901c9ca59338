//! Controller shells for ReplicaSets and Deployments: watch, ask the cores
//! ([`tessera_workloads::replicaset::plan`], [`tessera_workloads::deployment::plan`]) and apply their plans.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::shell::ReconcileError;
use tessera_workloads::{daemonset, deployment, replicaset, statefulset};

/// The field manager these controllers write as.
pub const MANAGER: &str = "tessera-apps-controller";

struct Context {
    client: Client,
}

fn params() -> PatchParams {
    crate::shell::patch_params(MANAGER)
}

fn post() -> PostParams {
    crate::shell::post_params(MANAGER)
}

fn ignore_missing<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

/// The `key=value,…` form of a selector's matchLabels.
fn selector_string(selector: Option<&Value>) -> String {
    selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// Objects of a list whose controller reference is the owner's UID.
fn owned_by<K: serde::Serialize + Resource>(
    items: &[K],
    owner_uid: &str,
) -> Result<Vec<Value>, serde_json::Error> {
    let mut owned = Vec::new();
    for item in items {
        let controlled = item
            .meta()
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.uid == owner_uid);
        if controlled {
            owned.push(serde_json::to_value(item)?);
        }
    }
    Ok(owned)
}

/// Runs the ReplicaSet, Deployment, DaemonSet and StatefulSet controllers until the task is
/// dropped.
pub async fn run(client: Client) {
    let context = Arc::new(Context {
        client: client.clone(),
    });
    let replica_sets = Controller::new(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
    .run(
        reconcile_replica_set,
        crate::shell::retry_soon,
        context.clone(),
    )
    .for_each(|_| async {});
    let deployments = Controller::new(
        Api::<Deployment>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .run(
        reconcile_deployment,
        crate::shell::retry_soon,
        context.clone(),
    )
    .for_each(|_| async {});
    let daemon_sets = Controller::new(
        Api::<DaemonSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
    .run(
        reconcile_daemon_set,
        crate::shell::retry_soon,
        context.clone(),
    )
    .for_each(|_| async {});
    let stateful_sets = Controller::new(
        Api::<StatefulSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client), watcher::Config::default())
    .run(reconcile_stateful_set, crate::shell::retry_soon, context)
    .for_each(|_| async {});
    futures::join!(replica_sets, deployments, daemon_sets, stateful_sets);
}

async fn reconcile_daemon_set(
    ds: Arc<DaemonSet>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = ds.namespace().unwrap_or_default();
    let value = serde_json::to_value(ds.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Action::await_change());
    }
    let nodes: Vec<Value> = Api::<Node>::all(context.client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods
        .list(&ListParams::default().labels(&selector_string(value.pointer("/spec/selector"))))
        .await?;
    let owned = owned_by(&listed.items, &ds.uid().unwrap_or_default())?;
    let plan = daemonset::plan(&value, &nodes, &owned);
    for name in &plan.delete {
        ignore_missing(pods.delete(name, &DeleteParams::default()).await)?;
    }
    for node in &plan.create_on {
        let pod: Pod = serde_json::from_value(daemonset::pod_for(&value, node))?;
        pods.create(&post(), &pod).await?;
    }
    if value.get("status") != Some(&plan.status) {
        let api: Api<DaemonSet> = Api::namespaced(context.client.clone(), &namespace);
        ignore_missing(
            api.patch_status(
                &ds.name_any(),
                &params(),
                &Patch::Merge(&json!({"status": plan.status})),
            )
            .await,
        )?;
    }
    // Nodes come and go without touching the DaemonSet: look again regularly.
    Ok(Action::requeue(Duration::from_secs(5)))
}

async fn reconcile_stateful_set(
    set: Arc<StatefulSet>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = set.namespace().unwrap_or_default();
    let value = serde_json::to_value(set.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods
        .list(&ListParams::default().labels(&selector_string(value.pointer("/spec/selector"))))
        .await?;
    let owned = owned_by(&listed.items, &set.uid().unwrap_or_default())?;
    let plan = statefulset::plan(&value, &owned);
    for name in &plan.delete {
        ignore_missing(pods.delete(name, &DeleteParams::default()).await)?;
    }
    for ordinal in &plan.create {
        let pod: Pod = serde_json::from_value(statefulset::pod_for(&value, *ordinal))?;
        match pods.create(&post(), &pod).await {
            Ok(_) => {}
            // The previous pod of this ordinal is still terminating.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    if value.get("status") != Some(&plan.status) {
        let api: Api<StatefulSet> = Api::namespaced(context.client.clone(), &namespace);
        ignore_missing(
            api.patch_status(
                &set.name_any(),
                &params(),
                &Patch::Merge(&json!({"status": plan.status})),
            )
            .await,
        )?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

async fn reconcile_replica_set(
    rs: Arc<ReplicaSet>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = rs.namespace().unwrap_or_default();
    let value = serde_json::to_value(rs.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Action::await_change());
    }
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let selector = selector_string(value.pointer("/spec/selector"));
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    let owned = owned_by(&listed.items, &rs.uid().unwrap_or_default())?;
    let plan = replicaset::plan(&value, &owned, SystemTime::now());
    for name in &plan.delete {
        ignore_missing(pods.delete(name, &DeleteParams::default()).await)?;
    }
    for _ in 0..plan.create {
        let pod: Pod = serde_json::from_value(replicaset::pod_from_template(
            &value,
            "apps/v1",
            "ReplicaSet",
            &format!("{}-", rs.name_any()),
        ))?;
        pods.create(&post(), &pod).await?;
    }
    if value.get("status") != Some(&plan.status) {
        let api: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
        ignore_missing(
            api.patch_status(
                &rs.name_any(),
                &params(),
                &Patch::Merge(&json!({"status": plan.status})),
            )
            .await,
        )?;
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::requeue(Duration::from_secs(60)),
    })
}

async fn reconcile_deployment(
    deployment_object: Arc<Deployment>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = deployment_object.namespace().unwrap_or_default();
    let value = serde_json::to_value(deployment_object.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Action::await_change());
    }
    let api: Api<ReplicaSet> = Api::namespaced(context.client.clone(), &namespace);
    let listed = api.list(&ListParams::default()).await?;
    let owned = owned_by(&listed.items, &deployment_object.uid().unwrap_or_default())?;
    let plan = deployment::plan(&value, &owned, SystemTime::now());
    if let Some(new) = &plan.create {
        let rs: ReplicaSet = serde_json::from_value(new.clone())?;
        match api.create(&post(), &rs).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => return Err(error.into()),
        }
    }
    for (name, replicas) in &plan.scale {
        ignore_missing(
            api.patch(
                name,
                &params(),
                &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
            )
            .await,
        )?;
    }
    for name in &plan.delete {
        ignore_missing(api.delete(name, &DeleteParams::default()).await)?;
    }
    if value.get("status") != Some(&plan.status) {
        let deployments: Api<Deployment> = Api::namespaced(context.client.clone(), &namespace);
        ignore_missing(
            deployments
                .patch_status(
                    &deployment_object.name_any(),
                    &params(),
                    &Patch::Merge(&json!({"status": plan.status})),
                )
                .await,
        )?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}
