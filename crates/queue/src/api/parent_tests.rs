//! Cases of Kueue's leaderworkerset_reconciler_test.go and statefulset_reconciler_test.go
//! `TestReconciler` ("should create prebuilt workload…") that fit the pure constructors.

use super::*;
use tessera_model::kueue::pod::LWS_GROUP_INDEX;
use tessera_model::kueue::{PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL};

const CONTAINERS: &str = r#"[{"name": "c", "image": "pause"}]"#;

fn containers() -> Value {
    serde_json::from_str(CONTAINERS).unwrap_or_default()
}

/// `MakeLeaderWorkerSet("lws", "ns").UID("lws")` with `replicas`, `size`, and a leader
/// template when `leader`.
fn lws(replicas: i64, size: i64, leader: bool, labels: Value) -> Value {
    let mut lws = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": "ns", "uid": "lws", "labels": labels},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
            "workerTemplate": {"metadata": {"labels": {LWS_NAME: "lws", LWS_GROUP_INDEX: "0",
                "app": "w"}, "annotations": {"leaderworkerset.sigs.k8s.io/size": "3"}},
                "spec": {"containers": containers()}}}}});
    if leader {
        lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"] =
            json!({"spec": {"containers": containers()}});
    }
    lws
}

fn annotations(kind: &str, name: &str, index: Option<&str>) -> Value {
    let mut annotations = json!({IS_GROUP_WORKLOAD: "true", JOB_OWNER_GVK: kind,
        JOB_OWNER_NAME: name});
    if let Some(index) = index {
        annotations[COMPONENT_INDEX] = json!(index);
    }
    annotations
}

#[test]
fn leaderworkerset_groups_get_kueues_prebuilt_workloads() {
    let gvk = "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet";
    let owner = json!([{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "name": "lws", "uid": "lws"}]);
    // (case, lws, index, PodSets as (name, count)).
    let cases = [
        (
            "should create prebuilt workload",
            lws(1, 1, false, json!({})),
            0,
            vec![("main", 1)],
        ),
        (
            "should create prebuilt workload with leader template",
            lws(1, 3, true, json!({})),
            0,
            vec![("leader", 1), ("worker", 2)],
        ),
        (
            "should create prebuilt workloads with leader template (group 1)",
            lws(2, 3, true, json!({})),
            1,
            vec![("leader", 1), ("worker", 2)],
        ),
    ];
    for (case, lws, index, want) in cases {
        let workload = leaderworkerset_workload(&lws, index, &Priorities::default());
        let name = leaderworkerset_workload_name("lws", "lws", index);
        assert!(
            name.starts_with(&format!("leaderworkerset-lws-{index}-")),
            "{case}: {name}"
        );
        assert_eq!(workload["metadata"]["name"], name.as_str(), "{case}");
        assert_eq!(workload["metadata"]["namespace"], "ns", "{case}");
        assert_eq!(
            workload["metadata"]["labels"],
            json!({JOB_UID: "lws"}),
            "{case}"
        );
        assert_eq!(workload["metadata"]["ownerReferences"], owner, "{case}");
        let index = index.to_string();
        assert_eq!(
            workload["metadata"]["annotations"],
            annotations(gvk, "lws", Some(&index)),
            "{case}"
        );
        let got: Vec<(String, i64)> = workload["spec"]["podSets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    json_read::text(p, "/name").to_owned(),
                    json_read::int(p, "/count").unwrap_or(-1),
                )
            })
            .collect();
        let want: Vec<(String, i64)> = want.into_iter().map(|(n, c)| (n.to_owned(), c)).collect();
        assert_eq!(got, want, "{case}");
        assert_eq!(workload["spec"]["priority"], 0, "{case}");
        assert!(workload["spec"].get("priorityClassRef").is_none(), "{case}");
        // `newPodSet` drops the LeaderWorkerSet's own keys but its name.
        let worker = workload["spec"]["podSets"]
            .as_array()
            .and_then(|p| p.last())
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            worker["template"]["metadata"],
            json!({"labels": {LWS_NAME: "lws", "app": "w"}, "annotations": {}}),
            "{case}"
        );
        assert_eq!(
            worker["template"]["spec"]["containers"],
            containers(),
            "{case}"
        );
    }
}

#[test]
fn prebuilt_workloads_carry_the_parents_queue_and_workload_priority() {
    // "should create prebuilt workload with workload priority" (and the queue name).
    let priorities = Priorities {
        workload: [("high-priority".to_owned(), 5000)].into(),
        ..Priorities::default()
    };
    let labels = json!({PRIORITY_CLASS_LABEL: "high-priority", QUEUE_NAME_LABEL: "user-queue"});
    let workload = leaderworkerset_workload(&lws(1, 1, false, labels), 0, &priorities);
    assert_eq!(workload["spec"]["priority"], 5000);
    assert_eq!(
        workload["spec"]["priorityClassRef"],
        json!({"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high-priority"})
    );
    assert_eq!(workload["spec"]["queueName"], "user-queue");
    let unnamed = leaderworkerset_workload(&lws(1, 1, false, json!({})), 0, &priorities);
    assert!(unnamed["spec"].get("queueName").is_none());
}

