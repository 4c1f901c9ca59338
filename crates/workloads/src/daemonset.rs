//! The DaemonSet core: one pod on every node the pod template may run on — its
//! `nodeSelector`, required node affinity, and taints it tolerates (the template's
//! tolerations plus those upstream adds to every daemon pod) — rolled to a new template
//! `maxUnavailable` nodes at a time, with upstream's status counters.
//!
//! Until Tessera's scheduler exists, daemon pods are bound by `spec.nodeName` directly (as
//! DaemonSets did before Kubernetes 1.12). Pure: no I/O.

use std::collections::BTreeMap;

use crate::plan::{Resource, Writes};
use serde_json::{Value, json};

use crate::deployment::template_hash;
use tessera_model::conditions::pod_is_ready;
use tessera_model::json::text;

/// Label carrying the template revision of a daemon or stateful pod.
pub const REVISION_HASH: &str = "controller-revision-hash";

/// What to do for a DaemonSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonSetPlan {
    /// Nodes to create a pod on.
    pub create_on: Vec<String>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// The new status.
    pub status: Value,
}

/// The tolerations upstream adds to every daemon pod.
pub fn default_tolerations(host_network: bool) -> Vec<Value> {
    let mut tolerations = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
    ];
    if host_network {
        tolerations.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    tolerations
}

/// Whether a toleration tolerates a taint, as `v1.Toleration.ToleratesTaint` decides.
pub fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let effect = text(toleration, "/effect");
    if !effect.is_empty() && effect != text(taint, "/effect") {
        return false;
    }
    let key = text(toleration, "/key");
    if !key.is_empty() && key != text(taint, "/key") {
        return false;
    }
    match toleration
        .get("operator")
        .and_then(Value::as_str)
        .unwrap_or("Equal")
    {
        "Exists" => true,
        "Equal" => text(toleration, "/value") == text(taint, "/value"),
        _ => false,
    }
}

fn node_labels(node: &Value) -> BTreeMap<String, String> {
    tessera_model::selector::labels(node)
}

fn term_matches(term: &Value, node: &Value) -> bool {
    let labels = node_labels(node);
    let expressions_ok = term
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| requirement_holds(e, |key| labels.get(key).cloned()));
    let fields_ok = term
        .get("matchFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            requirement_holds(e, |key| {
                (key == "metadata.name").then(|| text(node, "/metadata/name").to_string())
            })
        });
    expressions_ok && fields_ok
}

fn requirement_holds(expression: &Value, lookup: impl Fn(&str) -> Option<String>) -> bool {
    let value = lookup(text(expression, "/key"));
    let values: Vec<&str> = expression
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match text(expression, "/operator") {
        "In" => value.is_some_and(|v| values.contains(&v.as_str())),
        "NotIn" => value.is_none_or(|v| !values.contains(&v.as_str())),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => value
            .and_then(|v| number(&v))
            .zip(values.first().and_then(|v| number(v)))
            .is_some_and(|(v, b)| v > b),
        "Lt" => value
            .and_then(|v| number(&v))
            .zip(values.first().and_then(|v| number(v)))
            .is_some_and(|(v, b)| v < b),
        _ => false,
    }
}

/// Whether a pod spec may run on a node: node selector, required node affinity, and taints.
pub fn fits(pod_spec: &Value, node: &Value, extra_tolerations: &[Value]) -> bool {
    let labels = node_labels(node);
    let selector_ok = pod_spec
        .get("nodeSelector")
        .and_then(Value::as_object)
        .is_none_or(|s| {
            s.iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        });
    let affinity_ok = match pod_spec
        .pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
        .and_then(Value::as_array)
    {
        Some(terms) => terms.iter().any(|term| term_matches(term, node)),
        None => true,
    };
    let tolerations: Vec<&Value> = pod_spec
        .get("tolerations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(extra_tolerations.iter())
        .collect();
    let taints_ok = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|t| matches!(text(t, "/effect"), "NoSchedule" | "NoExecute"))
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)));
    selector_ok && affinity_ok && taints_ok
}

