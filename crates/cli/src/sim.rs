//! `tessera sim`: the digital twin's shell. Reads clusters and workloads, runs the pure
//! simulation core (`tessera-sim`) and writes what it found:
//!
//! - `sim run`: a workload over time (Kubernetes manifests on a topology, placed by the
//!   scheduling core; or an openb trace on an openb cluster) — event log, summary, HTML report;
//! - `sim fgd` / `sim fgd-grid`: FGD experiments, one or a grid in parallel on every core,
//!   appending rows in the layout of the artifact's `analysis_allo_discrete.csv`.
//!
//! Results are rendered before anything is written, and a grid with any failed run writes
//! nothing: a partial result is never presented as complete.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use tessera_sim::Policy;
use tessera_sim::fgd;
use tessera_sim::timeline::{self, Event, Options, Summary};
use tessera_sim::trace::{self, TraceNode, TracePod};

/// `tessera sim` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum SimCommand {
    /// A workload over time: arrivals, a waiting queue, departures; an event log, a summary
    /// and an HTML report.
    Run(RunArgs),
    /// One FGD experiment: a trace's pods arriving on a cluster under one policy.
    Fgd(FgdArgs),
    /// A grid of FGD experiments (traces × policies × seeds) in parallel.
    FgdGrid(FgdGridArgs),
}

/// Options of `tessera sim fgd`.
#[derive(clap::Args, Debug, Clone)]
pub struct FgdArgs {
    /// The node list (openb_node_list_gpu_node.csv).
    #[arg(long)]
    pub nodes: PathBuf,
    /// The pod list (an openb_pod_list_*.csv).
    #[arg(long)]
    pub pods: PathBuf,
    /// random, dotprod, gpuclustering, gpupacking, bestfit, fgd or tessera.
    #[arg(long, value_parser = parse_policy)]
    pub policy: Policy,
    /// The seed of arrival order, workload tuning and node priorities.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Tune the workload up to this multiple of the cluster's GPU capacity.
    #[arg(long, default_value_t = 1.3)]
    pub tune: f64,
    /// Append the row to this CSV (with a header when it is new); standard output otherwise.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Options of `tessera sim run`.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The cluster: a topology file (YAML, as `tessera up --topology` takes), or an openb node
    /// list (`.csv`). Without it, the built-in lab topology.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// The workload: Kubernetes manifests (YAML; repeat for more files) with
    /// `sim.tessera.dev/arrival` and `sim.tessera.dev/duration` annotations, or one openb pod
    /// list (`.csv`, with creation_time and deletion_time) on an openb cluster.
    #[arg(long, required = true)]
    pub workload: Vec<PathBuf>,
    /// A KubeSchedulerConfiguration file: the profiles that place manifests' pods.
    #[arg(long)]
    pub scheduler_config: Option<PathBuf>,
    /// The namespace (team) of an openb trace's pods.
    #[arg(long, default_value = "openb")]
    pub namespace: String,
    /// The policy for openb traces: random, dotprod, gpuclustering, gpupacking, bestfit, fgd
    /// or tessera.
    #[arg(long, value_parser = parse_policy, default_value = "tessera")]
    pub policy: Policy,
    /// The seed (Random's draws on openb traces).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Give a pod up after it waited this many seconds.
    #[arg(long)]
    pub max_wait: Option<i64>,
    /// Write the event log here (JSON Lines).
    #[arg(long)]
    pub events: Option<PathBuf>,
    /// Write the summary here (JSON).
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Write the HTML report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Options of `tessera sim fgd-grid`.
#[derive(clap::Args, Debug, Clone)]
pub struct FgdGridArgs {
    /// The node list.
    #[arg(long)]
    pub nodes: PathBuf,
    /// A folder of pod lists: every `openb_pod_list_*.csv` in it.
    #[arg(long)]
    pub pods_dir: PathBuf,
    /// Policies, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_policy,
          default_value = "random,dotprod,gpuclustering,gpupacking,bestfit,fgd,tessera")]
    pub policies: Vec<Policy>,
    /// Seeds: `42..51` (inclusive) or a comma-separated list.
    #[arg(long, default_value = "42..51", value_parser = parse_seeds)]
    pub seeds: Seeds,
    /// Tune factor.
    #[arg(long, default_value_t = 1.3)]
    pub tune: f64,
    /// Where the rows go (overwritten).
    #[arg(long, value_parser = crate::client::absolute_path)]
    pub out: PathBuf,
    /// Parallel runs (default: every core).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// A list of seeds.
#[derive(Debug, Clone)]
pub struct Seeds(pub Vec<u64>);

