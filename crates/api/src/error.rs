//! API errors as Kubernetes `Status` objects: the reason and code clients switch on, the
//! message kubectl prints (`Error from server (<Reason>): <message>`), and field causes.
//!
//! Knows nothing about HTTP responses or the store: the shell renders an [`ApiError`] as a
//! response and maps its store's failures to one.

use serde_json::{Value, json};

/// One field-level cause of an `Invalid` error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Upstream's cause type, e.g. `FieldValueRequired`, `FieldValueInvalid`.
    pub reason: &'static str,
    /// The field path, e.g. `spec.containers[0].name`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Cause {
    /// A required field is missing.
    pub fn required(field: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: "Required value".into(),
        }
    }

    /// A required field is missing, with upstream's explanation.
    pub fn required_because(field: impl Into<String>, detail: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueRequired",
            field: field.into(),
            message: format!("Required value: {}", detail.into()),
        }
    }

    /// A field has an unacceptable value.
    pub fn invalid(field: impl Into<String>, value: &Value, detail: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueInvalid",
            field: field.into(),
            message: format!("Invalid value: {}: {}", shown(value), detail.into()),
        }
    }

    /// A field names something that does not exist (`Not found: "data"`), with upstream's
    /// optional explanation.
    pub fn not_found(field: impl Into<String>, value: &Value, detail: Option<&str>) -> Cause {
        let mut message = format!("Not found: {}", shown(value));
        if let Some(detail) = detail {
            message.push_str(": ");
            message.push_str(detail);
        }
        Cause {
            reason: "FieldValueNotFound",
            field: field.into(),
            message,
        }
    }

    /// A value outside a fixed set, listing the set as upstream does (each value quoted).
    pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
        let mut message = format!("Unsupported value: {}", shown(value));
        if !supported.is_empty() {
            let listed = supported
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            message.push_str(&format!(": supported values: {listed}"));
        }
        Cause {
            reason: "FieldValueNotSupported",
            field: field.into(),
            message,
        }
    }

    /// A field may not be changed or set.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueForbidden",
            field: field.into(),
            message: format!("Forbidden: {}", detail.into()),
        }
    }

    /// A field has a value of the wrong JSON type or an unsupported enum value.
    pub fn type_invalid(field: impl Into<String>, detail: impl Into<String>) -> Cause {
        Cause {
            reason: "FieldValueTypeInvalid",
            field: field.into(),
            message: format!("Invalid value: {}", detail.into()),
        }
    }

    /// A duplicate entry in a list keyed by some field.
    pub fn duplicate(field: impl Into<String>, value: &Value) -> Cause {
        Cause {
            reason: "FieldValueDuplicate",
            field: field.into(),
            message: format!("Duplicate value: {value}"),
        }
    }

    fn describe(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}

/// A value as upstream's field errors print it: strings quoted, anything else as JSON.
pub(crate) fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text:?}"),
        other => other.to_string(),
    }
}

/// An error answered to a client as a `Status`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Upstream's `StatusReason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// The resource (plural) and name the error is about, with its group.
    pub details: Option<Box<Details>>,
    /// Audit annotations admission set before refusing (`pod-security.kubernetes.io/…`), for
    /// the audit log's event of the refused request.
    pub audit_annotations: Vec<(String, String)>,
}

/// The object an error is about.
#[derive(Debug, Clone, Default)]
pub struct Details {
    /// Object name.
    pub name: String,
    /// API group.
    pub group: String,
    /// Resource (plural) name, which upstream puts in `details.kind`.
    pub kind: String,
    /// Field causes.
    pub causes: Vec<Cause>,
    /// Seconds a client should wait before retrying.
    pub retry_after_seconds: Option<u32>,
}

/// Shorthand for results of API operations.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            audit_annotations: Vec::new(),
        }
    }

    /// This error with the audit annotations admission set on the request.
    pub fn with_audit_annotations(mut self, annotations: Vec<(String, String)>) -> ApiError {
        self.audit_annotations = annotations;
        self
    }

    fn about(mut self, group: &str, resource: &str, name: &str) -> ApiError {
        self.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: resource.to_string(),
            ..Details::default()
        }));
        self
    }

    /// 404: `pods "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .about(group, resource, name)
    }

    /// 404 for a path that serves nothing.
    pub fn no_route(path: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409: `pods "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .about(group, resource, name)
    }

    /// 409: the object changed since the client read it.
    pub fn conflict(group: &str, resource: &str, name: &str, detail: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {detail}",
                qualified(group, resource)
            ),
        )
        .about(group, resource, name)
    }

    /// 409 for a stale resourceVersion.
    pub fn modified(group: &str, resource: &str, name: &str) -> ApiError {
        ApiError::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with field causes: `Pod "x" is invalid: spec.containers: Required value`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let listed = causes.iter().map(Cause::describe).collect::<Vec<_>>();
        let summary = if listed.len() == 1 {
            listed[0].clone()
        } else {
            format!("[{}]", listed.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut error = ApiError::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {summary}"),
        );
        error.details = Some(Box::new(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            causes,
            retry_after_seconds: None,
        }));
        error
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 403.
    pub fn forbidden(group: &str, resource: &str, name: &str, detail: &str) -> ApiError {
        let message = if name.is_empty() {
            format!("{} is forbidden: {detail}", qualified(group, resource))
        } else {
            format!(
                "{} \"{name}\" is forbidden: {detail}",
                qualified(group, resource)
            )
        };
        ApiError::new(403, "Forbidden", message).about(group, resource, name)
    }

    /// 405.
    pub fn method_not_allowed(method: &str) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({method})"),
        )
    }

    /// 406.
    pub fn not_acceptable(accept: &str) -> ApiError {
        ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml; got {accept}"
            ),
        )
    }

    /// 410: a watch or list asked for a revision no longer kept.
    pub fn gone(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 413.
    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    /// 415.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
        )
    }

    /// 429, e.g. an eviction a disruption budget refuses.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> ApiError {
        let mut error = ApiError::new(429, "TooManyRequests", message);
        error.details = Some(Box::new(Details {
            retry_after_seconds: Some(retry_after_seconds),
            ..Details::default()
        }));
        error
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            let mut body = serde_json::Map::new();
            if !details.name.is_empty() {
                body.insert("name".into(), json!(details.name));
            }
            if !details.group.is_empty() {
                body.insert("group".into(), json!(details.group));
            }
            if !details.kind.is_empty() {
                body.insert("kind".into(), json!(details.kind));
            }
            if !details.causes.is_empty() {
                let causes = details
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect::<Vec<_>>();
                body.insert("causes".into(), json!(causes));
            }
            if let Some(seconds) = details.retry_after_seconds {
                body.insert("retryAfterSeconds".into(), json!(seconds));
            }
            status["details"] = Value::Object(body);
        }
        status
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}
