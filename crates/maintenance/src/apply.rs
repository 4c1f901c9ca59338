//! One pure reconcile step of the driver-upgrade controller: upstream's
//! `ClusterUpgradeStateManager.ApplyState` (in-place mode) turned into a list of decisions.
//! Each node is handled once, by the step for the bucket it was in when the state was built, in
//! upstream's order: done/unknown → upgrade-required → cordon → wait-for-jobs → pod-deletion →
//! drain → pod-restart → failed → validation → uncordon. Never performs anything: the shell
//! patches labels/annotations, cordons, evicts, drains and records events, and — for the
//! asynchronous pod deletion and drain — sets the outcome state the action names. Time (`now`,
//! Unix seconds) is an input. Requestor (maintenance-operator) mode is not modelled beyond
//! leaving requestor-mode nodes to their requestor at uncordon.

use crate::keys::{EVENT_REASON, Keys, TRUE, UpgradeState};
use crate::policy::UpgradePolicy;
use crate::state::{ClusterUpgradeState, NodeInput, NodeUpgradeState, PodOwner, PodPhase, PodRef};

/// Upstream's fixed validation timeout (`validationTimeoutSeconds`).
pub const VALIDATION_TIMEOUT_SECONDS: i64 = 600;

/// The controller's fixed configuration (`WithPodDeletionEnabled`, `WithValidationEnabled`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    pub keys: Keys,
    /// A pod-deletion filter was given (the GPU operator always gives one).
    pub pod_deletion_enabled: bool,
    /// A validator pod selector was given (the GPU operator's `app=nvidia-operator-validator`).
    pub validation_enabled: bool,
}

impl Manager {
    /// The GPU operator's configuration for driver `gpu`: pod deletion and validation enabled.
    pub fn gpu_operator() -> Manager {
        Manager {
            keys: Keys::for_driver("gpu"),
            pod_deletion_enabled: true,
            validation_enabled: true,
        }
    }
}

/// A decision for the shell to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Patch the node's state label (`Successfully updated node state label to [<state>]`).
    SetState {
        node: String,
        state: UpgradeState,
    },
    SetAnnotation {
        node: String,
        key: String,
        value: String,
    },
    /// Upstream's patch to `"null"`.
    RemoveAnnotation {
        node: String,
        key: String,
    },
    Cordon {
        node: String,
    },
    Uncordon {
        node: String,
    },
    /// Evict/delete these pods (kubectl drain helper semantics, DaemonSet pods ignored); then
    /// set the node to `on_success`, or to `on_failure` if any deletion fails.
    DeletePods {
        node: String,
        pods: Vec<PodRef>,
        force: bool,
        delete_empty_dir: bool,
        timeout_seconds: i64,
        on_success: UpgradeState,
        on_failure: UpgradeState,
    },
    /// Cordon and drain the node (kubectl's drain helper: DaemonSet pods ignored, pods matching
    /// `pod_selector` — operators pass [`Keys::skip_drain_pod_selector`] to spare their own
    /// pods); then `on_success`, or `on_failure` on any error.
    Drain {
        node: String,
        pod_selector: String,
        force: bool,
        delete_empty_dir: bool,
        timeout_seconds: i64,
        on_success: UpgradeState,
        on_failure: UpgradeState,
    },
    /// Delete the driver pod so its DaemonSet recreates it at the new revision.
    RestartDriverPod {
        node: String,
        pod: PodRef,
    },
    /// A Warning event on the node, reason `GPUDriverUpgrade`.
    WarningEvent {
        node: String,
        reason: String,
        message: String,
    },
}

struct Step<'a> {
    m: &'a Manager,
    actions: Vec<Action>,
}

