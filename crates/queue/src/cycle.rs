//! One scheduling cycle as Kueue's `pkg/scheduler/scheduler.go` `schedule()` runs it: pop one
//! head per active ClusterQueue, nominate (ClusterQueue and namespace checks, then flavor
//! assignment with the partial-admission search), order the entries (the classic iterator:
//! borrowing level ascending, priority, FIFO; or the fair-sharing tournament of
//! `fair_sharing_iterator.go`: per cohort, not borrowing at that level first, lower dominant
//! resource share with the entry added, priority, FIFO), then process each entry against a
//! snapshot whose usage grows with every admission in the cycle: NoFit is requeued with
//! Kueue's reason and message, Preempt issues the preemptor's targets, Fit admits with the
//! Admission record. Whatever was not admitted goes back to its queue. Time is an input.
//!
//! Preemption is behind [`Preemptor`] (what preemption could achieve for the flavor assigner,
//! and the targets for an assignment); [`KueuePreemption`] is Kueue's, the `preemption`
//! module over the snapshot's admitted Workloads, each ClusterQueue's policy and the
//! fair-sharing configuration. The assigner's oracle and the targets the cycle issues are one
//! [`Oracle`] per entry; when an entry is assigned again because its targets overlap earlier
//! ones, the earlier victims are gone from both the tree and the candidates. Topology-Aware
//! Scheduling runs inside the flavor assigner (`tas::flavors`); an admission adds its
//! placements to the TAS flavors' usage for the rest of the cycle. Admission
//! checks, second passes, workload slices, concurrent admission,
//! waitForPodsReady blocking, LimitRange validation and the failed-admission patch are not
//! modelled; the `NoFit` reason is derived from the assigner's messages (it keeps no attempt
//! log). A recorded flavor search restarts when the ClusterQueue's generation moved on
//! (FlavorFungibilityPreserveScanProgress's one-cycle grace is not modelled). Feature gates
//! are at Kueue's defaults: PartialAdmission, PrioritySortingWithinCohort,
//! FairSharingPrioritizeNonBorrowing and UnadmittedWorkloadsObservability on,
//! PrioritizePreemptorWorkloads off; RecomputeAssignmentUponPreemptionTargetsOverlap (on by
//! default) is the snapshot's `recompute_on_overlap`.
//!
//! Beyond Kueue: a ClusterQueue may give several heads per cycle, one per round (see
//! [`schedule`]); ties fall back to UID then `namespace/name`; a head whose user is at its
//! LocalQueue's per-user limit (`user_limits`) is not nominated; with
//! `PreemptionConfig::topology_aware` a PodSet whose required topology level has no domain
//! with room preempts the lower-priority holders of the cheapest domain to clear
//! (`tas::clearing`), evicting now and admitting on a later cycle as Kueue's preemption does.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tessera_model::selector;

use crate::amount::Amount;
use crate::assigner::{
    Assignment, FlavorAssigner, FlavorAssignmentMode, PodSetReducer, PreemptionOracle,
    PreemptionPossibility,
};
use crate::cluster_queue::{ClusterQueuePolicy, PreemptionPolicy};
use crate::fair_sharing::{Drs, compare_drs};
use crate::flavor::ResourceFlavorSpec;
use crate::preemption::{
    AdmittedWorkload, Oracle, PreemptingWorkload, PreemptionConfig, PreemptionReason,
    Target as QuotaTarget,
};
use crate::queue::{
    Head, LocalQueue, MISCONFIGURED, QueueManager, RequeueReason, RequeuingTimestamp, SUSPENDED,
    WorkloadKey,
};
use crate::resources::{FlavorResource, FlavorResourceQuantities};
use crate::tas::clearing::{Clearing, ClearingRequest};
use crate::tas::flavors::assigned_pod_sets;
use crate::tas::{TOPOLOGY_PLACEMENT_FAILED, TasFlavors, TopologyAssignment};
use crate::tree::{NodeId, NodeKind, Tree};
use crate::user_limits::USER_LIMIT_REACHED;
use crate::workload::WorkloadInfo;

/// `QuotaReserved` False reason: waiting for quota.
pub const WAITING_FOR_QUOTA: &str = "WaitingForQuota";
/// `QuotaReserved` False reason: waiting for preempted workloads to go.
pub const WAITING_FOR_PREEMPTED_WORKLOADS: &str = "WaitingForPreemptedWorkloads";
/// `QuotaReserved` False reason: no flavor matches.
pub const NO_MATCHING_FLAVOR: &str = "NoMatchingFlavor";
/// `QuotaReserved` False reason: the request exceeds what could ever be available.
pub const EXCEEDS_MAX_QUOTA: &str = "ExceedsMaxQuota";
/// The reason Kueue falls back to when it has no finer one.
pub const PENDING: &str = "Pending";

/// A workload preemption would evict (`preemption.Target`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The victim.
    pub workload: WorkloadKey,
    /// Its ClusterQueue.
    pub cluster_queue: String,
    /// The quota it holds.
    pub usage: FlavorResourceQuantities,
    /// Why it is preempted.
    pub reason: PreemptionReason,
    /// The message of its `Evicted` and `Preempted` conditions.
    pub message: String,
}

/// Preemption as the cycle needs it, for the entry `oracle` describes (its Workload, its
/// ClusterQueue's policy, the candidates, the configuration and the time).
pub trait Preemptor {
    /// What preemption could achieve for `quantity` of `key` in `cluster_queue`, and the
    /// borrowing level after it: the flavor assigner's oracle answer.
    fn simulate(
        &self,
        oracle: &Oracle<'_>,
        tree: &Tree,
        cluster_queue: NodeId,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize);

