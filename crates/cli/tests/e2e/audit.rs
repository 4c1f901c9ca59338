//! Audit logging as kube-apiserver does it (`--audit-policy-file`, `--audit-log-path`):
//! kubectl 1.33 and the official Python client run requests, and the log's JSON lines say
//! who did what at the level the policy chose, with omitted stages left out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Cluster, up_refuses};

const POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages:
  - RequestReceived
rules:
  - level: None
    userGroups: [\"system:nodes\"]
  - level: None
    verbs: [\"get\"]
    resources:
      - group: \"\"
        resources: [\"events\"]
  - level: RequestResponse
    resources:
      - group: \"\"
        resources: [\"configmaps\"]
  - level: Metadata
    resources:
      - group: \"\"
        resources: [\"pods\", \"pods/log\", \"pods/exec\", \"pods/status\"]
";

/// A platform auditing into `<dir>/audit/audit.log` under `policy`.
fn audited_cluster(policy: &str) -> (Cluster, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy_path = dir.path().join("policy.yaml");
    std::fs::write(&policy_path, policy).expect("write policy");
    let log = dir.path().join("audit/audit.log");
    let cluster = Cluster::start_with_args(&[
        "--audit-policy-file",
        &policy_path.to_string_lossy(),
        "--audit-log-path",
        &log.to_string_lossy(),
        "--audit-log-maxsize",
        "1",
    ]);
    (cluster, dir, log)
}

/// Every line of the log, each parsed (a line that is not JSON fails the test).
fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// Waits until the log holds an event `matches` accepts (the writer runs behind requests).
fn event_where(log: &Path, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(event) = events(log).into_iter().find(|e| matches(e)) {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "no audit event for {what} in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A kubeconfig for the node identity `system:node:lab-node` (group `system:nodes`).
fn node_kubeconfig(cluster: &Cluster) -> PathBuf {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["kubeconfig", "--data-dir"])
        .arg(cluster.dir.path())
        .args(["--user", "system:node:lab-node", "--group", "system:nodes"])
        .output()
        .expect("tessera kubeconfig");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = cluster.dir.path().join("node.kubeconfig");
    std::fs::write(&path, &output.stdout).expect("write kubeconfig");
    path
}

fn is(event: &Value, verb: &str, resource: &str, name: &str) -> bool {
    event["verb"] == verb
        && event["objectRef"]["resource"] == resource
        && (name.is_empty() || event["objectRef"]["name"] == name)
        && event["stage"] == "ResponseComplete"
}

#[test]
fn kubectl_requests_are_audited_as_the_policy_says() {
    let (cluster, _dir, log) = audited_cluster(POLICY);
    cluster.ok(
        "1.33",
        &["create", "configmap", "audited", "--from-literal=k=v"],
    );
    cluster.ok(
        "1.33",
        &[
            "run",
            "web",
            "--image=nginx",
            "--annotations=sim.tessera.dev/duration=1h",
        ],
    );
    cluster.ok("1.33", &["get", "pod", "web"]);
    cluster.ok("1.33", &["delete", "configmap", "audited"]);
    let denied = cluster.fails("1.33", &["get", "secrets", "--as=eve"], None);
    assert!(denied.contains("forbidden"), "{denied}");
    // A node's requests (group system:nodes) and gets of events match `None` rules.
    let node = node_kubeconfig(&cluster);
    let (served, _, stderr) = crate::support::outcome(
        Command::new(crate::support::kubectl_binary("1.33"))
            .args(["get", "pods", "-A"])
            .env("KUBECONFIG", &node)
            .env("HOME", cluster.dir.path().join("home-node"))
            .output()
            .expect("kubectl as a node"),
    );
    assert!(
        served || stderr.contains("forbidden"),
        "the node's request reached the server: {stderr}"
    );
    cluster.ok(
        "1.33",
        &["get", "events", "no-such-event", "--ignore-not-found"],
    );
    // The Audit-Id response header kubectl logs at -v=8 is the event's auditID; this request
    // comes after the node's, so its event being written means the node's would be too.
    let verbose = cluster.kubectl("1.33", &["get", "configmaps", "-v=8"]);
    let stderr = String::from_utf8_lossy(&verbose.stderr).into_owned();
    let audit_id = stderr
        .split("Audit-Id:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|id| {
            id.trim_matches(|c: char| !c.is_ascii_hexdigit() && c != '-')
                .to_string()
        })
        .unwrap_or_else(|| panic!("no Audit-Id header in kubectl's log:\n{stderr}"));
    assert_eq!(audit_id.len(), 36, "{audit_id}");

    // A RequestResponse create: both bodies.
    let created = event_where(&log, "create configmap", |e| {
        is(e, "create", "configmaps", "audited")
    });
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(created["level"], "RequestResponse");
    assert_eq!(created["objectRef"]["namespace"], "default");
    assert_eq!(created["objectRef"]["apiVersion"], "v1");
    assert_eq!(created["responseStatus"]["code"], 201);
    assert_eq!(created["requestObject"]["data"]["k"], "v");
    assert_eq!(created["responseObject"]["metadata"]["name"], "audited");
    assert!(
        created["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("kubectl")),
        "{created}"
    );
    assert!(created["sourceIPs"][0] == "127.0.0.1", "{created}");
    assert_eq!(
        created["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    let user = created["user"]["username"]
        .as_str()
        .expect("a user")
        .to_string();
    assert!(
        created["requestReceivedTimestamp"]
            .as_str()
            .is_some_and(|t| t.len() == 27 && t.ends_with('Z')),
        "{created}"
    );

    // A Metadata create: no bodies.
    let pod = event_where(&log, "create pod", |e| is(e, "create", "pods", "web"));
    assert_eq!(pod["level"], "Metadata");
    assert_eq!(pod["responseStatus"]["code"], 201);
    assert!(
        pod.get("requestObject").is_none() && pod.get("responseObject").is_none(),
        "{pod}"
    );
    let got = event_where(&log, "get pod", |e| is(e, "get", "pods", "web"));
    assert_eq!(got["responseStatus"]["code"], 200);
    let deleted = event_where(&log, "delete configmap", |e| {
        is(e, "delete", "configmaps", "audited")
    });
    assert_eq!(deleted["responseStatus"]["code"], 200);

    // The forbidden secrets request matches no rule: level None, not logged.
    assert!(
        events(&log)
            .iter()
            .all(|e| e["objectRef"]["resource"] != "secrets"),
        "secrets match no rule: not audited"
    );
    let denied = cluster.fails(
        "1.33",
        &["get", "configmaps", "--as=eve", "--as-group=devs"],
        None,
    );
    assert!(denied.contains("forbidden"), "{denied}");
    let forbidden = event_where(&log, "forbidden list", |e| {
        e["verb"] == "list" && e["impersonatedUser"]["username"] == "eve"
    });
    assert_eq!(forbidden["user"]["username"], user.as_str());
    assert_eq!(forbidden["impersonatedUser"]["groups"][0], "devs");
    assert_eq!(forbidden["responseStatus"]["code"], 403);
    assert_eq!(forbidden["responseStatus"]["reason"], "Forbidden");
    assert_eq!(
        forbidden["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert!(forbidden.get("requestObject").is_none());

    let listed = event_where(&log, "the -v=8 list", |e| e["auditID"] == audit_id.as_str());
    assert_eq!(listed["verb"], "list");

    // The policy's exclusions and omitted stage hold for every line.
    for event in events(&log) {
        assert_ne!(event["stage"], "RequestReceived", "{event}");
        assert_ne!(event["user"]["username"], "system:node:lab-node", "{event}");
        assert!(
            !event["user"]["groups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == "system:nodes")),
            "node twins are not audited: {event}"
        );
        assert!(
            !(event["verb"] == "get" && event["objectRef"]["resource"] == "events"),
            "{event}"
        );
        if event["level"] == "Metadata" {
            assert!(event.get("requestObject").is_none(), "{event}");
        }
    }
}

#[test]
fn watches_and_exec_log_response_started_then_complete() {
    let (cluster, _dir, log) = audited_cluster(POLICY);
    // A watch that ends by itself when its timeout passes.
    let _ = cluster.kubectl("1.33", &["get", "pods", "--watch", "--request-timeout=2s"]);
    let started = event_where(&log, "watch started", |e| {
        e["verb"] == "watch"
            && e["stage"] == "ResponseStarted"
            && e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with("kubectl"))
    });
    assert_eq!(started["responseStatus"]["code"], 200);
    let id = started["auditID"].as_str().expect("id").to_string();
    event_where(&log, "watch complete", |e| {
        e["auditID"] == id.as_str() && e["stage"] == "ResponseComplete"
    });
    // exec upgrades the connection: ResponseStarted with 101, then ResponseComplete.
    cluster.ok(
        "1.33",
        &[
            "run",
            "box",
            "--image=busybox",
            "--annotations=sim.tessera.dev/duration=1h",
        ],
    );
    cluster.node_when_running("1.33", None, "box");
    let env = cluster.ok("1.33", &["exec", "box", "--", "env"]);
    assert!(env.contains("HOSTNAME=box"), "{env}");
    let upgraded = event_where(&log, "exec started", |e| {
        e["objectRef"]["subresource"] == "exec" && e["stage"] == "ResponseStarted"
    });
    assert_eq!(upgraded["verb"], "create");
    assert_eq!(upgraded["responseStatus"]["code"], 101);
    let id = upgraded["auditID"].as_str().expect("id").to_string();
    event_where(&log, "exec complete", |e| {
        e["auditID"] == id.as_str() && e["stage"] == "ResponseComplete"
    });
}

#[test]
fn the_python_client_is_audited() {
    let (cluster, _dir, log) = audited_cluster(POLICY);
    let script = "\
import sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
core.create_namespaced_config_map('default', client.V1ConfigMap(metadata=client.V1ObjectMeta(name='from-python'), data={'lang': 'python'}))
core.list_namespaced_pod('default')
";
    let kubeconfig = cluster.kubeconfig();
    crate::support::python(&[
        std::ffi::OsStr::new("-c"),
        std::ffi::OsStr::new(script),
        kubeconfig.as_os_str(),
    ]);
    let created = event_where(&log, "python create", |e| {
        is(e, "create", "configmaps", "from-python")
    });
    assert!(
        created["userAgent"]
            .as_str()
            .is_some_and(|a| a.starts_with("OpenAPI-Generator")),
        "{created}"
    );
    assert_eq!(created["requestObject"]["data"]["lang"], "python");
    assert_eq!(created["responseStatus"]["code"], 201);
    let listed = event_where(&log, "python list", |e| {
        is(e, "list", "pods", "")
            && e["userAgent"]
                .as_str()
                .is_some_and(|a| a.starts_with("OpenAPI-Generator"))
    });
    assert_eq!(listed["level"], "Metadata");
}

#[test]
fn a_malformed_policy_stops_start_up_naming_file_line_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policy = dir.path().join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Everything\n",
    )
    .expect("write");
    let stderr = up_refuses(
        &dir.path().join("data"),
        &[
            "--audit-log-path",
            "-",
            "--audit-policy-file",
            &policy.to_string_lossy(),
        ],
    );
    assert!(stderr.contains(&policy.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("line 4: rules[0].level: Unsupported value: \"Everything\""),
        "{stderr}"
    );
}
