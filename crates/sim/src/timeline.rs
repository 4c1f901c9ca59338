//! A discrete-event run of a workload over time: pods arrive at their times, wait in a queue
//! while nothing fits, run for their durations and leave, freeing room for the queue — on a
//! virtual clock, as fast as the placement core goes. The result is an event log and a summary
//! (allocation and fragmentation over time, queueing delay, job completion time, makespan,
//! failures, and the same per namespace).
//!
//! Queueing follows kube-scheduler's retry: a pending pod is tried again whenever a pod leaves
//! (arrivals only take room), highest priority first, then oldest; within one retry round a
//! pod shape that failed is not tried again (later pods of that shape cannot fit either). A
//! pod pending longer than the maximum wait is given up (`Failed`). A pod may follow another
//! (a Job's next completion): it arrives when that one leaves. Members of a pod group wait
//! until enough of them have arrived, then are placed together or not at all (as the live
//! scheduler's gangs), counting members still running.
//!
//! What places pods is a [`Placer`]: the openb engine (`trace_placer`) or the live
//! scheduling core (`kube_placer`). This module knows neither.
//!
//! Pure and deterministic: time is a number of seconds, never the wall clock.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use serde::Serialize;

use crate::cluster::MILLI;

/// A pod of a timed workload; `W` is what the placer needs of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedPod<W> {
    /// Its namespace (team).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// When it arrives (seconds); ignored for a pod that follows another.
    pub arrival: i64,
    /// The pod (by position in the workload) whose departure makes this one arrive.
    pub follows: Option<usize>,
    /// How long it runs once placed (`None`: until the end).
    pub duration: Option<i64>,
    /// Its priority: higher is tried first.
    pub priority: i32,
    /// What it asks.
    pub work: W,
}

/// Where a pod was placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    /// The node.
    pub node: String,
    /// The devices it got (GPU indices, or DRA device names), when the placer chooses them.
    pub devices: Vec<String>,
    /// GPU thousandths it holds.
    pub gpu_milli: i64,
}

/// What places a timeline's pods and takes them off again.
pub trait Placer {
    /// What a pod asks.
    type Work;
    /// What a placed pod holds, handed back on release.
    type Held;
    /// Pods of equal shape fail alike while nothing leaves.
    type Shape: Ord;
    /// The pod's shape; `None` when pods cannot be compared.
    fn shape(&self, work: &Self::Work) -> Option<Self::Shape>;
    /// Places a pod, or `None` when nothing fits it now.
    fn place(&mut self, name: (&str, &str), work: &Self::Work) -> Option<(Placed, Self::Held)>;
    /// Takes a placed pod off its node.
    fn release(&mut self, name: (&str, &str), work: &Self::Work, held: Self::Held);
    /// GPU thousandths in use.
    fn gpu_used(&self) -> i64;
    /// GPU thousandths in the cluster.
    fn gpu_capacity(&self) -> i64;
    /// FGD's fragmentation (GPU thousandths), where the placer measures it.
    fn fragmentation(&self) -> Option<f64>;
    /// Nodes in the cluster.
    fn nodes(&self) -> usize;
    /// Whether placing a pod may let a waiting one fit (pod affinity), so the queue is tried
    /// again after arrivals are placed, not only after departures.
    fn retry_on_placement(&self) -> bool {
        false
    }
    /// The pod group a pod belongs to (placed all or nothing) and its minimum members.
    fn group(&self, work: &Self::Work) -> Option<(String, usize)> {
        let _ = work;
        None
    }
    /// Makes room for a pod nothing fits now by evicting lower-priority pods: the victims
    /// (namespace, name), or `None` when preemption cannot help.
    fn preempt(&mut self, name: (&str, &str), work: &Self::Work) -> Option<Vec<(String, String)>> {
        let _ = (name, work);
        None
    }
    /// Places `members` of one group together — all of them, which must be at least
    /// `needed` — or none.
    fn place_group(
        &mut self,
        members: &[((&str, &str), &Self::Work)],
        needed: usize,
    ) -> Option<Vec<(Placed, Self::Held)>> {
        let _ = (members, needed);
        None
    }
}

/// How a run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The placement policy's name (for the summary).
    pub policy: String,
    /// The seed (for the summary).
    pub seed: u64,
    /// The longest a pod may wait before it is given up (`None`: it waits to the end).
    pub max_wait: Option<i64>,
}

