//! Server-side apply and field ownership (`metadata.managedFields`), after upstream's
//! structured-merge-diff (`merge/update.go`): every field of an object is owned by the
//! managers that set it. An apply merges the applied configuration (lists of maps by their
//! keys, sets by value, other lists atomically), prunes what the applier no longer applies
//! and nobody else owns, and compares the result with the live object: another manager's
//! field that the apply adds or modifies is a conflict (unless forced, when that manager
//! loses it); equal values are shared; a removed field leaves every owner. An ordinary write
//! (`Update`) is the same comparison, always forced: its manager gains what it added or
//! modified. Managers are told apart as upstream does: by name, operation, subresource and,
//! for updates, API version.
//!
//! Pure over JSON values and schemas; knows nothing about storage or HTTP.

mod compare;
mod fieldset;
mod object;
mod remembered;
mod shape;

#[cfg(test)]
mod cases;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use tessera_model::json::Pointer as _;

use serde_json::{Map, Value, json};

use crate::patch::Schema;
use compare::{Comparison, Scope, compare};
use fieldset::iteration_order;
pub use fieldset::{fields, fields_v1_of, from_fields_v1, path_text, to_fields_v1};
pub use object::merge;

/// One element of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// A field of a map (`f:name`).
    Field(String),
    /// A list item identified by its key fields, sorted, as JSON (`k:{"name":"c"}`).
    Key(String),
    /// A set member, as JSON (`v:"value"`).
    Value(String),
}

/// A field path.
pub type Path = Vec<Element>;

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

