// Upstream: pkg/cache/queue/cluster_queue_test.go (TestBackoffWaitingTimeExpired,
// TestBestEffortFIFORequeueIfNotPresent, TestStrictFIFORequeueIfNotPresent,
// TestFIFOClusterQueue, TestStrictFIFO, TestClusterQueueIsPreemptor's sticky head) and the
// workload controller's queue blockers, and SchedulingEquivalenceHashing's requeue reasons
// (an_inadmissible_head_sets_its_equivalents_aside). Not ported: the hash digest,
// pending-resource, metrics, inflight, concurrency and AFS-ledger tests (those parts are not
// modelled).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::*;
use crate::workload::{AssignmentState, Workload};

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + seconds)
}

fn queued(name: &str, priority: i32, creation: SystemTime) -> QueuedWorkload {
    QueuedWorkload {
        info: WorkloadInfo::new(Workload {
            namespace: "ns".into(),
            name: name.into(),
            priority,
            ..Workload::default()
        }),
        uid: name.into(),
        job_uid: None,
        generation: 1,
        local_queue: "lq".into(),
        user: None,
        creation,
        eviction: None,
        requeue_at: None,
        requeue_held: false,
        last_assignment_generation: 0,
    }
}

#[test]
fn backoff_waiting_time_expired() {
    let now = at(100);
    let base = queued("wl", 0, at(0));
    let cases: Vec<(&str, QueuedWorkload, bool)> = vec![
        (
            "workload still have Requeued=false",
            QueuedWorkload {
                requeue_held: true,
                ..base.clone()
            },
            false,
        ),
        ("workload doesn't have requeueState", base.clone(), true),
        (
            "now already has exceeded requeueAt",
            QueuedWorkload {
                requeue_at: Some(at(40)),
                ..base.clone()
            },
            true,
        ),
        (
            "now equals requeueAt",
            QueuedWorkload {
                requeue_at: Some(now),
                ..base.clone()
            },
            true,
        ),
        (
            "now hasn't yet exceeded requeueAt",
            QueuedWorkload {
                requeue_at: Some(at(160)),
                ..base
            },
            false,
        ),
    ];
    for (name, workload, want) in cases {
        assert_eq!(workload.backoff_expired(now), want, "{name}");
    }
}

fn last_assignment(entries: &[&[(&str, i32)]]) -> AssignmentState {
    AssignmentState {
        last_tried_flavor_idx: entries
            .iter()
            .map(|ps| ps.iter().map(|(r, i)| ((*r).to_owned(), *i)).collect())
            .collect(),
    }
}

#[test]
fn best_effort_fifo_requeue_if_not_present() {
    type Case = (
        &'static str,
        RequeueReason,
        Option<AssignmentState>,
        bool,
        bool,
    );
    // (name, reason, last assignment, want inadmissible, want sticky)
    let cases: Vec<Case> = vec![
        (
            "failure after nomination",
            RequeueReason::FailedAfterNomination,
            None,
            false,
            false,
        ),
        (
            "pending preemption",
            RequeueReason::PendingPreemption,
            None,
            false,
            true,
        ),
        (
            "preemption failed",
            RequeueReason::PreemptionFailed,
            None,
            false,
            false,
        ),
        (
            "namespace doesn't match",
            RequeueReason::NamespaceMismatch,
            None,
            true,
            false,
        ),
        (
            "didn't fit and no pending flavors",
            RequeueReason::Generic,
            Some(last_assignment(&[
                &[("memory", -1)],
                &[("cpu", -1), ("memory", -1)],
            ])),
            true,
            false,
        ),
        (
            "didn't fit but pending flavors",
            RequeueReason::Generic,
            Some(last_assignment(&[
                &[("cpu", -1), ("memory", 0)],
                &[("memory", 1)],
            ])),
            false,
            false,
        ),
        ("nofit", RequeueReason::NoFit, None, true, false),
        (
            "preempt no candidates",
            RequeueReason::PreemptionNoCandidates,
            None,
            true,
            false,
        ),
    ];
    for (name, reason, last, want_inadmissible, want_sticky) in cases {
        let mut cq = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
        let mut workload = queued("workload-1", 0, at(0));
        workload.info.last_assignment = last;
        assert!(
            cq.requeue(workload.clone(), reason, at(0)),
            "{name}: requeued"
        );
        assert_eq!(
            cq.dump_inadmissible() == vec!["ns/workload-1".to_owned()],
            want_inadmissible,
            "{name}: inadmissible"
        );
        assert_eq!(cq.sticky() == Some("ns/workload-1"), want_sticky, "{name}");
        workload.info.last_assignment = None;
        assert!(
            !cq.requeue(workload, reason, at(0)),
            "{name}: re-queued a workload that was already present"
        );
    }
}

