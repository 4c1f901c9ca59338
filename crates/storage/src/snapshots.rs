//! CSI volume snapshots as kubernetes-csi/external-snapshotter's common snapshot-controller
//! decides them (`pkg/common-controller`): what to write about one VolumeSnapshot
//! ([`sync_snapshot`]: the default class of the source volume's driver, the
//! `snapcontent-<uid>` content of a dynamic snapshot, the binding of a pre-provisioned one, the
//! finalizers, the status copied from the content, deletion by the content's deletion policy),
//! about one VolumeSnapshotContent ([`sync_content`]) and about a source claim
//! ([`sync_claim`]: its `pvc-as-source-protection` finalizer while a snapshot is being taken),
//! with upstream's events and messages. [`crd`] holds the definitions and the bundled classes,
//! [`sidecar`] what the simulated drivers' csi-snapshotter does about a content.
//!
//! A core: objects in as JSON, actions out, time an argument. One call decides one step, as
//! upstream's sync returns after a write; the shell writes, and the next pass (the watch shows
//! the write) takes the next step. Knows nothing of clients, queues or retries.

use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_model::time::timestamp;

use crate::objects::{annotation, is_deleting, name, namespace, uid, volume_capacity};

pub mod crd;
pub mod sidecar;

/// The API group.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// The group and version the objects are served at.
pub const API_VERSION: &str = "snapshot.storage.k8s.io/v1";
/// The component the controller records its events as.
pub const COMPONENT: &str = "snapshot-controller";

/// On a content, while it is bound (removed by the sidecar once the snapshot is deleted).
pub const CONTENT_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// On a snapshot bound to a content whose deletion policy is Delete.
pub const BOUND_FINALIZER: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
/// On every snapshot, while a claim may be restored from it.
pub const AS_SOURCE_FINALIZER: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
/// On a claim while a snapshot of it is being taken.
pub const PVC_FINALIZER: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";
/// Marks the default VolumeSnapshotClass of a driver.
pub const ANN_DEFAULT_SNAPSHOT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";
/// Set on a content whose snapshot is being deleted: the sidecar may delete it.
pub const ANN_BEING_DELETED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";

/// What the controller reads.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// VolumeSnapshots.
    pub snapshots: &'a [Value],
    /// VolumeSnapshotContents.
    pub contents: &'a [Value],
    /// VolumeSnapshotClasses.
    pub classes: &'a [Value],
    /// PersistentVolumeClaims.
    pub claims: &'a [Value],
    /// PersistentVolumes.
    pub volumes: &'a [Value],
}

/// An event, about the object `involved` refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotEvent {
    /// The object reference.
    pub involved: Value,
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// Upstream's message.
    pub message: String,
}

/// One write, carried out in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Replace a snapshot (its finalizers or class).
    UpdateSnapshot(Value),
    /// Replace a snapshot's status.
    UpdateSnapshotStatus(Value),
    /// Create a content.
    CreateContent(Value),
    /// Replace a content (finalizers, annotations, binding).
    UpdateContent(Value),
    /// Delete the content of this name.
    DeleteContent(String),
    /// Replace a claim (its finalizers).
    UpdateClaim(Value),
    /// Record an event.
    Event(SnapshotEvent),
}

/// `namespace/name`, upstream's `SnapshotKey`.
pub fn snapshot_key(snapshot: &Value) -> String {
    format!("{}/{}", namespace(snapshot), name(snapshot))
}

/// The name of a dynamic snapshot's content.
pub fn content_name(snapshot: &Value) -> String {
    format!("snapcontent-{}", uid(snapshot))
}

