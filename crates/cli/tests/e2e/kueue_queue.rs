//! Kueue's queue manager on `tessera up`, driven by kubectl 1.33 with Kueue's quick start:
//! the published setup (a ResourceFlavor, a ClusterQueue with cpu/memory quota, a LocalQueue)
//! and its sample Job, which is created suspended, admitted (its Workload with Kueue's name,
//! conditions and admission), started, run to completion on the node twins and finished; a
//! second ClusterQueue in the same cohort borrows the first one's idle quota; a Job asking
//! for more than the cohort has stays suspended with its Workload's QuotaReserved=False
//! message; the lender reclaims its quota by preemption: the borrower's Workload is evicted
//! with Kueue's conditions, its Job suspended again, and the lender's Job admitted once the
//! borrower's pods are gone; a restart keeps every reservation; a Job admitted on Kueue's
//! published `spot` flavor runs with the flavor's node labels and tolerations injected.

use crate::support::Cluster;

const V: &str = "1.33";

const SETUP: &str = include_str!("../fixtures/upstream/kueue/quick-start-setup.yaml");
const SAMPLE_JOB: &str = include_str!("../fixtures/upstream/kueue/sample-job.yaml");
const SPOT_FLAVOR: &str =
    include_str!("../fixtures/upstream/kueue/resource-flavor-tolerations.yaml");

