//! Kubernetes storage on the embedded platform with the real kubectl: the bundled classes
//! (`kubectl get sc` marks the local one `(default)`), a WaitForFirstConsumer claim that
//! waits for its pod, is provisioned on the pod's node by the simulated local CSI driver and
//! bound by the PV controller while the pod waits in ContainerCreating; a shared-filesystem
//! claim bound at once; reclaim (Delete deletes the volume, Retain releases it); a claim no
//! node has room for; a pod placed by hand waiting in ContainerCreating (`FailedMount`) for
//! its claim, and one whose mount fails (`tessera fault volume`); a generic ephemeral
//! volume's claim; volume expansion, and its refusal where the class does not allow it. Each
//! kind of `tessera fault volume` with the kubelet's message; secret and configMap volumes
//! holding pods until their objects exist; CSIStorageCapacities following the local classes;
//! VolumeBinding's PreBind waiting for claims and failing when provisioning fails.

use serde_json::Value;

use crate::support::{Cluster, table_rows};

/// A table's lines split into cells at runs of two or more spaces (so `ACCESS MODES` is one).
fn cells(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .collect()
        })
        .collect()
}

/// Runs `tessera` against the cluster; it must succeed.
fn tessera(cluster: &Cluster, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .output()
        .expect("run tessera");
    assert!(
        output.status.success(),
        "tessera {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json(cluster: &Cluster, version: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&cluster.ok(version, &args)).expect("kubectl JSON")
}

/// The events about an object of `kind` named `name` in `namespace`, as "reason: message".
fn events(cluster: &Cluster, version: &str, namespace: &str, kind: &str, name: &str) -> String {
    let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
    let list = json(
        cluster,
        version,
        &[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            &selector,
        ],
    );
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}: {}\n",
                e["reason"].as_str().unwrap_or_default(),
                e["message"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn wait_for_event(
    cluster: &Cluster,
    version: &str,
    namespace: &str,
    kind: &str,
    name: &str,
    wanted: &str,
) -> String {
    let selector = format!("involvedObject.kind={kind},involvedObject.name={name}");
    cluster.wait_for(
        version,
        &[
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}",
        ],
        |out| out.contains(wanted),
    );
    events(cluster, version, namespace, kind, name)
}

const WAITING_CLAIM: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 10Gi}}
"#;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
"#;