    /// The workloads to preempt so that `assignment` fits (`Preemptor.GetTargets`); empty
    /// when none would do.
    fn targets(&self, oracle: &Oracle<'_>, tree: &Tree, assignment: &Assignment) -> Vec<Target>;

    /// Whether any of `targets` is already being preempted this cycle
    /// (`PreemptedWorkloads.HasAny`).
    fn overlaps(&self, targets: &[Target], earlier: &BTreeMap<WorkloadKey, Target>) -> bool {
        targets.iter().any(|t| earlier.contains_key(&t.workload))
    }
}

/// Kueue's preemption (`preemption`): classic or fair sharing as the snapshot configures it,
/// over its admitted Workloads.
#[derive(Debug, Clone, Copy, Default)]
pub struct KueuePreemption;

impl Preemptor for KueuePreemption {
    fn simulate(
        &self,
        oracle: &Oracle<'_>,
        tree: &Tree,
        cluster_queue: NodeId,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize) {
        oracle.simulate(tree, cluster_queue, key, quantity)
    }

    fn targets(&self, oracle: &Oracle<'_>, tree: &Tree, assignment: &Assignment) -> Vec<Target> {
        oracle
            .targets(tree, assignment)
            .into_iter()
            .map(|target| Target {
                workload: target.workload.key(),
                cluster_queue: target.workload.cluster_queue.clone(),
                usage: target.workload.usage.clone(),
                reason: target.reason,
                message: target.message(tree, oracle.preemptor),
            })
            .collect()
    }
}

/// The flavor assigner's oracle for one entry: `preemptor` answering for `oracle`.
struct EntryOracle<'a> {
    preemptor: &'a dyn Preemptor,
    oracle: Oracle<'a>,
}

impl PreemptionOracle for EntryOracle<'_> {
    fn simulate_preemption(
        &self,
        tree: &Tree,
        cluster_queue: NodeId,
        _workload: &WorkloadInfo,
        key: &FlavorResource,
        quantity: Amount,
    ) -> (PreemptionPossibility, usize) {
        self.preemptor
            .simulate(&self.oracle, tree, cluster_queue, key, quantity)
    }
}

/// A ClusterQueue as the cycle reads it besides its quotas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterQueueSnapshot {
    /// Resource groups, fungibility, preemption policy.
    pub policy: ClusterQueuePolicy,
    /// `spec.namespaceSelector`; `None` selects nothing (`LabelSelectorAsSelector(nil)`).
    pub namespace_selector: Option<LabelSelector>,
    /// `AllocatableResourceGeneration`: a flavor search recorded at an older one restarts.
    pub generation: i64,
}

/// What a cycle reads: the quota tree with admitted usage, the admitted Workloads,
/// ClusterQueues, flavors, namespaces' labels and the fair-sharing configuration.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// ClusterQueues and Cohorts with quotas and usage; admissions in the cycle add to it.
    pub tree: Tree,
    /// ClusterQueues by name.
    pub cluster_queues: BTreeMap<String, ClusterQueueSnapshot>,
    /// ResourceFlavors by name.
    pub flavors: BTreeMap<String, ResourceFlavorSpec>,
    /// Namespace labels by namespace name.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The Workloads holding quota (their usage is in `tree`): the preemption candidates.
    /// Admissions in the cycle add usage only, as Kueue's snapshot does.
    pub admitted: Vec<AdmittedWorkload>,
    /// Classic preemption, or fair sharing (which also orders the entries by the tournament)
    /// with its configuration.
    pub preemption: PreemptionConfig,
    /// The RecomputeAssignmentUponPreemptionTargetsOverlap feature (on by default): an entry
    /// whose targets overlap earlier ones is assigned again as if those were gone, rather than
    /// skipped.
    pub recompute_on_overlap: bool,
    /// The FIFO timestamp.
    pub timestamp: RequeuingTimestamp,
    /// The TAS flavors; admissions in the cycle add their placements' usage.
    pub tas: TasFlavors,
}

impl Snapshot {
    /// Whether fair sharing is on.
    pub fn fair_sharing(&self) -> bool {
        self.preemption.fair_sharing.is_some()
    }
}

/// One PodSet of an Admission (`PodSetAssignment`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSetAdmission {
    /// The PodSet.
    pub name: String,
    /// Flavor per resource.
    pub flavors: BTreeMap<String, String>,
    /// Quota per resource, canonical units.
    pub resource_usage: BTreeMap<String, i64>,
    /// Pods admitted.
    pub count: i32,
    /// Where Topology-Aware Scheduling placed the pods.
    pub topology_assignment: Option<TopologyAssignment>,
}

/// `status.admission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The ClusterQueue.
    pub cluster_queue: String,
    /// Per PodSet, in order.
    pub pod_set_assignments: Vec<PodSetAdmission>,
}

/// The `QuotaReserved` False condition of a Workload left pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// The reason (UnadmittedWorkloadsObservability on; `Pending` when Kueue has none).
    pub reason: String,
    /// The message.
    pub message: String,
}

/// What the cycle decided for one head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Quota reserved.
    Admit {
        /// The Workload.
        workload: WorkloadKey,
        /// Its Admission.
        admission: Admission,
    },
    /// Preemptions issued; the Workload waits for them (and is requeued).
    Preempt {
        /// The preemptor.
        workload: WorkloadKey,
        /// The victims with reasons.
        victims: Vec<Target>,
        /// Its condition.
        pending: Pending,
    },
    /// Put back into its queue.
    Requeue {
        /// The Workload.
        workload: WorkloadKey,
        /// Its condition.
        pending: Pending,
        /// Whether it went to the inadmissible set.
        inadmissible: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    NotNominated,
    Skipped,
    Assumed,
}

