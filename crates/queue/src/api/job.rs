//! Kueue's batch/v1 Job integration (`pkg/controller/jobs/job`, the generic reconciler of
//! `pkg/controller/jobframework`): a Job labelled `kueue.x-k8s.io/queue-name` is suspended
//! until its Workload is admitted. From a Job, the Workload it owns (if any), the flavors and
//! the priority classes, [`reconcile`] says what to write, in Kueue's order: a finished Job
//! finishes its Workload; a Job without one gets it (Kueue's name, owner reference, the
//! `job-uid` label, one PodSet `main` from the template with `parallelism` (or fewer
//! `completions`) pods and `minCount` from `kueue.x-k8s.io/job-min-parallelism`, the priority
//! of its WorkloadPriorityClass label or of the template's PriorityClass); an evicted
//! Workload's Job is suspended with its template restored, and its quota released once no pod
//! is active; an admitted Workload's suspended Job is started with the flavors' node labels
//! and tolerations injected (and `parallelism` set to the admitted count under partial
//! admission); a running Job whose Workload is not admitted is suspended. With
//! waitForPodsReady the Workload's `PodsReady` condition follows the Job's ready pods
//! (`pods_ready`); with `manageJobsWithoutQueueName` a Job without the label is managed too
//! ([`reconcile_with`]).
//!
//! Kueue's Job webhook defaulting (created suspended) is `tessera-api`'s admission. Not modelled: the
//! `resource-in-use` finalizer (the Workload goes with its Job through its owner reference),
//! the `stopping` annotation's two-step stop, label and annotation propagation, queue-name
//! changes, reclaimable pods, and podSetUpdates of admission checks.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::kueue::workload::{POD_PRIORITY_CLASS, WORKLOAD_PRIORITY_CLASS};
use tessera_model::{conditions, json as json_read};

use crate::api::status::{self, Event};
use crate::flavor::ResourceFlavorSpec;

pub use tessera_model::kueue::{
    PRIORITY_CLASS_LABEL as PRIORITY_CLASS, QUEUE_NAME_LABEL as QUEUE_NAME,
};
/// The label of a Workload naming its job's UID.
pub const JOB_UID: &str = "kueue.x-k8s.io/job-uid";
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

/// A Job's LocalQueue, if it has one.
pub fn queue_name(job: &Value) -> Option<&str> {
    job.pointer("/metadata/labels")
        .and_then(|labels| labels.get(QUEUE_NAME))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

/// `GetWorkloadNameForOwnerWithGVK` for a batch/v1 Job: `job-<name>` (truncated to 247
/// characters) and the first five hex digits of a SHA-1 over kind, group, name and UID.
pub fn workload_name(job_name: &str, job_uid: &str) -> String {
    const HASH_LENGTH: usize = 5;
    const MAX_PREFIX: usize = 253 - 1 - HASH_LENGTH;
    let mut prefix = format!("job-{job_name}");
    if prefix.len() > MAX_PREFIX {
        let mut end = MAX_PREFIX;
        while !prefix.is_char_boundary(end) {
            end -= 1;
        }
        prefix.truncate(end);
    }
    let mut hash = sha1_smol::Sha1::new();
    hash.update(format!("Job\n\n{job_name}\n{job_uid}").as_bytes());
    let digest = hash.digest().to_string();
    format!("{prefix}-{}", &digest[..HASH_LENGTH])
}

/// Priority classes by name: WorkloadPriorityClasses and PriorityClasses (with the latter's
/// `globalDefault`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Priorities {
    /// WorkloadPriorityClass values.
    pub workload: BTreeMap<String, i32>,
    /// PriorityClass values.
    pub pod: BTreeMap<String, i32>,
    /// The PriorityClass marked `globalDefault`, if any.
    pub pod_default: Option<String>,
}

