//! The ReplicaSet core: how many pods to create or which to delete to reach `replicas`, and the
//! status upstream reports (replicas, fullyLabeledReplicas, readyReplicas,
//! availableReplicas with minReadySeconds, observedGeneration). Deletion prefers the pods
//! that matter least, as upstream ranks them: unassigned, then pending, then not ready,
//! then the most recently ready.
//!
//! Pure: time is an input; no I/O.

use std::time::{Duration, SystemTime};

use crate::plan::{Resource, Writes};
use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_model::time::parse_timestamp;

/// What to do for a ReplicaSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaSetPlan {
    /// How many pods to create.
    pub create: usize,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// The new status.
    pub status: Value,
    /// When to look again (a pod becoming available after minReadySeconds).
    pub requeue_after: Option<Duration>,
}

/// When a pod became Ready, if it is.
pub fn ready_since(pod: &Value) -> Option<SystemTime> {
    let condition = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| c["type"] == "Ready" && c["status"] == "True")?;
    Some(
        condition
            .get("lastTransitionTime")
            .and_then(Value::as_str)
            .and_then(parse_timestamp)
            .unwrap_or(SystemTime::UNIX_EPOCH),
    )
}

/// Whether a pod counts as active: not finished and not being deleted.
pub fn is_active(pod: &Value) -> bool {
    !matches!(text(pod, "/status/phase"), "Succeeded" | "Failed")
        && pod.pointer("/metadata/deletionTimestamp").is_none()
}

/// Whether a pod has been Ready for at least `min_ready`.
pub fn is_available(pod: &Value, min_ready: Duration, now: SystemTime) -> bool {
    ready_since(pod).is_some_and(|since| since + min_ready <= now)
}

/// Plans a ReplicaSet's next step from the active pods it controls.
pub fn plan(replica_set: &Value, pods: &[Value], now: SystemTime) -> ReplicaSetPlan {
    let wanted = replica_set
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .max(0) as usize;
    let min_ready = Duration::from_secs(
        replica_set
            .pointer("/spec/minReadySeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            .max(0) as u64,
    );
    let active: Vec<&Value> = pods.iter().filter(|p| is_active(p)).collect();
    let mut plan = ReplicaSetPlan::default();
    if active.len() < wanted {
        plan.create = wanted - active.len();
    } else if active.len() > wanted {
        let mut ranked = active.clone();
        // Least valuable first: unassigned, pending, not ready, then latest ready.
        ranked.sort_by_key(|p| {
            let assigned = p.pointer("/spec/nodeName").is_some();
            let running = text(p, "/status/phase") == "Running";
            let ready = ready_since(p);
            (assigned, running, ready.is_some(), std::cmp::Reverse(ready))
        });
        plan.delete = ranked
            .into_iter()
            .take(active.len() - wanted)
            .map(|p| text(p, "/metadata/name").to_string())
            .collect();
    }
    let template_labels = replica_set
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let fully_labeled = active
        .iter()
        .filter(|p| {
            template_labels.is_none_or(|labels| {
                labels
                    .iter()
                    .all(|(k, v)| p.pointer("/metadata/labels").and_then(|l| l.get(k)) == Some(v))
            })
        })
        .count();
    let ready = active.iter().filter(|p| ready_since(p).is_some()).count();
    let available = active
        .iter()
        .filter(|p| is_available(p, min_ready, now))
        .count();
    if ready > available {
        plan.requeue_after = active
            .iter()
            .filter_map(|p| ready_since(p))
            .filter_map(|since| (since + min_ready).duration_since(now).ok())
            .filter(|d| !d.is_zero())
            .min();
    }
    plan.status = json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": replica_set.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
    });
    plan
}

impl ReplicaSetPlan {
    /// The writes that carry the plan out for `replica_set`: deletions, creations (named by
    /// the API from `<set>-`), the new status.
    pub fn writes(self, replica_set: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.delete(Resource::Pod, &self.delete);
        let prefix = format!("{}-", text(replica_set, "/metadata/name"));
        writes.create(
            Resource::Pod,
            (0..self.create)
                .map(|_| pod_from_template(replica_set, "apps/v1", "ReplicaSet", &prefix)),
        );
        writes.status(replica_set, self.status);
        writes
    }
}

/// The pod a controller creates from its template.
pub fn pod_from_template(owner: &Value, api_version: &str, kind: &str, name_prefix: &str) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": owner.pointer("/spec/template/metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": owner.pointer("/spec/template/spec").cloned().unwrap_or_else(|| json!({})),
    });
    pod["metadata"]["generateName"] = json!(name_prefix);
    if let Some(metadata) = pod["metadata"].as_object_mut() {
        metadata.remove("name");
        metadata.remove("namespace");
    }
    pod["metadata"]["ownerReferences"] = json!([{
        "apiVersion": api_version, "kind": kind, "name": text(owner, "/metadata/name"),
        "uid": text(owner, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true,
    }]);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::time::timestamp;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
    }

    fn pod(name: &str, node: Option<&str>, ready_at: Option<u64>) -> Value {
        let mut pod = json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {}, "status": {"phase": "Pending"}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
            pod["status"]["phase"] = json!("Running");
        }
        if let Some(ready) = ready_at {
            pod["status"]["conditions"] = json!([{"type": "Ready", "status": "True", "lastTransitionTime": timestamp(at(ready))}]);
        }
        pod
    }

    fn rs(replicas: i64) -> Value {
        json!({"metadata": {"name": "web-abc", "uid": "u", "generation": 2},
               "spec": {"replicas": replicas, "minReadySeconds": 10, "template": {"metadata": {"labels": {"app": "web"}}}}})
    }

    #[test]
    fn scales_up_and_reports_availability() {
        let pods = [
            pod("a", Some("n1"), Some(0)),
            pod("b", Some("n1"), Some(95)),
        ];
        let plan = plan(&rs(3), &pods, at(100));
        assert_eq!(plan.create, 1);
        assert_eq!(
            plan.status,
            json!({"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 1, "observedGeneration": 2})
        );
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(5)));
    }

    #[test]
    fn scales_down_least_valuable_first() {
        let pods = [
            pod("ready-old", Some("n1"), Some(0)),
            pod("unassigned", None, None),
            pod("ready-new", Some("n1"), Some(50)),
            pod("running", Some("n2"), None),
        ];
        let plan = plan(&rs(1), &pods, at(100));
        assert_eq!(plan.delete, vec!["unassigned", "running", "ready-new"]);
        assert_eq!(plan.create, 0);
    }

    #[test]
    fn pods_from_templates_are_owned() {
        let pod = pod_from_template(&rs(1), "apps/v1", "ReplicaSet", "web-abc-");
        assert_eq!(pod["metadata"]["generateName"], "web-abc-");
        assert_eq!(pod["metadata"]["labels"]["app"], "web");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        assert_eq!(pod["metadata"]["ownerReferences"][0]["controller"], true);
    }
}
