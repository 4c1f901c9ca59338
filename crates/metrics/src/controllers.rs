//! kube-controller-manager's metrics, defined as upstream defines them: client-go's work
//! queue metrics as kube-controller-manager registers them
//! (`k8s.io/component-base/metrics/prometheus/workqueue/metrics.go`, subsystem `workqueue`,
//! label `name`), the Job controller's `job_controller_jobs_finished_total` and
//! `job_controller_pod_failures_handled_by_failure_policy_total` (`pkg/controller/job/metrics`) and the node lifecycle controller's `node_collector_*`
//! (`pkg/controller/nodelifecycle/metrics.go`). Help texts carry the `[ALPHA]`/`[STABLE]`
//! prefix component-base gives them on the wire.
//!
//! Tessera's controllers have no work queues; each runs passes. What a queue metric means
//! here, per kind of controller:
//!
//! - **Pass controllers** (a loop over `tessera_controllers::shell::next_pass`: endpoints,
//!   disruption, resource claims; the node lifecycle and autoscaler loops on their ticks):
//!   each watch change the loop consumes (or resync tick) is an *add*; *depth* is the changes
//!   received and not yet handled (they are all handled by the next pass, so depth falls to 0
//!   when it starts); *queue duration* is observed once per pass, from the first change of
//!   its burst to the pass's start; *work duration* is the pass's run time. A pass is one
//!   item: the histograms count passes, the adds count changes (upstream's queue folds
//!   repeated adds of one key; a pass folds all of them).
//! - **The garbage collector** (`garbage_collector_attempt_to_delete`) has a queue of
//!   dependents to check: each one queued is an add, each check is timed; it keeps no enqueue
//!   times (no queue duration) and retries nothing.
//! - **Per-object controllers** (kube-rs `Controller`: job, replicaset, deployment,
//!   daemonset, statefulset): each reconciliation is an add taken at once; kube-rs's own
//!   scheduler (which folds repeated triggers of one object, as upstream's queue does) shows
//!   neither its depth nor how long a trigger waited, so depth stays 0 and no queue duration
//!   is observed; *work duration* is the reconciliation's run time.
//! - *Retries* count what the controller knows it will retry: a reconciliation that failed
//!   (kube-rs requeues it) or a pass whose writes failed and whose next pass is due anyway.
//!   Controllers that log a failed write and wait for the next change count none.
//! - *Unfinished work* and the *longest running processor* are computed from the passes and
//!   reconciliations in progress when [`ControllerManagerMetrics::update_unfinished`] is
//!   called (at scrape time; upstream refreshes them every 500 ms).
//!
//! Owns names, help texts, labels, buckets and what a Job's status or a node set means for
//! them; time is an argument. Does not know when a pass runs — the shells say so.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};
use serde_json::Value;
use tessera_model::json::text;

use crate::Error;
use crate::components::{exponential_buckets, registered};

/// The queue names kube-controller-manager's controllers give their work queues.
pub mod queue_name {
    /// `pkg/controller/job`.
    pub const JOB: &str = "job";
    /// `pkg/controller/replicaset`.
    pub const REPLICASET: &str = "replicaset";
    /// `pkg/controller/deployment`.
    pub const DEPLOYMENT: &str = "deployment";
    /// `pkg/controller/daemon`.
    pub const DAEMONSET: &str = "daemonset";
    /// `pkg/controller/statefulset`.
    pub const STATEFULSET: &str = "statefulset";
    /// `pkg/controller/endpointslice`.
    pub const ENDPOINT_SLICE: &str = "endpoint_slice";
    /// `pkg/controller/endpoint`.
    pub const ENDPOINT: &str = "endpoint";
    /// `pkg/controller/disruption`.
    pub const DISRUPTION: &str = "disruption";
    /// `pkg/controller/nodelifecycle` (its node update queue).
    pub const NODE_LIFECYCLE: &str = "node_lifecycle_controller";
    /// `pkg/controller/podautoscaler`.
    pub const HORIZONTAL_POD_AUTOSCALER: &str = "horizontalpodautoscaler";
    /// `pkg/controller/resourceclaim`.
    pub const RESOURCE_CLAIM: &str = "resource_claim";
    /// `pkg/controller/garbagecollector` (its attempt-to-delete queue).
    pub const GARBAGE_COLLECTOR_ATTEMPT_TO_DELETE: &str = "garbage_collector_attempt_to_delete";
}

