//! Small readers over the snapshot's typed objects that more than one runbook needs: names,
//! phases, conditions, quantities, the newest event about an object. Knows no runbook.

use std::collections::BTreeMap;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Node, NodeCondition, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tessera_model::Quantity;
use tessera_workloads::node_lifecycle::to_system;

/// `namespace/name` of a namespaced object.
pub fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// A node's name.
pub fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The node a pod is bound to.
pub fn bound_node(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// A pod's phase (`Pending` when it has none yet).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether a pod still runs or waits: neither finished nor being deleted.
pub fn live(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), "Succeeded" | "Failed")
}

/// A node's condition of a type.
pub fn condition<'a>(node: &'a Node, kind: &str) -> Option<&'a NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// Whether a node's Ready condition is `True`.
pub fn ready(node: &Node) -> bool {
    condition(node, "Ready").is_some_and(|c| c.status == "True")
}

/// Whether a node is cordoned.
pub fn cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// A node's label, when it has it.
pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Whole units of a quantity (`8`, `500m` → 0).
pub fn units(quantity: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> i64 {
    quantity
        .0
        .parse::<Quantity>()
        .map(|q| i64::try_from(q.milli_value() / 1000).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A node's capacity (or allocatable, `allocatable = true`) of a resource, in whole units.
pub fn node_amount(node: &Node, resource: &str, allocatable: bool) -> i64 {
    let status = node.status.as_ref();
    let list = if allocatable {
        status.and_then(|s| s.allocatable.as_ref())
    } else {
        status.and_then(|s| s.capacity.as_ref())
    };
    list.and_then(|l| l.get(resource)).map_or(0, units)
}

/// The extended resources (names with a `/`) a pod's containers request, summed, in whole units.
pub fn extended_requests(pod: &Pod) -> BTreeMap<String, i64> {
    let mut requests = BTreeMap::new();
    let containers = pod.spec.as_ref().map(|s| s.containers.as_slice());
    for container in containers.unwrap_or_default() {
        let resources = container.resources.as_ref();
        let asked = resources
            .and_then(|r| r.requests.as_ref())
            .or_else(|| resources.and_then(|r| r.limits.as_ref()));
        for (name, quantity) in asked.into_iter().flatten() {
            if name.contains('/') {
                *requests.entry(name.clone()).or_insert(0) += units(quantity);
            }
        }
    }
    requests
}

/// When an event last happened.
pub fn event_time(event: &Event) -> Option<SystemTime> {
    event
        .last_timestamp
        .as_ref()
        .map(to_system)
        .or_else(|| event.event_time.as_ref().map(|t| to_system(&Time(t.0))))
        .or_else(|| event.first_timestamp.as_ref().map(to_system))
}

/// The newest event about an object (by kind, namespace and name), optionally of one reason
/// and only of type `Warning`.
pub fn newest_event<'a>(
    events: &'a [Event],
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    reason: Option<&str>,
) -> Option<&'a Event> {
    events
        .iter()
        .filter(|e| {
            let about = &e.involved_object;
            about.kind.as_deref() == Some(kind)
                && about.name.as_deref() == Some(name)
                && (namespace.is_none() || about.namespace.as_deref() == namespace)
                && e.type_.as_deref() == Some("Warning")
                && reason.is_none_or(|r| e.reason.as_deref() == Some(r))
        })
        .max_by_key(|e| event_time(e))
}

/// Whether a node has GPUs: an `nvidia.com/gpu` capacity, GPU feature discovery's
/// `nvidia.com/gpu.present`, or NFD's NVIDIA PCI label.
pub fn gpu_node(node: &Node) -> bool {
    node_amount(node, "nvidia.com/gpu", false) > 0
        || label(node, "nvidia.com/gpu.present") == Some("true")
        || label(node, "feature.node.kubernetes.io/pci-10de.present").is_some()
}
