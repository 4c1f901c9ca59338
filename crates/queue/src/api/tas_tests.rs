//! Table tests of TAS through a whole pass (Topology, TAS flavor, Nodes and Workloads as
//! stored) and of the topology ungater over stored pods.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;
use crate::api::pass::{Queues, Settings, StatusWrite, pass};

const RACK: &str = "tessera.dev/rack";
const HOST: &str = "kubernetes.io/hostname";

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

/// Two racks of four nodes with four GPUs each.
fn nodes() -> Vec<Value> {
    let mut nodes = Vec::new();
    for rack in ["r1", "r2"] {
        for host in 0..4 {
            let name = format!("{rack}-n{host}");
            nodes.push(json!({"metadata": {"name": name, "labels": {
                    RACK: rack, HOST: name, "pool": "gpu"}},
                "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": "4", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}}));
        }
    }
    nodes
}

fn topology() -> Value {
    json!({"metadata": {"name": "default"}, "spec": {"levels": [
        {"nodeLabel": RACK}, {"nodeLabel": HOST}]}})
}

fn flavor(topology: &str) -> Value {
    json!({"metadata": {"name": "tas"}, "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": topology}})
}

fn cluster_queue() -> Value {
    json!({"metadata": {"name": "cq", "generation": 1}, "spec": {"namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "tas",
            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "64"}]}]}]}})
}

fn workload(name: &str, pods: i32, level: &str, seconds: u64) -> Value {
    let created = tessera_model::time::timestamp(now() - Duration::from_secs(1000 - seconds));
    json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
            "creationTimestamp": created},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": pods,
            "topologyRequest": {"required": level, "podIndexLabel": "batch.kubernetes.io/job-completion-index"},
            "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}]}})
}

fn objects(topology_name: &str, workloads: Vec<Value>) -> Objects {
    Objects {
        flavors: vec![flavor(topology_name)],
        cluster_queues: vec![cluster_queue()],
        local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
            "spec": {"clusterQueue": "cq"}})],
        workloads: crate::api::objects::shared(workloads),
        namespaces: vec![json!({"metadata": {"name": "default"}})],
        topologies: vec![topology()],
        nodes: crate::api::objects::shared(nodes()),
        ..Default::default()
    }
}

fn written<'a>(writes: &'a [StatusWrite], name: &str) -> Option<&'a Value> {
    writes.iter().find(|w| w.name == name).map(|w| &w.status)
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|l| l.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

/// The racks of the hosts a written admission placed pods on, with the pod total.
fn racks(status: &Value) -> (BTreeSet<String>, i32) {
    let topology: wl_api::TopologyAssignment = serde_json::from_value(
        status["admission"]["podSetAssignments"][0]["topologyAssignment"].clone(),
    )
    .expect("a topology assignment");
    let placement = topology_of(&topology);
    assert_eq!(placement.levels, vec![HOST.to_owned()]);
    let racks = placement
        .domains
        .iter()
        .map(|d| d.values[0].split('-').next().unwrap_or_default().to_owned())
        .collect();
    (racks, placement.pod_count())
}

