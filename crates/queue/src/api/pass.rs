//! One pass of the queue manager over Kueue's stored objects: the quota tree with the usage
//! of every Workload holding quota, the queues of the pending ones (the workload
//! controller's blockers — missing or stopped LocalQueue, missing or inactive ClusterQueue —
//! answered at once), scheduling cycles run until they decide nothing new (Kueue runs them
//! back to back while its queues have heads), and what to write: each Workload's status
//! (admission, QuotaReserved=False with the cycle's reason and message, eviction of
//! victims), and every ClusterQueue's and LocalQueue's status.
//!
//! Quota and reservations are read from the stored objects in every pass, so a restart
//! rebuilds them and a Workload holding quota is never admitted twice; the queues are kept
//! between passes (`Queues`) as Kueue keeps them between cycles, so inadmissible Workloads
//! and sticky preemptors survive, and rebuilt from the objects after a restart. Several
//! changes to one Workload in a pass merge into one write. Knows nothing about how objects
//! are watched or written; time is an argument.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use tessera_model::address::address_of;
use tessera_model::conditions;

use crate::afs::ResourceUsage;
use crate::amount::Amount;
use crate::api::admission_checks::{self, ClusterQueueChecks};
use crate::api::admission_fair_sharing::{Ledger, Observed};
use crate::api::evictions;
use crate::api::objects::{self, ClusterQueue, Objects, WorkloadState};
use crate::api::offered::{Offered, Resolution};
use crate::api::parsed::{ActedOn, ParsedWorkloads};
use crate::api::pods_ready;
use crate::api::quiet::{QuietPass, QuietWorkloads, StepContext, timeless};
use crate::api::sorted_keys::SortedKeys;
use crate::api::status::{self, Counts, Event, Usage};
use crate::api::tas;
use crate::config::{AdmissionFairSharing, Configuration, WaitForPodsReady};
use crate::cycle::{self, Admission, ClusterQueueSnapshot, Decision, KueuePreemption, Snapshot};
use crate::flavor::ResourceFlavorSpec;
use crate::joined_key::with_joined;
use crate::preemption::{AdmittedWorkload, FairSharingConfig, PreemptionConfig};
use crate::queue::{
    ClusterQueueQueue, LocalQueue, QueueBlocker, QueueManager, QueuedWorkload, Source, StopPolicy,
};
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tas::TasFlavors;
use crate::tree::{Tree, TreeSpec};

/// How a pass decides: the parts of Kueue's Configuration the scheduler and the queue
/// statuses read.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Classic preemption, or fair sharing (which also orders the cycle's entries by DRS and
    /// writes ClusterQueues' `status.fairSharing`).
    pub preemption: PreemptionConfig,
    /// Beyond Kueue: heads per ClusterQueue per cycle (Kueue: 1).
    pub heads_per_cluster_queue: usize,
    /// Kueue's SchedulingEquivalenceHashing gate (on by default).
    pub equivalence_hashing: bool,
    /// waitForPodsReady: timeouts, requeue backoff, blockAdmission and the requeuing
    /// timestamp; `None` when off.
    pub wait_for_pods_ready: Option<WaitForPodsReady>,
    /// Admission fair sharing: LocalQueues' decayed usage, entry penalties, and the order
    /// of the ClusterQueues whose admissionScope asks for it; `None` when off.
    pub admission_fair_sharing: Option<AdmissionFairSharing>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            preemption: PreemptionConfig::default(),
            heads_per_cluster_queue: 1,
            equivalence_hashing: true,
            wait_for_pods_ready: None,
            admission_fair_sharing: None,
        }
    }
}

impl From<&Configuration> for Settings {
    fn from(configuration: &Configuration) -> Settings {
        let beyond = &configuration.beyond_kueue;
        let fair_sharing =
            configuration
                .fair_sharing
                .as_ref()
                .map(|fair_sharing| FairSharingConfig {
                    strategies: fair_sharing.strategies.clone(),
                    prevent_flapping: beyond.prevent_flapping,
                    ..FairSharingConfig::default()
                });
        Settings {
            preemption: PreemptionConfig {
                fair_sharing,
                min_runtime_before_preemption: beyond.min_runtime_before_preemption,
                topology_aware: beyond.topology_aware_preemption,
            },
            heads_per_cluster_queue: beyond.heads_per_cluster_queue,
            equivalence_hashing: configuration.feature_gates.scheduling_equivalence_hashing,
            wait_for_pods_ready: configuration.wait_for_pods_ready.clone(),
            admission_fair_sharing: configuration.admission_fair_sharing.clone(),
        }
    }
}

/// A status to write to one object.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    /// Its namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The new `status` (a merge patch of it).
    pub status: Value,
}

/// One write per object from two lists of status writes, `earlier` and `later` (the
/// statuses prepared before a pass, the pass's own decided over them): a field `later`
/// writes replaces `earlier`'s. Two writes to one object in flight at once would race, and
/// with a resourceVersion precondition the second would always fail.
pub fn one_write_per_object(
    earlier: Vec<StatusWrite>,
    later: Vec<StatusWrite>,
) -> Vec<StatusWrite> {
    // Each list has one write per object already: only `earlier`'s are looked through.
    let prepared = earlier.len();
    let mut writes = earlier;
    for write in later {
        let same = writes[..prepared]
            .iter_mut()
            .find(|w| w.namespace == write.namespace && w.name == write.name);
        match (same, write.status) {
            (Some(same), Value::Object(fields)) if same.status.is_object() => {
                for (field, value) in fields {
                    same.status[&field] = value;
                }
            }
            (Some(same), status) => same.status = status,
            (None, status) => writes.push(StatusWrite { status, ..write }),
        }
    }
    writes
}

/// What one pass decided to write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pass {
    /// Workload statuses: admissions (first), pending conditions, evictions.
    pub workloads: Vec<StatusWrite>,
    /// ClusterQueue statuses that changed.
    pub cluster_queues: Vec<StatusWrite>,
    /// LocalQueue statuses that changed.
    pub local_queues: Vec<StatusWrite>,
    /// Events about the Workloads written.
    pub events: Vec<Event>,
    /// Workloads to deactivate (`spec.active: false`, a merge patch of the object; the
    /// workload controller's answer to `DeactivationTarget`).
    pub deactivations: Vec<StatusWrite>,
}