#[test]
fn a_wait_for_first_consumer_claim_binds_on_its_pods_node() {
    const V: &str = "1.33";
    let cluster = Cluster::start();
    // The bundled classes, the local one the default.
    let classes = cluster.ok(V, &["get", "sc"]);
    let rows = table_rows(&classes);
    assert_eq!(
        rows[0],
        [
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE"
        ],
        "{classes}"
    );
    let local = rows
        .iter()
        .find(|r| r[0] == "tessera-local")
        .expect("the local class");
    assert_eq!(
        local[1..5],
        [
            "(default)",
            "local.csi.tessera.dev",
            "Delete",
            "WaitForFirstConsumer"
        ][..],
        "{classes}"
    );
    assert!(classes.contains("shared.csi.tessera.dev"), "{classes}");
    assert!(classes.contains("object.csi.tessera.dev"), "{classes}");
    // Each node has its CSINode (its three drivers) and its local capacity; the twins
    // register their CSINodes after the API server answers, so wait for them.
    let cpu_1_has_three = |table: &str| {
        cells(table)
            .iter()
            .any(|r| r.get(..2) == Some(&["cpu-1", "3"][..]))
    };
    let csinodes = cluster.wait_for(V, &["get", "csinodes"], cpu_1_has_three);
    assert!(cpu_1_has_three(&csinodes), "{csinodes}");
    let capacities = cluster.wait_for(
        V,
        &["get", "csistoragecapacities", "-n", "kube-system"],
        |out| out.contains("csisc-tessera-local-cpu-1"),
    );
    let rows = cells(&capacities);
    assert_eq!(
        rows[0],
        ["NAME", "STORAGECLASSNAME", "CAPACITY", "AGE"],
        "{capacities}"
    );
    let cpu = rows
        .iter()
        .find(|r| r[0] == "csisc-tessera-local-cpu-1")
        .expect("cpu-1's capacity");
    // The cpu pool's nodes have 200Gi of ephemeral storage, all free.
    assert_eq!(cpu[1..3], ["tessera-local", "200Gi"][..], "{capacities}");
    let drivers = cluster.ok(V, &["get", "csidrivers"]);
    let drivers = cells(&drivers);
    assert_eq!(
        drivers[0][..7],
        [
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES"
        ][..]
    );
    let local_driver = drivers
        .iter()
        .find(|r| r[0] == "local.csi.tessera.dev")
        .expect("the local driver");
    assert_eq!(
        local_driver[1..7],
        ["false", "false", "true", "<unset>", "false", "Persistent"][..]
    );

    // Without a pod the claim waits, with the default class assigned.
    cluster.ok_stdin(V, &["apply", "-f", "-"], WAITING_CLAIM);
    let waiting = wait_for_event(
        &cluster,
        V,
        "default",
        "PersistentVolumeClaim",
        "data",
        "WaitForFirstConsumer",
    );
    assert!(
        waiting.contains("waiting for first consumer to be created before binding"),
        "{waiting}"
    );
    let claim = json(&cluster, V, &["get", "pvc", "data"]);
    assert_eq!(claim["spec"]["storageClassName"], "tessera-local");
    assert_eq!(claim["status"]["phase"], "Pending");

    // The pod lands somewhere; the claim is provisioned there and bound; the pod runs.
    cluster.ok_stdin(V, &["apply", "-f", "-"], POD);
    let node = cluster.node_when_running(V, None, "trainer");
    let claim = json(&cluster, V, &["get", "pvc", "data"]);
    assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    assert_eq!(
        claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        node.as_str()
    );
    let volume_name = claim["spec"]["volumeName"]
        .as_str()
        .expect("a volume")
        .to_string();
    let volume = json(&cluster, V, &["get", "pv", &volume_name]);
    assert_eq!(
        volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            [0],
        node.as_str(),
        "{volume}"
    );
    assert_eq!(volume["spec"]["csi"]["driver"], "local.csi.tessera.dev");
    assert_eq!(
        volume["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "local.csi.tessera.dev"
    );
    let provisioned = events(&cluster, V, "default", "PersistentVolumeClaim", "data");
    assert!(
        provisioned.contains(&format!(
            "ProvisioningSucceeded: Successfully provisioned volume {volume_name}"
        )),
        "{provisioned}"
    );
    let table = cluster.ok(V, &["get", "pvc", "data"]);
    let rows = cells(&table);
    assert_eq!(
        rows[0][..7],
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS"
        ][..],
        "{table}"
    );
    assert_eq!(
        rows[1][..6],
        [
            "data",
            "Bound",
            volume_name.as_str(),
            "10Gi",
            "RWO",
            "tessera-local"
        ][..],
        "{table}"
    );
    // The node's capacity shrank by the volume.
    let capacity = json(
        &cluster,
        V,
        &[
            "get",
            "csistoragecapacity",
            "-n",
            "kube-system",
            &format!("csisc-tessera-local-{node}"),
        ],
    );
    let spec = json(&cluster, V, &["get", "node", &node]);
    let disk = spec["status"]["capacity"]["ephemeral-storage"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(
        capacity["capacity"].as_str(),
        Some(disk.as_str()),
        "{capacity}"
    );

    // Expansion: the local class allows it; the resizer grows the volume and the kubelet the
    // filesystem under the running pod.
    cluster.ok(
        V,
        &[
            "patch",
            "pvc",
            "data",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"20Gi"}}}}"#,
        ],
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "pvc",
            "data",
            "-o",
            "jsonpath={.status.capacity.storage}",
        ],
        |out| out == "20Gi",
    );
    let volume = json(&cluster, V, &["get", "pv", &volume_name]);
    assert_eq!(volume["spec"]["capacity"]["storage"], "20Gi");
    let claim = json(&cluster, V, &["get", "pvc", "data"]);
    assert_eq!(claim["status"]["allocatedResources"]["storage"], "20Gi");
    assert!(
        claim["status"]["allocatedResourceStatuses"].is_null(),
        "{claim}"
    );
    let resized = events(&cluster, V, "default", "PersistentVolumeClaim", "data");
    assert!(
        resized.contains(&format!(
            "Resizing: External resizer is resizing volume {volume_name}"
        )),
        "{resized}"
    );
    assert!(resized.contains("FileSystemResizeRequired"), "{resized}");
    let pod_events = wait_for_event(
        &cluster,
        V,
        "default",
        "Pod",
        "trainer",
        "FileSystemResizeSuccessful",
    );
    assert!(
        pod_events.contains(&format!(
            "MountVolume.NodeExpandVolume succeeded for volume \"{volume_name}\" {node}"
        )),
        "{pod_events}"
    );

    // Reclaim Delete: the claim gone, the volume goes.
    cluster.ok(V, &["delete", "pod", "trainer", "--wait=true"]);
    cluster.ok(V, &["delete", "pvc", "data"]);
    cluster.wait_for(V, &["get", "pv", "-o", "name"], |out| {
        !out.contains(&volume_name)
    });
}

