//! Table tests of maintenance plans: field checks, staging, every pre-flight refusal, and the
//! rollout step's translation of the operator's state machine (staging, halting, pausing, node
//! rotation).

use std::collections::{BTreeMap, BTreeSet};

use tessera_devices::Catalog;
use tessera_node::hardware::MigLayout;

use crate::*;

const STATE: &str = "nvidia.com/gpu-driver-upgrade-state";

fn catalog() -> Catalog {
    match Catalog::built_in() {
        Ok(c) => c,
        Err(e) => panic!("built-in catalog: {e}"),
    }
}

fn driver() -> PlanKind {
    PlanKind::DriverUpgrade {
        version: "580.82.07".into(),
        scope: crate::worker::DriverScope::Host,
    }
}

fn pool_selector() -> BTreeMap<String, String> {
    BTreeMap::from([("pool".to_string(), "gpu".to_string())])
}

fn policy(max_parallel: i64, max_unavailable: Option<IntOrPercent>) -> UpgradePolicy {
    UpgradePolicy {
        max_parallel_upgrades: max_parallel,
        max_unavailable,
        ..UpgradePolicy::default()
    }
}

fn plan(kind: PlanKind, policy: UpgradePolicy, canary: usize, batch: Option<usize>) -> Plan {
    match Plan::new("upgrade", kind, pool_selector(), policy, canary, batch) {
        Ok(p) => p,
        Err(e) => panic!("valid plan: {e:?}"),
    }
}

fn node(name: &str) -> NodeFacts {
    crate::rollout_proptests::gpu_node(name, true)
}

fn with_pods(mut n: NodeFacts, pods: &[&str]) -> NodeFacts {
    n.pods = pods
        .iter()
        .map(|p| GpuPod {
            pod: PodRef {
                namespace: "team-a".into(),
                name: (*p).into(),
            },
            owner: PodOwner::Other,
            mirror: false,
            empty_dir: false,
            finished: false,
        })
        .collect();
    n
}

fn labelled(mut n: NodeFacts, state: UpgradeState) -> NodeFacts {
    n.labels.insert(STATE.into(), state.label().into());
    n
}

fn budget(name: &str, allowed: i64, pods: &[&str]) -> Budget {
    Budget {
        namespace: "team-a".into(),
        name: name.into(),
        disruptions_allowed: allowed,
        pods: pods
            .iter()
            .map(|p| PodRef {
                namespace: "team-a".into(),
                name: (*p).into(),
            })
            .collect(),
    }
}

fn stage_names(r: &Rollout) -> Vec<(String, Vec<String>)> {
    r.stages
        .iter()
        .map(|s| (s.name.clone(), s.nodes.clone()))
        .collect()
}

#[test]
fn plan_fields_are_checked_by_path() {
    let table: [(PlanKind, UpgradePolicy, Option<usize>, &[&str]); 5] = [
        (
            PlanKind::DriverUpgrade {
                version: "latest".into(),
                scope: crate::worker::DriverScope::Host,
            },
            UpgradePolicy::default(),
            None,
            &["spec.driverUpgrade.version"],
        ),
        (
            PlanKind::KubernetesVersion {
                version: "1".into(),
            },
            UpgradePolicy::default(),
            None,
            &["spec.kubernetesVersion.version"],
        ),
        (
            PlanKind::MigRepartition {
                layout: MigLayout::Profiles(Vec::new()),
            },
            UpgradePolicy::default(),
            None,
            &["spec.migRepartition.layout"],
        ),
        (
            PlanKind::NodeRotation,
            policy(-1, None),
            Some(0),
            &["spec.policy.maxParallelUpgrades", "spec.batchSize"],
        ),
        (driver(), UpgradePolicy::default(), Some(2), &[]),
    ];
    for (kind, policy, batch, want) in table {
        let got = Plan::new("p", kind.clone(), BTreeMap::new(), policy, 1, batch);
        let fields: Vec<String> = match &got {
            Ok(_) => Vec::new(),
            Err(errors) => errors
                .iter()
                .map(|e| e.to_string().split(':').next().unwrap_or("").to_string())
                .collect(),
        };
        assert_eq!(fields, want, "{kind:?}");
    }
    // A valid plan always moves pods and runs automatically.
    let p = plan(driver(), UpgradePolicy::default(), 1, None);
    assert!(p.policy.auto_upgrade);
    assert!(p.policy.pod_deletion.is_some());
}

