//! The audit shell: what kube-apiserver's `WithAuditInit`, `WithAudit` and
//! `WithFailedAuthenticationAudit` filters do around every request, in-process clients
//! (controllers, node twins) included.
//!
//! Every request gets an audit ID (the client's `Audit-ID` header, else a random UUID),
//! returned in the `Audit-Id` response header. When an [`Auditor`] is installed
//! (`--audit-policy-file` with `--audit-log-path`), the request carries a [`RequestAudit`]
//! in its extensions: `access::check` reports the authenticated user (the policy is
//! evaluated then, and `RequestReceived` written), the impersonated user and the
//! authorization decision; `server::route` hands it the body of a write; the response's
//! code, a `Status` body and (at `RequestResponse`) the body itself end the event at
//! `ResponseComplete` — or `ResponseStarted` first, then `ResponseComplete` when the stream
//! ends, for long-running requests (watch, exec, logs). A panicking handler writes `Panic`.
//! Handlers and admission add annotations through the [`AuditAnnotations`] handle in the
//! extensions.
//!
//! What is recorded is `tessera_api::audit`'s decision; where lines go (a bounded queue to a
//! writer thread, rotation) is [`crate::audit_log`]'s. Without an auditor nothing is
//! evaluated or buffered.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use bytes::Bytes;
use futures::{FutureExt, StreamExt};
use http::{HeaderMap, HeaderValue, Method};
use http_body_util::BodyExt;
use serde_json::Value;
use tessera_api::audit::event::{authentication_failed, panic_status, request_body};
use tessera_api::audit::{Event, Level, Policy, RequestAuditConfig, Stage, long_running};
use tessera_api::authn::UserInfo;
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::rbac::Attributes;
use tessera_api::request::{Query, Target, attributes};
use tessera_model::clock::Clock;

use crate::audit_log::AuditSink;
use crate::server::MAX_BODY_BYTES;

/// The header carrying a request's audit ID (upstream's `auditinternal.HeaderAuditID`).
pub const AUDIT_ID_HEADER: &str = "audit-id";

/// The annotation of the authorizer's decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation of the authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// Writes audit events: the policy, where lines go, and the clock stages are timed by.
pub struct Auditor {
    policy: Policy,
    sink: AuditSink,
    clock: Clock,
}

impl Auditor {
    /// An auditor writing through `sink`.
    pub fn new(policy: Policy, sink: AuditSink, clock: Clock) -> Auditor {
        Auditor {
            policy,
            sink,
            clock,
        }
    }
}

/// The connection's remote address, attached by the TLS listener (`sourceIPs`).
#[derive(Debug, Clone, Copy)]
pub struct RemoteAddr(pub std::net::IpAddr);

/// Annotations handlers and admission add to the request's audit event (upstream's
/// `audit.AddAuditAnnotation`): the first value of a key wins. Present in a request's
/// extensions only while the request is audited; adding to a clone adds to the request's.
#[derive(Debug, Clone, Default)]
pub struct AuditAnnotations(Arc<Mutex<Vec<(String, String)>>>);

impl AuditAnnotations {
    /// Adds `key: value` unless the key already has a value.
    pub fn add(&self, key: &str, value: &str) {
        let mut annotations = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match annotations.iter().find(|(k, _)| k == key) {
            Some((_, existing)) if existing != value => {
                tracing::warn!(
                    key,
                    existing,
                    value,
                    "audit annotation already set; keeping the first value"
                );
            }
            Some(_) => {}
            None => annotations.push((key.to_string(), value.to_string())),
        }
    }

    fn drain_into(&self, event: &mut Event) {
        let annotations = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (key, value) in annotations.iter() {
            event
                .annotations
                .entry(key.clone())
                .or_insert_with(|| value.clone());
        }
    }
}

