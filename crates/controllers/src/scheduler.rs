//! The scheduler shell: watches pods, nodes and the DRA objects; after each burst of changes
//! (and every few seconds) it takes the pods waiting for one of its scheduler names, highest
//! priority first then oldest, and places them one at a time with
//! [`tessera_scheduler::Scheduler`] over one snapshot, booking each decision before the next.
//! A placement is written as upstream's binding cycle does: claims allocated and reserved
//! (PreBind), then `pods/binding`, and a `Scheduled` event. A pod that fits nowhere gets the
//! `PodScheduled=False` condition (reason `Unschedulable`) and a `FailedScheduling` event with
//! upstream's message, each once per message. Pods whose claims are not created yet wait
//! silently (upstream's PreEnqueue). A pod whose volumes VolumeBinding pre-bound or asked to
//! provision is held unbound (assumed on its node) until they are bound
//! (`tessera_storage::prebind`), in a cycle the pass does not wait for; a failure (the
//! provisioner sent a claim back, the bind timeout) is a `FailedScheduling` with reason
//! `SchedulerError`, and the pod is tried again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use futures::StreamExt;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::storage::v1::{CSIDriver, CSIStorageCapacity, StorageClass};
use k8s_openapi::jiff::Timestamp;
use kube::api::Patch;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::json;
use tessera_model::json::text;
use tessera_model::pod_claims::claim_names;
use tessera_scheduler::extended::{ExtendedClaim, special_claim_owner};
use tessera_scheduler::preemption::{Budget, Nomination, pod_group};
use tessera_scheduler::profile::Profile;
use tessera_scheduler::score::Strategy;
use tessera_scheduler::volumes::Volumes;
use tessera_scheduler::{Decision, Scheduler, node_info};
use tessera_storage::prebind;
use tessera_storage::volume_binding::Reservation;

use tessera_model::clock::Clock;

use crate::assumed::Assumed;
use crate::pacing::{Pacing, next_paced_pass};
use crate::resource_claims::allocate_and_reserve;
use crate::shell::{EventRecorder, all, patch_params, post_params, watched};
use tessera_workloads::resource_claim::{DELETE_PROTECTION, protected};

/// The field manager of the scheduler's writes (upstream's User-Agent, `kube-scheduler`).
pub const MANAGER: &str = tessera_model::managers::KUBE_SCHEDULER;

/// The event source (reportingController) of the default profile.
pub const EVENT_SOURCE: &str = "default-scheduler";

/// Settings: the profiles served, one per `schedulerName`, and the clock.
#[derive(Clone)]
pub struct SchedulerConfig {
    /// The profiles (from a KubeSchedulerConfiguration file, or the defaults).
    pub profiles: Vec<Profile>,
    /// Where the scheduler reads the time (conditions, events, gang timeouts).
    pub clock: Clock,
    /// kube-scheduler's metrics, when the platform serves them.
    pub metrics: Option<Arc<tessera_metrics::components::Registries>>,
}

impl std::fmt::Debug for SchedulerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerConfig")
            .field("profiles", &self.profiles)
            .finish_non_exhaustive()
    }
}

fn named(name: &str) -> Profile {
    Profile {
        scheduler_name: name.into(),
        ..Profile::default()
    }
}

impl SchedulerConfig {
    /// The embedded platform's default scheduler: `default-scheduler` and `tessera` pods,
    /// or the profiles of a configuration file.
    pub fn embedded(profiles: Option<Vec<Profile>>) -> SchedulerConfig {
        SchedulerConfig {
            profiles: profiles
                .unwrap_or_else(|| vec![named("default-scheduler"), named("tessera")]),
            clock: Arc::new(SystemTime::now),
            metrics: None,
        }
    }

    /// A second scheduler beside a cluster's own: `tessera` pods (or the file's profiles).
    pub fn second(profiles: Option<Vec<Profile>>) -> SchedulerConfig {
        SchedulerConfig {
            profiles: profiles.unwrap_or_else(|| vec![named("tessera")]),
            clock: Arc::new(SystemTime::now),
            metrics: None,
        }
    }

    fn names(&self) -> Vec<String> {
        self.profiles
            .iter()
            .map(|p| p.scheduler_name.clone())
            .collect()
    }

    fn profile_for(&self, pod: &Pod) -> Option<&Profile> {
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        self.profiles.iter().find(|p| p.scheduler_name == name)
    }
}

fn waiting(pod: &Pod, names: &[String]) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let scheduler = spec
        .scheduler_name
        .as_deref()
        .unwrap_or("default-scheduler");
    spec.node_name.as_deref().is_none_or(str::is_empty)
        && pod.metadata.deletion_timestamp.is_none()
        && !finished
        && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
        && names.iter().any(|n| n == scheduler)
}

/// Claims by (namespace, name).
type ClaimsByName<'c> = HashMap<(&'c str, &'c str), &'c ResourceClaim>;

