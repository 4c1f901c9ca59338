//! MultiKueue across three `tessera up` platforms, driven by kubectl 1.33: a manager whose
//! ClusterQueue requires a MultiKueue AdmissionCheck and two workers whose kubeconfigs sit in
//! Secrets on the manager. The MultiKueueClusters and the check turn Active; a batch Job
//! queued on the manager (`spec.managedBy: kueue.x-k8s.io/multikueue`) runs no pods there,
//! its Workload is copied to the workers, one worker admits it and runs the Job's pods, the
//! other keeps no copy, the check turns Ready naming the winner and the manager's Job shows
//! the completion, after which the copies are removed. Bad input: a worker that is stopped
//! turns its MultiKueueCluster Active=False (`ClientConnectionFailed`, with an event) while
//! the finished Workload stays finished. A JobSet left to MultiKueue (upstream's JobSet CRD
//! on all three) runs the same way: on one worker only, its status returning to the manager's.

use std::time::Duration;

use crate::support::Cluster;

const V: &str = "1.33";

const WORKER_SETUP: &str =
    include_str!("../fixtures/upstream/kueue/single-clusterqueue-setup.yaml");

const MANAGER_SETUP: &str = r#"apiVersion: v1
kind: Namespace
metadata: {name: kueue-system}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 36Gi}
  admissionChecksStrategy:
    admissionChecks:
    - name: sample-multikueue
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: sample-multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: multikueue-test}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: multikueue-test}
spec:
  clusters: [worker1, worker2]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker1}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: worker1-secret}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: worker2}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: worker2-secret}
"#;

const JOB: &str = r#"apiVersion: batch/v1
kind: Job
metadata:
  name: mk-job
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  managedBy: kueue.x-k8s.io/multikueue
  parallelism: 1
  completions: 1
  suspend: true
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        command: ["/bin/sh"]
        args: ["-c", "sleep 8"]
        resources:
          requests: {cpu: "1", memory: 200Mi}
      restartPolicy: Never
"#;

const WITHIN: Duration = Duration::from_secs(60);

fn active(cluster: &Cluster, kind: &str, name: &str) -> String {
    cluster.ok(
        V,
        &[
            "get",
            kind,
            name,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Active\")].status} {.status.conditions[?(@.type==\"Active\")].reason}",
        ],
    )
}

/// Two workers and a manager whose MultiKueue check over them is Active; with `crd`
/// (a CRD manifest's path) applied on all three first.
fn connected_platforms(crd: Option<&str>) -> ([Cluster; 2], Cluster) {
    let workers = [Cluster::start(), Cluster::start()];
    let manager = Cluster::start();
    if let Some(crd) = crd {
        for cluster in workers.iter().chain([&manager]) {
            cluster.ok(V, &["apply", "--server-side", "-f", crd]);
        }
    }
    for worker in &workers {
        worker.ok_stdin(V, &["apply", "-f", "-"], WORKER_SETUP);
    }
    manager.ok_stdin(V, &["apply", "-f", "-"], MANAGER_SETUP);
    for (name, worker) in ["worker1", "worker2"].iter().zip(&workers) {
        let path = worker.kubeconfig();
        let from = format!("--from-file=kubeconfig={}", path.display());
        manager.ok(
            V,
            &[
                "create",
                "secret",
                "generic",
                &format!("{name}-secret"),
                "-n",
                "kueue-system",
                &from,
            ],
        );
    }
    for name in ["worker1", "worker2"] {
        manager.wait_for_within(
            V,
            &[
                "get",
                "multikueuecluster",
                name,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Active\")].status}",
            ],
            WITHIN,
            |out| out == "True",
        );
    }
    assert_eq!(
        active(&manager, "multikueuecluster", "worker1"),
        "True Active"
    );
    manager.wait_for(
        V,
        &[
            "get",
            "admissioncheck",
            "sample-multikueue",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Active\")].reason}",
        ],
        |out| out == "Active",
    );
    (workers, manager)
}

/// The worker the manager's only Workload was admitted on, as (index of the winner, of the
/// other), once the check is Ready naming it.
/// Waits until the manager's Workload is Finished and no worker keeps a copy of `kinds`.
fn finished_without_copies(manager: &Cluster, workers: &[Cluster], kinds: &str) {
    manager.wait_for_within(
        V,
        &[
            "get",
            "workloads",
            "-n",
            "default",
            "-o",
            "jsonpath={.items[0].status.conditions[?(@.type==\"Finished\")].status}",
        ],
        WITHIN,
        |out| out == "True",
    );
    for worker in workers {
        worker.wait_for(V, &["get", kinds, "-n", "default", "-o", "name"], |out| {
            out.is_empty()
        });
    }
}

fn winner(manager: &Cluster) -> (usize, usize) {
    let winner = manager.wait_for_within(
        V,
        &[
            "get",
            "workloads",
            "-n",
            "default",
            "-o",
            "jsonpath={.items[0].status.clusterName}",
        ],
        WITHIN,
        |out| out == "worker1" || out == "worker2",
    );
    let message = manager.ok(
        V,
        &["get", "workloads", "-n", "default", "-o", "jsonpath={.items[0].status.admissionChecks[0].state} {.items[0].status.admissionChecks[0].message}"],
    );
    assert_eq!(
        message,
        format!("Ready The workload was admitted on \"{winner}\"")
    );
    if winner == "worker1" { (0, 1) } else { (1, 0) }
}

