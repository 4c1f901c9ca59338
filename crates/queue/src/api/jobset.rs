//! Kueue's JobSet integration (`pkg/controller/jobs/jobset`, framework
//! `jobset.x-k8s.io/jobset`) on the job framework ([`crate::api::framework`]): one PodSet per
//! replicatedJob, named by it, with its Job template's pod template and `replicas` × the Job's
//! pods (`podsCount`; no `minCount`: JobSet has no partial admission); finished on the JobSet's
//! `Completed`/`Failed` conditions; active while any replicatedJob has an active Job; the
//! flavors' node selector and tolerations go into each replicatedJob's pod template (the
//! JobSet controller carries them to its Jobs when it resumes them).
//!
//! Knows only the JobSet's shape: the reconcile steps are the framework's. Not modelled:
//! reclaimable pods, `PodsReady`, topology requests and `managedBy`.

use serde_json::{Map, Value, json};
use tessera_model::json as json_read;

use crate::api::framework::{self, Integration, JOB_COMPLETION_INDEX, PodSet, PodSetInfo};
use crate::api::job::pods_count;

/// JobSet as Kueue integrates it.
/// `jobset.sigs.k8s.io/job-index`: the index of a pod's Job in its replicatedJob (the TAS
/// sub-group).
pub const JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";

pub const JOBSET: Integration = Integration {
    framework: "jobset.x-k8s.io/jobset",
    api_version: "jobset.x-k8s.io/v1alpha2",
    kind: "JobSet",
    component: "jobset.x-k8s.io/jobset-kueue-controller",
    pod_sets,
    finished,
    active,
    pods_ready,
    pod_set_infos_patch,
    scale: |_, _, _| {},
};

fn replicated_jobs(jobset: &Value) -> &[Value] {
    jobset
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The replicatedJob's `replicas` (1 when unset) × its Job's `podsCount`, saturating.
fn pods_of(replicated: &Value) -> i32 {
    let replicas = json_read::int(replicated, "/replicas")
        .and_then(|r| i32::try_from(r).ok())
        .unwrap_or(1);
    let per_replica = pods_count(replicated.pointer("/template/spec").unwrap_or(&Value::Null));
    replicas.saturating_mul(per_replica)
}

fn pod_sets(jobset: &Value) -> Vec<PodSet> {
    replicated_jobs(jobset)
        .iter()
        .map(|replicated| {
            let template = replicated
                .pointer("/template/spec/template")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let replicas = json_read::int(replicated, "/replicas")
                .and_then(|r| i32::try_from(r).ok())
                .unwrap_or(1);
            let topology_request = framework::topology_request(
                &template,
                Some(JOB_COMPLETION_INDEX),
                Some((JOB_INDEX, replicas)),
            );
            PodSet {
                name: json_read::text(replicated, "/name").to_owned(),
                template,
                count: pods_of(replicated),
                min_count: None,
                topology_request,
            }
        })
        .collect()
}

fn finished(jobset: &Value) -> Option<(bool, String)> {
    framework::finished_by_condition(jobset, ("Completed", "Failed"))
}

fn active(jobset: &Value) -> bool {
    jobset
        .pointer("/status/replicatedJobsStatus")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|status| json_read::int(status, "/active").unwrap_or(0) > 0)
}

/// `PodsReady`: every replicated Job ready or succeeded (Kueue counts Jobs, summing
/// `replicatedJobsStatus` ready + succeeded against the replicas of all replicatedJobs).
fn pods_ready(jobset: &Value) -> bool {
    let replicas: i64 = replicated_jobs(jobset)
        .iter()
        .map(|r| json_read::int(r, "/replicas").unwrap_or(1))
        .sum();
    let ready: i64 = jobset
        .pointer("/status/replicatedJobsStatus")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| {
            json_read::int(s, "/ready").unwrap_or(0) + json_read::int(s, "/succeeded").unwrap_or(0)
        })
        .sum();
    replicas == ready
}

