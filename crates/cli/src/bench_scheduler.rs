//! `tessera bench scheduler`: kube-scheduler's scheduler_perf workloads, shaped and named as
//! upstream's `performance-config.yaml` files make them.
//!
//! - SchedulingBasic (`misc/performance-config.yaml`): `createNodes` (upstream's
//!   `node-default.yaml`: 4 CPU, 32 GiB, 110 pods), `createPods` of the initial pods
//!   (`pod-default.yaml`: 100m CPU / 500 MiB; scheduled, unmeasured), then `createPods` with
//!   `collectMetrics: true`.
//! - SchedulingWithResourceClaimTemplate (`dra/performance-config.yaml`): nodes with and
//!   without the test driver, one ResourceSlice per driver node with `maxClaimsPerNode`
//!   devices (`createResourceDriver`), the `test-class` DeviceClass, a ResourceClaimTemplate
//!   in `init` and pods naming it (placed, unmeasured), then a template in `test` and the
//!   measured pods naming it.
//!
//! Through the embedded API server (`--api`), the measured pods are created — from 30
//! concurrent clients, as upstream's pod creator — while the clock runs, the scheduler shell
//! places them, and for DRA the ResourceClaim controller makes each pod's claim from the
//! template inside the measured phase. Throughput is sampled every second as
//! scheduler_perf's `throughputCollector` does and reported as it reports it
//! (SchedulingThroughput Average, Perc50, Perc90, Perc99; upstream's thresholds apply to the
//! Average), beside measured pods over the measured phase and the creation rate achieved.
//!
//! The core rows (`core (no API)`) run the same shapes through the pure scheduling core, one
//! pod at a time, each decision booked before the next: no API, no writes, no watches. They
//! are comparable with each other only, never with upstream's end-to-end thresholds.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::json;
use tessera_scheduler::score::Strategy;
use tessera_scheduler::{Scheduler, node_info};

use crate::bench_report::{CpuClock, Figure, Repeat, Row};

/// What a core row measures.
const CORE: &str = "core (no API; compare with core rows only)";
/// What an end-to-end row measures.
const END_TO_END: &str = "end-to-end (embedded API server, scheduler shell)";

/// A SchedulingBasic workload of upstream's `misc/performance-config.yaml`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BasicWorkload {
    pub name: &'static str,
    pub init_nodes: usize,
    pub init_pods: usize,
    pub measure_pods: usize,
    /// Upstream's CI threshold (SchedulingThroughput Average, pods/s), where it sets one.
    pub threshold: Option<&'static str>,
}

/// Upstream's SchedulingBasic workloads (the feature-gate variants share these sizes).
pub const BASIC: &[BasicWorkload] = &[
    BasicWorkload {
        name: "5Nodes",
        init_nodes: 5,
        init_pods: 5,
        measure_pods: 10,
        threshold: None,
    },
    BasicWorkload {
        name: "500Nodes",
        init_nodes: 500,
        init_pods: 500,
        measure_pods: 1000,
        threshold: None,
    },
    BasicWorkload {
        name: "5000Nodes",
        init_nodes: 5000,
        init_pods: 1000,
        measure_pods: 1000,
        threshold: None,
    },
    BasicWorkload {
        name: "5000Nodes_10000Pods",
        init_nodes: 5000,
        init_pods: 1000,
        measure_pods: 10_000,
        threshold: Some("680"),
    },
    BasicWorkload {
        name: "5000Nodes_50000Pods",
        init_nodes: 5000,
        init_pods: 5000,
        measure_pods: 50_000,
        threshold: Some("810"),
    },
];

/// A SchedulingWithResourceClaimTemplate workload of upstream's `dra/performance-config.yaml`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DraWorkload {
    pub name: &'static str,
    pub nodes_with_dra: usize,
    pub nodes_without_dra: usize,
    pub init_pods: usize,
    pub measure_pods: usize,
    /// Devices in each driver node's ResourceSlice.
    pub max_claims_per_node: usize,
    pub threshold: Option<&'static str>,
}

