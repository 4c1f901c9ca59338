//! Kueue's scheduler-performance run (`test/performance/scheduler`) on a virtual clock: the
//! Workloads a generator configuration plans (`queue_scenario`) arrive at their creation times
//! and go through tessera-queue's scheduling cycle (`cycle::schedule` with Kueue's
//! preemption) as minimalkueue's scheduler would take them; an admitted Workload runs for its
//! class's runtime and then finishes (the runner's controller); a preempted one is evicted at
//! once (the runner finishes evictions by unsetting the quota reservation) and queued again.
//! Releasing quota requeues the inadmissible Workloads of the ClusterQueue's whole Cohort
//! (`QueueAssociatedInadmissibleWorkloadsAfter`). Kueue's SchedulingEquivalenceHashing (on in
//! the runs its thresholds were calibrated with) is modelled here, over the queues' API: when a
//! Workload is parked as inadmissible, the pending Workloads of its ClusterQueue with the same
//! shape (priority and request) are parked too, and new ones of that shape skip the heap until
//! the next requeue of that ClusterQueue; the shape is the hash's: priority, request, pod
//! count and topology request.
//!
//! Without a topology, Cohorts share nothing here (no quota, no preemption targets across
//! them), so each Cohort's ClusterQueues run with their own queues and snapshot: the decisions
//! are those of one cycle over all ClusterQueues (an entry only ever changes its own Cohort's
//! usage and targets), and the core's preemption, which copies the quota tree per attempt,
//! copies one Cohort's. With a topology (Kueue's TAS configuration) every Cohort places pods on
//! the same Nodes, so all run as one: the TAS flavor's snapshot (`tas::TasSnapshot` over the
//! plan's Nodes) keeps the placements of the admitted Workloads — the cycle adds a placement
//! when it admits, the run removes it when the Workload finishes or is evicted.
//!
//! Measured as the runner's recorder measures: time to admission per Workload from its
//! `creationTimestamp` to its (last) admission, both at the API's one-second resolution; time to
//! finish from creation; per ClusterQueue class the quota-time used over nominal quota times the
//! monitored span; the wall time until the last Workload finishes. Within a second the queue
//! order falls to the Workloads' UIDs, drawn from the seed, as Kueue's random UIDs decide it.
//!
//! Not modelled: the API server and its client rate limits (minimalkueue's client writes at
//! 50 QPS, which bounds Kueue's wall time; here cycles take no time), admission and eviction
//! latency, and Kueue's scheduler backoff between empty cycles. Pure: time is a number of
//! virtual milliseconds.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use tessera_queue::cluster_queue::{ClusterQueuePreemption, PreemptionPolicy};
use tessera_queue::cycle::{
    self, Admission, ClusterQueueSnapshot, Decision, KueuePreemption, Snapshot,
};
use tessera_queue::preemption::{AdmittedWorkload, PreemptionConfig};
use tessera_queue::queue::{
    ClusterQueueQueue, EvictionCause, LocalQueue, QueueManager, QueuedWorkload, QueueingStrategy,
    RequeuingTimestamp, StopPolicy,
};
use tessera_queue::tas::{TasFlavors, TasSnapshot, TopologyNode};
use tessera_queue::workload::{DEFAULT_POD_SET_NAME, PodSet, Requests, Workload};
use tessera_queue::{
    Amount, ClusterQueuePolicy, ClusterQueueSpec, FlavorResource, FlavorResourceQuantities, NodeId,
    ResourceFlavorSpec, ResourceGroup, ResourceQuota, Tree, TreeError, TreeSpec, WorkloadInfo,
};

use crate::queue_scenario::{CPU, Plan, WorkloadPlan};

/// The virtual clock's zero, on a whole second.
const EPOCH_SECONDS: u64 = 1_700_000_000;

/// Cycles one instant may take before the run gives up on it (a safety net: every cycle that
/// continues admits, preempts or parks a Workload).
const CYCLES_PER_INSTANT: u64 = 1_000_000;

