//! The ProvisioningRequests and PodTemplates Kueue creates for a Workload's check
//! (`provisioning.go` and the object-building parts of `controller.go`): their names
//! (`<workload>-<check>-<attempt>`, `ppt-<request>-<podset>`, hashed past 252 characters), the
//! attempt a request's name carries, which PodSets need capacity (`managedResources`), how
//! PodSets merge (`podSetMergePolicy`), the objects themselves, whether a request still matches
//! its config, and the `podSetUpdates` a provisioned request gives the check. Knows nothing
//! about check states.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use tessera_model::json as json_read;
use tessera_model::provisioning::{
    CONSUME_REQUEST_ANNOTATION, GROUP, PROVISIONING_CLASS_ANNOTATION, VERSION,
};

use super::{Config, MANAGED_BY_KUEUE_LABEL, PARAMETER_ANNOTATION_PREFIX};
use crate::api::framework::flavored_pod_spec;
use crate::api::status::WORKLOAD_API_VERSION;
use crate::flavor::ResourceFlavorSpec;

pub use crate::api::admission_checks::KUEUE_GROUP;
/// The API version of ProvisioningRequests.
pub const REQUEST_API_VERSION: &str = "autoscaling.x-k8s.io/v1";
/// The kind.
pub const REQUEST_KIND: &str = "ProvisioningRequest";
/// The length of the hash suffix of shortened names (`objNameHashLength`).
const HASH_LENGTH: usize = 5;
/// The longest name kept whole (`objNameMaxPrefixLength`).
const MAX_PREFIX_LENGTH: usize = 252 - HASH_LENGTH;

/// `limitObjectName`: a name longer than 247 characters cut there, with `-` and five hex
/// characters of its SHA-1.
fn limit_object_name(full: String) -> String {
    if full.len() <= MAX_PREFIX_LENGTH {
        return full;
    }
    let hash = sha1_smol::Sha1::from(full.as_bytes()).digest().to_string();
    let mut cut = MAX_PREFIX_LENGTH;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}", &full[..cut], &hash[..HASH_LENGTH])
}

/// `ProvisioningRequestName`.
pub fn request_name(workload: &str, check: &str, attempt: i64) -> String {
    limit_object_name(format!("{workload}-{check}-{attempt}"))
}

/// `getProvisioningRequestPodTemplateName`.
pub fn pod_template_name(request: &str, pod_set: &str) -> String {
    limit_object_name(format!("ppt-{request}-{pod_set}"))
}

/// The attempt a request's name carries for this Workload and check (`getAttempt` with
/// `matchesWorkloadAndCheck`): `None` when the name is not `<prefix><digits>`.
pub fn attempt(request: &str, workload: &str, check: &str) -> Option<i64> {
    let prefix = limit_object_name(format!("{workload}-{check}-"));
    let digits = request.strip_prefix(&prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits.parse().unwrap_or(1))
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The list at `pointer` (empty when there is none).
pub(super) fn list_at<'v>(value: &'v Value, pointer: &str) -> &'v [Value] {
    list(value.pointer(pointer))
}

/// `podUses`: whether any (init) container requests or limits one of `resources`.
fn pod_uses(pod_spec: Option<&Value>, resources: &BTreeSet<String>) -> bool {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|field| list(pod_spec.and_then(|s| s.get(*field))))
        .flat_map(|container| {
            ["requests", "limits"].into_iter().filter_map(move |kind| {
                container
                    .pointer(&format!("/resources/{kind}"))
                    .and_then(Value::as_object)
            })
        })
        .any(|amounts| amounts.keys().any(|r| resources.contains(r)))
}

/// A Workload's PodSets.
fn pod_sets(workload: &Value) -> &[Value] {
    list(workload.pointer("/spec/podSets"))
}

fn assignments(workload: &Value) -> BTreeMap<&str, &Value> {
    list(workload.pointer("/status/admission/podSetAssignments"))
        .iter()
        .map(|a| (json_read::text(a, "/name"), a))
        .collect()
}

/// Whether a PodSet needs capacity from a config: count above zero and, with
/// `managedResources`, using one of them.
fn needs_capacity(pod_set: &Value, managed: &BTreeSet<String>) -> bool {
    json_read::int_or_zero(pod_set, "/count") > 0
        && (managed.is_empty() || pod_uses(pod_set.pointer("/template/spec"), managed))
}

/// A PodSet assignment's count, or the PodSet's.
fn assigned_count(pod_set: &Value, assignment: &Value) -> i64 {
    json_read::int(assignment, "/count")
        .unwrap_or_else(|| json_read::int_or_zero(pod_set, "/count"))
}

