//! Beyond Kueue: per-user limits inside a LocalQueue (Kueue has none; its users ask for them
//! in #1403/#696): at most so many admitted Workloads per user, and at most so much of each
//! resource requested per user, counted over the Workloads admitted from the same LocalQueue
//! by the same user. A Workload over a limit is not nominated; it stays pending with
//! [`USER_LIMIT_REACHED`] and a message naming the user and the limit.
//!
//! Knows nothing about how a user is identified: the caller resolves each Workload's user (the
//! creating user, or the value of a label it keys by) into `QueuedWorkload::user` and
//! `AdmittedWorkload::user`. Quota, flavors and preemption do not see these limits; a
//! Workload without a user is never limited.

use std::collections::BTreeMap;

use crate::preemption::AdmittedWorkload;
use crate::workload::WorkloadInfo;

/// `QuotaReserved` False reason: the Workload's user is at a per-user limit of its LocalQueue.
pub const USER_LIMIT_REACHED: &str = "UserLimitReached";

/// A LocalQueue's per-user limits; the default limits nothing (Kueue's behaviour).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserLimits {
    /// The most Workloads one user may have admitted from the LocalQueue at once.
    pub max_admitted_per_user: Option<usize>,
    /// The most one user's admitted Workloads may request, per resource name (canonical
    /// units: milli-cores for `cpu`), summed over flavors and PodSets.
    pub max_requests_per_user: BTreeMap<String, i64>,
}

impl UserLimits {
    /// Why `workload` of `user` in LocalQueue `namespace/local_queue` may not be admitted
    /// next to `admitted` (every admitted Workload; those of other LocalQueues and users are
    /// skipped), or `None` when it may. The full requests count, before any partial
    /// admission.
    pub fn refusal(
        &self,
        namespace: &str,
        local_queue: &str,
        user: &str,
        workload: &WorkloadInfo,
        admitted: &[AdmittedWorkload],
    ) -> Option<String> {
        if self.max_admitted_per_user.is_none() && self.max_requests_per_user.is_empty() {
            return None;
        }
        let mine: Vec<&AdmittedWorkload> = admitted
            .iter()
            .filter(|w| {
                w.namespace == namespace
                    && w.local_queue == local_queue
                    && w.user.as_deref() == Some(user)
            })
            .collect();
        if let Some(max) = self.max_admitted_per_user
            && mine.len() >= max
        {
            return Some(format!(
                "user \"{user}\" has {} admitted workload(s) in LocalQueue {local_queue}, the limit per user is {max}",
                mine.len()
            ));
        }
        for (resource, max) in &self.max_requests_per_user {
            let used: i64 = mine
                .iter()
                .flat_map(|w| w.usage.iter())
                .filter(|(key, _)| key.resource == *resource)
                .map(|(_, amount)| amount.int64())
                .fold(0, i64::saturating_add);
            let requested: i64 = workload
                .total_requests
                .iter()
                .filter_map(|ps| ps.requests.get(resource))
                .fold(0, |sum, value| sum.saturating_add(*value));
            let total = used.saturating_add(requested);
            if requested > 0 && total > *max {
                return Some(format!(
                    "user \"{user}\" would request {total} of {resource} in LocalQueue {local_queue}, the limit per user is {max}"
                ));
            }
        }
        None
    }
}
