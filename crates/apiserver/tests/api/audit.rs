//! Audit logging over the router: which `audit.k8s.io/v1` Event lines each request writes
//! (levels, omitted stages, bodies, impersonation, refusals, failed authentication, watches)
//! and the `Audit-Id` header.

use std::sync::mpsc::Receiver;
use std::time::{Duration, SystemTime};

use axum::body::Body;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tessera_api::authn::UserInfo;
use tessera_apiserver::audit::{AUDIT_ID_HEADER, Auditor};
use tessera_apiserver::audit_log::AuditSink;
use tessera_apiserver::authn::Authenticated;
use tower::ServiceExt;

use crate::support::{self, TestServer};

const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    users: [quiet]
  - level: RequestResponse
    resources: [{group: \"\", resources: [configmaps]}]
  - level: Metadata
    resources: [{group: \"\", resources: [pods]}]
    omitStages: [RequestReceived]
  - level: Metadata
    nonResourceURLs: [\"/version\"]
  - level: Request
    resources: [{group: \"\", resources: [secrets]}]
    omitManagedFields: true
";

struct Fixture {
    test: TestServer,
    lines: Receiver<String>,
}

/// A server auditing under `POLICY` into a channel the test reads, at a fixed time.
fn fixture() -> Fixture {
    let test = support::start();
    let (sink, lines) = AuditSink::channel(100);
    let policy = tessera_api::audit::parse_policy(POLICY).unwrap().policy;
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_680_000);
    test.server
        .set_auditor(Auditor::new(policy, sink, tessera_model::clock::fixed(at)));
    Fixture { test, lines }
}

fn admin() -> UserInfo {
    UserInfo::new("admin", &["system:masters"])
}

/// Sends a request as `user` (none: unauthenticated); the status, `Audit-Id` and body.
async fn send(
    fixture: &Fixture,
    user: Option<UserInfo>,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, String, Value) {
    let mut request = http::Request::builder().method(method).uri(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = if body.is_null() {
        Body::empty()
    } else {
        request = request.header("content-type", "application/json");
        Body::from(body.to_string())
    };
    let mut request = request.body(body).unwrap();
    if let Some(user) = user {
        request.extensions_mut().insert(Authenticated(user));
    }
    let response = fixture.test.server.router().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get(AUDIT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        id,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn drain(fixture: &Fixture) -> Vec<Value> {
    fixture
        .lines
        .try_iter()
        .map(|line| {
            assert!(
                line.ends_with('\n') && line.matches('\n').count() == 1,
                "{line}"
            );
            serde_json::from_str(&line).unwrap()
        })
        .collect()
}

fn stages(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn request_response_writes_both_bodies_and_echoes_the_audit_id() {
    let fixture = fixture();
    let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}});
    let (status, id, _) = send(
        &fixture,
        Some(admin()),
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &[("user-agent", "kubectl/v1.33.0")],
        configmap.clone(),
    )
    .await;
    assert_eq!(status, 201);
    let events = drain(&fixture);
    assert_eq!(stages(&events), vec!["RequestReceived", "ResponseComplete"]);
    let done = &events[1];
    assert_eq!(done["auditID"], json!(id));
    assert_eq!(id.len(), 36, "a UUID: {id}");
    assert_eq!(done["level"], "RequestResponse");
    assert_eq!(done["verb"], "create");
    assert_eq!(done["userAgent"], "kubectl/v1.33.0");
    assert_eq!(
        done["objectRef"],
        json!({"resource": "configmaps", "namespace": "default", "name": "cm", "apiVersion": "v1"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(done["requestObject"], configmap);
    assert_eq!(done["responseObject"]["metadata"]["name"], "cm");
    assert!(done["responseObject"]["metadata"]["uid"].is_string());
    assert_eq!(
        done["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(
        events[0].get("requestObject").is_none(),
        "the body arrives after RequestReceived"
    );
    assert_eq!(
        done["requestReceivedTimestamp"],
        "2025-12-02T12:53:20.000000Z"
    );
}

#[tokio::test]
async fn levels_and_omitted_stages_follow_the_policy() {
    let fixture = fixture();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "managedFields": [{"manager": "x", "operation": "Update", "apiVersion": "v1"}]}});
    // (user, method, uri, body, expected stages, level, request object kept, response object kept)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Value,
        Vec<&'static str>,
        &'static str,
        bool,
        bool,
    );
    let cases: Vec<Case> = vec![
        (
            "admin",
            "POST",
            "/api/v1/namespaces/default/pods",
            pod,
            vec!["ResponseComplete"],
            "Metadata",
            false,
            false,
        ),
        (
            "admin",
            "GET",
            "/api/v1/namespaces/default/pods/p",
            Value::Null,
            vec!["ResponseComplete"],
            "Metadata",
            false,
            false,
        ),
        (
            "admin",
            "POST",
            "/api/v1/namespaces/default/secrets",
            secret,
            vec!["RequestReceived", "ResponseComplete"],
            "Request",
            true,
            false,
        ),
        (
            "admin",
            "GET",
            "/version",
            Value::Null,
            vec!["RequestReceived", "ResponseComplete"],
            "Metadata",
            false,
            false,
        ),
        (
            "quiet",
            "GET",
            "/api/v1/namespaces/default/configmaps",
            Value::Null,
            vec![],
            "",
            false,
            false,
        ),
        (
            "admin",
            "GET",
            "/api/v1/namespaces",
            Value::Null,
            vec![],
            "",
            false,
            false,
        ),
    ];
    for (who, method, uri, body, expected, level, request_kept, response_kept) in cases {
        let user = if who == "admin" {
            admin()
        } else {
            UserInfo::new(who, &["system:masters"])
        };
        send(&fixture, Some(user), method, uri, &[], body).await;
        let events = drain(&fixture);
        assert_eq!(stages(&events), expected, "{method} {uri}");
        for event in &events {
            assert_eq!(event["level"], level, "{method} {uri}");
            assert_eq!(
                event.get("requestObject").is_some(),
                request_kept && event["stage"] == "ResponseComplete",
                "{method} {uri}"
            );
            assert_eq!(
                event.get("responseObject").is_some(),
                response_kept,
                "{method} {uri}"
            );
        }
    }
    // omitManagedFields on the secrets rule.
    send(&fixture, Some(admin()), "PUT", "/api/v1/namespaces/default/secrets/s", &[], json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "managedFields": [{"manager": "x", "operation": "Update", "apiVersion": "v1"}]}})).await;
    let events = drain(&fixture);
    assert_eq!(events[1]["verb"], "update");
    assert!(
        events[1]["requestObject"]["metadata"]
            .get("managedFields")
            .is_none()
    );
}

#[tokio::test]
async fn forbidden_impersonated_and_unauthenticated_requests() {
    let fixture = fixture();
    // Forbidden: a user without bindings.
    let (status, _, _) = send(
        &fixture,
        Some(UserInfo::new("eve", &[])),
        "DELETE",
        "/api/v1/namespaces/default/configmaps/x",
        &[("audit-id", "client-chosen")],
        Value::Null,
    )
    .await;
    assert_eq!(status, 403);
    let events = drain(&fixture);
    assert_eq!(stages(&events), vec!["RequestReceived", "ResponseComplete"]);
    let done = &events[1];
    assert_eq!(done["auditID"], "client-chosen");
    assert_eq!(done["user"]["username"], "eve");
    assert_eq!(done["responseStatus"]["code"], 403);
    assert_eq!(done["responseStatus"]["reason"], "Forbidden");
    assert_eq!(done["responseStatus"]["status"], "Failure");
    assert_eq!(
        done["annotations"],
        json!({"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""})
    );
    assert!(done.get("requestObject").is_none(), "the handler never ran");
    // At RequestResponse the refusal's Status is the response body too.
    assert_eq!(done["responseObject"]["kind"], "Status");

    // Impersonation: the event's user is the authenticated one.
    let (status, _, _) = send(
        &fixture,
        Some(admin()),
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("impersonate-user", "bob"), ("impersonate-group", "devs")],
        Value::Null,
    )
    .await;
    assert_eq!(status, 403);
    let events = drain(&fixture);
    assert_eq!(events[1]["user"]["username"], "admin");
    assert_eq!(
        events[1]["impersonatedUser"],
        json!({"username": "bob", "groups": ["devs", "system:authenticated"]})
    );
    assert_eq!(events[1]["verb"], "list");

    // No credentials: one ResponseStarted event, no user.
    let (status, id, _) = send(&fixture, None, "GET", "/version", &[], Value::Null).await;
    assert_eq!(status, 401);
    let events = drain(&fixture);
    assert_eq!(stages(&events), vec!["ResponseStarted"]);
    assert_eq!(events[0]["user"], json!({}));
    assert_eq!(events[0]["auditID"], json!(id));
    assert_eq!(
        events[0]["responseStatus"],
        json!({"metadata": {}, "message": "Authentication failed, no credentials provided", "code": 401})
    );
}

#[tokio::test]
async fn watches_start_then_complete_when_the_stream_ends() {
    let fixture = fixture();
    let mut request = http::Request::builder()
        .uri("/api/v1/namespaces/default/pods?watch=true")
        .body(Body::empty())
        .unwrap();
    request.extensions_mut().insert(Authenticated(admin()));
    let response = fixture.test.server.router().oneshot(request).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let events = drain(&fixture);
    assert_eq!(stages(&events), vec!["ResponseStarted"]);
    assert_eq!(events[0]["verb"], "watch");
    assert_eq!(
        events[0]["responseStatus"],
        json!({"metadata": {}, "code": 200})
    );
    drop(response);
    let events = drain(&fixture);
    assert_eq!(stages(&events), vec!["ResponseComplete"]);
}

#[tokio::test]
async fn requests_without_an_auditor_still_get_an_audit_id() {
    let test = support::start();
    let server = &test.server;
    let mut request = http::Request::builder()
        .uri("/version")
        .body(Body::empty())
        .unwrap();
    request.extensions_mut().insert(Authenticated(admin()));
    let response = server.router().oneshot(request).await.unwrap();
    let id = response
        .headers()
        .get(AUDIT_ID_HEADER)
        .unwrap()
        .to_str()
        .unwrap();
    let parts: Vec<usize> = id.split('-').map(str::len).collect();
    assert_eq!(parts, vec![8, 4, 4, 4, 12]);
    assert_eq!(&id[14..15], "4", "version 4");
}

#[tokio::test]
async fn pod_security_annotations_reach_the_event_on_admission_and_on_refusal() {
    let fixture = fixture();
    let namespace = json!({"metadata": {"name": "locked", "labels": {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/audit": "restricted",
    }}});
    let (status, _, _) = send(
        &fixture,
        Some(admin()),
        "POST",
        "/api/v1/namespaces",
        &[],
        namespace,
    )
    .await;
    assert_eq!(status, 201);
    drain(&fixture);
    let (status, annotations) = create_pod_in_locked(&fixture, "refused", true).await;
    assert_eq!(status, 403);
    assert_eq!(
        annotations["pod-security.kubernetes.io/enforce-policy"],
        "baseline:latest"
    );
    let (status, annotations) = create_pod_in_locked(&fixture, "admitted", false).await;
    assert_eq!(status, 201);
    assert_eq!(
        annotations["pod-security.kubernetes.io/enforce-policy"],
        "baseline:latest"
    );
    let violations = annotations["pod-security.kubernetes.io/audit-violations"]
        .as_str()
        .unwrap_or_default();
    assert!(
        violations.starts_with(r#"would violate PodSecurity "restricted:latest": "#),
        "{annotations}"
    );
    assert_eq!(annotations["authorization.k8s.io/decision"], "allow");
}

/// Creates a pod in the namespace `locked` as the admin; the answer's status and the
/// annotations of the request's last audit event.
async fn create_pod_in_locked(fixture: &Fixture, name: &str, privileged: bool) -> (u16, Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "i", "securityContext": {"privileged": privileged}}
    ]}});
    let (status, _, _) = send(
        fixture,
        Some(admin()),
        "POST",
        "/api/v1/namespaces/locked/pods",
        &[],
        pod,
    )
    .await;
    let events = drain(fixture);
    (status, events.last().unwrap()["annotations"].clone())
}
