//! MultiKueue's admission check on a manager: watches of MultiKueueConfigs and
//! MultiKueueClusters; per worker, the kubeconfig read from the Secret its MultiKueueCluster
//! names (key `kubeconfig`, in Kueue's namespace), a kube client built from it and a probe of
//! the worker's API, the outcome written as the cluster's `Active` condition
//! ([`tessera_queue::api::multikueue::cluster_status`], a Warning event when it fails) and the
//! checks' `Active` conditions from their configs; while a worker is connected, watch caches
//! of what this manager created there ([`crate::queue_multikueue_remote`]), whose changes
//! wake MultiKueue's loop ([`crate::queue_multikueue_loop`]) at once and mark what they
//! touched ([`crate::queue_multikueue_touched`]); then, for every Workload with a MultiKueue
//! check, the worker's copies of the Workload and its Job or JobSet as those caches show them
//! and what [`tessera_queue::api::multikueue::reconcile`] answers carried out on the workers
//! and here, beside the loop's passes (each Workload's writes in a task of its own; a
//! Workload is not planned again until they end). Events are recorded as
//! `kueue-multikueue`. A Workload whose last reconciliation wrote nothing is not read
//! again until it, its owner or a worker's copy of either is touched.
//!
//! Decides nothing itself. Differences from Kueue: a connected worker is probed again (and its
//! kubeconfig Secret read again) only every [`PROBE_EVERY`], when its MultiKueueCluster's spec
//! changes or after one of its watches failed; `RequeueAfter` is left to the loop's
//! resync; a Workload's writes on different workers run at once (Kueue makes them one after
//! the other), and a failed write does not stop the writes after it (the next pass plans
//! what is still to do).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_queue::api::multikueue::{
    self, Connection, Group, OwnerKind, Worker, Write, adapter, cluster,
};
use tessera_queue::api::objects;
use tessera_queue::api::pass::StatusWrite;
use tessera_workloads::plan::merge_patch_between;
use tokio::sync::Mutex;

use crate::queue::{MANAGER, kueue_resource, values, write_check_statuses, write_status};
use crate::queue_multikueue_remote::{Remote, RemoteCaches, Wake, owner_resource};
use crate::queue_multikueue_touched::{Touched, TouchedSet};
use crate::serialized::SerializedEach;
use crate::shell::{EventRecorder, patch_params, post_params};

/// A Workload's key (`namespace/name`) and its JSON.
pub type KeyedWorkload = (Arc<str>, Arc<Value>);

/// The component MultiKueue's events are recorded as.
const COMPONENT: &str = "kueue-multikueue";
/// How long a worker's API may take to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a connected worker whose watches are well is probed again.
pub const PROBE_EVERY: Duration = Duration::from_secs(5);

/// A connected worker: its client and the watch caches over it.
struct Connected {
    client: Client,
    caches: RemoteCaches,
}

/// One worker's connection.
struct WorkerConnection {
    /// The kubeconfig the client was built from.
    kubeconfig: String,
    /// The MultiKueueCluster's spec when it was last connected.
    spec: Value,
    connected: Option<Connected>,
    /// When the connection was last probed.
    probed_at: Option<SystemTime>,
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
    /// The Workloads the last passes found nothing to do for.
    settled: std::sync::Mutex<Settled>,
    /// The JSON of the objects the plans read (workers' copies, the local owners) while
    /// their caches hold them: an object is serialized once, not every pass.
    json: std::sync::Mutex<SerializedEach>,
    /// The Workloads whose writes are being carried out, and what they wrote here.
    in_flight: Arc<std::sync::Mutex<InFlight>>,
    /// The tasks carrying them out: dropped (aborted) with the loop.
    carriers: std::sync::Mutex<tokio::task::JoinSet<()>>,
    events: EventRecorder,
    /// Wakes MultiKueue's loop when a worker's caches change.
    wake: Wake,
    /// What the workers' caches and the loop's watches of the manager's owners have shown
    /// changed since the last plan.
    touched: Touched,
}

impl WorkerConnection {
    fn new(now: SystemTime) -> WorkerConnection {
        WorkerConnection {
            kubeconfig: String::new(),
            spec: Value::Null,
            connected: None,
            probed_at: None,
            failed_attempts: 0,
            next_attempt: now,
            lost_since: None,
            last_error: String::new(),
        }
    }

    /// Drops the client and its caches; lost since now unless lost already.
    fn disconnect(&mut self, now: SystemTime) {
        self.connected = None;
        self.lost_since.get_or_insert(now);
    }

    fn client(&self) -> Option<Client> {
        self.connected.as_ref().map(|c| c.client.clone())
    }

