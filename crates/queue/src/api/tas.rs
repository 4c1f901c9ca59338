//! Topology-Aware Scheduling's stored objects in and out of the core, as Kueue's TAS cache and
//! topology ungater read and write them (`pkg/cache/scheduler/tas_*.go`,
//! `pkg/controller/tas/topology_ungater.go`):
//!
//! - `tas_flavors`: per ResourceFlavor with `spec.topologyName` whose Topology exists, the
//!   snapshot over the Ready, schedulable Nodes its `nodeLabels` select, less what bound pods
//!   that are not TAS pods request, plus the placements of the Workloads holding quota (each
//!   placement, and each non-TAS pod of such a Workload, remembered as the Workload's);
//! - `missing_topologies`: a ClusterQueue's TAS flavors whose Topology does not exist (its
//!   `Active` condition says `TopologyNotFound`);
//! - `topology_json` / `topology_of`: a PodSet assignment's `topologyAssignment` (v1beta2);
//! - `ungate`: for Workloads admitted by TAS, the pod patches that remove the
//!   `kueue.x-k8s.io/topology` scheduling gate and add the assigned domain's node selector.
//!
//! Pure: objects are JSON values handed in. Knows nothing about the scheduling cycle.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PodSpec, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use serde_json::{Value, json};
use tessera_model::kueue::topology::{PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION, TopologySpec};
use tessera_model::kueue::topology_assignment::{self, TopologyDomain};
use tessera_model::kueue::workload as wl_api;
use tessera_model::quantity::Quantity;
use tessera_model::{conditions, json};

use crate::amount::resource_value;
use crate::api::objects::{self, Objects};
use crate::tas::annotations::topology_from_annotations;
use crate::tas::request::{TopologyAssignment, TopologyDomainAssignment};
use crate::tas::ungate::{PodView, RankLabels, pods_to_ungate};
use crate::tas::{TasFlavors, TasSnapshot, TopologyNode};
use crate::workload::pod_requests;

/// `kueue.x-k8s.io/topology`: the gate a TAS pod holds until the ungater places it.
pub use tessera_model::kueue::topology::TOPOLOGY_SCHEDULING_GATE;
/// `kueue.x-k8s.io/workload`: the annotation naming a TAS pod's Workload.
pub const WORKLOAD_ANNOTATION: &str = "kueue.x-k8s.io/workload";
/// `kueue.x-k8s.io/podset`: the label naming a pod's PodSet.
pub const POD_SET_LABEL: &str = "kueue.x-k8s.io/podset";

/// The `spec.topologyName` of a ResourceFlavor object, if any.
pub fn topology_name(flavor: &Value) -> Option<&str> {
    flavor.pointer("/spec/topologyName").and_then(Value::as_str)
}

/// The Topologies' levels by name.
fn topology_levels(objects: &Objects) -> BTreeMap<&str, Vec<String>> {
    objects
        .topologies
        .iter()
        .filter_map(|topology| {
            let spec: TopologySpec = serde_json::from_value(topology.get("spec")?.clone()).ok()?;
            let levels = spec.levels.into_iter().map(|l| l.node_label).collect();
            Some((objects::name(topology), levels))
        })
        .collect()
}

/// A Node as TAS reads it.
fn topology_node(node: &Value) -> TopologyNode {
    let labels: BTreeMap<String, String> = node
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    let allocatable = node
        .pointer("/status/allocatable")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(resource, quantity)| {
            let quantity = Quantity::try_from(&ApiQuantity(quantity.as_str()?.to_owned())).ok()?;
            Some((resource.clone(), resource_value(resource, &quantity)))
        })
        .collect();
    let taints: Vec<Taint> = node
        .pointer("/spec/taints")
        .and_then(|t| serde_json::from_value(t.clone()).ok())
        .unwrap_or_default();
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let unschedulable = node.pointer("/spec/unschedulable") == Some(&json!(true));
    TopologyNode {
        name: objects::name(node).to_owned(),
        labels,
        allocatable,
        taints,
        schedulable_and_ready: ready && !unschedulable,
    }
}

fn annotations(object: &Value) -> BTreeMap<String, String> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| serde_json::from_value(a.clone()).ok())
        .unwrap_or_default()
}

/// `utiltas.IsTAS`: the pod asks for TAS by its annotations.
fn is_tas_pod(pod: &Value) -> bool {
    let annotations = annotations(pod);
    annotations.contains_key(PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION)
        || matches!(topology_from_annotations(&annotations), Ok(Some(_)))
}

/// Bound to a node and not terminated.
fn bound_and_running(pod: &Value) -> Option<&str> {
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str)?;
    let phase = json::text(pod, "/status/phase");
    (!matches!(phase, "Succeeded" | "Failed")).then_some(node)
}

