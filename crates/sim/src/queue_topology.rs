//! The Topology-Aware Scheduling part of Kueue's scheduler-performance generator
//! (`runner/generator/topology_generator.go` and the TAS fields of `generator.go`): the
//! `topology` section (levels with their node labels and counts, the node level's capacity),
//! the `resourceFlavor` section, the Nodes the runner creates from them (one per combination
//! of level values, labelled `<level>-<i>` per level, named as `buildNodeName` names them) and
//! a workload template's PodSet topology request (`tasConstraint` with `tasLevel` and
//! `sliceSize`).
//!
//! Knows nothing of quota, queueing or time; `queue_scenario` owns the rest of the schema and
//! `queue_timeline` replays what this describes.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_model::quantity::Quantity;
use tessera_queue::amount::resource_value;
use tessera_queue::tas::TopologyRequest;

use crate::queue_scenario::{ScenarioError, Text};

/// `defaultResourceFlavorName`: the flavor of configurations without a `resourceFlavor`.
pub const DEFAULT_FLAVOR: &str = "rf";
/// `tasNodeGroupLabel`: every generated Node carries it with the value [`TAS_NODE_GROUP`].
pub const TAS_NODE_GROUP_LABEL: &str = "tas-node-group";
/// The value of [`TAS_NODE_GROUP_LABEL`] on Nodes and in a TAS flavor's `nodeLabels`.
pub const TAS_NODE_GROUP: &str = "tas";
/// `CleanupLabel`: the runner labels what it creates with it (value `true`).
pub const CLEANUP_LABEL: &str = "kueue.x-k8s.io/performance-scheduler-cleanup";
/// The node level's capacity when the configuration gives none.
const DEFAULT_NODE_CPU: &str = "96";
const DEFAULT_NODE_MEMORY: &str = "256Gi";
/// Every generated Node's `pods` allocatable.
const NODE_PODS: i64 = 110;

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CapacitySpec {
    #[serde(default)]
    cpu: Option<Text>,
    #[serde(default)]
    memory: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LevelSpec {
    name: String,
    count: usize,
    node_label: String,
    #[serde(default)]
    capacity: CapacitySpec,
}

#[derive(Debug, Deserialize)]
pub(crate) struct TopologySpec {
    name: String,
    levels: Vec<LevelSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FlavorSpec {
    name: String,
    #[serde(default)]
    node_label: Option<String>,
    #[serde(default)]
    topology_name: Option<String>,
}

/// One level of the `topology` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyLevel {
    /// `name`: the prefix of its label values (`<name>-<i>`) and of the node name's part.
    pub name: String,
    /// `count`: domains of this level under each domain of the level above.
    pub count: usize,
    /// `nodeLabel`: the label key, a level of the Topology object.
    pub node_label: String,
}

/// The `topology` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyConfig {
    /// The Topology object's name.
    pub name: String,
    /// Its levels, top first.
    pub levels: Vec<TopologyLevel>,
    /// Every Node's allocatable: the node level's capacity (milli-CPU, bytes) and 110 pods.
    pub node_allocatable: BTreeMap<String, i64>,
}

/// The `resourceFlavor` section as the runner creates the ResourceFlavor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlavorConfig {
    /// `metadata.name`.
    pub name: String,
    /// `spec.nodeLabels` (`{<nodeLabel>: tas}` with a topology, else none).
    pub node_labels: BTreeMap<String, String>,
    /// `spec.topologyName`.
    pub topology_name: Option<String>,
}

impl Default for FlavorConfig {
    fn default() -> FlavorConfig {
        FlavorConfig {
            name: DEFAULT_FLAVOR.to_owned(),
            node_labels: BTreeMap::new(),
            topology_name: None,
        }
    }
}

