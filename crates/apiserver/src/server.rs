//! The HTTP surface: one handler that routes every request by its path (discovery, OpenAPI,
//! health, resources) and speaks the Kubernetes wire conventions — content negotiation
//! (JSON, YAML bodies, Tables), `Warning` headers, `Status` errors and body limits.
//!
//! The router is a plain axum `Router`, so it serves TLS sockets and in-process kube-rs
//! clients alike. Resource semantics are `tessera_api`'s (bodies and options in
//! `tessera_api::body`, write decisions in `tessera_api::write`) applied over the store by
//! [`crate::objects`]; this module only translates.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};

use crate::aggregated::AggregatedApi;
use crate::error::HttpError;
use crate::list::{self, PageCache};
use crate::objects::Objects;
use crate::subresources;
use crate::watch;
use tessera_api::body::{
    content_type, decode_object, delete_options, field_manager, patch_body, wants_table,
    write_options,
};
use tessera_api::discovery::{self, DiscoveryFormat};
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::request::{Query, ResourcePath, Target};
use tessera_api::resource::Resource;
use tessera_api::table::IncludeObject;
use tessera_api::write::{Part, PatchBody, WriteOptions, Written};
use tessera_api::{openapi, openapi_v2};

/// The largest request body accepted (upstream's limit is 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Settings of the API server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where node twins write container logs (`<dir>/<namespace>/<pod>/<container>.log`).
    pub log_dir: PathBuf,
    /// How often a watch that allows bookmarks receives one.
    pub bookmark_interval: Duration,
    /// The key ServiceAccount tokens are signed with.
    pub token_secret: Vec<u8>,
    /// Static bearer tokens (`--token-auth-file`).
    pub static_tokens: tessera_api::authn::StaticTokens,
    /// The `host:port` clients reach the server at, as legacy discovery advertises it
    /// (`serverAddressByClientCIDRs`).
    pub advertise_address: String,
}

/// The API server's shared state.
pub struct ApiServer {
    pub(crate) objects: Objects,
    pub(crate) config: ServerConfig,
    pub(crate) pages: Mutex<PageCache>,
    openapi_v2: Mutex<Option<OpenApiV2>>,
    pub(crate) authenticator: crate::authn::Authenticator,
    pub(crate) rbac: tessera_api::rbac::Rbac,
    aggregated: Mutex<Vec<Arc<dyn AggregatedApi>>>,
    runtime: Mutex<Option<Arc<dyn crate::exec::ContainerRuntime>>>,
    proxy: Mutex<Option<Arc<dyn crate::proxy::ProxyBackend>>>,
    auditor: std::sync::OnceLock<Arc<crate::audit::Auditor>>,
    metrics: std::sync::OnceLock<Arc<tessera_metrics::components::Registries>>,
}

impl ApiServer {
    /// A server over a set of objects.
    pub fn new(objects: Objects, config: ServerConfig) -> Arc<ApiServer> {
        let authenticator = crate::authn::Authenticator {
            signer: crate::authn::TokenSigner::new(&config.token_secret),
            static_tokens: config.static_tokens.clone(),
        };
        let rbac = tessera_api::rbac::Rbac::new(objects.rbac_generation());
        Arc::new(ApiServer {
            objects,
            config,
            pages: Mutex::new(PageCache::default()),
            openapi_v2: Mutex::new(None),
            authenticator,
            rbac,
            aggregated: Mutex::new(Vec::new()),
            runtime: Mutex::new(None),
            proxy: Mutex::new(None),
            auditor: std::sync::OnceLock::new(),
            metrics: std::sync::OnceLock::new(),
        })
    }

