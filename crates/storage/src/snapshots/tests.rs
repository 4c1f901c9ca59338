//! Table tests of the snapshot controller, after upstream's `pkg/common-controller` tests
//! (snapshot_create_test.go, snapshot_update_test.go, snapshot_delete_test.go,
//! snapshot_finalizer_test.go, snapshotclass_test.go), the csi-snapshotter sidecar and the
//! bundled definitions.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;
use crate::testing::with;
use tessera_model::quantity::Quantity;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

fn claim(phase: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"namespace": "ns", "name": "data", "uid": "c1"},
        "spec": {"volumeName": "pvc-c1", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": phase},
    })
}

fn volume() -> Value {
    json!({
        "metadata": {"name": "pvc-c1"},
        "spec": {"capacity": {"storage": "1Gi"}, "volumeMode": "Filesystem",
                 "claimRef": {"namespace": "ns", "name": "data", "uid": "c1"},
                 "csi": {"driver": "local.csi.tessera.dev", "volumeHandle": "local-c1"}},
        "status": {"phase": "Bound"},
    })
}

fn class(name: &str, driver: &str, default: bool, policy: &str) -> Value {
    let mut class = json!({"metadata": {"name": name}, "driver": driver, "deletionPolicy": policy});
    if default {
        class["metadata"]["annotations"] = json!({ANN_DEFAULT_SNAPSHOT_CLASS: "true"});
    }
    class
}

fn snapshot(class: Option<&str>) -> Value {
    let mut snapshot = json!({
        "apiVersion": API_VERSION, "kind": "VolumeSnapshot",
        "metadata": {"namespace": "ns", "name": "snap", "uid": "s1", "resourceVersion": "3"},
        "spec": {"source": {"persistentVolumeClaimName": "data"}},
    });
    if let Some(class) = class {
        snapshot["spec"]["volumeSnapshotClassName"] = json!(class);
    }
    snapshot
}

const BOTH: [&str; 1] = [AS_SOURCE_FINALIZER];

fn content(policy: &str) -> Value {
    json!({
        "metadata": {"name": "snapcontent-s1", "finalizers": [CONTENT_FINALIZER]},
        "spec": {"volumeSnapshotRef": {"namespace": "ns", "name": "snap", "uid": "s1"},
                 "source": {"volumeHandle": "local-c1"}, "driver": "local.csi.tessera.dev",
                 "volumeSnapshotClassName": "tessera-local", "deletionPolicy": policy},
    })
}

/// A short description of each action, for tables.
fn describe(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .map(|action| match action {
            Action::UpdateSnapshot(s) => format!(
                "update snapshot class={} finalizers={}",
                text(s, "/spec/volumeSnapshotClassName"),
                s.pointer("/metadata/finalizers")
                    .map_or(0, |f| f.as_array().map_or(0, Vec::len))
            ),
            Action::UpdateSnapshotStatus(s) => format!(
                "status bound={} ready={} size={} error={}",
                text(s, "/status/boundVolumeSnapshotContentName"),
                s.pointer("/status/readyToUse").unwrap_or(&Value::Null),
                text(s, "/status/restoreSize"),
                text(s, "/status/error/message")
            ),
            Action::CreateContent(c) => format!(
                "create {} handle={} class={} policy={} driver={}",
                text(c, "/metadata/name"),
                text(c, "/spec/source/volumeHandle"),
                text(c, "/spec/volumeSnapshotClassName"),
                text(c, "/spec/deletionPolicy"),
                text(c, "/spec/driver")
            ),
            Action::UpdateContent(c) => format!(
                "update content uid={} being-deleted={} finalizers={}",
                text(c, "/spec/volumeSnapshotRef/uid"),
                annotation(c, ANN_BEING_DELETED).unwrap_or("-"),
                c.pointer("/metadata/finalizers")
                    .map_or(0, |f| f.as_array().map_or(0, Vec::len))
            ),
            Action::DeleteContent(name) => format!("delete {name}"),
            Action::UpdateClaim(c) => format!(
                "update claim finalizers={}",
                c.pointer("/metadata/finalizers")
                    .map_or(0, |f| f.as_array().map_or(0, Vec::len))
            ),
            Action::Event(e) => format!("{} {}: {}", e.kind, e.reason, e.message),
        })
        .collect()
}

