//! Drives random clusters through repeated `apply_state` steps with a simulated shell that
//! carries out every action (and lets recreated driver pods and validators become Ready),
//! checking the unavailability budget, the state edges, and that every node finishes.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::*;

#[derive(Debug, Clone)]
struct NodeSpec {
    unschedulable: bool,
    ready: bool,
    labelled_done: bool,
    outdated: bool,
    gpu_pods: usize,
    job_steps: i64,
    /// The shell's pod deletion fails on this node (a PodDisruptionBudget, say).
    fail_deletion: bool,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.9),
        any::<bool>(),
        prop::bool::weighted(0.8),
        0usize..3,
        0i64..6,
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(
                unschedulable,
                ready,
                labelled_done,
                outdated,
                gpu_pods,
                job_steps,
                fail_deletion,
            )| {
                NodeSpec {
                    unschedulable,
                    ready,
                    labelled_done,
                    outdated,
                    gpu_pods,
                    job_steps,
                    fail_deletion,
                }
            },
        )
}

fn policy() -> impl Strategy<Value = (UpgradePolicy, bool, bool)> {
    let max_unavailable = prop_oneof![
        Just(None),
        (1i32..6).prop_map(|i| Some(IntOrPercent::Int(i))),
        (1i32..=100).prop_map(|p| Some(IntOrPercent::Percent(p))),
    ];
    (
        0i64..5,
        max_unavailable,
        prop_oneof![Just(None), Just(Some(0i64)), Just(Some(30i64))],
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mp, mu, wait, drain, deletion, validation)| {
            let policy = UpgradePolicy {
                auto_upgrade: true,
                max_parallel_upgrades: mp,
                max_unavailable: mu,
                wait_for_completion: wait.map(|t| WaitForCompletionSpec {
                    pod_selector: "app=train".into(),
                    timeout_seconds: t,
                }),
                pod_deletion: Some(PodDeletionSpec::default()),
                drain: Some(DrainSpec {
                    enable: drain,
                    ..DrainSpec::default()
                }),
            };
            (policy, deletion, validation)
        })
}

fn allowed(from: UpgradeState, to: UpgradeState) -> bool {
    use UpgradeState::*;
    matches!(
        (from, to),
        (Unknown, UpgradeRequired | Done)
            | (Done, UpgradeRequired)
            | (UpgradeRequired, CordonRequired)
            | (CordonRequired, WaitForJobsRequired)
            | (WaitForJobsRequired, PodDeletionRequired | DrainRequired)
            | (
                PodDeletionRequired,
                DrainRequired | PodRestartRequired | Failed
            )
            | (DrainRequired, PodRestartRequired | Failed)
            | (
                PodRestartRequired,
                ValidationRequired | UncordonRequired | Done | Failed
            )
            | (Failed, UncordonRequired | Done)
            | (ValidationRequired, UncordonRequired | Done | Failed)
            | (UncordonRequired, Done)
    )
}

struct World {
    nodes: Vec<NodeInput>,
    /// Steps each node's workload pods keep running.
    job_steps: Vec<i64>,
    /// Whether each node's driver pod was recreated last step (becomes Ready next step).
    starting: Vec<bool>,
    fail_deletion: Vec<bool>,
}

