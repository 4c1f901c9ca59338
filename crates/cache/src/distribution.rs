//! The OCI distribution API's decisions for the image registry `tessera up` serves: which
//! route a request path names (`/v2/`, manifests by tag or digest, blobs, blob uploads, the
//! tag list), the spec's repository name, tag and digest grammars, the error codes with their
//! HTTP statuses and JSON body, what a pushed manifest references and how large the image it
//! describes is, whether an upload chunk's `Content-Range` continues the upload, query
//! parameters and the tag list's pagination (`n`, `last` and the `Link` header).
//!
//! Pure: no files, no sockets, no clock. Knows nothing of where blobs are kept, of
//! authentication or of HTTP beyond status numbers and header values it returns as text.

use serde_json::Value;

use crate::is_lower_hex;

/// An OCI image manifest.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// An OCI image index.
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// A Docker image manifest, schema 2.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// A Docker manifest list.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// The largest manifest accepted (the spec's 4 MiB floor for what registries take).
pub const MANIFEST_MAX_BYTES: usize = 4 * 1024 * 1024;
/// The longest repository name (with the registry host, a reference stays under 256).
pub const NAME_MAX_LEN: usize = 255;

/// The spec's error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BlobUnknown,
    BlobUploadInvalid,
    BlobUploadUnknown,
    DigestInvalid,
    ManifestBlobUnknown,
    ManifestInvalid,
    ManifestUnknown,
    NameInvalid,
    NameUnknown,
    SizeInvalid,
    Unauthorized,
    Unsupported,
    /// A chunk that does not continue the upload (416; the spec gives no code, distribution
    /// answers `BLOB_UPLOAD_INVALID`).
    RangeInvalid,
    /// The registry failed (500; distribution's `UNKNOWN`).
    Unknown,
}

impl ErrorCode {
    /// The code as the JSON body spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BlobUnknown => "BLOB_UNKNOWN",
            ErrorCode::BlobUploadInvalid | ErrorCode::RangeInvalid => "BLOB_UPLOAD_INVALID",
            ErrorCode::BlobUploadUnknown => "BLOB_UPLOAD_UNKNOWN",
            ErrorCode::DigestInvalid => "DIGEST_INVALID",
            ErrorCode::ManifestBlobUnknown => "MANIFEST_BLOB_UNKNOWN",
            ErrorCode::ManifestInvalid => "MANIFEST_INVALID",
            ErrorCode::ManifestUnknown => "MANIFEST_UNKNOWN",
            ErrorCode::NameInvalid => "NAME_INVALID",
            ErrorCode::NameUnknown => "NAME_UNKNOWN",
            ErrorCode::SizeInvalid => "SIZE_INVALID",
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::Unknown => "UNKNOWN",
        }
    }

    /// The HTTP status the code is answered with.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BlobUnknown
            | ErrorCode::BlobUploadUnknown
            | ErrorCode::ManifestUnknown
            | ErrorCode::NameUnknown => 404,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Unsupported => 405,
            ErrorCode::RangeInvalid => 416,
            ErrorCode::Unknown => 500,
            ErrorCode::BlobUploadInvalid
            | ErrorCode::DigestInvalid
            | ErrorCode::ManifestBlobUnknown
            | ErrorCode::ManifestInvalid
            | ErrorCode::NameInvalid
            | ErrorCode::SizeInvalid => 400,
        }
    }
}

/// A refused request: a code and a message naming what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", code.as_str())]
pub struct RegistryError {
    pub code: ErrorCode,
    pub message: String,
}

impl RegistryError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RegistryError {
        RegistryError {
            code,
            message: message.into(),
        }
    }

    /// The spec's error body: `{"errors":[{"code":…,"message":…}]}`.
    pub fn body(&self) -> String {
        serde_json::json!({"errors": [{"code": self.code.as_str(), "message": self.message}]})
            .to_string()
    }
}

/// A manifest reference: a tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    Tag(String),
    /// `sha256:<hex>`.
    Digest(String),
}

impl Reference {
    /// The reference as written in a path.
    pub fn as_str(&self) -> &str {
        match self {
            Reference::Tag(tag) => tag,
            Reference::Digest(digest) => digest,
        }
    }
}

