//! The audit `Policy` (`audit.k8s.io/v1`): read from the text of `--audit-policy-file`,
//! validated as upstream's `apis/audit/validation` does (each error with its field path and
//! line), and evaluated per request as upstream's `policy/checker.go`: the first rule whose
//! users, groups, verbs, resources or non-resource URLs all match decides the level; no match
//! is `None`. A rule's `omitStages` are unioned with the policy's; its `omitManagedFields`
//! overrides the policy's.
//!
//! Knows nothing of where the text came from (the shell names the file) nor of requests
//! beyond RBAC's `Attributes` and the authenticated user.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use super::{Level, Stage};
use crate::authn::UserInfo;
use crate::rbac::Attributes;

/// The group and version of audit objects.
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// A set of resources in one API group (`GroupResources`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupResources {
    /// The API group; `""` is the core group.
    pub group: String,
    /// Resources (`pods`, `pods/log`, `*/status`, `pods/*`, `*`); empty matches all in the group.
    pub resources: Vec<String>,
    /// Object names; empty matches all.
    pub resource_names: Vec<String>,
}

/// One rule of a policy (`PolicyRule`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyRule {
    /// The level of requests the rule matches.
    pub level: Level,
    /// User names; empty matches all.
    pub users: Vec<String>,
    /// Groups, any of which matches; empty matches all.
    pub user_groups: Vec<String>,
    /// Verbs; empty matches all.
    pub verbs: Vec<String>,
    /// Resources the rule applies to.
    pub resources: Vec<GroupResources>,
    /// Namespaces (`""` for cluster-scoped resources).
    pub namespaces: Vec<String>,
    /// Non-resource URL paths, exact or with a trailing `*`.
    pub non_resource_urls: Vec<String>,
    /// Stages not to record (the policy's are added).
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's `omitManagedFields` when set.
    pub omit_managed_fields: Option<bool>,
}

/// An audit policy.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    /// The rules, first match wins.
    pub rules: Vec<PolicyRule>,
    /// Stages never recorded.
    pub omit_stages: Vec<Stage>,
    /// Whether request and response bodies are written without `metadata.managedFields`.
    pub omit_managed_fields: bool,
}

/// What the policy decides for one request (`RequestAuditConfig` with its level).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestAuditConfig {
    /// How much is recorded.
    pub level: Level,
    /// Stages not recorded.
    pub omit_stages: BTreeSet<Stage>,
    /// Whether bodies lose `metadata.managedFields`.
    pub omit_managed_fields: bool,
}

impl RequestAuditConfig {
    /// Whether an event at `stage` is written.
    pub fn records(&self, stage: Stage) -> bool {
        self.level > Level::None && !self.omit_stages.contains(&stage)
    }
}

impl Policy {
    /// The audit configuration of a request made by `user` (`None` when authentication
    /// failed) with `attributes`.
    pub fn evaluate(&self, user: Option<&UserInfo>, attributes: &Attributes) -> RequestAuditConfig {
        for rule in &self.rules {
            if rule_matches(rule, user, attributes) {
                return RequestAuditConfig {
                    level: rule.level,
                    omit_stages: self
                        .omit_stages
                        .iter()
                        .chain(&rule.omit_stages)
                        .copied()
                        .collect(),
                    omit_managed_fields: rule
                        .omit_managed_fields
                        .unwrap_or(self.omit_managed_fields),
                };
            }
        }
        RequestAuditConfig {
            level: Level::None,
            omit_stages: self.omit_stages.iter().copied().collect(),
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|s| s == value)
}

fn rule_matches(rule: &PolicyRule, user: Option<&UserInfo>, attributes: &Attributes) -> bool {
    if !rule.users.is_empty() && !user.is_some_and(|u| has(&rule.users, &u.name)) {
        return false;
    }
    if !rule.user_groups.is_empty()
        && !user.is_some_and(|u| u.groups.iter().any(|g| has(&rule.user_groups, g)))
    {
        return false;
    }
    if !rule.verbs.is_empty() && !has(&rule.verbs, &attributes.verb) {
        return false;
    }
    if !rule.namespaces.is_empty() || !rule.resources.is_empty() {
        return matches_resource(rule, attributes);
    }
    if !rule.non_resource_urls.is_empty() {
        return !attributes.resource_request
            && rule
                .non_resource_urls
                .iter()
                .any(|spec| path_matches(&attributes.path, spec));
    }
    true
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|_| path.starts_with(spec.trim_end_matches('*')))
}

