//! Kueue's pending-workload queues (`pkg/cache/queue/cluster_queue.go`, `manager.go`,
//! `inadmissible_workloads.go`, the queue checks of the workload controller): one queue per
//! ClusterQueue with an active heap ordered by sticky preemptor, effective priority, queue
//! timestamp (creation, or eviction as `requeuingStrategy.timestamp` says) and UID, and the
//! inadmissible set that BestEffortFIFO parks workloads in until an event requeues them;
//! requeue backoff (`requeueState.requeueAt`); LocalQueues pointing at ClusterQueues with
//! their stop policies; `heads`, one pop per active ClusterQueue. Beyond Kueue: a queue may
//! give `heads_per_cycle` heads per cycle, one per round (`heads_in_round`), and every order
//! ends in UID then `namespace/name`, a total order.
//!
//! Knows nothing about quota or flavors: the scheduling cycle (`cycle`) decides and hands back
//! requeue reasons. Admission fair sharing only enters through the per-LocalQueue usage the
//! caller supplies (`afs`). A stopped queue only stops admissions here; HoldAndDrain's
//! eviction of admitted workloads belongs to the workload controller. Kueue's
//! SchedulingEquivalenceHashing (on by default, as in Kueue; [`equivalence`]): a BestEffortFIFO
//! head requeued inadmissible for NoFit or PreemptionNoCandidates moves the active Workloads of
//! its shape to the inadmissible set, and Workloads of that shape added before the next retry
//! go there at once. Second-pass queues, metrics and concurrent admission are not modelled.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::joined_key::with_joined;
use crate::user_limits::UserLimits;
use crate::workload::WorkloadInfo;

mod equivalence;
mod pending;

use equivalence::SchedulingShape;
use pending::PendingWorkloads;

/// `namespace/name` of a Workload (`workload.Reference`).
pub type WorkloadKey = String;

/// What a Workload offered to a queue was read from (the caller's parsed object; one
/// Workload's, never offered for another). While a queue holds the copy it made of that very
/// source, offering the Workload again compares nothing
/// ([`ClusterQueueQueue::push_or_update_from`]); the queue holds the source, so its address
/// names nothing else meanwhile.
pub type Source = std::sync::Arc<dyn std::any::Any + Send + Sync>;

/// `spec.queueingStrategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueingStrategy {
    /// The head blocks the queue until it is admitted.
    StrictFifo,
    /// An inadmissible head steps aside (the default).
    #[default]
    BestEffortFifo,
}

/// `waitForPodsReady.requeuingStrategy.timestamp`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequeuingTimestamp {
    /// Order by the eviction time after a PodsReady timeout (the default).
    #[default]
    Eviction,
    /// Always order by creation time.
    Creation,
}

/// `spec.stopPolicy` of a ClusterQueue or LocalQueue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StopPolicy {
    /// Running.
    #[default]
    None,
    /// No new admissions.
    Hold,
    /// No new admissions, and admitted workloads are evicted.
    HoldAndDrain,
}

/// Why a Workload was last evicted, as far as queue order cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvictionCause {
    /// `PodsReadyTimeout`.
    PodsReadyTimeout,
    /// `AdmissionCheck`.
    AdmissionCheck,
    /// Anything else (preemption, stopped queues ...).
    Other,
}

/// A pending Workload in a queue.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuedWorkload {
    /// Requests, priority and the last flavor assignment state.
    pub info: WorkloadInfo,
    /// `metadata.uid`, the last tie breaker.
    pub uid: String,
    /// The `kueue.x-k8s.io/job-uid` label, if any (named in preemption messages).
    pub job_uid: Option<String>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `spec.queueName`.
    pub local_queue: String,
    /// Beyond Kueue: the user its LocalQueue's per-user limits count it against (the creating
    /// user, or the value of the label the limits key by; the caller resolves which); `None`
    /// is never limited.
    pub user: Option<String>,
    /// `metadata.creationTimestamp`.
    pub creation: SystemTime,
    /// The `Evicted` condition's cause and transition time, if evicted.
    pub eviction: Option<(EvictionCause, SystemTime)>,
    /// `status.requeueState.requeueAt`.
    pub requeue_at: Option<SystemTime>,
    /// Whether the `Requeued` condition is False (waiting for backoff or a reactivation).
    pub requeue_held: bool,
    /// The ClusterQueue generation `info.last_assignment` was computed at.
    pub last_assignment_generation: i64,
}

