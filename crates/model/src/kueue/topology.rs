//! Kueue's `Topology` kind (`apis/kueue/v1beta2/topology_types.go`): the ordered node labels
//! (block, rack, hostname, …) Topology-Aware Scheduling groups nodes by, with the CRD's
//! validation: 1–16 levels, each a qualified label name, unique, `kubernetes.io/hostname` only
//! as the lowest level, and levels immutable unless the hostname is the lowest level before and
//! after (v1beta1: immutable), plus the PodSet annotations that ask for TAS.
//!
//! Types and schema only; the placement itself is `tessera_queue::tas`'s.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::refine::{atomic, cel, min_max_items, min_max_length};

/// `kueue.x-k8s.io/podset-required-topology`: all pods in one domain of this level.
pub const PODSET_REQUIRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-required-topology";
/// `kueue.x-k8s.io/podset-preferred-topology`: one domain of this level if possible, else
/// the next level up.
pub const PODSET_PREFERRED_TOPOLOGY_ANNOTATION: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// `kueue.x-k8s.io/podset-unconstrained-topology`: TAS without a level constraint.
pub const PODSET_UNCONSTRAINED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-unconstrained-topology";
/// `kueue.x-k8s.io/podset-slice-required-topology`: each slice in one domain of this level.
pub const PODSET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION: &str =
    "kueue.x-k8s.io/podset-slice-required-topology";
/// `kueue.x-k8s.io/podset-slice-size`: pods per slice.
pub const PODSET_SLICE_SIZE_ANNOTATION: &str = "kueue.x-k8s.io/podset-slice-size";
/// `kueue.x-k8s.io/podset-group-name`: PodSets placed together (a leader and its workers).
pub const PODSET_GROUP_NAME_ANNOTATION: &str = "kueue.x-k8s.io/podset-group-name";
/// The scheduling gate a TAS pod holds until its domain's node selector is injected.
pub const TOPOLOGY_SCHEDULING_GATE: &str = "kueue.x-k8s.io/topology";

/// The hostname label, allowed only as the lowest level.
const HOSTNAME: &str = "kubernetes.io/hostname";

/// A qualified label name (`+kubebuilder:validation:Pattern` on `nodeLabel`).
const LABEL_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";

/// The v1beta2 rules on `spec.levels`, as `(rule, message)`.
pub const LEVELS_RULES_V1BETA2: &[(&str, &str)] = &[
    (
        "self == oldSelf || (self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname' && oldSelf[size(oldSelf) - 1].nodeLabel == 'kubernetes.io/hostname')",
        "levels are mutable only when kubernetes.io/hostname is the lowest level both before and after the change",
    ),
    UNIQUE_RULE,
    HOSTNAME_LOWEST_RULE,
];

/// The v1beta1 rules on `spec.levels`: the levels never change.
pub const LEVELS_RULES_V1BETA1: &[(&str, &str)] = &[
    ("self == oldSelf", "field is immutable"),
    UNIQUE_RULE,
    HOSTNAME_LOWEST_RULE,
];

const UNIQUE_RULE: (&str, &str) = (
    "size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0",
    "must be unique",
);

const HOSTNAME_LOWEST_RULE: (&str, &str) = (
    "size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0 || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'",
    "the kubernetes.io/hostname label can only be used at the lowest level of topology",
);

/// `spec` of a Topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// levels define the levels of topology.
    #[schemars(transform = min_max_items::<1, 16>, transform = atomic, transform = levels_rules)]
    pub levels: Vec<TopologyLevel>,
}

/// One level of a Topology.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologyLevel {
    /// nodeLabel indicates the name of the node label for a specific topology level.
    #[schemars(transform = min_max_length::<1, 316>, transform = label_pattern)]
    pub node_label: String,
}

fn levels_rules(schema: &mut schemars::Schema) {
    cel(schema, LEVELS_RULES_V1BETA2);
}

fn label_pattern(schema: &mut schemars::Schema) {
    schema.insert("pattern".into(), serde_json::json!(LABEL_PATTERN));
}

impl TopologySpec {
    /// The level labels, top first.
    pub fn level_labels(&self) -> Vec<String> {
        self.levels
            .iter()
            .map(|level| level.node_label.clone())
            .collect()
    }

    /// Whether the lowest level is the hostname (leaves are single nodes).
    pub fn lowest_level_is_hostname(&self) -> bool {
        self.levels
            .last()
            .is_some_and(|level| level.node_label == HOSTNAME)
    }
}
