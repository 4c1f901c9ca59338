//! List responses: selectors, pagination with `limit`/`continue` over consistent snapshots,
//! and the list, Table and metadata-only renderings.
//!
//! Unfiltered lists are assembled from the stored bytes without re-parsing objects. What a
//! filter selects and what a continue token says is `tessera_api::listing`'s.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::response::Response;
use http::StatusCode;
use serde_json::{Value, json};
use tessera_store::{Entry, Snapshot};

use crate::objects::decode_as;
use crate::server::{ApiServer, json_response, raw_json};
use tessera_api::body::wants_table;
use tessera_api::convert::is_view;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::listing::{Filter, decode_continue, encode_continue};
use tessera_api::request::Query;
use tessera_api::resource::Resource;
use tessera_api::table::IncludeObject;

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
            IncludeObject::parse(query.get("includeObject"))?,
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
