//! One run of Kueue's TAS placement for a PodSet (and its leader) in one flavor
//! (`findTopologyAssignment` in `tas_flavor_snapshot.go`): phase 1 counts the pods, slices and
//! leaders every domain can hold, bottom up; phase 2 picks the level and domains that fit
//! (BestFit, or LeastFreeCapacity for unconstrained requests) and walks down level by level
//! keeping the number of domains minimal, then writes the lowest level's pod counts.
//!
//! Knows nothing about other PodSets of the Workload or assumed usage across them (see
//! `snapshot`); the orderings live in `order`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;
use tessera_model::{node_selector, taints};

use crate::tas::message::{self, ExclusionStats};
use crate::tas::order::FitOrdering;
use crate::tas::request::{
    PodSetTasRequest, SliceConstraint, TopologyAssignment, TopologyDomainAssignment, count_in,
    subtract, with_one_pod,
};
use crate::tas::snapshot::TasSnapshot;
use crate::tas::tree::{TopologyTree, belongs_to, domain_id};
use crate::workload::Requests;

/// The per-run scratch counts of one domain (`domainState`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DomainState {
    pub pod_count: i32,
    pub slice_count: i32,
    pub pod_count_with_leader: i32,
    pub slice_count_with_leader: i32,
    pub leader_count: i32,
}

/// The placement-specific inputs of one run (`topologyAssignmentParameters`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Params {
    pub count: i32,
    pub leader_count: i32,
    pub slice_size: i32,
    pub requested_level: usize,
    pub slice_level: usize,
    pub slice_size_at_level: BTreeMap<usize, i32>,
    pub required: bool,
    pub unconstrained: bool,
    pub multi_layer: Vec<SliceConstraint>,
}

/// What one run needs besides the PodSets.
#[derive(Debug, Clone)]
pub(crate) struct RunInputs<'a> {
    pub assumed_usage: &'a BTreeMap<String, Requests>,
    pub simulate_empty: bool,
    pub required_domain: &'a str,
    pub fit_ordering: FitOrdering,
}

/// The assignments of one run: the leader's (when there is one) and the workers'.
pub(crate) struct RunResult {
    pub leader: Option<TopologyAssignment>,
    pub workers: TopologyAssignment,
}

/// The state of one run over a snapshot.
pub(crate) struct Search<'a> {
    pub snapshot: &'a TasSnapshot,
    pub tree: &'a TopologyTree,
    pub states: Vec<DomainState>,
    pub params: Params,
    pub stats: ExclusionStats,
    pub fit_ordering: FitOrdering,
}

/// `findTopologyAssignment`: the assignment of `workers` (and `leader`) or Kueue's reason.
pub(crate) fn find_topology_assignment(
    snapshot: &TasSnapshot,
    workers: &PodSetTasRequest,
    leader: Option<&PodSetTasRequest>,
    inputs: RunInputs<'_>,
) -> Result<RunResult, String> {
    let tree = &snapshot.tree;
    let params = params(tree, workers, leader.is_some())?;
    let mut search = Search {
        snapshot,
        tree,
        states: vec![DomainState::default(); tree.domains.len()],
        params,
        stats: ExclusionStats::default(),
        fit_ordering: inputs.fit_ordering.clone(),
    };
    let requests = with_one_pod(&workers.single_pod_requests);
    let leader_requests = leader.map(|leader| with_one_pod(&leader.single_pod_requests));
    let mut tolerations = workers.tolerations.clone();
    tolerations.extend(snapshot.flavor_tolerations.iter().cloned());
    search.fill_in_counts(
        workers,
        &tolerations,
        &requests,
        leader_requests.as_ref(),
        &inputs,
    );
    let (fit_level, fit) = search.find_level_with_fit_domains(search.params.requested_level)?;
    search.descend(fit_level, fit, leader.is_some())
}