/// Upstream's SchedulingWithResourceClaimTemplate workloads.
pub const DRA: &[DraWorkload] = &[
    DraWorkload {
        name: "fast",
        nodes_with_dra: 1,
        nodes_without_dra: 1,
        init_pods: 0,
        measure_pods: 10,
        max_claims_per_node: 10,
        threshold: None,
    },
    DraWorkload {
        name: "2000pods_100nodes",
        nodes_with_dra: 100,
        nodes_without_dra: 0,
        init_pods: 1000,
        measure_pods: 1000,
        max_claims_per_node: 20,
        threshold: None,
    },
    DraWorkload {
        name: "2000pods_200nodes",
        nodes_with_dra: 200,
        nodes_without_dra: 0,
        init_pods: 1000,
        measure_pods: 1000,
        max_claims_per_node: 10,
        threshold: None,
    },
    DraWorkload {
        name: "5000pods_500nodes",
        nodes_with_dra: 500,
        nodes_without_dra: 0,
        init_pods: 2500,
        measure_pods: 2500,
        max_claims_per_node: 10,
        threshold: Some("40 (56 with QueueingHints)"),
    },
];

fn parse_basic(text: &str) -> Result<BasicWorkload, String> {
    BASIC
        .iter()
        .find(|w| w.name == text)
        .copied()
        .ok_or_else(|| {
            let names: Vec<&str> = BASIC.iter().map(|w| w.name).collect();
            format!(
                "no SchedulingBasic workload {text:?} (upstream's: {})",
                names.join(", ")
            )
        })
}

fn parse_dra(text: &str) -> Result<DraWorkload, String> {
    DRA.iter().find(|w| w.name == text).copied().ok_or_else(|| {
        let names: Vec<&str> = DRA.iter().map(|w| w.name).collect();
        format!(
            "no SchedulingWithResourceClaimTemplate workload {text:?} (upstream's: {})",
            names.join(", ")
        )
    })
}

/// Options of `tessera bench scheduler`.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedulerBenchArgs {
    /// SchedulingBasic workload, by upstream's name (5Nodes, 500Nodes, 5000Nodes,
    /// 5000Nodes_10000Pods, 5000Nodes_50000Pods).
    #[arg(long, default_value = "5000Nodes_10000Pods", value_parser = parse_basic)]
    pub basic: BasicWorkload,
    /// SchedulingWithResourceClaimTemplate workload, by upstream's name (fast,
    /// 2000pods_100nodes, 2000pods_200nodes, 5000pods_500nodes).
    #[arg(long, default_value = "5000pods_500nodes", value_parser = parse_dra)]
    pub dra: DraWorkload,
    /// Gangs of eight one-GPU pods, on as many eight-GPU nodes (core only; upstream has no
    /// gang workload to compare with).
    #[arg(long, default_value_t = 1000)]
    pub gangs: usize,
    /// Also run SchedulingBasic and SchedulingWithResourceClaimTemplate end to end through
    /// the embedded API server, as scheduler_perf does.
    #[arg(long)]
    pub api: bool,
    #[command(flatten)]
    pub repeat: Repeat,
}

/// Upstream's `node-default.yaml` (and `node-with-dra-test-driver.yaml`): 4 CPU, 32 GiB, 110
/// pods, Ready. Allocatable is set beside capacity (kube-apiserver does not default it either;
/// the kubelet reports both).
fn perf_node(name: &str, extra_allocatable: Option<(&str, usize)>) -> anyhow::Result<Node> {
    let mut resources = json!({"pods": "110", "cpu": "4", "memory": "32Gi"});
    if let Some((resource, count)) = extra_allocatable {
        resources[resource] = json!(count.to_string());
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": resources, "allocatable": resources,
                   "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"},
    }))?)
}

/// A pod of `namespace` with the given spec.
fn pod(namespace: &str, name: &str, spec: serde_json::Value) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace, "name": name, "uid": format!("{namespace}-{name}")},
        "spec": spec,
    }))?)
}

/// Upstream's `pod-default.yaml`.
fn default_pod(namespace: &str, name: &str) -> anyhow::Result<Pod> {
    let resources = json!({"cpu": "100m", "memory": "500Mi"});
    pod(
        namespace,
        name,
        json!({"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
        "ports": [{"containerPort": 80}], "resources": {"limits": resources, "requests": resources}}]}),
    )
}

