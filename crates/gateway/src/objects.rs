//! Reading the Gateway API objects out of their stored JSON into the few shapes the decisions
//! use, with the API's defaults applied (parentRef group/kind/namespace, backendRef weight,
//! a rule without matches matching `PathPrefix /`, header match type `Exact`). The CRD's
//! schema has already refused malformed objects; what is still wrong here (a bad regular
//! expression) is reported by field path, never panicked on.
//!
//! Knows nothing of statuses or requests.

use regex::Regex;
use serde_json::Value;
use tessera_model::json::text;

use crate::GROUP;

/// An object's (namespace, name).
pub type Key = (String, String);

/// The (namespace, name) of a stored object.
pub fn key(object: &Value) -> Key {
    (
        text(object, "/metadata/namespace").to_string(),
        text(object, "/metadata/name").to_string(),
    )
}

/// `metadata.generation` (0 when absent).
pub fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// A route kind this controller serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteKind {
    /// `HTTPRoute`.
    Http,
    /// `GRPCRoute`.
    Grpc,
}

impl RouteKind {
    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::Http => "HTTPRoute",
            RouteKind::Grpc => "GRPCRoute",
        }
    }

    /// The kind of that name (in the Gateway API group).
    pub fn parse(group: &str, kind: &str) -> Option<RouteKind> {
        if group != GROUP {
            return None;
        }
        match kind {
            "HTTPRoute" => Some(RouteKind::Http),
            "GRPCRoute" => Some(RouteKind::Grpc),
            _ => None,
        }
    }
}

/// How a string is matched.
#[derive(Debug, Clone)]
pub enum StringMatch {
    /// Equal (header names are compared case-insensitively elsewhere; values exactly).
    Exact(String),
    /// A regular expression the whole value must match.
    Regex(Regex),
    /// A regular expression that did not compile: matches nothing.
    Invalid,
}

impl StringMatch {
    /// Whether `value` matches.
    pub fn matches(&self, value: &str) -> bool {
        match self {
            StringMatch::Exact(expected) => expected == value,
            StringMatch::Regex(regex) => regex.is_match(value),
            StringMatch::Invalid => false,
        }
    }
}

/// How a path is matched.
#[derive(Debug, Clone)]
pub enum PathMatch {
    /// `Exact`.
    Exact(String),
    /// `PathPrefix`, element-wise (`/foo` matches `/foo`, `/foo/` and `/foo/bar`, not `/foobar`).
    Prefix(String),
    /// `RegularExpression`.
    Regex(StringMatch),
}

impl PathMatch {
    /// Whether `path` (without its query) matches.
    pub fn matches(&self, path: &str) -> bool {
        match self {
            PathMatch::Exact(expected) => expected == path,
            PathMatch::Prefix(prefix) => {
                let prefix = prefix.trim_end_matches('/');
                if prefix.is_empty() {
                    return true;
                }
                path == prefix
                    || path
                        .strip_prefix(prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            }
            PathMatch::Regex(regex) => regex.matches(path),
        }
    }
}

/// One HTTPRoute match.
#[derive(Debug, Clone)]
pub struct HttpMatch {
    /// The path.
    pub path: PathMatch,
    /// The method, if any.
    pub method: Option<String>,
    /// Header name (lower case) and value matches.
    pub headers: Vec<(String, StringMatch)>,
    /// Query parameter name and value matches.
    pub query: Vec<(String, StringMatch)>,
}

/// One GRPCRoute match.
#[derive(Debug, Clone)]
pub struct GrpcMatch {
    /// The service (`pkg.Service`), exact or by expression; `None` matches any.
    pub service: Option<StringMatch>,
    /// The length of an exact service (for precedence).
    pub service_len: usize,
    /// The method name; `None` matches any.
    pub method: Option<StringMatch>,
    /// The length of an exact method.
    pub method_len: usize,
    /// Header matches.
    pub headers: Vec<(String, StringMatch)>,
}

/// A filter the core carries out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// `RequestHeaderModifier`: set, add, remove (names as written).
    RequestHeaderModifier {
        /// Headers to set (replace).
        set: Vec<(String, String)>,
        /// Headers to add.
        add: Vec<(String, String)>,
        /// Header names to remove.
        remove: Vec<String>,
    },
    /// `RequestRedirect`.
    RequestRedirect {
        /// `scheme`.
        scheme: Option<String>,
        /// `hostname`.
        hostname: Option<String>,
        /// `port`.
        port: Option<u16>,
        /// `path.replaceFullPath` (prefix replacement is not modelled).
        path: Option<String>,
        /// `statusCode` (302 by default).
        status: u16,
    },
    /// A filter this core does not carry out (ignored when routing).
    Other(String),
}

