//! The TAS flavors one scheduling cycle sees (the `TASFlavorSnapshot`s of Kueue's ClusterQueue
//! snapshots) and the TAS step applied to the flavor assigner's `Assignment`, as the end of
//! Kueue's `assignFlavors` does it: `WorkloadsTopologyRequests`, then on Fit the placement
//! (`UpdateForTASResult`) or, when it does not fit now, Preempt with the placement's reason;
//! on Preempt the check that the placement fits with every TAS Workload gone, else NoFit
//! (`updateMode`, the cached representative mode). Also what an admission adds to a flavor's
//! usage within the cycle.
//!
//! Knows nothing about quota, stored objects or how snapshots are built (`api::tas`).

use std::collections::{BTreeMap, BTreeSet};

use crate::assigner::{Assignment, FlavorAssignmentMode, TopologyPlacement};
use crate::cluster_queue::ResourceGroup;
use crate::cycle::Admission;
use crate::tas::flavor_step::{AssignedPodSet, TopologyVerdict, requests_tas, topology_step};
use crate::tas::request::{PodSetTasRequest, TopologyAssignment};
use crate::tas::snapshot::TasSnapshot;
use crate::workload::PodSet;

/// Kueue's `WorkloadQuotaReservedReasonTopologyPlacementFailed`.
pub const TOPOLOGY_PLACEMENT_FAILED: &str = "TopologyPlacementFailed";

/// The ResourceFlavors with a topology and their snapshots.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TasFlavors {
    /// `spec.topologyName` of every ResourceFlavor that has one, by flavor.
    pub topologies: BTreeMap<String, String>,
    /// The snapshot of every TAS flavor whose Topology exists, by flavor.
    pub snapshots: BTreeMap<String, TasSnapshot>,
}

impl TasFlavors {
    /// No TAS flavors.
    pub const NONE: TasFlavors = TasFlavors {
        topologies: BTreeMap::new(),
        snapshots: BTreeMap::new(),
    };

    /// `IsTASOnly`: every flavor of every resource group is a TAS flavor.
    pub fn tas_only(&self, groups: &[ResourceGroup]) -> bool {
        groups
            .iter()
            .flat_map(|group| &group.flavors)
            .all(|flavor| self.snapshots.contains_key(flavor))
    }

    /// Adds the topology placements of `holder`'s (`namespace/name`) admitted assignment to
    /// its flavors' usage, so that later Workloads of the same cycle see it (Kueue's snapshot
    /// `AddUsage` with TAS usage).
    pub fn add_admitted(&mut self, holder: &str, assignment: &Assignment, pod_sets: &[PodSet]) {
        for assigned in &assignment.pod_sets {
            if let Some(placement) = &assigned.topology {
                let flavor = std::iter::once(placement.flavor.as_str());
                let pod_set = (assigned.name.as_str(), pod_sets);
                self.add_placement(holder, flavor, pod_set, &placement.assignment);
            }
        }
    }

    /// Adds the placements of `holder`'s Admission record (a cycle's decision) to the usage.
    pub fn add_admission(&mut self, holder: &str, admission: &Admission, pod_sets: &[PodSet]) {
        for assigned in &admission.pod_set_assignments {
            if let Some(placement) = &assigned.topology_assignment {
                let flavors = assigned.flavors.values().map(String::as_str);
                let pod_set = (assigned.name.as_str(), pod_sets);
                self.add_placement(holder, flavors, pod_set, placement);
            }
        }
    }

    /// Adds one PodSet's placement, as `holder`'s, to the first of `flavors` that is a TAS
    /// flavor.
    fn add_placement<'f>(
        &mut self,
        holder: &str,
        mut flavors: impl Iterator<Item = &'f str>,
        (pod_set, pod_sets): (&str, &[PodSet]),
        placement: &TopologyAssignment,
    ) {
        let Some(pod_set) = pod_sets.iter().find(|ps| ps.name == pod_set) else {
            return;
        };
        let Some(flavor) = flavors.find(|f| self.snapshots.contains_key(*f)) else {
            return;
        };
        if let Some(snapshot) = self.snapshots.get_mut(flavor) {
            snapshot.add_held_assignment(holder, placement, &pod_set.requests);
        }
    }
}

