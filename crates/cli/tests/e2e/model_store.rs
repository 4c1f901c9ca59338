//! The model store `tessera up` serves: published as Secret kube-system/tessera-model-store and
//! `<data-dir>/model-store.env`, filled by `tessera model push`, listed by `tessera model ls`,
//! and driven by real S3 clients — boto3 (`pip install -r requirements-test.txt`:
//! multipart, ranges, listing, errors, a presigned URL by Tessera's signer) and the AWS CLI —
//! with the ModelPack manifest's layer digests checked against the files' sha256.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::SystemTime;

use base64::Engine;
use sha2::{Digest, Sha256};
use tessera_model_store::Connection;

use crate::support::{Cluster, outcome, table_rows};

fn tessera(cluster: &Cluster, args: &[&str]) -> Output {
    cluster.tessera(args)
}

fn tessera_ok(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, stdout, stderr) = outcome(tessera(cluster, args));
    assert!(ok, "tessera {args:?} failed:\n{stderr}");
    stdout
}

fn sha256(bytes: &[u8]) -> String {
    tessera_cache::hex(&Sha256::digest(bytes))
}

/// The published connection: the env file (0600) and the Secret must agree.
fn published(cluster: &Cluster) -> Connection {
    let path = cluster.dir.path().join("model-store.env");
    let mode = std::fs::metadata(&path)
        .expect("the env file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let from_file = Connection::parse_env_file("env", &std::fs::read_to_string(&path).unwrap())
        .expect("the env file reads");
    let secret = cluster.ok(
        "1.33",
        &[
            "get",
            "secret",
            "-n",
            "kube-system",
            "tessera-model-store",
            "-o",
            "json",
        ],
    );
    let secret: serde_json::Value = serde_json::from_str(&secret).unwrap();
    let data: BTreeMap<String, String> = secret["data"]
        .as_object()
        .expect("data")
        .iter()
        .map(|(k, v)| {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap();
            (k.clone(), String::from_utf8(bytes).unwrap())
        })
        .collect();
    for key in [
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_DEFAULT_REGION",
        "BUCKET_NAME",
    ] {
        assert!(data.contains_key(key), "the Secret lacks {key}: {data:?}");
    }
    let from_secret = Connection::from_map("secret", &data).unwrap();
    assert_eq!(from_secret, from_file);
    from_file
}

fn lines_starting(text: &str, start: &str) -> usize {
    text.lines().filter(|l| l.starts_with(start)).count()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn real_s3_clients_and_tessera_model_use_the_embedded_store() {
    let mut cluster = Cluster::start();
    let connection = published(&cluster);
    assert!(
        connection.endpoint.starts_with("http://127.0.0.1:"),
        "{connection:?}"
    );
    assert_eq!(connection.bucket, "models");
    assert!(
        cluster.server_log().contains("model store listening"),
        "{}",
        cluster.server_log()
    );

    // A Hugging Face repository directory, as `huggingface-cli download --local-dir` leaves it.
    let repo = tempfile::tempdir().unwrap();
    let weights: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 253) as u8).collect();
    let files: [(&str, Vec<u8>); 4] = [
        ("config.json", br#"{"model_type":"llama"}"#.to_vec()),
        ("tokenizer.json", br#"{"version":"1.0"}"#.to_vec()),
        ("README.md", b"# tiny\n".to_vec()),
        ("model.safetensors", weights),
    ];
    for (name, bytes) in &files {
        write(repo.path(), name, bytes);
    }
    write(
        repo.path(),
        ".cache/huggingface/download/config.json.metadata",
        b"x",
    );
    let dir = repo.path().to_str().unwrap();

    let pushed = tessera_ok(&cluster, &["model", "push", dir, "--model", "acme/tiny"]);
    assert_eq!(lines_starting(&pushed, "uploaded "), 4, "{pushed}");
    assert!(pushed.contains("4 files, 4 uploaded"), "{pushed}");
    let again = tessera_ok(&cluster, &["model", "push", dir, "--model", "acme/tiny"]);
    assert_eq!(lines_starting(&again, "unchanged "), 4, "{again}");
    assert!(again.contains("0 uploaded"), "{again}");
    let (ok, _, stderr) = outcome(tessera(
        &cluster,
        &["model", "push", dir, "--model", "not-a/valid--id"],
    ));
    assert!(!ok && stderr.contains("repo id"), "{stderr}");

    // The AWS CLI lists what was pushed.
    let home = tempfile::tempdir().unwrap();
    let aws = Command::new("aws")
        .args(["s3", "ls", "s3://models/acme/tiny/main/", "--endpoint-url"])
        .arg(&connection.endpoint)
        .env("HOME", home.path())
        .env("AWS_ACCESS_KEY_ID", &connection.access_key_id)
        .env("AWS_SECRET_ACCESS_KEY", &connection.secret_access_key)
        .env("AWS_DEFAULT_REGION", &connection.region)
        .output()
        .expect("run the AWS CLI (`pip install -r requirements-test.txt`)");
    let (ok, listed, stderr) = outcome(aws);
    assert!(ok, "aws s3 ls failed:\n{stderr}");
    for (name, bytes) in &files {
        assert!(
            listed.contains(&format!("{} {name}", bytes.len())),
            "{name} missing:\n{listed}"
        );
    }

    // boto3, with a URL presigned by Tessera's signer.
    let client = tessera_model_store::client::S3Client::new(connection.clone()).unwrap();
    let presigned = client
        .presign_get("acme/tiny/main/README.md", SystemTime::now(), 600)
        .unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/python/model_store.py"
    );
    let stdout = crate::support::python(&[
        script,
        connection.endpoint.as_str(),
        connection.access_key_id.as_str(),
        connection.secret_access_key.as_str(),
        presigned.as_str(),
    ]);
    let seen: serde_json::Value = serde_json::from_slice(&stdout).expect("the script prints JSON");
    assert_eq!(
        seen["buckets"],
        serde_json::json!(["models", "scratch-bucket"]),
        "{seen}"
    );
    assert_eq!(seen["invalidBucket"], "InvalidBucketName", "{seen}");
    assert_eq!(seen["noSuchBucket"], "NoSuchBucket", "{seen}");
    assert_eq!(seen["noSuchKey"], "NoSuchKey", "{seen}");
    assert_eq!(seen["wrongSecret"], "SignatureDoesNotMatch", "{seen}");
    assert_eq!(seen["bigLength"], 20 << 20);
    assert_eq!(seen["rangeStatus"], 206);
    assert_eq!(
        seen["contentRange"],
        format!("bytes 4194304-8388607/{}", 20 << 20)
    );
    assert_eq!(seen["rangeMatches"], true);
    assert_eq!(
        seen["modelPrefixes"],
        serde_json::json!(["acme/big/", "acme/tiny/"])
    );
    assert_eq!(
        seen["tinyKeys"],
        serde_json::json!([
            "acme/tiny/main/README.md",
            "acme/tiny/main/config.json",
            "acme/tiny/main/model.safetensors",
            "acme/tiny/main/tokenizer.json"
        ])
    );
    assert_eq!(seen["presignedStatus"], 200);
    assert_eq!(seen["presignedSha256"], sha256(b"# tiny\n"));
    assert_eq!(seen["tamperedStatus"], 403);
    // The manifests' layer digests are the files' sha256 — for the multipart upload too,
    // whose ETag is not.
    let big_sha = seen["bigSha256"].as_str().unwrap().to_owned();
    assert!(!seen["bigETag"].as_str().unwrap().contains(&big_sha));
    assert_eq!(
        seen["bigLayers"]["model.safetensors"][0],
        format!("sha256:{big_sha}")
    );
    assert_eq!(
        seen["tinyArtifactType"],
        "application/vnd.cncf.model.manifest.v1+json"
    );
    for (name, bytes) in &files {
        assert_eq!(
            seen["tinyLayers"][*name][0],
            format!("sha256:{}", sha256(bytes)),
            "{name}: {seen}"
        );
    }
    assert_eq!(
        seen["tinyLayers"]["model.safetensors"][1],
        "application/vnd.cncf.model.weight.v1.raw"
    );
    assert_eq!(
        seen["tinyLayers"]["config.json"][1],
        "application/vnd.cncf.model.weight.config.v1.raw"
    );
    assert_eq!(
        seen["tinyLayers"]["README.md"][1],
        "application/vnd.cncf.model.doc.v1.raw"
    );
    assert_eq!(seen["ociAnonymousStatus"], 401);
    assert_eq!(seen["ociChallenge"], "Basic realm=\"tessera-model-store\"");
    assert_eq!(seen["blobRangeStatus"], 206);
    assert_eq!(seen["blobContentRange"], format!("bytes 0-9/{}", 20 << 20));
    assert_eq!(seen["blobRangeMatches"], true);

    // `tessera model ls`: models and revisions, then one model's files with their sha256.
    let models = tessera_ok(&cluster, &["model", "ls"]);
    let rows = table_rows(&models);
    assert_eq!(rows[0], ["MODEL", "REVISION", "FILES", "BYTES"]);
    assert_eq!(rows[1][..3], ["acme/big", "main", "1"]);
    assert_eq!(rows[2][..3], ["acme/tiny", "main", "4"]);

    // Restarted, the store keeps its credentials, objects and index; the Secret follows the
    // new port.
    cluster.stop();
    cluster.launch(&[]);
    let restarted = published(&cluster);
    assert_eq!(restarted.access_key_id, connection.access_key_id);
    assert_eq!(restarted.secret_access_key, connection.secret_access_key);
    let tiny = tessera_ok(&cluster, &["model", "ls", "acme/tiny"]);
    let rows = table_rows(&tiny);
    assert_eq!(rows[0], ["REVISION", "PATH", "BYTES", "SHA256"]);
    let mut listed: Vec<Vec<String>> = rows[1..]
        .iter()
        .map(|r| r.iter().map(|c| (*c).to_owned()).collect())
        .collect();
    listed.sort();
    let mut want: Vec<Vec<String>> = files
        .iter()
        .map(|(name, bytes)| {
            vec![
                "main".to_owned(),
                (*name).to_owned(),
                bytes.len().to_string(),
                sha256(bytes),
            ]
        })
        .collect();
    want.sort();
    assert_eq!(listed, want);
    let big = tessera_ok(&cluster, &["model", "ls", "acme/big"]);
    assert!(big.contains(&big_sha), "{big}");
}

#[test]
fn no_model_store_serves_and_publishes_nothing() {
    let cluster = Cluster::start_with_args(&["--no-model-store"]);
    assert!(!cluster.dir.path().join("model-store.env").exists());
    let stderr = cluster.fails(
        "1.33",
        &["get", "secret", "-n", "kube-system", "tessera-model-store"],
        None,
    );
    assert!(
        stderr.contains("NotFound") || stderr.contains("not found"),
        "{stderr}"
    );
    let (ok, _, stderr) = outcome(tessera(&cluster, &["model", "ls"]));
    assert!(!ok && stderr.contains("no model store found"), "{stderr}");
    let elsewhere = tempfile::tempdir().unwrap();
    let stderr = crate::support::up_refuses(
        elsewhere.path(),
        &["--no-model-store", "--model-store-listen", "127.0.0.1:0"],
    );
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn an_external_endpoint_is_published_and_used_by_the_node_caches() {
    // The first platform's embedded store is the second's external S3 endpoint.
    let origin = Cluster::start();
    let model_dir = origin.dir.path().join("ext");
    write(&model_dir, "config.json", b"{\"model_type\": \"llama\"}");
    write(&model_dir, "model.safetensors", &[3u8; 2 << 20]);
    tessera_ok(
        &origin,
        &[
            "model",
            "push",
            model_dir.to_str().unwrap(),
            "--model",
            "lab/ext",
        ],
    );
    let connection = published(&origin);

    let elsewhere = tempfile::tempdir().unwrap();
    let stderr = crate::support::up_refuses(
        elsewhere.path(),
        &["--model-store-endpoint", &connection.endpoint],
    );
    assert!(
        stderr.contains("--model-store-endpoint needs $AWS_ACCESS_KEY_ID"),
        "{stderr}"
    );

    let cluster = Cluster::start_with_env(
        &[
            "--model-store-endpoint",
            &connection.endpoint,
            "--model-store-region",
            &connection.region,
            "--model-store-bucket",
            &connection.bucket,
        ],
        &[
            ("AWS_ACCESS_KEY_ID", &connection.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", &connection.secret_access_key),
        ],
    );
    let republished = published(&cluster);
    assert_eq!(republished.endpoint, connection.endpoint);
    assert_eq!(republished.access_key_id, connection.access_key_id);
    assert_eq!(republished.bucket, connection.bucket);
    let listing = tessera_ok(&cluster, &["model", "ls"]);
    assert!(listing.contains("lab/ext"), "{listing}");
    // The second platform's twins pull from the first one's store.
    let pulled = tessera_ok(&cluster, &["model", "pull", "lab/ext", "--node", "cpu-1"]);
    assert!(
        pulled.contains("Pulled lab/ext@main onto 1 node(s) (2 files, "),
        "{pulled}"
    );
    let node = tessera_ok(&cluster, &["model", "ls", "--node", "cpu-1"]);
    assert!(node.contains("lab/ext"), "{node}");
}