const SHARED_CLAIM: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared, namespace: default}
spec:
  storageClassName: tessera-shared
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Ti}}
"#;

const RETAINED: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata: {name: archive}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: manual
  hostPath: {path: /srv/archive}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: archive, namespace: default}
spec:
  storageClassName: manual
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 5Gi}}
"#;

const LATE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: late, namespace: default}
spec:
  storageClassName: manual
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: early, namespace: default}
spec:
  nodeName: cpu-1
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: late}}]
"#;

const LATE_VOLUME: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata: {name: late}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: manual
  hostPath: {path: /srv/late}
"#;

const OBJECT_CLAIM: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bucket, namespace: default}
spec:
  storageClassName: tessera-object
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Ti}}
"#;

const EPHEMERAL: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: scratcher, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes:
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec:
          storageClassName: tessera-shared
          accessModes: [ReadWriteOnce]
          resources: {requests: {storage: 1Gi}}
"#;

const MOUNTER: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: mounted, namespace: default}
spec:
  storageClassName: tessera-shared
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: mounter, namespace: default}
spec:
  nodeName: cpu-2
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: mounted}}]
"#;

const HUGE: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: huge, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 50Ti}}
---
apiVersion: v1
kind: Pod
metadata: {name: hoarder, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: huge}}]
"#;

