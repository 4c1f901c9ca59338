//! The ClusterQueue fields flavor assignment reads besides quotas (Kueue's
//! `clusterqueue_types.go`): resource groups (covered resources and flavors in order),
//! `flavorFungibility` with Kueue's defaults, and the `preemption` policy.
//!
//! Knows nothing about quota amounts (those live in the `tree`) or about how the fields are
//! used.

use std::collections::BTreeSet;

/// One `resourceGroups[]` entry: the resources it covers and its flavors in the order the
/// ClusterQueue lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceGroup {
    /// `coveredResources`.
    pub covered_resources: BTreeSet<String>,
    /// `flavors[].name`, in order.
    pub flavors: Vec<String>,
}

/// `whenCanBorrow` / `whenCanPreempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FungibilityPolicy {
    /// Take the flavor when it can be admitted this way.
    MayStopSearch,
    /// Look at the next flavor first.
    TryNextFlavor,
}

/// `flavorFungibility.preference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FungibilityPreference {
    /// Rank by preemption mode, then borrowing level (the default).
    BorrowingOverPreemption,
    /// Rank by borrowing level, then preemption mode.
    PreemptionOverBorrowing,
}

/// `spec.flavorFungibility`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlavorFungibility {
    /// `whenCanBorrow`, default `MayStopSearch`.
    pub when_can_borrow: FungibilityPolicy,
    /// `whenCanPreempt`, default `TryNextFlavor`.
    pub when_can_preempt: FungibilityPolicy,
    /// `preference`, if set.
    pub preference: Option<FungibilityPreference>,
}

impl Default for FlavorFungibility {
    fn default() -> FlavorFungibility {
        FlavorFungibility {
            when_can_borrow: FungibilityPolicy::MayStopSearch,
            when_can_preempt: FungibilityPolicy::TryNextFlavor,
            preference: None,
        }
    }
}

/// `withinClusterQueue` / `reclaimWithinCohort` / `borrowWithinCohort.policy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PreemptionPolicy {
    /// Never preempt (the default).
    #[default]
    Never,
    /// Only lower priority workloads.
    LowerPriority,
    /// Lower priority, or equal priority and newer.
    LowerOrNewerEqualPriority,
    /// Any workload (reclaim only).
    Any,
}

/// `preemption.borrowWithinCohort`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BorrowWithinCohort {
    /// `policy`.
    pub policy: PreemptionPolicy,
    /// `maxPriorityThreshold`.
    pub max_priority_threshold: Option<i32>,
}

/// `spec.preemption`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterQueuePreemption {
    /// `withinClusterQueue`.
    pub within_cluster_queue: PreemptionPolicy,
    /// `reclaimWithinCohort`.
    pub reclaim_within_cohort: PreemptionPolicy,
    /// `borrowWithinCohort`, if set.
    pub borrow_within_cohort: Option<BorrowWithinCohort>,
}

/// What flavor assignment reads of a ClusterQueue besides its quotas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterQueuePolicy {
    /// `spec.resourceGroups`, in order.
    pub resource_groups: Vec<ResourceGroup>,
    /// `spec.flavorFungibility`.
    pub flavor_fungibility: FlavorFungibility,
    /// `spec.preemption`.
    pub preemption: ClusterQueuePreemption,
}

impl ClusterQueuePolicy {
    /// The resource group covering `resource` (`RGByResource`).
    pub fn group_for(&self, resource: &str) -> Option<&ResourceGroup> {
        self.resource_groups
            .iter()
            .find(|group| group.covered_resources.contains(resource))
    }
}
