//! Kueue's Configuration file on `tessera up --queue-config`, driven by kubectl 1.33: with
//! `fairSharing` on, two ClusterQueues borrowing from a lender in one cohort, the heavier
//! borrower gives way — its Workload is preempted with reason `InCohortFairSharing` and its
//! Job suspended — and ClusterQueues carry `status.fairSharing.weightedShare`; with
//! `waitForPodsReady`, a Job whose pod can never be scheduled is evicted with
//! `PodsReadyTimeout`, requeued with `requeueState` and, past `backoffLimitCount`,
//! deactivated; with `manageJobsWithoutQueueName`, a Job without the queue-name label is
//! created suspended and its Workload waits for its LocalQueue; a file that does not validate
//! keeps the platform from starting, naming the file, line and field; with
//! `admissionFairSharing` and a ClusterQueue whose admissionScope is
//! `UsageBasedAdmissionFairSharing`, the LocalQueue that has used more waits behind the other
//! one's newer Job, and LocalQueues carry `status.fairSharing.admissionFairSharingStatus`.

use crate::support::{Cluster, up_refuses};

const V: &str = "1.33";

const FAIR_SHARING: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n";

/// A ClusterQueue in cohort `org` with `cpu` nominal CPUs.
fn cluster_queue(name: &str, cpu: u32) -> String {
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: {name}\nspec:\n  cohortName: org\n  namespaceSelector: {{}}\n  preemption:\n    reclaimWithinCohort: Any\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: default-flavor\n      resources:\n      - {{name: cpu, nominalQuota: {cpu}}}\n      - {{name: memory, nominalQuota: 64Gi}}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: {name}\nspec:\n  clusterQueue: {name}\n"
    )
}

/// A one-pod Job in `queue` asking for `cpu` CPUs, running until deleted.
fn job(name: &str, queue: &str, cpu: u32) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/queue-name: {queue}}}\nspec:\n  template:\n    metadata:\n      annotations: {{sim.tessera.dev/duration: 1h}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: worker:1\n        resources: {{requests: {{cpu: \"{cpu}\", memory: 200Mi}}}}\n"
    )
}

fn admitted(cluster: &Cluster, job: &str) -> bool {
    cluster.ok(V, &["get", "job", job, "-o", "jsonpath={.spec.suspend}"]) == "false"
}

#[test]
fn fair_sharing_preempts_the_heavier_borrower() {
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("kueue-config.yaml");
    std::fs::write(&config, FAIR_SHARING).expect("write the configuration");
    let cluster = Cluster::start_with_args(&["--queue-config", &config.to_string_lossy()]);

    let flavor = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n";
    let setup = [
        flavor.to_owned(),
        cluster_queue("lender", 8),
        cluster_queue("team-a", 2),
        cluster_queue("team-b", 2),
    ]
    .join("---\n");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &setup);

    // Team A takes its 2 CPUs and all 8 the lender lends: 5 Jobs of 2.
    for index in 0..5 {
        cluster.ok_stdin(
            V,
            &["create", "-f", "-"],
            &job(&format!("a-{index}"), "team-a", 2),
        );
    }
    for index in 0..5 {
        let name = format!("a-{index}");
        cluster.wait_for(
            V,
            &["get", "job", &name, "-o", "jsonpath={.spec.suspend}"],
            |s| s == "false",
        );
    }
    let share = |cq: &str| {
        cluster.ok(
            V,
            &[
                "get",
                "clusterqueue",
                cq,
                "-o",
                "jsonpath={.status.fairSharing.weightedShare}",
            ],
        )
    };
    cluster.wait_for(
        V,
        &[
            "get",
            "clusterqueue",
            "team-a",
            "-o",
            "jsonpath={.status.fairSharing.weightedShare}",
        ],
        |s| s.parse::<i64>().is_ok_and(|share| share > 0),
    );
    assert_eq!(share("team-b"), "0");

    // Team B asks for 4 (borrowing 2): fair sharing takes one of team A's Jobs.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("b-0", "team-b", 4));
    cluster.wait_for_within(
        V,
        &["get", "job", "b-0", "-o", "jsonpath={.spec.suspend}"],
        std::time::Duration::from_secs(120),
        |s| s == "false",
    );
    let preempted = cluster.ok(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Preempted\")].reason}{\"\\n\"}{end}",
        ],
    );
    let reasons: Vec<&str> = preempted.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(reasons, ["InCohortFairSharing"], "{preempted}");
    let running_a = (0..5)
        .filter(|index| admitted(&cluster, &format!("a-{index}")))
        .count();
    assert_eq!(running_a, 4, "one of team A's Jobs is suspended again");
}

#[test]
fn a_bad_queue_config_refuses_to_start_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("kueue-config.yaml");
    let text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  timeout: -5m\n";
    std::fs::write(&config, text).expect("write the configuration");
    let stderr = up_refuses(
        &dir.path().join("data"),
        &["--queue-config", &config.to_string_lossy()],
    );
    assert!(stderr.contains(&*config.to_string_lossy()), "{stderr}");
    assert!(
        stderr.contains("line 4: waitForPodsReady.timeout: Invalid value: \"-5m\""),
        "{stderr}"
    );
    assert!(!dir.path().join("data").join("kubeconfig").exists());
}