#[test]
fn shared_claims_bind_at_once_retained_volumes_are_released_and_huge_ones_wait() {
    const V: &str = "1.27";
    let cluster = Cluster::start();
    // ReadWriteMany on the shared filesystem: Immediate, bound without a pod.
    cluster.ok_stdin(V, &["apply", "-f", "-"], SHARED_CLAIM);
    let table = cluster.wait_for(V, &["get", "pvc", "shared"], |out| out.contains("Bound"));
    let rows = cells(&table);
    assert_eq!(
        rows[0][..6],
        [
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS MODES",
            "STORAGECLASS"
        ][..],
        "{table}"
    );
    assert_eq!(rows[1][1], "Bound", "{table}");
    assert!(rows[1][2].starts_with("pvc-"), "{table}");
    assert_eq!(
        rows[1][3..6],
        ["1Ti", "RWX", "tessera-shared"][..],
        "{table}"
    );
    let volume = json(&cluster, V, &["get", "pv", rows[1][2]]);
    assert!(volume["spec"]["nodeAffinity"].is_null(), "{volume}");

    // A static volume with Retain: bound to its claim, Released once the claim is gone.
    cluster.ok_stdin(V, &["apply", "-f", "-"], RETAINED);
    cluster.wait_for(V, &["get", "pvc", "archive"], |out| {
        out.contains("Bound") && out.contains("archive")
    });
    cluster.ok(V, &["delete", "pvc", "archive"]);
    let released = cluster.wait_for(V, &["get", "pv", "archive"], |out| out.contains("Released"));
    assert!(released.contains("default/archive"), "{released}");

    // A pod placed by hand waits in ContainerCreating until its claim is bound.
    cluster.ok_stdin(V, &["apply", "-f", "-"], LATE);
    let waiting = wait_for_event(&cluster, V, "default", "Pod", "early", "FailedMount");
    assert!(
        waiting.contains(
            "FailedMount: Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]"
        ),
        "{waiting}"
    );
    let pod = cluster.ok(V, &["get", "pod", "early"]);
    assert!(pod.contains("ContainerCreating"), "{pod}");
    cluster.ok_stdin(V, &["apply", "-f", "-"], LATE_VOLUME);
    assert_eq!(cluster.node_when_running(V, None, "early"), "cpu-1");

    // A generic ephemeral volume: its claim is created for the pod, owned by it, and bound.
    cluster.ok_stdin(V, &["apply", "-f", "-"], EPHEMERAL);
    cluster.node_when_running(V, None, "scratcher");
    let claim = json(&cluster, V, &["get", "pvc", "scratcher-scratch"]);
    assert_eq!(claim["status"]["phase"], "Bound", "{claim}");
    assert_eq!(claim["metadata"]["ownerReferences"][0]["name"], "scratcher");
    assert_eq!(claim["spec"]["storageClassName"], "tessera-shared");

    // `tessera fault volume`: mounts fail on cpu-2, a pod with a bound claim waits there
    // with the kubelet's FailedMount, and runs once the fault is cleared.
    tessera(&cluster, &["fault", "volume", "cpu-2"]);
    cluster.ok_stdin(V, &["apply", "-f", "-"], MOUNTER);
    let failed = wait_for_event(
        &cluster,
        V,
        "default",
        "Pod",
        "mounter",
        "MountVolume.SetUp failed",
    );
    let bound = json(&cluster, V, &["get", "pvc", "mounted"]);
    let volume = bound["spec"]["volumeName"].as_str().unwrap_or_default();
    assert!(
        failed.contains(&format!(
            "FailedMount: MountVolume.SetUp failed for volume \"{volume}\" : rpc error: code = Internal desc = mount failed: exit status 32"
        )),
        "{failed}"
    );
    assert!(
        cluster
            .ok(V, &["get", "pod", "mounter"])
            .contains("ContainerCreating"),
        "the pod waits for its mount"
    );
    tessera(&cluster, &["fault", "clear", "cpu-2", "--volume"]);
    assert_eq!(cluster.node_when_running(V, None, "mounter"), "cpu-2");

    // The object store's class does not allow expansion: the API refuses it.
    cluster.ok_stdin(V, &["apply", "-f", "-"], OBJECT_CLAIM);
    cluster.wait_for(V, &["get", "pvc", "bucket"], |out| out.contains("Bound"));
    let refused = cluster.fails(
        V,
        &[
            "patch",
            "pvc",
            "bucket",
            "-p",
            r#"{"spec":{"resources":{"requests":{"storage":"2Ti"}}}}"#,
        ],
        None,
    );
    assert!(
        refused.contains(
            "persistentvolumeclaims \"bucket\" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
        ),
        "{refused}"
    );

    // No node has 50Ti of local disk: the pod stays Pending with the volume reason.
    cluster.ok_stdin(V, &["apply", "-f", "-"], HUGE);
    let failed = wait_for_event(
        &cluster,
        V,
        "default",
        "Pod",
        "hoarder",
        "did not have enough free storage",
    );
    assert!(
        failed.contains("FailedScheduling: 0/8 nodes are available"),
        "{failed}"
    );
    let pod = json(&cluster, V, &["get", "pod", "hoarder"]);
    assert_eq!(pod["status"]["phase"], "Pending");
    assert!(pod["spec"]["nodeName"].is_null(), "{pod}");
    let claim = json(&cluster, V, &["get", "pvc", "huge"]);
    assert_eq!(claim["status"]["phase"], "Pending");
    // `tessera explain pod` names the volume verdict.
    let explained = tessera(&cluster, &["explain", "pod", "default/hoarder"]);
    assert!(
        explained.contains("VolumeBinding: node(s) did not have enough free storage"),
        "{explained}"
    );
}

const FAULTED: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: faulted, namespace: default}
spec:
  storageClassName: tessera-shared
  accessModes: [ReadWriteMany]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: faulted, namespace: default}
spec:
  nodeName: cpu-2
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: faulted}}]
"#;