#[test]
fn stages_are_a_canary_then_batches() {
    let nodes: Vec<NodeFacts> = ["e", "a", "c", "b", "d"].into_iter().map(node).collect();
    type Stages = Vec<(&'static str, Vec<&'static str>)>;
    let table: [(UpgradePolicy, usize, Option<usize>, Stages); 4] = [
        // maxParallelUpgrades 2, maxUnavailable unlimited: batches of 2.
        (
            policy(2, None),
            1,
            None,
            vec![
                ("canary", vec!["a"]),
                ("batch-1", vec!["b", "c"]),
                ("batch-2", vec!["d", "e"]),
            ],
        ),
        // The CRD default: 1 at a time, 25% of 5 → 2.
        (
            UpgradePolicy::default(),
            1,
            None,
            vec![
                ("canary", vec!["a"]),
                ("batch-1", vec!["b"]),
                ("batch-2", vec!["c"]),
                ("batch-3", vec!["d"]),
                ("batch-4", vec!["e"]),
            ],
        ),
        // Unlimited parallelism is clamped to maxUnavailable (40% of 5 → 2).
        (
            policy(0, Some(IntOrPercent::Percent(40))),
            0,
            None,
            vec![
                ("batch-1", vec!["a", "b"]),
                ("batch-2", vec!["c", "d"]),
                ("batch-3", vec!["e"]),
            ],
        ),
        // An explicit batch size and a canary of 2.
        (
            policy(0, None),
            2,
            Some(3),
            vec![("canary", vec!["a", "b"]), ("batch-1", vec!["c", "d", "e"])],
        ),
    ];
    for (pol, canary, batch, want) in table {
        let p = plan(driver(), pol.clone(), canary, batch);
        let got = match preflight(&p, &nodes, &[], &catalog(), None) {
            Ok(r) => stage_names(&r),
            Err(e) => panic!("{pol:?}: {e}"),
        };
        let want: Vec<(String, Vec<String>)> = want
            .into_iter()
            .map(|(s, n)| (s.to_string(), n.into_iter().map(String::from).collect()))
            .collect();
        assert_eq!(got, want, "{pol:?} canary {canary} batch {batch:?}");
    }
}

#[test]
fn preflight_skips_applied_and_unselected_nodes() {
    let mut done = node("a");
    done.driver_version = Some("580.82.07".into());
    let mut other = node("x");
    other.labels.clear();
    let mut replacement = node("b-r");
    replacement
        .annotations
        .insert(REPLACES_ANNOTATION.into(), "b".into());
    let nodes = vec![done, node("b"), other, replacement];
    let p = plan(driver(), policy(1, None), 1, None);
    let r = match preflight(&p, &nodes, &[], &catalog(), None) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(r.already_applied, ["a"]);
    assert_eq!(
        stage_names(&r),
        [("canary".to_string(), vec!["b".to_string()])]
    );
}

