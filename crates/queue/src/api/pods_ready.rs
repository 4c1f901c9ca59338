//! Kueue's waitForPodsReady: the Workload's `PodsReady` condition as the Job integration
//! writes it (`generatePodsReadyCondition`, `Job.PodsReady`), and what the workload
//! controller does with it (`reconcileNotReadyTimeout`, `triggerDeactivation`,
//! `UpdateRequeueState`, the backoff's end): an admitted Workload that is not `PodsReady`
//! within `timeout` (or, once running, within `recoveryTimeout` of a pod failing) is evicted
//! with `PodsReadyTimeout` and a requeue backoff in `status.requeueState`; past
//! `backoffLimitCount` requeues it is marked `DeactivationTarget` instead, deactivated
//! (`spec.active: false`) and evicted with `DeactivatedDueToRequeuingLimitExceeded`.
//!
//! The backoff is Kueue's `base × 2^(count−1)` capped at `backoffMaxSeconds`, without
//! Kueue's jitter (at most 0.01% of it), so the same inputs always give the same `requeueAt`.
//! Knows nothing about writing or watching; time is an argument.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::{conditions, json as json_read, time};

use crate::api::status::{self, ADMITTED, EVICTED, Event, QUOTA_RESERVED, REQUEUED};
use crate::config::WaitForPodsReady;

/// `PodsReady`.
pub const PODS_READY: &str = "PodsReady";
/// `DeactivationTarget`: the workload controller deactivates a Workload with it.
pub const DEACTIVATION_TARGET: &str = "DeactivationTarget";
/// The `Evicted` reason after the timeout (`WorkloadEvictedByPodsReadyTimeout`).
pub const PODS_READY_TIMEOUT: &str = "PodsReadyTimeout";
/// The `DeactivationTarget` reason past `backoffLimitCount` (`WorkloadRequeuingLimitExceeded`).
pub const REQUEUING_LIMIT_EXCEEDED: &str = "RequeuingLimitExceeded";
/// `PodsReady=False` before the pods first become ready (`WorkloadWaitForStart`).
pub const WAIT_FOR_START: &str = "WaitForStart";
/// `PodsReady=False` after a pod failed (`WorkloadWaitForRecovery`).
pub const WAIT_FOR_RECOVERY: &str = "WaitForRecovery";
/// The `QuotaReserved=False` reason while blockAdmission waits
/// (`WorkloadQuotaReservedReasonWaitingForPodsReady`).
pub const WAITING_FOR_PODS_READY: &str = "WaitingForPodsReady";
/// Its message.
pub const WAITING_FOR_PODS_READY_MESSAGE: &str =
    "waiting for all admitted workloads to be in PodsReady condition";

const NOT_READY: &str = "Not all pods are ready or succeeded";
const WAITING_FOR_RECOVERY: &str = "At least one pod has failed, waiting for recovery";
const READY: &str = "All pods reached readiness and the workload is running";

/// Whether a batch/v1 Job's pods are ready (`Job.PodsReady`): ready, succeeded and
/// succeeded-but-uncounted pods reach its pod count.
pub fn job_pods_ready(job: &Value) -> bool {
    let count = |pointer: &str| json_read::int(job, pointer).unwrap_or(0);
    let uncounted = job
        .pointer("/status/uncountedTerminatedPods/succeeded")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let done = count("/status/ready") + count("/status/succeeded") + uncounted as i64;
    done >= i64::from(crate::api::job::pods_count(
        job.get("spec").unwrap_or(&Value::Null),
    ))
}

