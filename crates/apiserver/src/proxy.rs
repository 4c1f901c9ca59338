//! The proxy subresources (`GET`): `nodes/<name>/proxy/<path>` (the node's kubelet),
//! `pods/<name>[:<port>]/proxy/<path>` and `services/<name>[:<port>]/proxy/<path>` (a ready
//! endpoint of the Service, found through its EndpointSlices), as kube-apiserver resolves
//! them (`[scheme:]name[:port]`), answered by a registered [`ProxyBackend`] (the node
//! twins). Unknown objects are `NotFound`; a Service without a ready endpoint on that port
//! and a backend that cannot be reached are `ServiceUnavailable`, with upstream's messages.
//!
//! Knows nothing of what a backend serves; authorization (`nodes/proxy`, `pods/proxy`,
//! `services/proxy`, verb `get`) happened before the handler runs.

use std::sync::Arc;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use http::{Method, StatusCode, header};
use serde_json::Value;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::resource::Resource;
use tessera_model::json::text;

use crate::server::ApiServer;

/// What is proxied to.
#[derive(Debug, Clone)]
pub enum ProxyTarget {
    /// A node's kubelet.
    Node(Value),
    /// A port of a pod.
    Pod {
        /// The pod.
        pod: Value,
        /// The port.
        port: u16,
    },
}

/// A backend's answer.
#[derive(Debug, Clone)]
pub struct ProxyResponse {
    /// HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: String,
    /// Its body.
    pub body: Vec<u8>,
}

/// Answers proxied requests (the node twins' kubelets and simulated containers).
pub trait ProxyBackend: Send + Sync {
    /// `GET path` (with its leading `/`, query string apart) of `target`; an error says
    /// why it could not be reached.
    fn get(
        &self,
        target: ProxyTarget,
        path: String,
        query: Option<String>,
    ) -> BoxFuture<'static, Result<ProxyResponse, String>>;
}

/// 503 with `message`, as kube-apiserver answers an unreachable backend.
pub fn unavailable(message: impl Into<String>) -> ApiError {
    ApiError {
        code: 503,
        reason: "ServiceUnavailable",
        message: message.into(),
        details: None,
        audit_annotations: Vec::new(),
    }
}

/// `[scheme:]name[:port]` → (name, port).
pub fn split_name_port(id: &str) -> (&str, Option<&str>) {
    let parts: Vec<&str> = id.split(':').collect();
    let (name, port) = match parts.as_slice() {
        [name, port] => (*name, *port),
        [_, name, port, ..] => (*name, *port),
        _ => (id, ""),
    };
    (name, Some(port).filter(|p| !p.is_empty()))
}

/// The path after `…/proxy` in a request path (`/` when none), decoded (clients such as the
/// Python one send `metrics%2Fresource`; kube-apiserver passes on the decoded path).
pub fn proxied_path(path: &str) -> String {
    match path.find("/proxy/") {
        Some(at) => tessera_api::request::percent_decode(&path[at + "/proxy".len()..]),
        None => "/".to_string(),
    }
}

fn find(plural: &str, group: &str, version: &str) -> ApiResult<Resource> {
    Resource::find(group, version, plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))
}

/// A pod's port by number or by the name of one of its containers' ports.
fn pod_port(pod: &Value, port: Option<&str>) -> Option<u16> {
    let Some(port) = port else {
        return Some(80);
    };
    if let Ok(number) = port.parse::<u16>() {
        return Some(number);
    }
    pod.pointer("/spec/containers")?
        .as_array()?
        .iter()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .find(|p| p.get("name").and_then(Value::as_str) == Some(port))
        .and_then(|p| p.get("containerPort")?.as_u64())
        .and_then(|p| u16::try_from(p).ok())
}

