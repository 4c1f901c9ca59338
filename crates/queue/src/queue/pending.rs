//! A ClusterQueue's pending Workloads: the active heap it may pop and the inadmissible set,
//! by key, with an order index per LocalQueue and scheduling shape so that a pop costs the
//! number of those orders, not of Workloads, and parking or retrying a whole shape moves no
//! order key.
//!
//! Within one LocalQueue the queue order (`QueueOrdering::compare`) only depends on the
//! Workloads themselves — admission fair sharing weighs whole LocalQueues and the sticky
//! preemptor is one known key — so each LocalQueue keeps its Workloads of each shape sorted
//! by priority, queue timestamp and tie-break; a pop takes a LocalQueue's head as the first
//! of its shapes' heads in that order, and compares the LocalQueues' heads with the full
//! order. Knows nothing of why Workloads enter or leave: `ClusterQueueQueue` decides.

use std::borrow::Borrow;
use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use slab::Slab;
use tessera_model::address::{AddressMap, address_of};

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
}

/// An order key's parts, borrowed: what an [`OrderKey`] is looked up by without copying the
/// Workload's strings (a Workload leaves its order when it is popped, removed or replaced).
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

/// Per namespace, per LocalQueue name, per scheduling shape: the number of the order of
/// those Workloads in [`PendingWorkloads::orders`].
type ByLocalQueue = BTreeMap<String, BTreeMap<String, BTreeMap<usize, usize>>>;

/// The order keys of one LocalQueue's Workloads of one shape, each with its Workload's slot.
#[derive(Debug, Clone, Default)]
struct Order {
    keys: BTreeMap<OrderKey, usize>,
    /// How many of those Workloads are active (the rest are parked).
    active: usize,
}

/// One pending Workload: active (in the heap) or inadmissible, and the order its order key
/// is in, if it is in one.
#[derive(Debug, Clone)]
struct Pending {
    // Boxed: a slot scan (a retry of the inadmissible set) reads the flags of every slot.
    workload: Box<QueuedWorkload>,
    /// The number of the Workload's scheduling shape in the queue's [`ShapeClasses`].
    shape: usize,
    /// What the Workload was copied from, while it is held as it was copied.
    source: Option<Source>,
    /// Its order key's strings, made once.
    names: Arc<OrderNames>,
    inadmissible: bool,
    /// The number of the order holding its order key: always one while it is active.
    order: Option<usize>,
}

/// A ClusterQueue's pending Workloads by key, active and inadmissible, and per LocalQueue and
/// scheduling shape the order keys of the active ones.
///
/// Parking a Workload only marks it, and an order counts its active Workloads: an order
/// whose Workloads are all parked (SchedulingEquivalenceHashing parks a whole shape) keeps
/// its keys and is passed over by pops, and a retry of the inadmissible set (every release
/// of quota) marks them active again, so a shape parked and retried costs a flag and a
/// count per Workload, no order key. A pop drops only the parked keys heading an order that
/// still has active Workloads (Workloads parked one by one), which a retry indexes again.
#[derive(Debug, Clone, Default)]
pub(super) struct PendingWorkloads {
    /// Each pending Workload's slot, by key.
    by_key: BTreeMap<WorkloadKey, usize>,
    slots: Slab<Pending>,
    /// Which timestamp the order keys were built with.
    timestamp: RequeuingTimestamp,
    by_local_queue: ByLocalQueue,
    /// The slot of each Workload held as a copy of a source, by the source's address (the
    /// slot holds the source, so no other can take its address).
    by_source: AddressMap<usize>,
    /// Holds the order key of every active Workload, and of parked ones not yet dropped
    /// (those whose `order` is set).
    orders: Slab<Order>,
    /// The scheduling shapes of the Workloads held.
    shapes: ShapeClasses,
}

impl PendingWorkloads {
    fn pending(&self, key: &str) -> Option<&Pending> {
        self.by_key.get(key).map(|slot| &self.slots[*slot])
    }

    pub(super) fn is_active(&self, key: &str) -> bool {
        self.pending(key).is_some_and(|p| !p.inadmissible)
    }

    pub(super) fn is_inadmissible(&self, key: &str) -> bool {
        self.pending(key).is_some_and(|p| p.inadmissible)
    }

    pub(super) fn contains_key(&self, key: &str) -> bool {
        self.by_key.contains_key(key)
    }

    /// The Workload with `key`, active or inadmissible.
    pub(super) fn get(&self, key: &str) -> Option<&QueuedWorkload> {
        self.pending(key).map(|p| p.workload.as_ref())
    }

    /// Whether a Workload is held as it was copied from `source` (a source is one
    /// Workload's: found by its address, no key compared).
    pub(super) fn holds_copy_of(&self, source: &Source) -> bool {
        self.holds_copy_at(address_of(source))
    }

