//! `tessera bench serving`: one request trace replayed through a pool of simulated vLLM
//! servers twice — once round robin, as a Service balances, once through the endpoint
//! picker — with latency percentiles and throughput for both. The trace is generated from a
//! seed or read from a JSON Lines file (`--trace`); `--write-trace` saves the generated one.
//! The figures are simulated time (`tessera_inference::replay`'s clock); CPU time is this
//! process's, for the replay itself.

use std::path::PathBuf;

use anyhow::Context;
use tessera_inference::engine::EngineConfig;
use tessera_inference::picker::Profile;
use tessera_inference::replay::{Policy, PoolConfig, Report, replay};
use tessera_inference::trace::{self, TraceRequest, Workload};

use crate::bench_report::{CpuClock, Figure, Row};

/// Options of `tessera bench serving`.
#[derive(clap::Args, Debug, Clone)]
pub struct ServingBenchArgs {
    /// Model servers in the pool.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub servers: u32,
    /// A JSON Lines trace to replay instead of a generated one.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write the generated trace to this file as well.
    #[arg(long)]
    pub write_trace: Option<PathBuf>,
    /// Requests in the generated trace.
    #[arg(long, default_value_t = 4_000)]
    pub requests: usize,
    /// Mean arrivals per second of the generated trace.
    #[arg(long, default_value_t = 40.0)]
    pub rate: f64,
    /// Shared system prompts in the generated trace.
    #[arg(long, default_value_t = 64)]
    pub prefixes: u32,
    /// Tokens of each system prompt.
    #[arg(long, default_value_t = 2_048)]
    pub prefix_tokens: u32,
    /// LoRA adapters besides the base model in the generated trace.
    #[arg(long, default_value_t = 8)]
    pub adapters: u32,
    /// The base model's name (any other model a request names is an adapter).
    #[arg(long, default_value = "llama-3-8b")]
    pub model: String,
    /// The trace's and the picker's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The picker's scorers and weights, by upstream's plugin names.
    #[arg(long, default_value_t = Profile::default())]
    pub profile: Profile,
    /// KV-cache blocks of 16 tokens per server.
    #[arg(long, default_value_t = EngineConfig::default().kv_blocks)]
    pub kv_blocks: u32,
    /// Sequences per batch (vLLM's `--max-num-seqs`).
    #[arg(long, default_value_t = EngineConfig::default().max_num_seqs)]
    pub max_num_seqs: u32,
    #[command(flatten)]
    pub repeat: crate::bench_report::Repeat,
}

fn load_trace(args: &ServingBenchArgs) -> anyhow::Result<Vec<TraceRequest>> {
    if let Some(path) = &args.trace {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the trace {}", path.display()))?;
        return trace::parse(&text).with_context(|| format!("the trace {}", path.display()));
    }
    anyhow::ensure!(
        args.rate.is_finite() && args.rate > 0.0,
        "--rate must be a number of requests per second above 0"
    );
    let generated = trace::generate(&Workload {
        requests: args.requests,
        rate: args.rate,
        base_model: args.model.clone(),
        prefixes: args.prefixes,
        prefix_tokens: args.prefix_tokens,
        adapters: args.adapters,
        seed: args.seed,
        ..Workload::default()
    });
    if let Some(path) = &args.write_trace {
        std::fs::write(path, trace::render(&generated))
            .with_context(|| format!("writing the trace {}", path.display()))?;
    }
    Ok(generated)
}

fn row(report: &Report, servers: u32, cpu_seconds: Option<f64>) -> Row {
    Row {
        name: format!(
            "serving: {} requests over {servers} simulated vLLM servers, {}",
            report.requests, report.policy
        ),
        kind: "core (simulated time)".into(),
        items: report.requests as u64,
        cpu_seconds,
        figures: vec![
            Figure::new("TTFT p50", "ms", report.time_to_first_token_ms.p50),
            Figure::new("TTFT p90", "ms", report.time_to_first_token_ms.p90),
            Figure::new("TTFT p99", "ms", report.time_to_first_token_ms.p99),
            Figure::new("latency p50", "ms", report.latency_ms.p50),
            Figure::new("latency p99", "ms", report.latency_ms.p99),
            Figure::new("TPOT p50", "ms", report.time_per_output_token_ms.p50),
            Figure::new("requests/s", "", report.requests_per_second),
            Figure::new("output tokens/s", "", report.output_tokens_per_second),
            Figure::new(
                "prefix cache hits",
                "%",
                report.prefix_cache_hit_rate * 100.0,
            ),
            Figure::new("preemptions", "", report.preemptions as f64),
            Figure::new("completed", "", report.completed as f64),
        ],
        anchor: "upstream's prefix-cache-aware benchmark (gateway-api-inference-extension \
                 benchmarking/) compares the same two policies on real vLLM"
            .into(),
    }
}

/// Runs the benchmark once: the trace through round robin, then through the picker.
pub fn serving(args: &ServingBenchArgs) -> anyhow::Result<Vec<Row>> {
    let trace = load_trace(args)?;
    anyhow::ensure!(!trace.is_empty(), "the trace has no requests");
    let pool = PoolConfig {
        servers: args.servers as usize,
        base_model: args.model.clone(),
        engine: EngineConfig {
            kv_blocks: args.kv_blocks,
            max_num_seqs: args.max_num_seqs,
            ..EngineConfig::default()
        },
        seed: args.seed,
        ..PoolConfig::default()
    };
    let mut rows = Vec::new();
    for policy in [Policy::RoundRobin, Policy::Picker(args.profile.clone())] {
        let cpu = CpuClock::start();
        let report = replay(&trace, &pool, &policy);
        let cpu_seconds = cpu.seconds();
        anyhow::ensure!(
            report.completed == report.requests,
            "{}: {} of {} requests never finished (a prompt larger than a server's KV cache?)",
            report.policy,
            report.requests - report.completed,
            report.requests
        );
        rows.push(row(&report, args.servers, cpu_seconds));
    }
    Ok(rows)
}