/// What finally became of a Workload in the pass.
enum Outcome {
    Admitted(Admission),
    /// Left pending; `looked_at` when the scheduler (not the workload controller's queue
    /// checks) decided it, which also records the Workload's total requests.
    Pending {
        reason: String,
        message: String,
        looked_at: bool,
    },
}

/// The Workload statuses a pass changes: several changes to one Workload (a pending
/// condition and a restart, say) merge into one write, each computed from the status the
/// earlier ones left.
#[derive(Default)]
struct Changed {
    /// The object as changed so far, and the status fields written.
    objects: BTreeMap<String, (Value, BTreeSet<String>)>,
}

impl Changed {
    /// The object as changed so far (the stored one, uncopied, while unchanged).
    fn current<'a>(&'a self, key: &str, stored: &'a Value) -> &'a Value {
        self.objects.get(key).map_or(stored, |(object, _)| object)
    }

    /// Records a status change (a merge patch of the status) of `object`, as it is now.
    fn record(&mut self, key: &str, object: &Value, status: Option<Value>) {
        let Some(Value::Object(status)) = status else {
            return;
        };
        let (current, fields) = self
            .objects
            .entry(key.to_owned())
            .or_insert_with(|| (object.clone(), BTreeSet::new()));
        if !current["status"].is_object() {
            current["status"] = Value::Object(serde_json::Map::new());
        }
        for (field, value) in status {
            current["status"][&field] = value;
            fields.insert(field);
        }
    }

    /// One write per changed Workload: the fields written, as they ended; the admissions
    /// first (a Workload's pods wait on its admission, while a pending condition only
    /// informs), each group in key order.
    fn writes(self) -> Vec<StatusWrite> {
        let mut writes: Vec<StatusWrite> = self
            .objects
            .into_values()
            .map(|(object, fields)| {
                let status: serde_json::Map<String, Value> = fields
                    .into_iter()
                    .map(|field| {
                        let value = object["status"][&field].clone();
                        (field, value)
                    })
                    .collect();
                write_for(&object, Value::Object(status))
            })
            .collect();
        writes.sort_by_key(|write| !admits(&write.status));
        writes
    }
}

/// Whether a Workload status write admits it (sets `status.admission`).
fn admits(status: &Value) -> bool {
    status.get("admission").is_some_and(Value::is_object)
}

/// A Workload to evict, and why.
struct Victim {
    reason: String,
    message: String,
    preemptor_priority: i64,
}

/// A Workload holding quota, as queue statuses count it.
struct Holder {
    cluster_queue: String,
    local_queue: String,
    usage: FlavorResourceQuantities,
    admitted: bool,
}

/// What a pass keeps for the next, as Kueue's queue manager keeps it between cycles: the
/// queues (inadmissible sets, the sticky preemptor of each ClusterQueue), what the
/// inadmissible Workloads last waited on, and admission fair sharing's ledger; and, as
/// Kueue's cache keeps them, the Workloads read, by resourceVersion.
#[derive(Debug, Clone, Default)]
pub struct Queues {
    manager: QueueManager,
    waited_on: Option<WaitedOn>,
    ledger: Ledger,
    parsed: ParsedWorkloads,
    quiet: QuietWorkloads,
    tas: tas::TasBase,
    offered: Offered,
}

impl Queues {
    /// The Workloads read by the passes so far.
    pub fn parsed(&self) -> &ParsedWorkloads {
        &self.parsed
    }

    /// Forgets the Workloads read, so that the next pass parses every one again (what it
    /// decides is the same).
    pub fn forget_parsed(&mut self) {
        self.parsed = ParsedWorkloads::default();
    }
}

/// What can make an inadmissible Workload admissible.
#[derive(Debug, Clone)]
struct WaitedOn {
    usage: BTreeMap<String, FlavorResourceQuantities>,
    tree: TreeSpec,
    cluster_queues: BTreeMap<String, ClusterQueueSnapshot>,
    flavors: BTreeMap<String, ResourceFlavorSpec>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    tas: TasFlavors,
}

impl WaitedOn {
    /// What `world` shows.
    fn of(world: &World<'_>) -> WaitedOn {
        WaitedOn {
            usage: world.usage.clone(),
            tree: world.tree.clone(),
            cluster_queues: world.snapshots(),
            flavors: world.flavors.clone(),
            namespaces: world.namespaces.clone(),
            tas: world.tas.clone(),
        }
    }

    /// Whether `world` shows just this: [`WaitedOn::of`] it would be equal, compared in
    /// place (most passes change nothing here, and copying the TAS flavors is not free).
    fn shown_by(&self, world: &World<'_>) -> bool {
        self.usage == world.usage
            && self.tree == world.tree
            && self.flavors == world.flavors
            && self.namespaces == world.namespaces
            && self.cluster_queues.len() == world.cluster_queues.len()
            && self.cluster_queues.iter().zip(&world.cluster_queues).all(
                |((name, snapshot), (world_name, (cq, _)))| {
                    name == world_name && *snapshot == cq.snapshot
                },
            )
            && self.tas == world.tas
    }
}

/// Kueue's objects as a pass reads them.
struct World<'o> {
    flavors: BTreeMap<String, ResourceFlavorSpec>,
    cluster_queues: BTreeMap<String, (ClusterQueue, &'o Value)>,
    /// The Workloads pending or holding quota, kept between passes
    /// ([`ParsedWorkloads::keep`]).
    workloads: ActedOn,
    /// The Workloads holding quota, by key.
    holders: BTreeMap<String, Holder>,
    /// Their usage per ClusterQueue.
    usage: BTreeMap<String, FlavorResourceQuantities>,
    /// The pending Workloads' keys and states, in key order (iterated by several steps of
    /// a pass: no look-up each time).
    pending: Vec<(Arc<str>, Arc<WorkloadState>)>,
    tree: TreeSpec,
    /// Each ClusterQueue's `Active` condition.
    activity: BTreeMap<String, status::Active>,
    /// Each ClusterQueue's admission checks.
    checks: BTreeMap<String, ClusterQueueChecks>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The TAS flavors with the placements of the Workloads holding quota.
    tas: TasFlavors,
}