impl Priorities {
    /// From WorkloadPriorityClass and PriorityClass objects.
    pub fn read(workload_classes: &[Value], pod_classes: &[Value]) -> Priorities {
        let value = |o: &Value| {
            let name = json_read::text(o, "/metadata/name").to_owned();
            let value = json_read::int(o, "/value")
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(0);
            (name, value)
        };
        Priorities {
            workload: workload_classes.iter().map(value).collect(),
            pod: pod_classes.iter().map(value).collect(),
            pod_default: pod_classes
                .iter()
                .find(|o| o.get("globalDefault") == Some(&json!(true)))
                .map(|o| json_read::text(o, "/metadata/name").to_owned()),
        }
    }

    /// `ExtractPriority`: the WorkloadPriorityClass of the label if set (value 0 when it does
    /// not exist), else the template's PriorityClass (or the global default), else 0.
    fn of(&self, job: &Value) -> (Option<Value>, i32) {
        let label = job
            .pointer("/metadata/labels")
            .and_then(|l| l.get(PRIORITY_CLASS))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        if let Some(name) = label {
            let reference = class_reference(WORKLOAD_PRIORITY_CLASS, name);
            return (
                Some(reference),
                self.workload.get(name).copied().unwrap_or(0),
            );
        }
        let named = json_read::text(job, "/spec/template/spec/priorityClassName");
        let name = if named.is_empty() {
            self.pod_default.as_deref()
        } else {
            Some(named)
        };
        match name.and_then(|n| Some((n, self.pod.get(n)?))) {
            Some((name, value)) => (Some(class_reference(POD_PRIORITY_CLASS, name)), *value),
            None => (None, 0),
        }
    }
}

/// `spec.priorityClassRef` naming a class of `(group, kind)`.
fn class_reference((group, kind): (&str, &str), name: &str) -> Value {
    json!({"group": group, "kind": kind, "name": name})
}

/// One write the integration asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum JobWrite {
    /// Create this Workload.
    CreateWorkload(Value),
    /// Merge-patch the Job.
    PatchJob(Value),
    /// Merge-patch the Workload's status.
    WorkloadStatus(Value),
    /// Record an event about the Job.
    Event(Event),
}

fn job_event(job: &Value, reason: &str, message: &str) -> JobWrite {
    JobWrite::Event(Event::about(
        job,
        ("batch/v1", "Job"),
        ("Normal", reason),
        message,
    ))
}

/// `namespace/name` of an object.
fn key_of(object: &Value) -> String {
    format!(
        "{}/{}",
        json_read::text(object, "/metadata/namespace"),
        json_read::text(object, "/metadata/name")
    )
}

fn int(job: &Value, pointer: &str) -> Option<i32> {
    json_read::int(job, pointer).and_then(|v| i32::try_from(v).ok())
}

fn annotation<'a>(job: &'a Value, key: &str) -> Option<&'a str> {
    job.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `podsCount`: parallelism (1 when unset), or fewer completions.
pub(crate) fn pods_count(job: &Value) -> i32 {
    let parallelism = int(job, "/spec/parallelism").unwrap_or(1);
    match int(job, "/spec/completions") {
        Some(completions) if completions < parallelism => completions,
        _ => parallelism,
    }
}

fn min_count(job: &Value) -> Option<i32> {
    annotation(job, MIN_PARALLELISM).and_then(|v| v.parse().ok())
}

/// The Workload Kueue constructs for a Job (`ConstructWorkload`, `PrepareWorkloadPriority`).
pub fn workload_for(job: &Value, priorities: &Priorities) -> Value {
    let name = json_read::text(job, "/metadata/name");
    let uid = json_read::text(job, "/metadata/uid");
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
    let mut pod_set = json!({"name": "main", "template": template, "count": pods_count(job)});
    if let Some(min) = min_count(job) {
        pod_set["minCount"] = json!(min);
    }
    let (reference, priority) = priorities.of(job);
    let mut spec = json!({"podSets": [pod_set], "priority": priority});
    // A Job managed without a queue name: Kueue's empty `queueName` is omitted.
    if let Some(queue) = queue_name(job) {
        spec["queueName"] = json!(queue);
    }
    if let Some(reference) = reference {
        spec["priorityClassRef"] = reference;
    }
    json!({
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(name, uid),
            "namespace": json_read::text(job, "/metadata/namespace"),
            "labels": {JOB_UID: uid},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    })
}

