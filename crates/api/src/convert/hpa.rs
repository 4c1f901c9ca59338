//! `autoscaling/v1` ↔ `autoscaling/v2` (the storage version) HorizontalPodAutoscalers, as
//! upstream's `pkg/apis/autoscaling/v1/conversion.go` converts them:
//!
//! - v1's `targetCPUUtilizationPercentage` is v2's `Resource` metric on `cpu` with an
//!   `Utilization` target; a v1 object without one gets upstream's implicit 80% (the
//!   conversion itself applies it, `autoscaling.DefaultCPUUtilization`);
//! - what v1 cannot say travels in annotations: the other metrics
//!   (`autoscaling.alpha.kubernetes.io/metrics`, in v1's `MetricSpec` shape), the current
//!   metrics (`…/current-metrics`), the conditions (`…/conditions`) and the behavior
//!   (`…/behavior`, which upstream writes from its internal type, without JSON tags: the keys
//!   are Go field names such as `ScaleUp` and `StabilizationWindowSeconds`, and are read back
//!   case-insensitively as Go's `encoding/json` does);
//! - writing v2 drops those annotations after reading them; reading v1 drops any stale ones
//!   before writing its own (`DropRoundTripHorizontalPodAutoscalerAnnotations`).
//!
//! Works on JSON values; annotations that do not parse are ignored, as upstream ignores them.

use serde_json::{Map, Value, json};
use tessera_model::json::Pointer as _;

