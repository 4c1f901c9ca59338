//! Kueue's preemption (`pkg/scheduler/preemption`): which admitted Workloads to evict so that a
//! Workload fits, classic (`classicalPreemptions`: candidates within the ClusterQueue, by
//! hierarchical reclaim, reclaim without and while borrowing, one or two attempts, greedy
//! removal, fill-back) or with fair sharing (`fairPreemptions`: target ClusterQueues by dominant
//! resource share, strategies S2-a and S2-b, all or nothing, fill-back); the reasons and the
//! message Kueue writes on the victims; and the [`Oracle`]: the flavor assigner's oracle and
//! the targets of a whole assignment, which the admission cycle (`cycle`) asks.
//!
//! Works on a copy of the quota tree and returns the targets; it never changes the caller's
//! tree. Knows nothing about issuing the evictions (a shell patches the victims with
//! [`preemption_message`]), Topology-Aware Scheduling, Admission Fair Sharing (LocalQueue usage
//! in the ordering) or priority boosts: a Workload's priority is its effective priority.

mod classical;
mod fair;
mod ordering;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use crate::amount::Amount;
use crate::assigner::{Assignment, FlavorAssignmentMode, PreemptionOracle, PreemptionPossibility};
use crate::cluster_queue::ClusterQueuePreemption;
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tree::{NodeId, Tree};
use crate::workload::WorkloadInfo;

pub use ordering::{candidates_ordering, satisfies_preemption_policy};

/// An admitted Workload (quota reserved) as preemption sees it (`workload.Info` in the
/// snapshot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedWorkload {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`, the last tie-break of the candidates' order.
    pub uid: String,
    /// The ClusterQueue it is admitted in.
    pub cluster_queue: String,
    /// `spec.queueName` (read only by per-user limits).
    pub local_queue: String,
    /// Its user, as `QueuedWorkload::user` (read only by per-user limits).
    pub user: Option<String>,
    /// Its effective priority.
    pub priority: i64,
    /// Its queue-order timestamp (creation, or eviction per the requeuing strategy).
    pub queue_timestamp: SystemTime,
    /// When the `QuotaReserved` condition became true; `None` while it is not (reads as now).
    pub quota_reserved_at: Option<SystemTime>,
    /// The quota it holds per (flavor, resource), zero amounts included.
    pub usage: FlavorResourceQuantities,
    /// Whether it already has `Evicted=True` (a preemption under way).
    pub evicted: bool,
}

impl AdmittedWorkload {
    /// `namespace/name` (`workload.Key`).
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether it holds quota of any (flavor, resource) in `keys` (`WorkloadUsesResources`).
    pub fn uses_resources(&self, keys: &BTreeSet<FlavorResource>) -> bool {
        self.usage.keys().any(|key| keys.contains(key))
    }
}

/// The Workload that needs room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreemptingWorkload {
    /// `metadata.uid`.
    pub uid: String,
    /// The `kueue.x-k8s.io/job-uid` label, if any.
    pub job_uid: Option<String>,
    /// Its effective priority.
    pub priority: i64,
    /// Its queue-order timestamp.
    pub queue_timestamp: SystemTime,
    /// Its ClusterQueue.
    pub cluster_queue: String,
}

/// A fair-sharing preemption strategy (`preemptionStrategies[]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FairSharingStrategy {
    /// S2-a: the preemptor's share with the Workload stays ≤ the target's share without the
    /// candidate.
    LessThanOrEqualToFinalShare,
    /// S2-b: the preemptor's share with the Workload is < the target's share before.
    LessThanInitialShare,
}

/// The fair-sharing configuration (`config.FairSharing`), present when fair sharing is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FairSharingConfig {
    /// `preemptionStrategies`; empty means Kueue's default, S2-a then S2-b.
    pub strategies: Vec<FairSharingStrategy>,
    /// The `FairSharingPreemptWithinNominal` feature (beta, on by default): a preemptor
    /// ClusterQueue within nominal quota reclaims without consulting the strategies.
    pub preempt_within_nominal: bool,
    /// Beyond Kueue (off by default): S2-a refuses at equal shares (the preemptor's share
    /// with the Workload must be strictly below the target's after the removal). Kueue's `≤`
    /// lets two ClusterQueues whose dominant shares tie take the same quota from each other on
    /// alternate cycles; with this on, a fair-sharing preemption can never be reversed by the
    /// victim's ClusterQueue through fair sharing on the next cycle.
    pub prevent_flapping: bool,
}

impl Default for FairSharingConfig {
    fn default() -> FairSharingConfig {
        FairSharingConfig {
            strategies: Vec::new(),
            preempt_within_nominal: true,
            prevent_flapping: false,
        }
    }
}

