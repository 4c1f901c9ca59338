//! The node twins' specs, shared by the pod runner, the heartbeat, the containers and their
//! telemetry: the topology's nodes at start, changed while the twins run when a maintenance
//! plan repartitions a node's GPUs, adds a rotation's replacement or removes the node it
//! replaced.
//!
//! Knows only the map; what a change makes of a spec is `tessera_node::node_changes`'.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use tessera_node::topology::NodeSpec;

/// Node specs by name, shared.
#[derive(Debug, Clone, Default)]
pub struct Specs(Arc<RwLock<BTreeMap<String, Arc<NodeSpec>>>>);

impl Specs {
    /// Specs of `nodes`.
    pub fn new(nodes: impl IntoIterator<Item = NodeSpec>) -> Specs {
        let map = nodes
            .into_iter()
            .map(|spec| (spec.name.clone(), Arc::new(spec)))
            .collect();
        Specs(Arc::new(RwLock::new(map)))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<NodeSpec>>> {
        self.0.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<NodeSpec>>> {
        self.0.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The spec of `node`, if a twin runs it.
    pub fn get(&self, node: &str) -> Option<Arc<NodeSpec>> {
        self.read().get(node).cloned()
    }

    /// Every spec, in name order.
    pub fn all(&self) -> Vec<Arc<NodeSpec>> {
        self.read().values().cloned().collect()
    }

    /// How many nodes the twins run.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the twins run no node.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Sets (adds or replaces) a node's spec.
    pub fn insert(&self, spec: NodeSpec) {
        self.write().insert(spec.name.clone(), Arc::new(spec));
    }

    /// Stops running `node`; its spec, if it had one.
    pub fn remove(&self, node: &str) -> Option<Arc<NodeSpec>> {
        self.write().remove(node)
    }

    /// The address index after every node's (a new node's IP and pod CIDR come from it).
    pub fn next_index(&self) -> u32 {
        self.read()
            .values()
            .map(|s| s.index.saturating_add(1))
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_node::topology::Topology;

    #[test]
    fn specs_change_in_place_for_every_holder() {
        let lab = Topology::default_lab();
        let specs = Specs::new(lab.nodes());
        let seen_by_heartbeat = specs.clone();
        let count = specs.len();
        let next = specs.next_index();
        assert_eq!(usize::try_from(next).ok(), Some(count));
        let old = specs.get("cpu-1").expect("cpu-1");
        specs.insert(old.replacement("cpu-1-r", next));
        assert!(specs.remove("cpu-1").is_some());
        assert!(seen_by_heartbeat.get("cpu-1").is_none());
        assert_eq!(
            seen_by_heartbeat.get("cpu-1-r").map(|s| s.index),
            Some(next)
        );
        assert_eq!(specs.next_index(), next + 1);
        assert_eq!(seen_by_heartbeat.len(), count);
    }
}
