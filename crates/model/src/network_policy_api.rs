//! The CustomResourceDefinitions of the network-policy-api project (`policy.networking.k8s.io`)
//! as upstream publishes them: AdminNetworkPolicy and BaselineAdminNetworkPolicy (`v1alpha1`,
//! release v0.1.7, the last to carry them) and ClusterNetworkPolicy (`v1alpha2`), bundled
//! verbatim (JSON of the published YAML, `data/README.md`) so `tessera up` serves the
//! cluster-wide policy kinds with no install.
//!
//! Produces JSON only; installing is the bootstrap's business, evaluating the policies
//! `tessera-netpol`'s.

use serde_json::Value;

/// The API group of the cluster-wide policy kinds.
pub const GROUP: &str = "policy.networking.k8s.io";

/// The cluster-wide kinds as (version, kind, plural), in evaluation order of their tiers'
/// introduction.
pub const KINDS: [(&str, &str, &str); 3] = [
    ("v1alpha1", "AdminNetworkPolicy", "adminnetworkpolicies"),
    (
        "v1alpha1",
        "BaselineAdminNetworkPolicy",
        "baselineadminnetworkpolicies",
    ),
    ("v1alpha2", "ClusterNetworkPolicy", "clusternetworkpolicies"),
];

const PUBLISHED: [&str; 3] = [
    include_str!("../data/crd-adminnetworkpolicies.json"),
    include_str!("../data/crd-baselineadminnetworkpolicies.json"),
    include_str!("../data/crd-clusternetworkpolicies.json"),
];

/// The three definitions, each with a bundle hash of its spec.
pub fn definitions() -> Vec<Value> {
    crate::provisioning::bundle(&PUBLISHED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kueue::crd::BUNDLE_HASH_ANNOTATION;

    #[test]
    fn every_kind_is_bundled_with_its_published_version_and_scope() {
        let bundled: Vec<(String, String, String, String)> = definitions()
            .iter()
            .map(|crd| {
                let versions = crd["spec"]["versions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let storage = versions
                    .iter()
                    .find(|v| v["storage"] == true)
                    .and_then(|v| v["name"].as_str())
                    .unwrap_or_default();
                (
                    crd["spec"]["group"].as_str().unwrap_or_default().to_owned(),
                    storage.to_owned(),
                    crd["spec"]["names"]["kind"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    crd["spec"]["scope"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let expected: Vec<(String, String, String, String)> = KINDS
            .iter()
            .map(|(version, kind, _)| {
                (
                    GROUP.to_owned(),
                    (*version).to_owned(),
                    (*kind).to_owned(),
                    "Cluster".to_owned(),
                )
            })
            .collect();
        assert_eq!(bundled, expected);
        for (crd, (_, _, plural)) in definitions().iter().zip(KINDS) {
            assert_eq!(crd["spec"]["names"]["plural"], *plural);
            assert!(crd["metadata"]["annotations"][BUNDLE_HASH_ANNOTATION].is_string());
        }
    }
}
