//! CSI volume snapshots on the embedded platform with the real kubectl (1.33 and 1.27): a pod
//! writes to a claim, a VolumeSnapshot of it (`kubectl apply`, the default class of the local
//! driver) becomes ready (`kubectl wait --for=jsonpath`), `kubectl get volumesnapshot` prints
//! upstream's columns, its content is `snapcontent-<uid>`, a claim restored from it is
//! provisioned from the snapshot and its pod starts, a clone of the claim (`dataSourceRef` kind
//! PersistentVolumeClaim) is provisioned from its volume, a claim smaller than the snapshot
//! stays Pending with external-provisioner's `ProvisioningFailed`, and deleting the snapshot
//! removes its content (Delete); a Retain class's content outlives its snapshot and a
//! pre-provisioned content naming its handle binds a new snapshot. The official Python client
//! lists the snapshots (`CustomObjectsApi`). Local snapshots take their node's disk: the
//! node's CSIStorageCapacity drops by each snapshot taken, a snapshot that does not fit fails
//! with the csi-snapshotter's `ResourceExhausted` and is taken once a Delete snapshot frees
//! room, and a Retain snapshot's room comes back when its content is deleted.

use serde_json::Value;

use crate::support::{Cluster, table_rows};

const SOURCE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 2Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"#;

const SNAPSHOT: &str = r#"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: snap, namespace: default}
spec:
  source: {persistentVolumeClaimName: data}
"#;

const CLONE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: clone, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 2Gi}}
  dataSourceRef: {kind: PersistentVolumeClaim, name: data}
---
apiVersion: v1
kind: Pod
metadata: {name: clone-reader, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: clone}}]
"#;

/// A claim of `size` restored from `snap`, and a pod mounting it.
fn restore(name: &str, size: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: default}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: {size}}}}}
  dataSource: {{apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: snap}}
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}-reader, namespace: default}}
spec:
  containers: [{{name: main, image: busybox}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: {name}}}}}]
"#
    )
}

fn json(cluster: &Cluster, version: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&cluster.ok(version, &args)).expect("kubectl JSON")
}

