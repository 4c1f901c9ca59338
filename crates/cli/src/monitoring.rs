//! `tessera monitoring prometheus-config`: writes a Prometheus configuration for the platform
//! a kubeconfig points at — `prometheus.yml`, `rules/gpu-platform.rules.yml`, and the CA,
//! client certificate and key taken from the kubeconfig, beside them.
//!
//! The configuration and rules are `tessera_metrics::prometheus_config`'s; this module reads
//! the kubeconfig, lists the targets when asked for static ones, and writes the files.

use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine as _;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::Value;
use tessera_metrics::prometheus_config::{self, RULES_FILE, Settings, StaticTargets};

use crate::client::{ClusterArgs, Source};

/// `tessera monitoring …`.
#[derive(Args, Debug)]
pub struct MonitoringArgs {
    #[command(subcommand)]
    command: MonitoringCommand,
}

#[derive(Subcommand, Debug)]
enum MonitoringCommand {
    /// Write prometheus.yml, the GPU platform's alerting rules and the TLS files to scrape
    /// the platform (API server, scheduler, Kueue, kube-state-metrics, kubelets, dcgm-exporter).
    PrometheusConfig(PrometheusConfigArgs),
}

/// How Prometheus finds the kubelets and dcgm-exporter pods.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Discovery {
    /// Prometheus's Kubernetes service discovery against the API server.
    Kubernetes,
    /// The nodes and dcgm-exporter pods there are now, listed once (for a Prometheus built
    /// without Kubernetes discovery, such as Debian's package).
    Static,
}

#[derive(Args, Debug)]
struct PrometheusConfigArgs {
    /// The directory to write into (created if missing).
    #[arg(long, value_parser = crate::client::absolute_path)]
    out: PathBuf,
    /// `global.scrape_interval`.
    #[arg(long, default_value = "15s")]
    scrape_interval: String,
    /// Scrape and evaluate every 2 s with short `for:` durations, so a demo or a test sees
    /// alerts fire in seconds.
    #[arg(long)]
    lab: bool,
    /// How the kubelet and dcgm-exporter targets are found.
    #[arg(long, value_enum, default_value_t = Discovery::Kubernetes)]
    discovery: Discovery,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// Runs `tessera monitoring`.
pub async fn run(args: &MonitoringArgs) -> anyhow::Result<()> {
    match &args.command {
        MonitoringCommand::PrometheusConfig(args) => prometheus_config(args).await,
    }
}

/// The server and credentials of a kubeconfig's current context.
struct Credentials {
    server: String,
    ca: Vec<u8>,
    cert: Vec<u8>,
    key: Vec<u8>,
}

fn kubeconfig_file(source: &Source) -> anyhow::Result<PathBuf> {
    match source {
        Source::Flag(path) | Source::DataDir(path) => Ok(path.clone()),
        Source::Env(paths) => paths.first().cloned().context("$KUBECONFIG names no file"),
        Source::Discovered { data_dir } => anyhow::bail!(
            "no kubeconfig to take the server and TLS files from: pass --kubeconfig, set \
             $KUBECONFIG, or --data-dir of a platform ({} has no kubeconfig)",
            data_dir.display()
        ),
    }
}

/// Inline data (`<field>-data`, base64) or a file (`<field>`, relative to the kubeconfig).
fn material(
    entry: &Value,
    field: &str,
    kubeconfig: &Path,
    context: &str,
) -> anyhow::Result<Vec<u8>> {
    if let Some(data) = entry.get(format!("{field}-data")).and_then(Value::as_str) {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .with_context(|| {
                format!(
                    "{}: {context}.{field}-data is not base64",
                    kubeconfig.display()
                )
            });
    }
    if let Some(file) = entry.get(field).and_then(Value::as_str) {
        let path = kubeconfig.parent().unwrap_or(Path::new(".")).join(file);
        return std::fs::read(&path).with_context(|| {
            format!(
                "{}: read {context}.{field} {}",
                kubeconfig.display(),
                path.display()
            )
        });
    }
    anyhow::bail!(
        "{}: {context} has neither {field} nor {field}-data (Prometheus needs a client \
         certificate to scrape the platform)",
        kubeconfig.display()
    )
}

fn named<'a>(config: &'a Value, list: &str, name: &str, item: &str) -> Option<&'a Value> {
    config
        .get(list)?
        .as_array()?
        .iter()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?
        .get(item)
}

fn credentials(path: &Path) -> anyhow::Result<Credentials> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read kubeconfig {}", path.display()))?;
    let config: Value = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("kubeconfig {}: {e}", path.display()))?;
    let current = config
        .get("current-context")
        .and_then(Value::as_str)
        .with_context(|| format!("{}: no current-context", path.display()))?;
    let context = named(&config, "contexts", current, "context")
        .with_context(|| format!("{}: context {current:?} is not defined", path.display()))?;
    let field = |name: &str| {
        context
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let cluster = named(&config, "clusters", field("cluster"), "cluster").with_context(|| {
        format!(
            "{}: cluster {:?} is not defined",
            path.display(),
            field("cluster")
        )
    })?;
    let user = named(&config, "users", field("user"), "user").with_context(|| {
        format!(
            "{}: user {:?} is not defined",
            path.display(),
            field("user")
        )
    })?;
    let server = cluster
        .get("server")
        .and_then(Value::as_str)
        .with_context(|| format!("{}: clusters.cluster.server is missing", path.display()))?;
    let server = server
        .strip_prefix("https://")
        .with_context(|| {
            format!(
                "{}: server {server:?} is not an https:// URL",
                path.display()
            )
        })?
        .trim_end_matches('/')
        .to_string();
    Ok(Credentials {
        server,
        ca: material(cluster, "certificate-authority", path, "cluster")?,
        cert: material(user, "client-certificate", path, "user")?,
        key: material(user, "client-key", path, "user")?,
    })
}

