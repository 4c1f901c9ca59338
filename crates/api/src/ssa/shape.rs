//! How structured-merge-diff sees one node of an object: a leaf (scalars, atomic lists and
//! maps), a granular map, a list of maps keyed by its key fields, or a set; which map keys
//! are named fields of a struct; and the path element a list item has.
//!
//! Reads schemas through the [`Schema`] view only; knows nothing about ownership.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::Element;
use crate::patch::Schema;

/// How a node merges, compares and is owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Shape {
    /// Scalars, null, atomic lists and maps, lists without a merge strategy.
    Leaf,
    /// A map whose fields are owned one by one.
    Map,
    /// A list of maps identified by these key fields.
    Keyed(Vec<String>),
    /// A list of scalars merged by value.
    Set,
}

/// The shape of `value` under `schema`.
pub(super) fn shape(value: &Value, schema: Schema<'_>) -> Shape {
    match value {
        Value::Object(_) if !map_is_atomic(schema) => Shape::Map,
        Value::Array(_) => match list_keys(schema) {
            Some(keys) => Shape::Keyed(keys),
            None if is_set(schema) => Shape::Set,
            None => Shape::Leaf,
        },
        _ => Shape::Leaf,
    }
}

/// The schema nodes an extension may sit on: the field's own node and what it refers to.
fn nodes(schema: Schema<'_>) -> impl Iterator<Item = &Value> {
    let raw = schema.raw();
    // The same node when it refers to nothing: compared by address (comparing the
    // values would walk the whole schema beneath).
    let resolved = schema
        .resolved()
        .filter(|r| raw.is_none_or(|raw| !std::ptr::eq(*r, raw)));
    raw.into_iter().chain(resolved)
}

fn extension<'a>(schema: Schema<'a>, name: &str) -> Option<&'a str> {
    let raw = schema.raw();
    let resolved = schema.resolved();
    [raw, resolved]
        .into_iter()
        .flatten()
        .find_map(|node| node.get(name).and_then(Value::as_str))
}

fn map_is_atomic(schema: Schema<'_>) -> bool {
    extension(schema, "x-kubernetes-map-type") == Some("atomic")
}

fn merges_by_patch_strategy(schema: Schema<'_>) -> bool {
    extension(schema, "x-kubernetes-patch-strategy")
        .is_some_and(|s| s.split(',').any(|p| p == "merge"))
}

/// The key fields of a list of maps, from `x-kubernetes-list-map-keys` or the strategic
/// merge key.
fn list_keys(schema: Schema<'_>) -> Option<Vec<String>> {
    if let Some(node) = nodes(schema).find(|node| {
        node.get("x-kubernetes-list-map-keys")
            .is_some_and(Value::is_array)
    }) {
        return Some(tessera_model::json::strings_at(
            node,
            "/x-kubernetes-list-map-keys",
        ));
    }
    if extension(schema, "x-kubernetes-list-type").is_some_and(|t| t != "map") {
        return None;
    }
    let key = extension(schema, "x-kubernetes-patch-merge-key")?;
    merges_by_patch_strategy(schema).then(|| vec![key.to_string()])
}

fn is_set(schema: Schema<'_>) -> bool {
    match extension(schema, "x-kubernetes-list-type") {
        Some(list_type) => list_type == "set",
        None => {
            merges_by_patch_strategy(schema)
                && extension(schema, "x-kubernetes-patch-merge-key").is_none()
        }
    }
}

/// Whether `name` is a named field of the struct `schema` describes (not a key of a map).
pub(super) fn is_named(schema: Schema<'_>, name: &str) -> bool {
    schema
        .resolved()
        .and_then(|node| node.get("properties"))
        .is_some_and(|properties| properties.get(name).is_some())
}

/// The key of a keyed list item: its key fields, sorted by name, as JSON.
pub(super) fn key_of(item: &Value, keys: &[String]) -> String {
    let mut names: Vec<&String> = keys.iter().collect();
    names.sort();
    let mut map = Map::new();
    for key in names {
        if let Some(value) = item.get(key) {
            map.insert(key.clone(), value.clone());
        }
    }
    Value::Object(map).to_string()
}

/// The path element of an item of a keyed list or set; `None` for other shapes.
pub(super) fn item_element(item: &Value, shape: &Shape) -> Option<Element> {
    match shape {
        Shape::Keyed(keys) => Some(Element::Key(key_of(item, keys))),
        Shape::Set => Some(Element::Value(item.to_string())),
        Shape::Leaf | Shape::Map => None,
    }
}

/// The items of a keyed list or set grouped by path element, in first-seen order, each
/// element with every item that has it (more than one: duplicates).
pub(super) fn group_items<'v>(items: &'v [Value], shape: &Shape) -> Vec<(Element, Vec<&'v Value>)> {
    let mut groups: Vec<(Element, Vec<&'v Value>)> = Vec::new();
    let mut index: BTreeMap<Element, usize> = BTreeMap::new();
    for item in items {
        let Some(element) = item_element(item, shape) else {
            continue;
        };
        match index.get(&element) {
            Some(&at) => groups[at].1.push(item),
            None => {
                index.insert(element.clone(), groups.len());
                groups.push((element, vec![item]));
            }
        }
    }
    groups
}
