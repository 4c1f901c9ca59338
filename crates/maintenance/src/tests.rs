//! Table tests ported from k8s-operator-libs `pkg/upgrade/upgrade_state_test.go` (the cases
//! that need no fake API server), the slot arithmetic table, and a proptest driving whole
//! clusters through repeated steps.

use std::collections::BTreeMap;

use crate::keys::TRUE;
use crate::*;

fn keys() -> Keys {
    Keys::for_driver("gpu")
}

/// A schedulable, Ready node with an in-sync, Ready driver pod.
fn node(name: &str, state: UpgradeState) -> NodeInput {
    NodeInput {
        name: name.to_string(),
        state_label: (state != UpgradeState::Unknown).then(|| state.label().to_string()),
        unschedulable: false,
        ready: true,
        skip: false,
        annotations: BTreeMap::new(),
        driver: DriverPod::in_sync_and_ready(PodRef {
            namespace: "gpu-operator".to_string(),
            name: format!("nvidia-driver-{name}"),
        }),
        workload_pods: Vec::new(),
        gpu_pods: Vec::new(),
        validator_pods: vec![true],
    }
}

fn outdated(mut n: NodeInput) -> NodeInput {
    n.driver.revision_in_sync = false;
    n.driver.running_and_ready = false;
    n
}

fn cordoned(mut n: NodeInput) -> NodeInput {
    n.unschedulable = true;
    n
}

fn annotated(mut n: NodeInput, key: &str, value: &str) -> NodeInput {
    n.annotations.insert(key.to_string(), value.to_string());
    n
}

fn auto() -> UpgradePolicy {
    UpgradePolicy {
        auto_upgrade: true,
        max_parallel_upgrades: 0,
        max_unavailable: None,
        ..UpgradePolicy::default()
    }
}

fn in_place() -> Manager {
    Manager {
        keys: keys(),
        pod_deletion_enabled: false,
        validation_enabled: false,
    }
}

fn run(m: &Manager, nodes: Vec<NodeInput>, policy: &UpgradePolicy, now: i64) -> Vec<Action> {
    apply_state(m, &ClusterUpgradeState::from_nodes(nodes), policy, now)
}

/// The state each node ends in after one step (its old state when no `SetState` names it).
fn next_states(m: &Manager, nodes: Vec<NodeInput>, policy: &UpgradePolicy) -> Vec<UpgradeState> {
    let state = ClusterUpgradeState::from_nodes(nodes);
    let actions = apply_state(m, &state, policy, 1_000);
    state
        .nodes
        .iter()
        .map(|n| {
            actions
                .iter()
                .rev()
                .find_map(|a| match a {
                    Action::SetState { node, state } if *node == n.input.name => Some(*state),
                    _ => None,
                })
                .or(n.state)
                .unwrap_or(UpgradeState::Unknown)
        })
        .collect()
}

fn count(states: &[UpgradeState], s: UpgradeState) -> usize {
    states.iter().filter(|x| **x == s).count()
}

fn set(node: &str, state: UpgradeState) -> Action {
    Action::SetState {
        node: node.to_string(),
        state,
    }
}

fn set_ann(node: &str, key: &str, value: &str) -> Action {
    Action::SetAnnotation {
        node: node.to_string(),
        key: key.to_string(),
        value: value.to_string(),
    }
}

fn rm_ann(node: &str, key: &str) -> Action {
    Action::RemoveAnnotation {
        node: node.to_string(),
        key: key.to_string(),
    }
}

use UpgradeState::*;

