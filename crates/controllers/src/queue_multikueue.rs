//! The queue manager's MultiKueue admission check: watches of MultiKueueConfigs and
//! MultiKueueClusters; per worker, the kubeconfig read from the Secret its MultiKueueCluster
//! names (key `kubeconfig`, in Kueue's namespace), a kube client built from it and a probe of
//! the worker's API each pass, the outcome written as the cluster's `Active` condition
//! ([`tessera_queue::api::multikueue::cluster_status`], a Warning event when it fails) and the
//! checks' `Active` conditions from their configs; then, for every Workload with a MultiKueue
//! check, the worker's copies of the Workload and its Job or JobSet read and what
//! [`tessera_queue::api::multikueue::reconcile`] answers carried out on the workers and here.
//! Events are recorded as `kueue-multikueue`.
//!
//! Decides nothing itself. Differences from Kueue: workers are read once a pass (the pass
//! runs on local changes and every few seconds) rather than watched; `RequeueAfter` is left
//! to that resync.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_queue::api::multikueue::{
    self, Connection, Group, OwnerKind, Worker, Write, adapter, cluster,
};
use tessera_queue::api::objects;
use tokio::sync::Mutex;

use crate::queue::{MANAGER, kueue_resource, values, write_check_statuses};
use crate::shell::{EventRecorder, patch_params, post_params};

/// The component MultiKueue's events are recorded as.
const COMPONENT: &str = "kueue-multikueue";
/// How long a worker's API may take to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// One worker's connection.
struct WorkerConnection {
    /// The kubeconfig the client was built from.
    kubeconfig: String,
    client: Option<Client>,
    failed_attempts: u32,
    next_attempt: SystemTime,
    /// Since when it is not connected.
    lost_since: Option<SystemTime>,
    /// The error of the last failed attempt, shown until the next attempt.
    last_error: String,
}

/// The watched objects, the workers' connections and the recorder.
pub struct MultiKueueWatches {
    configs: Store<DynamicObject>,
    clusters: Store<DynamicObject>,
    /// Where the kubeconfig Secrets are (Kueue's namespace).
    namespace: String,
    origin: String,
    worker_lost_timeout: Duration,
    workers: Mutex<BTreeMap<String, WorkerConnection>>,
    events: EventRecorder,
}

fn owner_resource(kind: OwnerKind) -> ApiResource {
    match kind {
        OwnerKind::Job => ApiResource::erase::<Job>(&()),
        OwnerKind::JobSet => {
            let (group, version, kind, _) = crate::custom::JOBSET;
            ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(group, version, kind),
                "jobsets",
            )
        }
    }
}

fn workload_resource() -> ApiResource {
    kueue_resource("Workload", "workloads")
}

/// The resource of an object MultiKueue creates on a worker.
fn resource_of(object: &Value) -> ApiResource {
    match object["kind"].as_str() {
        Some("Job") => owner_resource(OwnerKind::Job),
        Some("JobSet") => owner_resource(OwnerKind::JobSet),
        _ => workload_resource(),
    }
}

impl MultiKueueWatches {
    /// Starts the reflectors; their changes join `changes`.
    pub fn start(
        client: &Client,
        clock: Clock,
        configuration: &tessera_queue::config::Configuration,
        changes: &mut futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>,
    ) -> MultiKueueWatches {
        let (configs, config_changes) = crate::custom::watched_once_installed(
            client,
            &kueue_resource("MultiKueueConfig", "multikueueconfigs"),
            "multikueueconfigs.kueue.x-k8s.io",
        );
        let (clusters, cluster_changes) = crate::custom::watched_once_installed(
            client,
            &kueue_resource("MultiKueueCluster", "multikueueclusters"),
            "multikueueclusters.kueue.x-k8s.io",
        );
        changes.extend([config_changes, cluster_changes]);
        let settings = &configuration.multi_kueue;
        MultiKueueWatches {
            configs,
            clusters,
            namespace: configuration.namespace.clone(),
            origin: settings.origin.clone(),
            worker_lost_timeout: settings.worker_lost_timeout,
            workers: Mutex::new(BTreeMap::new()),
            events: EventRecorder::start(client.clone(), COMPONENT, clock),
        }
    }