    /// Every served kind, built-in and custom.
    pub(crate) fn kinds(&self) -> Vec<&'static tessera_model::KindInfo> {
        self.objects
            .registry()
            .all()
            .into_iter()
            .map(|r| r.info)
            .collect()
    }

    /// Every kind discovery lists: the served ones and those of the aggregated APIs.
    pub(crate) fn discovery_kinds(&self) -> Vec<&'static tessera_model::KindInfo> {
        let mut kinds = self.kinds();
        for api in self.aggregated_apis() {
            kinds.extend(api.kinds());
        }
        kinds
    }

    fn aggregated_apis(&self) -> Vec<Arc<dyn AggregatedApi>> {
        self.aggregated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Serves a group through another component (an `APIService`).
    pub fn register_aggregated(&self, api: Arc<dyn AggregatedApi>) {
        self.aggregated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(api);
    }

    /// Runs `pods/exec` commands through `runtime` (the node twins' containers).
    pub fn register_container_runtime(&self, runtime: Arc<dyn crate::exec::ContainerRuntime>) {
        *self.runtime.lock().unwrap_or_else(|e| e.into_inner()) = Some(runtime);
    }

    /// The registered container runtime, if any.
    pub(crate) fn container_runtime(&self) -> Option<Arc<dyn crate::exec::ContainerRuntime>> {
        self.runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Answers the proxy subresources (`nodes/proxy`, `pods/proxy`, `services/proxy`)
    /// through `backend` (the node twins).
    pub fn register_proxy_backend(&self, backend: Arc<dyn crate::proxy::ProxyBackend>) {
        *self.proxy.lock().unwrap_or_else(|e| e.into_inner()) = Some(backend);
    }

    /// The registered proxy backend, if any.
    pub(crate) fn proxy_backend(&self) -> Option<Arc<dyn crate::proxy::ProxyBackend>> {
        self.proxy.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Audits every request from now on (`--audit-policy-file`, `--audit-log-path`); set
    /// once, before serving.
    pub fn set_auditor(&self, auditor: crate::audit::Auditor) {
        if self.auditor.set(Arc::new(auditor)).is_err() {
            tracing::warn!("an auditor was already installed; keeping the first");
        }
    }

    /// Records requests into, and serves, the shared component registries from now on (set
    /// once, before serving; without them there is no `/metrics`).
    pub fn set_metrics(&self, registries: Arc<tessera_metrics::components::Registries>) {
        if self.metrics.set(registries).is_err() {
            tracing::warn!("metrics registries were already installed; keeping the first");
        }
    }

    /// The shared component registries, if installed.
    pub fn metrics(&self) -> Option<Arc<tessera_metrics::components::Registries>> {
        self.metrics.get().cloned()
    }

    /// The objects the server serves.
    pub fn objects(&self) -> &Objects {
        &self.objects
    }

    /// The axum router serving the whole API.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new().fallback(handle).with_state(self.clone())
    }
}

/// The router's one handler. Its future is a pointer: the request's own future (kilobytes,
/// as it holds every handler's state) is built once on the heap instead of being moved
/// through each layer that wraps it.
async fn handle(State(server): State<Arc<ApiServer>>, request: Request) -> Response {
    Box::pin(serve(server, request)).await
}

async fn serve(server: Arc<ApiServer>, mut request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let started = std::time::Instant::now();
    let parsed = crate::parsed::Parsed::of(request.uri());
    let metrics = server.metrics().map(|registries| {
        let labels =
            crate::metrics::request_labels(&server, &method, &path, &parsed, request.headers());
        registries.apiserver.started(&labels);
        (registries, labels)
    });
    request.extensions_mut().insert(parsed);
    let auditor = server.auditor.get().cloned();
    let response = crate::audit::audited(auditor, request, move |request| async move {
        match route(&server, request).await {
            Ok(response) => response,
            Err(error) => HttpError(error).into_response(),
        }
    })
    .await;
    if let Some((registries, labels)) = metrics {
        registries.apiserver.finished(
            &labels,
            response.status().as_u16(),
            started.elapsed().as_secs_f64(),
        );
    }
    tracing::debug!(%method, %path, status = response.status().as_u16(), elapsed_us = started.elapsed().as_micros() as u64, "request");
    response
}

/// A JSON response with a status code.
pub(crate) fn json_response(status: StatusCode, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = format!(
            "299 - {}",
            serde_json::to_string(warning).unwrap_or_default()
        );
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

fn accept(headers: &HeaderMap) -> String {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string()
}

async fn route(server: &Arc<ApiServer>, request: Request) -> ApiResult<Response> {
    let parsed = crate::parsed::Parsed::from_request(request.extensions(), request.uri());
    let target = parsed.target?;
    let accept = accept(request.headers());
    let user = crate::access::check(
        server,
        &target,
        request.method(),
        request.uri().path(),
        &parsed.query,
        request.headers(),
        request.extensions(),
    )?;
    let request = crate::audit::capture_request_body(request).await?;
    let read_only = |method: &Method| -> ApiResult<()> {
        if method == Method::GET || method == Method::HEAD {
            Ok(())
        } else {
            Err(ApiError::method_not_allowed(method.as_str()))
        }
    };
    match target {
        Target::Version => {
            read_only(request.method())?;
            Ok(json_response(StatusCode::OK, &discovery::version()))
        }
        Target::Metrics(component) => {
            read_only(request.method())?;
            crate::metrics::serve(server, component.as_deref(), request.uri().path())
        }
        Target::Health => {
            Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response())
        }
        Target::CoreGroup => {
            read_only(request.method())?;
            Ok(match negotiate_discovery(&accept)? {
                DiscoveryFormat::Aggregated => {
                    aggregated_response(&discovery::aggregated(&server.discovery_kinds(), true))
                }
                DiscoveryFormat::Legacy => json_response(
                    StatusCode::OK,
                    &discovery::legacy_core_versions(&server.config.advertise_address),
                ),
            })
        }
        Target::Groups => {
            read_only(request.method())?;
            Ok(match negotiate_discovery(&accept)? {
                DiscoveryFormat::Aggregated => {
                    aggregated_response(&discovery::aggregated(&server.discovery_kinds(), false))
                }
                DiscoveryFormat::Legacy => json_response(
                    StatusCode::OK,
                    &discovery::legacy_groups(
                        &server.discovery_kinds(),
                        &server.config.advertise_address,
                    ),
                ),
            })
        }
        Target::Group(group) => {
            read_only(request.method())?;
            let body = discovery::legacy_group(&server.discovery_kinds(), &group)
                .ok_or_else(|| ApiError::no_route(request.uri().path()))?;
            Ok(json_response(StatusCode::OK, &body))
        }
        Target::GroupVersion(group, version) => {
            read_only(request.method())?;
            let kinds = server.discovery_kinds();
            if !discovery::serves(&kinds, &group, &version) {
                return Err(ApiError::no_route(request.uri().path()));
            }
            Ok(json_response(
                StatusCode::OK,
                &discovery::resource_list(&kinds, &group, &version),
            ))
        }
        Target::OpenApiV2 => {
            read_only(request.method())?;
            let document = server.openapi_v2();
            Ok(if openapi_v2::wants_protobuf(&accept) {
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, openapi_v2::PROTOBUF_CONTENT_TYPE)],
                    document.protobuf,
                )
                    .into_response()
            } else {
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    document.json,
                )
                    .into_response()
            })
        }
        Target::OpenApiIndex => {
            read_only(request.method())?;
            Ok(json_response(
                StatusCode::OK,
                &openapi::index(&server.kinds()),
            ))
        }
        Target::OpenApiDocument(path) => {
            read_only(request.method())?;
            let document = openapi::document(&server.kinds(), &path)
                .ok_or_else(|| ApiError::no_route(request.uri().path()))?;
            Ok(json_response(StatusCode::OK, &document))
        }
        Target::Resource(path) => {
            let aggregated = server
                .aggregated_apis()
                .into_iter()
                .find(|api| api.group() == path.group);
            if let Some(api) = aggregated {
                read_only(request.method())?;
                let body = api.get(&server.objects, &path, &parsed.query)?;
                return Ok(json_response(StatusCode::OK, &body));
            }
            let user = user.unwrap_or_default();
            resource_request(server, path, request, &accept, &user).await
        }
    }
}

