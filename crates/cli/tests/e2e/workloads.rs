//! Workload controllers driven with kubectl; a test binder stands in for the scheduler.

use crate::support::Cluster;

#[test]
fn indexed_jobs_complete_and_failure_policies_fail_fast() {
    let cluster = Cluster::start();
    let v = "1.33";
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: shards}\nspec:\n  completions: 3\n  parallelism: 2\n  completionMode: Indexed\n  template:\n    metadata:\n      annotations: {sim.tessera.dev/duration: 1s}\n    spec:\n      restartPolicy: Never\n      containers: [{name: work, image: worker:1}]\n";
    cluster.ok_stdin(v, &["apply", "-f", "-"], job);
    cluster.ok(
        v,
        &[
            "wait",
            "--for=condition=complete",
            "job/shards",
            "--timeout=30s",
        ],
    );
    let table = cluster.ok(v, &["get", "job", "shards"]);
    assert!(
        table.contains("Complete") && table.contains("3/3"),
        "{table}"
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "job",
                "shards",
                "-o",
                "jsonpath={.status.completedIndexes}"
            ]
        ),
        "0-2"
    );
    let indexes = cluster.ok(
        v,
        &["get", "pods", "-l", "batch.kubernetes.io/job-name=shards", "-o", "jsonpath={range .items[*]}{.spec.containers[0].env[?(@.name==\"JOB_COMPLETION_INDEX\")].value}{\" \"}{end}"],
    );
    let mut seen: Vec<&str> = indexes.split_whitespace().collect();
    seen.sort();
    assert_eq!(seen, ["0", "1", "2"]);
    let finalizers = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-l",
            "job-name=shards",
            "-o",
            "jsonpath={.items[*].metadata.finalizers}",
        ],
    );
    assert!(
        finalizers.trim().is_empty(),
        "tracking finalizers are released: {finalizers}"
    );

    let failing = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: crash}\nspec:\n  backoffLimit: 5\n  podFailurePolicy:\n    rules:\n    - action: FailJob\n      onExitCodes: {containerName: work, operator: In, values: [42]}\n  template:\n    metadata:\n      annotations: {sim.tessera.dev/duration: 500ms, sim.tessera.dev/exit-code: \"42\"}\n    spec:\n      restartPolicy: Never\n      containers: [{name: work, image: worker:1}]\n";
    cluster.ok_stdin(v, &["apply", "-f", "-"], failing);
    cluster.ok(
        v,
        &[
            "wait",
            "--for=condition=failed",
            "job/crash",
            "--timeout=30s",
        ],
    );
    let reason = cluster.ok(
        v,
        &[
            "get",
            "job",
            "crash",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Failed\")].reason}",
        ],
    );
    assert_eq!(reason, "PodFailurePolicy");
    assert_eq!(
        cluster.ok(
            v,
            &["get", "job", "crash", "-o", "jsonpath={.status.failed}"]
        ),
        "1"
    );

    // Deleting a Job deletes its pods (their finalizers released).
    cluster.ok(v, &["delete", "job", "shards"]);
    cluster.wait_for(
        v,
        &["get", "pods", "-l", "job-name=shards", "-o", "name"],
        |out| out.trim().is_empty(),
    );
}

#[test]
fn deployments_roll_out_and_roll_forward() {
    let cluster = Cluster::start();
    let v = "1.33";
    cluster.ok(
        v,
        &[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=3",
        ],
    );
    let status = cluster.ok(v, &["rollout", "status", "deployment/web", "--timeout=30s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let table = cluster.ok(v, &["get", "deployment", "web"]);
    assert!(
        table.lines().nth(1).is_some_and(|row| row.contains("3/3")),
        "{table}"
    );
    cluster.ok(v, &["set", "image", "deployment/web", "nginx=nginx:1.28"]);
    let status = cluster.ok(v, &["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(status.contains("successfully rolled out"), "{status}");
    let sets = cluster.ok(v, &["get", "rs", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.spec.replicas}/{.spec.template.spec.containers[0].image} {end}"]);
    let mut sets: Vec<&str> = sets.split_whitespace().collect();
    sets.sort();
    assert_eq!(sets, ["0/nginx:1.27", "3/nginx:1.28"]);
    let images = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-l",
            "app=web",
            "--field-selector=status.phase=Running",
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        ],
    );
    assert_eq!(
        images
            .split_whitespace()
            .filter(|i| *i == "nginx:1.28")
            .count(),
        3,
        "{images}"
    );
    cluster.ok(v, &["scale", "deployment", "web", "--replicas=1"]);
    cluster.wait_for(
        v,
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.status.replicas}/{.status.availableReplicas}",
        ],
        |out| out == "1/1",
    );
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}"
            ]
        ),
        "NewReplicaSetAvailable"
    );
}

