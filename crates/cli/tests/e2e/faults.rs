//! `tessera fault` against the default lab: a fatal XID turns a GPU unhealthy (device-plugin
//! allocatable drops, the DRA device is tainted and the pod using it fails), an application
//! XID does not; a NotReady node is tainted and pods leave it by their tolerations; an
//! unreachable node turns Unknown after the grace period; and every fault clears.

use std::process::Command;

use crate::support::{Cluster, outcome};

const V: &str = "1.33";

fn fault(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("fault")
            .args(args)
            .args(["--kubeconfig", &kubeconfig])
            .output()
            .expect("tessera fault"),
    )
}

fn jsonpath(cluster: &Cluster, args: &[&str], path: &str) -> String {
    let mut all = args.to_vec();
    let template = format!("jsonpath={path}");
    all.extend(["-o", &template]);
    cluster.ok(V, &all)
}

#[test]
fn gpu_faults_turn_devices_unhealthy_and_fail_their_pods() {
    let cluster = Cluster::start_with_args(&["--node-monitor-grace-period", "3"]);

    // Device plugin: one L40S of four time-sliced ×4 fails, allocatable drops by four.
    let (ok, out, err) = fault(&cluster, &["xid", "l40s-1", "--gpu", "2", "--xid", "79"]);
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        "XID 79 (GPU has fallen off the bus) on GPU 2 of l40s-1: the GPU is now unhealthy"
    );
    cluster.wait_for_node(
        "l40s-1",
        r#"{.status.capacity.nvidia\.com/gpu} {.status.allocatable.nvidia\.com/gpu}"#,
        "16 12",
    );
    let events = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=l40s-1,reason=GPUUnhealthy",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| !out.is_empty(),
    );
    assert!(
        events.contains("XID 79: GPU has fallen off the bus"),
        "{events}"
    );

    // DRA: a pod holding a GPU through a claim fails when that GPU fails.
    let pod = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: one}\nspec:\n  devices:\n    requests:\n    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: trainer, annotations: {sim.tessera.dev/duration: 1h}}\nspec:\n  nodeName: h100-1\n  restartPolicy: Never\n  resourceClaims: [{name: gpu, resourceClaimName: one}]\n  containers:\n  - {name: train, image: trainer:1, resources: {claims: [{name: gpu}]}}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], pod);
    cluster.wait_for(
        V,
        &["get", "pod", "trainer", "-o", "jsonpath={.status.phase}"],
        |out| out == "Running",
    );
    let device = jsonpath(
        &cluster,
        &["get", "resourceclaim", "one"],
        "{.status.allocation.devices.results[0].device}",
    );
    let index = device.trim_start_matches("gpu-").to_string();
    // An application XID leaves the GPU healthy.
    let (ok, out, _) = fault(&cluster, &["xid", "h100-1", "--gpu", &index, "--xid", "13"]);
    assert!(
        ok && out.contains("an application error, the GPU stays healthy"),
        "{out}"
    );
    let (ok, _, err) = fault(&cluster, &["xid", "h100-1", "--gpu", &index, "--xid", "48"]);
    assert!(ok, "{err}");
    let failed = cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "trainer",
            "-o",
            "jsonpath={.status.phase} {.status.containerStatuses[0].state.terminated.message}",
        ],
        |out| out.starts_with("Failed"),
    );
    assert!(failed.contains("XID 48: Double Bit ECC Error"), "{failed}");
    let logs = cluster.ok(V, &["logs", "trainer"]);
    assert!(
        logs.contains("CUDA error: unspecified launch failure"),
        "{logs}"
    );
    let taints = cluster.wait_for(
        V,
        &[
            "get",
            "resourceslices",
            "--field-selector",
            "spec.nodeName=h100-1",
            "-o",
            &format!("jsonpath={{.items[0].spec.devices[?(@.name==\"{device}\")].taints[0]}}"),
        ],
        |out| !out.is_empty(),
    );
    assert!(
        taints.contains(r#""key":"gpu.nvidia.com/xid""#) && taints.contains(r#""value":"48""#),
        "{taints}"
    );

    // Recovery: the taint goes, the allocatable returns.
    let (ok, out, _) = fault(&cluster, &["clear", "h100-1"]);
    assert!(ok && out.contains("cleared 1 fault(s) on h100-1"), "{out}");
    cluster.wait_for(
        V,
        &[
            "get",
            "resourceslices",
            "--field-selector",
            "spec.nodeName=h100-1",
            "-o",
            "jsonpath={.items[0].spec.devices[*].taints}",
        ],
        |out| out.is_empty(),
    );
    let (ok, _, _) = fault(&cluster, &["clear", "l40s-1", "--gpu", "2"]);
    assert!(ok);
    cluster.wait_for_node("l40s-1", r#"{.status.allocatable.nvidia\.com/gpu}"#, "16");

    // Bad input is refused before anything is written.
    let (ok, _, err) = fault(&cluster, &["xid", "h100-1", "--gpu", "9", "--xid", "79"]);
    assert!(
        !ok && err.contains("--gpu 9: node h100-1 has 8 GPUs (0-7)"),
        "{err}"
    );
    let (ok, _, err) = fault(&cluster, &["xid", "cpu-1", "--gpu", "0", "--xid", "79"]);
    assert!(
        !ok && err.contains("node cpu-1 has no NVIDIA GPUs"),
        "{err}"
    );
    let (ok, _, err) = fault(&cluster, &["nvlink", "h999"]);
    assert!(!ok && err.contains("node \"h999\" not found"), "{err}");
}

#[test]
fn failed_nodes_are_tainted_and_pods_leave_by_their_tolerations() {
    let cluster = Cluster::start_with_args(&["--node-monitor-grace-period", "3"]);
    let pods = "apiVersion: v1\nkind: Pod\nmetadata: {name: patient}\nspec:\n  nodeName: cpu-1\n  containers: [{name: app, image: app:1}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: hasty}\nspec:\n  nodeName: cpu-1\n  tolerations: [{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 1}]\n  containers: [{name: app, image: app:1}]\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], pods);
    // DefaultTolerationSeconds gave the plain pod five minutes on a failed node.
    let tolerations = jsonpath(
        &cluster,
        &["get", "pod", "patient"],
        "{.spec.tolerations[*].key}/{.spec.tolerations[*].tolerationSeconds}",
    );
    assert_eq!(
        tolerations,
        "node.kubernetes.io/not-ready node.kubernetes.io/unreachable/300 300"
    );
    for pod in ["patient", "hasty"] {
        cluster.wait_for(
            V,
            &["get", "pod", pod, "-o", "jsonpath={.status.phase}"],
            |out| out == "Running",
        );
    }

    let (ok, _, err) = fault(&cluster, &["node", "cpu-1", "--state", "not-ready"]);
    assert!(ok, "{err}");
    let taints = cluster.wait_for(
        V,
        &[
            "get",
            "node",
            "cpu-1",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.spec.taints[*].key}",
        ],
        |out| out.starts_with("False") && out.contains("not-ready"),
    );
    assert_eq!(
        taints,
        "False node.kubernetes.io/not-ready node.kubernetes.io/not-ready"
    );
    // The pod tolerating one second is evicted; the one tolerating 300 s stays.
    let events = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=TaintManagerEviction",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(events, "Marking for deletion Pod default/hasty");
    cluster.wait_for(V, &["get", "pods", "-o", "name"], |out| {
        out.trim() == "pod/patient"
    });

    // Unreachable: the Lease stops; after the grace period the node is Unknown and tainted.
    let (ok, _, err) = fault(&cluster, &["node", "cpu-2", "--state", "unreachable"]);
    assert!(ok, "{err}");
    // The Lease is renewed every 10 s: Unknown comes 3 to 13 s after the fault, later under load.
    let unknown = cluster.wait_for_within(
        V,
        &["get", "node", "cpu-2", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.conditions[?(@.type==\"Ready\")].message} {.spec.taints[*].key}"],
        std::time::Duration::from_secs(60),
        |out| out.starts_with("Unknown") && out.contains("unreachable"),
    );
    assert!(
        unknown.contains("Kubelet stopped posting node status."),
        "{unknown}"
    );

    // Recovery clears conditions and taints.
    for node in ["cpu-1", "cpu-2"] {
        let (ok, _, err) = fault(&cluster, &["clear", node]);
        assert!(ok, "{err}");
    }
    for node in ["cpu-1", "cpu-2"] {
        cluster.wait_for_within(
            V,
            &[
                "get",
                "node",
                node,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}|{.spec.taints}",
            ],
            std::time::Duration::from_secs(60),
            |out| out == "True|",
        );
    }
}