/// Upstream's `dra/templates/pod-with-claim-template.yaml`.
fn claim_template_pod(namespace: &str, name: &str) -> anyhow::Result<Pod> {
    pod(
        namespace,
        name,
        json!({
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                            "resources": {"claims": [{"name": "resource"}]}}],
            "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}],
        }),
    )
}

/// The request upstream's `dra/templates/resourceclaimtemplate.yaml` makes (one request).
fn claim_spec() -> serde_json::Value {
    json!({"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}})
}

fn claim_template(namespace: &str) -> anyhow::Result<ResourceClaimTemplate> {
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace, "name": "test-claim-template"},
        "spec": {"spec": claim_spec()},
    }))?)
}

/// Upstream's `createResourceDriver` slice for one node: `capacity` devices `instance-<i>`.
fn driver_slice(node: &str, capacity: usize) -> anyhow::Result<ResourceSlice> {
    let devices: Vec<serde_json::Value> = (0..capacity)
        .map(|i| {
            json!({"name": format!("instance-{i}"), "attributes": {
            "model": {"string": "A100"}, "family": {"string": "GPU"},
            "driverVersion": {"version": "1.2.3"}, "dra.example.com/numa": {"int": i}},
            "capacity": {"memory": {"value": "1Gi"}}})
        })
        .collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"name": node},
        "spec": {"driver": "test-driver.cdi.k8s.io", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    }))?)
}

/// Everything one workload creates, in upstream's order: nodes, slices, classes; then per
/// phase (initial, measured) its namespace's templates and pods.
struct Workload {
    /// `SchedulingBasic/5000Nodes_10000Pods`, ….
    name: String,
    nodes: Vec<Node>,
    slices: Vec<ResourceSlice>,
    classes: Vec<DeviceClass>,
    init: Phase,
    measured: Phase,
    threshold: Option<&'static str>,
    /// Whether the ResourceClaim controller runs (the DRA workloads).
    claim_controller: bool,
}

struct Phase {
    namespace: &'static str,
    templates: Vec<ResourceClaimTemplate>,
    pods: Vec<Pod>,
}

impl Phase {
    /// Each pod with the claims the ResourceClaim controller makes for it from its
    /// template: what the core, which takes claims resolved, is given.
    fn with_claims(&self) -> anyhow::Result<Vec<(Pod, Vec<ResourceClaim>)>> {
        self.pods
            .iter()
            .map(|p| {
                let claims = match &p.spec {
                    Some(spec) if spec.resource_claims.is_some() => {
                        let name =
                            format!("{}-resource", p.metadata.name.clone().unwrap_or_default());
                        vec![serde_json::from_value(json!({
                            "metadata": {"namespace": self.namespace, "name": name},
                            "spec": claim_spec(),
                        }))?]
                    }
                    _ => Vec::new(),
                };
                Ok((p.clone(), claims))
            })
            .collect()
    }
}

fn basic_workload(w: &BasicWorkload) -> anyhow::Result<Workload> {
    let phase = |namespace: &'static str, count: usize| -> anyhow::Result<Phase> {
        Ok(Phase {
            namespace,
            templates: vec![],
            pods: (0..count)
                .map(|i| default_pod(namespace, &format!("pod-{i}")))
                .collect::<Result<_, _>>()?,
        })
    };
    Ok(Workload {
        name: format!("SchedulingBasic/{}", w.name),
        nodes: (0..w.init_nodes)
            .map(|i| perf_node(&format!("scheduler-perf-{i}"), None))
            .collect::<Result<_, _>>()?,
        slices: vec![],
        classes: vec![],
        init: phase("init", w.init_pods)?,
        measured: phase("test", w.measure_pods)?,
        threshold: w.threshold,
        claim_controller: false,
    })
}

