//! Table and scenario tests of a pass: Kueue's quick start (admission, the pending
//! explanation, blockers, queue statuses and events), borrowing in a cohort, stored
//! reservations kept across passes, reclamation by preemption pass after pass, drained and
//! deactivated Workloads.

mod quick_start {
    use super::super::*;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn flavor(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {}})
    }

    fn cluster_queue(name: &str, cohort: Option<&str>, cpu: &str) -> Value {
        let mut spec = json!({"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["cpu", "memory"],
            "flavors": [{"name": "default-flavor", "resources": [
                {"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": "36Gi"}]}]}]});
        if let Some(cohort) = cohort {
            spec["cohortName"] = json!(cohort);
        }
        json!({"metadata": {"name": name, "generation": 1}, "spec": spec})
    }

    fn local_queue(name: &str, cluster_queue: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"clusterQueue": cluster_queue}})
    }

    fn workload(name: &str, queue: &str, pods: i32, seconds: u64) -> Value {
        let created = tessera_model::time::timestamp(now() - Duration::from_secs(1000 - seconds));
        json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
                "creationTimestamp": created},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}]}})
    }

    fn objects(
        cluster_queues: Vec<Value>,
        local_queues: Vec<Value>,
        workloads: Vec<Value>,
    ) -> Objects {
        Objects {
            flavors: vec![flavor("default-flavor")],
            cluster_queues,
            cohorts: Vec::new(),
            local_queues,
            workloads: crate::api::objects::shared(workloads),
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Default::default()
        }
    }

    fn written<'a>(writes: &'a [StatusWrite], name: &str) -> Option<&'a Value> {
        writes.iter().find(|w| w.name == name).map(|w| &w.status)
    }

    fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|l| l.iter().find(|c| c["type"] == kind))
            .unwrap_or(&Value::Null)
    }

    /// Kueue's `handlePodOverhead`: a PodSet naming a RuntimeClass counts the class's
    /// overhead in its requests (a template stating its own keeps it; an unknown class or
    /// one without overhead adds nothing).
    #[test]
    fn pod_sets_naming_a_runtime_class_count_its_overhead() {
        let kata = json!({"metadata": {"name": "kata"}, "handler": "kata-qemu",
            "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}}});
        let runc = json!({"metadata": {"name": "runc"}, "handler": "runc"});
        let with_class = |name: &str, class: Option<&str>, overhead: Option<Value>| {
            let mut workload = workload(name, "user-queue", 2, 1);
            let spec = &mut workload["spec"]["podSets"][0]["template"]["spec"];
            if let Some(class) = class {
                spec["runtimeClassName"] = json!(class);
            }
            if let Some(overhead) = overhead {
                spec["overhead"] = overhead;
            }
            workload
        };
        // (workload, the admitted cpu and memory of its two pods)
        let cases = [
            (with_class("plain", None, None), ("2", "400Mi")),
            (with_class("kata", Some("kata"), None), ("2500m", "720Mi")),
            (with_class("runc", Some("runc"), None), ("2", "400Mi")),
            (with_class("unknown", Some("gvisor"), None), ("2", "400Mi")),
            (
                with_class("stated", Some("kata"), Some(json!({"cpu": "100m"}))),
                ("2200m", "400Mi"),
            ),
        ];
        for (workload, (cpu, memory)) in cases {
            let name = workload["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let mut input = objects(
                vec![cluster_queue("cluster-queue", None, "9")],
                vec![local_queue("user-queue", "cluster-queue")],
                vec![workload],
            );
            input.runtime_classes = vec![kata.clone(), runc.clone()];
            let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
            let admitted = written(&pass.workloads, &name).expect("admitted");
            assert_eq!(
                admitted["admission"]["podSetAssignments"][0]["resourceUsage"],
                json!({"cpu": cpu, "memory": memory}),
                "{name}"
            );
        }
        // Quota the overhead does not fit in: 2 × 1 CPU fits 2 CPUs, 2 × 1250m does not.
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "2")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![with_class("kata", Some("kata"), None)],
        );
        input.runtime_classes = vec![kata];
        let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
        let pending = written(&pass.workloads, "kata").expect("pending");
        assert_eq!(condition(pending, "QuotaReserved")["status"], "False");
    }

    #[test]
    fn the_quick_start_admits_what_fits_and_explains_what_does_not() {
        let input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![
                workload("sample-job", "user-queue", 3, 1),
                workload("too-big", "user-queue", 10, 2),
                workload("lost", "no-such-queue", 1, 3),
            ],
        );
        let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
        // The admission is written first (pods wait on it), then the rest in key order.
        let order: Vec<&str> = pass.workloads.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(order, ["sample-job", "lost", "too-big"]);
        let admitted = written(&pass.workloads, "sample-job").expect("admitted");
        assert_eq!(admitted["admission"]["clusterQueue"], "cluster-queue");
        let assignment = &admitted["admission"]["podSetAssignments"][0];
        assert_eq!(
            assignment["flavors"],
            json!({"cpu": "default-flavor", "memory": "default-flavor"})
        );
        assert_eq!(
            assignment["resourceUsage"],
            json!({"cpu": "3", "memory": "600Mi"})
        );
        assert_eq!(condition(admitted, "Admitted")["status"], "True");

        let too_big = written(&pass.workloads, "too-big").expect("pending");
        let reserved = condition(too_big, "QuotaReserved");
        assert_eq!(reserved["status"], "False");
        let message = reserved["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("insufficient quota for cpu in flavor default-flavor"),
            "{message}"
        );

        // Events: the admission's two, a warning per newly pending Workload.
        let events: Vec<(&str, &str, &str)> = pass
            .events
            .iter()
            .map(|e| {
                (
                    e.involved["name"].as_str().unwrap_or(""),
                    e.kind,
                    e.reason.as_str(),
                )
            })
            .collect();
        assert!(
            events.contains(&("sample-job", "Normal", "QuotaReserved")),
            "{events:?}"
        );
        assert!(
            events.contains(&("sample-job", "Normal", "Admitted")),
            "{events:?}"
        );
        assert!(
            events.contains(&("lost", "Warning", "Misconfigured")),
            "{events:?}"
        );
        let reserved = pass
            .events
            .iter()
            .find(|e| e.reason == "QuotaReserved")
            .expect("event");
        assert_eq!(
            reserved.message,
            "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 999s"
        );
        assert_eq!(reserved.involved["kind"], "Workload");

        // The scheduler records what it looked at; the queue checks do not.
        assert_eq!(
            too_big["resourceRequests"],
            json!([{"name": "main", "resources": {"cpu": "10", "memory": "2000Mi"}}])
        );
        let lost = written(&pass.workloads, "lost").expect("pending");
        assert!(lost.get("resourceRequests").is_none(), "{lost}");
        assert_eq!(condition(lost, "QuotaReserved")["reason"], "Misconfigured");
        assert_eq!(
            condition(lost, "QuotaReserved")["message"],
            "LocalQueue no-such-queue doesn't exist"
        );

        let cq = written(&pass.cluster_queues, "cluster-queue").expect("status");
        assert_eq!(
            (
                &cq["pendingWorkloads"],
                &cq["reservingWorkloads"],
                &cq["admittedWorkloads"]
            ),
            (&json!(1), &json!(1), &json!(1))
        );
        assert_eq!(
            cq["flavorsReservation"][0]["resources"][0],
            json!({"name": "cpu", "total": "3", "borrowed": "0"})
        );
        assert_eq!(condition(cq, "Active")["reason"], "Ready");
        let lq = written(&pass.local_queues, "user-queue").expect("status");
        assert_eq!(
            lq["flavorsUsage"][0]["resources"][1],
            json!({"name": "memory", "total": "600Mi"})
        );
    }

    #[test]
    fn a_stored_reservation_is_kept_and_counted_not_admitted_again() {
        let first = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![
                workload("a", "user-queue", 6, 1),
                workload("b", "user-queue", 6, 2),
            ],
        );
        let mut queues = Queues::default();
        let pass1 = pass(&first, &mut queues, &Settings::default(), now());
        let mut a = (*first.workloads[0]).clone();
        a["status"] = written(&pass1.workloads, "a").expect("a admitted").clone();
        let mut b = (*first.workloads[1]).clone();
        b["status"] = written(&pass1.workloads, "b").expect("b pending").clone();
        assert_eq!(condition(&b["status"], "QuotaReserved")["status"], "False");
        // The stored objects after the writes: nothing new to write for either Workload.
        let second = objects(
            first.cluster_queues.clone(),
            first.local_queues.clone(),
            vec![a, b],
        );
        let pass2 = pass(
            &second,
            &mut queues,
            &Settings::default(),
            now() + Duration::from_secs(5),
        );
        assert!(pass2.workloads.is_empty(), "{:?}", pass2.workloads);
    }

    fn store(object: &mut Value, status: Option<&Value>) {
        if !object["status"].is_object() {
            object["status"] = json!({});
        }
        for (field, value) in status.and_then(Value::as_object).into_iter().flatten() {
            object["status"][field] = value.clone();
        }
    }

    /// Stores a pass's status writes as the API server would: each written Workload's status
    /// merged, at a new resourceVersion.
    fn store_writes(workloads: &mut [Arc<Value>], last: &Pass, version: &mut u64) {
        for object in workloads {
            let object = Arc::make_mut(object);
            let name = objects::name(object).to_owned();
            if let Some(status) = written(&last.workloads, &name) {
                store(object, Some(status));
                *version += 1;
                object["metadata"]["resourceVersion"] = json!(version.to_string());
            }
        }
    }

    /// `workloads` at increasing resourceVersions after `version`, as a store keeps them.
    fn versioned(mut workloads: Vec<Value>, version: &mut u64) -> Vec<Value> {
        for object in &mut workloads {
            *version += 1;
            object["metadata"]["resourceVersion"] = json!(version.to_string());
        }
        workloads
    }

    /// A pass at `step` by queues that remember the Workloads read before (`cached`), checked
    /// against a pass by queues that parse every Workload again (`fresh`): they decide alike.
    fn remembering_pass(
        input: &Objects,
        (cached, fresh): (&mut Queues, &mut Queues),
        at: SystemTime,
        step: &str,
    ) -> Pass {
        fresh.forget_parsed();
        let remembering = pass(input, cached, &Settings::default(), at);
        let parsing = pass(input, fresh, &Settings::default(), at);
        assert_eq!(remembering, parsing, "{step}");
        remembering
    }

    #[test]
    fn passes_over_remembered_workloads_decide_as_passes_over_fresh_ones() {
        let mut version = 0;
        let workloads = versioned(
            vec![
                workload("a", "user-queue", 3, 1),
                workload("b", "user-queue", 10, 2),
                workload("c", "user-queue", 3, 3),
            ],
            &mut version,
        );
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            workloads,
        );
        let (mut cached, mut fresh) = (Queues::default(), Queues::default());
        // (step, what changes before the pass, Workloads the remembering pass parses).
        // The remembering passes also skip the steps of Workloads quiet before
        // (`api::quiet`); the fresh ones never do.
        type Change = fn(&mut Objects, &Pass, &mut u64);
        let steps: [(&str, Change, usize); 6] = [
            ("first pass", |_, _, _| {}, 3),
            (
                "its writes stored",
                |o, last, v| store_writes(&mut o.workloads, last, v),
                3,
            ),
            (
                "b shrunk to fit",
                |objects, _, version| {
                    *version += 1;
                    let b = Arc::make_mut(&mut objects.workloads[1]);
                    b["spec"]["podSets"][0]["count"] = json!(3);
                    b["metadata"]["resourceVersion"] = json!(version.to_string());
                },
                1,
            ),
            (
                "b's admission stored",
                |o, last, v| store_writes(&mut o.workloads, last, v),
                1,
            ),
            ("nothing changed", |_, _, _| {}, 0),
            (
                "the LocalQueue drained",
                |objects, _, _| {
                    objects.local_queues[0]["spec"]["stopPolicy"] = json!("HoldAndDrain")
                },
                0,
            ),
        ];
        let mut last = Pass::default();
        for (index, (step, change, parsed)) in steps.into_iter().enumerate() {
            change(&mut input, &last, &mut version);
            let at = now() + Duration::from_secs(5 * index as u64);
            let remembering = remembering_pass(&input, (&mut cached, &mut fresh), at, step);
            assert_eq!(cached.parsed().parsed(), parsed, "{step}: parsed");
            assert_eq!(fresh.parsed().parsed(), 3, "{step}: fresh parses all");
            if step == "b shrunk to fit" {
                // The changed Workload was read again: b now fits and is admitted.
                let b = written(&remembering.workloads, "b");
                assert!(b.is_some_and(|b| b["admission"].is_object()), "{b:?}");
            }
            last = remembering;
        }
        // The Workloads holding quota, quiet since their admissions were stored, are evicted
        // once their LocalQueue is drained.
        for name in ["a", "b", "c"] {
            let evicted = written(&last.workloads, name)
                .and_then(|status| status["conditions"].as_array().cloned())
                .is_some_and(|list| {
                    list.iter()
                        .any(|c| c["type"] == "Evicted" && c["status"] == "True")
                });
            assert!(evicted, "{name}: {:?}", last.workloads);
        }
    }

    /// `pendingWorkloads` counts, per LocalQueue and ClusterQueue, every pending Workload
    /// whose LocalQueue exists, queued or held back (a stopped LocalQueue, a missing
    /// ClusterQueue), but not those the pass admits; a pass that meets Workloads again at
    /// the states read before (passed by unread) counts them as a fresh pass does.
    #[test]
    fn pending_workloads_are_counted_per_queue_pass_after_pass() {
        let mut version = 0;
        let mut held = local_queue("lq-held", "cluster-queue");
        held["spec"]["stopPolicy"] = json!("Hold");
        let workloads = versioned(
            vec![
                workload("a1", "lq-a", 6, 1),
                workload("a2", "lq-a", 6, 2),
                workload("a3", "lq-a", 6, 3),
                workload("b1", "lq-b", 6, 4),
                workload("b2", "lq-b", 6, 5),
                workload("h1", "lq-held", 1, 6),
                workload("l1", "lq-lost", 1, 7),
                workload("x1", "no-such-queue", 1, 8),
            ],
            &mut version,
        );
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![
                local_queue("lq-a", "cluster-queue"),
                local_queue("lq-b", "cluster-queue"),
                held,
                local_queue("lq-lost", "no-such-cluster-queue"),
            ],
            workloads,
        );
        type Change = fn(&mut Objects, &Pass, &mut u64);
        // (step, what changes before the pass, the ClusterQueue's pendingWorkloads, those of
        // lq-a, lq-b, lq-held and lq-lost). a1 is admitted by the first pass (and by the
        // second, its admission not stored yet); six cpu more never fit.
        let steps: [(&str, Change, i64, [i64; 4]); 5] = [
            ("first pass", |_, _, _| {}, 5, [2, 2, 1, 1]),
            ("met again unchanged", |_, _, _| {}, 5, [2, 2, 1, 1]),
            (
                "the writes stored",
                |o, last, v| store_writes(&mut o.workloads, last, v),
                5,
                [2, 2, 1, 1],
            ),
            (
                "b1 deleted",
                |objects, _, _| objects.workloads.retain(|w| objects::name(w) != "b1"),
                4,
                [2, 1, 1, 1],
            ),
            (
                "lq-held resumed, h1 admitted",
                |objects, _, _| {
                    objects.local_queues[2]["spec"]["stopPolicy"] = json!("None");
                },
                3,
                [2, 1, 0, 1],
            ),
        ];
        let (mut cached, mut fresh) = (Queues::default(), Queues::default());
        let mut last = Pass::default();
        for (index, (step, change, cluster_queue, local_queues)) in steps.into_iter().enumerate() {
            change(&mut input, &last, &mut version);
            let at = now() + Duration::from_secs(5 * index as u64);
            let remembering = remembering_pass(&input, (&mut cached, &mut fresh), at, step);
            let pending = |writes: &[StatusWrite], name: &str| {
                written(writes, name).map(|status| status["pendingWorkloads"].clone())
            };
            assert_eq!(
                pending(&remembering.cluster_queues, "cluster-queue"),
                Some(json!(cluster_queue)),
                "{step}"
            );
            for (name, count) in ["lq-a", "lq-b", "lq-held", "lq-lost"]
                .into_iter()
                .zip(local_queues)
            {
                assert_eq!(
                    pending(&remembering.local_queues, name),
                    Some(json!(count)),
                    "{step}: {name}"
                );
            }
            last = remembering;
        }
    }

    #[test]
    fn block_admission_waits_for_pods_ready_and_a_late_workload_is_evicted() {
        let wait = WaitForPodsReady {
            timeout: Duration::from_secs(60),
            block_admission: true,
            recovery_timeout: None,
            requeuing: crate::config::RequeuingStrategy {
                timestamp: crate::queue::RequeuingTimestamp::Eviction,
                backoff_limit_count: None,
                backoff_base_seconds: 10,
                backoff_max_seconds: 100,
            },
        };
        let settings = Settings {
            wait_for_pods_ready: Some(wait),
            ..Settings::default()
        };
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![
                workload("a", "user-queue", 3, 1),
                workload("b", "user-queue", 3, 2),
            ],
        );
        let mut queues = Queues::default();
        let first = pass(&input, &mut queues, &settings, now());
        assert!(written(&first.workloads, "a").is_some_and(|a| a["admission"].is_object()));
        let b = written(&first.workloads, "b").expect("b waits");
        let reserved = condition(b, "QuotaReserved");
        assert_eq!(reserved["reason"], "WaitingForPodsReady");
        assert_eq!(
            reserved["message"],
            "waiting for all admitted workloads to be in PodsReady condition"
        );
        for (index, name) in ["a", "b"].into_iter().enumerate() {
            store(
                Arc::make_mut(&mut input.workloads[index]),
                written(&first.workloads, name),
            );
        }
        // Still not ready: b keeps waiting, nothing new is written.
        let second = pass(
            &input,
            &mut queues,
            &settings,
            now() + Duration::from_secs(5),
        );
        assert!(
            written(&second.workloads, "b").is_none(),
            "{:?}",
            second.workloads
        );
        // a's pods are ready: b is admitted.
        let ready = json!({"type": "PodsReady", "status": "True", "reason": "Started"});
        let mut ready_input = input.clone();
        Arc::make_mut(&mut ready_input.workloads[0])["status"]["conditions"]
            .as_array_mut()
            .expect("list")
            .push(ready);
        let third = pass(
            &ready_input,
            &mut queues,
            &settings,
            now() + Duration::from_secs(10),
        );
        assert!(written(&third.workloads, "b").is_some_and(|b| b["admission"].is_object()));
        // Never ready: past the timeout a is evicted with a backoff of 10s.
        let late = now() + Duration::from_secs(60);
        let fourth = pass(&input, &mut queues, &settings, late);
        let evicted = written(&fourth.workloads, "a").expect("a evicted");
        assert_eq!(condition(evicted, "Evicted")["reason"], "PodsReadyTimeout");
        assert_eq!(
            evicted["requeueState"],
            json!({"count": 1, "requeueAt": tessera_model::time::timestamp(late + Duration::from_secs(10))})
        );
        assert!(
            fourth
                .events
                .iter()
                .any(|e| e.reason == "EvictedDueToPodsReadyTimeout")
        );
        assert!(fourth.deactivations.is_empty());
    }

    #[test]
    fn a_cluster_queue_borrows_its_cohorts_idle_quota() {
        let input = objects(
            vec![
                cluster_queue("team-a", Some("org"), "9"),
                cluster_queue("team-b", Some("org"), "9"),
            ],
            vec![local_queue("a", "team-a"), local_queue("b", "team-b")],
            vec![workload("big", "b", 12, 1)],
        );
        let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
        let admitted = written(&pass.workloads, "big").expect("admitted");
        assert_eq!(admitted["admission"]["clusterQueue"], "team-b");
        let cq = written(&pass.cluster_queues, "team-b").expect("status");
        assert_eq!(
            cq["flavorsReservation"][0]["resources"][0],
            json!({"name": "cpu", "total": "12", "borrowed": "3"})
        );
    }

    #[test]
    fn fair_sharing_writes_each_cluster_queues_weighted_share() {
        let input = objects(
            vec![
                cluster_queue("team-a", Some("org"), "9"),
                cluster_queue("team-b", Some("org"), "9"),
            ],
            vec![local_queue("a", "team-a"), local_queue("b", "team-b")],
            vec![workload("big", "b", 12, 1)],
        );
        let file = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n";
        let configuration = crate::config::parse(file).expect("a configuration");
        let settings = Settings::from(&configuration);
        assert!(settings.preemption.fair_sharing.is_some());
        let cases = [
            (Settings::default(), None, None),
            // team-b borrows 3 of the 18 CPUs the cohort can lend: ⌈3/18·1000⌉.
            (settings, Some(json!(0)), Some(json!(167))),
        ];
        for (settings, team_a, team_b) in cases {
            let pass = pass(&input, &mut Queues::default(), &settings, now());
            let share = |name| {
                written(&pass.cluster_queues, name)
                    .and_then(|status| status.pointer("/fairSharing/weightedShare"))
                    .cloned()
            };
            assert_eq!((share("team-a"), share("team-b")), (team_a, team_b));
        }
    }

    #[test]
    fn a_missing_flavor_makes_the_queues_inactive() {
        let mut input = objects(
            vec![cluster_queue("cluster-queue", None, "9")],
            vec![local_queue("user-queue", "cluster-queue")],
            vec![workload("w", "user-queue", 1, 1)],
        );
        input.flavors.clear();
        let pass = pass(&input, &mut Queues::default(), &Settings::default(), now());
        let cq = written(&pass.cluster_queues, "cluster-queue").expect("status");
        assert_eq!(condition(cq, "Active")["reason"], "FlavorNotFound");
        let lq = written(&pass.local_queues, "user-queue").expect("status");
        assert_eq!(condition(lq, "Active")["reason"], "ClusterQueueIsInactive");
        let w = written(&pass.workloads, "w").expect("pending");
        assert_eq!(
            condition(w, "QuotaReserved")["message"],
            "ClusterQueue cluster-queue is inactive"
        );
    }
}