impl Step<'_> {
    fn set_state(&mut self, n: &NodeInput, state: UpgradeState) {
        self.actions.push(Action::SetState {
            node: n.name.clone(),
            state,
        });
    }

    fn set_annotation(&mut self, n: &NodeInput, key: &str, value: String) {
        self.actions.push(Action::SetAnnotation {
            node: n.name.clone(),
            key: key.to_string(),
            value,
        });
    }

    /// Removes `key` if the node carries it (upstream patches unconditionally; a no-op patch
    /// is not a decision worth emitting).
    fn remove_annotation(&mut self, n: &NodeInput, key: &str) {
        if n.annotations.contains_key(key) {
            self.actions.push(Action::RemoveAnnotation {
                node: n.name.clone(),
                key: key.to_string(),
            });
        }
    }

    fn warn(&mut self, n: &NodeInput, message: String) {
        self.actions.push(Action::WarningEvent {
            node: n.name.clone(),
            reason: EVENT_REASON.to_string(),
            message,
        });
    }

    /// `SafeDriverLoadManager.UnblockLoading`.
    fn unblock_loading(&mut self, n: &NodeInput) {
        if n.waiting_for_safe_load(&self.m.keys) {
            let key = self.m.keys.wait_for_safe_load_annotation.clone();
            self.remove_annotation(n, &key);
        }
    }

    /// A start-time annotation timeout (`HandleTimeoutOnPodCompletions` / validation's
    /// `handleTimeout`): `Some(true)` once `now > start + timeout`, having emitted the start
    /// annotation on first sight; `None` (with a warning) when the annotation is unparsable.
    fn timed_out(
        &mut self,
        n: &NodeInput,
        key: &str,
        timeout: i64,
        now: i64,
        what: &str,
    ) -> Option<bool> {
        match n.annotation(key) {
            None => {
                self.set_annotation(n, key, now.to_string());
                Some(false)
            }
            Some(v) => match v.parse::<i64>() {
                Ok(start) => Some(now > start.saturating_add(timeout)),
                Err(_) => {
                    self.warn(
                        n,
                        format!("Failed to handle timeout for {what}, annotation {key}={v:?} is not a Unix time"),
                    );
                    None
                }
            },
        }
    }

    /// `updateNodeToUncordonOrDoneState`.
    fn uncordon_or_done(&mut self, n: &NodeInput) {
        let key = self.m.keys.initial_state_annotation.clone();
        let requestor = n.in_requestor_mode(&self.m.keys);
        let was_unschedulable = n.annotations.contains_key(&key);
        let next = if was_unschedulable && !requestor {
            UpgradeState::Done
        } else {
            UpgradeState::UncordonRequired
        };
        self.set_state(n, next);
        if next == UpgradeState::Done || requestor {
            self.remove_annotation(n, &key);
        }
    }
}

