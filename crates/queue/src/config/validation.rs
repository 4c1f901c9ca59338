//! Kueue's checks of a Configuration (`pkg/config/validation.go`) that need the whole,
//! defaulted configuration, and the field errors every check reports, written as
//! apimachinery's `field.Error` writes them (`path: Invalid value: …: message`). Checks of a
//! single field run where the field is read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Configuration, FRAMEWORKS, Reader};
use crate::preemption::FairSharingStrategy;

/// apimachinery's `IsNegativeErrorMsg`.
const NEGATIVE: &str = "must be greater than or equal to 0";

/// One invalid field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Its path (`waitForPodsReady.timeout`).
    pub path: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// Its line in the file, when it can be found.
    pub line: Option<usize>,
}

/// What is wrong with a field (`field.ErrorType`).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldErrorKind {
    /// `Required value: must be specified`.
    Required,
    /// `Required value`, then `: <detail>` when there is one (`field.Required(path, detail)`).
    RequiredWith(String),
    /// `Too many: <actual>: must have at most <max> items`.
    TooMany {
        /// How many there are.
        actual: usize,
        /// How many are allowed.
        max: usize,
    },
    /// `Not found: <value>`.
    NotFound(Value),
    /// `Internal error: <message>`.
    Internal(String),
    /// `Invalid value: <value>: must be greater than or equal to 0`.
    Negative(Value),
    /// `Invalid value: <value>: <message>`.
    Invalid(Value, String),
    /// `Unsupported value: <value>: supported values: …`.
    NotSupported(Value, Vec<String>),
    /// `Duplicate value: <value>`.
    Duplicate(Value),
    /// A field outside Kueue's schema (strict decoding's `unknown field`).
    Unknown,
    /// Not of the field's type.
    Malformed(String),
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        let path = &self.path;
        match &self.kind {
            FieldErrorKind::Required => write!(f, "{path}: Required value: must be specified"),
            FieldErrorKind::RequiredWith(detail) if detail.is_empty() => {
                write!(f, "{path}: Required value")
            }
            FieldErrorKind::RequiredWith(detail) => write!(f, "{path}: Required value: {detail}"),
            FieldErrorKind::TooMany { actual, max } => {
                let items = if *max == 1 { "item" } else { "items" };
                write!(
                    f,
                    "{path}: Too many: {actual}: must have at most {max} {items}"
                )
            }
            FieldErrorKind::NotFound(value) => write!(f, "{path}: Not found: {value}"),
            FieldErrorKind::Internal(message) => write!(f, "{path}: Internal error: {message}"),
            FieldErrorKind::Negative(value) => {
                write!(f, "{path}: Invalid value: {value}: {NEGATIVE}")
            }
            FieldErrorKind::Invalid(value, message) => {
                write!(f, "{path}: Invalid value: {value}: {message}")
            }
            FieldErrorKind::NotSupported(value, supported) => {
                let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                write!(
                    f,
                    "{path}: Unsupported value: {value}: supported values: {}",
                    supported.join(", ")
                )
            }
            FieldErrorKind::Duplicate(value) => write!(f, "{path}: Duplicate value: {value}"),
            FieldErrorKind::Unknown => write!(f, "{path}: unknown field {path:?}"),
            FieldErrorKind::Malformed(message) => write!(f, "{path}: {message}"),
        }
    }
}

/// The strategy lists Kueue accepts (`validStrategySets`).
const STRATEGY_SETS: &[&[FairSharingStrategy]] = &[
    &[FairSharingStrategy::LessThanOrEqualToFinalShare],
    &[FairSharingStrategy::LessThanInitialShare],
    &[
        FairSharingStrategy::LessThanOrEqualToFinalShare,
        FairSharingStrategy::LessThanInitialShare,
    ],
];

fn strategy_name(strategy: FairSharingStrategy) -> &'static str {
    match strategy {
        FairSharingStrategy::LessThanOrEqualToFinalShare => "LessThanOrEqualToFinalShare",
        FairSharingStrategy::LessThanInitialShare => "LessThanInitialShare",
    }
}

