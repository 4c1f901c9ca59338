//! A light S3 client for `tessera model`: path-style requests over HTTP or HTTPS (hyper-util's
//! client, rustls with the machine's trusted roots or given ones), signed in their headers with `tessera_cache::sigv4` over the payload's sha256;
//! PutObject, a multipart upload for large files, HeadObject, ListObjectsV2 (all pages) and
//! presigned GET URLs. S3's error answers come back as [`ClientError::S3`] with their code.
//!
//! Not a general SDK: no retries, no virtual-hosted addressing, no streaming of a part larger
//! than memory allows.

use std::path::Path;
use std::time::SystemTime;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tessera_cache::sigv4::{self, Signer};
use thiserror::Error;
use tokio::io::AsyncReadExt;

use crate::connection::Connection;
use crate::indexed::SHA256_METADATA;

/// What went wrong talking to the store.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{0}")]
    Endpoint(String),
    #[error("{method} {path}: {source}")]
    Http {
        method: Method,
        path: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{method} {path}: {status} {code}: {message}")]
    S3 {
        method: Method,
        path: String,
        status: StatusCode,
        code: String,
        message: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sign(#[from] sigv4::SigV4Error),
    #[error("{what}: {reason}")]
    Answer { what: String, reason: String },
}

impl ClientError {
    /// The S3 error code (`NoSuchKey`, `SignatureDoesNotMatch`, …), if the store answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::S3 { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// An object as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
}

/// A file of a model revision in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFile {
    /// Its path in the repository.
    pub path: String,
    pub size: u64,
    /// Its recorded sha256 (lower-case hex), when the uploader recorded one.
    pub sha256: Option<String>,
}

/// What HeadObject tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub size: u64,
    /// The `x-amz-meta-sha256` metadata (the embedded store answers its index's sha256).
    pub sha256: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListBucketResult {
    #[serde(default)]
    contents: Vec<Contents>,
    #[serde(default)]
    is_truncated: bool,
    next_continuation_token: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct Contents {
    key: String,
    size: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct InitiateMultipartUploadResult {
    upload_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ErrorAnswer {
    code: String,
    #[serde(default)]
    message: String,
}

/// A client of one store and bucket.
pub struct S3Client {
    connection: Connection,
    /// `http` or `https`.
    scheme: &'static str,
    authority: String,
    http: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client")
            .field("connection", &self.connection)
            .finish_non_exhaustive()
    }
}

/// A response's status, headers and body.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

impl S3Client {
    /// A client of `connection`'s endpoint and bucket; an `https://` endpoint is checked
    /// against the machine's trusted roots.
    pub fn new(connection: Connection) -> Result<Self, ClientError> {
        Self::build(connection, None)
    }

    /// A client trusting only `roots` for an `https://` endpoint.
    pub fn with_roots(
        connection: Connection,
        roots: rustls::RootCertStore,
    ) -> Result<Self, ClientError> {
        Self::build(connection, Some(roots))
    }

    fn build(
        connection: Connection,
        roots: Option<rustls::RootCertStore>,
    ) -> Result<Self, ClientError> {
        let endpoint = connection.endpoint.trim_end_matches('/');
        let (scheme, authority) = if let Some(rest) = endpoint.strip_prefix("http://") {
            ("http", rest)
        } else if let Some(rest) = endpoint.strip_prefix("https://") {
            ("https", rest)
        } else {
            return Err(ClientError::Endpoint(format!(
                "{endpoint}: not an http:// or https:// endpoint"
            )));
        };
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = |roots: rustls::RootCertStore| -> Result<rustls::ClientConfig, ClientError> {
            Ok(
                rustls::ClientConfig::builder_with_provider(provider.clone())
                    .with_safe_default_protocol_versions()
                    .map_err(|e| ClientError::Endpoint(format!("TLS: {e}")))?
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        };
        let builder = match (roots, scheme) {
            (Some(roots), _) => HttpsConnectorBuilder::new().with_tls_config(tls(roots)?),
            (None, "https") => HttpsConnectorBuilder::new()
                .with_provider_and_native_roots(provider.clone())
                .map_err(|e| {
                    ClientError::Endpoint(format!(
                        "{endpoint}: no trusted CA certificates on this machine: {e}"
                    ))
                })?,
            // Plain HTTP: no TLS is ever used.
            (None, _) => {
                HttpsConnectorBuilder::new().with_tls_config(tls(rustls::RootCertStore::empty())?)
            }
        };
        let connector = builder.https_or_http().enable_http1().build();
        Ok(Self {
            authority: authority.to_owned(),
            scheme,
            connection,
            http: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    fn signer(&self) -> Signer<'_> {
        Signer {
            access_key: &self.connection.access_key_id,
            secret_key: &self.connection.secret_access_key,
            region: &self.connection.region,
            service: "s3",
        }
    }

    /// `/<bucket>/<key>` (or `/<bucket>` for an empty key).
    fn path(&self, key: &str) -> String {
        if key.is_empty() {
            format!("/{}", self.connection.bucket)
        } else {
            format!("/{}/{key}", self.connection.bucket)
        }
    }

    /// Sends one signed request and reads the whole answer; an S3 error answer is an error.
    async fn send(
        &self,
        method: Method,
        key: &str,
        query: Vec<(String, String)>,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Answer, ClientError> {
        let path = self.path(key);
        let payload = tessera_cache::sha256_hex(&body);
        let request = sigv4::Request {
            method: method.as_str(),
            host: &self.authority,
            path: &path,
            query,
            time: SystemTime::now(),
        };
        let signed = sigv4::sign_headers(&self.signer(), &request, &payload, headers)?;
        let query = sigv4::canonical_query(&request.query);
        let uri = format!(
            "{}://{}{}{}{query}",
            self.scheme,
            self.authority,
            sigv4::uri_encode(&path, true),
            if query.is_empty() { "" } else { "?" }
        );
        let mut builder = Request::builder()
            .method(method.clone())
            .uri(&uri)
            .header(http::header::HOST, &self.authority);
        for (name, value) in headers.iter().copied() {
            builder = builder.header(name, value);
        }
        for (name, value) in &signed {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let http_error = |source: Box<dyn std::error::Error + Send + Sync>| ClientError::Http {
            method: method.clone(),
            path: path.clone(),
            source,
        };
        let request = builder
            .body(Full::new(body))
            .map_err(|e| http_error(Box::new(e)))?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|e| http_error(Box::new(e)))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| http_error(Box::new(e)))?
            .to_bytes();
        if !parts.status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let (code, message) = match quick_xml::de::from_str::<ErrorAnswer>(&text) {
                Ok(error) => (error.code, error.message),
                Err(_) => (
                    parts
                        .status
                        .canonical_reason()
                        .unwrap_or("error")
                        .replace(' ', ""),
                    text.trim().to_owned(),
                ),
            };
            return Err(ClientError::S3 {
                method,
                path,
                status: parts.status,
                code,
                message,
            });
        }
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// HeadObject; `None` when the key does not exist.
    pub async fn head(&self, key: &str) -> Result<Option<Head>, ClientError> {
        match self
            .send(Method::HEAD, key, vec![], &[], Bytes::new())
            .await
        {
            Ok(answer) => {
                let header = |name: &str| {
                    answer
                        .headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned)
                };
                let size = header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let sha256 = header(&format!("x-amz-meta-{SHA256_METADATA}"))
                    .filter(|v| tessera_cache::is_lower_hex(v, 64));
                Ok(Some(Head { size, sha256 }))
            }
            // A HEAD answer has no body: a missing key is a bare 404.
            Err(ClientError::S3 { status, .. }) if status == StatusCode::NOT_FOUND => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// The files of one model revision (`<org>/<name>/<revision>/…`), sorted by path, with
    /// each one's recorded sha256 (HeadObject; `None` for a file another tool uploaded
    /// without it). Works against any S3 store, not only the embedded one.
    pub async fn model_files(
        &self,
        model: &tessera_cache::modelpack::ModelRef,
    ) -> Result<Vec<ModelFile>, ClientError> {
        let mut files = Vec::new();
        for listed in self.list(&model.prefix()).await? {
            let Some((_, path)) = tessera_cache::modelpack::split_object_key(&listed.key) else {
                continue;
            };
            let sha256 = self.head(&listed.key).await?.and_then(|h| h.sha256);
            files.push(ModelFile {
                path,
                size: listed.size,
                sha256,
            });
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(files)
    }

    /// ListObjectsV2 of the keys under `prefix`, every page.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Listed>, ClientError> {
        let mut listed = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![
                ("list-type".to_owned(), "2".to_owned()),
                ("prefix".to_owned(), prefix.to_owned()),
            ];
            if let Some(token) = &token {
                query.push(("continuation-token".to_owned(), token.clone()));
            }
            let answer = self.send(Method::GET, "", query, &[], Bytes::new()).await?;
            let page: ListBucketResult =
                quick_xml::de::from_str(&String::from_utf8_lossy(&answer.body)).map_err(|e| {
                    ClientError::Answer {
                        what: "ListObjectsV2".into(),
                        reason: e.to_string(),
                    }
                })?;
            listed.extend(page.contents.into_iter().map(|c| Listed {
                key: c.key,
                size: c.size,
            }));
            match page.next_continuation_token {
                Some(next) if page.is_truncated => token = Some(next),
                _ => return Ok(listed),
            }
        }
    }

    /// Uploads the file at `path` to `key`, recording `sha256` as its `x-amz-meta-sha256`:
    /// one PutObject up to `part_size` bytes, a multipart upload of `part_size` parts above.
    pub async fn put_file(
        &self,
        key: &str,
        path: &Path,
        sha256: &str,
        part_size: u64,
    ) -> Result<(), ClientError> {
        let io = |source| ClientError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = tokio::fs::File::open(path).await.map_err(io)?;
        let size = file.metadata().await.map_err(io)?.len();
        let meta = format!("x-amz-meta-{SHA256_METADATA}");
        let part_size = part_size.max(5 << 20);
        if size <= part_size {
            let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            file.read_to_end(&mut bytes).await.map_err(io)?;
            self.send(
                Method::PUT,
                key,
                vec![],
                &[(meta.as_str(), sha256)],
                Bytes::from(bytes),
            )
            .await?;
            return Ok(());
        }
        let answer = self
            .send(
                Method::POST,
                key,
                vec![("uploads".to_owned(), String::new())],
                &[(meta.as_str(), sha256)],
                Bytes::new(),
            )
            .await?;
        let upload: InitiateMultipartUploadResult =
            quick_xml::de::from_str(&String::from_utf8_lossy(&answer.body)).map_err(|e| {
                ClientError::Answer {
                    what: "CreateMultipartUpload".into(),
                    reason: e.to_string(),
                }
            })?;
        let upload_id = upload.upload_id;
        let result = self
            .upload_parts(key, &upload_id, &mut file, size, part_size, path)
            .await;
        if result.is_err() {
            let _ = self
                .send(
                    Method::DELETE,
                    key,
                    vec![("uploadId".to_owned(), upload_id.clone())],
                    &[],
                    Bytes::new(),
                )
                .await;
        }
        result
    }

    async fn upload_parts(
        &self,
        key: &str,
        upload_id: &str,
        file: &mut tokio::fs::File,
        size: u64,
        part_size: u64,
        path: &Path,
    ) -> Result<(), ClientError> {
        let io = |source| ClientError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut parts = Vec::new();
        let mut sent = 0u64;
        let mut number = 1u32;
        while sent < size {
            let len = part_size.min(size - sent);
            let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
            file.read_exact(&mut bytes).await.map_err(io)?;
            let answer = self
                .send(
                    Method::PUT,
                    key,
                    vec![
                        ("partNumber".to_owned(), number.to_string()),
                        ("uploadId".to_owned(), upload_id.to_owned()),
                    ],
                    &[],
                    Bytes::from(bytes),
                )
                .await?;
            let etag = answer
                .headers
                .get(http::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| ClientError::Answer {
                    what: format!("UploadPart {number}"),
                    reason: "no ETag".into(),
                })?
                .to_owned();
            parts.push(format!(
                "<Part><PartNumber>{number}</PartNumber><ETag>{}</ETag></Part>",
                xml_escape(&etag)
            ));
            sent += len;
            number += 1;
        }
        let body = format!(
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">{}</CompleteMultipartUpload>",
            parts.concat()
        );
        let answer = self
            .send(
                Method::POST,
                key,
                vec![("uploadId".to_owned(), upload_id.to_owned())],
                &[],
                Bytes::from(body),
            )
            .await?;
        // CompleteMultipartUpload may answer 200 with an error document.
        let text = String::from_utf8_lossy(&answer.body);
        if let Ok(error) = quick_xml::de::from_str::<ErrorAnswer>(&text)
            && text.contains("<Error")
        {
            return Err(ClientError::S3 {
                method: Method::POST,
                path: self.path(key),
                status: answer.status,
                code: error.code,
                message: error.message,
            });
        }
        Ok(())
    }

    /// DeleteObject.
    pub async fn delete(&self, key: &str) -> Result<(), ClientError> {
        self.send(Method::DELETE, key, vec![], &[], Bytes::new())
            .await
            .map(|_| ())
    }

    /// A presigned GET URL of `key`, valid `expires_secs` from `now`.
    pub fn presign_get(
        &self,
        key: &str,
        now: SystemTime,
        expires_secs: u64,
    ) -> Result<String, ClientError> {
        let path = self.path(key);
        let query = sigv4::presign(
            &self.signer(),
            &sigv4::Request {
                method: "GET",
                host: &self.authority,
                path: &path,
                query: vec![],
                time: now,
            },
            expires_secs,
        )?;
        Ok(format!(
            "{}://{}{}?{query}",
            self.scheme,
            self.authority,
            sigv4::uri_encode(&path, true)
        ))
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