/// `replicatedJobs` whole (a merge patch replaces lists), each pod template's nodeSelector
/// and tolerations set to its PodSet's info; nothing when the counts differ.
fn pod_set_infos_patch(jobset: &Value, infos: &[PodSetInfo]) -> Map<String, Value> {
    let replicated = replicated_jobs(jobset);
    if replicated.len() != infos.len() {
        return Map::new();
    }
    let updated: Vec<Value> = replicated
        .iter()
        .zip(infos)
        .map(|(replicated, info)| {
            let mut replicated = replicated.clone();
            if let Some(spec) = replicated
                .pointer_mut("/template/spec/template/spec")
                .and_then(Value::as_object_mut)
            {
                let selector = &info.node_selector;
                set_or_remove(
                    spec,
                    "nodeSelector",
                    (!selector.is_empty()).then(|| json!(selector)),
                );
                let tolerations = &info.tolerations;
                set_or_remove(
                    spec,
                    "tolerations",
                    (!tolerations.is_empty()).then(|| json!(tolerations)),
                );
                let gates = &info.scheduling_gates;
                set_or_remove(
                    spec,
                    "schedulingGates",
                    (!gates.is_empty()).then(|| json!(gates)),
                );
            }
            if let Some(template) = replicated
                .pointer_mut("/template/spec/template")
                .and_then(Value::as_object_mut)
            {
                let mut metadata = template
                    .remove("metadata")
                    .and_then(|m| m.as_object().cloned())
                    .unwrap_or_default();
                for (key, map) in [("labels", &info.labels), ("annotations", &info.annotations)] {
                    set_or_remove(&mut metadata, key, (!map.is_empty()).then(|| json!(map)));
                }
                if !metadata.is_empty() {
                    template.insert("metadata".into(), Value::Object(metadata));
                }
            }
            let metadata_wanted = !info.labels.is_empty() || !info.annotations.is_empty();
            if let Some(template) = replicated
                .pointer_mut("/template/spec/template")
                .and_then(Value::as_object_mut)
                .filter(|t| metadata_wanted || t.contains_key("metadata"))
                && let Some(metadata) = template
                    .entry("metadata")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
            {
                for (field, wanted) in
                    [("labels", &info.labels), ("annotations", &info.annotations)]
                {
                    set_or_remove(metadata, field, (!wanted.is_empty()).then(|| json!(wanted)));
                }
            }
            replicated
        })
        .collect();
    let mut fields = Map::new();
    fields.insert("replicatedJobs".into(), Value::Array(updated));
    fields
}

