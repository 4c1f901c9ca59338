//! Parsing request URLs into what they address (discovery, OpenAPI, a resource collection,
//! an object or a subresource), their query options, and the authorization attributes
//! upstream derives from method, path and query.
//!
//! Knows URL grammar only: nothing about storage or which resources are served.

use std::collections::HashMap;

use http::Method;

use crate::error::{ApiError, ApiResult};
use crate::rbac::Attributes;
use crate::resource::Resource;

/// What a request path addresses.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz` and their sub-checks.
    Health,
    /// `/api`.
    CoreGroup,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/<path>`.
    OpenApiDocument(String),
    /// A resource collection, object or subresource.
    Resource(ResourcePath),
    /// `/metrics` (`None`) or `/components/<component>/metrics`: Prometheus metrics.
    Metrics(Option<String>),
}

/// A path under a group-version that names a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace from the path, if any.
    pub namespace: Option<String>,
    /// Resource plural name.
    pub plural: String,
    /// Object name, if the path names one.
    pub name: Option<String>,
    /// Subresource, if any.
    pub subresource: Option<String>,
}

impl ResourcePath {
    /// The served resource type as `find` looks it up by group, version and plural (the
    /// shell's registry), or 404.
    pub fn resource(
        &self,
        find: impl FnOnce(&str, &str, &str) -> Option<Resource>,
    ) -> ApiResult<Resource> {
        find(&self.group, &self.version, &self.plural).ok_or_else(|| {
            ApiError::no_route(&format!(
                "get {}",
                if self.group.is_empty() {
                    self.plural.clone()
                } else {
                    format!("{}.{}", self.plural, self.group)
                }
            ))
        })
    }
}

/// Parses a request path.
pub fn parse_path(path: &str) -> ApiResult<Target> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let decoded: Vec<String> = segments.iter().map(|s| percent_decode(s)).collect();
    let parts: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let not_found = || ApiError::no_route(path);
    Ok(match parts.as_slice() {
        ["version"] => Target::Version,
        ["healthz" | "livez" | "readyz", ..] => Target::Health,
        ["api"] => Target::CoreGroup,
        ["apis"] => Target::Groups,
        ["apis", group] => Target::Group(group.to_string()),
        ["openapi", "v2"] => Target::OpenApiV2,
        ["metrics"] => Target::Metrics(None),
        ["components", component, "metrics"] => Target::Metrics(Some(component.to_string())),
        ["openapi", "v3"] => Target::OpenApiIndex,
        ["openapi", "v3", rest @ ..] => Target::OpenApiDocument(rest.join("/")),
        ["api", version] => Target::GroupVersion(String::new(), version.to_string()),
        ["apis", group, version] => Target::GroupVersion(group.to_string(), version.to_string()),
        ["api", version, rest @ ..] => {
            Target::Resource(resource_path("", version, rest).ok_or_else(not_found)?)
        }
        ["apis", group, version, rest @ ..] => {
            Target::Resource(resource_path(group, version, rest).ok_or_else(not_found)?)
        }
        _ => return Err(not_found()),
    })
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Option<ResourcePath> {
    let path = |namespace: Option<&str>, plural: &str, name: Option<&str>, sub: Option<&str>| {
        ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace: namespace.map(str::to_string),
            plural: plural.to_string(),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        }
    };
    let namespace_subresource = |s: &str| matches!(s, "status" | "finalize");
    Some(match rest {
        // The proxy subresources carry the path to proxy after `proxy`; the handler reads
        // it from the URL.
        [
            "namespaces",
            namespace,
            plural @ ("pods" | "services"),
            name,
            "proxy",
            _,
            ..,
        ] if group.is_empty() => path(Some(namespace), plural, Some(name), Some("proxy")),
        ["nodes", name, "proxy", _, ..] if group.is_empty() => {
            path(None, "nodes", Some(name), Some("proxy"))
        }
        ["namespaces", namespace, sub] if group.is_empty() && namespace_subresource(sub) => {
            path(None, "namespaces", Some(namespace), Some(sub))
        }
        ["namespaces", namespace, plural] => path(Some(namespace), plural, None, None),
        ["namespaces", namespace, plural, name] => path(Some(namespace), plural, Some(name), None),
        ["namespaces", namespace, plural, name, sub] => {
            path(Some(namespace), plural, Some(name), Some(sub))
        }
        [plural] => path(None, plural, None, None),
        [plural, name] => path(None, plural, Some(name), None),
        [plural, name, sub] => path(None, plural, Some(name), Some(sub)),
        _ => return None,
    })
}

/// A path (or segment) with its `%XX` escapes decoded, as Go's `url.URL.Path` reads it.
pub fn percent_decode(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_string();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(byte) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Query parameters of a request.
#[derive(Debug, Clone, Default)]
pub struct Query {
    params: HashMap<String, String>,
}

impl Query {
    /// Parses a query string.
    pub fn parse(query: Option<&str>) -> Query {
        let params = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Query { params }
    }

    /// A parameter's value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params.get(name).map(String::as_str)
    }

    /// Narrows the field selector to one object name (watching `…/pods/<name>?watch=true`).
    pub fn insert_field_selector(&mut self, name: &str) {
        let clause = format!("metadata.name={name}");
        let selector = match self.params.get("fieldSelector") {
            Some(existing) if !existing.is_empty() => format!("{existing},{clause}"),
            _ => clause,
        };
        self.params.insert("fieldSelector".into(), selector);
    }

    /// A boolean parameter (`true`/`1`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some("true" | "1"))
    }

    /// An integer parameter; a malformed value is a bad request naming the parameter.
    pub fn int(&self, name: &str) -> ApiResult<Option<i64>> {
        match self.get(name) {
            None | Some("") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "invalid value for query parameter {name}: {text:?} is not an integer"
                ))
            }),
        }
    }
}

/// The verb of a resource request.
fn resource_verb(method: &Method, named: bool, query: &Query) -> &'static str {
    match *method {
        Method::GET | Method::HEAD if query.flag("watch") => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

/// The authorization attributes of a request.
pub fn attributes(target: &Target, method: &Method, path: &str, query: &Query) -> Attributes {
    match target {
        Target::Resource(resource) => {
            let named = resource.name.is_some();
            // A subresource request on a named object is a get/create/update/patch of it;
            // connecting to a pod's streams (`exec`, `attach`, `portforward`) is `create`
            // whichever method the upgrade uses (WebSocket's GET included, as kube-apiserver
            // authorizes it since AuthorizePodWebsocketUpgradeCreatePermission).
            let streaming = matches!(
                resource.subresource.as_deref(),
                Some("exec" | "attach" | "portforward")
            ) && resource.plural == "pods";
            let verb = if streaming {
                "create"
            } else {
                resource_verb(method, named, query)
            };
            Attributes {
                verb: verb.to_string(),
                resource_request: true,
                group: resource.group.clone(),
                resource: resource.plural.clone(),
                subresource: resource.subresource.clone().unwrap_or_default(),
                namespace: resource.namespace.clone().unwrap_or_default(),
                name: resource.name.clone().unwrap_or_default(),
                path: path.to_string(),
            }
        }
        _ => Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            resource_request: false,
            path: path.to_string(),
            ..Attributes::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        match parse_path(path).unwrap() {
            Target::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn proxy_paths_keep_their_tail_out_of_the_target() {
        for (path, namespace, plural, name) in [
            (
                "/api/v1/nodes/n1/proxy/metrics/resource",
                None,
                "nodes",
                "n1",
            ),
            ("/api/v1/nodes/n1/proxy", None, "nodes", "n1"),
            (
                "/api/v1/namespaces/ns/pods/p:9400/proxy/metrics",
                Some("ns"),
                "pods",
                "p:9400",
            ),
            (
                "/api/v1/namespaces/ns/services/s:http/proxy/a/b",
                Some("ns"),
                "services",
                "s:http",
            ),
        ] {
            let r = resource(path);
            assert_eq!(
                (
                    r.namespace.as_deref(),
                    r.plural.as_str(),
                    r.name.as_deref(),
                    r.subresource.as_deref()
                ),
                (namespace, plural, Some(name), Some("proxy")),
                "{path}"
            );
        }
        assert!(parse_path("/apis/apps/v1/namespaces/ns/deployments/d/proxy/x").is_err());
    }

    #[test]
    fn paths_address_the_right_thing() {
        assert_eq!(parse_path("/version").unwrap(), Target::Version);
        assert_eq!(parse_path("/readyz/ping").unwrap(), Target::Health);
        assert_eq!(parse_path("/api").unwrap(), Target::CoreGroup);
        assert_eq!(
            parse_path("/apis/apps").unwrap(),
            Target::Group("apps".into())
        );
        assert_eq!(
            parse_path("/api/v1").unwrap(),
            Target::GroupVersion("".into(), "v1".into())
        );
        assert_eq!(
            parse_path("/openapi/v3/apis/apps/v1").unwrap(),
            Target::OpenApiDocument("apis/apps/v1".into())
        );

        let pods = resource("/api/v1/namespaces/default/pods");
        assert_eq!(
            (pods.namespace.as_deref(), pods.plural.as_str(), pods.name),
            (Some("default"), "pods", None)
        );
        let log = resource("/api/v1/namespaces/default/pods/p1/log");
        assert_eq!(
            (log.name.as_deref(), log.subresource.as_deref()),
            (Some("p1"), Some("log"))
        );
        let ns = resource("/api/v1/namespaces/team-a");
        assert_eq!(
            (ns.plural.as_str(), ns.name.as_deref(), ns.namespace),
            ("namespaces", Some("team-a"), None)
        );
        let ns_status = resource("/api/v1/namespaces/team-a/status");
        assert_eq!(
            (ns_status.plural.as_str(), ns_status.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let node_status = resource("/api/v1/nodes/n1/status");
        assert_eq!(
            (
                node_status.plural.as_str(),
                node_status.subresource.as_deref()
            ),
            ("nodes", Some("status"))
        );
        let all = resource("/apis/apps/v1/deployments");
        assert_eq!((all.group.as_str(), all.namespace), ("apps", None));
        let role = resource("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode");
        assert_eq!(role.name.as_deref(), Some("system:node"));
        assert!(parse_path("/nope").is_err());
        assert_eq!(parse_path("/metrics").unwrap(), Target::Metrics(None));
        assert_eq!(
            parse_path("/components/kueue/metrics").unwrap(),
            Target::Metrics(Some("kueue".into()))
        );
    }

    #[test]
    fn query_options() {
        let query = Query::parse(Some("limit=500&watch=true&labelSelector=app%3Dweb&bad=x"));
        assert_eq!(query.int("limit").unwrap(), Some(500));
        assert!(query.flag("watch"));
        assert_eq!(query.get("labelSelector"), Some("app=web"));
        assert_eq!(query.int("bad").unwrap_err().code, 400);
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No path or query string makes request parsing panic.
        #[test]
        fn parsing_never_panics(path in "(/[a-z0-9%.:_-]{0,12}){0,8}", query in "[a-zA-Z0-9=&%.,!()_-]{0,40}") {
            let _ = parse_path(&path);
            let parsed = Query::parse(Some(&query));
            let _ = parsed.int("limit");
        }

        /// Resource paths round-trip their names.
        #[test]
        fn object_names_survive_parsing(namespace in "[a-z0-9-]{1,20}", name in "[a-z0-9.-]{1,40}") {
            let target = parse_path(&format!("/api/v1/namespaces/{namespace}/configmaps/{name}")).unwrap();
            let Target::Resource(path) = target else { panic!("not a resource") };
            prop_assert_eq!(path.namespace.as_deref(), Some(namespace.as_str()));
            prop_assert_eq!(path.name.as_deref(), Some(name.as_str()));
        }
    }
}
