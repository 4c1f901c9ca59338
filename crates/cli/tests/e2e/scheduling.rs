//! The embedded scheduler with kubectl on the default lab: pods without `nodeName` are
//! placed and bound (`Scheduled` events), taints and tolerations and node selectors decide
//! where, a pod that fits nowhere gets upstream's `FailedScheduling` message and condition,
//! and NVIDIA's DRA quickstart runs exactly as published.

use std::collections::BTreeSet;

use crate::support::Cluster;

const V: &str = "1.33";

fn node_of(cluster: &Cluster, pod: &str) -> String {
    cluster.node_when_running(V, None, pod)
}

#[test]
fn pods_are_placed_by_taints_selectors_and_resources() {
    let cluster = Cluster::start();
    cluster.ok(V, &["run", "web", "--image=nginx"]);
    let node = node_of(&cluster, "web");
    assert!(!node.is_empty());
    let scheduled = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=Scheduled,involvedObject.name=web",
            "-o",
            "jsonpath={.items[0].message}",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(
        scheduled,
        format!("Successfully assigned default/web to {node}")
    );
    // Read through events.k8s.io/v1, as the Python client's EventsV1Api does: the platform's
    // own events carry eventTime and who reported them.
    let reported = cluster.ok(
        V,
        &[
            "get",
            "events.v1.events.k8s.io",
            "--field-selector",
            "reason=Scheduled",
            "-o",
            "jsonpath={.items[0].eventTime}|{.items[0].reportingController}|{.items[0].reportingInstance}",
        ],
    );
    let fields: Vec<&str> = reported.split('|').collect();
    assert_eq!(fields.len(), 3, "{reported}");
    assert!(
        fields[0].ends_with('Z') && fields[0].contains('.'),
        "eventTime: {reported}"
    );
    assert_eq!(
        &fields[1..],
        ["default-scheduler", "default-scheduler"],
        "{reported}"
    );
    // Writes are recorded under the managers upstream's components use (their User-Agents).
    let managers = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend([
            "-o",
            "jsonpath={.items[*].metadata.managedFields[*].manager}",
        ]);
        let out = cluster.ok(V, &args);
        out.split_whitespace()
            .map(str::to_string)
            .collect::<std::collections::BTreeSet<_>>()
    };
    cluster.wait_for(V, &["get", "pod", "web"], |out| out.contains("Running"));
    let pod_managers = managers(&["get", "pods", "--field-selector", "metadata.name=web"]);
    assert!(pod_managers.contains("kubelet"), "{pod_managers:?}");
    assert!(!pod_managers.contains("unknown"), "{pod_managers:?}");
    cluster.ok(V, &["create", "deployment", "d", "--image=nginx"]);
    cluster.wait_for(V, &["get", "replicasets", "-l", "app=d"], |out| {
        out.contains("d-")
    });
    let rs_managers = managers(&["get", "replicasets", "-l", "app=d"]);
    assert!(
        rs_managers.contains("kube-controller-manager"),
        "{rs_managers:?}"
    );
    assert!(!rs_managers.contains("unknown"), "{rs_managers:?}");

    // Nine GPUs: only the tainted L40S node offers that many (16 time-sliced replicas through
    // the device plugin); the DRA nodes' class backs nvidia.com/gpu, but none has nine.
    let gpu_pod = |name: &str, tolerate: bool| {
        let tolerations = if tolerate {
            "  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
        } else {
            ""
        };
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{tolerations}  containers: [{{name: c, image: cuda:12, resources: {{limits: {{nvidia.com/gpu: 9}}}}}}]\n"
        )
    };
    cluster.ok_stdin(V, &["apply", "-f", "-"], &gpu_pod("untolerated", false));
    let message = cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "untolerated",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
        |out| !out.is_empty(),
    );
    assert_eq!(
        message,
        "0/8 nodes are available: 2 node(s) had untolerated taint(s), 6 cannot allocate all claims. preemption: 0/8 nodes are available: 2 Preemption is not helpful for scheduling, 6 No preemption victims found for incoming pod."
    );
    let events = cluster.ok(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=FailedScheduling,involvedObject.name=untolerated",
            "-o",
            "jsonpath={.items[*].type}",
        ],
    );
    assert_eq!(events, "Warning");
    // `tessera explain` gives each node's verdicts and the smallest change.
    let kubeconfig = cluster.kubeconfig().to_string_lossy().into_owned();
    let explained = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "explain",
            "pod",
            "default/untolerated",
            "--kubeconfig",
            &kubeconfig,
        ])
        .output()
        .expect("tessera explain");
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(
        text.starts_with("Pod default/untolerated: 0/8 nodes fit\n"),
        "{text}"
    );
    assert!(
        text.contains("l40s-1:\n  NodeUnschedulable: ok\n  NodeName: ok\n  TaintToleration: untolerated taint nvidia.com/gpu=present:NoSchedule\n"),
        "{text}"
    );
    assert!(
        text.contains("  - tolerate nvidia.com/gpu=present:NoSchedule to run on l40s-1\n"),
        "{text}"
    );
    assert!(
        text.contains("To fit:\n  - ask for at most 8 device(s) of class gpu.nvidia.com as extended resources to fit on h100-1\n"),
        "{text}"
    );
    cluster.ok_stdin(V, &["apply", "-f", "-"], &gpu_pod("tolerated", true));
    assert_eq!(node_of(&cluster, "tolerated"), "l40s-1");

    // A node selector on the rack label picks the one node there.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: rack2}\nspec:\n  nodeSelector: {tessera.dev/rack: r2}\n  containers: [{name: c, image: app:1}]\n",
    );
    assert_eq!(node_of(&cluster, "rack2"), "h100-2");

    // A Deployment's pods are scheduled without anyone binding them.
    cluster.ok(
        V,
        &[
            "create",
            "deployment",
            "api",
            "--image=api:1",
            "--replicas=3",
        ],
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "deployment",
            "api",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "3",
    );
}

