//! `tessera diagnose` on the embedded platform: a healthy lab has nothing to report; after a
//! GPU falls off the bus, a pod asks for more GPUs than the lab has and a node goes NotReady,
//! each runbook names what happened and its next steps, and `--exit-code` fails.

use std::process::Command;

use crate::support::{Cluster, outcome};

const V: &str = "1.33";

fn tessera(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .output()
            .expect("run tessera"),
    )
}

fn diagnose(cluster: &Cluster, args: &[&str]) -> (bool, String) {
    let mut all = vec!["diagnose", "--exit-code"];
    all.extend(args);
    let (ok, out, err) = tessera(cluster, &all);
    assert!(err.is_empty() || ok || !out.is_empty(), "{err}");
    (ok, out)
}

const HUGE: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: huge}\nspec:\n  tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n  containers:\n  - name: train\n    image: trainer:1\n    resources: {limits: {nvidia.com/gpu: \"64\"}}\n";

#[test]
fn diagnose_runbooks_name_lost_gpus_pending_pods_and_notready_nodes() {
    let cluster = Cluster::start_with_args(&["--node-monitor-grace-period", "3"]);

    // A healthy lab.
    for (runbook, line) in [
        ("node-notready", "[ok] cluster: all 8 node(s) are Ready"),
        ("device-loss", "[ok] cluster: no lost GPU on 8 node(s)"),
        ("pending", "[ok] cluster: no pod is pending"),
        (
            "operator",
            "[info] gpu-operator, nvidia-dra-driver-gpu: no operator components found",
        ),
    ] {
        let (ok, out) = diagnose(&cluster, &[runbook]);
        assert!(ok, "{runbook} finds no problem in a healthy lab:\n{out}");
        assert!(out.contains(line), "{runbook}:\n{out}");
        assert!(!out.contains("[PROBLEM]"), "{runbook}:\n{out}");
    }

    // One L40S (time-sliced ×4) falls off the bus.
    let (ok, _, err) = tessera(
        &cluster,
        &["fault", "xid", "l40s-1", "--gpu", "1", "--xid", "79"],
    );
    assert!(ok, "{err}");
    cluster.wait_for_node("l40s-1", r#"{.status.allocatable.nvidia\.com/gpu}"#, "12");
    let (ok, out) = diagnose(&cluster, &["device-loss", "l40s-1"]);
    assert!(!ok, "a lost GPU fails --exit-code:\n{out}");
    for line in [
        "[PROBLEM] GPU 1 of l40s-1: reported XID 79 (GPU has fallen off the bus): out of service",
        "[PROBLEM] node l40s-1: nvidia.com/gpu: allocatable 12 of capacity 16: the device plugin reports 4 device(s) unhealthy",
        "[PROBLEM] node l40s-1: still schedulable",
        "kubectl cordon l40s-1",
        "XID 79 on l40s-1: drain the node and reboot it",
        "tessera fault clear l40s-1",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }

    // A pod no node can hold waits; the runbook gives the scheduler's message and the loss.
    cluster.ok_stdin(V, &["apply", "-f", "-"], HUGE);
    cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=huge,reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| out.contains("nodes are available"),
    );
    let (ok, out) = diagnose(&cluster, &["pending", "default/huge"]);
    assert!(!ok, "{out}");
    for line in [
        "Checked: 1 pending pod(s)",
        "[PROBLEM] pod default/huge: default-scheduler (",
        "0/8 nodes are available",
        "[PROBLEM] pod default/huge: fits 0/8 nodes as the cluster is now",
        "[PROBLEM] pod default/huge: nvidia.com/gpu allocatable is below capacity on l40s-1 (4)",
        "tessera explain pod default/huge",
        "tessera diagnose device-loss",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }

    // A node goes NotReady; the runbook says since when and what happens to its pods.
    let (ok, _, err) = tessera(
        &cluster,
        &["fault", "node", "cpu-2", "--state", "not-ready"],
    );
    assert!(ok, "{err}");
    cluster.wait_for_node(
        "cpu-2",
        r#"{.status.conditions[?(@.type=="Ready")].status}"#,
        "False",
    );
    let (ok, out) = diagnose(&cluster, &["node-notready"]);
    assert!(!ok, "{out}");
    assert!(out.contains("Checked: 8 node(s), 1 not Ready"), "{out}");
    assert!(out.contains("[PROBLEM] node cpu-2: Ready=False"), "{out}");
    assert!(
        out.contains("The kubelet on cpu-2 is up and says why"),
        "{out}"
    );
    assert!(!out.contains("node cpu-1"), "only NotReady nodes:\n{out}");

    // Recovery: the runbooks go quiet again.
    let (ok, _, err) = tessera(&cluster, &["fault", "clear", "cpu-2"]);
    assert!(ok, "{err}");
    let (ok, _, err) = tessera(&cluster, &["fault", "clear", "l40s-1"]);
    assert!(ok, "{err}");
    cluster.wait_for_node(
        "cpu-2",
        r#"{.status.conditions[?(@.type=="Ready")].status}"#,
        "True",
    );
    let (ok, out) = diagnose(&cluster, &["node-notready"]);
    assert!(ok, "{out}");
    let (ok, out) = diagnose(&cluster, &["device-loss", "l40s-1"]);
    assert!(ok, "{out}");
}
