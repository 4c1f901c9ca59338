//! kube-scheduler's VolumeBinding plugin (`pkg/scheduler/framework/plugins/volumebinding`,
//! `volume_binding.go` and `binder.go`) as pure steps: [`pre_filter`] sorts a pod's claims into
//! bound, unbound immediate and unbound `WaitForFirstConsumer` ones (or says why the pod cannot
//! be scheduled at all), [`filter`] decides whether one node can hold them (upstream's reasons
//! verbatim) and which volumes or provisionings it would use, and [`reserve`] turns that choice
//! into the writes the plugin's PreBind makes (volumes pre-bound to their claims, claims
//! annotated with the selected node).
//!
//! Knows nothing of the scheduling cycle, the assume caches or waiting for the PV controller to
//! finish a binding; nor of scoring by capacity. Objects come from the caller's snapshot.

use std::collections::BTreeMap;

use serde_json::Value;
use tessera_model::json::text;

use crate::find_matching_volume;
use crate::objects::{
    ANN_BIND_COMPLETED, ANN_SELECTED_NODE, NOT_SUPPORTED_PROVISIONER, annotation, by_name,
    by_namespaced_name, check_node_affinity, claim_class, has_annotation, has_storage_request,
    is_deleting, name, namespace, node_labels, pod_claims, quantity_at, requested_storage,
    set_annotation, uid, volume_class,
};
use crate::pv_controller::{SyncError, bind_volume_to_claim, is_delay_binding_mode};

/// A bound claim's volume does not fit the node.
pub const REASON_NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// No volume to bind (nor provisioning) on the node.
pub const REASON_BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// The class's driver reports too little capacity reachable from the node.
pub const REASON_NOT_ENOUGH_SPACE: &str = "node(s) did not have enough free storage";
/// A bound claim names a volume that does not exist.
pub const REASON_PV_NOT_EXIST: &str =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// PreFilter's reason for a pod with unbound immediate claims.
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// What the plugin reads: claims, volumes, classes, `CSIDriver`s and `CSIStorageCapacity`s.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    /// PersistentVolumeClaims, all namespaces.
    pub claims: &'a [Value],
    /// PersistentVolumes.
    pub volumes: &'a [Value],
    /// StorageClasses.
    pub classes: &'a [Value],
    /// `storage.k8s.io/v1` CSIDrivers (which opt into capacity checks).
    pub csi_drivers: &'a [Value],
    /// `storage.k8s.io/v1` CSIStorageCapacities, all namespaces.
    pub capacities: &'a [Value],
}

/// An error status (upstream's `framework.AsStatus`): the snapshot is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindingError {
    /// A class without a binding mode.
    #[error(transparent)]
    Class(#[from] SyncError),
    /// A claim to provision has no class.
    #[error("no class for claim {0:?}")]
    NoClass(String),
    /// A claim to provision names a class that does not exist.
    #[error("failed to find storage class {0:?}")]
    ClassNotFound(String),
}

/// PreFilter's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum PreFilter<'a> {
    /// The pod names no claim: the plugin has nothing to say.
    Skip,
    /// UnschedulableAndUnresolvable on every node, with this reason.
    Unschedulable(String),
    /// Filter each node with these claims.
    Claims(PodVolumeClaims<'a>),
}

/// A pod's claims, sorted as upstream's `GetPodVolumeClaims` sorts them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodVolumeClaims<'a> {
    /// Claims bound (volumeName set and `bind-completed`).
    pub bound: Vec<&'a Value>,
    /// Unbound claims of a `WaitForFirstConsumer` class without a volumeName.
    pub unbound_delay_binding: Vec<&'a Value>,
    /// Every other unbound claim (immediate binding, or pre-bound by name).
    pub unbound_immediate: Vec<&'a Value>,
    /// For each class of a delayed claim, the volumes of that class.
    pub volumes_by_class: BTreeMap<String, Vec<&'a Value>>,
}

/// What a node offers the pod's claims.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeVolumes<'a> {
    /// Upstream's reasons the node does not fit (empty: it fits).
    pub reasons: Vec<&'static str>,
    /// (volume, claim): existing volumes the claims would bind to.
    pub static_bindings: Vec<(&'a Value, &'a Value)>,
    /// Claims to provision on the node.
    pub dynamic_provisions: Vec<&'a Value>,
}

impl NodeVolumes<'_> {
    /// Whether the node fits the pod's claims.
    pub fn fits(&self) -> bool {
        self.reasons.is_empty()
    }
}

/// What to write once the node is chosen (upstream's Reserve and PreBind).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reservation {
    /// Volumes to `Update`: pre-bound to their claims (`claimRef`, `bound-by-controller`).
    pub volumes: Vec<Value>,
    /// Claims to `Update`: annotated with `volume.kubernetes.io/selected-node`.
    pub claims: Vec<Value>,
}

impl Reservation {
    /// Whether nothing is left to write (all the pod's claims were bound already).
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty() && self.claims.is_empty()
    }
}

