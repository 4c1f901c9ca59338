//! Secrets encrypted at rest (`tessera up --encryption-provider-config`): the raw SQLite
//! file holds no plaintext Secret data, only `k8s:enc:aesgcm:v1:` values; upstream's key
//! rotation procedure with restarts and `tessera secrets rotate`, with the Secret readable
//! through kubectl 1.33 at every step; a bad configuration stops `tessera up` naming the
//! file, line and field.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{Cluster, up_refuses};

const PASSWORD: &str = "correct-horse-battery-staple";
/// `PASSWORD` in base64, as the Secret's `data` holds it.
const PASSWORD_B64: &str = "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5LXN0YXBsZQ==";
/// Two AES-256 keys.
const KEY1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const KEY2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

/// An EncryptionConfiguration for Secrets with these aesgcm keys, then identity.
fn config(keys: &[(&str, &str)]) -> String {
    let mut text = String::from(
        "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - aesgcm:
          keys:
",
    );
    for (name, secret) in keys {
        text.push_str(&format!(
            "            - name: {name}\n              secret: {secret}\n"
        ));
    }
    text.push_str("      - identity: {}\n");
    text
}

/// Writes the configuration file and returns its path.
fn write_config(cluster: &Cluster, text: &str) -> String {
    let path = cluster.dir.path().join("encryption.yaml");
    std::fs::write(&path, text).expect("write the encryption configuration");
    path.to_string_lossy().into_owned()
}

fn restart_with(cluster: &mut Cluster, keys: &[(&str, &str)]) {
    cluster.stop();
    let path = write_config(cluster, &config(keys));
    cluster.launch(&["--encryption-provider-config", &path]);
}

/// Creates a Secret holding `PASSWORD`.
fn create_secret(cluster: &Cluster, namespace: &str, name: &str) {
    let literal = format!("--from-literal=password={PASSWORD}");
    cluster.ok(
        "1.33",
        &[
            "create", "secret", "generic", name, "-n", namespace, &literal,
        ],
    );
}

fn password(cluster: &Cluster, namespace: &str) -> String {
    cluster.ok(
        "1.33",
        &[
            "get",
            "secret",
            "db",
            "-n",
            namespace,
            "-o",
            "jsonpath={.data.password}",
        ],
    )
}

/// The stored value of a key, read from the raw SQLite file (the server stopped).
fn raw_value(dir: &Path, key: &str) -> Vec<u8> {
    let connection = rusqlite::Connection::open_with_flags(
        dir.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("open state.db");
    connection
        .query_row("SELECT value FROM objects WHERE key = ?1", [key], |row| {
            row.get(0)
        })
        .expect("the stored row")
}

/// Every byte of the store's files (database, WAL, shared memory).
fn raw_files(dir: &Path) -> Vec<u8> {
    let mut bytes = Vec::new();
    for name in ["state.db", "state.db-wal"] {
        if let Ok(content) = std::fs::read(dir.join(name)) {
            bytes.extend(content);
        }
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn secrets_are_encrypted_at_rest_and_keys_rotate_with_upstreams_procedure() {
    let mut cluster = Cluster::start_with_args(&[]);
    // Start encrypting: key1 first, identity after it (the Secrets written before stay
    // readable, and stale).
    cluster.ok("1.33", &["create", "namespace", "team"]);
    create_secret(&cluster, "team", "db");
    restart_with(&mut cluster, &[("key1", KEY1)]);
    assert_eq!(password(&cluster, "team"), PASSWORD_B64);
    create_secret(&cluster, "default", "db");
    cluster.ok(
        "1.33",
        &[
            "create",
            "configmap",
            "plain",
            "--from-literal=note=visible-config",
        ],
    );
    assert_eq!(password(&cluster, "default"), PASSWORD_B64);
    cluster.stop();

    let dir = cluster.dir.path().to_path_buf();
    let stored = raw_value(&dir, "/core/secrets/default/db");
    assert!(
        stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"),
        "{:?}",
        String::from_utf8_lossy(&stored[..40.min(stored.len())])
    );
    let files = raw_files(&dir);
    assert!(contains(&files, "k8s:enc:aesgcm:v1:key1:"));
    assert!(
        contains(&files, "visible-config"),
        "ConfigMaps are not encrypted"
    );
    // The Secret from before encryption stays as it was until it is rewritten.
    assert!(raw_value(&dir, "/core/secrets/team/db").starts_with(b"{"));
    let configmap = raw_value(&dir, "/core/configmaps/default/plain");
    assert!(configmap.starts_with(b"{"), "a ConfigMap is stored as JSON");

    // Upstream's rotation: add the new key second, restart.
    let path = write_config(&cluster, &config(&[("key1", KEY1), ("key2", KEY2)]));
    cluster.launch(&["--encryption-provider-config", &path]);
    assert_eq!(password(&cluster, "default"), PASSWORD_B64);
    assert_eq!(password(&cluster, "team"), PASSWORD_B64);
    // Move it first, restart: key2 writes, key1 still reads.
    restart_with(&mut cluster, &[("key2", KEY2), ("key1", KEY1)]);
    assert_eq!(password(&cluster, "default"), PASSWORD_B64);
    // Rewrite every Secret with the first key.
    let rotate = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["secrets", "rotate", "--kubeconfig"])
        .arg(cluster.kubeconfig())
        .output()
        .expect("run tessera secrets rotate");
    let report = String::from_utf8_lossy(&rotate.stdout).into_owned();
    assert!(
        rotate.status.success(),
        "rotate failed: {}",
        String::from_utf8_lossy(&rotate.stderr)
    );
    assert!(
        report.starts_with("rewrote ") && report.contains(" secrets"),
        "{report}"
    );
    assert_eq!(password(&cluster, "default"), PASSWORD_B64);
    assert_eq!(password(&cluster, "team"), PASSWORD_B64);
    cluster.stop();
    for key in ["/core/secrets/default/db", "/core/secrets/team/db"] {
        let stored = raw_value(&dir, key);
        assert!(
            stored.starts_with(b"k8s:enc:aesgcm:v1:key2:"),
            "{key} not rewritten"
        );
    }
    let files = raw_files(&dir);
    assert!(
        !contains(&files, PASSWORD),
        "plaintext password in the store files"
    );
    assert!(
        !contains(&files, PASSWORD_B64),
        "base64 password in the store files"
    );

    // The old key alone can no longer read them: start-up stops, naming the Secret.
    let old_only = dir.join("old-only.yaml");
    std::fs::write(
        &old_only,
        config(&[("key1", KEY1)]).replace("      - identity: {}\n", ""),
    )
    .unwrap();
    let error = up_refuses(
        &dir,
        &["--encryption-provider-config", &old_only.to_string_lossy()],
    );
    assert!(error.contains("stored value of /core/secrets/"), "{error}");
    assert!(
        error.contains("no matching key was found for the provided AES transformer"),
        "{error}"
    );

    // Remove the old key, restart: every Secret still reads.
    let path = write_config(&cluster, &config(&[("key2", KEY2)]));
    cluster.launch(&["--encryption-provider-config", &path]);
    assert_eq!(password(&cluster, "default"), PASSWORD_B64);
    assert_eq!(password(&cluster, "team"), PASSWORD_B64);
}

#[test]
fn a_bad_encryption_configuration_stops_up_naming_the_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad-encryption.yaml");
    // A 5-byte AES key (line 10) and a KMS provider (line 11).
    let text = config(&[("key1", "c2hvcnQ=")]).replace(
        "      - identity: {}\n",
        "      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: unix:///run/kms.sock\n",
    );
    std::fs::write(&path, text).expect("write");
    let path = path.to_string_lossy().into_owned();
    let error = up_refuses(dir.path(), &["--encryption-provider-config", &path]);
    assert!(
        error.contains(&format!("{path}:"))
            && error.contains("line 10: resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"),
        "{error}"
    );
    assert!(
        error.contains("line 11: resources[0].providers[1].kms: Unsupported value: kms: KMS providers are not supported"),
        "{error}"
    );
    assert!(!error.contains("c2hvcnQ="), "the key is not printed");

    // `--detach` reports it where the command was typed, before going to the background.
    let detached = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["up", "--detach", "--data-dir"])
        .arg(dir.path().join("detached"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--encryption-provider-config",
            &path,
        ])
        .output()
        .expect("run tessera up --detach");
    if detached.status.success() {
        let _ = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["down", "--data-dir"])
            .arg(dir.path().join("detached"))
            .status();
        panic!("tessera up --detach started despite {path}");
    }
    let error = String::from_utf8_lossy(&detached.stderr);
    assert!(
        error.contains("line 10: resources[0].providers[0].aesgcm.keys[0].secret"),
        "{error}"
    );
}

