//! Kueue's Topology-Aware Scheduling end to end on `tessera up`, driven by kubectl 1.33: a
//! lab of GB200 NVL72 compute trays in two racks (each rack one NVLink domain, its nodes
//! labelled with GPU Feature Discovery's `nvidia.com/gpu.clique`), a Topology
//! [block, rack, clique, hostname], a TAS ResourceFlavor, a ClusterQueue and a LocalQueue.
//! The page's 16-pod indexed Job asking for one NVLink domain (`podset-required-topology`)
//! gets its Workload's `topologyRequest` and `topologyAssignment`, its pods start gated and are
//! ungated onto nodes of one clique; a second asking for one rack lands in one rack, and so
//! does a StatefulSet's pod group (Kueue's pod integration with TAS). Deleting the Topology makes the
//! ClusterQueue inactive with Kueue's `TopologyNotFound` while both admissions stay.

use std::collections::BTreeSet;

use crate::support::Cluster;

const V: &str = "1.33";

/// Ten trays (four GPUs each) over two racks: 20 GPUs per rack.
const LAB: &str = "apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: gb200
  count: 10
  server: gb200-nvl72-tray
  labels: {tessera.dev/pool: gb200}
  placement: {zone: lab-a, block: b1, racks: [nvl-a, nvl-b]}
  devices: {exposure: device-plugin}
";

/// The Topology, TAS flavor, queues and a 16-pod Job asking for one NVLink domain, as
/// docs/queueing.md shows them.
const SETUP: &str = include_str!("../../../../examples/queueing/tas.yaml");

