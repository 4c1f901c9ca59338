//! The everyday kubectl workflow against `tessera up`, with every bundled kubectl (1.27–1.33).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::support::{Cluster, kubectl_binary};

const POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
  annotations:
    sim.tessera.dev/logs: "serving on :8080\nready"
spec:
  nodeName: cpu-1
  containers:
  - name: main
    image: busybox:1.36
    resources:
      requests: {cpu: 100m, memory: 64Mi}
"#;

const CONFIG_MAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"#;

fn header_words(table: &str) -> Vec<String> {
    table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn workflow(version: &str) {
    let cluster = Cluster::start();
    let k = |args: &[&str]| cluster.ok(version, args);

    // Nodes as kubectl prints them.
    let nodes = k(&["get", "nodes"]);
    assert_eq!(
        header_words(&nodes),
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    );
    assert!(
        nodes.contains("cpu-1") && nodes.contains("Ready"),
        "{nodes}"
    );

    // Client-side apply: create, unchanged, configured.
    assert_eq!(
        cluster.ok_stdin(version, &["apply", "-f", "-"], POD).trim(),
        "pod/web created"
    );
    assert_eq!(
        cluster.ok_stdin(version, &["apply", "-f", "-"], POD).trim(),
        "pod/web unchanged"
    );
    let relabelled = POD.replace("app: web", "app: web-v2");
    assert_eq!(
        cluster
            .ok_stdin(version, &["apply", "-f", "-"], &relabelled)
            .trim(),
        "pod/web configured"
    );
    assert_eq!(
        k(&["get", "pod", "web", "-o", "jsonpath={.metadata.labels.app}"]),
        "web-v2"
    );

    // The node twin runs it.
    let table = cluster.wait_for(version, &["get", "pods"], |out| out.contains("Running"));
    assert_eq!(
        header_words(&table),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert!(
        table.lines().nth(1).unwrap_or_default().contains("1/1"),
        "{table}"
    );
    let wide = k(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        &header_words(&wide)[5..9],
        ["IP", "NODE", "NOMINATED", "NODE"]
    );
    assert!(
        wide.contains("10.244.0.") && wide.contains("cpu-1"),
        "{wide}"
    );
    let yaml = k(&["get", "pod", "web", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: Pod") && yaml.contains("nodeName: cpu-1"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&k(&["get", "pod", "web", "-o", "json"])).expect("pod JSON");
    assert_eq!(json["status"]["phase"], "Running");
    assert_eq!(json["status"]["qosClass"], "Burstable");
    assert_eq!(
        k(&[
            "get",
            "pod",
            "web",
            "-o",
            "jsonpath={.spec.containers[0].resources.requests.memory}"
        ]),
        "64Mi"
    );

    // describe shows the kubelet's events.
    let described = k(&["describe", "pod", "web"]);
    assert!(described.contains("cpu-1/10.0.0.2"), "{described}");
    assert!(described.contains("Started container main"), "{described}");

    // Labels, annotations and the three patch types.
    assert_eq!(
        k(&["label", "pod", "web", "tier=frontend"]).trim(),
        "pod/web labeled"
    );
    // kubectl 1.27 itself prints "annotate" (its own message, fixed in 1.28).
    let annotated = k(&["annotate", "pod", "web", "owner=team-a"]);
    assert!(
        annotated.trim().starts_with("pod/web annotate"),
        "{annotated}"
    );
    k(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"containers":[{"name":"main","image":"busybox:1.37"}]}}"#,
    ]);
    k(&[
        "patch",
        "pod",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"merged":"yes"}}}"#,
    ]);
    k(&[
        "patch",
        "pod",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/metadata/annotations/owner","value":"team-b"}]"#,
    ]);
    let patched: serde_json::Value =
        serde_json::from_str(&k(&["get", "pod", "web", "-o", "json"])).expect("pod JSON");
    assert_eq!(patched["spec"]["containers"][0]["image"], "busybox:1.37");
    assert_eq!(patched["metadata"]["labels"]["merged"], "yes");
    assert_eq!(patched["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(patched["metadata"]["annotations"]["owner"], "team-b");
    let forbidden = cluster.fails(
        version,
        &[
            "patch",
            "pod",
            "web",
            "-p",
            r#"{"spec":{"containers":[{"name":"main","env":[{"name":"A","value":"1"}]}]}}"#,
        ],
        None,
    );
    assert!(
        forbidden.contains("pod updates may not change fields"),
        "{forbidden}"
    );

    // Logs.
    assert_eq!(k(&["logs", "web"]), "serving on :8080\nready\n");
    let stamped = k(&["logs", "web", "--timestamps"]);
    assert!(
        stamped.starts_with("20") && stamped.contains("Z serving on :8080"),
        "{stamped}"
    );

    // explain reads the OpenAPI schemas.
    let explained = k(&["explain", "pod.spec.containers.resources"]);
    assert!(
        explained.contains("limits") && explained.contains("requests"),
        "{explained}"
    );

    // create, dry run, AlreadyExists.
    let dry = cluster.ok_stdin(
        version,
        &["apply", "--dry-run=server", "-f", "-"],
        CONFIG_MAP,
    );
    assert_eq!(dry.trim(), "configmap/settings created (server dry run)");
    let missing = cluster.fails(version, &["get", "configmap", "settings"], None);
    assert!(missing.contains("(NotFound)"), "{missing}");
    assert_eq!(
        cluster
            .ok_stdin(version, &["create", "-f", "-"], CONFIG_MAP)
            .trim(),
        "configmap/settings created"
    );
    let again = cluster.fails(version, &["create", "-f", "-"], Some(CONFIG_MAP));
    assert!(
        again.contains("configmaps \"settings\" already exists"),
        "{again}"
    );

    // Events list with upstream columns.
    let events = k(&["get", "events"]);
    assert_eq!(
        &header_words(&events)[..4],
        ["LAST", "SEEN", "TYPE", "REASON"]
    );
    assert!(events.contains("pod/web"), "{events}");
    // Sorting asks for whole objects in the Table rows (includeObject=Object).
    let sorted = k(&["get", "events", "--sort-by=.lastTimestamp"]);
    assert!(sorted.contains("pod/web"), "{sorted}");
    let by_node = k(&["get", "pods", "--sort-by=.spec.nodeName"]);
    assert!(
        by_node
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with("web "),
        "{by_node}"
    );

    // Delete waits until the node twin has stopped the pod.
    assert_eq!(k(&["delete", "pod", "web"]).trim(), "pod \"web\" deleted");
    assert!(
        cluster
            .fails(version, &["get", "pod", "web"], None)
            .contains("NotFound")
    );
}

#[test]
fn kubectl_1_27_workflow() {
    workflow("1.27");
}

#[test]
fn kubectl_1_28_workflow() {
    workflow("1.28");
}

#[test]
fn kubectl_1_29_workflow() {
    workflow("1.29");
}

#[test]
fn kubectl_1_30_workflow() {
    workflow("1.30");
}

#[test]
fn kubectl_1_31_workflow() {
    workflow("1.31");
}

#[test]
fn kubectl_1_32_workflow() {
    workflow("1.32");
}

#[test]
fn kubectl_1_33_workflow() {
    workflow("1.33");
}

#[test]
fn watch_prints_changes_as_they_happen() {
    let cluster = Cluster::start();
    let mut watcher = Command::new(kubectl_binary("1.33"))
        .args(["get", "configmaps", "-w", "--request-timeout=20s"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .env("HOME", cluster.dir.path().join("home-watch"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w");
    let stdout = watcher.stdout.take().expect("stdout");
    std::thread::sleep(std::time::Duration::from_millis(500));
    cluster.ok_stdin("1.33", &["apply", "-f", "-"], CONFIG_MAP);
    let mut lines = BufReader::new(stdout).lines();
    let mut seen = Vec::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        seen.push(line.clone());
        if line.starts_with("settings") {
            break;
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert!(seen.iter().any(|l| l.starts_with("settings")), "{seen:?}");
    assert_eq!(header_words(&seen[0]), ["NAME", "DATA", "AGE"]);
}

#[test]
fn delete_propagation_policies_with_kubectl() {
    let cluster = Cluster::start();
    let v = "1.32";
    for (cascade, dependent_kept) in [
        ("background", false),
        ("foreground", false),
        ("orphan", true),
    ] {
        cluster.ok_stdin(
            v,
            &["apply", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owner}\n",
        );
        let uid = cluster.ok(
            v,
            &[
                "get",
                "configmap",
                "owner",
                "-o",
                "jsonpath={.metadata.uid}",
            ],
        );
        let dependent = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dependent\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: owner, uid: {uid}}}\n"
        );
        cluster.ok_stdin(v, &["apply", "-f", "-"], &dependent);
        cluster.ok(
            v,
            &[
                "delete",
                "configmap",
                "owner",
                &format!("--cascade={cascade}"),
            ],
        );
        if dependent_kept {
            let refs = cluster.wait_for(
                v,
                &[
                    "get",
                    "configmap",
                    "dependent",
                    "-o",
                    "jsonpath={.metadata.ownerReferences}",
                ],
                str::is_empty,
            );
            assert!(refs.is_empty());
            cluster.ok(v, &["delete", "configmap", "dependent"]);
        } else {
            cluster.wait_for(v, &["get", "configmap", "dependent"], |out| {
                out.contains("NotFound")
            });
        }
    }
}

#[test]
fn pods_run_to_completion_or_failure() {
    let cluster = Cluster::start();
    let v = "1.33";
    let pod = |name: &str, exit: u8| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{sim.tessera.dev/duration: 1s, sim.tessera.dev/exit-code: \"{exit}\"}}\nspec:\n  nodeName: h100-1\n  restartPolicy: Never\n  containers: [{{name: train, image: trainer:v1}}]\n"
        )
    };
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("ok", 0));
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("broken", 3));
    let table = cluster.wait_for(v, &["get", "pods"], |out| {
        out.contains("Completed") && out.contains("Error")
    });
    assert!(table.contains("0/1"), "{table}");
    assert_eq!(
        cluster.ok(v, &["get", "pod", "ok", "-o", "jsonpath={.status.phase}"]),
        "Succeeded"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "broken", "-o", "jsonpath={.status.phase}"]
        ),
        "Failed"
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "pod",
                "broken",
                "-o",
                "jsonpath={.status.containerStatuses[0].state.terminated.exitCode}"
            ]
        ),
        "3"
    );
    assert!(
        cluster
            .ok(v, &["logs", "ok"])
            .contains("container train started")
    );
    // Following the log of a pod that stops ends when it stops.
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        &pod("follow", 0).replace("1s", "2s"),
    );
    let followed = cluster.ok(v, &["logs", "-f", "follow"]);
    assert!(followed.contains("container train started"), "{followed}");
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "follow", "-o", "jsonpath={.status.phase}"]
        ),
        "Succeeded"
    );
    let failed = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "--field-selector=status.phase=Failed",
            "-o",
            "name",
        ],
    );
    assert_eq!(failed.trim(), "pod/broken");
}

