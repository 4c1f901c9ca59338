//! The JobSet core (jobset.x-k8s.io/v1alpha2): the Jobs a JobSet runs — one per replica of
//! each replicatedJob, named `<jobset>-<replicatedJob>-<index>` with upstream's labels and
//! annotations — started in order when `startupPolicy` asks, restarted as a whole per
//! `failurePolicy` (maxRestarts and rules), finished per `successPolicy` (All or Any over
//! target replicatedJobs), with pod DNS through a headless Service, the exclusive-placement
//! annotation turned into pod (anti-)affinity, upstream's status, and a finished JobSet
//! deleted (in the foreground) once `ttlSecondsAfterFinished` has passed. `spec.suspend`
//! suspends and resumes the Jobs; a resumed Job takes what Kueue injected into its
//! replicatedJob's pod template meanwhile (node selector, tolerations, labels, annotations).
//!
//! Pure: no I/O.

use std::time::{Duration, SystemTime};

use crate::plan::{Propagation, Resource, Write, Writes};
use serde_json::{Value, json};

/// Label and annotation keys upstream puts on JobSet Jobs and pods.
pub mod keys {
    /// The JobSet's name.
    pub const JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
    /// The replicatedJob's name.
    pub const REPLICATED_JOB_NAME: &str = "jobset.sigs.k8s.io/replicatedjob-name";
    /// The replicatedJob's replica count.
    pub const REPLICATED_JOB_REPLICAS: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
    /// The Job's index within its replicatedJob.
    pub const JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
    /// The Job's index across the JobSet.
    pub const JOB_GLOBAL_INDEX: &str = "jobset.sigs.k8s.io/job-global-index";
    /// How many times the JobSet has restarted.
    pub const RESTART_ATTEMPT: &str = "jobset.sigs.k8s.io/restart-attempt";
    /// A stable key of the Job (namespace/name).
    pub const JOB_KEY: &str = "jobset.sigs.k8s.io/job-key";
    /// Exclusive placement: one Job per topology domain.
    pub const EXCLUSIVE_TOPOLOGY: &str = "alpha.jobset.sigs.k8s.io/exclusive-topology";
}

use keys::*;
use tessera_model::conditions::find;
use tessera_model::json::{int_or_zero, text};
use tessera_model::time::{parse_timestamp, timestamp};

/// What to do for a JobSet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobSetPlan {
    /// Jobs to create.
    pub create: Vec<Value>,
    /// Names of Jobs to delete (a restart, or a finished JobSet's active Jobs).
    pub delete: Vec<String>,
    /// Jobs to suspend or resume: (name, merge patch).
    pub suspend: Vec<(String, Value)>,
    /// The headless Service for pod DNS, if the JobSet wants one.
    pub service: Option<Value>,
    /// The JobSet's new status.
    pub status: Value,
    /// Whether the JobSet itself goes: finished, and its time to live has passed.
    pub delete_jobset: bool,
    /// When to look again: when a finished JobSet's time to live runs out.
    pub requeue_after: Option<Duration>,
}

/// What `spec.ttlSecondsAfterFinished` asks of a finished JobSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// Its time to live has passed: delete it.
    Expired,
    /// Its time to live runs out after this long.
    After(Duration),
}

/// When a finished JobSet's time to live runs out, as upstream's TTL-after-finished policy
/// reckons it at `now`: the time to live counted from the `lastTransitionTime` of its true
/// `Completed` or `Failed` condition. `None` without a time to live, for a JobSet being
/// deleted, one not finished, or one whose finish time cannot be read (upstream reports an
/// error there and deletes nothing).
pub fn expiry(jobset: &Value, now: SystemTime) -> Option<Expiry> {
    let ttl = jobset
        .pointer("/spec/ttlSecondsAfterFinished")
        .and_then(Value::as_i64)?;
    if jobset.pointer("/metadata/deletionTimestamp").is_some() {
        return None;
    }
    let finished_at = jobset
        .pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .find(|c| (c["type"] == "Completed" || c["type"] == "Failed") && c["status"] == "True")?
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)?;
    let expires_at = finished_at + Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
    match expires_at.duration_since(now) {
        Ok(left) if !left.is_zero() => Some(Expiry::After(left)),
        _ => Some(Expiry::Expired),
    }
}

