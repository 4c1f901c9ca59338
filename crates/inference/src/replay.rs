//! Replaying a request trace through a pool of simulated servers under a routing policy:
//! the discrete-event loop behind `tessera bench serving`.
//!
//! Arrivals come from the trace; each is routed at once — round robin, or by the endpoint
//! picker over the metrics it last scraped (every `metrics_refresh_us`, upstream's
//! `--refresh-metrics-interval` of 50 ms) and its own prefix index — and queued on its
//! server, whose steps run back to back while it has work. At equal times a step's end is
//! handled before a scrape and a scrape before an arrival. The report gives time to first
//! token, end-to-end latency and time per output token percentiles, throughput, the share of
//! prompt tokens the servers found cached, and preemptions.
//!
//! Deterministic: the same trace, configuration and policy give the same report. Knows
//! nothing of wall time or of how the report is printed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::{Engine, EngineConfig, Job, Outcome};
use crate::metrics::EndpointMetrics;
use crate::picker::{PickRequest, Picker, Profile, RoundRobin};
use crate::prefix::{MAX_PREFIX_BLOCKS, PromptShape, block_hashes};
use crate::trace::TraceRequest;

/// The pool being replayed against.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolConfig {
    pub servers: usize,
    /// The model the servers serve; any other model a request names is an adapter.
    pub base_model: String,
    pub engine: EngineConfig,
    /// How often the picker scrapes the servers' metrics, µs.
    pub metrics_refresh_us: u64,
    /// The picker's tie-break seed.
    pub seed: u64,
}

impl Default for PoolConfig {
    fn default() -> PoolConfig {
        PoolConfig {
            servers: 8,
            base_model: "llama-3-8b".into(),
            engine: EngineConfig::default(),
            metrics_refresh_us: 50_000,
            seed: 1,
        }
    }
}

/// How requests are routed.
#[derive(Debug, Clone, PartialEq)]
pub enum Policy {
    /// What a Service's round-robin load balancing does.
    RoundRobin,
    /// The endpoint picker with these scorers.
    Picker(Profile),
}

impl Policy {
    pub fn name(&self) -> String {
        match self {
            Policy::RoundRobin => "round robin".into(),
            Policy::Picker(profile) => format!("endpoint picker ({profile})"),
        }
    }
}

/// The 50th, 90th and 99th percentiles of a sample, in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles; all zero for an empty sample.
    pub fn of(mut sample: Vec<f64>) -> Percentiles {
        if sample.is_empty() {
            return Percentiles::default();
        }
        sample.sort_by(f64::total_cmp);
        let rank = |p: f64| {
            let index = ((p / 100.0) * sample.len() as f64).ceil() as usize;
            sample[index.clamp(1, sample.len()) - 1]
        };
        Percentiles {
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
        }
    }
}

/// What a replay measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub policy: String,
    pub requests: usize,
    pub completed: usize,
    pub time_to_first_token_ms: Percentiles,
    pub latency_ms: Percentiles,
    pub time_per_output_token_ms: Percentiles,
    /// Completed requests per second, from the first arrival to the last completion.
    pub requests_per_second: f64,
    pub output_tokens_per_second: f64,
    /// Prompt tokens found in the servers' caches, over all prompt tokens computed or not.
    pub prefix_cache_hit_rate: f64,
    pub preemptions: u64,
    /// Simulated seconds from the first arrival to the last completion.
    pub makespan_s: f64,
    /// Requests each server received.
    pub per_server: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    // The order breaks ties at equal times.
    StepEnd(usize),
    Scrape,
    Arrival(usize),
}

enum Router {
    RoundRobin(RoundRobin),
    Picker(Box<Picker>),
}

fn nanos(us: f64) -> u64 {
    (us * 1_000.0).round().max(0.0) as u64
}