struct World {
    snapshots: Vec<Value>,
    contents: Vec<Value>,
    classes: Vec<Value>,
    claims: Vec<Value>,
    volumes: Vec<Value>,
}

impl World {
    fn new() -> World {
        World {
            snapshots: Vec::new(),
            contents: Vec::new(),
            classes: vec![class(
                "tessera-local",
                "local.csi.tessera.dev",
                true,
                "Delete",
            )],
            claims: vec![claim("Bound")],
            volumes: vec![volume()],
        }
    }

    fn cluster(&self) -> Cluster<'_> {
        Cluster {
            snapshots: &self.snapshots,
            contents: &self.contents,
            classes: &self.classes,
            claims: &self.claims,
            volumes: &self.volumes,
        }
    }
}

#[test]
fn dynamic_snapshots_step_by_step() {
    let finalized = with(
        snapshot(Some("tessera-local")),
        &[("/metadata/finalizers", json!(BOTH))],
    );
    // (case, snapshot, how the world differs, actions)
    type Case = (
        &'static str,
        Value,
        Box<dyn Fn(&mut World)>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "no class: the default class of the volume's driver",
            snapshot(None),
            Box::new(|_| {}),
            vec!["update snapshot class=tessera-local finalizers=0"],
        ),
        (
            "no default class for the driver",
            snapshot(None),
            Box::new(|w| {
                w.classes = vec![class("other", "shared.csi.tessera.dev", true, "Delete")]
            }),
            vec![
                "status bound= ready=null size= error=Failed to set default snapshot class with error cannot find default snapshot class",
                "Warning SetDefaultSnapshotClassFailed: Failed to set default snapshot class with error cannot find default snapshot class",
            ],
        ),
        (
            "two default classes",
            snapshot(None),
            Box::new(|w| {
                w.classes
                    .push(class("second", "local.csi.tessera.dev", true, "Retain"))
            }),
            vec![
                "status bound= ready=null size= error=Failed to set default snapshot class with error 2 default snapshot classes were found",
                "Warning SetDefaultSnapshotClassFailed: Failed to set default snapshot class with error 2 default snapshot classes were found",
            ],
        ),
        (
            "source claim not bound",
            snapshot(None),
            Box::new(|w| w.claims = vec![claim("Pending")]),
            vec![
                "status bound= ready=null size= error=Failed to set default snapshot class with error the PVC data is not yet bound to a PV, will not attempt to take a snapshot",
                "Warning SetDefaultSnapshotClassFailed: Failed to set default snapshot class with error the PVC data is not yet bound to a PV, will not attempt to take a snapshot",
            ],
        ),
        (
            "named class missing",
            snapshot(Some("gone")),
            Box::new(|_| {}),
            vec![
                "status bound= ready=null size= error=Failed to get snapshot class with error volumesnapshotclass.snapshot.storage.k8s.io \"gone\" not found",
                "Warning GetSnapshotClassFailed: Failed to get snapshot class with error volumesnapshotclass.snapshot.storage.k8s.io \"gone\" not found",
            ],
        ),
        (
            "class set: the as-source finalizer first",
            snapshot(Some("tessera-local")),
            Box::new(|_| {}),
            vec!["update snapshot class=tessera-local finalizers=1"],
        ),
        (
            "finalized: the claim protected, the content created, the status bound",
            finalized.clone(),
            Box::new(|_| {}),
            vec![
                "update claim finalizers=1",
                "create snapcontent-s1 handle=local-c1 class=tessera-local policy=Delete driver=local.csi.tessera.dev",
                "Normal CreatingSnapshot: Waiting for a snapshot ns/snap to be created by the CSI driver.",
                "status bound=snapcontent-s1 ready=false size= error=",
            ],
        ),
        (
            "the claim gone",
            finalized.clone(),
            Box::new(|w| w.claims.clear()),
            vec![
                "status bound= ready=false size= error=Failed to create snapshot content with error cannot get claim from snapshot",
                "Warning SnapshotContentCreationFailed: Failed to create snapshot content with error cannot get claim from snapshot",
            ],
        ),
        (
            "the volume gone",
            finalized.clone(),
            Box::new(|w| w.volumes.clear()),
            vec![
                "update claim finalizers=1",
                "status bound= ready=false size= error=Failed to create snapshot content with error failed to get input parameters to create snapshot snap: \"failed to retrieve PV pvc-c1 from the API server: \\\"persistentvolumes \\\\\\\"pvc-c1\\\\\\\" not found\\\"\"",
                "Warning SnapshotContentCreationFailed: Failed to create snapshot content with error failed to get input parameters to create snapshot snap: \"failed to retrieve PV pvc-c1 from the API server: \\\"persistentvolumes \\\\\\\"pvc-c1\\\\\\\" not found\\\"\"",
            ],
        ),
        (
            "the content exists and is ready: the status copied, with both events",
            with(
                finalized.clone(),
                &[(
                    "/status",
                    json!({"boundVolumeSnapshotContentName": "snapcontent-s1", "readyToUse": false}),
                )],
            ),
            Box::new(|w| {
                w.contents.push(with(content("Delete"), &[("/status", json!({"snapshotHandle": "snapshot-x", "readyToUse": true, "restoreSize": 1073741824_i64, "creationTime": 1_700_000_000_000_000_000_i64}))]));
            }),
            vec!["update snapshot class=tessera-local finalizers=2"],
        ),
        (
            "both finalizers: the status follows the content",
            with(
                finalized.clone(),
                &[
                    (
                        "/metadata/finalizers",
                        json!([AS_SOURCE_FINALIZER, BOUND_FINALIZER]),
                    ),
                    (
                        "/status",
                        json!({"boundVolumeSnapshotContentName": "snapcontent-s1", "readyToUse": false}),
                    ),
                ],
            ),
            Box::new(|w| {
                w.contents.push(with(content("Delete"), &[("/status", json!({"snapshotHandle": "snapshot-x", "readyToUse": true, "restoreSize": 1073741824_i64, "creationTime": 1_700_000_000_000_000_000_i64}))]));
            }),
            vec![
                "status bound=snapcontent-s1 ready=true size=1Gi error=",
                "Normal SnapshotCreated: Snapshot ns/snap was successfully created by the CSI driver.",
                "Normal SnapshotReady: Snapshot ns/snap is ready to use.",
            ],
        ),
        (
            "a Retain content: no bound finalizer",
            with(
                finalized.clone(),
                &[(
                    "/status",
                    json!({"boundVolumeSnapshotContentName": "snapcontent-s1", "readyToUse": false}),
                )],
            ),
            Box::new(|w| w.contents.push(content("Retain"))),
            vec![],
        ),
        (
            "a pre-provisioned content under the dynamic name",
            finalized.clone(),
            Box::new(|w| {
                w.contents.push(with(
                    content("Delete"),
                    &[("/spec/source", json!({"snapshotHandle": "h"}))],
                ))
            }),
            vec![
                "status bound= ready=false size= error=VolumeSnapshotContent snapcontent-s1 is pre-provisioned while expecting a dynamically provisioned one",
                "Warning SnapshotContentMismatch: VolumeSnapshotContent snapcontent-s1 is pre-provisioned while expecting a dynamically provisioned one",
            ],
        ),
        (
            "ready and bound, content gone",
            with(
                finalized.clone(),
                &[(
                    "/status",
                    json!({"boundVolumeSnapshotContentName": "snapcontent-s1", "readyToUse": true}),
                )],
            ),
            Box::new(|_| {}),
            vec![
                "status bound=snapcontent-s1 ready=false size= error=VolumeSnapshotContent is missing",
                "Warning SnapshotContentMissing: VolumeSnapshotContent is missing",
            ],
        ),
        (
            "the same error is not written twice",
            with(
                finalized.clone(),
                &[(
                    "/status",
                    json!({"readyToUse": false, "error": {"message": "Failed to create snapshot content with error cannot get claim from snapshot"}}),
                )],
            ),
            Box::new(|w| w.claims.clear()),
            vec![],
        ),
    ];
    for (case, snapshot, setup, expected) in cases {
        let mut world = World::new();
        setup(&mut world);
        let actions = sync_snapshot(&snapshot, world.cluster(), now());
        assert_eq!(describe(&actions), expected, "{case}");
    }
}

