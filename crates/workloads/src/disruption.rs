//! The disruption-budget core: a PodDisruptionBudget's status from the pods it selects, as
//! upstream's disruption controller computes it (`minAvailable`/`maxUnavailable` as integers
//! or percentages rounded up, `currentHealthy`, `desiredHealthy`, `expectedPods`,
//! `disruptionsAllowed`, the `DisruptionAllowed` condition, and the expiry of
//! `disruptedPods` the eviction API recorded).
//!
//! Pure: time is an input; no I/O.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::json::int_or_zero;
use tessera_model::time::{parse_timestamp, timestamp};

/// How long an eviction recorded in `disruptedPods` counts against the budget if the pod
/// has not gone away (upstream's `DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(2 * 60);

/// Whether a pod counts as healthy: Ready and not being deleted.
pub fn is_healthy(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp").is_none()
        && pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// An `IntOrString` budget against an expected count; percentages round up.
fn scaled(value: &Value, expected: i64) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(text) => match text.strip_suffix('%') {
            Some(percent) => {
                let percent: i64 = percent.trim().parse().ok()?;
                Some((percent * expected + 99) / 100)
            }
            None => text.parse().ok(),
        },
        _ => None,
    }
}

/// The status a PDB should have, given the pods it selects (and, for percentages and
/// `maxUnavailable`, the replicas their controllers expect; `None` uses the pod count).
pub fn budget(
    pdb: &Value,
    pods: &[&Value],
    expected_from_controllers: Option<i64>,
    now: SystemTime,
) -> Value {
    let pod_names: Vec<&str> = pods
        .iter()
        .filter_map(|p| p.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    // Evictions the API recorded that have not yet removed their pod still count as disrupted.
    let mut disrupted = serde_json::Map::new();
    if let Some(recorded) = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
    {
        for (name, at) in recorded {
            let fresh = at
                .as_str()
                .and_then(parse_timestamp)
                .is_some_and(|at| now.duration_since(at).unwrap_or_default() < DELETION_TIMEOUT);
            if fresh && pod_names.contains(&name.as_str()) {
                disrupted.insert(name.clone(), at.clone());
            }
        }
    }
    let current_healthy = pods
        .iter()
        .filter(|p| is_healthy(p))
        .filter(|p| {
            p.pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_none_or(|n| !disrupted.contains_key(n))
        })
        .count() as i64;
    let expected = expected_from_controllers.unwrap_or(pods.len() as i64);
    let spec = pdb.get("spec").cloned().unwrap_or(json!({}));
    let desired_healthy = if let Some(min) = spec.get("minAvailable") {
        scaled(min, expected).unwrap_or(0)
    } else if let Some(max) = spec.get("maxUnavailable") {
        (expected - scaled(max, expected).unwrap_or(0)).max(0)
    } else {
        // Neither set: upstream defaults minAvailable to 1.
        1
    };
    let allowed = (current_healthy - desired_healthy).max(0);
    let generation = int_or_zero(pdb, "/metadata/generation");
    let previous = pdb
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "DisruptionAllowed"))
        .cloned();
    let (status, reason, message) = if allowed > 0 {
        ("True", "SufficientPods", "")
    } else {
        ("False", "InsufficientPods", "")
    };
    let since = previous
        .filter(|c| c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(timestamp(now)));
    let mut result = json!({
        "observedGeneration": generation,
        "currentHealthy": current_healthy,
        "desiredHealthy": desired_healthy,
        "expectedPods": expected,
        "disruptionsAllowed": allowed,
        "conditions": [{
            "type": "DisruptionAllowed", "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": since,
        }],
    });
    if !disrupted.is_empty() {
        result["disruptedPods"] = Value::Object(disrupted);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pdb(spec: Value) -> Value {
        json!({"metadata": {"name": "b", "generation": 3}, "spec": spec})
    }

    #[test]
    fn budgets_follow_upstream_arithmetic() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let pods = [
            pod("a", true),
            pod("b", true),
            pod("c", true),
            pod("d", false),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let table = [
            (json!({"minAvailable": 2}), None, 2, 1),
            (json!({"minAvailable": "50%"}), None, 2, 1),
            (json!({"minAvailable": "60%"}), None, 3, 0),
            (json!({"maxUnavailable": 1}), None, 3, 0),
            (json!({"maxUnavailable": "25%"}), None, 3, 0),
            (json!({"maxUnavailable": 2}), Some(5), 3, 0),
            (json!({"maxUnavailable": "50%"}), Some(4), 2, 1),
            (json!({}), None, 1, 2),
        ];
        for (spec, expected, desired, allowed) in table {
            let status = budget(&pdb(spec.clone()), &refs, expected, now);
            assert_eq!(status["currentHealthy"], 3, "{spec}");
            assert_eq!(status["desiredHealthy"], desired, "{spec}");
            assert_eq!(status["disruptionsAllowed"], allowed, "{spec}");
            assert_eq!(status["observedGeneration"], 3);
        }
    }

    #[test]
    fn recent_evictions_count_until_they_expire() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let pods = [pod("a", true), pod("b", true)];
        let refs: Vec<&Value> = pods.iter().collect();
        let mut budget_object = pdb(json!({"minAvailable": 1}));
        budget_object["status"] = json!({"disruptedPods": {"a": timestamp(now - Duration::from_secs(30)), "gone": timestamp(now)}});
        let status = budget(&budget_object, &refs, None, now);
        assert_eq!(status["currentHealthy"], 1);
        assert_eq!(status["disruptionsAllowed"], 0);
        assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
        assert_eq!(
            status["disruptedPods"],
            json!({"a": timestamp(now - Duration::from_secs(30))})
        );
        let later = now + DELETION_TIMEOUT;
        let status = budget(&budget_object, &refs, None, later);
        assert_eq!(status["disruptionsAllowed"], 1);
        assert!(status.get("disruptedPods").is_none());
    }
}
