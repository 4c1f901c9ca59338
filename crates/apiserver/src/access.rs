//! Who may do what: every request is authenticated (transport identity, bearer token),
//! optionally impersonates another user (which itself needs RBAC), and is authorized by
//! RBAC against the attributes upstream derives from method, path and query.

use http::{HeaderMap, Method};

use crate::authn::Authenticated;
use crate::server::ApiServer;
use tessera_api::authn::{UserInfo, unauthorized};
use tessera_api::error::{ApiError, ApiResult};
use tessera_api::rbac::{Attributes, forbidden_message};
use tessera_api::request::{Query, Target, attributes};

use serde_json::Value;
use tessera_api::meta::meta_str;
use tessera_api::resource::Resource;
use tessera_api::reviews::{epoch_seconds, token_request_answer, token_request_spec};

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
    let audit = crate::audit::RequestAudit::of(extensions);
    let Some(user) = authenticate(server, headers, extensions)? else {
        if is_public(path) {
            if let Some(audit) = audit {
                audit.authenticated(None)?;
            }
            return Ok(None);
        }
        return Err(unauthorized());
    };
    if let Some(audit) = audit {
        audit.authenticated(Some(&user))?;
    }
    let user = impersonate(server, headers, user)?;
    if let Some(audit) = audit.filter(|_| headers.contains_key("impersonate-user")) {
        audit.impersonated(&user);
    }
    let attributes = attributes(target, method, path, query);
    if is_public(path) {
        return Ok(Some(user));
    }
    let decision = server.rbac.authorize(&server.objects, &user, &attributes);
    if let Some(audit) = audit {
        audit.decision(decision.allowed, &decision.reason);
    }
    if decision.allowed {
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

/// Issues a token for a ServiceAccount (TokenRequest), signed with the server's key.
pub fn token_request(
    server: &ApiServer,
    namespace: &str,
    name: &str,
    body: &Value,
) -> ApiResult<Value> {
    let accounts = Resource::find("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("serviceaccounts are not served"))?;
    let account = server.objects.get(accounts, Some(namespace), name)?;
    let uid = meta_str(&account, "uid").unwrap_or_default();
    let (expiration, audiences) = token_request_spec(name, body)?;
    let now = server.objects.now();
    let issued = epoch_seconds(now);
    let token = server.authenticator.signer.issue(
        namespace,
        name,
        uid,
        &audiences,
        issued,
        issued + expiration,
    );
    Ok(token_request_answer(
        namespace, name, body, &audiences, expiration, &token, now,
    ))
}
