//! The Job controller shell: watches Jobs and their pods, asks
//! [`tessera_workloads::job::plan`] what to do at its clock's time, and carries the plan out
//! with [`crate::shell::apply`] — pods deleted (released first, so the controller's own
//! deletions are not counted as failures), status recorded, tracking finalizers released, pods
//! created, Jobs whose TTL has passed deleted. Pods whose Job is gone are released by a
//! periodic sweep.
//!
//! Each reconciliation is recorded in kube-controller-manager's work queue metrics (queue
//! `job`), a status write that finishes a Job in `job_controller_jobs_finished_total`, and
//! the failed pods it accounts for by their `podFailurePolicy` action in
//! `job_controller_pod_failures_handled_by_failure_policy_total`.
//!
//! Decides nothing about a Job itself; knows how to list its pods and when to look again.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tessera_metrics::components::Registries;
use tessera_metrics::controllers::{JobFinished, job_finished};
use tessera_model::clock::Clock;
use tessera_model::conditions::is_true;

use crate::shell::{Owner, ReconcileError, Tolerated, apply};
use tessera_workloads::job::{self, CONTROLLER_UID, TRACKING_FINALIZER};

/// The field manager the controller writes as.
pub const MANAGER: &str = crate::shell::KUBE_CONTROLLER_MANAGER;

/// Settings of the Job controller.
#[derive(Clone)]
pub struct JobConfig {
    /// The first delay before a failed pod is replaced (doubling per failure, capped at 6 min).
    pub backoff: Duration,
    /// Where the controller reads the time.
    pub clock: Clock,
    /// kube-controller-manager's metrics (queue `job`, `job_controller_jobs_finished_total`),
    /// when the platform serves them.
    pub metrics: Option<Arc<Registries>>,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            backoff: Duration::from_secs(10),
            clock: Arc::new(SystemTime::now),
            metrics: None,
        }
    }
}

impl std::fmt::Debug for JobConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobConfig")
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

struct Context {
    client: Client,
    config: JobConfig,
    /// The Jobs counted as finished whose finished status the watch has not shown yet: a
    /// reconciliation of the cached, unfinished Job may write it a second time.
    counted: Mutex<HashSet<String>>,
}

impl Context {
    /// Counts a Job's finish once, however often a stale cache makes it written.
    fn finished(&self, uid: &str, finished: Option<JobFinished>) {
        let (Some(metrics), Some(finished)) = (&self.config.metrics, finished) else {
            return;
        };
        let mut counted = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
        if counted.insert(uid.to_string()) {
            metrics.controller_manager.job_finished(&finished);
        }
    }

    /// The watch shows the Job finished (or it is gone): no stale write can follow.
    fn settled(&self, uid: &str) {
        let mut counted = self.counted.lock().unwrap_or_else(PoisonError::into_inner);
        counted.remove(uid);
    }
}

/// Runs the Job controller until the task is dropped.
pub async fn run(client: Client, config: JobConfig) {
    let reconcile = crate::workqueue::counted(
        config.metrics.as_deref(),
        tessera_metrics::controllers::queue_name::JOB,
        config.clock.clone(),
        reconcile,
    );
    let context = Arc::new(Context {
        client: client.clone(),
        config,
        counted: Mutex::default(),
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

/// A 404 on a deletion or patch: gone already. Creations and the Job's status tolerate
/// nothing.
const TOLERATED: Tolerated = Tolerated {
    create: &[],
    change: &[404],
    status: &[],
};

/// Removes the tracking finalizer from an orphaned pod.
async fn release(pods: &Api<Pod>, pod: &Value) -> Result<(), ReconcileError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let patch = job::release_patch(pod);
    match pods.patch(name, &params(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

async fn reconcile(job_object: Arc<Job>, context: Arc<Context>) -> Result<Action, ReconcileError> {
    let namespace = job_object.namespace().unwrap_or_default();
    let job_value = serde_json::to_value(job_object.as_ref())?;
    if !job::managed_here(&job_value) {
        return Ok(Action::await_change());
    }
    let uid = job_object.uid().unwrap_or_default();
    if is_true(&job_value, "Complete") || is_true(&job_value, "Failed") {
        context.settled(&uid);
    }
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let listed = pods
        .list(&ListParams::default().labels(&format!("{CONTROLLER_UID}={uid}")))
        .await?;
    let pod_values: Vec<Value> = listed
        .items
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<_, _>>()?;
    let mut plan = job::plan(
        &job_value,
        &pod_values,
        (context.config.clock)(),
        context.config.backoff,
    );
    let (delete_job, requeue_after) = (plan.delete_job, plan.requeue_after);
    let finished = job_finished(&job_value, &plan.status);
    let failure_policy_actions = std::mem::take(&mut plan.failure_policy_actions);
    let resource = ApiResource::erase::<Job>(&());
    let name = job_object.name_any();
    let owner = Owner {
        resource: &resource,
        namespace: &namespace,
        name: &name,
    };
    let writes = plan.writes(&job_value, &pod_values);
    apply(&context.client, owner, writes, MANAGER, TOLERATED).await?;
    context.finished(&uid, finished);
    if let Some(metrics) = &context.config.metrics {
        metrics
            .controller_manager
            .pod_failures_handled(&failure_policy_actions);
    }
    if delete_job {
        return Ok(Action::await_change());
    }
    Ok(match requeue_after {
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
