//! Kueue's Pod integration on `tessera up`, driven by kubectl 1.33 with Kueue's quick-start
//! queues (9 cpu): a single Pod naming the LocalQueue is created behind the
//! `kueue.x-k8s.io/admission` gate, admitted and run; a pod group of 2 waits gated while that
//! pod holds the quota (its Workload, named by the group, pending with Kueue's message) and is
//! ungated and scheduled whole once the pod finishes; a Deployment's pods are admitted one
//! Workload each; a StatefulSet's pods form one group Workload of its replicas, owned by the
//! StatefulSet. A LeaderWorkerSet of 2 groups × 2 pods with quota for one group (a pod holds
//! the rest): one Workload per group, owned by the LeaderWorkerSet; one group runs, the other
//! waits gated until the pod finishes, then is admitted and runs whole.

use crate::support::Cluster;

const V: &str = "1.33";

const SETUP: &str = include_str!("../fixtures/upstream/kueue/quick-start-setup.yaml");

/// A pod in `user-queue` asking for `cpu`, running `duration` on the twins, with extra
/// metadata lines (labels and annotations maps' entries).
fn pod(name: &str, cpu: &str, duration: &str, labels: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/queue-name: user-queue{labels}}}\n  annotations: {{sim.tessera.dev/duration: {duration}{annotations}}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: work\n    image: worker:1\n    resources: {{requests: {{cpu: \"{cpu}\", memory: 100Mi}}}}\n"
    )
}

fn jsonpath(cluster: &Cluster, kind: &str, name: &str, path: &str) -> String {
    cluster.ok(V, &["get", kind, name, "-o", &format!("jsonpath={path}")])
}

fn wait_admitted(cluster: &Cluster, workload: &str) {
    wait_admitted_within(cluster, workload, 20);
}

#[test]
fn kueue_admits_plain_pods_pod_groups_deployments_and_statefulsets() {
    let cluster = Cluster::start();
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    // A single pod holding 8 of the 9 cpu: gated at creation, admitted, ungated, run.
    let blocker = pod("blocker", "8", "45s", "", "");
    let gates = cluster.ok_stdin(
        V,
        &["create", "--dry-run=server", "-o", "jsonpath={.spec.schedulingGates[*].name} {.metadata.labels.kueue\\.x-k8s\\.io/managed} {.metadata.finalizers[*]}", "-f", "-"],
        &blocker,
    );
    assert_eq!(
        gates,
        // Kueue's pod webhook with TopologyAwareScheduling (on by default) adds the topology
        // gate too; admission lifts it when the PodSet gets no topology assignment.
        "kueue.x-k8s.io/admission kueue.x-k8s.io/topology true kueue.x-k8s.io/managed"
    );
    cluster.ok_stdin(V, &["create", "-f", "-"], &blocker);
    let uid = jsonpath(&cluster, "pod", "blocker", "{.metadata.uid}");
    let single = cluster.wait_for(
        V,
        &[
            "get",
            "workloads",
            "-l",
            &format!("kueue.x-k8s.io/job-uid={uid}"),
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
        |out| out.starts_with("pod-blocker-"),
    );
    wait_admitted(&cluster, &single);
    cluster.wait_for(
        V,
        &["get", "pod", "blocker", "-o", "jsonpath={.status.phase}"],
        |out| out == "Running",
    );
    assert_eq!(
        jsonpath(&cluster, "pod", "blocker", "{.spec.schedulingGates}"),
        ""
    );

    // A pod group of 2 × 1 cpu: short of quota, gated, its Workload pending.
    let group = ", kueue.x-k8s.io/pod-group-name: pair";
    let count = ", kueue.x-k8s.io/pod-group-total-count: \"2\"";
    // Bad group input is refused with Kueue's messages.
    let refused = cluster.fails(
        V,
        &["create", "-f", "-"],
        Some(&pod("lonely", "1", "5s", group, "")),
    );
    assert!(
        refused.contains("metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the 'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label should be set"),
        "{refused}"
    );
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &pod("pair-a", "1", "30s", group, count),
    );
    // One pod of two: no Workload yet, Kueue's event says why.
    cluster.wait_for(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=pair-a",
            "-o",
            "jsonpath={.items[*].message}",
        ],
        |out| out.contains("'pair' group has fewer runnable pods than expected"),
    );
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &pod("pair-b", "1", "30s", group, count),
    );
    let message = cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            "pair",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ],
        |out| {
            out.contains(
                "insufficient unused quota for cpu in flavor default-flavor, 1 more needed",
            )
        },
    );
    assert!(
        message.starts_with("couldn't assign flavors to pod set "),
        "{message}"
    );
    assert_eq!(
        jsonpath(&cluster, "workload", "pair", "{.spec.podSets[0].count}"),
        "2"
    );
    for member in ["pair-a", "pair-b"] {
        assert_eq!(
            jsonpath(
                &cluster,
                "pod",
                member,
                "{.status.phase} {.spec.schedulingGates[*].name}"
            ),
            "Pending kueue.x-k8s.io/admission kueue.x-k8s.io/topology"
        );
    }

    // The blocker finishes: its Workload too, and the group is admitted and runs whole.
    cluster.wait_for_within(
        V,
        &[
            "get",
            "workload",
            &single,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Finished\")].reason}",
        ],
        std::time::Duration::from_secs(90),
        |out| out == "Succeeded",
    );
    wait_admitted(&cluster, "pair");
    for member in ["pair-a", "pair-b"] {
        cluster.wait_for(
            V,
            &["get", "pod", member, "-o", "jsonpath={.status.phase}"],
            |out| out == "Running",
        );
    }

    // A Deployment naming the queue: each pod its own Workload, admitted.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  labels: {kueue.x-k8s.io/queue-name: user-queue}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n        resources: {requests: {cpu: \"1\", memory: 100Mi}}\n",
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        |out| out == "Running Running",
    );
    let labels = cluster.ok(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "-o",
            "jsonpath={.items[*].metadata.labels.kueue\\.x-k8s\\.io/queue-name}",
        ],
    );
    assert_eq!(labels, "user-queue user-queue");
    let names = cluster.ok(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert_eq!(
        names
            .split(' ')
            .filter(|n| n.starts_with("pod-web-"))
            .count(),
        2,
        "{names}"
    );

    // A StatefulSet naming the queue: its pods one group of its replicas.
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\n  labels: {kueue.x-k8s.io/queue-name: user-queue}\nspec:\n  replicas: 2\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata:\n      labels: {app: db}\n    spec:\n      containers:\n      - name: db\n        image: db:1\n        resources: {requests: {cpu: \"1\", memory: 100Mi}}\n",
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].status.phase}",
        ],
        |out| out == "Running Running",
    );
    let group = cluster.ok(V, &["get", "pod", "db-0", "-o", "jsonpath={.metadata.labels.kueue\\.x-k8s\\.io/pod-group-name} {.metadata.annotations.kueue\\.x-k8s\\.io/pod-group-total-count}"]);
    assert!(
        group.starts_with("statefulset-db-") && group.ends_with(" 2"),
        "{group}"
    );
    let workload = group.split(' ').next().unwrap_or_default().to_owned();
    assert_eq!(
        jsonpath(
            &cluster,
            "workload",
            &workload,
            "{.spec.podSets[0].name} {.spec.podSets[0].count}"
        ),
        "main 2"
    );
    wait_admitted(&cluster, &workload);
    // Owned as Kueue's StatefulSet reconciler owns it: the StatefulSet, then its pods.
    cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            &workload,
            "-o",
            "jsonpath={.metadata.ownerReferences[*].kind} {.metadata.annotations.kueue\\.x-k8s\\.io/job-owner-gvk}",
        ],
        |out| out == "StatefulSet Pod Pod apps/v1, Kind=StatefulSet",
    );
}