/// The `PodsReady` condition the Job integration writes for a Workload whose job's pods are
/// (`pods_ready`) or are not ready (`generatePodsReadyCondition`); the new status when its
/// type, status or reason changes (`HasConditionWithTypeAndReason`), else `None`.
pub fn pods_ready_status(workload: &Value, pods_ready: bool, now: SystemTime) -> Option<Value> {
    let current = conditions::find(workload, PODS_READY);
    let reason_now = current.and_then(|c| c["reason"].as_str());
    let (state, reason, message) = if !conditions::is_true(workload, ADMITTED) {
        ("False", WAIT_FOR_START, NOT_READY)
    } else if pods_ready {
        let reason = match reason_now {
            Some(WAIT_FOR_RECOVERY | "Recovered") => "Recovered",
            _ => "Started",
        };
        ("True", reason, READY)
    } else {
        match current {
            Some(c) if c["status"] == "True" || reason_now == Some(WAIT_FOR_RECOVERY) => {
                ("False", WAIT_FOR_RECOVERY, WAITING_FOR_RECOVERY)
            }
            _ => ("False", WAIT_FOR_START, NOT_READY),
        }
    };
    let same = current.is_some_and(|c| c["status"] == state && reason_now == Some(reason));
    if same {
        return None;
    }
    let (list, _) = status::set_all(workload, &[(PODS_READY, state, reason, message)], now);
    Some(json!({"conditions": list}))
}

/// The requeue backoff after `count` requeues (`UpdateRequeueState` without jitter):
/// `base × 2^(count−1)`, at most `max` seconds.
pub fn backoff(count: i32, base_seconds: i32, max_seconds: i32) -> Duration {
    let base = f64::from(base_seconds.max(0));
    let cap = f64::from(max_seconds.max(0));
    let exponent = count.saturating_sub(1).clamp(0, 62);
    Duration::from_secs_f64((base * 2f64.powi(exponent)).min(cap))
}

fn transition_time(object: &Value, kind: &str) -> Option<SystemTime> {
    conditions::find(object, kind)?
        .get("lastTransitionTime")?
        .as_str()
        .and_then(time::parse_timestamp)
}

fn requeue_count(object: &Value) -> i32 {
    json_read::int(object, "/status/requeueState/count")
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or(0)
}

/// The workload controller's answer to an admitted Workload whose pods are late.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeout {
    /// The status to write.
    pub status: Value,
    /// The event recorded with it, if any.
    pub event: Option<Event>,
}

/// What the workload controller does to an active Workload holding quota at `now`
/// (`reconcileNotReadyTimeout`): nothing while it is not admitted, ready, evicted or within
/// its timeout; past it, `DeactivationTarget` when the requeues are spent, else the eviction
/// with `PodsReadyTimeout` and the next `requeueState`.
pub fn not_ready_timeout(
    object: &Value,
    config: &WaitForPodsReady,
    now: SystemTime,
) -> Option<Timeout> {
    if conditions::is_true(object, EVICTED) || !conditions::is_true(object, ADMITTED) {
        return None;
    }
    let ready = conditions::find(object, PODS_READY);
    let (since, limit) = match ready.map(|c| (c["status"].as_str(), c["reason"].as_str())) {
        Some((Some("True"), _)) => return None,
        None | Some((_, Some(WAIT_FOR_START | "PodsReady"))) => {
            (transition_time(object, ADMITTED)?, config.timeout)
        }
        Some((_, Some(WAIT_FOR_RECOVERY))) => (
            transition_time(object, PODS_READY)?,
            config.recovery_timeout?,
        ),
        Some(_) => return None,
    };
    if now.duration_since(since).unwrap_or_default() < limit {
        return None;
    }
    let count = requeue_count(object);
    let strategy = &config.requeuing;
    if strategy
        .backoff_limit_count
        .is_some_and(|limit| count + 1 > limit)
    {
        if conditions::is_true(object, DEACTIVATION_TARGET) {
            return None;
        }
        let (list, _) = status::set_all(
            object,
            &[(
                DEACTIVATION_TARGET,
                "True",
                REQUEUING_LIMIT_EXCEEDED,
                "exceeding the maximum number of re-queuing retries",
            )],
            now,
        );
        return Some(Timeout {
            status: json!({"conditions": list}),
            event: None,
        });
    }
    let key = format!(
        "{}/{}",
        json_read::text(object, "/metadata/namespace"),
        json_read::text(object, "/metadata/name")
    );
    let message = format!("Exceeded the PodsReady timeout {key}");
    let mut written = status::evicted(object, PODS_READY_TIMEOUT, &message, now)?;
    let wait = backoff(
        count + 1,
        strategy.backoff_base_seconds,
        strategy.backoff_max_seconds,
    );
    written["requeueState"] = json!({
        "count": count + 1,
        "requeueAt": time::timestamp(now + wait),
    });
    let reason = format!("EvictedDueTo{PODS_READY_TIMEOUT}");
    Some(Timeout {
        status: written,
        event: Some(Event::workload(object, "Normal", &reason, &message)),
    })
}