    /// Whether a connected worker needs no probe yet: probed within [`PROBE_EVERY`], its
    /// cluster's spec unchanged and its watches well.
    fn fresh(&self, spec: &Value, now: SystemTime) -> bool {
        let Some(connected) = &self.connected else {
            return false;
        };
        let recent = self
            .probed_at
            .is_some_and(|at| now.duration_since(at).unwrap_or_default() < PROBE_EVERY);
        // The trouble flag is taken whenever asked: a failed watch forces this probe.
        !connected.caches.take_trouble() && recent && &self.spec == spec
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
        let (wake, wakes) = Wake::channel();
        changes.extend([config_changes, cluster_changes, wakes]);
        let settings = &configuration.multi_kueue;
        MultiKueueWatches {
            configs,
            clusters,
            namespace: configuration.namespace.clone(),
            origin: settings.origin.clone(),
            worker_lost_timeout: settings.worker_lost_timeout,
            workers: Mutex::new(BTreeMap::new()),
            settled: std::sync::Mutex::default(),
            json: std::sync::Mutex::default(),
            in_flight: Arc::default(),
            carriers: std::sync::Mutex::default(),
            events: EventRecorder::start(client.clone(), COMPONENT, clock),
            wake,
            touched: Touched::default(),
        }
    }

    /// Connects to the workers and writes the clusters' and checks' `Active` conditions,
    /// then starts carrying out the reconciler's writes for each of `workloads` in the
    /// background: a pass does not wait on the workers' round trips (several in a row for a
    /// dispatch: the losers' copies withdrawn, the winner's job created, the check Ready), so
    /// the next pass is not held up by them. A Workload is not planned again while its writes
    /// are in flight; when they end, the loop is woken and
    /// [`MultiKueueWatches::take_written`] answers the Workloads they wrote here.
    pub async fn reconcile(
        &self,
        client: &Client,
        admission_checks: &[Value],
        workloads: &[KeyedWorkload],
        owners: &LocalOwners<'_>,
        now: SystemTime,
    ) {
        if !self.in_use() {
            return;
        }
        let clusters = values(self.clusters.state());
        let mut workers = self.workers.lock().await;
        for object in &clusters {
            self.connect(client, &mut workers, object, now).await;
        }
        workers.retain(|name, _| clusters.iter().any(|c| objects::name(c) == name));
        let config_values = values(self.configs.state());
        let configs = objects::by_name(&config_values);
        let by_name = objects::by_name(&clusters);
        write_check_statuses(client, admission_checks, |check| {
            multikueue::active_status(check, &configs, &by_name, now)
        })
        .await;
        let checks = objects::by_name(admission_checks);
        let context = Context::of(&[admission_checks, &clusters, &config_values]);
        let planned = self.plan(
            &workers,
            context,
            (&checks, &configs),
            workloads,
            owners,
            now,
        );
        if planned.is_empty() {
            return;
        }
        let remotes: BTreeMap<String, Client> = workers
            .iter()
            .filter_map(|(name, worker)| Some((name.clone(), worker.client()?)))
            .collect();
        drop(workers);
        let mut carriers = self.carriers.lock().unwrap_or_else(|e| e.into_inner());
        // The ended ones are forgotten (their outcome is in `in_flight`).
        while carriers.try_join_next().is_some() {}
        let carrier = Arc::new(Carrier {
            client: client.clone(),
            remotes,
            events: self.events.clone(),
            in_flight: self.in_flight.clone(),
            wake: self.wake.clone(),
        });
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        for planned in planned {
            in_flight.keys.insert(planned.key.clone());
            carriers.spawn(carrier.clone().carry_out_all(planned));
        }
    }

    /// Where the watches of the manager's Jobs and JobSets mark what they show changed.
    pub(crate) fn touched(&self) -> &Touched {
        &self.touched
    }

    /// Whether any MultiKueueCluster or MultiKueueConfig exists.
    pub fn in_use(&self) -> bool {
        !self.clusters.state().is_empty() || !self.configs.state().is_empty()
    }

