//! What a validation rule reads of `self` or `oldSelf`, found in its compiled expression,
//! and a JSON value seen through that answer for the interpreter: only the fields the rule
//! selects, a list or map it only sizes as as many empty items, a field it only tests with
//! `has()` as an empty value of its kind. A Workload's root rules read its conditions and
//! a few spec fields, not its Pod templates, so a status write converts a fraction of the
//! object. Any use the reading does not recognise (the variable passed whole, indexed,
//! iterated, compared) keeps that part whole, so a rule's answer never changes.
//!
//! Also escapes properties named by CEL reserved words (`__namespace__`), as upstream's
//! `escaping.go` does, while it converts. Knows nothing about schemas or evaluation.

use std::borrow::Cow;
use std::collections::BTreeMap;

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};
use serde::ser::{SerializeMap, SerializeSeq};
use serde_json::Value;

/// What of a value a rule reads.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Projection {
    /// Nothing: the rule does not name the variable.
    #[default]
    Nothing,
    /// Only whether it is there (`has(self.x)`).
    Presence,
    /// Only how many items or entries it has (`size(self.x)`).
    Length,
    /// Only these properties, by their escaped names.
    Fields(BTreeMap<String, Projection>),
    /// All of it.
    Whole,
}

impl Projection {
    /// What `expression` reads of the variable named `variable`.
    pub(crate) fn of(expression: &IdedExpr, variable: &str) -> Projection {
        let mut read = Projection::Nothing;
        read.visit(expression, variable);
        read
    }

    /// Whether nothing of the variable is read.
    pub(crate) fn is_nothing(&self) -> bool {
        matches!(self, Projection::Nothing)
    }

    /// Reads what `other` reads too.
    pub(crate) fn union(&mut self, other: &Projection) {
        match (&mut *self, other) {
            (Projection::Whole, _) | (_, Projection::Nothing) => {}
            (Projection::Nothing | Projection::Presence, other) => *self = other.clone(),
            (_, Projection::Presence) | (Projection::Length, Projection::Length) => {}
            (Projection::Fields(fields), Projection::Fields(more)) => {
                for (name, read) in more {
                    fields.entry(name.clone()).or_default().union(read);
                }
            }
            _ => *self = Projection::Whole,
        }
    }

    /// Reads `leaf` of the value at `path` below this one.
    fn add(&mut self, path: &[&str], leaf: Projection) {
        let Some((first, rest)) = path.split_first() else {
            return self.union(&leaf);
        };
        match self {
            Projection::Whole => {}
            Projection::Length => *self = Projection::Whole,
            Projection::Nothing | Projection::Presence => {
                *self = Projection::Fields(BTreeMap::new());
                self.add(path, leaf);
            }
            Projection::Fields(fields) => fields
                .entry((*first).to_owned())
                .or_default()
                .add(rest, leaf),
        }
    }

    fn visit(&mut self, expression: &IdedExpr, variable: &str) {
        match &expression.expr {
            Expr::Ident(name) if name == variable => self.union(&Projection::Whole),
            Expr::Select(select) => {
                let leaf = if select.test {
                    Projection::Presence
                } else {
                    Projection::Whole
                };
                match selected_path(expression, variable) {
                    Some(path) => self.add(&path, leaf),
                    None => self.visit(&select.operand, variable),
                }
            }
            Expr::Call(call) => {
                let sized = match (call.func_name.as_str(), &call.target, call.args.as_slice()) {
                    ("size", None, [operand]) => Some(operand),
                    ("size", Some(operand), []) => Some(operand.as_ref()),
                    _ => None,
                };
                if let Some(path) = sized.and_then(|operand| plain_path(operand, variable)) {
                    return self.add(&path, Projection::Length);
                }
                for operand in call.target.iter().map(AsRef::as_ref).chain(&call.args) {
                    self.visit(operand, variable);
                }
            }
            Expr::Comprehension(comprehension) => {
                for part in [
                    &comprehension.iter_range,
                    &comprehension.accu_init,
                    &comprehension.loop_cond,
                    &comprehension.loop_step,
                    &comprehension.result,
                ] {
                    self.visit(part, variable);
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.visit(element, variable);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.visit(&entry.key, variable);
                        self.visit(&entry.value, variable);
                    }
                }
            }
            Expr::Struct(object) => {
                for entry in &object.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.visit(&field.value, variable);
                    }
                }
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

/// The properties a chain of selections (`variable.a.b`, or `has(variable.a.b)`) names, or
/// `None` when `expression` is not such a chain.
fn selected_path<'e>(expression: &'e IdedExpr, variable: &str) -> Option<Vec<&'e str>> {
    match &expression.expr {
        Expr::Select(select) if select.test => {
            let mut path = plain_path(&select.operand, variable)?;
            path.push(&select.field);
            Some(path)
        }
        _ => plain_path(expression, variable),
    }
}

