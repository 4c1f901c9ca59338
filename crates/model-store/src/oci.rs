//! The ModelPack view: a read-only OCI distribution endpoint on the store's listener.
//!
//! `GET /v2/` answers the API check; `GET|HEAD /v2/<org>/<name>/manifests/<revision>` (or
//! `…/manifests/sha256:<hex>`) the manifest `tessera_cache::modelpack::build` makes from the
//! index's entries under `models/<org>/<name>/<revision>/`; `GET|HEAD
//! /v2/<org>/<name>/blobs/sha256:<hex>` the config blob or a file whose indexed sha256 is
//! that digest, honouring one `Range` (206 with `Content-Range`, 416 past the end). Errors
//! are the distribution spec's JSON (`NAME_UNKNOWN`, `MANIFEST_UNKNOWN`, `BLOB_UNKNOWN`,
//! `NAME_INVALID`, `DIGEST_INVALID`, `UNSUPPORTED`). Reads need the store's access key and
//! secret as HTTP Basic credentials (what `docker login`, `oras` and `skopeo --creds` send):
//! without them every path, `/v2/` too, answers 401 `UNAUTHORIZED` with a `Basic` challenge,
//! as a private registry does. Nothing is written here.
//!
//! Decides nothing itself: the layout, the manifest, the route and the range come from the
//! core; this module reads the index and files and writes HTTP.

use std::collections::BTreeMap;
use std::io::SeekFrom;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{Method, Response, StatusCode, header};
use s3s::Body;
use tessera_cache::modelpack::{
    self, Artifact, BUCKET, ByteRange, MANIFEST_MEDIA_TYPE, ModelFile, ModelRef, OciRoute,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::Credentials;
use crate::index::Index;

/// The realm of the view's `WWW-Authenticate` challenge.
pub const REALM: &str = "tessera-model-store";

/// Whether an `Authorization` header carries `credentials` as HTTP Basic
/// (`base64(access key id:secret)`).
pub fn authorized(header: Option<&str>, credentials: &Credentials) -> bool {
    use base64::Engine;
    let Some(encoded) = header.and_then(|h| {
        h.split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
            .map(|(_, value)| value.trim())
    }) else {
        return false;
    };
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
        return false;
    };
    let expected = format!(
        "{}:{}",
        credentials.access_key_id, credentials.secret_access_key
    );
    // Compared through their digests, so the time taken tells nothing of the secret.
    use sha2::{Digest, Sha256};
    Sha256::digest(&decoded) == Sha256::digest(expected.as_bytes())
}

/// Answers an OCI request, or `None` when the path is not under `/v2` (an S3 request).
/// `authorized`: whether the request carries the store's credentials ([`authorized`]).
pub async fn answer(
    index: &Index,
    root: &Path,
    method: &Method,
    path: &str,
    range: Option<&str>,
    authorized: bool,
) -> Option<Response<Body>> {
    let route = match modelpack::parse_oci_path(path) {
        Ok(None) => return None,
        Ok(Some(route)) => route,
        Err(error) => {
            let code = if error.to_string().contains("digest") {
                "DIGEST_INVALID"
            } else {
                "NAME_INVALID"
            };
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                code,
                &error.to_string(),
            ));
        }
    };
    if !authorized {
        let mut response = error_response(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "authentication required: the model store's access key and secret as Basic credentials",
        );
        if let Ok(challenge) = http::HeaderValue::from_str(&format!("Basic realm=\"{REALM}\"")) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, challenge);
        }
        return Some(response);
    }
    if method != Method::GET && method != Method::HEAD {
        return Some(error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "this registry is read-only: push models with S3 (`tessera model push`)",
        ));
    }
    let head = method == Method::HEAD;
    Some(match route {
        OciRoute::Ping => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .header("Docker-Distribution-API-Version", "registry/2.0")
            .body(Body::from("{}".to_owned()))
            .unwrap_or_default(),
        OciRoute::Manifest {
            org,
            name,
            reference,
        } => manifest(index, &org, &name, &reference, head),
        OciRoute::Blob { org, name, sha256 } => {
            blob(index, root, &org, &name, &sha256, range, head).await
        }
    })
}

/// The revisions of `org/name` and their files, from the index.
fn revisions(index: &Index, org: &str, name: &str) -> BTreeMap<ModelRef, Vec<ModelFile>> {
    let mut revisions: BTreeMap<ModelRef, Vec<ModelFile>> = BTreeMap::new();
    for (key, entry) in index.list(BUCKET, &format!("{org}/{name}/")) {
        if let Some((model, path)) = modelpack::split_object_key(&key) {
            revisions.entry(model).or_default().push(ModelFile {
                path,
                sha256: entry.sha256,
                size: entry.size,
            });
        }
    }
    revisions
}

/// Every revision's artifact of `org/name`.
fn artifacts(index: &Index, org: &str, name: &str) -> Vec<(ModelRef, Artifact, Vec<ModelFile>)> {
    revisions(index, org, name)
        .into_iter()
        .filter_map(|(model, files)| {
            modelpack::build(&model, &files)
                .ok()
                .map(|artifact| (model, artifact, files))
        })
        .collect()
}