#[test]
fn preflight_refusals_name_the_budget_or_limit() {
    let nodes = vec![
        with_pods(node("a"), &["web-1", "train-0"]),
        with_pods(node("b"), &["web-2"]),
        with_pods(node("c"), &["web-3", "web-4"]),
        node("d"),
    ];
    let mut cordoned = node("d");
    cordoned.unschedulable = true;
    let cordoned_pool = vec![node("a"), node("b"), node("c"), cordoned];
    let h100 = |profiles: &[&str]| PlanKind::MigRepartition {
        layout: MigLayout::Profiles(profiles.iter().map(|p| p.to_string()).collect()),
    };
    let mut l40s = node("a");
    l40s.gpu_model = Some("L40S".into());
    let kube = |v: &str| PlanKind::KubernetesVersion { version: v.into() };
    type Row = (
        &'static str,
        PlanKind,
        UpgradePolicy,
        Option<usize>,
        Vec<NodeFacts>,
        Vec<Budget>,
        Option<&'static str>,
    );
    let table: Vec<Row> = vec![
        (
            "one node holds more than a budget allows",
            driver(),
            policy(1, None),
            None,
            nodes.clone(),
            vec![budget("web", 1, &["web-1", "web-2", "web-3", "web-4"])],
            Some(
                "stage batch-2 would evict 2 pod(s) covered by PodDisruptionBudget team-a/web at once (nodes c), but it allows 1 disruption(s)",
            ),
        ),
        (
            "the batch together exceeds it",
            driver(),
            policy(0, None),
            Some(3),
            nodes.clone(),
            vec![budget("web", 2, &["web-1", "web-2", "web-3", "web-4"])],
            Some(
                "stage batch-1 would evict 3 pod(s) covered by PodDisruptionBudget team-a/web at once (nodes b,c,d), but it allows 2 disruption(s); a smaller batchSize would spread them over more stages",
            ),
        ),
        (
            "a budget at zero blocks its node",
            driver(),
            policy(1, None),
            None,
            nodes.clone(),
            vec![budget("train", 0, &["train-0"])],
            Some(
                "stage canary would evict 1 pod(s) covered by PodDisruptionBudget team-a/train at once (nodes a), but it allows 0 disruption(s)",
            ),
        ),
        (
            "budgets with room pass",
            driver(),
            policy(1, None),
            None,
            nodes.clone(),
            vec![budget("web", 2, &["web-1", "web-2", "web-3", "web-4"])],
            None,
        ),
        (
            "batch above maxUnavailable",
            driver(),
            policy(0, Some(IntOrPercent::Int(2))),
            Some(3),
            nodes.clone(),
            vec![],
            Some(
                "batchSize of 3 node(s) would exceed maxUnavailable 2 (0 node(s) of the pool are unavailable already)",
            ),
        ),
        (
            "no room left under maxUnavailable",
            driver(),
            policy(1, Some(IntOrPercent::Int(1))),
            None,
            cordoned_pool,
            vec![],
            Some(
                "a batch of 1 node(s) would exceed maxUnavailable 1 (1 node(s) of the pool are unavailable already)",
            ),
        ),
        (
            "a MIG layout that does not fit",
            h100(&["7g.80gb", "1g.10gb"]),
            policy(1, None),
            None,
            vec![node("a")],
            vec![],
            Some(
                "node a: H100-SXM5-80GB: 7g.80gb, 1g.10gb does not fit on one H100-SXM5-80GB: it needs 8 of 7 compute slices and 9 of 8 memory slices, and no placement of the instances avoids overlap",
            ),
        ),
        (
            "a GPU without MIG",
            PlanKind::MigRepartition {
                layout: MigLayout::Named("all-1g.10gb".into()),
            },
            policy(1, None),
            None,
            vec![l40s],
            vec![],
            Some("node a: L40S: L40S has no MIG profile \"1g.10gb\""),
        ),
        (
            "a MIG layout that fits",
            h100(&["3g.40gb", "3g.40gb"]),
            policy(1, None),
            None,
            vec![node("a")],
            vec![],
            None,
        ),
        (
            "kubelet newer than the API server",
            kube("v1.34.0"),
            policy(1, None),
            None,
            vec![node("a")],
            vec![],
            Some("version skew: node/a: kubelet v1.34.0 vs apiserver v1.33.2"),
        ),
        (
            "kubelet within the skew",
            kube("v1.33.1"),
            policy(1, None),
            None,
            vec![node("a")],
            vec![],
            None,
        ),
    ];
    for (what, kind, pol, batch, nodes, budgets, want) in table {
        let p = plan(kind, pol, 1, batch);
        let got = preflight(&p, &nodes, &budgets, &catalog(), Some("v1.33.2"));
        match (got, want) {
            (Ok(_), None) => {}
            (Err(e), Some(want)) => {
                let text = e.to_string();
                assert!(text.starts_with(want), "{what}: {text}");
            }
            (got, want) => panic!("{what}: got {got:?}, want {want:?}"),
        }
    }
    let mut unselected = plan(driver(), policy(1, None), 1, None);
    unselected.node_selector = BTreeMap::from([("pool".to_string(), "tpu".to_string())]);
    let got = preflight(&unselected, &[node("a")], &[], &catalog(), None).map(|_| ());
    assert_eq!(
        got.map_err(|e| e.to_string()),
        Err("no node matches the plan's nodeSelector pool=tpu".to_string())
    );
}

