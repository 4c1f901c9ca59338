//! Subresources: `/status`, `/scale`, `pods/log`, `pods/binding`, `pods/eviction` and
//! `namespaces/finalize`.
//!
//! Each translates to an operation on the owning object; none has storage of its own except
//! logs, which node twins write under the server's log directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{Method, StatusCode, header};
use serde_json::{Value, json};

use tessera_model::Subresource;

use crate::server::{self, ApiServer, json_response};
use tessera_api::body::{self, decode_object};
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::meta::meta_str;
use tessera_api::request::Query;
use tessera_api::resource::Resource;
use tessera_api::write::{Part, PatchBody, WriteOptions};

fn serves(resource: Resource, sub: Subresource) -> ApiResult<()> {
    if resource.info.has(sub) {
        Ok(())
    } else {
        Err(ApiError::no_route(&format!(
            "{}/{}",
            resource.plural(),
            sub.name()
        )))
    }
}

async fn body_of(request: Request) -> ApiResult<(String, Bytes)> {
    let (headers, body) = server::read_body(request).await?;
    Ok((body::content_type(&headers), body))
}

/// The options of a client's write through a subresource: dry run, field validation, and
/// the field manager its `managedFields` entry is recorded for.
async fn subresource_write(
    request: Request,
    query: &Query,
    subresource: &'static str,
) -> ApiResult<(String, Bytes, WriteOptions)> {
    let mut options = body::write_options(query)?;
    let (headers, body) = server::read_body(request).await?;
    options.field_manager = body::field_manager(query, &headers);
    options.subresource = Some(subresource);
    Ok((body::content_type(&headers), body, options))
}

/// Routes a subresource request.
pub async fn handle(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    subresource: &str,
    request: Request,
    query: &Query,
) -> ApiResult<Response> {
    let method = request.method().clone();
    match subresource {
        "status" => {
            serves(resource, Subresource::Status)?;
            match method {
                Method::GET => Ok(json_response(
                    StatusCode::OK,
                    &server.objects.get(resource, namespace, name)?,
                )),
                Method::PUT => {
                    let (content_type, body, options) =
                        subresource_write(request, query, "status").await?;
                    let object = decode_object(&content_type, &body)?;
                    let written = server
                        .objects
                        .update_pending(resource, namespace, name, object, Part::Status, &options)?
                        .committed()
                        .await?;
                    Ok(json_response(StatusCode::OK, &written.object))
                }
                Method::PATCH => {
                    server::patch(
                        server,
                        resource,
                        namespace,
                        name,
                        Part::Status,
                        request,
                        query,
                        None,
                    )
                    .await
                }
                other => Err(ApiError::method_not_allowed(other.as_str())),
            }
        }
        "scale" => {
            serves(resource, Subresource::Scale)?;
            scale(server, resource, namespace, name, request, query).await
        }
        "log" => {
            serves(resource, Subresource::Log)?;
            log(
                server,
                resource,
                namespace.unwrap_or("default"),
                name,
                query,
            )
        }
        "binding" => {
            serves(resource, Subresource::Binding)?;
            let (content_type, body) = body_of(request).await?;
            let binding = decode_object(&content_type, &body)?;
            bind(server, resource, namespace, name, &binding).await
        }
        "eviction" => {
            serves(resource, Subresource::Eviction)?;
            let (content_type, body) = body_of(request).await?;
            let eviction = decode_object(&content_type, &body)?;
            crate::eviction::evict(&server.objects, resource, namespace, name, &eviction)?;
            Ok(success(StatusCode::CREATED))
        }
        "finalize" if resource.kind() == "Namespace" && method == Method::PUT => {
            let (content_type, body) = body_of(request).await?;
            let requested = decode_object(&content_type, &body)?;
            let finalizers = requested
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(json!([]));
            let written =
                server
                    .objects
                    .update_with(resource, None, name, Part::Main, |current| {
                        let mut next = current.clone();
                        next["spec"]["finalizers"] = finalizers;
                        Ok(next)
                    })?;
            Ok(json_response(StatusCode::OK, &written.object))
        }
        other => Err(ApiError::no_route(&format!(
            "{}/{other}",
            resource.plural()
        ))),
    }
}

fn success(status: StatusCode) -> Response {
    json_response(
        status,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": status.as_u16()}),
    )
}

