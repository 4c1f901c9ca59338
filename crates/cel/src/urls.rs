//! Kubernetes' URL library: `url(s)` and `isURL(s)`, with Go's `url.ParseRequestURI` rules
//! (an absolute URI with a scheme, or an absolute path; no fragment), and on a URL
//! `getScheme()`, `getHost()` (with the port, IPv6 in brackets), `getHostname()` (without
//! either), `getPort()`, `getEscapedPath()` and `getQuery()` (`map(string, list(string))`).

use std::collections::HashMap;
use std::sync::Arc;

use cel::ExecutionError;
use cel::extractors::This;
use cel::objects::{Key, Map, Opaque, Value};

use crate::Library;

/// A parsed URL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Url {
    scheme: String,
    /// `host[:port]`, IPv6 hosts in brackets.
    host: String,
    path: String,
    query: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// Whether every `%` starts a two-digit hex escape.
fn valid_escapes(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !hex(i + 1) || !hex(i + 2) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

fn valid_port(port: &str) -> bool {
    port.bytes().all(|b| b.is_ascii_digit())
}

/// Splits `host[:port]` (IPv6 in brackets) into (hostname, port), or `None` if malformed.
fn split_host(host: &str) -> Option<(&str, &str)> {
    if let Some(rest) = host.strip_prefix('[') {
        let (name, after) = rest.split_once(']')?;
        let port = match after {
            "" => "",
            _ => after.strip_prefix(':')?,
        };
        return valid_port(port).then_some((name, port));
    }
    match host.rsplit_once(':') {
        Some((name, port)) if valid_port(port) => Some((name, port)),
        Some(_) => None,
        None => Some((host, "")),
    }
}

fn parse(text: &str) -> Result<Url, String> {
    if text.is_empty() {
        return Err("empty url".into());
    }
    if text.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("invalid control character in URL".into());
    }
    let mut url = Url::default();
    let mut rest = text;
    if !rest.starts_with('/') {
        let colon = rest.find(':').ok_or("invalid URI for request")?;
        let scheme = &rest[..colon];
        let mut chars = scheme.chars();
        let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid {
            return Err("missing protocol scheme".into());
        }
        url.scheme = scheme.to_ascii_lowercase();
        rest = &rest[colon + 1..];
    }
    if let Some((before, query)) = rest.split_once('?') {
        url.query = query.to_string();
        rest = before;
    }
    if let Some(after) = rest.strip_prefix("//").filter(|_| !url.scheme.is_empty()) {
        let end = after.find('/').unwrap_or(after.len());
        let authority = &after[..end];
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if split_host(host).is_none() {
            return Err(format!("invalid host {host:?}"));
        }
        url.host = host.to_string();
        rest = &after[end..];
    } else if !rest.starts_with('/') && url.scheme.is_empty() {
        return Err("invalid URI for request".into());
    }
    if !valid_escapes(rest) {
        return Err("invalid URL escape".into());
    }
    url.path = rest.to_string();
    Ok(url)
}

/// The path with what Go's `EscapedPath` escapes escaped.
fn escaped_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@/%".contains(c) {
            out.push(c);
        } else {
            let mut buffer = [0u8; 4];
            for b in c.encode_utf8(&mut buffer).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

fn query_map(query: &str) -> Value {
    let mut map: HashMap<Key, Vec<Value>> = HashMap::new();
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty() && !p.contains(';'));
    for pair in pairs {
        for (key, value) in form_urlencoded::parse(pair.as_bytes()) {
            map.entry(Key::String(Arc::new(key.into_owned())))
                .or_default()
                .push(Value::String(Arc::new(value.into_owned())));
        }
    }
    Value::Map(Map {
        map: Arc::new(
            map.into_iter()
                .map(|(k, v)| (k, Value::List(Arc::new(v))))
                .collect(),
        ),
    })
}

type Opq = Arc<dyn Opaque>;

fn with_url<T>(function: &str, this: &Opq, read: impl Fn(&Url) -> T) -> Result<T, ExecutionError> {
    this.downcast_ref::<Url>()
        .map(read)
        .ok_or_else(|| ExecutionError::function_error(function, "expects a URL"))
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

pub(crate) fn register(library: &mut Library) {
    library.add("url", |s: Arc<String>| {
        parse(&s).map(crate::opaque).map_err(|e| {
            ExecutionError::function_error(
                "url",
                format!("URL parse error during conversion from string: {e}"),
            )
        })
    });
    library.add("isURL", |s: Arc<String>| parse(&s).is_ok());
    library.add("getScheme", |This(this): This<Opq>| {
        with_url("getScheme", &this, |u| text(&u.scheme))
    });
    library.add("getHost", |This(this): This<Opq>| {
        with_url("getHost", &this, |u| text(&u.host))
    });
    library.add("getHostname", |This(this): This<Opq>| {
        with_url("getHostname", &this, |u| {
            text(split_host(&u.host).map_or("", |(name, _)| name))
        })
    });
    library.add("getPort", |This(this): This<Opq>| {
        with_url("getPort", &this, |u| {
            text(split_host(&u.host).map_or("", |(_, port)| port))
        })
    });
    library.add("getEscapedPath", |This(this): This<Opq>| {
        with_url("getEscapedPath", &this, |u| text(&escaped_path(&u.path)))
    });
    library.add("getQuery", |This(this): This<Opq>| {
        with_url("getQuery", &this, |u| query_map(&u.query))
    });
}