fn parse_policy(text: &str) -> Result<Policy, String> {
    Policy::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
        format!("unknown policy {text:?} (one of {})", names.join(", "))
    })
}

pub(crate) fn parse_seeds(text: &str) -> Result<Seeds, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?} is not a seed"))
    };
    let seeds = match text.split_once("..") {
        Some((from, to)) => {
            let (from, to) = (number(from)?, number(to)?);
            if from > to || to - from > 10_000 {
                return Err(format!("{text:?} is not a range of at most 10,001 seeds"));
            }
            (from..=to).collect()
        }
        None => text.split(',').map(number).collect::<Result<_, _>>()?,
    };
    Ok(Seeds(seeds))
}

pub(crate) fn read_nodes(path: &Path) -> anyhow::Result<Vec<TraceNode>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(trace::parse_nodes(&path.display().to_string(), &text)?)
}

pub(crate) fn read_pods(path: &Path) -> anyhow::Result<Vec<TracePod>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(trace::parse_pods(&path.display().to_string(), &text)?)
}

/// The workload's name: the pod list's file name without `.csv`.
pub(crate) fn workload(path: &Path) -> String {
    path.file_stem()
        .map_or_else(|| "workload".into(), |s| s.to_string_lossy().into_owned())
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.2}"))
}

/// Runs `tessera sim`.
pub fn run(command: &SimCommand) -> anyhow::Result<()> {
    match command {
        SimCommand::Run(args) => timeline(args),
        SimCommand::Fgd(args) => single(args),
        SimCommand::FgdGrid(args) => grid(args),
    }
}

fn is_csv(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
}

/// An openb trace on an openb cluster, under one of the artifact's policies or Tessera's.
pub(crate) fn trace_timeline(
    nodes: &Path,
    pods: &Path,
    args: &RunArgs,
    options: &Options,
) -> anyhow::Result<(Vec<Event>, Summary)> {
    use tessera_sim::cluster::{Demand, Node};
    let nodes = read_nodes(nodes)?;
    let trace_pods = read_pods(pods)?;
    let pods = tessera_sim::trace_placer::from_trace(&trace_pods, &args.namespace)
        .with_context(|| format!("{}", pods.display()))?;
    let demands: Vec<Demand> = pods.iter().map(|p| p.work.clone()).collect();
    let typical = tessera_sim::frag::typical_pods(&demands);
    let cluster: Vec<Node> = nodes.iter().map(|n| Node::of_trace(n, &n.name)).collect();
    let mut placer =
        tessera_sim::trace_placer::TracePlacer::new(cluster, args.policy, &typical, args.seed);
    Ok(timeline::run(&mut placer, pods, options)?)
}

/// Kubernetes manifests on a topology's cluster, placed by the scheduling core.
pub(crate) fn manifest_timeline(
    topology: &tessera_node::Topology,
    files: &[PathBuf],
    args: &RunArgs,
    options: &Options,
) -> anyhow::Result<(Vec<Event>, Summary)> {
    let mut texts = Vec::new();
    for path in files {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        texts.push((path.display().to_string(), text));
    }
    let workload = tessera_sim::workload::parse(&texts)?;
    let profiles =
        crate::up::load_scheduler_profiles(args.scheduler_config.as_deref())?.unwrap_or_default();
    let mut placer = tessera_sim::kube_placer::KubePlacer::new(
        &topology.nodes(),
        workload.classes,
        workload.claims,
        profiles,
        &workload.pods,
    )?;
    Ok(timeline::run(&mut placer, workload.pods, options)?)
}

