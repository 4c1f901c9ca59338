//! `tessera tenant` against the real binary and kubectl 1.33, running docs/lab/tenant.md's
//! steps with its example files: a ClusterQueue per team, a model store outside any tenant,
//! tenants team-a (egress to the model store) and team-b (none); then the proof — reachability
//! through the simulated dataplane (`kubectl exec … -- /agnhost connect`), RBAC of the teams'
//! members, drift found and repaired, a conflicting spec refused, one tenant deleted with the
//! other intact. Spec errors are checked without a cluster.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::rbac::{kubeconfig_for, kubectl_as};
use crate::support::{Cluster, outcome};

const V: &str = "1.33";

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/tenant")
        .join(name)
}

/// Runs `tessera tenant ARGS` against the cluster (without one: no `--kubeconfig`).
fn tenant(cluster: Option<&Cluster>, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command.arg("tenant").args(args).env_remove("KUBECONFIG");
    match cluster {
        Some(cluster) => command.arg("--kubeconfig").arg(cluster.kubeconfig()),
        // A data directory with no platform: nothing to talk to by accident.
        None => command
            .arg("--data-dir")
            .arg(std::env::temp_dir().join("no-tessera-here")),
    };
    outcome(command.output().expect("run tessera tenant"))
}

fn tenant_ok(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, stdout, stderr) = tenant(Some(cluster), args);
    assert!(ok, "tessera tenant {args:?} failed:\n{stdout}{stderr}");
    stdout
}

fn tenant_fails(cluster: &Cluster, args: &[&str]) -> String {
    let (ok, stdout, stderr) = tenant(Some(cluster), args);
    assert!(!ok, "tessera tenant {args:?} should have failed:\n{stdout}");
    format!("{stdout}{stderr}")
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `kubectl exec` a probe from `pod` in `namespace` to `target`: `connected`, or agnhost's
/// verdict (`TIMEOUT`, `REFUSED`).
fn probe(cluster: &Cluster, namespace: &str, pod: &str, target: &str) -> String {
    let output = cluster.kubectl(
        V,
        &[
            "exec",
            "-n",
            namespace,
            pod,
            "--",
            "/agnhost",
            "connect",
            target,
            "--timeout=1s",
        ],
    );
    let (ok, stdout, stderr) = outcome(output);
    if ok {
        "connected".into()
    } else {
        // agnhost's verdict is the first line; kubectl adds how the command ended.
        format!("{stdout}{stderr}")
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A field of the probe pod of `namespace`, by kubectl's jsonpath (without braces).
fn probe_field(cluster: &Cluster, namespace: &str, field: &str) -> String {
    let jsonpath = format!("jsonpath={{{field}}}");
    cluster.ok(
        V,
        &["get", "pod", "probe", "-n", namespace, "-o", &jsonpath],
    )
}

#[test]
fn tenant_specs_are_checked_before_any_cluster_is_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: tessera.dev/v1alpha1\nkind: Tenant\nmetadata: {name: team-x}\nspec:\n  quota:\n    gpu: 1.5\n",
    )
    .unwrap();
    let team_a = example("team-a.yaml");
    // (arguments, what the error says)
    let table: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["create", "-f", path(&bad), "--dry-run"],
            format!("{}: line 6: spec.quota.gpu: \"1.5\" must be a whole number", bad.display()),
        ),
        (
            vec!["create", "-f", path(&bad)],
            format!("{}: line 6: spec.quota.gpu", bad.display()),
        ),
        (
            vec!["create", "team-x", "--egress-cidr", "10.0.0.0/33", "--dry-run"],
            "invalid tenant \"team-x\": --egress-namespace/--egress-cidr: spec.egress[0].cidr: \"10.0.0.0/33\": the prefix length must be 0 to 32".into(),
        ),
        (
            vec!["create", "team-x", "--member", "bob", "--dry-run"],
            "\"bob\" must be user:NAME or group:NAME".into(),
        ),
        (
            vec!["create", "-f", path(&team_a), "--gpu", "2", "--dry-run"],
            "do not mix".into(),
        ),
        (
            vec!["create", "team-b", "-f", path(&team_a), "--dry-run"],
            "metadata.name is \"team-a\", not \"team-b\"".into(),
        ),
        (vec!["create", "--dry-run"], "name the tenant".into()),
        (vec!["check", "a,b=c"], "tenant name \"a,b=c\": a lowercase RFC 1123 label".into()),
    ];
    for (args, want) in table {
        let (ok, stdout, stderr) = tenant(None, &args);
        assert!(!ok, "{args:?} succeeded: {stdout}");
        assert!(
            stderr.contains(&want),
            "{args:?}: {stderr:?} lacks {want:?}"
        );
    }
    // A dry run prints the bundle as a YAML stream (the core tests that it reads back).
    let (ok, yaml, stderr) = tenant(
        None,
        &[
            "create",
            "-f",
            path(&example("team-a.yaml")),
            "--dry-run",
            "-o",
            "yaml",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(yaml.matches("---\n").count(), 11, "{yaml}");
    for line in [
        "kind: Namespace",
        "pod-security.kubernetes.io/enforce: restricted",
        "requests.nvidia.com/gpu: \"8\"",
        "kind: LocalQueue",
    ] {
        assert!(yaml.contains(line), "{line} not in:\n{yaml}");
    }
    let (ok, json, stderr) = tenant(
        None,
        &["create", "-f", path(&team_a), "--dry-run", "-o", "json"],
    );
    assert!(ok, "{stderr}");
    let list: serde_json::Value = serde_json::from_str(&json).expect("a JSON List");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(11));
    assert_eq!(
        list["items"][0]["metadata"]["labels"]["tessera.dev/tenant"],
        "team-a"
    );
    let (ok, names, stderr) = tenant(None, &["create", "team-c", "--dry-run"]);
    assert!(ok, "{stderr}");
    assert!(
        names.starts_with("namespace/team-c serverside-applied (dry run)\n"),
        "{names}"
    );
}

