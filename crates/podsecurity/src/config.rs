//! The PodSecurity admission plugin's configuration: upstream's
//! `pod-security.admission.config.k8s.io` `PodSecurityConfiguration` (`defaults`, `exemptions`),
//! read from an `apiserver.config.k8s.io` `AdmissionConfiguration` whose
//! `plugins[name=PodSecurity]` carries it inline (`configuration:`) or names a file (`path:`),
//! or from a bare PodSecurityConfiguration document. Defaults as upstream's `SetDefaults`
//! (privileged, latest), validation as its `ValidatePodSecurityConfiguration`, each error with
//! its field path and, where the text shows it, its line.
//!
//! Reads text only: the shell opens the files and resolves a `path:` against the admission
//! configuration's directory.

use std::fmt;

use serde_json::Value;
use tessera_api::resource::{NameRule, check_name};

use crate::api::{LevelVersion, Policy, parse_level, parse_version};

/// The PodSecurityConfiguration API versions read (identical in shape).
pub const POD_SECURITY_CONFIGURATION_VERSIONS: [&str; 3] = [
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

/// The AdmissionConfiguration API versions read.
pub const ADMISSION_CONFIGURATION_VERSIONS: [&str; 2] = [
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1alpha1",
];

/// Who and what is exempt from Pod Security admission.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Authenticated user names.
    pub usernames: Vec<String>,
    /// Namespaces.
    pub namespaces: Vec<String>,
    /// RuntimeClass names.
    pub runtime_classes: Vec<String>,
}

/// A validated, defaulted PodSecurityConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSecurityConfiguration {
    /// The policy of namespaces without labels.
    pub defaults: Policy,
    /// Exemptions.
    pub exemptions: Exemptions,
}

/// One thing wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field path (`defaults.enforce`), or `(document)`.
    pub field: String,
    /// The 1-based line of the field, when found.
    pub line: Option<usize>,
    /// What is wrong, in upstream's words.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// What an admission configuration file says about PodSecurity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginConfig {
    /// The configuration, inline (or the file was a bare PodSecurityConfiguration).
    Inline(PodSecurityConfiguration),
    /// The configuration is in this file (relative to the admission configuration's directory
    /// unless absolute).
    Path(String),
    /// The file does not configure PodSecurity: upstream's defaults hold.
    Absent,
}

/// Errors with lines looked up in the text they came from.
struct Reader<'t> {
    text: &'t str,
    /// Where the PodSecurityConfiguration sits in the document (`plugins[0].configuration`).
    base: String,
    errors: Vec<ConfigError>,
}

impl Reader<'_> {
    fn fail(&mut self, field: &str, message: impl Into<String>) {
        let located = if self.base.is_empty() {
            field.to_string()
        } else if field == "(document)" {
            self.base.clone()
        } else {
            format!("{}.{field}", self.base)
        };
        // Keys with dashes (`enforce-version`) are plain keys to the line finder.
        let line = tessera_model::yaml_location::line_of(self.text, &located)
            .or_else(|| tessera_model::yaml_location::line_of(self.text, &self.base));
        self.errors.push(ConfigError {
            field: located,
            line,
            message: message.into(),
        });
    }

    /// Each key of a mapping that is not one of `known`, as upstream's strict decoding
    /// refuses it (`unknown field "deflaults"`).
    fn unknown_fields(&mut self, mapping: &Value, path: &str, known: &[&str]) {
        let Some(fields) = mapping.as_object() else {
            return;
        };
        for key in fields.keys().filter(|k| !known.contains(&k.as_str())) {
            let field = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            self.fail(
                &field,
                format!("unknown field {}", Value::from(key.as_str())),
            );
        }
    }

    fn string_list(&mut self, fields: &Value, key: &str, path: &str) -> Vec<String> {
        match fields.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .filter_map(|(i, item)| match item {
                    Value::String(s) => Some(s.clone()),
                    _ => {
                        self.fail(&format!("{path}[{i}]"), "must be a string");
                        None
                    }
                })
                .collect(),
            Some(_) => {
                self.fail(path, "must be a list of strings");
                Vec::new()
            }
        }
    }
}

