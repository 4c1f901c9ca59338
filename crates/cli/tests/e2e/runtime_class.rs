//! RuntimeClasses end to end: the bundled `nvidia` and `kata` classes as kubectl lists them,
//! RuntimeClass admission (an unknown class refused with upstream's message, the class's
//! overhead and node selector set, a selector conflict refused), a kata pod landing only on a
//! kata pool's nodes or waiting with FailedScheduling where there is none, the node twins
//! failing a pod whose handler their runtime lacks as the kubelet does (FailedCreatePodSandBox,
//! retried, and the class missing at the kubelet), Kueue counting a class's overhead in a
//! Job's admission, and the official Python client creating a class and a pod that uses it.

use serde_json::Value;

use crate::support::{Cluster, table_rows};

/// A CPU pool with the default handler only, and a sandboxed pool with Kata's.
const TOPOLOGY: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
- name: sandbox
  count: 1
  capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  runtimeHandlers: [runc, kata-qemu]
"#;

fn pod(name: &str, class: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  runtimeClassName: {class}\n  containers:\n  - name: c\n    image: busybox\n    resources: {{requests: {{cpu: 100m}}}}\n{extra}"
    )
}

fn json(cluster: &Cluster, version: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-o", "json"]);
    serde_json::from_str(&cluster.ok(version, &args)).expect("kubectl prints JSON")
}

/// The reason and message of each event about a pod, one per line.
fn events_of(cluster: &Cluster, version: &str, pod: &str) -> String {
    cluster.ok(
        version,
        &[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={pod}"),
            "-o",
            "jsonpath={range .items[*]}{.reason}: {.message} (x{.count}){\"\\n\"}{end}",
        ],
    )
}

#[test]
fn runtime_classes_are_honoured_by_admission_scheduler_and_twins() {
    let cluster = Cluster::start_with_topology(TOPOLOGY, 2);
    for version in ["1.33", "1.27"] {
        // The bundled classes, with upstream's columns.
        let listed = cluster.ok(version, &["get", "runtimeclass"]);
        let rows = table_rows(&listed);
        assert_eq!(rows[0], ["NAME", "HANDLER", "AGE"], "{version}: {listed}");
        for (name, handler) in [("kata", "kata-qemu"), ("nvidia", "nvidia")] {
            assert!(
                rows.iter().any(|r| r[..2] == [name, handler]),
                "{version}: {name} in {listed}"
            );
        }

        // An unknown class: refused at admission, 403 with upstream's message.
        let refused = cluster.fails(
            version,
            &["apply", "-f", "-"],
            Some(&pod("unknown", "gvisor", "")),
        );
        assert!(
            refused.contains("Error from server (Forbidden)")
                && refused.contains(
                    "pods \"unknown\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"
                ),
            "{version}: {refused}"
        );

        // The class's node selector against the pod's own: a conflict is refused.
        let conflict = cluster.fails(
            version,
            &["apply", "-f", "-"],
            Some(&pod(
                "conflict",
                "kata",
                "  nodeSelector: {katacontainers.io/kata-runtime: \"false\"}\n",
            )),
        );
        assert!(
            conflict.contains("conflict: runtimeClass.scheduling.nodeSelector[katacontainers.io/kata-runtime] = true; pod.spec.nodeSelector[katacontainers.io/kata-runtime] = false"),
            "{version}: {conflict}"
        );
    }

    // The kata node carries kata-deploy's label and publishes its handlers.
    let node = json(&cluster, "1.33", &["get", "node", "sandbox-1"]);
    assert_eq!(
        node["metadata"]["labels"]["katacontainers.io/kata-runtime"],
        "true"
    );
    let handlers: Vec<&str> = node["status"]["runtimeHandlers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["name"].as_str())
        .collect();
    assert_eq!(handlers, ["", "runc", "kata-qemu"], "{node}");

    // A kata pod: the class's overhead and node selector, on the kata node only.
    for (version, name) in [("1.33", "sandboxed"), ("1.27", "sandboxed-old")] {
        cluster.ok_stdin(
            version,
            &["apply", "-f", "-"],
            &pod(name, "kata", "  nodeSelector: {kubernetes.io/os: linux}\n"),
        );
        let created = json(&cluster, version, &["get", "pod", name]);
        assert_eq!(
            created["spec"]["overhead"],
            serde_json::json!({"cpu": "250m", "memory": "160Mi"}),
            "{created}"
        );
        assert_eq!(
            created["spec"]["nodeSelector"],
            serde_json::json!({"kubernetes.io/os": "linux", "katacontainers.io/kata-runtime": "true"}),
            "{created}"
        );
        assert_eq!(cluster.node_when_running(version, None, name), "sandbox-1");
    }
    // The overhead counts in the node's allocated resources: 2 × (100m + 250m).
    let described = cluster.ok("1.33", &["describe", "node", "sandbox-1"]);
    let allocated = described
        .split("Allocated resources:")
        .nth(1)
        .unwrap_or_default();
    assert!(
        allocated
            .lines()
            .any(|line| line.trim_start().starts_with("cpu ") && line.contains("700m (8%)")),
        "{described}"
    );

    // Kueue counts the class's overhead in the Job's PodSet (Kueue's quick start setup): two
    // pods of 500m and 200Mi, each with 250m and 160Mi of overhead.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        include_str!("../fixtures/upstream/kueue/quick-start-setup.yaml"),
    );
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: sandboxed-job\n  labels: {kueue.x-k8s.io/queue-name: user-queue}\nspec:\n  parallelism: 2\n  completions: 2\n  template:\n    spec:\n      runtimeClassName: kata\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: worker:1\n        resources: {requests: {cpu: 500m, memory: 200Mi}}\n",
    );
    let usage = cluster.wait_for(
        "1.33",
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={.items[0].status.admission.podSetAssignments[0].resourceUsage}",
        ],
        |out| out.contains("cpu"),
    );
    let usage: Value = serde_json::from_str(&usage).expect("JSON");
    assert_eq!(
        usage,
        serde_json::json!({"cpu": "1500m", "memory": "720Mi"})
    );

    // A pod bound to a node whose runtime lacks the handler stays Pending with the kubelet's
    // FailedCreatePodSandBox.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &pod("no-gpu-runtime", "nvidia", "  nodeName: cpu-1\n"),
    );
    let events = cluster.wait_for(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=no-gpu-runtime,reason=FailedCreatePodSandBox",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(
        events,
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for \"nvidia\" is configured"
    );
    cluster.wait_for(
        "1.27",
        &[
            "get",
            "pod",
            "no-gpu-runtime",
            "-o",
            "jsonpath={.status.phase} {.status.containerStatuses[0].state.waiting.reason}",
        ],
        |out| out == "Pending ContainerCreating",
    );
    let shown = cluster.ok("1.27", &["get", "pod", "no-gpu-runtime"]);
    assert!(shown.contains("ContainerCreating"), "{shown}");

    // The class removed while a pod waits: the kubelet's retry no longer finds it.
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: gone}\nhandler: youki\n",
    );
    cluster.ok_stdin(
        "1.33",
        &["apply", "-f", "-"],
        &pod("orphan", "gone", "  nodeName: cpu-1\n"),
    );
    cluster.wait_for(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=orphan",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| out.contains("no runtime for \"youki\" is configured"),
    );
    cluster.ok("1.33", &["delete", "runtimeclass", "gone"]);
    cluster.wait_for_within(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=orphan",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        std::time::Duration::from_secs(60),
        |out| {
            out.contains(
                "Failed to create pod sandbox: runtimeclass.node.k8s.io \"gone\" not found",
            )
        },
    );
    let orphan = events_of(&cluster, "1.33", "orphan");
    assert!(
        orphan.contains("FailedCreatePodSandBox: Failed to create pod sandbox: rpc error"),
        "{orphan}"
    );
}

