//! The rows `kubectl get pvc` and `kubectl get pv` print, as upstream's
//! `pkg/printers/internalversion/printers.go` (`printPersistentVolumeClaim`,
//! `printPersistentVolume`) computes them: column names with their priority (1 = `-o wide`
//! only) and the cells of one object as text, access modes abbreviated (RWO, ROX, RWX, RWOP),
//! quantities in canonical form, ages as `HumanDuration`.
//!
//! Knows nothing of `Table` responses, column definitions' types or `includeObject`; the API's
//! table code (`tessera_api::table`) owns those and can call these rows (this crate does not
//! depend on `tessera-api`).

use std::time::SystemTime;

use serde_json::Value;
use tessera_model::json::text;

use crate::objects::{
    access_modes, access_modes_string, claim_class, name, quantity_at, volume_class,
};

/// `kubectl get pvc` columns (name, priority).
pub const CLAIM_COLUMNS: [(&str, u8); 9] = [
    ("Name", 0),
    ("Status", 0),
    ("Volume", 0),
    ("Capacity", 0),
    ("Access Modes", 0),
    ("StorageClass", 0),
    ("VolumeAttributesClass", 0),
    ("Age", 0),
    ("VolumeMode", 1),
];

/// `kubectl get pv` columns (name, priority).
pub const VOLUME_COLUMNS: [(&str, u8); 11] = [
    ("Name", 0),
    ("Capacity", 0),
    ("Access Modes", 0),
    ("Reclaim Policy", 0),
    ("Status", 0),
    ("Claim", 0),
    ("StorageClass", 0),
    ("VolumeAttributesClass", 0),
    ("Reason", 0),
    ("Age", 0),
    ("VolumeMode", 1),
];

/// The cells of a PersistentVolumeClaim, in [`CLAIM_COLUMNS`] order. Capacity and access
/// modes come from the status, and only once the claim names a volume.
pub fn claim_row(claim: &Value, now: SystemTime) -> [String; 9] {
    let bound = !text(claim, "/spec/volumeName").is_empty();
    let (capacity, modes) = if bound {
        (
            quantity_at(claim, "/status/capacity/storage").to_string(),
            access_modes_string(&access_modes(claim, "/status/accessModes")),
        )
    } else {
        (String::new(), String::new())
    };
    [
        name(claim).to_string(),
        phase(claim),
        text(claim, "/spec/volumeName").to_string(),
        capacity,
        modes,
        claim_class(claim).to_string(),
        volume_attributes_class(claim),
        age(claim, now),
        volume_mode(claim),
    ]
}

/// The cells of a PersistentVolume, in [`VOLUME_COLUMNS`] order.
pub fn volume_row(volume: &Value, now: SystemTime) -> [String; 11] {
    let claim = match volume.pointer("/spec/claimRef").filter(|r| r.is_object()) {
        Some(claim_ref) => format!(
            "{}/{}",
            text(claim_ref, "/namespace"),
            text(claim_ref, "/name")
        ),
        None => String::new(),
    };
    [
        name(volume).to_string(),
        quantity_at(volume, "/spec/capacity/storage").to_string(),
        access_modes_string(&access_modes(volume, "/spec/accessModes")),
        text(volume, "/spec/persistentVolumeReclaimPolicy").to_string(),
        phase(volume),
        claim,
        volume_class(volume).to_string(),
        volume_attributes_class(volume),
        text(volume, "/status/reason").to_string(),
        age(volume, now),
        volume_mode(volume),
    ]
}

/// `status.phase`, or `Terminating` while the object is being deleted.
fn phase(object: &Value) -> String {
    if crate::objects::is_deleting(object) {
        "Terminating".into()
    } else {
        text(object, "/status/phase").to_string()
    }
}

fn or_unset(object: &Value, pointer: &str) -> String {
    match object.pointer(pointer).and_then(Value::as_str) {
        Some(value) => value.to_string(),
        None => "<unset>".into(),
    }
}

fn volume_attributes_class(object: &Value) -> String {
    or_unset(object, "/spec/volumeAttributesClassName")
}

fn volume_mode(object: &Value) -> String {
    or_unset(object, "/spec/volumeMode")
}

