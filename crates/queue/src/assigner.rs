//! Flavor assignment as Kueue's `pkg/scheduler/flavorassigner` does it (`flavorassigner.go`,
//! `podset_reducer.go`, and the partial-admission search of `getInitialAssignments` in
//! `pkg/scheduler/scheduler.go`): for each PodSet (or PodSet group) and each resource group
//! it needs, walk the group's flavors in ClusterQueue order, starting after the flavor the
//! last attempt stopped at; skip flavors whose taints or node labels the PodSet cannot use;
//! rate each remaining flavor by the worst of its resources' modes (Fit, with the borrowing
//! level; Preempt or Reclaim when preemption could make room; no candidates; NoFit) and stop
//! or go on as `flavorFungibility` says, keeping the preferred flavor. The result carries
//! per-resource flavors and modes, Kueue's messages, the quota usage and the borrowing level.
//! Partial admission searches the PodSet counts between `count` and `minCount` for the
//! largest that fits.
//!
//! Preemption is not decided here: where Kueue asks its preemption oracle
//! (`oracle.SimulatePreemption`) this module asks a [`PreemptionOracle`]; the admission cycle
//! passes one backed by the `preemption` module (`preemption::Oracle`). Topology-Aware Scheduling,
//! admission checks, workload slices, concurrent admission and the attempt log
//! (`FlavorAssignmentAttempts`, observability only) are not modelled.

use std::collections::BTreeMap;

use crate::amount::{Amount, CPU};
use crate::cluster_queue::{
    ClusterQueuePolicy, FlavorFungibility, FungibilityPolicy, FungibilityPreference,
    PreemptionPolicy,
};
use crate::flavor::{self, ResourceFlavorSpec};
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tas::flavors::TasFlavors;
use crate::tree::{NodeId, ResourceQuota, Tree};
use crate::workload::{AssignmentState, PODS, PodSetResources, Requests, WorkloadInfo};

/// How a flavor can be assigned, from worst to best (`FlavorAssignmentMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FlavorAssignmentMode {
    /// Not enough quota, even with preemption.
    NoFit,
    /// Preemption is needed (and may be impossible).
    Preempt,
    /// Fits, but must wait (e.g. for preemptions to finish).
    DeferredFit,
    /// Fits in unused quota, possibly borrowing.
    Fit,
}

/// What preemption could do for a flavor, as the oracle answers (`PreemptionPossibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptionPossibility {
    /// Preemption would be needed but finds no targets.
    NoCandidates,
    /// Preempting within the ClusterQueue.
    Preempt,
    /// Reclaiming quota lent to the cohort.
    Reclaim,
}

/// Decides what preemption could achieve for `quantity` of `key` in the ClusterQueue, and the
/// borrowing level after it (`preemptionOracle.SimulatePreemption`).
pub trait PreemptionOracle {
    /// The possibility and the borrowing level after preempting.
    fn simulate_preemption(
        &self,
        tree: &Tree,
        cluster_queue: NodeId,
        workload: &WorkloadInfo,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize);
}

/// The assigner's finer mode (`preemptionMode`), worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PreemptionMode {
    NoFit,
    NoPreemptionCandidates,
    Preempt,
    Reclaim,
    Fit,
}

impl PreemptionMode {
    fn from_possibility(possibility: PreemptionPossibility) -> PreemptionMode {
        match possibility {
            PreemptionPossibility::NoCandidates => PreemptionMode::NoPreemptionCandidates,
            PreemptionPossibility::Preempt => PreemptionMode::Preempt,
            PreemptionPossibility::Reclaim => PreemptionMode::Reclaim,
        }
    }

    fn assignment_mode(self) -> FlavorAssignmentMode {
        match self {
            PreemptionMode::NoFit => FlavorAssignmentMode::NoFit,
            PreemptionMode::Fit => FlavorAssignmentMode::Fit,
            _ => FlavorAssignmentMode::Preempt,
        }
    }
}

