//! Table tests ported from Kueue's `multikueue/workload_test.go` (`TestWlReconcile`, the
//! Job cases without elastic workloads or preemption gates), `admissioncheck_test.go` and
//! `multikueuecluster_test.go` (the status the reconcilers write).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::time;

use super::cluster::{Connection, cluster_status, kubeconfig_secret, retry_after};
use super::workload::{Group, Worker, Write, reconcile};
use super::{DEFAULT_ORIGIN, DEFAULT_WORKER_LOST_TIMEOUT, active_status};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn stamp(ago: Duration) -> String {
    time::timestamp(now() - ago)
}

fn checks() -> BTreeMap<String, Value> {
    BTreeMap::from([(
        "ac1".to_owned(),
        json!({"metadata": {"name": "ac1"}, "spec": {"controllerName": "kueue.x-k8s.io/multikueue"}}),
    )])
}

/// The base Workload `wl1` with these extra parts.
#[derive(Default, Clone)]
struct Wl {
    check: Option<(&'static str, &'static str)>,
    owner: Option<(&'static str, &'static str)>,
    reserved: bool,
    origin: bool,
    cluster: Option<&'static str>,
    conditions: Vec<(&'static str, &'static str, &'static str)>,
}

impl Wl {
    fn job(self) -> Wl {
        Wl {
            owner: Some(("batch/v1", "Job")),
            ..self
        }
    }
    fn pending(self) -> Wl {
        Wl {
            check: Some(("Pending", "")),
            ..self
        }
    }
    fn ready_on_worker1(self) -> Wl {
        Wl {
            check: Some(("Ready", "The workload was admitted on \"worker1\"")),
            ..self
        }
    }
    fn reserved(self) -> Wl {
        Wl {
            reserved: true,
            ..self
        }
    }
    fn remote(self) -> Wl {
        Wl {
            origin: true,
            ..self
        }
    }
    fn cluster(self, name: &'static str) -> Wl {
        Wl {
            cluster: Some(name),
            ..self
        }
    }
    fn condition(mut self, kind: &'static str, reason: &'static str, message: &'static str) -> Wl {
        self.conditions.push((kind, reason, message));
        self
    }
    fn build(&self) -> Value {
        let mut wl = json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "wl1", "namespace": "ns"},
            "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1}]},
            "status": {"conditions": []}});
        if let Some((api_version, kind)) = self.owner {
            wl["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind,
                "name": "job1", "uid": "uid1", "controller": true}]);
        }
        if self.origin {
            wl["metadata"]["labels"] = json!({"kueue.x-k8s.io/multikueue-origin": DEFAULT_ORIGIN});
        }
        if let Some((state, message)) = self.check {
            wl["status"]["admissionChecks"] =
                json!([{"name": "ac1", "state": state, "message": message}]);
        }
        let mut conditions = Vec::new();
        if self.reserved {
            wl["status"]["admission"] = json!({"clusterQueue": "q1"});
            conditions.push(
                json!({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                "lastTransitionTime": stamp(Duration::ZERO)}),
            );
        }
        for (kind, reason, message) in &self.conditions {
            conditions.push(json!({"type": kind, "status": "True", "reason": reason,
                "message": message, "lastTransitionTime": stamp(Duration::ZERO)}));
        }
        wl["status"]["conditions"] = json!(conditions);
        if let Some(cluster) = self.cluster {
            wl["status"]["clusterName"] = json!(cluster);
        }
        wl
    }
}

