//! The simulated CSI drivers of the embedded platform, as decisions: the bundled
//! StorageClasses and CSIDrivers, each node's CSINode and (for the local driver) its
//! CSIStorageCapacity, and what the drivers' external-provisioner does about a claim
//! ([`provision`]): the PersistentVolume it creates (`spec.csi`, `nodeAffinity` for a local
//! volume, `pv.kubernetes.io/provisioned-by`, the claimRef, class, capacity, access modes and
//! reclaim policy), or why it fails, with external-provisioner's events.
//!
//! Three drivers: `local.csi.tessera.dev` (a node's local disk: WaitForFirstConsumer,
//! capacity tracked per node from the volumes and snapshots already on it, volumes pinned to
//! their node),
//! `shared.csi.tessera.dev` (a shared filesystem reachable from every node, ReadWriteMany,
//! Immediate) and `object.csi.tessera.dev` (an object store, Immediate).
//!
//! Knows nothing of watches, clients or the nodes' hardware beyond the disk size the caller
//! passes; there is no storage behind a volume, so a volume's bytes are only bookkeeping.

use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_model::quantity::{Format, Quantity};

pub mod sources;

pub use sources::{CONTENT_SOURCE_ATTRIBUTE, Refusal, Sources};

use crate::objects::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER, access_modes, annotation, by_name, claim_class, claim_key,
    is_deleting, name, reference, requested_storage, uid, volume_capacity,
};

/// The local-disk driver.
pub const LOCAL_DRIVER: &str = "local.csi.tessera.dev";
/// The shared-filesystem driver.
pub const SHARED_DRIVER: &str = "shared.csi.tessera.dev";
/// The object-store driver.
pub const OBJECT_DRIVER: &str = "object.csi.tessera.dev";
/// Every simulated driver.
pub const DRIVERS: [&str; 3] = [LOCAL_DRIVER, SHARED_DRIVER, OBJECT_DRIVER];

/// The default class: the node's local disk.
pub const LOCAL_CLASS: &str = "tessera-local";
/// The shared-filesystem class.
pub const SHARED_CLASS: &str = "tessera-shared";
/// The object-store class.
pub const OBJECT_CLASS: &str = "tessera-object";

/// The topology key the local driver reports (the node's own hostname label).
pub const TOPOLOGY_KEY: &str = "kubernetes.io/hostname";
/// Where the local driver's CSIStorageCapacity objects live.
pub const CAPACITY_NAMESPACE: &str = "kube-system";
/// The volumes a node may have attached per driver (CSINode `allocatable.count`).
pub const ATTACH_LIMIT: i64 = 128;
/// The local disk a node has when its spec names no `ephemeral-storage`.
pub const DEFAULT_LOCAL_DISK: &str = "100Gi";

/// The component external-provisioner records its events as, for `driver`.
pub fn provisioner_component(driver: &str) -> String {
    format!("{driver}_external-provisioner")
}

/// Whether `driver` is one of the simulated drivers.
pub fn is_simulated(driver: &str) -> bool {
    DRIVERS.contains(&driver)
}

/// The three bundled StorageClasses (`storage.k8s.io/v1`): the local class is the default.
pub fn storage_classes() -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": LOCAL_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": LOCAL_DRIVER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": true,
        }),
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": SHARED_CLASS},
            "provisioner": SHARED_DRIVER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": true,
        }),
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": OBJECT_CLASS},
            "provisioner": OBJECT_DRIVER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
            "allowVolumeExpansion": false,
        }),
    ]
}

/// The three drivers' CSIDriver objects: only the local driver tracks capacity; none needs
/// attaching (no VolumeAttachment), all serve persistent volumes.
pub fn csi_drivers() -> Vec<Value> {
    DRIVERS
        .iter()
        .map(|driver| {
            json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
                "metadata": {"name": driver},
                "spec": {
                    "attachRequired": false,
                    "podInfoOnMount": false,
                    "storageCapacity": *driver == LOCAL_DRIVER,
                    "fsGroupPolicy": "ReadWriteOnceWithFSType",
                    "requiresRepublish": false,
                    "volumeLifecycleModes": ["Persistent"],
                },
            })
        })
        .collect()
}

