//! Structural validation of request bodies against the OpenAPI schema of their kind.
//!
//! Checks JSON types, required fields and quantities (rewriting them to canonical form, as
//! upstream stores them), drops `null` fields, and finds unknown fields — which are removed
//! and reported so the caller can apply `fieldValidation` (Strict fails, Warn warns, Ignore
//! drops silently). Knows nothing about storage or HTTP.

use serde_json::Value;

use tessera_model::Quantity;

use crate::error::Cause;
use crate::patch::Schema;

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// What validation found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Errors that make the object invalid.
    pub causes: Vec<Cause>,
    /// Paths of unknown fields (already removed from the object).
    pub unknown_fields: Vec<String>,
}

/// Validates (and normalises) an object in place against a schema.
pub fn validate(object: &mut Value, schema: Schema<'_>) -> Findings {
    let mut findings = Findings::default();
    walk(object, schema, "", true, &mut findings);
    findings
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(value: &mut Value, schema: Schema<'_>, path: &str, root: bool, findings: &mut Findings) {
    let Some(node) = schema.resolved() else {
        return;
    };
    if schema.raw().and_then(tessera_model::schema::referenced) == Some(QUANTITY) {
        check_quantity(value, path, findings);
        return;
    }
    if node
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        if !matches!(type_name(value), "string" | "integer") {
            findings.causes.push(Cause::type_invalid(
                path,
                format!(
                    "got \"{}\", expected \"integer\" or \"string\"",
                    type_name(value)
                ),
            ));
        }
        return;
    }
    let Some(expected) = node.get("type").and_then(Value::as_str) else {
        return;
    };
    let actual = type_name(value);
    let matches = actual == expected || (expected == "number" && actual == "integer");
    if !matches {
        findings.causes.push(Cause::type_invalid(
            path,
            format!("got \"{actual}\", expected \"{expected}\""),
        ));
        return;
    }
    match value {
        Value::Object(object) => {
            let properties = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            let free_form = properties.is_none() && additional.is_none();
            object.retain(|_, v| !v.is_null());
            let mut unknown = Vec::new();
            for (key, child) in object.iter_mut() {
                let child_path = join(path, key);
                if let Some(property) = properties.and_then(|p| p.get(key)) {
                    walk(child, Schema::of(property), &child_path, false, findings);
                } else if let Some(additional) = additional {
                    walk(child, Schema::of(additional), &child_path, false, findings);
                } else if !free_form {
                    unknown.push(key.clone());
                    findings.unknown_fields.push(child_path);
                }
            }
            for key in unknown {
                object.remove(&key);
            }
            if let Some(required) = node.get("required").and_then(Value::as_array) {
                for field in required.iter().filter_map(Value::as_str) {
                    let server_filled = root && matches!(field, "metadata" | "apiVersion" | "kind");
                    if !server_filled && !object.contains_key(field) {
                        findings.causes.push(Cause::required(join(path, field)));
                    }
                }
            }
        }
        Value::Array(items) => {
            let item_schema = Schema::of(node).items();
            for (index, item) in items.iter_mut().enumerate() {
                walk(
                    item,
                    item_schema,
                    &format!("{path}[{index}]"),
                    false,
                    findings,
                );
            }
        }
        _ => {}
    }
}

fn check_quantity(value: &mut Value, path: &str, findings: &mut Findings) {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        other => {
            findings.causes.push(Cause::type_invalid(
                path,
                format!("got \"{}\", expected a quantity", type_name(other)),
            ));
            return;
        }
    };
    match text.parse::<Quantity>() {
        Ok(quantity) => *value = Value::String(quantity.to_canonical()),
        Err(error) => findings
            .causes
            .push(Cause::invalid(path, value, error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod_schema() -> Schema<'static> {
        Schema::definition("io.k8s.api.core.v1.Pod")
    }

    #[test]
    fn finds_unknown_fields_and_removes_them() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i", "imagee": "typo"}], "foo": 1}});
        let findings = validate(&mut pod, pod_schema());
        assert!(findings.causes.is_empty(), "{:?}", findings.causes);
        assert_eq!(
            findings.unknown_fields,
            ["spec.containers[0].imagee", "spec.foo"]
        );
        assert!(pod["spec"].get("foo").is_none());
    }

    #[test]
    fn reports_types_required_fields_and_bad_quantities() {
        let mut pod = json!({"metadata": {"name": "p", "labels": {"a": 1}},
            "spec": {"containers": [{"image": "i", "resources": {"limits": {"cpu": "2x"},
                                                                  "requests": {"memory": "1.5Gi"}}}]}});
        let findings = validate(&mut pod, pod_schema());
        let fields: Vec<_> = findings
            .causes
            .iter()
            .map(|c| (c.reason, c.field.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("FieldValueTypeInvalid", "metadata.labels.a"),
                (
                    "FieldValueInvalid",
                    "spec.containers[0].resources.limits.cpu"
                ),
                ("FieldValueRequired", "spec.containers[0].name"),
            ]
        );
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["memory"],
            "1536Mi"
        );
    }

    #[test]
    fn nulls_are_dropped_and_int_or_string_accepts_both() {
        let mut deployment = json!({"metadata": {"name": "d", "labels": null},
            "spec": {"selector": {}, "template": {}, "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}});
        let findings = validate(
            &mut deployment,
            Schema::definition("io.k8s.api.apps.v1.Deployment"),
        );
        assert!(findings.causes.is_empty(), "{:?}", findings.causes);
        assert!(deployment["metadata"].get("labels").is_none());
    }
}
