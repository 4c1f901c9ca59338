//! The queue manager's shell: Kueue's admission loop and its batch/v1 Job and JobSet
//! integrations over a Kubernetes API. It watches ResourceFlavors, ClusterQueues, Cohorts,
//! LocalQueues, Workloads, WorkloadPriorityClasses, Topologies, AdmissionChecks
//! (`kueue.x-k8s.io/v1beta2`), Nodes, Namespaces, PriorityClasses, Jobs and — once their CRD
//! is installed — JobSets (and, in [`crate::queue_provisioning`], the ProvisioningRequest
//! check's objects; MultiKueue runs beside it in a loop of its own,
//! [`crate::queue_multikueue_loop`], whose Workload writes it lays over its watch); after
//! each burst of changes (and every few seconds) it hands the watch caches' objects to
//! [`tessera_queue::api::pass::pass`] and writes what it answers — Workload statuses
//! (admissions, pending conditions, evictions), then ClusterQueue and LocalQueue statuses
//! (in the background, [`crate::queue_status_writer`]),
//! and `spec.active: false` for the Workloads waitForPodsReady deactivates — and then, for
//! every Job and JobSet naming a LocalQueue (or managed without one), what
//! [`tessera_queue::api::framework::reconcile`] answers for its kind (its Workload created,
//! the job started, stopped or its Workload finished), and the Pod integration over the pods
//! Kueue manages ([`crate::queue_pods`]); between the two, the topology ungater's pod patches
//! ([`tessera_queue::api::tas::ungate`]). Each integration runs when the Configuration's
//! `integrations.frameworks` lists it.
//!
//! Its own Workload writes are laid over the watch cache until the watch shows them
//! ([`crate::queue_workloads`], which keeps the Workloads between passes and updates only
//! those the watch or the queue manager changed), so a pass that runs before the watch
//! catches up never admits a Workload twice, and each of the pass's Workload statuses is
//! written on the condition that the Workload is still the version the pass read; a Job's
//! writes are not sent again while the watch still shows the Job they were sent for. Kueue's
//! events are recorded as its components record them (`kueue-admission` for the Workloads,
//! each integration's controller for its jobs).
//! Decides nothing itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tessera_model::clock::Clock;
use tessera_model::kueue::{GROUP, STORAGE_VERSION};
use tessera_queue::api::framework::{self, Integration, JobWrite, Priorities};
use tessera_queue::api::objects::{self, Objects};
use tessera_queue::api::pass::{self, Settings, StatusWrite};
use tessera_queue::api::{job::JOB, jobset::JOBSET};
use tessera_queue::config::{Configuration, POD_FRAMEWORK};
use tessera_queue::flavor::ResourceFlavorSpec;

use crate::changelog::Changelog;
use crate::echoes::OwnWrites;
use crate::pacing::{Pacing, next_paced_pass};
use crate::queue_pods::{self, PodIntegration};
use crate::queue_status_writer::QueueStatusWriter;
use crate::serialized::Serialized;
use crate::shell::{
    EventRecorder, ObjectKey, object_key, overlay, patch_params, post_params, watched,
    watched_except,
};

pub use crate::queue_workloads::Workloads;

/// The field manager of the queue manager's writes: Kueue is a controller-runtime binary.
pub const MANAGER: &str = tessera_model::managers::CONTROLLER_RUNTIME;

/// The component Kueue's scheduler records events as (`constants.AdmissionName`).
pub const ADMISSION_COMPONENT: &str = "kueue-admission";
/// The component Kueue's Job integration records events as.
pub const JOB_COMPONENT: &str = JOB.component;

/// How long the shell's own Workload writes stand in for the watch cache's copies at most.
const OVERLAID_FOR: Duration = Duration::from_secs(10);

/// How many status writes of a pass are in flight at once (Kueue applies admissions
/// asynchronously too); the store commits concurrent writes together.
const CONCURRENT_WRITES: usize = 16;

/// Settings of the queue manager.
#[derive(Clone)]
pub struct QueueConfig {
    /// Kueue's Configuration (its defaults without a file): fair sharing, the integrations
    /// run, the Beyond-Kueue options.
    pub configuration: Configuration,
    /// Where the queue manager reads the time.
    pub clock: Clock,
    /// Kueue's counters, when the platform serves them.
    pub metrics: Option<Arc<tessera_metrics::components::Registries>>,
}

impl std::fmt::Debug for QueueConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueConfig")
            .field("configuration", &self.configuration)
            .finish_non_exhaustive()
    }
}

