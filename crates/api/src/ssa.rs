//! Server-side apply and field ownership (`metadata.managedFields`), after upstream's
//! structured-merge-diff: every field of an object is owned by the managers that set it;
//! an apply merges the applied configuration (lists of maps by their keys, sets by value,
//! other lists atomically), conflicts when it changes a field another manager owns unless
//! forced, and removes fields the manager applied before but no longer does (when nobody else
//! owns them). Ordinary writes make their manager the owner of the fields they change.
//!
//! Pure over JSON values and schemas; knows nothing about storage or HTTP.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::patch::Schema;

/// One element of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// A field of a map (`f:name`).
    Field(String),
    /// A list item identified by its key fields (`k:{"name":"c"}`).
    Key(String),
    /// A set member (`v:"value"`).
    Value(String),
}

/// A field path.
pub type Path = Vec<Element>;

/// Fields the server sets and nobody owns.
fn ignored(path: &[Element]) -> bool {
    match path {
        [Element::Field(f)] => matches!(f.as_str(), "apiVersion" | "kind" | "status"),
        [Element::Field(m), Element::Field(f), ..] if m == "metadata" => matches!(
            f.as_str(),
            "name"
                | "namespace"
                | "uid"
                | "resourceVersion"
                | "generation"
                | "creationTimestamp"
                | "managedFields"
                | "deletionTimestamp"
                | "deletionGracePeriodSeconds"
                | "selfLink"
        ),
        _ => false,
    }
}

/// How a list field merges: by key fields, as a set, or atomically.
fn list_keys(schema: Schema<'_>) -> Option<Vec<String>> {
    let raw = schema.raw()?;
    let resolved = schema.resolved().unwrap_or(raw);
    for node in [raw, resolved] {
        if node
            .get("x-kubernetes-list-map-keys")
            .is_some_and(Value::is_array)
        {
            return Some(tessera_model::json::strings_at(
                node,
                "/x-kubernetes-list-map-keys",
            ));
        }
    }
    let merges = raw
        .get("x-kubernetes-patch-strategy")
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(',').any(|p| p == "merge"));
    let key = raw
        .get("x-kubernetes-patch-merge-key")
        .and_then(Value::as_str);
    match (merges, key) {
        (true, Some(key)) => Some(vec![key.to_string()]),
        _ => None,
    }
}

fn is_set(schema: Schema<'_>) -> bool {
    let raw = schema.raw();
    let list_type = raw
        .and_then(|r| r.get("x-kubernetes-list-type"))
        .and_then(Value::as_str);
    let merge_primitives = raw
        .and_then(|r| r.get("x-kubernetes-patch-strategy"))
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(',').any(|p| p == "merge"))
        && raw
            .and_then(|r| r.get("x-kubernetes-patch-merge-key"))
            .is_none();
    list_type == Some("set") || merge_primitives
}

fn key_of(item: &Value, keys: &[String]) -> String {
    let mut map = Map::new();
    for key in keys {
        if let Some(value) = item.get(key) {
            map.insert(key.clone(), value.clone());
        }
    }
    Value::Object(map).to_string()
}

/// Every field path set in an object.
pub fn fields(object: &Value, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut set = BTreeSet::new();
    collect(object, schema, &mut Vec::new(), &mut set);
    set
}

/// The field set of an object's `.status`: what writes through the status subresource own.
fn status_fields(object: &Value, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut set = BTreeSet::new();
    if let Some(status) = object.get("status") {
        let mut path = vec![Element::Field("status".into())];
        collect(status, schema.property("status"), &mut path, &mut set);
    }
    set
}

fn in_status(path: &[Element]) -> bool {
    matches!(path.first(), Some(Element::Field(f)) if f == "status")
}

