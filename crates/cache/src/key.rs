//! Request keys and task ids: the same content asked for by different presigned URLs must map
//! to one task, or every node goes back to the origin.
//!
//! [`normalise_url`] drops the query parameters that sign a request rather than name content
//! (S3 SigV4 `X-Amz-*`, SigV2 `AWSAccessKeyId`/`Expires`/`Signature`, GCS `X-Goog-*`, and a
//! configurable list) and sorts the rest by key, as Dragonfly's `filter_query_params`
//! (`dragonfly-client-util/src/url`) does: segments holding `;` are dropped, keys and values are
//! form-decoded and re-escaped as Go's `url.QueryEscape`, values of one key keep their order, and
//! a bare `/` path is trimmed. [`task_id`] hashes the result as Dragonfly's id generator does for
//! a URL-based task without tag or application: `sha256(url ‖ revision ‖ piece_length ‖
//! "STANDARD")`, hex — so ids agree with a Dragonfly peer's for the same inputs.
//!
//! This module knows URL syntax only as far as it needs (scheme, authority, path, query,
//! fragment; the host is lower-cased, the path kept as written); it resolves nothing and does
//! not know which origin a URL points at.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::hex;

/// Query parameters that sign a request and never change the content: S3 SigV4 (as Dragonfly's
/// default list), S3 SigV2 and GCS V4 signing.
pub const DEFAULT_FILTERED_QUERY_PARAMS: &[&str] = &[
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
    "X-Amz-User-Agent",
    "AWSAccessKeyId",
    "Expires",
    "Signature",
    "X-Goog-Algorithm",
    "X-Goog-Credential",
    "X-Goog-Date",
    "X-Goog-Expires",
    "X-Goog-SignedHeaders",
    "X-Goog-Signature",
];

/// Dragonfly's task type name, the last input of its URL-based task id.
const TASK_TYPE_STANDARD: &str = "STANDARD";

/// Why a URL cannot be normalised.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid url {url:?}: {reason}")]
pub struct KeyError {
    pub url: String,
    pub reason: &'static str,
}

/// The query parameter names dropped from request keys (exact, case-sensitive names, as
/// Dragonfly matches them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryFilter {
    names: BTreeSet<String>,
}

impl Default for QueryFilter {
    fn default() -> Self {
        Self::only(DEFAULT_FILTERED_QUERY_PARAMS.iter().copied())
    }
}

