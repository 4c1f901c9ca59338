//! `tessera bench maintain`: planning a driver-upgrade rollout of a large GPU pool, as `tessera
//! maintain plan` does it: the Node, Pod and PodDisruptionBudget objects (JSON, as listed from
//! an API server) read into the planner's facts, the pre-flight (stages, budgets,
//! `maxUnavailable`), and the rollout's first step over the whole pool. Times and CPU are
//! measured here; the work is `tessera_maintenance`'s. No API server is involved.

use std::time::Instant;

use serde_json::{Value, json};
use tessera_maintenance::{facts, plan_from_document, preflight, step};

use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench maintain`.
#[derive(clap::Args, Debug, Clone)]
pub struct MaintainBenchArgs {
    /// Nodes in the pool.
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Pods on each node (each covered by one of the budgets).
    #[arg(long, default_value_t = 8)]
    pub pods_per_node: usize,
    /// PodDisruptionBudgets (the pods are spread over them).
    #[arg(long, default_value_t = 200)]
    pub budgets: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

/// The synthetic cluster: GPU nodes as the twins label them, one training pod per GPU slot
/// owned by a ReplicaSet, and budgets each allowing a few disruptions.
fn cluster(args: &MaintainBenchArgs) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let nodes: Vec<Value> = (0..args.nodes)
        .map(|i| {
            json!({"metadata": {"name": format!("gpu-{i:04}"), "labels": {
                    "tessera.dev/pool": "h100", "nvidia.com/gpu.count": "8",
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/cuda.driver-version.full": "570.172.08"}},
                "spec": {},
                "status": {"nodeInfo": {"kubeletVersion": "v1.33.2"},
                           "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    let budgets = args.budgets.max(1);
    let pods: Vec<Value> = (0..args.nodes * args.pods_per_node)
        .map(|i| {
            let node = i / args.pods_per_node.max(1);
            json!({"metadata": {"name": format!("train-{i}"), "namespace": "team-a",
                    "labels": {"app": format!("train-{}", i % budgets)},
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "train", "controller": true}]},
                "spec": {"nodeName": format!("gpu-{node:04}"),
                         "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
                "status": {"phase": "Running"}})
        })
        .collect();
    let pdbs: Vec<Value> = (0..budgets)
        .map(|b| {
            json!({"metadata": {"name": format!("train-{b}"), "namespace": "team-a"},
                "spec": {"selector": {"matchLabels": {"app": format!("train-{b}")}}},
                "status": {"disruptionsAllowed": 8}})
        })
        .collect();
    (nodes, pods, pdbs)
}

/// Runs the benchmark once.
pub fn maintain(args: &MaintainBenchArgs) -> anyhow::Result<Vec<Row>> {
    let (nodes, pods, pdbs) = cluster(args);
    let plan = plan_from_document(&json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "MaintenancePlan",
        "metadata": {"name": "driver-580"},
        "spec": {"nodeSelector": {"tessera.dev/pool": "h100"},
                 "driverUpgrade": {"version": "580.82.07"},
                 "policy": {"maxParallelUpgrades": 4, "maxUnavailable": "10%"}}}))
    .map_err(|e| anyhow::anyhow!("the benchmark's plan: {e:?}"))?;
    let catalog = tessera_devices::Catalog::built_in()?;

    let cpu = CpuClock::start();
    let started = Instant::now();
    let objects = facts::Objects::index(&nodes, &pods);
    let node_facts = objects.node_facts(&plan, &catalog);
    let budgets: Vec<_> = pdbs.iter().map(|p| facts::budget(p, &objects)).collect();
    let read = started.elapsed();
    let rollout = preflight(&plan, &node_facts, &budgets, &catalog, Some("v1.33.2"))
        .map_err(|e| anyhow::anyhow!("the benchmark's plan was refused: {e}"))?;
    let planned = started.elapsed();
    let first = step(&plan, &rollout.stages, &node_facts, &catalog, 0);
    let total = started.elapsed();
    let cpu_seconds = cpu.seconds();
    anyhow::ensure!(
        !first.actions.is_empty(),
        "the first step decided nothing for {} stages",
        rollout.stages.len()
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    Ok(vec![Row {
        name: format!(
            "plan a {}-node pool rollout ({} pods, {} PDBs): read objects, pre-flight, first step",
            args.nodes,
            pods.len(),
            pdbs.len()
        ),
        kind: "core (no API)".into(),
        items: args.nodes as u64,
        cpu_seconds,
        figures: vec![
            Figure::new("total", "ms", ms(total)),
            Figure::new("read objects", "ms", ms(read)),
            Figure::new("pre-flight", "ms", ms(planned - read)),
            Figure::new("first step", "ms", ms(total - planned)),
            Figure::new("stages", "", rollout.stages.len() as f64),
        ],
        anchor: "goal: < 1 s for 1,000 nodes (issue 20)".into(),
    }])
}