fn workload_field(cluster: &Cluster, path: &str) -> String {
    cluster.ok(
        V,
        &[
            "get",
            "workloads",
            "-o",
            &format!("jsonpath={{.items[0]{path}}}"),
        ],
    )
}

#[test]
fn pods_never_ready_are_evicted_requeued_then_deactivated() {
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("kueue-config.yaml");
    let text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  timeout: 5s\n  requeuingStrategy:\n    backoffLimitCount: 1\n    backoffBaseSeconds: 1\n";
    std::fs::write(&config, text).expect("write the configuration");
    let cluster = Cluster::start_with_args(&["--queue-config", &config.to_string_lossy()]);
    let flavor = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n";
    let setup = [flavor.to_owned(), cluster_queue("team", 4)].join("---\n");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &setup);
    // Quota is free, but no node carries the label the pod asks for.
    let unschedulable = job("stuck", "team", 1).replace(
        "      restartPolicy: Never\n",
        "      restartPolicy: Never\n      nodeSelector: {no-such-label: nowhere}\n",
    );
    cluster.ok_stdin(V, &["create", "-f", "-"], &unschedulable);
    cluster.wait_for(
        V,
        &["get", "job", "stuck", "-o", "jsonpath={.spec.suspend}"],
        |s| s == "false",
    );
    let ready = workload_field(
        &cluster,
        ".status.conditions[?(@.type==\"PodsReady\")].reason",
    );
    assert_eq!(ready, "WaitForStart");
    let within = std::time::Duration::from_secs(90);
    cluster.wait_for_within(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={.items[0].status.requeueState.count}",
        ],
        within,
        |s| s == "1",
    );
    let events = cluster.ok(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=EvictedDueToPodsReadyTimeout",
            "-o",
            "jsonpath={.items[*].message}",
        ],
    );
    assert!(
        events.starts_with("Exceeded the PodsReady timeout default/job-stuck-"),
        "{events}"
    );
    // Requeued after the backoff, admitted again, late again: past backoffLimitCount 1 the
    // Workload is deactivated and its Job stays suspended.
    cluster.wait_for_within(
        V,
        &["get", "workloads", "-o", "jsonpath={.items[0].spec.active}"],
        within,
        |s| s == "false",
    );
    cluster.wait_for_within(
        V,
        &[
            "get",
            "workloads",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Evicted\")].reason}",
        ],
        within,
        |s| s == "DeactivatedDueToRequeuingLimitExceeded",
    );
    let message = workload_field(
        &cluster,
        ".status.conditions[?(@.type==\"Evicted\")].message",
    );
    assert_eq!(
        message,
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    );
    cluster.wait_for(
        V,
        &["get", "job", "stuck", "-o", "jsonpath={.spec.suspend}"],
        |s| s == "true",
    );
}

#[test]
fn jobs_without_a_queue_name_are_managed_in_selected_namespaces() {
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("kueue-config.yaml");
    let text = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmanageJobsWithoutQueueName: true\nmanagedJobsNamespaceSelector:\n  matchLabels: {kueue-managed: \"true\"}\n";
    std::fs::write(&config, text).expect("write the configuration");
    let cluster = Cluster::start_with_args(&["--queue-config", &config.to_string_lossy()]);
    cluster.ok(V, &["create", "namespace", "managed"]);
    cluster.ok(V, &["label", "namespace", "managed", "kueue-managed=true"]);
    cluster.ok(V, &["create", "namespace", "free"]);
    let unlabelled =
        job("plain", "none", 1).replace("  labels: {kueue.x-k8s.io/queue-name: none}\n", "");
    cluster.ok_stdin(V, &["create", "-n", "managed", "-f", "-"], &unlabelled);
    cluster.ok_stdin(V, &["create", "-n", "free", "-f", "-"], &unlabelled);
    let suspend = |namespace: &str| {
        cluster.ok(
            V,
            &[
                "get",
                "job",
                "plain",
                "-n",
                namespace,
                "-o",
                "jsonpath={.spec.suspend}",
            ],
        )
    };
    assert_eq!(suspend("managed"), "true");
    assert_eq!(suspend("free"), "false");
    // Its Workload waits: it names no LocalQueue.
    cluster.wait_for(
        V,
        &[
            "get",
            "workloads",
            "-n",
            "managed",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"QuotaReserved\")].message}",
        ],
        |s| s == "LocalQueue  doesn't exist",
    );
    assert_eq!(
        cluster.ok(V, &["get", "workloads", "-n", "free", "-o", "name"]),
        ""
    );
    // With a LocalQueue named `default` in the namespace, a Job without the label is given it.
    let default_queue = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: managed\n  name: default\nspec:\n  clusterQueue: anything\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], default_queue);
    let second = unlabelled.replace("name: plain", "name: second");
    cluster.ok_stdin(V, &["create", "-n", "managed", "-f", "-"], &second);
    let queue = cluster.ok(
        V,
        &[
            "get",
            "job",
            "second",
            "-n",
            "managed",
            "-o",
            "jsonpath={.metadata.labels.kueue\\.x-k8s\\.io/queue-name}",
        ],
    );
    assert_eq!(queue, "default");
}