/// How a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Draws the Workloads' UIDs (queue order within a second).
    pub seed: u64,
    /// Kueue's SchedulingEquivalenceHashing feature.
    pub equivalence_hashing: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            seed: 42,
            equivalence_hashing: true,
        }
    }
}

/// What the recorder sums per Workload class.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadClassSummary {
    /// `className`.
    pub class: String,
    /// Workloads of the class.
    pub count: usize,
    /// Mean time from creation to the last admission (`averageTimeToAdmissionMs`), over the
    /// admitted ones.
    pub average_time_to_admission_ms: f64,
    /// Mean time from creation to finish (`averageTimeToFinishMs`), over the finished ones.
    pub average_time_to_finish_ms: f64,
    /// Evictions of the class's Workloads (`totalEvictions`).
    pub evictions: u64,
}

/// What the recorder sums per ClusterQueue class.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterQueueClassSummary {
    /// `className`.
    pub class: String,
    /// Quota-time used over nominal quota times the monitored span, in percent (what Kueue's
    /// checker holds to `clusterQueueClassesMinUsage`).
    pub usage_percent: f64,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Workloads created.
    pub workloads: usize,
    /// Virtual milliseconds from the generator's start until the last Workload finished.
    pub wall_ms: u64,
    /// Scheduling cycles run, summed over the Cohorts.
    pub cycles: u64,
    /// Admissions (a Workload admitted again after an eviction counts again).
    pub admissions: u64,
    /// Evictions by preemption.
    pub evictions: u64,
    /// Workloads that never finished (none when every one fits somewhere).
    pub unfinished: usize,
    /// Per ClusterQueue class, in first-seen order.
    pub cluster_queue_classes: Vec<ClusterQueueClassSummary>,
    /// Per Workload class, in first-seen order.
    pub workload_classes: Vec<WorkloadClassSummary>,
}

/// Why a plan cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RunError {
    /// The ClusterQueues do not make a tree.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// A ClusterQueue the tree left out.
    #[error("ClusterQueue {0} is not in the quota tree")]
    Missing(String),
}

/// Runs the plan to the end.
pub fn run(plan: &Plan, options: Options) -> Result<Outcome, RunError> {
    let mut rng = fastrand::Rng::with_seed(options.seed);
    let uids: Vec<String> = plan
        .workloads
        .iter()
        .map(|_| format!("{:016x}-{:016x}", rng.u64(..), rng.u64(..)))
        .collect();
    let mut totals = Totals {
        workloads: vec![WorkloadState::default(); plan.workloads.len()],
        used: vec![0; plan.cluster_queues.len()],
        cycles: 0,
        admissions: 0,
        evictions: 0,
    };
    let parts = if plan.topology.is_some() {
        vec![(0..plan.cluster_queues.len()).collect()]
    } else {
        cohorts(plan)
    };
    for cohort in parts {
        let (part, queues, workloads) = restricted(plan, &cohort);
        let part_uids = workloads.iter().map(|&i| uids[i].clone()).collect();
        let mut sim = Sim::new(&part, options, part_uids)?;
        sim.run();
        for (local, state) in sim.workloads.into_iter().enumerate() {
            totals.workloads[workloads[local]] = state;
        }
        for (local, used) in sim.used.into_iter().enumerate() {
            totals.used[queues[local]] = used;
        }
        totals.cycles += sim.cycles;
        totals.admissions += sim.admissions;
        totals.evictions += sim.evictions;
    }
    Ok(outcome(plan, &totals))
}

/// The ClusterQueue indices of each Cohort, in first-seen order.
fn cohorts(plan: &Plan) -> Vec<Vec<usize>> {
    let mut order: Vec<&str> = Vec::new();
    let mut members: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, cq) in plan.cluster_queues.iter().enumerate() {
        let entry = members.entry(cq.cohort.as_str()).or_default();
        if entry.is_empty() {
            order.push(cq.cohort.as_str());
        }
        entry.push(index);
    }
    order
        .into_iter()
        .filter_map(|name| members.remove(name))
        .collect()
}