#[test]
fn the_nvidia_quickstart_runs_as_published() {
    let cluster = Cluster::start();
    let path = format!(
        "{}/tests/fixtures/upstream/dra-driver-nvidia-gpu/gpu-test1.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let manifest = std::fs::read_to_string(path).expect("fixture");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &manifest);
    let mut devices = BTreeSet::new();
    for pod in ["pod1", "pod2"] {
        let placed = cluster.node_when_running(V, Some("gpu-test1"), pod);
        // Whole GPUs of class gpu.nvidia.com live on the H100 nodes (the H200s are MIG).
        assert!(placed.starts_with("h100-"), "{placed}");
        let logs = cluster.ok(V, &["logs", "-n", "gpu-test1", pod]);
        let cdi = logs
            .lines()
            .find_map(|l| l.strip_prefix("CDI devices: k8s.gpu.nvidia.com/claim="))
            .unwrap_or_else(|| panic!("{logs}"))
            .to_string();
        devices.insert(format!("{placed}/{}", &cdi[cdi.len() - 5..]));
    }
    assert_eq!(devices.len(), 2, "two distinct GPUs: {devices:?}");
    let claims = cluster.ok(
        V,
        &[
            "get",
            "resourceclaims",
            "-n",
            "gpu-test1",
            "-o",
            "jsonpath={.items[*].status.reservedFor[0].name}",
        ],
    );
    assert_eq!(
        claims.split(' ').collect::<BTreeSet<_>>(),
        BTreeSet::from(["pod1", "pod2"])
    );
}

#[test]
fn a_high_priority_job_preempts_a_low_priority_one() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 1\n  server: dgx-h100\n  devices: {exposure: device-plugin}\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    let job = |name: &str, class: &str, gpus: u32| {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n  backoffLimit: 3\n  template:\n    metadata: {{annotations: {{sim.tessera.dev/duration: 1h}}}}\n    spec:\n      priorityClassName: {class}\n      restartPolicy: Never\n      containers: [{{name: train, image: trainer:1, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}]\n"
        )
    };
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: batch-low}\nvalue: 100\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: prod-high}\nvalue: 10000\n",
    );
    cluster.ok_stdin(V, &["apply", "-f", "-"], &job("sweep", "batch-low", 8));
    cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "job-name=sweep",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        |out| out == "Running",
    );
    cluster.ok_stdin(V, &["apply", "-f", "-"], &job("finetune", "prod-high", 4));
    let placed = cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "job-name=finetune",
            "-o",
            "jsonpath={.items[0].spec.nodeName} {.items[0].status.phase}",
        ],
        |out| out == "dgx-1 Running",
    );
    assert_eq!(placed, "dgx-1 Running");
    let preempted = cluster.ok(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=Preempted",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    assert!(
        preempted.starts_with("Preempted by pod default/finetune-"),
        "{preempted}"
    );
    // The low-priority job's replacement pod finds no victims it may take.
    let pending = cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| out.contains("preemption:"),
    );
    assert!(
        pending.contains("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."),
        "{pending}"
    );
}