#[test]
fn bad_input_is_reported_with_the_field() {
    let cluster = Cluster::start();
    let v = "1.32";
    let bad_name = POD.replace("name: web", "name: Web_1");
    let error = cluster.fails(v, &["apply", "-f", "-"], Some(&bad_name));
    assert!(
        error.contains("metadata.name: Invalid value: \"Web_1\""),
        "{error}"
    );
    let bad_quantity = POD.replace("cpu: 100m", "cpu: lots");
    let error = cluster.fails(v, &["apply", "-f", "-"], Some(&bad_quantity));
    assert!(
        error.contains("spec.containers[0].resources.requests.cpu"),
        "{error}"
    );
    let unknown = POD.replace("  nodeName: cpu-1", "  nodeName: cpu-1\n  bogus: 1");
    let error = cluster.fails(
        v,
        &["apply", "--validate=strict", "-f", "-"],
        Some(&unknown),
    );
    assert!(error.contains("unknown field \"spec.bogus\""), "{error}");
    let limits = POD.replace(
        "requests: {cpu: 100m, memory: 64Mi}",
        "requests: {cpu: \"2\"}\n      limits: {cpu: \"1\"}",
    );
    let error = cluster.fails(v, &["apply", "-f", "-"], Some(&limits));
    assert!(
        error.contains("must be less than or equal to cpu limit of 1"),
        "{error}"
    );
    let out = cluster.ok(v, &["get", "pods", "-o", "name"]);
    assert!(out.trim().is_empty(), "nothing was created: {out}");
}

