//! Beyond Kueue (`beyondKueue.topologyAwarePreemption`, issue 17 item 2): which Workloads the
//! cycle preempts when a PodSet's required topology level has no domain with room even once
//! the Workloads already leaving (Kueue's quota targets, those being evicted) are gone. The
//! occupants of each TAS flavor are the holders its snapshot names (their TAS placements and
//! the non-TAS pods attributed to them, every pod counted); those the preemptor's
//! ClusterQueue policy lets it preempt become candidates, and
//! [`cheapest_domain_to_clear`] picks the domain and the victims.
//!
//! Knows nothing about quota (the caller decides which quota targets are leaving) or how
//! the victims are evicted; usage the snapshot cannot attribute (pods of no Workload) is
//! capacity nobody can clear.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use crate::cluster_queue::{ClusterQueuePreemption, PreemptionPolicy};
use crate::preemption::{AdmittedWorkload, PreemptingWorkload, PreemptionReason};
use crate::tas::beyond::{Occupant, cheapest_domain_to_clear};
use crate::tas::flavor_step::{AssignedPodSet, requests_by_flavor};
use crate::tas::flavors::TasFlavors;
use crate::tas::request::{PodSetTasRequest, PodSetTasResult};
use crate::tas::snapshot::{SearchOptions, TasSnapshot};
use crate::tree::Tree;

/// What clearing a domain takes for one assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Clearing<'a> {
    /// No TAS PodSet of the assignment asks for a required level: Kueue's behaviour applies.
    NoRequiredLevel,
    /// The Workloads to preempt besides those leaving, with their reasons (already evicted
    /// ones included where the placement waits for them); empty when the required levels fit
    /// once those leaving are gone and none of them is being evicted.
    Clear(Vec<(&'a AdmittedWorkload, PreemptionReason)>),
    /// A required level has no domain that the preemptible holders could clear.
    Impossible,
}

/// One preemptor's assignment and what it may preempt.
#[derive(Debug, Clone, Copy)]
pub struct ClearingRequest<'a> {
    /// The cycle's TAS flavors.
    pub tas: &'a TasFlavors,
    /// The assignment's PodSets with their TAS input and flavors.
    pub pod_sets: &'a [AssignedPodSet],
    /// Whether the preemptor's ClusterQueue has only TAS flavors (TAS implied).
    pub tas_only: bool,
    /// The admitted Workloads that may still be chosen.
    pub candidates: &'a [AdmittedWorkload],
    /// Keys of the Workloads already on their way out: their usage counts as gone.
    pub leaving: &'a BTreeSet<String>,
    /// The preemptor.
    pub preemptor: &'a PreemptingWorkload,
    /// Its ClusterQueue's `spec.preemption`.
    pub policy: &'a ClusterQueuePreemption,
    /// The quota tree (which ClusterQueues share a cohort).
    pub tree: &'a Tree,
    /// Workloads of other ClusterQueues reserved less than this ago are protected.
    pub min_runtime: Option<Duration>,
    /// The current time.
    pub now: SystemTime,
}