/// Audit annotations an answer carries for its request's event (admission's, such as Pod
/// Security's `pod-security.kubernetes.io/*`), put in the response's extensions by the
/// handlers, which no longer hold the request; `audited` moves them onto the event.
#[derive(Debug, Clone, Default)]
pub struct ResponseAnnotations(pub Vec<(String, String)>);

/// `response` carrying `annotations` for its request's audit event.
pub fn with_response_annotations(
    mut response: Response,
    annotations: &[(String, String)],
) -> Response {
    if !annotations.is_empty() {
        response
            .extensions_mut()
            .insert(ResponseAnnotations(annotations.to_vec()));
    }
    response
}

/// Adds an annotation to the audit event of the request whose extensions these are; a no-op
/// when the request is not audited.
pub fn annotate(extensions: &http::Extensions, key: &str, value: &str) {
    if let Some(annotations) = extensions.get::<AuditAnnotations>() {
        annotations.add(key, value);
    }
}

/// A random (version 4) UUID, as upstream's `uuid.New`: from one generator per process,
/// seeded from the host's entropy.
fn new_audit_id() -> String {
    static IDS: std::sync::OnceLock<tessera_model::ids::Ids> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        let mut seed = [0u8; 8];
        if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed).is_err() {
            seed = fastrand::u64(..).to_le_bytes();
        }
        tessera_model::ids::Ids::seeded(u64::from_le_bytes(seed))
    })
    .uid()
}

/// The request's audit ID: the client's `Audit-ID` header, else a new UUID.
pub fn audit_id(headers: &HeaderMap) -> String {
    headers
        .get(AUDIT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map_or_else(new_audit_id, str::to_string)
}

/// Sets the `Audit-Id` response header.
pub fn set_audit_id(response: &mut Response, audit_id: &str) {
    if let Ok(value) = HeaderValue::from_str(audit_id) {
        response.headers_mut().insert(AUDIT_ID_HEADER, value);
    }
}

/// `utilnet.SourceIPs`: the `X-Forwarded-For` addresses, `X-Real-Ip` unless already listed,
/// then the connection's address unless it is the last one listed.
fn source_ips(headers: &HeaderMap, remote: Option<RemoteAddr>) -> Vec<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let mut ips: Vec<String> = header("x-forwarded-for")
        .into_iter()
        .flat_map(|list| list.split(','))
        .filter_map(|part| part.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_string())
        .collect();
    if let Some(ip) = header("x-real-ip").and_then(|v| v.trim().parse::<std::net::IpAddr>().ok()) {
        let ip = ip.to_string();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    if let Some(RemoteAddr(ip)) = remote {
        let ip = ip.to_string();
        if ips.last() != Some(&ip) {
            ips.push(ip);
        }
    }
    ips
}

/// Which credentials a request carried, for a failed authentication's message.
fn attempted_methods(headers: &HeaderMap, query: &Query, certificate: bool) -> Vec<&'static str> {
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    let scheme = authorization.split(' ').next().unwrap_or_default();
    let mut methods = Vec::new();
    if scheme.eq_ignore_ascii_case("basic") {
        methods.push("basic");
    }
    if authorization.split(' ').count() > 1 && scheme.eq_ignore_ascii_case("bearer") {
        methods.push("bearer");
    }
    if query
        .get("access_token")
        .is_some_and(|t| !t.trim().is_empty())
    {
        methods.push("access_token");
    }
    if certificate {
        methods.push("x509");
    }
    methods
}

/// One request's audit state, shared through the request's extensions.
#[derive(Clone)]
pub struct RequestAudit(Arc<RequestState>);

struct RequestState {
    auditor: Arc<Auditor>,
    audit_id: String,
    received: SystemTime,
    attributes: Attributes,
    api_version: String,
    request_uri: String,
    user_agent: String,
    source_ips: Vec<String>,
    failed_authentication: String,
    annotations: AuditAnnotations,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Set once the policy was evaluated.
    config: Option<RequestAuditConfig>,
    /// The event, while the level is above `None`.
    event: Option<Event>,
}

