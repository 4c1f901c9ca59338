//! `tessera agent cache` as a process: killed with SIGKILL in the middle of a download from a
//! slow (rate-limited) origin and restarted on the same root, it resumes with only the missing
//! pieces, ends with the right sha256, and no partial file is ever visible under `blobs/`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tessera_cache::sha256_hex;
use tessera_node_cache::cache::Status;
use tessera_node_cache::http::Http;
use tessera_node_cache::store::PieceRecord;
use tessera_node_cache::test_origin::{TestOrigin, generate};
use tessera_node_cache::{PullRequest, PullResponse};

const PIECE: u64 = 256 << 10;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tessera agent cache` on `root`; returns it and its URL.
fn start(root: &Path, log: &Path) -> (Daemon, String) {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["agent", "cache", "--root"])
        .arg(root)
        .args(["--listen", "127.0.0.1:0", "--node", "solo"])
        .args(["--piece-length", &PIECE.to_string(), "--capacity", "1Gi"])
        .env("TESSERA_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (Daemon(child), url)
}

#[test]
fn a_killed_cache_resumes_its_download_and_never_shows_a_partial_blob() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let log = dir.path().join("cache.log");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // 8 MiB at 4 MiB/s: about two seconds a full download.
    let origin = runtime.block_on(TestOrigin::start(Some(4 << 20))).unwrap();
    let bytes = generate(8 << 20, 42);
    let size = bytes.len() as u64;
    let hex = sha256_hex(&bytes);
    let url = origin.put("/models/m/model.safetensors", bytes);
    let request = PullRequest {
        digest: format!("sha256:{hex}"),
        size,
        url: format!("{url}?X-Amz-Signature=abc&X-Amz-Date=20261203T000000Z"),
        model: None,
        revision: None,
        file: None,
        as_seed: false,
    };

    // Everything ever seen under blobs/ must be the whole blob.
    let blobs = root.join("blobs/sha256");
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (blobs, stop) = (blobs.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen: Vec<(PathBuf, u64)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(entries) = std::fs::read_dir(&blobs) {
                    for entry in entries.flatten() {
                        let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                        seen.push((entry.path(), len));
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            seen
        })
    };

    let http = Http::new();
    let (mut first, first_url) = start(&root, &log);
    let pulling = {
        let (http, request, url) = (http.clone(), request.clone(), first_url.clone());
        runtime.spawn(async move {
            http.post_json::<_, PullResponse>(&format!("{url}/pull"), &request, None)
                .await
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the first run never got a third of the way"
        );
        std::thread::sleep(Duration::from_millis(20));
        let status: Status = match runtime
            .block_on(http.get_json(&format!("{first_url}/status"), Duration::from_secs(5)))
        {
            Ok(status) => status,
            Err(_) => continue,
        };
        if status
            .downloads
            .first()
            .is_some_and(|d| d.bytes_verified >= size / 3 && d.bytes_verified < size)
        {
            break;
        }
    }
    first.0.kill().unwrap(); // SIGKILL
    first.0.wait().unwrap();
    assert!(
        runtime.block_on(pulling).unwrap().is_err(),
        "the killed cache answered"
    );
    let sent_before = origin.bytes_sent();
    assert!(sent_before < size, "the first run read everything");
    assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 0);
    let state: PieceRecord =
        serde_json::from_slice(&std::fs::read(root.join(format!("partial/{hex}.state"))).unwrap())
            .unwrap();
    assert!(
        !state.pieces.is_empty(),
        "no piece was recorded before the kill"
    );
    let recorded: u64 = state
        .pieces
        .iter()
        .map(|(i, _)| PIECE.min(size - i * PIECE))
        .sum();
    let missing = size - recorded;

    // The second run on the same root reads only what is missing.
    let (_second, second_url) = start(&root, &log);
    let answer: PullResponse = runtime
        .block_on(http.post_json(&format!("{second_url}/pull"), &request, None))
        .unwrap();
    let second_run = origin.bytes_sent() - sent_before;
    assert!(
        second_run >= missing && second_run <= missing + 4 * (64 << 10),
        "second run read {second_run} bytes from the origin; {missing} were missing"
    );
    assert_eq!(sha256_hex(&std::fs::read(&answer.path).unwrap()), hex);
    assert!(!root.join(format!("partial/{hex}")).exists());
    assert!(!root.join(format!("partial/{hex}.state")).exists());
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().unwrap();
    for (path, len) in &seen {
        assert_eq!(*len, size, "{} was visible at {len} bytes", path.display());
    }
    assert!(!seen.is_empty(), "the watcher never saw the blob");
}

#[test]
fn bad_flags_are_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, message) in [
        ("--capacity", "10GB", "unknown unit \"GB\""),
        ("--peer", "node-b", "expected NAME=URL"),
        ("--origin-rate", "fast", "is not a byte count"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["agent", "cache", "--root"])
            .arg(dir.path())
            .args(["--node", "a", "--listen", "127.0.0.1:0", flag, value])
            .output()
            .unwrap();
        assert!(!output.status.success(), "{flag} {value} was accepted");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(flag) && stderr.contains(message),
            "{flag} {value}: {stderr}"
        );
    }
}

#[test]
fn bench_models_reads_the_origin_once_for_many_nodes() {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "bench", "models", "--runs", "1", "--nodes", "4", "--size", "8Mi",
        ])
        .args([
            "--piece-length",
            "512Ki",
            "--link",
            "64Mi",
            "--origin-rate",
            "64Mi",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // One node alone, then four at once: the origin sends the model once for all four.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("| models: 4 nodes"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let ratio: f64 = line
        .split("origin bytes / model ")
        .nth(1)
        .and_then(|rest| rest.split([';', ' ']).next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(ratio <= 1.05, "{line}");
}
