//! The cluster topology file: which node twins exist, with what capacity, labels, taints and
//! addresses.
//!
//! ```yaml
//! apiVersion: tessera.dev/v1alpha1
//! kind: ClusterTopology
//! pools:
//! - name: cpu                 # nodes are named <name>-1 … <name>-<count>
//!   count: 2
//!   capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
//!   labels: {node-role.kubernetes.io/worker: ""}
//!   taints: [{key: dedicated, value: batch, effect: NoSchedule}]
//! ```
//!
//! Parsing is strict (unknown fields are errors naming their path) and validated (names,
//! quantities, taint effects). Knows nothing about the API server.

use std::collections::BTreeMap;

use serde::Deserialize;
use tessera_model::Quantity;

/// The built-in lab topology used when no file is given.
pub const DEFAULT_TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110", ephemeral-storage: 200Gi}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: cpu
- name: gpu
  count: 2
  capacity: {cpu: "64", memory: 512Gi, pods: "110", ephemeral-storage: 1Ti}
  labels:
    node-role.kubernetes.io/worker: ""
    tessera.dev/pool: gpu
    topology.kubernetes.io/zone: lab-a
"#;

/// A cluster topology.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Topology {
    /// Must be `tessera.dev/v1alpha1`.
    pub api_version: String,
    /// Must be `ClusterTopology`.
    pub kind: String,
    /// Optional metadata (a name).
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, serde_json::Value>>,
    /// Groups of identical nodes.
    pub pools: Vec<Pool>,
}

/// A group of identical nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Pool {
    /// Pool name; nodes are `<name>-<index>` from 1.
    pub name: String,
    /// How many nodes.
    pub count: u32,
    /// Resource capacity of each node.
    pub capacity: BTreeMap<String, String>,
    /// Resources held back from pods (allocatable = capacity − reserved).
    #[serde(default)]
    pub reserved: BTreeMap<String, String>,
    /// Labels of each node (the standard hostname/os/arch labels are added).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints of each node.
    #[serde(default)]
    pub taints: Vec<Taint>,
}

/// A node taint.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value.
    #[serde(default)]
    pub value: String,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    pub effect: String,
}

/// Why a topology is not usable.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The YAML does not parse or has unknown fields.
    #[error("topology: {0}")]
    Parse(String),
    /// A value is invalid.
    #[error("topology: {field}: {message}")]
    Invalid {
        /// The field path.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// One node to run, expanded from a pool.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSpec {
    /// Node name.
    pub name: String,
    /// Position among all nodes (from 0), used for addresses and pod CIDRs.
    pub index: u32,
    /// Pool name.
    pub pool: String,
    /// Capacity, canonical quantities.
    pub capacity: BTreeMap<String, Quantity>,
    /// Allocatable, canonical quantities.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
}

impl NodeSpec {
    /// The node's internal IP address.
    pub fn internal_ip(&self) -> String {
        format!("10.0.{}.{}", self.index / 250, self.index % 250 + 2)
    }

    /// The node's pod CIDR.
    pub fn pod_cidr(&self) -> String {
        format!("10.244.{}.0/24", self.index)
    }
}

