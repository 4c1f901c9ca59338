//! Object metadata rules: names, generated names, labels, annotations, timestamps and the
//! fields only the server may set.
//!
//! Knows nothing about storage or HTTP, and draws no randomness: generated names take their
//! suffix from the caller's seeded [`Ids`].

pub use tessera_model::time::{micro_timestamp, parse_timestamp, timestamp};

use serde_json::{Map, Value, json};
use tessera_model::ids::Ids;
use tessera_model::json::Pointer as _;

use crate::error::Cause;
use crate::resource::{NameRule, Resource, check_name};

/// A name made from a `generateName` prefix (cut to 58 characters, as upstream does) and a
/// five-character suffix drawn from `ids`.
pub fn generate_name(prefix: &str, ids: &Ids) -> String {
    let prefix: String = prefix.chars().take(58).collect();
    format!("{prefix}{}", ids.name_suffix())
}

/// The object's `metadata`, created if missing or not a map.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        _ => unreachable!("metadata was just made a map"),
    }
}

/// A string field of `metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Drops empty metadata lists and maps, which upstream never stores (`omitempty`).
pub fn normalize_metadata(object: &mut Value) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.retain(|key, value| {
            let empty = match value {
                Value::Array(items) => items.is_empty(),
                Value::Object(map) => map.is_empty(),
                _ => false,
            };
            !(empty
                && matches!(
                    key.as_str(),
                    "finalizers" | "ownerReferences" | "labels" | "annotations" | "managedFields"
                ))
        });
    }
}

/// The object's finalizers.
pub fn finalizers(object: &Value) -> Vec<String> {
    tessera_model::json::strings_at(object, "/metadata/finalizers")
}

/// Whether deletion of the object has begun.
pub fn is_deleting(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// Checks the metadata a client supplied: name, labels and annotations.
pub fn check_metadata(resource: Resource, object: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = meta_str(object, "name").unwrap_or_default();
    if let Some(problem) = check_name(name, resource.name_rule()) {
        causes.push(Cause::invalid("metadata.name", &json!(name), problem));
    }
    if let Some(Value::Object(labels)) = object.at("/metadata/labels") {
        for (key, value) in labels {
            let field = "metadata.labels";
            if let Some(problem) = check_qualified_name(key) {
                causes.push(Cause::invalid(field, &json!(key), problem));
            }
            if let Some(value) = value.as_str()
                && let Some(problem) = check_label_value(value)
            {
                causes.push(Cause::invalid(field, &json!(value), problem));
            }
        }
    }
    if let Some(Value::Object(annotations)) = object.at("/metadata/annotations") {
        let mut total = 0;
        for (key, value) in annotations {
            total += key.len() + value.as_str().map_or(0, str::len);
            if let Some(problem) = check_qualified_name(key) {
                causes.push(Cause::invalid("metadata.annotations", &json!(key), problem));
            }
        }
        if total > 256 * 1024 {
            causes.push(Cause {
                reason: "FieldValueTooLong",
                field: "metadata.annotations".into(),
                message: "Too long: must have at most 262144 bytes".into(),
            });
        }
    }
    causes
}

/// Checks a label or annotation key: an optional DNS subdomain prefix and a name.
pub fn check_qualified_name(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && check_name(prefix, NameRule::Subdomain).is_some()
    {
        return Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into());
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    (!ok).then(|| "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".into())
}

/// Checks a label value: empty, or at most 63 alphanumerics, `-`, `_` or `.`, starting and
/// ending alphanumerically.
pub fn check_label_value(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let ok = value.len() <= 63
        && value.starts_with(alnum)
        && value.ends_with(alnum)
        && value
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    (!ok).then(|| "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::ids::SUFFIX_ALPHABET;

    #[test]
    fn generated_names_keep_the_prefix() {
        let name = generate_name("web-", &Ids::seeded(3));
        assert!(name.starts_with("web-") && name.len() == 9);
        assert!(name[4..].bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }

    #[test]
    fn label_keys_and_values() {
        assert!(check_qualified_name("app").is_none());
        assert!(check_qualified_name("nvidia.com/gpu.product").is_none());
        assert!(check_qualified_name("Bad Key").is_some());
        assert!(check_qualified_name("UPPER.example/x").is_some());
        assert!(check_label_value("NVIDIA-H100-80GB-HBM3").is_none());
        assert!(check_label_value("has space").is_some());
        assert!(check_label_value(&"a".repeat(64)).is_some());
    }
}
