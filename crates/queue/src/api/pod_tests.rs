//! Cases of Kueue's pod_controller_test.go `TestReconciler` that fit the pure reconciler.

use super::*;
use std::time::Duration;
use tessera_model::kueue::PRIORITY_CLASS_LABEL as PRIORITY_CLASS;
use tessera_model::kueue::pod::{ADMISSION_GATE, GROUP_NAME};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn pod(name: &str, extra: Value) -> Value {
    let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"),
            "labels": {MANAGED_LABEL: "true", job::QUEUE_NAME: "user-queue"},
            "annotations": {}, "finalizers": [FINALIZER]},
        "spec": {"schedulingGates": [{"name": ADMISSION_GATE}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}});
    merge(&mut pod, extra);
    pod
}

fn member(name: &str, total: &str, extra: Value) -> Value {
    let mut member = pod(
        name,
        json!({"metadata": {"labels": {GROUP_NAME: "test-group"},
            "annotations": {GROUP_TOTAL_COUNT: total, ROLE_HASH: "a1b2c3d4"}}}),
    );
    merge(&mut member, extra);
    member
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

fn admitted(pod_sets: Value) -> Value {
    json!({"metadata": {"name": "wl", "namespace": "ns"},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"},
            {"type": "Admitted", "status": "True"}],
            "admission": {"clusterQueue": "cq", "podSetAssignments": pod_sets}}})
}

fn flavors() -> BTreeMap<String, ResourceFlavorSpec> {
    [(
        "spot".to_owned(),
        ResourceFlavorSpec {
            name: "spot".into(),
            node_labels: [("instance".to_owned(), "spot".to_owned())].into(),
            node_taints: Vec::new(),
            tolerations: Vec::new(),
        },
    )]
    .into()
}

