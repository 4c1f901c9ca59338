//! The audit shell's own pieces: annotations and source addresses. The router-level
//! behaviour is tested in `tests/api/audit.rs`.

use std::time::SystemTime;

use super::*;

#[test]
fn annotations_keep_the_first_value() {
    let annotations = AuditAnnotations::default();
    let mut extensions = http::Extensions::new();
    extensions.insert(annotations.clone());
    annotate(
        &extensions,
        "pod-security.kubernetes.io/enforce-policy",
        "restricted:latest",
    );
    annotate(
        &extensions,
        "pod-security.kubernetes.io/enforce-policy",
        "baseline:latest",
    );
    annotate(&http::Extensions::new(), "ignored", "no audit");
    let mut event = Event::new(
        Level::Metadata,
        "id",
        "/",
        &Attributes::default(),
        "",
        None,
        SystemTime::UNIX_EPOCH,
    );
    annotations.drain_into(&mut event);
    assert_eq!(
        event.annotations.into_iter().collect::<Vec<_>>(),
        vec![(
            "pod-security.kubernetes.io/enforce-policy".to_string(),
            "restricted:latest".to_string()
        )]
    );
}

#[test]
fn source_ips_follow_upstream_order() {
    let mut headers = HeaderMap::new();
    headers.insert(
        "x-forwarded-for",
        HeaderValue::from_static("10.0.0.1, bogus, 10.0.0.2"),
    );
    headers.insert("x-real-ip", HeaderValue::from_static("10.0.0.2"));
    let remote = Some(RemoteAddr("127.0.0.1".parse().unwrap()));
    assert_eq!(
        source_ips(&headers, remote),
        vec!["10.0.0.1", "10.0.0.2", "127.0.0.1"]
    );
    // The connection's address is not repeated when it is the last one listed.
    let remote = Some(RemoteAddr("10.0.0.2".parse().unwrap()));
    assert_eq!(source_ips(&headers, remote), vec!["10.0.0.1", "10.0.0.2"]);
    assert!(source_ips(&HeaderMap::new(), None).is_empty());
}

#[tokio::test]
async fn a_panicking_handler_writes_the_panic_stage_and_still_panics() {
    let policy = tessera_api::audit::parse_policy(
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n",
    )
    .unwrap()
    .policy;
    let (sink, lines) = crate::audit_log::AuditSink::channel(10);
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_764_680_000);
    let auditor = Arc::new(Auditor::new(policy, sink, tessera_model::clock::fixed(at)));
    let request = http::Request::builder()
        .uri("/api/v1/namespaces/default/pods")
        .header(AUDIT_ID_HEADER, "panic-id")
        .body(Body::empty())
        .unwrap();
    let outcome = AssertUnwindSafe(audited(Some(auditor), request, |request| async move {
        let audit = RequestAudit::of(request.extensions()).unwrap();
        audit
            .authenticated(Some(&UserInfo::new("alice", &[])))
            .unwrap();
        panic!("boom");
    }))
    .catch_unwind()
    .await;
    assert!(outcome.is_err(), "the panic goes on");
    let events: Vec<serde_json::Value> = lines
        .try_iter()
        .map(|line| serde_json::from_str(&line).unwrap())
        .collect();
    let stages: Vec<&str> = events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, vec!["RequestReceived", "Panic"]);
    assert_eq!(events[1]["auditID"], "panic-id");
    assert_eq!(events[1]["verb"], "list");
    assert_eq!(
        events[1]["responseStatus"],
        serde_json::json!({"metadata": {}, "status": "Failure", "message": "APIServer panic'd: boom", "reason": "InternalError", "code": 500})
    );
}