/// A Job's condition of type `kind` when it holds (status `"True"`).
fn job_condition<'a>(job: &'a Value, kind: &str) -> Option<&'a Value> {
    find(job, kind).filter(|c| c["status"] == "True")
}

/// A stable key of a Job, as upstream's `job-key` (hex of FNV-1a over namespace/name).
fn job_key(namespace: &str, name: &str) -> String {
    let hash = tessera_model::fnv::fnv64(format!("{namespace}/{name}").as_bytes());
    format!("{hash:016x}")
}

fn replicated_jobs(jobset: &Value) -> Vec<Value> {
    jobset
        .pointer("/spec/replicatedJobs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Whether the JobSet's pods get DNS hostnames, and under which subdomain.
fn subdomain(jobset: &Value) -> Option<String> {
    let enabled = jobset
        .pointer("/spec/network/enableDNSHostnames")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    enabled.then(|| match text(jobset, "/spec/network/subdomain") {
        "" => text(jobset, "/metadata/name").to_string(),
        subdomain => subdomain.to_string(),
    })
}

/// The Job for one replica of a replicatedJob.
pub fn job_for(
    jobset: &Value,
    replicated: &Value,
    index: i64,
    global_index: i64,
    restarts: i64,
) -> Value {
    let name = text(jobset, "/metadata/name");
    let namespace = text(jobset, "/metadata/namespace");
    let rjob = text(replicated, "/name");
    let job_name = format!("{name}-{rjob}-{index}");
    let key = job_key(namespace, &job_name);
    let replicas = replicated
        .get("replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let labels = json!({
        JOBSET_NAME: name, REPLICATED_JOB_NAME: rjob,
        REPLICATED_JOB_REPLICAS: replicas.to_string(), JOB_INDEX: index.to_string(),
        JOB_GLOBAL_INDEX: global_index.to_string(), RESTART_ATTEMPT: restarts.to_string(), JOB_KEY: key,
    });
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": replicated.pointer("/template/metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": replicated.pointer("/template/spec").cloned().unwrap_or_else(|| json!({})),
    });
    job["metadata"]["name"] = json!(job_name);
    job["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": name,
        "uid": text(jobset, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true,
    }]);
    for field in ["labels", "annotations"] {
        if !job["metadata"][field].is_object() {
            job["metadata"][field] = json!({});
        }
        if !job["spec"]["template"]["metadata"][field].is_object() {
            job["spec"]["template"]["metadata"][field] = json!({});
        }
        for (k, v) in labels.as_object().into_iter().flatten() {
            job["metadata"][field][k] = v.clone();
            job["spec"]["template"]["metadata"][field][k] = v.clone();
        }
    }
    if let Some(subdomain) = subdomain(jobset) {
        job["spec"]["template"]["spec"]["subdomain"] = json!(subdomain);
    }
    // JobSet's webhook defaults the pods' restart policy.
    if job.pointer("/spec/template/spec/restartPolicy").is_none() {
        job["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    }
    if jobset.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
        job["spec"]["suspend"] = json!(true);
    }
    let topology = jobset
        .pointer(&format!(
            "/metadata/annotations/{}",
            EXCLUSIVE_TOPOLOGY.replace('/', "~1")
        ))
        .or_else(|| {
            replicated.pointer(&format!(
                "/template/metadata/annotations/{}",
                EXCLUSIVE_TOPOLOGY.replace('/', "~1")
            ))
        })
        .and_then(Value::as_str);
    if let Some(topology) = topology {
        let affinity = &mut job["spec"]["template"]["spec"]["affinity"];
        affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!([{
            "labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [key]}]},
            "topologyKey": topology,
        }]);
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!([{
            "labelSelector": {"matchExpressions": [
                {"key": JOB_KEY, "operator": "Exists"},
                {"key": JOB_KEY, "operator": "NotIn", "values": [key]}]},
            "topologyKey": topology,
        }]);
    }
    job
}