/// `namespace/name` of an object.
fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        json::text(object, "/metadata/namespace"),
        objects::name(object)
    )
}

/// The uids of an object's owners.
fn owner_uids(object: &Value) -> impl Iterator<Item = &str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|owner| owner.get("uid").and_then(Value::as_str))
}

/// The Workload (`namespace/name`) a non-TAS pod belongs to, among `by_owner` (the holding
/// Workloads by the uid of what owns them): the pod itself (the Pod integration) or the
/// pod's owner (a Job). Pods of deeper chains (a JobSet's Jobs) stay unattributed.
fn holder_of<'w>(pod: &Value, by_owner: &'w BTreeMap<&str, String>) -> Option<&'w String> {
    let own = pod.pointer("/metadata/uid").and_then(Value::as_str);
    own.into_iter()
        .chain(owner_uids(pod))
        .find_map(|uid| by_owner.get(uid))
}

/// The snapshots of the TAS flavors over `objects`' Topologies, Nodes and pods, with the
/// placements of `holding` (the Workloads holding quota), each placement and each non-TAS
/// pod of a holding Workload remembered as that Workload's usage.
pub fn tas_flavors<'o>(objects: &Objects, holding: impl Iterator<Item = &'o Value>) -> TasFlavors {
    with_usage(base_flavors(objects), objects, holding)
}

/// The snapshots of the TAS flavors over the Topologies, flavors and Nodes last read, kept
/// between passes: read again only when one of them changed (a Node by its address, as a
/// watch cache hands out an unchanged one).
#[derive(Debug, Clone, Default)]
pub struct TasBase {
    /// What the snapshots were read from.
    read: Option<TasInputs>,
    base: TasFlavors,
}

/// The objects TAS snapshots are read from.
#[derive(Debug, Clone)]
struct TasInputs {
    /// Held, so that an unchanged Node is known by its address.
    nodes: Vec<Arc<Value>>,
    topologies: Vec<Value>,
    flavors: Vec<Value>,
}

impl TasInputs {
    fn of(objects: &Objects) -> TasInputs {
        TasInputs {
            nodes: objects.nodes.clone(),
            topologies: objects.topologies.clone(),
            flavors: objects.flavors.clone(),
        }
    }

    /// Whether `objects` hold the very same Nodes and equal Topologies and flavors.
    fn same_as(&self, objects: &Objects) -> bool {
        self.nodes.len() == objects.nodes.len()
            && self
                .nodes
                .iter()
                .zip(&objects.nodes)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && self.topologies == objects.topologies
            && self.flavors == objects.flavors
    }
}

impl TasBase {
    /// [`tas_flavors`], the part that reads Topologies, flavors and Nodes taken from `self`
    /// when none of them changed.
    pub fn tas_flavors<'o>(
        &mut self,
        objects: &Objects,
        holding: impl Iterator<Item = &'o Value>,
    ) -> TasFlavors {
        if !self.read.as_ref().is_some_and(|read| read.same_as(objects)) {
            self.base = base_flavors(objects);
            self.read = Some(TasInputs::of(objects));
        }
        with_usage(self.base.clone(), objects, holding)
    }
}

/// The snapshots of the TAS flavors over `objects`' Topologies and Nodes, nothing in use.
fn base_flavors(objects: &Objects) -> TasFlavors {
    let mut tas = TasFlavors::default();
    if objects
        .flavors
        .iter()
        .all(|flavor| topology_name(flavor).is_none())
    {
        return tas;
    }
    let levels = topology_levels(objects);
    let nodes: Vec<TopologyNode> = objects.nodes.iter().map(|n| topology_node(n)).collect();
    for flavor in &objects.flavors {
        let Some(topology) = topology_name(flavor) else {
            continue;
        };
        let Some(spec) = objects::flavor(flavor) else {
            continue;
        };
        tas.topologies
            .insert(spec.name.clone(), topology.to_owned());
        let Some(levels) = levels.get(topology) else {
            continue;
        };
        let snapshot = TasSnapshot::new(
            topology,
            levels,
            &spec.node_labels,
            &spec.tolerations,
            &nodes,
        );
        tas.snapshots.insert(spec.name, snapshot);
    }
    tas
}

