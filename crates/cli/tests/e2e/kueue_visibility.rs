//! Kueue's visibility API and kueuectl's queue commands on `tessera up`, driven by kubectl
//! 1.33, the `tessera` binary and the official Python client: a ClusterQueue whose cohort
//! neighbour borrows its quota leaves three Jobs of three priorities pending; `kubectl get
//! --raw` reads their positions (priority order, limit and offset, per LocalQueue) from
//! `visibility.kueue.x-k8s.io` as discovery lists it; `tessera queue list` prints kueuectl's
//! columns; `tessera explain workload` names the short resource and the borrower; stopping
//! the borrower's ClusterQueue with `--keep-already-running` keeps it running and holds new
//! Workloads with Kueue's message, stopping it without drains the borrower so the first
//! pending Job is admitted, and resuming lets the held Workload in; a stopped Workload is
//! deactivated.

use std::process::Command;
use std::time::Duration;

use crate::support::{Cluster, outcome};

const V: &str = "1.33";

const SETUP: &str = "apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 8Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 1}, {name: memory, nominalQuota: 8Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: queue-a}
spec: {clusterQueue: team-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: queue-b}
spec: {clusterQueue: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: mid}
value: 50
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 100
";

/// A one-pod Job in `queue` asking for `cpu`, of WorkloadPriorityClass `priority`.
fn job(name: &str, queue: &str, cpu: &str, priority: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  labels: {{kueue.x-k8s.io/queue-name: {queue}, kueue.x-k8s.io/priority-class: {priority}}}\nspec:\n  template:\n    metadata:\n      annotations: {{sim.tessera.dev/duration: 600s}}\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: work\n        image: worker:1\n        resources: {{requests: {{cpu: \"{cpu}\", memory: 100Mi}}}}\n"
    )
}

/// The Workload of a Job, once it exists.
fn workload_of(cluster: &Cluster, job: &str) -> String {
    let uid = cluster.ok(V, &["get", "job", job, "-o", "jsonpath={.metadata.uid}"]);
    cluster
        .wait_for(
            V,
            &[
                "get",
                "workloads",
                "-l",
                &format!("kueue.x-k8s.io/job-uid={uid}"),
                "-o",
                "jsonpath={.items[0].metadata.name}",
            ],
            |out| out.starts_with("job-"),
        )
        .trim()
        .to_owned()
}

fn condition(cluster: &Cluster, workload: &str, kind: &str, field: &str) -> String {
    cluster.ok(
        V,
        &[
            "get",
            "workload",
            workload,
            "-o",
            &format!("jsonpath={{.status.conditions[?(@.type==\"{kind}\")].{field}}}"),
        ],
    )
}

fn wait_condition(cluster: &Cluster, workload: &str, kind: &str, field: &str, want: &str) {
    cluster.wait_for_within(
        V,
        &[
            "get",
            "workload",
            workload,
            "-o",
            &format!("jsonpath={{.status.conditions[?(@.type==\"{kind}\")].{field}}}"),
        ],
        Duration::from_secs(60),
        |out| out == want,
    );
}

/// `tessera ARGS` against the cluster; its stdout.
fn tessera(cluster: &Cluster, args: &[&str]) -> String {
    let kubeconfig = cluster.kubeconfig();
    let (command, rest) = args.split_first().expect("a command");
    let mut full = vec![
        *command,
        "--kubeconfig",
        kubeconfig.to_str().expect("utf-8"),
    ];
    full.extend_from_slice(rest);
    let (ok, out, err) = outcome(
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&full)
            .output()
            .expect("run tessera"),
    );
    assert!(ok, "tessera {}: {err}", full.join(" "));
    out
}

/// `(owner Job, positionInClusterQueue, positionInLocalQueue)` of a summary.
fn positions(summary: &str) -> Vec<(String, u64, u64)> {
    let summary: serde_json::Value = serde_json::from_str(summary).expect("JSON summary");
    assert_eq!(summary["kind"], "PendingWorkloadsSummary", "{summary}");
    summary["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            (
                item["metadata"]["ownerReferences"][0]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                item["positionInClusterQueue"].as_u64().unwrap_or(99),
                item["positionInLocalQueue"].as_u64().unwrap_or(99),
            )
        })
        .collect()
}

