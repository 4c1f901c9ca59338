//! `metrics.k8s.io/v1beta1` as metrics-server serves it: NodeMetrics and PodMetrics
//! (`timestamp`, `window`, `usage` with CPU in nanocores `…n` and memory in `…Ki`), their
//! lists, and the group's constants. Renders [`crate::usage`]'s numbers; knows nothing of
//! the API server that serves them.

use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::time::timestamp;

use crate::usage::{NodeUsage, PodUsage};

/// The group.
pub const GROUP: &str = "metrics.k8s.io";
/// The served version.
pub const VERSION: &str = "v1beta1";
/// The window the usage is averaged over, as metrics-server reports it.
pub const WINDOW: &str = "10s";

fn usage(cpu_nanocores: u64, memory_bytes: u64) -> Value {
    json!({
        "cpu": format!("{cpu_nanocores}n"),
        "memory": format!("{}Ki", memory_bytes / 1024),
    })
}

fn metadata(
    name: &str,
    namespace: Option<&str>,
    labels: &std::collections::BTreeMap<String, String>,
    now: SystemTime,
) -> Value {
    let mut metadata = json!({"name": name, "creationTimestamp": timestamp(now)});
    if let Some(namespace) = namespace {
        metadata["namespace"] = json!(namespace);
    }
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    metadata
}

/// A node's NodeMetrics.
pub fn node_metrics(node: &NodeUsage, now: SystemTime) -> Value {
    json!({
        "kind": "NodeMetrics",
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": metadata(&node.name, None, &node.labels, now),
        "timestamp": timestamp(now),
        "window": WINDOW,
        "usage": usage(node.cpu_nanocores, node.memory_bytes),
    })
}

/// A pod's PodMetrics.
pub fn pod_metrics(pod: &PodUsage, now: SystemTime) -> Value {
    let containers: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| json!({"name": c.name, "usage": usage(c.cpu_nanocores, c.memory_bytes)}))
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": metadata(&pod.name, Some(&pod.namespace), &pod.labels, now),
        "timestamp": timestamp(now),
        "window": WINDOW,
        "containers": containers,
    })
}

/// A list of `kind` (`NodeMetricsList`, `PodMetricsList`).
pub fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({
        "kind": kind,
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "metadata": {},
        "items": items,
    })
}
