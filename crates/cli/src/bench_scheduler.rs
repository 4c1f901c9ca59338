//! `tessera bench scheduler`: scheduler_perf-shaped workloads on the pure scheduling core —
//! SchedulingBasic (nodes with pods already placed, then pods scheduled one at a time, each
//! decision booked before the next), DRA claims (one per pod, as from a template) on nodes
//! with eight GPUs in a ResourceSlice each, and gangs placed whole; with `--api`,
//! SchedulingBasic and DRA through the embedded API server (DRA as upstream's
//! `SchedulingWithResourceClaimTemplate`: pods name a ResourceClaimTemplate and the
//! ResourceClaim controller makes their claims while the clock runs). Prints a Markdown table
//! with pods per second beside upstream's floors.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::json;
use tessera_scheduler::score::Strategy;
use tessera_scheduler::{Scheduler, node_info};

/// Options of `tessera bench scheduler`.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedulerBenchArgs {
    /// Nodes of SchedulingBasic.
    #[arg(long, default_value_t = 5000)]
    pub nodes: usize,
    /// Pods placed before measuring (SchedulingBasic).
    #[arg(long, default_value_t = 1000)]
    pub initial_pods: usize,
    /// Pods measured (SchedulingBasic).
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Nodes with eight GPUs each (DRA).
    #[arg(long, default_value_t = 500)]
    pub dra_nodes: usize,
    /// Pods with one claim each (DRA).
    #[arg(long, default_value_t = 4000)]
    pub dra_pods: usize,
    /// Gangs of eight one-GPU pods.
    #[arg(long, default_value_t = 1000)]
    pub gangs: usize,
    /// Also run SchedulingBasic and DRA through the embedded API server (create everything,
    /// then time the scheduler shell — and for DRA the ResourceClaim controller, which makes
    /// each pod's claim from its template — until every pod is bound).
    #[arg(long)]
    pub api: bool,
}

fn node(name: &str, gpus: Option<usize>) -> anyhow::Result<Node> {
    let mut allocatable = json!({"cpu": "32", "memory": "256Gi", "pods": "110"});
    if let Some(gpus) = gpus {
        allocatable["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": allocatable},
    }))?)
}

fn pod(name: &str, node: Option<&str>, extra: serde_json::Value) -> anyhow::Result<Pod> {
    let mut pod = json!({
        "metadata": {"namespace": "bench", "name": name, "uid": name},
        "spec": {"containers": [{"name": "c", "image": "pause:3.10", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            spec.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(pod)?)
}

struct Row {
    workload: String,
    pods: usize,
    seconds: f64,
    floor: &'static str,
    /// CPU seconds the process used in the timed window (through the API only).
    cpu_seconds: Option<f64>,
    /// What happened before the clock started, if it matters.
    note: String,
}

fn scheduling_basic(args: &SchedulerBenchArgs) -> anyhow::Result<Row> {
    let nodes: Vec<Node> = (0..args.nodes)
        .map(|i| node(&format!("node-{i}"), None))
        .collect::<Result<_, _>>()?;
    let initial: Vec<Pod> = (0..args.initial_pods)
        .map(|i| {
            pod(
                &format!("init-{i}"),
                Some(&format!("node-{}", i % args.nodes)),
                json!({}),
            )
        })
        .collect::<Result<_, _>>()?;
    let measured: Vec<Pod> = (0..args.pods)
        .map(|i| pod(&format!("pod-{i}"), None, json!({})))
        .collect::<Result<_, _>>()?;
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &initial),
        vec![],
        vec![],
        [],
        Strategy::default(),
    );
    let start = Instant::now();
    let mut placed = 0;
    for p in &measured {
        if let Ok(decision) = scheduler.schedule(p, &[]) {
            scheduler.assume(p, &decision, &[]);
            placed += 1;
        }
    }
    Ok(Row {
        workload: format!(
            "SchedulingBasic/{}Nodes_{}Pods (core)",
            args.nodes, args.pods
        ),
        pods: placed,
        seconds: start.elapsed().as_secs_f64(),
        floor: "680",
        cpu_seconds: None,
        note: String::new(),
    })
}

/// The DRA cluster: nodes, their slices, the class, and (pod, claim) pairs.
type DraCluster = (
    Vec<Node>,
    Vec<ResourceSlice>,
    Vec<DeviceClass>,
    Vec<(Pod, ResourceClaim)>,
);

fn dra_cluster(args: &SchedulerBenchArgs) -> anyhow::Result<DraCluster> {
    let nodes: Vec<Node> = (0..args.dra_nodes)
        .map(|i| node(&format!("gpu-{i}"), None))
        .collect::<Result<_, _>>()?;
    let slices: Vec<ResourceSlice> = (0..args.dra_nodes)
        .map(|i| {
            let name = format!("gpu-{i}");
            let devices: Vec<serde_json::Value> = (0..8)
                .map(|g| json!({"name": format!("gpu-{g}"), "attributes": {"type": {"string": "gpu"},
                    "resource.kubernetes.io/pcieRoot": {"string": format!("pci{}", g / 2)}},
                    "capacity": {"memory": {"value": "80Gi"}}}))
                .collect();
            serde_json::from_value(json!({"metadata": {"name": format!("{name}-gpu.nvidia.com")}, "spec": {
                "driver": "gpu.nvidia.com", "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}))
        })
        .collect::<Result<_, _>>()?;
    let class: DeviceClass = serde_json::from_value(
        json!({"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}),
    )?;
    let work: Vec<(Pod, ResourceClaim)> = (0..args.dra_pods)
        .map(|i| -> anyhow::Result<_> {
            let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"namespace": "bench", "name": format!("claim-{i}")},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}))?;
            let p = pod(&format!("dra-{i}"), None, json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("claim-{i}")}]}))?;
            Ok((p, claim))
        })
        .collect::<Result<_, _>>()?;
    Ok((nodes, slices, vec![class], work))
}

