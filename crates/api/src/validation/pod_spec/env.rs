//! A container's environment, as upstream's `ValidateEnv` and `ValidateEnvFrom` check it:
//! variable names and prefixes (the relaxed rule, GA in 1.34), exactly one `valueFrom`
//! source and no literal value beside it, keys of config maps and secrets, the downward-API
//! fields and container resources a variable may read, exactly one `envFrom` source.
//!
//! Knows nothing about whether the config maps or secrets named exist.

use serde_json::{Value, json};

use super::{formats, items, required_text, text};
use crate::error::Cause;

/// Pod fields an environment variable may read (`validEnvDownwardAPIFieldPathExpressions`).
const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Field labels the downward API converts for `v1` (`ConvertDownwardAPIFieldLabel`).
const CONVERTIBLE_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.serviceAccountName",
    "spec.schedulerName",
    "status.phase",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// Container resources an environment variable may read.
const RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

const HUGEPAGES_PREFIXES: &[&str] = &["limits.hugepages-", "requests.hugepages-"];

fn invalid_all(at: &str, value: &str, problems: Vec<String>, causes: &mut Vec<Cause>) {
    causes.extend(
        problems
            .into_iter()
            .map(|problem| Cause::invalid(at, &json!(value), problem)),
    );
}

/// A container's `env`.
pub fn check_env(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    for (index, variable) in items(container, "env").iter().enumerate() {
        let entry = format!("{at}.env[{index}]");
        let name = required_text(variable, "name", &entry, causes);
        if !name.is_empty() {
            invalid_all(
                &format!("{entry}.name"),
                name,
                formats::env_var_name(name),
                causes,
            );
        }
        if let Some(from) = variable.get("valueFrom") {
            let literal = text(variable, "value").is_some_and(|v| !v.is_empty());
            check_value_from(from, literal, &format!("{entry}.valueFrom"), causes);
        }
    }
}

fn check_value_from(from: &Value, literal: bool, at: &str, causes: &mut Vec<Cause>) {
    let mut sources = 0;
    if let Some(field_ref) = from.get("fieldRef") {
        sources += 1;
        check_field_ref(field_ref, &format!("{at}.fieldRef"), causes);
    }
    if let Some(resource_ref) = from.get("resourceFieldRef") {
        sources += 1;
        check_resource_field_ref(resource_ref, &format!("{at}.resourceFieldRef"), causes);
    }
    for key in ["configMapKeyRef", "secretKeyRef"] {
        if let Some(selector) = from.get(key) {
            sources += 1;
            check_key_selector(selector, &format!("{at}.{key}"), causes);
        }
    }
    let problem = if sources == 0 {
        Some(
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        )
    } else if literal {
        Some("may not be specified when `value` is not empty")
    } else if sources > 1 {
        Some("may not have more than one field specified at a time")
    } else {
        None
    };
    if let Some(problem) = problem {
        causes.push(Cause::invalid(at, &json!(""), problem));
    }
}

/// `validateObjectFieldSelector` with the environment's fields; an absent `apiVersion` is
/// `v1` (as defaulting makes it).
fn check_field_ref(field_ref: &Value, at: &str, causes: &mut Vec<Cause>) {
    let version = text(field_ref, "apiVersion")
        .filter(|v| !v.is_empty())
        .unwrap_or("v1");
    let field_path = required_text(field_ref, "fieldPath", at, causes);
    if field_path.is_empty() {
        return;
    }
    let field_path_at = format!("{at}.fieldPath");
    let subscripted = split_subscript(field_path);
    let conversion_error = if version != "v1" {
        Some(format!("unsupported pod version: {version}"))
    } else if let Some((path, _)) = subscripted {
        (!matches!(path, "metadata.annotations" | "metadata.labels"))
            .then(|| format!("field label does not support subscript: {field_path}"))
    } else {
        (!CONVERTIBLE_FIELD_PATHS.contains(&field_path) && field_path != "spec.host")
            .then(|| format!("field label not supported: {field_path}"))
    };
    if let Some(error) = conversion_error {
        causes.push(Cause::invalid(
            field_path_at,
            &json!(field_path),
            format!("error converting fieldPath: {error}"),
        ));
        return;
    }
    match subscripted {
        Some(("metadata.annotations", key)) => {
            invalid_all(
                at,
                &key.to_lowercase(),
                qualified_name(&key.to_lowercase()),
                causes,
            );
        }
        Some((_, key)) => invalid_all(at, key, qualified_name(key), causes),
        None => {
            let path = if field_path == "spec.host" {
                "spec.nodeName"
            } else {
                field_path
            };
            if !ENV_FIELD_PATHS.contains(&path) {
                causes.push(Cause::not_supported(
                    field_path_at,
                    &json!(path),
                    ENV_FIELD_PATHS,
                ));
            }
        }
    }
}

fn qualified_name(key: &str) -> Vec<String> {
    crate::meta::check_qualified_name(key).into_iter().collect()
}

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['app']` → (`metadata.labels`, `app`).
fn split_subscript(field_path: &str) -> Option<(&str, &str)> {
    let inner = field_path.strip_suffix("']")?;
    let (path, key) = inner.split_once("['")?;
    (!path.is_empty()).then_some((path, key))
}

/// `validateContainerResourceFieldSelector` for a variable (its container name is optional).
fn check_resource_field_ref(resource_ref: &Value, at: &str, causes: &mut Vec<Cause>) {
    let resource = required_text(resource_ref, "resource", at, causes);
    if !resource.is_empty()
        && !RESOURCE_FIELDS.contains(&resource)
        && !HUGEPAGES_PREFIXES.iter().any(|p| resource.starts_with(p))
    {
        causes.push(Cause::not_supported(
            format!("{at}.resource"),
            &json!(resource),
            RESOURCE_FIELDS,
        ));
    }
}

/// `configMapKeyRef` or `secretKeyRef`: an object name and a valid key.
fn check_key_selector(selector: &Value, at: &str, causes: &mut Vec<Cause>) {
    let name = text(selector, "name").unwrap_or_default();
    invalid_all(
        &format!("{at}.name"),
        name,
        formats::dns_subdomain(name, false),
        causes,
    );
    let key = required_text(selector, "key", at, causes);
    if !key.is_empty() {
        invalid_all(
            &format!("{at}.key"),
            key,
            formats::config_map_key(key),
            causes,
        );
    }
}

/// A container's `envFrom`.
pub fn check_env_from(container: &Value, at: &str, causes: &mut Vec<Cause>) {
    let list_path = format!("{at}.envFrom");
    for (index, source) in items(container, "envFrom").iter().enumerate() {
        let entry = format!("{list_path}[{index}]");
        if let Some(prefix) = text(source, "prefix").filter(|p| !p.is_empty()) {
            invalid_all(
                &format!("{entry}.prefix"),
                prefix,
                formats::env_var_name(prefix),
                causes,
            );
        }
        let mut sources = 0;
        for key in ["configMapRef", "secretRef"] {
            let Some(reference) = source.get(key) else {
                continue;
            };
            sources += 1;
            let name_path = format!("{entry}.{key}.name");
            match text(reference, "name").unwrap_or_default() {
                "" => causes.push(Cause::required(name_path)),
                name => invalid_all(&name_path, name, formats::dns_subdomain(name, true), causes),
            }
        }
        // Upstream reports these on the list, not the entry.
        let problem = match sources {
            0 => Some("must specify one of: `configMapRef` or `secretRef`"),
            1 => None,
            _ => Some("may not have more than one field specified at a time"),
        };
        if let Some(problem) = problem {
            causes.push(Cause::invalid(&list_path, &json!(""), problem));
        }
    }
}
