//! The peer protocol: an axum server per cache.
//!
//! ```text
//! GET  /blobs/sha256/<hex>/pieces   which pieces are verified (with CRC32s), piece length, size
//! POST /blobs/sha256/<hex>/swarm    the seed's tracker: {node, rack?, zone?, have: bitfield}
//!                                   → the seed's pieces the asker lacks, and other holders
//! GET  /blobs/sha256/<hex>          bytes; with Range only verified pieces (404 otherwise,
//!                                   416 outside the file); without Range a complete blob
//! POST /pull                        {digest, size, url, model?, revision?, file?}: starts or
//!                                   joins a download, answers when it is verified or failed
//! GET  /status                      blobs, downloads in flight, origin and peer byte counts
//! POST /pin, /unpin                 {digest}: blobs in use by pods are never evicted
//! ```
//!
//! Bytes leave through the cache's upload token bucket. A piece is read back from disk and its
//! CRC32 checked against the record before it is sent: a node never serves bytes it has not
//! verified. Errors are JSON `{"error": "..."}` with the status the failure maps to (400 bad
//! input, 404 not held, 416 bad range, 502 origin or seed failure, 507 insufficient space).
//!
//! The server decides nothing about caching; it asks [`Cache`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tessera_cache::pieces::crc32;
use tokio::sync::OwnedSemaphorePermit;

use crate::cache::{Cache, CacheError, PullRequest, Source, digest_hex};
use crate::rate::TokenBucket;
use crate::tracker::Announce;

/// The router of one cache.
pub fn router(cache: Cache) -> Router {
    Router::new()
        .route("/blobs/sha256/{hex}/pieces", get(pieces))
        .route("/blobs/sha256/{hex}/swarm", post(swarm))
        .route("/blobs/sha256/{hex}", get(blob))
        .route("/pull", post(pull))
        .route("/status", get(status))
        .route("/pin", post(pin))
        .route("/unpin", post(unpin))
        .with_state(cache)
}

/// Serves `cache` on `listener` until the future is dropped.
pub async fn serve(cache: Cache, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    axum::serve(listener, router(cache)).await
}

fn error(status: u16, message: impl Into<String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

fn cache_error(failure: &CacheError) -> Response {
    error(failure.http_status(), failure.to_string())
}

async fn pieces(State(cache): State<Cache>, Path(hex): Path<String>) -> Response {
    let hex = match digest_hex(&hex) {
        Ok(hex) => hex,
        Err(e) => return cache_error(&e),
    };
    match cache.piece_map(&hex) {
        Some(map) => Json(map).into_response(),
        None => error(404, format!("sha256:{hex} is not held here")),
    }
}

async fn swarm(State(cache): State<Cache>, Path(hex): Path<String>, body: Bytes) -> Response {
    let hex = match digest_hex(&hex) {
        Ok(hex) => hex,
        Err(e) => return cache_error(&e),
    };
    let announce: Announce = match serde_json::from_slice(&body) {
        Ok(announce) => announce,
        Err(e) => return error(400, format!("invalid announcement: {e}")),
    };
    match cache.announce(&hex, announce) {
        Some(Ok(offer)) => Json(offer).into_response(),
        Some(Err(message)) => error(400, format!("invalid announcement: {message}")),
        None => error(404, format!("sha256:{hex} is not held here")),
    }
}

/// `bytes=first-last` or `bytes=first-` (one range).
fn parse_range(value: &str, size: Option<u64>) -> Option<(u64, u64)> {
    let spec = value.trim().strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let first: u64 = first.trim().parse().ok()?;
    let last: u64 = if last.trim().is_empty() {
        size?.checked_sub(1)?
    } else {
        last.trim().parse().ok()?
    };
    let len = last.checked_sub(first)?.checked_add(1)?;
    Some((first, len))
}

async fn blob(State(cache): State<Cache>, Path(hex): Path<String>, headers: HeaderMap) -> Response {
    let hex = match digest_hex(&hex) {
        Ok(hex) => hex,
        Err(e) => return cache_error(&e),
    };
    let range = headers.get(header::RANGE).and_then(|v| v.to_str().ok());
    let (offset, len, partial_content) = match range {
        Some(value) => {
            let size = cache.piece_map(&hex).map(|m| m.size);
            match parse_range(value, size) {
                Some((offset, len)) => (offset, len, true),
                None => return error(416, format!("unsupported or unsatisfiable range {value:?}")),
            }
        }
        None => match cache.piece_map(&hex) {
            Some(map) if map.complete => (0, map.size, false),
            _ => return error(404, format!("sha256:{hex} is not complete here")),
        },
    };
    let source = match cache.source(&hex, offset, len) {
        Ok(source) => source,
        Err(416) => {
            return error(
                416,
                format!("bytes {offset}+{len} are outside sha256:{hex}"),
            );
        }
        Err(status) => {
            return error(
                status,
                format!("bytes {offset}+{len} of sha256:{hex} are not verified here"),
            );
        }
    };
    let (complete, crc, size) = match source {
        Source::Blob { size, crc } => (true, crc, size),
        Source::Partial { crc } => (false, Some(crc), 0),
    };
    let body = if len == 0 {
        Body::empty()
    } else if let Some(expected) = crc {
        // One piece: in an upload slot (or elsewhere when the queue is full), read whole and
        // checked before a byte leaves.
        let Some(slot) = cache.upload_slot().await else {
            return error(
                503,
                format!(
                    "busy: every upload slot is taken; fetch bytes {offset}+{len} of sha256:{hex} elsewhere"
                ),
            );
        };
        let store = cache.store().clone();
        let owned = hex.clone();
        let read =
            tokio::task::spawn_blocking(move || store.read_range(&owned, complete, offset, len))
                .await;
        let bytes = match read {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => return error(500, e.to_string()),
            Err(e) => return error(500, e.to_string()),
        };
        let actual = crc32(&bytes);
        if actual != expected {
            tracing::error!(digest = %hex, offset, expected, actual, "a stored piece no longer matches its CRC32; not serving it");
            return error(
                500,
                format!("stored bytes at {offset} of sha256:{hex} fail their CRC32 check"),
            );
        }
        limited(cache.clone(), Bytes::from(bytes), slot)
    } else {
        stream_file(cache.clone(), hex.clone(), offset, len)
    };
    let mut response = Response::builder()
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_TYPE, "application/octet-stream");
    if partial_content {
        let total = if complete {
            size.to_string()
        } else {
            "*".into()
        };
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {offset}-{}/{total}", offset + len - 1),
        );
    }
    response
        .body(body)
        .unwrap_or_else(|e| error(500, e.to_string()))
}