impl FairSharingConfig {
    /// The strategies to run (`parseStrategies`).
    fn effective_strategies(&self) -> Vec<FairSharingStrategy> {
        if self.strategies.is_empty() {
            vec![
                FairSharingStrategy::LessThanOrEqualToFinalShare,
                FairSharingStrategy::LessThanInitialShare,
            ]
        } else {
            self.strategies.clone()
        }
    }
}

/// How preemption runs: classic, or fair sharing when configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreemptionConfig {
    /// The fair-sharing configuration; `None` for classic preemption.
    pub fair_sharing: Option<FairSharingConfig>,
    /// Beyond Kueue (KEP PR #12791's idea; `None`, Kueue's behaviour, by default): a Workload
    /// whose quota was reserved less than this long before `now` is not a candidate for
    /// preemption from another ClusterQueue (InCohortReclamation,
    /// InCohortReclaimWhileBorrowing, InCohortFairSharing). Priority preemption inside its own
    /// ClusterQueue (InClusterQueue) still applies: the minimum runtime protects a tenant from
    /// its neighbours' churn, not from its own higher-priority work.
    pub min_runtime_before_preemption: Option<Duration>,
    /// Beyond Kueue (off, Kueue's behaviour, by default): when a PodSet's required topology
    /// level has no domain with room even after these targets, the cycle preempts the
    /// lower-priority holders of the domain whose clearing costs least (`tas::clearing`).
    /// Read by the cycle; the quota preemption here does not look at it.
    pub topology_aware: bool,
}

/// Why a Workload is preempted (the `Preempted` condition's reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PreemptionReason {
    /// `InClusterQueue`.
    InClusterQueue,
    /// `InCohortReclamation`.
    InCohortReclamation,
    /// `InCohortFairSharing`.
    InCohortFairSharing,
    /// `InCohortReclaimWhileBorrowing`.
    InCohortReclaimWhileBorrowing,
}

impl PreemptionReason {
    /// The condition reason.
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptionReason::InClusterQueue => "InClusterQueue",
            PreemptionReason::InCohortReclamation => "InCohortReclamation",
            PreemptionReason::InCohortFairSharing => "InCohortFairSharing",
            PreemptionReason::InCohortReclaimWhileBorrowing => "InCohortReclaimWhileBorrowing",
        }
    }

    /// The words in the message (`HumanReadablePreemptionReasons`).
    pub fn human_readable(self) -> &'static str {
        match self {
            PreemptionReason::InClusterQueue => "prioritization in the ClusterQueue",
            PreemptionReason::InCohortReclamation => "reclamation within the cohort",
            PreemptionReason::InCohortFairSharing => "Fair Sharing within the cohort",
            PreemptionReason::InCohortReclaimWhileBorrowing => {
                "reclamation within the cohort while borrowing"
            }
        }
    }
}

/// The message of the victim's `Evicted` and `Preempted` conditions (`preemptionMessage`);
/// empty parts and a missing reason read `UNKNOWN`.
pub fn preemption_message(
    preemptor: &PreemptingWorkload,
    reason: Option<PreemptionReason>,
    preemptor_path: &str,
    preemptee_path: &str,
) -> String {
    let or_unknown = |text: &str| {
        if text.is_empty() {
            "UNKNOWN".to_owned()
        } else {
            text.to_owned()
        }
    };
    format!(
        "Preempted to accommodate a workload (UID: {}, JobUID: {}) due to {}; preemptor path: {}; preemptee path: {}",
        or_unknown(&preemptor.uid),
        or_unknown(preemptor.job_uid.as_deref().unwrap_or_default()),
        reason.map_or("UNKNOWN", PreemptionReason::human_readable),
        or_unknown(preemptor_path),
        or_unknown(preemptee_path),
    )
}

/// A ClusterQueue's path from its root, `/root/.../cq` (`buildCQPath`).
pub fn cluster_queue_path(tree: &Tree, id: NodeId) -> String {
    let mut parts: Vec<&str> = tree.ancestors(id).map(|node| tree.name(node)).collect();
    parts.reverse();
    parts.push(tree.name(id));
    format!("/{}", parts.join("/"))
}

/// The admitted Workloads of every ClusterQueue and the quota tree with their usage.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'t, 'a> {
    /// The tree, with every admitted Workload's usage.
    pub tree: &'t Tree,
    /// The admitted Workloads.
    pub admitted: &'a [AdmittedWorkload],
}

/// What needs room and under which policy.
#[derive(Debug, Clone, Copy)]
pub struct PreemptionRequest<'a> {
    /// The Workload.
    pub preemptor: &'a PreemptingWorkload,
    /// Its ClusterQueue's `spec.preemption`.
    pub policy: &'a ClusterQueuePreemption,
    /// The quota its assignment takes per (flavor, resource).
    pub usage: &'a FlavorResourceQuantities,
    /// The (flavor, resource) pairs its assignment marks Preempt.
    pub needs_preemption: &'a BTreeSet<FlavorResource>,
    /// The current time (unreserved candidates count as reserved now).
    pub now: SystemTime,
}

