//! Classic preemption (`classicalPreemptions` in `preemption.go` and `classical/`): candidates
//! from the preemptor's ClusterQueue and, walking up its Cohorts, from ClusterQueues above
//! their quota, each classified as within the ClusterQueue, hierarchical reclaim (the
//! preemptor's subtree holds the quota), reclaim only without borrowing, or reclaim while
//! borrowing (`borrowWithinCohort` with `maxPriorityThreshold`); then one or two attempts,
//! with and without borrowing, removing candidates greedily until the request fits and
//! adding back what is not needed.
//!
//! Knows nothing about fair sharing (see `fair`).

use crate::cluster_queue::{ClusterQueuePreemption, PreemptionPolicy};
use crate::tree::NodeId;

use super::{
    Candidate, Context, PreemptionReason, Targets, fill_back, satisfies_preemption_policy,
};

/// How a candidate may be preempted (`preemptionVariant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    WithinClusterQueue,
    HierarchicalReclaim,
    ReclaimWithoutBorrowing,
    ReclaimWhileBorrowing,
}

impl Variant {
    fn reason(self) -> PreemptionReason {
        match self {
            Variant::WithinClusterQueue => PreemptionReason::InClusterQueue,
            Variant::HierarchicalReclaim | Variant::ReclaimWithoutBorrowing => {
                PreemptionReason::InCohortReclamation
            }
            Variant::ReclaimWhileBorrowing => PreemptionReason::InCohortReclaimWhileBorrowing,
        }
    }
}

/// A candidate with the Cohort under which it was found (`candidateElem`).
#[derive(Debug, Clone, Copy)]
struct Element<'a> {
    candidate: Candidate<'a>,
    lowest_common_ancestor: Option<NodeId>,
    variant: Variant,
}

/// Whether the policy forbids borrowing while reclaiming, and the priority threshold
/// (`IsBorrowingWithinCohortForbidden`).
fn borrowing_within_cohort(policy: &ClusterQueuePreemption) -> (bool, Option<i32>) {
    match policy.borrow_within_cohort {
        Some(borrow) if borrow.policy != PreemptionPolicy::Never => {
            (false, borrow.max_priority_threshold)
        }
        _ => (true, None),
    }
}

/// `isAboveBorrowingThreshold`.
fn is_above_borrowing_threshold(candidate: i64, incoming: i64, threshold: Option<i32>) -> bool {
    candidate >= incoming || threshold.is_some_and(|t| candidate > i64::from(t))
}

/// The candidates in their order, with what the order was built from
/// (`candidateIterator`).
struct Candidates<'a> {
    elements: Vec<Element<'a>>,
    none_from_other_queues: bool,
    none_for_hierarchical_reclaim: bool,
}

