//! A server over a temporary store, and a kube-rs client for it.

use std::time::Duration;

use serde_json::json;
use tessera_api::Resource;
use tessera_api::authn::UserInfo;
use tessera_api::write::WriteOptions;
use tessera_apiserver::authn::{Authenticated, IdentityLayer};
use tessera_apiserver::{ApiServer, Objects, ServerConfig};
use tessera_store::{Store, StoreOptions};

pub struct TestServer {
    pub _dir: tempfile::TempDir,
    pub server: std::sync::Arc<ApiServer>,
    pub client: kube::Client,
}

pub fn start() -> TestServer {
    start_with_history(10_000)
}

pub fn start_with_history(history: usize) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        &dir.path().join("state.db"),
        StoreOptions {
            history,
            fsync: false,
        },
    )
    .expect("store");
    let objects = Objects::new(store);
    let namespaces = Resource::find("", "v1", "namespaces").expect("namespaces");
    for name in ["default", "kube-system", "kube-node-lease"] {
        objects
            .create(
                namespaces,
                None,
                json!({"metadata": {"name": name}}),
                &WriteOptions::default(),
            )
            .expect("namespace");
    }
    let server = ApiServer::new(
        objects.clone(),
        ServerConfig {
            log_dir: dir.path().join("logs"),
            bookmark_interval: Duration::from_millis(200),
            token_secret: b"test-secret".to_vec(),
            static_tokens: Default::default(),
            advertise_address: "127.0.0.1:6443".into(),
        },
    );
    tokio::spawn(tessera_apiserver::gc::Collector::new(objects).run());
    let client = client_as(&server, admin());
    TestServer {
        _dir: dir,
        server,
        client,
    }
}

/// The identity tests act as unless they say otherwise.
pub fn admin() -> UserInfo {
    UserInfo::new("test-admin", &["system:masters"])
}

/// An in-process kube-rs client acting as a user.
pub fn client_as(server: &std::sync::Arc<ApiServer>, user: UserInfo) -> kube::Client {
    let service = tower::ServiceBuilder::new()
        .layer(IdentityLayer::new(user))
        .service(server.router());
    kube::Client::new(service, "default")
}

/// Sends a request to the router as the test admin.
pub async fn send(
    server: &TestServer,
    mut request: http::Request<axum::body::Body>,
) -> http::Response<axum::body::Body> {
    use tower::ServiceExt;
    request.extensions_mut().insert(Authenticated(admin()));
    server
        .server
        .router()
        .oneshot(request)
        .await
        .expect("infallible")
}

/// Sends a raw request to the router and returns (status, body as JSON or text).
pub async fn raw(
    server: &TestServer,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, serde_json::Value, http::HeaderMap) {
    use http_body_util::BodyExt;
    let mut request = http::Request::builder().method(method).uri(uri);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let request = request.body(axum::body::Body::from(body)).expect("request");
    let response = send(server, request).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
    });
    (status, value, headers)
}

/// POSTs `body` as JSON and returns (status, answer).
pub async fn post_json(
    server: &TestServer,
    uri: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let (code, answer, _) = raw(
        server,
        "POST",
        uri,
        Some("application/json"),
        body.to_string().into_bytes(),
    )
    .await;
    (code, answer)
}

/// Polls until a condition holds or a deadline passes.
pub async fn eventually<F: FnMut() -> Fut, Fut: std::future::Future<Output = bool>>(
    mut check: F,
) -> bool {
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}
