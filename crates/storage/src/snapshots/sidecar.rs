//! What the simulated drivers' csi-snapshotter sidecar (external-snapshotter's
//! `pkg/sidecar-controller`) does about one VolumeSnapshotContent of its driver: a dynamic
//! content's CreateSnapshot of its source volume (`status.snapshotHandle`, `readyToUse`,
//! `restoreSize` in bytes — the source volume's size —, `creationTime` in nanoseconds), a
//! pre-provisioned content's ListSnapshots of its handle, and DeleteSnapshot once the content
//! is being deleted with policy Delete (then the `volumesnapshotcontent-bound-protection`
//! finalizer goes).
//!
//! The local and shared drivers take snapshots; the object-store driver does not. There is no
//! storage behind a snapshot: the handle and the size are bookkeeping, and the contents are
//! the only record of the snapshots a driver holds. A local driver's snapshot is kept on the
//! node of its source volume (its handle is `<node>/snapshot-<content uid>`) and takes its
//! `restoreSize` of that node's disk ([`held_on_node`]) until DeleteSnapshot (a Delete
//! content released) or until its last content is gone (Retain); one that does not fit fails
//! with CSI's `ResourceExhausted` and is tried again. The shared driver's pool is not
//! accounted. Knows nothing of clients or watches.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::json::text;
use tessera_model::quantity::Quantity;

use super::{ANN_BEING_DELETED, CONTENT_FINALIZER, volume_bytes, with_finalizers};
use crate::csi::{LOCAL_DRIVER, SHARED_DRIVER, bytes_quantity, local_volume_node, used_on_node};
use crate::objects::{annotation, is_deleting, name, uid};

/// The drivers that take snapshots.
pub const SNAPSHOT_DRIVERS: [&str; 2] = [LOCAL_DRIVER, SHARED_DRIVER];

/// The component the sidecar records its events as, for `driver`.
pub fn component(driver: &str) -> String {
    format!("csi-snapshotter {driver}")
}

/// Whether `driver` is a simulated driver that takes snapshots.
pub fn takes_snapshots(driver: &str) -> bool {
    SNAPSHOT_DRIVERS.contains(&driver)
}

/// The handle the driver gives the snapshot a content asks for: `snapshot-<content uid>`,
/// prefixed with `<node>/` when it is kept on a node's local disk.
pub fn snapshot_handle(content: &Value, node: Option<&str>) -> String {
    match node {
        Some(node) => format!("{node}/snapshot-{}", uid(content)),
        None => format!("snapshot-{}", uid(content)),
    }
}

/// The node a local driver's snapshot is kept on, read from its handle.
pub fn handle_node(handle: &str) -> Option<&str> {
    handle
        .split_once('/')
        .map(|(node, _)| node)
        .filter(|node| !node.is_empty())
}

/// Whether DeleteSnapshot of the content's backing snapshot is due (or done): the content
/// is released with policy Delete.
fn deletes_snapshot(content: &Value) -> bool {
    should_delete(content) && text(content, "/spec/deletionPolicy") == "Delete"
}

/// Bytes of `node`'s disk the local driver's snapshots kept there hold: each handle once
/// (a pre-provisioned content may name a snapshot another content took), its `restoreSize`,
/// while some content records it and none has had it deleted.
pub fn held_on_node(node: &str, contents: &[Value]) -> i128 {
    let mut held: BTreeMap<&str, Option<i128>> = BTreeMap::new();
    for content in contents {
        let handle = text(content, "/status/snapshotHandle");
        if text(content, "/spec/driver") != LOCAL_DRIVER || handle_node(handle) != Some(node) {
            continue;
        }
        let entry = held.entry(handle).or_insert(Some(0));
        if deletes_snapshot(content) {
            *entry = None;
        } else if let Some(bytes) = entry {
            let size = content
                .pointer("/status/restoreSize")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            *bytes = (*bytes).max(i128::from(size.max(0)));
        }
    }
    held.values().flatten().sum()
}

/// One step of the sidecar about a content.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Nothing to do: another driver's content, ready already, or not being deleted.
    Skip,
    /// Write the content's status (CreateSnapshot or ListSnapshots answered).
    Status(Value),
    /// CreateSnapshot failed: the content's status with its `error`, and the
    /// `SnapshotCreationFailed` event's message.
    Failed {
        /// The content with `status.error` set.
        content: Value,
        /// The event's message.
        message: String,
    },
    /// DeleteSnapshot of `handle` (when the backing snapshot is to go), then the content
    /// without its finalizer.
    Delete {
        /// The backing snapshot deleted, if any.
        handle: Option<String>,
        /// The content without [`CONTENT_FINALIZER`], to `Update`.
        content: Value,
    },
}