/// The keys of `defaults`.
const DEFAULTS_FIELDS: [&str; 6] = [
    "enforce",
    "enforce-version",
    "audit",
    "audit-version",
    "warn",
    "warn-version",
];

fn syntax(error: impl fmt::Display) -> Vec<ConfigError> {
    vec![ConfigError {
        field: "(document)".into(),
        line: None,
        message: format!("not valid YAML: {error}"),
    }]
}

/// Reads an admission configuration file: an AdmissionConfiguration, or a bare
/// PodSecurityConfiguration.
pub fn parse_admission_configuration(text: &str) -> Result<PluginConfig, Vec<ConfigError>> {
    let document: Value = serde_saphyr::from_str(text).map_err(syntax)?;
    let mut reader = Reader {
        text,
        base: String::new(),
        errors: Vec::new(),
    };
    let api_version = document.get("apiVersion").and_then(Value::as_str);
    let kind = document.get("kind").and_then(Value::as_str);
    if kind == Some("PodSecurityConfiguration") {
        return read_pod_security(&document, &mut reader).map(PluginConfig::Inline);
    }
    if kind != Some("AdmissionConfiguration") {
        reader.fail(
            "kind",
            format!(
                "Unsupported value: {}: supported values: \"AdmissionConfiguration\", \"PodSecurityConfiguration\"",
                Value::from(kind.unwrap_or_default())
            ),
        );
        return Err(reader.errors);
    }
    if !api_version.is_some_and(|v| ADMISSION_CONFIGURATION_VERSIONS.contains(&v)) {
        reader.fail(
            "apiVersion",
            format!(
                "Unsupported value: {}: supported values: {}",
                Value::from(api_version.unwrap_or_default()),
                quoted(&ADMISSION_CONFIGURATION_VERSIONS)
            ),
        );
        return Err(reader.errors);
    }
    let plugins = match document.get("plugins") {
        None | Some(Value::Null) => return Ok(PluginConfig::Absent),
        Some(Value::Array(plugins)) => plugins,
        Some(_) => {
            reader.fail("plugins", "must be a list");
            return Err(reader.errors);
        }
    };
    let Some((index, plugin)) = plugins
        .iter()
        .enumerate()
        .find(|(_, p)| p.get("name").and_then(Value::as_str) == Some("PodSecurity"))
    else {
        return Ok(PluginConfig::Absent);
    };
    if let Some(configuration) = plugin.get("configuration").filter(|c| !c.is_null()) {
        reader.base = format!("plugins[{index}].configuration");
        return read_pod_security(configuration, &mut reader).map(PluginConfig::Inline);
    }
    match plugin.get("path") {
        Some(Value::String(path)) if !path.is_empty() => Ok(PluginConfig::Path(path.clone())),
        _ => {
            reader.fail(
                &format!("plugins[{index}]"),
                "Required value: either configuration or path must be set",
            );
            Err(reader.errors)
        }
    }
}

