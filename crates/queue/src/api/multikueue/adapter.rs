//! The MultiKueue adapters of batch Jobs and JobSets (`pkg/controller/jobs/job/
//! job_multikueue_adapter.go`, `pkg/controller/jobs/jobset/jobset_multikueue_adapter.go`):
//! which owner a manager's Workload has (`wlReconciler.adapter`), whether it is left to
//! MultiKueue (`spec.managedBy`), the copy created on the winning worker (`SyncJob`: metadata
//! for creation, the origin and prebuilt-workload labels, no `managedBy`, a Job without its
//! selector and controller labels) and the status copied back to the manager's owner
//! (`determineStatusUpdate` for Jobs, the whole status for JobSets).
//!
//! Knows nothing about Workloads' conditions or the workers: the reconciler
//! ([`super::workload`]) decides when to sync.

use std::time::SystemTime;

use serde_json::{Map, Value, json};
use tessera_model::{json as json_read, time};

use super::ORIGIN_LABEL;
use crate::api::admission_checks::MULTIKUEUE_CONTROLLER;

/// The label naming the Workload a job uses (`constants.PrebuiltWorkloadLabel`).
pub const PREBUILT_WORKLOAD_LABEL: &str = tessera_model::kueue::pod::PREBUILT_WORKLOAD;
/// The annotations naming a Workload's owner (`JobOwnerGVKAnnotation`, `JobOwnerNameAnnotation`).
const OWNER_GVK_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-gvk";
const OWNER_NAME_ANNOTATION: &str = "kueue.x-k8s.io/job-owner-name";
/// The Job template labels the Job controller adds (`cleanLabels`).
const JOB_CONTROLLER_LABELS: [&str; 4] = [
    "controller-uid",
    "batch.kubernetes.io/controller-uid",
    "job-name",
    "batch.kubernetes.io/job-name",
];

/// The owners MultiKueue has adapters for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    /// `batch/v1` Job.
    Job,
    /// `jobset.x-k8s.io/v1alpha2` JobSet.
    JobSet,
}

impl OwnerKind {
    /// `(apiVersion, kind)`.
    pub fn api_version_kind(self) -> (&'static str, &'static str) {
        match self {
            OwnerKind::Job => ("batch/v1", "Job"),
            OwnerKind::JobSet => ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        }
    }

    /// The adapter for an owner's API version and kind (matched on group and kind).
    fn of(api_version: &str, kind: &str) -> Option<OwnerKind> {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        match (group, kind) {
            ("batch", "Job") => Some(OwnerKind::Job),
            ("jobset.x-k8s.io", "JobSet") => Some(OwnerKind::JobSet),
            _ => None,
        }
    }
}

/// Go's `schema.GroupVersionKind.String()` of an owner: `group/version, Kind=kind`.
fn gvk_text(api_version: &str, kind: &str) -> String {
    match api_version.split_once('/') {
        Some((group, version)) => format!("{group}/{version}, Kind={kind}"),
        None => format!("/{api_version}, Kind={kind}"),
    }
}

/// A Workload's owner (`wlReconciler.adapter`): its adapter and name, or Kueue's rejection
/// message when it has no adapter.
pub fn owner_of(workload: &Value) -> Result<(OwnerKind, String), String> {
    let annotation = |key: &str| {
        json_read::text(
            workload,
            &format!("/metadata/annotations/{}", key.replace('/', "~1")),
        )
    };
    let (gvk, name) = (
        annotation(OWNER_GVK_ANNOTATION),
        annotation(OWNER_NAME_ANNOTATION),
    );
    if !name.is_empty() {
        let mut parts = gvk.split(", Kind=");
        if let (Some(api_version), Some(kind)) = (parts.next(), parts.next())
            && let Some(owner) = OwnerKind::of(api_version, kind)
        {
            return Ok((owner, name.to_owned()));
        }
    }
    let references = workload
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let reference = references
        .iter()
        .find(|r| r["controller"] == true)
        .or_else(|| references.first());
    let Some(reference) = reference else {
        return Err("No multikueue adapter found".to_owned());
    };
    let (api_version, kind) = (
        json_read::text(reference, "/apiVersion"),
        json_read::text(reference, "/kind"),
    );
    OwnerKind::of(api_version, kind)
        .map(|owner| (owner, json_read::text(reference, "/name").to_owned()))
        .ok_or_else(|| {
            format!(
                "No multikueue adapter found for owner kind {:?}",
                gvk_text(api_version, kind)
            )
        })
}