/// The `kueue.x-k8s.io` kinds it watches, by kind and plural, in the stored version.
pub(crate) fn kueue_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, STORAGE_VERSION, kind), plural)
}

/// The watch caches of one kind of `kueue.x-k8s.io` object.
struct Kind {
    resource: ApiResource,
    store: Store<DynamicObject>,
    /// The queue manager's writes whose echoes start no pass: the admission pass's Workload
    /// statuses and the queue statuses, which the pass that answered them already took into
    /// account. What the steps after the pass write (jobs, checks) the pass has not seen.
    own: OwnWrites,
    /// What the watch changed since the admission pass last read it.
    log: Changelog,
}

impl Kind {
    fn watch(
        client: &Client,
        kind: &str,
        plural: &str,
        changes: &mut Vec<futures::stream::BoxStream<'static, ()>>,
    ) -> Kind {
        let resource = kueue_resource(kind, plural);
        let own = OwnWrites::default();
        let log = Changelog::default();
        let (store, stream) = watched_except(
            Api::<DynamicObject>::all_with(client.clone(), &resource),
            resource.clone(),
            &own,
            &log,
        );
        changes.push(stream);
        Kind {
            resource,
            store,
            own,
            log,
        }
    }

    fn values(&self) -> Vec<Value> {
        values(self.store.state())
    }

    /// `read` (the JSON of these objects as the admission pass last read them) made current:
    /// serialized again when the watch changed any of them since.
    fn refresh(&self, read: &mut Vec<Value>) {
        if self.log.take().any() {
            *read = self.values();
        }
    }

    fn api(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        if namespace.is_empty() {
            Api::all_with(client.clone(), &self.resource)
        } else {
            Api::namespaced_with(client.clone(), namespace, &self.resource)
        }
    }
}

pub(crate) fn values<K: serde::Serialize>(objects: Vec<Arc<K>>) -> Vec<Value> {
    objects
        .iter()
        .filter_map(|o| serde_json::to_value(o.as_ref()).ok())
        .collect()
}

/// Everything the queue manager watches.
struct Watches {
    flavors: Kind,
    cluster_queues: Kind,
    cohorts: Kind,
    local_queues: Kind,
    workloads: Kind,
    priority_classes: Kind,
    topologies: Kind,
    nodes: Store<Node>,
    admission_checks: Kind,
    namespaces: Store<Namespace>,
    pod_priorities: Store<PriorityClass>,
    jobs: Store<Job>,
    /// Watched once the JobSet CRD is installed.
    jobsets: Kind,
    /// RuntimeClasses: their overhead counts in the PodSets naming them.
    runtime_classes: Store<RuntimeClass>,
}

impl Watches {
    /// Starts the reflectors; the stream yields on every change.
    fn start(
        client: &Client,
    ) -> (
        Watches,
        futures::stream::SelectAll<futures::stream::BoxStream<'static, ()>>,
    ) {
        let mut changes = Vec::new();
        let mut kind = |kind: &str, plural: &str| Kind::watch(client, kind, plural, &mut changes);
        let flavors = kind("ResourceFlavor", "resourceflavors");
        let cluster_queues = kind("ClusterQueue", "clusterqueues");
        let cohorts = kind("Cohort", "cohorts");
        let local_queues = kind("LocalQueue", "localqueues");
        let workloads = kind("Workload", "workloads");
        let priority_classes = kind("WorkloadPriorityClass", "workloadpriorityclasses");
        let topologies = kind("Topology", "topologies");
        let (nodes, node_changes) = watched(Api::<Node>::all(client.clone()));
        let admission_checks = kind("AdmissionCheck", "admissionchecks");
        let (namespaces, namespace_changes) = watched(Api::<Namespace>::all(client.clone()));
        let (pod_priorities, pod_priority_changes) =
            watched(Api::<PriorityClass>::all(client.clone()));
        let (jobs, job_changes) = watched(Api::<Job>::all(client.clone()));
        let (runtime_classes, runtime_class_changes) =
            watched(Api::<RuntimeClass>::all(client.clone()));
        let (group, version, kind, crd) = crate::custom::JOBSET;
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, kind),
            "jobsets",
        );
        let (store, jobset_changes) = crate::custom::watched_once_installed(client, &resource, crd);
        let jobsets = Kind {
            resource,
            store,
            own: OwnWrites::default(),
            log: Changelog::default(),
        };
        changes.extend([
            node_changes,
            namespace_changes,
            pod_priority_changes,
            job_changes,
            jobset_changes,
            runtime_class_changes,
        ]);
        let watches = Watches {
            flavors,
            cluster_queues,
            cohorts,
            local_queues,
            workloads,
            priority_classes,
            topologies,
            nodes,
            admission_checks,
            namespaces,
            pod_priorities,
            jobs,
            jobsets,
            runtime_classes,
        };
        (watches, futures::stream::select_all(changes))
    }
}

