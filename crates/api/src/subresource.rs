//! The semantics of subresources that translate to operations on their object: a pod's
//! Binding (`pods/binding`), the Scale view of a scalable kind (`/scale`: where replicas and
//! the selector live, and how a Scale write changes the object), and which container's log
//! a `pods/log` request reads and how its lines are rendered.
//!
//! Knows nothing about transactions, files or responses: the shell reads and writes.

use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use crate::error::{ApiError, ApiResult, Cause};
use crate::meta::meta_str;
use crate::pod_conditions::update_status_condition;
use crate::raw_object::RawObject;
use crate::request::Query;
use crate::resource::Resource;
use crate::write::{Encoded, PatchBody};

/// The node a Binding names, or 422.
pub fn binding_target(name: &str, binding: &Value) -> ApiResult<String> {
    binding
        .at("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| ApiError::invalid("", "Binding", name, vec![Cause::required("target.name")]))
}

/// The stored pod `stored` bound as `binding` asks (upstream's `setPodNodeAndMetadata`),
/// in its next stored form: the Binding's uid and resourceVersion, when it names them, must
/// be the stored pod's; a pod that is being deleted, is bound already or still has
/// scheduling gates is refused with upstream's 409; the bound pod gets the node, the
/// Binding's annotations and the `PodScheduled=True` condition (its transition at `now`, a
/// timestamp). Only the fields it reads or sets are decoded; the rest of the pod is copied
/// as stored.
pub fn bind(stored: &[u8], binding: &Value, node: &str, now: &str) -> ApiResult<Encoded> {
    let corrupt = |e: serde_json::Error| ApiError::internal(format!("stored pod is corrupt: {e}"));
    let mut pod = RawObject::parse(stored).map_err(corrupt)?;
    let metadata = pod
        .object_mut("metadata")
        .map_err(corrupt)?
        .ok_or_else(|| ApiError::internal("the stored pod's metadata is no object"))?;
    let name = metadata.str("name").unwrap_or_default();
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let stored = metadata.str(field).unwrap_or_default();
        if let Some(wanted) = meta_str(binding, field).filter(|w| !w.is_empty() && *w != stored) {
            return Err(ApiError::conflict(
                "",
                "pods",
                &name,
                &format!(
                    "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {stored}"
                ),
            ));
        }
    }
    let refused = |detail: String| Err(ApiError::conflict("", "pods/binding", &name, &detail));
    if metadata.str("deletionTimestamp").is_some() {
        return refused(format!(
            "pod {name} is being deleted, cannot be assigned to a host"
        ));
    }
    if let Some(annotations) = binding
        .at("/metadata/annotations")
        .and_then(Value::as_object)
        .filter(|a| !a.is_empty())
    {
        let stored = metadata.value_mut("annotations").map_err(corrupt)?;
        if !stored.is_object() {
            *stored = json!({});
        }
        for (key, value) in annotations {
            stored[key] = value.clone();
        }
    }
    let spec = pod
        .object_mut("spec")
        .map_err(corrupt)?
        .ok_or_else(|| ApiError::internal("the stored pod's spec is no object"))?;
    if let Some(existing) = spec.str("nodeName").filter(|n| !n.is_empty()) {
        return refused(format!(
            "pod {name} is already assigned to node \"{existing}\""
        ));
    }
    if spec
        .value("schedulingGates")
        .map_err(corrupt)?
        .as_ref()
        .and_then(Value::as_array)
        .is_some_and(|gates| !gates.is_empty())
    {
        return refused(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    spec.set("nodeName", json!(node));
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null});
    update_status_condition(pod.value_mut("status").map_err(corrupt)?, scheduled, now);
    pod.encode_versioned().map_err(corrupt)
}

/// Where a kind keeps what its Scale shows: fixed for built-in kinds, declared by the CRD
/// for custom ones.
#[derive(Debug, Clone)]
pub struct ScalePaths {
    spec_pointer: String,
    status_pointer: String,
    selector_path: Option<String>,
}

impl ScalePaths {
    /// The paths of a resource's Scale.
    pub fn of(resource: Resource) -> ScalePaths {
        let paths = resource.info.custom.as_ref().and_then(|c| c.scale.clone());
        let pointer = |path: Option<&str>, fallback: &str| -> String {
            path.and_then(crate::jsonpath::to_pointer)
                .unwrap_or_else(|| fallback.to_string())
        };
        ScalePaths {
            spec_pointer: pointer(
                paths.as_ref().map(|p| p.spec_replicas.as_str()),
                "/spec/replicas",
            ),
            status_pointer: pointer(
                paths.as_ref().map(|p| p.status_replicas.as_str()),
                "/status/replicas",
            ),
            selector_path: paths.as_ref().and_then(|p| p.label_selector.clone()),
        }
    }