/// What happened to a pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "camelCase")]
pub enum EventKind {
    /// It arrived.
    Arrived,
    /// It was placed.
    #[serde(rename_all = "camelCase")]
    Placed {
        /// The node.
        node: String,
        /// The devices it got, when the placer chooses them.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        devices: Vec<String>,
        /// Seconds it waited.
        waited: i64,
    },
    /// Nothing fits it now; it waits.
    Pending,
    /// It ran to its end and left.
    Departed,
    /// It was evicted to make room for a higher-priority pod and waits again.
    Preempted {
        /// The pod it made room for.
        by: String,
    },
    /// It waited longer than the maximum and was given up.
    Failed,
}

/// One line of the event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Seconds since the start.
    pub time: i64,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
    /// GPU thousandths allocated after it.
    pub gpu_used: i64,
}

/// A point of a time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the start.
    pub time: i64,
    /// The value.
    pub value: f64,
}

/// Figures of a set of pods.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Figures {
    /// Pods that arrived.
    pub pods: usize,
    /// Pods placed.
    pub placed: usize,
    /// Pods given up after the maximum wait.
    pub failed: usize,
    /// Pods still waiting at the end.
    pub pending: usize,
    /// Pods that ran to their end.
    pub completed: usize,
    /// Evictions by preemption (a pod evicted twice counts twice).
    pub preempted: usize,
    /// Mean seconds from arrival to placement, over placed pods.
    pub mean_wait: f64,
    /// 95th percentile of the wait (seconds).
    pub p95_wait: i64,
    /// Mean seconds from arrival to departure, over completed pods (job completion time).
    pub mean_completion: f64,
    /// GPU-seconds the pods ran (GPU thousandths × seconds / 1000).
    pub gpu_seconds: f64,
}

/// The summary of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The policy.
    pub policy: String,
    /// The seed.
    pub seed: u64,
    /// GPUs in the cluster.
    pub total_gpus: i64,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Seconds from the first arrival to the last event.
    pub makespan: i64,
    /// Whole-run figures.
    pub overall: Figures,
    /// Figures per namespace.
    pub namespaces: BTreeMap<String, Figures>,
    /// Time-weighted mean GPU allocation (% of capacity) over the makespan.
    pub mean_allocation: f64,
    /// GPU allocation (% of capacity) after each event time (at most 1,000 points).
    pub allocation: Vec<Sample>,
    /// Cluster fragmentation (% of capacity, FGD's measure) after each event time, where the
    /// placer measures it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fragmentation: Vec<Sample>,
    /// Pods waiting after each event time.
    pub waiting: Vec<Sample>,
}

/// Per-pod bookkeeping.
struct Record<H> {
    arrived_at: Option<i64>,
    placed_at: Option<i64>,
    departed_at: Option<i64>,
    /// When the current run ends (a departure for another time is stale: it was preempted).
    ends_at: Option<i64>,
    preempted: usize,
    failed: bool,
    gpu_milli: i64,
    /// What it holds while placed.
    running: Option<H>,
}

impl<H> Default for Record<H> {
    fn default() -> Self {
        Record {
            arrived_at: None,
            placed_at: None,
            departed_at: None,
            ends_at: None,
            preempted: 0,
            failed: false,
            gpu_milli: 0,
            running: None,
        }
    }
}

/// A waiting pod's place in the queue: highest priority, then oldest, then workload order.
type QueueKey = (Reverse<i32>, i64, usize);

struct Run<'p, P: Placer> {
    placer: &'p mut P,
    pods: Vec<TimedPod<P::Work>>,
    records: Vec<Record<P::Held>>,
    /// Pods that arrive when each pod leaves.
    followers: Vec<Vec<usize>>,
    queue: BTreeSet<QueueKey>,
    /// Departures: (time, pod).
    departures: BinaryHeap<Reverse<(i64, usize)>>,
    events: Vec<Event>,
    /// Members of each pod group placed and not yet gone.
    group_running: BTreeMap<String, usize>,
    /// Pods by (namespace, name), for preemption's victims.
    index: std::collections::HashMap<(String, String), usize>,
}