struct Entry {
    head: Head,
    cluster_queue: Option<NodeId>,
    assignment: Assignment,
    deferred: bool,
    targets: Vec<Target>,
    status: Status,
    message: String,
    requeue_reason: RequeueReason,
    reason: String,
}

impl Entry {
    fn new(head: Head) -> Entry {
        Entry {
            head,
            cluster_queue: None,
            assignment: Assignment::default(),
            deferred: false,
            targets: Vec::new(),
            status: Status::NotNominated,
            message: String::new(),
            requeue_reason: RequeueReason::Generic,
            reason: String::new(),
        }
    }

    fn mode(&self) -> FlavorAssignmentMode {
        match self.assignment.representative_mode() {
            FlavorAssignmentMode::Fit if self.deferred => FlavorAssignmentMode::DeferredFit,
            mode => mode,
        }
    }

    fn key(&self) -> WorkloadKey {
        self.head.workload.key()
    }

    fn priority(&self) -> i32 {
        self.head.workload.info.workload.priority
    }

    fn skip(&mut self, message: &str) {
        self.status = Status::Skipped;
        self.message = message.to_owned();
        self.reason = WAITING_FOR_QUOTA.to_owned();
    }
}

/// Runs one cycle: pops the heads from `queues`, decides, puts back what was not admitted, and
/// returns the decisions in processing order (then inadmissible entries). `snapshot.tree`
/// keeps the usage of this cycle's admissions and reservations.
///
/// Beyond Kueue: a ClusterQueue whose queue has `heads_per_cycle` N > 1 takes part in N
/// rounds. Each round is one Kueue cycle over the next head of every ClusterQueue still
/// taking part, and between rounds the snapshot is refreshed as Kueue's next cycle would
/// find it with nothing else changed: the tree holds the admissions but not the previous
/// round's reservations, the admitted Workloads join `snapshot.admitted` (reserved at `now`)
/// and the victims are marked evicted. So one cycle with N heads decides exactly what N
/// successive Kueue cycles decide, and the decisions are theirs concatenated (a Workload
/// decided in several rounds, such as a StrictFIFO head that does not fit, appears once per
/// round; apply them in order).
pub fn schedule(
    snapshot: &mut Snapshot,
    queues: &mut QueueManager,
    preemptor: &dyn Preemptor,
    now: SystemTime,
) -> Vec<Decision> {
    let rounds = queues.rounds_per_cycle();
    let mut committed = (rounds > 1).then(|| snapshot.tree.clone());
    let mut decisions = Vec::new();
    for round in 0..rounds {
        let heads = queues.heads_in_round(round);
        if heads.is_empty() {
            break;
        }
        let (round_decisions, admitted) = schedule_round(snapshot, queues, heads, preemptor, now);
        if let Some(committed) = committed.as_mut()
            && round + 1 < rounds
        {
            refresh(snapshot, committed, admitted, &round_decisions);
        }
        decisions.extend(round_decisions);
    }
    decisions
}

/// The snapshot the next round starts from: `committed` (the tree before the cycle plus
/// every admission so far) takes this round's admissions and replaces the tree, so the
/// round's reservations go; the admissions become candidates; the victims are evicted.
fn refresh(
    snapshot: &mut Snapshot,
    committed: &mut Tree,
    admitted: Vec<AdmittedWorkload>,
    decisions: &[Decision],
) {
    for workload in &admitted {
        if let Some(id) = committed.cluster_queue(&workload.cluster_queue) {
            committed.add_usages(id, &workload.usage);
        }
    }
    snapshot.tree = committed.clone();
    snapshot.admitted.extend(admitted);
    let victims: BTreeSet<&WorkloadKey> = decisions
        .iter()
        .filter_map(|decision| match decision {
            Decision::Preempt { victims, .. } => Some(victims.iter().map(|t| &t.workload)),
            _ => None,
        })
        .flatten()
        .collect();
    if victims.is_empty() {
        return;
    }
    for workload in &mut snapshot.admitted {
        if victims.contains(&workload.key()) {
            workload.evicted = true;
        }
    }
}

/// One Kueue cycle over `heads`: the decisions, and the Workloads it admitted as preemption
/// sees them.
fn schedule_round(
    snapshot: &mut Snapshot,
    queues: &mut QueueManager,
    heads: Vec<Head>,
    preemptor: &dyn Preemptor,
    now: SystemTime,
) -> (Vec<Decision>, Vec<AdmittedWorkload>) {
    let (entries, inadmissible) = nominate(snapshot, &queues.local_queues, heads, preemptor, now);
    let order = if snapshot.fair_sharing() {
        fair_sharing_order(snapshot, &entries)
    } else {
        classic_order(snapshot, &entries)
    };
    let mut entries: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    let mut preempted: BTreeMap<WorkloadKey, Target> = BTreeMap::new();
    let mut decisions = Vec::new();
    let mut processed = Vec::new();
    for index in order {
        let Some(mut entry) = entries.get_mut(index).and_then(Option::take) else {
            continue;
        };
        if let Some(decision) = process_entry(snapshot, &mut entry, &mut preempted, preemptor, now)
        {
            decisions.push(decision);
        }
        processed.push(entry);
    }
    // Every nominated entry is in `order`; any that were not stay pending all the same.
    let unprocessed = entries.into_iter().flatten();
    let mut admitted = Vec::new();
    for entry in processed.into_iter().chain(unprocessed).chain(inadmissible) {
        if entry.status == Status::Assumed {
            admitted.push(admitted_workload(snapshot, &entry, now));
            continue;
        }
        if let Some(decision) = requeue(queues, entry, now) {
            decisions.push(decision);
        }
    }
    (decisions, admitted)
}

