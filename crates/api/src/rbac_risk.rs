//! Risky RBAC grants, found as a security review looks for them (Kubernetes' "RBAC good
//! practices"): `cluster-admin` bound to anyone, wildcard rules, Secrets readable cluster-wide,
//! the `escalate`, `bind` and (cluster-wide) `impersonate` verbs, `nodes/proxy`, and minting
//! any ServiceAccount's token — each reported with the binding that grants it, the role and
//! the rule. Acting as a namespace's own ServiceAccounts is not reported: `edit` grants it on
//! purpose, and creating a pod that runs as one is the same power.
//!
//! Pure: it reads the RBAC objects it is handed (from the embedded store or a real cluster) and
//! resolves aggregated ClusterRoles as the aggregation controller does. It does not know who
//! may reach a cluster otherwise (client certificates in `system:masters`, node identities) —
//! only what RBAC objects grant.

use std::fmt;
use tessera_model::json::Pointer as _;

use serde_json::Value;

use crate::rbac::{Attributes, Rule, cluster_role_rules, rules_of};

/// A kind of risky grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// The `cluster-admin` ClusterRole: everything, everywhere.
    ClusterAdmin,
    /// A rule with `*` verbs or `*` resources.
    Wildcard,
    /// get/list/watch on Secrets across every namespace (a ClusterRoleBinding).
    SecretsClusterRead,
    /// `escalate` on roles: writing roles with rules one does not hold.
    Escalate,
    /// `bind` on roles: binding roles one does not hold.
    Bind,
    /// `impersonate` on users, groups, ServiceAccounts or user extras, cluster-wide.
    Impersonate,
    /// `nodes/proxy`: the kubelet API (exec into any pod on the node).
    NodeProxy,
    /// `create serviceaccounts/token` cluster-wide: minting any ServiceAccount's token.
    TokenCreate,
}

impl Risk {
    /// The short name printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Risk::ClusterAdmin => "cluster-admin",
            Risk::Wildcard => "wildcard",
            Risk::SecretsClusterRead => "secrets-cluster-read",
            Risk::Escalate => "escalate",
            Risk::Bind => "bind",
            Risk::Impersonate => "impersonate",
            Risk::NodeProxy => "node-proxy",
            Risk::TokenCreate => "token-create",
        }
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One subject holding risky grants through one rule of one binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `User alice`, `Group team-a`, `ServiceAccount ns/name`.
    pub subject: String,
    /// Whether the subject is a ServiceAccount (a workload's identity).
    pub service_account: bool,
    /// `ClusterRoleBinding/name` or `RoleBinding/namespace/name`.
    pub binding: String,
    /// `ClusterRole/name` or `Role/namespace/name`.
    pub role: String,
    /// Where the grant applies: `cluster` or the namespace.
    pub scope: String,
    /// What the rule grants that is risky, most severe first.
    pub risks: Vec<Risk>,
    /// The rule, as `kubectl describe role` would print it.
    pub rule: String,
    /// The binding is one of Kubernetes' or Tessera's bootstrap defaults
    /// (`kubernetes.io/bootstrapping: rbac-defaults`).
    pub bootstrap: bool,
}

/// The RBAC objects of a cluster, as JSON.
#[derive(Debug, Default, Clone)]
pub struct RbacObjects {
    /// ClusterRoles.
    pub cluster_roles: Vec<Value>,
    /// Roles.
    pub roles: Vec<Value>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<Value>,
    /// RoleBindings.
    pub role_bindings: Vec<Value>,
}

fn meta(object: &Value, field: &str) -> String {
    crate::meta::meta_str(object, field)
        .unwrap_or_default()
        .to_string()
}

fn is_bootstrap(binding: &Value) -> bool {
    binding
        .at("/metadata/labels/kubernetes.io~1bootstrapping")
        .and_then(Value::as_str)
        == Some("rbac-defaults")
}