/// One Node the runner creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// `node-<b0>-<r2>-<n15>`: the first letter and number of each level value.
    pub name: String,
    /// The level labels, [`TAS_NODE_GROUP_LABEL`] and [`CLEANUP_LABEL`].
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable` in canonical units.
    pub allocatable: BTreeMap<String, i64>,
}

/// A PodSet's topology request as `generateWlSet` builds it from `tasConstraint`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PodSetTopology {
    /// `required`: `topologyRequest.required` = the level.
    Required(String),
    /// `preferred`: `topologyRequest.preferred` = the level.
    Preferred(String),
    /// `balanced`: `podSetSliceRequiredTopology` = the level, with `podSetSliceSize` when
    /// `sliceSize` is above zero.
    Balanced {
        /// The slice level.
        level: String,
        /// Pods per slice.
        slice_size: Option<i32>,
    },
}

impl PodSetTopology {
    /// What the runner builds for `tasConstraint` at `tasLevel`; `None` for any other
    /// constraint (the runner's switch then sets no request, the PodSet keeps its pods).
    pub fn from_constraint(constraint: &str, level: &str, slice_size: i32) -> Option<Self> {
        let level = level.to_owned();
        match constraint {
            "required" => Some(PodSetTopology::Required(level)),
            "preferred" => Some(PodSetTopology::Preferred(level)),
            "balanced" => Some(PodSetTopology::Balanced {
                level,
                slice_size: (slice_size > 0).then_some(slice_size),
            }),
            _ => None,
        }
    }

    /// The request the queue core reads (as `TopologyRequest::from_api` reads the object).
    pub fn request(&self) -> TopologyRequest {
        match self {
            PodSetTopology::Required(level) => TopologyRequest {
                required: Some(level.clone()),
                ..TopologyRequest::default()
            },
            PodSetTopology::Preferred(level) => TopologyRequest {
                preferred: Some(level.clone()),
                ..TopologyRequest::default()
            },
            PodSetTopology::Balanced { level, slice_size } => {
                TopologyRequest::default().with_slice(level, *slice_size)
            }
        }
    }

    /// The Workload's `spec.podSets[].topologyRequest`.
    pub fn api_fields(&self) -> serde_json::Value {
        match self {
            PodSetTopology::Required(level) => serde_json::json!({"required": level}),
            PodSetTopology::Preferred(level) => serde_json::json!({"preferred": level}),
            PodSetTopology::Balanced { level, slice_size } => {
                let mut fields = serde_json::json!({"podSetSliceRequiredTopology": level});
                if let Some(size) = slice_size {
                    fields["podSetSliceSize"] = serde_json::json!(size);
                }
                fields
            }
        }
    }
}

fn canonical(
    resource: &'static str,
    field: &'static str,
    text: &str,
) -> Result<i64, ScenarioError> {
    let quantity: Quantity = text.parse().map_err(|_| ScenarioError::Quantity {
        field,
        text: text.to_owned(),
    })?;
    Ok(resource_value(resource, &quantity))
}

impl TopologyConfig {
    /// Reads the section as `generateTopologyNodes` does: at least two levels; the last
    /// level's capacity (96 CPU and 256Gi by default) for every Node.
    pub(crate) fn parse(spec: TopologySpec) -> Result<TopologyConfig, ScenarioError> {
        let Some(node_level) = spec.levels.last() else {
            return Err(ScenarioError::Parse(
                "topology must have at least 2 levels, got 0".into(),
            ));
        };
        if spec.levels.len() < 2 {
            return Err(ScenarioError::Parse(format!(
                "topology must have at least 2 levels, got {}",
                spec.levels.len()
            )));
        }
        let text = |value: &Option<Text>, default: &str| {
            value
                .as_ref()
                .map(|t| t.0.clone())
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        let cpu = text(&node_level.capacity.cpu, DEFAULT_NODE_CPU);
        let memory = text(&node_level.capacity.memory, DEFAULT_NODE_MEMORY);
        let node_allocatable = BTreeMap::from([
            ("cpu".to_owned(), canonical("cpu", "capacity.cpu", &cpu)?),
            (
                "memory".to_owned(),
                canonical("memory", "capacity.memory", &memory)?,
            ),
            ("pods".to_owned(), NODE_PODS),
        ]);
        Ok(TopologyConfig {
            name: spec.name,
            levels: spec
                .levels
                .into_iter()
                .map(|level| TopologyLevel {
                    name: level.name,
                    count: level.count,
                    node_label: level.node_label,
                })
                .collect(),
            node_allocatable,
        })
    }

    /// The Topology object's `spec.levels[].nodeLabel`, top first.
    pub fn level_labels(&self) -> Vec<String> {
        self.levels.iter().map(|l| l.node_label.clone()).collect()
    }

    /// The Nodes `generateNodesRecursive` creates, in its order (the top level's first value
    /// first, the lowest level varying fastest).
    pub fn nodes(&self) -> Vec<NodePlan> {
        let total: usize = self.levels.iter().map(|l| l.count).product();
        let mut nodes = Vec::with_capacity(total);
        let mut values: Vec<String> = Vec::with_capacity(self.levels.len());
        self.add_nodes(0, &mut values, &mut nodes);
        nodes
    }

    fn add_nodes(&self, level: usize, values: &mut Vec<String>, nodes: &mut Vec<NodePlan>) {
        let Some(current) = self.levels.get(level) else {
            let mut labels = BTreeMap::from([
                (CLEANUP_LABEL.to_owned(), "true".to_owned()),
                (TAS_NODE_GROUP_LABEL.to_owned(), TAS_NODE_GROUP.to_owned()),
            ]);
            for (level, value) in self.levels.iter().zip(values.iter()) {
                labels.insert(level.node_label.clone(), value.clone());
            }
            nodes.push(NodePlan {
                name: node_name(values),
                labels,
                allocatable: self.node_allocatable.clone(),
            });
            return;
        };
        for index in 0..current.count {
            values.push(format!("{}-{index}", current.name));
            self.add_nodes(level + 1, values, nodes);
            values.pop();
        }
    }
}

/// `buildNodeName`: `node`, then per value `-`, its first character and what follows its
/// first `-` up to the next.
fn node_name(values: &[String]) -> String {
    let mut name = String::from("node");
    for value in values {
        name.push('-');
        name.extend(value.chars().next());
        name.push_str(value.split('-').nth(1).unwrap_or_default());
    }
    name
}

impl FlavorConfig {
    /// Reads the section as `generateResourceFlavor` creates the flavor: with a topology, its
    /// `nodeLabel` is required and selects the Nodes labelled `tas`.
    pub(crate) fn parse(spec: Option<FlavorSpec>) -> Result<FlavorConfig, ScenarioError> {
        let Some(spec) = spec else {
            return Ok(FlavorConfig::default());
        };
        let topology_name = spec.topology_name.filter(|name| !name.is_empty());
        let mut node_labels = BTreeMap::new();
        if topology_name.is_some() {
            let Some(label) = spec.node_label.filter(|label| !label.is_empty()) else {
                return Err(ScenarioError::Parse(
                    "resourceFlavor.nodeLabel is required when TAS is enabled".into(),
                ));
            };
            node_labels.insert(label, TAS_NODE_GROUP.to_owned());
        }
        Ok(FlavorConfig {
            name: spec.name,
            node_labels,
            topology_name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_follow_build_node_name() {
        // (level values, name)
        let cases: &[(&[&str], &str)] = &[
            (&[], "node"),
            (&["block-0", "rack-2", "node-15"], "node-b0-r2-n15"),
            (&["zone-10", "host-3"], "node-z10-h3"),
        ];
        for (values, want) in cases {
            let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
            assert_eq!(node_name(&values), *want);
        }
    }

    #[test]
    fn constraints_build_the_runners_topology_requests() {
        const RACK: &str = "cloud.provider.com/topology-rack";
        // (tasConstraint, sliceSize, request, topologyRequest fields)
        let cases: Vec<(&str, i32, Option<TopologyRequest>, serde_json::Value)> = vec![
            (
                "required",
                0,
                Some(TopologyRequest {
                    required: Some(RACK.into()),
                    ..Default::default()
                }),
                serde_json::json!({"required": RACK}),
            ),
            (
                "preferred",
                3,
                Some(TopologyRequest {
                    preferred: Some(RACK.into()),
                    ..Default::default()
                }),
                serde_json::json!({"preferred": RACK}),
            ),
            (
                "balanced",
                4,
                Some(TopologyRequest::default().with_slice(RACK, Some(4))),
                serde_json::json!({"podSetSliceRequiredTopology": RACK, "podSetSliceSize": 4}),
            ),
            (
                "balanced",
                0,
                Some(TopologyRequest::default().with_slice(RACK, None)),
                serde_json::json!({"podSetSliceRequiredTopology": RACK}),
            ),
            ("unconstrained", 0, None, serde_json::Value::Null),
        ];
        for (constraint, size, request, fields) in cases {
            let topology = PodSetTopology::from_constraint(constraint, RACK, size);
            assert_eq!(topology.as_ref().map(PodSetTopology::request), request);
            assert_eq!(
                topology.map_or(serde_json::Value::Null, |t| t.api_fields()),
                fields,
                "{constraint}"
            );
        }
    }
}