fn reference(object: &Value, kind: &str) -> Value {
    let mut reference = json!({
        "apiVersion": API_VERSION, "kind": kind, "name": name(object), "uid": uid(object),
        "resourceVersion": text(object, "/metadata/resourceVersion"),
    });
    if !namespace(object).is_empty() {
        reference["namespace"] = json!(namespace(object));
    }
    reference
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

fn with_finalizers(object: &Value, add: &[&str], remove: &[&str]) -> Value {
    let mut next = object.clone();
    let mut finalizers: Vec<Value> = object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    finalizers.retain(|f| !remove.iter().any(|r| f == r));
    for finalizer in add {
        if !finalizers.iter().any(|f| f == finalizer) {
            finalizers.push(json!(finalizer));
        }
    }
    next["metadata"]["finalizers"] = Value::Array(finalizers);
    next
}

fn source_claim(snapshot: &Value) -> Option<&str> {
    snapshot
        .pointer("/spec/source/persistentVolumeClaimName")
        .and_then(Value::as_str)
}

fn source_content(snapshot: &Value) -> Option<&str> {
    snapshot
        .pointer("/spec/source/volumeSnapshotContentName")
        .and_then(Value::as_str)
}

fn class_name(object: &Value) -> Option<&str> {
    object
        .pointer("/spec/volumeSnapshotClassName")
        .and_then(Value::as_str)
}

fn bound_content(snapshot: &Value) -> Option<&str> {
    snapshot
        .pointer("/status/boundVolumeSnapshotContentName")
        .and_then(Value::as_str)
}

/// upstream's `IsSnapshotReady`.
pub fn is_ready(snapshot: &Value) -> bool {
    snapshot.pointer("/status/readyToUse") == Some(&Value::Bool(true))
}

fn by_name<'a>(objects: &'a [Value], wanted: &str) -> Option<&'a Value> {
    objects.iter().find(|o| name(o) == wanted)
}

fn by_key<'a>(objects: &'a [Value], ns: &str, wanted: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| name(o) == wanted && namespace(o) == ns)
}

/// upstream's `IsVolumeSnapshotRefSet`: the content points back at this snapshot.
fn ref_set(snapshot: &Value, content: &Value) -> bool {
    text(content, "/spec/volumeSnapshotRef/name") == name(snapshot)
        && text(content, "/spec/volumeSnapshotRef/namespace") == namespace(snapshot)
        && text(content, "/spec/volumeSnapshotRef/uid") == uid(snapshot)
}

fn deletion_candidate(snapshot: &Value) -> bool {
    is_deleting(snapshot)
        && (has_finalizer(snapshot, AS_SOURCE_FINALIZER)
            || has_finalizer(snapshot, BOUND_FINALIZER))
}

fn event(
    object: &Value,
    kind_of: &str,
    kind: &'static str,
    reason: &'static str,
    message: String,
) -> Action {
    Action::Event(SnapshotEvent {
        involved: reference(object, kind_of),
        kind,
        reason,
        message,
    })
}

/// upstream's `updateSnapshotErrorStatusWithEvent`: nothing when the same error is set.
fn error_status(
    snapshot: &Value,
    set_ready_false: bool,
    reason: &'static str,
    message: String,
    now: SystemTime,
) -> Vec<Action> {
    if snapshot
        .pointer("/status/error/message")
        .and_then(Value::as_str)
        == Some(message.as_str())
    {
        return Vec::new();
    }
    let mut next = snapshot.clone();
    if !next.get("status").is_some_and(Value::is_object) {
        next["status"] = json!({});
    }
    next["status"]["error"] = json!({"time": timestamp(now), "message": message});
    if set_ready_false {
        next["status"]["readyToUse"] = json!(false);
    }
    vec![
        Action::UpdateSnapshotStatus(next),
        event(snapshot, "VolumeSnapshot", "Warning", reason, message),
    ]
}

/// The claim a dynamic snapshot takes, or upstream's error.
fn claim_of<'a>(snapshot: &Value, cluster: Cluster<'a>) -> Result<&'a Value, String> {
    let Some(claim) = source_claim(snapshot).filter(|c| !c.is_empty()) else {
        return Err(format!(
            "the PVC name is not specified in snapshot {}",
            snapshot_key(snapshot)
        ));
    };
    by_key(cluster.claims, namespace(snapshot), claim).ok_or_else(|| {
        format!(
            "failed to retrieve PVC {claim} from the lister: {:?}",
            format!("persistentvolumeclaim {claim:?} not found")
        )
    })
}

/// upstream's `getVolumeFromVolumeSnapshot`.
fn volume_of<'a>(snapshot: &Value, cluster: Cluster<'a>) -> Result<&'a Value, String> {
    let claim = claim_of(snapshot, cluster)?;
    if text(claim, "/status/phase") != "Bound" {
        return Err(format!(
            "the PVC {} is not yet bound to a PV, will not attempt to take a snapshot",
            name(claim)
        ));
    }
    let volume_name = text(claim, "/spec/volumeName");
    let volume = by_name(cluster.volumes, volume_name).ok_or_else(|| {
        format!(
            "failed to retrieve PV {volume_name} from the API server: {:?}",
            format!("persistentvolumes {volume_name:?} not found")
        )
    })?;
    let bound = text(volume, "/spec/claimRef/name") == name(claim)
        && text(volume, "/spec/claimRef/namespace") == namespace(claim)
        && (text(volume, "/spec/claimRef/uid").is_empty()
            || text(volume, "/spec/claimRef/uid") == uid(claim));
    if !bound {
        return Err("claim in dataSource not bound or invalid".into());
    }
    Ok(volume)
}

