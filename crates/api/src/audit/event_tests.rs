//! Event construction against a fixed clock and fixed ids.

use std::time::{Duration, SystemTime};

use super::*;

const ID: &str = "6f1b2c3d-0000-4000-8000-000000000001";

fn at(micros: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_680_000) + Duration::from_micros(micros)
}

fn alice() -> UserInfo {
    UserInfo::new("alice", &["dev"])
}

fn pods(verb: &str, name: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        resource_request: true,
        resource: "pods".into(),
        namespace: "default".into(),
        name: name.into(),
        ..Attributes::default()
    }
}

#[test]
fn events_render_as_the_log_backend_writes_them() {
    let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "default", "managedFields": [{"manager": "kubectl"}]}});
    let forbidden = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "pods \"web\" is forbidden", "reason": "Forbidden", "details": {"name": "web", "kind": "pods"}, "code": 403});
    struct Case {
        name: &'static str,
        build: Box<dyn Fn() -> Event>,
        want: Value,
    }
    let cases = vec![
        Case {
            name: "metadata create: objectRef completed from the body, no bodies kept",
            build: Box::new({
                let pod = pod.clone();
                move || {
                    let mut event = Event::new(
                        Level::Metadata,
                        ID,
                        "/api/v1/namespaces/default/pods",
                        &pods("create", ""),
                        "v1",
                        Some(&alice()),
                        at(1),
                    );
                    event.source_ips = vec!["127.0.0.1".into()];
                    event.set_user_agent("kubectl/v1.33.0");
                    event.log_request_object(&pod, false);
                    event.log_response(201, Some(&pod), false);
                    event.stage = Stage::ResponseComplete;
                    event.stage_timestamp = at(2500);
                    event
                        .annotations
                        .insert("authorization.k8s.io/decision".into(), "allow".into());
                    event
                }
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": ID,
                "stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/default/pods", "verb": "create",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "sourceIPs": ["127.0.0.1"], "userAgent": "kubectl/v1.33.0",
                "objectRef": {"resource": "pods", "namespace": "default", "name": "web", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 201},
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000001Z",
                "stageTimestamp": "2025-12-02T12:53:20.002500Z",
                "annotations": {"authorization.k8s.io/decision": "allow"},
            }),
        },
        Case {
            name: "request level keeps the request body only, managed fields omitted",
            build: Box::new({
                let pod = pod.clone();
                move || {
                    let mut event = Event::new(
                        Level::Request,
                        ID,
                        "/api/v1/namespaces/default/pods",
                        &pods("create", ""),
                        "v1",
                        Some(&alice()),
                        at(0),
                    );
                    event.log_request_object(&pod, true);
                    event.log_response(201, Some(&pod), true);
                    event
                }
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "auditID": ID,
                "stage": "RequestReceived", "requestURI": "/api/v1/namespaces/default/pods", "verb": "create",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "objectRef": {"resource": "pods", "namespace": "default", "name": "web", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 201},
                "requestObject": {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "default"}},
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000000Z",
                "stageTimestamp": "2025-12-02T12:53:20.000000Z",
            }),
        },
        Case {
            name: "request-response keeps both bodies and managed fields",
            build: Box::new({
                let pod = pod.clone();
                move || {
                    let mut event = Event::new(
                        Level::RequestResponse,
                        ID,
                        "/api/v1/namespaces/default/pods/web",
                        &pods("get", "web"),
                        "v1",
                        Some(&alice()),
                        at(0),
                    );
                    event.log_response(200, Some(&pod), false);
                    event
                }
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": ID,
                "stage": "RequestReceived", "requestURI": "/api/v1/namespaces/default/pods/web", "verb": "get",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "objectRef": {"resource": "pods", "namespace": "default", "name": "web", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 200},
                "responseObject": pod,
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000000Z",
                "stageTimestamp": "2025-12-02T12:53:20.000000Z",
            }),
        },
        Case {
            name: "forbidden with impersonation: the Status's bounded fields",
            build: Box::new({
                let forbidden = forbidden.clone();
                move || {
                    let mut event = Event::new(
                        Level::Metadata,
                        ID,
                        "/api/v1/namespaces/default/pods/web",
                        &pods("delete", "web"),
                        "v1",
                        Some(&alice()),
                        at(0),
                    );
                    event.impersonated_user = Some(UserInfo::new("bob", &[]));
                    event.log_response(403, Some(&forbidden), false);
                    event
                        .annotations
                        .insert("authorization.k8s.io/decision".into(), "forbid".into());
                    event
                        .annotations
                        .insert("authorization.k8s.io/reason".into(), String::new());
                    event.stage = Stage::ResponseComplete;
                    event
                }
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": ID,
                "stage": "ResponseComplete", "requestURI": "/api/v1/namespaces/default/pods/web", "verb": "delete",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "impersonatedUser": {"username": "bob", "groups": ["system:authenticated"]},
                "objectRef": {"resource": "pods", "namespace": "default", "name": "web", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "status": "Failure", "message": "pods \"web\" is forbidden", "reason": "Forbidden", "details": {"name": "web", "kind": "pods"}, "code": 403},
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000000Z",
                "stageTimestamp": "2025-12-02T12:53:20.000000Z",
                "annotations": {"authorization.k8s.io/decision": "forbid", "authorization.k8s.io/reason": ""},
            }),
        },
        Case {
            name: "non-resource URL, no user (authentication failed), subresource-free",
            build: Box::new(|| {
                let attributes = Attributes {
                    verb: "get".into(),
                    path: "/version".into(),
                    ..Attributes::default()
                };
                let mut event = Event::new(
                    Level::Metadata,
                    ID,
                    "/version?timeout=32s",
                    &attributes,
                    "",
                    None,
                    at(0),
                );
                event.log_response(401, None, false);
                event.stage = Stage::ResponseStarted;
                event
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": ID,
                "stage": "ResponseStarted", "requestURI": "/version?timeout=32s", "verb": "get", "user": {},
                "responseStatus": {"metadata": {}, "code": 401},
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000000Z",
                "stageTimestamp": "2025-12-02T12:53:20.000000Z",
            }),
        },
        Case {
            name: "panic",
            build: Box::new(|| {
                let mut event = Event::new(
                    Level::Metadata,
                    ID,
                    "/api/v1/pods",
                    &pods("list", ""),
                    "v1",
                    Some(&alice()),
                    at(0),
                );
                event.stage = Stage::Panic;
                event.response_status = Some(panic_status("boom"));
                event
            }),
            want: json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": ID,
                "stage": "Panic", "requestURI": "/api/v1/pods", "verb": "list",
                "user": {"username": "alice", "groups": ["dev", "system:authenticated"]},
                "objectRef": {"resource": "pods", "namespace": "default", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "status": "Failure", "message": "APIServer panic'd: boom", "reason": "InternalError", "code": 500},
                "requestReceivedTimestamp": "2025-12-02T12:53:20.000000Z",
                "stageTimestamp": "2025-12-02T12:53:20.000000Z",
            }),
        },
    ];
    for case in cases {
        let event = (case.build)();
        let line = event.line();
        assert!(
            line.ends_with('\n') && !line[..line.len() - 1].contains('\n'),
            "{}",
            case.name
        );
        // Key order is part of the format: compare the text, not just the value.
        assert_eq!(line.trim_end(), case.want.to_string(), "{}", case.name);
    }
}