fn timeline(args: &RunArgs) -> anyhow::Result<()> {
    if let Some(wait) = args.max_wait.filter(|w| *w < 0) {
        bail!("--max-wait must not be negative, is {wait}");
    }
    let traces = args.workload.iter().filter(|p| is_csv(p)).count();
    let cluster_is_csv = args.cluster.as_deref().is_some_and(is_csv);
    let started = Instant::now();
    let (events, summary, title) = match (&args.cluster, args.workload.as_slice()) {
        (Some(nodes), [pods]) if cluster_is_csv && traces == 1 => {
            let options = Options {
                policy: args.policy.name().to_string(),
                seed: args.seed,
                max_wait: args.max_wait,
            };
            let (events, summary) = trace_timeline(nodes, pods, args, &options)?;
            (
                events,
                summary,
                format!("{} on {}", workload(pods), workload(nodes)),
            )
        }
        _ if cluster_is_csv || traces > 0 => bail!(
            "an openb node list (.csv) takes one openb pod list (.csv), and a topology takes \
             Kubernetes manifests (YAML)"
        ),
        (cluster, files) => {
            let topology = crate::up::load_topology(cluster.as_deref())?;
            let options = Options {
                policy: args
                    .scheduler_config
                    .as_ref()
                    .map_or_else(|| "default-scheduler".into(), |p| workload(p)),
                seed: args.seed,
                max_wait: args.max_wait,
            };
            let (events, summary) = manifest_timeline(&topology, files, args, &options)?;
            let names: Vec<String> = files.iter().map(|f| workload(f)).collect();
            let on = cluster
                .as_deref()
                .map_or_else(|| "the lab".into(), workload);
            (events, summary, format!("{} on {on}", names.join(", ")))
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    // Everything is rendered before anything is written: no half-written result.
    let mut log = String::new();
    for event in &events {
        log.push_str(&serde_json::to_string(event)?);
        log.push('\n');
    }
    let summary_json = serde_json::to_string_pretty(&summary)?;
    let page = tessera_sim::report::html(&title, &summary);
    for (path, text) in [
        (&args.events, &log),
        (&args.summary, &summary_json),
        (&args.report, &page),
    ] {
        if let Some(path) = path {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    let o = &summary.overall;
    println!(
        "{title}, {} seed {}: {} pods, {} placed, {} completed, {} failed, {} still waiting, {} preempted",
        summary.policy,
        summary.seed,
        o.pods,
        o.placed,
        o.completed,
        o.failed,
        o.pending,
        o.preempted
    );
    println!(
        "makespan {} (first arrival to last event); wait from arrival to placement (placed pods): \
         mean {}, p95 {}; time from arrival to end (completed pods): mean {}; GPUs allocated, \
         averaged over the makespan: {:.2}% of capacity",
        tessera_sim::report::duration(summary.makespan as f64),
        tessera_sim::report::duration(o.mean_wait),
        tessera_sim::report::duration(o.p95_wait as f64),
        tessera_sim::report::duration(o.mean_completion),
        summary.mean_allocation
    );
    for (namespace, f) in &summary.namespaces {
        println!(
            "  {namespace}: {} pods, {} placed, {} failed, {} waiting, {} preempted; mean wait to placement {}",
            f.pods,
            f.placed,
            f.failed,
            f.pending,
            f.preempted,
            tessera_sim::report::duration(f.mean_wait)
        );
    }
    eprintln!(
        "{} events in {seconds:.2} s ({:.0}× faster than real time)",
        events.len(),
        summary.makespan as f64 / seconds.max(1e-9)
    );
    Ok(())
}

fn single(args: &FgdArgs) -> anyhow::Result<()> {
    let nodes = read_nodes(&args.nodes)?;
    let pods = read_pods(&args.pods)?;
    let started = Instant::now();
    let outcome = fgd::run(&nodes, &pods, args.policy, args.seed, args.tune)?;
    let seconds = started.elapsed().as_secs_f64();
    let name = workload(&args.pods);
    let row = fgd::discrete_row(&name, args.policy, args.tune, args.seed, &outcome);
    match &args.out {
        Some(path) => append(path, &[row])?,
        None => println!("{}\n{row}", fgd::discrete_header()),
    }
    eprintln!(
        "{name} {} seed {}: {}% of GPUs allocated at 100% arrived, {}% at the end; {} pods arrived, {} placed, {} unschedulable; {seconds:.2} s",
        args.policy,
        args.seed,
        percent(fgd::discrete(&outcome)[100]),
        percent(Some(outcome.allocation_at(f64::INFINITY))),
        outcome.arrived_pods,
        outcome.placed,
        outcome.failed,
    );
    Ok(())
}

/// Appends rows to a CSV, writing the header first when the file is new or empty.
fn append(path: &Path, rows: &[String]) -> anyhow::Result<()> {
    let fresh = std::fs::metadata(path).map_or(true, |m| m.len() == 0);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    if fresh {
        writeln!(file, "{}", fgd::discrete_header())?;
    }
    for row in rows {
        writeln!(file, "{row}")?;
    }
    Ok(())
}

/// One experiment of a grid.
pub(crate) struct Job {
    /// Index into the workloads.
    pub workload: usize,
    pub policy: Policy,
    pub seed: u64,
}

/// Every `openb_pod_list_*.csv` of a folder, sorted by name, as (workload name, pods).
pub(crate) fn read_workloads(pods_dir: &Path) -> anyhow::Result<Vec<(String, Vec<TracePod>)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(pods_dir)
        .with_context(|| format!("reading {}", pods_dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("openb_pod_list_") && n.ends_with(".csv"))
        })
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{}: no openb_pod_list_*.csv files", pods_dir.display());
    }
    files
        .iter()
        .map(|f| Ok((workload(f), read_pods(f)?)))
        .collect()
}

/// Every (workload, policy, seed) of `policies` × `seeds` over `workloads`.
pub(crate) fn jobs(workloads: usize, policies: &[Policy], seeds: &[u64]) -> Vec<Job> {
    let mut jobs = Vec::new();
    for workload in 0..workloads {
        for &policy in policies {
            for &seed in seeds {
                jobs.push(Job {
                    workload,
                    policy,
                    seed,
                });
            }
        }
    }
    jobs
}

/// Runs `jobs` on `workers` threads (default: every core); per job, in order, its row in the
/// artifact's layout and its GPU allocation at 100% arrived. Fails, naming every failed run,
/// if any run fails.
pub(crate) fn run_jobs(
    nodes: &[TraceNode],
    workloads: &[(String, Vec<TracePod>)],
    jobs: &[Job],
    tune: f64,
    workers: Option<usize>,
) -> anyhow::Result<Vec<(String, Option<f64>)>> {
    let workers = workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    // Each run keeps only its row and its allocation at 100% (not its events).
    type Done = Result<(String, Option<f64>), String>;
    let results: Mutex<Vec<Option<Done>>> = Mutex::new(vec![None; jobs.len()]);
    let progress = crate::output::Progress::new("simulation runs", jobs.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let (name, pods) = &workloads[job.workload];
                    let outcome = fgd::run(nodes, pods, job.policy, job.seed, tune)
                        .map(|o| {
                            let row = fgd::discrete_row(name, job.policy, tune, job.seed, &o);
                            (row, fgd::discrete(&o)[100])
                        })
                        .map_err(|e| e.to_string());
                    if let Ok(mut results) = results.lock() {
                        results[i] = Some(outcome);
                    }
                    progress.step();
                }
            });
        }
    });
    drop(progress);
    let results = results
        .into_inner()
        .map_err(|_| anyhow::anyhow!("a simulation thread panicked"))?;
    let mut done = Vec::new();
    let mut failures = Vec::new();
    for (job, result) in jobs.iter().zip(results) {
        let name = &workloads[job.workload].0;
        match result {
            Some(Ok(outcome)) => done.push(outcome),
            Some(Err(error)) => {
                failures.push(format!("{name} {} seed {}: {error}", job.policy, job.seed))
            }
            None => failures.push(format!(
                "{name} {} seed {}: did not run",
                job.policy, job.seed
            )),
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} of {} runs failed; nothing written:\n{}",
            failures.len(),
            jobs.len(),
            failures.join("\n")
        );
    }
    Ok(done)
}