/// A 16-pod indexed Job in the LocalQueue, one GPU per pod, all pods in one domain of `level`.
fn job(name: &str, level: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  labels: {{kueue.x-k8s.io/queue-name: team}}
spec:
  completionMode: Indexed
  parallelism: 16
  completions: 16
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: {level}
        sim.tessera.dev/duration: 1h
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: trainer:1
        resources: {{requests: {{cpu: 100m, nvidia.com/gpu: \"1\"}}, limits: {{nvidia.com/gpu: \"1\"}}}}
"
    )
}

/// The Job's Workload name, once it exists.
fn workload_of(cluster: &Cluster, job: &str) -> String {
    let uid = cluster.ok(V, &["get", "job", job, "-o", "jsonpath={.metadata.uid}"]);
    let selector = format!("kueue.x-k8s.io/job-uid={uid}");
    cluster.wait_for(
        V,
        &[
            "get",
            "workloads",
            "-l",
            &selector,
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
        |out| !out.is_empty(),
    )
}

/// The (rack, clique) of every node by name.
fn node_domains(cluster: &Cluster) -> std::collections::BTreeMap<String, (String, String)> {
    let out = cluster.ok(
        V,
        &[
            "get",
            "nodes",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.tessera\\.dev/rack} {.metadata.labels.nvidia\\.com/gpu\\.clique}{\"\\n\"}{end}",
        ],
    );
    out.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let name = parts.next()?.to_owned();
            Some((name, (parts.next()?.to_owned(), parts.next()?.to_owned())))
        })
        .collect()
}

/// Waits until the Job's 16 pods are bound; their nodes.
fn bound_nodes(cluster: &Cluster, job: &str) -> Vec<String> {
    let selector = format!("job-name={job}");
    let out = cluster.wait_for_within(
        V,
        &[
            "get",
            "pods",
            "-l",
            &selector,
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
        ],
        std::time::Duration::from_secs(90),
        |out| out.lines().filter(|l| !l.trim().is_empty()).count() == 16,
    );
    out.lines().map(str::to_owned).collect()
}

#[test]
fn kueue_tas_places_a_job_in_one_rack_and_one_nvlink_domain() {
    let cluster = Cluster::start_with_topology(LAB, 10);
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);
    cluster.wait_for(
        V,
        &[
            "get",
            "clusterqueue",
            "training",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Active\")].reason}: {.status.conditions[?(@.type==\"Active\")].message}",
        ],
        |out| out.starts_with("Ready"),
    );
    // Kueue's job webhook refuses malformed topology annotations, naming the field; nothing
    // is stored.
    let bad = job("bad-annotations", "cloud.com/rack").replace(
        "sim.tessera.dev/duration: 1h",
        "sim.tessera.dev/duration: 1h\n        kueue.x-k8s.io/podset-slice-size: \"32\"",
    );
    let refused = cluster.fails(V, &["apply", "-f", "-"], Some(&bad));
    assert!(
        refused.contains(
            "spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]: Forbidden: may not be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not specified"
        ),
        "{refused}"
    );
    cluster.fails(V, &["get", "job", "bad-annotations"], None);
    let domains = node_domains(&cluster);
    let cliques: BTreeSet<&String> = domains.values().map(|(_, clique)| clique).collect();
    assert_eq!(cliques.len(), 2, "one NVLink clique per rack: {domains:?}");

    // One NVLink domain (the example's Job): the Workload carries the request and its
    // placement, the pods one clique.
    let nvlink_workload = workload_of(&cluster, "nvlink-job");
    let request = cluster.ok(
        V,
        &[
            "get",
            "workload",
            &nvlink_workload,
            "-o",
            "jsonpath={.spec.podSets[0].topologyRequest.required} {.spec.podSets[0].topologyRequest.podIndexLabel}",
        ],
    );
    assert_eq!(
        request,
        "nvidia.com/gpu.clique batch.kubernetes.io/job-completion-index"
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            &nvlink_workload,
            "-o",
            // The QuotaReserved message shows why, should it not be admitted.
            "jsonpath={.status.conditions[?(@.type==\"Admitted\")].status} {.status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ],
        |out| out.starts_with("True"),
    );
    let levels = cluster.ok(
        V,
        &[
            "get",
            "workload",
            &nvlink_workload,
            "-o",
            "jsonpath={.status.admission.podSetAssignments[0].topologyAssignment.levels}",
        ],
    );
    assert_eq!(levels, "[\"kubernetes.io/hostname\"]");
    // Both served versions show the placement (v1beta1 as domains).
    let v1beta1 = cluster.ok(
        V,
        &[
            "get",
            "workloads.v1beta1.kueue.x-k8s.io",
            &nvlink_workload,
            "-o",
            "jsonpath={.status.admission.podSetAssignments[0].topologyAssignment.domains[*].count}",
        ],
    );
    let placed: i64 = v1beta1
        .split_whitespace()
        .filter_map(|c| c.parse::<i64>().ok())
        .sum();
    assert_eq!(placed, 16, "{v1beta1}");
    let cliques: BTreeSet<String> = bound_nodes(&cluster, "nvlink-job")
        .iter()
        .map(|node| domains[node].1.clone())
        .collect();
    assert_eq!(
        cliques.len(),
        1,
        "all 16 pods in one NVLink domain: {cliques:?}"
    );
    let gates = cluster.ok(
        V,
        &[
            "get",
            "pods",
            "-l",
            "job-name=nvlink-job",
            "-o",
            "jsonpath={.items[*].spec.schedulingGates}",
        ],
    );
    assert!(!gates.contains("kueue.x-k8s.io/topology"), "{gates}");

    // One rack.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        &job("rack-job", "tessera.dev/rack"),
    );
    let rack_workload = workload_of(&cluster, "rack-job");
    let racks: BTreeSet<String> = bound_nodes(&cluster, "rack-job")
        .iter()
        .map(|node| domains[node].0.clone())
        .collect();
    assert_eq!(racks.len(), 1, "all 16 pods in one rack: {racks:?}");

    // A StatefulSet asking for one rack: Kueue's pod webhook gates its pods for TAS too, its
    // group Workload gets a topology assignment, and the four pods land in one rack (each
    // rack has four GPUs left).
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: rack-sts\n  labels: {kueue.x-k8s.io/queue-name: team}\nspec:\n  replicas: 4\n  serviceName: rack-sts\n  selector: {matchLabels: {app: rack-sts}}\n  template:\n    metadata:\n      labels: {app: rack-sts}\n      annotations: {kueue.x-k8s.io/podset-required-topology: tessera.dev/rack}\n    spec:\n      containers:\n      - name: serve\n        image: server:1\n        resources: {requests: {cpu: 100m, nvidia.com/gpu: \"1\"}, limits: {nvidia.com/gpu: \"1\"}}\n",
    );
    let sts_nodes = cluster.wait_for_within(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=rack-sts",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
        ],
        std::time::Duration::from_secs(90),
        |out| out.lines().filter(|l| !l.trim().is_empty()).count() == 4,
    );
    let sts_racks: BTreeSet<String> = sts_nodes
        .lines()
        .map(|node| domains[node].0.clone())
        .collect();
    assert_eq!(sts_racks.len(), 1, "all 4 pods in one rack: {sts_racks:?}");
    let requests = cluster.ok(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.podSets[0].topologyRequest.required} {.spec.podSets[0].topologyRequest.podIndexLabel}{\"\\n\"}{end}",
        ],
    );
    let sts_request = requests
        .lines()
        .find(|line| line.starts_with("statefulset-rack-sts-"))
        .and_then(|line| line.split_once(' '))
        .map(|(_, request)| request.to_owned());
    assert_eq!(
        sts_request.as_deref(),
        Some("tessera.dev/rack apps.kubernetes.io/pod-index"),
        "{requests}"
    );

    // Bad input: the flavor's Topology goes away. The ClusterQueue says so; nothing admitted
    // is lost.
    cluster.ok(V, &["delete", "topology", "nvl"]);
    let active = cluster.wait_for(
        V,
        &[
            "get",
            "clusterqueue",
            "training",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Active\")].reason}: {.status.conditions[?(@.type==\"Active\")].message}",
        ],
        |out| out.starts_with("TopologyNotFound"),
    );
    assert_eq!(
        active,
        "TopologyNotFound: Can't admit new workloads: there is no Topology \"nvl\" for TAS flavor \"gb200\"."
    );
    for workload in [&rack_workload, &nvlink_workload] {
        let admitted = cluster.ok(
            V,
            &[
                "get",
                "workload",
                workload,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Admitted\")].status} {.status.admission.clusterQueue}",
            ],
        );
        assert_eq!(admitted, "True training", "{workload}");
    }
}