/// A PodSet's TAS input at `count` pods: one pod's requests, its topology request and
/// scheduling constraints (`TASPodSetRequests`).
pub fn pod_set_request(pod_set: &PodSet, count: i32) -> PodSetTasRequest {
    PodSetTasRequest {
        name: pod_set.name.clone(),
        count,
        single_pod_requests: pod_set.requests.clone(),
        topology_request: pod_set.topology_request.clone(),
        implied: false,
        node_selector: pod_set.node_selector.clone(),
        required_affinity: pod_set.required_affinity.clone(),
        tolerations: pod_set.tolerations.clone(),
        group: pod_set.group.clone(),
    }
}

/// The PodSets of `assignment` with their TAS input at the assigned counts and their flavors.
pub fn assigned_pod_sets(assignment: &Assignment, pod_sets: &[PodSet]) -> Vec<AssignedPodSet> {
    assignment
        .pod_sets
        .iter()
        .filter_map(|ps| {
            let pod_set = pod_sets.iter().find(|p| p.name == ps.name)?;
            Some(AssignedPodSet {
                request: pod_set_request(pod_set, ps.count),
                flavors: ps.flavors.values().map(|f| f.name.clone()).collect(),
            })
        })
        .collect()
}

/// Runs the TAS step over `assignment` (the PodSets' flavors from quota) and records its
/// outcome: placements on Fit, Kueue's reason and mode otherwise.
pub fn place(assignment: &mut Assignment, pod_sets: &[PodSet], tas_only: bool, tas: &TasFlavors) {
    let mode = assignment.representative_mode();
    if mode == FlavorAssignmentMode::NoFit {
        return;
    }
    let assigned = assigned_pod_sets(assignment, pod_sets);
    let tas_pod_sets: BTreeSet<String> = assigned
        .iter()
        .filter(|a| requests_tas(&a.request, tas_only) && a.request.count > 0)
        .map(|a| a.request.name.clone())
        .collect();
    match topology_step(mode, &assigned, tas_only, &tas.snapshots) {
        TopologyVerdict::Unchanged => {}
        TopologyVerdict::Fit(placements) => {
            for ps in &mut assignment.pod_sets {
                let Some(placed) = placements.get(&ps.name) else {
                    continue;
                };
                let flavor = ps
                    .flavors
                    .values()
                    .map(|f| f.name.clone())
                    .find(|name| tas.snapshots.contains_key(name))
                    .unwrap_or_default();
                ps.topology = Some(TopologyPlacement {
                    flavor,
                    assignment: placed.clone(),
                });
            }
        }
        TopologyVerdict::Preempt { reason } => {
            if let Some((name, reason)) = reason {
                assignment.add_reason(&name, reason);
            }
            for name in &tas_pod_sets {
                assignment.update_mode(name, FlavorAssignmentMode::Preempt);
            }
        }
        TopologyVerdict::NoFit {
            pod_set,
            flavor,
            reason,
        } => {
            // Kueue records the reason of the search that ran on quota's Fit; with quota
            // asking for preemption only the mode changes.
            if mode == FlavorAssignmentMode::Fit {
                assignment.add_reason(&pod_set, reason);
            }
            assignment.update_mode(&pod_set, FlavorAssignmentMode::NoFit);
            if let Some(ps) = assignment.pod_sets.iter_mut().find(|ps| ps.name == pod_set) {
                ps.topology_failed_in = Some(flavor);
            }
        }
        TopologyVerdict::Error { pod_set, message } => assignment.pod_set_error(&pod_set, message),
    }
}

#[cfg(test)]
#[path = "flavors_tests.rs"]
mod tests;
