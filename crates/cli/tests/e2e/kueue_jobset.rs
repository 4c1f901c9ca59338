//! Kueue's JobSet integration on `tessera up`, driven by kubectl 1.33 with upstream's JobSet
//! CRD: a JobSet naming a LocalQueue is created suspended; a gang whose total exceeds the
//! free quota stays suspended with no pod of any of its Jobs (no partial start) and its
//! Workload (one PodSet per replicatedJob) pending with Kueue's message; once the other
//! Workload goes, it is admitted whole and every replicatedJob's Jobs start with the flavor's
//! node labels and tolerations injected; deactivated, its Workload is evicted, the JobSet
//! suspended again with its templates restored, and the quota released once its pods are gone.

use crate::support::Cluster;

const V: &str = "1.33";

const SPOT_FLAVOR: &str =
    include_str!("../fixtures/upstream/kueue/resource-flavor-tolerations.yaml");

fn crd() -> String {
    format!(
        "{}/tests/fixtures/upstream/jobset/crd-jobsets.yaml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A ClusterQueue with 4 CPUs on Kueue's `spot` flavor and its LocalQueue `gang`.
const QUEUES: &str = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: gang-queue}\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: spot\n      resources:\n      - {name: cpu, nominalQuota: 4}\n      - {name: memory, nominalQuota: 4Gi}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: gang, namespace: default}\nspec: {clusterQueue: gang-queue}\n";

