use super::*;

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds)
}

fn job(spec: Value) -> Value {
    let mut spec = spec;
    spec["template"] =
        json!({"spec": {"containers": [{"name": "main", "image": "i"}], "restartPolicy": "Never"}});
    json!({"metadata": {"name": "train", "namespace": "ml", "uid": "job-uid"}, "spec": spec})
}

fn pod(name: &str, phase: &str, index: Option<i64>, exit: Option<i64>) -> Value {
    let mut pod = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
        "finalizers": [TRACKING_FINALIZER], "annotations": {}}, "status": {"phase": phase}});
    if let Some(index) = index {
        pod["metadata"]["annotations"][COMPLETION_INDEX] = json!(index.to_string());
    }
    if let Some(code) = exit {
        pod["status"]["containerStatuses"] = json!([{"name": "main", "state": {"terminated": {"exitCode": code, "finishedAt": timestamp(at(0))}}}]);
    }
    pod
}

fn with_status(mut job: Value, plan: &JobPlan) -> Value {
    job["status"] = plan.status.clone();
    job
}

#[test]
fn creates_up_to_parallelism_and_completes() {
    let j = job(json!({"parallelism": 2, "completions": 3}));
    let first = plan(&j, &[], at(0), Duration::from_secs(10));
    assert_eq!(first.create, vec![None, None]);
    assert_eq!(first.status["startTime"], timestamp(at(0)));
    let j = with_status(j, &first);
    let pods = [
        pod("a", "Succeeded", None, Some(0)),
        pod("b", "Running", None, None),
    ];
    let second = plan(&j, &pods, at(5), Duration::from_secs(10));
    assert_eq!(second.status["succeeded"], 1);
    assert_eq!(
        second.create,
        vec![None],
        "one more to reach min(parallelism, remaining)"
    );
    assert_eq!(second.release, vec!["a"]);
    assert_eq!(
        second.status["uncountedTerminatedPods"]["succeeded"],
        json!(["uid-a"])
    );
    // The finalizer was released: the pod is counted once and leaves the uncounted list.
    let j = with_status(j, &second);
    let mut a = pod("a", "Succeeded", None, Some(0));
    a["metadata"]["finalizers"] = json!([]);
    let pods = [
        a,
        pod("b", "Succeeded", None, Some(0)),
        pod("c", "Succeeded", None, Some(0)),
    ];
    let third = plan(&j, &pods, at(9), Duration::from_secs(10));
    assert_eq!(third.status["succeeded"], 3);
    assert_eq!(
        third.status["uncountedTerminatedPods"]["succeeded"],
        json!(["uid-b", "uid-c"])
    );
    let kinds: Vec<&str> = third.status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["SuccessCriteriaMet", "Complete"]);
    assert_eq!(third.status["completionTime"], timestamp(at(9)));
}

#[test]
fn indexed_jobs_create_each_index_once() {
    let j = job(json!({"parallelism": 3, "completions": 4, "completionMode": "Indexed"}));
    let pods = [
        pod("p0", "Succeeded", Some(0), Some(0)),
        pod("p2", "Running", Some(2), None),
    ];
    let plan = plan(&j, &pods, at(0), Duration::from_secs(10));
    assert_eq!(plan.create, vec![Some(1), Some(3)]);
    assert_eq!(plan.status["completedIndexes"], "0");
    let created = pod_for(&j, Some(3));
    assert_eq!(created["metadata"]["generateName"], "train-3-");
    assert_eq!(created["metadata"]["annotations"][COMPLETION_INDEX], "3");
    assert_eq!(
        created["spec"]["containers"][0]["env"][0],
        json!({"name": "JOB_COMPLETION_INDEX", "value": "3"})
    );
    assert_eq!(
        created["metadata"]["ownerReferences"][0]["controller"],
        true
    );
}

#[test]
fn backoff_limit_fails_the_job_after_active_pods_stop() {
    let j = job(json!({"completions": 1, "backoffLimit": 1}));
    let pods = [
        pod("a", "Failed", None, Some(1)),
        pod("b", "Failed", None, Some(1)),
    ];
    let plan = plan(&j, &pods, at(100), Duration::from_secs(10));
    let conditions = plan.status["conditions"].as_array().unwrap();
    assert_eq!(conditions[0]["type"], "FailureTarget");
    assert_eq!(conditions[1]["type"], "Failed");
    assert_eq!(conditions[1]["reason"], "BackoffLimitExceeded");
    assert_eq!(
        conditions[1]["message"],
        "Job has reached the specified backoff limit"
    );
    assert!(plan.create.is_empty());
}

#[test]
fn failures_back_off_exponentially() {
    let j = job(json!({"completions": 1, "backoffLimit": 5}));
    let pods = [pod("a", "Failed", None, Some(1))];
    let early = plan(&j, &pods, at(3), Duration::from_secs(10));
    assert!(early.create.is_empty());
    assert_eq!(early.requeue_after, Some(Duration::from_secs(7)));
    let later = plan(&j, &pods, at(11), Duration::from_secs(10));
    assert_eq!(later.create, vec![None]);
}

