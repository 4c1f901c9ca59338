//! Kueue's SchedulingEquivalenceHashing (`keps/9694-scheduling-equivalence-hashing`): the
//! scheduling shape of a pending Workload — its effective priority, its PodSets as the
//! scheduler reads them (count, minCount, one pod's requests, node selector, required node
//! affinity, tolerations, topology request) and its effective total requests. Two Workloads of
//! one ClusterQueue with the same shape get the same answer from flavor assignment and
//! preemption, so when one fails with NoFit or PreemptionNoCandidates the others can wait in
//! the inadmissible set without being evaluated.
//!
//! Kueue keys a shape by the first 64 bits of a SHA-256 digest of its JSON; shapes here are
//! compared whole, so two different shapes never share a class. Knows nothing about when
//! classes are recorded or cleared: the ClusterQueue's queue decides.

use crate::queue::QueuedWorkload;
use crate::workload::{PodSet, PodSetResources};

/// A Workload's scheduling shape.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SchedulingShape {
    priority: i32,
    total_requests: Vec<PodSetResources>,
    pod_sets: Vec<PodSet>,
}

impl SchedulingShape {
    /// The shape of `workload`.
    pub(super) fn of(workload: &QueuedWorkload) -> SchedulingShape {
        SchedulingShape {
            priority: workload.info.workload.priority,
            total_requests: workload.info.total_requests.clone(),
            pod_sets: workload.info.workload.pod_sets.clone(),
        }
    }

    /// Whether `workload` has this shape (compared without copying it; the cheap fields
    /// first).
    pub(super) fn matches(&self, workload: &QueuedWorkload) -> bool {
        self.priority == workload.info.workload.priority
            && self.total_requests == workload.info.total_requests
            && self.pod_sets == workload.info.workload.pod_sets
    }
}
