//! A ClusterQueue's active heap: the pending Workloads it may pop, by key, with an order
//! index per LocalQueue so that a pop costs the number of LocalQueues, not of Workloads.
//!
//! Within one LocalQueue the queue order (`QueueOrdering::compare`) only depends on the
//! Workloads themselves — admission fair sharing weighs whole LocalQueues and the sticky
//! preemptor is one known key — so each LocalQueue keeps its Workloads sorted by priority,
//! queue timestamp and tie-break, and a pop compares the LocalQueues' heads with the full
//! order. Knows nothing of why Workloads enter or leave: `ClusterQueueQueue` decides.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use super::{QueueOrdering, QueuedWorkload, RequeuingTimestamp, WorkloadKey};

/// The part of the queue order that depends on the Workload alone: priority (higher
/// first), queue timestamp, then the tie-break (UID, namespace, name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OrderKey {
    priority: Reverse<i32>,
    timestamp: SystemTime,
    uid: String,
    namespace: String,
    name: String,
}

impl OrderKey {
    fn of(workload: &QueuedWorkload, timestamp: RequeuingTimestamp) -> OrderKey {
        OrderKey {
            priority: Reverse(workload.info.workload.priority),
            timestamp: workload.queue_order_timestamp(timestamp),
            uid: workload.uid.clone(),
            namespace: workload.info.workload.namespace.clone(),
            name: workload.info.workload.name.clone(),
        }
    }

    fn workload_key(&self) -> WorkloadKey {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// `(namespace, LocalQueue name)`.
type LocalQueueRef = (String, String);

fn local_queue_of(workload: &QueuedWorkload) -> LocalQueueRef {
    (
        workload.info.workload.namespace.clone(),
        workload.local_queue.clone(),
    )
}

/// The active Workloads by key, and per LocalQueue their order keys.
#[derive(Debug, Clone, Default)]
pub(super) struct ActiveWorkloads {
    // Boxed: a B-tree node shifts its values on every insert and removal, and a
    // QueuedWorkload is large.
    by_key: BTreeMap<WorkloadKey, Box<QueuedWorkload>>,
    /// Which timestamp the order keys were built with.
    timestamp: RequeuingTimestamp,
    by_local_queue: BTreeMap<LocalQueueRef, BTreeSet<OrderKey>>,
}

impl ActiveWorkloads {
    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &QueuedWorkload> {
        self.by_key.values().map(Box::as_ref)
    }

    /// Adds a Workload, or replaces the one with its key.
    pub(super) fn insert(&mut self, key: WorkloadKey, workload: Box<QueuedWorkload>) {
        if let Some(old) = self.by_key.remove(&key) {
            self.unindex(&old);
        }
        self.index(&workload);
        self.by_key.insert(key, workload);
    }

    pub(super) fn remove(&mut self, key: &str) -> Option<Box<QueuedWorkload>> {
        let workload = self.by_key.remove(key)?;
        self.unindex(&workload);
        Some(workload)
    }

    /// Removes and answers the first Workload in `ordering`, `sticky` (the preemptor the
    /// ClusterQueue keeps at its head) first among equals of fair-sharing usage.
    pub(super) fn pop(
        &mut self,
        ordering: &QueueOrdering,
        sticky: Option<&str>,
    ) -> Option<QueuedWorkload> {
        if self.timestamp != ordering.timestamp {
            self.reindex(ordering.timestamp);
        }
        let sticky_workload = sticky.and_then(|key| self.by_key.get(key));
        let head = self
            .by_local_queue
            .iter()
            .filter_map(|(local_queue, order)| {
                let sticky_here = sticky_workload.filter(|s| local_queue_of(s) == *local_queue);
                match sticky_here {
                    Some(workload) => Some(workload.as_ref()),
                    None => self
                        .by_key
                        .get(&order.first()?.workload_key())
                        .map(Box::as_ref),
                }
            })
            .min_by(|a, b| ordering.compare(a, b, sticky))?
            .key();
        self.remove(&head).map(|workload| *workload)
    }

    fn index(&mut self, workload: &QueuedWorkload) {
        self.by_local_queue
            .entry(local_queue_of(workload))
            .or_default()
            .insert(OrderKey::of(workload, self.timestamp));
    }

    fn unindex(&mut self, workload: &QueuedWorkload) {
        let local_queue = local_queue_of(workload);
        if let Some(order) = self.by_local_queue.get_mut(&local_queue) {
            order.remove(&OrderKey::of(workload, self.timestamp));
            if order.is_empty() {
                self.by_local_queue.remove(&local_queue);
            }
        }
    }

    fn reindex(&mut self, timestamp: RequeuingTimestamp) {
        self.timestamp = timestamp;
        self.by_local_queue.clear();
        let workloads: Vec<Box<QueuedWorkload>> =
            std::mem::take(&mut self.by_key).into_values().collect();
        for workload in workloads {
            self.insert(workload.key(), workload);
        }
    }
}
