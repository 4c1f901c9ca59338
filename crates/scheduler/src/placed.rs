//! The pods placed on nodes, as preemption reads them: by node, in the order they were
//! added. A pass hands the scheduler every bound pod, but only a pod that fits nowhere asks
//! for them by node, so the index is built on first use, not for every pass.
//!
//! Knows nothing of what preemption does with them.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Pod;

/// Placed pods (bound, or placed by the simulator), indexed by node on demand.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlacedPods {
    /// Each pod with its node, in the order added.
    pods: Vec<Arc<Pod>>,
    /// `pods` by node name; built from `pods` when first read.
    by_node: OnceLock<BTreeMap<String, Vec<Arc<Pod>>>>,
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
}

fn index(pods: &[Arc<Pod>]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in pods {
        if let Some(node) = node_of(pod) {
            match by_node.get_mut(node) {
                Some(on_node) => on_node.push(pod.clone()),
                None => {
                    by_node.insert(node.to_owned(), vec![pod.clone()]);
                }
            }
        }
    }
    by_node
}

impl PlacedPods {
    /// Adds a pod that names its node (one that names none is not placed).
    pub(crate) fn add(&mut self, pod: Arc<Pod>) {
        let Some(node) = node_of(&pod) else {
            return;
        };
        if let Some(by_node) = self.by_node.get_mut() {
            by_node
                .entry(node.to_owned())
                .or_default()
                .push(pod.clone());
        }
        self.pods.push(pod);
    }

    /// The pods by node name.
    pub(crate) fn by_node(&self) -> &BTreeMap<String, Vec<Arc<Pod>>> {
        self.by_node.get_or_init(|| index(&self.pods))
    }

    /// Removes the pod `namespace/name` from `node`.
    pub(crate) fn remove(&mut self, namespace: &str, name: &str, node: &str) {
        let other = |p: &Arc<Pod>| {
            p.metadata.namespace.as_deref() != Some(namespace)
                || p.metadata.name.as_deref() != Some(name)
                || node_of(p) != Some(node)
        };
        self.pods.retain(other);
        if let Some(on_node) = self.by_node.get_mut().and_then(|m| m.get_mut(node)) {
            on_node.retain(other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> Arc<Pod> {
        let mut value = serde_json::json!({"metadata": {"namespace": "ml", "name": name}, "spec": {"containers": []}});
        if let Some(node) = node {
            value["spec"]["nodeName"] = node.into();
        }
        Arc::new(serde_json::from_value(value).expect("pod"))
    }

    fn names(placed: &PlacedPods) -> Vec<(String, Vec<String>)> {
        placed
            .by_node()
            .iter()
            .map(|(node, pods)| {
                let names = pods
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                (node.clone(), names)
            })
            .collect()
    }

    fn owned(table: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        table
            .iter()
            .map(|(node, pods)| {
                (
                    node.to_string(),
                    pods.iter().map(|p| p.to_string()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn the_index_follows_adds_and_removals_before_and_after_it_is_built() {
        let mut placed = PlacedPods::default();
        placed.add(pod("a", Some("n1")));
        placed.add(pod("pending", None));
        placed.add(pod("b", Some("n2")));
        placed.add(pod("c", Some("n1")));
        placed.remove("ml", "b", "n2");
        assert_eq!(names(&placed), owned(&[("n1", &["a", "c"])]));
        // Built now: later changes go to it as well.
        placed.add(pod("d", Some("n2")));
        placed.add(pod("e", Some("n1")));
        placed.remove("ml", "a", "n1");
        placed.remove("ml", "d", "n1");
        let expected = owned(&[("n1", &["c", "e"]), ("n2", &["d"])]);
        assert_eq!(names(&placed), expected);
        // A copy rebuilt from the pods agrees with the index kept up to date.
        let rebuilt = PlacedPods {
            pods: placed.pods.clone(),
            by_node: OnceLock::new(),
        };
        assert_eq!(names(&rebuilt), expected);
    }
}