fn dra_workload(w: &DraWorkload) -> anyhow::Result<Workload> {
    let mut nodes: Vec<Node> = (0..w.nodes_without_dra)
        .map(|i| perf_node(&format!("scheduler-perf-{i}"), None))
        .collect::<Result<_, _>>()?;
    let mut slices = Vec::new();
    for i in 0..w.nodes_with_dra {
        let name = format!("scheduler-perf-dra-{i}");
        nodes.push(perf_node(&name, None)?);
        slices.push(driver_slice(&name, w.max_claims_per_node)?);
    }
    let class: DeviceClass = serde_json::from_value(json!({"metadata": {"name": "test-class"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"test-driver.cdi.k8s.io\""}}]}}))?;
    let phase = |namespace: &'static str, count: usize| -> anyhow::Result<Phase> {
        Ok(Phase {
            namespace,
            templates: vec![claim_template(namespace)?],
            pods: (0..count)
                .map(|i| claim_template_pod(namespace, &format!("test-dra-{i}")))
                .collect::<Result<_, _>>()?,
        })
    };
    Ok(Workload {
        name: format!("SchedulingWithResourceClaimTemplate/{}", w.name),
        nodes,
        slices,
        classes: vec![class],
        init: phase("init", w.init_pods)?,
        measured: phase("test", w.measure_pods)?,
        threshold: w.threshold,
        claim_controller: true,
    })
}

/// Places `pods` one at a time, each decision booked before the next; how many were placed.
fn place(scheduler: &mut Scheduler, pods: &[(Pod, Vec<ResourceClaim>)]) -> usize {
    let mut placed = 0;
    for (p, claims) in pods {
        if let Ok(decision) = scheduler.schedule(p, claims) {
            scheduler.assume(p, &decision, claims);
            placed += 1;
        }
    }
    placed
}

/// A workload on the pure core: the initial pods placed unmeasured, then the measured ones.
fn on_core(work: &Workload) -> anyhow::Result<Row> {
    let init = work.init.with_claims()?;
    let measured = work.measured.with_claims()?;
    let mut scheduler = Scheduler::new(
        node_info::build(&work.nodes, &[]),
        work.slices.clone(),
        work.classes.clone(),
        [],
        Strategy::default(),
    );
    let init_placed = place(&mut scheduler, &init);
    if init_placed < init.len() {
        anyhow::bail!(
            "{}: only {init_placed} of {} initial pods fit",
            work.name,
            init.len()
        );
    }
    let cpu = CpuClock::start();
    let start = Instant::now();
    let placed = place(&mut scheduler, &measured);
    let seconds = start.elapsed().as_secs_f64();
    Ok(Row {
        name: work.name.clone(),
        kind: CORE.into(),
        items: placed as u64,
        cpu_seconds: cpu.seconds(),
        figures: vec![Figure::new(
            "placed",
            "pods/s",
            placed as f64 / seconds.max(1e-9),
        )],
        anchor: "– (no API: not comparable with upstream's end-to-end thresholds)".into(),
    })
}