/// An entry admitted at `now`, as the next cycle's snapshot holds it.
fn admitted_workload(snapshot: &Snapshot, entry: &Entry, now: SystemTime) -> AdmittedWorkload {
    let workload = &entry.head.workload;
    AdmittedWorkload {
        namespace: workload.info.workload.namespace.clone(),
        name: workload.info.workload.name.clone(),
        uid: workload.uid.clone(),
        cluster_queue: entry.head.cluster_queue.clone(),
        local_queue: workload.local_queue.clone(),
        user: workload.user.clone(),
        priority: i64::from(workload.info.workload.priority),
        queue_timestamp: workload.queue_order_timestamp(snapshot.timestamp),
        quota_reserved_at: Some(now),
        usage: entry.assignment.usage.clone(),
        evicted: false,
    }
}

fn nominate(
    snapshot: &Snapshot,
    local_queues: &BTreeMap<String, LocalQueue>,
    heads: Vec<Head>,
    preemptor: &dyn Preemptor,
    now: SystemTime,
) -> (Vec<Entry>, Vec<Entry>) {
    let mut entries = Vec::new();
    let mut inadmissible = Vec::new();
    for head in heads {
        let mut entry = Entry::new(head);
        let name = entry.head.cluster_queue.clone();
        let namespace = entry.head.workload.info.workload.namespace.clone();
        let cq = snapshot.cluster_queues.get(&name);
        let id = snapshot.tree.cluster_queue(&name);
        if snapshot.tree.inactive_cluster_queues().contains(&name) {
            entry.message = format!("ClusterQueue {name} is inactive");
            entry.reason = SUSPENDED.to_owned();
        } else if let (Some(cq), Some(id)) = (cq, id) {
            match snapshot.namespaces.get(&namespace) {
                None => {
                    entry.message = format!(
                        "workload namespace \"{namespace}\" does not exist: namespaces \"{namespace}\" not found"
                    );
                    entry.reason = MISCONFIGURED.to_owned();
                }
                Some(labels)
                    if !cq
                        .namespace_selector
                        .as_ref()
                        .is_some_and(|s| selector::matches_typed(s, labels)) =>
                {
                    entry.message =
                        "workload namespace doesn't match ClusterQueue selector".to_owned();
                    entry.reason = MISCONFIGURED.to_owned();
                    entry.requeue_reason = RequeueReason::NamespaceMismatch;
                }
                Some(_) => match user_limit_refusal(snapshot, local_queues, &entry.head) {
                    Some(message) => {
                        entry.message = message;
                        entry.reason = USER_LIMIT_REACHED.to_owned();
                    }
                    None => {
                        let workload = &mut entry.head.workload;
                        if workload.last_assignment_generation < cq.generation {
                            workload.info.last_assignment = None;
                        }
                        let (assignment, targets) = assignments(
                            snapshot,
                            &snapshot.admitted,
                            cq,
                            &entry.head,
                            preemptor,
                            now,
                        );
                        record_assignment(&mut entry, assignment, targets, cq.generation);
                        entry.cluster_queue = Some(id);
                        entries.push(entry);
                        continue;
                    }
                },
            }
        } else {
            entry.message = format!("ClusterQueue {name} not found");
            entry.reason = MISCONFIGURED.to_owned();
        }
        inadmissible.push(entry);
    }
    (entries, inadmissible)
}

/// Why the head's user may not have another Workload admitted from its LocalQueue, if so.
fn user_limit_refusal(
    snapshot: &Snapshot,
    local_queues: &BTreeMap<String, LocalQueue>,
    head: &Head,
) -> Option<String> {
    let workload = &head.workload;
    let user = workload.user.as_deref()?;
    local_queues
        .get(&workload.local_queue_key())?
        .user_limits
        .refusal(
            &workload.info.workload.namespace,
            &workload.local_queue,
            user,
            &workload.info,
            &snapshot.admitted,
        )
}

fn record_assignment(
    entry: &mut Entry,
    assignment: Assignment,
    targets: Vec<Target>,
    generation: i64,
) {
    entry.message = assignment.message();
    entry.head.workload.info.last_assignment = Some(assignment.last_state.clone());
    entry.head.workload.last_assignment_generation = generation;
    entry.assignment = assignment;
    entry.targets = targets;
}

/// The Workload as preemption sees it.
fn preempting_workload(snapshot: &Snapshot, head: &Head) -> PreemptingWorkload {
    PreemptingWorkload {
        uid: head.workload.uid.clone(),
        job_uid: head.workload.job_uid.clone(),
        priority: i64::from(head.workload.info.workload.priority),
        queue_timestamp: head.workload.queue_order_timestamp(snapshot.timestamp),
        cluster_queue: head.cluster_queue.clone(),
    }
}