#[test]
fn strict_fifo_requeue_if_not_present() {
    let cases = [
        (RequeueReason::FailedAfterNomination, false),
        (RequeueReason::NamespaceMismatch, true),
        (RequeueReason::Generic, false),
    ];
    for (reason, want_inadmissible) in cases {
        let mut cq = ClusterQueueQueue::new(QueueingStrategy::StrictFifo);
        let workload = queued("workload-1", 0, at(0));
        assert!(cq.requeue(workload.clone(), reason, at(0)), "{reason:?}");
        assert_eq!(
            !cq.dump_inadmissible().is_empty(),
            want_inadmissible,
            "{reason:?}"
        );
        assert!(!cq.requeue(workload, reason, at(0)), "{reason:?}: twice");
    }
}

#[test]
fn fifo_cluster_queue() {
    let ordering = QueueOrdering::default();
    let mut cq = ClusterQueueQueue::new(QueueingStrategy::StrictFifo);
    for (name, creation) in [("now", at(10)), ("before", at(9)), ("after", at(11))] {
        cq.push_or_update(queued(name, 0, creation), at(20));
    }
    assert_eq!(cq.pop(&ordering).map(|w| w.key()), Some("ns/before".into()));
    cq.push_or_update(queued("after", 0, at(0)), at(20));
    assert_eq!(cq.pop(&ordering).map(|w| w.key()), Some("ns/after".into()));
    cq.delete("ns/now");
    assert_eq!(cq.pop(&ordering), None);
}

#[test]
fn strict_fifo_order() {
    let (t1, t2, t3) = (at(1), at(2), at(3));
    let evicted = |mut w: QueuedWorkload| {
        w.eviction = Some((EvictionCause::PodsReadyTimeout, t3));
        w
    };
    let cases: Vec<(
        &str,
        QueuedWorkload,
        QueuedWorkload,
        RequeuingTimestamp,
        &str,
    )> = vec![
        (
            "w1.priority is higher than w2.priority",
            queued("w1", 2, t1),
            queued("w2", 1, t2),
            RequeuingTimestamp::Eviction,
            "w1",
        ),
        (
            "w1.priority equals w2.priority and w1.create time is earlier than w2.create time",
            queued("w1", 0, t1),
            queued("w2", 0, t2),
            RequeuingTimestamp::Eviction,
            "w1",
        ),
        (
            "... but w1 was evicted",
            evicted(queued("w1", 0, t1)),
            queued("w2", 0, t2),
            RequeuingTimestamp::Eviction,
            "w2",
        ),
        (
            "... evicted, but kueue is configured to always use the creation timestamp",
            evicted(queued("w1", 0, t1)),
            queued("w2", 0, t2),
            RequeuingTimestamp::Creation,
            "w1",
        ),
        (
            "p1.priority is lower than p2.priority and w1.create time is earlier",
            queued("w1", 1, t1),
            queued("w2", 2, t2),
            RequeuingTimestamp::Eviction,
            "w2",
        ),
        (
            "same priority and time: UID breaks the tie",
            queued("w2", 0, t1),
            queued("w1", 0, t1),
            RequeuingTimestamp::Eviction,
            "w1",
        ),
    ];
    for (name, w1, w2, timestamp, want) in cases {
        let ordering = QueueOrdering {
            timestamp,
            ..QueueOrdering::default()
        };
        let mut cq = ClusterQueueQueue::new(QueueingStrategy::StrictFifo);
        cq.push_or_update(w1, at(5));
        cq.push_or_update(w2, at(5));
        let got = cq.pop(&ordering).map(|w| w.info.workload.name);
        assert_eq!(got.as_deref(), Some(want), "{name}");
    }
}

#[test]
fn sticky_preemptor_heads_the_queue_and_lq_usage_comes_first() {
    let mut cq = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
    cq.push_or_update(queued("high", 10, at(0)), at(5));
    let low = queued("low", 0, at(1));
    assert!(cq.requeue(low.clone(), RequeueReason::PendingPreemption, at(5)));
    assert!(cq.is_preemptor(&low));
    let ordering = QueueOrdering::default();
    assert_eq!(cq.dump(&ordering), vec!["ns/low", "ns/high"]);

    let mut other_lq = queued("other", 0, at(2));
    other_lq.local_queue = "quiet".into();
    cq.push_or_update(other_lq, at(5));
    let afs = QueueOrdering {
        local_queue_usage: BTreeMap::from([(
            "ns".to_owned(),
            BTreeMap::from([("lq".to_owned(), 5.0), ("quiet".into(), 1.0)]),
        )]),
        ..QueueOrdering::default()
    };
    assert_eq!(cq.dump(&afs), vec!["ns/other", "ns/low", "ns/high"]);
}