/// upstream's `SetDefaultSnapshotClass`: the one default class of the source volume's driver.
fn default_class<'a>(snapshot: &Value, cluster: Cluster<'a>) -> Result<&'a Value, String> {
    let volume = volume_of(snapshot, cluster)?;
    let driver = text(volume, "/spec/csi/driver");
    if driver.is_empty() {
        return Err(format!(
            "snapshotting non-CSI volumes is not supported, snapshot:{}/{}",
            namespace(snapshot),
            name(snapshot)
        ));
    }
    let defaults: Vec<&Value> = cluster
        .classes
        .iter()
        .filter(|c| {
            annotation(c, ANN_DEFAULT_SNAPSHOT_CLASS) == Some("true")
                && text(c, "/driver") == driver
        })
        .collect();
    match defaults.as_slice() {
        [] => Err("cannot find default snapshot class".into()),
        [one] => Ok(one),
        many => Err(format!(
            "{} default snapshot classes were found",
            many.len()
        )),
    }
}

fn class_not_found(class: &str) -> String {
    format!("volumesnapshotclass.snapshot.storage.k8s.io {class:?} not found")
}

/// The content a snapshot names or would get, checked as upstream's
/// `get{Preprovisioned,DynamicallyProvisioned}ContentFromStore` check it: `Err` carries the
/// error status to write.
fn content_of<'a>(
    snapshot: &Value,
    cluster: Cluster<'a>,
    now: SystemTime,
) -> Result<Option<&'a Value>, Vec<Action>> {
    let (wanted, dynamic) = match source_content(snapshot) {
        Some(content) => (content.to_string(), false),
        None => (content_name(snapshot), true),
    };
    let Some(content) = by_name(cluster.contents, &wanted) else {
        return Ok(None);
    };
    let has_volume = content.pointer("/spec/source/volumeHandle").is_some();
    let has_handle = content.pointer("/spec/source/snapshotHandle").is_some();
    if !dynamic && has_volume {
        return Err(error_status(
            snapshot,
            true,
            "SnapshotContentMismatch",
            "VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one"
                .into(),
            now,
        ));
    }
    if dynamic && has_handle {
        return Err(error_status(
            snapshot,
            true,
            "SnapshotContentMismatch",
            format!(
                "VolumeSnapshotContent {wanted} is pre-provisioned while expecting a dynamically provisioned one"
            ),
            now,
        ));
    }
    if text(content, "/spec/volumeSnapshotRef/name") != name(snapshot)
        || text(content, "/spec/volumeSnapshotRef/namespace") != namespace(snapshot)
    {
        return Err(error_status(
            snapshot,
            true,
            "SnapshotContentMisbound",
            format!("VolumeSnapshotContent [{wanted}] is bound to a different snapshot"),
            now,
        ));
    }
    Ok(Some(content))
}

/// upstream's `updateSnapshotStatus`: the snapshot's status from its content's, with
/// `SnapshotCreated` and `SnapshotReady` when they first hold.
fn status_from(snapshot: &Value, content: &Value) -> Vec<Action> {
    let mut status = snapshot
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let before = status.clone();
    let ready = content.pointer("/status/readyToUse") == Some(&Value::Bool(true));
    if status.get("boundVolumeSnapshotContentName").is_none() {
        status["boundVolumeSnapshotContentName"] = json!(name(content));
    }
    if status.get("creationTime").is_none()
        && let Some(ns) = content
            .pointer("/status/creationTime")
            .and_then(Value::as_i64)
    {
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0).unsigned_abs());
        status["creationTime"] = json!(timestamp(at));
    }
    if status.get("readyToUse") != Some(&Value::Bool(ready)) {
        status["readyToUse"] = json!(ready);
        if ready && let Some(s) = status.as_object_mut() {
            s.remove("error");
        }
    }
    let size = content
        .pointer("/status/restoreSize")
        .and_then(Value::as_i64);
    let zero = status
        .get("restoreSize")
        .and_then(Value::as_str)
        .is_some_and(|q| {
            q.parse::<tessera_model::Quantity>()
                .is_ok_and(|q| q.value() == 0)
        });
    if let Some(size) = size
        && (status.get("restoreSize").is_none() || (zero && size > 0))
    {
        let quantity = tessera_model::quantity::Quantity::from_units(
            size,
            tessera_model::quantity::Format::BinarySi,
        );
        status["restoreSize"] = json!(quantity.to_canonical());
    }
    match content.pointer("/status/error") {
        Some(error) => status["error"] = error.clone(),
        None => {
            if let Some(s) = status.as_object_mut() {
                s.remove("error");
            }
        }
    }
    if status == before {
        return Vec::new();
    }
    let mut actions = Vec::new();
    let key = snapshot_key(snapshot);
    if before.get("creationTime").is_none() && status.get("creationTime").is_some() {
        actions.push(event(
            snapshot,
            "VolumeSnapshot",
            "Normal",
            "SnapshotCreated",
            format!("Snapshot {key} was successfully created by the CSI driver."),
        ));
    }
    if before.get("readyToUse") != Some(&Value::Bool(true)) && ready {
        actions.push(event(
            snapshot,
            "VolumeSnapshot",
            "Normal",
            "SnapshotReady",
            format!("Snapshot {key} is ready to use."),
        ));
    }
    let mut next = snapshot.clone();
    next["status"] = status;
    actions.insert(0, Action::UpdateSnapshotStatus(next));
    actions
}