/// client-go's work queue latency buckets: `ExponentialBuckets(10e-9, 10, 10)`.
pub fn workqueue_buckets() -> Vec<f64> {
    exponential_buckets(10e-9, 10.0, 10)
}

/// Help texts as kube-controller-manager serves them (stability prefix included).
pub mod help {
    /// `workqueue_adds_total`.
    pub const ADDS: &str = "[ALPHA] Total number of adds handled by workqueue";
    /// `workqueue_depth`.
    pub const DEPTH: &str = "[ALPHA] Current depth of workqueue";
    /// `workqueue_queue_duration_seconds`.
    pub const QUEUE_DURATION: &str =
        "[ALPHA] How long in seconds an item stays in workqueue before being requested.";
    /// `workqueue_work_duration_seconds`.
    pub const WORK_DURATION: &str =
        "[ALPHA] How long in seconds processing an item from workqueue takes.";
    /// `workqueue_unfinished_work_seconds`.
    pub const UNFINISHED: &str = "[ALPHA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.";
    /// `workqueue_longest_running_processor_seconds`.
    pub const LONGEST_RUNNING: &str =
        "[ALPHA] How many seconds has the longest running processor for workqueue been running.";
    /// `workqueue_retries_total`.
    pub const RETRIES: &str = "[ALPHA] Total number of retries handled by workqueue";
    /// `job_controller_jobs_finished_total`.
    pub const JOBS_FINISHED: &str = "[STABLE] The number of finished jobs";
    /// `job_controller_pod_failures_handled_by_failure_policy_total` (a Go raw string in
    /// upstream's source: its line breaks and indentation are part of the text).
    pub const POD_FAILURES_HANDLED: &str = "[ALPHA] The number of failed Pods handled by failure policy with\n\t\t\trespect to the failure policy action applied based on the matched\n\t\t\trule. Possible values of the action label correspond to the\n\t\t\tpossible values for the failure policy rule action, which are:\n\t\t\t\"FailJob\", \"Ignore\" and \"Count\".";
    /// `node_collector_zone_health`.
    pub const ZONE_HEALTH: &str = "[ALPHA] Gauge measuring percentage of healthy nodes per zone.";
    /// `node_collector_zone_size`.
    pub const ZONE_SIZE: &str = "[ALPHA] Gauge measuring number of registered Nodes per zones.";
    /// `node_collector_unhealthy_nodes_in_zone`.
    pub const UNHEALTHY_NODES: &str =
        "[ALPHA] Gauge measuring number of not Ready Nodes per zones.";
    /// `node_collector_evictions_total`.
    pub const EVICTIONS: &str = "[STABLE] Number of Node evictions that happened since current instance of NodeController started.";
}

/// The passes or reconciliations of one queue in progress, by token.
#[derive(Default)]
struct Processing {
    next: u64,
    started: BTreeMap<u64, SystemTime>,
}

fn lock(processing: &Mutex<Processing>) -> std::sync::MutexGuard<'_, Processing> {
    processing.lock().unwrap_or_else(PoisonError::into_inner)
}

