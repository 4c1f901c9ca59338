//! Table tests of the runbooks over small clusters written as JSON.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tessera_model::time::timestamp;

use crate::{Cluster, Report, Severity, device_loss, node_notready, operator, pending};

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn ago(seconds: u64) -> String {
    timestamp(now() - Duration::from_secs(seconds))
}

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("fixture is a valid object")
}

/// A node: `ready` is the Ready condition's status; `gpus` (capacity, allocatable).
fn node(name: &str, ready: &str, gpus: (u32, u32)) -> Value {
    json!({
        "metadata": {"name": name, "labels": {
            "nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": gpus.0.to_string(), "nvidia.com/cuda.driver-version.full": "580.95.05"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.0.to_string()},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.1.to_string()},
            "conditions": [{"type": "Ready", "status": ready, "reason": if ready == "True" {"KubeletReady"} else {"NodeStatusUnknown"},
                "message": if ready == "True" {"kubelet is posting ready status"} else {"Kubelet stopped posting node status."},
                "lastHeartbeatTime": ago(120), "lastTransitionTime": ago(90)}]
        }
    })
}

fn pod(namespace: &str, name: &str, node: Option<&str>, phase: &str, gpus: u32) -> Value {
    let mut spec = json!({"containers": [{"name": "main", "image": "trainer",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                      "limits": {"nvidia.com/gpu": gpus.to_string()}}}]});
    if gpus == 0 {
        spec = json!({"containers": [{"name": "main", "image": "web", "resources": {"requests": {"cpu": "100m"}}}]});
    }
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    json!({"metadata": {"namespace": namespace, "name": name, "uid": format!("uid-{name}")},
           "spec": spec, "status": {"phase": phase}})
}

fn event(kind: &str, namespace: &str, name: &str, reason: &str, message: &str) -> Value {
    json!({"metadata": {"namespace": namespace, "name": format!("{name}.1")},
           "involvedObject": {"kind": kind, "namespace": namespace, "name": name},
           "reason": reason, "message": message, "type": "Warning",
           "lastTimestamp": ago(30)})
}

fn cluster(nodes: Vec<Value>, pods: Vec<Value>, events: Vec<Value>) -> Cluster {
    Cluster {
        nodes: nodes.into_iter().map(from).collect(),
        pods: pods.into_iter().map(from).collect(),
        events: events.into_iter().map(from).collect(),
        ..Cluster::default()
    }
}

/// Whether a report has a finding of `severity` about `subject` containing `text`.
fn has(report: &Report, severity: Severity, subject: &str, text: &str) -> bool {
    report
        .findings
        .iter()
        .any(|f| f.severity == severity && f.subject == subject && f.text.contains(text))
}

fn step(report: &Report, text: &str) -> bool {
    report.next_steps.iter().any(|s| s.contains(text))
}