/// `tas` with the running non-TAS pods and the placements of `holding` (the Workloads
/// holding quota) in use.
fn with_usage<'o>(
    mut tas: TasFlavors,
    objects: &Objects,
    holding: impl Iterator<Item = &'o Value>,
) -> TasFlavors {
    if tas.snapshots.is_empty() {
        return tas;
    }
    let holding: Vec<&Value> = holding.collect();
    let by_owner: BTreeMap<&str, String> = holding
        .iter()
        .flat_map(|workload| owner_uids(workload).map(|uid| (uid, key_of(workload))))
        .collect();
    for pod in &objects.pods {
        let Some(node) = bound_and_running(pod) else {
            continue;
        };
        if is_tas_pod(pod) {
            continue;
        }
        let Some(spec) = pod
            .get("spec")
            .and_then(|s| serde_json::from_value::<PodSpec>(s.clone()).ok())
        else {
            continue;
        };
        let requests = pod_requests(&spec);
        let holder = holder_of(pod, &by_owner);
        for snapshot in tas.snapshots.values_mut() {
            match holder {
                Some(holder) => snapshot.add_held_non_tas_pod(holder, node, &requests),
                None => snapshot.add_non_tas_pod(node, &requests),
            }
        }
    }
    for workload in holding {
        add_placements(&mut tas, workload);
    }
    tas
}

/// One pod's requests of the named PodSet of a Workload object.
fn pod_set_requests(workload: &Value, pod_set: &str) -> Option<crate::workload::Requests> {
    let core = objects::workload(workload)?;
    core.pod_sets
        .into_iter()
        .find(|ps| ps.name == pod_set)
        .map(|ps| ps.requests)
}

/// Adds a Workload's topology placements to its TAS flavors' usage.
fn add_placements(tas: &mut TasFlavors, workload: &Value) {
    let Some(admission) = objects::admission(workload) else {
        return;
    };
    let holder = key_of(workload);
    for assignment in admission.pod_set_assignments.iter().flatten() {
        let Some(topology) = &assignment.topology_assignment else {
            continue;
        };
        let name = assignment.name.as_deref().unwrap_or("main");
        let Some(flavor) = assignment
            .flavors
            .iter()
            .flatten()
            .map(|(_, flavor)| flavor)
            .find(|flavor| tas.snapshots.contains_key(*flavor))
        else {
            continue;
        };
        let Some(requests) = pod_set_requests(workload, name) else {
            continue;
        };
        if let Some(snapshot) = tas.snapshots.get_mut(flavor) {
            snapshot.add_held_assignment(&holder, &topology_of(topology), &requests);
        }
    }
}

/// A ClusterQueue's TAS flavors (in its order) whose Topology does not exist, as
/// `(flavor, topology)`.
pub fn missing_topologies(flavors: &[String], tas: &TasFlavors) -> Vec<(String, String)> {
    flavors
        .iter()
        .filter(|flavor| !tas.snapshots.contains_key(*flavor))
        .filter_map(|flavor| Some((flavor.clone(), tas.topologies.get(flavor)?.clone())))
        .collect()
}

/// The v1beta2 `topologyAssignment` of a placement (`tas.V1Beta2From`).
pub fn topology_json(assignment: &TopologyAssignment) -> Value {
    let domains: Vec<TopologyDomain> = assignment
        .domains
        .iter()
        .map(|d| TopologyDomain {
            values: d.values.clone(),
            count: d.count,
        })
        .collect();
    json!(topology_assignment::assignment_from_domains(
        &assignment.levels,
        &domains
    ))
}

/// The core's placement of a stored `topologyAssignment` (`InternalFrom`).
pub fn topology_of(assignment: &wl_api::TopologyAssignment) -> TopologyAssignment {
    TopologyAssignment {
        levels: assignment.levels.clone(),
        domains: topology_assignment::domains_of(assignment)
            .into_iter()
            .map(|d| TopologyDomainAssignment {
                values: d.values,
                count: d.count,
            })
            .collect(),
    }
}

/// A merge patch of one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodPatch {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The JSON merge patch.
    pub patch: Value,
}

fn has_topology_gate(pod: &Value) -> bool {
    pod.pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .is_some_and(|gates| gates.iter().any(|g| g["name"] == TOPOLOGY_SCHEDULING_GATE))
}

fn pod_view(pod: &Value) -> PodView {
    let map = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
            .unwrap_or_default()
    };
    PodView {
        name: objects::name(pod).to_owned(),
        labels: map("/metadata/labels"),
        gated: has_topology_gate(pod),
        node_selector: map("/spec/nodeSelector"),
    }
}

/// The patch ungating `pod` into the domain with `node_labels`: the topology gate removed
/// (the others kept), the labels merged into its node selector.
fn ungate_patch(pod: &Value, node_labels: &BTreeMap<String, String>) -> Value {
    let gates: Vec<&Value> = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|g| g["name"] != TOPOLOGY_SCHEDULING_GATE)
        .collect();
    let gates = if gates.is_empty() {
        Value::Null
    } else {
        json!(gates)
    };
    json!({"spec": {"schedulingGates": gates, "nodeSelector": node_labels}})
}

