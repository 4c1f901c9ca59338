//! Table tests of the simulated drivers' provisioning and capacity bookkeeping.

use super::*;
use crate::testing::with;

fn claim(class: &str, size: &str, modes: &[&str], annotations: Value) -> Value {
    json!({
        "metadata": {"namespace": "ns", "name": "data", "uid": "u1", "resourceVersion": "7",
                     "annotations": annotations},
        "spec": {"storageClassName": class, "accessModes": modes,
                 "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"},
    })
}

fn local_volume(name: &str, node: &str, size: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "csi": {"driver": LOCAL_DRIVER, "volumeHandle": name},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": TOPOLOGY_KEY, "operator": "In", "values": [node]}]}]}}},
    })
}

fn disk(node: &str) -> Option<Quantity> {
    (node == "n1" || node == "n2").then(|| "100Gi".parse().expect("quantity"))
}

fn outcome_name(outcome: &Provisioning) -> String {
    match outcome {
        Provisioning::Skip => "skip".into(),
        Provisioning::Create { volume, .. } => format!("create {}", name(volume)),
        Provisioning::Fail { message, .. } => format!("fail {message}"),
    }
}

#[test]
fn provisioning_follows_the_claim_its_class_and_the_node() {
    let local = json!({ANN_STORAGE_PROVISIONER: LOCAL_DRIVER});
    let local_on =
        |node: &str| json!({ANN_STORAGE_PROVISIONER: LOCAL_DRIVER, ANN_SELECTED_NODE: node});
    let shared = json!({ANN_STORAGE_PROVISIONER: SHARED_DRIVER});
    let full = vec![local_volume("old", "n1", "90Gi")];
    let table: Vec<(&str, Value, Vec<Value>, &str)> = vec![
        (
            "another provisioner's claim",
            claim(
                LOCAL_CLASS,
                "1Gi",
                &["ReadWriteOnce"],
                json!({ANN_STORAGE_PROVISIONER: "other.csi"}),
            ),
            vec![],
            "skip",
        ),
        (
            "WaitForFirstConsumer without a node waits",
            claim(LOCAL_CLASS, "1Gi", &["ReadWriteOnce"], local),
            vec![],
            "skip",
        ),
        (
            "a local claim with its node is provisioned",
            claim(LOCAL_CLASS, "1Gi", &["ReadWriteOnce"], local_on("n1")),
            vec![],
            "create pvc-u1",
        ),
        (
            "its volume exists already",
            claim(LOCAL_CLASS, "1Gi", &["ReadWriteOnce"], local_on("n1")),
            vec![json!({"metadata": {"name": "pvc-u1"}})],
            "skip",
        ),
        (
            "a bound claim is left alone",
            with(
                claim(LOCAL_CLASS, "1Gi", &["ReadWriteOnce"], local_on("n1")),
                &[("/spec/volumeName", json!("pv-a"))],
            ),
            vec![],
            "skip",
        ),
        (
            "the node's disk is too full",
            claim(LOCAL_CLASS, "20Gi", &["ReadWriteOnce"], local_on("n1")),
            full.clone(),
            "fail failed to provision volume with StorageClass \"tessera-local\": rpc error: code = ResourceExhausted desc = requested capacity 21474836480 exceeds remaining capacity for \"n1\", 90Gi out of 100Gi already used",
        ),
        (
            "another node's volumes do not count",
            claim(LOCAL_CLASS, "20Gi", &["ReadWriteOnce"], local_on("n2")),
            full,
            "create pvc-u1",
        ),
        (
            "the local disk is not shared",
            claim(LOCAL_CLASS, "1Gi", &["ReadWriteMany"], local_on("n1")),
            vec![],
            "fail failed to provision volume with StorageClass \"tessera-local\": rpc error: code = InvalidArgument desc = driver local.csi.tessera.dev does not support access mode ReadWriteMany",
        ),
        (
            "a shared claim needs no node",
            claim(SHARED_CLASS, "1Ti", &["ReadWriteMany"], shared.clone()),
            vec![],
            "create pvc-u1",
        ),
        (
            "an unknown class",
            claim("gold", "1Gi", &["ReadWriteOnce"], shared),
            vec![],
            "fail storageclass.storage.k8s.io \"gold\" not found",
        ),
    ];
    for (case, claim, volumes, want) in table {
        let outcome = provision(&claim, &storage_classes(), &volumes, disk);
        assert_eq!(outcome_name(&outcome), want, "{case}");
    }
}