/// `name=admitted` per Workload, one a line.
const ADMITTED_LINES: &str = "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Admitted\")].status}{\"\\n\"}{end}";

/// `phase:gates` per pod, one a line.
const PHASE_LINES: &str =
    "jsonpath={range .items[*]}{.status.phase}:{.spec.schedulingGates[*].name}{\"\\n\"}{end}";

/// The selector of the pods of a group Kueue admits with this Workload.
fn pod_group(workload: &str) -> String {
    format!("kueue.x-k8s.io/pod-group-name={workload}")
}

#[test]
fn kueue_admits_a_leader_worker_set_one_group_at_a_time() {
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
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    // A pod holds 3 of the 9 cpu: room for one group of 2 × 2 cpu, not two.
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &pod("holder", "3", "30s", "", ""),
    );
    cluster.wait_for(
        V,
        &["get", "pod", "holder", "-o", "jsonpath={.status.phase}"],
        |out| out == "Running",
    );
    cluster.ok_stdin(
        V,
        &["apply", "-f", "-"],
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata:\n  name: serve\n  labels: {kueue.x-k8s.io/queue-name: user-queue}\nspec:\n  replicas: 2\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n      spec:\n        containers:\n        - name: vllm\n          image: vllm:0.9\n          resources: {requests: {cpu: \"2\", memory: 100Mi}}\n",
    );

    // One Workload per group, named and owned as Kueue's LeaderWorkerSet reconciler does.
    let listed = cluster.wait_for(V, &["get", "workloads", "-o", "name"], |out| {
        out.matches("leaderworkerset-serve-").count() == 2
    });
    let mut groups: Vec<String> = listed
        .lines()
        .filter_map(|l| l.strip_prefix("workload.kueue.x-k8s.io/"))
        .filter(|n| n.starts_with("leaderworkerset-serve-"))
        .map(str::to_owned)
        .collect();
    groups.sort();
    for (index, group) in groups.iter().enumerate() {
        assert!(
            group.starts_with(&format!("leaderworkerset-serve-{index}-")),
            "{groups:?}"
        );
        assert_eq!(
            jsonpath(
                &cluster,
                "workload",
                group,
                "{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name} {.metadata.annotations.kueue\\.x-k8s\\.io/job-owner-gvk} {.metadata.annotations.kueue\\.x-k8s\\.io/component-workload-index} {.spec.podSets[0].name}={.spec.podSets[0].count}"
            ),
            format!(
                "LeaderWorkerSet/serve leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet {index} main=2"
            )
        );
    }

    // One group admitted and running whole; the other pending, its pods gated.
    let admitted_group = |out: &str| {
        out.lines()
            .filter(|l| l.starts_with("leaderworkerset-serve-") && l.ends_with("=True"))
            .filter_map(|l| l.strip_prefix("leaderworkerset-serve-")?.split('-').next())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let states = cluster.wait_for(V, &["get", "workloads", "-o", ADMITTED_LINES], |out| {
        admitted_group(out).len() == 1
    });
    let running = admitted_group(&states).concat();
    let (running, waiting) = if running == "0" {
        (&groups[0], &groups[1])
    } else {
        (&groups[1], &groups[0])
    };
    let both_running = |out: &str| out == "Running:\nRunning:\n";
    cluster.wait_for(
        V,
        &["get", "pods", "-l", &pod_group(running), "-o", PHASE_LINES],
        both_running,
    );
    let message = cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            waiting,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ],
        |out| out.contains("insufficient unused quota for cpu in flavor default-flavor"),
    );
    assert!(
        message.starts_with("couldn't assign flavors to pod set main"),
        "{message}"
    );
    let gated = cluster.ok(
        V,
        &["get", "pods", "-l", &pod_group(waiting), "-o", PHASE_LINES],
    );
    assert!(
        !gated.is_empty()
            && gated
                .lines()
                .all(|l| l == "Pending:kueue.x-k8s.io/admission kueue.x-k8s.io/topology"),
        "{gated}"
    );

    // The pod finishes and frees its quota: the waiting group is admitted and runs whole.
    wait_admitted_within(&cluster, waiting, 90);
    cluster.wait_for(
        V,
        &["get", "pods", "-l", &pod_group(waiting), "-o", PHASE_LINES],
        both_running,
    );
}

fn wait_admitted_within(cluster: &Cluster, workload: &str, seconds: u64) {
    cluster.wait_for_within(
        V,
        &[
            "get",
            "workload",
            workload,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Admitted\")].status}",
        ],
        std::time::Duration::from_secs(seconds),
        |out| out == "True",
    );
}