    /// The `autoscaling/v1` Scale of an object.
    pub fn view(&self, object: &Value) -> Value {
        let selector = match &self.selector_path {
            Some(path) => crate::jsonpath::select(object, path)
                .first()
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string(),
            None => object
                .at("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
        };
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta_str(object, "name"),
                "namespace": meta_str(object, "namespace"),
                "uid": meta_str(object, "uid"),
                "resourceVersion": meta_str(object, "resourceVersion"),
                "creationTimestamp": meta_str(object, "creationTimestamp"),
            },
            "spec": {"replicas": object.at(&self.spec_pointer).cloned().unwrap_or(json!(0))},
            "status": {
                "replicas": object.at(&self.status_pointer).cloned().unwrap_or(json!(0)),
                "selector": selector,
            },
        })
    }

    /// The object after a Scale write (`change`: a replacement as a merge, or a patch): the
    /// patched Scale's `spec.replicas`, which must be a non-negative integer, written back.
    pub fn apply(&self, current: &Value, name: &str, change: &PatchBody) -> ApiResult<Value> {
        let scale = self.view(current);
        let patched = match change {
            PatchBody::Json(bytes) => crate::patch::json_patch(&scale, bytes),
            PatchBody::Merge(patch)
            | PatchBody::Strategic(patch)
            | PatchBody::Apply { config: patch, .. } => crate::patch::merge_patch(&scale, patch),
        }
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let replicas = patched
            .at("/spec/replicas")
            .and_then(Value::as_i64)
            .filter(|r| *r >= 0)
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    vec![Cause::invalid(
                        "spec.replicas",
                        patched.at("/spec/replicas").unwrap_or(&Value::Null),
                        "must be greater than or equal to 0",
                    )],
                )
            })?;
        let mut next = current.clone();
        set_at(&mut next, &self.spec_pointer, json!(replicas));
        Ok(next)
    }
}

/// The body of a Scale PATCH in its flavour (strategic merge is a merge for Scale).
pub fn scale_patch(content_type: &str, body: bytes::Bytes) -> ApiResult<PatchBody> {
    Ok(match content_type {
        "application/json-patch+json" => PatchBody::Json(body),
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            PatchBody::Merge(
                serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(e.to_string()))?,
            )
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    })
}

