//! The `audit.k8s.io/v1` `Event` of one request at one stage, rendered as kube-apiserver's
//! log backend writes it: one JSON object per line, `kind` and `apiVersion` first, then the
//! fields in the order of upstream's `types.go`, empty ones left out as its `omitempty` tags
//! say; timestamps as `MicroTime` (RFC 3339 with microseconds, UTC).
//!
//! Also the pieces upstream's request handling fills in: the `objectRef` completed from a
//! request body (`LogRequestObject`), the bounded copy of a `Status` as `responseStatus`
//! (`LogResponseObject`), `metadata.managedFields` dropped under `omitManagedFields`.
//! Knows nothing of where the request came from or where the line goes: the audit ID, the
//! times and the bodies are handed in.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::policy::API_VERSION;
use super::{Level, Stage};
use crate::authn::UserInfo;
use crate::rbac::Attributes;

/// The longest `userAgent` recorded before it is cut (upstream's `maxUserAgentLength`).
pub const MAX_USER_AGENT: usize = 1024;
/// What a cut `userAgent` ends with.
const TRUNCATED: &str = "...TRUNCATED";

/// The object a request is about (`ObjectReference`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectRef {
    /// Resource (plural).
    pub resource: String,
    /// Namespace, if namespaced.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Object UID, when the request body carries one.
    pub uid: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Resource version, when the request body carries one.
    pub resource_version: String,
    /// Subresource.
    pub subresource: String,
}

impl ObjectRef {
    /// The reference of a resource request; `None` for a non-resource URL.
    pub fn of(attributes: &Attributes, api_version: &str) -> Option<ObjectRef> {
        attributes.resource_request.then(|| ObjectRef {
            resource: attributes.resource.clone(),
            namespace: attributes.namespace.clone(),
            name: attributes.name.clone(),
            api_group: attributes.group.clone(),
            api_version: api_version.to_string(),
            subresource: attributes.subresource.clone(),
            ..ObjectRef::default()
        })
    }

    /// Completes the reference from the request's object, as `LogRequestObject` does: its
    /// namespace, name, UID and resource version where the URL did not give them.
    pub fn complete_from(&mut self, object: &Value) {
        let Some(metadata) = object.get("metadata").and_then(Value::as_object) else {
            return;
        };
        let read = |key: &str| {
            metadata
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        for (field, key) in [
            (&mut self.namespace, "namespace"),
            (&mut self.name, "name"),
            (&mut self.uid, "uid"),
            (&mut self.resource_version, "resourceVersion"),
        ] {
            if field.is_empty() {
                *field = read(key);
            }
        }
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (key, value) in [
            ("resource", &self.resource),
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("uid", &self.uid),
            ("apiGroup", &self.api_group),
            ("apiVersion", &self.api_version),
            ("resourceVersion", &self.resource_version),
            ("subresource", &self.subresource),
        ] {
            if !value.is_empty() {
                out.insert(key.into(), json!(value));
            }
        }
        Value::Object(out)
    }
}

/// One audit event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The level the policy chose.
    pub level: Level,
    /// The request's audit ID (a UUID, or the client's `Audit-ID` header).
    pub audit_id: String,
    /// The stage this event records.
    pub stage: Stage,
    /// Path and query as sent.
    pub request_uri: String,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, …; the lowercase HTTP method
    /// for non-resource URLs).
    pub verb: String,
    /// The authenticated user; `None` when authentication failed.
    pub user: Option<UserInfo>,
    /// The user impersonated, if any.
    pub impersonated_user: Option<UserInfo>,
    /// Where the request came from.
    pub source_ips: Vec<String>,
    /// The client's `User-Agent`.
    pub user_agent: String,
    /// What the request is about (resource requests only).
    pub object_ref: Option<ObjectRef>,
    /// The answer's `Status` (at least its code) once there is one.
    pub response_status: Option<Value>,
    /// The request body (levels Request and RequestResponse).
    pub request_object: Option<Value>,
    /// The response body (level RequestResponse).
    pub response_object: Option<Value>,
    /// When the request arrived.
    pub request_received: SystemTime,
    /// When this stage was reached.
    pub stage_timestamp: SystemTime,
    /// Annotations (`authorization.k8s.io/decision`, admission's).
    pub annotations: BTreeMap<String, String>,
}

impl Event {
    /// The event of a request as it arrives (`NewEventFromRequest`), at `RequestReceived`.
    pub fn new(
        level: Level,
        audit_id: &str,
        request_uri: &str,
        attributes: &Attributes,
        api_version: &str,
        user: Option<&UserInfo>,
        received: SystemTime,
    ) -> Event {
        Event {
            level,
            audit_id: audit_id.to_string(),
            stage: Stage::RequestReceived,
            request_uri: request_uri.to_string(),
            verb: attributes.verb.clone(),
            user: user.cloned(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: ObjectRef::of(attributes, api_version),
            response_status: None,
            request_object: None,
            response_object: None,
            request_received: received,
            stage_timestamp: received,
            annotations: BTreeMap::new(),
        }
    }

    /// Records the `User-Agent`, cut as upstream cuts long ones.
    pub fn set_user_agent(&mut self, user_agent: &str) {
        self.user_agent = if user_agent.len() > MAX_USER_AGENT {
            let mut end = MAX_USER_AGENT;
            while !user_agent.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}{TRUNCATED}", &user_agent[..end])
        } else {
            user_agent.to_string()
        };
    }

