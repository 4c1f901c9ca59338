//! Kueue's batch/v1 Job integration (`pkg/controller/jobs/job`) on the job framework
//! ([`crate::api::framework`]): one PodSet `main` from the template (the Job controller's
//! labels left out) with `parallelism` (or fewer `completions`) pods and `minCount` from
//! `kueue.x-k8s.io/job-min-parallelism`; finished on `Complete`/`Failed`; active while
//! `status.active` is above zero; the flavors' node selector and tolerations go into
//! `spec.template`, and under partial admission `parallelism` (and `completions` when the Job
//! keeps them equal) follows the admitted count.
//!
//! Knows only the Job's shape: the reconcile steps are the framework's.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::json as json_read;

use crate::api::framework::{self, Integration, JOB_COMPLETION_INDEX, PodSet, PodSetInfo};
use crate::flavor::ResourceFlavorSpec;

pub use crate::api::framework::{
    JOB_UID, JobWrite, PRIORITY_CLASS, Priorities, QUEUE_NAME, queue_name,
};
/// The annotation allowing partial admission down to that many pods.
pub const MIN_PARALLELISM: &str = "kueue.x-k8s.io/job-min-parallelism";
/// The annotation keeping `completions` equal to `parallelism`.
pub const COMPLETIONS_EQUAL_PARALLELISM: &str = "kueue.x-k8s.io/job-completions-equal-parallelism";

/// Pod template labels the Job controller manages, left out of the Workload's template
/// (`cleanLabels`; `batch.kubernetes.io/job-name` is kept).
const MANAGED_LABELS: [&str; 3] = [
    "batch.kubernetes.io/controller-uid",
    "controller-uid",
    "job-name",
];

/// batch/v1 Job as Kueue integrates it (framework `batch/job`).
pub const JOB: Integration = Integration {
    framework: crate::config::JOB_FRAMEWORK,
    api_version: "batch/v1",
    kind: "Job",
    component: "batch/job-kueue-controller",
    pod_sets,
    finished,
    active,
    pods_ready: crate::api::pods_ready::job_pods_ready,
    pod_set_infos_patch,
    scale,
};

/// `GetWorkloadNameForOwnerWithGVK` for a batch/v1 Job.
pub fn workload_name(job_name: &str, job_uid: &str) -> String {
    framework::workload_name(job_name, job_uid, (JOB.group(), JOB.kind))
}

/// The Workload Kueue constructs for a Job.
pub fn workload_for(job: &Value, priorities: &Priorities) -> Value {
    framework::workload_for(&JOB, job, priorities)
}

/// What to write for a Job labelled with a queue name ([`framework::reconcile`] for Jobs).
pub fn reconcile(
    job: &Value,
    workload: Option<&Value>,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
    priorities: &Priorities,
    now: SystemTime,
) -> Vec<JobWrite> {
    framework::reconcile(&JOB, job, workload, flavors, priorities, now)
}

pub use crate::api::framework::Options;

/// [`reconcile`] with the Configuration's options ([`framework::reconcile_with`] for Jobs): a
/// Job without a queue name is managed when `options` say so, and with waitForPodsReady the
/// Workload's `PodsReady` condition follows the Job's ready pods.
pub fn reconcile_with(
    job: &Value,
    workload: Option<&Value>,
    (flavors, priorities): (&BTreeMap<String, ResourceFlavorSpec>, &Priorities),
    options: Options,
    now: SystemTime,
) -> Vec<JobWrite> {
    framework::reconcile_with(&JOB, job, workload, (flavors, priorities), options, now)
}

fn int(job: &Value, pointer: &str) -> Option<i32> {
    json_read::int(job, pointer).and_then(|v| i32::try_from(v).ok())
}

fn annotation<'a>(job: &'a Value, key: &str) -> Option<&'a str> {
    job.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `podsCount`: parallelism (1 when unset), or fewer completions of a Job spec.
pub(crate) fn pods_count(spec: &Value) -> i32 {
    let parallelism = int(spec, "/parallelism").unwrap_or(1);
    match int(spec, "/completions") {
        Some(completions) if completions < parallelism => completions,
        _ => parallelism,
    }
}

