//! `tessera bench sim` and `tessera bench placement`: the simulator's speed (one FGD
//! experiment per policy, timelines faster than real time) and the placement quality of
//! Tessera's policy against FGD — on the seeds the policy was designed on and on seeds held out
//! from its design, so that a margin found by tuning on the design seeds is not mistaken for
//! one that generalizes. Rows for [`crate::bench_report`]; the experiments themselves are the
//! simulation core's (`tessera_sim::fgd`), run through `crate::sim`'s readers and runner.

use std::path::PathBuf;
use std::time::Instant;

use tessera_sim::Policy;
use tessera_sim::fgd;
use tessera_sim::timeline::{Event, Options, Summary};

use crate::bench_report::{CpuClock, Figure, Repeat, Row};
use crate::sim::{
    RunArgs, Seeds, jobs, manifest_timeline, parse_seeds, read_nodes, read_pods, read_workloads,
    run_jobs, trace_timeline, workload,
};

/// What the simulator rows measure.
const SIMULATOR: &str = "simulator, one core";

/// Options of `tessera bench sim`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimBenchArgs {
    /// The node list.
    #[arg(long, default_value = "data/openb/openb_node_list_gpu_node.csv")]
    pub nodes: PathBuf,
    /// The pod list.
    #[arg(long, default_value = "data/openb/openb_pod_list_default.csv")]
    pub pods: PathBuf,
    /// Seeds to time each policy over.
    #[arg(long, default_value = "42..46", value_parser = parse_seeds)]
    pub seeds: Seeds,
    /// Manifests timed on the lab topology (`tessera sim run`).
    #[arg(long, default_value = "examples/sim/teams.yaml")]
    pub workload: PathBuf,
    #[command(flatten)]
    pub repeat: Repeat,
}

/// The artifact's time for one experiment on 2 vCPUs (its README: about 10 minutes).
const ARTIFACT_SECONDS: f64 = 600.0;

/// The process's peak resident memory in MiB (Linux), if known.
fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// One run of `tessera bench sim`: one FGD experiment per policy and seed, timed one at a
/// time on one core; then the timelines.
pub fn sim(args: &SimBenchArgs) -> anyhow::Result<Vec<Row>> {
    let nodes = read_nodes(&args.nodes)?;
    let pods = read_pods(&args.pods)?;
    let name = workload(&args.pods);
    let mut rows = Vec::new();
    for policy in Policy::ALL {
        let mut seconds = 0.0;
        let mut allocation = 0.0;
        let cpu = CpuClock::start();
        for &seed in &args.seeds.0 {
            let started = Instant::now();
            let outcome = fgd::run(&nodes, &pods, policy, seed, 1.3)?;
            seconds += started.elapsed().as_secs_f64();
            allocation += fgd::discrete(&outcome)[100].unwrap_or(0.0);
        }
        let runs = args.seeds.0.len().max(1) as f64;
        let each = seconds / runs;
        rows.push(Row {
            name: format!("FGD experiment, {name}, {}", policy.label()),
            kind: SIMULATOR.into(),
            items: args.seeds.0.len() as u64,
            cpu_seconds: cpu.seconds(),
            figures: vec![
                Figure::new("per experiment", "s", each),
                Figure::new(
                    "speed-up over the artifact (≈600 s)",
                    "×",
                    ARTIFACT_SECONDS / each.max(1e-9),
                ),
                Figure::new("GPU allocation at 100% arrived", "%", allocation / runs),
            ],
            anchor: "the artifact (openb-pod-scheduler): ≈600 s per experiment".into(),
        });
    }
    let run_args = |cluster: Option<PathBuf>, workload: PathBuf| RunArgs {
        cluster,
        workload: vec![workload],
        scheduler_config: None,
        namespace: "openb".into(),
        policy: Policy::Tessera,
        seed: 42,
        max_wait: None,
        events: None,
        summary: None,
        report: None,
    };
    let options = |policy: &str| Options {
        policy: policy.into(),
        seed: 42,
        max_wait: None,
    };
    let trace_args = run_args(Some(args.nodes.clone()), args.pods.clone());
    let cpu = CpuClock::start();
    let started = Instant::now();
    let (events, summary) =
        trace_timeline(&args.nodes, &args.pods, &trace_args, &options("tessera"))?;
    rows.push(timeline_row(
        format!("timeline: {name} in real time, tessera policy"),
        &events,
        &summary,
        started,
        &cpu,
    ));
    let lab = tessera_node::Topology::default_lab();
    let manifest_args = run_args(None, args.workload.clone());
    let cpu = CpuClock::start();
    let started = Instant::now();
    let (events, summary) = manifest_timeline(
        &lab,
        std::slice::from_ref(&args.workload),
        &manifest_args,
        &options("default-scheduler"),
    )?;
    rows.push(timeline_row(
        format!("timeline: {} on the lab topology", workload(&args.workload)),
        &events,
        &summary,
        started,
        &cpu,
    ));
    rows.push(Row {
        name: "peak resident memory".into(),
        kind: SIMULATOR.into(),
        items: 1,
        cpu_seconds: None,
        figures: vec![Figure::new("peak", "MiB", peak_memory_mib())],
        anchor: "–".into(),
    });
    Ok(rows)
}

