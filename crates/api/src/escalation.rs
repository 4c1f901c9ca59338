//! RBAC's escalation and bind checks on writes of Roles, ClusterRoles and their bindings: a
//! user may only grant permissions they hold, unless RBAC allows them the `escalate` verb on
//! roles or the `bind` verb on the role a binding refers to.
//!
//! Decides over the [`Rbac`] authorizer and a [`Lister`] of the RBAC objects; knows nothing
//! about the request that carries the write.

use serde_json::Value;
use tessera_model::json::Pointer as _;

use crate::authn::UserInfo;
use crate::error::{ApiError, ApiResult};
use crate::lister::Lister;
use crate::rbac::{Attributes, MASTERS, Rbac, Rule, covers};
use crate::resource::Resource;

fn allowed(
    rbac: &Rbac,
    objects: &dyn Lister,
    user: &UserInfo,
    verb: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> bool {
    let attributes = Attributes {
        verb: verb.into(),
        resource_request: true,
        group: "rbac.authorization.k8s.io".into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
        ..Attributes::default()
    };
    rbac.authorize(objects, user, &attributes).allowed
}

/// Whether writes of `resource` by `user` need the escalation check at all.
pub fn applies(resource: Resource, user: &UserInfo) -> bool {
    resource.group() == "rbac.authorization.k8s.io" && !user.groups.iter().any(|g| g == MASTERS)
}

/// Refuses a role or binding the user could not have created without escalating.
pub fn check(
    rbac: &Rbac,
    objects: &dyn Lister,
    user: &UserInfo,
    resource: Resource,
    namespace: Option<&str>,
    object: &Value,
) -> ApiResult<()> {
    if !applies(resource, user) {
        return Ok(());
    }
    let namespace = namespace.unwrap_or_default();
    let name = object
        .at("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let held = rbac.rules(objects, user, namespace);
    match resource.kind() {
        "Role" | "ClusterRole" => {
            if allowed(
                rbac,
                objects,
                user,
                "escalate",
                resource.plural(),
                namespace,
                name,
            ) {
                return Ok(());
            }
            let requested: Vec<Rule> = object
                .get("rules")
                .and_then(Value::as_array)
                .map(|rules| rules.iter().map(Rule::from_json).collect())
                .unwrap_or_default();
            if let Some(missing) = requested.iter().find(|rule| !covers(&held, rule)) {
                return Err(ApiError::forbidden(
                    resource.group(),
                    resource.plural(),
                    name,
                    &format!(
                        "user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held: {}",
                        user.name,
                        user.groups,
                        missing.to_json()
                    ),
                ));
            }
            Ok(())
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let kind = object
                .at("/roleRef/kind")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let role = object
                .at("/roleRef/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let plural = if kind == "ClusterRole" {
                "clusterroles"
            } else {
                "roles"
            };
            let bind_namespace = if kind == "ClusterRole" { "" } else { namespace };
            if allowed(rbac, objects, user, "bind", plural, bind_namespace, role) {
                return Ok(());
            }
            let rules = rbac
                .role_rules(objects, namespace, kind, role)
                .unwrap_or_default();
            if rules.iter().all(|rule| covers(&held, rule)) {
                return Ok(());
            }
            Err(ApiError::forbidden(
                resource.group(),
                resource.plural(),
                name,
                &format!(
                    "user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held: binding to {kind} \"{role}\"",
                    user.name, user.groups
                ),
            ))
        }
        _ => Ok(()),
    }
}