#[test]
fn a_pass_places_tas_workloads_in_one_rack_or_says_why_not() {
    // (case, topology the flavor names, workloads, per workload: None = not admitted with
    // the QuotaReserved reason and a message fragment, Some(pods) = admitted in one rack)
    type Want = (&'static str, Result<i32, (&'static str, &'static str)>);
    type Case = (&'static str, &'static str, Vec<Value>, Vec<Want>);
    let cases: Vec<Case> = vec![
        (
            "16 pods asking for one rack get one rack",
            "default",
            vec![workload("w1", 16, RACK, 1)],
            vec![("w1", Ok(16))],
        ),
        (
            "two such Workloads in one pass get the two racks",
            "default",
            vec![workload("w1", 16, RACK, 1), workload("w2", 16, RACK, 2)],
            vec![("w1", Ok(16)), ("w2", Ok(16))],
        ),
        (
            "17 pods never fit in a rack of 16 GPUs",
            "default",
            vec![workload("w1", 17, RACK, 1)],
            vec![(
                "w1",
                Err((
                    "TopologyPlacementFailed",
                    "couldn't assign flavors to pod set main: topology \"default\" allows to fit only 16 out of 17 pod(s)",
                )),
            )],
        ),
        (
            "a level the Topology does not have",
            "default",
            vec![workload("w1", 4, "tessera.dev/block", 1)],
            vec![(
                "w1",
                Err((
                    "NoMatchingFlavor",
                    "Flavor \"tas\" does not contain the requested level",
                )),
            )],
        ),
    ];
    for (name, topology_name, workloads, wants) in cases {
        let input = objects(topology_name, workloads);
        let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
        let mut seen_racks = BTreeSet::new();
        for (workload, want) in wants {
            let status = written(&pass.workloads, workload).expect("a status write");
            match want {
                Ok(pods) => {
                    let (racks, count) = racks(status);
                    assert_eq!(racks.len(), 1, "{name}: {workload} in {racks:?}");
                    assert_eq!(count, pods, "{name}: {workload}");
                    assert!(seen_racks.insert(racks), "{name}: racks shared");
                }
                Err((reason, fragment)) => {
                    let reserved = condition(status, "QuotaReserved");
                    assert_eq!(reserved["reason"], reason, "{name}: {reserved}");
                    let message = reserved["message"].as_str().unwrap_or_default();
                    assert!(message.contains(fragment), "{name}: {message}");
                }
            }
        }
    }
}

#[test]
fn a_flavor_naming_a_missing_topology_stops_admission_but_keeps_admitted_workloads() {
    let mut admitted = workload("running", 4, RACK, 1);
    admitted["status"] = json!({
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                "lastTransitionTime": "2027-01-15T08:00:00Z"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                "lastTransitionTime": "2027-01-15T08:00:00Z"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"nvidia.com/gpu": "tas"}, "resourceUsage": {"nvidia.com/gpu": "4"}, "count": 4}]}});
    let input = objects("missing", vec![admitted, workload("new", 4, RACK, 2)]);
    let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
    let cq = written(&pass.cluster_queues, "cq").expect("a ClusterQueue status");
    let active = condition(cq, "Active");
    assert_eq!(active["status"], "False");
    assert_eq!(active["reason"], "TopologyNotFound");
    assert_eq!(
        active["message"],
        "Can't admit new workloads: there is no Topology \"missing\" for TAS flavor \"tas\"."
    );
    assert_eq!(cq["reservingWorkloads"], 1, "{cq}");
    if let Some(status) = written(&pass.workloads, "running") {
        assert!(
            status.get("admission").is_none_or(|a| !a.is_null()),
            "{status}"
        );
    }
    let new = written(&pass.workloads, "new");
    assert!(
        new.is_none_or(|s| s.pointer("/admission/clusterQueue").is_none()),
        "{new:?}"
    );
}

fn pod(name: &str, index: &str, gated: bool, selector: Value) -> Value {
    let gates = if gated {
        json!([{"name": "example.com/other"}, {"name": TOPOLOGY_SCHEDULING_GATE}])
    } else {
        json!([])
    };
    json!({"metadata": {"name": name, "namespace": "default",
            "labels": {POD_SET_LABEL: "main", "batch.kubernetes.io/job-completion-index": index},
            "annotations": {WORKLOAD_ANNOTATION: "w1"}},
        "spec": {"schedulingGates": gates, "nodeSelector": selector}, "status": {"phase": "Pending"}})
}

#[test]
fn the_ungater_sends_gated_pods_to_their_ranks_domains() {
    let mut admitted = workload("w1", 3, RACK, 1);
    let placement = TopologyAssignment {
        levels: vec![RACK.to_owned()],
        domains: vec![
            TopologyDomainAssignment {
                values: vec!["r1".into()],
                count: 1,
            },
            TopologyDomainAssignment {
                values: vec!["r2".into()],
                count: 2,
            },
        ],
    };
    admitted["status"] = json!({
        "conditions": [{"type": "Admitted", "status": "True"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"nvidia.com/gpu": "tas"}, "count": 3,
            "topologyAssignment": topology_json(&placement)}]}});
    // (case, pods, wanted (pod, patch))
    type Case = (&'static str, Vec<Value>, Vec<(&'static str, Value)>);
    let cases: Vec<Case> = vec![
        (
            "every pod gated: by completion index",
            vec![
                pod("p2", "2", true, json!({"pool": "gpu"})),
                pod("p0", "0", true, json!({"pool": "gpu"})),
                pod("p1", "1", true, json!({"pool": "gpu"})),
            ],
            vec![
                (
                    "p0",
                    json!({"spec": {"schedulingGates": [{"name": "example.com/other"}], "nodeSelector": {RACK: "r1"}}}),
                ),
                (
                    "p1",
                    json!({"spec": {"schedulingGates": [{"name": "example.com/other"}], "nodeSelector": {RACK: "r2"}}}),
                ),
                (
                    "p2",
                    json!({"spec": {"schedulingGates": [{"name": "example.com/other"}], "nodeSelector": {RACK: "r2"}}}),
                ),
            ],
        ),
        (
            "ungated pods are left alone",
            vec![
                pod("p0", "0", false, json!({RACK: "r1"})),
                pod("p1", "1", true, json!({})),
            ],
            vec![(
                "p1",
                json!({"spec": {"schedulingGates": [{"name": "example.com/other"}], "nodeSelector": {RACK: "r2"}}}),
            )],
        ),
        (
            "a pod of the same-named Workload in another namespace is not a member",
            vec![
                in_namespace(pod("q0", "0", true, json!({})), "other"),
                pod("p0", "0", true, json!({})),
            ],
            vec![(
                "p0",
                json!({"spec": {"schedulingGates": [{"name": "example.com/other"}], "nodeSelector": {RACK: "r1"}}}),
            )],
        ),
    ];
    for (name, pods, want) in cases {
        let got: Vec<(String, Value)> = ungate(std::slice::from_ref(&admitted), &pods)
            .into_iter()
            .map(|p| (p.name, p.patch))
            .collect();
        let want: Vec<(String, Value)> = want
            .into_iter()
            .map(|(pod, patch)| (pod.to_owned(), patch))
            .collect();
        assert_eq!(got, want, "{name}");
    }
}

