//! ResourceFlavors and whether a PodSet may use one (`checkFlavorForPodSets` and
//! `flavorSelector` in Kueue's `pkg/scheduler/flavorassigner/flavorassigner.go`): every
//! NoSchedule or NoExecute taint of the flavor must be tolerated by the PodSet's tolerations
//! or the flavor's own, and the PodSet's nodeSelector and required node affinity must match
//! the flavor's node labels, looking only at the keys this flavor labels (other keys are for
//! other flavors or for kube-scheduler). The messages are Kueue's.
//!
//! Knows nothing about quotas, ClusterQueues or Topology-Aware Scheduling.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Taint, Toleration};
use tessera_model::{node_selector, taints};

use crate::workload::PodSet;

/// What Kueue reads of a ResourceFlavor's spec.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceFlavorSpec {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeLabels`.
    pub node_labels: BTreeMap<String, String>,
    /// `spec.nodeTaints`.
    pub node_taints: Vec<Taint>,
    /// `spec.tolerations`: added to the pods, so they count as the PodSet's own.
    pub tolerations: Vec<Toleration>,
}

/// Why a PodSet cannot use a flavor.
#[derive(Debug, Clone, PartialEq)]
pub enum FlavorMismatch {
    /// The ClusterQueue names a flavor that does not exist.
    NotFound(String),
    /// A taint no toleration tolerates.
    UntoleratedTaint {
        /// The flavor.
        flavor: String,
        /// The first untolerated taint.
        taint: Taint,
    },
    /// The nodeSelector or required node affinity excludes the flavor's labels.
    NodeAffinity(String),
}

impl fmt::Display for FlavorMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlavorMismatch::NotFound(flavor) => write!(f, "flavor {flavor} not found"),
            FlavorMismatch::UntoleratedTaint { flavor, taint } => {
                // Kueue prints the Taint struct with Go's `%s`: `{key value effect <nil>}`. Go
                // would print a set `timeAdded` as a pointer address; the time stands in.
                let time_added = taint
                    .time_added
                    .as_ref()
                    .map_or_else(|| "<nil>".to_owned(), |time| time.0.to_string());
                write!(
                    f,
                    "untolerated taint {{{} {} {} {time_added}}} in flavor {flavor}",
                    taint.key,
                    taint.value.as_deref().unwrap_or_default(),
                    taint.effect
                )
            }
            FlavorMismatch::NodeAffinity(flavor) => {
                write!(f, "flavor {flavor} doesn't match node affinity")
            }
        }
    }
}

/// Whether `pod_set` may use `flavor` (one PodSet of `checkFlavorForPodSets`).
pub fn check(flavor: &ResourceFlavorSpec, pod_set: &PodSet) -> Result<(), FlavorMismatch> {
    let untolerated = flavor.node_taints.iter().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !taints::tolerated(&pod_set.tolerations, taint)
            && !taints::tolerated(&flavor.tolerations, taint)
    });
    if let Some(taint) = untolerated {
        return Err(FlavorMismatch::UntoleratedTaint {
            flavor: flavor.name.clone(),
            taint: taint.clone(),
        });
    }
    if !selector_matches(pod_set, &flavor.node_labels) {
        return Err(FlavorMismatch::NodeAffinity(flavor.name.clone()));
    }
    Ok(())
}