/// The full assignment, its preemption targets among `admitted`, or the partial admission
/// that fits (`getInitialAssignments`). `head`'s ClusterQueue must be in the tree.
fn assignments(
    snapshot: &Snapshot,
    admitted: &[AdmittedWorkload],
    cq: &ClusterQueueSnapshot,
    head: &Head,
    preemptor: &dyn Preemptor,
    now: SystemTime,
) -> (Assignment, Vec<Target>) {
    let Some(id) = snapshot.tree.cluster_queue(&head.cluster_queue) else {
        return (Assignment::default(), Vec::new());
    };
    let info = &head.workload.info;
    let preempting = preempting_workload(snapshot, head);
    let oracle = Oracle {
        config: &snapshot.preemption,
        admitted,
        preemptor: &preempting,
        policy: &cq.policy.preemption,
        now,
    };
    let entry_oracle = EntryOracle { preemptor, oracle };
    let assigner = FlavorAssigner {
        workload: info,
        tree: &snapshot.tree,
        cluster_queue: id,
        policy: &cq.policy,
        flavors: &snapshot.flavors,
        fair_sharing: snapshot.fair_sharing(),
        oracle: &entry_oracle,
        tas: &snapshot.tas,
    };
    let admissible = |assignment: Assignment| match assignment.representative_mode() {
        FlavorAssignmentMode::Fit => Some((assignment, Vec::new())),
        FlavorAssignmentMode::Preempt => {
            let mut targets = preemptor.targets(&oracle, &snapshot.tree, &assignment);
            if snapshot.preemption.topology_aware {
                let input = TopologyInput {
                    snapshot,
                    cluster_queue: id,
                    cq,
                    head,
                    preempting: &preempting,
                    admitted,
                    now,
                };
                targets = topology_aware_targets(&input, &assignment, targets);
            }
            (!targets.is_empty()).then_some((assignment, targets))
        }
        _ => None,
    };
    let full = assigner.assign(None);
    if let Some(found) = admissible(full.clone()) {
        return found;
    }
    if info.workload.can_be_partially_admitted() {
        let reducer = PodSetReducer::new(
            info.workload
                .pod_sets
                .iter()
                .map(|ps| (ps.count, ps.min_count)),
        );
        if let Some(found) = reducer.search(|counts| admissible(assigner.assign(Some(counts)))) {
            return found;
        }
    }
    (full, Vec::new())
}

/// What topology-aware preemption reads about one entry.
struct TopologyInput<'a> {
    snapshot: &'a Snapshot,
    cluster_queue: NodeId,
    cq: &'a ClusterQueueSnapshot,
    head: &'a Head,
    preempting: &'a PreemptingWorkload,
    /// The candidates (without this cycle's victims when assigning again).
    admitted: &'a [AdmittedWorkload],
    now: SystemTime,
}

/// Beyond Kueue (`PreemptionConfig::topology_aware`): the targets once the topology is
/// counted. Kueue's quota `targets` stand when quota needs them (they leave first); when
/// quota alone fits they are dropped, since this port's quota preemption picks them without
/// looking at the topology. Then, if a PodSet's required level still has no domain with room,
/// the victims `tas::clearing` chooses are added; if no domain can be cleared nothing is
/// preempted (Kueue's own preemption, which checks the topology, would find nothing either).
/// Without a required level Kueue's targets are returned unchanged.
fn topology_aware_targets(
    input: &TopologyInput<'_>,
    assignment: &Assignment,
    targets: Vec<Target>,
) -> Vec<Target> {
    let snapshot = input.snapshot;
    let quota_fits = snapshot.tree.fits(input.cluster_queue, &assignment.usage);
    let quota_targets = if quota_fits {
        Vec::new()
    } else {
        targets.clone()
    };
    let mut leaving: BTreeSet<String> = quota_targets
        .iter()
        .map(|target| target.workload.clone())
        .collect();
    // Victims of this cycle dropped from the candidates when the entry is assigned again
    // (the candidates are then fewer than the snapshot's; otherwise they are its very list).
    if !std::ptr::eq(input.admitted, snapshot.admitted.as_slice()) {
        let candidates: BTreeSet<String> =
            input.admitted.iter().map(AdmittedWorkload::key).collect();
        leaving.extend(
            snapshot
                .admitted
                .iter()
                .map(AdmittedWorkload::key)
                .filter(|key| !candidates.contains(key)),
        );
    }
    let pod_sets = assigned_pod_sets(assignment, &input.head.workload.info.workload.pod_sets);
    let request = ClearingRequest {
        tas: &snapshot.tas,
        pod_sets: &pod_sets,
        tas_only: snapshot.tas.tas_only(&input.cq.policy.resource_groups),
        candidates: input.admitted,
        leaving: &leaving,
        preemptor: input.preempting,
        policy: &input.cq.policy.preemption,
        tree: &snapshot.tree,
        min_runtime: snapshot.preemption.min_runtime_before_preemption,
        now: input.now,
    };
    match request.clear() {
        Clearing::NoRequiredLevel => targets,
        Clearing::Impossible => Vec::new(),
        Clearing::Clear(victims) => {
            let mut all = quota_targets;
            for (workload, reason) in victims {
                if all.iter().any(|target| target.workload == workload.key()) {
                    continue;
                }
                let quota_target = QuotaTarget { workload, reason };
                all.push(Target {
                    workload: workload.key(),
                    cluster_queue: workload.cluster_queue.clone(),
                    usage: workload.usage.clone(),
                    reason,
                    message: quota_target.message(&snapshot.tree, input.preempting),
                });
            }
            all
        }
    }
}

fn queue_order_timestamp(snapshot: &Snapshot, entry: &Entry) -> SystemTime {
    entry
        .head
        .workload
        .queue_order_timestamp(snapshot.timestamp)
}

/// Entry indices in the classic order (`makeClassicalIterator`), ties broken by UID then
/// `namespace/name`.
fn classic_order(snapshot: &Snapshot, entries: &[Entry]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&entries[a], &entries[b]);
        a.assignment
            .borrowing
            .cmp(&b.assignment.borrowing)
            .then_with(|| b.priority().cmp(&a.priority()))
            .then_with(|| {
                queue_order_timestamp(snapshot, a).cmp(&queue_order_timestamp(snapshot, b))
            })
            .then_with(|| a.head.workload.tie_break(&b.head.workload))
    });
    order
}

