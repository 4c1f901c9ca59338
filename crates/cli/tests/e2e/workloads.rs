//! Workload controllers driven with kubectl; a test binder stands in for the scheduler.

use crate::support::{Cluster, TestBinder};

#[test]
fn indexed_jobs_complete_and_failure_policies_fail_fast() {
    let cluster = Cluster::start();
    let _binder = TestBinder::start(&cluster, &["cpu-1", "cpu-2", "gpu-1", "gpu-2"]);
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