#[test]
fn a_mount_of_no_volume_is_refused_with_upstreams_message() {
    let cluster = Cluster::start();
    let v = "1.33";
    let pod = POD.replace(
        "    image: busybox:1.36\n",
        "    image: busybox:1.36\n    volumeMounts: [{name: data, mountPath: /data}]\n",
    );
    let output = cluster.kubectl_with_stdin(v, &["apply", "-f", "-"], Some(&pod));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            r#"The Pod "web" is invalid: spec.containers[0].volumeMounts[0].name: Not found: "data""#
        ),
        "{stderr}"
    );
    let out = cluster.ok(v, &["get", "pods", "-o", "name"]);
    assert!(out.trim().is_empty(), "nothing was stored: {out}");
    // With the volume declared, the same pod is accepted.
    let fixed = pod.replace(
        "  containers:\n",
        "  volumes: [{name: data, emptyDir: {}}]\n  containers:\n",
    );
    cluster.ok_stdin(v, &["apply", "-f", "-"], &fixed);
    let out = cluster.ok(v, &["get", "pods", "-o", "name"]);
    assert_eq!(out.trim(), "pod/web");
}

#[test]
fn deleting_a_namespace_deletes_what_it_holds() {
    let cluster = Cluster::start();
    let v = "1.33";
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n",
    );
    cluster.ok_stdin(v, &["apply", "-n", "team-a", "-f", "-"], CONFIG_MAP);
    cluster.ok_stdin(v, &["apply", "-n", "team-a", "-f", "-"], POD);
    cluster.wait_for(v, &["get", "pods", "-n", "team-a"], |out| {
        out.contains("Running")
    });
    cluster.ok(v, &["delete", "namespace", "team-a"]);
    let error = cluster.fails(v, &["get", "namespace", "team-a"], None);
    assert!(error.contains("NotFound"), "{error}");
    let left = cluster.ok(v, &["get", "configmaps,pods", "-n", "team-a", "-o", "name"]);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn binding_a_pending_pod_starts_it_on_the_node() {
    let cluster = Cluster::start();
    let v = "1.32";
    // A pod for another scheduler: the embedded one leaves it to whoever binds it.
    cluster.ok_stdin(v, &["apply", "-f", "-"], "apiVersion: v1\nkind: Pod\nmetadata: {name: unbound}\nspec:\n  schedulerName: my-scheduler\n  containers: [{name: c, image: app:1}]\n");
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "unbound", "-o", "jsonpath={.status.phase}"]
        ),
        "Pending"
    );
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"unbound"},"target":{"apiVersion":"v1","kind":"Node","name":"h100-2"}}"#;
    cluster.ok_stdin(
        v,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/unbound/binding",
            "-f",
            "-",
        ],
        binding,
    );
    cluster.wait_for(v, &["get", "pod", "unbound", "-o", "wide"], |out| {
        out.contains("Running") && out.contains("h100-2")
    });
    let again = cluster.fails(
        v,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/pods/unbound/binding",
            "-f",
            "-",
        ],
        Some(binding),
    );
    assert!(again.contains("already assigned to node"), "{again}");
}

