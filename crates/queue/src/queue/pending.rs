//! A ClusterQueue's pending Workloads: the active heap it may pop and the inadmissible set,
//! by key, with an order index per LocalQueue so that a pop costs the number of LocalQueues,
//! not of Workloads.
//!
//! Within one LocalQueue the queue order (`QueueOrdering::compare`) only depends on the
//! Workloads themselves — admission fair sharing weighs whole LocalQueues and the sticky
//! preemptor is one known key — so each LocalQueue keeps its Workloads sorted by priority,
//! queue timestamp and tie-break, and a pop compares the LocalQueues' heads with the full
//! order. Knows nothing of why Workloads enter or leave: `ClusterQueueQueue` decides.

use std::borrow::Borrow;
use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use super::equivalence::ShapeClasses;
use super::{QueueOrdering, QueuedWorkload, RequeuingTimestamp, Source, WorkloadKey};

/// The part of the queue order that depends on the Workload alone: priority (higher
/// first), queue timestamp, then the tie-break (UID, namespace, name). The UID's first
/// bytes come first as a number ([`uid_prefix`]), which orders as the string does, so most
/// comparisons of Workloads created in the same second end without comparing strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OrderKey {
    priority: Reverse<i32>,
    timestamp: SystemTime,
    uid_prefix: u64,
    /// Shared with the pending Workload: indexing it again copies no string.
    names: Arc<OrderNames>,
}

/// The tie-break strings of the queue order, in its order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OrderNames {
    uid: String,
    namespace: String,
    name: String,
}

impl OrderNames {
    fn of(workload: &QueuedWorkload) -> Arc<OrderNames> {
        Arc::new(OrderNames {
            uid: workload.uid.clone(),
            namespace: workload.info.workload.namespace.clone(),
            name: workload.info.workload.name.clone(),
        })
    }
}

impl OrderKey {
    fn of(
        workload: &QueuedWorkload,
        names: &Arc<OrderNames>,
        timestamp: RequeuingTimestamp,
    ) -> OrderKey {
        let order = BorrowedOrder::of(workload, timestamp);
        OrderKey {
            priority: order.priority,
            timestamp: order.timestamp,
            uid_prefix: order.uid_prefix,
            names: Arc::clone(names),
        }
    }

    /// The Workload's `namespace/name` key, written into `buffer` (a pop looks up every
    /// LocalQueue's head; the buffer saves an allocation each).
    fn workload_key<'b>(&self, buffer: &'b mut String) -> &'b str {
        buffer.clear();
        buffer.push_str(&self.names.namespace);
        buffer.push('/');
        buffer.push_str(&self.names.name);
        buffer
    }
}

/// An order key's parts, borrowed: what an [`OrderKey`] is looked up by without copying the
/// Workload's strings (a parked Workload leaves its LocalQueue's order on every park).
struct BorrowedOrder<'a> {
    priority: Reverse<i32>,
    timestamp: SystemTime,
    uid_prefix: u64,
    uid: &'a str,
    namespace: &'a str,
    name: &'a str,
}

impl BorrowedOrder<'_> {
    fn of(workload: &QueuedWorkload, timestamp: RequeuingTimestamp) -> BorrowedOrder<'_> {
        BorrowedOrder {
            priority: Reverse(workload.info.workload.priority),
            timestamp: workload.queue_order_timestamp(timestamp),
            uid_prefix: uid_prefix(&workload.uid),
            uid: &workload.uid,
            namespace: &workload.info.workload.namespace,
            name: &workload.info.workload.name,
        }
    }
}

/// A string's first eight bytes as a big-endian number, zeros past its end: if two strings'
/// prefixes differ, they order as the strings do (a string that ends first pads with the
/// lowest byte, and it orders first as a prefix of the other).
fn uid_prefix(uid: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let head = &uid.as_bytes()[..uid.len().min(8)];
    bytes[..head.len()].copy_from_slice(head);
    u64::from_be_bytes(bytes)
}

/// An order key's parts in [`OrderKey`]'s field order.
type Parts<'a> = (Reverse<i32>, SystemTime, u64, &'a str, &'a str, &'a str);

/// The order of owned and borrowed keys alike.
trait OrderView {
    fn parts(&self) -> Parts<'_>;
}

