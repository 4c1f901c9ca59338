//! The horizontal pod autoscaler on `tessera up`, driven with kubectl 1.27 and 1.33:
//! `kubectl autoscale` makes an autoscaler the controller reconciles on a shortened sync
//! period — it reads the Deployment's scale and reports its replicas and conditions, and
//! `kubectl get hpa` prints them. Until the platform serves `metrics.k8s.io` the resource
//! metric cannot be read, which the autoscaler says as upstream's does; the scaling itself is
//! tested against a stand-in metrics API in the binary's `hpa_tests`.

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
