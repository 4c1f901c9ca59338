//! JSON as Go's `encoding/json` writes the core/v1 pod-spec structs Kueue's role hash marshals
//! (`SpecShape`: affinity, tolerations, topology spread constraints, resource claims): struct
//! fields in declaration order, `omitempty` fields left out when empty, the others written
//! with their zero value, maps with sorted keys, `<`, `>` and `&` escaped.
//!
//! Knows only the shapes of these structs (from k8s.io/api core/v1 and apimachinery meta/v1);
//! not what the hash is for.

use serde_json::Value;

/// A Go type as `encoding/json` sees it.
pub enum Go {
    /// A string.
    Str,
    /// An integer.
    Int,
    /// A `map[string]string`: sorted keys, nil is `null`.
    Map,
    /// A slice: nil is `null`.
    List(&'static Go),
    /// A pointer: nil is `null`.
    Ptr(&'static Go),
    /// A struct: `(json name, omitempty, type)` in declaration order.
    Struct(&'static [(&'static str, bool, Go)]),
}

const STRINGS: Go = Go::List(&Go::Str);

/// meta/v1 `LabelSelectorRequirement` (and core/v1 `NodeSelectorRequirement`, same shape).
const REQUIREMENT: Go = Go::Struct(&[
    ("key", false, Go::Str),
    ("operator", false, Go::Str),
    ("values", true, STRINGS),
]);

/// meta/v1 `LabelSelector`.
const LABEL_SELECTOR: Go = Go::Struct(&[
    ("matchLabels", true, Go::Map),
    ("matchExpressions", true, Go::List(&REQUIREMENT)),
]);

/// `NodeSelectorTerm`.
const NODE_SELECTOR_TERM: Go = Go::Struct(&[
    ("matchExpressions", true, Go::List(&REQUIREMENT)),
    ("matchFields", true, Go::List(&REQUIREMENT)),
]);

/// `NodeAffinity`.
const NODE_AFFINITY: Go = Go::Struct(&[
    (
        "requiredDuringSchedulingIgnoredDuringExecution",
        true,
        Go::Ptr(&Go::Struct(&[(
            "nodeSelectorTerms",
            false,
            Go::List(&NODE_SELECTOR_TERM),
        )])),
    ),
    (
        "preferredDuringSchedulingIgnoredDuringExecution",
        true,
        Go::List(&Go::Struct(&[
            ("weight", false, Go::Int),
            ("preference", false, NODE_SELECTOR_TERM),
        ])),
    ),
]);

/// `PodAffinityTerm`.
const POD_AFFINITY_TERM: Go = Go::Struct(&[
    ("labelSelector", true, Go::Ptr(&LABEL_SELECTOR)),
    ("namespaces", true, STRINGS),
    ("topologyKey", false, Go::Str),
    ("namespaceSelector", true, Go::Ptr(&LABEL_SELECTOR)),
    ("matchLabelKeys", true, STRINGS),
    ("mismatchLabelKeys", true, STRINGS),
]);

/// `PodAffinity` and `PodAntiAffinity` (same shape).
const POD_AFFINITY: Go = Go::Struct(&[
    (
        "requiredDuringSchedulingIgnoredDuringExecution",
        true,
        Go::List(&POD_AFFINITY_TERM),
    ),
    (
        "preferredDuringSchedulingIgnoredDuringExecution",
        true,
        Go::List(&Go::Struct(&[
            ("weight", false, Go::Int),
            ("podAffinityTerm", false, POD_AFFINITY_TERM),
        ])),
    ),
]);

/// `*Affinity`.
pub const AFFINITY: Go = Go::Ptr(&Go::Struct(&[
    ("nodeAffinity", true, Go::Ptr(&NODE_AFFINITY)),
    ("podAffinity", true, Go::Ptr(&POD_AFFINITY)),
    ("podAntiAffinity", true, Go::Ptr(&POD_AFFINITY)),
]));

/// `[]Toleration`.
pub const TOLERATIONS: Go = Go::List(&Go::Struct(&[
    ("key", true, Go::Str),
    ("operator", true, Go::Str),
    ("value", true, Go::Str),
    ("effect", true, Go::Str),
    ("tolerationSeconds", true, Go::Ptr(&Go::Int)),
]));

/// `[]TopologySpreadConstraint`.
pub const SPREAD_CONSTRAINTS: Go = Go::List(&Go::Struct(&[
    ("maxSkew", false, Go::Int),
    ("topologyKey", false, Go::Str),
    ("whenUnsatisfiable", false, Go::Str),
    ("labelSelector", true, Go::Ptr(&LABEL_SELECTOR)),
    ("minDomains", true, Go::Ptr(&Go::Int)),
    ("nodeAffinityPolicy", true, Go::Ptr(&Go::Str)),
    ("nodeTaintsPolicy", true, Go::Ptr(&Go::Str)),
    ("matchLabelKeys", true, STRINGS),
]));