/// `autoscaling.MetricSpecsAnnotation`.
pub const METRIC_SPECS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `autoscaling.MetricStatusesAnnotation`.
pub const METRIC_STATUSES_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `autoscaling.HorizontalPodAutoscalerConditionsAnnotation`.
pub const CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `autoscaling.BehaviorSpecsAnnotation`.
pub const BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
/// `autoscaling.DefaultCPUUtilization`.
pub const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Every annotation a conversion writes or reads (upstream's round-trip set, with the
/// tolerance annotations only v2beta2 writes).
const ROUND_TRIP_ANNOTATIONS: [&str; 6] = [
    METRIC_SPECS_ANNOTATION,
    BEHAVIOR_ANNOTATION,
    "autoscaling.alpha.kubernetes.io/scale-down-tolerance",
    "autoscaling.alpha.kubernetes.io/scale-up-tolerance",
    METRIC_STATUSES_ANNOTATION,
    CONDITIONS_ANNOTATION,
];

/// Converts a v1 object (as served) to v2 (as stored).
pub fn v1_to_v2(object: Value) -> Value {
    let Value::Object(mut hpa) = object else {
        return object;
    };
    let annotations = take_round_trip_annotations(&mut hpa);
    let parsed = |name: &str| {
        annotations
            .get(name)
            .and_then(Value::as_str)
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
    };
    if let Some(Value::Object(v1)) = hpa.remove("spec") {
        let mut spec = copy_fields(&v1, &["scaleTargetRef", "minReplicas", "maxReplicas"]);
        let mut metrics: Vec<Value> = match parsed(METRIC_SPECS_ANNOTATION) {
            Some(Value::Array(others)) => others.iter().map(metric_spec_to_v2).collect(),
            _ => Vec::new(),
        };
        if let Some(cpu) = v1
            .get("targetCPUUtilizationPercentage")
            .filter(|v| !v.is_null())
        {
            metrics.push(cpu_metric(cpu.clone()));
        }
        if metrics.is_empty() {
            metrics.push(cpu_metric(json!(DEFAULT_CPU_UTILIZATION)));
        }
        spec.insert("metrics".into(), Value::Array(metrics));
        if let Some(behavior) = parsed(BEHAVIOR_ANNOTATION).and_then(|b| behavior_from_go(&b)) {
            spec.insert("behavior".into(), behavior);
        }
        hpa.insert("spec".into(), Value::Object(spec));
    }
    let v1 = match hpa.remove("status") {
        Some(Value::Object(status)) => Some(status),
        _ => None,
    };
    let current = parsed(METRIC_STATUSES_ANNOTATION);
    let conditions = parsed(CONDITIONS_ANNOTATION);
    if v1.is_some() || current.is_some() || conditions.is_some() {
        let v1 = v1.unwrap_or_default();
        let mut status = copy_fields(
            &v1,
            &[
                "observedGeneration",
                "lastScaleTime",
                "currentReplicas",
                "desiredReplicas",
            ],
        );
        let current_metrics = match current {
            Some(Value::Array(metrics)) => Some(metrics.iter().map(metric_status_to_v2).collect()),
            _ => v1
                .get("currentCPUUtilizationPercentage")
                .filter(|v| !v.is_null())
                .map(|cpu| {
                    vec![json!({"type": "Resource",
                                "resource": {"name": "cpu", "current": {"averageUtilization": cpu}}})]
                }),
        };
        if let Some(metrics) = current_metrics {
            status.insert("currentMetrics".into(), Value::Array(metrics));
        }
        if let Some(Value::Array(conditions)) = conditions {
            status.insert("conditions".into(), Value::Array(conditions));
        }
        hpa.insert("status".into(), Value::Object(status));
    }
    Value::Object(hpa)
}

/// Converts a v2 object (as stored) to v1 (as served).
pub fn v2_to_v1(object: Value) -> Value {
    let Value::Object(mut hpa) = object else {
        return object;
    };
    take_round_trip_annotations(&mut hpa);
    let mut annotations = Map::new();
    if let Some(Value::Object(v2)) = hpa.remove("spec") {
        let mut spec = copy_fields(&v2, &["scaleTargetRef", "minReplicas", "maxReplicas"]);
        let metrics = list(v2.get("metrics"));
        // The first cpu Resource metric gives the target, if it has a utilization.
        if let Some(cpu) = metrics
            .iter()
            .find(|m| is_resource_on_cpu(m))
            .and_then(|m| m.at("/resource/target/averageUtilization"))
            .filter(|v| !v.is_null())
        {
            spec.insert("targetCPUUtilizationPercentage".into(), cpu.clone());
        }
        let others: Vec<Value> = metrics
            .iter()
            .filter(|m| {
                !(is_resource_on_cpu(m)
                    && m.at("/resource/target/averageUtilization")
                        .is_some_and(|v| !v.is_null()))
            })
            .map(metric_spec_to_v1)
            .collect();
        if !others.is_empty() {
            annotations.insert(METRIC_SPECS_ANNOTATION.into(), encoded(&json!(others)));
        }
        if let Some(behavior) = v2.get("behavior").filter(|b| b.is_object()) {
            annotations.insert(
                BEHAVIOR_ANNOTATION.into(),
                encoded(&behavior_to_go(behavior)),
            );
        }
        hpa.insert("spec".into(), Value::Object(spec));
    }
    if let Some(Value::Object(v2)) = hpa.remove("status") {
        let mut status = copy_fields(
            &v2,
            &[
                "observedGeneration",
                "lastScaleTime",
                "currentReplicas",
                "desiredReplicas",
            ],
        );
        // v1's replica counts are not omitted when zero (v2's currentReplicas is).
        for field in ["currentReplicas", "desiredReplicas"] {
            status.entry(field).or_insert_with(|| json!(0));
        }
        let current = list(v2.get("currentMetrics"));
        // The last cpu Resource status with a utilization gives the current value.
        if let Some(cpu) = current
            .iter()
            .filter(|m| is_resource_on_cpu(m))
            .filter_map(|m| m.at("/resource/current/averageUtilization"))
            .rfind(|v| !v.is_null())
        {
            status.insert("currentCPUUtilizationPercentage".into(), cpu.clone());
        }
        if !current.is_empty() {
            let v1: Vec<Value> = current.iter().map(metric_status_to_v1).collect();
            annotations.insert(METRIC_STATUSES_ANNOTATION.into(), encoded(&json!(v1)));
        }
        let conditions = list(v2.get("conditions"));
        if !conditions.is_empty() {
            let v1: Vec<Value> = conditions.iter().map(condition_to_v1).collect();
            annotations.insert(CONDITIONS_ANNOTATION.into(), encoded(&json!(v1)));
        }
        hpa.insert("status".into(), Value::Object(status));
    }
    if !annotations.is_empty()
        && let Some(metadata) = hpa.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let existing = metadata.entry("annotations").or_insert_with(|| json!({}));
        if let Some(existing) = existing.as_object_mut() {
            existing.extend(annotations);
        }
    }
    Value::Object(hpa)
}

