//! The node cache on loopback: caches serving the peer protocol, a test origin counting what it
//! sends and injecting faults. Eight caches pulling one blob at once, corrupt and truncated
//! origin pieces, 503 then success, 403 cached briefly, space admission and eviction, resume
//! after a crash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use tessera_cache::key::{QueryFilter, request_task_id};
use tessera_cache::pieces::Layout;
use tessera_cache::placement::seed_node;
use tessera_cache::sha256_hex;
use tessera_cache::single_flight::Backoff;
use tessera_node_cache::cache::{PieceMap, Status};
use tessera_node_cache::http::{FetchError, Http};
use tessera_node_cache::test_origin::{Fault, TestOrigin, generate};
use tessera_node_cache::{Cache, Config, PeerSpec, PullRequest, PullResponse, server};

const MIB: usize = 1 << 20;

fn config(root: &Path, name: &str) -> Config {
    let mut config = Config::new(root, name);
    config.backoff = Backoff {
        base_ms: 10,
        cap_ms: 100,
        max_retries: 5,
    };
    config.poll_interval = Duration::from_millis(20);
    config.idle_timeout = Duration::from_secs(20);
    config
}

struct Node {
    name: String,
    url: String,
    cache: Cache,
    _dir: tempfile::TempDir,
}

/// `n` caches that know each other; `tune` adjusts each one's configuration.
async fn cluster(n: usize, tune: impl Fn(&mut Config)) -> Vec<Node> {
    let mut listeners = Vec::new();
    for _ in 0..n {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listeners.push(listener);
    }
    let specs: Vec<PeerSpec> = listeners
        .iter()
        .enumerate()
        .map(|(i, l)| PeerSpec {
            name: format!("node-{i}"),
            url: format!("http://{}", l.local_addr().unwrap()),
            rack: Some(format!("rack-{}", i / 2)),
            zone: Some(format!("zone-{}", i / 4)),
        })
        .collect();
    let mut nodes = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let me = &specs[i];
        let mut config = config(dir.path(), &me.name);
        config.rack = me.rack.clone();
        config.zone = me.zone.clone();
        config.peers = specs
            .iter()
            .filter(|p| p.name != me.name)
            .cloned()
            .collect();
        tune(&mut config);
        let cache = Cache::open(config).unwrap();
        tokio::spawn(server::serve(cache.clone(), listener));
        nodes.push(Node {
            name: me.name.clone(),
            url: me.url.clone(),
            cache,
            _dir: dir,
        });
    }
    nodes
}

async fn pull(node: &Node, request: &PullRequest) -> Result<PullResponse, FetchError> {
    Http::new()
        .post_json(&format!("{}/pull", node.url), request, None)
        .await
}

/// `POST /pin` or `/unpin`; the pins left.
async fn pin(node: &Node, verb: &str, hex: &str) -> u64 {
    let answer: serde_json::Value = Http::new()
        .post_json(
            &format!("{}/{verb}", node.url),
            &serde_json::json!({ "digest": format!("sha256:{hex}") }),
            Some(Duration::from_secs(5)),
        )
        .await
        .unwrap();
    answer["pins"].as_u64().unwrap()
}

async fn status(node: &Node) -> Status {
    Http::new()
        .get_json(&format!("{}/status", node.url), Duration::from_secs(5))
        .await
        .unwrap()
}

fn request(url: &str, bytes: &[u8]) -> PullRequest {
    PullRequest {
        digest: format!("sha256:{}", sha256_hex(bytes)),
        size: bytes.len() as u64,
        url: url.to_owned(),
        model: None,
        revision: None,
        file: None,
        as_seed: false,
    }
}

fn file_sha(path: &str) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

