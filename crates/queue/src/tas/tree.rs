//! The static topology tree of one TAS ResourceFlavor (Kueue's `tas_topology_tree.go`):
//! domains per level built from the nodes the flavor selects, each leaf with the summed
//! allocatable of its nodes. Domain ids join the level values with `,`; when the lowest level
//! is `kubernetes.io/hostname` a leaf's id is the hostname alone.
//!
//! Knows nothing about usage, requests or how an assignment is searched (see `snapshot`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;

use crate::workload::Requests;

/// The hostname label: as the lowest level, leaves are single nodes.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The separator of level values in a domain id (`utiltas.DomainID`).
const DOMAIN_ID_SEPARATOR: &str = ",";

/// A node as TAS reads it: labels, allocatable (canonical units), taints and whether the
/// scheduler may use it (Ready and not cordoned).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopologyNode {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable` in canonical units (milli-CPU, bytes, devices, pods).
    pub allocatable: Requests,
    /// `spec.taints`.
    pub taints: Vec<Taint>,
    /// The `Ready` condition is `True` and `spec.unschedulable` is not set.
    pub schedulable_and_ready: bool,
}

/// The id of a domain whose level values are `values` (`utiltas.DomainID`).
pub fn domain_id(values: &[String]) -> String {
    values.join(DOMAIN_ID_SEPARATOR)
}

/// Whether domain `id` is `target` or below it (`TopologyDomainID.BelongsTo`); every domain
/// belongs to the empty target.
pub fn belongs_to(id: &str, target: &str) -> bool {
    target.is_empty()
        || id == target
        || id
            .strip_prefix(target)
            .is_some_and(|rest| rest.starts_with(DOMAIN_ID_SEPARATOR))
}

/// Whether a node may serve a flavor with these node labels over these levels
/// (`utiltas.NodeMatchesFlavor`, and the nodes cache's Ready/schedulable filter).
pub fn node_matches_flavor(
    node: &TopologyNode,
    flavor_node_labels: &BTreeMap<String, String>,
    levels: &[String],
) -> bool {
    node.schedulable_and_ready
        && flavor_node_labels
            .iter()
            .all(|(key, value)| node.labels.get(key) == Some(value))
        && levels.iter().all(|level| node.labels.contains_key(level))
}

/// One topology domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    /// The id within its level.
    pub id: String,
    /// The values of every level down to this one.
    pub level_values: Vec<String>,
    /// The parent domain's index, `None` at the top level.
    pub parent: Option<usize>,
    /// The children's indices.
    pub children: Vec<usize>,
    /// The leaf index when this is a lowest-level domain.
    pub leaf: Option<usize>,
}

impl Domain {
    /// The level index of this domain (0 = top).
    pub fn level(&self) -> usize {
        self.level_values.len().saturating_sub(1)
    }
}

/// A lowest-level domain with its static capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    /// The domain's index.
    pub domain: usize,
    /// The summed allocatable of the leaf's nodes.
    pub capacity: Requests,
    /// The node's index in [`TopologyTree::nodes`] when the lowest level is the hostname.
    pub node: Option<usize>,
}

/// The domains of one topology over the nodes a flavor selects.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologyTree {
    /// The Topology's level label keys, top first.
    pub levels: Vec<String>,
    /// Every domain, addressed by index.
    pub domains: Vec<Domain>,
    /// Domain index by id, per level.
    pub per_level: Vec<BTreeMap<String, usize>>,
    /// The leaves.
    pub leaves: Vec<Leaf>,
    /// Leaf index by domain id.
    pub leaf_by_id: BTreeMap<String, usize>,
    /// Whether the lowest level is the hostname label.
    pub lowest_level_is_node: bool,
    /// The nodes the tree was built from (those matching the flavor).
    pub nodes: Vec<TopologyNode>,
    /// Leaf index by node name.
    pub node_leaf: BTreeMap<String, usize>,
}