#[test]
fn a_local_volume_is_pinned_to_its_node_and_names_its_claim() {
    let claim = claim(
        LOCAL_CLASS,
        "5Gi",
        &["ReadWriteOnce"],
        json!({ANN_STORAGE_PROVISIONER: LOCAL_DRIVER, ANN_SELECTED_NODE: "n2"}),
    );
    let Provisioning::Create { volume, driver } = provision(&claim, &storage_classes(), &[], disk)
    else {
        panic!("provisioned");
    };
    assert_eq!(driver, LOCAL_DRIVER);
    assert_eq!(local_volume_node(&volume), Some("n2"));
    assert_eq!(volume["spec"]["capacity"]["storage"], "5Gi");
    assert_eq!(volume["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(volume["spec"]["storageClassName"], LOCAL_CLASS);
    assert_eq!(volume["spec"]["volumeMode"], "Filesystem");
    assert_eq!(volume["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(volume["spec"]["csi"]["driver"], LOCAL_DRIVER);
    assert_eq!(volume["spec"]["csi"]["volumeHandle"], "local-u1");
    assert_eq!(
        volume["metadata"]["annotations"][ANN_DYNAMICALLY_PROVISIONED],
        LOCAL_DRIVER
    );
    assert_eq!(
        volume["spec"]["claimRef"],
        json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "ns",
               "name": "data", "uid": "u1", "resourceVersion": "7"})
    );
    let events = events(&claim, &Provisioning::Create { volume, driver });
    let reasons: Vec<(&str, &str)> = events
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            (
                "Provisioning",
                "External provisioner is provisioning volume for claim \"ns/data\""
            ),
            (
                "ProvisioningSucceeded",
                "Successfully provisioned volume pvc-u1"
            ),
        ]
    );
}

#[test]
fn a_full_disk_sends_the_claim_back_to_the_scheduler() {
    let claim = claim(
        LOCAL_CLASS,
        "200Gi",
        &["ReadWriteOnce"],
        json!({ANN_STORAGE_PROVISIONER: LOCAL_DRIVER, ANN_SELECTED_NODE: "n1"}),
    );
    let Provisioning::Fail {
        reschedule: Some(reschedule),
        ..
    } = provision(&claim, &storage_classes(), &[], disk)
    else {
        panic!("rescheduled");
    };
    assert_eq!(annotation(&reschedule, ANN_SELECTED_NODE), None);
    assert_eq!(
        annotation(&reschedule, ANN_STORAGE_PROVISIONER),
        Some(LOCAL_DRIVER)
    );
}

/// A content of `driver` whose snapshot `handle` holds `bytes`, with its deletion state.
fn snapshot_content(driver: &str, handle: &str, bytes: i64, policy: &str, released: bool) -> Value {
    let mut content = json!({
        "metadata": {"name": format!("c-{handle}-{policy}-{released}")},
        "spec": {"driver": driver, "deletionPolicy": policy,
                 "source": {"volumeHandle": "local-u1"}},
        "status": {"snapshotHandle": handle, "readyToUse": true, "restoreSize": bytes},
    });
    if released {
        content["metadata"]["deletionTimestamp"] = json!("2026-01-02T03:04:05Z");
        content["metadata"]["annotations"] = json!({crate::snapshots::ANN_BEING_DELETED: "yes"});
    }
    content
}