/// The nodes and the dcgm-exporter pods (a container port 9400 in `gpu-operator`) now.
async fn static_targets(args: &ClusterArgs) -> anyhow::Result<StaticTargets> {
    use k8s_openapi::api::core::v1::{Node, Pod};
    let client = crate::client::connect(args).await?;
    let nodes = kube::Api::<Node>::all(client.clone())
        .list_metadata(&Default::default())
        .await
        .context("list nodes")?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let dcgm_pods = kube::Api::<Pod>::namespaced(client, "gpu-operator")
        .list(&Default::default())
        .await
        .context("list pods in gpu-operator")?
        .items
        .into_iter()
        .filter(|pod| {
            pod.spec
                .iter()
                .flat_map(|s| &s.containers)
                .any(|c| c.ports.iter().flatten().any(|p| p.container_port == 9400))
        })
        .filter_map(|p| p.metadata.name)
        .collect();
    Ok(StaticTargets { nodes, dcgm_pods })
}

async fn prometheus_config(args: &PrometheusConfigArgs) -> anyhow::Result<()> {
    if tessera_model::time::parse_duration(&args.scrape_interval).is_err() {
        anyhow::bail!(
            "--scrape-interval {:?} is not a duration (for example 15s or 1m)",
            args.scrape_interval
        );
    }
    let kubeconfig = kubeconfig_file(&crate::client::source(&args.cluster))?;
    let credentials = credentials(&kubeconfig)?;
    let static_targets = match args.discovery {
        Discovery::Kubernetes => None,
        Discovery::Static => Some(static_targets(&args.cluster).await?),
    };
    let settings = Settings {
        server: credentials.server.clone(),
        scrape_interval: args.scrape_interval.clone(),
        lab: args.lab,
        ca_file: "ca.crt".into(),
        cert_file: "client.crt".into(),
        key_file: "client.key".into(),
        static_targets,
    };
    let out = &args.out;
    std::fs::create_dir_all(out.join("rules"))
        .with_context(|| format!("create {}", out.join("rules").display()))?;
    let write = |name: &str, contents: &[u8]| -> anyhow::Result<()> {
        let path = out.join(name);
        std::fs::write(&path, contents).with_context(|| format!("write {}", path.display()))
    };
    write("ca.crt", &credentials.ca)?;
    write("client.crt", &credentials.cert)?;
    let key = String::from_utf8(credentials.key).context("the client key is not PEM text")?;
    tessera_apiserver::tls::write_private(&out.join("client.key"), &key)
        .with_context(|| format!("write {}", out.join("client.key").display()))?;
    write(
        "prometheus.yml",
        prometheus_config::prometheus_yml(&settings).as_bytes(),
    )?;
    write(
        RULES_FILE,
        prometheus_config::rules_yml(args.lab).as_bytes(),
    )?;
    println!(
        "Wrote {} and {} for https://{} (TLS files from {}).\nRun: prometheus --config.file={}",
        out.join("prometheus.yml").display(),
        out.join(RULES_FILE).display(),
        credentials.server,
        kubeconfig.display(),
        out.join("prometheus.yml").display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\nclusters:\n- name: k\n  cluster: {server: \"https://127.0.0.1:6443\", certificate-authority-data: Q0E=}\nusers:\n- name: u\n  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}\n";

    fn read(text: &str) -> anyhow::Result<Credentials> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, text).unwrap();
        credentials(&path)
    }

    #[test]
    fn credentials_come_from_the_current_context() {
        let credentials = read(KUBECONFIG).unwrap();
        assert_eq!(credentials.server, "127.0.0.1:6443");
        assert_eq!(
            (credentials.ca, credentials.cert, credentials.key),
            (b"CA".to_vec(), b"CERT".to_vec(), b"KEY".to_vec())
        );
    }

    /// A kubeconfig Prometheus cannot use is refused naming the file and the field.
    #[test]
    fn unusable_kubeconfigs_are_refused_naming_the_field() {
        let cases = [
            (
                KUBECONFIG.replace("current-context: c\n", ""),
                "no current-context",
            ),
            (
                KUBECONFIG.replace("https://", "http://"),
                "is not an https:// URL",
            ),
            (
                KUBECONFIG.replace(", client-key-data: S0VZ", ""),
                "user has neither client-key nor client-key-data",
            ),
            (
                KUBECONFIG.replace("Q0E=", "Q0E"),
                "cluster.certificate-authority-data is not base64",
            ),
            (
                KUBECONFIG.replace("user: u}", "user: v}"),
                "user \"v\" is not defined",
            ),
        ];
        for (text, want) in cases {
            let error = format!("{:#}", read(&text).err().expect(want));
            assert!(
                error.contains(want) && error.contains("kubeconfig"),
                "{want}: {error}"
            );
        }
    }
}
