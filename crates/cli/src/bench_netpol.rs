//! `tessera bench netpol`: the network policy core (`tessera_netpol`) on a seeded synthetic
//! cluster (`tessera_netpol::synthetic`): building the index, the full reachability matrix
//! for one port, single verdicts between random pairs, and one policy's replacement (the
//! pods it touches). Times and CPU are measured here; the work is the core's.

use std::time::{Duration, Instant};

use tessera_netpol::{Endpoint, Protocol};

use crate::bench::percentile;
use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench netpol`.
#[derive(clap::Args, Debug, Clone)]
pub struct NetpolBenchArgs {
    /// Pods (100 a namespace).
    #[arg(long, default_value_t = 10_000)]
    pub pods: usize,
    /// Policies (NetworkPolicies with a few cluster-wide ones; a baseline is added).
    #[arg(long, default_value_t = 2_000)]
    pub policies: usize,
    /// Single verdicts to time.
    #[arg(long, default_value_t = 200_000)]
    pub verdicts: usize,
    /// Policy replacements to time.
    #[arg(long, default_value_t = 200)]
    pub changes: usize,
    /// The seed of the synthetic cluster and of the pairs.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

const KIND: &str = "core (no API)";

/// Runs the benchmark once.
pub fn netpol(args: &NetpolBenchArgs) -> anyhow::Result<Vec<Row>> {
    let size = format!("{} pods, {} policies", args.pods, args.policies);
    let objects = tessera_netpol::synthetic::cluster(args.pods, args.policies, args.seed);
    let policies = objects.policies.clone();
    let cpu = CpuClock::start();
    let started = Instant::now();
    let mut evaluator = objects.evaluator();
    let build = started.elapsed();
    let build_cpu = cpu.seconds();
    let ids = evaluator.pod_ids();

    let cpu = CpuClock::start();
    let started = Instant::now();
    let matrix = evaluator.matrix(&ids, 80, Protocol::Tcp);
    let matrix_time = started.elapsed();
    let matrix_cpu = cpu.seconds();
    let pairs = (ids.len() * ids.len()) as u64;

    let mut random = fastrand::Rng::with_seed(args.seed);
    let cases: Vec<(Endpoint, Endpoint)> = (0..args.verdicts)
        .map(|_| {
            let pick = |r: &mut fastrand::Rng| Endpoint::Pod(ids[r.usize(..ids.len().max(1))]);
            (pick(&mut random), pick(&mut random))
        })
        .collect();
    let mut timings = Vec::with_capacity(cases.len());
    let mut allowed = 0usize;
    let cpu = CpuClock::start();
    for (from, to) in &cases {
        let t = Instant::now();
        let verdict = evaluator.verdict(*from, *to, 80, Protocol::Tcp);
        timings.push(t.elapsed());
        allowed += usize::from(verdict.allowed);
    }
    let verdict_cpu = cpu.seconds();
    timings.sort();

    let mut change_timings = Vec::with_capacity(args.changes);
    let mut touched = Vec::with_capacity(args.changes);
    let cpu = CpuClock::start();
    for _ in 0..args.changes {
        let policy = policies[random.usize(..policies.len().max(1))].clone();
        let t = Instant::now();
        let result = evaluator.upsert_policy(policy);
        change_timings.push(t.elapsed());
        touched.push(result.pods.len() as f64);
    }
    let change_cpu = cpu.seconds();
    change_timings.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean_touched = touched.iter().sum::<f64>() / touched.len().max(1) as f64;
    Ok(vec![
        Row {
            name: format!("build the index, {size}"),
            kind: KIND.into(),
            items: ids.len() as u64,
            cpu_seconds: build_cpu,
            figures: vec![Figure::new("time", "ms", build.as_secs_f64() * 1e3)],
            anchor: "–".into(),
        },
        Row {
            name: format!("reachability matrix TCP/80, {size}"),
            kind: KIND.into(),
            items: pairs,
            cpu_seconds: matrix_cpu,
            figures: vec![
                Figure::new("time", "s", matrix_time.as_secs_f64()),
                Figure::new("allowed pairs", "", matrix.count_allowed() as f64),
            ],
            anchor: "goal: 10^8 pairs < 10 s (issue 18)".into(),
        },
        Row {
            name: format!("single verdict TCP/80, {size}"),
            kind: KIND.into(),
            items: args.verdicts as u64,
            cpu_seconds: verdict_cpu,
            figures: vec![
                Figure::new("p50", "µs", us(percentile(&timings, 0.5))),
                Figure::new("p99", "µs", us(percentile(&timings, 0.99))),
                Figure::new("max", "µs", us(percentile(&timings, 1.0))),
                Figure::new("allowed", "", allowed as f64),
            ],
            anchor: "goal: p99 < 5 µs (issue 18)".into(),
        },
        Row {
            name: format!("replace one policy, {size}"),
            kind: KIND.into(),
            items: args.changes as u64,
            cpu_seconds: change_cpu,
            figures: vec![
                Figure::new("p50", "µs", us(percentile(&change_timings, 0.5))),
                Figure::new("p99", "µs", us(percentile(&change_timings, 0.99))),
                Figure::new("pods touched (mean)", "", mean_touched),
            ],
            anchor: "– (touches only the pods the policy selects)".into(),
        },
    ])
}