/// Resolves the request's levels and slice layers (the checks at the top of
/// `findTopologyAssignment`, with its messages).
fn params(
    tree: &TopologyTree,
    workers: &PodSetTasRequest,
    has_leader: bool,
) -> Result<Params, String> {
    let request = workers.topology_request.clone().unwrap_or_default();
    let slice_size = match request.slices.first() {
        None => 1,
        Some(layer) if layer.size <= 0 => {
            return Err("slice topology requested, but slice size not provided".to_owned());
        }
        Some(layer) => layer.size,
    };
    let level_key = if let Some(required) = &request.required {
        Some(required.clone())
    } else if let Some(preferred) = &request.preferred {
        Some(preferred.clone())
    } else if request.is_slice_only() {
        Some(tree.highest_level().to_owned())
    } else if request.unconstrained || workers.implied {
        Some(tree.lowest_level().to_owned())
    } else {
        None
    };
    let Some(level_key) = level_key else {
        return Err("topology level not specified".to_owned());
    };
    let requested_level = tree
        .level_index(&level_key)
        .ok_or_else(|| format!("no requested topology level: {level_key}"))?;
    let slice_key = request.slices.first().map_or_else(
        || tree.lowest_level().to_owned(),
        |layer| layer.topology.clone(),
    );
    let slice_level = tree
        .level_index(&slice_key)
        .ok_or_else(|| format!("no requested topology level for slices: {slice_key}"))?;
    if requested_level > slice_level {
        return Err(format!(
            "podset slice topology {slice_key} is above the podset topology {level_key}"
        ));
    }
    let slice_size_at_level = slice_size_at_level(tree, &request.slices, slice_size, slice_level)?;
    let multi_layer = if slice_size_at_level.is_empty() {
        Vec::new()
    } else {
        request.slices.clone()
    };
    Ok(Params {
        count: workers.count,
        leader_count: i32::from(has_leader),
        slice_size,
        requested_level,
        slice_level,
        slice_size_at_level,
        required: request.required.is_some(),
        unconstrained: request.unconstrained || workers.implied || request.is_slice_only(),
        multi_layer,
    })
}

/// `buildSliceSizeAtLevel`: the slice size of every level covered by an inner layer.
fn slice_size_at_level(
    tree: &TopologyTree,
    layers: &[SliceConstraint],
    slice_size: i32,
    slice_level: usize,
) -> Result<BTreeMap<usize, i32>, String> {
    let mut sizes = BTreeMap::new();
    let mut previous_size = slice_size;
    let mut previous_level = slice_level;
    for layer in layers.iter().skip(1) {
        let level = tree.level_index(&layer.topology).ok_or_else(|| {
            format!(
                "no requested topology level for additional slice layer: {}",
                layer.topology
            )
        })?;
        if level <= previous_level {
            return Err(format!(
                "additional slice layer topology {} must be at a lower level than {}",
                layer.topology, tree.levels[previous_level]
            ));
        }
        if layer.size == 0 || previous_size % layer.size != 0 {
            return Err(format!(
                "additional slice layer size {} must evenly divide parent layer size {previous_size}",
                layer.size
            ));
        }
        for covered in previous_level + 1..=level {
            sizes.insert(covered, layer.size);
        }
        previous_size = layer.size;
        previous_level = level;
    }
    Ok(sizes)
}

/// Why a node is left out for a PodSet (the default simulator's `FindFeasibleNodes`).
enum Exclusion {
    Taint(String),
    NodeSelector,
    Affinity,
}

fn node_exclusion(
    node: &crate::tas::tree::TopologyNode,
    workers: &PodSetTasRequest,
    tolerations: &[Toleration],
) -> Option<Exclusion> {
    let untolerated = node.taints.iter().find(|taint| {
        matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
            && !taints::tolerated(tolerations, taint)
    });
    if let Some(taint) = untolerated {
        let text = match taint.value.as_deref() {
            Some(value) if !value.is_empty() => {
                format!("{}={value}:{}", taint.key, taint.effect)
            }
            _ => format!("{}:{}", taint.key, taint.effect),
        };
        return Some(Exclusion::Taint(text));
    }
    let selected = workers
        .node_selector
        .iter()
        .all(|(key, value)| node.labels.get(key) == Some(value));
    if !selected {
        return Some(Exclusion::NodeSelector);
    }
    let affinity_ok = workers.required_affinity.is_empty()
        || workers
            .required_affinity
            .iter()
            .any(|term| node_selector::term_matches(term, &node.name, &node.labels));
    if !affinity_ok {
        return Some(Exclusion::Affinity);
    }
    None
}