/// The container whose log a `pods/log` request reads: the one named by `container` (a
/// container or init container of the pod), else the pod's only container.
pub fn log_container(pod: &Value, name: &str, query: &Query) -> ApiResult<String> {
    let names = |list: &str| -> Vec<String> {
        pod.at(list)
            .and_then(Value::as_array)
            .map(|c| {
                c.iter()
                    .filter_map(|c| c.get("name")?.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let containers = names("/spec/containers");
    match query.get("container").filter(|c| !c.is_empty()) {
        Some(container) => {
            let init = names("/spec/initContainers");
            if !containers.iter().chain(init.iter()).any(|c| c == container) {
                return Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )));
            }
            Ok(container.to_string())
        }
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

/// One stored log line as served: with its leading timestamp when `timestamps`, without it
/// otherwise.
pub fn render_log_line(line: &str, timestamps: bool) -> String {
    if timestamps {
        format!("{line}\n")
    } else {
        let text = line.split_once(' ').map_or(line, |(_, rest)| rest);
        format!("{text}\n")
    }
}

/// The first response of a `pods/log` request from the log's `content`: the last
/// `tail_lines` lines, rendered, cut to `limit_bytes` (on a character boundary).
pub fn log_text(
    content: &str,
    timestamps: bool,
    tail_lines: Option<i64>,
    limit_bytes: Option<i64>,
) -> String {
    let mut lines: Vec<&str> = content.lines().collect();
    if let Some(tail) = tail_lines
        && tail >= 0
    {
        let skip = lines.len().saturating_sub(tail as usize);
        lines.drain(..skip);
    }
    let mut text: String = lines
        .iter()
        .map(|l| render_log_line(l, timestamps))
        .collect();
    if let Some(limit) = limit_bytes
        && limit >= 0
        && text.len() > limit as usize
    {
        let mut cut = limit as usize;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// Sets a value at a JSON Pointer, creating the objects on the way.
fn set_at(object: &mut Value, pointer: &str, value: Value) {
    let mut current = object;
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (index, part) in parts.iter().enumerate() {
        if !current.is_object() {
            *current = json!({});
        }
        let Some(map) = current.as_object_mut() else {
            return;
        };
        if index == parts.len() - 1 {
            map.insert(part.clone(), value);
            return;
        }
        current = map.entry(part.clone()).or_insert_with(|| json!({}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-04T00:00:00Z";

    fn stored(pod: &Value) -> Vec<u8> {
        serde_json::to_vec(pod).unwrap()
    }

    fn pod(metadata: Value, spec: Value, status: Option<Value>) -> Value {
        let mut pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
        if let Some(status) = status {
            pod["status"] = status;
        }
        pod
    }

    fn binding(metadata: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
               "target": {"kind": "Node", "name": "n1"}})
    }

    #[test]
    fn a_binding_sets_node_annotations_and_condition_and_copies_the_rest() {
        let containers = json!([{"name": "c", "image": "i", "args": ["a\"b", "1.50"]}]);
        let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                               "lastTransitionTime": NOW});
        // (case, stored pod, Binding's metadata, the pod after)
        let cases = [
            (
                "no status yet",
                pod(
                    json!({"resourceVersion": "5", "name": "p", "uid": "u"}),
                    json!({"containers": containers}),
                    None,
                ),
                json!({"name": "p"}),
                pod(
                    json!({"resourceVersion": "", "name": "p", "uid": "u"}),
                    json!({"containers": containers, "nodeName": "n1"}),
                    Some(json!({"conditions": [scheduled]})),
                ),
            ),
            (
                "the scheduler's Unschedulable condition replaced, annotations added",
                pod(
                    json!({"resourceVersion": "5", "name": "p", "uid": "u",
                           "annotations": {"kept": "yes"}}),
                    json!({"nodeName": "", "containers": containers}),
                    Some(json!({"phase": "Pending", "conditions": [
                        {"type": "Ready", "status": "False"},
                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "lastTransitionTime": "T0"}]})),
                ),
                json!({"name": "p", "uid": "u", "resourceVersion": "5",
                       "annotations": {"score": "42"}}),
                pod(
                    json!({"resourceVersion": "", "name": "p", "uid": "u",
                           "annotations": {"kept": "yes", "score": "42"}}),
                    json!({"nodeName": "n1", "containers": containers}),
                    Some(json!({"phase": "Pending", "conditions": [
                        {"type": "Ready", "status": "False"}, scheduled]})),
                ),
            ),
            (
                "annotations where the pod had none",
                pod(
                    json!({"resourceVersion": "5", "name": "p"}),
                    json!({"containers": containers, "schedulingGates": []}),
                    Some(json!({})),
                ),
                json!({"name": "p", "annotations": {"a": "b"}}),
                pod(
                    json!({"resourceVersion": "", "name": "p", "annotations": {"a": "b"}}),
                    json!({"containers": containers, "schedulingGates": [], "nodeName": "n1"}),
                    Some(json!({"conditions": [scheduled]})),
                ),
            ),
        ];
        for (case, before, metadata, after) in cases {
            let encoded = bind(&stored(&before), &binding(metadata), "n1", NOW)
                .unwrap_or_else(|e| panic!("{case}: {e:?}"));
            let text = String::from_utf8(encoded.bytes).unwrap();
            assert_eq!(text, String::from_utf8(stored(&after)).unwrap(), "{case}");
            assert!(
                text[..encoded.revision_at.unwrap()]
                    .ends_with(r#""metadata":{"resourceVersion":""#),
                "{case}"
            );
        }
    }

    #[test]
    fn bindings_are_refused_as_upstream_refuses_them() {
        let containers = json!([{"name": "c", "image": "i"}]);
        // (case, stored metadata, stored spec, Binding's metadata, the answer's message)
        let cases = [
            (
                "another uid",
                json!({"name": "p", "uid": "u"}),
                json!({"containers": containers}),
                json!({"name": "p", "uid": "old"}),
                "Precondition failed: UID in precondition: old, UID in object meta: u",
            ),
            (
                "another resourceVersion",
                json!({"name": "p", "resourceVersion": "9"}),
                json!({"containers": containers}),
                json!({"name": "p", "resourceVersion": "8"}),
                "Precondition failed: ResourceVersion in precondition: 8, ResourceVersion in object meta: 9",
            ),
            (
                "being deleted",
                json!({"name": "p", "deletionTimestamp": NOW}),
                json!({"containers": containers}),
                json!({"name": "p"}),
                "pod p is being deleted, cannot be assigned to a host",
            ),
            (
                "bound already",
                json!({"name": "p"}),
                json!({"containers": containers, "nodeName": "n0"}),
                json!({"name": "p"}),
                "pod p is already assigned to node \"n0\"",
            ),
            (
                "gated",
                json!({"name": "p"}),
                json!({"containers": containers, "schedulingGates": [{"name": "g"}]}),
                json!({"name": "p"}),
                "pod p has non-empty .spec.schedulingGates",
            ),
        ];
        for (case, metadata, spec, wanted, message) in cases {
            let stored = stored(&pod(metadata, spec, None));
            let error = bind(&stored, &binding(wanted), "n1", NOW).expect_err(case);
            assert_eq!(error.code, 409, "{case}");
            assert!(
                error.message.ends_with(message),
                "{case}: {}",
                error.message
            );
        }
        let corrupt = bind(b"{\"metadata\":", &binding(json!({})), "n1", NOW).expect_err("corrupt");
        assert_eq!(corrupt.code, 500);
    }
}
