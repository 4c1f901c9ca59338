//! OpenAPI v3 definitions of every built-in kind, with the Kubernetes extensions clients rely on.
//!
//! The schemas and descriptions come from k8s-openapi (generated from upstream's OpenAPI);
//! this module adds `x-kubernetes-group-version-kind` to each served kind and the
//! strategic-merge-patch extensions (`x-kubernetes-patch-merge-key`,
//! `x-kubernetes-patch-strategy`) from upstream's struct tags, and writes references the way
//! upstream's `/openapi/v3` documents do (`allOf` around a `$ref` that carries a description).

use std::sync::LazyLock;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::kinds;

/// The reference prefix of definitions.
pub const REF_PREFIX: &str = "#/components/schemas/";

static DEFINITIONS: LazyLock<Map<String, Value>> = LazyLock::new(build);

/// All definitions, by name (`io.k8s.api.core.v1.Pod`).
pub fn definitions() -> &'static Map<String, Value> {
    &DEFINITIONS
}

/// One definition by name.
pub fn definition(name: &str) -> Option<&'static Value> {
    DEFINITIONS.get(name)
}

/// The definition name a schema refers to, looking through an `allOf` wrapper.
pub fn referenced(schema: &Value) -> Option<&str> {
    let reference = schema.get("$ref").or_else(|| {
        schema
            .get("allOf")
            .and_then(|all| all.get(0))
            .and_then(|first| first.get("$ref"))
    })?;
    reference.as_str()?.strip_prefix(REF_PREFIX)
}

fn build() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    for kind in kinds::builtin() {
        if let Some(schema) = kind.schema {
            schema(&mut generator);
        }
    }
    let mut definitions = generator.take_definitions(true);
    for value in definitions.values_mut() {
        wrap_references(value);
    }
    for kind in kinds::builtin() {
        if let Some(Value::Object(definition)) = definitions.get_mut(&kind.definition) {
            definition.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": kind.group, "version": kind.version, "kind": kind.kind}]),
            );
        }
    }
    add_patch_strategies(&mut definitions);
    // `JSON` holds any JSON value upstream, not only objects.
    if let Some(Value::Object(any)) =
        definitions.get_mut("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON")
    {
        any.remove("type");
        any.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    definitions
}

/// `{"$ref": R, "description": D}` becomes `{"allOf": [{"$ref": R}], "description": D}`, as
/// OpenAPI 3.0 ignores siblings of `$ref`.
fn wrap_references(value: &mut Value) {
    match value {
        Value::Object(object) => {
            // Only a string `$ref` is a reference: JSONSchemaProps has a property named `$ref`.
            if object.len() > 1
                && object.get("$ref").is_some_and(Value::is_string)
                && let Some(reference) = object.remove("$ref")
            {
                object.insert("allOf".into(), json!([{ "$ref": reference }]));
            }
            for child in object.values_mut() {
                wrap_references(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(wrap_references),
        _ => {}
    }
}

fn add_patch_strategies(definitions: &mut Map<String, Value>) {
    static KEYS: &str = include_str!("../data/patch-merge-keys.json");
    let Ok(Value::Object(mut table)) = serde_json::from_str::<Value>(KEYS) else {
        return;
    };
    let Some(Value::Object(types)) = table.remove("types") else {
        return;
    };
    for (type_name, fields) in types {
        let Some(properties) = definitions
            .get_mut(&type_name)
            .and_then(|d| d.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        let Value::Object(fields) = fields else {
            continue;
        };
        for (field, strategy) in fields {
            let Some(Value::Object(property)) = properties.get_mut(&field) else {
                continue;
            };
            if let Some(key) = strategy.get("patchMergeKey") {
                property.insert("x-kubernetes-patch-merge-key".into(), key.clone());
            }
            if let Some(value) = strategy.get("patchStrategy") {
                property.insert("x-kubernetes-patch-strategy".into(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_kinds_carry_their_gvk() {
        let pod = definition("io.k8s.api.core.v1.Pod").unwrap();
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "Pod"}])
        );
        assert!(
            pod["description"]
                .as_str()
                .unwrap()
                .starts_with("Pod is a collection")
        );
    }

    #[test]
    fn merge_keys_are_attached_to_list_fields() {
        let spec = definition("io.k8s.api.core.v1.PodSpec").unwrap();
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            referenced(&containers["items"]),
            Some("io.k8s.api.core.v1.Container")
        );
        let volumes = &spec["properties"]["volumes"];
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
    }

    #[test]
    fn properties_named_ref_are_not_references() {
        let props =
            definition("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps")
                .unwrap();
        assert!(
            props["properties"]["$ref"]["type"].is_string(),
            "{}",
            props["properties"]["$ref"]
        );
    }

    #[test]
    fn references_with_descriptions_are_wrapped() {
        let pod = definition("io.k8s.api.core.v1.Pod").unwrap();
        let spec = &pod["properties"]["spec"];
        assert!(spec.get("$ref").is_none());
        assert_eq!(referenced(spec), Some("io.k8s.api.core.v1.PodSpec"));
        assert!(spec["description"].is_string());
    }
}
