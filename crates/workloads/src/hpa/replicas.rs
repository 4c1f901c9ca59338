//! The replica calculator for resource metrics, as kube-controller-manager's
//! `pkg/controller/podautoscaler/replica_calculator.go` and `metrics/utilization.go` compute
//! it: the pods' usage from `metrics.k8s.io` PodMetrics, grouped into ready, unready, missing
//! and ignored pods, against their requests (`Utilization` targets) or a per-pod value
//! (`AverageValue` targets), within a tolerance.
//!
//! Works on already-read pods and PodMetrics; knows nothing about how they were listed, nor
//! about stabilization or policies (`super::normalize`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tessera_model::quantity::Quantity;
use tessera_model::time::{parse_duration, parse_timestamp};

/// One pod's usage of a resource, in thousandths (upstream's `metricsclient.PodMetric`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodMetric {
    /// The usage in milli-units.
    pub value: i64,
    /// When the sample was taken.
    pub timestamp: SystemTime,
    /// The window it was averaged over.
    pub window: Duration,
}

/// Usage per pod name (upstream's `PodMetricsInfo`).
pub type PodMetrics = BTreeMap<String, PodMetric>;

/// What the calculator reads of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodInfo {
    /// `metadata.name`.
    pub name: String,
    /// `status.phase` (`Pending`, `Running`, `Failed` …).
    pub phase: String,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `status.startTime`.
    pub start_time: Option<SystemTime>,
    /// The `Ready` condition: whether it is `False`, and its `lastTransitionTime`.
    pub ready: Option<Readiness>,
    /// The containers whose requests count: regular containers and restartable (sidecar)
    /// init containers, each with its requests in milli-units.
    pub containers: Vec<(String, BTreeMap<String, i64>)>,
}

/// A pod's `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Readiness {
    /// `status == "False"`.
    pub is_false: bool,
    /// `lastTransitionTime` (the epoch when absent, as Go's zero time reads before everything).
    pub last_transition: SystemTime,
}

/// The calculator's settings (kube-controller-manager's flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// `--horizontal-pod-autoscaler-tolerance` (0.1).
    pub tolerance: f64,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period` (5 m).
    pub cpu_initialization_period: Duration,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay` (30 s).
    pub initial_readiness_delay: Duration,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            tolerance: 0.1,
            cpu_initialization_period: Duration::from_secs(300),
            initial_readiness_delay: Duration::from_secs(30),
        }
    }
}

/// A proposal for one resource metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proposal {
    /// The replica count the metric asks for.
    pub replicas: i32,
    /// The average utilization in percent of requests (`Utilization` targets only).
    pub utilization: Option<i32>,
    /// The average usage per pod in milli-units.
    pub raw_average: i64,
    /// The time of the metrics (the first PodMetrics' timestamp).
    pub timestamp: SystemTime,
}

/// Reads a pod as the calculator sees it.
pub fn pod_info(pod: &Value) -> PodInfo {
    let text = |pointer: &str| pod.pointer(pointer).and_then(Value::as_str);
    let time = |value: Option<&Value>| value.and_then(Value::as_str).and_then(parse_timestamp);
    let ready = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        })
        .map(|condition| Readiness {
            is_false: condition.get("status").and_then(Value::as_str) == Some("False"),
            last_transition: time(condition.get("lastTransitionTime"))
                .unwrap_or(SystemTime::UNIX_EPOCH),
        });
    let mut containers = Vec::new();
    let spec_list = |key: &str| {
        pod.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let sidecars = spec_list("initContainers")
        .into_iter()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"));
    for container in spec_list("containers").into_iter().chain(sidecars) {
        let name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let requests = container
            .pointer("/resources/requests")
            .and_then(Value::as_object)
            .map(|requests| {
                requests
                    .iter()
                    .filter_map(|(resource, quantity)| Some((resource.clone(), milli(quantity)?)))
                    .collect()
            })
            .unwrap_or_default();
        containers.push((name, requests));
    }
    PodInfo {
        name: text("/metadata/name").unwrap_or_default().to_string(),
        phase: text("/status/phase").unwrap_or_default().to_string(),
        deleting: pod
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|v| !v.is_null()),
        start_time: time(pod.pointer("/status/startTime")),
        ready,
        containers,
    }
}

/// A quantity's milli-value, as upstream's `MilliValue()`; `None` when it does not parse.
fn milli(quantity: &Value) -> Option<i64> {
    let text = match quantity {
        Value::String(text) => text.clone(),
        Value::Number(number) => number.to_string(),
        _ => return None,
    };
    let quantity: Quantity = text.parse().ok()?;
    i64::try_from(quantity.milli_value()).ok()
}

