//! The TAS step of Kueue's flavor assigner (the end of `assignFlavors` in
//! `flavorassigner.go` and `tas_flavorassigner.go`): once quota gave a Workload's PodSets
//! their flavors, the PodSets that ask for TAS (explicitly, or implied when the ClusterQueue
//! has only TAS flavors) are placed in their one TAS flavor's topology. A placement that does
//! not fit now downgrades Fit to Preempt with Kueue's reason on the PodSet; one that would
//! not fit even with every TAS Workload gone is NoFit. Also the per-flavor check the flavor
//! search runs (`checkPodSetAndFlavorMatchForTAS`).
//!
//! The assigner calls this through `tas::flavors::place`, which records the outcome in its
//! `Assignment`. Knows nothing about quota.

use std::collections::{BTreeMap, BTreeSet};

use crate::assigner::FlavorAssignmentMode;
use crate::tas::request::{PodSetTasRequest, TopologyAssignment};
use crate::tas::snapshot::{SearchOptions, TasSnapshot};
use crate::workload::Requests;

/// `ErrNoTASCacheInformation`.
pub const NO_TAS_CACHE_INFORMATION: &str =
    "workload requires Topology, but there is no TAS cache information";
/// `ErrNoTASFlavorAssigned`.
pub const NO_TAS_FLAVOR_ASSIGNED: &str = "no TAS flavor assigned";

/// One PodSet after flavor assignment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AssignedPodSet {
    /// The PodSet's TAS input with the count quota admitted; `topology_request` is `None`
    /// when the PodSet has no TAS annotations (`implied` is then decided here).
    pub request: PodSetTasRequest,
    /// The flavors its resources were assigned.
    pub flavors: BTreeSet<String>,
}

/// What the TAS step decides for a Workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyVerdict {
    /// Nothing asks for TAS, or quota did not fit: the assignment is left as it is.
    Unchanged,
    /// Every TAS PodSet fits now: their assignments, by PodSet name.
    Fit(BTreeMap<String, TopologyAssignment>),
    /// Fits only after preemption. `reason` names the PodSet that does not fit now and why
    /// (`None` when quota alone asked for preemption).
    Preempt {
        /// `(PodSet, reason)`.
        reason: Option<(String, String)>,
    },
    /// Does not fit even with every TAS Workload preempted.
    NoFit {
        /// The PodSet.
        pod_set: String,
        /// Its flavor.
        flavor: String,
        /// The reason the placement did not fit now; when quota alone asked for preemption,
        /// the reason of the search without TAS Workloads (where Kueue records none).
        reason: String,
    },
    /// A PodSet's TAS request could not be built (`psError`).
    Error {
        /// The PodSet.
        pod_set: String,
        /// The error.
        message: String,
    },
}

/// Kueue's `isTASRequested`: explicit annotations, or implied in a TAS-only ClusterQueue.
pub(crate) fn requests_tas(pod_set: &PodSetTasRequest, cluster_queue_tas_only: bool) -> bool {
    pod_set.topology_request.is_some() || cluster_queue_tas_only
}

/// The TAS step after flavor assignment with representative `mode`.
pub fn topology_step(
    mode: FlavorAssignmentMode,
    pod_sets: &[AssignedPodSet],
    cluster_queue_tas_only: bool,
    snapshots: &BTreeMap<String, TasSnapshot>,
) -> TopologyVerdict {
    if mode == FlavorAssignmentMode::NoFit {
        return TopologyVerdict::Unchanged;
    }
    let by_flavor = match requests_by_flavor(pod_sets, cluster_queue_tas_only, snapshots) {
        Ok(requests) => requests,
        Err((pod_set, message)) => return TopologyVerdict::Error { pod_set, message },
    };
    if by_flavor.is_empty() {
        return TopologyVerdict::Unchanged;
    }
    let mut preempt_reason = None;
    if mode == FlavorAssignmentMode::Fit {
        match find_for_workload(&by_flavor, snapshots, false) {
            Ok(assignments) => return TopologyVerdict::Fit(assignments),
            Err((pod_set, _, reason)) => preempt_reason = Some((pod_set, reason)),
        }
    }
    match find_for_workload(&by_flavor, snapshots, true) {
        Ok(_) => TopologyVerdict::Preempt {
            reason: preempt_reason,
        },
        Err((pod_set, flavor, reason)) => TopologyVerdict::NoFit {
            reason: preempt_reason
                .filter(|(failed, _)| *failed == pod_set)
                .map_or(reason, |(_, reason)| reason),
            pod_set,
            flavor,
        },
    }
}

/// TAS requests by their one TAS flavor.
pub(crate) type ByFlavor = BTreeMap<String, Vec<PodSetTasRequest>>;