/// Each `--kind` of `tessera fault volume` fails the pod's CSI mount with the kubelet's
/// message for it; changing the kind changes the event; clearing lets the pod start.
#[test]
fn volume_fault_kinds_fail_mounts_with_the_kubelets_messages() {
    const V: &str = "1.33";
    let cluster = Cluster::start();
    let said = tessera(
        &cluster,
        &["fault", "volume", "cpu-2", "--kind", "permission"],
    );
    assert_eq!(said, "volume mounts fail on cpu-2 (permission)\n");
    let node = json(&cluster, V, &["get", "node", "cpu-2"]);
    assert_eq!(
        node["metadata"]["annotations"]["fault.tessera.dev/volume"],
        "permission"
    );
    // An unknown kind is refused before anything is written.
    let refused = cluster.tessera(&["fault", "volume", "cpu-2", "--kind", "flooded"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("invalid value 'flooded' for '--kind"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );

    cluster.ok_stdin(V, &["apply", "-f", "-"], FAULTED);
    let failed = wait_for_event(
        &cluster,
        V,
        "default",
        "Pod",
        "faulted",
        "permission denied",
    );
    let claim = json(&cluster, V, &["get", "pvc", "faulted"]);
    let volume = claim["spec"]["volumeName"].as_str().unwrap_or_default();
    assert!(volume.starts_with("pvc-"), "{claim}");
    let pod = json(&cluster, V, &["get", "pod", "faulted"]);
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let dir = format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/{volume}");
    assert!(
        failed.contains(&format!(
            "FailedMount: MountVolume.SetUp failed for volume \"{volume}\" : kubernetes.io/csi: mounter.SetUpAt failed to create dir \"{dir}\":  mkdir {dir}: permission denied"
        )),
        "{failed}"
    );
    assert!(
        cluster
            .ok(V, &["get", "pod", "faulted"])
            .contains("ContainerCreating"),
        "the pod waits for its mount"
    );

    // Another kind: the waiting pod gets that failure's event.
    let kinds = [
        (
            "full-disk",
            format!(
                "kubernetes.io/csi: mounter.SetUpAt failed to save volume info data: kubernetes.io/csi: failed to save volume data file {dir}/vol_data.json: open {dir}/vol_data.json: no space left on device"
            ),
        ),
        (
            "stale-data",
            format!("rpc error: code = Internal desc = stat {dir}/mount: stale NFS file handle"),
        ),
        (
            "missing-secret",
            "fetching NodePublishSecretRef default/csi-node-publish-secret failed: kubernetes.io/csi: failed to find the secret csi-node-publish-secret in the namespace default with error: secrets \"csi-node-publish-secret\" not found".to_string(),
        ),
    ];
    for (kind, error) in kinds {
        tessera(&cluster, &["fault", "volume", "cpu-2", "--kind", kind]);
        let message = format!("MountVolume.SetUp failed for volume \"{volume}\" : {error}");
        let failed = wait_for_event(&cluster, V, "default", "Pod", "faulted", &message);
        assert!(
            failed.contains(&format!("FailedMount: {message}")),
            "{failed}"
        );
        assert_eq!(
            json(&cluster, V, &["get", "pod", "faulted"])["status"]["phase"],
            "Pending",
            "{kind}: the pod waits for its mount"
        );
    }
    let described = cluster.ok(V, &["describe", "pod", "faulted"]);
    assert!(described.contains("ContainerCreating"), "{described}");
    assert!(described.contains("FailedMount"), "{described}");

    tessera(&cluster, &["fault", "clear", "cpu-2", "--volume"]);
    assert_eq!(cluster.node_when_running(V, None, "faulted"), "cpu-2");
}

const SOURCES: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: configured, namespace: default}
spec:
  containers: [{name: main, image: busybox}]
  volumes:
  - {name: creds, secret: {secretName: db}}
  - {name: settings, configMap: {name: app}}
  - {name: maybe, secret: {secretName: extra, optional: true}}
  - name: bundle
    projected:
      sources:
      - secret: {name: db}
      - configMap: {name: app}
"#;

const DB_SECRET: &str = r#"
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: default}
stringData: {password: hunter2}
"#;

const APP_CONFIG: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: default}
data: {mode: fast}
"#;

const FAST_CLASS: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast-local}
provisioner: local.csi.tessera.dev
volumeBindingMode: WaitForFirstConsumer
"#;

