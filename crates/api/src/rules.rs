//! CRD validation rules (`x-kubernetes-validations`): CEL expressions over `self` (and
//! `oldSelf` for transition rules on update), compiled in the shared Kubernetes CEL
//! environment (`tessera-cel`) and evaluated wherever a schema node declares them.
//!
//! A rule that does not hold becomes a field error with the rule's `message` (or
//! `failed rule: <rule>`), its `reason` and `fieldPath`. Transition rules (those naming
//! `oldSelf`) are skipped when there is no old value. A rule that cannot be evaluated never
//! admits the object: one that does not compile is `rule compile error: …`, one that fails
//! at run time is `<error> evaluating rule: <rule>` (or upstream's wording for a call no
//! overload matches) at the rule's field. Knows nothing about storage or HTTP.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::Value;

use crate::error::Cause;
use crate::patch::Schema;
use crate::validation::FieldPath;

mod projection;

use projection::{Projected, Projection};

/// The variables a rule may read.
const VARIABLES: [&str; 2] = ["self", "oldSelf"];

/// How many compiled rules the cache keeps before it starts over.
const CACHE_LIMIT: usize = 4096;

/// A compiled rule, with what it reads of `self` and `oldSelf`.
struct Rule {
    program: cel::Program,
    reads_self: Projection,
    reads_old: Projection,
}

impl Rule {
    /// Whether it reads `oldSelf` (a transition rule).
    fn transition(&self) -> bool {
        !self.reads_old.is_nothing()
    }
}

type Compiled = Result<Arc<Rule>, String>;

static PROGRAMS: LazyLock<Mutex<HashMap<String, Compiled>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn compile(rule: &str) -> Compiled {
    let mut programs = PROGRAMS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = programs.get(rule) {
        return known.clone();
    }
    if programs.len() >= CACHE_LIMIT {
        programs.clear();
    }
    let compiled = tessera_cel::compile(rule, &VARIABLES)
        .map(|program| {
            let expression = program.expression();
            Arc::new(Rule {
                reads_self: Projection::of(expression, "self"),
                reads_old: Projection::of(expression, "oldSelf"),
                program,
            })
        })
        .map_err(|e| e.0);
    programs.insert(rule.to_string(), compiled.clone());
    compiled
}

/// Whether a rule compiles (for validating CRDs): cel-go's error when it does not.
pub fn compiles(rule: &str) -> Result<(), String> {
    compile(rule).map(drop)
}

fn type_word(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    }
}

/// Evaluates every rule in the schema against an object (and its previous version).
pub fn check(schema: Schema<'_>, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    walk(schema, object, old, false, FieldPath::Root, &mut causes);
    causes
}

/// `unchanged`: the value equals its correlated old value (an ancestor's did). Rules that
/// do not read `oldSelf` are not evaluated there: upstream ratchets their errors on
/// unchanged values (`CRDValidationRatcheting`, on by default since 1.30), so an object
/// stored under older rules can still be written; transition rules always run.
fn walk(
    schema: Schema<'_>,
    value: &Value,
    old: Option<&Value>,
    unchanged: bool,
    path: FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    let Some(node) = schema.resolved() else {
        return;
    };
    let unchanged = unchanged || old.is_some_and(|old| old == value);
    if let Some(rules) = node
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        evaluate_node(rules, value, old, unchanged, path, causes);
    }
    match value {
        Value::Object(map) => {
            let properties = node.get("properties").and_then(Value::as_object);
            let additional = node.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                let child_schema = match properties.and_then(|p| p.get(key)) {
                    Some(property) => Schema::of(property),
                    None => match additional {
                        Some(additional) => Schema::of(additional),
                        None => continue,
                    },
                };
                let old_child = old.and_then(|o| o.get(key));
                let path = FieldPath::Field(&path, key);
                walk(child_schema, child, old_child, unchanged, path, causes);
            }
        }
        Value::Array(items) => {
            let item_schema = Schema::of(node).items();
            let keys: Vec<&str> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let old_items = old.and_then(Value::as_array);
            for (index, item) in items.iter().enumerate() {
                // Old list items correlate only in map lists, by their keys.
                let old_item = if keys.is_empty() {
                    None
                } else {
                    old_items.and_then(|olds| {
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                    })
                };
                let path = FieldPath::Index(&path, index);
                walk(item_schema, item, old_item, unchanged, path, causes);
            }
        }
        _ => {}
    }
}