/// Removes the round-trip annotations (and an annotations map they leave empty), returning
/// their texts.
fn take_round_trip_annotations(hpa: &mut Map<String, Value>) -> Map<String, Value> {
    let mut taken = Map::new();
    let Some(metadata) = hpa.get_mut("metadata").and_then(Value::as_object_mut) else {
        return taken;
    };
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return taken;
    };
    for name in ROUND_TRIP_ANNOTATIONS {
        if let Some(Value::String(text)) = annotations.remove(name) {
            taken.insert(name.into(), Value::String(text));
        }
    }
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    taken
}

/// An annotation's text: compact JSON, as Go's `json.Marshal` writes it.
fn encoded(value: &Value) -> Value {
    Value::String(value.to_string())
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The fields of `from` named in `names`, in that order, when present and not null.
fn copy_fields(from: &Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|name| {
            from.get(*name)
                .filter(|v| !v.is_null())
                .map(|v| (name.to_string(), v.clone()))
        })
        .collect()
}

/// Builds an object from (field, value) pairs, leaving out absent and null values.
fn object(pairs: &[(&str, Option<&Value>)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .filter_map(|(name, value)| {
                value
                    .filter(|v| !v.is_null())
                    .map(|v| (name.to_string(), v.clone()))
            })
            .collect(),
    )
}

/// A required Go quantity: the value, or `"0"` when absent.
fn quantity_or_zero(value: Option<&Value>) -> Option<&Value> {
    static ZERO: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| json!("0"));
    Some(value.filter(|v| !v.is_null()).unwrap_or(&ZERO))
}

fn is_resource_on_cpu(metric: &Value) -> bool {
    metric.get("type").and_then(Value::as_str) == Some("Resource")
        && metric.at("/resource/name").and_then(Value::as_str) == Some("cpu")
}

fn cpu_metric(utilization: Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu",
           "target": {"type": "Utilization", "averageUtilization": utilization}}})
}

/// The v2 source field of a metric type (`ContainerResource` → `containerResource`).
fn source_field(kind: &str) -> String {
    let mut chars = kind.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_lowercase().to_string() + chars.as_str()
    })
}

/// One v2 `MetricSpec` in v1's shape.
fn metric_spec_to_v1(metric: &Value) -> Value {
    let kind = metric
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = source_field(kind);
    let Some(source) = metric.get(&field) else {
        return json!({"type": kind});
    };
    let target = |name: &str| source.at(&format!("/target/{name}"));
    let metric_id = |name: &str| source.at(&format!("/metric/{name}"));
    let converted = match kind {
        "Resource" => object(&[
            ("name", source.get("name")),
            ("targetAverageUtilization", target("averageUtilization")),
            ("targetAverageValue", target("averageValue")),
        ]),
        "ContainerResource" => object(&[
            ("name", source.get("name")),
            ("targetAverageUtilization", target("averageUtilization")),
            ("targetAverageValue", target("averageValue")),
            ("container", source.get("container")),
        ]),
        "Pods" => object(&[
            ("metricName", metric_id("name")),
            (
                "targetAverageValue",
                quantity_or_zero(target("averageValue")),
            ),
            ("selector", metric_id("selector")),
        ]),
        "Object" => object(&[
            ("target", source.get("describedObject")),
            ("metricName", metric_id("name")),
            ("targetValue", quantity_or_zero(target("value"))),
            ("selector", metric_id("selector")),
            ("averageValue", target("averageValue")),
        ]),
        "External" => object(&[
            ("metricName", metric_id("name")),
            ("metricSelector", metric_id("selector")),
            ("targetValue", target("value")),
            ("targetAverageValue", target("averageValue")),
        ]),
        _ => return json!({"type": kind}),
    };
    json!({"type": kind, field: converted})
}