/// Entry indices in the fair-sharing tournament's order (`fairSharingIterator`): a
/// ClusterQueue without a cohort goes as it comes; otherwise its root cohort runs a
/// tournament, and the winner goes first. ClusterQueues are taken in name order where Kueue
/// takes a map's arbitrary first.
fn fair_sharing_order(snapshot: &Snapshot, entries: &[Entry]) -> Vec<usize> {
    let tree = &snapshot.tree;
    let mut remaining: BTreeMap<NodeId, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| Some((e.cluster_queue?, i)))
        .collect();
    let mut by_name: Vec<(String, NodeId)> = remaining
        .keys()
        .map(|id| (tree.name(*id).to_owned(), *id))
        .collect();
    by_name.sort();
    let mut order = Vec::new();
    while let Some((_, first)) = by_name.iter().find(|(_, id)| remaining.contains_key(id)) {
        let first = *first;
        let winner = match tree.parent(first) {
            None => first,
            Some(parent) => tournament(snapshot, tree.root(parent), entries, &remaining),
        };
        // The tournament only returns ClusterQueues with entries; `first` keeps the loop
        // going should it not.
        if let Some(index) = remaining
            .remove(&winner)
            .or_else(|| remaining.remove(&first))
        {
            order.push(index);
        }
    }
    order
}

/// Per (cohort, entry) shares with the entry's usage added (`computeDRS`).
struct Shares {
    drs: BTreeMap<(NodeId, usize), Drs>,
    requested: BTreeMap<usize, FlavorResourceQuantities>,
}

fn compute_shares(
    snapshot: &Snapshot,
    root: NodeId,
    entries: &[Entry],
    remaining: &BTreeMap<NodeId, usize>,
) -> Shares {
    let mut tree = snapshot.tree.clone();
    let mut shares = Shares {
        drs: BTreeMap::new(),
        requested: BTreeMap::new(),
    };
    let none = FlavorResourceQuantities::new();
    for cq in tree.subtree_cluster_queues(root) {
        let Some(&index) = remaining.get(&cq) else {
            continue;
        };
        let usage = &entries[index].assignment.usage;
        tree.add_usages(cq, usage);
        let mut drs = tree.dominant_resource_share(cq, &none);
        let ancestors: Vec<NodeId> = tree.ancestors(cq).collect();
        for ancestor in ancestors {
            shares.drs.insert((ancestor, index), drs);
            drs = tree.dominant_resource_share(ancestor, &none);
        }
        tree.remove_usages(cq, usage);
        shares.requested.insert(index, usage.clone());
    }
    shares
}

/// The winner under `root`, children before parents (`runTournament`, iteratively).
fn tournament(
    snapshot: &Snapshot,
    root: NodeId,
    entries: &[Entry],
    remaining: &BTreeMap<NodeId, usize>,
) -> NodeId {
    let tree = &snapshot.tree;
    let shares = compute_shares(snapshot, root, entries, remaining);
    let mut best: BTreeMap<NodeId, (NodeId, usize)> = BTreeMap::new();
    for cohort in tree.breadth_first(&[root]).into_iter().rev() {
        if tree.kind(cohort) == NodeKind::ClusterQueue {
            continue;
        }
        let candidates = tree
            .child_cohorts(cohort)
            .iter()
            .filter_map(|child| best.get(child).copied())
            .chain(
                tree.child_cluster_queues(cohort)
                    .iter()
                    .filter_map(|cq| Some((*cq, *remaining.get(cq)?))),
            );
        let winner = candidates.reduce(|winner, current| {
            if less(snapshot, &shares, entries, current.1, winner.1, cohort) {
                current
            } else {
                winner
            }
        });
        if let Some(winner) = winner {
            best.insert(cohort, winner);
        }
    }
    best.get(&root).map_or(root, |(cq, _)| *cq)
}

/// `entryComparer.less` at `cohort`, ties broken by UID then `namespace/name`.
fn less(
    snapshot: &Snapshot,
    shares: &Shares,
    entries: &[Entry],
    a: usize,
    b: usize,
    cohort: NodeId,
) -> bool {
    let negative = Drs::negative();
    let drs = |i: usize| shares.drs.get(&(cohort, i)).unwrap_or(&negative);
    let none = FlavorResourceQuantities::new();
    let borrowing = |i: usize| drs(i).is_borrowing_on(shares.requested.get(&i).unwrap_or(&none));
    let (a_borrowing, b_borrowing) = (borrowing(a), borrowing(b));
    if a_borrowing != b_borrowing {
        return !a_borrowing;
    }
    match compare_drs(drs(a), drs(b)) {
        Ordering::Less => return true,
        Ordering::Greater => return false,
        Ordering::Equal => {}
    }
    let (a, b) = (&entries[a], &entries[b]);
    if a.priority() != b.priority() {
        return a.priority() > b.priority();
    }
    queue_order_timestamp(snapshot, a)
        .cmp(&queue_order_timestamp(snapshot, b))
        .then_with(|| a.head.workload.tie_break(&b.head.workload))
        .is_lt()
}

/// Removes the victims' usage from their ClusterQueues; the returned list puts it back.
fn remove_victims(
    tree: &mut Tree,
    victims: &BTreeMap<WorkloadKey, Target>,
) -> Vec<(NodeId, FlavorResourceQuantities)> {
    let removed: Vec<(NodeId, FlavorResourceQuantities)> = victims
        .values()
        .filter_map(|t| Some((tree.cluster_queue(&t.cluster_queue)?, t.usage.clone())))
        .collect();
    for (id, usage) in &removed {
        tree.remove_usages(*id, usage);
    }
    removed
}