/// A preemption mode with the borrowing level (`granularMode`): the height of the lowest
/// cohort subtree that holds the usage, 0 without borrowing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GranularMode {
    pub(crate) preemption: PreemptionMode,
    pub(crate) borrowing: usize,
}

impl GranularMode {
    const WORST: GranularMode = GranularMode {
        preemption: PreemptionMode::NoFit,
        borrowing: usize::MAX,
    };
    const BEST: GranularMode = GranularMode {
        preemption: PreemptionMode::Fit,
        borrowing: 0,
    };

    fn found_targets(self) -> bool {
        matches!(
            self.preemption,
            PreemptionMode::Preempt | PreemptionMode::Reclaim
        )
    }
}

/// Whether mode `a` is better than `b` under the fungibility preference (`isPreferred`).
pub(crate) fn is_preferred(
    a: GranularMode,
    b: GranularMode,
    fungibility: &FlavorFungibility,
) -> bool {
    if a.preemption == PreemptionMode::NoFit {
        return false;
    }
    if b.preemption == PreemptionMode::NoFit {
        return true;
    }
    let a_none = a.preemption == PreemptionMode::NoPreemptionCandidates;
    let b_none = b.preemption == PreemptionMode::NoPreemptionCandidates;
    if a_none != b_none {
        return !a_none;
    }
    match fungibility.preference {
        Some(FungibilityPreference::PreemptionOverBorrowing) => {
            if a.borrowing != b.borrowing {
                a.borrowing < b.borrowing
            } else {
                a.preemption > b.preemption
            }
        }
        _ => {
            if a.preemption != b.preemption {
                a.preemption > b.preemption
            } else {
                a.borrowing < b.borrowing
            }
        }
    }
}

fn should_try_next_flavor(mode: GranularMode, fungibility: &FlavorFungibility) -> bool {
    matches!(
        mode.preemption,
        PreemptionMode::NoFit | PreemptionMode::NoPreemptionCandidates
    ) || (mode.found_targets() && fungibility.when_can_preempt == FungibilityPolicy::TryNextFlavor)
        || (mode.borrowing != 0 && fungibility.when_can_borrow == FungibilityPolicy::TryNextFlavor)
}

/// Why a PodSet could not get flavors right away (`Status`): reasons, reported sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The reasons, in the order found.
    pub reasons: Vec<String>,
}

impl Status {
    fn with(reason: String) -> Status {
        Status {
            reasons: vec![reason],
        }
    }

    /// No reasons: the flavors fit.
    pub fn is_fit(&self) -> bool {
        self.reasons.is_empty()
    }

    /// The reasons sorted and joined with ", " (`Status.Message`).
    pub fn message(&self) -> String {
        let mut reasons = self.reasons.clone();
        reasons.sort();
        reasons.join(", ")
    }
}

/// The flavor given to one resource of a PodSet (`FlavorAssignment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlavorAssignment {
    /// The flavor.
    pub name: String,
    /// How it can be assigned.
    pub mode: FlavorAssignmentMode,
    /// The index the flavor search stopped at, -1 when it went through the list.
    pub tried_flavor_idx: i32,
    /// The borrowing level.
    pub borrow: usize,
}

/// One PodSet's flavors and status (`PodSetAssignment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSetAssignment {
    /// The PodSet's name.
    pub name: String,
    /// Per resource; empty when none could be assigned.
    pub flavors: BTreeMap<String, FlavorAssignment>,
    /// Why not (all) Fit.
    pub status: Status,
    /// The PodSet's total requests at this count (with `pods` when covered).
    pub requests: Requests,
    /// The pod count assigned.
    pub count: i32,
    /// Where Topology-Aware Scheduling placed its pods (`TopologyAssignment`).
    pub topology: Option<TopologyPlacement>,
    /// The TAS flavor whose topology could not hold it even with every TAS Workload gone
    /// (the NoFit reason is then `TopologyPlacementFailed`).
    pub topology_failed_in: Option<String>,
}

