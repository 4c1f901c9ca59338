//! HorizontalPodAutoscalers with kubectl: `kubectl autoscale` creates one, `kubectl get hpa`
//! prints upstream's columns, and the object reads back in `autoscaling/v2` (stored) and
//! `autoscaling/v1` (converted, with v2-only fields in annotations). The controller's part is
//! in `hpa.rs`.

use crate::support::{Cluster, table_rows};

const V: &str = "1.33";

/// The columns of `kubectl get hpa`, as upstream's table printer names them.
pub const HPA_COLUMNS: [&str; 7] = [
    "NAME",
    "REFERENCE",
    "TARGETS",
    "MINPODS",
    "MAXPODS",
    "REPLICAS",
    "AGE",
];

#[test]
fn kubectl_autoscale_creates_an_hpa_served_in_v1_and_v2() {
    let cluster = Cluster::start();
    cluster.ok(V, &["create", "deployment", "web", "--image=nginx:1.27"]);
    cluster.ok(
        V,
        &[
            "autoscale",
            "deployment",
            "web",
            "--min=1",
            "--max=3",
            "--cpu-percent=80",
        ],
    );
    let table = cluster.ok(V, &["get", "hpa"]);
    let rows = table_rows(&table);
    let (header, row) = (&rows[0], &rows[1]);
    assert_eq!(header[..], HPA_COLUMNS);
    assert_eq!(
        row[..6],
        ["web", "Deployment/web", "cpu:", "<unknown>/80%", "1", "3"],
        "{table}"
    );
    // REPLICAS: 0 until the autoscaler's first pass has read the Deployment's scale.
    assert!(["0", "1"].contains(&row[6]), "{table}");

    let v2 = cluster.ok(
        V,
        &[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "web",
            "-o",
            "jsonpath={.apiVersion} {.spec.metrics[0].resource.name} {.spec.metrics[0].resource.target.averageUtilization} {.spec.minReplicas}",
        ],
    );
    assert_eq!(v2, "autoscaling/v2 cpu 80 1");
    let v1 = cluster.ok(
        V,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "jsonpath={.apiVersion} {.spec.targetCPUUtilizationPercentage} {.spec.maxReplicas}",
        ],
    );
    assert_eq!(v1, "autoscaling/v1 80 3");

    // A v2-only metric applied in v2 rides through v1 in the metrics annotation, and back.
    let memory = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: mem}\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 4\n  metrics:\n  - type: Resource\n    resource: {name: memory, target: {type: AverageValue, averageValue: 1Gi}}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], memory);
    let annotation = cluster.ok(
        V,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "mem",
            "-o",
            r#"jsonpath={.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/metrics}"#,
        ],
    );
    assert_eq!(
        annotation,
        r#"[{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]"#
    );
    let v1_object = cluster.ok(
        V,
        &[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "mem",
            "-o",
            "json",
        ],
    );
    let mut v1_object: serde_json::Value = serde_json::from_str(&v1_object).unwrap();
    v1_object["spec"]["maxReplicas"] = serde_json::json!(5);
    cluster.ok_stdin(V, &["replace", "-f", "-"], &v1_object.to_string());
    let back = cluster.ok(
        V,
        &[
            "get",
            "horizontalpodautoscalers.v2.autoscaling",
            "mem",
            "-o",
            r#"jsonpath={.spec.maxReplicas} {.spec.metrics[*].resource.name} [{.metadata.annotations.autoscaling\.alpha\.kubernetes\.io/metrics}]"#,
        ],
    );
    // Stored in v2, the metric is a metric again, not an annotation.
    assert_eq!(back, "5 memory []", "the v1 update kept the memory metric");

    // Validation: maxReplicas below minReplicas is refused with upstream's message.
    let refused = cluster.fails(
        V,
        &["apply", "-f", "-"],
        Some("apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: bad}\nspec:\n  scaleTargetRef: {kind: Deployment, name: web}\n  minReplicas: 4\n  maxReplicas: 2\n"),
    );
    assert!(
        refused.contains(
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
        ),
        "{refused}"
    );
}