    /// Connects to the workers and writes the clusters' and checks' `Active` conditions,
    /// then carries out the reconciler's writes for each of `workloads`; answers the
    /// Workloads written here.
    pub async fn reconcile(
        &self,
        client: &Client,
        admission_checks: &[Value],
        workloads: &BTreeMap<String, Value>,
        owners: &[Value],
        now: SystemTime,
    ) -> Vec<Arc<DynamicObject>> {
        let clusters = values(self.clusters.state());
        if clusters.is_empty() && self.configs.state().is_empty() {
            return Vec::new();
        }
        let mut workers = self.workers.lock().await;
        for object in &clusters {
            self.connect(client, &mut workers, object, now).await;
        }
        workers.retain(|name, _| clusters.iter().any(|c| objects::name(c) == name));
        let configs = objects::by_name(&values(self.configs.state()));
        let by_name = objects::by_name(&clusters);
        write_check_statuses(client, admission_checks, |check| {
            multikueue::active_status(check, &configs, &by_name, now)
        })
        .await;
        let checks = objects::by_name(admission_checks);
        let mut written = Vec::new();
        for workload in workloads.values() {
            let Some(check) = multikueue_check(workload, &checks) else {
                continue;
            };
            let Ok(names) = multikueue::config_clusters(check, &configs) else {
                continue;
            };
            let owner = adapter::owner_of(workload).ok();
            let local_owner = owner.as_ref().and_then(|(kind, name)| {
                let (_, kind_name) = kind.api_version_kind();
                owners.iter().find(|o| {
                    o["kind"] == kind_name
                        && objects::name(o) == name
                        && objects::namespace(o) == objects::namespace(workload)
                })
            });
            let remote = self
                .read_workers(&mut workers, &names, workload, owner.as_ref(), now)
                .await;
            let group_workers: BTreeMap<String, Worker<'_>> = remote
                .iter()
                .map(|(name, read)| {
                    let worker = match read {
                        Read::Lost(since) => Worker::Unreachable { lost_since: *since },
                        Read::Got(workload, owner) => Worker::Reachable {
                            workload: workload.as_ref(),
                            owner: owner.as_ref(),
                        },
                    };
                    (name.clone(), worker)
                })
                .collect();
            let group = Group {
                workload,
                admission_checks: &checks,
                owner: local_owner,
                workers: &group_workers,
                origin: &self.origin,
                worker_lost_timeout: self.worker_lost_timeout,
            };
            for write in multikueue::reconcile(&group, now) {
                if let Some(object) = self
                    .carry_out(
                        client,
                        &workers,
                        workload,
                        local_owner,
                        owner.as_ref(),
                        write,
                    )
                    .await
                {
                    written.push(object);
                }
            }
        }
        written
    }

