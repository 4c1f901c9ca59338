//! Pod Security admission in the write path: the shell of `tessera-podsecurity`. Before a
//! write's transaction it reads the namespace the policy comes from; inside it, it hands the
//! core the final object (and the stored one, on update), the request's user and subresource,
//! and turns the core's [`Decision`] into an error (403 with upstream's message, 422 for bad
//! namespace labels), `Warning` headers and audit annotations. A namespace whose enforce level
//! tightens gets its existing pods checked after its transaction, from a snapshot.
//!
//! Knows nothing about the checks or the messages (the core's), nor about HTTP: the handlers
//! send `Written::warnings`, and `Written::audit_annotations` (`ApiError::audit_annotations` on
//! a refusal) wait for the audit log.

use std::sync::Arc;

use serde_json::Value;
use tessera_api::error::{ApiError, ApiResult, Cause};
use tessera_api::resource::Resource;
use tessera_api::write::{Part, WriteOptions, is_namespace};
use tessera_podsecurity::{Decision, Denial, LevelVersion, PodSecurity, pod_template_path};

/// The Kubernetes minor Tessera serves: `latest` means this version's policy, as upstream's
/// evaluator emulates its own version.
pub const EMULATED_VERSION: tessera_podsecurity::Version = tessera_podsecurity::Version::new(1, 34);

/// Upstream's admission without a configuration file: every namespace privileged unless
/// labelled, no exemptions.
pub fn default_admission() -> Arc<PodSecurity> {
    Arc::new(PodSecurity::new(
        tessera_podsecurity::PodSecurityConfiguration::default(),
        Some(EMULATED_VERSION),
    ))
}

/// What a write is, as Pod Security admission tells writes apart.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    /// Pods: enforce, warn, audit.
    Pod,
    /// A kind with a pod template: warn and audit.
    Template,
    /// Namespaces: labels and existing pods.
    Namespace,
}

/// Which kind of subject a resource is, or `None` for kinds Pod Security ignores.
pub(crate) fn subject(resource: Resource) -> Option<Subject> {
    if (resource.group(), resource.plural()) == ("", "pods") {
        Some(Subject::Pod)
    } else if is_namespace(resource) {
        Some(Subject::Namespace)
    } else if pod_template_path(resource.group(), resource.plural()).is_some() {
        Some(Subject::Template)
    } else {
        None
    }
}

/// Whether a write of `subject` through `subresource` is evaluated at all; one that is not
/// (a pod's binding or status, a controller's scale) needs no policy namespace read for it.
pub(crate) fn evaluates(subject: Subject, subresource: Option<&str>) -> bool {
    match subject {
        Subject::Pod => tessera_podsecurity::evaluates_pod_subresource(subresource),
        Subject::Template => subresource.is_none(),
        Subject::Namespace => true,
    }
}

/// The subresource a write came through, as admission sees it.
pub(crate) fn subresource(part: Part, options: &WriteOptions) -> Option<&'static str> {
    match part {
        Part::Status => Some("status"),
        Part::Main => options.subresource,
    }
}

/// What admission added to a write's answer.
#[derive(Debug, Default)]
pub(crate) struct Admitted {
    /// `Warning` headers.
    pub warnings: Vec<String>,
    /// Audit annotations, prefixed.
    pub audit_annotations: Vec<(String, String)>,
    /// A namespace's new enforce level its existing pods are to be checked against.
    pub check_pods: Option<LevelVersion>,
}

