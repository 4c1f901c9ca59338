//! Dynamic resource allocation claims in a pod spec, as upstream's
//! `validatePodResourceClaims` and `validateResourceClaimNames` check them: unique DNS-label
//! names, each naming exactly one of a claim or a claim template, and container claims that
//! name a pod claim, once.
//!
//! Knows nothing about whether the claims or templates named exist.

use std::collections::BTreeSet;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use super::{formats, items, required_text, text};
use crate::error::Cause;

/// Checks `spec.resourceClaims`; returns every non-empty claim name (valid or not, as
/// upstream gathers them).
pub fn check_pod_claims<'v>(
    spec: &'v Value,
    path: &str,
    causes: &mut Vec<Cause>,
) -> BTreeSet<&'v str> {
    let mut valid = BTreeSet::new();
    let claims = items(spec, "resourceClaims");
    for (index, claim) in claims.iter().enumerate() {
        let at = format!("{path}.resourceClaims[{index}]");
        let name = required_text(claim, "name", &at, causes);
        if !name.is_empty() {
            if valid.contains(name) {
                causes.push(Cause::duplicate(format!("{at}.name"), &json!(name)));
            } else {
                causes.extend(
                    formats::dns_label(name)
                        .into_iter()
                        .map(|problem| Cause::invalid(format!("{at}.name"), &json!(name), problem)),
                );
                valid.insert(name);
            }
        }
        let claim_name = text(claim, "resourceClaimName");
        let template_name = text(claim, "resourceClaimTemplateName");
        match (claim_name, template_name) {
            (Some(_), Some(_)) => causes.push(Cause::invalid(
                &at,
                claim,
                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            )),
            (None, None) => causes.push(Cause::invalid(
                &at,
                claim,
                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            )),
            _ => {}
        }
        for (key, value) in [
            ("resourceClaimName", claim_name),
            ("resourceClaimTemplateName", template_name),
        ] {
            if let Some(value) = value {
                causes.extend(
                    formats::dns_subdomain(value, false)
                        .into_iter()
                        .map(|problem| {
                            Cause::invalid(format!("{at}.{key}"), &json!(value), problem)
                        }),
                );
            }
        }
    }
    claims
        .iter()
        .filter_map(|claim| text(claim, "name"))
        .filter(|name| !name.is_empty())
        .collect()
}

/// A container's `resources.claims`: each names a pod claim, once (per request).
pub fn check_container_claims(
    container: &Value,
    at: &str,
    pod_claims: &BTreeSet<&str>,
    causes: &mut Vec<Cause>,
) {
    let Some(claims) = container.at("/resources/claims").and_then(Value::as_array) else {
        return;
    };
    let mut seen = BTreeSet::new();
    for (index, claim) in claims.iter().enumerate() {
        let entry = format!("{at}.resources.claims[{index}]");
        let name = text(claim, "name").unwrap_or_default();
        if name.is_empty() {
            if claim.get("name").is_some() {
                causes.push(Cause::required(entry));
            }
            continue;
        }
        let mut key = name.to_string();
        if let Some(request) = text(claim, "request").filter(|r| !r.is_empty()) {
            causes.extend(formats::dns_label(request).into_iter().map(|problem| {
                Cause::invalid(format!("{entry}.request"), &json!(request), problem)
            }));
            key = format!("{name}/{request}");
        }
        if !seen.insert(key.clone()) {
            causes.push(Cause::duplicate(&entry, &json!(key)));
        }
        if !pod_claims.contains(name) {
            let detail = if pod_claims.is_empty() {
                "must be one of the names in pod.spec.resourceClaims which is empty".to_string()
            } else {
                let listed = pod_claims.iter().copied().collect::<Vec<_>>().join(", ");
                format!("must be one of the names in pod.spec.resourceClaims: {listed}")
            };
            causes.push(Cause::not_found(entry, &json!(name), Some(&detail)));
        }
    }
}
