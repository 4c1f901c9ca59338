//! The `tessera` binary: subcommands wire the parts together; no algorithms live here.

mod agent;
mod agent_cache;
mod bench;
mod bench_dcgm;
mod bench_exec;
mod bench_maintain;
mod bench_models;
mod bench_multikueue;
mod bench_netpol;
mod bench_queue;
mod bench_queue_api;
mod bench_report;
mod bench_scheduler;
mod bench_serving;
mod bench_sim;
mod bootstrap;
mod catalog;
mod check;
mod client;
mod cluster_services;
mod crash_drill;
mod data_dir;
mod detach;
mod diagnose;
mod explain;
mod fault;
mod maintain;
mod model_cmd;
mod monitoring;
mod netpol;
mod node;
mod output;
mod queue_cmd;
mod registry;
mod secrets;
mod sim;
mod telemetry;
mod tenant;
mod up;
mod visibility;

#[cfg(test)]
mod hpa_tests;

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Tessera: a Kubernetes platform for AI and accelerator workloads.
#[derive(Parser)]
#[command(name = "tessera", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the embedded platform: API server, store, controllers and node twins.
    Up(Box<UpArgs>),
    /// Stop the platform started with `tessera up --detach` on a data directory.
    Down(client::DataDirArgs),
    /// Print a kubeconfig for a user, authenticated by a client certificate the cluster's CA signs.
    Kubeconfig(KubeconfigArgs),
    /// Print the accelerator catalog: GPU models, MIG profiles, server models and topologies.
    Catalog(catalog::CatalogArgs),
    /// Inspect nodes of a topology.
    #[command(subcommand)]
    Node(node::NodeCommand),
    /// The node agent on a real machine: discovery, device plugin and DRA kubelet plugin.
    #[command(subcommand)]
    Agent(agent::AgentCommand),
    /// Inject hardware and node faults into a running platform, and recover.
    Fault(FaultArgs),
    /// Explain a pod's placement: every node's verdict per filter and what would make it fit.
    Explain(ExplainArgs),
    /// Run Tessera's scheduler against a cluster as a second scheduler (pods with
    /// `schedulerName: tessera`).
    Scheduler(SchedulerArgs),
    /// Run Tessera's queue manager against a cluster: Kueue's admission of Workloads and its
    /// batch/v1 Job integration, over Kueue's CRDs (`kueue.x-k8s.io/v1beta2`) with no Kueue
    /// controller running.
    Queue(QueueArgs),
    /// Measure performance.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The digital twin: simulate placement on a cluster, faster than real time.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Network policy reachability: the pod-to-pod truth table, and which policy decides.
    Netpol(netpol::NetpolArgs),
    /// Audit a cluster's configuration: risky RBAC grants.
    #[command(subcommand)]
    Check(check::CheckCommand),
    /// Runbooks that diagnose: why pods stay Pending, a lost GPU, a NotReady node, a broken
    /// GPU operator component — what was found and the next steps.
    Diagnose(diagnose::DiagnoseArgs),
    /// Tenant bundles: a team's namespace with Pod Security, quota, a Kueue LocalQueue,
    /// RoleBindings and NetworkPolicies, applied, checked for drift, listed and deleted.
    Tenant(tenant::TenantArgs),
    /// Secrets encrypted at rest: rewrite every encrypted object with the first key.
    Secrets(secrets::SecretsArgs),
    /// Maintenance plans for GPU pools (driver upgrade, MIG repartition, kubelet version, node
    /// rotation): the staged rollout and its pre-flight verdict.
    #[command(subcommand)]
    Maintain(maintain::MaintainCommand),
    /// Monitoring: a Prometheus configuration and GPU alerting rules for the platform.
    Monitoring(monitoring::MonitoringArgs),
    /// The model store: push a Hugging Face repository directory, list models and files.
    #[command(subcommand)]
    Model(model_cmd::ModelCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The API server and store: creates, watch fan-out, lists, write latency, memory.
    Api(bench::BenchArgs),
    /// RBAC authorization decisions over a large policy.
    Rbac(bench::RbacBenchArgs),
    /// Custom-object validation and server-side apply throughput.
    Apply(bench::ApplyBenchArgs),
    /// The scheduling core on scheduler_perf-shaped workloads.
    Scheduler(bench_scheduler::SchedulerBenchArgs),
    /// The simulator: one FGD experiment per policy, against the artifact's time.
    Sim(bench_sim::SimBenchArgs),
    /// Placement quality: Tessera's policy against FGD on every trace, on the seeds it was
    /// designed on and on held-out seeds.
    Placement(bench_sim::PlacementBenchArgs),
    /// Kueue's scheduler-performance configurations through the queueing core, on the
    /// simulator's virtual clock, or (`--through api`, `api-raw`) through the embedded API
    /// server and the queue manager shell.
    Queue(bench_queue::QueueBenchArgs),
    /// Durability: concurrent writers, `kill -9` of the server, restart; no acknowledged
    /// write may be lost.
    CrashDrill(crash_drill::CrashDrillArgs),
    /// The network policy core: the reachability matrix of 10,000 pods under 2,000
    /// policies, single verdicts, one policy's replacement.
    Netpol(bench_netpol::NetpolBenchArgs),
    /// The `kubectl exec` round trip through the embedded API server into a node twin's
    /// container (WebSocket v5, an agnhost connect probe through a Service).
    Exec(bench_exec::ExecBenchArgs),
    /// MultiKueue's dispatch latency: a manager's Workload reserving quota to its Job on the
    /// worker that admitted it, over loopback TLS between embedded platforms.
    Multikueue(bench_multikueue::MultiKueueBenchArgs),
    /// Planning a maintenance rollout of a 1,000-node GPU pool: facts, pre-flight, first step.
    Maintain(bench_maintain::MaintainBenchArgs),
    /// A dcgm-exporter scrape of the node twins' simulated GPUs: one 8-GPU node and all
    /// 1,000 GPUs of a large topology.
    Dcgm(bench_dcgm::DcgmBenchArgs),
    /// Model distribution: N node caches in one process with rate-limited links pulling one
    /// model file at once; origin bytes per model size, load times against the links.
    Models(bench_models::ModelsBenchArgs),
    /// Inference routing: one request trace through simulated vLLM servers, round robin
    /// against the endpoint picker; latency percentiles and throughput of both.
    Serving(bench_serving::ServingBenchArgs),
}

