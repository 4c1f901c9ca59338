//! Kueue's MultiKueue admission check (`pkg/controller/admissionchecks/multikueue`): the
//! MultiKueueCluster `Active` condition from the outcome of connecting to a worker
//! ([`cluster`]), the AdmissionCheck `Active` condition from its MultiKueueConfig's clusters
//! ([`check`]), the Workload reconciler that mirrors a manager's Workload to the workers,
//! lets the first worker to admit it win, withdraws the copies on the others, mirrors status
//! back and retries when the admitting worker is lost ([`workload`]), and the Job and JobSet
//! adapters that copy the owner to the winner and its status back ([`adapter`]).
//!
//! Pure: objects are JSON values handed in (the workers' as last read, or the worker as
//! unreachable), writes are values handed back, time is an argument. Knows nothing about
//! kubeconfigs, clients or watches (the shell's business) nor about how Retry evicts and
//! requeues ([`crate::api::admission_checks`]).

pub mod adapter;
pub mod check;
pub mod cluster;
pub mod workload;

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::{conditions, time};

pub use adapter::OwnerKind;
pub use check::{active_status, config_clusters};
pub use cluster::{Connection, cluster_status, kubeconfig_secret};
pub use workload::{Group, Worker, Write, reconcile};

/// The label on every object MultiKueue creates on a worker (`MultiKueueOriginLabel`).
pub const ORIGIN_LABEL: &str = "kueue.x-k8s.io/multikueue-origin";
/// Kueue's default origin (`multiKueue.origin`).
pub const DEFAULT_ORIGIN: &str = "multikueue";
/// Kueue's default `multiKueue.workerLostTimeout`.
pub const DEFAULT_WORKER_LOST_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// The kind an AdmissionCheck's parameters name.
pub const CONFIG_KIND: &str = "MultiKueueConfig";
/// The MultiKueueCluster condition.
pub const CLUSTER_ACTIVE: &str = "Active";
/// The reason of the events MultiKueue records on Workloads.
pub const EVENT_REASON: &str = "MultiKueue";

/// The object's new `status` when its condition `kind` differs from `(status, reason,
/// message)` or from its generation (Kueue's `cmpConditionState` then `SetStatusCondition`
/// with `observedGeneration`); `None` when it is up to date.
fn changed_condition(
    object: &Value,
    kind: &str,
    (status, reason, message): (&str, &str, &str),
    now: SystemTime,
) -> Option<Value> {
    let generation = object.pointer("/metadata/generation").cloned();
    let up_to_date = conditions::find(object, kind).is_some_and(|c| {
        c["status"] == status
            && c["reason"] == reason
            && c["message"] == message
            && c.get("observedGeneration") == generation.as_ref()
    });
    if up_to_date {
        return None;
    }
    let mut list: Vec<Value> = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions::set(
        &mut list,
        kind,
        status,
        reason,
        message,
        &time::timestamp(now),
    );
    if let (Some(condition), Some(generation)) =
        (list.iter_mut().find(|c| c["type"] == kind), generation)
    {
        condition["observedGeneration"] = generation;
    }
    Some(json!({ "conditions": list }))
}

#[cfg(test)]
mod tests;