    /// Loads a worker's kubeconfig, (re)builds its client, probes it and writes the
    /// MultiKueueCluster's `Active` condition.
    async fn connect(
        &self,
        client: &Client,
        workers: &mut BTreeMap<String, WorkerConnection>,
        object: &Value,
        now: SystemTime,
    ) {
        let name = objects::name(object).to_owned();
        let outcome = match self.kubeconfig(client, object).await {
            Err(error) => {
                if let Some(worker) = workers.get_mut(&name) {
                    worker.client = None;
                    worker.lost_since.get_or_insert(now);
                }
                Connection::BadKubeConfig(error)
            }
            Ok(kubeconfig) => {
                let worker = workers
                    .entry(name.clone())
                    .or_insert_with(|| WorkerConnection {
                        kubeconfig: String::new(),
                        client: None,
                        failed_attempts: 0,
                        next_attempt: now,
                        lost_since: None,
                        last_error: String::new(),
                    });
                if worker.kubeconfig != kubeconfig {
                    worker.kubeconfig = kubeconfig;
                    worker.client = None;
                    worker.failed_attempts = 0;
                    worker.next_attempt = now;
                }
                probe(worker, now).await
            }
        };
        let Some(status) = multikueue::cluster_status(object, &outcome, now) else {
            return;
        };
        let api: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &kueue_resource("MultiKueueCluster", "multikueueclusters"),
        );
        let patch = json!({ "status": status });
        if let Err(error) = api
            .patch_status(&name, &patch_params(MANAGER), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(%error, %name, "multikueue: cluster status not written");
        }
        if outcome != Connection::Connected {
            let condition = status["conditions"]
                .as_array()
                .and_then(|list| {
                    list.iter()
                        .find(|c| c["type"] == multikueue::CLUSTER_ACTIVE)
                })
                .cloned()
                .unwrap_or_default();
            let involved = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
                "name": name, "uid": object.pointer("/metadata/uid")});
            self.events
                .record(
                    involved,
                    "Warning",
                    condition["reason"].as_str().unwrap_or_default(),
                    condition["message"].as_str().unwrap_or_default(),
                )
                .await;
        }
    }

    /// The kubeconfig text of a MultiKueueCluster; Kueue's error when it cannot be loaded.
    async fn kubeconfig(&self, client: &Client, object: &Value) -> Result<String, String> {
        let secret_name = cluster::kubeconfig_secret(object)?;
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        let secret = secrets
            .get_opt(secret_name)
            .await
            .map_err(|error| error.to_string())?
            .ok_or_else(|| cluster::missing_secret(secret_name))?;
        let bytes = secret
            .data
            .as_ref()
            .and_then(|data| data.get(cluster::KUBECONFIG_KEY))
            .map(|bytes| bytes.0.clone())
            .or_else(|| {
                secret
                    .string_data
                    .as_ref()
                    .and_then(|data| data.get(cluster::KUBECONFIG_KEY))
                    .map(|text| text.clone().into_bytes())
            })
            .ok_or_else(|| cluster::missing_key(secret_name))?;
        String::from_utf8(bytes).map_err(|error| error.to_string())
    }

    /// Each configured worker's copies of the Workload and its owner, or the worker as lost.
    async fn read_workers(
        &self,
        workers: &mut BTreeMap<String, WorkerConnection>,
        names: &[String],
        workload: &Value,
        owner: Option<&(OwnerKind, String)>,
        now: SystemTime,
    ) -> BTreeMap<String, Read> {
        let mut read = BTreeMap::new();
        for name in names {
            let Some(worker) = workers.get_mut(name) else {
                read.insert(name.clone(), Read::Lost(None));
                continue;
            };
            let Some(client) = worker.client.clone() else {
                read.insert(name.clone(), Read::Lost(worker.lost_since));
                continue;
            };
            let namespace = objects::namespace(workload);
            let workloads: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &workload_resource());
            let remote_workload = workloads.get_opt(objects::name(workload)).await;
            let remote_owner = match owner {
                Some((kind, owner_name)) => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), namespace, &owner_resource(*kind));
                    api.get_opt(owner_name).await
                }
                None => Ok(None),
            };
            match (remote_workload, remote_owner) {
                (Ok(w), Ok(o)) => {
                    let to_value = |object: Option<DynamicObject>| {
                        object.and_then(|o| serde_json::to_value(o).ok())
                    };
                    read.insert(name.clone(), Read::Got(to_value(w), to_value(o)));
                }
                (Err(error), _) | (_, Err(error)) => {
                    tracing::debug!(%error, worker = %name, "multikueue: worker not read");
                    worker.client = None;
                    worker.lost_since.get_or_insert(now);
                    read.insert(name.clone(), Read::Lost(worker.lost_since));
                }
            }
        }
        read
    }

    /// Carries out one write; the manager's Workload when it was written.
    async fn carry_out(
        &self,
        client: &Client,
        workers: &BTreeMap<String, WorkerConnection>,
        workload: &Value,
        local_owner: Option<&Value>,
        owner: Option<&(OwnerKind, String)>,
        write: Write,
    ) -> Option<Arc<DynamicObject>> {
        let worker = |cluster: &str| workers.get(cluster).and_then(|w| w.client.clone());
        let namespace = objects::namespace(workload);
        match write {
            Write::CreateRemote { cluster, object } => {
                let remote = worker(&cluster)?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(remote, namespace, &resource_of(&object));
                let object = serde_json::from_value::<DynamicObject>(object).ok()?;
                match api.create(&post_params(MANAGER), &object).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 => {}
                    Err(error) => {
                        tracing::debug!(%error, %cluster, "multikueue: remote object not created")
                    }
                }
            }
            Write::RemoveRemote {
                cluster,
                owner: remote_owner,
                workload: has_workload,
            } => {
                let remote = worker(&cluster)?;
                if let Some((kind, name)) = remote_owner {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(remote.clone(), namespace, &owner_resource(kind));
                    if let Err(error) = api.delete(&name, &DeleteParams::background()).await {
                        tracing::debug!(%error, %cluster, "multikueue: remote owner not deleted");
                    }
                }
                if has_workload {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(remote, namespace, &workload_resource());
                    let name = objects::name(workload);
                    let patch = json!({"metadata": {"finalizers": null}});
                    let _ = api
                        .patch(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                        .await;
                    if let Err(error) = api.delete(name, &DeleteParams::background()).await {
                        tracing::debug!(%error, %cluster, "multikueue: remote workload not deleted");
                    }
                }
            }
            Write::UpdateRemotePriority { cluster, spec } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(worker(&cluster)?, namespace, &workload_resource());
                let patch = json!({ "spec": spec });
                if let Err(error) = api
                    .patch(
                        objects::name(workload),
                        &patch_params(MANAGER),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    tracing::debug!(%error, %cluster, "multikueue: remote priority not written");
                }
            }
            Write::DeactivateRemote {
                cluster,
                conditions,
            } => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(worker(&cluster)?, namespace, &workload_resource());
                let patch = json!({"status": {"conditions": conditions}});
                if let Err(error) = api
                    .patch_status(
                        objects::name(workload),
                        &patch_params(MANAGER),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    tracing::debug!(%error, %cluster, "multikueue: remote deactivation not written");
                }
            }
            Write::OwnerStatus(status) => {
                let (kind, name) = owner?;
                local_owner?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &owner_resource(*kind));
                let patch = json!({ "status": status });
                if let Err(error) = api
                    .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(%error, %name, "multikueue: owner status not written");
                }
            }
            Write::WorkloadStatus(status) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &workload_resource());
                let patch = json!({ "status": status });
                match api
                    .patch_status(
                        objects::name(workload),
                        &patch_params(MANAGER),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    Ok(object) => return Some(Arc::new(object)),
                    Err(error) => {
                        tracing::debug!(%error, workload = %objects::name(workload), "multikueue: workload status not written");
                    }
                }
            }
            Write::Event(event) => {
                self.events
                    .record(event.involved, event.kind, &event.reason, &event.message)
                    .await;
            }
            Write::RequeueAfter(_) => {}
        }
        None
    }
}