/// Sets `key` to `value`, or removes it when there is none.
fn set_or_remove(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(value) => object.insert(key.into(), value),
        None => object.remove(key),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::framework::{JobWrite, PRIORITY_CLASS, Priorities, QUEUE_NAME, reconcile};
    use crate::flavor::ResourceFlavorSpec;
    use std::collections::BTreeMap;
    use std::time::{Duration, SystemTime};

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    /// A replicatedJob: name, replicas, parallelism, completions.
    type Replicated<'a> = (&'a str, i64, i64, i64);
    /// A PodSet: name, count.
    type Expected<'a> = (&'a str, i32);

    /// Kueue's `testingjobset.MakeJobSet("jobset", "ns")` with replicatedJobs of
    /// (name, replicas, parallelism, completions), each pod asking for one CPU.
    fn jobset(replicated: &[Replicated]) -> Value {
        let replicated: Vec<Value> = replicated
            .iter()
            .map(|(name, replicas, parallelism, completions)| {
                json!({"name": name, "replicas": replicas, "template": {"spec": {
                    "parallelism": parallelism, "completions": completions,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c",
                        "resources": {"requests": {"cpu": "1"}}}]}}}}})
            })
            .collect();
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "jobset", "namespace": "ns", "uid": "js-uid",
                "labels": {QUEUE_NAME: "user-queue"}},
            "spec": {"suspend": true, "replicatedJobs": replicated}})
    }

    #[test]
    fn one_pod_set_per_replicated_job_with_replicas_times_job_pods() {
        // Kueue's TestPodSets ("no annotations") and the podsCount of TestReconciler.
        let cases: [(&[Replicated], &[Expected]); 3] = [
            (
                &[("job1", 2, 1, 1), ("job2", 3, 2, 3)],
                &[("job1", 2), ("job2", 6)],
            ),
            (
                &[("replicated-job-1", 1, 1, 1), ("replicated-job-2", 2, 2, 2)],
                &[("replicated-job-1", 1), ("replicated-job-2", 4)],
            ),
            // Fewer completions than parallelism bound each Job's pods.
            (&[("workers", 4, 3, 2)], &[("workers", 8)]),
        ];
        for (replicated, want) in cases {
            let object = jobset(replicated);
            let got: Vec<(String, i32)> = pod_sets(&object)
                .into_iter()
                .map(|p| {
                    assert_eq!(p.min_count, None);
                    (p.name, p.count)
                })
                .collect();
            let want: Vec<(String, i32)> = want.iter().map(|(n, c)| ((*n).into(), *c)).collect();
            assert_eq!(got, want, "{replicated:?}");
            let first = &pod_sets(&object)[0].template;
            assert_eq!(
                first,
                &object["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
            );
        }
    }

    #[test]
    fn the_workload_carries_the_pod_sets_and_kueues_priority() {
        // Kueue's TestReconciler: WorkloadPriorityClass, PriorityClass, both (the former wins).
        let priorities = Priorities {
            workload: [("test-wpc".to_owned(), 100)].into(),
            pod: [("test-pc".to_owned(), 200)].into(),
            pod_default: None,
        };
        let with_pc = |mut object: Value| {
            object["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["priorityClassName"] =
                json!("test-pc");
            object
        };
        let with_wpc = |mut object: Value| {
            object["metadata"]["labels"][PRIORITY_CLASS] = json!("test-wpc");
            object
        };
        let base = || jobset(&[("replicated-job-1", 1, 1, 1)]);
        let cases = [
            (base(), None, 0),
            (
                with_wpc(base()),
                Some(("WorkloadPriorityClass", "test-wpc")),
                100,
            ),
            (with_pc(base()), Some(("PriorityClass", "test-pc")), 200),
            (
                with_wpc(with_pc(base())),
                Some(("WorkloadPriorityClass", "test-wpc")),
                100,
            ),
        ];
        for (object, reference, priority) in cases {
            let writes = reconcile(&JOBSET, &object, None, &BTreeMap::new(), &priorities, now());
            let [JobWrite::CreateWorkload(workload), JobWrite::Event(event)] = writes.as_slice()
            else {
                panic!("{writes:?}")
            };
            assert_eq!(workload["spec"]["priority"], priority);
            let got = workload["spec"]
                .get("priorityClassRef")
                .map(|r| (r["kind"].clone(), r["name"].clone()));
            assert_eq!(got, reference.map(|(k, n)| (json!(k), json!(n))));
            let name = framework::workload_name("jobset", "js-uid", ("jobset.x-k8s.io", "JobSet"));
            assert_eq!(workload["metadata"]["name"], name);
            assert_eq!(
                workload["metadata"]["ownerReferences"][0],
                json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "name": "jobset", "uid": "js-uid", "controller": true,
                    "blockOwnerDeletion": true})
            );
            assert_eq!(workload["spec"]["podSets"][0]["name"], "replicated-job-1");
            assert_eq!(
                (&event.reason, &event.involved["kind"]),
                (&"CreatedWorkload".to_owned(), &json!("JobSet"))
            );
        }
    }

    fn spot() -> BTreeMap<String, ResourceFlavorSpec> {
        [(
            "spot".to_owned(),
            ResourceFlavorSpec {
                name: "spot".into(),
                node_labels: [("instance-type".to_owned(), "spot".to_owned())].into(),
                node_taints: Vec::new(),
                tolerations: vec![
                    serde_json::from_value(
                        json!({"key": "spot-taint", "operator": "Exists", "effect": "NoSchedule"}),
                    )
                    .expect("toleration"),
                ],
            },
        )]
        .into()
    }

    /// The Workload of `object`, admitted with one assignment per PodSet (`assigned` of them).
    fn admitted(object: &Value, assigned: usize, extra_conditions: &[Value]) -> Value {
        let mut workload = framework::workload_for(&JOBSET, object, &Priorities::default());
        let assignments: Vec<Value> = pod_sets(object)
            .iter()
            .take(assigned)
            .map(|p| json!({"name": p.name, "flavors": {"cpu": "spot"}, "count": p.count}))
            .collect();
        let mut conditions = vec![
            json!({"type": "QuotaReserved", "status": "True"}),
            json!({"type": "Admitted", "status": "True"}),
        ];
        conditions.extend(extra_conditions.iter().cloned());
        workload["status"] = json!({"conditions": conditions,
            "admission": {"clusterQueue": "cq", "podSetAssignments": assignments}});
        workload
    }

    fn patches(writes: &[JobWrite]) -> Vec<&Value> {
        writes
            .iter()
            .filter_map(|w| match w {
                JobWrite::PatchJob(patch) => Some(patch),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn an_admitted_jobset_starts_whole_on_its_flavor_and_is_restored_when_evicted() {
        let mut object = jobset(&[("leader", 1, 1, 1), ("workers", 2, 2, 2)]);
        object["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"] =
            json!({"team": "ml"});
        let workload = admitted(&object, 2, &[]);
        let writes = reconcile(
            &JOBSET,
            &object,
            Some(&workload),
            &spot(),
            &Priorities::default(),
            now(),
        );
        let [patch] = patches(&writes)[..] else {
            panic!("{writes:?}")
        };
        assert_eq!(patch["spec"]["suspend"], false);
        let templates = |patch: &Value| -> Vec<(Value, Value)> {
            list_of(&patch["spec"]["replicatedJobs"])
                .iter()
                .map(|r| {
                    let spec = &r["template"]["spec"]["template"]["spec"];
                    (
                        spec["nodeSelector"].clone(),
                        spec["tolerations"][0]["key"].clone(),
                    )
                })
                .collect()
        };
        assert_eq!(
            templates(patch),
            [
                (json!({"instance-type": "spot"}), json!("spot-taint")),
                (
                    json!({"instance-type": "spot", "team": "ml"}),
                    json!("spot-taint")
                ),
            ]
        );
        // The rest of each replicatedJob is kept.
        assert_eq!(patch["spec"]["replicatedJobs"][1]["replicas"], 2);
        assert!(writes.iter().any(
            |w| matches!(w, JobWrite::Event(e) if e.message == "Admitted by clusterQueue cq")
        ));

        // Evicted while running: suspended, each template as the Workload's PodSet had it;
        // the quota is released once no Job is active.
        let evicted = admitted(
            &object,
            2,
            &[
                json!({"type": "Evicted", "status": "True", "reason": "Deactivated",
                "message": "The workload is deactivated"}),
            ],
        );
        let mut running = object.clone();
        running["spec"]["suspend"] = json!(false);
        running["spec"]["replicatedJobs"] = patch["spec"]["replicatedJobs"].clone();
        running["status"] = json!({"replicatedJobsStatus": [
            {"name": "leader", "active": 0}, {"name": "workers", "active": 2}]});
        let writes = reconcile(
            &JOBSET,
            &running,
            Some(&evicted),
            &spot(),
            &Priorities::default(),
            now(),
        );
        let [patch] = patches(&writes)[..] else {
            panic!("{writes:?}")
        };
        assert_eq!(patch["spec"]["suspend"], true);
        assert_eq!(
            patch["spec"]["replicatedJobs"],
            object["spec"]["replicatedJobs"]
        );
        assert!(
            !writes
                .iter()
                .any(|w| matches!(w, JobWrite::WorkloadStatus(_))),
            "quota kept while a Job is active"
        );
        running["spec"]["suspend"] = json!(true);
        running["status"]["replicatedJobsStatus"][1]["active"] = json!(0);
        let writes = reconcile(
            &JOBSET,
            &running,
            Some(&evicted),
            &spot(),
            &Priorities::default(),
            now(),
        );
        let [JobWrite::WorkloadStatus(status)] = writes.as_slice() else {
            panic!("{writes:?}")
        };
        assert_eq!(status["admission"], Value::Null);
    }

    fn list_of(value: &Value) -> &[Value] {
        value.as_array().map_or(&[], Vec::as_slice)
    }

    #[test]
    fn pod_set_infos_apply_only_when_they_match_the_replicated_jobs() {
        // Kueue's TestRestorePodSetsInfo: fewer or more infos than replicatedJobs change
        // nothing; as many restore each one.
        let object = jobset(&[("job1", 1, 1, 1), ("job2", 1, 1, 1)]);
        let restored = PodSetInfo {
            node_selector: [("restored".to_owned(), json!("true"))]
                .into_iter()
                .collect(),
            ..PodSetInfo::default()
        };
        let cases = [
            (vec![PodSetInfo::default()], false),
            (vec![PodSetInfo::default(); 3], false),
            (vec![restored.clone(), restored], true),
        ];
        for (infos, changed) in cases {
            let patch = pod_set_infos_patch(&object, &infos);
            assert_eq!(!patch.is_empty(), changed, "{} infos", infos.len());
            if changed {
                assert_eq!(
                    patch["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["nodeSelector"],
                    json!({"restored": "true"})
                );
            }
        }
        // An admission without one assignment per replicatedJob does not start it.
        let writes = reconcile(
            &JOBSET,
            &object,
            Some(&admitted(&object, 1, &[])),
            &spot(),
            &Priorities::default(),
            now(),
        );
        assert!(writes.is_empty(), "{writes:?}");
    }

    #[test]
    fn a_finished_jobset_finishes_its_workload_and_activity_follows_its_jobs() {
        let cases = [
            ("Completed", "jobset completed successfully", "Succeeded"),
            ("Failed", "jobset failed", "Failed"),
        ];
        for (condition, message, reason) in cases {
            let mut object = jobset(&[("workers", 2, 1, 1)]);
            object["spec"]["suspend"] = json!(false);
            object["status"] = json!({"conditions": [
                {"type": condition, "status": "True", "message": message}]});
            let mut workload = admitted(&object, 1, &[]);
            workload["metadata"]["namespace"] = json!("ns");
            let writes = reconcile(
                &JOBSET,
                &object,
                Some(&workload),
                &spot(),
                &Priorities::default(),
                now(),
            );
            let [JobWrite::WorkloadStatus(status), JobWrite::Event(event)] = writes.as_slice()
            else {
                panic!("{writes:?}")
            };
            let finished = list_of(&status["conditions"])
                .iter()
                .find(|c| c["type"] == "Finished")
                .cloned()
                .unwrap_or_default();
            assert_eq!(
                (&finished["reason"], &finished["message"]),
                (&json!(reason), &json!(message))
            );
            assert_eq!(event.reason, "FinishedWorkload");
        }
        let activity = [
            (json!({}), false),
            (
                json!({"replicatedJobsStatus": [{"name": "a", "active": 0}]}),
                false,
            ),
            (
                json!({"replicatedJobsStatus": [{"name": "a", "active": 0}, {"name": "b", "active": 1}]}),
                true,
            ),
        ];
        for (status, want) in activity {
            assert_eq!(active(&json!({"status": status})), want, "{status}");
        }
    }
}
