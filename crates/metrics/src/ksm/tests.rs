//! kube-state-metrics' own test tables (`internal/store/{node,pod,namespace,deployment,job,
//! daemonset,poddisruptionbudget,resourcequota}_test.go`) as objects → expected lines,
//! compared per family as KSM's `MetricNames` filter does.

use serde_json::{Value, json};

use super::*;
use crate::testing::assert_families;

struct Case {
    name: &'static str,
    objects: Objects,
    want: &'static str,
    families: &'static [&'static str],
}

fn run(cases: Vec<Case>) {
    for case in cases {
        let got = render(&case.objects).unwrap();
        assert_families(case.name, &got, case.want, case.families);
    }
}

fn nodes(nodes: Vec<Value>) -> Objects {
    Objects {
        nodes,
        ..Objects::default()
    }
}

fn pods(pods: Vec<Value>) -> Objects {
    Objects {
        pods,
        ..Objects::default()
    }
}

#[test]
fn node_store() {
    run(vec![
        Case {
            name: "base node info",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.1"},
                "spec": {"providerID": "provider://i-uniqueid", "podCIDR": "172.24.10.0/24"},
                "status": {
                    "nodeInfo": {"kernelVersion": "kernel", "kubeletVersion": "kubelet", "kubeProxyVersion": "kubeproxy", "osImage": "osimage", "containerRuntimeVersion": "rkt", "systemUUID": "6a934e21-5207-4a84-baea-3a952d926c80"},
                    "addresses": [{"type": "InternalIP", "address": "1.2.3.4"}]
                }
            })]),
            want: r#"
kube_node_info{container_runtime_version="rkt",kernel_version="kernel",kubelet_version="kubelet",kubeproxy_version="deprecated",node="127.0.0.1",os_image="osimage",pod_cidr="172.24.10.0/24",provider_id="provider://i-uniqueid",internal_ip="1.2.3.4",system_uuid="6a934e21-5207-4a84-baea-3a952d926c80"} 1
kube_node_spec_unschedulable{node="127.0.0.1"} 0
"#,
            families: &["kube_node_spec_unschedulable", "kube_node_info"],
        },
        Case {
            name: "unset fields",
            objects: nodes(vec![json!({"metadata": {}, "status": {}, "spec": {}})]),
            want: r#"
kube_node_info{container_runtime_version="",kernel_version="",kubelet_version="",kubeproxy_version="deprecated",node="",os_image="",pod_cidr="",provider_id="",internal_ip="",system_uuid=""} 1
"#,
            families: &["kube_node_info"],
        },
        Case {
            name: "resources",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.1", "creationTimestamp": "2017-07-14T02:40:00Z"},
                "spec": {"unschedulable": true},
                "status": {
                    "capacity": {"cpu": "4.3", "memory": "2G", "pods": "1000", "storage": "3G", "ephemeral-storage": "4G", "nvidia.com/gpu": "4"},
                    "allocatable": {"cpu": "3", "memory": "1G", "pods": "555", "storage": "2G", "ephemeral-storage": "3G", "nvidia.com/gpu": "1"}
                }
            })]),
            want: r#"