/// A Job of two one-CPU pods in the LocalQueue `gang`.
const BLOCKER: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: blocker\n  labels: {kueue.x-k8s.io/queue-name: gang}\nspec:\n  parallelism: 2\n  completions: 2\n  template:\n    metadata:\n      annotations: {sim.tessera.dev/duration: 1h}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: worker:1\n        resources: {requests: {cpu: \"1\", memory: 200Mi}}\n";

/// A replicatedJob of `replicas` one-pod Jobs asking for one CPU each.
fn replicated_job(name: &str, replicas: u32) -> String {
    format!(
        "  - name: {name}\n    replicas: {replicas}\n    template:\n      spec:\n        parallelism: 1\n        completions: 1\n        template:\n          metadata:\n            annotations: {{sim.tessera.dev/duration: 1h}}\n          spec:\n            restartPolicy: Never\n            containers:\n            - name: {name}\n              image: trainer:1\n              resources: {{requests: {{cpu: \"1\", memory: 200Mi}}}}\n"
    )
}

/// The JobSet `gang`: a leader and two workers, three CPUs in all.
fn gang() -> String {
    format!(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata:\n  name: gang\n  labels: {{kueue.x-k8s.io/queue-name: gang}}\nspec:\n  replicatedJobs:\n{}{}",
        replicated_job("leader", 1),
        replicated_job("workers", 2)
    )
}

/// The Workload a job of `kind` controls.
fn workload_of(cluster: &Cluster, kind: &str, name: &str) -> String {
    let uid = cluster.ok(V, &["get", kind, name, "-o", "jsonpath={.metadata.uid}"]);
    cluster.wait_for(
        V,
        &[
            "get",
            "workloads",
            "-l",
            &format!("kueue.x-k8s.io/job-uid={uid}"),
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
        |out| !out.is_empty(),
    )
}

fn condition(cluster: &Cluster, workload: &str, condition: &str) -> String {
    cluster.ok(
        V,
        &[
            "get",
            "workload",
            workload,
            "-o",
            &format!(
                "jsonpath={{.status.conditions[?(@.type==\"{condition}\")].status}}: {{.status.conditions[?(@.type==\"{condition}\")].reason}}: {{.status.conditions[?(@.type==\"{condition}\")].message}}"
            ),
        ],
    )
}

const GANG_PODS: &str = "jobset.sigs.k8s.io/jobset-name=gang";

/// Each of the gang's Jobs as `name suspend instance-type-selector`, one a line, sorted.
fn gang_jobs(cluster: &Cluster) -> String {
    cluster.ok(
        V,
        &[
            "get",
            "jobs",
            "-l",
            GANG_PODS,
            "--sort-by=.metadata.name",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.suspend} {.spec.template.spec.nodeSelector.instance-type}{\"\\n\"}{end}",
        ],
    )
}

#[test]
fn a_jobset_gang_is_admitted_whole_or_not_at_all_and_suspended_again_when_evicted() {
    let cluster = Cluster::start();
    cluster.ok(V, &["apply", "--server-side", "-f", &crd()]);
    cluster.ok(
        V,
        &[
            "wait",
            "--for=condition=Established",
            "crd/jobsets.jobset.x-k8s.io",
            "--timeout=30s",
        ],
    );
    cluster.ok_stdin(V, &["apply", "-f", "-"], SPOT_FLAVOR);
    cluster.ok_stdin(V, &["apply", "-f", "-"], QUEUES);

    // Kueue's JobSet webhook defaulting: created suspended.
    let defaulted = cluster.ok_stdin(
        V,
        &[
            "create",
            "--dry-run=server",
            "-o",
            "jsonpath={.spec.suspend}",
            "-f",
            "-",
        ],
        &gang(),
    );
    assert_eq!(defaulted, "true");

    // Two of the four CPUs taken.
    cluster.ok_stdin(V, &["create", "-f", "-"], BLOCKER);
    cluster.wait_for(
        V,
        &["get", "job", "blocker", "-o", "jsonpath={.spec.suspend}"],
        |out| out == "false",
    );
    let blocker = workload_of(&cluster, "job", "blocker");

    // The gang needs three: pending, not one of its Jobs started.
    cluster.ok_stdin(V, &["create", "-f", "-"], &gang());
    let workload = workload_of(&cluster, "jobset", "gang");
    assert!(workload.starts_with("jobset-gang-"), "{workload}");
    let pod_sets = cluster.ok(
        V,
        &[
            "get",
            "workload",
            &workload,
            "-o",
            "jsonpath={range .spec.podSets[*]}{.name}={.count} {end}",
        ],
    );
    assert_eq!(pod_sets.trim(), "leader=1 workers=2");
    let pending = cluster.wait_for(
        V,
        &["get", "workload", &workload, "-o", "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].status}: {.status.conditions[?(@.type==\"QuotaReserved\")].message}"],
        |out| out.starts_with("False: "),
    );
    assert!(
        pending.contains(
            "couldn't assign flavors to pod set workers: insufficient unused quota for cpu in flavor spot, 1 more needed"
        ),
        "{pending}"
    );
    cluster.wait_for(V, &["get", "jobs", "-l", GANG_PODS, "-o", "name"], |out| {
        out.lines().count() == 3
    });
    assert_eq!(
        gang_jobs(&cluster),
        "gang-leader-0 true \ngang-workers-0 true \ngang-workers-1 true \n"
    );
    assert_eq!(
        cluster.ok(
            V,
            &["get", "jobset", "gang", "-o", "jsonpath={.spec.suspend}"]
        ),
        "true"
    );
    assert_eq!(
        cluster.ok(V, &["get", "pods", "-l", GANG_PODS, "-o", "name"]),
        ""
    );

    // The other Workload goes: the gang is admitted whole, every Job on the flavor.
    cluster.ok(V, &["delete", "job", "blocker"]);
    cluster.ok(V, &["delete", "workload", &blocker, "--ignore-not-found"]);
    cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            &workload,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Admitted\")].status}",
        ],
        |out| out == "True",
    );
    let assigned = cluster.ok(
        V,
        &["get", "workload", &workload, "-o", "jsonpath={range .status.admission.podSetAssignments[*]}{.name}={.flavors.cpu}/{.count} {end}"],
    );
    assert_eq!(assigned.trim(), "leader=spot/1 workers=spot/2");
    cluster.wait_for(
        V,
        &[
            "get",
            "jobs",
            "-l",
            GANG_PODS,
            "-o",
            "jsonpath={range .items[*]}{.spec.suspend} {end}",
        ],
        |out| out.trim() == "false false false",
    );
    assert_eq!(
        gang_jobs(&cluster),
        "gang-leader-0 false spot\ngang-workers-0 false spot\ngang-workers-1 false spot\n"
    );
    let tolerations = cluster.ok(
        V,
        &["get", "jobset", "gang", "-o", "jsonpath={range .spec.replicatedJobs[*]}{.template.spec.template.spec.tolerations[0].key} {end}"],
    );
    assert_eq!(tolerations.trim(), "spot-taint spot-taint");
    let pods = cluster.wait_for(
        V,
        &[
            "get",
            "pods",
            "-l",
            GANG_PODS,
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeSelector.instance-type} {end}",
        ],
        |out| out.split_whitespace().count() == 3,
    );
    assert_eq!(pods.trim(), "spot spot spot");
    let events = cluster.ok(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "involvedObject.kind=JobSet",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.name} {.reason}: {.message}{\"\\n\"}{end}",
        ],
    );
    for wanted in [
        format!("gang CreatedWorkload: Created Workload: default/{workload}"),
        "gang Started: Admitted by clusterQueue gang-queue".to_owned(),
    ] {
        assert!(events.lines().any(|l| l == wanted), "{wanted} in\n{events}");
    }

    // Deactivated: evicted, suspended again with its templates restored, the quota
    // released once no Job is active.
    cluster.ok(
        V,
        &[
            "patch",
            "workload",
            &workload,
            "--type=merge",
            "-p",
            "{\"spec\":{\"active\":false}}",
        ],
    );
    cluster.wait_for(
        V,
        &["get", "jobset", "gang", "-o", "jsonpath={.spec.suspend}"],
        |out| out == "true",
    );
    assert!(
        condition(&cluster, &workload, "Evicted").starts_with("True: Deactivated: "),
        "{}",
        condition(&cluster, &workload, "Evicted")
    );
    let restored = cluster.ok(
        V,
        &["get", "jobset", "gang", "-o", "jsonpath={range .spec.replicatedJobs[*]}[{.template.spec.template.spec.nodeSelector}{.template.spec.template.spec.tolerations}]{end}"],
    );
    assert_eq!(restored, "[][]");
    cluster.wait_for(
        V,
        &[
            "get",
            "jobs",
            "-l",
            GANG_PODS,
            "-o",
            "jsonpath={range .items[*]}{.spec.suspend} {end}",
        ],
        |out| out.trim() == "true true true",
    );
    cluster.wait_for_within(
        V,
        &[
            "get",
            "clusterqueue",
            "gang-queue",
            "-o",
            "jsonpath={.status.reservingWorkloads}",
        ],
        std::time::Duration::from_secs(60),
        |out| out == "0",
    );
    assert!(
        condition(&cluster, &workload, "QuotaReserved").starts_with("False: "),
        "{}",
        condition(&cluster, &workload, "QuotaReserved")
    );
}