/// PreFilter: `podHasPVCs` then `GetPodVolumeClaims`.
pub fn pre_filter<'a>(pod: &Value, snapshot: Snapshot<'a>) -> Result<PreFilter<'a>, BindingError> {
    let wanted = pod_claims(pod);
    if wanted.is_empty() {
        return Ok(PreFilter::Skip);
    }
    let mut claims = Vec::new();
    for (claim_name, ephemeral) in &wanted {
        let Some(claim) = by_namespaced_name(snapshot.claims, namespace(pod), claim_name) else {
            return Ok(PreFilter::Unschedulable(if *ephemeral {
                format!(
                    "waiting for ephemeral volume controller to create the persistentvolumeclaim {claim_name:?}"
                )
            } else {
                format!("persistentvolumeclaim {claim_name:?} not found")
            }));
        };
        if text(claim, "/status/phase") == "Lost" {
            return Ok(PreFilter::Unschedulable(format!(
                "persistentvolumeclaim {claim_name:?} bound to non-existent persistentvolume {:?}",
                text(claim, "/spec/volumeName")
            )));
        }
        if is_deleting(claim) {
            return Ok(PreFilter::Unschedulable(format!(
                "persistentvolumeclaim {claim_name:?} is being deleted"
            )));
        }
        if *ephemeral && !controlled_by(claim, pod) {
            return Ok(PreFilter::Unschedulable(format!(
                "PVC {}/{} was not created for pod {}/{} (pod is not owner)",
                namespace(claim),
                name(claim),
                namespace(pod),
                name(pod)
            )));
        }
        claims.push(claim);
    }
    let mut sorted = PodVolumeClaims::default();
    for claim in claims {
        let volume_name = text(claim, "/spec/volumeName");
        if !volume_name.is_empty() && has_annotation(claim, ANN_BIND_COMPLETED) {
            sorted.bound.push(claim);
        } else if is_delay_binding_mode(claim, snapshot.classes)? && volume_name.is_empty() {
            sorted.unbound_delay_binding.push(claim);
        } else {
            sorted.unbound_immediate.push(claim);
        }
    }
    if !sorted.unbound_immediate.is_empty() {
        return Ok(PreFilter::Unschedulable(REASON_UNBOUND_IMMEDIATE.into()));
    }
    for claim in &sorted.unbound_delay_binding {
        let class = claim_class(claim);
        sorted
            .volumes_by_class
            .entry(class.to_string())
            .or_insert_with(|| {
                snapshot
                    .volumes
                    .iter()
                    .filter(|volume| volume_class(volume) == class)
                    .collect()
            });
    }
    Ok(PreFilter::Claims(sorted))
}

/// Whether `object` has a controller owner reference to `owner`'s UID.
fn controlled_by(object: &Value, owner: &Value) -> bool {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|r| r.get("controller") == Some(&Value::Bool(true)) && text(r, "/uid") == uid(owner))
}

/// Filter: upstream's `FindPodVolumes` for one node.
pub fn filter<'a>(
    claims: &PodVolumeClaims<'a>,
    node: &Value,
    snapshot: Snapshot<'a>,
) -> Result<NodeVolumes<'a>, BindingError> {
    let labels = node_labels(node);
    let mut found = NodeVolumes::default();
    let (mut bound_satisfied, mut bound_found) = (true, true);
    for claim in &claims.bound {
        let Some(volume) = by_name(snapshot.volumes, text(claim, "/spec/volumeName")) else {
            bound_found = false;
            break;
        };
        if !check_node_affinity(volume, &labels) {
            bound_satisfied = false;
            break;
        }
    }
    let (mut unbound_satisfied, mut sufficient_storage) = (true, true);
    if !claims.unbound_delay_binding.is_empty() {
        let mut to_match = Vec::new();
        let mut to_provision = Vec::new();
        let mut other_node = false;
        for &claim in &claims.unbound_delay_binding {
            match annotation(claim, ANN_SELECTED_NODE) {
                Some(selected) if selected != name(node) => {
                    other_node = true;
                    break;
                }
                Some(_) => to_provision.push(claim),
                None => to_match.push(claim),
            }
        }
        if other_node {
            unbound_satisfied = false;
        } else {
            if !to_match.is_empty() {
                let (satisfied, bindings, unmatched) =
                    find_matching_volumes(claims, to_match, node);
                unbound_satisfied = satisfied;
                found.static_bindings = bindings;
                to_provision.extend(unmatched);
            }
            if !to_provision.is_empty() {
                let (satisfied, sufficient, provisions) =
                    check_volume_provisions(&to_provision, node, &labels, snapshot)?;
                unbound_satisfied = satisfied;
                sufficient_storage = sufficient;
                found.dynamic_provisions = provisions;
            }
        }
    }
    for (ok, reason) in [
        (bound_satisfied, REASON_NODE_CONFLICT),
        (unbound_satisfied, REASON_BIND_CONFLICT),
        (sufficient_storage, REASON_NOT_ENOUGH_SPACE),
        (bound_found, REASON_PV_NOT_EXIST),
    ] {
        if !ok {
            found.reasons.push(reason);
        }
    }
    Ok(found)
}