/// One v1 `MetricSpec` (from the annotation) in v2's shape.
fn metric_spec_to_v2(metric: &Value) -> Value {
    let kind = metric
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = source_field(kind);
    let Some(source) = metric.get(&field) else {
        return json!({"type": kind});
    };
    let get = |name: &str| source.get(name).filter(|v| !v.is_null());
    let identifier =
        |name: &str, selector: &str| object(&[("name", get(name)), ("selector", get(selector))]);
    let converted = match kind {
        "Resource" | "ContainerResource" => {
            let kind_of_target = if get("targetAverageUtilization").is_some() {
                "Utilization"
            } else {
                "AverageValue"
            };
            let target = object(&[
                ("type", Some(&json!(kind_of_target))),
                ("averageValue", get("targetAverageValue")),
                ("averageUtilization", get("targetAverageUtilization")),
            ]);
            object(&[
                ("name", get("name")),
                ("target", Some(&target)),
                ("container", get("container")),
            ])
        }
        "Pods" => {
            let target = object(&[
                ("type", Some(&json!("AverageValue"))),
                ("averageValue", get("targetAverageValue")),
            ]);
            object(&[
                ("metric", Some(&identifier("metricName", "selector"))),
                ("target", Some(&target)),
            ])
        }
        "Object" => {
            let kind_of_target = if get("averageValue").is_some() {
                "AverageValue"
            } else {
                "Value"
            };
            let target = object(&[
                ("type", Some(&json!(kind_of_target))),
                ("value", quantity_or_zero(get("targetValue"))),
                ("averageValue", get("averageValue")),
            ]);
            object(&[
                ("describedObject", get("target")),
                ("target", Some(&target)),
                ("metric", Some(&identifier("metricName", "selector"))),
            ])
        }
        "External" => {
            let kind_of_target = if get("targetValue").is_some() {
                "Value"
            } else {
                "AverageValue"
            };
            let target = object(&[
                ("type", Some(&json!(kind_of_target))),
                ("value", get("targetValue")),
                ("averageValue", get("targetAverageValue")),
            ]);
            object(&[
                ("metric", Some(&identifier("metricName", "metricSelector"))),
                ("target", Some(&target)),
            ])
        }
        _ => return json!({"type": kind}),
    };
    json!({"type": kind, field: converted})
}

/// One v2 `MetricStatus` in v1's shape.
fn metric_status_to_v1(metric: &Value) -> Value {
    let kind = metric
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = source_field(kind);
    let Some(source) = metric.get(&field) else {
        return json!({"type": kind});
    };
    let current = |name: &str| source.at(&format!("/current/{name}"));
    let metric_id = |name: &str| source.at(&format!("/metric/{name}"));
    let converted = match kind {
        "Resource" => object(&[
            ("name", source.get("name")),
            ("currentAverageUtilization", current("averageUtilization")),
            (
                "currentAverageValue",
                quantity_or_zero(current("averageValue")),
            ),
        ]),
        "ContainerResource" => object(&[
            ("name", source.get("name")),
            ("currentAverageUtilization", current("averageUtilization")),
            (
                "currentAverageValue",
                quantity_or_zero(current("averageValue")),
            ),
            ("container", source.get("container")),
        ]),
        "Pods" => object(&[
            ("metricName", metric_id("name")),
            (
                "currentAverageValue",
                quantity_or_zero(current("averageValue")),
            ),
            ("selector", metric_id("selector")),
        ]),
        "Object" => object(&[
            ("target", source.get("describedObject")),
            ("metricName", metric_id("name")),
            ("currentValue", quantity_or_zero(current("value"))),
            ("selector", metric_id("selector")),
            ("averageValue", current("averageValue")),
        ]),
        "External" => object(&[
            ("metricName", metric_id("name")),
            ("metricSelector", metric_id("selector")),
            ("currentValue", quantity_or_zero(current("value"))),
            ("currentAverageValue", current("averageValue")),
        ]),
        _ => return json!({"type": kind}),
    };
    json!({"type": kind, field: converted})
}

/// One v1 `MetricStatus` (from the annotation) in v2's shape.
fn metric_status_to_v2(metric: &Value) -> Value {
    let kind = metric
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let field = source_field(kind);
    let Some(source) = metric.get(&field) else {
        return json!({"type": kind});
    };
    let get = |name: &str| source.get(name).filter(|v| !v.is_null());
    let identifier =
        |name: &str, selector: &str| object(&[("name", get(name)), ("selector", get(selector))]);
    let converted = match kind {
        "Resource" | "ContainerResource" => {
            let current = object(&[
                ("averageValue", get("currentAverageValue")),
                ("averageUtilization", get("currentAverageUtilization")),
            ]);
            object(&[
                ("name", get("name")),
                ("current", Some(&current)),
                ("container", get("container")),
            ])
        }
        "Pods" => {
            let current = object(&[("averageValue", get("currentAverageValue"))]);
            object(&[
                ("metric", Some(&identifier("metricName", "selector"))),
                ("current", Some(&current)),
            ])
        }
        "Object" => {
            let current = object(&[
                ("value", get("currentValue")),
                ("averageValue", get("averageValue")),
            ]);
            object(&[
                ("metric", Some(&identifier("metricName", "selector"))),
                ("current", Some(&current)),
                ("describedObject", get("target")),
            ])
        }
        "External" => {
            let current = object(&[
                ("value", get("currentValue")),
                ("averageValue", get("currentAverageValue")),
            ]);
            object(&[
                ("metric", Some(&identifier("metricName", "metricSelector"))),
                ("current", Some(&current)),
            ])
        }
        _ => return json!({"type": kind}),
    };
    json!({"type": kind, field: converted})
}