impl<P: Placer> Run<'_, P> {
    fn log(&mut self, time: i64, pod: usize, kind: EventKind) {
        let p = &self.pods[pod];
        self.events.push(Event {
            time,
            namespace: p.namespace.clone(),
            pod: p.name.clone(),
            kind,
            gpu_used: self.placer.gpu_used(),
        });
    }

    fn key(&self, pod: usize) -> QueueKey {
        let arrived = self.records[pod].arrived_at.unwrap_or_default();
        (Reverse(self.pods[pod].priority), arrived, pod)
    }

    /// Tries a pod, preempting lower-priority pods if that makes room; true when placed.
    fn try_place(&mut self, time: i64, pod: usize) -> bool {
        let p = &self.pods[pod];
        if let Some((placed, held)) = self.placer.place((&p.namespace, &p.name), &p.work) {
            self.placed(time, pod, placed, held);
            return true;
        }
        let Some(victims) = self.placer.preempt((&p.namespace, &p.name), &p.work) else {
            return false;
        };
        let by = format!("{}/{}", p.namespace, p.name);
        for victim in victims {
            if let Some(&v) = self.index.get(&victim) {
                self.evict(time, v, &by);
            }
        }
        let p = &self.pods[pod];
        match self.placer.place((&p.namespace, &p.name), &p.work) {
            Some((placed, held)) => {
                self.placed(time, pod, placed, held);
                true
            }
            None => false,
        }
    }

    /// Evicts a running pod (preemption): it leaves its node and waits in the queue again.
    fn evict(&mut self, time: i64, pod: usize, by: &str) {
        let Some(held) = self.records[pod].running.take() else {
            return;
        };
        self.release_held(pod, held);
        let record = &mut self.records[pod];
        record.ends_at = None;
        record.placed_at = None;
        record.preempted += 1;
        self.log(time, pod, EventKind::Preempted { by: by.to_string() });
        let key = self.key(pod);
        self.queue.insert(key);
    }

    /// Gives back what a pod holds.
    fn release_held(&mut self, pod: usize, held: P::Held) {
        if let Some((group, _)) = self.placer.group(&self.pods[pod].work)
            && let Some(running) = self.group_running.get_mut(&group)
        {
            *running = running.saturating_sub(1);
        }
        let p = &self.pods[pod];
        self.placer.release((&p.namespace, &p.name), &p.work, held);
    }

    /// Tries the waiting members of `group` (minimum `min`) together; true when placed.
    fn try_group(&mut self, time: i64, group: &str, min: usize) -> bool {
        let members: Vec<QueueKey> = self
            .queue
            .iter()
            .copied()
            .filter(|key| {
                self.placer
                    .group(&self.pods[key.2].work)
                    .is_some_and(|(g, _)| g == group)
            })
            .collect();
        let running = self.group_running.get(group).copied().unwrap_or(0);
        let needed = min.saturating_sub(running);
        if members.is_empty() || members.len() < needed {
            return false;
        }
        let work: Vec<((&str, &str), &P::Work)> = members
            .iter()
            .map(|key| {
                let p = &self.pods[key.2];
                ((p.namespace.as_str(), p.name.as_str()), &p.work)
            })
            .collect();
        let Some(placements) = self.placer.place_group(&work, needed) else {
            return false;
        };
        for (key, (placed, held)) in members.into_iter().zip(placements) {
            self.queue.remove(&key);
            self.placed(time, key.2, placed, held);
        }
        true
    }

    /// Records a placement.
    fn placed(&mut self, time: i64, pod: usize, placed: Placed, held: P::Held) {
        if let Some((group, _)) = self.placer.group(&self.pods[pod].work) {
            *self.group_running.entry(group).or_insert(0) += 1;
        }
        let arrived = self.records[pod].arrived_at.unwrap_or(time);
        let record = &mut self.records[pod];
        record.placed_at = Some(time);
        record.gpu_milli = placed.gpu_milli;
        record.running = Some(held);
        if let Some(duration) = self.pods[pod].duration {
            let end = time.saturating_add(duration.max(0));
            self.records[pod].ends_at = Some(end);
            self.departures.push(Reverse((end, pod)));
        }
        self.log(
            time,
            pod,
            EventKind::Placed {
                node: placed.node,
                devices: placed.devices,
                waited: time - arrived,
            },
        );
    }

    /// A pod arrives: tried once, then queued (a group member joins the queue first, then
    /// its group is tried).
    fn arrive(&mut self, time: i64, pod: usize) {
        self.records[pod].arrived_at = Some(time);
        self.log(time, pod, EventKind::Arrived);
        if let Some((group, min)) = self.placer.group(&self.pods[pod].work) {
            let key = self.key(pod);
            self.queue.insert(key);
            if !self.try_group(time, &group, min) {
                self.log(time, pod, EventKind::Pending);
            }
            return;
        }
        if !self.try_place(time, pod) {
            let key = self.key(pod);
            self.queue.insert(key);
            self.log(time, pod, EventKind::Pending);
        }
    }

    /// Retries the queue in order, skipping shapes that already failed this round.
    fn retry(&mut self, time: i64) {
        let mut failed_shapes: BTreeSet<P::Shape> = BTreeSet::new();
        let mut tried_groups: BTreeSet<String> = BTreeSet::new();
        let waiting: Vec<QueueKey> = self.queue.iter().copied().collect();
        for key in waiting {
            let pod = key.2;
            if !self.queue.contains(&key) {
                continue; // placed with its group this round
            }
            if let Some((group, min)) = self.placer.group(&self.pods[pod].work) {
                if tried_groups.insert(group.clone()) {
                    self.try_group(time, &group, min);
                }
                continue;
            }
            let shape = self.placer.shape(&self.pods[pod].work);
            if shape.as_ref().is_some_and(|s| failed_shapes.contains(s)) {
                continue;
            }
            if self.try_place(time, pod) {
                self.queue.remove(&key);
            } else if let Some(shape) = shape {
                failed_shapes.insert(shape);
            }
        }
    }

    /// Pods whose run ends by `time` leave, making room; returns them.
    fn depart(&mut self, time: i64) -> Vec<usize> {
        let mut left = Vec::new();
        while let Some(Reverse((t, pod))) = self.departures.peek().copied() {
            if t > time {
                break;
            }
            self.departures.pop();
            if self.records[pod].ends_at != Some(t) {
                continue; // the run this departure ended was preempted
            }
            if let Some(held) = self.records[pod].running.take() {
                self.release_held(pod, held);
                self.records[pod].departed_at = Some(t);
                self.log(t, pod, EventKind::Departed);
                left.push(pod);
            }
        }
        left
    }
}

