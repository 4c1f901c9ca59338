//! `tessera bench queue --through api` and `--through api-raw`: Kueue's scheduler-performance
//! runs through the embedded API server, with the queue manager shell
//! ([`tessera_controllers::queue::run`]) running in-process, as Kueue's runner
//! (`test/performance/scheduler/runner`) drives minimalkueue: for a TAS configuration the Nodes
//! (bare Node objects, Ready with their allocatable, as the runner's `CreateNodesWithStatus`)
//! and the Topology, then the ResourceFlavor (`rf`, or the configuration's with its topology),
//! the ClusterQueues with a namespace and LocalQueue of the same name each, then bare Workload
//! objects (no Jobs) labelled with their class and running time, their PodSet of the
//! template's pods with its topology request.
//!
//! - `api`: a configuration at real time with every time scaled by `--time-scale` (creation
//!   times and runtimes); the runner's controller here sets `Finished` (reason `ByTest`) once a
//!   Workload has run for its scaled runtime, and releases the quota of an evicted one. Time to
//!   admission per class is measured from the create request to the watch showing
//!   `Admitted=True` (the last admission), divided by the time scale; ClusterQueue usage is
//!   the quota-time the admitted Workloads held over nominal quota × the run.
//! - `api-raw`: admission throughput: N Workloads created pending (the queue manager not yet
//!   running) in ClusterQueues with quota for all, then the queue manager started; Workloads/s
//!   from its start to the watch showing the last one admitted.
//!
//! Decides nothing about queueing: the queue manager does; this creates, watches, finishes
//! and measures.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tessera_queue::api::status;
use tessera_queue::cluster_queue::PreemptionPolicy;
use tessera_sim::queue_scenario::{
    ClusterQueuePlan, Plan, QueuesSet, TopologyPlan, WorkloadTemplate,
};
use tessera_sim::queue_topology::{CLEANUP_LABEL, FlavorConfig};

use crate::bench_report::{CpuClock, Figure};

/// The runner's labels (`generator.go`).
const RUNNING_TIME_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-running-ms";
const CLASS_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-class";
/// How long a run may take before it is abandoned.
const RUN_LIMIT: Duration = Duration::from_secs(1800);
/// How often a waiting run logs its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn kueue(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            tessera_model::kueue::GROUP,
            tessera_model::kueue::STORAGE_VERSION,
            kind,
        ),
        plural,
    )
}

fn policy(policy: PreemptionPolicy) -> &'static str {
    match policy {
        PreemptionPolicy::Never => "Never",
        PreemptionPolicy::LowerPriority => "LowerPriority",
        PreemptionPolicy::LowerOrNewerEqualPriority => "LowerOrNewerEqualPriority",
        PreemptionPolicy::Any => "Any",
    }
}

/// A CPU amount in milli-CPU as a quantity.
fn cpu(milli: i64) -> String {
    if milli % 1000 == 0 {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// The runner's ClusterQueue (`generateQueue`) over `flavor`.
fn cluster_queue(plan: &ClusterQueuePlan, flavor: &str) -> Value {
    let mut quota = json!({"name": "cpu", "nominalQuota": cpu(plan.set.nominal_milli)});
    if let Some(limit) = plan.set.borrowing_limit_milli {
        quota["borrowingLimit"] = json!(cpu(limit));
    }
    let mut spec = json!({
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [quota]}]}],
        "preemption": {
            "reclaimWithinCohort": policy(plan.set.reclaim_within_cohort),
            "withinClusterQueue": policy(plan.set.within_cluster_queue),
        },
    });
    if !plan.cohort.is_empty() {
        spec["cohortName"] = json!(plan.cohort);
    }
    json!({
        "metadata": {"name": plan.name, "labels": {CLASS_LABEL: plan.set.class}},
        "spec": spec,
    })
}

/// One Workload as the runner creates it (`utiltestingapi.MakeWorkload`: one pod set `main`
/// of the template's pods with container `c` and the template's topology request).
fn workload(name: &str, queue: &str, template: &WorkloadTemplate) -> Value {
    let mut pod_set = json!({"name": "main", "count": template.pod_count, "template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu(template.request_milli)}}}],
    }}});
    if let Some(topology) = &template.topology {
        pod_set["topologyRequest"] = topology.api_fields();
    }
    json!({
        "metadata": {"name": name, "namespace": queue, "labels": {
            RUNNING_TIME_LABEL: template.runtime_ms.to_string(), CLASS_LABEL: template.class}},
        "spec": {
            "queueName": queue,
            "priority": template.priority,
            "podSets": [pod_set],
        },
    })
}