/// The CSINode of `node`: every simulated driver registered with the node as its `nodeID`,
/// the local driver reporting its topology key, each with the attach limit.
pub fn csi_node(node: &str) -> Value {
    let drivers: Vec<Value> = DRIVERS
        .iter()
        .map(|driver| {
            let keys: Vec<&str> = if *driver == LOCAL_DRIVER {
                vec![TOPOLOGY_KEY]
            } else {
                Vec::new()
            };
            json!({"name": driver, "nodeID": node, "topologyKeys": keys,
                   "allocatable": {"count": ATTACH_LIMIT}})
        })
        .collect();
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": node},
        "spec": {"drivers": drivers},
    })
}

/// The node a local volume is pinned to (its node affinity's one `In` value of
/// [`TOPOLOGY_KEY`]), when it is a local driver's volume.
pub fn local_volume_node(volume: &Value) -> Option<&str> {
    if text(volume, "/spec/csi/driver") != LOCAL_DRIVER {
        return None;
    }
    volume
        .pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions")
        .and_then(Value::as_array)?
        .iter()
        .find(|e| text(e, "/key") == TOPOLOGY_KEY && text(e, "/operator") == "In")
        .and_then(|e| e.pointer("/values/0"))
        .and_then(Value::as_str)
}

/// Bytes of `node`'s local disk the local volumes on it and the local driver's snapshots
/// kept there (`contents`, [`crate::snapshots::sidecar::held_on_node`]) hold.
pub fn used_on_node(node: &str, volumes: &[Value], contents: &[Value]) -> i128 {
    volumes
        .iter()
        .filter(|v| local_volume_node(v) == Some(node))
        .map(|v| volume_capacity(v).value())
        .sum::<i128>()
        + crate::snapshots::sidecar::held_on_node(node, contents)
}

/// The local disk left on `node` of `disk` by its volumes and snapshots, never below zero.
pub fn remaining_on_node(
    node: &str,
    disk: &Quantity,
    volumes: &[Value],
    contents: &[Value],
) -> Quantity {
    bytes_quantity((disk.value() - used_on_node(node, volumes, contents)).max(0))
}

/// `bytes` as a binary-SI quantity (`10Gi`), saturating.
pub(crate) fn bytes_quantity(bytes: i128) -> Quantity {
    Quantity::from_units(i64::try_from(bytes).unwrap_or(i64::MAX), Format::BinarySi)
}

/// The name of the CSIStorageCapacity of `class` on `node`.
pub fn capacity_name(class: &str, node: &str) -> String {
    format!("csisc-{class}-{node}")
}

/// The classes the local driver provisions (external-provisioner publishes capacity for
/// each class of its driver, on each topology segment).
pub fn local_classes(classes: &[Value]) -> Vec<&str> {
    classes
        .iter()
        .filter(|c| text(c, "/provisioner") == LOCAL_DRIVER)
        .map(name)
        .collect()
}

/// The CSIStorageCapacity external-provisioner publishes for a local-driver `class` on
/// `node`: the disk its volumes and the snapshots kept there (`contents`) leave, for the
/// topology segment that is the node.
pub fn storage_capacity(
    class: &str,
    node: &str,
    disk: &Quantity,
    volumes: &[Value],
    contents: &[Value],
) -> Value {
    let left = remaining_on_node(node, disk, volumes, contents);
    json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
        "metadata": {"name": capacity_name(class, node), "namespace": CAPACITY_NAMESPACE,
            "labels": {"csi.storage.k8s.io/drivername": LOCAL_DRIVER,
                       "csi.storage.k8s.io/managed-by": "external-provisioner"}},
        "storageClassName": class,
        "nodeTopology": {"matchLabels": {TOPOLOGY_KEY: node}},
        "capacity": left.to_canonical(),
    })
}

