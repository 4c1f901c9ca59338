//! Restarts and crashes of the server process lose nothing that was acknowledged.

use std::time::Duration;

use crate::support::Cluster;

/// The data directory holds the cluster's keys and every stored object: keys, the admin
/// kubeconfig and the store are the owner's alone, and a second server on the same directory
/// is refused, naming the first one's PID, without touching what the first one wrote.
#[test]
fn the_data_directory_is_private_and_held_by_one_server() {
    use std::os::unix::fs::PermissionsExt;
    let mut cluster = Cluster::start();
    let dir = cluster.dir.path().to_path_buf();
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("pki")), 0o700);
    for private in [
        "kubeconfig",
        "state.db",
        "tessera.lock",
        "pki/ca.key",
        "pki/token.key",
        "pki/server.key",
        "pki/admin.key",
    ] {
        assert_eq!(mode(&dir.join(private)), 0o600, "{private}");
    }

    let kubeconfig = std::fs::read_to_string(cluster.kubeconfig()).expect("kubeconfig");
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run a second tessera up");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = second.try_wait().expect("wait for the second server") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            second.kill().ok();
            panic!("a second server started on a held data directory");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = second.wait_with_output().expect("its output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "a second server started: {stderr}");
    let pid = cluster.pid().expect("the first server's pid");
    assert!(
        stderr.contains(&format!("is in use by another tessera (PID {pid})")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(cluster.kubeconfig()).expect("kubeconfig"),
        kubeconfig,
        "the refused server rewrote the kubeconfig"
    );
    cluster.ok("1.33", &["get", "nodes"]);

    // Once the first server is gone, the directory can be taken again.
    cluster.stop();
    cluster.launch(&[]);
    cluster.ok("1.33", &["get", "namespaces"]);
}

/// A node's conditions are refreshed from the stored node, as the kubelet does: a restart of
/// its kubelet moves `lastHeartbeatTime` but keeps the `lastTransitionTime` of every condition
/// whose status did not change.
#[test]
fn node_conditions_keep_their_transition_time_across_a_restart() {
    let mut cluster = Cluster::start();
    let times = |cluster: &Cluster| {
        cluster.ok(
            "1.33",
            &[
                "get",
                "node",
                "h100-1",
                "-o",
                "jsonpath={range .status.conditions[*]}{.type}={.lastTransitionTime}/{.lastHeartbeatTime} {end}",
            ],
        )
    };
    let before = times(&cluster);
    assert!(before.contains("Ready="), "{before}");
    // Timestamps have second precision: let a second pass so a reset would show.
    std::thread::sleep(Duration::from_millis(1100));
    cluster.stop();
    cluster.launch(&[]);
    // The restarted kubelet posts its first status a moment after the API answers.
    let mut after = times(&cluster);
    for _ in 0..60 {
        if after != before {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
        after = times(&cluster);
    }
    let transitions = |text: &str| -> Vec<String> {
        text.split_whitespace()
            .map(|entry| entry.split('/').next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        transitions(&after),
        transitions(&before),
        "{before} → {after}"
    );
    assert_ne!(
        after, before,
        "the heartbeat times should have moved: {after}"
    );
}

#[test]
fn restart_finds_every_object_and_keeps_running_pods() {
    let mut cluster = Cluster::start();
    let v = "1.33";
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n",
    );
    for i in 0..5 {
        cluster.ok_stdin(
            v,
            &["apply", "-n", "team-a", "-f", "-"],
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\ndata: {{i: \"{i}\"}}\n"),
        );
    }
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: server}\nspec:\n  nodeName: cpu-2\n  containers: [{name: app, image: app:1}]\n",
    );
    cluster.wait_for(v, &["get", "pod", "server"], |out| out.contains("Running"));
    let before = cluster.ok(v, &["get", "configmaps,pods,namespaces", "-A", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\" \"}{.metadata.resourceVersion}{\"\\n\"}{end}"]);
    let pod_ip = cluster.ok(
        v,
        &["get", "pod", "server", "-o", "jsonpath={.status.podIP}"],
    );

    let status = cluster.stop();
    assert!(status.success(), "clean shutdown on SIGTERM: {status}");
    cluster.launch(&[]);

    let after = cluster.ok(v, &["get", "configmaps,pods,namespaces", "-A", "-o", "jsonpath={range .items[*]}{.metadata.uid}{\" \"}{.metadata.resourceVersion}{\"\\n\"}{end}"]);
    let mut before_lines: Vec<&str> = before.lines().collect();
    let mut after_lines: Vec<&str> = after.lines().collect();
    before_lines.sort();
    after_lines.sort();
    // The pod may have been touched by its node twin again; everything else is identical.
    let pod_uid = cluster.ok(
        v,
        &["get", "pod", "server", "-o", "jsonpath={.metadata.uid}"],
    );
    before_lines.retain(|l| !l.starts_with(&pod_uid));
    after_lines.retain(|l| !l.starts_with(&pod_uid));
    assert_eq!(before_lines, after_lines);
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "configmap",
                "cm-3",
                "-n",
                "team-a",
                "-o",
                "jsonpath={.data.i}"
            ]
        ),
        "3"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "server", "-o", "jsonpath={.status.phase}"]
        ),
        "Running"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "server", "-o", "jsonpath={.status.podIP}"]
        ),
        pod_ip
    );
    assert!(
        cluster
            .ok(v, &["logs", "server"])
            .contains("container app started")
    );

    // --reset starts from an empty store.
    cluster.stop();
    cluster.launch(&["--reset"]);
    let error = cluster.fails(v, &["get", "namespace", "team-a"], None);
    assert!(error.contains("NotFound"), "{error}");
}

/// The crash drill (issue 14): 20 cycles of four concurrent writers through the HTTPS API, a
/// `kill -9` at a seeded random moment, and a restart. After each restart every acknowledged
/// create and update is there with its content, and the store opens every time.
#[test]
fn the_crash_drill_loses_no_acknowledged_write_in_twenty_kills() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "bench",
            "crash-drill",
            "--cycles",
            "20",
            "--writers",
            "4",
            "--runs",
            "1",
        ])
        .env("TESSERA_LOG", "off")
        .output()
        .expect("run the crash drill");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A lost or changed write fails the command, naming the objects.
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let row = stdout
        .lines()
        .find(|l| l.starts_with("| crash drill: 20 cycles of 4 writers"))
        .unwrap_or_else(|| panic!("no drill row in\n{stdout}"));
    let figure = |label: &str| -> f64 {
        let rest = &row[row
            .find(label)
            .unwrap_or_else(|| panic!("{label} in {row}"))
            + label.len()..];
        rest.split_whitespace()
            .next()
            .and_then(|n| n.trim_end_matches(';').parse().ok())
            .unwrap_or_else(|| panic!("{label} in {row}"))
    };
    assert_eq!(figure("lost or changed"), 0.0, "{row}");
    // Writes were acknowledged in the cycles, and every acknowledged object was checked after
    // the restarts (creates accumulate, so the checks outnumber the objects).
    let acknowledged = figure("acknowledged writes");
    assert!(acknowledged >= 40.0, "{row}");
    assert!(
        figure("acknowledged objects checked") >= acknowledged / 2.0,
        "{row}"
    );
}
