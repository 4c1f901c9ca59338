//! The Prometheus configuration for a Tessera platform: `prometheus.yml` with scrape jobs
//! for the API server, the in-process components, the kubelets' resource metrics and
//! dcgm-exporter (both through the API server's proxy paths, found by Kubernetes service
//! discovery against the API server), and `rules/gpu-platform.rules.yml`, the alerting rules
//! of a GPU platform.
//!
//! Pure templating: the server address, the interval and the names of the TLS files are
//! inputs; writing the files (and the certificates beside them) is the CLI's job.

use std::fmt::Write as _;

/// The file name of the rules, relative to the configuration's directory.
pub const RULES_FILE: &str = "rules/gpu-platform.rules.yml";

/// What the configuration is made from.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The API server's `host:port` (no scheme).
    pub server: String,
    /// `global.scrape_interval` (`15s`).
    pub scrape_interval: String,
    /// Short intervals and `for:` durations so a demo or a test sees alerts in seconds.
    pub lab: bool,
    /// The CA certificate file, relative to the configuration's directory.
    pub ca_file: String,
    /// The client certificate file.
    pub cert_file: String,
    /// The client key file.
    pub key_file: String,
    /// Static targets for the kubelets and dcgm-exporter instead of Kubernetes service
    /// discovery (`None`): for a Prometheus built without it (Debian's package).
    pub static_targets: Option<StaticTargets>,
}

/// The nodes and dcgm-exporter pods (in `gpu-operator`) scraped through the API server
/// when service discovery is not used.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StaticTargets {
    /// Node names.
    pub nodes: Vec<String>,
    /// dcgm-exporter pod names.
    pub dcgm_pods: Vec<String>,
}

/// The path of a node's kubelet resource metrics through the API server.
pub fn kubelet_resource_path(node: &str) -> String {
    format!("/api/v1/nodes/{node}/proxy/metrics/resource")
}

/// The path of a dcgm-exporter pod's metrics through the API server.
pub fn dcgm_path(pod: &str) -> String {
    format!("/api/v1/namespaces/gpu-operator/pods/{pod}:9400/proxy/metrics")
}

/// A job scraping several paths of the API server, one target per path.
fn static_paths_job(
    out: &mut String,
    settings: &Settings,
    job: &str,
    targets: &[(String, String)],
) {
    let _ = writeln!(out, "  - job_name: {}", quoted(job));
    let _ = writeln!(out, "    scheme: https");
    tls(out, "    ", settings);
    let _ = writeln!(out, "    static_configs:");
    if targets.is_empty() {
        let _ = writeln!(out, "      []");
    }
    for (path, node) in targets {
        let _ = writeln!(out, "      - targets: [{}]", quoted(&settings.server));
        let _ = writeln!(out, "        labels:");
        let _ = writeln!(out, "          __metrics_path__: {}", quoted(path));
        let _ = writeln!(out, "          node: {}", quoted(node));
    }
}

/// A YAML double-quoted scalar (JSON's string syntax is valid YAML).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn tls(out: &mut String, indent: &str, settings: &Settings) {
    let _ = writeln!(out, "{indent}tls_config:");
    let _ = writeln!(out, "{indent}  ca_file: {}", quoted(&settings.ca_file));
    let _ = writeln!(out, "{indent}  cert_file: {}", quoted(&settings.cert_file));
    let _ = writeln!(out, "{indent}  key_file: {}", quoted(&settings.key_file));
}

/// A job scraping one path of the API server's listener.
fn static_job(out: &mut String, settings: &Settings, job: &str, path: &str, honor_labels: bool) {
    let _ = writeln!(out, "  - job_name: {}", quoted(job));
    let _ = writeln!(out, "    scheme: https");
    let _ = writeln!(out, "    metrics_path: {}", quoted(path));
    if honor_labels {
        let _ = writeln!(out, "    honor_labels: true");
    }
    tls(out, "    ", settings);
    let _ = writeln!(out, "    static_configs:");
    let _ = writeln!(out, "      - targets: [{}]", quoted(&settings.server));
}

