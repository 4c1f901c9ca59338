//! The driver-upgrade states and the node label/annotation keys, spelled exactly as
//! k8s-operator-libs `pkg/upgrade/consts.go` spells them for a driver name (`gpu` for the GPU
//! operator's `nvidia.com/gpu-driver-upgrade-state`). Knows only strings: no node, no policy.

use std::fmt;

/// The value every boolean-style label/annotation carries upstream (`trueString`).
pub const TRUE: &str = "true";

/// Event reason upstream records on nodes (`GetEventReason()` for the GPU driver).
pub const EVENT_REASON: &str = "GPUDriverUpgrade";

/// A node's driver-upgrade state, the value of `nvidia.com/<driver>-driver-upgrade-state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UpgradeState {
    /// No label (upstream `UpgradeStateUnknown = ""`).
    Unknown,
    UpgradeRequired,
    CordonRequired,
    WaitForJobsRequired,
    PodDeletionRequired,
    DrainRequired,
    /// Requestor (maintenance-operator) mode only.
    NodeMaintenanceRequired,
    /// Requestor (maintenance-operator) mode only.
    PostMaintenanceRequired,
    PodRestartRequired,
    ValidationRequired,
    UncordonRequired,
    Done,
    Failed,
}

impl UpgradeState {
    /// Every state, in upstream's declaration order.
    pub const ALL: [UpgradeState; 13] = [
        UpgradeState::Unknown,
        UpgradeState::UpgradeRequired,
        UpgradeState::CordonRequired,
        UpgradeState::WaitForJobsRequired,
        UpgradeState::PodDeletionRequired,
        UpgradeState::DrainRequired,
        UpgradeState::NodeMaintenanceRequired,
        UpgradeState::PostMaintenanceRequired,
        UpgradeState::PodRestartRequired,
        UpgradeState::ValidationRequired,
        UpgradeState::UncordonRequired,
        UpgradeState::Done,
        UpgradeState::Failed,
    ];

    /// The label value (`""` for [`UpgradeState::Unknown`]).
    pub fn label(self) -> &'static str {
        match self {
            UpgradeState::Unknown => "",
            UpgradeState::UpgradeRequired => "upgrade-required",
            UpgradeState::CordonRequired => "cordon-required",
            UpgradeState::WaitForJobsRequired => "wait-for-jobs-required",
            UpgradeState::PodDeletionRequired => "pod-deletion-required",
            UpgradeState::DrainRequired => "drain-required",
            UpgradeState::NodeMaintenanceRequired => "node-maintenance-required",
            UpgradeState::PostMaintenanceRequired => "post-maintenance-required",
            UpgradeState::PodRestartRequired => "pod-restart-required",
            UpgradeState::ValidationRequired => "validation-required",
            UpgradeState::UncordonRequired => "uncordon-required",
            UpgradeState::Done => "upgrade-done",
            UpgradeState::Failed => "upgrade-failed",
        }
    }

    /// Parses a label value; `None` for a value upstream does not know (such a node sits in a
    /// bucket no step processes).
    pub fn from_label(value: &str) -> Option<UpgradeState> {
        UpgradeState::ALL.into_iter().find(|s| s.label() == value)
    }
}

impl fmt::Display for UpgradeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The label and annotation keys for one driver name (`consts.go`'s `...KeyFmt` with `%s`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// `nvidia.com/<driver>-driver-upgrade-state`
    pub state_label: String,
    /// `nvidia.com/<driver>-driver-upgrade.skip`
    pub skip_label: String,
    /// `nvidia.com/<driver>-driver-upgrade-drain.skip` (pods carrying it are not drained)
    pub skip_drain_label: String,
    /// `nvidia.com/<driver>-driver-upgrade.driver-wait-for-safe-load`
    pub wait_for_safe_load_annotation: String,
    /// `nvidia.com/<driver>-driver-upgrade.node-initial-state.unschedulable`
    pub initial_state_annotation: String,
    /// `nvidia.com/<driver>-driver-upgrade-wait-for-pod-completion-start-time`
    pub wait_for_pod_completion_start_time_annotation: String,
    /// `nvidia.com/<driver>-driver-upgrade-validation-start-time`
    pub validation_start_time_annotation: String,
    /// `nvidia.com/<driver>-driver-upgrade-requested`
    pub upgrade_requested_annotation: String,
    /// `nvidia.com/<driver>-driver-upgrade-requestor-mode`
    pub requestor_mode_annotation: String,
}