async fn bind(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    binding: &Value,
) -> ApiResult<Response> {
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "",
                "Binding",
                name,
                vec![tessera_api::error::Cause::required("target.name")],
            )
        })?
        .to_string();
    server
        .objects
        .update_with_options_pending(
            resource,
            namespace,
            name,
            Part::Main,
            &Default::default(),
            |current| {
                if meta_str(current, "deletionTimestamp").is_some() {
                    return Err(ApiError::conflict(
                        "",
                        "pods",
                        name,
                        "pod is being deleted, cannot be assigned to a host",
                    ));
                }
                if let Some(existing) = current.pointer("/spec/nodeName").and_then(Value::as_str)
                    && !existing.is_empty()
                {
                    return Err(ApiError::conflict(
                        "",
                        "pods",
                        name,
                        &format!("pod {name} is already assigned to node \"{existing}\""),
                    ));
                }
                let mut next = current.clone();
                next["spec"]["nodeName"] = json!(node);
                Ok(next)
            },
        )?
        .committed()
        .await?;
    Ok(success(StatusCode::CREATED))
}

async fn scale(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    request: Request,
    query: &Query,
) -> ApiResult<Response> {
    // Where replicas live: fixed for built-in kinds, declared by the CRD for custom ones.
    let paths = resource.info.custom.as_ref().and_then(|c| c.scale.clone());
    let pointer = |path: Option<&str>, fallback: &str| -> String {
        path.and_then(tessera_api::jsonpath::to_pointer)
            .unwrap_or_else(|| fallback.to_string())
    };
    let spec_pointer = pointer(
        paths.as_ref().map(|p| p.spec_replicas.as_str()),
        "/spec/replicas",
    );
    let status_pointer = pointer(
        paths.as_ref().map(|p| p.status_replicas.as_str()),
        "/status/replicas",
    );
    let selector_path = paths.as_ref().and_then(|p| p.label_selector.clone());
    let view = |object: &Value| -> Value {
        let selector = match &selector_path {
            Some(path) => tessera_api::jsonpath::select(object, path)
                .first()
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string(),
            None => object
                .pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default(),
        };
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": meta_str(object, "name"),
                "namespace": meta_str(object, "namespace"),
                "uid": meta_str(object, "uid"),
                "resourceVersion": meta_str(object, "resourceVersion"),
                "creationTimestamp": meta_str(object, "creationTimestamp"),
            },
            "spec": {"replicas": object.pointer(&spec_pointer).cloned().unwrap_or(json!(0))},
            "status": {
                "replicas": object.pointer(&status_pointer).cloned().unwrap_or(json!(0)),
                "selector": selector,
            },
        })
    };
    let method = request.method().clone();
    match method {
        Method::GET => Ok(json_response(
            StatusCode::OK,
            &view(&server.objects.get(resource, namespace, name)?),
        )),
        Method::PUT | Method::PATCH => {
            let (content_type, body, options) = subresource_write(request, query, "scale").await?;
            let change: PatchBody = if method == Method::PUT {
                PatchBody::Merge(decode_object(&content_type, &body)?)
            } else {
                match content_type.as_str() {
                    "application/json-patch+json" => PatchBody::Json(body),
                    "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                        PatchBody::Merge(
                            serde_json::from_slice(&body)
                                .map_err(|e| ApiError::bad_request(e.to_string()))?,
                        )
                    }
                    other => return Err(ApiError::unsupported_media_type(other)),
                }
            };
            let written = server
                .objects
                .update_with_options_pending(
                    resource,
                    namespace,
                    name,
                    Part::Main,
                    &options,
                    |current| {
                        let scale = view(current);
                        let patched = match &change {
                            PatchBody::Json(bytes) => tessera_api::patch::json_patch(&scale, bytes),
                            PatchBody::Merge(patch)
                            | PatchBody::Strategic(patch)
                            | PatchBody::Apply { config: patch, .. } => {
                                tessera_api::patch::merge_patch(&scale, patch)
                            }
                        }
                        .map_err(|e| ApiError::bad_request(e.to_string()))?;
                        let replicas = patched
                            .pointer("/spec/replicas")
                            .and_then(Value::as_i64)
                            .filter(|r| *r >= 0)
                            .ok_or_else(|| {
                                ApiError::invalid(
                                    "autoscaling",
                                    "Scale",
                                    name,
                                    vec![tessera_api::error::Cause::invalid(
                                        "spec.replicas",
                                        patched.pointer("/spec/replicas").unwrap_or(&Value::Null),
                                        "must be greater than or equal to 0",
                                    )],
                                )
                            })?;
                        let mut next = current.clone();
                        set_at(&mut next, &spec_pointer, json!(replicas));
                        Ok(next)
                    },
                )?
                .committed()
                .await?;
            Ok(json_response(StatusCode::OK, &view(&written.object)))
        }
        other => Err(ApiError::method_not_allowed(other.as_str())),
    }
}

