//! Whole passes of the core: upstream's `horizontal_test.go` cases that check the status
//! conditions, events and desired replicas of one reconciliation.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::time::timestamp;

use super::{Config, History, Observed, Scale, reconcile};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn hpa(min: i32, max: i32, metrics: Value, behavior: Option<Value>) -> Value {
    let mut hpa = json!({
        "metadata": {"name": "test-hpa", "namespace": "test-namespace"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": min, "maxReplicas": max, "metrics": metrics},
    });
    if let Some(behavior) = behavior {
        hpa["spec"]["behavior"] = behavior;
    }
    hpa
}

fn cpu(target: i32) -> Value {
    json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": target}}}])
}

fn pods(levels: &[i64]) -> (Vec<Value>, Vec<Value>) {
    let pods = (0..levels.len())
        .map(|i| {
            json!({"metadata": {"name": format!("test-pod-{i}")},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running", "startTime": timestamp(SystemTime::UNIX_EPOCH),
                    "conditions": [{"type": "Ready", "status": "True"}]}})
        })
        .collect();
    let metrics = levels
        .iter()
        .enumerate()
        .map(|(i, level)| {
            json!({"metadata": {"name": format!("test-pod-{i}")},
                "timestamp": timestamp(now()), "window": "30s",
                "containers": [{"name": "c", "usage": {"cpu": format!("{level}m")}}]})
        })
        .collect();
    (pods, metrics)
}

