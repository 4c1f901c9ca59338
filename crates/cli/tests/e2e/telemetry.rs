//! Telemetry of the node twins through the API server, with the bundled kubectl: a pod
//! holding a GPU declares its load; a dcgm-exporter pod answers `:9400/metrics` through the
//! pods and services proxy with that utilisation and the pod's labels; an XID shows up as
//! `DCGM_FI_DEV_XID_ERRORS`; the kubelet's resource metrics come through the node proxy;
//! `kubectl top` (1.27 and 1.33) reads `metrics.k8s.io`.

use std::process::Command;

use crate::support::{Cluster, outcome};

const TOPOLOGY: &str = "apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- {name: h100, count: 1, server: dgx-h100, devices: {exposure: device-plugin}}
- {name: cpu, count: 1, capacity: {cpu: \"16\", memory: 64Gi, pods: \"110\"}}
";

const MANIFEST: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: train
  annotations:
    sim.tessera.dev/duration: 1h
    sim.tessera.dev/gpu-utilization: "85"
    sim.tessera.dev/gpu-memory: 30Gi
    sim.tessera.dev/cpu-usage: 900m
    sim.tessera.dev/memory-usage: 1Gi
spec:
  containers:
  - name: trainer
    image: registry.example/trainer:1.0
    resources:
      limits: {nvidia.com/gpu: 1, cpu: "2", memory: 4Gi}
---
apiVersion: v1
kind: Pod
metadata:
  name: dcgm
  labels: {app: nvidia-dcgm-exporter}
  annotations: {sim.tessera.dev/duration: 1h}
spec:
  nodeSelector: {kubernetes.io/hostname: h100-1}
  containers:
  - name: nvidia-dcgm-exporter
    image: nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04
    ports: [{name: metrics, containerPort: 9400}]
---
apiVersion: v1
kind: Service
metadata:
  name: nvidia-dcgm-exporter
spec:
  selector: {app: nvidia-dcgm-exporter}
  ports: [{name: gpu-metrics, port: 9400, targetPort: 9400}]
"#;

/// The value of the first sample of `name` whose line holds every `labels` pair.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<String> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l[l.rfind('}')? + 1..].split_whitespace().next())
        .map(str::to_string)
}

/// The label `label` of that sample.
fn label(text: &str, name: &str, labels: &[(&str, &str)], label: &str) -> Option<String> {
    let line = text
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })?;
    let start = line.find(&format!("{label}=\""))? + label.len() + 2;
    let rest = &line[start..];
    Some(rest[..rest.find('"')?].to_string())
}