impl Topology {
    /// Parses and validates a topology document.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        let topology: Topology =
            serde_saphyr::from_str(text).map_err(|e| TopologyError::Parse(e.to_string()))?;
        topology.validate()?;
        Ok(topology)
    }

    /// The built-in lab topology.
    pub fn default_lab() -> Topology {
        Topology::parse(DEFAULT_TOPOLOGY).expect("the built-in topology is valid")
    }

    fn validate(&self) -> Result<(), TopologyError> {
        let invalid =
            |field: String, message: String| Err(TopologyError::Invalid { field, message });
        if self.api_version != "tessera.dev/v1alpha1" {
            return invalid(
                "apiVersion".into(),
                format!("must be tessera.dev/v1alpha1, got {:?}", self.api_version),
            );
        }
        if self.kind != "ClusterTopology" {
            return invalid(
                "kind".into(),
                format!("must be ClusterTopology, got {:?}", self.kind),
            );
        }
        if self.pools.is_empty() {
            return invalid("pools".into(), "at least one pool is required".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let at = |field: &str| format!("pools[{i}].{field}");
            let label_ok = !pool.name.is_empty()
                && pool.name.len() <= 50
                && pool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !pool.name.starts_with('-')
                && !pool.name.ends_with('-');
            if !label_ok {
                return invalid(
                    at("name"),
                    format!(
                        "{:?} must be a lowercase DNS label of at most 50 characters",
                        pool.name
                    ),
                );
            }
            if !names.insert(pool.name.clone()) {
                return invalid(at("name"), format!("duplicate pool name {:?}", pool.name));
            }
            if pool.count == 0 || pool.count > 5000 {
                return invalid(
                    at("count"),
                    format!("must be between 1 and 5000, got {}", pool.count),
                );
            }
            for (map, field) in [(&pool.capacity, "capacity"), (&pool.reserved, "reserved")] {
                for (resource, value) in map {
                    if let Err(error) = value.parse::<Quantity>() {
                        return invalid(
                            format!("{}.{resource}", at(field)),
                            format!("{value:?}: {error}"),
                        );
                    }
                }
            }
            for resource in ["cpu", "memory", "pods"] {
                if !pool.capacity.contains_key(resource) {
                    return invalid(format!("{}.{resource}", at("capacity")), "required".into());
                }
            }
            for (t, taint) in pool.taints.iter().enumerate() {
                if !matches!(
                    taint.effect.as_str(),
                    "NoSchedule" | "PreferNoSchedule" | "NoExecute"
                ) {
                    return invalid(
                        format!("{}[{t}].effect", at("taints")),
                        format!(
                            "{:?} must be NoSchedule, PreferNoSchedule or NoExecute",
                            taint.effect
                        ),
                    );
                }
                if taint.key.is_empty() {
                    return invalid(format!("{}[{t}].key", at("taints")), "required".into());
                }
            }
        }
        Ok(())
    }

    /// Every node the topology describes, in order.
    pub fn nodes(&self) -> Vec<NodeSpec> {
        let mut nodes = Vec::new();
        let mut index = 0;
        for pool in &self.pools {
            let parse = |map: &BTreeMap<String, String>| -> BTreeMap<String, Quantity> {
                map.iter()
                    .filter_map(|(k, v)| v.parse().ok().map(|q| (k.clone(), q)))
                    .collect()
            };
            let capacity = parse(&pool.capacity);
            let reserved = parse(&pool.reserved);
            let allocatable: BTreeMap<String, Quantity> = capacity
                .iter()
                .map(|(k, v)| {
                    let held = reserved.get(k).copied().unwrap_or(Quantity::ZERO);
                    let left = v
                        .checked_sub(&held)
                        .filter(|q| *q >= Quantity::ZERO)
                        .unwrap_or(Quantity::ZERO);
                    (k.clone(), left)
                })
                .collect();
            for n in 1..=pool.count {
                let name = format!("{}-{n}", pool.name);
                let mut labels = pool.labels.clone();
                labels.insert("kubernetes.io/hostname".into(), name.clone());
                labels.insert("kubernetes.io/os".into(), "linux".into());
                labels.insert("kubernetes.io/arch".into(), "amd64".into());
                labels.insert("beta.kubernetes.io/os".into(), "linux".into());
                labels.insert("beta.kubernetes.io/arch".into(), "amd64".into());
                nodes.push(NodeSpec {
                    name,
                    index,
                    pool: pool.name.clone(),
                    capacity: capacity.clone(),
                    allocatable: allocatable.clone(),
                    labels,
                    taints: pool.taints.clone(),
                });
                index += 1;
            }
        }
        nodes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_lab_expands_to_named_nodes() {
        let nodes = Topology::default_lab().nodes();
        let names: Vec<_> = nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["cpu-1", "cpu-2", "gpu-1", "gpu-2"]);
        assert_eq!(nodes[2].pod_cidr(), "10.244.2.0/24");
        assert_eq!(nodes[0].labels["kubernetes.io/hostname"], "cpu-1");
        assert_eq!(nodes[0].capacity["memory"].to_canonical(), "64Gi");
    }

    #[test]
    fn reserved_resources_reduce_allocatable() {
        let topology = Topology::parse(
            "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: a\n  count: 1\n  capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}\n  reserved: {cpu: 500m, memory: 1Gi}\n",
        )
        .unwrap();
        let node = &topology.nodes()[0];
        assert_eq!(node.allocatable["cpu"].to_canonical(), "7500m");
        assert_eq!(node.allocatable["memory"].to_canonical(), "31Gi");
    }

    #[test]
    fn bad_topologies_name_the_field() {
        let base = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n";
        let table = [
            (
                "- name: a\n  count: 1\n  capacity: {cpu: x, memory: 1Gi, pods: \"1\"}\n",
                "pools[0].capacity.cpu",
            ),
            (
                "- name: A\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n",
                "pools[0].name",
            ),
            (
                "- name: a\n  count: 0\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n",
                "pools[0].count",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", pods: \"1\"}\n",
                "pools[0].capacity.memory",
            ),
            (
                "- name: a\n  count: 1\n  capacity: {cpu: \"1\", memory: 1Gi, pods: \"1\"}\n  taints: [{key: k, effect: Never}]\n",
                "pools[0].taints[0].effect",
            ),
        ];
        for (pools, field) in table {
            let error = Topology::parse(&format!("{base}{pools}"))
                .unwrap_err()
                .to_string();
            assert!(error.contains(field), "{error} should name {field}");
        }
        let unknown = Topology::parse(&format!("{base}- name: a\n  count: 1\n  cpus: 3\n  capacity: {{cpu: \"1\", memory: 1Gi, pods: \"1\"}}\n"))
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("cpus"), "{unknown}");
        assert!(Topology::parse("pools: [").is_err());
    }
}
