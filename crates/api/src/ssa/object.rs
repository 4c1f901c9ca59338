//! The two edits an apply makes to an object: merging the applied configuration into the
//! live object (maps field by field, keyed lists by key, sets by value, leaves replaced) and
//! pruning what the applier set before but no longer applies and nobody else owns.
//!
//! Works on values and field sets; knows nothing about managers' identities.

use std::collections::BTreeSet;

use serde_json::Value;

use super::fieldset::{ignored, ownable, with_named_parents};
use super::shape::{Shape, item_element, shape};
use super::{Element, Path};
use crate::patch::Schema;

/// Merges an applied configuration into a live object.
pub fn merge(live: &Value, applied: &Value, schema: Schema<'_>) -> Value {
    match (live, applied) {
        // A null map or list of fields merges nothing into what is there.
        (Value::Object(_) | Value::Array(_), Value::Null) if shape(live, schema) != Shape::Leaf => {
            live.clone()
        }
        (Value::Object(live_map), Value::Object(applied_map))
            if shape(applied, schema) == Shape::Map =>
        {
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
            let list_shape = shape(applied, schema);
            if list_shape == Shape::Leaf {
                return applied.clone();
            }
            let mut merged = live_items.clone();
            for item in applied_items {
                let element = item_element(item, &list_shape);
                match merged
                    .iter()
                    .position(|existing| item_element(existing, &list_shape) == element)
                {
                    Some(index) if list_shape != Shape::Set => {
                        merged[index] = merge(&merged[index], item, schema.items());
                    }
                    Some(_) => {}
                    None => merged.push(item.clone()),
                }
            }
            Value::Array(merged)
        }
        _ => applied.clone(),
    }
}

/// What pruning needs to know: the applier's previous set and everything anyone owns now
/// (the applier's new set included), both closed over named parent fields.
struct Pruning {
    last: BTreeSet<Path>,
    owned: BTreeSet<Path>,
}

/// Removes from `merged` the fields the applier owned before (`last`) that nobody owns now
/// (`owned`), as upstream's `Updater.prune` does: a field goes when it was in the last
/// applied set and it, or a parent the last set reached, is owned by nobody — so a list item
/// the applier dropped goes with what other managers set inside it unless someone owns the
/// item itself. A map emptied this way goes too.
pub(super) fn prune(
    merged: &mut Value,
    last: &BTreeSet<Path>,
    owned: &BTreeSet<Path>,
    schema: Schema<'_>,
) {
    if last.is_empty() {
        return;
    }
    let pruning = Pruning {
        last: with_named_parents(last, schema),
        owned: with_named_parents(owned, schema),
    };
    pruning.walk(merged, schema, &mut Vec::new(), false, false);
}

impl Pruning {
    /// Whether the node at `path` goes; the flags it passes on to its children.
    fn verdict(&self, path: &Path, under_last: bool, unowned: bool) -> (bool, bool, bool) {
        let in_last = self.last.contains(path);
        let under_last = under_last || in_last;
        // `.metadata` is never pruned: every apply names the object in it.
        let owned = self.owned.contains(path) || !ownable(path);
        let unowned = unowned || (under_last && !owned);
        (in_last && unowned, under_last, unowned)
    }

    /// Prunes below `value`; true when something was removed.
    fn walk(
        &self,
        value: &mut Value,
        schema: Schema<'_>,
        path: &mut Path,
        under_last: bool,
        unowned: bool,
    ) -> bool {
        let node_shape = shape(value, schema);
        let mut removed_any = false;
        match (&node_shape, value) {
            (Shape::Map, Value::Object(map)) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                for key in keys {
                    path.push(Element::Field(key.clone()));
                    if !ignored(path) {
                        let (remove, under, unowned) = self.verdict(path, under_last, unowned);
                        let emptied = !remove
                            && map.get_mut(&key).is_some_and(|child| {
                                self.walk(child, schema.property(&key), path, under, unowned)
                                    && is_empty_container(child)
                            });
                        if remove || emptied {
                            map.remove(&key);
                            removed_any = true;
                        }
                    }
                    path.pop();
                }
            }
            (Shape::Keyed(_) | Shape::Set, Value::Array(items)) => {
                let item_schema = schema.items();
                items.retain_mut(|item| {
                    let Some(element) = item_element(item, &node_shape) else {
                        return true;
                    };
                    path.push(element);
                    let (remove, under, unowned) = self.verdict(path, under_last, unowned);
                    if !remove && node_shape != Shape::Set {
                        removed_any |= self.walk(item, item_schema, path, under, unowned);
                    }
                    path.pop();
                    removed_any |= remove;
                    !remove
                });
            }
            _ => {}
        }
        removed_any
    }
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}