fn dra(args: &SchedulerBenchArgs) -> anyhow::Result<Row> {
    let (nodes, slices, classes, work) = dra_cluster(args)?;
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        slices,
        classes,
        [],
        Strategy::default(),
    );
    let start = Instant::now();
    let mut placed = 0;
    for (p, claim) in &work {
        let claims = std::slice::from_ref(claim);
        if let Ok(decision) = scheduler.schedule(p, claims) {
            scheduler.assume(p, &decision, claims);
            placed += 1;
        }
    }
    Ok(Row {
        workload: format!(
            "DRA claims, {} nodes × 8 GPUs, {} pods (core)",
            args.dra_nodes, args.dra_pods
        ),
        pods: placed,
        seconds: start.elapsed().as_secs_f64(),
        floor: "50–120",
        cpu_seconds: None,
        note: String::new(),
    })
}

fn gangs(args: &SchedulerBenchArgs) -> anyhow::Result<Row> {
    let nodes: Vec<Node> = (0..args.gangs)
        .map(|i| node(&format!("dgx-{i}"), Some(8)))
        .collect::<Result<_, _>>()?;
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        vec![],
        vec![],
        [],
        Strategy::default(),
    );
    let gpu = json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]});
    let members: Vec<Vec<Pod>> = (0..args.gangs)
        .map(|g| {
            (0..8)
                .map(|m| pod(&format!("g{g}-{m}"), None, gpu.clone()))
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<_, _>>()?;
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
    Ok(Row {
        workload: format!(
            "{} gangs of 8 one-GPU pods on {} nodes (core)",
            args.gangs, args.gangs
        ),
        pods: placed,
        seconds: start.elapsed().as_secs_f64(),
        floor: "–",
        cpu_seconds: None,
        note: String::new(),
    })
}

/// Creates `items` through the API from 8 concurrent clients, each through `api_for(item)`.
async fn create_all<K>(items: Vec<K>, api_for: impl Fn(&K) -> kube::Api<K>) -> anyhow::Result<()>
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
        .buffer_unordered(8)
        .collect()
        .await;
    for result in results {
        result?;
    }
    Ok(())
}

/// What one workload through the API creates before the clock starts.
struct ApiWorkload {
    name: String,
    nodes: Vec<Node>,
    slices: Vec<ResourceSlice>,
    classes: Vec<DeviceClass>,
    /// Templates the pods' claims come from; with any, the ResourceClaim controller runs
    /// beside the scheduler and makes each pod's claim while the clock runs.
    templates: Vec<ResourceClaimTemplate>,
    pods: Vec<Pod>,
    floor: &'static str,
}