/// A backend reference with its defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendRef {
    /// `group` ("" for core).
    pub group: String,
    /// `kind` (`Service` by default).
    pub kind: String,
    /// `namespace` (the route's by default).
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `port`.
    pub port: Option<u16>,
    /// `weight` (1 by default).
    pub weight: u32,
    /// The reference's own filters.
    pub filters: Vec<Filter>,
}

/// One rule of a route.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The HTTP matches (HTTPRoute).
    pub http: Vec<HttpMatch>,
    /// The gRPC matches (GRPCRoute).
    pub grpc: Vec<GrpcMatch>,
    /// The rule's filters.
    pub filters: Vec<Filter>,
    /// The rule's backends.
    pub backends: Vec<BackendRef>,
}

/// A parent reference with its defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRef {
    /// The reference as written (it is echoed in the status).
    pub raw: Value,
    /// `group`.
    pub group: String,
    /// `kind`.
    pub kind: String,
    /// `namespace` (the route's by default).
    pub namespace: String,
    /// `name`.
    pub name: String,
    /// `sectionName`.
    pub section: Option<String>,
    /// `port`.
    pub port: Option<u16>,
}

/// A route read.
#[derive(Debug, Clone)]
pub struct Route {
    /// HTTPRoute or GRPCRoute.
    pub kind: RouteKind,
    /// Namespace and name.
    pub key: Key,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.creationTimestamp` (RFC 3339, so it sorts as text).
    pub created: String,
    /// `spec.hostnames`, lower case.
    pub hostnames: Vec<String>,
    /// `spec.parentRefs`.
    pub parents: Vec<ParentRef>,
    /// `spec.rules`.
    pub rules: Vec<Rule>,
    /// What could not be read, by field path (bad regular expressions).
    pub problems: Vec<String>,
}

fn strings(value: &Value, pointer: &str) -> Vec<String> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

fn items<'a>(value: &'a Value, pointer: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

fn port(value: &Value, pointer: &str) -> Option<u16> {
    value
        .pointer(pointer)
        .and_then(Value::as_u64)
        .and_then(|p| u16::try_from(p).ok())
}

fn string_match(kind: &str, value: &str, field: &str, problems: &mut Vec<String>) -> StringMatch {
    if kind == "RegularExpression" {
        match Regex::new(&format!("^(?:{value})$")) {
            Ok(regex) => StringMatch::Regex(regex),
            Err(error) => {
                problems.push(format!(
                    "{field}: Invalid value: {value:?}: invalid regular expression: {}",
                    error.to_string().lines().last().unwrap_or_default().trim()
                ));
                StringMatch::Invalid
            }
        }
    } else {
        StringMatch::Exact(value.to_string())
    }
}

fn header_matches(
    value: &Value,
    pointer: &str,
    field: &str,
    lower: bool,
    problems: &mut Vec<String>,
) -> Vec<(String, StringMatch)> {
    items(value, pointer)
        .map(|(i, h)| {
            let name = text(h, "/name");
            let name = if lower {
                name.to_ascii_lowercase()
            } else {
                name.to_string()
            };
            let matcher = string_match(
                text(h, "/type"),
                text(h, "/value"),
                &format!("{field}[{i}].value"),
                problems,
            );
            (name, matcher)
        })
        .collect()
}

fn pairs(value: &Value, pointer: &str) -> Vec<(String, String)> {
    items(value, pointer)
        .map(|(_, h)| (text(h, "/name").to_string(), text(h, "/value").to_string()))
        .collect()
}

fn filters(value: &Value, pointer: &str) -> Vec<Filter> {
    items(value, pointer)
        .map(|(_, f)| match text(f, "/type") {
            "RequestHeaderModifier" => Filter::RequestHeaderModifier {
                set: pairs(f, "/requestHeaderModifier/set"),
                add: pairs(f, "/requestHeaderModifier/add"),
                remove: strings(f, "/requestHeaderModifier/remove"),
            },
            "RequestRedirect" => {
                let r = &f["requestRedirect"];
                let nonempty = |p: &str| Some(text(r, p).to_string()).filter(|s| !s.is_empty());
                Filter::RequestRedirect {
                    scheme: nonempty("/scheme"),
                    hostname: nonempty("/hostname"),
                    port: port(r, "/port"),
                    path: (text(r, "/path/type") == "ReplaceFullPath")
                        .then(|| text(r, "/path/replaceFullPath").to_string()),
                    status: port(r, "/statusCode").unwrap_or(302),
                }
            }
            other => Filter::Other(other.to_string()),
        })
        .collect()
}

fn backend_refs(value: &Value, namespace: &str) -> Vec<BackendRef> {
    items(value, "/backendRefs")
        .map(|(_, b)| {
            let kind = text(b, "/kind");
            let ns = text(b, "/namespace");
            BackendRef {
                group: text(b, "/group").to_string(),
                kind: if kind.is_empty() { "Service" } else { kind }.to_string(),
                namespace: if ns.is_empty() { namespace } else { ns }.to_string(),
                name: text(b, "/name").to_string(),
                port: port(b, "/port"),
                weight: b
                    .get("weight")
                    .and_then(Value::as_u64)
                    .map_or(1, |w| u32::try_from(w).unwrap_or(u32::MAX)),
                filters: filters(b, "/filters"),
            }
        })
        .collect()
}

/// The parent references of a route, defaulted.
pub fn parent_refs(route: &Value) -> Vec<ParentRef> {
    let namespace = text(route, "/metadata/namespace");
    items(route, "/spec/parentRefs")
        .map(|(_, p)| {
            let group = text(p, "/group");
            let kind = text(p, "/kind");
            let ns = text(p, "/namespace");
            let section = text(p, "/sectionName");
            ParentRef {
                raw: p.clone(),
                group: if p.get("group").is_none() {
                    GROUP
                } else {
                    group
                }
                .to_string(),
                kind: if kind.is_empty() { "Gateway" } else { kind }.to_string(),
                namespace: if ns.is_empty() { namespace } else { ns }.to_string(),
                name: text(p, "/name").to_string(),
                section: (!section.is_empty()).then(|| section.to_string()),
                port: port(p, "/port"),
            }
        })
        .collect()
}

/// Reads a route of `kind`.
pub fn route(kind: RouteKind, object: &Value) -> Route {
    let key = key(object);
    let mut problems = Vec::new();
    let rules = items(object, "/spec/rules")
        .map(|(r, rule)| {
            let field = format!("spec.rules[{r}].matches");
            let mut http = Vec::new();
            let mut grpc = Vec::new();
            for (m, one) in items(rule, "/matches") {
                let field = format!("{field}[{m}]");
                match kind {
                    RouteKind::Http => {
                        let path_type = text(one, "/path/type");
                        let value = one
                            .pointer("/path/value")
                            .and_then(Value::as_str)
                            .unwrap_or("/");
                        let path = match path_type {
                            "Exact" => PathMatch::Exact(value.to_string()),
                            "RegularExpression" => PathMatch::Regex(string_match(
                                path_type,
                                value,
                                &format!("{field}.path.value"),
                                &mut problems,
                            )),
                            _ => PathMatch::Prefix(value.to_string()),
                        };
                        let method =
                            Some(text(one, "/method").to_string()).filter(|m| !m.is_empty());
                        http.push(HttpMatch {
                            path,
                            method,
                            headers: header_matches(
                                one,
                                "/headers",
                                &format!("{field}.headers"),
                                true,
                                &mut problems,
                            ),
                            query: header_matches(
                                one,
                                "/queryParams",
                                &format!("{field}.queryParams"),
                                false,
                                &mut problems,
                            ),
                        });
                    }
                    RouteKind::Grpc => {
                        let method_type = text(one, "/method/type");
                        let mut part = |name: &str| {
                            let value = text(one, &format!("/method/{name}"));
                            (!value.is_empty()).then(|| {
                                let len = if method_type == "RegularExpression" {
                                    0
                                } else {
                                    value.len()
                                };
                                (
                                    string_match(
                                        method_type,
                                        value,
                                        &format!("{field}.method.{name}"),
                                        &mut problems,
                                    ),
                                    len,
                                )
                            })
                        };
                        let service = part("service");
                        let method = part("method");
                        grpc.push(GrpcMatch {
                            service_len: service.as_ref().map_or(0, |s| s.1),
                            service: service.map(|s| s.0),
                            method_len: method.as_ref().map_or(0, |m| m.1),
                            method: method.map(|m| m.0),
                            headers: header_matches(
                                one,
                                "/headers",
                                &format!("{field}.headers"),
                                true,
                                &mut problems,
                            ),
                        });
                    }
                }
            }
            if kind == RouteKind::Http && http.is_empty() {
                http.push(HttpMatch {
                    path: PathMatch::Prefix("/".to_string()),
                    method: None,
                    headers: Vec::new(),
                    query: Vec::new(),
                });
            }
            if kind == RouteKind::Grpc && grpc.is_empty() {
                grpc.push(GrpcMatch {
                    service: None,
                    service_len: 0,
                    method: None,
                    method_len: 0,
                    headers: Vec::new(),
                });
            }
            Rule {
                http,
                grpc,
                filters: filters(rule, "/filters"),
                backends: backend_refs(rule, &key.0),
            }
        })
        .collect();
    Route {
        kind,
        generation: generation(object),
        created: text(object, "/metadata/creationTimestamp").to_string(),
        hostnames: strings(object, "/spec/hostnames")
            .into_iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        parents: parent_refs(object),
        rules,
        problems,
        key,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn path_prefixes_match_whole_segments() {
        let table = [
            ("/", "/anything", true),
            ("/foo", "/foo", true),
            ("/foo", "/foo/", true),
            ("/foo", "/foo/bar", true),
            ("/foo", "/foobar", false),
            ("/foo/", "/foo", true),
            ("/foo/", "/foo/bar", true),
            ("/foo/bar", "/foo", false),
        ];
        for (prefix, path, want) in table {
            assert_eq!(
                PathMatch::Prefix(prefix.into()).matches(path),
                want,
                "{prefix} {path}"
            );
        }
        assert!(PathMatch::Exact("/foo".into()).matches("/foo"));
        assert!(!PathMatch::Exact("/foo".into()).matches("/foo/"));
    }

    #[test]
    fn defaults_fill_in_and_bad_expressions_are_reported() {
        let route_object = json!({
            "metadata": {"namespace": "apps", "name": "r", "generation": 3,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {
                "hostnames": ["Example.COM"],
                "parentRefs": [{"name": "gw"}, {"name": "gw2", "namespace": "infra",
                    "sectionName": "http", "port": 80}],
                "rules": [
                    {"backendRefs": [{"name": "svc", "port": 8080}]},
                    {"matches": [{"headers": [{"type": "RegularExpression", "name": "X-V",
                        "value": "(unclosed"}]}],
                     "backendRefs": [{"name": "other", "namespace": "b", "port": 80,
                        "weight": 0}]}
                ]
            }
        });
        let route = route(RouteKind::Http, &route_object);
        assert_eq!(route.generation, 3);
        assert_eq!(route.hostnames, ["example.com"]);
        assert_eq!(route.parents[0].group, GROUP);
        assert_eq!(route.parents[0].kind, "Gateway");
        assert_eq!(route.parents[0].namespace, "apps");
        assert_eq!(route.parents[1].namespace, "infra");
        assert_eq!(route.parents[1].section.as_deref(), Some("http"));
        assert_eq!(route.parents[1].port, Some(80));
        let first = &route.rules[0];
        assert!(matches!(&first.http[0].path, PathMatch::Prefix(p) if p == "/"));
        assert_eq!(first.backends[0].kind, "Service");
        assert_eq!(first.backends[0].namespace, "apps");
        assert_eq!(first.backends[0].weight, 1);
        assert_eq!(route.rules[1].backends[0].weight, 0);
        assert_eq!(route.rules[1].http[0].headers[0].0, "x-v");
        assert!(matches!(
            route.rules[1].http[0].headers[0].1,
            StringMatch::Invalid
        ));
        assert_eq!(route.problems.len(), 1);
        assert!(
            route.problems[0].starts_with(
                "spec.rules[1].matches[0].headers[0].value: Invalid value: \"(unclosed\""
            ),
            "{}",
            route.problems[0]
        );
    }
}
