//! Explanations of waiting Workloads: the short resource with the cohort's borrower and the
//! candidates reclamation could free; blockers; admitted, finished and deactivated
//! Workloads; and the preemption policies' rules as a table.

use super::*;
use serde_json::json;
use std::time::Duration;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn cluster_queue(name: &str, cpu: &str, reclaim: &str) -> Value {
    json!({"metadata": {"name": name, "generation": 1}, "spec": {"namespaceSelector": {},
        "cohortName": "team", "preemption": {"reclaimWithinCohort": reclaim},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor",
            "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
}

fn workload(name: &str, queue: &str, cpu: &str, priority: i32, status: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
            "creationTimestamp": tessera_model::time::timestamp(now())},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main",
            "count": 1, "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu}}}]}}}]},
        "status": status})
}

fn admitted(cluster_queue: &str, cpu: &str) -> Value {
    json!({"conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "lastTransitionTime": tessera_model::time::timestamp(now())},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "lastTransitionTime": tessera_model::time::timestamp(now())}],
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": [{"name": "main",
            "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}, "count": 1}]}})
}

fn objects(reclaim: &str, workloads: Vec<Value>) -> Objects {
    Objects {
        flavors: vec![json!({"metadata": {"name": "default-flavor"}, "spec": {}})],
        cluster_queues: vec![
            cluster_queue("team-a", "4", reclaim),
            cluster_queue("team-b", "2", "Never"),
        ],
        cohorts: Vec::new(),
        local_queues: vec![
            json!({"metadata": {"name": "queue-a", "namespace": "default"}, "spec": {"clusterQueue": "team-a"}}),
            json!({"metadata": {"name": "queue-b", "namespace": "default"}, "spec": {"clusterQueue": "team-b"}}),
            json!({"metadata": {"name": "stopped", "namespace": "default"}, "spec": {"clusterQueue": "team-a", "stopPolicy": "Hold"}}),
        ],
        workloads: crate::api::objects::shared(workloads),
        namespaces: vec![json!({"metadata": {"name": "default"}})],
        ..Default::default()
    }
}

fn pending_condition() -> Value {
    json!({"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
        "message": "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 3 more needed"}]})
}

fn explained(input: &Objects, name: &str) -> String {
    super::workload(input, "default", name, now())
        .map(|lines| lines.join("\n"))
        .unwrap_or_else(|| "<none>".to_owned())
}

#[test]
fn a_waiting_workload_names_the_short_resource_the_borrower_and_what_reclaim_frees() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "Any",
            &[
                "Workload default/big is pending in LocalQueue queue-a (priority 0).",
                "It is number 1 of 1 pending in ClusterQueue team-a and number 1 of 1 in LocalQueue queue-a.",
                "Kueue's QuotaReserved condition: Pending: couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default-flavor, 3 more needed",
                "PodSet main needs 4 cpu in flavor default-flavor: ClusterQueue team-a has nominal 4, uses 0, can take 1 more (borrowing included): short by 3.",
                "  ClusterQueue team-b of its cohort borrows 3 cpu of flavor default-flavor beyond its nominal quota.",
                "Preemption (withinClusterQueue: Never, reclaimWithinCohort: Any):",
                "  could preempt default/borrower (priority 5) in ClusterQueue team-b.",
            ],
            &[],
        ),
        (
            "LowerPriority",
            &[
                "Preemption (withinClusterQueue: Never, reclaimWithinCohort: LowerPriority):",
                "  nothing it may preempt holds the quota it is short of.",
            ],
            &["could preempt"],
        ),
    ];
    for (reclaim, wanted, unwanted) in cases {
        let input = objects(
            reclaim,
            vec![
                workload("borrower", "queue-b", "5", 5, admitted("team-b", "5")),
                workload("big", "queue-a", "4", 0, pending_condition()),
            ],
        );
        let text = explained(&input, "big");
        for line in *wanted {
            assert!(
                text.lines().any(|l| l == *line),
                "{reclaim}: missing {line:?} in\n{text}"
            );
        }
        for part in *unwanted {
            assert!(
                !text.contains(part),
                "{reclaim}: unexpected {part:?} in\n{text}"
            );
        }
    }
}

#[test]
fn other_states_are_told_in_one_sentence() {
    let mut inactive = workload("off", "queue-a", "1", 0, json!({}));
    inactive["spec"]["active"] = json!(false);
    let input = objects(
        "Never",
        vec![
            workload("running", "queue-b", "1", 0, admitted("team-b", "1")),
            workload(
                "done",
                "queue-a",
                "1",
                0,
                json!({"conditions": [{"type": "Finished", "status": "True"}]}),
            ),
            inactive,
            workload("held", "stopped", "1", 0, json!({})),
            workload("lost", "nowhere", "1", 0, json!({})),
        ],
    );
    let cases = [
        (
            "running",
            "Workload default/running is admitted in ClusterQueue team-b.",
        ),
        ("done", "Workload default/done has finished."),
        (
            "off",
            "Workload default/off is deactivated (spec.active is false): it is not queued until it is activated again.",
        ),
        (
            "held",
            "It is not queued: LocalQueue stopped is stopped (Suspended).",
        ),
        (
            "lost",
            "It is not queued: LocalQueue nowhere doesn't exist (Misconfigured).",
        ),
        ("missing", "<none>"),
    ];
    for (name, line) in cases {
        let text = explained(&input, name);
        assert!(
            text.lines().any(|l| l == line),
            "{name}: missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn preemption_policies_allow_by_priority_and_age() {
    let target = |priority: i64, seconds: u64| AdmittedWorkload {
        namespace: "default".into(),
        name: "t".into(),
        uid: "t".into(),
        cluster_queue: "cq".into(),
        priority,
        queue_timestamp: now() + Duration::from_secs(seconds),
        quota_reserved_at: None,
        usage: Default::default(),
        evicted: false,
        local_queue: "lq".into(),
        user: None,
    };
    use PreemptionPolicy::*;
    let cases = [
        (Never, 0, 0, false),
        (LowerPriority, 0, 0, true),
        (LowerPriority, 1, 0, false),
        (LowerOrNewerEqualPriority, 1, 10, true),
        (LowerOrNewerEqualPriority, 1, 0, false),
        (LowerOrNewerEqualPriority, 2, 10, false),
        (Any, 9, 0, true),
    ];
    for (policy, priority, seconds, want) in cases {
        assert_eq!(
            allows(policy, 1, now(), &target(priority, seconds)),
            want,
            "{policy:?} target priority {priority} +{seconds}s"
        );
    }
}