impl RequestAudit {
    /// The audit state of a request, if it is audited.
    pub fn of(extensions: &http::Extensions) -> Option<&RequestAudit> {
        extensions.get::<RequestAudit>()
    }

    /// Starts auditing a request: its ID, arrival time and attributes.
    fn start(auditor: Arc<Auditor>, request: &Request, audit_id: String) -> RequestAudit {
        let uri = request.uri();
        let parsed = crate::parsed::Parsed::from_request(request.extensions(), uri);
        let (attributes, api_version) = match &parsed.target {
            Ok(target) => {
                let version = match target {
                    Target::Resource(path) => path.version.clone(),
                    _ => String::new(),
                };
                (
                    attributes(target, request.method(), uri.path(), &parsed.query),
                    version,
                )
            }
            Err(_) => (
                Attributes {
                    verb: request.method().as_str().to_ascii_lowercase(),
                    path: uri.path().to_string(),
                    ..Attributes::default()
                },
                String::new(),
            ),
        };
        let headers = request.headers();
        let certificate = request
            .extensions()
            .get::<crate::authn::Authenticated>()
            .is_some();
        RequestAudit(Arc::new(RequestState {
            received: (auditor.clock)(),
            auditor,
            audit_id,
            attributes,
            api_version,
            request_uri: uri
                .path_and_query()
                .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string()),
            user_agent: headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string(),
            source_ips: source_ips(headers, request.extensions().get::<RemoteAddr>().copied()),
            failed_authentication: authentication_failed(&attempted_methods(
                headers,
                &parsed.query,
                certificate,
            )),
            annotations: AuditAnnotations::default(),
            inner: Mutex::new(Inner::default()),
        }))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the event at `stage` unless the policy omits it; whether it was queued.
    fn emit(&self, event: &mut Event, config: &RequestAuditConfig, stage: Stage) -> bool {
        if !config.records(stage) {
            return true;
        }
        event.stage = stage;
        event.stage_timestamp = if stage == Stage::RequestReceived {
            event.request_received
        } else {
            (self.0.auditor.clock)()
        };
        self.0.annotations.drain_into(event);
        self.0.auditor.sink.send(event.line())
    }

    /// The authenticated user is known (`None` for an anonymous request to a public path,
    /// recorded as `system:anonymous`): evaluates the policy and writes `RequestReceived`.
    /// Fails the request, as upstream does, when the event cannot be queued.
    pub fn authenticated(&self, user: Option<&UserInfo>) -> ApiResult<()> {
        let anonymous;
        let user = match user {
            Some(user) => user,
            None => {
                anonymous = UserInfo {
                    name: "system:anonymous".into(),
                    groups: vec!["system:unauthenticated".into()],
                    ..UserInfo::default()
                };
                &anonymous
            }
        };
        let mut inner = self.inner();
        if inner.config.is_some() {
            return Ok(());
        }
        let config = self
            .0
            .auditor
            .policy
            .evaluate(Some(user), &self.0.attributes);
        if config.level == Level::None {
            inner.config = Some(config);
            return Ok(());
        }
        let mut event = self.new_event(config.level, Some(user));
        let queued = self.emit(&mut event, &config, Stage::RequestReceived);
        inner.config = Some(config);
        inner.event = Some(event);
        if queued {
            Ok(())
        } else {
            Err(ApiError::internal("failed to store audit event"))
        }
    }

    fn new_event(&self, level: Level, user: Option<&UserInfo>) -> Event {
        let state = &self.0;
        let mut event = Event::new(
            level,
            &state.audit_id,
            &state.request_uri,
            &state.attributes,
            &state.api_version,
            user,
            state.received,
        );
        event.source_ips = state.source_ips.clone();
        event.set_user_agent(&state.user_agent);
        event
    }

