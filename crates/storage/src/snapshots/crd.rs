//! The `snapshot.storage.k8s.io` CustomResourceDefinitions as kubernetes-csi/external-snapshotter
//! publishes them (VolumeSnapshotClass, VolumeSnapshot, VolumeSnapshotContent: schemas, the
//! `status` subresource, short names and printer columns unchanged), and the
//! VolumeSnapshotClasses bundled for the simulated drivers that take snapshots.
//!
//! Produces JSON only; installing it is the bootstrap's business.

use serde_json::{Value, json};
use tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION;

use super::{ANN_DEFAULT_SNAPSHOT_CLASS, API_VERSION};
use crate::csi::{LOCAL_CLASS, LOCAL_DRIVER, SHARED_CLASS, SHARED_DRIVER};

/// The published definitions (external-snapshotter `client/config/crd/`, see
/// `crates/storage/data/README.md`).
const PUBLISHED: [&str; 3] = [
    include_str!("../../data/crd-volumesnapshotclasses.json"),
    include_str!("../../data/crd-volumesnapshotcontents.json"),
    include_str!("../../data/crd-volumesnapshots.json"),
];

/// The three definitions, each carrying a [`BUNDLE_HASH_ANNOTATION`] of its spec so that a
/// newer Tessera upgrades what an older one installed.
pub fn definitions() -> Vec<Value> {
    PUBLISHED
        .iter()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .map(|mut crd| {
            let hash = tessera_model::fnv::fnv64(crd["spec"].to_string().as_bytes());
            crd["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION] = json!(format!("{hash:016x}"));
            crd["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "tessera"});
            crd
        })
        .collect()
}

/// The bundled VolumeSnapshotClasses, named after the StorageClass of the same driver: each
/// the default of its driver, deletion policy Delete.
pub fn snapshot_classes() -> Vec<Value> {
    [(LOCAL_CLASS, LOCAL_DRIVER), (SHARED_CLASS, SHARED_DRIVER)]
        .iter()
        .map(|(name, driver)| {
            json!({
                "apiVersion": API_VERSION, "kind": "VolumeSnapshotClass",
                "metadata": {"name": name,
                    "annotations": {ANN_DEFAULT_SNAPSHOT_CLASS: "true"}},
                "driver": driver,
                "deletionPolicy": "Delete",
            })
        })
        .collect()
}