/// What the controller does about `snapshot` now: upstream's `syncSnapshotByKey` (class) then
/// `syncSnapshot`, one step.
pub fn sync_snapshot(snapshot: &Value, cluster: Cluster<'_>, now: SystemTime) -> Vec<Action> {
    if is_deleting(snapshot) {
        return delete_snapshot(snapshot, cluster);
    }
    // checkAndUpdateSnapshotClass.
    match class_name(snapshot) {
        Some(class) if by_name(cluster.classes, class).is_none() => {
            return error_status(
                snapshot,
                false,
                "GetSnapshotClassFailed",
                format!(
                    "Failed to get snapshot class with error {}",
                    class_not_found(class)
                ),
                now,
            );
        }
        Some(_) => {}
        None if source_content(snapshot).is_none() && source_claim(snapshot).is_some() => {
            return match default_class(snapshot, cluster) {
                Ok(class) => {
                    let mut next = snapshot.clone();
                    next["spec"]["volumeSnapshotClassName"] = json!(name(class));
                    vec![Action::UpdateSnapshot(next)]
                }
                Err(error) => error_status(
                    snapshot,
                    false,
                    "SetDefaultSnapshotClassFailed",
                    format!("Failed to set default snapshot class with error {error}"),
                    now,
                ),
            };
        }
        None => {}
    }
    if source_claim(snapshot).is_some() == source_content(snapshot).is_some() {
        return error_status(
            snapshot,
            true,
            "SnapshotValidationError",
            "Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified".into(),
            now,
        );
    }
    let content = match content_of(snapshot, cluster, now) {
        Ok(content) => content,
        Err(actions) => return actions,
    };
    // checkandAddSnapshotFinalizers.
    let add_source = !has_finalizer(snapshot, AS_SOURCE_FINALIZER);
    let add_bound = content.is_some_and(|c| text(c, "/spec/deletionPolicy") == "Delete")
        && bound_content(snapshot).is_some()
        && !has_finalizer(snapshot, BOUND_FINALIZER);
    if add_source || add_bound {
        let mut add = Vec::new();
        if add_source {
            add.push(AS_SOURCE_FINALIZER);
        }
        if add_bound {
            add.push(BOUND_FINALIZER);
        }
        return vec![Action::UpdateSnapshot(with_finalizers(snapshot, &add, &[]))];
    }
    if is_ready(snapshot) && bound_content(snapshot).is_some() {
        return sync_ready(snapshot, cluster, now);
    }
    sync_unready(snapshot, content, cluster, now)
}

/// upstream's `syncReadySnapshot`.
fn sync_ready(snapshot: &Value, cluster: Cluster<'_>, now: SystemTime) -> Vec<Action> {
    let Some(content) = bound_content(snapshot).and_then(|c| by_name(cluster.contents, c)) else {
        return error_status(
            snapshot,
            true,
            "SnapshotContentMissing",
            "VolumeSnapshotContent is missing".into(),
            now,
        );
    };
    if !ref_set(snapshot, content) {
        return error_status(
            snapshot,
            true,
            "SnapshotMisbound",
            "VolumeSnapshotContent is not bound to the VolumeSnapshot correctly".into(),
            now,
        );
    }
    Vec::new()
}