fn claims_by_name(claims: &[Arc<ResourceClaim>]) -> ClaimsByName<'_> {
    claims
        .iter()
        .map(AsRef::as_ref)
        .map(|c| {
            let namespace = c.metadata.namespace.as_deref().unwrap_or_default();
            (
                (namespace, c.metadata.name.as_deref().unwrap_or_default()),
                c,
            )
        })
        .collect()
}

/// The pod's claims in its order, or `None` while one does not exist yet.
fn pod_claims(pod: &Pod, claims: &ClaimsByName<'_>) -> Option<Vec<ResourceClaim>> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    claim_names(pod)
        .into_iter()
        .map(|(_, name)| {
            let name = name?;
            claims
                .get(&(namespace, name.as_str()))
                .map(|&claim| claim.clone())
        })
        .collect()
}

/// Runs the scheduler until the task is dropped.
pub async fn run(client: Client, config: SchedulerConfig) {
    run_reporting_sync(client, config, None).await;
}

/// [`run`], telling `synced` once every watched kind has been listed (kube-scheduler's
/// `WaitForCacheSync`): from then on its snapshots hold the whole cluster.
pub async fn run_reporting_sync(
    client: Client,
    config: SchedulerConfig,
    synced: Option<tokio::sync::oneshot::Sender<()>>,
) {
    let (pods, pod_changes) = crate::trimmed_pods::watched_trimmed(client.clone());
    let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
    let (claims, claim_changes) = watched(Api::<ResourceClaim>::all(client.clone()));
    let (slices, slice_changes) = watched(Api::<ResourceSlice>::all(client.clone()));
    let (classes, class_changes) = watched(Api::<DeviceClass>::all(client.clone()));
    let (namespaces, namespace_changes) = watched(Api::<Namespace>::all(client.clone()));
    let (budgets, budget_changes) = watched(Api::<PodDisruptionBudget>::all(client.clone()));
    let storage = StorageStores::watch(&client);
    // As kube-scheduler, nothing is scheduled before every kind has been listed: a pass over
    // half a cluster would report pods unschedulable for want of nodes not yet seen.
    let all_listed = Arc::new(AtomicBool::new(false));
    let listing = {
        let (pods, nodes, claims) = (pods.clone(), nodes.clone(), claims.clone());
        let (slices, classes) = (slices.clone(), classes.clone());
        let (namespaces, budgets) = (namespaces.clone(), budgets.clone());
        let all_listed = all_listed.clone();
        let storage = storage.stores.clone();
        async move {
            let listed = storage.wait_until_ready().await
                && pods.wait_until_ready().await.is_ok()
                && nodes.wait_until_ready().await.is_ok()
                && claims.wait_until_ready().await.is_ok()
                && slices.wait_until_ready().await.is_ok()
                && classes.wait_until_ready().await.is_ok()
                && namespaces.wait_until_ready().await.is_ok()
                && budgets.wait_until_ready().await.is_ok();
            all_listed.store(listed, Ordering::Release);
            if let Some(synced) = synced.filter(|_| listed) {
                // The receiver may have stopped listening; nothing to do then.
                synced.send(()).ok();
            }
        }
    };
    let mut changes = futures::stream::select_all([
        // Its end starts the first pass.
        futures::stream::once(listing).boxed(),
        pod_changes,
        node_changes,
        claim_changes,
        slice_changes,
        class_changes,
        namespace_changes,
        budget_changes,
    ]);
    for change in storage.changes {
        changes.push(change);
    }
    let storage = storage.stores;
    let writer = Writer {
        events: EventRecorder::start(client.clone(), EVENT_SOURCE, config.clock.clone()),
        clock: config.clock.clone(),
        client: client.clone(),
        assumed: Arc::default(),
    };
    let mut resync = tokio::time::interval(Duration::from_secs(5));
    let mut reported: HashMap<String, String> = HashMap::new();
    // Binding cycles that run on past their pass; dropped (aborted) with the loop.
    let mut detached = Detached::default();
    // What each node and pod gave the last pass's view, so a pass reads only what changed.
    let mut node_infos = node_info::BuildCache::default();
    let mut pacing = Pacing::default();
    while next_paced_pass(&mut changes, &mut resync, &mut pacing).await {
        if !all_listed.load(Ordering::Acquire) {
            continue;
        }
        let names = config.names();
        let metrics = config.metrics.as_ref().map(|m| &m.scheduler);
        if !pods.state().iter().any(|p| waiting(p, &names)) {
            if let Some(metrics) = metrics {
                metrics.set_pending(0, 0, gated(&pods.state(), &names));
            }
            continue;
        }
        // The watch cache's objects, shared rather than copied, with the bindings of earlier
        // passes it may not show yet.
        let (all_pods, all_claims) = {
            let mut assumed = writer.assumed.lock().unwrap_or_else(|p| p.into_inner());
            let now = tokio::time::Instant::now();
            (
                assumed.pods(pods.state(), now),
                assumed.claims(claims.state(), now),
            )
        };
        let named_claims = claims_by_name(&all_claims);
        let special_claims: HashMap<&str, &ResourceClaim> = all_claims
            .iter()
            .filter_map(|c| Some((special_claim_owner(c)?, c.as_ref())))
            .collect();
        let mut queue: Vec<&Pod> = all_pods
            .iter()
            .map(AsRef::as_ref)
            .filter(|p| waiting(p, &names))
            .collect();
        // Borrowed keys: a sort reads them for every comparison.
        queue.sort_by(|a, b| queue_order(a).cmp(&queue_order(b)));
        let (pass_started, queued) = (std::time::Instant::now(), queue.len());
        let mut scheduler = Scheduler::new(
            node_info::build_cached(
                &mut node_infos,
                nodes.state().iter().map(AsRef::as_ref),
                all_pods.iter().map(AsRef::as_ref),
            ),
            all(&slices),
            all(&classes),
            all_claims.iter().cloned(),
            Strategy::default(),
        )
        .with_namespaces(
            all(&namespaces)
                .into_iter()
                .map(|n| {
                    (
                        n.metadata.name.unwrap_or_default(),
                        n.metadata.labels.unwrap_or_default(),
                    )
                })
                .collect(),
        )
        .with_pods(&all_pods)
        .with_budgets(all(&budgets).iter().filter_map(budget).collect());
        // VolumeBinding reads the storage objects only for pods that name a claim.
        if queue
            .iter()
            .any(|p| tessera_scheduler::volumes::names_claims(p))
        {
            scheduler = scheduler.with_volumes(storage.snapshot());
        }
        // Gangs first, whole; then single pods.
        let groups = pod_groups(&client, &queue, &all_pods).await;
        for group in &groups {
            if let Some(profile) = group.waiting.first().and_then(|p| config.profile_for(p)) {
                scheduler.set_profile(profile);
            }
            schedule_gang(
                &writer,
                &mut scheduler,
                group,
                &named_claims,
                &mut reported,
                &mut detached,
            )
            .await;
        }
        let mut binder = Binder::detaching(&writer, &mut detached);
        let mut unschedulable_pods = 0;
        let gated_pods = gated(&all_pods, &names);
        for pod in queue.into_iter().filter(|p| pod_group(p).is_none()) {
            let profile_name = config
                .profile_for(pod)
                .map(|p| p.scheduler_name.clone())
                .unwrap_or_default();
            if let Some(profile) = config.profile_for(pod) {
                scheduler.set_profile(profile);
            }
            let Some(pod_claims) = pod_claims(pod, &named_claims) else {
                continue;
            };
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            if let Some(stale) = special_claims.get(uid) {
                // A special claim of an earlier attempt whose binding never happened: as
                // upstream's PostFilter, delete it and try the pod afresh once it is gone.
                delete_claim(&writer, stale).await;
                continue;
            }
            let key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            let attempt = std::time::Instant::now();
            let result = scheduler.schedule(pod, &pod_claims);
            if let Some(metrics) = metrics {
                let outcome = if result.is_ok() {
                    tessera_metrics::components::scheduling_result::SCHEDULED
                } else {
                    unschedulable_pods += 1;
                    tessera_metrics::components::scheduling_result::UNSCHEDULABLE
                };
                metrics.attempt(outcome, &profile_name, attempt.elapsed().as_secs_f64());
            }
            match result {
                Ok(decision) => {
                    // As upstream: the decision is booked now and bound asynchronously; a
                    // binding that fails leaves the pod unbound for the next pass.
                    reported.remove(&key);
                    scheduler.assume(pod, &decision, &pod_claims);
                    binder.start(pod, pod_claims, decision).await;
                }
                Err(fit) => {
                    let mut message = fit.to_string();
                    if !waiting_for_victims(pod, &all_pods) {
                        let preemption = scheduler.preempt(pod, &pod_claims, &fit);
                        if let Some(metrics) = metrics {
                            metrics.preemption(preemption.as_ref().map_or(0, |n| n.victims.len()));
                        }
                        match preemption {
                            Ok(nomination) => preempt(&writer, pod, &nomination).await,
                            Err(none) => {
                                message = format!("{message} preemption: {}", none.message())
                            }
                        }
                    }
                    if reported.get(&key) != Some(&message) {
                        unschedulable(&writer, pod, &message).await;
                        reported.insert(key, message);
                    }
                }
            }
        }
        binder.finish().await;
        if let Some(metrics) = metrics {
            metrics.set_pending(0, unschedulable_pods, gated_pods);
        }
        tracing::debug!(
            queued,
            unschedulable = unschedulable_pods,
            pods = all_pods.len(),
            took_us = pass_started.elapsed().as_micros(),
            "scheduling pass"
        );
    }
}

