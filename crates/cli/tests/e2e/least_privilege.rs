//! Least privilege for privileged components, as an administrator checks it with kubectl:
//! `tessera agent manifests` applies unchanged and its ServiceAccount may do only what the
//! agent uses; `tessera check rbac` names each risky grant with the binding that gives it.

use std::process::{Command, Output};

use crate::support::{Cluster, outcome};

fn tessera(cluster: &Cluster, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .output()
        .expect("run tessera")
}

fn manifests(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["agent", "manifests"])
        .args(args)
        .output()
        .expect("tessera agent manifests");
    let (ok, stdout, stderr) = outcome(output);
    assert!(ok, "{stderr}");
    stdout
}

fn can_i(cluster: &Cluster, verb: &str, what: &[&str]) -> String {
    let mut args = vec!["auth", "can-i", verb];
    args.extend_from_slice(what);
    args.push("--as=system:serviceaccount:tessera-agent:tessera-agent");
    let output = cluster.kubectl("1.33", &args);
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn agent_manifests_apply_and_grant_only_what_the_agent_uses() {
    let cluster = Cluster::start();
    let v = "1.33";
    let with_policy = manifests(&["--exposure", "dra"]);
    assert!(with_policy.contains("kind: ValidatingAdmissionPolicy"));
    assert!(with_policy.contains("system:serviceaccount:tessera-agent:tessera-agent"));
    // The embedded platform serves no admission policies; everything else applies unchanged.
    let yaml = manifests(&["--exposure", "dra", "--no-node-policy"]);
    assert!(!yaml.contains("privileged: true"));
    let applied = cluster.ok_stdin(v, &["apply", "-f", "-"], &yaml);
    for line in [
        "namespace/tessera-agent created",
        "serviceaccount/tessera-agent created",
        "clusterrole.rbac.authorization.k8s.io/tessera-agent created",
        "clusterrolebinding.rbac.authorization.k8s.io/tessera-agent created",
        "daemonset.apps/tessera-agent created",
    ] {
        assert!(applied.contains(line), "{line} in {applied}");
    }
    let labels = cluster.ok(
        v,
        &[
            "get",
            "namespace",
            "tessera-agent",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    );
    assert!(
        labels.contains(r#""pod-security.kubernetes.io/enforce":"privileged""#),
        "{labels}"
    );
    // What the DRA driver uses, and nothing more.
    for (verb, what, want) in [
        ("create", vec!["resourceslices.resource.k8s.io"], "yes"),
        ("delete", vec!["resourceslices.resource.k8s.io"], "yes"),
        (
            "get",
            vec!["resourceclaims.resource.k8s.io", "-n", "default"],
            "yes",
        ),
        (
            "list",
            vec!["resourceclaims.resource.k8s.io", "-n", "default"],
            "no",
        ),
        ("create", vec!["deviceclasses.resource.k8s.io"], "no"),
        ("get", vec!["secrets", "-n", "kube-system"], "no"),
        ("list", vec!["pods", "-A"], "no"),
        ("get", vec!["nodes/proxy"], "no"),
    ] {
        assert_eq!(can_i(&cluster, verb, &what), want, "{verb} {what:?}");
    }
    // The agent's grants are not risky ones; the bootstrap defaults are hidden by default.
    let (ok, stdout, stderr) = outcome(tessera(&cluster, &["check", "rbac", "--exit-code"]));
    assert!(ok, "{stdout}{stderr}");
    assert_eq!(stdout, "No risky RBAC grants found.\n");
    // With --all, the bootstrap `cluster-admin` binding of system:masters is listed.
    let (_, all, _) = outcome(tessera(&cluster, &["check", "rbac", "--all"]));
    assert!(
        all.lines().any(|l| l.starts_with("cluster-admin")
            && l.contains("Group system:masters")
            && l.contains("ClusterRoleBinding/cluster-admin")),
        "{all}"
    );
}

#[test]
fn check_rbac_names_each_risky_grant_and_its_binding() {
    let cluster = Cluster::start();
    let v = "1.33";
    for args in [
        vec!["create", "namespace", "ci"],
        vec!["create", "serviceaccount", "deployer", "-n", "ci"],
        vec![
            "create",
            "clusterrolebinding",
            "ci-admin",
            "--clusterrole=cluster-admin",
            "--serviceaccount=ci:deployer",
        ],
        vec![
            "create",
            "clusterrole",
            "secret-reader",
            "--verb=get,list",
            "--resource=secrets",
        ],
        vec![
            "create",
            "clusterrolebinding",
            "auditors",
            "--clusterrole=secret-reader",
            "--group=auditors",
        ],
        vec![
            "create",
            "clusterrole",
            "impersonator",
            "--verb=impersonate",
            "--resource=serviceaccounts",
        ],
        vec![
            "create",
            "clusterrolebinding",
            "impersonator",
            "--clusterrole=impersonator",
            "--user=mallory",
        ],
        // Within one namespace, edit's token minting and ServiceAccount impersonation are
        // normal rights: not listed.
        vec![
            "create",
            "rolebinding",
            "ci-edit",
            "-n",
            "ci",
            "--clusterrole=edit",
            "--user=erin",
        ],
        // A namespaced Secret read is a namespace admin's normal right: not listed.
        vec![
            "create",
            "rolebinding",
            "ci-secrets",
            "-n",
            "ci",
            "--clusterrole=secret-reader",
            "--user=bob",
        ],
    ] {
        cluster.ok(v, &args);
    }
    let (ok, table, stderr) = outcome(tessera(&cluster, &["check", "rbac", "--exit-code"]));
    assert!(
        !ok,
        "--exit-code fails when something is found: {table}{stderr}"
    );
    let rows: Vec<&str> = table.lines().collect();
    assert!(rows[0].starts_with("RISKS"), "{table}");
    // ClusterRoleBindings by name, then RoleBindings by namespace and name.
    let expect = [
        (
            "secrets-cluster-read",
            "Group auditors",
            "ClusterRoleBinding/auditors",
        ),
        (
            "cluster-admin",
            "ServiceAccount ci/deployer",
            "ClusterRoleBinding/ci-admin",
        ),
        (
            "impersonate",
            "User mallory",
            "ClusterRoleBinding/impersonator",
        ),
    ];
    assert_eq!(rows.len(), 1 + expect.len(), "{table}");
    for ((risk, subject, binding), row) in expect.iter().zip(&rows[1..]) {
        assert!(
            row.starts_with(risk) && row.contains(subject) && row.contains(binding),
            "{row} should be {risk} {subject} {binding}"
        );
    }
    let (_, json, _) = outcome(tessera(
        &cluster,
        &["check", "rbac", "--service-accounts", "-o", "json"],
    ));
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("JSON output");
    let findings = parsed["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{json}");
    assert_eq!(findings[0]["subject"], "ServiceAccount ci/deployer");
    assert_eq!(findings[0]["risks"], serde_json::json!(["cluster-admin"]));
}
