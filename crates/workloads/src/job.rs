//! The Job core: from a Job and its pods, what to create, delete and record, following
//! upstream's Job controller — parallelism and completions, Indexed completion mode,
//! backoffLimit and backoffLimitPerIndex, podFailurePolicy, successPolicy,
//! activeDeadlineSeconds, suspend, ttlSecondsAfterFinished, and exact accounting of finished
//! pods through the `batch.kubernetes.io/job-tracking` finalizer and
//! `status.uncountedTerminatedPods`.
//!
//! Pure: the time is an input; no I/O.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crate::plan::{Propagation, Resource, Write, Writes};
use serde_json::{Value, json};
use tessera_model::conditions::{is_true, pod_is_ready};
use tessera_model::json::{int, text};
use tessera_model::time::{parse_timestamp, timestamp};

/// The finalizer that keeps a pod until the controller has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Label and annotation of an Indexed Job pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Label linking pods to their Job's UID.
pub const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
/// Label naming the pods' Job.
pub const JOB_NAME: &str = "batch.kubernetes.io/job-name";

/// What the controller should do for a Job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPlan {
    /// Pods to create: `Some(index)` in Indexed mode.
    pub create: Vec<Option<i64>>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// Names of pods whose tracking finalizer to remove.
    pub release: Vec<String>,
    /// The Job's new status.
    pub status: Value,
    /// Whether the Job's TTL after finishing has passed.
    pub delete_job: bool,
    /// When to look again even if nothing changes (deadlines, TTLs, backoff).
    pub requeue_after: Option<Duration>,
    /// The failed pods this plan accounts for that a `podFailurePolicy` rule matched, by the
    /// rule's action (`FailJob`, `Ignore`, `Count`, `FailIndex`): what upstream counts in
    /// `job_controller_pod_failures_handled_by_failure_policy_total` once the status is
    /// written.
    pub failure_policy_actions: BTreeMap<String, u64>,
}

fn phase(pod: &Value) -> &str {
    text(pod, "/status/phase")
}

fn has_finalizer(pod: &Value) -> bool {
    pod.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| f.iter().any(|f| f == TRACKING_FINALIZER))
}

fn index_of(pod: &Value) -> Option<i64> {
    pod.pointer(&format!(
        "/metadata/annotations/{}",
        COMPLETION_INDEX.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .and_then(|i| i.parse().ok())
}

/// Parses `completedIndexes`-style interval lists (`1,3-5`).
pub fn parse_indexes(text: &str) -> BTreeSet<i64> {
    let mut set = BTreeSet::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>()) {
                    set.extend(a..=b.min(a + 1_000_000));
                }
            }
            None => {
                if let Ok(i) = part.parse() {
                    set.insert(i);
                }
            }
        }
    }
    set
}

/// Formats an index set as upstream does (`1,3-5`).
pub fn format_indexes(set: &BTreeSet<i64>) -> String {
    let mut parts = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// The action a podFailurePolicy takes for a failed pod, with the message upstream writes.
fn failure_action(job: &Value, pod: &Value) -> Option<(String, String)> {
    let rules = job
        .pointer("/spec/podFailurePolicy/rules")
        .and_then(Value::as_array)?;
    let pod_name = format!(
        "{}/{}",
        text(pod, "/metadata/namespace"),
        text(pod, "/metadata/name")
    );
    for (index, rule) in rules.iter().enumerate() {
        let action = text(rule, "/action").to_string();
        if let Some(codes) = rule.get("onExitCodes") {
            let container = codes.get("containerName").and_then(Value::as_str);
            let operator = text(codes, "/operator");
            let values: Vec<i64> = codes
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_i64).collect())
                .unwrap_or_default();
            let statuses = pod
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for status in statuses {
                if container.is_some_and(|c| c != text(&status, "/name")) {
                    continue;
                }
                let Some(code) = int(&status, "/state/terminated/exitCode") else {
                    continue;
                };
                if code == 0 {
                    continue;
                }
                let matched = match operator {
                    "In" => values.contains(&code),
                    "NotIn" => !values.contains(&code),
                    _ => false,
                };
                if matched {
                    let message = format!(
                        "Container {} for pod {pod_name} failed with exit code {code} matching {action} rule at index {index}",
                        text(&status, "/name")
                    );
                    return Some((action, message));
                }
            }
        }
        if let Some(patterns) = rule.get("onPodConditions").and_then(Value::as_array) {
            let conditions = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for pattern in patterns {
                let kind = text(pattern, "/type");
                let status = pattern
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("True");
                if let Some(condition) = conditions
                    .iter()
                    .find(|c| c["type"] == kind && c["status"] == status)
                {
                    let _ = condition;
                    let message = format!(
                        "Pod {pod_name} has condition {kind} matching {action} rule at index {index}"
                    );
                    return Some((action, message));
                }
            }
        }
    }
    None
}