fn manifest(index: &Index, org: &str, name: &str, reference: &str, head: bool) -> Response<Body> {
    let all = artifacts(index, org, name);
    if all.is_empty() {
        return error_response(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            &format!("repository {org}/{name} is not known to the model store"),
        );
    }
    let found = all.into_iter().find(|(model, artifact, _)| {
        model.revision == reference || artifact.manifest_digest == reference
    });
    let Some((_, artifact, _)) = found else {
        return error_response(
            StatusCode::NOT_FOUND,
            "MANIFEST_UNKNOWN",
            &format!("manifest unknown: {org}/{name} has no revision {reference}"),
        );
    };
    let len = artifact.manifest.len();
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, MANIFEST_MEDIA_TYPE)
        .header(header::CONTENT_LENGTH, len)
        .header("Docker-Content-Digest", &artifact.manifest_digest)
        .body(if head {
            Body::empty()
        } else {
            Body::from(Bytes::from(artifact.manifest))
        })
        .unwrap_or_default()
}

/// Where a blob's bytes come from.
enum Source {
    Memory(Vec<u8>),
    File(PathBuf, u64),
}

async fn blob(
    index: &Index,
    root: &Path,
    org: &str,
    name: &str,
    sha256: &str,
    range: Option<&str>,
    head: bool,
) -> Response<Body> {
    let digest = format!("sha256:{sha256}");
    let all = artifacts(index, org, name);
    if all.is_empty() {
        return error_response(
            StatusCode::NOT_FOUND,
            "NAME_UNKNOWN",
            &format!("repository {org}/{name} is not known to the model store"),
        );
    }
    let mut source = None;
    for (model, artifact, files) in &all {
        if artifact.config_digest == digest {
            source = Some(Source::Memory(artifact.config.clone()));
            break;
        }
        if let Some(file) = files.iter().find(|f| f.sha256 == sha256) {
            let key = format!("{}{}", model.prefix(), file.path);
            source = Some(Source::File(root.join(BUCKET).join(key), file.size));
            break;
        }
    }
    let Some(source) = source else {
        return error_response(
            StatusCode::NOT_FOUND,
            "BLOB_UNKNOWN",
            &format!("blob unknown to {org}/{name}: {digest}"),
        );
    };
    let len = match &source {
        Source::Memory(bytes) => bytes.len() as u64,
        Source::File(_, size) => *size,
    };
    let (status, start, end) = match modelpack::byte_range(range, len) {
        ByteRange::Full => (StatusCode::OK, 0, len),
        ByteRange::Partial { start, end } => (StatusCode::PARTIAL_CONTENT, start, end + 1),
        ByteRange::Unsatisfiable => {
            return Response::builder()
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"))
                .body(Body::empty())
                .unwrap_or_default();
        }
    };
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, end - start)
        .header(header::ACCEPT_RANGES, "bytes")
        .header("Docker-Content-Digest", &digest);
    if status == StatusCode::PARTIAL_CONTENT {
        response = response.header(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{len}", end - 1),
        );
    }
    let body = if head {
        Body::empty()
    } else {
        match source {
            Source::Memory(bytes) => {
                let slice = usize::try_from(start).unwrap_or(0)..usize::try_from(end).unwrap_or(0);
                Body::from(Bytes::from(bytes).slice(slice))
            }
            Source::File(path, _) => match file_body(&path, start, end - start).await {
                Ok(body) => body,
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "open an indexed blob");
                    return error_response(
                        StatusCode::NOT_FOUND,
                        "BLOB_UNKNOWN",
                        &format!("blob {digest} is indexed but its file cannot be read"),
                    );
                }
            },
        }
    };
    response.body(body).unwrap_or_default()
}

/// `len` bytes of the file at `path` from `start`, streamed in 256 KiB chunks.
pub(crate) async fn file_body(path: &Path, start: u64, len: u64) -> std::io::Result<Body> {
    let mut file = tokio::fs::File::open(path).await?;
    file.seek(SeekFrom::Start(start)).await?;
    let stream = futures::stream::unfold((file, len), |(mut file, left)| async move {
        if left == 0 {
            return None;
        }
        let want = usize::try_from(left.min(256 * 1024)).unwrap_or(256 * 1024);
        let mut buffer = vec![0u8; want];
        match file.read(&mut buffer).await {
            Ok(0) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the blob's file is shorter than indexed",
                )),
                (file, 0),
            )),
            Ok(read) => {
                buffer.truncate(read);
                Some((
                    Ok(hyper::body::Frame::data(Bytes::from(buffer))),
                    (file, left - read as u64),
                ))
            }
            Err(error) => Some((Err(error), (file, 0))),
        }
    });
    Ok(Body::http_body_unsync(http_body_util::StreamBody::new(
        stream,
    )))
}

/// The distribution spec's error body.
fn error_response(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({"errors": [{"code": code, "message": message}]});
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap_or_default()
}
