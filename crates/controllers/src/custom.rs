//! Controller shells for the upstream custom workload kinds Tessera runs natively: JobSet
//! (jobset.x-k8s.io/v1alpha2) and LeaderWorkerSet (leaderworkerset.x-k8s.io/v1). Each waits
//! until its CRD is installed, then drives the pure cores ([`tessera_workloads::jobset`],
//! [`tessera_workloads::lws`]) and carries their plans out with [`crate::shell::apply`].
//!
//! Knows the kinds' API groups and CRDs and how to list what an owner owns; decides nothing
//! itself.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tessera_model::clock::Clock;

use crate::shell::{Owner, ReconcileError, Tolerated, apply, owned_by};
use tessera_workloads::{jobset, lws};

/// The field manager these controllers write as: upstream's JobSet and LeaderWorkerSet
/// controllers are controller-runtime binaries named `manager`, whose User-Agent names it.
pub const MANAGER: &str = tessera_model::managers::CONTROLLER_RUNTIME;

struct Context {
    client: Client,
    resource: ApiResource,
    clock: Clock,
}

/// A 404 or 409 on any write: gone already, or there already.
const TOLERATED: Tolerated = Tolerated {
    create: &[404, 409],
    change: &[404, 409],
    status: &[404, 409],
};

async fn wait_for_crd(client: &Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    loop {
        if let Ok(Some(crd)) = crds.get_opt(name).await
            && crd.metadata.deletion_timestamp.is_none()
        {
            return;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The JobSet kind (`jobset.x-k8s.io/v1alpha2`) and its CRD's name.
pub const JOBSET: (&str, &str, &str, &str) = (
    "jobset.x-k8s.io",
    "v1alpha2",
    "JobSet",
    "jobsets.jobset.x-k8s.io",
);

/// A watch cache of a custom kind that starts once its CRD (`<plural>.<group>`) exists: the
/// store is empty until then, and the stream yields on every change after.
pub fn watched_once_installed(
    client: &Client,
    resource: &ApiResource,
    crd: &'static str,
) -> (
    kube::runtime::reflector::Store<DynamicObject>,
    futures::stream::BoxStream<'static, ()>,
) {
    let (store, events) =
        reflected_once_installed(client, resource, crd, watcher::Config::default());
    (store, events.map(|_| ()).boxed())
}

/// A reflector's watcher events, errors included (after one the watcher starts again, with
/// backoff).
pub type ReflectedEvents =
    futures::stream::BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>>;

/// [`watched_once_installed`] over the objects `config` selects (all namespaces), yielding the
/// watcher's events.
pub fn reflected_once_installed(
    client: &Client,
    resource: &ApiResource,
    crd: &'static str,
    config: watcher::Config,
) -> (
    kube::runtime::reflector::Store<DynamicObject>,
    ReflectedEvents,
) {
    let writer = kube::runtime::reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let (client, resource) = (client.clone(), resource.clone());
    let stream = futures::stream::once(async move {
        wait_for_crd(&client, crd).await;
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        kube::runtime::reflector::reflector(
            writer,
            kube::runtime::WatchStreamExt::default_backoff(watcher(api, config)),
        )
    })
    .flatten()
    .boxed();
    (store, stream)
}

/// Runs the JobSet controller once the JobSet CRD exists (again after it is re-installed),
/// reading the time from `clock`.
pub async fn run_jobsets(client: Client, clock: Clock) {
    let (group, version, kind, crd) = JOBSET;
    let gvk = GroupVersionKind::gvk(group, version, kind);
    run_while_crd_exists::<Job, _, _>((client, clock), gvk, crd, reconcile_jobset).await;
}

/// Runs a controller of the custom kind `gvk` owning `Owned` objects whenever its CRD
/// (`<plural>.<group>`) exists, stopping it when the CRD goes and starting it again after.
async fn run_while_crd_exists<Owned, Reconcile, Done>(
    (client, clock): (Client, Clock),
    gvk: GroupVersionKind,
    crd: &'static str,
    reconcile: Reconcile,
) where
    Owned: crate::shell::Watchable + kube::Resource<DynamicType = ()>,
    Reconcile: FnMut(Arc<DynamicObject>, Arc<Context>) -> Done + Clone,
    Done: std::future::Future<Output = Result<Action, ReconcileError>> + Send + 'static,
{
    let plural = crd.split('.').next().unwrap_or(crd);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    loop {
        wait_for_crd(&client, crd).await;
        let context = Arc::new(Context {
            client: client.clone(),
            resource: resource.clone(),
            clock: clock.clone(),
        });
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        Controller::new_with(api, watcher::Config::default(), resource.clone())
            .owns(
                Api::<Owned>::all(client.clone()),
                watcher::Config::default(),
            )
            .run(reconcile.clone(), crate::shell::retry_soon, context)
            .take_until(crd_gone(client.clone(), crd))
            .for_each(|_| async {})
            .await;
    }
}

/// Resolves when a CRD is deleted, to stop its controller.
async fn crd_gone(client: Client, name: &'static str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        if !matches!(crds.get_opt(name).await, Ok(Some(_))) {
            return;
        }
    }
}

async fn reconcile_jobset(
    object: Arc<DynamicObject>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = object.namespace().unwrap_or_default();
    let value = serde_json::to_value(object.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() || !jobset::managed_here(&value) {
        return Ok(Action::await_change());
    }
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    let listed = jobs
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            jobset::keys::JOBSET_NAME,
            object.name_any()
        )))
        .await?;
    let owned_jobs = owned_by(&listed.items, &object.uid().unwrap_or_default())?;
    let plan = jobset::plan(&value, &owned_jobs, (context.clock)());
    let (deleted, requeue_after) = (plan.delete_jobset, plan.requeue_after);
    let writes = plan.writes(&value);
    let name = object.name_any();
    let owner = Owner {
        resource: &context.resource,
        namespace: &namespace,
        name: &name,
    };
    apply(&context.client, owner, writes, MANAGER, TOLERATED).await?;
    if deleted {
        return Ok(Action::await_change());
    }
    // A finished JobSet's time to live runs out without any change to look at.
    Ok(Action::requeue(
        requeue_after.map_or(Duration::from_secs(30), |after| {
            after.max(Duration::from_millis(50))
        }),
    ))
}

/// Runs the LeaderWorkerSet controller once its CRD exists (again after it is re-installed),
/// reading the time from `clock`.
pub async fn run_leader_worker_sets(client: Client, clock: Clock) {
    let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    run_while_crd_exists::<StatefulSet, _, _>(
        (client, clock),
        gvk,
        "leaderworkersets.leaderworkerset.x-k8s.io",
        reconcile_lws,
    )
    .await;
}

async fn reconcile_lws(
    object: Arc<DynamicObject>,
    context: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let namespace = object.namespace().unwrap_or_default();
    let value = serde_json::to_value(object.as_ref())?;
    if value.pointer("/metadata/deletionTimestamp").is_some() {
        return Ok(Action::await_change());
    }
    let name = object.name_any();
    let selector = format!("{}={name}", lws::NAME);
    let sets_api: Api<StatefulSet> = Api::namespaced(context.client.clone(), &namespace);
    let sets: Vec<Value> = sets_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let pods: Vec<Value> = pods_api
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let writes = lws::plan(&value, &sets, &pods, (context.clock)()).writes(&value);
    let owner = Owner {
        resource: &context.resource,
        namespace: &namespace,
        name: &name,
    };
    apply(&context.client, owner, writes, MANAGER, TOLERATED).await?;
    // Worker sets hang off leader pods, which the controller does not own: look again soon.
    Ok(Action::requeue(Duration::from_secs(2)))
}
