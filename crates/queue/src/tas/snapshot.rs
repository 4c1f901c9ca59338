//! A TAS flavor's capacity at one moment (`TASFlavorSnapshot`): the topology tree, each leaf's
//! free capacity (allocatable minus non-TAS pods) and usage by TAS Workloads, and
//! `find_topology_assignments` (`FindTopologyAssignmentsForFlavor`), which places a
//! Workload's PodSets in order, a leader with its workers, each PodSet seeing the usage the
//! earlier ones assumed.
//!
//! Also, for Beyond Kueue's topology-aware preemption, which holder (a Workload's
//! `namespace/name`) each piece of usage belongs to, where the caller names one.
//!
//! Knows nothing about quota, flavors' quotas or which Workloads are admitted (a holder is
//! only a name); node replacement and elastic slices are not ported.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Toleration;

use crate::tas::assign::{RunInputs, find_topology_assignment};
use crate::tas::order::FitOrdering;
use crate::tas::request::{
    PODS, PodSetTasRequest, PodSetTasResult, TopologyAssignment, add, count_in, scaled, subtract,
};
use crate::tas::tree::{TopologyNode, TopologyTree, belongs_to, domain_id};
use crate::workload::Requests;

/// One flavor's topology with its capacity and usage.
#[derive(Debug, Clone, PartialEq)]
pub struct TasSnapshot {
    /// The Topology's name (`spec.topologyName` of the flavor), quoted in messages.
    pub topology_name: String,
    /// The domains; fixed once built, so shared by the snapshot's copies (a scheduling
    /// cycle works on a copy).
    pub tree: Arc<TopologyTree>,
    /// The flavor's `spec.tolerations`, added to every PodSet's.
    pub flavor_tolerations: Vec<Toleration>,
    // Each leaf's capacity and usage, shared by a snapshot's copies until one of them
    // changes (copy on write): a cycle that places nothing copies none of them.
    free: Arc<Vec<Requests>>,
    tas_usage: Arc<Vec<Requests>>,
    /// `free - tas_usage`, kept current (Kueue's `TASCachingRemainingResources`).
    remaining: Arc<Vec<Requests>>,
    /// Usage per leaf id of each named holder: its TAS placements and its non-TAS pods.
    holders: Arc<BTreeMap<String, BTreeMap<String, Requests>>>,
}

/// Options of one search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchOptions {
    /// Look for an assignment as if every TAS Workload were gone (`WithSimulateEmpty`).
    pub simulate_empty: bool,
    /// Only leaves inside this domain (an id) are used; empty for all.
    pub within_domain: String,
    /// How the fitting domain is chosen (Kueue's BestFit by default).
    pub fit_ordering: FitOrdering,
}

impl TasSnapshot {
    /// The snapshot over the nodes the flavor selects, with no usage yet.
    pub fn new(
        topology_name: &str,
        levels: &[String],
        flavor_node_labels: &BTreeMap<String, String>,
        flavor_tolerations: &[Toleration],
        nodes: &[TopologyNode],
    ) -> TasSnapshot {
        let tree = TopologyTree::new(levels, flavor_node_labels, nodes);
        let free: Vec<Requests> = tree
            .leaves
            .iter()
            .map(|leaf| leaf.capacity.clone())
            .collect();
        let tas_usage = vec![Requests::new(); tree.leaves.len()];
        let remaining = free.clone();
        TasSnapshot {
            topology_name: topology_name.to_owned(),
            tree: Arc::new(tree),
            flavor_tolerations: flavor_tolerations.to_vec(),
            free: Arc::new(free),
            tas_usage: Arc::new(tas_usage),
            remaining: Arc::new(remaining),
            holders: Arc::default(),
        }
    }

    /// A running pod not managed by TAS on `node` (static pods, DaemonSets, …): its requests
    /// and one pod leave the leaf's free capacity. Nodes outside the tree are ignored.
    pub fn add_non_tas_pod(&mut self, node: &str, requests: &Requests) {
        if let Some(&leaf) = self.tree.node_leaf.get(node) {
            let mut usage = requests.clone();
            add(&mut usage, &Requests::from([(PODS.to_owned(), 1)]));
            subtract(&mut Arc::make_mut(&mut self.free)[leaf], &usage);
            subtract(&mut Arc::make_mut(&mut self.remaining)[leaf], &usage);
        }
    }

    /// [`Self::add_non_tas_pod`] of a pod that belongs to `holder`, remembered as its usage
    /// so that clearing a domain may count the pod as the holder's (its requests and one pod).
    pub fn add_held_non_tas_pod(&mut self, holder: &str, node: &str, requests: &Requests) {
        self.add_non_tas_pod(node, requests);
        if let Some(&leaf) = self.tree.node_leaf.get(node) {
            let mut usage = requests.clone();
            add(&mut usage, &Requests::from([(PODS.to_owned(), 1)]));
            self.record(holder, &self.leaf_id(leaf), &usage);
        }
    }