impl QueuedWorkload {
    /// The `namespace/name` key.
    pub fn key(&self) -> WorkloadKey {
        format!(
            "{}/{}",
            self.info.workload.namespace, self.info.workload.name
        )
    }

    /// Whether `key` is this Workload's `namespace/name` key, without building it.
    pub fn has_key(&self, key: &str) -> bool {
        let workload = &self.info.workload;
        key.split_once('/').is_some_and(|(namespace, name)| {
            namespace == workload.namespace && name == workload.name
        })
    }

    /// `namespace/localQueue`.
    pub fn local_queue_key(&self) -> String {
        format!("{}/{}", self.info.workload.namespace, self.local_queue)
    }

    /// Calls `with` with the `namespace/name` key, not allocated.
    pub fn with_key<R>(&self, with: impl FnOnce(&str) -> R) -> R {
        let workload = &self.info.workload;
        with_joined(&workload.namespace, &workload.name, with)
    }

    /// Calls `with` with the `namespace/localQueue` key, not allocated.
    pub fn with_local_queue_key<R>(&self, with: impl FnOnce(&str) -> R) -> R {
        let (namespace, local_queue) = self.local_queue_parts();
        with_joined(namespace, local_queue, with)
    }

    /// Its LocalQueue as (namespace, name).
    pub fn local_queue_parts(&self) -> (&str, &str) {
        (&self.info.workload.namespace, &self.local_queue)
    }

    /// The time FIFO order uses (`Ordering.GetQueueOrderTimestamp`; PrioritySortingWithinCohort
    /// on, so the preempted-while-borrowing epsilon does not apply).
    pub fn queue_order_timestamp(&self, timestamp: RequeuingTimestamp) -> SystemTime {
        match self.eviction {
            Some((EvictionCause::PodsReadyTimeout, at))
                if timestamp == RequeuingTimestamp::Eviction =>
            {
                at
            }
            Some((EvictionCause::AdmissionCheck, at)) => at,
            _ => self.creation,
        }
    }

    /// The last tie-break of every order the queues and the cycle choose by: UID, then
    /// `namespace/name`, so that equal priorities, timestamps and shares never leave the order
    /// to the input's arrangement.
    pub fn tie_break(&self, other: &QueuedWorkload) -> Ordering {
        self.uid.cmp(&other.uid).then_with(|| {
            let (a, b) = (&self.info.workload, &other.info.workload);
            (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
        })
    }

    /// Whether the requeue backoff is over (`backoffWaitingTimeExpired`).
    pub fn backoff_expired(&self, now: SystemTime) -> bool {
        if self.requeue_held {
            return false;
        }
        self.requeue_at.is_none_or(|at| now >= at)
    }
}

/// Why the scheduler puts a Workload back (`RequeueReason`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RequeueReason {
    /// Not nominated (`""`).
    #[default]
    Generic,
    /// Nominated, then failed.
    FailedAfterNomination,
    /// The namespace does not match the ClusterQueue's selector.
    NamespaceMismatch,
    /// Waiting for its preemptions.
    PendingPreemption,
    /// Issuing its preemptions failed.
    PreemptionFailed,
    /// No flavor fits.
    NoFit,
    /// Preemption needed, nothing to preempt.
    PreemptionNoCandidates,
}

/// The order of the active heap (`baseCompareFunc`, `queueOrderingFunc`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueOrdering {
    /// Which timestamp FIFO uses.
    pub timestamp: RequeuingTimestamp,
    /// Admission fair sharing: each LocalQueue's weighted usage (lower first); empty when off.
    pub local_queue_usage: LocalQueueUsage,
}

