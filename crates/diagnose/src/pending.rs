//! The pending runbook: for each pod in `Pending` (or the one asked about) — scheduling gates
//! (Kueue's admission gate among them), a bound pod its node will not start, or an unbound
//! one: the scheduler's last `FailedScheduling` message, the scheduler core's verdict over the
//! cluster as it is now and the smallest changes that would let it fit, and GPU shortfalls
//! (unhealthy devices, cordoned GPU nodes, MIG profiles no node offers). Then what has no pod
//! to be pending: controllers that fail to create theirs (`FailedCreate`: quota, limits) and
//! Kueue Workloads without quota. Knows no API client.

use std::collections::BTreeSet;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::read::{
    bound_node, cordoned, event_time, extended_requests, key, live, newest_event, node_amount,
    node_name, phase, ready,
};
use crate::{Cluster, Report, Severity, age};

/// Kueue's scheduling gate on pods it has not admitted.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";

/// Controllers whose `FailedCreate` warnings mean pods that never came to be.
const CREATORS: [&str; 5] = [
    "ReplicaSet",
    "Job",
    "StatefulSet",
    "DaemonSet",
    "ReplicationController",
];

/// Diagnoses pending pods: all of them, or `target` (`namespace`, `name`). `workloads` are
/// Kueue's Workload objects as stored (JSON), for the ones still waiting for quota.
pub fn pending(
    cluster: &Cluster,
    workloads: &[Value],
    target: Option<(&str, &str)>,
    now: SystemTime,
) -> Report {
    let mut report = Report::new("Runbook: pods stay Pending");
    let chosen: Vec<&Pod> = match target {
        Some((namespace, name)) => {
            let found = cluster.pods.iter().find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
            });
            match found {
                None => {
                    report.scope = format!("pod {namespace}/{name}");
                    report.found(
                        Severity::Problem,
                        format!("pod {namespace}/{name}"),
                        "not found",
                    );
                    report.next(format!(
                        "Check the name: kubectl get pods -n {namespace}; a controller that cannot create the pod records FailedCreate events (tessera diagnose pending, without a pod)"
                    ));
                    return report;
                }
                Some(pod) if phase(pod) != "Pending" => {
                    report.scope = format!("pod {namespace}/{name}");
                    report.found(
                        Severity::Ok,
                        format!("pod {namespace}/{name}"),
                        format!(
                            "is {} on node {}; nothing is pending",
                            phase(pod),
                            bound_node(pod).unwrap_or("<none>")
                        ),
                    );
                    return report;
                }
                Some(pod) => vec![pod],
            }
        }
        None => cluster
            .pods
            .iter()
            .filter(|p| live(p) && phase(p) == "Pending")
            .collect(),
    };
    let waiting = waiting_workloads(workloads);
    report.scope = format!(
        "{} pending pod(s) of {}, {} node(s), {} Kueue workload(s) without quota",
        chosen.len(),
        cluster.pods.len(),
        cluster.nodes.len(),
        waiting.len()
    );
    for pod in &chosen {
        diagnose_pod(&mut report, cluster, pod, now);
    }
    if target.is_none() {
        failed_creates(&mut report, cluster, now);
        for (workload, message) in &waiting {
            report.found(
                Severity::Problem,
                format!("workload {workload}"),
                format!("waits for quota: {message}"),
            );
            report.next(format!(
                "Ask the queueing core why: tessera explain workload {workload}"
            ));
        }
        if chosen.is_empty() && report.findings.is_empty() {
            report.found(Severity::Ok, "cluster", "no pod is pending");
        }
    }
    report
}