impl OrderView for OrderKey {
    fn parts(&self) -> Parts<'_> {
        (
            self.priority,
            self.timestamp,
            self.uid_prefix,
            &self.names.uid,
            &self.names.namespace,
            &self.names.name,
        )
    }
}

impl OrderView for BorrowedOrder<'_> {
    fn parts(&self) -> Parts<'_> {
        (
            self.priority,
            self.timestamp,
            self.uid_prefix,
            self.uid,
            self.namespace,
            self.name,
        )
    }
}

impl<'a> Borrow<dyn OrderView + 'a> for OrderKey {
    fn borrow(&self) -> &(dyn OrderView + 'a) {
        self
    }
}

impl PartialEq for dyn OrderView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn OrderView + '_ {}

impl PartialOrd for dyn OrderView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn OrderView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

/// Per namespace, per LocalQueue name: its Workloads' order keys.
type ByLocalQueue = BTreeMap<String, BTreeMap<String, BTreeSet<OrderKey>>>;

/// One pending Workload: active (in the heap) or inadmissible, and whether its order key is
/// in its LocalQueue's order.
#[derive(Debug, Clone)]
struct Pending {
    // Boxed: a B-tree node shifts its values on every insert and removal, and a
    // QueuedWorkload is large.
    workload: Box<QueuedWorkload>,
    /// The number of the Workload's scheduling shape in the queue's [`ShapeClasses`].
    shape: usize,
    /// What the Workload was copied from, while it is held as it was copied.
    source: Option<Source>,
    /// Its order key's strings, made once.
    names: Arc<OrderNames>,
    inadmissible: bool,
    indexed: bool,
}

/// A ClusterQueue's pending Workloads by key, active and inadmissible, and per LocalQueue
/// the order keys of the active ones. Parking a Workload only marks it: its order key stays
/// until a pop meets it at its LocalQueue's head and drops it, so a Workload parked and
/// requeued again before that (SchedulingEquivalenceHashing parks a whole shape, every
/// release of quota requeues it) costs one look-up each way.
#[derive(Debug, Clone, Default)]
pub(super) struct PendingWorkloads {
    by_key: BTreeMap<WorkloadKey, Pending>,
    /// Which timestamp the order keys were built with.
    timestamp: RequeuingTimestamp,
    /// Holds the order key of every active Workload, and of inadmissible ones not yet
    /// dropped (those with `indexed`).
    by_local_queue: ByLocalQueue,
    /// The scheduling shapes of the Workloads held.
    shapes: ShapeClasses,
}

impl PendingWorkloads {
    pub(super) fn is_active(&self, key: &str) -> bool {
        self.by_key.get(key).is_some_and(|p| !p.inadmissible)
    }

    pub(super) fn is_inadmissible(&self, key: &str) -> bool {
        self.by_key.get(key).is_some_and(|p| p.inadmissible)
    }

    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// The Workload with `key`, active or inadmissible.
    pub(super) fn get(&self, key: &str) -> Option<&QueuedWorkload> {
        self.by_key.get(key).map(|p| p.workload.as_ref())
    }

    /// Whether the Workload with `key` is held as it was copied from `source`.
    pub(super) fn copied_from(&self, key: &str, source: &Source) -> bool {
        self.by_key
            .get(key)
            .and_then(|p| p.source.as_ref())
            .is_some_and(|held| Arc::ptr_eq(held, source))
    }

    /// Records that the Workload with `key`, as held now, is a copy of `source`.
    pub(super) fn set_source(&mut self, key: &str, source: &Source) {
        if let Some(pending) = self.by_key.get_mut(key) {
            pending.source = Some(Arc::clone(source));
        }
    }

    /// How many Workloads are pending, active and inadmissible.
    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The keys of every pending Workload, active and inadmissible, in key order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &WorkloadKey> {
        self.by_key.keys()
    }

    /// The inadmissible Workload with `key`.
    pub(super) fn inadmissible(&self, key: &str) -> Option<&QueuedWorkload> {
        self.by_key
            .get(key)
            .filter(|p| p.inadmissible)
            .map(|p| p.workload.as_ref())
    }

