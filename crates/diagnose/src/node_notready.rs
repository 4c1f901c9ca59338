//! The NotReady runbook: each node whose Ready condition is not `True` (or the one asked
//! about) — since when and why (the kubelet's own reason, or `NodeStatusUnknown` when it went
//! silent), when its Lease was last renewed, its other conditions, the taints the node
//! lifecycle controller set, and when each of its pods is evicted, by the node lifecycle
//! core's own rule (`tessera_workloads::node_lifecycle::eviction_due`: the pod's tolerations
//! of the `NoExecute` taints, 300 s by default). Knows no API client.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tessera_workloads::node_lifecycle::{NOT_READY, UNREACHABLE, eviction_due, to_system};

use crate::read::{bound_node, condition, key, live, node_name, ready};
use crate::{Cluster, Report, Severity, age};

/// Conditions whose `True` is bad news.
const PRESSURES: [&str; 4] = [
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
];

/// Diagnoses nodes that are not Ready: every one, or `target`.
pub fn node_notready(cluster: &Cluster, target: Option<&str>, now: SystemTime) -> Report {
    let mut report = Report::new("Runbook: a node is NotReady");
    let nodes: Vec<&Node> = match target {
        Some(target) => cluster
            .nodes
            .iter()
            .filter(|n| node_name(n) == target)
            .collect(),
        None => cluster.nodes.iter().filter(|n| !ready(n)).collect(),
    };
    if let (Some(target), true) = (target, nodes.is_empty()) {
        report.scope = format!("node {target}");
        report.found(Severity::Problem, format!("node {target}"), "not found");
        report.next("Check the name: kubectl get nodes");
        return report;
    }
    report.scope = format!(
        "{} node(s), {} not Ready",
        cluster.nodes.len(),
        cluster.nodes.iter().filter(|n| !ready(n)).count()
    );
    for node in nodes {
        diagnose_node(&mut report, cluster, node, now);
    }
    if report.findings.is_empty() {
        report.found(
            Severity::Ok,
            "cluster",
            format!("all {} node(s) are Ready", cluster.nodes.len()),
        );
    }
    report
}

fn diagnose_node(report: &mut Report, cluster: &Cluster, node: &Node, now: SystemTime) {
    let name = node_name(node);
    let subject = format!("node {name}");
    let Some(ready_condition) = condition(node, "Ready") else {
        report.found(
            Severity::Problem,
            &subject,
            "has no Ready condition: its kubelet never posted a status",
        );
        report.next(format!(
            "Check the kubelet on {name} started and can reach the API server (journalctl -u kubelet)"
        ));
        return;
    };
    let since = ready_condition
        .last_transition_time
        .as_ref()
        .map_or(String::new(), |t| {
            format!(" for {}", age(now, to_system(t)))
        });
    if ready_condition.status == "True" {
        report.found(Severity::Ok, &subject, format!("Ready{since}"));
    } else {
        report.found(
            Severity::Problem,
            &subject,
            format!(
                "Ready={}{since} ({}: {})",
                ready_condition.status,
                ready_condition.reason.as_deref().unwrap_or_default(),
                ready_condition.message.as_deref().unwrap_or_default()
            ),
        );
    }
    if let Some(renewed) = cluster
        .leases
        .iter()
        .find(|l| {
            l.metadata.name.as_deref() == Some(name)
                && l.metadata.namespace.as_deref() == Some("kube-node-lease")
        })
        .and_then(|l| l.spec.as_ref()?.renew_time.as_ref())
    {
        report.found(
            Severity::Info,
            &subject,
            format!(
                "Lease last renewed {} ago",
                age(now, to_system(&Time(renewed.0)))
            ),
        );
    }
    for condition in node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ != "Ready" && c.status == "True")
    {
        let severity = if PRESSURES.contains(&condition.type_.as_str())
            || condition.type_.ends_with("Degraded")
        {
            Severity::Problem
        } else {
            Severity::Info
        };
        report.found(
            severity,
            &subject,
            format!(
                "{}=True ({})",
                condition.type_,
                condition.message.as_deref().unwrap_or_default()
            ),
        );
    }
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    for taint in taints
        .iter()
        .filter(|t| (t.key == NOT_READY || t.key == UNREACHABLE) && t.effect == "NoExecute")
    {
        let added = taint.time_added.as_ref().map_or(String::new(), |t| {
            format!(", added {} ago", age(now, to_system(t)))
        });
        report.found(
            Severity::Info,
            &subject,
            format!("tainted {}:NoExecute{added}", taint.key),
        );
    }
    pod_fates(report, cluster, name, &taints, &subject, now);
    match ready_condition.status.as_str() {
        "True" => {}
        "False" => {
            report.next(format!(
                "The kubelet on {name} is up and says why (the Ready message above): check the container runtime (systemctl status containerd) and journalctl -u kubelet"
            ));
        }
        _ => {
            report.next(format!(
                "The kubelet on {name} went silent: check the machine is up and reachable, then systemctl status kubelet"
            ));
        }
    }
    if ready_condition.status != "True" {
        report.next(format!(
            "In the lab, a fault set by tessera fault node does this: tessera fault clear {name}"
        ));
        report.next(format!(
            "If {name} will not be back soon, move its work: kubectl drain {name} --ignore-daemonsets --delete-emptydir-data; StatefulSet pods on an unreachable node need kubectl delete pod --force, or the taint node.kubernetes.io/out-of-service=nodeshutdown:NoExecute"
        ));
    }
}

/// When each live pod on the node goes, by the node lifecycle core's rule.
fn pod_fates(
    report: &mut Report,
    cluster: &Cluster,
    node: &str,
    taints: &[Taint],
    subject: &str,
    now: SystemTime,
) {
    let on_node: Vec<&Pod> = cluster
        .pods
        .iter()
        .filter(|p| bound_node(p) == Some(node))
        .collect();
    let terminating = on_node
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .count();
    if terminating > 0 {
        report.found(
            Severity::Info,
            subject,
            format!("{terminating} pod(s) already evicted and terminating"),
        );
    }
    let mut staying = Vec::new();
    let mut leaving: Vec<(SystemTime, String)> = Vec::new();
    for pod in on_node.into_iter().filter(|p| live(p)) {
        match eviction_due(pod, taints, now) {
            None => staying.push(key(&pod.metadata)),
            Some(at) => leaving.push((at, key(&pod.metadata))),
        }
    }
    leaving.sort();
    if let Some((first, _)) = leaving.first() {
        let first = first.duration_since(now).map_or_else(
            |_| "now".to_string(),
            |d| format!("in {}", age(now + d, now)),
        );
        report.found(
            Severity::Info,
            subject,
            format!(
                "{} pod(s) will be evicted, the first {first}: {}",
                leaving.len(),
                leaving
                    .iter()
                    .take(5)
                    .map(|(_, p)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if !staying.is_empty() && taints.iter().any(|t| t.effect == "NoExecute") {
        report.found(
            Severity::Info,
            subject,
            format!(
                "{} pod(s) tolerate the taints for ever and stay (DaemonSet pods among them): {}",
                staying.len(),
                staying
                    .iter()
                    .take(5)
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
}
