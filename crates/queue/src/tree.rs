//! The ClusterQueue and Cohort tree as Kueue's hierarchy manager builds it
//! (`pkg/cache/hierarchy`, `updateCohortTreeResources` in `pkg/cache/scheduler/resource_node.go`):
//! an arena of nodes with parent indices, built from specs. A ClusterQueue or Cohort naming a
//! Cohort that has no spec gets an implicit one; a Cohort whose parent chain loops (or reaches
//! a loop) is left out with every ClusterQueue under it, as Kueue leaves them out of its
//! snapshot (the ClusterQueues become inactive). Building accumulates each Cohort's
//! `SubtreeQuota` and `Usage` from its children; every walk is iterative, so a deep hierarchy
//! cannot exhaust the stack. What does not change once built is shared between copies: a copy
//! of the tree copies each node's usage only.
//!
//! Knows nothing about workloads, flavor assignment or preemption; quota arithmetic lives in
//! `quota`, dominant resource shares in `fair_sharing`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use tessera_model::quantity::Quantity;

use crate::amount::Amount;
use crate::resources::{FlavorResource, FlavorResourceQuantities};

/// One (flavor, resource) quota of a ClusterQueue or Cohort (`ResourceQuota`). A missing
/// borrowing limit is unlimited borrowing; a missing lending limit lends everything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResourceQuota {
    /// `nominalQuota`.
    pub nominal: Amount,
    /// `borrowingLimit`.
    pub borrowing_limit: Option<Amount>,
    /// `lendingLimit`.
    pub lending_limit: Option<Amount>,
}

impl ResourceQuota {
    /// The quota of `resource` from its API quantities, converted as Kueue's
    /// `createResourceQuotas` does (`Amount::from_quantity`).
    pub fn from_quantities(
        resource: &str,
        nominal: &Quantity,
        borrowing_limit: Option<&Quantity>,
        lending_limit: Option<&Quantity>,
    ) -> ResourceQuota {
        ResourceQuota {
            nominal: Amount::from_quantity(resource, nominal),
            borrowing_limit: borrowing_limit.map(|limit| Amount::from_quantity(resource, limit)),
            lending_limit: lending_limit.map(|limit| Amount::from_quantity(resource, limit)),
        }
    }
}

/// Quotas per (flavor, resource).
pub type Quotas = BTreeMap<FlavorResource, ResourceQuota>;

/// The `fairSharing.weight` Kueue assumes when none is set.
pub const DEFAULT_FAIR_WEIGHT: f64 = 1.0;

/// A fair-sharing weight from an optional API quantity (`parseFairWeight`): 1 when unset.
pub fn fair_weight(weight: Option<&Quantity>) -> f64 {
    // Kueue reads the weight with `AsFloat64Slow`; nanos / 1e9 is the same value for every
    // weight the API accepts.
    weight.map_or(DEFAULT_FAIR_WEIGHT, |weight| {
        weight.nanos() as f64 / 1_000_000_000.0
    })
}

/// What a ClusterQueue contributes to the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterQueueSpec {
    /// `metadata.name`.
    pub name: String,
    /// `spec.cohortName`, if any.
    pub cohort: Option<String>,
    /// Its resource groups' quotas.
    pub quotas: Quotas,
    /// `spec.fairSharing.weight` (see [`fair_weight`]).
    pub fair_weight: f64,
}

/// What a Cohort object contributes to the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct CohortSpec {
    /// `metadata.name`.
    pub name: String,
    /// `spec.parentName`, if any.
    pub parent: Option<String>,
    /// Its resource groups' quotas (added to the subtree's).
    pub quotas: Quotas,
    /// `spec.fairSharing.weight` (see [`fair_weight`]).
    pub fair_weight: f64,
}

/// Every ClusterQueue and Cohort object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TreeSpec {
    /// The Cohort objects.
    pub cohorts: Vec<CohortSpec>,
    /// The ClusterQueues.
    pub cluster_queues: Vec<ClusterQueueSpec>,
}

/// Why specs do not make a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// Two ClusterQueue specs share a name.
    #[error("ClusterQueue {0:?} is specified more than once")]
    DuplicateClusterQueue(String),
    /// Two Cohort specs share a name.
    #[error("Cohort {0:?} is specified more than once")]
    DuplicateCohort(String),
}

/// A node of one [`Tree`]; only meaningful for the tree that returned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub(crate) usize);

/// Whether a node is a ClusterQueue or a Cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A ClusterQueue: always a leaf.
    ClusterQueue,
    /// A Cohort, backed by an object (explicit) or only named by its children (implicit).
    Cohort {
        /// Whether a Cohort object specifies it.
        explicit: bool,
    },
}

/// The shared state of ClusterQueues and Cohorts (`resourceNode`).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
    pub(crate) parent: Option<NodeId>,
    pub(crate) child_cohorts: Vec<NodeId>,
    pub(crate) child_cluster_queues: Vec<NodeId>,
    pub(crate) fair_weight: f64,
    /// The node's own quotas.
    pub(crate) quotas: Quotas,
    /// The node's quota plus what its children lend it (their `SubtreeQuota` above their
    /// local quota).
    pub(crate) subtree_quota: FlavorResourceQuantities,
}

/// What a tree is made of besides its usage: fixed once built, shared by every copy (a
/// scheduling cycle and every preemption simulation copy the tree; only usage changes).
#[derive(Debug, Default)]
struct Shape {
    nodes: Vec<Node>,
    cluster_queues: BTreeMap<String, NodeId>,
    cohorts: BTreeMap<String, NodeId>,
    inactive_cluster_queues: BTreeSet<String>,
    cyclic_cohorts: BTreeSet<String>,
}

/// The ClusterQueue/Cohort forest with its quota and usage accounting.
#[derive(Debug, Clone)]
pub struct Tree {
    shape: Arc<Shape>,
    /// Each node's `Usage`, by node: a ClusterQueue's own, a Cohort's children's above
    /// their local quota; what counts against `subtree_quota`. Copied on write: a copy of
    /// the tree copies no usage until it changes a node's.
    usage: Vec<Arc<FlavorResourceQuantities>>,
}