/// Plans a DaemonSet's next step from the nodes and the pods it owns.
pub fn plan(daemon_set: &Value, nodes: &[Value], pods: &[Value]) -> DaemonSetPlan {
    let mut plan = DaemonSetPlan::default();
    let spec = daemon_set
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let extra = default_tolerations(host_network);
    let revision = template_hash(daemon_set.pointer("/spec/template").unwrap_or(&Value::Null));
    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| crate::replicaset::is_active(p))
        .collect();
    let mut by_node: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for pod in &active {
        by_node
            .entry(text(pod, "/spec/nodeName"))
            .or_default()
            .push(pod);
    }
    let eligible: Vec<&Value> = nodes.iter().filter(|n| fits(&spec, n, &extra)).collect();
    let eligible_names: Vec<&str> = eligible.iter().map(|n| text(n, "/metadata/name")).collect();
    let mut misscheduled = 0;
    for (node, node_pods) in &by_node {
        if !eligible_names.contains(node) {
            misscheduled += node_pods.len();
            plan.delete.extend(
                node_pods
                    .iter()
                    .map(|p| text(p, "/metadata/name").to_string()),
            );
        } else if node_pods.len() > 1 {
            plan.delete.extend(
                node_pods
                    .iter()
                    .skip(1)
                    .map(|p| text(p, "/metadata/name").to_string()),
            );
        }
    }
    for node in &eligible_names {
        if !by_node.contains_key(node) {
            plan.create_on.push(node.to_string());
        }
    }
    // Rolling update: replace outdated pods, at most maxUnavailable unavailable at a time.
    let outdated: Vec<&&Value> = active
        .iter()
        .filter(|p| eligible_names.contains(&text(p, "/spec/nodeName")))
        .filter(|p| text(p, &format!("/metadata/labels/{REVISION_HASH}")) != revision)
        .collect();
    let rolling = text(daemon_set, "/spec/updateStrategy/type") != "OnDelete";
    if rolling && !outdated.is_empty() {
        let max_unavailable = daemon_set
            .pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .max(1) as usize;
        let unavailable = eligible_names.len().saturating_sub(
            active
                .iter()
                .filter(|p| pod_is_ready(p) && eligible_names.contains(&text(p, "/spec/nodeName")))
                .count(),
        );
        let budget = max_unavailable.saturating_sub(unavailable);
        plan.delete.extend(
            outdated
                .iter()
                .take(budget)
                .map(|p| text(p, "/metadata/name").to_string()),
        );
    }
    let scheduled = active
        .iter()
        .filter(|p| eligible_names.contains(&text(p, "/spec/nodeName")))
        .count();
    let ready = active
        .iter()
        .filter(|p| pod_is_ready(p) && eligible_names.contains(&text(p, "/spec/nodeName")))
        .count();
    let updated = active
        .iter()
        .filter(|p| text(p, &format!("/metadata/labels/{REVISION_HASH}")) == revision)
        .count();
    plan.status = json!({
        "desiredNumberScheduled": eligible_names.len(),
        "currentNumberScheduled": scheduled,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "numberAvailable": ready,
        "numberUnavailable": eligible_names.len().saturating_sub(ready),
        "updatedNumberScheduled": updated,
        "observedGeneration": daemon_set.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0),
    });
    plan
}

impl DaemonSetPlan {
    /// The writes that carry the plan out for `daemon_set`: deletions, a pod per node, the
    /// new status.
    pub fn writes(self, daemon_set: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.delete(Resource::Pod, &self.delete);
        writes.create(
            Resource::Pod,
            self.create_on.iter().map(|node| pod_for(daemon_set, node)),
        );
        writes.status(daemon_set, self.status);
        writes
    }
}