/// One reconcile step (upstream `ApplyState`): the decisions for every node, in upstream's
/// order. Nothing when `autoUpgrade` is off.
pub fn apply_state(
    m: &Manager,
    state: &ClusterUpgradeState,
    policy: &UpgradePolicy,
    now: i64,
) -> Vec<Action> {
    let mut s = Step {
        m,
        actions: Vec::new(),
    };
    if !policy.auto_upgrade {
        return s.actions;
    }
    let keys = &m.keys;
    let bucket = |st: UpgradeState| state.in_state(st).map(|n: &NodeUpgradeState| &n.input);

    // Done / unknown.
    for st in [UpgradeState::Unknown, UpgradeState::Done] {
        for n in bucket(st) {
            let d = &n.driver;
            if (!d.revision_in_sync && !d.orphaned)
                || n.waiting_for_safe_load(keys)
                || n.upgrade_requested(keys)
            {
                if n.unschedulable {
                    s.set_annotation(n, &keys.initial_state_annotation, TRUE.to_string());
                }
                s.set_state(n, UpgradeState::UpgradeRequired);
            } else if st == UpgradeState::Unknown {
                s.set_state(n, UpgradeState::Done);
            }
        }
    }

    // Upgrade required (in-place `ProcessUpgradeRequiredNodes`).
    let total = state.total_managed_nodes();
    let max_unavailable = policy.max_unavailable_of(total);
    let mut available = state.upgrades_available(policy.max_parallel_upgrades, max_unavailable);
    for n in bucket(UpgradeState::UpgradeRequired) {
        if n.upgrade_requested(keys) {
            s.remove_annotation(n, &keys.upgrade_requested_annotation);
        }
        if n.skip {
            continue;
        }
        // A node cordoned already needs no slot.
        if available <= 0 && !n.unschedulable {
            continue;
        }
        s.set_state(n, UpgradeState::CordonRequired);
        available -= 1;
    }

    // Cordon required (upstream's cordon of a cordoned node is a no-op; no action for it).
    for n in bucket(UpgradeState::CordonRequired) {
        if !n.unschedulable {
            s.actions.push(Action::Cordon {
                node: n.name.clone(),
            });
        }
        s.set_state(n, UpgradeState::WaitForJobsRequired);
    }

    // Wait for jobs.
    let wait = policy
        .wait_for_completion
        .as_ref()
        .filter(|w| !w.pod_selector.is_empty());
    for n in bucket(UpgradeState::WaitForJobsRequired) {
        let Some(w) = wait else {
            let next = if m.pod_deletion_enabled {
                UpgradeState::PodDeletionRequired
            } else {
                UpgradeState::DrainRequired
            };
            s.set_state(n, next);
            continue;
        };
        let key = &keys.wait_for_pod_completion_start_time_annotation;
        let running = n
            .workload_pods
            .iter()
            .any(|p| matches!(p, PodPhase::Running | PodPhase::Pending));
        if !running {
            s.remove_annotation(n, key);
            s.set_state(n, UpgradeState::PodDeletionRequired);
        } else if w.timeout_seconds != 0
            && s.timed_out(n, key, w.timeout_seconds, now, "job completions") == Some(true)
        {
            s.set_state(n, UpgradeState::PodDeletionRequired);
            s.remove_annotation(n, key);
        }
    }

    // Pod deletion.
    let drain_enabled = policy.drain_enabled();
    for n in bucket(UpgradeState::PodDeletionRequired) {
        if !m.pod_deletion_enabled {
            s.set_state(n, UpgradeState::DrainRequired);
            continue;
        }
        let Some(spec) = &policy.pod_deletion else {
            s.warn(n, "pod deletion spec should not be empty".to_string());
            continue;
        };
        let on_failure = if drain_enabled {
            UpgradeState::DrainRequired
        } else {
            UpgradeState::Failed
        };
        if n.gpu_pods.is_empty() {
            s.set_state(n, UpgradeState::PodRestartRequired);
            continue;
        }
        // kubectl's drain filters: DaemonSet and mirror pods are skipped, unmanaged pods need
        // force, emptyDir needs deleteEmptyDir (finished pods are always deletable).
        let deletable = |p: &crate::state::GpuPod| {
            p.owner != PodOwner::DaemonSet
                && !p.mirror
                && (p.finished
                    || ((p.owner != PodOwner::None || spec.force)
                        && (!p.empty_dir || spec.delete_empty_dir)))
        };
        if !n.gpu_pods.iter().all(deletable) {
            s.set_state(n, on_failure);
            continue;
        }
        s.actions.push(Action::DeletePods {
            node: n.name.clone(),
            pods: n.gpu_pods.iter().map(|p| p.pod.clone()).collect(),
            force: spec.force,
            delete_empty_dir: spec.delete_empty_dir,
            timeout_seconds: spec.timeout_seconds,
            on_success: UpgradeState::PodRestartRequired,
            on_failure,
        });
    }

    // Drain.
    for n in bucket(UpgradeState::DrainRequired) {
        match policy.drain.as_ref().filter(|d| d.enable) {
            None => s.set_state(n, UpgradeState::PodRestartRequired),
            Some(d) => s.actions.push(Action::Drain {
                node: n.name.clone(),
                pod_selector: d.pod_selector.clone(),
                force: d.force,
                delete_empty_dir: d.delete_empty_dir,
                timeout_seconds: d.timeout_seconds,
                on_success: UpgradeState::PodRestartRequired,
                on_failure: UpgradeState::Failed,
            }),
        }
    }

    // Pod restart (upstream deletes the collected driver pods after the loop).
    let mut restarts = Vec::new();
    for n in bucket(UpgradeState::PodRestartRequired) {
        let d = &n.driver;
        if !d.revision_in_sync || d.orphaned {
            if !d.terminating {
                restarts.push(Action::RestartDriverPod {
                    node: n.name.clone(),
                    pod: d.pod.clone(),
                });
            }
            continue;
        }
        s.unblock_loading(n);
        if n.driver_in_sync_and_ready() {
            if m.validation_enabled {
                s.set_state(n, UpgradeState::ValidationRequired);
            } else {
                s.uncordon_or_done(n);
            }
        } else if d.failing {
            s.set_state(n, UpgradeState::Failed);
        }
    }

    s.actions.append(&mut restarts);

    // Failed: recover once the driver is in sync and Ready.
    for n in bucket(UpgradeState::Failed) {
        if !n.driver_in_sync_and_ready() {
            continue;
        }
        let key = &keys.initial_state_annotation;
        if n.annotations.contains_key(key) {
            s.set_state(n, UpgradeState::Done);
            s.remove_annotation(n, key);
        } else {
            s.set_state(n, UpgradeState::UncordonRequired);
        }
    }

    // Validation. With one validator pod per node (the operator's DaemonSet) this is upstream's
    // `Validate`; with several, upstream's per-pod loop can restart the timer, here any
    // not-Ready pod keeps the node waiting under one timer.
    for n in bucket(UpgradeState::ValidationRequired) {
        s.unblock_loading(n);
        if !m.validation_enabled {
            // Upstream's Validate with an empty selector reports done.
            s.uncordon_or_done(n);
            continue;
        }
        if n.validator_pods.is_empty() {
            continue;
        }
        let key = &keys.validation_start_time_annotation;
        if n.validator_pods.iter().all(|ready| *ready) {
            s.remove_annotation(n, key);
            s.uncordon_or_done(n);
        } else if s.timed_out(n, key, VALIDATION_TIMEOUT_SECONDS, now, "validation state")
            == Some(true)
        {
            s.set_state(n, UpgradeState::Failed);
            s.remove_annotation(n, key);
        }
    }

    // Uncordon (requestor-mode nodes are left to the requestor).
    for n in bucket(UpgradeState::UncordonRequired) {
        if n.in_requestor_mode(keys) {
            continue;
        }
        s.actions.push(Action::Uncordon {
            node: n.name.clone(),
        });
        s.set_state(n, UpgradeState::Done);
    }

    s.actions
}