#[test]
fn pre_provisioned_snapshots_bind_both_ways() {
    let snapshot = json!({
        "metadata": {"namespace": "ns", "name": "snap", "uid": "s1",
                     "finalizers": [AS_SOURCE_FINALIZER]},
        "spec": {"source": {"volumeSnapshotContentName": "existing"}},
    });
    let content = json!({
        "metadata": {"name": "existing"},
        "spec": {"volumeSnapshotRef": {"namespace": "ns", "name": "snap"},
                 "source": {"snapshotHandle": "snapshot-old"}, "driver": "local.csi.tessera.dev",
                 "deletionPolicy": "Retain"},
    });
    let ready = with(
        content.clone(),
        &[
            ("/spec/volumeSnapshotRef/uid", json!("s1")),
            (
                "/status",
                json!({"snapshotHandle": "snapshot-old", "readyToUse": true, "restoreSize": 2048}),
            ),
        ],
    );
    let cases: Vec<(&str, Vec<Value>, Vec<&str>)> = vec![
        (
            "missing content",
            vec![],
            vec![
                "status bound= ready=false size= error=VolumeSnapshotContent is missing",
                "Warning SnapshotContentMissing: VolumeSnapshotContent is missing",
            ],
        ),
        (
            "the content gets the snapshot's uid",
            vec![content.clone()],
            vec!["update content uid=s1 being-deleted=- finalizers=0"],
        ),
        (
            "another snapshot's content",
            vec![with(
                content.clone(),
                &[("/spec/volumeSnapshotRef/uid", json!("other"))],
            )],
            vec![
                "status bound= ready=false size= error=Snapshot failed to bind VolumeSnapshotContent, Could not bind snapshot snap and content existing, the VolumeSnapshotRef does not match",
                "Warning SnapshotBindFailed: Snapshot failed to bind VolumeSnapshotContent, Could not bind snapshot snap and content existing, the VolumeSnapshotRef does not match",
            ],
        ),
        (
            "a dynamic content named",
            vec![with(
                content.clone(),
                &[("/spec/source", json!({"volumeHandle": "v"}))],
            )],
            vec![
                "status bound= ready=false size= error=VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one",
                "Warning SnapshotContentMismatch: VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one",
            ],
        ),
        (
            "a content for another snapshot",
            vec![with(
                content.clone(),
                &[("/spec/volumeSnapshotRef/name", json!("other"))],
            )],
            vec![
                "status bound= ready=false size= error=VolumeSnapshotContent [existing] is bound to a different snapshot",
                "Warning SnapshotContentMisbound: VolumeSnapshotContent [existing] is bound to a different snapshot",
            ],
        ),
        (
            "bound and ready: the status, no bound finalizer for Retain",
            vec![with(
                ready.clone(),
                &[("/spec/volumeSnapshotClassName", json!("c"))],
            )],
            vec![
                "status bound=existing ready=true size=2Ki error=",
                "Normal SnapshotReady: Snapshot ns/snap is ready to use.",
            ],
        ),
    ];
    for (case, contents, expected) in cases {
        let mut world = World::new();
        world.contents = contents;
        let actions = sync_snapshot(&snapshot, world.cluster(), now());
        assert_eq!(describe(&actions), expected, "{case}");
    }
    let both = with(
        snapshot.clone(),
        &[
            ("/spec/source/persistentVolumeClaimName", json!("data")),
            ("/spec/volumeSnapshotClassName", json!("tessera-local")),
        ],
    );
    let world = World::new();
    assert_eq!(
        describe(&sync_snapshot(&both, world.cluster(), now())),
        vec![
            "status bound= ready=false size= error=Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified",
            "Warning SnapshotValidationError: Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified",
        ]
    );
}