/// (name, maxParallelUpgrades, maxUnavailable, nodes, upgrade-required nodes left).
type SlotCase = (
    &'static str,
    i64,
    Option<IntOrPercent>,
    Vec<NodeInput>,
    usize,
);
/// (name, (state, unschedulable) per node, maxParallelUpgrades, maxUnavailable, slots).
type AvailCase = (&'static str, Vec<(UpgradeState, bool)>, i64, i64, i64);

#[test]
fn auto_upgrade_off_decides_nothing() {
    let nodes = vec![outdated(node("a", Unknown))];
    assert!(run(&in_place(), nodes, &UpgradePolicy::default(), 0).is_empty());
}

#[test]
fn done_and_unknown_nodes() {
    let k = keys();
    // (name, input, expected actions) — upstream "move up-to-date nodes to Done and outdated
    // nodes to UpgradeRequired", "annotate node if unschedulable", "safe driver loading",
    // "orphaned pod", "orphaned pod if upgrade-requested".
    let orphan = |mut n: NodeInput| {
        n.driver.orphaned = true;
        n.driver.revision_in_sync = false;
        n
    };
    let table: Vec<(&str, NodeInput, Vec<Action>)> = vec![
        (
            "up-to-date unknown",
            node("n", Unknown),
            vec![set("n", Done)],
        ),
        ("up-to-date done", node("n", Done), vec![]),
        (
            "outdated unknown",
            outdated(node("n", Unknown)),
            vec![set("n", UpgradeRequired)],
        ),
        (
            "outdated done",
            outdated(node("n", Done)),
            vec![set("n", UpgradeRequired)],
        ),
        (
            "outdated unschedulable",
            cordoned(outdated(node("n", Done))),
            vec![
                set_ann("n", &k.initial_state_annotation, TRUE),
                set("n", UpgradeRequired),
            ],
        ),
        (
            "safe driver load",
            annotated(node("n", Done), &k.wait_for_safe_load_annotation, TRUE),
            vec![set("n", UpgradeRequired)],
        ),
        ("orphaned", orphan(node("n", Done)), vec![]),
        (
            "orphaned and requested",
            annotated(
                orphan(node("n", Done)),
                &k.upgrade_requested_annotation,
                TRUE,
            ),
            vec![set("n", UpgradeRequired)],
        ),
        (
            "requested must be exactly true",
            annotated(node("n", Done), &k.upgrade_requested_annotation, "yes"),
            vec![],
        ),
    ];
    for (name, n, want) in table {
        assert_eq!(run(&in_place(), vec![n], &auto(), 0), want, "{name}");
    }
}

/// Upstream's slot tests: (name, maxParallel, maxUnavailable, nodes, want upgrade-required
/// left, want cordon-required-or-later).
#[test]
fn upgrade_required_respects_slots() {
    let ur = |i: usize| node(&format!("ur{i}"), UpgradeRequired);
    let five = || (0..5).map(ur).collect::<Vec<_>>();
    let two_cordoned = || {
        let mut v = five();
        v[3].unschedulable = true;
        v[4].unschedulable = true;
        v
    };
    let with_cordon_required = || {
        let mut v: Vec<NodeInput> = (0..2).map(ur).collect();
        v.extend((0..3).map(|i| node(&format!("cr{i}"), CordonRequired)));
        v
    };
    let with_done_cordoned = || {
        let mut v: Vec<NodeInput> = (0..3).map(ur).collect();
        v.extend((0..2).map(|i| cordoned(node(&format!("d{i}"), Done))));
        v
    };
    let pct = |p| Some(IntOrPercent::Percent(p));
    let int = |i| Some(IntOrPercent::Int(i));
    let table: Vec<SlotCase> = vec![
        ("maxParallel 0: all", 0, None, five(), 0),
        ("maxParallel 3 of 5", 3, None, five(), 2),
        (
            "maxParallel 4 with 3 in progress",
            4,
            None,
            with_cordon_required(),
            1,
        ),
        ("maxParallel 0, 100%", 0, pct(100), two_cordoned(), 0),
        (
            "maxParallel 0, 50%, 2 cordoned need no slot",
            0,
            pct(50),
            two_cordoned(),
            2,
        ),
        (
            "50% with 2 unavailable done nodes",
            0,
            pct(50),
            with_done_cordoned(),
            2,
        ),
        ("maxParallel 3, maxUnavailable 2", 3, int(2), five(), 3),
        (
            "maxParallel 4, maxUnavailable 4",
            4,
            int(4),
            with_cordon_required(),
            1,
        ),
    ];
    for (name, mp, mu, nodes, want_left) in table {
        let policy = UpgradePolicy {
            max_parallel_upgrades: mp,
            max_unavailable: mu,
            ..auto()
        };
        let before = nodes
            .iter()
            .filter(|n| n.state_label.as_deref() == Some("upgrade-required"))
            .count();
        let states = next_states(&in_place(), nodes, &policy);
        assert_eq!(count(&states, UpgradeRequired), want_left, "{name}");
        assert_eq!(count(&states, CordonRequired), before - want_left, "{name}");
    }
}

#[test]
fn upgrade_required_skip_and_requested() {
    let k = keys();
    let skipped = NodeInput {
        skip: true,
        ..node("s", UpgradeRequired)
    };
    let requested = annotated(
        node("r", UpgradeRequired),
        &k.upgrade_requested_annotation,
        TRUE,
    );
    let got = run(&in_place(), vec![skipped, requested], &auto(), 0);
    assert_eq!(
        got,
        vec![
            rm_ann("r", &k.upgrade_requested_annotation),
            set("r", CordonRequired)
        ]
    );
}

/// `GetUpgradesAvailable` directly: (buckets, unavailable flags, maxParallel, maxUnavailable, want).
#[test]
fn upgrades_available_table() {
    let mk = |states: &[(UpgradeState, bool)]| {
        ClusterUpgradeState::from_nodes(
            states
                .iter()
                .enumerate()
                .map(|(i, (s, cordon))| NodeInput {
                    unschedulable: *cordon,
                    ..node(&format!("n{i}"), *s)
                })
                .collect(),
        )
    };
    let table: Vec<AvailCase> = vec![
        (
            "unlimited parallel → pending count",
            vec![(UpgradeRequired, false); 4],
            0,
            4,
            4,
        ),
        (
            "unlimited parallel capped by maxUnavailable",
            vec![(UpgradeRequired, false); 4],
            0,
            2,
            2,
        ),
        (
            "parallel minus in progress, trimmed to maxUnavailable",
            vec![
                (UpgradeRequired, false),
                (WaitForJobsRequired, true),
                (Done, false),
            ],
            3,
            2,
            1,
        ),
        (
            "maxUnavailable == total: no trimming",
            vec![(UpgradeRequired, false), (WaitForJobsRequired, true)],
            3,
            2,
            2,
        ),
        (
            "unavailable reaches max → 0",
            vec![(UpgradeRequired, false), (Done, true)],
            1,
            1,
            0,
        ),
        (
            "cordon-required counts as unavailable",
            vec![
                (UpgradeRequired, false),
                (UpgradeRequired, false),
                (CordonRequired, false),
            ],
            0,
            2,
            1,
        ),
        (
            "maxUnavailable == total: no trimming",
            vec![
                (UpgradeRequired, false),
                (UpgradeRequired, false),
                (Done, true),
            ],
            0,
            3,
            2,
        ),
        (
            "parallel exhausted goes negative",
            vec![(PodRestartRequired, false); 3],
            1,
            3,
            -2,
        ),
        (
            "negative maxUnavailable → 0",
            vec![(UpgradeRequired, false)],
            0,
            -1,
            0,
        ),
    ];
    for (name, nodes, mp, mu, want) in table {
        assert_eq!(mk(&nodes).upgrades_available(mp, mu), want, "{name}");
    }
}

#[test]
fn cordon_and_wait_for_jobs() {
    let k = keys();
    let wait = |selector: &str, timeout| UpgradePolicy {
        wait_for_completion: Some(WaitForCompletionSpec {
            pod_selector: selector.to_string(),
            timeout_seconds: timeout,
        }),
        ..auto()
    };
    let running = |mut n: NodeInput| {
        n.workload_pods = vec![PodPhase::Succeeded, PodPhase::Running];
        n
    };
    let key = &k.wait_for_pod_completion_start_time_annotation;
    let deletion = Manager::gpu_operator();
    let table: Vec<(&str, Manager, UpgradePolicy, NodeInput, Vec<Action>)> = vec![
        (
            "cordon",
            in_place(),
            auto(),
            node("n", CordonRequired),
            vec![
                Action::Cordon { node: "n".into() },
                set("n", WaitForJobsRequired),
            ],
        ),
        (
            "already cordoned",
            in_place(),
            auto(),
            cordoned(node("n", CordonRequired)),
            vec![set("n", WaitForJobsRequired)],
        ),
        (
            "no selector, no deletion → drain",
            in_place(),
            auto(),
            node("n", WaitForJobsRequired),
            vec![set("n", DrainRequired)],
        ),
        (
            "no selector, deletion → pod deletion",
            deletion.clone(),
            auto(),
            node("n", WaitForJobsRequired),
            vec![set("n", PodDeletionRequired)],
        ),
        (
            "jobs finished",
            in_place(),
            wait("app=train", 0),
            annotated(node("n", WaitForJobsRequired), key, "5"),
            vec![rm_ann("n", key), set("n", PodDeletionRequired)],
        ),
        (
            "jobs running, no timeout",
            in_place(),
            wait("app=train", 0),
            running(node("n", WaitForJobsRequired)),
            vec![],
        ),
        (
            "jobs running, timeout starts",
            in_place(),
            wait("app=train", 60),
            running(node("n", WaitForJobsRequired)),
            vec![set_ann("n", key, "1000")],
        ),
        (
            "jobs running, within timeout",
            in_place(),
            wait("app=train", 60),
            annotated(running(node("n", WaitForJobsRequired)), key, "940"),
            vec![],
        ),
        (
            "jobs running, timed out",
            in_place(),
            wait("app=train", 60),
            annotated(running(node("n", WaitForJobsRequired)), key, "939"),
            vec![set("n", PodDeletionRequired), rm_ann("n", key)],
        ),
        (
            "bad start time",
            in_place(),
            wait("app=train", 60),
            annotated(running(node("n", WaitForJobsRequired)), key, "soon"),
            vec![Action::WarningEvent {
                node: "n".into(),
                reason: "GPUDriverUpgrade".into(),
                message: format!(
                    "Failed to handle timeout for job completions, annotation {key}=\"soon\" is not a Unix time"
                ),
            }],
        ),
    ];
    for (name, m, policy, n, want) in table {
        assert_eq!(run(&m, vec![n], &policy, 1_000), want, "{name}");
    }
}

#[test]
fn pod_deletion_and_drain() {
    let gpu_pod = |name: &str, owner, empty_dir| GpuPod {
        pod: PodRef {
            namespace: "team".into(),
            name: name.into(),
        },
        owner,
        mirror: false,
        empty_dir,
        finished: false,
    };
    let with_pods = |pods: Vec<GpuPod>| NodeInput {
        gpu_pods: pods,
        ..node("n", PodDeletionRequired)
    };
    let deletion = |force| UpgradePolicy {
        pod_deletion: Some(PodDeletionSpec {
            force,
            ..PodDeletionSpec::default()
        }),
        ..auto()
    };
    let drain_on = UpgradePolicy {
        drain: Some(DrainSpec {
            enable: true,
            pod_selector: "app!=keep".into(),
            ..DrainSpec::default()
        }),
        ..deletion(false)
    };
    let delete = |pods: &[&str], force, on_failure| Action::DeletePods {
        node: "n".into(),
        pods: pods
            .iter()
            .map(|p| PodRef {
                namespace: "team".into(),
                name: (*p).into(),
            })
            .collect(),
        force,
        delete_empty_dir: false,
        timeout_seconds: 300,
        on_success: PodRestartRequired,
        on_failure,
    };
    let gpu = Manager::gpu_operator();
    let table: Vec<(&str, Manager, UpgradePolicy, NodeInput, Vec<Action>)> = vec![
        (
            "deletion disabled → drain-required",
            in_place(),
            deletion(false),
            with_pods(vec![gpu_pod("p", PodOwner::Other, false)]),
            vec![set("n", DrainRequired)],
        ),
        (
            "no gpu pods → pod restart",
            gpu.clone(),
            deletion(false),
            with_pods(vec![]),
            vec![set("n", PodRestartRequired)],
        ),
        (
            "deletable pods",
            gpu.clone(),
            deletion(false),
            with_pods(vec![gpu_pod("p", PodOwner::Other, false)]),
            vec![delete(&["p"], false, Failed)],
        ),
        (
            "unmanaged pod without force → failed",
            gpu.clone(),
            deletion(false),
            with_pods(vec![gpu_pod("p", PodOwner::None, false)]),
            vec![set("n", Failed)],
        ),
        (
            "unmanaged pod with force",
            gpu.clone(),
            deletion(true),
            with_pods(vec![gpu_pod("p", PodOwner::None, false)]),
            vec![delete(&["p"], true, Failed)],
        ),
        (
            "emptyDir without deleteEmptyDir, drain on → drain-required",
            gpu.clone(),
            drain_on.clone(),
            with_pods(vec![gpu_pod("p", PodOwner::Other, true)]),
            vec![set("n", DrainRequired)],
        ),
        (
            "deletable, drain on → failure drains",
            gpu.clone(),
            drain_on.clone(),
            with_pods(vec![gpu_pod("p", PodOwner::Other, false)]),
            vec![delete(&["p"], false, DrainRequired)],
        ),
        (
            "no deletion spec",
            gpu.clone(),
            auto(),
            with_pods(vec![gpu_pod("p", PodOwner::Other, false)]),
            vec![Action::WarningEvent {
                node: "n".into(),
                reason: "GPUDriverUpgrade".into(),
                message: "pod deletion spec should not be empty".into(),
            }],
        ),
        (
            "drain disabled → pod restart",
            gpu.clone(),
            auto(),
            node("n", DrainRequired),
            vec![set("n", PodRestartRequired)],
        ),
        (
            "drain enabled passes its config",
            gpu.clone(),
            drain_on.clone(),
            node("n", DrainRequired),
            vec![Action::Drain {
                node: "n".into(),
                pod_selector: "app!=keep".into(),
                force: false,
                delete_empty_dir: false,
                timeout_seconds: 300,
                on_success: PodRestartRequired,
                on_failure: Failed,
            }],
        ),
    ];
    for (name, m, policy, n, want) in table {
        assert_eq!(run(&m, vec![n], &policy, 0), want, "{name}");
    }
}

#[test]
fn pod_restart_failed_validation_uncordon() {
    let k = keys();
    let init = &k.initial_state_annotation;
    let safe = &k.wait_for_safe_load_annotation;
    let vkey = &k.validation_start_time_annotation;
    let restart = |n: &str| Action::RestartDriverPod {
        node: n.into(),
        pod: PodRef {
            namespace: "gpu-operator".into(),
            name: format!("nvidia-driver-{n}"),
        },
    };
    let terminating = |mut n: NodeInput| {
        n.driver.terminating = true;
        n
    };
    let not_ready = |mut n: NodeInput| {
        n.driver.running_and_ready = false;
        n
    };
    let failing = |mut n: NodeInput| {
        n.driver.running_and_ready = false;
        n.driver.failing = true;
        n
    };
    let orphan = |mut n: NodeInput| {
        n.driver.orphaned = true;
        n
    };
    let validators = |mut n: NodeInput, v: Vec<bool>| {
        n.validator_pods = v;
        n
    };
    let gpu = Manager::gpu_operator();
    let table: Vec<(&str, Manager, NodeInput, Vec<Action>)> = vec![
        (
            "outdated → restart",
            in_place(),
            outdated(node("n", PodRestartRequired)),
            vec![restart("n")],
        ),
        (
            "outdated, terminating → wait",
            in_place(),
            terminating(outdated(node("n", PodRestartRequired))),
            vec![],
        ),
        (
            "orphaned → restart",
            in_place(),
            orphan(node("n", PodRestartRequired)),
            vec![restart("n")],
        ),
        (
            "in sync, safe load → unblock",
            in_place(),
            not_ready(annotated(node("n", PodRestartRequired), safe, TRUE)),
            vec![rm_ann("n", safe)],
        ),
        (
            "in sync, not ready → wait",
            in_place(),
            not_ready(node("n", PodRestartRequired)),
            vec![],
        ),
        (
            "ready, no validation → uncordon",
            in_place(),
            node("n", PodRestartRequired),
            vec![set("n", UncordonRequired)],
        ),
        (
            "ready, initially unschedulable → done",
            in_place(),
            cordoned(annotated(node("n", PodRestartRequired), init, TRUE)),
            vec![set("n", Done), rm_ann("n", init)],
        ),
        (
            "failing → failed",
            in_place(),
            failing(node("n", PodRestartRequired)),
            vec![set("n", Failed)],
        ),
        (
            "ready, validation → validation",
            gpu.clone(),
            node("n", PodRestartRequired),
            vec![set("n", ValidationRequired)],
        ),
        (
            "failed, in sync → uncordon",
            in_place(),
            node("n", Failed),
            vec![set("n", UncordonRequired)],
        ),
        (
            "failed, in sync, initially unschedulable → done",
            in_place(),
            annotated(node("n", Failed), init, TRUE),
            vec![set("n", Done), rm_ann("n", init)],
        ),
        (
            "failed, orphaned → stays",
            in_place(),
            orphan(node("n", Failed)),
            vec![],
        ),
        (
            "failed, not ready → stays",
            in_place(),
            not_ready(node("n", Failed)),
            vec![],
        ),
        (
            "validation done → uncordon",
            gpu.clone(),
            annotated(node("n", ValidationRequired), vkey, "900"),
            vec![rm_ann("n", vkey), set("n", UncordonRequired)],
        ),
        (
            "validation done, initially unschedulable → done",
            gpu.clone(),
            cordoned(annotated(node("n", ValidationRequired), init, TRUE)),
            vec![set("n", Done), rm_ann("n", init)],
        ),
        (
            "no validator pod → wait",
            gpu.clone(),
            validators(node("n", ValidationRequired), vec![]),
            vec![],
        ),
        (
            "validator not ready → start timer",
            gpu.clone(),
            validators(node("n", ValidationRequired), vec![false]),
            vec![set_ann("n", vkey, "1000")],
        ),
        (
            "validator not ready within 600s",
            gpu.clone(),
            validators(
                annotated(node("n", ValidationRequired), vkey, "400"),
                vec![true, false],
            ),
            vec![],
        ),
        (
            "validator not ready past 600s → failed",
            gpu.clone(),
            validators(
                annotated(node("n", ValidationRequired), vkey, "399"),
                vec![false],
            ),
            vec![set("n", Failed), rm_ann("n", vkey)],
        ),
        (
            "uncordon → done",
            in_place(),
            cordoned(node("n", UncordonRequired)),
            vec![Action::Uncordon { node: "n".into() }, set("n", Done)],
        ),
        (
            "requestor-mode node left to its requestor",
            in_place(),
            annotated(
                node("n", UncordonRequired),
                &k.requestor_mode_annotation,
                TRUE,
            ),
            vec![],
        ),
    ];
    for (name, m, n, want) in table {
        assert_eq!(run(&m, vec![n], &auto(), 1_000), want, "{name}");
    }
}

#[test]
fn build_rejects_unscheduled_driver_pods_and_duplicates() {
    let ds = |desired, owned| DaemonSetCounts {
        name: "nvidia-driver-daemonset".into(),
        desired_number_scheduled: desired,
        owned_pods: owned,
    };
    assert!(ClusterUpgradeState::build(&[ds(2, 2)], vec![node("a", Done)]).is_ok());
    let err = ClusterUpgradeState::build(&[ds(3, 2)], vec![]).err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some(
            "driver DaemonSet should not have Unscheduled pods: nvidia-driver-daemonset desires 3, has 2"
        )
    );
    let err = ClusterUpgradeState::build(&[], vec![node("a", Done), node("a", Unknown)]).err();
    assert_eq!(err, Some(BuildError::DuplicateNode("a".into())));
    // An unknown label value lands in no bucket and is not a managed node.
    let mut odd = node("b", Done);
    odd.state_label = Some("upgrade-finished".into());
    let st = ClusterUpgradeState::from_nodes(vec![odd, node("c", Done)]);
    assert_eq!(st.total_managed_nodes(), 1);
}