/// The kubelet's secret, configMap and projected volumes: a pod naming objects that do not
/// exist waits in ContainerCreating with upstream's `FailedMount` messages (an optional one
/// is no failure) and starts once they are created. And external-provisioner's capacity
/// objects follow the local driver's classes: published for a new class, deleted with it,
/// published again when it comes back.
#[test]
fn missing_secrets_and_config_maps_hold_pods_and_capacity_follows_classes() {
    for version in ["1.33", "1.29"] {
        let cluster = Cluster::start();
        let v = version;
        cluster.ok_stdin(v, &["apply", "-f", "-"], SOURCES);
        let failed = wait_for_event(
            &cluster,
            v,
            "default",
            "Pod",
            "configured",
            "configmap \"app\" not found",
        );
        for message in [
            "FailedMount: MountVolume.SetUp failed for volume \"creds\" : secret \"db\" not found",
            "FailedMount: MountVolume.SetUp failed for volume \"settings\" : configmap \"app\" not found",
            "FailedMount: MountVolume.SetUp failed for volume \"bundle\" : [secret \"db\" not found, configmap \"app\" not found]",
        ] {
            assert!(failed.contains(message), "{version}: {message}\n{failed}");
        }
        assert!(
            !failed.contains("\"maybe\""),
            "{version}: optional\n{failed}"
        );
        assert!(
            cluster
                .ok(v, &["get", "pod", "configured"])
                .contains("ContainerCreating"),
            "{version}: the pod waits for its volumes"
        );
        // The secret alone is not enough.
        cluster.ok_stdin(v, &["apply", "-f", "-"], DB_SECRET);
        let failed = wait_for_event(
            &cluster,
            v,
            "default",
            "Pod",
            "configured",
            "volume \"bundle\" : configmap \"app\" not found",
        );
        assert!(failed.contains("FailedMount"), "{version}: {failed}");
        assert_eq!(
            json(&cluster, v, &["get", "pod", "configured"])["status"]["phase"],
            "Pending",
            "{version}"
        );
        cluster.ok_stdin(v, &["apply", "-f", "-"], APP_CONFIG);
        cluster.node_when_running(v, None, "configured");

        // Capacity: a second local class gets an object per node; deleting the class deletes
        // them; recreating it publishes them again.
        let list = ["get", "csistoragecapacities", "-n", "kube-system"];
        cluster.wait_for(v, &list, |out| out.contains("csisc-tessera-local-cpu-1"));
        cluster.ok_stdin(v, &["apply", "-f", "-"], FAST_CLASS);
        // The controller publishes node by node: wait until the new class covers every node
        // the default class covers.
        let published = cluster.wait_for(v, &list, |out| {
            capacity_nodes(out, "fast-local") == capacity_nodes(out, "tessera-local")
        });
        assert!(
            published.contains("csisc-fast-local-cpu-2"),
            "{version}: {published}"
        );
        cluster.ok(v, &["delete", "storageclass", "fast-local"]);
        let cleaned = cluster.wait_for(v, &list, |out| !out.contains("csisc-fast-local"));
        assert!(
            cleaned.contains("csisc-tessera-local-cpu-1"),
            "{version}: the default class keeps its capacity\n{cleaned}"
        );
        cluster.ok_stdin(v, &["apply", "-f", "-"], FAST_CLASS);
        cluster.wait_for(v, &list, |out| out.contains("csisc-fast-local-cpu-1"));
    }
}

/// The nodes named by a `get csistoragecapacities` listing's objects of one class.
fn capacity_nodes<'a>(listing: &'a str, class: &str) -> std::collections::BTreeSet<&'a str> {
    let prefix = format!("csisc-{class}-");
    listing
        .lines()
        .filter_map(|line| {
            line.split_whitespace()
                .next()?
                .strip_prefix(prefix.as_str())
        })
        .collect()
}

const PINNED: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pinned, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 5Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: cpu-2}
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: pinned}}]
"#;

const OVERSOLD: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: oversold, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 50Ti}}
---
apiVersion: v1
kind: Pod
metadata: {name: oversold, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: cpu-1}
  containers: [{name: main, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: oversold}}]
"#;