fn condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now})
}

impl JobSetPlan {
    /// The writes that carry the plan out for `jobset`: the headless Service, deletions of
    /// Jobs (their pods in the background), suspensions and resumptions, new Jobs, the new
    /// status, and the JobSet itself deleted in the foreground (as upstream's TTL policy does)
    /// once its time to live has passed.
    pub fn writes(self, jobset: &Value) -> Writes {
        let mut writes = Writes::default();
        writes.create(Resource::Service, self.service);
        writes
            .0
            .extend(self.delete.into_iter().map(|name| Write::Delete {
                resource: Resource::Job,
                name,
                propagation: Propagation::Background,
            }));
        writes.patch(Resource::Job, self.suspend);
        writes.create(Resource::Job, self.create);
        writes.status(jobset, self.status);
        if self.delete_jobset {
            writes.0.push(Write::DeleteOwner(Propagation::Foreground));
        }
        writes
    }
}

/// The JobSet controller's `spec.managedBy` value.
pub const JOBSET_CONTROLLER: &str = "jobset.sigs.k8s.io/jobset-controller";

/// Whether the JobSet controller runs this JobSet: `spec.managedBy` unset or naming it (a
/// JobSet left to MultiKueue is not touched).
pub fn managed_here(jobset: &Value) -> bool {
    jobset
        .pointer("/spec/managedBy")
        .and_then(Value::as_str)
        .is_none_or(|manager| manager == JOBSET_CONTROLLER)
}