/// The order a pass takes pending pods in: higher priority first, then older, then by name.
fn queue_order(pod: &Pod) -> (std::cmp::Reverse<i32>, Option<Timestamp>, Option<&str>) {
    (
        std::cmp::Reverse(pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)),
        pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        pod.metadata.name.as_deref(),
    )
}

/// Pods of these profiles that wait behind scheduling gates (`scheduler_pending_pods{queue="gated"}`).
fn gated(pods: &[Arc<Pod>], names: &[String]) -> usize {
    pods.iter()
        .filter(|pod| {
            let Some(spec) = pod.spec.as_ref() else {
                return false;
            };
            let scheduler = spec
                .scheduler_name
                .as_deref()
                .unwrap_or("default-scheduler");
            spec.node_name.as_deref().is_none_or(str::is_empty)
                && names.iter().any(|n| n == scheduler)
                && spec
                    .scheduling_gates
                    .as_ref()
                    .is_some_and(|g| !g.is_empty())
        })
        .count()
}

/// What the scheduler writes through: the API, and events recorded in the background.
#[derive(Clone)]
struct Writer {
    client: Client,
    events: EventRecorder,
    clock: Clock,
    /// Bindings made and not yet seen through the watch.
    assumed: Arc<std::sync::Mutex<Assumed>>,
}

