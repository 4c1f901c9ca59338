//! The embedded model store over loopback HTTP: S3 with SigV4 through the crate's client, the
//! sha256 index, presigned URLs made by `tessera_cache::sigv4`, and the ModelPack view.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};
use tessera_cache::modelpack::{self, ANNOTATION_FILEPATH, WEIGHT_RAW};
use tessera_model_store::ModelStore;
use tessera_model_store::client::S3Client;

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn sha256(bytes: &[u8]) -> String {
    tessera_cache::hex(&Sha256::digest(bytes))
}

/// Deterministic bytes of `len` (not all equal, so ranges are checked for real).
fn content(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

struct Got {
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

/// A plain HTTP request, no signature.
async fn request(method: &str, url: &str, headers: &[(&str, &str)]) -> Got {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut builder = http::Request::builder().method(method).uri(url);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let response = client
        .request(builder.body(Empty::new()).expect("a request"))
        .await
        .expect("an answer");
    let (parts, body) = response.into_parts();
    Got {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.expect("a body").to_bytes(),
    }
}

/// A request to the ModelPack view with the store's credentials as HTTP Basic.
async fn registry(store: &ModelStore, method: &str, url: &str, headers: &[(&str, &str)]) -> Got {
    use base64::Engine;
    let credentials = store.credentials();
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            credentials.access_key_id, credentials.secret_access_key
        ))
    );
    let mut all = vec![("authorization", basic.as_str())];
    all.extend_from_slice(headers);
    request(method, url, &all).await
}

fn write(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write a file");
    path
}

