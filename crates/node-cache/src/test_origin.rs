//! An in-process HTTP origin for tests and benches: serves generated blobs by path (ignoring
//! the query, as an object store ignores presigned parameters once checked), honours one
//! `Range`, limits its sending rate, counts requests and bytes sent, and injects faults: the
//! next requests answered with a status (403, 503), a body corrupted or cut short.
//!
//! It is not used by the daemon; it knows nothing of caches.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tessera_cache::SeededRng;

use crate::rate::TokenBucket;

/// A fault the origin injects into the next request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer this status with a short XML body, as S3 does.
    Status(u16),
    /// Flip a byte of the body.
    Corrupt,
    /// Send half the body, then break the connection.
    Truncate,
}

#[derive(Default)]
struct Origin {
    blobs: Mutex<HashMap<String, Bytes>>,
    faults: Mutex<VecDeque<Fault>>,
    /// Answer every request with this status.
    always: Mutex<Option<u16>>,
    requests: AtomicU64,
    bytes_sent: AtomicU64,
    bucket: Option<TokenBucket>,
}

/// A running test origin; it stops when the runtime it was started on stops.
#[derive(Clone)]
pub struct TestOrigin {
    addr: SocketAddr,
    origin: Arc<Origin>,
}

/// `size` reproducible pseudo-random bytes from `seed`.
pub fn generate(size: usize, seed: u64) -> Vec<u8> {
    let mut rng = SeededRng::new(seed);
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(size);
    out
}

impl TestOrigin {
    /// Starts an origin on 127.0.0.1 sending at most `rate` bytes a second (all requests
    /// together) when given.
    pub async fn start(rate: Option<u64>) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let origin = Arc::new(Origin {
            bucket: rate.map(|r| TokenBucket::new(r, Some(64 << 10))),
            ..Origin::default()
        });
        let app = Router::new().fallback(serve).with_state(origin.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, origin })
    }

    /// Serves `bytes` at `path` (which starts with `/`); returns the URL.
    pub fn put(&self, path: &str, bytes: impl Into<Bytes>) -> String {
        if let Ok(mut blobs) = self.origin.blobs.lock() {
            blobs.insert(path.to_owned(), bytes.into());
        }
        self.url(path)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Queues a fault for the next request.
    pub fn fault(&self, fault: Fault) {
        if let Ok(mut faults) = self.origin.faults.lock() {
            faults.push_back(fault);
        }
    }

    /// Answers every request with `status` (or normally again with `None`).
    pub fn always(&self, status: Option<u16>) {
        if let Ok(mut always) = self.origin.always.lock() {
            *always = status;
        }
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.origin.requests.load(Ordering::Relaxed)
    }

    /// Body bytes sent so far.
    pub fn bytes_sent(&self) -> u64 {
        self.origin.bytes_sent.load(Ordering::Relaxed)
    }
}

fn range(headers: &HeaderMap, size: u64) -> Option<Option<(u64, u64)>> {
    let Some(value) = headers.get(header::RANGE) else {
        return Some(None);
    };
    let spec = value.to_str().ok()?.strip_prefix("bytes=")?;
    let (first, last) = spec.split_once('-')?;
    let first: u64 = first.parse().ok()?;
    let last: u64 = if last.is_empty() {
        size.checked_sub(1)?
    } else {
        last.parse::<u64>().ok()?.min(size.checked_sub(1)?)
    };
    (first <= last).then_some(Some((first, last)))
}

async fn serve(State(origin): State<Arc<Origin>>, uri: Uri, headers: HeaderMap) -> Response {
    origin.requests.fetch_add(1, Ordering::Relaxed);
    let fault = origin.faults.lock().ok().and_then(|mut f| f.pop_front());
    let always = origin.always.lock().ok().and_then(|a| *a);
    if let Some(status) = always.or(match fault {
        Some(Fault::Status(status)) => Some(status),
        _ => None,
    }) {
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = format!(
            "<Error><Code>{}</Code><Message>test origin fault</Message></Error>",
            code.canonical_reason().unwrap_or("Error").replace(' ', "")
        );
        return (code, body).into_response();
    }
    let blob = origin
        .blobs
        .lock()
        .ok()
        .and_then(|b| b.get(uri.path()).cloned());
    let Some(blob) = blob else {
        return (
            StatusCode::NOT_FOUND,
            "<Error><Code>NoSuchKey</Code></Error>",
        )
            .into_response();
    };
    let size = u64::try_from(blob.len()).unwrap_or(u64::MAX);
    let Some(asked) = range(&headers, size) else {
        return StatusCode::RANGE_NOT_SATISFIABLE.into_response();
    };
    let (first, last) = asked.unwrap_or((0, size.saturating_sub(1)));
    let start = usize::try_from(first).unwrap_or(usize::MAX);
    let end = usize::try_from(last)
        .unwrap_or(usize::MAX)
        .saturating_add(1);
    let Some(slice) = blob.get(start..end.min(blob.len())) else {
        return StatusCode::RANGE_NOT_SATISFIABLE.into_response();
    };
    let mut body = Bytes::copy_from_slice(slice);
    let len = body.len();
    let mut cut = None;
    match fault {
        Some(Fault::Corrupt) if len > 0 => {
            let mut bytes = body.to_vec();
            bytes[len / 2] ^= 0xff;
            body = Bytes::from(bytes);
        }
        Some(Fault::Truncate) => cut = Some(len / 2),
        _ => {}
    }
    let stream = futures::stream::unfold(
        (body, origin.clone(), 0usize),
        move |(mut rest, origin, sent)| async move {
            if rest.is_empty() {
                return None;
            }
            if cut.is_some_and(|c| sent >= c) {
                return Some((
                    Err(std::io::Error::other("test origin cut the body short")),
                    (Bytes::new(), origin, sent),
                ));
            }
            let chunk = rest.split_to(rest.len().min(64 << 10));
            if let Some(bucket) = &origin.bucket {
                bucket.take(u64::try_from(chunk.len()).unwrap_or(0)).await;
            }
            origin
                .bytes_sent
                .fetch_add(u64::try_from(chunk.len()).unwrap_or(0), Ordering::Relaxed);
            let sent = sent + chunk.len();
            Some((Ok(chunk), (rest, origin, sent)))
        },
    );
    let mut response = Response::builder()
        .header(header::CONTENT_LENGTH, len)
        .header(header::ACCEPT_RANGES, "bytes");
    if asked.is_some() {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!("bytes {first}-{last}/{size}"),
        );
    }
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