fn blob_files(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_caches_pull_one_blob_with_one_origin_fetch() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(128 * MIB, 1);
    let base = origin.put("/models/llama/model.safetensors", bytes.clone());
    let nodes = cluster(8, |c| c.upload_rate = Some(512 << 20)).await;
    // Every node has its own presigned URL: one task all the same.
    let one = request(&base, &bytes);
    let requests: Vec<PullRequest> = (0..nodes.len())
        .map(|i| PullRequest {
            url: format!(
                "{base}?X-Amz-Date=2026120{i}T000000Z&X-Amz-Signature=sig{i}&X-Amz-Credential=k{i}"
            ),
            ..one.clone()
        })
        .collect();
    let answers = futures::future::join_all(
        nodes
            .iter()
            .zip(&requests)
            .map(|(node, request)| pull(node, request)),
    )
    .await;
    let want = one.digest.strip_prefix("sha256:").unwrap().to_owned();
    for (node, answer) in nodes.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{}: {e}", node.name));
        assert_eq!(answer.digest, one.digest);
        // Each node verified the sha256 itself; the bytes are the origin's.
        assert!(
            std::fs::read(&answer.path).unwrap() == bytes,
            "{}",
            node.name
        );
        let metadata = Path::new(&answer.path).metadata().unwrap();
        assert!(
            metadata.permissions().readonly(),
            "{} left its blob writable",
            node.name
        );
    }
    let size = bytes.len() as u64;
    assert!(
        origin.bytes_sent() * 100 <= size * 105,
        "origin sent {} bytes for a {size}-byte blob",
        origin.bytes_sent()
    );
    // Only the rendezvous seed of the normalised task read the origin.
    let layout = Layout::new(size);
    let task = request_task_id(
        &requests[0].url,
        None,
        layout.piece_length(),
        &QueryFilter::default(),
    )
    .unwrap();
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let seed = seed_node(&task, &names).unwrap().to_owned();
    let mut peer_bytes = 0;
    for node in &nodes {
        let status = status(node).await;
        assert_eq!(status.blobs.len(), 1, "{}", node.name);
        assert!(status.downloads.is_empty());
        if node.name == seed {
            assert_eq!(
                status.origin_bytes, size,
                "the seed {} read the blob once",
                node.name
            );
        } else {
            assert_eq!(
                status.origin_requests, 0,
                "{} touched the origin",
                node.name
            );
            assert_eq!(
                status.peer_bytes, size,
                "{} got every piece from peers",
                node.name
            );
        }
        peer_bytes += status.peer_bytes;
    }
    assert_eq!(peer_bytes, 7 * size);
    // The peer protocol refuses what it cannot serve.
    let http = Http::new();
    let node = &nodes[0];
    let blob_url = format!("{}/blobs/sha256/{want}", node.url);
    let outside = http
        .get_range(
            &blob_url,
            Some((size, size + 10)),
            100,
            Duration::from_secs(5),
            meter(),
        )
        .await;
    assert!(
        matches!(outside, Err(FetchError::Status { status: 416, .. })),
        "{outside:?}"
    );
    let unknown = format!("{}/blobs/sha256/{}", node.url, "0".repeat(64));
    let missing = http
        .get_range(
            &unknown,
            Some((0, 10)),
            100,
            Duration::from_secs(5),
            meter(),
        )
        .await;
    assert!(
        matches!(missing, Err(FetchError::Status { status: 404, .. })),
        "{missing:?}"
    );
    let map: PieceMap = http
        .get_json(&format!("{blob_url}/pieces"), Duration::from_secs(5))
        .await
        .unwrap();
    assert!(map.complete);
    assert_eq!(map.pieces.len() as u64, layout.count());
}

