//! Requests that are answered, never stored: SelfSubjectAccessReview, SelfSubjectRulesReview,
//! SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectReview, TokenReview, and the
//! `serviceaccounts/token` TokenRequest.

use std::time::Duration;

use serde_json::{Value, json};

use crate::authn::{API_AUDIENCE, UserInfo};
use crate::error::{ApiError, ApiResult};
use crate::meta::meta_str;
use crate::rbac::Attributes;
use crate::resource::Resource;
use crate::server::ApiServer;

fn attributes_from(spec: &Value, namespace_override: Option<&str>) -> Attributes {
    let text = |pointer: &str| {
        spec.pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    if let Some(resource) = spec.get("resourceAttributes") {
        let field = |name: &str| {
            resource
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Attributes {
            verb: field("verb"),
            resource_request: true,
            group: field("group"),
            resource: field("resource"),
            subresource: field("subresource"),
            namespace: namespace_override.map_or_else(|| field("namespace"), str::to_string),
            name: field("name"),
            path: String::new(),
        }
    } else {
        Attributes {
            verb: text("/nonResourceAttributes/verb"),
            path: text("/nonResourceAttributes/path"),
            ..Attributes::default()
        }
    }
}

fn user_from_spec(spec: &Value) -> UserInfo {
    let mut user = UserInfo {
        name: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        uid: spec
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
        ..UserInfo::default()
    };
    if !user.name.is_empty() && !user.groups.iter().any(|g| g == "system:authenticated") {
        user.groups.push("system:authenticated".into());
    }
    user
}

fn answer(mut request: Value, status: Value) -> Value {
    request["status"] = status;
    if !request["metadata"].is_object() {
        request["metadata"] = json!({});
    }
    request["metadata"]["creationTimestamp"] = Value::Null;
    request
}

/// Answers a review.
pub fn review(
    server: &ApiServer,
    resource: Resource,
    namespace: Option<&str>,
    user: &UserInfo,
    body: Value,
) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let decide = |subject: &UserInfo, attributes: &Attributes| {
        let decision = server.rbac.authorize(&server.objects, subject, attributes);
        json!({"allowed": decision.allowed, "reason": decision.reason})
    };
    Ok(match resource.kind() {
        "SelfSubjectAccessReview" => {
            let status = decide(user, &attributes_from(&spec, None));
            answer(body, status)
        }
        "SubjectAccessReview" => answer(
            body,
            decide(&user_from_spec(&spec), &attributes_from(&spec, None)),
        ),
        "LocalSubjectAccessReview" => {
            let status = decide(&user_from_spec(&spec), &attributes_from(&spec, namespace));
            answer(body, status)
        }
        "SelfSubjectRulesReview" => {
            let namespace = spec
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let rules = server.rbac.rules(&server.objects, user, namespace);
            let (resource_rules, non_resource_rules): (Vec<_>, Vec<_>) =
                rules.iter().partition(|r| r.non_resource_urls.is_empty());
            answer(
                body,
                json!({
                    "resourceRules": resource_rules.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
                    "nonResourceRules": non_resource_rules.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
                    "incomplete": false,
                }),
            )
        }
        "SelfSubjectReview" => answer(body, json!({"userInfo": user.to_json()})),
        "TokenReview" => {
            let token = spec
                .get("token")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match server.authenticator.bearer(&server.objects, token) {
                Ok(reviewed) => answer(
                    body,
                    json!({"authenticated": true, "user": reviewed.to_json(), "audiences": [API_AUDIENCE]}),
                ),
                Err(_) => answer(
                    body,
                    json!({"authenticated": false, "error": "invalid bearer token"}),
                ),
            }
        }
        other => return Err(ApiError::method_not_allowed(&format!("create {other}"))),
    })
}

/// Issues a token for a ServiceAccount (TokenRequest).
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
    let requested = body
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(3600);
    if requested < 600 {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            name,
            vec![crate::error::Cause::invalid(
                "spec.expirationSeconds",
                &json!(requested),
                "may not specify a duration less than 10 minutes",
            )],
        ));
    }
    let expiration = requested.min(48 * 3600) as u64;
    let audiences: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec![API_AUDIENCE.to_string()]);
    let now = server.objects.now();
    let issued = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let token = server.authenticator.signer.issue(
        namespace,
        name,
        uid,
        &audiences,
        issued,
        issued + expiration,
    );
    let expires = crate::meta::timestamp(now + Duration::from_secs(expiration));
    let mut response = json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": {"audiences": audiences, "expirationSeconds": expiration},
        "status": {"token": token, "expirationTimestamp": expires},
    });
    if let Some(bound) = body.pointer("/spec/boundObjectRef") {
        response["spec"]["boundObjectRef"] = bound.clone();
    }
    Ok(response)
}