fn collect(value: &Value, schema: Schema<'_>, path: &mut Path, out: &mut BTreeSet<Path>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(Element::Field(key.clone()));
                if !ignored(path) {
                    collect(child, schema.property(key), path, out);
                }
                path.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(keys) = list_keys(schema) {
                let item_schema = schema.items();
                for item in items {
                    path.push(Element::Key(key_of(item, &keys)));
                    out.insert(path.clone());
                    collect(item, item_schema, path, out);
                    path.pop();
                }
            } else if is_set(schema) {
                for item in items {
                    path.push(Element::Value(item.to_string()));
                    out.insert(path.clone());
                    path.pop();
                }
            } else {
                out.insert(path.clone());
            }
        }
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The FieldsV1 form of every field `object` sets: what [`to_fields_v1`] gives for
/// [`fields`], built in one walk without the path set (what a create records).
pub fn fields_v1_of(object: &Value, schema: Schema<'_>) -> Value {
    let mut root = Map::new();
    fields_v1_into(object, schema, &mut Vec::new(), &mut root);
    Value::Object(root)
}

/// Adds what `value` (at `path`) sets to `node`, its FieldsV1 map, keys sorted as upstream
/// writes them; false when `value` sets nothing (a map of server-set fields only).
fn fields_v1_into(
    value: &Value,
    schema: Schema<'_>,
    path: &mut Path,
    node: &mut Map<String, Value>,
) -> bool {
    let item_node = |node: &mut Map<String, Value>, element: String| -> Map<String, Value> {
        match node.remove(&element) {
            Some(Value::Object(existing)) => existing,
            _ => Map::from_iter([(".".to_string(), json!({}))]),
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(Element::Field(key.clone()));
                if !ignored(path) {
                    let mut child_node = Map::new();
                    if fields_v1_into(child, schema.property(key), path, &mut child_node) {
                        node.insert(format!("f:{key}"), Value::Object(child_node));
                    }
                }
                path.pop();
            }
            node.sort_keys();
            !node.is_empty()
        }
        Value::Array(items) if !items.is_empty() => {
            if let Some(keys) = list_keys(schema) {
                let item_schema = schema.items();
                for item in items {
                    let element = format!("k:{}", key_of(item, &keys));
                    let mut child_node = item_node(node, element.clone());
                    path.push(Element::Key(String::new()));
                    fields_v1_into(item, item_schema, path, &mut child_node);
                    path.pop();
                    child_node.sort_keys();
                    node.insert(element, Value::Object(child_node));
                }
            } else if is_set(schema) {
                for item in items {
                    let element = format!("v:{item}");
                    let child_node = item_node(node, element.clone());
                    node.insert(element, Value::Object(child_node));
                }
            }
            node.sort_keys();
            true
        }
        _ => true,
    }
}

/// The value at a path, if present.
pub fn value_at<'a>(object: &'a Value, path: &[Element], schema: Schema<'_>) -> Option<&'a Value> {
    let mut current = object;
    let mut schema = schema;
    for element in path {
        match element {
            Element::Field(name) => {
                current = current.get(name)?;
                schema = schema.property(name);
            }
            Element::Key(key) => {
                let keys = list_keys(schema)?;
                current = current
                    .as_array()?
                    .iter()
                    .find(|item| key_of(item, &keys) == *key)?;
                schema = schema.items();
            }
            Element::Value(value) => {
                current = current
                    .as_array()?
                    .iter()
                    .find(|item| is_set_value(item, value))?;
            }
        }
    }
    Some(current)
}

