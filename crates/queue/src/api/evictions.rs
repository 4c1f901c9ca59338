//! What Kueue's workload controller evicts and lets go again (`workload_controller.go`): a
//! Workload holding quota that is deactivated (`spec.active: false`) is evicted with
//! `Deactivated`; an admitted one whose LocalQueue or ClusterQueue is stopped with
//! `HoldAndDrain` with `LocalQueueStopped` or `ClusterQueueStopped`. Such evictions leave
//! `Requeued=False` once the quota is released (the Job integration's step); when the stopped
//! queue runs again, `Requeued` turns True (`LocalQueueRestarted`, `ClusterQueueRestarted`)
//! and the Workload queues again.
//!
//! Knows nothing about writing: it names the condition to set. Deactivation's underlying
//! causes (`DeactivationTarget`) and the eviction of pending deactivated Workloads are not
//! modelled.

use serde_json::Value;
use tessera_model::conditions;

use crate::api::status::{ADMITTED, EVICTED, REQUEUED};
use crate::queue::StopPolicy;

/// The stop policies a Workload's queues have; `None` for a queue that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queues {
    /// Its LocalQueue's.
    pub local_queue: Option<StopPolicy>,
    /// Its ClusterQueue's.
    pub cluster_queue: Option<StopPolicy>,
}

/// The `Evicted` reason and message for a Workload holding quota, if it must go.
pub fn eviction(
    object: &Value,
    active: bool,
    queues: Queues,
) -> Option<(&'static str, &'static str)> {
    if conditions::is_true(object, EVICTED) {
        return None;
    }
    if !active {
        return Some(("Deactivated", "The workload is deactivated"));
    }
    if !conditions::is_true(object, ADMITTED) {
        return None;
    }
    if queues.local_queue == Some(StopPolicy::HoldAndDrain) {
        return Some(("LocalQueueStopped", "The LocalQueue is stopped"));
    }
    if queues.cluster_queue == Some(StopPolicy::HoldAndDrain) {
        return Some(("ClusterQueueStopped", "The ClusterQueue is stopped"));
    }
    None
}

/// The `Requeued=True` reason and message for a pending Workload whose eviction by a stopped
/// queue is over, if any.
pub fn restart(object: &Value, queues: Queues) -> Option<(&'static str, &'static str)> {
    let requeued = conditions::find(object, REQUEUED).filter(|c| c["status"] == "False")?;
    match requeued["reason"].as_str() {
        Some("LocalQueueStopped") if queues.local_queue == Some(StopPolicy::None) => Some((
            "LocalQueueRestarted",
            "The LocalQueue was restarted after being stopped",
        )),
        Some("ClusterQueueStopped") if queues.cluster_queue == Some(StopPolicy::None) => Some((
            "ClusterQueueRestarted",
            "The ClusterQueue was restarted after being stopped",
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(conditions: &[(&str, &str, &str)]) -> Value {
        let list: Vec<Value> = conditions
            .iter()
            .map(|(kind, status, reason)| json!({"type": kind, "status": status, "reason": reason}))
            .collect();
        json!({"status": {"conditions": list}})
    }

    const RUNNING: Queues = Queues {
        local_queue: Some(StopPolicy::None),
        cluster_queue: Some(StopPolicy::None),
    };

    #[test]
    fn deactivated_and_drained_workloads_are_evicted_once() {
        let admitted = with(&[("QuotaReserved", "True", ""), ("Admitted", "True", "")]);
        let reserved = with(&[("QuotaReserved", "True", "")]);
        let evicted = with(&[("Admitted", "True", ""), ("Evicted", "True", "Preempted")]);
        let drained_lq = Queues {
            local_queue: Some(StopPolicy::HoldAndDrain),
            ..RUNNING
        };
        let drained_cq = Queues {
            cluster_queue: Some(StopPolicy::HoldAndDrain),
            ..RUNNING
        };
        let held = Queues {
            cluster_queue: Some(StopPolicy::Hold),
            ..RUNNING
        };
        let cases = [
            (&admitted, true, RUNNING, None),
            (&admitted, false, RUNNING, Some("Deactivated")),
            (&reserved, false, RUNNING, Some("Deactivated")),
            (&admitted, true, drained_lq, Some("LocalQueueStopped")),
            (&admitted, true, drained_cq, Some("ClusterQueueStopped")),
            // Hold keeps what runs; only admitted Workloads are drained.
            (&admitted, true, held, None),
            (&reserved, true, drained_cq, None),
            (&evicted, false, drained_cq, None),
        ];
        for (object, active, queues, want) in cases {
            let got = eviction(object, active, queues).map(|(reason, _)| reason);
            assert_eq!(got, want, "{object} active={active} {queues:?}");
        }
    }

    #[test]
    fn a_restarted_queue_requeues_what_it_drained() {
        let by_lq = with(&[("Requeued", "False", "LocalQueueStopped")]);
        let by_cq = with(&[("Requeued", "False", "ClusterQueueStopped")]);
        let preempted = with(&[("Requeued", "True", "Preempted")]);
        let still = Queues {
            local_queue: Some(StopPolicy::Hold),
            ..RUNNING
        };
        let cases = [
            (&by_lq, RUNNING, Some("LocalQueueRestarted")),
            (&by_lq, still, None),
            (&by_cq, RUNNING, Some("ClusterQueueRestarted")),
            (&preempted, RUNNING, None),
        ];
        for (object, queues, want) in cases {
            assert_eq!(
                restart(object, queues).map(|(reason, _)| reason),
                want,
                "{object}"
            );
        }
    }
}
