//! Policy levels, policy versions and a namespace's policy, as upstream's
//! `k8s.io/pod-security-admission/api` defines them: `ParseLevel`, `ParseVersion`, `LevelVersion`
//! (`restricted:latest`), `Policy` and `PolicyToEvaluate`, which reads the
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels over the configured
//! defaults — an invalid value falls back as upstream's does and is reported as a field error.
//!
//! Knows nothing of pods or checks; the evaluator maps a version onto the checks it selects.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

/// The prefix of the namespace labels and of the audit annotations.
pub const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
/// `pod-security.kubernetes.io/enforce`.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// `pod-security.kubernetes.io/enforce-version`.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// `pod-security.kubernetes.io/audit`.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// `pod-security.kubernetes.io/audit-version`.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// `pod-security.kubernetes.io/warn`.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `pod-security.kubernetes.io/warn-version`.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// Audit annotation (after the prefix): why a request was exempt.
pub const EXEMPTION_REASON_ANNOTATION: &str = "exempt";
/// Audit annotation (after the prefix): the audit level's violations.
pub const AUDIT_VIOLATIONS_ANNOTATION: &str = "audit-violations";
/// Audit annotation (after the prefix): the enforced level and version.
pub const ENFORCED_POLICY_ANNOTATION: &str = "enforce-policy";

/// A policy level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Level {
    /// Unrestricted.
    #[default]
    Privileged,
    /// Prevents known privilege escalations.
    Baseline,
    /// Current pod hardening best practices.
    Restricted,
}

impl Level {
    /// The level's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Upstream's `ParseLevel`: an unknown level is an error, and reads as `restricted`.
pub fn parse_level(level: &str) -> Result<Level, (Level, String)> {
    match level {
        "privileged" => Ok(Level::Privileged),
        "baseline" => Ok(Level::Baseline),
        "restricted" => Ok(Level::Restricted),
        _ => Err((
            Level::Restricted,
            "must be one of privileged, baseline, restricted".into(),
        )),
    }
}

/// Upstream's `CompareLevels`: privileged < baseline < restricted.
pub fn compare_levels(a: Level, b: Level) -> Ordering {
    a.cmp(&b)
}

/// A policy version: `v1.N` or `latest` (newer than every numbered version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Version {
    /// `v<major>.<minor>`.
    Minor(u32, u32),
    /// `latest`.
    #[default]
    Latest,
}

impl Version {
    /// `v<major>.<minor>`.
    pub const fn new(major: u32, minor: u32) -> Version {
        Version::Minor(major, minor)
    }

    /// Whether this version is older than `other` (`latest` is never older).
    pub fn older(self, other: Version) -> bool {
        match (self, other) {
            (Version::Latest, _) => false,
            (_, Version::Latest) => true,
            (Version::Minor(a, b), Version::Minor(c, d)) => (a, b) < (c, d),
        }
    }

    /// The next minor version (`latest` stays `latest`).
    pub fn next_minor(self) -> Version {
        match self {
            Version::Latest => Version::Latest,
            Version::Minor(major, minor) => Version::Minor(major, minor + 1),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Latest => f.write_str("latest"),
            Version::Minor(major, minor) => write!(f, "v{major}.{minor}"),
        }
    }
}

/// Upstream's `ParseVersion`: `latest` or `v1.N` (no leading zero); anything else is an error
/// and reads as `latest`.
pub fn parse_version(version: &str) -> Result<Version, (Version, String)> {
    if version == "latest" {
        return Ok(Version::Latest);
    }
    let invalid = || (Version::Latest, r#"must be "latest" or "v1.x""#.to_string());
    let digits = version.strip_prefix("v1.").ok_or_else(invalid)?;
    let well_formed = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !well_formed {
        return Err(invalid());
    }
    digits
        .parse::<u32>()
        .map(|minor| Version::Minor(1, minor))
        .map_err(|_| invalid())
}

/// A level at a version, written `restricted:v1.30`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LevelVersion {
    /// The level.
    pub level: Level,
    /// The version.
    pub version: Version,
}

impl LevelVersion {
    /// A level at a version.
    pub const fn new(level: Level, version: Version) -> LevelVersion {
        LevelVersion { level, version }
    }