/// The rules of one schema node: those to run (not skipped for want of an old value or by
/// ratcheting) are evaluated in one scope.
fn evaluate_node(
    rules: &[Value],
    value: &Value,
    old: Option<&Value>,
    unchanged: bool,
    path: FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    let mut running = Vec::with_capacity(rules.len());
    for rule in rules {
        let Some(text) = rule.get("rule").and_then(Value::as_str) else {
            continue;
        };
        let compiled = compile(text);
        if let Ok(compiled) = &compiled
            && (if compiled.transition() {
                old.is_none()
            } else {
                unchanged
            })
        {
            continue;
        }
        running.push((rule, text, compiled));
    }
    if running.is_empty() {
        return;
    }
    let mut bound = Bound::new(value, old, matches!(path, FieldPath::Root));
    for (_, _, compiled) in &running {
        if let Ok(compiled) = compiled {
            bound.reads(compiled);
        }
    }
    for (rule, text, compiled) in &running {
        evaluate(rule, text, compiled, &mut bound, path, causes);
    }
}

/// The rule as upstream names it in errors: its message, or its text.
fn rule_error_string<'r>(rule: &'r Value, text: &'r str) -> &'r str {
    rule.get("message")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .unwrap_or(text.trim())
}

/// A schema node's `self` and `oldSelf`, bound once in one scope for all of the node's rules
/// (a Workload's seven root rules would otherwise convert the whole object and its old
/// version seven times each), each converted only as far as those rules read it.
struct Bound<'v> {
    value: &'v Value,
    old: Option<&'v Value>,
    /// Whether the values are whole objects, whose `metadata` rules see only in part.
    root: bool,
    reads_self: Projection,
    reads_old: Projection,
    /// The scope, or why a value did not convert; made at the first rule.
    scope: Option<Result<cel::Context<'static, 'static>, String>>,
}

impl<'v> Bound<'v> {
    fn new(value: &'v Value, old: Option<&'v Value>, root: bool) -> Bound<'v> {
        Bound {
            value,
            old,
            root,
            reads_self: Projection::Nothing,
            reads_old: Projection::Nothing,
            scope: None,
        }
    }

    /// Converts what `rule` reads too.
    fn reads(&mut self, rule: &Rule) {
        self.reads_self.union(&rule.reads_self);
        self.reads_old.union(&rule.reads_old);
    }

    /// The scope with `self` (and `oldSelf` when there is an old value) bound, as far as
    /// the rules read them.
    fn scope(&mut self) -> &Result<cel::Context<'static, 'static>, String> {
        let Bound {
            value,
            old,
            root,
            reads_self,
            reads_old,
            scope,
        } = self;
        scope.get_or_insert_with(|| {
            let convert = |value: &Value, read: &Projection| {
                cel::to_value(Projected::new(value, read, *root)).map_err(|e| e.to_string())
            };
            let mut scope = tessera_cel::root().new_inner_scope();
            if !reads_self.is_nothing() {
                scope.add_variable_from_value("self", convert(value, reads_self)?);
            }
            if let Some(old) = old.filter(|_| !reads_old.is_nothing()) {
                scope.add_variable_from_value("oldSelf", convert(old, reads_old)?);
            }
            Ok(scope)
        })
    }
}

