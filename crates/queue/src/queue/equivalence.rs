//! Kueue's SchedulingEquivalenceHashing (`keps/9694-scheduling-equivalence-hashing`): the
//! scheduling shape of a pending Workload — its effective priority, its PodSets as the
//! scheduler reads them (count, minCount, one pod's requests, node selector, required node
//! affinity, tolerations, topology request) and its effective total requests. Two Workloads of
//! one ClusterQueue with the same shape get the same answer from flavor assignment and
//! preemption, so when one fails with NoFit or PreemptionNoCandidates the others can wait in
//! the inadmissible set without being evaluated.
//!
//! Kueue keys a shape by the first 64 bits of a SHA-256 digest of its JSON. Here a shape
//! carries a 64-bit fingerprint of most of its fields, so that most Workloads of another shape
//! are told apart by one comparison, and equal fingerprints are confirmed by comparing the
//! shapes whole: two different shapes never share a class. Knows nothing about when classes
//! are recorded or cleared: the ClusterQueue's queue decides.

use std::hash::{DefaultHasher, Hash, Hasher};

use crate::queue::QueuedWorkload;
use crate::workload::{PodSet, PodSetResources};

/// A Workload's scheduling shape.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SchedulingShape {
    fingerprint: u64,
    priority: i32,
    total_requests: Vec<PodSetResources>,
    pod_sets: Vec<PodSet>,
}

impl SchedulingShape {
    /// The shape of `workload`.
    pub(super) fn of(workload: &QueuedWorkload) -> SchedulingShape {
        SchedulingShape {
            fingerprint: fingerprint(workload),
            priority: workload.info.workload.priority,
            total_requests: workload.info.total_requests.clone(),
            pod_sets: workload.info.workload.pod_sets.clone(),
        }
    }

    /// Whether `workload`, whose [`fingerprint`] is `workload_fingerprint`, has this shape
    /// (compared without copying it; the fingerprint and the cheap fields first).
    pub(super) fn matches(&self, workload: &QueuedWorkload, workload_fingerprint: u64) -> bool {
        self.fingerprint == workload_fingerprint
            && self.priority == workload.info.workload.priority
            && self.total_requests == workload.info.total_requests
            && self.pod_sets == workload.info.workload.pod_sets
    }

    /// The shape's fingerprint.
    pub(super) fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
}

/// A 64-bit digest of `workload`'s shape: equal shapes always give equal fingerprints (it
/// reads only shape fields; node affinity terms and tolerations by their number). A fixed-key
/// hasher: the same shape gives the same fingerprint in every run.
pub(super) fn fingerprint(workload: &QueuedWorkload) -> u64 {
    let mut hasher = DefaultHasher::new();
    workload.info.workload.priority.hash(&mut hasher);
    for total in &workload.info.total_requests {
        total.name.hash(&mut hasher);
        total.requests.hash(&mut hasher);
        total.count.hash(&mut hasher);
    }
    for pod_set in &workload.info.workload.pod_sets {
        pod_set.name.hash(&mut hasher);
        pod_set.count.hash(&mut hasher);
        pod_set.min_count.hash(&mut hasher);
        pod_set.requests.hash(&mut hasher);
        pod_set.node_selector.hash(&mut hasher);
        pod_set.required_affinity.len().hash(&mut hasher);
        pod_set.tolerations.len().hash(&mut hasher);
        pod_set.group.hash(&mut hasher);
        if let Some(request) = &pod_set.topology_request {
            request.required.hash(&mut hasher);
            request.preferred.hash(&mut hasher);
            request.unconstrained.hash(&mut hasher);
            request.slices.len().hash(&mut hasher);
        }
    }
    hasher.finish()
}
