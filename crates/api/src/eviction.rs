//! The decisions of the `pods/eviction` subresource, as upstream's eviction REST storage
//! makes them: the delete options an Eviction carries, whether a pod's budget is checked at
//! all (not for pods that are not running), at most one PodDisruptionBudget per pod,
//! `unhealthyPodEvictionPolicy` for pods that are not Ready, and the budget's status update
//! (`disruptionsAllowed` decremented with the pod recorded in `disruptedPods`) or upstream's
//! 429 while the budget forbids it, and the `DisruptionTarget` condition the pod gets before
//! it is deleted (`addConditionAndDeletePod`, PodDisruptionConditions GA since 1.31).
//!
//! Knows nothing about the store: the shell reads the pod and budgets, runs the status updates
//! in one transaction each and deletes the pod.

use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use tessera_model::conditions::pod_is_ready;
use tessera_model::json::{int, int_or_zero};
use tessera_model::selector;

use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::meta_str;
use crate::pod_conditions::update_pod_condition;
use crate::write::DeleteOptions;

/// The pod condition an eviction sets (`DisruptionTarget`).
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Its reason (`EvictionByEvictionAPI`).
pub const EVICTION_BY_EVICTION_API: &str = "EvictionByEvictionAPI";
/// Its message.
pub const EVICTION_MESSAGE: &str = "Eviction API: evicting";

fn budget_error(message: &str, cause: String, retry: u32) -> ApiError {
    let mut error = ApiError::too_many_requests(message, retry);
    if let Some(details) = error.details.as_mut() {
        details.causes.push(Cause {
            reason: "DisruptionBudget",
            field: String::new(),
            message: cause,
        });
    }
    error
}