fn in_namespace(mut object: Value, namespace: &str) -> Value {
    object["metadata"]["namespace"] = json!(namespace);
    object
}

#[test]
fn the_ungater_leaves_workloads_without_a_topology_assignment_or_admission_alone() {
    let gated = vec![pod("p0", "0", true, json!({}))];
    let assignment = json!({"name": "main", "flavors": {"nvidia.com/gpu": "tas"}, "count": 1});
    let mut without_topology = workload("w1", 1, RACK, 1);
    without_topology["status"] = json!({
        "conditions": [{"type": "Admitted", "status": "True"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [assignment]}});
    let mut not_admitted = workload("w1", 1, RACK, 1);
    let placement = TopologyAssignment {
        levels: vec![RACK.to_owned()],
        domains: vec![TopologyDomainAssignment {
            values: vec!["r1".into()],
            count: 1,
        }],
    };
    not_admitted["status"] = json!({
        "conditions": [{"type": "Admitted", "status": "False"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"nvidia.com/gpu": "tas"}, "count": 1,
            "topologyAssignment": topology_json(&placement)}]}});
    for (name, workload) in [
        ("admitted without topologyAssignment", without_topology),
        ("topologyAssignment but Admitted=False", not_admitted),
    ] {
        assert!(
            ungate(std::slice::from_ref(&workload), &gated).is_empty(),
            "{name}"
        );
    }
}

/// A Workload of `pods` one-GPU pods admitted in "cq" at priority 0, placed on `hosts`
/// (`(node, pods)`).
fn placed(name: &str, hosts: &[(&str, i32)]) -> Value {
    let pods: i32 = hosts.iter().map(|(_, count)| count).sum();
    let placement = TopologyAssignment {
        levels: vec![HOST.to_owned()],
        domains: hosts
            .iter()
            .map(|(host, count)| TopologyDomainAssignment {
                values: vec![(*host).to_owned()],
                count: *count,
            })
            .collect(),
    };
    let mut object = workload(name, pods, RACK, 1);
    object["spec"]["priority"] = json!(0);
    object["status"] = json!({
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                "lastTransitionTime": "2027-01-15T08:00:00Z"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                "lastTransitionTime": "2027-01-15T08:00:00Z"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
            "flavors": {"nvidia.com/gpu": "tas"}, "resourceUsage": {"nvidia.com/gpu": pods.to_string()},
            "count": pods, "topologyAssignment": topology_json(&placement)}]}});
    object
}

#[test]
fn a_pass_with_topology_aware_preemption_clears_the_cheaper_rack() {
    // r1 holds one Workload of 4 pods, r2 two of 2 pods each: neither has room for 16 pods,
    // and clearing r1 preempts one Workload where r2 takes two. Kueue's candidate order
    // (equal priority and age, then UID) would try the pair first.
    let mut input = objects(
        "default",
        vec![
            placed("solo", &[("r1-n0", 4)]),
            placed("pair-a", &[("r2-n0", 2)]),
            placed("pair-b", &[("r2-n1", 2)]),
            {
                let mut high = workload("high", 16, RACK, 2);
                high["spec"]["priority"] = json!(100);
                high
            },
        ],
    );
    input.cluster_queues[0]["spec"]["preemption"] = json!({"withinClusterQueue": "LowerPriority"});
    let reason = |pass: &crate::api::pass::Pass, name: &str, kind: &str| {
        written(&pass.workloads, name).map(|status| condition(status, kind)["reason"].clone())
    };
    let off = pass(&input, &mut Queues::default(), &Settings::default(), now());
    assert_eq!(reason(&off, "solo", "Preempted"), None, "off: solo stays");
    let mut settings = Settings::default();
    settings.preemption.topology_aware = true;
    let on = pass(&input, &mut Queues::default(), &settings, now());
    assert_eq!(
        reason(&on, "solo", "Preempted"),
        Some(json!("InClusterQueue"))
    );
    assert_eq!(reason(&on, "solo", "Evicted"), Some(json!("Preempted")));
    for untouched in ["pair-a", "pair-b"] {
        assert_eq!(reason(&on, untouched, "Preempted"), None, "{untouched}");
    }
    assert_eq!(
        reason(&on, "high", "QuotaReserved"),
        Some(json!("WaitingForPreemptedWorkloads"))
    );
}

