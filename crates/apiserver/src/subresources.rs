//! Subresources: `/status`, `/scale`, `pods/log`, `pods/binding`, `pods/eviction`,
//! `pods/exec` (in [`crate::exec`]) and `namespaces/finalize`.
//!
//! Each translates to an operation on the owning object; none has storage of its own except
//! logs, which node twins write under the server's log directory. What binding, Scale and
//! log requests mean is `tessera_api::subresource`'s; this module reads and writes.

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
use tessera_api::meta;
use tessera_api::request::Query;
use tessera_api::resource::Resource;
use tessera_api::subresource::{self, ScalePaths};
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
            bind(server, resource, namespace, name, &binding, query).await
        }
        "exec" => {
            serves(resource, Subresource::Exec)?;
            crate::exec::exec(
                server,
                resource,
                namespace.unwrap_or("default"),
                name,
                request,
            )
            .await
        }
        "proxy" if matches!(resource.plural(), "nodes" | "pods" | "services") => {
            crate::proxy::proxy(server, resource, namespace, name, request).await
        }
        "eviction" => {
            serves(resource, Subresource::Eviction)?;
            let (content_type, body) = body_of(request).await?;
            let eviction = decode_object(&content_type, &body)?;
            let dry_run = body::write_options(query)?.dry_run;
            crate::eviction::evict(
                &server.objects,
                resource,
                namespace,
                name,
                &eviction,
                dry_run,
            )?;
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

/// Binds the pod `name` as `binding` asks (`pods/<name>/binding`, or the legacy `bindings`
/// resource, which names the pod by the Binding's own name).
pub(crate) async fn bind(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    binding: &Value,
    query: &Query,
) -> ApiResult<Response> {
    let node = subresource::binding_target(name, binding)?;
    let dry_run = body::write_options(query)?.dry_run;
    let now = meta::timestamp(server.objects.now());
    // As upstream's binding storage: the pod written whole, past the pod strategy, with no
    // managed fields recorded and no admission (Pod Security ignores bindings).
    server
        .objects
        .guaranteed_update_pending(resource, namespace, name, dry_run, |stored| {
            subresource::bind(stored, binding, &node, &now)
        })?
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
    let scale = ScalePaths::of(resource);
    let method = request.method().clone();
    match method {
        Method::GET => Ok(json_response(
            StatusCode::OK,
            &scale.view(&server.objects.get(resource, namespace, name)?),
        )),
        Method::PUT | Method::PATCH => {
            let (content_type, body, options) = subresource_write(request, query, "scale").await?;
            let change: PatchBody = if method == Method::PUT {
                PatchBody::Merge(decode_object(&content_type, &body)?)
            } else {
                subresource::scale_patch(&content_type, body)?
            };
            let written = server
                .objects
                .update_with_options_pending(
                    resource,
                    namespace,
                    name,
                    Part::Main,
                    &options,
                    |current| scale.apply(current, name, &change),
                )?
                .committed()
                .await?;
            Ok(json_response(StatusCode::OK, &scale.view(&written.object)))
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
    let container = subresource::log_container(&pod, name, query)?;
    let path = log_path(&server.config.log_dir, namespace, name, &container);
    let timestamps = query.flag("timestamps");
    let tail = query.int("tailLines")?;
    let limit_bytes = query.int("limitBytes")?;
    let content = std::fs::read_to_string(&path).unwrap_or_default();
    let text = subresource::log_text(&content, timestamps, tail, limit_bytes);
    let render = move |line: &str| subresource::render_log_line(line, timestamps);
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