/// Kueue's `errInconsistentPodSetAssignments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InconsistentAssignments;

/// `reqIsNeeded`: whether some PodSet needing capacity is admitted with a count above zero.
pub fn is_needed(workload: &Value, config: &Config<'_>) -> Result<bool, InconsistentAssignments> {
    let assignments = assignments(workload);
    let managed = config.managed_resources();
    for pod_set in pod_sets(workload) {
        if !needs_capacity(pod_set, &managed) {
            continue;
        }
        let assignment = assignments
            .get(json_read::text(pod_set, "/name"))
            .ok_or(InconsistentAssignments)?;
        if assigned_count(pod_set, assignment) > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One request PodSet: the Workload PodSet (and its assignment) whose template it uses,
/// with the count of every PodSet merged into it (`MergedPodSet`).
#[derive(Debug, Clone, PartialEq)]
pub struct MergedPodSet<'w> {
    /// The first PodSet's name.
    pub name: &'w str,
    /// The first PodSet.
    pub pod_set: &'w Value,
    /// Its assignment.
    pub assignment: &'w Value,
    /// The summed count.
    pub count: i64,
}

/// `mergePodSets`: the PodSets needing capacity with admitted counts above zero, each merged
/// into an earlier one the config's `podSetMergePolicy` finds alike.
pub fn merge_pod_sets<'w>(
    workload: &'w Value,
    config: &Config<'_>,
) -> Result<Vec<MergedPodSet<'w>>, InconsistentAssignments> {
    let assignments = assignments(workload);
    let managed = config.managed_resources();
    let mut merged: Vec<MergedPodSet<'w>> = Vec::new();
    for pod_set in pod_sets(workload)
        .iter()
        .filter(|p| needs_capacity(p, &managed))
    {
        let name = json_read::text(pod_set, "/name");
        let assignment = *assignments.get(name).ok_or(InconsistentAssignments)?;
        let count = assigned_count(pod_set, assignment);
        if count <= 0 {
            continue;
        }
        let policy = config.merge_policy();
        if let Some(into) = merged
            .iter_mut()
            .find(|m| policy.is_some_and(|p| can_merge(m.pod_set, pod_set, p)))
        {
            into.count += count;
            continue;
        }
        merged.push(MergedPodSet {
            name,
            pod_set,
            assignment,
            count,
        });
    }
    Ok(merged)
}

/// `canMergePodSets`.
fn can_merge(a: &Value, b: &Value, policy: &str) -> bool {
    let template = |p: &'_ Value| p.get("template").cloned().unwrap_or(Value::Null);
    match policy {
        "IdenticalPodTemplates" => template(a) == template(b),
        "IdenticalWorkloadSchedulingRequirements" => {
            let spec =
                |p: &Value, field: &str| p.pointer(&format!("/template/spec/{field}")).cloned();
            let requests = |p: &Value, field: &str| -> Vec<Option<Value>> {
                list(p.pointer(&format!("/template/spec/{field}")))
                    .iter()
                    .map(|c| c.pointer("/resources/requests").cloned())
                    .collect()
            };
            ["containers", "initContainers"]
                .iter()
                .all(|f| requests(a, f) == requests(b, f))
                && [
                    "resources",
                    "nodeSelector",
                    "tolerations",
                    "affinity",
                    "resourceClaims",
                ]
                .iter()
                .all(|f| spec(a, f) == spec(b, f))
        }
        _ => false,
    }
}

/// The controller owner reference to an object.
pub fn controller_reference(api_version: &str, kind: &str, object: &Value) -> Value {
    json!({"apiVersion": api_version, "kind": kind,
        "name": json_read::text(object, "/metadata/name"),
        "uid": json_read::text(object, "/metadata/uid"),
        "controller": true, "blockOwnerDeletion": true})
}

/// The PodTemplate for one request PodSet (`createPodTemplate`): the PodSet's template with
/// its assigned flavors' node labels and tolerations merged in and limits standing in for
/// missing requests, labelled as Kueue's, controlled by the Workload.
pub fn pod_template(
    workload: &Value,
    name: &str,
    merged: &MergedPodSet<'_>,
    flavors: &BTreeMap<String, ResourceFlavorSpec>,
) -> Value {
    let mut template = merged
        .pod_set
        .get("template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let flavored = flavored_pod_spec(template.pointer("/spec"), merged.assignment, flavors);
    if let (Some(spec), Some(fields)) = (template.get_mut("spec"), flavored.as_object()) {
        for (field, value) in fields {
            if value.as_object().is_some_and(Map::is_empty) {
                continue;
            }
            spec[field.as_str()] = value.clone();
        }
        use_limits_as_missing_requests(spec);
    }
    json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": json_read::text(workload, "/metadata/namespace"),
            "labels": {MANAGED_BY_KUEUE_LABEL: "true"},
            "ownerReferences": [controller_reference(WORKLOAD_API_VERSION, "Workload", workload)]},
        "template": template,
    })
}