/// A tree while it is built.
struct Building {
    shape: Shape,
    usage: Vec<FlavorResourceQuantities>,
}

impl Tree {
    /// Builds the tree from specs with no usage.
    pub fn build(spec: &TreeSpec) -> Result<Tree, TreeError> {
        Tree::build_with_usage(spec, &BTreeMap::new())
    }

    /// Builds the tree from new specs, keeping every ClusterQueue's usage from this tree (by
    /// name), so that quota and hierarchy changes never lose admitted workloads' accounting.
    pub fn rebuilt(&self, spec: &TreeSpec) -> Result<Tree, TreeError> {
        let usage = self
            .shape
            .cluster_queues
            .iter()
            .map(|(name, id)| {
                (
                    name.clone(),
                    FlavorResourceQuantities::clone(&self.usage[id.0]),
                )
            })
            .collect();
        Tree::build_with_usage(spec, &usage)
    }

    /// Builds the tree from specs with the given usage per ClusterQueue name; Cohorts' usage is
    /// accumulated from it.
    pub fn build_with_usage(
        spec: &TreeSpec,
        usage: &BTreeMap<String, FlavorResourceQuantities>,
    ) -> Result<Tree, TreeError> {
        let explicit = explicit_cohorts(spec)?;
        let parents = cohort_parents(spec, &explicit);
        let cyclic_cohorts = cyclic_cohorts(&parents);

        let mut tree = Building {
            shape: Shape {
                cyclic_cohorts,
                ..Shape::default()
            },
            usage: Vec::new(),
        };
        for name in parents.keys() {
            if tree.shape.cyclic_cohorts.contains(name) {
                continue;
            }
            let cohort_spec = explicit.get(name.as_str());
            let id = tree.push(
                Node {
                    name: name.clone(),
                    kind: NodeKind::Cohort {
                        explicit: cohort_spec.is_some(),
                    },
                    parent: None,
                    child_cohorts: Vec::new(),
                    child_cluster_queues: Vec::new(),
                    fair_weight: cohort_spec.map_or(DEFAULT_FAIR_WEIGHT, |c| c.fair_weight),
                    quotas: cohort_spec.map(|c| c.quotas.clone()).unwrap_or_default(),
                    subtree_quota: FlavorResourceQuantities::new(),
                },
                FlavorResourceQuantities::new(),
            );
            tree.shape.cohorts.insert(name.clone(), id);
        }
        for (name, parent) in &parents {
            let nodes = &mut tree.shape.nodes;
            if let (Some(&child), Some(parent)) = (tree.shape.cohorts.get(name), parent) {
                // A cohort outside a cycle never has a parent inside one.
                if let Some(&parent) = tree.shape.cohorts.get(parent) {
                    nodes[child.0].parent = Some(parent);
                    nodes[parent.0].child_cohorts.push(child);
                }
            }
        }
        tree.add_cluster_queues(spec, usage)?;
        tree.accumulate();
        Ok(Tree {
            shape: Arc::new(tree.shape),
            usage: tree.usage.into_iter().map(Arc::new).collect(),
        })
    }

    /// The nodes under `starts` (included), parents before children.
    pub(crate) fn breadth_first(&self, starts: &[NodeId]) -> Vec<NodeId> {
        self.shape.breadth_first(starts)
    }

    /// The ClusterQueue named `name`, unless it is absent or inactive.
    pub fn cluster_queue(&self, name: &str) -> Option<NodeId> {
        self.shape.cluster_queues.get(name).copied()
    }

    /// The Cohort named `name` (explicit or implicit), unless it is absent or in a cycle.
    pub fn cohort(&self, name: &str) -> Option<NodeId> {
        self.shape.cohorts.get(name).copied()
    }

    /// The active ClusterQueues by name.
    pub fn cluster_queues(&self) -> impl Iterator<Item = (&str, NodeId)> {
        self.shape
            .cluster_queues
            .iter()
            .map(|(name, id)| (name.as_str(), *id))
    }

    /// The Cohorts outside cycles by name.
    pub fn cohorts(&self) -> impl Iterator<Item = (&str, NodeId)> {
        self.shape
            .cohorts
            .iter()
            .map(|(name, id)| (name.as_str(), *id))
    }

    /// ClusterQueues left out because their Cohort's parent chain has a cycle.
    pub fn inactive_cluster_queues(&self) -> &BTreeSet<String> {
        &self.shape.inactive_cluster_queues
    }

    /// Cohorts left out because their parent chain has a cycle (`hierarchy.HasCycle`).
    pub fn cyclic_cohorts(&self) -> &BTreeSet<String> {
        &self.shape.cyclic_cohorts
    }

    /// The node's name.
    pub fn name(&self, id: NodeId) -> &str {
        &self.shape.nodes[id.0].name
    }

    /// Whether the node is a ClusterQueue or a Cohort.
    pub fn kind(&self, id: NodeId) -> NodeKind {
        self.shape.nodes[id.0].kind
    }

