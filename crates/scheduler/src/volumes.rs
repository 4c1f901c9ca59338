//! kube-scheduler's VolumeBinding plugin inside a decision, over
//! [`tessera_storage::volume_binding`]: the storage objects of the snapshot ([`Volumes`]), the
//! pod's claims sorted once (PreFilter), each node judged with upstream's reasons (Filter), the
//! writes PreBind makes for the chosen node (Reserve), and those writes booked so the next pod
//! of the pass sees them.
//!
//! Knows nothing of how the objects are fetched or written; the storage decisions are
//! tessera-storage's. Capacity is not booked between pods of a pass (upstream does not either:
//! the drivers republish it).

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tessera_storage::volume_binding::{self, PodVolumeClaims, PreFilter, Reservation, Snapshot};

use crate::filters::{Plugin, Rejection};
use crate::node_info::NodeInfo;

/// The storage objects VolumeBinding reads, as the API shows them.
#[derive(Debug, Clone, Default)]
pub struct Volumes {
    /// PersistentVolumeClaims, all namespaces.
    pub claims: Vec<Value>,
    /// PersistentVolumes.
    pub volumes: Vec<Value>,
    /// StorageClasses.
    pub classes: Vec<Value>,
    /// CSIDrivers.
    pub csi_drivers: Vec<Value>,
    /// CSIStorageCapacities, all namespaces.
    pub capacities: Vec<Value>,
}

impl Volumes {
    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            claims: &self.claims,
            volumes: &self.volumes,
            classes: &self.classes,
            csi_drivers: &self.csi_drivers,
            capacities: &self.capacities,
        }
    }

    /// Books a reservation: its claims and volumes replace the snapshot's.
    pub fn book(&mut self, reservation: &Reservation) {
        let same = |a: &Value, b: &Value| {
            a.pointer("/metadata/name") == b.pointer("/metadata/name")
                && a.pointer("/metadata/namespace") == b.pointer("/metadata/namespace")
        };
        for (list, written) in [
            (&mut self.claims, &reservation.claims),
            (&mut self.volumes, &reservation.volumes),
        ] {
            for object in written {
                match list.iter_mut().find(|o| same(o, object)) {
                    Some(slot) => *slot = object.clone(),
                    None => list.push(object.clone()),
                }
            }
        }
    }
}

/// Whether the pod names a PersistentVolumeClaim (directly or through a generic ephemeral
/// volume).
pub fn names_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|volumes| {
            volumes
                .iter()
                .any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some())
        })
}

/// PreFilter's verdict on a pod.
#[derive(Debug)]
pub(crate) enum PodVolumes<'a> {
    /// No claim: nothing to judge.
    Skip,
    /// No node can do: upstream's PreFilter message.
    Unschedulable(String),
    /// Judge each node for these claims.
    Claims(PodVolumeClaims<'a>),
}

/// PreFilter: the pod's claims sorted, or why it cannot be scheduled anywhere (an
/// inconsistent snapshot's error is given as the reason too).
pub(crate) fn pre_filter<'a>(pod: &Pod, volumes: &'a Volumes) -> PodVolumes<'a> {
    if !names_claims(pod) {
        return PodVolumes::Skip;
    }
    let Ok(pod) = serde_json::to_value(pod) else {
        return PodVolumes::Skip;
    };
    match volume_binding::pre_filter(&pod, volumes.snapshot()) {
        Ok(PreFilter::Skip) => PodVolumes::Skip,
        Ok(PreFilter::Unschedulable(reason)) => PodVolumes::Unschedulable(reason),
        Ok(PreFilter::Claims(claims)) => PodVolumes::Claims(claims),
        Err(error) => PodVolumes::Unschedulable(error.to_string()),
    }
}

/// The node as the storage core reads it: its name and labels.
fn node_value(node: &NodeInfo) -> Value {
    json!({"metadata": {"name": node.name, "labels": &*node.labels}})
}

/// Filter: whether the node can hold the pod's claims, with upstream's reasons.
pub(crate) fn filter(
    claims: &PodVolumeClaims<'_>,
    node: &NodeInfo,
    volumes: &Volumes,
) -> Result<(), Rejection> {
    let reasons = match volume_binding::filter(claims, &node_value(node), volumes.snapshot()) {
        Ok(found) if found.fits() => return Ok(()),
        Ok(found) => found.reasons.iter().map(ToString::to_string).collect(),
        Err(error) => vec![error.to_string()],
    };
    Err(Rejection {
        plugin: Plugin::VolumeBinding,
        reasons,
    })
}

/// Reserve: the writes PreBind makes on the chosen node (nothing when it does not fit).
pub(crate) fn reserve(
    claims: &PodVolumeClaims<'_>,
    node: &NodeInfo,
    volumes: &Volumes,
) -> Reservation {
    match volume_binding::filter(claims, &node_value(node), volumes.snapshot()) {
        Ok(found) => volume_binding::reserve(&found, &node.name),
        Err(_) => Reservation::default(),
    }
}

#[cfg(test)]
mod tests;