#[test]
fn daemon_sets_and_stateful_sets() {
    let cluster = Cluster::start();
    let v = "1.33";
    let daemon = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: gpu-agent}\nspec:\n  selector: {matchLabels: {app: gpu-agent}}\n  template:\n    metadata: {labels: {app: gpu-agent}}\n    spec:\n      nodeSelector: {nvidia.com/gpu.present: \"true\"}\n      containers: [{name: agent, image: agent:1}]\n";
    cluster.ok_stdin(v, &["apply", "-f", "-"], daemon);
    cluster.wait_for(
        v,
        &[
            "get",
            "ds",
            "gpu-agent",
            "-o",
            "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
        ],
        // GPU nodes by their GFD label; the tainted L40S node is skipped, as upstream does.
        |out| out == "4/4",
    );
    let nodes = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-l",
            "app=gpu-agent",
            "-o",
            "jsonpath={.items[*].spec.nodeName}",
        ],
    );
    let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
    nodes.sort();
    assert_eq!(nodes, ["h100-1", "h100-2", "h200-1", "h200-2"]);

    let stateful = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  serviceName: db\n  replicas: 3\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec:\n      containers: [{name: db, image: db:1, volumeMounts: [{name: data, mountPath: /var/lib/db}]}]\n  volumeClaimTemplates:\n  - metadata: {name: data}\n    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n";
    cluster.ok_stdin(v, &["apply", "-f", "-"], stateful);
    cluster.wait_for(
        v,
        &["get", "sts", "db", "-o", "jsonpath={.status.readyReplicas}"],
        |out| out == "3",
    );
    let names = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert_eq!(names, "db-0 db-1 db-2");
    // Each pod mounts its ordinal's claim from the claim template.
    let claim = cluster.ok(
        v,
        &[
            "get",
            "pod",
            "db-1",
            "-o",
            "jsonpath={.spec.volumes[?(@.name=='data')].persistentVolumeClaim.claimName}",
        ],
    );
    assert_eq!(claim, "data-db-1");
    let rollout = cluster.ok(v, &["rollout", "status", "statefulset/db", "--timeout=20s"]);
    assert!(
        rollout.contains("roll out complete") || rollout.contains("rolled out"),
        "{rollout}"
    );
    cluster.ok(v, &["scale", "statefulset", "db", "--replicas=1"]);
    cluster.wait_for(
        v,
        &[
            "get",
            "pods",
            "-l",
            "app=db",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
        |out| out == "db-0",
    );
}

