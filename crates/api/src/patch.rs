//! The three patch flavours of the Kubernetes API: JSON Patch (RFC 6902, with `test`), JSON
//! Merge Patch (RFC 7386) and strategic merge patch.
//!
//! Strategic merge follows `k8s.io/apimachinery/pkg/util/strategicpatch`: lists whose field
//! declares `x-kubernetes-patch-strategy: merge` are merged by their
//! `x-kubernetes-patch-merge-key` (or as sets, for primitives), other lists are replaced, and
//! the directives `$patch` (replace, delete, merge), `$setElementOrder/<list>`,
//! `$deleteFromPrimitiveList/<list>` and `$retainKeys` are honoured. Knows schemas only through
//! the [`Schema`] view; knows nothing about storage or HTTP.

use serde_json::{Map, Value};

use tessera_model::schema;

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed.
    #[error("{0}")]
    Malformed(String),
    /// The patch is well-formed but does not apply to the object (e.g. a failed `test`).
    #[error("{0}")]
    DoesNotApply(String),
}

/// A view of an OpenAPI schema node; `None` when the schema is unknown.
#[derive(Debug, Clone, Copy)]
pub struct Schema<'a> {
    node: Option<&'a Value>,
    /// The bundled definition this view is the root of (none for its fields, for custom
    /// schemas and for the unknown schema).
    definition: Option<&'static str>,
}

impl<'a> Schema<'a> {
    /// The schema of a definition (`io.k8s.api.core.v1.Pod`).
    pub fn definition(name: &str) -> Schema<'static> {
        match schema::definitions().get_key_value(name) {
            Some((name, node)) => Schema {
                node: Some(node),
                definition: Some(name.as_str()),
            },
            None => Schema::unknown(),
        }
    }

    /// A schema that knows nothing: every list is replaced.
    pub fn unknown() -> Schema<'static> {
        Schema {
            node: None,
            definition: None,
        }
    }

    /// A view of a raw schema node.
    pub fn of(node: &'a Value) -> Schema<'a> {
        Schema {
            node: Some(node),
            definition: None,
        }
    }

    /// The name of the bundled definition this view is the root of: a schema that never
    /// changes while the process runs, unlike a custom resource's.
    pub fn definition_name(&self) -> Option<&'static str> {
        self.definition
    }

    /// The node, looking through references.
    pub fn resolved(&self) -> Option<&'a Value> {
        let node = self.node?;
        match schema::referenced(node) {
            Some(name) => schema::definition(name),
            None => Some(node),
        }
    }

    /// The node itself, where field extensions such as the patch strategy live.
    pub fn raw(&self) -> Option<&'a Value> {
        self.node
    }

    /// The schema of an object property (or of a map value, for maps).
    pub fn property(&self, name: &str) -> Schema<'a> {
        let resolved = self.resolved();
        let node = resolved
            .and_then(|n| n.get("properties"))
            .and_then(|p| p.get(name))
            .or_else(|| {
                resolved
                    .and_then(|n| n.get("additionalProperties"))
                    .filter(|a| a.is_object())
            });
        Schema {
            node,
            definition: None,
        }
    }

    /// The schema of list items.
    pub fn items(&self) -> Schema<'a> {
        Schema {
            node: self.resolved().and_then(|n| n.get("items")),
            definition: None,
        }
    }

    fn extension(&self, name: &str) -> Option<&'a str> {
        self.node?.get(name)?.as_str()
    }

    fn merges_lists(&self) -> bool {
        self.extension("x-kubernetes-patch-strategy")
            .is_some_and(|s| s.split(',').any(|part| part == "merge"))
    }

    fn merge_key(&self) -> Option<&'a str> {
        self.extension("x-kubernetes-patch-merge-key")
    }
}

/// Applies an RFC 6902 JSON Patch.
pub fn json_patch(target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    let operations: json_patch::Patch = serde_json::from_slice(patch)
        .map_err(|e| PatchError::Malformed(format!("invalid JSON Patch: {e}")))?;
    let mut document = target.clone();
    json_patch::patch(&mut document, &operations)
        .map_err(|e| PatchError::DoesNotApply(e.to_string()))?;
    Ok(document)
}

/// Applies an RFC 7386 JSON Merge Patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "a merge patch must be a JSON object".into(),
        ));
    }
    let mut document = target.clone();
    json_patch::merge(&mut document, patch);
    Ok(document)
}