/// Admission fair sharing's weighted usage per LocalQueue, by namespace then LocalQueue name,
/// so that comparing two Workloads looks both up without building a key.
pub type LocalQueueUsage = BTreeMap<String, BTreeMap<String, f64>>;

impl QueueOrdering {
    /// Orders `a` before `b` (`Less`) when it should be popped first; `sticky` is the
    /// preemptor this ClusterQueue keeps at its head, if any.
    pub fn compare(
        &self,
        a: &QueuedWorkload,
        b: &QueuedWorkload,
        sticky: Option<&str>,
    ) -> Ordering {
        if !self.local_queue_usage.is_empty() {
            let usage = |w: &QueuedWorkload| {
                self.local_queue_usage
                    .get(&w.info.workload.namespace)
                    .and_then(|local_queues| local_queues.get(&w.local_queue))
                    .copied()
                    .unwrap_or(0.0)
            };
            let by_usage = compare_floats(usage(a), usage(b));
            if by_usage != Ordering::Equal {
                return by_usage;
            }
        }
        let a_sticky = sticky.is_some_and(|key| a.has_key(key));
        let b_sticky = sticky.is_some_and(|key| b.has_key(key));
        if a_sticky != b_sticky {
            return if a_sticky {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        b.info
            .workload
            .priority
            .cmp(&a.info.workload.priority)
            .then_with(|| {
                a.queue_order_timestamp(self.timestamp)
                    .cmp(&b.queue_order_timestamp(self.timestamp))
            })
            .then_with(|| a.tie_break(b))
    }
}

/// Go's `cmp.Compare` on floats: `-0` equals `0`, NaN sorts before every number.
fn compare_floats(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b)
        .unwrap_or_else(|| b.is_nan().cmp(&a.is_nan()))
}

/// The preemptor a ClusterQueue remembers (`preemptorWorkload`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Preemptor {
    key: WorkloadKey,
    generation: i64,
    sticky: bool,
}

impl Preemptor {
    /// The key of the preemptor kept at the head, if it is sticky.
    fn sticky_key(preemptor: Option<&Preemptor>) -> Option<&str> {
        preemptor.filter(|p| p.sticky).map(|p| p.key.as_str())
    }
}

/// One ClusterQueue's pending workloads (`ClusterQueue` in `pkg/cache/queue`).
#[derive(Debug, Clone)]
pub struct ClusterQueueQueue {
    /// `spec.queueingStrategy`.
    pub strategy: QueueingStrategy,
    /// Whether the ClusterQueue is active (Active condition True, not stopped).
    pub active: bool,
    /// Beyond Kueue (the `heads_per_cluster_queue` option): how many heads a scheduling cycle
    /// takes from this queue, one per round (`cycle::schedule`); 1 (or 0) is Kueue's one pop
    /// per cycle.
    pub heads_per_cycle: usize,
    /// Kueue's SchedulingEquivalenceHashing feature gate (on by default).
    pub equivalence_hashing: bool,
    /// The active heap and the inadmissible set.
    pending: PendingWorkloads,
    pop_cycle: i64,
    queue_inadmissible_cycle: i64,
    preemptor: Option<Preemptor>,
    /// The shapes whose representative was requeued inadmissible since the last retry of the
    /// inadmissible set (`hashToBulkMoveReason`).
    failed_shapes: Vec<SchedulingShape>,
}

impl ClusterQueueQueue {
    /// An empty, active queue.
    pub fn new(strategy: QueueingStrategy) -> ClusterQueueQueue {
        ClusterQueueQueue {
            strategy,
            active: true,
            heads_per_cycle: 1,
            equivalence_hashing: true,
            pending: PendingWorkloads::default(),
            pop_cycle: 0,
            queue_inadmissible_cycle: -1,
            preemptor: None,
            failed_shapes: Vec::new(),
        }
    }

    /// Whether equivalence classes apply here: the feature is on and the queue is
    /// BestEffortFIFO (StrictFIFO keeps its head-of-line order).
    fn hashes_equivalents(&self) -> bool {
        self.equivalence_hashing && self.strategy == QueueingStrategy::BestEffortFifo
    }

