//! The CustomResourceDefinitions of the ProvisioningRequest admission check as their owners
//! publish them: Kueue's ProvisioningRequestConfig (`kueue.x-k8s.io`) and the
//! cluster-autoscaler's ProvisioningRequest (`autoscaling.x-k8s.io`), bundled verbatim (JSON of
//! the published YAML, `data/README.md`) with Tessera's bundle hash and label, so `tessera up`
//! serves both with no install. Also the names Kueue and the autoscaler agree on.
//!
//! Produces JSON only; installing is the bootstrap's business.

use serde_json::{Value, json};

use crate::kueue::crd::BUNDLE_HASH_ANNOTATION;

/// The group of ProvisioningRequests.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// The version of ProvisioningRequests Kueue writes.
pub const VERSION: &str = "v1";
/// The pod annotation naming the ProvisioningRequest a pod consumes
/// (`autoscaling.ProvisioningRequestPodAnnotationKey`).
pub const CONSUME_REQUEST_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The pod annotation naming the class of that request
/// (`autoscaling.ProvisioningClassPodAnnotationKey`).
pub const PROVISIONING_CLASS_ANNOTATION: &str = "autoscaling.x-k8s.io/provisioning-class-name";
/// The class that only checks capacity.
pub const CHECK_CAPACITY_CLASS: &str = "check-capacity.autoscaling.x-k8s.io";
/// The class that scales up all or nothing.
pub const BEST_EFFORT_ATOMIC_CLASS: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";

const PUBLISHED: [&str; 2] = [
    include_str!("../data/crd-provisioningrequestconfigs.json"),
    include_str!("../data/crd-provisioningrequests.json"),
];

/// The two definitions, each with a [`BUNDLE_HASH_ANNOTATION`] of its spec.
pub fn definitions() -> Vec<Value> {
    bundle(&PUBLISHED)
}

/// Published definitions (JSON texts) as Tessera bundles them: each with a
/// [`BUNDLE_HASH_ANNOTATION`] of its spec and Tessera's `managed-by` label.
pub(crate) fn bundle(published: &[&str]) -> Vec<Value> {
    published
        .iter()
        .filter_map(|text| serde_json::from_str::<Value>(text).ok())
        .map(|mut crd| {
            let hash = crate::fnv::fnv64(crd["spec"].to_string().as_bytes());
            crd["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION] = json!(format!("{hash:016x}"));
            crd["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "tessera"});
            crd
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_published_definitions_are_bundled() {
        let names: Vec<(String, String)> = definitions()
            .iter()
            .map(|crd| {
                let storage = crd["spec"]["versions"]
                    .as_array()
                    .and_then(|v| v.iter().find(|v| v["storage"] == true))
                    .map(|v| v["name"].as_str().unwrap_or_default().to_owned())
                    .unwrap_or_default();
                (
                    crd["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    storage,
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "provisioningrequestconfigs.kueue.x-k8s.io".to_owned(),
                    "v1beta2".to_owned()
                ),
                (
                    "provisioningrequests.autoscaling.x-k8s.io".to_owned(),
                    VERSION.to_owned()
                ),
            ]
        );
        for crd in definitions() {
            assert!(crd["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION].is_string());
        }
    }
}
