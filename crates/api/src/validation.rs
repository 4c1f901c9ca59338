//! Structural validation of request bodies against the OpenAPI schema of their kind.
//!
//! Checks JSON types, required fields and quantities (rewriting them to canonical form, as
//! upstream stores them), drops `null` fields, and finds unknown fields — which are removed
//! and reported so the caller can apply `fieldValidation` (Strict fails, Warn warns, Ignore
//! drops silently). Knows nothing about storage or HTTP.

use serde_json::Value;

use tessera_model::Quantity;

use crate::error::{Cause, shown};
use crate::patch::Schema;

pub mod kueue;
pub mod kueue_tas;
pub mod network_policy;
pub mod pod_spec;

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
    walk(
        object,
        schema,
        &FieldPath::Root,
        Mode::Root,
        false,
        &mut findings,
    );
    findings
}

/// Where in the document a node is (`spec.containers[0].image`), written out only when a
/// finding names it: most nodes are valid, and building every path cost more than the
/// checks.
#[derive(Clone, Copy)]
pub(crate) enum FieldPath<'a> {
    Root,
    Field(&'a FieldPath<'a>, &'a str),
    Index(&'a FieldPath<'a>, usize),
}

impl std::fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FieldPath::Root => Ok(()),
            FieldPath::Field(FieldPath::Root, name) => f.write_str(name),
            FieldPath::Field(parent, name) => write!(f, "{parent}.{name}"),
            FieldPath::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

impl From<&FieldPath<'_>> for String {
    fn from(path: &FieldPath<'_>) -> String {
        path.to_string()
    }
}

/// What walking a node needs of its schema, read in one pass over the node's keys (a
/// lookup per keyword cost a hash of the keyword each time).
#[derive(Default)]
struct Facts<'s> {
    type_name: Option<&'s str>,
    int_or_string: bool,
    properties: Option<&'s serde_json::Map<String, Value>>,
    additional: Option<&'s Value>,
    preserve_unknown: bool,
    embedded: bool,
    required: Option<&'s Vec<Value>>,
    /// enum, pattern, lengths or numeric bounds.
    constrained: bool,
    /// Size limits, list types or uniqueness.
    counted: bool,
}