fn percentile(values: &mut [i64], p: f64) -> i64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn figures<'a, H: 'a>(records: impl Iterator<Item = &'a Record<H>>) -> Figures {
    let mut f = Figures::default();
    let mut waits = Vec::new();
    let mut completions = Vec::new();
    for record in records {
        let Some(arrived) = record.arrived_at else {
            continue;
        };
        f.pods += 1;
        if let Some(placed) = record.placed_at {
            f.placed += 1;
            waits.push(placed - arrived);
        }
        if let Some(departed) = record.departed_at {
            f.completed += 1;
            completions.push(departed - arrived);
            if let Some(placed) = record.placed_at {
                f.gpu_seconds += (record.gpu_milli * (departed - placed)) as f64 / MILLI as f64;
            }
        }
        f.failed += usize::from(record.failed);
        f.preempted += record.preempted;
        f.pending += usize::from(record.placed_at.is_none() && !record.failed);
    }
    let mean = |v: &[i64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<i64>() as f64 / v.len() as f64
        }
    };
    f.mean_wait = mean(&waits);
    f.mean_completion = mean(&completions);
    f.p95_wait = percentile(&mut waits, 95.0);
    f
}

/// Keeps at most `limit` samples, evenly spaced, always the last.
fn thin(samples: Vec<Sample>, limit: usize) -> Vec<Sample> {
    if samples.len() <= limit {
        return samples;
    }
    let step = samples.len().div_ceil(limit);
    let last = samples.last().copied();
    let mut kept: Vec<Sample> = samples.into_iter().step_by(step).collect();
    if let Some(last) = last
        && kept.last() != Some(&last)
    {
        kept.push(last);
    }
    kept
}

/// Why a workload cannot run on the timeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pod {pod}: {message}")]
pub struct TimelineError {
    /// The pod.
    pub pod: String,
    /// What is wrong.
    pub message: String,
}