/// The runner's ResourceFlavor (`generateResourceFlavor`).
fn resource_flavor(flavor: &FlavorConfig) -> Value {
    let mut spec = json!({});
    if let Some(topology) = &flavor.topology_name {
        spec = json!({"nodeLabels": flavor.node_labels, "topologyName": topology});
    }
    json!({"metadata": {"name": flavor.name, "labels": {CLEANUP_LABEL: "true"}}, "spec": spec})
}

/// The runner's Topology (`generateTopologyResource`).
fn topology_object(topology: &TopologyPlan) -> Value {
    let levels: Vec<Value> = topology
        .levels
        .iter()
        .map(|label| json!({"nodeLabel": label}))
        .collect();
    json!({"metadata": {"name": topology.name, "labels": {CLEANUP_LABEL: "true"}}, "spec": {"levels": levels}})
}

/// A Node's status as `CreateNodesWithStatus` writes it: Ready, with its allocatable.
fn node_status(allocatable: &std::collections::BTreeMap<String, i64>) -> Value {
    let quantities: serde_json::Map<String, Value> = allocatable
        .iter()
        .map(|(resource, value)| {
            let text = if resource == "cpu" {
                cpu(*value)
            } else {
                value.to_string()
            };
            (resource.clone(), json!(text))
        })
        .collect();
    json!({"status": {
        "allocatable": quantities,
        "capacity": quantities,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }})
}

fn dynamic(resource: &ApiResource, mut value: Value) -> anyhow::Result<DynamicObject> {
    value["apiVersion"] = json!(resource.api_version);
    value["kind"] = json!(resource.kind);
    Ok(serde_json::from_value(value)?)
}

/// The embedded platform: a store in a temporary directory behind the API router, reached
/// in-process as a cluster admin; [`Platform::serve_tls`] also serves it on loopback.
pub(crate) struct Platform {
    dir: tempfile::TempDir,
    server: Arc<tessera_apiserver::ApiServer>,
    pub(crate) client: kube::Client,
}

impl Platform {
    pub(crate) fn start() -> anyhow::Result<Platform> {
        let dir = tempfile::tempdir().context("temporary directory")?;
        let store = tessera_store::Store::open(&dir.path().join("state.db"), Default::default())?;
        let server = crate::bench::bench_server(store, dir.path())?;
        let client = kube::Client::new(crate::bench::as_admin(&server), "default");
        Ok(Platform {
            dir,
            server,
            client,
        })
    }

    /// Serves the API over TLS on a free loopback port, as `tessera up` does; answers the
    /// admin kubeconfig that reaches it.
    pub(crate) async fn serve_tls(&self) -> anyhow::Result<String> {
        use tessera_apiserver::tls::{Pki, serve};
        let pki = Pki::load_or_create(self.dir.path()).context("certificates")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let tls = pki.server_config().context("TLS configuration")?;
        tokio::spawn(serve(
            listener,
            tls,
            self.server.router(),
            std::future::pending(),
        ));
        Ok(pki.kubeconfig(&format!("https://{address}")))
    }

    pub(crate) fn api(&self, resource: &ApiResource, namespace: &str) -> kube::Api<DynamicObject> {
        if namespace.is_empty() {
            kube::Api::all_with(self.client.clone(), resource)
        } else {
            kube::Api::namespaced_with(self.client.clone(), namespace, resource)
        }
    }

    pub(crate) async fn create(
        &self,
        resource: &ApiResource,
        namespace: &str,
        value: Value,
    ) -> anyhow::Result<()> {
        let object = dynamic(resource, value)?;
        self.api(resource, namespace)
            .create(&Default::default(), &object)
            .await
            .with_context(|| format!("creating {} {:?}", resource.kind, object.metadata.name))?;
        Ok(())
    }