impl<'s> Facts<'s> {
    fn of(node: &'s Value) -> Facts<'s> {
        let mut facts = Facts::default();
        let Some(map) = node.as_object() else {
            return facts;
        };
        for (key, value) in map {
            match key.as_str() {
                "type" => facts.type_name = value.as_str(),
                "x-kubernetes-int-or-string" => facts.int_or_string = value == &Value::Bool(true),
                "properties" => facts.properties = value.as_object(),
                "additionalProperties" => facts.additional = Some(value),
                "x-kubernetes-preserve-unknown-fields" => {
                    facts.preserve_unknown = value == &Value::Bool(true);
                }
                "x-kubernetes-embedded-resource" => facts.embedded = value == &Value::Bool(true),
                "required" => facts.required = value.as_array(),
                "enum" | "pattern" | "maxLength" | "minLength" | "minimum" | "maximum"
                | "multipleOf" => facts.constrained = true,
                "maxProperties"
                | "minProperties"
                | "maxItems"
                | "minItems"
                | "x-kubernetes-list-type"
                | "uniqueItems" => facts.counted = true,
                _ => {}
            }
        }
        facts
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

/// Validates an object of a resource: built-in kinds against their definitions, custom kinds
/// against their CRD schema, with `apiVersion`, `kind` and `metadata` checked as every
/// object's are.
pub fn validate_resource(resource: crate::resource::Resource, object: &mut Value) -> Findings {
    let mut findings = Findings::default();
    if resource.is_custom() {
        walk(
            object,
            resource.schema(),
            &FieldPath::Root,
            Mode::CustomRoot,
            true,
            &mut findings,
        );
    } else {
        walk(
            object,
            resource.schema(),
            &FieldPath::Root,
            Mode::Root,
            false,
            &mut findings,
        );
    }
    findings
}

/// Validates (and normalises) what a status write of a custom object takes from its body:
/// its `status` against the schema's `status` property, and its `metadata` when
/// `with_metadata` (the body names it). Upstream validates a custom resource's status update
/// against the status schema alone; the rest of the object is the stored one's, validated
/// when it was stored, and a status write keeps it. An object whose schema has no `status`
/// property, or whose status is null, is validated whole.
pub fn validate_custom_status(
    resource: crate::resource::Resource,
    object: &mut Value,
    with_metadata: bool,
) -> Findings {
    let schema = resource.schema();
    let status_schema = schema
        .resolved()
        .and_then(|node| Facts::of(node).properties)
        .and_then(|properties| properties.get("status"));
    let status_given = object.get("status").is_some_and(|status| !status.is_null());
    let (Some(status_schema), true, Some(map)) =
        (status_schema, status_given, object.as_object_mut())
    else {
        return validate_resource(resource, object);
    };
    let mut findings = Findings::default();
    // (member, its schema, whether defaults and pruning apply, whether it is walked)
    let members = [
        (
            "metadata",
            Schema::definition(OBJECT_META),
            false,
            with_metadata,
        ),
        ("status", Schema::of(status_schema), true, true),
    ];
    for (name, schema, custom, walked) in members {
        if let Some(member) = map.get_mut(name).filter(|_| walked) {
            let path = FieldPath::Field(&FieldPath::Root, name);
            walk(member, schema, &path, Mode::Nested, custom, &mut findings);
        }
    }
    findings
}

/// Where in a document a schema node is being applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The root of a built-in object.
    Root,
    /// The root of a custom object (or an embedded resource): `apiVersion`, `kind` and
    /// `metadata` are implicit.
    CustomRoot,
    /// Anywhere else.
    Nested,
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

fn flag(node: &Value, name: &str) -> bool {
    node.get(name).and_then(Value::as_bool) == Some(true)
}

/// Walks one node; `custom` says whether the schema is a CustomResourceDefinition's (whose
/// `default`s fill absent fields; built-in definitions carry none, upstream defaults
/// built-in kinds in code).
fn walk(
    value: &mut Value,
    schema: Schema<'_>,
    path: &FieldPath<'_>,
    mode: Mode,
    custom: bool,
    findings: &mut Findings,
) {
    let Some(node) = schema.resolved() else {
        return;
    };
    let facts = Facts::of(node);
    if schema.raw().and_then(tessera_model::schema::referenced) == Some(QUANTITY) {
        check_quantity(value, path, findings);
        return;
    }
    if facts.int_or_string {
        if !matches!(type_name(value), "string" | "integer") {
            findings.causes.push(Cause::type_invalid(
                path,
                format!(
                    "got \"{}\", expected \"integer\" or \"string\"",
                    type_name(value)
                ),
            ));
        }
        if facts.constrained {
            check_value_constraints(value, node, path, findings);
        }
        return;
    }
    if let Some(expected) = facts.type_name {
        let actual = type_name(value);
        let matches = actual == expected || (expected == "number" && actual == "integer");
        if !matches {
            findings.causes.push(Cause::type_invalid(
                path,
                format!("got \"{actual}\", expected \"{expected}\""),
            ));
            return;
        }
    }
    if facts.constrained {
        check_value_constraints(value, node, path, findings);
    }
    match value {
        Value::Object(object) => {
            let properties = facts.properties;
            let additional = facts.additional;
            let additional_schema = additional.filter(|a| a.is_object());
            let preserve = facts.preserve_unknown || additional == Some(&Value::Bool(true));
            let free_form = properties.is_none() && additional.is_none();
            let embedded = mode == Mode::CustomRoot || facts.embedded;
            // Defaults fill absent properties.
            if let Some(properties) = properties.filter(|_| custom) {
                for (key, property) in properties {
                    if !object.contains_key(key)
                        && let Some(default) = Schema::of(property)
                            .resolved()
                            .and_then(|p| p.get("default"))
                    {
                        object.insert(key.clone(), default.clone());
                    }
                }
            }
            object.retain(|key, v| {
                !v.is_null()
                    || properties
                        .and_then(|p| p.get(key))
                        .is_some_and(|p| flag(p, "nullable"))
            });
            let mut unknown = Vec::new();
            for (key, child) in object.iter_mut() {
                let child_path = FieldPath::Field(path, key);
                if let Some(property) = properties.and_then(|p| p.get(key)) {
                    if embedded && key == "metadata" {
                        walk(
                            child,
                            Schema::definition(OBJECT_META),
                            &child_path,
                            Mode::Nested,
                            false,
                            findings,
                        );
                    } else if !child.is_null() {
                        walk(
                            child,
                            Schema::of(property),
                            &child_path,
                            Mode::Nested,
                            custom,
                            findings,
                        );
                    }
                } else if embedded && matches!(key.as_str(), "apiVersion" | "kind") {
                    if !child.is_string() {
                        findings.causes.push(Cause::type_invalid(
                            &child_path,
                            format!("got \"{}\", expected \"string\"", type_name(child)),
                        ));
                    }
                } else if embedded && key == "metadata" {
                    walk(
                        child,
                        Schema::definition(OBJECT_META),
                        &child_path,
                        Mode::Nested,
                        false,
                        findings,
                    );
                } else if let Some(additional) = additional_schema {
                    walk(
                        child,
                        Schema::of(additional),
                        &child_path,
                        Mode::Nested,
                        custom,
                        findings,
                    );
                } else if !free_form && !preserve {
                    unknown.push(key.clone());
                    findings.unknown_fields.push(child_path.to_string());
                }
            }
            for key in unknown {
                object.remove(&key);
            }
            if let Some(required) = facts.required {
                for field in required.iter().filter_map(Value::as_str) {
                    let server_filled =
                        mode != Mode::Nested && matches!(field, "metadata" | "apiVersion" | "kind");
                    if !server_filled && !object.contains_key(field) {
                        findings
                            .causes
                            .push(Cause::required(&FieldPath::Field(path, field)));
                    }
                }
            }
            if facts.counted {
                check_count(
                    object.len(),
                    node,
                    ("maxProperties", "minProperties", "properties"),
                    path,
                    findings,
                );
            }
        }
        Value::Array(items) => {
            let item_schema = Schema::of(node).items();
            for (index, item) in items.iter_mut().enumerate() {
                walk(
                    item,
                    item_schema,
                    &FieldPath::Index(path, index),
                    Mode::Nested,
                    custom,
                    findings,
                );
            }
            if facts.counted {
                check_list(items, node, path, findings);
            }
        }
        _ => {}
    }
}

/// enum, pattern, lengths and numeric bounds.
fn check_value_constraints(
    value: &Value,
    node: &Value,
    path: &FieldPath<'_>,
    findings: &mut Findings,
) {
    if let Some(allowed) = node.get("enum").and_then(Value::as_array)
        && !value.is_null()
        && !allowed.contains(value)
    {
        let listed = allowed.iter().map(shown).collect::<Vec<_>>().join(", ");
        findings.causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_string(),
            message: format!(
                "Unsupported value: {}: supported values: {listed}",
                shown(value)
            ),
        });
    }
    match value {
        Value::String(text) => {
            if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
                && !pattern_matches(pattern, text)
            {
                findings.causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should match '{pattern}'"),
                ));
            }
            let length = text.chars().count() as u64;
            if let Some(max) = node.get("maxLength").and_then(Value::as_u64)
                && length > max
            {
                findings.causes.push(Cause {
                    reason: "FieldValueTooLong",
                    field: path.to_string(),
                    message: format!("Too long: may not be more than {max} bytes"),
                });
            }
            if let Some(min) = node.get("minLength").and_then(Value::as_u64)
                && length < min
            {
                findings.causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should be at least {min} chars long"),
                ));
            }
        }
        Value::Number(number) => {
            let Some(x) = number.as_f64() else { return };
            if let Some(min) = node.get("minimum").and_then(Value::as_f64) {
                let exclusive = flag(node, "exclusiveMinimum");
                if x < min || (exclusive && x == min) {
                    let relation = if exclusive {
                        "greater than"
                    } else {
                        "greater than or equal to"
                    };
                    findings.causes.push(Cause::invalid(
                        path,
                        value,
                        format!("{path} in body should be {relation} {min}"),
                    ));
                }
            }
            if let Some(max) = node.get("maximum").and_then(Value::as_f64) {
                let exclusive = flag(node, "exclusiveMaximum");
                if x > max || (exclusive && x == max) {
                    let relation = if exclusive {
                        "less than"
                    } else {
                        "less than or equal to"
                    };
                    findings.causes.push(Cause::invalid(
                        path,
                        value,
                        format!("{path} in body should be {relation} {max}"),
                    ));
                }
            }
            if let Some(step) = node.get("multipleOf").and_then(Value::as_f64)
                && step > 0.0
                && (x / step).fract() != 0.0
            {
                findings.causes.push(Cause::invalid(
                    path,
                    value,
                    format!("{path} in body should be a multiple of {step}"),
                ));
            }
        }
        _ => {}
    }
}

