use super::*;

use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn code(&self) -> String {
        let value: serde_json::Value = serde_json::from_slice(&self.body).unwrap_or_default();
        value["errors"][0]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

struct Harness {
    _dir: tempfile::TempDir,
    registry: Registry,
    http: Client<HttpConnector, Full<Bytes>>,
    auth: String,
}

impl Harness {
    async fn start() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::start(dir.path(), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        use base64::Engine;
        let credentials = registry.credentials();
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                credentials.access_key_id, credentials.secret_access_key
            ))
        );
        Harness {
            _dir: dir,
            registry,
            http: Client::builder(TokioExecutor::new()).build_http(),
            auth,
        }
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        authorized: bool,
    ) -> Answer {
        let mut request = http::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.registry.address()));
        if authorized {
            request = request.header("authorization", &self.auth);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .http
            .request(request.body(Full::new(Bytes::from(body.to_vec()))).unwrap())
            .await
            .unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        self.send(method, path, headers, body, true).await
    }

    /// Pushes a blob in one POST; its digest.
    async fn push_blob(&self, name: &str, bytes: &[u8]) -> String {
        let digest = distribution::digest_of(bytes);
        let answer = self
            .call(
                "POST",
                &format!(
                    "/v2/{name}/blobs/uploads/?digest={}",
                    digest.replace(':', "%3A")
                ),
                &[],
                bytes,
            )
            .await;
        assert_eq!(
            answer.status,
            201,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(answer.header("docker-content-digest"), digest);
        digest
    }
}

fn manifest(config: &str, config_size: usize, layer: &str, layer_size: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": distribution::OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": layer_size}],
    }))
    .unwrap()
}