#[test]
fn pending_table() {
    let mut gated = pod("team-a", "gated", None, "Pending", 1);
    gated["spec"]["schedulingGates"] = json!([{"name": "kueue.x-k8s.io/admission"}]);
    let mut custom_gate = pod("team-a", "custom", None, "Pending", 0);
    custom_gate["spec"]["schedulingGates"] = json!([{"name": "example.com/wait"}]);
    let mut mig = pod("team-a", "mig", None, "Pending", 0);
    mig["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/mig-1g.10gb": "1"}});
    let workload = json!({"metadata": {"namespace": "team-a", "name": "job-train-1a2b3"},
        "spec": {"active": true},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
            "message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 4 more needed"}]}});
    struct Case {
        name: &'static str,
        cluster: Cluster,
        workloads: Vec<Value>,
        target: Option<(&'static str, &'static str)>,
        expect: Vec<(Severity, &'static str, &'static str)>,
        steps: Vec<&'static str>,
        problems: usize,
    }
    let cases = vec![
        Case {
            name: "nothing pending",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![pod("a", "web", Some("gpu-1"), "Running", 0)],
                vec![],
            ),
            workloads: vec![],
            target: None,
            expect: vec![(Severity::Ok, "cluster", "no pod is pending")],
            steps: vec![],
            problems: 0,
        },
        Case {
            name: "Kueue's gate",
            cluster: cluster(vec![node("gpu-1", "True", (8, 8))], vec![gated], vec![]),
            workloads: vec![],
            target: None,
            expect: vec![(
                Severity::Problem,
                "pod team-a/gated",
                "kueue.x-k8s.io/admission: its Workload is not admitted",
            )],
            steps: vec!["tessera explain workload team-a/"],
            problems: 1,
        },
        Case {
            name: "another gate",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![custom_gate],
                vec![],
            ),
            workloads: vec![],
            target: None,
            expect: vec![(
                Severity::Problem,
                "pod team-a/custom",
                "example.com/wait (SchedulingGated)",
            )],
            steps: vec!["they must remove them"],
            problems: 1,
        },
        Case {
            name: "too big for any node, with the scheduler's message",
            cluster: cluster(
                vec![node("gpu-1", "True", (4, 4)), node("gpu-2", "True", (4, 3))],
                vec![pod("team-a", "big", None, "Pending", 8)],
                vec![event(
                    "Pod",
                    "team-a",
                    "big",
                    "FailedScheduling",
                    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                )],
            ),
            workloads: vec![],
            target: None,
            expect: vec![
                (
                    Severity::Problem,
                    "pod team-a/big",
                    "default-scheduler (30s ago): 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
                ),
                (Severity::Problem, "pod team-a/big", "fits 0/2 nodes"),
                (
                    Severity::Problem,
                    "pod team-a/big",
                    "nvidia.com/gpu allocatable is below capacity on gpu-2 (1)",
                ),
            ],
            steps: vec![
                "tessera explain pod team-a/big",
                "tessera diagnose device-loss",
            ],
            problems: 3,
        },
        Case {
            name: "a MIG profile nobody offers",
            cluster: cluster(vec![node("gpu-1", "True", (8, 8))], vec![mig], vec![]),
            workloads: vec![],
            target: None,
            expect: vec![(
                Severity::Problem,
                "pod team-a/mig",
                "MIG profile mismatch: asks for 1 nvidia.com/mig-1g.10gb, which no node offers (offered: nvidia.com/gpu)",
            )],
            steps: vec!["mig-repartition"],
            problems: 2,
        },
        Case {
            name: "fits now",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![pod("team-a", "small", None, "Pending", 1)],
                vec![],
            ),
            workloads: vec![],
            target: None,
            expect: vec![(
                Severity::Info,
                "pod team-a/small",
                "fits 1/1 nodes now (gpu-1)",
            )],
            steps: vec!["check the scheduler is running"],
            problems: 0,
        },
        Case {
            name: "bound to a node that is not Ready",
            cluster: cluster(
                vec![node("gpu-1", "Unknown", (8, 8))],
                vec![pod("team-a", "stuck", Some("gpu-1"), "Pending", 1)],
                vec![],
            ),
            workloads: vec![],
            target: Some(("team-a", "stuck")),
            expect: vec![(
                Severity::Problem,
                "pod team-a/stuck",
                "bound to node gpu-1, which is not Ready",
            )],
            steps: vec!["tessera diagnose node-notready gpu-1"],
            problems: 1,
        },
        Case {
            name: "bound, the kubelet refused it",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![pod("team-a", "refused", Some("gpu-1"), "Pending", 1)],
                vec![event(
                    "Pod",
                    "team-a",
                    "refused",
                    "UnexpectedAdmissionError",
                    "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected",
                )],
            ),
            workloads: vec![],
            target: None,
            expect: vec![(
                Severity::Problem,
                "pod team-a/refused",
                "the kubelet reports UnexpectedAdmissionError (30s ago): Allocate failed",
            )],
            steps: vec!["tessera diagnose device-loss gpu-1"],
            problems: 1,
        },
        Case {
            name: "target not found",
            cluster: cluster(vec![], vec![], vec![]),
            workloads: vec![],
            target: Some(("team-a", "ghost")),
            expect: vec![(Severity::Problem, "pod team-a/ghost", "not found")],
            steps: vec!["kubectl get pods -n team-a"],
            problems: 1,
        },
        Case {
            name: "target running",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![pod("team-a", "ok", Some("gpu-1"), "Running", 1)],
                vec![],
            ),
            workloads: vec![],
            target: Some(("team-a", "ok")),
            expect: vec![(
                Severity::Ok,
                "pod team-a/ok",
                "is Running on node gpu-1; nothing is pending",
            )],
            steps: vec![],
            problems: 0,
        },
        Case {
            name: "a controller over quota, and a Kueue workload without quota",
            cluster: cluster(
                vec![node("gpu-1", "True", (8, 8))],
                vec![],
                vec![event(
                    "ReplicaSet",
                    "team-b",
                    "serve-7f9c",
                    "FailedCreate",
                    "pods \"serve-7f9c-x\" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4",
                )],
            ),
            workloads: vec![workload],
            target: None,
            expect: vec![
                (
                    Severity::Problem,
                    "replicaset team-b/serve-7f9c",
                    "cannot create its pods (30s ago): pods \"serve-7f9c-x\" is forbidden: exceeded quota: gpus",
                ),
                (
                    Severity::Problem,
                    "workload team-a/job-train-1a2b3",
                    "waits for quota: couldn't assign flavors to pod set main",
                ),
            ],
            steps: vec![
                "kubectl describe resourcequota -n team-b",
                "tessera explain workload team-a/job-train-1a2b3",
            ],
            problems: 2,
        },
    ];
    for case in cases {
        let report = pending(&case.cluster, &case.workloads, case.target, now());
        for (severity, subject, text) in &case.expect {
            assert!(
                has(&report, *severity, subject, text),
                "{}: no {severity:?} {subject:?} containing {text:?} in\n{}",
                case.name,
                report.render()
            );
        }
        for text in &case.steps {
            assert!(
                step(&report, text),
                "{}: no step with {text:?} in\n{}",
                case.name,
                report.render()
            );
        }
        assert_eq!(
            report.problems(),
            case.problems,
            "{}: problems in\n{}",
            case.name,
            report.render()
        );
    }
}