fn gangs(count: usize) -> anyhow::Result<Row> {
    let nodes: Vec<Node> = (0..count)
        .map(|i| perf_node(&format!("dgx-{i}"), Some(("nvidia.com/gpu", 8))))
        .collect::<Result<_, _>>()?;
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        vec![],
        vec![],
        [],
        Strategy::default(),
    );
    let gpu = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}, "limits": {"nvidia.com/gpu": "1"}}}]});
    let members: Vec<Vec<Pod>> = (0..count)
        .map(|g| {
            (0..8)
                .map(|m| pod("test", &format!("g{g}-{m}"), gpu.clone()))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
    let cpu = CpuClock::start();
    let start = Instant::now();
    let mut placed = 0;
    for group in &members {
        let members: Vec<(&Pod, Vec<ResourceClaim>)> =
            group.iter().map(|p| (p, Vec::new())).collect();
        if let Ok((decisions, booked)) = scheduler.schedule_group(&members, 8, None) {
            placed += decisions.len();
            scheduler = booked;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Row {
        name: format!("Gangs/{count}x8pods_{count}nodes"),
        kind: CORE.into(),
        items: placed as u64,
        cpu_seconds: cpu.seconds(),
        figures: vec![Figure::new(
            "placed",
            "pods/s",
            placed as f64 / seconds.max(1e-9),
        )],
        anchor: "– (upstream has no gang workload)".into(),
    })
}

/// scheduler_perf's `throughputCollector`: every second, how many measured pods were
/// scheduled since the last sample, over the time since it. The first sample with any pod
/// scheduled only starts the count (sampling and pod creation start independently); an
/// interval without a newly scheduled pod is merged into the next, whose rate is then
/// recorded once per interval it spans.
#[derive(Debug, Default)]
struct ThroughputSampler {
    started: bool,
    last_count: usize,
    last_time: f64,
    skipped: usize,
    samples: Vec<f64>,
}

impl ThroughputSampler {
    fn tick(&mut self, now: f64, scheduled: usize) {
        if scheduled == 0 {
            return;
        }
        if !self.started {
            self.started = true;
            self.last_count = scheduled;
            self.last_time = now;
            return;
        }
        let new = scheduled.saturating_sub(self.last_count);
        if new == 0 {
            self.skipped += 1;
            return;
        }
        let rate = new as f64 / (now - self.last_time).max(1e-9);
        self.samples
            .extend(std::iter::repeat_n(rate, self.skipped + 1));
        self.last_count = scheduled;
        self.last_time = now;
        self.skipped = 0;
    }
}

/// SchedulingThroughput as upstream's `collect` reports it: Average and the percentiles
/// `sorted[ceil(n·p/100) − 1]`; None without samples (a run shorter than two seconds).
fn scheduling_throughput(samples: &[f64]) -> Option<[f64; 4]> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let at = |p: usize| sorted[(n * p).div_ceil(100).max(1) - 1];
    Some([
        sorted.iter().sum::<f64>() / n as f64,
        at(50),
        at(90),
        at(99),
    ])
}

/// Creates `items` through the API from `parallel` concurrent clients.
async fn create_all<K>(
    items: Vec<K>,
    parallel: usize,
    api_for: impl Fn(&K) -> kube::Api<K>,
) -> anyhow::Result<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    use futures::StreamExt;
    let results: Vec<Result<K, kube::Error>> = futures::stream::iter(items)
        .map(|item| {
            let api = api_for(&item);
            async move { api.create(&Default::default(), &item).await }
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    for result in results {
        result?;
    }
    Ok(())
}

/// Upstream's pod creator: 30 concurrent clients (fewer for fewer pods).
const POD_CREATORS: usize = 30;

/// Creates `pods` in `namespace` from [`POD_CREATORS`] concurrent clients. Each answer is
/// checked (a refusal fails the run) but not decoded into a typed Pod: the harness shares the
/// two measured cores with the server, and upstream's creator reads its answers as protobuf,
/// far cheaper than the JSON decode of a whole Pod (about 4% of the measured phase's CPU).
///
/// Each client is a task of its own that takes the next pod when its last is created, as
/// upstream's are goroutines: the in-process client serves a request on the task that sends
/// it, so clients polled together on the harness's thread served every creation from one
/// core while the other idled.
async fn create_pods(client: &kube::Client, namespace: &str, pods: Vec<Pod>) -> anyhow::Result<()> {
    let path = Arc::new(format!("/api/v1/namespaces/{namespace}/pods"));
    let creators = POD_CREATORS.min(pods.len());
    let next = Arc::new(Mutex::new(pods.into_iter()));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..creators {
        let (client, path, next) = (client.clone(), path.clone(), next.clone());
        clients.spawn(async move {
            loop {
                let pod = next.lock().unwrap_or_else(|p| p.into_inner()).next();
                let Some(pod) = pod else {
                    return anyhow::Ok(());
                };
                let request = kube::core::Request::new(path.as_str())
                    .create(&Default::default(), serde_json::to_vec(&pod)?)?;
                client.request_text(request).await?;
            }
        });
    }
    while let Some(created) = clients.join_next().await {
        created??;
    }
    Ok(())
}

/// The pods of one namespace seen bound so far, as scheduler_perf's collector counts them
/// from the informer: a watch that follows the namespace's pods.
struct BoundPods {
    /// How many have been seen bound (read by the throughput sampler).
    seen: Arc<std::sync::atomic::AtomicUsize>,
    /// Turns true once all that are awaited have been seen: the waiter wakes once, not for
    /// every binding.
    all: tokio::sync::watch::Receiver<bool>,
    total: usize,
    task: tokio::task::JoinHandle<()>,
}

/// Follows the pods of `namespace` until `total` of them have been seen bound.
fn count_bound(client: &kube::Client, namespace: &str, total: usize) -> BoundPods {
    use futures::StreamExt;
    use kube::runtime::watcher;
    use std::sync::atomic::Ordering;
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (all, all_seen) = tokio::sync::watch::channel(total == 0);
    let api: kube::Api<BoundPod> = kube::Api::namespaced(client.clone(), namespace);
    let counted = seen.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        let mut bound = std::collections::HashSet::new();
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event
                && pod.spec.node_name.is_some()
                && bound.insert(pod.metadata.name.unwrap_or_default())
            {
                counted.store(bound.len(), Ordering::Relaxed);
                if bound.len() == total {
                    all.send_replace(true);
                }
            }
        }
    });
    BoundPods {
        seen,
        all: all_seen,
        total,
        task,
    }
}