impl Search<'_> {
    pub(crate) fn state(&self, domain: usize) -> &DomainState {
        &self.states[domain]
    }

    fn state_mut(&mut self, domain: usize) -> &mut DomainState {
        &mut self.states[domain]
    }

    /// `fillInCounts`: leaf counts from remaining capacity, then rolled up from the roots.
    fn fill_in_counts(
        &mut self,
        workers: &PodSetTasRequest,
        tolerations: &[Toleration],
        requests: &Requests,
        leader_requests: Option<&Requests>,
        inputs: &RunInputs<'_>,
    ) {
        let tree = self.tree;
        for (leaf_index, leaf) in tree.leaves.iter().enumerate() {
            self.stats.total_nodes += 1;
            if let Some(node) = leaf.node.map(|node| &tree.nodes[node]) {
                match node_exclusion(node, workers, tolerations) {
                    Some(Exclusion::Taint(taint)) => {
                        *self.stats.taints.entry(taint).or_default() += 1;
                        continue;
                    }
                    Some(Exclusion::NodeSelector) => {
                        self.stats.node_selector += 1;
                        continue;
                    }
                    Some(Exclusion::Affinity) => {
                        self.stats.affinity += 1;
                        continue;
                    }
                    None => {}
                }
            }
            let domain = &tree.domains[leaf.domain];
            if !inputs.required_domain.is_empty()
                && !belongs_to(&domain_id(&domain.level_values), inputs.required_domain)
            {
                self.stats.topology_domain += 1;
                continue;
            }
            let base = self
                .snapshot
                .remaining_capacity(leaf_index, inputs.simulate_empty);
            let remaining: Cow<'_, Requests> = match inputs.assumed_usage.get(&domain.id) {
                Some(assumed) => {
                    let mut remaining = base.clone();
                    subtract(&mut remaining, assumed);
                    Cow::Owned(remaining)
                }
                None => Cow::Borrowed(base),
            };
            let (pod_count, limiting) = count_in(requests, &remaining);
            if pod_count == 0
                && let Some(resource) = limiting
            {
                *self.stats.resources.entry(resource.to_owned()).or_default() += 1;
            }
            let mut leader_count = 0;
            let mut with_leader = pod_count;
            if let Some(leader_requests) = leader_requests
                && count_in(leader_requests, &remaining).0 > 0
            {
                leader_count = 1;
                let mut remaining = remaining.into_owned();
                subtract(&mut remaining, leader_requests);
                with_leader = count_in(requests, &remaining).0;
            }
            let state = self.state_mut(leaf.domain);
            state.pod_count = pod_count;
            state.leader_count = leader_count;
            state.pod_count_with_leader = with_leader;
        }
        let roots: Vec<usize> = tree.roots().collect();
        for root in roots {
            self.fill_in_counts_helper(root, 0);
        }
    }

    /// `fillInCountsHelper`; recursion depth is the number of levels (at most 16).
    fn fill_in_counts_helper(&mut self, domain: usize, level: usize) {
        let tree = self.tree;
        let slice_size = self.params.slice_size;
        let slice_level = self.params.slice_level;
        let leader_required = self.params.leader_count > 0;
        let children = &tree.domains[domain].children;
        if children.is_empty() {
            if level == slice_level {
                let state = self.state_mut(domain);
                state.slice_count = state.pod_count / slice_size;
                state.slice_count_with_leader = state.pod_count_with_leader / slice_size;
            }
            return;
        }
        let inner_size = self.params.slice_size_at_level.get(&(level + 1)).copied();
        let mut children_capacity = 0i32;
        let mut slice_capacity = 0i32;
        let mut has_contributor = false;
        let mut min_pod_difference = i32::MAX;
        let mut min_slice_difference = i32::MAX;
        let mut leader_count = 0;
        for &child in children {
            self.fill_in_counts_helper(child, level + 1);
            let child_state = *self.state(child);
            let (mut pods, mut pods_with_leader) =
                (child_state.pod_count, child_state.pod_count_with_leader);
            if let Some(inner) = inner_size {
                pods = pods / inner * inner;
                pods_with_leader = pods_with_leader / inner * inner;
            }
            children_capacity = children_capacity.saturating_add(pods);
            slice_capacity = slice_capacity.saturating_add(child_state.slice_count);
            if !leader_required || child_state.leader_count > 0 {
                has_contributor = true;
                min_pod_difference = min_pod_difference.min(pods - pods_with_leader);
                min_slice_difference = min_slice_difference
                    .min(child_state.slice_count - child_state.slice_count_with_leader);
            }
            leader_count = leader_count.max(child_state.leader_count);
        }
        let mut slice_with_leader = 0;
        let state = self.state_mut(domain);
        state.pod_count = children_capacity;
        if has_contributor {
            state.pod_count_with_leader = children_capacity.saturating_sub(min_pod_difference);
            slice_with_leader = slice_capacity.saturating_sub(min_slice_difference);
        } else {
            state.pod_count_with_leader = 0;
        }
        state.leader_count = leader_count;
        if level == slice_level {
            slice_capacity = state.pod_count / slice_size;
            slice_with_leader = state.pod_count_with_leader / slice_size;
        }
        state.slice_count = slice_capacity;
        state.slice_count_with_leader = slice_with_leader;
    }

    fn not_fit(&self, level: usize, fit: i32, requested: i32) -> String {
        if self.params.multi_layer.is_empty() {
            message::not_fit(
                &self.snapshot.topology_name,
                fit,
                requested,
                self.params.slice_size,
                &self.stats,
            )
        } else {
            self.multi_layer_not_fit(level)
        }
    }

    /// `multiLayerNotFitMessage`.
    fn multi_layer_not_fit(&self, level: usize) -> String {
        let mut text = format!(
            "topology {} doesn't allow to fit",
            message::go_quote(&self.snapshot.topology_name)
        );
        let best =
            self.tree.per_level[level]
                .values()
                .copied()
                .fold(None, |best, domain| match best {
                    None => Some(domain),
                    Some(current) => {
                        let (a, b) = (self.state(domain), self.state(current));
                        let better = a.slice_count > b.slice_count
                            || (a.slice_count == b.slice_count
                                && self.tree.domains[domain].id < self.tree.domains[current].id);
                        Some(if better { domain } else { current })
                    }
                });
        let Some(best) = best else {
            return text;
        };
        for layer in &self.params.multi_layer {
            let Some(target) = self.tree.level_index(&layer.topology) else {
                continue;
            };
            let needed = if layer.size == 0 {
                0
            } else {
                self.params.count / layer.size
            };
            let fit = self.count_slices_in_subtree(best, level, target, layer.size);
            text.push_str(&format!(
                "; {fit}/{needed} slice(s) fit on level {}",
                layer.topology
            ));
        }
        text + &self.stats.suffix()
    }

    fn count_slices_in_subtree(
        &self,
        domain: usize,
        level: usize,
        target: usize,
        size: i32,
    ) -> i32 {
        if level == target {
            return if size == 0 {
                0
            } else {
                self.state(domain).pod_count / size
            };
        }
        self.tree.domains[domain]
            .children
            .iter()
            .map(|&child| self.count_slices_in_subtree(child, level + 1, target, size))
            .fold(0, i32::saturating_add)
    }

    /// `findLevelWithFitDomains`: the level (the requested one or, for preferred requests,
    /// a higher one) and the domains there that hold every slice and leader.
    fn find_level_with_fit_domains(&mut self, level: usize) -> Result<(usize, Vec<usize>), String> {
        let domains: Vec<usize> = self.tree.per_level[level].values().copied().collect();
        if domains.is_empty() {
            return Err(format!(
                "no topology domains at level: {}",
                self.tree.levels[level]
            ));
        }
        let unconstrained = self.params.unconstrained;
        let leader_count = self.params.leader_count;
        let sorted = self.sorted_domains_with_leader(&domains, unconstrained);
        let slice_count = self.params.count / self.params.slice_size;
        let mut top = sorted[0];
        if use_best_fit(unconstrained)
            && self.state(top).slice_count_with_leader >= slice_count
            && self.state(top).leader_count >= leader_count
        {
            top = self.find_best_fit_for_slices(&sorted, slice_count, leader_count);
        }
        if use_least_free_capacity(unconstrained) {
            for &candidate in &sorted {
                let state = self.state(candidate);
                let capacity = if leader_count > 0 {
                    if state.leader_count < leader_count {
                        continue;
                    }
                    state.slice_count_with_leader
                } else {
                    state.slice_count
                };
                if capacity >= slice_count {
                    return Ok((level, vec![candidate]));
                }
            }
            if self.params.required {
                let max_found = self.state(sorted[sorted.len() - 1]).pod_count;
                return Err(self.not_fit(level, max_found, slice_count));
            }
        }
        if self.state(top).slice_count_with_leader < slice_count
            || self.state(top).leader_count < leader_count
        {
            if self.params.required {
                return Err(self.not_fit(level, self.state(top).slice_count, slice_count));
            }
            if level > 0 && !unconstrained {
                return self.find_level_with_fit_domains(level - 1);
            }
            return self.spread_over_level(level, sorted, slice_count);
        }
        Ok((level, vec![top]))
    }

    /// The tail of `findLevelWithFitDomains`: no single domain of the top level (or of an
    /// unconstrained request's level) holds everything, so leaders first, then workers, over
    /// as few domains as the ordering gives.
    fn spread_over_level(
        &mut self,
        level: usize,
        sorted: Vec<usize>,
        slice_count: i32,
    ) -> Result<(usize, Vec<usize>), String> {
        let unconstrained = self.params.unconstrained;
        let leader_count = self.params.leader_count;
        let mut results = Vec::new();
        let mut remaining_slices = slice_count;
        let mut remaining_leaders = leader_count;
        let sorted = self.prioritize_leader_domain(
            sorted,
            self.params.count,
            leader_count,
            self.params.slice_size,
            true,
        );
        let mut index = 0;
        while remaining_leaders > 0
            && index < sorted.len()
            && self.state(sorted[index]).leader_count > 0
        {
            let mut domain = sorted[index];
            if use_best_fit(unconstrained)
                && self.state(domain).slice_count_with_leader >= remaining_slices
            {
                domain = self.find_best_fit_for_slices(
                    &sorted[index..],
                    remaining_slices,
                    remaining_leaders,
                );
            }
            results.push(domain);
            remaining_leaders -= self.state(domain).leader_count;
            remaining_slices -= self.state(domain).slice_count_with_leader;
            index += 1;
        }
        if remaining_leaders > 0 {
            return Err(self.not_fit(level, leader_count - remaining_leaders, slice_count));
        }
        let sorted = self.sorted_domains(&sorted[index..], unconstrained);
        let mut index = 0;
        while remaining_slices > 0 && index < sorted.len() {
            let mut domain = sorted[index];
            if use_best_fit(unconstrained) && self.state(domain).slice_count >= remaining_slices {
                domain = self.find_best_fit_for_slices(&sorted[index..], remaining_slices, 0);
            }
            results.push(domain);
            remaining_slices -= self.state(domain).slice_count;
            index += 1;
        }
        if remaining_slices > 0 {
            return Err(self.not_fit(level, slice_count - remaining_slices, slice_count));
        }
        Ok((level, results))
    }

    /// Phase 2b–d: down from the fit level to the leaves, then the assignments.
    fn descend(
        &mut self,
        fit_level: usize,
        fit: Vec<usize>,
        has_leader: bool,
    ) -> Result<RunResult, String> {
        let Params {
            count,
            leader_count,
            slice_size,
            slice_level,
            unconstrained,
            ..
        } = self.params.clone();
        let last_level = self.tree.levels.len() - 1;
        let mut current = self.update_counts_to_minimum(
            fit,
            count,
            leader_count,
            slice_size,
            unconstrained,
            true,
        )?;
        let mut level = fit_level;
        while level < last_level.min(slice_level) {
            let lower: Vec<usize> = current
                .iter()
                .flat_map(|&domain| self.tree.domains[domain].children.iter().copied())
                .collect();
            let sorted = self.sorted_domains(&lower, unconstrained);
            current = self.update_counts_to_minimum(
                sorted,
                count,
                leader_count,
                slice_size,
                unconstrained,
                true,
            )?;
            level += 1;
        }
        while level < last_level {
            let size_on_level = if level >= slice_level {
                self.params
                    .slice_size_at_level
                    .get(&(level + 1))
                    .copied()
                    .unwrap_or(1)
            } else {
                slice_size
            };
            let mut next = Vec::new();
            for &domain in &current {
                let children = self.tree.domains[domain].children.clone();
                let sorted = self.sorted_domains(&children, unconstrained);
                if size_on_level > 1 {
                    for &child in &sorted {
                        let state = self.state_mut(child);
                        state.slice_count = state.pod_count / size_on_level;
                        state.slice_count_with_leader = state.pod_count_with_leader / size_on_level;
                    }
                }
                let state = *self.state(domain);
                next.extend(self.update_counts_to_minimum(
                    sorted,
                    state.pod_count,
                    state.leader_count,
                    size_on_level,
                    unconstrained,
                    size_on_level > 1,
                )?);
            }
            current = next;
            level += 1;
        }
        let mut leader = None;
        if has_leader {
            let leader_domains: Vec<(usize, i32)> = current
                .iter()
                .map(|&domain| (domain, self.state(domain).leader_count))
                .filter(|&(_, count)| count > 0)
                .collect();
            leader = Some(self.build_assignment(leader_domains));
            current.retain(|&domain| self.state(domain).pod_count > 0);
        }
        let worker_domains = current
            .iter()
            .map(|&domain| (domain, self.state(domain).pod_count))
            .collect();
        Ok(RunResult {
            leader,
            workers: self.build_assignment(worker_domains),
        })
    }

    /// `updateCountsToMinimumGeneric`: takes domains in order until `count` pods (or slices)
    /// and `leader_count` leaders are placed, shrinking the last one to what is left.
    fn update_counts_to_minimum(
        &mut self,
        domains: Vec<usize>,
        count: i32,
        leader_count: i32,
        slice_size: i32,
        unconstrained: bool,
        slices: bool,
    ) -> Result<Vec<usize>, String> {
        let domains =
            self.prioritize_leader_domain(domains, count, leader_count, slice_size, slices);
        let mut result = Vec::new();
        let mut remaining = if slices { count / slice_size } else { count };
        let mut remaining_leaders = leader_count;
        for index in 0..domains.len() {
            let mut domain = domains[index];
            if remaining_leaders > 0 {
                let (chosen, completed) = self.consume_with_leaders(
                    domain,
                    &domains[index..],
                    &mut remaining,
                    &mut remaining_leaders,
                    unconstrained,
                    if slices { slice_size } else { 1 },
                    slices,
                );
                result.push(chosen);
                if completed {
                    return Ok(result);
                }
                continue;
            }
            if use_best_fit(unconstrained) && self.primary(domain, slices) >= remaining {
                domain = if slices {
                    self.find_best_fit_for_slices(&domains[index..], remaining, 0)
                } else {
                    self.find_best_fit_for_pods(&domains[index..], remaining, 0)
                };
            }
            let available = self.primary(domain, slices);
            let state = self.state_mut(domain);
            state.leader_count = 0;
            if available >= remaining {
                if slices {
                    state.pod_count = remaining * slice_size;
                    state.slice_count = remaining;
                } else {
                    state.pod_count = remaining;
                }
                result.push(domain);
                return Ok(result);
            }
            if slices {
                state.pod_count = available * slice_size;
            }
            remaining -= available;
            result.push(domain);
        }
        Err(format!(
            "code assumptions violated: {remaining} pod(s) or slice(s) and {remaining_leaders} leader(s) left after distributing {count} over {} domain(s)",
            domains.len()
        ))
    }

    fn primary(&self, domain: usize, slices: bool) -> i32 {
        let state = self.state(domain);
        if slices {
            state.slice_count
        } else {
            state.pod_count
        }
    }

    fn with_leader(&self, domain: usize, slices: bool) -> i32 {
        let state = self.state(domain);
        if slices {
            state.slice_count_with_leader
        } else {
            state.pod_count_with_leader
        }
    }

    fn set_primary(&mut self, domain: usize, slices: bool, value: i32) {
        let state = self.state_mut(domain);
        if slices {
            state.slice_count = value;
        } else {
            state.pod_count = value;
        }
    }

    /// `consumeWithLeadersGeneric`.
    #[allow(clippy::too_many_arguments)]
    fn consume_with_leaders(
        &mut self,
        domain: usize,
        remaining_domains: &[usize],
        remaining: &mut i32,
        remaining_leaders: &mut i32,
        unconstrained: bool,
        slice_size: i32,
        slices: bool,
    ) -> (usize, bool) {
        let mut domain = domain;
        if use_best_fit(unconstrained)
            && self.with_leader(domain, slices) >= *remaining
            && self.state(domain).leader_count >= *remaining_leaders
        {
            domain = if slices {
                self.find_best_fit_for_slices(remaining_domains, *remaining, *remaining_leaders)
            } else {
                self.find_best_fit_for_pods(remaining_domains, *remaining, *remaining_leaders)
            };
        }
        let with_leader = self.with_leader(domain, slices);
        if with_leader >= *remaining && self.state(domain).leader_count >= *remaining_leaders {
            self.set_primary(domain, slices, *remaining);
            let state = self.state_mut(domain);
            state.leader_count = *remaining_leaders;
            state.pod_count = *remaining * slice_size;
            return (domain, true);
        }
        let taken = with_leader.min(*remaining);
        if slices {
            self.state_mut(domain).slice_count_with_leader = taken;
        } else {
            self.state_mut(domain).pod_count_with_leader = taken;
        }
        let leaders = self.state(domain).leader_count.min(*remaining_leaders);
        self.set_primary(domain, slices, taken);
        let state = self.state_mut(domain);
        state.leader_count = leaders;
        state.pod_count = taken * slice_size;
        *remaining_leaders -= leaders;
        *remaining -= taken;
        (domain, false)
    }

    /// `prioritizeLeaderDomain`: the first leader-capable domain whose leader penalty the
    /// others' capacity absorbs moves to the front.
    fn prioritize_leader_domain(
        &self,
        domains: Vec<usize>,
        count: i32,
        leader_count: i32,
        slice_size: i32,
        slices: bool,
    ) -> Vec<usize> {
        if leader_count == 0 || domains.len() < 2 {
            return domains;
        }
        let required = if slices { count / slice_size } else { count };
        let available = domains
            .iter()
            .map(|&domain| self.primary(domain, slices))
            .fold(0, i32::saturating_add);
        for (index, &domain) in domains.iter().enumerate() {
            let state = self.state(domain);
            if state.leader_count < leader_count {
                continue;
            }
            let penalty = self.primary(domain, slices) - self.with_leader(domain, slices);
            if available.saturating_sub(penalty) < required {
                continue;
            }
            let mut result = domains.clone();
            result[..=index].rotate_right(1);
            return result;
        }
        domains
    }

    /// `buildAssignment`: domains in lexicographic order of their level values, the hostname
    /// alone when it is the lowest level, domains with no pods left out.
    fn build_assignment(&self, mut domains: Vec<(usize, i32)>) -> TopologyAssignment {
        domains.sort_by(|a, b| self.compare_level_values(a.0, b.0));
        let first_level = if self.tree.lowest_level_is_node {
            self.tree.levels.len() - 1
        } else {
            0
        };
        TopologyAssignment {
            levels: self.tree.levels[first_level..].to_vec(),
            domains: domains
                .into_iter()
                .filter(|&(_, count)| count != 0)
                .map(|(domain, count)| TopologyDomainAssignment {
                    values: self.tree.domains[domain].level_values[first_level..].to_vec(),
                    count,
                })
                .collect(),
        }
    }
}

/// BestFit orders fitting domains (KEP 2724's matrix): everything but unconstrained requests.
pub(crate) fn use_best_fit(unconstrained: bool) -> bool {
    !use_least_free_capacity(unconstrained)
}

/// LeastFreeCapacity for unconstrained requests (`TASProfileMixed`, on by default).
pub(crate) fn use_least_free_capacity(unconstrained: bool) -> bool {
    unconstrained
}