/// `fairSharing.preemptionStrategies` read and checked (`validateFairSharing`): required, and
/// one of the accepted lists.
pub(super) fn fair_sharing_strategies(
    reader: &mut Reader<'_>,
    names: &[String],
) -> Vec<FairSharingStrategy> {
    const PATH: &str = "fairSharing.preemptionStrategies";
    if names.is_empty() {
        reader.fail(PATH, FieldErrorKind::Required);
        return Vec::new();
    }
    let accepted = STRATEGY_SETS.iter().find(|set| {
        set.len() == names.len() && set.iter().zip(names).all(|(s, n)| strategy_name(*s) == n)
    });
    match accepted {
        Some(set) => set.to_vec(),
        None => {
            let supported = STRATEGY_SETS
                .iter()
                .map(|set| {
                    let names: Vec<&str> = set.iter().map(|s| strategy_name(*s)).collect();
                    names.join(",")
                })
                .collect();
            reader.fail(PATH, FieldErrorKind::NotSupported(json!(names), supported));
            Vec::new()
        }
    }
}

/// The checks of the defaulted configuration: the managed namespaces' selector and the
/// integrations.
pub(super) fn validate(configuration: &Configuration, reader: &mut Reader<'_>) {
    validate_namespace_selector(configuration, reader);
    validate_frameworks(&configuration.frameworks, reader);
}

/// `validateManagedJobsNamespaceSelector`: a well-formed selector that matches neither
/// `kube-system` nor Kueue's own namespace.
fn validate_namespace_selector(configuration: &Configuration, reader: &mut Reader<'_>) {
    const PATH: &str = "managedJobsNamespaceSelector";
    let selector = &configuration.managed_jobs_namespace_selector;
    if !selector.is_object() {
        reader.fail(
            PATH,
            FieldErrorKind::Malformed("not a label selector".into()),
        );
        return;
    }
    let mut well_formed = true;
    let expressions = selector["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (index, expression) in expressions.iter().enumerate() {
        let path = format!("{PATH}.matchExpressions[{index}]");
        let operator = expression["operator"].as_str().unwrap_or_default();
        let values = expression["values"].as_array().map_or(0, Vec::len);
        let problem = match operator {
            "In" | "NotIn" if values == 0 => Some(("values", FieldErrorKind::Required)),
            "Exists" | "DoesNotExist" if values > 0 => Some((
                "values",
                FieldErrorKind::Invalid(
                    expression["values"].clone(),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'".into(),
                ),
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
            _ => Some((
                "operator",
                FieldErrorKind::Invalid(json!(operator), "not a valid selector operator".into()),
            )),
        };
        if let Some((field, kind)) = problem {
            reader.fail(&format!("{path}.{field}"), kind);
            well_formed = false;
        }
    }
    if !well_formed {
        return;
    }
    let mut prohibited = vec!["kube-system"];
    if !configuration.namespace.is_empty() {
        prohibited.push(&configuration.namespace);
    }
    for namespace in prohibited {
        let labels = BTreeMap::from([(
            "kubernetes.io/metadata.name".to_owned(),
            namespace.to_owned(),
        )]);
        if tessera_model::selector::matches(Some(selector), &labels) {
            reader.fail(
                PATH,
                FieldErrorKind::Invalid(
                    selector.clone(),
                    format!("should not match the {namespace:?} namespace"),
                ),
            );
        }
    }
}

/// `validateIntegrations`: each framework one Kueue knows, none twice.
fn validate_frameworks(frameworks: &[String], reader: &mut Reader<'_>) {
    let mut seen = BTreeSet::new();
    for (index, framework) in frameworks.iter().enumerate() {
        let path = format!("integrations.frameworks[{index}]");
        if !FRAMEWORKS.contains(&framework.as_str()) {
            let supported = FRAMEWORKS.iter().map(|f| (*f).to_owned()).collect();
            reader.fail(
                &path,
                FieldErrorKind::NotSupported(json!(framework), supported),
            );
        } else if !seen.insert(framework.as_str()) {
            reader.fail(&path, FieldErrorKind::Duplicate(json!(framework)));
        }
    }
}
