//! The kubelet's `/metrics/resource` for one node: the metrics of kubelet's
//! `pkg/kubelet/metrics/collectors/resource_metrics.go` with its names, help texts
//! (stability prefixes as component-base prints them), types, labels and sample timestamps:
//! node CPU seconds and working set, per container CPU seconds, working set and start time,
//! per pod CPU seconds and working set, and the scrape error gauges.
//!
//! Renders [`crate::usage`]'s numbers; knows nothing of where they come from.

use std::time::SystemTime;

use prometheus::proto::MetricFamily;

use crate::exposition::{Kind, encode, family, push};
use crate::load::unix_seconds;
use crate::usage::{NodeUsage, PodUsage};

/// The families, sorted by name as the kubelet's registry gathers them.
pub fn families(node: &NodeUsage, pods: &[PodUsage], now: SystemTime) -> Vec<MetricFamily> {
    let ms = Some((unix_seconds(now) * 1000.0) as i64);
    let mut container_cpu = family(
        "container_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        Kind::Counter,
    );
    let mut container_memory = family(
        "container_memory_working_set_bytes",
        "[STABLE] Current working set of the container in bytes",
        Kind::Gauge,
    );
    let mut container_start = family(
        "container_start_time_seconds",
        "[STABLE] Start time of the container since unix epoch in seconds",
        Kind::Gauge,
    );
    let mut node_cpu = family(
        "node_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        Kind::Counter,
    );
    let mut node_memory = family(
        "node_memory_working_set_bytes",
        "[STABLE] Current working set of the node in bytes",
        Kind::Gauge,
    );
    let mut pod_cpu = family(
        "pod_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        Kind::Counter,
    );
    let mut pod_memory = family(
        "pod_memory_working_set_bytes",
        "[STABLE] Current working set of the pod in bytes",
        Kind::Gauge,
    );
    let mut resource_scrape_error = family(
        "resource_scrape_error",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    let mut scrape_error = family(
        "scrape_error",
        "[ALPHA] 1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    push(&mut node_cpu, &[], node.cpu_seconds, ms);
    push(&mut node_memory, &[], node.memory_bytes as f64, ms);
    for pod in pods {
        for container in &pod.containers {
            let labels = [
                ("container", container.name.as_str()),
                ("namespace", pod.namespace.as_str()),
                ("pod", pod.name.as_str()),
            ];
            push(&mut container_cpu, &labels, container.cpu_seconds, ms);
            push(
                &mut container_memory,
                &labels,
                container.memory_bytes as f64,
                ms,
            );
            push(
                &mut container_start,
                &labels,
                unix_seconds(container.started),
                None,
            );
        }
        let labels = [
            ("namespace", pod.namespace.as_str()),
            ("pod", pod.name.as_str()),
        ];
        push(&mut pod_cpu, &labels, pod.cpu_seconds(), ms);
        push(&mut pod_memory, &labels, pod.memory_bytes() as f64, ms);
    }
    push(&mut resource_scrape_error, &[], 0.0, None);
    push(&mut scrape_error, &[], 0.0, None);
    vec![
        container_cpu,
        container_memory,
        container_start,
        node_cpu,
        node_memory,
        pod_cpu,
        pod_memory,
        resource_scrape_error,
        scrape_error,
    ]
}

/// The text of `/metrics/resource`.
pub fn render(node: &NodeUsage, pods: &[PodUsage], now: SystemTime) -> String {
    encode(families(node, pods, now))
}