/// A job whose targets Kubernetes service discovery finds (`role`), scraped through the API
/// server at the path `replacement` builds from the `source_labels`.
#[allow(clippy::too_many_arguments)]
fn discovered_job(
    out: &mut String,
    settings: &Settings,
    job: &str,
    role: &str,
    namespace: Option<&str>,
    keep: Option<(&str, &str)>,
    source_labels: &[&str],
    replacement: &str,
) {
    let _ = writeln!(out, "  - job_name: {}", quoted(job));
    let _ = writeln!(out, "    scheme: https");
    tls(out, "    ", settings);
    let _ = writeln!(out, "    kubernetes_sd_configs:");
    let _ = writeln!(out, "      - role: {role}");
    let _ = writeln!(
        out,
        "        api_server: {}",
        quoted(&format!("https://{}", settings.server))
    );
    if let Some(namespace) = namespace {
        let _ = writeln!(out, "        namespaces:");
        let _ = writeln!(out, "          names: [{}]", quoted(namespace));
    }
    tls(out, "        ", settings);
    let _ = writeln!(out, "    relabel_configs:");
    if let Some((label, regex)) = keep {
        let _ = writeln!(out, "      - source_labels: [{label}]");
        let _ = writeln!(out, "        action: keep");
        let _ = writeln!(out, "        regex: {}", quoted(regex));
    }
    let _ = writeln!(out, "      - target_label: __address__");
    let _ = writeln!(out, "        replacement: {}", quoted(&settings.server));
    let _ = writeln!(out, "      - source_labels: [{}]", source_labels.join(", "));
    let _ = writeln!(out, "        separator: ;");
    let _ = writeln!(out, "        regex: \"(.+)\"");
    let _ = writeln!(out, "        target_label: __metrics_path__");
    let _ = writeln!(out, "        replacement: {}", quoted(replacement));
    let node_label = if role == "node" {
        "__meta_kubernetes_node_name"
    } else {
        "__meta_kubernetes_pod_node_name"
    };
    let _ = writeln!(out, "      - source_labels: [{node_label}]");
    let _ = writeln!(out, "        target_label: node");
    if role == "pod" {
        let _ = writeln!(out, "      - source_labels: [__meta_kubernetes_pod_name]");
        let _ = writeln!(out, "        target_label: exporter_pod");
    }
}

/// `prometheus.yml`.
pub fn prometheus_yml(settings: &Settings) -> String {
    let (scrape, evaluation) = if settings.lab {
        ("2s".to_string(), "2s")
    } else {
        (settings.scrape_interval.clone(), "15s")
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Prometheus configuration for the Tessera platform at https://{}",
        settings.server
    );
    let _ = writeln!(out, "# written by `tessera monitoring prometheus-config`.");
    let _ = writeln!(out, "global:");
    let _ = writeln!(out, "  scrape_interval: {}", quoted(&scrape));
    let _ = writeln!(out, "  evaluation_interval: {}", quoted(evaluation));
    let _ = writeln!(out, "rule_files:");
    let _ = writeln!(out, "  - {}", quoted(RULES_FILE));
    let _ = writeln!(out, "scrape_configs:");
    static_job(
        &mut out,
        settings,
        "kubernetes-apiservers",
        "/metrics",
        false,
    );
    static_job(
        &mut out,
        settings,
        "kube-scheduler",
        "/components/kube-scheduler/metrics",
        false,
    );
    static_job(
        &mut out,
        settings,
        "kube-controller-manager",
        "/components/kube-controller-manager/metrics",
        false,
    );
    static_job(
        &mut out,
        settings,
        "kueue",
        "/components/kueue/metrics",
        false,
    );
    static_job(
        &mut out,
        settings,
        "kube-state-metrics",
        "/components/kube-state-metrics/metrics",
        true,
    );
    if let Some(targets) = &settings.static_targets {
        let nodes: Vec<(String, String)> = targets
            .nodes
            .iter()
            .map(|n| (kubelet_resource_path(n), n.clone()))
            .collect();
        static_paths_job(&mut out, settings, "kubelet-resource", &nodes);
        let pods: Vec<(String, String)> = targets
            .dcgm_pods
            .iter()
            .map(|p| (dcgm_path(p), String::new()))
            .collect();
        static_paths_job(&mut out, settings, "dcgm-exporter", &pods);
        return out;
    }
    discovered_job(
        &mut out,
        settings,
        "kubelet-resource",
        "node",
        None,
        None,
        &["__meta_kubernetes_node_name"],
        "/api/v1/nodes/${1}/proxy/metrics/resource",
    );
    discovered_job(
        &mut out,
        settings,
        "dcgm-exporter",
        "pod",
        Some("gpu-operator"),
        Some(("__meta_kubernetes_pod_container_port_number", "9400")),
        &["__meta_kubernetes_pod_name"],
        "/api/v1/namespaces/gpu-operator/pods/${1}:9400/proxy/metrics",
    );
    out
}

/// One alerting rule.
struct Alert {
    name: &'static str,
    expr: &'static str,
    /// `for:` in production and under `--lab`.
    hold: (&'static str, &'static str),
    severity: &'static str,
    summary: &'static str,
    description: &'static str,
}