/// `WorkloadsTopologyRequests`: TAS PodSets with pods, by their one TAS flavor.
pub(crate) fn requests_by_flavor(
    pod_sets: &[AssignedPodSet],
    cluster_queue_tas_only: bool,
    snapshots: &BTreeMap<String, TasSnapshot>,
) -> Result<ByFlavor, (String, String)> {
    let mut by_flavor = ByFlavor::new();
    for assigned in pod_sets {
        let request = &assigned.request;
        if !requests_tas(request, cluster_queue_tas_only) || request.count == 0 {
            continue;
        }
        let fail = |message: String| (request.name.clone(), message);
        if snapshots.is_empty() {
            return Err(fail(NO_TAS_CACHE_INFORMATION.to_owned()));
        }
        let tas_flavors: Vec<&String> = assigned
            .flavors
            .iter()
            .filter(|flavor| snapshots.contains_key(*flavor))
            .collect();
        let flavor = match tas_flavors.as_slice() {
            [] => return Err(fail(NO_TAS_FLAVOR_ASSIGNED.to_owned())),
            [flavor] => (*flavor).clone(),
            many => {
                let names: Vec<&str> = many.iter().map(|name| name.as_str()).collect();
                return Err(fail(format!(
                    "more than one TAS flavor assigned: {}",
                    names.join(", ")
                )));
            }
        };
        let mut request = request.clone();
        request.implied = request.topology_request.is_none();
        by_flavor.entry(flavor).or_default().push(request);
    }
    Ok(by_flavor)
}

/// `FindTopologyAssignmentsForWorkload`: flavors in name order, sharing assumed usage
/// between flavors whose lowest level is the hostname; the first failure as
/// `(PodSet, flavor, reason)`.
fn find_for_workload(
    by_flavor: &ByFlavor,
    snapshots: &BTreeMap<String, TasSnapshot>,
    simulate_empty: bool,
) -> Result<BTreeMap<String, TopologyAssignment>, (String, String, String)> {
    let options = SearchOptions {
        simulate_empty,
        ..SearchOptions::default()
    };
    let mut shared: BTreeMap<String, Requests> = BTreeMap::new();
    let mut assignments = BTreeMap::new();
    for (flavor, requests) in by_flavor {
        let Some(snapshot) = snapshots.get(flavor) else {
            continue;
        };
        let mut own = BTreeMap::new();
        let assumed = if snapshot.tree.lowest_level_is_node {
            &mut shared
        } else {
            &mut own
        };
        let results = snapshot.find_topology_assignments_assuming(requests, &options, assumed);
        for request in requests {
            let Some(result) = results.get(&request.name) else {
                continue;
            };
            if !result.failure_reason.is_empty() {
                return Err((
                    request.name.clone(),
                    flavor.clone(),
                    result.failure_reason.clone(),
                ));
            }
            if let Some(assignment) = &result.assignment {
                assignments.insert(request.name.clone(), assignment.clone());
            }
        }
    }
    Ok(assignments)
}

/// `checkPodSetAndFlavorMatchForTAS`: why a PodSet may not take `flavor` (its
/// `spec.topologyName`, its snapshot if any) for TAS reasons; `covers_requests` says whether
/// the resource group covers any resource the PodSet requests.
pub fn flavor_mismatch(
    pod_set: &PodSetTasRequest,
    cluster_queue_tas_only: bool,
    flavor: &str,
    topology_name: Option<&str>,
    snapshot: Option<&TasSnapshot>,
    covers_requests: bool,
) -> Option<String> {
    let explicit = pod_set.topology_request.is_some();
    if !requests_tas(pod_set, cluster_queue_tas_only) {
        return topology_name
            .map(|_| format!("Flavor \"{flavor}\" supports only TopologyAwareScheduling"));
    }
    if !explicit {
        return None;
    }
    if topology_name.is_none() {
        return covers_requests
            .then(|| format!("Flavor \"{flavor}\" does not support TopologyAwareScheduling"));
    }
    let Some(snapshot) = snapshot else {
        return Some(format!(
            "Flavor \"{flavor}\" information missing in TAS cache"
        ));
    };
    (!has_level(snapshot, pod_set))
        .then(|| format!("Flavor \"{flavor}\" does not contain the requested level"))
}

/// `HasLevel`: the request's level, slice level and every slice layer exist.
fn has_level(snapshot: &TasSnapshot, pod_set: &PodSetTasRequest) -> bool {
    let tree = &snapshot.tree;
    let Some(request) = &pod_set.topology_request else {
        return false;
    };
    let key = if let Some(required) = &request.required {
        required.as_str()
    } else if let Some(preferred) = &request.preferred {
        preferred.as_str()
    } else if request.is_slice_only() {
        tree.highest_level()
    } else if request.unconstrained {
        tree.lowest_level()
    } else {
        return false;
    };
    let slice_key = request
        .slices
        .first()
        .map_or(tree.lowest_level(), |layer| layer.topology.as_str());
    tree.level_index(key).is_some()
        && tree.level_index(slice_key).is_some()
        && request
            .slices
            .iter()
            .all(|layer| tree.level_index(&layer.topology).is_some())
}
