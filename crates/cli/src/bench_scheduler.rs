//! `tessera bench scheduler`: scheduler_perf-shaped workloads on the pure scheduling core —
//! SchedulingBasic (nodes with pods already placed, then pods scheduled one at a time, each
//! decision booked before the next), DRA claims (one per pod, as from a template) on nodes
//! with eight GPUs in a ResourceSlice each, and gangs placed whole. Prints a Markdown table
//! with pods per second beside upstream's floors.

use std::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
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
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}}}]},
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
        &[],
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
    })
}

fn dra(args: &SchedulerBenchArgs) -> anyhow::Result<Row> {
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
    let mut scheduler = Scheduler::new(
        node_info::build(&nodes, &[]),
        slices,
        vec![class],
        &[],
        Strategy::default(),
    );
    let work: Vec<(Pod, ResourceClaim)> = (0..args.dra_pods)
        .map(|i| -> anyhow::Result<_> {
            let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"namespace": "bench", "name": format!("claim-{i}")},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}))?;
            let p = pod(&format!("dra-{i}"), None, json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": format!("claim-{i}")}]}))?;
            Ok((p, claim))
        })
        .collect::<Result<_, _>>()?;
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
        &[],
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
    })
}

/// Runs the scheduler benchmarks.
pub fn run(args: &SchedulerBenchArgs) -> anyhow::Result<()> {
    let rows = [scheduling_basic(args)?, dra(args)?, gangs(args)?];
    println!("| workload | pods placed | seconds | pods/s | upstream floor (pods/s) |");
    println!("|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {:.2} | {:.0} | {} |",
            row.workload,
            row.pods,
            row.seconds,
            row.pods as f64 / row.seconds.max(1e-9),
            row.floor
        );
    }
    Ok(())
}