/// upstream's `syncUnreadySnapshot`.
fn sync_unready(
    snapshot: &Value,
    content: Option<&Value>,
    cluster: Cluster<'_>,
    now: SystemTime,
) -> Vec<Action> {
    let key = snapshot_key(snapshot);
    if let Some(wanted) = source_content(snapshot) {
        let Some(content) = content else {
            return error_status(
                snapshot,
                true,
                "SnapshotContentMissing",
                "VolumeSnapshotContent is missing".into(),
                now,
            );
        };
        // checkandBindSnapshotContent.
        let bound_uid = text(content, "/spec/volumeSnapshotRef/uid");
        if !bound_uid.is_empty() && bound_uid != uid(snapshot) {
            return error_status(
                snapshot,
                true,
                "SnapshotBindFailed",
                format!(
                    "Snapshot failed to bind VolumeSnapshotContent, Could not bind snapshot {} and content {wanted}, the VolumeSnapshotRef does not match",
                    name(snapshot)
                ),
                now,
            );
        }
        if bound_uid.is_empty() || class_name(content).is_none() {
            let mut next = content.clone();
            next["spec"]["volumeSnapshotRef"]["uid"] = json!(uid(snapshot));
            if let Some(class) = class_name(snapshot) {
                next["spec"]["volumeSnapshotClassName"] = json!(class);
            }
            if next != *content {
                return vec![Action::UpdateContent(next)];
            }
        }
        return status_from(snapshot, content);
    }
    if let Some(content) = content {
        return status_from(snapshot, content);
    }
    // createSnapshotContent.
    let failed = |message: String| {
        error_status(
            snapshot,
            true,
            "SnapshotContentCreationFailed",
            format!("Failed to create snapshot content with error {message}"),
            now,
        )
    };
    let Ok(claim) = claim_of(snapshot, cluster) else {
        return failed("cannot get claim from snapshot".into());
    };
    let mut actions = Vec::new();
    if !has_finalizer(claim, PVC_FINALIZER) {
        if is_deleting(claim) {
            return failed("cannot add finalizer on claim because it is being deleted".into());
        }
        actions.push(Action::UpdateClaim(with_finalizers(
            claim,
            &[PVC_FINALIZER],
            &[],
        )));
    }
    let input = |inner: String| {
        format!(
            "failed to get input parameters to create snapshot {}: {inner:?}",
            name(snapshot)
        )
    };
    // The claim's finalizer is written before the input is read, as upstream does.
    let failed_after = |mut actions: Vec<Action>, message: String| {
        actions.extend(failed(message));
        actions
    };
    let Some(class) = class_name(snapshot) else {
        let error = format!(
            "failed to take snapshot {} without a snapshot class",
            name(snapshot)
        );
        return failed_after(actions, input(error));
    };
    let Some(class) = by_name(cluster.classes, class) else {
        return failed_after(actions, input(class_not_found(class)));
    };
    let volume = match volume_of(snapshot, cluster) {
        Ok(volume) => volume,
        Err(error) => return failed_after(actions, input(error)),
    };
    let Some(handle) = volume
        .pointer("/spec/csi/volumeHandle")
        .and_then(Value::as_str)
    else {
        let error = format!(
            "cannot find CSI PersistentVolumeSource for volume {}",
            name(volume)
        );
        return failed_after(actions, error);
    };
    let mut content = json!({
        "apiVersion": API_VERSION, "kind": "VolumeSnapshotContent",
        "metadata": {"name": content_name(snapshot)},
        "spec": {
            "volumeSnapshotRef": reference(snapshot, "VolumeSnapshot"),
            "source": {"volumeHandle": handle},
            "volumeSnapshotClassName": name(class),
            "deletionPolicy": text(class, "/deletionPolicy"),
            "driver": text(class, "/driver"),
        },
    });
    if let Some(mode) = volume.pointer("/spec/volumeMode") {
        content["spec"]["sourceVolumeMode"] = mode.clone();
    }
    actions.push(Action::CreateContent(content.clone()));
    actions.push(event(
        snapshot,
        "VolumeSnapshot",
        "Normal",
        "CreatingSnapshot",
        format!("Waiting for a snapshot {key} to be created by the CSI driver."),
    ));
    actions.extend(status_from(snapshot, &content));
    actions
}