    /// The Workloads written here by the writes that ended since the last call.
    pub fn take_written(&self) -> Vec<Arc<DynamicObject>> {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut in_flight.written)
    }

    /// Each Workload's writes as the reconciler answers them over what it reads, but for the
    /// Workloads read the same as at a pass that wrote nothing for them, or only asked for a
    /// requeue that is not yet due ([`Settled`]). A Workload whose writes are only requeues is
    /// not planned: a requeue is the loop's resync.
    fn plan(
        &self,
        workers: &BTreeMap<String, WorkerConnection>,
        context: Context,
        (checks, configs): (&BTreeMap<String, Value>, &BTreeMap<String, Value>),
        workloads: &[KeyedWorkload],
        owners: &LocalOwners<'_>,
        now: SystemTime,
    ) -> Vec<Planned> {
        // Taken before the caches are read: what they show changed meanwhile is the next's.
        let touched = self.touched.take();
        // A copy (few keys): writes ending while this plans do not wait on it.
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys
            .clone();
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        // A worker connected or lost reads differently for every Workload.
        let connections: Vec<(String, bool)> = workers
            .iter()
            .map(|(name, worker)| (name.clone(), worker.connected.is_some()))
            .collect();
        if settled.context != context || settled.connections != connections {
            settled.context = context;
            settled.connections = connections;
            settled.workloads.clear();
        }
        let mut json = self.json.lock().unwrap_or_else(|e| e.into_inner());
        let mut still_settled = BTreeMap::new();
        let mut planned = Vec::new();
        for (key, shared) in workloads {
            let workload: &Value = shared;
            // Planned again once its writes end (they wake the loop).
            if in_flight.contains(key) {
                continue;
            }
            if let Some(settlement) = settled.workloads.get(key)
                && settlement.untouched(key, shared, &touched, now)
            {
                still_settled.insert(key.clone(), settlement.clone());
                continue;
            }
            let Some(check) = multikueue_check(workload, checks) else {
                continue;
            };
            let Ok(names) = multikueue::config_clusters(check, configs) else {
                continue;
            };
            let owner = adapter::owner_of(workload).ok();
            let local = owner
                .as_ref()
                .and_then(|(kind, name)| owners.get(*kind, objects::namespace(workload), name));
            // A worker whose caches are still listing is waited for: its listing wakes us.
            let Some(remote) = read_workers(workers, &names, workload, owner.as_ref()) else {
                continue;
            };
            let inputs = Inputs::of(workload, local.as_ref(), &remote);
            if let Some(inputs) = inputs.as_ref()
                && let Some(settlement) = settled.workloads.get(key)
                && settlement.holds(inputs, now)
            {
                still_settled.insert(key.clone(), settlement.clone());
                continue;
            }
            let local_owner = local.and_then(|owner| owner.to_value(&mut json));
            let shown: Vec<(String, Read<Arc<Value>>)> = remote
                .into_iter()
                .map(|(name, read)| (name, read.into_json(&mut json)))
                .collect();
            let group_workers: BTreeMap<String, Worker<'_>> = shown
                .iter()
                .map(|(name, shown)| {
                    let worker = match shown {
                        Read::Lost(since) => Worker::Unreachable { lost_since: *since },
                        Read::Got(workload, owner) => Worker::Reachable {
                            workload: workload.as_deref(),
                            owner: owner.as_deref(),
                        },
                    };
                    (name.clone(), worker)
                })
                .collect();
            let group = Group {
                workload,
                admission_checks: checks,
                owner: local_owner.as_deref(),
                workers: &group_workers,
                origin: &self.origin,
                worker_lost_timeout: self.worker_lost_timeout,
            };
            let writes = multikueue::reconcile(&group, now);
            let read = Planned {
                key: key.clone(),
                workload: shared.clone(),
                local_owner,
                owner,
                writes,
            };
            if let Some(inputs) = inputs
                && let Some(settlement) = Settlement::after(inputs, &read, now)
            {
                still_settled.insert(key.clone(), settlement);
            }
            if read
                .writes
                .iter()
                .any(|w| !matches!(w, Write::RequeueAfter(_)))
            {
                planned.push(read);
            }
        }
        settled.workloads = still_settled;
        json.forget_released();
        planned
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
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        if workers.get(&name).is_some_and(|w| w.fresh(&spec, now)) {
            return;
        }
        let outcome = match self.kubeconfig(client, object).await {
            Err(error) => {
                if let Some(worker) = workers.get_mut(&name) {
                    worker.disconnect(now);
                }
                Connection::BadKubeConfig(error)
            }
            Ok(kubeconfig) => {
                let worker = workers
                    .entry(name.clone())
                    .or_insert_with(|| WorkerConnection::new(now));
                worker.spec = spec;
                if worker.kubeconfig != kubeconfig {
                    worker.kubeconfig = kubeconfig;
                    worker.connected = None;
                    worker.failed_attempts = 0;
                    worker.next_attempt = now;
                }
                probe(worker, now, (&self.origin, &self.wake, &self.touched)).await
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
}

/// A Workload's writes ending, however they end once begun (done, dropped or unwound): the
/// Workload is no longer in flight, what they wrote is handed over and the loop woken.
struct Ended<'a> {
    carrier: &'a Carrier,
    key: &'a Arc<str>,
    written: Vec<Arc<DynamicObject>>,
}

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .carrier
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        in_flight.keys.remove(self.key);
        in_flight.written.append(&mut self.written);
        drop(in_flight);
        self.carrier.wake.wake();
    }
}

/// One Workload's writes, as planned by a pass.
struct Planned {
    key: Arc<str>,
    workload: Arc<Value>,
    /// Its owner here, as JSON.
    local_owner: Option<Arc<Value>>,
    /// Its owner's kind and name.
    owner: Option<(OwnerKind, String)>,
    writes: Vec<Write>,
}

/// The Workloads whose writes are in flight, and the Workloads those that ended wrote here
/// (for the loop's and the queue manager's overlays).
#[derive(Debug, Default)]
struct InFlight {
    keys: std::collections::HashSet<Arc<str>>,
    written: Vec<Arc<DynamicObject>>,
}

/// What carrying out a Workload's writes needs: the clients here and of the connected
/// workers, the recorder, and where to report that they ended.
struct Carrier {
    client: Client,
    remotes: BTreeMap<String, Client>,
    events: EventRecorder,
    in_flight: Arc<std::sync::Mutex<InFlight>>,
    wake: Wake,
}