fn owned(items: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    items
        .iter()
        .map(|(job, cq, lq)| (job.to_string(), *cq, *lq))
        .collect()
}

#[test]
fn pending_positions_queue_commands_and_explanations_follow_kueue() {
    let cluster = Cluster::start();
    cluster.ok_stdin(V, &["apply", "-f", "-"], SETUP);

    // team-b borrows all of team-a's idle cpu: 3 of the cohort's 3.
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &job("borrower", "queue-b", "3", "low"),
    );
    let borrower = workload_of(&cluster, "borrower");
    wait_condition(&cluster, &borrower, "Admitted", "status", "True");

    for (name, priority) in [
        ("wait-low", "low"),
        ("wait-high", "high"),
        ("wait-mid", "mid"),
    ] {
        cluster.ok_stdin(
            V,
            &["create", "-f", "-"],
            &job(name, "queue-a", "2", priority),
        );
    }
    let high = workload_of(&cluster, "wait-high");
    let low = workload_of(&cluster, "wait-low");
    wait_condition(&cluster, &high, "QuotaReserved", "status", "False");

    // Discovery lists the group as Kueue's APIService makes it appear.
    let groups = cluster.ok(V, &["api-versions"]);
    assert!(
        groups.contains("visibility.kueue.x-k8s.io/v1beta2"),
        "{groups}"
    );
    assert!(
        groups.contains("visibility.kueue.x-k8s.io/v1beta1"),
        "{groups}"
    );
    let resources = cluster.ok(
        V,
        &["get", "--raw", "/apis/visibility.kueue.x-k8s.io/v1beta2"],
    );
    assert!(
        resources.contains("\"clusterqueues/pendingworkloads\""),
        "{resources}"
    );
    assert!(
        resources.contains("\"localqueues/pendingworkloads\""),
        "{resources}"
    );

    // Positions: priority first, in the ClusterQueue and the LocalQueue.
    let cq = "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/team-a/pendingworkloads";
    let all = owned(&[("wait-high", 0, 0), ("wait-mid", 1, 1), ("wait-low", 2, 2)]);
    assert_eq!(positions(&cluster.ok(V, &["get", "--raw", cq])), all);
    assert_eq!(
        positions(&cluster.ok(V, &["get", "--raw", &format!("{cq}?limit=1&offset=1")])),
        owned(&[("wait-mid", 1, 1)])
    );
    let lq = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/queue-a/pendingworkloads";
    assert_eq!(positions(&cluster.ok(V, &["get", "--raw", lq])), all);
    let missing = cluster.fails(
        V,
        &[
            "get",
            "--raw",
            "/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/nope/pendingworkloads",
        ],
        None,
    );
    assert!(
        missing.contains("NotFound") || missing.contains("not found"),
        "{missing}"
    );

    // The official Python client, with a generic request.
    let script = "import json, sys\nfrom kubernetes import client, config\nconfig.load_kube_config(sys.argv[1])\napi = client.ApiClient()\nresponse = api.call_api('/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{name}/pendingworkloads', 'GET', path_params={'name': 'team-a'}, query_params=[('limit', '2')], header_params={'Accept': 'application/json'}, auth_settings=['BearerToken'], _preload_content=False)\nprint(response.data.decode())\n";
    let python = Command::new("python3")
        .args(["-c", script])
        .arg(cluster.kubeconfig())
        .output()
        .expect("run python3");
    let (ok, out, err) = outcome(python);
    assert!(ok, "python: {err}");
    assert_eq!(
        positions(&out),
        owned(&[("wait-high", 0, 0), ("wait-mid", 1, 1)])
    );

    // kueuectl's columns.
    let queues = tessera(&cluster, &["queue", "list", "clusterqueues"]);
    let team_a = queues
        .lines()
        .find(|l| l.starts_with("team-a"))
        .unwrap_or_default();
    let cells: Vec<&str> = team_a.split_whitespace().collect();
    assert_eq!(
        cells[..5],
        ["team-a", "research", "3", "0", "true"],
        "{queues}"
    );
    assert!(queues.starts_with("NAME"), "{queues}");
    let workloads = tessera(&cluster, &["queue", "list", "workloads"]);
    let row = workloads
        .lines()
        .find(|l| l.starts_with(&high))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells[1..7],
        ["job", "wait-high", "queue-a", "team-a", "PENDING", "0"],
        "{workloads}"
    );
    let row = workloads
        .lines()
        .find(|l| l.starts_with(&borrower))
        .unwrap_or_default();
    assert!(row.contains("ADMITTED"), "{workloads}");

    // Why it waits: the short resource and the borrower.
    let explained = tessera(
        &cluster,
        &["explain", "workload", &format!("default/{high}")],
    );
    for line in [
        "It is number 1 of 3 pending in ClusterQueue team-a and number 1 of 3 in LocalQueue queue-a.",
        "PodSet main needs 2 cpu in flavor default-flavor: ClusterQueue team-a has nominal 2, uses 0, can take 0 more (borrowing included): short by 2.",
        "  ClusterQueue team-b of its cohort borrows 2 cpu of flavor default-flavor beyond its nominal quota.",
    ] {
        assert!(
            explained.lines().any(|l| l == line),
            "missing {line:?} in\n{explained}"
        );
    }

    // Stop team-b, keeping what runs: the borrower stays admitted, a new Workload is held.
    let stopped = tessera(
        &cluster,
        &[
            "queue",
            "stop",
            "clusterqueue",
            "team-b",
            "--keep-already-running",
        ],
    );
    assert_eq!(stopped, "clusterqueue.kueue.x-k8s.io/team-b stopped\n");
    assert_eq!(
        cluster.ok(
            V,
            &[
                "get",
                "clusterqueue",
                "team-b",
                "-o",
                "jsonpath={.spec.stopPolicy}"
            ]
        ),
        "Hold"
    );
    cluster.ok_stdin(
        V,
        &["create", "-f", "-"],
        &job("late", "queue-b", "1", "low"),
    );
    let late = workload_of(&cluster, "late");
    wait_condition(
        &cluster,
        &late,
        "QuotaReserved",
        "message",
        "ClusterQueue team-b is inactive",
    );
    assert_eq!(condition(&cluster, &borrower, "Admitted", "status"), "True");

    // Stop it again, draining: the borrower is evicted and team-a's first Job admitted.
    tessera(&cluster, &["queue", "stop", "clusterqueue", "team-b"]);
    wait_condition(
        &cluster,
        &borrower,
        "Evicted",
        "reason",
        "ClusterQueueStopped",
    );
    wait_condition(&cluster, &high, "Admitted", "status", "True");
    assert_eq!(
        positions(&cluster.ok(V, &["get", "--raw", cq])),
        owned(&[("wait-mid", 0, 0), ("wait-low", 1, 1)])
    );

    // Resumed, team-b takes its held Workloads again.
    let resumed = tessera(&cluster, &["queue", "resume", "clusterqueue", "team-b"]);
    assert_eq!(resumed, "clusterqueue.kueue.x-k8s.io/team-b resumed\n");
    wait_condition(&cluster, &late, "Admitted", "status", "True");

    // A stopped Workload is deactivated and leaves the queue.
    tessera(&cluster, &["queue", "stop", "workload", &low]);
    assert_eq!(
        cluster.ok(
            V,
            &["get", "workload", &low, "-o", "jsonpath={.spec.active}"]
        ),
        "false"
    );
    cluster.wait_for(V, &["get", "--raw", cq], |out| {
        positions(out) == owned(&[("wait-mid", 0, 0)])
    });
    tessera(&cluster, &["queue", "resume", "workload", &low]);
    cluster.wait_for(V, &["get", "--raw", cq], |out| positions(out).len() == 2);
}