fn fixture(path: &str) -> String {
    format!(
        "{}/tests/fixtures/upstream/{path}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn upstream_jobset_and_leader_worker_set_examples_run() {
    let cluster = Cluster::start();
    let v = "1.33";
    cluster.ok(
        v,
        &[
            "apply",
            "--server-side",
            "-f",
            &fixture("jobset/crd-jobsets.yaml"),
        ],
    );
    cluster.ok(
        v,
        &[
            "apply",
            "--server-side",
            "-f",
            &fixture("lws/crd-leaderworkersets.yaml"),
        ],
    );
    cluster.ok(v, &["apply", "-f", &fixture("jobset/paralleljobs.yaml")]);
    cluster.wait_for(
        v,
        &[
            "get",
            "jobset",
            "paralleljobs",
            "-o",
            "jsonpath={.status.terminalState}",
        ],
        |out| out == "Completed",
    );
    let table = cluster.ok(v, &["get", "jobset", "paralleljobs"]);
    assert!(table.contains("Completed"), "{table}");
    let jobs = cluster.ok(
        v,
        &[
            "get",
            "jobs",
            "-l",
            "jobset.sigs.k8s.io/jobset-name=paralleljobs",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert_eq!(jobs, "paralleljobs-driver-0 paralleljobs-workers-0");
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "svc",
                "paralleljobs",
                "-o",
                "jsonpath={.spec.clusterIP}"
            ]
        ),
        "None"
    );

    cluster.ok(v, &["apply", "-f", &fixture("lws/lws.yaml")]);
    cluster.wait_for(
        v,
        &[
            "get",
            "lws",
            "leaderworkerset-sample",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "3",
    );
    let pods = cluster.ok(
        v,
        &[
            "get",
            "pods",
            "-l",
            "leaderworkerset.sigs.k8s.io/name=leaderworkerset-sample",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    let mut pods: Vec<&str> = pods.split_whitespace().collect();
    pods.sort();
    assert_eq!(pods.len(), 12, "{pods:?}");
    assert!(
        pods.contains(&"leaderworkerset-sample-0") && pods.contains(&"leaderworkerset-sample-2-3"),
        "{pods:?}"
    );
    let address = cluster.ok(
        v,
        &[
            "get",
            "pod",
            "leaderworkerset-sample-1-2",
            "-o",
            "jsonpath={.spec.containers[0].env[?(@.name==\"LWS_LEADER_ADDRESS\")].value}",
        ],
    );
    assert_eq!(
        address,
        "leaderworkerset-sample-1.leaderworkerset-sample.default"
    );
}

/// Polls a kubectl query until `check` holds, for up to a minute: rolling the groups of a
/// LeaderWorkerSet one at a time takes longer than [`Cluster::wait_for`] allows.
fn wait_long(cluster: &Cluster, v: &str, args: &[&str], check: impl Fn(&str) -> bool) -> String {
    cluster.wait_for_within(v, args, std::time::Duration::from_secs(60), check)
}

fn install_crd(cluster: &Cluster, v: &str, crd: &str) {
    cluster.ok(v, &["apply", "--server-side", "-f", &fixture(crd)]);
}

#[test]
fn upstream_leader_worker_set_with_volume_claim_templates_gets_claims_and_drops_exclusive_placement()
 {
    let cluster = Cluster::start();
    let v = "1.33";
    install_crd(&cluster, v, "lws/crd-leaderworkersets.yaml");
    // Upstream's fixture names the class `default`, which its test clusters have: here a
    // class of that name on the simulated local CSI driver, so the claims are provisioned
    // and bound before the pods run.
    cluster.ok_stdin(
        v,
        &["apply", "-f", "-"],
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: default}\n\
         provisioner: local.csi.tessera.dev\nvolumeBindingMode: WaitForFirstConsumer\n",
    );
    cluster.ok(
        v,
        &[
            "apply",
            "-f",
            &fixture("lws/lws-volume-claim-templates.yaml"),
        ],
    );
    cluster.wait_for(
        v,
        &[
            "get",
            "lws",
            "lws",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "2",
    );
    // One claim per template and pod, leaders' and workers' alike.
    let claims = cluster.ok(
        v,
        &["get", "pvc", "-o", "jsonpath={.items[*].metadata.name}"],
    );
    let mut claims: Vec<&str> = claims.split_whitespace().collect();
    claims.sort();
    assert_eq!(
        claims,
        [
            "persistent-storage-lws-0",
            "persistent-storage-lws-0-1",
            "persistent-storage-lws-1",
            "persistent-storage-lws-1-1"
        ]
    );
    let claim = |pod: &str| {
        cluster.ok(
            v,
            &[
                "get",
                "pod",
                pod,
                "-o",
                "jsonpath={.spec.volumes[?(@.name==\"persistent-storage\")].persistentVolumeClaim.claimName}",
            ],
        )
    };
    assert_eq!(claim("lws-0"), "persistent-storage-lws-0");
    assert_eq!(claim("lws-1-1"), "persistent-storage-lws-1-1");
    assert_eq!(
        cluster.ok(
            v,
            &[
                "get",
                "pvc",
                "persistent-storage-lws-0-1",
                "-o",
                "jsonpath={.spec.resources.requests.storage} {.metadata.labels.leaderworkerset\\.sigs\\.k8s\\.io/group-index}"
            ]
        ),
        "10Gi 0"
    );

    // Exclusive placement on, then off again: each time the groups are replaced, the last
    // time by pods without the affinity.
    let topology_keys = [
        "get",
        "pods",
        "-l",
        "leaderworkerset.sigs.k8s.io/name=lws",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}={.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey}{\" \"}{end}",
    ];
    let every_pod = |out: &str, key: &str| {
        let pods: Vec<&str> = out.split_whitespace().collect();
        pods.len() == 4 && pods.iter().all(|p| p.ends_with(&format!("={key}")))
    };
    cluster.ok(
        v,
        &[
            "annotate",
            "lws",
            "lws",
            "leaderworkerset.sigs.k8s.io/exclusive-topology=kubernetes.io/hostname",
        ],
    );
    wait_long(&cluster, v, &topology_keys, |out| {
        every_pod(out, "kubernetes.io/hostname")
    });
    cluster.ok(
        v,
        &[
            "annotate",
            "lws",
            "lws",
            "leaderworkerset.sigs.k8s.io/exclusive-topology-",
        ],
    );
    wait_long(&cluster, v, &topology_keys, |out| every_pod(out, ""));
    wait_long(
        &cluster,
        v,
        &[
            "get",
            "lws",
            "lws",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ],
        |out| out == "2",
    );
}

#[test]
fn upstream_jobset_with_ttl_after_finished_is_deleted_once_finished() {
    let cluster = Cluster::start();
    let v = "1.33";
    install_crd(&cluster, v, "jobset/crd-jobsets.yaml");
    // Upstream's example, its 60 s to live shortened to 2 s.
    let manifest = std::fs::read_to_string(fixture("jobset/ttl-after-finished.yaml"))
        .expect("the fixture")
        .replace("ttlSecondsAfterFinished: 60", "ttlSecondsAfterFinished: 2");
    assert!(manifest.contains("ttlSecondsAfterFinished: 2"));
    cluster.ok_stdin(v, &["apply", "-f", "-"], &manifest);
    cluster.wait_for(
        v,
        &[
            "get",
            "jobset",
            "jobset-with-ttl",
            "-o",
            "jsonpath={.status.terminalState}",
        ],
        |out| out == "Completed",
    );
    // Gone, and its Jobs and pods with it.
    cluster.wait_for(v, &["get", "jobsets", "-o", "name"], |out| {
        out.trim().is_empty()
    });
    cluster.wait_for(
        v,
        &[
            "get",
            "jobs,pods",
            "-l",
            "jobset.sigs.k8s.io/jobset-name=jobset-with-ttl",
            "-o",
            "name",
        ],
        |out| out.trim().is_empty(),
    );
}