fn matches_resource(rule: &PolicyRule, attributes: &Attributes) -> bool {
    if !attributes.resource_request {
        return false;
    }
    // Cluster-scoped requests have the namespace "".
    if !rule.namespaces.is_empty() && !has(&rule.namespaces, &attributes.namespace) {
        return false;
    }
    if rule.resources.is_empty() {
        return true;
    }
    let resource = attributes.resource.as_str();
    let subresource = attributes.subresource.as_str();
    let combined = if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    };
    for group in rule
        .resources
        .iter()
        .filter(|g| g.group == attributes.group)
    {
        if group.resources.is_empty() {
            return true;
        }
        if !group.resource_names.is_empty() && !has(&group.resource_names, &attributes.name) {
            continue;
        }
        for spec in &group.resources {
            if spec == &combined || spec == "*" {
                return true;
            }
            if !subresource.is_empty() && spec.strip_prefix("*/") == Some(subresource) {
                return true;
            }
            if spec.strip_suffix("/*") == Some(resource) {
                return true;
            }
        }
    }
    false
}

/// One thing wrong with a policy file: the field's path, its line when found, and upstream's
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`rules[2].level`).
    pub path: String,
    /// The 1-based line of the field in the file.
    pub line: Option<usize>,
    /// What is wrong (`Required value`, `Unsupported value: ...`).
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Why a policy file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Not YAML (the parser's message carries the line).
    #[error("failed decoding: {0}")]
    Syntax(String),
    /// Fields with invalid values.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
    /// A valid policy without rules, which upstream refuses.
    #[error("loaded illegal policy with 0 rules")]
    NoRules,
}

/// A policy read from its file, with warnings about fields upstream's decoder ignores.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedPolicy {
    /// The policy.
    pub policy: Policy,
    /// Unknown fields, ignored as upstream ignores them (`line 4: rules[0].user: unknown field`).
    pub warnings: Vec<String>,
}

struct Reader<'t> {
    text: &'t str,
    errors: Vec<FieldError>,
    warnings: Vec<String>,
}