/// Plans a JobSet's next step from the Jobs it owns.
pub fn plan(jobset: &Value, jobs: &[Value], now: SystemTime) -> JobSetPlan {
    let clock = now;
    let now = &timestamp(now);
    let mut plan = JobSetPlan::default();
    let name = text(jobset, "/metadata/name");
    let restarts = int_or_zero(jobset, "/status/restarts");
    let mut status = jobset
        .get("status")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let finished = conditions
        .iter()
        .any(|c| (c["type"] == "Completed" || c["type"] == "Failed") && c["status"] == "True");
    let replicated = replicated_jobs(jobset);
    let current: Vec<&Value> = jobs
        .iter()
        .filter(|j| {
            text(
                j,
                &format!("/metadata/labels/{}", RESTART_ATTEMPT.replace('/', "~1")),
            ) == restarts.to_string()
        })
        .collect();
    // Jobs of earlier attempts are cleaned up.
    plan.delete.extend(
        jobs.iter()
            .filter(|j| !current.iter().any(|c| std::ptr::eq(*c, *j)))
            .filter(|j| j.pointer("/metadata/deletionTimestamp").is_none())
            .map(|j| text(j, "/metadata/name").to_string()),
    );
    let of = |rjob: &str| -> Vec<&Value> {
        current
            .iter()
            .copied()
            .filter(|j| {
                text(
                    j,
                    &format!(
                        "/metadata/labels/{}",
                        REPLICATED_JOB_NAME.replace('/', "~1")
                    ),
                ) == rjob
            })
            .collect()
    };

    // Per-replicatedJob status.
    let mut rjob_status = Vec::new();
    for rj in &replicated {
        let rjob = text(rj, "/name");
        let rjobs = of(rjob);
        let count = |check: &dyn Fn(&Value) -> bool| rjobs.iter().filter(|j| check(j)).count();
        let ready = count(&|j: &Value| {
            let parallelism = j
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            int_or_zero(j, "/status/ready") + int_or_zero(j, "/status/succeeded") >= parallelism
                && job_condition(j, "Failed").is_none()
        });
        rjob_status.push(json!({
            "name": rjob,
            "ready": ready,
            "succeeded": count(&|j: &Value| job_condition(j, "Complete").is_some()),
            "failed": count(&|j: &Value| job_condition(j, "Failed").is_some()),
            "active": count(&|j: &Value| int_or_zero(j, "/status/active") > 0),
            "suspended": count(&|j: &Value| j.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)),
        }));
    }
    status["replicatedJobsStatus"] = json!(rjob_status);
    status["restarts"] = json!(restarts);
    if finished {
        match expiry(jobset, clock) {
            Some(Expiry::Expired) => plan.delete_jobset = true,
            Some(Expiry::After(left)) => plan.requeue_after = Some(left),
            None => {}
        }
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }
    plan.service = subdomain(jobset).map(|service| {
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "name": name, "uid": text(jobset, "/metadata/uid"), "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: name}, "publishNotReadyAddresses": true}})
    });

    // Failure: the first failed Job decides, per failurePolicy.
    if let Some(failed) = current
        .iter()
        .find(|j| job_condition(j, "Failed").is_some())
    {
        let reason = job_condition(failed, "Failed")
            .map(|c| text(c, "/reason").to_string())
            .unwrap_or_default();
        let failed_rjob = text(
            failed,
            &format!(
                "/metadata/labels/{}",
                REPLICATED_JOB_NAME.replace('/', "~1")
            ),
        );
        let rule = jobset
            .pointer("/spec/failurePolicy/rules")
            .and_then(Value::as_array)
            .and_then(|rules| {
                rules.iter().find(|rule| {
                    let reasons_ok = rule
                        .get("onJobFailureReasons")
                        .and_then(Value::as_array)
                        .is_none_or(|r| r.is_empty() || r.iter().any(|x| x == reason.as_str()));
                    let target_ok = rule
                        .get("targetReplicatedJobs")
                        .and_then(Value::as_array)
                        .is_none_or(|t| t.is_empty() || t.iter().any(|x| x == failed_rjob));
                    reasons_ok && target_ok
                })
            });
        let action = rule.map_or("RestartJobSet", |r| text(r, "/action"));
        let max_restarts = int_or_zero(jobset, "/spec/failurePolicy/maxRestarts");
        let restart = match action {
            "FailJobSet" => false,
            "RestartJobSetAndIgnoreMaxRestarts" => true,
            _ => restarts < max_restarts,
        };
        if restart {
            plan.delete.extend(
                current
                    .iter()
                    .map(|j| text(j, "/metadata/name").to_string()),
            );
            status["restarts"] = json!(restarts + 1);
            status["conditions"] = json!(conditions);
            plan.status = status;
            return plan;
        }
        let message = if action == "FailJobSet" {
            format!(
                "Failed due to matching FailJobSet rule for job {}",
                text(failed, "/metadata/name")
            )
        } else {
            "jobset failed due to reaching max number of restarts".to_string()
        };
        let reason = if action == "FailJobSet" {
            "FailJobSetActionMatched"
        } else {
            "ReachedMaxRestarts"
        };
        conditions.push(condition("Failed", reason, &message, now));
        status["terminalState"] = json!("Failed");
        plan.delete.extend(
            current
                .iter()
                .filter(|j| {
                    job_condition(j, "Complete").is_none() && job_condition(j, "Failed").is_none()
                })
                .map(|j| text(j, "/metadata/name").to_string()),
        );
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }

    // Success per successPolicy.
    let operator = jobset
        .pointer("/spec/successPolicy/operator")
        .and_then(Value::as_str)
        .unwrap_or("All");
    let targets: Vec<String> = jobset
        .pointer("/spec/successPolicy/targetReplicatedJobs")
        .and_then(Value::as_array)
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_else(|| {
            replicated
                .iter()
                .map(|r| text(r, "/name").to_string())
                .collect()
        });
    let target_jobs: Vec<&Value> = targets.iter().flat_map(|t| of(t)).collect();
    let expected: i64 = replicated
        .iter()
        .filter(|r| targets.iter().any(|t| t == text(r, "/name")))
        .map(|r| r.get("replicas").and_then(Value::as_i64).unwrap_or(1))
        .sum();
    let complete = target_jobs
        .iter()
        .filter(|j| job_condition(j, "Complete").is_some())
        .count() as i64;
    let succeeded = match operator {
        "Any" => complete > 0,
        _ => expected > 0 && complete >= expected,
    };
    if succeeded {
        conditions.push(condition(
            "Completed",
            "AllJobsCompleted",
            "jobset completed successfully",
            now,
        ));
        status["terminalState"] = json!("Completed");
        plan.delete.extend(
            current
                .iter()
                .filter(|j| job_condition(j, "Complete").is_none())
                .map(|j| text(j, "/metadata/name").to_string()),
        );
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }

    // Creation, in order when asked.
    let in_order = text(jobset, "/spec/startupPolicy/startupPolicyOrder") == "InOrder";
    let suspended = jobset.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let mut global = 0;
    for (position, rj) in replicated.iter().enumerate() {
        let rjob = text(rj, "/name");
        let replicas = rj.get("replicas").and_then(Value::as_i64).unwrap_or(1);
        let existing = of(rjob);
        if in_order && position > 0 {
            let previous = &rjob_status[position - 1];
            let previous_replicas = replicated[position - 1]
                .get("replicas")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            if int_or_zero(previous, "/ready") < previous_replicas {
                break;
            }
        }
        for index in 0..replicas {
            let job_name = format!("{name}-{rjob}-{index}");
            if !existing
                .iter()
                .any(|j| text(j, "/metadata/name") == job_name)
            {
                plan.create
                    .push(job_for(jobset, rj, index, global + index, restarts));
            }
        }
        global += replicas;
    }
    for job in &current {
        let job_suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
        if job_suspended != suspended {
            let patch = if suspended {
                json!({"spec": {"suspend": true}})
            } else {
                let of_job = text(
                    job,
                    &format!(
                        "/metadata/labels/{}",
                        REPLICATED_JOB_NAME.replace('/', "~1")
                    ),
                );
                let template = replicated
                    .iter()
                    .find(|rj| text(rj, "/name") == of_job)
                    .and_then(|rj| rj.pointer("/template/spec/template"));
                resume_patch(job, template)
            };
            plan.suspend
                .push((text(job, "/metadata/name").to_string(), patch));
        }
    }
    let suspended_condition = conditions.iter().position(|c| c["type"] == "Suspended");
    match (suspended, suspended_condition) {
        (true, None) => conditions.push(condition(
            "Suspended",
            "SuspendedJobs",
            "jobset is suspended",
            now,
        )),
        (false, Some(index)) => {
            conditions[index] = json!({"type": "Suspended", "status": "False", "reason": "ResumeJobs", "message": "jobset is resumed", "lastTransitionTime": now});
        }
        _ => {}
    }
    status["conditions"] = json!(conditions);
    plan.status = status;
    plan
}

