//! The metrics the in-process components keep, defined as upstream defines them:
//! kube-apiserver's (`staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go`,
//! `pkg/storage` object counts), kube-scheduler's (`pkg/scheduler/metrics/metrics.go`) and
//! Kueue's counters (`pkg/metrics/metrics.go`), each in a registry of its own (with
//! kube-controller-manager's, [`crate::controllers`]), and the labels kube-apiserver gives a
//! request.
//!
//! Help texts carry component-base's stability prefix (`[STABLE] `) as kube-apiserver and
//! kube-scheduler serve them; Kueue's, from controller-runtime's registry, have none.
//!
//! Owns names, help texts, label names and buckets, and the arithmetic of labels; does not
//! know where requests come from or when a scheduling attempt happens — the shells call the
//! `observe`/`record` methods at those moments.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

use crate::Error;

/// kube-apiserver's request latency buckets (`requestLatencies`).
pub const APISERVER_DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// `prometheus.ExponentialBuckets(start, factor, count)`.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    std::iter::successors(Some(start), |b| Some(b * factor))
        .take(count)
        .collect()
}

/// Kueue's `generateExponentialBuckets(count)`: 1, then 2.5 doubling.
pub fn kueue_buckets(count: usize) -> Vec<f64> {
    let mut buckets = vec![1.0];
    buckets.extend(exponential_buckets(2.5, 2.0, count.saturating_sub(1)));
    buckets
}

/// Defines `collector` (named `name` in errors) and registers it in `registry`.
pub(crate) fn registered<C: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    name: &str,
    collector: Result<C, prometheus::Error>,
) -> Result<C, Error> {
    let metric = |source| Error::Metric {
        name: name.to_string(),
        source,
    };
    let collector = collector.map_err(metric)?;
    registry
        .register(Box::new(collector.clone()))
        .map_err(metric)?;
    Ok(collector)
}

/// A vector of `Opts`-defined metrics (counters, gauges), made by `new` and registered.
fn opts_vec<C: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    new: fn(Opts, &[&str]) -> Result<C, prometheus::Error>,
) -> Result<C, Error> {
    registered(registry, name, new(Opts::new(name, help), labels))
}

fn counter_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntCounterVec, Error> {
    opts_vec(registry, name, help, labels, IntCounterVec::new)
}

fn gauge_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> Result<IntGaugeVec, Error> {
    opts_vec(registry, name, help, labels, IntGaugeVec::new)
}

fn histogram_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> Result<HistogramVec, Error> {
    registered(
        registry,
        name,
        HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels),
    )
}

/// What kube-apiserver knows of a request when it records it (its `RequestInfo`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestInfo {
    /// A resource request (`/api/…`, `/apis/…` naming a resource), not a non-resource URL.
    pub resource_request: bool,
    /// The authorization verb (`get`, `list`, `watch`, `create`, `patch`, …).
    pub verb: String,
    /// API group, version, resource plural and subresource.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource plural.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace of the request.
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// The URL path (reported as the subresource of non-resource requests, as upstream).
    pub path: String,
    /// The request's content type is `application/apply-patch+yaml` (server-side apply).
    pub apply: bool,
    /// The values of the `dryRun` query parameter.
    pub dry_run: Vec<String>,
}

/// The labels kube-apiserver records a request under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLabels {
    /// Upper-case verb: `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`,
    /// `DELETECOLLECTION`, `CONNECT`.
    pub verb: String,
    /// `dry_run` (the sorted distinct `dryRun` values joined by commas).
    pub dry_run: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource.
    pub resource: String,
    /// Subresource (the path for non-resource requests).
    pub subresource: String,
    /// `namespace`, `resource`, `cluster` or empty.
    pub scope: String,
    /// Whether the request is long-running (WATCH, CONNECT): no latency is observed.
    pub long_running: bool,
    /// `mutating` or `readOnly`, for `apiserver_current_inflight_requests`.
    pub request_kind: &'static str,
}

