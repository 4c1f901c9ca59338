//! `kueue.x-k8s.io` `v1beta1` ↔ `v1beta2` (stored), ported from Kueue's conversion functions
//! (`apis/kueue/v1beta1/*_conversion.go` and the generated `zz_generated.conversion.go`):
//!
//! - ClusterQueue: `cohort` ↔ `cohortName`; v1beta1 `admissionChecks` become
//!   `admissionChecksStrategy.admissionChecks`; the deprecated flavor fungibility values
//!   `Borrow` and `Preempt` become `MayStopSearch`; `concurrentAdmissionPolicy` has no
//!   v1beta1 form and v1beta1's `status.pendingWorkloadsStatus` no v1beta2 one;
//! - LocalQueue: `status.flavorUsage` ↔ `status.flavorsUsage` (v1beta1's `status.flavors`
//!   is dropped);
//! - Workload: `priorityClassSource` + `priorityClassName` ↔ `priorityClassRef`;
//!   `accumulatedPastExexcutionTimeSeconds` ↔ `accumulatedPastExecutionTimeSeconds`;
//!   topology assignments' `domains` ↔ compressed `slices` (one maximally compacted slice, as
//!   `tas.V1Beta2From` encodes without the hostname-prefix feature gate); preemption gates and
//!   slice topology constraints have no v1beta1 form;
//! - Cohort and ClusterQueue statuses drop v1beta1's `admissionFairSharingStatus`;
//!   AdmissionCheck drops v1beta1's `retryDelayMinutes`;
//! - MultiKueueCluster: v1beta1's `spec.kubeConfig`/`clusterProfileRef` ↔
//!   `spec.clusterSource`; MultiKueueConfig's `quotaManagement` has no v1beta1 form.
//!
//! Kueue's conversion webhook does this for a real cluster; Tessera does it natively for any
//! CRD of the group, whatever its `conversion` stanza says. Pure JSON edits; `apiVersion`
//! is set by the caller.

use serde_json::{Map, Value, json};
use tessera_model::kueue::topology_assignment::{self, TopologyDomain};
use tessera_model::kueue::workload::{
    POD_PRIORITY_CLASS, TopologyAssignmentSlice, WORKLOAD_PRIORITY_CLASS,
};

/// `(source, group, kind)`: v1beta1's `priorityClassSource` values and the v1beta2
/// references they stand for.
const PRIORITY_SOURCES: [(&str, &str, &str); 2] = [
    (
        "kueue.x-k8s.io/workloadpriorityclass",
        WORKLOAD_PRIORITY_CLASS.0,
        WORKLOAD_PRIORITY_CLASS.1,
    ),
    (
        "scheduling.k8s.io/priorityclass",
        POD_PRIORITY_CLASS.0,
        POD_PRIORITY_CLASS.1,
    ),
];

/// A v1beta1 object of `kind` in its v1beta2 form.
pub fn v1beta1_to_v1beta2(kind: &str, mut object: Value) -> Value {
    match kind {
        "ClusterQueue" => {
            if let Some(spec) = field(&mut object, "spec") {
                rename(spec, "cohort", "cohortName");
                if let Some(Value::Array(checks)) = spec.remove("admissionChecks")
                    && !checks.is_empty()
                {
                    let rules: Vec<Value> =
                        checks.into_iter().map(|n| json!({"name": n})).collect();
                    spec.insert(
                        "admissionChecksStrategy".into(),
                        json!({"admissionChecks": rules}),
                    );
                }
                if let Some(fungibility) = field_of(spec, "flavorFungibility") {
                    for (policy, deprecated) in
                        [("whenCanBorrow", "Borrow"), ("whenCanPreempt", "Preempt")]
                    {
                        if fungibility.get(policy).and_then(Value::as_str) == Some(deprecated) {
                            fungibility.insert(policy.into(), json!("MayStopSearch"));
                        }
                    }
                }
            }
            if let Some(status) = field(&mut object, "status") {
                status.remove("pendingWorkloadsStatus");
            }
            drop_afs_status(&mut object);
        }
        "Cohort" => drop_afs_status(&mut object),
        "LocalQueue" => {
            if let Some(status) = field(&mut object, "status") {
                rename(status, "flavorUsage", "flavorsUsage");
                status.remove("flavors");
            }
        }
        "Workload" => {
            if let Some(spec) = field(&mut object, "spec") {
                let source = spec.remove("priorityClassSource");
                let name = spec.remove("priorityClassName");
                let known = PRIORITY_SOURCES
                    .iter()
                    .find(|(s, _, _)| source.as_ref().and_then(Value::as_str) == Some(*s));
                if let Some((_, group, kind)) = known {
                    spec.insert(
                        "priorityClassRef".into(),
                        json!({"group": group, "kind": kind,
                               "name": name.unwrap_or(json!(""))}),
                    );
                }
            }
            if let Some(status) = field(&mut object, "status") {
                rename(
                    status,
                    "accumulatedPastExexcutionTimeSeconds",
                    "accumulatedPastExecutionTimeSeconds",
                );
            }
            for assignment in topology_assignments(&mut object) {
                if let Some(Value::Array(domains)) = assignment.remove("domains") {
                    let levels = assignment
                        .get("levels")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    assignment.insert("slices".into(), slices_from_domains(levels, &domains));
                }
            }
        }
        "AdmissionCheck" => {
            if let Some(spec) = field(&mut object, "spec") {
                spec.remove("retryDelayMinutes");
            }
        }
        "MultiKueueCluster" => {
            if let Some(spec) = field(&mut object, "spec") {
                let source: Map<String, Value> = CLUSTER_SOURCE_FIELDS
                    .iter()
                    .filter_map(|name| spec.remove(*name).map(|v| ((*name).to_owned(), v)))
                    .collect();
                if !source.is_empty() {
                    spec.insert("clusterSource".into(), Value::Object(source));
                }
            }
        }
        _ => {}
    }
    object
}

