use serde_json::{Value, json};

use super::*;

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"metadata": {"name": name}, "rules": rules})
}

fn cluster_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn role_binding(namespace: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
        "subjects": subjects,
    })
}

#[test]
fn each_rule_shape_grants_the_risks_a_review_names() {
    let cases: &[(&str, Value, bool, &[Risk])] = &[
        (
            "verbs * on pods",
            rule(&[""], &["pods"], &["*"]),
            false,
            &[Risk::Wildcard],
        ),
        (
            "everything",
            rule(&["*"], &["*"], &["*"]),
            true,
            &[
                Risk::Wildcard,
                Risk::SecretsClusterRead,
                Risk::Escalate,
                Risk::Bind,
                Risk::Impersonate,
                Risk::NodeProxy,
                Risk::TokenCreate,
            ],
        ),
        (
            "secrets list cluster-wide",
            rule(&[""], &["secrets"], &["list"]),
            true,
            &[Risk::SecretsClusterRead],
        ),
        (
            "secrets read in one namespace is a namespace admin's normal right",
            rule(&[""], &["secrets"], &["get", "list", "watch"]),
            false,
            &[],
        ),
        (
            "secrets in another group are not Secrets",
            rule(&["example.com"], &["secrets"], &["get"]),
            true,
            &[],
        ),
        (
            "escalate and bind on clusterroles",
            rule(&[RBAC_GROUP], &["clusterroles"], &["escalate", "bind"]),
            true,
            &[Risk::Escalate, Risk::Bind],
        ),
        (
            "bind on roles only",
            rule(&[RBAC_GROUP], &["roles"], &["bind"]),
            false,
            &[Risk::Bind],
        ),
        (
            "impersonate serviceaccounts cluster-wide",
            rule(&[""], &["serviceaccounts"], &["impersonate"]),
            true,
            &[Risk::Impersonate],
        ),
        (
            "impersonating a namespace's serviceaccounts is edit's normal right",
            rule(&[""], &["serviceaccounts"], &["impersonate"]),
            false,
            &[],
        ),
        (
            "impersonate user extras",
            rule(
                &["authentication.k8s.io"],
                &["userextras/scopes"],
                &["impersonate"],
            ),
            true,
            &[Risk::Impersonate],
        ),
        (
            "node proxy get",
            rule(&[""], &["nodes/proxy"], &["get"]),
            true,
            &[Risk::NodeProxy],
        ),
        (
            "every subresource of nodes",
            rule(&[""], &["nodes/*"], &["create"]),
            true,
            &[],
        ),
        (
            "*/proxy covers nodes/proxy",
            rule(&[""], &["*/proxy"], &["get"]),
            true,
            &[Risk::NodeProxy],
        ),
        (
            "token requests cluster-wide",
            rule(&[""], &["serviceaccounts/token"], &["create"]),
            true,
            &[Risk::TokenCreate],
        ),
        (
            "token requests in one namespace (edit grants them)",
            rule(&[""], &["serviceaccounts/token"], &["create"]),
            false,
            &[],
        ),
        (
            "nodes read only",
            rule(&[""], &["nodes"], &["get", "list", "watch"]),
            true,
            &[],
        ),
    ];
    for (name, rule_json, cluster_wide, want) in cases {
        let got = rule_risks(&Rule::from_json(rule_json), *cluster_wide);
        assert_eq!(got, *want, "{name}");
    }
}

/// (subject, binding, role, scope, risks, a ServiceAccount)
type Row<'a> = (&'a str, &'a str, &'a str, &'a str, Vec<Risk>, bool);