/// The usage of `resource` per pod from a PodMetrics list, with the first item's timestamp,
/// as upstream's `GetResourceMetric`: a pod's value is the sum over its containers (a pod
/// with a container lacking the resource has none), or the named container's alone.
pub fn resource_metrics(
    items: &[Value],
    resource: &str,
    container: Option<&str>,
) -> Result<(PodMetrics, SystemTime), String> {
    let Some(first) = items.first() else {
        return Err("no metrics returned from resource metrics API".into());
    };
    let mut metrics = PodMetrics::new();
    for item in items {
        let name = item
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let timestamp = sample_time(item);
        let window = item
            .get("window")
            .and_then(Value::as_str)
            .and_then(|w| parse_duration(w).ok())
            .unwrap_or_default();
        let containers = item
            .get("containers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let usage = |c: &Value| c.pointer(&format!("/usage/{resource}")).and_then(milli);
        let value = match container {
            Some(wanted) => {
                let Some(found) = containers
                    .iter()
                    .find(|c| c.get("name").and_then(Value::as_str) == Some(wanted))
                else {
                    let namespace = item
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    return Err(format!(
                        "failed to get container metrics: container {wanted} not present in metrics for pod {namespace}/{name}"
                    ));
                };
                usage(found)
            }
            None if containers.is_empty() => None,
            None => containers.iter().map(usage).sum::<Option<i64>>(),
        };
        if let Some(value) = value {
            metrics.insert(
                name.to_string(),
                PodMetric {
                    value,
                    timestamp,
                    window,
                },
            );
        }
    }
    Ok((metrics, sample_time(first)))
}

/// A PodMetrics' `timestamp` (the epoch when absent, as Go's zero time).
fn sample_time(item: &Value) -> SystemTime {
    item.get("timestamp")
        .and_then(Value::as_str)
        .and_then(parse_timestamp)
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The pods sorted as upstream's `groupPods` sorts them.
struct Groups {
    ready: usize,
    unready: BTreeSet<String>,
    missing: BTreeSet<String>,
    ignored: BTreeSet<String>,
}

fn group_pods(
    pods: &[PodInfo],
    metrics: &PodMetrics,
    resource: &str,
    tuning: &Tuning,
    now: SystemTime,
) -> Groups {
    let mut groups = Groups {
        ready: 0,
        unready: BTreeSet::new(),
        missing: BTreeSet::new(),
        ignored: BTreeSet::new(),
    };
    for pod in pods {
        if pod.deleting || pod.phase == "Failed" {
            groups.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == "Pending" {
            groups.unready.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            groups.missing.insert(pod.name.clone());
            continue;
        };
        if resource == "cpu" {
            let unready = match (pod.ready, pod.start_time) {
                (Some(ready), Some(start)) => {
                    if start + tuning.cpu_initialization_period > now {
                        // Within the initialisation period: unready, or no full window of
                        // metrics since the last transition.
                        ready.is_false || metric.timestamp < ready.last_transition + metric.window
                    } else {
                        // Unready and never ready since the start.
                        ready.is_false
                            && start + tuning.initial_readiness_delay > ready.last_transition
                    }
                }
                _ => true,
            };
            if unready {
                groups.unready.insert(pod.name.clone());
                continue;
            }
        }
        groups.ready += 1;
    }
    groups
}

/// Each pod's request of `resource` (of `container` alone when named), as upstream's
/// `calculatePodRequests`; a counted container without that request is an error.
fn pod_requests(
    pods: &[PodInfo],
    container: Option<&str>,
    resource: &str,
) -> Result<BTreeMap<String, i64>, String> {
    let mut requests = BTreeMap::new();
    for pod in pods {
        let mut sum = 0i64;
        for (name, container_requests) in &pod.containers {
            if container.is_some_and(|wanted| wanted != name) {
                continue;
            }
            let Some(request) = container_requests.get(resource) else {
                return Err(format!(
                    "missing request for {resource} in container {name} of Pod {}",
                    pod.name
                ));
            };
            sum = sum.saturating_add(*request);
        }
        requests.insert(pod.name.clone(), sum);
    }
    Ok(requests)
}

/// Upstream's `GetResourceUtilizationRatio`: (ratio to the target, utilization in percent,
/// average raw value).
fn utilization_ratio(
    metrics: &PodMetrics,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut total, mut requested, mut entries) = (0i64, 0i64, 0i64);
    for (name, metric) in metrics {
        let Some(request) = requests.get(name) else {
            continue;
        };
        total = total.saturating_add(metric.value);
        requested = requested.saturating_add(*request);
        entries += 1;
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = i32::try_from(total.saturating_mul(100) / requested).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        total / entries,
    ))
}

/// Upstream's `GetMetricUsageRatio`: (ratio to the target, average value).
fn usage_ratio(metrics: &PodMetrics, target: i64) -> (f64, i64) {
    let total: i64 = metrics.values().map(|m| m.value).sum();
    let count = i64::try_from(metrics.len()).unwrap_or(i64::MAX).max(1);
    let average = total / count;
    (average as f64 / target as f64, average)
}

/// How a target turns metrics into a ratio.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// `Utilization`: percent of the pods' requests.
    Utilization(i32),
    /// `AverageValue`: milli-units per pod.
    AverageValue(i64),
}