/// Replays `trace` through a pool under `policy`.
pub fn replay(trace: &[TraceRequest], pool: &PoolConfig, policy: &Policy) -> Report {
    let servers = pool.servers.max(1);
    let mut engines: Vec<Engine> = (0..servers)
        .map(|_| Engine::new(pool.engine.clone()))
        .collect();
    let mut router = match policy {
        Policy::RoundRobin => Router::RoundRobin(RoundRobin::default()),
        Policy::Picker(profile) => {
            Router::Picker(Box::new(Picker::new(profile.clone(), pool.seed)))
        }
    };
    let mut scraped: Vec<(u64, EndpointMetrics)> = engines
        .iter()
        .enumerate()
        .map(|(server, engine)| (server as u64, engine.metrics()))
        .collect();
    let mut events: BinaryHeap<Reverse<(u64, Event)>> = BinaryHeap::new();
    for (id, request) in trace.iter().enumerate() {
        events.push(Reverse((nanos(request.at * 1e6), Event::Arrival(id))));
    }
    if matches!(router, Router::Picker(_)) && !trace.is_empty() {
        events.push(Reverse((0, Event::Scrape)));
    }
    let mut first_token: Vec<Option<u64>> = vec![None; trace.len()];
    let mut finished: Vec<Option<u64>> = vec![None; trace.len()];
    let mut per_server = vec![0usize; servers];
    let mut arrived = 0usize;

    let start_step = |engine: &mut Engine,
                      server: usize,
                      now: u64,
                      events: &mut BinaryHeap<Reverse<(u64, Event)>>| {
        if let Some(length) = engine.start_step() {
            events.push(Reverse((
                now + nanos(length).max(1),
                Event::StepEnd(server),
            )));
        }
    };

    while let Some(Reverse((now, event))) = events.pop() {
        match event {
            Event::StepEnd(server) => {
                for outcome in engines[server].finish_step() {
                    match outcome {
                        Outcome::FirstToken { id } => first_token[id] = Some(now),
                        Outcome::Finished { id } => finished[id] = Some(now),
                    }
                }
                start_step(&mut engines[server], server, now, &mut events);
            }
            Event::Scrape => {
                for (server, metrics) in scraped.iter_mut() {
                    *metrics = engines[*server as usize].metrics();
                }
                // Scrapes go on while requests are to come or a server is working; a request
                // no server can ever admit does not keep them going.
                let more_work = arrived < trace.len() || engines.iter().any(Engine::stepping);
                if more_work {
                    events.push(Reverse((
                        now + pool.metrics_refresh_us * 1_000,
                        Event::Scrape,
                    )));
                }
            }
            Event::Arrival(id) => {
                arrived += 1;
                let request = &trace[id];
                let blocks = block_hashes(
                    PromptShape {
                        model: &request.model,
                        prefix: request.prefix.as_deref(),
                        prefix_tokens: request.prefix_tokens,
                        prompt_tokens: request.prompt_tokens,
                        request: id as u64,
                    },
                    usize::MAX,
                );
                let chosen = match &mut router {
                    Router::RoundRobin(rr) => rr.pick(servers),
                    Router::Picker(picker) => {
                        let ask = PickRequest {
                            model: &request.model,
                            blocks: &blocks[..blocks.len().min(MAX_PREFIX_BLOCKS)],
                        };
                        picker.pick(ask, &scraped).map(|server| server as usize)
                    }
                }
                .unwrap_or(0);
                per_server[chosen] += 1;
                let adapter = (request.model != pool.base_model).then(|| request.model.clone());
                engines[chosen].enqueue(Job {
                    id,
                    adapter,
                    prompt_tokens: request.prompt_tokens,
                    output_tokens: request.output_tokens,
                    blocks,
                });
                if !engines[chosen].stepping() {
                    start_step(&mut engines[chosen], chosen, now, &mut events);
                }
            }
        }
    }
    report(trace, policy, &engines, &first_token, &finished, per_server)
}

