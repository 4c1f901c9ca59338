//! Kueue's gauges (`pkg/metrics/metrics.go`) as a function of its stored objects:
//! pending workloads per ClusterQueue and status, reserving and admitted active workloads,
//! ClusterQueue status, nominal quota, borrowing and lending limits, resource usage and
//! reservation per flavor and resource, and their LocalQueue equivalents.
//!
//! Workloads are sorted by `tessera_queue::api::objects::workload_state`, the queue
//! manager's own reader; quotas come from the ClusterQueue's spec and usage from the statuses
//! the queue manager writes. A pending Workload is `inadmissible` once an admission attempt
//! has marked it (`QuotaReserved=False`), `active` before — Kueue keeps that split in memory,
//! stored objects carry it this way. Does not know the counters (`crate::components`).

use std::collections::BTreeMap;

use serde_json::Value;
use tessera_model::json::text;
use tessera_queue::api::objects::{WorkloadState, workload_state};

use crate::{Error, Families, Family, family, quantity_value};

/// Kueue's stored objects the gauges read.
#[derive(Debug, Default, Clone)]
pub struct Objects {
    /// ClusterQueues.
    pub cluster_queues: Vec<Value>,
    /// LocalQueues.
    pub local_queues: Vec<Value>,
    /// Workloads.
    pub workloads: Vec<Value>,
}

const PENDING_HELP: &str = "The number of pending workloads, per 'cluster_queue' and 'status'.\n'status' can have the following values:\n- \"active\" means that the workloads are in the admission queue.\n- \"inadmissible\" means there was a failed admission attempt for these workloads and they won't be retried until cluster conditions, which could make this workload admissible, change";
const PENDING: Family = family(
    "kueue_pending_workloads",
    PENDING_HELP,
    &["cluster_queue", "status"],
);
const LQ_PENDING: Family = family(
    "kueue_local_queue_pending_workloads",
    PENDING_HELP,
    &["name", "namespace", "status"],
);
const RESERVING: Family = family(
    "kueue_reserving_active_workloads",
    "The number of Workloads that are reserving quota, per 'cluster_queue'",
    &["cluster_queue"],
);
const LQ_RESERVING: Family = family(
    "kueue_local_queue_reserving_active_workloads",
    "The number of Workloads that are reserving quota, per 'localQueue'",
    &["name", "namespace"],
);
const ADMITTED: Family = family(
    "kueue_admitted_active_workloads",
    "The number of admitted Workloads that are active (unsuspended and not finished), per 'cluster_queue'",
    &["cluster_queue"],
);
const LQ_ADMITTED: Family = family(
    "kueue_local_queue_admitted_active_workloads",
    "The number of admitted Workloads that are active (unsuspended and not finished), per 'localQueue'",
    &["name", "namespace"],
);
const CQ_STATUS: Family = family(
    "kueue_cluster_queue_status",
    "Reports 'cluster_queue' with its 'status' (with possible values 'pending', 'active' or 'terminated').\nFor a ClusterQueue, the metric only reports a value of 1 for one of the statuses.",
    &["cluster_queue", "status"],
);
const LQ_STATUS: Family = family(
    "kueue_local_queue_status",
    "Reports 'localQueue' with its 'active' status (with possible values 'True', 'False', or 'Unknown').\nFor a LocalQueue, the metric only reports a value of 1 for one of the statuses.",
    &["name", "namespace", "active"],
);
const CQ_LABELS: &[&str] = &["cohort", "cluster_queue", "flavor", "resource"];
const NOMINAL: Family = family(
    "kueue_cluster_queue_nominal_quota",
    "Reports the cluster_queue's resource nominal quota within all the flavors",
    CQ_LABELS,
);
const BORROWING: Family = family(
    "kueue_cluster_queue_borrowing_limit",
    "Reports the cluster_queue's resource borrowing limit within all the flavors",
    CQ_LABELS,
);
const LENDING: Family = family(
    "kueue_cluster_queue_lending_limit",
    "Reports the cluster_queue's resource lending limit within all the flavors",
    CQ_LABELS,
);
const USAGE: Family = family(
    "kueue_cluster_queue_resource_usage",
    "Reports the cluster_queue's total resource usage within all the flavors",
    CQ_LABELS,
);
const RESERVATION: Family = family(
    "kueue_cluster_queue_resource_reservation",
    "Reports the cluster_queue's total resource reservation within all the flavors",
    CQ_LABELS,
);
const LQ_LABELS: &[&str] = &["name", "namespace", "flavor", "resource"];
const LQ_USAGE: Family = family(
    "kueue_local_queue_resource_usage",
    "Reports the localQueue's total resource usage within all the flavors",
    LQ_LABELS,
);
const LQ_RESERVATION: Family = family(
    "kueue_local_queue_resource_reservation",
    "Reports the localQueue's total resource reservation within all the flavors",
    LQ_LABELS,
);