fn job(managed: bool, remote: bool) -> Value {
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job1", "namespace": "ns"},
        "spec": {"suspend": false, "template": {"spec": {"containers": []}}}, "status": {}});
    if managed {
        job["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    }
    if remote {
        job["metadata"]["labels"] = json!({"kueue.x-k8s.io/prebuilt-workload-name": "wl1",
            "kueue.x-k8s.io/multikueue-origin": DEFAULT_ORIGIN});
    }
    job
}

fn with_status(mut object: Value, status: Value) -> Value {
    object["status"] = status;
    object
}

/// The object as a client shows one that was never given a status.
fn without_status(mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
    object
}

/// One write as a line of text, times left out.
fn describe(write: &Write) -> String {
    match write {
        Write::CreateRemote { cluster, object } => format!(
            "create {cluster} {} {} labels={}",
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
            object["metadata"]["labels"]
        ),
        Write::RemoveRemote {
            cluster,
            owner,
            workload,
        } => {
            let owner = owner
                .as_ref()
                .map_or("-".to_owned(), |(kind, name)| format!("{kind:?}/{name}"));
            format!("remove {cluster} owner={owner} workload={workload}")
        }
        Write::UpdateRemotePriority { cluster, spec } => format!("priority {cluster} {spec}"),
        Write::DeactivateRemote {
            cluster,
            conditions,
        } => {
            let target = conditions
                .iter()
                .find(|c| c["type"] == "DeactivationTarget");
            format!(
                "deactivate {cluster} {}",
                target.map_or(Value::Null, |c| c["message"].clone())
            )
        }
        Write::OwnerStatus(status) => format!("owner status {status}"),
        Write::WorkloadStatus(status) => {
            let mut parts = Vec::new();
            for state in status["admissionChecks"].as_array().into_iter().flatten() {
                parts.push(format!(
                    "check {} {}: {}",
                    state["name"].as_str().unwrap_or_default(),
                    state["state"].as_str().unwrap_or_default(),
                    state["message"].as_str().unwrap_or_default()
                ));
            }
            if let Some(name) = status.get("clusterName") {
                parts.push(format!("clusterName={name}"));
            }
            if let Some(names) = status.get("nominatedClusterNames") {
                parts.push(format!("nominated={names}"));
            }
            for condition in status["conditions"].as_array().into_iter().flatten() {
                if condition["type"] == "Finished" {
                    parts.push(format!(
                        "Finished {}: {}",
                        condition["reason"].as_str().unwrap_or_default(),
                        condition["message"].as_str().unwrap_or_default()
                    ));
                }
            }
            format!("workload {}", parts.join("; "))
        }
        Write::Event(event) => format!("event {} {}: {}", event.kind, event.reason, event.message),
        Write::RequeueAfter(after) => format!("requeue {}s", after.as_secs()),
    }
}

struct Case {
    name: &'static str,
    manager: Value,
    owner: Option<Value>,
    workers: Vec<(&'static str, Remote)>,
    want: Vec<String>,
}

enum Remote {
    Lost(Option<Duration>),
    Has(Option<Value>, Option<Value>),
}

const ORIGIN_LABELS: &str = r#"{"kueue.x-k8s.io/multikueue-origin":"multikueue"}"#;

fn run(case: &Case) -> Vec<String> {
    let workers: BTreeMap<String, Worker<'_>> = case
        .workers
        .iter()
        .map(|(name, remote)| {
            let worker = match remote {
                Remote::Lost(ago) => Worker::Unreachable {
                    lost_since: ago.map(|a| now() - a),
                },
                Remote::Has(workload, owner) => Worker::Reachable {
                    workload: workload.as_ref(),
                    owner: owner.as_ref(),
                },
            };
            ((*name).to_owned(), worker)
        })
        .collect();
    let admission_checks = checks();
    let group = Group {
        workload: &case.manager,
        admission_checks: &admission_checks,
        owner: case.owner.as_ref(),
        workers: &workers,
        origin: DEFAULT_ORIGIN,
        worker_lost_timeout: DEFAULT_WORKER_LOST_TIMEOUT,
    };
    reconcile(&group, now()).iter().map(describe).collect()
}

fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn workload_reconcile_table() {
    let base = Wl::default;
    let admitted = |wl: Wl| wl.condition("Admitted", "Admitted", "");
    // worker1 alone, showing its copy of the Workload admitted and `remote_job`.
    let admitted_on_worker1 = |remote_job: Value| {
        let copy = admitted(base().job().reserved().remote()).build();
        vec![("worker1", Remote::Has(Some(copy), Some(remote_job)))]
    };
    let cases = vec![
        Case {
            name: "unmanaged wl (no ac) is ignored",
            manager: base().build(),
            owner: None,
            workers: vec![("worker1", Remote::Has(None, None))],
            want: vec![],
        },
        Case {
            name: "unmanaged wl (no parent) is rejected",
            manager: base().pending().build(),
            owner: None,
            workers: vec![("worker1", Remote::Has(None, None))],
            want: lines(&[r#"workload check ac1 Rejected: No multikueue adapter found, Previously: "Pending""#]),
        },
        Case {
            name: "unmanaged wl (owned by pod) is rejected",
            manager: Wl { owner: Some(("v1", "Pod")), ..base().pending() }.build(),
            owner: None,
            workers: vec![("worker1", Remote::Has(None, None))],
            want: lines(&[r#"workload check ac1 Rejected: No multikueue adapter found for owner kind "/v1, Kind=Pod", Previously: "Pending""#]),
        },
        Case {
            name: "unmanaged wl (job not managed by multikueue) is rejected",
            manager: base().pending().job().build(),
            owner: Some(job(false, false)),
            workers: vec![("worker1", Remote::Has(None, None))],
            want: lines(&[r#"workload check ac1 Rejected: The owner is not managed by Kueue: Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not "", Previously: "Pending""#]),
        },
        Case {
            name: "deleted MultiKueue workload: its objects on the reachable workers are removed",
            manager: {
                let mut wl = base().pending().job().reserved().build();
                wl["metadata"]["deletionTimestamp"] = json!(stamp(Duration::ZERO));
                wl
            },
            owner: None,
            workers: vec![
                ("worker1", Remote::Has(Some(base().remote().build()), Some(job(false, true)))),
                ("worker2", Remote::Lost(None)),
            ],
            want: lines(&["remove worker1 owner=Job/job1 workload=true"]),
        },
        Case {
            name: "reconnecting clients are skipped",
            manager: base().pending().job().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(None, None)), ("worker2", Remote::Lost(Some(Duration::ZERO)))],
            want: lines(&["requeue 900s"]),
        },
        Case {
            name: "wl without reservation, clears the workload objects",
            manager: base().pending().job().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(Some(base().remote().build()), None))],
            want: lines(&["remove worker1 owner=- workload=true"]),
        },
        Case {
            name: "wl with reservation, creates missing workloads",
            manager: base().pending().job().reserved().build(),
            owner: Some(job(true, false)),
            workers: vec![
                ("worker1", Remote::Has(Some(base().pending().job().reserved().remote().build()), None)),
                ("worker2", Remote::Has(None, None)),
            ],
            want: vec![
                r#"workload nominated=["worker1","worker2"]"#.to_owned(),
                format!("create worker2 Workload wl1 labels={ORIGIN_LABELS}"),
            ],
        },
        Case {
            name: "remote wl with reservation but not admitted - other workers not deleted",
            manager: Wl { reserved: true, ..base().pending().job() }.build(),
            owner: Some(job(true, false)),
            workers: vec![
                ("worker1", Remote::Has(Some(base().pending().job().reserved().remote().build()), None)),
                ("worker2", Remote::Has(Some(base().pending().job().remote().build()), None)),
            ],
            want: lines(&[r#"workload nominated=["worker1","worker2"]"#]),
        },
        Case {
            name: "remote wl admitted - other workers deleted",
            manager: base().pending().job().reserved().build(),
            owner: Some(job(true, false)),
            workers: vec![
                ("worker1", Remote::Has(Some(admitted(base().pending().job().reserved().remote()).build()), None)),
                ("worker2", Remote::Has(Some(base().pending().job().remote().build()), None)),
            ],
            want: vec![
                "remove worker2 owner=- workload=true".to_owned(),
                format!(
                    "create worker1 Job job1 labels={}",
                    r#"{"kueue.x-k8s.io/multikueue-origin":"multikueue","kueue.x-k8s.io/prebuilt-workload-name":"wl1"}"#
                ),
                r#"workload check ac1 Ready: The workload was admitted on "worker1"; clusterName="worker1"; nominated=null"#.to_owned(),
                r#"event Normal MultiKueue: The workload was admitted on "worker1""#.to_owned(),
                "requeue 900s".to_owned(),
            ],
        },
        Case {
            name: "handle workload evicted on manager cluster",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1")
                .condition("Evicted", "ByTest", "Evicted by test").build(),
            owner: Some(with_status(job(true, false), json!({"active": 1}))),
            workers: vec![
                ("worker1", Remote::Has(
                    Some(base().job().reserved().remote()
                        .condition("Evicted", "DeactivatedDueToEvictedOnManagerCluster", "Evicted on manager: Evicted by test").build()),
                    Some(with_status(job(false, true), json!({"active": 0}))),
                )),
                ("worker2", Remote::Has(Some(base().job().build()), None)),
            ],
            want: lines(&[r#"owner status {"active":0}"#]),
        },
        Case {
            name: "handle workload evicted on worker cluster",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(with_status(job(true, false), json!({"active": 1}))),
            workers: vec![
                ("worker1", Remote::Has(
                    Some(base().job().reserved().remote()
                        .condition("Evicted", "DeactivatedDueToEvictedOnWorkerCluster", "Evicted on worker: Evicted by test").build()),
                    Some(with_status(job(false, true), json!({"active": 1}))),
                )),
                ("worker2", Remote::Has(Some(base().job().build()), None)),
            ],
            want: lines(&[
                r#"workload check ac1 Retry: Workload evicted on worker cluster: "worker1", resetting for re-admission. Previously: "Ready""#,
                r#"event Normal MultiKueue: Workload evicted on worker cluster: "worker1", resetting for re-admission. Previously: "Ready""#,
            ]),
        },
        Case {
            name: "remote wl finished OutOfSync: reset admission check to Retry instead of finishing the local workload",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(
                Some(base().job().reserved().remote().condition("Finished", "OutOfSync", "out of sync").build()),
                Some(job(false, true)),
            ))],
            want: lines(&[
                r#"workload check ac1 Retry: Remote workload on worker cluster "worker1" is out of sync with its user job, resetting for re-dispatch, Previously: "Ready""#,
                r#"event Warning MultiKueue: Remote workload on worker cluster "worker1" is out of sync with its user job, resetting for re-dispatch"#,
            ]),
        },
        Case {
            name: "remote wl is finished, but the remote controller object must be owned before SyncJob",
            manager: base().ready_on_worker1().job().reserved().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(
                Some(base().job().reserved().remote().condition("Finished", "ByTest", "by test").build()),
                Some(job(false, false)),
            ))],
            want: vec![],
        },
        Case {
            name: "remote wl is finished, the local workload and Job are marked completed",
            manager: base().ready_on_worker1().job().reserved().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(
                Some(base().job().reserved().remote().condition("Finished", "ByTest", "by test").build()),
                Some(with_status(job(false, true), json!({"conditions": [{"type": "Complete", "status": "True"}]}))),
            ))],
            want: lines(&[
                r#"owner status {"conditions":[{"type":"Complete","status":"True"}]}"#,
                "workload Finished ByTest: by test",
            ]),
        },
        Case {
            name: "the local Job is marked finished, the remote objects are removed",
            manager: base().ready_on_worker1().job().reserved().condition("Finished", "ByTest", "by test").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(
                Some(base().job().reserved().remote().build()),
                Some(job(false, true)),
            ))],
            want: lines(&["remove worker1 owner=Job/job1 workload=true"]),
        },
        Case {
            name: "the local workload admission check stays Ready if the reservation was lost less than WorkerLostTimeout ago",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Lost(Some(DEFAULT_WORKER_LOST_TIMEOUT / 2)))],
            want: lines(&["requeue 450s"]),
        },
        Case {
            name: "the local workload's admission check is set to Retry if the reservation was lost more than WorkerLostTimeout ago",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Lost(Some(DEFAULT_WORKER_LOST_TIMEOUT * 3 / 2)))],
            want: lines(&[r#"workload check ac1 Retry: Admitting remote lost, Previously: "Ready""#]),
        },
        Case {
            name: "the local workload is retried immediately when the admitting cluster is reachable but its remote workload is gone",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(None, None))],
            want: lines(&[r#"workload check ac1 Retry: Admitting remote no longer exists, Previously: "Ready""#]),
        },
        Case {
            name: "a copy on the admitting worker that lost its admission: retried at once",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(Some(base().job().remote().build()), Some(job(false, true))))],
            want: lines(&[r#"workload check ac1 Retry: Admitting remote no longer exists, Previously: "Ready""#]),
        },
        Case {
            name: "the local workload is NOT evicted when the admitting cluster is only reconnecting",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Lost(Some(Duration::from_secs(60))))],
            want: lines(&["requeue 840s"]),
        },
        Case {
            name: "the local workload is retried when the admission check is Ready but no admitting cluster is recorded",
            manager: base().ready_on_worker1().job().reserved().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(None, None))],
            want: lines(&[r#"workload check ac1 Retry: Admission check is Ready but no admitting cluster is recorded; this is unexpected, please report it, Previously: "Ready""#]),
        },
        Case {
            name: "worker reconnects after the local workload is requeued, remote objects are deleted",
            manager: base().pending().job().build(),
            owner: Some(job(true, false)),
            workers: vec![("worker1", Remote::Has(Some(base().job().reserved().remote().build()), Some(job(false, true))))],
            want: lines(&["remove worker1 owner=Job/job1 workload=true"]),
        },
        Case {
            name: "the admitted worker's job status is mirrored back; nothing else changes once Ready",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![
                ("worker1", Remote::Has(Some(admitted(base().job().reserved().remote()).build()),
                    Some(with_status(job(false, true), json!({"active": 2}))))),
                ("worker2", Remote::Lost(None)),
            ],
            want: lines(&[r#"owner status {"active":2}"#, "requeue 900s"]),
        },
        Case {
            name: "an out-of-sync copy on another worker is withdrawn, the admitting one kept",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(job(true, false)),
            workers: vec![
                ("worker1", Remote::Has(Some(admitted(base().job().reserved().remote()).build()), Some(job(false, true)))),
                ("worker2", Remote::Has(Some(with_spec(base().job().remote().build(), json!({"queueName": "other"}))), None)),
            ],
            want: lines(&["remove worker2 owner=- workload=true", "requeue 900s"]),
        },
        Case {
            name: "a worker's job without status leaves a manager job shown without status alone",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(without_status(job(true, false))),
            workers: admitted_on_worker1(without_status(job(false, true))),
            want: lines(&["requeue 900s"]),
        },
        Case {
            name: "a worker's job status is copied onto a manager job shown without status",
            manager: base().ready_on_worker1().job().reserved().cluster("worker1").build(),
            owner: Some(without_status(job(true, false))),
            workers: admitted_on_worker1(with_status(job(false, true), json!({"active": 1}))),
            want: lines(&[r#"owner status {"active":1}"#, "requeue 900s"]),
        },
    ];
    for case in &cases {
        assert_eq!(run(case), case.want, "{}", case.name);
    }
}

fn with_spec(mut object: Value, spec: Value) -> Value {
    object["spec"] = spec;
    object
}

#[test]
fn the_suspended_manager_job_gets_a_suspended_condition_until_it_runs() {
    use super::adapter::{OwnerKind, status_update};
    let mut local = job(true, false);
    local["spec"]["suspend"] = json!(true);
    let running = with_status(job(false, true), json!({"active": 1}));
    let (status, deferred) = status_update(OwnerKind::Job, &local, &running, now());
    assert!(deferred);
    assert_eq!(status["conditions"][0]["type"], "Suspended");
    assert_eq!(status["conditions"][0]["reason"], "MultiKueueAdapter");
    let done = with_status(
        job(false, true),
        json!({"conditions": [{"type": "Complete", "status": "True"}]}),
    );
    assert_eq!(
        status_update(OwnerKind::Job, &local, &done, now()),
        (done["status"].clone(), false)
    );
    let set = with_status(job(false, true), json!({"active": 3}));
    assert_eq!(
        status_update(OwnerKind::JobSet, &local, &set, now()),
        (json!({"active": 3}), false)
    );
}

#[test]
fn the_remote_job_copy_drops_managed_by_selector_and_controller_labels() {
    use super::adapter::{OwnerKind, remote_copy};
    let mut local = job(true, false);
    local["metadata"]["uid"] = json!("u");
    local["spec"]["selector"] = json!({"matchLabels": {"controller-uid": "u"}});
    local["spec"]["template"]["metadata"] =
        json!({"labels": {"controller-uid": "u", "job-name": "job1", "app": "x"}});
    let copy = remote_copy(OwnerKind::Job, &local, "wl1", "m");
    assert_eq!(
        copy["metadata"],
        json!({"name": "job1", "namespace": "ns", "labels": {
        "kueue.x-k8s.io/multikueue-origin": "m", "kueue.x-k8s.io/prebuilt-workload-name": "wl1"}})
    );
    assert!(copy["spec"].get("managedBy").is_none());
    assert!(copy["spec"].get("selector").is_none());
    assert_eq!(
        copy["spec"]["template"]["metadata"]["labels"],
        json!({"app": "x"})
    );
    let mut set = json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {"managedBy": "kueue.x-k8s.io/multikueue", "replicatedJobs": []}});
    let copy = remote_copy(OwnerKind::JobSet, &set, "wl1", "m");
    assert_eq!(copy["kind"], "JobSet");
    assert_eq!(copy["spec"], json!({"replicatedJobs": []}));
    set["spec"]["managedBy"] = json!("other");
    assert!(super::adapter::unmanaged_reason(&set).is_some());
}

#[test]
fn admission_check_active_table() {
    let config =
        json!({"metadata": {"name": "config1"}, "spec": {"clusters": ["worker1", "worker2"]}});
    let configs = BTreeMap::from([("config1".to_owned(), config)]);
    let check = |params: Value| {
        json!({"metadata": {"name": "ac1", "generation": 1},
        "spec": {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": params}})
    };
    let good = json!({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "config1"});
    let cluster = |name: &str, active: bool| {
        (
            name.to_owned(),
            json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Active", "status": if active { "True" } else { "False" }, "reason": "x"}]}}),
        )
    };
    type CheckCase<'a> = (
        &'a str,
        Value,
        BTreeMap<String, Value>,
        (&'a str, &'a str, &'a str),
    );
    let cases: Vec<CheckCase<'_>> = vec![
        (
            "missing config",
            check(
                json!({"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "nope"}),
            ),
            BTreeMap::new(),
            (
                "False",
                "BadConfig",
                r#"Cannot load the AdmissionChecks parameters: multikueueconfigs.kueue.x-k8s.io "nope" not found"#,
            ),
        ),
        (
            "wrong kind",
            check(json!({"apiGroup": "kueue.x-k8s.io", "kind": "Other", "name": "config1"})),
            BTreeMap::new(),
            (
                "False",
                "BadConfig",
                r#"Cannot load the AdmissionChecks parameters: wrong kind "Other", expecting "MultiKueueConfig": bad parameters reference"#,
            ),
        ),
        (
            "missing cluster",
            check(good.clone()),
            BTreeMap::from([cluster("worker1", true)]),
            ("True", "SomeActiveClusters", "Missing clusters: [worker2]"),
        ),
        (
            "inactive cluster",
            check(good.clone()),
            BTreeMap::from([cluster("worker1", true), cluster("worker2", false)]),
            ("True", "SomeActiveClusters", "Inactive clusters: [worker2]"),
        ),
        (
            "missing and inactive cluster",
            check(good.clone()),
            BTreeMap::from([cluster("worker1", false)]),
            (
                "False",
                "NoUsableClusters",
                "Missing clusters: [worker2], Inactive clusters: [worker1]",
            ),
        ),
        (
            "all clusters active",
            check(good.clone()),
            BTreeMap::from([cluster("worker1", true), cluster("worker2", true)]),
            ("True", "Active", "The admission check is active"),
        ),
    ];
    for (name, object, clusters, (status, reason, message)) in cases {
        let written = active_status(&object, &configs, &clusters, now()).expect(name);
        let condition = &written["conditions"][0];
        assert_eq!(
            (
                condition["status"].as_str(),
                condition["reason"].as_str(),
                condition["message"].as_str()
            ),
            (Some(status), Some(reason), Some(message)),
            "{name}"
        );
        assert_eq!(condition["observedGeneration"], 1, "{name}");
        let mut again = object.clone();
        again["status"] = written;
        assert_eq!(
            active_status(&again, &configs, &clusters, now()),
            None,
            "{name}: up to date"
        );
    }
    let other = json!({"spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}});
    assert_eq!(
        active_status(&other, &configs, &BTreeMap::new(), now()),
        None
    );
}

#[test]
fn cluster_active_table() {
    let cluster = json!({"metadata": {"name": "worker1", "generation": 2},
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": "worker1-secret"}}}});
    assert_eq!(kubeconfig_secret(&cluster), Ok("worker1-secret"));
    assert!(kubeconfig_secret(&json!({"spec": {}})).is_err());
    let path = json!({"spec": {"clusterSource": {"kubeConfig": {"locationType": "Path", "location": "/x"}}}});
    assert!(kubeconfig_secret(&path).is_err());
    let next = now() + Duration::from_secs(10);
    let cases = [
        (
            "connected",
            Connection::Connected,
            ("True", "Active", "Connected".to_owned()),
        ),
        (
            "missing secret",
            Connection::BadKubeConfig(r#"secrets "worker1-secret" not found"#.into()),
            (
                "False",
                "BadKubeConfig",
                r#"load client config failed: secrets "worker1-secret" not found"#.to_owned(),
            ),
        ),
        (
            "failed first attempt",
            Connection::Failed {
                error: "dial tcp: refused".into(),
                attempts: 0,
                next_attempt: next,
            },
            (
                "False",
                "ClientConnectionFailed",
                "dial tcp: refused".to_owned(),
            ),
        ),
        (
            "failed again",
            Connection::Failed {
                error: "dial tcp: refused".into(),
                attempts: 2,
                next_attempt: next,
            },
            (
                "False",
                "ClientConnectionFailed",
                format!(
                    "dial tcp: refused; connection attempts: 2, next connection attempt: {}",
                    time::timestamp(next)
                ),
            ),
        ),
    ];
    for (name, connection, (status, reason, message)) in cases {
        let written = cluster_status(&cluster, &connection, now()).expect(name);
        let condition = &written["conditions"][0];
        assert_eq!(
            (
                condition["status"].as_str(),
                condition["reason"].as_str(),
                condition["message"].as_str()
            ),
            (Some(status), Some(reason), Some(message.as_str())),
            "{name}"
        );
        let mut again = cluster.clone();
        again["status"] = written;
        assert_eq!(
            cluster_status(&again, &connection, now()),
            None,
            "{name}: up to date"
        );
    }
    let waits: Vec<u64> = [0, 1, 2, 3, 7, 8, 100]
        .iter()
        .map(|n| retry_after(*n).as_secs())
        .collect();
    assert_eq!(waits, [0, 5, 10, 20, 320, 320, 320]);
}