/// `flavorSelector(..).Match(labels)`: the nodeSelector entries and affinity expressions on
/// the flavor's label keys must match; a term left with no expression on those keys matches
/// every flavor, so the affinity is dropped.
fn selector_matches(pod_set: &PodSet, labels: &BTreeMap<String, String>) -> bool {
    let selector_ok = pod_set
        .node_selector
        .iter()
        .filter(|(key, _)| labels.contains_key(*key))
        .all(|(key, value)| labels.get(key) == Some(value));
    if !selector_ok {
        return false;
    }
    let mut terms: Vec<NodeSelectorTerm> = Vec::new();
    for term in &pod_set.required_affinity {
        let expressions: Vec<_> = term
            .match_expressions
            .iter()
            .flatten()
            .filter(|e| labels.contains_key(&e.key))
            .cloned()
            .collect();
        if expressions.is_empty() {
            return true;
        }
        terms.push(NodeSelectorTerm {
            match_expressions: Some(expressions),
            match_fields: None,
        });
    }
    terms.is_empty()
        || terms
            .iter()
            .any(|term| node_selector::term_matches(term, "", labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flavor(
        labels: &[(&str, &str)],
        taints: serde_json::Value,
        tolerations: serde_json::Value,
    ) -> ResourceFlavorSpec {
        ResourceFlavorSpec {
            name: "f".into(),
            node_labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            node_taints: serde_json::from_value(taints).expect("taints"),
            tolerations: serde_json::from_value(tolerations).expect("tolerations"),
        }
    }

    fn pod_set(
        selector: &[(&str, &str)],
        affinity: serde_json::Value,
        tolerations: serde_json::Value,
    ) -> PodSet {
        PodSet {
            name: "main".into(),
            count: 1,
            node_selector: selector
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            required_affinity: serde_json::from_value(affinity).expect("terms"),
            tolerations: serde_json::from_value(tolerations).expect("tolerations"),
            ..PodSet::default()
        }
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> serde_json::Value {
        json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]})
    }

    // Each case: flavor labels, flavor taints, flavor tolerations, podset selector, affinity
    // terms, podset tolerations, expected message or "" for a match. The cases follow
    // flavorassigner_test.go's TestAssignFlavors selector, affinity and taint cases.
    #[test]
    fn check_matches_kueue() {
        let spot = json!([{"key": "instance", "value": "spot", "effect": "NoSchedule"}]);
        let tolerate_spot = json!([{"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}]);
        let cases: Vec<(&str, ResourceFlavorSpec, PodSet, &str)> = vec![
            (
                "untolerated taint",
                flavor(&[], spot.clone(), json!([])),
                pod_set(&[], json!([]), json!([])),
                "untolerated taint {instance spot NoSchedule <nil>} in flavor f",
            ),
            (
                "podset tolerates the taint",
                flavor(&[], spot.clone(), json!([])),
                pod_set(&[], json!([]), tolerate_spot.clone()),
                "",
            ),
            (
                "flavor's own toleration",
                flavor(&[], spot, tolerate_spot),
                pod_set(&[], json!([]), json!([])),
                "",
            ),
            (
                "PreferNoSchedule taints are ignored",
                flavor(
                    &[],
                    json!([{"key": "k", "effect": "PreferNoSchedule"}]),
                    json!([]),
                ),
                pod_set(&[], json!([]), json!([])),
                "",
            ),
            (
                "selector on the flavor's key mismatches",
                flavor(&[("type", "one")], json!([]), json!([])),
                pod_set(&[("type", "two")], json!([]), json!([])),
                "flavor f doesn't match node affinity",
            ),
            (
                "selector keys of other flavors are ignored",
                flavor(&[("type", "one")], json!([]), json!([])),
                pod_set(&[("type", "one"), ("zone", "x")], json!([]), json!([])),
                "",
            ),
            (
                "affinity on the flavor's key",
                flavor(&[("type", "one")], json!([]), json!([])),
                pod_set(&[], json!([expr("type", "In", &["two"])]), json!([])),
                "flavor f doesn't match node affinity",
            ),
            (
                "affinity terms are ORed",
                flavor(&[("type", "one")], json!([]), json!([])),
                pod_set(
                    &[],
                    json!([expr("type", "In", &["two"]), expr("type", "In", &["one"])]),
                    json!([]),
                ),
                "",
            ),
            (
                "a term without this flavor's keys matches any flavor",
                flavor(&[("type", "one")], json!([]), json!([])),
                pod_set(
                    &[],
                    json!([expr("type", "In", &["two"]), expr("zone", "In", &["a"])]),
                    json!([]),
                ),
                "",
            ),
            (
                "labelless flavor ignores a labeled selector",
                flavor(&[], json!([]), json!([])),
                pod_set(&[("x", "a")], json!([expr("x", "In", &["a"])]), json!([])),
                "",
            ),
            (
                "NotIn on the flavor's key",
                flavor(&[("x", "b"), ("y", "k")], json!([]), json!([])),
                pod_set(&[], json!([expr("x", "NotIn", &["b"])]), json!([])),
                "flavor f doesn't match node affinity",
            ),
        ];
        for (name, flavor, pod_set, want) in cases {
            let got = check(&flavor, &pod_set).err().map(|e| e.to_string());
            assert_eq!(got.as_deref().unwrap_or(""), want, "{name}");
        }
    }
}
