//! `/openapi/v3`: the index of per-group-version documents and the documents themselves, with
//! the schemas `kubectl explain` reads and the PATCH operations (with a `fieldValidation`
//! parameter) that make `kubectl apply` and `kubectl create` trust server-side validation.
//!
//! Built from the kind catalog and the model's definitions; knows nothing about storage.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use tessera_model::fnv::Fnv64;
use tessera_model::kinds::KindInfo;
use tessera_model::schema;

/// The path of a group-version document, e.g. `api/v1` or `apis/apps/v1`.
pub(crate) fn document_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group-version document lives.
pub fn index(kinds: &[&'static KindInfo]) -> Value {
    let mut paths = Map::new();
    let mut seen = BTreeSet::new();
    for kind in kinds {
        if seen.insert((kind.group, kind.version)) {
            let path = document_path(kind.group, kind.version);
            let url = format!(
                "/openapi/v3/{path}?hash={}",
                hash_of(kinds, kind.group, kind.version)
            );
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

/// The REST path of a kind's collection, with `{namespace}` for namespaced kinds.
pub(crate) fn collection_path(kind: &KindInfo) -> String {
    let base = document_path(kind.group, kind.version);
    if kind.namespaced {
        format!("/{base}/namespaces/{{namespace}}/{}", kind.plural)
    } else {
        format!("/{base}/{}", kind.plural)
    }
}

/// Mixes in the identity of a kind's definition (custom kinds get a new one whenever their
/// CRD changes).
fn mix_kind(hash: &mut Fnv64, kind: &'static KindInfo) {
    hash.mix(&(std::ptr::from_ref::<KindInfo>(kind) as usize).to_le_bytes());
}

/// A hash that changes whenever the document of a group-version would (kubectl caches
/// documents by it): the path, the server version and the identity of each kind's definition.
fn hash_of(kinds: &[&'static KindInfo], group: &str, version: &str) -> String {
    let mut hash = Fnv64::default();
    hash.mix(document_path(group, version).as_bytes());
    hash.mix(env!("CARGO_PKG_VERSION").as_bytes());
    for kind in kinds
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        mix_kind(&mut hash, kind);
    }
    format!("{:016X}", hash.value())
}

/// A value that changes whenever any served kind's definition does: the key under which a
/// server may keep documents built from all kinds (`/openapi/v2`).
pub fn kinds_identity(kinds: &[&'static KindInfo]) -> u64 {
    let mut hash = Fnv64::default();
    for kind in kinds {
        mix_kind(&mut hash, kind);
    }
    hash.value()
}

/// The OpenAPI definition of a custom kind: its CRD schema, with `metadata` as ObjectMeta and
/// the GVK extension clients match on.
pub(crate) fn custom_definition(kind: &KindInfo) -> Option<Value> {
    let custom = kind.custom.as_ref()?;
    let mut schema = custom.schema.clone();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("{}io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", schema::REF_PREFIX)}],
                   "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}),
        );
        properties.entry("apiVersion").or_insert(json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
        properties.entry("kind").or_insert(json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
    }
    schema["x-kubernetes-group-version-kind"] =
        json!([{"group": kind.group, "version": kind.version, "kind": kind.kind}]);
    Some(schema)
}

/// The document for `api/v1` or `apis/<group>/<version>`, if served.
pub fn document(kinds: &[&'static KindInfo], path: &str) -> Option<Value> {
    let (group, version) = match path.trim_matches('/').split('/').collect::<Vec<_>>()[..] {
        ["api", version] => ("", version),
        ["apis", group, version] => (group, version),
        _ => return None,
    };
    let served: Vec<&KindInfo> = kinds
        .iter()
        .copied()
        .filter(|k| k.group == group && k.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut needed = BTreeSet::new();
    let mut components = Map::new();
    for kind in &served {
        match custom_definition(kind) {
            Some(definition) => {
                components.insert(kind.definition.clone(), definition);
                needed.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".to_string());
            }
            None => {
                needed.insert(kind.definition.clone());
            }
        }
        let collection = collection_path(kind);
        let gvk = json!({"group": kind.group, "version": kind.version, "kind": kind.kind});
        let reference = json!({"$ref": format!("{}{}", schema::REF_PREFIX, kind.definition)});
        let body = json!({"content": {"application/json": {"schema": reference}}});
        let field_validation = json!({"name": "fieldValidation", "in": "query",
            "description": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn (default) - Strict",
            "schema": {"type": "string", "uniqueItems": true}});
        let operation = |verb: &str, action: &str| {
            json!({
                "operationId": format!("{verb}{}", kind.kind),
                "parameters": [field_validation.clone()],
                "responses": {"200": body.clone()},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk.clone(),
            })
        };
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": {"operationId": format!("read{}", kind.kind), "responses": {"200": body.clone()},
                        "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk.clone()},
                "put": operation("replace", "put"),
                "patch": operation("patch", "patch"),
            }),
        );
        paths.insert(collection, json!({"post": operation("create", "post")}));
    }
    close_over_references(needed, &mut components, Value::clone);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::KUBERNETES_VERSION},
        "paths": paths,
        "components": {"schemas": components},
    }))
}

/// Adds every model definition reachable from `needed` to `out` (those already there are
/// kept), each rewritten by `form` (the identity for v3, the Swagger 2.0 rewrite for v2).
pub(crate) fn close_over_references(
    needed: BTreeSet<String>,
    out: &mut Map<String, Value>,
    form: impl Fn(&Value) -> Value,
) {
    let mut pending: Vec<String> = needed.into_iter().collect();
    while let Some(name) = pending.pop() {
        if out.contains_key(&name) {
            continue;
        }
        let Some(definition) = schema::definition(&name) else {
            continue;
        };
        collect_references(definition, &mut pending);
        out.insert(name, form(definition));
    }
}

pub(crate) fn collect_references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(schema::REF_PREFIX))
            {
                out.push(name.to_string());
            }
            map.values().for_each(|v| collect_references(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_references(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_every_group_version() {
        let builtin: Vec<&'static KindInfo> = tessera_model::kinds::builtin().iter().collect();
        let index = index(&builtin);
        let paths = index["paths"].as_object().unwrap();
        assert!(paths.contains_key("api/v1"));
        assert!(paths.contains_key("apis/apps/v1"));
        assert!(paths.contains_key("apis/resource.k8s.io/v1"));
        assert!(
            paths["api/v1"]["serverRelativeURL"]
                .as_str()
                .unwrap()
                .starts_with("/openapi/v3/api/v1?hash=")
        );
    }

    #[test]
    fn documents_declare_field_validation_and_close_over_references() {
        let builtin: Vec<&'static KindInfo> = tessera_model::kinds::builtin().iter().collect();
        let doc = document(&builtin, "apis/apps/v1").unwrap();
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["parameters"][0]["name"], "fieldValidation");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
        assert!(schemas.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(document(&builtin, "apis/nope/v1").is_none());
    }
}
