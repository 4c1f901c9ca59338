//! One coherent CLI against a running platform: every cluster command finds its cluster the
//! same way (`--kubeconfig`, `$KUBECONFIG`, the data directory's kubeconfig), errors name the
//! file they tried, `tessera kubeconfig` refuses a directory without a platform and points at
//! the server the platform listens on; a fatal XID is not healed by a later application XID,
//! and clearing is idempotent.

use std::path::Path;
use std::process::Command;

use crate::support::{Cluster, outcome};

const V: &str = "1.33";

/// `tessera ARGS` with a clean environment for cluster discovery: no `$KUBECONFIG` unless
/// `kubeconfig_env` gives one, the data directory from `TESSERA_DATA_DIR` when `data_dir`
/// gives one, and a `$HOME` without `~/.kube/config`.
fn tessera(
    args: &[&str],
    kubeconfig_env: Option<&Path>,
    data_dir: Option<&Path>,
    home: &Path,
) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("TESSERA_DATA_DIR")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("RUST_BACKTRACE")
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("share"));
    if let Some(path) = kubeconfig_env {
        command.env("KUBECONFIG", path);
    }
    if let Some(dir) = data_dir {
        command.env("TESSERA_DATA_DIR", dir);
    }
    outcome(command.output().expect("run tessera"))
}

fn annotation(cluster: &Cluster, node: &str, key: &str) -> String {
    let path = format!(
        "jsonpath={{.metadata.annotations.{}}}",
        key.replace('.', "\\.")
    );
    cluster.ok(V, &["get", "node", node, "-o", &path])
}

#[test]
fn cluster_commands_resolve_the_kubeconfig_alike_and_faults_stay_until_cleared() {
    let cluster = Cluster::start();
    let home = tempfile::tempdir().expect("home");
    let home = home.path();
    let data = cluster.dir.path();
    let missing = home.join("missing.kubeconfig");

    // The data directory's kubeconfig, from TESSERA_DATA_DIR.
    let (ok, out, err) = tessera(&["fault", "clear", "h100-1"], None, Some(data), home);
    assert!(ok, "{err}");
    assert_eq!(out, "h100-1 has no faults: nothing to clear\n");

    // $KUBECONFIG wins over the data directory, and the error names the file it tried.
    for command in [
        &["fault", "clear", "h100-1"][..],
        &["explain", "pod", "default/none"][..],
    ] {
        let (ok, _, err) = tessera(command, Some(&missing), Some(data), home);
        assert!(!ok, "{command:?} used the data directory over $KUBECONFIG");
        assert!(
            err.contains(&format!("read kubeconfig {}", missing.display()))
                && err.contains("$KUBECONFIG"),
            "{command:?}: {err}"
        );
    }
    // --kubeconfig wins over both.
    let kubeconfig = cluster.kubeconfig();
    let flag = kubeconfig.to_string_lossy().into_owned();
    let (ok, _, err) = tessera(
        &["fault", "clear", "h100-1", "--kubeconfig", &flag],
        Some(&missing),
        None,
        home,
    );
    assert!(ok, "{err}");
    // Nothing anywhere: the error names the data directory it looked in.
    let (ok, _, err) = tessera(&["fault", "clear", "h100-1"], None, None, home);
    assert!(!ok);
    assert!(
        err.contains(&format!(
            "no {}",
            home.join("share/tessera/kubeconfig").display()
        )),
        "{err}"
    );
    // A server that does not answer is named with the file it came from.
    let stale = home.join("stale.kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
    let dead = text.replace(&format!(":{}", cluster.port), ":1");
    std::fs::write(&stale, dead).expect("write");
    let (ok, _, err) = tessera(&["fault", "clear", "h100-1"], Some(&stale), None, home);
    assert!(!ok);
    assert!(
        err.contains("https://127.0.0.1:1/") && err.contains(&stale.display().to_string()),
        "{err}"
    );

    // `tessera kubeconfig`: the platform's server, or a refusal naming the directory.
    let (ok, out, err) = tessera(&["kubeconfig", "--user", "alice"], None, Some(data), home);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("server: https://127.0.0.1:{}", cluster.port)),
        "{out}"
    );
    let empty = home.join("never-started");
    let empty_arg = empty.to_string_lossy().into_owned();
    let (ok, out, err) = tessera(
        &["kubeconfig", "--user", "alice", "--data-dir", &empty_arg],
        None,
        None,
        home,
    );
    assert!(!ok && out.is_empty());
    assert!(
        err.contains(&format!(
            "no Tessera platform was started in {}",
            empty.display()
        )),
        "{err}"
    );
    assert!(!empty.exists(), "the refusal created {}", empty.display());

    // A fatal XID is not healed by a later application XID; clear is explicit and idempotent.
    let key = "fault.tessera.dev/gpu-3";
    let xid = |code: &str| {
        tessera(
            &["fault", "xid", "h100-1", "--gpu", "3", "--xid", code],
            None,
            Some(data),
            home,
        )
    };
    let (ok, out, err) = xid("79");
    assert!(ok && out.contains("the GPU is now unhealthy"), "{out}{err}");
    let (ok, out, err) = xid("13");
    assert!(ok, "{err}");
    assert_eq!(
        out,
        "XID 13 (Graphics Engine Exception) on GPU 3 of h100-1: the GPU stays unhealthy (XID 79 \
         took it down; `tessera fault clear h100-1 --gpu 3` recovers it)\n"
    );
    assert_eq!(annotation(&cluster, "h100-1", key), "xid-79");
    let taint = cluster.wait_for(
        V,
        &[
            "get",
            "resourceslices",
            "--field-selector",
            "spec.nodeName=h100-1",
            "-o",
            "jsonpath={.items[0].spec.devices[?(@.name==\"gpu-3\")].taints[0].value}",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(taint, "79");
    let clear = |extra: &[&str]| {
        let mut args = vec!["fault", "clear", "h100-1"];
        args.extend(extra);
        tessera(&args, None, Some(data), home)
    };
    let (ok, out, err) = clear(&["--gpu", "3"]);
    assert!(ok && out == "cleared 1 fault(s) on h100-1\n", "{out}{err}");
    assert_eq!(annotation(&cluster, "h100-1", key), "");
    let (ok, out, err) = clear(&["--gpu", "3"]);
    assert!(ok, "{err}");
    assert_eq!(out, "h100-1 has no gpu-3 fault: nothing to clear\n");
    let (ok, _, err) = clear(&["--gpu", "3", "--nvlink"]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