fn condition(kind: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": reason, "message": message,
           "lastProbeTime": now, "lastTransitionTime": now})
}

/// The merge patch that removes the tracking finalizer from a pod, keeping its others.
pub fn release_patch(pod: &Value) -> Value {
    let kept: Vec<Value> = pod
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| {
            f.iter()
                .filter(|f| *f != TRACKING_FINALIZER)
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    json!({"metadata": {"finalizers": kept}})
}

impl JobPlan {
    /// The writes that carry the plan out for `job` and its `pods` (those the plan was made
    /// from): pods deleted (each released first, so the controller's own deletions are not
    /// counted as failures), the new status, finished pods released (counted first, released
    /// after: a crash in between cannot count a pod twice), new pods, and the Job itself
    /// deleted (its pods in the background) once its TTL has passed.
    pub fn writes(self, job: &Value, pods: &[Value]) -> Writes {
        let mut writes = Writes::default();
        let release = |writes: &mut Writes, name: &String| {
            if let Some(pod) = pods.iter().find(|p| text(p, "/metadata/name") == name) {
                writes.patch(Resource::Pod, [(name.clone(), release_patch(pod))]);
            }
        };
        for name in &self.delete {
            release(&mut writes, name);
            writes.delete(Resource::Pod, [name]);
        }
        writes.status(job, self.status);
        for name in &self.release {
            release(&mut writes, name);
        }
        writes.create(
            Resource::Pod,
            self.create.iter().map(|index| pod_for(job, *index)),
        );
        if self.delete_job {
            writes.0.push(Write::Delete {
                resource: Resource::Job,
                name: text(job, "/metadata/name").to_string(),
                propagation: Propagation::Background,
            });
        }
        writes
    }
}

/// The Job controller's `spec.managedBy` value.
pub const JOB_CONTROLLER: &str = "kubernetes.io/job-controller";

/// Whether the built-in Job controller runs this Job (`isJobManagedByController`):
/// `spec.managedBy` unset or naming it; a Job left to another controller (MultiKueue's
/// `kueue.x-k8s.io/multikueue`) is not touched.
pub fn managed_here(job: &Value) -> bool {
    job.pointer("/spec/managedBy")
        .and_then(Value::as_str)
        .is_none_or(|manager| manager == JOB_CONTROLLER)
}

/// Computes what to do for a Job given its pods (those carrying its controller UID).
pub fn plan(job: &Value, pods: &[Value], now: SystemTime, backoff_base: Duration) -> JobPlan {
    let now_text = timestamp(now);
    let mut status = job.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    let mut plan = JobPlan::default();
    let indexed = text(job, "/spec/completionMode") == "Indexed";
    let completions = int(job, "/spec/completions");
    let parallelism = int(job, "/spec/parallelism").unwrap_or(1).max(0);
    let backoff_limit = int(job, "/spec/backoffLimit").unwrap_or(6);
    let per_index_limit = int(job, "/spec/backoffLimitPerIndex");
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let finished = is_true(job, "Complete") || is_true(job, "Failed");

    // --- accounting of finished pods (two-phase through uncountedTerminatedPods) ---
    let uncounted_succeeded: BTreeSet<String> =
        tessera_model::json::strings_at(&status, "/uncountedTerminatedPods/succeeded");
    let uncounted_failed: BTreeSet<String> =
        tessera_model::json::strings_at(&status, "/uncountedTerminatedPods/failed");
    let mut succeeded = int(&status, "/succeeded").unwrap_or(0);
    let mut failed = int(&status, "/failed").unwrap_or(0);
    let mut completed_indexes = parse_indexes(text(&status, "/completedIndexes"));
    let mut failed_indexes = parse_indexes(text(&status, "/failedIndexes"));
    let mut per_index_failures: BTreeMap<i64, i64> = BTreeMap::new();
    let mut new_succeeded = BTreeSet::new();
    let mut new_failed = BTreeSet::new();
    let mut fail_job: Option<String> = None;
    let pod_uids: BTreeSet<String> = pods
        .iter()
        .map(|p| text(p, "/metadata/uid").to_string())
        .collect();
    for pod in pods {
        let uid = text(pod, "/metadata/uid").to_string();
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        if terminal && has_finalizer(pod) {
            plan.release.push(text(pod, "/metadata/name").to_string());
        }
        // Failures per index count every failed pod we can still see or have counted.
        if phase(pod) == "Failed"
            && let Some(index) = index_of(pod)
            && failure_action(job, pod).is_none_or(|(a, _)| a != "Ignore")
        {
            *per_index_failures.entry(index).or_default() += 1;
        }
        if !terminal
            || !has_finalizer(pod)
            || uncounted_succeeded.contains(&uid)
            || uncounted_failed.contains(&uid)
        {
            continue;
        }
        if phase(pod) == "Succeeded" {
            new_succeeded.insert(uid);
            succeeded += 1;
            if let Some(index) = index_of(pod) {
                completed_indexes.insert(index);
            }
        } else {
            let action = failure_action(job, pod);
            if let Some((name, _)) = &action {
                *plan.failure_policy_actions.entry(name.clone()).or_default() += 1;
            }
            match action {
                Some((action, _)) if action == "Ignore" => {}
                Some((action, message)) if action == "FailJob" => {
                    new_failed.insert(uid);
                    failed += 1;
                    fail_job.get_or_insert(message);
                }
                Some((action, _)) if action == "FailIndex" => {
                    new_failed.insert(uid);
                    failed += 1;
                    if let Some(index) = index_of(pod) {
                        failed_indexes.insert(index);
                    }
                }
                _ => {
                    new_failed.insert(uid);
                    failed += 1;
                }
            }
        }
    }
    // Uncounted entries whose pods have released their finalizer (or are gone) are settled.
    let still_uncounted = |set: &BTreeSet<String>| -> Vec<String> {
        set.iter()
            .filter(|uid| {
                pods.iter()
                    .any(|p| text(p, "/metadata/uid") == uid.as_str() && has_finalizer(p))
            })
            .cloned()
            .collect()
    };
    let mut next_uncounted_succeeded = still_uncounted(&uncounted_succeeded);
    next_uncounted_succeeded.extend(new_succeeded.iter().cloned());
    let mut next_uncounted_failed = still_uncounted(&uncounted_failed);
    next_uncounted_failed.extend(new_failed.iter().cloned());
    let _ = pod_uids;
    if let Some(limit) = per_index_limit {
        for (index, count) in &per_index_failures {
            if *count > limit {
                failed_indexes.insert(*index);
            }
        }
    }
    completed_indexes.retain(|i| completions.is_none_or(|c| *i < c));

    let active: Vec<&Value> = pods
        .iter()
        .filter(|p| {
            !matches!(phase(p), "Succeeded" | "Failed")
                && p.pointer("/metadata/deletionTimestamp").is_none()
        })
        .collect();
    let terminating = pods
        .iter()
        .filter(|p| {
            p.pointer("/metadata/deletionTimestamp").is_some()
                && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .count();
    status["succeeded"] = json!(succeeded);
    status["failed"] = json!(failed);
    status["active"] = json!(active.len());
    status["ready"] = json!(active.iter().filter(|p| pod_is_ready(p)).count());
    status["terminating"] = json!(terminating);
    status["uncountedTerminatedPods"] =
        json!({"succeeded": next_uncounted_succeeded, "failed": next_uncounted_failed});
    if indexed {
        status["completedIndexes"] = json!(format_indexes(&completed_indexes));
        if per_index_limit.is_some() {
            status["failedIndexes"] = json!(format_indexes(&failed_indexes));
        }
    }
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let has_condition = |conditions: &[Value], kind: &str| {
        conditions
            .iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    };

    if finished {
        plan.delete
            .extend(active.iter().map(|p| text(p, "/metadata/name").to_string()));
        if let Some(ttl) = int(job, "/spec/ttlSecondsAfterFinished") {
            let done_at = status
                .get("completionTime")
                .or_else(|| {
                    conditions
                        .iter()
                        .find(|c| c["type"] == "Complete" || c["type"] == "Failed")
                        .and_then(|c| c.get("lastTransitionTime"))
                })
                .and_then(Value::as_str)
                .and_then(parse_timestamp)
                .unwrap_or(now);
            let expiry = done_at + Duration::from_secs(u64::try_from(ttl).unwrap_or(0));
            match expiry.duration_since(now) {
                Ok(left) if !left.is_zero() => plan.requeue_after = Some(left),
                _ => plan.delete_job = true,
            }
        }
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }

    // --- suspension ---
    if suspended {
        plan.delete
            .extend(active.iter().map(|p| text(p, "/metadata/name").to_string()));
        if !has_condition(&conditions, "Suspended") {
            conditions.retain(|c| c["type"] != "Suspended");
            conditions.push(condition(
                "Suspended",
                "JobSuspended",
                "Job suspended",
                &now_text,
            ));
        }
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }
    if has_condition(&conditions, "Suspended") {
        for c in conditions.iter_mut().filter(|c| c["type"] == "Suspended") {
            *c = json!({"type": "Suspended", "status": "False", "reason": "JobResumed", "message": "Job resumed",
                        "lastProbeTime": now_text, "lastTransitionTime": now_text});
        }
        status["startTime"] = json!(now_text);
    }
    if status.get("startTime").is_none_or(Value::is_null) {
        status["startTime"] = json!(now_text);
    }

    // --- failure ---
    let start = status
        .get("startTime")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
        .unwrap_or(now);
    let mut failure: Option<(&str, String)> = fail_job.map(|m| ("PodFailurePolicy", m));
    if failure.is_none()
        && let Some(deadline) = int(job, "/spec/activeDeadlineSeconds")
    {
        let end = start + Duration::from_secs(u64::try_from(deadline).unwrap_or(0));
        match end.duration_since(now) {
            Ok(left) if !left.is_zero() => plan.requeue_after = Some(left),
            _ => {
                failure = Some((
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline".into(),
                ))
            }
        }
    }
    if failure.is_none() && per_index_limit.is_none() && failed > backoff_limit {
        failure = Some((
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit".into(),
        ));
    }
    if failure.is_none()
        && let Some(max) = int(job, "/spec/maxFailedIndexes")
        && failed_indexes.len() as i64 > max
    {
        failure = Some((
            "MaxFailedIndexesExceeded",
            "Job has exceeded the specified maximal number of failed indexes".into(),
        ));
    }

    // --- success ---
    let all_indexes: BTreeSet<i64> = (0..completions.unwrap_or(0)).collect();
    let mut success: Option<(&str, &str)> = None;
    if failure.is_none() {
        if indexed {
            if let Some(rules) = job
                .pointer("/spec/successPolicy/rules")
                .and_then(Value::as_array)
            {
                for rule in rules {
                    let wanted = rule
                        .get("succeededIndexes")
                        .and_then(Value::as_str)
                        .map(parse_indexes);
                    let count = int(rule, "/succeededCount");
                    let pool: BTreeSet<i64> = match &wanted {
                        Some(w) => completed_indexes.intersection(w).copied().collect(),
                        None => completed_indexes.clone(),
                    };
                    let enough = match (&wanted, count) {
                        (_, Some(count)) => pool.len() as i64 >= count,
                        (Some(w), None) => w.is_subset(&completed_indexes),
                        (None, None) => false,
                    };
                    if enough {
                        success = Some(("SuccessPolicy", "Matched rules at index 0"));
                        break;
                    }
                }
            }
            let settled: BTreeSet<i64> =
                completed_indexes.union(&failed_indexes).copied().collect();
            if success.is_none() && !all_indexes.is_empty() && all_indexes.is_subset(&settled) {
                if failed_indexes.is_empty() {
                    success = Some((
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ));
                } else {
                    failure = Some(("FailedIndexes", "Job has failed indexes".into()));
                }
            }
        } else {
            match completions {
                Some(c) if succeeded >= c => {
                    success = Some((
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ))
                }
                None if succeeded > 0 && active.is_empty() => {
                    success = Some((
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    ))
                }
                _ => {}
            }
        }
    }
    if let Some((reason, message)) = &failure {
        if !has_condition(&conditions, "FailureTarget") {
            conditions.push(condition("FailureTarget", reason, message, &now_text));
        }
        plan.delete
            .extend(active.iter().map(|p| text(p, "/metadata/name").to_string()));
        if active.is_empty() && terminating == 0 {
            conditions.push(condition("Failed", reason, message, &now_text));
        }
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }
    if let Some((reason, message)) = success {
        if !has_condition(&conditions, "SuccessCriteriaMet") {
            conditions.push(condition("SuccessCriteriaMet", reason, message, &now_text));
        }
        plan.delete
            .extend(active.iter().map(|p| text(p, "/metadata/name").to_string()));
        if active.is_empty() && terminating == 0 {
            conditions.push(condition("Complete", reason, message, &now_text));
            status["completionTime"] = json!(now_text);
        }
        status["conditions"] = json!(conditions);
        plan.status = status;
        return plan;
    }

    // --- creation, with exponential backoff after failures ---
    let recent_failures = failed.min(16);
    if recent_failures > 0 {
        let delay = backoff_base
            .saturating_mul(1 << (recent_failures - 1).min(10) as u32)
            .min(Duration::from_secs(360));
        let last_failure = pods
            .iter()
            .filter(|p| phase(p) == "Failed")
            .filter_map(|p| {
                p.pointer("/status/containerStatuses/0/state/terminated/finishedAt")
                    .and_then(Value::as_str)
                    .and_then(parse_timestamp)
            })
            .max();
        if let Some(last) = last_failure
            && let Ok(wait) = (last + delay).duration_since(now)
            && !wait.is_zero()
        {
            plan.requeue_after = Some(plan.requeue_after.map_or(wait, |r| r.min(wait)));
            status["conditions"] = json!(conditions);
            plan.status = status;
            return plan;
        }
    }
    if indexed {
        let busy: BTreeSet<i64> = active.iter().filter_map(|p| index_of(p)).collect();
        let pending: Vec<i64> = all_indexes
            .iter()
            .copied()
            .filter(|i| {
                !completed_indexes.contains(i) && !failed_indexes.contains(i) && !busy.contains(i)
            })
            .collect();
        let room = (parallelism - active.len() as i64).max(0) as usize;
        plan.create.extend(pending.into_iter().take(room).map(Some));
    } else {
        let wanted = match completions {
            Some(c) => parallelism.min(c - succeeded).max(0),
            None if succeeded == 0 => parallelism,
            None => 0,
        };
        let missing = (wanted - active.len() as i64).max(0);
        plan.create.extend((0..missing).map(|_| None));
        if (active.len() as i64) > wanted {
            let mut excess: Vec<&&Value> = active.iter().collect();
            excess.sort_by_key(|p| (pod_is_ready(p), phase(p) == "Running"));
            plan.delete.extend(
                excess
                    .into_iter()
                    .take((active.len() as i64 - wanted) as usize)
                    .map(|p| text(p, "/metadata/name").to_string()),
            );
        }
    }
    status["conditions"] = json!(conditions);
    plan.status = status;
    plan
}

/// The pod a Job creates, for an index in Indexed mode.
pub fn pod_for(job: &Value, index: Option<i64>) -> Value {
    let name = text(job, "/metadata/name");
    let uid = text(job, "/metadata/uid");
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": job.pointer("/spec/template/metadata").cloned().unwrap_or_else(|| json!({})),
        "spec": job.pointer("/spec/template/spec").cloned().unwrap_or_else(|| json!({})),
    });
    let metadata = &mut pod["metadata"];
    metadata["generateName"] = json!(match index {
        Some(i) => format!("{name}-{i}-"),
        None => format!("{name}-"),
    });
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"][CONTROLLER_UID] = json!(uid);
    metadata["labels"][JOB_NAME] = json!(name);
    metadata["labels"]["controller-uid"] = json!(uid);
    metadata["labels"]["job-name"] = json!(name);
    metadata["finalizers"] = json!([TRACKING_FINALIZER]);
    metadata["ownerReferences"] = json!([{
        "apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    if let Some(index) = index {
        metadata["labels"][COMPLETION_INDEX] = json!(index.to_string());
        if !metadata["annotations"].is_object() {
            metadata["annotations"] = json!({});
        }
        metadata["annotations"][COMPLETION_INDEX] = json!(index.to_string());
        pod["spec"]["hostname"] = json!(format!("{name}-{index}"));
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = pod["spec"].get_mut(list) {
                for container in containers {
                    if !container["env"].is_array() {
                        container["env"] = json!([]);
                    }
                    if let Some(env) = container["env"].as_array_mut() {
                        env.push(
                            json!({"name": "JOB_COMPLETION_INDEX", "value": index.to_string()}),
                        );
                    }
                }
            }
        }
    }
    pod
}

#[cfg(test)]
mod tests;
