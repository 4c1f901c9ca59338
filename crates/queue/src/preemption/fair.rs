//! Preemption with fair sharing (`fairPreemptions` in `preemption.go` and `fairsharing/`):
//! with the incoming Workload's usage added, walk from the root to the ClusterQueue whose
//! subtree has the highest dominant resource share (`TargetClusterQueueOrdering`); take from
//! the preemptor's own ClusterQueue by priority, reclaim unconditionally while the preemptor
//! stays within nominal quota, and otherwise preempt where strategy S2-a (then S2-b for what
//! S2-a refused) holds between the two almost-least-common-ancestors' shares. All or nothing:
//! when the request still does not fit no target is returned; otherwise fill-back trims them.
//!
//! Knows nothing about the classic variants (see `classical`) or the fair-sharing admission
//! iterator.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::cluster_queue::PreemptionPolicy;
use crate::fair_sharing::{Drs, compare_drs};
use crate::resources::FlavorResourceQuantities;
use crate::tree::{NodeId, Tree};

use super::classical::restore;
use super::{
    Candidate, Context, FairSharingConfig, FairSharingStrategy, PreemptionReason, Targets,
    fill_back, satisfies_preemption_policy,
};

impl FairSharingStrategy {
    /// Whether the strategy lets the preemptor take from the target (`Strategy`); with
    /// `prevent_flapping`, S2-a refuses at equal shares.
    fn passes(
        self,
        preemptor_new: &Drs,
        target_old: &Drs,
        target_new: &Drs,
        prevent_flapping: bool,
    ) -> bool {
        match self {
            FairSharingStrategy::LessThanOrEqualToFinalShare => {
                let order = compare_drs(preemptor_new, target_new);
                if prevent_flapping {
                    order.is_lt()
                } else {
                    order.is_le()
                }
            }
            FairSharingStrategy::LessThanInitialShare => {
                compare_drs(preemptor_new, target_old).is_lt()
            }
        }
    }
}

fn share(tree: &Tree, id: NodeId) -> Drs {
    tree.dominant_resource_share(id, &FlavorResourceQuantities::new())
}

/// The ClusterQueues to take candidates from, most unfair subtree first
/// (`TargetClusterQueueOrdering`).
struct TargetOrdering<'a> {
    preemptor: NodeId,
    preemptor_ancestors: BTreeSet<NodeId>,
    queues: BTreeMap<NodeId, VecDeque<Candidate<'a>>>,
    pruned_queues: BTreeSet<NodeId>,
    pruned_cohorts: BTreeSet<NodeId>,
}