    /// The node's Cohort, if any.
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        self.shape.nodes[id.0].parent
    }

    /// A Cohort's child Cohorts.
    pub fn child_cohorts(&self, id: NodeId) -> &[NodeId] {
        &self.shape.nodes[id.0].child_cohorts
    }

    /// A Cohort's ClusterQueues.
    pub fn child_cluster_queues(&self, id: NodeId) -> &[NodeId] {
        &self.shape.nodes[id.0].child_cluster_queues
    }

    /// The node's fair-sharing weight.
    pub fn fair_weight(&self, id: NodeId) -> f64 {
        self.shape.nodes[id.0].fair_weight
    }

    /// The node's own quota for `key` (zero nominal, no limits when absent).
    pub fn quota(&self, id: NodeId, key: &FlavorResource) -> ResourceQuota {
        self.shape.quota(id, key)
    }

    /// Capacity only this node's subtree may use because of its lending limit (`localQuota`).
    pub fn local_quota(&self, id: NodeId, key: &FlavorResource) -> Amount {
        self.shape.local_quota(id, key)
    }

    /// The node's `SubtreeQuota`.
    pub fn subtree_quota(&self, id: NodeId) -> &FlavorResourceQuantities {
        &self.shape.nodes[id.0].subtree_quota
    }

    /// The node's `Usage`.
    pub fn usage(&self, id: NodeId) -> &FlavorResourceQuantities {
        &self.usage[id.0]
    }

    /// The node's `Usage`, to change.
    pub(crate) fn usage_mut(&mut self, id: NodeId) -> &mut FlavorResourceQuantities {
        Arc::make_mut(&mut self.usage[id.0])
    }

    /// The Cohorts above the node, parent first, root last (`PathParentToRoot`).
    pub fn ancestors(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::successors(self.parent(id), |&node| self.parent(node))
    }

    /// The root of the node's tree (the node itself when it has no parent).
    pub fn root(&self, id: NodeId) -> NodeId {
        self.ancestors(id).last().unwrap_or(id)
    }

    /// The ClusterQueues anywhere under a Cohort (`SubtreeClusterQueues`).
    pub fn subtree_cluster_queues(&self, id: NodeId) -> Vec<NodeId> {
        self.breadth_first(&[id])
            .into_iter()
            .filter(|node| self.kind(*node) == NodeKind::ClusterQueue)
            .collect()
    }

    /// The distance from a Cohort to its furthest leaf (`getNodeHeight`): 1 for a Cohort with
    /// only ClusterQueues, 0 for an empty one.
    pub fn height(&self, id: NodeId) -> usize {
        let mut heights: BTreeMap<NodeId, usize> = BTreeMap::new();
        for node in self.breadth_first(&[id]).into_iter().rev() {
            let n = &self.shape.nodes[node.0];
            if n.kind == NodeKind::ClusterQueue {
                continue;
            }
            let own =
                usize::from(!n.child_cohorts.is_empty() || !n.child_cluster_queues.is_empty());
            let height = n
                .child_cohorts
                .iter()
                .map(|child| heights.get(child).copied().unwrap_or_default() + 1)
                .fold(own, usize::max);
            heights.insert(node, height);
        }
        heights.get(&id).copied().unwrap_or_default()
    }
}

impl Building {
    fn push(&mut self, node: Node, usage: FlavorResourceQuantities) -> NodeId {
        self.shape.nodes.push(node);
        self.usage.push(usage);
        NodeId(self.shape.nodes.len() - 1)
    }

    fn add_cluster_queues(
        &mut self,
        spec: &TreeSpec,
        usage: &BTreeMap<String, FlavorResourceQuantities>,
    ) -> Result<(), TreeError> {
        let mut specs: Vec<&ClusterQueueSpec> = spec.cluster_queues.iter().collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        for cq in specs {
            let shape = &mut self.shape;
            if shape.cluster_queues.contains_key(&cq.name)
                || shape.inactive_cluster_queues.contains(&cq.name)
            {
                return Err(TreeError::DuplicateClusterQueue(cq.name.clone()));
            }
            let parent = match &cq.cohort {
                Some(cohort) if shape.cyclic_cohorts.contains(cohort) => {
                    shape.inactive_cluster_queues.insert(cq.name.clone());
                    continue;
                }
                Some(cohort) => shape.cohorts.get(cohort).copied(),
                None => None,
            };
            let node = Node {
                name: cq.name.clone(),
                kind: NodeKind::ClusterQueue,
                parent,
                child_cohorts: Vec::new(),
                child_cluster_queues: Vec::new(),
                fair_weight: cq.fair_weight,
                quotas: cq.quotas.clone(),
                subtree_quota: FlavorResourceQuantities::new(),
            };
            let id = self.push(node, usage.get(&cq.name).cloned().unwrap_or_default());
            if let Some(parent) = parent {
                self.shape.nodes[parent.0].child_cluster_queues.push(id);
            }
            self.shape.cluster_queues.insert(cq.name.clone(), id);
        }
        Ok(())
    }

    /// Sets every node's `SubtreeQuota` (and Cohorts' `Usage`) from quotas and ClusterQueue
    /// usage, children before parents (`updateCohortResourceNode`, `accumulateFromChild`).
    fn accumulate(&mut self) {
        for (node, usage) in self.shape.nodes.iter_mut().zip(&mut self.usage) {
            node.subtree_quota = node
                .quotas
                .iter()
                .map(|(key, quota)| (key.clone(), quota.nominal))
                .collect();
            if matches!(node.kind, NodeKind::Cohort { .. }) {
                *usage = FlavorResourceQuantities::new();
            }
        }
        let nodes = &self.shape.nodes;
        let roots: Vec<NodeId> = (0..nodes.len())
            .map(NodeId)
            .filter(|id| nodes[id.0].parent.is_none())
            .collect();
        let order = self.shape.breadth_first(&roots);
        for &child in order.iter().rev() {
            if let Some(parent) = self.shape.nodes[child.0].parent {
                self.accumulate_from_child(parent, child);
            }
        }
    }

    fn accumulate_from_child(&mut self, parent: NodeId, child: NodeId) {
        let shape = &self.shape;
        let lent: Vec<_> = shape.nodes[child.0]
            .subtree_quota
            .iter()
            .map(|(key, quota)| (key.clone(), quota - shape.local_quota(child, key)))
            .collect();
        let used: Vec<_> = self.usage[child.0]
            .iter()
            .map(|(key, usage)| {
                let above = usage - shape.local_quota(child, key);
                (key.clone(), above.max(Amount::ZERO))
            })
            .collect();
        for (key, delta) in lent {
            self.shape.nodes[parent.0].subtree_quota.add(&key, delta);
        }
        for (key, delta) in used {
            self.usage[parent.0].add(&key, delta);
        }
    }
}

impl Shape {
    /// The nodes under `starts` (included), parents before children.
    fn breadth_first(&self, starts: &[NodeId]) -> Vec<NodeId> {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut queue: VecDeque<NodeId> = starts.iter().copied().collect();
        while let Some(id) = queue.pop_front() {
            order.push(id);
            let node = &self.nodes[id.0];
            queue.extend(node.child_cohorts.iter().copied());
            queue.extend(node.child_cluster_queues.iter().copied());
        }
        order
    }