impl<'o> World<'o> {
    /// Reads `objects`, the Workloads through `parsed` (those read before at their
    /// resourceVersion not parsed again; the pass hands `workloads` back to `parsed` when it
    /// ends, for the next read to update), the TAS flavors' Nodes through `tas` (read again
    /// only when they changed).
    fn read(
        objects: &'o Objects,
        parsed: &mut ParsedWorkloads,
        tas: &mut tas::TasBase,
    ) -> World<'o> {
        let flavors: BTreeMap<String, ResourceFlavorSpec> = objects
            .flavors
            .iter()
            .filter_map(objects::flavor)
            .map(|f| (f.name.clone(), f))
            .collect();
        let cluster_queues: BTreeMap<String, (ClusterQueue, &Value)> = objects
            .cluster_queues
            .iter()
            .filter_map(|o| Some((objects::name(o).to_owned(), (objects::cluster_queue(o)?, o))))
            .collect();
        let workloads = parsed.read(objects);
        let mut holders = BTreeMap::new();
        let mut pending = Vec::new();
        for (key, (_, state)) in &workloads {
            match state.as_ref() {
                WorkloadState::Reserving {
                    workload,
                    admitted,
                    local_queue,
                    ..
                } => {
                    let holder = Holder {
                        cluster_queue: workload.cluster_queue.clone(),
                        local_queue: format!("{}/{local_queue}", workload.namespace),
                        usage: workload.usage.clone(),
                        admitted: *admitted,
                    };
                    holders.insert(key.to_string(), holder);
                }
                WorkloadState::Pending(_) => pending.push((Arc::clone(key), Arc::clone(state))),
                WorkloadState::Finished | WorkloadState::Inactive => {}
            }
        }
        let mut usage: BTreeMap<String, FlavorResourceQuantities> = BTreeMap::new();
        for holder in holders.values() {
            add_held(&mut usage, &holder.cluster_queue, &holder.usage);
        }
        let tree = TreeSpec {
            cohorts: objects.cohorts.iter().filter_map(objects::cohort).collect(),
            cluster_queues: cluster_queues
                .values()
                .map(|(cq, _)| cq.tree.clone())
                .collect(),
        };
        let holding = workloads
            .values()
            .filter(|(_, state)| matches!(state.as_ref(), WorkloadState::Reserving { .. }))
            .map(|(object, _)| object.as_ref());
        let tas = tas.tas_flavors(objects, holding);
        let known_checks = admission_checks::admission_checks(&objects.admission_checks);
        let checks: BTreeMap<String, ClusterQueueChecks> = cluster_queues
            .iter()
            .map(|(name, (_, object))| (name.clone(), ClusterQueueChecks::of(object)))
            .collect();
        let activity = cluster_queues
            .iter()
            .map(|(name, (cq, _))| {
                let (present, missing): (Vec<String>, Vec<String>) = cq
                    .flavor_resources
                    .iter()
                    .map(|(flavor, _)| flavor.clone())
                    .partition(|flavor| flavors.contains_key(flavor));
                let stopped = cq.stop_policy != StopPolicy::None;
                let topologies = tas::missing_topologies(&present, &tas);
                let more = checks
                    .get(name)
                    .map(|c| c.inactive_reasons(&known_checks))
                    .unwrap_or_default();
                let active = status::cluster_queue_active_with(
                    cq.terminating,
                    stopped,
                    &missing,
                    &topologies,
                    &more,
                );
                (name.clone(), active)
            })
            .collect();
        World {
            flavors,
            cluster_queues,
            workloads,
            holders,
            usage,
            pending,
            tree,
            activity,
            checks,
            namespaces: objects::namespace_labels(&objects.namespaces),
            tas,
        }
    }

    fn is_active(&self, cluster_queue: &str) -> bool {
        self.activity
            .get(cluster_queue)
            .is_some_and(|active| active.0 == "True")
    }

    fn queued(&self, key: &str) -> Option<&QueuedWorkload> {
        match self.workloads.get(key).map(|(_, state)| state.as_ref()) {
            Some(WorkloadState::Pending(queued)) => Some(queued),
            _ => None,
        }
    }

    fn pending(&self) -> impl Iterator<Item = &QueuedWorkload> {
        self.pending
            .iter()
            .filter_map(|(_, state)| match state.as_ref() {
                WorkloadState::Pending(queued) => Some(queued.as_ref()),
                _ => None,
            })
    }

    fn snapshots(&self) -> BTreeMap<String, ClusterQueueSnapshot> {
        self.cluster_queues
            .iter()
            .map(|(name, (cq, _))| (name.clone(), cq.snapshot.clone()))
            .collect()
    }
}

/// What the cycles of a pass decided.
#[derive(Default)]
struct Decided {
    /// Per Workload, what finally became of it.
    outcomes: BTreeMap<String, Outcome>,
    /// The Workloads to evict.
    victims: BTreeMap<String, Victim>,
    /// The Workloads admitted, with their ClusterQueue and usage.
    admitted: BTreeMap<String, (String, FlavorResourceQuantities)>,
}