/// A PodSet's placement in its TAS flavor's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyPlacement {
    /// The TAS flavor.
    pub flavor: String,
    /// The domains and pod counts.
    pub assignment: crate::tas::TopologyAssignment,
}

impl PodSetAssignment {
    /// The worst mode among the flavors; NoFit without flavors (`RepresentativeMode`).
    pub fn representative_mode(&self) -> FlavorAssignmentMode {
        if self.status.is_fit() {
            return FlavorAssignmentMode::Fit;
        }
        self.flavors
            .values()
            .map(|flavor| flavor.mode)
            .min()
            .unwrap_or(FlavorAssignmentMode::NoFit)
    }
}

/// The flavors of every PodSet, the quota they take and the borrowing level (`Assignment`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Per PodSet, in the Workload's order (stops at the first PodSet that got no flavors).
    pub pod_sets: Vec<PodSetAssignment>,
    /// The highest borrowing level of any assigned flavor.
    pub borrowing: usize,
    /// Where each flavor search stopped, to resume from next time.
    pub last_state: AssignmentState,
    /// The quota taken per (flavor, resource).
    pub usage: FlavorResourceQuantities,
    /// The mode the TAS step set last (`representativeMode` as `updateMode` caches it).
    pub mode_override: Option<FlavorAssignmentMode>,
}

impl Assignment {
    /// The worst PodSet mode; NoFit without PodSets (`RepresentativeMode`), or the mode the
    /// TAS step set last.
    pub fn representative_mode(&self) -> FlavorAssignmentMode {
        if self.pod_sets.is_empty() {
            return FlavorAssignmentMode::NoFit;
        }
        if let Some(mode) = self.mode_override {
            return mode;
        }
        self.pod_sets
            .iter()
            .map(PodSetAssignment::representative_mode)
            .min()
            .unwrap_or(FlavorAssignmentMode::NoFit)
    }

    /// Whether the assignment borrows at any level (`RequiresBorrowing`).
    pub fn requires_borrowing(&self) -> bool {
        self.borrowing > 0
    }

