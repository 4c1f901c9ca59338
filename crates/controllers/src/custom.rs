//! Controller shells for the upstream custom workload kinds Tessera runs natively: JobSet
//! (jobset.x-k8s.io/v1alpha2) and LeaderWorkerSet (leaderworkerset.x-k8s.io/v1). Each waits
//! until its CRD is installed, then drives the pure cores ([`tessera_workloads::jobset`],
//! [`tessera_workloads::lws`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
    PostParams, PropagationPolicy,
};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::shell::ReconcileError;
use tessera_workloads::{jobset, lws};

/// The field manager these controllers write as.
pub const MANAGER: &str = "tessera-workload-controller";

struct Context {
    client: Client,
    resource: ApiResource,
}

fn params() -> PatchParams {
    crate::shell::patch_params(MANAGER)
}

fn post() -> PostParams {
    crate::shell::post_params(MANAGER)
}

fn tolerate(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        other => other,
    }
}

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

fn owned<K: serde::Serialize + kube::Resource>(
    items: &[K],
    uid: &str,
) -> Result<Vec<Value>, serde_json::Error> {
    items
        .iter()
        .filter(|item| {
            item.meta()
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .map(serde_json::to_value)
        .collect()
}

/// Runs the JobSet controller once the JobSet CRD exists (again after it is re-installed).
pub async fn run_jobsets(client: Client) {
    let gvk = GroupVersionKind::gvk("jobset.x-k8s.io", "v1alpha2", "JobSet");
    run_while_crd_exists::<Job, _, _>(client, gvk, "jobsets.jobset.x-k8s.io", reconcile_jobset)
        .await;
}

/// Runs a controller of the custom kind `gvk` owning `Owned` objects whenever its CRD
/// (`<plural>.<group>`) exists, stopping it when the CRD goes and starting it again after.
async fn run_while_crd_exists<Owned, Reconcile, Done>(
    client: Client,
    gvk: GroupVersionKind,
    crd: &'static str,
    reconcile: Reconcile,
) where
    Owned: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
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
    if value.pointer("/metadata/deletionTimestamp").is_some() {
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
    let owned_jobs = owned(&listed.items, &object.uid().unwrap_or_default())?;
    let plan = jobset::plan(&value, &owned_jobs, SystemTime::now());
    if let Some(service) = &plan.service {
        let services: Api<Service> = Api::namespaced(context.client.clone(), &namespace);
        let service: Service = serde_json::from_value(service.clone())?;
        tolerate(services.create(&post(), &service).await.map(drop))?;
    }
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    for name in &plan.delete {
        tolerate(jobs.delete(name, &background).await.map(drop))?;
    }
    for (name, suspend) in &plan.suspend {
        tolerate(
            jobs.patch(
                name,
                &params(),
                &Patch::Merge(json!({"spec": {"suspend": suspend}})),
            )
            .await
            .map(drop),
        )?;
    }
    for job in &plan.create {
        let job: Job = serde_json::from_value(job.clone())?;
        tolerate(jobs.create(&post(), &job).await.map(drop))?;
    }
    if value.get("status") != Some(&plan.status) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(context.client.clone(), &namespace, &context.resource);
        tolerate(
            api.patch_status(
                &object.name_any(),
                &params(),
                &Patch::Merge(json!({"status": plan.status})),
            )
            .await
            .map(drop),
        )?;
    }
    Ok(Action::requeue(Duration::from_secs(30)))
}

/// Runs the LeaderWorkerSet controller once its CRD exists (again after it is re-installed).
pub async fn run_leader_worker_sets(client: Client) {
    let gvk = GroupVersionKind::gvk("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet");
    run_while_crd_exists::<StatefulSet, _, _>(
        client,
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
    let plan = lws::plan(&value, &sets, &pods, SystemTime::now());
    if let Some(service) = &plan.service {
        let services: Api<Service> = Api::namespaced(context.client.clone(), &namespace);
        let service: Service = serde_json::from_value(service.clone())?;
        tolerate(services.create(&post(), &service).await.map(drop))?;
    }
    for set in &plan.create {
        let set: StatefulSet = serde_json::from_value(set.clone())?;
        tolerate(sets_api.create(&post(), &set).await.map(drop))?;
    }
    for (set, replicas) in &plan.scale {
        tolerate(
            sets_api
                .patch(
                    set,
                    &params(),
                    &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                )
                .await
                .map(drop),
        )?;
    }
    for pod in &plan.restart_leaders {
        tolerate(
            pods_api
                .delete(pod, &DeleteParams::default())
                .await
                .map(drop),
        )?;
    }
    if value.get("status") != Some(&plan.status) {
        let api: Api<DynamicObject> =
            Api::namespaced_with(context.client.clone(), &namespace, &context.resource);
        tolerate(
            api.patch_status(
                &name,
                &params(),
                &Patch::Merge(json!({"status": plan.status})),
            )
            .await
            .map(drop),
        )?;
    }
    // Worker sets hang off leader pods, which the controller does not own: look again soon.
    Ok(Action::requeue(Duration::from_secs(2)))
}