/// kubectl 1.32+ sends protobuf bodies for its `create <kind>` generators.
fn protobuf_generators(version: &str) {
    let cluster = Cluster::start();
    let k = |args: &[&str]| cluster.ok(version, args);
    assert_eq!(
        k(&["create", "namespace", "team-a"]).trim(),
        "namespace/team-a created"
    );
    k(&[
        "create",
        "configmap",
        "settings",
        "-n",
        "team-a",
        "--from-literal=mode=fast",
        "--from-literal=level=3",
    ]);
    k(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team-a",
        "--from-literal=password=hunter2",
    ]);
    k(&[
        "create",
        "deployment",
        "web",
        "-n",
        "team-a",
        "--image=nginx:1.27",
        "--replicas=0",
        "--port=80",
    ]);
    k(&["create", "priorityclass", "zero", "--value=0"]);
    assert_eq!(
        k(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data}"
        ]),
        r#"{"level":"3","mode":"fast"}"#
    );
    assert_eq!(
        k(&[
            "get",
            "secret",
            "creds",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.data.password}"
        ]),
        "aHVudGVyMg=="
    );
    let deployment: serde_json::Value = serde_json::from_str(&k(&[
        "get",
        "deployment",
        "web",
        "-n",
        "team-a",
        "-o",
        "json",
    ]))
    .expect("deployment JSON");
    assert_eq!(
        deployment["spec"]["replicas"], 0,
        "an explicit zero is kept"
    );
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["containerPort"], 80);
    assert_eq!(
        container["imagePullPolicy"], "IfNotPresent",
        "Go zero values are unset, then defaulted"
    );
    assert!(
        container["ports"][0].get("hostPort").is_none(),
        "{container}"
    );
    assert_eq!(
        k(&["get", "priorityclass", "zero", "-o", "jsonpath={.value}"]),
        "0"
    );
}