/// The `/openapi/v2` document of one set of served kinds, in both encodings.
#[derive(Clone)]
struct OpenApiV2 {
    kinds: u64,
    json: Bytes,
    protobuf: Bytes,
}

impl ApiServer {
    /// The `/openapi/v2` document, built once per set of served kinds (it holds every
    /// definition, so building it per request would cost kubectl 1.27–1.29 on every apply).
    fn openapi_v2(&self) -> OpenApiV2 {
        let kinds = self.kinds();
        let identity = openapi::kinds_identity(&kinds);
        let mut cached = self.openapi_v2.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(document) = cached.as_ref().filter(|d| d.kinds == identity) {
            return document.clone();
        }
        let value = openapi_v2::document(&kinds);
        let document = OpenApiV2 {
            kinds: identity,
            json: Bytes::from(serde_json::to_vec(&value).unwrap_or_default()),
            protobuf: Bytes::from(openapi_v2::to_protobuf(&value)),
        };
        *cached = Some(document.clone());
        document
    }
}

/// The discovery document form for an Accept header, or 406 when none is acceptable.
fn negotiate_discovery(accept: &str) -> ApiResult<DiscoveryFormat> {
    discovery::negotiate(accept).ok_or_else(|| ApiError::not_acceptable(accept))
}

fn aggregated_response(value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, discovery::AGGREGATED_CONTENT_TYPE)],
        body,
    )
        .into_response()
}