impl RequestLabels {
    /// The labels of a request, as kube-apiserver's `MonitorRequest`/`cleanVerb`/`CleanScope`
    /// derive them: resource requests carry the verb of their RBAC attributes upper-cased
    /// (`create` is `POST`, `update` is `PUT`), `list` with `watch` is `WATCH`, a patch with
    /// the apply content type is `APPLY`, streaming subresources are `CONNECT`.
    pub fn of(info: &RequestInfo) -> RequestLabels {
        let connect = info.resource_request
            && (matches!(
                info.subresource.as_str(),
                "exec" | "attach" | "portforward" | "proxy"
            ));
        let verb = if connect {
            "CONNECT".to_string()
        } else {
            match info.verb.as_str() {
                "create" => "POST".to_string(),
                "update" => "PUT".to_string(),
                "patch" if info.apply => "APPLY".to_string(),
                "watch" | "watchlist" => "WATCH".to_string(),
                other => other.to_ascii_uppercase(),
            }
        };
        let scope = if !info.namespace.is_empty() {
            "namespace"
        } else if !info.name.is_empty() {
            "resource"
        } else if info.resource_request {
            "cluster"
        } else {
            ""
        };
        let mut dry_run: Vec<&str> = info.dry_run.iter().map(String::as_str).collect();
        dry_run.sort_unstable();
        dry_run.dedup();
        let request_kind = match verb.as_str() {
            "GET" | "LIST" | "WATCH" | "HEAD" => "readOnly",
            _ => "mutating",
        };
        RequestLabels {
            long_running: verb == "WATCH" || verb == "CONNECT",
            verb,
            dry_run: dry_run.join(","),
            group: info.group.clone(),
            version: info.version.clone(),
            resource: if info.resource_request {
                info.resource.clone()
            } else {
                String::new()
            },
            subresource: if info.resource_request {
                info.subresource.clone()
            } else {
                info.path.clone()
            },
            scope: scope.to_string(),
            request_kind,
        }
    }
}

/// The component label of every request the API server records.
pub const APISERVER_COMPONENT: &str = "apiserver";

/// kube-apiserver's metrics.
pub struct ApiserverMetrics {
    /// The registry `/metrics` renders.
    pub registry: Registry,
    /// `apiserver_request_total`.
    pub request_total: IntCounterVec,
    /// `apiserver_request_duration_seconds`.
    pub request_duration: HistogramVec,
    /// `apiserver_current_inflight_requests`.
    pub inflight: IntGaugeVec,
    /// `apiserver_storage_objects`, set at scrape time.
    pub storage_objects: IntGaugeVec,
}

impl ApiserverMetrics {
    fn new() -> Result<ApiserverMetrics, Error> {
        let registry = Registry::new();
        let inflight = gauge_vec(
            &registry,
            "apiserver_current_inflight_requests",
            "[STABLE] Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
            &["request_kind"],
        )?;
        for kind in ["readOnly", "mutating"] {
            inflight.with_label_values(&[kind]).set(0);
        }
        Ok(ApiserverMetrics {
            request_total: counter_vec(
                &registry,
                "apiserver_request_total",
                "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
                &[
                    "verb",
                    "dry_run",
                    "group",
                    "version",
                    "resource",
                    "subresource",
                    "scope",
                    "component",
                    "code",
                ],
            )?,
            request_duration: histogram_vec(
                &registry,
                "apiserver_request_duration_seconds",
                "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
                &[
                    "verb",
                    "dry_run",
                    "group",
                    "version",
                    "resource",
                    "subresource",
                    "scope",
                    "component",
                ],
                APISERVER_DURATION_BUCKETS.to_vec(),
            )?,
            inflight,
            storage_objects: gauge_vec(
                &registry,
                "apiserver_storage_objects",
                "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                &["resource"],
            )?,
            registry,
        })
    }

    /// A request began: counts it in flight under its kind.
    pub fn started(&self, labels: &RequestLabels) {
        self.inflight
            .with_label_values(&[labels.request_kind])
            .inc();
    }

    /// A request was answered with `code` after `seconds`.
    pub fn finished(&self, labels: &RequestLabels, code: u16, seconds: f64) {
        self.inflight
            .with_label_values(&[labels.request_kind])
            .dec();
        let code = code.to_string();
        let base = [
            labels.verb.as_str(),
            labels.dry_run.as_str(),
            labels.group.as_str(),
            labels.version.as_str(),
            labels.resource.as_str(),
            labels.subresource.as_str(),
            labels.scope.as_str(),
            APISERVER_COMPONENT,
        ];
        let mut with_code = base.to_vec();
        with_code.push(&code);
        self.request_total.with_label_values(&with_code).inc();
        if !labels.long_running {
            self.request_duration
                .with_label_values(&base)
                .observe(seconds);
        }
    }