    /// Whether a Workload of `workload`'s shape was requeued inadmissible since the last
    /// retry.
    fn shape_failed(&self, workload: &QueuedWorkload) -> bool {
        if !self.hashes_equivalents() || self.failed_shapes.is_empty() {
            return false;
        }
        let fingerprint = equivalence::fingerprint(workload);
        self.failed_shapes
            .iter()
            .any(|shape| shape.matches(workload, fingerprint))
    }

    /// Records `representative`'s shape as failed and moves the active Workloads of that
    /// shape to the inadmissible set (`handleInadmissibleHash`).
    fn park_equivalents(&mut self, representative: &QueuedWorkload) {
        if !self.hashes_equivalents() {
            return;
        }
        let preemptor = self.preemptor.as_ref().map(|p| p.key.as_str());
        self.pending.park_equivalents(representative, preemptor);
        let shape = SchedulingShape::of(representative);
        if !self.failed_shapes.contains(&shape) {
            self.failed_shapes.push(shape);
        }
    }

    fn sticky(&self) -> Option<&str> {
        Preemptor::sticky_key(self.preemptor.as_ref())
    }

    /// Whether `workload` is the preemptor this queue waits on (`IsPreemptor`).
    pub fn is_preemptor(&self, workload: &QueuedWorkload) -> bool {
        self.preemptor
            .as_ref()
            .is_some_and(|p| workload.has_key(&p.key) && p.generation == workload.generation)
    }

    /// Adds or updates a pending Workload (`PushOrUpdate`): an inadmissible one stays
    /// inadmissible unless what the scheduler looks at changed; one still backing off waits in
    /// the inadmissible set.
    pub fn push_or_update(&mut self, workload: QueuedWorkload, now: SystemTime) {
        let key = workload.key();
        if let Some(old) = self.pending.inadmissible(&key) {
            let unchanged = old.info.workload == workload.info.workload
                && old.eviction == workload.eviction
                && old.requeue_held == workload.requeue_held
                && old.requeue_at == workload.requeue_at;
            if unchanged {
                self.pending.insert(key, Box::new(workload), true);
                return;
            }
            self.pending.remove(&key);
        }
        let inadmissible = !self.pending.is_active(&key)
            && (!workload.backoff_expired(now) || self.shape_failed(&workload));
        self.pending.insert(key, Box::new(workload), inadmissible);
    }

    /// [`Self::push_or_update`] for a Workload the caller keeps, read from `source`: copied
    /// only when the queue does not already hold it as it is (a pass offers every pending
    /// Workload again), and neither compared nor even keyed when the queue holds the copy it
    /// made of that very source (found by the source's address).
    pub fn push_or_update_from(
        &mut self,
        workload: &QueuedWorkload,
        source: &Source,
        now: SystemTime,
    ) {
        if self.pending.holds_copy_of(source) {
            return;
        }
        let held = workload.with_key(|key| {
            let same = self.pending.get(key) == Some(workload);
            if same {
                self.pending.set_source(key, source);
            }
            same
        });
        if !held {
            self.push_or_update(workload.clone(), now);
            workload.with_key(|key| self.pending.set_source(key, source));
        }
    }

    /// Whether the queue holds the copy it made of the [`Source`] at `address`
    /// (`Arc::as_ptr`): [`Self::push_or_update_from`] would compare nothing. For a caller
    /// that kept the source and asks without touching it (a pass over thousands of queued
    /// Workloads, most offered again unchanged).
    pub fn holds_copy_at(&self, address: usize) -> bool {
        self.pending.holds_copy_at(address)
    }

    /// How many Workloads the queue holds, active and inadmissible.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether the queue holds no Workload.
    pub fn is_empty(&self) -> bool {
        self.pending.len() == 0
    }

    /// The keys of every Workload the queue holds, active and inadmissible, in key order.
    pub fn keys(&self) -> impl Iterator<Item = &WorkloadKey> {
        self.pending.keys()
    }