/// `findMatchingVolumes`: the claims, smallest request first, each take the best volume of
/// their class on the node that no earlier claim took.
fn find_matching_volumes<'a>(
    claims: &PodVolumeClaims<'a>,
    mut to_match: Vec<&'a Value>,
    node: &Value,
) -> (bool, Vec<(&'a Value, &'a Value)>, Vec<&'a Value>) {
    to_match.sort_by_key(|claim| requested_storage(claim));
    let mut satisfied = true;
    let mut bindings: Vec<(&'a Value, &'a Value)> = Vec::new();
    let mut unmatched = Vec::new();
    for claim in to_match {
        let candidates = claims
            .volumes_by_class
            .get(claim_class(claim))
            .into_iter()
            .flatten()
            .copied()
            .filter(|volume| {
                bindings
                    .iter()
                    .all(|(chosen, _)| name(chosen) != name(volume))
            });
        match find_matching_volume(claim, candidates, Some(node), true) {
            Some(volume) => bindings.push((volume, claim)),
            None => {
                satisfied = false;
                unmatched.push(claim);
            }
        }
    }
    (satisfied, bindings, unmatched)
}

/// `checkVolumeProvisions`: each claim's class must provision, allow the node's topology and
/// (for a CSI driver that opts in) have the capacity on a topology the node reaches.
/// Returns (provisioning satisfied, storage sufficient, the claims to provision).
fn check_volume_provisions<'a>(
    to_provision: &[&'a Value],
    node: &Value,
    labels: &BTreeMap<String, String>,
    snapshot: Snapshot<'a>,
) -> Result<(bool, bool, Vec<&'a Value>), BindingError> {
    let mut provisions = Vec::new();
    for &claim in to_provision {
        let class_name = claim_class(claim);
        if class_name.is_empty() {
            return Err(BindingError::NoClass(format!(
                "{}/{}",
                namespace(claim),
                name(claim)
            )));
        }
        let Some(class) = by_name(snapshot.classes, class_name) else {
            return Err(BindingError::ClassNotFound(class_name.to_string()));
        };
        let provisioner = text(class, "/provisioner");
        if provisioner.is_empty() || provisioner == NOT_SUPPORTED_PROVISIONER {
            return Ok((false, true, Vec::new()));
        }
        if !topology_matches(class.get("allowedTopologies"), labels) {
            return Ok((false, true, Vec::new()));
        }
        if !has_enough_capacity(provisioner, claim, class_name, node, snapshot) {
            return Ok((true, false, Vec::new()));
        }
        provisions.push(claim);
    }
    Ok((true, true, provisions))
}

/// `MatchTopologySelectorTerms`: no terms allow every node; a term with expressions allows a
/// node whose label is among each expression's values; an empty term allows none.
fn topology_matches(terms: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let terms = terms
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    terms.iter().any(|term| {
        let expressions = term
            .get("matchLabelExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        !expressions.is_empty()
            && expressions.iter().all(|expression| {
                let values: Vec<String> = tessera_model::json::strings_at(expression, "/values");
                labels
                    .get(text(expression, "/key"))
                    .is_some_and(|value| values.contains(value))
            })
    })
}

/// `hasEnoughCapacity`: only a CSIDriver with `storageCapacity: true` is checked; then some
/// CSIStorageCapacity of the class, large enough (`maximumVolumeSize` preferred over
/// `capacity`), must have a node topology selecting the node.
fn has_enough_capacity(
    provisioner: &str,
    claim: &Value,
    class_name: &str,
    node: &Value,
    snapshot: Snapshot<'_>,
) -> bool {
    if !has_storage_request(claim) {
        return true;
    }
    let Some(driver) = by_name(snapshot.csi_drivers, provisioner) else {
        return true;
    };
    if driver.pointer("/spec/storageCapacity") != Some(&Value::Bool(true)) {
        return true;
    }
    let size = requested_storage(claim).value();
    let labels = node_labels(node);
    snapshot.capacities.iter().any(|capacity| {
        let limit_field = if capacity
            .get("maximumVolumeSize")
            .is_some_and(|m| !m.is_null())
        {
            "/maximumVolumeSize"
        } else {
            "/capacity"
        };
        let sufficient = capacity.pointer(limit_field).is_some_and(|l| !l.is_null())
            && quantity_at(capacity, limit_field).value() >= size;
        let topology = capacity.get("nodeTopology").filter(|t| !t.is_null());
        text(capacity, "/storageClassName") == class_name
            && sufficient
            && topology.is_some_and(|t| tessera_model::selector::matches(Some(t), &labels))
    })
}

/// Reserve and PreBind: every static binding's volume bound to its claim, every claim to
/// provision annotated with the node.
pub fn reserve(chosen: &NodeVolumes<'_>, node_name: &str) -> Reservation {
    Reservation {
        volumes: chosen
            .static_bindings
            .iter()
            .map(|(volume, claim)| bind_volume_to_claim(volume, claim).0)
            .collect(),
        claims: chosen
            .dynamic_provisions
            .iter()
            .map(|claim| {
                let mut claim = (*claim).clone();
                set_annotation(&mut claim, ANN_SELECTED_NODE, node_name);
                claim
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests;
