//! The HorizontalPodAutoscaler controller's core (`autoscaling/v2`, resource metrics), as
//! kube-controller-manager's `pkg/controller/podautoscaler/horizontal.go` reconciles one
//! autoscaler: from its spec, the target's scale, the pods its selector picks and their
//! `metrics.k8s.io` PodMetrics, the replicas to set, the status to write (`currentReplicas`,
//! `desiredReplicas`, `currentMetrics`, `lastScaleTime`, the `AbleToScale`, `ScalingActive`
//! and `ScalingLimited` conditions) and the events to record, with upstream's reasons and
//! messages.
//!
//! `Resource` and `ContainerResource` metrics with `Utilization` and `AverageValue` targets are
//! computed ([`replicas`]); `Pods`, `Object` and `External` metrics need the custom and external
//! metrics APIs, which Tessera does not serve, and count as invalid metrics. Scale to zero
//! (`minReplicas: 0`) is off, as upstream's `HPAScaleToZero` gate is by default.
//!
//! Pure: time is an input, the history between passes ([`History`]) a value the shell holds.
//! Knows nothing about how the scale, pods or metrics were read, nor how writes are made.

pub mod normalize;
pub mod replicas;

#[cfg(test)]
mod normalize_tests;
#[cfg(test)]
mod reconcile_tests;
#[cfg(test)]
mod replicas_tests;

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::quantity::Quantity;
use tessera_model::time::timestamp;

pub use normalize::{Behavior, History};
pub use replicas::{Goal, PodInfo, Tuning};

/// The controller's settings (kube-controller-manager's `--horizontal-pod-autoscaler-*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// The replica calculator's tolerance and readiness periods.
    pub tuning: Tuning,
    /// `--horizontal-pod-autoscaler-downscale-stabilization` (5 m).
    pub downscale_stabilization: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tuning: Tuning::default(),
            downscale_stabilization: Duration::from_secs(300),
        }
    }
}

/// The target's `/scale` subresource as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// `spec.replicas`.
    pub spec_replicas: i32,
    /// `status.selector` (a label selector string).
    pub selector: String,
}

impl Scale {
    /// Reads an `autoscaling/v1` Scale.
    pub fn from_json(scale: &Value) -> Scale {
        Scale {
            spec_replicas: scale
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(0),
            selector: scale
                .pointer("/status/selector")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        }
    }
}

/// What the shell read for one pass. Errors are the reads' messages.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The target's scale.
    pub scale: Result<&'a Scale, &'a str>,
    /// The pods the scale's selector picks, in the autoscaler's namespace.
    pub pods: &'a [Value],
    /// The PodMetrics the same selector picks (`metrics.k8s.io/v1beta1`).
    pub pod_metrics: Result<&'a [Value], &'a str>,
}

/// An event to record about the autoscaler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// A rescale the shell is to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescale {
    /// The replicas before.
    pub from: i32,
    /// The replicas to set on the scale.
    pub to: i32,
    /// Why (upstream's `rescaleReason`).
    pub reason: String,
}

/// One pass's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The scale to write, if any.
    pub rescale: Option<Rescale>,
    /// The events to record.
    pub events: Vec<Event>,
    conditions: Vec<Value>,
    current_replicas: i32,
    desired_replicas: i32,
    metrics: Option<Vec<Value>>,
    last_scale_time: Option<Value>,
    original: Value,
    behavior: Option<Behavior>,
    now: SystemTime,
}

