//! Metrics as Prometheus sees them: `kubectl get --raw /metrics` (bundled 1.33 and 1.27)
//! shows `apiserver_request_total` with the verbs just issued (LIST, POST, APPLY, GET) and
//! made-up routes without their path; the
//! component endpoints show the scheduler's attempts after a pod, kube-controller-manager's
//! work queues and finished Jobs after a Job completes, Kueue's counters and
//! gauges after a Kueue Job, kube-state-metrics' series for the objects; a user without
//! rights gets 403 and a member of `system:monitoring` may read them. Then a real Prometheus
//! (Debian's `prometheus`; the test says it skips when the binary is absent) scrapes the
//! platform with the configuration `tessera monitoring prometheus-config --lab` writes, and
//! NodeNotReady fires through its API after `tessera fault node … --state not-ready`.
//!
//! The GPU XID alert needs dcgm-exporter's series (another part of issue 20); it is not
//! exercised here yet.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::rbac::{kubeconfig_for, kubectl_as};
use crate::support::{Cluster, outcome};

const SETUP: &str = include_str!("../fixtures/upstream/kueue/quick-start-setup.yaml");
const SAMPLE_JOB: &str = include_str!("../fixtures/upstream/kueue/sample-job.yaml");

const QUICK_JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: quick}\nspec:\n  template:\n    metadata:\n      annotations: {sim.tessera.dev/duration: 1s}\n    spec:\n      restartPolicy: Never\n      containers: [{name: work, image: worker:1, resources: {requests: {cpu: 100m}}}]\n";

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: metered\n  annotations: {sim.tessera.dev/duration: 1h}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {requests: {cpu: 100m}}\n";

/// The sample lines of a family whose labels include every `label="value"` given.
fn series<'a>(text: &'a str, family: &str, labels: &[&str]) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .collect()
}

fn has(text: &str, family: &str, labels: &[&str]) -> bool {
    !series(text, family, labels).is_empty()
}