#[tokio::test]
async fn objects_are_indexed_by_sha256_and_served_as_a_modelpack() {
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    let client = S3Client::new(store.connection("us-east-1")).unwrap();

    let weights = content(12 << 20, 7);
    let config = br#"{"model_type":"llama"}"#.to_vec();
    let readme = b"# tiny\n".to_vec();
    let weights_path = write(files.path(), "w", &weights);
    // 12 MiB in 5 MiB parts: a three-part multipart upload.
    client
        .put_file(
            "acme/tiny/main/model.safetensors",
            &weights_path,
            &"0".repeat(64),
            5 << 20,
        )
        .await
        .unwrap();
    for (name, bytes) in [("config.json", &config), ("README.md", &readme)] {
        let path = write(files.path(), name, bytes);
        client
            .put_file(
                &format!("acme/tiny/main/{name}"),
                &path,
                &sha256(bytes),
                64 << 20,
            )
            .await
            .unwrap();
    }

    // The index holds the content's sha256, not what the client claimed or an ETag.
    let entry = store
        .index()
        .get("models", "acme/tiny/main/model.safetensors")
        .unwrap();
    assert_eq!(entry.sha256, sha256(&weights));
    assert_eq!(entry.size, weights.len() as u64);
    let head = client
        .head("acme/tiny/main/model.safetensors")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(head.size, weights.len() as u64);
    assert_eq!(head.sha256.as_deref(), Some(sha256(&weights).as_str()));
    assert_eq!(client.head("acme/tiny/main/absent").await.unwrap(), None);

    let listed = client.list("acme/tiny/").await.unwrap();
    let keys: Vec<&str> = listed.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "acme/tiny/main/README.md",
            "acme/tiny/main/config.json",
            "acme/tiny/main/model.safetensors"
        ]
    );

    // The ModelPack view.
    let base = store.endpoint();
    // Without the store's credentials, nothing: a Basic challenge, as a private registry's.
    for (path, authorization) in [
        ("/v2/", None),
        ("/v2/acme/tiny/manifests/main", None),
        (
            "/v2/acme/tiny/manifests/main",
            Some("Basic dGVzc2VyYTp3cm9uZw=="),
        ),
        ("/v2/acme/tiny/manifests/main", Some("Bearer token")),
        ("/v2/acme/tiny/manifests/main", Some("Basic %%%")),
    ] {
        let headers: Vec<(&str, &str)> = authorization
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        let refused = request("GET", &format!("{base}{path}"), &headers).await;
        assert_eq!(refused.status, 401, "{path} {authorization:?}");
        assert_eq!(
            refused.headers["www-authenticate"],
            "Basic realm=\"tessera-model-store\""
        );
        let body: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
        assert_eq!(body["errors"][0]["code"], "UNAUTHORIZED");
    }
    let ping = registry(&store, "GET", &format!("{base}/v2/"), &[]).await;
    assert_eq!(ping.status, 200);
    assert_eq!(
        ping.headers["docker-distribution-api-version"],
        "registry/2.0"
    );
    let got = registry(
        &store,
        "GET",
        &format!("{base}/v2/acme/tiny/manifests/main"),
        &[],
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["content-type"], modelpack::MANIFEST_MEDIA_TYPE);
    let manifest_digest = got.headers["docker-content-digest"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(manifest_digest, modelpack::digest(&got.body));
    let manifest: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(manifest["artifactType"], modelpack::ARTIFACT_TYPE);
    let layers: Vec<(String, String, String)> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["annotations"][ANNOTATION_FILEPATH]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                l["digest"].as_str().unwrap().to_owned(),
                l["mediaType"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(layers.len(), 3);
    assert_eq!(
        layers[2],
        (
            "model.safetensors".to_owned(),
            format!("sha256:{}", sha256(&weights)),
            WEIGHT_RAW.to_owned()
        )
    );
    assert_eq!(layers[1].1, format!("sha256:{}", sha256(&config)));
    // By digest too, as a runtime resolves a tag then pulls by digest.
    let by_digest = registry(
        &store,
        "HEAD",
        &format!("{base}/v2/acme/tiny/manifests/{manifest_digest}"),
        &[],
    )
    .await;
    assert_eq!(by_digest.status, 200);
    assert_eq!(
        by_digest.headers["docker-content-digest"],
        manifest_digest.as_str()
    );
    assert!(by_digest.body.is_empty());

    // Blobs: the config, a whole file, a range.
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let blob = registry(
        &store,
        "GET",
        &format!("{base}/v2/acme/tiny/blobs/{config_digest}"),
        &[],
    )
    .await;
    assert_eq!(blob.status, 200);
    assert_eq!(modelpack::digest(&blob.body), config_digest);
    let weights_url = format!("{base}/v2/acme/tiny/blobs/sha256:{}", sha256(&weights));
    let whole = registry(&store, "GET", &weights_url, &[]).await;
    assert_eq!(whole.status, 200);
    assert_eq!(whole.body.len(), weights.len());
    assert_eq!(sha256(&whole.body), sha256(&weights));
    let ranged = registry(
        &store,
        "GET",
        &weights_url,
        &[("range", "bytes=4194304-8388607")],
    )
    .await;
    assert_eq!(ranged.status, 206);
    assert_eq!(
        ranged.headers["content-range"],
        format!("bytes 4194304-8388607/{}", weights.len()).as_str()
    );
    assert_eq!(&ranged.body[..], &weights[4_194_304..8_388_608]);
    let past = registry(
        &store,
        "GET",
        &weights_url,
        &[("range", "bytes=999999999-")],
    )
    .await;
    assert_eq!(past.status, 416);

    for (path, status, code) in [
        ("/v2/acme/tiny/manifests/v9", 404, "MANIFEST_UNKNOWN"),
        ("/v2/acme/other/manifests/main", 404, "NAME_UNKNOWN"),
        (
            &format!("/v2/acme/tiny/blobs/sha256:{}", "f".repeat(64)),
            404,
            "BLOB_UNKNOWN",
        ),
        ("/v2/acme/tiny/blobs/sha256:xyz", 400, "DIGEST_INVALID"),
    ] {
        let got = registry(&store, "GET", &format!("{base}{path}"), &[]).await;
        assert_eq!(got.status, status, "{path}");
        let body: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
        assert_eq!(body["errors"][0]["code"], code, "{path}");
    }

    // A delete drops the file from the index and the manifest.
    client.delete("acme/tiny/main/README.md").await.unwrap();
    assert_eq!(
        store.index().get("models", "acme/tiny/main/README.md"),
        None
    );
    let got = registry(
        &store,
        "GET",
        &format!("{base}/v2/acme/tiny/manifests/main"),
        &[],
    )
    .await;
    let manifest: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 2);
    // A file put beside the store's back (or written before a crash let it be recorded) is
    // indexed at the next start.
    let extra = store.root().join("models/acme/tiny/main/extra.txt");
    std::fs::write(&extra, b"extra").unwrap();
    drop(store);
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    assert_eq!(
        store.index().list("models", "acme/tiny/").len(),
        3,
        "the index survives a restart"
    );
    assert_eq!(
        store
            .index()
            .get("models", "acme/tiny/main/extra.txt")
            .map(|e| e.sha256),
        Some(sha256(b"extra"))
    );
}