#[test]
fn a_sixteen_pod_gang_binds_whole_across_two_nodes() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 2\n  server: dgx-h100\n  devices: {exposure: device-plugin}\n";
    let cluster = Cluster::start_with_topology(topology, 2);
    let crd = std::fs::read_to_string(format!(
        "{}/tests/fixtures/upstream/scheduler-plugins/crd-podgroups.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &crd);
    cluster.wait_for(
        V,
        &[
            "get",
            "crd",
            "podgroups.scheduling.x-k8s.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ],
        |out| out == "True",
    );
    let group = |name: &str, min: usize| {
        format!(
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {{name: {name}}}\nspec: {{minMember: {min}}}\n"
        )
    };
    let members = |group: &str, count: usize| -> String {
        (0..count)
            .map(|i| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {group}-{i}, labels: {{scheduling.x-k8s.io/pod-group: {group}}}}}\nspec:\n  containers: [{{name: w, image: trainer:1, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"))
            .collect::<Vec<_>>()
            .join("---\n")
    };
    // Sixteen one-GPU workers: they bind together, eight per node.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &group("train", 16));
    cluster.ok_stdin(V, &["apply", "-f", "-"], &members("train", 16));
    let placed = cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "scheduling.x-k8s.io/pod-group=train",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
        |out| out.split(' ').filter(|n| !n.is_empty()).count() == 16,
    );
    let on = |node: &str| placed.split(' ').filter(|n| *n == node).count();
    assert_eq!((on("dgx-1"), on("dgx-2")), (8, 8));

    // A second gang needing four GPUs finds none: no member binds, each says why.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &group("eval", 4));
    cluster.ok_stdin(V, &["apply", "-f", "-"], &members("eval", 4));
    let message = cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "eval-0",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
        |out| !out.is_empty(),
    );
    assert!(
        message.starts_with("pod group default/eval: only 0 of 4 required members fit; eval-0: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
        "{message}"
    );
    let bound = cluster.ok(
        V,
        &[
            "get",
            "pods",
            "-l",
            "scheduling.x-k8s.io/pod-group=eval",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
    );
    assert_eq!(bound.trim(), "", "no partial group");
}

#[test]
fn the_scheduler_never_picks_a_placement_the_kubelet_would_reject() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 1\n  server: dgx-h100\n  devices: {exposure: device-plugin}\n  kubelet: {topologyManagerPolicy: single-numa-node}\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    let pod = |name: &str, gpus: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, image: cuda:12, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}]\n"
        )
    };
    for name in ["a", "b"] {
        cluster.ok_stdin(V, &["apply", "-f", "-"], &pod(name, 3));
        cluster.wait_for(
            V,
            &["get", "pod", name, "-o", "jsonpath={.status.phase}"],
            |out| out == "Running",
        );
    }
    // Two GPUs are free, one per NUMA node: the kubelet would refuse a 2-GPU pod, so the
    // scheduler keeps it Pending instead of binding it to fail.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &pod("split", 2));
    let message = cluster.wait_for(
        V,
        &[
            "get",
            "pod",
            "split",
            "-o",
            "jsonpath={.status.phase} {.status.conditions[?(@.type==\"PodScheduled\")].message}",
        ],
        |out| out.contains("nodes are available"),
    );
    assert!(
        message.starts_with("Pending 0/1 nodes are available: 1 node(s) could not align the pod's GPUs to the Topology Manager policy."),
        "{message}"
    );
    // A single GPU still fits.
    cluster.ok_stdin(V, &["apply", "-f", "-"], &pod("one", 1));
    cluster.wait_for(
        V,
        &["get", "pod", "one", "-o", "jsonpath={.status.phase}"],
        |out| out == "Running",
    );
}

#[test]
fn a_four_gpu_pod_gets_an_nvlink_set_on_one_numa_node() {
    let topology = "apiVersion: tessera.dev/v1alpha1\nkind: ClusterTopology\npools:\n- name: dgx\n  count: 1\n  server: dgx-h100\n  devices: {exposure: device-plugin}\n  kubelet: {topologyManagerPolicy: single-numa-node}\n";
    let cluster = Cluster::start_with_topology(topology, 1);
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: four}\nspec:\n  containers: [{name: c, image: cuda:12, resources: {limits: {nvidia.com/gpu: 4}}}]\n",
    );
    assert_eq!(node_of(&cluster, "four"), "dgx-1");
    let logs = cluster.ok(V, &["logs", "four"]);
    let visible = logs
        .lines()
        .find_map(|l| l.strip_prefix("NVIDIA_VISIBLE_DEVICES="))
        .unwrap_or_else(|| panic!("{logs}"));
    assert_eq!(visible.split(',').count(), 4);
    // All four on NUMA node 0, whose GPUs are NV18-connected through the NVSwitch fabric.
    let free = cluster.wait_for(
        V,
        &[
            "get",
            "node",
            "dgx-1",
            "-o",
            r#"jsonpath={.metadata.annotations.tessera\.dev/gpus-free-per-numa}"#,
        ],
        |out| out == "0:0,1:4",
    );
    assert_eq!(free, "0:0,1:4");
    let matrix = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["catalog", "--topology", "dgx-h100"])
        .output()
        .expect("catalog");
    let matrix = String::from_utf8_lossy(&matrix.stdout);
    assert!(matrix.contains("GPU0\tX\tNV18\tNV18\tNV18"), "{matrix}");
}