impl Carrier {
    /// Carries out a Workload's writes: each worker's in order, the workers at once (a
    /// dispatch creates the Job on the winner while the losers' copies are withdrawn), then
    /// those on the manager in order (the check turns Ready once the Job exists). Then hands
    /// what they wrote here to the loop and wakes it.
    async fn carry_out_all(self: Arc<Self>, mut planned: Planned) {
        let mut by_worker: BTreeMap<String, Vec<Write>> = BTreeMap::new();
        let mut here = Vec::new();
        for write in std::mem::take(&mut planned.writes) {
            match write.worker() {
                Some(worker) => by_worker.entry(worker.to_owned()).or_default().push(write),
                None => here.push(write),
            }
        }
        let mut ended = Ended {
            carrier: &self,
            key: &planned.key,
            written: Vec::new(),
        };
        let (carrier, planned) = (&*self, &planned);
        futures::future::join_all(by_worker.into_values().map(|writes| async move {
            for write in writes {
                carrier.carry_out(planned, write).await;
            }
        }))
        .await;
        for write in here {
            if let Some(object) = self.carry_out(planned, write).await {
                ended.written.push(object);
            }
        }
    }

    /// Carries out one write of a Workload's; the manager's Workload when it was written.
    async fn carry_out(&self, planned: &Planned, write: Write) -> Option<Arc<DynamicObject>> {
        let workload = planned.workload.as_ref();
        let (local_owner, owner) = (planned.local_owner.as_ref(), planned.owner.as_ref());
        let client = &self.client;
        let worker = |cluster: &str| self.remotes.get(cluster).cloned();
        let namespace = objects::namespace(workload);
        match write {
            Write::CreateRemote { cluster, object } => {
                let remote = worker(&cluster)?;
                let api: Api<DynamicObject> =
                    Api::namespaced_with(remote, namespace, &resource_of(&object));
                let object = serde_json::from_value::<DynamicObject>(object).ok()?;
                match api.create(&post_params(MANAGER), &object).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        tracing::debug!(%cluster, "multikueue: remote object already there");
                    }
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
                let patch = owner_status_patch(local_owner?, status);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), namespace, &owner_resource(*kind));
                if let Err(error) = api
                    .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(%error, %name, "multikueue: owner status not written");
                }
            }
            Write::WorkloadStatus(status) => {
                // On the condition that the Workload is still the version planned from: the
                // writes run beside the passes, so a pass may have written it since (the
                // merge would replace its admission checks with those read before). A
                // conflict plans the Workload again once these writes end.
                let write = StatusWrite {
                    namespace: namespace.to_owned(),
                    name: objects::name(workload).to_owned(),
                    status,
                };
                let version = tessera_model::json::text(workload, "/metadata/resourceVersion");
                let version = (!version.is_empty()).then(|| version.to_owned());
                return write_status(client.clone(), workload_resource(), write, version).await;
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

/// The merge patch that sets the status of the owner read as `local` to `status` (as Kueue
/// updates it: the fields the worker's copy no longer has removed, not left in place), on the
/// condition that the owner is still the version read: a status copied over a newer owner
/// (unsuspended since) is refused with a conflict, and the owner planned again.
fn owner_status_patch(local: &Value, status: Value) -> Value {
    let before = local.get("status").unwrap_or(&Value::Null);
    let mut patch = json!({"status": merge_patch_between(before, &status)});
    let version = tessera_model::json::text(local, "/metadata/resourceVersion");
    if !version.is_empty() {
        patch["metadata"] = json!({"resourceVersion": version});
    }
    patch
}

/// Each configured worker's copies of the Workload and its owner as its caches show them, or
/// the worker as lost; `None` while a connected worker's caches are still listing.
fn read_workers(
    workers: &BTreeMap<String, WorkerConnection>,
    names: &[String],
    workload: &Value,
    owner: Option<&(OwnerKind, String)>,
) -> Option<BTreeMap<String, Read>> {
    let namespace = objects::namespace(workload);
    let mut read = BTreeMap::new();
    for name in names {
        let shown = match workers.get(name) {
            None => Read::Lost(None),
            Some(worker) => match &worker.connected {
                None => Read::Lost(worker.lost_since),
                Some(connected) => {
                    match connected
                        .caches
                        .read(namespace, objects::name(workload), owner)
                    {
                        Remote::Syncing => return None,
                        Remote::Shown(workload, owner) => Read::Got(workload, owner),
                    }
                }
            },
        };
        read.insert(name.clone(), shown);
    }
    Some(read)
}

/// One worker as read for a Workload: lost since, or its copies of the Workload and its
/// owner (as the caches hold them, or as JSON for the reconciler).
enum Read<T = Arc<DynamicObject>> {
    Lost(Option<SystemTime>),
    Got(Option<T>, Option<T>),
}

impl Read {
    fn into_json(self, json: &mut SerializedEach) -> Read<Arc<Value>> {
        let mut value = |object: Option<Arc<DynamicObject>>| json.value(&object?, |_| {});
        match self {
            Read::Lost(since) => Read::Lost(since),
            Read::Got(workload, owner) => Read::Got(value(workload), value(owner)),
        }
    }
}

/// The manager's own Jobs and JobSets, where a Workload's owner is looked up.
pub struct LocalOwners<'a> {
    pub jobs: &'a Store<Job>,
    pub jobsets: &'a Store<DynamicObject>,
    /// The JobSets' resource, which their cache's keys carry.
    pub jobset_resource: &'a ApiResource,
}