/// Takes a snapshot of a written claim and restores it; returns the content's name.
fn snapshot_and_restore(cluster: &Cluster, version: &str) -> String {
    cluster.ok_stdin(version, &["apply", "-f", "-"], SOURCE);
    cluster.node_when_running(version, None, "writer");
    cluster.wait_for(
        version,
        &["get", "pvc", "data", "-o", "jsonpath={.status.phase}"],
        |out| out == "Bound",
    );
    cluster.ok_stdin(version, &["apply", "-f", "-"], SNAPSHOT);
    cluster.ok(
        version,
        &[
            "wait",
            "--for=jsonpath={.status.readyToUse}=true",
            "volumesnapshot/snap",
            "--timeout=60s",
        ],
    );

    // Upstream's printer columns.
    let table = cluster.ok(version, &["get", "volumesnapshot"]);
    let rows = table_rows(&table);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "READYTOUSE",
            "SOURCEPVC",
            "SOURCESNAPSHOTCONTENT",
            "RESTORESIZE",
            "SNAPSHOTCLASS",
            "SNAPSHOTCONTENT",
            "CREATIONTIME",
            "AGE"
        ],
        "{table}"
    );
    let snapshot = json(cluster, version, &["get", "vs", "snap"]);
    let uid = snapshot["metadata"]["uid"].as_str().expect("uid");
    let content_name = format!("snapcontent-{uid}");
    assert_eq!(snapshot["spec"]["volumeSnapshotClassName"], "tessera-local");
    assert_eq!(
        snapshot["status"]["boundVolumeSnapshotContentName"],
        content_name.as_str()
    );
    assert_eq!(snapshot["status"]["restoreSize"], "2Gi");
    assert!(snapshot["status"]["creationTime"].is_string(), "{snapshot}");
    let finalizers = snapshot["metadata"]["finalizers"].to_string();
    assert!(
        finalizers.contains("snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"),
        "{finalizers}"
    );
    assert!(
        finalizers.contains("snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"),
        "{finalizers}"
    );
    let row = rows
        .iter()
        .find(|r| r[0] == "snap")
        .expect("the snapshot's row");
    for cell in [
        "true",
        "data",
        "2Gi",
        "tessera-local",
        content_name.as_str(),
    ] {
        assert!(row.contains(&cell), "{cell} in {table}");
    }

    // The content, bound both ways, with what the sidecar recorded.
    let content = json(cluster, version, &["get", "vsc", &content_name]);
    assert_eq!(content["spec"]["volumeSnapshotRef"]["name"], "snap");
    assert_eq!(content["spec"]["volumeSnapshotRef"]["uid"], uid);
    assert_eq!(content["spec"]["driver"], "local.csi.tessera.dev");
    assert_eq!(content["spec"]["deletionPolicy"], "Delete");
    assert_eq!(content["status"]["readyToUse"], true);
    assert_eq!(content["status"]["restoreSize"], 2_147_483_648_i64);
    let handle = content["status"]["snapshotHandle"]
        .as_str()
        .expect("handle")
        .to_string();
    let source_volume = cluster.ok(
        version,
        &["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"],
    );
    let source_handle = cluster.ok(
        version,
        &[
            "get",
            "pv",
            source_volume.trim(),
            "-o",
            "jsonpath={.spec.csi.volumeHandle}",
        ],
    );
    assert_eq!(
        content["spec"]["source"]["volumeHandle"],
        source_handle.trim()
    );
    // The source claim's protection went once the snapshot was taken.
    cluster.wait_for(
        version,
        &[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.metadata.finalizers}",
        ],
        |out| !out.contains("pvc-as-source-protection"),
    );

    // Restored: the claim binds, its pod starts, the volume came from the snapshot.
    cluster.ok_stdin(version, &["apply", "-f", "-"], &restore("restored", "2Gi"));
    cluster.node_when_running(version, None, "restored-reader");
    let volume = cluster.ok(
        version,
        &[
            "get",
            "pvc",
            "restored",
            "-o",
            "jsonpath={.spec.volumeName}",
        ],
    );
    let pv = json(cluster, version, &["get", "pv", volume.trim()]);
    assert_eq!(
        pv["spec"]["csi"]["volumeAttributes"]["csi.tessera.dev/content-source"],
        format!("snapshot/{handle}").as_str(),
        "{pv}"
    );
    assert_eq!(pv["spec"]["capacity"]["storage"], "2Gi");
    content_name
}