fn stages_of(p: &Plan, nodes: &[NodeFacts]) -> Vec<Stage> {
    match preflight(p, nodes, &[], &catalog(), Some("v1.33.2")) {
        Ok(r) => r.stages,
        Err(e) => panic!("{e}"),
    }
}

fn states(actions: &[PlanAction]) -> BTreeSet<(String, &'static str)> {
    actions
        .iter()
        .filter_map(|a| match a {
            PlanAction::Upgrade(Action::SetState { node, state }) => {
                Some((node.clone(), state.label()))
            }
            _ => None,
        })
        .collect()
}

fn pairs(p: &[(&str, &'static str)]) -> BTreeSet<(String, &'static str)> {
    p.iter().map(|(n, s)| (n.to_string(), *s)).collect()
}

#[test]
fn only_the_active_stage_starts() {
    let p = plan(driver(), policy(2, None), 1, None);
    let fresh = vec![node("a"), node("b"), node("c")];
    let stages = stages_of(&p, &fresh);
    let s = step(&p, &stages, &fresh, &catalog(), 0);
    assert_eq!(
        s.phase,
        Phase::Progressing {
            stage: "canary".into()
        }
    );
    assert_eq!(states(&s.actions), pairs(&[("a", "upgrade-required")]));

    // The canary done with the new driver: batch-1 (b, c) starts; a stays done.
    let mut a = labelled(node("a"), UpgradeState::Done);
    a.driver_version = Some("580.82.07".into());
    let nodes = vec![a, node("b"), node("c")];
    let s = step(&p, &stages, &nodes, &catalog(), 0);
    assert_eq!(
        s.phase,
        Phase::Progressing {
            stage: "batch-1".into()
        }
    );
    assert_eq!(
        states(&s.actions),
        pairs(&[("b", "upgrade-required"), ("c", "upgrade-required")])
    );
    let progress: Vec<(&str, &str, &str)> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.stage.as_str(), n.state.as_str()))
        .collect();
    assert_eq!(
        progress,
        [
            ("a", "canary", "upgrade-done"),
            ("b", "batch-1", ""),
            ("c", "batch-1", "")
        ]
    );
}

#[test]
fn the_kinds_change_replaces_the_driver_restart() {
    let table = [
        (driver(), Change::Driver("580.82.07".into())),
        (
            PlanKind::KubernetesVersion {
                version: "v1.33.1".into(),
            },
            Change::Kubelet("v1.33.1".into()),
        ),
        (
            PlanKind::MigRepartition {
                layout: MigLayout::Named("all-3g.40gb".into()),
            },
            Change::MigLayout(vec!["3g.40gb".into(), "3g.40gb".into()]),
        ),
    ];
    for (kind, want) in table {
        let p = plan(kind.clone(), policy(1, None), 1, None);
        let stages = stages_of(&p, &[node("a")]);
        let nodes = vec![labelled(node("a"), UpgradeState::PodRestartRequired)];
        let s = step(&p, &stages, &nodes, &catalog(), 0);
        assert_eq!(
            s.actions,
            [PlanAction::Apply {
                node: "a".into(),
                change: want
            }],
            "{kind:?}"
        );
    }
}