#[test]
fn lq_usage_compares_as_go_compares_floats() {
    // "old" (LocalQueue lq) is older than "new" (LocalQueue quiet): equal usages leave
    // FIFO order; NaN sorts first, as Go's cmp.Compare puts it.
    let cases = [
        ("equal", 1.0, 1.0, ["ns/old", "ns/new"]),
        ("-0 equals 0", -0.0, 0.0, ["ns/old", "ns/new"]),
        ("lower first", 2.0, 1.0, ["ns/new", "ns/old"]),
        ("infinite last", f64::INFINITY, 1e300, ["ns/new", "ns/old"]),
        ("NaN first", 1.0, f64::NAN, ["ns/new", "ns/old"]),
        ("both NaN", f64::NAN, f64::NAN, ["ns/old", "ns/new"]),
    ];
    for (name, lq, quiet, want) in cases {
        let mut cq = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
        cq.push_or_update(queued("old", 0, at(0)), at(5));
        let mut new = queued("new", 0, at(1));
        new.local_queue = "quiet".into();
        cq.push_or_update(new, at(5));
        let ordering = QueueOrdering {
            local_queue_usage: BTreeMap::from([(
                "ns".to_owned(),
                BTreeMap::from([("lq".to_owned(), lq), ("quiet".into(), quiet)]),
            )]),
            ..QueueOrdering::default()
        };
        assert_eq!(cq.dump(&ordering), want, "{name}");
    }
}

#[test]
fn backing_off_workloads_wait_until_an_event_after_requeue_at() {
    let mut cq = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
    let mut workload = queued("wl", 0, at(0));
    workload.requeue_at = Some(at(60));
    cq.push_or_update(workload, at(10));
    assert_eq!(cq.dump_inadmissible(), vec!["ns/wl"]);
    assert_eq!(cq.queue_inadmissible(at(30), &|_| true), 0);
    assert_eq!(cq.queue_inadmissible(at(60), &|ns| ns != "ns"), 0);
    assert_eq!(cq.queue_inadmissible(at(60), &|_| true), 1);
    assert_eq!(cq.dump(&QueueOrdering::default()), vec!["ns/wl"]);
}

#[test]
fn queue_blockers_and_heads() {
    let mut manager = QueueManager::default();
    let lq = |cq: &str, stop_policy| LocalQueue {
        cluster_queue: cq.into(),
        stop_policy,
        user_limits: UserLimits::default(),
    };
    manager
        .local_queues
        .insert("ns/lq".into(), lq("cq", StopPolicy::None));
    manager
        .local_queues
        .insert("ns/held".into(), lq("cq", StopPolicy::Hold));
    manager
        .local_queues
        .insert("ns/orphan".into(), lq("gone", StopPolicy::None));
    manager
        .local_queues
        .insert("ns/drained".into(), lq("stopped", StopPolicy::None));
    manager.cluster_queues.insert(
        "cq".into(),
        ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo),
    );
    let mut stopped = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
    stopped.active = false;
    manager.cluster_queues.insert("stopped".into(), stopped);

    let on = |queue: &str| {
        let mut w = queued(queue, 0, at(0));
        w.local_queue = queue.into();
        w
    };
    let cases = [
        (
            "missing",
            Some((MISCONFIGURED, "LocalQueue missing doesn't exist")),
        ),
        ("held", Some((SUSPENDED, "LocalQueue held is stopped"))),
        (
            "orphan",
            Some((MISCONFIGURED, "ClusterQueue gone doesn't exist")),
        ),
        (
            "drained",
            Some((SUSPENDED, "ClusterQueue stopped is inactive")),
        ),
        ("lq", None),
    ];
    for (queue, want) in cases {
        let want = want.map(|(reason, message)| QueueBlocker {
            reason,
            message: message.into(),
        });
        assert_eq!(manager.blocker(&on(queue)), want, "{queue}: blocker");
        let queued = manager.add_or_update(on(queue), at(1)).is_ok();
        assert_eq!(queued, matches!(queue, "lq" | "drained"), "{queue}: queued");
    }
    assert_eq!(
        manager.dump(),
        BTreeMap::from([
            ("cq".to_owned(), vec!["ns/lq".to_owned()]),
            ("stopped".to_owned(), vec!["ns/drained".to_owned()]),
        ]),
        "an inactive ClusterQueue keeps its workloads"
    );
    let heads = manager.heads();
    assert_eq!(heads.len(), 1);
    assert_eq!(heads[0].cluster_queue, "cq");
    assert_eq!(heads[0].workload.key(), "ns/lq");
    assert!(manager.heads().is_empty(), "one pop per ClusterQueue");
}