/// The part of `plan` on the ClusterQueues `queues`, with the original indices of its
/// ClusterQueues and Workloads.
fn restricted(plan: &Plan, queues: &[usize]) -> (Plan, Vec<usize>, Vec<usize>) {
    let local: BTreeMap<usize, usize> = queues.iter().enumerate().map(|(l, &g)| (g, l)).collect();
    let mut workloads = Vec::new();
    let mut indices = Vec::new();
    for (index, workload) in plan.workloads.iter().enumerate() {
        if let Some(&cluster_queue) = local.get(&workload.cluster_queue) {
            workloads.push(WorkloadPlan {
                cluster_queue,
                ..workload.clone()
            });
            indices.push(index);
        }
    }
    let part = Plan {
        flavor: plan.flavor.clone(),
        topology: plan.topology.clone(),
        cluster_queues: queues
            .iter()
            .map(|&g| plan.cluster_queues[g].clone())
            .collect(),
        workloads,
    };
    (part, queues.to_vec(), indices)
}

/// What the per-Cohort runs add up to.
struct Totals {
    workloads: Vec<WorkloadState>,
    used: Vec<u128>,
    cycles: u64,
    admissions: u64,
    evictions: u64,
}

#[derive(Debug, Clone, Default)]
struct WorkloadState {
    uid: String,
    key: String,
    /// Quota held since, while admitted.
    admitted_at: Option<u64>,
    usage: FlavorResourceQuantities,
    /// The TAS usage of its placement per leaf, while admitted.
    tas_usage: BTreeMap<String, Requests>,
    /// Bumped at every admission, so that the finish of an evicted admission is ignored.
    epoch: u64,
    time_to_admission_ms: Option<u64>,
    finished_at: Option<u64>,
    /// When it was last evicted (its queue order stays by creation; the time is recorded).
    evicted_at: Option<u64>,
    evictions: u64,
}

struct Sim<'p> {
    plan: &'p Plan,
    now_ms: u64,
    /// Quota and the usage of admitted Workloads (the cache); each cycle schedules on a copy.
    tree: Tree,
    nodes: Vec<NodeId>,
    cohort_of: Vec<usize>,
    cohort_members: Vec<Vec<usize>>,
    touched_cohorts: BTreeSet<usize>,
    queues: QueueManager,
    snapshot: Snapshot,
    index_of: BTreeMap<String, usize>,
    workloads: Vec<WorkloadState>,
    finishes: BinaryHeap<Reverse<(u64, usize, u64)>>,
    /// Per ClusterQueue, milli-CPU × ms of quota held.
    used: Vec<u128>,
    cycles: u64,
    admissions: u64,
    evictions: u64,
}

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(EPOCH_SECONDS) + Duration::from_millis(ms)
}

/// A time as the API stores it (whole seconds).
fn api_seconds(ms: u64) -> u64 {
    ms / 1000 * 1000
}

/// The TAS flavor of the plan with its snapshot over the plan's Nodes, when it has one.
fn tas_flavors(plan: &Plan) -> TasFlavors {
    let mut tas = TasFlavors::default();
    let (Some(topology), Some(name)) = (&plan.topology, &plan.flavor.topology_name) else {
        return tas;
    };
    tas.topologies
        .insert(plan.flavor.name.clone(), name.clone());
    if topology.name != *name {
        return tas;
    }
    let nodes: Vec<TopologyNode> = topology
        .nodes
        .iter()
        .map(|node| TopologyNode {
            name: node.name.clone(),
            labels: node.labels.clone(),
            allocatable: node.allocatable.clone(),
            taints: Vec::new(),
            schedulable_and_ready: true,
        })
        .collect();
    let snapshot = TasSnapshot::new(
        name,
        &topology.levels,
        &plan.flavor.node_labels,
        &[],
        &nodes,
    );
    tas.snapshots.insert(plan.flavor.name.clone(), snapshot);
    tas
}