const CHUNK: usize = 64 << 10;

async fn take(bucket: Option<&Arc<TokenBucket>>, cache: &Cache, len: usize) {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    if let Some(bucket) = bucket {
        bucket.take(len).await;
    }
    cache
        .stats()
        .uploaded_bytes
        .fetch_add(len, Ordering::Relaxed);
}

/// `bytes` in 64 KiB chunks through the upload bucket, holding `slot` until the last one
/// left (or the requester hung up).
fn limited(cache: Cache, bytes: Bytes, slot: OwnedSemaphorePermit) -> Body {
    let bucket = cache.upload_bucket();
    let stream = futures::stream::unfold(
        (bytes, cache, bucket, Some(slot)),
        |(mut rest, cache, bucket, mut slot)| async move {
            if rest.is_empty() {
                return None;
            }
            let chunk = rest.split_to(rest.len().min(CHUNK));
            take(bucket.as_ref(), &cache, chunk.len()).await;
            if rest.is_empty() {
                slot = None;
            }
            Some((Ok::<_, std::io::Error>(chunk), (rest, cache, bucket, slot)))
        },
    );
    Body::from_stream(stream)
}

/// A complete blob's bytes read from disk in chunks, through the upload bucket.
fn stream_file(cache: Cache, hex: String, offset: u64, len: u64) -> Body {
    let bucket = cache.upload_bucket();
    let end = offset + len;
    let stream = futures::stream::unfold(
        (offset, cache, bucket, hex),
        move |(at, cache, bucket, hex)| async move {
            if at >= end {
                return None;
            }
            let want = (end - at).min(CHUNK as u64);
            let store = cache.store().clone();
            let owned = hex.clone();
            let read =
                tokio::task::spawn_blocking(move || store.read_range(&owned, true, at, want)).await;
            let chunk = match read {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => {
                    return Some((
                        Err(std::io::Error::other(e.to_string())),
                        (end, cache, bucket, hex),
                    ));
                }
                Err(e) => {
                    return Some((
                        Err(std::io::Error::other(e.to_string())),
                        (end, cache, bucket, hex),
                    ));
                }
            };
            take(bucket.as_ref(), &cache, chunk.len()).await;
            Some((Ok(Bytes::from(chunk)), (at + want, cache, bucket, hex)))
        },
    );
    Body::from_stream(stream)
}

async fn pull(State(cache): State<Cache>, body: Bytes) -> Response {
    let request: PullRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return error(400, format!("invalid pull request: {e}")),
    };
    match cache.pull(request).await {
        Ok(answer) => Json(answer).into_response(),
        Err(e) => cache_error(&e),
    }
}

async fn status(State(cache): State<Cache>) -> Response {
    Json(cache.status()).into_response()
}

#[derive(Debug, Serialize, Deserialize)]
struct PinRequest {
    digest: String,
}

fn pin_request(body: &[u8]) -> Result<PinRequest, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid pin request: {e}"))
}

async fn pin(State(cache): State<Cache>, body: Bytes) -> Response {
    let request = match pin_request(&body) {
        Ok(request) => request,
        Err(message) => return error(400, message),
    };
    match cache.pin(&request.digest) {
        Ok(pins) => {
            Json(serde_json::json!({ "digest": request.digest, "pins": pins })).into_response()
        }
        Err(e) => cache_error(&e),
    }
}

async fn unpin(State(cache): State<Cache>, body: Bytes) -> Response {
    let request = match pin_request(&body) {
        Ok(request) => request,
        Err(message) => return error(400, message),
    };
    match cache.unpin(&request.digest) {
        Ok(pins) => {
            Json(serde_json::json!({ "digest": request.digest, "pins": pins })).into_response()
        }
        Err(e) => cache_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn range_table() {
        for (value, size, want) in [
            ("bytes=0-9", None, Some((0, 10))),
            ("bytes=5-5", Some(10), Some((5, 1))),
            ("bytes=5-", Some(10), Some((5, 5))),
            ("bytes=5-", None, None),
            ("bytes=9-5", None, None),
            ("bytes=a-5", None, None),
            ("items=0-5", None, None),
            ("bytes=0-1,4-5", None, None),
            ("bytes=0-18446744073709551615", None, None),
        ] {
            assert_eq!(parse_range(value, size), want, "{value}");
        }
    }
}
