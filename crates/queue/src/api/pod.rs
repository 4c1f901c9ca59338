//! Kueue's Pod integration (`pkg/controller/jobs/pod`, through the generic reconciler of
//! `pkg/controller/jobframework`): a pod Kueue manages (`kueue.x-k8s.io/managed`, created
//! behind the `kueue.x-k8s.io/admission` gate by `tessera-api`'s webhook) is one job on its
//! own, or one of a pod group (`kueue.x-k8s.io/pod-group-name`). From the pods of one such
//! unit, their Workload (if any), the flavors, the priority classes and the time, [`reconcile`]
//! says what to write, in Kueue's order: finished pods finish the Workload (a pod: its phase
//! and message; a group: `Pods succeeded: n/N.` once all succeeded; a serving group never); a
//! unit without a Workload gets one (a pod: Kueue's name, PodSet `main` of 1; a group: named by
//! the group, one PodSet per role hash counting its runnable pods, once all
//! `pod-group-total-count` pods exist, or from its first pod under fast admission), with
//! Kueue's errors for groups that do not agree; an evicted Workload's running pods are
//! stopped (a `TerminationTarget` condition, then deleted) and its quota released once no pod
//! runs; an admitted Workload's gated pods are ungated with their PodSet's flavors' node
//! labels and tolerations; running pods whose Workload is not admitted are stopped; and the
//! `kueue.x-k8s.io/managed` finalizer leaves deleted pods and those whose Workload finished.
//!
//! A group naming a prebuilt Workload (`kueue.x-k8s.io/prebuilt-workload-name`: a
//! StatefulSet's or LeaderWorkerSet group's, built by [`crate::api::parent`]) never gets one
//! here: without it, its running pods are stopped and it waits; with it, every member is added
//! to the Workload's owners (`EnsureWorkloadOwnedByAllMembers`).
//!
//! Which pods form a unit is [`units`]. Not modelled: excess pods of a group (Kueue deletes
//! the newest), replacement pods of failed group members, equivalence checks of an existing
//! Workload, and queue-name changes.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Value, json};
use tessera_model::kueue::pod::{
    self as labels, FAST_ADMISSION, FINALIZER, GROUP_TOTAL_COUNT, IS_GROUP_WORKLOAD, MANAGED_LABEL,
    MANAGED_VALUE, PREBUILT_WORKLOAD, RETRIABLE_IN_GROUP, ROLE_HASH, SERVING,
};
use tessera_model::{conditions, json as json_read};

use crate::api::framework::{Priorities, flavored_pod_spec, key_of};
use crate::api::job;
use crate::api::status::{self, Event};
use crate::flavor::ResourceFlavorSpec;

/// Kueue's limit on PodSets in a Workload (`MaxPodSets`).
const MAX_POD_SETS: usize = 8;

/// One write the integration asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum PodWrite {
    /// Create this Workload.
    CreateWorkload(Value),
    /// Merge-patch the named pod.
    PatchPod(String, Value),
    /// Stop the named pod: merge-patch its status with these conditions, then delete it.
    StopPod(String, Value),
    /// Merge-patch the Workload's status.
    WorkloadStatus(Value),
    /// Replace the Workload's owner references with these.
    WorkloadOwners(Value),
    /// Record an event about a pod.
    Event(Event),
}

/// Whether Kueue manages the pod (`Skip`'s check of the managed label).
pub fn managed(pod: &Value) -> bool {
    labels::label(pod, MANAGED_LABEL) == Some(MANAGED_VALUE)
}