impl Writer {
    /// Records what a binding cycle wrote, for the passes that follow.
    fn assume(&self, record: impl FnOnce(&mut Assumed, tokio::time::Instant)) {
        let mut assumed = self.assumed.lock().unwrap_or_else(|p| p.into_inner());
        record(&mut assumed, tokio::time::Instant::now());
    }
}

/// Binding cycles that run on past the pass that started them, their pods assumed on their
/// nodes meanwhile (upstream's assume, then bind asynchronously).
#[derive(Default)]
struct Detached {
    /// Cycles waiting for their pods' volumes to bind (VolumeBinding's PreBind, up to
    /// [`prebind::BIND_TIMEOUT_SECONDS`]).
    volumes: tokio::task::JoinSet<()>,
    /// Bindings of pods without claims or volumes, at most [`BINDING_CONCURRENCY`] at a time:
    /// the next pass need not wait for them, since the pod counts on its node from the start.
    bindings: tokio::task::JoinSet<()>,
}

/// Binding cycles in flight, each a task of its own (so that they spread over the runtime's
/// threads), at most [`BINDING_CONCURRENCY`] at a time. A cycle starts as soon as its pod
/// is placed, as upstream binds while it goes on scheduling the next pod.
struct Binder<'w> {
    writer: &'w Writer,
    /// Cycles the pass waits for: those that write claims, whose allocations the next pass
    /// reads back as written.
    running: tokio::task::JoinSet<()>,
    /// Where the other cycles run on past the pass (none: in `running`).
    detached: Option<&'w mut Detached>,
}

impl<'w> Binder<'w> {
    fn new(writer: &'w Writer) -> Binder<'w> {
        Binder {
            writer,
            running: tokio::task::JoinSet::new(),
            detached: None,
        }
    }

    /// A binder whose cycles that write no claims go on in `detached`, the pod assumed on
    /// its node meanwhile, so that the pass does not wait for them.
    fn detaching(writer: &'w Writer, detached: &'w mut Detached) -> Binder<'w> {
        Binder {
            detached: Some(detached),
            ..Binder::new(writer)
        }
    }

    /// Starts a binding cycle, first waiting for room if too many are in flight.
    async fn start(&mut self, pod: &Pod, claims: Vec<ResourceClaim>, decision: Decision) {
        let pod = identity(pod);
        // A cycle that writes claims is waited for (the next pass reads its allocations back as
        // written), unless it waits for volumes, which may take minutes.
        let writes_claims = !claims.is_empty() || decision.extended.is_some();
        let detach = !writes_claims || !decision.volumes.is_empty();
        if detach && let Some(detached) = self.detached.as_mut() {
            // Reap the cycles done; the pod counts on its node while it binds.
            while detached.volumes.try_join_next().is_some() {}
            while detached.bindings.try_join_next().is_some() {}
            let cycles = if decision.volumes.is_empty() {
                if detached.bindings.len() >= BINDING_CONCURRENCY {
                    detached.bindings.join_next().await;
                }
                &mut detached.bindings
            } else {
                &mut detached.volumes
            };
            let writer = self.writer.clone();
            writer.assume(|assumed, now| assumed.bound(&pod, &decision.node, now));
            cycles.spawn(async move {
                // Boxed: the task's future stays small, so spawning and finishing it copy little.
                if let Err(error) = Box::pin(bind(&writer, &pod, &claims, &decision)).await {
                    writer.assume(|assumed, _| assumed.forget(&pod));
                    tracing::debug!(pod = ?pod.metadata.name, %error, "binding failed; retrying");
                }
            });
            return;
        }
        if self.running.len() >= BINDING_CONCURRENCY {
            self.running.join_next().await;
        }
        let writer = self.writer.clone();
        self.running.spawn(async move {
            // Boxed: the task's future stays small, so spawning and finishing it copy little.
            if let Err(error) = Box::pin(bind(&writer, &pod, &claims, &decision)).await {
                tracing::debug!(pod = ?pod.metadata.name, %error, "binding failed; retrying");
            }
        });
    }

    /// Waits for every cycle started.
    async fn finish(mut self) {
        while self.running.join_next().await.is_some() {}
    }
}

