//! The `MaintenancePlan` CustomResourceDefinition (`maintenanceplans.tessera.dev`, cluster-scoped
//! like the GPU operator's `ClusterPolicy`, since a plan acts on nodes): the spec [`crate::spec`]
//! reads, the status [`crate::status`] writes (served through the `status` subresource, so only
//! the controller's status writes change it), and the printer columns Kind, Phase, Nodes and Age.
//! Carries Tessera's bundle hash so a newer Tessera upgrades what an older one installed.
//!
//! Produces JSON only; installing it is the bootstrap's business.

use serde_json::{Value, json};
use tessera_model::kueue::crd::bundled_definition;

use crate::spec::{API_VERSION, KIND};

/// The API group of plans.
pub const GROUP: &str = "tessera.dev";
/// The version plans are served and stored at.
pub const VERSION: &str = "v1alpha1";
/// The plural resource name.
pub const PLURAL: &str = "maintenanceplans";

fn version_schema() -> Value {
    let version = json!({"type": "object", "required": ["version"],
        "properties": {"version": {"type": "string"}}});
    let free = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "description": "MaintenancePlan declares a staged maintenance of a pool of nodes: a driver upgrade, a MIG repartition, a kubelet version or a node rotation, run through the GPU operator's upgrade state machine.",
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
                    "driverUpgrade": version.clone(),
                    "kubernetesVersion": version,
                    "migRepartition": {"type": "object", "required": ["layout"],
                        "properties": {"layout": {"x-kubernetes-preserve-unknown-fields": true}}},
                    "nodeRotation": {"type": "object"},
                    "policy": free.clone(),
                    "canary": {"type": "integer", "minimum": 0},
                    "batchSize": {"type": "integer", "minimum": 1},
                    "paused": {"type": "boolean"}
                }
            },
            "status": free
        }
    })
}

/// The definition, with the bundle hash of its spec
/// ([`tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION`]).
pub fn definition() -> Value {
    let (group, version) = API_VERSION.split_once('/').unwrap_or((GROUP, VERSION));
    let spec = json!({
        "group": group,
        "names": {"kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL,
                  "singular": "maintenanceplan", "shortNames": ["mp"]},
        "scope": "Cluster",
        "versions": [{
            "name": version,
            "served": true,
            "storage": true,
            "schema": {"openAPIV3Schema": version_schema()},
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Kind", "type": "string", "jsonPath": ".status.kind",
                 "description": "What the plan changes"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                {"name": "Nodes", "type": "string", "jsonPath": ".status.progress",
                 "description": "Nodes done out of the plan's nodes"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
            ]
        }]
    });
    bundled_definition(&format!("{PLURAL}.{group}"), spec, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_definition_serves_what_the_reader_and_status_use() {
        let crd = definition();
        assert_eq!(crd["metadata"]["name"], "maintenanceplans.tessera.dev");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        let v = &crd["spec"]["versions"][0];
        assert_eq!(v["name"], "v1alpha1");
        assert_eq!(v["subresources"], json!({"status": {}}));
        let columns: Vec<&str> = v["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(columns, ["Kind", "Phase", "Nodes", "Age"]);
        // Every field the spec reader knows is in the schema.
        let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in crate::spec::SPEC_FIELDS {
            assert!(spec.get(field).is_some(), "{field} is missing");
        }
        assert!(
            crd["metadata"]["annotations"][tessera_model::kueue::crd::BUNDLE_HASH_ANNOTATION]
                .as_str()
                .is_some_and(|h| h.len() == 16)
        );
    }
}