#[test]
fn tenants_isolate_teams_and_repair_drift() {
    let cluster = Cluster::start();
    let team_a = example("team-a.yaml");
    let team_b = example("team-b.yaml");
    cluster.ok(V, &["apply", "-f", path(&example("queues.yaml"))]);
    cluster.ok(V, &["apply", "-f", path(&example("model-store.yaml"))]);

    let created = tenant_ok(&cluster, &["create", "-f", path(&team_a)]);
    for line in [
        "namespace/team-a serverside-applied",
        "serviceaccount/workload serverside-applied",
        "resourcequota/tenant-quota serverside-applied",
        "limitrange/tenant-defaults serverside-applied",
        "rolebinding.rbac.authorization.k8s.io/tenant-admins serverside-applied",
        "rolebinding.rbac.authorization.k8s.io/tenant-members serverside-applied",
        "networkpolicy.networking.k8s.io/default-deny serverside-applied",
        "networkpolicy.networking.k8s.io/allow-dns serverside-applied",
        "networkpolicy.networking.k8s.io/allow-same-namespace serverside-applied",
        "networkpolicy.networking.k8s.io/allow-egress serverside-applied",
        "localqueue.kueue.x-k8s.io/default serverside-applied",
    ] {
        assert!(created.contains(line), "{line} not in:\n{created}");
    }
    tenant_ok(&cluster, &["create", "-f", path(&team_b)]);

    // The objects are the bundle's, owned by one field manager.
    let labels = cluster.ok(
        V,
        &[
            "get",
            "namespace",
            "team-a",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    for label in [
        r#""pod-security.kubernetes.io/enforce":"restricted""#,
        r#""pod-security.kubernetes.io/enforce-version":"latest""#,
        r#""tessera.dev/tenant":"team-a""#,
    ] {
        assert!(labels.contains(label), "{label} not in {labels}");
    }
    let managers = cluster.ok(
        V,
        &[
            "get", "resourcequota", "tenant-quota", "-n", "team-a", "--show-managed-fields",
            "-o", "jsonpath={.metadata.managedFields[*].manager} {.metadata.managedFields[*].operation} {.spec.hard}",
        ],
    );
    assert!(managers.starts_with("tessera-tenant Apply "), "{managers}");
    assert!(
        managers.contains(r#""requests.nvidia.com/gpu":"8""#),
        "{managers}"
    );
    let queue = cluster.ok(
        V,
        &[
            "get",
            "localqueue",
            "default",
            "-n",
            "team-b",
            "-o",
            "jsonpath={.spec.clusterQueue}",
        ],
    );
    assert_eq!(queue, "team-b-cq");
    let list = tenant_ok(&cluster, &["list"]);
    let rows: Vec<Vec<&str>> = list
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            vec![
                "NAME",
                "NAMESPACE",
                "POD",
                "SECURITY",
                "GPU",
                "CPU",
                "MEMORY",
                "CLUSTER",
                "QUEUE"
            ],
            vec![
                "team-a",
                "team-a",
                "restricted",
                "8",
                "64",
                "256Gi",
                "team-a-cq"
            ],
            vec![
                "team-b",
                "team-b",
                "restricted",
                "4",
                "32",
                "128Gi",
                "team-b-cq"
            ],
        ]
    );

    // Pods with no requests are admitted under the quota: the LimitRange fills them in.
    for namespace in ["team-a", "team-b"] {
        cluster.ok(
            V,
            &["apply", "-n", namespace, "-f", path(&example("probe.yaml"))],
        );
    }
    cluster.node_when_running(V, Some("model-store"), "model-store");
    cluster.node_when_running(V, Some("team-a"), "probe");
    cluster.node_when_running(V, Some("team-b"), "probe");
    let requests = probe_field(&cluster, "team-a", ".spec.containers[0].resources.requests");
    assert_eq!(requests, r#"{"cpu":"100m","memory":"128Mi"}"#);

    // Reachability: team-a reaches the model store; team-b reaches neither it nor team-a.
    let store = "model-store.model-store.svc.cluster.local:8080";
    let a_ip = probe_field(&cluster, "team-a", ".status.podIP");
    let a_target = format!("{a_ip}:8080");
    assert_eq!(probe(&cluster, "team-a", "probe", store), "connected");
    assert_eq!(probe(&cluster, "team-b", "probe", store), "TIMEOUT");
    assert_eq!(probe(&cluster, "team-b", "probe", &a_target), "TIMEOUT");
    // Within a namespace, pods reach each other.
    let b_ip = probe_field(&cluster, "team-b", ".status.podIP");
    assert_eq!(
        probe(&cluster, "team-b", "probe", &format!("{b_ip}:8080")),
        "connected"
    );

    // RBAC: a team-b member cannot read team-a's secrets; a team-a member can.
    let bob = kubeconfig_for(&cluster, "bob", &["team-b"]);
    let ann = kubeconfig_for(&cluster, "ann", &["team-a"]);
    let (ok, _, denied) = kubectl_as(&cluster, &bob, &["get", "secrets", "-n", "team-a"]);
    assert!(!ok);
    assert!(
        denied.contains(r#"Error from server (Forbidden): secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "team-a""#),
        "{denied}"
    );
    let (ok, _, stderr) = kubectl_as(&cluster, &ann, &["get", "secrets", "-n", "team-a"]);
    assert!(ok, "{stderr}");
    let (ok, _, _) = kubectl_as(&cluster, &ann, &["get", "secrets", "-n", "team-b"]);
    assert!(!ok, "team-a's member reads no secrets of team-b");

    // Drift: a deleted NetworkPolicy and a changed quota are found, and re-applying fixes them.
    assert!(
        tenant_ok(&cluster, &["check", "team-a"]).contains("tenant team-a: no drift (11 objects)")
    );
    cluster.ok(
        V,
        &["delete", "networkpolicy", "allow-egress", "-n", "team-a"],
    );
    cluster.ok(
        V,
        &[
            "patch",
            "resourcequota",
            "tenant-quota",
            "-n",
            "team-a",
            "--type=merge",
            "-p",
            r#"{"spec":{"hard":{"requests.nvidia.com/gpu":"16"}}}"#,
        ],
    );
    // Without its egress policy, team-a's pod loses the model store.
    assert_eq!(probe(&cluster, "team-a", "probe", store), "TIMEOUT");
    let drift = tenant_fails(&cluster, &["check", "team-a"]);
    assert!(
        drift.contains("NetworkPolicy team-a/allow-egress: missing"),
        "{drift}"
    );
    assert!(
        drift.contains(r#"ResourceQuota team-a/tenant-quota: spec.hard[requests.nvidia.com/gpu] is "16", the bundle sets "8""#),
        "{drift}"
    );
    assert!(
        drift.contains("has drifted from its spec (2 findings)"),
        "{drift}"
    );
    // The quota's new value is owned by kubectl now: applying again conflicts until forced.
    let conflict = tenant_fails(&cluster, &["create", "-f", path(&team_a)]);
    assert!(conflict.contains("--force-conflicts"), "{conflict}");
    // Refused whole: the deleted policy was not applied either.
    let still_missing =
        cluster.kubectl(V, &["get", "networkpolicy", "allow-egress", "-n", "team-a"]);
    assert!(
        !still_missing.status.success(),
        "a refused apply changes nothing"
    );
    tenant_ok(
        &cluster,
        &["create", "-f", path(&team_a), "--force-conflicts"],
    );
    assert!(tenant_ok(&cluster, &["check", "team-a"]).contains("no drift"));
    assert_eq!(probe(&cluster, "team-a", "probe", store), "connected");

    // A spec that would take a namespace it does not own is refused, and the namespace is
    // left as it was.
    let before = cluster.ok(
        V,
        &[
            "get",
            "namespace",
            "model-store",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
    );
    let refused = tenant_fails(&cluster, &["create", "store", "--namespace", "model-store"]);
    assert!(
        refused.contains(r#"namespace "model-store" already exists and belongs to no tenant"#),
        "{refused}"
    );
    let after = cluster.ok(
        V,
        &[
            "get",
            "namespace",
            "model-store",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ],
    );
    assert_eq!(before, after);
    let refused = tenant_fails(&cluster, &["create", "intruder", "--namespace", "team-a"]);
    assert!(
        refused.contains(r#"namespace "team-a" belongs to tenant "team-a" (tessera.dev/tenant=team-a); refusing to change it"#),
        "{refused}"
    );
    let refused = tenant_fails(&cluster, &["create", "team-a", "--namespace", "team-a-2"]);
    assert!(
        refused.contains(r#"tenant "team-a" already owns namespace "team-a""#),
        "{refused}"
    );
    let missing = cluster.kubectl(V, &["get", "namespace", "team-a-2"]);
    assert!(!missing.status.success(), "a refused spec creates nothing");

    // A changed spec prunes what the bundle no longer holds.
    let narrowed = tenant_ok(
        &cluster,
        &[
            "create",
            "team-b",
            "--gpu",
            "4",
            "--cluster-queue",
            "team-b-cq",
        ],
    );
    assert!(
        narrowed.contains("rolebinding.rbac.authorization.k8s.io/tenant-members pruned"),
        "{narrowed}"
    );
    assert!(tenant_ok(&cluster, &["check", "team-b"]).contains("no drift"));
    // A LocalQueue cannot change its ClusterQueue: it is replaced.
    let moved = tenant_ok(
        &cluster,
        &[
            "create",
            "team-b",
            "--gpu",
            "4",
            "--cluster-queue",
            "team-a-cq",
        ],
    );
    assert!(
        moved.contains("localqueue.kueue.x-k8s.io/default replaced"),
        "{moved}"
    );
    let queue = cluster.ok(
        V,
        &[
            "get",
            "localqueue",
            "default",
            "-n",
            "team-b",
            "-o",
            "jsonpath={.spec.clusterQueue}",
        ],
    );
    assert_eq!(queue, "team-a-cq");
    assert!(tenant_ok(&cluster, &["check", "team-b"]).contains("no drift"));

    // Deleting team-b leaves team-a intact.
    let deleted = tenant_ok(&cluster, &["delete", "team-b"]);
    assert!(
        deleted.contains(r#"namespace "team-b" deleted"#),
        "{deleted}"
    );
    assert!(
        !cluster
            .kubectl(V, &["get", "namespace", "team-b"])
            .status
            .success()
    );
    assert!(tenant_ok(&cluster, &["check", "team-a"]).contains("no drift (11 objects)"));
    cluster.node_when_running(V, Some("team-a"), "probe");
    let list = tenant_ok(&cluster, &["list"]);
    assert_eq!(list.lines().count(), 2, "{list}");
    let gone = tenant_fails(&cluster, &["delete", "team-b"]);
    assert!(gone.contains(r#"no tenant "team-b""#), "{gone}");
    tenant_ok(&cluster, &["delete", "team-a"]);
    let (ok, stdout, stderr) = tenant(Some(&cluster), &["list"]);
    assert!(ok && stdout.is_empty(), "{stdout}");
    assert_eq!(stderr, "No tenants found.\n");
    // The model store, no tenant's, is left alone.
    cluster.node_when_running(V, Some("model-store"), "model-store");
}