/// Runs a pass over `objects` at `now` with the given settings, with the queues of the
/// passes before (`Queues::default()` after a start).
pub fn pass(objects: &Objects, state: &mut Queues, settings: &Settings, now: SystemTime) -> Pass {
    let mut world = World::read(objects, &mut state.parsed, &mut state.tas);
    let Ok(tree) = Tree::build_with_usage(&world.tree, &world.usage) else {
        state.parsed.keep(world.workloads);
        return Pass::default();
    };
    let mut decided = Decided::default();
    let pending = sync_queues(state, &world, objects, settings, &mut decided, now);
    let fairness = match &settings.admission_fair_sharing {
        Some(config) => {
            state
                .ledger
                .observe(&observed_local_queues(&world, objects), config, now);
            state.manager.ordering.local_queue_usage = state.ledger.ordering_usage(config);
            Some((config, &mut state.ledger))
        }
        None => {
            state.ledger = Ledger::default();
            state.manager.ordering.local_queue_usage.clear();
            None
        }
    };
    let base = Snapshot {
        tree,
        cluster_queues: world.snapshots(),
        flavors: world.flavors.clone(),
        namespaces: world.namespaces.clone(),
        admitted: world
            .workloads
            .values()
            .filter_map(|(_, state)| match state.as_ref() {
                WorkloadState::Reserving { workload, .. } => Some(workload.as_ref().clone()),
                _ => None,
            })
            .collect(),
        preemption: settings.preemption.clone(),
        recompute_on_overlap: true,
        timestamp: Default::default(),
        tas: std::mem::take(&mut world.tas),
    };
    let block = settings
        .wait_for_pods_ready
        .as_ref()
        .is_some_and(|wait| wait.block_admission);
    let blocked = block
        && world.workloads.values().any(|(object, state)| {
            matches!(state.as_ref(), WorkloadState::Reserving { .. })
                && pods_ready::blocks_admission(object)
        });
    let blocking = Blocking { block, blocked };
    run_cycles(
        base,
        &mut state.manager,
        fairness,
        &world,
        &mut decided,
        blocking,
        now,
    );
    if let Some(waited_on) = state.waited_on.as_mut() {
        // What the next pass reads once this pass's admissions are shown: a quota freed
        // before then (a Workload admitted here finishing) is a change that retries the
        // inadmissible ones, even when the usage it leaves equals the usage read here.
        waited_on.usage = usage_after(&world.usage, &decided.admitted);
    }
    let wait = settings.wait_for_pods_ready.as_ref();
    let context = StepContext {
        local_queues: state.manager.local_queues.clone(),
        stop_policies: world
            .cluster_queues
            .iter()
            .map(|(name, (cq, _))| (name.clone(), cq.stop_policy))
            .collect(),
        checks: world.checks.clone(),
        wait: wait.cloned(),
    };
    let mut quiet = state.quiet.start(context);
    let writes = workload_writes(&world, &state.manager, &decided, wait, &mut quiet, now);
    state.quiet.end(quiet);
    for (key, (cluster_queue, usage)) in &decided.admitted {
        if let Some(queued) = world.queued(key) {
            let holder = Holder {
                cluster_queue: cluster_queue.clone(),
                local_queue: queued.local_queue_key(),
                usage: usage.clone(),
                admitted: match decided.outcomes.get(key) {
                    Some(Outcome::Admitted(admission)) => {
                        without_pending_checks(&world, key, admission, now)
                    }
                    _ => true,
                },
            };
            world.holders.insert(key.clone(), holder);
        }
    }
    let fair_sharing = settings.preemption.fair_sharing.is_some();
    let ledger = settings
        .admission_fair_sharing
        .as_ref()
        .map(|_| &state.ledger);
    let (cluster_queues, local_queues) = queue_statuses(
        &world,
        objects,
        (&state.manager, pending),
        &decided.admitted,
        (fair_sharing, ledger),
        now,
    );
    state.parsed.keep(world.workloads);
    Pass {
        workloads: writes.statuses,
        cluster_queues,
        local_queues,
        events: writes.events,
        deactivations: writes.deactivations,
    }
}

/// A LocalQueue (namespace, name) with its index among the LocalQueues (none when it does
/// not exist) and its active ClusterQueue, or what holds it back.
type ResolvedLocalQueue<'a> = (
    (&'a str, &'a str),
    Option<usize>,
    Result<String, QueueBlocker>,
);

/// The pending Workloads of each LocalQueue, in the key order of the queue manager's
/// LocalQueues (a pending Workload naming a missing LocalQueue is counted nowhere).
type PendingPerLocalQueue = Vec<i64>;

/// Brings the kept queues up to date with the stored objects: LocalQueues and ClusterQueues
/// (activity, strategy), pending Workloads added or updated (blocked ones answered with the
/// workload controller's reason at once), the rest removed, and the inadmissible ones
/// retried when what they waited on changed (Kueue's `QueueInadmissibleWorkloads` on quota
/// freed or taken, queue, cohort, flavor or namespace changes). Counts the pending Workloads
/// of each LocalQueue on the way, queued or held back (those passed by unread counted in the
/// LocalQueue they were queued from).
fn sync_queues(
    state: &mut Queues,
    world: &World<'_>,
    objects: &Objects,
    settings: &Settings,
    decided: &mut Decided,
    now: SystemTime,
) -> PendingPerLocalQueue {
    let queues = &mut state.manager;
    queues.local_queues = objects
        .local_queues
        .iter()
        .filter_map(|lq| {
            let (cluster_queue, stop_policy) = objects::local_queue(lq)?;
            let local_queue = LocalQueue {
                cluster_queue,
                stop_policy,
                user_limits: Default::default(),
            };
            Some((objects::key(lq), local_queue))
        })
        .collect();
    queues
        .cluster_queues
        .retain(|name, _| world.cluster_queues.contains_key(name));
    for (name, (cq, _)) in &world.cluster_queues {
        let queue = queues
            .cluster_queues
            .entry(name.clone())
            .or_insert_with(|| ClusterQueueQueue::new(cq.strategy));
        queue.strategy = cq.strategy;
        queue.active = world.is_active(name);
        queue.heads_per_cycle = settings.heads_per_cluster_queue.max(1);
        queue.equivalence_hashing = settings.equivalence_hashing;
    }
    queues.ordering.timestamp = settings
        .wait_for_pods_ready
        .as_ref()
        .map(|wait| wait.requeuing.timestamp)
        .unwrap_or_default();
    let mut offered = 0;
    let resolution = Resolution {
        local_queues: queues.local_queues.clone(),
        cluster_queues: queues
            .cluster_queues
            .iter()
            .map(|(name, queue)| (name.clone(), queue.active))
            .collect(),
    };
    let mut walk = state.offered.walk(resolution);
    let mut pending: PendingPerLocalQueue = vec![0; queues.local_queues.len()];
    let local_queue_keys: Vec<&str> = queues.local_queues.keys().map(String::as_str).collect();
    // Pending Workloads in key order mostly come in runs of one LocalQueue: its queue is
    // looked up once a run.
    let mut last: Option<ResolvedLocalQueue<'_>> = None;
    for (key, state) in &world.pending {
        // Queued by the last pass at this very state, and still held as it was copied.
        let address = address_of(state);
        let held = |name: &str| {
            queues
                .cluster_queues
                .get(name)
                .is_some_and(|queue| queue.holds_copy_at(address))
        };
        if let Some(local_queue) = walk.pass_by(key, state, held) {
            pending[local_queue] += 1;
            offered += 1;
            continue;
        }
        let WorkloadState::Pending(queued) = state.as_ref() else {
            continue;
        };
        let queued = queued.as_ref();
        let local_queue = queued.local_queue_parts();
        let (index, resolved) = match &mut last {
            Some((of, index, resolved)) if *of == local_queue => (*index, &*resolved),
            slot => {
                let (namespace, name) = local_queue;
                let index = with_joined(namespace, name, |joined| {
                    local_queue_keys.binary_search(&joined).ok()
                });
                let resolved = queues.active_queue_for(queued).map(str::to_owned);
                let (_, index, resolved) = slot.insert((local_queue, index, resolved));
                (*index, &*resolved)
            }
        };
        // A Workload naming a missing LocalQueue is held back below, counted nowhere.
        if let Some(index) = index {
            pending[index] += 1;
        }
        let name = match resolved {
            Ok(name) => name,
            Err(blocker) => {
                let outcome = Outcome::Pending {
                    reason: blocker.reason.to_owned(),
                    message: blocker.message.clone(),
                    looked_at: false,
                };
                decided.outcomes.insert(key.to_string(), outcome);
                continue;
            }
        };
        // Resolved to a queue, so its LocalQueue exists.
        if let (Some(queue), Some(index)) = (queues.cluster_queues.get_mut(name), index) {
            let source: Source = state.clone();
            queue.push_or_update_from(queued, &source, now);
            walk.queued(key, state, name, index);
            offered += 1;
        }
    }
    // A queued Workload no longer pending, held back, or now queued elsewhere leaves its
    // queue. When the queues hold exactly the Workloads just offered, none has left.
    let held: usize = queues
        .cluster_queues
        .values()
        .map(ClusterQueueQueue::len)
        .sum();
    let gone: Vec<(String, String)> = if held == offered {
        Vec::new()
    } else {
        queues
            .cluster_queues
            .iter()
            .flat_map(|(name, queue)| queue.keys().map(move |key| (name, key)))
            .filter(|(name, key)| {
                world.queued(key).is_none_or(|queued| {
                    queues.active_queue_for(queued).ok() != Some(name.as_str())
                })
            })
            .map(|(name, key)| (name.clone(), key.clone()))
            .collect()
    };
    for (name, key) in gone {
        if let Some(queue) = queues.cluster_queues.get_mut(&name) {
            queue.delete(&key);
        }
    }
    if !state
        .waited_on
        .as_ref()
        .is_some_and(|waited_on| waited_on.shown_by(world))
    {
        for queue in queues.cluster_queues.values_mut() {
            queue.queue_inadmissible(now, &|_| true);
        }
        state.waited_on = Some(WaitedOn::of(world));
    }
    pending
}