/// A Workload to evict and why (`Target`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target<'a> {
    /// The victim.
    pub workload: &'a AdmittedWorkload,
    /// The reason.
    pub reason: PreemptionReason,
}

impl Target<'_> {
    /// `namespace/name:Reason`, as Kueue's tests print a target.
    pub fn key_reason(&self) -> String {
        format!("{}:{}", self.workload.key(), self.reason.as_str())
    }

    /// The message to write on the victim (`preemptionMessage` with both paths).
    pub fn message(&self, tree: &Tree, preemptor: &PreemptingWorkload) -> String {
        let path = |name: &str| {
            tree.cluster_queue(name)
                .map(|id| cluster_queue_path(tree, id))
                .unwrap_or_default()
        };
        preemption_message(
            preemptor,
            Some(self.reason),
            &path(&preemptor.cluster_queue),
            &path(&self.workload.cluster_queue),
        )
    }
}

/// The (flavor, resource) pairs an assignment marks Preempt (`flavorResourcesNeedPreemption`).
pub fn flavor_resources_need_preemption(assignment: &Assignment) -> BTreeSet<FlavorResource> {
    assignment
        .pod_sets
        .iter()
        .flat_map(|ps| ps.flavors.iter())
        .filter(|(_, flavor)| flavor.mode == FlavorAssignmentMode::Preempt)
        .map(|(resource, flavor)| FlavorResource::new(flavor.name.clone(), resource.clone()))
        .collect()
}

/// The Workloads to evict so that the request fits (`GetTargets`); empty when preemption
/// cannot make room or the ClusterQueue is not in the tree.
pub fn get_targets<'a>(
    config: &PreemptionConfig,
    snapshot: Snapshot<'_, 'a>,
    request: &PreemptionRequest<'_>,
) -> Vec<Target<'a>> {
    let Some(cluster_queue) = snapshot
        .tree
        .cluster_queue(&request.preemptor.cluster_queue)
    else {
        return Vec::new();
    };
    let mut context = Context {
        tree: snapshot.tree.clone(),
        admitted: snapshot.admitted,
        cluster_queue,
        request,
        min_runtime: config.min_runtime_before_preemption,
    };
    let targets = match &config.fair_sharing {
        Some(fair_sharing) => fair::fair_preemptions(&mut context, fair_sharing),
        None => classical::classical_preemptions(&mut context),
    };
    targets
        .into_iter()
        .map(|(candidate, reason)| Target {
            workload: candidate.workload,
            reason,
        })
        .collect()
}

/// An admitted Workload with its ClusterQueue in the tree.
#[derive(Debug, Clone, Copy)]
struct Candidate<'a> {
    workload: &'a AdmittedWorkload,
    cluster_queue: NodeId,
}

/// One preemption run: a working copy of the tree that candidates are removed from.
struct Context<'a, 'r> {
    tree: Tree,
    admitted: &'a [AdmittedWorkload],
    cluster_queue: NodeId,
    request: &'r PreemptionRequest<'r>,
    min_runtime: Option<Duration>,
}

impl<'a> Context<'a, '_> {
    /// The admitted Workloads of a ClusterQueue (`cq.Workloads`) that may be preempted from
    /// the preemptor's: all of its own, another's once past the minimum runtime.
    fn workloads_of(&self, id: NodeId) -> impl Iterator<Item = Candidate<'a>> + '_ {
        let name = self.tree.name(id).to_owned();
        let protected = id != self.cluster_queue && self.min_runtime.is_some();
        self.admitted
            .iter()
            .filter(move |workload| workload.cluster_queue == name)
            .filter(move |workload| !(protected && self.within_min_runtime(workload)))
            .map(move |workload| Candidate {
                workload,
                cluster_queue: id,
            })
    }

    /// Whether the Workload's quota was reserved less than the minimum runtime ago
    /// (unreserved, or reserved after `now`, reads as just reserved).
    fn within_min_runtime(&self, workload: &AdmittedWorkload) -> bool {
        let now = self.request.now;
        let age = now
            .duration_since(workload.quota_reserved_at.unwrap_or(now))
            .unwrap_or(Duration::ZERO);
        self.min_runtime.is_some_and(|min| age < min)
    }

    fn remove(&mut self, candidate: &Candidate<'_>) {
        self.tree
            .remove_usages(candidate.cluster_queue, &candidate.workload.usage);
    }

    fn add(&mut self, candidate: &Candidate<'_>) {
        self.tree
            .add_usages(candidate.cluster_queue, &candidate.workload.usage);
    }

    /// Whether the request fits in the ClusterQueue now, optionally without borrowing
    /// (`workloadFits`).
    fn workload_fits(&self, allow_borrowing: bool) -> bool {
        self.request.usage.iter().all(|(key, amount)| {
            (allow_borrowing || !self.tree.borrowing_with(self.cluster_queue, key, amount))
                && amount <= self.tree.available_clamped(self.cluster_queue, key)
        })
    }

    fn ordering(&self, a: &Candidate<'_>, b: &Candidate<'_>) -> std::cmp::Ordering {
        candidates_ordering(
            a.workload,
            b.workload,
            &self.request.preemptor.cluster_queue,
            self.request.now,
        )
    }
}