#[test]
fn metrics_endpoints_show_requests_components_and_objects_under_rbac() {
    let cluster = Cluster::start();
    cluster.ok_stdin("1.33", &["create", "-f", "-"], POD);
    cluster.ok("1.33", &["get", "pods"]);
    cluster.ok("1.33", &["get", "pod", "metered"]);
    cluster.ok_stdin(
        "1.33",
        &["apply", "--server-side", "--field-manager=e2e", "-f", "-"],
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata: {a: b}\n",
    );
    // A missing object keeps its labels; a made-up route is counted without its path.
    cluster.fails("1.33", &["get", "pod", "absent"], None);
    cluster.fails(
        "1.33",
        &["get", "--raw", "/apis/made-up.example/v1/things"],
        None,
    );
    for version in ["1.33", "1.27"] {
        let text = cluster.ok(version, &["get", "--raw", "/metrics"]);
        assert!(!text.contains("made-up"), "a made-up route made a series");
        assert!(has(
            &text,
            "apiserver_request_total",
            &["code=\"404\"", "resource=\"pods\"", "verb=\"GET\""]
        ));
        assert!(has(
            &text,
            "apiserver_request_total",
            &[
                "code=\"404\"",
                "resource=\"\"",
                "subresource=\"\"",
                "verb=\"GET\""
            ]
        ));
        for (verb, resource, scope) in [
            ("POST", "pods", "namespace"),
            ("LIST", "pods", "namespace"),
            ("GET", "pods", "namespace"),
            ("APPLY", "configmaps", "namespace"),
            ("LIST", "nodes", "cluster"),
        ] {
            let labels = [
                &format!("verb=\"{verb}\"") as &str,
                &format!("resource=\"{resource}\""),
                &format!("scope=\"{scope}\""),
                "component=\"apiserver\"",
                "version=\"v1\"",
            ];
            assert!(
                has(&text, "apiserver_request_total", &labels),
                "kubectl {version}: no apiserver_request_total {labels:?} in\n{}",
                series(&text, "apiserver_request_total", &[]).join("\n")
            );
        }
        assert!(has(
            &text,
            "apiserver_request_duration_seconds_bucket",
            &["verb=\"LIST\"", "le=\"+Inf\""]
        ));
        assert!(has(
            &text,
            "apiserver_current_inflight_requests",
            &["request_kind=\"mutating\""]
        ));
        assert!(has(
            &text,
            "apiserver_storage_objects",
            &["resource=\"pods\""]
        ));
        assert!(has(
            &text,
            "apiserver_storage_objects",
            &["resource=\"clusterqueues.kueue.x-k8s.io\""]
        ));
    }

    // The scheduler placed the pod.
    cluster.node_when_running("1.33", None, "metered");
    cluster.wait_for(
        "1.33",
        &["get", "--raw", "/components/kube-scheduler/metrics"],
        |text| {
            has(
                text,
                "scheduler_schedule_attempts_total",
                &["result=\"scheduled\"", "profile=\"default-scheduler\""],
            ) && has(text, "scheduler_pending_pods", &["queue=\"active\""])
        },
    );

    // kube-controller-manager: a Job runs to completion; the Job controller's queue counted
    // its reconciliations and its finish was counted as a success.
    cluster.ok_stdin("1.33", &["create", "-f", "-"], QUICK_JOB);
    cluster.ok(
        "1.33",
        &[
            "wait",
            "--for=condition=complete",
            "job/quick",
            "--timeout=30s",
        ],
    );
    let kcm = cluster.wait_for(
        "1.33",
        &[
            "get",
            "--raw",
            "/components/kube-controller-manager/metrics",
        ],
        |text| {
            has(
                text,
                "job_controller_jobs_finished_total",
                &[
                    "completion_mode=\"NonIndexed\"",
                    "result=\"succeeded\"",
                    "reason=\"\"",
                ],
            )
        },
    );
    let value = |family: &str, labels: &[&str]| -> f64 {
        let lines = series(&kcm, family, labels);
        assert_eq!(lines.len(), 1, "one {family} {labels:?} in\n{kcm}");
        lines[0]
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a value in {}", lines[0]))
    };
    assert!(
        value("workqueue_adds_total", &["name=\"job\""]) > 0.0,
        "{kcm}"
    );
    assert!(value("workqueue_work_duration_seconds_count", &["name=\"job\""]) > 0.0);
    assert_eq!(
        value(
            "job_controller_jobs_finished_total",
            &["completion_mode=\"NonIndexed\"", "result=\"succeeded\""]
        ),
        1.0
    );
    // The pass-running controllers record their passes too.
    for queue in ["endpoint_slice", "disruption", "node_lifecycle_controller"] {
        let name = format!("name=\"{queue}\"");
        assert!(
            value("workqueue_adds_total", &[&name]) > 0.0,
            "{queue}: {kcm}"
        );
        assert!(value("workqueue_queue_duration_seconds_count", &[&name]) > 0.0);
    }
    assert!(kcm.contains(
        "# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue\n"
    ));
    let nodes: f64 = series(&kcm, "node_collector_zone_size", &[])
        .iter()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(nodes > 0.0, "the nodes' zones: {kcm}");
    // The Job's pods are its dependents: deleting it queues them for the garbage collector.
    cluster.ok("1.33", &["delete", "job", "quick"]);
    cluster.wait_for(
        "1.33",
        &[
            "get",
            "--raw",
            "/components/kube-controller-manager/metrics",
        ],
        |text| {
            series(
                text,
                "workqueue_work_duration_seconds_count",
                &["name=\"garbage_collector_attempt_to_delete\""],
            )
            .iter()
            .any(|l| !l.ends_with(" 0"))
        },
    );

    // Kueue: the quick start's setup and sample Job.
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], SETUP);
    cluster.ok_stdin("1.33", &["create", "-f", "-"], SAMPLE_JOB);
    let kueue = cluster.wait_for(
        "1.33",
        &["get", "--raw", "/components/kueue/metrics"],
        |text| {
            has(
                text,
                "kueue_admitted_workloads_total",
                &["cluster_queue=\"cluster-queue\""],
            )
        },
    );
    for (family, labels) in [
        ("kueue_admission_attempts_total", vec!["result=\"success\""]),
        (
            "kueue_admission_wait_time_seconds_count",
            vec!["cluster_queue=\"cluster-queue\""],
        ),
        (
            "kueue_pending_workloads",
            vec!["cluster_queue=\"cluster-queue\"", "status=\"active\""],
        ),
        (
            "kueue_cluster_queue_status",
            vec!["cluster_queue=\"cluster-queue\"", "status=\"active\""],
        ),
        (
            "kueue_cluster_queue_nominal_quota",
            vec![
                "cluster_queue=\"cluster-queue\"",
                "flavor=\"default-flavor\"",
                "resource=\"cpu\"",
            ],
        ),
        (
            "kueue_local_queue_status",
            vec!["name=\"user-queue\"", "namespace=\"default\""],
        ),
    ] {
        assert!(
            has(&kueue, family, &labels),
            "no {family} {labels:?} in\n{kueue}"
        );
    }
    assert!(kueue.contains(
        "kueue_cluster_queue_nominal_quota{cluster_queue=\"cluster-queue\",cohort=\"\",flavor=\"default-flavor\",resource=\"cpu\"} 9"
    ));

    // kube-state-metrics over the store.
    let ksm = cluster.ok(
        "1.33",
        &["get", "--raw", "/components/kube-state-metrics/metrics"],
    );
    let running = series(
        &ksm,
        "kube_pod_status_phase",
        &["phase=\"Running\"", "pod=\"metered\""],
    );
    assert!(
        running.len() == 1 && running[0].ends_with(" 1"),
        "{running:?}"
    );
    assert!(has(
        &ksm,
        "kube_pod_container_resource_requests",
        &["pod=\"metered\"", "resource=\"cpu\"", "unit=\"core\""]
    ));
    assert!(has(
        &ksm,
        "kube_node_status_condition",
        &["node=\"cpu-1\"", "condition=\"Ready\"", "status=\"true\""]
    ));
    assert!(has(
        &ksm,
        "kube_node_status_capacity",
        &["resource=\"nvidia_com_gpu\"", "unit=\"integer\""]
    ));
    assert!(has(
        &ksm,
        "kube_job_status_active",
        &["namespace=\"default\""]
    ));
    assert!(has(
        &ksm,
        "kube_namespace_status_phase",
        &["namespace=\"kube-system\"", "phase=\"Active\""]
    ));

    // RBAC: nothing without a grant; system:monitoring reads them all.
    let alice = kubeconfig_for(&cluster, "alice", &["dev"]);
    for path in [
        "/metrics",
        "/components/kueue/metrics",
        "/components/kube-state-metrics/metrics",
    ] {
        let (ok, _, stderr) = kubectl_as(&cluster, &alice, &["get", "--raw", path]);
        assert!(!ok && stderr.contains("Forbidden"), "{path}: {stderr}");
        assert!(
            stderr.contains(&format!("User \"alice\" cannot get path \"{path}\"")),
            "{stderr}"
        );
    }
    let monitor = kubeconfig_for(&cluster, "prometheus", &["system:monitoring"]);
    for path in [
        "/metrics",
        "/components/kube-scheduler/metrics",
        "/components/kube-controller-manager/metrics",
        "/components/kueue/metrics",
        "/components/kube-state-metrics/metrics",
    ] {
        let (ok, stdout, stderr) = kubectl_as(&cluster, &monitor, &["get", "--raw", path]);
        assert!(ok && stdout.contains("# TYPE"), "{path}: {stderr}");
    }
    let (ok, _, stderr) = kubectl_as(&cluster, &monitor, &["get", "pods"]);
    assert!(!ok && stderr.contains("Forbidden"), "{stderr}");
}