#[test]
fn findings_name_subject_binding_role_and_rule() {
    let objects = RbacObjects {
        cluster_roles: vec![
            cluster_role("cluster-admin", vec![rule(&["*"], &["*"], &["*"])]),
            cluster_role("secret-reader", vec![rule(&[""], &["secrets"], &["get"])]),
            cluster_role("view", vec![rule(&[""], &["pods"], &["get"])]),
        ],
        roles: vec![json!({
            "metadata": {"name": "proxy", "namespace": "team-a"},
            "rules": [rule(&[""], &["nodes/proxy"], &["get"])],
        })],
        cluster_role_bindings: vec![
            cluster_binding(
                "ci-admin",
                "cluster-admin",
                json!([{"kind": "ServiceAccount", "name": "deployer", "namespace": "ci"}]),
            ),
            cluster_binding(
                "readers",
                "secret-reader",
                json!([{"kind": "Group", "name": "auditors"}, {"kind": "User", "name": "bob"}]),
            ),
            cluster_binding("viewers", "view", json!([{"kind": "Group", "name": "all"}])),
            cluster_binding(
                "dangling",
                "missing",
                json!([{"kind": "User", "name": "x"}]),
            ),
        ],
        role_bindings: vec![
            role_binding(
                "team-a",
                "read-secrets-here",
                "ClusterRole",
                "secret-reader",
                json!([{"kind": "User", "name": "alice"}]),
            ),
            role_binding(
                "team-a",
                "proxy",
                "Role",
                "proxy",
                json!([{"kind": "ServiceAccount", "name": "runner"}]),
            ),
        ],
    };
    let found = findings(&objects);
    let rows: Vec<Row> = found
        .iter()
        .map(|f| {
            (
                f.subject.as_str(),
                f.binding.as_str(),
                f.role.as_str(),
                f.scope.as_str(),
                f.risks.clone(),
                f.service_account,
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "ServiceAccount ci/deployer",
                "ClusterRoleBinding/ci-admin",
                "ClusterRole/cluster-admin",
                "cluster",
                vec![Risk::ClusterAdmin],
                true
            ),
            (
                "Group auditors",
                "ClusterRoleBinding/readers",
                "ClusterRole/secret-reader",
                "cluster",
                vec![Risk::SecretsClusterRead],
                false
            ),
            (
                "User bob",
                "ClusterRoleBinding/readers",
                "ClusterRole/secret-reader",
                "cluster",
                vec![Risk::SecretsClusterRead],
                false
            ),
            (
                "ServiceAccount team-a/runner",
                "RoleBinding/team-a/proxy",
                "Role/team-a/proxy",
                "team-a",
                vec![Risk::NodeProxy],
                true
            ),
        ]
    );
    assert_eq!(found[1].rule, "apiGroups=\"\" resources=secrets verbs=get");
}

#[test]
fn aggregated_cluster_roles_carry_their_parts_risks() {
    let objects = RbacObjects {
        cluster_roles: vec![
            json!({
                "metadata": {"name": "ops"},
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"example.com/aggregate-to-ops": "true"}}
                ]},
                "rules": [],
            }),
            json!({
                "metadata": {"name": "ops-impersonate",
                             "labels": {"example.com/aggregate-to-ops": "true"}},
                "rules": [rule(&[""], &["users"], &["impersonate"])],
            }),
        ],
        cluster_role_bindings: vec![cluster_binding(
            "ops",
            "ops",
            json!([{"kind": "User", "name": "carol"}]),
        )],
        ..RbacObjects::default()
    };
    let found = findings(&objects);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].risks, vec![Risk::Impersonate]);
    assert_eq!(found[0].role, "ClusterRole/ops");
}

#[test]
fn bootstrap_bindings_are_marked() {
    let mut binding = cluster_binding(
        "cluster-admin",
        "cluster-admin",
        json!([{"kind": "Group", "name": "system:masters"}]),
    );
    binding["metadata"]["labels"] = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let objects = RbacObjects {
        cluster_roles: vec![cluster_role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"])],
        )],
        cluster_role_bindings: vec![binding],
        ..RbacObjects::default()
    };
    let found = findings(&objects);
    assert_eq!(found.len(), 1);
    assert!(found[0].bootstrap);
}