    /// Removes a Workload from both sets (`Delete`).
    pub fn delete(&mut self, key: &str) {
        self.pending.remove(key);
        if self.preemptor.as_ref().is_some_and(|p| p.key == key) {
            self.preemptor = None;
        }
    }

    /// Moves an active Workload that is not this queue's preemptor to the inadmissible set, as
    /// Kueue's SchedulingEquivalenceHashing parks the equivalents of an inadmissible head.
    /// Returns whether it moved.
    pub fn park(&mut self, key: &str) -> bool {
        if self.preemptor.as_ref().is_some_and(|p| p.key == key) {
            return false;
        }
        self.pending.park(key)
    }

    /// Pops the head of the active heap (`Pop`).
    pub fn pop(&mut self, ordering: &QueueOrdering) -> Option<QueuedWorkload> {
        self.pop_cycle += 1;
        let sticky = Preemptor::sticky_key(self.preemptor.as_ref());
        self.pending.pop(ordering, sticky)
    }

    /// Puts a Workload the scheduler did not admit back (`RequeueIfNotPresent`): StrictFIFO
    /// always (unless the namespace mismatched), BestEffortFIFO only after a failure past
    /// nomination or pending preemption, or when an event arrived since the pop, or when the
    /// flavor search has flavors left; otherwise it goes to the inadmissible set. Returns
    /// whether it was added.
    pub fn requeue(
        &mut self,
        workload: QueuedWorkload,
        reason: RequeueReason,
        now: SystemTime,
    ) -> bool {
        let key = workload.key();
        if reason == RequeueReason::PendingPreemption {
            self.preemptor = Some(Preemptor {
                key: key.clone(),
                generation: workload.generation,
                sticky: self.strategy == QueueingStrategy::BestEffortFifo,
            });
        }
        let immediate = match self.strategy {
            QueueingStrategy::StrictFifo => reason != RequeueReason::NamespaceMismatch,
            QueueingStrategy::BestEffortFifo => matches!(
                reason,
                RequeueReason::FailedAfterNomination
                    | RequeueReason::PendingPreemption
                    | RequeueReason::PreemptionFailed
            ),
        };
        let pending_flavors = workload.info.last_assignment.as_ref().is_some_and(|state| {
            state
                .last_tried_flavor_idx
                .iter()
                .flat_map(|per_resource| per_resource.values())
                .any(|idx| *idx != -1)
        });
        if workload.backoff_expired(now)
            && (immediate || self.queue_inadmissible_cycle >= self.pop_cycle || pending_flavors)
        {
            if self.pending.is_inadmissible(&key) {
                self.pending.activate_one(&key);
                return true;
            }
            if self.pending.is_active(&key) {
                return false;
            }
            self.pending.insert(key, Box::new(workload), false);
            return true;
        }
        if self.pending.contains_key(&key) {
            return false;
        }
        let class_wide = matches!(
            reason,
            RequeueReason::NoFit | RequeueReason::PreemptionNoCandidates
        );
        if class_wide {
            self.park_equivalents(&workload);
        }
        self.pending.insert(key, Box::new(workload), true);
        true
    }

    /// Moves every inadmissible Workload whose namespace still matches and whose backoff is
    /// over back to the heap, and forgets the failed shapes (`queueInadmissibleWorkloads`).
    /// Returns how many moved.
    pub fn queue_inadmissible(
        &mut self,
        now: SystemTime,
        namespace_matches: &dyn Fn(&str) -> bool,
    ) -> usize {
        self.queue_inadmissible_cycle = self.pop_cycle;
        self.failed_shapes.clear();
        self.pending
            .activate(|w| namespace_matches(&w.info.workload.namespace) && w.backoff_expired(now))
    }

    /// The active workloads' keys in pop order (`Dump`).
    pub fn dump(&self, ordering: &QueueOrdering) -> Vec<WorkloadKey> {
        let sticky = self.sticky();
        let mut active: Vec<&QueuedWorkload> = self.pending.active_values().collect();
        active.sort_by(|a, b| ordering.compare(a, b, sticky));
        active.into_iter().map(QueuedWorkload::key).collect()
    }

