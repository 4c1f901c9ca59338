//! The GPU operator runbook: the operator's components (every DaemonSet and pod in its
//! namespaces — `gpu-operator`, and `nvidia-dra-driver-gpu` for NVIDIA's DRA driver): not all
//! ready, crash-looping or failing containers; GPU nodes missing GPU feature discovery's
//! labels; ResourceSlices that are stale (an older generation of their pool, or naming a node
//! that is gone); nodes whose driver upgrade failed (`nvidia.com/gpu-driver-upgrade-state`).
//! Knows no API client.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use crate::read::{gpu_node, key, label, live, node_name};
use crate::{Cluster, Report, Severity};

/// The namespaces the runbook reads when none is named.
pub const DEFAULT_NAMESPACES: [&str; 2] = ["gpu-operator", "nvidia-dra-driver-gpu"];

/// The labels GPU feature discovery puts on every NVIDIA GPU node.
pub const GFD_LABELS: [&str; 4] = [
    "nvidia.com/gpu.present",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/cuda.driver-version.full",
];

/// The driver upgrade state label and its failed value (k8s-operator-libs).
const UPGRADE_STATE: &str = "nvidia.com/gpu-driver-upgrade-state";
const UPGRADE_FAILED: &str = "upgrade-failed";

/// Container waiting reasons that mean a component is broken, not starting.
const BROKEN: [&str; 6] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

/// Diagnoses the GPU operator's components in `namespaces`.
pub fn operator(cluster: &Cluster, namespaces: &[&str]) -> Report {
    let mut report = Report::new("Runbook: the GPU operator or a GPU driver component is broken");
    let in_scope = |namespace: Option<&str>| namespace.is_some_and(|n| namespaces.contains(&n));
    let daemonsets: Vec<_> = cluster
        .daemonsets
        .iter()
        .filter(|d| in_scope(d.metadata.namespace.as_deref()))
        .collect();
    let pods: Vec<&Pod> = cluster
        .pods
        .iter()
        .filter(|p| in_scope(p.metadata.namespace.as_deref()) && live(p))
        .collect();
    let gpu_nodes: Vec<_> = cluster.nodes.iter().filter(|n| gpu_node(n)).collect();
    report.scope = format!(
        "{} DaemonSet(s) and {} pod(s) in {}, {} GPU node(s), {} ResourceSlice(s)",
        daemonsets.len(),
        pods.len(),
        namespaces.join(", "),
        gpu_nodes.len(),
        cluster.slices.len()
    );
    if daemonsets.is_empty() && pods.is_empty() {
        report.found(
            Severity::Info,
            namespaces.join(", "),
            "no operator components found (installed elsewhere, or not at all)",
        );
    }
    for daemonset in &daemonsets {
        let status = daemonset.status.clone().unwrap_or_default();
        let subject = format!("daemonset {}", key(&daemonset.metadata));
        if status.number_ready < status.desired_number_scheduled
            || status.number_unavailable.unwrap_or(0) > 0
        {
            report.found(
                Severity::Problem,
                &subject,
                format!(
                    "{}/{} pods ready, {} unavailable",
                    status.number_ready,
                    status.desired_number_scheduled,
                    status.number_unavailable.unwrap_or(0)
                ),
            );
        } else {
            report.found(
                Severity::Ok,
                &subject,
                format!(
                    "{}/{} pods ready",
                    status.number_ready, status.desired_number_scheduled
                ),
            );
        }
    }
    for pod in &pods {
        broken_pod(&mut report, pod);
    }
    for node in &gpu_nodes {
        let name = node_name(node);
        let missing: Vec<&str> = GFD_LABELS
            .iter()
            .copied()
            .filter(|l| label(node, l).is_none())
            .collect();
        if !missing.is_empty() {
            report.found(
                Severity::Problem,
                format!("node {name}"),
                format!(
                    "GPU node without GPU feature discovery's labels {}",
                    missing.join(", ")
                ),
            );
            report.next(format!(
                "Check gpu-feature-discovery and node-feature-discovery on {name} (kubectl get pods -A -o wide --field-selector spec.nodeName={name}); nodeSelectors on nvidia.com/gpu.present miss the node until they are back"
            ));
        }
        if label(node, UPGRADE_STATE) == Some(UPGRADE_FAILED) {
            report.found(
                Severity::Problem,
                format!("node {name}"),
                "driver upgrade failed (nvidia.com/gpu-driver-upgrade-state=upgrade-failed)",
            );
            report.next(format!(
                "Fix the driver pod on {name}, then retry the upgrade: kubectl label node {name} {UPGRADE_STATE}=upgrade-required --overwrite"
            ));
        }
    }
    stale_slices(&mut report, cluster);
    report
}

fn broken_pod(report: &mut Report, pod: &Pod) {
    let subject = format!("pod {}", key(&pod.metadata));
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("<unscheduled>");
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for status in statuses {
        let waiting = status
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref());
        if let Some(reason) = waiting.filter(|r| BROKEN.contains(r)) {
            let last = status
                .last_state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map_or(String::new(), |t| {
                    format!(
                        "; last exit {} ({})",
                        t.exit_code,
                        t.reason.as_deref().unwrap_or("Error")
                    )
                });
            report.found(
                Severity::Problem,
                &subject,
                format!(
                    "container {} on {node}: {reason}, restarted {} time(s){last}",
                    status.name, status.restart_count
                ),
            );
            report.next(format!(
                "Read why it fails: kubectl logs -n {} {} -c {} --previous",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default(),
                status.name
            ));
        } else if !status.ready && status.state.as_ref().is_some_and(|s| s.running.is_some()) {
            report.found(
                Severity::Problem,
                &subject,
                format!("container {} on {node} runs but is not ready", status.name),
            );
            report.next(format!(
                "Read its readiness probe's failures: kubectl describe pod -n {} {}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
}

/// Slices of an older generation than their pool's newest, or of a node that is gone.
fn stale_slices(report: &mut Report, cluster: &Cluster) {
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for slice in &cluster.slices {
        let pool = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
        let generation = newest.entry(pool).or_insert(slice.spec.pool.generation);
        *generation = (*generation).max(slice.spec.pool.generation);
    }
    for slice in &cluster.slices {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        let pool = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
        if newest
            .get(&pool)
            .is_some_and(|g| *g > slice.spec.pool.generation)
        {
            report.found(
                Severity::Problem,
                format!("resourceslice {name}"),
                format!(
                    "stale: generation {} of pool {} ({}), whose newest is {}",
                    slice.spec.pool.generation,
                    pool.1,
                    pool.0,
                    newest.get(&pool).copied().unwrap_or_default()
                ),
            );
            report.next(format!(
                "The DRA driver {} left old slices behind: restart its kubelet plugin on the node so it republishes, or delete the stale slices",
                pool.0
            ));
        }
        if let Some(node) = slice.spec.node_name.as_deref()
            && !cluster.nodes.iter().any(|n| node_name(n) == node)
        {
            report.found(
                Severity::Problem,
                format!("resourceslice {name}"),
                format!("stale: names node {node}, which no longer exists"),
            );
            report.next(format!(
                "Delete slices of nodes that are gone: kubectl delete resourceslices --field-selector spec.nodeName={node}"
            ));
        }
    }
}
