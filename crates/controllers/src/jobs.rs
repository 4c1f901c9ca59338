//! The Job controller shell: watches Jobs and their pods, asks [`tessera_workloads::job::plan`] what to
//! do, and carries it out — creating pods, deleting pods (released first, so the controller's
//! own deletions are not counted as failures), recording status, releasing tracking
//! finalizers, and deleting Jobs whose TTL has passed. Pods whose Job is gone are released by
//! a periodic sweep.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::shell::ReconcileError;
use tessera_workloads::job::{self, CONTROLLER_UID, TRACKING_FINALIZER};

/// The field manager the controller writes as.
pub const MANAGER: &str = "tessera-job-controller";

/// Settings of the Job controller.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// The first delay before a failed pod is replaced (doubling per failure, capped at 6 min).
    pub backoff: Duration,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            backoff: Duration::from_secs(10),
        }
    }
}

struct Context {
    client: Client,
    config: JobConfig,
}

/// Runs the Job controller until the task is dropped.
pub async fn run(client: Client, config: JobConfig) {
    let context = Arc::new(Context {
        client: client.clone(),
        config,
    });
    let sweeper = tokio::spawn(sweep_orphans(client.clone()));
    Controller::new(Api::<Job>::all(client.clone()), watcher::Config::default())
        .owns(Api::<Pod>::all(client), watcher::Config::default())
        .run(reconcile, crate::shell::retry_soon, context)
        .for_each(|_| async {})
        .await;
    sweeper.abort();
}

fn params() -> PatchParams {
    crate::shell::patch_params(MANAGER)
}

async fn release(pods: &Api<Pod>, pod: &Value) -> Result<(), ReconcileError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kept: Vec<Value> = pod
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter(|f| *f != TRACKING_FINALIZER)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let patch = json!({"metadata": {"finalizers": kept}});
    match pods.patch(name, &params(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

async fn reconcile(job_object: Arc<Job>, context: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = job_object.namespace().unwrap_or_default();
    let job_value = serde_json::to_value(job_object.as_ref())?;
    let uid = job_object.uid().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID}={uid}")))
        .await?;
    let pod_values: Vec<Value> = listed
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let plan = job::plan(
        &job_value,
        &pod_values,
        SystemTime::now(),
        context.config.backoff,
    );

    for name in &plan.delete {
        if let Some(pod) = pod_values
            .iter()
            .find(|p| p.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        {
            release(&pods, pod).await?;
        }
        match pods.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
    }
    let jobs: Api<Job> = Api::namespaced(context.client.clone(), &namespace);
    if job_value.get("status") != Some(&plan.status) {
        jobs.patch_status(
            &job_object.name_any(),
            &params(),
            &Patch::Merge(&json!({"status": plan.status})),
        )
        .await?;
    }
    // Counted first, released after: a crash in between cannot count a pod twice.
    for name in &plan.release {
        if let Some(pod) = pod_values
            .iter()
            .find(|p| p.pointer("/metadata/name").and_then(Value::as_str) == Some(name))
        {
            release(&pods, pod).await?;
        }
    }
    for index in &plan.create {
        let pod: Pod = serde_json::from_value(job::pod_for(&job_value, *index))?;
        pods.create(
            &PostParams {
                field_manager: Some(MANAGER.into()),
                ..PostParams::default()
            },
            &pod,
        )
        .await?;
    }
    if plan.delete_job {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        match jobs.delete(&job_object.name_any(), &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(error.into()),
        }
        return Ok(Action::await_change());
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(after.max(Duration::from_millis(50))),
        None => Action::requeue(Duration::from_secs(60)),
    })
}

/// Releases tracking finalizers of pods whose Job no longer exists.
async fn sweep_orphans(client: Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let Ok(list) = pods
            .list(&ListParams::default().labels(CONTROLLER_UID))
            .await
        else {
            continue;
        };
        for pod in list.items {
            let tracked = pod.finalizers().iter().any(|f| f == TRACKING_FINALIZER);
            if !tracked {
                continue;
            }
            let namespace = pod.namespace().unwrap_or_default();
            let owner = pod
                .owner_references()
                .iter()
                .find(|r| r.kind == "Job")
                .cloned();
            let alive = match &owner {
                Some(owner) => Api::<Job>::namespaced(client.clone(), &namespace)
                    .get_opt(&owner.name)
                    .await
                    .ok()
                    .flatten()
                    .is_some_and(|job| job.uid().as_deref() == Some(owner.uid.as_str())),
                None => false,
            };
            if !alive && let Ok(value) = serde_json::to_value(&pod) {
                let namespaced: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                if let Err(error) = release(&namespaced, &value).await {
                    tracing::debug!(%error, "cannot release an orphaned job pod");
                }
            }
        }
    }
}