/// Whether an active Workload marked `DeactivationTarget` must be deactivated
/// (`spec.active: false`, the workload controller's first step).
pub fn must_deactivate(object: &Value, active: bool) -> bool {
    active && conditions::is_true(object, DEACTIVATION_TARGET)
}

/// The eviction of a deactivated Workload holding quota that its `DeactivationTarget` names
/// the cause of: `Evicted=True` `DeactivatedDueTo<reason>` "The workload is deactivated due
/// to <message>", the target and `requeueState` removed. `None` without a target or when
/// already evicted.
pub fn deactivated_by_target(object: &Value, now: SystemTime) -> Option<(Value, Event)> {
    let target = conditions::find(object, DEACTIVATION_TARGET)?;
    if conditions::is_true(object, EVICTED) {
        return None;
    }
    let cause = target["reason"].as_str().unwrap_or_default();
    let reason = format!("DeactivatedDueTo{cause}");
    let message = format!(
        "The workload is deactivated due to {}",
        target["message"].as_str().unwrap_or_default()
    );
    let (mut list, _) = status::set_all(object, &[(EVICTED, "True", &reason, &message)], now);
    list.retain(|c| c["type"] != DEACTIVATION_TARGET);
    let event = Event::workload(object, "Normal", &format!("EvictedDueTo{reason}"), &message);
    Some((json!({"conditions": list, "requeueState": null}), event))
}

/// The end of a pending Workload's requeue backoff (the workload controller's active
/// branch): once `requeueAt` has passed it is cleared, and `Requeued=False` after a
/// PodsReady timeout or an admission check turns True `BackoffFinished`. `None` while the
/// backoff lasts or when nothing changes.
pub fn backoff_finished(object: &Value, now: SystemTime) -> Option<Value> {
    if conditions::is_true(object, QUOTA_RESERVED) {
        return None;
    }
    let requeue_at = object
        .pointer("/status/requeueState/requeueAt")
        .and_then(Value::as_str)
        .and_then(time::parse_timestamp);
    if requeue_at.is_some_and(|at| at > now) {
        return None;
    }
    let held = conditions::find(object, REQUEUED).is_some_and(|c| {
        c["status"] == "False"
            && matches!(
                c["reason"].as_str(),
                Some(PODS_READY_TIMEOUT | "AdmissionCheck")
            )
    });
    let mut written = json!({});
    if requeue_at.is_some() {
        written["requeueState"] = json!({"count": requeue_count(object), "requeueAt": null});
    }
    if held {
        let (list, _) = status::set_all(
            object,
            &[(
                REQUEUED,
                "True",
                "BackoffFinished",
                "The workload backoff was finished",
            )],
            now,
        );
        written["conditions"] = json!(list);
    }
    written
        .as_object()
        .is_some_and(|w| !w.is_empty())
        .then_some(written)
}

/// Whether an admitted Workload holds back blockAdmission: admitted and not `PodsReady`
/// (the cache's `PodsReadyForAllAdmittedWorkloads`).
pub fn blocks_admission(object: &Value) -> bool {
    conditions::is_true(object, ADMITTED)
        && !conditions::is_true(object, EVICTED)
        && !conditions::is_true(object, PODS_READY)
}

#[cfg(test)]
#[path = "pods_ready_tests.rs"]
mod tests;
