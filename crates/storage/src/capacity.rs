//! external-provisioner's capacity controller, the clean-up half: which published
//! CSIStorageCapacity objects are obsolete. It publishes one object per (storage class of its
//! driver, topology segment); once the class is deleted or the segment (here: the node) is
//! gone, the object is deleted, and it is published afresh when they come back
//! ([`crate::csi::storage_capacity`] builds the objects themselves).
//!
//! Pure: the caller hands in the objects it lists, the classes and the registered nodes, and
//! deletes what this returns. It only ever names objects of the simulated local driver that
//! external-provisioner manages; objects someone else published are not its business.

use std::collections::BTreeSet;

use serde_json::Value;
use tessera_model::json::text;

use crate::csi::{self, LOCAL_DRIVER};

/// The label naming the driver of a CSIStorageCapacity.
pub const DRIVER_LABEL: &str = "csi.storage.k8s.io/drivername";
/// The label naming who manages a CSIStorageCapacity.
pub const MANAGED_BY_LABEL: &str = "csi.storage.k8s.io/managed-by";
/// The [`MANAGED_BY_LABEL`] value of the objects external-provisioner publishes.
pub const MANAGED_BY: &str = "external-provisioner";

/// Whether `capacity` is one the simulated local driver's external-provisioner published.
pub fn is_managed(capacity: &Value) -> bool {
    let label = |key: &str| {
        capacity
            .pointer("/metadata/labels")
            .and_then(|l| l.get(key))
            .and_then(Value::as_str)
    };
    label(DRIVER_LABEL) == Some(LOCAL_DRIVER) && label(MANAGED_BY_LABEL) == Some(MANAGED_BY)
}

/// The names of the published CSIStorageCapacities (`existing`, of
/// [`csi::CAPACITY_NAMESPACE`]) that no (local class of `classes`, node of `nodes`) wants any
/// more, sorted: the class was deleted, or the node went away.
pub fn obsolete<'a>(existing: &'a [Value], classes: &[Value], nodes: &[&str]) -> Vec<&'a str> {
    let wanted: BTreeSet<String> = csi::local_classes(classes)
        .into_iter()
        .flat_map(|class| {
            nodes
                .iter()
                .map(move |node| csi::capacity_name(class, node))
        })
        .collect();
    let mut names: Vec<&str> = existing
        .iter()
        .filter(|c| text(c, "/metadata/namespace") == csi::CAPACITY_NAMESPACE)
        .filter(|c| is_managed(c))
        .map(|c| text(c, "/metadata/name"))
        .filter(|name| !wanted.contains(*name))
        .collect();
    names.sort_unstable();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tessera_model::Quantity;

    fn class(name: &str, provisioner: &str) -> Value {
        json!({"metadata": {"name": name}, "provisioner": provisioner})
    }

    fn published(class: &str, node: &str) -> Value {
        let disk: Quantity = "10Gi".parse().unwrap_or(Quantity::ZERO);
        csi::storage_capacity(class, node, &disk, &[], &[])
    }

    #[test]
    fn capacities_of_deleted_classes_and_gone_nodes_are_obsolete() {
        let local = class(csi::LOCAL_CLASS, LOCAL_DRIVER);
        let fast = class("fast-local", LOCAL_DRIVER);
        let shared = class(csi::SHARED_CLASS, csi::SHARED_DRIVER);
        let existing = vec![
            published(csi::LOCAL_CLASS, "n1"),
            published(csi::LOCAL_CLASS, "n2"),
            published("fast-local", "n1"),
            // Someone else's object, same namespace: left alone.
            json!({"metadata": {"name": "csisc-other", "namespace": "kube-system",
                "labels": {DRIVER_LABEL: "other.csi.example.com", MANAGED_BY_LABEL: MANAGED_BY}}}),
            // Unlabelled: not external-provisioner's.
            json!({"metadata": {"name": "csisc-tessera-local-n9", "namespace": "kube-system"}}),
        ];
        type Case<'a> = (&'a str, Vec<Value>, Vec<&'a str>, Vec<&'a str>);
        let cases: [Case<'_>; 5] = [
            (
                "everything still wanted",
                vec![local.clone(), fast.clone(), shared.clone()],
                vec!["n1", "n2"],
                vec![],
            ),
            (
                "a class deleted",
                vec![local.clone(), shared.clone()],
                vec!["n1", "n2"],
                vec!["csisc-fast-local-n1"],
            ),
            (
                "a node gone",
                vec![local.clone(), fast.clone()],
                vec!["n1"],
                vec!["csisc-tessera-local-n2"],
            ),
            (
                "the default class deleted",
                vec![fast.clone(), shared.clone()],
                vec!["n1", "n2"],
                vec!["csisc-tessera-local-n1", "csisc-tessera-local-n2"],
            ),
            (
                "no class, no node",
                vec![],
                vec![],
                vec![
                    "csisc-fast-local-n1",
                    "csisc-tessera-local-n1",
                    "csisc-tessera-local-n2",
                ],
            ),
        ];
        for (what, classes, nodes, expected) in cases {
            assert_eq!(obsolete(&existing, &classes, &nodes), expected, "{what}");
        }
    }

    #[test]
    fn published_objects_are_recognised_as_managed() {
        assert!(is_managed(&published(csi::LOCAL_CLASS, "n1")));
        assert!(!is_managed(
            &json!({"metadata": {"labels": {DRIVER_LABEL: LOCAL_DRIVER}}})
        ));
    }
}