#[test]
fn kubectl_1_32_protobuf_generators() {
    protobuf_generators("1.32");
}

#[test]
fn kubectl_1_33_protobuf_generators() {
    protobuf_generators("1.33");
}

#[test]
fn drain_waits_for_the_disruption_budget() {
    let cluster = Cluster::start();
    let v = "1.33";
    let pod = |name: &str, node: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: web}}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers: [{{name: c, image: web:1}}]\n"
        )
    };
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("web-1", "cpu-1"));
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("web-2", "cpu-2"));
    cluster.ok(
        v,
        &[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ],
    );
    cluster.wait_for(v, &["get", "pdb", "web"], |out| {
        out.lines()
            .nth(1)
            .is_some_and(|row| row.split_whitespace().nth(3) == Some("0"))
    });
    let status: serde_json::Value =
        serde_json::from_str(&cluster.ok(v, &["get", "pdb", "web", "-o", "jsonpath={.status}"]))
            .expect("status");
    assert_eq!(
        (
            status["currentHealthy"].as_i64(),
            status["desiredHealthy"].as_i64()
        ),
        (Some(2), Some(2))
    );

    // Blocked: the budget allows no disruption.
    let blocked = cluster.kubectl(
        v,
        &[
            "drain",
            "cpu-1",
            "--ignore-daemonsets",
            "--force",
            "--timeout=3s",
        ],
    );
    assert!(!blocked.status.success());
    let stderr = String::from_utf8_lossy(&blocked.stderr);
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{stderr}"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "pod", "web-1", "-o", "jsonpath={.spec.nodeName}"]
        ),
        "cpu-1"
    );

    // A third healthy replica elsewhere makes room for one disruption; the drain completes.
    cluster.ok_stdin(v, &["apply", "-f", "-"], &pod("web-3", "h100-1"));
    cluster.wait_for(
        v,
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "1",
    );
    let drained = cluster.ok(
        v,
        &[
            "drain",
            "cpu-1",
            "--ignore-daemonsets",
            "--force",
            "--timeout=30s",
        ],
    );
    assert!(
        drained.contains("pod/web-1 evicted") && drained.contains("node/cpu-1 drained"),
        "{drained}"
    );
    assert!(
        cluster
            .ok(v, &["get", "nodes"])
            .contains("SchedulingDisabled")
    );
    cluster.wait_for(
        v,
        &[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.disruptionsAllowed}",
        ],
        |out| out == "0",
    );
    cluster.ok(v, &["uncordon", "cpu-1"]);
}

#[test]
fn quota_and_limit_range_rejections_read_like_upstream() {
    let cluster = Cluster::start();
    let v = "1.32";
    cluster.ok(v, &["create", "namespace", "team-a"]);
    cluster.ok(
        v,
        &[
            "create",
            "quota",
            "gpus",
            "-n",
            "team-a",
            "--hard=requests.nvidia.com/gpu=1,pods=5",
        ],
    );
    let pod = |name: &str, gpus: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: train\n    image: trainer:1\n    resources:\n      limits: {{nvidia.com/gpu: \"{gpus}\"}}\n"
        )
    };
    cluster.ok_stdin(v, &["apply", "-n", "team-a", "-f", "-"], &pod("first", 1));
    let error = cluster.fails(
        v,
        &["apply", "-n", "team-a", "-f", "-"],
        Some(&pod("second", 1)),
    );
    assert!(
        error.contains("is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=1"),
        "{error}"
    );
    let described = cluster.wait_for(v, &["describe", "quota", "gpus", "-n", "team-a"], |out| {
        out.contains("requests.nvidia.com/gpu  1     1")
    });
    assert!(described.contains("pods"), "{described}");
    cluster.ok_stdin(
        v,
        &["apply", "-n", "team-a", "-f", "-"],
        "apiVersion: v1\nkind: LimitRange\nmetadata: {name: cpu}\nspec:\n  limits:\n  - type: Container\n    max: {cpu: \"2\"}\n",
    );
    let big = "apiVersion: v1\nkind: Pod\nmetadata: {name: big}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {limits: {cpu: \"4\"}}\n";
    let error = cluster.fails(v, &["apply", "-n", "team-a", "-f", "-"], Some(big));
    assert!(
        error.contains("maximum cpu usage per Container is 2, but limit is 4"),
        "{error}"
    );
}