/// A condition in v1's field order (the fields are the same).
fn condition_to_v1(condition: &Value) -> Value {
    let get = |name: &str| condition.get(name);
    object(&[
        ("type", get("type")),
        ("status", get("status")),
        ("lastTransitionTime", get("lastTransitionTime")),
        ("reason", get("reason")),
        ("message", get("message")),
    ])
}

/// (JSON name, Go field name) of `HPAScalingRules`, in the internal type's field order.
const RULES_FIELDS: [(&str, &str); 4] = [
    ("stabilizationWindowSeconds", "StabilizationWindowSeconds"),
    ("selectPolicy", "SelectPolicy"),
    ("policies", "Policies"),
    ("tolerance", "Tolerance"),
];

/// (JSON name, Go field name) of `HPAScalingPolicy`.
const POLICY_FIELDS: [(&str, &str); 3] = [
    ("type", "Type"),
    ("value", "Value"),
    ("periodSeconds", "PeriodSeconds"),
];

/// v2's behavior as upstream marshals its internal type: Go field names, nil pointers and
/// slices as `null`, zero values written out.
fn behavior_to_go(behavior: &Value) -> Value {
    let rules = |name: &str| match behavior.get(name).filter(|r| r.is_object()) {
        None => Value::Null,
        Some(rules) => Value::Object(
            RULES_FIELDS
                .iter()
                .map(|(json_name, go_name)| {
                    let value = match (*json_name, rules.get(*json_name)) {
                        ("policies", Some(Value::Array(policies))) => {
                            Value::Array(policies.iter().map(policy_to_go).collect())
                        }
                        (_, Some(value)) => value.clone(),
                        (_, None) => Value::Null,
                    };
                    (go_name.to_string(), value)
                })
                .collect(),
        ),
    };
    json!({"ScaleUp": rules("scaleUp"), "ScaleDown": rules("scaleDown")})
}

fn policy_to_go(policy: &Value) -> Value {
    Value::Object(
        POLICY_FIELDS
            .iter()
            .map(|(json_name, go_name)| {
                let zero = if *json_name == "type" {
                    json!("")
                } else {
                    json!(0)
                };
                let value = policy.get(*json_name).cloned().unwrap_or(zero);
                (go_name.to_string(), value)
            })
            .collect(),
    )
}

/// A field of a Go-marshalled object, matched case-insensitively as `encoding/json` does.
fn go_field<'a>(object: &'a Value, go_name: &str) -> Option<&'a Value> {
    object
        .as_object()?
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(go_name))
        .map(|(_, value)| value)
        .filter(|v| !v.is_null())
}

/// The behavior annotation back in v2's shape; `None` when it sets neither direction.
fn behavior_from_go(annotation: &Value) -> Option<Value> {
    let rules = |go_name: &str| {
        let rules = go_field(annotation, go_name)?;
        let mut out = Map::new();
        for (json_name, go_name) in RULES_FIELDS {
            let Some(value) = go_field(rules, go_name) else {
                continue;
            };
            let value = match (json_name, value) {
                ("policies", Value::Array(policies)) => {
                    Value::Array(policies.iter().map(policy_from_go).collect())
                }
                _ => value.clone(),
            };
            out.insert(json_name.into(), value);
        }
        Some(Value::Object(out))
    };
    let mut behavior = Map::new();
    if let Some(up) = rules("ScaleUp") {
        behavior.insert("scaleUp".into(), up);
    }
    if let Some(down) = rules("ScaleDown") {
        behavior.insert("scaleDown".into(), down);
    }
    (!behavior.is_empty()).then_some(Value::Object(behavior))
}

