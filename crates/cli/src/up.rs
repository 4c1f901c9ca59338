//! `tessera up`: the embedded platform in one process.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tessera_api::authn::StaticTokens;
use tessera_api::policy;
use tessera_apiserver::authn::{IdentityLayer, load_static_tokens};
use tessera_apiserver::gc::Collector;
use tessera_apiserver::tls::{Pki, write_private};
use tessera_apiserver::{ApiServer, Objects, ServerConfig};
use tessera_node::Topology;
use tessera_store::{Store, StoreOptions};
use tessera_twin::{NodeTwins, TwinConfig};
use tokio::net::TcpListener;

use crate::UpArgs;
use crate::bootstrap;

const STORE_FILE: &str = "state.db";

fn remove_store(data_dir: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm"] {
        let path = data_dir.join(format!("{STORE_FILE}{suffix}"));
        if path.exists() {
            std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
        }
    }
    let logs = data_dir.join("logs");
    if logs.exists() {
        std::fs::remove_dir_all(&logs).with_context(|| format!("remove {}", logs.display()))?;
    }
    Ok(())
}

/// The topology in `path`, or the built-in lab.
pub fn load_topology(path: Option<&std::path::Path>) -> anyhow::Result<Topology> {
    Ok(match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read topology file {}", path.display()))?;
            Topology::parse(&text).with_context(|| format!("topology file {}", path.display()))?
        }
        None => Topology::default_lab(),
    })
}

/// The queue manager's settings, the same under `tessera up` and `tessera queue`: Kueue's
/// Configuration from `--queue-config` (Kueue's defaults without one: classic preemption) on
/// the host's clock. A file that does not read is an error naming it and the field; the
/// Kueue fields it carries that Tessera ignores are logged once.
pub fn queue_config(
    path: Option<&std::path::Path>,
) -> anyhow::Result<tessera_controllers::queue::QueueConfig> {
    let configuration = match path {
        None => tessera_queue::config::Configuration::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("read queue configuration {}", path.display()))?;
            let configuration = tessera_queue::config::parse(&text)
                .map_err(|e| anyhow::anyhow!("queue configuration {}: {e}", path.display()))?;
            if !configuration.ignored.is_empty() {
                tracing::info!(fields = ?configuration.ignored, file = %path.display(), "queue configuration: Kueue fields Tessera does not act on, ignored");
            }
            configuration
        }
    };
    Ok(tessera_controllers::queue::QueueConfig {
        configuration,
        clock: std::sync::Arc::new(std::time::SystemTime::now),
        metrics: None,
    })
}

/// Scheduling profiles from a KubeSchedulerConfiguration file, checked before anything starts.
pub fn load_scheduler_profiles(
    path: Option<&std::path::Path>,
) -> anyhow::Result<Option<Vec<tessera_scheduler::profile::Profile>>> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read scheduler configuration {}", path.display()))?;
    let profiles = tessera_scheduler::profile::parse(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(Some(profiles))
}

/// Makes the store's files (the database and SQLite's WAL and shared-memory files, which
/// hold every Secret and token) readable by their owner only, also in a directory made by an
/// older version.
fn private_store_files(data_dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for suffix in ["", "-wal", "-shm"] {
        let path = data_dir.join(format!("{STORE_FILE}{suffix}"));
        if path.exists() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .with_context(|| format!("make {} private (0600)", path.display()))?;
        }
    }
    Ok(())
}

/// How the banner's last line starts: a detached start returns once it reads it.
pub const BANNER_END: &str = "Press Ctrl-C to stop";

/// How long start-up waits for the node twins to register before it reports ready anyway.
const REGISTRATION_WAIT: Duration = Duration::from_secs(60);

