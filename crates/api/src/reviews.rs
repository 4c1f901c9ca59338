//! Requests that are answered, never stored: SelfSubjectAccessReview, SelfSubjectRulesReview,
//! SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectReview, TokenReview, and the
//! `serviceaccounts/token` TokenRequest.
//!
//! Decides over the [`Rbac`] authorizer and a [`Lister`]; the shell authenticates the token
//! of a TokenReview, reads the ServiceAccount of a TokenRequest and signs its token.

use std::time::{Duration, SystemTime};
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use crate::authn::{API_AUDIENCE, UserInfo};
use crate::error::{ApiError, ApiResult};
use crate::lister::Lister;
use crate::rbac::{Attributes, Rbac};
use crate::resource::Resource;

fn attributes_from(spec: &Value, namespace_override: Option<&str>) -> Attributes {
    let text = |pointer: &str| {
        spec.at(pointer)
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
/// `authenticate` tells who a TokenReview's token stands for (`None`: invalid).
pub fn review(
    rbac: &Rbac,
    objects: &dyn Lister,
    authenticate: impl FnOnce(&str) -> Option<UserInfo>,
    resource: Resource,
    namespace: Option<&str>,
    user: &UserInfo,
    body: Value,
) -> ApiResult<Value> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let decide = |subject: &UserInfo, attributes: &Attributes| {
        let decision = rbac.authorize(objects, subject, attributes);
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
            let rules = rbac.rules(objects, user, namespace);
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
            match authenticate(token) {
                Some(reviewed) => answer(
                    body,
                    json!({"authenticated": true, "user": reviewed.to_json(), "audiences": [API_AUDIENCE]}),
                ),
                None => answer(
                    body,
                    json!({"authenticated": false, "error": "invalid bearer token"}),
                ),
            }
        }
        other => return Err(ApiError::method_not_allowed(&format!("create {other}"))),
    })
}

/// What a TokenRequest asks for: the token's lifetime in seconds (at least ten minutes, at
/// most 48 hours) and its audiences (this server's by default).
pub fn token_request_spec(name: &str, body: &Value) -> ApiResult<(u64, Vec<String>)> {
    let requested = body
        .at("/spec/expirationSeconds")
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
        .at("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec![API_AUDIENCE.to_string()]);
    Ok((expiration, audiences))
}

/// Seconds since the epoch, as tokens count time.
pub fn epoch_seconds(at: SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The answer to a TokenRequest: the issued `token`, valid for `expiration` seconds from
/// `now`.
pub fn token_request_answer(
    namespace: &str,
    name: &str,
    body: &Value,
    audiences: &[String],
    expiration: u64,
    token: &str,
    now: SystemTime,
) -> Value {
    let expires = crate::meta::timestamp(now + Duration::from_secs(expiration));
    let mut response = json!({
        "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": {"audiences": audiences, "expirationSeconds": expiration},
        "status": {"token": token, "expirationTimestamp": expires},
    });
    if let Some(bound) = body.at("/spec/boundObjectRef") {
        response["spec"]["boundObjectRef"] = bound.clone();
    }
    response
}