/// upstream's `processSnapshotWithDeletionTimestamp`: the content goes by its deletion policy,
/// then the snapshot's finalizers.
fn delete_snapshot(snapshot: &Value, cluster: Cluster<'_>) -> Vec<Action> {
    if !deletion_candidate(snapshot) {
        return Vec::new();
    }
    let wanted = match (bound_content(snapshot), source_claim(snapshot)) {
        (Some(bound), _) => bound.to_string(),
        (None, Some(_)) => content_name(snapshot),
        (None, None) => String::new(),
    };
    let content = by_name(cluster.contents, &wanted).filter(|c| ref_set(snapshot, c));
    let delete_content = content.is_some_and(|c| text(c, "/spec/deletionPolicy") == "Delete");
    let mut actions = Vec::new();
    if let Some(content) = content {
        if restoring_from(snapshot, cluster) {
            return vec![event(
                snapshot,
                "VolumeSnapshot",
                "Warning",
                "SnapshotDeletePending",
                "Snapshot is being used to restore a PVC".into(),
            )];
        }
        if annotation(content, ANN_BEING_DELETED).is_none() {
            let mut next = content.clone();
            crate::objects::set_annotation(&mut next, ANN_BEING_DELETED, "yes");
            actions.push(Action::UpdateContent(next));
        }
        if delete_content && !is_deleting(content) {
            actions.push(Action::DeleteContent(name(content).to_string()));
        }
    }
    let mut remove = vec![AS_SOURCE_FINALIZER];
    if !delete_content {
        remove.push(BOUND_FINALIZER);
    }
    let next = with_finalizers(snapshot, &[], &remove);
    if next != *snapshot {
        actions.push(Action::UpdateSnapshot(next));
    }
    actions
}

/// upstream's `isVolumeBeingCreatedFromSnapshot`: a Pending claim of the namespace names the
/// snapshot as its data source.
fn restoring_from(snapshot: &Value, cluster: Cluster<'_>) -> bool {
    cluster.claims.iter().any(|claim| {
        namespace(claim) == namespace(snapshot)
            && text(claim, "/spec/dataSource/name") == name(snapshot)
            && text(claim, "/spec/dataSource/kind") == "VolumeSnapshot"
            && text(claim, "/spec/dataSource/apiGroup") == GROUP
            && text(claim, "/status/phase") == "Pending"
    })
}

/// What the controller does about `content` now: upstream's `syncContent`.
pub fn sync_content(content: &Value, cluster: Cluster<'_>) -> Vec<Action> {
    let volume = content.pointer("/spec/source/volumeHandle").is_some();
    let handle = content.pointer("/spec/source/snapshotHandle").is_some();
    if volume == handle {
        return vec![event(
            content,
            "VolumeSnapshotContent",
            "Warning",
            "ContentValidationError",
            "Exactly one of VolumeHandle and SnapshotHandle should be specified".into(),
        )];
    }
    if text(content, "/spec/volumeSnapshotRef/uid").is_empty() {
        return Vec::new();
    }
    if !is_deleting(content) && !has_finalizer(content, CONTENT_FINALIZER) {
        return vec![Action::UpdateContent(with_finalizers(
            content,
            &[CONTENT_FINALIZER],
            &[],
        ))];
    }
    let snapshot = by_key(
        cluster.snapshots,
        text(content, "/spec/volumeSnapshotRef/namespace"),
        text(content, "/spec/volumeSnapshotRef/name"),
    )
    .filter(|s| uid(s) == text(content, "/spec/volumeSnapshotRef/uid"));
    if snapshot.is_some_and(deletion_candidate) && annotation(content, ANN_BEING_DELETED).is_none()
    {
        let mut next = content.clone();
        crate::objects::set_annotation(&mut next, ANN_BEING_DELETED, "yes");
        return vec![Action::UpdateContent(next)];
    }
    Vec::new()
}

/// upstream's `checkandRemovePVCFinalizer`, for a claim: its `pvc-as-source-protection`
/// finalizer goes once no snapshot of it is still being taken.
pub fn sync_claim(claim: &Value, cluster: Cluster<'_>) -> Vec<Action> {
    if !has_finalizer(claim, PVC_FINALIZER) {
        return Vec::new();
    }
    let in_use = cluster.snapshots.iter().any(|s| {
        namespace(s) == namespace(claim) && source_claim(s) == Some(name(claim)) && !is_ready(s)
    });
    if in_use {
        return Vec::new();
    }
    vec![Action::UpdateClaim(with_finalizers(
        claim,
        &[],
        &[PVC_FINALIZER],
    ))]
}

/// The bytes a volume holds, as a snapshot of it records (`restoreSize`).
pub fn volume_bytes(volume: &Value) -> i64 {
    i64::try_from(volume_capacity(volume).value()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