/// Runs `pods` over time on what `placer` holds. Pods that follow another must come after it
/// in `pods` (a pod following itself or a later one is an error).
pub fn run<P: Placer>(
    placer: &mut P,
    pods: Vec<TimedPod<P::Work>>,
    options: &Options,
) -> Result<(Vec<Event>, Summary), TimelineError> {
    let mut followers = vec![Vec::new(); pods.len()];
    for (i, pod) in pods.iter().enumerate() {
        if let Some(leader) = pod.follows {
            if leader >= i {
                return Err(TimelineError {
                    pod: pod.name.clone(),
                    message: "follows a pod that comes after it".into(),
                });
            }
            followers[leader].push(i);
        }
    }
    // Arrivals at fixed times, in time order (ties in workload order).
    let mut arrivals: Vec<usize> = (0..pods.len())
        .filter(|&i| pods[i].follows.is_none())
        .collect();
    arrivals.sort_by_key(|&i| (pods[i].arrival, i));
    let capacity = placer.gpu_capacity().max(1) as f64;
    let mut run = Run {
        placer,
        records: (0..pods.len()).map(|_| Record::default()).collect(),
        pods,
        followers,
        queue: BTreeSet::new(),
        departures: BinaryHeap::new(),
        events: Vec::new(),
        group_running: BTreeMap::new(),
        index: Default::default(),
    };
    run.index = run
        .pods
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.namespace.clone(), p.name.clone()), i))
        .collect();
    let mut allocation = Vec::new();
    let mut fragmentation = Vec::new();
    let mut waiting = Vec::new();
    let mut next_arrival = 0;
    let start = arrivals.first().map_or(0, |&i| run.pods[i].arrival);
    let mut now = start;
    let mut weighted = 0.0;
    loop {
        let arrival = arrivals.get(next_arrival).map(|&i| run.pods[i].arrival);
        let departure = run.departures.peek().map(|Reverse((t, _))| *t);
        let deadline = options
            .max_wait
            .and_then(|wait| run.queue.iter().map(|key| key.1.saturating_add(wait)).min());
        let Some(time) = [arrival, departure, deadline].into_iter().flatten().min() else {
            break;
        };
        weighted += run.placer.gpu_used() as f64 * (time - now) as f64;
        now = time;
        // Departures first: they make room.
        let left = run.depart(time);
        // Pods past the maximum wait are given up.
        if let Some(wait) = options.max_wait {
            let expired: Vec<QueueKey> = run
                .queue
                .iter()
                .copied()
                .filter(|key| key.1.saturating_add(wait) <= time)
                .collect();
            for key in expired {
                run.queue.remove(&key);
                run.records[key.2].failed = true;
                run.log(time, key.2, EventKind::Failed);
            }
        }
        if !left.is_empty() {
            run.retry(time);
        }
        // Followers of the pods that left arrive now, then the arrivals due.
        for leader in left {
            for follower in run.followers[leader].clone() {
                run.arrive(time, follower);
            }
        }
        while arrivals
            .get(next_arrival)
            .is_some_and(|&i| run.pods[i].arrival <= time)
        {
            let pod = arrivals[next_arrival];
            next_arrival += 1;
            run.arrive(time, pod);
        }
        if run.placer.retry_on_placement() && !run.queue.is_empty() {
            run.retry(time);
        }
        let used = run.placer.gpu_used() as f64;
        allocation.push(Sample {
            time: time - start,
            value: 100.0 * used / capacity,
        });
        if let Some(measure) = run.placer.fragmentation() {
            fragmentation.push(Sample {
                time: time - start,
                value: 100.0 * measure / capacity,
            });
        }
        waiting.push(Sample {
            time: time - start,
            value: run.queue.len() as f64,
        });
    }
    let makespan = now - start;
    let overall = figures(run.records.iter());
    let mut by_namespace: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, pod) in run.pods.iter().enumerate() {
        by_namespace
            .entry(pod.namespace.clone())
            .or_default()
            .push(i);
    }
    let namespaces = by_namespace
        .into_iter()
        .map(|(namespace, members)| {
            let figures = figures(members.iter().map(|&i| &run.records[i]));
            (namespace, figures)
        })
        .collect();
    let summary = Summary {
        policy: options.policy.clone(),
        seed: options.seed,
        total_gpus: run.placer.gpu_capacity() / MILLI,
        nodes: run.placer.nodes(),
        makespan,
        overall,
        namespaces,
        mean_allocation: if makespan > 0 {
            100.0 * weighted / makespan as f64 / capacity
        } else {
            allocation.last().map_or(0.0, |s| s.value)
        },
        allocation: thin(allocation, 1000),
        fragmentation: thin(fragmentation, 1000),
        waiting: thin(waiting, 1000),
    };
    Ok((run.events, summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots of one GPU each; a pod takes one.
    struct Slots {
        free: i64,
        total: i64,
    }

    impl Placer for Slots {
        type Work = ();
        type Held = ();
        type Shape = ();
        fn shape(&self, _: &()) -> Option<()> {
            Some(())
        }
        fn place(&mut self, _: (&str, &str), _: &()) -> Option<(Placed, ())> {
            (self.free > 0).then(|| {
                self.free -= 1;
                let placed = Placed {
                    node: "n".into(),
                    devices: Vec::new(),
                    gpu_milli: MILLI,
                };
                (placed, ())
            })
        }
        fn release(&mut self, _: (&str, &str), _: &(), _: ()) {
            self.free += 1;
        }
        fn gpu_used(&self) -> i64 {
            (self.total - self.free) * MILLI
        }
        fn gpu_capacity(&self) -> i64 {
            self.total * MILLI
        }
        fn fragmentation(&self) -> Option<f64> {
            None
        }
        fn nodes(&self) -> usize {
            1
        }
    }

    fn pod(name: &str, arrival: i64, follows: Option<usize>, priority: i32) -> TimedPod<()> {
        TimedPod {
            namespace: "ns".into(),
            name: name.into(),
            arrival,
            follows,
            duration: Some(10),
            priority,
            work: (),
        }
    }

    fn options() -> Options {
        Options {
            policy: "slots".into(),
            seed: 0,
            max_wait: None,
        }
    }

    #[test]
    fn followers_arrive_when_their_leader_leaves_and_priority_jumps_the_queue() {
        // One slot. a runs 0–10; b (low) and c (high) wait; d follows a. At 10 c goes first
        // (priority), d arrives and waits behind b; b runs 20–30, d 30–40.
        let pods = vec![
            pod("a", 0, None, 0),
            pod("b", 1, None, 0),
            pod("c", 2, None, 5),
            pod("d", 0, Some(0), 0),
        ];
        let mut slots = Slots { free: 1, total: 1 };
        let (events, summary) = run(&mut slots, pods, &options()).expect("runs");
        let placed: Vec<(i64, &str)> = events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Placed { .. }))
            .map(|e| (e.time, e.pod.as_str()))
            .collect();
        assert_eq!(placed, [(0, "a"), (10, "c"), (20, "b"), (30, "d")]);
        assert_eq!(summary.makespan, 40);
        assert_eq!(summary.overall.completed, 4);
        // d waited 20 (10 → 30); b 19; c 8.
        assert!((summary.overall.mean_wait - 47.0 / 4.0).abs() < 1e-9);
        assert!(summary.fragmentation.is_empty());
        assert_eq!(slots.free, 1, "everything left");
    }

    proptest::proptest! {
        /// Whatever arrives, with whatever priorities, durations and waits: time never runs
        /// backwards, the slots are never over-committed, every pod ends up placed, failed or
        /// waiting, and everything placed with a duration leaves.
        #[test]
        fn runs_keep_their_invariants(
            specs in proptest::collection::vec(
                (0i64..500, proptest::option::of(1i64..200), -3i32..3, proptest::option::of(0usize..40)),
                1..40,
            ),
            slots in 1i64..4,
            max_wait in proptest::option::of(0i64..300),
        ) {
            let pods: Vec<TimedPod<()>> = specs
                .iter()
                .enumerate()
                .map(|(i, (arrival, duration, priority, follows))| TimedPod {
                    namespace: format!("ns{}", i % 3),
                    name: format!("p{i}"),
                    arrival: *arrival,
                    follows: follows.filter(|f| *f < i),
                    duration: *duration,
                    priority: *priority,
                    work: (),
                })
                .collect();
            let mut placer = Slots { free: slots, total: slots };
            let options = Options { policy: "slots".into(), seed: 0, max_wait };
            let (events, summary) = run(&mut placer, pods, &options).expect("runs");
            let mut last = i64::MIN;
            for event in &events {
                proptest::prop_assert!(event.time >= last);
                last = event.time;
                proptest::prop_assert!(event.gpu_used >= 0 && event.gpu_used <= slots * MILLI);
            }
            let o = &summary.overall;
            proptest::prop_assert_eq!(o.placed + o.failed + o.pending, o.pods);
            let forever = specs.iter().any(|(_, d, _, _)| d.is_none());
            if !forever {
                proptest::prop_assert_eq!(o.completed, o.placed);
                proptest::prop_assert_eq!(placer.free, slots, "everything left");
            }
        }
    }

    #[test]
    fn a_pod_cannot_follow_a_later_one() {
        let pods = vec![pod("a", 0, Some(1), 0), pod("b", 0, None, 0)];
        let error = run(&mut Slots { free: 1, total: 1 }, pods, &options()).expect_err("bad");
        assert_eq!(
            error.to_string(),
            "pod a: follows a pod that comes after it"
        );
    }
}
