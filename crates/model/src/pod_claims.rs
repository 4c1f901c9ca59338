//! Which ResourceClaim each of a pod's claims names: `resourceClaimName` directly, or — for a
//! claim made from a template — the name the resourceclaim controller recorded in
//! `status.resourceClaimStatuses`. Pure; the scheduler, the kubelet side and `tessera
//! explain` all read pods this way.

use k8s_openapi::api::core::v1::Pod;

/// Each pod claim (by its name in the pod) and the ResourceClaim it names, when known yet.
pub fn claim_names(pod: &Pod) -> Vec<(String, Option<String>)> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let name = c.resource_claim_name.clone().or_else(|| {
                statuses
                    .into_iter()
                    .flatten()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.resource_claim_name.clone())
            });
            (c.name.clone(), name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_spec_or_the_status() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "resourceClaims": [
                {"name": "direct", "resourceClaimName": "shared"},
                {"name": "made", "resourceClaimTemplateName": "t"},
                {"name": "pending", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "made", "resourceClaimName": "p-made-x1y2z"}]},
        }))
        .expect("pod");
        assert_eq!(
            claim_names(&pod),
            [
                ("direct".to_string(), Some("shared".to_string())),
                ("made".to_string(), Some("p-made-x1y2z".to_string())),
                ("pending".to_string(), None),
            ]
        );
    }
}
