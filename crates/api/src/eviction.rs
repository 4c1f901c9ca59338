//! The decisions of the `pods/eviction` subresource, as upstream's eviction REST storage
//! makes them: the delete options an Eviction carries, whether a pod's budget is checked at
//! all (not for pods that are not running), at most one PodDisruptionBudget per pod,
//! `unhealthyPodEvictionPolicy` for pods that are not Ready, and the budget's status update
//! (`disruptionsAllowed` decremented with the pod recorded in `disruptedPods`) or upstream's
//! 429 while the budget forbids it.
//!
//! Knows nothing about the store: the shell reads the pod and budgets, runs the status update
//! in one transaction and deletes the pod.

use serde_json::{Value, json};

use tessera_model::conditions::pod_is_ready;
use tessera_model::json::{int, int_or_zero};
use tessera_model::selector;

use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::meta_str;
use crate::write::DeleteOptions;

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
            .pointer("/deleteOptions/gracePeriodSeconds")
            .and_then(Value::as_i64),
        precondition_uid: eviction
            .pointer("/deleteOptions/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version: eviction
            .pointer("/deleteOptions/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..DeleteOptions::default()
    }
}

/// Whether evicting the pod consults its disruption budget: only for running pods.
pub fn checks_budget(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
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
        .filter(|budget| selector::matches(budget.pointer("/spec/selector"), &labels))
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
            .pointer("/spec/unhealthyPodEvictionPolicy")
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