/// Reads a request body up to the limit.
pub(crate) async fn read_body(request: Request) -> ApiResult<(HeaderMap, Bytes)> {
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    let bytes = limited
        .collect()
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY_BYTES))?
        .to_bytes();
    Ok((parts.headers, bytes))
}

/// The answer to a write: the stored bytes when they are the served form, else the object
/// encoded.
fn written_response(status: StatusCode, written: Written) -> Response {
    let response = match written.encoded {
        Some(encoded) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            encoded,
        )
            .into_response(),
        None => json_response(status, &written.object),
    };
    crate::audit::with_response_annotations(
        with_warnings(response, &written.warnings),
        &written.audit_annotations,
    )
}

/// `POST /api/v1/namespaces/<ns>/bindings`: kube-apiserver's legacy binding storage, the
/// pod named by the Binding's `metadata.name`; the same write as `pods/<name>/binding`.
async fn legacy_binding(
    server: &Arc<ApiServer>,
    namespace: Option<&str>,
    binding: &serde_json::Value,
    query: &Query,
) -> ApiResult<Response> {
    let name = tessera_api::meta::meta_str(binding, "name").unwrap_or_default();
    if name.is_empty() {
        return Err(ApiError::invalid(
            "",
            "Binding",
            "",
            vec![tessera_api::error::Cause::required("metadata.name")],
        ));
    }
    let pods = server
        .objects
        .registry()
        .find("", "v1", "pods")
        .ok_or_else(|| ApiError::not_found("", "pods", name))?;
    subresources::bind(server, pods, namespace, name, binding, query).await
}