fn timeline_row(
    name: String,
    events: &[Event],
    summary: &Summary,
    started: Instant,
    cpu: &CpuClock,
) -> Row {
    let seconds = started.elapsed().as_secs_f64();
    Row {
        name,
        kind: SIMULATOR.into(),
        items: events.len() as u64,
        cpu_seconds: cpu.seconds(),
        figures: vec![
            Figure::new("time", "s", seconds),
            Figure::new("simulated", "days", summary.makespan as f64 / 86_400.0),
            Figure::new(
                "faster than real time",
                "×",
                summary.makespan as f64 / seconds.max(1e-9),
            ),
        ],
        anchor: "kube-scheduler-simulator / KWOK replay in real time (1×)".into(),
    }
}

/// Options of `tessera bench placement`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlacementBenchArgs {
    /// The node list.
    #[arg(long, default_value = "data/openb/openb_node_list_gpu_node.csv")]
    pub nodes: PathBuf,
    /// A folder of pod lists: every `openb_pod_list_*.csv` in it.
    #[arg(long, default_value = "data/openb")]
    pub pods_dir: PathBuf,
    /// The seeds Tessera's policy was designed and tuned on (docs/sim.md, docs/benchmarks.md).
    #[arg(long, default_value = "42..51", value_parser = parse_seeds)]
    pub design_seeds: Seeds,
    /// Seeds never used while designing the policy: its margin over FGD out of sample.
    #[arg(long, default_value = "1000..1009", value_parser = parse_seeds)]
    pub held_out_seeds: Seeds,
    /// Tune factor.
    #[arg(long, default_value_t = 1.3)]
    pub tune: f64,
    /// Parallel runs (default: every core).
    #[arg(long)]
    pub jobs: Option<usize>,
    #[command(flatten)]
    pub repeat: Repeat,
}

/// Mean allocation at 100% arrived of FGD and Tessera for one trace over some seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Means {
    fgd: f64,
    tessera: f64,
}