/// Removes the field at a path (a map field, a keyed list item or a set member).
fn remove_at(object: &mut Value, path: &[Element], schema: Schema<'_>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = object;
    let mut schema = schema;
    for element in parents {
        let next = match element {
            Element::Field(name) => {
                schema = schema.property(name);
                current.get_mut(name.as_str())
            }
            Element::Key(key) => {
                let Some(keys) = list_keys(schema) else {
                    return;
                };
                schema = schema.items();
                current
                    .as_array_mut()
                    .and_then(|items| items.iter_mut().find(|item| key_of(item, &keys) == *key))
            }
            Element::Value(_) => return,
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    match last {
        Element::Field(name) => {
            if let Some(map) = current.as_object_mut() {
                map.remove(name);
            }
        }
        Element::Key(key) => {
            if let (Some(keys), Some(items)) = (list_keys(schema), current.as_array_mut()) {
                items.retain(|item| key_of(item, &keys) != *key);
            }
        }
        Element::Value(value) => {
            if let Some(items) = current.as_array_mut() {
                items.retain(|item| !is_set_value(item, value));
            }
        }
    }
}

/// Merges an applied configuration into a live object.
pub fn merge(live: &Value, applied: &Value, schema: Schema<'_>) -> Value {
    match (live, applied) {
        (Value::Object(live_map), Value::Object(applied_map)) => {
            let mut merged = live_map.clone();
            for (key, value) in applied_map {
                let next = match merged.get(key) {
                    Some(existing) => merge(existing, value, schema.property(key)),
                    None => value.clone(),
                };
                merged.insert(key.clone(), next);
            }
            Value::Object(merged)
        }
        (Value::Array(live_items), Value::Array(applied_items)) => {
            if let Some(keys) = list_keys(schema) {
                let mut merged = live_items.clone();
                for item in applied_items {
                    let key = key_of(item, &keys);
                    match merged
                        .iter()
                        .position(|existing| key_of(existing, &keys) == key)
                    {
                        Some(index) => merged[index] = merge(&merged[index], item, schema.items()),
                        None => merged.push(item.clone()),
                    }
                }
                Value::Array(merged)
            } else if is_set(schema) {
                let mut merged = live_items.clone();
                for item in applied_items {
                    if !merged.contains(item) {
                        merged.push(item.clone());
                    }
                }
                Value::Array(merged)
            } else {
                applied.clone()
            }
        }
        _ => applied.clone(),
    }
}

/// A manager's ownership, as one `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Managed {
    /// The manager's name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The API version the fields were set through.
    pub api_version: String,
    /// When the entry last changed.
    pub time: String,
    /// Whether it concerns the status subresource.
    pub subresource: Option<String>,
    /// The owned fields.
    pub fields: BTreeSet<Path>,
}

fn encode_element(element: &Element) -> String {
    match element {
        Element::Field(name) => format!("f:{name}"),
        Element::Key(key) => format!("k:{key}"),
        Element::Value(value) => format!("v:{value}"),
    }
}

fn decode_element(text: &str) -> Option<Element> {
    let (kind, rest) = text.split_once(':')?;
    Some(match kind {
        "f" => Element::Field(rest.to_string()),
        "k" => Element::Key(rest.to_string()),
        "v" => Element::Value(rest.to_string()),
        _ => return None,
    })
}

/// The FieldsV1 form of a field set.
pub fn to_fields_v1(set: &BTreeSet<Path>) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for (index, element) in path.iter().enumerate() {
            let entry = node
                .entry(encode_element(element))
                .or_insert_with(|| json!({}));
            let Value::Object(child) = entry else { break };
            node = child;
            if index == path.len() - 1 && !matches!(element, Element::Field(_)) {
                node.insert(".".into(), json!({}));
            }
        }
    }
    Value::Object(root)
}

/// Whether a set member renders as the `v:` element text.
fn is_set_value(item: &Value, text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed == *item)
}