const ALERTS: &[Alert] = &[
    Alert {
        name: "GPUXidError",
        expr: "DCGM_FI_DEV_XID_ERRORS > 0",
        hold: ("0s", "0s"),
        severity: "critical",
        summary: "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $value }}",
        description: "dcgm-exporter reports the last XID error of a GPU; see the XID catalogue for the action (79: fallen off the bus, drain and reboot).",
    },
    Alert {
        name: "GPULost",
        expr: "kube_node_status_allocatable{resource=\"nvidia_com_gpu\"} < kube_node_status_capacity{resource=\"nvidia_com_gpu\"}",
        hold: ("5m", "2s"),
        severity: "critical",
        summary: "Node {{ $labels.node }} has fewer allocatable GPUs than its capacity",
        description: "The device plugin marked GPUs unhealthy: allocatable nvidia.com/gpu is {{ $value }}, below capacity.",
    },
    Alert {
        name: "NodeNotReady",
        expr: "kube_node_status_condition{condition=\"Ready\",status=\"true\"} == 0",
        hold: ("2m", "2s"),
        severity: "critical",
        summary: "Node {{ $labels.node }} is not Ready",
        description: "The node's Ready condition has not been True; its pods are evicted once the not-ready toleration runs out.",
    },
    Alert {
        name: "GPUOperatorPodNotReady",
        expr: "kube_pod_status_ready{namespace=\"gpu-operator\",condition=\"true\"} == 0",
        hold: ("5m", "4s"),
        severity: "critical",
        summary: "{{ $labels.pod }} in gpu-operator is not ready",
        description: "A device plugin, DRA driver or other GPU operator component is down: new GPU pods on its node cannot start.",
    },
    Alert {
        name: "PodPendingTooLong",
        expr: "kube_pod_status_phase{phase=\"Pending\"} == 1",
        hold: ("15m", "10s"),
        severity: "warning",
        summary: "Pod {{ $labels.namespace }}/{{ $labels.pod }} has been pending too long",
        description: "Run `tessera diagnose pending` to see why it is not scheduled.",
    },
    Alert {
        name: "KueueQueueStarvation",
        expr: "sum by (cluster_queue) (kueue_pending_workloads) > 0 unless on (cluster_queue) (sum by (cluster_queue) (increase(kueue_admitted_workloads_total[10m])) > 0)",
        hold: ("10m", "10s"),
        severity: "warning",
        summary: "ClusterQueue {{ $labels.cluster_queue }} has pending workloads and admits none",
        description: "{{ $value }} workloads wait and none was admitted in 10 minutes: quota, flavors or admission checks block them.",
    },
    Alert {
        name: "KueueQuotaExhausted",
        expr: "kueue_cluster_queue_resource_usage >= kueue_cluster_queue_nominal_quota and kueue_cluster_queue_nominal_quota > 0",
        hold: ("5m", "2s"),
        severity: "warning",
        summary: "ClusterQueue {{ $labels.cluster_queue }} uses all its {{ $labels.resource }} quota of flavor {{ $labels.flavor }}",
        description: "Usage has reached the nominal quota; further workloads wait or borrow from the cohort.",
    },
];

/// The names of the alerts the rules define.
pub fn alert_names() -> Vec<&'static str> {
    ALERTS.iter().map(|a| a.name).collect()
}