/// Upstream's `resumeJob`: the Job unsuspended, with what may change while its JobSet is
/// suspended (for Kueue: pod template labels, annotations, nodeSelector, tolerations and
/// scheduling gates) merged in from its replicatedJob's pod template, the template's values
/// winning and list entries the Job lacks appended.
fn resume_patch(job: &Value, template: Option<&Value>) -> Value {
    let mut patch = json!({"spec": {"suspend": false}});
    let Some(template) = template else {
        return patch;
    };
    let non_empty = |pointer: &str| {
        template
            .pointer(pointer)
            .filter(|v| v.as_object().is_some_and(|m| !m.is_empty()))
    };
    let mut pod = json!({});
    for field in ["labels", "annotations"] {
        if let Some(map) = non_empty(&format!("/metadata/{field}")) {
            pod["metadata"][field] = map.clone();
        }
    }
    if let Some(selector) = non_empty("/spec/nodeSelector") {
        pod["spec"]["nodeSelector"] = selector.clone();
    }
    for field in ["tolerations", "schedulingGates"] {
        let wanted = template
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array);
        let Some(wanted) = wanted.filter(|w| !w.is_empty()) else {
            continue;
        };
        let mut merged = job
            .pointer(&format!("/spec/template/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in wanted {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        pod["spec"][field] = Value::Array(merged);
    }
    if pod != json!({}) {
        patch["spec"]["template"] = pod;
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobset(extra: Value) -> Value {
        let mut js = json!({"metadata": {"name": "train", "namespace": "ml", "uid": "js"},
            "spec": {"replicatedJobs": [
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": "w", "image": "w"}]}}}}},
                {"name": "driver", "replicas": 1, "template": {"spec": {"template": {"spec": {"containers": [{"name": "d", "image": "d"}]}}}}}]}});
        json_patch::merge(&mut js, &extra);
        js
    }

    fn job(plan_job: &Value, condition: Option<&str>, ready: i64) -> Value {
        let mut job = plan_job.clone();
        job["status"] = json!({"ready": ready});
        if let Some(kind) = condition {
            job["status"]["conditions"] =
                json!([{"type": kind, "status": "True", "reason": "BackoffLimitExceeded"}]);
        }
        job
    }

    #[test]
    fn creates_every_job_with_upstream_labels_and_a_headless_service() {
        let js = jobset(json!({}));
        let plan = plan(&js, &[], SystemTime::UNIX_EPOCH);
        let names: Vec<&str> = plan
            .create
            .iter()
            .map(|j| j["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["train-workers-0", "train-workers-1", "train-driver-0"]
        );
        let driver = &plan.create[2];
        assert_eq!(driver["metadata"]["labels"][JOB_GLOBAL_INDEX], "2");
        assert_eq!(
            driver["spec"]["template"]["metadata"]["labels"][REPLICATED_JOB_NAME],
            "driver"
        );
        assert_eq!(driver["spec"]["template"]["spec"]["subdomain"], "train");
        assert_eq!(plan.service.unwrap()["spec"]["clusterIP"], "None");
    }

    #[test]
    fn resumed_jobs_take_what_kueue_put_into_their_templates() {
        let suspended = jobset(json!({"spec": {"suspend": true}}));
        let created = plan(&suspended, &[], SystemTime::UNIX_EPOCH).create;
        assert!(created.iter().all(|j| j["spec"]["suspend"] == true));
        let tolerations = json!([{"key": "spot-taint", "operator": "Exists"}]);
        let resumed = jobset(json!({"spec": {"suspend": false, "replicatedJobs": [
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 1,
                "template": {"metadata": {"labels": {"kueue.x-k8s.io/podset": "workers"}},
                    "spec": {"nodeSelector": {"instance-type": "spot"},
                        "tolerations": tolerations, "containers": [{"name": "w", "image": "w"}]}}}}},
            {"name": "driver", "replicas": 1, "template": {"spec": {"template": {"spec": {
                "containers": [{"name": "d", "image": "d"}]}}}}}]}}));
        let resumes = plan(&resumed, &created, SystemTime::UNIX_EPOCH).suspend;
        let by_name: std::collections::BTreeMap<&str, &Value> =
            resumes.iter().map(|(n, p)| (n.as_str(), p)).collect();
        assert_eq!(by_name.len(), 3);
        let worker = by_name["train-workers-1"];
        assert_eq!(worker["spec"]["suspend"], false);
        let pod = &worker["spec"]["template"];
        assert_eq!(
            pod["spec"]["nodeSelector"],
            json!({"instance-type": "spot"})
        );
        assert_eq!(pod["spec"]["tolerations"], tolerations);
        assert_eq!(
            pod["metadata"]["labels"]["kueue.x-k8s.io/podset"],
            "workers"
        );
        // Nothing to carry: only unsuspended.
        assert_eq!(
            by_name["train-driver-0"],
            &json!({"spec": {"suspend": false}})
        );
        // Suspending again only suspends.
        let running: Vec<Value> = created
            .iter()
            .map(|j| {
                let mut j = j.clone();
                j["spec"]["suspend"] = json!(false);
                j
            })
            .collect();
        let stops = plan(&suspended, &running, SystemTime::UNIX_EPOCH).suspend;
        assert_eq!(stops.len(), 3);
        assert!(
            stops
                .iter()
                .all(|(_, p)| p == &json!({"spec": {"suspend": true}}))
        );
    }

    #[test]
    fn in_order_startup_waits_for_readiness() {
        let js = jobset(json!({"spec": {"startupPolicy": {"startupPolicyOrder": "InOrder"}}}));
        let first = plan(&js, &[], SystemTime::UNIX_EPOCH);
        assert_eq!(first.create.len(), 2, "only the workers");
        let workers: Vec<Value> = first.create.iter().map(|j| job(j, None, 1)).collect();
        let second = plan(&js, &workers, SystemTime::UNIX_EPOCH);
        assert_eq!(second.create.len(), 1);
        assert_eq!(second.create[0]["metadata"]["name"], "train-driver-0");
    }

    #[test]
    fn success_and_failure_policies() {
        let js = jobset(
            json!({"spec": {"successPolicy": {"operator": "All", "targetReplicatedJobs": ["driver"]}}}),
        );
        let created = plan(&js, &[], SystemTime::UNIX_EPOCH).create;
        let jobs = vec![
            job(&created[0], None, 1),
            job(&created[1], None, 1),
            job(&created[2], Some("Complete"), 0),
        ];
        let done = plan(&js, &jobs, SystemTime::UNIX_EPOCH);
        assert_eq!(done.status["terminalState"], "Completed");
        assert_eq!(done.status["conditions"][0]["reason"], "AllJobsCompleted");
        assert_eq!(done.delete, ["train-workers-0", "train-workers-1"]);

        let js = jobset(json!({"spec": {"failurePolicy": {"maxRestarts": 1}}}));
        let created = plan(&js, &[], SystemTime::UNIX_EPOCH).create;
        let jobs = vec![
            job(&created[0], Some("Failed"), 0),
            job(&created[1], None, 1),
            job(&created[2], None, 1),
        ];
        let restart = plan(&js, &jobs, SystemTime::UNIX_EPOCH);
        assert_eq!(restart.status["restarts"], 1);
        assert_eq!(restart.delete.len(), 3);
        let mut after = js.clone();
        after["status"] = json!({"restarts": 1});
        let again: Vec<Value> = plan(&after, &[], SystemTime::UNIX_EPOCH)
            .create
            .iter()
            .map(|j| job(j, Some("Failed"), 0))
            .collect();
        assert_eq!(again[0]["metadata"]["labels"][RESTART_ATTEMPT], "1");
        let failed = plan(&after, &again, SystemTime::UNIX_EPOCH);
        assert_eq!(failed.status["terminalState"], "Failed");
        assert_eq!(
            failed.status["conditions"][0]["reason"],
            "ReachedMaxRestarts"
        );
    }

    /// Upstream's TTL-after-finished cases (`ttl_after_finished_test.go`: checkIfTTLExpired,
    /// timeLeft, requeueJobSetAfter, executeTTLAfterFinishedPolicy) as one table: the time
    /// to live, the finishing condition and how long ago it became true (`None`: an unreadable
    /// time), whether the JobSet is being deleted, and what is due.
    #[test]
    fn ttl_after_finished() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let secs = Duration::from_secs;
        #[allow(clippy::type_complexity)]
        let cases: [(
            &str,
            Option<i64>,
            Option<(&str, Option<u64>)>,
            bool,
            Option<Expiry>,
        ); 15] = [
            ("not finished, TTL not set", None, None, false, None),
            ("not finished, TTL 5s", Some(5), None, false, None),
            (
                "completed now, TTL not set",
                None,
                Some(("Completed", Some(0))),
                false,
                None,
            ),
            (
                "completed 10s ago, TTL 5s",
                Some(5),
                Some(("Completed", Some(10))),
                false,
                Some(Expiry::Expired),
            ),
            (
                "completed 2s ago, TTL 5s",
                Some(5),
                Some(("Completed", Some(2))),
                false,
                Some(Expiry::After(secs(3))),
            ),
            (
                "completed now, TTL 10s not expired",
                Some(10),
                Some(("Completed", Some(0))),
                false,
                Some(Expiry::After(secs(10))),
            ),
            (
                "completed 10s ago, TTL 10s expired",
                Some(10),
                Some(("Completed", Some(10))),
                false,
                Some(Expiry::Expired),
            ),
            (
                "completed, deletion in progress",
                Some(10),
                Some(("Completed", Some(0))),
                true,
                None,
            ),
            (
                "invalid completion time",
                Some(10),
                Some(("Completed", None)),
                false,
                None,
            ),
            (
                "completed now, 0s TTL",
                Some(0),
                Some(("Completed", Some(0))),
                false,
                Some(Expiry::Expired),
            ),
            (
                "completed 10s ago, 15s TTL",
                Some(15),
                Some(("Completed", Some(10))),
                false,
                Some(Expiry::After(secs(5))),
            ),
            (
                "failed now, 0s TTL",
                Some(0),
                Some(("Failed", Some(0))),
                false,
                Some(Expiry::Expired),
            ),
            (
                "failed now, 10s TTL",
                Some(10),
                Some(("Failed", Some(0))),
                false,
                Some(Expiry::After(secs(10))),
            ),
            (
                "failed 10s ago, 15s TTL",
                Some(15),
                Some(("Failed", Some(10))),
                false,
                Some(Expiry::After(secs(5))),
            ),
            (
                "a condition that is not true does not finish it",
                Some(0),
                Some(("Suspended", Some(0))),
                false,
                None,
            ),
        ];
        for (name, ttl, finished, deleting, expected) in cases {
            let mut js = jobset(json!({}));
            if let Some(ttl) = ttl {
                js["spec"]["ttlSecondsAfterFinished"] = json!(ttl);
            }
            if deleting {
                js["metadata"]["deletionTimestamp"] = json!(timestamp(now));
            }
            if let Some((kind, ago)) = finished {
                let at = ago.map_or(json!(""), |ago| json!(timestamp(now - secs(ago))));
                js["status"] = json!({"conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}]});
            }
            assert_eq!(expiry(&js, now), expected, "{name}");
            // The plan of a finished JobSet deletes it in the foreground, or looks again when
            // its time runs out.
            let planned = plan(&js, &[], now);
            let finishing = finished.is_some_and(|(kind, _)| kind != "Suspended");
            if finishing {
                assert_eq!(
                    planned.delete_jobset,
                    expected == Some(Expiry::Expired),
                    "{name}"
                );
                let after = match expected {
                    Some(Expiry::After(left)) => Some(left),
                    _ => None,
                };
                assert_eq!(planned.requeue_after, after, "{name}");
                let writes = planned.writes(&js);
                assert_eq!(
                    writes.0.last() == Some(&Write::DeleteOwner(Propagation::Foreground)),
                    expected == Some(Expiry::Expired),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn exclusive_placement_becomes_affinity() {
        let js = jobset(
            json!({"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: "cloud.google.com/gke-nodepool"}}}),
        );
        let created = plan(&js, &[], SystemTime::UNIX_EPOCH).create;
        let affinity = &created[0]["spec"]["template"]["spec"]["affinity"];
        assert_eq!(
            affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
            "cloud.google.com/gke-nodepool"
        );
        assert_eq!(
            affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
                ["matchExpressions"][1]["operator"],
            "NotIn"
        );
    }
}
