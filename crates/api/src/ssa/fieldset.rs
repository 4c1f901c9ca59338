//! Field sets: which paths of an object a configuration sets (upstream's `ToFieldSet`), their
//! FieldsV1 wire form, the named-field closure pruning works on, and upstream's dotted text
//! of a path.
//!
//! A set holds *members*: leaves, list items and set values, map keys that are not named
//! struct fields, and empty or null maps; a named struct field holding a non-empty map is
//! only a parent (in FieldsV1, `"."` marks a member that is also a parent). Knows nothing
//! about managers or conflicts.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::shape::{Shape, group_items, is_named, shape};
use super::{Element, Path};
use crate::patch::Schema;

/// Fields the server sets and nobody owns (with everything under them).
pub(super) fn ignored(path: &[Element]) -> bool {
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

/// Whether a path can be a member of a manager's set: `.metadata` itself never is.
pub(super) fn ownable(path: &[Element]) -> bool {
    !path.is_empty() && !matches!(path, [Element::Field(m)] if m == "metadata")
}

/// Every field path an object (an applied configuration) sets.
pub fn fields(object: &Value, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut set = BTreeSet::new();
    collect(object, schema, &mut Vec::new(), &mut set);
    set.retain(|path| ownable(path));
    set
}

/// Whether the map field `key` (holding `child`) is a member by itself, not only through
/// what it holds.
fn map_field_is_member(schema: Schema<'_>, key: &str, child: &Value) -> bool {
    child.is_null() || child.as_object().is_some_and(Map::is_empty) || !is_named(schema, key)
}

fn collect(value: &Value, schema: Schema<'_>, path: &mut Path, out: &mut BTreeSet<Path>) {
    let node_shape = shape(value, schema);
    match (&node_shape, value) {
        (Shape::Map, Value::Object(map)) => {
            for (key, child) in map {
                path.push(Element::Field(key.clone()));
                if !ignored(path) {
                    collect(child, schema.property(key), path, out);
                    if map_field_is_member(schema, key, child) {
                        out.insert(path.clone());
                    }
                }
                path.pop();
            }
        }
        (Shape::Keyed(_) | Shape::Set, Value::Array(items)) => {
            let item_schema = schema.items();
            for (element, members) in group_items(items, &node_shape) {
                path.push(element);
                if let ([item], Shape::Keyed(_)) = (members.as_slice(), &node_shape) {
                    collect(item, item_schema, path, out);
                }
                out.insert(path.clone());
                path.pop();
            }
        }
        _ => {
            if !path.is_empty() {
                out.insert(path.clone());
            }
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

/// Marks `node` (a FieldsV1 object) as a member: `{}` alone, `"."` beside children.
fn mark_member(node: &mut Map<String, Value>) {
    if !node.is_empty() {
        node.insert(".".into(), json!({}));
        node.sort_keys();
    }
}

/// Adds what `value` (at `path`) sets below `node`, its FieldsV1 map, keys sorted as upstream
/// writes them; true when `value` is a leaf (a member by itself).
fn fields_v1_into(
    value: &Value,
    schema: Schema<'_>,
    path: &mut Path,
    node: &mut Map<String, Value>,
) -> bool {
    let node_shape = shape(value, schema);
    match (&node_shape, value) {
        (Shape::Map, Value::Object(map)) => {
            for (key, child) in map {
                path.push(Element::Field(key.clone()));
                if !ignored(path) {
                    let mut child_node = Map::new();
                    let leaf = fields_v1_into(child, schema.property(key), path, &mut child_node);
                    let member = (leaf || map_field_is_member(schema, key, child)) && ownable(path);
                    if member {
                        mark_member(&mut child_node);
                    }
                    if member || !child_node.is_empty() {
                        node.insert(format!("f:{key}"), Value::Object(child_node));
                    }
                }
                path.pop();
            }
        }
        (Shape::Keyed(_) | Shape::Set, Value::Array(items)) => {
            let item_schema = schema.items();
            for (element, members) in group_items(items, &node_shape) {
                let mut child_node = Map::new();
                if let ([item], Shape::Keyed(_)) = (members.as_slice(), &node_shape) {
                    path.push(element.clone());
                    fields_v1_into(item, item_schema, path, &mut child_node);
                    path.pop();
                }
                mark_member(&mut child_node);
                node.insert(encode_element(&element), Value::Object(child_node));
            }
        }
        _ => return true,
    }
    node.sort_keys();
    false
}

/// `set` with the named fields above its members made members too (upstream's
/// `EnsureNamedFieldsAreMembers`): what pruning compares, so that owning a field of a struct
/// keeps the struct.
pub(super) fn with_named_parents(set: &BTreeSet<Path>, schema: Schema<'_>) -> BTreeSet<Path> {
    let mut out = set.clone();
    for path in set {
        let mut current = schema;
        for (depth, element) in path.iter().enumerate() {
            if let Element::Field(name) = element
                && depth + 1 < path.len()
                && is_named(current, name)
            {
                out.insert(path[..=depth].to_vec());
            }
            current = match element {
                Element::Field(name) => current.property(name),
                Element::Key(_) | Element::Value(_) => current.items(),
            };
        }
    }
    out
}

pub(super) fn encode_element(element: &Element) -> String {
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
    #[derive(Default)]
    struct Node {
        member: bool,
        children: BTreeMap<String, Node>,
    }
    fn emit(node: &Node) -> Value {
        let mut out = Map::new();
        if node.member && !node.children.is_empty() {
            out.insert(".".into(), json!({}));
        }
        for (key, child) in &node.children {
            out.insert(key.clone(), emit(child));
        }
        Value::Object(out)
    }
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = node.children.entry(encode_element(element)).or_default();
        }
        node.member = true;
    }
    emit(&root)
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

/// A JSON value as upstream's `value.ToString` writes it: strings quoted, maps as `k=v`.
fn value_text(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::String(text) => Value::String(text.clone()).to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_text).collect::<Vec<_>>().join(",")
        ),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{key}={}", value_text(value)))
            .collect(),
        Value::Bool(_) | Value::Number(_) => value.to_string(),
    }
}

/// Upstream's dotted form of a path: `.spec.containers[name="c"].image`, `.finalizers[="x"]`.
pub fn path_text(path: &[Element]) -> String {
    path.iter()
        .map(|element| match element {
            Element::Field(name) => format!(".{name}"),
            Element::Key(key) => {
                let fields = match serde_json::from_str::<Value>(key) {
                    Ok(Value::Object(map)) => map
                        .iter()
                        .map(|(name, value)| format!("{name}={}", value_text(value)))
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => key.clone(),
                };
                format!("[{fields}]")
            }
            Element::Value(value) => match serde_json::from_str::<Value>(value) {
                Ok(parsed) => format!("[={}]", value_text(&parsed)),
                Err(_) => format!("[={value}]"),
            },
        })
        .collect()
}

/// The order upstream walks a set in (`Set.Iterate`): at each level a node's members before
/// the paths under its children, both sorted by element.
pub(super) fn iteration_order(a: &[Element], b: &[Element]) -> Ordering {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.len() - common, b.len() - common) {
        (0, 0) => Ordering::Equal,
        (0, _) => Ordering::Less,
        (_, 0) => Ordering::Greater,
        (1, rest) if rest > 1 => Ordering::Less,
        (rest, 1) if rest > 1 => Ordering::Greater,
        _ => a[common].cmp(&b[common]),
    }
}