/// Waits until every pod `pods` awaits has been seen bound, at most `limit`.
async fn wait_bound(pods: &mut BoundPods, limit: Duration, what: &str) -> anyhow::Result<()> {
    let reached = matches!(
        tokio::time::timeout(limit, pods.all.wait_for(|all| *all)).await,
        Ok(Ok(_))
    );
    if !reached {
        anyhow::bail!(
            "{what}: {} of {} pods bound after {} s",
            pods.seen.load(std::sync::atomic::Ordering::Relaxed),
            pods.total,
            limit.as_secs()
        );
    }
    Ok(())
}

/// How long a phase may take before the run is abandoned.
const PHASE_LIMIT: Duration = Duration::from_secs(900);

/// One workload end to end, as scheduler_perf runs it: the cluster objects created, the
/// scheduler (and for DRA the ResourceClaim controller) running and synced, the initial pods
/// created and waited for (unmeasured); then the measured pods created while the clock and
/// the throughput sampler run, until every one is bound.
async fn through_api(work: Workload) -> anyhow::Result<Row> {
    let dir = tempfile::tempdir()?;
    let store = tessera_store::Store::open(&dir.path().join("state.db"), Default::default())?;
    let router = crate::bench::admin_router(store, dir.path())?;
    let client = kube::Client::new(router, "default");
    let statuses: Vec<serde_json::Value> = work
        .nodes
        .iter()
        .map(|n| json!({"status": n.status}))
        .collect();
    create_all(work.nodes.clone(), 8, |_| kube::Api::all(client.clone())).await?;
    let node_api: kube::Api<Node> = kube::Api::all(client.clone());
    for (node, status) in work.nodes.iter().zip(statuses) {
        let name = node.metadata.name.clone().unwrap_or_default();
        node_api
            .patch_status(&name, &Default::default(), &kube::api::Patch::Merge(status))
            .await?;
    }
    create_all(work.slices, 8, |_| kube::Api::all(client.clone())).await?;
    create_all(work.classes, 8, |_| kube::Api::all(client.clone())).await?;
    let namespaces: Vec<Namespace> = [work.init.namespace, work.measured.namespace]
        .iter()
        .map(|n| serde_json::from_value(json!({"metadata": {"name": n}})))
        .collect::<Result<_, _>>()?;
    create_all(namespaces, 2, |_| kube::Api::all(client.clone())).await?;

    // Upstream's scheduler_perf runs the ResourceClaim controller for its DRA workloads.
    let claims = work.claim_controller.then(|| {
        tokio::spawn(tessera_controllers::resource_claims::run(
            client.clone(),
            Arc::new(std::time::SystemTime::now),
            None,
        ))
    });
    let (synced, scheduler_synced) = tokio::sync::oneshot::channel();
    let scheduler = tokio::spawn(tessera_controllers::scheduler::run_reporting_sync(
        client.clone(),
        tessera_controllers::scheduler::SchedulerConfig::embedded(None),
        Some(synced),
    ));
    scheduler_synced.await?;

    // createPods of the initial pods: created, then waited for; not measured.
    let (init_ns, measured_ns) = (work.init.namespace, work.measured.namespace);
    create_all(work.init.templates, 1, |_| {
        kube::Api::namespaced(client.clone(), init_ns)
    })
    .await?;
    let init_total = work.init.pods.len();
    let mut init_bound = count_bound(&client, init_ns, init_total);
    create_pods(&client, init_ns, work.init.pods).await?;
    wait_bound(&mut init_bound, PHASE_LIMIT, "initial pods").await?;
    init_bound.task.abort();

    // createPods with collectMetrics: the template first (a createAny before it), then the
    // collector, then the pods, created while the clock runs.
    create_all(work.measured.templates, 1, |_| {
        kube::Api::namespaced(client.clone(), measured_ns)
    })
    .await?;
    let total = work.measured.pods.len();
    let mut bound = count_bound(&client, measured_ns, total);
    let sampler = Arc::new(Mutex::new(ThroughputSampler::default()));
    let start = Instant::now();
    let sampling = {
        let sampler = sampler.clone();
        let seen = bound.seen.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval_at(
                tokio::time::Instant::from_std(start) + Duration::from_secs(1),
                Duration::from_secs(1),
            );
            loop {
                ticker.tick().await;
                let scheduled = seen.load(std::sync::atomic::Ordering::Relaxed);
                if let Ok(mut sampler) = sampler.lock() {
                    sampler.tick(start.elapsed().as_secs_f64(), scheduled);
                }
            }
        })
    };
    let cpu = CpuClock::start();
    create_pods(&client, measured_ns, work.measured.pods).await?;
    let creation_seconds = start.elapsed().as_secs_f64();
    wait_bound(&mut bound, PHASE_LIMIT, "measured pods").await?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu.seconds();
    sampling.abort();
    bound.task.abort();
    scheduler.abort();
    let samples = sampler
        .lock()
        .map(|s| s.samples.clone())
        .unwrap_or_default();
    let throughput = scheduling_throughput(&samples);
    let statistic = |i: usize| throughput.map(|t| t[i]);
    let mut figures = vec![
        Figure::new("SchedulingThroughput Average", "pods/s", statistic(0)),
        Figure::new("Perc50", "pods/s", statistic(1)),
        Figure::new("Perc90", "pods/s", statistic(2)),
        Figure::new("Perc99", "pods/s", statistic(3)),
        Figure::new("samples", "", samples.len() as f64),
        Figure::new(
            "measured pods / measured phase",
            "pods/s",
            total as f64 / seconds.max(1e-9),
        ),
        Figure::new(
            "creation rate achieved",
            "pods/s",
            total as f64 / creation_seconds.max(1e-9),
        ),
        Figure::new("measured phase", "s", seconds),
    ];
    if let Some(claims) = claims {
        claims.abort();
        // One claim a pod, made by the controller inside the measured phase.
        let made = kube::Api::<ResourceClaim>::namespaced(client.clone(), measured_ns)
            .list_metadata(&Default::default())
            .await?
            .items
            .len();
        figures.push(Figure::new(
            "claims made per measured pod",
            "",
            made as f64 / total.max(1) as f64,
        ));
    }
    Ok(Row {
        name: work.name,
        kind: END_TO_END.into(),
        items: total as u64,
        cpu_seconds,
        figures,
        anchor: work.threshold.map_or_else(
            || "no upstream threshold at this size".into(),
            |t| format!("threshold {t} pods/s (SchedulingThroughput Average; kube-scheduler + kube-apiserver + etcd)"),
        ),
    })
}