#[test]
fn device_loss_table() {
    let mut fallen = node("gpu-1", "True", (8, 7));
    fallen["metadata"]["annotations"] = json!({"fault.tessera.dev/gpu-3": "xid-79"});
    let mut app_error = node("gpu-2", "True", (8, 8));
    app_error["metadata"]["annotations"] = json!({"fault.tessera.dev/gpu-0": "xid-13"});
    app_error["spec"]["unschedulable"] = json!(true);
    let slice = json!({"metadata": {"name": "gpu-3-gpu.nvidia.com-x"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "gpu-3",
                 "pool": {"name": "gpu-3", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "taints": [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}]}]}});
    let mut dra = cluster(vec![node("gpu-3", "True", (0, 0))], vec![], vec![]);
    dra.slices = vec![from(slice)];
    let all = cluster(
        vec![fallen.clone(), app_error.clone()],
        vec![
            pod("team-a", "train-0", Some("gpu-1"), "Running", 8),
            pod("team-a", "web", Some("gpu-1"), "Running", 0),
        ],
        vec![],
    );
    let report = device_loss(&all, None);
    assert!(
        has(
            &report,
            Severity::Problem,
            "GPU 3 of gpu-1",
            "reported XID 79 (GPU has fallen off the bus): out of service"
        ),
        "{}",
        report.render()
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "GPU 3 of gpu-1",
            "its pods fail or must move: team-a/train-0"
        ),
        "{}",
        report.render()
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "node gpu-1",
            "nvidia.com/gpu: allocatable 7 of capacity 8"
        ),
        "{}",
        report.render()
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "node gpu-1",
            "still schedulable"
        ),
        "{}",
        report.render()
    );
    assert!(
        has(
            &report,
            Severity::Info,
            "GPU 0 of gpu-2",
            "XID 13 (Graphics Engine Exception), an application error"
        ),
        "{}",
        report.render()
    );
    assert!(step(
        &report,
        &format!(
            "XID 79 on gpu-1: {}",
            tessera_devices::xid::xid_recovery(79)
        )
    ));
    assert!(step(&report, "kubectl cordon gpu-1"));
    assert!(step(&report, "tessera fault clear gpu-1"));
    assert!(
        !step(&report, "gpu-2"),
        "an application XID needs no drain:\n{}",
        report.render()
    );
    assert_eq!(report.problems(), 4, "{}", report.render());

    let only_gpu_2 = device_loss(&all, Some("gpu-2"));
    assert_eq!(only_gpu_2.problems(), 0, "{}", only_gpu_2.render());

    let tainted = device_loss(&dra, None);
    assert!(
        has(
            &tainted,
            Severity::Problem,
            "device gpu-3/gpu-0",
            "tainted gpu.nvidia.com/xid=48:NoSchedule in ResourceSlice gpu-3-gpu.nvidia.com-x"
        ),
        "{}",
        tainted.render()
    );

    let healthy = device_loss(
        &cluster(vec![node("gpu-1", "True", (8, 8))], vec![], vec![]),
        None,
    );
    assert!(has(
        &healthy,
        Severity::Ok,
        "cluster",
        "no lost GPU on 1 node(s)"
    ));
    assert_eq!(
        healthy.scope,
        "1 node(s): nvidia.com/gpu capacity 8 (device plugin), 0 DRA device(s)"
    );

    let missing = device_loss(&all, Some("gpu-9"));
    assert!(has(&missing, Severity::Problem, "node gpu-9", "not found"));
}