/// Reads a PodSecurityConfiguration file (what a plugin's `path:` names).
pub fn parse_pod_security_configuration(
    text: &str,
) -> Result<PodSecurityConfiguration, Vec<ConfigError>> {
    let document: Value = serde_saphyr::from_str(text).map_err(syntax)?;
    let mut reader = Reader {
        text,
        base: String::new(),
        errors: Vec::new(),
    };
    read_pod_security(&document, &mut reader)
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn read_pod_security(
    document: &Value,
    reader: &mut Reader<'_>,
) -> Result<PodSecurityConfiguration, Vec<ConfigError>> {
    if !document.is_object() {
        reader.fail("(document)", "must be a PodSecurityConfiguration mapping");
        return Err(std::mem::take(&mut reader.errors));
    }
    let api_version = document.get("apiVersion").and_then(Value::as_str);
    if !api_version.is_some_and(|v| POD_SECURITY_CONFIGURATION_VERSIONS.contains(&v)) {
        reader.fail(
            "apiVersion",
            format!(
                "Unsupported value: {}: supported values: {}",
                Value::from(api_version.unwrap_or_default()),
                quoted(&POD_SECURITY_CONFIGURATION_VERSIONS)
            ),
        );
    }
    match document.get("kind").and_then(Value::as_str) {
        None => reader.fail("kind", "Required value: 'Kind' is missing"),
        Some("PodSecurityConfiguration") => {}
        Some(kind) => reader.fail(
            "kind",
            format!(
                "Unsupported value: {}: supported values: \"PodSecurityConfiguration\"",
                Value::from(kind)
            ),
        ),
    }
    // Upstream decodes strictly: a misspelt key is an error, not a silent default.
    reader.unknown_fields(
        document,
        "",
        &["apiVersion", "kind", "defaults", "exemptions"],
    );
    for (key, known) in [
        ("defaults", &DEFAULTS_FIELDS[..]),
        (
            "exemptions",
            &["usernames", "namespaces", "runtimeClasses"][..],
        ),
    ] {
        if let Some(section) = document.get(key) {
            reader.unknown_fields(section, key, known);
        }
    }
    let empty = Value::Object(Default::default());
    let defaults = document
        .get("defaults")
        .filter(|d| !d.is_null())
        .unwrap_or(&empty);
    let mut policy = Policy::default();
    for (key, target) in [
        ("enforce", &mut policy.enforce),
        ("warn", &mut policy.warn),
        ("audit", &mut policy.audit),
    ] {
        *target = read_level_version(defaults, key, reader);
    }
    let exemptions = document
        .get("exemptions")
        .filter(|e| !e.is_null())
        .unwrap_or(&empty);
    let usernames = reader.string_list(exemptions, "usernames", "exemptions.usernames");
    let namespaces = reader.string_list(exemptions, "namespaces", "exemptions.namespaces");
    let runtime_classes =
        reader.string_list(exemptions, "runtimeClasses", "exemptions.runtimeClasses");
    check_names(reader, "exemptions.namespaces", &namespaces, |n| {
        check_name(n, NameRule::Label)
    });
    check_names(reader, "exemptions.runtimeClasses", &runtime_classes, |n| {
        check_name(n, NameRule::Subdomain)
    });
    check_names(reader, "exemptions.usernames", &usernames, |n| {
        n.is_empty()
            .then(|| "username must not be empty".to_string())
    });
    if !reader.errors.is_empty() {
        return Err(std::mem::take(&mut reader.errors));
    }
    Ok(PodSecurityConfiguration {
        defaults: policy,
        exemptions: Exemptions {
            usernames,
            namespaces,
            runtime_classes,
        },
    })
}

/// A default level and its version (`enforce`, `enforce-version`), defaulted to privileged at
/// latest; an invalid value is an error at its field.
fn read_level_version(defaults: &Value, key: &str, reader: &mut Reader<'_>) -> LevelVersion {
    let mut result = LevelVersion::default();
    let text = |field: &str, reader: &mut Reader<'_>| match defaults.get(field) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            reader.fail(
                &format!("defaults.{field}"),
                format!("Invalid value: {other}: must be a string"),
            );
            None
        }
    };
    if let Some(level) = text(key, reader) {
        match parse_level(&level) {
            Ok(level) => result.level = level,
            Err((_, detail)) => reader.fail(
                &format!("defaults.{key}"),
                format!("Invalid value: {}: {detail}", Value::from(level)),
            ),
        }
    }
    let version_key = format!("{key}-version");
    if let Some(version) = text(&version_key, reader) {
        match parse_version(&version) {
            Ok(version) => result.version = version,
            Err((_, detail)) => reader.fail(
                &format!("defaults.{version_key}"),
                format!("Invalid value: {}: {detail}", Value::from(version)),
            ),
        }
    }
    result
}

/// Upstream's exemption list checks: each name valid, no duplicates.
fn check_names(
    reader: &mut Reader<'_>,
    path: &str,
    names: &[String],
    invalid: impl Fn(&str) -> Option<String>,
) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, name) in names.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if let Some(detail) = invalid(name) {
            reader.fail(
                &field,
                format!("Invalid value: {}: {detail}", Value::from(name.as_str())),
            );
        } else if !seen.insert(name.as_str()) {
            reader.fail(
                &field,
                format!("Duplicate value: {}", Value::from(name.as_str())),
            );
        }
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