    /// Replaces the stored-object counts (`resource` is `plural` or `plural.group`).
    pub fn set_storage_objects<'a>(&self, counts: impl IntoIterator<Item = (&'a str, i64)>) {
        self.storage_objects.reset();
        for (resource, count) in counts {
            self.storage_objects
                .with_label_values(&[resource])
                .set(count);
        }
    }
}

/// kube-scheduler's scheduling result labels.
pub mod scheduling_result {
    /// The pod was placed.
    pub const SCHEDULED: &str = "scheduled";
    /// No node fits.
    pub const UNSCHEDULABLE: &str = "unschedulable";
    /// An internal error.
    pub const ERROR: &str = "error";
}

/// kube-scheduler's metrics.
pub struct SchedulerMetrics {
    /// The registry `/components/kube-scheduler/metrics` renders.
    pub registry: Registry,
    /// `scheduler_pending_pods{queue}`: `active`, `backoff`, `unschedulable`, `gated`.
    pub pending_pods: IntGaugeVec,
    /// `scheduler_schedule_attempts_total{result,profile}`.
    pub schedule_attempts: IntCounterVec,
    /// `scheduler_scheduling_attempt_duration_seconds{result,profile}`.
    pub attempt_duration: HistogramVec,
    /// `scheduler_preemption_attempts_total`.
    pub preemption_attempts: IntCounter,
    /// `scheduler_preemption_victims`.
    pub preemption_victims: Histogram,
}

impl SchedulerMetrics {
    fn new() -> Result<SchedulerMetrics, Error> {
        let registry = Registry::new();
        let pending_pods = gauge_vec(
            &registry,
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            &["queue"],
        )?;
        for queue in ["active", "backoff", "unschedulable", "gated"] {
            pending_pods.with_label_values(&[queue]).set(0);
        }
        let preemption_attempts = registered(
            &registry,
            "scheduler_preemption_attempts_total",
            IntCounter::new(
                "scheduler_preemption_attempts_total",
                "[STABLE] Total preemption attempts in the cluster till now",
            ),
        )?;
        let preemption_victims = registered(
            &registry,
            "scheduler_preemption_victims",
            Histogram::with_opts(
                HistogramOpts::new(
                    "scheduler_preemption_victims",
                    "[STABLE] Number of selected preemption victims",
                )
                .buckets(exponential_buckets(1.0, 2.0, 7)),
            ),
        )?;
        Ok(SchedulerMetrics {
            pending_pods,
            schedule_attempts: counter_vec(
                &registry,
                "scheduler_schedule_attempts_total",
                "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result", "profile"],
            )?,
            attempt_duration: histogram_vec(
                &registry,
                "scheduler_scheduling_attempt_duration_seconds",
                "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
                &["result", "profile"],
                exponential_buckets(0.001, 2.0, 15),
            )?,
            preemption_attempts,
            preemption_victims,
            registry,
        })
    }

    /// One scheduling attempt of one pod under `profile` ended with `result`.
    pub fn attempt(&self, result: &str, profile: &str, seconds: f64) {
        self.schedule_attempts
            .with_label_values(&[result, profile])
            .inc();
        self.attempt_duration
            .with_label_values(&[result, profile])
            .observe(seconds);
    }

    /// A preemption attempt chose `victims` pods.
    pub fn preemption(&self, victims: usize) {
        self.preemption_attempts.inc();
        #[allow(clippy::cast_precision_loss)]
        self.preemption_victims.observe(victims as f64);
    }

    /// The pods waiting per queue after a pass.
    pub fn set_pending(&self, active: usize, unschedulable: usize, gated: usize) {
        for (queue, count) in [
            ("active", active),
            ("unschedulable", unschedulable),
            ("gated", gated),
        ] {
            self.pending_pods
                .with_label_values(&[queue])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
    }
}

/// Kueue's `admission_attempts_total` results.
pub mod admission_result {
    /// At least one workload was admitted.
    pub const SUCCESS: &str = "success";
    /// No workload was admitted.
    pub const INADMISSIBLE: &str = "inadmissible";
}