/// The TAS usage per leaf of an admission's placements.
fn placement_usage(admission: &Admission, pod_requests: &Requests) -> BTreeMap<String, Requests> {
    let mut usage: BTreeMap<String, Requests> = BTreeMap::new();
    let placements = admission
        .pod_set_assignments
        .iter()
        .filter_map(|ps| ps.topology_assignment.as_ref());
    for placement in placements {
        for (leaf, requests) in TasSnapshot::usage_of(placement, pod_requests) {
            let entry = usage.entry(leaf).or_default();
            for (resource, value) in requests {
                *entry.entry(resource).or_default() += value;
            }
        }
    }
    usage
}

fn preemption(policy: PreemptionPolicy, reclaim: PreemptionPolicy) -> ClusterQueuePreemption {
    ClusterQueuePreemption {
        within_cluster_queue: policy,
        reclaim_within_cohort: reclaim,
        borrow_within_cohort: None,
    }
}

impl<'p> Sim<'p> {
    /// Runs its plan to the end.
    fn run(&mut self) {
        let plan = self.plan;
        let mut next_creation = 0;
        loop {
            let creation_at = plan.workloads.get(next_creation).map(|w| w.created_ms);
            let finish_at = self.finishes.peek().map(|Reverse((at, _, _))| *at);
            let now = match (creation_at, finish_at) {
                (Some(c), Some(f)) => c.min(f),
                (Some(c), None) => c,
                (None, Some(f)) => f,
                (None, None) => return,
            };
            self.now_ms = now;
            while let Some(Reverse((at, index, epoch))) = self.finishes.peek().copied() {
                if at != now {
                    break;
                }
                self.finishes.pop();
                self.finish(index, epoch);
            }
            while plan
                .workloads
                .get(next_creation)
                .is_some_and(|w| w.created_ms == now)
            {
                self.enqueue(next_creation);
                next_creation += 1;
            }
            self.requeue_touched_cohorts();
            self.settle();
        }
    }

