//! List responses: selectors, pagination with `limit`/`continue` over consistent snapshots,
//! and the list, Table and metadata-only renderings.
//!
//! Unfiltered lists are assembled from the stored bytes without re-parsing objects.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use http::StatusCode;
use serde_json::{Value, json};
use tessera_store::{Entry, Snapshot};

use crate::objects::decode_as;
use crate::server::{ApiServer, json_response, raw_json, wants_table};
use tessera_api::convert::is_view;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::Query;
use tessera_api::resource::Resource;
use tessera_api::selectors::{FieldSelector, LabelSelector, labels_of};

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
        (self.labels.is_empty() || self.labels.matches(&labels_of(object)))
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

/// Recently paginated snapshots, so that `continue` serves the revision the list began at.
#[derive(Default)]
pub struct PageCache {
    snapshots: VecDeque<(String, Snapshot)>,
}

const PAGE_CACHE_SIZE: usize = 16;

impl PageCache {
    fn remember(&mut self, prefix: &str, snapshot: &Snapshot) {
        if self
            .snapshots
            .iter()
            .any(|(p, s)| p == prefix && s.revision == snapshot.revision)
        {
            return;
        }
        if self.snapshots.len() == PAGE_CACHE_SIZE {
            self.snapshots.pop_front();
        }
        self.snapshots
            .push_back((prefix.to_string(), snapshot.clone()));
    }

    fn find(&self, prefix: &str, revision: u64) -> Option<Snapshot> {
        self.snapshots
            .iter()
            .find(|(p, s)| p == prefix && s.revision == revision)
            .map(|(_, s)| s.clone())
    }
}

fn encode_continue(revision: u64, last_key: &str) -> String {
    let token = json!({"rv": revision, "start": last_key});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_continue(token: &str) -> ApiResult<(u64, String)> {
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

/// Answers a list request.
pub fn list(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
    accept: &str,
) -> ApiResult<Response> {
    let filter = Filter::parse(resource, query)?;
    let limit = query.int("limit")?.filter(|l| *l > 0).map(|l| l as usize);
    let prefix = resource.prefix(if resource.namespaced() {
        namespace
    } else {
        None
    });

    let (snapshot, start_after) = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            let (revision, start) = decode_continue(token)?;
            let cached = server
                .pages
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .find(&prefix, revision);
            match cached {
                Some(snapshot) => (snapshot, Some(start)),
                None => {
                    return Err(ApiError::gone(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    ));
                }
            }
        }
        None => (server.objects.store().list(&prefix), None),
    };
    if query.get("resourceVersionMatch") == Some("Exact")
        && let Some(wanted) = query.get("resourceVersion")
        && wanted != snapshot.revision.to_string()
    {
        return Err(ApiError::gone(format!(
            "too old resource version: {wanted} ({})",
            snapshot.revision
        )));
    }

    let start_index = match &start_after {
        Some(start) => snapshot
            .entries
            .partition_point(|e| &*e.key <= start.as_str()),
        None => 0,
    };
    let mut selected: Vec<(&Entry, Option<Value>)> = Vec::new();
    let mut next_key = None;
    for entry in &snapshot.entries[start_index..] {
        if let Some(limit) = limit
            && selected.len() == limit
        {
            next_key = selected.last().map(|(e, _)| e.key.to_string());
            break;
        }
        if is_view(resource) {
            let object = decode_as(resource, entry)?;
            if filter.matches(&object) {
                selected.push((entry, Some(object)));
            }
        } else if filter.is_empty() {
            selected.push((entry, None));
        } else {
            let (matches, object) = filter.matches_stored(&entry.value)?;
            if matches {
                selected.push((entry, object));
            }
        }
    }
    let continue_token = next_key.map(|key| {
        server
            .pages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remember(&prefix, &snapshot);
        encode_continue(snapshot.revision, &key)
    });
    let revision = snapshot.revision.to_string();

    if wants_table(accept) {
        let objects = selected
            .into_iter()
            .map(|(entry, object)| object.map_or_else(|| decode_as(resource, entry), Ok))
            .collect::<ApiResult<Vec<_>>>()?;
        let table = tessera_api::table::table(
            resource,
            &objects,
            server.objects.now(),
            &revision,
            continue_token.as_deref(),
            true,
        );
        return Ok(json_response(StatusCode::OK, &table));
    }
    if accept.contains("as=PartialObjectMetadataList") {
        let items = selected
            .into_iter()
            .map(|(entry, object)| {
                object
                    .map_or_else(|| decode_as(resource, entry), Ok)
                    .map(|o| tessera_api::table::partial_metadata(&o))
            })
            .collect::<ApiResult<Vec<_>>>()?;
        let mut metadata = json!({"resourceVersion": revision});
        if let Some(token) = &continue_token {
            metadata["continue"] = json!(token);
        }
        return Ok(json_response(
            StatusCode::OK,
            &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata, "items": items}),
        ));
    }

    // Assemble the list from stored bytes.
    let mut metadata = json!({"resourceVersion": revision});
    if let Some(token) = &continue_token {
        metadata["continue"] = json!(token);
    }
    let head = format!(
        "{{\"kind\":\"{}List\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
        resource.kind(),
        resource.info.api_version(),
        metadata
    );
    let size = head.len()
        + selected
            .iter()
            .map(|(e, _)| e.value.len() + 1)
            .sum::<usize>()
        + 2;
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(head.as_bytes());
    for (index, (entry, object)) in selected.iter().enumerate() {
        if index > 0 {
            body.push(b',');
        }
        match object {
            // Converted views are written from their served form.
            Some(object) if is_view(resource) => serde_json::to_writer(&mut body, object)
                .map_err(|e| ApiError::internal(e.to_string()))?,
            _ => body.extend_from_slice(&entry.value),
        }
    }
    body.extend_from_slice(b"]}");
    Ok(raw_json(StatusCode::OK, body))
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