/// What the shell keeps between passes.
#[derive(Default)]
struct Memory {
    /// Its Workload writes, until the watch shows them.
    written: WrittenWorkloads,
    /// The core's queues (and the Workloads it has read).
    queues: pass::Queues,
    /// The objects the last pass read (its Workloads handed back to [`Workloads`]).
    objects: Objects,
    /// The Nodes as JSON, by resourceVersion (the TAS flavors' capacity).
    nodes: Serialized,
    /// The Jobs and JobSets as JSON, by resourceVersion (the job integrations).
    jobs: Serialized,
    jobsets: Serialized,
    /// Per job UID, the writes last sent and the job's resource version then.
    sent: HashMap<String, Sent>,
    /// Which Workloads name DRA claims.
    claiming: tessera_queue::api::dra::ClaimingWorkloads,
}

/// A job's resource version and the writes sent for it at that version.
type Sent = (String, Vec<JobWrite>);

impl Memory {
    /// Remembers a Workload it wrote, until the watch shows it.
    fn remember(&mut self, object: &Arc<DynamicObject>) {
        self.written.remember(object);
    }
}

/// The Workloads a loop wrote, laid over its watch cache's copies until the watch shows them
/// (at most [`OVERLAID_FOR`]): a pass that runs before the watch catches up reads what was
/// written, not the copy it replaced.
#[derive(Debug, Default, Clone)]
pub(crate) struct WrittenWorkloads(HashMap<ObjectKey, (Arc<DynamicObject>, tokio::time::Instant)>);

impl WrittenWorkloads {
    /// Remembers a Workload written, as the API server answered it.
    pub(crate) fn remember(&mut self, object: &Arc<DynamicObject>) {
        let now = tokio::time::Instant::now();
        self.0
            .insert(object_key(&object.metadata), (object.clone(), now));
    }

    /// The keys of the Workloads remembered.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.0.keys()
    }

    /// What a pass reads for the Workload `key`, whose watched copy is `watched`: the one
    /// remembered while it is newer (and remembered for less than [`OVERLAID_FOR`]), with
    /// `true`; the watched one otherwise, and the one remembered forgotten. One the watch
    /// does not have is gone, or not shown yet: left out either way.
    pub(crate) fn resolve(
        &mut self,
        key: &ObjectKey,
        watched: Option<Arc<DynamicObject>>,
    ) -> Option<(Arc<DynamicObject>, bool)> {
        let Some(watched) = watched else {
            self.0.remove(key);
            return None;
        };
        let now = tokio::time::Instant::now();
        match self.0.get(key) {
            Some((ours, at))
                if now.saturating_duration_since(*at) < OVERLAID_FOR && newer(ours, &watched) =>
            {
                Some((Arc::clone(ours), true))
            }
            Some(_) => {
                self.0.remove(key);
                Some((watched, false))
            }
            None => Some((watched, false)),
        }
    }

    /// The `watched` Workloads with the newer ones remembered in their place; those the
    /// watch shows at their version (or newer) are forgotten.
    pub(crate) fn over(&mut self, watched: Vec<Arc<DynamicObject>>) -> Vec<Arc<DynamicObject>> {
        overlay(
            &mut self.0,
            watched,
            (tokio::time::Instant::now(), OVERLAID_FOR),
            |watched, ours| newer(ours, watched).then(|| ours.clone()),
            // One the watch does not have is gone, or not shown yet: left out either way.
            |_| None,
        )
    }
}