/// Each ClusterQueue's usage once `admitted` (by key: ClusterQueue and usage) hold quota too.
fn usage_after(
    usage: &BTreeMap<String, FlavorResourceQuantities>,
    admitted: &BTreeMap<String, (String, FlavorResourceQuantities)>,
) -> BTreeMap<String, FlavorResourceQuantities> {
    let mut after = usage.clone();
    for (cluster_queue, held) in admitted.values() {
        add_held(&mut after, cluster_queue, held);
    }
    after
}

/// Adds what a Workload holds to its ClusterQueue's usage.
fn add_held(
    usage: &mut BTreeMap<String, FlavorResourceQuantities>,
    cluster_queue: &str,
    held: &FlavorResourceQuantities,
) {
    let total = usage.entry(cluster_queue.to_owned()).or_default();
    for (key, amount) in held.iter() {
        total.add(key, amount);
    }
}

/// The quota tree of `objects` with the usage of every Workload holding quota, as a pass
/// reads it; `None` when the ClusterQueues and Cohorts do not form a tree.
pub fn quota_tree(objects: &Objects) -> Option<Tree> {
    let world = World::read(
        objects,
        &mut ParsedWorkloads::default(),
        &mut tas::TasBase::default(),
    );
    Tree::build_with_usage(&world.tree, &world.usage).ok()
}

/// The queues of `objects` as a queue manager that just started holds them (no sticky
/// preemptor, nothing learned inadmissible yet): every pending Workload whose LocalQueue and
/// ClusterQueue exist, in its ClusterQueue, stopped or inactive ones included, as Kueue's
/// manager keeps them, ordered as `settings` orders them. What the visibility API and
/// explanations read.
pub fn queues_of(objects: &Objects, settings: &Settings, now: SystemTime) -> QueueManager {
    let world = World::read(
        objects,
        &mut ParsedWorkloads::default(),
        &mut tas::TasBase::default(),
    );
    let mut state = Queues::default();
    sync_queues(
        &mut state,
        &world,
        objects,
        settings,
        &mut Decided::default(),
        now,
    );
    for queued in world.pending() {
        let _ = state.manager.add_or_update(queued.clone(), now);
    }
    state.manager
}

/// What admission fair sharing's ledger observes of each LocalQueue whose ClusterQueue
/// exists: its weight, persisted status, admitted usage and Workloads.
fn observed_local_queues(world: &World<'_>, objects: &Objects) -> BTreeMap<String, Observed> {
    let mut observed: BTreeMap<String, Observed> = BTreeMap::new();
    for object in &objects.local_queues {
        let Some((cluster_queue, _)) = objects::local_queue(object) else {
            continue;
        };
        let Some((cq, _)) = world.cluster_queues.get(&cluster_queue) else {
            continue;
        };
        let local_queue = Observed {
            usage_based: cq.usage_based_admission_fair_sharing,
            weight: objects::local_queue_weight(object),
            persisted: objects::local_queue_consumed(object),
            ..Observed::default()
        };
        observed.insert(objects::key(object), local_queue);
    }
    for (key, holder) in &world.holders {
        let Some(local_queue) = observed.get_mut(&holder.local_queue) else {
            continue;
        };
        local_queue.live.insert(key.clone());
        if holder.admitted {
            local_queue.admitted.insert(key.clone());
            for (resource, value) in holder.usage.flatten_flavors() {
                *local_queue
                    .admitted_usage
                    .entry(resource.clone())
                    .or_default() += Amount::new(value).as_approximate_f64(&resource);
            }
        }
    }
    for queued in world.pending() {
        if let Some(local_queue) = observed.get_mut(&queued.local_queue_key()) {
            local_queue.live.insert(queued.key());
        }
    }
    observed
}

/// A Workload's total requests in the resources' standard units (`SumTotalRequests`).
fn total_requests(queued: &QueuedWorkload) -> ResourceUsage {
    let mut total = ResourceUsage::new();
    for pod_set in &queued.info.total_requests {
        for (resource, value) in &pod_set.requests {
            *total.entry(resource.clone()).or_default() +=
                Amount::new(*value).as_approximate_f64(resource);
        }
    }
    total
}

/// blockAdmission: whether it is on, and whether an admitted Workload is not `PodsReady`.
#[derive(Clone, Copy)]
struct Blocking {
    block: bool,
    blocked: bool,
}