/// Kueue's counters and histograms (its gauges are computed from objects by
/// [`crate::kueue`]).
pub struct KueueMetrics {
    /// The registry `/components/kueue/metrics` renders before the object gauges.
    pub registry: Registry,
    /// `kueue_admission_attempts_total{result}`.
    pub admission_attempts: IntCounterVec,
    /// `kueue_admission_attempt_duration_seconds{result}`.
    pub admission_attempt_duration: HistogramVec,
    /// `kueue_quota_reserved_workloads_total{cluster_queue}`.
    pub quota_reserved: IntCounterVec,
    /// `kueue_admitted_workloads_total{cluster_queue}`.
    pub admitted: IntCounterVec,
    /// `kueue_admission_wait_time_seconds{cluster_queue}`.
    pub admission_wait: HistogramVec,
    /// `kueue_evicted_workloads_total{cluster_queue,reason}`.
    pub evicted: IntCounterVec,
}

impl KueueMetrics {
    fn new() -> Result<KueueMetrics, Error> {
        let registry = Registry::new();
        let attempt_help = "The total number of attempts to admit workloads.\nEach admission attempt might try to admit more than one workload.\nThe label 'result' can have the following values:\n- 'success' means that at least one workload was admitted.,\n- 'inadmissible' means that no workload was admitted.";
        Ok(KueueMetrics {
            admission_attempts: counter_vec(
                &registry,
                "kueue_admission_attempts_total",
                attempt_help,
                &["result"],
            )?,
            admission_attempt_duration: histogram_vec(
                &registry,
                "kueue_admission_attempt_duration_seconds",
                "The latency of an admission attempt.\nThe label 'result' can have the following values:\n- 'success' means that at least one workload was admitted.,\n- 'inadmissible' means that no workload was admitted.",
                &["result"],
                prometheus::DEFAULT_BUCKETS.to_vec(),
            )?,
            quota_reserved: counter_vec(
                &registry,
                "kueue_quota_reserved_workloads_total",
                "The total number of quota reserved workloads per 'cluster_queue'",
                &["cluster_queue"],
            )?,
            admitted: counter_vec(
                &registry,
                "kueue_admitted_workloads_total",
                "The total number of admitted workloads per 'cluster_queue'",
                &["cluster_queue"],
            )?,
            admission_wait: histogram_vec(
                &registry,
                "kueue_admission_wait_time_seconds",
                "The time between a workload was created or requeued until admission, per 'cluster_queue'",
                &["cluster_queue"],
                kueue_buckets(14),
            )?,
            evicted: counter_vec(
                &registry,
                "kueue_evicted_workloads_total",
                "The number of evicted workloads per 'cluster_queue',\nThe label 'reason' can have the following values:\n- \"Preempted\" means that the workload was evicted in order to free resources for a workload with a higher priority or reclamation of nominal quota.\n- \"PodsReadyTimeout\" means that the eviction took place due to a PodsReady timeout.\n- \"AdmissionCheck\" means that the workload was evicted because at least one admission check transitioned to False.\n- \"ClusterQueueStopped\" means that the workload was evicted because the ClusterQueue is stopped.\n- \"Deactivated\" means that the workload was evicted because spec.active is set to false",
                &["cluster_queue", "reason"],
            )?,
            registry,
        })
    }

    /// One admission attempt (a scheduling cycle) ended; `admitted` workloads were admitted.
    pub fn attempt(&self, admitted: usize, seconds: f64) {
        let result = if admitted > 0 {
            admission_result::SUCCESS
        } else {
            admission_result::INADMISSIBLE
        };
        self.admission_attempts.with_label_values(&[result]).inc();
        self.admission_attempt_duration
            .with_label_values(&[result])
            .observe(seconds);
    }

    /// A workload reserved quota in `cluster_queue` and was admitted after waiting `wait`
    /// seconds since creation or requeueing.
    pub fn admitted(&self, cluster_queue: &str, wait: f64) {
        self.quota_reserved
            .with_label_values(&[cluster_queue])
            .inc();
        self.admitted.with_label_values(&[cluster_queue]).inc();
        self.admission_wait
            .with_label_values(&[cluster_queue])
            .observe(wait.max(0.0));
    }

    /// Counts what a Workload status write meant.
    pub fn record(&self, transition: &crate::kueue::Transition) {
        match transition {
            crate::kueue::Transition::Admitted {
                cluster_queue,
                wait,
            } => self.admitted(cluster_queue, *wait),
            crate::kueue::Transition::Evicted {
                cluster_queue,
                reason,
            } => self.evicted(cluster_queue, reason),
        }
    }