/// The daemon pod for a node.
pub fn pod_for(daemon_set: &Value, node: &str) -> Value {
    let name = text(daemon_set, "/metadata/name");
    let mut pod = crate::replicaset::pod_from_template(
        daemon_set,
        "apps/v1",
        "DaemonSet",
        &format!("{name}-"),
    );
    let revision = template_hash(daemon_set.pointer("/spec/template").unwrap_or(&Value::Null));
    if !pod["metadata"]["labels"].is_object() {
        pod["metadata"]["labels"] = json!({});
    }
    pod["metadata"]["labels"][REVISION_HASH] = json!(revision);
    pod["spec"]["nodeName"] = json!(node);
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    });
    let host_network = pod["spec"].get("hostNetwork").and_then(Value::as_bool) == Some(true);
    let mut tolerations = pod["spec"]
        .get("tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for toleration in default_tolerations(host_network) {
        if !tolerations.contains(&toleration) {
            tolerations.push(toleration);
        }
    }
    pod["spec"]["tolerations"] = json!(tolerations);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: Value, taints: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}})
    }

    fn daemon_set(template_spec: Value) -> Value {
        json!({"metadata": {"name": "agent", "uid": "u", "generation": 1},
               "spec": {"template": {"metadata": {"labels": {"app": "agent"}}, "spec": template_spec}}})
    }

    #[test]
    fn one_pod_per_fitting_node() {
        let nodes = [
            node("cpu-1", json!({"pool": "cpu"}), json!([])),
            node(
                "gpu-1",
                json!({"pool": "gpu"}),
                json!([{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
            ),
            node(
                "gpu-2",
                json!({"pool": "gpu"}),
                json!([{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
            ),
            node(
                "cordoned",
                json!({"pool": "gpu"}),
                json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
            ),
        ];
        let plain = daemon_set(json!({"containers": [{"name": "c", "image": "i"}]}));
        assert_eq!(
            plan(&plain, &nodes, &[]).create_on,
            ["cpu-1", "cordoned"],
            "GPU taints are not tolerated"
        );
        let gpu = daemon_set(json!({"nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "i"}]}));
        let planned = plan(&gpu, &nodes, &[]);
        assert_eq!(planned.create_on, ["gpu-1", "gpu-2", "cordoned"]);
        assert_eq!(planned.status["desiredNumberScheduled"], 3);
        let pod = pod_for(&gpu, "gpu-1");
        assert_eq!(pod["spec"]["nodeName"], "gpu-1");
        assert!(
            pod["spec"]["tolerations"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["key"] == "node.kubernetes.io/unreachable")
        );
    }

    #[test]
    fn misplaced_and_outdated_pods_are_replaced() {
        let nodes = [
            node("a", json!({"pool": "gpu"}), json!([])),
            node("b", json!({"pool": "cpu"}), json!([])),
        ];
        let ds = daemon_set(
            json!({"nodeSelector": {"pool": "gpu"}, "containers": [{"name": "c", "image": "v2"}]}),
        );
        let mut current = pod_for(&ds, "a");
        current["metadata"]["name"] = json!("agent-a");
        current["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        let mut stray = current.clone();
        stray["metadata"]["name"] = json!("agent-b");
        stray["spec"]["nodeName"] = json!("b");
        let planned = plan(&ds, &nodes, &[current.clone(), stray]);
        assert_eq!(planned.delete, ["agent-b"]);
        assert_eq!(planned.status["numberMisscheduled"], 1);
        let mut old = current;
        old["metadata"]["labels"][REVISION_HASH] = json!("old");
        let planned = plan(&ds, &nodes, &[old]);
        assert_eq!(planned.delete, ["agent-a"]);
    }

    #[test]
    fn tolerations_match_like_upstream() {
        let taint = json!({"key": "k", "value": "v", "effect": "NoSchedule"});
        let table = [
            (
                json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}),
                true,
            ),
            (json!({"key": "k", "value": "v"}), true),
            (
                json!({"key": "k", "operator": "Equal", "value": "x"}),
                false,
            ),
            (json!({"operator": "Exists"}), true),
            (
                json!({"key": "k", "operator": "Exists", "effect": "NoExecute"}),
                false,
            ),
        ];
        for (toleration, want) in table {
            assert_eq!(tolerates(&toleration, &taint), want, "{toleration}");
        }
    }
}