async fn resource_request(
    server: &Arc<ApiServer>,
    path: ResourcePath,
    request: Request,
    accept: &str,
    user: &tessera_api::authn::UserInfo,
) -> ApiResult<Response> {
    let resource = path.resource(|group, version, plural| {
        server.objects.registry().find(group, version, plural)
    })?;
    let query = Query::parse(request.uri().query());
    let method = request.method().clone();
    if !resource.namespaced() && path.namespace.is_some() {
        return Err(ApiError::no_route(request.uri().path()));
    }
    let namespace = path.namespace.as_deref();
    if resource.info.create_only {
        if method != Method::POST {
            return Err(ApiError::method_not_allowed(method.as_str()));
        }
        let (headers, body) = read_body(request).await?;
        let review = decode_object(&content_type(&headers), &body)?;
        if (resource.group(), resource.plural()) == ("", "bindings") {
            return legacy_binding(server, namespace, &review, &query).await;
        }
        let answer = tessera_api::reviews::review(
            &server.rbac,
            &server.objects,
            |token| server.authenticator.bearer(&server.objects, token).ok(),
            resource,
            namespace,
            user,
            review,
        )?;
        return Ok(json_response(StatusCode::CREATED, &answer));
    }
    if path.subresource.as_deref() == Some("token") && resource.kind() == "ServiceAccount" {
        if method != Method::POST {
            return Err(ApiError::method_not_allowed(method.as_str()));
        }
        let (headers, body) = read_body(request).await?;
        let token_request = decode_object(&content_type(&headers), &body)?;
        let name = path.name.clone().unwrap_or_default();
        let answer = crate::access::token_request(
            server,
            namespace.unwrap_or("default"),
            &name,
            &token_request,
        )?;
        return Ok(json_response(StatusCode::CREATED, &answer));
    }
    if let Some(sub) = path.subresource.as_deref() {
        let name = path.name.clone().unwrap_or_default();
        return subresources::handle(server, resource, namespace, &name, sub, request, &query)
            .await;
    }
    match (method, path.name.as_deref()) {
        (Method::GET, None) if query.flag("watch") => {
            watch::watch(server.clone(), resource, namespace, &query, accept)
        }
        (Method::GET, None) => list::list(server, resource, namespace, &query, accept),
        (Method::GET, Some(name)) if query.flag("watch") => {
            // Watching a single object: a watch with a name field selector.
            let mut query = query;
            query.insert_field_selector(name);
            watch::watch(server.clone(), resource, namespace, &query, accept)
        }
        (Method::GET, Some(name)) => {
            let object = server.objects.get(resource, namespace, name)?;
            Ok(if wants_table(accept) {
                let table = tessera_api::table::table(
                    resource,
                    std::slice::from_ref(&object),
                    server.objects.now(),
                    tessera_api::meta::meta_str(&object, "resourceVersion").unwrap_or_default(),
                    None,
                    true,
                    IncludeObject::parse(query.get("includeObject"))?,
                );
                json_response(StatusCode::OK, &table)
            } else {
                json_response(StatusCode::OK, &object)
            })
        }
        (Method::POST, None) => {
            let mut options = write_options(&query)?;
            let (headers, body) = read_body(request).await?;
            options.field_manager = field_manager(&query, &headers);
            options.user = Some(user.name.clone());
            let object = decode_object(&content_type(&headers), &body)?;
            tessera_api::escalation::check(
                &server.rbac,
                &server.objects,
                user,
                resource,
                namespace,
                &object,
            )?;
            let written = server
                .objects
                .create_pending(resource, namespace, object, &options)?
                .committed()
                .await?;
            Ok(written_response(StatusCode::CREATED, written))
        }
        (Method::PUT, Some(name)) => {
            let mut options = write_options(&query)?;
            let (headers, body) = read_body(request).await?;
            options.field_manager = field_manager(&query, &headers);
            options.user = Some(user.name.clone());
            let object = decode_object(&content_type(&headers), &body)?;
            tessera_api::escalation::check(
                &server.rbac,
                &server.objects,
                user,
                resource,
                namespace,
                &object,
            )?;
            let written = server
                .objects
                .update_pending(resource, namespace, name, object, Part::Main, &options)?
                .committed()
                .await?;
            Ok(written_response(StatusCode::OK, written))
        }
        (Method::PATCH, Some(name)) => {
            let name = name.to_string();
            let guard = |object: &Value| {
                tessera_api::escalation::check(
                    &server.rbac,
                    &server.objects,
                    user,
                    resource,
                    namespace,
                    object,
                )
            };
            let guard: Option<&WriteGuard<'_>> =
                tessera_api::escalation::applies(resource, user).then_some(&guard);
            patch(
                server,
                resource,
                namespace,
                &name,
                Part::Main,
                request,
                &query,
                guard,
                Some(&user.name),
            )
            .await
        }
        (Method::DELETE, Some(name)) => {
            let name = name.to_string();
            delete(server, resource, namespace, &name, request, &query).await
        }
        (Method::DELETE, None) => {
            delete_collection(server, resource, namespace, request, &query).await
        }
        (method, _) => Err(ApiError::method_not_allowed(method.as_str())),
    }
}

/// A check of the object a write would store, run before anything is stored.
pub(crate) type WriteGuard<'a> = dyn Fn(&Value) -> ApiResult<()> + Sync + 'a;