fn grid(args: &FgdGridArgs) -> anyhow::Result<()> {
    let nodes = read_nodes(&args.nodes)?;
    let workloads = read_workloads(&args.pods_dir)?;
    let jobs = jobs(workloads.len(), &args.policies, &args.seeds.0);
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let started = Instant::now();
    let done = run_jobs(&nodes, &workloads, &jobs, args.tune, Some(workers))?;
    let seconds = started.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    let mut at_100: std::collections::BTreeMap<(usize, Policy), Vec<f64>> = Default::default();
    for (job, (row, value)) in jobs.iter().zip(done) {
        if let Some(value) = value {
            at_100
                .entry((job.workload, job.policy))
                .or_default()
                .push(value);
        }
        rows.push(row);
    }
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(
        &args.out,
        format!("{}\n{}\n", fgd::discrete_header(), rows.join("\n")),
    )
    .with_context(|| format!("writing {}", args.out.display()))?;
    // The summary: mean allocation at 100% arrived per workload and policy.
    let mut out = format!(
        "Share of the cluster's GPUs allocated when the whole workload has arrived, mean over \
         {} seed(s):\n\n| workload |",
        args.seeds.0.len()
    );
    for policy in &args.policies {
        out.push_str(&format!(" {} |", policy.label()));
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(args.policies.len()));
    out.push('\n');
    for (w, (name, _)) in workloads.iter().enumerate() {
        out.push_str(&format!("| {name} |"));
        for policy in &args.policies {
            let values = at_100.get(&(w, *policy)).cloned().unwrap_or_default();
            let mean =
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
            out.push_str(&format!(" {} |", percent(mean)));
        }
        out.push('\n');
    }
    println!("{out}");
    eprintln!(
        "{} runs ({} workloads × {} policies × {} seeds) on {workers} threads in {seconds:.1} s; rows in {}",
        jobs.len(),
        workloads.len(),
        args.policies.len(),
        args.seeds.0.len(),
        args.out.display()
    );
    Ok(())
}
