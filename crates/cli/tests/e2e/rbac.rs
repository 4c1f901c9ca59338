//! Authentication and RBAC as kubectl sees them: a certificate user and a ServiceAccount,
//! allowed and denied exactly as their bindings say.

use std::process::Command;

use crate::support::{Cluster, kubectl_binary, outcome};

pub(crate) fn kubeconfig_for(cluster: &Cluster, user: &str, groups: &[&str]) -> std::path::PathBuf {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command
        .args(["kubeconfig", "--data-dir"])
        .arg(cluster.dir.path())
        .args(["--user", user]);
    for group in groups {
        command.args(["--group", group]);
    }
    let output = command.output().expect("tessera kubeconfig");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = cluster.dir.path().join(format!("{user}.kubeconfig"));
    std::fs::write(&path, &output.stdout).expect("write kubeconfig");
    path
}

pub(crate) fn kubectl_as(
    cluster: &Cluster,
    kubeconfig: &std::path::Path,
    args: &[&str],
) -> (bool, String, String) {
    outcome(
        Command::new(kubectl_binary("1.33"))
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", cluster.dir.path().join("home-rbac"))
            .output()
            .expect("kubectl"),
    )
}

#[test]
fn users_and_service_accounts_get_exactly_what_rbac_grants() {
    let cluster = Cluster::start();
    let v = "1.33";
    cluster.ok(v, &["create", "namespace", "team-a"]);
    cluster.ok(
        v,
        &[
            "create",
            "rolebinding",
            "team-a-edit",
            "-n",
            "team-a",
            "--clusterrole=edit",
            "--group=team-a",
        ],
    );
    let alice = kubeconfig_for(&cluster, "alice", &["team-a"]);

    let (_, whoami, _) = kubectl_as(
        &cluster,
        &alice,
        &[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username} {.status.userInfo.groups}",
        ],
    );
    assert_eq!(whoami, r#"alice ["team-a","system:authenticated"]"#);
    let (_, yes, _) = kubectl_as(
        &cluster,
        &alice,
        &["auth", "can-i", "create", "deployments", "-n", "team-a"],
    );
    assert_eq!(yes.trim(), "yes");
    let (_, no, _) = kubectl_as(
        &cluster,
        &alice,
        &["auth", "can-i", "create", "pods", "-n", "default"],
    );
    assert_eq!(no.trim(), "no");
    let (ok, _, denied) = kubectl_as(&cluster, &alice, &["get", "pods", "-n", "default"]);
    assert!(!ok);
    assert!(
        denied.contains("Error from server (Forbidden): pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{denied}"
    );
    let (ok, _, _) = kubectl_as(
        &cluster,
        &alice,
        &[
            "create",
            "configmap",
            "mine",
            "-n",
            "team-a",
            "--from-literal=a=b",
        ],
    );
    assert!(ok, "edit allows configmaps in team-a");
    let (_, list, _) = kubectl_as(
        &cluster,
        &alice,
        &["auth", "can-i", "--list", "-n", "team-a"],
    );
    assert!(
        list.contains("deployments.apps")
            && list.contains("selfsubjectaccessreviews.authorization.k8s.io"),
        "{list}"
    );
    assert!(
        !list.contains("rolebindings"),
        "edit does not manage RBAC: {list}"
    );

    // Escalation: a namespace admin may create roles, but only with rules it holds.
    cluster.ok(
        v,
        &[
            "create",
            "rolebinding",
            "alice-admin",
            "-n",
            "team-a",
            "--clusterrole=admin",
            "--user=alice",
        ],
    );
    let within = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader, namespace: team-a}\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n  verbs: [get, list]\n";
    let (ok, _, error) = kubectl_as_stdin(&cluster, &alice, &["apply", "-f", "-"], within);
    assert!(ok, "{error}");
    let beyond = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: nodes, namespace: team-a}\nrules:\n- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [delete]\n";
    let (ok, _, error) = kubectl_as_stdin(&cluster, &alice, &["apply", "-f", "-"], beyond);
    assert!(!ok);
    assert!(
        error.contains("attempting to grant RBAC permissions not currently held"),
        "{error}"
    );
    // Patching a held role into one that grants more is the same escalation, and changes nothing.
    let patch_reader = |kind: &str, patch: &str| {
        let kind = format!("--type={kind}");
        kubectl_as(
            &cluster,
            &alice,
            &[
                "patch", "role", "reader", "-n", "team-a", &kind, "-p", patch,
            ],
        )
    };
    let widen = r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["nodes"],"verbs":["delete"]}}]"#;
    let (ok, _, error) = patch_reader("json", widen);
    assert!(!ok);
    assert!(
        error.contains("attempting to grant RBAC permissions not currently held"),
        "{error}"
    );
    let narrow = r#"{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}"#;
    let (ok, _, error) = patch_reader("merge", narrow);
    assert!(ok, "{error}");
    let verbs = cluster.ok(
        v,
        &[
            "get",
            "role",
            "reader",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.rules[*].verbs}",
        ],
    );
    assert_eq!(verbs, r#"["get"]"#);

    // Impersonation needs its own permission.
    let (_, as_alice, _) = kubectl_as(
        &cluster,
        &cluster.kubeconfig(),
        &[
            "auth",
            "can-i",
            "list",
            "pods",
            "-n",
            "team-a",
            "--as",
            "alice",
            "--as-group",
            "team-a",
        ],
    );
    assert_eq!(as_alice.trim(), "yes");
    let (ok, _, error) = kubectl_as(
        &cluster,
        &alice,
        &["get", "pods", "-n", "team-a", "--as", "bob"],
    );
    assert!(!ok);
    assert!(
        error.contains("cannot impersonate resource \"users\""),
        "{error}"
    );

    // A ServiceAccount token from the TokenRequest API, bound to the view role.
    cluster.ok(v, &["create", "serviceaccount", "trainer", "-n", "team-a"]);
    cluster.ok(
        v,
        &[
            "create",
            "rolebinding",
            "trainer-view",
            "-n",
            "team-a",
            "--clusterrole=view",
            "--serviceaccount=team-a:trainer",
        ],
    );
    let token = cluster.ok(v, &["create", "token", "trainer", "-n", "team-a"]);
    let token = token.trim();
    let admin = cluster.kubeconfig();
    let with_token = |args: &[&str]| {
        let mut all = vec!["--token", token];
        all.extend_from_slice(args);
        kubectl_as(&cluster, &admin, &all)
    };
    let (_, whoami, _) = with_token(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    assert_eq!(whoami, "system:serviceaccount:team-a:trainer");
    let (ok, listed, _) = with_token(&["get", "configmaps", "-n", "team-a", "-o", "name"]);
    assert!(ok && listed.contains("configmap/mine"), "{listed}");
    let (ok, _, error) = with_token(&["delete", "configmap", "mine", "-n", "team-a"]);
    assert!(
        !ok && error.contains("cannot delete resource \"configmaps\""),
        "{error}"
    );
    // Deleting the ServiceAccount revokes its tokens.
    cluster.ok(v, &["delete", "serviceaccount", "trainer", "-n", "team-a"]);
    let (ok, _, error) = with_token(&["get", "configmaps", "-n", "team-a"]);
    assert!(!ok && error.contains("Unauthorized"), "{error}");
}

fn kubectl_as_stdin(
    cluster: &Cluster,
    kubeconfig: &std::path::Path,
    args: &[&str],
    input: &str,
) -> (bool, String, String) {
    use std::io::Write;
    let mut child = Command::new(kubectl_binary("1.33"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", cluster.dir.path().join("home-rbac"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("stdin");
    outcome(child.wait_with_output().expect("kubectl"))
}

#[test]
fn anonymous_requests_reach_only_health_checks() {
    let cluster = Cluster::start();
    let curl = |path: &str| {
        let output = Command::new("curl")
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}"])
            .arg(format!("https://127.0.0.1:{}{path}", cluster.port))
            .output()
            .expect("curl");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert_eq!(curl("/healthz"), "200");
    assert_eq!(curl("/readyz"), "200");
    assert_eq!(curl("/api/v1/namespaces"), "401");
    assert_eq!(curl("/version"), "401");
}