    /// Records the request's object (`LogRequestObject`): completes `objectRef` from it at
    /// any level, and keeps the body from level Request up.
    pub fn log_request_object(&mut self, object: &Value, omit_managed_fields: bool) {
        if self.level < Level::Metadata {
            return;
        }
        if let Some(reference) = &mut self.object_ref {
            reference.complete_from(object);
        }
        if self.level >= Level::Request {
            let mut object = object.clone();
            if omit_managed_fields {
                strip_managed_fields(&mut object);
            }
            self.request_object = Some(object);
        }
    }

    /// Records the answer (`LogResponseObject` and the status-code interception): its code,
    /// a `Status` body's bounded fields, and from level RequestResponse the body itself.
    pub fn log_response(&mut self, code: u16, body: Option<&Value>, omit_managed_fields: bool) {
        self.response_status = Some(response_status(code, body));
        if self.level >= Level::RequestResponse
            && let Some(body) = body
        {
            let mut body = body.clone();
            if omit_managed_fields {
                strip_managed_fields(&mut body);
            }
            self.response_object = Some(body);
        }
    }

    /// The event as kube-apiserver's JSON log backend writes it (without the newline).
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("kind".into(), json!("Event"));
        out.insert("apiVersion".into(), json!(API_VERSION));
        out.insert("level".into(), json!(self.level.as_str()));
        out.insert("auditID".into(), json!(self.audit_id));
        out.insert("stage".into(), json!(self.stage.as_str()));
        out.insert("requestURI".into(), json!(self.request_uri));
        out.insert("verb".into(), json!(self.verb));
        out.insert(
            "user".into(),
            self.user.as_ref().map_or_else(|| json!({}), user_json),
        );
        if let Some(user) = &self.impersonated_user {
            out.insert("impersonatedUser".into(), user_json(user));
        }
        if !self.source_ips.is_empty() {
            out.insert("sourceIPs".into(), json!(self.source_ips));
        }
        if !self.user_agent.is_empty() {
            out.insert("userAgent".into(), json!(self.user_agent));
        }
        if let Some(reference) = &self.object_ref {
            out.insert("objectRef".into(), reference.to_json());
        }
        if let Some(status) = &self.response_status {
            out.insert("responseStatus".into(), status.clone());
        }
        if let Some(object) = &self.request_object {
            out.insert("requestObject".into(), object.clone());
        }
        if let Some(object) = &self.response_object {
            out.insert("responseObject".into(), object.clone());
        }
        out.insert(
            "requestReceivedTimestamp".into(),
            json!(tessera_model::time::micro_timestamp(self.request_received)),
        );
        out.insert(
            "stageTimestamp".into(),
            json!(tessera_model::time::micro_timestamp(self.stage_timestamp)),
        );
        if !self.annotations.is_empty() {
            out.insert("annotations".into(), json!(self.annotations));
        }
        Value::Object(out)
    }

    /// The event as one log line, newline included.
    pub fn line(&self) -> String {
        let mut line = self.to_json().to_string();
        line.push('\n');
        line
    }
}

/// A user as the event records it (`UserInfo`: `username`, `uid`, `groups`, `extra`).
fn user_json(user: &UserInfo) -> Value {
    let mut out = Map::new();
    if !user.name.is_empty() {
        out.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        out.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        out.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        out.insert("extra".into(), json!(user.extra));
    }
    Value::Object(out)
}

/// `responseStatus`: the code, and when the body is a `Status` its status, message, reason
/// and details (the bounded fields upstream copies).
pub fn response_status(code: u16, body: Option<&Value>) -> Value {
    let mut out = Map::new();
    out.insert("metadata".into(), json!({}));
    if let Some(status) = body.filter(|b| b.get("kind").and_then(Value::as_str) == Some("Status")) {
        for key in ["status", "message", "reason", "details"] {
            if let Some(value) = status.get(key).filter(|v| !is_empty(v)) {
                out.insert(key.into(), value.clone());
            }
        }
    }
    out.insert("code".into(), json!(code));
    Value::Object(out)
}

/// The `responseStatus` of a request whose handler panicked.
pub fn panic_status(message: &str) -> Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!("APIServer panic'd: {message}"),
        "reason": "InternalError",
        "code": 500,
    })
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Drops `metadata.managedFields` from an object, or from each item of a list.
pub fn strip_managed_fields(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(metadata) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("managedFields");
            }
        }
    }
}

/// A request body as the event records it: JSON bodies (objects and the three patch
/// flavours) as sent, YAML (`apply-patch+yaml`) and protobuf bodies decoded to their JSON
/// form; `None` when the body is empty or unreadable (the handler reports that).
pub fn request_body(content_type: &str, body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    match content_type {
        "application/yaml" | "application/apply-patch+yaml" => {
            serde_saphyr::from_str(std::str::from_utf8(body).ok()?).ok()
        }
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(body).ok(),
        _ => serde_json::from_slice(body).ok(),
    }
}

/// The message of a failed authentication's `responseStatus` (upstream's `getAuthMethods`):
/// which of `basic`, `bearer`, `access_token` and `x509` the request attempted.
pub fn authentication_failed(attempted: &[&str]) -> String {
    if attempted.is_empty() {
        "Authentication failed, no credentials provided".into()
    } else {
        format!("Authentication failed, attempted: {}", attempted.join(", "))
    }
}

#[cfg(test)]
#[path = "event_tests.rs"]
mod tests;