/// A request of the distribution API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/v2/`: the API version check.
    Ping,
    /// `/v2/<name>/manifests/<reference>`.
    Manifest { name: String, reference: Reference },
    /// `/v2/<name>/blobs/<digest>`.
    Blob { name: String, digest: String },
    /// `/v2/<name>/blobs/uploads/`: starts an upload (or a monolithic one, or a mount).
    StartUpload { name: String },
    /// `/v2/<name>/blobs/uploads/<id>`: an upload under way.
    Upload { name: String, id: String },
    /// `/v2/<name>/tags/list`.
    Tags { name: String },
}

/// The route of a request path; `None` when the path is not under `/v2`.
pub fn parse_path(path: &str) -> Option<Result<Route, RegistryError>> {
    if path == "/v2" || path == "/v2/" {
        return Some(Ok(Route::Ping));
    }
    let rest = path.strip_prefix("/v2/")?;
    Some(parse_rest(rest))
}

fn parse_rest(rest: &str) -> Result<Route, RegistryError> {
    let parts: Vec<&str> = rest.split('/').collect();
    let unknown = || {
        RegistryError::new(
            ErrorCode::Unsupported,
            format!("/v2/{rest} is no route of the distribution API"),
        )
    };
    let name_of = |n: usize| -> Result<String, RegistryError> {
        let name = parts[..n].join("/");
        check_name(&name)?;
        Ok(name)
    };
    let len = parts.len();
    if len >= 3 && parts[len - 2] == "tags" && parts[len - 1] == "list" {
        return Ok(Route::Tags {
            name: name_of(len - 2)?,
        });
    }
    if len >= 3 && parts[len - 2] == "manifests" {
        let reference = parse_reference(parts[len - 1])?;
        return Ok(Route::Manifest {
            name: name_of(len - 2)?,
            reference,
        });
    }
    if len >= 4 && parts[len - 3] == "blobs" && parts[len - 2] == "uploads" {
        let id = parts[len - 1];
        let name = name_of(len - 3)?;
        if id.is_empty() {
            return Ok(Route::StartUpload { name });
        }
        if id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(RegistryError::new(
                ErrorCode::BlobUploadUnknown,
                format!("upload {id:?} is not one this registry started"),
            ));
        }
        return Ok(Route::Upload {
            name,
            id: id.to_owned(),
        });
    }
    if len >= 3 && parts[len - 2] == "blobs" && parts[len - 1] == "uploads" {
        return Ok(Route::StartUpload {
            name: name_of(len - 2)?,
        });
    }
    if len >= 3 && parts[len - 2] == "blobs" {
        let digest = parts[len - 1];
        check_digest(digest)?;
        return Ok(Route::Blob {
            name: name_of(len - 2)?,
            digest: digest.to_owned(),
        });
    }
    Err(unknown())
}