/// Where a container's log lives.
pub fn log_path(root: &std::path::Path, namespace: &str, pod: &str, container: &str) -> PathBuf {
    root.join(namespace)
        .join(pod)
        .join(format!("{container}.log"))
}

fn log(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: &str,
    name: &str,
    query: &Query,
) -> ApiResult<Response> {
    let pod = server.objects.get(resource, Some(namespace), name)?;
    let containers: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|c| c.get("name")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let container = match query.get("container").filter(|c| !c.is_empty()) {
        Some(container) => {
            let init: Vec<String> = pod
                .pointer("/spec/initContainers")
                .and_then(Value::as_array)
                .map(|c| {
                    c.iter()
                        .filter_map(|c| c.get("name")?.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if !containers.iter().chain(init.iter()).any(|c| c == container) {
                return Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )));
            }
            container.to_string()
        }
        None if containers.len() == 1 => containers[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let path = log_path(&server.config.log_dir, namespace, name, &container);
    let timestamps = query.flag("timestamps");
    let tail = query.int("tailLines")?;
    let limit_bytes = query.int("limitBytes")?;
    let content = std::fs::read_to_string(&path).unwrap_or_default();
    let mut lines: Vec<&str> = content.lines().collect();
    if let Some(tail) = tail
        && tail >= 0
    {
        let skip = lines.len().saturating_sub(tail as usize);
        lines.drain(..skip);
    }
    let render = move |line: &str| -> String {
        if timestamps {
            format!("{line}\n")
        } else {
            let text = line.split_once(' ').map_or(line, |(_, rest)| rest);
            format!("{text}\n")
        }
    };
    let mut text: String = lines.iter().map(|l| render(l)).collect();
    if let Some(limit) = limit_bytes
        && limit >= 0
        && text.len() > limit as usize
    {
        let mut cut = limit as usize;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    if !query.flag("follow") {
        return Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], text).into_response());
    }
    // Follow: send what is there, then new lines until the pod stops or goes away.
    let offset = content.len();
    let server = server.clone();
    let namespace = namespace.to_string();
    let name = name.to_string();
    let first = Bytes::from(text);
    let stream = futures::stream::unfold(
        (Some(first), offset, false),
        move |(first, offset, done)| {
            let server = server.clone();
            let path = path.clone();
            let namespace = namespace.clone();
            let name = name.clone();
            async move {
                if let Some(first) = first {
                    return Some((Ok::<Bytes, std::io::Error>(first), (None, offset, false)));
                }
                if done {
                    return None;
                }
                loop {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let content = tokio::fs::read_to_string(&path).await.unwrap_or_default();
                    let running = server
                        .objects
                        .get(resource, Some(&namespace), &name)
                        .ok()
                        .is_some_and(|p| {
                            !matches!(
                                p.pointer("/status/phase").and_then(Value::as_str),
                                Some("Succeeded" | "Failed")
                            )
                        });
                    if content.len() > offset {
                        let fresh: String = content
                            .get(offset..)
                            .unwrap_or_default()
                            .lines()
                            .map(render)
                            .collect();
                        return Some((Ok(Bytes::from(fresh)), (None, content.len(), !running)));
                    }
                    if !running {
                        return None;
                    }
                }
            }
        },
    );
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Sets a value at a JSON Pointer, creating the objects on the way.
fn set_at(object: &mut Value, pointer: &str, value: Value) {
    let mut current = object;
    let parts: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|p| p.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (index, part) in parts.iter().enumerate() {
        if !current.is_object() {
            *current = json!({});
        }
        let Some(map) = current.as_object_mut() else {
            return;
        };
        if index == parts.len() - 1 {
            map.insert(part.clone(), value);
            return;
        }
        current = map.entry(part.clone()).or_insert_with(|| json!({}));
    }
}