impl Decision {
    /// The status to write.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "currentReplicas": self.current_replicas,
            "desiredReplicas": self.desired_replicas,
        });
        if let Some(metrics) = &self.metrics {
            status["currentMetrics"] = json!(metrics);
        }
        if let Some(time) = &self.last_scale_time {
            status["lastScaleTime"] = time.clone();
        }
        if !self.conditions.is_empty() {
            status["conditions"] = json!(self.conditions);
        }
        status
    }

    /// Whether the status differs from the one read (upstream's `updateStatusIfNeeded`).
    pub fn status_changed(&self) -> bool {
        self.status() != self.original
    }

    /// The rescale was written: remembers it for the behavior's policies.
    pub fn rescaled(&self, history: &mut History) {
        if let Some(rescale) = &self.rescale {
            history.store_scale_event(self.behavior.as_ref(), rescale.from, rescale.to, self.now);
        }
    }

    /// The rescale was refused: the status and events say so, as upstream's
    /// `FailedRescale` path does.
    pub fn rescale_failed(&mut self, error: &str) {
        let Some(rescale) = self.rescale.take() else {
            return;
        };
        self.events.retain(|e| e.reason != "SuccessfulRescale");
        self.events.push(warning(
            "FailedRescale",
            format!(
                "New size: {}; reason: {}; error: {error}",
                rescale.to, rescale.reason
            ),
        ));
        self.set_condition(
            "AbleToScale",
            false,
            "FailedUpdateScale",
            format!("the HPA controller was unable to update the target scale: {error}"),
        );
        // Upstream's `setCurrentReplicasAndMetricsInStatus`: the desired count and the last
        // scale time stay as they were.
        self.desired_replicas = status_int(&self.original, "desiredReplicas");
        self.last_scale_time = self.original.get("lastScaleTime").cloned();
    }

    fn set_condition(&mut self, kind: &str, status: bool, reason: &str, message: String) {
        let status = if status { "True" } else { "False" };
        let index = match self
            .conditions
            .iter()
            .position(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        {
            Some(index) => index,
            None => {
                self.conditions.push(json!({"type": kind}));
                self.conditions.len() - 1
            }
        };
        let Some(Value::Object(condition)) = self.conditions.get_mut(index) else {
            return;
        };
        if condition.get("status").and_then(Value::as_str) != Some(status) {
            condition.insert("lastTransitionTime".into(), json!(timestamp(self.now)));
        }
        condition.insert("status".into(), json!(status));
        condition.insert("reason".into(), json!(reason));
        condition.insert("message".into(), json!(message));
    }
}

fn warning(reason: &'static str, message: String) -> Event {
    Event {
        kind: "Warning",
        reason,
        message,
    }
}

