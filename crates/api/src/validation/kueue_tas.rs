//! What Kueue's job webhooks refuse in a PodSet's topology annotations
//! (`pkg/controller/jobframework/tas_validation.go`: `ValidateTASPodSetRequest` and
//! `ValidateSliceSizeAnnotationUpperBound`), on the pod templates of the kinds Tessera's queue
//! manager runs: a Job's template, each replicated Job of a JobSet, a LeaderWorkerSet's leader
//! and worker templates, a StatefulSet's template and a plain pod, with upstream's field paths
//! and messages. At most one of required, preferred and unconstrained; label names; the slice
//! pair (`podset-slice-required-topology` with `podset-slice-size`, a number from 1 to the
//! PodSet's count); the multi-layer constraints (TASMultiLayerTopology, Beta, on by default);
//! `podset-group-name` only with a required or preferred level and not with slices.
//!
//! Only objects Kueue manages (a `kueue.x-k8s.io/queue-name` label) are checked. Knows nothing
//! of Topologies or flavors: whether a level exists is the queue manager's concern, as
//! upstream's. The pairing check of PodSet groups across templates is not ported.

use std::collections::BTreeMap;
use tessera_model::json::Pointer as _;

use serde::Deserialize;
use serde_json::{Value, json};
use tessera_model::kueue::topology::{
    PODSET_GROUP_NAME_ANNOTATION as GROUP_NAME, PODSET_PREFERRED_TOPOLOGY_ANNOTATION as PREFERRED,
    PODSET_REQUIRED_TOPOLOGY_ANNOTATION as REQUIRED,
    PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION as SLICE_REQUIRED,
    PODSET_SLICE_SIZE_ANNOTATION as SLICE_SIZE,
    PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION as UNCONSTRAINED,
};

use crate::error::Cause;
use crate::meta::check_qualified_name;

/// `kueue.x-k8s.io/podset-slice-required-topology-constraints`.
const CONSTRAINTS: &str = "kueue.x-k8s.io/podset-slice-required-topology-constraints";

/// One pod template of a managed object: its metadata's field path, its metadata, and how
/// many pods the PodSet has.
struct Template<'a> {
    path: String,
    metadata: &'a Value,
    count: i64,
}

/// Problems with the topology annotations of a Kueue-managed object of `group`/`kind`.
pub fn validate(group: &str, kind: &str, object: &Value) -> Vec<Cause> {
    // Most writes are of other kinds: those cost one match.
    let templates = templates(group, kind, object);
    let managed = || {
        object
            .at("/metadata/labels")
            .and_then(|labels| labels.get(tessera_model::kueue::QUEUE_NAME_LABEL))
            .and_then(Value::as_str)
            .is_some_and(|name| !name.is_empty())
    };
    if templates.is_empty() || !managed() {
        return Vec::new();
    }
    templates
        .iter()
        .flat_map(|template| {
            let mut causes = podset_request(&template.path, template.metadata);
            if causes.is_empty() {
                causes.extend(slice_upper_bound(template));
            }
            causes
        })
        .collect()
}

fn int(value: Option<&Value>, default: i64) -> i64 {
    value.and_then(Value::as_i64).unwrap_or(default)
}

fn templates<'a>(group: &str, kind: &str, object: &'a Value) -> Vec<Template<'a>> {
    let null = &Value::Null;
    let at = |value: &'a Value, pointer: &str| value.at(pointer).unwrap_or(null);
    match (group, kind) {
        ("batch", "Job") => vec![Template {
            path: "spec.template.metadata".into(),
            metadata: at(object, "/spec/template/metadata"),
            // Kueue's `podsCount`: the parallelism, or fewer completions.
            count: match object.at("/spec/completions").and_then(Value::as_i64) {
                Some(completions) => completions.min(int(object.at("/spec/parallelism"), 1)),
                None => int(object.at("/spec/parallelism"), 1),
            },
        }],
        ("apps", "StatefulSet") => vec![Template {
            path: "spec.template.metadata".into(),
            metadata: at(object, "/spec/template/metadata"),
            count: int(object.at("/spec/replicas"), 1),
        }],
        ("", "Pod") => vec![Template {
            path: "metadata".into(),
            metadata: at(object, "/metadata"),
            count: 1,
        }],
        ("jobset.x-k8s.io", "JobSet") => object
            .at("/spec/replicatedJobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, job)| Template {
                path: format!("spec.replicatedJobs[{i}].template.spec.template.metadata"),
                metadata: at(job, "/template/spec/template/metadata"),
                count: int(job.get("replicas"), 1)
                    .saturating_mul(int(job.at("/template/spec/parallelism"), 1)),
            })
            .collect(),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => {
            let size = int(object.at("/spec/leaderWorkerTemplate/size"), 1);
            let mut templates = vec![Template {
                path: "spec.leaderWorkerTemplate.workerTemplate.metadata".into(),
                metadata: at(object, "/spec/leaderWorkerTemplate/workerTemplate/metadata"),
                count: size - 1,
            }];
            if object
                .at("/spec/leaderWorkerTemplate/leaderTemplate")
                .is_some()
            {
                templates.insert(
                    0,
                    Template {
                        path: "spec.leaderWorkerTemplate.leaderTemplate.metadata".into(),
                        metadata: at(object, "/spec/leaderWorkerTemplate/leaderTemplate/metadata"),
                        count: 1,
                    },
                );
            }
            templates
        }
        _ => Vec::new(),
    }
}

