//! Kueue's `pending_workloads_cq_test.go` and `pending_workloads_lq_test.go` tables, ported:
//! positions in the ClusterQueue and the LocalQueue, priority before creation time, limit and
//! offset bounded as Kueue bounds them, unknown queues; and the inadmissible Workloads and
//! stopped ClusterQueues Kueue's snapshot still lists.

use super::*;
use serde_json::json;
use std::time::Duration;

const HIGH: i32 = 100;
const LOW: i32 = 1;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn cluster_queue(name: &str) -> Value {
    json!({"metadata": {"name": name, "generation": 1}, "spec": {"namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default",
            "resources": [{"name": "cpu", "nominalQuota": "0"}]}]}]}})
}

fn local_queue(namespace: &str, name: &str, cluster_queue: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": namespace},
           "spec": {"clusterQueue": cluster_queue}})
}

/// A Workload `(name, namespace, LocalQueue, priority, seconds after now)`.
type Wl = (&'static str, &'static str, &'static str, i32, u64);

fn workload((name, namespace, queue, priority, seconds): Wl) -> Value {
    let created = tessera_model::time::timestamp(now() + Duration::from_secs(seconds));
    json!({"metadata": {"name": name, "namespace": namespace, "uid": name, "generation": 1,
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": "job-uid", "controller": true}]},
        "spec": {"queueName": queue, "priority": priority, "podSets": [{"name": "main",
            "count": 1, "template": {"spec": {"containers": [{"name": "c",
                "resources": {"requests": {"cpu": "1"}}}]}}}]}})
}

fn objects(local_queues: Vec<Value>, workloads: &[Wl]) -> Objects {
    Objects {
        flavors: vec![json!({"metadata": {"name": "default"}, "spec": {}})],
        cluster_queues: vec![cluster_queue("cqA"), cluster_queue("cqB")],
        cohorts: Vec::new(),
        local_queues,
        workloads: crate::api::objects::shared(workloads.iter().copied().map(workload)),
        namespaces: vec![
            json!({"metadata": {"name": "foo"}}),
            json!({"metadata": {"name": "bar"}}),
        ],
        ..Default::default()
    }
}

fn one_local_queue() -> Vec<Value> {
    vec![local_queue("foo", "lqA", "cqA")]
}

fn two_local_queues() -> Vec<Value> {
    vec![
        local_queue("foo", "lqA", "cqA"),
        local_queue("foo", "lqB", "cqA"),
    ]
}

const TWO: &[Wl] = &[("a", "foo", "lqA", HIGH, 0), ("b", "foo", "lqA", LOW, 0)];
const FOUR: &[Wl] = &[
    ("lqA-high-prio", "foo", "lqA", HIGH, 0),
    ("lqA-low-prio", "foo", "lqA", LOW, 0),
    ("lqB-high-prio", "foo", "lqB", HIGH, 1),
    ("lqB-low-prio", "foo", "lqB", LOW, 1),
];
const THREE: &[Wl] = &[
    ("a", "foo", "lqA", HIGH, 0),
    ("b", "foo", "lqA", HIGH, 1),
    ("c", "foo", "lqA", HIGH, 2),
];

/// `(name, positionInClusterQueue, positionInLocalQueue)` of each listed Workload, or why none.
type Listed = Result<Vec<(String, usize, usize)>, VisibilityError>;
/// A case: name, LocalQueues, Workloads, the queue asked for, `(limit, offset)`, the answer.
type Case<Q> = (
    &'static str,
    Vec<Value>,
    &'static [Wl],
    Q,
    (i64, i64),
    Listed,
);
/// `limit`, `offset`, and the page read from them.
type QueryCase = (
    Option<&'static str>,
    Option<&'static str>,
    Result<Page, VisibilityError>,
);

/// `(name, positionInClusterQueue, positionInLocalQueue)`.
fn positions(items: &[PendingWorkload]) -> Vec<(String, usize, usize)> {
    items
        .iter()
        .map(|w| {
            (
                w.name.clone(),
                w.position_in_cluster_queue,
                w.position_in_local_queue,
            )
        })
        .collect()
}

fn want(items: &[(&str, usize, usize)]) -> Vec<(String, usize, usize)> {
    items
        .iter()
        .map(|(name, cq, lq)| (name.to_string(), *cq, *lq))
        .collect()
}

#[test]
fn cluster_queue_pending_workloads_follow_kueues_table() {
    let default = (DEFAULT_LIMIT, 0);
    let cases: Vec<Case<&str>> = vec![
        (
            "one LocalQueue, two workloads, default query",
            one_local_queue(),
            TWO,
            "cqA",
            default,
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "two LocalQueues, four workloads: priority first, then creation",
            two_local_queues(),
            FOUR,
            "cqA",
            default,
            Ok(want(&[
                ("lqA-high-prio", 0, 0),
                ("lqB-high-prio", 1, 0),
                ("lqA-low-prio", 2, 1),
                ("lqB-low-prio", 3, 1),
            ])),
        ),
        (
            "limit",
            one_local_queue(),
            THREE,
            "cqA",
            (2, 0),
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "offset",
            one_local_queue(),
            THREE,
            "cqA",
            (DEFAULT_LIMIT, 1),
            Ok(want(&[("b", 1, 1), ("c", 2, 2)])),
        ),
        (
            "limit and offset",
            one_local_queue(),
            THREE,
            "cqA",
            (1, 1),
            Ok(want(&[("b", 1, 1)])),
        ),
        (
            "negative limit is clamped to zero",
            one_local_queue(),
            TWO,
            "cqA",
            (-1, 0),
            Ok(Vec::new()),
        ),
        (
            "excessive limit returns everything",
            one_local_queue(),
            TWO,
            "cqA",
            (2_000_000_000, 0),
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "a LocalQueue name reused in two namespaces counts positions per namespace",
            vec![
                local_queue("foo", "lqA", "cqA"),
                local_queue("bar", "lqA", "cqA"),
            ],
            &[("a", "foo", "lqA", HIGH, 0), ("b", "bar", "lqA", HIGH, 1)],
            "cqA",
            default,
            Ok(want(&[("a", 0, 0), ("b", 1, 0)])),
        ),
        (
            "empty ClusterQueue",
            one_local_queue(),
            &[],
            "cqA",
            default,
            Ok(Vec::new()),
        ),
        (
            "unknown ClusterQueue",
            one_local_queue(),
            TWO,
            "nonexistent-queue",
            default,
            Err(VisibilityError::NotFound {
                resource: "clusterqueue",
                name: "nonexistent-queue".into(),
            }),
        ),
    ];
    for (name, local_queues, workloads, cluster_queue, (limit, offset), expected) in cases {
        let input = objects(local_queues, workloads);
        let got =
            pending_in_cluster_queue(&input, cluster_queue, Page::bounded(limit, offset), now());
        assert_eq!(got.map(|items| positions(&items)), expected, "{name}");
    }
}

#[test]
fn local_queue_pending_workloads_follow_kueues_table() {
    let default = (DEFAULT_LIMIT, 0);
    let two_cluster_queues = || {
        vec![
            local_queue("foo", "lqA", "cqA"),
            local_queue("bar", "lqB", "cqB"),
        ]
    };
    let split: &[Wl] = &[
        ("lqA-high-prio", "foo", "lqA", HIGH, 0),
        ("lqA-low-prio", "foo", "lqA", LOW, 0),
        ("lqB-high-prio", "bar", "lqB", HIGH, 1),
        ("lqB-low-prio", "bar", "lqB", LOW, 1),
    ];
    let cases: Vec<Case<(&str, &str)>> = vec![
        (
            "one LocalQueue, two workloads",
            one_local_queue(),
            TWO,
            ("foo", "lqA"),
            default,
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "LocalQueue A of two sharing a ClusterQueue",
            two_local_queues(),
            FOUR,
            ("foo", "lqA"),
            default,
            Ok(want(&[("lqA-high-prio", 0, 0), ("lqA-low-prio", 2, 1)])),
        ),
        (
            "LocalQueue B of two sharing a ClusterQueue",
            two_local_queues(),
            FOUR,
            ("foo", "lqB"),
            default,
            Ok(want(&[("lqB-high-prio", 1, 0), ("lqB-low-prio", 3, 1)])),
        ),
        (
            "LocalQueue A, two ClusterQueues",
            two_cluster_queues(),
            split,
            ("foo", "lqA"),
            default,
            Ok(want(&[("lqA-high-prio", 0, 0), ("lqA-low-prio", 1, 1)])),
        ),
        (
            "LocalQueue B, two ClusterQueues",
            two_cluster_queues(),
            split,
            ("bar", "lqB"),
            default,
            Ok(want(&[("lqB-high-prio", 0, 0), ("lqB-low-prio", 1, 1)])),
        ),
        (
            "limit",
            one_local_queue(),
            THREE,
            ("foo", "lqA"),
            (2, 0),
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "offset",
            one_local_queue(),
            THREE,
            ("foo", "lqA"),
            (DEFAULT_LIMIT, 1),
            Ok(want(&[("b", 1, 1), ("c", 2, 2)])),
        ),
        (
            "limit and offset",
            one_local_queue(),
            THREE,
            ("foo", "lqA"),
            (1, 1),
            Ok(want(&[("b", 1, 1)])),
        ),
        (
            "negative limit is clamped to zero",
            one_local_queue(),
            TWO,
            ("foo", "lqA"),
            (-1, 0),
            Ok(Vec::new()),
        ),
        (
            "excessive limit",
            one_local_queue(),
            TWO,
            ("foo", "lqA"),
            (2_000_000_000, 0),
            Ok(want(&[("a", 0, 0), ("b", 1, 1)])),
        ),
        (
            "unknown LocalQueue",
            one_local_queue(),
            TWO,
            ("foo", "nonexistent-queue"),
            default,
            Err(VisibilityError::NotFound {
                resource: "localqueue",
                name: "nonexistent-queue".into(),
            }),
        ),
    ];
    for (name, local_queues, workloads, (namespace, queue), (limit, offset), expected) in cases {
        let input = objects(local_queues, workloads);
        let got = pending_in_local_queue(
            &input,
            namespace,
            queue,
            Page::bounded(limit, offset),
            now(),
        );
        assert_eq!(got.map(|items| positions(&items)), expected, "{name}");
    }
}

#[test]
fn inadmissible_and_stopped_queues_are_listed_and_blocked_local_queues_are_not() {
    let mut input = objects(two_local_queues(), FOUR);
    // A Workload waiting out its requeue backoff sits in the inadmissible set; Kueue's
    // snapshot lists it in heap order all the same.
    std::sync::Arc::make_mut(&mut input.workloads[0])["status"] = json!({"requeueState": {"count": 1,
        "requeueAt": tessera_model::time::timestamp(now() + Duration::from_secs(60))}});
    input.cluster_queues[0]["spec"]["stopPolicy"] = json!("Hold");
    input.local_queues[1]["spec"]["stopPolicy"] = json!("Hold");
    let got =
        pending_in_cluster_queue(&input, "cqA", Page::default(), now()).map(|i| positions(&i));
    assert_eq!(
        got,
        Ok(want(&[("lqA-high-prio", 0, 0), ("lqA-low-prio", 1, 1)]))
    );
}

#[test]
fn pages_are_read_from_query_parameters() {
    let cases: &[QueryCase] = &[
        (
            None,
            None,
            Ok(Page {
                limit: 1000,
                offset: 0,
            }),
        ),
        (
            Some("2"),
            Some("1"),
            Ok(Page {
                limit: 2,
                offset: 1,
            }),
        ),
        (
            Some("-5"),
            Some("-3"),
            Ok(Page {
                limit: 0,
                offset: 0,
            }),
        ),
        (
            Some("200000"),
            None,
            Ok(Page {
                limit: 100_000,
                offset: 0,
            }),
        ),
        (
            Some("two"),
            None,
            Err(VisibilityError::BadParameter {
                parameter: "limit",
                value: "two".into(),
            }),
        ),
    ];
    for (limit, offset, expected) in cases {
        assert_eq!(
            &Page::from_query(*limit, *offset),
            expected,
            "{limit:?} {offset:?}"
        );
    }
}

#[test]
fn the_summary_is_kueues_document() {
    let input = objects(one_local_queue(), &TWO[..1]);
    let items = pending_in_cluster_queue(&input, "cqA", Page::default(), now()).unwrap_or_default();
    let document = summary(&items, "v1beta1");
    assert_eq!(
        document,
        json!({
            "kind": "PendingWorkloadsSummary",
            "apiVersion": "visibility.kueue.x-k8s.io/v1beta1",
            "metadata": {"creationTimestamp": null},
            "items": [{
                "metadata": {"name": "a", "namespace": "foo",
                    "creationTimestamp": tessera_model::time::timestamp(now()),
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                        "name": "a", "uid": "job-uid"}]},
                "priority": HIGH,
                "localQueueName": "lqA",
                "positionInClusterQueue": 0,
                "positionInLocalQueue": 0,
            }],
        })
    );
}