#[test]
fn deletion_follows_the_content_policy() {
    let deleting = |finalizers: &[&str]| {
        with(
            snapshot(Some("tessera-local")),
            &[
                ("/metadata/finalizers", json!(finalizers)),
                ("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z")),
                (
                    "/status",
                    json!({"boundVolumeSnapshotContentName": "snapcontent-s1", "readyToUse": true}),
                ),
            ],
        )
    };
    let restoring = json!({
        "metadata": {"namespace": "ns", "name": "restored", "uid": "c2"},
        "spec": {"dataSource": {"apiGroup": GROUP, "kind": "VolumeSnapshot", "name": "snap"}},
        "status": {"phase": "Pending"},
    });
    let marked = |policy: &str| {
        let mut c = content(policy);
        crate::objects::set_annotation(&mut c, ANN_BEING_DELETED, "yes");
        c
    };
    // (case, snapshot, contents, claims, actions)
    type Case = (
        &'static str,
        Value,
        Vec<Value>,
        Vec<Value>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            "Delete: the content marked and deleted, the bound finalizer kept",
            deleting(&[AS_SOURCE_FINALIZER, BOUND_FINALIZER]),
            vec![content("Delete")],
            vec![],
            vec![
                "update content uid=s1 being-deleted=yes finalizers=1",
                "delete snapcontent-s1",
                "update snapshot class=tessera-local finalizers=1",
            ],
        ),
        (
            "Delete, content gone: the last finalizer goes",
            deleting(&[BOUND_FINALIZER]),
            vec![],
            vec![],
            vec!["update snapshot class=tessera-local finalizers=0"],
        ),
        (
            "Delete, content deleting already: nothing more",
            deleting(&[BOUND_FINALIZER]),
            vec![with(
                marked("Delete"),
                &[("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z"))],
            )],
            vec![],
            vec![],
        ),
        (
            "Retain: the content marked and kept, both finalizers go",
            deleting(&[AS_SOURCE_FINALIZER]),
            vec![content("Retain")],
            vec![],
            vec![
                "update content uid=s1 being-deleted=yes finalizers=1",
                "update snapshot class=tessera-local finalizers=0",
            ],
        ),
        (
            "a claim being restored from it holds the deletion",
            deleting(&[AS_SOURCE_FINALIZER, BOUND_FINALIZER]),
            vec![content("Delete")],
            vec![restoring],
            vec!["Warning SnapshotDeletePending: Snapshot is being used to restore a PVC"],
        ),
        (
            "no finalizers: nothing",
            deleting(&[]),
            vec![content("Delete")],
            vec![],
            vec![],
        ),
    ];
    for (case, snapshot, contents, claims, expected) in cases {
        let mut world = World::new();
        world.contents = contents;
        world.claims.extend(claims);
        let actions = sync_snapshot(&snapshot, world.cluster(), now());
        assert_eq!(describe(&actions), expected, "{case}");
    }
}