// Beyond Kueue: heads per cycle. (queues as (heads_per_cycle, active, workloads), rounds,
// heads popped per round).
#[test]
fn heads_in_rounds() {
    type Row = (
        &'static str,
        &'static [(usize, bool, usize)],
        usize,
        &'static [usize],
    );
    let cases: &[Row] = &[
        (
            "Kueue's default: one round",
            &[(1, true, 3), (1, true, 3)],
            1,
            &[2],
        ),
        ("0 reads as 1", &[(0, true, 3)], 1, &[1]),
        (
            "the widest active queue sets the rounds",
            &[(3, true, 5), (1, true, 5)],
            3,
            &[2, 1, 1],
        ),
        (
            "inactive queues take no part",
            &[(4, false, 5), (2, true, 5)],
            2,
            &[1, 1],
        ),
        (
            "an emptied queue stops giving heads",
            &[(3, true, 2), (3, true, 3)],
            3,
            &[2, 2, 1],
        ),
    ];
    for (name, queues, rounds, popped) in cases {
        let mut manager = QueueManager::default();
        for (i, (heads, active, workloads)) in queues.iter().enumerate() {
            let mut queue = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
            queue.heads_per_cycle = *heads;
            queue.active = *active;
            for w in 0..*workloads {
                let seconds = u64::try_from(w).unwrap_or_default();
                queue.push_or_update(queued(&format!("wl-{i}-{w}"), 0, at(seconds)), at(0));
            }
            manager.cluster_queues.insert(format!("cq-{i}"), queue);
        }
        assert_eq!(manager.rounds_per_cycle(), *rounds, "{name}: rounds");
        let got: Vec<usize> = (0..*rounds)
            .map(|round| manager.heads_in_round(round).len())
            .collect();
        assert_eq!(got, *popped, "{name}: heads per round");
    }
}

mod pop_order {
    //! The indexed active heap pops exactly what a scan with `QueueOrdering::compare` over
    //! every active Workload would: priorities, timestamps, UIDs, several LocalQueues with
    //! admission fair sharing usage, a sticky preemptor, updates and removals in between.

    use super::*;
    use proptest::prelude::*;

    fn workload(spec: &(u8, i32, u64, u8, u8)) -> QueuedWorkload {
        let (name, priority, created, local_queue, uid) = *spec;
        let mut workload = queued(&format!("w{name}"), priority, at(created));
        workload.local_queue = format!("lq{local_queue}");
        workload.uid = format!("u{uid}");
        workload
    }

    fn scan_order(
        workloads: &BTreeMap<String, QueuedWorkload>,
        ordering: &QueueOrdering,
        sticky: Option<&str>,
    ) -> Vec<String> {
        let mut all: Vec<&QueuedWorkload> = workloads.values().collect();
        all.sort_by(|a, b| ordering.compare(a, b, sticky));
        all.into_iter().map(QueuedWorkload::key).collect()
    }

