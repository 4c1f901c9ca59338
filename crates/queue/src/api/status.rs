//! The statuses Kueue writes, computed from a stored object and a decision: a Workload's
//! `status.admission` and its `QuotaReserved`, `Admitted`, `Evicted`, `Preempted`, `Requeued`
//! and `Finished` conditions (`pkg/workload`: `SetQuotaReservation`, `SyncAdmittedCondition`
//! with UnadmittedWorkloadsObservability on, `UnsetQuotaReservationWithCondition`,
//! `SetEvictedCondition`, `SetPreemptedCondition`, `SetRequeuedCondition`), and the
//! ClusterQueue and LocalQueue statuses of Kueue's queue controllers (workload counts,
//! `flavorsReservation`/`flavorsUsage`, the `Active` condition with Kueue's reasons and
//! messages).
//!
//! Each function answers the new status only when something changed, so a caller writes a
//! condition once per change rather than once per cycle. Knows nothing about how the status is
//! written; time is an argument.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::quantity::{Format, Quantity};
use tessera_model::{conditions, time};

use crate::amount::Amount;
use crate::cycle::Admission;
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::workload::PodSetResources;

/// `QuotaReserved`.
pub const QUOTA_RESERVED: &str = "QuotaReserved";
/// `Admitted`.
pub const ADMITTED: &str = "Admitted";
/// `Evicted`.
pub const EVICTED: &str = "Evicted";
/// `Preempted`.
pub const PREEMPTED: &str = "Preempted";
/// `Requeued`.
pub const REQUEUED: &str = "Requeued";
/// `Finished`.
pub const FINISHED: &str = "Finished";
/// The `Evicted` reason of a preemption victim (`WorkloadEvictedByPreemption`).
pub const EVICTED_BY_PREEMPTION: &str = "Preempted";
/// The `Evicted` reason of a Workload whose pods a node's maintenance moves (Tessera's; not
/// one of Kueue's): requeued at once, as a preemption victim is.
pub const EVICTED_BY_NODE_MAINTENANCE: &str = "NodeMaintenance";
/// The `QuotaReserved` False reason once an evicted Workload's job stopped
/// (`WorkloadQuotaReservedReasonPendingEvaluation`, UnadmittedWorkloadsObservability on).
pub const PENDING_EVALUATION: &str = "PendingEvaluation";

/// A quantity of `resource` from its canonical amount (`resources.ResourceQuantity`):
/// milli-units for `cpu`, binary for memory, ephemeral storage and huge pages, decimal
/// otherwise.
pub fn resource_quantity(resource: &str, value: i64) -> String {
    let quantity = if resource == "cpu" {
        Quantity::from_milli(value)
    } else if matches!(resource, "memory" | "ephemeral-storage")
        || resource.starts_with("hugepages-")
    {
        Quantity::from_units(value, Format::BinarySi)
    } else {
        Quantity::from_units(value, Format::DecimalSi)
    };
    quantity.to_canonical()
}

/// `status.admission` as Kueue writes it.
pub fn admission_json(admission: &Admission) -> Value {
    let assignments: Vec<Value> = admission
        .pod_set_assignments
        .iter()
        .map(|ps| {
            let usage: Map<String, Value> = ps
                .resource_usage
                .iter()
                .map(|(resource, value)| {
                    (resource.clone(), json!(resource_quantity(resource, *value)))
                })
                .collect();
            let mut assignment = json!({"name": ps.name, "flavors": ps.flavors,
                "resourceUsage": usage, "count": ps.count});
            if let Some(topology) = &ps.topology_assignment {
                assignment["topologyAssignment"] = crate::api::tas::topology_json(topology);
            }
            assignment
        })
        .collect();
    json!({"clusterQueue": admission.cluster_queue, "podSetAssignments": assignments})
}

fn conditions_of(object: &Value) -> Vec<Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// One condition change: type, status, reason, message.
pub(crate) type Change<'a> = (&'a str, &'a str, &'a str, &'a str);