/// One run of every scheduler benchmark.
fn once(args: &SchedulerBenchArgs) -> anyhow::Result<Vec<Row>> {
    let mut rows = vec![
        on_core(&basic_workload(&args.basic)?)?,
        on_core(&dra_workload(&args.dra)?)?,
        gangs(args.gangs)?,
    ];
    if args.api {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rows.push(runtime.block_on(through_api(basic_workload(&args.basic)?))?);
        rows.push(runtime.block_on(through_api(dra_workload(&args.dra)?))?);
    }
    Ok(rows)
}

/// Runs the scheduler benchmarks `--runs` times and prints the medians.
pub fn run(args: &SchedulerBenchArgs) -> anyhow::Result<()> {
    crate::bench_report::repeat(&args.repeat, || once(args))
}

/// What the benchmark's own watch reads of a pod: name, resourceVersion and node. The rest of
/// the JSON is skipped unparsed into types, so that the harness takes as little as it can of
/// the two cores the scheduler and the API server are measured on.
#[derive(Clone, Debug, serde::Deserialize)]
struct BoundPod {
    #[serde(deserialize_with = "identity_only")]
    metadata: kube::api::ObjectMeta,
    #[serde(default)]
    spec: BoundSpec,
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundSpec {
    node_name: Option<String>,
}

/// An object's name and resourceVersion; its other metadata is skipped.
fn identity_only<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<kube::api::ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Identity {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
    }
    let identity = <Identity as serde::Deserialize>::deserialize(deserializer)?;
    Ok(kube::api::ObjectMeta {
        name: identity.name,
        namespace: identity.namespace,
        resource_version: identity.resource_version,
        ..Default::default()
    })
}

