//! Controller shells for ReplicaSets, Deployments, DaemonSets and StatefulSets: watch, ask the
//! cores ([`tessera_workloads::replicaset::plan`], [`tessera_workloads::deployment::plan`],
//! [`tessera_workloads::daemonset::plan`], [`tessera_workloads::statefulset::plan`]) and carry
//! their plans out with [`crate::shell::apply`].
//!
//! Knows how to list what an owner owns and when to look again; decides nothing itself.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{ApiResource, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tessera_model::clock::Clock;

use crate::shell::{Owner, ReconcileError, Tolerated, apply, owned_by};
use crate::workqueue::counted;
use tessera_workloads::{daemonset, deployment, replicaset, statefulset};

/// The field manager these controllers write as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

struct Context {
    client: Client,
    clock: Clock,
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

/// Runs the ReplicaSet, Deployment, DaemonSet and StatefulSet controllers until the task is
/// dropped, reading the time from `clock` and recording their reconciliations in `metrics`
/// (queues `replicaset`, `deployment`, `daemonset`, `statefulset`).
pub async fn run(
    client: Client,
    clock: Clock,
    metrics: Option<Arc<tessera_metrics::components::Registries>>,
) {
    use tessera_metrics::controllers::queue_name::{
        DAEMONSET, DEPLOYMENT, REPLICASET, STATEFULSET,
    };
    let metrics = metrics.as_deref();
    let context = Arc::new(Context {
        client: client.clone(),
        clock: clock.clone(),
    });
    let replica_sets = Controller::new(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client.clone()), watcher::Config::default())
    .run(
        counted(metrics, REPLICASET, clock.clone(), reconcile_replica_set),
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
        counted(metrics, DEPLOYMENT, clock.clone(), reconcile_deployment),
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
        counted(metrics, DAEMONSET, clock.clone(), reconcile_daemon_set),
        crate::shell::retry_soon,
        context.clone(),
    )
    .for_each(|_| async {});
    let stateful_sets = Controller::new(
        Api::<StatefulSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .owns(Api::<Pod>::all(client), watcher::Config::default())
    .run(
        counted(metrics, STATEFULSET, clock.clone(), reconcile_stateful_set),
        crate::shell::retry_soon,
        context,
    )
    .for_each(|_| async {});
    futures::join!(replica_sets, deployments, daemon_sets, stateful_sets);
}

/// A 404 on a deletion, patch or status: the object is gone already.
const TOLERATED: Tolerated = Tolerated {
    create: &[],
    change: &[404],
    status: &[404],
};

/// As [`TOLERATED`], and a 409 on a creation: the object is there already (a StatefulSet's
/// previous pod of an ordinal still terminating, a claim its watch has not shown yet, a
/// Deployment's ReplicaSet created before).
const TOLERATED_NAMED: Tolerated = Tolerated {
    create: &[409],
    ..TOLERATED
};

/// The owner whose status a plan writes.
fn owner<'a>(resource: &'a ApiResource, namespace: &'a str, name: &'a str) -> Owner<'a> {
    Owner {
        resource,
        namespace,
        name,
    }
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
    let writes = daemonset::plan(&value, &nodes, &owned).writes(&value);
    let resource = ApiResource::erase::<DaemonSet>(&());
    let name = ds.name_any();
    let owner = owner(&resource, &namespace, &name);
    apply(&context.client, owner, writes, MANAGER, TOLERATED).await?;
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
    let selector = selector_string(value.pointer("/spec/selector"));
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods.list(&ListParams::default().labels(&selector)).await?;
    let owned = owned_by(&listed.items, &set.uid().unwrap_or_default())?;
    // The claims of its templates carry the set's selector labels.
    let claims: Vec<Value> = if value
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
        Api::<PersistentVolumeClaim>::namespaced(context.client.clone(), &namespace)
            .list(&ListParams::default().labels(&selector))
            .await?
            .items
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let writes = statefulset::plan(&value, &owned, &claims).writes(&value);
    let resource = ApiResource::erase::<StatefulSet>(&());
    let name = set.name_any();
    let owner = owner(&resource, &namespace, &name);
    apply(&context.client, owner, writes, MANAGER, TOLERATED_NAMED).await?;
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
    let plan = replicaset::plan(&value, &owned, (context.clock)());
    let requeue_after = plan.requeue_after;
    let resource = ApiResource::erase::<ReplicaSet>(&());
    let name = rs.name_any();
    let owner = owner(&resource, &namespace, &name);
    apply(
        &context.client,
        owner,
        plan.writes(&value),
        MANAGER,
        TOLERATED,
    )
    .await?;
    Ok(match requeue_after {
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
    let writes = deployment::plan(&value, &owned, (context.clock)()).writes(&value);
    let resource = ApiResource::erase::<Deployment>(&());
    let name = deployment_object.name_any();
    let owner = owner(&resource, &namespace, &name);
    apply(&context.client, owner, writes, MANAGER, TOLERATED_NAMED).await?;
    Ok(Action::requeue(Duration::from_secs(30)))
}