/// Checks a repository name against the spec's grammar: `/`-separated components of lower
/// case letters and digits joined by `.`, `_`, `__` or runs of `-`.
pub fn check_name(name: &str) -> Result<(), RegistryError> {
    let bad = |why: &str| {
        RegistryError::new(
            ErrorCode::NameInvalid,
            format!("invalid repository name {name:?}: {why}"),
        )
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > NAME_MAX_LEN {
        return Err(bad("longer than 255 characters"));
    }
    for component in name.split('/') {
        if !component_ok(component) {
            return Err(bad(
                "each path component is lower-case letters and digits, separated by '.', '_', '__' or '-'",
            ));
        }
    }
    Ok(())
}

fn component_ok(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if alnum(b) {
            i += 1;
            continue;
        }
        // A separator run: `.`, `_`, `__` or one or more `-`, then an alphanumeric.
        let start = i;
        match b {
            b'.' => i += 1,
            b'_' => {
                i += 1;
                if bytes.get(i) == Some(&b'_') {
                    i += 1;
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return false,
        }
        if i == start || !bytes.get(i).copied().is_some_and(alnum) {
            return false;
        }
    }
    true
}

/// Checks a tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn check_tag(tag: &str) -> Result<(), RegistryError> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !tag.starts_with(['.', '-']);
    if ok {
        Ok(())
    } else {
        Err(RegistryError::new(
            ErrorCode::ManifestInvalid,
            format!(
                "invalid tag {tag:?}: up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'"
            ),
        ))
    }
}

/// Checks a digest: `sha256:` and 64 lower-case hex digits (the only algorithm served).
pub fn check_digest(digest: &str) -> Result<(), RegistryError> {
    match digest.split_once(':') {
        Some(("sha256", hex)) if is_lower_hex(hex, 64) => Ok(()),
        Some(("sha256", _)) => Err(RegistryError::new(
            ErrorCode::DigestInvalid,
            format!("invalid digest {digest:?}: sha256 needs 64 lower-case hex digits"),
        )),
        Some((algorithm, _)) if !algorithm.is_empty() => Err(RegistryError::new(
            ErrorCode::DigestInvalid,
            format!("unsupported digest algorithm {algorithm:?}: only sha256 is served"),
        )),
        _ => Err(RegistryError::new(
            ErrorCode::DigestInvalid,
            format!("invalid digest {digest:?}: expected <algorithm>:<hex>"),
        )),
    }
}

/// A path's manifest reference: a digest when it has a `:`, a tag otherwise.
pub fn parse_reference(reference: &str) -> Result<Reference, RegistryError> {
    if reference.contains(':') {
        check_digest(reference)?;
        Ok(Reference::Digest(reference.to_owned()))
    } else {
        check_tag(reference)?;
        Ok(Reference::Tag(reference.to_owned()))
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::sha256_hex(bytes))
}

/// What a pushed manifest is and refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Its media type (the body's `mediaType`, else the request's `Content-Type`).
    pub media_type: String,
    /// The blobs it needs in the repository (config and layers of an image manifest).
    pub blobs: Vec<String>,
    /// The manifests it lists (an index's), with their platforms (`os/architecture`).
    pub manifests: Vec<(String, String)>,
    /// The bytes an image manifest's config and layers take; for an index the sum of its
    /// entries' declared sizes.
    pub size: u64,
}

/// Whether a media type is an index (a multi-platform list).
pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_MANIFEST_LIST
}

/// Reads a manifest as pushed: a JSON object with `schemaVersion` 2, a known media type
/// agreeing with `content_type`, valid descriptors (digest and size); errors are
/// `MANIFEST_INVALID` naming the field.
pub fn inspect_manifest(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Manifest, RegistryError> {
    let invalid = |message: String| RegistryError::new(ErrorCode::ManifestInvalid, message);
    if body.len() > MANIFEST_MAX_BYTES {
        return Err(RegistryError::new(
            ErrorCode::SizeInvalid,
            format!(
                "manifest of {} bytes is over the {MANIFEST_MAX_BYTES}-byte limit",
                body.len()
            ),
        ));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| invalid(format!("manifest is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(invalid("manifest is not a JSON object".into()));
    }
    if value.get("schemaVersion").and_then(Value::as_u64) != Some(2) {
        return Err(invalid("schemaVersion: must be 2".into()));
    }
    let content_type = content_type
        .map(|c| c.split(';').next().unwrap_or_default().trim())
        .filter(|c| !c.is_empty());
    let declared = value.get("mediaType").and_then(Value::as_str);
    let media_type = match (declared, content_type) {
        (Some(body), Some(header)) if body != header => {
            return Err(invalid(format!(
                "mediaType {body:?} differs from the Content-Type {header:?}"
            )));
        }
        (Some(media_type), _) | (None, Some(media_type)) => media_type.to_owned(),
        (None, None) if value.get("manifests").is_some() => OCI_INDEX.to_owned(),
        (None, None) => OCI_MANIFEST.to_owned(),
    };
    let descriptor = |field: &str, entry: &Value| -> Result<(String, u64), RegistryError> {
        let digest = entry
            .get("digest")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("{field}.digest: required")))?;
        check_digest(digest).map_err(|e| invalid(format!("{field}.digest: {}", e.message)))?;
        let size = entry
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| invalid(format!("{field}.size: a non-negative integer is required")))?;
        Ok((digest.to_owned(), size))
    };
    let mut manifest = Manifest {
        media_type: media_type.clone(),
        blobs: Vec::new(),
        manifests: Vec::new(),
        size: 0,
    };
    if is_index(&media_type) {
        let entries = value
            .get("manifests")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid("manifests: an array is required".into()))?;
        for (i, entry) in entries.iter().enumerate() {
            let (digest, size) = descriptor(&format!("manifests[{i}]"), entry)?;
            let platform = format!(
                "{}/{}",
                entry
                    .pointer("/platform/os")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                entry
                    .pointer("/platform/architecture")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            manifest.size = manifest.size.saturating_add(size);
            manifest.manifests.push((digest, platform));
        }
        return Ok(manifest);
    }
    if media_type != OCI_MANIFEST && media_type != DOCKER_MANIFEST {
        return Err(invalid(format!(
            "mediaType {media_type:?} is not a manifest this registry accepts ({OCI_MANIFEST}, {OCI_INDEX}, {DOCKER_MANIFEST}, {DOCKER_MANIFEST_LIST})"
        )));
    }
    let config = value
        .get("config")
        .ok_or_else(|| invalid("config: required".into()))?;
    let (digest, size) = descriptor("config", config)?;
    manifest.blobs.push(digest);
    manifest.size = size;
    let layers = value
        .get("layers")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("layers: an array is required".into()))?;
    for (i, layer) in layers.iter().enumerate() {
        let (digest, size) = descriptor(&format!("layers[{i}]"), layer)?;
        manifest.size = manifest.size.saturating_add(size);
        if !manifest.blobs.contains(&digest) {
            manifest.blobs.push(digest);
        }
    }
    Ok(manifest)
}