/// `UseLimitsAsMissingRequestsInPod`: each container's limits fill in its missing requests.
fn use_limits_as_missing_requests(pod_spec: &mut Value) {
    for field in ["initContainers", "containers"] {
        let Some(containers) = pod_spec.get_mut(field).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers {
            let Some(limits) = container
                .pointer("/resources/limits")
                .and_then(Value::as_object)
                .cloned()
            else {
                continue;
            };
            let requests = &mut container["resources"]["requests"];
            if !requests.is_object() {
                *requests = json!({});
            }
            for (resource, amount) in limits {
                if requests.get(&resource).is_none() {
                    requests[resource] = amount;
                }
            }
        }
    }
}

/// The ProvisioningRequest for a check's attempt: the config's class and parameters, the
/// Workload's `provreq.kueue.x-k8s.io/` annotations as further parameters, one PodSet per
/// merged PodSet naming its PodTemplate, labelled as Kueue's, controlled by the Workload.
pub fn provisioning_request(
    workload: &Value,
    name: &str,
    config: &Config<'_>,
    merged: &[MergedPodSet<'_>],
) -> Value {
    let mut parameters = config.parameters();
    if let Some(annotations) = workload
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for (key, value) in annotations {
            if let Some(parameter) = key.strip_prefix(PARAMETER_ANNOTATION_PREFIX) {
                parameters.insert(parameter.to_owned(), value.clone());
            }
        }
    }
    let pod_sets: Vec<Value> = merged
        .iter()
        .map(|m| json!({"podTemplateRef": {"name": pod_template_name(name, m.name)}, "count": m.count}))
        .collect();
    let mut spec = json!({"provisioningClassName": config.class(), "podSets": pod_sets});
    if !parameters.is_empty() {
        spec["parameters"] = Value::Object(parameters);
    }
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"), "kind": REQUEST_KIND,
        "metadata": {"name": name, "namespace": json_read::text(workload, "/metadata/namespace"),
            "labels": {MANAGED_BY_KUEUE_LABEL: "true"},
            "ownerReferences": [controller_reference(WORKLOAD_API_VERSION, "Workload", workload)]},
        "spec": spec,
    })
}

/// `provReqSyncedWithConfig`: the request has the config's class and all its parameters.
pub fn synced_with_config(request: &Value, config: &Config<'_>) -> bool {
    json_read::text(request, "/spec/provisioningClassName") == config.class()
        && config
            .parameters()
            .iter()
            .all(|(k, v)| request.pointer(&format!("/spec/parameters/{k}")) == Some(v))
}

/// The check's `podSetUpdates` once a request is provisioned (`podSetUpdates`): per request
/// PodSet, the Workload PodSet it was made for, the annotations naming the request and its
/// class, and with the config's `podSetUpdates` the node selector read from the request's
/// `provisioningClassDetails` (missing details skipped).
pub fn pod_set_updates(workload: &Value, request: &Value, config: &Config<'_>) -> Vec<Value> {
    let request_name = json_read::text(request, "/metadata/name");
    let by_template: BTreeMap<String, &str> = pod_sets(workload)
        .iter()
        .map(|p| json_read::text(p, "/name"))
        .map(|name| (pod_template_name(request_name, name), name))
        .collect();
    let class = json_read::text(request, "/spec/provisioningClassName");
    let selectors = config.node_selector_updates();
    list(request.pointer("/spec/podSets"))
        .iter()
        .map(|ps| {
            let template = json_read::text(ps, "/podTemplateRef/name");
            let name = by_template.get(template).copied().unwrap_or_default();
            let mut update = json!({"name": name, "annotations": {
                CONSUME_REQUEST_ANNOTATION: request_name, PROVISIONING_CLASS_ANNOTATION: class}});
            if let Some(selectors) = &selectors {
                let node_selector: Map<String, Value> = selectors
                    .iter()
                    .filter_map(|(key, detail)| {
                        let value = request
                            .pointer("/status/provisioningClassDetails")?
                            .get(detail)?;
                        Some((key.clone(), value.clone()))
                    })
                    .collect();
                update["nodeSelector"] = Value::Object(node_selector);
            }
            update
        })
        .collect()
}