/// A condition's (type, status, reason).
type Condition = (&'static str, &'static str, &'static str);

fn reasons(status: &Value) -> Vec<(String, String, String)> {
    status["conditions"]
        .as_array()
        .map(|conditions| {
            conditions
                .iter()
                .map(|c| {
                    let field = |name: &str| c[name].as_str().unwrap_or_default().to_string();
                    (field("type"), field("status"), field("reason"))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn owned(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

const OK: [(&str, &str, &str); 3] = [
    ("AbleToScale", "True", "SucceededRescale"),
    ("ScalingActive", "True", "ValidMetricFound"),
    ("ScalingLimited", "False", "DesiredWithinRange"),
];

fn pass(hpa: &Value, replicas: i32, levels: &[i64], history: &mut History) -> super::Decision {
    pass_at(hpa, replicas, levels, history, now())
}

fn pass_at(
    hpa: &Value,
    replicas: i32,
    levels: &[i64],
    history: &mut History,
    at: SystemTime,
) -> super::Decision {
    let scale = Scale {
        spec_replicas: replicas,
        selector: "name=test-pod".into(),
    };
    let (pods, metrics) = pods(levels);
    reconcile(
        hpa,
        Observed {
            scale: Ok(&scale),
            pods: &pods,
            pod_metrics: Ok(&metrics),
        },
        history,
        &Config::default(),
        at,
    )
}

#[test]
fn scale_up_sets_status_conditions_and_event() {
    // Upstream's TestScaleUp: 3 pods at 30% target using 300, 500, 700 → 5.
    let hpa = hpa(2, 6, cpu(30), None);
    let decision = pass(&hpa, 3, &[300, 500, 700], &mut History::default());
    let rescale = decision.rescale.clone().expect("a rescale");
    assert_eq!((rescale.from, rescale.to), (3, 5));
    let status = decision.status();
    assert_eq!(reasons(&status), owned(&OK));
    assert_eq!(status["desiredReplicas"], 5);
    assert_eq!(status["currentReplicas"], 3);
    assert_eq!(status["lastScaleTime"], timestamp(now()));
    assert_eq!(
        status["currentMetrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "current": {"averageUtilization": 50, "averageValue": "500m"}}}])
    );
    assert_eq!(decision.events.len(), 1);
    assert_eq!(decision.events[0].reason, "SuccessfulRescale");
    assert_eq!(
        decision.events[0].message,
        "New size: 5; reason: cpu resource utilization (percentage of request) above target"
    );
    assert_eq!(
        status["conditions"][1]["message"],
        "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)"
    );
    assert!(decision.status_changed());
}

#[test]
fn within_tolerance_keeps_replicas_and_is_ready_for_new_scale() {
    let hpa = hpa(1, 10, cpu(50), None);
    let decision = pass(&hpa, 3, &[520, 500, 480], &mut History::default());
    assert_eq!(decision.rescale, None);
    assert!(decision.events.is_empty());
    let status = decision.status();
    assert_eq!(
        reasons(&status),
        owned(&[
            ("AbleToScale", "True", "ReadyForNewScale"),
            ("ScalingActive", "True", "ValidMetricFound"),
            ("ScalingLimited", "False", "DesiredWithinRange"),
        ])
    );
    assert_eq!(status["desiredReplicas"], 3);
    assert!(status.get("lastScaleTime").is_none());
}

#[test]
fn limits_and_disabled_scaling() {
    // (min, max, replicas, levels) → (rescale to, conditions)
    type Case = ((i32, i32, i32, &'static [i64]), Option<i32>, Vec<Condition>);
    let cases: Vec<Case> = vec![
        // TestScaleUpCapMax-like: desired 5 limited to 4.
        (
            (1, 4, 3, &[300, 500, 700]),
            Some(4),
            vec![
                ("AbleToScale", "True", "SucceededRescale"),
                ("ScalingActive", "True", "ValidMetricFound"),
                ("ScalingLimited", "True", "TooManyReplicas"),
            ],
        ),
        // TestScaleDownCapMin-like: usage far below target, held at min.
        (
            (3, 6, 5, &[10, 10, 10, 10, 10]),
            Some(3),
            vec![
                ("AbleToScale", "True", "SucceededRescale"),
                ("ScalingActive", "True", "ValidMetricFound"),
                ("ScalingLimited", "True", "TooFewReplicas"),
            ],
        ),
        // Above maxReplicas: set to the maximum without reading metrics.
        (
            (1, 2, 3, &[]),
            Some(2),
            vec![("AbleToScale", "True", "SucceededRescale")],
        ),
        // Below minReplicas.
        (
            (4, 6, 3, &[]),
            Some(4),
            vec![("AbleToScale", "True", "SucceededRescale")],
        ),
        // TestZeroReplicas: scaling disabled.
        (
            (3, 5, 0, &[]),
            None,
            vec![
                ("AbleToScale", "True", "SucceededGetScale"),
                ("ScalingActive", "False", "ScalingDisabled"),
            ],
        ),
    ];
    for ((min, max, replicas, levels), to, conditions) in cases {
        let hpa = hpa(min, max, cpu(30), None);
        // An old recommendation: no initial one holds a scale-down back.
        let mut history = History {
            recommendations: vec![(0, SystemTime::UNIX_EPOCH)],
            ..History::default()
        };
        let decision = pass(&hpa, replicas, levels, &mut history);
        assert_eq!(
            decision.rescale.as_ref().map(|r| r.to),
            to,
            "{min}-{max} at {replicas}"
        );
        assert_eq!(
            reasons(&decision.status()),
            owned(&conditions),
            "{min}-{max} at {replicas}"
        );
    }
}

#[test]
fn missing_metrics_fail_with_upstream_messages() {
    let hpa = hpa(1, 5, cpu(50), None);
    let scale = Scale {
        spec_replicas: 2,
        selector: "name=test-pod".into(),
    };
    let (pods, _) = pods(&[100, 100]);
    let decision = reconcile(
        &hpa,
        Observed {
            scale: Ok(&scale),
            pods: &pods,
            pod_metrics: Ok(&[][..]),
        },
        &mut History::default(),
        &Config::default(),
        now(),
    );
    assert_eq!(decision.rescale, None);
    let status = decision.status();
    assert_eq!(
        reasons(&status),
        owned(&[
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "FailedGetResourceMetric"),
        ])
    );
    assert_eq!(
        status["conditions"][1]["message"],
        "the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    );
    assert_eq!(status["currentMetrics"], json!([{"type": ""}]));
    let events: Vec<(&str, &str)> = decision.events.iter().map(|e| (e.kind, e.reason)).collect();
    assert_eq!(
        events,
        [
            ("Warning", "FailedGetResourceMetric"),
            ("Warning", "FailedComputeMetricsReplicas"),
        ]
    );
    assert_eq!(
        decision.events[1].message,
        "invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    );
}

#[test]
fn one_invalid_metric_blocks_scale_down_but_not_scale_up() {
    // TestNoScaleDownOneMetricInvalid and TestScaleUpOneMetricEmpty.
    let mut metrics = cpu(50);
    metrics
        .as_array_mut()
        .expect("a list")
        .push(json!({"type": "CheddarCheese"}));
    let down = pass(
        &hpa(2, 6, metrics.clone(), None),
        5,
        &[100, 300, 500, 250, 250],
        &mut History::default(),
    );
    assert_eq!(down.rescale, None);
    assert_eq!(
        reasons(&down.status()),
        owned(&[
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "InvalidMetricSourceType"),
        ])
    );
    let mut metrics = cpu(30);
    metrics.as_array_mut().expect("a list").push(
        json!({"type": "External", "external": {"metric": {"name": "qps"}, "target": {"type": "Value", "value": "100m"}}}),
    );
    let up = pass(
        &hpa(2, 6, metrics, None),
        3,
        &[300, 400, 500],
        &mut History::default(),
    );
    assert_eq!(up.rescale.as_ref().map(|r| r.to), Some(4));
    assert_eq!(reasons(&up.status()), owned(&OK));
}

#[test]
fn failed_scale_read_and_write() {
    let hpa = hpa(1, 5, cpu(50), None);
    let decision = reconcile(
        &hpa,
        Observed {
            scale: Err("deployments.apps \"web\" not found"),
            pods: &[],
            pod_metrics: Ok(&[][..]),
        },
        &mut History::default(),
        &Config::default(),
        now(),
    );
    assert_eq!(
        reasons(&decision.status()),
        owned(&[("AbleToScale", "False", "FailedGetScale")])
    );
    assert_eq!(decision.events[0].reason, "FailedGetScale");

    let mut decision = pass(&hpa, 3, &[900, 900, 900], &mut History::default());
    assert_eq!(decision.rescale.as_ref().map(|r| r.to), Some(5));
    decision.rescale_failed("the server is unavailable");
    let status = decision.status();
    assert_eq!(status["conditions"][0]["reason"], "FailedUpdateScale");
    assert_eq!(status["desiredReplicas"], 0);
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["FailedRescale"]);
    assert_eq!(
        decision.events[0].message,
        "New size: 5; reason: cpu resource utilization (percentage of request) above target; error: the server is unavailable"
    );
}

#[test]
fn scale_down_waits_for_the_stabilization_window() {
    // No behavior: the legacy 5-minute window; then with a behavior of 60 s.
    for (behavior, window) in [
        (None, 300u64),
        (
            Some(json!({"scaleDown": {"stabilizationWindowSeconds": 60}})),
            60,
        ),
    ] {
        let hpa = hpa(1, 10, cpu(50), behavior);
        let mut history = History::default();
        let start = now();
        // Busy: 2 → 4.
        let up = pass_at(&hpa, 2, &[1000, 1000], &mut history, start);
        assert_eq!(up.rescale.as_ref().map(|r| r.to), Some(4));
        up.rescaled(&mut history);
        // Idle within the window: held at 4, ScaleDownStabilized.
        let held = pass_at(
            &hpa,
            4,
            &[50, 50, 50, 50],
            &mut history,
            start + Duration::from_secs(window - 15),
        );
        assert_eq!(held.rescale, None, "window {window}");
        assert_eq!(
            held.status()["conditions"][0]["reason"],
            "ScaleDownStabilized",
            "window {window}"
        );
        // Past the window: down to the minimum.
        let down = pass_at(
            &hpa,
            4,
            &[50, 50, 50, 50],
            &mut history,
            start + Duration::from_secs(window + 15),
        );
        assert_eq!(
            down.rescale.as_ref().map(|r| r.to),
            Some(1),
            "window {window}"
        );
        assert_eq!(
            down.events[0].message,
            "New size: 1; reason: All metrics below target"
        );
    }
}

#[test]
fn scale_up_policies_limit_the_rate() {
    // Default scale-up rules: max(+4 pods, +100%) per 15 s; 1 → 5 at most.
    let hpa = hpa(1, 20, cpu(10), Some(json!({})));
    let decision = pass(&hpa, 1, &[1000], &mut History::default());
    assert_eq!(decision.rescale.as_ref().map(|r| r.to), Some(5));
    assert_eq!(
        reasons(&decision.status())[2],
        (
            "ScalingLimited".to_string(),
            "True".to_string(),
            "ScaleUpLimit".to_string()
        )
    );
}

#[test]
fn missing_selector_is_reported() {
    let hpa = hpa(1, 5, cpu(50), None);
    let scale = Scale {
        spec_replicas: 2,
        selector: String::new(),
    };
    let decision = reconcile(
        &hpa,
        Observed {
            scale: Ok(&scale),
            pods: &[],
            pod_metrics: Ok(&[][..]),
        },
        &mut History::default(),
        &Config::default(),
        now(),
    );
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        ["SelectorRequired", "FailedComputeMetricsReplicas"]
    );
    assert_eq!(
        decision.status()["conditions"][1]["reason"],
        "InvalidSelector"
    );
    assert!(decision.status().get("currentMetrics").is_none());
}