/// The name of the volume provisioned for `claim` (external-provisioner's `pvc-<uid>`).
pub fn volume_name(claim: &Value) -> String {
    format!("pvc-{}", uid(claim))
}

/// An event about a claim, as external-provisioner or external-resizer records it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimEvent {
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// Upstream's reason (`Provisioning`, `ProvisioningSucceeded`, `Resizing`, …).
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

/// What the provisioner does about one claim.
#[derive(Debug, Clone, PartialEq)]
pub enum Provisioning {
    /// Nothing: not a simulated driver's claim, bound already, waiting for a node, or its
    /// volume exists.
    Skip,
    /// Create this volume; the events go with it (`Provisioning` then, once created,
    /// `ProvisioningSucceeded`).
    Create {
        /// The PersistentVolume.
        volume: Value,
        /// The driver.
        driver: String,
    },
    /// Provisioning failed: the `Provisioning` and `ProvisioningFailed` events; with
    /// `reschedule`, the claim's `selected-node` annotation is removed so the scheduler picks
    /// another node (external-provisioner's `ProvisioningReschedule`).
    Fail {
        /// The driver.
        driver: String,
        /// The failure, as the event says it.
        message: String,
        /// The claim with `volume.kubernetes.io/selected-node` removed, to `Update`.
        reschedule: Option<Value>,
    },
}

/// The events a provisioning outcome records, in order (`Provisioning` first).
pub fn events(claim: &Value, outcome: &Provisioning) -> Vec<ClaimEvent> {
    let provisioning = ClaimEvent {
        kind: "Normal",
        reason: "Provisioning",
        message: format!(
            "External provisioner is provisioning volume for claim {:?}",
            claim_key(claim)
        ),
    };
    match outcome {
        Provisioning::Skip => Vec::new(),
        Provisioning::Create { volume, .. } => vec![
            provisioning,
            ClaimEvent {
                kind: "Normal",
                reason: "ProvisioningSucceeded",
                message: format!("Successfully provisioned volume {}", name(volume)),
            },
        ],
        Provisioning::Fail { message, .. } => vec![
            provisioning,
            ClaimEvent {
                kind: "Warning",
                reason: "ProvisioningFailed",
                message: message.clone(),
            },
        ],
    }
}

/// The access modes each driver serves.
fn supported_modes(driver: &str) -> &'static [&'static str] {
    match driver {
        LOCAL_DRIVER => &["ReadWriteOnce", "ReadWriteOncePod"],
        _ => &[
            "ReadWriteOnce",
            "ReadOnlyMany",
            "ReadWriteMany",
            "ReadWriteOncePod",
        ],
    }
}

/// external-provisioner's `shouldProvision` and `Provision` for `claim`, with the classes and
/// volumes of the cluster and the local disk of each node (`disk_of`).
pub fn provision(
    claim: &Value,
    classes: &[Value],
    volumes: &[Value],
    disk_of: impl Fn(&str) -> Option<Quantity>,
) -> Provisioning {
    provision_from(claim, classes, volumes, Sources::default(), disk_of)
}

