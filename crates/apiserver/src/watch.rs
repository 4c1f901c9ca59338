//! Watch responses: a chunked stream of newline-delimited `{"type": …, "object": …}` events,
//! starting from a revision (or with synthetic ADDED events for the current state), with
//! selector-aware transitions (an object leaving the selection is DELETED for the watcher),
//! bookmarks, the `initial-events-end` bookmark of streaming lists, Table-rendered events,
//! `timeoutSeconds`, and a 410 `Expired` ERROR event when the revision is no longer kept.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{StatusCode, header};
use serde_json::{Value, json};
use tessera_store::{Entry, Event, EventKind, StoreError, Watcher};

use crate::error::store_error;
use crate::server::ApiServer;
use tessera_api::body::wants_table;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::listing::Filter;
use tessera_api::request::Query;
use tessera_api::resource::Resource;
use tessera_api::table::IncludeObject;

/// The longest a watch stays open when the client names no timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Stream {
    server: Arc<ApiServer>,
    resource: Resource,
    filter: Filter,
    /// Rows rendered as Table rows carrying this much of the object, when the client asked
    /// for a Table.
    table: Option<IncludeObject>,
    headers_sent: bool,
    pending: VecDeque<Bytes>,
    initial: Arc<[Entry]>,
    initial_index: usize,
    initial_end_bookmark: bool,
    watcher: Option<Watcher>,
    error: Option<ApiError>,
    deadline: tokio::time::Instant,
    bookmark_interval: Option<Duration>,
}

/// Answers a watch request.
pub fn watch(
    server: Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    query: &Query,
    accept: &str,
) -> ApiResult<Response> {
    let filter = Filter::parse(resource, query)?;
    let prefix = resource.prefix(if resource.namespaced() {
        namespace
    } else {
        None
    });
    let requested = query.get("resourceVersion").filter(|v| !v.is_empty());
    let send_initial = query.get("sendInitialEvents") == Some("true");
    let timeout = query
        .int("timeoutSeconds")?
        .filter(|t| *t > 0)
        .map_or(DEFAULT_TIMEOUT, |t| Duration::from_secs(t as u64));
    let store = server.objects.store().clone();

    let (initial, watcher, error): (Arc<[Entry]>, Option<Watcher>, Option<ApiError>) =
        match requested {
            _ if send_initial => {
                let (snapshot, watcher) = store.list_and_watch(&prefix);
                (snapshot.entries, Some(watcher), None)
            }
            None | Some("0") => {
                let (snapshot, watcher) = store.list_and_watch(&prefix);
                (snapshot.entries, Some(watcher), None)
            }
            Some(text) => {
                let revision: u64 = text.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version {text:?}"))
                })?;
                match store.watch(&prefix, revision) {
                    Ok(watcher) => (Arc::from(Vec::new()), Some(watcher), None),
                    Err(StoreError::Gone { requested, oldest }) => (
                        Arc::from(Vec::new()),
                        None,
                        Some(ApiError::gone(format!(
                            "too old resource version: {requested} ({oldest})"
                        ))),
                    ),
                    Err(other) => return Err(store_error(other)),
                }
            }
        };
    let bookmark_interval = query
        .flag("allowWatchBookmarks")
        .then_some(server.config.bookmark_interval);
    let state = Stream {
        table: if wants_table(accept) {
            Some(IncludeObject::parse(query.get("includeObject"))?)
        } else {
            None
        },
        server,
        resource,
        filter,
        headers_sent: false,
        pending: VecDeque::new(),
        initial,
        initial_index: 0,
        initial_end_bookmark: send_initial,
        watcher,
        error,
        deadline: tokio::time::Instant::now() + timeout,
        bookmark_interval,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let chunk = state.next_chunk().await?;
        Some((Ok::<Bytes, std::io::Error>(chunk), state))
    });
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response())
}