/// The managed pods grouped into the units Kueue reconciles: `(namespace, group name)` for a
/// group, `(namespace, "")`-less singles keyed by UID. Answers `(key, is group, pods)`.
pub fn units(pods: &[Value]) -> Vec<(String, bool, Vec<&Value>)> {
    let mut groups: BTreeMap<String, (bool, Vec<&Value>)> = BTreeMap::new();
    for pod in pods.iter().filter(|p| managed(p)) {
        match labels::group_name(pod) {
            Some(group) => {
                let key = format!("{}/{group}", json_read::text(pod, "/metadata/namespace"));
                groups.entry(key).or_insert((true, Vec::new())).1.push(pod);
            }
            None => {
                let key = json_read::text(pod, "/metadata/uid").to_owned();
                groups.insert(key, (false, vec![pod]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(key, (group, pods))| (key, group, pods))
        .collect()
}

/// `GetWorkloadNameForPod`: `pod-<name>-<hash>`.
pub fn workload_name(pod_name: &str, pod_uid: &str) -> String {
    tessera_model::kueue::workload_name("Pod", "", pod_name, pod_uid)
}

fn name(pod: &Value) -> &str {
    json_read::text(pod, "/metadata/name")
}

fn phase(pod: &Value) -> &str {
    json_read::text(pod, "/status/phase")
}

fn terminated(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

fn deleting(pod: &Value) -> bool {
    pod.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// `podSuspended`: terminated or gated.
fn suspended(pod: &Value) -> bool {
    terminated(pod) || labels::gated(pod)
}

/// `isPodRunnableOrSucceeded`.
fn runnable_or_succeeded(pod: &Value) -> bool {
    let unbound_deleting = deleting(pod) && json_read::text(pod, "/spec/nodeName").is_empty();
    !unbound_deleting && phase(pod) != "Failed"
}

/// A pod's role in its group: its role-hash annotation, else the hash of its spec.
fn role(pod: &Value) -> String {
    labels::annotation(pod, ROLE_HASH)
        .map(str::to_owned)
        .unwrap_or_else(|| labels::role_hash(pod.get("spec").unwrap_or(&Value::Null)))
}

fn queue_name(pod: &Value) -> &str {
    labels::label(pod, job::QUEUE_NAME).unwrap_or_default()
}

fn pod_event(pod: &Value, kind: &'static str, reason: &str, message: &str) -> PodWrite {
    PodWrite::Event(Event::about(pod, ("v1", "Pod"), (kind, reason), message))
}

/// A group's total count as the first pod gives it (`groupTotalCount`).
fn total_count(pod: &Value) -> Result<usize, String> {
    let value = labels::annotation(pod, GROUP_TOTAL_COUNT)
        .ok_or_else(|| format!("failed to extract '{GROUP_TOTAL_COUNT}' annotation"))?;
    let count: i64 = value
        .parse()
        .map_err(|_| format!("strconv.Atoi: parsing {value:?}: invalid syntax"))?;
    usize::try_from(count).ok().filter(|c| *c >= 1).ok_or_else(|| {
        format!(
            "incorrect annotation value '{GROUP_TOTAL_COUNT}={value}': group total count should be greater than zero"
        )
    })
}

/// `validatePodGroupMetadata`: the group's pods agree on their queue and total count, and
/// (without fast admission) all of them exist.
fn check_group(pods: &[&Value]) -> Result<usize, String> {
    let first = pods[0];
    let total = total_count(first)?;
    let fast = labels::annotation(first, FAST_ADMISSION) == Some("true");
    let runnable = pods.iter().filter(|p| runnable_or_succeeded(p)).count();
    if !fast && runnable < total {
        let group = labels::group_name(first).unwrap_or_default();
        return Err(format!(
            "'{group}' group has fewer runnable pods than expected"
        ));
    }
    for pod in pods.iter().filter(|p| phase(p) != "Failed") {
        if queue_name(pod) != queue_name(first) {
            return Err(format!(
                "pods '{}' and '{}' has different queue names: {}!={}",
                name(first),
                name(pod),
                queue_name(first),
                queue_name(pod)
            ));
        }
        let value = labels::annotation(pod, GROUP_TOTAL_COUNT).unwrap_or_default();
        let count: usize = value.parse().map_err(|_| {
            format!(
                "failed to extract '{GROUP_TOTAL_COUNT}' annotation from the pod '{}': strconv.Atoi: parsing {value:?}: invalid syntax",
                name(pod)
            )
        })?;
        if count != total {
            return Err(format!(
                "pods '{}' and '{}' has different '{GROUP_TOTAL_COUNT}' values: {total}!={count}",
                name(first),
                name(pod)
            ));
        }
    }
    Ok(total)
}

/// A PodSet of `count` pods like `pod`, with the topology request its annotations make
/// (`NewPodSetTopologyRequest(&pod.ObjectMeta)`).
fn pod_set(name: &str, pod: &Value, count: usize) -> Value {
    let mut pod_set = json!({"name": name, "count": count,
        "template": {"spec": pod.get("spec").cloned().unwrap_or_else(|| json!({}))}});
    if let Some(request) = crate::api::framework::topology_request(pod, None, None) {
        pod_set["topologyRequest"] = request;
    }
    pod_set
}

/// `constructGroupPodSets` (one PodSet per role, counting runnable pods, sorted by name) or,
/// under fast admission, one PodSet of the first runnable pod's role with the total count.
fn group_pod_sets(pods: &[&Value], total: usize) -> Result<Vec<Value>, String> {
    let runnable: Vec<&Value> = pods
        .iter()
        .copied()
        .filter(|p| runnable_or_succeeded(p))
        .collect();
    if labels::annotation(pods[0], FAST_ADMISSION) == Some("true") {
        let first = runnable
            .first()
            .ok_or("failed to find a runnable pod in the group")?;
        return Ok(vec![pod_set(&role(first), first, total)]);
    }
    let mut roles: BTreeMap<String, (&Value, usize)> = BTreeMap::new();
    for pod in runnable {
        roles.entry(role(pod)).or_insert((pod, 0)).1 += 1;
    }
    if roles.len() > MAX_POD_SETS {
        return Err(format!(
            "pod group can't include more than {MAX_POD_SETS} roles"
        ));
    }
    Ok(roles
        .iter()
        .map(|(name, (pod, count))| pod_set(name, pod, *count))
        .collect())
}

fn workload_object(
    name: &str,
    first: &Value,
    pod_sets: Vec<Value>,
    priorities: &Priorities,
) -> Value {
    let (reference, priority) = priorities.of_pod(first, "/spec");
    let mut spec =
        json!({"queueName": queue_name(first), "podSets": pod_sets, "priority": priority});
    if let Some(reference) = reference {
        spec["priorityClassRef"] = reference;
    }
    json!({
        "apiVersion": status::WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": json_read::text(first, "/metadata/namespace")},
        "spec": spec,
    })
}

fn owner(pod: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "name": name(pod),
        "uid": json_read::text(pod, "/metadata/uid")})
}

/// The Workload Kueue constructs for a pod or a pod group, or the group's error.
pub fn workload_for(
    pods: &[&Value],
    group: bool,
    priorities: &Priorities,
) -> Result<Value, String> {
    let first = pods.first().ok_or("no pods")?;
    if !group {
        let uid = json_read::text(first, "/metadata/uid");
        let mut workload = workload_object(
            &workload_name(name(first), uid),
            first,
            vec![pod_set("main", first, 1)],
            priorities,
        );
        let mut reference = owner(first);
        reference["controller"] = json!(true);
        reference["blockOwnerDeletion"] = json!(true);
        workload["metadata"]["labels"] = json!({job::JOB_UID: uid});
        workload["metadata"]["ownerReferences"] = json!([reference]);
        return Ok(workload);
    }
    let total = check_group(pods)?;
    let pod_sets = group_pod_sets(pods, total)?;
    let group_name = labels::group_name(first).unwrap_or_default();
    let mut workload = workload_object(group_name, first, pod_sets, priorities);
    workload["metadata"]["annotations"] = json!({IS_GROUP_WORKLOAD: "true"});
    workload["metadata"]["ownerReferences"] = Value::Array(pods.iter().map(|p| owner(p)).collect());
    Ok(workload)
}

/// `Finished`: a pod once terminated; a group once every pod succeeded, or (unretriable)
/// once none is active; a serving group never. With success and the message.
fn finished(pods: &[&Value], group: bool) -> Option<(bool, String)> {
    let first = pods.first()?;
    if !group {
        return terminated(first).then(|| {
            (
                phase(first) == "Succeeded",
                json_read::text(first, "/status/message").to_owned(),
            )
        });
    }
    if labels::annotation(first, SERVING) == Some("true") {
        return None;
    }
    let total = total_count(first).ok()?;
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    let active = pods.iter().any(|p| !terminated(p));
    let unretriable = pods
        .iter()
        .any(|p| labels::annotation(p, RETRIABLE_IN_GROUP) == Some("false"));
    (succeeded == total || (!active && unretriable))
        .then(|| (true, format!("Pods succeeded: {succeeded}/{total}.")))
}

/// `EnsureWorkloadOwnedByAllMembers`: the prebuilt Workload's owner references with every
/// member of the group added (`SetOwnerReference`), and Kueue's event, when some were missing.
fn owned_by_members(pods: &[&Value], workload: &Value) -> Vec<PodWrite> {
    let mut references: Vec<Value> = workload
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let before = references.len();
    for pod in pods {
        let present = references
            .iter()
            .any(|r| r["apiVersion"] == "v1" && r["kind"] == "Pod" && r["name"] == name(pod));
        if !present {
            references.push(owner(pod));
        }
    }
    let added = references.len() - before;
    if added == 0 {
        return Vec::new();
    }
    vec![
        PodWrite::WorkloadOwners(Value::Array(references)),
        PodWrite::Event(Event::workload(
            workload,
            "Normal",
            "OwnerReferencesAdded",
            &format!("Added {added} owner reference(s)"),
        )),
    ]
}

/// The finalizer patches: deleted pods, and all once the Workload finished.
fn release_finalizers(pods: &[&Value], workload_finished: bool) -> Vec<PodWrite> {
    pods.iter()
        .filter(|p| deleting(p) || (workload_finished && terminated(p)))
        .filter_map(|p| {
            let finalizers = p.pointer("/metadata/finalizers")?.as_array()?;
            if !finalizers.iter().any(|f| f == FINALIZER) {
                return None;
            }
            let kept: Vec<&Value> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
            Some(PodWrite::PatchPod(
                name(p).to_owned(),
                json!({"metadata": {"finalizers": kept}}),
            ))
        })
        .collect()
}

/// `Stop`: each running pod (not gated, not terminated, not deleting) gets a
/// `TerminationTarget` condition and is deleted, with a `Stopped` event.
fn stop(pods: &[&Value], reason: &str, message: &str, now: SystemTime) -> Vec<PodWrite> {
    let at = tessera_model::time::timestamp(now);
    let mut writes = Vec::new();
    for pod in pods.iter().filter(|p| !suspended(p) && !deleting(p)) {
        let mut list: Vec<Value> = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        list.retain(|c| c["type"] != "TerminationTarget");
        list.push(
            json!({"type": "TerminationTarget", "status": "True", "reason": reason,
            "message": message, "lastTransitionTime": at}),
        );
        writes.push(PodWrite::StopPod(
            name(pod).to_owned(),
            json!({"conditions": list}),
        ));
        writes.push(pod_event(pod, "Normal", "Stopped", message));
    }
    writes
}

/// The patch ungating a pod with its PodSet's admission (`prepare`): the flavors, the
/// `kueue.x-k8s.io/podset` label and `kueue.x-k8s.io/workload` annotation the topology
/// ungater finds it by, the admission gate lifted, and the topology gate too unless the
/// PodSet was given a topology assignment (the ungater lifts it then, into its domain).
fn ungate_patch(
    pod: &Value,
    workload: &Value,
    assignment: &Value,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Value {
    use crate::api::tas::{POD_SET_LABEL, TOPOLOGY_SCHEDULING_GATE, WORKLOAD_ANNOTATION};
    let mut spec = flavored_pod_spec(pod.get("spec"), assignment, flavors);
    let by_topology = assignment
        .get("topologyAssignment")
        .is_some_and(|t| !t.is_null());
    let gates: Vec<Value> = pod
        .pointer("/spec/schedulingGates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|g| {
            g["name"] != labels::ADMISSION_GATE
                && (by_topology || g["name"] != TOPOLOGY_SCHEDULING_GATE)
        })
        .cloned()
        .collect();
    spec["schedulingGates"] = if gates.is_empty() {
        Value::Null
    } else {
        Value::Array(gates)
    };
    let pod_set = assignment
        .get("name")
        .cloned()
        .unwrap_or_else(|| json!("main"));
    json!({
        "metadata": {
            "labels": {POD_SET_LABEL: pod_set},
            "annotations": {WORKLOAD_ANNOTATION: name(workload)},
        },
        "spec": spec,
    })
}

/// `Run`: each gated pod is ungated with the assignment of its PodSet (`main` for a pod, its
/// role for a group member), with a `Started` event.
fn run(
    pods: &[&Value],
    group: bool,
    workload: &Value,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Vec<PodWrite> {
    let assignments: Vec<Value> = workload
        .pointer("/status/admission/podSetAssignments")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let cluster_queue = json_read::text(workload, "/status/admission/clusterQueue");
    let message = format!("Admitted by clusterQueue {cluster_queue}");
    let mut writes = Vec::new();
    for pod in pods.iter().filter(|p| labels::gated(p) && !deleting(p)) {
        let wanted = if group { role(pod) } else { "main".to_owned() };
        let Some(assignment) = assignments
            .iter()
            .find(|a| a["name"] == wanted.as_str())
            .or_else(|| (!group).then(|| assignments.first()).flatten())
        else {
            continue;
        };
        writes.push(PodWrite::PatchPod(
            name(pod).to_owned(),
            ungate_patch(pod, workload, assignment, flavors),
        ));
        writes.push(pod_event(pod, "Normal", "Started", &message));
    }
    writes
}

/// What to write for one unit of managed pods (a pod, or the pods of a group), given its
/// Workload (if any), the ResourceFlavors by name, the priority classes and the time.
pub fn reconcile(
    pods: &[&Value],
    group: bool,
    workload: Option<&Value>,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
    priorities: &Priorities,
    now: SystemTime,
) -> Vec<PodWrite> {
    let Some(first) = pods.first() else {
        return Vec::new();
    };
    let workload_finished = workload.is_some_and(|w| conditions::is_true(w, status::FINISHED));
    let mut writes = release_finalizers(
        pods,
        workload_finished || (workload.is_none() && pods.iter().all(|p| terminated(p))),
    );
    let prebuilt = group && labels::label(first, PREBUILT_WORKLOAD).is_some();
    if prebuilt && let Some(workload) = workload {
        writes.extend(owned_by_members(pods, workload));
    }
    if workload_finished {
        return writes;
    }
    if let Some((succeeded, message)) = finished(pods, group) {
        if let Some(workload) = workload
            && let Some(status) = status::finished(workload, succeeded, &message, now)
        {
            let declared = format!("Workload '{}' is declared finished", key_of(workload));
            writes.push(PodWrite::WorkloadStatus(status));
            writes.push(pod_event(first, "Normal", "FinishedWorkload", &declared));
        }
        return writes;
    }
    let live: Vec<&Value> = pods.iter().copied().filter(|p| !deleting(p)).collect();
    // `IsSuspended`: a pod gated or terminated (for a group, any of its pods).
    let unit_suspended = pods.iter().any(|p| suspended(p));
    let Some(workload) = workload else {
        if live.is_empty() {
            return writes;
        }
        if !unit_suspended {
            writes.extend(stop(pods, "NoMatchingWorkload", "missing workload", now));
        }
        if prebuilt {
            // `ErrPrebuiltWorkloadNotFound`: the parent's reconciler makes it.
            return writes;
        }
        if let Some(class) = priorities.missing_workload_class(first) {
            let event = Priorities::missing_class_event(first, ("v1", "Pod"), class);
            writes.push(PodWrite::Event(event));
            return writes;
        }
        match workload_for(&live, group, priorities) {
            Ok(created) => {
                let message = format!("Created Workload: {}", key_of(&created));
                writes.push(PodWrite::CreateWorkload(created));
                writes.push(pod_event(first, "Normal", "CreatedWorkload", &message));
            }
            Err(message) => {
                writes.push(pod_event(first, "Warning", "ErrWorkloadCompose", &message));
            }
        }
        return writes;
    };
    let reserved = conditions::is_true(workload, status::QUOTA_RESERVED);
    if let Some(evicted) =
        conditions::find(workload, status::EVICTED).filter(|c| c["status"] == "True")
    {
        let message = evicted["message"].as_str().unwrap_or_default();
        writes.extend(stop(pods, "WorkloadEvicted", message, now));
        // `IsActive`: a pod never is; a group while one of its pods runs.
        let active = group && pods.iter().any(|p| phase(p) == "Running" && !deleting(p));
        if reserved
            && !active
            && let Some(status) = status::released(workload, now)
        {
            writes.push(PodWrite::WorkloadStatus(status));
        }
        return writes;
    }
    let admitted = conditions::is_true(workload, status::ADMITTED) && reserved;
    if admitted {
        writes.extend(run(pods, group, workload, flavors));
    } else if !unit_suspended {
        writes.extend(stop(
            pods,
            "NotAdmitted",
            "Not admitted by cluster queue",
            now,
        ));
    }
    writes
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