    /// The PodSets' reasons (`Message`): "couldn't assign flavors to pod set NAME: REASONS",
    /// joined with "; ".
    pub fn message(&self) -> String {
        self.pod_sets
            .iter()
            .filter(|ps| !ps.status.is_fit())
            .map(|ps| {
                format!(
                    "couldn't assign flavors to pod set {}: {}",
                    ps.name,
                    ps.status.message()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Adds a reason to the named PodSet's status (`PodSetAssignment.reason`).
    pub fn add_reason(&mut self, pod_set: &str, reason: String) {
        if let Some(ps) = self.pod_sets.iter_mut().find(|ps| ps.name == pod_set) {
            ps.status.reasons.push(reason);
        }
    }

    /// Sets the mode of every flavor of the named PodSet and caches it as the representative
    /// mode (`Assignment.updateMode`).
    pub fn update_mode(&mut self, pod_set: &str, mode: FlavorAssignmentMode) {
        if let Some(ps) = self.pod_sets.iter_mut().find(|ps| ps.name == pod_set) {
            for flavor in ps.flavors.values_mut() {
                flavor.mode = mode;
            }
            self.mode_override = Some(mode);
        }
    }

    /// A PodSet whose TAS request could not be built (`psError`): it does not fit, its
    /// error is its reason, and the cached mode is dropped.
    pub fn pod_set_error(&mut self, pod_set: &str, message: String) {
        if let Some(ps) = self.pod_sets.iter_mut().find(|ps| ps.name == pod_set) {
            ps.status.reasons.push(message);
            ps.flavors.clear();
        }
        self.mode_override = None;
    }

    fn append(&mut self, requests: &Requests, pod_set: PodSetAssignment) {
        let mut tried = BTreeMap::new();
        for (resource, flavor) in &pod_set.flavors {
            self.borrowing = self.borrowing.max(flavor.borrow);
            let key = FlavorResource::new(flavor.name.clone(), resource.clone());
            let amount = requests.get(resource).copied().unwrap_or_default();
            let sum = self.usage.get(&key).add_i64(amount);
            self.usage.set(key, sum);
            tried.insert(resource.clone(), flavor.tried_flavor_idx);
        }
        self.last_state.last_tried_flavor_idx.push(tried);
        self.pod_sets.push(pod_set);
    }
}

/// Formats canonical values as Kueue's `ResourceFormatter` does: milli-CPU, binary bytes
/// for memory, ephemeral storage and huge pages, decimal units otherwise.
pub fn format_value(resource: &str, value: i64) -> String {
    use tessera_model::quantity::{Format, Quantity};
    let quantity = if resource == CPU {
        Quantity::from_milli(value)
    } else if matches!(resource, "memory" | "ephemeral-storage")
        || resource.starts_with("hugepages-")
    {
        Quantity::from_units(value, Format::BinarySi)
    } else {
        Quantity::from_units(value, Format::DecimalSi)
    };
    quantity.to_canonical()
}

/// [`format_value`] for an amount; Unlimited reads `<unlimited>`.
pub fn format_amount(resource: &str, amount: Amount) -> String {
    if amount.is_unlimited() {
        amount.to_string()
    } else {
        format_value(resource, amount.int64())
    }
}

/// Everything one flavor assignment reads (`FlavorAssigner`).
pub struct FlavorAssigner<'a> {
    /// The Workload.
    pub workload: &'a WorkloadInfo,
    /// The quota tree, with current usage.
    pub tree: &'a Tree,
    /// The Workload's ClusterQueue in `tree`.
    pub cluster_queue: NodeId,
    /// The ClusterQueue's resource groups, fungibility and preemption policy.
    pub policy: &'a ClusterQueuePolicy,
    /// The ResourceFlavors by name.
    pub flavors: &'a BTreeMap<String, ResourceFlavorSpec>,
    /// Whether fair sharing is on (it widens when preemption while borrowing is possible).
    pub fair_sharing: bool,
    /// Decides what preemption could do.
    pub oracle: &'a dyn PreemptionOracle,
    /// The TAS flavors (`TasFlavors::NONE` for none).
    pub tas: &'a TasFlavors,
}

impl FlavorAssigner<'_> {
    /// Assigns flavors to every PodSet at its full count (`counts` = `None`) or at the given
    /// counts, one per PodSet (`Assign`).
    pub fn assign(&self, counts: Option<&[i32]>) -> Assignment {
        let covers_pods = self.policy.group_for(PODS).is_some();
        let requests: Vec<PodSetResources> = self
            .workload
            .total_requests
            .iter()
            .enumerate()
            .map(|(i, ps)| {
                let mut ps = match counts.and_then(|counts| counts.get(i)) {
                    Some(count) => ps.scaled_to(*count),
                    None => ps.clone(),
                };
                if covers_pods {
                    ps.requests.insert(PODS.to_owned(), i64::from(ps.count));
                }
                ps
            })
            .collect();
        let mut assignment = Assignment::default();
        for group in self.pod_set_groups() {
            let mut group_requests = Requests::new();
            for &i in &group {
                for (resource, value) in &requests[i].requests {
                    let total = group_requests.entry(resource.clone()).or_default();
                    *total = total.saturating_add(*value);
                }
            }
            let mut group_flavors: BTreeMap<String, FlavorAssignment> = BTreeMap::new();
            let mut group_status = Status::default();
            for (resource, quantity) in &group_requests {
                if self.policy.group_for(resource).is_none() && *quantity == 0 {
                    continue;
                }
                if group_flavors.contains_key(resource) {
                    continue;
                }
                let (flavors, status) = self.find_flavor_for_pod_sets(
                    &group,
                    &group_requests,
                    resource,
                    &assignment.usage,
                );
                if flavors.is_empty() {
                    group_flavors.clear();
                    group_status = status;
                    break;
                }
                group_flavors.extend(flavors);
                group_status.reasons.extend(status.reasons);
            }
            let mut failed = false;
            for &i in &group {
                let ps = &requests[i];
                let flavors: BTreeMap<String, FlavorAssignment> = group_flavors
                    .iter()
                    .filter(|(resource, _)| ps.requests.contains_key(*resource))
                    .map(|(resource, flavor)| (resource.clone(), flavor.clone()))
                    .collect();
                failed |= !ps.requests.is_empty() && flavors.is_empty();
                let pod_set = PodSetAssignment {
                    name: ps.name.clone(),
                    flavors,
                    status: group_status.clone(),
                    requests: ps.requests.clone(),
                    count: ps.count,
                    topology: None,
                    topology_failed_in: None,
                };
                assignment.append(&ps.requests, pod_set);
            }
            if failed {
                return assignment;
            }
        }
        let tas_only = self.tas.tas_only(&self.policy.resource_groups);
        let pod_sets = &self.workload.workload.pod_sets;
        crate::tas::flavors::place(&mut assignment, pod_sets, tas_only, self.tas);
        assignment
    }

    /// PodSet indices grouped by `podSetGroupName` in order of first appearance; a PodSet
    /// without one is its own group.
    fn pod_set_groups(&self) -> Vec<Vec<usize>> {
        let mut groups: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
        for (i, ps) in self.workload.workload.pod_sets.iter().enumerate() {
            let key = ps.group.as_deref();
            match groups
                .iter_mut()
                .find(|(name, _)| key.is_some() && *name == key)
            {
                Some((_, members)) => members.push(i),
                None => groups.push((key, vec![i])),
            }
        }
        groups.into_iter().map(|(_, members)| members).collect()
    }

    /// The flavor of `resource`'s group for the PodSets, with every resource of that group
    /// (`findFlavorForPodSets`). Empty flavors with the reasons when none can be assigned.
    fn find_flavor_for_pod_sets(
        &self,
        pod_sets: &[usize],
        requests: &Requests,
        resource: &str,
        assigned: &FlavorResourceQuantities,
    ) -> (BTreeMap<String, FlavorAssignment>, Status) {
        let Some(group) = self.policy.group_for(resource) else {
            return (
                BTreeMap::new(),
                Status::with(format!("resource {resource} unavailable in ClusterQueue")),
            );
        };
        let fungibility = &self.policy.flavor_fungibility;
        let requests: Vec<(&String, i64)> = requests
            .iter()
            .filter(|(name, _)| group.covered_resources.contains(*name))
            .map(|(name, value)| (name, *value))
            .collect();
        let mut status = Status::default();
        let mut best = BTreeMap::new();
        let mut best_mode = GranularMode::WORST;
        let mut attempted: Option<usize> = None;
        let start = AssignmentState::next_flavor_to_try(
            self.workload.last_assignment.as_ref(),
            pod_sets[0],
            resource,
        );
        for (idx, flavor) in group.flavors.iter().enumerate().skip(start) {
            attempted = Some(idx);
            if let Err(reason) = self.check_flavor(flavor, pod_sets) {
                status.reasons.push(reason);
                continue;
            }
            let mut assignments = BTreeMap::new();
            let mut mode = GranularMode::BEST;
            for (name, value) in &requests {
                let key = FlavorResource::new(flavor.clone(), (*name).clone());
                let quota = self.tree.quota(self.cluster_queue, &key);
                let (preemption, borrow, reasons) =
                    self.fits_resource_quota(&key, assigned.get(&key), *value, &quota);
                status.reasons.extend(reasons);
                let resource_mode = GranularMode {
                    preemption,
                    borrowing: borrow,
                };
                if is_preferred(mode, resource_mode, fungibility) {
                    mode = resource_mode;
                }
                if mode.preemption == PreemptionMode::NoFit {
                    continue;
                }
                assignments.insert(
                    (*name).clone(),
                    FlavorAssignment {
                        name: flavor.clone(),
                        mode: preemption.assignment_mode(),
                        tried_flavor_idx: 0,
                        borrow,
                    },
                );
            }
            if !should_try_next_flavor(mode, fungibility) {
                best = assignments;
                best_mode = mode;
                break;
            }
            if is_preferred(mode, best_mode, fungibility) {
                best = assignments;
                best_mode = mode;
            }
        }
        let tried = match attempted {
            Some(idx) if idx + 1 < group.flavors.len() => i32::try_from(idx).unwrap_or(-1),
            _ => -1,
        };
        for flavor in best.values_mut() {
            flavor.tried_flavor_idx = tried;
        }
        if best_mode.preemption == PreemptionMode::Fit {
            return (best, Status::default());
        }
        (best, status)
    }

    /// Whether every PodSet may use the flavor (`checkFlavorForPodSets`).
    fn check_flavor(&self, name: &str, pod_sets: &[usize]) -> Result<(), String> {
        let Some(flavor) = self.flavors.get(name) else {
            return Err(flavor::FlavorMismatch::NotFound(name.to_owned()).to_string());
        };
        let tas_only = self.tas.tas_only(&self.policy.resource_groups);
        for &i in pod_sets {
            if let Some(pod_set) = self.workload.workload.pod_sets.get(i) {
                flavor::check(flavor, pod_set).map_err(|m| m.to_string())?;
                let request = crate::tas::flavors::pod_set_request(pod_set, pod_set.count);
                let mismatch = crate::tas::flavor_mismatch(
                    &request,
                    tas_only,
                    name,
                    self.tas.topologies.get(name).map(String::as_str),
                    self.tas.snapshots.get(name),
                    true,
                );
                if let Some(reason) = mismatch {
                    return Err(reason);
                }
            }
        }
        Ok(())
    }

    /// How `request` on top of what earlier PodSets took of `key` fits the ClusterQueue
    /// (`fitsResourceQuota`): the mode, the borrowing level and the reasons when not Fit.
    fn fits_resource_quota(
        &self,
        key: &FlavorResource,
        assumed: Amount,
        request: i64,
        quota: &ResourceQuota,
    ) -> (PreemptionMode, usize, Vec<String>) {
        let cq = self.cluster_queue;
        let available = self.tree.available_clamped(cq, key);
        let max_capacity = self.tree.potential_available(cq, key);
        let value = assumed.add_i64(request);
        let resource = key.resource.as_str();
        if value > max_capacity {
            let reason = format!(
                "insufficient quota for {resource} in flavor {}, previously considered podsets requests ({}) + current podset request ({}) > maximum capacity ({})",
                key.flavor,
                format_amount(resource, assumed),
                format_value(resource, request),
                format_amount(resource, max_capacity),
            );
            return (PreemptionMode::NoFit, 0, vec![reason]);
        }
        let (borrow, may_reclaim_in_hierarchy) = self.tree.lowest_subtree_that_fits(cq, key, value);
        if value <= available {
            return (PreemptionMode::Fit, borrow, Vec::new());
        }
        let reason = format!(
            "insufficient unused quota for {resource} in flavor {}, {} more needed",
            key.flavor,
            format_amount(resource, value - available),
        );
        if quota.nominal >= value || may_reclaim_in_hierarchy || self.can_preempt_while_borrowing()
        {
            let (possibility, borrow_after) =
                self.oracle
                    .simulate_preemption(self.tree, cq, self.workload, key, value);
            return (
                PreemptionMode::from_possibility(possibility),
                borrow_after,
                vec![reason],
            );
        }
        (PreemptionMode::NoFit, borrow, vec![reason])
    }

    fn can_preempt_while_borrowing(&self) -> bool {
        let preemption = &self.policy.preemption;
        preemption
            .borrow_within_cohort
            .is_some_and(|borrow| borrow.policy != PreemptionPolicy::Never)
            || (self.fair_sharing && preemption.reclaim_within_cohort != PreemptionPolicy::Never)
    }

    /// The full assignment, or when it neither fits nor can preempt (per
    /// `has_preemption_targets`, which the preemption port answers), the assignment at the
    /// largest PodSet counts between `count` and `minCount` that does
    /// (`getInitialAssignments`). Returns the full assignment when no smaller one works.
    pub fn assign_with_partial_admission(
        &self,
        has_preemption_targets: &dyn Fn(&Assignment) -> bool,
    ) -> Assignment {
        let admissible = |assignment: &Assignment| match assignment.representative_mode() {
            FlavorAssignmentMode::Fit => true,
            FlavorAssignmentMode::Preempt => has_preemption_targets(assignment),
            _ => false,
        };
        let full = self.assign(None);
        if admissible(&full) || !self.workload.workload.can_be_partially_admitted() {
            return full;
        }
        let reducer = PodSetReducer::new(
            self.workload
                .workload
                .pod_sets
                .iter()
                .map(|ps| (ps.count, ps.min_count)),
        );
        reducer
            .search(|counts| {
                let assignment = self.assign(Some(counts));
                admissible(&assignment).then_some(assignment)
            })
            .unwrap_or(full)
    }
}

/// Walks PodSet counts down from `count` towards `minCount` (`PodSetReducer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSetReducer {
    full_counts: Vec<i32>,
    deltas: Vec<i32>,
    total_delta: i32,
}

impl PodSetReducer {
    /// A reducer for (count, minCount) pairs; a missing minCount is the count.
    pub fn new(pod_sets: impl IntoIterator<Item = (i32, Option<i32>)>) -> PodSetReducer {
        let (full_counts, deltas): (Vec<i32>, Vec<i32>) = pod_sets
            .into_iter()
            .map(|(count, min)| (count, count.saturating_sub(min.unwrap_or(count))))
            .unzip();
        let total_delta = deltas.iter().fold(0i32, |sum, d| sum.saturating_add(*d));
        PodSetReducer {
            full_counts,
            deltas,
            total_delta,
        }
    }