impl Stream {
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(chunk);
            }
            if self.initial_index < self.initial.len() {
                let end = (self.initial_index + 256).min(self.initial.len());
                let initial = self.initial.clone();
                for entry in &initial[self.initial_index..end] {
                    self.emit_entry("ADDED", entry, None);
                }
                self.initial_index = end;
                continue;
            }
            if self.initial_end_bookmark {
                self.initial_end_bookmark = false;
                let revision = self.watcher.as_ref().map_or(0, Watcher::position);
                self.emit_bookmark(revision, true);
                continue;
            }
            if let Some(error) = self.error.take() {
                let event = json!({"type": "ERROR", "object": error.to_status()});
                self.watcher = None;
                return Some(line(&event));
            }
            let watcher = self.watcher.as_mut()?;
            let bookmark_at = self
                .bookmark_interval
                .map(|interval| tokio::time::Instant::now() + interval);
            tokio::select! {
                batch = watcher.next_batch(256) => match batch {
                    Ok(events) => {
                        for event in events {
                            self.emit_event(&event);
                        }
                    }
                    Err(StoreError::Gone { requested, oldest }) => {
                        self.error = Some(ApiError::gone(format!(
                            "too old resource version: {requested} ({oldest})"
                        )));
                    }
                    Err(other) => {
                        self.error = Some(store_error(other));
                    }
                },
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = sleep_until_optional(bookmark_at) => {
                    let revision = watcher.position();
                    self.emit_bookmark(revision, false);
                }
            }
        }
    }

    fn emit_event(&mut self, event: &Event) {
        match event.kind {
            EventKind::Created => self.emit_entry("ADDED", &event.entry, None),
            EventKind::Deleted => self.emit_entry("DELETED", &event.entry, None),
            EventKind::Updated => {
                if self.filter.is_empty() {
                    self.emit_entry("MODIFIED", &event.entry, None);
                    return;
                }
                let Some(new) = self.present(&event.entry.value) else {
                    return;
                };
                let old_matches = event
                    .previous
                    .as_ref()
                    .and_then(|bytes| self.present(bytes))
                    .is_some_and(|old| self.filter.matches(&old));
                let new_matches = self.filter.matches(&new);
                let kind = match (old_matches, new_matches) {
                    (true, true) => "MODIFIED",
                    (false, true) => "ADDED",
                    (true, false) => "DELETED",
                    (false, false) => return,
                };
                self.push(kind, &event.entry, Some(new));
            }
        }
    }

    /// Parses stored bytes into the form the watched resource serves.
    fn present(&self, bytes: &[u8]) -> Option<Value> {
        let stored = serde_json::from_slice::<Value>(bytes).ok()?;
        Some(tessera_api::convert::from_storage(self.resource, stored))
    }

    /// Emits an event for an entry if it passes the filter.
    fn emit_entry(&mut self, kind: &str, entry: &Entry, parsed: Option<Value>) {
        if self.filter.is_empty()
            && self.table.is_none()
            && !tessera_api::convert::is_view(self.resource)
        {
            let mut chunk = Vec::with_capacity(entry.value.len() + 32);
            chunk.extend_from_slice(b"{\"type\":\"");
            chunk.extend_from_slice(kind.as_bytes());
            chunk.extend_from_slice(b"\",\"object\":");
            chunk.extend_from_slice(&entry.value);
            chunk.extend_from_slice(b"}\n");
            self.pending.push_back(Bytes::from(chunk));
            return;
        }
        let object = match parsed {
            Some(object) => object,
            None => match self.present(&entry.value) {
                Some(object) => object,
                None => return,
            },
        };
        if !self.filter.matches(&object) {
            return;
        }
        self.push(kind, entry, Some(object));
    }

    fn push(&mut self, kind: &str, entry: &Entry, object: Option<Value>) {
        let object = match object {
            Some(object) => object,
            None => self.present(&entry.value).unwrap_or(Value::Null),
        };
        let rendered = if let Some(include) = self.table {
            let revision = entry.revision.to_string();
            let table = tessera_api::table::table(
                self.resource,
                std::slice::from_ref(&object),
                self.server.objects.now(),
                &revision,
                None,
                !self.headers_sent,
                include,
            );
            self.headers_sent = true;
            table
        } else {
            object
        };
        self.pending
            .push_back(line(&json!({"type": kind, "object": rendered})));
    }

    fn emit_bookmark(&mut self, revision: u64, initial_events_end: bool) {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({
            "kind": self.resource.kind(),
            "apiVersion": self.resource.info.api_version(),
            "metadata": metadata,
        });
        self.pending
            .push_back(line(&json!({"type": "BOOKMARK", "object": object})));
    }
}

async fn sleep_until_optional(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn line(value: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}
