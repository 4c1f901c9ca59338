//! Table tests after upstream's `binder_test.go` (`TestFindPodVolumesWithoutProvisioning`,
//! `TestFindPodVolumesWithProvisioning`, `TestCapacity`, `TestAssumePodVolumes`).

use serde_json::json;

use super::*;
use crate::testing::with;

const NODE1: &str = "node1";

fn node(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": "z1"}}})
}

fn local_volume(name: &str, size: &str, class: &str, host: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "persistentVolumeReclaimPolicy": "Retain",
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}]}]}}},
        "status": {"phase": "Available"}
    })
}

fn claim(name: &str, size: &str, class: &str) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "testns", "uid": format!("uid-{name}")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "storageClassName": class},
        "status": {"phase": "Pending"}
    })
}

fn bound(claim: Value, volume: &str) -> Value {
    with(
        claim,
        &[
            ("/spec/volumeName", json!(volume)),
            (
                "/metadata/annotations",
                json!({"pv.kubernetes.io/bind-completed": "yes"}),
            ),
            ("/status/phase", json!("Bound")),
        ],
    )
}

fn pod(claims: &[&str]) -> Value {
    let volumes: Vec<Value> = claims
        .iter()
        .map(|c| json!({"name": format!("vol-{c}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    json!({"metadata": {"name": "pod", "namespace": "testns", "uid": "pod-uid"},
           "spec": {"volumes": volumes}})
}

fn classes() -> Vec<Value> {
    let class = |name: &str, provisioner: &str, mode: &str| json!({"metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode});
    vec![
        class(
            "wait",
            "kubernetes.io/no-provisioner",
            "WaitForFirstConsumer",
        ),
        class("immediate", "kubernetes.io/no-provisioner", "Immediate"),
        class(
            "wait-provisioned",
            "test-provisioner",
            "WaitForFirstConsumer",
        ),
        with(
            class("wait-topology", "test-provisioner", "WaitForFirstConsumer"),
            &[(
                "/allowedTopologies",
                json!([{"matchLabelExpressions": [{"key": "zone", "values": ["z2"]}]}]),
            )],
        ),
    ]
}

struct World {
    claims: Vec<Value>,
    volumes: Vec<Value>,
    classes: Vec<Value>,
    drivers: Vec<Value>,
    capacities: Vec<Value>,
}

impl World {
    fn new(claims: Vec<Value>, volumes: Vec<Value>) -> World {
        World {
            claims,
            volumes,
            classes: classes(),
            drivers: vec![],
            capacities: vec![],
        }
    }

    fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            claims: &self.claims,
            volumes: &self.volumes,
            classes: &self.classes,
            csi_drivers: &self.drivers,
            capacities: &self.capacities,
        }
    }
}

/// What a case expects: a PreFilter rejection, or the node's reasons with the bindings
/// (volume ← claim) and the claims to provision.
enum Want {
    Skip,
    Unschedulable(&'static str),
    Node(
        Vec<&'static str>,
        Vec<(&'static str, &'static str)>,
        Vec<&'static str>,
    ),
}

fn check(case: &str, pod: &Value, world: &World, want: Want) {
    let snapshot = world.snapshot();
    let pre = pre_filter(pod, snapshot).unwrap_or_else(|e| panic!("{case}: {e}"));
    match (pre, want) {
        (PreFilter::Skip, Want::Skip) => {}
        (PreFilter::Unschedulable(got), Want::Unschedulable(reason)) => {
            assert_eq!(got, reason, "{case}")
        }
        (PreFilter::Claims(claims), Want::Node(reasons, bindings, provisions)) => {
            let found =
                filter(&claims, &node(NODE1), snapshot).unwrap_or_else(|e| panic!("{case}: {e}"));
            assert_eq!(found.reasons, reasons, "{case}: reasons");
            if reasons.is_empty() {
                let got: Vec<(&str, &str)> = found
                    .static_bindings
                    .iter()
                    .map(|(v, c)| (name(v), name(c)))
                    .collect();
                assert_eq!(got, bindings, "{case}: bindings");
                let got: Vec<&str> = found.dynamic_provisions.iter().map(|c| name(c)).collect();
                assert_eq!(got, provisions, "{case}: provisions");
            }
        }
        (got, _) => panic!("{case}: unexpected {got:?}"),
    }
}

#[test]
fn find_pod_volumes_without_provisioning() {
    let pv_node1a = || local_volume("pv-node1a", "5G", "wait", NODE1);
    let pv_node1b = || local_volume("pv-node1b", "10G", "wait", NODE1);
    let pv_node2 = || local_volume("pv-node2", "1G", "wait", "node2");
    let unbound = || claim("unbound-pvc", "1G", "wait");
    let unbound2 = || claim("unbound-pvc2", "5G", "wait");
    let table: Vec<(&str, Value, World, Want)> = vec![
        (
            "no-volumes",
            json!({"metadata": {"name": "pod", "namespace": "testns"}, "spec": {}}),
            World::new(vec![], vec![]),
            Want::Skip,
        ),
        (
            "bound-pvc",
            pod(&["bound-pvc"]),
            World::new(
                vec![bound(claim("bound-pvc", "1G", "wait"), "pv-node1a")],
                vec![pv_node1a()],
            ),
            Want::Node(vec![], vec![], vec![]),
        ),
        (
            "bound-pvc,pv-not-exists",
            pod(&["bound-pvc"]),
            World::new(
                vec![bound(claim("bound-pvc", "1G", "wait"), "pv-gone")],
                vec![],
            ),
            Want::Node(vec![REASON_PV_NOT_EXIST], vec![], vec![]),
        ),
        (
            "bound-pvc,node-mismatch",
            pod(&["bound-pvc"]),
            World::new(
                vec![bound(claim("bound-pvc", "1G", "wait"), "pv-node2")],
                vec![pv_node2()],
            ),
            Want::Node(vec![REASON_NODE_CONFLICT], vec![], vec![]),
        ),
        (
            "prebound-pvc",
            pod(&["prebound-pvc"]),
            World::new(
                vec![with(
                    claim("prebound-pvc", "1G", "wait"),
                    &[("/spec/volumeName", json!("pv-node1a"))],
                )],
                vec![pv_node1a()],
            ),
            Want::Unschedulable(REASON_UNBOUND_IMMEDIATE),
        ),
        (
            "immediate-unbound-pvc",
            pod(&["immediate-pvc"]),
            World::new(vec![claim("immediate-pvc", "1G", "immediate")], vec![]),
            Want::Unschedulable(REASON_UNBOUND_IMMEDIATE),
        ),
        (
            "pvc-not-found",
            pod(&["missing"]),
            World::new(vec![], vec![]),
            Want::Unschedulable("persistentvolumeclaim \"missing\" not found"),
        ),
        (
            "pvc-lost",
            pod(&["lost"]),
            World::new(
                vec![with(
                    claim("lost", "1G", "wait"),
                    &[
                        ("/status/phase", json!("Lost")),
                        ("/spec/volumeName", json!("pv-x")),
                    ],
                )],
                vec![],
            ),
            Want::Unschedulable(
                "persistentvolumeclaim \"lost\" bound to non-existent persistentvolume \"pv-x\"",
            ),
        ),
        (
            "pvc-deleting",
            pod(&["deleting"]),
            World::new(
                vec![with(
                    claim("deleting", "1G", "wait"),
                    &[("/metadata/deletionTimestamp", json!("2026-01-01T00:00:00Z"))],
                )],
                vec![],
            ),
            Want::Unschedulable("persistentvolumeclaim \"deleting\" is being deleted"),
        ),
        (
            "unbound-pvc,pv-same-node",
            pod(&["unbound-pvc"]),
            World::new(vec![unbound()], vec![pv_node2(), pv_node1a(), pv_node1b()]),
            Want::Node(vec![], vec![("pv-node1a", "unbound-pvc")], vec![]),
        ),
        (
            "unbound-pvc,pv-different-node",
            pod(&["unbound-pvc"]),
            World::new(vec![unbound()], vec![pv_node2()]),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
        (
            "two-unbound-pvcs",
            pod(&["unbound-pvc", "unbound-pvc2"]),
            World::new(vec![unbound(), unbound2()], vec![pv_node1a(), pv_node1b()]),
            Want::Node(
                vec![],
                vec![("pv-node1a", "unbound-pvc"), ("pv-node1b", "unbound-pvc2")],
                vec![],
            ),
        ),
        (
            "two-unbound-pvcs,order-by-size",
            pod(&["unbound-pvc2", "unbound-pvc"]),
            World::new(vec![unbound(), unbound2()], vec![pv_node1a(), pv_node1b()]),
            Want::Node(
                vec![],
                vec![("pv-node1a", "unbound-pvc"), ("pv-node1b", "unbound-pvc2")],
                vec![],
            ),
        ),
        (
            "two-unbound-pvcs,partial-match",
            pod(&["unbound-pvc", "unbound-pvc2"]),
            World::new(vec![unbound(), unbound2()], vec![pv_node1a()]),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
        (
            "one-bound,one-unbound",
            pod(&["unbound-pvc", "bound-pvc"]),
            World::new(
                vec![
                    unbound(),
                    bound(claim("bound-pvc", "1G", "wait"), "pv-node1a"),
                ],
                vec![bound_volume(pv_node1a(), "bound-pvc"), pv_node1b()],
            ),
            Want::Node(vec![], vec![("pv-node1b", "unbound-pvc")], vec![]),
        ),
        (
            "one-bound,one-unbound,no-match",
            pod(&["unbound-pvc", "bound-pvc"]),
            World::new(
                vec![
                    unbound(),
                    bound(claim("bound-pvc", "1G", "wait"), "pv-node1a"),
                ],
                vec![bound_volume(pv_node1a(), "bound-pvc"), pv_node2()],
            ),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
        (
            "one-prebound,one-unbound",
            pod(&["unbound-pvc", "prebound-pvc"]),
            World::new(
                vec![
                    unbound(),
                    with(
                        claim("prebound-pvc", "1G", "wait"),
                        &[("/spec/volumeName", json!("pv-node1a"))],
                    ),
                ],
                vec![pv_node1a(), pv_node1b()],
            ),
            Want::Unschedulable(REASON_UNBOUND_IMMEDIATE),
        ),
        (
            "selected-node-elsewhere",
            pod(&["unbound-pvc"]),
            World::new(
                vec![with(
                    unbound(),
                    &[("/metadata/annotations", json!({ANN_SELECTED_NODE: "node2"}))],
                )],
                vec![pv_node1a()],
            ),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
    ];
    for (case, pod, world, want) in table {
        check(case, &pod, &world, want);
    }
}

fn bound_volume(volume: Value, claim: &str) -> Value {
    with(
        volume,
        &[
            (
                "/spec/claimRef",
                json!({"namespace": "testns", "name": claim, "uid": format!("uid-{claim}")}),
            ),
            ("/status/phase", json!("Bound")),
        ],
    )
}

#[test]
fn find_pod_volumes_with_provisioning() {
    let provisioned = || claim("provisioned-pvc", "1G", "wait-provisioned");
    let table: Vec<(&str, Value, World, Want)> = vec![
        (
            "one-provisioned",
            pod(&["provisioned-pvc"]),
            World::new(vec![provisioned()], vec![]),
            Want::Node(vec![], vec![], vec!["provisioned-pvc"]),
        ),
        (
            "one-provisioned,selected-here",
            pod(&["provisioned-pvc"]),
            World::new(
                vec![with(
                    provisioned(),
                    &[("/metadata/annotations", json!({ANN_SELECTED_NODE: NODE1}))],
                )],
                vec![],
            ),
            Want::Node(vec![], vec![], vec!["provisioned-pvc"]),
        ),
        (
            "one-provisioned,one-unbound,one-bound",
            pod(&["provisioned-pvc", "unbound-pvc", "bound-pvc"]),
            World::new(
                vec![
                    provisioned(),
                    claim("unbound-pvc", "1G", "wait"),
                    bound(claim("bound-pvc", "1G", "wait"), "pv-b"),
                ],
                vec![
                    local_volume("pv-a", "1G", "wait", NODE1),
                    bound_volume(local_volume("pv-b", "1G", "wait", NODE1), "bound-pvc"),
                ],
            ),
            Want::Node(
                vec![],
                vec![("pv-a", "unbound-pvc")],
                vec!["provisioned-pvc"],
            ),
        ),
        (
            "provisioner-not-supported",
            pod(&["unbound-pvc"]),
            World::new(vec![claim("unbound-pvc", "1G", "wait")], vec![]),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
        (
            "topology not allowed",
            pod(&["topology-pvc"]),
            World::new(vec![claim("topology-pvc", "1G", "wait-topology")], vec![]),
            Want::Node(vec![REASON_BIND_CONFLICT], vec![], vec![]),
        ),
        (
            "a matching volume first, provisioning for the rest",
            pod(&["provisioned-pvc"]),
            World::new(
                vec![provisioned()],
                vec![local_volume("pv-p", "2G", "wait-provisioned", NODE1)],
            ),
            Want::Node(vec![], vec![("pv-p", "provisioned-pvc")], vec![]),
        ),
    ];
    for (case, pod, world, want) in table {
        check(case, &pod, &world, want);
    }
    let world = World {
        classes: vec![
            json!({"metadata": {"name": "wait-provisioned"}, "volumeBindingMode": "WaitForFirstConsumer", "provisioner": "p"}),
        ],
        ..World::new(vec![claim("c", "1G", "wait-provisioned")], vec![])
    };
    let claims = match pre_filter(&pod(&["c"]), world.snapshot()) {
        Ok(PreFilter::Claims(claims)) => claims,
        other => panic!("{other:?}"),
    };
    let empty = World {
        classes: vec![],
        ..World::new(vec![], vec![])
    };
    assert_eq!(
        filter(&claims, &node(NODE1), empty.snapshot())
            .map(|_| ())
            .unwrap_err()
            .to_string(),
        "failed to find storage class \"wait-provisioned\""
    );
}

#[test]
fn capacity_of_csi_drivers_that_opt_in() {
    let capacity = |size: Option<&str>, max: Option<&str>, zone: Option<&str>| {
        let mut capacity = json!({"metadata": {"name": "cap", "namespace": "kube-system"},
                                  "storageClassName": "wait-provisioned"});
        if let Some(size) = size {
            capacity["capacity"] = json!(size);
        }
        if let Some(max) = max {
            capacity["maximumVolumeSize"] = json!(max);
        }
        if let Some(zone) = zone {
            capacity["nodeTopology"] = json!({"matchLabels": {"zone": zone}});
        }
        capacity
    };
    let driver = |opt_in: bool| json!({"metadata": {"name": "test-provisioner"}, "spec": {"storageCapacity": opt_in}});
    // (case, CSIDrivers, CSIStorageCapacities, reasons)
    type Row<'a> = (&'a str, Vec<Value>, Vec<Value>, Vec<&'a str>);
    let table: Vec<Row> = vec![
        ("no driver: not checked", vec![], vec![], vec![]),
        (
            "driver does not opt in",
            vec![driver(false)],
            vec![],
            vec![],
        ),
        (
            "no capacity objects",
            vec![driver(true)],
            vec![],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
        (
            "enough capacity here",
            vec![driver(true)],
            vec![capacity(Some("10G"), None, Some("z1"))],
            vec![],
        ),
        (
            "too little",
            vec![driver(true)],
            vec![capacity(Some("1"), None, Some("z1"))],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
        (
            "maximumVolumeSize wins over capacity",
            vec![driver(true)],
            vec![capacity(Some("10G"), Some("1"), Some("z1"))],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
        (
            "capacity on another topology",
            vec![driver(true)],
            vec![capacity(Some("10G"), None, Some("z2"))],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
        (
            "no topology: unavailable",
            vec![driver(true)],
            vec![capacity(Some("10G"), None, None)],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
        (
            "another class",
            vec![driver(true)],
            vec![with(
                capacity(Some("10G"), None, Some("z1")),
                &[("/storageClassName", json!("other"))],
            )],
            vec![REASON_NOT_ENOUGH_SPACE],
        ),
    ];
    for (case, drivers, capacities, reasons) in table {
        let world = World {
            drivers,
            capacities,
            ..World::new(vec![claim("c", "1G", "wait-provisioned")], vec![])
        };
        let provisions = if reasons.is_empty() {
            vec!["c"]
        } else {
            vec![]
        };
        check(
            case,
            &pod(&["c"]),
            &world,
            Want::Node(reasons, vec![], provisions),
        );
    }
}

#[test]
fn ephemeral_volumes_need_their_claim_and_ownership() {
    let pod = json!({"metadata": {"name": "pod", "namespace": "testns", "uid": "pod-uid"},
                     "spec": {"volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]}});
    let owned = |uid: &str| {
        with(
            claim("pod-scratch", "1G", "wait-provisioned"),
            &[(
                "/metadata/ownerReferences",
                json!([{"kind": "Pod", "name": "pod", "uid": uid, "controller": true}]),
            )],
        )
    };
    check(
        "not created yet",
        &pod,
        &World::new(vec![], vec![]),
        Want::Unschedulable(
            "waiting for ephemeral volume controller to create the persistentvolumeclaim \"pod-scratch\"",
        ),
    );
    check(
        "someone else's",
        &pod,
        &World::new(vec![owned("other")], vec![]),
        Want::Unschedulable(
            "PVC testns/pod-scratch was not created for pod testns/pod (pod is not owner)",
        ),
    );
    check(
        "owned",
        &pod,
        &World::new(vec![owned("pod-uid")], vec![]),
        Want::Node(vec![], vec![], vec!["pod-scratch"]),
    );
}

#[test]
fn reserve_pre_binds_volumes_and_selects_the_node() {
    let world = World::new(
        vec![
            claim("unbound-pvc", "1G", "wait"),
            claim("provisioned-pvc", "1G", "wait-provisioned"),
        ],
        vec![local_volume("pv-a", "1G", "wait", NODE1)],
    );
    let claims = match pre_filter(&pod(&["unbound-pvc", "provisioned-pvc"]), world.snapshot()) {
        Ok(PreFilter::Claims(claims)) => claims,
        other => panic!("{other:?}"),
    };
    let chosen = filter(&claims, &node(NODE1), world.snapshot()).expect("filter");
    assert!(chosen.fits());
    let reservation = reserve(&chosen, NODE1);
    assert_eq!(reservation.volumes.len(), 1);
    let volume = &reservation.volumes[0];
    assert_eq!(volume["spec"]["claimRef"]["name"], "unbound-pvc");
    assert_eq!(volume["spec"]["claimRef"]["uid"], "uid-unbound-pvc");
    assert_eq!(
        volume["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"],
        "yes"
    );
    assert_eq!(reservation.claims.len(), 1);
    assert_eq!(reservation.claims[0]["metadata"]["name"], "provisioned-pvc");
    assert_eq!(
        reservation.claims[0]["metadata"]["annotations"][ANN_SELECTED_NODE],
        NODE1
    );
    assert!(reserve(&NodeVolumes::default(), NODE1).is_empty());
}