/// One worker as read for a Workload.
enum Read {
    Lost(Option<SystemTime>),
    Got(Option<Value>, Option<Value>),
}

/// The Workload's check of MultiKueue's controller, as an AdmissionCheck object.
fn multikueue_check<'c>(
    workload: &Value,
    checks: &'c BTreeMap<String, Value>,
) -> Option<&'c Value> {
    workload
        .pointer("/status/admissionChecks")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(|state| checks.get(state["name"].as_str()?))
        .find(|check| {
            check
                .pointer("/spec/controllerName")
                .and_then(Value::as_str)
                == Some(tessera_queue::api::admission_checks::MULTIKUEUE_CONTROLLER)
        })
}

/// Builds the worker's client when there is none (not before the next attempt after a
/// failure) and asks its API for its version.
async fn probe(worker: &mut WorkerConnection, now: SystemTime) -> Connection {
    if worker.client.is_none() && now < worker.next_attempt {
        // Kueue waits for the next attempt without touching the status.
        let error = worker.last_error.clone();
        return failed(worker, error, now, false);
    }
    let client = match worker.client.clone() {
        Some(client) => client,
        None => match client_from(&worker.kubeconfig).await {
            Ok(client) => client,
            Err(error) => return failed(worker, error, now, true),
        },
    };
    match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => {
            worker.client = Some(client);
            worker.failed_attempts = 0;
            worker.lost_since = None;
            Connection::Connected
        }
        Ok(Err(error)) => failed(worker, error.to_string(), now, true),
        Err(_) => failed(
            worker,
            format!("no answer within {PROBE_TIMEOUT:?}"),
            now,
            true,
        ),
    }
}

/// Records a failed attempt (when `attempted`) and answers the outcome.
fn failed(
    worker: &mut WorkerConnection,
    error: String,
    now: SystemTime,
    attempted: bool,
) -> Connection {
    worker.client = None;
    worker.lost_since.get_or_insert(now);
    if attempted {
        worker.last_error.clone_from(&error);
        worker.failed_attempts = worker.failed_attempts.saturating_add(1);
        worker.next_attempt = now + cluster::retry_after(worker.failed_attempts);
    }
    Connection::Failed {
        error,
        attempts: worker.failed_attempts,
        next_attempt: worker.next_attempt,
    }
}

async fn client_from(kubeconfig: &str) -> Result<Client, String> {
    let parsed = Kubeconfig::from_yaml(kubeconfig).map_err(|error| error.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|error| error.to_string())?;
    Client::try_from(config).map_err(|error| error.to_string())
}
