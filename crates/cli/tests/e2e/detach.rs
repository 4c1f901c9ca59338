//! `tessera up --detach` and `tessera down`: a background platform started and stopped by
//! data directory, refused twice, stopped idempotently.

use std::process::Command;

use crate::support::outcome;

fn tessera(args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env_remove("TESSERA_DATA_DIR")
            .env_remove("TESSERA_LISTEN")
            .output()
            .expect("run tessera"),
    )
}

#[test]
fn a_detached_platform_serves_until_down_and_down_is_idempotent() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = root.path().join("lab");
    let dir = dir.to_str().expect("utf-8 path");
    let up = [
        "up",
        "--detach",
        "--data-dir",
        dir,
        "--listen",
        "127.0.0.1:0",
    ];

    let (ok, out, err) = tessera(&up);
    assert!(ok, "{out}{err}");
    assert!(out.contains("with 8 node twins"), "{out}");
    assert!(
        out.contains(&format!("Stop it with: tessera down --data-dir {dir}")),
        "{out}"
    );
    // Ready means every node twin is registered.
    let nodes = Command::new(crate::support::kubectl_binary("1.33"))
        .args([
            "--kubeconfig",
            &format!("{dir}/kubeconfig"),
            "get",
            "nodes",
            "-o",
            "name",
        ])
        .output()
        .expect("kubectl");
    assert_eq!(String::from_utf8_lossy(&nodes.stdout).lines().count(), 8);

    let (ok, out, err) = tessera(&up);
    assert!(!ok, "a second platform on the same directory: {out}");
    assert!(
        err.contains("already running on") && err.contains("PID"),
        "{err}"
    );

    let (ok, out, err) = tessera(&["down", "--data-dir", dir]);
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("Stopped tessera (PID "), "{out}");
    assert!(
        std::path::Path::new(dir).join("state.db").exists(),
        "state is kept"
    );

    let (ok, out, err) = tessera(&["down", "--data-dir", dir]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("No tessera is running on"), "{out}");
}