fn seconds(from: SystemTime, to: SystemTime) -> f64 {
    to.duration_since(from)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

/// One queue's metrics, bound to its `name` (upstream's `queueMetrics`): cheap to clone,
/// shared by the controller that feeds it and the registry that renders it.
#[derive(Clone)]
pub struct QueueMetrics {
    name: String,
    adds: IntCounter,
    depth: IntGauge,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished: Gauge,
    longest_running: Gauge,
    retries: IntCounter,
    processing: Arc<Mutex<Processing>>,
}

/// A pass or reconciliation in progress: [`QueueMetrics::done`] observes its duration;
/// dropped unfinished (a cancelled task), it stops counting as unfinished work.
pub struct Work {
    token: u64,
    started: SystemTime,
    processing: Arc<Mutex<Processing>>,
}

impl Drop for Work {
    fn drop(&mut self) {
        lock(&self.processing).started.remove(&self.token);
    }
}

impl QueueMetrics {
    /// The queue's name (the `name` label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `count` items were added (upstream's `add`): counted, and waiting.
    pub fn add(&self, count: u64) {
        self.adds.inc_by(count);
        self.depth.add(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Processing of `taken` waiting items starts at `now` (upstream's `get`); `enqueued` is
    /// when the first of them was added, when known (a queue duration is observed).
    pub fn get(&self, taken: u64, enqueued: Option<SystemTime>, now: SystemTime) -> Work {
        let taken = i64::try_from(taken).unwrap_or(i64::MAX);
        self.depth.set((self.depth.get() - taken).max(0));
        if let Some(enqueued) = enqueued {
            self.queue_duration.observe(seconds(enqueued, now));
        }
        let mut processing = lock(&self.processing);
        let token = processing.next;
        processing.next += 1;
        processing.started.insert(token, now);
        Work {
            token,
            started: now,
            processing: self.processing.clone(),
        }
    }

    /// `count` waiting items leave the queue unprocessed, folded into one taken already.
    pub fn fold(&self, count: u64) {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.depth.set((self.depth.get() - count).max(0));
    }

    /// Processing that started with `work` ended at `now` (upstream's `done`).
    pub fn done(&self, work: Work, now: SystemTime) {
        self.work_duration.observe(seconds(work.started, now));
        drop(work);
    }

    /// An item will be retried (upstream's `retry`, from `AddRateLimited`).
    pub fn retry(&self) {
        self.retries.inc();
    }

    /// Sets the unfinished-work gauges from what is in progress at `now` (upstream's
    /// `updateUnfinishedWork`): the sum and the longest of their ages.
    pub fn update_unfinished(&self, now: SystemTime) {
        let processing = lock(&self.processing);
        let ages = processing.started.values().map(|s| seconds(*s, now));
        let (total, longest) = ages.fold((0.0, 0.0_f64), |(t, l), a| (t + a, l.max(a)));
        self.unfinished.set(total);
        self.longest_running.set(longest);
    }
}

/// How a Job finished, as `job_controller_jobs_finished_total` labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFinished {
    /// `Indexed` or `NonIndexed`.
    pub completion_mode: &'static str,
    /// `succeeded` or `failed`.
    pub result: &'static str,
    /// The `Failed` condition's reason; empty for a success (upstream's `recordJobFinished`).
    pub reason: String,
}

/// What writing `status` to `job` means for `job_controller_jobs_finished_total`: the Job
/// finishes when `status` carries a `Complete` or `Failed` condition with status `True` that
/// the Job's stored status does not.
pub fn job_finished(job: &Value, status: &Value) -> Option<JobFinished> {
    let finished = |conditions: Option<&Value>, kind: &str| -> Option<Value> {
        conditions
            .and_then(Value::as_array)?
            .iter()
            .find(|c| c["type"] == kind && c["status"] == "True")
            .cloned()
    };
    let before = job.pointer("/status/conditions");
    let after = status.get("conditions");
    let (kind, condition) = ["Complete", "Failed"]
        .into_iter()
        .find_map(|kind| finished(after, kind).map(|c| (kind, c)))?;
    if finished(before, kind).is_some() {
        return None;
    }
    let completion_mode = if text(job, "/spec/completionMode") == "Indexed" {
        "Indexed"
    } else {
        "NonIndexed"
    };
    Some(if kind == "Complete" {
        JobFinished {
            completion_mode,
            result: "succeeded",
            reason: String::new(),
        }
    } else {
        JobFinished {
            completion_mode,
            result: "failed",
            reason: text(&condition, "/reason").to_string(),
        }
    })
}

/// A node's zone key (`k8s.io/component-helpers/node/topology.GetZoneKey`): region and zone
/// from the GA labels or else the beta ones, joined by `":\x00:"`; empty when both are.
pub fn zone_key(node: &Value) -> String {
    let label = |ga: &str, beta: &str| {
        let labels = node.pointer("/metadata/labels");
        labels
            .and_then(|l| l.get(ga))
            .or_else(|| labels.and_then(|l| l.get(beta)))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let zone = label(
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
    );
    let region = label(
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    );
    if region.is_empty() && zone.is_empty() {
        String::new()
    } else {
        format!("{region}:\u{0}:{zone}")
    }
}

/// One zone's health as the node lifecycle controller's `handleDisruption` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneHealth {
    /// Nodes in the zone.
    pub size: usize,
    /// Nodes whose `Ready` condition is missing or not `True`.
    pub unhealthy: usize,
}

impl ZoneHealth {
    /// The percentage of healthy nodes.
    pub fn percent(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let (size, unhealthy) = (self.size as f64, self.unhealthy as f64);
        if self.size == 0 {
            100.0
        } else {
            100.0 * (size - unhealthy) / size
        }
    }
}

/// Every zone of `nodes` with its size and unhealthy count.
pub fn zones(nodes: &[Value]) -> BTreeMap<String, ZoneHealth> {
    let mut zones: BTreeMap<String, ZoneHealth> = BTreeMap::new();
    for node in nodes {
        let zone = zones.entry(zone_key(node)).or_insert(ZoneHealth {
            size: 0,
            unhealthy: 0,
        });
        zone.size += 1;
        if !tessera_model::conditions::is_true(node, "Ready") {
            zone.unhealthy += 1;
        }
    }
    zones
}

/// The taints whose addition starts a node's taint-based eviction (the node lifecycle
/// controller's `NotReadyTaintTemplate` and `UnreachableTaintTemplate`).
const EVICTION_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// Whether setting `taints` on `node` adds a NoExecute not-ready or unreachable taint it did
/// not carry — what upstream counts in `node_collector_evictions_total` once the swap is
/// written.
pub fn eviction_started(node: &Value, taints: &[Value]) -> bool {
    let eviction = |t: &&Value| {
        t["effect"] == "NoExecute" && EVICTION_TAINTS.iter().any(|key| t["key"] == *key)
    };
    let had: Vec<&Value> = node
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter(eviction).collect())
        .unwrap_or_default();
    taints
        .iter()
        .filter(eviction)
        .any(|t| !had.iter().any(|h| h["key"] == t["key"]))
}

/// kube-controller-manager's metrics.
pub struct ControllerManagerMetrics {
    /// The registry `/components/kube-controller-manager/metrics` renders.
    pub registry: Registry,
    adds: IntCounterVec,
    depth: IntGaugeVec,
    queue_duration: HistogramVec,
    work_duration: HistogramVec,
    unfinished: GaugeVec,
    longest_running: GaugeVec,
    retries: IntCounterVec,
    /// `job_controller_jobs_finished_total{completion_mode,result,reason}`.
    pub jobs_finished: IntCounterVec,
    /// `job_controller_pod_failures_handled_by_failure_policy_total{action}`.
    pub pod_failures_handled: IntCounterVec,
    zone_health: GaugeVec,
    zone_size: GaugeVec,
    unhealthy_nodes: GaugeVec,
    /// `node_collector_evictions_total{zone}`.
    pub evictions: IntCounterVec,
    queues: Mutex<BTreeMap<String, QueueMetrics>>,
    known_zones: Mutex<Vec<String>>,
}

impl ControllerManagerMetrics {
    /// Every family defined and registered, with no queue yet.
    pub fn new() -> Result<ControllerManagerMetrics, Error> {
        let registry = Registry::new();
        let name = &["name"];
        let zone = &["zone"];
        let histogram = |metric: &str, help: &str| {
            registered(
                &registry,
                metric,
                HistogramVec::new(
                    HistogramOpts::new(metric, help).buckets(workqueue_buckets()),
                    name,
                ),
            )
        };
        let gauge = |metric: &str, help: &str, labels: &[&str]| {
            registered(
                &registry,
                metric,
                GaugeVec::new(Opts::new(metric, help), labels),
            )
        };
        let counter = |metric: &str, help: &str, labels: &[&str]| {
            registered(
                &registry,
                metric,
                IntCounterVec::new(Opts::new(metric, help), labels),
            )
        };
        Ok(ControllerManagerMetrics {
            adds: counter("workqueue_adds_total", help::ADDS, name)?,
            depth: registered(
                &registry,
                "workqueue_depth",
                IntGaugeVec::new(Opts::new("workqueue_depth", help::DEPTH), name),
            )?,
            queue_duration: histogram("workqueue_queue_duration_seconds", help::QUEUE_DURATION)?,
            work_duration: histogram("workqueue_work_duration_seconds", help::WORK_DURATION)?,
            unfinished: gauge("workqueue_unfinished_work_seconds", help::UNFINISHED, name)?,
            longest_running: gauge(
                "workqueue_longest_running_processor_seconds",
                help::LONGEST_RUNNING,
                name,
            )?,
            retries: counter("workqueue_retries_total", help::RETRIES, name)?,
            jobs_finished: counter(
                "job_controller_jobs_finished_total",
                help::JOBS_FINISHED,
                &["completion_mode", "result", "reason"],
            )?,
            pod_failures_handled: counter(
                "job_controller_pod_failures_handled_by_failure_policy_total",
                help::POD_FAILURES_HANDLED,
                &["action"],
            )?,
            zone_health: gauge("node_collector_zone_health", help::ZONE_HEALTH, zone)?,
            zone_size: gauge("node_collector_zone_size", help::ZONE_SIZE, zone)?,
            unhealthy_nodes: gauge(
                "node_collector_unhealthy_nodes_in_zone",
                help::UNHEALTHY_NODES,
                zone,
            )?,
            evictions: counter("node_collector_evictions_total", help::EVICTIONS, zone)?,
            queues: Mutex::new(BTreeMap::new()),
            known_zones: Mutex::new(Vec::new()),
            registry,
        })
    }

    /// The queue called `name`, its series present (at 0) from now on, as upstream's are
    /// once the queue is made. Asking twice gives the same queue.
    pub fn queue(&self, name: &str) -> QueueMetrics {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .entry(name.to_string())
            .or_insert_with(|| QueueMetrics {
                name: name.to_string(),
                adds: self.adds.with_label_values(&[name]),
                depth: self.depth.with_label_values(&[name]),
                queue_duration: self.queue_duration.with_label_values(&[name]),
                work_duration: self.work_duration.with_label_values(&[name]),
                unfinished: self.unfinished.with_label_values(&[name]),
                longest_running: self.longest_running.with_label_values(&[name]),
                retries: self.retries.with_label_values(&[name]),
                processing: Arc::default(),
            })
            .clone()
    }

    /// Refreshes every queue's unfinished-work gauges at `now` (before a scrape).
    pub fn update_unfinished(&self, now: SystemTime) {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        for queue in queues.values() {
            queue.update_unfinished(now);
        }
    }

    /// A Job finished as `finished` says.
    pub fn job_finished(&self, finished: &JobFinished) {
        self.jobs_finished
            .with_label_values(&[finished.completion_mode, finished.result, &finished.reason])
            .inc();
    }

    /// Failed pods a Job's status write accounted for, by the `podFailurePolicy` action that
    /// handled them (upstream's `recordJobPodFailurePolicyActions`).
    pub fn pod_failures_handled<'a>(
        &self,
        actions: impl IntoIterator<Item = (&'a String, &'a u64)>,
    ) {
        for (action, count) in actions {
            self.pod_failures_handled
                .with_label_values(&[action])
                .inc_by(*count);
        }
    }

    /// The zones of a node health pass (upstream's `handleDisruption`): each zone's size,
    /// health and unhealthy count; a zone seen before and now empty reads 0, 100 and 0.
    pub fn set_zones(&self, zones: &BTreeMap<String, ZoneHealth>) {
        let mut known = self
            .known_zones
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (zone, health) in zones {
            #[allow(clippy::cast_precision_loss)]
            let (size, unhealthy) = (health.size as f64, health.unhealthy as f64);
            self.zone_size.with_label_values(&[zone]).set(size);
            self.zone_health
                .with_label_values(&[zone])
                .set(health.percent());
            self.unhealthy_nodes
                .with_label_values(&[zone])
                .set(unhealthy);
        }
        for zone in known.iter().filter(|z| !zones.contains_key(*z)) {
            self.zone_size.with_label_values(&[zone]).set(0.0);
            self.zone_health.with_label_values(&[zone]).set(100.0);
            self.unhealthy_nodes.with_label_values(&[zone]).set(0.0);
        }
        *known = zones.keys().cloned().collect();
    }

    /// A taint-based eviction of a node in `zone` started.
    pub fn eviction(&self, zone: &str) {
        self.evictions.with_label_values(&[zone]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::samples;
    use serde_json::json;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn help_of(text: &str, family: &str) -> String {
        let prefix = format!("# HELP {family} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no help for {family}"))
            .to_string()
    }

    /// Names, types, labels and help texts as kube-controller-manager serves them.
    #[test]
    fn families_are_upstreams() {
        let metrics = ControllerManagerMetrics::new().unwrap();
        metrics.queue(queue_name::JOB);
        metrics.job_finished(&JobFinished {
            completion_mode: "NonIndexed",
            result: "succeeded",
            reason: String::new(),
        });
        metrics.set_zones(&zones(&[json!({"metadata": {"name": "n"}})]));
        metrics.eviction("");
        metrics.pod_failures_handled(&BTreeMap::from([("FailJob".to_string(), 2)]));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let cases = [
            (
                "workqueue_adds_total",
                "counter",
                help::ADDS,
                "Total number of adds handled by workqueue",
            ),
            (
                "workqueue_depth",
                "gauge",
                help::DEPTH,
                "Current depth of workqueue",
            ),
            (
                "workqueue_queue_duration_seconds",
                "histogram",
                help::QUEUE_DURATION,
                "How long in seconds an item stays in workqueue before being requested.",
            ),
            (
                "workqueue_work_duration_seconds",
                "histogram",
                help::WORK_DURATION,
                "How long in seconds processing an item from workqueue takes.",
            ),
            (
                "workqueue_unfinished_work_seconds",
                "gauge",
                help::UNFINISHED,
                "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "gauge",
                help::LONGEST_RUNNING,
                "How many seconds has the longest running processor for workqueue been running.",
            ),
            (
                "workqueue_retries_total",
                "counter",
                help::RETRIES,
                "Total number of retries handled by workqueue",
            ),
            (
                "job_controller_jobs_finished_total",
                "counter",
                help::JOBS_FINISHED,
                "The number of finished jobs",
            ),
            (
                "job_controller_pod_failures_handled_by_failure_policy_total",
                "counter",
                help::POD_FAILURES_HANDLED,
                "The number of failed Pods handled by failure policy with\n\t\t\trespect to the failure policy action applied based on the matched\n\t\t\trule. Possible values of the action label correspond to the\n\t\t\tpossible values for the failure policy rule action, which are:\n\t\t\t\"FailJob\", \"Ignore\" and \"Count\".",
            ),
            (
                "node_collector_zone_health",
                "gauge",
                help::ZONE_HEALTH,
                "Gauge measuring percentage of healthy nodes per zone.",
            ),
            (
                "node_collector_zone_size",
                "gauge",
                help::ZONE_SIZE,
                "Gauge measuring number of registered Nodes per zones.",
            ),
            (
                "node_collector_unhealthy_nodes_in_zone",
                "gauge",
                help::UNHEALTHY_NODES,
                "Gauge measuring number of not Ready Nodes per zones.",
            ),
            (
                "node_collector_evictions_total",
                "counter",
                help::EVICTIONS,
                "Number of Node evictions that happened since current instance of NodeController started.",
            ),
        ];
        for (family, kind, help, upstream) in cases {
            assert!(
                text.contains(&format!("# TYPE {family} {kind}\n")),
                "{family} is a {kind}:\n{text}"
            );
            // The text format escapes a help text's line breaks.
            assert_eq!(
                help_of(&text, family),
                help.replace('\n', "\\n"),
                "{family}"
            );
            let stability =
                if family.ends_with("jobs_finished_total") || family.ends_with("evictions_total") {
                    "[STABLE] "
                } else {
                    "[ALPHA] "
                };
            assert_eq!(help, format!("{stability}{upstream}"), "{family}");
        }
        let got = samples(&text, &[]);
        for series in [
            "workqueue_adds_total{name=\"job\"}",
            "workqueue_depth{name=\"job\"}",
            "workqueue_retries_total{name=\"job\"}",
            "workqueue_unfinished_work_seconds{name=\"job\"}",
            "workqueue_longest_running_processor_seconds{name=\"job\"}",
            "workqueue_queue_duration_seconds_count{name=\"job\"}",
            "workqueue_work_duration_seconds_count{name=\"job\"}",
        ] {
            assert_eq!(got.get(series), Some(&0.0), "{series} present at 0");
        }
        assert_eq!(
            got.get("job_controller_jobs_finished_total{completion_mode=\"NonIndexed\",reason=\"\",result=\"succeeded\"}"),
            Some(&1.0)
        );
        assert_eq!(
            got.get("node_collector_evictions_total{zone=\"\"}"),
            Some(&1.0)
        );
        assert_eq!(
            got.get(
                "job_controller_pod_failures_handled_by_failure_policy_total{action=\"FailJob\"}"
            ),
            Some(&2.0)
        );
    }

    #[test]
    fn buckets_are_client_gos() {
        let buckets = workqueue_buckets();
        assert_eq!(buckets.len(), 10);
        for (bucket, want) in buckets
            .iter()
            .zip([1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0])
        {
            assert!((bucket - want).abs() <= want * 1e-9, "{bucket} vs {want}");
        }
        let metrics = ControllerManagerMetrics::new().unwrap();
        metrics.queue("q");
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &["workqueue_work_duration_seconds_bucket"]);
        assert_eq!(got.len(), 11, "ten buckets and +Inf: {got:?}");
    }

    /// A pass as a pass controller records it: changes added, the pass taken, finished.
    #[test]
    fn an_observed_pass_shows_in_the_text() {
        let metrics = ControllerManagerMetrics::new().unwrap();
        let queue = metrics.queue(queue_name::DISRUPTION);
        assert_eq!(queue.name(), "disruption");
        queue.add(1);
        queue.add(2);
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(got.get("workqueue_depth{name=\"disruption\"}"), Some(&3.0));
        // The burst began at 10 s; the pass starts at 10.5 s and runs until 12.5 s.
        let start = at(10) + Duration::from_millis(500);
        let work = queue.get(3, Some(at(10)), start);
        metrics.update_unfinished(at(12));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        let name = "{name=\"disruption\"}";
        assert_eq!(got.get(&format!("workqueue_depth{name}")), Some(&0.0));
        assert_eq!(
            got.get(&format!("workqueue_unfinished_work_seconds{name}")),
            Some(&1.5)
        );
        assert_eq!(
            got.get(&format!(
                "workqueue_longest_running_processor_seconds{name}"
            )),
            Some(&1.5)
        );
        queue.done(work, start + Duration::from_secs(2));
        queue.retry();
        metrics.update_unfinished(at(20));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        let cases = [
            ("workqueue_adds_total", 3.0),
            ("workqueue_retries_total", 1.0),
            ("workqueue_queue_duration_seconds_count", 1.0),
            ("workqueue_queue_duration_seconds_sum", 0.5),
            ("workqueue_work_duration_seconds_count", 1.0),
            ("workqueue_work_duration_seconds_sum", 2.0),
            ("workqueue_unfinished_work_seconds", 0.0),
            ("workqueue_longest_running_processor_seconds", 0.0),
        ];
        for (family, want) in cases {
            assert_eq!(got.get(&format!("{family}{name}")), Some(&want), "{family}");
        }
        // 0.5 s lands in the 1 s bucket, not the 0.1 s one; 2 s in the 10 s one.
        let bucket = |family: &str, le: &str| {
            got.get(&format!(
                "{family}_bucket{{le=\"{le}\",name=\"disruption\"}}"
            ))
            .copied()
        };
        assert_eq!(bucket("workqueue_queue_duration_seconds", "1"), Some(1.0));
        assert_eq!(bucket("workqueue_queue_duration_seconds", "0.1"), Some(0.0));
        assert_eq!(bucket("workqueue_work_duration_seconds", "1"), Some(0.0));
        assert_eq!(bucket("workqueue_work_duration_seconds", "10"), Some(1.0));
    }

    /// Reconciliations in flight together: unfinished work sums their ages, the longest
    /// running is the oldest's; one dropped unfinished stops counting.
    #[test]
    fn concurrent_work_sums_and_the_oldest_leads() {
        let metrics = ControllerManagerMetrics::new().unwrap();
        let queue = metrics.queue(queue_name::JOB);
        queue.add(2);
        let first = queue.get(1, None, at(1));
        let second = queue.get(1, None, at(3));
        queue.update_unfinished(at(4));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(
            got.get("workqueue_unfinished_work_seconds{name=\"job\"}"),
            Some(&4.0)
        );
        assert_eq!(
            got.get("workqueue_longest_running_processor_seconds{name=\"job\"}"),
            Some(&3.0)
        );
        assert_eq!(
            got.get("workqueue_queue_duration_seconds_count{name=\"job\"}"),
            Some(&0.0),
            "no wait known, none observed"
        );
        drop(first);
        queue.update_unfinished(at(4));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(
            got.get("workqueue_unfinished_work_seconds{name=\"job\"}"),
            Some(&1.0)
        );
        queue.done(second, at(5));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(
            got.get("workqueue_work_duration_seconds_count{name=\"job\"}"),
            Some(&1.0)
        );
        assert_eq!(
            metrics.queue(queue_name::JOB).name(),
            "job",
            "the same queue twice"
        );
    }

    #[test]
    fn job_finished_is_the_written_transition() {
        let job = |mode: Option<&str>, conditions: Value| {
            let mut job = json!({"spec": {}, "status": {"conditions": conditions}});
            if let Some(mode) = mode {
                job["spec"]["completionMode"] = json!(mode);
            }
            job
        };
        let condition = |kind: &str, status: &str, reason: &str| json!({"type": kind, "status": status, "reason": reason});
        let complete = condition("Complete", "True", "CompletionsReached");
        let failed = condition("Failed", "True", "BackoffLimitExceeded");
        type Labels = Option<(&'static str, &'static str, &'static str)>;
        let cases: Vec<(&str, Value, Value, Labels)> = vec![
            (
                "completes",
                job(None, json!([])),
                json!({"conditions": [condition("SuccessCriteriaMet", "True", "CompletionsReached"), complete.clone()]}),
                Some(("NonIndexed", "succeeded", "")),
            ),
            (
                "indexed fails",
                job(Some("Indexed"), json!([])),
                json!({"conditions": [failed.clone()]}),
                Some(("Indexed", "failed", "BackoffLimitExceeded")),
            ),
            (
                "complete already",
                job(None, json!([complete.clone()])),
                json!({"conditions": [complete.clone()]}),
                None,
            ),
            (
                "only a target",
                job(None, json!([])),
                json!({"conditions": [condition("FailureTarget", "True", "DeadlineExceeded")]}),
                None,
            ),
            (
                "not true",
                job(None, json!([])),
                json!({"conditions": [condition("Failed", "False", "")]}),
                None,
            ),
            (
                "no conditions",
                job(None, json!([])),
                json!({"active": 1}),
                None,
            ),
        ];
        for (case, job, status, want) in cases {
            let got = job_finished(&job, &status);
            let got = got
                .as_ref()
                .map(|f| (f.completion_mode, f.result, f.reason.as_str()));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn zones_follow_get_zone_key_and_handle_disruption() {
        let node = |labels: Value, ready: Option<&str>| {
            let conditions = ready
                .map(|s| json!([{"type": "Ready", "status": s}]))
                .unwrap_or(json!([]));
            json!({"metadata": {"labels": labels}, "status": {"conditions": conditions}})
        };
        let ga = json!({"topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": "a"});
        let beta = json!({"failure-domain.beta.kubernetes.io/zone": "b"});
        let cases = [
            (node(json!({}), Some("True")), ""),
            (node(ga.clone(), None), "r:\u{0}:a"),
            (node(beta.clone(), None), ":\u{0}:b"),
        ];
        for (node, want) in &cases {
            assert_eq!(zone_key(node), *want, "{node}");
        }
        let nodes = [
            node(ga.clone(), Some("True")),
            node(ga.clone(), Some("Unknown")),
            node(ga.clone(), None),
            node(ga.clone(), Some("True")),
            node(json!({}), Some("True")),
        ];
        let got = zones(&nodes);
        assert_eq!(
            got.get("r:\u{0}:a"),
            Some(&ZoneHealth {
                size: 4,
                unhealthy: 2
            })
        );
        let metrics = ControllerManagerMetrics::new().unwrap();
        metrics.set_zones(&got);
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(
            got.get("node_collector_zone_health{zone=\"\"}"),
            Some(&100.0)
        );
        assert_eq!(got.get("node_collector_zone_size{zone=\"\"}"), Some(&1.0));
        assert_eq!(
            got.get("node_collector_zone_health{zone=\"r:\u{0}:a\"}"),
            Some(&50.0)
        );
        assert_eq!(
            got.get("node_collector_unhealthy_nodes_in_zone{zone=\"r:\u{0}:a\"}"),
            Some(&2.0)
        );
        // The zone empties: its series read as an empty healthy zone.
        metrics.set_zones(&zones(&[node(json!({}), Some("False"))]));
        let text = crate::render(&[&metrics.registry]).unwrap();
        let got = samples(&text, &[]);
        for (family, want) in [
            ("node_collector_zone_size", 0.0),
            ("node_collector_zone_health", 100.0),
            ("node_collector_unhealthy_nodes_in_zone", 0.0),
        ] {
            assert_eq!(
                got.get(&format!("{family}{{zone=\"r:\u{0}:a\"}}")),
                Some(&want),
                "{family}"
            );
        }
        assert_eq!(got.get("node_collector_zone_health{zone=\"\"}"), Some(&0.0));
    }

    #[test]
    fn an_eviction_starts_with_a_new_no_execute_taint() {
        let taint = |key: &str, effect: &str| json!({"key": key, "effect": effect});
        let unreachable = taint("node.kubernetes.io/unreachable", "NoExecute");
        let cases = [
            (
                "new unreachable",
                json!([]),
                vec![unreachable.clone()],
                true,
            ),
            (
                "new not-ready",
                json!([]),
                vec![taint("node.kubernetes.io/not-ready", "NoExecute")],
                true,
            ),
            (
                "kept",
                json!([unreachable.clone()]),
                vec![unreachable.clone()],
                false,
            ),
            (
                "NoSchedule only",
                json!([]),
                vec![taint("node.kubernetes.io/unreachable", "NoSchedule")],
                false,
            ),
            (
                "other key",
                json!([]),
                vec![taint("gpu", "NoExecute")],
                false,
            ),
            ("removed", json!([unreachable.clone()]), vec![], false),
        ];
        for (case, before, after, want) in cases {
            let node = json!({"spec": {"taints": before}});
            assert_eq!(eviction_started(&node, &after), want, "{case}");
        }
    }
}