/// Waits until every node twin's Node exists, so that "up" means the whole lab is there.
async fn wait_for_registration(client: kube::Client, names: &[String]) {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
    let deadline = tokio::time::Instant::now() + REGISTRATION_WAIT;
    loop {
        let registered = nodes
            .list_metadata(&Default::default())
            .await
            .map(|list| {
                list.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect::<std::collections::BTreeSet<_>>()
            })
            .unwrap_or_default();
        if names.iter().all(|n| registered.contains(n)) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            tracing::warn!(
                missing = ?names.iter().filter(|n| !registered.contains(*n)).collect::<Vec<_>>(),
                "node twins not registered yet; serving anyway"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the platform until Ctrl-C or SIGTERM; with `--detach`, in the background.
/// The audit policy and log options of `--audit-policy-file` and `--audit-log-*`; `None`
/// (nothing audited) unless both the policy and the log path are given, as kube-apiserver.
fn audit_policy(
    args: &UpArgs,
) -> anyhow::Result<
    Option<(
        tessera_api::audit::Policy,
        tessera_apiserver::audit_log::AuditLogOptions,
    )>,
> {
    let Some(file) = &args.audit_policy_file else {
        if args.audit_log_path.is_some() {
            tracing::warn!(
                "no audit policy file provided (--audit-policy-file): no events will be recorded"
            );
        }
        return Ok(None);
    };
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("read audit policy file {}", file.display()))?;
    let loaded = tessera_api::audit::parse_policy(&text)
        .map_err(|e| anyhow::anyhow!("audit policy file {}: {e}", file.display()))?;
    for warning in &loaded.warnings {
        tracing::warn!(file = %file.display(), "audit policy: {warning}");
    }
    let Some(path) = &args.audit_log_path else {
        tracing::warn!("no audit log path provided (--audit-log-path): no events will be recorded");
        return Ok(None);
    };
    Ok(Some((
        loaded.policy,
        tessera_apiserver::audit_log::AuditLogOptions {
            path: path.clone(),
            max_size_mb: args.audit_log_maxsize,
            max_backups: args.audit_log_maxbackup,
            max_age_days: args.audit_log_maxage,
        },
    )))
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    // Read before detaching too, so a bad policy is reported where the command was typed.
    let audit_policy = audit_policy(&args)?;
    // A bad encryption configuration is reported before detaching, too.
    let encryption = args
        .encryption_provider_config
        .as_deref()
        .map(crate::secrets::load_config)
        .transpose()?;
    if args.detach {
        return crate::detach::start(&args.data.data_dir);
    }
    let mut topology = load_topology(args.topology.as_deref())?;
    if args.gpu_operator {
        tessera_telemetry::operator::label_pools(&mut topology);
    }
    let profiles = load_scheduler_profiles(args.scheduler_config.as_deref())?;
    let mut queue_config = queue_config(args.queue_config.as_deref())?;
    let pod_security = args
        .admission_control_config_file
        .as_deref()
        .map(tessera_apiserver::pod_security::load_admission_config)
        .transpose()?;
    crate::data_dir::create_private(&args.data.data_dir)?;
    // Held until the process ends: a second server on the same directory would overwrite the
    // kubeconfig and diverge from this one.
    let _held = crate::data_dir::hold(&args.data.data_dir)?;
    if args.reset {
        remove_store(&args.data.data_dir)?;
    }
    let store = Store::open_with_transformer(
        &args.data.data_dir.join(STORE_FILE),
        StoreOptions {
            history: args.watch_history,
            fsync: args.fsync,
        },
        encryption.map(crate::secrets::transformer),
    )
    .context("open the store")?;
    private_store_files(&args.data.data_dir)?;
    let kueue = &queue_config.configuration;
    let objects = Objects::new(store)
        .with_kueue_job_defaulting(tessera_api::admission::KueueJobDefaulting {
            manage_jobs_without_queue_name: kueue.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector: kueue.managed_jobs_namespace_selector.clone(),
        })
        .with_service_ranges(tessera_api::service_allocation::ServiceRanges {
            cluster_ips: topology.networking.service_cidr,
            node_ports: topology.networking.service_node_port_range,
        });
    let objects = match pod_security {
        Some(admission) => objects.with_pod_security(admission),
        None => objects,
    };
    bootstrap::ensure_system_objects(&objects)?;
    crate::telemetry::ensure_reader_role(&objects)?;
    if args.gpu_operator {
        crate::telemetry::ensure_gpu_operator(&objects)?;
    }

    let pki = Pki::load_or_create(&args.data.data_dir).context("set up certificates")?;
    let static_tokens = match &args.token_auth_file {
        Some(path) => {
            load_static_tokens(path).map_err(|e| anyhow::anyhow!("token auth file: {e}"))?
        }
        None => StaticTokens::default(),
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    let address = listener.local_addr()?;
    crate::cluster_services::ensure_cluster_services(
        &objects,
        topology.networking.service_cidr,
        address.port(),
    )?;
    let log_dir = args.data.data_dir.join("logs");
    let server = ApiServer::new(
        objects.clone(),
        ServerConfig {
            log_dir: log_dir.clone(),
            bookmark_interval: Duration::from_secs(30),
            token_secret: pki.token_key.clone().into_bytes(),
            static_tokens,
            advertise_address: address.to_string(),
        },
    );
    server.register_aggregated(std::sync::Arc::new(crate::visibility::Visibility));
    // One set of metric registries, shared by the API server (which serves them all on its
    // listener) and the scheduler and queue manager that feed them.
    let registries = std::sync::Arc::new(
        tessera_metrics::components::Registries::new().context("define the metrics")?,
    );
    server.set_metrics(registries.clone());
    queue_config.metrics = Some(registries.clone());
    server.register_aggregated(std::sync::Arc::new(crate::telemetry::MetricsApi));
    if let Some((policy, options)) = audit_policy {
        let clock: tessera_model::clock::Clock = std::sync::Arc::new(std::time::SystemTime::now);
        let (sink, _writer) = tessera_apiserver::audit_log::start(&options, clock.clone())
            .with_context(|| format!("open the audit log {}", options.path.display()))?;
        server.set_auditor(tessera_apiserver::audit::Auditor::new(policy, sink, clock));
        tracing::info!(path = %options.path.display(), "audit log enabled");
    }
    let router = server.router();

    let tls = pki.server_config().context("TLS configuration")?;
    let kubeconfig = args.data.data_dir.join("kubeconfig");
    // The admin kubeconfig carries the admin's private key.
    write_private(&kubeconfig, &pki.kubeconfig(&format!("https://{address}")))
        .with_context(|| format!("write {}", kubeconfig.display()))?;

    let collector = tokio::spawn(
        Collector::new(objects.clone())
            .with_metrics(&registries)
            .run(),
    );
    // Each in-process component acts under its own least-privilege identity.
    let client_for = |component: &str| {
        let service = tower::ServiceBuilder::new()
            .layer(
                IdentityLayer::new(policy::identity(component))
                    .with_user_agent(&policy::user_agent(component)),
            )
            .service(router.clone());
        kube::Client::new(service, "default")
    };
    // The controllers read the host's clock.
    let clock: tessera_model::clock::Clock = std::sync::Arc::new(std::time::SystemTime::now);
    // kube-controller-manager's controllers record into its metrics.
    let disruption = tokio::spawn(tessera_controllers::pdb::run(
        client_for("disruption-controller"),
        clock.clone(),
        Some(registries.clone()),
    ));
    let apps = tokio::spawn(tessera_controllers::apps::run(
        client_for("apps-controller"),
        clock.clone(),
        Some(registries.clone()),
    ));
    let endpoints = tokio::spawn(tessera_controllers::endpoints::run(
        client_for("endpoint-controller"),
        Some(registries.clone()),
    ));
    let jobsets = tokio::spawn(tessera_controllers::custom::run_jobsets(
        client_for("workload-controller"),
        clock.clone(),
    ));
    let leader_worker_sets = tokio::spawn(tessera_controllers::custom::run_leader_worker_sets(
        client_for("workload-controller"),
        clock.clone(),
    ));
    let jobs = tokio::spawn(tessera_controllers::jobs::run(
        client_for("job-controller"),
        tessera_controllers::jobs::JobConfig {
            metrics: Some(registries.clone()),
            ..tessera_controllers::jobs::JobConfig::default()
        },
    ));
    let node_monitor = tokio::spawn(tessera_controllers::node_monitor::run(
        client_for("node-controller"),
        tessera_controllers::node_monitor::NodeMonitorConfig {
            grace_period: Duration::from_secs(args.node_monitor_grace_period),
            period: Duration::from_secs(1),
            clock: clock.clone(),
            metrics: Some(registries.clone()),
        },
    ));
    let autoscaler = tokio::spawn(tessera_controllers::hpa::run(
        client_for("horizontal-pod-autoscaler"),
        tessera_controllers::hpa::HpaConfig {
            metrics: Some(registries.clone()),
            ..tessera_controllers::hpa::HpaConfig::new(
                args.horizontal_pod_autoscaler_sync_period,
                clock.clone(),
            )
        },
    ));
    let scheduler = tokio::spawn(tessera_controllers::scheduler::run(
        client_for("scheduler"),
        tessera_controllers::scheduler::SchedulerConfig {
            metrics: Some(registries.clone()),
            ..tessera_controllers::scheduler::SchedulerConfig::embedded(profiles)
        },
    ));
    let queue_manager = tokio::spawn(tessera_controllers::queue::run(
        client_for("queue-manager"),
        queue_config,
    ));
    let volumes = tokio::spawn(tessera_controllers::pv_controller::run(
        client_for("persistent-volume-binder"),
        clock.clone(),
        Some(registries.clone()),
    ));
    let ephemeral_volumes = tokio::spawn(tessera_controllers::pv_controller::run_ephemeral(
        client_for("ephemeral-volume-controller"),
        clock.clone(),
        Some(registries.clone()),
    ));
    let snapshots = tokio::spawn(tessera_controllers::snapshot_controller::run(
        client_for("snapshot-controller"),
        clock.clone(),
    ));
    let gateways = tokio::spawn(tessera_controllers::gateway::run(
        client_for("gateway-controller"),
        clock.clone(),
    ));
    let pod_gc = tokio::spawn(tessera_controllers::pod_gc::run(
        client_for("pod-garbage-collector"),
        clock.clone(),
    ));
    let maintenance = tokio::spawn(tessera_controllers::maintenance::run(
        client_for("maintenance-controller"),
        clock.clone(),
    ));
    let claims = tokio::spawn(tessera_controllers::resource_claims::run(
        client_for("resourceclaim-controller"),
        clock,
        Some(registries.clone()),
    ));
    let store_choice = if args.no_model_store {
        crate::model_cmd::UpStore::Off
    } else if let Some(endpoint) = &args.model_store_endpoint {
        crate::model_cmd::UpStore::External(endpoint.clone())
    } else {
        crate::model_cmd::UpStore::Embedded(args.model_store_listen)
    };
    // Held until shutdown: dropping the store stops it.
    let (_model_store, model_store) = crate::model_cmd::start_for_up(
        store_choice,
        &args.model_store_region,
        &args.model_store_bucket,
        &args.data.data_dir,
        &objects,
    )
    .await?;

    // Held until shutdown: dropping the registry stops it.
    let (registry_server, registry) = if args.no_registry {
        (None, None)
    } else {
        let (server, twins) = crate::registry::start_for_up(
            args.registry_listen,
            &args.data.data_dir,
            &objects,
            topology.networking.pod_cidr,
        )
        .await?;
        (Some(server), Some(twins))
    };

    let twins = NodeTwins::new(
        client_for("node-twins"),
        &topology,
        TwinConfig {
            device_checkpoint: Some(
                args.data
                    .data_dir
                    .join("kubelet/device_manager_checkpoint.json"),
            ),
            log_dir,
            // The kubelet renews every 10 s against a 50 s grace period; a shorter grace
            // period (tests, demos) needs proportionally quicker renewals.
            lease_interval: Duration::from_secs(10)
                .min(Duration::from_secs(args.node_monitor_grace_period) / 5),
            models: Some(tessera_twin::ModelConfig {
                cache_root: args.data.data_dir.join("node-cache"),
                capacity: args.node_cache_capacity,
                link_rate: args.node_cache_link_rate,
                origin: model_store.clone(),
            }),
            registry,
            ..TwinConfig::default()
        },
    );
    let containers = std::sync::Arc::new(twins.containers());
    server.register_container_runtime(std::sync::Arc::new(TwinRuntime(containers.clone())));
    server.register_proxy_backend(std::sync::Arc::new(crate::telemetry::TwinProxy(containers)));
    let node_names = twins.node_names();
    let twin_task = tokio::spawn(async move {
        if let Err(error) = twins.run().await {
            tracing::error!(%error, "node twins stopped");
        }
    });

    let registration = client_for("node-controller");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(tessera_apiserver::tls::serve(
        listener,
        tls,
        router,
        async {
            let _ = stop_rx.await;
        },
    ));

    wait_for_registration(registration, &node_names).await;
    tracing::info!(%address, data_dir = %args.data.data_dir.display(), nodes = ?node_names, "tessera is up");
    println!(
        "Tessera is up: Kubernetes API at https://{address} with {} node twins.",
        node_names.len()
    );
    println!(
        "Point kubectl at it:\n\n    export KUBECONFIG={}\n    kubectl get nodes\n",
        kubeconfig.display()
    );
    if let Some(store) = &model_store {
        println!(
            "Model store (S3) at {}, bucket {}; credentials in Secret {}/{} and {}.\n",
            store.endpoint,
            store.bucket,
            tessera_model_store::connection::SECRET_NAMESPACE,
            tessera_model_store::connection::SECRET_NAME,
            args.data
                .data_dir
                .join(tessera_model_store::connection::ENV_FILE)
                .display()
        );
    }
    if let Some(registry) = &registry_server {
        println!(
            "Image registry at http://{} ({} in the cluster, pull Secret {}/{}); credentials in {}.\n",
            registry.address(),
            tessera_node::registry::HOST,
            tessera_node::registry::NAMESPACE,
            tessera_node::registry::PULL_SECRET,
            args.data.data_dir.join(crate::registry::ENV_FILE).display()
        );
    }
    println!(
        "{BANNER_END}; state persists in {}.",
        args.data.data_dir.display()
    );

    shutdown_signal().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(());
    twin_task.abort();
    collector.abort();
    disruption.abort();
    jobs.abort();
    claims.abort();
    scheduler.abort();
    queue_manager.abort();
    node_monitor.abort();
    autoscaler.abort();
    maintenance.abort();
    pod_gc.abort();
    volumes.abort();
    ephemeral_volumes.abort();
    snapshots.abort();
    gateways.abort();
    apps.abort();
    jobsets.abort();
    endpoints.abort();
    leader_worker_sets.abort();
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// Prints a kubeconfig for a user of the platform in a data directory, pointing at the server
/// that platform listens on (its own kubeconfig records it); refuses a directory where no
/// platform was ever started rather than invent a CA and an address.
pub fn print_kubeconfig(args: &crate::KubeconfigArgs) -> anyhow::Result<()> {
    let dir = &args.data.data_dir;
    let admin = dir.join(crate::client::PLATFORM_KUBECONFIG);
    if !admin.is_file() || !dir.join("pki").is_dir() {
        anyhow::bail!(
            "no Tessera platform was started in {} (it has no {} and no pki/); start one with \
             `tessera up --data-dir {}`, or pass the --data-dir of a running one",
            dir.display(),
            admin.display(),
            dir.display()
        );
    }
    let server = kube::config::Kubeconfig::read_from(&admin)
        .with_context(|| format!("read {}", admin.display()))?
        .clusters
        .into_iter()
        .find_map(|named| named.cluster.and_then(|cluster| cluster.server))
        .with_context(|| format!("{} names no server", admin.display()))?;
    let pki = Pki::load_or_create(dir).with_context(|| {
        format!(
            "load the platform's certificates in {}",
            dir.join("pki").display()
        )
    })?;
    let kubeconfig = pki
        .user_kubeconfig(&server, &args.user, &args.groups)
        .context("issue the user's certificate")?;
    crate::output::emit(&kubeconfig)
}

/// `pods/exec` into the node twins' simulated containers.
pub(crate) struct TwinRuntime(pub(crate) std::sync::Arc<tessera_twin::containers::Containers>);

impl tessera_apiserver::exec::ContainerRuntime for TwinRuntime {
    fn exec(
        &self,
        target: tessera_apiserver::exec::ExecTarget,
        stdin: Vec<u8>,
    ) -> futures::future::BoxFuture<'static, Result<tessera_exec::Output, String>> {
        let containers = self.0.clone();
        Box::pin(async move {
            containers
                .exec(&target.pod, &target.container, &target.command, &stdin)
                .await
        })
    }
}