fn report(
    trace: &[TraceRequest],
    policy: &Policy,
    engines: &[Engine],
    first_token: &[Option<u64>],
    finished: &[Option<u64>],
    per_server: Vec<usize>,
) -> Report {
    let arrival = |id: usize| nanos(trace[id].at * 1e6);
    let ms = |ns: u64| ns as f64 / 1e6;
    let mut ttft = Vec::new();
    let mut latency = Vec::new();
    let mut tpot = Vec::new();
    let mut output_tokens = 0u64;
    let mut last = 0u64;
    for (id, request) in trace.iter().enumerate() {
        let (Some(first), Some(done)) = (first_token[id], finished[id]) else {
            continue;
        };
        ttft.push(ms(first - arrival(id)));
        latency.push(ms(done - arrival(id)));
        if request.output_tokens > 1 {
            tpot.push(ms(done - first) / f64::from(request.output_tokens - 1));
        }
        output_tokens += u64::from(request.output_tokens);
        last = last.max(done);
    }
    let completed = latency.len();
    let begin = trace.first().map_or(0, |_| arrival(0));
    let makespan_s = last.saturating_sub(begin) as f64 / 1e9;
    let per_second = |n: f64| {
        if makespan_s > 0.0 {
            n / makespan_s
        } else {
            0.0
        }
    };
    let (prompt, cached, preemptions) =
        engines
            .iter()
            .fold((0u64, 0u64, 0u64), |(p, c, x), engine| {
                let stats = engine.stats();
                (
                    p + stats.prompt_tokens,
                    c + stats.cached_tokens,
                    x + stats.preemptions,
                )
            });
    Report {
        policy: policy.name(),
        requests: trace.len(),
        completed,
        time_to_first_token_ms: Percentiles::of(ttft),
        latency_ms: Percentiles::of(latency),
        time_per_output_token_ms: Percentiles::of(tpot),
        requests_per_second: per_second(completed as f64),
        output_tokens_per_second: per_second(output_tokens as f64),
        prefix_cache_hit_rate: if prompt == 0 {
            0.0
        } else {
            cached as f64 / prompt as f64
        },
        preemptions,
        makespan_s,
        per_server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Workload, generate};

    #[test]
    fn a_request_no_server_can_admit_ends_the_replay_unfinished() {
        let huge = TraceRequest {
            at: 0.0,
            model: "llama-3-8b".into(),
            prefix: None,
            prefix_tokens: 0,
            prompt_tokens: 100_000,
            output_tokens: 1,
        };
        let small = TraceRequest {
            prompt_tokens: 100,
            at: 0.1,
            ..huge.clone()
        };
        let pool = small_pool(1);
        let policy = Policy::Picker(Profile::default());
        let report = replay(&[huge, small], &pool, &policy);
        assert_eq!(
            (report.requests, report.completed),
            (2, 0),
            "the huge one blocks the queue"
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let sample: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(
            Percentiles::of(sample),
            Percentiles {
                p50: 50.0,
                p90: 90.0,
                p99: 99.0
            }
        );
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(Percentiles::of(vec![7.0]).p99, 7.0);
    }

    fn small_pool(servers: usize) -> PoolConfig {
        PoolConfig {
            servers,
            ..PoolConfig::default()
        }
    }

    #[test]
    fn every_request_completes_and_round_robin_spreads_them_evenly() {
        let trace = generate(&Workload {
            requests: 90,
            rate: 20.0,
            ..Workload::default()
        });
        let report = replay(&trace, &small_pool(3), &Policy::RoundRobin);
        assert_eq!(report.completed, 90);
        assert_eq!(report.per_server, [30, 30, 30]);
        assert!(report.time_to_first_token_ms.p50 > 0.0);
        assert!(report.latency_ms.p50 >= report.time_to_first_token_ms.p50);
        assert!(report.time_to_first_token_ms.p50 <= report.time_to_first_token_ms.p99);
        assert!(report.requests_per_second > 0.0);
    }

    #[test]
    fn a_replay_is_deterministic() {
        let trace = generate(&Workload {
            requests: 300,
            ..Workload::default()
        });
        let policy = Policy::Picker(Profile::default());
        assert_eq!(
            replay(&trace, &small_pool(4), &policy),
            replay(&trace, &small_pool(4), &policy)
        );
    }

    /// The case the picker exists for: more system prompts than one server's cache holds.
    /// Round robin sends each prompt everywhere and every cache thrashes; the picker keeps
    /// each prompt on few servers.
    #[test]
    fn the_picker_finds_more_cached_prefixes_and_answers_sooner_than_round_robin() {
        let trace = generate(&Workload {
            requests: 1_500,
            rate: 30.0,
            ..Workload::default()
        });
        let pool = small_pool(8);
        let rr = replay(&trace, &pool, &Policy::RoundRobin);
        let epp = replay(&trace, &pool, &Policy::Picker(Profile::default()));
        assert_eq!((rr.completed, epp.completed), (1_500, 1_500));
        assert!(
            epp.prefix_cache_hit_rate > rr.prefix_cache_hit_rate + 0.1,
            "hit rate: picker {} vs round robin {}",
            epp.prefix_cache_hit_rate,
            rr.prefix_cache_hit_rate
        );
        assert!(
            epp.time_to_first_token_ms.p90 < rr.time_to_first_token_ms.p90,
            "TTFT p90: picker {:?} vs round robin {:?}",
            epp.time_to_first_token_ms,
            rr.time_to_first_token_ms
        );
    }

    #[test]
    fn the_queue_scorer_alone_spreads_what_round_robin_piles_on_one_server() {
        // Long and short requests alternate: round robin sends every long one to server 0.
        let trace: Vec<TraceRequest> = (0..80)
            .map(|i| TraceRequest {
                at: f64::from(i) * 0.1,
                model: "llama-3-8b".into(),
                prefix: None,
                prefix_tokens: 0,
                prompt_tokens: if i % 2 == 0 { 2_000 } else { 100 },
                output_tokens: if i % 2 == 0 { 200 } else { 10 },
            })
            .collect();
        let pool = PoolConfig {
            engine: EngineConfig {
                max_num_seqs: 4,
                ..EngineConfig::default()
            },
            ..small_pool(2)
        };
        let rr = replay(&trace, &pool, &Policy::RoundRobin);
        assert_eq!(rr.per_server, [40, 40]);
        let queue_only: Profile = "queue-scorer".parse().expect("profile");
        let picked = replay(&trace, &pool, &Policy::Picker(queue_only));
        assert_eq!((rr.completed, picked.completed), (80, 80));
        assert!(
            picked.latency_ms.p99 < rr.latency_ms.p99 / 2.0,
            "queue-aware {:?} vs round robin {:?}",
            picked.latency_ms,
            rr.latency_ms
        );
    }
}