    /// The counts at search index `i` of `total_delta`: each PodSet gives up its share of
    /// `i` (`fillPodSetSizesForSearchIndex`).
    fn counts_at(&self, i: i32) -> Vec<i32> {
        self.full_counts
            .iter()
            .zip(&self.deltas)
            .map(|(full, delta)| {
                let reduced = i64::from(*delta) * i64::from(i) / i64::from(self.total_delta);
                full - i32::try_from(reduced).unwrap_or(*delta)
            })
            .collect()
    }

    /// The largest counts that `fits` accepts, by binary search over the index as Go's
    /// `sort.Search` runs it (`Search`); `None` when nothing smaller than the full size is
    /// possible or nothing fits. The last call to `fits` need not be the accepted one.
    pub fn search<R>(&self, mut fits: impl FnMut(&[i32]) -> Option<R>) -> Option<R> {
        if self.total_delta <= 0 {
            return None;
        }
        let mut last_good: Option<(i32, R)> = None;
        // sort.Search(n, f): the smallest i in [0, n) with f(i), n when none.
        let (mut low, mut high) = (0i32, self.total_delta + 1);
        while low < high {
            let mid = low + (high - low) / 2;
            match fits(&self.counts_at(mid)) {
                Some(result) => {
                    last_good = Some((mid, result));
                    high = mid;
                }
                None => low = mid + 1,
            }
        }
        match last_good {
            Some((idx, result)) if idx == low => Some(result),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "assigner_tests.rs"]
mod tests;