fn status_int(status: &Value, field: &str) -> i32 {
    status
        .get(field)
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

/// A metric that could not be computed: the condition's reason, the error as the condition
/// and the event say it, and the prefix `computeReplicasForMetric` adds.
type MetricError = (&'static str, String, String);

/// One metric's answer: (replicas, metric name, timestamp) or what failed.
type MetricResult = Result<(i32, String, SystemTime), MetricError>;

/// Reconciles one autoscaler (upstream's `reconcileAutoscaler`): `hpa` as stored
/// (`autoscaling/v2`), what the shell read, the autoscaler's history (updated), at `now`.
pub fn reconcile(
    hpa: &Value,
    observed: Observed<'_>,
    history: &mut History,
    config: &Config,
    now: SystemTime,
) -> Decision {
    let spec = hpa.get("spec").cloned().unwrap_or(Value::Null);
    let original = hpa.get("status").cloned().unwrap_or_else(|| json!({}));
    let behavior = Behavior::from_spec(&spec);
    let mut decision = Decision {
        rescale: None,
        events: Vec::new(),
        conditions: original
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        current_replicas: status_int(&original, "currentReplicas"),
        desired_replicas: status_int(&original, "desiredReplicas"),
        metrics: original
            .get("currentMetrics")
            .and_then(Value::as_array)
            .cloned(),
        last_scale_time: original.get("lastScaleTime").cloned(),
        original,
        behavior,
        now,
    };
    let scale = match observed.scale {
        Ok(scale) => scale,
        Err(error) => {
            decision
                .events
                .push(warning("FailedGetScale", error.to_string()));
            decision.set_condition(
                "AbleToScale",
                false,
                "FailedGetScale",
                format!("the HPA controller was unable to get the target's current scale: {error}"),
            );
            return decision;
        }
    };
    decision.set_condition(
        "AbleToScale",
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale".into(),
    );
    let current = scale.spec_replicas;
    history.record_initial(current, now);
    let int = |field: &str| {
        spec.get(field)
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
    };
    let min_replicas = int("minReplicas").unwrap_or(1);
    let max_replicas = int("maxReplicas").unwrap_or(0);

    let mut metric_statuses = None;
    let mut rescale_reason = String::new();
    let desired;
    let mut rescale = true;
    if current == 0 && min_replicas != 0 {
        desired = 0;
        rescale = false;
        decision.set_condition(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
        );
    } else if current > max_replicas {
        rescale_reason = "Current number of replicas above Spec.MaxReplicas".into();
        desired = max_replicas;
    } else if current < min_replicas {
        rescale_reason = "Current number of replicas below Spec.MinReplicas".into();
        desired = min_replicas;
    } else {
        let metric_specs = spec
            .get("metrics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let computed = compute_replicas(&mut decision, &metric_specs, scale, observed, config, now);
        let (proposal, metric_name, statuses) = match computed {
            Ok(found) => found,
            Err((statuses, error)) => {
                decision.current_replicas = current;
                decision.metrics = (!statuses.is_empty()).then_some(statuses);
                decision
                    .events
                    .push(warning("FailedComputeMetricsReplicas", error));
                return decision;
            }
        };
        metric_statuses = Some(statuses);
        let proposal = proposal.max(0);
        if proposal > current {
            rescale_reason = format!("{metric_name} above target");
        }
        if proposal < current {
            rescale_reason = "All metrics below target".into();
        }
        let normalized = history.normalize(
            normalize::Arguments {
                behavior: decision.behavior.as_ref(),
                min_replicas,
                max_replicas,
                current,
                desired: proposal,
                downscale_stabilization: config.downscale_stabilization,
            },
            now,
        );
        let (reason, message) = normalized.able_to_scale;
        decision.set_condition("AbleToScale", true, reason, message.into());
        let (limited, reason, message) = normalized.limited;
        decision.set_condition("ScalingLimited", limited, reason, message.into());
        desired = normalized.replicas;
        rescale = desired != current;
    }

    decision.current_replicas = current;
    decision.metrics = metric_statuses;
    if rescale {
        decision.set_condition(
            "AbleToScale",
            true,
            "SucceededRescale",
            format!("the HPA controller was able to update the target scale to {desired}"),
        );
        decision.events.push(Event {
            kind: "Normal",
            reason: "SuccessfulRescale",
            message: format!("New size: {desired}; reason: {rescale_reason}"),
        });
        decision.rescale = Some(Rescale {
            from: current,
            to: desired,
            reason: rescale_reason,
        });
        decision.desired_replicas = desired;
        decision.last_scale_time = Some(json!(timestamp(now)));
    } else {
        decision.desired_replicas = current;
    }
    decision
}

/// Upstream's `computeReplicasForMetrics`: the largest proposal of the valid metrics, the
/// metric that made it, and every metric's status; or the statuses and the error when every
/// metric is invalid, or some are and the rest would scale down.
#[allow(clippy::type_complexity)]
fn compute_replicas(
    decision: &mut Decision,
    metric_specs: &[Value],
    scale: &Scale,
    observed: Observed<'_>,
    config: &Config,
    now: SystemTime,
) -> Result<(i32, String, Vec<Value>), (Vec<Value>, String)> {
    if scale.selector.is_empty() {
        let error = "selector is required".to_string();
        decision
            .events
            .push(warning("SelectorRequired", error.clone()));
        decision.set_condition(
            "ScalingActive",
            false,
            "InvalidSelector",
            "the HPA target's scale is missing a selector".into(),
        );
        return Err((Vec::new(), error));
    }
    let pods: Vec<PodInfo> = observed.pods.iter().map(replicas::pod_info).collect();
    let mut statuses = Vec::with_capacity(metric_specs.len());
    let (mut replicas, mut metric, mut invalid) = (0i32, String::new(), 0usize);
    let mut first_error: Option<MetricError> = None;
    for spec in metric_specs {
        let (status, result) = compute_metric(spec, scale, &pods, observed, config, now);
        statuses.push(status);
        match result {
            Ok((proposal, name, _)) => {
                if replicas == 0 || proposal > replicas {
                    replicas = proposal;
                    metric = name;
                }
            }
            Err((reason, inner, prefix)) => {
                // Upstream's `getUnableComputeReplicaCountCondition` records each failure.
                decision.events.push(warning(reason, inner.clone()));
                if first_error.is_none() {
                    first_error = Some((reason, inner, prefix));
                }
                invalid += 1;
            }
        }
    }
    if let Some((reason, inner, prefix)) = &first_error {
        let error = format!(
            "invalid metrics ({invalid} invalid out of {}), first error is: {prefix}{inner}",
            metric_specs.len()
        );
        if invalid >= metric_specs.len() || replicas < scale.spec_replicas {
            decision.set_condition(
                "ScalingActive",
                false,
                reason,
                format!("the HPA was unable to compute the replica count: {inner}"),
            );
            return Err((statuses, error));
        }
    }
    decision.set_condition(
        "ScalingActive",
        true,
        "ValidMetricFound",
        format!("the HPA was able to successfully calculate a replica count from {metric}"),
    );
    Ok((replicas, metric, statuses))
}

/// One metric's status and proposal (upstream's `computeReplicasForMetric`).
fn compute_metric(
    spec: &Value,
    scale: &Scale,
    pods: &[PodInfo],
    observed: Observed<'_>,
    config: &Config,
    now: SystemTime,
) -> (Value, MetricResult) {
    let empty = json!({"type": ""});
    let kind = spec.get("type").and_then(Value::as_str).unwrap_or_default();
    let (source, container) = match kind {
        "Resource" => (spec.get("resource"), None),
        "ContainerResource" => {
            let source = spec.get("containerResource");
            let container = source
                .and_then(|s| s.get("container"))
                .and_then(Value::as_str);
            (source, container)
        }
        "Pods" | "Object" | "External" => {
            let (reason, api) = match kind {
                "Pods" => ("FailedGetPodsMetric", "custom.metrics.k8s.io"),
                "Object" => ("FailedGetObjectMetric", "custom.metrics.k8s.io"),
                _ => ("FailedGetExternalMetric", "external.metrics.k8s.io"),
            };
            let prefix = format!("failed to get {} metric value: ", kind.to_lowercase());
            let error = format!("unable to get metric: no {api} API is served");
            return (empty, Err((reason, error, prefix)));
        }
        other => {
            let error = format!("unknown metric source type {other:?}");
            return (
                empty,
                Err(("InvalidMetricSourceType", error, String::new())),
            );
        }
    };
    let (failed_reason, wrap) = match container {
        None => ("FailedGetResourceMetric", "resource"),
        Some(_) => ("FailedGetContainerResourceMetric", "container"),
    };
    let resource = source
        .and_then(|s| s.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let prefix = match container {
        None => format!("failed to get {resource} {wrap} metric value: "),
        Some(container) => format!("failed to get {container} {wrap} metric value: "),
    };
    let target = source.and_then(|s| s.get("target"));
    let average_value = target
        .and_then(|t| t.get("averageValue"))
        .filter(|v| !v.is_null())
        .and_then(|v| {
            v.as_str()
                .map(str::to_string)
                .or_else(|| Some(v.to_string()))
        })
        .and_then(|text| text.parse::<Quantity>().ok())
        .and_then(|q| i64::try_from(q.milli_value()).ok());
    let utilization = target
        .and_then(|t| t.get("averageUtilization"))
        .and_then(Value::as_i64)
        .and_then(|n| i32::try_from(n).ok());
    let (goal, what) = match (average_value, utilization) {
        (Some(value), _) => (Goal::AverageValue(value), "usage"),
        (None, Some(percent)) => (Goal::Utilization(percent), "utilization"),
        (None, None) => {
            let error = "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_string();
            return (empty, Err((failed_reason, error, prefix)));
        }
    };
    let metrics = observed
        .pod_metrics
        .map_err(|e| format!("unable to fetch metrics from resource metrics API: {e}"))
        .and_then(|items| replicas::resource_metrics(items, resource, container));
    let proposal = match replicas::resource_replicas(
        scale.spec_replicas,
        goal,
        resource,
        container,
        pods,
        metrics,
        &config.tuning,
        now,
    ) {
        Ok(proposal) => proposal,
        Err(error) => {
            let error = format!("failed to get {resource} {what}: {error}");
            return (empty, Err((failed_reason, error, prefix)));
        }
    };
    let mut current = json!({
        "averageValue": Quantity::from_milli(proposal.raw_average).to_canonical(),
    });
    let name = match proposal.utilization {
        Some(percent) => {
            current["averageUtilization"] = json!(percent);
            match container {
                None => format!("{resource} resource utilization (percentage of request)"),
                Some(_) => {
                    format!("{resource} container resource utilization (percentage of request)")
                }
            }
        }
        None => format!("{resource} resource"),
    };
    let status = match container {
        None => json!({"type": "Resource",
            "resource": {"name": resource, "current": current}}),
        Some(container) => json!({"type": "ContainerResource",
            "containerResource": {"name": resource, "container": container, "current": current}}),
    };
    (status, Ok((proposal.replicas, name, proposal.timestamp)))
}