impl<'a> ClearingRequest<'a> {
    /// The victims, per TAS flavor whose PodSets ask for a required level. Holders already
    /// being evicted count as gone; those on the leaves the placement then takes are listed
    /// again (as Kueue lists evicted candidates), so that the preemptor waits for them.
    pub fn clear(&self) -> Clearing<'a> {
        let Ok(by_flavor) = requests_by_flavor(self.pod_sets, self.tas_only, &self.tas.snapshots)
        else {
            return Clearing::NoRequiredLevel;
        };
        let preemptible: BTreeMap<String, &'a AdmittedWorkload> = self
            .candidates
            .iter()
            .filter(|workload| self.may_preempt(workload))
            .map(|workload| (workload.key(), workload))
            .collect();
        let mut asked = false;
        let mut victims: Vec<&'a AdmittedWorkload> = Vec::new();
        for (flavor, requests) in &by_flavor {
            let Some(snapshot) = self.tas.snapshots.get(flavor) else {
                continue;
            };
            if !requests.iter().any(has_required_level) {
                continue;
            }
            asked = true;
            let (cleared, occupants) = self.occupants(snapshot, &preemptible);
            let assignments = match placement(&cleared, requests) {
                Some(assignments) => assignments,
                None => {
                    let priority = clamped(self.preemptor.priority);
                    let Some(plan) =
                        cheapest_domain_to_clear(&cleared, requests, &occupants, priority)
                    else {
                        return Clearing::Impossible;
                    };
                    victims.extend(
                        plan.victims
                            .iter()
                            .filter_map(|key| preemptible.get(key).copied()),
                    );
                    plan.assignments
                }
            };
            let leaves: BTreeSet<String> = requests
                .iter()
                .filter_map(|request| {
                    let assignment = assignments.get(&request.name)?.assignment.as_ref()?;
                    Some(TasSnapshot::usage_of(
                        assignment,
                        &request.single_pod_requests,
                    ))
                })
                .flat_map(BTreeMap::into_keys)
                .collect();
            let evicted_there = snapshot
                .holders()
                .iter()
                .filter(|(_, usage)| usage.keys().any(|leaf| leaves.contains(leaf)));
            victims.extend(
                evicted_there
                    .filter_map(|(holder, _)| preemptible.get(holder).copied())
                    .filter(|workload| workload.evicted),
            );
        }
        if !asked {
            return Clearing::NoRequiredLevel;
        }
        let mut seen = BTreeSet::new();
        victims.retain(|workload| seen.insert(workload.key()));
        Clearing::Clear(
            victims
                .into_iter()
                .map(|workload| (workload, self.reason(workload)))
                .collect(),
        )
    }

    /// The flavor's snapshot without the usage of those leaving or being evicted, and the
    /// other holders that may be preempted as occupants.
    fn occupants(
        &self,
        snapshot: &TasSnapshot,
        preemptible: &BTreeMap<String, &AdmittedWorkload>,
    ) -> (TasSnapshot, Vec<Occupant>) {
        let evicted: BTreeSet<String> = self
            .candidates
            .iter()
            .filter(|workload| workload.evicted)
            .map(AdmittedWorkload::key)
            .collect();
        let mut cleared = snapshot.clone();
        let mut occupants = Vec::new();
        for (holder, usage) in snapshot.holders() {
            if self.leaving.contains(holder) || evicted.contains(holder) {
                for (leaf, requests) in usage {
                    cleared.remove_tas_usage(leaf, requests);
                }
            } else if let Some(workload) = preemptible.get(holder) {
                occupants.push(Occupant {
                    key: holder.clone(),
                    priority: clamped(workload.priority),
                    usage: usage.clone(),
                });
            }
        }
        (cleared, occupants)
    }

    /// Whether the preemptor's policy lets it preempt `workload`: strictly lower priority
    /// always; in its own ClusterQueue unless `withinClusterQueue` is Never; in another
    /// ClusterQueue of its cohort unless `reclaimWithinCohort` is Never and once past the
    /// minimum runtime. ClusterQueues outside the cohort are never touched, as in Kueue.
    fn may_preempt(&self, workload: &AdmittedWorkload) -> bool {
        if workload.priority >= self.preemptor.priority {
            return false;
        }
        if workload.cluster_queue == self.preemptor.cluster_queue {
            return self.policy.within_cluster_queue != PreemptionPolicy::Never;
        }
        self.policy.reclaim_within_cohort != PreemptionPolicy::Never
            && self.same_cohort(&workload.cluster_queue)
            && !self.within_min_runtime(workload)
    }

    fn same_cohort(&self, cluster_queue: &str) -> bool {
        let root = |name: &str| {
            let id = self.tree.cluster_queue(name)?;
            self.tree.parent(id).map(|parent| self.tree.root(parent))
        };
        root(&self.preemptor.cluster_queue).is_some_and(|own| root(cluster_queue) == Some(own))
    }

    fn within_min_runtime(&self, workload: &AdmittedWorkload) -> bool {
        let reserved = workload.quota_reserved_at.unwrap_or(self.now);
        let age = self.now.duration_since(reserved).unwrap_or(Duration::ZERO);
        self.min_runtime.is_some_and(|min| age < min)
    }

    /// The `Preempted` reason: `InClusterQueue` for a victim of the preemptor's own
    /// ClusterQueue (Kueue's reason for priority preemption there), `InCohortReclamation`
    /// for another ClusterQueue's (the preemptor takes back capacity of a flavor the cohort
    /// shares; borrowing and fair-sharing reasons describe quota, which is not what is
    /// short here).
    fn reason(&self, workload: &AdmittedWorkload) -> PreemptionReason {
        if workload.cluster_queue == self.preemptor.cluster_queue {
            PreemptionReason::InClusterQueue
        } else {
            PreemptionReason::InCohortReclamation
        }
    }
}

fn has_required_level(request: &PodSetTasRequest) -> bool {
    request
        .topology_request
        .as_ref()
        .is_some_and(|topology| topology.required.is_some())
}

/// The placements of `requests` in `snapshot` as it is, when every PodSet fits.
fn placement(
    snapshot: &TasSnapshot,
    requests: &[PodSetTasRequest],
) -> Option<BTreeMap<String, PodSetTasResult>> {
    let results = snapshot.find_topology_assignments(requests, &SearchOptions::default());
    let all_fit = requests.iter().all(|request| {
        results
            .get(&request.name)
            .is_some_and(|result| result.failure_reason.is_empty())
    });
    all_fit.then_some(results)
}

/// A priority as the TAS core compares it (Kueue's priorities are `int32`).
fn clamped(priority: i64) -> i32 {
    i32::try_from(priority).unwrap_or(if priority < 0 { i32::MIN } else { i32::MAX })
}