fn meter() -> tessera_node_cache::http::Meter<'static> {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    tessera_node_cache::http::Meter {
        bucket: None,
        counter: &COUNT,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_origin_piece_is_fetched_again_and_never_made_visible() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(4 * MIB, 2);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(2, |c| c.piece_length = Some(256 << 10)).await;
    origin.fault(Fault::Corrupt);
    let request = request(&url, &bytes);
    let answers = futures::future::join_all(nodes.iter().map(|n| pull(n, &request))).await;
    let want = sha256_hex(&bytes);
    for (node, answer) in nodes.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{}: {e}", node.name));
        assert_eq!(file_sha(&answer.path), want, "{}", node.name);
    }
    // The seed read every piece a second time after the whole-file check failed.
    assert!(
        origin.requests() > 16,
        "{} origin requests",
        origin.requests()
    );
    assert!(origin.bytes_sent() <= 2 * bytes.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_truncated_piece_and_503s_are_retried_with_backoff() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(2 * MIB, 3);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(1, |c| c.piece_length = Some(256 << 10)).await;
    origin.fault(Fault::Status(503));
    origin.fault(Fault::Truncate);
    origin.fault(Fault::Status(503));
    let answer = pull(&nodes[0], &request(&url, &bytes)).await.unwrap();
    assert_eq!(file_sha(&answer.path), sha256_hex(&bytes));
    // 8 pieces, and one more request per failure: no storm.
    assert_eq!(origin.requests(), 8 + 3);
    let status = status(&nodes[0]).await;
    assert_eq!(status.origin_requests, 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_origin_that_stays_down_fails_after_bounded_retries() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(MIB, 4);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(1, |c| c.piece_length = Some(256 << 10)).await;
    origin.always(Some(503));
    let error = pull(&nodes[0], &request(&url, &bytes)).await.unwrap_err();
    let FetchError::Status { status, body } = error else {
        panic!("{error:?}")
    };
    assert_eq!(status, 502);
    assert!(body.contains("unavailable after 6 attempts"), "{body}");
    // At most the retries plus the workers that were already asking.
    assert!(origin.requests() <= 6 + 4, "{} requests", origin.requests());
    assert!(blob_files(nodes[0].cache.store().root()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_403_fails_clearly_and_is_remembered_briefly() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(MIB, 5);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(2, |c| {
        c.piece_length = Some(256 << 10);
        c.error_ttl = Duration::from_secs(60);
    })
    .await;
    origin.always(Some(403));
    let presigned = format!("{url}?X-Amz-Signature=secret-signature&X-Amz-Expires=60");
    let request = request(&presigned, &bytes);
    for node in &nodes {
        let error = pull(node, &request).await.unwrap_err();
        let FetchError::Status { status, body } = error else {
            panic!("{error:?}")
        };
        assert_eq!(status, 502, "{body}");
        assert!(body.contains("answered 403"), "{body}");
        assert!(
            body.contains("AccessDenied") || body.contains("Forbidden"),
            "{body}"
        );
        assert!(
            !body.contains("secret-signature"),
            "the signature leaked: {body}"
        );
    }
    let asked = origin.requests();
    assert!((1..=4).contains(&asked), "{asked} requests");
    // Within the TTL neither node asks again.
    for node in &nodes {
        let error = pull(node, &request).await.unwrap_err();
        let FetchError::Status { body, .. } = error else {
            panic!("{error:?}")
        };
        assert!(body.contains("failed recently"), "{body}");
    }
    assert_eq!(origin.requests(), asked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_and_content_that_does_not_match_its_digest_are_refused() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(MIB, 6);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(1, |c| c.piece_length = Some(256 << 10)).await;
    let node = &nodes[0];
    let mut bad = request(&url, &bytes);
    bad.digest = "sha256:XYZ".into();
    let error = pull(node, &bad).await.unwrap_err();
    assert!(
        matches!(&error, FetchError::Status { status: 400, body } if body.starts_with("invalid digest")),
        "{error:?}"
    );
    let mut bad = request(&url, &bytes);
    bad.url = "not a url".into();
    let error = pull(node, &bad).await.unwrap_err();
    assert!(
        matches!(&error, FetchError::Status { status: 400, body } if body.starts_with("invalid url")),
        "{error:?}"
    );
    let mut huge = request(&url, &bytes);
    huge.size = u64::MAX;
    let error = pull(node, &huge).await.unwrap_err();
    assert!(
        matches!(&error, FetchError::Status { status: 400, body } if body.starts_with("invalid size")),
        "{error:?}"
    );
    // The origin's bytes hash to something else: nothing becomes visible.
    let mut wrong = request(&url, &bytes);
    wrong.digest = format!("sha256:{}", sha256_hex(b"another file"));
    let error = pull(node, &wrong).await.unwrap_err();
    let FetchError::Status { status, body } = error else {
        panic!("{error:?}")
    };
    assert_eq!(status, 502);
    assert!(
        body.contains("failed verification") && body.contains("file digest mismatch"),
        "{body}"
    );
    let root = node.cache.store().root();
    assert!(blob_files(root).is_empty());
    assert!(
        std::fs::read_dir(root.join("partial"))
            .unwrap()
            .next()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eviction_spares_pinned_blobs_and_a_download_that_cannot_fit_fails_clearly() {
    let origin = TestOrigin::start(None).await.unwrap();
    let blobs: Vec<Vec<u8>> = (0..4).map(|i| generate(300 << 10, 10 + i)).collect();
    let urls: Vec<String> = blobs
        .iter()
        .enumerate()
        .map(|(i, b)| origin.put(&format!("/b{i}"), b.clone()))
        .collect();
    let nodes = cluster(1, |c| {
        c.piece_length = Some(64 << 10);
        c.capacity = 1000 << 10; // watermarks 800 KiB / 600 KiB
        c.error_ttl = Duration::ZERO;
    })
    .await;
    let node = &nodes[0];
    let hex = |i: usize| sha256_hex(&blobs[i]);
    pull(node, &request(&urls[0], &blobs[0])).await.unwrap();
    assert_eq!(pin(node, "pin", &hex(0)).await, 1);
    pull(node, &request(&urls[1], &blobs[1])).await.unwrap();
    // 900 KiB would pass the high watermark: the least recently used unpinned blob goes.
    pull(node, &request(&urls[2], &blobs[2])).await.unwrap();
    let root = node.cache.store().root();
    let mut want = vec![hex(0), hex(2)];
    want.sort();
    assert_eq!(blob_files(root), want);
    // Pin the other one too: nothing may be evicted, and 300 + 300 + 500 KiB do not fit.
    assert_eq!(pin(node, "pin", &hex(2)).await, 1);
    let pinned: Vec<u32> = status(node).await.blobs.iter().map(|b| b.pinned).collect();
    assert_eq!(pinned, vec![1, 1]);
    let big = generate(500 << 10, 20);
    let big_url = origin.put("/big", big.clone());
    let error = pull(node, &request(&big_url, &big)).await.unwrap_err();
    let FetchError::Status { status, body } = error else {
        panic!("{error:?}")
    };
    assert_eq!(status, 507);
    assert!(body.starts_with("insufficient cache space"), "{body}");
    assert_eq!(blob_files(root), want);
    // Unpinned, the old blobs make room, least recently used first.
    assert_eq!(pin(node, "unpin", &hex(0)).await, 0);
    assert_eq!(pin(node, "unpin", &hex(2)).await, 0);
    pull(node, &request(&big_url, &big)).await.unwrap();
    assert_eq!(blob_files(root), vec![sha256_hex(&big)]);
}

#[test]
fn a_crashed_download_resumes_with_only_the_missing_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = generate(4 * MIB, 7);
    let origin_runtime = tokio::runtime::Runtime::new().unwrap();
    let origin = origin_runtime
        .block_on(TestOrigin::start(Some(4 << 20)))
        .unwrap();
    let url = origin.put("/slow", bytes.clone());
    let tune = |c: &mut Config| {
        c.piece_length = Some(128 << 10);
        c.origin_concurrency = 2;
    };
    let request = request(&url, &bytes);
    // First run: stopped mid-download, as a crash would (its runtime dropped).
    let first = tokio::runtime::Runtime::new().unwrap();
    let verified_before = first.block_on(async {
        let mut config = config(dir.path(), "solo");
        tune(&mut config);
        let cache = Cache::open(config).unwrap();
        let pulling = cache.clone();
        let request = request.clone();
        tokio::spawn(async move { pulling.pull(request).await });
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let status = cache.status();
            if let Some(d) = status.downloads.first()
                && d.bytes_verified >= bytes.len() as u64 / 3
            {
                return d.bytes_verified;
            }
        }
    });
    first.shutdown_background();
    assert!(
        blob_files(dir.path()).is_empty(),
        "a partial blob became visible"
    );
    let sent_before = origin.bytes_sent();
    // Second run on the same root: only what was missing comes from the origin.
    let second = tokio::runtime::Runtime::new().unwrap();
    let answer = second.block_on(async {
        let mut config = config(dir.path(), "solo");
        tune(&mut config);
        let cache = Cache::open(config).unwrap();
        cache.pull(request.clone()).await.unwrap()
    });
    assert_eq!(file_sha(&answer.path), sha256_hex(&bytes));
    let size = bytes.len() as u64;
    let second_run = origin.bytes_sent() - sent_before;
    let missing = size - verified_before;
    // Pieces in flight at the crash are fetched again: at most one per worker.
    assert!(
        second_run + 3 * (128 << 10) >= missing && second_run <= missing + 3 * (128 << 10),
        "second run read {second_run} bytes, {missing} were missing"
    );
    assert_eq!(blob_files(dir.path()), vec![sha256_hex(&bytes)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_seed_hands_the_origin_to_the_next_node_in_the_ranking() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(2 * MIB, 8);
    let url = origin.put("/blob", bytes.clone());
    let request = request(&url, &bytes);
    let piece_length = 256 << 10;
    let task = request_task_id(&url, None, piece_length, &QueryFilter::default()).unwrap();
    // A peer that ranks first for this task but is not running.
    let ghost = (0..1000)
        .map(|i| format!("ghost-{i}"))
        .find(|g| {
            let names = [g.clone(), "node-0".into(), "node-1".into(), "node-2".into()];
            seed_node(&task, &names) == Some(g.as_str())
        })
        .unwrap();
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ghost_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let nodes = cluster(3, |c| {
        c.piece_length = Some(piece_length);
        c.peers.push(PeerSpec {
            name: ghost.clone(),
            url: ghost_url.clone(),
            rack: None,
            zone: None,
        });
    })
    .await;
    let answers = futures::future::join_all(nodes.iter().map(|n| pull(n, &request))).await;
    for (node, answer) in nodes.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{}: {e}", node.name));
        assert_eq!(file_sha(&answer.path), sha256_hex(&bytes));
    }
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let next = seed_node(&task, &names).unwrap();
    let mut readers = Vec::new();
    for node in &nodes {
        if status(node).await.origin_requests > 0 {
            readers.push(node.name.clone());
        }
    }
    assert_eq!(readers, vec![next.to_owned()]);
    assert_eq!(origin.bytes_sent(), bytes.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_model_file_is_linked_into_the_hugging_face_view() {
    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(MIB, 9);
    let url = origin.put("/org/model/config.json", bytes.clone());
    let nodes = cluster(1, |c| c.piece_length = Some(256 << 10)).await;
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let mut request = request(&url, &bytes);
    request.model = Some("org/model".into());
    request.revision = Some(commit.into());
    request.file = Some("sub/config.json".into());
    pull(&nodes[0], &request).await.unwrap();
    let root = nodes[0].cache.store().root();
    let snapshot = root.join(format!(
        "hf/models--org--model/snapshots/{commit}/sub/config.json"
    ));
    let hex = sha256_hex(&bytes);
    assert_eq!(
        std::fs::read_link(&snapshot).unwrap(),
        Path::new(&format!("../../../blobs/{hex}"))
    );
    assert_eq!(std::fs::read(&snapshot).unwrap(), bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_bytes_from_a_peer_are_never_stored_and_the_piece_comes_from_another() {
    use axum::Json;
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::routing::get;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tessera_cache::pieces::crc32;

    let origin = TestOrigin::start(Some(8 << 20)).await.unwrap();
    let bytes = generate(4 * MIB, 11);
    let url = origin.put("/blob", bytes.clone());
    let piece_length = 256 << 10;
    let layout = Layout::with_piece_length(bytes.len() as u64, piece_length).unwrap();
    let map = PieceMap {
        digest: format!("sha256:{}", sha256_hex(&bytes)),
        size: bytes.len() as u64,
        piece_length,
        complete: true,
        pieces: layout
            .ranges()
            .map(|r| {
                let slice = &bytes[r.offset as usize..(r.offset + r.len) as usize];
                (r.index, crc32(slice))
            })
            .collect(),
    };
    // A peer that claims every piece with the right CRC32s and sends zeros.
    let asked = Arc::new(AtomicU64::new(0));
    let counter = asked.clone();
    let app = axum::Router::new()
        .route(
            "/blobs/sha256/{hex}/pieces",
            get(move || {
                let map = map.clone();
                async move { Json(map) }
            }),
        )
        .route(
            "/blobs/sha256/{hex}",
            get(move |headers: HeaderMap| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::Relaxed);
                    let range = headers[header::RANGE].to_str().unwrap().to_owned();
                    let (first, last) = range["bytes=".len()..].split_once('-').unwrap();
                    let len = last.parse::<usize>().unwrap() - first.parse::<usize>().unwrap() + 1;
                    (StatusCode::PARTIAL_CONTENT, vec![0u8; len])
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let task = request_task_id(&url, None, piece_length, &QueryFilter::default()).unwrap();
    let fake = (0..1000)
        .map(|i| format!("liar-{i}"))
        .find(|f| {
            let names = [f.clone(), "node-0".into(), "node-1".into()];
            seed_node(&task, &names) != Some(f.as_str())
        })
        .unwrap();
    let nodes = cluster(2, |c| {
        c.piece_length = Some(piece_length);
        c.peers.push(PeerSpec {
            name: fake.clone(),
            url: fake_url.clone(),
            rack: Some("rack-0".into()),
            zone: Some("zone-0".into()),
        });
    })
    .await;
    // The liar also announces every piece to the seed's tracker, so the tracker offers it.
    let announce = tessera_node_cache::tracker::Announce {
        node: fake.clone(),
        rack: Some("rack-0".into()),
        zone: Some("zone-0".into()),
        have: tessera_cache::tracker::Bitfield::of(layout.count(), 0..layout.count()).to_hex(),
        want: None,
        fetching: None,
    };
    let swarm_urls: Vec<String> = nodes
        .iter()
        .map(|n| format!("{}/blobs/sha256/{}/swarm", n.url, sha256_hex(&bytes)))
        .collect();
    let liar = tokio::spawn(async move {
        let http = tessera_node_cache::http::Http::new();
        loop {
            for url in &swarm_urls {
                let _ = http
                    .post_json::<_, serde_json::Value>(url, &announce, None)
                    .await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    let request = request(&url, &bytes);
    let answers = futures::future::join_all(nodes.iter().map(|n| pull(n, &request))).await;
    liar.abort();
    for (node, answer) in nodes.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|e| panic!("{}: {e}", node.name));
        assert!(
            std::fs::read(&answer.path).unwrap() == bytes,
            "{}",
            node.name
        );
    }
    let asked = asked.load(Ordering::Relaxed);
    assert!(asked > 0, "the lying peer was never asked");
    // Each refused piece waits out the retry delay: the liar is asked about once a piece.
    assert!(
        asked <= 2 * layout.count(),
        "the lying peer was asked {asked} times"
    );
    assert_eq!(origin.bytes_sent(), bytes.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_pulls_of_one_blob_on_one_node_are_one_download() {
    let origin = TestOrigin::start(Some(16 << 20)).await.unwrap();
    let bytes = generate(2 * MIB, 12);
    let url = origin.put("/blob", bytes.clone());
    let nodes = cluster(1, |c| c.piece_length = Some(256 << 10)).await;
    let request = request(&url, &bytes);
    let answers = futures::future::join_all((0..20).map(|_| pull(&nodes[0], &request))).await;
    let mut downloaded = 0;
    for answer in answers {
        let answer = answer.unwrap();
        assert_eq!(answer.size, bytes.len() as u64);
        downloaded += usize::from(!answer.cached);
    }
    assert!(downloaded >= 1);
    assert_eq!(origin.requests(), 8);
    assert_eq!(origin.bytes_sent(), bytes.len() as u64);
    // Once held, a pull answers from the store.
    assert!(pull(&nodes[0], &request).await.unwrap().cached);
    assert_eq!(origin.requests(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_seeds_tracker_answers_announcements_and_a_full_upload_queue_answers_503() {
    use tessera_cache::tracker::Bitfield;
    use tessera_node_cache::tracker::{Announce, Offer};

    let origin = TestOrigin::start(None).await.unwrap();
    let bytes = generate(MIB, 21);
    let url = origin.put("/blob", bytes.clone());
    let hex = sha256_hex(&bytes);
    // One slot, no queue, and a slow link: a second piece asked at once is refused.
    let nodes = cluster(1, |c| {
        c.piece_length = Some(256 << 10);
        c.upload_rate = Some(1 << 20);
        c.upload_slots = 1;
        c.upload_queue = 0;
    })
    .await;
    let swarm = format!("{}/blobs/sha256/{hex}/swarm", nodes[0].url);
    let http = Http::new();
    let announce = |node: &str, have: &[u64]| Announce {
        node: node.into(),
        rack: Some("rack-9".into()),
        zone: None,
        have: Bitfield::of(4, have.iter().copied()).to_hex(),
        want: None,
        fetching: None,
    };
    // Not held yet: 404.
    let missing = http
        .post_json::<_, Offer>(&swarm, &announce("a", &[]), None)
        .await;
    assert!(
        matches!(missing, Err(FetchError::Status { status: 404, .. })),
        "{missing:?}"
    );
    pull(&nodes[0], &request(&url, &bytes)).await.unwrap();
    // a holds piece 0; b, asking next, is offered a for it and the seed's CRCs for the rest.
    let first: Offer = http
        .post_json(&swarm, &announce("a", &[0]), None)
        .await
        .unwrap();
    assert!(first.complete);
    assert_eq!(
        first.pieces.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let second: Offer = http
        .post_json(&swarm, &announce("b", &[]), None)
        .await
        .unwrap();
    assert_eq!(second.holders.get("a"), Some(&vec![0]));
    assert_eq!(second.pieces.len(), 4);
    // Saying how many pieces it can fetch, c is handed a's piece 0, which takes a's one
    // upload place (one slot, no queue): d, asking next, is handed nothing.
    let wanting = |node: &str| {
        let mut announce = announce(node, &[]);
        announce.want = Some(4);
        announce.fetching = Some(Bitfield::new(4).to_hex());
        announce
    };
    let handed: Offer = http.post_json(&swarm, &wanting("c"), None).await.unwrap();
    assert_eq!(
        handed.holders,
        std::collections::BTreeMap::from([("a".to_owned(), vec![0])])
    );
    assert_eq!(handed.pieces.len(), 4);
    let none: Offer = http.post_json(&swarm, &wanting("d"), None).await.unwrap();
    assert!(none.holders.is_empty(), "{none:?}");
    // A malformed bitfield names the field.
    let mut bad = announce("c", &[]);
    bad.have = "zz".into();
    let refused = http.post_json::<_, Offer>(&swarm, &bad, None).await;
    match refused {
        Err(FetchError::Status { status: 400, body }) => {
            assert!(body.contains("have: bitfield"), "{body}")
        }
        other => panic!("{other:?}"),
    }
    // Two pieces at once through one slot and no queue: one is served, one refused.
    let blob = format!("{}/blobs/sha256/{hex}", nodes[0].url);
    let piece = |i: u64| {
        let http = Http::new();
        let blob = blob.clone();
        async move {
            let first = i * (256 << 10);
            http.get_range(
                &blob,
                Some((first, first + (256 << 10) - 1)),
                256 << 10,
                Duration::from_secs(10),
                meter(),
            )
            .await
            .map(|(status, _)| status)
        }
    };
    let (one, two) = tokio::join!(piece(0), piece(1));
    let mut outcomes = [one, two]
        .into_iter()
        .map(|r| match r {
            Ok(status) => status,
            Err(FetchError::Status { status, body }) => {
                assert!(body.contains("busy: every upload slot is taken"), "{body}");
                status
            }
            Err(other) => panic!("{other}"),
        })
        .collect::<Vec<_>>();
    outcomes.sort_unstable();
    assert_eq!(outcomes, [206, 503]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_seed_whose_own_blobs_would_be_evicted_declines_and_the_next_node_seeds() {
    let origin = TestOrigin::start(None).await.unwrap();
    let wanted = generate(2 * MIB, 31);
    let own = generate(2 * MIB, 32);
    let wanted_url = origin.put("/wanted", wanted.clone());
    let own_url = origin.put("/own", own.clone());
    let piece_length = 256 << 10;
    // 4 MiB caches: 2 MiB held plus 2 MiB more reaches the 80 % high watermark.
    let nodes = cluster(2, |c| {
        c.piece_length = Some(piece_length);
        c.capacity = 4 * MIB as u64;
    })
    .await;
    let task = request_task_id(&wanted_url, None, piece_length, &QueryFilter::default()).unwrap();
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let seed_name = seed_node(&task, &names).unwrap().to_owned();
    let (seed, other) = if nodes[0].name == seed_name {
        (&nodes[0], &nodes[1])
    } else {
        (&nodes[1], &nodes[0])
    };
    // The seed holds a blob of its own (read from the origin by itself).
    let mut own_request = request(&own_url, &own);
    own_request.as_seed = true;
    pull(seed, &own_request).await.unwrap();
    let before = origin.bytes_sent();
    // The other node wants a blob the seed does not: the seed declines, the other reads it.
    let answer = pull(other, &request(&wanted_url, &wanted)).await.unwrap();
    assert_eq!(file_sha(&answer.path), sha256_hex(&wanted));
    assert_eq!(origin.bytes_sent() - before, wanted.len() as u64);
    let seed_status = status(seed).await;
    let held: Vec<String> = seed_status.blobs.iter().map(|b| b.digest.clone()).collect();
    assert_eq!(held, vec![format!("sha256:{}", sha256_hex(&own))]);
    assert!(status(other).await.origin_requests > 0);
    // Declining is not remembered: the seed's own pull of that blob still works.
    let answer = pull(seed, &request(&wanted_url, &wanted)).await.unwrap();
    assert_eq!(file_sha(&answer.path), sha256_hex(&wanted));
}
