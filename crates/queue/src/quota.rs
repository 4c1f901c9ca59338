//! Kueue's resource-node arithmetic over the tree (`pkg/cache/scheduler/resource_node.go`,
//! the quota parts of `clusterqueue_snapshot.go` and `cohort_snapshot.go`, and
//! `FindHeightOfLowestSubtreeThatFits` from `pkg/scheduler/preemption/classical`): local quota
//! hidden from the parent by lending limits, what is available now and at best, usage that
//! bubbles up past local quota, whether requests fit in a node's quota, and the borrowing level.
//!
//! Knows nothing about workloads, flavor order, preemption or fair sharing: callers pass the
//! (flavor, resource) amounts they want to check, add or remove.

use crate::amount::Amount;
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tree::{NodeId, NodeKind, Tree};

impl Tree {
    /// Local quota not yet used (`LocalAvailable`).
    pub fn local_available(&self, id: NodeId, key: &FlavorResource) -> Amount {
        (self.local_quota(id, key) - self.usage(id).get(key)).max(Amount::ZERO)
    }

    /// What the node can still use, through its ancestors and within borrowing limits
    /// (`available`). Negative when the tree is over-admitted (quota removed, node moved).
    pub fn available(&self, id: NodeId, key: &FlavorResource) -> Amount {
        let path = self.path_from_root(id);
        let root = path[0];
        let mut available = self.subtree_quota(root).get(key) - self.usage(root).get(key);
        for &node in &path[1..] {
            let mut from_parent = available;
            if let Some(borrowing_limit) = self.quota(node, key).borrowing_limit {
                let local_quota = self.local_quota(node, key);
                let stored_in_parent = self.subtree_quota(node).get(key) - local_quota;
                let used_in_parent = (self.usage(node).get(key) - local_quota).max(Amount::ZERO);
                let with_max_from_parent = stored_in_parent - used_in_parent + borrowing_limit;
                from_parent = with_max_from_parent.min(from_parent);
            }
            available = self.local_available(node, key) + from_parent;
        }
        available
    }

    /// The most the node could use with no usage anywhere, within borrowing limits
    /// (`potentialAvailable`).
    pub fn potential_available(&self, id: NodeId, key: &FlavorResource) -> Amount {
        let path = self.path_from_root(id);
        let mut potential = self.subtree_quota(path[0]).get(key);
        for &node in &path[1..] {
            potential = self.local_quota(node, key) + potential;
            if let Some(borrowing_limit) = self.quota(node, key).borrowing_limit {
                potential = (self.subtree_quota(node).get(key) + borrowing_limit).min(potential);
            }
        }
        potential
    }

    /// A ClusterQueue's capacity before preemption, zero when in debt
    /// (`ClusterQueueSnapshot.Available`).
    pub fn available_clamped(&self, id: NodeId, key: &FlavorResource) -> Amount {
        self.available(id, key).max(Amount::ZERO)
    }

    /// Adds usage to the node and the part past its local available capacity to its ancestors
    /// (`addUsage`).
    pub fn add_usage(&mut self, id: NodeId, key: &FlavorResource, amount: Amount) {
        let (mut node, mut amount) = (id, amount);
        loop {
            let local_available = self.local_available(node, key);
            self.usage_mut(node).add(key, amount);
            match self.parent(node) {
                Some(parent) if amount > local_available => {
                    amount = amount - local_available;
                    node = parent;
                }
                _ => return,
            }
        }
    }

    /// Removes usage from the node and what of it was stored in its ancestors
    /// (`removeUsage`).
    pub fn remove_usage(&mut self, id: NodeId, key: &FlavorResource, amount: Amount) {
        let (mut node, mut amount) = (id, amount);
        loop {
            let stored_in_parent = self.usage(node).get(key) - self.local_quota(node, key);
            let usage = self.usage(node).get(key) - amount;
            self.usage_mut(node).set(key.clone(), usage);
            match self.parent(node) {
                Some(parent) if stored_in_parent.cmp_i64(0).is_gt() => {
                    amount = amount.min(stored_in_parent);
                    node = parent;
                }
                _ => return,
            }
        }
    }

