use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn key(namespace: &str, name: &str) -> Key {
    Key {
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// A Workload in `namespace` owned by `owner` (a UID), with `conditions` (type, status, reason).
fn workload(namespace: &str, name: &str, owner: &str, conditions: &[(&str, &str, &str)]) -> Value {
    let list: Vec<Value> = conditions
        .iter()
        .map(|(kind, status, reason)| {
            json!({"type": kind, "status": status, "reason": reason, "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
        })
        .collect();
    json!({"metadata": {"namespace": namespace, "name": name, "resourceVersion": "41",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                "uid": owner, "controller": true}]},
        "status": {"admission": {"clusterQueue": "cq"}, "conditions": list}})
}

const RESERVED: (&str, &str, &str) = ("QuotaReserved", "True", "QuotaReserved");

/// A pod in `namespace` whose controller owner has UID `owner` (empty: none).
fn pod(namespace: &str, name: &str, owner: &str) -> Value {
    let owners = if owner.is_empty() {
        json!([])
    } else {
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": owner,
            "controller": true}])
    };
    json!({"metadata": {"namespace": namespace, "name": name, "uid": format!("{name}-uid"),
            "ownerReferences": owners},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
}

#[test]
fn pods_are_matched_to_the_workload_holding_quota() {
    let workloads = vec![
        workload("a", "job-train", "job-uid", &[RESERVED]),
        workload("a", "pending", "pending-uid", &[]),
        workload(
            "a",
            "done",
            "done-uid",
            &[RESERVED, ("Finished", "True", "Succeeded")],
        ),
        // Kueue's Pod integration: the pod itself owns its Workload.
        workload("a", "pod-solo", "solo-uid", &[RESERVED]),
        // A JobSet's Workload: its pods belong to child Jobs, found by the annotation.
        workload("a", "jobset-js", "jobset-uid", &[RESERVED]),
    ];
    let mut annotated = pod("a", "js-0", "child-job-uid");
    annotated["metadata"]["annotations"] = json!({"kueue.x-k8s.io/workload": "jobset-js"});
    let mut wrong_annotation = pod("a", "js-1", "child-job-uid");
    wrong_annotation["metadata"]["annotations"] = json!({"kueue.x-k8s.io/workload": "pending"});
    let mut not_controller = pod("a", "loose", "");
    not_controller["metadata"]["ownerReferences"] =
        json!([{"kind": "Job", "uid": "job-uid", "controller": false}]);
    let cases = [
        (pod("a", "train-0", "job-uid"), Some("job-train")),
        (pod("b", "elsewhere", "job-uid"), None),
        (pod("a", "waiting", "pending-uid"), None),
        (pod("a", "finished", "done-uid"), None),
        (pod("a", "solo", ""), Some("pod-solo")),
        (annotated, Some("jobset-js")),
        (wrong_annotation, None),
        (not_controller, None),
        (pod("a", "web-0", "replicaset-uid"), None),
    ];
    // "solo"'s UID is "solo-uid": the Workload's owner.
    for (pod, want) in cases {
        let got = workload_of(&pod, &workloads).map(|w| json_read::text(w, "/metadata/name"));
        assert_eq!(got, want, "{}", pod["metadata"]["name"]);
    }
}

#[test]
fn workloads_holding_quota_are_evicted_once_and_their_pods_hold_the_node() {
    let workloads = vec![
        workload("a", "job-train", "job-uid", &[RESERVED]),
        workload(
            "a",
            "job-evicted",
            "evicted-uid",
            &[RESERVED, ("Evicted", "True", "Preempted")],
        ),
        workload("a", "job-gone", "gone-uid", &[RESERVED]),
    ];
    let mut terminating = pod("a", "gone-0", "gone-uid");
    terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    let mut succeeded = pod("a", "train-done", "job-uid");
    succeeded["status"]["phase"] = json!("Succeeded");
    let pods = [
        pod("a", "train-0", "job-uid"),
        pod("a", "train-1", "job-uid"),
        pod("a", "web-0", "replicaset-uid"),
        pod("a", "stopping-0", "evicted-uid"),
        terminating,
        succeeded,
    ];
    let refs: Vec<&Value> = pods.iter().collect();
    // (plan, want message)
    let cases = [
        (
            Some("driver-570"),
            "The node n1 is under maintenance by the plan driver-570",
        ),
        (None, "The node n1 is under maintenance"),
    ];
    for (plan, message) in cases {
        let got = moves(&refs, &workloads, ("n1", plan), at(60));
        assert_eq!(got.by_api, vec![key("a", "web-0")]);
        assert_eq!(
            got.held,
            vec![
                key("a", "train-0"),
                key("a", "train-1"),
                key("a", "stopping-0")
            ],
            "running pods of Workloads holding quota, evicted or not"
        );
        assert_eq!(got.evictions.len(), 1, "{:?}", got.evictions);
        let eviction = &got.evictions[0];
        assert_eq!(eviction.workload, key("a", "job-train"));
        assert_eq!(eviction.resource_version, "41");
        let evicted = eviction.status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Evicted"))
            .expect("Evicted");
        assert_eq!(
            (
                &evicted["status"],
                &evicted["reason"],
                &evicted["message"],
                &evicted["lastTransitionTime"]
            ),
            (
                &json!("True"),
                &json!("NodeMaintenance"),
                &json!(message),
                &json!("1970-01-01T00:01:00Z")
            )
        );
        assert_eq!(eviction.event.reason, "EvictedDueToNodeMaintenance");
        assert_eq!(eviction.event.kind, "Normal");
        assert_eq!(eviction.event.message, message);
        assert_eq!(eviction.event.involved["name"], "job-train");
    }
}

#[test]
fn nothing_of_kueue_leaves_every_pod_to_the_eviction_api() {
    let pods = [pod("a", "web-0", "rs"), pod("b", "web-1", "")];
    let refs: Vec<&Value> = pods.iter().collect();
    let got = moves(&refs, &[], ("n1", None), at(1));
    assert_eq!(
        got,
        Moves {
            by_api: vec![key("a", "web-0"), key("b", "web-1")],
            ..Moves::default()
        }
    );
    assert_eq!(moves(&[], &[], ("n1", None), at(1)), Moves::default());
}