/// Counts of one queue's workloads.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    active: usize,
    inadmissible: usize,
    reserving: usize,
    admitted: usize,
}

#[allow(clippy::cast_precision_loss)]
fn float(count: usize) -> f64 {
    count as f64
}

fn name(object: &Value) -> &str {
    text(object, "/metadata/name")
}

fn condition_status<'a>(object: &'a Value, kind: &str) -> Option<&'a str> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| text(c, "/type") == kind)
        .map(|c| text(c, "/status"))
}

fn flavor_amounts(out: &mut Families, family: &Family, prefix: &[&str], flavors: Option<&Value>) {
    for flavor in flavors.and_then(Value::as_array).into_iter().flatten() {
        let flavor_name = text(flavor, "/name");
        for resource in flavor
            .get("resources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(total) = resource.get("total").and_then(quantity_value) else {
                continue;
            };
            let mut labels = prefix.to_vec();
            labels.push(flavor_name);
            labels.push(text(resource, "/name"));
            out.gauge(family, &labels, total);
        }
    }
}

/// Every Kueue gauge for `objects`, into `out`.
pub fn gauges(out: &mut Families, objects: &Objects) {
    // LocalQueue (namespace, name) → ClusterQueue.
    let lq_target: BTreeMap<(String, String), String> = objects
        .local_queues
        .iter()
        .map(|lq| {
            (
                (
                    text(lq, "/metadata/namespace").to_string(),
                    name(lq).to_string(),
                ),
                text(lq, "/spec/clusterQueue").to_string(),
            )
        })
        .collect();
    let mut cq_counts: BTreeMap<String, Counts> = BTreeMap::new();
    let mut lq_counts: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for workload in &objects.workloads {
        let namespace = text(workload, "/metadata/namespace").to_string();
        let queue = text(workload, "/spec/queueName").to_string();
        let lq_key = (namespace, queue);
        let Some(state) = workload_state(workload) else {
            continue;
        };
        match state {
            WorkloadState::Pending(_) => {
                let Some(cq) = lq_target.get(&lq_key) else {
                    continue;
                };
                let inadmissible = condition_status(workload, "QuotaReserved") == Some("False");
                for counts in [
                    cq_counts.entry(cq.clone()).or_default(),
                    lq_counts.entry(lq_key.clone()).or_default(),
                ] {
                    if inadmissible {
                        counts.inadmissible += 1;
                    } else {
                        counts.active += 1;
                    }
                }
            }
            WorkloadState::Reserving {
                admitted, active, ..
            } => {
                let cq = text(workload, "/status/admission/clusterQueue").to_string();
                for counts in [
                    cq_counts.entry(cq).or_default(),
                    lq_counts.entry(lq_key).or_default(),
                ] {
                    counts.reserving += 1;
                    if admitted && active {
                        counts.admitted += 1;
                    }
                }
            }
            WorkloadState::Finished | WorkloadState::Inactive => {}
        }
    }
    for cq in &objects.cluster_queues {
        let cq_name = name(cq);
        let counts = cq_counts.get(cq_name).copied().unwrap_or_default();
        out.gauge(&PENDING, &[cq_name, "active"], float(counts.active));
        out.gauge(
            &PENDING,
            &[cq_name, "inadmissible"],
            float(counts.inadmissible),
        );
        out.gauge(&RESERVING, &[cq_name], float(counts.reserving));
        out.gauge(&ADMITTED, &[cq_name], float(counts.admitted));
        let status = if cq.pointer("/metadata/deletionTimestamp").is_some() {
            "terminating"
        } else if condition_status(cq, "Active") == Some("True") {
            "active"
        } else {
            "pending"
        };
        out.one_hot(
            &CQ_STATUS,
            &[cq_name],
            &["pending", "active", "terminating"],
            status,
        );
        let cohort = match text(cq, "/spec/cohortName") {
            "" => text(cq, "/spec/cohort"),
            cohort => cohort,
        };
        for group in cq
            .pointer("/spec/resourceGroups")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for flavor in group
                .get("flavors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let flavor_name = text(flavor, "/name");
                for resource in flavor
                    .get("resources")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let labels = [cohort, cq_name, flavor_name, text(resource, "/name")];
                    let amount =
                        |field: &str| resource.get(field).and_then(quantity_value).unwrap_or(0.0);
                    out.gauge(&NOMINAL, &labels, amount("nominalQuota"));
                    out.gauge(&BORROWING, &labels, amount("borrowingLimit"));
                    out.gauge(&LENDING, &labels, amount("lendingLimit"));
                }
            }
        }
        flavor_amounts(
            out,
            &USAGE,
            &[cohort, cq_name],
            cq.pointer("/status/flavorsUsage"),
        );
        flavor_amounts(
            out,
            &RESERVATION,
            &[cohort, cq_name],
            cq.pointer("/status/flavorsReservation"),
        );
    }
    for lq in &objects.local_queues {
        let (lq_name, namespace) = (name(lq), text(lq, "/metadata/namespace"));
        let counts = lq_counts
            .get(&(namespace.to_string(), lq_name.to_string()))
            .copied()
            .unwrap_or_default();
        out.gauge(
            &LQ_PENDING,
            &[lq_name, namespace, "active"],
            float(counts.active),
        );
        out.gauge(
            &LQ_PENDING,
            &[lq_name, namespace, "inadmissible"],
            float(counts.inadmissible),
        );
        out.gauge(
            &LQ_RESERVING,
            &[lq_name, namespace],
            float(counts.reserving),
        );
        out.gauge(&LQ_ADMITTED, &[lq_name, namespace], float(counts.admitted));
        let active = condition_status(lq, "Active").unwrap_or("Unknown");
        out.one_hot(
            &LQ_STATUS,
            &[lq_name, namespace],
            &["True", "False", "Unknown"],
            active,
        );
        flavor_amounts(
            out,
            &LQ_USAGE,
            &[lq_name, namespace],
            lq.pointer("/status/flavorsUsage"),
        );
        flavor_amounts(
            out,
            &LQ_RESERVATION,
            &[lq_name, namespace],
            lq.pointer("/status/flavorsReservation"),
        );
    }
}