/// [`provision`], with the objects a claim's data source is read from ([`sources`]).
pub fn provision_from(
    claim: &Value,
    classes: &[Value],
    volumes: &[Value],
    sources: Sources<'_>,
    disk_of: impl Fn(&str) -> Option<Quantity>,
) -> Provisioning {
    let driver = annotation(claim, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(claim, ANN_BETA_STORAGE_PROVISIONER))
        .unwrap_or_default();
    if !is_simulated(driver)
        || !text(claim, "/spec/volumeName").is_empty()
        || text(claim, "/status/phase") == "Bound"
        || is_deleting(claim)
        || by_name(volumes, &volume_name(claim)).is_some()
    {
        return Provisioning::Skip;
    }
    let fail = |message: String, reschedule: Option<Value>| Provisioning::Fail {
        driver: driver.to_string(),
        message,
        reschedule,
    };
    let class_name = claim_class(claim);
    let Some(class) = by_name(classes, class_name) else {
        return fail(
            format!("storageclass.storage.k8s.io {class_name:?} not found"),
            None,
        );
    };
    if text(class, "/provisioner") != driver {
        // The claim was annotated for another provisioner than its class names now.
        return Provisioning::Skip;
    }
    let delayed = text(class, "/volumeBindingMode") == "WaitForFirstConsumer";
    let selected = annotation(claim, ANN_SELECTED_NODE).unwrap_or_default();
    if delayed && selected.is_empty() {
        return Provisioning::Skip;
    }
    let failed = |desc: String, reschedule: Option<Value>| {
        fail(
            format!("failed to provision volume with StorageClass {class_name:?}: {desc}"),
            reschedule,
        )
    };
    let modes = access_modes(claim, "/spec/accessModes");
    if modes.is_empty() {
        return failed(
            "rpc error: code = InvalidArgument desc = volume capabilities missing in request"
                .into(),
            None,
        );
    }
    if let Some(mode) = modes
        .iter()
        .find(|m| !supported_modes(driver).contains(&m.as_str()))
    {
        return failed(
            format!(
                "rpc error: code = InvalidArgument desc = driver {driver} does not support access mode {mode}"
            ),
            None,
        );
    }
    let content_source = match sources::content_source(claim, class, sources) {
        Ok(source) => source,
        Err(Refusal::Ignored) => return Provisioning::Skip,
        Err(Refusal::Failed(desc)) => return failed(desc, None),
    };
    let request = requested_storage(claim);
    let mut volume = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": volume_name(claim),
            "annotations": {ANN_DYNAMICALLY_PROVISIONED: driver}},
        "spec": {
            "capacity": {"storage": request.to_canonical()},
            "accessModes": modes,
            "claimRef": reference(claim, "PersistentVolumeClaim"),
            "persistentVolumeReclaimPolicy": match text(class, "/reclaimPolicy") {
                "" => "Delete",
                policy => policy,
            },
            "storageClassName": class_name,
            "volumeMode": match text(claim, "/spec/volumeMode") {
                "" => "Filesystem",
                mode => mode,
            },
            "csi": {
                "driver": driver,
                "volumeHandle": format!("{}-{}", driver.split('.').next().unwrap_or(driver), uid(claim)),
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": format!("tessera-{driver}")},
            },
        },
    });
    if let Some(source) = content_source {
        volume["spec"]["csi"]["volumeAttributes"][CONTENT_SOURCE_ATTRIBUTE] = json!(source);
    }
    if let Some(options) = class.get("mountOptions").filter(|o| !o.is_null()) {
        volume["spec"]["mountOptions"] = options.clone();
    }
    if driver == LOCAL_DRIVER {
        if selected.is_empty() {
            return failed(
                "rpc error: code = InvalidArgument desc = a local volume needs the node it is for (volumeBindingMode WaitForFirstConsumer)".into(),
                None,
            );
        }
        let Some(disk) = disk_of(selected) else {
            return failed(
                format!("rpc error: code = NotFound desc = node {selected:?} has no local disk"),
                None,
            );
        };
        let used = used_on_node(selected, volumes, sources.contents);
        if request.value() > disk.value() - used {
            let mut reschedule = claim.clone();
            if let Some(annotations) = reschedule
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.remove(ANN_SELECTED_NODE);
            }
            let used = bytes_quantity(used);
            return failed(
                format!(
                    "rpc error: code = ResourceExhausted desc = requested capacity {} exceeds remaining capacity for {selected:?}, {} out of {} already used",
                    request.value(),
                    used.to_canonical(),
                    disk.to_canonical()
                ),
                Some(reschedule),
            );
        }
        volume["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": TOPOLOGY_KEY, "operator": "In", "values": [selected]}]}
        ]}});
    }
    Provisioning::Create {
        volume,
        driver: driver.to_string(),
    }
}

#[cfg(test)]
mod tests;