/// `rules/gpu-platform.rules.yml`.
pub fn rules_yml(lab: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Alerting rules for GPU platforms, written by `tessera monitoring prometheus-config`."
    );
    let _ = writeln!(out, "groups:");
    let _ = writeln!(out, "  - name: gpu-platform");
    if lab {
        let _ = writeln!(out, "    interval: 2s");
    }
    let _ = writeln!(out, "    rules:");
    for alert in ALERTS {
        let hold = if lab { alert.hold.1 } else { alert.hold.0 };
        let _ = writeln!(out, "      - alert: {}", alert.name);
        let _ = writeln!(out, "        expr: {}", quoted(alert.expr));
        let _ = writeln!(out, "        for: {hold}");
        let _ = writeln!(out, "        labels:");
        let _ = writeln!(out, "          severity: {}", alert.severity);
        let _ = writeln!(out, "        annotations:");
        let _ = writeln!(out, "          summary: {}", quoted(alert.summary));
        let _ = writeln!(out, "          description: {}", quoted(alert.description));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn settings(lab: bool) -> Settings {
        Settings {
            server: "127.0.0.1:6443".into(),
            scrape_interval: "15s".into(),
            lab,
            ca_file: "ca.crt".into(),
            cert_file: "client.crt".into(),
            key_file: "client.key".into(),
            static_targets: None,
        }
    }

    fn yaml(text: &str) -> Value {
        serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn configuration_has_every_job() {
        let config = yaml(&prometheus_yml(&settings(false)));
        assert_eq!(config["global"]["scrape_interval"], "15s");
        let jobs: Vec<(&str, &str)> = config["scrape_configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                (
                    j["job_name"].as_str().unwrap(),
                    j["metrics_path"].as_str().unwrap_or(""),
                )
            })
            .collect();
        assert_eq!(
            jobs,
            vec![
                ("kubernetes-apiservers", "/metrics"),
                ("kube-scheduler", "/components/kube-scheduler/metrics"),
                (
                    "kube-controller-manager",
                    "/components/kube-controller-manager/metrics"
                ),
                ("kueue", "/components/kueue/metrics"),
                (
                    "kube-state-metrics",
                    "/components/kube-state-metrics/metrics"
                ),
                ("kubelet-resource", ""),
                ("dcgm-exporter", ""),
            ]
        );
        let kubelet = &config["scrape_configs"][5];
        assert_eq!(
            kubelet["kubernetes_sd_configs"][0]["api_server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            kubelet["relabel_configs"][1]["replacement"],
            "/api/v1/nodes/${1}/proxy/metrics/resource"
        );
        let lab = yaml(&prometheus_yml(&settings(true)));
        assert_eq!(lab["global"]["scrape_interval"], "2s");
        let fixed = yaml(&prometheus_yml(&Settings {
            static_targets: Some(StaticTargets {
                nodes: vec!["gpu-1".into()],
                dcgm_pods: vec![],
            }),
            ..settings(true)
        }));
        let kubelet = &fixed["scrape_configs"][5];
        assert_eq!(
            kubelet["static_configs"][0]["labels"]["__metrics_path__"],
            "/api/v1/nodes/gpu-1/proxy/metrics/resource"
        );
        assert_eq!(
            fixed["scrape_configs"][6]["static_configs"],
            Value::Array(vec![])
        );
    }

    #[test]
    fn rules_shorten_under_lab() {
        let rules = yaml(&rules_yml(false));
        let lab = yaml(&rules_yml(true));
        let hold = |rules: &Value, name: &str| {
            rules["groups"][0]["rules"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["alert"] == name)
                .map(|r| r["for"].as_str().unwrap().to_string())
                .unwrap()
        };
        assert_eq!(hold(&rules, "NodeNotReady"), "2m");
        assert_eq!(hold(&lab, "NodeNotReady"), "2s");
        for name in [
            "GPUXidError",
            "GPULost",
            "NodeNotReady",
            "GPUOperatorPodNotReady",
            "PodPendingTooLong",
            "KueueQueueStarvation",
            "KueueQuotaExhausted",
        ] {
            assert!(alert_names().contains(&name), "{name}");
        }
    }

    /// `promtool check config` and `check rules` accept what is written (skipped, saying so,
    /// when promtool is not installed).
    #[test]
    fn promtool_accepts_the_files() {
        let Ok(status) = std::process::Command::new("promtool")
            .arg("--version")
            .output()
        else {
            eprintln!("SKIP promtool_accepts_the_files: promtool not installed");
            return;
        };
        assert!(status.status.success());
        for lab in [false, true] {
            let dir =
                std::env::temp_dir().join(format!("tessera-promtool-{}-{lab}", std::process::id()));
            std::fs::create_dir_all(dir.join("rules")).unwrap();
            for file in ["ca.crt", "client.crt", "client.key"] {
                std::fs::write(dir.join(file), "").unwrap();
            }
            // Debian's Prometheus is built without Kubernetes service discovery: check the
            // static form there, both forms elsewhere.
            let static_form = Settings {
                static_targets: Some(StaticTargets {
                    nodes: vec!["n1".into()],
                    dcgm_pods: vec!["dcgm-exporter-x".into()],
                }),
                ..settings(lab)
            };
            std::fs::write(dir.join("prometheus.yml"), prometheus_yml(&static_form)).unwrap();
            std::fs::write(dir.join(RULES_FILE), rules_yml(lab)).unwrap();
            for args in [
                vec!["check", "config", "--syntax-only"],
                vec!["check", "rules"],
            ] {
                let file = if args[1] == "config" {
                    "prometheus.yml"
                } else {
                    RULES_FILE
                };
                let output = std::process::Command::new("promtool")
                    .args(&args)
                    .arg(dir.join(file))
                    .output()
                    .unwrap();
                assert!(
                    output.status.success(),
                    "promtool {args:?}: {}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