#[test]
fn contents_and_claims() {
    let mut world = World::new();
    let unfinalized = with(content("Delete"), &[("/metadata/finalizers", json!([]))]);
    assert_eq!(
        describe(&sync_content(&unfinalized, world.cluster())),
        vec!["update content uid=s1 being-deleted=- finalizers=1"]
    );
    let unbound = with(
        unfinalized.clone(),
        &[("/spec/volumeSnapshotRef/uid", json!(""))],
    );
    assert!(
        sync_content(&unbound, world.cluster()).is_empty(),
        "pre-bound: left to the snapshot"
    );
    let invalid = with(content("Delete"), &[("/spec/source", json!({}))]);
    assert_eq!(
        describe(&sync_content(&invalid, world.cluster())),
        vec![
            "Warning ContentValidationError: Exactly one of VolumeHandle and SnapshotHandle should be specified"
        ]
    );
    world.snapshots.push(with(
        snapshot(Some("tessera-local")),
        &[
            ("/metadata/finalizers", json!([BOUND_FINALIZER])),
            ("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z")),
        ],
    ));
    assert_eq!(
        describe(&sync_content(&content("Delete"), world.cluster())),
        vec!["update content uid=s1 being-deleted=yes finalizers=1"]
    );

    // The claim's finalizer stays while a snapshot of it is not ready.
    let protected = with(
        claim("Bound"),
        &[("/metadata/finalizers", json!([PVC_FINALIZER]))],
    );
    world.snapshots = vec![snapshot(Some("tessera-local"))];
    assert!(sync_claim(&protected, world.cluster()).is_empty());
    world.snapshots = vec![with(
        snapshot(Some("tessera-local")),
        &[("/status/readyToUse", json!(true))],
    )];
    assert_eq!(
        describe(&sync_claim(&protected, world.cluster())),
        vec!["update claim finalizers=0"]
    );
    assert!(sync_claim(&claim("Bound"), world.cluster()).is_empty());
}