impl Keys {
    /// The keys for `driver` (`"gpu"` for the GPU operator).
    pub fn for_driver(driver: &str) -> Keys {
        let p = format!("nvidia.com/{driver}-driver-upgrade");
        Keys {
            state_label: format!("{p}-state"),
            skip_label: format!("{p}.skip"),
            skip_drain_label: format!("{p}-drain.skip"),
            wait_for_safe_load_annotation: format!("{p}.driver-wait-for-safe-load"),
            initial_state_annotation: format!("{p}.node-initial-state.unschedulable"),
            wait_for_pod_completion_start_time_annotation: format!(
                "{p}-wait-for-pod-completion-start-time"
            ),
            validation_start_time_annotation: format!("{p}-validation-start-time"),
            upgrade_requested_annotation: format!("{p}-requested"),
            requestor_mode_annotation: format!("{p}-requestor-mode"),
        }
    }
}

impl Keys {
    /// `GetUpgradeSkipDrainDriverPodSelector`: `nvidia.com/<driver>-driver-upgrade-drain.skip!=true`.
    pub fn skip_drain_pod_selector(&self) -> String {
        format!("{}!={TRUE}", self.skip_drain_label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_keys_match_upstream() {
        let k = Keys::for_driver("gpu");
        let table = [
            (&k.state_label, "nvidia.com/gpu-driver-upgrade-state"),
            (&k.skip_label, "nvidia.com/gpu-driver-upgrade.skip"),
            (
                &k.skip_drain_label,
                "nvidia.com/gpu-driver-upgrade-drain.skip",
            ),
            (
                &k.wait_for_safe_load_annotation,
                "nvidia.com/gpu-driver-upgrade.driver-wait-for-safe-load",
            ),
            (
                &k.initial_state_annotation,
                "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable",
            ),
            (
                &k.wait_for_pod_completion_start_time_annotation,
                "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time",
            ),
            (
                &k.validation_start_time_annotation,
                "nvidia.com/gpu-driver-upgrade-validation-start-time",
            ),
            (
                &k.upgrade_requested_annotation,
                "nvidia.com/gpu-driver-upgrade-requested",
            ),
            (
                &k.requestor_mode_annotation,
                "nvidia.com/gpu-driver-upgrade-requestor-mode",
            ),
        ];
        for (got, want) in table {
            assert_eq!(got, want);
        }
        assert_eq!(
            k.skip_drain_pod_selector(),
            "nvidia.com/gpu-driver-upgrade-drain.skip!=true"
        );
    }

    #[test]
    fn state_labels_round_trip() {
        let table = [
            (UpgradeState::Unknown, ""),
            (UpgradeState::UpgradeRequired, "upgrade-required"),
            (UpgradeState::CordonRequired, "cordon-required"),
            (UpgradeState::WaitForJobsRequired, "wait-for-jobs-required"),
            (UpgradeState::PodDeletionRequired, "pod-deletion-required"),
            (UpgradeState::DrainRequired, "drain-required"),
            (
                UpgradeState::NodeMaintenanceRequired,
                "node-maintenance-required",
            ),
            (
                UpgradeState::PostMaintenanceRequired,
                "post-maintenance-required",
            ),
            (UpgradeState::PodRestartRequired, "pod-restart-required"),
            (UpgradeState::ValidationRequired, "validation-required"),
            (UpgradeState::UncordonRequired, "uncordon-required"),
            (UpgradeState::Done, "upgrade-done"),
            (UpgradeState::Failed, "upgrade-failed"),
        ];
        for (state, label) in table {
            assert_eq!(state.label(), label);
            assert_eq!(UpgradeState::from_label(label), Some(state));
        }
        assert_eq!(UpgradeState::from_label("upgrade-finished"), None);
    }
}