#[test]
fn non_tas_pods_of_holding_workloads_count_as_theirs() {
    // (case, pod's uid, its owners' uids, want holder)
    let cases: Vec<(&str, &str, Vec<&str>, Option<&str>)> = vec![
        ("a Job's pod", "pod-1", vec!["job-1"], Some("default/plain")),
        (
            "a pod that is its own Workload's owner",
            "job-1",
            vec![],
            Some("default/plain"),
        ),
        ("a pod of nothing Kueue holds", "pod-2", vec!["rs-1"], None),
    ];
    for (name, uid, owners, want) in cases {
        let mut plain = placed("plain", &[]);
        plain["metadata"]["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "job", "uid": "job-1", "controller": true}]);
        let owners: Vec<Value> = owners
            .iter()
            .map(|owner| json!({"apiVersion": "v1", "kind": "X", "name": "x", "uid": owner}))
            .collect();
        let mut input = objects("default", vec![plain.clone()]);
        input.pods = vec![json!({
            "metadata": {"name": "p", "namespace": "default", "uid": uid,
                "ownerReferences": owners},
            "spec": {"nodeName": "r1-n0", "containers": [{"name": "c",
                "resources": {"requests": {"nvidia.com/gpu": "3"}}}]},
            "status": {"phase": "Running"}})];
        let tas = tas_flavors(&input, std::iter::once(&plain));
        let snapshot = &tas.snapshots["tas"];
        let held: Vec<(&String, &BTreeMap<String, crate::workload::Requests>)> =
            snapshot.holders().iter().collect();
        let usage = BTreeMap::from([(
            "r1-n0".to_owned(),
            crate::workload::Requests::from([
                ("nvidia.com/gpu".to_owned(), 3),
                ("pods".to_owned(), 1),
            ]),
        )]);
        let want: Vec<(&String, &BTreeMap<String, crate::workload::Requests>)> = match want {
            Some(holder) => vec![(Box::leak(Box::new(holder.to_owned())), &usage)],
            None => Vec::new(),
        };
        assert_eq!(held, want, "{name}");
        // Counted as used either way.
        let leaf = snapshot.tree.node_leaf["r1-n0"];
        let domain = snapshot.tree.leaves[leaf].domain;
        let free = snapshot.free_in_domain(domain, "nvidia.com/gpu");
        assert_eq!(free, 1, "{name}");
    }
}

#[test]
fn kept_tas_snapshots_are_read_again_only_when_nodes_topologies_or_flavors_change() {
    let holder = placed("holder", &[("r1-n0", 2)]);
    let mut input = objects("default", vec![holder.clone()]);
    let mut kept = TasBase::default();
    // (step, what changes before the read)
    type Change = fn(&mut Objects);
    let steps: [(&str, Change); 5] = [
        ("first read", |_| {}),
        ("nothing changed", |_| {}),
        ("a node's allocatable changed", |objects| {
            Arc::make_mut(&mut objects.nodes[0])["status"]["allocatable"]["nvidia.com/gpu"] =
                json!("8");
        }),
        ("a node removed", |objects| {
            objects.nodes.pop();
        }),
        ("the flavor names another topology", |objects| {
            objects.flavors[0]["spec"]["topologyName"] = json!("missing");
        }),
    ];
    for (step, change) in steps {
        change(&mut input);
        let fresh = tas_flavors(&input, std::iter::once(&holder));
        assert_eq!(
            kept.tas_flavors(&input, std::iter::once(&holder)),
            fresh,
            "{step}"
        );
    }
    // The node's new capacity was read: r1-n0 holds 8 GPUs, 2 of them in use.
    input.flavors[0]["spec"]["topologyName"] = json!("default");
    let tas = kept.tas_flavors(&input, std::iter::once(&holder));
    let snapshot = &tas.snapshots["tas"];
    let leaf = snapshot.tree.node_leaf["r1-n0"];
    let domain = snapshot.tree.leaves[leaf].domain;
    assert_eq!(snapshot.free_in_domain(domain, "nvidia.com/gpu"), 6);
}