impl World {
    fn new(specs: &[NodeSpec]) -> World {
        let nodes = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let name = format!("n{i}");
                NodeInput {
                    state_label: s.labelled_done.then(|| "upgrade-done".to_string()),
                    unschedulable: s.unschedulable,
                    ready: s.ready,
                    skip: false,
                    annotations: BTreeMap::new(),
                    driver: DriverPod {
                        pod: PodRef {
                            namespace: "gpu-operator".into(),
                            name: format!("driver-{name}"),
                        },
                        orphaned: false,
                        revision_in_sync: !s.outdated,
                        running_and_ready: true,
                        failing: false,
                        terminating: false,
                    },
                    workload_pods: Vec::new(),
                    gpu_pods: (0..s.gpu_pods)
                        .map(|j| GpuPod {
                            pod: PodRef {
                                namespace: "team".into(),
                                name: format!("{name}-gpu-{j}"),
                            },
                            owner: PodOwner::Other,
                            mirror: false,
                            empty_dir: false,
                            finished: false,
                        })
                        .collect(),
                    validator_pods: vec![true],
                    name,
                }
            })
            .collect();
        World {
            nodes,
            job_steps: specs.iter().map(|s| s.job_steps).collect(),
            starting: vec![false; specs.len()],
            fail_deletion: specs.iter().map(|s| s.fail_deletion).collect(),
        }
    }

    fn state_of(n: &NodeInput) -> UpgradeState {
        UpgradeState::from_label(n.state_label.as_deref().unwrap_or(""))
            .unwrap_or(UpgradeState::Unknown)
    }

    fn unavailable(&self) -> i64 {
        self.nodes
            .iter()
            .filter(|n| n.unschedulable || !n.ready)
            .count() as i64
    }

    fn index(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or(usize::MAX)
    }

    /// Carries out one step's actions; returns an error naming a state-edge violation.
    fn carry_out(&mut self, actions: &[Action]) -> Result<(), String> {
        let mut moved = vec![false; self.nodes.len()];
        let mut set_state = |w: &mut World, node: &str, to: UpgradeState| -> Result<(), String> {
            let i = w.index(node);
            let n = w.nodes.get_mut(i).ok_or(format!("unknown node {node}"))?;
            let from = World::state_of(n);
            if moved[i] {
                return Err(format!(
                    "{node}: second state change in one step ({from} → {to})"
                ));
            }
            if !allowed(from, to) {
                return Err(format!("{node}: skipped a state ({from} → {to})"));
            }
            moved[i] = true;
            n.state_label = Some(to.label().to_string());
            Ok(())
        };
        for a in actions {
            match a {
                Action::SetState { node, state } => set_state(self, node, *state)?,
                Action::SetAnnotation { node, key, value } => {
                    let i = self.index(node);
                    self.nodes[i].annotations.insert(key.clone(), value.clone());
                }
                Action::RemoveAnnotation { node, key } => {
                    let i = self.index(node);
                    self.nodes[i].annotations.remove(key);
                }
                Action::Cordon { node } => {
                    let i = self.index(node);
                    self.nodes[i].unschedulable = true;
                }
                Action::Uncordon { node } => {
                    let i = self.index(node);
                    self.nodes[i].unschedulable = false;
                }
                Action::DeletePods {
                    node,
                    on_success,
                    on_failure,
                    ..
                } => {
                    let i = self.index(node);
                    if self.fail_deletion[i] {
                        set_state(self, node, *on_failure)?;
                    } else {
                        self.nodes[i].gpu_pods.clear();
                        set_state(self, node, *on_success)?;
                    }
                }
                Action::Drain {
                    node, on_success, ..
                } => {
                    let i = self.index(node);
                    self.nodes[i].unschedulable = true;
                    self.nodes[i].gpu_pods.clear();
                    set_state(self, node, *on_success)?;
                }
                Action::RestartDriverPod { node, .. } => {
                    let i = self.index(node);
                    let d = &mut self.nodes[i].driver;
                    d.revision_in_sync = true;
                    d.running_and_ready = false;
                    self.starting[i] = true;
                }
                Action::WarningEvent { node, message, .. } => {
                    return Err(format!("{node}: unexpected warning {message}"));
                }
            }
        }
        Ok(())
    }

    /// The cluster moves on: recreated drivers and their validators become Ready, jobs run down.
    fn tick(&mut self) {
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if std::mem::take(&mut self.starting[i]) {
                n.driver.running_and_ready = true;
                n.validator_pods = vec![false];
            } else {
                n.validator_pods = vec![n.driver.running_and_ready];
            }
            n.workload_pods = if self.job_steps[i] > 0 {
                vec![PodPhase::Running]
            } else {
                vec![PodPhase::Succeeded]
            };
            self.job_steps[i] -= 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn upgrades_stay_within_budget_and_finish(
        specs in prop::collection::vec(node_spec(), 1..9),
        (policy, deletion, validation) in policy(),
    ) {
        let m = Manager {
            keys: Keys::for_driver("gpu"),
            pod_deletion_enabled: deletion,
            validation_enabled: validation,
        };
        let mut world = World::new(&specs);
        let total = specs.len() as i64;
        let max_unavailable = policy.max_unavailable_of(total);
        let initially_unavailable = world.unavailable();
        let budget = max_unavailable.max(initially_unavailable);
        let initially_cordoned: Vec<bool> = specs.iter().map(|s| s.unschedulable).collect();
        let mut now = 1_000;
        for _ in 0..300 {
            world.tick();
            let state = ClusterUpgradeState::from_nodes(world.nodes.clone());
            let actions = apply_state(&m, &state, &policy, now);
            if let Err(e) = world.carry_out(&actions) {
                prop_assert!(false, "{}", e);
            }
            prop_assert!(
                world.unavailable() <= budget,
                "{} unavailable > budget {} (maxUnavailable {}, initially {})",
                world.unavailable(), budget, max_unavailable, initially_unavailable
            );
            now += 10;
        }
        // Liveness holds while some slot can open (fewer nodes unavailable than allowed) and no
        // node is left in upgrade-failed by a pod deletion that failed with drain off.
        let stuck = deletion
            && !policy.drain_enabled()
            && specs.iter().any(|s| s.fail_deletion && s.gpu_pods > 0);
        let failed = world
            .nodes
            .iter()
            .filter(|n| World::state_of(n) == UpgradeState::Failed)
            .count();
        if !stuck {
            prop_assert_eq!(failed, 0);
        }
        if initially_unavailable < max_unavailable && !stuck {
            for (i, n) in world.nodes.iter().enumerate() {
                prop_assert_eq!(World::state_of(n), UpgradeState::Done, "{}", n.name);
                prop_assert!(n.driver.revision_in_sync && n.driver.running_and_ready);
                prop_assert_eq!(n.unschedulable, initially_cordoned[i], "{} cordon", n.name);
                prop_assert!(n.annotations.is_empty(), "{} keeps {:?}", n.name, n.annotations);
            }
        }
    }
}