    /// Upstream's `Equivalent`: both privileged, or the same level and version.
    pub fn equivalent(&self, other: &LevelVersion) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// The three modes' levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policy {
    /// Refuses violating pods.
    pub enforce: LevelVersion,
    /// Records violations in the audit log.
    pub audit: LevelVersion,
    /// Warns the client.
    pub warn: LevelVersion,
}

impl Policy {
    /// Whether every mode is privileged.
    pub fn fully_privileged(&self) -> bool {
        self.enforce.level == Level::Privileged
            && self.audit.level == Level::Privileged
            && self.warn.level == Level::Privileged
    }

    /// Upstream's `Equivalent`, mode by mode.
    pub fn equivalent(&self, other: &Policy) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// A label that does not parse, as upstream's `field.Invalid` on `metadata.labels[<key>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The label's key.
    pub label: String,
    /// Its value.
    pub value: String,
    /// Why it is refused.
    pub detail: String,
}

impl LabelError {
    /// The field path, `metadata.labels[pod-security.kubernetes.io/enforce]`.
    pub fn field(&self) -> String {
        format!("metadata.labels[{}]", self.label)
    }
}

impl fmt::Display for LabelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: Invalid value: {}: {}",
            self.field(),
            serde_json::Value::String(self.value.clone()),
            self.detail
        )
    }
}

/// Upstream's `ToAggregate().Error()` of a list of label errors: one as itself, several in
/// brackets.
pub fn aggregate(errors: &[LabelError]) -> String {
    match errors {
        [one] => one.to_string(),
        _ => format!(
            "[{}]",
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Upstream's `PolicyToEvaluate`: the namespace's labels over the defaults. An invalid enforce
/// level reads as `restricted`, an invalid audit or warn level as `privileged` (fail open), an
/// invalid version as `latest`; each is returned as an error. Without a warn label, warn is
/// raised to an enforce level set by label.
pub fn policy_to_evaluate(
    labels: &BTreeMap<String, String>,
    defaults: Policy,
) -> (Policy, Vec<LabelError>) {
    let mut policy = defaults;
    let mut errors = Vec::new();
    if labels.is_empty() {
        return (policy, errors);
    }
    let mut has_enforce_level = false;
    if let Some(value) = labels.get(ENFORCE_LEVEL_LABEL) {
        policy.enforce.level = match parse_level(value) {
            Ok(level) => {
                has_enforce_level = true;
                level
            }
            Err((level, detail)) => {
                errors.push(label_error(ENFORCE_LEVEL_LABEL, value, detail));
                level
            }
        };
    }
    for (label, target) in [
        (AUDIT_LEVEL_LABEL, &mut policy.audit.level),
        (WARN_LEVEL_LABEL, &mut policy.warn.level),
    ] {
        read_label(labels, label, target, &mut errors, parse_level, |_| {
            Level::Privileged
        });
    }
    for (label, target) in [
        (ENFORCE_VERSION_LABEL, &mut policy.enforce.version),
        (AUDIT_VERSION_LABEL, &mut policy.audit.version),
        (WARN_VERSION_LABEL, &mut policy.warn.version),
    ] {
        read_label(labels, label, target, &mut errors, parse_version, |v| v);
    }
    if !labels.contains_key(WARN_LEVEL_LABEL)
        && has_enforce_level
        && compare_levels(policy.enforce.level, policy.warn.level) == Ordering::Greater
    {
        policy.warn.level = policy.enforce.level;
        if !labels.contains_key(WARN_VERSION_LABEL) {
            policy.warn.version = policy.enforce.version;
        }
    }
    (policy, errors)
}

fn label_error(label: &str, value: &str, detail: String) -> LabelError {
    LabelError {
        label: label.into(),
        value: value.into(),
        detail,
    }
}

/// A label read with its parser; an invalid value is recorded and reads as `fallback` makes
/// of the parser's own fallback (audit and warn levels fail open to privileged).
fn read_label<T: Copy>(
    labels: &BTreeMap<String, String>,
    label: &str,
    target: &mut T,
    errors: &mut Vec<LabelError>,
    parse: fn(&str) -> Result<T, (T, String)>,
    fallback: fn(T) -> T,
) {
    if let Some(value) = labels.get(label) {
        *target = parse(value).unwrap_or_else(|(parsed, detail)| {
            errors.push(label_error(label, value, detail));
            fallback(parsed)
        });
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