/// A field set from its FieldsV1 form.
pub fn from_fields_v1(value: &Value) -> BTreeSet<Path> {
    fn walk(value: &Value, path: &mut Path, out: &mut BTreeSet<Path>) {
        let Some(map) = value.as_object() else { return };
        if (map.is_empty() || map.contains_key(".")) && !path.is_empty() {
            out.insert(path.clone());
        }
        for (key, child) in map {
            if key == "." {
                continue;
            }
            if let Some(element) = decode_element(key) {
                path.push(element);
                walk(child, path, out);
                path.pop();
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// The `managedFields` of an object.
pub fn managed(object: &Value) -> Vec<Managed> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Managed {
                    manager: e
                        .get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    operation: e
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("Update")
                        .to_string(),
                    api_version: e
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    time: e
                        .get("time")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    subresource: e
                        .get("subresource")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `managedFields` into an object (entries without fields are dropped).
pub fn set_managed(object: &mut Value, entries: &[Managed]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| managed_entry(e, to_fields_v1(&e.fields)))
        .collect();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// One `managedFields` entry: `entry`'s identity with `fields_v1` (moved, not copied).
fn managed_entry(entry: &Managed, fields_v1: Value) -> Value {
    let mut out = Map::new();
    out.insert("manager".into(), json!(entry.manager));
    out.insert("operation".into(), json!(entry.operation));
    out.insert("apiVersion".into(), json!(entry.api_version));
    out.insert("time".into(), json!(entry.time));
    out.insert("fieldsType".into(), json!("FieldsV1"));
    out.insert("fieldsV1".into(), fields_v1);
    if let Some(sub) = &entry.subresource {
        out.insert("subresource".into(), json!(sub));
    }
    Value::Object(out)
}

/// A field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owning manager.
    pub manager: String,
    /// Its API version.
    pub api_version: String,
    /// The field, in upstream's dotted form (`.spec.replicas`).
    pub field: String,
}

/// Upstream's dotted form of a path.
pub fn path_text(path: &[Element]) -> String {
    path.iter()
        .map(|element| match element {
            Element::Field(name) => format!(".{name}"),
            Element::Key(key) => format!(
                "[{}]",
                key.trim_start_matches('{')
                    .trim_end_matches('}')
                    .replace("\":", "=")
                    .replace('"', "")
            ),
            Element::Value(value) => format!("[={value}]"),
        })
        .collect()
}

/// The result of an apply.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The object after the apply (with its managedFields).
    pub object: Value,
}

/// Applies a configuration for a manager, or reports the conflicts.
pub fn apply(
    live: &Value,
    applied: &Value,
    manager: &str,
    api_version: &str,
    now: &str,
    force: bool,
    schema: Schema<'_>,
) -> Result<Applied, Vec<Conflict>> {
    let mut entries = managed(live);
    let applied_set = fields(applied, schema);
    let previous: BTreeSet<Path> = entries
        .iter()
        .filter(|e| e.manager == manager && e.operation == "Apply")
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    // Conflicts: fields the apply would change that someone else owns.
    let mut conflicts = Vec::new();
    for entry in entries.iter().filter(|e| e.manager != manager) {
        for path in entry.fields.intersection(&applied_set) {
            if value_at(live, path, schema) != value_at(applied, path, schema) {
                conflicts.push((
                    entry.manager.clone(),
                    entry.api_version.clone(),
                    path.clone(),
                ));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts
            .into_iter()
            .map(|(manager, api_version, path)| Conflict {
                manager,
                api_version,
                field: path_text(&path),
            })
            .collect());
    }
    for (owner, _, path) in &conflicts {
        for entry in entries.iter_mut().filter(|e| &e.manager == owner) {
            entry.fields.remove(path);
        }
    }
    let mut object = merge(live, applied, schema);
    // Fields this manager applied before and no longer does go, unless others own them.
    for path in previous.difference(&applied_set) {
        let owned_elsewhere = entries.iter().any(|e| {
            e.manager != manager
                && e.fields
                    .iter()
                    .any(|p| p.starts_with(path) || path.starts_with(p))
        });
        if !owned_elsewhere {
            remove_at(&mut object, path, schema);
        }
    }
    entries.retain(|e| !(e.manager == manager && e.operation == "Apply"));
    entries.push(Managed {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: now.to_string(),
        subresource: None,
        fields: applied_set,
    });
    set_managed(&mut object, &entries);
    Ok(Applied { object })
}

/// Records an ordinary write: its manager now owns the fields it changed or added; fields
/// it removed are owned by nobody. Writes through a subresource (`status`, `scale`) are
/// recorded in an entry of their own, as upstream keeps them.
pub fn record_update(
    old: &Value,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    now: &str,
    subresource: Option<&str>,
    schema: Schema<'_>,
) {
    // A status write owns status fields only; any other write owns everything but status.
    let status_write = subresource == Some("status");
    if !status_write && old.as_object().is_some_and(Map::is_empty) {
        // A create: the manager owns everything it set.
        let fields_v1 = fields_v1_of(new, schema);
        let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if fields_v1.as_object().is_some_and(Map::is_empty) {
            metadata.remove("managedFields");
        } else {
            let entry = Managed {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now.to_string(),
                subresource: subresource.map(str::to_string),
                fields: BTreeSet::new(),
            };
            metadata.insert(
                "managedFields".into(),
                Value::Array(vec![managed_entry(&entry, fields_v1)]),
            );
        }
        return;
    }
    let mut entries = managed(old);
    let tracked = |object: &Value| {
        if status_write {
            status_fields(object, schema)
        } else {
            fields(object, schema)
        }
    };
    let (before, after) = (tracked(old), tracked(new));
    let changed: BTreeSet<Path> = after
        .iter()
        .filter(|path| {
            !before.contains(*path) || value_at(old, path, schema) != value_at(new, path, schema)
        })
        .cloned()
        .collect();
    for entry in entries.iter_mut() {
        entry.fields.retain(|path| {
            in_status(path) != status_write
                || (after.contains(path) && !(changed.contains(path) && entry.manager != manager))
        });
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| {
            e.manager == manager
                && e.operation == "Update"
                && e.subresource.as_deref() == subresource
        }) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = now.to_string();
            }
            None => entries.push(Managed {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: now.to_string(),
                subresource: subresource.map(str::to_string),
                fields: changed,
            }),
        }
    }
    set_managed(new, &entries);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Schema<'static> {
        Schema::definition("io.k8s.api.apps.v1.Deployment")
    }

    fn config(replicas: i64, image: &str, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": labels},
               "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})
    }

    #[test]
    fn field_sets_follow_list_keys_and_round_trip_through_fields_v1() {
        let set = fields(&config(2, "a", json!({"app": "web"})), deployment());
        let texts: Vec<String> = set.iter().map(|p| path_text(p)).collect();
        assert!(texts.contains(&".spec.replicas".to_string()));
        assert!(
            texts.contains(&".spec.template.spec.containers[name=app]".to_string()),
            "{texts:?}"
        );
        assert!(texts.contains(&".spec.template.spec.containers[name=app].image".to_string()));
        assert!(!texts.iter().any(|t| t.starts_with(".metadata.name")));
        let encoded = to_fields_v1(&set);
        assert!(
            encoded["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"]["."]
                .is_object()
        );
        assert_eq!(from_fields_v1(&encoded), set);
    }

    #[test]
    fn applies_merge_conflict_and_force() {
        let schema = deployment();
        let first = apply(
            &json!({}),
            &config(2, "a", json!({"app": "web"})),
            "alice",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap();
        // Another manager changing replicas conflicts; the same value does not.
        let bob = config(5, "a", json!({}));
        let conflicts =
            apply(&first.object, &bob, "bob", "apps/v1", "t", false, schema).unwrap_err();
        assert_eq!(
            conflicts,
            vec![Conflict {
                manager: "alice".into(),
                api_version: "apps/v1".into(),
                field: ".spec.replicas".into()
            }]
        );
        let same = apply(
            &first.object,
            &config(2, "a", json!({})),
            "bob",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap();
        assert_eq!(managed(&same.object).len(), 2, "shared ownership");
        let forced = apply(&first.object, &bob, "bob", "apps/v1", "t", true, schema).unwrap();
        assert_eq!(forced.object["spec"]["replicas"], 5);
        let alice = managed(&forced.object)
            .into_iter()
            .find(|m| m.manager == "alice")
            .unwrap();
        assert!(
            !alice
                .fields
                .iter()
                .any(|p| path_text(p) == ".spec.replicas")
        );
    }

    #[test]
    fn fields_dropped_from_an_apply_are_removed() {
        let schema = deployment();
        let first = apply(
            &json!({}),
            &config(2, "a", json!({"app": "web", "tier": "gpu"})),
            "alice",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap();
        let second = apply(
            &first.object,
            &config(2, "a", json!({"app": "web"})),
            "alice",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap();
        assert_eq!(second.object["metadata"]["labels"], json!({"app": "web"}));
    }

    #[test]
    fn a_create_records_what_the_field_set_records() {
        // The one-walk FieldsV1 of a create must be the path set's, byte for byte (key order
        // included): keyed lists (duplicate keys too), sets, atomic lists, empty maps,
        // server-set metadata, across schemas.
        let cases = [
            (
                "io.k8s.api.core.v1.Pod",
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "ml", "uid": "u", "labels": {"b": "1", "a": "2"},
                        "finalizers": ["z.io/x", "a.io/y"], "annotations": {}},
                    "spec": {"containers": [
                            {"name": "b", "image": "i", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                             "env": [{"name": "X", "value": "1"}], "args": ["--a", "--b"]},
                            {"name": "a", "image": "j", "resources": {"limits": {"nvidia.com/gpu": "1"}}},
                            {"name": "b", "command": ["sh"]}],
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "nodeSelector": {"gpu": "true"}, "securityContext": {}},
                    "status": {"phase": "Pending"}}),
            ),
            (
                "io.k8s.api.apps.v1.Deployment",
                config(3, "img", json!({"app": "web", "tier": "gpu"})),
            ),
            (
                "io.k8s.api.core.v1.Service",
                json!({"metadata": {"name": "s"}, "spec": {"ports": [
                    {"port": 80, "protocol": "TCP", "name": "http"},
                    {"port": 80, "protocol": "UDP", "name": "dns"}], "selector": {"app": "x"}}}),
            ),
            (
                "io.k8s.api.events.v1.Event",
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"name": "e", "namespace": "ml"}, "eventTime": "2026-11-30T00:00:00.000000Z",
                    "reason": "Scheduled", "note": "n", "type": "Normal", "action": "Binding",
                    "regarding": {"kind": "Pod", "name": "p", "namespace": "ml"},
                    "reportingController": "default-scheduler", "reportingInstance": "i"}),
            ),
            (
                "io.k8s.api.core.v1.ConfigMap",
                json!({"metadata": {"name": "only-server-set"}}),
            ),
        ];
        for (definition, object) in cases {
            let schema = Schema::definition(definition);
            let expected = to_fields_v1(&fields(&object, schema));
            let built = fields_v1_of(&object, schema);
            assert_eq!(built.to_string(), expected.to_string(), "{definition}");
        }
        // Through `record_update`: the create's entry equals the general path's.
        let schema = deployment();
        let mut fast = config(2, "a", json!({"app": "web"}));
        record_update(
            &json!({}),
            &mut fast,
            "kubectl",
            "apps/v1",
            "t",
            None,
            schema,
        );
        let mut general = config(2, "a", json!({"app": "web"}));
        let changed = fields(&general, schema);
        set_managed(
            &mut general,
            &[Managed {
                manager: "kubectl".into(),
                operation: "Update".into(),
                api_version: "apps/v1".into(),
                time: "t".into(),
                subresource: None,
                fields: changed,
            }],
        );
        assert_eq!(fast.to_string(), general.to_string());
    }

    #[test]
    fn updates_take_ownership_of_what_they_change() {
        let schema = deployment();
        let applied = apply(
            &json!({}),
            &config(2, "a", json!({})),
            "alice",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap()
        .object;
        let mut scaled = applied.clone();
        scaled["spec"]["replicas"] = json!(4);
        record_update(
            &applied,
            &mut scaled,
            "kubectl-scale",
            "apps/v1",
            "t",
            Some("scale"),
            schema,
        );
        let entries = managed(&scaled);
        let scaler = entries
            .iter()
            .find(|m| m.manager == "kubectl-scale")
            .unwrap();
        assert_eq!(scaler.subresource.as_deref(), Some("scale"));
        assert_eq!(
            scaler
                .fields
                .iter()
                .map(|p| path_text(p))
                .collect::<Vec<_>>(),
            [".spec.replicas"]
        );
        let conflicts = apply(
            &scaled,
            &config(2, "a", json!({})),
            "alice",
            "apps/v1",
            "t",
            false,
            schema,
        )
        .unwrap_err();
        assert_eq!(conflicts[0].manager, "kubectl-scale");
    }
}