/// `translateTimestampSince(creationTimestamp)`.
fn age(object: &Value, now: SystemTime) -> String {
    let Some(created) =
        tessera_model::time::parse_timestamp(text(object, "/metadata/creationTimestamp"))
    else {
        return "<unknown>".into();
    };
    let seconds = match now.duration_since(created) {
        Ok(elapsed) => elapsed.as_secs() as i64,
        Err(early) => -(early.duration().as_secs() as i64),
    };
    tessera_model::time::human_duration(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::with;
    use serde_json::json;
    use std::time::Duration;

    fn now() -> SystemTime {
        tessera_model::time::parse_timestamp("2026-01-02T03:00:00Z").expect("time")
            + Duration::from_secs(0)
    }

    #[test]
    fn claim_rows_as_kubectl_prints_them() {
        let pending = json!({
            "metadata": {"name": "data", "namespace": "ns", "creationTimestamp": "2026-01-02T02:59:15Z"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": "standard"},
            "status": {"phase": "Pending"}
        });
        let bound = with(
            pending.clone(),
            &[
                ("/spec/volumeName", json!("pv-1")),
                ("/spec/volumeMode", json!("Filesystem")),
                ("/spec/volumeAttributesClassName", json!("gold")),
                (
                    "/status",
                    json!({"phase": "Bound", "capacity": {"storage": "1024Mi"},
                               "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}),
                ),
            ],
        );
        let table: [(&str, Value, [&str; 9]); 5] = [
            (
                "pending: no capacity or modes",
                pending.clone(),
                [
                    "data", "Pending", "", "", "", "standard", "<unset>", "45s", "<unset>",
                ],
            ),
            (
                "bound: canonical capacity, modes in upstream order",
                bound.clone(),
                [
                    "data",
                    "Bound",
                    "pv-1",
                    "1Gi",
                    "RWO,RWX",
                    "standard",
                    "gold",
                    "45s",
                    "Filesystem",
                ],
            ),
            (
                "bound without status capacity prints 0",
                with(bound.clone(), &[("/status/capacity", json!(null))]),
                [
                    "data",
                    "Bound",
                    "pv-1",
                    "0",
                    "RWO,RWX",
                    "standard",
                    "gold",
                    "45s",
                    "Filesystem",
                ],
            ),
            (
                "terminating, no class, old",
                with(
                    pending.clone(),
                    &[
                        ("/metadata/deletionTimestamp", json!("2026-01-02T03:00:00Z")),
                        ("/spec/storageClassName", json!(null)),
                        ("/metadata/creationTimestamp", json!("2025-12-30T03:00:00Z")),
                    ],
                ),
                [
                    "data",
                    "Terminating",
                    "",
                    "",
                    "",
                    "",
                    "<unset>",
                    "3d",
                    "<unset>",
                ],
            ),
            (
                "beta class annotation and no timestamp",
                with(
                    pending,
                    &[
                        (
                            "/metadata/annotations",
                            json!({"volume.beta.kubernetes.io/storage-class": "old"}),
                        ),
                        ("/metadata/creationTimestamp", json!(null)),
                    ],
                ),
                [
                    "data",
                    "Pending",
                    "",
                    "",
                    "",
                    "old",
                    "<unset>",
                    "<unknown>",
                    "<unset>",
                ],
            ),
        ];
        for (case, claim, want) in table {
            assert_eq!(claim_row(&claim, now()), want.map(String::from), "{case}");
        }
    }

    #[test]
    fn volume_rows_as_kubectl_prints_them() {
        let available = json!({
            "metadata": {"name": "pv-1", "creationTimestamp": "2026-01-02T01:00:00Z"},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOncePod", "ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Retain"},
            "status": {"phase": "Available"}
        });
        let table: [(&str, Value, [&str; 11]); 3] = [
            (
                "available",
                available.clone(),
                [
                    "pv-1",
                    "10Gi",
                    "ROX,RWOP",
                    "Retain",
                    "Available",
                    "",
                    "",
                    "<unset>",
                    "",
                    "120m",
                    "<unset>",
                ],
            ),
            (
                "bound with class and mode",
                with(
                    available.clone(),
                    &[
                        ("/spec/claimRef", json!({"namespace": "ns", "name": "data"})),
                        ("/spec/storageClassName", json!("standard")),
                        ("/spec/volumeMode", json!("Block")),
                        ("/status/phase", json!("Bound")),
                    ],
                ),
                [
                    "pv-1", "10Gi", "ROX,RWOP", "Retain", "Bound", "ns/data", "standard",
                    "<unset>", "", "120m", "Block",
                ],
            ),
            (
                "failed with a reason, capacity canonical",
                with(
                    available,
                    &[
                        ("/spec/capacity/storage", json!("2048Mi")),
                        ("/status", json!({"phase": "Failed", "reason": "Recycle"})),
                    ],
                ),
                [
                    "pv-1", "2Gi", "ROX,RWOP", "Retain", "Failed", "", "", "<unset>", "Recycle",
                    "120m", "<unset>",
                ],
            ),
        ];
        for (case, volume, want) in table {
            assert_eq!(volume_row(&volume, now()), want.map(String::from), "{case}");
        }
    }

    #[test]
    fn columns_end_with_the_wide_volume_mode() {
        assert_eq!(CLAIM_COLUMNS.last(), Some(&("VolumeMode", 1)));
        assert_eq!(VOLUME_COLUMNS.last(), Some(&("VolumeMode", 1)));
        assert!(CLAIM_COLUMNS[..8].iter().all(|(_, p)| *p == 0));
        assert!(VOLUME_COLUMNS[..10].iter().all(|(_, p)| *p == 0));
    }
}