fn restore(tree: &mut Tree, removed: Vec<(NodeId, FlavorResourceQuantities)>) {
    for (id, usage) in removed {
        tree.add_usages(id, &usage);
    }
}

/// Whether `usage` fits with this cycle's victims and `targets` gone (`fits`).
fn fits(
    tree: &mut Tree,
    id: NodeId,
    usage: &FlavorResourceQuantities,
    preempted: &BTreeMap<WorkloadKey, Target>,
    targets: &[Target],
) -> bool {
    let mut merged = preempted.clone();
    for target in targets {
        merged.insert(target.workload.clone(), target.clone());
    }
    let removed = remove_victims(tree, &merged);
    let fits = tree.fits(id, usage);
    restore(tree, removed);
    fits
}

/// `processEntry`: decides one nominated entry against the snapshot.
fn process_entry(
    snapshot: &mut Snapshot,
    entry: &mut Entry,
    preempted: &mut BTreeMap<WorkloadKey, Target>,
    preemptor: &dyn Preemptor,
    now: SystemTime,
) -> Option<Decision> {
    let id = entry.cluster_queue?;
    let name = entry.head.cluster_queue.clone();
    let cq = snapshot.cluster_queues.get(&name)?.clone();
    let mut usage = entry.assignment.usage.clone();
    let mut fit = fits(&mut snapshot.tree, id, &usage, preempted, &entry.targets);
    if snapshot.recompute_on_overlap && preemptor.overlaps(&entry.targets, preempted) {
        // RecomputeAssignmentUponPreemptionTargetsOverlap: assign again as if the other
        // preemptions had completed (`SimulateWorkloadRemoval`: usage and candidates).
        let removed = remove_victims(&mut snapshot.tree, preempted);
        let remaining: Vec<AdmittedWorkload> = snapshot
            .admitted
            .iter()
            .filter(|workload| !preempted.contains_key(&workload.key()))
            .cloned()
            .collect();
        entry.head.workload.info.last_assignment = None;
        let (assignment, targets) =
            assignments(snapshot, &remaining, &cq, &entry.head, preemptor, now);
        restore(&mut snapshot.tree, removed);
        record_assignment(entry, assignment, targets, cq.generation);
        entry.deferred = entry.assignment.representative_mode() == FlavorAssignmentMode::Fit;
        usage = entry.assignment.usage.clone();
        fit = fits(&mut snapshot.tree, id, &usage, preempted, &entry.targets);
    }
    let mode = entry.mode();
    if mode == FlavorAssignmentMode::NoFit {
        entry.requeue_reason = RequeueReason::NoFit;
        entry.reason = no_fit_reason(&entry.assignment, &cq.policy).to_owned();
        return None;
    }
    if mode == FlavorAssignmentMode::Preempt && entry.targets.is_empty() {
        entry.requeue_reason = RequeueReason::PreemptionNoCandidates;
        entry.reason = WAITING_FOR_QUOTA.to_owned();
        if cq.policy.preemption.reclaim_within_cohort != PreemptionPolicy::Any {
            let reserved = resources_to_reserve(&snapshot.tree, id, &entry.assignment);
            snapshot.tree.add_usages(id, &reserved);
        }
        return None;
    }
    if mode == FlavorAssignmentMode::DeferredFit {
        entry.message = "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete".to_owned();
        entry.reason = WAITING_FOR_PREEMPTED_WORKLOADS.to_owned();
        entry.requeue_reason = RequeueReason::PendingPreemption;
        entry.head.workload.info.last_assignment = None;
        snapshot.tree.add_usages(id, &usage);
        return None;
    }
    if preemptor.overlaps(&entry.targets, preempted) {
        entry.skip("Workload has overlapping preemption targets with another workload");
        return None;
    }
    if !fit {
        entry.skip("Workload no longer fits after processing another workload");
        return None;
    }
    for target in &entry.targets {
        preempted.insert(target.workload.clone(), target.clone());
    }
    snapshot.tree.add_usages(id, &usage);
    if mode == FlavorAssignmentMode::Preempt {
        entry.reason = WAITING_FOR_PREEMPTED_WORKLOADS.to_owned();
        entry.head.workload.info.last_assignment = None;
        entry.message += &format!(
            ". Pending the preemption of {} workload(s)",
            entry.targets.len()
        );
        entry.requeue_reason = RequeueReason::PendingPreemption;
        return Some(Decision::Preempt {
            workload: entry.key(),
            victims: entry.targets.clone(),
            pending: pending(entry),
        });
    }
    let pod_sets = &entry.head.workload.info.workload.pod_sets;
    snapshot
        .tas
        .add_admitted(&entry.key(), &entry.assignment, pod_sets);
    entry.status = Status::Assumed;
    Some(Decision::Admit {
        workload: entry.key(),
        admission: admission(&name, &entry.assignment),
    })
}

/// The Admission record (`Assignment.ToAPI`): flavors and usage of the resources that got a
/// flavor.
fn admission(cluster_queue: &str, assignment: &Assignment) -> Admission {
    Admission {
        cluster_queue: cluster_queue.to_owned(),
        pod_set_assignments: assignment
            .pod_sets
            .iter()
            .map(|ps| PodSetAdmission {
                name: ps.name.clone(),
                flavors: ps
                    .flavors
                    .iter()
                    .map(|(resource, flavor)| (resource.clone(), flavor.name.clone()))
                    .collect(),
                resource_usage: ps
                    .flavors
                    .keys()
                    .map(|resource| {
                        let value = ps.requests.get(resource).copied().unwrap_or_default();
                        (resource.clone(), value)
                    })
                    .collect(),
                count: ps.count,
                topology_assignment: ps.topology.as_ref().map(|t| t.assignment.clone()),
            })
            .collect(),
    }
}

