//! The `pods/eviction` subresource: a delete that honours PodDisruptionBudgets exactly as
//! upstream's eviction REST storage does — at most one budget per pod, `disruptionsAllowed`
//! checked and decremented atomically with the pod recorded in `disruptedPods`, 429 with
//! upstream's message while the budget forbids it, `unhealthyPodEvictionPolicy` for pods that
//! are not Ready, and no budget check for pods that are not running.

use serde_json::{Value, json};

use tessera_model::selector;

use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::meta_str;
use crate::objects::{DeleteOptions, Objects, Part};
use crate::resource::Resource;

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

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

/// Evicts a pod, or refuses as its disruption budget demands.
pub fn evict(
    objects: &Objects,
    pods: Resource,
    namespace: Option<&str>,
    name: &str,
    eviction: &Value,
) -> ApiResult<()> {
    let namespace = namespace.unwrap_or("default");
    let pod = objects.get(pods, Some(namespace), name)?;
    let options = DeleteOptions {
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
    };
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let not_running = matches!(phase, "Succeeded" | "Failed" | "Pending")
        || meta_str(&pod, "deletionTimestamp").is_some();
    if !not_running {
        check_budget(objects, namespace, name, &pod)?;
    }
    objects.delete(pods, Some(namespace), name, &options, false)?;
    Ok(())
}

fn check_budget(objects: &Objects, namespace: &str, pod_name: &str, pod: &Value) -> ApiResult<()> {
    let Some(pdbs) = Resource::find("policy", "v1", "poddisruptionbudgets") else {
        return Ok(());
    };
    let labels = selector::labels(pod);
    let mut matching = Vec::new();
    for entry in objects.list(pdbs, Some(namespace)).entries.iter() {
        let budget = crate::objects::decode(entry)?;
        if selector::matches(budget.pointer("/spec/selector"), &labels) {
            matching.push(budget);
        }
    }
    let budget = match matching.len() {
        0 => return Ok(()),
        1 => matching.remove(0),
        _ => {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
    };
    let budget_name = meta_str(&budget, "name").unwrap_or_default().to_string();
    if !is_ready(pod) {
        let policy = budget
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("IfHealthyBudget");
        let current = budget
            .pointer("/status/currentHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let desired = budget
            .pointer("/status/desiredHealthy")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if policy == "AlwaysAllow" || (current >= desired && desired > 0) {
            return Ok(());
        }
    }
    let now = crate::meta::timestamp(objects.now());
    objects.update_with(pdbs, Some(namespace), &budget_name, Part::Status, |current| {
        let generation = current.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        let observed = current.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(-1);
        if observed < generation {
            return Err(budget_error(
                BLOCKED,
                format!("The disruption budget {budget_name} is still being processed by the server."),
                10,
            ));
        }
        let allowed = current.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0);
        if allowed < 0 {
            return Err(ApiError::forbidden("policy", "poddisruptionbudgets", &budget_name, "pdb disruptions allowed is negative"));
        }
        if allowed == 0 {
            let desired = current.pointer("/status/desiredHealthy").and_then(Value::as_i64).unwrap_or(0);
            let healthy = current.pointer("/status/currentHealthy").and_then(Value::as_i64).unwrap_or(0);
            return Err(budget_error(
                BLOCKED,
                format!("The disruption budget {budget_name} needs {desired} healthy pods and has {healthy} currently"),
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
    })?;
    Ok(())
}