/// Waits until `count` pods named `prefix…` were scheduled on `worker`, read from the
/// scheduler's events, which outlive the pods: a copy's pods run 8 s and MultiKueue removes
/// the finished copies, so on a loaded machine the pods (and the worker's Jobs) may be gone
/// before a poll sees them.
fn scheduled_pods(worker: &Cluster, prefix: &str, count: usize) {
    worker.wait_for_within(
        V,
        &[
            "get",
            "events",
            "--field-selector",
            "reason=Scheduled,involvedObject.kind=Pod",
            "-o",
            "jsonpath={.items[*].involvedObject.name}",
        ],
        WITHIN,
        |out| {
            out.split_whitespace()
                .filter(|name| name.starts_with(prefix))
                .count()
                == count
        },
    );
}

#[test]
fn a_job_queued_on_the_manager_runs_on_one_worker_and_its_status_returns() {
    let (mut workers, manager) = connected_platforms(None);
    manager.ok_stdin(V, &["apply", "-f", "-"], JOB);
    let (won, lost) = winner(&manager);

    // The Job runs on the winner, from the manager's Workload's copy.
    workers[won].wait_for_within(
        V,
        &[
            "get",
            "job",
            "mk-job",
            "-o",
            "jsonpath={.metadata.labels.kueue\\.x-k8s\\.io/multikueue-origin}",
        ],
        WITHIN,
        |out| out == "multikueue",
    );
    // The worker admitted the manager's Workload itself (same name), not one of its own.
    let manager_workload = manager.ok(
        V,
        &[
            "get",
            "workloads",
            "-n",
            "default",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ],
    );
    assert_eq!(
        workers[won].ok(
            V,
            &[
                "get",
                "workloads",
                "-n",
                "default",
                "-o",
                "jsonpath={.items[*].metadata.name}"
            ]
        ),
        manager_workload
    );
    // Its pod was scheduled there.
    scheduled_pods(&workers[won], "mk-job-", 1);
    // The manager runs no pods of it, and its Job shows the worker's completion.
    manager.wait_for_within(
        V,
        &[
            "get",
            "job",
            "mk-job",
            "-o",
            "jsonpath={.status.succeeded} {.status.conditions[?(@.type==\"Complete\")].status}",
        ],
        WITHIN,
        |out| out == "1 True",
    );
    assert_eq!(manager.ok(V, &["get", "pods", "-o", "name"]), "");
    // The other worker keeps no copy; the finished Workload's copies are removed from the
    // winner too.
    finished_without_copies(&manager, &workers, "workloads,jobs");

    // Bad input: a worker that goes away.
    let name = ["worker1", "worker2"][lost];
    workers[lost].stop();
    manager.wait_for_within(
        V,
        &["get", "multikueuecluster", name, "-o", "jsonpath={.status.conditions[?(@.type==\"Active\")].status} {.status.conditions[?(@.type==\"Active\")].reason}"],
        WITHIN,
        |out| out == "False ClientConnectionFailed",
    );
    let events = manager.ok(
        V,
        &[
            "get",
            "events",
            "-A",
            "--field-selector",
            &format!("involvedObject.name={name}"),
            "-o",
            "jsonpath={.items[*].reason}",
        ],
    );
    assert!(events.contains("ClientConnectionFailed"), "{events}");
    assert_eq!(
        manager.ok(
            V,
            &[
                "get",
                "workloads",
                "-n",
                "default",
                "-o",
                "jsonpath={.items[0].status.conditions[?(@.type==\"Finished\")].status}"
            ]
        ),
        "True"
    );
}

const JOBSET: &str = r#"apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: mk-jobset
  namespace: default
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  managedBy: kueue.x-k8s.io/multikueue
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: worker
              image: registry.k8s.io/e2e-test-images/agnhost:2.53
              command: ["/bin/sh"]
              args: ["-c", "sleep 8"]
              resources:
                requests: {cpu: "1", memory: 200Mi}
"#;

#[test]
fn a_jobset_queued_on_the_manager_runs_on_one_worker_and_its_status_returns() {
    let crd = format!(
        "{}/tests/fixtures/upstream/jobset/crd-jobsets.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let (workers, manager) = connected_platforms(Some(&crd));
    manager.ok_stdin(V, &["apply", "-f", "-"], JOBSET);
    let (won, _) = winner(&manager);

    // The copy runs on the winner: its JobSet controller makes the two Jobs, whose pods run.
    workers[won].wait_for_within(
        V,
        &[
            "get",
            "jobset",
            "mk-jobset",
            "-o",
            "jsonpath={.metadata.labels.kueue\\.x-k8s\\.io/multikueue-origin}",
        ],
        WITHIN,
        |out| out == "multikueue",
    );
    scheduled_pods(&workers[won], "mk-jobset-workers-", 2);
    // The manager runs nothing of it, and its JobSet shows the worker's completion.
    manager.wait_for_within(
        V,
        &[
            "get",
            "jobset",
            "mk-jobset",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Completed\")].status}",
        ],
        WITHIN,
        |out| out == "True",
    );
    assert_eq!(manager.ok(V, &["get", "jobs,pods", "-o", "name"]), "");
    // The other worker never kept a JobSet; the finished Workload's copies are removed.
    finished_without_copies(&manager, &workers, "workloads,jobsets");
}
