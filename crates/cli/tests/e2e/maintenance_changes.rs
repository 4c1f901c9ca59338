//! Maintenance plans that change the nodes themselves, applied with kubectl and run by the
//! maintenance controller against the lab's twins: a node rotation of the cpu pool (each node
//! replaced by a new one, validated, drained under a PodDisruptionBudget and removed; the pods
//! of the removed nodes collected by PodGC) and a MIG repartition of the h200 pool (GFD's
//! labels, the MIG manager's state label and the DRA ResourceSlices follow the new layout; a
//! layout the GPU cannot hold, annotated by hand, is refused in the state label); both survive
//! a restart of the platform.

use std::time::Duration;

use crate::support::Cluster;

const KUBECTL: &str = "1.33";

/// Beside the maintenance tests' two web pods (moved to the cpu pool), a budget keeping one
/// available, and a DaemonSet whose pods stay on the nodes until they are gone.
const BUDGET_AND_AGENT: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata:
      labels: {app: agent}
      annotations: {sim.tessera.dev/duration: 1h}
    spec:
      nodeSelector: {tessera.dev/pool: cpu}
      containers: [{name: agent, image: agent:1}]
";

const ROTATE_CPU: &str = "apiVersion: tessera.dev/v1alpha1
kind: MaintenancePlan
metadata: {name: rotate-cpu}
spec:
  nodeSelector: {tessera.dev/pool: cpu}
  nodeRotation: {}
  canary: 1
  policy: {maxParallelUpgrades: 1, maxUnavailable: 1}
";

const MIG_3G: &str = "apiVersion: tessera.dev/v1alpha1
kind: MaintenancePlan
metadata: {name: mig-3g}
spec:
  nodeSelector: {tessera.dev/pool: h200}
  migRepartition: {layout: all-3g.71gb}
  canary: 1
  policy: {maxParallelUpgrades: 1, maxUnavailable: 1}
";

fn jsonpath(cluster: &Cluster, args: &[&str], path: &str) -> String {
    let template = format!("jsonpath={path}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", &template]);
    cluster.ok(KUBECTL, &all)
}

fn wait_succeeded(cluster: &Cluster, plan: &str) {
    cluster.wait_for_within(
        KUBECTL,
        &[
            "get",
            "maintenanceplan",
            plan,
            "-o",
            "jsonpath={.status.phase}",
        ],
        Duration::from_secs(180),
        |phase| phase == "Succeeded",
    );
}

fn pool_nodes(cluster: &Cluster, pool: &str) -> String {
    let selector = format!("tessera.dev/pool={pool}");
    jsonpath(
        cluster,
        &["get", "nodes", "-l", &selector],
        "{.items[*].metadata.name}",
    )
}

/// The MIG devices the node's ResourceSlices offer and the pool generation they carry.
fn slice_devices(cluster: &Cluster, node: &str) -> (Vec<String>, String) {
    let names = jsonpath(
        cluster,
        &["get", "resourceslices"],
        &format!(
            "{{range .items[?(@.spec.nodeName==\"{node}\")]}}{{range .spec.devices[*]}}{{.name}} {{end}}{{end}}"
        ),
    );
    let generation = jsonpath(
        cluster,
        &["get", "resourceslices"],
        &format!("{{.items[?(@.spec.nodeName==\"{node}\")].spec.pool.generation}}"),
    );
    (
        names.split_whitespace().map(str::to_string).collect(),
        generation,
    )
}