#[test]
fn node_notready_table() {
    let mut down = node("gpu-1", "Unknown", (8, 8));
    down["spec"]["taints"] = json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": ago(100)}
    ]);
    let mut pressured = node("cpu-1", "True", (0, 0));
    pressured["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
        .push(json!({"type": "MemoryPressure", "status": "True", "message": "kubelet has insufficient memory available"}));
    let mut tolerant = pod("team-a", "train-0", Some("gpu-1"), "Running", 8);
    tolerant["spec"]["tolerations"] = json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]);
    let mut daemon = pod("kube-system", "agent-x", Some("gpu-1"), "Running", 0);
    daemon["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
    let mut cluster = cluster(
        vec![down, pressured, node("gpu-2", "True", (8, 8))],
        vec![tolerant, daemon],
        vec![],
    );
    cluster.leases = vec![from(
        json!({"metadata": {"namespace": "kube-node-lease", "name": "gpu-1"},
        "spec": {"holderIdentity": "gpu-1", "renewTime": timestamp(now() - Duration::from_secs(140))}}),
    )];
    let report = node_notready(&cluster, None, now());
    let render = report.render();
    assert!(
        has(
            &report,
            Severity::Problem,
            "node gpu-1",
            "Ready=Unknown for 90s (NodeStatusUnknown: Kubelet stopped posting node status.)"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Info,
            "node gpu-1",
            "Lease last renewed 2m20s ago"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Info,
            "node gpu-1",
            "tainted node.kubernetes.io/unreachable:NoExecute, added 100s ago"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Info,
            "node gpu-1",
            "1 pod(s) will be evicted, the first in 3m20s: team-a/train-0"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Info,
            "node gpu-1",
            "1 pod(s) tolerate the taints for ever and stay (DaemonSet pods among them): kube-system/agent-x"
        ),
        "{render}"
    );
    assert!(step(&report, "went silent"), "{render}");
    assert!(step(&report, "tessera fault clear gpu-1"), "{render}");
    assert!(
        !render.contains("cpu-1"),
        "only NotReady nodes without a target:\n{render}"
    );
    assert_eq!(report.scope, "3 node(s), 1 not Ready");

    let pressured = node_notready(&cluster, Some("cpu-1"), now());
    assert!(
        has(&pressured, Severity::Ok, "node cpu-1", "Ready for 90s"),
        "{}",
        pressured.render()
    );
    assert!(
        has(
            &pressured,
            Severity::Problem,
            "node cpu-1",
            "MemoryPressure=True (kubelet has insufficient memory available)"
        ),
        "{}",
        pressured.render()
    );

    let fine = node_notready(
        &super::tests::cluster(vec![node("gpu-2", "True", (8, 8))], vec![], vec![]),
        None,
        now(),
    );
    assert!(has(
        &fine,
        Severity::Ok,
        "cluster",
        "all 1 node(s) are Ready"
    ));
    assert_eq!(fine.problems(), 0);
}