/// Runs the queue manager until the task is dropped.
pub async fn run(client: Client, config: QueueConfig) {
    let (watches, mut changes) = Watches::start(&client);
    let dra = crate::queue_dra::DraWatches::start(&client, &mut changes);
    let provisioning = crate::queue_provisioning::ProvisioningWatches::start(
        &client,
        config.clock.clone(),
        &mut changes,
    );
    // MultiKueue runs its own loop beside the admission rounds; dropped with this task.
    let multikueue = crate::queue_multikueue_loop::Handoff::default();
    let mut beside = tokio::task::JoinSet::new();
    beside.spawn(crate::queue_multikueue_loop::run(
        client.clone(),
        config.clock.clone(),
        config.configuration.clone(),
        multikueue.clone(),
    ));
    let (mut pods, pod_changes) = PodIntegration::start(&client, config.clock.clone());
    changes.push(pod_changes);
    let mut resync = tokio::time::interval(Duration::from_secs(5));
    let mut memory = Memory::default();
    let mut workloads = Workloads::default();
    let settings = Settings::from(&config.configuration);
    let shell = Shell {
        client: &client,
        watches: &watches,
        dra: &dra,
        admission_events: EventRecorder::start(
            client.clone(),
            ADMISSION_COMPONENT,
            config.clock.clone(),
        ),
        job_events: EventRecorder::start(client.clone(), JOB_COMPONENT, config.clock.clone()),
        jobset_events: EventRecorder::start(client.clone(), JOBSET.component, config.clock.clone()),
        queue_statuses: QueueStatusWriter::start(client.clone()),
        configuration: &config.configuration,
        metrics: config.metrics.as_deref(),
    };
    // Passes over few objects are cheap: paced by their cost, a change is answered within
    // milliseconds under churn (MultiKueue's dispatch waits on several passes in a row).
    let mut pacing = Pacing::default();
    let mut round_ended = std::time::Instant::now();
    while next_paced_pass(&mut changes, &mut resync, &mut pacing).await {
        let now = (config.clock)();
        let mut phases = Phases::since(round_ended);
        phases.lap("settle");
        // MultiKueue's writes run beside the rounds; what they wrote here is laid over the
        // watch until it shows them.
        for object in multikueue.take() {
            memory.remember(&object);
        }
        let pod_values = pods.pods();
        shell
            .admit(
                (&mut memory, &mut workloads),
                &settings,
                &pod_values,
                now,
                &mut phases,
            )
            .await;
        let workloads = &workloads;
        shell.ungate(workloads, &pod_values).await;
        phases.lap("ungate");
        let (flavors, priorities) = shell.flavors_and_priorities();
        let checks = watches.admission_checks.values();
        for object in provisioning
            .reconcile(&client, &checks, workloads, &flavors, now)
            .await
        {
            memory.remember(&object);
        }
        let context = queue_pods::Context {
            workloads,
            flavors: &flavors,
            priorities: &priorities,
        };
        phases.lap("checks");
        shell.integrate_jobs(&mut memory, &context, now).await;
        phases.lap("jobs");
        if config.configuration.runs(POD_FRAMEWORK) {
            for object in pods.integrate(&client, &context, now).await {
                memory.remember(&object);
            }
        }
        phases.lap("pods");
        round_ended = phases.log();
    }
}

/// How long each step of one round of the queue manager took, logged at debug level (one
/// line a round: where a slow round's time went).
struct Phases {
    last: std::time::Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Phases {
    /// The first step begins at `began`.
    fn since(began: std::time::Instant) -> Phases {
        Phases {
            last: began,
            laps: Vec::with_capacity(10),
        }
    }

    /// Ends the step `name`, begun where the last one ended.
    fn lap(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        self.laps.push((name, now - self.last));
        self.last = now;
    }

    /// Logs the steps; answers when the last one ended.
    fn log(&self) -> std::time::Instant {
        if tracing::enabled!(tracing::Level::DEBUG) {
            let laps: Vec<String> = self
                .laps
                .iter()
                .map(|(name, took)| format!("{name}={:.1}ms", took.as_secs_f64() * 1e3))
                .collect();
            tracing::debug!(phases = %laps.join(" "), "queue manager: round");
        }
        self.last
    }
}

/// The Workloads owned by a controller, by its UID.
pub(crate) fn owned_workloads(workloads: &Workloads) -> BTreeMap<&str, &Value> {
    workloads
        .values()
        .map(Arc::as_ref)
        .filter_map(|w| Some((controller_uid(w)?, w)))
        .collect()
}

/// The UID of an object's controller.
fn controller_uid(object: &Value) -> Option<&str> {
    object
        .get("metadata")?
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller") == Some(&json!(true)))?
        .get("uid")?
        .as_str()
}

/// Whether `ours` is newer than the watch's copy: a higher resource version (both numbers,
/// as the store's revisions are), or any other when they do not compare.
fn newer(ours: &DynamicObject, watched: &DynamicObject) -> bool {
    let version = |o: &DynamicObject| o.resource_version().and_then(|v| v.parse::<u64>().ok());
    match (version(ours), version(watched)) {
        (Some(ours), Some(watched)) => ours > watched,
        _ => ours.resource_version() != watched.resource_version(),
    }
}

/// The writes of one pass.
struct Shell<'a> {
    client: &'a Client,
    watches: &'a Watches,
    dra: &'a crate::queue_dra::DraWatches,
    admission_events: EventRecorder,
    job_events: EventRecorder,
    jobset_events: EventRecorder,
    /// ClusterQueue and LocalQueue statuses, written in the background.
    queue_statuses: QueueStatusWriter,
    configuration: &'a Configuration,
    metrics: Option<&'a tessera_metrics::components::Registries>,
}