/// What a Workload status write the queue manager makes means for Kueue's counters.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// Admitted in `cluster_queue` after waiting `wait` seconds since it was created or
    /// last requeued (`kueue_admitted_workloads_total`, `kueue_admission_wait_time_seconds`).
    Admitted {
        /// The ClusterQueue.
        cluster_queue: String,
        /// Seconds waited.
        wait: f64,
    },
    /// Evicted from `cluster_queue` for `reason` (`kueue_evicted_workloads_total`).
    Evicted {
        /// The ClusterQueue it held quota in.
        cluster_queue: String,
        /// The `Evicted` condition's reason.
        reason: String,
    },
}

fn condition<'a>(conditions: Option<&'a Value>, kind: &str) -> Option<&'a Value> {
    conditions?
        .as_array()?
        .iter()
        .find(|c| text(c, "/type") == kind)
}

fn is_true(conditions: Option<&Value>, kind: &str) -> bool {
    condition(conditions, kind).is_some_and(|c| text(c, "/status") == "True")
}

/// The counter transitions of writing `status` (a merge patch of `status`) over the
/// Workload `before`, at `now`.
pub fn transitions(before: &Value, status: &Value, now: std::time::SystemTime) -> Vec<Transition> {
    let old = before.pointer("/status/conditions");
    let new = status.get("conditions");
    let mut out = Vec::new();
    if is_true(new, "Admitted") && !is_true(old, "Admitted") {
        let cluster_queue = text(status, "/admission/clusterQueue").to_string();
        let queued = condition(old, "Requeued")
            .map(|c| text(c, "/lastTransitionTime"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| text(before, "/metadata/creationTimestamp"));
        let wait = tessera_model::time::parse_timestamp(queued)
            .and_then(|t| now.duration_since(t).ok())
            .map_or(0.0, |d| d.as_secs_f64());
        out.push(Transition::Admitted {
            cluster_queue,
            wait,
        });
    }
    if is_true(new, "Evicted") && !is_true(old, "Evicted") {
        let cluster_queue = match text(before, "/status/admission/clusterQueue") {
            "" => text(status, "/admission/clusterQueue"),
            cq => cq,
        };
        out.push(Transition::Evicted {
            cluster_queue: cluster_queue.to_string(),
            reason: condition(new, "Evicted")
                .map(|c| text(c, "/reason").to_string())
                .unwrap_or_default(),
        });
    }
    out
}

/// The gauges alone, in a registry of their own.
pub fn families(objects: &Objects) -> Result<prometheus::Registry, Error> {
    let mut out = Families::new();
    gauges(&mut out, objects);
    out.finish()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::assert_families;

    fn workload(name: &str, queue: &str, status: Value) -> Value {
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": status
        })
    }

    fn admitted_status(admitted: bool) -> Value {
        json!({
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "", "lastTransitionTime": "2026-01-01T00:00:01Z"},
                {"type": "Admitted", "status": if admitted { "True" } else { "False" }, "reason": "Admitted", "message": "", "lastTransitionTime": "2026-01-01T00:00:01Z"}
            ]
        })
    }

    fn objects() -> Objects {
        Objects {
            cluster_queues: vec![
                json!({
                    "metadata": {"name": "cq"},
                    "spec": {"cohortName": "all", "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "default", "resources": [
                        {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1"},
                        {"name": "nvidia.com/gpu", "nominalQuota": 4, "lendingLimit": "2"}
                    ]}]}]},
                    "status": {
                        "conditions": [{"type": "Active", "status": "True"}],
                        "flavorsUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "1"}, {"name": "nvidia.com/gpu", "total": "0"}]}],
                        "flavorsReservation": [{"name": "default", "resources": [{"name": "cpu", "total": "2"}, {"name": "nvidia.com/gpu", "total": "0"}]}]
                    }
                }),
                json!({"metadata": {"name": "stopped", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}),
            ],
            local_queues: vec![json!({
                "metadata": {"name": "lq", "namespace": "team-a"},
                "spec": {"clusterQueue": "cq"},
                "status": {"conditions": [{"type": "Active", "status": "True"}],
                    "flavorsUsage": [{"name": "default", "resources": [{"name": "cpu", "total": "1"}]}]}
            })],
            workloads: vec![
                workload("new", "lq", json!({})),
                workload(
                    "tried",
                    "lq",
                    json!({"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "couldn't assign flavors", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}),
                ),
                workload("running", "lq", admitted_status(true)),
                workload("checking", "lq", admitted_status(false)),
                workload(
                    "done",
                    "lq",
                    json!({"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded", "message": "", "lastTransitionTime": "2026-01-01T00:00:01Z"}]}),
                ),
                workload("orphan", "missing", json!({})),
            ],
        }
    }

    #[test]
    fn status_writes_become_counter_transitions() {
        let now = tessera_model::time::parse_timestamp("2026-01-01T00:00:10Z").unwrap();
        let pending = workload("w", "lq", json!({}));
        let running = workload("w", "lq", admitted_status(true));
        let evicted_status = json!({"conditions": [
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "", "lastTransitionTime": "2026-01-01T00:00:10Z"}
        ]});
        let cases = vec![
            (
                "admission",
                &pending,
                admitted_status(true),
                vec![Transition::Admitted {
                    cluster_queue: "cq".into(),
                    wait: 10.0,
                }],
            ),
            ("reservation only", &pending, admitted_status(false), vec![]),
            ("already admitted", &running, admitted_status(true), vec![]),
            (
                "eviction",
                &running,
                evicted_status,
                vec![Transition::Evicted {
                    cluster_queue: "cq".into(),
                    reason: "Preempted".into(),
                }],
            ),
            (
                "pending condition",
                &pending,
                json!({"conditions": [{"type": "QuotaReserved", "status": "False"}]}),
                vec![],
            ),
        ];
        for (name, before, status, want) in cases {
            assert_eq!(transitions(before, &status, now), want, "{name}");
        }
    }

    #[test]
    fn gauges_from_objects() {
        let text = crate::render(&[&families(&objects()).unwrap()]).unwrap();
        assert_families(
            "cluster queue",
            &text,
            r#"
kueue_pending_workloads{cluster_queue="cq",status="active"} 1
kueue_pending_workloads{cluster_queue="cq",status="inadmissible"} 1
kueue_pending_workloads{cluster_queue="stopped",status="active"} 0
kueue_pending_workloads{cluster_queue="stopped",status="inadmissible"} 0
kueue_reserving_active_workloads{cluster_queue="cq"} 2
kueue_reserving_active_workloads{cluster_queue="stopped"} 0
kueue_admitted_active_workloads{cluster_queue="cq"} 1
kueue_admitted_active_workloads{cluster_queue="stopped"} 0
kueue_cluster_queue_status{cluster_queue="cq",status="active"} 1
kueue_cluster_queue_status{cluster_queue="cq",status="pending"} 0
kueue_cluster_queue_status{cluster_queue="cq",status="terminating"} 0
kueue_cluster_queue_status{cluster_queue="stopped",status="active"} 0
kueue_cluster_queue_status{cluster_queue="stopped",status="pending"} 0
kueue_cluster_queue_status{cluster_queue="stopped",status="terminating"} 1
kueue_cluster_queue_nominal_quota{cluster_queue="cq",cohort="all",flavor="default",resource="cpu"} 9
kueue_cluster_queue_nominal_quota{cluster_queue="cq",cohort="all",flavor="default",resource="nvidia.com/gpu"} 4
kueue_cluster_queue_borrowing_limit{cluster_queue="cq",cohort="all",flavor="default",resource="cpu"} 1
kueue_cluster_queue_borrowing_limit{cluster_queue="cq",cohort="all",flavor="default",resource="nvidia.com/gpu"} 0
kueue_cluster_queue_lending_limit{cluster_queue="cq",cohort="all",flavor="default",resource="cpu"} 0
kueue_cluster_queue_lending_limit{cluster_queue="cq",cohort="all",flavor="default",resource="nvidia.com/gpu"} 2
kueue_cluster_queue_resource_usage{cluster_queue="cq",cohort="all",flavor="default",resource="cpu"} 1
kueue_cluster_queue_resource_usage{cluster_queue="cq",cohort="all",flavor="default",resource="nvidia.com/gpu"} 0
kueue_cluster_queue_resource_reservation{cluster_queue="cq",cohort="all",flavor="default",resource="cpu"} 2
kueue_cluster_queue_resource_reservation{cluster_queue="cq",cohort="all",flavor="default",resource="nvidia.com/gpu"} 0
"#,
            &[
                "kueue_pending_workloads",
                "kueue_reserving_active_workloads",
                "kueue_admitted_active_workloads",
                "kueue_cluster_queue_status",
                "kueue_cluster_queue_nominal_quota",
                "kueue_cluster_queue_borrowing_limit",
                "kueue_cluster_queue_lending_limit",
                "kueue_cluster_queue_resource_usage",
                "kueue_cluster_queue_resource_reservation",
            ],
        );
        assert_families(
            "local queue",
            &text,
            r#"
kueue_local_queue_pending_workloads{name="lq",namespace="team-a",status="active"} 1
kueue_local_queue_pending_workloads{name="lq",namespace="team-a",status="inadmissible"} 1
kueue_local_queue_reserving_active_workloads{name="lq",namespace="team-a"} 2
kueue_local_queue_admitted_active_workloads{name="lq",namespace="team-a"} 1
kueue_local_queue_status{active="True",name="lq",namespace="team-a"} 1
kueue_local_queue_status{active="False",name="lq",namespace="team-a"} 0
kueue_local_queue_status{active="Unknown",name="lq",namespace="team-a"} 0
kueue_local_queue_resource_usage{flavor="default",name="lq",namespace="team-a",resource="cpu"} 1
"#,
            &[
                "kueue_local_queue_pending_workloads",
                "kueue_local_queue_reserving_active_workloads",
                "kueue_local_queue_admitted_active_workloads",
                "kueue_local_queue_status",
                "kueue_local_queue_resource_usage",
            ],
        );
    }
}