/// A Workload's owner on the manager.
enum LocalOwner {
    Job(Arc<Job>),
    JobSet(Arc<DynamicObject>),
}

impl LocalOwners<'_> {
    fn get(&self, kind: OwnerKind, namespace: &str, name: &str) -> Option<LocalOwner> {
        match kind {
            OwnerKind::Job => self
                .jobs
                .get(&ObjectRef::new(name).within(namespace))
                .map(LocalOwner::Job),
            OwnerKind::JobSet => self
                .jobsets
                .get(&ObjectRef::new_with(name, self.jobset_resource.clone()).within(namespace))
                .map(LocalOwner::JobSet),
        }
    }
}

impl LocalOwner {
    fn resource_version(&self) -> Option<&str> {
        match self {
            LocalOwner::Job(job) => job.metadata.resource_version.as_deref(),
            LocalOwner::JobSet(set) => set.metadata.resource_version.as_deref(),
        }
    }

    /// As JSON with its kind: typed Jobs serialize without it, and the adapters match on it.
    fn to_value(&self, json: &mut SerializedEach) -> Option<Arc<Value>> {
        match self {
            LocalOwner::Job(job) => json.value(job, |value| {
                value["apiVersion"] = json!("batch/v1");
                value["kind"] = json!("Job");
            }),
            LocalOwner::JobSet(set) => json.value(set, |_| {}),
        }
    }
}

/// What the reconciler read for one Workload, by resource version: the Workload, its owner
/// and each worker's copies of both. The reconciler's answer depends on nothing else but
/// the time, and on the time only while a worker is lost, so a Workload read the same as
/// at a pass that wrote nothing for it is left alone until any requeue it asked for
/// ([`Settlement`]).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Inputs {
    workload: String,
    owner: Option<String>,
    workers: Vec<(Option<String>, Option<String>)>,
}

impl Inputs {
    /// `None` when a worker is lost (the answer then depends on the time) or an object has
    /// no resource version.
    fn of(
        workload: &Value,
        owner: Option<&LocalOwner>,
        workers: &BTreeMap<String, Read>,
    ) -> Option<Inputs> {
        let version = |object: &Option<Arc<DynamicObject>>| -> Option<Option<String>> {
            match object {
                None => Some(None),
                Some(object) => Some(Some(object.metadata.resource_version.clone()?)),
            }
        };
        let owner = match owner {
            None => None,
            Some(owner) => Some(owner.resource_version()?.to_owned()),
        };
        let workers = workers
            .values()
            .map(|read| match read {
                Read::Lost(_) => None,
                Read::Got(workload, owner) => Some((version(workload)?, version(owner)?)),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Inputs {
            workload: workload
                .pointer("/metadata/resourceVersion")?
                .as_str()?
                .to_owned(),
            owner,
            workers,
        })
    }
}

/// The AdmissionChecks', MultiKueueClusters' and MultiKueueConfigs' names and resource
/// versions: what every Workload's reconciliation also reads.
#[derive(Debug, Default, PartialEq, Eq)]
struct Context(Vec<(String, String)>);

impl Context {
    fn of(kinds: &[&[Value]]) -> Context {
        Context(
            kinds
                .iter()
                .flat_map(|objects| objects.iter())
                .map(|object| {
                    let version = object
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    (objects::name(object).to_owned(), version.to_owned())
                })
                .collect(),
        )
    }
}

/// The Workloads whose last reconciliation wrote nothing (requeues aside), with what it
/// read, under the context it read them in.
#[derive(Debug, Default)]
struct Settled {
    context: Context,
    /// Which workers were connected.
    connections: Vec<(String, bool)>,
    workloads: BTreeMap<Arc<str>, Settlement>,
}

/// A Workload whose last reconciliation wrote nothing but, at most, asked to be reconciled
/// again after a while: it is left alone while it reads the same, until then.
#[derive(Debug, Clone)]
struct Settlement {
    inputs: Inputs,
    until: Option<SystemTime>,
    /// The Workload's JSON reconciled (the very one, while it is unchanged).
    workload: Arc<Value>,
    /// Its owner's `namespace/name`.
    owner: Option<String>,
}

impl Settlement {
    /// The settlement a reconciliation of `read` (the Workload, its owner, its writes) over
    /// `inputs` at `now` makes: none when it wrote anything but `RequeueAfter`; otherwise
    /// until the soonest requeue.
    fn after(inputs: Inputs, read: &Planned, now: SystemTime) -> Option<Settlement> {
        let mut until: Option<SystemTime> = None;
        for write in &read.writes {
            let Write::RequeueAfter(after) = write else {
                return None;
            };
            let at = now + *after;
            until = Some(until.map_or(at, |u| u.min(at)));
        }
        let namespace = objects::namespace(&read.workload);
        Some(Settlement {
            inputs,
            until,
            workload: read.workload.clone(),
            owner: read
                .owner
                .as_ref()
                .map(|(_, name)| format!("{namespace}/{name}")),
        })
    }