fn no_disk(_: &str) -> Option<Quantity> {
    None
}

#[test]
fn a_local_snapshot_takes_room_on_its_node_or_fails_with_resource_exhausted() {
    use sidecar::{Step, sync};
    const GI: i64 = 1 << 30;
    let on_n1 = with(
        volume(),
        &[(
            "/spec/nodeAffinity",
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}),
        )],
    );
    let dynamic = with(content("Delete"), &[("/metadata/uid", json!("k1"))]);
    let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
    let held = |bytes: i64, released: bool| {
        let mut c = json!({"metadata": {"name": "older", "finalizers": [CONTENT_FINALIZER]},
            "spec": {"driver": "local.csi.tessera.dev", "deletionPolicy": "Delete",
                     "source": {"volumeHandle": "local-c0"}},
            "status": {"snapshotHandle": "n1/snapshot-k0", "readyToUse": true, "restoreSize": bytes}});
        if released {
            c["metadata"]["deletionTimestamp"] = json!("2023-11-14T22:13:20Z");
            crate::objects::set_annotation(&mut c, ANN_BEING_DELETED, "yes");
        }
        c
    };
    let exhausted = "Failed to create snapshot: failed to take snapshot of the volume local-c1: \"rpc error: code = ResourceExhausted desc = requested snapshot size 1073741824 exceeds remaining capacity for \\\"n1\\\", 2Gi out of 2560Mi already used\"";
    // (disk of n1, the older snapshot there, what CreateSnapshot answers, bytes the
    // snapshots hold on n1 once it is taken)
    type Case<'a> = (&'a str, Option<Value>, Result<&'a str, &'a str>, i64);
    let table: Vec<Case> = vec![
        ("4Gi", None, Ok("n1/snapshot-k1"), GI),
        ("3Gi", Some(held(GI, false)), Ok("n1/snapshot-k1"), 2 * GI),
        ("2560Mi", Some(held(GI, false)), Err(exhausted), 0),
        // DeleteSnapshot of the older one is due: its room is free.
        ("2560Mi", Some(held(GI, true)), Ok("n1/snapshot-k1"), GI),
    ];
    for (disk, older, want, held_after) in table {
        let contents: Vec<Value> = older.into_iter().collect();
        let disk_of = |node: &str| (node == "n1").then(|| disk.parse().expect("quantity"));
        let step = sync(
            &dynamic,
            std::slice::from_ref(&on_n1),
            &contents,
            disk_of,
            at,
        );
        match (want, step) {
            (Ok(handle), Step::Status(next)) => {
                assert_eq!(next["status"]["snapshotHandle"], handle, "{disk}");
                assert_eq!(next["status"]["restoreSize"], GI, "{disk}");
                assert_eq!(sidecar::handle_node(handle), Some("n1"));
                let mut after = contents.clone();
                after.push(next);
                assert_eq!(
                    sidecar::held_on_node("n1", &after),
                    i128::from(held_after),
                    "{disk}"
                );
                assert_eq!(sidecar::held_on_node("n2", &after), 0, "{disk}");
            }
            (
                Err(message),
                Step::Failed {
                    content,
                    message: said,
                },
            ) => {
                assert_eq!(said, message, "{disk}");
                assert_eq!(content["status"]["readyToUse"], false);
                assert_eq!(content["status"]["error"]["message"], message);
                // Recorded once; tried again each pass, and taken once there is room.
                assert_eq!(
                    sync(
                        &content,
                        std::slice::from_ref(&on_n1),
                        &contents,
                        disk_of,
                        at
                    ),
                    Step::Skip
                );
                let roomier = |node: &str| (node == "n1").then(|| "3Gi".parse().expect("quantity"));
                assert!(matches!(
                    sync(
                        &content,
                        std::slice::from_ref(&on_n1),
                        &contents,
                        roomier,
                        at
                    ),
                    Step::Status(_)
                ));
            }
            (want, step) => panic!("{disk}: wanted {want:?}, got {step:?}"),
        }
    }
    // A node whose disk is not known (gone): taken, nothing to count it against.
    assert!(matches!(
        sync(
            &dynamic,
            std::slice::from_ref(&on_n1),
            &[held(10 * GI, false)],
            no_disk,
            at
        ),
        Step::Status(_)
    ));
}