kube_node_created{node="127.0.0.1"} 1.5e+09
kube_node_spec_unschedulable{node="127.0.0.1"} 1
kube_node_status_allocatable{node="127.0.0.1",resource="cpu",unit="core"} 3
kube_node_status_allocatable{node="127.0.0.1",resource="ephemeral_storage",unit="byte"} 3e+09
kube_node_status_allocatable{node="127.0.0.1",resource="memory",unit="byte"} 1e+09
kube_node_status_allocatable{node="127.0.0.1",resource="nvidia_com_gpu",unit="integer"} 1
kube_node_status_allocatable{node="127.0.0.1",resource="pods",unit="integer"} 555
kube_node_status_allocatable{node="127.0.0.1",resource="storage",unit="byte"} 2e+09
kube_node_status_capacity{node="127.0.0.1",resource="cpu",unit="core"} 4.3
kube_node_status_capacity{node="127.0.0.1",resource="ephemeral_storage",unit="byte"} 4e+09
kube_node_status_capacity{node="127.0.0.1",resource="memory",unit="byte"} 2e+09
kube_node_status_capacity{node="127.0.0.1",resource="nvidia_com_gpu",unit="integer"} 4
kube_node_status_capacity{node="127.0.0.1",resource="pods",unit="integer"} 1000
kube_node_status_capacity{node="127.0.0.1",resource="storage",unit="byte"} 3e+09
"#,
            families: &[
                "kube_node_status_capacity",
                "kube_node_status_allocatable",
                "kube_node_spec_unschedulable",
                "kube_node_created",
            ],
        },
        Case {
            name: "conditions true",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.1"},
                "status": {"conditions": [
                    {"type": "NetworkUnavailable", "status": "True"},
                    {"type": "Ready", "status": "True"},
                    {"type": "CustomizedType", "status": "True"}
                ]}
            })]),
            want: r#"
kube_node_status_condition{condition="CustomizedType",node="127.0.0.1",status="false"} 0
kube_node_status_condition{condition="CustomizedType",node="127.0.0.1",status="true"} 1
kube_node_status_condition{condition="CustomizedType",node="127.0.0.1",status="unknown"} 0
kube_node_status_condition{condition="NetworkUnavailable",node="127.0.0.1",status="false"} 0
kube_node_status_condition{condition="NetworkUnavailable",node="127.0.0.1",status="true"} 1
kube_node_status_condition{condition="NetworkUnavailable",node="127.0.0.1",status="unknown"} 0
kube_node_status_condition{condition="Ready",node="127.0.0.1",status="false"} 0
kube_node_status_condition{condition="Ready",node="127.0.0.1",status="true"} 1
kube_node_status_condition{condition="Ready",node="127.0.0.1",status="unknown"} 0
"#,
            families: &["kube_node_status_condition"],
        },
        Case {
            name: "conditions unknown",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.2"},
                "status": {"conditions": [
                    {"type": "Ready", "status": "Unknown"}
                ]}
            })]),
            want: r#"
kube_node_status_condition{condition="Ready",node="127.0.0.2",status="false"} 0
kube_node_status_condition{condition="Ready",node="127.0.0.2",status="true"} 0
kube_node_status_condition{condition="Ready",node="127.0.0.2",status="unknown"} 1
"#,
            families: &["kube_node_status_condition"],
        },
        Case {
            name: "conditions false",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.3"},
                "status": {"conditions": [
                    {"type": "Ready", "status": "False"}
                ]}
            })]),
            want: r#"
kube_node_status_condition{condition="Ready",node="127.0.0.3",status="false"} 1
kube_node_status_condition{condition="Ready",node="127.0.0.3",status="true"} 0
kube_node_status_condition{condition="Ready",node="127.0.0.3",status="unknown"} 0
"#,
            families: &["kube_node_status_condition"],
        },
        Case {
            name: "taints",
            objects: nodes(vec![json!({
                "metadata": {"name": "127.0.0.1"},
                "spec": {"taints": [
                    {"key": "node.kubernetes.io/memory-pressure", "value": "true", "effect": "PreferNoSchedule"},
                    {"key": "Accelerated", "value": "gpu", "effect": "PreferNoSchedule"},
                    {"key": "Dedicated", "effect": "PreferNoSchedule"}
                ]}
            })]),
            want: r#"
kube_node_spec_taint{effect="PreferNoSchedule",key="Dedicated",node="127.0.0.1",value=""} 1
kube_node_spec_taint{effect="PreferNoSchedule",key="Accelerated",node="127.0.0.1",value="gpu"} 1
kube_node_spec_taint{effect="PreferNoSchedule",key="node.kubernetes.io/memory-pressure",node="127.0.0.1",value="true"} 1
"#,
            families: &["kube_node_spec_taint"],
        },
    ]);
}

