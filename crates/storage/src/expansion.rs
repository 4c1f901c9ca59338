//! Volume expansion as decisions: the API server's `PersistentVolumeClaimResize` admission
//! ([`admit_resize`]), external-resizer's controller expansion of a simulated driver's volume
//! ([`resize`]: the volume's new capacity, the claim's `allocatedResources`,
//! `allocatedResourceStatuses` and conditions, its events), and the kubelet's node expansion
//! that finishes it ([`finish_node_expansion`]). With `RecoverVolumeExpansionFailure` as
//! upstream has it on by default.
//!
//! Knows nothing of watches or writes; the time of a condition is an argument.

use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_model::quantity::{Format, Quantity};

use crate::csi::{self, ClaimEvent, LOCAL_DRIVER};
use crate::objects::{claim_class, name, quantity_at, requested_storage, volume_capacity};

/// The admission plugin's refusal of a resize the class does not allow.
pub const NOT_RESIZABLE: &str = "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";
/// The admission plugin's refusal of a resize of a claim not bound.
pub const NOT_BOUND: &str = "Only bound persistent volume claims can be expanded";

/// `PersistentVolumeClaimResize`'s `Validate` for an update of `old` to `new`, with the
/// claim's class (`None` when it does not exist): an error is the Forbidden detail.
pub fn admit_resize(old: &Value, new: &Value, class: Option<&Value>) -> Result<(), &'static str> {
    if requested_storage(new) <= requested_storage(old) {
        return Ok(());
    }
    if text(old, "/status/phase") != "Bound" {
        return Err(NOT_BOUND);
    }
    let (new_class, old_class) = (claim_class(new), claim_class(old));
    let allowed = !new_class.is_empty()
        && new_class == old_class
        && class.is_some_and(|c| c.get("allowVolumeExpansion") == Some(&Value::Bool(true)));
    if allowed { Ok(()) } else { Err(NOT_RESIZABLE) }
}

/// What external-resizer does about one claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Resize {
    /// Nothing to do (no growth asked, not a simulated driver's volume, or done already).
    Skip,
    /// Grow the volume: `UpdateStatus` of the claim to `claim`, `Update` of the volume to
    /// `volume`, the events in order.
    Expand {
        /// The claim with its new status.
        claim: Value,
        /// The volume with its new capacity.
        volume: Value,
        /// `Resizing`, then `FileSystemResizeRequired` or `VolumeResizeSuccessful`.
        events: Vec<ClaimEvent>,
    },
    /// The driver refused: `UpdateStatus` of the claim to `claim` (marked infeasible), and
    /// the `Resizing` and `VolumeResizeFailed` events.
    Fail {
        /// The claim with its new status.
        claim: Value,
        /// The events.
        events: Vec<ClaimEvent>,
    },
}

fn storage_text(bytes: i128) -> String {
    Quantity::from_units(i64::try_from(bytes).unwrap_or(i64::MAX), Format::BinarySi).to_canonical()
}

fn condition(kind: &str, message: &str, now: SystemTime) -> Value {
    let mut condition = json!({"type": kind, "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": tessera_model::time::timestamp(now)});
    if !message.is_empty() {
        condition["message"] = json!(message);
    }
    condition
}

/// external-resizer's resize of `claim`'s `volume` at `now`: only for a bound claim asking
/// more than it has, on a simulated driver's volume; the local driver must find the growth
/// on the volume's node (`node_free`: the node's disk left), and needs the kubelet to finish
/// (node expansion); the other drivers finish at once.
pub fn resize(claim: &Value, volume: &Value, node_free: Option<i128>, now: SystemTime) -> Resize {
    let driver = text(volume, "/spec/csi/driver");
    let wanted = requested_storage(claim).value();
    let has = quantity_at(claim, "/status/capacity/storage").value();
    let status = text(claim, "/status/allocatedResourceStatuses/storage");
    if !csi::is_simulated(driver)
        || text(claim, "/status/phase") != "Bound"
        || text(claim, "/spec/volumeName") != name(volume)
        || wanted <= has
        || status == "NodeResizePending"
        || (status == "ControllerResizeInfeasible"
            && quantity_at(claim, "/status/allocatedResources/storage").value() == wanted)
    {
        return Resize::Skip;
    }
    let resizing = ClaimEvent {
        kind: "Normal",
        reason: "Resizing",
        message: format!("External resizer is resizing volume {}", name(volume)),
    };
    let mut updated = claim.clone();
    updated["status"]["allocatedResources"] = json!({"storage": storage_text(wanted)});
    let growth = wanted - volume_capacity(volume).value();
    if driver == LOCAL_DRIVER && node_free.is_some_and(|free| growth > free) {
        updated["status"]["allocatedResourceStatuses"] =
            json!({"storage": "ControllerResizeInfeasible"});
        if let Some(status) = updated["status"].as_object_mut() {
            status.remove("conditions");
        }
        let message = format!(
            "resize volume {:?} by resizer {driver:?} failed: rpc error: code = ResourceExhausted desc = requested capacity {wanted} exceeds remaining capacity, {} free on the node",
            name(volume),
            storage_text(node_free.unwrap_or_default()),
        );
        return Resize::Fail {
            claim: updated,
            events: vec![
                resizing,
                ClaimEvent {
                    kind: "Warning",
                    reason: "VolumeResizeFailed",
                    message,
                },
            ],
        };
    }
    let mut grown = volume.clone();
    grown["spec"]["capacity"]["storage"] =
        json!(storage_text(wanted.max(volume_capacity(volume).value())));
    let mut events = vec![resizing];
    if driver == LOCAL_DRIVER {
        // A filesystem on a block device: the kubelet grows it where the volume is used.
        updated["status"]["allocatedResourceStatuses"] = json!({"storage": "NodeResizePending"});
        updated["status"]["conditions"] = json!([condition(
            "FileSystemResizePending",
            "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
            now
        )]);
        events.push(ClaimEvent {
            kind: "Normal",
            reason: "FileSystemResizeRequired",
            message: "Require file system resize of volume on node".into(),
        });
    } else {
        updated["status"]["capacity"]["storage"] = json!(storage_text(wanted));
        if let Some(status) = updated["status"].as_object_mut() {
            status.remove("allocatedResourceStatuses");
            status.remove("conditions");
        }
        events.push(ClaimEvent {
            kind: "Normal",
            reason: "VolumeResizeSuccessful",
            message: "Resize volume succeeded".into(),
        });
    }
    Resize::Expand {
        claim: updated,
        volume: grown,
        events,
    }
}

/// The kubelet's node expansion of a claim waiting for it (`NodeResizePending`) on `node`:
/// the claim with its new capacity and no resize status, and the pod event's message
/// (`FileSystemResizeSuccessful`); `None` when nothing is pending.
pub fn finish_node_expansion(claim: &Value, node: &str) -> Option<(Value, String)> {
    if text(claim, "/status/allocatedResourceStatuses/storage") != "NodeResizePending" {
        return None;
    }
    let allocated = claim.pointer("/status/allocatedResources/storage")?.clone();
    let mut updated = claim.clone();
    updated["status"]["capacity"]["storage"] = allocated;
    if let Some(status) = updated["status"].as_object_mut() {
        status.remove("allocatedResourceStatuses");
        status.remove("conditions");
    }
    let message = format!(
        "MountVolume.NodeExpandVolume succeeded for volume {:?} {node}",
        text(claim, "/spec/volumeName")
    );
    Some((updated, message))
}

#[cfg(test)]
mod tests;
