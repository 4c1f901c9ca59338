//! Who may do what: every request is authenticated (transport identity, bearer token),
//! optionally impersonates another user (which itself needs RBAC), and is authorized by
//! RBAC against the attributes upstream derives from method, path and query.

use http::{HeaderMap, Method};

use crate::authn::{Authenticated, UserInfo, unauthorized};
use crate::error::{ApiError, ApiResult};
use crate::rbac::{Attributes, forbidden_message};
use crate::request::{Query, Target};
use crate::server::ApiServer;

/// The verb of a resource request.
fn resource_verb(method: &Method, named: bool, query: &Query) -> &'static str {
    match *method {
        Method::GET | Method::HEAD if query.flag("watch") => "watch",
        Method::GET | Method::HEAD if named => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

/// The authorization attributes of a request.
pub fn attributes(target: &Target, method: &Method, path: &str, query: &Query) -> Attributes {
    match target {
        Target::Resource(resource) => {
            let named = resource.name.is_some();
            // A subresource request on a named object is a get/create/update/patch of it.
            let verb = resource_verb(method, named, query);
            Attributes {
                verb: verb.to_string(),
                resource_request: true,
                group: resource.group.clone(),
                resource: resource.plural.clone(),
                subresource: resource.subresource.clone().unwrap_or_default(),
                namespace: resource.namespace.clone().unwrap_or_default(),
                name: resource.name.clone().unwrap_or_default(),
                path: path.to_string(),
            }
        }
        _ => Attributes {
            verb: method.as_str().to_ascii_lowercase(),
            resource_request: false,
            path: path.to_string(),
            ..Attributes::default()
        },
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?;
    Some(token.trim()).filter(|t| !t.is_empty())
}

/// Who sent the request; `None` for anonymous requests.
pub fn authenticate(
    server: &ApiServer,
    headers: &HeaderMap,
    extensions: &http::Extensions,
) -> ApiResult<Option<UserInfo>> {
    if let Some(token) = bearer(headers) {
        return server
            .authenticator
            .bearer(&server.objects, token)
            .map(Some);
    }
    Ok(extensions.get::<Authenticated>().map(|a| a.0.clone()))
}

/// Applies `Impersonate-*` headers, checking the `impersonate` permission for each.
pub fn impersonate(server: &ApiServer, headers: &HeaderMap, user: UserInfo) -> ApiResult<UserInfo> {
    let header = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect()
    };
    let users = header("impersonate-user");
    let groups = header("impersonate-group");
    let uids = header("impersonate-uid");
    if users.is_empty() {
        if !groups.is_empty() || !uids.is_empty() {
            return Err(ApiError::bad_request(
                "requested impersonation of groups or uid without impersonating a user",
            ));
        }
        return Ok(user);
    }
    let target = &users[0];
    let check = |resource: &str, group: &str, name: &str, namespace: &str| -> ApiResult<()> {
        let attributes = Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Attributes::default()
        };
        if server
            .rbac
            .authorize(&server.objects, &user, &attributes)
            .allowed
        {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                group,
                resource,
                name,
                &format!(
                    "User \"{}\" cannot impersonate resource \"{resource}\" in API group \"{group}\"{}",
                    user.name,
                    if namespace.is_empty() {
                        " at the cluster scope".to_string()
                    } else {
                        format!(" in the namespace \"{namespace}\"")
                    }
                ),
            ))
        }
    };
    let mut impersonated = match target
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => {
            check("serviceaccounts", "", name, namespace)?;
            UserInfo::service_account(namespace, name, "")
        }
        None => {
            check("users", "", target, "")?;
            UserInfo::new(target.clone(), &[])
        }
    };
    for group in groups {
        check("groups", "", &group, "")?;
        if !impersonated.groups.contains(&group) {
            impersonated
                .groups
                .insert(impersonated.groups.len().saturating_sub(1), group);
        }
    }
    if let Some(uid) = uids.first() {
        check("uids", "authentication.k8s.io", uid, "")?;
        impersonated.uid = uid.clone();
    }
    Ok(impersonated)
}

/// Whether a path is open to anonymous requests.
pub fn is_public(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Authenticates, impersonates and authorizes a request; the user it runs as.
pub fn check(
    server: &ApiServer,
    target: &Target,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    extensions: &http::Extensions,
) -> ApiResult<Option<UserInfo>> {
    let Some(user) = authenticate(server, headers, extensions)? else {
        if is_public(path) {
            return Ok(None);
        }
        return Err(unauthorized());
    };
    let user = impersonate(server, headers, user)?;
    let attributes = attributes(target, method, path, query);
    if is_public(path)
        || server
            .rbac
            .authorize(&server.objects, &user, &attributes)
            .allowed
    {
        return Ok(Some(user));
    }
    let message = forbidden_message(&user, &attributes);
    Err(if attributes.resource_request {
        ApiError::forbidden(
            &attributes.group,
            &attributes.resource,
            &attributes.name,
            &message,
        )
    } else {
        let mut error = ApiError::forbidden("", "", "", &message);
        error.message = format!("forbidden: {message}");
        error
    })
}