/// The Job's Workload (the one it controls), as `name admitted-status`.
fn workload_of(cluster: &Cluster, job: &str) -> String {
    let uid = cluster.ok(V, &["get", "job", job, "-o", "jsonpath={.metadata.uid}"]);
    cluster.ok(
        V,
        &[
            "get",
            "workloads",
            "-l",
            &format!("kueue.x-k8s.io/job-uid={uid}"),
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
    )
}

fn condition(cluster: &Cluster, kind: &str, name: &str, condition: &str, field: &str) -> String {
    cluster.ok(
        V,
        &[
            "get",
            kind,
            name,
            "-o",
            &format!("jsonpath={{.status.conditions[?(@.type==\"{condition}\")].{field}}}"),
        ],
    )
}

/// A Job in `queue` with `pods` pods of `cpu` each, running `duration` on the twins.
fn job(name: &str, queue: &str, pods: u32, cpu: &str, duration: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/queue-name: {queue}}}\nspec:\n  parallelism: {pods}\n  completions: {pods}\n  template:\n    metadata:\n      annotations: {{sim.tessera.dev/duration: {duration}}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: worker:1\n        resources: {{requests: {{cpu: \"{cpu}\", memory: 200Mi}}}}\n"
    )
}

#[test]
fn kueue_quick_start_admits_runs_borrows_and_explains_waiting_jobs() {
    let mut cluster = Cluster::start();
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    // Kueue's webhook defaulting: a Job naming a LocalQueue is created suspended.
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
        SAMPLE_JOB,
    );
    assert_eq!(defaulted, "true");

    // The sample Job: admitted, started, completed; its Workload finished.
    let created = cluster.ok_stdin(V, &["create", "-f", "-"], SAMPLE_JOB);
    let job_name = created
        .split_whitespace()
        .next()
        .and_then(|s| s.strip_prefix("job.batch/"))
        .expect("job name")
        .to_owned();
    let workload = cluster.wait_for(V, &["get", "workloads", "-o", "name"], |out| {
        out.contains("job-sample-job-")
    });
    let workload = workload
        .trim()
        .trim_start_matches("workload.kueue.x-k8s.io/")
        .to_owned();
    assert_eq!(workload_of(&cluster, &job_name), workload);
    assert!(
        workload.starts_with(&format!("job-{job_name}-")),
        "{workload}"
    );
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
    assert_eq!(
        condition(&cluster, "workload", &workload, "QuotaReserved", "message"),
        "Quota reserved in ClusterQueue cluster-queue"
    );
    let admission = cluster.ok(
        V,
        &["get", "workload", &workload, "-o", "jsonpath={.status.admission.podSetAssignments[0].flavors.cpu} {.status.admission.podSetAssignments[0].resourceUsage.cpu} {.status.admission.podSetAssignments[0].count}"],
    );
    assert_eq!(admission, "default-flavor 3 3");
    cluster.wait_for_within(
        V,
        &[
            "get",
            "job",
            &job_name,
            "-o",
            "jsonpath={.spec.suspend} {.status.succeeded}",
        ],
        std::time::Duration::from_secs(60),
        |out| out == "false 3",
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "workload",
            &workload,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Finished\")].reason}",
        ],
        |out| out == "Succeeded",
    );
    // Finished, it no longer holds quota.
    cluster.wait_for(
        V,
        &["get", "clusterqueue", "cluster-queue", "-o", "jsonpath={.status.reservingWorkloads} {.status.flavorsReservation[0].resources[0].total}"],
        |out| out == "0 0",
    );
    assert_eq!(
        condition(
            &cluster,
            "clusterqueue",
            "cluster-queue",
            "Active",
            "reason"
        ),
        "Ready"
    );
    assert_eq!(
        condition(&cluster, "localqueue", "user-queue", "Active", "reason"),
        "Ready"
    );

    // Kueue's events about the Workload and the Job.
    let events = cluster.ok(
        V,
        &[
            "get",
            "events",
            "-o",
            "jsonpath={range .items[*]}{.involvedObject.name} {.reason}: {.message}{\"\\n\"}{end}",
        ],
    );
    for wanted in [
        format!("{workload} QuotaReserved: Quota reserved in ClusterQueue cluster-queue"),
        format!("{workload} Admitted: Admitted by ClusterQueue cluster-queue"),
        format!("{job_name} CreatedWorkload: Created Workload: default/{workload}"),
        format!("{job_name} Started: Admitted by clusterQueue cluster-queue"),
        format!("{job_name} FinishedWorkload: Workload 'default/{workload}' is declared finished"),
    ] {
        assert!(
            events.lines().any(|l| l.starts_with(&wanted)),
            "{wanted} in\n{events}"
        );
    }

    // A second ClusterQueue in the same cohort borrows the idle quota.
    cluster.ok(
        V,
        &[
            "patch",
            "clusterqueue",
            "cluster-queue",
            "--type=merge",
            "-p",
            "{\"spec\":{\"cohortName\":\"team\"}}",
        ],
    );
    let team_b = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: team-b}\nspec:\n  cohortName: team\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: default-flavor\n      resources:\n      - {name: cpu, nominalQuota: 1}\n      - {name: memory, nominalQuota: 1Gi}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: team-b-queue, namespace: default}\nspec: {clusterQueue: team-b}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], team_b);
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &job("borrower", "team-b-queue", 3, "1", "60s"),
    );
    cluster.wait_for(
        V,
        &["get", "clusterqueue", "team-b", "-o", "jsonpath={.status.reservingWorkloads} {.status.flavorsReservation[0].resources[0].total} {.status.flavorsReservation[0].resources[0].borrowed}"],
        |out| out == "1 3 2",
    );
    cluster.wait_for(
        V,
        &["get", "job", "borrower", "-o", "jsonpath={.spec.suspend}"],
        |out| out == "false",
    );

    // More than the whole cohort has: suspended, with Kueue's explanation.
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &job("too-big", "user-queue", 20, "1", "1s"),
    );
    let waiting = cluster.wait_for(V, &["get", "workloads", "-o", "name"], |out| {
        out.contains("job-too-big-")
    });
    let waiting = waiting
        .lines()
        .find(|l| l.contains("job-too-big-"))
        .unwrap_or_default()
        .trim_start_matches("workload.kueue.x-k8s.io/")
        .to_owned();
    let message = cluster.wait_for(
        V,
        &["get", "workload", &waiting, "-o", "jsonpath={.status.conditions[?(@.type==\"QuotaReserved\")].status}: {.status.conditions[?(@.type==\"QuotaReserved\")].message}"],
        |out| out.starts_with("False: "),
    );
    assert!(
        message.contains("couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor"),
        "{message}"
    );
    assert_eq!(
        cluster.ok(
            V,
            &["get", "job", "too-big", "-o", "jsonpath={.spec.suspend}"]
        ),
        "true"
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "localqueue",
            "user-queue",
            "-o",
            "jsonpath={.status.pendingWorkloads}",
        ],
        |out| out == "1",
    );

    // The lender reclaims what it lent: the borrower is preempted and its Job suspended.
    cluster.ok(
        V,
        &[
            "patch",
            "clusterqueue",
            "cluster-queue",
            "--type=merge",
            "-p",
            "{\"spec\":{\"preemption\":{\"reclaimWithinCohort\":\"Any\"}}}",
        ],
    );
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &job("reclaimer", "user-queue", 9, "1", "60s"),
    );
    let borrower = workload_of(&cluster, "borrower");
    cluster.wait_for(
        V,
        &["get", "workload", &borrower, "-o", "jsonpath={.status.conditions[?(@.type==\"Evicted\")].reason} {.status.conditions[?(@.type==\"Preempted\")].reason}"],
        |out| out == "Preempted InCohortReclamation",
    );
    cluster.wait_for(
        V,
        &["get", "job", "borrower", "-o", "jsonpath={.spec.suspend}"],
        |out| out == "true",
    );
    cluster.wait_for_within(
        V,
        &["get", "job", "reclaimer", "-o", "jsonpath={.spec.suspend}"],
        std::time::Duration::from_secs(60),
        |out| out == "false",
    );
    let requeued = condition(&cluster, "workload", &borrower, "Requeued", "status");
    assert_eq!(requeued, "True");
    assert_eq!(
        condition(&cluster, "workload", &borrower, "QuotaReserved", "status"),
        "False"
    );

    // A restart rebuilds the queues from the stored objects: nothing admitted twice, nothing
    // lost, the waiting ones still waiting.
    let reclaimer = workload_of(&cluster, "reclaimer");
    let reserved_at = condition(
        &cluster,
        "workload",
        &reclaimer,
        "QuotaReserved",
        "lastTransitionTime",
    );
    let usage =
        "jsonpath={.status.reservingWorkloads} {.status.flavorsReservation[0].resources[0].total}";
    let before = cluster.ok(V, &["get", "clusterqueue", "cluster-queue", "-o", usage]);
    assert_eq!(before, "1 9");
    cluster.stop();
    cluster.launch(&[]);
    // The LocalQueue's pending count is written again by the restarted queue manager's passes.
    cluster.ok(
        V,
        &[
            "patch",
            "localqueue",
            "user-queue",
            "--subresource=status",
            "--type=merge",
            "-p",
            "{\"status\":{\"pendingWorkloads\":0}}",
        ],
    );
    cluster.wait_for(
        V,
        &[
            "get",
            "localqueue",
            "user-queue",
            "-o",
            "jsonpath={.status.pendingWorkloads}",
        ],
        |out| out == "1",
    );
    assert_eq!(
        cluster.ok(V, &["get", "clusterqueue", "cluster-queue", "-o", usage]),
        before
    );
    assert_eq!(
        condition(
            &cluster,
            "workload",
            &reclaimer,
            "QuotaReserved",
            "lastTransitionTime"
        ),
        reserved_at
    );
    assert_eq!(
        condition(&cluster, "workload", &borrower, "QuotaReserved", "status"),
        "False"
    );
    assert_eq!(
        condition(&cluster, "workload", &waiting, "QuotaReserved", "status"),
        "False"
    );

    // Admitted on a flavor with node labels and tolerations: both injected into the Job's pod
    // template, next to its own.
    cluster.ok_stdin(V, &["apply", "-f", "-"], SPOT_FLAVOR);
    let spot_queue = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: spot-queue}\nspec:\n  namespaceSelector: {}\n  resourceGroups:\n  - coveredResources: [cpu, memory]\n    flavors:\n    - name: spot\n      resources:\n      - {name: cpu, nominalQuota: 4}\n      - {name: memory, nominalQuota: 4Gi}\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: spot, namespace: default}\nspec: {clusterQueue: spot-queue}\n";
    cluster.ok_stdin(V, &["apply", "-f", "-"], spot_queue);
    let mut spot_job = job("on-spot", "spot", 2, "1", "60s");
    spot_job = spot_job.replace(
        "      restartPolicy: Never\n",
        "      restartPolicy: Never\n      nodeSelector: {team: ml}\n",
    );
    cluster.ok_stdin(V, &["create", "-f", "-"], &spot_job);
    let injected = cluster.wait_for(
        V,
        &["get", "job", "on-spot", "-o", "jsonpath={.spec.suspend} {.spec.template.spec.nodeSelector} {.spec.template.spec.tolerations[0].key}"],
        |out| out.starts_with("false"),
    );
    assert_eq!(
        injected,
        "false {\"instance-type\":\"spot\",\"team\":\"ml\"} spot-taint"
    );
    let spot_workload = workload_of(&cluster, "on-spot");
    let admitted_on = cluster.ok(
        V,
        &[
            "get",
            "workload",
            &spot_workload,
            "-o",
            "jsonpath={.status.admission.podSetAssignments[0].flavors.cpu}",
        ],
    );
    assert_eq!(admitted_on, "spot");
}