    /// The node's own quota for `key` (zero nominal, no limits when absent).
    fn quota(&self, id: NodeId, key: &FlavorResource) -> ResourceQuota {
        self.nodes[id.0]
            .quotas
            .get(key)
            .copied()
            .unwrap_or_default()
    }

    /// Capacity only this node's subtree may use because of its lending limit (`localQuota`):
    /// `max(0, SubtreeQuota − lendingLimit)`, zero without a lending limit.
    fn local_quota(&self, id: NodeId, key: &FlavorResource) -> Amount {
        match self.quota(id, key).lending_limit {
            Some(lending_limit) => {
                (self.nodes[id.0].subtree_quota.get(key) - lending_limit).max(Amount::ZERO)
            }
            None => Amount::ZERO,
        }
    }
}

fn explicit_cohorts(spec: &TreeSpec) -> Result<BTreeMap<&str, &CohortSpec>, TreeError> {
    let mut explicit = BTreeMap::new();
    for cohort in &spec.cohorts {
        if explicit.insert(cohort.name.as_str(), cohort).is_some() {
            return Err(TreeError::DuplicateCohort(cohort.name.clone()));
        }
    }
    Ok(explicit)
}

/// Every Cohort name (explicit, or named as a parent or by a ClusterQueue) with its parent.
fn cohort_parents(
    spec: &TreeSpec,
    explicit: &BTreeMap<&str, &CohortSpec>,
) -> BTreeMap<String, Option<String>> {
    let mut parents: BTreeMap<String, Option<String>> = explicit
        .values()
        .map(|cohort| (cohort.name.clone(), cohort.parent.clone()))
        .collect();
    let implicit = spec
        .cohorts
        .iter()
        .filter_map(|cohort| cohort.parent.clone())
        .chain(
            spec.cluster_queues
                .iter()
                .filter_map(|cq| cq.cohort.clone()),
        );
    for name in implicit {
        parents.entry(name).or_insert(None);
    }
    parents
}