#[test]
fn operator_table() {
    let daemonset = |name: &str, desired: i32, ready: i32| -> Value {
        json!({"metadata": {"namespace": "gpu-operator", "name": name},
               "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"spec": {"containers": []}}},
               "status": {"desiredNumberScheduled": desired, "numberReady": ready, "currentNumberScheduled": desired,
                          "numberMisscheduled": 0, "numberUnavailable": desired - ready}})
    };
    let mut crashing = pod(
        "gpu-operator",
        "nvidia-driver-daemonset-abcde",
        Some("gpu-1"),
        "Running",
        0,
    );
    crashing["status"]["containerStatuses"] = json!([{"name": "nvidia-driver-ctr", "image": "driver", "imageID": "",
        "ready": false, "restartCount": 7,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}]);
    let mut unlabelled = node("gpu-2", "True", (8, 8));
    unlabelled["metadata"]["labels"] =
        json!({"feature.node.kubernetes.io/pci-10de.present": "true"});
    let mut failed = node("gpu-3", "True", (8, 8));
    failed["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = json!("upgrade-failed");
    let slice = |name: &str, node: &str, generation: i64| -> Value {
        json!({"metadata": {"name": name},
               "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                        "pool": {"name": node, "generation": generation, "resourceSliceCount": 1}, "devices": []}})
    };
    let mut cluster = cluster(
        vec![node("gpu-1", "True", (8, 8)), unlabelled, failed],
        vec![crashing],
        vec![],
    );
    cluster.daemonsets = vec![
        from(daemonset("nvidia-driver-daemonset", 3, 2)),
        from(daemonset("nvidia-dcgm-exporter", 3, 3)),
    ];
    cluster.slices = vec![
        from(slice("gpu-1-old", "gpu-1", 1)),
        from(slice("gpu-1-new", "gpu-1", 2)),
        from(slice("gone-1", "gone", 1)),
    ];
    let report = operator(&cluster, &crate::operator::DEFAULT_NAMESPACES);
    let render = report.render();
    assert!(
        has(
            &report,
            Severity::Problem,
            "daemonset gpu-operator/nvidia-driver-daemonset",
            "2/3 pods ready, 1 unavailable"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Ok,
            "daemonset gpu-operator/nvidia-dcgm-exporter",
            "3/3 pods ready"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "pod gpu-operator/nvidia-driver-daemonset-abcde",
            "container nvidia-driver-ctr on gpu-1: CrashLoopBackOff, restarted 7 time(s); last exit 1 (Error)"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "node gpu-2",
            "GPU node without GPU feature discovery's labels nvidia.com/gpu.present, nvidia.com/gpu.product, nvidia.com/gpu.count, nvidia.com/cuda.driver-version.full"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "node gpu-3",
            "driver upgrade failed"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "resourceslice gpu-1-old",
            "stale: generation 1 of pool gpu-1 (gpu.nvidia.com), whose newest is 2"
        ),
        "{render}"
    );
    assert!(
        has(
            &report,
            Severity::Problem,
            "resourceslice gone-1",
            "stale: names node gone, which no longer exists"
        ),
        "{render}"
    );
    assert!(
        !has(&report, Severity::Problem, "resourceslice gpu-1-new", ""),
        "{render}"
    );
    assert!(
        step(
            &report,
            "kubectl logs -n gpu-operator nvidia-driver-daemonset-abcde -c nvidia-driver-ctr --previous"
        ),
        "{render}"
    );
    assert!(
        step(
            &report,
            "kubectl label node gpu-3 nvidia.com/gpu-driver-upgrade-state=upgrade-required --overwrite"
        ),
        "{render}"
    );
    assert_eq!(report.problems(), 6, "{render}");

    let empty = operator(
        &super::tests::cluster(vec![], vec![], vec![]),
        &["gpu-operator"],
    );
    assert!(has(
        &empty,
        Severity::Info,
        "gpu-operator",
        "no operator components found"
    ));
}

#[test]
fn render_numbers_steps_and_marks_problems() {
    let mut report = Report::new("Runbook: test");
    report.scope = "1 thing".into();
    report.found(Severity::Problem, "node a", "broken");
    report.found(Severity::Ok, "node b", "fine");
    report.next("first");
    report.next("second");
    report.next("first");
    assert_eq!(
        report.render(),
        "Runbook: test\nChecked: 1 thing\nFound:\n  [PROBLEM] node a: broken\n  [ok] node b: fine\nNext steps:\n  1. first\n  2. second\n"
    );
}