/// The binding cycles of a gang, all started at once; those waiting for volumes go on past
/// the pass in `detached`, as single pods' do.
async fn bind_all(
    writer: &Writer,
    binds: Vec<(&Pod, Vec<ResourceClaim>, Decision)>,
    detached: &mut Detached,
) {
    let mut binder = Binder::detaching(writer, detached);
    for (pod, claims, decision) in binds {
        binder.start(pod, claims, decision).await;
    }
    binder.finish().await;
}

/// The pod as a binding cycle needs it: who it is (name, namespace, uid), not its spec.
fn identity(pod: &Pod) -> Pod {
    Pod {
        metadata: kube::api::ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// How many binding cycles run at once: enough that the API server has requests to decide
/// while its store commits the previous ones (upstream bounds them only by goroutines; 64
/// left the embedded API idle a fifth of the time waiting for commits).
const BINDING_CONCURRENCY: usize = 256;

/// A gang waiting to be placed.
struct Gang<'a> {
    namespace: String,
    name: String,
    /// Members not yet bound, in queue order.
    waiting: Vec<&'a Pod>,
    /// How many more must be placed (minMember less those already bound).
    needed: usize,
    /// The minimum the group declares.
    min_member: usize,
    /// All members must share a value of this node label.
    topology_key: Option<String>,
    /// When the group gives up waiting for members.
    timeout: Option<std::time::Duration>,
}

/// PodGroups (scheduler-plugins' `scheduling.x-k8s.io/v1alpha1`) by namespace and name; none
/// when the CRD is not installed.
async fn pod_group_objects(client: &Client) -> HashMap<(String, String), serde_json::Value> {
    let resource = kube::discovery::ApiResource {
        group: "scheduling.x-k8s.io".into(),
        version: "v1alpha1".into(),
        api_version: "scheduling.x-k8s.io/v1alpha1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
    let Ok(list) = api.list(&Default::default()).await else {
        return HashMap::new();
    };
    list.items
        .into_iter()
        .filter_map(|o| {
            let key = (o.metadata.namespace.clone()?, o.metadata.name.clone()?);
            Some((key, serde_json::to_value(&o).ok()?))
        })
        .collect()
}

/// The gangs among the waiting pods: minMember from the PodGroup (or, without one, every
/// pod carrying the label), members already bound counted.
async fn pod_groups<'a>(client: &Client, queue: &[&'a Pod], pods: &[Arc<Pod>]) -> Vec<Gang<'a>> {
    let mut waiting: std::collections::BTreeMap<(String, String), Vec<&'a Pod>> =
        Default::default();
    for pod in queue {
        if let Some(group) = pod_group(pod) {
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            waiting
                .entry((namespace, group.to_string()))
                .or_default()
                .push(pod);
        }
    }
    if waiting.is_empty() {
        return Vec::new();
    }
    let objects = pod_group_objects(client).await;
    waiting
        .into_iter()
        .map(|((namespace, name), members)| {
            let all_members = pods.iter().filter(|p| {
                p.metadata.namespace.as_deref() == Some(namespace.as_str())
                    && pod_group(p) == Some(name.as_str())
                    && p.metadata.deletion_timestamp.is_none()
            });
            let bound = all_members
                .clone()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            let object = objects.get(&(namespace.clone(), name.clone()));
            let min_member = object
                .and_then(|o| o.pointer("/spec/minMember"))
                .and_then(serde_json::Value::as_u64)
                .map_or_else(
                    || all_members.count(),
                    |m| usize::try_from(m).unwrap_or(usize::MAX),
                );
            let topology_key = object
                .and_then(|o| o.pointer("/metadata/annotations/tessera.dev~1gang-topology"))
                .and_then(serde_json::Value::as_str)
                .map(String::from);
            let timeout = object
                .and_then(|o| o.pointer("/spec/scheduleTimeoutSeconds"))
                .and_then(serde_json::Value::as_u64)
                .map(std::time::Duration::from_secs);
            Gang {
                namespace,
                name,
                needed: min_member.saturating_sub(bound),
                min_member,
                waiting: members,
                topology_key,
                timeout,
            }
        })
        .collect()
}