    /// The Nodes, each made Ready with its allocatable, then the Topology.
    async fn create_topology(&self, topology: &TopologyPlan) -> anyhow::Result<()> {
        let nodes = ApiResource::erase::<k8s_openapi::api::core::v1::Node>(&());
        for node in &topology.nodes {
            self.create(
                &nodes,
                "",
                json!({"metadata": {"name": node.name, "labels": node.labels}}),
            )
            .await?;
            self.api(&nodes, "")
                .patch_status(
                    &node.name,
                    &PatchParams::default(),
                    &Patch::Merge(&node_status(&node.allocatable)),
                )
                .await
                .with_context(|| format!("status of Node {}", node.name))?;
        }
        self.create(
            &kueue("Topology", "topologies"),
            "",
            topology_object(topology),
        )
        .await
    }

    /// The ResourceFlavor, then each ClusterQueue with its namespace and LocalQueue.
    async fn create_queues(
        &self,
        flavor: &FlavorConfig,
        cluster_queues: &[ClusterQueuePlan],
    ) -> anyhow::Result<()> {
        let namespaces = ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&());
        self.create(
            &kueue("ResourceFlavor", "resourceflavors"),
            "",
            resource_flavor(flavor),
        )
        .await?;
        for plan in cluster_queues {
            self.create(
                &kueue("ClusterQueue", "clusterqueues"),
                "",
                cluster_queue(plan, &flavor.name),
            )
            .await?;
            self.create(&namespaces, "", json!({"metadata": {"name": plan.name}}))
                .await?;
            self.create(
                &kueue("LocalQueue", "localqueues"),
                &plan.name,
                json!({"metadata": {"name": plan.name, "namespace": plan.name}, "spec": {"clusterQueue": plan.name}}),
            )
            .await?;
        }
        Ok(())
    }

    pub(crate) fn start_queue_manager(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(tessera_controllers::queue::run(
            self.client.clone(),
            tessera_controllers::queue::QueueConfig {
                configuration: Default::default(),
                clock: Arc::new(SystemTime::now),
                metrics: None,
            },
        ))
    }
}

/// What the harness knows of one Workload it created.
#[derive(Debug, Clone)]
struct Tracked {
    class: String,
    /// Index of its ClusterQueue in the plan.
    cluster_queue: usize,
    milli: i64,
    runtime: Duration,
    created: Instant,
    /// Since when it holds quota (as the watch shows it).
    admitted_since: Option<Instant>,
    /// Created → last admission.
    time_to_admission: Option<Duration>,
    finished: bool,
    finisher_started: bool,
}

/// The harness's record of the run, shared by the creator, the watch and the finishers.
#[derive(Debug, Default)]
struct Record {
    workloads: HashMap<String, Tracked>,
    /// Quota-time held per ClusterQueue, milli-CPU × seconds.
    used: Vec<f64>,
    admitted: usize,
    finished: usize,
    evictions: u64,
}

pub(crate) fn condition_true(object: &Value, kind: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|c| c["type"] == kind && c["status"] == "True")
        })
}

fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What the watch makes the runner's controller do for one Workload.
enum Action {
    Nothing,
    Finish(Duration),
    Release,
}

impl Record {
    /// Books what the watch shows of a Workload; answers what the runner's controller does.
    fn observe(&mut self, object: &Value, now: Instant) -> Action {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let Some(tracked) = self.workloads.get_mut(&key(namespace, name)) else {
            return Action::Nothing;
        };
        let admitted = condition_true(object, status::ADMITTED);
        let reserved = condition_true(object, status::QUOTA_RESERVED);
        let finished = condition_true(object, status::FINISHED);
        let evicted = condition_true(object, status::EVICTED);
        let holds = (admitted || reserved) && !finished;
        match (tracked.admitted_since, holds) {
            (None, true) => {
                tracked.admitted_since = Some(now);
                if tracked.time_to_admission.is_none() {
                    self.admitted += 1;
                }
                tracked.time_to_admission = Some(now - tracked.created);
            }
            (Some(since), false) => {
                self.used[tracked.cluster_queue] +=
                    tracked.milli as f64 * (now - since).as_secs_f64();
                tracked.admitted_since = None;
                if evicted {
                    self.evictions += 1;
                    tracked.finisher_started = false;
                }
            }
            _ => {}
        }
        if finished && !tracked.finished {
            tracked.finished = true;
            self.finished += 1;
        }
        if evicted && reserved {
            return Action::Release;
        }
        if admitted && !finished && !evicted && !tracked.finisher_started {
            tracked.finisher_started = true;
            return Action::Finish(tracked.runtime);
        }
        Action::Nothing
    }
}

