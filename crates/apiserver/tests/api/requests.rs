//! Raw requests: bad input gets a clear Status and changes nothing; discovery and OpenAPI.

use serde_json::json;

use crate::support::{raw, start};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn bad_bodies_get_status_errors_naming_the_problem() {
    let server = start();
    let json = Some("application/json");
    // (case, content type, body, code, reason, message fragment)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, u16, &'a str, &'a str);
    let table: Vec<Case> = vec![
        (
            "malformed JSON",
            json,
            b"{\"metadata\":".to_vec(),
            400,
            "BadRequest",
            "could not be decoded as JSON",
        ),
        (
            "not an object",
            json,
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
            "must be a JSON object",
        ),
        (
            "wrong kind",
            json,
            br#"{"kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
            "does not match the expected kind (ConfigMap)",
        ),
        (
            "wrong apiVersion",
            json,
            br#"{"apiVersion":"apps/v1","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
            "does not match the expected API version (v1)",
        ),
        (
            "invalid name",
            json,
            br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
            422,
            "Invalid",
            "metadata.name: Invalid value: \"Not_Valid\"",
        ),
        (
            "no name",
            json,
            br#"{"metadata":{}}"#.to_vec(),
            422,
            "Invalid",
            "name or generateName is required",
        ),
        (
            "wrong type",
            json,
            br#"{"metadata":{"name":"x"},"data":{"a":1}}"#.to_vec(),
            422,
            "Invalid",
            "data.a: Invalid value: got \"integer\", expected \"string\"",
        ),
        (
            "malformed YAML",
            Some("application/yaml"),
            b"metadata: [unclosed".to_vec(),
            400,
            "BadRequest",
            "could not be decoded as YAML",
        ),
        (
            "protobuf",
            Some("application/vnd.kubernetes.protobuf"),
            b"k8s\0".to_vec(),
            415,
            "UnsupportedMediaType",
            "application/vnd.kubernetes.protobuf",
        ),
        (
            "too large",
            json,
            vec![b' '; 3 * 1024 * 1024 + 1],
            413,
            "RequestEntityTooLarge",
            "larger than",
        ),
    ];
    for (case, content_type, body, code, reason, message) in table {
        let (status, answer, _) = raw(&server, "POST", CMS, content_type, body).await;
        assert_eq!(status, code, "{case}: {answer}");
        assert_eq!(answer["kind"], "Status", "{case}");
        assert_eq!(answer["reason"], reason, "{case}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains(message),
            "{case}: {}",
            answer["message"]
        );
    }
    let (_, list, _) = raw(&server, "GET", CMS, None, vec![]).await;
    assert_eq!(list["items"], json!([]), "nothing was stored");
}

#[tokio::test]
async fn invalid_quantities_name_the_field() {
    let server = start();
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": "1.5.5"}, "limits": {"memory": "1.5Gi"}}}]}});
    let (status, answer, _) = raw(
        &server,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        pod.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        answer["details"]["causes"][0]["field"],
        "spec.containers[0].resources.requests.cpu"
    );
    let fixed = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i",
        "resources": {"limits": {"memory": "1.5Gi"}}}]}});
    let (status, answer, _) = raw(
        &server,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        fixed.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        answer["spec"]["containers"][0]["resources"]["limits"]["memory"], "1536Mi",
        "stored canonical"
    );
}

#[tokio::test]
async fn field_validation_strict_warn_and_ignore() {
    let server = start();
    let body = |name: &str| {
        json!({"metadata": {"name": name}, "data": {}, "bogus": true})
            .to_string()
            .into_bytes()
    };
    let json = Some("application/json");
    let (status, answer, _) = raw(
        &server,
        "POST",
        &format!("{CMS}?fieldValidation=Strict"),
        json,
        body("strict"),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        answer["message"],
        "strict decoding error: unknown field \"bogus\""
    );
    let (status, answer, headers) = raw(
        &server,
        "POST",
        &format!("{CMS}?fieldValidation=Warn"),
        json,
        body("warn"),
    )
    .await;
    assert_eq!(status, 201);
    assert!(answer.get("bogus").is_none(), "unknown fields are pruned");
    assert_eq!(headers["warning"], "299 - \"unknown field \\\"bogus\\\"\"");
    let (status, _, headers) = raw(
        &server,
        "POST",
        &format!("{CMS}?fieldValidation=Ignore"),
        json,
        body("ignore"),
    )
    .await;
    assert_eq!(status, 201);
    assert!(headers.get("warning").is_none());
}

#[tokio::test]
async fn failed_updates_leave_the_stored_object_unchanged() {
    let server = start();
    let json = Some("application/json");
    let created = json!({"metadata": {"name": "keep"}, "data": {"a": "1"}});
    let (status, stored, _) =
        raw(&server, "POST", CMS, json, created.to_string().into_bytes()).await;
    assert_eq!(status, 201);
    let bad =
        json!({"metadata": {"name": "keep", "labels": {"bad key!": "x"}}, "data": {"a": "2"}});
    let (status, _, _) = raw(
        &server,
        "PUT",
        &format!("{CMS}/keep"),
        json,
        bad.to_string().into_bytes(),
    )
    .await;
    assert_eq!(status, 422);
    let (_, after, _) = raw(&server, "GET", &format!("{CMS}/keep"), None, vec![]).await;
    assert_eq!(after, stored);
}

#[tokio::test]
async fn discovery_serves_aggregated_and_legacy_forms() {
    let server = start();
    use http_body_util::BodyExt;
    let request = http::Request::builder()
        .uri("/apis")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let response = crate::support::send(&server, request).await;
    assert_eq!(
        response.headers()["content-type"],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let body: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    let (status, legacy, _) = raw(&server, "GET", "/apis", None, vec![]).await;
    assert_eq!(
        (status, legacy["kind"].as_str()),
        (200, Some("APIGroupList"))
    );
    let (_, version, _) = raw(&server, "GET", "/version", None, vec![]).await;
    assert_eq!(version["minor"], "34");
    let (status, swagger, _) = raw(&server, "GET", "/openapi/v2", None, vec![]).await;
    assert_eq!((status, swagger["swagger"].as_str()), (200, Some("2.0")));
    // kubectl 1.27–1.29 ask for the v2beta1 aggregated form first, then plain JSON: v2beta1
    // is not served (as in Kubernetes 1.34), so they get the legacy list.
    let request = http::Request::builder()
        .uri("/api")
        .header(
            "accept",
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let response = crate::support::send(&server, request).await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["kind"], "APIVersions");
    let request = http::Request::builder()
        .uri("/apis")
        .header("accept", "application/yaml")
        .body(axum::body::Body::empty())
        .unwrap();
    assert_eq!(crate::support::send(&server, request).await.status(), 406);
    let (status, answer, _) = raw(&server, "GET", "/apis/nope/v1/things", None, vec![]).await;
    assert_eq!((status, answer["reason"].as_str()), (404, Some("NotFound")));
    let (status, answer, _) = raw(&server, "POST", "/version", None, vec![]).await;
    assert_eq!(
        (status, answer["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

#[tokio::test]
async fn tables_follow_the_accept_header() {
    let server = start();
    use http_body_util::BodyExt;
    let request = http::Request::builder()
        .uri("/api/v1/namespaces")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let response = crate::support::send(&server, request).await;
    let table: serde_json::Value =
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Status", "Age"]);
    assert_eq!(table["rows"][0]["cells"][1], "Active");
}