#[test]
fn validation_runs_then_halts_or_reopens() {
    let p = plan(driver(), policy(1, None), 1, None);
    let mut upgraded = labelled(node("a"), UpgradeState::ValidationRequired);
    upgraded.driver_version = Some("580.82.07".into());
    upgraded.unschedulable = true;
    let stages = stages_of(&p, &[node("a"), node("b")]);

    // No validator yet: start one.
    let s = step(&p, &stages, &[upgraded.clone(), node("b")], &catalog(), 0);
    assert!(
        s.actions
            .contains(&PlanAction::RunValidator { node: "a".into() })
    );

    // It succeeded: uncordon, done.
    let mut ok = upgraded.clone();
    ok.validator = Validator::Succeeded;
    let s = step(&p, &stages, &[ok, node("b")], &catalog(), 0);
    assert_eq!(states(&s.actions), pairs(&[("a", "uncordon-required")]));

    // It failed: the node fails (no uncordon), the condition is set, the rollout halts and b
    // never starts.
    let mut bad = upgraded;
    bad.validator = Validator::Failed;
    let s = step(&p, &stages, &[bad.clone(), node("b")], &catalog(), 0);
    assert_eq!(states(&s.actions), pairs(&[("a", "upgrade-failed")]));
    assert!(s.actions.iter().any(|a| matches!(
        a,
        PlanAction::ValidationFailed { node, message }
            if node == "a" && message.starts_with("MaintenanceValidationFailed: the validator failed")
    )));
    let failed = labelled(bad, UpgradeState::Failed);
    let s = step(&p, &stages, &[failed, node("b")], &catalog(), 0);
    assert_eq!(
        s.phase,
        Phase::Halted {
            reason: "validation failed on node a in stage canary".into()
        }
    );
    assert_eq!(s.actions, []);
}

#[test]
fn a_paused_plan_finishes_started_nodes_and_starts_none() {
    let mut p = plan(driver(), policy(0, None), 0, Some(2));
    let stages = stages_of(&p, &[node("a"), node("b")]);
    p.paused = true;
    let nodes = vec![
        labelled(node("a"), UpgradeState::CordonRequired),
        labelled(node("b"), UpgradeState::UpgradeRequired),
    ];
    let s = step(&p, &stages, &nodes, &catalog(), 0);
    assert_eq!(s.phase, Phase::Paused);
    assert_eq!(
        states(&s.actions),
        pairs(&[("a", "wait-for-jobs-required")])
    );
}

#[test]
fn rotation_adds_the_replacement_first_and_removes_the_old_node() {
    let p = plan(PlanKind::NodeRotation, policy(1, None), 1, None);
    let stages = stages_of(&p, &[node("a")]);
    let s = step(
        &p,
        &stages,
        &[labelled(node("a"), UpgradeState::CordonRequired)],
        &catalog(),
        0,
    );
    assert!(s.actions.contains(&PlanAction::AddReplacement {
        node: "a".into(),
        replacement: "a-r".into()
    }));
    // Validated: no uncordon of the old node; once done it is removed.
    let mut validated = labelled(node("a"), UpgradeState::UncordonRequired);
    validated.replacement_ready = true;
    validated.unschedulable = true;
    let s = step(&p, &stages, &[validated.clone()], &catalog(), 0);
    assert!(
        !s.actions
            .iter()
            .any(|a| matches!(a, PlanAction::Upgrade(Action::Uncordon { .. })))
    );
    let done = labelled(validated, UpgradeState::Done);
    let s = step(&p, &stages, &[done], &catalog(), 0);
    assert_eq!(s.actions, [PlanAction::RemoveNode { node: "a".into() }]);
    assert_eq!(s.phase, Phase::Succeeded);
    // The step that removes it reports it removed (a finished plan is not stepped again).
    assert_eq!(s.nodes[0].state, "removed");
    // Removed: the plan has succeeded.
    let s = step(&p, &stages, &[], &catalog(), 0);
    assert_eq!(s.phase, Phase::Succeeded);
    assert_eq!(s.nodes[0].state, "removed");
}

#[test]
fn a_halted_plan_starts_no_waiting_node() {
    // One stage of two with a free slot: b is still in upgrade-required when a fails.
    let p = plan(driver(), policy(2, None), 0, Some(2));
    let stages = stages_of(&p, &[node("a"), node("b")]);
    let mut a = labelled(node("a"), UpgradeState::Failed);
    a.unschedulable = true;
    a.validator = Validator::Failed;
    let b = labelled(node("b"), UpgradeState::UpgradeRequired);
    let s = step(&p, &stages, &[a, b], &catalog(), 0);
    assert!(matches!(s.phase, Phase::Halted { .. }), "{:?}", s.phase);
    assert_eq!(states(&s.actions), pairs(&[]));
}