/// The runner's controller and the recorder: follows every Workload, finishes an admitted one
/// after its runtime (`Finished=True`, reason `ByTest`), releases an evicted one's quota.
/// `progress` carries (admitted, finished) counts.
fn follow(
    platform: &Platform,
    record: Arc<Mutex<Record>>,
    progress: tokio::sync::watch::Sender<(usize, usize)>,
) -> tokio::task::JoinHandle<()> {
    let workloads = kueue("Workload", "workloads");
    let api = platform.api(&workloads, "");
    tokio::spawn(async move {
        let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
        while let Some(event) = events.next().await {
            let Ok(watcher::Event::Apply(object) | watcher::Event::InitApply(object)) = event
            else {
                continue;
            };
            let Ok(value) = serde_json::to_value(&object) else {
                continue;
            };
            let (action, counts) = {
                let Ok(mut record) = record.lock() else {
                    return;
                };
                let action = record.observe(&value, Instant::now());
                (action, (record.admitted, record.finished))
            };
            progress.send_replace(counts);
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            let name = object.metadata.name.clone().unwrap_or_default();
            let api: kube::Api<DynamicObject> =
                kube::Api::namespaced_with(api.clone().into_client(), &namespace, &workloads);
            match action {
                Action::Nothing => {}
                Action::Release => {
                    if let Some(patch) = status::released(&value, SystemTime::now()) {
                        write_status(&api, &name, patch).await;
                    }
                }
                Action::Finish(runtime) => {
                    tracing::debug!(%namespace, %name, "bench runner: admission seen");
                    tokio::spawn(async move {
                        tokio::time::sleep(runtime).await;
                        let Ok(current) = api.get(&name).await else {
                            return;
                        };
                        let Ok(current) = serde_json::to_value(&current) else {
                            return;
                        };
                        if !condition_true(&current, status::ADMITTED) {
                            return;
                        }
                        if let Some(mut patch) =
                            status::finished(&current, true, "By test runner", SystemTime::now())
                        {
                            by_test(&mut patch);
                            write_status(&api, &name, patch).await;
                            tracing::debug!(%namespace, %name, "bench runner: finish written");
                        }
                    });
                }
            }
        }
    })
}

/// The runner's reason on its `Finished` condition.
fn by_test(patch: &mut Value) {
    if let Some(list) = patch.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in list.iter_mut().filter(|c| c["type"] == status::FINISHED) {
            condition["reason"] = json!("ByTest");
        }
    }
}

async fn write_status(api: &kube::Api<DynamicObject>, name: &str, status: Value) {
    let patch = json!({"status": status});
    if let Err(error) = api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::debug!(%error, %name, "bench runner: status not written");
    }
}

async fn wait_until(
    progress: &mut tokio::sync::watch::Receiver<(usize, usize)>,
    done: impl FnMut(&(usize, usize)) -> bool,
    what: &str,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + RUN_LIMIT;
    let mut done = done;
    let reached = loop {
        let report = (tokio::time::Instant::now() + PROGRESS_EVERY).min(deadline);
        let waited = tokio::time::timeout_at(report, progress.wait_for(&mut done))
            .await
            .map(|result| result.is_ok());
        match waited {
            Ok(reached) => break reached,
            Err(_) if tokio::time::Instant::now() >= deadline => break false,
            Err(_) => {
                let (admitted, finished) = *progress.borrow();
                tracing::info!(admitted, finished, "{what}: waiting");
            }
        }
    };
    if !reached {
        anyhow::bail!(
            "{what}: (admitted, finished) {:?} after {} s",
            *progress.borrow(),
            RUN_LIMIT.as_secs()
        );
    }
    Ok(())
}

/// Per class, the mean of `value` over its members (classes in first-seen order).
fn class_means<'a>(members: impl Iterator<Item = (&'a str, Option<f64>)>) -> Vec<(String, f64)> {
    let mut sums: Vec<(String, f64, usize)> = Vec::new();
    for (class, value) in members {
        let Some(value) = value else { continue };
        match sums.iter_mut().find(|(c, _, _)| c == class) {
            Some((_, sum, count)) => {
                *sum += value;
                *count += 1;
            }
            None => sums.push((class.to_owned(), value, 1)),
        }
    }
    sums.into_iter()
        .map(|(class, sum, count)| (class, sum / count as f64))
        .collect()
}

