//! Matching a `v1.NodeSelector` against a node, as upstream's `nodeaffinity` helpers do: the
//! terms are ORed, a term's requirements ANDed; `matchExpressions` test labels (`In`,
//! `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`), `matchFields` test `metadata.name`; a term
//! with no requirements matches nothing. Pure; used by DRA (slice and allocation node
//! selectors) and by node affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Whether the node `name` with `labels` satisfies `selector`.
pub fn matches(selector: &NodeSelector, name: &str, labels: &BTreeMap<String, String>) -> bool {
    selector
        .node_selector_terms
        .iter()
        .any(|term| term_matches(term, name, labels))
}

/// Whether one term matches.
pub fn term_matches(
    term: &NodeSelectorTerm,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name);
            value.is_some() && requirement_matches(r, value)
        })
}

fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |text: &str| text.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| values.iter().all(|w| w != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [bound]) = (value.and_then(number), values) else {
                return false;
            };
            let Some(bound) = number(bound) else {
                return false;
            };
            if requirement.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(json: serde_json::Value) -> NodeSelector {
        serde_json::from_value(json).expect("selector")
    }

    #[test]
    fn terms_are_ored_and_requirements_anded() {
        let labels = BTreeMap::from([
            ("zone".to_string(), "a".to_string()),
            ("gpus".to_string(), "8".to_string()),
        ]);
        let table = [
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}),
                true,
            ),
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]}),
                false,
            ),
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}, {"key": "rack", "operator": "DoesNotExist"}]}]}),
                true,
            ),
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpus", "operator": "Lt", "values": ["x"]}]}]}),
                false,
            ),
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}),
                true,
            ),
            (
                serde_json::json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}, {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}),
                true,
            ),
            (serde_json::json!({"nodeSelectorTerms": [{}]}), false),
            (serde_json::json!({"nodeSelectorTerms": []}), false),
        ];
        for (i, (json, want)) in table.into_iter().enumerate() {
            assert_eq!(matches(&selector(json), "n1", &labels), want, "case {i}");
        }
    }
}