    /// Usage by TAS Workloads in the leaf with this id (requests including `pods`).
    /// Domains the snapshot does not hold are ignored, as Kueue skips them.
    pub fn add_tas_usage(&mut self, leaf_id: &str, usage: &Requests) {
        if let Some(&leaf) = self.tree.leaf_by_id.get(leaf_id) {
            add(&mut Arc::make_mut(&mut self.tas_usage)[leaf], usage);
            subtract(&mut Arc::make_mut(&mut self.remaining)[leaf], usage);
        }
    }

    /// Removes usage added by [`Self::add_tas_usage`].
    pub fn remove_tas_usage(&mut self, leaf_id: &str, usage: &Requests) {
        if let Some(&leaf) = self.tree.leaf_by_id.get(leaf_id) {
            subtract(&mut Arc::make_mut(&mut self.tas_usage)[leaf], usage);
            add(&mut Arc::make_mut(&mut self.remaining)[leaf], usage);
        }
    }

    /// The usage of an admitted PodSet's assignment: per domain, the pod requests times the
    /// count plus the pods (`ComputeUsagePerDomain`).
    pub fn usage_of(
        assignment: &TopologyAssignment,
        single_pod_requests: &Requests,
    ) -> BTreeMap<String, Requests> {
        let mut usage = BTreeMap::new();
        for domain in &assignment.domains {
            let mut requests = scaled(single_pod_requests, domain.count);
            add(
                &mut requests,
                &Requests::from([(PODS.to_owned(), i64::from(domain.count))]),
            );
            add(
                usage
                    .entry(domain_id(&domain.values))
                    .or_insert_with(Requests::new),
                &requests,
            );
        }
        usage
    }

    /// Adds an admitted PodSet's assignment as TAS usage.
    pub fn add_assignment(
        &mut self,
        assignment: &TopologyAssignment,
        single_pod_requests: &Requests,
    ) {
        for (leaf, usage) in Self::usage_of(assignment, single_pod_requests) {
            self.add_tas_usage(&leaf, &usage);
        }
    }

    /// [`Self::add_assignment`] of a PodSet of `holder`, remembered as the holder's usage.
    pub fn add_held_assignment(
        &mut self,
        holder: &str,
        assignment: &TopologyAssignment,
        single_pod_requests: &Requests,
    ) {
        for (leaf, usage) in Self::usage_of(assignment, single_pod_requests) {
            if self.tree.leaf_by_id.contains_key(&leaf) {
                self.add_tas_usage(&leaf, &usage);
                self.record(holder, &leaf, &usage);
            }
        }
    }

    /// The usage per leaf id of every named holder (TAS placements and non-TAS pods alike).
    pub fn holders(&self) -> &BTreeMap<String, BTreeMap<String, Requests>> {
        &self.holders
    }

    fn record(&mut self, holder: &str, leaf_id: &str, usage: &Requests) {
        let held = Arc::make_mut(&mut self.holders)
            .entry(holder.to_owned())
            .or_default();
        add(held.entry(leaf_id.to_owned()).or_default(), usage);
    }

    /// The leaf's full domain id (every level's value).
    fn leaf_path(&self, leaf: usize) -> String {
        domain_id(&self.tree.domains[self.tree.leaves[leaf].domain].level_values)
    }

    /// The leaf's id as usage names it (`TopologyTree::leaf_by_id`): the hostname when the
    /// lowest level is the hostname, else the full domain id.
    fn leaf_id(&self, leaf: usize) -> String {
        let values = &self.tree.domains[self.tree.leaves[leaf].domain].level_values;
        match values.last() {
            Some(host) if self.tree.lowest_level_is_node => host.clone(),
            _ => domain_id(values),
        }
    }

    /// Whether the leaf with this id lies in the domain with this id (any level).
    pub fn leaf_in_domain(&self, leaf_id: &str, domain: &str) -> bool {
        self.tree
            .leaf_by_id
            .get(leaf_id)
            .is_some_and(|&leaf| belongs_to(&self.leaf_path(leaf), domain))
    }

    /// Free capacity minus TAS usage (only the free capacity when simulating empty).
    pub fn remaining_capacity(&self, leaf: usize, simulate_empty: bool) -> &Requests {
        if simulate_empty {
            &self.free[leaf]
        } else {
            &self.remaining[leaf]
        }
    }

