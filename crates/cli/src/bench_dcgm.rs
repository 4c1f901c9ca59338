//! `tessera bench dcgm`: a dcgm-exporter scrape as the node twins compute it — the usage
//! model over a node's GPUs and the pods holding them, then dcgm-exporter's text — for one
//! 8-GPU node and for every GPU of a large topology (125 DGX H100 nodes, 1,000 GPUs), half
//! of the GPUs held by pods that declare their load.
//!
//! Core only (no API, no proxy): the figure is the cost of what a scrape computes.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde_json::{Value, json};
use tessera_node::faults::Faults;
use tessera_node::gpu_assignments::Unit;
use tessera_node::topology::{NodeSpec, Topology};
use tessera_telemetry::dcgm;
use tessera_telemetry::usage::{self, GpuUsage, Holder};

use crate::bench::percentile;
use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench dcgm`.
#[derive(clap::Args, Debug, Clone)]
pub struct DcgmBenchArgs {
    /// Scrapes of the 8-GPU node to time.
    #[arg(long, default_value_t = 2_000)]
    pub node_scrapes: usize,
    /// Scrapes of all 1,000 GPUs to time.
    #[arg(long, default_value_t = 50)]
    pub cluster_scrapes: usize,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

const TOPOLOGY: &str = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- {name: h100, count: 125, server: dgx-h100, devices: {exposure: device-plugin}}\n";

/// Holders of the even GPUs of `node`: one pod each, declaring its load.
fn holders(node: &NodeSpec, now: SystemTime) -> Vec<Holder> {
    (0..8)
        .step_by(2)
        .map(|gpu| {
            let pod: Value = json!({
                "metadata": {"name": format!("train-{}-{gpu}", node.name), "namespace": "team-a",
                             "uid": format!("{}-{gpu}", node.name),
                             "annotations": {"sim.tessera.dev/gpu-utilization": "85",
                                             "sim.tessera.dev/gpu-memory": "30Gi"}},
                "status": {"phase": "Running", "startTime": "2026-12-01T00:00:00Z"},
            });
            Holder::new(&pod, "main", Unit::Gpu(gpu), now)
        })
        .collect()
}

fn scrape(nodes: &[(NodeSpec, Vec<Holder>)], faults: &Faults, now: SystemTime) -> String {
    let boot = UNIX_EPOCH + Duration::from_secs(1_764_547_200);
    let usages: Vec<Vec<GpuUsage>> = nodes
        .iter()
        .map(|(node, holders)| usage::gpu_usage(node, faults, holders, boot, now))
        .collect();
    let named: Vec<(&str, &[GpuUsage])> = nodes
        .iter()
        .zip(&usages)
        .map(|((node, _), gpus)| (node.name.as_str(), gpus.as_slice()))
        .collect();
    dcgm::render_many(&named)
}

/// Times `count` scrapes of `nodes`; (p50, p99) and the CPU seconds.
fn time(nodes: &[(NodeSpec, Vec<Holder>)], count: usize) -> (Duration, Duration, Option<f64>) {
    let faults = Faults::default();
    let now = UNIX_EPOCH + Duration::from_secs(1_764_633_600);
    let mut times = Vec::with_capacity(count);
    let cpu = CpuClock::start();
    for _ in 0..count {
        let started = Instant::now();
        let text = scrape(nodes, &faults, now);
        times.push(started.elapsed());
        std::hint::black_box(text);
    }
    let cpu_seconds = cpu.seconds();
    times.sort();
    (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        cpu_seconds,
    )
}

/// Times the scrapes.
pub fn dcgm(args: &DcgmBenchArgs) -> anyhow::Result<Vec<Row>> {
    let topology = Topology::parse(TOPOLOGY).context("the benchmark topology")?;
    let now = UNIX_EPOCH + Duration::from_secs(1_764_633_600);
    let nodes: Vec<(NodeSpec, Vec<Holder>)> = topology
        .nodes()
        .into_iter()
        .map(|node| {
            let held = holders(&node, now);
            (node, held)
        })
        .collect();
    let gpus: usize = nodes
        .iter()
        .filter_map(|(n, _)| n.hardware.as_ref())
        .map(|h| h.server.gpus.len())
        .sum();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut rows = Vec::new();
    let cluster = format!("dcgm-exporter scrape: {gpus} GPUs ({} nodes)", nodes.len());
    for (name, slice, count, goal) in [
        (
            "dcgm-exporter scrape: one node, 8 GPUs".to_string(),
            &nodes[..1],
            args.node_scrapes,
            "issue 20 goal: < 5 ms",
        ),
        (
            cluster,
            &nodes[..],
            args.cluster_scrapes,
            "issue 20 goal: < 100 ms (1,000 GPUs)",
        ),
    ] {
        let (p50, p99, cpu_seconds) = time(slice, count);
        rows.push(Row {
            name,
            kind: "core (no API): usage model + dcgm-exporter text".into(),
            items: count as u64,
            cpu_seconds,
            figures: vec![
                Figure::new("p50", "ms", ms(p50)),
                Figure::new("p99", "ms", ms(p99)),
            ],
            anchor: goal.into(),
        });
    }
    Ok(rows)
}