/// Runs scheduling cycles: each pops at most one head per ClusterQueue and decides on a
/// fresh copy of the snapshot, as Kueue's cycles each take one from its cache; only
/// admissions (and the evictions issued) carry over to the next. A cycle that decides
/// nothing new ends the pass; the rest waits for a change or the next pass. With
/// blockAdmission, a Workload that would be admitted while an admitted one is not
/// `PodsReady` (one admitted earlier in the pass included) waits with `WaitingForPodsReady`.
#[allow(clippy::too_many_arguments)]
fn run_cycles(
    mut base: Snapshot,
    queues: &mut QueueManager,
    mut fairness: Option<(&AdmissionFairSharing, &mut Ledger)>,
    world: &World<'_>,
    decided: &mut Decided,
    mut blocking: Blocking,
    now: SystemTime,
) {
    let mut seen: BTreeSet<(String, u8)> = BTreeSet::new();
    for _ in 0..=world.pending.len() {
        let decisions = schedule_on_copy(&mut base, queues, now);
        let mut news = false;
        for decision in decisions {
            match decision {
                Decision::Admit {
                    workload,
                    admission,
                } => {
                    news |= seen.insert((workload.clone(), 0));
                    if blocking.blocked {
                        let waiting = Outcome::Pending {
                            reason: pods_ready::WAITING_FOR_PODS_READY.to_owned(),
                            message: pods_ready::WAITING_FOR_PODS_READY_MESSAGE.to_owned(),
                            looked_at: false,
                        };
                        decided.outcomes.insert(workload, waiting);
                        continue;
                    }
                    blocking.blocked = blocking.block;
                    if let Some(queued) = world.queued(&workload) {
                        if let Some((config, ledger)) = fairness.as_mut() {
                            let requests = total_requests(queued);
                            let local_queue = queued.local_queue_key();
                            ledger.push_penalty(&local_queue, &workload, &requests, config);
                            queues.ordering.local_queue_usage = ledger.ordering_usage(config);
                        }
                        let usage = admission_usage(&admission);
                        if let Some(id) = base.tree.cluster_queue(&admission.cluster_queue) {
                            base.tree.add_usages(id, &usage);
                        }
                        base.tas.add_admission(
                            &workload,
                            &admission,
                            &queued.info.workload.pod_sets,
                        );
                        base.admitted
                            .push(admitted_workload(queued, &admission, &usage, now));
                        let admitted = (admission.cluster_queue.clone(), usage);
                        decided.admitted.insert(workload.clone(), admitted);
                    }
                    decided
                        .outcomes
                        .insert(workload, Outcome::Admitted(admission));
                }
                Decision::Preempt {
                    workload,
                    victims,
                    pending,
                } => {
                    news |= seen.insert((workload.clone(), 1));
                    let preemptor_priority = world
                        .queued(&workload)
                        .map_or(0, |q| i64::from(q.info.workload.priority));
                    for target in victims {
                        if let Some(candidate) = base
                            .admitted
                            .iter_mut()
                            .find(|a| a.key() == target.workload)
                        {
                            candidate.evicted = true;
                        }
                        let victim = Victim {
                            reason: target.reason.as_str().to_owned(),
                            message: target.message,
                            preemptor_priority,
                        };
                        decided.victims.insert(target.workload, victim);
                    }
                    decided.outcomes.insert(workload, pending.into());
                }
                Decision::Requeue {
                    workload, pending, ..
                } => {
                    news |= seen.insert((workload.clone(), 2));
                    decided.outcomes.insert(workload, pending.into());
                }
            }
        }
        if !news {
            break;
        }
    }
}

/// One cycle on a copy of `base`, as if `base` were cloned, without copying the admitted
/// Workloads (the preemption candidates, as many as the Workloads holding quota): the cycle
/// only reads them, except that between the rounds of a multi-head cycle it appends that
/// cycle's admissions, which are dropped here, and marks the victims of its `Preempt`
/// decisions evicted, which `run_cycles` marks in `base` all the same. So a pass that admits
/// N Workloads one cycle at a time neither copies nor walks N candidates N times.
fn schedule_on_copy(
    base: &mut Snapshot,
    queues: &mut QueueManager,
    now: SystemTime,
) -> Vec<Decision> {
    let admitted = std::mem::take(&mut base.admitted);
    let mut snapshot = base.clone();
    let kept = admitted.len();
    snapshot.admitted = admitted;
    let decisions = cycle::schedule(&mut snapshot, queues, &KueuePreemption, now);
    base.admitted = std::mem::take(&mut snapshot.admitted);
    base.admitted.truncate(kept);
    decisions
}

impl From<cycle::Pending> for Outcome {
    fn from(pending: cycle::Pending) -> Outcome {
        Outcome::Pending {
            reason: pending.reason,
            message: pending.message,
            looked_at: true,
        }
    }
}

/// What a pass writes to Workloads.
struct WorkloadWrites {
    statuses: Vec<StatusWrite>,
    events: Vec<Event>,
    /// `spec.active: false` for the Workloads waitForPodsReady deactivates.
    deactivations: Vec<StatusWrite>,
}