    fn new(plan: &'p Plan, options: Options, uids: Vec<String>) -> Result<Sim<'p>, RunError> {
        let flavor = plan.flavor.name.as_str();
        let key = FlavorResource::new(flavor, CPU);
        let spec = TreeSpec {
            cohorts: Vec::new(),
            cluster_queues: plan
                .cluster_queues
                .iter()
                .map(|cq| ClusterQueueSpec {
                    name: cq.name.clone(),
                    cohort: Some(cq.cohort.clone()),
                    quotas: [(
                        key.clone(),
                        ResourceQuota {
                            nominal: Amount::new(cq.set.nominal_milli),
                            borrowing_limit: cq.set.borrowing_limit_milli.map(Amount::new),
                            lending_limit: None,
                        },
                    )]
                    .into_iter()
                    .collect(),
                    fair_weight: tessera_queue::tree::DEFAULT_FAIR_WEIGHT,
                })
                .collect(),
        };
        let tree = Tree::build(&spec)?;
        let nodes = plan
            .cluster_queues
            .iter()
            .map(|cq| {
                tree.cluster_queue(&cq.name)
                    .ok_or_else(|| RunError::Missing(cq.name.clone()))
            })
            .collect::<Result<Vec<NodeId>, RunError>>()?;
        let mut cohort_names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut cohort_members: Vec<Vec<usize>> = Vec::new();
        let mut cohort_of = Vec::new();
        for (index, cq) in plan.cluster_queues.iter().enumerate() {
            let next = cohort_names.len();
            let cohort = *cohort_names.entry(cq.cohort.as_str()).or_insert(next);
            if cohort == cohort_members.len() {
                cohort_members.push(Vec::new());
            }
            cohort_members[cohort].push(index);
            cohort_of.push(cohort);
        }
        let mut queues = QueueManager::default();
        let mut cluster_queues = BTreeMap::new();
        let mut namespaces = BTreeMap::new();
        for cq in &plan.cluster_queues {
            queues.local_queues.insert(
                format!("{0}/{0}", cq.name),
                LocalQueue {
                    cluster_queue: cq.name.clone(),
                    stop_policy: StopPolicy::None,
                    user_limits: Default::default(),
                },
            );
            let mut queue = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
            queue.equivalence_hashing = options.equivalence_hashing;
            queues.cluster_queues.insert(cq.name.clone(), queue);
            cluster_queues.insert(
                cq.name.clone(),
                ClusterQueueSnapshot {
                    policy: ClusterQueuePolicy {
                        resource_groups: vec![ResourceGroup {
                            covered_resources: [CPU.to_owned()].into_iter().collect(),
                            flavors: vec![flavor.to_owned()],
                        }],
                        flavor_fungibility: Default::default(),
                        preemption: preemption(
                            cq.set.within_cluster_queue,
                            cq.set.reclaim_within_cohort,
                        ),
                    },
                    namespace_selector: Some(LabelSelector::default()),
                    generation: 1,
                },
            );
            namespaces.insert(cq.name.clone(), BTreeMap::new());
        }
        let flavors = [(
            flavor.to_owned(),
            ResourceFlavorSpec {
                name: flavor.to_owned(),
                node_labels: plan.flavor.node_labels.clone(),
                ..Default::default()
            },
        )]
        .into_iter()
        .collect();
        let snapshot = Snapshot {
            tree: tree.clone(),
            cluster_queues,
            flavors,
            namespaces,
            admitted: Vec::new(),
            preemption: PreemptionConfig::default(),
            recompute_on_overlap: true,
            timestamp: RequeuingTimestamp::Eviction,
            tas: tas_flavors(plan),
        };
        let workloads: Vec<WorkloadState> = plan
            .workloads
            .iter()
            .zip(uids)
            .map(|(w, uid)| WorkloadState {
                uid,
                key: format!("{}/{}", plan.cluster_queues[w.cluster_queue].name, w.name),
                ..Default::default()
            })
            .collect();
        let index_of = workloads
            .iter()
            .enumerate()
            .map(|(i, w)| (w.key.clone(), i))
            .collect();
        let queues_count = plan.cluster_queues.len();
        Ok(Sim {
            plan,
            now_ms: 0,
            tree,
            nodes,
            cohort_of,
            cohort_members,
            touched_cohorts: BTreeSet::new(),
            queues,
            snapshot,
            index_of,
            workloads,
            finishes: BinaryHeap::new(),
            used: vec![0; queues_count],
            cycles: 0,
            admissions: 0,
            evictions: 0,
        })
    }

    /// One pod's requests of a Workload's PodSet.
    fn pod_requests(&self, index: usize) -> Requests {
        let template = &self.plan.workloads[index].template;
        [(CPU.to_owned(), template.request_milli)]
            .into_iter()
            .collect()
    }

    fn cluster_queue_name(&self, index: usize) -> &str {
        &self.plan.cluster_queues[self.plan.workloads[index].cluster_queue].name
    }

    /// The pending Workload as the queues hold it.
    fn queued(&self, index: usize) -> QueuedWorkload {
        let planned = &self.plan.workloads[index];
        let namespace = self.cluster_queue_name(index).to_owned();
        let workload = Workload {
            namespace: namespace.clone(),
            name: planned.name.clone(),
            priority: planned.template.priority,
            pod_sets: vec![PodSet {
                name: DEFAULT_POD_SET_NAME.to_owned(),
                count: planned.template.pod_count,
                requests: self.pod_requests(index),
                topology_request: planned.template.topology.as_ref().map(|t| t.request()),
                ..Default::default()
            }],
            reclaimable_pods: Vec::new(),
        };
        QueuedWorkload {
            info: WorkloadInfo::new(workload),
            uid: self.workloads[index].uid.clone(),
            job_uid: None,
            generation: 1,
            local_queue: namespace,
            user: None,
            creation: at(api_seconds(planned.created_ms)),
            eviction: self.workloads[index]
                .evicted_at
                .map(|ms| (EvictionCause::Other, at(ms))),
            requeue_at: None,
            requeue_held: false,
            last_assignment_generation: 0,
        }
    }

    /// Queues a pending Workload (one whose shape failed since the last retry goes straight
    /// to the inadmissible set: the queue's equivalence classes).
    fn enqueue(&mut self, index: usize) {
        let queued = self.queued(index);
        let now = at(self.now_ms);
        // Every LocalQueue and ClusterQueue exists, so this cannot be refused.
        let _ = self.queues.add_or_update(queued, now);
    }

    /// Gives back the quota `index` holds; true if it held any.
    fn release(&mut self, index: usize) -> bool {
        let Some(since) = self.workloads[index].admitted_at.take() else {
            return false;
        };
        let cq = self.plan.workloads[index].cluster_queue;
        let usage = std::mem::take(&mut self.workloads[index].usage);
        self.tree.remove_usages(self.nodes[cq], &usage);
        let placements = std::mem::take(&mut self.workloads[index].tas_usage);
        for snapshot in self.snapshot.tas.snapshots.values_mut() {
            for (leaf, requests) in &placements {
                snapshot.remove_tas_usage(leaf, requests);
            }
        }
        let held = self.now_ms.saturating_sub(since);
        let milli: i64 = usage.iter().map(|(_, amount)| amount.int64()).sum();
        self.used[cq] += u128::from(held) * u128::try_from(milli).unwrap_or(0);
        let uid = &self.workloads[index].uid;
        self.snapshot.admitted.retain(|w| w.uid != *uid);
        self.touched_cohorts.insert(self.cohort_of[cq]);
        true
    }

    fn finish(&mut self, index: usize, epoch: u64) {
        if self.workloads[index].epoch != epoch || !self.release(index) {
            return;
        }
        self.workloads[index].finished_at = Some(self.now_ms);
    }

    fn evict(&mut self, index: usize) {
        if !self.release(index) {
            return;
        }
        self.evictions += 1;
        self.workloads[index].evictions += 1;
        self.workloads[index].evicted_at = Some(self.now_ms);
        self.enqueue(index);
    }

    /// Books an admission; the cycle already added its placements to the TAS snapshot.
    fn admit(&mut self, index: usize, admission: &Admission) {
        let usage = admission
            .pod_set_assignments
            .iter()
            .flat_map(|ps| {
                ps.resource_usage.iter().filter_map(|(resource, value)| {
                    let flavor = ps.flavors.get(resource)?;
                    Some((FlavorResource::new(flavor, resource), *value))
                })
            })
            .fold(FlavorResourceQuantities::new(), |mut usage, (k, v)| {
                usage.add(&k, Amount::new(v));
                usage
            });
        self.workloads[index].tas_usage = placement_usage(admission, &self.pod_requests(index));
        let cq = self.plan.workloads[index].cluster_queue;
        self.tree.add_usages(self.nodes[cq], &usage);
        let planned = &self.plan.workloads[index];
        let state = &mut self.workloads[index];
        self.snapshot.admitted.push(AdmittedWorkload {
            namespace: self.plan.cluster_queues[cq].name.clone(),
            name: planned.name.clone(),
            uid: state.uid.clone(),
            cluster_queue: self.plan.cluster_queues[cq].name.clone(),
            priority: i64::from(planned.template.priority),
            queue_timestamp: at(api_seconds(planned.created_ms)),
            quota_reserved_at: Some(at(self.now_ms)),
            usage: usage.clone(),
            evicted: false,
            local_queue: self.plan.cluster_queues[cq].name.clone(),
            user: None,
        });
        state.usage = usage;
        state.admitted_at = Some(self.now_ms);
        state.epoch += 1;
        state.time_to_admission_ms =
            Some(api_seconds(self.now_ms).saturating_sub(api_seconds(planned.created_ms)));
        self.finishes.push(Reverse((
            self.now_ms + planned.template.runtime_ms,
            index,
            state.epoch,
        )));
        self.admissions += 1;
    }

    /// Requeues the inadmissible Workloads of every Cohort whose quota was released.
    fn requeue_touched_cohorts(&mut self) {
        let now = at(self.now_ms);
        for cohort in std::mem::take(&mut self.touched_cohorts) {
            for &cq in &self.cohort_members[cohort] {
                let name = &self.plan.cluster_queues[cq].name;
                if let Some(queue) = self.queues.cluster_queues.get_mut(name) {
                    queue.queue_inadmissible(now, &|_| true);
                }
            }
        }
    }

    /// Runs cycles at this instant until one changes nothing.
    fn settle(&mut self) {
        let now = at(self.now_ms);
        for _ in 0..CYCLES_PER_INSTANT {
            self.snapshot.tree.clone_from(&self.tree);
            let decisions =
                cycle::schedule(&mut self.snapshot, &mut self.queues, &KueuePreemption, now);
            if decisions.is_empty() {
                return;
            }
            self.cycles += 1;
            let mut progress = false;
            for decision in decisions {
                match decision {
                    Decision::Admit {
                        workload,
                        admission,
                    } => {
                        let Some(&index) = self.index_of.get(&workload) else {
                            continue;
                        };
                        self.admit(index, &admission);
                        progress = true;
                    }
                    Decision::Preempt { victims, .. } => {
                        for victim in victims {
                            if let Some(&index) = self.index_of.get(&victim.workload) {
                                self.evict(index);
                            }
                        }
                        progress = true;
                    }
                    Decision::Requeue { inadmissible, .. } => progress |= inadmissible,
                }
            }
            self.requeue_touched_cohorts();
            if !progress {
                return;
            }
        }
    }
}

fn outcome(plan: &Plan, totals: &Totals) -> Outcome {
    let wall_ms = totals
        .workloads
        .iter()
        .filter_map(|w| w.finished_at)
        .max()
        .unwrap_or(0);
    let mut cq_classes: Vec<(String, u128, u128)> = Vec::new();
    for (index, cq) in plan.cluster_queues.iter().enumerate() {
        let nominal = u128::try_from(cq.set.nominal_milli).unwrap_or(0);
        match cq_classes.iter_mut().find(|(c, _, _)| *c == cq.set.class) {
            Some((_, used, quota)) => {
                *used += totals.used[index];
                *quota += nominal;
            }
            None => cq_classes.push((cq.set.class.clone(), totals.used[index], nominal)),
        }
    }
    let cluster_queue_classes = cq_classes
        .into_iter()
        .map(|(class, used, quota)| ClusterQueueClassSummary {
            class,
            usage_percent: if quota == 0 || wall_ms == 0 {
                0.0
            } else {
                used as f64 * 100.0 / (quota as f64 * wall_ms as f64)
            },
        })
        .collect();
    let mut classes: Vec<(String, Vec<usize>)> = Vec::new();
    for (index, planned) in plan.workloads.iter().enumerate() {
        match classes
            .iter_mut()
            .find(|(c, _)| *c == planned.template.class)
        {
            Some((_, members)) => members.push(index),
            None => classes.push((planned.template.class.clone(), vec![index])),
        }
    }
    let mean = |values: Vec<u64>| {
        if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<u64>() as f64 / values.len() as f64
        }
    };
    let workload_classes = classes
        .into_iter()
        .map(|(class, members)| WorkloadClassSummary {
            count: members.len(),
            average_time_to_admission_ms: mean(
                members
                    .iter()
                    .filter_map(|&i| totals.workloads[i].time_to_admission_ms)
                    .collect(),
            ),
            average_time_to_finish_ms: mean(
                members
                    .iter()
                    .filter_map(|&i| {
                        let finished = totals.workloads[i].finished_at?;
                        Some(finished.saturating_sub(plan.workloads[i].created_ms))
                    })
                    .collect(),
            ),
            evictions: members.iter().map(|&i| totals.workloads[i].evictions).sum(),
            class,
        })
        .collect();
    Outcome {
        workloads: totals.workloads.len(),
        wall_ms,
        cycles: totals.cycles,
        admissions: totals.admissions,
        evictions: totals.evictions,
        unfinished: totals
            .workloads
            .iter()
            .filter(|w| w.finished_at.is_none())
            .count(),
        cluster_queue_classes,
        workload_classes,
    }
}

#[cfg(test)]
#[path = "queue_timeline_tests.rs"]
mod tests;