    /// Adds a workload's assigned quota to a ClusterQueue (`ClusterQueueSnapshot.AddUsage`).
    pub fn add_usages(&mut self, id: NodeId, usage: &FlavorResourceQuantities) {
        for (key, amount) in usage.iter() {
            self.add_usage(id, key, amount);
        }
    }

    /// Removes a workload's assigned quota from a ClusterQueue
    /// (`ClusterQueueSnapshot.RemoveUsage`).
    pub fn remove_usages(&mut self, id: NodeId, usage: &FlavorResourceQuantities) {
        for (key, amount) in usage.iter() {
            self.remove_usage(id, key, amount);
        }
    }

    /// Whether every amount fits in a ClusterQueue's available capacity (the quota half of
    /// `ClusterQueueSnapshot.Fits`).
    pub fn fits(&self, id: NodeId, usage: &FlavorResourceQuantities) -> bool {
        usage
            .iter()
            .all(|(key, amount)| self.available_clamped(id, key) >= amount)
    }

    /// Whether the requests fit in the node's `SubtreeQuota` on top of its usage, and what of
    /// them exceeds its local available capacity, to be checked against the parent next
    /// (`QuantitiesFitInQuota`).
    pub fn quantities_fit_in_quota(
        &self,
        id: NodeId,
        requests: &FlavorResourceQuantities,
    ) -> (bool, FlavorResourceQuantities) {
        let mut fits = true;
        let mut remaining = FlavorResourceQuantities::new();
        for (key, amount) in requests.iter() {
            if self.subtree_quota(id).get(key) < self.usage(id).get(key) + amount {
                fits = false;
            }
            let beyond_local = (amount - self.local_available(id, key)).max(Amount::ZERO);
            remaining.set(key.clone(), beyond_local);
        }
        (fits, remaining)
    }