type Targets<'a> = Vec<(Candidate<'a>, PreemptionReason)>;

/// Adds back, in reverse order, every target but the last whose return still lets the request
/// fit (`fillBackWorkloads`); leaves the remaining targets removed from the tree.
fn fill_back<'a>(
    context: &mut Context<'a, '_>,
    mut targets: Targets<'a>,
    allow_borrowing: bool,
) -> Targets<'a> {
    for i in (0..targets.len().saturating_sub(1)).rev() {
        let candidate = targets[i].0;
        context.add(&candidate);
        if context.workload_fits(allow_borrowing) {
            targets.swap_remove(i);
        } else {
            context.remove(&candidate);
        }
    }
    targets
}

/// Preemption for one Workload against one state of the admitted Workloads: the flavor
/// assigner's oracle (`PreemptionOracle.SimulatePreemption`: runs preemption for one (flavor,
/// resource) and answers whether it found targets, whether all of them are outside the
/// ClusterQueue (Reclaim), and the borrowing level once they are gone) and the targets for a
/// whole assignment (`Preemptor.GetTargets`). Both run [`get_targets`] over the same
/// admitted Workloads.
#[derive(Debug, Clone, Copy)]
pub struct Oracle<'a> {
    /// Classic or fair sharing.
    pub config: &'a PreemptionConfig,
    /// The admitted Workloads of every ClusterQueue.
    pub admitted: &'a [AdmittedWorkload],
    /// The Workload being assigned.
    pub preemptor: &'a PreemptingWorkload,
    /// Its ClusterQueue's `spec.preemption`.
    pub policy: &'a ClusterQueuePreemption,
    /// The current time.
    pub now: SystemTime,
}

impl<'a> Oracle<'a> {
    /// The Workloads to evict so that `assignment` fits in `tree` (`Preemptor.GetTargets`):
    /// its usage, with the (flavor, resource) pairs it marks Preempt.
    pub fn targets(&self, tree: &Tree, assignment: &Assignment) -> Vec<Target<'a>> {
        let needs_preemption = flavor_resources_need_preemption(assignment);
        self.run(tree, &assignment.usage, &needs_preemption)
    }

    /// What preemption could do for `quantity` of `key` in `cluster_queue`, and the borrowing
    /// level once its targets are gone (`SimulatePreemption`).
    pub fn simulate(
        &self,
        tree: &Tree,
        cluster_queue: NodeId,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize) {
        let usage: FlavorResourceQuantities = [(key.clone(), quantity)].into_iter().collect();
        let needs_preemption: BTreeSet<FlavorResource> = [key.clone()].into_iter().collect();
        let targets = self.run(tree, &usage, &needs_preemption);
        if targets.is_empty() {
            let (borrow, _) = tree.lowest_subtree_that_fits(cluster_queue, key, quantity);
            return (PreemptionPossibility::NoCandidates, borrow);
        }
        let mut after = tree.clone();
        for target in &targets {
            if let Some(id) = after.cluster_queue(&target.workload.cluster_queue) {
                after.remove_usages(id, &target.workload.usage);
            }
        }
        let (borrow, _) = after.lowest_subtree_that_fits(cluster_queue, key, quantity);
        let name = tree.name(cluster_queue);
        let possibility = if targets
            .iter()
            .any(|target| target.workload.cluster_queue == name)
        {
            PreemptionPossibility::Preempt
        } else {
            PreemptionPossibility::Reclaim
        };
        (possibility, borrow)
    }

    fn run(
        &self,
        tree: &Tree,
        usage: &FlavorResourceQuantities,
        needs_preemption: &BTreeSet<FlavorResource>,
    ) -> Vec<Target<'a>> {
        let request = PreemptionRequest {
            preemptor: self.preemptor,
            policy: self.policy,
            usage,
            needs_preemption,
            now: self.now,
        };
        let snapshot = Snapshot {
            tree,
            admitted: self.admitted,
        };
        get_targets(self.config, snapshot, &request)
    }
}

impl PreemptionOracle for Oracle<'_> {
    fn simulate_preemption(
        &self,
        tree: &Tree,
        cluster_queue: NodeId,
        _workload: &WorkloadInfo,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize) {
        self.simulate(tree, cluster_queue, key, quantity)
    }
}

#[cfg(test)]
mod tests;