mod lifecycle {
    //! A lender reclaiming its quota from a borrower, pass after pass as the shell runs them:
    //! the victim evicted with Kueue's conditions, the preemptor waiting for it, then admitted
    //! once the victim's job has stopped and its quota is released.

    use super::super::*;
    use crate::api::status;
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn cluster_queue(name: &str, cpu: &str) -> Value {
        json!({"metadata": {"name": name, "generation": 1}, "spec": {"cohortName": "team",
            "namespaceSelector": {}, "preemption": {"reclaimWithinCohort": "Any"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default-flavor",
                "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
    }

    fn workload(name: &str, queue: &str, pods: i32) -> Value {
        json!({"metadata": {"name": name, "namespace": "default", "uid": name, "generation": 1,
                "creationTimestamp": tessera_model::time::timestamp(now())},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    }

    /// The objects after a pass's writes (merge patches of their statuses).
    fn apply(objects: &mut Objects, pass: &Pass) {
        for write in &pass.workloads {
            if let Some(object) = objects
                .workloads
                .iter_mut()
                .find(|w| objects::name(w) == write.name)
            {
                merge_status(Arc::make_mut(object), &write.status);
            }
        }
    }

    fn merge_status(object: &mut Value, status: &Value) {
        if !object["status"].is_object() {
            object["status"] = json!({});
        }
        for (field, value) in status.as_object().into_iter().flatten() {
            match (value.is_null(), object["status"].as_object_mut()) {
                (true, Some(current)) => {
                    current.remove(field);
                }
                (false, Some(current)) => {
                    current.insert(field.clone(), value.clone());
                }
                _ => {}
            }
        }
    }

    fn status_of<'a>(objects: &'a Objects, name: &str, kind: &str) -> (&'a str, &'a str) {
        let object = objects
            .workloads
            .iter()
            .find(|w| objects::name(w) == name)
            .map(Arc::as_ref)
            .unwrap_or(&Value::Null);
        let found = tessera_model::conditions::find(object, kind).unwrap_or(&Value::Null);
        (
            found["status"].as_str().unwrap_or(""),
            found["reason"].as_str().unwrap_or(""),
        )
    }

    #[test]
    fn a_lender_reclaims_its_quota_by_preemption() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6"), cluster_queue("borrower", "2")],
            local_queues: vec![
                json!({"metadata": {"name": "lq-lender", "namespace": "default"}, "spec": {"clusterQueue": "lender"}}),
                json!({"metadata": {"name": "lq-borrower", "namespace": "default"}, "spec": {"clusterQueue": "borrower"}}),
            ],
            workloads: crate::api::objects::shared([workload("borrowing", "lq-borrower", 6)]),
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let first = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &first);
        assert_eq!(
            status_of(&objects, "borrowing", "Admitted"),
            ("True", "Admitted")
        );

        // An older Workload of the lender's queue that can never fit waits inadmissible; the
        // preemptor stays its ClusterQueue's head (Kueue's sticky preemptor) until admitted.
        let mut too_big = workload("too-big", "lq-lender", 20);
        too_big["metadata"]["creationTimestamp"] = json!(tessera_model::time::timestamp(
            now() - Duration::from_secs(60)
        ));
        objects.workloads.push(Arc::new(too_big));
        let waiting = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &waiting);
        assert_eq!(
            status_of(&objects, "too-big", "QuotaReserved"),
            ("False", "ExceedsMaxQuota")
        );
        objects
            .workloads
            .push(Arc::new(workload("owner", "lq-lender", 6)));
        let second = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &second);
        assert_eq!(
            status_of(&objects, "borrowing", "Evicted"),
            ("True", "Preempted")
        );
        let preempted = second
            .events
            .iter()
            .find(|e| e.reason == "Preempted")
            .expect("event");
        assert_eq!(preempted.involved["name"], "borrowing");
        assert!(
            preempted.message.ends_with("; preemptor effective priority: 0 (base: 0, boost: 0); preemptee effective priority: 0 (base: 0, boost: 0)"),
            "{}",
            preempted.message
        );
        assert_eq!(
            status_of(&objects, "borrowing", "Preempted"),
            ("True", "InCohortReclamation")
        );
        assert_eq!(
            status_of(&objects, "owner", "QuotaReserved"),
            ("False", "WaitingForPreemptedWorkloads")
        );
        // Still holding quota until its job stops: nothing new in the next pass.
        let third = pass(&objects, &mut queues, &Settings::default(), now());
        assert!(third.workloads.is_empty(), "{:?}", third.workloads);

        // Its job stopped: the quota is released, and the lender's Workload is admitted.
        let index = objects
            .workloads
            .iter()
            .position(|w| objects::name(w) == "borrowing")
            .unwrap_or(0);
        let released = status::released(&objects.workloads[index], now()).expect("released");
        merge_status(Arc::make_mut(&mut objects.workloads[index]), &released);
        let fourth = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &fourth);
        assert_eq!(
            status_of(&objects, "owner", "Admitted"),
            ("True", "Admitted")
        );
        assert_eq!(status_of(&objects, "borrowing", "QuotaReserved").0, "False");
        assert_eq!(
            status_of(&objects, "borrowing", "Requeued"),
            ("True", "Preempted")
        );
    }