#[test]
fn a_snapshot_is_taken_restored_and_deleted_with_kubectl_1_33() {
    const V: &str = "1.33";
    let cluster = Cluster::start();
    // The definitions and the bundled class.
    let classes = cluster.ok(V, &["get", "vsclass"]);
    let rows = table_rows(&classes);
    assert_eq!(
        rows[0],
        ["NAME", "DRIVER", "DELETIONPOLICY", "AGE"],
        "{classes}"
    );
    assert!(
        rows.iter()
            .any(|r| r[..3] == ["tessera-local", "local.csi.tessera.dev", "Delete"]),
        "{classes}"
    );
    let content_name = snapshot_and_restore(&cluster, V);

    // The events upstream's snapshot-controller records.
    let events = cluster.ok(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=VolumeSnapshot,involvedObject.name=snap",
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        ],
    );
    for wanted in [
        "CreatingSnapshot: Waiting for a snapshot default/snap to be created by the CSI driver.",
        "SnapshotCreated: Snapshot default/snap was successfully created by the CSI driver.",
        "SnapshotReady: Snapshot default/snap is ready to use.",
    ] {
        assert!(events.contains(wanted), "{wanted} in {events}");
    }

    // The official Python client lists them.
    let script = "import json, sys\nfrom kubernetes import client, config\nconfig.load_kube_config(config_file=sys.argv[1])\napi = client.CustomObjectsApi()\nlisted = api.list_namespaced_custom_object('snapshot.storage.k8s.io', 'v1', 'default', 'volumesnapshots')\nprint(json.dumps([[s['metadata']['name'], s['status']['readyToUse'], s['status']['boundVolumeSnapshotContentName']] for s in listed['items']]))\n";
    let stdout = crate::support::python(&[
        std::ffi::OsStr::new("-c"),
        std::ffi::OsStr::new(script),
        cluster.kubeconfig().as_os_str(),
    ]);
    let listed: Value = serde_json::from_slice(&stdout).expect("the script prints JSON");
    assert_eq!(
        listed,
        serde_json::json!([["snap", true, content_name.as_str()]])
    );

    // A clone of the written claim: provisioned from its volume.
    cluster.ok_stdin(V, &["apply", "-f", "-"], CLONE);
    cluster.node_when_running(V, None, "clone-reader");
    let source = cluster.ok(
        V,
        &["get", "pvc", "data", "-o", "jsonpath={.spec.volumeName}"],
    );
    let source_handle = cluster.ok(
        V,
        &[
            "get",
            "pv",
            source.trim(),
            "-o",
            "jsonpath={.spec.csi.volumeHandle}",
        ],
    );
    let volume = cluster.ok(
        V,
        &["get", "pvc", "clone", "-o", "jsonpath={.spec.volumeName}"],
    );
    let pv = json(&cluster, V, &["get", "pv", volume.trim()]);
    assert_eq!(
        pv["spec"]["csi"]["volumeAttributes"]["csi.tessera.dev/content-source"],
        format!("volume/{}", source_handle.trim()).as_str(),
        "{pv}"
    );

    // Smaller than the snapshot: Pending, with external-provisioner's message.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &restore("small", "1Gi"));
    cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=PersistentVolumeClaim,involvedObject.name=small",
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        ],
        |out| {
            out.contains("ProvisioningFailed: failed to provision volume with StorageClass \"tessera-local\": error getting handle for DataSource Type VolumeSnapshot by Name snap: requested volume size 1073741824 is less than the size 2147483648 for the source snapshot snap")
        },
    );
    assert_eq!(
        cluster
            .ok(
                V,
                &["get", "pvc", "small", "-o", "jsonpath={.status.phase}"]
            )
            .trim(),
        "Pending"
    );
    // A claim being restored holds the snapshot's deletion; once it is gone, deleting the
    // snapshot deletes its content (Delete).
    cluster.ok(V, &["delete", "pod", "small-reader", "--wait=false"]);
    cluster.ok(V, &["delete", "pvc", "small"]);
    cluster.ok(V, &["delete", "volumesnapshot", "snap", "--timeout=60s"]);
    cluster.wait_for(V, &["get", "volumesnapshotcontent", "-o", "name"], |out| {
        !out.contains(&content_name)
    });
    cluster.wait_for(V, &["get", "volumesnapshot", "-o", "name"], |out| {
        !out.contains("snap")
    });
}

const RETAINED: &str = r#"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: keep}
driver: local.csi.tessera.dev
deletionPolicy: Retain
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: kept, namespace: default}
spec:
  volumeSnapshotClassName: keep
  source: {persistentVolumeClaimName: data}
"#;

/// A pre-provisioned content of `handle` and the snapshot bound to it.
fn imported(handle: &str) -> String {
    format!(
        r#"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata: {{name: imported}}
spec:
  deletionPolicy: Retain
  driver: local.csi.tessera.dev
  source: {{snapshotHandle: {handle}}}
  volumeSnapshotRef: {{name: imported, namespace: default}}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {{name: imported, namespace: default}}
spec:
  source: {{volumeSnapshotContentName: imported}}
"#
    )
}