    proptest! {
        #[test]
        fn pops_in_the_scan_order(
            specs in proptest::collection::vec((0u8..40, -2i32..3, 0u64..5, 0u8..3, 0u8..4), 1..40),
            usage in proptest::collection::vec(0u8..3, 3),
            fair in any::<bool>(),
            sticky in proptest::option::of(0u8..40),
        ) {
            let mut ordering = QueueOrdering::default();
            if fair {
                for (index, used) in usage.iter().enumerate() {
                    ordering
                        .local_queue_usage
                        .entry("ns".into())
                        .or_default()
                        .insert(format!("lq{index}"), f64::from(*used));
                }
            }
            let mut queue = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
            // Later specs with the same name update the earlier ones, as a pass re-pushes.
            let mut expected: BTreeMap<String, QueuedWorkload> = BTreeMap::new();
            for spec in &specs {
                let workload = workload(spec);
                expected.insert(workload.key(), workload.clone());
                queue.push_or_update(workload, at(10));
            }
            let sticky_key = sticky.map(|name| format!("ns/w{name}"));
            if let Some(key) = &sticky_key
                && let Some(workload) = expected.get(key).cloned()
            {
                // A head that waits for its preemptions becomes the sticky preemptor.
                queue.delete(key);
                queue.requeue(workload, RequeueReason::PendingPreemption, at(10));
            }
            let want = scan_order(&expected, &ordering, sticky_key.as_deref());
            let mut got = Vec::new();
            while let Some(workload) = queue.pop(&ordering) {
                got.push(workload.key());
            }
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn parked_workloads_leave_the_heap_and_come_back_in_order() {
    // Each case: what is done to a queue of a (priority 3), b (2), c (1), d (0) in one
    // LocalQueue, then what pops, in order. Parking only marks a Workload; its place in the
    // order is dropped when a pop meets it, or kept when it is requeued first.
    type Step = fn(&mut ClusterQueueQueue);
    let cases: Vec<(&str, Step, Vec<&str>)> = vec![
        ("nothing parked", |_| {}, vec!["a", "b", "c", "d"]),
        (
            "parked ones do not pop",
            |q| {
                assert!(q.park("ns/a"));
                assert!(q.park("ns/c"));
            },
            vec!["b", "d"],
        ),
        (
            "a parked one is parked once",
            |q| {
                assert!(q.park("ns/b"));
                assert!(!q.park("ns/b"));
                assert!(q.is_inadmissible("ns/b"));
            },
            vec!["a", "c", "d"],
        ),
        (
            "parked, then requeued before any pop: back in its place",
            |q| {
                q.park("ns/a");
                q.park("ns/b");
                assert_eq!(q.queue_inadmissible(at(50), &|_| true), 2);
            },
            vec!["a", "b", "c", "d"],
        ),
        (
            "parked, popped past, then requeued: indexed again",
            |q| {
                q.park("ns/a");
                let ordering = QueueOrdering::default();
                assert_eq!(q.pop(&ordering).map(|w| w.key()), Some("ns/b".into()));
                assert_eq!(q.queue_inadmissible(at(50), &|_| true), 1);
            },
            vec!["a", "c", "d"],
        ),
        (
            "a parked one updated while parked pops with its new priority",
            |q| {
                q.park("ns/d");
                q.push_or_update(queued("d", 9, at(3)), at(50));
                assert!(!q.is_inadmissible("ns/d"));
            },
            vec!["d", "a", "b", "c"],
        ),
        (
            "a deleted parked one is gone",
            |q| {
                q.park("ns/b");
                q.delete("ns/b");
                assert!(!q.is_inadmissible("ns/b"));
                assert_eq!(q.queue_inadmissible(at(50), &|_| true), 0);
            },
            vec!["a", "c", "d"],
        ),
        (
            "the namespace filter leaves the others parked",
            |q| {
                q.park("ns/a");
                assert_eq!(q.queue_inadmissible(at(50), &|ns| ns != "ns"), 0);
                assert_eq!(q.dump_inadmissible(), vec!["ns/a".to_owned()]);
            },
            vec!["b", "c", "d"],
        ),
    ];
    for (name, step, want) in cases {
        let mut q = ClusterQueueQueue::new(QueueingStrategy::BestEffortFifo);
        for (index, (workload, priority)) in [("a", 3), ("b", 2), ("c", 1), ("d", 0)]
            .into_iter()
            .enumerate()
        {
            q.push_or_update(queued(workload, priority, at(index as u64)), at(10));
        }
        step(&mut q);
        let ordering = QueueOrdering::default();
        let mut popped = Vec::new();
        while let Some(workload) = q.pop(&ordering) {
            popped.push(workload.info.workload.name);
        }
        assert_eq!(popped, want, "{name}");
    }
}

/// A Workload of shape `priority` asking for `cpu` milli-CPU.
fn shaped(name: &str, priority: i32, cpu: i64, creation: SystemTime) -> QueuedWorkload {
    let mut workload = queued(name, priority, creation);
    workload.info = WorkloadInfo::new(Workload {
        pod_sets: vec![crate::workload::PodSet {
            name: "main".into(),
            count: 1,
            requests: [("cpu".to_owned(), cpu)].into(),
            ..Default::default()
        }],
        ..workload.info.workload.clone()
    });
    workload
}

#[test]
fn an_inadmissible_head_sets_its_equivalents_aside() {
    // SchedulingEquivalenceHashing (cluster_queue_test.go's TestRequeueIfNotPresent hash cases
    // and TestGetNoFitReason's reasons): the head `a` (priority 5, 1 CPU) is popped and
    // requeued for `reason` in a queue of `strategy`; then `b` (its equivalent), `c` (another
    // priority) and `d` (other requests) stay active or not; then `e`, a new equivalent, is
    // added before and after a retry of the inadmissible set. Active Workloads are listed in
    // pop order (priority, then creation).
    let cases: Vec<(&str, QueueingStrategy, bool, RequeueReason, Vec<&str>)> = vec![
        (
            "NoFit sets the equivalent aside, other shapes stay",
            QueueingStrategy::BestEffortFifo,
            true,
            RequeueReason::NoFit,
            vec!["ns/d", "ns/c"],
        ),
        (
            "PreemptionNoCandidates too",
            QueueingStrategy::BestEffortFifo,
            true,
            RequeueReason::PreemptionNoCandidates,
            vec!["ns/d", "ns/c"],
        ),
        (
            "a generic failure is the head's own",
            QueueingStrategy::BestEffortFifo,
            true,
            RequeueReason::Generic,
            vec!["ns/b", "ns/d", "ns/c"],
        ),
        (
            "a namespace mismatch is the head's own",
            QueueingStrategy::BestEffortFifo,
            true,
            RequeueReason::NamespaceMismatch,
            vec!["ns/b", "ns/d", "ns/c"],
        ),
        (
            "StrictFIFO keeps its order",
            QueueingStrategy::StrictFifo,
            true,
            RequeueReason::NoFit,
            vec!["ns/a", "ns/b", "ns/d", "ns/c"],
        ),
        (
            "the gate off",
            QueueingStrategy::BestEffortFifo,
            false,
            RequeueReason::NoFit,
            vec!["ns/b", "ns/d", "ns/c"],
        ),
    ];
    let ordering = QueueOrdering::default();
    for (name, strategy, gate, reason, active) in cases {
        let mut queue = ClusterQueueQueue::new(strategy);
        queue.equivalence_hashing = gate;
        for workload in [
            shaped("a", 5, 1000, at(1)),
            shaped("b", 5, 1000, at(2)),
            shaped("c", 4, 1000, at(3)),
            shaped("d", 5, 2000, at(4)),
        ] {
            queue.push_or_update(workload, at(10));
        }
        let head = queue.pop(&ordering).expect("a head");
        assert_eq!(head.key(), "ns/a", "{name}");
        queue.requeue(head, reason, at(10));
        assert_eq!(
            queue.dump(&ordering),
            active,
            "{name}: active after the requeue"
        );
        let set_aside = active.len() == 2;
        queue.push_or_update(shaped("e", 5, 1000, at(5)), at(11));
        assert_eq!(
            queue.is_inadmissible("ns/e"),
            set_aside,
            "{name}: a new equivalent before the retry"
        );
        queue.delete("ns/e");
        queue.queue_inadmissible(at(12), &|_| true);
        queue.push_or_update(shaped("e", 5, 1000, at(5)), at(12));
        assert!(
            !queue.is_inadmissible("ns/e"),
            "{name}: a retry forgets the failed shapes"
        );
    }
}

#[test]
fn shape_classes_number_each_shape_once_while_it_is_held() {
    use super::equivalence::ShapeClasses;
    let mut classes = ShapeClasses::default();
    let (a, b, high) = (
        queued("a", 1, at(0)),
        queued("b", 1, at(5)),
        queued("c", 9, at(0)),
    );
    // Name, UID and creation are not part of the shape; priority is.
    let shape = classes.join(&a);
    assert_eq!(classes.join(&b), shape);
    let other = classes.join(&high);
    assert_ne!(other, shape);
    assert_eq!((classes.find(&b), classes.len()), (Some(shape), 2));
    // Kept while one Workload still holds it, forgotten with the last; its number reused.
    classes.leave(shape);
    assert_eq!(classes.find(&a), Some(shape));
    classes.leave(shape);
    assert_eq!((classes.find(&a), classes.len()), (None, 1));
    let mut more = queued("d", 1, at(0));
    more.info.workload.pod_sets = vec![crate::workload::PodSet {
        name: "main".into(),
        count: 2,
        ..Default::default()
    }];
    assert_eq!(classes.join(&more), shape, "a freed number is reused");
    assert_eq!(
        classes.find(&a),
        None,
        "another shape under the reused number"
    );
    assert_eq!(classes.find(&high), Some(other));
}