/// Places a gang whole, or reports why on every waiting member.
async fn schedule_gang(
    writer: &Writer,
    scheduler: &mut Scheduler,
    gang: &Gang<'_>,
    claims: &ClaimsByName<'_>,
    reported: &mut HashMap<String, String>,
    detached: &mut Detached,
) {
    let members: Option<Vec<(&Pod, Vec<ResourceClaim>)>> = gang
        .waiting
        .iter()
        .map(|p| Some((*p, pod_claims(p, claims)?)))
        .collect();
    let Some(members) = members else { return };
    let message = if members.len() < gang.needed {
        // Not all members exist yet: wait, and say so once the timeout has passed.
        let oldest = gang
            .waiting
            .iter()
            .filter_map(|p| p.metadata.creation_timestamp.as_ref())
            .map(|t| t.0)
            .min();
        let now = (writer.clock)()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX));
        // Whole seconds waited, truncated toward zero.
        let waited = oldest.map(|t| (now - t.as_nanosecond()) / 1_000_000_000);
        let expired = match (gang.timeout, waited) {
            (Some(limit), Some(waited)) => waited >= i128::from(limit.as_secs()),
            _ => false,
        };
        if !expired {
            return;
        }
        format!(
            "pod group {}/{}: only {} of {} required members exist",
            gang.namespace,
            gang.name,
            members.len() + (gang.min_member - gang.needed),
            gang.min_member
        )
    } else {
        match scheduler.schedule_group(&members, gang.needed, gang.topology_key.as_deref()) {
            Ok((decisions, booked)) => {
                let binds = members
                    .iter()
                    .zip(decisions)
                    .map(|((pod, claims), decision)| (*pod, claims.clone(), decision))
                    .collect();
                *scheduler = booked;
                bind_all(writer, binds, detached).await;
                return;
            }
            Err(error) => format!("pod group {}/{}: {error}", gang.namespace, gang.name),
        }
    };
    for pod in &gang.waiting {
        let key = format!(
            "{}/{}",
            gang.namespace,
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        if reported.get(&key) != Some(&message) {
            unschedulable(writer, pod, &message).await;
            reported.insert(key, message.clone());
        }
    }
}

/// A budget as preemption reads it.
fn budget(pdb: &PodDisruptionBudget) -> Option<Budget> {
    Some(Budget {
        namespace: pdb.metadata.namespace.clone()?,
        selector: pdb.spec.as_ref()?.selector.clone()?,
        allowed: i64::from(pdb.status.as_ref()?.disruptions_allowed),
    })
}

/// Whether the pod was nominated to a node where victims are still terminating: it waits
/// for them instead of preempting again.
fn waiting_for_victims(pod: &Pod, pods: &[Arc<Pod>]) -> bool {
    let Some(node) = pod
        .status
        .as_ref()
        .and_then(|s| s.nominated_node_name.as_deref())
    else {
        return false;
    };
    pods.iter().any(|p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
            && p.metadata.deletion_timestamp.is_some()
    })
}

/// Evicts the victims and records the nomination.
async fn preempt(writer: &Writer, pod: &Pod, nomination: &Nomination) {
    let client = &writer.client;
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    for (victim_namespace, victim) in &nomination.victims {
        let involved = json!({"apiVersion": "v1", "kind": "Pod", "namespace": victim_namespace, "name": victim});
        writer
            .events
            .record(
                involved,
                "Normal",
                "Preempted",
                &format!(
                    "Preempted by pod {namespace}/{name} on node {}",
                    nomination.node
                ),
            )
            .await;
        let deleted = Api::<Pod>::namespaced(client.clone(), victim_namespace)
            .delete(victim, &Default::default())
            .await;
        if let Err(error) = deleted {
            tracing::debug!(%victim, %error, "cannot preempt");
        }
    }
    let status = json!({"status": {"nominatedNodeName": nomination.node}});
    if let Err(error) = Api::<Pod>::namespaced(client.clone(), &namespace)
        .patch_status(&name, &patch_params(MANAGER), &Patch::Merge(status))
        .await
    {
        tracing::debug!(pod = %name, %error, "cannot record the nominated node");
    }
}

/// Deletes a special claim — its delete-protection finalizer removed first, as upstream's
/// `deleteClaim` does, since its pod still reserves it — and stops assuming it, logging what
/// fails (the next pass sees it still there).
async fn delete_claim(writer: &Writer, claim: &ResourceClaim) {
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    writer.assume(|assumed, _| assumed.deleted(claim));
    let api = Api::<ResourceClaim>::namespaced(writer.client.clone(), namespace);
    let result = async {
        if let Some(stored) = api.get_opt(name).await?.filter(protected) {
            let kept: Vec<String> = stored
                .metadata
                .finalizers
                .into_iter()
                .flatten()
                .filter(|f| f != DELETE_PROTECTION)
                .collect();
            let patch = json!({"metadata": {"finalizers": kept,
                "resourceVersion": stored.metadata.resource_version}});
            api.patch(name, &patch_params(MANAGER), &Patch::Merge(patch))
                .await?;
        }
        api.delete(name, &Default::default()).await.map(drop)
    };
    if let Err(error) = result.await {
        tracing::debug!(claim = %name, %error, "cannot delete the special claim");
    }
}

/// PreBind of extended resources backed by DRA: the special claim created, allocated and
/// reserved for the pod, then named in the pod's `status.extendedResourceClaimStatus`.
/// Returns the claim created.
async fn create_special_claim(
    writer: &Writer,
    pod: &Pod,
    extended: &ExtendedClaim,
) -> Result<ResourceClaim, kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let mut claim = extended.claim.clone();
    // The in-memory name goes; the server generates one.
    claim.metadata.name = None;
    let created = Api::<ResourceClaim>::namespaced(writer.client.clone(), &namespace)
        .create(&post_params(MANAGER), &claim)
        .await?;
    let written = allocate_and_reserve(
        &writer.client,
        &created,
        Some(&extended.allocation),
        pod,
        MANAGER,
    )
    .await;
    let written = match written {
        Ok(written) => written,
        Err(error) => {
            delete_claim(writer, &created).await;
            return Err(error);
        }
    };
    writer.assume(|assumed, now| assumed.created(written, now));
    let status = json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": extended.mappings,
        "resourceClaimName": created.metadata.name,
    }}});
    let name = pod.metadata.name.clone().unwrap_or_default();
    let patched = Api::<Pod>::namespaced(writer.client.clone(), &namespace)
        .patch_status(&name, &patch_params(MANAGER), &Patch::Merge(status))
        .await;
    if let Err(error) = patched {
        delete_claim(writer, &created).await;
        return Err(error);
    }
    Ok(created)
}

