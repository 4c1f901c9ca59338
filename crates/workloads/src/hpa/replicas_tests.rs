//! Upstream's resource cases of `replica_calculator_test.go`, as a table: pods of two
//! containers that each request the pod's request and use the pod's level, as upstream's fake
//! clients make them.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::time::timestamp;

use super::replicas::{Goal, PodInfo, Tuning, pod_info, resource_metrics, resource_replicas};

const CONTAINERS: i64 = 2;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

#[derive(Clone, Copy, Default)]
enum Start {
    /// Go's zero time (long before everything).
    #[default]
    Zero,
    /// Started 10 minutes ago: past the CPU initialization period.
    Cool,
    /// Started 2 minutes ago: within it.
    Hot,
}

struct Case {
    name: &'static str,
    current: i32,
    requests: &'static [&'static str],
    levels: &'static [i64],
    pod_names: &'static [&'static str],
    target: i32,
    readiness: &'static [&'static str],
    start: &'static [Start],
    phase: &'static [&'static str],
    deleting: &'static [bool],
    /// (replicas, utilization, raw value) or an error's beginning.
    expected: Result<(i32, i32, i64), &'static str>,
}

impl Default for Case {
    fn default() -> Case {
        Case {
            name: "",
            current: 0,
            requests: &[],
            levels: &[],
            pod_names: &[],
            target: 0,
            readiness: &[],
            start: &[],
            phase: &[],
            deleting: &[],
            expected: Err("unset"),
        }
    }
}

impl Case {
    fn pods(&self) -> Vec<Value> {
        let count = (self.current as usize).max(self.phase.len());
        (0..count)
            .map(|i| {
                let start = match self.start.get(i).copied().unwrap_or_default() {
                    Start::Zero => SystemTime::UNIX_EPOCH,
                    Start::Cool => now() - Duration::from_secs(600),
                    Start::Hot => now() - Duration::from_secs(120),
                };
                let resources = match self.requests.get(i) {
                    Some(request) => json!({"requests": {"cpu": request}}),
                    None => json!({}),
                };
                let mut pod = json!({
                    "metadata": {"name": format!("test-pod-{i}"), "namespace": "test-namespace",
                        "labels": {"name": "test-pod"}},
                    "spec": {"containers": [
                        {"name": "container0", "resources": resources},
                        {"name": "container1", "resources": resources}]},
                    "status": {
                        "phase": self.phase.get(i).copied().unwrap_or("Running"),
                        "startTime": timestamp(start),
                        "conditions": [{"type": "Ready",
                            "status": self.readiness.get(i).copied().unwrap_or("True")}],
                    },
                });
                if self.deleting.get(i).copied().unwrap_or(false) {
                    pod["metadata"]["deletionTimestamp"] = json!(timestamp(now()));
                }
                pod
            })
            .collect()
    }

    fn metrics(&self) -> Vec<Value> {
        self.levels
            .iter()
            .enumerate()
            .map(|(i, level)| {
                let name = self
                    .pod_names
                    .get(i)
                    .map_or_else(|| format!("test-pod-{i}"), |n| n.to_string());
                let usage = json!({"cpu": format!("{level}m")});
                json!({
                    "metadata": {"name": name, "namespace": "test-namespace"},
                    "timestamp": timestamp(SystemTime::UNIX_EPOCH),
                    "window": "1m0s",
                    "containers": [{"name": "container0", "usage": usage},
                                   {"name": "container1", "usage": usage}],
                })
            })
            .collect()
    }
}

fn one() -> &'static [&'static str] {
    &["1.0", "1.0", "1.0", "1.0", "1.0", "1.0", "1.0"]
}