/// A child process killed when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on a plain-HTTP server; the body.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

fn poll(what: &str, within: Duration, mut check: impl FnMut() -> Option<String>) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn prometheus_scrapes_the_platform_and_fires_node_not_ready_and_xid() {
    if Command::new("prometheus")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!(
            "SKIP prometheus_scrapes_the_platform_and_fires_node_not_ready_and_xid: no `prometheus` binary (apt-get install -y prometheus)"
        );
        return;
    }
    // The GPU operator's components run, so dcgm-exporter pods are there to be scraped (the
    // static configuration lists the pods it finds when written).
    let cluster = Cluster::start_with_args(&["--gpu-operator"]);
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "pods",
            "-n",
            "gpu-operator",
            "-l",
            "app=nvidia-dcgm-exporter",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        Duration::from_secs(60),
        |out| out.split_whitespace().count() == 5 && out.split_whitespace().all(|p| p == "Running"),
    );
    let out = cluster.dir.path().join("prometheus");
    let kubeconfig = cluster.kubeconfig();
    let (ok, stdout, stderr) = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "monitoring",
                "prometheus-config",
                "--lab",
                "--discovery",
                "static",
                "--out",
            ])
            .arg(&out)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .output()
            .expect("tessera monitoring"),
    );
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("prometheus.yml"), "{stdout}");
    for file in [
        "prometheus.yml",
        "rules/gpu-platform.rules.yml",
        "ca.crt",
        "client.crt",
        "client.key",
    ] {
        assert!(out.join(file).is_file(), "{file} not written");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let log = std::fs::File::create(cluster.dir.path().join("prometheus.log")).expect("log");
    let _prometheus = Killed(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                out.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                out.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus"),
    );
    let prometheus_log =
        || std::fs::read_to_string(cluster.dir.path().join("prometheus.log")).unwrap_or_default();
    // Every job served on the API listener is scraped and up.
    let jobs = [
        "kubernetes-apiservers",
        "kube-scheduler",
        "kube-controller-manager",
        "kueue",
        "kube-state-metrics",
        "kubelet-resource",
        "dcgm-exporter",
    ];
    poll(
        "the platform's targets to be up",
        Duration::from_secs(60),
        || {
            let body = http_get(port, "/api/v1/targets")?;
            let targets: serde_json::Value = serde_json::from_str(&body).ok()?;
            let active = targets.pointer("/data/activeTargets")?.as_array()?;
            jobs.iter()
                .all(|job| {
                    active.iter().any(|t| {
                        t.pointer("/labels/job").and_then(|j| j.as_str()) == Some(job)
                            && t.get("health").and_then(|h| h.as_str()) == Some("up")
                    })
                })
                .then_some(body)
        },
    );
    let (ok, stdout, stderr) = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "fault",
                "node",
                "cpu-2",
                "--state",
                "not-ready",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .output()
            .expect("tessera fault"),
    );
    assert!(ok, "{stdout}{stderr}");
    let alerts = firing(port, "NodeNotReady", &[("node", "cpu-2")]);
    let alerts: serde_json::Value = serde_json::from_str(&alerts).expect("alerts JSON");
    let not_ready: Vec<&str> = alerts["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == "NodeNotReady")
        .filter_map(|a| a["labels"]["node"].as_str())
        .collect();
    assert_eq!(not_ready, vec!["cpu-2"], "{alerts}\n{}", prometheus_log());

    // A GPU reports a double-bit ECC error: dcgm-exporter's DCGM_FI_DEV_XID_ERRORS carries it,
    // and GPUXidError fires for that GPU of that node.
    let (ok, stdout, stderr) = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "fault",
                "xid",
                "h100-1",
                "--gpu",
                "2",
                "--xid",
                "48",
                "--kubeconfig",
            ])
            .arg(&kubeconfig)
            .output()
            .expect("tessera fault"),
    );
    assert!(ok, "{stdout}{stderr}");
    let alerts = firing(port, "GPUXidError", &[("Hostname", "h100-1"), ("gpu", "2")]);
    let alerts: serde_json::Value = serde_json::from_str(&alerts).expect("alerts JSON");
    let xids: Vec<(String, f64)> = alerts["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["labels"]["alertname"] == "GPUXidError")
        .map(|a| {
            (
                format!(
                    "{}/{}",
                    a["labels"]["Hostname"].as_str().unwrap_or_default(),
                    a["labels"]["gpu"].as_str().unwrap_or_default()
                ),
                a["value"]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        xids,
        vec![("h100-1/2".to_string(), 48.0)],
        "{alerts}\n{}",
        prometheus_log()
    );
}

/// Polls Prometheus's `/api/v1/alerts` until `alert` fires with `labels`; the whole answer.
fn firing(port: u16, alert: &str, labels: &[(&str, &str)]) -> String {
    poll(&format!("{alert} to fire"), Duration::from_secs(60), || {
        let body = http_get(port, "/api/v1/alerts")?;
        let alerts: serde_json::Value = serde_json::from_str(&body).ok()?;
        alerts
            .pointer("/data/alerts")?
            .as_array()?
            .iter()
            .any(|a| {
                a.pointer("/labels/alertname").and_then(|n| n.as_str()) == Some(alert)
                    && labels.iter().all(|(key, value)| {
                        a.pointer(&format!("/labels/{key}"))
                            .and_then(|n| n.as_str())
                            == Some(*value)
                    })
                    && a.get("state").and_then(|s| s.as_str()) == Some("firing")
            })
            .then_some(body)
    })
}
