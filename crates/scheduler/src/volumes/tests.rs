//! VolumeBinding inside a decision: which nodes a pod's claims allow, the FailedScheduling
//! message with upstream's reasons, the PreBind writes, and their booking.

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::*;
use crate::Scheduler;
use crate::filters::Plugin;
use crate::node_info;
use crate::score::Strategy;

fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }))
    .expect("node")
}

fn pod(name: &str, claim: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "c"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
    }))
    .expect("pod")
}

fn claim(name: &str, class: &str, size: &str) -> Value {
    json!({"metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}")},
           "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": size}}},
           "status": {"phase": "Pending"}})
}

fn class(name: &str, mode: &str) -> Value {
    json!({"metadata": {"name": name}, "provisioner": "local.csi.tessera.dev",
           "volumeBindingMode": mode})
}

fn capacity(node: &str, left: &str) -> Value {
    json!({"metadata": {"namespace": "kube-system", "name": format!("c-{node}")},
           "storageClassName": "local", "capacity": left,
           "nodeTopology": {"matchLabels": {"kubernetes.io/hostname": node}}})
}

fn local_volume(name: &str, node: &str, size: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                    "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
           "status": {"phase": "Available"}})
}

fn scheduler(volumes: Volumes) -> Scheduler {
    let nodes = [node("n1"), node("n2"), node("n3")];
    Scheduler::new(
        node_info::build(&nodes, &[]),
        vec![],
        vec![],
        [],
        Strategy::default(),
    )
    .with_volumes(volumes)
}

fn storage(claims: Vec<Value>, volumes: Vec<Value>, capacities: Vec<Value>) -> Volumes {
    Volumes {
        claims,
        volumes,
        classes: vec![
            class("local", "WaitForFirstConsumer"),
            class("fast", "Immediate"),
        ],
        csi_drivers: vec![json!({"metadata": {"name": "local.csi.tessera.dev"},
                                 "spec": {"storageCapacity": true}})],
        capacities,
    }
}

#[test]
fn a_delayed_claim_goes_where_there_is_room_and_names_the_node() {
    let volumes = storage(
        vec![claim("data", "local", "50Gi")],
        vec![],
        vec![
            capacity("n1", "10Gi"),
            capacity("n2", "100Gi"),
            capacity("n3", "20Gi"),
        ],
    );
    let decision = scheduler(volumes)
        .schedule(&pod("p", "data"), &[])
        .expect("placed");
    assert_eq!(decision.node, "n2");
    assert!(decision.volumes.volumes.is_empty());
    assert_eq!(decision.volumes.claims.len(), 1);
    assert_eq!(
        decision.volumes.claims[0]["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        "n2"
    );
}

#[test]
fn fit_errors_carry_upstreams_volume_reasons() {
    let bound = |name: &str, volume: &str| {
        let mut claim = claim(name, "local", "1Gi");
        claim["spec"]["volumeName"] = json!(volume);
        claim["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
        claim["status"]["phase"] = json!("Bound");
        claim
    };
    let no_class = {
        let mut claim = claim("plain", "", "1Gi");
        claim["spec"]["storageClassName"] = json!("");
        claim
    };
    let table = [
        (
            "too little capacity anywhere",
            storage(
                vec![claim("data", "local", "50Gi")],
                vec![],
                vec![capacity("n1", "10Gi"), capacity("n2", "10Gi")],
            ),
            "data",
            "0/3 nodes are available: 3 node(s) did not have enough free storage.",
        ),
        (
            "a bound volume pinned elsewhere",
            storage(
                vec![bound("data", "pv-a")],
                vec![local_volume("pv-a", "gone", "1Gi")],
                vec![],
            ),
            "data",
            "0/3 nodes are available: 3 node(s) had volume node affinity conflict.",
        ),
        (
            "a bound claim whose volume is gone",
            storage(vec![bound("data", "pv-x")], vec![], vec![]),
            "data",
            "0/3 nodes are available: 3 node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s).",
        ),
        (
            "an immediate claim not bound yet",
            storage(vec![claim("data", "fast", "1Gi")], vec![], vec![]),
            "data",
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        ),
        (
            "a claim that does not exist",
            storage(vec![], vec![], vec![]),
            "data",
            "0/3 nodes are available: persistentvolumeclaim \"data\" not found.",
        ),
        (
            "no class and no volume",
            storage(vec![no_class], vec![], vec![]),
            "plain",
            "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
        ),
    ];
    for (case, volumes, claim_name, want) in table {
        let error = scheduler(volumes)
            .schedule(&pod("p", claim_name), &[])
            .expect_err(case);
        assert_eq!(error.to_string(), want, "{case}");
    }
}

#[test]
fn a_static_volume_is_pre_bound_and_booked_for_the_next_pod() {
    let mut volumes = storage(
        vec![claim("a", "static", "1Gi"), claim("b", "static", "1Gi")],
        vec![local_volume("pv-1", "n3", "5Gi")],
        vec![],
    );
    volumes.classes.push(json!({"metadata": {"name": "static"},
        "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}));
    volumes.volumes[0]["spec"]["storageClassName"] = json!("static");
    let mut scheduler = scheduler(volumes);
    let first = pod("p1", "a");
    let decision = scheduler.schedule(&first, &[]).expect("placed");
    assert_eq!(decision.node, "n3");
    assert!(decision.volumes.claims.is_empty());
    assert_eq!(decision.volumes.volumes.len(), 1);
    assert_eq!(decision.volumes.volumes[0]["spec"]["claimRef"]["name"], "a");
    scheduler.assume(&first, &decision, &[]);
    // The only volume is taken now, and the class provisions nothing.
    let error = scheduler
        .schedule(&pod("p2", "b"), &[])
        .expect_err("no volume left");
    assert_eq!(
        error.to_string(),
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    );
}

#[test]
fn explain_gives_the_volume_verdict_of_each_node() {
    let volumes = storage(
        vec![claim("data", "local", "50Gi")],
        vec![],
        vec![capacity("n2", "100Gi")],
    );
    let explanation = scheduler(volumes).explain(&pod("p", "data"), &[], &[]);
    let verdicts: Vec<(String, Option<Vec<String>>)> = explanation
        .nodes
        .iter()
        .map(|report| {
            let volume = report
                .verdicts
                .iter()
                .find(|(plugin, _)| *plugin == Plugin::VolumeBinding)
                .and_then(|(_, verdict)| verdict.clone());
            (report.node.clone(), volume)
        })
        .collect();
    let short = || Some(vec!["node(s) did not have enough free storage".to_string()]);
    assert_eq!(
        verdicts,
        [
            ("n1".to_string(), short()),
            ("n2".to_string(), None),
            ("n3".to_string(), short()),
        ]
    );
    // Without storage objects (a caller that gives none) VolumeBinding says nothing.
    let nodes = [node("n1")];
    let plain = Scheduler::new(
        node_info::build(&nodes, &[]),
        vec![],
        vec![],
        [],
        Strategy::default(),
    );
    assert!(plain.schedule(&pod("p", "data"), &[]).is_ok());
}
