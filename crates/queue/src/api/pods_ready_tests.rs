use super::*;
use crate::config::RequeuingStrategy;
use crate::queue::RequeuingTimestamp;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
}

fn stamp(seconds: u64) -> String {
    time::timestamp(at(seconds))
}

/// A Workload with conditions `(type, status, reason, transition second)`.
fn workload(conditions: &[(&str, &str, &str, u64)]) -> Value {
    let list: Vec<Value> = conditions
        .iter()
        .map(|(kind, state, reason, second)| {
            json!({"type": kind, "status": state, "reason": reason, "message": "",
                "lastTransitionTime": stamp(*second)})
        })
        .collect();
    json!({"metadata": {"name": "wl", "namespace": "ns"}, "status": {"conditions": list}})
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|list| list.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

fn config(limit: Option<i32>) -> WaitForPodsReady {
    WaitForPodsReady {
        timeout: Duration::from_secs(300),
        block_admission: false,
        recovery_timeout: Some(Duration::from_secs(60)),
        requeuing: RequeuingStrategy {
            timestamp: RequeuingTimestamp::Eviction,
            backoff_limit_count: limit,
            backoff_base_seconds: 60,
            backoff_max_seconds: 3600,
        },
    }
}

#[test]
fn a_jobs_pods_are_ready_when_ready_and_succeeded_reach_its_count() {
    let cases = [
        (
            json!({"spec": {"parallelism": 3}, "status": {"ready": 3}}),
            true,
        ),
        (
            json!({"spec": {"parallelism": 3}, "status": {"ready": 2}}),
            false,
        ),
        (
            json!({"spec": {"parallelism": 3}, "status": {"ready": 1, "succeeded": 1,
                "uncountedTerminatedPods": {"succeeded": ["a"]}}}),
            true,
        ),
        // Fewer completions than parallelism: the completions count.
        (
            json!({"spec": {"parallelism": 3, "completions": 2}, "status": {"ready": 2}}),
            true,
        ),
        (json!({"spec": {}, "status": {}}), false),
    ];
    for (job, want) in cases {
        assert_eq!(job_pods_ready(&job), want, "{job}");
    }
}

#[test]
fn the_pods_ready_condition_follows_kueues_reasons() {
    let admitted = ("Admitted", "True", "Admitted", 0);
    let cases = [
        // Not admitted: waiting for the start, whatever the pods say.
        (workload(&[]), true, Some(("False", "WaitForStart"))),
        (
            workload(&[admitted]),
            false,
            Some(("False", "WaitForStart")),
        ),
        (workload(&[admitted]), true, Some(("True", "Started"))),
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForStart", 1)]),
            false,
            None,
        ),
        (
            workload(&[admitted, ("PodsReady", "True", "Started", 1)]),
            true,
            None,
        ),
        (
            workload(&[admitted, ("PodsReady", "True", "Started", 1)]),
            false,
            Some(("False", "WaitForRecovery")),
        ),
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForRecovery", 1)]),
            true,
            Some(("True", "Recovered")),
        ),
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForRecovery", 1)]),
            false,
            None,
        ),
        // The old reason is read as waiting for the start.
        (
            workload(&[admitted, ("PodsReady", "False", "PodsReady", 1)]),
            false,
            Some(("False", "WaitForStart")),
        ),
    ];
    for (object, ready, want) in cases {
        let got = pods_ready_status(&object, ready, at(10));
        let got = got.as_ref().map(|s| {
            let c = condition(s, PODS_READY);
            (
                c["status"].as_str().unwrap_or_default(),
                c["reason"].as_str().unwrap_or_default(),
            )
        });
        assert_eq!(got, want, "{object} ready={ready}");
    }
}

#[test]
fn backoff_doubles_from_the_base_up_to_the_cap() {
    let cases = [
        (1, 60, 3600, 60),
        (2, 60, 3600, 120),
        (3, 60, 3600, 240),
        (7, 60, 3600, 3600),
        (40, 60, 3600, 3600),
        (1, 1, 10, 1),
        (5, 1, 10, 10),
    ];
    for (count, base, max, want) in cases {
        assert_eq!(
            backoff(count, base, max),
            Duration::from_secs(want),
            "{count} {base} {max}"
        );
    }
}

