//! HorizontalPodAutoscaler defaulting and validation, in either served version (`autoscaling/v1`
//! or `v2`), as upstream's `pkg/apis/autoscaling/v{1,2}/defaults.go` and
//! `pkg/apis/autoscaling/validation` decide them. The fields checked here have the same names
//! and paths in both versions.
//!
//! Knows nothing about conversion (`crate::convert`) or the controller that acts on the
//! objects.

use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use crate::error::Cause;

/// Fills upstream's defaults: `minReplicas` 1 in both versions; in v2 an empty `metrics` is a
/// cpu `Utilization` target of 80%, and a given `behavior` has each direction's missing
/// rules filled (`GenerateHPAScaleUpRules`, `GenerateHPAScaleDownRules`).
pub fn default(version: &str, object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("minReplicas").or_insert(json!(1));
    if version != "v2" {
        return;
    }
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        let scale_up = json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15}]});
        let scale_down = json!({"selectPolicy": "Max", "policies": [
            {"type": "Percent", "value": 100, "periodSeconds": 15}]});
        for (direction, mut defaults) in [("scaleUp", scale_up), ("scaleDown", scale_down)] {
            if let Some(Value::Object(given)) = behavior.get(direction) {
                for (field, value) in given {
                    if !value.is_null() {
                        defaults[field] = value.clone();
                    }
                }
            }
            behavior.insert(direction.into(), defaults);
        }
    }
}

/// Upstream's spec checks: replica bounds and the scale target reference.
pub fn validate(object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec
        .get("maxReplicas")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    if let Some(min) = min
        && min < 1
    {
        causes.push(Cause::invalid(
            "spec.minReplicas",
            &json!(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        causes.push(Cause::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    }
    if let Some(min) = min
        && max < min
    {
        causes.push(Cause::invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    for field in ["kind", "name"] {
        let path = format!("spec.scaleTargetRef.{field}");
        match spec
            .at(&format!("/scaleTargetRef/{field}"))
            .and_then(Value::as_str)
        {
            None | Some("") => causes.push(Cause::required(path)),
            Some(value) => {
                if let Some(problem) =
                    crate::resource::check_name(value, crate::resource::NameRule::PathSegment)
                {
                    causes.push(Cause::invalid(path, &json!(value), problem));
                }
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(spec: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": spec})
    }

    #[test]
    fn spec_checks_follow_upstream() {
        let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
        // (case, spec, expected (field, reason) pairs)
        let table = [
            (
                "valid",
                json!({"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": 3}),
                vec![],
            ),
            (
                "min below one",
                json!({"scaleTargetRef": target, "minReplicas": 0, "maxReplicas": 3}),
                vec![("spec.minReplicas", "FieldValueInvalid")],
            ),
            (
                "max below min",
                json!({"scaleTargetRef": target, "minReplicas": 4, "maxReplicas": 3}),
                vec![("spec.maxReplicas", "FieldValueInvalid")],
            ),
            (
                "max zero",
                json!({"scaleTargetRef": target, "maxReplicas": 0}),
                vec![("spec.maxReplicas", "FieldValueInvalid")],
            ),
            (
                "target without kind and name",
                json!({"scaleTargetRef": {"apiVersion": "apps/v1"}, "maxReplicas": 3}),
                vec![
                    ("spec.scaleTargetRef.kind", "FieldValueRequired"),
                    ("spec.scaleTargetRef.name", "FieldValueRequired"),
                ],
            ),
            (
                "target name with a slash",
                json!({"scaleTargetRef": {"kind": "Deployment", "name": "a/b"}, "maxReplicas": 3}),
                vec![("spec.scaleTargetRef.name", "FieldValueInvalid")],
            ),
        ];
        for (case, spec, expected) in table {
            let found: Vec<(String, &str)> = validate(&hpa(spec))
                .into_iter()
                .map(|c| (c.field, c.reason))
                .collect();
            let expected: Vec<(String, &str)> = expected
                .into_iter()
                .map(|(f, r)| (f.to_string(), r))
                .collect();
            assert_eq!(found, expected, "{case}");
        }
        let messages: Vec<String> = validate(&hpa(
            json!({"scaleTargetRef": target, "minReplicas": 4, "maxReplicas": 3}),
        ))
        .into_iter()
        .map(|c| c.message)
        .collect();
        assert!(
            messages[0].contains("must be greater than or equal to `minReplicas`"),
            "{messages:?}"
        );
    }

    #[test]
    fn defaults_follow_the_version() {
        let mut v1 = hpa(json!({"maxReplicas": 3}));
        default("v1", &mut v1);
        assert_eq!(v1["spec"], json!({"maxReplicas": 3, "minReplicas": 1}));

        let mut v2 = hpa(json!({"maxReplicas": 3, "minReplicas": 2,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}));
        default("v2", &mut v2);
        assert_eq!(v2["spec"]["minReplicas"], 2);
        assert_eq!(
            v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(
            v2["spec"]["behavior"]["scaleDown"],
            json!({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
                   "stabilizationWindowSeconds": 60})
        );
        assert_eq!(
            v2["spec"]["behavior"]["scaleUp"]["policies"][0],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
    }
}
