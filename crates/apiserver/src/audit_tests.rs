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