    /// Every pending Workload, active and inadmissible together, in pop order
    /// (`Snapshot`: what the visibility API lists, with the sticky preemptor first).
    pub fn snapshot(&self, ordering: &QueueOrdering) -> Vec<&QueuedWorkload> {
        let sticky = self.sticky();
        let mut all: Vec<&QueuedWorkload> = self
            .pending
            .active_values()
            .chain(self.pending.inadmissible_entries().map(|(_, w)| w))
            .collect();
        all.sort_by(|a, b| ordering.compare(a, b, sticky));
        all
    }

    /// Whether `key` waits in the inadmissible set.
    pub fn is_inadmissible(&self, key: &str) -> bool {
        self.pending.is_inadmissible(key)
    }

    /// The inadmissible workloads' keys, sorted (`DumpInadmissible`).
    pub fn dump_inadmissible(&self) -> Vec<WorkloadKey> {
        self.pending
            .inadmissible_entries()
            .map(|(key, _)| key.clone())
            .collect()
    }
}

/// A LocalQueue as the manager sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalQueue {
    /// `spec.clusterQueue`.
    pub cluster_queue: String,
    /// `spec.stopPolicy`.
    pub stop_policy: StopPolicy,
    /// Beyond Kueue: per-user limits (none by default).
    pub user_limits: UserLimits,
}

/// Why a Workload cannot be queued: the `QuotaReserved` False reason and message the workload
/// controller writes (`getQueueBlocker`, `reconcileOn*ActiveState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueBlocker {
    /// The condition reason.
    pub reason: &'static str,
    /// The condition message.
    pub message: String,
}

/// A Workload the scheduler is about to consider (`Head`).
#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    /// The Workload.
    pub workload: QueuedWorkload,
    /// Its ClusterQueue.
    pub cluster_queue: String,
    /// Whether it is the preemptor its ClusterQueue waits on.
    pub is_preemptor: bool,
}

/// All queues (`Manager`): LocalQueues by `namespace/name`, ClusterQueue queues by name.
#[derive(Debug, Clone, Default)]
pub struct QueueManager {
    /// LocalQueues by `namespace/name`.
    pub local_queues: BTreeMap<String, LocalQueue>,
    /// ClusterQueue queues by name.
    pub cluster_queues: BTreeMap<String, ClusterQueueQueue>,
    /// The heap order, shared by every ClusterQueue.
    pub ordering: QueueOrdering,
}

impl QueueManager {
    /// The ClusterQueue a Workload's LocalQueue points at, or why the Workload cannot be
    /// queued there (`AddOrUpdateWorkload`'s errors: missing or stopped LocalQueue, missing
    /// ClusterQueue).
    pub fn cluster_queue_for(&self, workload: &QueuedWorkload) -> Result<&str, QueueBlocker> {
        let Some(local_queue) = workload.with_local_queue_key(|key| self.local_queues.get(key))
        else {
            return Err(QueueBlocker {
                reason: MISCONFIGURED,
                message: format!("LocalQueue {} doesn't exist", workload.local_queue),
            });
        };
        if local_queue.stop_policy != StopPolicy::None {
            return Err(QueueBlocker {
                reason: SUSPENDED,
                message: format!("LocalQueue {} is stopped", workload.local_queue),
            });
        }
        let name = local_queue.cluster_queue.as_str();
        if !self.cluster_queues.contains_key(name) {
            return Err(QueueBlocker {
                reason: MISCONFIGURED,
                message: format!("ClusterQueue {name} doesn't exist"),
            });
        }
        Ok(name)
    }

    /// The QuotaReserved False condition the workload controller writes for a pending Workload
    /// its queues hold back (`getQueueBlocker`, `reconcileOnLocalQueueActiveState`): the
    /// errors of [`Self::cluster_queue_for`], or an inactive ClusterQueue.
    pub fn blocker(&self, workload: &QueuedWorkload) -> Option<QueueBlocker> {
        self.active_queue_for(workload).err()
    }

