//! What a list or watch selects and where a page resumes: label and field selector filters
//! (parsing stored objects only as far as they need) and the `continue` tokens of
//! paginated lists.
//!
//! Knows nothing about snapshots or responses: the shell reads the store and assembles the
//! list.

use base64::Engine;
use serde_json::{Value, json};
use tessera_model::selector::labels;

use crate::error::{ApiError, ApiResult};
use crate::request::Query;
use crate::resource::Resource;
use crate::selectors::{FieldSelector, LabelSelector};

/// Label and field selectors of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    /// Parses `labelSelector` and `fieldSelector`.
    pub fn parse(resource: Resource, query: &Query) -> ApiResult<Filter> {
        Ok(Filter {
            labels: LabelSelector::parse(query.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(
                query.get("fieldSelector").unwrap_or_default(),
                resource.selectable_fields(),
            )?,
        })
    }

    /// Whether the filter lets everything through.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether an object passes.
    pub fn matches(&self, object: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(&labels(object)))
            && (self.fields.is_empty() || self.fields.matches(object))
    }

    /// Whether a stored object passes, parsing only what the filter needs: label-only
    /// filters read just `metadata.labels`. Returns the parsed object when it was parsed whole.
    pub fn matches_stored(&self, bytes: &[u8]) -> ApiResult<(bool, Option<Value>)> {
        if self.fields.is_empty() {
            #[derive(serde::Deserialize)]
            struct Labels {
                #[serde(default)]
                labels: std::collections::BTreeMap<String, String>,
            }
            #[derive(serde::Deserialize)]
            struct Partial {
                metadata: Labels,
            }
            let partial: Partial = serde_json::from_slice(bytes)
                .map_err(|e| ApiError::internal(format!("stored object is corrupt: {e}")))?;
            return Ok((self.labels.matches(&partial.metadata.labels), None));
        }
        let object: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::internal(format!("stored object is corrupt: {e}")))?;
        Ok((self.matches(&object), Some(object)))
    }

    /// The single object name an `=` field selector pins, if any.
    pub fn pinned_name(&self) -> Option<&str> {
        self.fields.required_value("metadata.name")
    }
}

/// The `continue` token of a page that ends at `last_key` of the list at `revision`.
pub fn encode_continue(revision: u64, last_key: &str) -> String {
    let token = json!({"rv": revision, "start": last_key});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

/// The revision and last key a `continue` token names; 400 for a token this server did not
/// write.
pub fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
    let invalid = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| invalid())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    let revision = value
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(invalid)?;
    let start = value
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(invalid)?;
    Ok((revision, start.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let token = encode_continue(42, "/core/pods/default/p7");
        assert_eq!(
            decode_continue(&token).unwrap(),
            (42, "/core/pods/default/p7".into())
        );
        assert_eq!(decode_continue("not-a-token").unwrap_err().code, 400);
    }
}
