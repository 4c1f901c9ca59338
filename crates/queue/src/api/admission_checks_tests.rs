use std::time::Duration;

use serde_json::json;

use super::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
}

fn stamp(seconds: u64) -> String {
    time::timestamp(at(seconds))
}

fn check(name: &str, state: &str) -> Value {
    json!({"name": name, "state": state, "message": "", "lastTransitionTime": stamp(0)})
}

fn names_and_states(states: &[Value]) -> Vec<(String, String)> {
    states
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Kueue's `TestSyncCheckStates` (pkg/controller/core/workload_controller_test.go).
#[test]
fn check_states_follow_the_required_checks() {
    type Case = (
        &'static str,
        Vec<Value>,
        Vec<&'static str>,
        Vec<(&'static str, &'static str)>,
        bool,
    );
    let cases: Vec<Case> = vec![
        ("nil conditions, nil list", vec![], vec![], vec![], false),
        (
            "add to nil conditions",
            vec![],
            vec!["ac1", "ac2"],
            vec![("ac1", PENDING), ("ac2", PENDING)],
            true,
        ),
        (
            "add and remove",
            vec![check("ac0", PENDING), check("ac1", PENDING)],
            vec!["ac1", "ac2"],
            vec![("ac1", PENDING), ("ac2", PENDING)],
            true,
        ),
        (
            "cleanup",
            vec![check("ac0", PENDING), check("ac1", PENDING)],
            vec![],
            vec![],
            true,
        ),
        (
            "preserve conditions data",
            vec![check("ac0", READY), check("ac1", PENDING)],
            vec!["ac0", "ac1"],
            vec![("ac0", READY), ("ac1", PENDING)],
            false,
        ),
    ];
    for (name, states, list, want, want_change) in cases {
        let required: BTreeSet<String> = list.into_iter().map(str::to_owned).collect();
        let (got, changed) = sync_states(&states, &required, at(5));
        let want: Vec<(String, String)> = want
            .into_iter()
            .map(|(n, s)| (n.to_owned(), s.to_owned()))
            .collect();
        assert_eq!(names_and_states(&got), want, "{name}");
        assert_eq!(changed, want_change, "{name}");
    }
}

fn retry(name: &str, since: Option<u64>, after: Option<i64>) -> Value {
    let mut c = json!({"name": name, "state": RETRY, "message": ""});
    c["lastTransitionTime"] = since.map_or(json!("1970-01-01T00:00:00Z"), |s| json!(stamp(s)));
    if let Some(after) = after {
        c["requeueAfterSeconds"] = json!(after);
    }
    c
}

/// Kueue's `TestGetMaxRetryTime` (pkg/workload/admissionchecks_test.go).
#[test]
fn the_longest_retry_wait_wins() {
    let cases: Vec<(&str, Vec<Value>, Option<u64>)> = vec![
        ("no admission checks", vec![], None),
        (
            "admission check with nil RequeueAfterSeconds",
            vec![retry("check1", Some(0), None)],
            None,
        ),
        (
            "admission check with zero LastTransitionTime",
            vec![retry("check1", None, Some(60))],
            None,
        ),
        (
            "single admission check with valid retry time",
            vec![retry("check1", Some(0), Some(60))],
            Some(60),
        ),
        (
            "multiple admission checks, returns max retry time",
            vec![
                retry("check1", Some(0), Some(60)),
                retry("check2", Some(0), Some(120)),
                retry("check3", Some(0), Some(30)),
            ],
            Some(120),
        ),
        (
            "multiple checks with mixed nil and valid values",
            vec![
                retry("check1", Some(0), None),
                retry("check2", Some(0), Some(90)),
                retry("check3", None, Some(180)),
            ],
            Some(90),
        ),
        (
            "checks with different base times",
            vec![
                retry("check1", Some(0), Some(60)),
                retry("check2", Some(30), Some(60)),
            ],
            Some(90),
        ),
        (
            "only Retry checks count",
            vec![
                json!({"name": "c", "state": READY, "requeueAfterSeconds": 60,
                "lastTransitionTime": stamp(0)}),
            ],
            None,
        ),
    ];
    for (name, states, want) in cases {
        assert_eq!(max_retry_time(&states), want.map(at), "{name}");
    }
}

#[test]
fn messages_name_the_checks_as_kueue_does() {
    let mut with_message = check("b", REJECTED);
    with_message["message"] = json!("no capacity");
    let cases = [
        (
            vec![check("a", REJECTED)],
            REJECTED,
            "AdmissionCheck in Rejected state: \"a\"",
        ),
        (
            vec![with_message, check("a", REJECTED), check("c", READY)],
            REJECTED,
            "AdmissionChecks in Rejected state: \"a\"; \"b\" (no capacity)",
        ),
    ];
    for (states, state, want) in cases {
        assert_eq!(checks_message(&states, state), want);
    }
}

fn cluster_queue(checks: Value) -> Value {
    json!({"metadata": {"name": "cq"}, "spec": {
        "resourceGroups": [
            {"coveredResources": ["cpu"], "flavors": [{"name": "on-demand"}, {"name": "spot"}]}],
        "admissionChecksStrategy": {"admissionChecks": checks}}})
}

#[test]
fn checks_apply_to_the_flavors_they_name() {
    let cq = ClusterQueueChecks::of(&cluster_queue(json!([
        {"name": "all"}, {"name": "spot-only", "onFlavors": ["spot"]},
        {"name": "both", "onFlavors": ["spot", "on-demand"]}])));
    let admission = |flavor: &str| json!({"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {"cpu": flavor}}]});
    let cases = [
        (None, vec!["all", "both"]),
        (Some(admission("spot")), vec!["all", "both", "spot-only"]),
        (Some(admission("on-demand")), vec!["all", "both"]),
    ];
    for (admission, want) in cases {
        let got: Vec<String> = cq.for_workload(admission.as_ref()).into_iter().collect();
        assert_eq!(got, want, "{admission:?}");
    }
}

#[test]
fn missing_inactive_and_misused_checks_make_the_queue_inactive() {
    let known = |list: &[(&str, &str, bool)]| -> BTreeMap<String, AdmissionCheck> {
        list.iter()
            .map(|(name, controller, active)| {
                let check = AdmissionCheck {
                    controller: (*controller).to_owned(),
                    active: *active,
                };
                ((*name).to_owned(), check)
            })
            .collect()
    };
    type Known = Vec<(&'static str, &'static str, bool)>;
    type Case = (Value, Known, Vec<(&'static str, &'static str)>);
    let cases: Vec<Case> = vec![
        (
            json!([{"name": "prov"}]),
            vec![("prov", PROVISIONING_REQUEST_CONTROLLER, true)],
            vec![],
        ),
        (
            json!([{"name": "a"}, {"name": "b"}]),
            vec![("b", "example.com/unknown", false)],
            vec![
                (
                    "AdmissionCheckNotFound",
                    "references missing AdmissionCheck(s): a",
                ),
                (
                    "AdmissionCheckInactive",
                    "references inactive AdmissionCheck(s): b",
                ),
            ],
        ),
        (
            json!([{"name": "mk1"}, {"name": "mk2", "onFlavors": ["spot"]}, {"name": "prov"}]),
            vec![
                ("mk1", MULTIKUEUE_CONTROLLER, true),
                ("mk2", MULTIKUEUE_CONTROLLER, true),
                ("prov", PROVISIONING_REQUEST_CONTROLLER, true),
            ],
            vec![
                (
                    "MultipleMultiKueueAdmissionChecks",
                    "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, found: mk1,mk2",
                ),
                (
                    "MultiKueueAdmissionCheckAppliedPerFlavor",
                    "Cannot specify MultiKueue AdmissionCheck per flavor, found: mk2",
                ),
                (
                    "MultiKueueWithProvisioningRequest",
                    "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, found: mk1,mk2, prov",
                ),
            ],
        ),
    ];
    for (checks, list, want) in cases {
        let cq = ClusterQueueChecks::of(&cluster_queue(checks.clone()));
        let got = cq.inactive_reasons(&known(&list));
        let want: Vec<(&str, String)> = want.into_iter().map(|(r, m)| (r, m.to_owned())).collect();
        assert_eq!(got, want, "{checks}");
    }
    let cq = ClusterQueueChecks::of(&cluster_queue(json!([{"name": "b"}])));
    let reasons = cq.inactive_reasons(&known(&[("b", "example.com/unknown", false)]));
    let active = status::cluster_queue_active_with(false, false, &[], &[], &reasons);
    assert_eq!(
        active,
        (
            "False",
            "AdmissionCheckInactive",
            "Can't admit new workloads: references inactive AdmissionCheck(s): b.".to_owned()
        )
    );
}

fn reserved_workload(admitted: bool, checks: Vec<Value>) -> Value {
    let admitted = if admitted {
        json!({"type": "Admitted", "status": "True", "reason": "Admitted",
            "message": "The workload is admitted", "lastTransitionTime": stamp(0)})
    } else {
        json!({"type": "Admitted", "status": "False", "reason": UNSATISFIED_ADMISSION_CHECKS,
            "message": "The workload has not all checks ready", "lastTransitionTime": stamp(0)})
    };
    json!({"metadata": {"name": "wl", "namespace": "ns", "uid": "u", "generation": 1},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": []},
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                 "message": "Quota reserved in ClusterQueue cq", "lastTransitionTime": stamp(0)},
                admitted],
            "admissionChecks": checks}})
}