/// Options of `tessera up`.
#[derive(clap::Args, Debug, Clone)]
pub struct UpArgs {
    #[command(flatten)]
    pub data: client::DataDirArgs,
    /// The address the HTTPS API listens on.
    #[arg(long, env = "TESSERA_LISTEN", default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Run in the background and return once every node twin has registered (logs go to
    /// `<data-dir>/tessera.log`); `tessera down` stops it.
    #[arg(long)]
    pub detach: bool,
    /// A cluster topology file (YAML); the built-in lab topology is used without one.
    #[arg(long)]
    pub topology: Option<PathBuf>,
    /// Start from an empty store (certificates are kept).
    #[arg(long)]
    pub reset: bool,
    /// Flush every commit to the device (survives power loss, not only process crashes).
    #[arg(long)]
    pub fsync: bool,
    /// How many recent changes the store keeps for watches.
    #[arg(long, default_value_t = 100_000)]
    pub watch_history: usize,
    /// Static bearer tokens, one `token,user,uid,"group1,group2"` line each.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Seconds a node's Lease may go unrenewed before the node is Unknown and tainted
    /// unreachable (kube-controller-manager's `--node-monitor-grace-period`).
    #[arg(long, default_value_t = 50)]
    pub node_monitor_grace_period: u64,
    /// How often the horizontal pod autoscaler reconciles every HorizontalPodAutoscaler, as a
    /// Go duration (kube-controller-manager's `--horizontal-pod-autoscaler-sync-period`).
    #[arg(long, default_value = "15s", value_parser = parse_sync_period)]
    pub horizontal_pod_autoscaler_sync_period: Duration,
    /// A KubeSchedulerConfiguration file: scheduling profiles (score plugins and weights,
    /// NodeResourcesFit scoring strategy, percentageOfNodesToScore).
    #[arg(long)]
    pub scheduler_config: Option<PathBuf>,
    /// A Kueue Configuration file (`config.kueue.x-k8s.io/v1beta2` or `v1beta1`) for the queue
    /// manager: fair sharing, admission fair sharing, waitForPodsReady, integrations.
    #[arg(long)]
    pub queue_config: Option<PathBuf>,
    /// Path to the file that defines the audit policy configuration (`audit.k8s.io/v1`
    /// Policy). Without it (and --audit-log-path) nothing is audited.
    #[arg(long)]
    pub audit_policy_file: Option<PathBuf>,
    /// If set, all requests coming to the apiserver will be logged to this file, one JSON
    /// `audit.k8s.io/v1` Event a line. '-' means standard out.
    #[arg(long)]
    pub audit_log_path: Option<PathBuf>,
    /// The maximum size in megabytes of the audit log file before it gets rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxsize: u64,
    /// The maximum number of old audit log files to retain. Setting a value of 0 will mean
    /// there's no restriction on the number of files.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxbackup: usize,
    /// The maximum number of days to retain old audit log files based on the timestamp
    /// encoded in their filename.
    #[arg(long, default_value_t = 0)]
    pub audit_log_maxage: u64,
    /// An AdmissionConfiguration (`apiserver.config.k8s.io/v1`) whose PodSecurity plugin
    /// holds a PodSecurityConfiguration (defaults and exemptions), inline or by `path`; a bare
    /// PodSecurityConfiguration file is accepted too.
    #[arg(long)]
    pub admission_control_config_file: Option<PathBuf>,
    /// kube-apiserver's EncryptionConfiguration (`apiserver.config.k8s.io/v1`): which
    /// resources are encrypted in the store, with which providers and keys (the first writes,
    /// all read).
    #[arg(long, value_parser = client::absolute_path)]
    pub encryption_provider_config: Option<PathBuf>,
    /// Run the NVIDIA GPU operator's components (driver, device plugin or DRA kubelet
    /// plugin, dcgm-exporter, validator) as DaemonSet pods in namespace `gpu-operator` on
    /// the GPU nodes.
    #[arg(long)]
    pub gpu_operator: bool,
    /// The address the embedded S3 model store listens on (port 0: a free port, printed in
    /// the banner); its endpoint and credentials are published as Secret
    /// kube-system/tessera-model-store and in `<data-dir>/model-store.env`.
    #[arg(long, default_value = "127.0.0.1:0", conflicts_with_all = ["model_store_endpoint", "no_model_store"])]
    pub model_store_listen: SocketAddr,
    /// An external S3 endpoint to publish instead of serving the embedded store (credentials
    /// from $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY).
    #[arg(long, conflicts_with = "no_model_store")]
    pub model_store_endpoint: Option<String>,
    /// The region the model store's requests are signed for.
    #[arg(long, default_value = "us-east-1")]
    pub model_store_region: String,
    /// The bucket of an external model store (the embedded one serves `models`).
    #[arg(long, default_value = "models", requires = "model_store_endpoint")]
    pub model_store_bucket: String,
    /// Serve no model store and publish none.
    #[arg(long)]
    pub no_model_store: bool,
    /// The address the embedded image registry listens on (port 0: a free port, written to
    /// `<data-dir>/registry.env`); in the cluster it is `registry.tessera-system.svc:5000`,
    /// with the pull Secret tessera-system/registry-pull.
    #[arg(long, default_value = "127.0.0.1:0", conflicts_with = "no_registry")]
    pub registry_listen: SocketAddr,
    /// Serve no image registry and publish none.
    #[arg(long)]
    pub no_registry: bool,
    /// Each node twin's model cache budget (`<data-dir>/node-cache/<node>/`; `200Gi`, `10G`,
    /// or bytes).
    #[arg(long, default_value = "200Gi", value_parser = agent_cache::bytes)]
    pub node_cache_capacity: u64,
    /// Bytes a second each node twin's cache reads from the model store and serves to its
    /// peers (unlimited without), to show peer-to-peer against origin times on loopback.
    #[arg(long, value_parser = agent_cache::bytes)]
    pub node_cache_link_rate: Option<u64>,
}