    /// Whether a Workload read as `inputs` at `now` is still settled.
    fn holds(&self, inputs: &Inputs, now: SystemTime) -> bool {
        self.inputs == *inputs && self.before_requeue(now)
    }

    /// Whether the Workload `key`, now `workload`, is still settled without reading it
    /// again: the very JSON reconciled, neither it nor its owner `touched` (here or on a
    /// worker) since, and no requeue due.
    fn untouched(
        &self,
        key: &str,
        workload: &Arc<Value>,
        touched: &TouchedSet,
        now: SystemTime,
    ) -> bool {
        Arc::ptr_eq(&self.workload, workload)
            && !touched.contains(key)
            && self
                .owner
                .as_deref()
                .is_none_or(|owner| !touched.contains(owner))
            && self.before_requeue(now)
    }

    /// Whether `now` is before the requeue asked for, if any.
    fn before_requeue(&self, now: SystemTime) -> bool {
        self.until.is_none_or(|until| now < until)
    }
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
/// failure) and asks its API for its version; a newly connected worker's caches start
/// watching the objects of `origin`, marking `touched` and waking `wake`.
async fn probe(
    worker: &mut WorkerConnection,
    now: SystemTime,
    (origin, wake, touched): (&str, &Wake, &Touched),
) -> Connection {
    if worker.connected.is_none() && now < worker.next_attempt {
        // Kueue waits for the next attempt without touching the status.
        let error = worker.last_error.clone();
        return failed(worker, error, now, false);
    }
    let client = match worker.client() {
        Some(client) => client,
        None => match client_from(&worker.kubeconfig).await {
            Ok(client) => client,
            Err(error) => return failed(worker, error, now, true),
        },
    };
    worker.probed_at = Some(now);
    match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => {
            if worker.connected.is_none() {
                let caches = RemoteCaches::start(&client, origin, (wake.clone(), touched.clone()));
                worker.connected = Some(Connected { client, caches });
            }
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
    worker.disconnect(now);
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

/// The Workload `default/job-a`, planned to write `writes`.
#[cfg(test)]
fn planned(key: Arc<str>, writes: Vec<Write>) -> Planned {
    Planned {
        key,
        workload: Arc::new(json!({"metadata": {"name": "job-a", "namespace": "default",
            "resourceVersion": "7"}})),
        local_owner: None,
        owner: None,
        writes,
    }
}

#[cfg(test)]
mod settled_tests {
    use super::*;

    fn object(version: Option<&str>) -> Option<Arc<DynamicObject>> {
        let mut object = DynamicObject::new("job-a", &workload_resource()).within("default");
        object.metadata.resource_version = version.map(str::to_owned);
        Some(Arc::new(object))
    }

    fn workers(reads: Vec<Read>) -> BTreeMap<String, Read> {
        reads
            .into_iter()
            .enumerate()
            .map(|(i, read)| (format!("worker{i}"), read))
            .collect()
    }

    #[test]
    fn what_a_workload_was_read_as_decides_whether_it_is_reconciled_again() {
        let workload = json!({"metadata": {"name": "job-a", "resourceVersion": "7"}});
        let read = |remote: &str| {
            workers(vec![
                Read::Got(object(Some(remote)), None),
                Read::Got(None, None),
            ])
        };
        let first = Inputs::of(&workload, None, &read("3"));
        assert!(first.is_some());
        // The same versions read again: the same inputs, so a settled Workload is skipped.
        assert_eq!(first, Inputs::of(&workload, None, &read("3")));
        // A worker's copy changed: reconciled again.
        assert_ne!(first, Inputs::of(&workload, None, &read("4")));
        // The manager's Workload changed: reconciled again.
        let written = json!({"metadata": {"name": "job-a", "resourceVersion": "8"}});
        assert_ne!(first, Inputs::of(&written, None, &read("3")));
        // A lost worker makes the answer depend on the time: never skipped.
        let lost = workers(vec![Read::Got(object(Some("3")), None), Read::Lost(None)]);
        assert_eq!(Inputs::of(&workload, None, &lost), None);
        // An object without a resource version cannot be compared: never skipped.
        let unversioned = workers(vec![Read::Got(object(None), None)]);
        assert_eq!(Inputs::of(&workload, None, &unversioned), None);
        let bare = json!({"metadata": {"name": "job-a"}});
        assert_eq!(Inputs::of(&bare, None, &read("3")), None);
    }

    #[test]
    fn a_workload_that_only_asked_to_be_requeued_is_settled_until_then() {
        let inputs = Inputs {
            workload: "7".to_owned(),
            owner: None,
            workers: vec![],
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let minutes = |m: u64| Duration::from_secs(60 * m);
        // Nothing written: settled for as long as it reads the same.
        let key: Arc<str> = Arc::from("default/job-a");
        let quiet = Settlement::after(inputs.clone(), &planned(key.clone(), vec![]), now);
        assert!(
            quiet
                .as_ref()
                .is_some_and(|s| s.holds(&inputs, now + minutes(600)))
        );
        // Only requeues: settled until the soonest.
        let requeues = vec![
            Write::RequeueAfter(minutes(15)),
            Write::RequeueAfter(minutes(5)),
        ];
        let requeued = Settlement::after(inputs.clone(), &planned(key.clone(), requeues), now);
        let Some(requeued) = requeued else {
            panic!("a requeue alone settles");
        };
        assert!(requeued.holds(&inputs, now + minutes(4)));
        assert!(!requeued.holds(&inputs, now + minutes(5)));
        // Read differently: reconciled again at once.
        let changed = Inputs {
            workload: "8".to_owned(),
            ..inputs.clone()
        };
        assert!(!requeued.holds(&changed, now));
        // Any other write: not settled.
        let writes = vec![
            Write::OwnerStatus(json!({"active": 1})),
            Write::RequeueAfter(minutes(15)),
        ];
        let written = Settlement::after(inputs, &planned(key, writes), now);
        assert!(written.is_none());
    }

    #[test]
    fn a_settled_workload_is_left_unread_while_nothing_it_reads_is_touched() {
        let key = "default/job-a";
        let inputs = Inputs {
            workload: "7".to_owned(),
            owner: None,
            workers: vec![],
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut read = planned(
            Arc::from(key),
            vec![Write::RequeueAfter(Duration::from_secs(60))],
        );
        read.owner = Some((OwnerKind::Job, "train".to_owned()));
        let Some(settlement) = Settlement::after(inputs, &read, now) else {
            panic!("a requeue alone settles");
        };
        let same = read.workload.clone();
        // The same JSON at the same version, but another copy: read again.
        let copy = Arc::new(read.workload.as_ref().clone());
        let touching = |keys: &[&str]| {
            let touched = Touched::default();
            for key in keys {
                let (namespace, name) = key.split_once('/').unwrap_or_default();
                let object = DynamicObject::new(name, &workload_resource()).within(namespace);
                touched.event(&Ok(kube::runtime::watcher::Event::Apply(object)));
            }
            touched.take()
        };
        let cases = [
            // (what, the Workload now, touched, at, left unread)
            ("nothing changed", &same, touching(&[]), now, true),
            (
                "another Workload's copies",
                &same,
                touching(&["default/job-b"]),
                now,
                true,
            ),
            (
                "its copies on a worker",
                &same,
                touching(&[key]),
                now,
                false,
            ),
            (
                "its owner, here or on a worker",
                &same,
                touching(&["default/train"]),
                now,
                false,
            ),
            (
                "a namesake of its owner elsewhere",
                &same,
                touching(&["team/train"]),
                now,
                true,
            ),
            ("a new version of it", &copy, touching(&[]), now, false),
            (
                "its requeue due",
                &same,
                touching(&[]),
                now + Duration::from_secs(60),
                false,
            ),
        ];
        for (what, workload, touched, at, unread) in cases {
            assert_eq!(
                settlement.untouched(key, workload, &touched, at),
                unread,
                "{what}"
            );
        }
    }

    #[test]
    fn the_checks_clusters_and_configs_are_the_context() {
        let check = |version: &str| json!({"metadata": {"name": "mk", "resourceVersion": version}});
        let a = Context::of(&[&[check("1")], &[]]);
        assert_eq!(a, Context::of(&[&[check("1")], &[]]));
        assert_ne!(a, Context::of(&[&[check("2")], &[]]));
        assert_ne!(a, Context::of(&[&[check("1"), check("1")], &[]]));
    }
}

#[cfg(test)]
mod carrier_tests {
    use super::*;
    use futures::StreamExt;

    fn answer(_: &str, _: &str) -> u16 {
        200
    }

    fn recorder() -> EventRecorder {
        EventRecorder::start(
            crate::shell::tests::recording(answer).0,
            COMPONENT,
            tessera_model::clock::fixed(SystemTime::UNIX_EPOCH),
        )
    }

    /// Workload `default/job-a` at resourceVersion 7 planned with `writes`.
    #[tokio::test]
    async fn a_workloads_writes_end_by_handing_back_what_they_wrote_and_waking_the_loop() {
        let (client, seen) = crate::shell::tests::recording(answer);
        let (wake, mut wakes) = Wake::channel();
        let in_flight: Arc<std::sync::Mutex<InFlight>> = Arc::default();
        let key: Arc<str> = Arc::from("default/job-a");
        in_flight
            .lock()
            .expect("in flight")
            .keys
            .insert(key.clone());
        let carrier = Carrier {
            client: client.clone(),
            remotes: BTreeMap::from([("worker1".to_owned(), client)]),
            events: recorder(),
            in_flight: in_flight.clone(),
            wake,
        };
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "job-a", "namespace": "default"}});
        let planned = planned(
            key.clone(),
            vec![
                Write::CreateRemote {
                    cluster: "worker1".to_owned(),
                    object: job,
                },
                // A worker this manager has no client for: skipped, the rest carried out.
                Write::CreateRemote {
                    cluster: "worker2".to_owned(),
                    object: json!({"kind": "Workload", "metadata": {"name": "job-a"}}),
                },
                Write::WorkloadStatus(json!({"clusterName": "worker1"})),
            ],
        );
        Arc::new(carrier).carry_out_all(planned).await;
        let log = seen.lock().expect("log").clone();
        assert!(
            log.last()
                .is_some_and(|status| status.contains(r#""resourceVersion":"7""#)),
            "the status written on the version planned from: {log:?}"
        );
        assert_eq!(
            requests(&seen),
            [
                "POST /apis/batch/v1/namespaces/default/jobs",
                "PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/job-a/status",
            ],
            "in order, the worker without a client skipped"
        );
        {
            let mut in_flight = in_flight.lock().expect("in flight");
            assert!(!in_flight.keys.contains(&key), "no longer in flight");
            assert_eq!(
                std::mem::take(&mut in_flight.written).len(),
                1,
                "the Workload written here"
            );
        }
        assert_eq!(wakes.next().await, Some(()), "the loop woken");
    }

    /// The requests seen so far, as `METHOD path` (without the query).
    fn requests(log: &std::sync::Mutex<Vec<String>>) -> Vec<String> {
        log.lock()
            .expect("log")
            .iter()
            .map(|request| {
                let mut words = request.split(' ');
                let method = words.next().unwrap_or_default();
                let path = words.next().unwrap_or_default();
                format!("{method} {}", path.split('?').next().unwrap_or_default())
            })
            .collect()
    }

    #[tokio::test]
    async fn a_dispatch_creates_the_job_on_the_winner_while_the_loser_is_withdrawn() {
        use tokio::sync::Semaphore;
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let open = || Arc::new(Semaphore::new(Semaphore::MAX_PERMITS));
        // worker1 (the loser, first by name) answers only once let.
        let loser_gate = Arc::new(Semaphore::new(0));
        let client = |gate| crate::shell::tests::recording_into(answer, log.clone(), gate);
        let (wake, _wakes) = Wake::channel();
        let carrier = Carrier {
            client: client(open()),
            remotes: BTreeMap::from([
                ("worker1".to_owned(), client(loser_gate.clone())),
                ("worker2".to_owned(), client(open())),
            ]),
            events: recorder(),
            in_flight: Arc::default(),
            wake,
        };
        let planned = planned(
            Arc::from("default/job-a"),
            vec![
                Write::RemoveRemote {
                    cluster: "worker1".to_owned(),
                    owner: None,
                    workload: true,
                },
                Write::CreateRemote {
                    cluster: "worker2".to_owned(),
                    object: json!({"apiVersion": "batch/v1", "kind": "Job",
                        "metadata": {"name": "job-a", "namespace": "default"}}),
                },
                Write::WorkloadStatus(json!({"clusterName": "worker2"})),
            ],
        );
        let writes = tokio::spawn(Arc::new(carrier).carry_out_all(planned));
        let job = "POST /apis/batch/v1/namespaces/default/jobs".to_owned();
        let status = "PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/job-a/status";
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while !requests(&log).contains(&job) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "the Job created while the loser has not answered: {:?}",
            requests(&log)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !requests(&log).iter().any(|r| r == status),
            "the check is not written while a worker's write is in flight: {:?}",
            requests(&log)
        );
        loser_gate.add_permits(Semaphore::MAX_PERMITS / 2);
        writes.await.expect("the writes end");
        let seen = requests(&log);
        assert_eq!(
            seen.last().map(String::as_str),
            Some(status),
            "the manager's Workload written last: {seen:?}"
        );
        assert_eq!(
            seen.iter()
                .filter(|r| r.ends_with("/namespaces/default/workloads/job-a"))
                .count(),
            2,
            "the loser's copy withdrawn (finalizer, then delete): {seen:?}"
        );
    }
}

#[cfg(test)]
mod owner_status_tests {
    use super::*;

    #[test]
    fn an_owner_status_replaces_the_one_read_on_the_version_read() {
        let suspended = json!({"conditions": [{"type": "Suspended", "status": "True"}]});
        let cases = [
            // (the local owner, the worker's status, the patch)
            (
                // Unsuspended here: the adapter's Suspended condition goes with the copy.
                json!({"metadata": {"resourceVersion": "7"}, "status": suspended}),
                json!({}),
                json!({"metadata": {"resourceVersion": "7"}, "status": {"conditions": null}}),
            ),
            (
                json!({"metadata": {"resourceVersion": "8"}, "status": {"active": 1}}),
                json!({"active": 0, "ready": 0}),
                json!({"metadata": {"resourceVersion": "8"},
                    "status": {"active": 0, "ready": 0}}),
            ),
            (
                json!({"metadata": {"resourceVersion": "9"}}),
                json!({"active": 1}),
                json!({"metadata": {"resourceVersion": "9"}, "status": {"active": 1}}),
            ),
            (
                json!({"status": {"uncountedTerminatedPods": {"succeeded": ["a"]}}}),
                json!({"uncountedTerminatedPods": {}}),
                json!({"status": {"uncountedTerminatedPods": {"succeeded": null}}}),
            ),
        ];
        for (local, status, want) in cases {
            let patch = owner_status_patch(&local, status.clone());
            assert_eq!(patch, want, "{local} to {status}");
            let mut patched = local.clone();
            json_patch::merge(&mut patched, &patch);
            assert_eq!(patched["status"], status, "{local} to {status}");
        }
    }
}