#[test]
fn long_user_agents_are_cut() {
    let mut event = Event::new(
        Level::Metadata,
        ID,
        "/",
        &Attributes::default(),
        "",
        None,
        at(0),
    );
    event.set_user_agent(&"x".repeat(MAX_USER_AGENT + 5));
    assert_eq!(event.user_agent.len(), MAX_USER_AGENT + TRUNCATED.len());
    assert!(event.user_agent.ends_with(TRUNCATED));
}

#[test]
fn managed_fields_leave_lists_items_too() {
    let mut list =
        json!({"kind": "PodList", "items": [{"metadata": {"name": "a", "managedFields": []}}]});
    strip_managed_fields(&mut list);
    assert_eq!(
        list,
        json!({"kind": "PodList", "items": [{"metadata": {"name": "a"}}]})
    );
}

#[test]
fn long_running_requests() {
    let cases = [
        (pods("watch", ""), true),
        (pods("get", "web"), false),
        (
            Attributes {
                subresource: "log".into(),
                ..pods("get", "web")
            },
            true,
        ),
        (
            Attributes {
                subresource: "exec".into(),
                ..pods("create", "web")
            },
            true,
        ),
        (
            Attributes {
                subresource: "status".into(),
                ..pods("get", "web")
            },
            false,
        ),
    ];
    for (attributes, expected) in cases {
        assert_eq!(
            super::super::long_running(&attributes),
            expected,
            "{attributes:?}"
        );
    }
}
