//! CRD validation rules (`x-kubernetes-validations`): CEL expressions over `self` (and
//! `oldSelf` for transition rules on update), evaluated with the `cel` crate wherever a schema
//! node declares them.
//!
//! A rule that does not hold becomes a field error with the rule's `message` (or
//! `failed rule: <rule>`), its `reason` and `fieldPath`. Transition rules (those naming
//! `oldSelf`) are skipped when there is no old value. A rule using a Kubernetes CEL library
//! function the interpreter lacks is skipped rather than failing valid objects. Knows nothing
//! about storage or HTTP.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::Value;

use crate::error::Cause;
use crate::patch::Schema;

static PROGRAMS: LazyLock<Mutex<HashMap<String, Option<Arc<cel::Program>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn compile(rule: &str) -> Option<Arc<cel::Program>> {
    let mut programs = PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    if programs.len() > 4096 {
        programs.clear();
    }
    programs
        .entry(rule.to_string())
        .or_insert_with(|| cel::Program::compile(rule).ok().map(Arc::new))
        .clone()
}

/// Whether a rule compiles (for validating CRDs).
pub fn compiles(rule: &str) -> Result<(), String> {
    cel::Program::compile(rule)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn type_word(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Evaluates every rule in the schema against an object (and its previous version).
pub fn check(schema: Schema<'_>, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    walk(schema, object, old, "", &mut causes);
    causes
}

fn walk(
    schema: Schema<'_>,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(node) = schema.resolved() else {
        return;
    };
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for rule in rules {
            evaluate(rule, value, old, path, causes);
        }
    }
    match value {
        Value::Object(map) => {
            let properties = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                let child_schema = match properties.and_then(|p| p.get(key)) {
                    Some(property) => Schema::of(property),
                    None => match additional {
                        Some(additional) => Schema::of(additional),
                        None => continue,
                    },
                };
                let old_child = old.and_then(|o| o.get(key));
                walk(child_schema, child, old_child, &join(path, key), causes);
            }
        }
        Value::Array(items) => {
            let item_schema = Schema::of(node).items();
            let keys: Vec<String> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            let old_items = old.and_then(Value::as_array);
            for (index, item) in items.iter().enumerate() {
                // Old list items correlate only in map lists, by their keys.
                let old_item = if keys.is_empty() {
                    None
                } else {
                    old_items.and_then(|olds| {
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                    })
                };
                walk(
                    item_schema,
                    item,
                    old_item,
                    &format!("{path}[{index}]"),
                    causes,
                );
            }
        }
        _ => {}
    }
}

fn evaluate(rule: &Value, value: &Value, old: Option<&Value>, path: &str, causes: &mut Vec<Cause>) {
    let Some(text) = rule.get("rule").and_then(Value::as_str) else {
        return;
    };
    let Some(program) = compile(text) else { return };
    let references = program.references();
    let transition = references.has_variable("oldSelf");
    if transition && old.is_none() {
        return;
    }
    let mut context = cel::Context::default();
    let Ok(self_value) = cel::to_value(value) else {
        return;
    };
    context.add_variable_from_value("self", self_value);
    if let Some(old) = old
        && let Ok(old_value) = cel::to_value(old)
    {
        context.add_variable_from_value("oldSelf", old_value);
    }
    let holds = match program.execute(&context) {
        Ok(cel::Value::Bool(holds)) => holds,
        Ok(_) => false,
        Err(
            cel::ExecutionError::UndeclaredReference(_)
            | cel::ExecutionError::NotSupportedAsMethod { .. },
        ) => {
            tracing::debug!(
                rule = text,
                "skipping a validation rule that uses an unsupported CEL function"
            );
            return;
        }
        Err(error) => {
            causes.push(Cause::invalid(
                path,
                &Value::String(type_word(value).into()),
                format!("{text}: {error}"),
            ));
            return;
        }
    };
    if holds {
        return;
    }
    let message = rule
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| format!("failed rule: {text}"), str::to_string);
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(extra) => format!("{path}{extra}").trim_start_matches('.').to_string(),
        None => path.to_string(),
    };
    let reason = rule.get("reason").and_then(Value::as_str);
    causes.push(match reason {
        Some("FieldValueForbidden") => Cause::forbidden(field, message),
        Some("FieldValueRequired") => Cause {
            reason: "FieldValueRequired",
            field,
            message: format!("Required value: {message}"),
        },
        Some("FieldValueDuplicate") => Cause {
            reason: "FieldValueDuplicate",
            field,
            message: format!("Duplicate value: {message}"),
        },
        _ => Cause::invalid(field, &Value::String(type_word(value).into()), message),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "has(self.minCount) ? self.minCount <= self.count : true", "message": "minCount must not exceed count"},
            {"rule": "self.tags.all(t, t in ['a', 'b'])", "fieldPath": ".tags", "reason": "FieldValueForbidden"},
            {"rule": "self.count >= oldSelf.count", "message": "count may not decrease"},
            {"rule": "self.name.startsWith('x') || self.name.quantityLike()"}
        ],
        "properties": {
            "count": {"type": "integer"}, "minCount": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "immutable": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]}
        }}}})
    }

    #[test]
    fn rules_hold_or_name_their_field() {
        let schema_value = schema();
        let schema = Schema::of(&schema_value);
        let ok = json!({"spec": {"count": 3, "minCount": 2, "tags": ["a"], "name": "xy", "immutable": "v"}});
        assert_eq!(check(schema, &ok, None), vec![]);
        let bad = json!({"spec": {"count": 1, "minCount": 2, "tags": ["c"], "name": "xy"}});
        let causes = check(schema, &bad, None);
        let summary: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "spec",
                    "Invalid value: \"object\": minCount must not exceed count"
                ),
                (
                    "spec.tags",
                    "Forbidden: failed rule: self.tags.all(t, t in ['a', 'b'])"
                ),
            ]
        );
    }

    #[test]
    fn transition_rules_compare_with_the_old_object() {
        let schema_value = schema();
        let schema = Schema::of(&schema_value);
        let old = json!({"spec": {"count": 5, "tags": [], "name": "x", "immutable": "v1"}});
        let new = json!({"spec": {"count": 4, "tags": [], "name": "x", "immutable": "v2"}});
        let messages: Vec<String> = check(schema, &new, Some(&old))
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec: Invalid value: \"object\": count may not decrease",
                "spec.immutable: Invalid value: \"string\": Value is immutable",
            ]
        );
    }
}