/// Options of `tessera fault`.
#[derive(clap::Args, Debug)]
pub struct FaultArgs {
    #[command(subcommand)]
    command: fault::FaultCommand,
    #[command(flatten)]
    cluster: client::ClusterArgs,
}

/// Options of `tessera explain`.
#[derive(clap::Args, Debug)]
pub struct ExplainArgs {
    #[command(subcommand)]
    command: explain::ExplainCommand,
    #[command(flatten)]
    cluster: client::ClusterArgs,
}

/// Options of `tessera scheduler`.
#[derive(clap::Args, Debug)]
pub struct SchedulerArgs {
    #[command(flatten)]
    cluster: client::ClusterArgs,
    /// A KubeSchedulerConfiguration file (its profiles name the schedulerNames served).
    #[arg(long)]
    config: Option<PathBuf>,
}

/// Options of `tessera queue`.
#[derive(clap::Args, Debug)]
pub struct QueueArgs {
    #[command(flatten)]
    cluster: client::ClusterArgs,
    /// A Kueue Configuration file (`config.kueue.x-k8s.io/v1beta2` or `v1beta1`).
    #[arg(long)]
    queue_config: Option<PathBuf>,
    /// List, stop or resume queues and Workloads; without one, run the queue manager.
    #[command(subcommand)]
    command: Option<queue_cmd::QueueCommand>,
}

