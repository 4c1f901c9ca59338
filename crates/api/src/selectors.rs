//! Label and field selectors: parsing the query-string grammar and matching objects.
//!
//! Label selectors support `=`, `==`, `!=`, `in`, `notin`, existence, `!key`, `>` and `<` as
//! `k8s.io/apimachinery/pkg/labels` does; field selectors support `=`, `==` and `!=` on the
//! fields each kind declares selectable (always `metadata.name` and `metadata.namespace`).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<(String, LabelOp)>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector: {part:?}"
                ))
            })?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether a set of labels satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|(key, op)| {
            let value = labels.get(key);
            match op {
                LabelOp::Equals(want) => value == Some(want),
                LabelOp::NotEquals(want) => value != Some(want),
                LabelOp::In(set) => value.is_some_and(|v| set.contains(v)),
                LabelOp::NotIn(set) => value.is_none_or(|v| !set.contains(v)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::GreaterThan(bound) => value
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v > *bound),
                LabelOp::LessThan(bound) => value
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|v| v < *bound),
            }
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (index, ch) in text.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    let values: Vec<String> = inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    values.iter().all(|v| valid_value(v)).then_some(values)
}

fn parse_requirement(part: &str) -> Option<(String, LabelOp)> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| (key.to_string(), LabelOp::DoesNotExist));
    }
    for (token, build) in [
        (" notin ", LabelOp::NotIn as fn(Vec<String>) -> LabelOp),
        (" in ", LabelOp::In),
    ] {
        if let Some((key, rest)) = part.split_once(token) {
            let key = key.trim();
            return (valid_key(key))
                .then_some(())
                .and_then(|_| parse_set(rest))
                .map(|set| (key.to_string(), build(set)));
        }
    }
    type Build = fn(&str) -> Option<LabelOp>;
    let operators: [(&str, Build); 5] = [
        ("!=", |v| Some(LabelOp::NotEquals(v.to_string()))),
        ("==", |v| Some(LabelOp::Equals(v.to_string()))),
        ("=", |v| Some(LabelOp::Equals(v.to_string()))),
        (">", |v| v.parse().ok().map(LabelOp::GreaterThan)),
        ("<", |v| v.parse().ok().map(LabelOp::LessThan)),
    ];
    for (token, build) in operators {
        if let Some((key, value)) = part.split_once(token) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) || !valid_value(value) {
                return None;
            }
            return build(value).map(|op| (key.to_string(), op));
        }
    }
    valid_key(part).then(|| (part.to_string(), LabelOp::Exists))
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter, accepting only the given fields.
    pub fn parse(text: &str, selectable: &[&str]) -> Result<FieldSelector, ApiError> {
        let mut requirements = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !selectable.contains(&field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            requirements.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value an `=` requirement demands of a field, if any.
    pub fn required_value(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|(f, equal, _)| f == field && *equal)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether an object satisfies every requirement; absent fields read as empty strings.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|(field, equal, want)| {
            let actual = field_value(object, field);
            (actual == *want) == *equal
        })
    }
}

/// The string form of a dotted field path in an object, empty when absent.
pub fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for segment in path.split('.') {
        match current.get(segment) {
            Some(next) => current = next,
            None => return String::new(),
        }
    }
    match current {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors_match_like_upstream() {
        let gpu = labels(&[("app", "train"), ("tier", "gpu"), ("replicas", "4")]);
        let table = [
            ("", true),
            ("app=train", true),
            ("app==train", true),
            ("app!=train", false),
            ("app!=serve", true),
            ("missing!=x", true),
            ("app in (train,serve)", true),
            ("app in (serve)", false),
            ("app notin (serve)", true),
            ("missing notin (serve)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=train,tier=gpu", true),
            ("app=train,tier=cpu", false),
            ("app in (a, train),!missing", true),
            ("replicas>3", true),
            ("replicas<3", false),
            ("example.com/team=a", false),
        ];
        for (selector, want) in table {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&gpu), want, "{selector}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_bad_requests() {
        for bad in ["app=(x", "a b=c", "app in x", "=x", "app=a b", "x>y"] {
            let error = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(error.code, 400, "{bad}");
        }
    }

    #[test]
    fn field_selectors_compare_strings_and_reject_unknown_fields() {
        let pod = json!({"metadata": {"name": "p1"}, "spec": {"nodeName": "n1"},
                         "status": {"phase": "Running"}});
        let fields = ["metadata.name", "spec.nodeName", "status.phase"];
        let table = [
            ("spec.nodeName=n1", true),
            ("spec.nodeName==n1", true),
            ("spec.nodeName!=n1", false),
            ("status.phase!=Succeeded,status.phase!=Failed", true),
            ("metadata.name=p2", false),
        ];
        for (selector, want) in table {
            let parsed = FieldSelector::parse(selector, &fields).unwrap();
            assert_eq!(parsed.matches(&pod), want, "{selector}");
        }
        let unscheduled = json!({"metadata": {"name": "p2"}});
        assert!(
            FieldSelector::parse("spec.nodeName=", &fields)
                .unwrap()
                .matches(&unscheduled)
        );
        let error = FieldSelector::parse("spec.foo=bar", &fields).unwrap_err();
        assert_eq!(error.message, "field label not supported: spec.foo");
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No selector text makes parsing panic.
        #[test]
        fn selector_parsing_never_panics(text in "[a-z0-9=!,() <>.-]{0,40}") {
            let _ = LabelSelector::parse(&text);
            let _ = FieldSelector::parse(&text, &["metadata.name"]);
        }

        /// `k=v` matches exactly the label sets holding that pair.
        #[test]
        fn equality_matches_exactly(key in "[a-z]{1,5}", value in "[a-z]{0,5}", other in "[a-z]{0,5}") {
            let selector = LabelSelector::parse(&format!("{key}={value}")).unwrap();
            let mut labels = BTreeMap::new();
            labels.insert(key.clone(), other.clone());
            prop_assert_eq!(selector.matches(&labels), other == value);
        }
    }
}