/// A configuration's run at real time × `time_scale`: its figures (in the configuration's
/// time, measured / time scale) and the CPU seconds of the run.
pub async fn configuration(
    plan: &Plan,
    time_scale: f64,
    class_order: &[&str],
) -> anyhow::Result<(Vec<Figure>, Option<f64>)> {
    let platform = Platform::start()?;
    if let Some(topology) = &plan.topology {
        platform.create_topology(topology).await?;
    }
    platform
        .create_queues(&plan.flavor, &plan.cluster_queues)
        .await?;
    let record = Arc::new(Mutex::new(Record {
        used: vec![0.0; plan.cluster_queues.len()],
        ..Record::default()
    }));
    let (progress, mut watched) = tokio::sync::watch::channel((0, 0));
    let follower = follow(&platform, record.clone(), progress);
    let queue_manager = platform.start_queue_manager();
    let workloads = kueue("Workload", "workloads");
    let scaled = |ms: u64| Duration::from_secs_f64(ms as f64 * time_scale / 1000.0);
    let cpu = CpuClock::start();
    let start = Instant::now();
    let mut creates = Vec::new();
    for planned in &plan.workloads {
        tokio::time::sleep_until(tokio::time::Instant::from_std(
            start + scaled(planned.created_ms),
        ))
        .await;
        let queue = &plan.cluster_queues[planned.cluster_queue].name;
        let template = &planned.template;
        if let Ok(mut record) = record.lock() {
            record.workloads.insert(
                key(queue, &planned.name),
                Tracked {
                    class: template.class.clone(),
                    cluster_queue: planned.cluster_queue,
                    milli: template.total_milli(),
                    runtime: scaled(template.runtime_ms),
                    created: Instant::now(),
                    admitted_since: None,
                    time_to_admission: None,
                    finished: false,
                    finisher_started: false,
                },
            );
        }
        let object = workload(&planned.name, queue, template);
        let api = platform.api(&workloads, queue);
        let object = dynamic(&workloads, object)?;
        creates.push(tokio::spawn(async move {
            api.create(&Default::default(), &object).await.map(|_| ())
        }));
    }
    for create in creates {
        create.await??;
    }
    let total = plan.workloads.len();
    tracing::info!(workloads = total, "configuration: every Workload created");
    wait_until(
        &mut watched,
        |(_, finished)| *finished >= total,
        "configuration",
    )
    .await?;
    let wall = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu.seconds();
    queue_manager.abort();
    follower.abort();
    let record = record
        .lock()
        .map_err(|_| anyhow::anyhow!("record poisoned"))?;
    let mut figures = vec![Figure::new(
        "wall time (configuration's time)",
        "s",
        wall / time_scale,
    )];
    let mut usage: Vec<(String, f64, f64)> = Vec::new();
    for (index, cq) in plan.cluster_queues.iter().enumerate() {
        let quota = cq.set.nominal_milli as f64 * wall;
        match usage.iter_mut().find(|(c, _, _)| *c == cq.set.class) {
            Some((_, used, all)) => {
                *used += record.used[index];
                *all += quota;
            }
            None => usage.push((cq.set.class.clone(), record.used[index], quota)),
        }
    }
    for (class, used, quota) in usage {
        figures.push(Figure::new(
            &format!("ClusterQueue usage ({class})"),
            "%",
            used * 100.0 / quota.max(1e-9),
        ));
    }
    let mut means = class_means(record.workloads.values().map(|t| {
        (
            t.class.as_str(),
            t.time_to_admission.map(|d| d.as_secs_f64() / time_scale),
        )
    }));
    means.sort_by_key(|(class, _)| {
        class_order
            .iter()
            .position(|c| c == class)
            .unwrap_or(usize::MAX)
    });
    for (class, mean) in means {
        figures.push(Figure::new(
            &format!("avg time to admission {class}"),
            "s",
            mean,
        ));
    }
    figures.extend([
        Figure::new("evictions", "", record.evictions as f64),
        Figure::new("unfinished", "", (total - record.finished) as f64),
        Figure::new("time scale", "", time_scale),
        Figure::new("CPU", "s", cpu_seconds),
        Figure::new("wall clock", "s", wall),
    ]);
    Ok((figures, cpu_seconds))
}