fn policy_from_go(policy: &Value) -> Value {
    Value::Object(
        POLICY_FIELDS
            .iter()
            .filter_map(|(json_name, go_name)| {
                go_field(policy, go_name).map(|v| (json_name.to_string(), v.clone()))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1(spec: Value, status: Value, annotations: Option<Value>) -> Value {
        let mut metadata = json!({"name": "web", "namespace": "default"});
        if let Some(annotations) = annotations {
            metadata["annotations"] = annotations;
        }
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
               "metadata": metadata, "spec": spec, "status": status})
    }

    fn v2(spec: Value, status: Value) -> Value {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web", "namespace": "default"}, "spec": spec, "status": status})
    }

    const TARGET: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}"#;

    fn target() -> Value {
        serde_json::from_str(TARGET).unwrap()
    }

    /// (case, v1 object, v2 object): each converts to the other (apiVersion is the caller's).
    fn table() -> Vec<(&'static str, Value, Value)> {
        vec![
            (
                "cpu percentage is a cpu Utilization metric",
                v1(
                    json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3,
                           "targetCPUUtilizationPercentage": 80}),
                    json!({"currentReplicas": 2, "desiredReplicas": 2}),
                    None,
                ),
                v2(
                    json!({"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3,
                           "metrics": [cpu_metric(json!(80))]}),
                    json!({"currentReplicas": 2, "desiredReplicas": 2}),
                ),
            ),
            (
                "other metrics, current metrics and conditions ride in annotations",
                v1(
                    json!({"scaleTargetRef": target(), "maxReplicas": 10,
                           "targetCPUUtilizationPercentage": 50}),
                    json!({"currentReplicas": 3, "desiredReplicas": 4,
                           "currentCPUUtilizationPercentage": 70}),
                    Some(json!({
                        "team": "ml",
                        METRIC_SPECS_ANNOTATION: r#"[{"type":"Pods","pods":{"metricName":"qps","targetAverageValue":"100"}},{"type":"Resource","resource":{"name":"memory","targetAverageValue":"1Gi"}}]"#,
                        METRIC_STATUSES_ANNOTATION: r#"[{"type":"Resource","resource":{"name":"cpu","currentAverageUtilization":70,"currentAverageValue":"350m"}}]"#,
                        CONDITIONS_ANNOTATION: r#"[{"type":"AbleToScale","status":"True","lastTransitionTime":"2025-01-01T00:00:00Z","reason":"ReadyForNewScale"}]"#,
                    })),
                ),
                {
                    let mut object = v2(
                        json!({"scaleTargetRef": target(), "maxReplicas": 10, "metrics": [
                            {"type": "Pods", "pods": {"metric": {"name": "qps"},
                                "target": {"type": "AverageValue", "averageValue": "100"}}},
                            {"type": "Resource", "resource": {"name": "memory",
                                "target": {"type": "AverageValue", "averageValue": "1Gi"}}},
                            cpu_metric(json!(50)),
                        ]}),
                        json!({"currentReplicas": 3, "desiredReplicas": 4, "currentMetrics": [
                            {"type": "Resource", "resource": {"name": "cpu",
                                "current": {"averageValue": "350m", "averageUtilization": 70}}}],
                            "conditions": [{"type": "AbleToScale", "status": "True",
                                "lastTransitionTime": "2025-01-01T00:00:00Z", "reason": "ReadyForNewScale"}]}),
                    );
                    object["metadata"]["annotations"] = json!({"team": "ml"});
                    object
                },
            ),
            (
                "behavior rides in an annotation with Go field names",
                v1(
                    json!({"scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 5,
                           "targetCPUUtilizationPercentage": 60}),
                    json!({"currentReplicas": 0, "desiredReplicas": 0}),
                    Some(
                        json!({BEHAVIOR_ANNOTATION: r#"{"ScaleUp":null,"ScaleDown":{"StabilizationWindowSeconds":60,"SelectPolicy":"Min","Policies":[{"Type":"Pods","Value":1,"PeriodSeconds":30}],"Tolerance":null}}"#}),
                    ),
                ),
                v2(
                    json!({"scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 5,
                           "metrics": [cpu_metric(json!(60))],
                           "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60, "selectPolicy": "Min",
                               "policies": [{"type": "Pods", "value": 1, "periodSeconds": 30}]}}}),
                    json!({"currentReplicas": 0, "desiredReplicas": 0}),
                ),
            ),
        ]
    }

    #[test]
    fn converts_both_ways_as_upstream() {
        for (case, v1, v2) in table() {
            assert_eq!(v1_to_v2(v1.clone()), v2, "{case}: to v2");
            let back = v2_to_v1(v2.clone());
            // Annotation texts are compared as JSON: key order inside them is Go's.
            let parse = |object: &Value| {
                let mut object = object.clone();
                if let Some(annotations) = object
                    .pointer_mut("/metadata/annotations")
                    .and_then(Value::as_object_mut)
                {
                    for name in ROUND_TRIP_ANNOTATIONS {
                        if let Some(Value::String(text)) = annotations.get(name) {
                            let parsed: Value = serde_json::from_str(text).unwrap();
                            annotations.insert(name.into(), parsed);
                        }
                    }
                }
                object
            };
            assert_eq!(parse(&back), parse(&v1), "{case}: to v1");
            assert_eq!(v1_to_v2(back), v2, "{case}: round trip");
        }
    }

    #[test]
    fn a_v1_object_without_a_target_gets_the_implicit_80_percent() {
        let object = v1(
            json!({"scaleTargetRef": target(), "maxReplicas": 3}),
            json!({}),
            None,
        );
        let stored = v1_to_v2(object);
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(json!(80))]));
        // Read back, the default is the v1 target it stands for.
        assert_eq!(
            v2_to_v1(stored)["spec"]["targetCPUUtilizationPercentage"],
            80
        );
    }

    #[test]
    fn reading_v1_writes_behavior_with_go_field_names_and_nulls() {
        let stored = v2(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [cpu_metric(json!(80))],
                   "behavior": {"scaleUp": {"policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}),
            json!({"desiredReplicas": 0}),
        );
        let served = v2_to_v1(stored);
        assert_eq!(
            served["metadata"]["annotations"][BEHAVIOR_ANNOTATION],
            r#"{"ScaleUp":{"StabilizationWindowSeconds":null,"SelectPolicy":null,"Policies":[{"Type":"Percent","Value":100,"PeriodSeconds":15}],"Tolerance":null},"ScaleDown":null}"#
        );
        assert!(
            served["metadata"]["annotations"]
                .get(METRIC_SPECS_ANNOTATION)
                .is_none()
        );
    }

    #[test]
    fn stale_round_trip_annotations_are_dropped_and_bad_ones_ignored() {
        let object = v1(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "targetCPUUtilizationPercentage": 70}),
            json!({}),
            Some(json!({METRIC_SPECS_ANNOTATION: "not json", CONDITIONS_ANNOTATION: "[]"})),
        );
        let stored = v1_to_v2(object);
        assert!(stored["metadata"].get("annotations").is_none());
        assert_eq!(stored["spec"]["metrics"], json!([cpu_metric(json!(70))]));
        assert_eq!(stored["status"]["conditions"], json!([]));
    }

    #[test]
    fn object_and_external_metrics_keep_their_targets() {
        let metrics = json!([
            {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                "metric": {"name": "rps"}, "target": {"type": "Value", "value": "10"}}},
            {"type": "External", "external": {"metric": {"name": "queue", "selector": {"matchLabels": {"q": "a"}}},
                "target": {"type": "AverageValue", "averageValue": "30"}}},
        ]);
        let stored = v2(
            json!({"scaleTargetRef": target(), "maxReplicas": 3, "metrics": metrics}),
            json!({}),
        );
        let served = v2_to_v1(stored.clone());
        assert!(
            served["spec"]
                .get("targetCPUUtilizationPercentage")
                .is_none()
        );
        let annotation: Value = serde_json::from_str(
            served["metadata"]["annotations"][METRIC_SPECS_ANNOTATION]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            annotation,
            json!([
                {"type": "Object", "object": {"target": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                    "metricName": "rps", "targetValue": "10"}},
                {"type": "External", "external": {"metricName": "queue",
                    "metricSelector": {"matchLabels": {"q": "a"}}, "targetAverageValue": "30"}},
            ])
        );
        assert_eq!(v1_to_v2(served)["spec"]["metrics"], metrics);
    }
}