const ADMISSION_FAIR_SHARING: &str = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nadmissionFairSharing:\n  usageHalfLifeTime: 10m\n  usageSamplingInterval: 1s\n";

/// The creation time of the Workload of `job`, once it exists.
fn workload_created(cluster: &Cluster, job: &str) -> String {
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
            "jsonpath={.items[*].metadata.creationTimestamp}",
        ],
        |out| !out.is_empty(),
    )
}

#[test]
fn admission_fair_sharing_lets_the_quieter_local_queue_go_first() {
    let configs = tempfile::tempdir().expect("tempdir");
    let config = configs.path().join("kueue-config.yaml");
    std::fs::write(&config, ADMISSION_FAIR_SHARING).expect("write the configuration");
    let cluster = Cluster::start_with_args(&["--queue-config", &config.to_string_lossy()]);

    let local_queue = |name: &str| {
        format!(
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  namespace: default\n  name: {name}\nspec:\n  clusterQueue: shared\n"
        )
    };
    let setup = [
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata:\n  name: default-flavor\n".to_owned(),
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata:\n  name: shared\nspec:\n  namespaceSelector: {}\n  admissionScope:\n    admissionMode: UsageBasedAdmissionFairSharing\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: default-flavor\n      resources:\n      - {name: cpu, nominalQuota: 2}\n      - {name: memory, nominalQuota: 64Gi}\n".to_owned(),
        local_queue("busy"),
        local_queue("quiet"),
    ]
    .join("---\n");
    cluster.ok_stdin(V, &["apply", "-f", "-"], &setup);

    // The busy LocalQueue uses the whole ClusterQueue, and has another Job waiting.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("busy-1", "busy", 2));
    cluster.wait_for(
        V,
        &["get", "job", "busy-1", "-o", "jsonpath={.spec.suspend}"],
        |s| s == "false",
    );
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("busy-2", "busy", 2));
    let busy_created = workload_created(&cluster, "busy-2");

    // Its consumption is sampled into its status (after busy-2 was created, so that the
    // quiet Job created next is strictly newer).
    let sampled = |out: &str| {
        out.split_once(' ')
            .is_some_and(|(cpu, at)| !cpu.is_empty() && cpu != "0" && at > busy_created.as_str())
    };
    let sample = [
        "get",
        "localqueue",
        "busy",
        "-o",
        "jsonpath={.status.fairSharing.admissionFairSharingStatus.consumedResources.cpu} {.status.fairSharing.admissionFairSharingStatus.lastUpdate}",
    ];
    cluster.wait_for_within(V, &sample, std::time::Duration::from_secs(60), sampled);
    // The quiet one has consumed nothing; both carry Kueue's weightedShare 0.
    let quiet = cluster.ok(
        V,
        &[
            "get",
            "localqueue",
            "quiet",
            "-o",
            "jsonpath={.status.fairSharing.weightedShare} {.status.fairSharing.admissionFairSharingStatus.consumedResources.cpu}|{.status.fairSharing.admissionFairSharingStatus.lastUpdate}",
        ],
    );
    let (share, last_update) = quiet.split_once('|').expect("two fields");
    assert_eq!(share, "0 ");
    assert!(!last_update.is_empty());

    // The quiet LocalQueue's Job, created later, is admitted first once busy-1 goes.
    cluster.ok_stdin(V, &["create", "-f", "-"], &job("quiet-1", "quiet", 2));
    assert!(workload_created(&cluster, "quiet-1") > busy_created);
    let uid = cluster.ok(
        V,
        &["get", "job", "busy-1", "-o", "jsonpath={.metadata.uid}"],
    );
    cluster.ok(V, &["delete", "job", "busy-1"]);
    cluster.ok(
        V,
        &[
            "delete",
            "workloads",
            "-l",
            &format!("kueue.x-k8s.io/job-uid={uid}"),
            "--ignore-not-found",
        ],
    );
    cluster.wait_for(
        V,
        &["get", "job", "quiet-1", "-o", "jsonpath={.spec.suspend}"],
        |s| s == "false",
    );
    assert!(!admitted(&cluster, "busy-2"));
}