/// ClusterQueues of the raw run: quota for all of `workloads` one-CPU Workloads spread over
/// `count` ClusterQueues, no Cohort.
fn raw_cluster_queues(workloads: usize, count: usize) -> Vec<ClusterQueuePlan> {
    let per_queue = workloads.div_ceil(count.max(1)) as i64;
    (0..count)
        .map(|index| ClusterQueuePlan {
            name: format!("raw-{index}"),
            cohort: String::new(),
            set: QueuesSet {
                class: "raw".into(),
                count,
                nominal_milli: per_queue * 1000,
                borrowing_limit_milli: None,
                reclaim_within_cohort: PreemptionPolicy::Never,
                within_cluster_queue: PreemptionPolicy::Never,
                workloads_sets: Vec::new(),
            },
        })
        .collect()
}

/// The raw run's Workload: one pod of one CPU.
fn raw_template() -> WorkloadTemplate {
    WorkloadTemplate {
        class: "raw".into(),
        runtime_ms: 0,
        priority: 0,
        request_milli: 1000,
        pod_count: 1,
        topology: None,
    }
}

/// How many ClusterQueues the raw run spreads its Workloads over.
const RAW_QUEUES: usize = 10;
/// Concurrent clients creating the raw run's Workloads.
const RAW_CREATORS: usize = 16;