/// Whether the Job has finished, with success and the condition's message (`Finished`).
fn job_finished(job: &Value) -> Option<(bool, String)> {
    job.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| {
            matches!(c["type"].as_str(), Some("Complete" | "Failed")) && c["status"] == "True"
        })
        .map(|c| {
            (
                c["type"] == "Complete",
                c["message"].as_str().unwrap_or_default().to_owned(),
            )
        })
}

fn suspended(job: &Value) -> bool {
    job.pointer("/spec/suspend") == Some(&json!(true))
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

/// The patch starting an admitted Job (`RunWithPodSetsInfo`): unsuspended, the flavors'
/// node labels merged into the template's nodeSelector and their tolerations appended, and
/// `parallelism` set to the admitted count when partial admission is allowed.
fn start_patch(
    job: &Value,
    workload: &Value,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Value {
    let assignment = workload
        .pointer("/status/admission/podSetAssignments/0")
        .cloned()
        .unwrap_or_default();
    let mut node_selector = job
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut tolerations = job
        .pointer("/spec/template/spec/tolerations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen = Vec::new();
    for flavor in assignment
        .get("flavors")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(_, f)| f.as_str())
    {
        if seen.contains(&flavor) {
            continue;
        }
        seen.push(flavor);
        let Some(spec) = flavors.get(flavor) else {
            continue;
        };
        for (key, value) in &spec.node_labels {
            node_selector.insert(key.clone(), json!(value));
        }
        for toleration in &spec.tolerations {
            let toleration = serde_json::to_value(toleration).unwrap_or_default();
            if !tolerations.contains(&toleration) {
                tolerations.push(toleration);
            }
        }
    }
    let mut pod_spec = json!({"nodeSelector": node_selector});
    if !tolerations.is_empty() {
        pod_spec["tolerations"] = Value::Array(tolerations);
    }
    let mut patch = json!({"spec": {"suspend": false, "template": {"spec": pod_spec}}});
    scale_to(job, assignment.get("count"), &mut patch);
    patch
}

/// The patch stopping a Job (`Suspend` and `RestorePodSetsInfo`): suspended, its template's
/// nodeSelector and tolerations as the Workload's PodSet had them, and `parallelism` back to
/// the PodSet's count under partial admission.
fn stop_patch(job: &Value, workload: Option<&Value>) -> Value {
    let mut patch = json!({"spec": {"suspend": true}});
    let Some(template) = workload.and_then(|w| w.pointer("/spec/podSets/0")) else {
        return patch;
    };
    let original = template
        .pointer("/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let current = job.pointer("/spec/template/spec/nodeSelector");
    let tolerations = template
        .pointer("/template/spec/tolerations")
        .cloned()
        .unwrap_or(Value::Null);
    patch["spec"]["template"] = json!({"spec": {"nodeSelector": map_patch(current, &original), "tolerations": tolerations}});
    scale_to(job, template.get("count"), &mut patch);
    patch
}

/// Under partial admission (`minCount` set), `parallelism` (and `completions` when the Job
/// keeps them equal) follow the PodSet's `count`.
fn scale_to(job: &Value, count: Option<&Value>, patch: &mut Value) {
    if min_count(job).is_some()
        && let Some(count) = count.and_then(Value::as_i64)
    {
        patch["spec"]["parallelism"] = json!(count);
        if annotation(job, COMPLETIONS_EQUAL_PARALLELISM) == Some("true") {
            patch["spec"]["completions"] = json!(count);
        }
    }
}

/// What to write for a Job labelled with a queue name, given the Workload it owns (if any),
/// the ResourceFlavors by name, the priority classes and the time (the reconciler's steps
/// 1–8 for a plain Job). Empty for a Job without a queue name.
pub fn reconcile(
    job: &Value,
    workload: Option<&Value>,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
    priorities: &Priorities,
    now: SystemTime,
) -> Vec<JobWrite> {
    let options = Options::default();
    reconcile_with(job, workload, (flavors, priorities), options, now)
}

/// The parts of Kueue's Configuration the Job integration reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// The Job is managed without a queue name (`manageJobsWithoutQueueName` and its
    /// namespace matching `managedJobsNamespaceSelector`).
    pub managed_without_queue_name: bool,
    /// waitForPodsReady is on: the Workload's `PodsReady` condition is kept (step 5).
    pub wait_for_pods_ready: bool,
}

/// [`reconcile`] with the Configuration's options: a Job without a queue name is managed
/// when `options` say so, and with waitForPodsReady a change of the Workload's `PodsReady`
/// condition is written first, alone, as Kueue's reconciler returns after it.
pub fn reconcile_with(
    job: &Value,
    workload: Option<&Value>,
    (flavors, priorities): (&BTreeMap<String, ResourceFlavorSpec>, &Priorities),
    options: Options,
    now: SystemTime,
) -> Vec<JobWrite> {
    let managed = queue_name(job).is_some() || options.managed_without_queue_name;
    if !managed || job.pointer("/metadata/deletionTimestamp").is_some() {
        return Vec::new();
    }
    if workload.is_some_and(|w| conditions::is_true(w, status::FINISHED)) {
        return Vec::new();
    }
    if let Some((succeeded, message)) = job_finished(job) {
        let Some(workload) = workload else {
            return Vec::new();
        };
        let Some(status) = status::finished(workload, succeeded, &message, now) else {
            return Vec::new();
        };
        let declared = format!("Workload '{}' is declared finished", key_of(workload));
        return vec![
            JobWrite::WorkloadStatus(status),
            job_event(job, "FinishedWorkload", &declared),
        ];
    }
    let Some(workload) = workload else {
        let mut writes = Vec::new();
        if !suspended(job) {
            writes.push(JobWrite::PatchJob(stop_patch(job, None)));
            writes.push(job_event(job, "Stopped", "missing workload"));
        }
        let created = workload_for(job, priorities);
        let message = format!("Created Workload: {}", key_of(&created));
        writes.push(JobWrite::CreateWorkload(created));
        writes.push(job_event(job, "CreatedWorkload", &message));
        return writes;
    };
    if options.wait_for_pods_ready {
        let ready = crate::api::pods_ready::job_pods_ready(job);
        if let Some(status) = crate::api::pods_ready::pods_ready_status(workload, ready, now) {
            return vec![JobWrite::WorkloadStatus(status)];
        }
    }
    let reserved = conditions::is_true(workload, status::QUOTA_RESERVED);
    if let Some(evicted) =
        conditions::find(workload, status::EVICTED).filter(|c| c["status"] == "True")
    {
        let mut writes = Vec::new();
        if !suspended(job) {
            let message = evicted["message"].as_str().unwrap_or_default();
            writes.push(JobWrite::PatchJob(stop_patch(job, Some(workload))));
            writes.push(job_event(job, "Stopped", message));
        }
        let active = json_read::int(job, "/status/active").unwrap_or(0) > 0;
        if reserved
            && !active
            && let Some(status) = status::released(workload, now)
        {
            writes.push(JobWrite::WorkloadStatus(status));
        }
        return writes;
    }
    let admitted = conditions::is_true(workload, status::ADMITTED) && reserved;
    match (suspended(job), admitted) {
        (true, true) => {
            let cluster_queue = json_read::text(workload, "/status/admission/clusterQueue");
            vec![
                JobWrite::PatchJob(start_patch(job, workload, flavors)),
                job_event(
                    job,
                    "Started",
                    &format!("Admitted by clusterQueue {cluster_queue}"),
                ),
            ]
        }
        (false, false) => vec![
            JobWrite::PatchJob(stop_patch(job, Some(workload))),
            job_event(job, "Stopped", "Not admitted by cluster queue"),
        ],
        _ => Vec::new(),
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
        // sha1("Job\n\nsample-job\nu-1")
        let mut hash = sha1_smol::Sha1::new();
        hash.update(b"Job\n\nsample-job\nu-1");
        let want = format!("job-sample-job-{}", &hash.digest().to_string()[..5]);
        assert_eq!(workload_name("sample-job", "u-1"), want);
        let long = "a".repeat(300);
        let name = workload_name(&long, "u");
        assert_eq!(name.len(), 253);
        assert!(name.starts_with("job-aaa"));
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
}