/// Why an owner is not left to MultiKueue (`IsJobManagedByKueue`), if it is not.
pub fn unmanaged_reason(owner: &Value) -> Option<String> {
    let managed_by = json_read::text(owner, "/spec/managedBy");
    (managed_by != MULTIKUEUE_CONTROLLER).then(|| {
        format!("Expecting spec.managedBy to be {MULTIKUEUE_CONTROLLER:?} not {managed_by:?}")
    })
}

/// Whether a worker's object was created by this manager (`ValidateRemoteObjectOwnership`:
/// its origin label is this origin).
pub fn owned_by(object: &Value, origin: &str) -> bool {
    let key = format!("/metadata/labels/{}", ORIGIN_LABEL.replace('/', "~1"));
    json_read::text(object, &key) == origin
}

/// `CloneObjectMetaForCreation`: name, namespace, labels and annotations only.
pub fn metadata_for_creation(object: &Value) -> Map<String, Value> {
    let mut meta = Map::new();
    for field in ["name", "namespace", "labels", "annotations"] {
        if let Some(value) = object.pointer(&format!("/metadata/{field}")) {
            meta.insert(field.to_owned(), value.clone());
        }
    }
    meta
}

/// Adds `key: value` to an object's `metadata.labels`.
pub fn add_label(meta: &mut Map<String, Value>, key: &str, value: &str) {
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(key.to_owned(), json!(value));
    }
}

/// The copy of the manager's owner created on the winning worker (`SyncJob`'s create).
pub fn remote_copy(kind: OwnerKind, owner: &Value, workload_name: &str, origin: &str) -> Value {
    let mut meta = metadata_for_creation(owner);
    add_label(&mut meta, ORIGIN_LABEL, origin);
    add_label(&mut meta, PREBUILT_WORKLOAD_LABEL, workload_name);
    let mut spec = owner.get("spec").cloned().unwrap_or_else(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.remove("managedBy");
        if kind == OwnerKind::Job {
            spec.remove("selector");
        }
    }
    if kind == OwnerKind::Job
        && let Some(labels) = spec
            .pointer_mut("/template/metadata/labels")
            .and_then(Value::as_object_mut)
    {
        for label in JOB_CONTROLLER_LABELS {
            labels.remove(label);
        }
    }
    let (api_version, kind) = kind.api_version_kind();
    json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec})
}

fn job_suspended(job: &Value) -> bool {
    job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true)
}

fn job_condition_true(job: &Value, kind: &str) -> bool {
    tessera_model::conditions::is_true(job, kind)
}

/// The status the manager's owner gets from the worker's copy, and whether the sync is
/// deferred until the manager's Job is unsuspended (`determineStatusUpdate`; JobSets take
/// the worker's status as it is).
pub fn status_update(
    kind: OwnerKind,
    local: &Value,
    remote: &Value,
    now: SystemTime,
) -> (Value, bool) {
    let remote_status = remote.get("status").cloned().unwrap_or_else(|| json!({}));
    if kind == OwnerKind::JobSet || !job_suspended(local) || job_suspended(remote) {
        return (remote_status, false);
    }
    if job_condition_true(remote, "Complete") || job_condition_true(remote, "Failed") {
        return (remote_status, false);
    }
    let mut status = local.get("status").cloned().unwrap_or_else(|| json!({}));
    if !job_condition_true(local, "Suspended") {
        let stamp = time::timestamp(now);
        let condition = json!({"type": "Suspended", "status": "True",
            "reason": "MultiKueueAdapter", "message": "Set by MultiKueue adapter",
            "lastTransitionTime": stamp, "lastProbeTime": stamp});
        if !status.is_object() {
            status = json!({});
        }
        let list = status
            .as_object_mut()
            .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
        if let Some(Value::Array(list)) = list {
            match list.iter_mut().find(|c| c["type"] == "Suspended") {
                Some(existing) => *existing = condition,
                None => list.push(condition),
            }
        }
    }
    (status, true)
}