/// Per PodSet of an admission, its rank offset and bound: PodSets of one group (a leader
/// and its workers) rank the smaller one first.
fn rank_offsets(
    workload: &wl_api::WorkloadSpec,
    assignments: &[wl_api::PodSetAssignment],
) -> BTreeMap<String, (i32, i32)> {
    let request_of = |name: &str| {
        workload
            .pod_sets
            .iter()
            .flatten()
            .find(|ps| ps.name.as_deref().unwrap_or("main") == name)
            .and_then(|ps| ps.topology_request.as_ref())
    };
    let mut groups: Vec<(String, Vec<(String, i32)>)> = Vec::new();
    for (index, assignment) in assignments.iter().enumerate() {
        let name = assignment.name.clone().unwrap_or_else(|| "main".into());
        let group = request_of(&name)
            .and_then(|r| r.pod_set_group_name.clone())
            .unwrap_or_else(|| index.to_string());
        let count = assignment.count.unwrap_or(0);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, members)) => members.push((name, count)),
            None => groups.push((group, vec![(name, count)])),
        }
    }
    let mut offsets = BTreeMap::new();
    for (_, members) in groups {
        match members.as_slice() {
            [a, b, ..] => {
                let (small, large) = if a.1 > b.1 { (b, a) } else { (a, b) };
                offsets.insert(small.0.clone(), (0, small.1));
                offsets.insert(large.0.clone(), (small.1, large.1 + small.1));
            }
            [only] => {
                offsets.insert(only.0.clone(), (0, only.1));
            }
            [] => {}
        }
    }
    offsets
}

/// The topology ungater over every Workload admitted by TAS: the patches of their gated pods.
/// Only Workloads with pods (by the Workload annotation) and a topology assignment are read
/// further, so a pass over many Workloads without TAS costs a lookup each.
pub fn ungate<'a>(workloads: impl IntoIterator<Item = &'a Value>, pods: &[Value]) -> Vec<PodPatch> {
    let mut by_workload: BTreeMap<(&str, &str), Vec<&Value>> = BTreeMap::new();
    for pod in pods {
        if let Some(Value::String(workload)) = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(WORKLOAD_ANNOTATION))
        {
            by_workload
                .entry((objects::namespace(pod), workload.as_str()))
                .or_default()
                .push(pod);
        }
    }
    let mut patches = Vec::new();
    if by_workload.is_empty() {
        return patches;
    }
    for workload in workloads {
        let Some(pods) = by_workload.get(&(objects::namespace(workload), objects::name(workload)))
        else {
            continue;
        };
        let by_topology = workload
            .pointer("/status/admission/podSetAssignments")
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|a| a.get("topologyAssignment").is_some()));
        if !by_topology || !conditions::is_true(workload, "Admitted") {
            continue;
        }
        let (Some(admission), Some(spec)) = (
            objects::admission(workload),
            workload
                .get("spec")
                .and_then(|s| serde_json::from_value::<wl_api::WorkloadSpec>(s.clone()).ok()),
        ) else {
            continue;
        };
        let assignments = admission.pod_set_assignments.unwrap_or_default();
        let offsets = rank_offsets(&spec, &assignments);
        let namespace = objects::namespace(workload);
        for assignment in &assignments {
            let Some(topology) = &assignment.topology_assignment else {
                continue;
            };
            let pod_set = assignment.name.as_deref().unwrap_or("main");
            let members: Vec<&Value> = pods
                .iter()
                .copied()
                .filter(|pod| {
                    pod.pointer("/metadata/labels/kueue.x-k8s.io~1podset") == Some(&json!(pod_set))
                        && !matches!(json::text(pod, "/status/phase"), "Succeeded" | "Failed")
                })
                .collect();
            let views: Vec<PodView> = members.iter().map(|pod| pod_view(pod)).collect();
            let request = spec
                .pod_sets
                .iter()
                .flatten()
                .find(|ps| ps.name.as_deref().unwrap_or("main") == pod_set)
                .and_then(|ps| ps.topology_request.as_ref());
            let (offset, max_rank) = offsets.get(pod_set).copied().unwrap_or_default();
            let ranks = request.and_then(|r| {
                Some(RankLabels {
                    pod_index_label: r.pod_index_label.clone()?,
                    sub_group: r
                        .sub_group_index_label
                        .clone()
                        .map(|label| (label, r.sub_group_count)),
                    offset,
                    max_rank,
                })
            });
            let count = assignment.count.unwrap_or(0);
            for ungate in pods_to_ungate(&topology_of(topology), count, &views, ranks.as_ref()) {
                let Some(pod) = members.iter().find(|p| objects::name(p) == ungate.pod) else {
                    continue;
                };
                patches.push(PodPatch {
                    namespace: namespace.to_owned(),
                    name: ungate.pod,
                    patch: ungate_patch(pod, &ungate.node_labels),
                });
            }
        }
    }
    patches
}

#[cfg(test)]
#[path = "tas_tests.rs"]
mod tests;