    pub(super) fn active_values(&self) -> impl Iterator<Item = &QueuedWorkload> {
        self.by_key
            .values()
            .filter(|p| !p.inadmissible)
            .map(|p| p.workload.as_ref())
    }

    /// The inadmissible Workloads by key, in key order.
    pub(super) fn inadmissible_entries(
        &self,
    ) -> impl Iterator<Item = (&WorkloadKey, &QueuedWorkload)> {
        self.by_key
            .iter()
            .filter(|(_, p)| p.inadmissible)
            .map(|(key, p)| (key, p.workload.as_ref()))
    }

    /// Adds a Workload, or replaces the one with its key, as active or inadmissible.
    pub(super) fn insert(
        &mut self,
        key: WorkloadKey,
        workload: Box<QueuedWorkload>,
        inadmissible: bool,
    ) {
        self.remove(&key);
        let indexed = !inadmissible;
        let names = OrderNames::of(&workload);
        if indexed {
            index(&mut self.by_local_queue, &workload, &names, self.timestamp);
        }
        self.by_key.insert(
            key,
            Pending {
                shape: self.shapes.join(&workload),
                source: None,
                names,
                workload,
                inadmissible,
                indexed,
            },
        );
    }

    /// Removes a Workload, active or inadmissible.
    pub(super) fn remove(&mut self, key: &str) -> Option<Box<QueuedWorkload>> {
        let pending = self.by_key.remove(key)?;
        self.shapes.leave(pending.shape);
        if pending.indexed {
            unindex(&mut self.by_local_queue, &pending.workload, self.timestamp);
        }
        Some(pending.workload)
    }

    /// Marks an active Workload inadmissible; false if there is no active one with `key`.
    pub(super) fn park(&mut self, key: &str) -> bool {
        match self.by_key.get_mut(key) {
            Some(pending) if !pending.inadmissible => {
                pending.inadmissible = true;
                true
            }
            _ => false,
        }
    }

    /// Marks inadmissible every active Workload of `representative`'s scheduling shape that
    /// `parks` accepts.
    pub(super) fn park_equivalents(
        &mut self,
        representative: &QueuedWorkload,
        mut parks: impl FnMut(&QueuedWorkload) -> bool,
    ) {
        let Some(shape) = self.shapes.find(representative) else {
            return;
        };
        for pending in self.by_key.values_mut() {
            if !pending.inadmissible && pending.shape == shape && parks(&pending.workload) {
                pending.inadmissible = true;
            }
        }
    }

    /// Makes the inadmissible Workload with `key` active again.
    pub(super) fn activate_one(&mut self, key: &str) {
        if let Some(pending) = self.by_key.get_mut(key) {
            activated(pending, &mut self.by_local_queue, self.timestamp);
        }
    }

    /// Makes every inadmissible Workload `ready` accepts active again; answers how many.
    pub(super) fn activate(&mut self, mut ready: impl FnMut(&QueuedWorkload) -> bool) -> usize {
        let mut moved = 0;
        for pending in self.by_key.values_mut() {
            if !pending.inadmissible || !ready(&pending.workload) {
                continue;
            }
            activated(pending, &mut self.by_local_queue, self.timestamp);
            moved += 1;
        }
        moved
    }

    /// Removes and answers the first active Workload in `ordering`, `sticky` (the preemptor
    /// the ClusterQueue keeps at its head) first among equals of fair-sharing usage.
    pub(super) fn pop(
        &mut self,
        ordering: &QueueOrdering,
        sticky: Option<&str>,
    ) -> Option<QueuedWorkload> {
        if self.timestamp != ordering.timestamp {
            self.reindex(ordering.timestamp);
        }
        self.drop_parked_heads();
        let sticky_workload = sticky
            .and_then(|key| self.by_key.get(key))
            .filter(|p| !p.inadmissible)
            .map(|p| p.workload.as_ref());
        let mut buffer = String::new();
        let head = self
            .by_local_queue
            .iter()
            .flat_map(|(namespace, local_queues)| {
                local_queues
                    .iter()
                    .map(move |(local_queue, order)| (namespace, local_queue, order))
            })
            .filter_map(|(namespace, local_queue, order)| {
                let sticky_here = sticky_workload.filter(|s| {
                    s.info.workload.namespace == *namespace && s.local_queue == *local_queue
                });
                match sticky_here {
                    Some(workload) => Some(workload),
                    None => self
                        .by_key
                        .get(order.first()?.workload_key(&mut buffer))
                        .map(|p| p.workload.as_ref()),
                }
            })
            .min_by(|a, b| ordering.compare(a, b, sticky))?
            .key();
        self.remove(&head).map(|workload| *workload)
    }