/// A v1beta2 object of `kind` in its v1beta1 form.
pub fn v1beta2_to_v1beta1(kind: &str, mut object: Value) -> Value {
    match kind {
        "ClusterQueue" => {
            if let Some(spec) = field(&mut object, "spec") {
                rename(spec, "cohortName", "cohort");
                spec.remove("concurrentAdmissionPolicy");
            }
        }
        "LocalQueue" => {
            if let Some(status) = field(&mut object, "status") {
                rename(status, "flavorsUsage", "flavorUsage");
            }
        }
        "Workload" => {
            if let Some(spec) = field(&mut object, "spec") {
                spec.remove("preemptionGates");
                if let Some(reference) = spec.remove("priorityClassRef") {
                    let text = |key: &str| reference.get(key).and_then(Value::as_str);
                    let known = PRIORITY_SOURCES
                        .iter()
                        .find(|(_, g, k)| text("group") == Some(*g) && text("kind") == Some(*k));
                    if let Some((source, _, _)) = known {
                        spec.insert("priorityClassSource".into(), json!(source));
                        spec.insert(
                            "priorityClassName".into(),
                            json!(text("name").unwrap_or_default()),
                        );
                    }
                }
                if let Some(Value::Array(pod_sets)) = spec.get_mut("podSets") {
                    for pod_set in pod_sets {
                        if let Some(request) = pod_set
                            .get_mut("topologyRequest")
                            .and_then(Value::as_object_mut)
                        {
                            request.remove("podsetSliceRequiredTopologyConstraints");
                        }
                    }
                }
            }
            if let Some(status) = field(&mut object, "status") {
                status.remove("preemptionGates");
                rename(
                    status,
                    "accumulatedPastExecutionTimeSeconds",
                    "accumulatedPastExexcutionTimeSeconds",
                );
            }
            for assignment in topology_assignments(&mut object) {
                if let Some(Value::Array(slices)) = assignment.remove("slices") {
                    let levels = assignment
                        .get("levels")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    assignment.insert("domains".into(), domains_from_slices(levels, &slices));
                }
            }
        }
        "MultiKueueConfig" => {
            if let Some(spec) = field(&mut object, "spec") {
                spec.remove("quotaManagement");
            }
        }
        "MultiKueueCluster" => {
            if let Some(spec) = field(&mut object, "spec")
                && let Some(Value::Object(source)) = spec.remove("clusterSource")
            {
                spec.extend(source);
            }
        }
        _ => {}
    }
    object
}

/// The fields of a v1beta2 MultiKueueCluster's `spec.clusterSource`, on v1beta1's `spec`.
const CLUSTER_SOURCE_FIELDS: [&str; 2] = ["kubeConfig", "clusterProfileRef"];

fn field<'v>(object: &'v mut Value, name: &str) -> Option<&'v mut Map<String, Value>> {
    object.get_mut(name).and_then(Value::as_object_mut)
}

fn field_of<'m>(map: &'m mut Map<String, Value>, name: &str) -> Option<&'m mut Map<String, Value>> {
    map.get_mut(name).and_then(Value::as_object_mut)
}

fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = map.remove(from) {
        map.insert(to.into(), value);
    }
}

fn drop_afs_status(object: &mut Value) {
    if let Some(fair_sharing) = object
        .pointer_mut("/status/fairSharing")
        .and_then(Value::as_object_mut)
    {
        fair_sharing.remove("admissionFairSharingStatus");
    }
}

/// Every `topologyAssignment` of a Workload's admission.
fn topology_assignments(object: &mut Value) -> Vec<&mut Map<String, Value>> {
    object
        .pointer_mut("/status/admission/podSetAssignments")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|assignment| {
            assignment
                .get_mut("topologyAssignment")
                .and_then(Value::as_object_mut)
        })
        .collect()
}

/// v1beta1 domains (`{values, count}`) as v1beta2 slices (`tas.V1Beta2From`); a domain that
/// does not parse is left out.
fn slices_from_domains(levels: usize, domains: &[Value]) -> Value {
    let domains: Vec<TopologyDomain> = domains
        .iter()
        .filter_map(|d| serde_json::from_value(d.clone()).ok())
        .collect();
    json!(topology_assignment::slices_from_domains(levels, &domains))
}

/// v1beta2 slices expanded to v1beta1 domains (`InternalSeqFrom`); a slice that does not
/// parse is left out.
fn domains_from_slices(levels: usize, slices: &[Value]) -> Value {
    let slices: Vec<TopologyAssignmentSlice> = slices
        .iter()
        .filter_map(|s| serde_json::from_value(s.clone()).ok())
        .collect();
    json!(topology_assignment::domains_from_slices(levels, &slices))
}

#[cfg(test)]
mod tests;