/// Options of `tessera kubeconfig`.
#[derive(clap::Args, Debug, Clone)]
pub struct KubeconfigArgs {
    // The data directory of a platform `tessera up` started: its CA signs the certificate,
    // its kubeconfig names the server.
    #[command(flatten)]
    pub data: client::DataDirArgs,
    /// The user name (the certificate's CN).
    #[arg(long)]
    pub user: String,
    /// A group (the certificate's O); at most two.
    #[arg(long = "group")]
    pub groups: Vec<String>,
}

/// mimalloc: the API path allocates and frees many small buffers per request (JSON, maps,
/// strings); glibc's malloc spent a quarter of `tessera bench scheduler --api` in its own
/// bookkeeping (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// No transparent huge pages for this process. mimalloc returns freed pages to the kernel
/// and takes them again as the API path's buffers come and go; with huge pages each new
/// touch of such a range had the kernel zero 2 MiB, a quarter of the CPU of `tessera bench
/// scheduler --api` (docs/benchmarks.md). mimalloc's own `MIMALLOC_ALLOW_THP=0` does the
/// same, but only when set in the environment before the process starts.
fn without_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
        tracing::debug!(%error, "transparent huge pages stay enabled");
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colours for a person at a terminal, not for a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    without_transparent_huge_pages();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Command::Up(args) => runtime.block_on(up::run(*args)),
        Command::Down(args) => detach::stop(&args.data_dir),
        Command::Kubeconfig(args) => up::print_kubeconfig(&args),
        Command::Catalog(args) => catalog::run(&args),
        Command::Agent(command) => agent::run(&command, &runtime),
        Command::Node(command) => node::run(&command),
        Command::Scheduler(args) => runtime.block_on(async {
            let profiles = up::load_scheduler_profiles(args.config.as_deref())?;
            let client = client::connect(&args.cluster).await?;
            let config = tessera_controllers::scheduler::SchedulerConfig::second(profiles);
            tracing::info!(profiles = ?config.profiles.iter().map(|p| &p.scheduler_name).collect::<Vec<_>>(), "scheduling");
            tokio::select! {
                () = tessera_controllers::scheduler::run(client, config) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            Ok(())
        }),
        Command::Queue(args) => runtime.block_on(async {
            let client = client::connect(&args.cluster).await?;
            if let Some(command) = &args.command {
                return queue_cmd::run(command, client).await;
            }
            let config = up::queue_config(args.queue_config.as_deref())?;
            tracing::info!("queue manager running");
            tokio::select! {
                () = tessera_controllers::queue::run(client, config) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            Ok(())
        }),
        Command::Explain(args) => runtime.block_on(explain::run(&args.command, &args.cluster)),
        Command::Fault(args) => runtime.block_on(fault::run(&args.command, &args.cluster)),
        Command::Bench(BenchCommand::Api(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(bench::api(&args)))
        }
        Command::Bench(BenchCommand::Exec(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(bench_exec::exec(&args)))
        }
        Command::Bench(BenchCommand::Multikueue(args)) => bench_report::repeat(&args.repeat, || {
            runtime.block_on(bench_multikueue::multikueue(&args))
        }),
        Command::Bench(BenchCommand::Rbac(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(bench::rbac(&args)))
        }
        Command::Bench(BenchCommand::Apply(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(bench::apply(&args)))
        }
        Command::Bench(BenchCommand::Scheduler(args)) => bench_scheduler::run(&args),
        Command::Bench(BenchCommand::Sim(args)) => {
            bench_report::repeat(&args.repeat, || bench_sim::sim(&args))
        }
        Command::Bench(BenchCommand::Placement(args)) => {
            bench_report::repeat(&args.repeat, || bench_sim::placement(&args))
        }
        Command::Bench(BenchCommand::Queue(args)) => {
            bench_report::repeat(&args.repeat, || bench_queue::queue(&args))
        }
        Command::Bench(BenchCommand::Maintain(args)) => {
            bench_report::repeat(&args.repeat, || bench_maintain::maintain(&args))
        }
        Command::Bench(BenchCommand::Models(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(bench_models::rows(&args)))
        }
        Command::Bench(BenchCommand::Serving(args)) => {
            bench_report::repeat(&args.repeat, || bench_serving::serving(&args))
        }
        Command::Bench(BenchCommand::Dcgm(args)) => {
            bench_report::repeat(&args.repeat, || bench_dcgm::dcgm(&args))
        }
        Command::Bench(BenchCommand::Netpol(args)) => {
            bench_report::repeat(&args.repeat, || bench_netpol::netpol(&args))
        }
        Command::Bench(BenchCommand::CrashDrill(args)) => {
            bench_report::repeat(&args.repeat, || runtime.block_on(crash_drill::rows(&args)))
        }
        Command::Sim(command) => sim::run(&command),
        Command::Netpol(args) => runtime.block_on(netpol::run(&args)),
        Command::Diagnose(args) => {
            if !runtime.block_on(diagnose::run(&args))? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Check(command) => {
            if !runtime.block_on(check::run(&command))? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Tenant(args) => runtime.block_on(tenant::run(&args)),
        Command::Maintain(command) => {
            if !runtime.block_on(maintain::run(&command))? {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Secrets(args) => runtime.block_on(secrets::run(&args)),
        Command::Monitoring(args) => runtime.block_on(monitoring::run(&args)),
        Command::Model(command) => runtime.block_on(model_cmd::run(&command)),
    }
}

/// A positive Go duration (`15s`, `1m30s`).
fn parse_sync_period(text: &str) -> Result<Duration, String> {
    match tessera_model::time::parse_duration(text)? {
        Duration::ZERO => Err(format!("{text:?}: the period must be positive")),
        period => Ok(period),
    }
}