#[test]
fn without_kata_nodes_a_kata_pod_waits_and_the_python_client_uses_a_class() {
    let cluster = Cluster::start();
    // The built-in lab has no kata pool: the class's selector matches no node.
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], &pod("nowhere", "kata", ""));
    let message = cluster.wait_for(
        "1.33",
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=nowhere,reason=FailedScheduling",
            "-o",
            "jsonpath={.items[0].message}",
        ],
        |out| out.starts_with("0/8 nodes are available"),
    );
    assert!(
        message.contains("node(s) didn't match Pod's node affinity/selector"),
        "{message}"
    );
    assert_eq!(
        cluster.ok(
            "1.27",
            &["get", "pod", "nowhere", "-o", "jsonpath={.status.phase}"]
        ),
        "Pending"
    );
    // GPU pools have NVIDIA's handler.
    let handlers = cluster.ok(
        "1.33",
        &[
            "get",
            "node",
            "h100-1",
            "-o",
            "jsonpath={.status.runtimeHandlers[*].name}",
        ],
    );
    assert_eq!(handlers, " runc nvidia");

    // The official Python client: a RuntimeClass with overhead, and a pod using it.
    let script = r#"import json, sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
node = client.NodeV1Api()
node.create_runtime_class(client.V1RuntimeClass(
    metadata=client.V1ObjectMeta(name="runc-small"), handler="runc",
    overhead=client.V1Overhead(pod_fixed={"cpu": "50m"})))
core = client.CoreV1Api()
pod = core.create_namespaced_pod("default", client.V1Pod(
    metadata=client.V1ObjectMeta(name="py-runc"),
    spec=client.V1PodSpec(runtime_class_name="runc-small", node_selector={"tessera.dev/pool": "cpu"},
        containers=[client.V1Container(name="c", image="busybox")])))
classes = sorted(c.metadata.name + "=" + c.handler for c in node.list_runtime_class().items)
print(json.dumps({"overhead": pod.spec.overhead, "classes": classes}))
"#;
    let stdout = crate::support::python(&[
        std::ffi::OsStr::new("-c"),
        std::ffi::OsStr::new(script),
        cluster.kubeconfig().as_os_str(),
    ]);
    let got: Value = serde_json::from_slice(&stdout).expect("the script prints JSON");
    assert_eq!(
        got,
        serde_json::json!({"overhead": {"cpu": "50m"},
            "classes": ["kata=kata-qemu", "nvidia=nvidia", "runc-small=runc"]})
    );
    let node = cluster.node_when_running("1.33", None, "py-runc");
    assert!(node.starts_with("cpu-"), "{node}");
}