impl Managed {
    /// Whether this entry belongs to the manager a write is made as: appliers are one
    /// manager across API versions, updaters one per API version (upstream's manager
    /// identifier).
    fn is(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// How upstream names this manager in a conflict: `"kubectl"` for an applier,
    /// `"kubectl-edit" using apps/v1` for an updater.
    pub fn described(&self) -> String {
        let mut text = json!(self.manager).to_string();
        if let Some(subresource) = &self.subresource {
            text = format!("{text} with subresource {}", json!(subresource));
        }
        if self.operation == "Update" {
            text = format!("{text} using {}", self.api_version);
        }
        text
    }
}

/// The `managedFields` of an object.
pub fn managed(object: &Value) -> Vec<Managed> {
    object
        .at("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| Managed {
                    fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
                    ..identity(e)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A `managedFields` entry's manager, operation, version, time and subresource, without
/// decoding its fields.
fn identity(entry: &Value) -> Managed {
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
    Managed {
        manager: text("manager").unwrap_or_default(),
        operation: text("operation").unwrap_or_else(|| "Update".into()),
        api_version: text("apiVersion").unwrap_or_default(),
        time: text("time").unwrap_or_default(),
        subresource: text("subresource"),
        fields: BTreeSet::new(),
    }
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
    /// The owning manager, as upstream names it (`"kubectl"`, `"kubectl-edit" using apps/v1`).
    pub manager: String,
    /// The field, in upstream's dotted form (`.spec.replicas`).
    pub field: String,
}

/// Upstream's message for an apply's conflicts: one inline, several grouped by manager.
pub fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            only.manager, only.field
        );
    }
    let mut lines = Vec::new();
    let mut current: Option<&str> = None;
    for conflict in conflicts {
        if current != Some(conflict.manager.as_str()) {
            lines.push(format!("conflicts with {}:", conflict.manager));
            current = Some(&conflict.manager);
        }
        lines.push(format!("- {}", conflict.field));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// The result of an apply.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The object after the apply (with its managedFields).
    pub object: Value,
}

/// Takes away from every manager but `writer` what a change took over (added or modified
/// fields; only when `force`, else they are conflicts) and what it removed. The conflicts,
/// grouped by manager (sorted by name) in upstream's path order. Entries left without fields
/// go, but the writer's; its new position is returned.
fn settle(
    entries: &mut Vec<Managed>,
    writer: usize,
    comparison: &Comparison,
    force: bool,
) -> Result<usize, Vec<Conflict>> {
    let mut conflicts: Vec<(&Managed, &Path)> = entries
        .iter()
        .enumerate()
        .filter(|(index, _)| *index != writer)
        .flat_map(|(_, entry)| {
            entry
                .fields
                .iter()
                .filter(|path| comparison.changed(path))
                .map(move |path| (entry, path))
        })
        .collect();
    if !conflicts.is_empty() && !force {
        conflicts.sort_by(|(a, p), (b, q)| {
            (&a.manager, &a.operation)
                .cmp(&(&b.manager, &b.operation))
                .then_with(|| iteration_order(p, q))
        });
        return Err(conflicts
            .into_iter()
            .map(|(entry, path)| Conflict {
                manager: entry.described(),
                field: path_text(path),
            })
            .collect());
    }
    for (index, entry) in entries.iter_mut().enumerate() {
        if index != writer {
            entry
                .fields
                .retain(|path| !comparison.changed(path) && !comparison.removed.contains(path));
        }
    }
    let removed_before_writer = entries[..writer]
        .iter()
        .filter(|entry| entry.fields.is_empty())
        .count();
    let mut index = 0;
    entries.retain(|entry| {
        let keep = index == writer || !entry.fields.is_empty();
        index += 1;
        keep
    });
    Ok(writer - removed_before_writer)
}

/// The position of the writer's entry, added (empty) when it has none yet.
fn entry_of(
    entries: &mut Vec<Managed>,
    manager: &str,
    operation: &str,
    api_version: &str,
    subresource: Option<&str>,
) -> usize {
    match entries
        .iter()
        .position(|e| e.is(manager, operation, api_version, subresource))
    {
        Some(index) => index,
        None => {
            entries.push(Managed {
                manager: manager.to_string(),
                operation: operation.to_string(),
                api_version: api_version.to_string(),
                time: String::new(),
                subresource: subresource.map(str::to_string),
                fields: BTreeSet::new(),
            });
            entries.len() - 1
        }
    }
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
    let writer = entry_of(&mut entries, manager, "Apply", api_version, None);
    let applied_set = fields(applied, schema);
    let last = std::mem::replace(&mut entries[writer].fields, applied_set);
    let mut object = merge(live, applied, schema);
    let owned: BTreeSet<Path> = entries
        .iter()
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    object::prune(&mut object, &last, &owned, schema);
    let comparison = compare(live, &object, schema, Scope::Main);
    let writer = settle(&mut entries, writer, &comparison, force)?;
    let entry = &mut entries[writer];
    entry.api_version = api_version.to_string();
    entry.time = now.to_string();
    set_managed(&mut object, &entries);
    Ok(Applied { object })
}

/// The raw `managedFields` entries a write starts from: those the request carries when it
/// sets any (how kubectl hands a client-side applier's fields over to its server-side
/// apply), else the stored ones. Writes through a subresource always start from the stored
/// ones.
fn raw_entries_before(old: &Value, new: &mut Value, subresource: Option<&str>) -> Vec<Value> {
    let requested = new
        .pointer_mut("/metadata/managedFields")
        .map(Value::take)
        .and_then(|entries| match entries {
            Value::Array(entries) if !entries.is_empty() => Some(entries),
            _ => None,
        });
    match requested {
        Some(entries) if subresource.is_none() => entries,
        _ => old
            .at("/metadata/managedFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    }
}

/// Records an ordinary write: its manager now owns the fields it added or modified; fields
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
        let fields_v1 = remembered::fields_v1_of_remembered(new, schema);
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
    let scope = if status_write {
        Scope::Status
    } else {
        Scope::Main
    };
    let comparison = compare(old, new, schema, scope);
    let changed = !comparison.added.is_empty() || !comparison.modified.is_empty();
    // Entries the write takes nothing from keep their stored form; only the writer's and
    // those losing fields are decoded and written again.
    let mut entries: Vec<Value> = Vec::new();
    let mut writer: Option<(usize, Managed)> = None;
    for raw in raw_entries_before(old, new, subresource) {
        let Some(fields_v1) = raw.get("fieldsV1").filter(|f| !is_empty_map(f)) else {
            continue;
        };
        let mut entry = identity(&raw);
        if writer.is_none() && entry.is(manager, "Update", api_version, subresource) {
            entry.fields = from_fields_v1(fields_v1);
            writer = Some((entries.len(), entry));
            entries.push(Value::Null);
        } else if comparison.touches(fields_v1) {
            entry.fields = from_fields_v1(fields_v1);
            entry
                .fields
                .retain(|path| !comparison.changed(path) && !comparison.removed.contains(path));
            if !entry.fields.is_empty() {
                entries.push(managed_entry(&entry, to_fields_v1(&entry.fields)));
            }
        } else {
            entries.push(raw);
        }
    }
    let (position, mut entry) = writer.unwrap_or_else(|| {
        entries.push(Value::Null);
        let entry = Managed {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: api_version.to_string(),
            time: String::new(),
            subresource: subresource.map(str::to_string),
            fields: BTreeSet::new(),
        };
        (entries.len() - 1, entry)
    });
    entry
        .fields
        .retain(|path| !comparison.removed.contains(path));
    entry.fields.extend(comparison.added.iter().cloned());
    entry.fields.extend(comparison.modified.iter().cloned());
    if changed {
        entry.time = now.to_string();
    }
    if entry.fields.is_empty() {
        entries.remove(position);
    } else {
        entries[position] = managed_entry(&entry, to_fields_v1(&entry.fields));
    }
    if let Some(metadata) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        if entries.is_empty() {
            metadata.remove("managedFields");
        } else {
            metadata.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

fn is_empty_map(value: &Value) -> bool {
    value.as_object().is_some_and(Map::is_empty)
}