#[test]
fn a_statefulset_gets_one_prebuilt_workload_of_its_replicas() {
    // statefulset_reconciler_test.go "should create prebuilt workload".
    let sts = json!({"metadata": {"name": "sts", "namespace": "ns", "uid": "sts-uid",
            "labels": {QUEUE_NAME_LABEL: "lq"}},
        "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": containers()}}}});
    let workload = statefulset_workload(&sts, &Priorities::default());
    let name = statefulset_workload_name("sts", "sts-uid");
    assert!(name.starts_with("statefulset-sts-"), "{name}");
    assert_eq!(workload["metadata"]["name"], name.as_str());
    assert_eq!(
        workload["metadata"]["ownerReferences"],
        json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "sts", "uid": "sts-uid"}])
    );
    assert_eq!(workload["metadata"]["labels"], json!({JOB_UID: "sts-uid"}));
    assert_eq!(
        workload["metadata"]["annotations"],
        annotations("apps/v1, Kind=StatefulSet", "sts", None)
    );
    // TopologyAwareScheduling is on (Kueue's default since 0.14): the PodSet ranks by the
    // StatefulSet's pod index even without a topology annotation.
    assert_eq!(
        workload["spec"]["podSets"],
        json!([{"name": "main", "count": 3, "template": {"spec": {"containers": containers()}},
            "topologyRequest": {"podIndexLabel": "apps.kubernetes.io/pod-index"}}])
    );
    assert_eq!(workload["spec"]["queueName"], "lq");

    // "should create workload with TAS topology request when TAS enabled".
    let mut annotated = sts.clone();
    annotated["spec"]["template"]["metadata"]["annotations"] =
        json!({"kueue.x-k8s.io/podset-required-topology": "cloud.com/block"});
    let workload = statefulset_workload(&annotated, &Priorities::default());
    assert_eq!(
        workload["spec"]["podSets"][0]["topologyRequest"],
        json!({"required": "cloud.com/block", "podIndexLabel": "apps.kubernetes.io/pod-index"})
    );
}

#[test]
fn pods_name_the_parent_whose_workload_they_wait_for() {
    let pod = |labels: Value, annotations: Value, owners: Value| {
        json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations,
            "ownerReferences": owners}})
    };
    let sts_owner = json!([{"kind": "StatefulSet", "name": "web", "controller": true}]);
    let prebuilt = json!({PREBUILT_WORKLOAD: "wl", LWS_NAME: "serve", LWS_GROUP_INDEX: "1"});
    let cases = [
        (
            pod(
                prebuilt.clone(),
                json!({SUSPENDED_BY_PARENT: "leaderworkerset"}),
                json!([]),
            ),
            Some((ParentKind::LeaderWorkerSet, "serve")),
        ),
        (
            pod(
                prebuilt.clone(),
                json!({SUSPENDED_BY_PARENT: "statefulset"}),
                sts_owner.clone(),
            ),
            Some((ParentKind::StatefulSet, "web")),
        ),
        // No prebuilt Workload named, another parent, or no controller: none.
        (
            pod(
                json!({LWS_NAME: "serve"}),
                json!({SUSPENDED_BY_PARENT: "leaderworkerset"}),
                json!([]),
            ),
            None,
        ),
        (
            pod(
                prebuilt.clone(),
                json!({SUSPENDED_BY_PARENT: "deployment"}),
                sts_owner,
            ),
            None,
        ),
        (
            pod(
                prebuilt,
                json!({SUSPENDED_BY_PARENT: "statefulset"}),
                json!([]),
            ),
            None,
        ),
    ];
    for (pod, want) in cases {
        let got = parent_of(&pod);
        assert_eq!(got.as_ref().map(|(k, n)| (*k, n.as_str())), want, "{pod}");
    }
    // The group index picks the LeaderWorkerSet group's Workload.
    let member = json!({"metadata": {"labels": {LWS_GROUP_INDEX: "1"}}});
    let parent = lws(2, 2, false, json!({}));
    let created = workload_for(
        ParentKind::LeaderWorkerSet,
        &parent,
        &member,
        &Priorities::default(),
    );
    let Some(Ok((workload, event))) = created else {
        panic!("{created:?}")
    };
    let name = leaderworkerset_workload_name("lws", "lws", 1);
    assert_eq!(workload["metadata"]["name"], name.as_str());
    assert_eq!(event.reason, "CreatedWorkload");
    assert_eq!(event.message, format!("Created Workload: ns/{name}"));
    let unindexed = json!({"metadata": {"labels": {}}});
    assert!(
        workload_for(
            ParentKind::LeaderWorkerSet,
            &parent,
            &unindexed,
            &Priorities::default()
        )
        .is_none()
    );
}

#[test]
fn a_missing_workload_priority_class_is_reported_instead_of_a_workload() {
    // "should report a missing workload priority class when creating the workloads".
    let parent = lws(2, 1, false, json!({PRIORITY_CLASS_LABEL: "missing-wpc"}));
    let member = json!({"metadata": {"labels": {LWS_GROUP_INDEX: "0"}}});
    let reported = workload_for(
        ParentKind::LeaderWorkerSet,
        &parent,
        &member,
        &Priorities::default(),
    );
    let Some(Err(event)) = reported else {
        panic!("{reported:?}")
    };
    assert_eq!(
        (event.kind, event.reason.as_str(), event.message.as_str()),
        (
            "Warning",
            "WorkloadPriorityClassNotFound",
            r#"WorkloadPriorityClass "missing-wpc" not found"#
        )
    );
    assert_eq!(event.involved["kind"], "LeaderWorkerSet");
    assert_eq!(event.involved["apiVersion"], "leaderworkerset.x-k8s.io/v1");
}
