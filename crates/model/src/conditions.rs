//! Status conditions of untyped objects (`status.conditions` lists of `{type, status, …}`):
//! finding, reading and setting them as Kubernetes controllers do, and pod readiness.
//!
//! Time is an input: a setter is handed the timestamp to record; nothing here reads a clock.

use crate::json::Pointer as _;
use serde_json::{Value, json};

/// The condition of type `kind` in `object`'s `status.conditions`, whatever its status.
pub fn find<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object
        .at("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether `object` has a condition of type `kind` with status `"True"`.
pub fn is_true(object: &Value, kind: &str) -> bool {
    find(object, kind).is_some_and(|c| c["status"] == "True")
}

/// Whether a pod is ready: its `Ready` condition is `"True"` (upstream's `IsPodReady`).
pub fn pod_is_ready(pod: &Value) -> bool {
    is_true(pod, "Ready")
}

/// Whether a pod is running and ready (upstream StatefulSet controller's
/// `isRunningAndReady`): phase `Running` and the `Ready` condition `"True"`. A pod restarting
/// in place may still show `Ready` from before, so the phase is checked too.
pub fn pod_is_running_and_ready(pod: &Value) -> bool {
    pod.at("/status/phase").and_then(Value::as_str) == Some("Running") && pod_is_ready(pod)
}

/// Whether [`set`] would leave `conditions` as they are: the first condition of type `kind`
/// already has `status`, `reason` and `message` (answered without copying anything).
pub fn is_set(conditions: &[Value], kind: &str, status: &str, reason: &str, message: &str) -> bool {
    conditions
        .iter()
        .find(|c| c["type"] == kind)
        .is_some_and(|c| c["status"] == status && c["reason"] == reason && c["message"] == message)
}

/// Sets the condition of type `kind` in `conditions` (a `status.conditions` list) to
/// `status`, `reason` and `message`, as upstream's `SetStatusCondition` does:
/// `lastTransitionTime` becomes `now` only when the status changes (or the condition is
/// new); reason and message are always updated. Returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) -> bool {
    if let Some(existing) = conditions.iter_mut().find(|c| c["type"] == kind) {
        let mut changed = false;
        if existing["status"] != status {
            existing["status"] = json!(status);
            existing["lastTransitionTime"] = json!(now);
            changed = true;
        }
        for (field, value) in [("reason", reason), ("message", message)] {
            if existing[field] != value {
                existing[field] = json!(value);
                changed = true;
            }
        }
        return changed;
    }
    conditions.push(json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now,
    }));
    true
}

/// Carries `lastTransitionTime` over from the `previous` conditions into the `next` ones of
/// the same type whose status did not change, as the kubelet does when it refreshes a node's
/// conditions from the stored node: a heartbeat moves `lastHeartbeatTime`, never the
/// transition time of a condition that stayed as it was.
pub fn keep_transition_times(previous: &[Value], next: &mut [Value]) {
    for condition in next {
        let kept = previous
            .iter()
            .find(|p| p["type"] == condition["type"] && p["status"] == condition["status"])
            .and_then(|p| p.get("lastTransitionTime"))
            .filter(|time| time.is_string());
        if let Some(time) = kept {
            condition["lastTransitionTime"] = time.clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_the_ready_condition_only() {
        let table = [
            (json!({}), false),
            (json!({"status": {"conditions": []}}), false),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
                false,
            ),
            (
                json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
                true,
            ),
            (
                json!({"status": {"conditions": [{"type": "ContainersReady", "status": "True"}]}}),
                false,
            ),
            (json!({"status": {"conditions": "not a list"}}), false),
        ];
        for (mut pod, want) in table {
            assert_eq!(pod_is_ready(&pod), want, "{pod}");
            assert!(!pod_is_running_and_ready(&pod), "{pod} has no phase");
            if pod.get("status").is_some_and(Value::is_object) {
                pod["status"]["phase"] = json!("Running");
                assert_eq!(pod_is_running_and_ready(&pod), want, "{pod}");
                pod["status"]["phase"] = json!("Succeeded");
                assert!(!pod_is_running_and_ready(&pod), "{pod}");
            }
        }
    }

    #[test]
    fn setting_moves_the_transition_time_only_when_the_status_changes() {
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, "Ready", "False", "Starting", "", "t1"));
        assert_eq!(conditions[0]["lastTransitionTime"], "t1");
        // Same status, new reason: updated, transition time kept.
        assert!(set(&mut conditions, "Ready", "False", "Waiting", "m", "t2"));
        assert_eq!(conditions[0]["lastTransitionTime"], "t1");
        assert_eq!(conditions[0]["reason"], "Waiting");
        // Nothing new: no change.
        assert!(!set(
            &mut conditions,
            "Ready",
            "False",
            "Waiting",
            "m",
            "t3"
        ));
        // Status flips: transition time moves.
        assert!(set(&mut conditions, "Ready", "True", "Up", "", "t4"));
        assert_eq!(conditions[0]["lastTransitionTime"], "t4");
        assert_eq!(conditions.len(), 1);
        let object = json!({"status": {"conditions": conditions}});
        assert!(is_true(&object, "Ready"));
        assert!(find(&object, "Other").is_none());
    }

    #[test]
    fn transition_times_survive_refreshes_and_move_on_change() {
        let previous = vec![
            json!({"type": "Ready", "status": "True", "lastTransitionTime": "t0", "lastHeartbeatTime": "t0"}),
            json!({"type": "DiskPressure", "status": "False", "lastTransitionTime": "t0"}),
            json!({"type": "MemoryPressure", "status": "False"}),
        ];
        let fresh = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastTransitionTime": "t9", "lastHeartbeatTime": "t9"});
        let mut next = vec![
            fresh("Ready", "True"),
            fresh("DiskPressure", "True"),
            fresh("MemoryPressure", "False"),
            fresh("NetworkInterfacesDegraded", "False"),
        ];
        keep_transition_times(&previous, &mut next);
        let times: Vec<&str> = next
            .iter()
            .map(|c| c["lastTransitionTime"].as_str().unwrap_or_default())
            .collect();
        // Unchanged: kept. Changed status: now. No previous time, or a new condition: now.
        assert_eq!(times, ["t0", "t9", "t9", "t9"]);
        assert!(next.iter().all(|c| c["lastHeartbeatTime"] == "t9"));
    }
}