    /// A workload of `cluster_queue` was evicted for `reason` (Kueue's Evicted reasons).
    pub fn evicted(&self, cluster_queue: &str, reason: &str) {
        self.evicted
            .with_label_values(&[cluster_queue, reason])
            .inc();
    }
}

/// The registries of every in-process component, made once and shared.
pub struct Registries {
    /// kube-apiserver's.
    pub apiserver: ApiserverMetrics,
    /// kube-scheduler's.
    pub scheduler: SchedulerMetrics,
    /// Kueue's counters.
    pub kueue: KueueMetrics,
    /// kube-controller-manager's.
    pub controller_manager: crate::controllers::ControllerManagerMetrics,
}

impl Registries {
    /// Every component's metrics, defined and registered.
    pub fn new() -> Result<Registries, Error> {
        Ok(Registries {
            apiserver: ApiserverMetrics::new()?,
            scheduler: SchedulerMetrics::new()?,
            kueue: KueueMetrics::new()?,
            controller_manager: crate::controllers::ControllerManagerMetrics::new()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::samples;

    fn info(verb: &str, resource: &str, namespace: &str, name: &str) -> RequestInfo {
        RequestInfo {
            resource_request: true,
            verb: verb.into(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..RequestInfo::default()
        }
    }

    /// Verbs and scopes as kube-apiserver reports them (`cleanVerb`, `CleanScope`).
    #[test]
    fn request_labels_follow_upstream() {
        let apply = RequestInfo {
            apply: true,
            ..info("patch", "pods", "default", "p")
        };
        let exec = RequestInfo {
            subresource: "exec".into(),
            ..info("create", "pods", "default", "p")
        };
        let dry = RequestInfo {
            dry_run: vec!["All".into(), "All".into()],
            ..info("create", "pods", "default", "")
        };
        let metrics = RequestInfo {
            verb: "get".into(),
            path: "/metrics".into(),
            ..RequestInfo::default()
        };
        let cases: Vec<(RequestInfo, &str, &str, &str, bool)> = vec![
            (
                info("get", "pods", "default", "p"),
                "GET",
                "namespace",
                "",
                false,
            ),
            (
                info("list", "pods", "default", ""),
                "LIST",
                "namespace",
                "",
                false,
            ),
            (info("list", "nodes", "", ""), "LIST", "cluster", "", false),
            (info("get", "nodes", "", "n1"), "GET", "resource", "", false),
            (info("watch", "pods", "", ""), "WATCH", "cluster", "", true),
            (
                info("create", "pods", "default", ""),
                "POST",
                "namespace",
                "",
                false,
            ),
            (
                info("update", "pods", "default", "p"),
                "PUT",
                "namespace",
                "",
                false,
            ),
            (
                info("patch", "pods", "default", "p"),
                "PATCH",
                "namespace",
                "",
                false,
            ),
            (apply, "APPLY", "namespace", "", false),
            (
                info("delete", "pods", "default", "p"),
                "DELETE",
                "namespace",
                "",
                false,
            ),
            (
                info("deletecollection", "pods", "default", ""),
                "DELETECOLLECTION",
                "namespace",
                "",
                false,
            ),
            (exec, "CONNECT", "namespace", "", true),
            (dry, "POST", "namespace", "All", false),
            (metrics, "GET", "", "", false),
        ];
        for (info, verb, scope, dry_run, long_running) in cases {
            let labels = RequestLabels::of(&info);
            assert_eq!(
                (
                    labels.verb.as_str(),
                    labels.scope.as_str(),
                    labels.dry_run.as_str(),
                    labels.long_running
                ),
                (verb, scope, dry_run, long_running),
                "{info:?}"
            );
        }
        let labels = RequestLabels::of(&RequestInfo {
            verb: "get".into(),
            path: "/metrics".into(),
            ..RequestInfo::default()
        });
        assert_eq!(
            (labels.resource.as_str(), labels.subresource.as_str()),
            ("", "/metrics")
        );
    }

    #[test]
    fn watch_is_counted_but_not_timed() {
        let registries = Registries::new().unwrap();
        let api = &registries.apiserver;
        let watch = RequestLabels::of(&info("watch", "pods", "", ""));
        let get = RequestLabels::of(&info("get", "pods", "default", "p"));
        for labels in [&watch, &get] {
            api.started(labels);
            api.finished(labels, 200, 0.01);
        }
        let text = crate::render(&[&api.registry]).unwrap();
        let got = samples(&text, &[]);
        let total = |verb: &str, scope: &str| {
            format!(
                "apiserver_request_total{{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"{scope}\",subresource=\"\",verb=\"{verb}\",version=\"v1\"}}"
            )
        };
        assert_eq!(got.get(&total("WATCH", "cluster")), Some(&1.0));
        assert_eq!(got.get(&total("GET", "namespace")), Some(&1.0));
        assert!(text.contains("apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"namespace\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1"));
        assert!(!text.contains("apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"cluster\""));
        assert_eq!(
            got.get("apiserver_current_inflight_requests{request_kind=\"readOnly\"}"),
            Some(&0.0)
        );
    }

    #[test]
    fn stable_metrics_say_so_in_their_help_as_component_base_serves_them() {
        let registries = Registries::new().unwrap();
        let get = RequestLabels::of(&info("get", "pods", "default", "p"));
        registries.apiserver.started(&get);
        registries.apiserver.finished(&get, 200, 0.01);
        registries.apiserver.set_storage_objects([("pods", 1)]);
        registries
            .scheduler
            .attempt(scheduling_result::SCHEDULED, "default-scheduler", 0.002);
        registries.scheduler.preemption(1);
        registries.scheduler.set_pending(1, 0, 0);
        registries.kueue.attempt(1, 0.01);
        let text = crate::render(&[
            &registries.apiserver.registry,
            &registries.scheduler.registry,
            &registries.kueue.registry,
        ])
        .unwrap();
        let help = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")))
                .unwrap_or_default()
                .to_string()
        };
        for stable in [
            "apiserver_current_inflight_requests",
            "apiserver_request_total",
            "apiserver_request_duration_seconds",
            "apiserver_storage_objects",
            "scheduler_pending_pods",
            "scheduler_preemption_attempts_total",
            "scheduler_preemption_victims",
            "scheduler_schedule_attempts_total",
            "scheduler_scheduling_attempt_duration_seconds",
        ] {
            assert!(
                help(stable).starts_with("[STABLE] "),
                "{stable}: {:?}",
                help(stable)
            );
        }
        // Kueue's metrics come from controller-runtime's registry: no stability prefix.
        assert!(
            !help("kueue_admission_attempts_total").starts_with('['),
            "{}",
            help("kueue_admission_attempts_total")
        );
    }

    #[test]
    fn buckets_match_upstream() {
        assert_eq!(
            kueue_buckets(14),
            vec![
                1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0, 5120.0,
                10240.0
            ]
        );
        let scheduler = exponential_buckets(0.001, 2.0, 15);
        assert_eq!(scheduler.len(), 15);
        assert!((scheduler[14] - 16.384).abs() < 1e-9);
    }

    #[test]
    fn scheduler_and_kueue_counters() {
        let registries = Registries::new().unwrap();
        registries
            .scheduler
            .attempt(scheduling_result::SCHEDULED, "default-scheduler", 0.002);
        registries.scheduler.set_pending(2, 1, 0);
        registries.kueue.attempt(1, 0.01);
        registries.kueue.admitted("cq", 3.0);
        registries.kueue.evicted("cq", "Preempted");
        let text =
            crate::render(&[&registries.scheduler.registry, &registries.kueue.registry]).unwrap();
        let got = samples(&text, &[]);
        assert_eq!(got.get("scheduler_schedule_attempts_total{profile=\"default-scheduler\",result=\"scheduled\"}"), Some(&1.0));
        assert_eq!(
            got.get("scheduler_pending_pods{queue=\"active\"}"),
            Some(&2.0)
        );
        assert_eq!(
            got.get("kueue_admission_attempts_total{result=\"success\"}"),
            Some(&1.0)
        );
        assert_eq!(
            got.get("kueue_admitted_workloads_total{cluster_queue=\"cq\"}"),
            Some(&1.0)
        );
        assert_eq!(
            got.get("kueue_evicted_workloads_total{cluster_queue=\"cq\",reason=\"Preempted\"}"),
            Some(&1.0)
        );
        assert_eq!(
            got.get("kueue_admission_wait_time_seconds_bucket{cluster_queue=\"cq\",le=\"5\"}"),
            Some(&1.0)
        );
    }
}