#[test]
fn server_side_apply_tracks_owners_conflicts_and_removals() {
    let cluster = Cluster::start();
    let v = "1.33";
    let config = |replicas: u32, labels: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {{{labels}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: app, image: app:1}}]\n"
        )
    };
    let applied = cluster.ok_stdin(
        v,
        &["apply", "--server-side", "-f", "-"],
        &config(2, "app: web, tier: gpu"),
    );
    assert_eq!(applied.trim(), "deployment.apps/web serverside-applied");
    let managers = cluster.ok(
        v,
        &[
            "get",
            "deploy",
            "web",
            "--show-managed-fields",
            "-o",
            "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource} {end}",
        ],
    );
    // The deployment controller may already own status fields, in an entry of its own.
    let main: Vec<&str> = managers
        .split_whitespace()
        .filter(|entry| !entry.ends_with("/status"))
        .collect();
    assert_eq!(main, ["kubectl/Apply/"], "{managers}");

    cluster.ok(
        v,
        &["patch", "deploy", "web", "-p", r#"{"spec":{"replicas":4}}"#],
    );
    let conflict = cluster.fails(
        v,
        &["apply", "--server-side", "-f", "-"],
        Some(&config(2, "app: web, tier: gpu")),
    );
    assert!(
        conflict.contains("Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1: .spec.replicas"),
        "{conflict}"
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]
        ),
        "4"
    );

    cluster.ok_stdin(
        v,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        &config(2, "app: web, tier: gpu"),
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]
        ),
        "2"
    );

    // A label the manager stops applying is removed.
    cluster.ok_stdin(
        v,
        &["apply", "--server-side", "-f", "-"],
        &config(2, "app: web"),
    );
    assert_eq!(
        cluster.ok(
            v,
            &["get", "deploy", "web", "-o", "jsonpath={.metadata.labels}"]
        ),
        r#"{"app":"web"}"#
    );
}

#[test]
fn client_side_apply_migrates_to_server_side_and_equal_values_share_ownership() {
    let cluster = Cluster::start();
    let v = "1.33";
    let deploy = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers: [{{name: c, image: \"{image}\"}}]\n"
        )
    };
    let managers = || {
        let listed = cluster.ok(
            v,
            &[
                "get",
                "deploy",
                "web",
                "--show-managed-fields",
                "-o",
                "jsonpath={range .metadata.managedFields[*]}{.manager}/{.operation}/{.subresource} {end}",
            ],
        );
        // The deployment controller may own status fields, in an entry of its own.
        let mut main: Vec<String> = listed
            .split_whitespace()
            .filter(|entry| !entry.ends_with("/status"))
            .map(str::to_string)
            .collect();
        main.sort();
        main
    };
    assert_eq!(
        cluster
            .ok_stdin(v, &["apply", "-f", "-"], &deploy("app:1"))
            .trim(),
        "deployment.apps/web created"
    );
    // The same file through server-side apply: no conflict with the client-side owner, and
    // kubectl migrates that owner's fields to its own apply entry (keeping the
    // last-applied annotation under an applier of its own).
    assert_eq!(
        cluster
            .ok_stdin(v, &["apply", "--server-side", "-f", "-"], &deploy("app:1"))
            .trim(),
        "deployment.apps/web serverside-applied"
    );
    assert_eq!(
        managers(),
        ["kubectl-last-applied/Apply/", "kubectl/Apply/"]
    );
    // Another manager applying identical values shares ownership.
    cluster.ok_stdin(
        v,
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        &deploy("app:1"),
    );
    assert_eq!(
        managers(),
        [
            "kubectl-last-applied/Apply/",
            "kubectl/Apply/",
            "other/Apply/"
        ]
    );
    // A different value conflicts on that leaf only, naming the applier without a version.
    let conflict = cluster.fails(
        v,
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        Some(&deploy("app:2")),
    );
    assert!(
        conflict.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.template.spec.containers[name=\"c\"].image\n"
        ),
        "{conflict}"
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "deploy",
                "web",
                "-o",
                "jsonpath={.spec.template.spec.containers[0].image}"
            ]
        ),
        "app:1"
    );
}