/// The replicas one resource metric proposes (upstream's `GetResourceReplicas` for
/// `Utilization` targets, `GetRawResourceReplicas` for `AverageValue`).
#[allow(clippy::too_many_arguments)]
pub fn resource_replicas(
    current_replicas: i32,
    goal: Goal,
    resource: &str,
    container: Option<&str>,
    pods: &[PodInfo],
    metrics: Result<(PodMetrics, SystemTime), String>,
    tuning: &Tuning,
    now: SystemTime,
) -> Result<Proposal, String> {
    let (mut metrics, timestamp) =
        metrics.map_err(|e| format!("unable to get metrics for resource {resource}: {e}"))?;
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let groups = group_pods(pods, &metrics, resource, tuning, now);
    for name in groups.ignored.iter().chain(&groups.unready) {
        metrics.remove(name);
    }
    if metrics.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let requests = match goal {
        Goal::Utilization(_) => pod_requests(pods, container, resource)?,
        Goal::AverageValue(_) => BTreeMap::new(),
    };
    let ratio = |metrics: &PodMetrics| -> Result<(f64, Option<i32>, i64), String> {
        match goal {
            Goal::Utilization(target) => utilization_ratio(metrics, &requests, target)
                .map(|(ratio, percent, raw)| (ratio, Some(percent), raw)),
            Goal::AverageValue(target) => {
                let (ratio, average) = usage_ratio(metrics, target);
                Ok((ratio, None, average))
            }
        }
    };
    let (usage_ratio, utilization, raw_average) = ratio(&metrics)?;
    let proposal = |replicas| Proposal {
        replicas,
        utilization,
        raw_average,
        timestamp,
    };
    let within =
        |ratio: f64| (1.0 - tuning.tolerance) <= ratio && ratio <= (1.0 + tuning.tolerance);
    let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
    if !scale_up_with_unready && groups.missing.is_empty() {
        if within(usage_ratio) {
            return Ok(proposal(current_replicas));
        }
        return Ok(proposal(ceil_replicas(usage_ratio, groups.ready)));
    }
    if !groups.missing.is_empty() {
        for name in &groups.missing {
            let value = if usage_ratio < 1.0 {
                // On a scale-down, a missing pod uses its request (or the target if above
                // 100%); for a value target, exactly the target.
                match goal {
                    Goal::Utilization(target) => {
                        requests.get(name).copied().unwrap_or(0) * i64::from(target.max(100)) / 100
                    }
                    Goal::AverageValue(target) => target,
                }
            } else {
                0
            };
            if usage_ratio != 1.0 || matches!(goal, Goal::AverageValue(_)) {
                metrics.insert(name.clone(), placeholder(value));
            }
        }
    }
    if scale_up_with_unready {
        for name in &groups.unready {
            metrics.insert(name.clone(), placeholder(0));
        }
    }
    let (new_ratio, _, _) = ratio(&metrics)?;
    if within(new_ratio)
        || (usage_ratio < 1.0 && new_ratio > 1.0)
        || (usage_ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(proposal(current_replicas));
    }
    let replicas = ceil_replicas(new_ratio, metrics.len());
    if (new_ratio < 1.0 && replicas > current_replicas)
        || (new_ratio > 1.0 && replicas < current_replicas)
    {
        return Ok(proposal(current_replicas));
    }
    Ok(proposal(replicas))
}

fn placeholder(value: i64) -> PodMetric {
    PodMetric {
        value,
        timestamp: SystemTime::UNIX_EPOCH,
        window: Duration::ZERO,
    }
}

/// `int32(math.Ceil(ratio * count))`.
fn ceil_replicas(ratio: f64, count: usize) -> i32 {
    let replicas = (ratio * count as f64).ceil();
    if replicas >= f64::from(i32::MAX) {
        i32::MAX
    } else {
        replicas as i32
    }
}