const BLOCKED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The delete an Eviction asks for: its grace period and preconditions.
pub fn delete_options(eviction: &Value) -> DeleteOptions {
    DeleteOptions {
        grace_period_seconds: eviction
            .at("/deleteOptions/gracePeriodSeconds")
            .and_then(Value::as_i64),
        precondition_uid: eviction
            .at("/deleteOptions/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version: eviction
            .at("/deleteOptions/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..DeleteOptions::default()
    }
}

/// Whether an Eviction asks for a dry run (`deleteOptions.dryRun: [All]`); the request's
/// `dryRun` query counts too (upstream's `propagateDryRun`), which the shell reads.
pub fn dry_run(eviction: &Value) -> bool {
    eviction
        .at("/deleteOptions/dryRun")
        .and_then(Value::as_array)
        .is_some_and(|d| d.iter().any(|v| v == "All"))
}

/// Whether evicting the pod consults its disruption budget: only for running pods.
pub fn checks_budget(pod: &Value) -> bool {
    let phase = pod
        .at("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let not_running = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || meta_str(pod, "deletionTimestamp").is_some();
    !not_running
}

/// The one budget of `budgets` (a namespace's PodDisruptionBudgets) that selects the pod,
/// whose status must then be updated by [`take_disruption`]; `None` when the eviction needs
/// no budget update (no budget selects the pod, or an unhealthy pod may go).
pub fn budget_to_charge(budgets: Vec<Value>, pod: &Value) -> ApiResult<Option<Value>> {
    let labels = selector::labels(pod);
    let mut matching: Vec<Value> = budgets
        .into_iter()
        .filter(|budget| selector::matches(budget.at("/spec/selector"), &labels))
        .collect();
    let budget = match matching.len() {
        0 => return Ok(None),
        1 => matching.remove(0),
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    if !pod_is_ready(pod) {
        let policy = budget
            .at("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("IfHealthyBudget");
        let current = int_or_zero(&budget, "/status/currentHealthy");
        let desired = int_or_zero(&budget, "/status/desiredHealthy");
        if policy == "AlwaysAllow" || (current >= desired && desired > 0) {
            return Ok(None);
        }
    }
    Ok(Some(budget))
}

/// The pod as the eviction stores it before deleting it (upstream's `addConditionAndDeletePod`):
/// the delete's preconditions checked against the stored pod (409 Conflict, with upstream's
/// messages), then its `DisruptionTarget` condition set to True with
/// [`EVICTION_BY_EVICTION_API`] as `podutil.UpdatePodCondition` sets a condition: replaced
/// whole, `lastTransitionTime` `now` (a timestamp) unless the status stays as it was.
pub fn with_disruption_target(
    current: &Value,
    options: &DeleteOptions,
    now: &str,
) -> ApiResult<Value> {
    let name = meta_str(current, "name").unwrap_or_default();
    let conflict = |detail: String| ApiError::conflict("", "Pod", name, &detail);
    let uid = meta_str(current, "uid").unwrap_or_default();
    if let Some(wanted) = options
        .precondition_uid
        .as_deref()
        .filter(|u| !u.is_empty())
        && wanted != uid
    {
        return Err(conflict(format!(
            "the UID in the precondition ({wanted}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        )));
    }
    let version = meta_str(current, "resourceVersion").unwrap_or_default();
    if let Some(wanted) = options
        .precondition_resource_version
        .as_deref()
        .filter(|v| !v.is_empty())
        && wanted != version
    {
        return Err(conflict(format!(
            "the ResourceVersion in the precondition ({wanted}) does not match the ResourceVersion in record ({version}). The object might have been modified"
        )));
    }
    let condition = json!({"type": DISRUPTION_TARGET, "status": "True",
        "lastProbeTime": null, "reason": EVICTION_BY_EVICTION_API, "message": EVICTION_MESSAGE});
    let mut next = current.clone();
    update_pod_condition(&mut next, condition, now);
    Ok(next)
}

/// The budget's next status after one disruption of `pod_name` at `now` (a timestamp), or
/// the error that refuses the eviction.
pub fn take_disruption(
    current: &Value,
    budget_name: &str,
    pod_name: &str,
    now: &str,
) -> ApiResult<Value> {
    let generation = int_or_zero(current, "/metadata/generation");
    let observed = int(current, "/status/observedGeneration").unwrap_or(-1);
    if observed < generation {
        return Err(budget_error(
            BLOCKED,
            format!("The disruption budget {budget_name} is still being processed by the server."),
            10,
        ));
    }
    let allowed = int_or_zero(current, "/status/disruptionsAllowed");
    if allowed < 0 {
        return Err(ApiError::forbidden(
            "policy",
            "poddisruptionbudgets",
            budget_name,
            "pdb disruptions allowed is negative",
        ));
    }
    if allowed == 0 {
        let desired = int_or_zero(current, "/status/desiredHealthy");
        let healthy = int_or_zero(current, "/status/currentHealthy");
        return Err(budget_error(
            BLOCKED,
            format!(
                "The disruption budget {budget_name} needs {desired} healthy pods and has {healthy} currently"
            ),
            0,
        ));
    }
    let mut next = current.clone();
    next["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if !next["status"]["disruptedPods"].is_object() {
        next["status"]["disruptedPods"] = json!({});
    }
    next["status"]["disruptedPods"][pod_name] = json!(now);
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-02T03:04:05Z";

    fn pod(conditions: Value) -> Value {
        json!({"metadata": {"name": "p", "uid": "u1", "resourceVersion": "7"},
            "status": {"phase": "Running", "conditions": conditions}})
    }

    fn target(pod: &Value) -> Option<&Value> {
        pod["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == DISRUPTION_TARGET)
    }

    #[test]
    fn the_disruption_target_is_set_as_update_pod_condition_does() {
        let ready = json!({"type": "Ready", "status": "True"});
        let earlier = "2025-12-31T00:00:00Z";
        // (conditions before, lastTransitionTime after, conditions after)
        let cases = [
            (json!([]), NOW, 1),
            (json!([ready.clone()]), NOW, 2),
            // Already True (another reason): the transition time stays, the rest is replaced.
            (
                json!([ready.clone(), {"type": DISRUPTION_TARGET, "status": "True",
                    "reason": "PreemptionByScheduler", "message": "m",
                    "lastTransitionTime": earlier, "lastProbeTime": earlier}]),
                earlier,
                2,
            ),
            // False before: a transition.
            (
                json!([{"type": DISRUPTION_TARGET, "status": "False",
                    "lastTransitionTime": earlier}]),
                NOW,
                1,
            ),
            (Value::Null, NOW, 1),
        ];
        for (before, transition, count) in cases {
            let next = with_disruption_target(&pod(before.clone()), &DeleteOptions::default(), NOW)
                .expect("no preconditions");
            let list = next["status"]["conditions"].as_array().expect("a list");
            assert_eq!(list.len(), count, "{before}");
            let condition = target(&next).expect("set");
            assert_eq!(
                condition,
                &json!({"type": DISRUPTION_TARGET, "status": "True", "lastProbeTime": null,
                    "lastTransitionTime": transition, "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting"}),
                "{before}"
            );
            assert_eq!(
                next["status"]["phase"], "Running",
                "the rest of the status stays"
            );
        }
        // A pod without a status gets one.
        let bare = json!({"metadata": {"name": "p"}});
        let next = with_disruption_target(&bare, &DeleteOptions::default(), NOW).expect("set");
        assert!(target(&next).is_some());
    }

    #[test]
    fn preconditions_are_checked_against_the_stored_pod() {
        let options = |uid: Option<&str>, version: Option<&str>| DeleteOptions {
            precondition_uid: uid.map(str::to_string),
            precondition_resource_version: version.map(str::to_string),
            ..DeleteOptions::default()
        };
        let cases = [
            (options(Some("u1"), Some("7")), None),
            (options(Some(""), Some("")), None),
            (
                options(Some("u2"), None),
                Some(
                    "Operation cannot be fulfilled on Pod \"p\": the UID in the precondition (u2) does not match the UID in record (u1). The object might have been deleted and then recreated",
                ),
            ),
            (
                options(None, Some("6")),
                Some(
                    "Operation cannot be fulfilled on Pod \"p\": the ResourceVersion in the precondition (6) does not match the ResourceVersion in record (7). The object might have been modified",
                ),
            ),
        ];
        for (options, want) in cases {
            let got = with_disruption_target(&pod(json!([])), &options, NOW);
            match want {
                None => assert!(got.is_ok(), "{options:?}"),
                Some(message) => {
                    let error = got.expect_err("a conflict");
                    assert_eq!(error.code, 409, "{options:?}");
                    assert_eq!(error.message, message);
                }
            }
        }
    }

    #[test]
    fn dry_run_is_read_from_the_delete_options() {
        let cases = [
            (json!({}), false),
            (json!({"deleteOptions": {}}), false),
            (json!({"deleteOptions": {"dryRun": []}}), false),
            (json!({"deleteOptions": {"dryRun": ["All"]}}), true),
        ];
        for (eviction, want) in cases {
            assert_eq!(dry_run(&eviction), want, "{eviction}");
        }
    }
}