/// Sets conditions on a copy of `object`'s, with `observedGeneration`; the new list when any
/// changed.
pub(crate) fn set_all(
    object: &Value,
    changes: &[Change<'_>],
    now: SystemTime,
) -> (Vec<Value>, bool) {
    let mut list = conditions_of(object);
    let stamp = time::timestamp(now);
    let generation = object.pointer("/metadata/generation").cloned();
    let mut changed = false;
    for (kind, status, reason, message) in changes {
        let message = truncate(message);
        if conditions::set(&mut list, kind, status, reason, &message, &stamp) {
            changed = true;
            if let (Some(generation), Some(set)) =
                (&generation, list.iter_mut().find(|c| c["type"] == *kind))
            {
                set["observedGeneration"] = generation.clone();
            }
        }
    }
    (list, changed)
}

/// Kueue truncates condition messages to 32 KiB (`api.TruncateConditionMessage`).
fn truncate(message: &str) -> String {
    truncate_to(message, MESSAGE_LIMIT)
}

/// The longest condition message Kueue writes, in bytes.
const MESSAGE_LIMIT: usize = 32 * 1024;

/// `message` cut to `limit` bytes, ending in "..." when cut.
fn truncate_to(message: &str, limit: usize) -> String {
    if message.len() <= limit {
        return message.to_owned();
    }
    let mut end = limit - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

fn previous_message(object: &Value, kind: &str) -> Option<String> {
    conditions::find(object, kind)
        .filter(|c| c["status"] == "True")
        .map(|c| format!("Previously: {}", c["message"].as_str().unwrap_or_default()))
}

/// The status after quota is reserved (`SetQuotaReservation` and `SyncAdmittedCondition`
/// with no admission checks): the admission, `QuotaReserved=True`, `Admitted=True`, and any
/// active `Evicted`/`Preempted` reset to False "Previously: …".
pub fn admitted(object: &Value, admission: &Admission, now: SystemTime) -> Value {
    reserved(object, admission, &[], now)
}

/// As [`admitted`], for a ClusterQueue that requires the admission checks whose states are
/// `checks` (`SetQuotaReservation`, then the workload controller's check sync and
/// `SyncAdmittedCondition`): with a check not Ready, `Admitted=False`
/// UnsatisfiedAdmissionChecks and the check states written.
pub fn reserved(object: &Value, admission: &Admission, checks: &[Value], now: SystemTime) -> Value {
    let reserved = format!("Quota reserved in ClusterQueue {}", admission.cluster_queue);
    let evicted = previous_message(object, EVICTED);
    let preempted = previous_message(object, PREEMPTED);
    let mut changes: Vec<Change<'_>> = vec![(QUOTA_RESERVED, "True", "QuotaReserved", &reserved)];
    if let Some(message) = &evicted {
        changes.push((EVICTED, "False", "QuotaReserved", message));
    }
    if let Some(message) = &preempted {
        changes.push((PREEMPTED, "False", "QuotaReserved", message));
    }
    let ready = checks.iter().all(|c| c["state"] == "Ready");
    if ready {
        changes.push((ADMITTED, "True", "Admitted", "The workload is admitted"));
    } else {
        changes.push((
            ADMITTED,
            "False",
            "UnsatisfiedAdmissionChecks",
            "The workload has not all checks ready",
        ));
    }
    let (list, _) = set_all(object, &changes, now);
    let mut status = json!({"admission": admission_json(admission), "conditions": list});
    if !checks.is_empty() {
        status["admissionChecks"] = json!(checks);
    }
    status
}

/// The status of a Workload left without quota with `reason` and `message`
/// (`UnsetQuotaReservationWithCondition`): `QuotaReserved=False`, no admission,
/// `Admitted=False` NoReservation. `None` when nothing changes.
pub fn pending(object: &Value, reason: &str, message: &str, now: SystemTime) -> Option<Value> {
    let changes = [
        (QUOTA_RESERVED, "False", reason, message),
        (
            ADMITTED,
            "False",
            "NoReservation",
            "The workload has no reservation",
        ),
    ];
    let had_admission = object
        .pointer("/status/admission")
        .is_some_and(|a| !a.is_null());
    // A head looked at pass after pass mostly stays as it was written: answered without
    // copying its conditions.
    if !had_admission && already_set(object, &changes) {
        return None;
    }
    let (list, changed) = set_all(object, &changes, now);
    (changed || had_admission).then(|| json!({"admission": null, "conditions": list}))
}

/// Whether [`set_all`] would change none of `object`'s conditions for `changes`: the first
/// condition of each type has that status, reason and (truncated) message already.
fn already_set(object: &Value, changes: &[Change<'_>]) -> bool {
    let Some(list) = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
    else {
        return false;
    };
    changes.iter().all(|(kind, status, reason, message)| {
        let message = if message.len() <= MESSAGE_LIMIT {
            std::borrow::Cow::Borrowed(*message)
        } else {
            std::borrow::Cow::Owned(truncate(message))
        };
        conditions::is_set(list, kind, status, reason, &message)
    })
}

/// As [`pending`], for a Workload the scheduler looked at: also its total requests per PodSet
/// (`PropagateResourceRequests`), written when they changed.
pub fn pending_with_requests(
    object: &Value,
    (reason, message): (&str, &str),
    requests: &[PodSetResources],
    now: SystemTime,
) -> Option<Value> {
    let same = object
        .pointer("/status/resourceRequests")
        .is_some_and(|stored| requests_written(stored, requests));
    let mut status = match pending(object, reason, message, now) {
        Some(status) => status,
        None if same => return None,
        None => json!({}),
    };
    if !same {
        let wanted: Vec<Value> = requests
            .iter()
            .map(|ps| {
                let resources: Map<String, Value> = ps
                    .requests
                    .iter()
                    .map(|(name, value)| (name.clone(), json!(resource_quantity(name, *value))))
                    .collect();
                json!({"name": ps.name, "resources": resources})
            })
            .collect();
        status["resourceRequests"] = Value::Array(wanted);
    }
    Some(status)
}

/// Whether `stored` is `status.resourceRequests` as written for `requests`: the same PodSets
/// in order, each with exactly these resources as [`resource_quantity`] writes them (checked
/// without building the JSON: a pass looks at every head's).
fn requests_written(stored: &Value, requests: &[PodSetResources]) -> bool {
    let Some(stored) = stored.as_array() else {
        return false;
    };
    stored.len() == requests.len()
        && stored.iter().zip(requests).all(|(stored, ps)| {
            let resources = stored.get("resources").and_then(Value::as_object);
            stored.get("name").and_then(Value::as_str) == Some(ps.name.as_str())
                && stored.as_object().is_some_and(|o| o.len() == 2)
                && resources.is_some_and(|resources| {
                    resources.len() == ps.requests.len()
                        && ps.requests.iter().all(|(name, value)| {
                            resources.get(name).and_then(Value::as_str)
                                == Some(resource_quantity(name, *value).as_str())
                        })
                })
        })
}

/// The status of a preemption victim (`Evict` with `SetPreemptedCondition`): `Evicted=True`
/// Preempted and `Preempted=True` with the preemption's reason, both with its message.
/// `None` when it is already evicted.
pub fn preempted(object: &Value, reason: &str, message: &str, now: SystemTime) -> Option<Value> {
    evict(
        object,
        &[
            (EVICTED, "True", EVICTED_BY_PREEMPTION, message),
            (PREEMPTED, "True", reason, message),
        ],
        now,
    )
}

/// The status of a Workload evicted for `reason` (`Evict`): `Evicted=True`. `None` when it is
/// already evicted.
pub fn evicted(object: &Value, reason: &str, message: &str, now: SystemTime) -> Option<Value> {
    evict(object, &[(EVICTED, "True", reason, message)], now)
}

fn evict(object: &Value, changes: &[Change<'_>], now: SystemTime) -> Option<Value> {
    if conditions::is_true(object, EVICTED) {
        return None;
    }
    let (list, _) = set_all(object, changes, now);
    Some(json!({"conditions": list}))
}

/// The status of a Workload requeued for `reason` (`SetRequeuedCondition` True). `None` when
/// nothing changes.
pub fn requeued(object: &Value, reason: &str, message: &str, now: SystemTime) -> Option<Value> {
    let (list, changed) = set_all(object, &[(REQUEUED, "True", reason, message)], now);
    changed.then(|| json!({"conditions": list}))
}

/// The status once an evicted Workload's job has stopped (the job reconciler's eviction
/// step): `Requeued` (True after a preemption, a node failure or a node's maintenance), and
/// the quota released with the eviction's message. `None` when nothing changes.
pub fn released(object: &Value, now: SystemTime) -> Option<Value> {
    let evicted = conditions::find(object, EVICTED).filter(|c| c["status"] == "True")?;
    let reason = evicted["reason"].as_str().unwrap_or_default();
    let message = evicted["message"].as_str().unwrap_or_default();
    let requeued = if matches!(
        reason,
        EVICTED_BY_PREEMPTION | "NodeFailures" | EVICTED_BY_NODE_MAINTENANCE
    ) {
        "True"
    } else {
        "False"
    };
    let (list, changed) = set_all(
        object,
        &[
            (REQUEUED, requeued, reason, message),
            (QUOTA_RESERVED, "False", PENDING_EVALUATION, message),
            (
                ADMITTED,
                "False",
                "NoReservation",
                "The workload has no reservation",
            ),
        ],
        now,
    );
    let had_admission = object
        .pointer("/status/admission")
        .is_some_and(|a| !a.is_null());
    (changed || had_admission).then(|| json!({"admission": null, "conditions": list}))
}

/// The status of a Workload whose job finished (`workloadfinish.Finish`): `Finished=True`,
/// Succeeded or Failed, with the job's message. `None` when already finished.
pub fn finished(object: &Value, succeeded: bool, message: &str, now: SystemTime) -> Option<Value> {
    if conditions::is_true(object, FINISHED) {
        return None;
    }
    let reason = if succeeded { "Succeeded" } else { "Failed" };
    let (list, _) = set_all(object, &[(FINISHED, "True", reason, message)], now);
    Some(json!({"conditions": list}))
}

/// An event Kueue records about an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The object it is about (an object reference).
    pub involved: Value,
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// The reason.
    pub reason: String,
    /// The message (truncated as Kueue truncates event messages, to 1 KiB).
    pub message: String,
}

impl Event {
    /// An event about `object`, whose API version and kind are given.
    pub fn about(
        object: &Value,
        (api_version, kind): (&str, &str),
        (event_kind, reason): (&'static str, &str),
        message: &str,
    ) -> Event {
        let meta = |field: &str| {
            object
                .pointer(&format!("/metadata/{field}"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        Event {
            involved: json!({"apiVersion": api_version, "kind": kind, "name": meta("name"),
                "namespace": meta("namespace"), "uid": meta("uid"),
                "resourceVersion": meta("resourceVersion")}),
            kind: event_kind,
            reason: reason.to_owned(),
            message: truncate_to(message, 1024),
        }
    }

    /// An event about a Workload.
    pub fn workload(
        object: &Value,
        event_kind: &'static str,
        reason: &str,
        message: &str,
    ) -> Event {
        Event::about(
            object,
            (WORKLOAD_API_VERSION, "Workload"),
            (event_kind, reason),
            message,
        )
    }
}

/// The API version Workloads are written in.
pub const WORKLOAD_API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// The events of an admission (`recordWorkloadAdmissionEvents`): QuotaReserved with the wait
/// since the Workload was queued (created, or last requeued), and Admitted.
pub fn admission_events(object: &Value, admission: &Admission, now: SystemTime) -> [Event; 2] {
    let queued = conditions::find(object, REQUEUED)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .or_else(|| {
            object
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)
        })
        .and_then(time::parse_timestamp)
        .unwrap_or(now);
    let waited = now.duration_since(queued).unwrap_or_default().as_secs_f64();
    let cluster_queue = &admission.cluster_queue;
    [
        Event::workload(
            object,
            "Normal",
            "QuotaReserved",
            &format!(
                "Quota reserved in ClusterQueue {cluster_queue}, wait time since queued was {waited:.0}s"
            ),
        ),
        Event::workload(
            object,
            "Normal",
            "Admitted",
            &format!(
                "Admitted by ClusterQueue {cluster_queue}, wait time since reservation was 0s"
            ),
        ),
    ]
}

/// Workloads counted by a queue's status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `pendingWorkloads`.
    pub pending: i64,
    /// `reservingWorkloads`.
    pub reserving: i64,
    /// `admittedWorkloads`.
    pub admitted: i64,
}

/// Usage of a queue: reserved by every Workload holding quota, and of the admitted ones.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// `flavorsReservation` amounts.
    pub reserved: FlavorResourceQuantities,
    /// `flavorsUsage` amounts.
    pub admitted: FlavorResourceQuantities,
}

/// The `Active` condition: status, reason, message.
pub type Active = (&'static str, &'static str, String);

/// A ClusterQueue's `Active` condition (`inactiveReason`).
pub fn cluster_queue_active(
    terminating: bool,
    stopped: bool,
    missing_flavors: &[String],
    missing_topologies: &[(String, String)],
) -> Active {
    cluster_queue_active_with(
        terminating,
        stopped,
        missing_flavors,
        missing_topologies,
        &[],
    )
}

/// [`cluster_queue_active`] with further `(reason, message part)`s after the flavors' and
/// before the topologies' (the admission checks',
/// `admission_checks::ClusterQueueChecks::inactive_reasons`).
pub fn cluster_queue_active_with(
    terminating: bool,
    stopped: bool,
    missing_flavors: &[String],
    missing_topologies: &[(String, String)],
    more: &[(&'static str, String)],
) -> Active {
    if terminating {
        return (
            "False",
            "Terminating",
            "Can't admit new workloads; clusterQueue is terminating".to_owned(),
        );
    }
    let mut reasons = Vec::new();
    let mut messages = Vec::new();
    if stopped {
        reasons.push("Stopped");
        messages.push("is stopped".to_owned());
    }
    if !missing_flavors.is_empty() {
        reasons.push("FlavorNotFound");
        messages.push(format!(
            "references missing ResourceFlavor(s): {}",
            missing_flavors.join(",")
        ));
    }
    for (reason, message) in more {
        reasons.push(reason);
        messages.push(message.clone());
    }
    for (flavor, topology) in missing_topologies {
        reasons.push("TopologyNotFound");
        messages.push(format!(
            "there is no Topology \"{topology}\" for TAS flavor \"{flavor}\""
        ));
    }
    match reasons.first() {
        None => ("True", "Ready", "Can admit new workloads".to_owned()),
        Some(reason) => (
            "False",
            reason,
            format!("Can't admit new workloads: {}.", messages.join(", ")),
        ),
    }
}

/// A LocalQueue's `Active` condition: stopped, its ClusterQueue missing or inactive, or ready.
pub fn local_queue_active(stopped: bool, cluster_queue_active: Option<bool>) -> Active {
    match (stopped, cluster_queue_active) {
        (true, _) => ("False", "Stopped", "LocalQueue is stopped".to_owned()),
        (false, None) => (
            "False",
            "ClusterQueueDoesNotExist",
            "Can't submit new workloads to clusterQueue".to_owned(),
        ),
        (false, Some(false)) => (
            "False",
            "ClusterQueueIsInactive",
            "Can't submit new workloads to clusterQueue".to_owned(),
        ),
        (false, Some(true)) => (
            "True",
            "Ready",
            "Can submit new workloads to localQueue".to_owned(),
        ),
    }
}

/// The `borrowed` of a queue's usage: none (a LocalQueue), or beyond the nominal quota of a
/// ClusterQueue in a cohort (`None` outside a cohort, where Kueue enforces 0).
#[derive(Clone, Copy)]
enum Borrowed<'a> {
    Omitted,
    Beyond(Option<&'a BTreeMap<FlavorResource, Amount>>),
}

/// Usage per flavor of the resource groups, in their order, with each flavor's resources
/// sorted by name (`getUsage`, `filterLocalQueueUsage`).
fn flavor_usage(
    flavors: &[(String, Vec<String>)],
    usage: &FlavorResourceQuantities,
    borrowed: Borrowed<'_>,
) -> Vec<Value> {
    flavors
        .iter()
        .map(|(flavor, resources)| {
            let mut resources = resources.clone();
            resources.sort();
            let resources: Vec<Value> = resources
                .iter()
                .map(|resource| {
                    let key = FlavorResource::new(flavor.clone(), resource.clone());
                    let total = usage.get(&key).int64();
                    let mut entry =
                        json!({"name": resource, "total": resource_quantity(resource, total)});
                    if let Borrowed::Beyond(nominal) = borrowed {
                        let quota = nominal.map(|n| n.get(&key).copied().unwrap_or_default());
                        let beyond = match quota {
                            Some(quota) if !quota.is_unlimited() => (total - quota.int64()).max(0),
                            _ => 0,
                        };
                        entry["borrowed"] = json!(resource_quantity(resource, beyond));
                    }
                    entry
                })
                .collect();
            json!({"name": flavor, "resources": resources})
        })
        .collect()
}

/// A ClusterQueue's status fields: counts, reservation and usage per flavor and resource in
/// its resource groups' order (with what is borrowed beyond `nominal`; `None` outside a
/// cohort, where nothing is borrowed), `Active`, and with fair sharing on its weighted share
/// (`fairSharing.weightedShare`).
#[allow(clippy::too_many_arguments)]
pub fn cluster_queue_status(
    object: &Value,
    flavors: &[(String, Vec<String>)],
    nominal: Option<&BTreeMap<FlavorResource, Amount>>,
    counts: Counts,
    usage: &Usage,
    active: &Active,
    weighted_share: Option<i64>,
    now: SystemTime,
) -> Option<Value> {
    let borrowed = Borrowed::Beyond(nominal);
    let extra = weighted_share.map(|share| ("fairSharing", json!({"weightedShare": share})));
    queue_status(object, flavors, borrowed, counts, usage, active, extra, now)
}

/// A LocalQueue's status fields: as a ClusterQueue's, without `borrowed`, with
/// `fairSharing` when admission fair sharing gives one.
pub fn local_queue_status(
    object: &Value,
    flavors: &[(String, Vec<String>)],
    counts: Counts,
    usage: &Usage,
    active: &Active,
    fair_sharing: Option<Value>,
    now: SystemTime,
) -> Option<Value> {
    queue_status(
        object,
        flavors,
        Borrowed::Omitted,
        counts,
        usage,
        active,
        fair_sharing.map(|value| ("fairSharing", value)),
        now,
    )
}

/// The status fields every queue has, and `extra` (a field the kind adds).
#[allow(clippy::too_many_arguments)]
fn queue_status(
    object: &Value,
    flavors: &[(String, Vec<String>)],
    borrowed: Borrowed<'_>,
    counts: Counts,
    usage: &Usage,
    (status, reason, message): &Active,
    extra: Option<(&str, Value)>,
    now: SystemTime,
) -> Option<Value> {
    let (list, changed) = set_all(object, &[("Active", status, reason, message)], now);
    let mut wanted = json!({
        "pendingWorkloads": counts.pending,
        "reservingWorkloads": counts.reserving,
        "admittedWorkloads": counts.admitted,
        "flavorsReservation": flavor_usage(flavors, &usage.reserved, borrowed),
        "flavorsUsage": flavor_usage(flavors, &usage.admitted, borrowed),
    });
    if let Some((field, value)) = extra {
        wanted[field] = value;
    }
    let current = object.get("status");
    let same = wanted
        .as_object()
        .into_iter()
        .flatten()
        .all(|(field, value)| current.and_then(|status| status.get(field)) == Some(value));
    if same && !changed {
        return None;
    }
    let mut status = wanted;
    status["conditions"] = Value::Array(list);
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cycle::PodSetAdmission;
    use std::time::Duration;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|list| list.iter().find(|c| c["type"] == kind))
            .unwrap_or(&Value::Null)
    }

    #[test]
    fn quantities_are_written_in_kueues_units() {
        let cases = [
            ("cpu", 1000, "1"),
            ("cpu", 500, "500m"),
            ("memory", 36 << 30, "36Gi"),
            ("memory", 1000, "1k"),
            ("memory", 1500, "1500"),
            ("nvidia.com/gpu", 2, "2"),
            ("pods", 0, "0"),
        ];
        for (resource, value, want) in cases {
            assert_eq!(
                resource_quantity(resource, value),
                want,
                "{resource} {value}"
            );
        }
    }

    fn admission() -> Admission {
        Admission {
            cluster_queue: "cq".into(),
            pod_set_assignments: vec![PodSetAdmission {
                name: "main".into(),
                flavors: [("cpu".to_owned(), "default".to_owned())].into(),
                resource_usage: [("cpu".to_owned(), 3000)].into(),
                count: 3,
                topology_assignment: None,
            }],
        }
    }

    #[test]
    fn an_admission_reserves_admits_and_resets_an_earlier_eviction() {
        let object = json!({"metadata": {"generation": 2}, "status": {"conditions": [
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "by x",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let status = admitted(&object, &admission(), at(10));
        assert_eq!(status["admission"]["clusterQueue"], "cq");
        assert_eq!(
            status["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"],
            "3"
        );
        let reserved = condition(&status, "QuotaReserved");
        assert_eq!(
            (
                &reserved["status"],
                &reserved["reason"],
                &reserved["message"]
            ),
            (
                &json!("True"),
                &json!("QuotaReserved"),
                &json!("Quota reserved in ClusterQueue cq")
            )
        );
        assert_eq!(reserved["observedGeneration"], 2);
        assert_eq!(reserved["lastTransitionTime"], time::timestamp(at(10)));
        let admitted = condition(&status, "Admitted");
        assert_eq!(
            (&admitted["status"], &admitted["reason"]),
            (&json!("True"), &json!("Admitted"))
        );
        let evicted = condition(&status, "Evicted");
        assert_eq!(
            (&evicted["status"], &evicted["message"]),
            (&json!("False"), &json!("Previously: by x"))
        );
    }

    #[test]
    fn a_pending_status_is_skipped_exactly_when_writing_it_would_change_nothing() {
        let long = "x".repeat(MESSAGE_LIMIT + 10);
        let reserved = |status: &str, reason: &str, message: &str| json!({"type": "QuotaReserved", "status": status, "reason": reason, "message": message});
        let no_reservation = json!({"type": "Admitted", "status": "False",
            "reason": "NoReservation", "message": "The workload has no reservation"});
        let as_written = reserved("False", "Pending", "m");
        // (case, stored conditions, stored admission, message asked for, skipped)
        let cases = [
            (
                "as written",
                vec![as_written.clone(), no_reservation.clone()],
                false,
                "m",
                true,
            ),
            (
                "another message",
                vec![as_written.clone(), no_reservation.clone()],
                false,
                "n",
                false,
            ),
            (
                "another reason",
                vec![reserved("False", "Other", "m"), no_reservation.clone()],
                false,
                "m",
                false,
            ),
            (
                "another status",
                vec![reserved("True", "Pending", "m"), no_reservation.clone()],
                false,
                "m",
                false,
            ),
            (
                "Admitted missing",
                vec![as_written.clone()],
                false,
                "m",
                false,
            ),
            (
                "an admission left",
                vec![as_written.clone(), no_reservation.clone()],
                true,
                "m",
                false,
            ),
            (
                "the first of a type decides",
                vec![
                    reserved("False", "Other", "m"),
                    as_written.clone(),
                    no_reservation.clone(),
                ],
                false,
                "m",
                false,
            ),
            (
                "a long message, stored truncated",
                vec![
                    reserved("False", "Pending", &truncate(&long)),
                    no_reservation.clone(),
                ],
                false,
                long.as_str(),
                true,
            ),
            (
                "a long message, stored whole",
                vec![reserved("False", "Pending", &long), no_reservation.clone()],
                false,
                long.as_str(),
                false,
            ),
        ];
        for (case, conditions, admitted, message, skipped) in cases {
            let mut object =
                json!({"metadata": {"generation": 1}, "status": {"conditions": conditions}});
            if admitted {
                object["status"]["admission"] = json!({"clusterQueue": "cq"});
            }
            let answer = pending(&object, "Pending", message, at(5));
            assert_eq!(answer.is_none(), skipped, "{case}");
            // The same answer as the full computation's.
            let (_, changed) = set_all(
                &object,
                &[
                    (QUOTA_RESERVED, "False", "Pending", message),
                    (
                        ADMITTED,
                        "False",
                        "NoReservation",
                        "The workload has no reservation",
                    ),
                ],
                at(5),
            );
            assert_eq!(answer.is_none(), !changed && !admitted, "{case}");
        }
    }

    #[test]
    fn a_pending_condition_is_written_once_per_change() {
        let object = json!({"metadata": {}, "status": {}});
        let first = pending(&object, "Pending", "couldn't assign flavors", at(1)).expect("new");
        assert_eq!(condition(&first, "QuotaReserved")["reason"], "Pending");
        assert_eq!(condition(&first, "Admitted")["reason"], "NoReservation");
        let stored = json!({"metadata": {}, "status": first});
        assert_eq!(
            pending(&stored, "Pending", "couldn't assign flavors", at(2)),
            None
        );
        let changed = pending(&stored, "Pending", "another message", at(3)).expect("changed");
        let reserved = condition(&changed, "QuotaReserved");
        assert_eq!(reserved["message"], "another message");
        assert_eq!(
            reserved["lastTransitionTime"],
            time::timestamp(at(1)),
            "status unchanged"
        );
    }

    #[test]
    fn stored_requests_are_rewritten_unless_exactly_as_written() {
        let requests = [PodSetResources {
            name: "main".into(),
            requests: [("cpu".to_owned(), 1500), ("memory".to_owned(), 1 << 30)].into(),
            count: 1,
        }];
        let written = json!([{"name": "main", "resources": {"cpu": "1500m", "memory": "1Gi"}}]);
        // (stored, the same as written)
        let table = [
            (written.clone(), true),
            (
                json!([{"resources": {"memory": "1Gi", "cpu": "1500m"}, "name": "main"}]),
                true,
            ),
            (
                json!([{"name": "main", "resources": {"cpu": "1.5", "memory": "1Gi"}}]),
                false,
            ),
            (
                json!([{"name": "main", "resources": {"cpu": "1500m"}}]),
                false,
            ),
            (
                json!([{"name": "main", "resources": {"cpu": "1500m", "memory": "1Gi", "gpu": "1"}}]),
                false,
            ),
            (
                json!([{"name": "other", "resources": {"cpu": "1500m", "memory": "1Gi"}}]),
                false,
            ),
            (
                json!([{"name": "main", "resources": {"cpu": "1500m", "memory": "1Gi"}, "x": 1}]),
                false,
            ),
            (json!([written[0].clone(), written[0].clone()]), false),
            (json!([]), false),
            (json!({"main": {}}), false),
            (json!(null), false),
        ];
        for (stored, same) in table {
            let object = json!({"metadata": {}, "status": {"resourceRequests": stored}});
            assert_eq!(
                requests_written(&object["status"]["resourceRequests"], &requests),
                same,
                "{stored}"
            );
            let status = pending_with_requests(&object, ("Pending", "m"), &requests, at(1))
                .expect("the Pending condition is new");
            assert_eq!(status.get("resourceRequests").is_none(), same, "{stored}");
            if !same {
                assert_eq!(status["resourceRequests"], written, "{stored}");
            }
        }
    }

    #[test]
    fn the_scheduler_records_total_requests_once() {
        let requests = [PodSetResources {
            name: "main".into(),
            requests: [("cpu".to_owned(), 3000), ("memory".to_owned(), 600 << 20)].into(),
            count: 3,
        }];
        let object = json!({"metadata": {}, "status": {}});
        let first =
            pending_with_requests(&object, ("Pending", "m"), &requests, at(1)).expect("new");
        assert_eq!(
            first["resourceRequests"],
            json!([{"name": "main", "resources": {"cpu": "3", "memory": "600Mi"}}])
        );
        let stored = json!({"metadata": {}, "status": first});
        assert_eq!(
            pending_with_requests(&stored, ("Pending", "m"), &requests, at(2)),
            None
        );
        let fewer = [PodSetResources {
            count: 1,
            requests: [("cpu".to_owned(), 1000)].into(),
            ..requests[0].clone()
        }];
        let changed =
            pending_with_requests(&stored, ("Pending", "m"), &fewer, at(3)).expect("changed");
        assert_eq!(
            changed["resourceRequests"][0]["resources"],
            json!({"cpu": "1"})
        );
        assert!(
            changed.get("conditions").is_none(),
            "conditions unchanged: {changed}"
        );
    }

    #[test]
    fn a_victim_is_evicted_once_and_released_with_the_eviction_message() {
        let object = json!({"metadata": {}, "status": {"admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        let status = preempted(
            &object,
            "InCohortReclamation",
            "Preempted to accommodate",
            at(1),
        )
        .expect("evicted");
        assert_eq!(condition(&status, "Evicted")["reason"], "Preempted");
        assert_eq!(
            condition(&status, "Preempted")["reason"],
            "InCohortReclamation"
        );
        let mut stored = object.clone();
        stored["status"]["conditions"] = status["conditions"].clone();
        assert_eq!(
            preempted(&stored, "InCohortReclamation", "again", at(2)),
            None
        );
        let released = released(&stored, at(3)).expect("released");
        assert_eq!(released["admission"], Value::Null);
        let reserved = condition(&released, "QuotaReserved");
        assert_eq!(
            (
                &reserved["status"],
                &reserved["reason"],
                &reserved["message"]
            ),
            (
                &json!("False"),
                &json!("PendingEvaluation"),
                &json!("Preempted to accommodate")
            )
        );
        assert_eq!(condition(&released, "Requeued")["status"], "True");
    }

    #[test]
    fn an_eviction_requeues_at_once_only_for_its_reasons() {
        let cases = [
            (EVICTED_BY_PREEMPTION, "True"),
            ("NodeFailures", "True"),
            (EVICTED_BY_NODE_MAINTENANCE, "True"),
            ("PodsReadyTimeout", "False"),
            ("Deactivated", "False"),
            ("ClusterQueueStopped", "False"),
        ];
        for (reason, want) in cases {
            let object = json!({"metadata": {}, "status": {"admission": {"clusterQueue": "cq"},
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
                    {"type": "Evicted", "status": "True", "reason": reason, "message": "why"}]}});
            let released = released(&object, at(1)).expect("released");
            let requeued = condition(&released, "Requeued");
            assert_eq!(
                (
                    &requeued["status"],
                    &requeued["reason"],
                    &requeued["message"]
                ),
                (&json!(want), &json!(reason), &json!("why")),
                "{reason}"
            );
            assert_eq!(condition(&released, "QuotaReserved")["status"], "False");
        }
    }

    #[test]
    fn queue_activity_follows_kueues_reasons() {
        let cases = [
            (
                cluster_queue_active(false, false, &[], &[]),
                ("True", "Ready", "Can admit new workloads"),
            ),
            (
                cluster_queue_active(false, true, &["a".into(), "b".into()], &[]),
                (
                    "False",
                    "Stopped",
                    "Can't admit new workloads: is stopped, references missing ResourceFlavor(s): a,b.",
                ),
            ),
            (
                cluster_queue_active(false, false, &["a".into()], &[]),
                (
                    "False",
                    "FlavorNotFound",
                    "Can't admit new workloads: references missing ResourceFlavor(s): a.",
                ),
            ),
            (
                cluster_queue_active(false, false, &[], &[("tas".into(), "default".into())]),
                (
                    "False",
                    "TopologyNotFound",
                    "Can't admit new workloads: there is no Topology \"default\" for TAS flavor \"tas\".",
                ),
            ),
            (
                local_queue_active(false, Some(true)),
                ("True", "Ready", "Can submit new workloads to localQueue"),
            ),
            (
                local_queue_active(true, Some(true)),
                ("False", "Stopped", "LocalQueue is stopped"),
            ),
            (
                local_queue_active(false, None),
                (
                    "False",
                    "ClusterQueueDoesNotExist",
                    "Can't submit new workloads to clusterQueue",
                ),
            ),
            (
                local_queue_active(false, Some(false)),
                (
                    "False",
                    "ClusterQueueIsInactive",
                    "Can't submit new workloads to clusterQueue",
                ),
            ),
        ];
        for ((status, reason, message), want) in cases {
            assert_eq!((status, reason, message.as_str()), want);
        }
    }

    #[test]
    fn a_cluster_queue_status_shows_borrowing_and_is_written_only_when_changed() {
        // Resources in the spec's order; the status sorts them by name, as Kueue does.
        let flavors = vec![(
            "default".to_owned(),
            vec!["memory".to_owned(), "cpu".to_owned()],
        )];
        let nominal: BTreeMap<FlavorResource, Amount> =
            [(FlavorResource::new("default", "cpu"), Amount::new(9000))].into();
        let mut usage = Usage::default();
        usage
            .reserved
            .set(FlavorResource::new("default", "cpu"), Amount::new(10_000));
        usage
            .admitted
            .set(FlavorResource::new("default", "cpu"), Amount::new(1000));
        let counts = Counts {
            pending: 1,
            reserving: 2,
            admitted: 1,
        };
        let active = cluster_queue_active(false, false, &[], &[]);
        let object = json!({"metadata": {}});
        let status = cluster_queue_status(
            &object,
            &flavors,
            Some(&nominal),
            counts,
            &usage,
            &active,
            Some(3),
            at(1),
        )
        .expect("new status");
        assert_eq!(status["fairSharing"], json!({"weightedShare": 3}));
        assert_eq!(status["pendingWorkloads"], 1);
        assert_eq!(status["reservingWorkloads"], 2);
        let cpu = &status["flavorsReservation"][0]["resources"][0];
        assert_eq!(
            (&cpu["total"], &cpu["borrowed"]),
            (&json!("10"), &json!("1"))
        );
        let memory = &status["flavorsUsage"][0]["resources"][1];
        assert_eq!(
            (&memory["total"], &memory["borrowed"]),
            (&json!("0"), &json!("0"))
        );
        // Outside a cohort nothing is borrowed.
        let alone = cluster_queue_status(
            &object,
            &flavors,
            None,
            counts,
            &usage,
            &active,
            None,
            at(1),
        )
        .expect("new status");
        assert_eq!(alone.get("fairSharing"), None, "fair sharing off");
        assert_eq!(
            alone["flavorsReservation"][0]["resources"][0]["borrowed"],
            "0"
        );
        let stored = json!({"metadata": {}, "status": status});
        let again = |share| {
            cluster_queue_status(
                &stored,
                &flavors,
                Some(&nominal),
                counts,
                &usage,
                &active,
                Some(share),
                at(2),
            )
        };
        assert_eq!(again(3), None);
        let moved = again(4).expect("the share moved");
        assert_eq!(moved["fairSharing"], json!({"weightedShare": 4}));
        let lq = local_queue_status(
            &object,
            &flavors,
            counts,
            &usage,
            &local_queue_active(false, Some(true)),
            None,
            at(1),
        )
        .expect("new");
        assert_eq!(
            lq["flavorsUsage"][0]["resources"][0],
            json!({"name": "cpu", "total": "1"})
        );
        assert_eq!(lq.get("fairSharing"), None);
    }
}