impl QueryFilter {
    /// Exactly these names, without the defaults.
    pub fn only<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        Self {
            names: names.into_iter().map(Into::into).collect(),
        }
    }

    /// The defaults plus `extra` (a configured list).
    pub fn with_extra<S: Into<String>>(extra: impl IntoIterator<Item = S>) -> Self {
        let mut filter = Self::default();
        filter.names.extend(extra.into_iter().map(Into::into));
        filter
    }

    pub fn drops(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

/// The request key of `url`: filtered query parameters dropped, the rest sorted by key.
pub fn normalise_url(url: &str, filter: &QueryFilter) -> Result<String, KeyError> {
    let invalid = |reason| KeyError {
        url: url.to_owned(),
        reason,
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| invalid("no scheme"))?;
    if scheme.is_empty()
        || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Err(invalid("bad scheme"));
    }
    let (rest, fragment) = match rest.split_once('#') {
        Some((rest, fragment)) => (rest, Some(fragment)),
        None => (rest, None),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    if host.is_empty() {
        return Err(invalid("no host"));
    }
    if url.chars().any(char::is_control) {
        return Err(invalid("control character"));
    }

    let mut pairs: Vec<(String, String)> = query
        .unwrap_or_default()
        .split('&')
        .filter(|segment| !segment.is_empty() && !segment.contains(';'))
        .map(|segment| {
            let (key, value) = segment.split_once('=').unwrap_or((segment, ""));
            (form_decode(key), form_decode(value))
        })
        .filter(|(key, _)| !filter.drops(key))
        .collect();
    pairs.sort_by(|(a, _), (b, _)| a.cmp(b));

    let mut out = scheme.to_ascii_lowercase();
    out.push_str("://");
    if let Some(userinfo) = userinfo {
        out.push_str(userinfo);
        out.push('@');
    }
    out.push_str(&host.to_ascii_lowercase());
    out.push_str(if path.is_empty() { "/" } else { path });
    if !pairs.is_empty() {
        out.push('?');
        let query: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
            .collect();
        out.push_str(&query.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    if (path.is_empty() || path == "/") && out.ends_with('/') {
        out.pop();
    }
    Ok(out)
}

/// The task id of a normalised request key: `sha256(url ‖ revision ‖ piece_length ‖
/// "STANDARD")` in hex, Dragonfly's URL-based id without tag or application.
pub fn task_id(normalised_url: &str, revision: Option<&str>, piece_length: u64) -> String {
    let mut hasher = Sha256::new();
    hasher.update(normalised_url.as_bytes());
    if let Some(revision) = revision {
        hasher.update(revision.as_bytes());
    }
    hasher.update(piece_length.to_string().as_bytes());
    hasher.update(TASK_TYPE_STANDARD.as_bytes());
    hex(&hasher.finalize())
}

/// [`normalise_url`] then [`task_id`].
pub fn request_task_id(
    url: &str,
    revision: Option<&str>,
    piece_length: u64,
    filter: &QueryFilter,
) -> Result<String, KeyError> {
    Ok(task_id(
        &normalise_url(url, filter)?,
        revision,
        piece_length,
    ))
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte; a `%` not
/// followed by two hex digits stays as written; invalid UTF-8 is replaced.
fn form_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|b| char::from(*b).to_digit(16));
                let lo = bytes.get(i + 2).and_then(|b| char::from(*b).to_digit(16));
                match (hi, lo) {
                    (Some(hi), Some(lo)) => {
                        out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Go's `url.QueryEscape`: unreserved bytes as they are, space as `+`, the rest `%XX`.
fn query_escape(input: &str) -> String {
    let mut out = String::with_capacity(input.len());
    for byte in input.bytes() {
        match byte {
            b'-' | b'.' | b'_' | b'~' | b'0'..=b'9' | b'A'..=b'Z' | b'a'..=b'z' => {
                out.push(char::from(byte))
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_table() {
        let none = QueryFilter::only(["none"]);
        let cases: Vec<(&str, QueryFilter, &str)> = vec![
            // Dragonfly's filter_query_params table.
            (
                "https://example.com/file.txt?z=9&b=2&a=1",
                QueryFilter::only(["z"]),
                "https://example.com/file.txt?a=1&b=2",
            ),
            (
                "https://example.com/file.txt?b=2&a=1&b=1",
                QueryFilter::only(["c"]),
                "https://example.com/file.txt?a=1&b=2&b=1",
            ),
            (
                "https://example.com?foo=foo",
                QueryFilter::only(["foo"]),
                "https://example.com",
            ),
            (
                "https://example.com/file.txt?k=a b&m=x*y&n=c~d",
                none.clone(),
                "https://example.com/file.txt?k=a+b&m=x%2Ay&n=c~d",
            ),
            (
                "http://www.xx.yy/path?u=f&x=y&m=z&x=s#size",
                QueryFilter::only(["x", "m"]),
                "http://www.xx.yy/path?u=f#size",
            ),
            (
                "https://example.com/file.txt?a=1;x&b=2",
                none.clone(),
                "https://example.com/file.txt?b=2",
            ),
            // Host and scheme case, a root path kept before a query, escapes re-encoded.
            (
                "HTTPS://Example.COM/A/b?x=%41%2",
                none.clone(),
                "https://example.com/A/b?x=A%252",
            ),
            (
                "https://example.com/?a=1",
                none.clone(),
                "https://example.com/?a=1",
            ),
            (
                "https://example.com?a=1",
                none.clone(),
                "https://example.com/?a=1",
            ),
            ("https://example.com/", none, "https://example.com"),
        ];
        for (url, filter, want) in cases {
            assert_eq!(normalise_url(url, &filter).unwrap(), want, "{url}");
        }
    }

    #[test]
    fn presigned_urls_share_one_key() {
        let filter = QueryFilter::default();
        let signed = |date: &str, signature: &str| {
            format!(
                "https://bucket.s3.amazonaws.com/models/llama/model-00001.safetensors?versionId=v7\
                 &X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20261202%2Fus-east-1%2Fs3%2Faws4_request\
                 &X-Amz-Date={date}&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Signature={signature}"
            )
        };
        let a = normalise_url(&signed("20261202T000000Z", "abc"), &filter).unwrap();
        let b = normalise_url(&signed("20261203T120000Z", "def"), &filter).unwrap();
        assert_eq!(
            a,
            "https://bucket.s3.amazonaws.com/models/llama/model-00001.safetensors?versionId=v7"
        );
        assert_eq!(a, b);
        let v2 =
            "https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKIA&Expires=1700000000&Signature=x%2By";
        assert_eq!(
            normalise_url(v2, &filter).unwrap(),
            "https://b.s3.amazonaws.com/k"
        );
        // A configured extra name is dropped too; a content-changing parameter is kept.
        let extra = QueryFilter::with_extra(["token"]);
        assert_eq!(
            normalise_url("https://h/f?token=1&revision=2&Signature=s", &extra).unwrap(),
            "https://h/f?revision=2"
        );
        assert!(!QueryFilter::default().drops("token"));
    }

    #[test]
    fn invalid_urls_are_errors() {
        for (url, reason) in [
            ("example.com/file", "no scheme"),
            ("://example.com", "bad scheme"),
            ("1http://example.com", "bad scheme"),
            ("https:///path", "no host"),
            ("https://h/p\n", "control character"),
        ] {
            assert_eq!(
                normalise_url(url, &QueryFilter::default()),
                Err(KeyError {
                    url: url.into(),
                    reason
                })
            );
        }
    }

    #[test]
    fn task_ids_match_dragonfly() {
        // Vectors from dragonfly-client-util/src/id_generator (no tag, no application).
        assert_eq!(
            request_task_id(
                "https://example.com",
                None,
                1024,
                &QueryFilter::only(["none"])
            )
            .unwrap(),
            "9f7c9aafbc6f30f8f41a96ca77eeae80c5b60964b3034b0ee43ccf7b2f9e52b8"
        );
        assert_eq!(
            request_task_id(
                "https://example.com/file.txt?k=a b&m=x*y&n=c~d",
                None,
                1024,
                &QueryFilter::only(["none"])
            )
            .unwrap(),
            "6196a6846023f6d3c1e4d30f6c86f3d4186e4c664a33e5692b0e04e49b26a9af"
        );
        let base = task_id("https://example.com/f", None, 8 << 20);
        assert_eq!(base.len(), 64);
        assert_ne!(
            base,
            task_id("https://example.com/f", Some("main"), 8 << 20)
        );
        assert_ne!(base, task_id("https://example.com/f", None, 16 << 20));
        assert_ne!(base, task_id("https://example.com/g", None, 8 << 20));
        assert_eq!(base, task_id("https://example.com/f", None, 8 << 20));
    }

    #[test]
    fn form_decode_and_query_escape() {
        for (raw, decoded) in [
            ("a+b", "a b"),
            ("%41%42", "AB"),
            ("%4", "%4"),
            ("%zz", "%zz"),
            ("%E4%B8%AD", "中"),
        ] {
            assert_eq!(form_decode(raw), decoded, "{raw}");
        }
        for (raw, escaped) in [
            ("a b", "a+b"),
            ("x*y", "x%2Ay"),
            ("c~d", "c~d"),
            ("1+1", "1%2B1"),
            ("中", "%E4%B8%AD"),
        ] {
            assert_eq!(query_escape(raw), escaped, "{raw}");
        }
    }
}