fn min_count(job: &Value) -> Option<i32> {
    annotation(job, MIN_PARALLELISM).and_then(|v| v.parse().ok())
}

fn pod_sets(job: &Value) -> Vec<PodSet> {
    let mut template = job
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(labels) = template
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for label in MANAGED_LABELS {
            labels.remove(label);
        }
    }
    let topology_request = framework::topology_request(&template, Some(JOB_COMPLETION_INDEX), None);
    vec![PodSet {
        name: "main".into(),
        template,
        count: pods_count(job.get("spec").unwrap_or(&Value::Null)),
        min_count: min_count(job),
        topology_request,
    }]
}

fn finished(job: &Value) -> Option<(bool, String)> {
    framework::finished_by_condition(job, ("Complete", "Failed"))
}

fn active(job: &Value) -> bool {
    json_read::int(job, "/status/active").unwrap_or(0) > 0
}

/// The merge patch setting `current` (a map) to `wanted`: its keys, and null for the rest.
fn map_patch(current: Option<&Value>, wanted: &Map<String, Value>) -> Value {
    let mut patch = wanted.clone();
    for key in current
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if !wanted.contains_key(key) {
            patch.insert(key.clone(), Value::Null);
        }
    }
    Value::Object(patch)
}

/// The template's nodeSelector and tolerations set to the (one) PodSet's info, and its
/// labels and annotations where they differ from it.
fn pod_set_infos_patch(job: &Value, infos: &[PodSetInfo]) -> Map<String, Value> {
    let Some(info) = infos.first() else {
        return Map::new();
    };
    let current = job.pointer("/spec/template/spec/nodeSelector");
    let tolerations = if info.tolerations.is_empty() {
        Value::Null
    } else {
        Value::Array(info.tolerations.clone())
    };
    let gates = if info.scheduling_gates.is_empty() {
        Value::Null
    } else {
        Value::Array(info.scheduling_gates.clone())
    };
    let mut template = json!({"spec": {"nodeSelector": map_patch(current, &info.node_selector),
        "tolerations": tolerations, "schedulingGates": gates}});
    let metadata = job.pointer("/spec/template/metadata");
    // The job controller's labels stay (`RestorePodSetsInfo` keeps `managedLabels`).
    let mut labels = info.labels.clone();
    for label in MANAGED_LABELS {
        if let Some(value) =
            metadata.and_then(|m| m.pointer(&format!("/labels/{}", label.replace('/', "~1"))))
        {
            labels.insert(label.to_string(), value.clone());
        }
    }
    for (field, wanted) in [("labels", &labels), ("annotations", &info.annotations)] {
        let current = metadata.and_then(|m| m.get(field));
        if current
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
            != *wanted
        {
            template["metadata"][field] = map_patch(current, wanted);
        }
    }
    let mut fields = Map::new();
    fields.insert("template".into(), template);
    fields
}