fn evaluate(
    rule: &Value,
    text: &str,
    compiled: &Compiled,
    bound: &mut Bound<'_>,
    path: FieldPath<'_>,
    causes: &mut Vec<Cause>,
) {
    let value = bound.value;
    let shown = Value::String(type_word(value).into());
    let cannot_evaluate = |causes: &mut Vec<Cause>, detail: String| {
        causes.push(Cause::invalid(path.to_string(), &shown, detail));
    };
    let compiled = match compiled {
        Ok(compiled) => compiled,
        Err(error) => return cannot_evaluate(causes, format!("rule compile error: {error}")),
    };
    let named = rule_error_string(rule, text);
    let context = match bound.scope() {
        Ok(context) => context,
        Err(error) => {
            return cannot_evaluate(causes, format!("{error} evaluating rule: {named}"));
        }
    };
    let holds = match compiled.program.execute(context) {
        Ok(cel::Value::Bool(holds)) => holds,
        Ok(other) => {
            return cannot_evaluate(
                causes,
                format!(
                    "must evaluate to bool, not {:?}, evaluating rule: {named}",
                    other.type_of()
                ),
            );
        }
        Err(
            error @ (cel::ExecutionError::NoSuchOverload(_)
            | cel::ExecutionError::NotSupportedAsMethod { .. }
            | cel::ExecutionError::UnsupportedTargetType { .. }),
        ) => {
            return cannot_evaluate(
                causes,
                format!(
                    "'{error}': call arguments did not match a supported operator, function or macro signature for rule: {named}"
                ),
            );
        }
        Err(error) => return cannot_evaluate(causes, format!("{error} evaluating rule: {named}")),
    };
    if holds {
        return;
    }
    let message = rule
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| format!("failed rule: {text}"), str::to_string);
    let field = match rule.get("fieldPath").and_then(Value::as_str) {
        Some(extra) => format!("{path}{extra}").trim_start_matches('.').to_string(),
        None => path.to_string(),
    };
    let reason = rule.get("reason").and_then(Value::as_str);
    causes.push(match reason {
        Some("FieldValueForbidden") => Cause::forbidden(field, message),
        Some("FieldValueRequired") => Cause {
            reason: "FieldValueRequired",
            field,
            message: format!("Required value: {message}"),
        },
        Some("FieldValueDuplicate") => Cause {
            reason: "FieldValueDuplicate",
            field,
            message: format!("Duplicate value: {message}"),
        },
        _ => Cause::invalid(field, &Value::String(type_word(value).into()), message),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "has(self.minCount) ? self.minCount <= self.count : true", "message": "minCount must not exceed count"},
            {"rule": "self.tags.all(t, t in ['a', 'b'])", "fieldPath": ".tags", "reason": "FieldValueForbidden"},
            {"rule": "self.count >= oldSelf.count", "message": "count may not decrease"},
            {"rule": "self.name.startsWith('x') || self.name.lowerAscii().split('-').size() > 1"}
        ],
        "properties": {
            "count": {"type": "integer"}, "minCount": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "immutable": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]}
        }}}})
    }

    #[test]
    fn rules_on_the_root_see_only_the_name_and_generate_name_of_metadata() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name == 'w' && self.metadata.generateName == 'w-'"},
            {"rule": "!has(self.metadata.labels)", "message": "labels are hidden"},
            {"rule": "has(self.spec.x)", "message": "spec is whole"},
        ]});
        let object = json!({"metadata": {"name": "w", "generateName": "w-",
            "labels": {"a": "b"}, "managedFields": [{"manager": "m"}]}, "spec": {"x": 1}});
        assert_eq!(
            check(Schema::of(&schema), &object, None),
            Vec::<Cause>::new()
        );
    }

    #[test]
    fn rules_hold_or_name_their_field() {
        let schema_value = schema();
        let schema = Schema::of(&schema_value);
        let ok = json!({"spec": {"count": 3, "minCount": 2, "tags": ["a"], "name": "xy", "immutable": "v"}});
        assert_eq!(check(schema, &ok, None), vec![]);
        let bad = json!({"spec": {"count": 1, "minCount": 2, "tags": ["c"], "name": "xy"}});
        let causes = check(schema, &bad, None);
        let summary: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "spec",
                    "Invalid value: \"object\": minCount must not exceed count"
                ),
                (
                    "spec.tags",
                    "Forbidden: failed rule: self.tags.all(t, t in ['a', 'b'])"
                ),
            ]
        );
    }

    #[test]
    fn transition_rules_compare_with_the_old_object() {
        let schema_value = schema();
        let schema = Schema::of(&schema_value);
        let old = json!({"spec": {"count": 5, "tags": [], "name": "x", "immutable": "v1"}});
        let new = json!({"spec": {"count": 4, "tags": [], "name": "x", "immutable": "v2"}});
        let messages: Vec<String> = check(schema, &new, Some(&old))
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(
            messages,
            [
                "spec: Invalid value: \"object\": count may not decrease",
                "spec.immutable: Invalid value: \"string\": Value is immutable",
            ]
        );
    }

    /// Ratcheting as upstream: a value stored before a rule forbade it may stay as it is
    /// (its non-transition rules are not held against it while it is unchanged), but a
    /// changed value must satisfy them, and transition rules run on unchanged values too.
    #[test]
    fn unchanged_values_ratchet_their_rules() {
        let schema_value = json!({"type": "object", "properties": {
            "spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.count < 10", "message": "too many"}],
                "properties": {"count": {"type": "integer"}}},
            "status": {"type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.phase != 'Bad'", "message": "bad phase"},
                    {"rule": "oldSelf.phase == 'Bad' || self.phase == oldSelf.phase", "message": "phase is fixed"}],
                "properties": {"phase": {"type": "string"}}}}});
        let schema = Schema::of(&schema_value);
        let messages = |new: &Value, old: &Value| -> Vec<String> {
            check(schema, new, Some(old))
                .into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect()
        };
        let old = json!({"spec": {"count": 12}, "status": {"phase": "Bad"}});
        // Only the status moves: the spec stored under a looser rule is left alone.
        let next = json!({"spec": {"count": 12}, "status": {"phase": "Good"}});
        assert_eq!(messages(&next, &old), Vec::<String>::new());
        // A changed spec must hold.
        let next = json!({"spec": {"count": 11}, "status": {"phase": "Bad"}});
        assert_eq!(
            messages(&next, &old),
            ["spec: Invalid value: \"object\": too many"]
        );
        // Transition rules run on unchanged values; without an old value nothing ratchets.
        let old = json!({"spec": {"count": 1}, "status": {"phase": "Good"}});
        let next = json!({"spec": {"count": 1}, "status": {"phase": "Other"}});
        assert_eq!(
            messages(&next, &old),
            ["status: Invalid value: \"object\": phase is fixed"]
        );
        let bad = json!({"spec": {"count": 12}, "status": {"phase": "Good"}});
        assert_eq!(check(schema, &bad, None).len(), 1);
    }

    #[test]
    fn properties_named_by_reserved_words_are_escaped() {
        let schema_value = json!({"type": "object", "properties": {"ref": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "has(self.name) && has(self.__namespace__)",
                "message": "both must be set"}]}}});
        let schema = Schema::of(&schema_value);
        let set = json!({"ref": {"name": "a", "namespace": "b"}});
        assert!(check(schema, &set, None).is_empty());
        let unset = json!({"ref": {"name": "a"}});
        assert_eq!(check(schema, &unset, None).len(), 1);
    }

    /// A rule that cannot be evaluated never admits the object: it is an error at the rule's
    /// field naming the rule, whether it does not compile (stored before compilation was
    /// checked), fails at run time, or calls a function with arguments no overload takes.
    #[test]
    fn rules_that_cannot_be_evaluated_fail_closed() {
        let schema_value = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
        "x-kubernetes-validations": [
            {"rule": "self.name.quantityLike()"},
            {"rule": "self.missing == 1", "message": "missing must be one"},
            {"rule": "self.count / 0 == 1"},
            {"rule": "self.name.lowerAscii(1) == 'x'"},
            {"rule": "self.name.upperAscii() == 'AB' && url('https://a.example/p').getHost() == 'a.example'"}
        ]}}});
        let schema = Schema::of(&schema_value);
        let object = json!({"spec": {"name": "ab", "count": 1}});
        let messages: Vec<String> = check(schema, &object, None)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let want = [
            "spec: Invalid value: \"object\": rule compile error: ERROR: <input>:1:23: undeclared reference to 'quantityLike' (in container '')",
            "spec: Invalid value: \"object\": No such key: missing evaluating rule: missing must be one",
            "spec: Invalid value: \"object\": ",
            "spec: Invalid value: \"object\": '",
        ];
        assert_eq!(messages.len(), want.len(), "{messages:#?}");
        for (message, want) in messages.iter().zip(want) {
            assert!(message.starts_with(want), "{message}");
        }
        assert!(
            messages[2].ends_with("evaluating rule: self.count / 0 == 1"),
            "{}",
            messages[2]
        );
        assert!(
            messages[3].ends_with("call arguments did not match a supported operator, function or macro signature for rule: self.name.lowerAscii(1) == 'x'"),
            "{}",
            messages[3]
        );
    }

    /// The rules of a schema, anywhere in it.
    fn rules_in<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Array(list)) = map.get("x-kubernetes-validations") {
                    out.extend(list.iter().filter_map(|r| r.get("rule")?.as_str()));
                }
                map.values().for_each(|v| rules_in(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| rules_in(v, out)),
            _ => {}
        }
    }

    /// The published CRDs the end-to-end tests install (kueue, JobSet, LWS,
    /// scheduler-plugins), by file name.
    fn published_crds() -> Vec<(String, Value)> {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/upstream");
        let mut crds = Vec::new();
        for project in std::fs::read_dir(&root).expect("fixtures") {
            let dir = project.expect("entry").path();
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = file.file_name().to_string_lossy().to_string();
                if !(name.starts_with("crd-") && name.ends_with(".yaml")) {
                    continue;
                }
                let text = std::fs::read_to_string(file.path()).expect("readable");
                crds.push((name, serde_saphyr::from_str(&text).expect("a CRD")));
            }
        }
        crds.sort_by(|a, b| a.0.cmp(&b.0));
        crds
    }

    /// Every rule of the published CRDs compiles in the environment: refusing undeclared
    /// functions must not refuse real CRDs.
    #[test]
    fn the_rules_of_published_crds_compile() {
        let mut checked = 0;
        for (name, crd) in published_crds() {
            let mut found = Vec::new();
            rules_in(&crd, &mut found);
            for rule in found {
                assert_eq!(compiles(rule), Ok(()), "{name}: {rule}");
                checked += 1;
            }
        }
        assert!(checked > 50, "{checked} rules");
    }

    /// Values made from a schema by a seeded generator, with strings drawn from the enums
    /// and the literals the rules compare with, so that the rules' conditions are met as
    /// well as missed.
    struct Maker {
        state: u64,
        words: Vec<String>,
    }

    impl Maker {
        fn next(&mut self, below: u64) -> u64 {
            self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)) % below
        }

        fn word(&mut self, node: &Value) -> Value {
            if let Some(Value::Array(choices)) = node.get("enum")
                && !choices.is_empty()
                && self.next(4) > 0
            {
                return choices[self.next(choices.len() as u64) as usize].clone();
            }
            let index = self.next(self.words.len() as u64) as usize;
            Value::String(self.words[index].clone())
        }

        fn value(&mut self, node: &Value, depth: usize) -> Value {
            let kind = node.get("type").and_then(Value::as_str).unwrap_or("");
            let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            match kind {
                "object" if depth < 7 => {
                    let mut object = serde_json::Map::new();
                    if let Some(Value::Object(properties)) = node.get("properties") {
                        for (name, property) in properties {
                            if self.next(3) > 0 {
                                object.insert(name.clone(), self.value(property, depth + 1));
                            }
                        }
                    }
                    if let Some(additional) =
                        node.get("additionalProperties").filter(|a| a.is_object())
                    {
                        for _ in 0..self.next(3) {
                            let key = self.word(&Value::Null);
                            if let Value::String(key) = key {
                                object.insert(key, self.value(additional, depth + 1));
                            }
                        }
                    }
                    Value::Object(object)
                }
                "object" => Value::Object(serde_json::Map::new()),
                "array" => {
                    let items = node.get("items").cloned().unwrap_or(Value::Null);
                    let count = if depth < 7 { self.next(4) } else { 0 };
                    Value::Array((0..count).map(|_| self.value(&items, depth + 1)).collect())
                }
                "integer" | "number" => Value::from(self.next(5)),
                "boolean" => Value::Bool(self.next(2) == 1),
                _ if int_or_string && self.next(2) == 0 => Value::from(self.next(5)),
                _ => self.word(node),
            }
        }
    }

    /// Every schema node with rules, and whether it is the root.
    fn rule_nodes<'v>(node: &'v Value, root: bool, out: &mut Vec<(&'v Value, bool)>) {
        let Value::Object(map) = node else {
            return;
        };
        if map.contains_key("x-kubernetes-validations") {
            out.push((node, root));
        }
        if let Some(Value::Object(properties)) = map.get("properties") {
            properties.values().for_each(|p| rule_nodes(p, false, out));
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = map.get(key) {
                rule_nodes(child, false, out);
            }
        }
    }

    /// What one rule answers for a value (and old value), converted as far as the node's
    /// rules read it, or whole.
    fn answer(
        rules: &[Value],
        text: &str,
        value: &Value,
        old: Option<&Value>,
        root: bool,
        whole: bool,
    ) -> String {
        let compiled = compile(text).expect("compiles");
        let mut bound = Bound::new(value, old, root);
        if whole {
            bound.reads_self = Projection::Whole;
            bound.reads_old = Projection::Whole;
        } else {
            for rule in rules.iter().filter_map(|r| r.get("rule")?.as_str()) {
                bound.reads(&compile(rule).expect("compiles"));
            }
        }
        let answer = match bound.scope() {
            Ok(scope) => compiled.program.execute(scope).map_err(|e| e.to_string()),
            Err(error) => Err(error.clone()),
        };
        format!("{answer:?}")
    }

    /// Converting only what the rules read never changes what they answer: every rule of
    /// the published CRDs, over values generated from its node's schema (the old value the
    /// same, or another), answers the same as over the values converted whole.
    #[test]
    fn rules_answer_the_same_over_the_parts_they_read() {
        let quoted = regex::Regex::new("'([^']*)'").expect("a pattern");
        let mut compared = 0;
        let mut held = 0;
        for (name, crd) in published_crds() {
            let mut texts = Vec::new();
            rules_in(&crd, &mut texts);
            let mut words: Vec<String> = texts
                .iter()
                .flat_map(|text| quoted.captures_iter(text).map(|c| c[1].to_owned()))
                .collect();
            words.extend(["x".to_owned(), "True".to_owned()]);
            let versions = crd["spec"]["versions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for version in &versions {
                let schema = &version["schema"]["openAPIV3Schema"];
                let mut nodes = Vec::new();
                rule_nodes(schema, true, &mut nodes);
                for (node, root) in nodes {
                    let rules = node["x-kubernetes-validations"].as_array().expect("rules");
                    for seed in 0..48 {
                        let mut maker = Maker {
                            state: seed,
                            words: words.clone(),
                        };
                        let value = maker.value(node, 0);
                        let old = match seed % 3 {
                            0 => None,
                            1 => Some(value.clone()),
                            _ => Some(maker.value(node, 0)),
                        };
                        for text in rules.iter().filter_map(|r| r.get("rule")?.as_str()) {
                            let projected = answer(rules, text, &value, old.as_ref(), root, false);
                            let whole = answer(rules, text, &value, old.as_ref(), root, true);
                            assert_eq!(
                                projected, whole,
                                "{name}: {text}\nself: {value}\noldSelf: {old:?}"
                            );
                            compared += 1;
                            held += usize::from(whole == "Ok(Bool(true))");
                        }
                    }
                }
            }
        }
        assert!(compared > 3_000, "{compared} answers compared");
        assert!(
            held > compared / 10 && held < compared,
            "{held} of {compared} held"
        );
    }
}