impl Reader<'_> {
    fn fail(&mut self, path: &str, message: String) {
        let line = tessera_model::yaml_location::line_of(self.text, path);
        self.errors.push(FieldError {
            path: path.to_string(),
            line,
            message,
        });
    }

    fn invalid(&mut self, path: &str, value: &Value, detail: &str) {
        self.fail(path, format!("Invalid value: {value}: {detail}"));
    }

    /// Warns about fields outside `known`.
    fn unknown(&mut self, path: &str, object: &serde_json::Map<String, Value>, known: &[&str]) {
        for key in object.keys().filter(|k| !known.contains(&k.as_str())) {
            let field = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let error = FieldError {
                line: tessera_model::yaml_location::line_of(self.text, &field),
                path: field,
                message: "unknown field, ignored".into(),
            };
            self.warnings.push(error.to_string());
        }
    }

    fn object<'v>(
        &mut self,
        path: &str,
        value: &'v Value,
    ) -> Option<&'v serde_json::Map<String, Value>> {
        let object = value.as_object();
        if object.is_none() {
            self.invalid(path, value, "must be an object");
        }
        object
    }

    fn list<'v>(&mut self, path: &str, value: Option<&'v Value>) -> &'v [Value] {
        match value {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.invalid(path, other, "must be a list");
                &[]
            }
        }
    }

    fn strings(&mut self, path: &str, value: Option<&Value>) -> Vec<String> {
        let mut out = Vec::new();
        for (i, item) in self.list(path, value).iter().enumerate() {
            match item.as_str() {
                Some(text) => out.push(text.to_string()),
                None => self.invalid(&format!("{path}[{i}]"), item, "must be a string"),
            }
        }
        out
    }

    fn stages(&mut self, path: &str, value: Option<&Value>) -> Vec<Stage> {
        let mut out = Vec::new();
        for (i, item) in self.list(path, value).iter().enumerate() {
            match item.as_str().and_then(Stage::parse) {
                Some(stage) => out.push(stage),
                None => {
                    let allowed: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
                    self.invalid(
                        &format!("{path}[{i}]"),
                        item,
                        &format!("allowed stages are {}", allowed.join(",")),
                    );
                }
            }
        }
        out
    }

    fn boolean(&mut self, path: &str, value: Option<&Value>) -> Option<bool> {
        match value {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                self.invalid(path, other, "must be a boolean");
                None
            }
        }
    }

    fn level(&mut self, path: &str, value: Option<&Value>) -> Level {
        match value {
            None | Some(Value::Null) => {
                self.fail(path, "Required value".into());
                Level::None
            }
            Some(Value::String(text)) if text.is_empty() => {
                self.fail(path, "Required value".into());
                Level::None
            }
            Some(other) => match other.as_str().and_then(Level::parse) {
                Some(level) => level,
                None => {
                    let supported: Vec<String> = Level::ALL
                        .iter()
                        .map(|l| format!("\"{}\"", l.as_str()))
                        .collect();
                    self.fail(
                        path,
                        format!(
                            "Unsupported value: {other}: supported values: {}",
                            supported.join(", ")
                        ),
                    );
                    Level::None
                }
            },
        }
    }

    fn group_resources(&mut self, path: &str, value: &Value) -> GroupResources {
        let Some(object) = self.object(path, value) else {
            return GroupResources::default();
        };
        self.unknown(path, object, &["group", "resources", "resourceNames"]);
        let group = match object.get("group") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(group)) => group.clone(),
            Some(other) => {
                self.invalid(&format!("{path}.group"), other, "must be a string");
                String::new()
            }
        };
        if !group.is_empty() {
            let problems = crate::validation::pod_spec::formats::dns_subdomain(&group, false);
            if !problems.is_empty() {
                // Upstream names the list's field, not the entry.
                let list = path.rsplit_once('[').map_or(path, |(list, _)| list);
                self.invalid(
                    &format!("{list}.group"),
                    &Value::String(group.clone()),
                    &problems.join(","),
                );
            }
        }
        let resources = self.strings(&format!("{path}.resources"), object.get("resources"));
        let resource_names = self.strings(
            &format!("{path}.resourceNames"),
            object.get("resourceNames"),
        );
        if !resource_names.is_empty() && resources.is_empty() {
            let list = path.rsplit_once('[').map_or(path, |(list, _)| list);
            self.invalid(
                &format!("{list}.resourceNames"),
                &Value::from(resource_names.clone()),
                "using resourceNames requires at least one resource",
            );
        }
        GroupResources {
            group,
            resources,
            resource_names,
        }
    }

    fn rule(&mut self, path: &str, value: &Value) -> PolicyRule {
        let Some(object) = self.object(path, value) else {
            return PolicyRule::default();
        };
        self.unknown(
            path,
            object,
            &[
                "level",
                "users",
                "userGroups",
                "verbs",
                "resources",
                "namespaces",
                "nonResourceURLs",
                "omitStages",
                "omitManagedFields",
            ],
        );
        let level = self.level(&format!("{path}.level"), object.get("level"));
        let urls_path = format!("{path}.nonResourceURLs");
        let non_resource_urls = self.strings(&urls_path, object.get("nonResourceURLs"));
        for (i, url) in non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            let at = format!("{urls_path}[{i}]");
            if !url.starts_with('/') {
                self.invalid(
                    &at,
                    &Value::String(url.clone()),
                    "non-resource URL rules must begin with a '/' character",
                );
            }
            if url[..url.len().saturating_sub(1)].contains('*') {
                self.invalid(
                    &at,
                    &Value::String(url.clone()),
                    "non-resource URL wildcards '*' must be the final character of the rule",
                );
            }
        }
        let resources_path = format!("{path}.resources");
        let resources = self
            .list(&resources_path, object.get("resources"))
            .iter()
            .enumerate()
            .map(|(i, item)| self.group_resources(&format!("{resources_path}[{i}]"), item))
            .collect::<Vec<_>>();
        let namespaces = self.strings(&format!("{path}.namespaces"), object.get("namespaces"));
        if !non_resource_urls.is_empty() && (!resources.is_empty() || !namespaces.is_empty()) {
            self.invalid(
                &urls_path,
                &Value::from(non_resource_urls.clone()),
                "rules cannot apply to both regular resources and non-resource URLs",
            );
        }
        PolicyRule {
            level,
            users: self.strings(&format!("{path}.users"), object.get("users")),
            user_groups: self.strings(&format!("{path}.userGroups"), object.get("userGroups")),
            verbs: self.strings(&format!("{path}.verbs"), object.get("verbs")),
            resources,
            namespaces,
            non_resource_urls,
            omit_stages: self.stages(&format!("{path}.omitStages"), object.get("omitStages")),
            omit_managed_fields: self.boolean(
                &format!("{path}.omitManagedFields"),
                object.get("omitManagedFields"),
            ),
        }
    }
}