/// A size limit pair (`maxItems`/`minItems` or `maxProperties`/`minProperties`), reported
/// with upstream's messages; `noun` names what is counted in the minimum's message.
fn check_count(
    count: usize,
    node: &Value,
    (max_key, min_key, noun): (&str, &str, &str),
    path: &FieldPath<'_>,
    findings: &mut Findings,
) {
    let count = count as u64;
    if let Some(max) = node.get(max_key).and_then(Value::as_u64)
        && count > max
    {
        findings.causes.push(Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!("Too many: {count}: must have at most {max} items"),
        });
    }
    if let Some(min) = node.get(min_key).and_then(Value::as_u64)
        && count < min
    {
        findings.causes.push(Cause::invalid(
            path,
            &Value::from(count),
            format!("{path} in body should have at least {min} {noun}"),
        ));
    }
}

/// maxItems/minItems and the uniqueness that list types and `uniqueItems` demand.
fn check_list(items: &[Value], node: &Value, path: &FieldPath<'_>, findings: &mut Findings) {
    check_count(
        items.len(),
        node,
        ("maxItems", "minItems", "items"),
        path,
        findings,
    );
    let list_type = node.get("x-kubernetes-list-type").and_then(Value::as_str);
    type Identity = Box<dyn Fn(&Value) -> Value>;
    let identity: Option<Identity> = match list_type {
        Some("set") => Some(Box::new(Value::clone)),
        Some("map") => {
            let keys: Vec<String> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            Some(Box::new(move |item: &Value| {
                Value::Array(
                    keys.iter()
                        .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
                        .collect(),
                )
            }))
        }
        _ if flag(node, "uniqueItems") => Some(Box::new(Value::clone)),
        _ => None,
    };
    if let Some(identity) = identity {
        let mut seen = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let id = identity(item);
            if seen.contains(&id) {
                findings
                    .causes
                    .push(Cause::duplicate(format!("{path}[{index}]"), &id));
            } else {
                seen.push(id);
            }
        }
    }
}

/// Whether a text matches an OpenAPI (RE2-style) pattern; compiled patterns are cached.
fn pattern_matches(pattern: &str, text: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{LazyLock, Mutex};
    static CACHE: LazyLock<Mutex<HashMap<String, Option<regex::Regex>>>> =
        LazyLock::new(|| Mutex::new(HashMap::new()));
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if cache.len() > 4096 {
        cache.clear();
    }
    let compiled = cache
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern).ok());
    // A pattern the engine cannot compile is not held against the value.
    compiled.as_ref().is_none_or(|re| re.is_match(text))
}

fn check_quantity(value: &mut Value, path: &FieldPath<'_>, findings: &mut Findings) {
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