#[test]
fn jobset_exclusive_topology_gives_each_job_its_own_rack() {
    let cluster = Cluster::start();
    let crd = format!(
        "{}/tests/fixtures/upstream/jobset/crd-jobsets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.ok(V, &["apply", "--server-side", "-f", &crd]);
    cluster.wait_for(
        V,
        &[
            "get",
            "crd",
            "jobsets.jobset.x-k8s.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ],
        |out| out == "True",
    );
    let jobset = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: racks\n  annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: tessera.dev/rack}\nspec:\n  replicatedJobs:\n  - name: workers\n    replicas: 2\n    template:\n      spec:\n        parallelism: 2\n        completions: 2\n        template:\n          metadata: {annotations: {sim.tessera.dev/duration: 1h}}\n          spec:\n            restartPolicy: Never\n            containers: [{name: w, image: trainer:1}]\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], jobset);
    let placed = cluster.wait_for(
        V,
        &["get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=racks", "-o",
          "jsonpath={range .items[*]}{.metadata.labels.jobset\\.sigs\\.k8s\\.io/job-index}={.spec.nodeName}{\"\\n\"}{end}"],
        |out| out.lines().filter(|l| !l.ends_with('=')).count() == 4,
    );
    let rack_of = |node: &str| {
        cluster.ok(
            V,
            &[
                "get",
                "node",
                node,
                "-o",
                r#"jsonpath={.metadata.labels.tessera\.dev/rack}"#,
            ],
        )
    };
    let mut racks: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for line in placed.lines() {
        let (job, node) = line.split_once('=').expect("job=node");
        racks
            .entry(job.to_string())
            .or_default()
            .insert(rack_of(node));
    }
    assert_eq!(racks.len(), 2, "{placed}");
    assert!(
        racks.values().all(|r| r.len() == 1),
        "each job in one rack: {racks:?}"
    );
    let used: std::collections::BTreeSet<&String> = racks.values().flatten().collect();
    assert_eq!(used.len(), 2, "the two jobs in different racks: {racks:?}");
}

#[test]
fn leader_worker_set_exclusive_topology_gives_each_group_its_own_rack() {
    let cluster = Cluster::start();
    let crd = format!(
        "{}/tests/fixtures/upstream/lws/crd-leaderworkersets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    cluster.ok(V, &["apply", "--server-side", "-f", &crd]);
    cluster.wait_for(
        V,
        &[
            "get",
            "crd",
            "leaderworkersets.leaderworkerset.x-k8s.io",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
        ],
        |out| out == "True",
    );
    let lws = "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: serve\n  annotations: {leaderworkerset.sigs.k8s.io/exclusive-topology: tessera.dev/rack}\nspec:\n  replicas: 2\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n      spec:\n        containers: [{name: vllm, image: vllm:0.9}]\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], lws);
    let placed = cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "leaderworkerset.sigs.k8s.io/name=serve",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.nodeName}{\"\\n\"}{end}",
        ],
        |out| out.lines().filter(|l| !l.ends_with('=')).count() == 4,
    );
    let rack_of = |node: &str| {
        cluster.ok(
            V,
            &[
                "get",
                "node",
                node,
                "-o",
                r#"jsonpath={.metadata.labels.tessera\.dev/rack}"#,
            ],
        )
    };
    // Pods serve-<g> (leader) and serve-<g>-1 (worker) form group g.
    let mut racks: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for line in placed.lines() {
        let (pod, node) = line.split_once('=').expect("pod=node");
        let group = pod
            .trim_start_matches("serve-")
            .split('-')
            .next()
            .unwrap_or_default()
            .to_string();
        racks.entry(group).or_default().insert(rack_of(node));
    }
    assert_eq!(racks.len(), 2, "{placed}");
    assert!(
        racks.values().all(|r| r.len() == 1),
        "each group in one rack: {racks:?}"
    );
    let used: std::collections::BTreeSet<&String> = racks.values().flatten().collect();
    assert_eq!(used.len(), 2, "the groups in different racks: {racks:?}");
}
