//! The HTTP client the cache fetches with (hyper-util's pooled client, plain HTTP): ranged GETs
//! against the origin and peers, counted and rate-limited as the body arrives, and the JSON
//! calls of the peer protocol.
//!
//! It classifies failures for the core's retry verdicts ([`tessera_cache::retry`]) but does not
//! decide whether to retry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tessera_cache::retry::TransportFailure;
use thiserror::Error;

use crate::rate::TokenBucket;

/// Why a request failed.
#[derive(Debug, Clone, Error)]
pub enum FetchError {
    #[error("answered {status}{}", if body.is_empty() { String::new() } else { format!(": {body}") })]
    Status { status: u16, body: String },
    #[error("{failure:?}: {message}")]
    Transport {
        failure: TransportFailure,
        message: String,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The client.
#[derive(Clone, Debug)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Http {
    fn default() -> Self {
        Self::new()
    }
}

/// Where the bytes of a ranged GET are counted and limited.
pub struct Meter<'a> {
    pub bucket: Option<&'a TokenBucket>,
    pub counter: &'a AtomicU64,
}

fn transport(error: impl std::fmt::Display, timeout: bool) -> FetchError {
    FetchError::Transport {
        failure: if timeout {
            TransportFailure::Timeout
        } else {
            TransportFailure::Connect
        },
        message: error.to_string(),
    }
}

impl Http {
    pub fn new() -> Self {
        Self::with_idle(1, Duration::from_secs(5))
    }

    /// A client keeping at most `per_peer` unused connections to each peer, for `timeout`.
    pub fn with_idle(per_peer: usize, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        Self {
            client: Client::builder(TokioExecutor::new())
                .pool_idle_timeout(timeout)
                .pool_max_idle_per_host(per_peer)
                .build(connector),
        }
    }

    fn request(
        method: Method,
        url: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Request<Full<Bytes>>, FetchError> {
        if url.starts_with("https://") {
            return Err(FetchError::Invalid(format!(
                "{url}: https origins are not supported by the node cache yet; use an http:// URL"
            )));
        }
        let mut builder = Request::builder().method(method).uri(url);
        if body.is_some() {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
        }
        builder
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| FetchError::Invalid(format!("{url}: {e}")))
    }

    /// GETs bytes `first..=last` of `url` (the whole body when `range` is `None`), reading at
    /// most `max_len` bytes; `idle` bounds the wait for each part of the answer. Returns the
    /// status and the bytes; a body cut short is a [`TransportFailure::ShortBody`].
    pub async fn get_range(
        &self,
        url: &str,
        range: Option<(u64, u64)>,
        max_len: u64,
        idle: Duration,
        meter: Meter<'_>,
    ) -> Result<(u16, Bytes), FetchError> {
        let mut request = Self::request(Method::GET, url, None)?;
        if let Some((first, last)) = range
            && let Ok(value) = format!("bytes={first}-{last}").parse()
        {
            request.headers_mut().insert(header::RANGE, value);
        }
        let response = tokio::time::timeout(idle, self.client.request(request))
            .await
            .map_err(|e| transport(e, true))?
            .map_err(|e| transport(e, false))?;
        let status = response.status();
        let mut body = response.into_body();
        if !(status == StatusCode::OK || status == StatusCode::PARTIAL_CONTENT) {
            let text = read_small(&mut body, idle).await;
            return Err(FetchError::Status {
                status: status.as_u16(),
                body: text,
            });
        }
        let mut bytes = BytesMut::new();
        loop {
            let frame = match tokio::time::timeout(idle, body.frame()).await {
                Err(e) => return Err(transport(e, true)),
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    return Err(FetchError::Transport {
                        failure: TransportFailure::ShortBody,
                        message: format!("the body ended after {} bytes: {e}", bytes.len()),
                    });
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
            if let Some(bucket) = meter.bucket {
                bucket.take(len).await;
            }
            meter.counter.fetch_add(len, Ordering::Relaxed);
            bytes.extend_from_slice(&data);
            if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max_len {
                break;
            }
        }
        Ok((status.as_u16(), bytes.freeze()))
    }

    /// GETs JSON.
    pub async fn get_json<T: DeserializeOwned>(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<T, FetchError> {
        let request = Self::request(Method::GET, url, None)?;
        self.json(request, Some(timeout)).await
    }

    /// POSTs JSON and reads JSON back; `timeout` bounds the whole exchange when given.
    pub async fn post_json<B: Serialize, T: DeserializeOwned>(
        &self,
        url: &str,
        body: &B,
        timeout: Option<Duration>,
    ) -> Result<T, FetchError> {
        let bytes = serde_json::to_vec(body).map_err(|e| FetchError::Invalid(e.to_string()))?;
        let request = Self::request(Method::POST, url, Some(bytes))?;
        self.json(request, timeout).await
    }

    async fn json<T: DeserializeOwned>(
        &self,
        request: Request<Full<Bytes>>,
        timeout: Option<Duration>,
    ) -> Result<T, FetchError> {
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport(e, false))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| transport(e, false))?
                .to_bytes();
            if !status.is_success() {
                let message = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
                return Err(FetchError::Status {
                    status: status.as_u16(),
                    body: message,
                });
            }
            serde_json::from_slice(&body)
                .map_err(|e| FetchError::Invalid(format!("unreadable answer: {e}")))
        };
        match timeout {
            Some(limit) => tokio::time::timeout(limit, exchange)
                .await
                .map_err(|e| transport(e, true))?,
            None => exchange.await,
        }
    }
}

async fn read_small(body: &mut hyper::body::Incoming, idle: Duration) -> String {
    let mut out = Vec::new();
    while out.len() < 4096 {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            _ => break,
        }
    }
    out.truncate(4096);
    String::from_utf8_lossy(&out).trim().to_owned()
}