    /// Drops from each LocalQueue's order the keys of parked Workloads at its head, until an
    /// active one heads it (or none is left).
    fn drop_parked_heads(&mut self) {
        let by_key = &mut self.by_key;
        let mut buffer = String::new();
        self.by_local_queue.retain(|_, local_queues| {
            local_queues.retain(|_, order| {
                while let Some(first) = order.first() {
                    match by_key.get_mut(first.workload_key(&mut buffer)) {
                        Some(pending) if pending.inadmissible => {
                            pending.indexed = false;
                            order.pop_first();
                        }
                        _ => break,
                    }
                }
                !order.is_empty()
            });
            !local_queues.is_empty()
        });
    }

    fn reindex(&mut self, timestamp: RequeuingTimestamp) {
        self.timestamp = timestamp;
        self.by_local_queue.clear();
        for pending in self.by_key.values_mut() {
            pending.indexed = !pending.inadmissible;
            if pending.indexed {
                index(
                    &mut self.by_local_queue,
                    &pending.workload,
                    &pending.names,
                    timestamp,
                );
            }
        }
    }
}

/// Marks `pending` active, its order key indexed again unless it still is.
fn activated(
    pending: &mut Pending,
    by_local_queue: &mut ByLocalQueue,
    timestamp: RequeuingTimestamp,
) {
    pending.inadmissible = false;
    if !pending.indexed {
        pending.indexed = true;
        index(by_local_queue, &pending.workload, &pending.names, timestamp);
    }
}

fn index(
    by_local_queue: &mut ByLocalQueue,
    workload: &QueuedWorkload,
    names: &Arc<OrderNames>,
    timestamp: RequeuingTimestamp,
) {
    let namespace = &workload.info.workload.namespace;
    let local_queues = match by_local_queue.get_mut(namespace) {
        Some(local_queues) => local_queues,
        None => by_local_queue.entry(namespace.clone()).or_default(),
    };
    let order = match local_queues.get_mut(&workload.local_queue) {
        Some(order) => order,
        None => local_queues
            .entry(workload.local_queue.clone())
            .or_default(),
    };
    order.insert(OrderKey::of(workload, names, timestamp));
}

fn unindex(
    by_local_queue: &mut ByLocalQueue,
    workload: &QueuedWorkload,
    timestamp: RequeuingTimestamp,
) {
    let namespace = workload.info.workload.namespace.as_str();
    let Some(local_queues) = by_local_queue.get_mut(namespace) else {
        return;
    };
    let Some(order) = local_queues.get_mut(workload.local_queue.as_str()) else {
        return;
    };
    let key = BorrowedOrder::of(workload, timestamp);
    order.remove(&key as &dyn OrderView);
    if order.is_empty() {
        local_queues.remove(workload.local_queue.as_str());
        if local_queues.is_empty() {
            by_local_queue.remove(namespace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uid_prefixes_order_as_the_strings_do() {
        let table = [
            ("", "a"),
            ("a", "ab"),
            ("ab", "ab\u{0}"),
            ("abcdefgh", "abcdefghi"),
            ("abcdefgh1", "abcdefgh2"),
            ("0f3c", "0f3d"),
            ("zz", "é"),
        ];
        for (lower, higher) in table {
            assert!(lower < higher, "{lower:?} < {higher:?}");
            assert!(
                uid_prefix(lower) <= uid_prefix(higher),
                "{lower:?} {higher:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn a_differing_prefix_decides_as_the_strings_do(a in ".{0,12}", b in ".{0,12}") {
            match uid_prefix(&a).cmp(&uid_prefix(&b)) {
                Ordering::Equal => {}
                decided => prop_assert_eq!(decided, a.cmp(&b)),
            }
        }
    }
}