fn diagnose_pod(report: &mut Report, cluster: &Cluster, pod: &Pod, now: SystemTime) {
    let subject = format!("pod {}", key(&pod.metadata));
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let gates: Vec<&str> = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .map(|g| g.iter().map(|g| g.name.as_str()).collect())
        .unwrap_or_default();
    if gates.contains(&KUEUE_ADMISSION_GATE) {
        report.found(
            Severity::Problem,
            &subject,
            format!(
                "held by Kueue's scheduling gate {KUEUE_ADMISSION_GATE}: its Workload is not admitted"
            ),
        );
        report.next(format!(
            "Find its Workload (kubectl get workloads -n {namespace}) and ask why it waits: tessera explain workload {namespace}/<workload>"
        ));
        return;
    }
    if !gates.is_empty() {
        report.found(
            Severity::Problem,
            &subject,
            format!(
                "waits on scheduling gates {} (SchedulingGated): the scheduler does not look at it until they are removed",
                gates.join(", ")
            ),
        );
        report.next(format!(
            "Find who added the gates and why (kubectl get pod {name} -n {namespace} -o yaml); they must remove them"
        ));
        return;
    }
    if let Some(node) = bound_node(pod) {
        bound_but_waiting(report, cluster, pod, node, &subject, now);
        return;
    }
    if let Some(event) = newest_event(
        &cluster.events,
        "Pod",
        Some(namespace),
        name,
        Some("FailedScheduling"),
    ) {
        let when = event_time(event).map_or(String::new(), |t| format!(" ({} ago)", age(now, t)));
        report.found(
            Severity::Problem,
            &subject,
            format!(
                "default-scheduler{when}: {}",
                event.message.as_deref().unwrap_or_default()
            ),
        );
    }
    let explanation = tessera_scheduler::explain::explain_in_cluster(
        pod,
        &cluster.nodes,
        &cluster.pods,
        &cluster.claims,
        &cluster.slices,
        &cluster.classes,
    );
    let fitting: Vec<&str> = explanation
        .nodes
        .iter()
        .filter(|n| n.fits())
        .map(|n| n.node.as_str())
        .collect();
    if fitting.is_empty() {
        report.found(
            Severity::Problem,
            &subject,
            format!(
                "fits 0/{} nodes as the cluster is now",
                explanation.nodes.len()
            ),
        );
        for suggestion in &explanation.suggestions {
            report.next(format!("For {}: {suggestion}", key(&pod.metadata)));
        }
        report.next(format!(
            "See every node's verdict per filter: tessera explain pod {}",
            key(&pod.metadata)
        ));
    } else {
        report.found(
            Severity::Info,
            &subject,
            format!(
                "fits {}/{} nodes now ({}); the scheduler binds it on its next attempt",
                fitting.len(),
                explanation.nodes.len(),
                fitting
                    .iter()
                    .take(5)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        report.next(
            "If it stays unbound, check the scheduler is running (kubectl get events -A --field-selector reason=Scheduled)",
        );
    }
    gpu_shortfalls(report, cluster, pod, &subject);
}

/// A pod bound to a node that has not started it.
fn bound_but_waiting(
    report: &mut Report,
    cluster: &Cluster,
    pod: &Pod,
    node: &str,
    subject: &str,
    now: SystemTime,
) {
    let namespace = pod.metadata.namespace.as_deref();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    match cluster.nodes.iter().find(|n| node_name(n) == node) {
        None => {
            report.found(
                Severity::Problem,
                subject,
                format!("bound to node {node}, which does not exist"),
            );
            report.next(format!(
                "Delete the pod so its controller recreates it: kubectl delete pod {name} -n {}",
                namespace.unwrap_or_default()
            ));
            return;
        }
        Some(n) if !ready(n) => {
            report.found(
                Severity::Problem,
                subject,
                format!("bound to node {node}, which is not Ready"),
            );
            report.next(format!(
                "Diagnose the node: tessera diagnose node-notready {node}"
            ));
            return;
        }
        Some(_) => {}
    }
    if let Some(event) = newest_event(&cluster.events, "Pod", namespace, name, None) {
        let when = event_time(event).map_or(String::new(), |t| format!(" ({} ago)", age(now, t)));
        report.found(
            Severity::Problem,
            subject,
            format!(
                "on node {node}, the kubelet reports {}{when}: {}",
                event.reason.as_deref().unwrap_or_default(),
                event.message.as_deref().unwrap_or_default()
            ),
        );
        if event.reason.as_deref() == Some("UnexpectedAdmissionError") {
            report.next(format!(
                "The node admitted fewer devices than the scheduler counted: tessera diagnose device-loss {node}"
            ));
        }
    }
    let waiting: Vec<String> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let waiting = c.state.as_ref()?.waiting.as_ref()?;
            Some(format!(
                "{} {}",
                c.name,
                waiting.reason.as_deref().unwrap_or("Waiting")
            ))
        })
        .collect();
    if waiting.is_empty() {
        report.found(
            Severity::Info,
            subject,
            format!("bound to node {node}; the kubelet has not started it yet"),
        );
    } else {
        report.found(
            Severity::Info,
            subject,
            format!("on node {node}, containers waiting: {}", waiting.join(", ")),
        );
    }
    report.next(format!(
        "Read the pod's events: kubectl describe pod {name} -n {}",
        namespace.unwrap_or_default()
    ));
}