/// What a preempting workload without targets holds back so that others cannot borrow it
/// (`quotaResourcesToReserve`): up to its borrowing limit when it would borrow, else up to
/// its nominal quota.
fn resources_to_reserve(
    tree: &Tree,
    id: NodeId,
    assignment: &Assignment,
) -> FlavorResourceQuantities {
    assignment
        .usage
        .iter()
        .map(|(key, usage)| {
            let quota = tree.quota(id, key);
            let used = tree.usage(id).get(key);
            let reserved = if assignment.borrowing > 0 {
                match quota.borrowing_limit {
                    None => usage,
                    Some(limit) => usage.min(quota.nominal + limit - used),
                }
            } else {
                usage.min(quota.nominal - used).max(Amount::ZERO)
            };
            (key.clone(), reserved)
        })
        .collect()
}

fn severity(reason: &str) -> u8 {
    match reason {
        NO_MATCHING_FLAVOR => 4,
        EXCEEDS_MAX_QUOTA => 3,
        WAITING_FOR_QUOTA => 2,
        TOPOLOGY_PLACEMENT_FAILED => 1,
        _ => 0,
    }
}

fn most_severe<'a>(a: &'a str, b: &'a str) -> &'a str {
    if severity(a) >= severity(b) { a } else { b }
}

/// The flavor a reason of the assigner names and the reason code it stands for.
fn classify(reason: &str) -> Option<(&str, &'static str)> {
    if let Some(rest) = reason.strip_prefix("insufficient unused quota for ") {
        let flavor = rest.split(" in flavor ").nth(1)?.split(',').next()?;
        return Some((flavor, WAITING_FOR_QUOTA));
    }
    if let Some(rest) = reason.strip_prefix("insufficient quota for ") {
        let flavor = rest.split(" in flavor ").nth(1)?.split(',').next()?;
        return Some((flavor, EXCEEDS_MAX_QUOTA));
    }
    if reason.starts_with("untolerated taint ") {
        return Some((reason.rsplit(" in flavor ").next()?, NO_MATCHING_FLAVOR));
    }
    let flavor = reason.strip_prefix("flavor ")?;
    let flavor = flavor
        .strip_suffix(" doesn't match node affinity")
        .or_else(|| flavor.strip_suffix(" not found"))?;
    Some((flavor, NO_MATCHING_FLAVOR))
}

/// Why a NoFit assignment does not fit (`resolveNoFitReason`): per NoFit PodSet, the least
/// severe flavor of each resource group (the alternatives), the most severe across groups
/// and PodSets; a PodSet with no flavor tried is `NoMatchingFlavor`.
fn no_fit_reason(assignment: &Assignment, policy: &ClusterQueuePolicy) -> &'static str {
    let mut overall = "";
    for ps in &assignment.pod_sets {
        if ps.representative_mode() != FlavorAssignmentMode::NoFit {
            continue;
        }
        let mut per_flavor: BTreeMap<&str, &'static str> = BTreeMap::new();
        if let Some(flavor) = &ps.topology_failed_in {
            per_flavor.insert(flavor, TOPOLOGY_PLACEMENT_FAILED);
        }
        for reason in &ps.status.reasons {
            if let Some((flavor, code)) = classify(reason) {
                let worst = per_flavor.entry(flavor).or_insert(code);
                *worst = most_severe(worst, code);
            }
        }
        if per_flavor.is_empty() {
            overall = most_severe(overall, NO_MATCHING_FLAVOR);
            continue;
        }
        let mut per_group: BTreeMap<isize, &'static str> = BTreeMap::new();
        for (i, (flavor, code)) in per_flavor.iter().enumerate() {
            let groups: Vec<isize> = policy
                .resource_groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.flavors.iter().any(|f| f == flavor))
                .map(|(g, _)| isize::try_from(g).unwrap_or(isize::MAX))
                .collect();
            let groups = if groups.is_empty() {
                vec![-1 - isize::try_from(i).unwrap_or(0)]
            } else {
                groups
            };
            for group in groups {
                let least = per_group.entry(group).or_insert(code);
                if severity(code) < severity(least) {
                    *least = code;
                }
            }
        }
        for code in per_group.values() {
            overall = most_severe(overall, code);
        }
    }
    overall
}

fn pending(entry: &Entry) -> Pending {
    let reason = if entry.reason.is_empty() {
        PENDING.to_owned()
    } else {
        entry.reason.clone()
    };
    Pending {
        reason,
        message: entry.message.clone(),
    }
}

/// `requeueAndUpdate`: puts the Workload back and reports its condition.
fn requeue(queues: &mut QueueManager, mut entry: Entry, now: SystemTime) -> Option<Decision> {
    if entry.status != Status::NotNominated && entry.requeue_reason == RequeueReason::Generic {
        entry.requeue_reason = RequeueReason::FailedAfterNomination;
    }
    let key = entry.key();
    let name = entry.head.cluster_queue.clone();
    let pending = pending(&entry);
    let preempting = entry.requeue_reason == RequeueReason::PendingPreemption
        && entry.mode() == FlavorAssignmentMode::Preempt;
    queues.requeue(entry.head, entry.requeue_reason, now);
    if preempting {
        return None;
    }
    let inadmissible = queues
        .cluster_queues
        .get(&name)
        .is_some_and(|queue| queue.is_inadmissible(&key));
    Some(Decision::Requeue {
        workload: key,
        pending,
        inadmissible,
    })
}

#[cfg(test)]
#[path = "cycle_tests.rs"]
mod tests;