impl Admitted {
    fn from_decision(decision: Decision) -> Admitted {
        Admitted {
            audit_annotations: decision.prefixed_audit_annotations(),
            warnings: decision.warnings,
            check_pods: None,
        }
    }
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn refusal(resource: Resource, object: &Value, denial: Denial) -> ApiError {
    match denial {
        Denial::Forbidden(message) => ApiError::forbidden(
            resource.group(),
            resource.plural(),
            name_of(object),
            &message,
        ),
        Denial::Invalid(errors) => {
            let causes = errors
                .iter()
                .map(|e| Cause::invalid(e.field(), &Value::from(e.value.as_str()), &e.detail))
                .collect();
            ApiError::invalid(resource.group(), resource.kind(), name_of(object), causes)
        }
        Denial::BadRequest(message) => ApiError::bad_request(message),
    }
}

/// Decides a write of a subject. `namespace` is the object the policy comes from (read before
/// the transaction; `None` when it does not exist — the write fails elsewhere); `old` is the
/// stored object of an update.
#[allow(clippy::too_many_arguments)]
pub(crate) fn admit(
    admission: &PodSecurity,
    subject: Subject,
    resource: Resource,
    namespace: Option<&Value>,
    options: &WriteOptions,
    subresource: Option<&str>,
    object: &Value,
    old: Option<&Value>,
) -> ApiResult<Admitted> {
    let user = options.user.as_deref().unwrap_or_default();
    let decision = match (subject, namespace) {
        (Subject::Namespace, _) => {
            return match admission.validate_namespace(object, old, subresource) {
                Ok(decided) => Ok(Admitted {
                    warnings: decided.warnings,
                    audit_annotations: Vec::new(),
                    check_pods: decided.check_pods,
                }),
                Err(denial) => Err(refusal(resource, object, denial)),
            };
        }
        (_, None) => return Ok(Admitted::default()),
        (Subject::Pod, Some(namespace)) => {
            admission.validate_pod(namespace, user, subresource, object, old)
        }
        (Subject::Template, Some(namespace)) => admission.validate_pod_controller(
            namespace,
            user,
            resource.group(),
            resource.plural(),
            subresource,
            object,
        ),
    };
    match decision.denial.clone() {
        Some(denial) => Err(refusal(resource, object, denial)
            .with_audit_annotations(decision.prefixed_audit_annotations())),
        None => Ok(Admitted::from_decision(decision)),
    }
}

/// An admission configuration file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file (or the PodSecurityConfiguration it points at) cannot be read.
    #[error("read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid configuration: each error with the file, line and field.
    #[error("{}", render(path, errors))]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        errors: Vec<tessera_podsecurity::config::ConfigError>,
    },
}

fn render(path: &str, errors: &[tessera_podsecurity::config::ConfigError]) -> String {
    errors
        .iter()
        .map(|e| match e.line {
            Some(line) => format!("{path}:{line}: {}: {}", e.field, e.message),
            None => format!("{path}: {}: {}", e.field, e.message),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn read(path: &std::path::Path) -> Result<String, ConfigFileError> {
    std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// Pod Security admission from `--admission-control-config-file`: an AdmissionConfiguration
/// (the PodSecurity plugin's configuration inline, or in the file its `path` names, relative
/// to this file's directory) or a bare PodSecurityConfiguration.
pub fn load_admission_config(path: &std::path::Path) -> Result<PodSecurity, ConfigFileError> {
    use tessera_podsecurity::config::{
        PluginConfig, parse_admission_configuration, parse_pod_security_configuration,
    };
    let invalid = |path: &std::path::Path, errors| ConfigFileError::Invalid {
        path: path.display().to_string(),
        errors,
    };
    let text = read(path)?;
    let configuration = match parse_admission_configuration(&text).map_err(|e| invalid(path, e))? {
        PluginConfig::Inline(configuration) => configuration,
        PluginConfig::Absent => tessera_podsecurity::PodSecurityConfiguration::default(),
        PluginConfig::Path(named) => {
            let named = std::path::Path::new(&named);
            let file = if named.is_absolute() {
                named.to_path_buf()
            } else {
                path.parent()
                    .unwrap_or(std::path::Path::new("."))
                    .join(named)
            };
            let text = read(&file)?;
            parse_pod_security_configuration(&text).map_err(|e| invalid(&file, e))?
        }
    };
    Ok(PodSecurity::new(configuration, Some(EMULATED_VERSION)))
}