#[test]
fn pod_failure_policy_actions() {
    let policy = json!({"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]});
    let j = job(json!({"completions": 1, "backoffLimit": 6, "podFailurePolicy": policy}));
    let fatal = plan(
        &j,
        &[pod("a", "Failed", None, Some(42))],
        at(0),
        Duration::ZERO,
    );
    let failed = fatal.status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Failed")
        .unwrap()
        .clone();
    assert_eq!(failed["reason"], "PodFailurePolicy");
    assert_eq!(
        fatal.failure_policy_actions,
        BTreeMap::from([("FailJob".to_string(), 1)])
    );
    assert_eq!(
        failed["message"],
        "Container main for pod ml/a failed with exit code 42 matching FailJob rule at index 0"
    );
    let mut disrupted = pod("b", "Failed", None, Some(137));
    disrupted["status"]["conditions"] = json!([{"type": "DisruptionTarget", "status": "True"}]);
    let ignored = plan(&j, &[disrupted], at(0), Duration::ZERO);
    assert_eq!(
        ignored.status["failed"], 0,
        "ignored failures are not counted"
    );
    assert_eq!(ignored.create, vec![None]);
    assert_eq!(
        ignored.failure_policy_actions,
        BTreeMap::from([("Ignore".to_string(), 1)])
    );
    // A failure no rule matches is counted by no action.
    let unmatched = plan(
        &j,
        &[pod("c", "Failed", None, Some(1))],
        at(0),
        Duration::ZERO,
    );
    assert!(unmatched.failure_policy_actions.is_empty());
}

#[test]
fn backoff_limit_per_index_and_success_policy() {
    let j = job(
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "backoffLimitPerIndex": 0}),
    );
    let pods = [
        pod("p0", "Failed", Some(0), Some(1)),
        pod("p1", "Succeeded", Some(1), Some(0)),
        pod("p2", "Succeeded", Some(2), Some(0)),
    ];
    let plan_failed = plan(&j, &pods, at(0), Duration::ZERO);
    assert_eq!(plan_failed.status["failedIndexes"], "0");
    assert!(
        plan_failed.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Failed" && c["reason"] == "FailedIndexes")
    );

    let j = job(
        json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed",
        "successPolicy": {"rules": [{"succeededIndexes": "0"}]}}),
    );
    let pods = [
        pod("p0", "Succeeded", Some(0), Some(0)),
        pod("p1", "Running", Some(1), None),
    ];
    let early = plan(&j, &pods, at(0), Duration::ZERO);
    assert_eq!(
        early.delete,
        vec!["p1"],
        "remaining pods are stopped once the policy is met"
    );
    let kinds: Vec<&str> = early.status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["SuccessCriteriaMet"]);
}

#[test]
fn deadlines_suspension_and_ttl() {
    let j = job(json!({"completions": 1, "activeDeadlineSeconds": 30}));
    let j = with_status(j.clone(), &plan(&j, &[], at(0), Duration::ZERO));
    let running = [pod("a", "Running", None, None)];
    let before = plan(&j, &running, at(10), Duration::ZERO);
    assert_eq!(before.requeue_after, Some(Duration::from_secs(20)));
    let after = plan(&j, &running, at(31), Duration::ZERO);
    assert_eq!(after.delete, vec!["a"]);
    assert!(
        after.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["reason"] == "DeadlineExceeded")
    );

    let suspended = job(json!({"completions": 1, "suspend": true}));
    let plan_suspended = plan(&suspended, &running, at(0), Duration::ZERO);
    assert_eq!(plan_suspended.delete, vec!["a"]);
    assert!(plan_suspended.create.is_empty());
    assert_eq!(
        plan_suspended.status["conditions"][0]["reason"],
        "JobSuspended"
    );

    let mut done = job(json!({"completions": 1, "ttlSecondsAfterFinished": 60}));
    done["status"] = json!({"completionTime": timestamp(at(0)), "conditions": [{"type": "Complete", "status": "True"}]});
    assert_eq!(
        plan(&done, &[], at(30), Duration::ZERO).requeue_after,
        Some(Duration::from_secs(30))
    );
    assert!(plan(&done, &[], at(60), Duration::ZERO).delete_job);
}

#[test]
fn index_lists_round_trip() {
    let set = parse_indexes("0,2-4,7");
    assert_eq!(set.iter().copied().collect::<Vec<_>>(), [0, 2, 3, 4, 7]);
    assert_eq!(format_indexes(&set), "0,2-4,7");
    assert!(parse_indexes("x,-,5-a").is_empty());
}

#[test]
fn only_jobs_left_to_the_job_controller_are_run() {
    for (managed_by, here) in [
        (None, true),
        (Some("kubernetes.io/job-controller"), true),
        (Some("kueue.x-k8s.io/multikueue"), false),
    ] {
        let mut job = json!({"spec": {}});
        if let Some(manager) = managed_by {
            job["spec"]["managedBy"] = json!(manager);
        }
        assert_eq!(managed_here(&job), here, "{managed_by:?}");
        assert_eq!(
            crate::jobset::managed_here(&job),
            managed_by.is_none(),
            "jobset {managed_by:?}"
        );
    }
}