/// A template's annotations.
fn annotations(metadata: &Value) -> BTreeMap<&str, &str> {
    metadata
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(key, value)| Some((key.as_str(), value.as_str()?)))
        .collect()
}

/// Go's `strconv.ParseInt(text, 10, 32)`.
fn parse_int32(text: &str) -> Option<i32> {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Go's `strconv.ParseBool`.
fn is_bool(text: &str) -> bool {
    matches!(
        text,
        "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false" | "False"
    )
}

/// An `Invalid` cause without a value (`field.OmitValueType`).
fn invalid_omitting_value(field: String, detail: String) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field,
        message: format!("Invalid value: {detail}"),
    }
}

/// `metavalidation.ValidateLabelName`.
fn label_name(field: String, name: &str) -> Option<Cause> {
    check_qualified_name(name).map(|detail| Cause::invalid(field, &json!(name), detail))
}

#[derive(Deserialize)]
struct Layer {
    topology: String,
    size: i32,
}

/// `ValidateTASPodSetRequest`.
fn podset_request(path: &str, metadata: &Value) -> Vec<Cause> {
    let annotations = annotations(metadata);
    let key = |annotation: &str| format!("{path}.annotations[{annotation}]");
    let get = |annotation: &str| annotations.get(annotation).copied();
    let (required, preferred, unconstrained) = (get(REQUIRED), get(PREFERRED), get(UNCONSTRAINED));
    let (slice_required, slice_size, group) =
        (get(SLICE_REQUIRED), get(SLICE_SIZE), get(GROUP_NAME));
    let mut causes = Vec::new();
    let found = [required, preferred, unconstrained]
        .iter()
        .filter(|a| a.is_some())
        .count();
    if found > 1 {
        causes.push(invalid_omitting_value(
            format!("{path}.annotations"),
            format!(
                "must not contain more than one topology annotation: [{REQUIRED:?}, {PREFERRED:?}, {UNCONSTRAINED:?}]"
            ),
        ));
    }
    for (annotation, value) in [
        (REQUIRED, required),
        (PREFERRED, preferred),
        (SLICE_REQUIRED, slice_required),
    ] {
        if let Some(value) = value {
            causes.extend(label_name(key(annotation), value));
        }
    }
    if let Some(group) = group {
        if group.parse::<u64>().is_ok() {
            causes.push(Cause::invalid(
                key(GROUP_NAME),
                &json!(group),
                "must not be a number",
            ));
        }
        for (other, present) in [
            (SLICE_SIZE, slice_size.is_some()),
            (SLICE_REQUIRED, slice_required.is_some()),
        ] {
            if present {
                causes.push(Cause::forbidden(
                    key(GROUP_NAME),
                    format!("may not be set when '{other}' is specified"),
                ));
            }
        }
        if preferred.is_none() && required.is_none() {
            causes.push(Cause::forbidden(
                key(GROUP_NAME),
                format!("may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified"),
            ));
        }
    }
    if let Some(value) = unconstrained
        && !is_bool(value)
    {
        causes.push(Cause::invalid(
            key(UNCONSTRAINED),
            &json!(value),
            "must be a boolean value",
        ));
    }
    if let Some(value) = slice_size {
        match parse_int32(value) {
            None => causes.push(Cause::invalid(
                key(SLICE_SIZE),
                &json!(value),
                "must be a numeric value",
            )),
            Some(size) if size < 1 => causes.push(Cause::invalid(
                key(SLICE_SIZE),
                &json!(value),
                "must be greater than or equal to 1",
            )),
            Some(_) => {}
        }
    }
    match (slice_required.is_some(), slice_size.is_some()) {
        (true, false) => causes.push(Cause::required_because(
            key(SLICE_SIZE),
            format!("must be set when '{SLICE_REQUIRED}' is specified"),
        )),
        (false, true) => causes.push(Cause::forbidden(
            key(SLICE_SIZE),
            format!("may not be set when '{SLICE_REQUIRED}' is not specified"),
        )),
        _ => {}
    }
    if let Some(text) = get(CONSTRAINTS) {
        causes.extend(constraints(
            &key(CONSTRAINTS),
            &key(GROUP_NAME),
            text,
            slice_required.is_some(),
            slice_size.is_some(),
            group.is_some(),
        ));
    }
    causes
}