#[tokio::test]
async fn sigv4_guards_the_store_and_presigned_urls_expire() {
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    let connection = store.connection("us-east-1");
    let client = S3Client::new(connection.clone()).unwrap();
    let body = content(1000, 3);
    let path = write(files.path(), "f", &body);
    client
        .put_file("acme/m/main/f.bin", &path, &sha256(&body), 64 << 20)
        .await
        .unwrap();

    // The credentials survive a restart of the store.
    let first = store.credentials().clone();
    drop(store);
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    assert_eq!(store.credentials(), &first);
    let client = S3Client::new(store.connection("us-east-1")).unwrap();

    let wrong_secret = S3Client::new(tessera_model_store::Connection {
        secret_access_key: "not-the-secret".into(),
        ..store.connection("us-east-1")
    })
    .unwrap();
    let error = wrong_secret.list("").await.unwrap_err();
    assert_eq!(error.code(), Some("SignatureDoesNotMatch"), "{error}");
    let unknown_key = S3Client::new(tessera_model_store::Connection {
        access_key_id: "AKIAUNKNOWN".into(),
        ..store.connection("us-east-1")
    })
    .unwrap();
    let error = unknown_key.list("").await.unwrap_err();
    assert_eq!(error.code(), Some("InvalidAccessKeyId"), "{error}");
    let no_bucket = S3Client::new(tessera_model_store::Connection {
        bucket: "absent-bucket".into(),
        ..store.connection("us-east-1")
    })
    .unwrap();
    let error = no_bucket.list("").await.unwrap_err();
    assert_eq!(error.code(), Some("NoSuchBucket"), "{error}");
    let error = no_bucket
        .put_file("acme/m/main/f.bin", &path, &sha256(&body), 64 << 20)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some("NoSuchBucket"), "{error}");
    assert!(!store.root().join("absent-bucket").exists());

    // Anonymous S3 requests are refused.
    let anonymous = request(
        "GET",
        &format!("{}/models/acme/m/main/f.bin", store.endpoint()),
        &[],
    )
    .await;
    assert_eq!(anonymous.status, 403);
    assert!(String::from_utf8_lossy(&anonymous.body).contains("AccessDenied"));

    // A presigned URL by Tessera's signer: fetched with plain HTTP, refused when tampered
    // with or expired.
    let url = client
        .presign_get("acme/m/main/f.bin", SystemTime::now(), 300)
        .unwrap();
    let got = request("GET", &url, &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(&got.body[..], &body[..]);
    let ranged = request("GET", &url, &[("range", "bytes=10-19")]).await;
    assert_eq!(ranged.status, 206);
    assert_eq!(&ranged.body[..], &body[10..20]);
    let tampered = url.replace("f.bin", "g.bin");
    let got = request("GET", &tampered, &[]).await;
    assert_eq!(got.status, 403);
    assert!(String::from_utf8_lossy(&got.body).contains("SignatureDoesNotMatch"));
    let expired = client
        .presign_get(
            "acme/m/main/f.bin",
            SystemTime::now() - Duration::from_secs(3600),
            60,
        )
        .unwrap();
    let got = request("GET", &expired, &[]).await;
    assert_eq!(got.status, 403);
    let text = String::from_utf8_lossy(&got.body);
    assert!(
        text.contains("AccessDenied") && text.contains("expired"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_of_one_key_leave_the_index_matching_the_file() {
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    let connection = store.connection("us-east-1");
    let mut writers = Vec::new();
    for seed in 0..8u8 {
        let body = content(256 << 10, seed);
        let path = write(files.path(), &format!("f{seed}"), &body);
        let client = S3Client::new(connection.clone()).unwrap();
        writers.push(tokio::spawn(async move {
            client
                .put_file("acme/m/main/same.bin", &path, &sha256(&body), 64 << 20)
                .await
        }));
    }
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let on_disk = std::fs::read(store.root().join("models/acme/m/main/same.bin")).unwrap();
    let entry = store.index().get("models", "acme/m/main/same.bin").unwrap();
    assert_eq!(entry.sha256, sha256(&on_disk));
    assert_eq!(entry.size, on_disk.len() as u64);
}

/// A TLS front on loopback (a self-signed certificate for 127.0.0.1) passing every request to
/// `backend` unchanged, Host header included, so the signature made for the front checks at
/// the store behind it.
async fn tls_front(backend: SocketAddr) -> (SocketAddr, rustls::RootCertStore) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).expect("a certificate");
    let cert = certified.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("a server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind(loopback())
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(socket).await else {
                    return;
                };
                let service = hyper::service::service_fn(
                    move |request: http::Request<hyper::body::Incoming>| async move {
                        let (mut parts, body) = request.into_parts();
                        let body = body.collect().await?.to_bytes();
                        let path = parts
                            .uri
                            .path_and_query()
                            .map_or("/", |p| p.as_str())
                            .to_owned();
                        parts.uri = format!("http://{backend}{path}").parse().expect("a uri");
                        let client = Client::builder(TokioExecutor::new())
                            .build_http::<http_body_util::Full<Bytes>>();
                        let response = client
                            .request(http::Request::from_parts(
                                parts,
                                http_body_util::Full::new(body),
                            ))
                            .await
                            .expect("the store answers");
                        let (parts, body) = response.into_parts();
                        let body = body.collect().await?.to_bytes();
                        Ok::<_, hyper::Error>(http::Response::from_parts(
                            parts,
                            http_body_util::Full::new(body),
                        ))
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).expect("a root");
    (address, roots)
}

#[tokio::test]
async fn the_client_speaks_https_to_a_trusted_endpoint_only() {
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let store = ModelStore::start(data.path(), loopback()).await.unwrap();
    let (front, roots) = tls_front(store.address()).await;
    let connection = tessera_model_store::Connection {
        endpoint: format!("https://{front}"),
        ..store.connection("us-east-1")
    };
    let client = S3Client::with_roots(connection.clone(), roots).unwrap();
    let body = content(2000, 9);
    let path = write(files.path(), "f", &body);
    client
        .put_file("acme/m/main/f.bin", &path, &sha256(&body), 64 << 20)
        .await
        .unwrap();
    let listed = client.list("acme/").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, 2000);
    let head = client.head("acme/m/main/f.bin").await.unwrap().unwrap();
    assert_eq!(head.sha256, Some(sha256(&body)));
    assert!(
        client
            .presign_get("acme/m/main/f.bin", SystemTime::now(), 60)
            .unwrap()
            .starts_with(&format!("https://{front}/models/acme/m/main/f.bin?"))
    );
    // The machine's roots (if it has any) do not know the self-signed certificate.
    match S3Client::new(connection) {
        Ok(untrusting) => {
            let error = untrusting.list("acme/").await.unwrap_err().to_string();
            assert!(error.contains("GET /models"), "{error}");
        }
        Err(error) => assert!(
            error.to_string().contains("no trusted CA certificates"),
            "{error}"
        ),
    }
    let error = S3Client::new(tessera_model_store::Connection {
        endpoint: "ftp://x".into(),
        ..store.connection("us-east-1")
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("not an http:// or https://"), "{error}");
}