/// Handles a PATCH of an object or of its status. A `guard` sees the patched object before
/// anything is stored and may refuse it (RBAC's escalation check); the write then goes
/// through as an update preconditioned on the resourceVersion the guard saw. `user` names the
/// requester for admission's user exemptions.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn patch(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    part: Part,
    request: Request,
    query: &Query,
    guard: Option<&WriteGuard<'_>>,
    user: Option<&str>,
) -> ApiResult<Response> {
    let mut options = write_options(query)?;
    options.user = user.map(str::to_string);
    if part == Part::Status {
        options.subresource = Some("status");
    }
    let (headers, body) = read_body(request).await?;
    let kind = content_type(&headers);
    let body = if kind == "application/apply-patch+yaml" {
        let Some(manager) = query.get("fieldManager").filter(|m| !m.is_empty()) else {
            return Err(ApiError::bad_request(
                "PATCH, application/apply-patch+yaml requires fieldManager to be set",
            ));
        };
        let config = decode_object(&kind, &body)?;
        let force = query.flag("force");
        if server.objects.get(resource, namespace, name).is_err() {
            // Apply creates what does not exist yet.
            let schema = resource.schema();
            let now = tessera_api::meta::timestamp(server.objects.now());
            let mut object = tessera_api::ssa::apply(
                &json!({}),
                &config,
                manager,
                &resource.info.api_version(),
                &now,
                force,
                schema,
            )
            .map_err(|_| ApiError::internal("apply to an empty object conflicted"))?
            .object;
            tessera_api::meta::metadata_mut(&mut object).insert("name".into(), json!(name));
            if let Some(guard) = guard {
                guard(&object)?;
            }
            let written = server
                .objects
                .create_pending(resource, namespace, object, &options)?
                .committed()
                .await?;
            return Ok(written_response(StatusCode::CREATED, written));
        }
        PatchBody::Apply {
            config,
            manager: manager.to_string(),
            force,
        }
    } else {
        options.field_manager = field_manager(query, &headers);
        patch_body(&kind, body)?
    };
    let Some(guard) = guard else {
        let written = server
            .objects
            .patch_pending(resource, namespace, name, &body, part, &options)?
            .committed()
            .await?;
        return Ok(written_response(StatusCode::OK, written));
    };
    let preview = server.objects.patch(
        resource,
        namespace,
        name,
        &body,
        part,
        &WriteOptions {
            dry_run: true,
            ..options.clone()
        },
    )?;
    guard(&preview.object)?;
    if options.dry_run {
        return Ok(written_response(StatusCode::OK, preview));
    }
    // The preview already carries the manager's managedFields and the stored
    // resourceVersion, which makes the update fail with a conflict if the object moved.
    let written = server
        .objects
        .update_pending(
            resource,
            namespace,
            name,
            preview.object,
            part,
            &WriteOptions {
                field_manager: None,
                ..options
            },
        )?
        .committed()
        .await?;
    Ok(written_response(StatusCode::OK, written))
}

async fn delete(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    name: &str,
    request: Request,
    query: &Query,
) -> ApiResult<Response> {
    let (_, body) = read_body(request).await?;
    let (options, dry_run) = delete_options(query, &body)?;
    let deleted = server
        .objects
        .delete_pending(resource, namespace, name, &options, dry_run)?
        .committed()
        .await?;
    let status = if deleted.gone {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(json_response(status, &deleted.object))
}

async fn delete_collection(
    server: &Arc<ApiServer>,
    resource: Resource,
    namespace: Option<&str>,
    request: Request,
    query: &Query,
) -> ApiResult<Response> {
    let (_, body) = read_body(request).await?;
    let (options, dry_run) = delete_options(query, &body)?;
    let filter = tessera_api::listing::Filter::parse(resource, query)?;
    let snapshot = server.objects.list(resource, namespace);
    let mut deleted = Vec::new();
    for entry in snapshot.entries.iter() {
        let object = crate::objects::decode_as(resource, entry)?;
        if !filter.matches(&object) {
            continue;
        }
        let name = tessera_api::meta::meta_str(&object, "name")
            .unwrap_or_default()
            .to_string();
        let object_namespace =
            tessera_api::meta::meta_str(&object, "namespace").map(str::to_string);
        match server.objects.delete_pending(
            resource,
            object_namespace.as_deref(),
            &name,
            &options,
            dry_run,
        ) {
            Ok(pending) => deleted.push(pending.committed().await?.object),
            Err(error) if error.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    let list = json!({
        "kind": format!("{}List", resource.kind()),
        "apiVersion": resource.info.api_version(),
        "metadata": {"resourceVersion": server.objects.store().revision().to_string()},
        "items": deleted,
    });
    Ok(json_response(StatusCode::OK, &list))
}

/// Builds a response body from pre-serialised chunks.
pub(crate) fn raw_json(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
}