/// The Workload writes of a pass: what the cycles decided (admissions, pending conditions,
/// evictions of victims), then each Workload's own steps — skipped for one `quiet` was quiet
/// for before, when nothing decided here changed it.
fn workload_writes(
    world: &World<'_>,
    queues: &QueueManager,
    decided: &Decided,
    wait: Option<&WaitForPodsReady>,
    quiet: &mut QuietPass,
    now: SystemTime,
) -> WorkloadWrites {
    let mut events = Vec::new();
    let mut deactivations = Vec::new();
    let mut changed = Changed::default();
    for (key, outcome) in &decided.outcomes {
        let Some((object, _)) = world.workloads.get(key.as_str()) else {
            continue;
        };
        match outcome {
            Outcome::Admitted(admission) => {
                let required = world
                    .checks
                    .get(&admission.cluster_queue)
                    .map(|c| c.for_workload(Some(&status::admission_json(admission))))
                    .unwrap_or_default();
                let (checks, _) = admission_checks::sync_states(
                    &admission_checks::states(object),
                    &required,
                    now,
                );
                let [reserved, admitted] = status::admission_events(object, admission, now);
                events.push(reserved);
                if admission_checks::all_ready(&checks) {
                    events.push(admitted);
                }
                let written = status::reserved(object, admission, &checks, now);
                changed.record(key, object, Some(written));
            }
            Outcome::Pending {
                reason,
                message,
                looked_at,
            } => {
                let written = match world.queued(key).filter(|_| *looked_at) {
                    Some(queued) => status::pending_with_requests(
                        object,
                        (reason, message),
                        &queued.info.total_requests,
                        now,
                    ),
                    None => status::pending(object, reason, message, now),
                };
                if written.is_some() {
                    events.push(Event::workload(object, "Warning", reason, message));
                }
                changed.record(key, object, written);
            }
        }
    }
    for (key, victim) in &decided.victims {
        let Some((object, state)) = world.workloads.get(key.as_str()) else {
            continue;
        };
        if let Some(status) = status::preempted(object, &victim.reason, &victim.message, now) {
            let priority = match state.as_ref() {
                WorkloadState::Reserving { workload, .. } => workload.priority,
                _ => 0,
            };
            // The boosts of PriorityBoost (alpha, off) are always 0.
            let message = format!(
                "{}; preemptor effective priority: {} (base: {}, boost: 0); preemptee effective priority: {priority} (base: {priority}, boost: 0)",
                victim.message, victim.preemptor_priority, victim.preemptor_priority
            );
            events.push(Event::workload(object, "Normal", "Preempted", &message));
            changed.record(key, object, Some(status));
        }
    }
    let stop_policies = |local_queue: &str, cluster_queue: Option<&str>| evictions::Queues {
        local_queue: queues
            .local_queues
            .get(local_queue)
            .map(|lq| lq.stop_policy),
        cluster_queue: cluster_queue
            .and_then(|name| world.cluster_queues.get(name))
            .map(|(cq, _)| cq.stop_policy),
    };
    // The Workloads this pass's decisions changed, met in key order by the walk below.
    let decided: Vec<String> = changed.objects.keys().cloned().collect();
    let mut decided = SortedKeys::new(&decided);
    // `record` copies the stored object only for a Workload's first change.
    for (key, (stored, shared)) in &world.workloads {
        // Unchanged by this pass's decisions, its steps read what they read before.
        let unchanged = !decided.contains_next(key);
        if unchanged && quiet.was_quiet(shared) {
            continue;
        }
        let state: &WorkloadState = shared;
        let deactivate = match state {
            WorkloadState::Reserving { active, .. } => pods_ready::must_deactivate(stored, *active),
            WorkloadState::Pending(_) => pods_ready::must_deactivate(stored, true),
            WorkloadState::Finished | WorkloadState::Inactive => false,
        };
        if deactivate {
            deactivations.push(write_for(stored, serde_json::json!({"active": false})));
        }
        let checked = check_states(world, queues, changed.current(key, stored), state, now);
        let answered = deactivate || !checked.status.is_empty() || !checked.events.is_empty();
        events.extend(checked.events);
        if !checked.status.is_empty() {
            changed.record(key, stored, Some(Value::Object(checked.status)));
        }
        let object = changed.current(key, stored);
        let written = match state {
            WorkloadState::Reserving {
                workload,
                local_queue,
                active,
                ..
            } => {
                let stop = with_joined(&workload.namespace, local_queue, |local_queue| {
                    stop_policies(local_queue, Some(&workload.cluster_queue))
                });
                let timeout = wait
                    .filter(|_| *active)
                    .and_then(|wait| pods_ready::not_ready_timeout(object, wait, now));
                let by_target = (!*active)
                    .then(|| pods_ready::deactivated_by_target(object, now))
                    .flatten();
                if let Some(timeout) = timeout {
                    events.extend(timeout.event);
                    Some(timeout.status)
                } else if let Some((status, event)) = by_target {
                    events.push(event);
                    Some(status)
                } else {
                    evictions::eviction(object, *active, stop)
                        .and_then(|(reason, message)| status::evicted(object, reason, message, now))
                }
            }
            WorkloadState::Pending(queued) => {
                let stop = queued.with_local_queue_key(|local_queue| {
                    let cluster_queue = queues
                        .local_queues
                        .get(local_queue)
                        .map(|lq| lq.cluster_queue.as_str());
                    stop_policies(local_queue, cluster_queue)
                });
                evictions::restart(object, stop)
                    .and_then(|(reason, message)| status::requeued(object, reason, message, now))
                    .or_else(|| pods_ready::backoff_finished(object, now))
            }
            WorkloadState::Finished | WorkloadState::Inactive => None,
        };
        if unchanged && !answered && written.is_none() && timeless(stored, state, wait) {
            quiet.quiet(shared);
        }
        changed.record(key, stored, written);
    }
    WorkloadWrites {
        statuses: changed.writes(),
        events,
        deactivations,
    }
}

/// Whether this pass's admission of `key` admits it at once: every check its ClusterQueue
/// requires of the admission is Ready already (none, usually).
fn without_pending_checks(
    world: &World<'_>,
    key: &str,
    admission: &Admission,
    now: SystemTime,
) -> bool {
    let Some((object, _)) = world.workloads.get(key) else {
        return true;
    };
    let required = world
        .checks
        .get(&admission.cluster_queue)
        .map(|c| c.for_workload(Some(&status::admission_json(admission))))
        .unwrap_or_default();
    let (checks, _) =
        admission_checks::sync_states(&admission_checks::states(object), &required, now);
    admission_checks::all_ready(&checks)
}

/// The workload controller's admission-check steps for one Workload (its checks from its
/// ClusterQueue: the admission's, or the LocalQueue's queue while pending).
fn check_states(
    world: &World<'_>,
    queues: &QueueManager,
    object: &Value,
    state: &WorkloadState,
    now: SystemTime,
) -> admission_checks::Reconciled {
    let (cluster_queue, active) = match state {
        WorkloadState::Reserving {
            workload, active, ..
        } => (Some(workload.cluster_queue.as_str()), *active),
        WorkloadState::Pending(queued) => (
            queued.with_local_queue_key(|key| {
                queues
                    .local_queues
                    .get(key)
                    .map(|lq| lq.cluster_queue.as_str())
            }),
            true,
        ),
        WorkloadState::Finished | WorkloadState::Inactive => return Default::default(),
    };
    let admission = object
        .pointer("/status/admission")
        .filter(|a| !a.is_null() && conditions::is_true(object, status::QUOTA_RESERVED));
    let required = cluster_queue
        .and_then(|name| world.checks.get(name))
        .map(|checks| checks.for_workload(admission));
    admission_checks::reconcile(object, required.as_ref(), active, now)
}

