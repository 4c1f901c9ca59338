//! A pod's `status.conditions` as the API server's own writers set them (podutil's
//! `UpdatePodCondition`): the binding's `PodScheduled` and the eviction's `DisruptionTarget`.
//!
//! Knows nothing of why a condition is set; the caller brings the condition and the time.

use serde_json::{Value, json};

/// Sets `condition` (a PodCondition with its `type`) on `pod` as `UpdatePodCondition` does:
/// added when the pod has none of its type, otherwise put in the old one's place, whole.
/// Its `lastTransitionTime` is `now` (a timestamp), or the old one's when the status stays
/// the same.
pub fn update_pod_condition(pod: &mut Value, condition: Value, now: &str) {
    update_status_condition(&mut pod["status"], condition, now);
}

/// [`update_pod_condition`] on the pod's `status` alone (an object, or `null` when the pod
/// has none yet).
pub fn update_status_condition(status: &mut Value, mut condition: Value, now: &str) {
    condition["lastTransitionTime"] = json!(now);
    if !status.is_object() {
        *status = json!({});
    }
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    let Some(conditions) = status["conditions"].as_array_mut() else {
        return;
    };
    match conditions
        .iter_mut()
        .find(|old| old["type"] == condition["type"])
    {
        Some(old) => {
            if old["status"] == condition["status"] {
                condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_added_or_replaced_keeping_the_transition_time_of_an_unchanged_status() {
        let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null});
        // (case, the pod's conditions before, what is set, the conditions after)
        let cases = [
            (
                "no status at all",
                Value::Null,
                scheduled.clone(),
                json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                        "lastTransitionTime": "T2"}]),
            ),
            (
                "another type kept, this one added",
                json!([{"type": "Ready", "status": "False", "lastTransitionTime": "T0"}]),
                scheduled.clone(),
                json!([{"type": "Ready", "status": "False", "lastTransitionTime": "T0"},
                       {"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                        "lastTransitionTime": "T2"}]),
            ),
            (
                "status changes: replaced whole, reason and message gone, time now",
                json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/3 nodes are available", "lastTransitionTime": "T1"}]),
                scheduled.clone(),
                json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                        "lastTransitionTime": "T2"}]),
            ),
            (
                "status stays: the earlier transition time kept",
                json!([{"type": "PodScheduled", "status": "True", "reason": "Old",
                        "lastTransitionTime": "T1"}]),
                scheduled,
                json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                        "lastTransitionTime": "T1"}]),
            ),
        ];
        for (case, before, condition, after) in cases {
            let mut pod = json!({"metadata": {"name": "p"}});
            if !before.is_null() {
                pod["status"] = json!({"phase": "Pending", "conditions": before});
            }
            update_pod_condition(&mut pod, condition, "T2");
            assert_eq!(pod["status"]["conditions"], after, "{case}");
            if !before.is_null() {
                assert_eq!(pod["status"]["phase"], "Pending", "{case}: the rest kept");
            }
        }
    }
}