impl kube::Resource for BoundPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (seconds, pods scheduled) ticks and the samples upstream's collector records.
    #[test]
    fn throughput_is_sampled_as_scheduler_perf_samples_it() {
        type Case<'a> = (&'a str, &'a [(f64, usize)], &'a [f64]);
        let cases: &[Case] = &[
            (
                "nothing scheduled yet: no samples",
                &[(1.0, 0), (2.0, 0)],
                &[],
            ),
            ("the first sample only starts the count", &[(1.0, 7)], &[]),
            ("steady", &[(1.0, 5), (2.0, 15), (3.0, 25)], &[10.0, 10.0]),
            (
                "an interval without progress is merged into the next and recorded twice",
                &[(1.0, 5), (2.0, 15), (3.0, 15), (4.0, 35)],
                &[10.0, 10.0, 10.0],
            ),
            (
                "a late tick divides by the time it took",
                &[(1.0, 4), (2.5, 10)],
                &[4.0],
            ),
        ];
        for (what, ticks, expected) in cases {
            let mut sampler = ThroughputSampler::default();
            for &(now, scheduled) in *ticks {
                sampler.tick(now, scheduled);
            }
            assert_eq!(sampler.samples, *expected, "{what}");
        }
    }

    #[test]
    fn scheduling_throughput_reports_upstreams_statistics() {
        assert_eq!(scheduling_throughput(&[]), None);
        // Upstream: sorted[ceil(n·p/100) − 1].
        assert_eq!(
            scheduling_throughput(&[30.0, 10.0, 20.0, 40.0]),
            Some([25.0, 20.0, 40.0, 40.0])
        );
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(
            scheduling_throughput(&hundred),
            Some([50.5, 50.0, 90.0, 99.0])
        );
        assert_eq!(scheduling_throughput(&[7.0]), Some([7.0; 4]));
    }

    #[test]
    fn workloads_have_upstreams_names_and_sizes() {
        let basic = parse_basic("5000Nodes_10000Pods").unwrap();
        assert_eq!(
            (basic.init_nodes, basic.init_pods, basic.measure_pods),
            (5000, 1000, 10_000)
        );
        assert_eq!(basic.threshold, Some("680"));
        let dra = parse_dra("5000pods_500nodes").unwrap();
        assert_eq!(
            (
                dra.nodes_with_dra,
                dra.init_pods,
                dra.measure_pods,
                dra.max_claims_per_node
            ),
            (500, 2500, 2500, 10)
        );
        assert!(
            parse_dra("4000pods")
                .unwrap_err()
                .contains("2000pods_100nodes")
        );
        let fast = dra_workload(&parse_dra("fast").unwrap()).unwrap();
        assert_eq!(fast.nodes.len(), 2);
        assert_eq!(fast.slices.len(), 1);
        assert_eq!(fast.slices[0].spec.devices.as_ref().map(Vec::len), Some(10));
        assert_eq!(fast.measured.pods.len(), 10);
    }

    #[test]
    fn core_rows_place_every_measured_pod_of_the_small_workloads() {
        for work in [
            basic_workload(&parse_basic("5Nodes").unwrap()).unwrap(),
            dra_workload(&parse_dra("fast").unwrap()).unwrap(),
        ] {
            let row = on_core(&work).unwrap();
            assert_eq!(row.items, 10, "{}", work.name);
            assert_eq!(row.kind, CORE);
        }
        // The fast DRA workload's one driver node has ten devices: an eleventh pod does not fit.
        let mut work = dra_workload(&parse_dra("fast").unwrap()).unwrap();
        work.measured
            .pods
            .push(claim_template_pod("test", "one-too-many").unwrap());
        assert_eq!(on_core(&work).unwrap().items, 10);
    }
}