/// A group's pods and what it should come to: PodSet (name, count)s, or Kueue's error.
type GroupCase = (Vec<Value>, Result<Vec<(&'static str, i64)>, &'static str>);

fn reasons(writes: &[PodWrite]) -> Vec<(String, String)> {
    writes
        .iter()
        .filter_map(|w| match w {
            PodWrite::Event(e) => Some((e.reason.clone(), e.message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_single_pod_gets_kueues_workload() {
    let single = pod("pod", json!({}));
    let writes = reconcile(
        &[&single],
        false,
        None,
        &flavors(),
        &Priorities::default(),
        now(),
    );
    let [PodWrite::CreateWorkload(workload), PodWrite::Event(event)] = writes.as_slice() else {
        panic!("{writes:?}")
    };
    let name = workload_name("pod", "pod-uid");
    assert!(name.starts_with("pod-pod-"), "{name}");
    assert_eq!(workload["metadata"]["name"], name.as_str());
    assert_eq!(workload["spec"]["queueName"], "user-queue");
    assert_eq!(workload["spec"]["podSets"][0]["name"], "main");
    assert_eq!(workload["spec"]["podSets"][0]["count"], 1);
    assert_eq!(
        workload["metadata"]["ownerReferences"][0]["controller"],
        true
    );
    assert_eq!(event.message, format!("Created Workload: ns/{name}"));
}

#[test]
fn a_group_waits_for_all_its_pods_and_agrees_on_its_metadata() {
    // (pods, want: Ok(pod set counts) or Err(message))
    let cases: Vec<GroupCase> = vec![
        (
            vec![member("a", "2", json!({}))],
            Err("'test-group' group has fewer runnable pods than expected"),
        ),
        (
            vec![member("a", "2", json!({})), member("b", "2", json!({}))],
            Ok(vec![("a1b2c3d4", 2)]),
        ),
        (
            vec![
                member("a", "2", json!({})),
                member(
                    "b",
                    "2",
                    json!({"metadata": {"annotations": {ROLE_HASH: "0000ffff"}}}),
                ),
            ],
            Ok(vec![("0000ffff", 1), ("a1b2c3d4", 1)]),
        ),
        (
            vec![member("a", "2", json!({})), member("b", "3", json!({}))],
            Err(
                "pods 'a' and 'b' has different 'kueue.x-k8s.io/pod-group-total-count' values: 2!=3",
            ),
        ),
        (
            vec![
                member("a", "2", json!({})),
                member(
                    "b",
                    "2",
                    json!({"metadata": {"labels": {job::QUEUE_NAME: "other"}}}),
                ),
            ],
            Err("pods 'a' and 'b' has different queue names: user-queue!=other"),
        ),
        (
            vec![member("a", "0", json!({})), member("b", "0", json!({}))],
            Err(
                "incorrect annotation value 'kueue.x-k8s.io/pod-group-total-count=0': group total count should be greater than zero",
            ),
        ),
        (
            vec![member(
                "a",
                "3",
                json!({"metadata": {"annotations": {FAST_ADMISSION: "true"}}}),
            )],
            Ok(vec![("a1b2c3d4", 3)]),
        ),
        // A failed pod is not runnable: the group waits for its replacement.
        (
            vec![
                member("a", "2", json!({})),
                member("b", "2", json!({"status": {"phase": "Failed"}})),
            ],
            Err("'test-group' group has fewer runnable pods than expected"),
        ),
    ];
    for (pods, want) in cases {
        let refs: Vec<&Value> = pods.iter().collect();
        let writes = reconcile(&refs, true, None, &flavors(), &Priorities::default(), now());
        match want {
            Ok(counts) => {
                let Some(PodWrite::CreateWorkload(workload)) = writes.first() else {
                    panic!("{writes:?}")
                };
                assert_eq!(workload["metadata"]["name"], "test-group");
                assert_eq!(
                    workload["metadata"]["annotations"][IS_GROUP_WORKLOAD],
                    "true"
                );
                let got: Vec<(&str, i64)> = workload["spec"]["podSets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        (
                            p["name"].as_str().unwrap_or_default(),
                            p["count"].as_i64().unwrap_or(0),
                        )
                    })
                    .collect();
                assert_eq!(got, counts);
                assert_eq!(
                    workload["metadata"]["ownerReferences"]
                        .as_array()
                        .map(Vec::len),
                    Some(refs.len())
                );
            }
            Err(message) => assert_eq!(
                reasons(&writes),
                [("ErrWorkloadCompose".to_owned(), message.to_owned())]
            ),
        }
    }
}

/// What the reconciler writes for a pod group whose Workload is admitted.
fn reconcile_admitted_group(pods: &[&Value], workload: &Value) -> Vec<PodWrite> {
    reconcile(
        pods,
        true,
        Some(workload),
        &flavors(),
        &Priorities::default(),
        now(),
    )
}

/// The pod patches among `writes`.
fn pod_patches(writes: &[PodWrite]) -> Vec<&Value> {
    writes
        .iter()
        .filter_map(|w| match w {
            PodWrite::PatchPod(_, patch) => Some(patch),
            _ => None,
        })
        .collect()
}

#[test]
fn an_admitted_group_is_ungated_with_its_flavor() {
    let pods = [
        member("a", "2", json!({"spec": {"nodeSelector": {"own": "x"}}})),
        member("b", "2", json!({})),
    ];
    let refs: Vec<&Value> = pods.iter().collect();
    let workload = admitted(json!([{"name": "a1b2c3d4", "count": 2, "flavors": {"cpu": "spot"}}]));
    let writes = reconcile_admitted_group(&refs, &workload);
    let patches = pod_patches(&writes);
    assert_eq!(patches.len(), 2, "{writes:?}");
    let patch = patches[0];
    assert_eq!(patch["spec"]["schedulingGates"], Value::Null);
    assert_eq!(
        patch["spec"]["nodeSelector"],
        json!({"own": "x", "instance": "spot"})
    );
    assert_eq!(
        reasons(&writes)[0],
        (
            "Started".to_owned(),
            "Admitted by clusterQueue cq".to_owned()
        )
    );
    // Ungated pods are left alone.
    let running: Vec<Value> = pods
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p["spec"]["schedulingGates"] = Value::Null;
            p["status"]["phase"] = json!("Running");
            p
        })
        .collect();
    let refs: Vec<&Value> = running.iter().collect();
    assert!(
        reconcile(
            &refs,
            true,
            Some(&workload),
            &flavors(),
            &Priorities::default(),
            now()
        )
        .is_empty()
    );
}

#[test]
fn eviction_stops_running_pods_and_releases_quota_once_none_runs() {
    let running = member(
        "a",
        "1",
        json!({"spec": {"schedulingGates": null}, "status": {"phase": "Running"}}),
    );
    let mut workload = admitted(json!([{"name": "a1b2c3d4", "count": 1}]));
    workload["status"]["conditions"]
        .as_array_mut()
        .expect("list")
        .push(json!({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "to make room"}));
    let writes = reconcile(
        &[&running],
        true,
        Some(&workload),
        &flavors(),
        &Priorities::default(),
        now(),
    );
    let Some(PodWrite::StopPod(name, status)) = writes.first() else {
        panic!("{writes:?}")
    };
    assert_eq!(name, "a");
    assert_eq!(status["conditions"][0]["type"], "TerminationTarget");
    assert_eq!(status["conditions"][0]["reason"], "WorkloadEvicted");
    assert_eq!(
        reasons(&writes),
        [("Stopped".to_owned(), "to make room".to_owned())]
    );
    // The group still runs: quota kept.
    assert!(
        !writes
            .iter()
            .any(|w| matches!(w, PodWrite::WorkloadStatus(_)))
    );
    // A single pod is never active: stopped and released at once.
    let single = pod(
        "p",
        json!({"spec": {"schedulingGates": null}, "status": {"phase": "Running"}}),
    );
    let writes = reconcile(
        &[&single],
        false,
        Some(&workload),
        &flavors(),
        &Priorities::default(),
        now(),
    );
    assert!(matches!(writes.last(), Some(PodWrite::WorkloadStatus(s)) if s["admission"].is_null()));
}

#[test]
fn finished_pods_finish_their_workload_and_lose_the_finalizer() {
    // (pods, group, want message)
    let cases = [
        (
            vec![pod(
                "p",
                json!({"status": {"phase": "Succeeded", "message": "done"}}),
            )],
            false,
            Some((true, "done")),
        ),
        (
            vec![pod(
                "p",
                json!({"status": {"phase": "Failed", "message": "oom"}}),
            )],
            false,
            Some((false, "oom")),
        ),
        (
            vec![
                member("a", "2", json!({"status": {"phase": "Succeeded"}})),
                member("b", "2", json!({"status": {"phase": "Succeeded"}})),
            ],
            true,
            Some((true, "Pods succeeded: 2/2.")),
        ),
        (
            vec![
                member("a", "2", json!({"status": {"phase": "Succeeded"}})),
                member("b", "2", json!({"status": {"phase": "Running"}})),
            ],
            true,
            None,
        ),
        (
            vec![
                member(
                    "a",
                    "2",
                    json!({"status": {"phase": "Succeeded"}, "metadata": {"annotations": {RETRIABLE_IN_GROUP: "false"}}}),
                ),
                member("b", "2", json!({"status": {"phase": "Failed"}})),
            ],
            true,
            Some((true, "Pods succeeded: 1/2.")),
        ),
        (
            vec![member(
                "a",
                "1",
                json!({"status": {"phase": "Succeeded"}, "metadata": {"annotations": {SERVING: "true"}}}),
            )],
            true,
            None,
        ),
    ];
    let workload = admitted(json!([{"name": "main", "count": 1}]));
    for (pods, group, want) in cases {
        let refs: Vec<&Value> = pods.iter().collect();
        let writes = reconcile(
            &refs,
            group,
            Some(&workload),
            &flavors(),
            &Priorities::default(),
            now(),
        );
        let status = writes.iter().find_map(|w| match w {
            PodWrite::WorkloadStatus(s) => Some(s),
            _ => None,
        });
        let got = status.and_then(|s| {
            let finished = s["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Finished")?;
            Some((
                finished["reason"] == "Succeeded",
                finished["message"].as_str()?.to_owned(),
            ))
        });
        assert_eq!(got, want.map(|(ok, m)| (ok, m.to_owned())), "{pods:?}");
    }
    // Once the Workload finished, terminated pods lose Kueue's finalizer.
    let mut done = workload.clone();
    done["status"]["conditions"] = json!([{"type": "Finished", "status": "True"}]);
    let finished_pod = pod("p", json!({"status": {"phase": "Succeeded"}}));
    let writes = reconcile(
        &[&finished_pod],
        false,
        Some(&done),
        &flavors(),
        &Priorities::default(),
        now(),
    );
    assert_eq!(
        writes,
        [PodWrite::PatchPod(
            "p".into(),
            json!({"metadata": {"finalizers": []}})
        )]
    );
}

#[test]
fn units_group_managed_pods_by_group_name() {
    let pods = [
        member("a", "2", json!({})),
        member("b", "2", json!({})),
        pod("single", json!({})),
        json!({"metadata": {"name": "unmanaged", "uid": "u"}}),
    ];
    let units = units(&pods);
    let summary: Vec<(&str, bool, usize)> = units
        .iter()
        .map(|(key, group, pods)| (key.as_str(), *group, pods.len()))
        .collect();
    assert_eq!(
        summary,
        [("ns/test-group", true, 2), ("single-uid", false, 1)]
    );
}

#[test]
fn a_prebuilt_group_waits_for_its_parents_workload_and_is_added_to_its_owners() {
    // pod_controller.go `EnsureWorkloadOwnedByAllMembers` and jobframework's
    // `handleJobWithNoWorkload` for a prebuilt Workload.
    let prebuilt = json!({"metadata": {"labels": {labels::PREBUILT_WORKLOAD: "test-group"}}});
    let pods = [
        member("a", "2", prebuilt.clone()),
        member("b", "2", prebuilt),
    ];
    let refs: Vec<&Value> = pods.iter().collect();
    let none = reconcile(&refs, true, None, &flavors(), &Priorities::default(), now());
    assert!(none.is_empty(), "no Workload of its own: {none:?}");

    let lws_owner = json!({"apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet", "name": "lws", "uid": "lws"});
    // (owners before, owners after or None when nothing is written).
    let a = json!({"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "a-uid"});
    let b = json!({"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "b-uid"});
    let cases = [
        (
            json!([lws_owner]),
            Some((json!([lws_owner, a, b]), "Added 2 owner reference(s)")),
        ),
        (
            json!([lws_owner, a]),
            Some((json!([lws_owner, a, b]), "Added 1 owner reference(s)")),
        ),
        (json!([lws_owner, a, b]), None),
    ];
    for (before, want) in cases {
        let mut workload = json!({"metadata": {"name": "test-group", "namespace": "ns",
            "ownerReferences": before}});
        workload["status"] = json!({});
        let writes = reconcile(
            &refs,
            true,
            Some(&workload),
            &flavors(),
            &Priorities::default(),
            now(),
        );
        let owners = writes.iter().find_map(|w| match w {
            PodWrite::WorkloadOwners(owners) => Some(owners.clone()),
            _ => None,
        });
        let events: Vec<(String, String)> = reasons(&writes)
            .into_iter()
            .filter(|(reason, _)| reason == "OwnerReferencesAdded")
            .collect();
        match want {
            Some((owners_after, message)) => {
                assert_eq!(owners, Some(owners_after));
                assert_eq!(
                    events,
                    [("OwnerReferencesAdded".to_owned(), message.to_owned())]
                );
            }
            None => {
                assert_eq!(owners, None);
                assert!(events.is_empty());
            }
        }
    }
}

#[test]
fn a_pod_naming_a_missing_workload_priority_class_gets_no_workload_until_it_exists() {
    let named = pod(
        "p",
        json!({"metadata": {"labels": {PRIORITY_CLASS: "high"}}}),
    );
    let refs = [&named];
    let missing = reconcile(
        &refs,
        false,
        None,
        &flavors(),
        &Priorities::default(),
        now(),
    );
    assert_eq!(
        reasons(&missing),
        [(
            "WorkloadPriorityClassNotFound".to_owned(),
            r#"WorkloadPriorityClass "high" not found"#.to_owned()
        )]
    );
    assert!(
        !missing
            .iter()
            .any(|w| matches!(w, PodWrite::CreateWorkload(_)))
    );
    let priorities = Priorities {
        workload: [("high".to_owned(), 7)].into(),
        ..Priorities::default()
    };
    let writes = reconcile(&refs, false, None, &flavors(), &priorities, now());
    let Some(PodWrite::CreateWorkload(workload)) = writes.first() else {
        panic!("{writes:?}")
    };
    assert_eq!(workload["spec"]["priority"], 7);
}

#[test]
fn admission_lifts_the_topology_gate_unless_the_pod_set_has_a_topology_assignment() {
    use crate::api::tas::TOPOLOGY_SCHEDULING_GATE;
    let both_gates = json!({"spec": {"schedulingGates": [
        {"name": ADMISSION_GATE}, {"name": TOPOLOGY_SCHEDULING_GATE}]}});
    for (assignment, gates) in [
        (
            json!({"name": "a1b2c3d4", "count": 2, "flavors": {"cpu": "spot"}}),
            Value::Null,
        ),
        (
            json!({"name": "a1b2c3d4", "count": 2, "flavors": {"cpu": "spot"},
                "topologyAssignment": {"levels": ["rack"], "slices": []}}),
            json!([{"name": TOPOLOGY_SCHEDULING_GATE}]),
        ),
    ] {
        let pods = [
            member("a", "2", both_gates.clone()),
            member("b", "2", both_gates.clone()),
        ];
        let refs: Vec<&Value> = pods.iter().collect();
        let workload = admitted(json!([assignment]));
        let writes = reconcile_admitted_group(&refs, &workload);
        let patches = pod_patches(&writes);
        assert_eq!(patches.len(), 2, "{writes:?}");
        for patch in patches {
            assert_eq!(patch["spec"]["schedulingGates"], gates);
            // What the topology ungater finds the pod by.
            assert_eq!(
                patch["metadata"]["labels"]["kueue.x-k8s.io/podset"],
                "a1b2c3d4"
            );
            assert_eq!(
                patch["metadata"]["annotations"]["kueue.x-k8s.io/workload"],
                workload["metadata"]["name"]
            );
        }
    }
}