#[test]
fn maintain_rotates_nodes_and_repartitions_mig_across_restarts() {
    let mut cluster = Cluster::start();
    let web = crate::maintenance::WEB.replace("tessera.dev/pool: h100", "tessera.dev/pool: cpu");
    let work = format!("{web}---\n{BUDGET_AND_AGENT}");
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], &work);
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |ready| ready == "2",
    );
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "daemonset",
            "agent",
            "-o",
            "jsonpath={.status.numberReady}",
        ],
        |ready| ready == "2",
    );
    let (before, _) = slice_devices(&cluster, "h200-1");
    assert_eq!(before.len(), 56, "{before:?}");

    // Node rotation: a replacement per node, the old one drained and removed.
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], ROTATE_CPU);
    wait_succeeded(&cluster, "rotate-cpu");
    assert_eq!(pool_nodes(&cluster, "cpu"), "cpu-1-r cpu-2-r");
    for node in ["cpu-1-r", "cpu-2-r"] {
        let ready = jsonpath(
            &cluster,
            &["get", "node", node],
            "{.status.conditions[?(@.type==\"Ready\")].status}",
        );
        assert_eq!(ready, "True", "{node}");
        // The rotation is over: the replacement no longer stands in for another node.
        let replaces = jsonpath(
            &cluster,
            &["get", "node", node],
            "{.metadata.annotations.maintenance\\.tessera\\.dev/replaces}",
        );
        assert_eq!(replaces, "", "{node}");
    }
    // The web pods run on the replacements; the budget held throughout.
    cluster.wait_for(
        KUBECTL,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        |nodes| {
            let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
            nodes.sort_unstable();
            nodes == ["cpu-1-r", "cpu-2-r"]
        },
    );
    let (ok, status, err) = crate::support::outcome(
        std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["maintain", "status", "rotate-cpu", "--kubeconfig"])
            .arg(cluster.kubeconfig())
            .output()
            .expect("run tessera maintain status"),
    );
    assert!(ok, "{err}");
    assert!(status.contains("  canary cpu-1: removed\n"), "{status}");
    // PodGC collects the DaemonSet pods of the removed nodes (after its 40 s quarantine); the
    // DaemonSet runs on the replacements.
    cluster.wait_for_within(
        KUBECTL,
        &[
            "get",
            "pods",
            "-l",
            "app=agent",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        Duration::from_secs(120),
        |nodes| {
            let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
            nodes.sort_unstable();
            nodes == ["cpu-1-r", "cpu-2-r"]
        },
    );

    // MIG repartition: every h200 GPU from seven 1g.18gb instances to two 3g.71gb.
    cluster.ok_stdin(KUBECTL, &["apply", "-f", "-"], MIG_3G);
    wait_succeeded(&cluster, "mig-3g");
    for node in ["h200-1", "h200-2"] {
        let labels = jsonpath(&cluster, &["get", "node", node], "{.metadata.labels}");
        assert!(
            labels.contains("\"nvidia.com/mig-3g.71gb.count\":\"16\""),
            "{labels}"
        );
        assert!(!labels.contains("mig-1g.18gb.count"), "{labels}");
        assert!(
            labels.contains("\"nvidia.com/mig.config\":\"all-3g.71gb\""),
            "{labels}"
        );
        assert!(
            labels.contains("\"nvidia.com/mig.config.state\":\"success\""),
            "{labels}"
        );
        let (devices, generation) = slice_devices(&cluster, node);
        assert_eq!(devices.len(), 16, "{node}: {devices:?}");
        assert!(devices.iter().all(|d| d.contains("3g71gb")), "{devices:?}");
        assert_eq!(generation, "2", "{node}");
        let cordoned = jsonpath(&cluster, &["get", "node", node], "{.spec.unschedulable}");
        assert_eq!(cordoned, "", "{node} was left cordoned");
    }

    // A layout the GPU cannot hold, written by hand, is refused by the MIG manager, which says so
    // in its state label and keeps the instances it has; a good one is applied again.
    let state = |cluster: &Cluster, want: &'static str| {
        cluster.wait_for_node(
            "h200-1",
            "{.metadata.labels.nvidia\\.com/mig\\.config\\.state}",
            want,
        );
    };
    let layout = |value: &str| format!("maintenance.tessera.dev/mig-layout={value}");
    cluster.ok(
        KUBECTL,
        &[
            "annotate",
            "node",
            "h200-1",
            "--overwrite",
            &layout("7g.141gb,1g.18gb"),
        ],
    );
    state(&cluster, "failed");
    assert_eq!(slice_devices(&cluster, "h200-1").0.len(), 16);
    cluster.ok(
        KUBECTL,
        &[
            "annotate",
            "node",
            "h200-1",
            "--overwrite",
            &layout("3g.71gb,2g.35gb,1g.18gb,1g.18gb"),
        ],
    );
    state(&cluster, "success");
    let (devices, generation) = slice_devices(&cluster, "h200-1");
    assert_eq!(devices.len(), 32, "{devices:?}");
    assert_eq!(generation, "3");

    // A restart: the replacements come back at their addresses, the removed nodes do not, and
    // the installed layout stays.
    let address = |cluster: &Cluster| {
        jsonpath(
            cluster,
            &["get", "node", "cpu-2-r"],
            "{.status.addresses[?(@.type==\"InternalIP\")].address}",
        )
    };
    let before_restart = address(&cluster);
    cluster.stop();
    cluster.launch(&[]);
    cluster.wait_for_node(
        "cpu-1-r",
        "{.status.conditions[?(@.type==\"Ready\")].status}",
        "True",
    );
    assert_eq!(pool_nodes(&cluster, "cpu"), "cpu-1-r cpu-2-r");
    assert_eq!(address(&cluster), before_restart);
    let (devices, _) = slice_devices(&cluster, "h200-2");
    assert_eq!(devices.len(), 16, "{devices:?}");
    let count = jsonpath(
        &cluster,
        &["get", "node", "h200-2"],
        "{.metadata.labels.nvidia\\.com/mig-3g\\.71gb\\.count}",
    );
    assert_eq!(count, "16");
}