#[tokio::test]
async fn images_are_pushed_pulled_and_kept_with_the_spec_errors() {
    let h = Harness::start().await;
    // Without credentials: 401 with a Basic challenge, /v2/ too.
    let anonymous = h.send("GET", "/v2/", &[], b"", false).await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.code(), "UNAUTHORIZED");
    assert_eq!(
        anonymous.header("www-authenticate"),
        "Basic realm=\"tessera-registry\""
    );
    let ping = h.call("GET", "/v2/", &[], b"").await;
    assert_eq!(ping.status, 200);
    assert_eq!(
        ping.header("docker-distribution-api-version"),
        "registry/2.0"
    );

    // A chunked upload: POST, two PATCHes (one out of order refused), PUT with the digest.
    let layer: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let started = h
        .call("POST", "/v2/team/app/blobs/uploads/", &[], b"")
        .await;
    assert_eq!(started.status, 202);
    assert_eq!(started.header("range"), "0-0");
    let location = started.header("location").to_owned();
    assert!(
        location.starts_with("/v2/team/app/blobs/uploads/"),
        "{location}"
    );
    let first = h
        .call(
            "PATCH",
            &location,
            &[("content-range", "0-59999")],
            &layer[..60_000],
        )
        .await;
    assert_eq!((first.status, first.header("range")), (202, "0-59999"));
    let gap = h
        .call(
            "PATCH",
            &location,
            &[("content-range", "70000-99999")],
            &layer[70_000..],
        )
        .await;
    assert_eq!(
        (gap.status, gap.code().as_str()),
        (416, "BLOB_UPLOAD_INVALID")
    );
    let second = h.call("PATCH", &location, &[], &layer[60_000..]).await;
    assert_eq!(second.header("range"), "0-99999");
    // An upload belongs to the repository it was started in.
    let elsewhere = location.replace("/v2/team/app/", "/v2/other/");
    let foreign = h.call("GET", &elsewhere, &[], b"").await;
    assert_eq!(
        (foreign.status, foreign.code().as_str()),
        (404, "BLOB_UPLOAD_UNKNOWN")
    );
    let progress = h.call("GET", &location, &[], b"").await;
    assert_eq!(
        (progress.status, progress.header("range")),
        (204, "0-99999")
    );
    let layer_digest = distribution::digest_of(&layer);
    let wrong = distribution::digest_of(b"other");
    let refused = h
        .call("PUT", &format!("{location}?digest={wrong}"), &[], b"")
        .await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (400, "DIGEST_INVALID")
    );
    // The refused upload is gone.
    let gone = h.call("GET", &location, &[], b"").await;
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (404, "BLOB_UPLOAD_UNKNOWN")
    );
    let restarted = h
        .call("POST", "/v2/team/app/blobs/uploads/", &[], b"")
        .await;
    let location = restarted.header("location").to_owned();
    let done = h
        .call(
            "PUT",
            &format!("{location}?digest={layer_digest}"),
            &[],
            &layer,
        )
        .await;
    assert_eq!(done.status, 201);
    assert_eq!(
        done.header("location"),
        format!("/v2/team/app/blobs/{layer_digest}")
    );
    let config = br#"{"architecture":"amd64","os":"linux"}"#;
    let config_digest = h.push_blob("team/app", config).await;

    // A manifest naming a blob the repository lacks is refused.
    let missing = manifest(&config_digest, config.len(), &wrong, 5);
    let refused = h
        .call(
            "PUT",
            "/v2/team/app/manifests/v1",
            &[("content-type", distribution::OCI_MANIFEST)],
            &missing,
        )
        .await;
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (400, "MANIFEST_BLOB_UNKNOWN")
    );
    let body = manifest(&config_digest, config.len(), &layer_digest, layer.len());
    let manifest_digest = distribution::digest_of(&body);
    let put = h
        .call(
            "PUT",
            "/v2/team/app/manifests/v1",
            &[("content-type", distribution::OCI_MANIFEST)],
            &body,
        )
        .await;
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));
    assert_eq!(put.header("docker-content-digest"), manifest_digest);

    // Pulls by tag and by digest; HEAD has the headers and no body.
    for reference in ["v1", manifest_digest.as_str()] {
        let got = h
            .call(
                "GET",
                &format!("/v2/team/app/manifests/{reference}"),
                &[],
                b"",
            )
            .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body, body);
        assert_eq!(got.header("content-type"), distribution::OCI_MANIFEST);
        assert_eq!(got.header("docker-content-digest"), manifest_digest);
    }
    let head = h.call("HEAD", "/v2/team/app/manifests/v1", &[], b"").await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), body.len().to_string());
    let blob = h
        .call(
            "GET",
            &format!("/v2/team/app/blobs/{layer_digest}"),
            &[],
            b"",
        )
        .await;
    assert_eq!((blob.status, blob.body.len()), (200, layer.len()));
    assert_eq!(blob.body, layer);

    // The spec's errors.
    for (method, path, status, code) in [
        (
            "GET",
            "/v2/team/app/manifests/v9".to_string(),
            404,
            "MANIFEST_UNKNOWN",
        ),
        (
            "GET",
            "/v2/team/nope/manifests/v1".to_string(),
            404,
            "NAME_UNKNOWN",
        ),
        (
            "GET",
            "/v2/team/nope/tags/list".to_string(),
            404,
            "NAME_UNKNOWN",
        ),
        (
            "GET",
            format!("/v2/other/blobs/{layer_digest}"),
            404,
            "BLOB_UNKNOWN",
        ),
        (
            "GET",
            "/v2/team/app/blobs/sha256:abc".to_string(),
            400,
            "DIGEST_INVALID",
        ),
        (
            "GET",
            "/v2/Team/manifests/v1".to_string(),
            400,
            "NAME_INVALID",
        ),
        (
            "DELETE",
            "/v2/team/app/manifests/v1".to_string(),
            405,
            "UNSUPPORTED",
        ),
    ] {
        let answer = h.call(method, &path, &[], b"").await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (status, code),
            "{method} {path}"
        );
    }

    // A mount from another repository, a second tag, the tag list with paging.
    let mounted = h
        .call(
            "POST",
            &format!("/v2/other/blobs/uploads/?mount={layer_digest}&from=team/app"),
            &[],
            b"",
        )
        .await;
    assert_eq!(mounted.status, 201);
    let put = h
        .call(
            "PUT",
            "/v2/team/app/manifests/v2",
            &[("content-type", distribution::OCI_MANIFEST)],
            &body,
        )
        .await;
    assert_eq!(put.status, 201);
    let tags = h.call("GET", "/v2/team/app/tags/list?n=1", &[], b"").await;
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&tags.body).unwrap(),
        serde_json::json!({"name": "team/app", "tags": ["v1"]})
    );
    assert_eq!(
        tags.header("link"),
        "</v2/team/app/tags/list?n=1&last=v1>; rel=\"next\""
    );

    // The twins' lookups read the same files, and so does a registry started again.
    let storage = h.registry.storage();
    let size = (config.len() + layer.len()) as u64;
    assert_eq!(
        storage.lookup("team/app", "v1", "linux/amd64"),
        Lookup::Found {
            digest: manifest_digest.clone(),
            size
        }
    );
    assert_eq!(
        storage.lookup("team/app", "v7", "linux/amd64"),
        Lookup::ManifestUnknown
    );
    assert_eq!(
        storage.lookup("team/none", "v1", "linux/amd64"),
        Lookup::NameUnknown
    );
    let again = Storage::open(h._dir.path()).unwrap();
    assert_eq!(
        again.lookup("team/app", &manifest_digest, "linux/amd64"),
        Lookup::Found {
            digest: manifest_digest,
            size
        }
    );
}