/// The index entry a node of `os/architecture` pulls: its platform's, else the first.
pub fn platform_entry<'a>(manifests: &'a [(String, String)], platform: &str) -> Option<&'a str> {
    manifests
        .iter()
        .find(|(_, p)| p == platform)
        .or_else(|| manifests.first())
        .map(|(digest, _)| digest.as_str())
}

/// Whether a chunk whose `Content-Range` is `header` continues an upload holding `have`
/// bytes: absent (a streamed chunk, appended) or `<start>-<end>` with `start == have`.
pub fn check_chunk(header: Option<&str>, have: u64) -> Result<(), RegistryError> {
    let Some(header) = header else {
        return Ok(());
    };
    let range = header
        .trim()
        .strip_prefix("bytes=")
        .unwrap_or(header.trim());
    let parsed = range
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
    match parsed {
        Some((start, end)) if start == have && end >= start => Ok(()),
        Some(_) => Err(RegistryError::new(
            ErrorCode::RangeInvalid,
            format!("Content-Range {header:?} does not continue the upload at byte {have}"),
        )),
        None => Err(RegistryError::new(
            ErrorCode::BlobUploadInvalid,
            format!("Content-Range {header:?} is not <start>-<end>"),
        )),
    }
}

/// The `Range` header of an upload holding `have` bytes (`0-<last>`; `0-0` when empty).
pub fn upload_range(have: u64) -> String {
    format!("0-{}", have.saturating_sub(1))
}

/// The value of `key` in a query string, percent-decoded (`None` when absent or not UTF-8).
pub fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k)? == key)
            .then(|| percent_decode(v))
            .flatten()
    })
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// One page of a repository's tag list: `tags` sorted, those after `last`, at most `n` (an
/// `n` that is not a number is `SIZE_INVALID`); and the `Link` header's value when more
/// follow.
pub fn tag_page(
    name: &str,
    mut tags: Vec<String>,
    n: Option<&str>,
    last: Option<&str>,
) -> Result<(Vec<String>, Option<String>), RegistryError> {
    tags.sort();
    tags.dedup();
    let limit = match n {
        None | Some("") => None,
        Some(n) => Some(n.parse::<usize>().map_err(|_| {
            RegistryError::new(ErrorCode::SizeInvalid, format!("n={n:?} is not a number"))
        })?),
    };
    let mut page: Vec<String> = tags
        .into_iter()
        .filter(|t| last.is_none_or(|l| t.as_str() > l))
        .collect();
    let mut link = None;
    if let Some(limit) = limit
        && page.len() > limit
    {
        page.truncate(limit);
        if let Some(end) = page.last() {
            link = Some(format!(
                "</v2/{name}/tags/list?n={limit}&last={end}>; rel=\"next\""
            ));
        }
    }
    Ok((page, link))
}

#[cfg(test)]
#[path = "distribution_tests.rs"]
mod tests;