#[test]
fn dcgm_resource_metrics_and_kubectl_top() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], MANIFEST);
    assert_eq!(cluster.node_when_running("1.33", None, "train"), "h100-1");
    cluster.node_when_running("1.33", None, "dcgm");

    // dcgm-exporter through the pods proxy: the pod's utilisation and labels.
    let by_pod = "/api/v1/namespaces/default/pods/dcgm:9400/proxy/metrics";
    let text = cluster.ok("1.33", &["get", "--raw", by_pod]);
    let train = [
        ("container", "trainer"),
        ("namespace", "default"),
        ("pod", "train"),
    ];
    assert_eq!(
        sample(&text, "DCGM_FI_DEV_GPU_UTIL", &train).as_deref(),
        Some("85"),
        "{text}"
    );
    assert_eq!(
        sample(&text, "DCGM_FI_DEV_FB_USED", &train).as_deref(),
        Some("30720")
    );
    assert!(
        text.contains("# TYPE DCGM_FI_DEV_XID_ERRORS gauge"),
        "{text}"
    );
    let gpu = label(&text, "DCGM_FI_DEV_GPU_UTIL", &train, "gpu").expect("the pod's GPU");
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{"))
            .count(),
        8
    );

    // The same through the Service (by port name), and a named pod port.
    let by_service =
        "/api/v1/namespaces/default/services/nvidia-dcgm-exporter:gpu-metrics/proxy/metrics";
    let through_service = cluster.wait_for("1.33", &["get", "--raw", by_service], |out| {
        out.contains("DCGM_FI_DEV_GPU_UTIL{")
    });
    assert_eq!(
        sample(&through_service, "DCGM_FI_DEV_GPU_UTIL", &train).as_deref(),
        Some("85")
    );
    let named = cluster.ok(
        "1.33",
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/dcgm:metrics/proxy/metrics",
        ],
    );
    assert!(named.contains("DCGM_FI_DEV_SM_CLOCK{"), "{named}");

    // An XID on another GPU: the gauge shows it there.
    let other = ((gpu.parse::<usize>().expect("index") + 1) % 8).to_string();
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let (ok, _, err) = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args([
                "fault",
                "xid",
                "h100-1",
                "--gpu",
                &other,
                "--xid",
                "48",
                "--kubeconfig",
                &kubeconfig,
            ])
            .output()
            .expect("tessera fault"),
    );
    assert!(ok, "{err}");
    let faulted = cluster.wait_for("1.33", &["get", "--raw", by_pod], |out| {
        sample(out, "DCGM_FI_DEV_XID_ERRORS", &[("gpu", &other)]).as_deref() == Some("48")
    });
    assert_eq!(
        sample(&faulted, "DCGM_FI_DEV_XID_ERRORS", &[("gpu", &gpu)]).as_deref(),
        Some("0")
    );

    // The kubelet's resource metrics through the node proxy.
    let resource = cluster.ok(
        "1.33",
        &[
            "get",
            "--raw",
            "/api/v1/nodes/h100-1/proxy/metrics/resource",
        ],
    );
    assert!(
        resource.contains("# TYPE container_cpu_usage_seconds_total counter"),
        "{resource}"
    );
    assert_eq!(
        sample(&resource, "container_memory_working_set_bytes", &train).as_deref(),
        Some("1073741824"),
        "{resource}"
    );
    assert!(
        resource
            .lines()
            .any(|l| l.starts_with("node_cpu_usage_seconds_total ")),
        "{resource}"
    );
    assert!(
        resource.lines().any(|l| l == "scrape_error 0"),
        "{resource}"
    );

    // Unknown objects and ports answer as kube-apiserver does.
    let missing = cluster.fails(
        "1.33",
        &["get", "--raw", "/api/v1/nodes/nope/proxy/metrics/resource"],
        None,
    );
    assert!(missing.contains("nodes \"nope\" not found"), "{missing}");
    let refused = cluster.fails(
        "1.33",
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/default/pods/train:8080/proxy/",
        ],
        None,
    );
    assert!(
        refused.contains("connection refused") || refused.contains("ServiceUnavailable"),
        "{refused}"
    );

    // metrics-server's reader role reaches `view` by aggregation; proxying stays privileged.
    cluster.ok(
        "1.33",
        &[
            "create",
            "rolebinding",
            "jane-views",
            "--clusterrole=view",
            "--user=jane",
        ],
    );
    cluster.wait_for(
        "1.33",
        &["auth", "can-i", "list", "pods.metrics.k8s.io", "--as=jane"],
        |out| out.trim() == "yes",
    );
    let top = cluster.ok("1.33", &["top", "pods", "--as=jane"]);
    assert!(top.contains("train"), "{top}");
    // Discovery lists the proxy subresources, so kubectl asks about the subresource itself.
    let can = cluster.kubectl(
        "1.33",
        &[
            "auth",
            "can-i",
            "get",
            "pods",
            "--subresource=proxy",
            "--as=jane",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&can.stdout).trim(), "no");
    let forbidden = cluster.fails("1.33", &["get", "--raw", by_pod, "--as=jane"], None);
    assert!(
        forbidden.contains("cannot get resource \"pods/proxy\""),
        "{forbidden}"
    );

    // kubectl top through metrics.k8s.io, old and new kubectl.
    for version in ["1.27", "1.33"] {
        let pods = cluster.ok(version, &["top", "pods"]);
        let line = pods
            .lines()
            .find(|l| l.starts_with("train "))
            .unwrap_or_else(|| panic!("{pods}"));
        assert!(
            line.contains("900m") && line.contains("1024Mi"),
            "{version}: {line}"
        );
        let containers = cluster.ok(version, &["top", "pods", "-A", "--containers"]);
        assert!(
            containers
                .lines()
                .any(|l| l.contains("train") && l.contains("trainer") && l.contains("900m")),
            "{version}: {containers}"
        );
        let nodes = cluster.ok(version, &["top", "nodes"]);
        assert!(
            nodes.lines().any(|l| l.starts_with("h100-1 ")),
            "{version}: {nodes}"
        );
        assert!(
            nodes.lines().any(|l| l.starts_with("cpu-1 ")),
            "{version}: {nodes}"
        );
    }
}