    #[test]
    fn quota_freed_between_passes_retries_the_inadmissible() {
        // Quota for one: the first pass admits `first` and finds `second` inadmissible.
        // `first` is admitted and finished before the next pass runs, so that pass reads the
        // same usage as the first (none): the freed quota must still retry `second`.
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "2")],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "lender"}})],
            workloads: crate::api::objects::shared([
                workload("first", "lq", 2),
                workload("second", "lq", 2),
            ]),
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        Arc::make_mut(&mut objects.workloads[1])["metadata"]["creationTimestamp"] = json!(
            tessera_model::time::timestamp(now() + Duration::from_secs(1))
        );
        let mut queues = Queues::default();
        let first = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &first);
        assert_eq!(
            status_of(&objects, "first", "Admitted"),
            ("True", "Admitted")
        );
        assert_eq!(status_of(&objects, "second", "QuotaReserved").0, "False");
        let finished = status::finished(&objects.workloads[0], true, "done", now())
            .expect("a finished status");
        merge_status(Arc::make_mut(&mut objects.workloads[0]), &finished);

        let second = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &second);
        assert_eq!(
            status_of(&objects, "second", "Admitted"),
            ("True", "Admitted")
        );
    }

    #[test]
    fn a_drained_cluster_queue_evicts_and_its_restart_requeues() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6")],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "lender"}})],
            workloads: crate::api::objects::shared([workload("w", "lq", 2)]),
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let run = |objects: &mut Objects, queues: &mut Queues| {
            let done = pass(objects, queues, &Settings::default(), now());
            apply(objects, &done);
            done
        };
        run(&mut objects, &mut queues);
        assert_eq!(status_of(&objects, "w", "Admitted"), ("True", "Admitted"));

        objects.cluster_queues[0]["spec"]["stopPolicy"] = json!("HoldAndDrain");
        let drained = run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "Evicted"),
            ("True", "ClusterQueueStopped")
        );
        let cq = &drained.cluster_queues[0].status;
        assert_eq!(cq["conditions"][0]["reason"], "Stopped");

        // Its job stopped: the quota is released, and it is not requeued while stopped.
        let released = status::released(&objects.workloads[0], now()).expect("released");
        merge_status(Arc::make_mut(&mut objects.workloads[0]), &released);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("False", "ClusterQueueStopped")
        );
        run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "QuotaReserved"),
            ("False", "Suspended")
        );

        // Running again: requeued, then admitted.
        objects.cluster_queues[0]["spec"]["stopPolicy"] = json!("None");
        run(&mut objects, &mut queues);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("True", "ClusterQueueRestarted")
        );
        run(&mut objects, &mut queues);
        assert_eq!(status_of(&objects, "w", "Admitted"), ("True", "Admitted"));
    }

    #[test]
    fn a_deactivated_workload_is_evicted_and_not_queued_again() {
        let mut objects = Objects {
            flavors: vec![json!({"metadata": {"name": "default-flavor"}})],
            cluster_queues: vec![cluster_queue("lender", "6")],
            local_queues: vec![json!({"metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "lender"}})],
            workloads: crate::api::objects::shared([workload("w", "lq", 2)]),
            namespaces: vec![json!({"metadata": {"name": "default"}})],
            ..Objects::default()
        };
        let mut queues = Queues::default();
        let first = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &first);
        Arc::make_mut(&mut objects.workloads[0])["spec"]["active"] = json!(false);
        let second = pass(&objects, &mut queues, &Settings::default(), now());
        apply(&mut objects, &second);
        assert_eq!(status_of(&objects, "w", "Evicted"), ("True", "Deactivated"));
        let released = status::released(&objects.workloads[0], now()).expect("released");
        merge_status(Arc::make_mut(&mut objects.workloads[0]), &released);
        let third = pass(&objects, &mut queues, &Settings::default(), now());
        assert!(third.workloads.is_empty(), "{:?}", third.workloads);
        assert_eq!(
            status_of(&objects, "w", "Requeued"),
            ("False", "Deactivated")
        );
    }
}

/// Admission fair sharing in a pass: the heap of a usage-based ClusterQueue ordered by
/// weighted LocalQueue usage (persisted consumption, LocalQueue weights, penalties pushed in
/// the pass), and LocalQueue statuses (upstream:
/// test/integration/singlecluster/scheduler/fairsharing, admission fair sharing cases).
mod admission_fair_sharing {
    use super::super::*;
    use serde_json::json;
    use std::time::Duration;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
    }

    fn settings(cpu_weight: Option<f64>) -> Settings {
        let resource_weights = cpu_weight
            .map(|w| BTreeMap::from([("cpu".to_owned(), w)]))
            .unwrap_or_default();
        Settings {
            admission_fair_sharing: Some(AdmissionFairSharing {
                usage_half_life: Duration::from_secs(600),
                usage_sampling_interval: Duration::from_secs(300),
                resource_weights,
            }),
            ..Settings::default()
        }
    }

    fn cluster_queue(cpu: &str, mode: &str) -> Value {
        json!({"metadata": {"name": "cq", "generation": 1}, "spec": {"namespaceSelector": {},
            "admissionScope": {"admissionMode": mode},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}})
    }

    fn local_queue(name: &str, weight: Option<&str>, consumed_cpu: Option<&str>) -> Value {
        let mut object = json!({"metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterQueue": "cq"}});
        if let Some(weight) = weight {
            object["spec"]["fairSharing"] = json!({"weight": weight});
        }
        if let Some(cpu) = consumed_cpu {
            object["status"] = json!({"fairSharing": {"weightedShare": 0,
                "admissionFairSharingStatus": {"consumedResources": {"cpu": cpu},
                    "lastUpdate": tessera_model::time::timestamp(now())}}});
        }
        object
    }

    fn workload(name: &str, queue: &str, seconds: u64) -> Value {
        let created = tessera_model::time::timestamp(now() - Duration::from_secs(1000 - seconds));
        json!({"metadata": {"name": name, "namespace": "ns", "uid": name, "generation": 1,
                "creationTimestamp": created},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}})
    }

    fn objects(cpu: &str, mode: &str, local_queues: Vec<Value>, workloads: Vec<Value>) -> Objects {
        Objects {
            flavors: vec![json!({"metadata": {"name": "default"}, "spec": {}})],
            cluster_queues: vec![cluster_queue(cpu, mode)],
            cohorts: Vec::new(),
            local_queues,
            workloads: crate::api::objects::shared(workloads),
            namespaces: vec![json!({"metadata": {"name": "ns"}})],
            ..Default::default()
        }
    }

    fn admitted(pass: &Pass) -> Vec<String> {
        pass.workloads
            .iter()
            .filter(|w| w.status.get("admission").is_some_and(|a| !a.is_null()))
            .map(|w| w.name.clone())
            .collect()
    }

    const USAGE_BASED: &str = "UsageBasedAdmissionFairSharing";

    #[test]
    fn the_local_queue_that_used_less_goes_first() {
        type Case = (
            &'static str,
            &'static str,
            (Option<&'static str>, Option<&'static str>),
            (Option<&'static str>, Option<&'static str>),
            Option<f64>,
            &'static str,
        );
        // (name, admissionMode, heavy (weight, consumed cpu), light (weight, consumed cpu),
        // cpu resource weight, admitted); "old" in heavy is older than "new" in light.
        let cases: Vec<Case> = vec![
            (
                "no usage: FIFO",
                USAGE_BASED,
                (None, None),
                (None, None),
                None,
                "old",
            ),
            (
                "the heavier LocalQueue waits",
                USAGE_BASED,
                (None, Some("4")),
                (None, None),
                None,
                "new",
            ),
            (
                "its weight outweighs its usage",
                USAGE_BASED,
                (Some("8"), Some("4")),
                (None, Some("1")),
                None,
                "old",
            ),
            (
                "weight zero sorts last",
                USAGE_BASED,
                (Some("0"), None),
                (None, Some("100")),
                None,
                "new",
            ),
            (
                "a resource weighing nothing",
                USAGE_BASED,
                (None, Some("4")),
                (None, None),
                Some(0.0),
                "old",
            ),
            (
                "the ClusterQueue does not ask for it",
                "NoAdmissionFairSharing",
                (None, Some("4")),
                (None, None),
                None,
                "old",
            ),
        ];
        for (name, mode, heavy, light, cpu_weight, want) in cases {
            let input = objects(
                "1",
                mode,
                vec![
                    local_queue("heavy", heavy.0, heavy.1),
                    local_queue("light", light.0, light.1),
                ],
                vec![workload("old", "heavy", 1), workload("new", "light", 2)],
            );
            let pass = pass(&input, &mut Queues::default(), &settings(cpu_weight), now());
            assert_eq!(admitted(&pass), vec![want.to_owned()], "{name}");
        }
    }

    #[test]
    fn an_admission_penalizes_its_local_queue_within_the_pass() {
        let input = |mode| {
            objects(
                "2",
                mode,
                vec![local_queue("a", None, None), local_queue("b", None, None)],
                vec![
                    workload("a1", "a", 1),
                    workload("a2", "a", 2),
                    workload("b1", "b", 3),
                ],
            )
        };
        let with = pass(
            &input(USAGE_BASED),
            &mut Queues::default(),
            &settings(None),
            now(),
        );
        assert_eq!(admitted(&with), vec!["a1", "b1"]);
        let without = pass(
            &input(USAGE_BASED),
            &mut Queues::default(),
            &Settings::default(),
            now(),
        );
        assert_eq!(admitted(&without), vec!["a1", "a2"]);
    }

    #[test]
    fn local_queue_status_is_seeded_from_status_and_sampled_after_restart() {
        let local_queues = vec![
            local_queue("a", None, Some("2")),
            local_queue("b", None, None),
        ];
        let input = objects("0", USAGE_BASED, local_queues, Vec::new());
        let mut state = Queues::default();
        let first = pass(&input, &mut state, &settings(None), now());
        let status_of = |pass: &Pass, name: &str| {
            pass.local_queues
                .iter()
                .find(|w| w.name == name)
                .map(|w| w.status["fairSharing"].clone())
        };
        let stamp = tessera_model::time::timestamp(now());
        assert_eq!(
            status_of(&first, "b"),
            Some(json!({"weightedShare": 0, "admissionFairSharingStatus": {
                "consumedResources": {}, "lastUpdate": stamp}}))
        );
        // Seeded from its status, restarted with lastUpdate now.
        assert_eq!(
            status_of(&first, "a"),
            Some(json!({"weightedShare": 0, "admissionFairSharingStatus": {
                "consumedResources": {"cpu": "2"}, "lastUpdate": stamp}}))
        );
        // One half-life later, with nothing admitted: half of it is left.
        let later = now() + Duration::from_secs(600);
        let sampled = pass(&input, &mut state, &settings(None), later);
        assert_eq!(
            status_of(&sampled, "a").expect("sampled")["admissionFairSharingStatus"],
            json!({"consumedResources": {"cpu": "1"},
                "lastUpdate": tessera_model::time::timestamp(later)})
        );
    }
}

