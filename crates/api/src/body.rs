//! Request bodies and options as upstream reads them: media types, JSON/YAML/protobuf object
//! bodies, patch bodies of each flavour, the options of writes and deletes from query and
//! body, the field manager a write is recorded for, and Table negotiation.
//!
//! Knows headers and bytes only: reading the body off the connection is the shell's.

use bytes::Bytes;
use http::{HeaderMap, header};
use serde_json::{Value, json};
use tessera_model::json::Pointer as _;

use crate::error::{ApiError, ApiResult};
use crate::request::Query;
use crate::write::{DeleteOptions, FieldValidation, PatchBody, Propagation, WriteOptions};

/// Whether the client asked for a Table rendering.
pub fn wants_table(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// The media type a request declares (`application/json` when it declares none).
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_else(|| "application/json".into())
}

/// Decodes a JSON or YAML object body.
pub fn decode_object(content_type: &str, body: &[u8]) -> ApiResult<Value> {
    let value: Value = match content_type {
        "application/json" | "" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!(
                "the body of the request could not be decoded as JSON: {e}"
            ))
        })?,
        "application/yaml" | "application/apply-patch+yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the body of the request is not valid UTF-8"))?;
            serde_saphyr::from_str(text).map_err(|e| {
                ApiError::bad_request(format!(
                    "the body of the request could not be decoded as YAML: {e}"
                ))
            })?
        }
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(body)?,
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    }
    Ok(value)
}

/// The manager a write is recorded for: `fieldManager`, else the client's user agent.
pub fn field_manager(query: &Query, headers: &HeaderMap) -> Option<String> {
    if let Some(manager) = query.get("fieldManager").filter(|m| !m.is_empty()) {
        return Some(manager.to_string());
    }
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    Some(agent.split('/').next().unwrap_or("unknown").to_string())
}

/// The options every write takes from its query: `dryRun` and `fieldValidation`.
pub fn write_options(query: &Query) -> ApiResult<WriteOptions> {
    let dry_run = match query.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other:?}; the only supported value is \"All\""
            )));
        }
    };
    let field_validation = match query.get("fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
            )));
        }
    };
    Ok(WriteOptions {
        dry_run,
        field_validation,
        ..WriteOptions::default()
    })
}

/// A PATCH body of a media type, in its flavour (apply bodies are decided by the caller).
pub fn patch_body(content_type: &str, body: Bytes) -> ApiResult<PatchBody> {
    let parse = |body: &[u8]| -> ApiResult<Value> {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the patch could not be decoded as JSON: {e}"))
        })
    };
    Ok(match content_type {
        "application/json-patch+json" => PatchBody::Json(body),
        "application/merge-patch+json" => PatchBody::Merge(parse(&body)?),
        "application/strategic-merge-patch+json" => PatchBody::Strategic(parse(&body)?),
        "application/apply-patch+yaml" => PatchBody::Merge(decode_object(content_type, &body)?),
        other => return Err(ApiError::unsupported_media_type(other)),
    })
}

/// The options of a delete from its query and DeleteOptions body, and whether it is a dry
/// run.
pub fn delete_options(query: &Query, body: &[u8]) -> ApiResult<(DeleteOptions, bool)> {
    let parsed: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the DeleteOptions could not be decoded: {e}"))
        })?
    };
    let propagation_text = query
        .get("propagationPolicy")
        .map(str::to_string)
        .or_else(|| {
            parsed
                .get("propagationPolicy")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .or_else(
            || match parsed.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                Some(false) => Some("Background".into()),
                None => None,
            },
        )
        .or_else(|| match query.get("orphanDependents") {
            Some("true") => Some("Orphan".into()),
            Some("false") => Some("Background".into()),
            _ => None,
        });
    let propagation = match propagation_text.as_deref() {
        None => None,
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some("Orphan") => Some(Propagation::Orphan),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy must be one of Background, Foreground or Orphan, got {other:?}"
            )));
        }
    };
    let grace = match query.int("gracePeriodSeconds")? {
        Some(grace) => Some(grace),
        None => parsed.get("gracePeriodSeconds").and_then(Value::as_i64),
    };
    let dry_run = query.get("dryRun") == Some("All")
        || parsed
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    Ok((
        DeleteOptions {
            grace_period_seconds: grace,
            propagation,
            precondition_uid: parsed
                .at("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_string),
            precondition_resource_version: parsed
                .at("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
        },
        dry_run,
    ))
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No body, in any declared format, makes decoding panic; what decodes is an object.
        #[test]
        fn body_decoding_never_panics(body in proptest::collection::vec(any::<u8>(), 0..256),
                                      kind in prop::sample::select(vec!["application/json", "application/yaml", "application/apply-patch+yaml", "text/plain", ""])) {
            if let Ok(value) = decode_object(kind, &body) {
                prop_assert!(value.is_object());
            }
            let _ = patch_body(kind, Bytes::from(body.clone()));
            let _ = delete_options(&Query::default(), &body);
        }

        /// Text that looks like YAML or JSON objects decodes without panicking.
        #[test]
        fn structured_text_never_panics(text in "[a-z{}:\\[\\], \"\n-]{0,80}") {
            let _ = decode_object("application/yaml", text.as_bytes());
            let _ = decode_object("application/json", text.as_bytes());
        }
    }
}
