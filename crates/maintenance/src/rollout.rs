//! One reconcile step of a staged maintenance rollout, computed afresh from the plan, the stages
//! recorded when it started and the nodes' facts (their GPU operator state labels included), so a
//! half-finished plan resumes wherever the labels say it is.
//!
//! Every kind runs the operator's per-node state machine: this module builds
//! [`crate::apply_state`]'s input so that only the active stage's nodes (and nodes already in
//! progress) look out of date, runs it, and translates its decisions: the driver-pod restart
//! becomes the kind's change, the validator is started, a failed validator fails the node (left
//! cordoned) and halts the rollout, node rotation adds a replacement before the drain and removes
//! the old node instead of uncordoning it. Nodes of later stages are left unlabelled.
//!
//! Pure: time is an input. Knows no API client; the shell carries out [`PlanAction`]s.

use crate::apply::{Action, Manager, apply_state};
use crate::keys::UpgradeState;
use crate::plan::{NodeFacts, Plan, PlanKind, VALIDATION_FAILED_CONDITION, Validator, applied};
use crate::preflight::{Stage, pool, target_mig};
use crate::state::{ClusterUpgradeState, DriverPod, NodeInput, PodRef};

/// The change the kind makes on a drained node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Driver(String),
    /// The profiles of each GPU.
    MigLayout(Vec<String>),
    Kubelet(String),
}

/// A decision for the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanAction {
    /// The operator's state machine's decision, unchanged (labels, annotations, cordon, pod
    /// deletion, drain, events). Pod deletion and drain retry evictions refused with 429.
    Upgrade(Action),
    /// Make the kind's change on the (drained) node.
    Apply { node: String, change: Change },
    /// Node rotation: add the replacement (idempotent).
    AddReplacement { node: String, replacement: String },
    /// Node rotation: delete the old, drained node.
    RemoveNode { node: String },
    /// Start the validator pod on the node (on its replacement for a rotation).
    RunValidator { node: String },
    /// The validator failed: the node keeps its cordon, gets condition
    /// [`VALIDATION_FAILED_CONDITION`] with this message, and the rollout halts.
    ValidationFailed { node: String, message: String },
}

/// Where the rollout stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Progressing {
        stage: String,
    },
    Paused,
    /// A node failed; `reason` names it.
    Halted {
        reason: String,
    },
    Succeeded,
}

impl Phase {
    /// The phase as `status.phase` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Progressing { .. } => "Progressing",
            Phase::Paused => "Paused",
            Phase::Halted { .. } => "Halted",
            Phase::Succeeded => "Succeeded",
        }
    }
}

/// A node's place in the rollout, for `status.nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeProgress {
    pub name: String,
    pub stage: String,
    /// The state label's value (`""` before the node starts, `removed` once a rotation removed it).
    pub state: String,
}

/// One step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub actions: Vec<PlanAction>,
    pub phase: Phase,
    pub nodes: Vec<NodeProgress>,
}