mod writes {
    use super::super::*;
    use serde_json::json;

    fn write(name: &str, status: Value) -> StatusWrite {
        StatusWrite {
            namespace: "ml".into(),
            name: name.into(),
            status,
        }
    }

    #[test]
    fn each_object_is_written_once_with_the_later_fields_over_the_earlier() {
        let conditions = |reason: &str| json!([{"type": "QuotaReserved", "reason": reason}]);
        let cases = [
            (
                "the pass's fields replace the prepared ones; the others are kept",
                vec![write(
                    "a",
                    json!({"conditions": conditions("Inadmissible"), "requeueState": null}),
                )],
                vec![write(
                    "a",
                    json!({"conditions": conditions("QuotaReserved"), "admission": {"clusterQueue": "q"}}),
                )],
                vec![write(
                    "a",
                    json!({"conditions": conditions("QuotaReserved"), "requeueState": null,
                    "admission": {"clusterQueue": "q"}}),
                )],
            ),
            (
                "other objects are written as they are, the earlier first",
                vec![write("a", json!({"x": 1}))],
                vec![write("b", json!({"y": 2})), write("c", json!({"z": 3}))],
                vec![
                    write("a", json!({"x": 1})),
                    write("b", json!({"y": 2})),
                    write("c", json!({"z": 3})),
                ],
            ),
            (
                "nothing prepared",
                vec![],
                vec![write("b", json!({"y": 2}))],
                vec![write("b", json!({"y": 2}))],
            ),
        ];
        for (name, earlier, later, want) in cases {
            assert_eq!(one_write_per_object(earlier, later), want, "{name}");
        }
        // Same name, another namespace: another object.
        let other = StatusWrite {
            namespace: "team".into(),
            ..write("a", json!({"y": 2}))
        };
        let both = one_write_per_object(vec![write("a", json!({"x": 1}))], vec![other.clone()]);
        assert_eq!(both, vec![write("a", json!({"x": 1})), other]);
    }
}