/// What stands between a pod and the extended resources it asks for.
fn gpu_shortfalls(report: &mut Report, cluster: &Cluster, pod: &Pod, subject: &str) {
    for (resource, asked) in extended_requests(pod) {
        let offering: Vec<_> = cluster
            .nodes
            .iter()
            .filter(|n| node_amount(n, &resource, false) > 0)
            .collect();
        if offering.is_empty() {
            let offered: BTreeSet<&str> = cluster
                .nodes
                .iter()
                .filter_map(|n| n.status.as_ref()?.capacity.as_ref())
                .flat_map(|c| c.keys())
                .filter(|r| r.starts_with("nvidia.com/"))
                .map(String::as_str)
                .collect();
            let what = if resource.starts_with("nvidia.com/mig-") {
                "MIG profile mismatch: "
            } else {
                ""
            };
            report.found(
                Severity::Problem,
                subject,
                format!(
                    "{what}asks for {asked} {resource}, which no node offers (offered: {})",
                    if offered.is_empty() {
                        "none".to_string()
                    } else {
                        offered.into_iter().collect::<Vec<_>>().join(", ")
                    }
                ),
            );
            report.next(format!(
                "Ask for a resource the nodes offer, or repartition a pool to offer {resource} (tessera maintain, a mig-repartition plan)"
            ));
            continue;
        }
        let unhealthy: Vec<String> = offering
            .iter()
            .filter_map(|n| {
                let gap = node_amount(n, &resource, false) - node_amount(n, &resource, true);
                (gap > 0).then(|| format!("{} ({gap})", node_name(n)))
            })
            .collect();
        if !unhealthy.is_empty() {
            report.found(
                Severity::Problem,
                subject,
                format!(
                    "{resource} allocatable is below capacity on {}: devices reported unhealthy",
                    unhealthy.join(", ")
                ),
            );
            report.next("Find the lost devices and their recovery: tessera diagnose device-loss");
        }
        let cordoned_nodes: Vec<&str> = offering
            .iter()
            .filter(|n| cordoned(n))
            .map(|n| node_name(n))
            .collect();
        if !cordoned_nodes.is_empty() {
            report.found(
                Severity::Info,
                subject,
                format!(
                    "{} of {} node(s) offering {resource} are cordoned: {}",
                    cordoned_nodes.len(),
                    offering.len(),
                    cordoned_nodes.join(", ")
                ),
            );
        }
    }
}

/// Controllers that could not create their pods lately.
fn failed_creates(report: &mut Report, cluster: &Cluster, now: SystemTime) {
    let mut seen = BTreeSet::new();
    let mut events: Vec<_> = cluster
        .events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedCreate")
                && e.type_.as_deref() == Some("Warning")
                && CREATORS.contains(&e.involved_object.kind.as_deref().unwrap_or_default())
        })
        .collect();
    events.sort_by_key(|e| std::cmp::Reverse(event_time(e)));
    for event in events {
        let about = &event.involved_object;
        let owner = format!(
            "{} {}/{}",
            about.kind.as_deref().unwrap_or_default().to_lowercase(),
            about.namespace.as_deref().unwrap_or_default(),
            about.name.as_deref().unwrap_or_default()
        );
        if !seen.insert(owner.clone()) {
            continue;
        }
        let when = event_time(event).map_or(String::new(), |t| format!(" ({} ago)", age(now, t)));
        let message = event.message.as_deref().unwrap_or_default();
        report.found(
            Severity::Problem,
            &owner,
            format!("cannot create its pods{when}: {message}"),
        );
        if message.contains("exceeded quota") {
            report.next(format!(
                "Free or raise the quota it names: kubectl describe resourcequota -n {}",
                about.namespace.as_deref().unwrap_or_default()
            ));
        } else {
            report.next(format!(
                "Fix what the message names, then the controller retries: kubectl describe {owner}",
            ));
        }
    }
}

/// Kueue Workloads not finished that hold no quota, with the message of their
/// `QuotaReserved` condition.
fn waiting_workloads(workloads: &[Value]) -> Vec<(String, String)> {
    let condition = |w: &Value, kind: &str| -> Option<Value> {
        w.pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
            .cloned()
    };
    let status_true = |w: &Value, kind: &str| {
        condition(w, kind).and_then(|c| c.get("status").and_then(Value::as_str).map(str::to_owned))
            == Some("True".into())
    };
    workloads
        .iter()
        .filter(|w| !status_true(w, "QuotaReserved") && !status_true(w, "Finished"))
        .filter(|w| w.pointer("/spec/active").and_then(Value::as_bool) != Some(false))
        .map(|w| {
            let name = format!(
                "{}/{}",
                w.pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                w.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            let message = condition(w, "QuotaReserved")
                .and_then(|c| c.get("message").and_then(Value::as_str).map(str::to_owned))
                .unwrap_or_else(|| "not yet considered by the queue manager".to_string());
            (name, message)
        })
        .collect()
}