/// Counts the admissions and evictions a pass wrote (`written`, those of its writes the API
/// took) into Kueue's counters (what each Workload write means is
/// `tessera_metrics::kueue::transitions`' decision); a pass that wrote Workloads counts as one
/// admission attempt of `took` seconds.
fn count_transitions<'w>(
    metrics: &tessera_metrics::components::KueueMetrics,
    workloads: &Workloads,
    written: impl Iterator<Item = &'w StatusWrite>,
    now: std::time::SystemTime,
    took: f64,
) {
    let mut admitted = 0;
    let mut any = false;
    for write in written {
        any = true;
        let Some(before) = workloads.get(format!("{}/{}", write.namespace, write.name).as_str())
        else {
            continue;
        };
        for transition in tessera_metrics::kueue::transitions(before, &write.status, now) {
            if matches!(
                transition,
                tessera_metrics::kueue::Transition::Admitted { .. }
            ) {
                admitted += 1;
            }
            metrics.record(&transition);
        }
    }
    if any {
        metrics.attempt(admitted, took);
    }
}

impl Shell<'_> {
    /// The admission pass: the core's pass over the watched objects (its own Workload writes
    /// laid over them), its writes and events; `workloads` are brought up to date before the
    /// pass and show its writes after it.
    async fn admit(
        &self,
        (memory, workloads): (&mut Memory, &mut Workloads),
        settings: &Settings,
        pods: &[Value],
        now: std::time::SystemTime,
        phases: &mut Phases,
    ) {
        let watches = self.watches;
        // The read, the pass and handing the Workloads back are one stretch of computation:
        // the runtime's other tasks move to another worker meanwhile.
        let (decided, writes, counted, took) = crate::shell::cpu_bound(|| {
            let kind = &watches.workloads;
            workloads.refresh(
                (&kind.store, &kind.resource),
                kind.log.take(),
                &mut memory.written,
            );
            let prepared = self.dra.prepare(
                workloads.take_values(),
                &mut memory.claiming,
                self.configuration,
                now,
            );
            let objects = &mut memory.objects;
            for (kind, read) in [
                (&watches.flavors, &mut objects.flavors),
                (&watches.cluster_queues, &mut objects.cluster_queues),
                (&watches.cohorts, &mut objects.cohorts),
                (&watches.local_queues, &mut objects.local_queues),
                (&watches.admission_checks, &mut objects.admission_checks),
                (&watches.topologies, &mut objects.topologies),
            ] {
                kind.refresh(read);
            }
            objects.workloads = prepared.workloads;
            objects.devices = prepared.devices;
            objects.namespaces = values(watches.namespaces.state());
            objects.nodes = memory.nodes.values(&watches.nodes.state());
            objects.pods = pods.to_vec();
            objects.runtime_classes = values(watches.runtime_classes.state());
            phases.lap("read");
            let started = std::time::Instant::now();
            let mut decided = pass::pass(objects, &mut memory.queues, settings, now);
            phases.lap("pass");
            tracing::debug!(
                took = ?started.elapsed(),
                workloads = objects.workloads.len(),
                writes = decided.workloads.len(),
                "queue manager: admission pass"
            );
            let laid_over = prepared
                .writes
                .iter()
                .map(|write| (write.namespace.clone(), write.name.clone()))
                .collect();
            workloads.restore(std::mem::take(&mut objects.workloads), laid_over);
            let took = started.elapsed().as_secs_f64();
            // Counted once written: a write refused (a conflict) admitted nothing.
            let counted = self
                .metrics
                .map(|metrics| (metrics, decided.workloads.clone()));
            let writes =
                pass::one_write_per_object(prepared.writes, std::mem::take(&mut decided.workloads));
            phases.lap("after-pass");
            (decided, writes, counted, took)
        });
        let written = self
            .write_statuses(&watches.workloads.resource, writes, workloads)
            .await;
        if let Some((metrics, decided)) = counted {
            let taken: std::collections::HashSet<(&str, &str)> = written
                .iter()
                .map(|o| {
                    let meta = &o.metadata;
                    let namespace = meta.namespace.as_deref().unwrap_or_default();
                    (namespace, meta.name.as_deref().unwrap_or_default())
                })
                .collect();
            let taken = decided
                .iter()
                .filter(|w| taken.contains(&(w.namespace.as_str(), w.name.as_str())));
            count_transitions(&metrics.kueue, workloads, taken, now, took);
        }
        for object in written {
            watches.workloads.own.record(&object.metadata);
            memory.remember(&object);
            workloads.show_written(&object);
        }
        for write in &decided.deactivations {
            let api = watches.workloads.api(self.client, &write.namespace);
            let patch = json!({"spec": write.status});
            if let Err(error) = api
                .patch(&write.name, &patch_params(MANAGER), &Patch::Merge(&patch))
                .await
            {
                tracing::debug!(%error, name = %write.name, "queue manager: workload not deactivated");
            }
        }
        for event in decided.events {
            self.admission_events
                .record(event.involved, event.kind, &event.reason, &event.message)
                .await;
        }
        phases.lap("writes");
        for (queues, statuses) in [
            (&watches.cluster_queues, decided.cluster_queues),
            (&watches.local_queues, decided.local_queues),
        ] {
            self.queue_statuses
                .send(&queues.resource, &queues.own, statuses);
        }
    }

    /// The job integrations over every Job and JobSet naming a LocalQueue, given the
    /// Workloads as they are now. A job's writes are not sent again while the watch shows
    /// the job they were sent for.
    async fn integrate_jobs(
        &self,
        memory: &mut Memory,
        context: &queue_pods::Context<'_>,
        now: std::time::SystemTime,
    ) {
        use futures::StreamExt;
        let watches = self.watches;
        let (flavors, priorities) = (context.flavors, context.priorities);
        // Serialized only at a new version: a pass reads every job.
        let kinds = [
            (
                &JOB,
                ApiResource::erase::<Job>(&()),
                memory.jobs.values(&watches.jobs.state()),
            ),
            (
                &JOBSET,
                watches.jobsets.resource.clone(),
                memory.jobsets.values(&watches.jobsets.store.state()),
            ),
        ];
        // Indexed only when there are jobs: a pass reads every Workload.
        let by_owner: BTreeMap<&str, &Value> = if kinds.iter().all(|(_, _, jobs)| jobs.is_empty()) {
            BTreeMap::new()
        } else {
            owned_workloads(context.workloads)
        };
        let namespaces = objects::namespace_labels(&values(watches.namespaces.state()));
        let no_labels = BTreeMap::new();
        let mut uids = std::collections::HashSet::new();
        let mut writing = Vec::new();
        for (kind, resource, jobs) in &kinds {
            if !self.configuration.runs(kind.framework) {
                continue;
            }
            for job_object in jobs.iter().map(Arc::as_ref) {
                let uid = tessera_model::json::text(job_object, "/metadata/uid");
                uids.insert(uid.to_owned());
                let labels = namespaces
                    .get(objects::namespace(job_object))
                    .unwrap_or(&no_labels);
                let named = framework::queue_name(job_object).is_some();
                let options = framework::Options {
                    managed_without_queue_name: !named
                        && controller_uid(job_object).is_none()
                        && self.configuration.manages_without_queue_name(labels),
                    wait_for_pods_ready: self.configuration.wait_for_pods_ready.is_some(),
                };
                if !named && !options.managed_without_queue_name {
                    continue;
                }
                let owned = match framework::prebuilt_workload(job_object) {
                    Some(key) => context.workloads.get(key.as_str()).map(Arc::as_ref),
                    None => by_owner.get(uid).copied(),
                };
                let context = (flavors, priorities);
                let writes =
                    framework::reconcile_with(kind, job_object, owned, context, options, now);
                let version = tessera_model::json::text(job_object, "/metadata/resourceVersion");
                let sending = (version.to_owned(), writes);
                if sending.1.is_empty() || memory.sent.get(uid) == Some(&sending) {
                    continue;
                }
                let job = (*kind, resource, job_object);
                writing.push(self.write_all_for_job(job, owned, (uid, sending)));
            }
        }
        // Each job's writes in order, the jobs' CONCURRENT_WRITES at a time: a burst of new
        // jobs does not wait on their Workloads' creations one after the other.
        let written: Vec<_> = futures::stream::iter(writing)
            .buffer_unordered(CONCURRENT_WRITES)
            .collect()
            .await;
        for (uid, sending, objects, done) in written {
            for object in &objects {
                memory.remember(object);
            }
            if done {
                memory.sent.insert(uid.to_owned(), sending);
            }
        }
        memory.sent.retain(|uid, _| uids.contains(uid));
    }

    /// Carries out a job's writes in order, up to the first that fails (the rest, its event,
    /// waits for the next pass, which tries again). Answers what `sent` names, the Workloads
    /// written and whether every write was done.
    async fn write_all_for_job<'j>(
        &self,
        job: (&Integration, &ApiResource, &Value),
        workload: Option<&Value>,
        (uid, sending): (&'j str, Sent),
    ) -> (&'j str, Sent, Vec<Arc<DynamicObject>>, bool) {
        let mut written = Vec::new();
        for write in sending.1.clone() {
            match self.write_for_job(job, workload, write).await {
                Ok(Some(object)) => written.push(object),
                Ok(None) => {}
                Err(()) => return (uid, sending, written, false),
            }
        }
        (uid, sending, written, true)
    }

    /// The topology ungater: lifts the `kueue.x-k8s.io/topology` gate of the pods of
    /// Workloads admitted by TAS, with their domains' node selectors (failures logged; the
    /// next pass tries again).
    async fn ungate(&self, workloads: &Workloads, pods: &[Value]) {
        for patch in tessera_queue::api::tas::ungate(workloads.values().map(Arc::as_ref), pods) {
            let api: Api<Pod> = Api::namespaced(self.client.clone(), &patch.namespace);
            if let Err(error) = api
                .patch(
                    &patch.name,
                    &patch_params(MANAGER),
                    &Patch::Merge(&patch.patch),
                )
                .await
            {
                tracing::debug!(%error, pod = %patch.name, "queue manager: pod not ungated");
            }
        }
    }

    /// The ResourceFlavors by name and the priority classes, as watched now.
    fn flavors_and_priorities(&self) -> (BTreeMap<String, ResourceFlavorSpec>, Priorities) {
        let watches = self.watches;
        let flavors = watches
            .flavors
            .values()
            .iter()
            .filter_map(objects::flavor)
            .map(|f| (f.name.clone(), f))
            .collect();
        let priorities = Priorities::read(
            &watches.priority_classes.values(),
            &values(watches.pod_priorities.state()),
        );
        (flavors, priorities)
    }

    /// Merge-patches the Workload statuses of a pass, [`CONCURRENT_WRITES`] at a time (each
    /// to another object), each on the condition that the Workload is still the version the
    /// pass read (`read`), as Kueue applies admission statuses (`ApplyAdmissionStatus`,
    /// strict): a status decided on a copy someone has changed since (a runner's `Finished`,
    /// a release) is refused with a conflict, not written over theirs, and that change starts
    /// the next pass, which decides again. The written objects (failures logged, left out).
    async fn write_statuses(
        &self,
        resource: &ApiResource,
        writes: Vec<StatusWrite>,
        read: &Workloads,
    ) -> Vec<Arc<DynamicObject>> {
        use futures::StreamExt;
        // Owned futures, made before the first await: a stream mapping through a closure
        // that borrows `self` would not be `Send` for every lifetime, as `tokio::spawn` needs.
        let pending: Vec<_> = writes
            .into_iter()
            .map(|write| {
                let version = read
                    .get(format!("{}/{}", write.namespace, write.name).as_str())
                    .map(|w| tessera_model::json::text(w, "/metadata/resourceVersion"))
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned);
                write_status(self.client.clone(), resource.clone(), write, version)
            })
            .collect();
        futures::stream::iter(pending)
            .buffer_unordered(CONCURRENT_WRITES)
            .filter_map(std::future::ready)
            .collect()
            .await
    }

    /// Carries out one write of a job integration for a job (its kind, the kind's API
    /// resource, the object); a written Workload is answered. A failed write (logged) is an
    /// error.
    async fn write_for_job(
        &self,
        (kind, resource, job_object): (&Integration, &ApiResource, &Value),
        workload: Option<&Value>,
        write: JobWrite,
    ) -> Result<Option<Arc<DynamicObject>>, ()> {
        let namespace = objects::namespace(job_object);
        let result = match write {
            JobWrite::Event(event) => {
                let recorder = if kind.kind == JOBSET.kind {
                    &self.jobset_events
                } else {
                    &self.job_events
                };
                recorder
                    .record(event.involved, event.kind, &event.reason, &event.message)
                    .await;
                return Ok(None);
            }
            JobWrite::CreateWorkload(object) => {
                let object: DynamicObject = serde_json::from_value(object).map_err(|error| {
                    tracing::debug!(%error, "queue manager: a Workload that does not convert");
                })?;
                self.watches
                    .workloads
                    .api(self.client, namespace)
                    .create(&post_params(MANAGER), &object)
                    .await
                    .map(Some)
            }
            JobWrite::PatchJob(patch) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), namespace, resource);
                api.patch(
                    objects::name(job_object),
                    &patch_params(MANAGER),
                    &Patch::Merge(&patch),
                )
                .await
                .map(|_| None)
            }
            JobWrite::WorkloadStatus(status) => {
                let name = workload.map(objects::name).unwrap_or_default();
                let patch = json!({"status": status});
                self.watches
                    .workloads
                    .api(self.client, namespace)
                    .patch_status(name, &patch_params(MANAGER), &Patch::Merge(&patch))
                    .await
                    .map(Some)
            }
        };
        result.map(|object| object.map(Arc::new)).map_err(|error| {
            // A 409 on a creation: there already (a pass before the watch showed it).
            tracing::debug!(%error, job = %objects::name(job_object), "queue manager: job write not done");
        })
    }
}