impl TopologyTree {
    /// The tree over `nodes` that match the flavor's node labels and carry every level label.
    pub fn new(
        levels: &[String],
        flavor_node_labels: &BTreeMap<String, String>,
        nodes: &[TopologyNode],
    ) -> TopologyTree {
        let mut tree = TopologyTree {
            levels: levels.to_vec(),
            domains: Vec::new(),
            per_level: vec![BTreeMap::new(); levels.len()],
            leaves: Vec::new(),
            leaf_by_id: BTreeMap::new(),
            lowest_level_is_node: levels.last().is_some_and(|level| level == HOSTNAME_LABEL),
            nodes: Vec::new(),
            node_leaf: BTreeMap::new(),
        };
        if levels.is_empty() {
            return tree;
        }
        for node in nodes {
            if node_matches_flavor(node, flavor_node_labels, levels) {
                tree.add_node(node);
            }
        }
        tree
    }

    fn add_node(&mut self, node: &TopologyNode) {
        let values: Vec<String> = self
            .levels
            .iter()
            .map(|level| node.labels.get(level).cloned().unwrap_or_default())
            .collect();
        let id = if self.lowest_level_is_node {
            values.last().cloned().unwrap_or_default()
        } else {
            domain_id(&values)
        };
        let node_index = self.nodes.len();
        self.nodes.push(node.clone());
        let leaf = match self.leaf_by_id.get(&id) {
            Some(&leaf) => leaf,
            None => self.add_leaf(id, values, node_index),
        };
        self.node_leaf.insert(node.name.clone(), leaf);
        let capacity = &mut self.leaves[leaf].capacity;
        for (resource, value) in &node.allocatable {
            let entry = capacity.entry(resource.clone()).or_default();
            *entry = entry.saturating_add(*value);
        }
    }

    fn add_leaf(&mut self, id: String, values: Vec<String>, node_index: usize) -> usize {
        let leaf = self.leaves.len();
        let domain = self.add_domain(id.clone(), values);
        self.domains[domain].leaf = Some(leaf);
        self.leaves.push(Leaf {
            domain,
            capacity: Requests::new(),
            node: self.lowest_level_is_node.then_some(node_index),
        });
        self.leaf_by_id.insert(id, leaf);
        leaf
    }

    /// Adds a domain and, iteratively, the ancestors it is missing.
    fn add_domain(&mut self, id: String, values: Vec<String>) -> usize {
        let index = self.push_domain(id, values);
        let mut child = index;
        loop {
            let child_values = &self.domains[child].level_values;
            if child_values.len() <= 1 {
                break;
            }
            let parent_values = child_values[..child_values.len() - 1].to_vec();
            let parent_id = domain_id(&parent_values);
            let level = parent_values.len() - 1;
            let (parent, created) = match self.per_level[level].get(&parent_id) {
                Some(&parent) => (parent, false),
                None => (self.push_domain(parent_id, parent_values), true),
            };
            self.domains[child].parent = Some(parent);
            self.domains[parent].children.push(child);
            if !created {
                break;
            }
            child = parent;
        }
        index
    }

    fn push_domain(&mut self, id: String, values: Vec<String>) -> usize {
        let index = self.domains.len();
        let level = values.len().saturating_sub(1);
        self.per_level[level].insert(id.clone(), index);
        self.domains.push(Domain {
            id,
            level_values: values,
            parent: None,
            children: Vec::new(),
            leaf: None,
        });
        index
    }

    /// The index of level `key`, if the topology has it.
    pub fn level_index(&self, key: &str) -> Option<usize> {
        self.levels.iter().position(|level| level == key)
    }

    /// The top level's key.
    pub fn highest_level(&self) -> &str {
        self.levels.first().map(String::as_str).unwrap_or_default()
    }

    /// The lowest level's key.
    pub fn lowest_level(&self) -> &str {
        self.levels.last().map(String::as_str).unwrap_or_default()
    }

    /// The top-level domains.
    pub fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        self.per_level
            .first()
            .into_iter()
            .flat_map(|level| level.values().copied())
    }
}