    /// Whether the node's usage is within its `SubtreeQuota` on every given resource
    /// (`IsWithinNominalInResources`).
    pub fn is_within_nominal_in_resources<'a>(
        &self,
        id: NodeId,
        keys: impl IntoIterator<Item = &'a FlavorResource>,
    ) -> bool {
        keys.into_iter()
            .all(|key| self.subtree_quota(id).get(key) >= self.usage(id).get(key))
    }

    /// Whether usage plus `amount` exceeds the node's quota: a ClusterQueue's nominal quota, a
    /// Cohort's `SubtreeQuota` (`BorrowingWith`).
    pub fn borrowing_with(&self, id: NodeId, key: &FlavorResource, amount: Amount) -> bool {
        let quota = match self.kind(id) {
            NodeKind::ClusterQueue => self.quota(id, key).nominal,
            NodeKind::Cohort { .. } => self.subtree_quota(id).get(key),
        };
        quota < self.usage(id).get(key) + amount
    }

    /// Whether the node's usage already exceeds its quota (`Borrowing`).
    pub fn borrowing(&self, id: NodeId, key: &FlavorResource) -> bool {
        self.borrowing_with(id, key, Amount::ZERO)
    }

    /// The borrowing level of adding `amount` to a ClusterQueue
    /// (`FindHeightOfLowestSubtreeThatFits`): the height of the lowest Cohort whose subtree
    /// holds it without borrowing (0 when the ClusterQueue's nominal quota does), the whole
    /// hierarchy's height when none does; and whether that subtree is smaller than the whole
    /// tree (so reclaiming within it is possible).
    pub fn lowest_subtree_that_fits(
        &self,
        id: NodeId,
        key: &FlavorResource,
        amount: Amount,
    ) -> (usize, bool) {
        let has_parent = self.parent(id).is_some();
        if !self.borrowing_with(id, key, amount) || !has_parent {
            return (0, has_parent);
        }
        let mut remaining = amount - self.local_available(id, key);
        for ancestor in self.ancestors(id) {
            if !self.borrowing_with(ancestor, key, remaining) {
                return (self.height(ancestor), self.parent(ancestor).is_some());
            }
            remaining = remaining - self.local_available(ancestor, key);
        }
        (self.height(self.root(id)), false)
    }

    /// The node's ancestors from the root down, then the node.
    fn path_from_root(&self, id: NodeId) -> Vec<NodeId> {
        let mut path: Vec<NodeId> = self.ancestors(id).collect();
        path.reverse();
        path.push(id);
        path
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;
    use crate::testing::{Q, amounts, cluster_queue, cohort, fr, tree};
    use crate::tree::{ClusterQueueSpec, CohortSpec, TreeSpec};

    struct AvailableCase {
        name: &'static str,
        cohorts: Vec<CohortSpec>,
        cluster_queues: Vec<ClusterQueueSpec>,
        usage: &'static [(&'static str, i64)],
        available: &'static [(&'static str, i64)],
        potential: &'static [(&'static str, i64)],
    }

    const RED: Q = ("red", "cpu", "10", "", "");

    // Upstream: pkg/cache/scheduler/resource_test.go, TestAvailable (8 cases). Every case
    // quotas (red, cpu) only, except "base cqs" which adds (blue, cpu) to cq2 and is checked
    // separately below; usage and results are in milli-cores.
    fn available_cases() -> Vec<AvailableCase> {
        vec![
            AvailableCase {
                name: "cqs with cohort",
                cohorts: vec![cohort("cohort", "", &[RED])],
                cluster_queues: vec![
                    cluster_queue("cq1", "cohort", &[RED]),
                    cluster_queue("cq2", "cohort", &[("red", "cpu", "10", "", "9")]),
                ],
                usage: &[("cq1", 1_000), ("cq2", 500)],
                available: &[("cq1", 28_000), ("cq2", 28_500)],
                potential: &[("cq1", 29_000), ("cq2", 30_000)],
            },
            AvailableCase {
                name: "cq borrows from cohort",
                cohorts: vec![cohort("cohort", "", &[RED])],
                cluster_queues: vec![cluster_queue("cq1", "cohort", &[RED])],
                usage: &[("cq1", 11_000)],
                available: &[("cq1", 9_000)],
                potential: &[("cq1", 20_000)],
            },
            AvailableCase {
                name: "cq oversubscription spills into cohort",
                cohorts: vec![cohort("cohort", "", &[RED])],
                cluster_queues: vec![
                    cluster_queue("cq1", "cohort", &[RED]),
                    cluster_queue("cq2", "cohort", &[("red", "cpu", "10", "0", "0")]),
                ],
                usage: &[("cq1", 31_000)],
                // cq1's over-admission spills into cq2's available, which does not
                // borrow or lend, to prevent over-admission within the tree.
                available: &[("cq1", 0), ("cq2", 0)],
                potential: &[("cq1", 20_000), ("cq2", 10_000)],
            },
            AvailableCase {
                name: "lending and borrowing limits respected",
                cohorts: vec![cohort("cohort", "", &[RED])],
                cluster_queues: vec![
                    cluster_queue("cq1", "cohort", &[RED]),
                    cluster_queue("cq2", "cohort", &[("red", "cpu", "10", "2", "")]),
                    cluster_queue("cq3", "cohort", &[("red", "cpu", "10", "", "5")]),
                ],
                usage: &[("cq1", 20_000), ("cq2", 10_000), ("cq3", 6_000)],
                available: &[("cq1", 4_000), ("cq2", 2_000), ("cq3", 4_000)],
                potential: &[("cq1", 35_000), ("cq2", 12_000), ("cq3", 40_000)],
            },
            AvailableCase {
                name: "hierarchical cohort",
                cohorts: vec![
                    cohort("root", "", &[]),
                    cohort("left", "root", &[RED]),
                    cohort("right", "root", &[RED]),
                ],
                cluster_queues: vec![
                    cluster_queue("cq1", "left", &[RED]),
                    cluster_queue("cq2", "right", &[("red", "cpu", "10", "", "0")]),
                ],
                usage: &[("cq1", 10_000), ("cq2", 5_000)],
                available: &[("cq1", 20_000), ("cq2", 25_000)],
                potential: &[("cq1", 30_000), ("cq2", 40_000)],
            },
            AvailableCase {
                name: "hierarchical cohort respects borrowing limit",
                cohorts: vec![
                    cohort("root", "", &[]),
                    cohort("left", "root", &[("red", "cpu", "10", "5", "")]),
                    cohort("right", "root", &[RED]),
                ],
                cluster_queues: vec![
                    cluster_queue("left-cq1", "left", &[RED]),
                    cluster_queue("left-cq2", "left", &[("red", "cpu", "10", "5", "")]),
                    cluster_queue("right-cq", "right", &[RED]),
                ],
                usage: &[],
                available: &[
                    ("left-cq1", 35_000),
                    ("left-cq2", 15_000),
                    ("right-cq", 50_000),
                ],
                potential: &[
                    ("left-cq1", 35_000),
                    ("left-cq2", 15_000),
                    ("right-cq", 50_000),
                ],
            },
            AvailableCase {
                name: "hierarchical cohort respects lending limit",
                cohorts: vec![
                    cohort("root", "", &[]),
                    cohort("left", "root", &[("red", "cpu", "0", "", "5")]),
                    cohort("right", "root", &[("red", "cpu", "0", "", "")]),
                ],
                cluster_queues: vec![
                    cluster_queue("left-cq1", "left", &[("red", "cpu", "10", "", "5")]),
                    cluster_queue("left-cq2", "left", &[RED]),
                    cluster_queue("right-cq", "right", &[("red", "cpu", "0", "", "")]),
                    cluster_queue("root-cq", "root", &[("red", "cpu", "0", "", "")]),
                ],
                usage: &[],
                available: &[
                    ("left-cq1", 20_000),
                    ("left-cq2", 15_000),
                    ("right-cq", 5_000),
                    ("root-cq", 5_000),
                ],
                potential: &[
                    ("left-cq1", 20_000),
                    ("left-cq2", 15_000),
                    ("right-cq", 5_000),
                    ("root-cq", 5_000),
                ],
            },
        ]
    }

    #[test]
    fn available_and_potential_available() {
        let red = fr("red", "cpu");
        for case in available_cases() {
            let mut tree = tree(case.cohorts, case.cluster_queues);
            // Before usage, available equals potential available.
            for (cq, want) in case.potential {
                let id = tree.cluster_queue(cq).expect("cq");
                assert_eq!(
                    tree.available_clamped(id, &red),
                    Amount::new(*want),
                    "{}: {cq} available before usage",
                    case.name
                );
                assert_eq!(
                    tree.potential_available(id, &red),
                    Amount::new(*want),
                    "{}: {cq} potential",
                    case.name
                );
            }
            for (cq, usage) in case.usage {
                let id = tree.cluster_queue(cq).expect("cq");
                tree.add_usages(id, &amounts(&[("red", "cpu", *usage)]));
            }
            for (cq, want) in case.available {
                let id = tree.cluster_queue(cq).expect("cq");
                assert_eq!(
                    tree.available_clamped(id, &red),
                    Amount::new(*want),
                    "{}: {cq} available",
                    case.name
                );
            }
            for (cq, want) in case.potential {
                let id = tree.cluster_queue(cq).expect("cq");
                assert_eq!(
                    tree.potential_available(id, &red),
                    Amount::new(*want),
                    "{}: {cq} potential after usage",
                    case.name
                );
            }
        }
    }

    // Upstream: pkg/cache/scheduler/resource_test.go, TestAvailable, case "base cqs".
    #[test]
    fn available_without_cohort() {
        let mut tree = tree(
            vec![],
            vec![
                cluster_queue("cq1", "", &[("red", "cpu", "0", "", "")]),
                cluster_queue(
                    "cq2",
                    "",
                    &[("red", "cpu", "5", "", ""), ("blue", "cpu", "10", "", "")],
                ),
            ],
        );
        let (cq1, cq2) = (
            tree.cluster_queue("cq1").expect("cq1"),
            tree.cluster_queue("cq2").expect("cq2"),
        );
        let (red, blue) = (fr("red", "cpu"), fr("blue", "cpu"));
        assert_eq!(tree.available_clamped(cq2, &red), Amount::new(5_000));
        tree.add_usages(cq1, &amounts(&[("red", "cpu", 1_000)]));
        tree.add_usages(
            cq2,
            &amounts(&[("red", "cpu", 2_500), ("blue", "cpu", 1_000)]),
        );
        assert_eq!(tree.available_clamped(cq1, &red), Amount::ZERO);
        assert_eq!(
            tree.available(cq1, &red),
            Amount::new(-1_000),
            "in debt before clamping"
        );
        assert_eq!(tree.available_clamped(cq2, &red), Amount::new(2_500));
        assert_eq!(tree.available_clamped(cq2, &blue), Amount::new(9_000));
        assert_eq!(tree.potential_available(cq1, &red), Amount::ZERO);
        assert_eq!(tree.potential_available(cq2, &red), Amount::new(5_000));
        assert_eq!(tree.potential_available(cq2, &blue), Amount::new(10_000));
    }

    type Usage = &'static [(&'static str, &'static str, &'static str, i64)];

    /// (case name, workloads removed, workloads added back, expected usages).
    type ReplayCase<const N: usize> = (
        &'static str,
        &'static [&'static str],
        &'static [&'static str],
        [i64; N],
    );

    fn usage_of(tree: &Tree, id: NodeId, flavor: &str, resource: &str) -> i64 {
        tree.usage(id).get(&fr(flavor, resource)).int64()
    }

    /// Adds each named workload's (cq, flavor, resource, amount) and then removes and adds the
    /// named ones, as Snapshot.RemoveWorkload / AddWorkload do.
    fn replay(tree: &mut Tree, workloads: &BTreeMap<&str, Usage>, remove: &[&str], add: &[&str]) {
        let mut apply = |name: &str, adding: bool| {
            for (cq, flavor, resource, amount) in workloads[name] {
                let id = tree.cluster_queue(cq).expect("cq");
                let usage = amounts(&[(*flavor, *resource, *amount)]);
                if adding {
                    tree.add_usages(id, &usage)
                } else {
                    tree.remove_usages(id, &usage)
                }
            }
        };
        for name in workloads.keys() {
            apply(name, true);
        }
        for name in remove {
            apply(name, false);
        }
        for name in add {
            apply(name, true);
        }
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshotAddRemoveWorkload (3 cases).
    // Expected (c1 cpu, c1 alpha memory, c1 beta memory, c2 cpu, cohort cpu, cohort alpha,
    // cohort beta); memory in GiB.
    #[test]
    fn snapshot_add_remove_workload() {
        const GI: i64 = 1024 * 1024 * 1024;
        const WORKLOADS: [(&str, Usage); 5] = [
            ("c1-cpu", &[("c1", "default", "cpu", 1_000)]),
            ("c1-memory-alpha", &[("c1", "alpha", "memory", GI)]),
            ("c1-memory-beta", &[("c1", "beta", "memory", GI)]),
            ("c2-cpu-1", &[("c2", "default", "cpu", 1_000)]),
            ("c2-cpu-2", &[("c2", "default", "cpu", 1_000)]),
        ];
        let workloads = BTreeMap::from(WORKLOADS);
        let cases: &[ReplayCase<7>] = &[
            (
                "no-op remove add",
                &["c1-cpu", "c2-cpu-1"],
                &["c1-cpu", "c2-cpu-1"],
                [1_000, GI, GI, 2_000, 3_000, GI, GI],
            ),
            (
                "remove all",
                &[
                    "c1-cpu",
                    "c1-memory-alpha",
                    "c1-memory-beta",
                    "c2-cpu-1",
                    "c2-cpu-2",
                ],
                &[],
                [0; 7],
            ),
            (
                "remove c1-cpu",
                &["c1-cpu"],
                &[],
                [0, GI, GI, 2_000, 2_000, GI, GI],
            ),
            (
                "remove c1-memory-alpha",
                &["c1-memory-alpha"],
                &[],
                [1_000, 0, GI, 2_000, 3_000, 0, GI],
            ),
        ];
        for (name, remove, add, want) in cases {
            let mut tree = tree(
                vec![],
                vec![
                    cluster_queue(
                        "c1",
                        "cohort",
                        &[
                            ("default", "cpu", "6", "", ""),
                            ("alpha", "memory", "6Gi", "", ""),
                            ("beta", "memory", "6Gi", "", ""),
                        ],
                    ),
                    cluster_queue("c2", "cohort", &[("default", "cpu", "6", "", "")]),
                ],
            );
            replay(&mut tree, &workloads, remove, add);
            let (c1, c2, co) = (
                tree.cluster_queue("c1").expect("c1"),
                tree.cluster_queue("c2").expect("c2"),
                tree.cohort("cohort").expect("cohort"),
            );
            let got = [
                usage_of(&tree, c1, "default", "cpu"),
                usage_of(&tree, c1, "alpha", "memory"),
                usage_of(&tree, c1, "beta", "memory"),
                usage_of(&tree, c2, "default", "cpu"),
                usage_of(&tree, co, "default", "cpu"),
                usage_of(&tree, co, "alpha", "memory"),
                usage_of(&tree, co, "beta", "memory"),
            ];
            assert_eq!(got, *want, "{name}");
            let cohort_quota = tree.subtree_quota(co);
            assert_eq!(
                cohort_quota.get(&fr("default", "cpu")),
                Amount::new(12_000),
                "{name}"
            );
            assert_eq!(
                cohort_quota.get(&fr("alpha", "memory")),
                Amount::new(6 * GI),
                "{name}"
            );
        }
    }

    // Upstream: pkg/cache/scheduler/snapshot_test.go, TestSnapshotAddRemoveWorkloadWithLendingLimit
    // (8 cases). Expected (lend-a cpu, lend-b cpu, cohort cpu) usage.
    #[test]
    fn snapshot_add_remove_workload_with_lending_limit() {
        const WORKLOADS: [(&str, Usage); 4] = [
            ("lend-a-1", &[("lend-a", "default", "cpu", 1_000)]),
            ("lend-a-2", &[("lend-a", "default", "cpu", 9_000)]),
            ("lend-a-3", &[("lend-a", "default", "cpu", 6_000)]),
            ("lend-b-1", &[("lend-b", "default", "cpu", 4_000)]),
        ];
        let workloads = BTreeMap::from(WORKLOADS);
        let all: &[&str] = &["lend-a-1", "lend-a-2", "lend-a-3", "lend-b-1"];
        let cases: &[ReplayCase<3>] = &[
            ("remove all then add all", all, all, [16_000, 4_000, 10_000]),
            ("remove all", all, &[], [0, 0, 0]),
            (
                "remove workload, but still using quota over GuaranteedQuota",
                &["lend-a-2"],
                &[],
                [7_000, 4_000, 1_000],
            ),
            (
                "remove workload, using same quota as GuaranteedQuota",
                &["lend-a-1", "lend-a-2"],
                &[],
                [6_000, 4_000, 0],
            ),
            (
                "remove workload, using less quota than GuaranteedQuota",
                &["lend-a-2", "lend-a-3"],
                &[],
                [1_000, 4_000, 0],
            ),
            (
                "remove all then add workload, using less quota than GuaranteedQuota",
                all,
                &["lend-a-1"],
                [1_000, 0, 0],
            ),
            (
                "remove all then add workload, using same quota as GuaranteedQuota",
                all,
                &["lend-a-3"],
                [6_000, 0, 0],
            ),
            (
                "remove all then add workload, using quota over GuaranteedQuota",
                all,
                &["lend-a-2"],
                [9_000, 0, 3_000],
            ),
        ];
        for (name, remove, add, want) in cases {
            let mut tree = tree(
                vec![],
                vec![
                    cluster_queue("lend-a", "lend", &[("default", "cpu", "10", "", "4")]),
                    cluster_queue("lend-b", "lend", &[("default", "cpu", "10", "", "6")]),
                ],
            );
            replay(&mut tree, &workloads, remove, add);
            let ids = ["lend-a", "lend-b"].map(|cq| tree.cluster_queue(cq).expect("cq"));
            let co = tree.cohort("lend").expect("lend");
            let got = [
                usage_of(&tree, ids[0], "default", "cpu"),
                usage_of(&tree, ids[1], "default", "cpu"),
                usage_of(&tree, co, "default", "cpu"),
            ];
            assert_eq!(got, *want, "{name}");
            // SubtreeQuota: lend-a lends 4, lend-b lends 6.
            assert_eq!(
                tree.subtree_quota(co).get(&fr("default", "cpu")),
                Amount::new(10_000),
                "{name}"
            );
        }
    }

    // Not an upstream table (Kueue tests FindHeightOfLowestSubtreeThatFits only through the
    // scheduler): root(10) ─ left(0) ─ cq(5), root ─ right ─ other(0).
    #[test]
    fn lowest_subtree_that_fits() {
        let tree = tree(
            vec![
                cohort("root", "", &[("f", "gpu", "10", "", "")]),
                cohort("left", "root", &[("f", "gpu", "2", "", "")]),
                cohort("right", "root", &[]),
            ],
            vec![
                cluster_queue("cq", "left", &[("f", "gpu", "5", "", "")]),
                cluster_queue("other", "right", &[("f", "gpu", "0", "", "")]),
                cluster_queue("alone", "", &[("f", "gpu", "1", "", "")]),
            ],
        );
        let gpu = fr("f", "gpu");
        let (cq, other, alone) = (
            tree.cluster_queue("cq").expect("cq"),
            tree.cluster_queue("other").expect("other"),
            tree.cluster_queue("alone").expect("alone"),
        );
        let cases: &[(&str, NodeId, i64, (usize, bool))] = &[
            ("within nominal", cq, 5, (0, true)),
            ("fits in left", cq, 7, (1, true)),
            ("needs root", cq, 8, (2, false)),
            ("fits nowhere: whole tree", cq, 50, (2, false)),
            ("other borrows from root", other, 1, (2, false)),
            ("no cohort within nominal", alone, 1, (0, false)),
            ("no cohort beyond nominal", alone, 2, (0, false)),
        ];
        for (name, id, amount, want) in cases {
            assert_eq!(
                tree.lowest_subtree_that_fits(*id, &gpu, Amount::new(*amount)),
                *want,
                "{name}"
            );
        }
    }

    // Not an upstream table: QuantitiesFitInQuota / IsWithinNominalInResources / Borrowing on
    // cq(nominal 4, lending limit 1, so local quota 3) in cohort(2).
    #[test]
    fn fit_in_quota_and_within_nominal() {
        let mut tree = tree(
            vec![cohort("co", "", &[("f", "gpu", "2", "", "")])],
            vec![cluster_queue("cq", "co", &[("f", "gpu", "4", "", "1")])],
        );
        let gpu = fr("f", "gpu");
        let (cq, co) = (
            tree.cluster_queue("cq").expect("cq"),
            tree.cohort("co").expect("co"),
        );
        tree.add_usages(cq, &amounts(&[("f", "gpu", 2)]));
        let (fits, remaining) = tree.quantities_fit_in_quota(cq, &amounts(&[("f", "gpu", 2)]));
        assert!(fits);
        assert_eq!(
            remaining.get(&gpu),
            Amount::new(1),
            "one beyond the local quota left"
        );
        let (fits, remaining) = tree.quantities_fit_in_quota(cq, &amounts(&[("f", "gpu", 3)]));
        assert!(!fits);
        assert_eq!(remaining.get(&gpu), Amount::new(2));
        assert!(tree.is_within_nominal_in_resources(cq, [&gpu]));
        assert!(!tree.borrowing(cq, &gpu));
        tree.add_usages(cq, &amounts(&[("f", "gpu", 3)]));
        assert!(!tree.is_within_nominal_in_resources(cq, [&gpu]));
        assert!(tree.borrowing(cq, &gpu));
        // The cohort holds 1 lent + 2 own = 3 and stores 5 − 3 = 2 of the usage.
        assert_eq!(tree.usage(co).get(&gpu), Amount::new(2));
        assert!(tree.is_within_nominal_in_resources(co, [&gpu]));
        assert!(tree.borrowing_with(co, &gpu, Amount::new(2)));
        assert!(tree.fits(cq, &amounts(&[("f", "gpu", 1)])));
        assert!(!tree.fits(cq, &amounts(&[("f", "gpu", 2)])));
    }

    /// A random forest: up to 3 cohorts (each may name an earlier one as parent, so no cycles)
    /// and up to 4 ClusterQueues, quotas on (f, gpu) with optional limits.
    fn arbitrary_tree() -> impl Strategy<Value = TreeSpec> {
        let limits = (
            0u8..12,
            prop::option::of(0u8..12),
            prop::option::of(0u8..12),
        );
        let cohorts = prop::collection::vec((prop::option::of(0usize..3), limits.clone()), 1..4);
        let queues = prop::collection::vec((prop::option::of(0usize..3), limits), 1..5);
        (cohorts, queues).prop_map(|(cohorts, queues)| {
            let quota = |(nominal, borrowing, lending): (u8, Option<u8>, Option<u8>)| {
                BTreeMap::from([(
                    fr("f", "gpu"),
                    crate::tree::ResourceQuota {
                        nominal: Amount::new(i64::from(nominal)),
                        borrowing_limit: borrowing.map(|b| Amount::new(i64::from(b))),
                        lending_limit: lending.map(|l| Amount::new(i64::from(l))),
                    },
                )])
            };
            let cohort_specs = cohorts
                .iter()
                .enumerate()
                .map(|(index, (parent, limits))| CohortSpec {
                    name: format!("co{index}"),
                    parent: parent.filter(|p| *p < index).map(|p| format!("co{p}")),
                    quotas: quota(*limits),
                    fair_weight: 1.0,
                })
                .collect();
            let queue_specs = queues
                .iter()
                .enumerate()
                .map(|(index, (cohort_index, limits))| ClusterQueueSpec {
                    name: format!("cq{index}"),
                    cohort: cohort_index
                        .filter(|c| *c < cohorts.len())
                        .map(|c| format!("co{c}")),
                    quotas: quota(*limits),
                    fair_weight: 1.0,
                })
                .collect();
            TreeSpec {
                cohorts: cohort_specs,
                cluster_queues: queue_specs,
            }
        })
    }

    proptest! {
        // Adds in any order, then removes in reverse, return every node to zero usage; and
        // available never exceeds potential available on the way.
        #[test]
        fn usage_accounting_is_reversible(
            spec in arbitrary_tree(),
            adds in prop::collection::vec((0usize..4, 0u8..15), 0..20),
        ) {
            let mut tree = Tree::build(&spec).expect("tree");
            let queues: Vec<NodeId> = tree.cluster_queues().map(|(_, id)| id).collect();
            let gpu = fr("f", "gpu");
            let adds: Vec<(NodeId, Amount)> = adds
                .iter()
                .map(|(index, amount)| (queues[index % queues.len()], Amount::new(i64::from(*amount))))
                .collect();
            let nodes: Vec<NodeId> = tree.cluster_queues().map(|(_, id)| id).chain(tree.cohorts().map(|(_, id)| id)).collect();
            for (id, amount) in &adds {
                tree.add_usage(*id, &gpu, *amount);
                for node in &nodes {
                    prop_assert!(tree.available(*node, &gpu) <= tree.potential_available(*node, &gpu));
                }
            }
            for (id, amount) in adds.iter().rev() {
                tree.remove_usage(*id, &gpu, *amount);
                for node in &nodes {
                    prop_assert!(tree.available(*node, &gpu) <= tree.potential_available(*node, &gpu));
                }
            }
            for node in &nodes {
                prop_assert_eq!(tree.usage(*node).get(&gpu), Amount::ZERO, "{}", tree.name(*node));
            }
        }

        // Usage added incrementally matches the Cohort usage a rebuild accumulates from the
        // ClusterQueues' usage (`accumulateFromChild`).
        #[test]
        fn incremental_usage_matches_rebuild(
            spec in arbitrary_tree(),
            adds in prop::collection::vec((0usize..4, 0u8..15), 0..20),
        ) {
            let mut tree = Tree::build(&spec).expect("tree");
            let queues: Vec<NodeId> = tree.cluster_queues().map(|(_, id)| id).collect();
            let gpu = fr("f", "gpu");
            for (index, amount) in &adds {
                tree.add_usage(queues[index % queues.len()], &gpu, Amount::new(i64::from(*amount)));
            }
            let rebuilt = tree.rebuilt(&spec).expect("rebuilt");
            for (name, id) in tree.cohorts() {
                let again = rebuilt.cohort(name).expect("cohort");
                prop_assert_eq!(tree.usage(id).get(&gpu), rebuilt.usage(again).get(&gpu), "{}", name);
            }
        }
    }
}