#[test]
fn a_snapshot_is_taken_restored_retained_and_imported_with_kubectl_1_27() {
    const V: &str = "1.27";
    let cluster = Cluster::start();
    snapshot_and_restore(&cluster, V);

    // Retain: deleting the snapshot keeps its content and the snapshot it holds.
    cluster.ok_stdin(V, &["apply", "-f", "-"], RETAINED);
    cluster.ok(
        V,
        &[
            "wait",
            "--for=jsonpath={.status.readyToUse}=true",
            "volumesnapshot/kept",
            "--timeout=60s",
        ],
    );
    let content_name = cluster.ok(
        V,
        &[
            "get",
            "vs",
            "kept",
            "-o",
            "jsonpath={.status.boundVolumeSnapshotContentName}",
        ],
    );
    let handle = cluster.ok(
        V,
        &[
            "get",
            "vsc",
            &content_name,
            "-o",
            "jsonpath={.status.snapshotHandle}",
        ],
    );
    cluster.ok(V, &["delete", "volumesnapshot", "kept", "--timeout=60s"]);
    let content = json(&cluster, V, &["get", "vsc", &content_name]);
    assert_eq!(content["spec"]["deletionPolicy"], "Retain");
    assert_eq!(
        content["metadata"]["annotations"]["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"],
        "yes",
        "{content}"
    );

    // Pre-provisioned: a content naming the retained snapshot's handle, bound both ways; the
    // driver still knows the snapshot's size.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &imported(&handle));
    cluster.ok(
        V,
        &[
            "wait",
            "--for=jsonpath={.status.readyToUse}=true",
            "volumesnapshot/imported",
            "--timeout=60s",
        ],
    );
    let snapshot = json(&cluster, V, &["get", "vs", "imported"]);
    assert_eq!(
        snapshot["status"]["boundVolumeSnapshotContentName"],
        "imported"
    );
    assert_eq!(snapshot["status"]["restoreSize"], "2Gi");
    let content = json(&cluster, V, &["get", "vsc", "imported"]);
    assert_eq!(
        content["spec"]["volumeSnapshotRef"]["uid"],
        snapshot["metadata"]["uid"]
    );
    assert_eq!(content["status"]["snapshotHandle"], handle.as_str());
}

/// A claim of `size` pinned to `node` and a pod mounting it.
fn filler(node: &str, size: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: filler, namespace: default}}
spec:
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: {size}}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: filler, namespace: default}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers: [{{name: main, image: busybox}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: filler}}}}]
"#
    )
}