    /// The request impersonates `user`.
    pub fn impersonated(&self, user: &UserInfo) {
        if let Some(event) = self.inner().event.as_mut() {
            event.impersonated_user = Some(user.clone());
        }
    }

    /// The authorizer decided.
    pub fn decision(&self, allowed: bool, reason: &str) {
        let annotations = &self.0.annotations;
        annotations.add(
            DECISION_ANNOTATION,
            if allowed { "allow" } else { "forbid" },
        );
        annotations.add(REASON_ANNOTATION, reason);
    }

    /// The handle through which annotations are added.
    pub fn annotations(&self) -> AuditAnnotations {
        self.0.annotations.clone()
    }

    fn level(&self) -> Level {
        self.inner().event.as_ref().map_or(Level::None, |e| e.level)
    }

    /// Records the body of a write (create, update, patch, delete) from level Metadata up.
    fn log_request_body(&self, content_type: &str, body: &[u8]) {
        let mut inner = self.inner();
        let omit = inner.config.as_ref().is_some_and(|c| c.omit_managed_fields);
        let Some(event) = inner.event.as_mut() else {
            return;
        };
        let object = request_body(content_type, body).unwrap_or_else(|| {
            if event.verb == "delete" || event.verb == "deletecollection" {
                serde_json::json!({"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"})
            } else {
                Value::Null
            }
        });
        if !object.is_null() {
            event.log_request_object(&object, omit);
        }
    }

    /// Whether the answer's body is worth reading: at `RequestResponse`, for failures (their
    /// `Status`), and for deletes (which may answer a `Status`).
    fn wants_response_body(&self, code: u16) -> bool {
        let inner = self.inner();
        inner.event.as_ref().is_some_and(|event| {
            event.level >= Level::RequestResponse
                || code >= 300
                || matches!(event.verb.as_str(), "delete" | "deletecollection")
        })
    }

    /// Ends the event with the answer: `ResponseComplete` (after `ResponseStarted` for
    /// long-running requests, whose `ResponseComplete` waits for the stream's end).
    async fn finish(self, response: Response) -> Response {
        let code = response.status().as_u16();
        let (config, has_event) = {
            let inner = self.inner();
            (inner.config.clone(), inner.event.is_some())
        };
        let Some(config) = config else {
            return self.failed_authentication(response, code);
        };
        if !has_event {
            return response;
        }
        // A long-running success streams on: its `ResponseComplete` waits for the stream. A
        // protocol switch (exec) keeps its body untouched and completes at once.
        let streaming = long_running(&self.0.attributes) && (200..300).contains(&code);
        let (parts, body) = response.into_parts();
        let (parsed, body) = if !streaming && code != 101 && self.wants_response_body(code) {
            read_json(&parts.headers, body).await
        } else {
            (None, body)
        };
        {
            let mut inner = self.inner();
            if let Some(mut event) = inner.event.take() {
                event.log_response(code, parsed.as_ref(), config.omit_managed_fields);
                if long_running(&self.0.attributes) {
                    self.emit(&mut event, &config, Stage::ResponseStarted);
                }
                if streaming {
                    inner.event = Some(event);
                } else {
                    self.emit(&mut event, &config, Stage::ResponseComplete);
                }
            }
        }
        if streaming {
            let completion = Completion(Some(self));
            let stream = body.into_data_stream().map(move |chunk| {
                let _ = &completion;
                chunk
            });
            return Response::from_parts(parts, Body::from_stream(stream));
        }
        Response::from_parts(parts, body)
    }

    /// Authentication failed before the policy was evaluated: the policy decides with no
    /// user, and one `ResponseStarted` event records the failure (upstream's
    /// `WithFailedAuthenticationAudit`).
    fn failed_authentication(&self, response: Response, code: u16) -> Response {
        let config = self.0.auditor.policy.evaluate(None, &self.0.attributes);
        if config.level == Level::None {
            return response;
        }
        let mut event = self.new_event(config.level, None);
        event.log_response(code, None, false);
        if let Some(Value::Object(status)) = event.response_status.as_mut() {
            status.insert(
                "message".into(),
                Value::String(self.0.failed_authentication.clone()),
            );
            // Keep `code` last, as upstream's field order has it.
            if let Some(code) = status.remove("code") {
                status.insert("code".into(), code);
            }
        }
        self.emit(&mut event, &config, Stage::ResponseStarted);
        response
    }