    /// The active ClusterQueue a Workload is queued in, or its [`Self::blocker`].
    pub fn active_queue_for(&self, workload: &QueuedWorkload) -> Result<&str, QueueBlocker> {
        let name = self.cluster_queue_for(workload)?;
        let active = self
            .cluster_queues
            .get(name)
            .is_some_and(|queue| queue.active);
        if active {
            Ok(name)
        } else {
            Err(QueueBlocker {
                reason: SUSPENDED,
                message: format!("ClusterQueue {name} is inactive"),
            })
        }
    }

    /// Queues a pending Workload in its ClusterQueue, active or not (`AddOrUpdateWorkload`),
    /// or says why it cannot be queued.
    pub fn add_or_update(
        &mut self,
        workload: QueuedWorkload,
        now: SystemTime,
    ) -> Result<(), QueueBlocker> {
        let name = self.cluster_queue_for(&workload)?.to_owned();
        if let Some(queue) = self.cluster_queues.get_mut(&name) {
            queue.push_or_update(workload, now);
        }
        Ok(())
    }

    /// One head per active ClusterQueue, popped, in ClusterQueue name order (`heads`).
    pub fn heads(&mut self) -> Vec<Head> {
        self.heads_in_round(0)
    }

    /// How many rounds a scheduling cycle runs: the most heads any active ClusterQueue takes
    /// per cycle (1 with Kueue's default).
    pub fn rounds_per_cycle(&self) -> usize {
        self.cluster_queues
            .values()
            .filter(|queue| queue.active)
            .map(|queue| queue.heads_per_cycle.max(1))
            .max()
            .unwrap_or(1)
    }

    /// One head per active ClusterQueue that takes more than `round` heads per cycle, popped,
    /// in ClusterQueue name order.
    pub fn heads_in_round(&mut self, round: usize) -> Vec<Head> {
        let ordering = &self.ordering;
        self.cluster_queues
            .iter_mut()
            .filter(|(_, queue)| queue.active && queue.heads_per_cycle.max(1) > round)
            .filter_map(|(name, queue)| {
                let workload = queue.pop(ordering)?;
                let is_preemptor = queue.is_preemptor(&workload);
                Some(Head {
                    workload,
                    cluster_queue: name.clone(),
                    is_preemptor,
                })
            })
            .collect()
    }

    /// Puts a head back into its ClusterQueue (`RequeueWorkload`).
    pub fn requeue(&mut self, head: Head, reason: RequeueReason, now: SystemTime) -> bool {
        match self.cluster_queues.get_mut(&head.cluster_queue) {
            Some(queue) => queue.requeue(head.workload, reason, now),
            None => false,
        }
    }

    /// Active workloads per ClusterQueue that has any (`Dump`).
    pub fn dump(&self) -> BTreeMap<String, Vec<WorkloadKey>> {
        self.cluster_queues
            .iter()
            .map(|(name, queue)| (name.clone(), queue.dump(&self.ordering)))
            .filter(|(_, keys)| !keys.is_empty())
            .collect()
    }

    /// A ClusterQueue's pending Workloads in pop order (`PendingWorkloadsInfo`); `None` when
    /// the ClusterQueue is unknown.
    pub fn pending_workloads_info(&self, cluster_queue: &str) -> Option<Vec<&QueuedWorkload>> {
        let queue = self.cluster_queues.get(cluster_queue)?;
        Some(queue.snapshot(&self.ordering))
    }

    /// Inadmissible workloads per ClusterQueue that has any (`DumpInadmissible`).
    pub fn dump_inadmissible(&self) -> BTreeMap<String, Vec<WorkloadKey>> {
        self.cluster_queues
            .iter()
            .map(|(name, queue)| (name.clone(), queue.dump_inadmissible()))
            .filter(|(_, keys)| !keys.is_empty())
            .collect()
    }
}

/// `QuotaReserved` False reason: the configuration is wrong.
pub const MISCONFIGURED: &str = "Misconfigured";
/// `QuotaReserved` False reason: a queue is stopped or inactive.
pub const SUSPENDED: &str = "Suspended";

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