/// Applies a strategic merge patch guided by a schema.
pub fn strategic_merge(
    target: &Value,
    patch: &Value,
    schema: Schema<'_>,
) -> Result<Value, PatchError> {
    let (Value::Object(original), Value::Object(patch)) = (target, patch) else {
        return Err(PatchError::Malformed(
            "a strategic merge patch must be a JSON object".into(),
        ));
    };
    match merge_map(original.clone(), patch, schema)? {
        Some(merged) => Ok(Value::Object(merged)),
        None => Err(PatchError::DoesNotApply(
            "a strategic merge patch may not delete the whole object".into(),
        )),
    }
}

const PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";

/// Merges `patch` into `original`; `None` means the patch deletes the map.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    schema: Schema<'_>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(PATCH).map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => return Ok(Some(strip_directives(patch))),
        Some(Some("delete")) => return Ok(None),
        Some(other) => {
            return Err(PatchError::Malformed(format!(
                "unknown patch type: {}",
                other.map_or_else(|| patch[PATCH].to_string(), str::to_string)
            )));
        }
    }
    let retain_keys = match patch.get(RETAIN_KEYS) {
        None => None,
        Some(Value::Array(keys)) => Some(
            keys.iter()
                .map(|k| {
                    k.as_str().map(str::to_string).ok_or_else(|| {
                        PatchError::Malformed("$retainKeys must be a list of strings".into())
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(PatchError::Malformed(
                "$retainKeys must be a list of strings".into(),
            ));
        }
    };

    for (key, value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let Value::Array(removals) = value else {
                return Err(PatchError::Malformed(format!("{key} must be a list")));
            };
            if let Some(Value::Array(items)) = original.get_mut(field) {
                items.retain(|item| !removals.contains(item));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        let field_schema = schema.property(key);
        if value.is_null() {
            original.remove(key);
            continue;
        }
        let merged = match value {
            Value::Object(child_patch) => {
                let child = match original.remove(key) {
                    Some(Value::Object(child)) => child,
                    _ => Map::new(),
                };
                merge_map(child, child_patch, field_schema)?.map(Value::Object)
            }
            Value::Array(patch_items) if field_schema.merges_lists() => {
                let items = match original.remove(key) {
                    Some(Value::Array(items)) => items,
                    _ => Vec::new(),
                };
                Some(Value::Array(merge_list(
                    items,
                    patch_items,
                    field_schema.merge_key(),
                    field_schema.items(),
                )?))
            }
            Value::Array(patch_items) => Some(Value::Array(
                patch_items.iter().map(strip_value_directives).collect(),
            )),
            other => Some(other.clone()),
        };
        match merged {
            Some(merged) => {
                original.insert(key.clone(), merged);
            }
            None => {
                original.remove(key);
            }
        }
    }

    for (key, order) in patch {
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            let Value::Array(order) = order else {
                return Err(PatchError::Malformed(format!("{key} must be a list")));
            };
            let merge_key = schema.property(field).merge_key();
            if let Some(Value::Array(items)) = original.get_mut(field) {
                reorder(items, order, merge_key);
            }
        }
    }

    if let Some(keep) = retain_keys {
        original.retain(|key, _| keep.iter().any(|k| k == key));
    }
    Ok(Some(original))
}

fn merge_list(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: Option<&str>,
    item_schema: Schema<'_>,
) -> Result<Vec<Value>, PatchError> {
    let replace = patch
        .iter()
        .any(|item| item.get(PATCH).and_then(Value::as_str) == Some("replace"));
    if replace {
        return Ok(patch
            .iter()
            .filter(|item| item.get(PATCH).is_none())
            .map(strip_value_directives)
            .collect());
    }
    for item in patch {
        match (item, merge_key) {
            (Value::Object(patch_item), Some(merge_key)) => {
                let Some(key_value) = patch_item.get(merge_key) else {
                    return Err(PatchError::Malformed(format!(
                        "map: {} does not contain declared merge key: {merge_key}",
                        item
                    )));
                };
                let position = original
                    .iter()
                    .position(|existing| existing.get(merge_key) == Some(key_value));
                let delete = patch_item.get(PATCH).and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(index), true) => {
                        original.retain(|existing| existing.get(merge_key) != Some(key_value));
                        let _ = index;
                    }
                    (None, true) => {}
                    (Some(index), false) => {
                        let existing = match std::mem::take(&mut original[index]) {
                            Value::Object(map) => map,
                            _ => Map::new(),
                        };
                        match merge_map(existing, patch_item, item_schema)? {
                            Some(merged) => original[index] = Value::Object(merged),
                            None => {
                                original.remove(index);
                            }
                        }
                    }
                    (None, false) => {
                        if let Some(merged) = merge_map(Map::new(), patch_item, item_schema)? {
                            original.push(Value::Object(merged));
                        }
                    }
                }
            }
            (Value::Object(_), None) => {
                return Err(PatchError::Malformed(
                    "merging a list of maps needs a merge key".into(),
                ));
            }
            (primitive, _) => {
                if !original.contains(primitive) {
                    original.push(primitive.clone());
                }
            }
        }
    }
    Ok(original)
}

/// Puts the listed items first, in the listed order; the rest keep their relative order.
fn reorder(items: &mut Vec<Value>, order: &[Value], merge_key: Option<&str>) {
    let identity = |item: &Value| -> Value {
        match merge_key {
            Some(key) => item.get(key).cloned().unwrap_or(Value::Null),
            None => item.clone(),
        }
    };
    let wanted: Vec<Value> = order.iter().map(identity).collect();
    let mut ordered = Vec::with_capacity(items.len());
    let mut rest: Vec<Value> = std::mem::take(items);
    for want in &wanted {
        if let Some(index) = rest.iter().position(|item| &identity(item) == want) {
            ordered.push(rest.remove(index));
        }
    }
    ordered.extend(rest);
    *items = ordered;
}

fn strip_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(key, _)| !key.starts_with('$'))
        .map(|(key, value)| (key.clone(), strip_value_directives(value)))
        .collect()
}