#[test]
fn pod_store() {
    run(vec![
        Case {
            name: "pod info and created",
            objects: pods(vec![json!({
                "metadata": {"name": "pod1", "namespace": "ns1", "uid": "abc-123-xxx", "creationTimestamp": "2017-07-14T02:40:00Z",
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "rs-name", "controller": true}]},
                "spec": {"nodeName": "node1", "priorityClassName": "system-node-critical", "hostNetwork": true},
                "status": {"hostIP": "1.1.1.1", "podIP": "1.2.3.4", "phase": "Running"}
            })]),
            want: r#"
kube_pod_created{namespace="ns1",pod="pod1",uid="abc-123-xxx"} 1.5e+09
kube_pod_info{created_by_kind="ReplicaSet",created_by_name="rs-name",host_ip="1.1.1.1",namespace="ns1",node="node1",pod="pod1",pod_ip="1.2.3.4",priority_class="system-node-critical",host_network="true",uid="abc-123-xxx"} 1
"#,
            families: &["kube_pod_created", "kube_pod_info"],
        },
        Case {
            name: "no owner",
            objects: pods(vec![json!({
                "metadata": {"name": "pod1", "namespace": "ns1", "uid": "abc-123-xxx"},
                "spec": {},
                "status": {}
            })]),
            want: r#"
kube_pod_info{created_by_kind="<none>",created_by_name="<none>",host_ip="",namespace="ns1",node="",pod="pod1",pod_ip="",priority_class="",host_network="false",uid="abc-123-xxx"} 1
"#,
            families: &["kube_pod_info"],
        },
        Case {
            name: "phase",
            objects: pods(vec![
                json!({
                    "metadata": {"name": "pod1", "namespace": "ns1", "uid": "uid1"},
                    "status": {"phase": "Running"}
                }),
                json!({
                    "metadata": {"name": "pod2", "namespace": "ns2", "uid": "uid2"},
                    "status": {"phase": "Pending"}
                }),
            ]),
            want: r#"
kube_pod_status_phase{namespace="ns1",phase="Failed",pod="pod1",uid="uid1"} 0
kube_pod_status_phase{namespace="ns1",phase="Pending",pod="pod1",uid="uid1"} 0
kube_pod_status_phase{namespace="ns1",phase="Running",pod="pod1",uid="uid1"} 1
kube_pod_status_phase{namespace="ns1",phase="Succeeded",pod="pod1",uid="uid1"} 0
kube_pod_status_phase{namespace="ns1",phase="Unknown",pod="pod1",uid="uid1"} 0
kube_pod_status_phase{namespace="ns2",phase="Failed",pod="pod2",uid="uid2"} 0
kube_pod_status_phase{namespace="ns2",phase="Pending",pod="pod2",uid="uid2"} 1
kube_pod_status_phase{namespace="ns2",phase="Running",pod="pod2",uid="uid2"} 0
kube_pod_status_phase{namespace="ns2",phase="Succeeded",pod="pod2",uid="uid2"} 0
kube_pod_status_phase{namespace="ns2",phase="Unknown",pod="pod2",uid="uid2"} 0
"#,
            families: &["kube_pod_status_phase"],
        },
        Case {
            name: "ready and scheduled",
            objects: pods(vec![json!({
                "metadata": {"name": "pod1", "namespace": "ns1", "uid": "uid1"},
                "status": {"conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "PodScheduled", "status": "True"}
                ]}
            })]),
            want: r#"
kube_pod_status_ready{condition="false",namespace="ns1",pod="pod1",uid="uid1"} 1
kube_pod_status_ready{condition="true",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_status_ready{condition="unknown",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_status_scheduled{condition="false",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_status_scheduled{condition="true",namespace="ns1",pod="pod1",uid="uid1"} 1
kube_pod_status_scheduled{condition="unknown",namespace="ns1",pod="pod1",uid="uid1"} 0
"#,
            families: &["kube_pod_status_ready", "kube_pod_status_scheduled"],
        },
        Case {
            name: "container statuses",
            objects: pods(vec![json!({
                "metadata": {"name": "pod1", "namespace": "ns1", "uid": "uid1"},
                "status": {"containerStatuses": [
                    {"name": "container1", "restartCount": 0, "ready": true, "state": {"running": {}}},
                    {"name": "container2", "restartCount": 3, "ready": false, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
                ]}
            })]),
            want: r#"
kube_pod_container_status_restarts_total{container="container1",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_container_status_restarts_total{container="container2",namespace="ns1",pod="pod1",uid="uid1"} 3
kube_pod_container_status_waiting{container="container1",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_container_status_waiting{container="container2",namespace="ns1",pod="pod1",uid="uid1"} 1
kube_pod_container_status_waiting_reason{container="container2",namespace="ns1",pod="pod1",reason="CrashLoopBackOff",uid="uid1"} 1
kube_pod_container_status_running{container="container1",namespace="ns1",pod="pod1",uid="uid1"} 1
kube_pod_container_status_running{container="container2",namespace="ns1",pod="pod1",uid="uid1"} 0
kube_pod_container_status_ready{container="container1",namespace="ns1",pod="pod1",uid="uid1"} 1
kube_pod_container_status_ready{container="container2",namespace="ns1",pod="pod1",uid="uid1"} 0
"#,
            families: &[
                "kube_pod_container_status_restarts_total",
                "kube_pod_container_status_waiting",
                "kube_pod_container_status_waiting_reason",
                "kube_pod_container_status_running",
                "kube_pod_container_status_ready",
            ],
        },
        Case {
            name: "requests and limits",
            objects: pods(vec![json!({
                "metadata": {"name": "pod1", "namespace": "ns1", "uid": "uid1"},
                "spec": {"nodeName": "node1", "containers": [
                    {"name": "pod1_con1", "resources": {
                        "requests": {"cpu": "200m", "memory": "100M", "ephemeral-storage": "300M", "storage": "400M", "nvidia.com/gpu": "1"},
                        "limits": {"cpu": "200m", "memory": "100M", "ephemeral-storage": "300M", "storage": "400M", "nvidia.com/gpu": "1"}
                    }},
                    {"name": "pod1_con2", "resources": {
                        "requests": {"cpu": "300m", "memory": "200M"},
                        "limits": {"cpu": "300m", "memory": "200M"}
                    }}
                ]}
            })]),
            want: r#"
kube_pod_container_resource_limits{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="cpu",uid="uid1",unit="core"} 0.2
kube_pod_container_resource_limits{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="ephemeral_storage",uid="uid1",unit="byte"} 3e+08
kube_pod_container_resource_limits{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="memory",uid="uid1",unit="byte"} 1e+08
kube_pod_container_resource_limits{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="nvidia_com_gpu",uid="uid1",unit="integer"} 1
kube_pod_container_resource_limits{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="storage",uid="uid1",unit="byte"} 4e+08
kube_pod_container_resource_limits{container="pod1_con2",namespace="ns1",node="node1",pod="pod1",resource="cpu",uid="uid1",unit="core"} 0.3
kube_pod_container_resource_limits{container="pod1_con2",namespace="ns1",node="node1",pod="pod1",resource="memory",uid="uid1",unit="byte"} 2e+08
kube_pod_container_resource_requests{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="cpu",uid="uid1",unit="core"} 0.2
kube_pod_container_resource_requests{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="ephemeral_storage",uid="uid1",unit="byte"} 3e+08
kube_pod_container_resource_requests{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="memory",uid="uid1",unit="byte"} 1e+08
kube_pod_container_resource_requests{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="nvidia_com_gpu",uid="uid1",unit="integer"} 1
kube_pod_container_resource_requests{container="pod1_con1",namespace="ns1",node="node1",pod="pod1",resource="storage",uid="uid1",unit="byte"} 4e+08
kube_pod_container_resource_requests{container="pod1_con2",namespace="ns1",node="node1",pod="pod1",resource="cpu",uid="uid1",unit="core"} 0.3
kube_pod_container_resource_requests{container="pod1_con2",namespace="ns1",node="node1",pod="pod1",resource="memory",uid="uid1",unit="byte"} 2e+08
"#,
            families: &[
                "kube_pod_container_resource_requests",
                "kube_pod_container_resource_limits",
            ],
        },
    ]);
}

#[test]
fn workload_stores() {
    run(vec![
        Case {
            name: "namespace phases",
            objects: Objects {
                namespaces: vec![
                    json!({"metadata": {"name": "nsActiveTest"}, "status": {"phase": "Active"}}),
                    json!({"metadata": {"name": "nsTerminateTest"}, "status": {"phase": "Terminating"}}),
                ],
                ..Objects::default()
            },
            want: r#"
kube_namespace_status_phase{namespace="nsActiveTest",phase="Active"} 1
kube_namespace_status_phase{namespace="nsActiveTest",phase="Terminating"} 0
kube_namespace_status_phase{namespace="nsTerminateTest",phase="Active"} 0
kube_namespace_status_phase{namespace="nsTerminateTest",phase="Terminating"} 1
"#,
            families: &["kube_namespace_status_phase"],
        },
        Case {
            name: "deployment",
            objects: Objects {
                deployments: vec![json!({
                    "metadata": {"name": "depl1", "namespace": "ns1", "generation": 21},
                    "spec": {"replicas": 200},
                    "status": {"replicas": 15, "availableReplicas": 10, "unavailableReplicas": 5, "updatedReplicas": 2, "readyReplicas": 10, "observedGeneration": 111,
                        "conditions": [{"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}]}
                })],
                ..Objects::default()
            },
            want: r#"
kube_deployment_metadata_generation{deployment="depl1",namespace="ns1"} 21
kube_deployment_spec_replicas{deployment="depl1",namespace="ns1"} 200
kube_deployment_status_observed_generation{deployment="depl1",namespace="ns1"} 111
kube_deployment_status_replicas_available{deployment="depl1",namespace="ns1"} 10
kube_deployment_status_replicas_unavailable{deployment="depl1",namespace="ns1"} 5
kube_deployment_status_replicas_updated{deployment="depl1",namespace="ns1"} 2
kube_deployment_status_replicas{deployment="depl1",namespace="ns1"} 15
kube_deployment_status_replicas_ready{deployment="depl1",namespace="ns1"} 10
kube_deployment_status_condition{condition="Available",deployment="depl1",namespace="ns1",status="false"} 0
kube_deployment_status_condition{condition="Available",deployment="depl1",namespace="ns1",status="true"} 1
kube_deployment_status_condition{condition="Available",deployment="depl1",namespace="ns1",status="unknown"} 0
kube_deployment_status_condition{condition="Progressing",deployment="depl1",namespace="ns1",status="false"} 0
kube_deployment_status_condition{condition="Progressing",deployment="depl1",namespace="ns1",status="true"} 1
kube_deployment_status_condition{condition="Progressing",deployment="depl1",namespace="ns1",status="unknown"} 0
"#,
            families: &[
                "kube_deployment_metadata_generation",
                "kube_deployment_spec_replicas",
                "kube_deployment_status_observed_generation",
                "kube_deployment_status_replicas_available",
                "kube_deployment_status_replicas_unavailable",
                "kube_deployment_status_replicas_updated",
                "kube_deployment_status_replicas",
                "kube_deployment_status_replicas_ready",
                "kube_deployment_status_condition",
            ],
        },
        Case {
            name: "succeeded job",
            objects: Objects {
                jobs: vec![json!({
                    "metadata": {"name": "SuccessfulJob1", "namespace": "ns1", "generation": 1},
                    "spec": {"parallelism": 1, "completions": 1},
                    "status": {"active": 0, "failed": 0, "succeeded": 1,
                        "startTime": "2017-07-14T02:40:00Z", "completionTime": "2017-07-14T02:46:40Z",
                        "conditions": [{"type": "Complete", "status": "True"}]}
                })],
                ..Objects::default()
            },
            want: r#"
kube_job_complete{condition="false",job_name="SuccessfulJob1",namespace="ns1"} 0
kube_job_complete{condition="true",job_name="SuccessfulJob1",namespace="ns1"} 1
kube_job_complete{condition="unknown",job_name="SuccessfulJob1",namespace="ns1"} 0
kube_job_spec_completions{job_name="SuccessfulJob1",namespace="ns1"} 1
kube_job_spec_parallelism{job_name="SuccessfulJob1",namespace="ns1"} 1
kube_job_status_active{job_name="SuccessfulJob1",namespace="ns1"} 0
kube_job_status_completion_time{job_name="SuccessfulJob1",namespace="ns1"} 1.5000004e+09
kube_job_status_failed{job_name="SuccessfulJob1",namespace="ns1"} 0
kube_job_status_start_time{job_name="SuccessfulJob1",namespace="ns1"} 1.5e+09
kube_job_status_succeeded{job_name="SuccessfulJob1",namespace="ns1"} 1
"#,
            families: &[
                "kube_job_complete",
                "kube_job_spec_completions",
                "kube_job_spec_parallelism",
                "kube_job_status_active",
                "kube_job_status_completion_time",
                "kube_job_status_failed",
                "kube_job_status_start_time",
                "kube_job_status_succeeded",
            ],
        },
        Case {
            name: "replicaset",
            objects: Objects {
                replicasets: vec![json!({
                    "metadata": {"name": "rs1", "namespace": "ns1", "generation": 21},
                    "spec": {"replicas": 5},
                    "status": {"replicas": 5, "fullyLabeledReplicas": 10, "readyReplicas": 5, "observedGeneration": 1}
                })],
                ..Objects::default()
            },
            want: r#"
kube_replicaset_metadata_generation{namespace="ns1",replicaset="rs1"} 21
kube_replicaset_spec_replicas{namespace="ns1",replicaset="rs1"} 5
kube_replicaset_status_fully_labeled_replicas{namespace="ns1",replicaset="rs1"} 10
kube_replicaset_status_observed_generation{namespace="ns1",replicaset="rs1"} 1
kube_replicaset_status_ready_replicas{namespace="ns1",replicaset="rs1"} 5
kube_replicaset_status_replicas{namespace="ns1",replicaset="rs1"} 5
"#,
            families: &[
                "kube_replicaset_metadata_generation",
                "kube_replicaset_spec_replicas",
                "kube_replicaset_status_fully_labeled_replicas",
                "kube_replicaset_status_observed_generation",
                "kube_replicaset_status_ready_replicas",
                "kube_replicaset_status_replicas",
            ],
        },
        Case {
            name: "statefulset",
            objects: Objects {
                statefulsets: vec![json!({
                    "metadata": {"name": "statefulset1", "namespace": "ns1", "generation": 3},
                    "spec": {"replicas": 3, "serviceName": "statefulset1service"},
                    "status": {"observedGeneration": 1, "replicas": 2, "currentReplicas": 2, "readyReplicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
                })],
                ..Objects::default()
            },
            want: r#"
kube_statefulset_metadata_generation{namespace="ns1",statefulset="statefulset1"} 3
kube_statefulset_replicas{namespace="ns1",statefulset="statefulset1"} 3
kube_statefulset_status_observed_generation{namespace="ns1",statefulset="statefulset1"} 1
kube_statefulset_status_replicas{namespace="ns1",statefulset="statefulset1"} 2
kube_statefulset_status_replicas_available{namespace="ns1",statefulset="statefulset1"} 1
kube_statefulset_status_replicas_current{namespace="ns1",statefulset="statefulset1"} 2
kube_statefulset_status_replicas_ready{namespace="ns1",statefulset="statefulset1"} 1
kube_statefulset_status_replicas_updated{namespace="ns1",statefulset="statefulset1"} 1
"#,
            families: &[
                "kube_statefulset_metadata_generation",
                "kube_statefulset_replicas",
                "kube_statefulset_status_observed_generation",
                "kube_statefulset_status_replicas",
                "kube_statefulset_status_replicas_available",
                "kube_statefulset_status_replicas_current",
                "kube_statefulset_status_replicas_ready",
                "kube_statefulset_status_replicas_updated",
            ],
        },
        Case {
            name: "failed job",
            objects: Objects {
                jobs: vec![json!({
                    "metadata": {"name": "FailedJob1", "namespace": "ns1"},
                    "spec": {"parallelism": 1, "completions": 1},
                    "status": {"active": 0, "failed": 1, "succeeded": 0,
                        "conditions": [{"type": "Failed", "status": "True"}]}
                })],
                ..Objects::default()
            },
            want: r#"
kube_job_failed{condition="false",job_name="FailedJob1",namespace="ns1"} 0
kube_job_failed{condition="true",job_name="FailedJob1",namespace="ns1"} 1
kube_job_failed{condition="unknown",job_name="FailedJob1",namespace="ns1"} 0
kube_job_status_failed{job_name="FailedJob1",namespace="ns1"} 1
"#,
            families: &[
                "kube_job_failed",
                "kube_job_status_failed",
                "kube_job_complete",
            ],
        },
        Case {
            name: "daemonset",
            objects: Objects {
                daemonsets: vec![json!({
                    "metadata": {"name": "ds1", "namespace": "ns1", "generation": 21},
                    "status": {"currentNumberScheduled": 15, "numberMisscheduled": 10, "desiredNumberScheduled": 5, "numberAvailable": 0, "numberReady": 5, "numberUnavailable": 0, "updatedNumberScheduled": 0, "observedGeneration": 2}
                })],
                ..Objects::default()
            },
            want: r#"
kube_daemonset_metadata_generation{daemonset="ds1",namespace="ns1"} 21
kube_daemonset_status_current_number_scheduled{daemonset="ds1",namespace="ns1"} 15
kube_daemonset_status_desired_number_scheduled{daemonset="ds1",namespace="ns1"} 5
kube_daemonset_status_number_available{daemonset="ds1",namespace="ns1"} 0
kube_daemonset_status_number_misscheduled{daemonset="ds1",namespace="ns1"} 10
kube_daemonset_status_number_ready{daemonset="ds1",namespace="ns1"} 5
kube_daemonset_status_number_unavailable{daemonset="ds1",namespace="ns1"} 0
kube_daemonset_status_observed_generation{daemonset="ds1",namespace="ns1"} 2
kube_daemonset_status_updated_number_scheduled{daemonset="ds1",namespace="ns1"} 0
"#,
            families: &[
                "kube_daemonset_metadata_generation",
                "kube_daemonset_status_current_number_scheduled",
                "kube_daemonset_status_desired_number_scheduled",
                "kube_daemonset_status_number_available",
                "kube_daemonset_status_number_misscheduled",
                "kube_daemonset_status_number_ready",
                "kube_daemonset_status_number_unavailable",
                "kube_daemonset_status_observed_generation",
                "kube_daemonset_status_updated_number_scheduled",
            ],
        },
        Case {
            name: "pdb",
            objects: Objects {
                poddisruptionbudgets: vec![json!({
                    "metadata": {"name": "pdb1", "namespace": "ns1", "generation": 21},
                    "status": {"currentHealthy": 12, "desiredHealthy": 10, "disruptionsAllowed": 2, "expectedPods": 15, "observedGeneration": 111}
                })],
                ..Objects::default()
            },
            want: r#"
kube_poddisruptionbudget_status_current_healthy{namespace="ns1",poddisruptionbudget="pdb1"} 12
kube_poddisruptionbudget_status_desired_healthy{namespace="ns1",poddisruptionbudget="pdb1"} 10
kube_poddisruptionbudget_status_pod_disruptions_allowed{namespace="ns1",poddisruptionbudget="pdb1"} 2
kube_poddisruptionbudget_status_expected_pods{namespace="ns1",poddisruptionbudget="pdb1"} 15
kube_poddisruptionbudget_status_observed_generation{namespace="ns1",poddisruptionbudget="pdb1"} 111
"#,
            families: &[
                "kube_poddisruptionbudget_status_current_healthy",
                "kube_poddisruptionbudget_status_desired_healthy",
                "kube_poddisruptionbudget_status_pod_disruptions_allowed",
                "kube_poddisruptionbudget_status_expected_pods",
                "kube_poddisruptionbudget_status_observed_generation",
            ],
        },
        Case {
            name: "resourcequota",
            objects: Objects {
                resourcequotas: vec![json!({
                    "metadata": {"name": "quotaTest", "namespace": "testNS"},
                    "status": {
                        "hard": {"cpu": "4.3", "memory": "2.1G", "storage": "10G", "pods": "9", "requests.nvidia.com/gpu": "4"},
                        "used": {"cpu": "2.1", "memory": "500M", "storage": "9G", "pods": "8", "requests.nvidia.com/gpu": "3"}
                    }
                })],
                ..Objects::default()
            },
            want: r#"
kube_resourcequota{namespace="testNS",resource="cpu",resourcequota="quotaTest",type="hard"} 4.3
kube_resourcequota{namespace="testNS",resource="cpu",resourcequota="quotaTest",type="used"} 2.1
kube_resourcequota{namespace="testNS",resource="memory",resourcequota="quotaTest",type="hard"} 2.1e+09
kube_resourcequota{namespace="testNS",resource="memory",resourcequota="quotaTest",type="used"} 5e+08
kube_resourcequota{namespace="testNS",resource="pods",resourcequota="quotaTest",type="hard"} 9
kube_resourcequota{namespace="testNS",resource="pods",resourcequota="quotaTest",type="used"} 8
kube_resourcequota{namespace="testNS",resource="requests.nvidia.com/gpu",resourcequota="quotaTest",type="hard"} 4
kube_resourcequota{namespace="testNS",resource="requests.nvidia.com/gpu",resourcequota="quotaTest",type="used"} 3
kube_resourcequota{namespace="testNS",resource="storage",resourcequota="quotaTest",type="hard"} 1e+10
kube_resourcequota{namespace="testNS",resource="storage",resourcequota="quotaTest",type="used"} 9e+09
"#,
            families: &["kube_resourcequota"],
        },
    ]);
}

#[test]
fn sanitising_and_units() {
    let cases = [
        (
            "nvidia.com/gpu",
            json!("8"),
            Some(("nvidia_com_gpu", "integer", 8.0)),
        ),
        (
            "hugepages-2Mi",
            json!("4Mi"),
            Some(("hugepages_2Mi", "byte", 4_194_304.0)),
        ),
        ("cpu", json!("1500m"), Some(("cpu", "core", 1.5))),
        ("kubernetes.io/something", json!("1"), None),
        ("cpu", json!("not a quantity"), None),
    ];
    for (resource, value, want) in cases {
        let got = resource_sample(resource, &value);
        let got = got.as_ref().map(|(r, u, v)| (r.as_str(), *u, *v));
        assert_eq!(got, want, "{resource}");
    }
}

#[test]
fn malformed_objects_do_not_panic() {
    let junk = vec![
        json!(null),
        json!(42),
        json!({"status": {"conditions": "x", "capacity": [1]}, "spec": {"containers": {}}}),
    ];
    let objects = Objects {
        nodes: junk.clone(),
        pods: junk.clone(),
        namespaces: junk.clone(),
        deployments: junk.clone(),
        replicasets: junk.clone(),
        statefulsets: junk.clone(),
        daemonsets: junk.clone(),
        jobs: junk.clone(),
        poddisruptionbudgets: junk.clone(),
        resourcequotas: junk,
    };
    assert!(render(&objects).is_ok());
}