impl Means {
    fn margin(&self) -> f64 {
        self.tessera - self.fgd
    }
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Per trace, FGD's and Tessera's mean allocation at 100% arrived over `seeds`.
fn means(results: &[(usize, Policy, Option<f64>)], traces: usize) -> Vec<Option<Means>> {
    (0..traces)
        .map(|t| {
            let of = |policy: Policy| {
                let values: Vec<f64> = results
                    .iter()
                    .filter(|(w, p, _)| *w == t && *p == policy)
                    .filter_map(|(_, _, v)| *v)
                    .collect();
                mean(&values)
            };
            Some(Means {
                fgd: of(Policy::Fgd)?,
                tessera: of(Policy::Tessera)?,
            })
        })
        .collect()
}

/// One run of `tessera bench placement`: FGD and Tessera on every trace, on the design
/// seeds and on the held-out seeds; a row per trace and one over all traces.
pub fn placement(args: &PlacementBenchArgs) -> anyhow::Result<Vec<Row>> {
    let nodes = read_nodes(&args.nodes)?;
    let workloads = read_workloads(&args.pods_dir)?;
    let policies = [Policy::Fgd, Policy::Tessera];
    let mut per_seed_set = Vec::new();
    let mut cpu_seconds = None;
    let mut experiments = 0u64;
    for seeds in [&args.design_seeds.0, &args.held_out_seeds.0] {
        let jobs = jobs(workloads.len(), &policies, seeds);
        let cpu = CpuClock::start();
        let done = run_jobs(&nodes, &workloads, &jobs, args.tune, args.jobs)?;
        cpu_seconds = Some(cpu_seconds.unwrap_or(0.0) + cpu.seconds().unwrap_or(0.0));
        experiments += jobs.len() as u64;
        let results: Vec<(usize, Policy, Option<f64>)> = jobs
            .iter()
            .zip(done)
            .map(|(job, (_, value))| (job.workload, job.policy, value))
            .collect();
        per_seed_set.push(means(&results, workloads.len()));
    }
    let seeds_text = |s: &Seeds| match (s.0.first(), s.0.last()) {
        (Some(a), Some(b)) if s.0.len() > 1 => format!("{a}..{b}"),
        (Some(a), _) => a.to_string(),
        _ => "none".into(),
    };
    let anchor = format!(
        "FGD (Weng et al., ATC '23) reproduced; design seeds {}, held-out seeds {}",
        seeds_text(&args.design_seeds),
        seeds_text(&args.held_out_seeds)
    );
    let figures = |design: Option<Means>, held_out: Option<Means>| {
        vec![
            Figure::new("FGD, design seeds", "%", design.map(|m| m.fgd)),
            Figure::new("Tessera, design seeds", "%", design.map(|m| m.tessera)),
            Figure::new("margin, design seeds", "pp", design.map(|m| m.margin())),
            Figure::new("FGD, held-out seeds", "%", held_out.map(|m| m.fgd)),
            Figure::new("Tessera, held-out seeds", "%", held_out.map(|m| m.tessera)),
            Figure::new("margin, held-out seeds", "pp", held_out.map(|m| m.margin())),
        ]
    };
    let per_trace_experiments =
        (policies.len() * (args.design_seeds.0.len() + args.held_out_seeds.0.len())) as u64;
    let mut rows: Vec<Row> = workloads
        .iter()
        .enumerate()
        .map(|(t, (name, _))| Row {
            name: format!("Tessera − FGD, {name}"),
            kind: "simulator (placement quality: GPU allocation at 100% arrived)".into(),
            items: per_trace_experiments,
            cpu_seconds: None,
            figures: figures(per_seed_set[0][t], per_seed_set[1][t]),
            anchor: anchor.clone(),
        })
        .collect();
    // Over all traces: mean margins and how many traces Tessera wins.
    let summary = |set: &[Option<Means>]| {
        let all: Vec<Means> = set.iter().flatten().copied().collect();
        let fgd = mean(&all.iter().map(|m| m.fgd).collect::<Vec<_>>());
        let tessera = mean(&all.iter().map(|m| m.tessera).collect::<Vec<_>>());
        let won = all.iter().filter(|m| m.margin() > 0.0).count();
        (
            fgd.zip(tessera)
                .map(|(fgd, tessera)| Means { fgd, tessera }),
            won,
        )
    };
    let (design, design_won) = summary(&per_seed_set[0]);
    let (held_out, held_out_won) = summary(&per_seed_set[1]);
    let mut all = figures(design, held_out);
    all.push(Figure::new(
        "traces won, design seeds",
        "",
        design_won as f64,
    ));
    all.push(Figure::new(
        "traces won, held-out seeds",
        "",
        held_out_won as f64,
    ));
    rows.push(Row {
        name: format!("Tessera − FGD, mean over {} traces", workloads.len()),
        kind: "simulator (placement quality: GPU allocation at 100% arrived)".into(),
        items: experiments,
        cpu_seconds,
        figures: all,
        anchor,
    });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_per_trace_need_both_policies() {
        let results = [
            (0, Policy::Fgd, Some(90.0)),
            (0, Policy::Fgd, Some(92.0)),
            (0, Policy::Tessera, Some(94.0)),
            (1, Policy::Fgd, Some(80.0)),
            (1, Policy::Tessera, None),
        ];
        let means = means(&results, 2);
        assert_eq!(
            means[0],
            Some(Means {
                fgd: 91.0,
                tessera: 94.0
            })
        );
        assert_eq!(means[0].map(|m| m.margin()), Some(3.0));
        assert_eq!(means[1], None);
    }
}