#[test]
fn snapshots_kept_on_a_node_take_its_disk_until_deleted() {
    const GI: i64 = 1 << 30;
    let disk: Quantity = "100Gi".parse().expect("quantity");
    let volumes = vec![local_volume("a", "n1", "10Gi")];
    let ten = |policy, released| {
        snapshot_content(LOCAL_DRIVER, "n1/snapshot-k1", 10 * GI, policy, released)
    };
    let table: Vec<(&str, Vec<Value>, &str, &str)> = vec![
        ("no snapshot", vec![], "90Gi", "100Gi"),
        (
            "a snapshot on n1",
            vec![ten("Delete", false)],
            "80Gi",
            "100Gi",
        ),
        (
            "a pre-provisioned content of the same snapshot counts once",
            vec![ten("Delete", false), ten("Retain", false)],
            "80Gi",
            "100Gi",
        ),
        (
            "released with Delete: DeleteSnapshot frees it",
            vec![ten("Delete", true)],
            "90Gi",
            "100Gi",
        ),
        (
            "deleted through one content: gone for the other too",
            vec![ten("Retain", false), ten("Delete", true)],
            "90Gi",
            "100Gi",
        ),
        (
            "released with Retain: kept until the content is gone",
            vec![ten("Retain", true)],
            "80Gi",
            "100Gi",
        ),
        (
            "two snapshots, one per node",
            vec![
                ten("Delete", false),
                snapshot_content(LOCAL_DRIVER, "n2/snapshot-k2", 5 * GI, "Delete", false),
            ],
            "80Gi",
            "95Gi",
        ),
        (
            "the shared driver's pool is not a node's disk",
            vec![snapshot_content(
                SHARED_DRIVER,
                "n1/snapshot-k3",
                10 * GI,
                "Delete",
                false,
            )],
            "90Gi",
            "100Gi",
        ),
        (
            "a handle naming no node",
            vec![snapshot_content(
                LOCAL_DRIVER,
                "snapshot-k4",
                10 * GI,
                "Delete",
                false,
            )],
            "90Gi",
            "100Gi",
        ),
        (
            "not taken yet: no status",
            vec![with(
                ten("Delete", false),
                &[("/status", json!({"readyToUse": false}))],
            )],
            "90Gi",
            "100Gi",
        ),
    ];
    for (description, contents, n1, n2) in table {
        for (node, left) in [("n1", n1), ("n2", n2)] {
            let capacity = storage_capacity(LOCAL_CLASS, node, &disk, &volumes, &contents);
            assert_eq!(capacity["capacity"], left, "{description}: {node}");
        }
    }
    // The provisioner counts them too.
    let held = vec![snapshot_content(
        LOCAL_DRIVER,
        "n1/snapshot-k1",
        80 * GI,
        "Delete",
        false,
    )];
    let sources = Sources {
        contents: &held,
        ..Sources::default()
    };
    let annotations = json!({ANN_STORAGE_PROVISIONER: LOCAL_DRIVER, ANN_SELECTED_NODE: "n1"});
    let outcome = provision_from(
        &claim(LOCAL_CLASS, "20Gi", &["ReadWriteOnce"], annotations),
        &storage_classes(),
        &volumes,
        sources,
        |_| Some(disk),
    );
    assert_eq!(
        outcome_name(&outcome),
        "fail failed to provision volume with StorageClass \"tessera-local\": rpc error: code = ResourceExhausted desc = requested capacity 21474836480 exceeds remaining capacity for \"n1\", 90Gi out of 100Gi already used"
    );
}

#[test]
fn capacity_is_the_disk_left_on_each_node() {
    let disk: Quantity = "100Gi".parse().expect("quantity");
    let volumes = vec![
        local_volume("a", "n1", "10Gi"),
        local_volume("b", "n1", "30Gi"),
        local_volume("c", "n2", "50Gi"),
        // A shared volume takes nothing of a node's disk.
        json!({"metadata": {"name": "d"}, "spec": {"capacity": {"storage": "1Ti"},
               "csi": {"driver": SHARED_DRIVER}}}),
    ];
    let table = [("n1", "60Gi"), ("n2", "50Gi"), ("n3", "100Gi")];
    for (node, left) in table {
        let capacity = storage_capacity(LOCAL_CLASS, node, &disk, &volumes, &[]);
        assert_eq!(capacity["capacity"], left, "{node}");
        assert_eq!(capacity["storageClassName"], LOCAL_CLASS);
        assert_eq!(capacity["nodeTopology"]["matchLabels"][TOPOLOGY_KEY], node);
        assert_eq!(capacity["metadata"]["namespace"], CAPACITY_NAMESPACE);
    }
    let overfull = vec![local_volume("a", "n1", "200Gi")];
    assert_eq!(
        storage_capacity("fast", "n1", &disk, &overfull, &[])["capacity"],
        "0"
    );
    assert_eq!(
        storage_capacity("fast", "n1", &disk, &overfull, &[])["storageClassName"],
        "fast"
    );
    let mut classes = storage_classes();
    classes.push(json!({"metadata": {"name": "fast"}, "provisioner": LOCAL_DRIVER}));
    assert_eq!(local_classes(&classes), [LOCAL_CLASS, "fast"]);
}

#[test]
fn the_bundle_has_one_default_class_and_a_driver_for_each() {
    let classes = storage_classes();
    let default = crate::pv_controller::default_class(&classes).expect("a default class");
    assert_eq!(name(default), LOCAL_CLASS);
    assert_eq!(default["volumeBindingMode"], "WaitForFirstConsumer");
    let drivers = csi_drivers();
    for class in &classes {
        let driver = text(class, "/provisioner");
        assert!(by_name(&drivers, driver).is_some(), "{driver}");
    }
    let capacity_tracked: Vec<&str> = drivers
        .iter()
        .filter(|d| d["spec"]["storageCapacity"] == true)
        .map(name)
        .collect();
    assert_eq!(capacity_tracked, [LOCAL_DRIVER]);
    let node = csi_node("n1");
    assert_eq!(node["spec"]["drivers"][0]["nodeID"], "n1");
    assert_eq!(
        node["spec"]["drivers"][0]["topologyKeys"],
        json!([TOPOLOGY_KEY])
    );
    assert_eq!(
        node["spec"]["drivers"][0]["allocatable"]["count"],
        ATTACH_LIMIT
    );
}