#[test]
fn resource_cases() {
    let cases = vec![
        Case {
            name: "DisjointResourcesMetrics",
            current: 1,
            requests: &["1.0"],
            levels: &[100],
            pod_names: &["an-older-pod-name"],
            target: 100,
            expected: Err("no metrics returned matched known pods"),
            ..Case::default()
        },
        Case {
            name: "ScaleUp",
            current: 3,
            requests: one(),
            levels: &[300, 500, 700],
            target: 30,
            expected: Ok((5, 50, CONTAINERS * 500)),
            ..Case::default()
        },
        Case {
            name: "ScaleUpUnreadyLessScale",
            current: 3,
            requests: one(),
            levels: &[300, 500, 700],
            target: 30,
            readiness: &["False", "True", "True"],
            expected: Ok((4, 60, CONTAINERS * 600)),
            ..Case::default()
        },
        Case {
            name: "ScaleUpHotCpuLessScale",
            current: 3,
            requests: one(),
            levels: &[300, 500, 700],
            target: 30,
            start: &[Start::Hot, Start::Cool, Start::Cool],
            expected: Ok((4, 60, CONTAINERS * 600)),
            ..Case::default()
        },
        Case {
            name: "ScaleUpUnreadyNoScale",
            current: 3,
            requests: one(),
            levels: &[400, 500, 700],
            target: 30,
            readiness: &["True", "False", "False"],
            expected: Ok((3, 40, CONTAINERS * 400)),
            ..Case::default()
        },
        Case {
            name: "ScaleHotCpuNoScale",
            current: 3,
            requests: one(),
            levels: &[400, 500, 700],
            target: 30,
            readiness: &["True", "False", "False"],
            start: &[Start::Cool, Start::Hot, Start::Hot],
            expected: Ok((3, 40, CONTAINERS * 400)),
            ..Case::default()
        },
        Case {
            name: "ScaleUpIgnoresFailedPods",
            current: 2,
            requests: one(),
            levels: &[500, 700],
            target: 30,
            readiness: &["True", "True", "False", "False"],
            phase: &["Running", "Running", "Failed", "Failed"],
            expected: Ok((4, 60, CONTAINERS * 600)),
            ..Case::default()
        },
        Case {
            name: "ScaleUpIgnoresDeletionPods",
            current: 2,
            requests: one(),
            levels: &[500, 700],
            target: 30,
            readiness: &["True", "True", "False", "False"],
            phase: &["Running", "Running", "Running", "Running"],
            deleting: &[false, false, true, true],
            expected: Ok((4, 60, CONTAINERS * 600)),
            ..Case::default()
        },
        Case {
            name: "ScaleDown",
            current: 5,
            requests: one(),
            levels: &[100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((3, 28, CONTAINERS * 280)),
            ..Case::default()
        },
        Case {
            name: "ScaleDownIncludeUnreadyPods",
            current: 5,
            requests: one(),
            levels: &[100, 300, 500, 250, 250],
            target: 50,
            readiness: &["True", "True", "True", "False", "False"],
            expected: Ok((2, 30, CONTAINERS * 300)),
            ..Case::default()
        },
        Case {
            name: "ScaleDownExcludeUnscheduledPods",
            current: 5,
            requests: one(),
            levels: &[100],
            target: 50,
            readiness: &["True", "False", "False", "False", "False"],
            phase: &["Running", "Pending", "Pending", "Pending", "Pending"],
            expected: Ok((1, 10, CONTAINERS * 100)),
            ..Case::default()
        },
        Case {
            name: "ScaleDownIgnoreHotCpuPods",
            current: 5,
            requests: one(),
            levels: &[100, 300, 500, 250, 250],
            target: 50,
            start: &[
                Start::Cool,
                Start::Cool,
                Start::Cool,
                Start::Hot,
                Start::Hot,
            ],
            expected: Ok((2, 30, CONTAINERS * 300)),
            ..Case::default()
        },
        Case {
            name: "ScaleDownIgnoresFailedPods",
            current: 5,
            requests: one(),
            levels: &[100, 300, 500, 250, 250],
            target: 50,
            readiness: &["True", "True", "True", "True", "True", "False", "False"],
            phase: &[
                "Running", "Running", "Running", "Running", "Running", "Failed", "Failed",
            ],
            expected: Ok((3, 28, CONTAINERS * 280)),
            ..Case::default()
        },
        Case {
            name: "ScaleDownIgnoresDeletionPods",
            current: 5,
            requests: one(),
            levels: &[100, 300, 500, 250, 250],
            target: 50,
            readiness: &["True", "True", "True", "True", "True", "False", "False"],
            phase: &[
                "Running", "Running", "Running", "Running", "Running", "Running", "Running",
            ],
            deleting: &[false, false, false, false, false, true, true],
            expected: Ok((3, 28, CONTAINERS * 280)),
            ..Case::default()
        },
        Case {
            name: "Tolerance",
            current: 3,
            requests: &["0.9", "1.0", "1.1"],
            levels: &[1010, 1030, 1020],
            target: 100,
            expected: Ok((3, 102, CONTAINERS * 1020)),
            ..Case::default()
        },
        Case {
            name: "SuperfluousMetrics",
            current: 4,
            requests: one(),
            levels: &[4000, 9500, 3000, 7000, 3200, 2000],
            target: 100,
            expected: Ok((24, 587, CONTAINERS * 5875)),
            ..Case::default()
        },
        Case {
            name: "MissingMetrics",
            current: 4,
            requests: one(),
            levels: &[400, 95],
            target: 100,
            expected: Ok((3, 24, 495)),
            ..Case::default()
        },
        Case {
            name: "EmptyMetrics",
            current: 4,
            requests: one(),
            levels: &[],
            target: 100,
            expected: Err(
                "unable to get metrics for resource cpu: no metrics returned from resource metrics API",
            ),
            ..Case::default()
        },
        Case {
            name: "EmptyCPURequest",
            current: 1,
            requests: &[],
            levels: &[200],
            target: 100,
            expected: Err("missing request for"),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsNoChangeEq",
            current: 2,
            requests: one(),
            levels: &[1000],
            target: 100,
            expected: Ok((2, 100, CONTAINERS * 1000)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsNoChangeGt",
            current: 2,
            requests: one(),
            levels: &[1900],
            target: 100,
            expected: Ok((2, 190, CONTAINERS * 1900)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsNoChangeLt",
            current: 2,
            requests: one(),
            levels: &[600],
            target: 100,
            expected: Ok((2, 60, CONTAINERS * 600)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsUnreadyChange",
            current: 3,
            requests: one(),
            levels: &[100, 450],
            target: 50,
            readiness: &["False", "True", "True"],
            expected: Ok((3, 45, CONTAINERS * 450)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsHotCpuNoChange",
            current: 3,
            requests: one(),
            levels: &[100, 450],
            target: 50,
            start: &[Start::Hot, Start::Cool, Start::Cool],
            expected: Ok((3, 45, CONTAINERS * 450)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsUnreadyScaleUp",
            current: 3,
            requests: one(),
            levels: &[100, 2000],
            target: 50,
            readiness: &["False", "True", "True"],
            expected: Ok((4, 200, CONTAINERS * 2000)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsHotCpuScaleUp",
            current: 3,
            requests: one(),
            levels: &[100, 2000],
            target: 50,
            readiness: &["False", "True", "True"],
            start: &[Start::Hot, Start::Cool, Start::Cool],
            expected: Ok((4, 200, CONTAINERS * 2000)),
            ..Case::default()
        },
        Case {
            name: "MissingMetricsUnreadyScaleDown",
            current: 4,
            requests: one(),
            levels: &[100, 100, 100],
            target: 50,
            readiness: &["False", "True", "True", "True"],
            expected: Ok((3, 10, CONTAINERS * 100)),
            ..Case::default()
        },
        Case {
            name: "DuringRollingUpdateWithMaxSurge",
            current: 2,
            requests: one(),
            levels: &[100, 100],
            target: 50,
            phase: &["Running", "Running", "Running"],
            expected: Ok((2, 10, CONTAINERS * 100)),
            ..Case::default()
        },
    ];
    assert_eq!(cases.len(), 28);
    for case in &cases {
        let pods: Vec<PodInfo> = case.pods().iter().map(pod_info).collect();
        let items = case.metrics();
        let metrics = resource_metrics(&items, "cpu", None);
        let got = resource_replicas(
            case.current,
            Goal::Utilization(case.target),
            "cpu",
            None,
            &pods,
            metrics,
            &Tuning::default(),
            now(),
        );
        match (got, case.expected) {
            (Ok(proposal), Ok((replicas, utilization, raw))) => {
                assert_eq!(
                    (
                        proposal.replicas,
                        proposal.utilization,
                        proposal.raw_average
                    ),
                    (replicas, Some(utilization), raw),
                    "{}",
                    case.name
                );
                assert_eq!(proposal.timestamp, SystemTime::UNIX_EPOCH, "{}", case.name);
            }
            (Err(error), Err(expected)) => {
                assert!(error.starts_with(expected), "{}: {error}", case.name);
            }
            (got, expected) => panic!("{}: got {got:?}, expected {expected:?}", case.name),
        }
    }
}

/// Upstream's `TestReplicaCalcComputedToleranceAlgImplementation`: a change just past the
/// tolerance scales, one just inside it does not.
#[test]
fn computed_tolerance() {
    let start_pods = 10i32;
    let used_total = 150 * i64::from(start_pods);
    let requested_total = 2 * used_total;
    let requested_to_used = (requested_total / used_total) as f64;
    let per_pod = requested_total / i64::from(start_pods);
    let requests: Vec<String> = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0]
        .iter()
        .map(|d| format!("{}m", per_pod + d))
        .collect();
    let run = |extra: f64| {
        let target = (1.0 / (requested_to_used * (1.0 - 0.1))).abs() + extra;
        let percent = (target * 100.0) as i32;
        let pods: Vec<PodInfo> = requests
            .iter()
            .enumerate()
            .map(|(i, request)| {
                pod_info(&json!({
                    "metadata": {"name": format!("test-pod-{i}")},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": request}}}]},
                    "status": {"phase": "Running", "startTime": timestamp(SystemTime::UNIX_EPOCH),
                        "conditions": [{"type": "Ready", "status": "True"}]},
                }))
            })
            .collect();
        let items: Vec<Value> = (0..start_pods)
            .map(|i| {
                json!({"metadata": {"name": format!("test-pod-{i}")},
                    "timestamp": timestamp(SystemTime::UNIX_EPOCH), "window": "1m",
                    "containers": [{"name": "c", "usage": {"cpu": format!("{}m", used_total / 10)}}]})
            })
            .collect();
        let proposal = resource_replicas(
            start_pods,
            Goal::Utilization(percent),
            "cpu",
            None,
            &pods,
            resource_metrics(&items, "cpu", None),
            &Tuning::default(),
            now(),
        )
        .expect("a proposal");
        let used_ratio = used_total as f64 / (requested_total as f64 * target);
        (proposal, (used_ratio * f64::from(start_pods)).ceil() as i32)
    };
    let (proposal, expected) = run(0.01);
    assert_eq!(proposal.replicas, expected);
    assert_eq!(proposal.utilization, Some(50));
    let (proposal, _) = run(0.004);
    assert_eq!(proposal.replicas, start_pods);
}

/// `AverageValue` targets (`GetRawResourceReplicas`), memory, and container metrics.
#[test]
fn average_value_and_container_cases() {
    let pod = |name: &str, ready: &str| {
        json!({"metadata": {"name": name},
            "spec": {"containers": [
                {"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}},
                {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "startTime": timestamp(SystemTime::UNIX_EPOCH),
                "conditions": [{"type": "Ready", "status": ready}]}})
    };
    let metric = |name: &str, app: &str, sidecar: &str| {
        json!({"metadata": {"name": name}, "timestamp": timestamp(now()), "window": "30s",
            "containers": [{"name": "app", "usage": {"cpu": app, "memory": "150Mi"}},
                           {"name": "sidecar", "usage": {"cpu": sidecar}}]})
    };
    let pods: Vec<PodInfo> = [pod("a", "True"), pod("b", "True")]
        .iter()
        .map(pod_info)
        .collect();
    let items = [metric("a", "900m", "100m"), metric("b", "700m", "100m")];
    let run = |goal, resource: &str, container: Option<&str>| {
        resource_replicas(
            2,
            goal,
            resource,
            container,
            &pods,
            resource_metrics(&items, resource, container),
            &Tuning::default(),
            now(),
        )
    };
    // Average 900m per pod against 300m: 3× → 6 replicas.
    let up = run(Goal::AverageValue(300), "cpu", None).expect("cpu value");
    assert_eq!(
        (up.replicas, up.utilization, up.raw_average),
        (6, None, 900)
    );
    // The app container alone: 800m of 500m = 160% against 80% → 4.
    let app = run(Goal::Utilization(80), "cpu", Some("app")).expect("container");
    assert_eq!((app.replicas, app.utilization), (4, Some(160)));
    // Memory: the sidecar has no memory usage, so the pods have no pod-level value.
    let memory = run(Goal::Utilization(100), "memory", None);
    assert_eq!(
        memory.unwrap_err(),
        "did not receive metrics for targeted pods (pods might be unready)"
    );
    // A container that is not in the metrics.
    let missing = run(Goal::Utilization(80), "cpu", Some("web")).unwrap_err();
    assert!(
        missing.ends_with("container web not present in metrics for pod /a"),
        "{missing}"
    );
    // Memory readiness is not considered: unready pods count.
    let unready: Vec<PodInfo> = [pod("a", "False")].iter().map(pod_info).collect();
    let memory_app = resource_replicas(
        1,
        Goal::Utilization(100),
        "memory",
        Some("app"),
        &unready,
        resource_metrics(&items[..1], "memory", Some("app")),
        &Tuning::default(),
        now(),
    )
    .expect("memory");
    assert_eq!(
        (memory_app.replicas, memory_app.utilization),
        (2, Some(150))
    );
}