/// One workload through the API: nodes (with allocatable), DRA objects and pods created with
/// no scheduler running; then the scheduler starts and the clock runs until all are bound.
async fn through_api(work: ApiWorkload) -> anyhow::Result<Row> {
    use futures::StreamExt;
    use kube::runtime::watcher;
    let dir = tempfile::tempdir()?;
    let store = tessera_store::Store::open(&dir.path().join("state.db"), Default::default())?;
    let router = crate::bench::admin_router(store, dir.path())?;
    let client = kube::Client::new(router, "default");
    let statuses: Vec<serde_json::Value> = work
        .nodes
        .iter()
        .map(|n| json!({"status": n.status}))
        .collect();
    create_all(work.nodes.clone(), |_| kube::Api::all(client.clone())).await?;
    let node_api: kube::Api<Node> = kube::Api::all(client.clone());
    for (node, status) in work.nodes.iter().zip(statuses) {
        let name = node.metadata.name.clone().unwrap_or_default();
        node_api
            .patch_status(&name, &Default::default(), &kube::api::Patch::Merge(status))
            .await?;
    }
    create_all(work.slices, |_| kube::Api::all(client.clone())).await?;
    create_all(work.classes, |_| kube::Api::all(client.clone())).await?;
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "bench"}}))?;
    create_all(vec![namespace], |_| kube::Api::all(client.clone())).await?;
    let claim_controller = !work.templates.is_empty();
    create_all(work.templates, |_| {
        kube::Api::namespaced(client.clone(), "bench")
    })
    .await?;
    let total = work.pods.len();
    create_all(work.pods, |_| {
        kube::Api::namespaced(client.clone(), "bench")
    })
    .await?;
    let pod_api: kube::Api<BoundPod> = kube::Api::namespaced(client.clone(), "bench");
    let mut events = watcher(pod_api, watcher::Config::default()).boxed();
    let (synced, scheduler_synced) = tokio::sync::oneshot::channel();
    let started = Instant::now();
    // Upstream's scheduler_perf runs the ResourceClaim controller for its DRA workloads too.
    let claims = claim_controller.then(|| {
        tokio::spawn(tessera_controllers::resource_claims::run(
            client.clone(),
            std::sync::Arc::new(std::time::SystemTime::now),
        ))
    });
    let scheduler = tokio::spawn(tessera_controllers::scheduler::run_reporting_sync(
        client.clone(),
        tessera_controllers::scheduler::SchedulerConfig::embedded(None),
        Some(synced),
    ));
    // As scheduler_perf, which measures a running scheduler: the clock starts once the
    // scheduler has listed the cluster.
    scheduler_synced.await?;
    let start = Instant::now();
    let sync_seconds = (start - started).as_secs_f64();
    let cpu_before = process_cpu_seconds();
    let mut bound = std::collections::BTreeSet::new();
    while bound.len() < total {
        let event = tokio::time::timeout(std::time::Duration::from_secs(120), events.next()).await;
        let Ok(Some(event)) = event else { break };
        if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event
            && pod.spec.node_name.is_some()
        {
            bound.insert(pod.metadata.name.clone().unwrap_or_default());
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    scheduler.abort();
    let mut note =
        format!("scheduler listed the cluster in {sync_seconds:.2} s before the clock started");
    if let Some(claims) = claims {
        claims.abort();
        // One claim a pod: a pass that had not yet seen a claim it created must not make
        // another.
        let made = kube::Api::<ResourceClaim>::namespaced(client.clone(), "bench")
            .list_metadata(&Default::default())
            .await?
            .items
            .len();
        note.push_str(&format!("; {made} claims made for {total} pods"));
    }
    Ok(Row {
        workload: work.name,
        pods: bound.len(),
        seconds,
        floor: work.floor,
        cpu_seconds,
        note,
    })
}

/// Runs the scheduler benchmarks.
pub fn run(args: &SchedulerBenchArgs) -> anyhow::Result<()> {
    let mut rows = vec![scheduling_basic(args)?, dra(args)?, gangs(args)?];
    if args.api {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let nodes: Vec<Node> = (0..args.nodes)
            .map(|i| node(&format!("node-{i}"), None))
            .collect::<Result<_, _>>()?;
        let pods: Vec<Pod> = (0..args.pods)
            .map(|i| pod(&format!("pod-{i}"), None, json!({})))
            .collect::<Result<_, _>>()?;
        rows.push(runtime.block_on(through_api(ApiWorkload {
            name: format!(
                "SchedulingBasic/{}Nodes_{}Pods (embedded API)",
                args.nodes, args.pods
            ),
            nodes,
            slices: vec![],
            classes: vec![],
            templates: vec![],
            pods,
            floor: "680",
        }))?);
        let (nodes, slices, classes, _) = dra_cluster(args)?;
        let template: ResourceClaimTemplate = serde_json::from_value(
            json!({"metadata": {"namespace": "bench", "name": "gpu"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}),
        )?;
        let pods = (0..args.dra_pods)
            .map(|i| {
                pod(
                    &format!("dra-{i}"),
                    None,
                    json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]}),
                )
            })
            .collect::<Result<_, _>>()?;
        rows.push(runtime.block_on(through_api(ApiWorkload {
            name: format!(
                "DRA claims from a template, {} nodes × 8 GPUs, {} pods (embedded API, with the ResourceClaim controller)",
                args.dra_nodes, args.dra_pods
            ),
            nodes,
            slices,
            classes,
            templates: vec![template],
            pods,
            floor: "50–120",
        }))?);
    }
    println!(
        "| workload | pods placed | seconds | pods/s | CPU s | upstream floor (pods/s) | notes |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {:.2} | {:.0} | {} | {} | {} |",
            row.workload,
            row.pods,
            row.seconds,
            row.pods as f64 / row.seconds.max(1e-9),
            row.cpu_seconds
                .map_or_else(|| "–".to_string(), |cpu| format!("{cpu:.2}")),
            row.floor,
            row.note
        );
    }
    Ok(())
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

/// CPU seconds this process has used (user and system), where the platform tells.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split(' ').collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel reports in USER_HZ, 100 on every Linux architecture Tessera builds for.
    Some(ticks as f64 / 100.0)
}