/// The subjects of a binding as (display, is a ServiceAccount); a ServiceAccount without a
/// namespace is in the binding's.
fn subjects(binding: &Value) -> Vec<(String, bool)> {
    let namespace = meta(binding, "namespace");
    binding
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|subject| {
            let name = subject.get("name").and_then(Value::as_str)?;
            match subject.get("kind").and_then(Value::as_str)? {
                "ServiceAccount" => {
                    let ns = subject
                        .get("namespace")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .unwrap_or(&namespace);
                    Some((format!("ServiceAccount {ns}/{name}"), true))
                }
                kind @ ("User" | "Group") => Some((format!("{kind} {name}"), false)),
                _ => None,
            }
        })
        .collect()
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The risks one rule grants; `cluster_wide` when its binding is a ClusterRoleBinding.
pub fn rule_risks(rule: &Rule, cluster_wide: bool) -> Vec<Risk> {
    let allows_any = |requests: &[Attributes]| requests.iter().any(|a| rule.allows(a));
    let mut risks = Vec::new();
    if rule.verbs.iter().any(|v| v == "*") || rule.resources.iter().any(|r| r == "*") {
        risks.push(Risk::Wildcard);
    }
    let read_secrets =
        ["get", "list", "watch"].map(|verb| Attributes::resource(verb, "", "secrets", ""));
    if cluster_wide && rule.resource_names.is_empty() && allows_any(&read_secrets) {
        risks.push(Risk::SecretsClusterRead);
    }
    let on_roles = |verb: &str| {
        ["roles", "clusterroles"]
            .map(|resource| Attributes::resource(verb, RBAC_GROUP, resource, ""))
    };
    if allows_any(&on_roles("escalate")) {
        risks.push(Risk::Escalate);
    }
    if allows_any(&on_roles("bind")) {
        risks.push(Risk::Bind);
    }
    let impersonation = [
        Attributes::resource("impersonate", "", "users", ""),
        Attributes::resource("impersonate", "", "groups", ""),
        Attributes::resource("impersonate", "", "serviceaccounts", ""),
        Attributes::resource("impersonate", "authentication.k8s.io", "uids", ""),
    ];
    // Impersonating a user extra asks for `userextras/<key>`: any such rule impersonates.
    let extras = rule.verbs.iter().any(|v| v == "*" || v == "impersonate")
        && rule
            .api_groups
            .iter()
            .any(|g| g == "*" || g == "authentication.k8s.io")
        && rule.resources.iter().any(|r| r.starts_with("userextras"));
    // Within one namespace, acting as its ServiceAccounts is what `edit` and `admin` grant on
    // purpose (creating a pod that runs as one is the same power); across namespaces it reaches
    // kube-system's controllers. Users and groups are cluster-scoped: only a ClusterRoleBinding
    // can let anyone impersonate them.
    if cluster_wide && (extras || allows_any(&impersonation)) {
        risks.push(Risk::Impersonate);
    }
    if allows_any(&["get", "create"].map(|verb| Attributes::resource(verb, "", "nodes", "proxy"))) {
        risks.push(Risk::NodeProxy);
    }
    if cluster_wide
        && allows_any(&[Attributes::resource(
            "create",
            "",
            "serviceaccounts",
            "token",
        )])
    {
        risks.push(Risk::TokenCreate);
    }
    risks
}

/// A rule as `kubectl describe` lists it: resources (with their groups), names and verbs.
pub fn describe_rule(rule: &Rule) -> String {
    let list = |items: &[String]| items.join(",");
    if !rule.non_resource_urls.is_empty() {
        return format!(
            "nonResourceURLs={} verbs={}",
            list(&rule.non_resource_urls),
            list(&rule.verbs)
        );
    }
    let groups: Vec<String> = rule
        .api_groups
        .iter()
        .map(|g| {
            if g.is_empty() {
                "\"\"".into()
            } else {
                g.clone()
            }
        })
        .collect();
    let mut text = format!(
        "apiGroups={} resources={}",
        list(&groups),
        list(&rule.resources)
    );
    if !rule.resource_names.is_empty() {
        text.push_str(&format!(" resourceNames={}", list(&rule.resource_names)));
    }
    text.push_str(&format!(" verbs={}", list(&rule.verbs)));
    text
}

/// Every risky grant of the cluster, in binding order (ClusterRoleBindings, then RoleBindings
/// by namespace and name). A binding to a role that does not exist grants nothing.
pub fn findings(objects: &RbacObjects) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut cluster_bindings: Vec<&Value> = objects.cluster_role_bindings.iter().collect();
    cluster_bindings.sort_by_key(|b| meta(b, "name"));
    let mut role_bindings: Vec<&Value> = objects.role_bindings.iter().collect();
    role_bindings.sort_by_key(|b| (meta(b, "namespace"), meta(b, "name")));
    for binding in cluster_bindings.into_iter().chain(role_bindings) {
        let namespace = meta(binding, "namespace");
        let cluster_wide = namespace.is_empty();
        let role_kind = binding
            .at("/roleRef/kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let role_name = binding
            .at("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (role, rules) =
            match role_kind {
                "ClusterRole" => {
                    let Some(role) = objects
                        .cluster_roles
                        .iter()
                        .find(|r| meta(r, "name") == role_name)
                    else {
                        continue;
                    };
                    (
                        format!("ClusterRole/{role_name}"),
                        cluster_role_rules(role, &objects.cluster_roles),
                    )
                }
                "Role" => {
                    let Some(role) = objects.roles.iter().find(|r| {
                        meta(r, "name") == role_name && meta(r, "namespace") == namespace
                    }) else {
                        continue;
                    };
                    (format!("Role/{namespace}/{role_name}"), rules_of(role))
                }
                _ => continue,
            };
        let binding_name = if cluster_wide {
            format!("ClusterRoleBinding/{}", meta(binding, "name"))
        } else {
            format!("RoleBinding/{namespace}/{}", meta(binding, "name"))
        };
        let scope = if cluster_wide {
            "cluster".to_string()
        } else {
            namespace.clone()
        };
        let mut granted: Vec<(Vec<Risk>, String)> =
            if role_kind == "ClusterRole" && role_name == "cluster-admin" {
                vec![(
                    vec![Risk::ClusterAdmin],
                    "apiGroups=* resources=* verbs=*".into(),
                )]
            } else {
                rules
                    .iter()
                    .map(|rule| (rule_risks(rule, cluster_wide), describe_rule(rule)))
                    .filter(|(risks, _)| !risks.is_empty())
                    .collect()
            };
        granted.dedup();
        for (subject, service_account) in subjects(binding) {
            for (risks, rule) in &granted {
                out.push(Finding {
                    subject: subject.clone(),
                    service_account,
                    binding: binding_name.clone(),
                    role: role.clone(),
                    scope: scope.clone(),
                    risks: risks.clone(),
                    rule: rule.clone(),
                    bootstrap: is_bootstrap(binding),
                });
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "rbac_risk_tests.rs"]
mod tests;