    /// The handler panicked.
    fn panicked(&self, message: &str) {
        let mut inner = self.inner();
        let Some(config) = inner.config.clone() else {
            return;
        };
        if let Some(mut event) = inner.event.take() {
            event.response_status = Some(panic_status(message));
            self.emit(&mut event, &config, Stage::Panic);
        }
    }

    /// The long-running response's stream ended (or its client went away).
    fn complete(&self) {
        let mut inner = self.inner();
        let Some(config) = inner.config.clone() else {
            return;
        };
        if let Some(mut event) = inner.event.take() {
            self.emit(&mut event, &config, Stage::ResponseComplete);
        }
    }
}

/// Reads a response body, and its JSON value when it is JSON.
async fn read_json(headers: &HeaderMap, body: Body) -> (Option<Value>, Body) {
    match body.collect().await {
        Ok(collected) => {
            let bytes = collected.to_bytes();
            let json = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            let parsed = json
                .then(|| serde_json::from_slice::<Value>(&bytes).ok())
                .flatten();
            (parsed, Body::from(bytes))
        }
        Err(error) => {
            tracing::debug!(%error, "reading a response body for the audit log");
            (None, Body::from(Bytes::new()))
        }
    }
}

/// Writes a long-running request's `ResponseComplete` when its body is dropped.
struct Completion(Option<RequestAudit>);

impl Drop for Completion {
    fn drop(&mut self) {
        if let Some(audit) = self.0.take() {
            audit.complete();
        }
    }
}

/// Runs a request through `route` under audit: the `Audit-Id` header always; with an
/// auditor, the events of its stages.
pub async fn audited<F, Fut>(
    auditor: Option<Arc<Auditor>>,
    mut request: Request,
    route: F,
) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    let audit_id = audit_id(request.headers());
    let Some(auditor) = auditor else {
        let mut response = route(request).await;
        set_audit_id(&mut response, &audit_id);
        return response;
    };
    let audit = RequestAudit::start(auditor, &request, audit_id.clone());
    request.extensions_mut().insert(audit.clone());
    request.extensions_mut().insert(audit.annotations());
    let response = match AssertUnwindSafe(route(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            audit.panicked(&message);
            std::panic::resume_unwind(panic);
        }
    };
    if let Some(ResponseAnnotations(annotations)) = response.extensions().get() {
        let handle = audit.annotations();
        for (key, value) in annotations {
            handle.add(key, value);
        }
    }
    let mut response = audit.finish(response).await;
    set_audit_id(&mut response, &audit_id);
    response
}

/// Reads the body of an audited write so its event can record it, and puts it back; an
/// unaudited request passes untouched. Over-large bodies fail as the handler would.
pub async fn capture_request_body(request: Request) -> ApiResult<Request> {
    let Some(audit) = RequestAudit::of(request.extensions()).cloned() else {
        return Ok(request);
    };
    let writes = matches!(
        *request.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    // Streams (exec, attach, port-forward, logs) carry no object to record.
    let attributes = &audit.0.attributes;
    if !writes
        || audit.level() < Level::Metadata
        || !attributes.resource_request
        || long_running(attributes)
    {
        return Ok(request);
    }
    let (parts, body) = request.into_parts();
    let bytes = http_body_util::Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|_| ApiError::too_large(MAX_BODY_BYTES))?
        .to_bytes();
    let content_type = tessera_api::body::content_type(&parts.headers);
    audit.log_request_body(&content_type, &bytes);
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