/// Reads and validates the text of an audit policy file (upstream's `LoadPolicyFromBytes`).
pub fn parse_policy(text: &str) -> Result<LoadedPolicy, PolicyError> {
    let document: Value =
        serde_saphyr::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
    let mut reader = Reader {
        text,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let Some(fields) = document.as_object() else {
        return Err(PolicyError::Syntax(
            "the document is not a mapping (an audit.k8s.io/v1 Policy)".into(),
        ));
    };
    reader.unknown(
        "",
        fields,
        &[
            "apiVersion",
            "kind",
            "metadata",
            "rules",
            "omitStages",
            "omitManagedFields",
        ],
    );
    match fields.get("apiVersion").and_then(Value::as_str) {
        Some(API_VERSION) => {}
        other => {
            let shown = other.unwrap_or_default();
            reader.fail(
                "apiVersion",
                format!(
                    "unknown group version field \"{shown}\" in policy: want \"{API_VERSION}\""
                ),
            );
        }
    }
    match fields.get("kind").and_then(Value::as_str) {
        Some("Policy") => {}
        other => reader.fail(
            "kind",
            format!(
                "Unsupported value: \"{}\": supported values: \"Policy\"",
                other.unwrap_or_default()
            ),
        ),
    }
    let rules = reader
        .list("rules", fields.get("rules"))
        .iter()
        .enumerate()
        .map(|(i, rule)| reader.rule(&format!("rules[{i}]"), rule))
        .collect::<Vec<_>>();
    let omit_stages = reader.stages("omitStages", fields.get("omitStages"));
    let omit_managed_fields = reader
        .boolean("omitManagedFields", fields.get("omitManagedFields"))
        .unwrap_or(false);
    if !reader.errors.is_empty() {
        return Err(PolicyError::Invalid(reader.errors));
    }
    if rules.is_empty() {
        return Err(PolicyError::NoRules);
    }
    Ok(LoadedPolicy {
        policy: Policy {
            rules,
            omit_stages,
            omit_managed_fields,
        },
        warnings: reader.warnings,
    })
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