/// `validateSliceRequiredTopologyConstraintsAnnotation` (the feature gate on, its default).
fn constraints(
    field: &str,
    group_field: &str,
    text: &str,
    slice_required: bool,
    slice_size: bool,
    group: bool,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (other, present) in [(SLICE_REQUIRED, slice_required), (SLICE_SIZE, slice_size)] {
        if present {
            causes.push(Cause::forbidden(
                field,
                format!("may not be set when '{other}' is specified"),
            ));
        }
    }
    if group {
        causes.push(Cause::forbidden(
            group_field,
            format!("may not be set when '{CONSTRAINTS}' is specified"),
        ));
    }
    let layers: Vec<Layer> = match serde_json::from_str(text) {
        Ok(layers) => layers,
        Err(error) => {
            causes.push(Cause::invalid(
                field,
                &json!(text),
                format!("must be a valid JSON array: {error}"),
            ));
            return causes;
        }
    };
    if layers.is_empty() || layers.len() > 3 {
        causes.push(Cause::invalid(
            field,
            &json!(text),
            "topology constraints must contain between 1 and 3 entries",
        ));
        return causes;
    }
    for (i, layer) in layers.iter().enumerate() {
        causes.extend(label_name(
            format!("{field}[{i}].topology"),
            &layer.topology,
        ));
        if layer.size < 1 {
            causes.push(Cause::invalid(
                format!("{field}[{i}].size"),
                &json!(layer.size),
                "must be greater than or equal to 1",
            ));
        }
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, layer) in layers.iter().enumerate() {
        match seen.get(layer.topology.as_str()) {
            Some(previous) => causes.push(Cause::duplicate(
                format!("{field}[{i}].topology"),
                &json!(format!("{} (also at index {previous})", layer.topology)),
            )),
            None => {
                seen.insert(&layer.topology, i);
            }
        }
    }
    for pair in 0..layers.len() - 1 {
        let (parent, child) = (layers[pair].size, layers[pair + 1].size);
        if child > 0 && parent % child != 0 {
            causes.push(Cause::invalid(
                format!("{field}[{}].size", pair + 1),
                &json!(child),
                format!("must evenly divide the parent layer size {parent}"),
            ));
        }
    }
    causes
}

/// `ValidateSliceSizeAnnotationUpperBound`: a slice no larger than the PodSet.
fn slice_upper_bound(template: &Template<'_>) -> Vec<Cause> {
    let annotations = annotations(template.metadata);
    let key = |annotation: &str| format!("{}.annotations[{annotation}]", template.path);
    let mut causes = Vec::new();
    if let Some(value) = annotations.get(SLICE_SIZE)
        && let Some(size) = parse_int32(value)
        && i64::from(size) > template.count
    {
        causes.push(Cause::invalid(
            key(SLICE_SIZE),
            &json!(value),
            format!("must not be greater than pod set count {}", template.count),
        ));
    }
    if let Some(text) = annotations.get(CONSTRAINTS)
        && let Ok(layers) = serde_json::from_str::<Vec<Layer>>(text)
        && let Some(first) = layers.first()
        && i64::from(first.size) > template.count
    {
        causes.push(Cause::invalid(
            key(CONSTRAINTS),
            &json!(first.size),
            format!("must not be greater than pod set count {}", template.count),
        ));
    }
    causes
}

#[cfg(test)]
mod tests;