impl<'a> Context<'a, '_> {
    /// `classifyPreemptionVariant`; `None` for `Never`.
    fn classify(&self, candidate: &Candidate<'_>, hierarchical_advantage: bool) -> Option<Variant> {
        let request = self.request;
        if !candidate.workload.uses_resources(request.needs_preemption) {
            return None;
        }
        let same_queue = candidate.cluster_queue == self.cluster_queue;
        let policy = if same_queue {
            request.policy.within_cluster_queue
        } else {
            request.policy.reclaim_within_cohort
        };
        if !satisfies_preemption_policy(request.preemptor, candidate.workload, policy) {
            return None;
        }
        if same_queue {
            return Some(Variant::WithinClusterQueue);
        }
        if hierarchical_advantage {
            return Some(Variant::HierarchicalReclaim);
        }
        let (forbidden, threshold) = borrowing_within_cohort(request.policy);
        if forbidden
            || is_above_borrowing_threshold(
                candidate.workload.priority,
                request.preemptor.priority,
                threshold,
            )
        {
            return Some(Variant::ReclaimWithoutBorrowing);
        }
        Some(Variant::ReclaimWhileBorrowing)
    }

    /// `getCandidatesFromCQ`.
    fn candidates_from(
        &self,
        cluster_queue: NodeId,
        lowest_common_ancestor: Option<NodeId>,
        hierarchical_advantage: bool,
        into: &mut Vec<Element<'a>>,
    ) {
        for candidate in self.workloads_of(cluster_queue) {
            if let Some(variant) = self.classify(&candidate, hierarchical_advantage) {
                into.push(Element {
                    candidate,
                    lowest_common_ancestor,
                    variant,
                });
            }
        }
    }

    fn is_within_nominal(&self, id: NodeId) -> bool {
        self.tree
            .is_within_nominal_in_resources(id, self.request.needs_preemption)
    }

    /// The candidates under `subtree_root` outside the `skip` subtree, looking only into
    /// nodes above their quota (`collectCandidatesInSubtree`).
    fn collect_in_subtree(
        &self,
        subtree_root: NodeId,
        skip: Option<NodeId>,
        hierarchical_advantage: bool,
        into: &mut Vec<Element<'a>>,
    ) {
        let mut stack = vec![subtree_root];
        while let Some(cohort) = stack.pop() {
            for &child in self.tree.child_cohorts(cohort) {
                if Some(child) != skip && !self.is_within_nominal(child) {
                    stack.push(child);
                }
            }
            for &child in self.tree.child_cluster_queues(cohort) {
                if child != self.cluster_queue && !self.is_within_nominal(child) {
                    self.candidates_from(child, Some(subtree_root), hierarchical_advantage, into);
                }
            }
        }
    }

    /// Candidates from other ClusterQueues, split into those the preemptor has a hierarchical
    /// advantage over and those decided by priority (`collectCandidatesForHierarchicalReclaim`).
    fn hierarchical_candidates(&self) -> (Vec<Element<'a>>, Vec<Element<'a>>) {
        let (mut hierarchy, mut priority) = (Vec::new(), Vec::new());
        if self.tree.parent(self.cluster_queue).is_none()
            || self.request.policy.reclaim_within_cohort == PreemptionPolicy::Never
        {
            return (hierarchy, priority);
        }
        let (mut advantage, mut remaining) = self
            .tree
            .quantities_fit_in_quota(self.cluster_queue, self.request.usage);
        let mut previous = None;
        let ancestors: Vec<NodeId> = self.tree.ancestors(self.cluster_queue).collect();
        for subtree_root in ancestors {
            let into = if advantage {
                &mut hierarchy
            } else {
                &mut priority
            };
            self.collect_in_subtree(subtree_root, previous, advantage, into);
            let (fits, rest) = self.tree.quantities_fit_in_quota(subtree_root, &remaining);
            remaining = rest;
            advantage = advantage || fits;
            previous = Some(subtree_root);
        }
        (hierarchy, priority)
    }

    /// `NewCandidateIterator`: each kind sorted, evicted ones of every kind first.
    fn classical_candidates(&self) -> Candidates<'a> {
        let mut same_queue = Vec::new();
        if self.request.policy.within_cluster_queue != PreemptionPolicy::Never {
            self.candidates_from(self.cluster_queue, None, false, &mut same_queue);
        }
        let (mut hierarchy, mut priority) = self.hierarchical_candidates();
        for list in [&mut same_queue, &mut priority, &mut hierarchy] {
            list.sort_by(|a, b| self.ordering(&a.candidate, &b.candidate));
        }
        let none_from_other_queues = hierarchy.is_empty() && priority.is_empty();
        let none_for_hierarchical_reclaim = hierarchy.is_empty();
        let lists = [hierarchy, priority, same_queue];
        let evicted = |e: &Element<'_>| e.candidate.workload.evicted;
        let elements = lists
            .iter()
            .flat_map(|list| list.iter().filter(|e| evicted(e)))
            .chain(
                lists
                    .iter()
                    .flat_map(|list| list.iter().filter(|e| !evicted(e))),
            )
            .copied()
            .collect();
        Candidates {
            elements,
            none_from_other_queues,
            none_for_hierarchical_reclaim,
        }
    }

    /// Whether the candidate may still be preempted in this attempt, given what is already
    /// removed (`candidateIsValid`).
    fn is_valid(&self, element: &Element<'_>, borrow: bool) -> bool {
        let cluster_queue = element.candidate.cluster_queue;
        if cluster_queue == self.cluster_queue {
            return true;
        }
        if borrow && element.variant == Variant::ReclaimWithoutBorrowing {
            return false;
        }
        if self.is_within_nominal(cluster_queue) {
            return false;
        }
        for node in self.tree.ancestors(cluster_queue) {
            if Some(node) == element.lowest_common_ancestor {
                break;
            }
            if self.is_within_nominal(node) {
                return false;
            }
        }
        true
    }

    /// Whether the preemptor's usage is strictly below nominal on every resource needing
    /// preemption (`queueUnderNominalInResourcesNeedingPreemption`).
    fn under_nominal(&self) -> bool {
        self.request.needs_preemption.iter().all(|key| {
            self.tree.quota(self.cluster_queue, key).nominal
                > self.tree.usage(self.cluster_queue).get(key)
        })
    }
}

/// `classicalPreemptions`.
pub(super) fn classical_preemptions<'a>(context: &mut Context<'a, '_>) -> Targets<'a> {
    let candidates = context.classical_candidates();
    let (forbidden, _) = borrowing_within_cohort(context.request.policy);
    let attempts: &[bool] =
        if candidates.none_from_other_queues || (forbidden && !context.under_nominal()) {
            &[true]
        } else if forbidden && candidates.none_for_hierarchical_reclaim {
            &[false, true]
        } else {
            &[true, false]
        };
    for &borrow in attempts {
        let mut targets: Targets<'a> = Vec::new();
        for element in &candidates.elements {
            if !context.is_valid(element, borrow) {
                continue;
            }
            context.remove(&element.candidate);
            targets.push((element.candidate, element.variant.reason()));
            if context.workload_fits(borrow) {
                let targets = fill_back(context, targets, borrow);
                restore(context, &targets);
                return targets;
            }
        }
        restore(context, &targets);
    }
    Vec::new()
}

/// Adds the targets' usage back (`restoreSnapshot`).
pub(super) fn restore(context: &mut Context<'_, '_>, targets: &Targets<'_>) {
    for (candidate, _) in targets {
        context.add(candidate);
    }
}