/// VolumeBinding's PreBind waits for the claims: a pod is bound to its node only once the
/// claim it asked to provision there is bound; when the provisioner fails and sends the claim
/// back (a stale capacity promised room the disk does not have), the binding cycle fails with
/// upstream's `FailedScheduling` and the pod stays unbound.
#[test]
fn prebind_waits_for_claims_and_fails_when_provisioning_fails() {
    let cluster = Cluster::start();
    for v in ["1.33", "1.30"] {
        cluster.ok_stdin(v, &["apply", "-f", "-"], PINNED);
        // Bound to its node only after its claim is bound.
        cluster.wait_for(
            v,
            &["get", "pod", "pinned", "-o", "jsonpath={.spec.nodeName}"],
            |out| out == "cpu-2",
        );
        let claim = json(&cluster, v, &["get", "pvc", "pinned"]);
        assert!(
            claim["spec"]["volumeName"]
                .as_str()
                .is_some_and(|v| v.starts_with("pvc-")),
            "{v}: {claim}"
        );
        assert!(
            claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"].is_string(),
            "{v}: {claim}"
        );
        cluster.node_when_running(v, None, "pinned");
        cluster.ok(v, &["delete", "pod", "pinned", "--wait=true"]);
        cluster.ok(v, &["delete", "pvc", "pinned", "--wait=true"]);
    }

    // cpu-1's capacity claims far more room than its disk has: the scheduler picks it, the
    // provisioner fails and removes selected-node, and the binding cycle fails.
    const V: &str = "1.33";
    cluster.wait_for(
        V,
        &["get", "csistoragecapacities", "-n", "kube-system"],
        |out| out.contains("csisc-tessera-local-cpu-1"),
    );
    cluster.ok(
        V,
        &[
            "patch",
            "csistoragecapacity",
            "csisc-tessera-local-cpu-1",
            "-n",
            "kube-system",
            "--type",
            "merge",
            "-p",
            r#"{"capacity":"100Ti"}"#,
        ],
    );
    cluster.ok_stdin(V, &["apply", "-f", "-"], OVERSOLD);
    let failed = wait_for_event(
        &cluster,
        V,
        "default",
        "Pod",
        "oversold",
        "running PreBind plugin",
    );
    assert!(
        failed.contains(
            "FailedScheduling: running PreBind plugin \"VolumeBinding\": binding volumes: provisioning failed for PVC \"oversold\""
        ),
        "{failed}"
    );
    let provisioning = events(&cluster, V, "default", "PersistentVolumeClaim", "oversold");
    assert!(
        provisioning.contains("ProvisioningFailed"),
        "{provisioning}"
    );
    let pod = json(&cluster, "1.30", &["get", "pod", "oversold"]);
    assert!(pod["spec"]["nodeName"].is_null(), "never bound: {pod}");
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    let claim = json(&cluster, "1.30", &["get", "pvc", "oversold"]);
    assert_eq!(claim["status"]["phase"], "Pending", "{claim}");
}

/// A gang whose claims wait for a provisioner (none runs for its class) does not hold up the
/// scheduling pass: its binding cycles wait past the pass, as a single pod's do, and a pod
/// created after it is bound meanwhile.
#[test]
fn a_gang_waiting_for_its_volumes_does_not_hold_up_other_pods() {
    let cluster = Cluster::start();
    const V: &str = "1.33";
    cluster.ok_stdin(V, &["apply", "-f", "-"], GANG_WAITING_FOR_VOLUMES);
    for claim in ["gang-0", "gang-1"] {
        cluster.wait_for(
            V,
            &[
                "get",
                "pvc",
                claim,
                "-o",
                r"jsonpath={.metadata.annotations.volume\.kubernetes\.io/selected-node}",
            ],
            |out| !out.is_empty(),
        );
    }
    cluster.ok_stdin(V, &["apply", "-f", "-"], LATECOMER);
    cluster.wait_for(
        V,
        &["get", "pod", "latecomer", "-o", "jsonpath={.spec.nodeName}"],
        |out| !out.is_empty(),
    );
    for pod in ["gang-0", "gang-1"] {
        let pod = json(&cluster, V, &["get", "pod", pod]);
        assert!(pod["spec"]["nodeName"].is_null(), "still waiting: {pod}");
    }
    let claim = json(&cluster, V, &["get", "pvc", "gang-0"]);
    assert_eq!(claim["status"]["phase"], "Pending", "{claim}");
}

const GANG_WAITING_FOR_VOLUMES: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nobody-provisions}
provisioner: example.com/absent
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: gang-0, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: nobody-provisions, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: gang-1, namespace: default}
spec: {accessModes: [ReadWriteOnce], storageClassName: nobody-provisions, resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: gang-0, namespace: default, labels: {scheduling.x-k8s.io/pod-group: vols}}
spec:
  containers: [{name: w, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: gang-0}}]
---
apiVersion: v1
kind: Pod
metadata: {name: gang-1, namespace: default, labels: {scheduling.x-k8s.io/pod-group: vols}}
spec:
  containers: [{name: w, image: busybox}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: gang-1}}]
"#;

const LATECOMER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: latecomer, namespace: default}
spec:
  containers: [{name: w, image: busybox}]
"#;