/// The pod and port a Service's `port` (name or number; none: its only or first port)
/// reaches through its EndpointSlices' ready endpoints.
fn service_endpoint(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    port: Option<&str>,
) -> ApiResult<(Value, u16)> {
    let service = server
        .objects
        .get(find("services", "", "v1")?, Some(namespace), name)?;
    let no_endpoints = || unavailable(format!("no endpoints available for service \"{name}\""));
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let wanted = ports
        .iter()
        .find(|p| match port {
            None => true,
            Some(port) => {
                p.get("name").and_then(Value::as_str) == Some(port)
                    || p.get("port")
                        .and_then(Value::as_u64)
                        .map(|n| n.to_string())
                        .as_deref()
                        == Some(port)
            }
        })
        .ok_or_else(no_endpoints)?;
    let port_name = text(wanted, "/name");
    let slices = find("endpointslices", "discovery.k8s.io", "v1")?;
    let pods = find("pods", "", "v1")?;
    for entry in server.objects.list(slices, Some(namespace)).entries.iter() {
        let Ok(slice) = crate::objects::decode(entry) else {
            continue;
        };
        if text(&slice, "/metadata/labels/kubernetes.io~1service-name") != name {
            continue;
        }
        let Some(slice_port) = slice
            .get("ports")
            .and_then(Value::as_array)
            .and_then(|ports| ports.iter().find(|p| text(p, "/name") == port_name))
            .and_then(|p| p.get("port")?.as_u64())
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        let endpoints = slice.get("endpoints").and_then(Value::as_array);
        for endpoint in endpoints.into_iter().flatten() {
            let ready = endpoint
                .pointer("/conditions/ready")
                .and_then(Value::as_bool)
                != Some(false);
            if !ready || text(endpoint, "/targetRef/kind") != "Pod" {
                continue;
            }
            let pod_name = text(endpoint, "/targetRef/name");
            if let Ok(pod) = server.objects.get(pods, Some(namespace), pod_name) {
                return Ok((pod, slice_port));
            }
        }
    }
    Err(no_endpoints())
}

/// Serves `GET …/<resource>/<name>/proxy/<path>`.
pub async fn proxy(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    id: &str,
    request: Request,
) -> ApiResult<Response> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Err(ApiError::method_not_allowed(request.method().as_str()));
    }
    let (name, port) = split_name_port(id);
    let target = match resource.plural() {
        "nodes" => ProxyTarget::Node(server.objects.get(resource, None, name)?),
        "pods" => {
            let pod = server.objects.get(resource, namespace, name)?;
            let port = pod_port(&pod, port).ok_or_else(|| {
                unavailable(format!(
                    "error trying to reach service: unknown port {:?} of pod \"{name}\"",
                    port.unwrap_or_default()
                ))
            })?;
            ProxyTarget::Pod { pod, port }
        }
        "services" => {
            let (pod, port) = service_endpoint(server, namespace.unwrap_or("default"), name, port)?;
            ProxyTarget::Pod { pod, port }
        }
        other => return Err(ApiError::no_route(&format!("{other}/proxy"))),
    };
    let backend = server
        .proxy_backend()
        .ok_or_else(|| unavailable("error dialing backend: no node twin serves proxy requests"))?;
    let path = proxied_path(request.uri().path());
    let query = request.uri().query().map(str::to_string);
    let answer = backend
        .get(target, path, query)
        .await
        .map_err(|message| unavailable(format!("error trying to reach service: {message}")))?;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    Ok((
        status,
        [(header::CONTENT_TYPE, answer.content_type)],
        answer.body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ports() {
        for (id, want) in [
            ("web", ("web", None)),
            ("web:9400", ("web", Some("9400"))),
            ("web:metrics", ("web", Some("metrics"))),
            ("https:web:443", ("web", Some("443"))),
            ("web:", ("web", None)),
        ] {
            assert_eq!(split_name_port(id), want, "{id}");
        }
    }

    #[test]
    fn proxied_paths() {
        for (path, want) in [
            (
                "/api/v1/nodes/n1/proxy/metrics/resource",
                "/metrics/resource",
            ),
            (
                "/api/v1/namespaces/ns/pods/p:9400/proxy/metrics",
                "/metrics",
            ),
            ("/api/v1/nodes/n1/proxy", "/"),
            (
                "/api/v1/nodes/n1/proxy/metrics%2Fresource",
                "/metrics/resource",
            ),
            ("/api/v1/namespaces/ns/services/s/proxy/", "/"),
        ] {
            assert_eq!(proxied_path(path), want, "{path}");
        }
    }
}