/// One step over a cluster with a node in every in-place bucket: the decisions come in
/// upstream's `ApplyState` order, whatever the input order, and each node moves once.
#[test]
fn one_step_follows_apply_state_order() {
    let nodes = vec![
        cordoned(node("uncordon", UncordonRequired)),
        node("validation", ValidationRequired),
        node("failed", Failed),
        outdated(node("restart", PodRestartRequired)),
        node("ready", PodRestartRequired),
        node("drain", DrainRequired),
        node("deletion", PodDeletionRequired),
        node("jobs", WaitForJobsRequired),
        node("cordon", CordonRequired),
        node("required", UpgradeRequired),
        node("done", Done),
        outdated(node("unknown", Unknown)),
    ];
    let policy = UpgradePolicy {
        pod_deletion: Some(PodDeletionSpec::default()),
        ..auto()
    };
    let got = run(&Manager::gpu_operator(), nodes, &policy, 0);
    let want = vec![
        set("unknown", UpgradeRequired),
        set("required", CordonRequired),
        Action::Cordon {
            node: "cordon".into(),
        },
        set("cordon", WaitForJobsRequired),
        set("jobs", PodDeletionRequired),
        set("deletion", PodRestartRequired),
        set("drain", PodRestartRequired),
        set("ready", ValidationRequired),
        Action::RestartDriverPod {
            node: "restart".into(),
            pod: PodRef {
                namespace: "gpu-operator".into(),
                name: "nvidia-driver-restart".into(),
            },
        },
        set("failed", UncordonRequired),
        set("validation", UncordonRequired),
        Action::Uncordon {
            node: "uncordon".into(),
        },
        set("uncordon", Done),
    ];
    assert_eq!(got, want);
}