#[test]
fn a_late_workload_is_evicted_with_a_backoff_then_deactivated() {
    let admitted = ("Admitted", "True", "Admitted", 0);
    let mut requeued_twice = workload(&[admitted]);
    requeued_twice["status"]["requeueState"] = json!({"count": 2});
    // (object, limit, now, want: None | Some(evicted count/requeueAt) | deactivation)
    let cases: [(Value, Option<i32>, u64, Option<&str>); 8] = [
        (workload(&[admitted]), None, 299, None),
        (workload(&[admitted]), None, 300, Some(PODS_READY_TIMEOUT)),
        (
            workload(&[admitted, ("PodsReady", "True", "Started", 5)]),
            None,
            1000,
            None,
        ),
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForStart", 5)]),
            None,
            300,
            Some(PODS_READY_TIMEOUT),
        ),
        // Recovery counts from the failure, with its own timeout.
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForRecovery", 500)]),
            None,
            559,
            None,
        ),
        (
            workload(&[admitted, ("PodsReady", "False", "WaitForRecovery", 500)]),
            None,
            560,
            Some(PODS_READY_TIMEOUT),
        ),
        (
            requeued_twice.clone(),
            Some(3),
            300,
            Some(PODS_READY_TIMEOUT),
        ),
        (requeued_twice, Some(2), 300, Some(DEACTIVATION_TARGET)),
    ];
    for (object, limit, now, want) in cases {
        let got = not_ready_timeout(&object, &config(limit), at(now));
        match (want, got) {
            (None, None) => {}
            (Some(PODS_READY_TIMEOUT), Some(timeout)) => {
                let evicted = condition(&timeout.status, EVICTED);
                assert_eq!(evicted["reason"], PODS_READY_TIMEOUT, "{object}");
                assert_eq!(evicted["message"], "Exceeded the PodsReady timeout ns/wl");
                let count = requeue_count(&object) + 1;
                assert_eq!(timeout.status["requeueState"]["count"], count);
                let wait = backoff(count, 60, 3600).as_secs();
                assert_eq!(
                    timeout.status["requeueState"]["requeueAt"],
                    stamp(now + wait),
                    "{object}"
                );
                let event = timeout.event.expect("an event");
                assert_eq!(event.reason, "EvictedDueToPodsReadyTimeout");
            }
            (Some(DEACTIVATION_TARGET), Some(timeout)) => {
                let target = condition(&timeout.status, DEACTIVATION_TARGET);
                assert_eq!(target["reason"], REQUEUING_LIMIT_EXCEEDED);
                assert!(timeout.status.get("requeueState").is_none());
                assert!(condition(&timeout.status, EVICTED).is_null());
            }
            (want, got) => panic!("{object} at {now}: want {want:?}, got {got:?}"),
        }
    }
    // Evicted already, or not admitted: nothing.
    let evicted = workload(&[admitted, ("Evicted", "True", "Preempted", 1)]);
    assert_eq!(not_ready_timeout(&evicted, &config(None), at(1000)), None);
    let reserved = workload(&[("QuotaReserved", "True", "QuotaReserved", 0)]);
    assert_eq!(not_ready_timeout(&reserved, &config(None), at(1000)), None);
}

#[test]
fn a_deactivation_target_deactivates_and_names_its_cause() {
    let marked = workload(&[
        ("Admitted", "True", "Admitted", 0),
        ("DeactivationTarget", "True", REQUEUING_LIMIT_EXCEEDED, 1),
    ]);
    let mut marked = marked;
    marked["status"]["conditions"][1]["message"] =
        json!("exceeding the maximum number of re-queuing retries");
    marked["status"]["requeueState"] = json!({"count": 2});
    assert!(must_deactivate(&marked, true));
    assert!(!must_deactivate(&marked, false));
    let (status, event) = deactivated_by_target(&marked, at(5)).expect("evicted");
    let evicted = condition(&status, EVICTED);
    assert_eq!(evicted["reason"], "DeactivatedDueToRequeuingLimitExceeded");
    assert_eq!(
        evicted["message"],
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    );
    assert!(condition(&status, DEACTIVATION_TARGET).is_null());
    assert_eq!(status["requeueState"], Value::Null);
    assert_eq!(
        event.reason,
        "EvictedDueToDeactivatedDueToRequeuingLimitExceeded"
    );
    assert_eq!(
        deactivated_by_target(&workload(&[("Admitted", "True", "", 0)]), at(5)),
        None
    );
}

#[test]
fn the_backoff_ends_with_requeued_true() {
    let held = |requeue_at: Option<u64>| {
        let mut object = workload(&[("Requeued", "False", PODS_READY_TIMEOUT, 0)]);
        object["status"]["requeueState"] = json!({"count": 1});
        if let Some(second) = requeue_at {
            object["status"]["requeueState"]["requeueAt"] = json!(stamp(second));
        }
        object
    };
    let preempted = workload(&[("Requeued", "False", "Preempted", 0)]);
    let reserved = {
        let mut object = held(Some(10));
        object["status"]["conditions"]
            .as_array_mut()
            .expect("list")
            .push(json!({"type": "QuotaReserved", "status": "True"}));
        object
    };
    let cases = [
        (held(Some(60)), 59, false),
        (held(Some(60)), 60, true),
        (held(None), 0, true),
        (preempted, 100, false),
        (reserved, 100, false),
    ];
    for (object, now, want) in cases {
        let got = backoff_finished(&object, at(now));
        assert_eq!(got.is_some(), want, "{object} at {now}");
        if let Some(status) = got {
            let requeued = condition(&status, REQUEUED);
            assert_eq!(requeued["status"], "True");
            assert_eq!(requeued["reason"], "BackoffFinished");
            assert_eq!(requeued["message"], "The workload backoff was finished");
            if object.pointer("/status/requeueState/requeueAt").is_some() {
                assert_eq!(
                    status["requeueState"],
                    json!({"count": 1, "requeueAt": null})
                );
            }
        }
    }
}

#[test]
fn only_admitted_workloads_not_ready_block_admission() {
    let cases = [
        (workload(&[("Admitted", "True", "", 0)]), true),
        (
            workload(&[
                ("Admitted", "True", "", 0),
                ("PodsReady", "True", "Started", 1),
            ]),
            false,
        ),
        (
            workload(&[
                ("Admitted", "True", "", 0),
                ("Evicted", "True", "Preempted", 1),
            ]),
            false,
        ),
        (workload(&[("QuotaReserved", "True", "", 0)]), false),
    ];
    for (object, want) in cases {
        assert_eq!(blocks_admission(&object), want, "{object}");
    }
}