#[test]
fn gpu_operator_components_run_on_the_gpu_nodes() {
    let cluster = Cluster::start_with_args(&["--gpu-operator"]);
    let namespace = cluster.ok(
        "1.33",
        &[
            "get",
            "namespace",
            "gpu-operator",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(
        namespace.contains(r#""pod-security.kubernetes.io/enforce":"privileged""#),
        "{namespace}"
    );
    let daemon_sets = cluster.ok(
        "1.33",
        &["get", "daemonsets", "-n", "gpu-operator", "-o", "name"],
    );
    for name in [
        "nvidia-driver-daemonset",
        "nvidia-device-plugin-daemonset",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        "nvidia-dcgm-exporter",
        "nvidia-operator-validator",
    ] {
        assert!(
            daemon_sets.contains(&format!("daemonset.apps/{name}")),
            "{daemon_sets}"
        );
    }
    // The lab's h100 nodes offer DRA: the DRA driver's kubelet plugin runs there, not the
    // device plugin; dcgm-exporter runs on every NVIDIA GPU node.
    let on = |app: &str| {
        cluster.wait_for(
            "1.33",
            &[
                "get",
                "pods",
                "-n",
                "gpu-operator",
                "-l",
                &format!("app={app}"),
                "-o",
                "jsonpath={range .items[*]}{.spec.nodeName}={.status.phase} {end}",
            ],
            |out| !out.is_empty() && out.split_whitespace().all(|p| p.ends_with("=Running")),
        )
    };
    let dcgm = on("nvidia-dcgm-exporter");
    assert!(
        dcgm.contains("h100-1=Running") && !dcgm.contains("cpu-1"),
        "{dcgm}"
    );
    let dra = on("nvidia-dra-driver-gpu-kubelet-plugin");
    assert!(dra.contains("h100-1=Running"), "{dra}");
    let pod = cluster.ok(
        "1.33",
        &[
            "get",
            "pods",
            "-n",
            "gpu-operator",
            "-l",
            "app=nvidia-dcgm-exporter",
            "--field-selector",
            "spec.nodeName=h100-1",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
    );
    let text = cluster.ok(
        "1.33",
        &[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/gpu-operator/pods/{pod}:9400/proxy/metrics"),
        ],
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("DCGM_FI_DEV_GPU_UTIL{") && l.contains(r#"Hostname="h100-1""#)),
        "{text}"
    );
    let through_service = cluster.wait_for(
        "1.33",
        &["get", "--raw", "/api/v1/namespaces/gpu-operator/services/nvidia-dcgm-exporter:gpu-metrics/proxy/metrics"],
        |out| out.contains("# TYPE DCGM_FI_DEV_FB_USED gauge"),
    );
    assert!(
        through_service.contains("DCGM_FI_DEV_XID_ERRORS{"),
        "{through_service}"
    );
}