/// Rotation while another client keeps updating the same Secrets: every rewrite is one
/// compare-and-swap update, so whichever write wins, each Secret ends stored with the new
/// key, with the writer's latest data, and readable once the old key is gone.
#[test]
fn rotation_alongside_a_concurrent_writer_loses_nothing() {
    let mut cluster = Cluster::start_with_args(&[]);
    restart_with(&mut cluster, &[("key1", KEY1)]);
    let names: Vec<String> = (0..12).map(|i| format!("s{i}")).collect();
    for name in &names {
        create_secret(&cluster, "default", name);
    }
    restart_with(&mut cluster, &[("key2", KEY2), ("key1", KEY1)]);
    let kubeconfig = cluster.kubeconfig();
    let writer = {
        let kubectl = crate::support::kubectl_binary("1.33");
        let kubeconfig = kubeconfig.clone();
        std::thread::spawn(move || {
            // Labels every Secret, three rounds: updates racing the rotation's.
            for round in 0..3 {
                for i in 0..12 {
                    let status = Command::new(&kubectl)
                        .arg("--kubeconfig")
                        .arg(&kubeconfig)
                        .args([
                            "label",
                            "secret",
                            &format!("s{i}"),
                            &format!("round={round}"),
                            "--overwrite",
                        ])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .expect("run kubectl");
                    assert!(status.success(), "label s{i}");
                }
            }
        })
    };
    let rotate = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["secrets", "rotate", "--kubeconfig"])
        .arg(&kubeconfig)
        .output()
        .expect("run tessera secrets rotate");
    assert!(
        rotate.status.success(),
        "rotate failed: {}",
        String::from_utf8_lossy(&rotate.stderr)
    );
    // Whether a conflict was met this time depends on the interleaving; the report says.
    eprintln!("{}", String::from_utf8_lossy(&rotate.stdout));
    writer.join().expect("the writer");
    cluster.stop();
    let dir = cluster.dir.path().to_path_buf();
    for name in &names {
        let stored = raw_value(&dir, &format!("/core/secrets/default/{name}"));
        assert!(
            stored.starts_with(b"k8s:enc:aesgcm:v1:key2:"),
            "{name} not rewritten"
        );
    }
    let path = write_config(&cluster, &config(&[("key2", KEY2)]));
    cluster.launch(&["--encryption-provider-config", &path]);
    for name in &names {
        let got = cluster.ok(
            "1.33",
            &[
                "get",
                "secret",
                name,
                "-o",
                "jsonpath={.data.password} {.metadata.labels.round}",
            ],
        );
        assert_eq!(got, format!("{PASSWORD_B64} 2"), "{name}");
    }
}
