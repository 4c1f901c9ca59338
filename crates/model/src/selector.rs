//! Matching `metav1.LabelSelector`s (matchLabels and matchExpressions) against labels, as
//! workload controllers, disruption budgets and the API server all need. Pure.

use crate::json::Pointer as _;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

/// Whether labels satisfy a LabelSelector given as JSON. A missing selector matches nothing;
/// an empty one matches everything, as upstream's `LabelSelectorAsSelector` does.
pub fn matches(selector: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    if let Some(required) = selector.get("matchLabels").and_then(Value::as_object) {
        for (key, value) in required {
            if labels.get(key).map(String::as_str) != value.as_str() {
                return false;
            }
        }
    }
    if let Some(expressions) = selector.get("matchExpressions").and_then(Value::as_array) {
        for expression in expressions {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let values: Vec<&str> = expression
                .get("values")
                .and_then(Value::as_array)
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let present = labels.get(key);
            let ok = match expression.get("operator").and_then(Value::as_str) {
                Some("In") => present.is_some_and(|v| values.contains(&v.as_str())),
                Some("NotIn") => present.is_none_or(|v| !values.contains(&v.as_str())),
                Some("Exists") => present.is_some(),
                Some("DoesNotExist") => present.is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

/// Whether labels satisfy a typed LabelSelector (an empty selector matches everything).
pub fn matches_typed(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let required = selector.match_labels.iter().flatten();
    for (key, value) in required {
        if labels.get(key) != Some(value) {
            return false;
        }
    }
    selector
        .match_expressions
        .iter()
        .flatten()
        .all(|expression| {
            let values = expression.values.as_deref().unwrap_or_default();
            let present = labels.get(&expression.key);
            match expression.operator.as_str() {
                "In" => present.is_some_and(|v| values.contains(v)),
                "NotIn" => present.is_none_or(|v| !values.contains(v)),
                "Exists" => present.is_some(),
                "DoesNotExist" => present.is_none(),
                _ => false,
            }
        })
}

/// The labels of an object given as JSON.
pub fn labels(object: &Value) -> BTreeMap<String, String> {
    object
        .at("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_match_like_upstream() {
        let labels: BTreeMap<String, String> = [("app", "web"), ("tier", "gpu")]
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        let table = [
            (json!({}), true),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu", "cpu"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "zone", "operator": "Exists"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}),
                false,
            ),
        ];
        for (selector, want) in table {
            assert_eq!(matches(Some(&selector), &labels), want, "{selector}");
        }
        assert!(!matches(None, &labels));
    }
}