/// PreBind (claims) and Bind; a special claim created here is deleted again when the
/// binding fails (upstream's Unreserve).
async fn bind(
    writer: &Writer,
    pod: &Pod,
    claims: &[ResourceClaim],
    decision: &Decision,
) -> Result<(), kube::Error> {
    bind_volumes(writer, &decision.volumes).await?;
    if !decision.volumes.is_empty()
        && let Err(error) = wait_for_volumes(writer, pod, decision).await?
    {
        // upstream's binding cycle failure: the pod goes back to the queue.
        writer.assume(|assumed, _| assumed.forget(pod));
        record_failure(
            writer,
            pod,
            "SchedulerError",
            &prebind::prebind_failure(&error),
        )
        .await;
        return Ok(());
    }
    for claim in claims {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let allocation = decision
            .allocations
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a);
        let written = allocate_and_reserve(&writer.client, claim, allocation, pod, MANAGER).await?;
        writer.assume(|assumed, now| assumed.wrote(written, now));
    }
    let special = match &decision.extended {
        Some(extended) => Some(create_special_claim(writer, pod, extended).await?),
        None => None,
    };
    let bound = post_binding(writer, pod, decision).await;
    if let (Err(_), Some(special)) = (&bound, &special) {
        delete_claim(writer, special).await;
    }
    bound
}

/// Bind: `pods/binding`, the assumed binding and the `Scheduled` event.
async fn post_binding(writer: &Writer, pod: &Pod, decision: &Decision) -> Result<(), kube::Error> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": decision.node},
    });
    Api::<Pod>::namespaced(writer.client.clone(), &namespace)
        // The answer is a Status: only whether it succeeded matters, so it is not built.
        .create_subresource::<_, serde::de::IgnoredAny>(
            "binding",
            &name,
            &post_params(MANAGER),
            &binding,
        )
        .await?;
    writer.assume(|assumed, now| assumed.bound(pod, &decision.node, now));
    let involved = json!({"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": pod.metadata.uid});
    writer
        .events
        .record(
            involved,
            "Normal",
            "Scheduled",
            &format!(
                "Successfully assigned {namespace}/{name} to {}",
                decision.node
            ),
        )
        .await;
    Ok(())
}

/// The condition and event of a pod that fits nowhere.
async fn unschedulable(writer: &Writer, pod: &Pod, message: &str) {
    record_failure(writer, pod, "Unschedulable", message).await;
}

/// VolumeBinding's PreBind after its writes: polls the claims and volumes written until
/// upstream's `checkBindings` finds them bound (`Ok(Ok)`), failed or timed out (`Ok(Err)`
/// with upstream's error), keeping the pod assumed on its node meanwhile.
async fn wait_for_volumes(
    writer: &Writer,
    pod: &Pod,
    decision: &Decision,
) -> Result<Result<(), String>, kube::Error> {
    let written = &decision.volumes;
    let node = Api::<Node>::all(writer.client.clone())
        .get(&decision.node)
        .await?;
    let labels = node.metadata.labels.unwrap_or_default();
    let claim_keys: Vec<(String, String)> = written
        .claims
        .iter()
        .map(|c| {
            (
                text(c, "/metadata/namespace").to_string(),
                text(c, "/metadata/name").to_string(),
            )
        })
        .chain(written.volumes.iter().map(|v| {
            (
                text(v, "/spec/claimRef/namespace").to_string(),
                text(v, "/spec/claimRef/name").to_string(),
            )
        }))
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(prebind::BIND_TIMEOUT_SECONDS);
    loop {
        writer.assume(|assumed, now| assumed.bound(pod, &decision.node, now));
        let mut claims = Vec::new();
        for (namespace, name) in &claim_keys {
            let api = Api::<PersistentVolumeClaim>::namespaced(writer.client.clone(), namespace);
            if let Some(claim) = api.get_opt(name).await? {
                claims.push(serde_json::to_value(claim).map_err(kube::Error::SerdeError)?);
            }
        }
        let mut names: Vec<String> = written
            .volumes
            .iter()
            .map(|v| text(v, "/metadata/name").to_string())
            .chain(
                claims
                    .iter()
                    .map(|c| text(c, "/spec/volumeName").to_string()),
            )
            .filter(|n| !n.is_empty())
            .collect();
        names.sort_unstable();
        names.dedup();
        let mut volumes = Vec::new();
        for name in &names {
            if let Some(volume) = Api::<PersistentVolume>::all(writer.client.clone())
                .get_opt(name)
                .await?
            {
                volumes.push(serde_json::to_value(volume).map_err(kube::Error::SerdeError)?);
            }
        }
        match prebind::check_bindings(written, &decision.node, &labels, &claims, &volumes) {
            prebind::Check::Bound => return Ok(Ok(())),
            prebind::Check::Failed(error) => return Ok(Err(error)),
            prebind::Check::Waiting => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Err(prebind::TIMED_OUT.to_string()));
        }
        tokio::time::sleep(PREBIND_POLL).await;
    }
}

