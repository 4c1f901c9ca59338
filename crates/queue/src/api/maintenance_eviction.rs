//! Node maintenance through the queue manager: of the pods a maintenance step must move off a
//! node, which belong to a Kueue Workload holding quota, and the eviction each such Workload
//! gets instead of its pods being evicted one by one — `Evicted=True` with
//! [`EVICTED_BY_NODE_MAINTENANCE`], written through its status as Kueue's own preemption
//! writes `Preempted`, so the job framework stops the job, releases the quota and requeues the
//! Workload (`status::released` sets `Requeued=True` for this reason as for a preemption).
//!
//! A pod belongs to a Workload when the pod itself (Kueue's Pod integration) or its controller
//! owner (a Job, …) is one of the Workload's owners, matched by UID in the pod's namespace, or
//! else when its `kueue.x-k8s.io/workload` annotation (set on the pod templates of the jobs
//! Kueue starts) names the Workload — the way a JobSet's pods, owned by its child Jobs, are
//! found. A Workload holds quota while `QuotaReserved` is True and it is neither finished nor
//! being deleted.
//!
//! Knows nothing about nodes, plans or the Eviction API: the maintenance controller's shell
//! hands in the pods to move and the Workloads, evicts the rest through `pods/eviction` and
//! writes what this answers.

use std::collections::BTreeSet;
use std::time::SystemTime;

use serde_json::Value;
use tessera_model::{conditions, json as json_read};

use crate::api::status::{
    self, EVICTED, EVICTED_BY_NODE_MAINTENANCE, Event, FINISHED, QUOTA_RESERVED,
};
use crate::api::tas::WORKLOAD_ANNOTATION;

/// A namespaced object's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl Key {
    fn of(object: &Value) -> Key {
        Key {
            namespace: json_read::text(object, "/metadata/namespace").to_owned(),
            name: json_read::text(object, "/metadata/name").to_owned(),
        }
    }
}

/// One Workload's eviction: the status to merge into it (written with `resource_version` as
/// its precondition) and the event Kueue records with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Eviction {
    /// The Workload.
    pub workload: Key,
    /// The resourceVersion the status was computed from.
    pub resource_version: String,
    /// The status to merge (its `conditions`).
    pub status: Value,
    /// `EvictedDueToNodeMaintenance`, as Kueue's `reportEvictedWorkload` records an eviction.
    pub event: Event,
}

/// How the pods of one maintenance step leave their node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Moves {
    /// Pods of no Workload holding quota: through the Eviction API, as before.
    pub by_api: Vec<Key>,
    /// The Workloads to evict (once each; none already evicted).
    pub evictions: Vec<Eviction>,
    /// Pods of Workloads holding quota that still run (neither terminating nor finished): the
    /// node is not yet evicted while any is left.
    pub held: Vec<Key>,
}

/// The `Evicted` message of a Workload moved off `node` for the maintenance plan `plan`
/// (`None` when the plan is not known).
pub fn message(node: &str, plan: Option<&str>) -> String {
    match plan {
        Some(plan) => format!("The node {node} is under maintenance by the plan {plan}"),
        None => format!("The node {node} is under maintenance"),
    }
}

fn holds_quota(workload: &Value) -> bool {
    conditions::is_true(workload, QUOTA_RESERVED)
        && !conditions::is_true(workload, FINISHED)
        && workload.pointer("/metadata/deletionTimestamp").is_none()
}

fn owner_uids(object: &Value, controller_only: bool) -> impl Iterator<Item = &str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |r| !controller_only || r["controller"] == true)
        .filter_map(|r| r["uid"].as_str())
        .filter(|uid| !uid.is_empty())
}

/// The Workload holding quota that `pod` belongs to, among `workloads`.
pub fn workload_of<'a>(pod: &Value, workloads: &'a [Value]) -> Option<&'a Value> {
    let namespace = json_read::text(pod, "/metadata/namespace");
    let uid = json_read::text(pod, "/metadata/uid");
    let mut owners: BTreeSet<&str> = owner_uids(pod, true).collect();
    if !uid.is_empty() {
        owners.insert(uid);
    }
    let annotated = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(WORKLOAD_ANNOTATION))
        .and_then(Value::as_str);
    let candidates = || {
        workloads
            .iter()
            .filter(|w| json_read::text(w, "/metadata/namespace") == namespace)
            .filter(|w| holds_quota(w))
    };
    candidates()
        .find(|w| owner_uids(w, false).any(|uid| owners.contains(uid)))
        .or_else(|| {
            let name = annotated?;
            candidates().find(|w| json_read::text(w, "/metadata/name") == name)
        })
}

fn runs(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && !matches!(
            json_read::text(pod, "/status/phase"),
            "Succeeded" | "Failed"
        )
}

/// How `pods` (those a maintenance step moves off `node` for `plan`) leave it, given the
/// cluster's `workloads`; `now` stamps the conditions.
pub fn moves(
    pods: &[&Value],
    workloads: &[Value],
    (node, plan): (&str, Option<&str>),
    now: SystemTime,
) -> Moves {
    let mut moves = Moves::default();
    let text = message(node, plan);
    let mut evicted = BTreeSet::new();
    for pod in pods {
        let Some(workload) = workload_of(pod, workloads) else {
            moves.by_api.push(Key::of(pod));
            continue;
        };
        if !runs(pod) {
            continue;
        }
        moves.held.push(Key::of(pod));
        let key = Key::of(workload);
        if conditions::is_true(workload, EVICTED) || !evicted.insert(key.clone()) {
            continue;
        }
        if let Some(status) = status::evicted(workload, EVICTED_BY_NODE_MAINTENANCE, &text, now) {
            let reason = format!("EvictedDueTo{EVICTED_BY_NODE_MAINTENANCE}");
            moves.evictions.push(Eviction {
                workload: key,
                resource_version: json_read::text(workload, "/metadata/resourceVersion").to_owned(),
                status,
                event: Event::workload(workload, "Normal", &reason, &text),
            });
        }
    }
    moves
}

#[cfg(test)]
#[path = "maintenance_eviction_tests.rs"]
mod tests;