    /// The remaining units of `resource` in the leaves under `domain` (never negative).
    pub fn free_in_domain(&self, domain: usize, resource: &str) -> i64 {
        let mut stack = vec![domain];
        let mut total = 0i64;
        while let Some(current) = stack.pop() {
            let node = &self.tree.domains[current];
            if let Some(leaf) = node.leaf {
                let free = self.remaining_capacity(leaf, false);
                total = total.saturating_add(free.get(resource).copied().unwrap_or(0).max(0));
            }
            stack.extend(node.children.iter().copied());
        }
        total
    }

    /// How many more pods of `shape` (one pod's requests, `pods` included) fit in the
    /// leaves under `domain` (an index) with the usage as it is: Kueue's measure of a
    /// domain's capacity (its state) for that shape.
    pub fn pods_fitting_in_domain(&self, domain: usize, shape: &Requests) -> i64 {
        let mut stack = vec![domain];
        let mut total = 0i64;
        while let Some(current) = stack.pop() {
            let node = &self.tree.domains[current];
            if let Some(leaf) = node.leaf {
                let (count, _) = count_in(shape, self.remaining_capacity(leaf, false));
                total = total.saturating_add(i64::from(count));
            }
            stack.extend(node.children.iter().copied());
        }
        total
    }

    /// `FindTopologyAssignmentsForFlavor`: PodSets in order, those of one group (a leader and
    /// its workers) together; stops at the first that fails, whose reason every PodSet of its
    /// group carries. PodSets after a failure are absent from the result.
    pub fn find_topology_assignments(
        &self,
        requests: &[PodSetTasRequest],
        options: &SearchOptions,
    ) -> BTreeMap<String, PodSetTasResult> {
        self.find_topology_assignments_assuming(requests, options, &mut BTreeMap::new())
    }

    /// [`Self::find_topology_assignments`] over usage other flavors' PodSets of the same
    /// Workload already assumed on the same leaves (`WithAggregatedDomainUsages`, Kueue's
    /// `TASHandleOverlappingFlavors`); this run's assignments are added to it.
    pub fn find_topology_assignments_assuming(
        &self,
        requests: &[PodSetTasRequest],
        options: &SearchOptions,
        assumed: &mut BTreeMap<String, Requests>,
    ) -> BTreeMap<String, PodSetTasResult> {
        let mut results = BTreeMap::new();
        for group in groups(requests) {
            let Some((workers, leader)) = leader_and_workers(&group) else {
                continue;
            };
            let inputs = RunInputs {
                assumed_usage: assumed,
                simulate_empty: options.simulate_empty,
                required_domain: &options.within_domain,
                fit_ordering: options.fit_ordering.clone(),
            };
            match find_topology_assignment(self, workers, leader, inputs) {
                Err(reason) => {
                    for request in &group {
                        results.insert(
                            request.name.clone(),
                            PodSetTasResult {
                                assignment: None,
                                failure_reason: reason.clone(),
                            },
                        );
                    }
                    return results;
                }
                Ok(run) => {
                    let mut placed = vec![(workers, run.workers)];
                    if let (Some(leader), Some(assignment)) = (leader, run.leader) {
                        placed.push((leader, assignment));
                    }
                    for (request, assignment) in placed {
                        for (leaf, usage) in
                            Self::usage_of(&assignment, &request.single_pod_requests)
                        {
                            add(assumed.entry(leaf).or_default(), &usage);
                        }
                        results.insert(
                            request.name.clone(),
                            PodSetTasResult {
                                assignment: Some(assignment),
                                failure_reason: String::new(),
                            },
                        );
                    }
                }
            }
        }
        results
    }
}

/// PodSets grouped by `podSetGroupName` (ungrouped ones alone), in first-seen order.
fn groups(requests: &[PodSetTasRequest]) -> Vec<Vec<&PodSetTasRequest>> {
    let mut groups: Vec<(Option<&str>, Vec<&PodSetTasRequest>)> = Vec::new();
    for request in requests {
        let key = request.group.as_deref();
        match groups
            .iter_mut()
            .find(|(group, _)| key.is_some() && *group == key)
        {
            Some((_, members)) => members.push(request),
            None => groups.push((key, vec![request])),
        }
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

/// `findLeaderAndWorkers`: of two grouped PodSets the one with more pods is the workers'.
fn leader_and_workers<'a>(
    group: &[&'a PodSetTasRequest],
) -> Option<(&'a PodSetTasRequest, Option<&'a PodSetTasRequest>)> {
    match group {
        [workers, leader, ..] if leader.count > workers.count => Some((leader, Some(workers))),
        [workers, leader, ..] => Some((workers, Some(leader))),
        [workers] => Some((workers, None)),
        [] => None,
    }
}