fn strip_value_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_directives(map)),
        Value::Array(items) => Value::Array(items.iter().map(strip_value_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn pod() -> Schema<'static> {
        Schema::definition("io.k8s.api.core.v1.Pod")
    }

    fn deployment() -> Schema<'static> {
        Schema::definition("io.k8s.api.apps.v1.Deployment")
    }

    #[test]
    fn strategic_merge_table() {
        let base = json!({
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {
                "containers": [
                    {"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}],
                     "args": ["--a"]},
                    {"name": "c2", "image": "i2"}
                ],
                "tolerations": [{"key": "t1"}]
            }
        });
        let table: Vec<(&str, Value, Value)> = vec![
            (
                "containers merge by name",
                json!({"spec": {"containers": [{"name": "c1", "image": "new"}]}}),
                json!({"name": "c1", "image": "new", "env": [{"name": "A", "value": "1"}], "args": ["--a"]}),
            ),
            (
                "new container is appended",
                json!({"spec": {"containers": [{"name": "c3", "image": "i3"}]}}),
                json!({"name": "c3", "image": "i3"}),
            ),
            (
                "env merges by name inside a container",
                json!({"spec": {"containers": [{"name": "c1", "env": [{"name": "B", "value": "2"}]}]}}),
                json!({"name": "c1", "image": "i1", "args": ["--a"],
                       "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}),
            ),
            (
                "args (no strategy) are replaced",
                json!({"spec": {"containers": [{"name": "c1", "args": ["--b"]}]}}),
                json!({"name": "c1", "image": "i1", "env": [{"name": "A", "value": "1"}], "args": ["--b"]}),
            ),
        ];
        for (name, patch, first_container) in table {
            let merged = strategic_merge(&base, &patch, pod()).unwrap();
            let containers = merged["spec"]["containers"].as_array().unwrap();
            let found = containers
                .iter()
                .find(|c| c["name"] == first_container["name"])
                .unwrap_or_else(|| panic!("{name}: container missing"));
            assert_eq!(found, &first_container, "{name}");
        }
    }

    #[test]
    fn directives() {
        let base = json!({
            "metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}],
                     "tolerations": [{"key": "t1"}]}
        });
        // null deletes a map key
        let merged =
            strategic_merge(&base, &json!({"metadata": {"labels": {"a": null}}}), pod()).unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"b": "2"}));
        // $patch: delete removes a list element by merge key
        let merged = strategic_merge(
            &base,
            &json!({"spec": {"containers": [{"name": "c1", "$patch": "delete"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "c2", "image": "i2"}])
        );
        // $patch: replace on a list element replaces the whole list
        let merged = strategic_merge(
            &base,
            &json!({"spec": {"containers": [{"name": "c9", "image": "i9"}, {"$patch": "replace"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "c9", "image": "i9"}])
        );
        // $patch: replace on a map replaces the map
        let merged = strategic_merge(
            &base,
            &json!({"metadata": {"labels": {"z": "9", "$patch": "replace"}}}),
            pod(),
        )
        .unwrap();
        assert_eq!(merged["metadata"]["labels"], json!({"z": "9"}));
        // finalizers merge as a set; $deleteFromPrimitiveList removes
        let merged = strategic_merge(
            &base,
            &json!({"metadata": {"finalizers": ["z", "x"], "$deleteFromPrimitiveList/finalizers": ["y"]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(merged["metadata"]["finalizers"], json!(["x", "z"]));
        // $setElementOrder reorders
        let merged = strategic_merge(
            &base,
            &json!({"spec": {"$setElementOrder/containers": [{"name": "c2"}, {"name": "c1"}],
                             "containers": [{"name": "c1", "image": "new"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "c2", "image": "i2"}, {"name": "c1", "image": "new"}])
        );
        // tolerations have no strategy: replaced
        let merged = strategic_merge(
            &base,
            &json!({"spec": {"tolerations": [{"key": "t2"}]}}),
            pod(),
        )
        .unwrap();
        assert_eq!(merged["spec"]["tolerations"], json!([{"key": "t2"}]));
    }

    #[test]
    fn retain_keys_clears_other_fields() {
        let base = json!({"spec": {"strategy": {"type": "RollingUpdate",
                                                 "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        let merged = strategic_merge(&base, &patch, deployment()).unwrap();
        assert_eq!(merged["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn malformed_directives_are_errors() {
        let base = json!({"spec": {}});
        for bad in [
            json!({"spec": {"$patch": "explode"}}),
            json!({"spec": {"$retainKeys": "type"}}),
            json!({"spec": {"containers": [{"image": "no-name"}]}}),
            json!([1, 2]),
        ] {
            assert!(
                matches!(
                    strategic_merge(&base, &bad, pod()),
                    Err(PatchError::Malformed(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn json_patch_supports_test() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let ok = json_patch(
            &doc,
            br#"[{"op":"test","path":"/metadata/finalizers","value":["a"]},
                 {"op":"add","path":"/metadata/finalizers/-","value":"b"}]"#,
        )
        .unwrap();
        assert_eq!(ok["metadata"]["finalizers"], json!(["a", "b"]));
        let failed = json_patch(
            &doc,
            br#"[{"op":"test","path":"/metadata/finalizers","value":[]}]"#,
        );
        assert!(matches!(failed, Err(PatchError::DoesNotApply(_))));
        assert!(matches!(
            json_patch(&doc, b"{}"),
            Err(PatchError::Malformed(_))
        ));
    }

    #[test]
    fn merge_patch_replaces_lists_and_deletes_nulls() {
        let doc = json!({"a": {"b": 1, "c": [1, 2]}, "d": 1});
        let merged = merge_patch(&doc, &json!({"a": {"c": [3], "b": null}})).unwrap();
        assert_eq!(merged, json!({"a": {"c": [3]}, "d": 1}));
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            "[a-z$/]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![
                        Just("$patch".to_string()),
                        Just("$retainKeys".to_string()),
                        Just("$setElementOrder/containers".to_string()),
                        Just("$deleteFromPrimitiveList/finalizers".to_string()),
                        Just("name".to_string()),
                        Just("containers".to_string()),
                        Just("spec".to_string()),
                        Just("metadata".to_string()),
                        "[a-z]{1,4}",
                    ],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// No patch document, however odd, makes the patch code panic.
        #[test]
        fn patches_never_panic(original in json_value(), patch in json_value()) {
            let _ = strategic_merge(&original, &patch, pod());
            let _ = merge_patch(&original, &patch);
            let _ = json_patch(&original, patch.to_string().as_bytes());
        }

        /// A strategic patch with only plain fields acts like a merge patch on maps.
        #[test]
        fn plain_map_patches_agree_with_merge_patch(
            labels in prop::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..5),
            changes in prop::collection::btree_map("[a-z]{1,3}", prop::option::of("[a-z]{0,3}"), 0..5)
        ) {
            let original = json!({"metadata": {"labels": labels}});
            let patch = json!({"metadata": {"labels": changes}});
            let strategic = strategic_merge(&original, &patch, pod()).unwrap();
            let merged = merge_patch(&original, &patch).unwrap();
            prop_assert_eq!(strategic, merged);
        }
    }
}