impl<'a> TargetOrdering<'a> {
    fn new(tree: &Tree, preemptor: NodeId, candidates: &[Candidate<'a>]) -> TargetOrdering<'a> {
        let mut queues: BTreeMap<NodeId, VecDeque<Candidate<'a>>> = BTreeMap::new();
        for candidate in candidates {
            queues
                .entry(candidate.cluster_queue)
                .or_default()
                .push_back(*candidate);
        }
        TargetOrdering {
            preemptor,
            preemptor_ancestors: tree.ancestors(preemptor).collect(),
            queues,
            pruned_queues: BTreeSet::new(),
            pruned_cohorts: BTreeSet::new(),
        }
    }

    fn has_workload(&self, id: NodeId) -> bool {
        self.queues.get(&id).is_some_and(|queue| !queue.is_empty())
    }

    fn pop(&mut self, id: NodeId) -> Option<Candidate<'a>> {
        self.queues.get_mut(&id).and_then(VecDeque::pop_front)
    }

    fn drop_queue(&mut self, id: NodeId) {
        self.pruned_queues.insert(id);
    }

    /// The next ClusterQueue to consider (`Iter`); the caller pops or drops between calls.
    fn next(&mut self, context: &Context<'a, '_>) -> Option<NodeId> {
        let tree = &context.tree;
        if tree.parent(self.preemptor).is_none() {
            return (!self.pruned_queues.contains(&self.preemptor)
                && self.has_workload(self.preemptor))
            .then_some(self.preemptor);
        }
        let root = tree.root(self.preemptor);
        while !self.pruned_cohorts.contains(&root) {
            if let Some(target) = self.next_target(context, root) {
                return Some(target);
            }
        }
        None
    }

    /// Descends from `cohort` to the child with the highest share (`nextTarget`); `None` when
    /// this pass only pruned nodes.
    fn next_target(&mut self, context: &Context<'a, '_>, mut cohort: NodeId) -> Option<NodeId> {
        let tree = &context.tree;
        loop {
            let mut highest_queue: Option<NodeId> = None;
            let mut highest_queue_share = Drs::negative();
            for &queue in tree.child_cluster_queues(cohort) {
                if self.pruned_queues.contains(&queue) {
                    continue;
                }
                let drs = share(tree, queue);
                if (!drs.is_borrowing() && queue != self.preemptor) || !self.has_workload(queue) {
                    self.pruned_queues.insert(queue);
                    continue;
                }
                match compare_drs(&drs, &highest_queue_share) {
                    std::cmp::Ordering::Greater => {
                        highest_queue_share = drs;
                        highest_queue = Some(queue);
                    }
                    std::cmp::Ordering::Equal => {
                        if let Some(current) = highest_queue
                            && self.first_candidate_precedes(context, queue, current)
                        {
                            highest_queue = Some(queue);
                        }
                    }
                    std::cmp::Ordering::Less => {}
                }
            }
            let mut highest_cohort: Option<NodeId> = None;
            let mut highest_cohort_share = Drs::negative();
            for &child in tree.child_cohorts(cohort) {
                if self.pruned_cohorts.contains(&child) {
                    continue;
                }
                let drs = share(tree, child);
                if !drs.is_borrowing() && !self.preemptor_ancestors.contains(&child) {
                    self.pruned_cohorts.insert(child);
                } else if compare_drs(&drs, &highest_cohort_share).is_ge() {
                    highest_cohort_share = drs;
                    highest_cohort = Some(child);
                }
            }
            match (highest_cohort, highest_queue) {
                (None, None) => {
                    self.pruned_cohorts.insert(cohort);
                    return None;
                }
                (Some(child), queue)
                    if queue.is_none()
                        || compare_drs(&highest_cohort_share, &highest_queue_share).is_ge() =>
                {
                    cohort = child;
                }
                (_, queue) => return queue,
            }
        }
    }

    /// Ties between ClusterQueues go to the one whose first candidate comes first.
    fn first_candidate_precedes(&self, context: &Context<'a, '_>, a: NodeId, b: NodeId) -> bool {
        let first = |id: NodeId| self.queues.get(&id).and_then(|queue| queue.front());
        match (first(a), first(b)) {
            (Some(a), Some(b)) => context.ordering(a, b).is_lt(),
            _ => false,
        }
    }

    /// The lowest Cohort above `target` that also holds the preemptor (`getLCA`).
    fn lowest_common_ancestor(&self, tree: &Tree, target: NodeId) -> Option<NodeId> {
        tree.ancestors(target)
            .find(|ancestor| self.preemptor_ancestors.contains(ancestor))
    }
}

/// The node just below `lca` on the way from `id` (`getAlmostLCA`); `id` itself when its
/// parent is `lca`.
fn almost_lowest_common_ancestor(tree: &Tree, id: NodeId, lca: NodeId) -> NodeId {
    let mut almost = id;
    for ancestor in tree.ancestors(id) {
        if ancestor == lca {
            break;
        }
        almost = ancestor;
    }
    almost
}

impl<'a> Context<'a, '_> {
    /// The candidates of the preemptor's ClusterQueue and of borrowing ClusterQueues in its
    /// tree that the policies allow (`findCandidates`).
    fn fair_candidates(&self) -> Vec<Candidate<'a>> {
        let request = self.request;
        let mut candidates = Vec::new();
        let mut collect = |queue: NodeId, policy: PreemptionPolicy| {
            candidates.extend(self.workloads_of(queue).filter(|candidate| {
                satisfies_preemption_policy(request.preemptor, candidate.workload, policy)
                    && candidate.workload.uses_resources(request.needs_preemption)
            }));
        };
        if request.policy.within_cluster_queue != PreemptionPolicy::Never {
            collect(self.cluster_queue, request.policy.within_cluster_queue);
        }
        if self.tree.parent(self.cluster_queue).is_some()
            && request.policy.reclaim_within_cohort != PreemptionPolicy::Never
        {
            let root = self.tree.root(self.cluster_queue);
            for queue in self.tree.subtree_cluster_queues(root) {
                if queue == self.cluster_queue || !self.is_borrowing_on_contested(queue) {
                    continue;
                }
                collect(queue, request.policy.reclaim_within_cohort);
            }
        }
        candidates
    }

    /// Whether a ClusterQueue in a Cohort borrows on a resource needing preemption
    /// (`cqIsBorrowing`).
    fn is_borrowing_on_contested(&self, queue: NodeId) -> bool {
        self.tree.parent(queue).is_some()
            && self
                .request
                .needs_preemption
                .iter()
                .any(|key| self.tree.borrowing(queue, key))
    }

    /// `workloadFitsForFairSharing`: the check without the incoming usage added for the shares.
    fn fits_for_fair_sharing(&mut self) -> bool {
        let (queue, usage) = (self.cluster_queue, self.request.usage);
        self.tree.remove_usages(queue, usage);
        let fits = self.workload_fits(true);
        self.tree.add_usages(queue, usage);
        fits
    }

    /// The preemptor's and target's almost-LCA shares (`ComputeShares`).
    fn shares(&self, ordering: &TargetOrdering<'a>, target: NodeId) -> (Drs, Drs) {
        match ordering.lowest_common_ancestor(&self.tree, target) {
            Some(lca) => (
                share(
                    &self.tree,
                    almost_lowest_common_ancestor(&self.tree, self.cluster_queue, lca),
                ),
                share(
                    &self.tree,
                    almost_lowest_common_ancestor(&self.tree, target, lca),
                ),
            ),
            None => (
                share(&self.tree, self.cluster_queue),
                share(&self.tree, target),
            ),
        }
    }

    /// The target's almost-LCA share with the candidate's usage removed
    /// (`ComputeTargetShareAfterRemoval`).
    fn target_share_after_removal(
        &mut self,
        ordering: &TargetOrdering<'a>,
        target: NodeId,
        candidate: &Candidate<'_>,
    ) -> Drs {
        self.remove(candidate);
        let (_, after) = self.shares(ordering, target);
        self.add(candidate);
        after
    }
}