/// Under partial admission (`minCount` set), `parallelism` (and `completions` when the Job
/// keeps them equal) follow the PodSet's count.
fn scale(job: &Value, counts: &[Option<i64>], patch: &mut Value) {
    if min_count(job).is_some()
        && let Some(Some(count)) = counts.first()
    {
        patch["spec"]["parallelism"] = json!(count);
        if annotation(job, COMPLETIONS_EQUAL_PARALLELISM) == Some("true") {
            patch["spec"]["completions"] = json!(count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn job(extra: Value) -> Value {
        let mut job = json!({"metadata": {"name": "sample-job", "namespace": "default", "uid": "u-1",
                "labels": {QUEUE_NAME: "user-queue"}},
            "spec": {"parallelism": 3, "completions": 3, "suspend": true, "template": {
                "metadata": {"labels": {"controller-uid": "u-1", "batch.kubernetes.io/job-name": "sample-job"}},
                "spec": {"nodeSelector": {"own": "x"}, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": "1"}}}]}}}});
        merge(&mut job, extra);
        job
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

    #[test]
    fn workload_names_follow_kueues_hash() {
        // sha1("Job\nbatch\nsample-job\nu-1"): kind, group, name, UID.
        let mut hash = sha1_smol::Sha1::new();
        hash.update(b"Job\nbatch\nsample-job\nu-1");
        let want = format!("job-sample-job-{}", &hash.digest().to_string()[..5]);
        assert_eq!(workload_name("sample-job", "u-1"), want);
        let long = "a".repeat(300);
        let name = workload_name(&long, "u");
        assert_eq!(name.len(), 253);
        assert!(name.starts_with("job-aaa"));
    }

    #[test]
    fn a_job_naming_a_prebuilt_workload_waits_for_it_instead_of_constructing_one() {
        let label = tessera_model::kueue::pod::PREBUILT_WORKLOAD;
        let suspended = job(json!({"metadata": {"labels": {label: "wl1"}}}));
        assert_eq!(
            crate::api::framework::prebuilt_workload(&suspended).as_deref(),
            Some("default/wl1")
        );
        let none = Priorities::default();
        assert_eq!(
            reconcile(&suspended, None, &BTreeMap::new(), &none, now()),
            vec![]
        );
        let running =
            job(json!({"metadata": {"labels": {label: "wl1"}}, "spec": {"suspend": false}}));
        let writes = reconcile(&running, None, &BTreeMap::new(), &none, now());
        assert!(
            matches!(writes.as_slice(), [JobWrite::PatchJob(_), JobWrite::Event(e)] if e.reason == "Stopped"),
            "{writes:?}"
        );
        assert_eq!(
            crate::api::framework::prebuilt_workload(&job(json!({}))),
            None
        );
    }

    #[test]
    fn a_job_naming_a_missing_workload_priority_class_waits_for_it() {
        // jobframework `ExtractPriority`: NotFound is reported and no Workload is made.
        let object = job(json!({"metadata": {"labels": {PRIORITY_CLASS: "missing-wpc"}}}));
        let writes = reconcile(
            &object,
            None,
            &BTreeMap::new(),
            &Priorities::default(),
            now(),
        );
        let [JobWrite::Event(event)] = writes.as_slice() else {
            panic!("{writes:?}");
        };
        assert_eq!(
            (event.kind, event.reason.as_str(), event.message.as_str()),
            (
                "Warning",
                "WorkloadPriorityClassNotFound",
                r#"WorkloadPriorityClass "missing-wpc" not found"#
            )
        );
    }

    #[test]
    fn a_job_gets_its_workload_with_podset_and_priority() {
        let priorities = Priorities {
            workload: [("high".to_owned(), 1000)].into(),
            pod: [("pc".to_owned(), 7), ("default-pc".to_owned(), 3)].into(),
            pod_default: Some("default-pc".into()),
        };
        let cases = [
            (json!({}), None, 3),
            (
                json!({"metadata": {"labels": {PRIORITY_CLASS: "high"}}}),
                Some("WorkloadPriorityClass"),
                1000,
            ),
            (
                json!({"spec": {"template": {"spec": {"priorityClassName": "pc"}}}}),
                Some("PriorityClass"),
                7,
            ),
        ];
        for (extra, kind, priority) in cases {
            let object = job(extra.clone());
            let writes = reconcile(&object, None, &BTreeMap::new(), &priorities, now());
            let [JobWrite::CreateWorkload(workload), JobWrite::Event(event)] = writes.as_slice()
            else {
                panic!("{extra}: {writes:?}");
            };
            assert_eq!(workload["spec"]["priority"], priority, "{extra}");
            match kind {
                Some(kind) => assert_eq!(workload["spec"]["priorityClassRef"]["kind"], kind),
                None => assert_eq!(
                    workload["spec"]["priorityClassRef"]["kind"], "PriorityClass",
                    "global default"
                ),
            }
            assert_eq!(
                workload["metadata"]["name"],
                workload_name("sample-job", "u-1")
            );
            assert_eq!(workload["metadata"]["labels"][JOB_UID], "u-1");
            assert_eq!(event.reason, "CreatedWorkload");
            assert_eq!(
                event.message,
                format!(
                    "Created Workload: default/{}",
                    workload_name("sample-job", "u-1")
                )
            );
            assert_eq!(
                workload["metadata"]["ownerReferences"][0]["controller"],
                true
            );
            assert_eq!(workload["spec"]["queueName"], "user-queue");
            let pod_set = &workload["spec"]["podSets"][0];
            assert_eq!(
                (&pod_set["name"], &pod_set["count"]),
                (&json!("main"), &json!(3))
            );
            let labels = &pod_set["template"]["metadata"]["labels"];
            assert!(labels.get("controller-uid").is_none());
            assert_eq!(labels["batch.kubernetes.io/job-name"], "sample-job");
        }
        // A running Job without a Workload is suspended first.
        let writes = reconcile(
            &job(json!({"spec": {"suspend": false}})),
            None,
            &BTreeMap::new(),
            &priorities,
            now(),
        );
        assert!(matches!(&writes[0], JobWrite::PatchJob(p) if p["spec"]["suspend"] == true));
        assert!(matches!(&writes[1], JobWrite::Event(e) if e.message == "missing workload"));
        assert!(matches!(&writes[2], JobWrite::CreateWorkload(_)));
    }

    /// The writes without the events.
    fn changes(
        job: &Value,
        workload: Option<&Value>,
        flavors: &BTreeMap<String, ResourceFlavorSpec>,
        priorities: &Priorities,
        now: SystemTime,
    ) -> Vec<JobWrite> {
        reconcile(job, workload, flavors, priorities, now)
            .into_iter()
            .filter(|w| !matches!(w, JobWrite::Event(_)))
            .collect()
    }

    #[test]
    fn each_change_to_a_job_is_recorded_as_kueue_records_it() {
        let mut evicted = admitted_workload(3);
        evicted["metadata"] = json!({"name": "wl", "namespace": "default"});
        evicted["status"]["conditions"]
            .as_array_mut()
            .expect("list")
            .push(json!({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "to make room"}));
        let mut finished_workload = admitted_workload(3);
        finished_workload["metadata"] = json!({"name": "wl", "namespace": "default"});
        let cases = [
            (
                job(json!({})),
                Some(admitted_workload(3)),
                ("Started", "Admitted by clusterQueue cq"),
            ),
            (
                job(json!({"spec": {"suspend": false}})),
                Some(evicted),
                ("Stopped", "to make room"),
            ),
            (
                job(json!({"spec": {"suspend": false}})),
                Some(json!({"status": {}})),
                ("Stopped", "Not admitted by cluster queue"),
            ),
            (
                job(
                    json!({"status": {"conditions": [{"type": "Failed", "status": "True", "message": "x"}]}}),
                ),
                Some(finished_workload),
                (
                    "FinishedWorkload",
                    "Workload 'default/wl' is declared finished",
                ),
            ),
        ];
        for (object, workload, (reason, message)) in cases {
            let writes = reconcile(
                &object,
                workload.as_ref(),
                &BTreeMap::new(),
                &Priorities::default(),
                now(),
            );
            let events: Vec<(&str, &str)> = writes
                .iter()
                .filter_map(|w| match w {
                    JobWrite::Event(e) => Some((e.reason.as_str(), e.message.as_str())),
                    _ => None,
                })
                .collect();
            assert_eq!(events, [(reason, message)], "{writes:?}");
        }
    }

    fn admitted_workload(count: i64) -> Value {
        json!({"spec": {"podSets": [{"name": "main", "count": 3,
                "template": {"spec": {"nodeSelector": {"own": "x"}}}}]},
            "status": {"conditions": [
                {"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
                "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main",
                    "flavors": {"cpu": "spot", "memory": "spot"}, "count": count}]}}})
    }

    /// Kueue's `NewWorkload`: only the job's `provreq.kueue.x-k8s.io/` annotations are copied.
    #[test]
    fn provisioning_request_parameters_travel_with_the_workload() {
        let annotated = job(json!({"metadata": {"annotations": {
            "provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600", "team": "a"}}}));
        let workload = workload_for(&annotated, &Priorities::default());
        assert_eq!(
            workload["metadata"]["annotations"],
            json!({"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"})
        );
        let plain = workload_for(&job(json!({})), &Priorities::default());
        assert!(plain["metadata"].get("annotations").is_none());
    }

    /// Kueue's `getPodSetsInfoFromStatus`: a Ready check's `podSetUpdates` go into the
    /// template when the job starts, and come out again when it is stopped.
    #[test]
    fn admission_check_pod_set_updates_go_into_the_template_and_are_restored() {
        let mut workload = admitted_workload(3);
        workload["spec"]["podSets"][0]["template"]["metadata"] = json!({"labels": {"controller-uid": "u-1", "batch.kubernetes.io/job-name": "sample-job"}});
        workload["status"]["admissionChecks"] = json!([{"name": "prov", "state": "Ready",
            "podSetUpdates": [{"name": "main", "labels": {"pool": "a"},
                "annotations": {"autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1"},
                "nodeSelector": {"zone": "z1"},
                "tolerations": [{"key": "t", "operator": "Exists"}]},
                {"name": "other", "annotations": {"not": "mine"}}]}]);
        let none = BTreeMap::new();
        let writes = changes(
            &job(json!({})),
            Some(&workload),
            &none,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        let template = &patch["spec"]["template"];
        assert_eq!(
            template["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"],
            "wl-prov-1"
        );
        assert!(template["metadata"]["annotations"].get("not").is_none());
        assert_eq!(template["metadata"]["labels"]["pool"], "a");
        assert_eq!(template["metadata"]["labels"]["controller-uid"], "u-1");
        assert_eq!(
            template["spec"]["nodeSelector"],
            json!({"own": "x", "zone": "z1"})
        );
        assert_eq!(
            template["spec"]["tolerations"],
            json!([{"key": "t", "operator": "Exists"}])
        );

        let mut evicted = workload.clone();
        evicted["status"]["conditions"].as_array_mut().expect("list").push(json!({
            "type": "Evicted", "status": "True", "reason": "Preempted", "message": "to make room"}));
        let running = job(json!({"spec": {"suspend": false, "template": {
            "metadata": {"labels": {"pool": "a"}, "annotations":
                {"autoscaling.x-k8s.io/consume-provisioning-request": "wl-prov-1"}},
            "spec": {"nodeSelector": {"own": "x", "zone": "z1"}}}}, "status": {"active": 1}}));
        let writes = changes(
            &running,
            Some(&evicted),
            &none,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        let template = &patch["spec"]["template"];
        assert_eq!(
            template["metadata"]["annotations"],
            json!({"autoscaling.x-k8s.io/consume-provisioning-request": null})
        );
        assert_eq!(template["metadata"]["labels"]["pool"], Value::Null);
        assert!(template["metadata"]["labels"].get("pool").is_some());
    }

    #[test]
    fn an_admitted_job_starts_on_its_flavor_and_an_evicted_one_is_restored() {
        let flavors: BTreeMap<String, ResourceFlavorSpec> = [(
            "spot".to_owned(),
            ResourceFlavorSpec {
                name: "spot".into(),
                node_labels: [("instance".to_owned(), "spot".to_owned())].into(),
                node_taints: Vec::new(),
                tolerations: vec![
                    serde_json::from_value(
                        json!({"key": "spot", "operator": "Exists", "effect": "NoSchedule"}),
                    )
                    .expect("toleration"),
                ],
            },
        )]
        .into();
        let partial = job(json!({"metadata": {"annotations": {MIN_PARALLELISM: "1"}}}));
        let writes = changes(
            &partial,
            Some(&admitted_workload(2)),
            &flavors,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        assert_eq!(patch["spec"]["suspend"], false);
        assert_eq!(patch["spec"]["parallelism"], 2);
        let pod = &patch["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"], json!({"own": "x", "instance": "spot"}));
        assert_eq!(pod["tolerations"][0]["key"], "spot");

        // Without the annotation, parallelism is left alone.
        let writes = changes(
            &job(json!({})),
            Some(&admitted_workload(2)),
            &flavors,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        assert!(patch["spec"].get("parallelism").is_none());

        // Evicted while running: suspended with the template restored; the quota is kept
        // while pods are active, released once none is.
        let mut evicted = admitted_workload(3);
        evicted["status"]["conditions"].as_array_mut().expect("list").push(json!({
            "type": "Evicted", "status": "True", "reason": "Preempted", "message": "to make room"}));
        let running = job(json!({"spec": {"suspend": false, "template": {"spec": {
            "nodeSelector": {"own": "x", "instance": "spot"}}}}, "status": {"active": 3}}));
        let writes = changes(
            &running,
            Some(&evicted),
            &flavors,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        assert_eq!(patch["spec"]["suspend"], true);
        assert_eq!(
            patch["spec"]["template"]["spec"]["nodeSelector"],
            json!({"own": "x", "instance": null})
        );
        let stopped = job(json!({"status": {"active": 0}}));
        let writes = changes(
            &stopped,
            Some(&evicted),
            &flavors,
            &Priorities::default(),
            now(),
        );
        let [JobWrite::WorkloadStatus(status)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        assert_eq!(status["admission"], Value::Null);
    }

    #[test]
    fn a_finished_job_finishes_its_workload_once() {
        let done = job(
            json!({"status": {"conditions": [{"type": "Complete", "status": "True", "message": "ok"}]}}),
        );
        let workload = admitted_workload(3);
        let writes = changes(
            &done,
            Some(&workload),
            &BTreeMap::new(),
            &Priorities::default(),
            now(),
        );
        let [JobWrite::WorkloadStatus(status)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        let finished = status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == "Finished"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            (&finished["reason"], &finished["message"]),
            (&json!("Succeeded"), &json!("ok"))
        );
        let mut stored = workload.clone();
        stored["status"]["conditions"] = status["conditions"].clone();
        assert!(
            changes(
                &done,
                Some(&stored),
                &BTreeMap::new(),
                &Priorities::default(),
                now()
            )
            .is_empty()
        );
        // A running Job whose Workload lost its admission is suspended.
        let pending = json!({"spec": {"podSets": [{"name": "main", "count": 3}]}, "status": {}});
        let writes = changes(
            &job(json!({"spec": {"suspend": false}})),
            Some(&pending),
            &BTreeMap::new(),
            &Priorities::default(),
            now(),
        );
        assert!(
            matches!(writes.as_slice(), [JobWrite::PatchJob(p)] if p["spec"]["suspend"] == true)
        );
    }

    #[test]
    fn options_manage_unlabelled_jobs_and_keep_pods_ready_first() {
        let unlabelled = {
            let mut object = job(json!({}));
            object["metadata"]["labels"] = json!({});
            object
        };
        let running = job(json!({"spec": {"suspend": false}, "status": {"ready": 3}}));
        let mut ready = admitted_workload(3);
        ready["status"]["conditions"]
            .as_array_mut()
            .expect("list")
            .push(json!({"type": "PodsReady", "status": "True", "reason": "Started"}));
        let managed = Options {
            managed_without_queue_name: true,
            wait_for_pods_ready: false,
        };
        let waiting = Options {
            managed_without_queue_name: false,
            wait_for_pods_ready: true,
        };
        // (job, workload, options, what the first write is)
        let cases = [
            (&unlabelled, None, Options::default(), None),
            (&unlabelled, None, managed, Some("CreateWorkload")),
            (
                &running,
                Some(admitted_workload(3)),
                Options::default(),
                None,
            ),
            (
                &running,
                Some(admitted_workload(3)),
                waiting,
                Some("PodsReady"),
            ),
            (&running, Some(ready), waiting, None),
        ];
        for (object, workload, options, want) in cases {
            let writes = changes_with(object, workload.as_ref(), options);
            let got = writes.first().map(|write| match write {
                JobWrite::CreateWorkload(created) => {
                    assert!(created["spec"].get("queueName").is_none());
                    "CreateWorkload"
                }
                JobWrite::WorkloadStatus(status) => {
                    assert_eq!(writes.len(), 1, "written alone");
                    let conditions = status["conditions"].as_array().expect("list");
                    let ready = conditions.iter().find(|c| c["type"] == "PodsReady");
                    assert_eq!(ready.map(|c| &c["reason"]), Some(&json!("Started")));
                    "PodsReady"
                }
                other => panic!("{other:?}"),
            });
            assert_eq!(got, want, "{object} {options:?}");
        }
    }

    fn changes_with(job: &Value, workload: Option<&Value>, options: Options) -> Vec<JobWrite> {
        let flavors = BTreeMap::new();
        let priorities = Priorities::default();
        reconcile_with(job, workload, (&flavors, &priorities), options, now())
            .into_iter()
            .filter(|w| !matches!(w, JobWrite::Event(_)))
            .collect()
    }

    #[test]
    fn a_tas_job_asks_for_its_topology_and_starts_gated() {
        use crate::api::tas::{POD_SET_LABEL, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION};
        use tessera_model::kueue::topology::PODSET_REQUIRED_TOPOLOGY_ANNOTATION as REQUIRED;
        // (case, template annotations, wanted topologyRequest)
        let cases = [
            (
                "no annotation: only the rank label",
                json!({}),
                json!({"podIndexLabel": JOB_COMPLETION_INDEX}),
            ),
            (
                "required level",
                json!({REQUIRED: "tessera.dev/rack"}),
                json!({"required": "tessera.dev/rack", "podIndexLabel": JOB_COMPLETION_INDEX}),
            ),
            (
                "slices",
                json!({"kueue.x-k8s.io/podset-preferred-topology": "block",
                    "kueue.x-k8s.io/podset-slice-required-topology": "rack",
                    "kueue.x-k8s.io/podset-slice-size": "4"}),
                json!({"preferred": "block", "podSetSliceRequiredTopology": "rack",
                    "podSetSliceSize": 4, "podIndexLabel": JOB_COMPLETION_INDEX}),
            ),
            (
                "invalid annotations ask for nothing",
                json!({"kueue.x-k8s.io/podset-unconstrained-topology": "maybe"}),
                Value::Null,
            ),
        ];
        for (name, annotations, want) in cases {
            let object =
                job(json!({"spec": {"template": {"metadata": {"annotations": annotations}}}}));
            let workload = workload_for(&object, &Priorities::default());
            let got = workload["spec"]["podSets"][0]
                .get("topologyRequest")
                .cloned()
                .unwrap_or(Value::Null);
            assert_eq!(got, want, "{name}");
        }

        let mut admitted = admitted_workload(3);
        admitted["metadata"] = json!({"name": "job-sample-job-1"});
        admitted["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"] =
            json!({"levels": ["kubernetes.io/hostname"], "slices": []});
        let writes = changes(
            &job(json!({})),
            Some(&admitted),
            &BTreeMap::new(),
            &Priorities::default(),
            now(),
        );
        let [JobWrite::PatchJob(patch)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        let template = &patch["spec"]["template"];
        assert_eq!(
            template["spec"]["schedulingGates"],
            json!([{"name": TOPOLOGY_SCHEDULING_GATE}])
        );
        assert_eq!(template["metadata"]["labels"][POD_SET_LABEL], "main");
        // The Job controller's labels are never removed.
        assert!(
            template["metadata"]["labels"]
                .get("controller-uid")
                .is_none_or(|uid| !uid.is_null())
        );
        assert_eq!(
            template["metadata"]["annotations"][WORKLOAD_ANNOTATION],
            "job-sample-job-1"
        );
        // No explicit request: Kueue marks the pods unconstrained.
        assert_eq!(
            template["metadata"]["annotations"]["kueue.x-k8s.io/podset-unconstrained-topology"],
            "true"
        );
    }
}
