//! The horizontal pod autoscaler on `tessera up`, driven with kubectl 1.27 and 1.33:
//! `kubectl autoscale` makes an autoscaler the controller reconciles on a shortened sync
//! period — it reads the Deployment's scale and reports its replicas and conditions, and
//! `kubectl get hpa` prints them. A Deployment without CPU requests has no utilisation to read,
//! which the autoscaler says as upstream's does. One whose pods declare their simulated CPU
//! load is scaled up through the platform's own `metrics.k8s.io` and back down when the load
//! drops (the binary's `hpa_tests` also drive the shell against a stand-in metrics API).

use crate::autoscaling::HPA_COLUMNS;
use crate::support::{Cluster, table_rows};

#[test]
fn autoscale_makes_an_hpa_the_controller_reconciles() {
    let cluster = Cluster::start_with_args(&["--horizontal-pod-autoscaler-sync-period=1s"]);
    cluster.ok(
        "1.33",
        &["create", "deployment", "web", "--image=nginx:1.27"],
    );
    cluster.ok(
        "1.27",
        &[
            "autoscale",
            "deployment",
            "web",
            "--cpu-percent=50",
            "--min=1",
            "--max=5",
        ],
    );
    let status = cluster.wait_for(
        "1.33",
        &[
            "get",
            "hpa",
            "web",
            "-o",
            r#"jsonpath={.status.currentReplicas} {.status.conditions[?(@.type=="AbleToScale")].reason} {.status.conditions[?(@.type=="ScalingActive")].status}"#,
        ],
        |out| out == "1 SucceededGetScale False",
    );
    assert_eq!(status, "1 SucceededGetScale False");
    let reasons = cluster.wait_for(
        "1.33",
        &["get", "events", "-o", "jsonpath={.items[*].reason}"],
        |out| {
            out.contains("FailedGetResourceMetric") && out.contains("FailedComputeMetricsReplicas")
        },
    );
    assert!(reasons.contains("FailedGetResourceMetric"), "{reasons}");
    let described = cluster.ok("1.27", &["describe", "hpa", "web"]);
    for line in [
        "AbleToScale",
        "SucceededGetScale",
        "ScalingActive",
        "FailedGetResourceMetric",
        "the HPA was unable to compute the replica count",
    ] {
        assert!(described.contains(line), "{line}:\n{described}");
    }
    for version in ["1.27", "1.33"] {
        let table = cluster.ok(version, &["get", "hpa"]);
        let rows = table_rows(&table);
        let (header, row) = (&rows[0], &rows[1]);
        assert_eq!(header[..], HPA_COLUMNS, "{version}");
        assert_eq!(
            row[..7],
            [
                "web",
                "Deployment/web",
                "cpu:",
                "<unknown>/50%",
                "1",
                "5",
                "1"
            ],
            "{version}: {table}"
        );
    }
}

const BUSY: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: busy}
spec:
  replicas: 1
  selector: {matchLabels: {app: busy}}
  template:
    metadata:
      labels: {app: busy}
      annotations: {sim.tessera.dev/cpu-usage: 180m}
    spec:
      containers:
      - {name: main, image: busy:1, resources: {requests: {cpu: 200m}}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: busy}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: busy}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
"#;

#[test]
fn pods_above_their_cpu_target_scale_up_through_metrics_k8s_io_and_back_down() {
    let cluster = Cluster::start_with_args(&["--horizontal-pod-autoscaler-sync-period=1s"]);
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], BUSY);
    // 180m of a 200m request is 90 %: 1 → 2 → 4 replicas (the maximum).
    let scaled = cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "hpa",
            "busy",
            "-o",
            "jsonpath={.status.desiredReplicas} {.status.currentMetrics[0].resource.current.averageUtilization}",
        ],
        std::time::Duration::from_secs(60),
        |out| out == "4 90",
    );
    assert_eq!(scaled, "4 90");
    cluster.wait_for(
        "1.33",
        &[
            "get",
            "deployment",
            "busy",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "4",
    );
    let reasons = cluster.ok(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "reason=SuccessfulRescale",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    assert!(
        reasons.contains(
            "New size: 2; reason: cpu resource utilization (percentage of request) above target"
        ),
        "{reasons}"
    );
    let table = cluster.ok("1.27", &["get", "hpa", "busy"]);
    let rows = table_rows(&table);
    assert_eq!(rows[1][2..4], ["cpu:", "90%/50%"], "{table}");
    let top = cluster.ok("1.33", &["top", "pods", "-l", "app=busy", "--no-headers"]);
    assert_eq!(top.lines().count(), 4, "{top}");
    assert!(
        top.lines()
            .all(|l| l.split_whitespace().nth(1) == Some("180m")),
        "{top}"
    );

    // The load drops to 20m (10 %): with no stabilization window it comes down to one replica.
    cluster.ok(
        "1.33",
        &[
            "patch",
            "deployment",
            "busy",
            "-p",
            r#"{"spec":{"template":{"metadata":{"annotations":{"sim.tessera.dev/cpu-usage":"20m"}}}}}"#,
        ],
    );
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "hpa",
            "busy",
            "-o",
            "jsonpath={.status.desiredReplicas}",
        ],
        std::time::Duration::from_secs(90),
        |out| out == "1",
    );
}