/// ClusterQueue and LocalQueue statuses that changed: counts and usage of the Workloads
/// holding quota (this pass's admissions, `admitted_here`, included) and of the pending
/// ones, `Active`, and with fair sharing each ClusterQueue's weighted share, with admission
/// fair sharing each LocalQueue's `status.fairSharing` from `ledger`.
fn queue_statuses(
    world: &World<'_>,
    objects: &Objects,
    (queues, mut pending): (&QueueManager, PendingPerLocalQueue),
    admitted_here: &BTreeMap<String, (String, FlavorResourceQuantities)>,
    (fair_sharing, ledger): (bool, Option<&Ledger>),
    now: SystemTime,
) -> (Vec<StatusWrite>, Vec<StatusWrite>) {
    let mut cq_counts: BTreeMap<String, (Counts, Usage)> = BTreeMap::new();
    let mut lq_counts: BTreeMap<String, (Counts, Usage)> = BTreeMap::new();
    for holder in world.holders.values() {
        for (entry_key, map) in [
            (&holder.cluster_queue, &mut cq_counts),
            (&holder.local_queue, &mut lq_counts),
        ] {
            let (counts, usage) = map.entry(entry_key.clone()).or_default();
            counts.reserving += 1;
            for (key, amount) in holder.usage.iter() {
                usage.reserved.add(key, amount);
                if holder.admitted {
                    usage.admitted.add(key, amount);
                }
            }
            if holder.admitted {
                counts.admitted += 1;
            }
        }
    }
    // The Workloads read pending, but for those this pass admitted: they hold quota now,
    // among the holders above, counted there.
    for key in admitted_here.keys() {
        let Some(queued) = world.queued(key) else {
            continue;
        };
        let index =
            queued.with_local_queue_key(|key| queues.local_queues.keys().position(|k| k == key));
        if let Some(count) = index.and_then(|index| pending.get_mut(index)) {
            *count -= 1;
        }
    }
    for ((local_queue_key, local_queue), count) in queues.local_queues.iter().zip(pending) {
        if count == 0 {
            continue;
        }
        counted(&mut cq_counts, &local_queue.cluster_queue)
            .0
            .pending += count;
        counted(&mut lq_counts, local_queue_key).0.pending += count;
    }
    let shares = if fair_sharing {
        weighted_shares(world)
    } else {
        BTreeMap::new()
    };
    let mut cluster_queues = Vec::new();
    for (name, (cq, object)) in &world.cluster_queues {
        let (counts, usage) = cq_counts.remove(name).unwrap_or_default();
        let nominal: BTreeMap<FlavorResource, Amount> = cq
            .tree
            .quotas
            .iter()
            .map(|(key, quota)| (key.clone(), quota.nominal))
            .collect();
        let active = &world.activity[name];
        if let Some(status) = status::cluster_queue_status(
            object,
            &cq.flavor_resources,
            cq.tree.cohort.as_ref().map(|_| &nominal),
            counts,
            &usage,
            active,
            shares.get(name).copied(),
            now,
        ) {
            cluster_queues.push(write_for(object, status));
        }
    }
    let mut local_queues = Vec::new();
    for object in &objects.local_queues {
        let Some((cluster_queue, stop_policy)) = objects::local_queue(object) else {
            continue;
        };
        let cq = world.cluster_queues.get(&cluster_queue);
        let active = status::local_queue_active(
            stop_policy != StopPolicy::None,
            cq.map(|_| world.is_active(&cluster_queue)),
        );
        let flavors = cq
            .map(|(cq, _)| cq.flavor_resources.clone())
            .unwrap_or_default();
        let key = objects::key(object);
        let (counts, usage) = lq_counts.remove(&key).unwrap_or_default();
        let fair_sharing = ledger.and_then(|ledger| ledger.status(&key));
        if let Some(status) =
            status::local_queue_status(object, &flavors, counts, &usage, &active, fair_sharing, now)
        {
            local_queues.push(write_for(object, status));
        }
    }
    (cluster_queues, local_queues)
}

/// The counts kept for `key`, added when missing (the key copied only then).
fn counted<'m>(
    map: &'m mut BTreeMap<String, (Counts, Usage)>,
    key: &str,
) -> &'m mut (Counts, Usage) {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), Default::default());
    }
    map.get_mut(key).expect("inserted above")
}

/// Each ClusterQueue's `status.fairSharing.weightedShare`: its dominant resource share with
/// the usage of the Workloads holding quota (`ClusterQueueUsageStats`, rounded up).
fn weighted_shares(world: &World<'_>) -> BTreeMap<String, i64> {
    let mut usage: BTreeMap<String, FlavorResourceQuantities> = BTreeMap::new();
    for holder in world.holders.values() {
        add_held(&mut usage, &holder.cluster_queue, &holder.usage);
    }
    let Ok(tree) = Tree::build_with_usage(&world.tree, &usage) else {
        return BTreeMap::new();
    };
    let none = FlavorResourceQuantities::default();
    world
        .cluster_queues
        .keys()
        .filter_map(|name| {
            let id = tree.cluster_queue(name)?;
            let share = tree.dominant_resource_share(id, &none);
            Some((name.clone(), share.rounded_weighted_share().0))
        })
        .collect()
}

fn write_for(object: &Value, status: Value) -> StatusWrite {
    StatusWrite {
        namespace: objects::namespace(object).to_owned(),
        name: objects::name(object).to_owned(),
        status,
    }
}

/// The quota an Admission holds.
fn admission_usage(admission: &Admission) -> FlavorResourceQuantities {
    objects::usage_of(admission.pod_set_assignments.iter().flat_map(|ps| {
        ps.resource_usage.iter().filter_map(|(resource, value)| {
            let flavor = ps.flavors.get(resource)?;
            Some((flavor.as_str(), resource.as_str(), *value))
        })
    }))
}

fn admitted_workload(
    queued: &QueuedWorkload,
    admission: &Admission,
    usage: &FlavorResourceQuantities,
    now: SystemTime,
) -> AdmittedWorkload {
    AdmittedWorkload {
        namespace: queued.info.workload.namespace.clone(),
        name: queued.info.workload.name.clone(),
        uid: queued.uid.clone(),
        cluster_queue: admission.cluster_queue.clone(),
        priority: i64::from(queued.info.workload.priority),
        queue_timestamp: queued.creation,
        quota_reserved_at: Some(now),
        usage: usage.clone(),
        evicted: false,
        local_queue: queued.local_queue.clone(),
        user: queued.user.clone(),
    }
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