fn nanos(now: SystemTime) -> i64 {
    now.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// upstream's `shouldDelete`.
fn should_delete(content: &Value) -> bool {
    if !is_deleting(content) {
        return false;
    }
    (content.pointer("/spec/source/snapshotHandle").is_some()
        && text(content, "/spec/volumeSnapshotRef/uid").is_empty())
        || annotation(content, ANN_BEING_DELETED).is_some()
}

/// A content's failed CreateSnapshot: its status with the error, and the event's message
/// (csi-snapshotter's `Failed to create snapshot: failed to take snapshot of the volume
/// <handle>: "<gRPC error>"`); [`Step::Skip`] when that error is recorded already.
fn create_failed(content: &Value, source: &str, error: &str, now: SystemTime) -> Step {
    let message = format!("failed to take snapshot of the volume {source}: {error:?}");
    let message = format!("Failed to create snapshot: {message}");
    if text(content, "/status/error/message") == message {
        return Step::Skip;
    }
    let mut next = content.clone();
    next["status"] = json!({"readyToUse": false,
        "error": {"time": tessera_model::time::timestamp(now),
                  "message": message.clone()}});
    Step::Failed {
        content: next,
        message,
    }
}

/// The sidecar's `syncContent` for `content`, with the cluster's volumes (the sources),
/// contents (the snapshots the driver holds) and each node's local disk (`disk_of`), at
/// `now`.
pub fn sync(
    content: &Value,
    volumes: &[Value],
    contents: &[Value],
    disk_of: impl Fn(&str) -> Option<Quantity>,
    now: SystemTime,
) -> Step {
    let driver = text(content, "/spec/driver");
    if !takes_snapshots(driver) {
        return Step::Skip;
    }
    if should_delete(content) {
        let has_finalizer = content
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == CONTENT_FINALIZER));
        if !has_finalizer {
            return Step::Skip;
        }
        let handle = (text(content, "/spec/deletionPolicy") == "Delete")
            .then(|| text(content, "/status/snapshotHandle"))
            .filter(|h| !h.is_empty())
            .map(str::to_string);
        return Step::Delete {
            handle,
            content: with_finalizers(content, &[], &[CONTENT_FINALIZER]),
        };
    }
    if is_deleting(content) || content.pointer("/status/readyToUse") == Some(&Value::Bool(true)) {
        return Step::Skip;
    }
    let mut next = content.clone();
    if let Some(source) = content
        .pointer("/spec/source/volumeHandle")
        .and_then(Value::as_str)
    {
        if content.pointer("/status/snapshotHandle").is_some() {
            return Step::Skip;
        }
        // CreateSnapshot.
        let volume = volumes.iter().find(|v| {
            text(v, "/spec/csi/volumeHandle") == source && text(v, "/spec/csi/driver") == driver
        });
        let Some(volume) = volume else {
            let error =
                format!("rpc error: code = NotFound desc = source volume {source} not found");
            return create_failed(content, source, &error, now);
        };
        let bytes = volume_bytes(volume);
        let node = local_volume_node(volume);
        if let Some(node) = node
            && let Some(disk) = disk_of(node)
        {
            let used = used_on_node(node, volumes, contents);
            if i128::from(bytes) > disk.value() - used {
                let error = format!(
                    "rpc error: code = ResourceExhausted desc = requested snapshot size {bytes} exceeds remaining capacity for {node:?}, {} out of {} already used",
                    bytes_quantity(used).to_canonical(),
                    disk.to_canonical()
                );
                return create_failed(content, source, &error, now);
            }
        }
        next["status"] = json!({
            "snapshotHandle": snapshot_handle(content, node),
            "readyToUse": true,
            "restoreSize": bytes,
            "creationTime": nanos(now),
        });
        return Step::Status(next);
    }
    // ListSnapshots of a pre-provisioned handle: what the driver recorded when it took it.
    let handle = text(content, "/spec/source/snapshotHandle");
    let taken = contents.iter().find(|c| {
        name(c) != name(content)
            && text(c, "/status/snapshotHandle") == handle
            && c.pointer("/status/readyToUse") == Some(&Value::Bool(true))
    });
    let mut status = json!({
        "snapshotHandle": handle,
        "readyToUse": true,
        "creationTime": taken
            .and_then(|c| c.pointer("/status/creationTime"))
            .cloned()
            .unwrap_or_else(|| json!(nanos(now))),
    });
    if let Some(size) = taken.and_then(|c| c.pointer("/status/restoreSize")) {
        status["restoreSize"] = size.clone();
    }
    next["status"] = status;
    Step::Status(next)
}