/// Writes the statuses a check controller's core answers for its AdmissionChecks (their
/// `Active` condition), as `status_of` gives them; failures are logged, the next pass retries.
pub(crate) async fn write_check_statuses(
    client: &Client,
    admission_checks: &[Value],
    status_of: impl Fn(&Value) -> Option<Value>,
) {
    let resource = kueue_resource("AdmissionCheck", "admissionchecks");
    for check in admission_checks {
        if let Some(status) = status_of(check) {
            let write = StatusWrite {
                namespace: String::new(),
                name: objects::name(check).to_owned(),
                status,
            };
            write_status(client.clone(), resource.clone(), write, None).await;
        }
    }
}

/// Merge-patches an object's status; with `version`, on the condition that the object is
/// still at that resourceVersion (a conflict otherwise). The written object, or `None`
/// (logged) on failure.
pub(crate) async fn write_status(
    client: Client,
    resource: ApiResource,
    write: StatusWrite,
    version: Option<String>,
) -> Option<Arc<DynamicObject>> {
    let api: Api<DynamicObject> = if write.namespace.is_empty() {
        Api::all_with(client, &resource)
    } else {
        Api::namespaced_with(client, &write.namespace, &resource)
    };
    let patch = match version {
        Some(version) => json!({"metadata": {"resourceVersion": version}, "status": write.status}),
        None => json!({"status": write.status}),
    };
    match api
        .patch_status(&write.name, &patch_params(MANAGER), &Patch::Merge(&patch))
        .await
    {
        Ok(object) => Some(Arc::new(object)),
        Err(error) => {
            tracing::debug!(%error, kind = %resource.kind, name = %write.name, "queue manager: status not written");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: &str) -> DynamicObject {
        let mut object = DynamicObject::new("w", &kueue_resource("Workload", "workloads"));
        object.metadata.resource_version = Some(version.into());
        object
    }

    #[tokio::test]
    async fn a_status_decided_on_a_version_is_written_only_over_that_version() {
        // The API refuses the write to `changed` (someone wrote it since the pass read it).
        let (client, seen) = crate::shell::tests::recording(|_, path| {
            if path.ends_with("/workloads/changed/status") {
                409
            } else {
                200
            }
        });
        let resource = kueue_resource("Workload", "workloads");
        let write = |name: &str| StatusWrite {
            namespace: "ml".into(),
            name: name.into(),
            status: json!({"conditions": []}),
        };
        let cases = [
            (
                "unchanged",
                Some("7"),
                true,
                r#"{"metadata":{"resourceVersion":"7"},"status":{"conditions":[]}}"#,
            ),
            (
                "changed",
                Some("7"),
                false,
                r#"{"metadata":{"resourceVersion":"7"},"status":{"conditions":[]}}"#,
            ),
            (
                "unconditional",
                None,
                true,
                r#"{"status":{"conditions":[]}}"#,
            ),
        ];
        for (name, version, written, body) in cases {
            let answer = write_status(
                client.clone(),
                resource.clone(),
                write(name),
                version.map(str::to_owned),
            )
            .await;
            assert_eq!(answer.is_some(), written, "{name}");
            let last = seen
                .lock()
                .expect("log")
                .last()
                .cloned()
                .unwrap_or_default();
            assert!(
                last.starts_with(&format!(
                    "PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads/{name}/status?"
                )) && last.ends_with(body),
                "{name}: {last}"
            );
        }
    }

    #[test]
    fn our_write_stands_in_until_the_watch_shows_it() {
        let cases = [
            ("12", "11", true),
            ("12", "12", false),
            ("12", "13", false),
            // Versions that are not numbers: ours until the watch shows the same one.
            ("a", "b", true),
            ("a", "a", false),
        ];
        for (ours, watched, want) in cases {
            assert_eq!(
                newer(&at(ours), &at(watched)),
                want,
                "{ours} over {watched}"
            );
        }
    }
}