/// The properties `variable.a.b` names (`[]` for the variable itself).
fn plain_path<'e>(expression: &'e IdedExpr, variable: &str) -> Option<Vec<&'e str>> {
    match &expression.expr {
        Expr::Ident(name) if name == variable => Some(Vec::new()),
        Expr::Select(select) if !select.test => {
            let mut path = plain_path(&select.operand, variable)?;
            path.push(&select.field);
            Some(path)
        }
        _ => None,
    }
}

/// CEL's reserved words: a property so named is `__{word}__` in a rule (upstream's
/// `apiserver/pkg/cel/escaping.go`), e.g. `self.__namespace__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A property's name as rules spell it.
fn escaped(name: &str) -> Cow<'_, str> {
    if RESERVED.contains(&name) {
        Cow::Owned(format!("__{name}__"))
    } else {
        Cow::Borrowed(name)
    }
}

/// A JSON value as the interpreter sees it through a projection.
pub(crate) struct Projected<'v> {
    value: &'v Value,
    read: &'v Projection,
    /// Whether the value is a whole object, of whose `metadata` rules see only `name` and
    /// `generateName` (upstream's root declaration type).
    root: bool,
}

impl<'v> Projected<'v> {
    pub(crate) fn new(value: &'v Value, read: &'v Projection, root: bool) -> Projected<'v> {
        Projected { value, read, root }
    }

    fn child(value: &'v Value, read: &'v Projection) -> Projected<'v> {
        Projected::new(value, read, false)
    }
}

/// What the projection keeps of one property of an object, or `None` when it drops it.
fn kept<'p>(read: &'p Projection, name: &str) -> Option<&'p Projection> {
    match read {
        Projection::Fields(fields) => fields.get(name),
        _ => Some(read),
    }
}

impl serde::Serialize for Projected<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (self.read, self.value) {
            (Projection::Presence, Value::Object(_)) => serializer.serialize_map(Some(0))?.end(),
            (Projection::Presence, Value::Array(_)) => serializer.serialize_seq(Some(0))?.end(),
            (Projection::Length, Value::Array(items)) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for _ in items {
                    seq.serialize_element(&())?;
                }
                seq.end()
            }
            (Projection::Length, Value::Object(object)) => {
                let mut map = serializer.serialize_map(Some(object.len()))?;
                for name in object.keys() {
                    map.serialize_entry(&escaped(name), &())?;
                }
                map.end()
            }
            (read, Value::Object(object)) => {
                let mut map = serializer.serialize_map(None)?;
                for (name, value) in object {
                    let name = escaped(name);
                    let Some(read) = kept(read, &name) else {
                        continue;
                    };
                    match (name.as_ref(), value) {
                        ("metadata", Value::Object(metadata)) if self.root => {
                            let visible: serde_json::Map<String, Value> = metadata
                                .iter()
                                .filter(|(field, _)| {
                                    matches!(field.as_str(), "name" | "generateName")
                                })
                                .map(|(field, value)| (field.clone(), value.clone()))
                                .collect();
                            let visible = Value::Object(visible);
                            map.serialize_entry(&name, &Projected::child(&visible, read))?;
                        }
                        _ => map.serialize_entry(&name, &Projected::child(value, read))?,
                    }
                }
                map.end()
            }
            (_, Value::Array(items)) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Projected::child(item, &Projection::Whole))?;
                }
                seq.end()
            }
            (_, scalar) => scalar.serialize(serializer),
        }
    }
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