fn condition<'a>(status: &'a serde_json::Map<String, Value>, kind: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[test]
fn the_workload_controller_admits_evicts_or_deactivates_by_its_checks() {
    struct Case {
        name: &'static str,
        admitted: bool,
        checks: Vec<Value>,
        required: Vec<&'static str>,
        /// (condition type, status, reason) expected in the written conditions.
        want_condition: Option<(&'static str, &'static str, &'static str)>,
        want_events: Vec<&'static str>,
        want_states: Vec<(&'static str, &'static str)>,
    }
    let mut retry_check = retry("prov", Some(10), Some(60));
    retry_check["message"] = json!("Retrying after failure: no nodes");
    let mut rejected = check("prov", REJECTED);
    rejected["message"] = json!("too big");
    let cases = vec![
        Case {
            name: "a pending check keeps it waiting",
            admitted: false,
            checks: vec![check("prov", PENDING)],
            required: vec!["prov"],
            want_condition: None,
            want_events: vec![],
            want_states: vec![],
        },
        Case {
            name: "all checks ready admit it",
            admitted: false,
            checks: vec![check("prov", READY)],
            required: vec!["prov"],
            want_condition: Some(("Admitted", "True", "Admitted")),
            want_events: vec!["Admitted"],
            want_states: vec![],
        },
        Case {
            name: "a check added to the queue is added Pending",
            admitted: false,
            checks: vec![check("prov", READY)],
            required: vec!["other", "prov"],
            want_condition: None,
            want_events: vec![],
            want_states: vec![("other", PENDING), ("prov", READY)],
        },
        Case {
            name: "retry evicts it and resets the checks",
            admitted: false,
            checks: vec![retry_check],
            required: vec!["prov"],
            want_condition: Some(("Evicted", "True", EVICTED_BY_ADMISSION_CHECK)),
            want_events: vec!["EvictedDueToAdmissionCheck"],
            want_states: vec![("prov", PENDING)],
        },
        Case {
            name: "rejected marks it for deactivation",
            admitted: true,
            checks: vec![rejected],
            required: vec!["prov"],
            want_condition: Some(("DeactivationTarget", "True", EVICTED_BY_ADMISSION_CHECK)),
            want_events: vec!["AdmissionCheckRejected"],
            want_states: vec![],
        },
    ];
    for case in cases {
        let object = reserved_workload(case.admitted, case.checks);
        let required: BTreeSet<String> = case.required.iter().map(|s| (*s).to_owned()).collect();
        let got = reconcile(&object, Some(&required), true, at(20));
        match case.want_condition {
            Some((kind, state, reason)) => {
                let found = condition(&got.status, kind).unwrap_or(&Value::Null);
                assert_eq!(found["status"], state, "{}", case.name);
                assert_eq!(found["reason"], reason, "{}", case.name);
            }
            None => assert!(got.status.get("conditions").is_none(), "{}", case.name),
        }
        let events: Vec<&str> = got.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(events, case.want_events, "{}", case.name);
        let states = got
            .status
            .get("admissionChecks")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let want: Vec<(String, String)> = case
            .want_states
            .iter()
            .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
            .collect();
        assert_eq!(names_and_states(&states), want, "{}", case.name);
    }
}

#[test]
fn a_retry_asks_for_its_requeue_time_and_counts_the_retry() {
    let mut retrying = retry("prov", Some(10), Some(60));
    retrying["message"] = json!("Retrying after failure: no nodes");
    let object = reserved_workload(false, vec![retrying]);
    let required: BTreeSet<String> = ["prov".to_owned()].into();
    let got = reconcile(&object, Some(&required), true, at(20));
    assert_eq!(
        got.status["requeueState"]["requeueAt"],
        json!(stamp(70)),
        "requeueAt is the check's transition time plus requeueAfterSeconds"
    );
    let reset = &got.status["admissionChecks"][0];
    assert_eq!(reset["retryCount"], 1);
    assert_eq!(reset["requeueAfterSeconds"], 60);
    assert_eq!(
        reset["message"],
        "Reset to Pending after eviction. Previously: Retry"
    );
    let evicted = condition(&got.status, "Evicted").unwrap_or(&Value::Null);
    assert_eq!(
        evicted["message"],
        "Evicted due to AdmissionCheck in Retry state: \"prov\" (Retrying after failure: no nodes)"
    );
}

#[test]
fn an_inactive_or_evicted_workload_is_not_evicted_again() {
    let required: BTreeSet<String> = ["prov".to_owned()].into();
    let object = reserved_workload(true, vec![check("prov", REJECTED)]);
    assert!(
        reconcile(&object, Some(&required), false, at(20))
            .events
            .is_empty()
    );
    let mut evicted = reserved_workload(true, vec![retry("prov", Some(10), None)]);
    if let Some(list) = evicted["status"]["conditions"].as_array_mut() {
        list.push(json!({"type": "Evicted", "status": "True", "reason": "AdmissionCheck"}));
    }
    assert!(
        reconcile(&evicted, Some(&required), true, at(20))
            .events
            .is_empty()
    );
}

mod through_a_pass {
    use super::*;
    use crate::api::objects::Objects;
    use crate::api::pass::{Queues, Settings, pass};

    fn objects(check_active: Option<bool>, workload_status: Value) -> Objects {
        let mut check = json!({"metadata": {"name": "prov"},
            "spec": {"controllerName": PROVISIONING_REQUEST_CONTROLLER}});
        if let Some(active) = check_active {
            let state = if active { "True" } else { "False" };
            check["status"] = json!({"conditions": [{"type": "Active", "status": state}]});
        }
        Objects {
            flavors: vec![json!({"metadata": {"name": "default"}, "spec": {}})],
            cluster_queues: vec![
                json!({"metadata": {"name": "cq", "generation": 1}, "spec": {
                "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default",
                    "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]}}}),
            ],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "ns"},
                "spec": {"clusterQueue": "cq"}})],
            workloads: crate::api::objects::shared([
                json!({"metadata": {"name": "wl", "namespace": "ns", "uid": "u",
                "generation": 1, "creationTimestamp": stamp(0)},
                "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1,
                    "template": {"spec": {"containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "1"}}}]}}}]},
                "status": workload_status}),
            ]),
            namespaces: vec![json!({"metadata": {"name": "ns"}})],
            admission_checks: check_active.map(|_| check).into_iter().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn quota_is_reserved_and_admission_waits_for_the_check() {
        let mut queues = Queues::default();
        let first = pass(
            &objects(Some(true), json!({})),
            &mut queues,
            &Settings::default(),
            at(1),
        );
        let written = &first.workloads[0].status;
        let reserved = written["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "QuotaReserved"));
        assert_eq!(reserved.map(|c| c["status"].clone()), Some(json!("True")));
        let admitted = written["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Admitted"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(admitted["status"], "False");
        assert_eq!(admitted["reason"], UNSATISFIED_ADMISSION_CHECKS);
        assert_eq!(
            names_and_states(&states(&json!({"status": written}))),
            vec![("prov".to_owned(), PENDING.to_owned())]
        );
        let events: Vec<&str> = first.events.iter().map(|e| e.reason.as_str()).collect();
        assert_eq!(events, vec!["QuotaReserved"]);
        // The check turns Ready: the next pass admits it.
        let mut ready = written.clone();
        ready["admissionChecks"][0]["state"] = json!(READY);
        let second = pass(
            &objects(Some(true), ready),
            &mut queues,
            &Settings::default(),
            at(9),
        );
        let admitted = second.workloads[0].status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Admitted"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(admitted["status"], "True");
        let event = second.events.iter().find(|e| e.reason == "Admitted");
        assert_eq!(
            event.map(|e| e.message.as_str()),
            Some("Admitted by ClusterQueue cq, wait time since reservation was 8s")
        );
    }

    #[test]
    fn a_queue_whose_check_is_missing_or_inactive_admits_nothing_and_says_why() {
        let cases = [
            (
                None,
                "AdmissionCheckNotFound",
                "Can't admit new workloads: references missing AdmissionCheck(s): prov.",
            ),
            (
                Some(false),
                "AdmissionCheckInactive",
                "Can't admit new workloads: references inactive AdmissionCheck(s): prov.",
            ),
        ];
        for (active, reason, message) in cases {
            let decided = pass(
                &objects(active, json!({})),
                &mut Queues::default(),
                &Settings::default(),
                at(1),
            );
            let active_condition = decided.cluster_queues[0].status["conditions"]
                .as_array()
                .and_then(|l| l.iter().find(|c| c["type"] == "Active"))
                .cloned()
                .unwrap_or_default();
            assert_eq!(active_condition["status"], "False");
            assert_eq!(active_condition["reason"], reason);
            assert_eq!(active_condition["message"], message);
            assert!(
                decided
                    .workloads
                    .iter()
                    .all(|w| w.status.get("admission").is_none_or(Value::is_null)),
                "{reason}: nothing admitted"
            );
        }
    }
}