/// A snapshot of the claim `data` named `name` (class `class`, else the default).
fn snapshot_named(name: &str, class: Option<&str>) -> String {
    let class = class
        .map(|c| format!("  volumeSnapshotClassName: {c}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {{name: {name}, namespace: default}}\nspec:\n{class}  source: {{persistentVolumeClaimName: data}}\n"
    )
}

/// Waits until the snapshot `name` is ready to use.
fn wait_ready(cluster: &Cluster, version: &str, name: &str) {
    let target = format!("volumesnapshot/{name}");
    cluster.ok(
        version,
        &[
            "wait",
            "--for=jsonpath={.status.readyToUse}=true",
            &target,
            "--timeout=60s",
        ],
    );
}

/// The content the snapshot `name` is bound to.
fn content_of(cluster: &Cluster, version: &str, name: &str) -> String {
    cluster
        .ok(
            version,
            &[
                "get",
                "vs",
                name,
                "-o",
                "jsonpath={.status.boundVolumeSnapshotContentName}",
            ],
        )
        .trim()
        .to_string()
}

#[test]
fn snapshots_take_their_nodes_disk_until_deleted_with_kubectl_1_33() {
    const V: &str = "1.33";
    const GI: i128 = 1 << 30;
    let cluster = Cluster::start();
    let bytes = |text: &str| -> i128 {
        text.trim()
            .parse::<tessera_model::Quantity>()
            .map(|q| q.value())
            .unwrap_or(-1)
    };
    cluster.ok_stdin(V, &["apply", "-f", "-"], SOURCE);
    let node = cluster.node_when_running(V, None, "writer");
    let disk = bytes(&cluster.ok(
        V,
        &[
            "get",
            "node",
            &node,
            "-o",
            "jsonpath={.status.capacity.ephemeral-storage}",
        ],
    ));
    assert!(disk > 10 * GI, "{node}'s disk: {disk}");
    let capacity_name = format!("csisc-tessera-local-{node}");
    let capacity = [
        "get",
        "csistoragecapacities",
        "-n",
        "kube-system",
        &capacity_name,
        "-o",
        "jsonpath={.capacity}",
    ];
    // What `kubectl get csistoragecapacities -o yaml` shows, waited for.
    let left_is = |want: i128, why: &str| {
        let out = cluster.wait_for(V, &capacity, |out| bytes(out) == want);
        assert_eq!(bytes(&out), want, "{why}: {out}");
    };
    left_is(disk - 2 * GI, "the claim's volume");

    // A snapshot (Delete) and a retained one (Retain) each take the claim's 2Gi on its node.
    cluster.ok_stdin(V, &["apply", "-f", "-"], SNAPSHOT);
    wait_ready(&cluster, V, "snap");
    let snap_content = content_of(&cluster, V, "snap");
    let handle = cluster.ok(
        V,
        &[
            "get",
            "vsc",
            snap_content.as_str(),
            "-o",
            "jsonpath={.status.snapshotHandle}",
        ],
    );
    assert!(handle.starts_with(&format!("{node}/snapshot-")), "{handle}");
    left_is(disk - 4 * GI, "a snapshot taken");
    cluster.ok_stdin(V, &["apply", "-f", "-"], RETAINED);
    wait_ready(&cluster, V, "kept");
    left_is(disk - 6 * GI, "a second snapshot taken");
    let yaml = cluster.ok(V, &[&capacity[..6], &["yaml"]].concat());
    let gi_left = (disk - 6 * GI) / GI;
    assert!(yaml.contains(&format!("capacity: {gi_left}Gi")), "{yaml}");

    // The node nearly full: a third snapshot does not fit, fails as the csi-snapshotter
    // reports it, and is taken once the first one is deleted.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        &filler(&node, &format!("{}Gi", gi_left - 1)),
    );
    assert_eq!(cluster.node_when_running(V, None, "filler"), node);
    left_is(GI, "the filler's volume");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &snapshot_named("again", None));
    let again_content = cluster.wait_for(
        V,
        &[
            "get",
            "vs",
            "again",
            "-o",
            "jsonpath={.status.boundVolumeSnapshotContentName}",
        ],
        |out| !out.is_empty(),
    );
    let exhausted = format!(
        "Failed to create snapshot: failed to take snapshot of the volume {}: \"rpc error: code = ResourceExhausted desc = requested snapshot size 2147483648 exceeds remaining capacity for \\\"{node}\\\", ",
        cluster
            .ok(
                V,
                &[
                    "get",
                    "vsc",
                    again_content.trim(),
                    "-o",
                    "jsonpath={.spec.source.volumeHandle}"
                ]
            )
            .trim()
    );
    let events = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            &format!(
                "involvedObject.kind=VolumeSnapshotContent,involvedObject.name={}",
                again_content.trim()
            ),
            "-o",
            "jsonpath={range .items[*]}{.source.component}/{.reason}: {.message}{\"\\n\"}{end}",
        ],
        |out| out.contains("SnapshotCreationFailed"),
    );
    assert!(
        events.contains(&format!(
            "csi-snapshotter local.csi.tessera.dev/SnapshotCreationFailed: {exhausted}"
        )),
        "{exhausted} in {events}"
    );
    let error = cluster.wait_for(
        V,
        &[
            "get",
            "vs",
            "again",
            "-o",
            "jsonpath={.status.readyToUse} {.status.error.message}",
        ],
        |out| out.contains("ResourceExhausted"),
    );
    assert!(error.starts_with("false "), "{error}");
    left_is(GI, "a snapshot that did not fit takes nothing");

    // Deleting the Delete-policy snapshot frees its 2Gi, which the retried one then takes.
    cluster.ok(V, &["delete", "volumesnapshot", "snap", "--timeout=60s"]);
    cluster.wait_for(V, &["get", "vsc", "-o", "name"], |out| {
        !out.contains(snap_content.as_str())
    });
    wait_ready(&cluster, V, "again");
    left_is(GI, "freed by one snapshot, taken by the other");

    // Retain: deleting the snapshot keeps its content and the room; deleting the content
    // frees it.
    let kept_content = content_of(&cluster, V, "kept");
    cluster.ok(V, &["delete", "volumesnapshot", "kept", "--timeout=60s"]);
    cluster.wait_for(
        V,
        &[
            "get",
            "vsc",
            kept_content.as_str(),
            "-o",
            "jsonpath={.metadata.annotations}",
        ],
        |out| out.contains("volumesnapshot-being-deleted"),
    );
    left_is(GI, "a retained content keeps its snapshot");
    cluster.ok(
        V,
        &["delete", "vsc", kept_content.as_str(), "--timeout=60s"],
    );
    left_is(3 * GI, "the retained content deleted");
}
