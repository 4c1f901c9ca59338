//! What changed between two versions of an object, as upstream's `TypedValue.Compare` finds
//! it: the paths added, modified and removed. Leaves (scalars, atomic lists and maps, and
//! containers empty on both sides) are compared by value; maps and keyed lists are walked,
//! and a map field or list item that appears or disappears is itself added or removed, but a
//! container present on both sides is never "modified" — only its leaves are. This is what
//! makes an apply of equal values conflict-free and a changed image conflict on the image
//! alone.
//!
//! Knows nothing about managers.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fieldset::{encode_element, ignored, ownable};
use super::shape::{Shape, group_items, shape};
use super::{Element, Path};
use crate::patch::Schema;

/// The paths that differ between an old and a new object.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Comparison {
    pub added: BTreeSet<Path>,
    pub modified: BTreeSet<Path>,
    pub removed: BTreeSet<Path>,
}

impl Comparison {
    /// Whether the new object sets `path` to something the old one did not have.
    pub fn changed(&self, path: &Path) -> bool {
        self.added.contains(path) || self.modified.contains(path)
    }

    /// Whether an entry's FieldsV1 holds any path this comparison added, modified or
    /// removed (an entry it leaves alone need not be decoded).
    pub fn touches(&self, fields_v1: &Value) -> bool {
        self.added
            .iter()
            .chain(&self.modified)
            .chain(&self.removed)
            .any(|path| fields_v1_holds(fields_v1, path))
    }
}

/// Whether a FieldsV1 tree holds `path` as a member (a leaf, or a parent marked `"."`).
fn fields_v1_holds(fields_v1: &Value, path: &[Element]) -> bool {
    let mut node = fields_v1;
    for element in path {
        match node.get(encode_element(element)) {
            Some(child) => node = child,
            None => return false,
        }
    }
    node.as_object()
        .is_some_and(|map| map.is_empty() || map.contains_key("."))
}

/// Which part of the object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// Everything but the server-set fields and `status`.
    Main,
    /// `status` only (writes through the status subresource).
    Status,
}

/// Compares `old` with `new` within `scope`.
pub(super) fn compare(old: &Value, new: &Value, schema: Schema<'_>, scope: Scope) -> Comparison {
    let mut comparison = Comparison::default();
    match scope {
        Scope::Main => comparison.walk(Some(old), Some(new), schema, &mut Vec::new()),
        Scope::Status => comparison.walk(
            old.get("status"),
            new.get("status"),
            schema.property("status"),
            &mut vec![Element::Field("status".into())],
        ),
    }
    comparison
}

fn is_empty(value: Option<&Value>) -> bool {
    match value {
        None => true,
        Some(Value::Object(map)) => map.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

impl Comparison {
    fn record(set: &mut BTreeSet<Path>, path: &Path) {
        if ownable(path) {
            set.insert(path.clone());
        }
    }

    fn walk(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        schema: Schema<'_>,
        path: &mut Path,
    ) {
        let node_shape = match (lhs, rhs) {
            (None, None) => return,
            (Some(l), Some(r)) => {
                let (left, right) = (shape(l, schema), shape(r, schema));
                if left == right { left } else { Shape::Leaf }
            }
            (Some(only), None) | (None, Some(only)) => shape(only, schema),
        };
        if node_shape == Shape::Leaf || (is_empty(lhs) && is_empty(rhs)) {
            match (lhs, rhs) {
                (None, _) => Self::record(&mut self.added, path),
                (_, None) => Self::record(&mut self.removed, path),
                (Some(l), Some(r)) if l != r => Self::record(&mut self.modified, path),
                _ => {}
            }
            return;
        }
        match node_shape {
            Shape::Map => self.walk_map(lhs, rhs, schema, path),
            Shape::Keyed(_) | Shape::Set => self.walk_items(lhs, rhs, &node_shape, schema, path),
            Shape::Leaf => {}
        }
        if lhs.is_none() {
            Self::record(&mut self.added, path);
        } else if rhs.is_none() {
            Self::record(&mut self.removed, path);
        }
    }

    fn walk_map(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        schema: Schema<'_>,
        path: &mut Path,
    ) {
        let left = lhs.and_then(Value::as_object);
        let right = rhs.and_then(Value::as_object);
        let keys: BTreeSet<&String> = left
            .into_iter()
            .chain(right)
            .flat_map(|map| map.keys())
            .collect();
        for key in keys {
            path.push(Element::Field(key.clone()));
            if !ignored(path) {
                self.walk(
                    left.and_then(|m| m.get(key)),
                    right.and_then(|m| m.get(key)),
                    schema.property(key),
                    path,
                );
            }
            path.pop();
        }
    }

    fn walk_items(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        node_shape: &Shape,
        schema: Schema<'_>,
        path: &mut Path,
    ) {
        fn items(value: Option<&Value>) -> &[Value] {
            value
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
        }
        let left: BTreeMap<Element, Vec<&Value>> =
            group_items(items(lhs), node_shape).into_iter().collect();
        let right: BTreeMap<Element, Vec<&Value>> =
            group_items(items(rhs), node_shape).into_iter().collect();
        let elements: BTreeSet<&Element> = left.keys().chain(right.keys()).collect();
        let item_schema = schema.items();
        for element in elements {
            let l = left.get(element).map(Vec::as_slice).unwrap_or_default();
            let r = right.get(element).map(Vec::as_slice).unwrap_or_default();
            path.push(element.clone());
            match (l, r) {
                ([], []) => {}
                // No duplicates: compare the items one to one.
                (l @ ([] | [_]), r @ ([] | [_])) => {
                    self.walk(l.first().copied(), r.first().copied(), item_schema, path)
                }
                // Duplicates on both sides: compared as one atomic value.
                (l, r) if l.len() > 1 && r.len() > 1 => {
                    if l != r {
                        Self::record(&mut self.modified, path);
                    }
                }
                // Duplicates no more: the new single item is added, the duplicates removed.
                (l, r) if l.len() > 1 => {
                    if let Some(item) = r.first() {
                        self.walk(None, Some(item), item_schema, path);
                    }
                    Self::record(&mut self.removed, path);
                }
                // New duplicates: the old single item is removed, the duplicates added.
                (l, _) => {
                    if let Some(item) = l.first() {
                        self.walk(Some(item), None, item_schema, path);
                    }
                    Self::record(&mut self.added, path);
                }
            }
            path.pop();
        }
    }
}
