//! The order preemption considers candidates in (`common/ordering.go: CandidatesOrdering`) and
//! whether a policy allows preempting a candidate (`common/preemption_policy.go`).
//!
//! Knows nothing about quotas or the tree; Admission Fair Sharing's LocalQueue usage step is
//! not modelled.

use std::cmp::Ordering;
use std::time::SystemTime;

use crate::cluster_queue::PreemptionPolicy;

use super::{AdmittedWorkload, PreemptingWorkload};

/// Orders candidates (`CandidatesOrdering`): already evicted first, then other ClusterQueues'
/// before the preemptor's (`preemptor_cluster_queue`), lower priority, more recent quota
/// reservation (unreserved reads as `now`), then UID, then `namespace/name` (a total order:
/// the candidates' order never depends on how the admitted Workloads were listed).
pub fn candidates_ordering(
    a: &AdmittedWorkload,
    b: &AdmittedWorkload,
    preemptor_cluster_queue: &str,
    now: SystemTime,
) -> Ordering {
    let reserved = |w: &AdmittedWorkload| w.quota_reserved_at.unwrap_or(now);
    b.evicted
        .cmp(&a.evicted)
        .then_with(|| {
            (a.cluster_queue == preemptor_cluster_queue)
                .cmp(&(b.cluster_queue == preemptor_cluster_queue))
        })
        .then_with(|| a.priority.cmp(&b.priority))
        .then_with(|| reserved(b).cmp(&reserved(a)))
        .then_with(|| a.uid.cmp(&b.uid))
        .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
}

/// Whether `policy` lets the preemptor evict the candidate (`SatisfiesPreemptionPolicy`):
/// LowerPriority needs a strictly lower priority; LowerOrNewerEqualPriority also takes equal
/// priority with a later queue timestamp; Any takes everything; Never nothing.
pub fn satisfies_preemption_policy(
    preemptor: &PreemptingWorkload,
    candidate: &AdmittedWorkload,
    policy: PreemptionPolicy,
) -> bool {
    let lower_priority = preemptor.priority > candidate.priority;
    match policy {
        PreemptionPolicy::LowerPriority => lower_priority,
        PreemptionPolicy::LowerOrNewerEqualPriority => {
            lower_priority
                || (preemptor.priority == candidate.priority
                    && preemptor.queue_timestamp < candidate.queue_timestamp)
        }
        PreemptionPolicy::Any => true,
        PreemptionPolicy::Never => false,
    }
}
