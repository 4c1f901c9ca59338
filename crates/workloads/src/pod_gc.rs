//! The pod garbage collector's orphan sweep, as kube-controller-manager's PodGC does it
//! (`pkg/controller/podgc/gc_controller.go`, `gcOrphaned` and `gcUnscheduledTerminating`): a pod
//! bound to a node that no longer exists — missing for the whole quarantine (40 s) — is marked
//! Failed with condition `DisruptionTarget` (reason `DeletionByPodGC`, "PodGC: node no longer
//! exists") and deleted at once (grace period 0); a terminating pod never scheduled is deleted at
//! once. The quarantine is kept by the caller as the time each missing node was first seen
//! missing.
//!
//! Knows pods, node names and the time; not how the writes are made. Terminated-pod thresholds
//! and out-of-service nodes (`gcTerminated`, `gcTerminating`) are not here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::json::text;

/// How long a node must be missing before its pods are collected (`quarantineTime`).
pub const QUARANTINE: Duration = Duration::from_secs(40);
/// The condition reason PodGC gives the pods it deletes.
pub const REASON: &str = "DeletionByPodGC";
/// The condition message PodGC gives pods of a missing node.
pub const MESSAGE: &str = "PodGC: node no longer exists";

/// A pod to delete with grace period 0, after its status patch (if any) is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Collect {
    pub namespace: String,
    pub name: String,
    /// The merge patch of its status (`{"status": …}`): phase Failed and the condition, for a
    /// pod that had not finished.
    pub status: Option<Value>,
}

/// One sweep: `nodes` are the names that exist now, `missing_since` when each missing node was
/// first seen missing (updated here: nodes back are forgotten, newly missing ones start their
/// quarantine at `now`).
pub fn sweep(
    pods: &[Value],
    nodes: &BTreeSet<String>,
    missing_since: &mut BTreeMap<String, SystemTime>,
    now: SystemTime,
) -> Vec<Collect> {
    let bound_to: BTreeSet<&str> = pods
        .iter()
        .map(|p| text(p, "/spec/nodeName"))
        .filter(|n| !n.is_empty() && !nodes.contains(*n))
        .collect();
    missing_since.retain(|node, _| bound_to.contains(node.as_str()));
    for node in &bound_to {
        missing_since.entry((*node).to_string()).or_insert(now);
    }
    let quarantined = |node: &str| {
        missing_since
            .get(node)
            .and_then(|since| now.duration_since(*since).ok())
            .is_some_and(|waited| waited >= QUARANTINE)
    };
    let mut collect = Vec::new();
    for pod in pods {
        let node = text(pod, "/spec/nodeName");
        let terminating = pod.pointer("/metadata/deletionTimestamp").is_some();
        let orphaned = !node.is_empty() && quarantined(node);
        let unscheduled_terminating = node.is_empty() && terminating;
        if !orphaned && !unscheduled_terminating {
            continue;
        }
        let status = orphaned.then(|| failed_status(pod, now)).flatten();
        collect.push(Collect {
            namespace: text(pod, "/metadata/namespace").to_string(),
            name: text(pod, "/metadata/name").to_string(),
            status,
        });
    }
    collect
}

/// `markFailedAndDeletePodWithCondition`'s status: a pod not yet finished turns Failed with the
/// DisruptionTarget condition (other conditions kept).
fn failed_status(pod: &Value, now: SystemTime) -> Option<Value> {
    let phase = text(pod, "/status/phase");
    if phase == "Succeeded" || phase == "Failed" {
        return None;
    }
    let mut conditions: Vec<Value> = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    conditions.retain(|c| c["type"] != "DisruptionTarget");
    conditions.push(json!({
        "type": "DisruptionTarget", "status": "True", "reason": REASON, "message": MESSAGE,
        "lastTransitionTime": tessera_model::time::timestamp(now),
    }));
    Some(json!({"status": {"phase": "Failed", "conditions": conditions}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: &str, phase: &str, terminating: bool) -> Value {
        let mut p = json!({"metadata": {"namespace": "ml", "name": name},
            "spec": {"nodeName": node}, "status": {"phase": phase,
            "conditions": [{"type": "Ready", "status": "True"}]}});
        if node.is_empty() {
            p["spec"] = json!({});
        }
        if terminating {
            p["metadata"]["deletionTimestamp"] = json!("2026-12-02T16:00:00Z");
        }
        p
    }

    #[test]
    fn orphans_go_after_the_quarantine_marked_failed() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let pods = vec![
            pod("on-live", "a", "Running", false),
            pod("orphan", "gone", "Running", false),
            pod("done", "gone", "Succeeded", false),
            pod("pending", "", "Pending", false),
            pod("pending-deleted", "", "Pending", true),
        ];
        let nodes = BTreeSet::from(["a".to_string()]);
        let mut missing = BTreeMap::new();
        // First seen missing: only the unscheduled terminating pod goes.
        let first = sweep(&pods, &nodes, &mut missing, t0);
        let names: Vec<&str> = first.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["pending-deleted"]);
        assert_eq!(first[0].status, None);
        assert_eq!(missing.get("gone"), Some(&t0));
        // Still inside the quarantine.
        let early = sweep(&pods, &nodes, &mut missing, t0 + Duration::from_secs(39));
        assert_eq!(early.len(), 1);
        // After it: the orphans, the running one marked Failed, the finished one left as is.
        let later = sweep(&pods, &nodes, &mut missing, t0 + QUARANTINE);
        let names: Vec<&str> = later.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["orphan", "done", "pending-deleted"]);
        let status = later[0].status.as_ref().expect("marked failed");
        assert_eq!(status["status"]["phase"], "Failed");
        let conditions = status["status"]["conditions"].as_array().expect("list");
        assert_eq!(conditions[0]["type"], "Ready");
        assert_eq!(conditions[1]["type"], "DisruptionTarget");
        assert_eq!(conditions[1]["reason"], "DeletionByPodGC");
        assert_eq!(conditions[1]["message"], "PodGC: node no longer exists");
        assert_eq!(later[1].status, None);
    }

    #[test]
    fn a_node_that_returns_restarts_its_quarantine() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let pods = vec![pod("p", "flaky", "Running", false)];
        let mut missing = BTreeMap::new();
        assert!(sweep(&pods, &BTreeSet::new(), &mut missing, t0).is_empty());
        let back = BTreeSet::from(["flaky".to_string()]);
        assert!(sweep(&pods, &back, &mut missing, t0 + Duration::from_secs(30)).is_empty());
        assert!(missing.is_empty());
        let again = t0 + Duration::from_secs(50);
        assert!(sweep(&pods, &BTreeSet::new(), &mut missing, again).is_empty());
        assert_eq!(missing.get("flaky"), Some(&again));
    }
}