/// The Cohorts for which walking up the parent chain meets a Cohort twice
/// (`hierarchy.HasCycle`): the members of a loop and every Cohort below one. Each Cohort is
/// walked once, so the check is linear in the number of Cohorts.
fn cyclic_cohorts(parents: &BTreeMap<String, Option<String>>) -> BTreeSet<String> {
    let mut verdict: BTreeMap<&str, bool> = BTreeMap::new();
    for start in parents.keys() {
        let mut path: Vec<&str> = Vec::new();
        let mut on_path: BTreeSet<&str> = BTreeSet::new();
        let mut current = start.as_str();
        let cyclic = loop {
            if let Some(&known) = verdict.get(current) {
                break known;
            }
            if !on_path.insert(current) {
                break true;
            }
            path.push(current);
            match parents.get(current) {
                Some(Some(parent)) => current = parent,
                _ => break false,
            }
        };
        for name in path {
            verdict.insert(name, cyclic);
        }
    }
    verdict
        .into_iter()
        .filter(|(_, cyclic)| *cyclic)
        .map(|(name, _)| name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{amounts, cluster_queue, cohort, fr, tree};

    fn subtree(tree: &Tree, cohort: &str, flavor: &str, resource: &str) -> i64 {
        let id = tree.cohort(cohort).expect("cohort");
        tree.subtree_quota(id).get(&fr(flavor, resource)).int64()
    }

    fn cohort_usage(tree: &Tree, cohort: &str, flavor: &str, resource: &str) -> i64 {
        let id = tree.cohort(cohort).expect("cohort");
        tree.usage(id).get(&fr(flavor, resource)).int64()
    }

    /// (case name, (cohort, parent or "") edges, cohorts expected in cycles).
    type EdgesCase = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
    );

    /// Expected `SubtreeQuota` (default, cpu) per Cohort name.
    type SubtreeQuotas = &'static [(&'static str, i64)];

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshot, case "cohort".
    #[test]
    fn snapshot_cohort() {
        let mut tree = tree(
            vec![],
            vec![
                cluster_queue(
                    "a",
                    "borrowing",
                    &[
                        ("demand", "cpu", "100", "", ""),
                        ("spot", "cpu", "200", "", ""),
                    ],
                ),
                cluster_queue(
                    "b",
                    "borrowing",
                    &[
                        ("spot", "cpu", "100", "", ""),
                        ("default", "example.com/gpu", "50", "", ""),
                    ],
                ),
                cluster_queue("c", "", &[("default", "cpu", "100", "", "")]),
            ],
        );
        let (a, b) = (
            tree.cluster_queue("a").expect("a"),
            tree.cluster_queue("b").expect("b"),
        );
        tree.add_usages(a, &amounts(&[("demand", "cpu", 10_000)]));
        tree.add_usages(
            b,
            &amounts(&[("spot", "cpu", 5_000), ("default", "example.com/gpu", 10)]),
        );
        tree.add_usages(
            b,
            &amounts(&[("spot", "cpu", 5_000), ("default", "example.com/gpu", 5)]),
        );
        assert_eq!(subtree(&tree, "borrowing", "demand", "cpu"), 100_000);
        assert_eq!(subtree(&tree, "borrowing", "spot", "cpu"), 300_000);
        assert_eq!(
            subtree(&tree, "borrowing", "default", "example.com/gpu"),
            50
        );
        assert_eq!(cohort_usage(&tree, "borrowing", "demand", "cpu"), 10_000);
        assert_eq!(cohort_usage(&tree, "borrowing", "spot", "cpu"), 10_000);
        assert_eq!(
            cohort_usage(&tree, "borrowing", "default", "example.com/gpu"),
            15
        );
        let c = tree.cluster_queue("c").expect("c");
        assert_eq!(tree.parent(c), None);
        assert_eq!(
            tree.subtree_quota(c).get(&fr("default", "cpu")),
            Amount::new(100_000)
        );
        assert_eq!(
            tree.kind(tree.cohort("borrowing").expect("cohort")),
            NodeKind::Cohort { explicit: false }
        );
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshot, case "lendingLimit with 2
    // clusterQueues and 2 flavors(whenCanBorrow: MayStopSearch)".
    #[test]
    fn snapshot_lending_limit_two_flavors() {
        let quotas = [
            ("arm", "cpu", "10", "", "5"),
            ("x86", "cpu", "20", "", "10"),
        ];
        let mut tree = tree(
            vec![],
            vec![
                cluster_queue("a", "lending", &quotas),
                cluster_queue("b", "lending", &quotas),
            ],
        );
        let a = tree.cluster_queue("a").expect("a");
        tree.add_usages(a, &amounts(&[("arm", "cpu", 10_000)]));
        tree.add_usages(a, &amounts(&[("arm", "cpu", 5_000)]));
        tree.add_usages(a, &amounts(&[("x86", "cpu", 10_000)]));
        assert_eq!(subtree(&tree, "lending", "arm", "cpu"), 10_000);
        assert_eq!(subtree(&tree, "lending", "x86", "cpu"), 20_000);
        assert_eq!(cohort_usage(&tree, "lending", "arm", "cpu"), 10_000);
        assert_eq!(cohort_usage(&tree, "lending", "x86", "cpu"), 0);
        assert_eq!(tree.usage(a).get(&fr("arm", "cpu")), Amount::new(15_000));
        assert_eq!(
            tree.subtree_quota(a).get(&fr("x86", "cpu")),
            Amount::new(20_000)
        );
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshot, case "cohort provides
    // resources".
    #[test]
    fn snapshot_cohort_provides_resources() {
        let tree = tree(
            vec![cohort(
                "cohort",
                "",
                &[
                    ("arm", "cpu", "10", "", ""),
                    ("x86", "cpu", "20", "", ""),
                    ("mips", "cpu", "42", "", ""),
                ],
            )],
            vec![cluster_queue(
                "cq",
                "cohort",
                &[("arm", "cpu", "7", "", "3"), ("x86", "cpu", "5", "", "")],
            )],
        );
        assert_eq!(subtree(&tree, "cohort", "arm", "cpu"), 13_000);
        assert_eq!(subtree(&tree, "cohort", "x86", "cpu"), 25_000);
        assert_eq!(subtree(&tree, "cohort", "mips", "cpu"), 42_000);
        let cq = tree.cluster_queue("cq").expect("cq");
        assert_eq!(
            tree.subtree_quota(cq).get(&fr("arm", "cpu")),
            Amount::new(7_000)
        );
        assert_eq!(
            tree.quota(cq, &fr("arm", "cpu")).lending_limit,
            Some(Amount::new(3_000))
        );
        assert_eq!(
            tree.kind(tree.cohort("cohort").expect("cohort")),
            NodeKind::Cohort { explicit: true }
        );
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshot, case "cohorts with cycles and
    // their cqs excluded from snapshot".
    #[test]
    fn snapshot_excludes_cycles() {
        let arm = [("arm", "cpu", "0", "", "")];
        let tree = tree(
            vec![
                cohort("autocycle", "autocycle", &[]),
                cohort("cycle-a", "cycle-b", &[]),
                cohort("cycle-b", "cycle-a", &[]),
                cohort("nocycle", "", &[]),
            ],
            vec![
                cluster_queue("cq-autocycle", "autocycle", &arm),
                cluster_queue("cq-a", "cycle-a", &arm),
                cluster_queue("cq-b", "cycle-b", &arm),
                cluster_queue("cq-nocycle", "nocycle", &arm),
            ],
        );
        assert_eq!(
            tree.cohorts().map(|(name, _)| name).collect::<Vec<_>>(),
            ["nocycle"]
        );
        assert_eq!(
            tree.cluster_queues()
                .map(|(name, _)| name)
                .collect::<Vec<_>>(),
            ["cq-nocycle"]
        );
        assert_eq!(
            names(tree.inactive_cluster_queues()),
            ["cq-a", "cq-autocycle", "cq-b"]
        );
        assert_eq!(
            names(tree.cyclic_cohorts()),
            ["autocycle", "cycle-a", "cycle-b"]
        );
        let nocycle = tree.cohort("nocycle").expect("nocycle");
        assert!(
            tree.subtree_quota(nocycle).contains(&fr("arm", "cpu")),
            "zero quota is accumulated"
        );
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshot, cases "clusterQueue with fair
    // sharing weight" and "cohort snapshot has fair sharing weight".
    #[test]
    fn snapshot_fair_weights() {
        let weight = |text: &str| fair_weight(Some(&text.parse().expect("weight")));
        let tree = tree(
            vec![CohortSpec {
                fair_weight: weight("0.5"),
                ..cohort("cohort", "", &[])
            }],
            vec![ClusterQueueSpec {
                fair_weight: weight("3"),
                ..cluster_queue("with-preemption", "", &[])
            }],
        );
        assert_eq!(
            tree.fair_weight(tree.cohort("cohort").expect("cohort")),
            0.5
        );
        assert_eq!(
            tree.fair_weight(tree.cluster_queue("with-preemption").expect("cq")),
            3.0
        );
        assert_eq!(fair_weight(None), 1.0);
    }

    /// (case name, final (cohort, parent) specs, final (cq, cohort) specs, expected cohorts,
    /// expected cq → cohort edges, expected cohort → parent edges).
    type ManagerCase = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static str)],
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
        &'static [(&'static str, &'static str)],
    );

    // Upstream: pkg/cache/hierarchy/manager_test.go, TestManager (19 cases). Each sequence of
    // manager operations is written as the Cohort and ClusterQueue specs it leaves (the
    // idempotency cases thus reduce to their final state); the expected cohorts and edges are
    // upstream's. Edges are checked from both ends (parent and child lists).
    #[test]
    fn manager() {
        let cases: &[ManagerCase] = &[
            (
                "create queues",
                &[],
                &[("queue1", ""), ("queue2", "")],
                &[],
                &[],
                &[],
            ),
            ("delete queue", &[], &[("queue1", "")], &[], &[], &[]),
            (
                "create queues with cohorts",
                &[],
                &[
                    ("queue1", "cohort-a"),
                    ("queue2", "cohort-a"),
                    ("queue3", "cohort-b"),
                ],
                &["cohort-a", "cohort-b"],
                &[
                    ("queue1", "cohort-a"),
                    ("queue2", "cohort-a"),
                    ("queue3", "cohort-b"),
                ],
                &[],
            ),
            (
                "update cohorts",
                &[],
                &[("queue1", "cohort-b"), ("queue2", "cohort-c")],
                &["cohort-b", "cohort-c"],
                &[("queue1", "cohort-b"), ("queue2", "cohort-c")],
                &[],
            ),
            (
                "updating cqs idempotent",
                &[],
                &[("queue1", "cohort-b"), ("queue2", "cohort-c")],
                &["cohort-b", "cohort-c"],
                &[("queue1", "cohort-b"), ("queue2", "cohort-c")],
                &[],
            ),
            (
                "updating cohort idempotent",
                &[("cohort", "newroot")],
                &[],
                &["cohort", "newroot"],
                &[],
                &[("cohort", "newroot")],
            ),
            (
                "adding cohort idempotent",
                &[("cohort", "")],
                &[],
                &["cohort"],
                &[],
                &[],
            ),
            ("delete cohorts", &[], &[("queue1", "")], &[], &[], &[]),
            ("deletion idempotent", &[], &[], &[], &[], &[]),
            (
                "cohort remains as long as one of its child cqs remains",
                &[],
                &[("queue1", "cohort")],
                &["cohort"],
                &[("queue1", "cohort")],
                &[],
            ),
            (
                "cohort remains as long as one of its child cohorts remains",
                &[("cohort1", "root")],
                &[],
                &["cohort1", "root"],
                &[],
                &[("cohort1", "root")],
            ),
            (
                "explicit cohort",
                &[("cohort", "")],
                &[],
                &["cohort"],
                &[],
                &[],
            ),
            ("delete explicit cohort", &[], &[], &[], &[], &[]),
            ("delete explicit cohort idempotent", &[], &[], &[], &[], &[]),
            (
                "explicit cohort persists after child deleted",
                &[("cohort", "")],
                &[],
                &["cohort"],
                &[],
                &[],
            ),
            (
                "explicit cohort downgraded to implicit cohort",
                &[],
                &[("queue", "cohort")],
                &["cohort"],
                &[("queue", "cohort")],
                &[],
            ),
            (
                "cohort upgraded to explicit then downgraded to implicit then deleted",
                &[],
                &[],
                &[],
                &[],
                &[],
            ),
            (
                "hierarchical cohorts",
                &[
                    ("root", ""),
                    ("left", "root"),
                    ("right", "root"),
                    ("left-left", "left"),
                    ("right-right", "right"),
                ],
                &[("cq", "right-right")],
                &["left", "left-left", "right", "right-right", "root"],
                &[("cq", "right-right")],
                &[
                    ("left", "root"),
                    ("left-left", "left"),
                    ("right", "root"),
                    ("right-right", "right"),
                ],
            ),
            (
                "delete node in middle of hierarchy",
                &[
                    ("root", ""),
                    ("right", "root"),
                    ("left-left", "left"),
                    ("right-right", "right"),
                ],
                &[],
                &["left", "left-left", "right", "right-right", "root"],
                &[],
                &[
                    ("left-left", "left"),
                    ("right", "root"),
                    ("right-right", "right"),
                ],
            ),
        ];
        for (name, cohort_specs, queue_specs, want_cohorts, want_cq_edges, want_cohort_edges) in
            cases
        {
            let tree = tree(
                cohort_specs
                    .iter()
                    .map(|(c, p)| cohort(c, p, &[]))
                    .collect(),
                queue_specs
                    .iter()
                    .map(|(q, c)| cluster_queue(q, c, &[]))
                    .collect(),
            );
            let queues: Vec<&str> = tree.cluster_queues().map(|(n, _)| n).collect();
            let want_queues: Vec<&str> = queue_specs.iter().map(|(q, _)| *q).collect();
            assert_eq!(queues, want_queues, "{name}: cqs");
            let cohorts: Vec<&str> = tree.cohorts().map(|(n, _)| n).collect();
            assert_eq!(cohorts, *want_cohorts, "{name}: cohorts");
            let edge = |child: NodeId, parent: NodeId| (tree.name(child), tree.name(parent));
            let parent_edges = |ids: Vec<NodeId>| {
                let mut edges: Vec<(&str, &str)> = ids
                    .into_iter()
                    .filter_map(|id| tree.parent(id).map(|parent| edge(id, parent)))
                    .collect();
                edges.sort_unstable();
                edges
            };
            let child_edges = |children: fn(&Tree, NodeId) -> &[NodeId]| {
                let mut edges: Vec<(&str, &str)> = tree
                    .cohorts()
                    .flat_map(|(_, id)| {
                        children(&tree, id)
                            .iter()
                            .map(move |child| edge(*child, id))
                    })
                    .collect();
                edges.sort_unstable();
                edges
            };
            let cq_ids = tree.cluster_queues().map(|(_, id)| id).collect();
            let cohort_ids = tree.cohorts().map(|(_, id)| id).collect();
            assert_eq!(parent_edges(cq_ids), *want_cq_edges, "{name}: cq -> cohort");
            assert_eq!(
                child_edges(Tree::child_cluster_queues),
                *want_cq_edges,
                "{name}: cohort <- cq"
            );
            assert_eq!(
                parent_edges(cohort_ids),
                *want_cohort_edges,
                "{name}: cohort -> parent"
            );
            assert_eq!(
                child_edges(Tree::child_cohorts),
                *want_cohort_edges,
                "{name}: parent <- cohort"
            );
        }
    }

    // Upstream: pkg/cache/hierarchy/manager_test.go, TestCycles (7 cases). Each sequence of
    // edge operations is written as the Cohort specs it leaves; a deleted Cohort still named as
    // a parent is implicit.
    #[test]
    fn cycles() {
        let cases: &[EdgesCase] = &[
            (
                "no cycles",
                &[("root", ""), ("left", "root"), ("right", "root")],
                &[],
            ),
            ("self-cycle", &[("root", "root")], &["root"]),
            ("remove self-cycle", &[("root", "")], &[]),
            (
                "cycle",
                &[("cohort-a", "cohort-b"), ("cohort-b", "cohort-a")],
                &["cohort-a", "cohort-b"],
            ),
            (
                "remove cycle via edge update",
                &[("cohort-a", "cohort-c"), ("cohort-b", "cohort-a")],
                &[],
            ),
            (
                "remove cycle via edge deletion",
                &[("cohort-a", ""), ("cohort-b", "cohort-a")],
                &[],
            ),
            (
                "remove cycle via node deletion",
                &[("cohort-a", "cohort-b")],
                &[],
            ),
        ];
        for (name, edges, want) in cases {
            let cohorts = edges
                .iter()
                .map(|(child, parent)| cohort(child, parent, &[]))
                .collect();
            let tree = tree(cohorts, vec![]);
            assert_eq!(names(tree.cyclic_cohorts()), *want, "{name}");
            let all = tree.cohorts().count() + tree.cyclic_cohorts().len();
            let named: BTreeSet<&str> = edges
                .iter()
                .flat_map(|(c, p)| [*c, *p])
                .filter(|n| !n.is_empty())
                .collect();
            assert_eq!(all, named.len(), "{name}: every named cohort exists");
        }
    }

    // Upstream: pkg/cache/scheduler/cache_test.go, TestCohortCycles (7 of 8 subtests; the
    // eighth, "ResyncGaugeMetrics does not infinitely recurse with cyclic cohorts", tests
    // metrics, which are not ported; every walk here is iterative and cycles are cut at build).
    #[test]
    fn cohort_cycles() {
        // self cycle
        let t = tree(vec![cohort("cohort", "cohort", &[])], vec![]);
        assert_eq!(names(t.cyclic_cohorts()), ["cohort"]);

        // simple cycle: no cycle until the third edge closes it.
        let a = cohort("cohort-a", "cohort-b", &[]);
        let b = cohort("cohort-b", "cohort-c", &[]);
        let c = cohort("cohort-c", "cohort-a", &[]);
        assert!(
            tree(vec![a.clone(), b.clone()], vec![])
                .cyclic_cohorts()
                .is_empty()
        );
        let t = tree(vec![a.clone(), b.clone(), c], vec![]);
        assert_eq!(
            names(t.cyclic_cohorts()),
            ["cohort-a", "cohort-b", "cohort-c"]
        );

        // clusterqueue add and update fail when cohort has cycle; deleting cohort-c breaks it.
        let cycle = vec![a.clone(), b.clone(), cohort("cohort-c", "cohort-a", &[])];
        let t = tree(cycle.clone(), vec![cluster_queue("cq", "cohort-a", &[])]);
        assert_eq!(names(t.inactive_cluster_queues()), ["cq"]);
        let t = tree(cycle, vec![cluster_queue("cq", "cohort-b", &[])]);
        assert_eq!(names(t.inactive_cluster_queues()), ["cq"]);
        let t = tree(vec![a, b], vec![cluster_queue("cq", "cohort-b", &[])]);
        assert!(t.inactive_cluster_queues().is_empty());
        assert!(t.cluster_queue("cq").is_some());

        // clusterqueue leaving / joining a cohort with a cycle updates the other cohort.
        let cohorts = vec![
            cohort("cycle", "cycle", &[]),
            cohort("cohort", "", &[("arm", "cpu", "10", "", "")]),
        ];
        let cq = |parent| cluster_queue("cq", parent, &[("arm", "cpu", "5", "", "")]);
        let in_cycle = tree(cohorts.clone(), vec![cq("cycle")]);
        assert_eq!(subtree(&in_cycle, "cohort", "arm", "cpu"), 10_000);
        let in_cohort = tree(cohorts.clone(), vec![cq("cohort")]);
        assert_eq!(subtree(&in_cohort, "cohort", "arm", "cpu"), 15_000);
        let spec = TreeSpec {
            cohorts,
            cluster_queues: vec![cq("cycle")],
        };
        let moved = in_cohort.rebuilt(&spec).expect("rebuilt");
        assert_eq!(subtree(&moved, "cohort", "arm", "cpu"), 10_000);

        // cohort switching cohorts updates both cohort trees.
        let child = |parent| cohort("cohort", parent, &[("arm", "cpu", "10", "", "")]);
        let roots = [cohort("root1", "", &[]), cohort("root2", "", &[])];
        let before = tree(
            vec![roots[0].clone(), roots[1].clone(), child("root1")],
            vec![],
        );
        assert_eq!(subtree(&before, "root1", "arm", "cpu"), 10_000);
        assert!(
            before
                .subtree_quota(before.cohort("root2").expect("root2"))
                .is_empty()
        );
        let after = tree(
            vec![roots[0].clone(), roots[1].clone(), child("root2")],
            vec![],
        );
        assert!(
            after
                .subtree_quota(after.cohort("root1").expect("root1"))
                .is_empty()
        );
        assert_eq!(subtree(&after, "root2", "arm", "cpu"), 10_000);

        // cohort leaving / joining a cohort with a cycle.
        let base = [
            cohort("cycle-root", "cycle-root", &[]),
            cohort("root", "", &[]),
        ];
        let joined = tree(
            vec![base[0].clone(), base[1].clone(), child("cycle-root")],
            vec![],
        );
        assert_eq!(names(joined.cyclic_cohorts()), ["cohort", "cycle-root"]);
        assert!(
            joined
                .subtree_quota(joined.cohort("root").expect("root"))
                .is_empty()
        );
        let left = tree(
            vec![base[0].clone(), base[1].clone(), child("root")],
            vec![],
        );
        assert_eq!(subtree(&left, "root", "arm", "cpu"), 10_000);
    }

    // Upstream: pkg/cache/scheduler/cache_test.go, TestDeleteCohortUpdatesAncestorSubtreeQuota
    // (3 cases). Deleting a Cohort object is rebuilding without its spec; a Cohort still named
    // by a child stays as an implicit root.
    #[test]
    fn delete_cohort_updates_ancestor_subtree_quota() {
        let cpu = |value| [("default", "cpu", value, "", "")];
        let cases: Vec<(
            _,
            Vec<CohortSpec>,
            Vec<ClusterQueueSpec>,
            _,
            SubtreeQuotas,
            SubtreeQuotas,
        )> = vec![
            (
                "deleting child cohort updates parent SubtreeQuota",
                vec![
                    cohort("root", "", &cpu("10")),
                    cohort("child", "root", &cpu("5")),
                ],
                vec![],
                "child",
                &[("root", 15_000)],
                &[("root", 10_000)],
            ),
            (
                "deleting grandchild cohort updates all ancestors SubtreeQuota",
                vec![
                    cohort("root", "", &cpu("10")),
                    cohort("mid", "root", &cpu("5")),
                    cohort("leaf", "mid", &cpu("3")),
                ],
                vec![],
                "leaf",
                &[("mid", 8_000), ("root", 18_000)],
                &[("mid", 5_000), ("root", 15_000)],
            ),
            (
                "deleting cohort with children updates parent SubtreeQuota",
                vec![
                    cohort("root", "", &cpu("10")),
                    cohort("mid", "root", &cpu("5")),
                ],
                vec![cluster_queue("cq", "mid", &cpu("7"))],
                "mid",
                &[("root", 22_000)],
                &[("root", 10_000)],
            ),
        ];
        for (name, cohorts, cluster_queues, delete, before, after) in cases {
            let mut spec = TreeSpec {
                cohorts,
                cluster_queues,
            };
            let built = Tree::build(&spec).expect("tree");
            for (cohort, want) in before {
                assert_eq!(
                    subtree(&built, cohort, "default", "cpu"),
                    *want,
                    "{name}: before, {cohort}"
                );
            }
            spec.cohorts.retain(|cohort| cohort.name != delete);
            let rebuilt = built.rebuilt(&spec).expect("rebuilt");
            for (cohort, want) in after {
                assert_eq!(
                    subtree(&rebuilt, cohort, "default", "cpu"),
                    *want,
                    "{name}: after, {cohort}"
                );
            }
        }
    }

    // Not an upstream table: a quota change keeps admitted usage, and the Cohort's usage is
    // accumulated again from it (issue 16: "quota changes never lose admitted workloads'
    // accounting").
    #[test]
    fn rebuild_keeps_cluster_queue_usage() {
        let cq = |nominal| cluster_queue("cq", "co", &[("f", "gpu", nominal, "", "")]);
        let spec = |nominal| TreeSpec {
            cohorts: vec![cohort("co", "", &[("f", "gpu", "4", "", "")])],
            cluster_queues: vec![cq(nominal)],
        };
        let mut built = Tree::build(&spec("4")).expect("tree");
        let id = built.cluster_queue("cq").expect("cq");
        built.add_usages(id, &amounts(&[("f", "gpu", 6)]));
        let shrunk = built.rebuilt(&spec("2")).expect("rebuilt");
        let id = shrunk.cluster_queue("cq").expect("cq");
        assert_eq!(shrunk.usage(id).get(&fr("f", "gpu")), Amount::new(6));
        assert_eq!(
            cohort_usage(&shrunk, "co", "f", "gpu"),
            6,
            "no lending limit: all of it counts in the cohort"
        );
        assert_eq!(subtree(&shrunk, "co", "f", "gpu"), 6);
        assert_eq!(shrunk.available(id, &fr("f", "gpu")), Amount::ZERO);
    }

    #[test]
    fn duplicate_specs_are_refused() {
        let spec = TreeSpec {
            cohorts: vec![cohort("co", "", &[]), cohort("co", "", &[])],
            cluster_queues: vec![],
        };
        assert_eq!(
            Tree::build(&spec).err(),
            Some(TreeError::DuplicateCohort("co".into()))
        );
        let spec = TreeSpec {
            cohorts: vec![],
            cluster_queues: vec![cluster_queue("cq", "", &[]), cluster_queue("cq", "x", &[])],
        };
        assert_eq!(
            Tree::build(&spec).err(),
            Some(TreeError::DuplicateClusterQueue("cq".into()))
        );
    }

    // Not an upstream table: getNodeHeight, root, ancestors and subtree ClusterQueues on
    // root ─ mid ─ leaf ─ cq1, root ─ cq2, and an empty cohort.
    #[test]
    fn shape_queries() {
        let tree = tree(
            vec![
                cohort("root", "", &[]),
                cohort("mid", "root", &[]),
                cohort("leaf", "mid", &[]),
                cohort("empty", "", &[]),
            ],
            vec![
                cluster_queue("cq1", "leaf", &[]),
                cluster_queue("cq2", "root", &[]),
            ],
        );
        let id = |name| tree.cohort(name).expect("cohort");
        let heights: Vec<usize> = ["root", "mid", "leaf", "empty"]
            .iter()
            .map(|n| tree.height(id(n)))
            .collect();
        assert_eq!(heights, [3, 2, 1, 0]);
        let cq1 = tree.cluster_queue("cq1").expect("cq1");
        assert_eq!(tree.root(cq1), id("root"));
        let path: Vec<&str> = tree.ancestors(cq1).map(|n| tree.name(n)).collect();
        assert_eq!(path, ["leaf", "mid", "root"]);
        let mut queues: Vec<&str> = tree
            .subtree_cluster_queues(id("root"))
            .into_iter()
            .map(|n| tree.name(n))
            .collect();
        queues.sort_unstable();
        assert_eq!(queues, ["cq1", "cq2"]);
    }

    // A very deep chain of Cohorts builds and answers without recursion.
    #[test]
    fn deep_hierarchy_does_not_recurse() {
        let depth = 20_000;
        let cohorts = (0..depth)
            .map(|i| {
                let parent = if i == 0 {
                    String::new()
                } else {
                    format!("c{}", i - 1)
                };
                cohort(&format!("c{i}"), &parent, &[("f", "gpu", "1", "", "")])
            })
            .collect();
        let mut tree = tree(
            cohorts,
            vec![cluster_queue("cq", &format!("c{}", depth - 1), &[])],
        );
        let cq = tree.cluster_queue("cq").expect("cq");
        let gpu = fr("f", "gpu");
        assert_eq!(tree.potential_available(cq, &gpu), Amount::new(depth));
        tree.add_usage(cq, &gpu, Amount::new(5));
        assert_eq!(tree.available(cq, &gpu), Amount::new(depth - 5));
        assert_eq!(
            tree.height(tree.root(cq)),
            usize::try_from(depth).expect("depth")
        );
    }
}
