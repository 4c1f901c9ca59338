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

/// The variables a rule may read.
const VARIABLES: [&str; 2] = ["self", "oldSelf"];

/// How many compiled rules the cache keeps before it starts over.
const CACHE_LIMIT: usize = 4096;

type Compiled = Result<Arc<cel::Program>, String>;

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
        .map(Arc::new)
        .map_err(|e| e.0);
    programs.insert(rule.to_string(), compiled.clone());
    compiled
}

/// Whether a rule compiles (for validating CRDs): cel-go's error when it does not.
pub fn compiles(rule: &str) -> Result<(), String> {
    compile(rule).map(drop)
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
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
    walk(schema, object, old, false, "", &mut causes);
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
    path: &str,
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
        let mut bound = Bound::new(value, old, path.is_empty());
        for rule in rules {
            evaluate(rule, &mut bound, unchanged, path, causes);
        }
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
                walk(
                    child_schema,
                    child,
                    old_child,
                    unchanged,
                    &join(path, key),
                    causes,
                );
            }
        }
        Value::Array(items) => {
            let item_schema = Schema::of(node).items();
            let keys: Vec<String> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| {
                    k.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect()
                })
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
                walk(
                    item_schema,
                    item,
                    old_item,
                    unchanged,
                    &format!("{path}[{index}]"),
                    causes,
                );
            }
        }
        _ => {}
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
/// version seven times each); `oldSelf` only read by the transition rules.
struct Bound<'v> {
    value: &'v Value,
    old: Option<&'v Value>,
    /// Whether the values are whole objects, whose `metadata` rules see only in part.
    root: bool,
    /// The scope, or why a value did not convert; made at the first rule.
    scope: Option<Result<cel::Context<'static, 'static>, String>>,
}

/// An object as the rules on its root see it: of `metadata`, only `name` and `generateName`
/// (upstream's root declaration type); everything else as it is.
struct RootView<'v>(&'v serde_json::Map<String, Value>);

impl serde::Serialize for RootView<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            match (key.as_str(), value) {
                ("metadata", Value::Object(metadata)) => {
                    let visible: serde_json::Map<String, Value> = metadata
                        .iter()
                        .filter(|(field, _)| matches!(field.as_str(), "name" | "generateName"))
                        .map(|(field, value)| (field.clone(), value.clone()))
                        .collect();
                    map.serialize_entry(key, &visible)?;
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
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

fn has_reserved_key(value: &Value) -> bool {
    match value {
        Value::Object(object) => object
            .iter()
            .any(|(key, v)| RESERVED.contains(&key.as_str()) || has_reserved_key(v)),
        Value::Array(items) => items.iter().any(has_reserved_key),
        _ => false,
    }
}

/// `value` with every property named by a reserved word escaped.
fn escape_reserved(value: &Value) -> Value {
    match value {
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, v)| {
                    let key = if RESERVED.contains(&key.as_str()) {
                        format!("__{key}__")
                    } else {
                        key.clone()
                    };
                    (key, escape_reserved(v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(escape_reserved).collect()),
        other => other.clone(),
    }
}

/// A value as the interpreter sees it: a whole object (`root`) through [`RootView`], and
/// properties named by reserved words escaped.
fn self_convert(root: bool, value: &Value) -> Result<cel::Value, String> {
    let escaped;
    let value = if has_reserved_key(value) {
        escaped = escape_reserved(value);
        &escaped
    } else {
        value
    };
    match (root, value) {
        (true, Value::Object(object)) => cel::to_value(RootView(object)),
        _ => cel::to_value(value),
    }
    .map_err(|error| error.to_string())
}

impl<'v> Bound<'v> {
    fn new(value: &'v Value, old: Option<&'v Value>, root: bool) -> Bound<'v> {
        Bound {
            value,
            old,
            root,
            scope: None,
        }
    }

    /// The scope with `self` (and `oldSelf` when there is an old value) bound.
    fn scope(&mut self) -> &Result<cel::Context<'static, 'static>, String> {
        let (value, old, root) = (self.value, self.old, self.root);
        let convert = |v: &Value| self_convert(root, v);
        self.scope.get_or_insert_with(|| {
            let mut scope = tessera_cel::root().new_inner_scope();
            scope.add_variable_from_value("self", convert(value)?);
            if let Some(old) = old {
                scope.add_variable_from_value("oldSelf", convert(old)?);
            }
            Ok(scope)
        })
    }
}

fn evaluate(
    rule: &Value,
    bound: &mut Bound<'_>,
    unchanged: bool,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    let Some(text) = rule.get("rule").and_then(Value::as_str) else {
        return;
    };
    let value = bound.value;
    let shown = Value::String(type_word(value).into());
    let cannot_evaluate = |causes: &mut Vec<Cause>, detail: String| {
        causes.push(Cause::invalid(path, &shown, detail));
    };
    let program = match compile(text) {
        Ok(program) => program,
        Err(error) => return cannot_evaluate(causes, format!("rule compile error: {error}")),
    };
    let transition = program.references().has_variable("oldSelf");
    if (transition && bound.old.is_none()) || (!transition && unchanged) {
        return;
    }
    let named = rule_error_string(rule, text);
    let context = match bound.scope() {
        Ok(context) => context,
        Err(error) => {
            return cannot_evaluate(causes, format!("{error} evaluating rule: {named}"));
        }
    };
    let holds = match program.execute(context) {
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

    /// Every rule of the published CRDs the end-to-end tests install (kueue, JobSet, LWS,
    /// scheduler-plugins) compiles in the environment: refusing undeclared functions must not
    /// refuse real CRDs.
    #[test]
    fn the_rules_of_published_crds_compile() {
        fn rules<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::Array(list)) = map.get("x-kubernetes-validations") {
                        out.extend(list.iter().filter_map(|r| r.get("rule")?.as_str()));
                    }
                    map.values().for_each(|v| rules(v, out));
                }
                Value::Array(items) => items.iter().for_each(|v| rules(v, out)),
                _ => {}
            }
        }
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/fixtures/upstream");
        let mut checked = 0;
        for project in std::fs::read_dir(&root).expect("fixtures") {
            let dir = project.expect("entry").path();
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let name = file.file_name().to_string_lossy().to_string();
                if !(name.starts_with("crd-") && name.ends_with(".yaml")) {
                    continue;
                }
                let text = std::fs::read_to_string(file.path()).expect("readable");
                let crd: Value = serde_saphyr::from_str(&text).expect("a CRD");
                let mut found = Vec::new();
                rules(&crd, &mut found);
                for rule in found {
                    assert_eq!(compiles(rule), Ok(()), "{name}: {rule}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 50, "{checked} rules");
    }
}