/// How often PreBind looks at the claims again (upstream polls every second).
const PREBIND_POLL: Duration = Duration::from_millis(200);

/// The `PodScheduled=False` condition (`reason`) and the `FailedScheduling` event of a pod.
async fn record_failure(writer: &Writer, pod: &Pod, reason: &str, message: &str) {
    let client = &writer.client;
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let now = tessera_model::time::timestamp((writer.clock)());
    let condition = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": reason, "message": message, "lastTransitionTime": now, "lastProbeTime": null}]}});
    if let Err(error) = Api::<Pod>::namespaced(client.clone(), &namespace)
        .patch_status(&name, &patch_params(MANAGER), &Patch::Strategic(condition))
        .await
    {
        tracing::debug!(pod = %name, %error, "cannot record the PodScheduled condition");
    }
    let involved = json!({"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name, "uid": pod.metadata.uid});
    writer
        .events
        .record(involved, "Warning", "FailedScheduling", message)
        .await;
}

/// The reflectors VolumeBinding reads: claims, volumes, classes, CSI drivers and capacities.
#[derive(Clone)]
struct Storage {
    claims: Store<PersistentVolumeClaim>,
    volumes: Store<PersistentVolume>,
    classes: Store<StorageClass>,
    drivers: Store<CSIDriver>,
    capacities: Store<CSIStorageCapacity>,
}

/// The storage reflectors and their change streams.
struct StorageStores {
    stores: Storage,
    changes: Vec<futures::stream::BoxStream<'static, ()>>,
}

impl StorageStores {
    fn watch(client: &Client) -> StorageStores {
        let (claims, claim_changes) = watched(Api::<PersistentVolumeClaim>::all(client.clone()));
        let (volumes, volume_changes) = watched(Api::<PersistentVolume>::all(client.clone()));
        let (classes, class_changes) = watched(Api::<StorageClass>::all(client.clone()));
        let (drivers, driver_changes) = watched(Api::<CSIDriver>::all(client.clone()));
        let (capacities, capacity_changes) =
            watched(Api::<CSIStorageCapacity>::all(client.clone()));
        StorageStores {
            stores: Storage {
                claims,
                volumes,
                classes,
                drivers,
                capacities,
            },
            changes: vec![
                claim_changes,
                volume_changes,
                class_changes,
                driver_changes,
                capacity_changes,
            ],
        }
    }
}

fn json_values<K: serde::Serialize + kube::Resource<DynamicType = ()> + Clone>(
    store: &Store<K>,
) -> Vec<serde_json::Value> {
    store
        .state()
        .iter()
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .collect()
}

impl Storage {
    async fn wait_until_ready(&self) -> bool {
        self.claims.wait_until_ready().await.is_ok()
            && self.volumes.wait_until_ready().await.is_ok()
            && self.classes.wait_until_ready().await.is_ok()
            && self.drivers.wait_until_ready().await.is_ok()
            && self.capacities.wait_until_ready().await.is_ok()
    }

    fn snapshot(&self) -> Volumes {
        Volumes {
            claims: json_values(&self.claims),
            volumes: json_values(&self.volumes),
            classes: json_values(&self.classes),
            csi_drivers: json_values(&self.drivers),
            capacities: json_values(&self.capacities),
        }
    }
}

/// VolumeBinding's PreBind: each volume pre-bound to its claim, each claim to provision
/// annotated with the node (`Update`s, so a concurrent change fails the binding, which the
/// next pass tries again).
async fn bind_volumes(writer: &Writer, reservation: &Reservation) -> Result<(), kube::Error> {
    for volume in &reservation.volumes {
        let typed: PersistentVolume =
            serde_json::from_value(volume.clone()).map_err(kube::Error::SerdeError)?;
        let name = typed.metadata.name.clone().unwrap_or_default();
        Api::<PersistentVolume>::all(writer.client.clone())
            .replace(&name, &post_params(MANAGER), &typed)
            .await?;
    }
    for claim in &reservation.claims {
        let typed: PersistentVolumeClaim =
            serde_json::from_value(claim.clone()).map_err(kube::Error::SerdeError)?;
        let namespace = typed.metadata.namespace.clone().unwrap_or_default();
        let name = typed.metadata.name.clone().unwrap_or_default();
        Api::<PersistentVolumeClaim>::namespaced(writer.client.clone(), &namespace)
            .replace(&name, &post_params(MANAGER), &typed)
            .await?;
    }
    Ok(())
}