#[test]
fn the_sidecar_takes_lists_and_deletes_snapshots() {
    use sidecar::{Step, sync};
    let dynamic = with(content("Delete"), &[("/metadata/uid", json!("k1"))]);
    let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
    match sync(&dynamic, &[volume()], &[], no_disk, at) {
        Step::Status(next) => assert_eq!(
            next["status"],
            json!({"snapshotHandle": "snapshot-k1", "readyToUse": true,
                   "restoreSize": 1073741824_i64, "creationTime": 1_700_000_000_123_456_789_i64})
        ),
        other => panic!("{other:?}"),
    }
    match sync(&dynamic, &[], &[], no_disk, at) {
        Step::Failed { message, .. } => assert_eq!(
            message,
            "Failed to create snapshot: failed to take snapshot of the volume local-c1: \"rpc error: code = NotFound desc = source volume local-c1 not found\""
        ),
        other => panic!("{other:?}"),
    }
    // A failure already recorded is not written again.
    let failed = match sync(&dynamic, &[], &[], no_disk, at) {
        Step::Failed { content, .. } => content,
        other => panic!("{other:?}"),
    };
    assert_eq!(sync(&failed, &[], &[], no_disk, at), Step::Skip);
    let object = with(
        dynamic.clone(),
        &[("/spec/driver", json!("object.csi.tessera.dev"))],
    );
    assert_eq!(
        sync(&object, &[volume()], &[], no_disk, at),
        Step::Skip,
        "the object driver takes none"
    );
    let taken = with(
        dynamic.clone(),
        &[(
            "/status",
            json!({"snapshotHandle": "snapshot-k1", "readyToUse": true, "restoreSize": 5, "creationTime": 7}),
        )],
    );
    assert_eq!(sync(&taken, &[volume()], &[], no_disk, at), Step::Skip);

    // A pre-provisioned handle the driver took before keeps its size and time.
    let pre = json!({"metadata": {"name": "pre"},
        "spec": {"driver": "local.csi.tessera.dev", "deletionPolicy": "Retain",
                 "source": {"snapshotHandle": "snapshot-k1"},
                 "volumeSnapshotRef": {"namespace": "ns", "name": "snap"}}});
    match sync(&pre, &[], std::slice::from_ref(&taken), no_disk, at) {
        Step::Status(next) => assert_eq!(
            next["status"],
            json!({"snapshotHandle": "snapshot-k1", "readyToUse": true, "restoreSize": 5, "creationTime": 7})
        ),
        other => panic!("{other:?}"),
    }

    // Deletion: Delete deletes the backing snapshot, Retain keeps it; the finalizer goes.
    let deleting = |policy: &str| {
        let mut c = with(
            taken.clone(),
            &[
                ("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z")),
                ("/spec/deletionPolicy", json!(policy)),
            ],
        );
        crate::objects::set_annotation(&mut c, ANN_BEING_DELETED, "yes");
        c
    };
    for (policy, handle) in [
        ("Delete", Some("snapshot-k1".to_string())),
        ("Retain", None),
    ] {
        match sync(&deleting(policy), &[], &[], no_disk, at) {
            Step::Delete {
                handle: deleted,
                content,
            } => {
                assert_eq!(deleted, handle, "{policy}");
                assert_eq!(content["metadata"]["finalizers"], json!([]), "{policy}");
            }
            other => panic!("{policy}: {other:?}"),
        }
    }
    let unmarked = with(
        taken,
        &[("/metadata/deletionTimestamp", json!("2023-11-14T22:13:20Z"))],
    );
    assert_eq!(
        sync(&unmarked, &[], &[], no_disk, at),
        Step::Skip,
        "not yet released by the controller"
    );
}