/// The raw admission run: its figures and the CPU seconds of the admission phase.
pub async fn raw(workloads: usize) -> anyhow::Result<(Vec<Figure>, Option<f64>)> {
    let platform = Platform::start()?;
    let queues = raw_cluster_queues(workloads, RAW_QUEUES);
    platform
        .create_queues(&FlavorConfig::default(), &queues)
        .await?;
    let record = Arc::new(Mutex::new(Record {
        used: vec![0.0; queues.len()],
        ..Record::default()
    }));
    let resource = kueue("Workload", "workloads");
    let created = Instant::now();
    let objects: Vec<(String, DynamicObject)> = (0..workloads)
        .map(|index| {
            let queue = &queues[index % queues.len()].name;
            let name = format!("raw-{index}");
            if let Ok(mut record) = record.lock() {
                record.workloads.insert(
                    key(queue, &name),
                    Tracked {
                        class: "raw".into(),
                        cluster_queue: index % queues.len(),
                        milli: 1000,
                        runtime: Duration::MAX,
                        created,
                        admitted_since: None,
                        time_to_admission: None,
                        finished: false,
                        finisher_started: true,
                    },
                );
            }
            Ok((
                queue.clone(),
                dynamic(&resource, workload(&name, queue, &raw_template()))?,
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    let results: Vec<Result<DynamicObject, kube::Error>> = futures::stream::iter(objects)
        .map(|(queue, object)| {
            let api = platform.api(&resource, &queue);
            async move { api.create(&Default::default(), &object).await }
        })
        .buffer_unordered(RAW_CREATORS)
        .collect()
        .await;
    for result in results {
        result?;
    }
    let creation = created.elapsed().as_secs_f64();
    let (progress, mut watched) = tokio::sync::watch::channel((0, 0));
    let follower = follow(&platform, record.clone(), progress);
    let cpu = CpuClock::start();
    let start = Instant::now();
    let queue_manager = platform.start_queue_manager();
    wait_until(
        &mut watched,
        |(admitted, _)| *admitted >= workloads,
        "raw admission",
    )
    .await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu.seconds();
    queue_manager.abort();
    follower.abort();
    Ok((
        vec![
            Figure::new(
                "admitted / s (queue manager start → last admitted)",
                "Workloads/s",
                workloads as f64 / seconds.max(1e-9),
            ),
            Figure::new("admission phase", "s", seconds),
            Figure::new(
                "creation rate (pending, no queue manager)",
                "Workloads/s",
                workloads as f64 / creation.max(1e-9),
            ),
            Figure::new("CPU", "s", cpu_seconds),
        ],
        cpu_seconds,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked() -> Tracked {
        Tracked {
            class: "small".into(),
            cluster_queue: 0,
            milli: 1000,
            runtime: Duration::from_millis(200),
            created: Instant::now(),
            admitted_since: None,
            time_to_admission: None,
            finished: false,
            finisher_started: false,
        }
    }

    fn object(conditions: &[&str]) -> Value {
        let list: Vec<Value> = conditions
            .iter()
            .map(|c| json!({"type": c, "status": "True"}))
            .collect();
        json!({"metadata": {"namespace": "q", "name": "w"}, "status": {"conditions": list}})
    }

    #[test]
    fn the_runner_finishes_admitted_workloads_once_and_releases_evicted_ones() {
        let mut record = Record {
            used: vec![0.0],
            ..Record::default()
        };
        record.workloads.insert(key("q", "w"), tracked());
        let start = Instant::now();
        // Pending: nothing to do.
        assert!(matches!(
            record.observe(&object(&[]), start),
            Action::Nothing
        ));
        // Admitted: finished after its runtime, once.
        let admitted = object(&["QuotaReserved", "Admitted"]);
        assert!(
            matches!(record.observe(&admitted, start), Action::Finish(d) if d == Duration::from_millis(200))
        );
        assert!(matches!(record.observe(&admitted, start), Action::Nothing));
        assert_eq!(record.admitted, 1);
        // Evicted while holding quota: released; the held quota-time booked.
        let later = start + Duration::from_secs(2);
        let evicted = object(&["QuotaReserved", "Evicted"]);
        assert!(matches!(record.observe(&evicted, later), Action::Release));
        assert_eq!(record.used[0], 0.0, "still holds quota until released");
        let released = object(&["Evicted"]);
        assert!(matches!(record.observe(&released, later), Action::Nothing));
        assert_eq!(record.used[0], 2000.0);
        assert_eq!(record.evictions, 1);
        // Admitted again: counted once, finished again; then finished.
        assert!(matches!(
            record.observe(&admitted, later),
            Action::Finish(_)
        ));
        assert_eq!(record.admitted, 1);
        let finished = object(&["QuotaReserved", "Admitted", "Finished"]);
        assert!(matches!(
            record.observe(&finished, later + Duration::from_secs(1)),
            Action::Nothing
        ));
        assert_eq!((record.finished, record.used[0]), (1, 3000.0));
    }

    #[test]
    fn cluster_queues_are_the_runners() {
        let queues = raw_cluster_queues(25, 10);
        assert_eq!(queues.len(), 10);
        let object = cluster_queue(&queues[3], "rf");
        assert_eq!(object["metadata"]["name"], "raw-3");
        assert_eq!(
            object["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"],
            "3"
        );
        assert!(object["spec"].get("cohortName").is_none());
        let template = WorkloadTemplate {
            class: "small".into(),
            runtime_ms: 200,
            priority: 50,
            request_milli: 1500,
            ..raw_template()
        };
        let w = workload("small-0-1-0", "cq-0-0-cohort-0", &template);
        assert_eq!(
            w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1500m"
        );
        assert_eq!(w["metadata"]["labels"][RUNNING_TIME_LABEL], "200");
        assert!(w["spec"]["podSets"][0].get("topologyRequest").is_none());
    }

    #[test]
    fn tas_objects_are_the_runners() {
        let plan =
            tessera_sim::queue_scenario::GeneratorConfig::parse(tessera_sim::queue_scenario::TAS)
                .unwrap()
                .scaled(0.01)
                .plan();
        let topology = plan.topology.as_ref().unwrap();
        let object = topology_object(topology);
        assert_eq!(object["metadata"]["name"], "default-topology");
        assert_eq!(
            object["spec"]["levels"][2]["nodeLabel"],
            "kubernetes.io/hostname"
        );
        let flavor = resource_flavor(&plan.flavor);
        assert_eq!(
            flavor["spec"],
            json!({"nodeLabels": {"tas-node-group": "tas"}, "topologyName": "default-topology"})
        );
        let status = node_status(&topology.nodes[0].allocatable);
        assert_eq!(
            status["status"]["allocatable"],
            json!({"cpu": "96", "memory": "274877906944", "pods": "110"})
        );
        let large = plan
            .workloads
            .iter()
            .find(|w| w.template.class == "large-balanced-rack")
            .unwrap();
        let w = workload(&large.name, "q", &large.template);
        assert_eq!(w["spec"]["podSets"][0]["count"], 8);
        assert_eq!(
            w["spec"]["podSets"][0]["topologyRequest"],
            json!({"podSetSliceRequiredTopology": "cloud.provider.com/topology-rack", "podSetSliceSize": 4})
        );
    }
}