/// `[]PodResourceClaim`.
pub const RESOURCE_CLAIMS: Go = Go::List(&Go::Struct(&[
    ("name", false, Go::Str),
    ("resourceClaimName", true, Go::Ptr(&Go::Str)),
    ("resourceClaimTemplateName", true, Go::Ptr(&Go::Str)),
]));

/// A JSON string as Go writes it (`<`, `>`, `&` escaped).
pub fn string(text: &str) -> String {
    serde_json::to_string(text)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// Whether `omitempty` leaves the field out: absent, null, "", 0, an empty map or slice, a
/// nil pointer. (A struct value is never left out.)
fn omitted(shape: &Go, value: Option<&Value>) -> bool {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return !matches!(shape, Go::Struct(_));
    };
    match shape {
        Go::Str => value.as_str() == Some(""),
        Go::Int => value.as_i64() == Some(0),
        Go::Map => value.as_object().is_some_and(|m| m.is_empty()),
        Go::List(_) => value.as_array().is_some_and(|a| a.is_empty()),
        Go::Ptr(_) | Go::Struct(_) => false,
    }
}

/// The value as Go writes a field of this type; absent or null is the zero value.
pub fn encode(shape: &Go, value: Option<&Value>) -> String {
    let value = value.filter(|v| !v.is_null());
    match shape {
        Go::Str => string(value.and_then(Value::as_str).unwrap_or_default()),
        Go::Int => value
            .and_then(Value::as_i64)
            .unwrap_or_default()
            .to_string(),
        Go::Map => match value.and_then(Value::as_object) {
            None => "null".into(),
            Some(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let fields: Vec<String> = keys
                    .into_iter()
                    .map(|k| format!("{}:{}", string(k), encode(&Go::Str, map.get(k))))
                    .collect();
                format!("{{{}}}", fields.join(","))
            }
        },
        Go::List(item) => match value.and_then(Value::as_array) {
            None => "null".into(),
            Some(items) => {
                let items: Vec<String> = items.iter().map(|i| encode(item, Some(i))).collect();
                format!("[{}]", items.join(","))
            }
        },
        Go::Ptr(inner) => match value {
            None => "null".into(),
            Some(value) => encode(inner, Some(value)),
        },
        Go::Struct(fields) => {
            let written: Vec<String> = fields
                .iter()
                .filter(|(name, omitempty, shape)| {
                    !(*omitempty && omitted(shape, value.and_then(|v| v.get(*name))))
                })
                .map(|(name, _, shape)| {
                    format!(
                        "{}:{}",
                        string(name),
                        encode(shape, value.and_then(|v| v.get(*name)))
                    )
                })
                .collect();
            format!("{{{}}}", written.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn structs_are_written_in_go_field_order_with_zero_values() {
        // Expected strings are what `json.Marshal` writes for these k8s.io/api values.
        let cases = [
            (&AFFINITY, json!(null), "null"),
            (&AFFINITY, json!({}), "{}"),
            (
                &AFFINITY,
                json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "zone", "labelSelector": {"matchLabels": {"b": "2", "a": "1"}}}]},
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"values": ["x"], "operator": "In", "key": "k"}]}]}}}),
                r#"{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}]}},"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"a":"1","b":"2"}},"topologyKey":"zone"}]}}"#,
            ),
            (
                &AFFINITY,
                json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"podAffinityTerm": {}, "weight": 5}]}}),
                r#"{"podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"podAffinityTerm":{"topologyKey":""}}]}}"#,
            ),
            (
                &SPREAD_CONSTRAINTS,
                json!([{"whenUnsatisfiable": "DoNotSchedule", "topologyKey": "zone", "maxSkew": 1,
                    "minDomains": 2}]),
                r#"[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","minDomains":2}]"#,
            ),
            (
                &RESOURCE_CLAIMS,
                json!([{"resourceClaimTemplateName": "t", "name": "gpu"}]),
                r#"[{"name":"gpu","resourceClaimTemplateName":"t"}]"#,
            ),
            (
                &TOLERATIONS,
                json!([{"effect": "NoSchedule", "key": "a<b", "operator": "Exists"}]),
                r#"[{"key":"a\u003cb","operator":"Exists","effect":"NoSchedule"}]"#,
            ),
        ];
        for (shape, value, want) in cases {
            assert_eq!(encode(shape, Some(&value)), want, "{value}");
        }
    }
}