    /// [`Self::holds_copy_of`] the source at `address`, the source itself untouched. Only
    /// `set_source` enters an address, after forgetting the slot's source before, and a slot
    /// forgets its source before it is freed: an address entered is the source its slot
    /// holds, which no other source can share while it is held (the slot is not read).
    pub(super) fn holds_copy_at(&self, address: usize) -> bool {
        self.by_source.contains_key(&address)
    }

    /// Records that the Workload with `key`, as held now, is a copy of `source`.
    pub(super) fn set_source(&mut self, key: &str, source: &Source) {
        let Some(slot) = self.by_key.get(key).copied() else {
            return;
        };
        self.forget_source(slot);
        self.slots[slot].source = Some(Arc::clone(source));
        self.by_source.insert(address_of(source), slot);
    }

    /// Forgets what the Workload in `slot` was copied from.
    fn forget_source(&mut self, slot: usize) {
        if let Some(source) = self.slots[slot].source.take() {
            let address = address_of(&source);
            if self.by_source.get(&address) == Some(&slot) {
                self.by_source.remove(&address);
            }
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

    /// The pending Workloads with their keys, in key order.
    fn entries(&self) -> impl Iterator<Item = (&WorkloadKey, &Pending)> {
        self.by_key
            .iter()
            .map(|(key, slot)| (key, &self.slots[*slot]))
    }

    /// The inadmissible Workload with `key`.
    pub(super) fn inadmissible(&self, key: &str) -> Option<&QueuedWorkload> {
        self.pending(key)
            .filter(|p| p.inadmissible)
            .map(|p| p.workload.as_ref())
    }

    pub(super) fn active_values(&self) -> impl Iterator<Item = &QueuedWorkload> {
        self.entries()
            .filter(|(_, p)| !p.inadmissible)
            .map(|(_, p)| p.workload.as_ref())
    }

    /// The inadmissible Workloads by key, in key order.
    pub(super) fn inadmissible_entries(
        &self,
    ) -> impl Iterator<Item = (&WorkloadKey, &QueuedWorkload)> {
        self.entries()
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
        let slot = self.slots.insert(Pending {
            shape: self.shapes.join(&workload),
            source: None,
            names: OrderNames::of(&workload),
            workload,
            inadmissible,
            order: None,
        });
        if !inadmissible {
            self.index(slot);
        }
        self.by_key.insert(key, slot);
    }

    /// Removes a Workload, active or inadmissible.
    pub(super) fn remove(&mut self, key: &str) -> Option<Box<QueuedWorkload>> {
        let slot = self.by_key.remove(key)?;
        self.forget_source(slot);
        self.unindex(slot);
        let pending = self.slots.remove(slot);
        self.shapes.leave(pending.shape);
        Some(pending.workload)
    }

    /// Marks an active Workload inadmissible; false if there is no active one with `key`.
    pub(super) fn park(&mut self, key: &str) -> bool {
        let Some(slot) = self.by_key.get(key) else {
            return false;
        };
        let pending = &mut self.slots[*slot];
        if pending.inadmissible {
            return false;
        }
        pending.inadmissible = true;
        if let Some(order) = pending.order {
            self.orders[order].active -= 1;
        }
        true
    }

    /// Marks inadmissible every active Workload of `representative`'s scheduling shape but
    /// the one with key `exempt`.
    pub(super) fn park_equivalents(
        &mut self,
        representative: &QueuedWorkload,
        exempt: Option<&str>,
    ) {
        let Some(shape) = self.shapes.find(representative) else {
            return;
        };
        let exempt = exempt.and_then(|key| self.by_key.get(key)).copied();
        // Every active Workload is in an order: those of the shape are in its orders.
        let of_shape = self
            .by_local_queue
            .values()
            .flat_map(BTreeMap::values)
            .filter_map(|shapes| shapes.get(&shape));
        for order in of_shape {
            let order = &mut self.orders[*order];
            if order.active == 0 {
                continue;
            }
            for slot in order.keys.values() {
                let pending = &mut self.slots[*slot];
                if !pending.inadmissible && exempt != Some(*slot) {
                    pending.inadmissible = true;
                    order.active -= 1;
                }
            }
        }
    }

    /// Makes the inadmissible Workload with `key` active again.
    pub(super) fn activate_one(&mut self, key: &str) {
        if let Some(slot) = self.by_key.get(key).copied() {
            self.activated(slot);
        }
    }

    /// Makes every inadmissible Workload `ready` accepts active again; answers how many.
    pub(super) fn activate(&mut self, mut ready: impl FnMut(&QueuedWorkload) -> bool) -> usize {
        let moving: Vec<usize> = self
            .slots
            .iter()
            .filter(|(_, pending)| pending.inadmissible && ready(&pending.workload))
            .map(|(slot, _)| slot)
            .collect();
        for slot in &moving {
            self.activated(*slot);
        }
        moving.len()
    }

    /// Marks the Workload in `slot` active, its order key indexed again unless it still is.
    fn activated(&mut self, slot: usize) {
        let pending = &mut self.slots[slot];
        if !pending.inadmissible {
            return;
        }
        pending.inadmissible = false;
        match pending.order {
            Some(order) => self.orders[order].active += 1,
            None => self.index(slot),
        }
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
            .and_then(|key| self.pending(key))
            .filter(|p| !p.inadmissible)
            .map(|p| p.workload.as_ref());
        let head = self
            .by_local_queue
            .iter()
            .flat_map(|(namespace, local_queues)| {
                local_queues
                    .iter()
                    .map(move |(local_queue, shapes)| (namespace, local_queue, shapes))
            })
            .filter_map(|(namespace, local_queue, shapes)| {
                let sticky_here = sticky_workload.filter(|s| {
                    s.info.workload.namespace == *namespace && s.local_queue == *local_queue
                });
                match sticky_here {
                    Some(workload) => Some(workload),
                    // An order with active Workloads is headed by one (parked heads dropped).
                    None => shapes
                        .values()
                        .map(|order| &self.orders[*order])
                        .filter(|order| order.active > 0)
                        .filter_map(|order| order.keys.first_key_value())
                        .min_by(|(a, _), (b, _)| a.cmp(b))
                        .map(|(_, slot)| self.slots[*slot].workload.as_ref()),
                }
            })
            .min_by(|a, b| ordering.compare(a, b, sticky))?
            .key();
        self.remove(&head).map(|workload| *workload)
    }

    /// Drops from each order with active Workloads the keys of parked ones at its head, until
    /// an active one heads it.
    fn drop_parked_heads(&mut self) {
        for (_, order) in self.orders.iter_mut().filter(|(_, o)| o.active > 0) {
            while let Some((_, slot)) = order.keys.first_key_value() {
                let pending = &mut self.slots[*slot];
                if !pending.inadmissible {
                    break;
                }
                pending.order = None;
                order.keys.pop_first();
            }
        }
    }

    fn reindex(&mut self, timestamp: RequeuingTimestamp) {
        self.timestamp = timestamp;
        self.by_local_queue.clear();
        self.orders.clear();
        let mut active = Vec::new();
        for (slot, pending) in self.slots.iter_mut() {
            pending.order = None;
            if !pending.inadmissible {
                active.push(slot);
            }
        }
        for slot in active {
            self.index(slot);
        }
    }

    /// Puts the order key of the Workload in `slot` in its LocalQueue's order of its shape.
    fn index(&mut self, slot: usize) {
        let pending = &self.slots[slot];
        let workload = &pending.workload;
        let namespace = &workload.info.workload.namespace;
        let local_queues = match self.by_local_queue.get_mut(namespace) {
            Some(local_queues) => local_queues,
            None => self.by_local_queue.entry(namespace.clone()).or_default(),
        };
        let shapes = match local_queues.get_mut(&workload.local_queue) {
            Some(shapes) => shapes,
            None => local_queues
                .entry(workload.local_queue.clone())
                .or_default(),
        };
        let orders = &mut self.orders;
        let number = *shapes
            .entry(pending.shape)
            .or_insert_with(|| orders.insert(Order::default()));
        let order = &mut orders[number];
        order
            .keys
            .insert(OrderKey::of(workload, &pending.names, self.timestamp), slot);
        if !pending.inadmissible {
            order.active += 1;
        }
        self.slots[slot].order = Some(number);
    }

    /// Takes the order key of the Workload in `slot` out of its order, if it is in one; an
    /// order left empty goes.
    fn unindex(&mut self, slot: usize) {
        let pending = &mut self.slots[slot];
        let Some(number) = pending.order.take() else {
            return;
        };
        let workload = &pending.workload;
        let order = &mut self.orders[number];
        let key = BorrowedOrder::of(workload, self.timestamp);
        order.keys.remove(&key as &dyn OrderView);
        if !pending.inadmissible {
            order.active -= 1;
        }
        if !order.keys.is_empty() {
            return;
        }
        self.orders.remove(number);
        let namespace = workload.info.workload.namespace.as_str();
        let Some(local_queues) = self.by_local_queue.get_mut(namespace) else {
            return;
        };
        let Some(shapes) = local_queues.get_mut(workload.local_queue.as_str()) else {
            return;
        };
        shapes.remove(&pending.shape);
        if shapes.is_empty() {
            local_queues.remove(workload.local_queue.as_str());
            if local_queues.is_empty() {
                self.by_local_queue.remove(namespace);
            }
        }
    }
}

#[cfg(test)]
#[path = "pending_tests.rs"]
mod tests;