/// One reconcile step.
pub fn step(
    plan: &Plan,
    stages: &[Stage],
    nodes: &[NodeFacts],
    catalog: &tessera_devices::Catalog,
    now: i64,
) -> Step {
    let m = Manager::gpu_operator();
    let keys = &m.keys;
    let managed = pool(plan, nodes);
    let index: std::collections::BTreeMap<&str, &NodeFacts> =
        managed.iter().map(|n| (n.name.as_str(), *n)).collect();
    let find = |name: &str| index.get(name).copied();
    let state_of = |n: &NodeFacts| {
        UpgradeState::from_label(n.labels.get(&keys.state_label).map_or("", String::as_str))
    };
    let target = |n: &NodeFacts| target_mig(plan, catalog, n).and_then(Result::ok);
    let is_applied = |n: &NodeFacts| applied(&plan.kind, n, target(n).as_deref());
    let done = |name: &str| {
        find(name).is_none_or(|n| state_of(n) == Some(UpgradeState::Done) && is_applied(n))
    };

    let mut progress = Vec::new();
    let mut failed = None;
    for stage in stages {
        for name in &stage.nodes {
            let state = find(name).map_or("removed".to_string(), |n| {
                n.labels.get(&keys.state_label).cloned().unwrap_or_default()
            });
            if let Some(n) = find(name)
                && failed.is_none()
                && state_of(n) == Some(UpgradeState::Failed)
            {
                failed = Some(if n.validator == Validator::Failed {
                    format!("validation failed on node {name} in stage {}", stage.name)
                } else {
                    format!("node {name} in stage {} is upgrade-failed", stage.name)
                });
            }
            progress.push(NodeProgress {
                name: name.clone(),
                stage: stage.name.clone(),
                state,
            });
        }
    }
    let active = stages.iter().find(|s| s.nodes.iter().any(|n| !done(n)));
    let phase = match (&failed, active) {
        (Some(reason), _) => Phase::Halted {
            reason: reason.clone(),
        },
        (None, None) => Phase::Succeeded,
        (None, Some(_)) if plan.paused => Phase::Paused,
        (None, Some(s)) => Phase::Progressing {
            stage: s.name.clone(),
        },
    };
    let starting = |name: &str| {
        matches!(phase, Phase::Progressing { .. })
            && active.is_some_and(|s| s.nodes.iter().any(|n| n == name))
    };
    let in_progress = |s: Option<UpgradeState>| {
        !matches!(
            s,
            None | Some(UpgradeState::Unknown | UpgradeState::Done | UpgradeState::UpgradeRequired)
        )
    };

    let mut inputs: Vec<NodeInput> = managed
        .iter()
        .map(|n| {
            let state = state_of(n);
            let participating = starting(&n.name) || in_progress(state);
            NodeInput {
                name: n.name.clone(),
                state_label: n.labels.get(&keys.state_label).cloned(),
                unschedulable: n.unschedulable,
                ready: n.ready,
                skip: false,
                annotations: n.annotations.clone(),
                driver: DriverPod {
                    pod: PodRef {
                        namespace: String::new(),
                        name: n.name.clone(),
                    },
                    orphaned: false,
                    revision_in_sync: !participating || is_applied(n),
                    running_and_ready: state != Some(UpgradeState::Failed),
                    failing: false,
                    terminating: false,
                },
                workload_pods: n.workload_pods.clone(),
                gpu_pods: n.pods.clone(),
                validator_pods: match n.validator {
                    Validator::Absent => Vec::new(),
                    Validator::Running | Validator::Failed => vec![false],
                    Validator::Succeeded => vec![true],
                },
            }
        })
        .collect();
    // A node a rotation removed still counts in the pool (its replacement stands in for it), so
    // `maxUnavailable` keeps scaling against the pool the plan started with.
    for name in stages.iter().flat_map(|s| &s.nodes) {
        if find(name).is_none() {
            inputs.push(removed_stand_in(name));
        }
    }
    let cluster = ClusterUpgradeState::from_nodes(inputs);
    let decisions = apply_state(&m, &cluster, &plan.policy, now);

    let rotation = plan.kind == PlanKind::NodeRotation;
    let mut actions = Vec::new();
    for a in decisions {
        let node = action_node(&a);
        let Some(n) = find(node) else { continue };
        let state = state_of(n);
        match &a {
            // Untouched nodes of later stages keep no label.
            Action::SetState {
                state: UpgradeState::Done,
                ..
            } if state == Some(UpgradeState::Unknown) && !starting(node) => continue,
            // A halted or paused rollout starts no new node.
            Action::SetState {
                state: UpgradeState::CordonRequired,
                ..
            } if state == Some(UpgradeState::UpgradeRequired) && !starting(node) => continue,
            // A failed validator overrides the operator's wait-for-timeout.
            _ if state == Some(UpgradeState::ValidationRequired)
                && n.validator == Validator::Failed =>
            {
                continue;
            }
            // A rotation's old node is removed, not reopened.
            Action::Uncordon { .. } if rotation => continue,
            Action::RestartDriverPod { .. } => {
                actions.push(change_action(plan, n, target(n)));
                continue;
            }
            _ => {}
        }
        actions.push(PlanAction::Upgrade(a));
    }

    for n in &managed {
        let state = state_of(n);
        match state {
            Some(UpgradeState::ValidationRequired) => match n.validator {
                Validator::Absent => actions.push(PlanAction::RunValidator {
                    node: n.name.clone(),
                }),
                Validator::Failed => {
                    actions.push(PlanAction::Upgrade(Action::SetState {
                        node: n.name.clone(),
                        state: UpgradeState::Failed,
                    }));
                    actions.push(PlanAction::ValidationFailed {
                        node: n.name.clone(),
                        message: format!(
                            "{VALIDATION_FAILED_CONDITION}: the validator failed after the {} of plan {}; the node stays cordoned",
                            plan.kind.name(),
                            plan.name
                        ),
                    });
                }
                Validator::Running | Validator::Succeeded => {}
            },
            Some(
                UpgradeState::CordonRequired
                | UpgradeState::WaitForJobsRequired
                | UpgradeState::PodDeletionRequired
                | UpgradeState::DrainRequired,
            ) if rotation && !n.replacement_ready => {
                actions.push(change_action(plan, n, None));
            }
            Some(UpgradeState::Done) if rotation && is_applied(n) => {
                actions.push(PlanAction::RemoveNode {
                    node: n.name.clone(),
                });
            }
            _ => {}
        }
    }

    // A node this step removes is reported removed (a finished plan is not stepped again).
    for action in &actions {
        if let PlanAction::RemoveNode { node } = action
            && let Some(p) = progress.iter_mut().find(|p| &p.name == node)
        {
            p.state = "removed".to_string();
        }
    }
    Step {
        actions,
        phase,
        nodes: progress,
    }
}

/// The kind's change for node `n`.
fn change_action(plan: &Plan, n: &NodeFacts, mig: Option<Vec<String>>) -> PlanAction {
    let node = n.name.clone();
    let change = match &plan.kind {
        PlanKind::DriverUpgrade { version, .. } => Change::Driver(version.clone()),
        PlanKind::KubernetesVersion { version } => Change::Kubelet(version.clone()),
        PlanKind::MigRepartition { .. } => Change::MigLayout(mig.unwrap_or_default()),
        PlanKind::NodeRotation => {
            return PlanAction::AddReplacement {
                replacement: crate::plan::replacement_name(&node),
                node,
            };
        }
    };
    PlanAction::Apply { node, change }
}

/// A removed node as the state machine sees it: done, available, nothing to do.
fn removed_stand_in(name: &str) -> NodeInput {
    NodeInput {
        name: name.to_string(),
        state_label: Some(UpgradeState::Done.label().to_string()),
        unschedulable: false,
        ready: true,
        skip: false,
        annotations: Default::default(),
        driver: DriverPod::in_sync_and_ready(PodRef {
            namespace: String::new(),
            name: name.to_string(),
        }),
        workload_pods: Vec::new(),
        gpu_pods: Vec::new(),
        validator_pods: Vec::new(),
    }
}

fn action_node(a: &Action) -> &str {
    match a {
        Action::SetState { node, .. }
        | Action::SetAnnotation { node, .. }
        | Action::RemoveAnnotation { node, .. }
        | Action::Cordon { node }
        | Action::Uncordon { node }
        | Action::DeletePods { node, .. }
        | Action::Drain { node, .. }
        | Action::RestartDriverPod { node, .. }
        | Action::WarningEvent { node, .. } => node,
    }
}