/// No candidate can pass when the preemptor's share is infinite and the target's is not
/// (`fsStrategyUnsatisfiable`).
fn unsatisfiable(preemptor_new: &Drs, target_old: &Drs) -> bool {
    preemptor_new.precise_weighted_share() == f64::INFINITY
        && target_old.precise_weighted_share() != f64::INFINITY
}

struct FirstStrategy<'a> {
    fits: bool,
    targets: Targets<'a>,
    retry: Vec<Candidate<'a>>,
}

/// `runFirstFsStrategy`.
fn run_first_strategy<'a>(
    context: &mut Context<'a, '_>,
    candidates: &[Candidate<'a>],
    strategy: FairSharingStrategy,
    config: &FairSharingConfig,
) -> FirstStrategy<'a> {
    let preempt_within_nominal = config.preempt_within_nominal;
    let mut ordering = TargetOrdering::new(&context.tree, context.cluster_queue, candidates);
    let within_nominal = preempt_within_nominal
        && !context
            .request
            .needs_preemption
            .iter()
            .any(|key| context.tree.borrowing(context.cluster_queue, key));
    let mut result = FirstStrategy {
        fits: false,
        targets: Vec::new(),
        retry: Vec::new(),
    };
    while let Some(target) = ordering.next(context) {
        let unconditional = if target == context.cluster_queue {
            Some(PreemptionReason::InClusterQueue)
        } else if within_nominal {
            Some(PreemptionReason::InCohortReclamation)
        } else {
            None
        };
        if let Some(reason) = unconditional {
            let Some(candidate) = ordering.pop(target) else {
                continue;
            };
            context.remove(&candidate);
            result.targets.push((candidate, reason));
            if context.fits_for_fair_sharing() {
                result.fits = true;
                result.retry.clear();
                return result;
            }
            continue;
        }
        let (preemptor_new, target_old) = context.shares(&ordering, target);
        if unsatisfiable(&preemptor_new, &target_old) {
            while let Some(candidate) = ordering.pop(target) {
                result.retry.push(candidate);
            }
            continue;
        }
        while let Some(candidate) = ordering.pop(target) {
            let target_new = context.target_share_after_removal(&ordering, target, &candidate);
            if strategy.passes(
                &preemptor_new,
                &target_old,
                &target_new,
                config.prevent_flapping,
            ) {
                context.remove(&candidate);
                result
                    .targets
                    .push((candidate, PreemptionReason::InCohortFairSharing));
                if context.fits_for_fair_sharing() {
                    result.fits = true;
                    result.retry.clear();
                    return result;
                }
                break;
            }
            result.retry.push(candidate);
        }
    }
    result
}

/// Rule S2-b over what the first strategy refused, at most one Workload per ClusterQueue
/// (`runSecondFsStrategy`).
fn run_second_strategy<'a>(
    context: &mut Context<'a, '_>,
    retry: &[Candidate<'a>],
    targets: &mut Targets<'a>,
) -> bool {
    let mut ordering = TargetOrdering::new(&context.tree, context.cluster_queue, retry);
    while let Some(target) = ordering.next(context) {
        let (preemptor_new, target_old) = context.shares(&ordering, target);
        let passed = FairSharingStrategy::LessThanInitialShare.passes(
            &preemptor_new,
            &target_old,
            &target_old,
            false,
        );
        if let Some(candidate) = ordering.pop(target)
            && passed
        {
            context.remove(&candidate);
            targets.push((candidate, PreemptionReason::InCohortFairSharing));
            if context.fits_for_fair_sharing() {
                return true;
            }
        }
        ordering.drop_queue(target);
    }
    false
}

/// `fairPreemptions`.
pub(super) fn fair_preemptions<'a>(
    context: &mut Context<'a, '_>,
    config: &FairSharingConfig,
) -> Targets<'a> {
    let mut candidates = context.fair_candidates();
    if candidates.is_empty() {
        return Vec::new();
    }
    candidates.sort_by(|a, b| context.ordering(a, b));
    let (queue, usage) = (context.cluster_queue, context.request.usage);
    context.tree.add_usages(queue, usage);
    let strategies = config.effective_strategies();
    let mut fits = false;
    let mut targets = Vec::new();
    if let Some(&first) = strategies.first() {
        let result = run_first_strategy(context, &candidates, first, config);
        fits = result.fits;
        targets = result.targets;
        if !fits && strategies.len() > 1 {
            fits = run_second_strategy(context, &result.retry, &mut targets);
        }
    }
    context.tree.remove_usages(queue, usage);
    if !fits {
        restore(context, &targets);
        return Vec::new();
    }
    let targets = fill_back(context, targets, true);
    restore(context, &targets);
    targets
}
