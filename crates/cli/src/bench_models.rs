//! `tessera bench models`: N node caches in one process, each behind a rate-limited upload
//! link, pulling one generated model file from one rate-limited origin at once
//! ([`tessera_node_cache::loopback_swarm`]), issue 21's model-distribution bench.
//!
//! Reports, per cluster size (rows of `bench_report`, `--runs N` medians): origin bytes over
//! the model size (the cluster single-flight's figure, ideally 1.0), each node's load time against what its link alone allows, and the
//! time for all nodes against one node pulling alone. Loopback only: the links are the token
//! buckets, not a network.

use std::time::Duration;

use anyhow::Context;
use tessera_cache::sha256_hex;
use tessera_node_cache::loopback_swarm::{self, SwarmSpec};
use tessera_node_cache::test_origin::generate;
use tessera_twin::models::human_bytes;

use crate::agent_cache::bytes;
use crate::bench_report::{CpuClock, Figure, Repeat, Row};

/// Options of `tessera bench models`.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelsBenchArgs {
    /// Cluster sizes to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "8,64")]
    pub nodes: Vec<usize>,
    /// The model file's size.
    #[arg(long, default_value = "64Mi", value_parser = bytes)]
    pub size: u64,
    /// Each node's upload link, bytes a second.
    #[arg(long, default_value = "256Mi", value_parser = bytes)]
    pub link: u64,
    /// The origin's rate, bytes a second.
    #[arg(long, default_value = "256Mi", value_parser = bytes)]
    pub origin_rate: u64,
    /// A fixed piece length (the 8–16 MiB rule without).
    #[arg(long, value_parser = bytes)]
    pub piece_length: Option<u64>,
    /// How often a node re-reads its peers' piece maps, in milliseconds (the cache's default
    /// when absent). All nodes share this process's CPU: a large cluster polls less often.
    #[arg(long)]
    pub poll_interval_ms: Option<u64>,
    /// Peers besides the seed whose piece maps a node reads each poll (the cache's default
    /// when absent).
    #[arg(long)]
    pub polled_peers: Option<usize>,
    /// Pieces each node uploads at once (the cache's default when absent).
    #[arg(long)]
    pub upload_slots: Option<usize>,
    /// Requests waiting for an upload slot before more are sent elsewhere (the cache's default
    /// when absent).
    #[arg(long)]
    pub upload_queue: Option<usize>,
    #[command(flatten)]
    pub repeat: Repeat,
}

/// One pull of the model on `nodes` fresh caches from a fresh origin: each node's load time
/// (ascending) and the origin's bytes over the model size.
async fn once(
    nodes: usize,
    args: &ModelsBenchArgs,
    model: &[u8],
    digest: &str,
) -> anyhow::Result<(Vec<f64>, f64)> {
    let root = tempfile::tempdir()?;
    let spec = SwarmSpec {
        nodes,
        link: args.link,
        origin_rate: args.origin_rate,
        piece_length: args.piece_length,
        poll_interval: args.poll_interval_ms.map(Duration::from_millis),
        polled_peers: args.polled_peers,
        upload_slots: args.upload_slots,
        upload_queue: args.upload_queue,
    };
    let run = loopback_swarm::pull_at_once(root.path(), &spec, model, digest).await?;
    // The swarm's use of its links, each sample a share of all nodes' links
    // (`TESSERA_LOG=tessera::bench_models=debug`).
    let capacity = nodes as f64 * args.link as f64 * loopback_swarm::SAMPLE_INTERVAL.as_secs_f64();
    let use_percent: Vec<u64> = std::iter::once(0)
        .chain(run.uploaded.iter().copied())
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| (100.0 * w[1].saturating_sub(w[0]) as f64 / capacity.max(1.0)).round() as u64)
        .collect();
    tracing::debug!(
        nodes,
        every_ms = loopback_swarm::SAMPLE_INTERVAL.as_millis() as u64,
        ?use_percent,
        "swarm upload use, percent of all links"
    );
    let times = run.times.iter().map(Duration::as_secs_f64).collect();
    Ok((times, run.origin_bytes as f64 / args.size as f64))
}

/// The rows of one run: one node pulling alone, then each cluster size pulling at once.
pub async fn rows(args: &ModelsBenchArgs) -> anyhow::Result<Vec<Row>> {
    if args.size > 16 << 30 {
        anyhow::bail!(
            "--size {}: at most 16Gi (the bench holds the model in memory)",
            args.size
        );
    }
    let size = usize::try_from(args.size).context("--size does not fit in memory")?;
    let model = generate(size, 2026);
    let digest = format!("sha256:{}", sha256_hex(&model));
    let link = args.size as f64 / args.link as f64;
    let mib = args.size as f64 / f64::from(1u32 << 20);
    let kind = format!(
        "end-to-end (loopback caches, links {}/s, origin {}/s)",
        human_bytes(args.link),
        human_bytes(args.origin_rate)
    );
    let anchor = "goals: origin ≤ 1.05 × model; load ≤ 1.2 × link; all ≤ 1.5 × one node. Kraken: 3 GB to 2,600 hosts at 300 MB/s per agent, p50 10 s and p99 18 s, i.e. 1.0 × and 1.8 × the 10 s link time";
    let mut rows = Vec::new();
    let cpu = CpuClock::start();
    let (alone, ratio) = once(1, args, &model, &digest).await?;
    let alone = alone.first().copied().unwrap_or(0.0);
    rows.push(Row {
        name: format!("models: 1 node pulls one {mib:.0} MiB model"),
        kind: kind.clone(),
        items: 1,
        cpu_seconds: cpu.seconds(),
        figures: vec![
            Figure::new("origin bytes / model", "", ratio),
            Figure::new("load", "s", alone),
            Figure::new("link alone", "s", link),
        ],
        anchor: anchor.into(),
    });
    for &n in args.nodes.iter().filter(|n| **n > 1) {
        let cpu = CpuClock::start();
        let (times, ratio) = once(n, args, &model, &digest).await?;
        let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
        let p99 = times
            .get((times.len() * 99).div_ceil(100).saturating_sub(1))
            .copied()
            .unwrap_or(0.0);
        let all = times.last().copied().unwrap_or(0.0);
        rows.push(Row {
            name: format!("models: {n} nodes pull one {mib:.0} MiB model at once"),
            kind: kind.clone(),
            items: n as u64,
            cpu_seconds: cpu.seconds(),
            figures: vec![
                Figure::new("origin bytes / model", "", ratio),
                Figure::new("load median", "s", median),
                Figure::new("load p99", "s", p99),
                Figure::new("median / link", "x", median / link.max(f64::MIN_POSITIVE)),
                Figure::new(
                    "all nodes / one node",
                    "x",
                    all / alone.max(f64::MIN_POSITIVE),
                ),
            ],
            anchor: anchor.into(),
        });
    }
    Ok(rows)
}