#[test]
fn the_definitions_and_classes_are_upstreams() {
    let definitions = crd::definitions();
    let names: Vec<(&str, &str, Value)> = definitions
        .iter()
        .map(|d| {
            (
                text(d, "/metadata/name"),
                text(d, "/spec/scope"),
                d["spec"]["names"]["shortNames"].clone(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            (
                "volumesnapshotclasses.snapshot.storage.k8s.io",
                "Cluster",
                json!(["vsclass", "vsclasses"])
            ),
            (
                "volumesnapshotcontents.snapshot.storage.k8s.io",
                "Cluster",
                json!(["vsc", "vscs"])
            ),
            (
                "volumesnapshots.snapshot.storage.k8s.io",
                "Namespaced",
                json!(["vs"])
            ),
        ]
    );
    let snapshots = &definitions[2]["spec"]["versions"][0];
    assert_eq!(snapshots["name"], "v1");
    assert_eq!(snapshots["subresources"], json!({"status": {}}));
    let columns: Vec<&str> = snapshots["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| text(c, "/name"))
        .collect();
    assert_eq!(
        columns,
        [
            "ReadyToUse",
            "SourcePVC",
            "SourceSnapshotContent",
            "RestoreSize",
            "SnapshotClass",
            "SnapshotContent",
            "CreationTime",
            "Age"
        ]
    );
    assert!(
        definitions.iter().all(|d| annotation(
            d,
            tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION
        )
        .is_some())
    );
    let classes = crd::snapshot_classes();
    let local = &classes[0];
    assert_eq!(text(local, "/metadata/name"), "tessera-local");
    assert_eq!(text(local, "/driver"), "local.csi.tessera.dev");
    assert_eq!(text(local, "/deletionPolicy"), "Delete");
    assert_eq!(annotation(local, ANN_DEFAULT_SNAPSHOT_CLASS), Some("true"));
    assert!(
        classes
            .iter()
            .all(|c| sidecar::takes_snapshots(text(c, "/driver")))
    );
}
